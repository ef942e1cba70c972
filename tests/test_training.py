"""The training pipeline end to end on a tiny budget (not a timed test)."""

import json
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from stable_baselines3.common.callbacks import BaseCallback

from agents.policy import AgentPolicy, unvalidated_distributions
from agents.training import (
    CheckpointError,
    CheckpointLast,
    load_model,
    make_model,
    make_vec_env,
    verify_checkpoint,
)
from geo_gym.env import GeoPipeEnv

ROOT = Path(__file__).resolve().parents[1]


def test_train_script_checkpoints_resumes_and_reports(tmp_path):
    cmd = [
        sys.executable, str(ROOT / "scripts" / "train_ppo.py"), "--name", "t", "--timesteps", "2048",
        "--num-envs", "4", "--n-steps", "128", "--eval-every", "1024", "--checkpoint-every", "512",
        "--eval-seeds", "2", "--final-seeds", "2", "--no-progress", "--protocol-orders", "qssf", "priority",
    ]
    out = subprocess.run(cmd, cwd=tmp_path, capture_output=True, text=True, timeout=900)
    assert out.returncode == 0, out.stderr[-3000:]
    run = tmp_path / "runs" / "t"
    assert (run / "last.zip").exists() and any((run / "tb").rglob("events.out.tfevents.*"))
    table = pd.read_csv(run / "comparison.csv", index_col=0)
    assert {"agent", "bace_pipe", "lcf", "random"} <= set(table.index)
    jct_vs = next(c for c in table.columns if c.startswith("jct_vs_"))  # jct_vs_<reference>
    assert table.loc["bace_pipe", jct_vs] == 1.0
    # the best fixed policy, chosen among the given orders on validation seeds that are not the test seeds
    best = [p for p in table.index if p.startswith("best fixed (")]
    protocol = json.loads((run / "protocol.json").read_text())
    assert best == [f"best fixed ({protocol['best_fixed']})"]
    assert protocol["orders"] == ["qssf", "priority"] and protocol["best_fixed"].split("+")[0] in ("qssf", "priority")
    (v0, v1), (t0, t1) = protocol["validation_seeds"], protocol["test_seeds"]
    assert v1 < t0 or t1 < v0  # disjoint
    assert protocol["objective_ratio"]["seeds"] == 2 and "agent / best fixed" in out.stdout
    evals = pd.read_csv(run / "eval.csv")
    assert len(evals) >= 1 and (evals.bace_avg_jct_h > 0).all()
    assert {"agent_failures", "bace_failures", "jct_ratio", "cost_ratio"} <= set(evals.columns)
    # resume continues a copy of the run, from its checkpoint up to a larger budget, on the same
    # evaluation schedule, logging into its own folder (the zip remembers the original's)
    shutil.copytree(run, tmp_path / "runs" / "u")
    before = sorted((run / "tb").rglob("events.out.tfevents.*"))
    resume = cmd[:3] + ["u", cmd[4], "4096"] + cmd[6:] + ["--resume"]
    resumed = subprocess.run(resume, cwd=tmp_path, capture_output=True, text=True, timeout=900)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert "trained 4096 steps" in resumed.stdout
    assert pd.read_csv(tmp_path / "runs" / "u" / "eval.csv").timesteps.tolist() == [1024, 2048, 3072, 4096]
    assert sorted((run / "tb").rglob("events.out.tfevents.*")) == before
    assert len(list((tmp_path / "runs" / "u" / "tb").rglob("events.out.tfevents.*"))) > len(before)
    # a run lost after it wrote eval.csv, resumed from its last checkpoint at the full budget
    # (a Tune trial killed during its final table): the repeated evaluation replaces the row
    shutil.copytree(run, tmp_path / "runs" / "v")
    again = subprocess.run(cmd[:3] + ["v"] + cmd[4:] + ["--resume"], cwd=tmp_path, capture_output=True, text=True,
                           timeout=900)
    assert again.returncode == 0, again.stderr[-3000:]
    assert pd.read_csv(tmp_path / "runs" / "v" / "eval.csv").timesteps.tolist() == [1024, 2048]
    changed = subprocess.run(resume + ["--cost-weight", "0.5"], cwd=tmp_path, capture_output=True, text=True, timeout=900)
    assert changed.returncode != 0 and "--cost-weight 0.5" in changed.stderr
    changed = subprocess.run(resume[:-2] + ["--resume"], cwd=tmp_path, capture_output=True, text=True, timeout=900)
    assert changed.returncode != 0 and "--protocol-orders ['qssf']" in changed.stderr


