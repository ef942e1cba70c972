"""scripts/evaluate.py on traces: the committed synthetic samples with no download, clearly
labelled synthetic, replicates = consecutive windows, every metric normalised to BACE-Pipe."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "scripts" / "evaluate.py"


def run(tmp_path: Path, *args: str) -> subprocess.CompletedProcess:
    cmd = [sys.executable, str(SCRIPT), "--out", str(tmp_path), *args]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=600, cwd=tmp_path)


@pytest.mark.parametrize("trace", ["philly", "acme"])
def test_evaluate_on_the_synthetic_samples(tmp_path, trace):
    out = run(tmp_path, "--trace", trace, "--policies", "fcfs", "sjf", "lcf",
              "--seeds", "2", "--window-days", "0.05")
    assert out.returncode == 0, out.stderr[-3000:]
    assert "SYNTHETIC (not real data)" in out.stdout
    table = pd.read_csv(tmp_path / "table.csv", index_col=0)
    assert set(table.index) == {"fcfs", "sjf", "lcf", "bace_pipe"}
    for ratio in ("jct_vs_bace", "p50_vs_bace", "p99_vs_bace", "wait_vs_bace", "makespan_vs_bace", "cost_vs_bace"):
        assert table.loc["bace_pipe", ratio] == 1.0
    runs = pd.read_csv(tmp_path / "runs.csv")
    assert len(runs) == 8 and runs.workload.str.contains("SYNTHETIC").all()
    windows = pd.read_csv(tmp_path / "workloads.csv")
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
    assert out.returncode != 0
    assert "broken_cluster_job_log.json" in out.stderr and "missing field" in out.stderr
