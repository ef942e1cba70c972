"""Retrieval warm-up on traces: the preceding window's jobs pre-fill SchedMate's history store.

SchedMate's retrieval predictor (``UncertaintyConfig`` predictor "schedmate") predicts a job's
length from the lengths of the most similar *finished* jobs. Mapped trace windows start with an
empty history, so every window begins blind. An honest warm-up is what a scheduler running on
the trace would have seen: the jobs of the window just before (same length, mapped the same
way), recorded with what they ran. ``geo_gym``'s own warm-up (``warmup_workloads``) replays
further draws of the *same* scenario, which for a fixed trace window would be the window
itself; this module feeds it the preceding window instead, through the same code
(``geo_gym.loading.start_episode`` with one warm-up workload), for both paths:

* fixed policies (``order_code``/``rule_code``): the compiled fast path, as
  ``geo_gym.simulate`` runs it;
* anything else (trained agents, the random baseline): ``GeoPipeEnv``.

``simulate_warm(scenario, None, ...)`` is ``geo_gym.simulate(scenario, ...)`` (tested). The
warm-up draws the preceding window's fates from the episode generator before the episode's own
random numbers, as ``warmup_workloads`` does, so every policy of a run sees the same draws.
"""

from __future__ import annotations

import numpy as np
from gymnasium.utils import seeding

from geo_gym import sim
from geo_gym.env import GeoPipeEnv, as_uncertainty
from geo_gym.loading import start_episode
from geo_gym.runner import SimResult, _result, simulate
from geo_gym.scenarios import Scenario


class _WindowThenPast:
    """``make(seed)`` for ``start_episode``: the episode's window on the first call, the
    preceding window on the next (the one warm-up workload)."""

    def __init__(self, current: Scenario, past: Scenario):
        self.current, self.past, self.calls = current, past, 0

    def __call__(self, seed: int) -> Scenario:
        self.calls += 1
        return self.current if self.calls == 1 else self.past


class WarmEnv(GeoPipeEnv):
    """``GeoPipeEnv`` on one trace window whose retrieval history starts with ``past``'s jobs."""

    def __init__(self, scenario: Scenario, past: Scenario, **kwargs):
        if kwargs.pop("warmup_workloads", 0):
            raise ValueError("WarmEnv: warmup_workloads is set by the preceding window")
        self._past = past
        self._make = None
        super().__init__(scenario, warmup_workloads=1, **kwargs)

    def _make_scenario(self, seed: int) -> Scenario:
        return self.scenario if self._make is None else self._make(seed)

    def reset(self, *, seed: int | None = None, options: dict | None = None):
        self._make = _WindowThenPast(self.scenario, self._past)
        try:
            return super().reset(seed=seed, options=options)
        finally:
            self._make = None


def simulate_warm(scenario: Scenario, past: Scenario | None, policy, seed: int = 0,
                  window: int | None = None, env_kwargs: dict | None = None) -> SimResult:
    """``geo_gym.simulate(scenario, policy, seed, window, env_kwargs=...)`` with the retrieval
    history pre-filled by ``past``'s jobs (None: no warm-up, exactly ``geo_gym.simulate``)."""
    env_kwargs = dict(env_kwargs or {})
    if past is None:
        return simulate(scenario, policy, seed=seed, window=window, env_kwargs=env_kwargs)
    if env_kwargs.get("warmup_workloads", 0):
        raise ValueError("simulate_warm: give either a preceding window or warmup_workloads, not both")
    env_kwargs.pop("warmup_workloads", None)
    unc = as_uncertainty(env_kwargs.get("uncertainty"))
    if getattr(policy, "uncertainty", None):
        unc = unc.replace(**policy.uncertainty)
    env_kwargs["uncertainty"] = unc
    if hasattr(policy, "order_code") and hasattr(policy, "rule_code"):
        rng, _ = seeding.np_random(seed)
        core = sim.allocate(1, scenario.cluster.num_regions, 1)
        core, jobs, scen, _ = start_episode(core, 0, _WindowThenPast(scenario, past), rng, unc, 1)
        if not sim.run_fixed_policy(core, 0, policy.order_code, policy.rule_code, window or 0):
            stuck = [jobs[j].name for j in core.pend[0, : core.n_pend[0]]]
            raise RuntimeError(f"policy {policy!r} cannot place jobs {stuck}")
        return _result(core, jobs, scen)
    if window is not None:
        env_kwargs["window"] = window
    env = WarmEnv(scenario, past, **env_kwargs)
    obs, _ = env.reset(seed=seed)
    if hasattr(policy, "reset"):
        policy.reset(seed)
    steps, ret = 0, 0.0
    while True:
        action, _ = policy.predict(obs, deterministic=True)
        obs, reward, terminated, _, _ = env.step(int(np.asarray(action).reshape(-1)[0]))
        steps += 1
        ret += reward
        if terminated:
            return _result(env.core, env.jobs, env.current_scenario, {"steps": steps, "return": ret})
