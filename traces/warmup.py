"""Retrieval warm-up on traces: the preceding window's jobs pre-fill SchedMate's history store.

SchedMate's retrieval predictor (``UncertaintyConfig`` predictor "schedmate") predicts a job's
length from the lengths of the most similar *finished* jobs. Mapped trace windows start with an
empty history, so every window begins blind. An honest warm-up is what a scheduler running on
the trace would have seen: the jobs of the window just before (same length, mapped the same
way), recorded with what they ran. ``geo_gym``'s ``warmup_workloads`` replays further draws of
the *same* scenario, which for a fixed trace window would be the window itself; its
``warmup_scenario`` takes the preceding window instead, on both paths (the compiled fast path
for fixed policies, ``GeoPipeEnv`` for agents). The warm-up's fates are drawn from the episode
generator before the episode's own random numbers, so every policy of a run sees the same draws.
"""

from __future__ import annotations

from geo_gym.runner import SimResult, simulate
from geo_gym.scenarios import Scenario


def simulate_warm(scenario: Scenario, past: Scenario | None, policy, seed: int = 0,
                  window: int | None = None, env_kwargs: dict | None = None, record: bool = False) -> SimResult:
    """``geo_gym.simulate(scenario, policy, seed, window, env_kwargs=..., record=...)`` with the
    retrieval history pre-filled by ``past``'s jobs (None: no warm-up, exactly ``geo_gym.simulate``)."""
    env_kwargs = dict(env_kwargs or {})
    if past is not None:
        env_kwargs["warmup_scenario"] = past
    return simulate(scenario, policy, seed=seed, window=window, env_kwargs=env_kwargs, record=record)
