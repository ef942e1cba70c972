"""The BACE-Pipe paper's experiments (section IV, Figs. 4-8) and its Fig. 1 example, run with
the fixed policies on the geo_gym cost model.

``scripts/benchmark.py`` writes their tables and plots, ``scripts/fig1.py`` prints Fig. 1,
and ``scripts/paper_claims.py`` checks every quantitative claim of the paper against them
(docs/paper_claims.md). Nothing here is tuned to any of the paper's numbers.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

import baselines
from geo_gym import cli, costmodel
from geo_gym.placement import Placement, check_placement
from geo_gym.runner import Unschedulable, simulate
from geo_gym.scenarios import make_scenario
from geo_gym.workload import profile

START_RULES = ("memory", "any", "fraction:0.5", "kstar")
MAIN = ("bace_pipe", "ldf", "lcf", "cr_lcf", "cr_ldf")  # Fig. 4
BASELINES = MAIN[1:]
ABLATION = ("bace_pipe", "bace_pipe_no_priority", "bace_pipe_no_pathfinder", "bace_pipe_no_costmin")  # Fig. 8
BANDWIDTH_SCALES = (0.3, 0.9, 1.5)  # Fig. 5
CAPACITY_SCALES = (0.5, 0.75, 1.25)  # Fig. 6
JOB_COUNTS = (8, 12, 16, 20, 24)  # Fig. 7


def experiments(bandwidth_scales=BANDWIDTH_SCALES) -> dict:
    """name: (knob, values, policies) of Figs. 4-8."""
    return {
        "main": (None, [None], list(MAIN)),
        "bandwidth": ("bandwidth_scale", list(bandwidth_scales), list(MAIN)),
        "capacity": ("capacity_scale", list(CAPACITY_SCALES), list(MAIN)),
        "jobs": ("num_jobs", list(JOB_COUNTS), list(MAIN)),
        "ablation": (None, [None], list(ABLATION)),
    }


def cells(name: str, knob, values, policies, seeds: int) -> list[tuple]:
    """The (experiment, knob, value, seed, policy) of each run of an experiment, in its table's
    order: settings, then seeds, then policies."""
    return [(name, knob, v, s, p) for v in values for s in range(seeds) for p in policies]


def run_cell(scenario: str, start_rule: str, name: str, knob, value, seed: int, policy: str) -> dict:
    """One run of an experiment: ``policy`` on the workload of ``seed`` with ``knob=value``
    (the default setting where ``knob`` is None); its table row (before the ratios), with
    infinite JCT and cost where the policy can never place some job."""
    kwargs = {} if knob is None else {knob: value}
    try:
        res = simulate(
            scenario, baselines.make(policy), seed=seed, scenario_kwargs=kwargs, env_kwargs={"start_rule": start_rule},
        )
        summary, stuck = res.summary, False
    except Unschedulable:
        summary, stuck = dict.fromkeys(("avg_jct_h", "total_cost", "makespan_h", "avg_wait_h"), np.inf), True
    return {
        "experiment": name,
        "scenario": scenario,
        "start_rule": start_rule,
        "setting": "default" if knob is None else f"{knob}={value}",
        "value": value,
        "seed": seed,
        "policy": policy,
        **{k: summary[k] for k in ("avg_jct_h", "total_cost", "makespan_h", "avg_wait_h")},
        "unschedulable": stuck,
    }


def serial(fn, calls, desc: str) -> list:
    """The runs one after the other, with a progress bar (``agents.scale.Tasks.map`` runs them
    as Ray tasks instead, with the same results)."""
    return [fn(*call) for call in cli.progress(list(calls), desc=desc, leave=False)]


def run_experiment(
    scenario: str, name: str, knob, values, policies, seeds: int, start_rule: str = "memory", run=serial,
) -> pd.DataFrame:
    """One row per (setting, seed, policy): its average JCT, cost, makespan and wait, and its
    JCT and cost over BACE-Pipe's on the same seed and setting. A policy that can never place
    some job (``Unschedulable``) gets an infinite JCT and cost, and ``unschedulable`` True.
    ``run(fn, calls, desc)`` runs ``fn(*call)`` for each call and returns the results in the
    calls' order."""
    calls = [(scenario, start_rule, *cell) for cell in cells(name, knob, values, policies, seeds)]
    df = pd.DataFrame(run(run_cell, calls, name))
    ref = df[df.policy == "bace_pipe"].set_index(["setting", "seed"])
    key = pd.MultiIndex.from_frame(df[["setting", "seed"]])
    df["jct_vs_bace_pipe"] = df["avg_jct_h"].to_numpy() / ref.loc[key, "avg_jct_h"].to_numpy()
    df["cost_vs_bace_pipe"] = df["total_cost"].to_numpy() / ref.loc[key, "total_cost"].to_numpy()
    return df


