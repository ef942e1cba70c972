"""Same seed, same result, across commits: digests of whole seeded runs (env episodes, the
vector env, ``geo_gym.simulate``, a trace window) pinned to the values of the code that made
the documented numbers. A change that moves any seeded stream (a draw added, reordered, or
taken from another generator) or any result of the core fails here; such a change must
regenerate every documented number, and then these digests, in the same piece of work.

Numbers are rounded to 10 significant digits before hashing, so that the digests pin the
streams and the model, not the last bit of a platform's libm."""

from __future__ import annotations

import hashlib
from pathlib import Path

import numpy as np
import pytest

import baselines
import geo_gym
from geo_gym.env import GeoPipeEnv
from geo_gym.vector import GeoPipeVectorEnv
from traces.readers import read_trace
from traces.windows import split_windows

SAMPLE = Path(__file__).resolve().parents[1] / "traces" / "data" / "synthetic_philly_job_log.json"


class Digest:
    def __init__(self) -> None:
        self._h = hashlib.sha256()

    def add(self, *values) -> None:
        for value in values:
            if isinstance(value, dict):
                for key in sorted(value):
                    if key != "jobs":  # per-job records: their numbers are in the summary and obs
                        self.add(key, value[key])
            elif isinstance(value, str):
                self._h.update(value.encode())
            else:
                flat = np.asarray(value, dtype=np.float64).reshape(-1)
                self._h.update(" ".join(f"{x:.10g}" for x in flat).encode())

    def hex(self) -> str:
        return self._h.hexdigest()[:16]


def _random_valid(mask: np.ndarray, rng: np.random.Generator) -> int:
    return int(rng.choice(np.flatnonzero(mask)))


def env_digest(episodes: int = 3, **env_kwargs) -> str:
    env = GeoPipeEnv(**env_kwargs)
    act = np.random.default_rng(7)
    d = Digest()
    for ep in range(episodes):
        obs, info = env.reset(seed=11 if ep == 0 else None)  # later episodes: the env's own stream
        d.add(obs, info)
        done = False
        while not done:
            obs, reward, terminated, truncated, info = env.step(_random_valid(info["action_mask"], act))
            d.add(obs, reward, terminated, truncated, info)
            done = terminated or truncated
    return d.hex()


CASES = {
    "paper-default": dict(scenario="paper-default"),
    "recurring": dict(scenario="recurring"),
    "random-4": dict(scenario="random", scenario_kwargs={"num_regions": 4}),
    "geo-wan": dict(scenario="geo-wan"),
    "recurring-realistic-warmup": dict(scenario="recurring", uncertainty="realistic", warmup_workloads=2),
    "recurring-schedmate": dict(scenario="recurring", uncertainty="schedmate", warmup_workloads=1),
    "paper-default-failures": dict(
        scenario="paper-default", uncertainty={"failure_rate_per_gpu_hour": 0.01, "handler": True}
    ),
}
ENV_DIGESTS = {
    "paper-default": "d140de6390bded27",
    "recurring": "bf358217a94ca8e8",
    "random-4": "49f3f3fdbc2c075c",
    "geo-wan": "f79092aa0a758e71",
    "recurring-realistic-warmup": "82a1b5e2ac23d42d",
    "recurring-schedmate": "f55677cf2e1d456a",
    "paper-default-failures": "7c14417314025698",
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_env_episodes_keep_their_streams(case):
    assert env_digest(**CASES[case]) == ENV_DIGESTS[case]


def vector_digest() -> str:
    env = GeoPipeVectorEnv(3, scenario="recurring", uncertainty="realistic", autoreset_mode="SameStep")
    act = np.random.default_rng(3)
    d = Digest()
    obs, info = env.reset(seed=5)
    d.add(obs)
    for _ in range(400):
        masks = info["action_mask"]
        actions = np.array([_random_valid(m, act) for m in masks])
        obs, rewards, terminated, truncated, info = env.step(actions)
        d.add(obs, rewards, terminated, truncated)
        if "final_info" in info:
            d.add(info["final_info"])
    return d.hex()


def simulate_digest() -> str:
    d = Digest()

    for scenario, policy, kwargs in [
        ("paper-default", "bace_pipe", {}),
        ("recurring", "fcfs", {"uncertainty": "realistic", "warmup_workloads": 2}),
        ("recurring", "schedmate_sjf", {"uncertainty": "schedmate"}),
    ]:
        result = geo_gym.simulate(scenario, baselines.make(policy), seed=4, env_kwargs=kwargs)
        d.add(scenario, policy, result.summary)
    window = split_windows(read_trace(SAMPLE, "philly_job_log"), 0.1, 0.7, max_jobs=40).test[0]
    d.add("trace", geo_gym.simulate(window, baselines.make("bace_pipe"), seed=2).summary)
    return d.hex()


VECTOR_DIGEST = "08e146f22d605b88"
SIMULATE_DIGEST = "8f886b6cb4a7009b"


def test_vector_env_keeps_its_streams():
    assert vector_digest() == VECTOR_DIGEST


def test_simulate_and_a_trace_window_keep_their_streams():
    assert simulate_digest() == SIMULATE_DIGEST
