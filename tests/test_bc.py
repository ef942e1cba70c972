"""Behaviour cloning as PPO's warm start (agents/bc.py): what the demonstrations hold, that
cloning makes the agent act as its teacher, and the run options (--bc-steps, --bc-learning-rate)."""

from __future__ import annotations

import inspect
import json
import shutil
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch
from sb3_contrib import MaskablePPO

from agents import bc
from agents.protocol import order_rule_policies
from agents.run import TrainSettings, behaviour_clone, resolved, workloads
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
           "--learning-rate", "1e-4", "--bc-learning-rate", "1e-3", "--clip-range", "0.1", "--bc-steps", "256", "--bc-epochs", "2", "--bc-teacher", "sjf", "--warmup-workloads", "0",
           "--features", "attention"]
    out = subprocess.run(cmd, cwd=tmp_path, capture_output=True, text=True, timeout=900)
    assert out.returncode == 0, out.stderr[-3000:]
    assert "behaviour cloning of sjf: " in out.stdout and "2 passes at learning rate 0.001," in out.stdout
    run = tmp_path / "runs" / "bc"
    assert list(pd.read_csv(run / "bc.csv").epoch) == [0, 1]
    assert list(pd.read_csv(run / "eval.csv").timesteps) == [0, 512]  # the cloned policy, then the end
    model = load_model("maskable-ppo", run / "last.zip")
    assert type(model.policy.features_extractor).__name__ == "SlotAttention"
    # PPO ran at --learning-rate and --clip-range, not at the cloning's step size
    assert model.learning_rate == 1e-4 and model.policy.optimizer.param_groups[0]["lr"] == 1e-4
    assert model.clip_range(1.0) == 0.1
    settings = json.loads((run / "settings.json").read_text())
    assert settings["bc_learning_rate"] == 1e-3 and settings["clip_range"] == 0.1 and settings["learning_rate"] == 1e-4
    # a resume keeps them: the same flags continue the run, another value is an error naming the flag
    shutil.copytree(run, tmp_path / "runs" / "again")
    resume = [*cmd[:3], "again", cmd[4], "1024", *cmd[6:], "--resume"]
    resumed = subprocess.run(resume, cwd=tmp_path, capture_output=True, text=True, timeout=900)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert "trained 1024 steps" in resumed.stdout and "behaviour cloning" not in resumed.stdout
    for flag, value, was in (("--bc-learning-rate", "3e-4", "0.001"), ("--clip-range", "0.2", "0.1")):
        changed = subprocess.run([*resume, flag, value], cwd=tmp_path, capture_output=True, text=True, timeout=900)
        assert changed.returncode != 0 and "Traceback" not in changed.stderr
        assert f"{flag} {float(value)!r} (the run has {was})" in changed.stderr
    bad = subprocess.run([*cmd[:-8], "--bc-teacher", "nobody"], cwd=tmp_path, capture_output=True, text=True, timeout=900)
    assert bad.returncode != 0 and "--bc-teacher 'nobody': not a policy" in bad.stderr
    assert "Traceback" not in bad.stderr


def test_bc_learning_rate_is_the_cloning_step_and_ppo_keeps_its_own(tmp_path: Path) -> None:
    # the defaults change nothing documented: cloning at PPO's rate, SB3's clip range
    assert TrainSettings().bc_learning_rate is None
    assert TrainSettings().clip_range == inspect.signature(MaskablePPO).parameters["clip_range"].default
    s = resolved(TrainSettings(num_envs=4, n_steps=64, bc_steps=256, bc_epochs=2, warmup_workloads=0,
                               learning_rate=1e-4))
    w = workloads(s)
    env_kwargs = {**ENV, "start_rule": s.start_rule}

    def cloned(bc_learning_rate):
        model = make_model("maskable-ppo", make_vec_env(4, "recurring", **env_kwargs), seed=0, tensorboard_log=None,
                           n_steps=64, batch_size=64, learning_rate=s.learning_rate)
        behaviour_clone(model, TEACHER, replace(s, bc_learning_rate=bc_learning_rate), w, env_kwargs, tmp_path,
                        log=lambda line: None)
        lr = model.policy.optimizer.param_groups[0]["lr"]
        return model, pd.read_csv(tmp_path / "bc.csv"), lr

    default, default_history, default_lr = cloned(None)
    same, same_history, _ = cloned(1e-4)
    fast, fast_history, fast_lr = cloned(3e-3)
    assert default_lr == 1e-4 and fast_lr == 3e-3
    pd.testing.assert_frame_equal(default_history, same_history)  # None is --learning-rate
    for a, b in zip(default.policy.parameters(), same.policy.parameters(), strict=True):
        assert torch.equal(a, b)
    assert not np.allclose(fast_history.actor_loss, default_history.actor_loss)
    assert any(not torch.equal(a, b) for a, b in zip(default.policy.parameters(), fast.policy.parameters(), strict=True))
    fast.learn(256)  # PPO's first update sets its own step size again
    assert fast.policy.optimizer.param_groups[0]["lr"] == 1e-4
