"""The evaluation protocol (docs/design.md): a learned agent against the strongest fixed policy
of its own action space, not only against BACE-Pipe.

Every queue order (FCFS, SJF, BACE-Pipe's Eq. 12 priority and Helios' QSSF; ``orders`` may
name fewer) x every placement rule of the env's action space is a fixed policy. The best of them is chosen on validation seeds, by the objective
the agent is trained on (its episode return is minus this over a constant of the workload):

    objective = N x avg JCT (h) + cost_weight x total cost ($)

and is then compared with the agent on separate test seeds, seed by seed. The ratio that counts
is agent / best fixed in that objective (the ratio of the means over the paired test seeds), with
a seeded bootstrap 95% confidence interval over those seeds.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd

from agents.evaluation import evaluate
from baselines.policies import FixedPolicy
from geo_gym.placement import rule_set

# Every queue order of baselines.FixedPolicy: the default family. Documented runs measured
# before QSSF joined it name ``--protocol-orders fcfs sjf priority`` (docs/training.md).
ORDERS = ("fcfs", "sjf", "priority", "qssf")


def check_orders(orders: Sequence[str]) -> tuple[str, ...]:
    """``orders`` as a tuple: one or more distinct names of ``ORDERS`` (ValueError naming the
    first that is not)."""
    orders = tuple(orders)
    if not orders:
        raise ValueError(f"give at least one of {', '.join(ORDERS)}")
    for i, order in enumerate(orders):
        if order not in ORDERS:
            raise ValueError(f"{order!r} is not a queue order; choose from {', '.join(ORDERS)}")
        if order in orders[:i]:
            raise ValueError(f"{order!r} is given twice")
    return orders


def order_rule_policies(orders: Sequence[str] = ORDERS, rules=None) -> dict[str, FixedPolicy]:
    """Every queue order of ``orders`` x placement rule of the option set ``rules`` (the env's:
    ``geo_gym.placement.rule_set``), named "<order>+<rule>"."""
    return {f"{o}+{r}": FixedPolicy(f"{o}+{r}", o, r, rules=rules)
            for o in check_orders(orders) for r in rule_set(rules)}


def objective(avg_jct_h: float, total_cost: float, num_jobs: int, cost_weight: float) -> float:
    """N x avg JCT + cost_weight x total cost: minus the episode return times its scale."""
    return num_jobs * avg_jct_h + cost_weight * total_cost


def with_objective(runs: pd.DataFrame, cost_weight: float) -> pd.DataFrame:
    """``agents.evaluation.evaluate``'s rows (a policy and seed each) with their ``objective``."""
    return runs.assign(objective=objective(runs.avg_jct_h, runs.total_cost, runs.num_jobs, cost_weight))


def run_objectives(policies: dict, scenario, seeds: Sequence[int], cost_weight: float,
                   scenario_kwargs=None, env_kwargs=None) -> pd.DataFrame:
    """One row per (policy, seed): the episode summary and its objective."""
    return with_objective(evaluate(policies, scenario, seeds, scenario_kwargs, env_kwargs), cost_weight)


def select_best_fixed(scenario, validation_seeds: Sequence[int], cost_weight: float,
                      scenario_kwargs=None, env_kwargs=None, orders: Sequence[str] = ORDERS) -> tuple[str, pd.DataFrame]:
    """(name, per-policy mean objective on ``validation_seeds``) of the order x rule policy
    (an order of ``orders``, a rule of the env's option set, ``env_kwargs["rules"]``) with the
    lowest mean objective there (ties: the earlier in ``order_rule_policies``)."""
    rules = (env_kwargs or {}).get("rules")
    runs = run_objectives(order_rule_policies(orders, rules), scenario, validation_seeds, cost_weight,
                          scenario_kwargs, env_kwargs)
    means = runs.groupby("policy", sort=False)["objective"].mean()
    return str(means.idxmin()), means.rename("validation_objective").to_frame()


def paired_ratio(agent: np.ndarray, fixed: np.ndarray, n_boot: int = 2000, seed: int = 0) -> dict:
    """Agent / best fixed on paired seeds: the ratio of the mean objectives and its bootstrap 95%
    interval (seeds resampled with replacement, percentile interval, seeded; NaN with one
    seed, where there is nothing to resample), and the mean per-seed relative difference."""
    agent, fixed = np.asarray(agent, float), np.asarray(fixed, float)
    if agent.shape != fixed.shape or agent.ndim != 1 or agent.size < 1:
        raise ValueError(f"need paired 1-D objectives of the same seeds, got {agent.shape} and {fixed.shape}")
    if agent.size == 1:
        ratio = float(agent[0] / fixed[0])
        return {"ratio": ratio, "ci_low": np.nan, "ci_high": np.nan,
                "mean_relative_difference": ratio - 1.0, "seeds": 1}
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, agent.size, size=(n_boot, agent.size))
    boot = agent[idx].mean(axis=1) / fixed[idx].mean(axis=1)
    low, high = np.percentile(boot, [2.5, 97.5])
    return {
        "ratio": float(agent.mean() / fixed.mean()),
        "ci_low": float(low),
        "ci_high": float(high),
        "mean_relative_difference": float(np.mean(agent / fixed - 1.0)),
        "seeds": int(agent.size),
    }
