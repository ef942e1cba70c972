"""Before pytest-xdist's workers start, the numba kernels are compiled once, two parts side by
side (geo_gym/precompile.py): on a cold cache (a fresh clone, an edited core) each worker, and
each script a test starts, would otherwise compile the same kernels for itself. With a warm
cache this only loads them (a few seconds). `-n 0` runs skip it: one process compiles what
its tests use."""

from __future__ import annotations

import sys


def pytest_configure(config):
    if hasattr(config, "workerinput") or not getattr(config.option, "numprocesses", None):
        return  # a worker (the controller compiled), or no workers
    from geo_gym.precompile import compile_all

    try:
        seconds = compile_all()
    except RuntimeError as err:  # the tests that use the failing kernels will say why
        print(f"{err}\n(the tests go on; each compiles what it uses)", file=sys.stderr)
        return
    print(f"geo_gym.precompile: the kernels compiled or loaded in {seconds:.1f} s", file=sys.stderr)
