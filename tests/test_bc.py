"""Behaviour cloning as PPO's warm start (agents/bc.py): what the demonstrations hold, that
cloning makes the agent act as its teacher, and the run option (--bc-steps)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch

from agents import bc
from agents.protocol import order_rule_policies
from agents.training import load_model, make_model, make_vec_env

ROOT = Path(__file__).resolve().parents[1]
TEACHER = order_rule_policies()["priority+pathfinder_quarter"]
ENV = {"uncertainty": "realistic", "warmup_workloads": 0, "window": 8, "cost_weight": 0.1}


@pytest.fixture(scope="module")
def demos() -> bc.Demonstrations:
    return bc.collect(TEACHER, 1024, 4, "recurring", seed=7, **ENV)


def test_demonstrations_are_the_teachers_valid_decisions_with_their_returns(demos) -> None:
    assert 0.9 * 1024 <= len(demos) <= 1024
    assert demos.masks[np.arange(len(demos)), demos.actions].all()  # every kept action is allowed
    np.testing.assert_array_equal(TEACHER.predict(demos.obs)[0], demos.actions)
    # returns: finite for the episodes that ended (gamma = 1: minus the rest of the episode's
    # objective over its scale, never positive), NaN for those the collection cut off
    known = np.isfinite(demos.returns)
    assert 0.5 < known.mean() < 1.0 and (demos.returns[known] <= 0).all()
    again = bc.collect(TEACHER, 1024, 4, "recurring", seed=7, **ENV)
    np.testing.assert_array_equal(again.obs, demos.obs)
    np.testing.assert_array_equal(again.returns, demos.returns)


def test_returns_add_up_the_rewards_of_the_rest_of_the_episode() -> None:
    env_kwargs = {**ENV}
    d = bc.collect(TEACHER, 400, 1, "recurring", seed=3, **env_kwargs)
    venv = make_vec_env(1, "recurring", seed=3, **env_kwargs)
    obs, rewards = venv.reset(), []
    for t in range(len(d)):  # one env, nothing masked away by this teacher here
        np.testing.assert_array_equal(obs[0], d.obs[t])
        obs, r, done, _ = venv.step(np.array([d.actions[t]]))
        rewards.append(float(r[0]))
        if done[0]:
            break
    assert d.returns[0] == pytest.approx(sum(rewards), rel=1e-5)
    assert d.returns[1] == pytest.approx(sum(rewards[1:]), rel=1e-5)


def test_cloning_makes_the_agent_act_as_its_teacher(demos) -> None:
    torch.manual_seed(0)
    model = make_model("maskable-ppo", make_vec_env(4, "recurring", **ENV), seed=0, tensorboard_log=None, n_steps=64)
    def agreement() -> float:
        actions, _ = model.predict(demos.obs, action_masks=demos.masks, deterministic=True)
        return float((actions == demos.actions).mean())

    before = agreement()  # about one valid option in 18 per decision
    history = bc.clone(model, demos, epochs=15, batch_size=128, seed=0, learning_rate=1e-3)
    assert history[-1]["actor_loss"] < 0.5 * history[0]["actor_loss"]
    assert history[-1]["value_loss"] < history[0]["value_loss"]
    assert before < 0.3 and agreement() >= 0.8


def test_train_ppo_with_behaviour_cloning_writes_its_history_and_evaluates_the_start(tmp_path: Path) -> None:
    cmd = [sys.executable, str(ROOT / "scripts" / "train_ppo.py"), "--name", "bc", "--timesteps", "512",
           "--num-envs", "4", "--n-steps", "128", "--eval-seeds", "1", "--final-seeds", "2", "--no-progress",
           "--bc-steps", "256", "--bc-epochs", "2", "--bc-teacher", "sjf", "--warmup-workloads", "0",
           "--features", "attention"]
    out = subprocess.run(cmd, cwd=tmp_path, capture_output=True, text=True, timeout=900)
    assert out.returncode == 0, out.stderr[-3000:]
    assert "behaviour cloning of sjf" in out.stdout
    run = tmp_path / "runs" / "bc"
    assert list(pd.read_csv(run / "bc.csv").epoch) == [0, 1]
    assert list(pd.read_csv(run / "eval.csv").timesteps) == [0, 512]  # the cloned policy, then the end
    assert type(load_model("maskable-ppo", run / "last.zip").policy.features_extractor).__name__ == "SlotAttention"
    bad = subprocess.run([*cmd[:-8], "--bc-teacher", "nobody"], cwd=tmp_path, capture_output=True, text=True, timeout=900)
    assert bad.returncode != 0 and "--bc-teacher 'nobody': not a policy" in bad.stderr
    assert "Traceback" not in bad.stderr
