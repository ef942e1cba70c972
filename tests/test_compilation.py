"""Every compiled function compiles once per signature: once the env, the vector env and
``simulate`` have run each kind of workload, running more (other seeds, scenarios, uncertainty
and start rules) adds no signature to any of them: no silent recompilation per episode."""

from __future__ import annotations

from pathlib import Path

import numba
import numpy as np

import baselines
import geo_gym
import traces
from geo_gym import costmodel, decision, fixed, loading, placement, scenarios, sim, workload
from geo_gym.env import GeoPipeEnv
from geo_gym.uncertainty import predictors
from geo_gym.vector import GeoPipeVectorEnv

SAMPLE = Path(__file__).resolve().parents[1] / "traces" / "data" / "synthetic_philly_job_log.json"
MODULES = (costmodel, decision, fixed, loading, placement, scenarios, sim, workload, predictors)


def dispatchers() -> dict[str, numba.core.registry.CPUDispatcher]:
    return {
        f"{m.__name__}.{name}": obj
        for m in MODULES
        for name, obj in vars(m).items()
        if isinstance(obj, numba.core.registry.CPUDispatcher)
    }


def signatures() -> dict[str, int]:
    return {name: len(d.signatures) for name, d in dispatchers().items()}


def run_everything(seed: int, start_rule: str | None) -> None:
    trace = traces.trace_scenario(SAMPLE, max_jobs=60).scenario
    for scen, kw, unc in (
        ("paper-default", {}, None), ("recurring", {"num_jobs": 20}, "realistic"),
        ("recurring", {"num_jobs": 20}, "schedmate"), ("random", {"num_regions": 4}, "realistic"),
    ):
        env = GeoPipeEnv(scen, kw, uncertainty=unc, start_rule=start_rule)
        obs, info = env.reset(seed=seed)
        rng = np.random.default_rng(seed)
        for _ in range(60):
            obs, _, done, _, info = env.step(int(rng.choice(np.flatnonzero(info["action_mask"]))))
            if done:
                obs, info = env.reset()
        venv = GeoPipeVectorEnv(3, scen, kw, uncertainty=unc, start_rule=start_rule,
                                parallel=bool(seed % 2), autoreset_mode="SameStep")
        obs, info = venv.reset(seed=seed)
        for _ in range(40):
            acts = [int(rng.choice(np.flatnonzero(m))) for m in info["action_mask"]]
            obs, _, _, _, info = venv.step(acts)
        for policy in ("bace_pipe", "sjf", "lcf", "schedmate_sjf"):
            geo_gym.simulate(scen, baselines.make(policy), seed=seed, scenario_kwargs=kw,
                             env_kwargs={"uncertainty": unc, "start_rule": start_rule})
    for policy in ("bace_pipe", "fcfs"):
        geo_gym.simulate(trace, baselines.make(policy), seed=seed)
        geo_gym.simulate(trace, baselines.make(policy, strict=True), seed=seed, window=4)


def test_no_recompilation_after_warm_up() -> None:
    before = signatures()  # what earlier tests of this process compiled (e.g. other call forms)
    run_everything(0, None)
    run_everything(1, "fraction:0.5")  # both parallel settings, both start-rule kinds
    warm = signatures()
    run_everything(2, "kstar")
    run_everything(3, "any")
    after = signatures()
    grown = {name: (warm[name], n) for name, n in after.items() if n != warm.get(name, 0)}
    assert not grown, f"compiled again for new signatures: {grown}"
    # the entry points each episode and step go through: one signature each from these paths
    # (step_env two at most: prange hands the parallel batch an unsigned env index;
    # fixed.run_fixed_policy is Python around its compiled phases)
    for name in ("decision.step_batch", "decision.begin", "fixed._run_reading_queue"):
        key = f"geo_gym.{name}"
        assert after[key] - before.get(key, 0) <= 1, (name, before.get(key, 0), after[key])
    assert after["geo_gym.decision.step_env"] - before.get("geo_gym.decision.step_env", 0) <= 2
