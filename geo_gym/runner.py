"""``simulate``: run a whole workload under a policy and tabulate the outcome
(``summarize``: the same run, its summary alone).

Fixed policies that expose ``order_code`` and ``rule_code`` (``baselines``) take the compiled
fast path (``fixed.run_fixed_policy``: no RL step overhead). Anything else with an SB3-style
``predict(obs, deterministic=True)`` (a trained agent, the random baseline) is driven through
``GeoPipeEnv``. For the same seed the two paths give identical results whenever the queue never
holds more jobs than the env's window (``window=`` makes the fast path look at the same window).
``record=True`` also keeps the schedule, every attempt of every job (``geo_gym.render``), for
``geo_gym.plot_schedule``: the fast path then takes its decisions one compiled call at a time,
the same calls in the same order, so the results are the same to the bit.
"""

from __future__ import annotations

import copy
import ctypes
import platform
from dataclasses import dataclass
from functools import lru_cache
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd
from gymnasium.utils import seeding

from geo_gym import fixed, sim
from geo_gym.env import (
    GeoPipeEnv,
    as_uncertainty,
    episode_arrays,
    episode_summary,
    hour_columns,
    path_lists,
)
from geo_gym.loading import start_episode
from geo_gym.scenarios import Scenario, scenario_factory
from geo_gym.state import SECONDS_PER_HOUR

if TYPE_CHECKING:
    from geo_gym.render import ScheduleLog


@dataclass
class SimResult:
    jobs: pd.DataFrame  # one row per job
    summary: dict  # avg_jct_h, p50/p99_jct_h, avg_wait_h, makespan_h, total_cost, ...
    schedule: ScheduleLog | None = None  # every attempt, with simulate(..., record=True)


_PATH_COLUMNS = ("path", "gpus_per_region")


def _collect(core: sim.Core, jobs: list, scen: Scenario) -> tuple[dict, dict]:
    """(the per-job columns, the summary) of env 0's finished episode: all the result needs
    of the core, compactly (``env.episode_arrays(paths=False, copy=False)``: the paths flat,
    the hours still in seconds, views of the core where it holds a column as it is), which the
    caller then drops, never to reuse it, before ``_table`` builds the table."""
    return episode_arrays(core, 0, jobs, scen.cluster.names, paths=False, copy=False), episode_summary(core, 0)


def _table(columns: dict, summary: dict, extra: dict | None = None,
           schedule: ScheduleLog | None = None) -> SimResult:
    names = list(columns)
    if len(columns["gpus"]) >= RETURN_FREED_JOBS:  # the core is gone (simulate): its pages go back
        _return_freed_memory()
    hour_columns(columns)
    flat = {key: columns.pop(key) for key in _PATH_COLUMNS if key in columns}
    table = pd.DataFrame(columns)
    columns.clear()  # the table holds copies of the numeric columns: the originals go now
    if flat:  # the per-job lists only now, beside the table rather than beside its columns too
        for key, values in path_lists(flat).items():
            table.insert(names.index(key), key, np.fromiter(values, dtype=object, count=len(table)))
        del flat
    return SimResult(table, _with_quantiles(summary, table["jct_h"].to_numpy(), extra), schedule)


def _with_quantiles(summary: dict, jct_h: np.ndarray, extra: dict | None) -> dict:
    """``summary`` with the median and 99th percentile JCT and the job count (then ``extra``):
    ``np.quantile`` of the finite JCTs, which is what pandas' ``Series.quantile`` computes
    (NaN when no job has one)."""
    known = jct_h[~np.isnan(jct_h)]
    p50, p99 = np.quantile(known, [0.5, 0.99]).tolist() if len(known) else (np.nan, np.nan)
    summary["p50_jct_h"] = p50
    summary["p99_jct_h"] = p99
    summary["num_jobs"] = len(jct_h)
    summary.update(extra or {})
    return summary


def _run_fixed_recorded(core: sim.Core, policy, window: int, strict: bool, schedule: ScheduleLog) -> bool:
    """``fixed.run_fixed_policy`` one compiled decision at a time, logging every start."""
    while not sim.done(core, 0):
        j = fixed.decide(core, 0, policy.order_code, policy.rule_code, window, strict)
        if j >= 0:
            path = core.path[0, j, : core.plen[0, j]]
            schedule.record(core, 0, j, path, core.alloc[0, j][path])
        elif not sim.advance(core, 0):
            return False
    return True


class Unschedulable(RuntimeError):
    """A fixed policy that can never place some job (its rule cannot give the job the GPUs its
    start rule requires, e.g. ``ldf`` under ``kstar`` when no region holds all of K*)."""


def simulate(
    scenario: str | Scenario,
    policy,
    seed: int = 0,
    window: int | None = None,
    scenario_kwargs: dict | None = None,
    env_kwargs: dict | None = None,
    record: bool = False,
) -> SimResult:
    """Run one workload (drawn from ``scenario`` with ``seed``) to the end under ``policy``.
    ``env_kwargs`` are GeoPipeEnv's (window, cost_weight, uncertainty, warmup_workloads,
    warmup_scenario, start_rule); a
    policy with an ``uncertainty`` dict (e.g. schedmate_sjf) overrides those fields.
    ``record``: keep every attempt in ``result.schedule`` (for ``geo_gym.plot_schedule``)."""
    core, jobs, scen, extra, schedule = _run(scenario, policy, seed, window, scenario_kwargs, env_kwargs, record)
    columns, summary = _collect(core, jobs, scen)
    del core  # about 300 B a job that the table no longer needs (a schedule keeps its own reference)
    return _table(columns, summary, extra, schedule)


