"""scripts/schedmate_claims.py: its --quick run writes the claims table (claim, paper, ours,
command) whose numbers follow from the runs it wrote beside it; bad flags are one-line errors."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from agents.protocol import paired_ratio

SCRIPT = Path(__file__).resolve().parents[1] / "scripts" / "schedmate_claims.py"


@pytest.fixture(scope="module")
def quick(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("claims")
    res = subprocess.run([sys.executable, str(SCRIPT), "--quick", "--out", str(out)],
                         capture_output=True, text=True, timeout=600)
    assert res.returncode == 0, res.stderr[-2000:]
    assert f"to {out}/" in res.stdout
    return out


def test_quick_run_writes_the_claims_table(quick: Path) -> None:
    table = pd.read_csv(quick / "schedmate_claims.csv")
    assert list(table.columns) == ["claim", "paper", "ours", "verdict", "why", "command"]
    assert set(table.verdict) <= {"reproduced", "partly", "not", "context", "not measured"}
    assert (table.command == f"python scripts/schedmate_claims.py --quick --out {quick}").all()
    claims = " | ".join(table.claim)
    for what in ("within 100%", "vs QSSF", "Tiresias", "further gain", "false positives", "precision and F1"):
        assert what in claims
    assert (quick / "schedmate_claims.md").read_text().startswith("| claim")


def test_claims_follow_from_the_runs(quick: Path) -> None:
    runs = pd.read_csv(quick / "schedmate_claims_runs.csv")
    table = pd.read_csv(quick / "schedmate_claims.csv").set_index("claim")

    def jct(name):
        return runs[runs.scheduler == name].sort_values("seed").avg_jct_h.to_numpy()

    r = paired_ratio(jct("schedmate+FH"), jct("schedmate"))
    row = next(c for c in table.index if "further gain" in c)
    assert f"ratio {r['ratio']:.3f}" in table.loc[row, "ours"]
    r = paired_ratio(jct("schedmate"), jct("qssf"))
    row = next(c for c in table.index if "vs QSSF" in c)
    assert f"ratio {r['ratio']:.3f}" in table.loc[row, "ours"]
    sm = runs[runs.scheduler == "schedmate"]
    row = next(c for c in table.index if "SchedMate retrieval" in c)
    assert table.loc[row, "ours"].startswith(f"{100 * sm.within_100pct.sum() / sm.num_jobs.sum():.1f}%")
    # a perfect-precision handler never restarts an application failure
    assert (runs[runs.scheduler == "schedmate+FH p=1"].false_restarts == 0).all()
    assert np.isfinite(runs.avg_jct_h).all()


def test_bad_flag_is_a_one_line_error() -> None:
    out = subprocess.run([sys.executable, str(SCRIPT), "--seeds", "0"], capture_output=True, text=True, timeout=300)
    assert out.returncode == 2 and "Traceback" not in out.stderr and "--seeds" in out.stderr
