"""Every script takes --start-rule and answers a bad one in one line, naming the value."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

SCRIPTS = Path(__file__).resolve().parents[1] / "scripts"


@pytest.mark.parametrize("script, bad", [
    ("benchmark.py", "bogus"), ("benchmark.py", "fraction:1.5"), ("evaluate.py", "kstar:2"),
    ("train_ppo.py", "bogus"), ("bench_env.py", "fraction:0"), ("bench_traces.py", "bogus"),
])
def test_bad_start_rule_is_a_one_line_error(script: str, bad: str) -> None:
    out = subprocess.run(
        [sys.executable, str(SCRIPTS / script), "--start-rule", bad],
        capture_output=True, text=True, timeout=300,
    )
    assert out.returncode == 2
    assert "Traceback" not in out.stderr
    assert "--start-rule" in out.stderr and bad.split(":")[-1] in out.stderr
