"""Compile geo_gym's numba kernels ahead of their first use, two parts at once.

numba compiles on one thread, and a fresh checkout compiles the kernels on first use: about a
minute for the env's episode and as long again for the fast path (docs/performance.md,
"Compiling the core"), most of a first ``scripts/train_ppo.py`` run. ``python -m
geo_gym.precompile`` compiles the two parts side by side, each in a process of its own, into
numba's on-disk cache (``cache=True``: ``__pycache__`` beside the sources, or
``NUMBA_CACHE_DIR``), from which every later process loads them. With a warm cache it only
loads them. The test suite runs it before its workers start (tests/conftest.py), so that the
workers and the scripts they start do not each compile the same kernels.

``PARTS`` names the parts; ``python -m geo_gym.precompile env`` compiles one in this process.
"""

from __future__ import annotations

import subprocess
import sys
import time

import numpy as np


def _env_episode() -> None:
    """The env's kernels: a GeoPipeEnv episode and a vector env's steps through an autoreset,
    under failures and the retrieval predictor (every branch of the core is compiled whatever
    runs; the configuration only makes sure every entry point is called)."""
    from geo_gym.env import GeoPipeEnv
    from geo_gym.vector import GeoPipeVectorEnv

    kwargs = {"scenario": "recurring", "scenario_kwargs": {"num_jobs": 6}, "uncertainty": "schedmate",
              "warmup_workloads": 1}
    env = GeoPipeEnv(**kwargs)
    _, info = env.reset(seed=0)
    done = False
    while not done:  # the first valid action, or wait
        _, _, terminated, truncated, info = env.step(int(np.flatnonzero(info["action_mask"])[0]))
        done = terminated or truncated
    vec = GeoPipeVectorEnv(2, **kwargs)
    _, info = vec.reset(seed=0)
    for _ in range(40):  # an env being reset (an empty mask) ignores its action
        actions = np.array([np.flatnonzero(m)[0] if m.any() else 0 for m in info["action_mask"]])
        _, _, _, _, info = vec.step(actions)


def _fast_path() -> None:
    """The fixed policies' kernels: ``geo_gym.simulate`` reading the queue, and on a queue long
    enough for the queue index (``fixed.INDEX_FROM`` jobs waiting at once). A policy there is
    anything with an ``order_code`` and a ``rule_code`` (baselines.FixedPolicy's fields)."""
    from types import SimpleNamespace

    from geo_gym import fixed, placement
    from geo_gym.runner import simulate

    bace_pipe = SimpleNamespace(order_code=fixed.ORDER_PRIORITY, rule_code=placement.RULE_NAMES.index("pathfinder"))
    simulate("recurring", bace_pipe, seed=0, env_kwargs={"uncertainty": "realistic"})
    simulate("paper-default", bace_pipe, seed=0, scenario_kwargs={"num_jobs": fixed.INDEX_FROM + 8})


PARTS = {"env": _env_episode, "fast-path": _fast_path}


def compile_all(parts=tuple(PARTS)) -> float:
    """Compile ``parts`` each in a process of its own, all at once; returns the seconds it took.
    RuntimeError naming a part whose process failed, with the end of its stderr."""
    start = time.perf_counter()
    procs = {
        part: subprocess.Popen([sys.executable, "-m", "geo_gym.precompile", part], stdout=subprocess.DEVNULL,
                               stderr=subprocess.PIPE, text=True)
        for part in parts
    }
    failed = []
    for part, proc in procs.items():
        _, err = proc.communicate()
        if proc.returncode != 0:
            failed.append(f"{part} (exit {proc.returncode}): {err.strip()[-2000:]}")
    if failed:
        raise RuntimeError("geo_gym.precompile: compiling " + "; ".join(failed))
    return time.perf_counter() - start


def main(argv: list[str]) -> int:
    unknown = [a for a in argv if a not in PARTS]
    if unknown:
        print(f"geo_gym.precompile: unknown part(s) {unknown}; parts: {sorted(PARTS)}", file=sys.stderr)
        return 2
    if len(argv) == 1:
        PARTS[argv[0]]()
        return 0
    try:
        seconds = compile_all(tuple(argv) or tuple(PARTS))
    except RuntimeError as err:
        print(err, file=sys.stderr)
        return 1
    print(f"geo_gym.precompile: {', '.join(argv or PARTS)} ready in {seconds:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