def summarise(df: pd.DataFrame) -> pd.DataFrame:
    """Mean and standard deviation over seeds of each (experiment, setting, policy)."""
    g = df.groupby(["experiment", "setting", "policy"], sort=False)
    out = g.agg(
        jct_vs_bace_pipe=("jct_vs_bace_pipe", "mean"),
        jct_vs_bace_pipe_std=("jct_vs_bace_pipe", "std"),
        cost_vs_bace_pipe=("cost_vs_bace_pipe", "mean"),
        cost_vs_bace_pipe_std=("cost_vs_bace_pipe", "std"),
        avg_jct_h=("avg_jct_h", "mean"),
        total_cost=("total_cost", "mean"),
        seeds=("seed", "count"),
    )
    return out.reset_index()


# ------------------------------------------------------------------------------------ Fig. 1
A, B, C, D = 0, 1, 2, 3  # the regions of scenario paper-fig1
# Strategy -> {job: Placement}, in the order the paper's II-B narrative places the jobs.
FIG1_STRATEGIES = {
    "LCF": {"P": Placement((C,), (2,)), "Q": Placement((B,), (3,))},
    "LDF": {"P": Placement((A,), (4,)), "Q": Placement((B,), (3,))},
    "Ours (FCFS)": {"P": Placement((A, C), (4, 2)), "Q": Placement((B,), (3,))},
    "Ours (Reordered)": {"Q": Placement((A, C), (4, 2)), "P": Placement((B, D), (3, 1))},
}
FIG1_PAPER = {  # Fig. 1 / section II-B: average JCT (h) and total cost ($)
    "LCF": (1.50, 0.53),
    "LDF": (1.32, 0.56),
    "Ours (FCFS)": (1.27, 0.55),
    "Ours (Reordered)": (0.75, 0.52),
}


def fig1_profiles() -> dict:
    """name: (JobSpec, JobProfile) of Fig. 1's jobs P and Q, profiled under the memory rule
    (the default), so ``memory_min`` is what the placements are checked against; K* and
    t_comp are the same under ``any``, the rule ``paper-fig1`` is built with."""
    scen = make_scenario("paper-fig1")
    cl = scen.cluster
    return {
        j.name: (j, profile(j, cl.gpu, scen.stage_overhead, cl.intra_region_gbps, scen.memory_model))
        for j in scen.jobs
    }


def fig1() -> pd.DataFrame:
    """The four placements of Fig. 1 under the cost model: both jobs start at t = 0 in every
    strategy (they fit side by side), so a job's JCT is its execution time E_j (Eq. 2-3) and
    the cost is Eq. (4). Also which placements Eq. (6) and GPU memory refuse."""
    cl = make_scenario("paper-fig1").cluster
    jobs = fig1_profiles()
    need = {name: prof.memory_min for name, (_, prof) in jobs.items()}
    rows = []
    for name, plan in FIG1_STRATEGIES.items():
        free = cl.capacities.copy()
        reserved = np.zeros_like(cl.bandwidth)
        hours, cost, notes = [], 0.0, []
        too_small = [f"{j} on {pl.total} < {need[j]} GPUs" for j, pl in plan.items() if pl.total < need[j]]
        for job_name, pl in plan.items():
            _, prof = jobs[job_name]
            alloc = pl.gpus_per_region(cl.num_regions)
            b_j = prof.b_j(pl.total)
            try:
                check_placement(pl, free, reserved, cl.bandwidth, b_j)
            except ValueError as err:
                notes.append(f"{job_name}: {err}")
            free -= alloc
            for u, v in zip(pl.path[:-1], pl.path[1:], strict=True):
                reserved[u, v] += b_j
                reserved[v, u] += b_j
            t_iter = costmodel.pipeline_iteration_time(
                np.array(pl.path), len(pl.path), alloc, cl.bandwidth, cl.intra_region_gbps,
                prof.activation_gbit, prof.work, prof.stage_overhead, prof.num_microbatches,
            )
            e = costmodel.execution_time(prof.iterations, t_iter) / 3600.0
            hours.append(e)
            cost += costmodel.energy_cost(e, alloc, cl.prices, cl.gpu.power_kw)
        rows.append(
            {
                "strategy": name,
                "avg_jct_h": np.mean(hours),
                "total_cost_usd": cost,
                "paper_avg_jct_h": FIG1_PAPER[name][0],
                "paper_cost_usd": FIG1_PAPER[name][1],
                "eq6_violations": "; ".join(notes) or "none",
                "memory": "; ".join(too_small) or "fits",
            }
        )
    return pd.DataFrame(rows)
