"""Training on a trace (scripts/train_ppo.py --trace): the windows and their uses
(traces/windows.py), scenario pools in the env, evaluation over one scenario per seed."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import baselines
from agents.evaluation import evaluate
from geo_gym.env import GeoPipeEnv
from geo_gym.scenarios import make_scenario
from traces.readers import read_trace
from traces.windows import split_windows

ROOT = Path(__file__).resolve().parents[1]
SAMPLE = ROOT / "traces" / "data" / "synthetic_philly_job_log.json"  # 1,000 jobs over 1.26 days


@pytest.fixture(scope="module")
def table():
    return read_trace(SAMPLE, "philly_job_log")


def test_held_out_windows_come_after_every_training_window_and_alternate(table) -> None:
    split = split_windows(table, 0.1, 0.7, max_jobs=40)
    starts = split.starts_days
    assert starts["train"] and starts["validation"] and starts["test"]
    # training windows end within the first 70% of the span; held-out ones start after them
    assert max(starts["train"]) + 0.1 <= 0.7 * split.span_days + 1e-9
    assert min(starts["validation"] + starts["test"]) >= max(starts["train"]) + 0.1 - 1e-9
    later = sorted(starts["validation"] + starts["test"])
    assert starts["validation"] == later[0::2] and starts["test"] == later[1::2]
    # every window is mapped on its own, cut to its first max_jobs jobs
    assert all(len(s.jobs) <= 40 for s in split.train + split.validation + split.test)
    windows = len(starts["train"]) + len(later) + split.empty
    assert windows == int(np.floor(split.span_days / 0.1)) + 1


@pytest.mark.parametrize(("kwargs", "says"), [
    ({"window_days": 0.0, "train_fraction": 0.7}, "window_days must be > 0"),
    ({"window_days": 0.1, "train_fraction": 1.0}, "train_fraction must be in (0, 1)"),
    ({"window_days": 2.0, "train_fraction": 0.5}, "no train window with a job"),
])
def test_bad_splits_are_errors_naming_the_option(table, kwargs, says) -> None:
    with pytest.raises(ValueError, match=says.replace("(", r"\(").replace(")", r"\)")):
        split_windows(table, **kwargs)


def test_a_pool_of_scenarios_gives_episodes_from_each() -> None:
    pool = [make_scenario("paper-default", seed) for seed in range(3)]
    env = GeoPipeEnv(pool)
    seen = set()
    for seed in range(12):
        env.reset(seed=seed)
        seen.add(next(i for i, s in enumerate(pool) if s is env.current_scenario))
    assert seen == {0, 1, 2}
    other = make_scenario("random", 0, num_regions=4)
    with pytest.raises(ValueError, match="scenario pool entry 1 has 4 regions"):
        GeoPipeEnv([pool[0], other])


def test_evaluate_takes_one_scenario_per_seed() -> None:
    pool = [make_scenario("paper-default", seed) for seed in (5, 6)]
    rows = evaluate({"bace_pipe": baselines.make("bace_pipe")}, pool, [10, 11])
    alone = evaluate({"bace_pipe": baselines.make("bace_pipe")}, pool[1], [11])
    assert rows.iloc[1].avg_jct_h == alone.iloc[0].avg_jct_h
    with pytest.raises(ValueError, match="2 scenarios for 3 seeds"):
        evaluate({"bace_pipe": baselines.make("bace_pipe")}, pool, [1, 2, 3])


def run(tmp_path: Path, *args: str) -> subprocess.CompletedProcess:
    cmd = [sys.executable, str(ROOT / "scripts" / "train_ppo.py"), "--name", "trace", "--timesteps", "256",
           "--num-envs", "2", "--n-steps", "128", "--eval-seeds", "1", "--final-seeds", "2", "--no-progress",
           "--trace", str(SAMPLE), "--window-days", "0.1", "--max-jobs", "30", *args]
    return subprocess.run(cmd, cwd=tmp_path, capture_output=True, text=True, timeout=900)


def test_train_ppo_on_a_trace_tests_on_later_windows(tmp_path: Path) -> None:
    out = run(tmp_path)
    assert out.returncode == 0, out.stderr[-3000:]
    assert "train (days 0-" in out.stdout and "held-out test windows starting on days" in out.stdout
    protocol = json.loads((tmp_path / "runs" / "trace" / "protocol.json").read_text())
    train, test = protocol["train_window_start_days"], protocol["test_window_start_days"]
    validation = protocol["validation_window_start_days"]
    assert f"placement rule on the {len(validation)} validation windows, " in out.stdout
    assert "on the test windows: " in out.stdout and "validation seeds" not in out.stdout
    assert len(test) == 2 and min(test) >= max(train) + 0.1 - 1e-9
    settings = json.loads((tmp_path / "runs" / "trace" / "settings.json").read_text())
    assert settings["start_rule"] == "request" and settings["warmup_workloads"] == 0


@pytest.mark.parametrize(("args", "says"), [
    (["--warmup-workloads", "2"], "--warmup-workloads with --trace"),
    (["--trace", "nowhere.csv"], "--trace nowhere.csv: does not exist"),
])
def test_bad_trace_runs_are_one_line_errors(tmp_path: Path, args, says) -> None:
    out = run(tmp_path, *args)
    assert out.returncode != 0 and says in out.stderr and "Traceback" not in out.stderr


def test_a_scenario_mixture_draws_every_combination_of_its_grid() -> None:
    from geo_gym.scenarios import scenario_mixture

    make = scenario_mixture("recurring", {"mean_interarrival": [900.0, 3600.0], "population_seed": [1, 2]}, num_jobs=30)
    spans = {}
    for seed in range(40):
        jobs = make(seed).jobs
        combo = seed % 4
        spans.setdefault(combo, []).append(float(jobs.submit[-1]) / 29)  # mean gap between arrivals
    assert sorted(spans) == [0, 1, 2, 3]
    # combinations 0, 1 arrive every 900 s on average, 2, 3 every 3,600 s (itertools.product order)
    assert np.mean(spans[0] + spans[1]) < 0.5 * np.mean(spans[2] + spans[3])
    # the same combination and inner seed: the same workload as the plain scenario
    plain = make_scenario("recurring", 5, num_jobs=30, mean_interarrival=3600.0, population_seed=2)
    np.testing.assert_array_equal(make(5 * 4 + 3).jobs.submit, plain.jobs.submit)
    env = GeoPipeEnv(make)  # an env takes the mixture as its workloads
    env.reset(seed=0)
    with pytest.raises(ValueError, match="scenario 'recurring' has no knob"):
        scenario_mixture("recurring", {"nothing": [1]})
    with pytest.raises(ValueError, match="also a fixed knob"):
        scenario_mixture("recurring", {"num_jobs": [5]}, num_jobs=30)
