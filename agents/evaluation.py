"""Evaluate schedulers (fixed policies and trained agents) on the same held-out workloads."""

from __future__ import annotations

import pandas as pd

from geo_gym.runner import simulate

METRICS = ("avg_jct_h", "p50_jct_h", "p99_jct_h", "avg_wait_h", "makespan_h", "total_cost", "failures")


def evaluate(policies: dict, scenario, seeds, scenario_kwargs=None, env_kwargs=None) -> pd.DataFrame:
    """One row per (policy, seed) with the episode summary."""
    rows = []
    for name, policy in policies.items():
        for seed in seeds:
            res = simulate(scenario, policy, seed=int(seed), scenario_kwargs=scenario_kwargs, env_kwargs=env_kwargs)
            rows.append({"policy": name, "seed": int(seed), **{m: res.summary[m] for m in METRICS}})
    return pd.DataFrame(rows)


def comparison_table(df: pd.DataFrame, reference: str = "bace_pipe") -> pd.DataFrame:
    """Mean over seeds per policy, plus avg JCT and cost normalised to ``reference`` seed by seed."""
    ref = df[df.policy == reference].set_index("seed")
    df = df.copy()
    df["jct_vs_ref"] = df["avg_jct_h"].to_numpy() / ref.loc[df.seed, "avg_jct_h"].to_numpy()
    df["cost_vs_ref"] = df["total_cost"].to_numpy() / ref.loc[df.seed, "total_cost"].to_numpy()
    columns = ["avg_jct_h", "total_cost", "jct_vs_ref", "cost_vs_ref", "failures"]
    table = df.groupby("policy", sort=False)[columns].mean()
    return table.sort_values("jct_vs_ref")
