"""The evaluation protocol: best fixed policy chosen on validation seeds only, paired CIs."""

from __future__ import annotations

import numpy as np
import pytest

from agents import protocol
from geo_gym.placement import RULE_NAMES, RULE_SETS


def test_every_order_and_rule_is_a_candidate():
    names = list(protocol.order_rule_policies())
    assert len(names) == 4 * len(RULE_NAMES) and "priority+pathfinder" in names and "qssf+pathfinder_quarter" in names


def test_orders_choose_the_family_and_bad_orders_are_named():
    names = list(protocol.order_rule_policies(("qssf", "fcfs")))
    assert len(names) == 2 * len(RULE_NAMES) and names[0] == "qssf+pathfinder"
    assert {name.split("+")[0] for name in names} == {"qssf", "fcfs"}
    for orders, word in [(("lifo",), "'lifo'"), (("sjf", "sjf"), "twice"), ((), "at least one")]:
        with pytest.raises(ValueError, match=word):
            protocol.order_rule_policies(orders)


def test_best_fixed_is_chosen_among_the_given_orders():
    best, means = protocol.select_best_fixed("paper-default", [11], cost_weight=0.1, orders=("qssf",))
    assert best.startswith("qssf+") and list(means.index) == [f"qssf+{rule}" for rule in RULE_NAMES]


def test_the_training_flags_know_the_protocols_orders():
    # agents/run.py spells them out so that its flags answer without importing the protocol
    from agents import run

    assert run.PROTOCOL_ORDERS == protocol.ORDERS
    assert run.RULE_SETS == tuple(RULE_SETS)


def test_best_fixed_is_chosen_on_the_validation_seeds_only(monkeypatch):
    from agents import evaluation

    seen = []
    real = evaluation.summarize

    def spy(scenario, policy, seed, **kwargs):
        seen.append(seed)
        return real(scenario, policy, seed=seed, **kwargs)

    monkeypatch.setattr(evaluation, "summarize", spy)
    best, means = protocol.select_best_fixed("paper-default", [11, 12], cost_weight=0.1)
    assert set(seen) == {11, 12}  # never a test seed
    assert best == means["validation_objective"].idxmin() and len(means) == 4 * len(RULE_NAMES)
    # it is the lowest mean objective: recompute one rival by hand
    rival = protocol.run_objectives({"x": protocol.order_rule_policies()["fcfs+lcf"]}, "paper-default", [11, 12], 0.1)
    assert means.loc[best, "validation_objective"] <= rival.objective.mean()


def test_the_objective_is_the_trained_one():
    # N x avg JCT + w x cost: minus the episode return times its scale (env.py, Rewards)
    assert protocol.objective(2.0, 100.0, 8, 0.1) == pytest.approx(8 * 2.0 + 0.1 * 100.0)


def test_paired_ratio_and_its_seeded_interval():
    agent = np.array([90.0, 80.0, 110.0, 95.0])
    fixed = np.array([100.0, 100.0, 100.0, 100.0])
    out = protocol.paired_ratio(agent, fixed, seed=3)
    assert out["ratio"] == pytest.approx(agent.mean() / fixed.mean())
    assert out["ci_low"] <= out["ratio"] <= out["ci_high"] and out["ci_high"] - out["ci_low"] > 0
    assert out == protocol.paired_ratio(agent, fixed, seed=3)  # same seed, same interval
    assert protocol.paired_ratio(fixed, fixed)["ci_low"] == protocol.paired_ratio(fixed, fixed)["ci_high"] == 1.0
    with pytest.raises(ValueError, match="paired"):
        protocol.paired_ratio(agent, fixed[:3])
    one = protocol.paired_ratio(agent[:1], fixed[:1])
    assert one["ratio"] == 0.9 and np.isnan(one["ci_low"]) and one["seeds"] == 1
