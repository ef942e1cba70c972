"""Env steps per second: the native vector env beside gymnasium's SyncVectorEnv.

    python scripts/bench_env.py [--scenario paper-default] [--seconds 3] [--autoreset-mode SameStep] [--rules levels]

All run uniformly random valid actions (drawn from the action mask) for N in
{1, 16, 64, 256}; the table gives steps/s (env steps, i.e. N per vector step) of the native
env on one thread, of the native env with ``parallel=True`` (numba's threads, as many as
``NUMBA_NUM_THREADS``, here printed first), of SyncVectorEnv over the single env, and the
ratios. More columns explain the native numbers: its time per env step (``us_per_step``),
that of its compiled step alone (``compiled_us_per_step``: ``decision.step_batch``, timed
around each call) and their ratio (``step_over_compiled``: what resets, the Python around
each batched step and the benchmark's own action sampling add), the time per env step inside
the native env's calls (``env_us_per_step``: ``step``, and ``reset`` under Disabled; the
action sampling not) and its ratio to the compiled step (``env_over_compiled``), the mean
episode length in steps, and the time to draw and load one new episode (an unseeded reset of
the native env divided by N), which every episode pays once, on one thread. Below the table:
``GeoPipeEnv.reset()`` of the single env (no seed, as every episode after the first; best of
5 runs of 1,000 resets). Both vector envs run in the same ``--autoreset-mode`` (gymnasium's
``AutoresetMode``; default SameStep, the mode of the numbers in docs/performance.md).
"""

from __future__ import annotations

import argparse
import time

import gymnasium as gym
import numba
import numpy as np
import pandas as pd

import geo_gym  # noqa: F401  (registers geo_gym/GeoPipe-v0)
from geo_gym import cli
from geo_gym.env import GeoPipeEnv
from geo_gym.placement import RULE_SETS
from geo_gym.vector import GeoPipeVectorEnv

parser = argparse.ArgumentParser(description=__doc__, formatter_class=cli.HelpFormatter)
parser.add_argument("--scenario", default="paper-default")
parser.add_argument("--scenario-kwargs", type=cli.json_object, default={}, help='JSON, e.g. \'{"num_regions": 6}\'')
parser.add_argument("--seconds", type=cli.positive_float, default=3.0, help="wall time per measurement")
parser.add_argument("--num-envs", type=cli.positive_int, nargs="+", default=[1, 16, 64, 256])
parser.add_argument("--autoreset-mode", type=cli.autoreset_mode, default="SameStep",
                    help="NextStep | SameStep | Disabled (Disabled: the finished envs are reset with a reset_mask)")
parser.add_argument("--start-rule", type=cli.start_rule, default=None,
                    help="memory | any | fraction:X | kstar | request; default: the scenario's own")
parser.add_argument("--rules", choices=RULE_SETS, default="default", help="the placement options of each queue slot")
args = parser.parse_args()


