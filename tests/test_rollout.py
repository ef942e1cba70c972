"""The rollout yardstick (agents/rollout.py, scripts/headroom.py): its rollouts are the
protocol's fixed policies, run from the env's state without touching it."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import geo_gym
from agents.protocol import order_rule_policies
from agents.rollout import RolloutScheduler, rollout_episode
from geo_gym import sim
from geo_gym.env import GeoPipeEnv

ROOT = Path(__file__).resolve().parents[1]
KW = {"uncertainty": "realistic", "warmup_workloads": 1}


def test_a_rollout_from_reset_is_the_fixed_policys_own_episode():
    policy = order_rule_policies()["priority+pathfinder_quarter"]
    for seed in (3, 4):
        s = geo_gym.simulate("recurring", policy, seed=seed, env_kwargs=KW).summary
        env = GeoPipeEnv("recurring", cost_weight=0.1, job_records=False, **KW)
        env.reset(seed=seed)
        assert RolloutScheduler(env, [policy], 0.1).base_objective() == pytest.approx(
            s["num_jobs"] * s["avg_jct_h"] + 0.1 * s["total_cost"], rel=1e-12)


def test_rollouts_leave_the_env_as_it_was():
    env = GeoPipeEnv("recurring", cost_weight=0.1, job_records=False, **KW)
    env.reset(seed=2)
    scheduler = RolloutScheduler(env, list(order_rule_policies().values())[:4], 0.1)
    for _ in range(5):
        before = {name: getattr(env.core, name).copy() for name in sim.FIELDS}
        action = scheduler.act()
        assert all(np.array_equal(getattr(env.core, name), before[name], equal_nan=True) for name in sim.FIELDS)
        assert env.action_masks()[action]
        env.step(action)
    assert scheduler.rollouts > 5


def test_the_rollout_policy_is_seeded_and_no_worse_than_its_base_on_a_small_workload():
    one = rollout_episode("paper-default", 5, ["fcfs+pathfinder"], 0.1)
    assert one == rollout_episode("paper-default", 5, ["fcfs+pathfinder"], 0.1)
    base = geo_gym.simulate("paper-default", order_rule_policies()["fcfs+pathfinder"], seed=5).summary
    # every job is queued at t = 0 and the window holds all eight: the base's own first start is an action
    assert one["objective"] <= 8 * base["avg_jct_h"] + 0.1 * base["total_cost"] + 1e-9
    with pytest.raises(ValueError, match="unknown base policy \\['fifo\\+lcf'\\]"):
        rollout_episode("paper-default", 5, ["fifo+lcf"], 0.1)


def test_a_deeper_rollout_is_no_worse_than_the_one_it_finishes_with():
    """Depth 2 tries every action and finishes with the depth-1 policy, whose own action is
    among them: in an env whose every random number is drawn at reset it cannot end worse."""
    one = rollout_episode("paper-default", 5, ["fcfs+pathfinder"], 0.1)
    two = rollout_episode("paper-default", 5, ["fcfs+pathfinder"], 0.1, depth=2)
    assert two["objective"] <= one["objective"] + 1e-9
    assert two["rollouts"] > 10 * one["rollouts"]
    with pytest.raises(ValueError, match="depth must be an integer >= 1, got 0"):
        rollout_episode("paper-default", 5, ["fcfs+pathfinder"], 0.1, depth=0)


def test_headroom_script_writes_the_protocols_ratios(tmp_path):
    out = tmp_path / "hr"
    done = subprocess.run(
        [sys.executable, "scripts/headroom.py", "--scenario", "paper-default", "--uncertainty", "perfect",
         "--warmup-workloads", "0", "--seeds", "2", "--protocol-orders", "fcfs", "qssf", "--out", str(out)],
        cwd=ROOT, capture_output=True, text=True, timeout=300,
    )
    assert done.returncode == 0, done.stderr
    summary = json.loads((out / "headroom.json").read_text())
    assert summary["orders"] == ["fcfs", "qssf"] and summary["best_fixed"].split("+")[0] in ("fcfs", "qssf")
    validation = pd.read_csv(out / "validation.csv")
    assert {name.split("+")[0] for name in validation.iloc[:, 0]} == {"fcfs", "qssf"}
    policies = summary["policies"]
    assert set(policies) == {f"best fixed ({summary['best_fixed']})", "rollout (best fixed)", "rollout (all fixed)"}
    assert policies[f"best fixed ({summary['best_fixed']})"]["ratio"] == 1.0
    assert summary["test_seeds"] == [1_010_000, 1_010_001]
    bad = subprocess.run([sys.executable, "scripts/headroom.py", "--seeds", "0"], cwd=ROOT,
                         capture_output=True, text=True, timeout=120)
    assert bad.returncode == 2 and "--seeds" in bad.stderr and "Traceback" not in bad.stderr
    # a bad combination is refused at once, before any policy runs
    bad = subprocess.run([sys.executable, "scripts/headroom.py", "--futures", "2"], cwd=ROOT,
                         capture_output=True, text=True, timeout=60)
    assert bad.returncode == 2 and "--futures needs --blind" in bad.stderr and "best fixed" not in bad.stdout
    bad = subprocess.run([sys.executable, "scripts/headroom.py", "--protocol-orders", "sjf", "sjf"], cwd=ROOT,
                         capture_output=True, text=True, timeout=60)
    assert bad.returncode == 2 and "--protocol-orders: 'sjf' is given twice" in bad.stderr


def test_rollout_demonstrations_replay_to_their_returns():
    """agents.rollout.collect: whole episodes of the rollout policy's valid decisions, whose
    actions replayed on the same seed give the same observations and the recorded returns."""
    from agents.rollout import collect

    env_kwargs = {"uncertainty": "realistic", "warmup_workloads": 0, "window": 8}
    base = order_rule_policies()["priority+pathfinder_quarter"]
    demos = collect([base], 50, "recurring", seed=9, cost_weight=0.1, **env_kwargs)
    assert len(demos) >= 50 and demos.masks[np.arange(len(demos)), demos.actions].all()
    env = GeoPipeEnv("recurring", cost_weight=0.1, job_records=False, **env_kwargs)
    obs, _ = env.reset(seed=9)
    rewards = []
    for t in range(len(demos)):
        np.testing.assert_array_equal(obs, demos.obs[t])
        obs, reward, terminated, _, _ = env.step(int(demos.actions[t]))
        rewards.append(reward)
        if terminated:
            break
    assert demos.returns[0] == pytest.approx(sum(rewards), rel=1e-9)
    assert demos.returns[len(rewards) - 1] == pytest.approx(rewards[-1], rel=1e-9)


def test_train_ppo_clones_the_rollout_teacher(tmp_path):
    cmd = [sys.executable, str(ROOT / "scripts" / "train_ppo.py"), "--name", "ro", "--timesteps", "256",
           "--num-envs", "2", "--n-steps", "128", "--eval-seeds", "1", "--final-seeds", "2", "--no-progress",
           "--bc-steps", "64", "--bc-epochs", "1", "--bc-teacher", "rollout", "--warmup-workloads", "0"]
    out = subprocess.run(cmd, cwd=tmp_path, capture_output=True, text=True, timeout=900)
    assert out.returncode == 0, out.stderr[-3000:]
    assert "behaviour cloning of the rollout over " in out.stdout
    assert json.loads((tmp_path / "runs" / "ro" / "settings.json").read_text())["bc_teacher"] == "rollout"


def test_a_blind_rollout_is_the_clairvoyant_one_when_nothing_is_hidden():
    """paper-default under perfect information: every job is submitted at t = 0 and its
    prediction is its length, so the blind rollout knows everything and acts the same."""
    blind = rollout_episode("paper-default", 4, ["fcfs+pathfinder"], 0.1, clairvoyant=False)
    assert blind == rollout_episode("paper-default", 4, ["fcfs+pathfinder"], 0.1)
    with pytest.raises(ValueError, match="blind rollout"):
        rollout_episode("paper-default", 4, ["fcfs+pathfinder"], 0.1, depth=2, clairvoyant=False)


def test_blinding_hides_the_arrivals_to_come_the_true_lengths_and_the_failures():
    from agents.rollout import _blind

    env = GeoPipeEnv("recurring", cost_weight=0.1, job_records=False,
                     uncertainty={"failure_rate_per_gpu_hour": 0.01}, warmup_workloads=0)
    env.reset(seed=6)
    for _ in range(30):  # into the episode: some jobs running, some still to come
        env.step(int(np.flatnonzero(env.action_masks())[0]))
    c = sim.allocate(1, env.num_regions, env.core.submit_s.shape[1], env.core.failure_draws.shape[2])
    for name in sim.FIELDS:
        np.copyto(getattr(c, name), getattr(env.core, name))
    _blind(c)
    n = int(env.core.next_arrival[0])
    assert 0 < n < int(env.core.n_jobs[0]) and int(c.n_jobs[0]) == n
    assert np.array_equal(c.iters[0, :n], np.maximum(env.core.pred_iters[0, :n], env.core.done_iters[0, :n]))
    running = env.core.status[0, :n] == sim.RUNNING
    assert running.any() and np.isinf(c.fail_s[0, :n][running]).all() and np.isinf(c.failure_draws).all()
    assert (c.end_s[0, :n][running] >= c.now_s[0]).all()


def test_sampled_futures_append_another_workloads_later_arrivals():
    from agents.rollout import _append_future, _blind

    env = GeoPipeEnv("recurring", cost_weight=0.1, job_records=False, uncertainty="realistic", warmup_workloads=0)
    env.reset(seed=6)
    while int(env.core.next_arrival[0]) < 20:  # into the episode, with jobs still to come
        env.step(int(np.flatnonzero(env.action_masks())[0]))
    sizes = sim._sizes(env.core)
    c, sample = (sim.allocate(1, env.num_regions, sizes["J"], sizes["A"], sizes["S"], sizes["D"]) for _ in range(2))
    for name in sim.FIELDS:
        np.copyto(getattr(c, name), getattr(env.core, name))
    from geo_gym import loading

    loading._load(sample, 0, env._checked_scenario(123), np.random.default_rng(123), env.uncertainty,
                  loading._derived(env.uncertainty), [])
    _blind(c)
    n = int(c.n_jobs[0])
    _append_future(c, sample)
    later = np.flatnonzero(sample.submit_s[0, : int(sample.n_jobs[0])] > c.now_s[0])[: sizes["J"] - n]
    m = int(c.n_jobs[0]) - n
    assert m == later.size > 0
    np.testing.assert_array_equal(c.submit_s[0, n:n + m], sample.submit_s[0, later])
    np.testing.assert_array_equal(c.iters[0, n:n + m], sample.pred_iters[0, later])  # what the scheduler is told
    assert (c.status[0, n:n + m] == sim.PENDING_FUTURE).all() and np.isinf(c.failure_draws[0, n:n + m]).all()


def test_a_rollout_over_sampled_futures_is_seeded_and_blind_only():
    kw = {"uncertainty": "realistic", "warmup_workloads": 0, "scenario_kwargs": {"num_jobs": 12}}
    one = rollout_episode("recurring", 3, ["priority+pathfinder_quarter"], 0.1, kw.pop("scenario_kwargs"),
                          kw, clairvoyant=False, futures=2)
    again = rollout_episode("recurring", 3, ["priority+pathfinder_quarter"], 0.1, {"num_jobs": 12}, kw,
                            clairvoyant=False, futures=2)
    assert one == again and one["rollouts"] > 0
    with pytest.raises(ValueError, match="futures"):
        rollout_episode("recurring", 3, ["priority+pathfinder_quarter"], 0.1, {"num_jobs": 12}, kw, futures=2)
