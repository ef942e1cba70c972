"""Evaluate schedulers (fixed policies and trained agents) on the same held-out workloads.

The one table format of the project (scripts/evaluate.py, scripts/train_ppo.py): a row per
policy, means over seeds, ranked by the mean average JCT; each metric is also divided by the
reference policy's (BACE-Pipe) on the same seed and these per-seed ratios are averaged, in
columns named ``<short>_vs_<reference>`` (``jct_vs_bace_pipe``, ``cost_vs_bace_pipe``, ...).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from geo_gym.runner import summarize

METRICS = ("avg_jct_h", "p50_jct_h", "p99_jct_h", "avg_wait_h", "makespan_h", "total_cost", "failures")
REFERENCE = "bace_pipe"
# the short name of each metric in its ratio column: <short>_vs_<reference>
SHORT = {
    "avg_jct_h": "jct", "p50_jct_h": "p50", "p99_jct_h": "p99", "avg_wait_h": "wait",
    "makespan_h": "makespan", "total_cost": "cost", "failures": "failures",
}
# what a terminal table shows (the CSVs keep every column)
KEY_COLUMNS = ("avg_jct_h", "total_cost", f"jct_vs_{REFERENCE}", f"cost_vs_{REFERENCE}")


def ratio_name(metric: str, reference: str = REFERENCE) -> str:
    return f"{SHORT[metric]}_vs_{reference}"


def evaluate(policies: dict, scenario, seeds, scenario_kwargs=None, env_kwargs=None) -> pd.DataFrame:
    """One row per (policy, seed) with the episode summary. ``scenario``: a name or Scenario
    for every seed, or a list of Scenarios, one per seed (e.g. held-out trace windows)."""
    seeds = list(seeds)
    if isinstance(scenario, list | tuple):
        if len(scenario) != len(seeds):
            raise ValueError(f"{len(scenario)} scenarios for {len(seeds)} seeds: give one per seed")
        workloads = list(scenario)
    else:
        workloads = [scenario] * len(seeds)
    rows = []
    for name, policy in policies.items():
        for seed, workload in zip(seeds, workloads, strict=True):
            summary = summarize(workload, policy, seed=int(seed), scenario_kwargs=scenario_kwargs, env_kwargs=env_kwargs)
            rows.append({"policy": name, "seed": int(seed), **{m: summary[m] for m in METRICS},
                         "num_jobs": summary["num_jobs"]})
    return pd.DataFrame(rows)


def add_ratios(runs: pd.DataFrame, metrics=METRICS, reference: str = REFERENCE) -> pd.DataFrame:
    """``runs`` (a row per policy and seed) with each metric divided by ``reference``'s on the
    same seed, in ``ratio_name(metric)`` columns (NaN where the reference's value is 0)."""
    if reference not in set(runs.policy):
        raise ValueError(f"no {reference!r} rows to normalise by; policies: {sorted(set(runs.policy))}")
    ref = runs[runs.policy == reference].set_index("seed")
    runs = runs.copy()
    for metric in metrics:
        den = ref.loc[runs.seed, metric].to_numpy(dtype=float)
        num = runs[metric].to_numpy(dtype=float)
        with np.errstate(divide="ignore", invalid="ignore"):
            runs[ratio_name(metric, reference)] = np.where(den != 0, num / den, np.nan)
    return runs


def rank(table: pd.DataFrame) -> pd.DataFrame:
    """Rows by mean average JCT, best first (ties keep the input order)."""
    return table.sort_values("avg_jct_h", kind="stable")


def comparison_table(df: pd.DataFrame, reference: str = REFERENCE) -> pd.DataFrame:
    """Mean over seeds per policy, plus avg JCT and cost normalised to ``reference`` seed by seed
    (``jct_vs_bace_pipe``, ``cost_vs_bace_pipe``), ranked by mean avg JCT."""
    df = add_ratios(df, ("avg_jct_h", "total_cost"), reference)
    columns = ["avg_jct_h", "total_cost", ratio_name("avg_jct_h", reference),
               ratio_name("total_cost", reference), "failures"]
    return rank(df.groupby("policy", sort=False)[columns].mean())
