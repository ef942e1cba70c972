"""scripts/regime_map.py: its CSV holds what the docs read off it, the same seed gives the same
files, and a bad flag is a one-line error."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

SCRIPT = Path(__file__).resolve().parents[1] / "scripts" / "regime_map.py"
COLUMNS = [
    "scenario", "start_rule", "bandwidth_scale", "num_jobs", "stage_overhead", "mfu", "seeds", "stuck",
    "bace_pipe_avg_jct_h", "best_jct_baseline", "best_jct_baseline_avg_jct_h",
    "jct_ratio", "jct_ci_low", "jct_ci_high", "jct_verdict",
    "bace_pipe_total_cost", "best_cost_baseline", "best_cost_baseline_total_cost",
    "cost_ratio", "cost_ci_low", "cost_ci_high", "cost_verdict",
    "target_gpus_over_capacity", "min_gpus_over_capacity", "max_b_j_gbps", "min_link_gbps",
]
BASELINES = ["lcf", "ldf", "cr_lcf", "cr_ldf"]


def run(*flags: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(SCRIPT), *flags], capture_output=True, text=True, timeout=600)


@pytest.fixture(scope="module")
def quick(tmp_path_factory) -> dict[str, Path]:
    """--quick runs: twice with seed 0, once with seed 5."""
    outs = {}
    for name, seed in (("a", "0"), ("b", "0"), ("other", "5")):
        out = tmp_path_factory.mktemp(name)
        res = run("--quick", "--seed", seed, "--out", str(out))
        assert res.returncode == 0, res.stderr
        assert f"wrote 5 files to {out}/" in res.stdout
        outs[name] = out
    return outs


def test_quick_csv_columns_and_cells(quick) -> None:
    cells = pd.read_csv(quick["a"] / "regime_map.csv")
    assert list(cells.columns) == COLUMNS
    # --quick: two start rules x two bandwidth scales x two job counts, one compute setting
    assert len(cells) == 8 and set(cells.start_rule) == {"memory", "any"}
    assert set(cells.bandwidth_scale) == {0.1, 0.3} and set(cells.num_jobs) == {8, 16}
    assert (cells.seeds == 2).all() and (cells.scenario == "paper-default").all()
    summary = (quick["a"] / "summary.md").read_text().splitlines()
    assert len(summary) == 2 + 2 and summary[2].startswith("| memory") and summary[3].startswith("| any")
    v = cells[cells.start_rule == "memory"].jct_verdict.value_counts()
    assert f"| {v.get('win', 0)}/{v.get('tie', 0)}/{v.get('loss', 0)} " in summary[2]
    assert sorted(p.name for p in quick["a"].iterdir()) == [
        "regime_bandwidth_jobs.png", "regime_compute.png", "regime_map.csv", "runs.csv", "summary.md"]


def test_best_baseline_and_ratios_follow_the_runs(quick) -> None:
    cells = pd.read_csv(quick["a"] / "regime_map.csv")
    runs = pd.read_csv(quick["a"] / "runs.csv")
    keys = ["start_rule", "bandwidth_scale", "num_jobs", "stage_overhead", "mfu"]
    assert set(runs.policy) == {"bace_pipe", *BASELINES} and len(runs) == len(cells) * 5 * 2
    for _, cell in cells.iterrows():
        r = runs[(runs[keys] == cell[keys]).all(axis=1)]
        means = r.groupby("policy")[["avg_jct_h", "total_cost"]].mean()
        for short, metric in (("jct", "avg_jct_h"), ("cost", "total_cost")):
            best = cell[f"best_{short}_baseline"]
            assert best in BASELINES and means.loc[best, metric] == means.loc[BASELINES, metric].min()
            ratio = means.loc["bace_pipe", metric] / means.loc[best, metric]
            assert cell[f"{short}_ratio"] == pytest.approx(ratio, rel=1e-5)  # 6 significant digits
            low, high = cell[f"{short}_ci_low"], cell[f"{short}_ci_high"]
            assert low * (1 - 1e-5) <= ratio <= high * (1 + 1e-5)
            assert cell[f"{short}_verdict"] == ("win" if high < 1 else "loss" if low > 1 else "tie")
    # the model's quantities: Table II's slowest link (EU-Central-EU-West, (30 + 50) / 2 Gbps), scaled
    np.testing.assert_allclose(cells.min_link_gbps, 40.0 * cells.bandwidth_scale)
    assert (cells.min_gpus_over_capacity <= cells.target_gpus_over_capacity).all()


def test_same_seed_same_csv_and_another_seed_another(quick) -> None:
    for name in ("regime_map.csv", "runs.csv", "summary.md"):
        assert (quick["a"] / name).read_bytes() == (quick["b"] / name).read_bytes()
    assert (quick["a"] / "runs.csv").read_bytes() != (quick["other"] / "runs.csv").read_bytes()


@pytest.mark.parametrize("flags, says", [
    (["--mfus", "1.5"], "--mfus: must be in (0, 1], got 1.5"),
    (["--stage-overheads", "0"], "--stage-overheads: must be a finite number > 0, got 0"),
    (["--start-rules", "request"], "--start-rules: 'request'"),
    (["--scenario", "paper-fig1"], "--scenario: invalid choice: 'paper-fig1'"),
])
def test_bad_flag_is_a_one_line_error(flags: list[str], says: str) -> None:
    res = run(*flags)
    assert res.returncode == 2 and "Traceback" not in res.stderr
    assert says in res.stderr.strip().splitlines()[-1]


def test_a_policy_that_cannot_place_a_job_is_named_and_not_the_best(tmp_path: Path) -> None:
    # geo-wan under kstar, overhead 0.05 s: Llama-3.1-70B's K* exceeds every region but EA-East,
    # and CR-LCF's path from the cheapest region (US-East-2) cannot reach it over the WAN links
    res = run("--scenario", "geo-wan", "--start-rules", "kstar", "--bandwidth-scales", "1", "--job-counts", "8",
              "--stage-overheads", "0.05", "--mfus", "0.4", "--seeds", "1", "--out", str(tmp_path))
    assert res.returncode == 0, res.stderr
    cell = pd.read_csv(tmp_path / "regime_map.csv").iloc[0]
    assert cell.stuck == "cr_lcf"
    assert cell.best_jct_baseline in {"lcf", "ldf", "cr_ldf"} and cell.best_cost_baseline != "cr_lcf"
    assert np.isfinite(cell.jct_ratio) and cell.jct_verdict == "unknown"  # one seed: no interval
    assert "cr_lcf" not in set(pd.read_csv(tmp_path / "runs.csv").policy)