def random_valid(masks: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """One uniformly random valid action per row of a (N, A) mask, vectorised."""
    u = rng.random(masks.shape) * masks
    return u.argmax(axis=1)


def step(env, masks: np.ndarray, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray, float]:
    """One vector step of random valid actions; (terminated, the next masks, seconds spent in
    the env's calls: the action sampling not). Under DISABLED the finished envs are reset with
    a ``reset_mask``, as a user of that mode does."""
    actions = random_valid(masks, rng)
    start = time.perf_counter()
    _, _, terminated, truncated, info = env.step(actions)
    in_env = time.perf_counter() - start
    masks = info["action_mask"]
    ended = terminated | truncated
    if env.metadata["autoreset_mode"] == gym.vector.AutoresetMode.DISABLED and ended.any():
        start = time.perf_counter()
        _, info = env.reset(options={"reset_mask": ended})
        in_env += time.perf_counter() - start
        masks = np.where(ended[:, None], info["action_mask"], masks)
    return terminated, masks, in_env


class Timed:
    """A function that adds the wall time of each call to ``seconds``."""

    def __init__(self, fn):
        self.fn, self.seconds = fn, 0.0

    def __call__(self, *args):
        start = time.perf_counter()
        self.fn(*args)
        self.seconds += time.perf_counter() - start


def measure(env, seconds: float, timed: Timed | None = None) -> tuple[float, float, int, float]:
    """(env steps per second, mean episode length in steps, env steps measured, microseconds
    per env step inside the env's calls); ``timed`` (if any) counts from the end of the
    warm-up, as the steps do."""
    rng = np.random.default_rng(0)
    _, info = env.reset(seed=0)
    masks = info["action_mask"]
    for _ in range(20):  # warm-up (numba dispatch, first resets)
        _, masks, _ = step(env, masks, rng)
    if timed is not None:
        timed.seconds = 0.0
    steps = 0
    episodes = 0
    in_env = 0.0
    start = time.perf_counter()
    while time.perf_counter() - start < seconds:
        terminated, masks, seconds_in_env = step(env, masks, rng)
        steps += 1
        episodes += int(terminated.sum())
        in_env += seconds_in_env
    elapsed = time.perf_counter() - start
    env_steps = steps * env.num_envs
    return env_steps / elapsed, env_steps / max(episodes, 1), env_steps, in_env / env_steps * 1e6


def reset_us(env, repeats: int = 5) -> float:
    """Microseconds to draw and load one episode (best of ``repeats`` full resets without a
    seed, as every episode after the first: a seed builds each env a new generator)."""
    env.reset(seed=0)
    best = np.inf
    for _ in range(repeats):
        start = time.perf_counter()
        env.reset()
        best = min(best, time.perf_counter() - start)
    return best / env.num_envs * 1e6


def single_reset_us(runs: int = 5, resets: int = 1_000) -> float:
    """Microseconds of one ``GeoPipeEnv.reset()`` (best of ``runs`` runs of ``resets``)."""
    env = GeoPipeEnv(args.scenario, args.scenario_kwargs, start_rule=args.start_rule, rules=args.rules)
    env.reset(seed=0)
    for _ in range(50):
        env.reset()
    best = np.inf
    for _ in range(runs):
        start = time.perf_counter()
        for _ in range(resets):
            env.reset()
        best = min(best, (time.perf_counter() - start) / resets)
    return best * 1e6


print(f"numba threads: {numba.get_num_threads()}")
rows = []
for n in args.num_envs:
    kwargs = {"start_rule": args.start_rule, "autoreset_mode": args.autoreset_mode, "rules": args.rules}
    venv = GeoPipeVectorEnv(n, args.scenario, args.scenario_kwargs, **kwargs)
    venv._step_batch = timed = Timed(venv._step_batch)
    native, ep_len, env_steps, env_us = measure(venv, args.seconds, timed)
    compiled_us = timed.seconds / env_steps * 1e6
    parallel, *_ = measure(GeoPipeVectorEnv(n, args.scenario, args.scenario_kwargs, parallel=True, **kwargs), args.seconds)
    sync_env = gym.vector.SyncVectorEnv(
        [lambda: GeoPipeEnv(args.scenario, args.scenario_kwargs, start_rule=args.start_rule, rules=args.rules)
         for _ in range(n)],
        autoreset_mode=args.autoreset_mode,
    )
    sync, *_ = measure(sync_env, args.seconds)
    rows.append({
        "num_envs": n, "native_steps_per_s": native, "parallel_steps_per_s": parallel,
        "sync_steps_per_s": sync, "ratio": native / sync, "ratio_parallel": parallel / sync,
        "us_per_step": 1e6 / native, "compiled_us_per_step": compiled_us,
        "step_over_compiled": 1e6 / native / compiled_us, "env_us_per_step": env_us,
        "env_over_compiled": env_us / compiled_us,
        "episode_steps": ep_len, "reset_us_per_episode": reset_us(venv),
    })
print(pd.DataFrame(rows).round(1).to_markdown(index=False))
print(f"GeoPipeEnv.reset() on {args.scenario}: {single_reset_us():.1f} us")
