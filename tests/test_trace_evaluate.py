"""scripts/evaluate.py on traces: the committed synthetic samples with no download, clearly
labelled synthetic, replicates = consecutive windows, every metric normalised to BACE-Pipe."""

from __future__ import annotations

import contextlib
import functools
import importlib.util
import io
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "scripts" / "evaluate.py"


@functools.cache
def script():
    """scripts/evaluate.py as a module (in-process runs skip the interpreter and import start-up)."""
    spec = importlib.util.spec_from_file_location("evaluate_script", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def run(tmp_path: Path, *args: str, subprocess_run: bool = False) -> subprocess.CompletedProcess:
    """evaluate.py with ``args`` (``--out tmp_path``): in this process, or as a command line."""
    argv = ["--out", str(tmp_path), *args]
    if subprocess_run:
        cmd = [sys.executable, str(SCRIPT), *argv]
        return subprocess.run(cmd, capture_output=True, text=True, timeout=600, cwd=tmp_path)
    out, err = io.StringIO(), io.StringIO()
    code = 0
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            script().main(script().parser.parse_args(argv))
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else 1
            print(exc.code, file=err)
        except Exception as exc:  # noqa: BLE001 -- what the command line would print and exit on
            code = 1
            print(f"{type(exc).__name__}: {exc}", file=err)
    return subprocess.CompletedProcess(argv, code, out.getvalue(), err.getvalue())


@pytest.mark.parametrize("trace", ["philly", "acme"])
def test_evaluate_on_the_synthetic_samples(tmp_path, trace):
    out = run(tmp_path, "--trace", trace, "--policies", "fcfs", "sjf", "lcf",
              "--seeds", "2", "--window-days", "0.05", "--plot", subprocess_run=trace == "philly")
    assert out.returncode == 0, out.stderr[-3000:]
    assert "SYNTHETIC (not real data)" in out.stdout
    table = pd.read_csv(tmp_path / "table.csv", index_col=0)
    windows = pd.read_csv(tmp_path / "workloads.csv")
    assert set(table.index) == {"fcfs", "sjf", "lcf", "bace_pipe"}
    for ratio in ("jct_vs_bace_pipe", "p50_vs_bace_pipe", "p99_vs_bace_pipe", "makespan_vs_bace_pipe",
                  "cost_vs_bace_pipe"):
        assert table.loc["bace_pipe", ratio] == 1.0
    each = pd.read_csv(tmp_path / "runs.csv").set_index(["policy", "seed"])
    by_seed = each.loc["lcf"].avg_jct_h / each.loc["bace_pipe"].avg_jct_h  # a non-reference row
    assert table.loc["lcf", "jct_vs_bace_pipe"] == pytest.approx(by_seed.mean(), rel=1e-9)
    # no queueing at all in these short windows leaves the wait ratio undefined (NaN), not 1
    wait = table.loc["bace_pipe", "wait_vs_bace_pipe"]
    assert wait == 1.0 or (np.isnan(wait) and table.loc["bace_pipe", "avg_wait_h"] == 0)
    # jobs get at most min(request, K*) GPUs: per replicate, the mean is at most the target's
    assert (table.gpus_per_job <= windows.target_gpus_per_job.mean() + 1e-9).all()
    runs = pd.read_csv(tmp_path / "runs.csv")
    assert len(runs) == 8 and runs.workload.str.contains("SYNTHETIC").all()
    assert windows.window_start_days.tolist() == [0.0, 0.05]  # consecutive windows
    # every policy saw the same jobs in a replicate
    assert runs.groupby("seed").jobs.nunique().eq(1).all()
    assert (runs.groupby("seed").jobs.first().to_numpy() == windows.jobs.to_numpy()).all()
    assert (tmp_path / "jct_cdf.png").stat().st_size > 0 and (tmp_path / "cost.png").stat().st_size > 0


def test_evaluate_trace_options_reach_the_mapping(tmp_path):
    out = run(tmp_path, "--trace", "philly", "--policies", "lcf", "--seeds", "1",
              "--window-days", "0", "--sample", "0.5", "--max-jobs", "40", "--target-load", "0.25")
    assert out.returncode == 0, out.stderr[-3000:]
    windows = pd.read_csv(tmp_path / "workloads.csv")
    assert windows.jobs.tolist() == [40] and windows.dropped_not_sampled.iloc[0] > 0


def test_evaluate_bad_trace_file_is_a_clear_error(tmp_path):
    bad = tmp_path / "broken_cluster_job_log.json"
    bad.write_text('[{"status": "Pass"}]')
    out = run(tmp_path, "--trace", "philly", "--trace-file", str(bad), "--policies", "lcf", "--seeds", "1")
    assert out.returncode == 2
    assert "broken_cluster_job_log.json" in out.stderr and "missing field" in out.stderr


def test_evaluate_reads_a_file_whose_name_gives_no_hint_with_trace_kind(tmp_path):
    # a download keeps its own name (Acme's trace_seren.csv has no "acme" in it, say)
    plain = tmp_path / "jobs.csv"
    plain.write_bytes((ROOT / "traces" / "data" / "synthetic_acme_seren.csv").read_bytes())
    args = ("--trace", "acme", "--trace-file", str(plain), "--policies", "lcf", "--seeds", "1",
            "--window-days", "0.05")
    out = run(tmp_path, *args, "--trace-kind", "acme_seren")
    assert out.returncode == 0, out.stderr[-3000:]
    assert "[acme_seren]" in out.stdout
    wrong = run(tmp_path, "--trace", "philly", *args[2:], "--trace-kind", "acme_seren")
    assert wrong.returncode == 2 and "--trace-kind" in wrong.stderr


def test_evaluate_a_checkpoint_on_a_trace(tmp_path):
    """A checkpoint (an untrained model: loading and acting is what is tested here; training is
    tests/test_training.py's) on the synthetic Philly sample, acting through GeoPipeEnv."""
    from agents.training import make_model, make_vec_env

    env = make_vec_env(2, "paper-default", seed=0, window=2)  # Table II: the trace's regions
    model = make_model("maskable-ppo", env, seed=0, tensorboard_log=None, n_steps=32, batch_size=32)
    ckpt = tmp_path / "tiny" / "last.zip"
    ckpt.parent.mkdir()
    model.save(str(ckpt))
    other = ckpt.with_name("other.zip")  # a second checkpoint of the same run folder
    other.write_bytes(ckpt.read_bytes())
    out = run(tmp_path, "--trace", "philly", "--policies", "lcf", str(ckpt), str(other), "--window", "2",
              "--seeds", "1", "--window-days", "0", "--max-jobs", "25")
    assert out.returncode == 0, out.stderr[-3000:]
    table = pd.read_csv(tmp_path / "table.csv", index_col=0)
    assert set(table.index) == {"lcf", f"agent ({ckpt})", f"agent ({other})", "bace_pipe"}
    runs = pd.read_csv(tmp_path / "runs.csv")
    assert (runs.jobs == 25).all()
    # a checkpoint reads the layout it was trained on: a clear error names the option
    wrong = run(tmp_path, "--trace", "philly", "--policies", str(ckpt), "--window", "4", "--seeds", "1")
    assert wrong.returncode == 2 and "--window 4" in wrong.stderr


@pytest.mark.parametrize(("args", "words"), [
    (["--trace-file", "x.json"], "--trace-file: only with --trace"),
    (["--trace", "philly", "--warmup-workloads", "1"], "--warmup-previous-window"),
])
def test_evaluate_rejects_options_that_would_be_ignored_or_leak(tmp_path, args, words):
    out = run(tmp_path, *args, "--policies", "lcf", "--seeds", "1")
    assert out.returncode == 2 and words in out.stderr


def test_agents_get_short_windows_by_default():
    mod = script()
    args = mod.parser.parse_args(["--trace", "philly", "--window-days", "0", "--seeds", "1"])
    with_agent, described, label = mod.trace_workloads(args, has_agent=True)
    assert len(with_agent[0][1].jobs) == mod.AGENT_MAX_JOBS == 300 and "SYNTHETIC" in label
    without, _, _ = mod.trace_workloads(args, has_agent=False)
    assert len(without[0][1].jobs) == 989  # the whole sample: 1,000 jobs less 11 without a run time
    args.max_jobs = 0  # --max-jobs 0: the whole window, agent or not
    whole, _, _ = mod.trace_workloads(args, has_agent=True)
    assert len(whole[0][1].jobs) == 989
    args.max_jobs = -1
    with pytest.raises(SystemExit, match="max-jobs"):
        mod.trace_workloads(args, has_agent=True)