# From this many jobs _table hands the dropped core's memory back to the system before it
# builds the table (docs/performance.md: at 1M jobs the table's peak is 210 MB lower); a call
# costs up to a few hundred ms on a large heap, nothing an episode of an env would want.
RETURN_FREED_JOBS = 100_000


@lru_cache(maxsize=1)
def _malloc_trim():
    """glibc's malloc_trim, or None on other C libraries (the call is then skipped)."""
    if platform.system() != "Linux" or platform.libc_ver()[0] != "glibc":
        return None
    return ctypes.CDLL("libc.so.6").malloc_trim


def _return_freed_memory() -> None:
    """Return the C allocator's free pages to the system: glibc keeps the pages of freed
    arrays allocated below its (adaptive) mmap threshold, and the result table built after the
    core is gone would otherwise sit on top of them."""
    trim = _malloc_trim()
    if trim is not None:
        trim(0)


def summarize(
    scenario: str | Scenario,
    policy,
    seed: int = 0,
    window: int | None = None,
    scenario_kwargs: dict | None = None,
    env_kwargs: dict | None = None,
) -> dict:
    """``simulate(...).summary`` without the per-job table: the same numbers (p50/p99 as
    pandas' ``quantile`` gives them on the table's column), for callers that read only the
    summary (``agents.evaluation.evaluate``: every policy on every held-out seed), where
    building the table cost more than the fast path's run."""
    core, jobs, _, extra, _ = _run(scenario, policy, seed, window, scenario_kwargs, env_kwargs, False)
    n = len(jobs)
    jct_h = (core.end_s[0, :n] - core.submit_s[0, :n]) / SECONDS_PER_HOUR  # episode_arrays' column
    return _with_quantiles(episode_summary(core, 0), jct_h, extra)


def _run(scenario, policy, seed, window, scenario_kwargs, env_kwargs, record):
    """The episode of ``simulate``, run to its end: (core, jobs, scenario, extra summary
    entries, schedule), its results in env 0 of the core."""
    scenario_kwargs = dict(scenario_kwargs or {})
    env_kwargs = dict(env_kwargs or {})
    unc = as_uncertainty(env_kwargs.get("uncertainty"))
    if getattr(policy, "uncertainty", None):
        unc = unc.replace(**policy.uncertainty)
    env_kwargs["uncertainty"] = unc
    if hasattr(policy, "order_code") and hasattr(policy, "rule_code"):
        rng, _ = seeding.np_random(seed)
        make = scenario_factory(scenario, env_kwargs.get("start_rule"), **scenario_kwargs)
        core, jobs, scen, _ = start_episode(
            sim.allocate(1, make(0).cluster.num_regions, 1, attempts=0), 0, make, rng, unc,
            env_kwargs.get("warmup_workloads", 0), env_kwargs.get("warmup_scenario"), make.num_jobs,
        )
        strict = bool(getattr(policy, "strict", False))
        schedule = None
        if record:
            from geo_gym.render import ScheduleLog

            schedule = ScheduleLog(core, 0, jobs, scen.cluster.names)
            ok = _run_fixed_recorded(core, policy, window or 0, strict, schedule)
        else:
            ok = fixed.run_fixed_policy(core, 0, policy.order_code, policy.rule_code, window or 0, strict)
        if not ok:
            stuck = [jobs[j].name for j in core.pending[0, : core.n_pending[0]]]
            raise Unschedulable(f"policy {policy!r} cannot place jobs {stuck}")
        return core, jobs, scen, None, schedule
    if window is not None:
        env_kwargs["window"] = window
    # an env that may render keeps the schedule (and draws nothing until asked)
    env = GeoPipeEnv(scenario, scenario_kwargs, **env_kwargs, render_mode="rgb_array" if record else None)
    # a policy that reads the layout from the observation gets this env's region count (the
    # size alone is ambiguous beyond 45 regions) and option count where it leaves them open;
    # the caller's object stays as it was
    layout = {key: getattr(env, key) for key in ("num_regions", "num_rules") if getattr(policy, key, 0) is None}
    if layout:
        policy = copy.copy(policy)
        for key, value in layout.items():
            setattr(policy, key, value)
    obs, info = env.reset(seed=seed)
    if hasattr(policy, "reset"):
        policy.reset(seed)
    steps, invalid, ret = 0, 0, 0.0
    while True:
        action, _ = policy.predict(obs, deterministic=True)
        obs, reward, terminated, _, info = env.step(int(np.asarray(action).reshape(-1)[0]))
        steps += 1
        invalid += info["invalid_action"]
        ret += reward
        if terminated:
            extra = {"steps": steps, "invalid_actions": invalid, "return": ret}
            return env.core, env.jobs, env.current_scenario, extra, env.schedule
