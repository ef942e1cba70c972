"""Env steps per second: the native vector env beside gymnasium's SyncVectorEnv.

    python scripts/bench_env.py [--scenario paper-default] [--seconds 3]

Both run uniformly random valid actions (drawn from the action mask) for N in
{1, 16, 64, 256}; the table gives steps/s (env steps, i.e. N per vector step) and the ratio.
"""

from __future__ import annotations

import argparse
import json
import time

import gymnasium as gym
import numpy as np
import pandas as pd

import geo_gym  # noqa: F401  (registers geo_gym/GeoPipe-v0)
from geo_gym.env import GeoPipeEnv
from geo_gym.vector import GeoPipeVectorEnv

parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
parser.add_argument("--scenario", default="paper-default")
parser.add_argument("--scenario-kwargs", type=json.loads, default={}, help='JSON, e.g. \'{"num_regions": 6}\'')
parser.add_argument("--seconds", type=float, default=3.0, help="wall time per measurement")
parser.add_argument("--num-envs", type=int, nargs="+", default=[1, 16, 64, 256])
args = parser.parse_args()


def random_valid(masks: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """One uniformly random valid action per row of a (N, A) mask, vectorised."""
    u = rng.random(masks.shape) * masks
    return u.argmax(axis=1)


def measure(env, seconds: float) -> float:
    rng = np.random.default_rng(0)
    _, info = env.reset(seed=0)
    masks = info["action_mask"]
    # warm-up (numba dispatch, first resets)
    for _ in range(20):
        _, _, _, _, info = env.step(random_valid(masks, rng))
        masks = info["action_mask"]
    steps = 0
    start = time.perf_counter()
    while time.perf_counter() - start < seconds:
        _, _, _, _, info = env.step(random_valid(masks, rng))
        masks = info["action_mask"]
        steps += 1
    return steps * env.num_envs / (time.perf_counter() - start)


rows = []
for n in args.num_envs:
    native = measure(GeoPipeVectorEnv(n, args.scenario, args.scenario_kwargs), args.seconds)
    sync_env = gym.vector.SyncVectorEnv(
        [lambda: GeoPipeEnv(args.scenario, args.scenario_kwargs) for _ in range(n)],
        autoreset_mode=gym.vector.AutoresetMode.SAME_STEP,
    )
    sync = measure(sync_env, args.seconds)
    rows.append({"num_envs": n, "native_steps_per_s": native, "sync_steps_per_s": sync, "ratio": native / sync})
print(pd.DataFrame(rows).round(1).to_markdown(index=False))
