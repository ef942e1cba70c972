"""One line on stderr while geo_gym's numba kernels compile (a cold cache), none when they load
from the on-disk cache."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import geo_gym

ROOT = Path(__file__).resolve().parents[1]


def _run(code: str, **env) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=300,
        env={**os.environ, **env},
    )


def test_a_cold_cache_prints_the_notice_once(tmp_path):
    """An empty NUMBA_CACHE_DIR: the first kernel compiles (a small one here, to stay quick),
    and the notice is printed once however many kernels follow."""
    code = (
        "from geo_gym import workload\n"
        "workload.JobTable([0], [0], [0.0], [1.0])\n"
        "workload.JobTable([0, 1], [0, 1], [0.0, 1.0], [1.0, 2.0])\n"
        "from geo_gym.loading import _apply_fates\n"
        "import numpy as np\n"
        "z = np.zeros(1); _apply_fates(z, z, z + np.nan, np.ones(1, bool), z + 1, 0.0)\n"
    )
    res = _run(code, NUMBA_CACHE_DIR=str(tmp_path))
    assert res.returncode == 0, res.stderr
    assert res.stderr.count(geo_gym.COMPILE_NOTICE) == 1
    assert any(tmp_path.rglob("*.nbi"))  # numba did cache into the empty folder


def test_a_warm_cache_prints_nothing():
    code = (
        "import geo_gym, baselines\n"
        "geo_gym.simulate('paper-default', baselines.make('bace_pipe'), seed=0)\n"
    )
    _run(code)  # warms the cache if this checkout's is cold (then the notice is expected)
    res = _run(code)
    assert res.returncode == 0, res.stderr
    assert geo_gym.COMPILE_NOTICE not in res.stderr


def test_other_modules_compiling_print_nothing(capsys):
    """Only geo_gym's own kernels: a user's numba function compiling says nothing."""
    import numba

    @numba.njit
    def twice(x):
        return 2 * x

    shown = geo_gym._compile_notice.shown
    assert twice(3) == 6
    assert geo_gym._compile_notice.shown == shown
    assert geo_gym.COMPILE_NOTICE not in capsys.readouterr().err
