"""Typed per-field uncertainty flags (geo_gym.cli.add_uncertainty_flags): generated from the
UncertaintyConfig dataclass, merged over the preset, a bad value answered in one line."""

from __future__ import annotations

import argparse
import dataclasses
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from geo_gym import cli
from geo_gym.env import as_uncertainty
from geo_gym.uncertainty.config import UncertaintyConfig

SCRIPTS = Path(__file__).resolve().parents[1] / "scripts"


def parse(*argv: str, default: str = "realistic"):
    parser = argparse.ArgumentParser()
    cli.add_uncertainty_flags(parser, default)
    return cli.uncertainty_setting(parser.parse_args(argv))


def test_every_field_has_a_typed_flag() -> None:
    parser = argparse.ArgumentParser()
    cli.add_uncertainty_flags(parser, "perfect")
    flags = {opt for action in parser._actions for opt in action.option_strings}
    assert {f"--uncertainty.{f.name}" for f in dataclasses.fields(UncertaintyConfig)} <= flags


def test_typed_flags_override_the_preset() -> None:
    assert parse() == "realistic"  # no per-field flag: the preset's name, as before
    setting = parse("--uncertainty.failure_rate_per_gpu_hour", "0.01", "--uncertainty.handler", "true",
                    "--uncertainty.max_attempts", "3", "--uncertainty.predictor_kwargs", '{"sigma": 2}',
                    "--uncertainty.predictor", "noisy")
    assert setting == {"preset": "realistic", "failure_rate_per_gpu_hour": 0.01, "handler": True, "max_attempts": 3,
                       "predictor_kwargs": {"sigma": 2}, "predictor": "noisy"}
    config = as_uncertainty(setting)
    assert config == UncertaintyConfig.preset("realistic", failure_rate_per_gpu_hour=0.01, handler=True,
                                              max_attempts=3, predictor="noisy", predictor_kwargs={"sigma": 2})
    # over a JSON setting, the typed flag wins
    json_setting = parse("--uncertainty", '{"preset": "schedmate", "early_end_rate": 0.1}',
                         "--uncertainty.early_end_rate", "0.2")
    assert json_setting == {"preset": "schedmate", "early_end_rate": 0.2}


@pytest.mark.parametrize(("argv", "says"), [
    (["--uncertainty.failure_rate_per_gpu_hour", "-1"], "--uncertainty.failure_rate_per_gpu_hour: must be a finite number >= 0"),
    (["--uncertainty.early_end_rate", "1.5"], "--uncertainty.early_end_rate: must be in [0, 1]"),
    (["--uncertainty.predictor", "psychic"], "--uncertainty.predictor: must be one of"),
    (["--uncertainty", "realsitic"], "--uncertainty: unknown uncertainty preset 'realsitic'"),
    (["--uncertainty", '{"failure_rate": 1}'], "--uncertainty: UncertaintyConfig has no field 'failure_rate'"),
])
def test_a_bad_value_names_its_flag(argv: list[str], says: str) -> None:
    with pytest.raises(ValueError) as err:
        parse(*argv)
    assert str(err.value).startswith(says) and "\n" not in str(err.value)


@pytest.mark.parametrize(("script", "argv", "says"), [
    ("train_ppo.py", ["--uncertainty.failure_rate_per_gpu_hour", "-1"],
     "--uncertainty.failure_rate_per_gpu_hour: must be a finite number >= 0, got -1.0"),
    ("train_ppo.py", ["--uncertainty.max_attempts", "two"], "argument --uncertainty.max_attempts: invalid int value: 'two'"),
    ("train_ppo.py", ["--uncertainty.handler", "maybe"], "argument --uncertainty.handler: must be true or false, got maybe"),
    ("evaluate.py", ["--uncertainty.tracker_rmsre", "nan"], "--uncertainty.tracker_rmsre: must be a finite number >= 0"),
    ("evaluate.py", ["--uncertainty.predictor_kwargs", "[1]"],
     "argument --uncertainty.predictor_kwargs: must be a JSON object, got [1]"),
])
def test_scripts_answer_a_bad_typed_flag_in_one_line(script: str, argv: list[str], says: str) -> None:
    out = subprocess.run([sys.executable, str(SCRIPTS / script), *argv], capture_output=True, text=True, timeout=300)
    assert out.returncode == 2 and "Traceback" not in out.stderr
    errors = [line for line in out.stderr.splitlines() if "error:" in line]
    assert len(errors) == 1 and says in errors[0], out.stderr


def test_a_typed_flag_changes_the_evaluated_world(tmp_path: Path) -> None:
    def failures(rate: str) -> float:
        out = subprocess.run(
            [sys.executable, str(SCRIPTS / "evaluate.py"), "--policies", "lcf", "--scenario", "paper-fig1", "--seeds", "2",
             "--uncertainty", "realistic", "--uncertainty.failure_rate_per_gpu_hour", rate, "--out", str(tmp_path / rate)],
            capture_output=True, text=True, timeout=600)
        assert out.returncode == 0, out.stderr[-3000:]
        return float(pd.read_csv(tmp_path / rate / "table.csv", index_col=0).loc["lcf", "failures"])

    assert failures("0") == 0 and failures("0.05") > 0