def test_checkpoint_reload_gives_identical_actions(tmp_path):
    env = make_vec_env(2, "paper-default", seed=0)
    model = make_model("maskable-ppo", env, seed=0, tensorboard_log=None, n_steps=64, batch_size=64)
    model.learn(128)
    model.save(str(tmp_path / "m.zip"))
    again = load_model("maskable-ppo", tmp_path / "m.zip")
    single = GeoPipeEnv("paper-default")
    obs, _ = single.reset(seed=3)
    batch = np.stack([obs] + [single.step(single.wait_action if not single.action_masks()[0] else 0)[0] for _ in range(3)])
    a1, _ = AgentPolicy(model).predict(batch)
    a2, _ = AgentPolicy(again).predict(batch)
    assert np.array_equal(a1, a2)


def test_evaluate_script_compares_baselines_and_checkpoints(tmp_path):
    env = make_vec_env(2, "paper-fig1", seed=0, window=2)
    model = make_model("maskable-ppo", env, seed=0, tensorboard_log=None, n_steps=32, batch_size=32)
    model.learn(64)
    ckpt = tmp_path / "agentrun" / "last.zip"
    ckpt.parent.mkdir()
    model.save(str(ckpt))
    cmd = [
        sys.executable, str(ROOT / "scripts" / "evaluate.py"), "--policies", "lcf", "sjf", str(ckpt),
        "--scenario", "paper-fig1", "--window", "2", "--seeds", "2", "--uncertainty", "realistic",
        "--out", str(tmp_path / "out"), "--plot", "--validation-seeds", "2",
    ]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr[-3000:]
    table = pd.read_csv(tmp_path / "out" / "table.csv", index_col=0)
    best = [p for p in table.index if p.startswith("best fixed (")]  # the protocol's row
    assert len(best) == 1 and {"lcf", "sjf", f"agent ({ckpt})", "bace_pipe", *best} == set(table.index)
    assert table.loc["bace_pipe", "jct_vs_bace_pipe"] == 1.0
    assert (tmp_path / "out" / "jct_cdf.png").exists() and (tmp_path / "out" / "cost.png").exists()


class _Crash(BaseCallback):
    """Raise mid-training, as a killed process would stop (no end-of-training save)."""

    def __init__(self, at: int):
        super().__init__()
        self.at = at

    def _on_step(self) -> bool:
        if self.num_timesteps >= self.at:
            raise KeyboardInterrupt
        return True


def test_a_crash_loses_at_most_one_checkpoint_interval(tmp_path):
    env = make_vec_env(2, "paper-default", seed=0)
    model = make_model("maskable-ppo", env, seed=0, tensorboard_log=None, n_steps=64, batch_size=64)
    every, crash_at = 100, 700
    with pytest.raises(KeyboardInterrupt):
        model.learn(10_000, callback=[CheckpointLast(tmp_path / "last.zip", every), _Crash(crash_at)])
    saved = load_model("maskable-ppo", tmp_path / "last.zip")
    assert crash_at - every <= saved.num_timesteps <= crash_at
    assert not (tmp_path / "last-partial.zip").exists()  # the atomic write left no partial file


def test_the_agent_reads_the_layout_of_an_env_with_more_regions_than_the_size_tells():
    # The observation size alone would read MAX + 1 regions x window 8 as 1 region.
    from geo_gym.decision import MAX_INFERRED_REGIONS

    k = MAX_INFERRED_REGIONS + 1
    env = make_vec_env(2, "random", {"num_regions": k, "num_jobs": 6}, seed=0)
    model = make_model("maskable-ppo", env, seed=0, tensorboard_log=None, n_steps=32, batch_size=32)
    encoder = model.policy.features_extractor
    assert (encoder.num_regions, encoder.window) == (k, 8)
    obs = env.reset()
    actions, _ = AgentPolicy(model).predict(obs)
    assert env.action_masks()[np.arange(2), actions].all()


def test_distribution_checks_are_off_only_while_training_and_a_nan_policy_is_an_error():
    import torch

    checks = torch.distributions.Distribution._validate_args
    with pytest.raises(RuntimeError), unvalidated_distributions():
        assert torch.distributions.Distribution._validate_args is False
        raise RuntimeError
    assert torch.distributions.Distribution._validate_args is checks  # restored, even after an error
    env = make_vec_env(2, "paper-default", seed=0)
    model = make_model("maskable-ppo", env, seed=0, tensorboard_log=None, n_steps=32, batch_size=32)
    with torch.no_grad():
        model.policy.action_net.bias.fill_(float("nan"))
    with pytest.raises(ValueError, match="logits are NaN"):
        AgentPolicy(model).predict(env.reset())


