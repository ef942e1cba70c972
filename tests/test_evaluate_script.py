"""scripts/evaluate.py as a user runs it (subprocesses, tiny budgets): bad input is one line
naming the flag (exit 2, no traceback), an empty trace window names its days and the first day
with a job, one table format (key columns in the terminal, ranked by mean avg_jct_h), a warning
when a checkpoint is evaluated on other settings than its training's, --plot lists its files
(one schedule picture per policy among them)."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from agents.evaluation import comparison_table

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "scripts" / "evaluate.py"
DAY = 86_400.0
KEY_HEADER = ["policy", "avg_jct_h", "total_cost", "jct_vs_bace_pipe", "cost_vs_bace_pipe"]


def evaluate(tmp_path: Path, *args: str) -> subprocess.CompletedProcess:
    cmd = [sys.executable, str(SCRIPT), "--out", str(tmp_path / "out"), *args]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=300, cwd=tmp_path)


def assert_one_line_error(out: subprocess.CompletedProcess, *words: str) -> str:
    """Exit 2, no traceback, and the last stderr line (the error) names every one of ``words``."""
    assert out.returncode == 2, out.stderr[-3000:]
    assert "Traceback" not in out.stderr, out.stderr[-3000:]
    line = out.stderr.strip().splitlines()[-1]
    for word in words:
        assert word in line, line
    return line


def gapped_trace(tmp_path: Path) -> Path:
    """An RFold-format Philly table with one job on day 0, then none until day 1.375."""
    arrivals = [0.0] + [d * DAY for d in (1.375, 1.4, 1.62, 1.9, 2.1)]
    rows = ["#job id,arrival time (sec),topology,shape,size,duration (sec)"]
    rows += [f"{i},{t},CLOS,{1 + i % 2},{1 + i % 2},{3600 * (1 + i)}" for i, t in enumerate(arrivals)]
    path = tmp_path / "gap_rfold_philly_trace.csv"
    path.write_text("\n".join(rows) + "\n")
    return path


def test_an_empty_window_names_its_days_and_the_first_day_with_a_job(tmp_path):
    trace = gapped_trace(tmp_path)
    # the README's usage: the default windows (4 of 0.25 days from day 0); the second is empty
    out = evaluate(tmp_path, "--trace", "philly", "--trace-file", str(trace), "--policies", "lcf")
    line = assert_one_line_error(out, "--window-start-days 0 --window-days 0.25", "[0.25, 0.5) days",
                                 "on day 1.37", "--window-start-days")
    assert not re.search(r"\d{4,}", line), line  # days, not seconds (21600, 86400, ...)
    out = evaluate(tmp_path, "--trace", "philly", "--trace-file", str(trace), "--policies", "lcf",
                   "--seeds", "1", "--window-start-days", "0.1")
    assert_one_line_error(out, "--window-start-days 0.1 --window-days 0.25: no job submitted in [0.1, 0.35) days; "
                               "the first job after day 0.1 is on day 1.37; try --window-start-days 1.37")
    # and the suggestion works
    ok = evaluate(tmp_path, "--trace", "philly", "--trace-file", str(trace), "--policies", "lcf",
                  "--seeds", "1", "--window-start-days", "1.37")
    assert ok.returncode == 0, ok.stderr[-3000:]


@pytest.mark.parametrize(("args", "words"), [
    (["--trace", "philly", "--trace-file", "missing.csv"], ["--trace-file", "missing.csv", "does not exist"]),
    (["--trace", "philly", "--sample", "0"], ["--sample"]),
    (["--trace", "philly", "--compression", "0"], ["--compression"]),
    (["--trace", "philly", "--target-load", "-1"], ["--target-load"]),
    (["--trace", "philly", "--max-jobs", "-3"], ["--max-jobs"]),
    (["--trace", "philly", "--window-days", "inf"], ["--window-days"]),
    (["--seeds", "0"], ["--seeds"]),
    (["--scenario", "nope"], ["--scenario", "nope"]),
    (["--uncertainty", "nope"], ["--uncertainty"]),
    (["--protocol-orders", "sjf", "sjf"], ["--protocol-orders", "'sjf'", "twice"]),
    (["--protocol-orders", "lifo"], ["--protocol-orders", "lifo"]),
])
def test_bad_input_is_one_line_naming_the_flag(tmp_path, args, words):
    assert_one_line_error(evaluate(tmp_path, "--policies", "lcf", *args), *words)


def test_mapping_errors_are_reported_in_flag_names():
    import importlib.util

    spec = importlib.util.spec_from_file_location("evaluate_script_flags", SCRIPT)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    from traces.mapping import MappingOptions

    for field, flag, bad in [("sample", "--sample", 0.0), ("compression", "--compression", 0.0),
                             ("target_load", "--target-load", -1.0), ("max_jobs", "--max-jobs", -3)]:
        with pytest.raises(ValueError) as err:
            MappingOptions(**{field: bad})
        assert mod.in_flags(err.value).startswith(f"{flag}: "), mod.in_flags(err.value)


def key_table(stdout: str) -> pd.DataFrame:
    """The markdown table the script prints."""
    lines = [line for line in stdout.splitlines() if line.startswith("|")]
    header = [c.strip() for c in lines[0].strip("|").split("|")]
    rows = [[c.strip() for c in line.strip("|").split("|")] for line in lines[2:]]
    return pd.DataFrame(rows, columns=header)


def wrote(stdout: str) -> tuple[Path, list[str]]:
    """The files the script says it wrote (its last line)."""
    match = re.search(r"^wrote (\d+) files to (.+?)/: (.+)$", stdout, re.MULTILINE)
    assert match, stdout[-2000:]
    names = match.group(3).split(", ")
    assert int(match.group(1)) == len(names)
    return Path(match.group(2)), names


def test_one_table_format_ranked_by_mean_jct(tmp_path):
    out = evaluate(tmp_path, "--trace", "philly", "--policies", "lcf", "sjf", "random",
                   "--seeds", "2", "--window-days", "0.05")
    assert out.returncode == 0, out.stderr[-3000:]
    shown = key_table(out.stdout)
    assert list(shown.columns) == KEY_HEADER
    table = pd.read_csv(tmp_path / "out" / "table.csv", index_col=0)
    assert table.index.name == "policy"
    assert {"p50_jct_h", "p99_jct_h", "avg_wait_h", "failures", "gpus_per_job", "pred_log_err",
            "p99_vs_bace_pipe", "wait_vs_bace_pipe"} <= set(table.columns)  # the wide table in the CSV
    assert not any(c.endswith("_vs_bace") for c in table.columns)
    assert table.avg_jct_h.is_monotonic_increasing
    assert shown.policy.tolist() == table.index.tolist()
    runs = pd.read_csv(tmp_path / "out" / "runs.csv").set_index(["policy", "seed"])
    per_seed = runs.loc["lcf"].avg_jct_h / runs.loc["bace_pipe"].avg_jct_h
    assert table.loc["lcf", "jct_vs_bace_pipe"] == pytest.approx(per_seed.mean(), rel=1e-9)
    # no --plot: no plots, and the files written are listed
    folder, names = wrote(out.stdout)
    assert folder == tmp_path / "out" and names == ["workloads.csv", "runs.csv", "table.csv"]
    assert not list((tmp_path / "out").glob("*.png"))


def test_comparison_table_ranks_by_mean_jct_not_mean_ratio():
    # lcf: ratios 0.5 and 2.0 (mean 1.25) but mean JCT 50.5; sjf: 1.5 and 0.8 (1.15), 21.5
    df = pd.DataFrame({
        "policy": ["bace_pipe", "bace_pipe", "lcf", "lcf", "sjf", "sjf"], "seed": [0, 1] * 3,
        "avg_jct_h": [2.0, 50.0, 1.0, 100.0, 3.0, 40.0], "total_cost": [1.0, 1.0, 2.0, 2.0, 0.5, 0.5],
        "failures": [0] * 6,
    })
    table = comparison_table(df)
    assert table.index.tolist() == ["sjf", "bace_pipe", "lcf"]
    assert table.columns.tolist() == ["avg_jct_h", "total_cost", "jct_vs_bace_pipe", "cost_vs_bace_pipe", "failures"]
    assert table.loc["lcf", "jct_vs_bace_pipe"] == pytest.approx(1.25)
    assert table.loc["sjf", "cost_vs_bace_pipe"] == pytest.approx(0.5)


def test_a_checkpoint_on_other_settings_than_its_training_is_warned(tmp_path):
    from agents.training import make_model, make_vec_env

    env = make_vec_env(1, "paper-fig1", seed=0, window=2)
    model = make_model("maskable-ppo", env, seed=0, tensorboard_log=None, n_steps=32, batch_size=32)
    trained = {"scenario": "paper-fig1", "scenario_kwargs": {}, "algo": "maskable-ppo", "num_envs": 1,
               "seed": 0, "cost_weight": 0.5, "window": 2, "uncertainty": "realistic",
               "warmup_workloads": 0, "n_steps": 32, "start_rule": None}
    runs = {"mismatch": trained, "old": None,  # a run from before settings.json
            "partial": {k: trained[k] for k in ("scenario", "window", "start_rule")}}  # older keys only
    for name, settings in runs.items():
        (tmp_path / "runs" / name).mkdir(parents=True)
        model.save(str(tmp_path / "runs" / name / "last.zip"))
        if settings is not None:
            (tmp_path / "runs" / name / "settings.json").write_text(json.dumps(settings))
    out = evaluate(tmp_path, "--policies", "lcf", *(f"runs/{n}/last.zip" for n in runs),
                   "--scenario", "paper-fig1", "--window", "2", "--seeds", "1", "--cost-weight", "0.1",
                   "--validation-seeds", "0")
    assert out.returncode == 0, out.stderr[-3000:]
    warnings = [line for line in out.stderr.splitlines() if line.startswith("warning:")]
    assert len(warnings) == 1, out.stderr[-3000:]
    assert "runs/mismatch/last.zip" in warnings[0] and "runs/mismatch/settings.json" in warnings[0]
    assert "--cost-weight 0.1 here, 0.5 in training" in warnings[0]
    assert "--uncertainty perfect here, realistic in training" in warnings[0]
    assert "--scenario" not in warnings[0] and "--window" not in warnings[0]
    # the agents are labelled as such, by checkpoint
    shown = key_table(out.stdout).policy.tolist()
    assert {f"agent (runs/{n}/last.zip)" for n in runs} | {"lcf", "bace_pipe"} == set(shown)


def test_an_agent_is_compared_with_the_best_fixed_policy_chosen_on_other_seeds(tmp_path):
    from agents.training import make_model, make_vec_env

    env = make_vec_env(1, "paper-fig1", seed=0, window=2)
    make_model("maskable-ppo", env, seed=0, tensorboard_log=None, n_steps=32, batch_size=32).save(str(tmp_path / "a.zip"))
    out = evaluate(tmp_path, "--policies", "a.zip", "--scenario", "paper-fig1", "--window", "2", "--seeds", "3",
                   "--validation-seeds", "2", "--first-seed", "5", "--protocol-orders", "qssf", "fcfs")
    assert out.returncode == 0, out.stderr[-3000:]
    best = re.search(r"best fixed on 2 validation replicate\(s\): (\S+)", out.stdout).group(1)
    assert best.split("+")[0] in ("qssf", "fcfs")  # among the orders given
    runs = pd.read_csv(tmp_path / "out" / "runs.csv")
    assert sorted(runs.seed.unique()) == [5, 6, 7]  # the validation seeds are others
    assert set(runs.policy) == {"agent (a.zip)", "bace_pipe", f"best fixed ({best})"}
    protocol = pd.read_csv(tmp_path / "out" / "protocol.csv").iloc[0]
    assert protocol.best_fixed == f"best fixed ({best})" and protocol.replicates == 3
    agent, fixed = (runs[runs.policy == p].set_index("seed") for p in ("agent (a.zip)", f"best fixed ({best})"))
    objective = lambda r: r.jobs * r.avg_jct_h + 0.1 * r.total_cost  # noqa: E731 (the trained objective)
    assert protocol.objective_ratio == pytest.approx(objective(agent).mean() / objective(fixed).mean())
    assert protocol.ci_low <= protocol.objective_ratio <= protocol.ci_high


def test_plot_writes_the_files_it_lists(tmp_path):
    out = evaluate(tmp_path, "--trace", "acme", "--policies", "lcf", "sjf", "--seeds", "1",
                   "--window-days", "0.05", "--plot")
    assert out.returncode == 0, out.stderr[-3000:]
    folder, names = wrote(out.stdout)
    assert folder == tmp_path / "out"
    assert {"jct_cdf.png", "cost.png", "table.csv", "runs.csv", "workloads.csv",
            "schedule_lcf.png", "schedule_sjf.png", "schedule_bace_pipe.png"} == set(names)
    assert sorted(p.name for p in folder.iterdir()) == sorted(names)
    for name in names:
        assert (folder / name).stat().st_size > 0
