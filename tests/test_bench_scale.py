"""scripts/bench_scale.py's smoke run: every sweep writes its rows, with what each case really was."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pandas as pd

SCRIPT = Path(__file__).resolve().parents[1] / "scripts" / "bench_scale.py"


def test_quick_sweeps_write_every_case(tmp_path: Path) -> None:
    out = subprocess.run([sys.executable, str(SCRIPT), "--quick", "--out", str(tmp_path)],
                         capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr[-3000:]
    df = pd.read_csv(tmp_path / "bench_scale.csv")
    assert df.groupby("sweep").size().to_dict() == {"jobs": 1, "concurrency": 2, "regions": 1, "queue": 2}
    assert (df.sim_s > 0).all() and (df.peak_mb >= df.base_mb).all()
    assert (df.run_us_per_job > 0).all() and (df.run_us_per_job <= df.us_per_job).all()  # a part of simulate
    conc = df[df.sweep == "concurrency"].sort_values("capacity_scale")
    assert conc.mean_running.iloc[1] > conc.mean_running.iloc[0]  # more capacity, more jobs at once
    assert (tmp_path / "bench_scale.png").stat().st_size > 0


def test_bad_flag_is_one_line() -> None:
    out = subprocess.run([sys.executable, str(SCRIPT), "--factors", "0"], capture_output=True, text=True, timeout=300)
    assert out.returncode == 2 and "Traceback" not in out.stderr and "--factors" in out.stderr