def _truncate(path: Path) -> None:
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])


def test_resume_falls_back_to_the_previous_checkpoint_and_logs_progress(tmp_path):
    cmd = [
        sys.executable, str(ROOT / "scripts" / "train_ppo.py"), "--name", "t", "--timesteps", "512",
        "--num-envs", "2", "--n-steps", "64", "--eval-every", "256", "--checkpoint-every", "128",
        "--eval-seeds", "1", "--final-seeds", "1",
    ]
    # stdout is a pipe, not a terminal: progress lines instead of a progress bar
    out = subprocess.run(cmd, cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    lines = out.stdout.splitlines()
    assert [ln.split(",")[0] for ln in lines if ln.startswith("timesteps ")] == [
        f"timesteps {t}/512" for t in (128, 256, 384, 512)]
    assert any(ln.startswith("timesteps 256/512") and "x BACE-Pipe" in ln for ln in lines)
    wrote = next(ln for ln in lines if ln.startswith("wrote "))
    for name in ("last.zip", "previous.zip", "comparison.csv", "eval.csv", "curve.png", "settings.json", "tb/"):
        assert name in wrote
    run = tmp_path / "runs" / "t"
    # what decides the numbers besides the settings is recorded: the same seed trains another
    # agent on a CPU whose vector instructions differ (docs/training.md)
    import torch

    machine = json.loads((run / "settings.json").read_text())["machine"]
    assert machine["torch_cpu_capability"] == torch.backends.cpu.get_cpu_capability()
    assert machine["torch_threads"] == 1 and machine["torch"] == torch.__version__
    assert not (run / "last-partial.zip").exists()
    assert load_model("maskable-ppo", run / "previous.zip").num_timesteps == 512  # the save before the end's

    _truncate(run / "last.zip")
    resume = cmd[:5] + ["768"] + cmd[6:] + ["--no-progress", "--resume"]
    resumed = subprocess.run(resume, cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    note = [ln for ln in resumed.stdout.splitlines() if ln.startswith("--resume:")]
    assert len(note) == 1 and str(Path("runs/t/last.zip")) in note[0] and "previous.zip" in note[0]
    assert "trained 768 steps" in resumed.stdout and "timesteps 640/768" in resumed.stdout
    assert load_model("maskable-ppo", run / "last.zip").num_timesteps == 768

    _truncate(run / "last.zip")
    _truncate(run / "previous.zip")
    broken = subprocess.run(resume, cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert broken.returncode != 0 and "Traceback" not in broken.stderr
    error = broken.stderr.strip().splitlines()
    assert len(error) == 1 and "last.zip" in error[0] and "previous.zip" in error[0]


def test_verified_checkpoints_leave_training_unchanged(tmp_path):
    # Reloading a checkpoint reseeds the global random states; the verification restores them,
    # so a run with checkpoints trains exactly as one without.
    def train(callback):
        env = make_vec_env(2, "paper-default", seed=0)
        model = make_model("maskable-ppo", env, seed=0, tensorboard_log=None, n_steps=32, batch_size=32)
        model.learn(192, callback=callback)
        return model.policy.state_dict()

    plain, checked = train(None), train(CheckpointLast(tmp_path / "last.zip", 32))
    assert all(np.array_equal(plain[k].numpy(), checked[k].numpy()) for k in plain)
    assert (tmp_path / "previous.zip").exists()
    _truncate(tmp_path / "last.zip")
    with pytest.raises(CheckpointError, match="last.zip"):
        verify_checkpoint(tmp_path / "last.zip", type(load_model("maskable-ppo", tmp_path / "previous.zip")))


def test_resuming_on_other_arithmetic_is_noted_and_other_settings_refused(tmp_path):
    from dataclasses import replace

    from agents.run import RunError, TrainSettings, check_settings

    s = TrainSettings()
    assert check_settings(tmp_path, s, resume=False) is None
    assert check_settings(tmp_path, s, resume=True) is None  # the same machine: nothing to say
    saved = json.loads((tmp_path / "settings.json").read_text())
    saved["machine"]["torch_cpu_capability"] = "NEON"  # as if the run had started on an ARM CPU
    (tmp_path / "settings.json").write_text(json.dumps(saved))
    note = check_settings(tmp_path, s, resume=True)
    assert note is not None and "torch_cpu_capability" in note and "(the run started with 'NEON')" in note
    assert "torch_threads" not in note
    with pytest.raises(RunError, match="--seed 1 \\(the run has 0\\)"):
        check_settings(tmp_path, replace(s, seed=1), resume=True)
