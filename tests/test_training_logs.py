"""What a training run logs (TensorBoard tags, monitor.csv), its reproducibility for a seed and
thread count, and the optimizer that avoids torch._dynamo (not timed tests)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
from tensorboard.plugins.hparams import plugin_data_pb2

from agents.training import EPISODE_KEYS, load_model, make_model, make_vec_env

ROOT = Path(__file__).resolve().parents[1]
# a tiny run whose --eval-every is beyond its budget: the evaluation at the end is its only one
TINY = ["--timesteps", "1024", "--num-envs", "4", "--n-steps", "128", "--eval-every", "100000",
        "--checkpoint-every", "512", "--eval-seeds", "1", "--final-seeds", "2", "--no-progress",
        "--seed", "3", "--torch-threads", "1"]


def train(cwd: Path, name: str, *extra: str) -> subprocess.CompletedProcess:
    cmd = [sys.executable, str(ROOT / "scripts" / "train_ppo.py"), "--name", name, *TINY, *extra]
    out = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, timeout=900)
    assert out.returncode == 0, out.stderr[-3000:]
    return out


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> Path:
    """Two runs with the same seed and thread count, the second with a typed uncertainty flag
    that repeats the preset's own value (the same configuration)."""
    cwd = tmp_path_factory.mktemp("train")
    out = train(cwd, "a")
    (cwd / "runs" / "a" / "stdout.txt").write_text(out.stdout)
    train(cwd, "b", "--uncertainty.handler", "false")
    return cwd / "runs"


def events(run: Path) -> EventAccumulator:
    (folder,) = {p.parent for p in (run / "tb").rglob("events.out.tfevents.*")}
    acc = EventAccumulator(str(folder))
    acc.Reload()
    return acc


def test_same_seed_and_threads_give_the_same_run(runs: Path) -> None:
    a, b = load_model("maskable-ppo", runs / "a" / "last.zip"), load_model("maskable-ppo", runs / "b" / "last.zip")
    pa, pb = a.policy.state_dict(), b.policy.state_dict()
    assert pa.keys() == pb.keys() and all(torch.equal(pa[k], pb[k]) for k in pa)
    pd.testing.assert_frame_equal(pd.read_csv(runs / "a" / "comparison.csv"), pd.read_csv(runs / "b" / "comparison.csv"))
    # the monitors saw the same episodes (all but the wall-clock column)
    ma, mb = (pd.read_csv(runs / n / "monitor.csv", skiprows=1).drop(columns="t") for n in "ab")
    pd.testing.assert_frame_equal(ma, mb)


def test_tensorboard_has_eval_episode_and_settings_tags(runs: Path) -> None:
    acc = events(runs / "a")
    scalars = set(acc.Tags()["scalars"])
    # eval/ at the end although --eval-every is beyond the budget
    assert {"eval/jct_ratio", "eval/cost_ratio", "eval/agent_avg_jct_h", "eval/agent_failures",
            "eval/objective_ratio", "eval/best_avg_jct_h", "eval/best_total_cost"} <= scalars
    assert [e.step for e in acc.Scalars("eval/jct_ratio")] == [1024]
    # eval/objective_ratio: agent / the protocol's best fixed policy in the trained objective
    row = pd.read_csv(runs / "a" / "eval.csv").iloc[-1]
    comparison = pd.read_csv(runs / "a" / "comparison.csv", index_col=0)
    (best_row,) = [name for name in comparison.index if name.startswith("best fixed (")]
    assert acc.Scalars("eval/objective_ratio")[0].value == pytest.approx(row.objective_ratio, rel=1e-6)
    # one evaluation seed of `recurring` (60 jobs), the default cost weight 0.1
    assert row.objective_ratio == pytest.approx((60 * row.agent_avg_jct_h + 0.1 * row.agent_total_cost)
                                                / (60 * row.best_avg_jct_h + 0.1 * row.best_total_cost), rel=1e-9)
    # the best fixed policy of the evaluations is the final table's (chosen once, on validation seeds)
    assert best_row == f"best fixed ({json.loads((runs / 'a' / 'protocol.json').read_text())['best_fixed']})"
    assert json.loads(pd.read_csv(runs / "a" / "eval.csv").timesteps.to_json()) == {"0": 1024}
    # the training episodes' outcomes, per rollout, beside SB3's own episode scalars
    for key in ("avg_jct_h", "total_cost", "failures"):
        values = [e.value for e in acc.Scalars(f"rollout/ep_{key}_mean")]
        assert len(values) >= 1 and all(np.isfinite(values)) and (key == "failures" or min(values) > 0)
    assert "rollout/ep_rew_mean" in scalars
    # the settings as text and as HParams
    text = acc.Tensors("settings/text_summary")[0].tensor_proto.string_val[0].decode()
    assert "| seed | 3 |" in text and "| torch_threads | 1 |" in text and "| uncertainty | realistic |" in text
    start = plugin_data_pb2.HParamsPluginData.FromString(acc.PluginTagToContent("hparams")["_hparams_/session_start_info"])
    assert start.session_start_info.hparams["scenario"].string_value == "recurring"
    assert start.session_start_info.hparams["num_envs"].number_value == 4


def test_monitor_csv_has_a_row_per_training_episode(runs: Path) -> None:
    path = runs / "a" / "monitor.csv"
    header = json.loads(path.open().readline().lstrip("#"))
    table = pd.read_csv(path, skiprows=1)
    assert list(table.columns) == ["r", "l", "t", *EPISODE_KEYS] and header["t_start"] > 0
    assert len(table) >= 4 and (table.l >= 1).all() and (table.avg_jct_h > 0).all() and (table.r < 0).all()
    assert table.l.sum() <= 1024  # finished episodes: no more steps than the run took
    wrote = next(ln for ln in (runs / "a" / "stdout.txt").read_text().splitlines() if ln.startswith("wrote "))
    assert "monitor.csv" in wrote


def test_resume_appends_to_monitor_csv(runs: Path, tmp_path: Path) -> None:
    import shutil

    shutil.copytree(runs / "a", tmp_path / "runs" / "c")
    before = pd.read_csv(tmp_path / "runs" / "c" / "monitor.csv", skiprows=1)
    train(tmp_path, "c", "--resume", "--timesteps", "2048")
    after = pd.read_csv(tmp_path / "runs" / "c" / "monitor.csv", skiprows=1)
    assert len(after) > len(before)
    pd.testing.assert_frame_equal(after.iloc[: len(before)], before)
    assert (after.t.diff().iloc[1:] >= 0).all()  # one clock from the first start


@pytest.fixture
def one_thread():
    """torch on one thread for this test (the default run's count; two are slow on a busy machine)."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


def test_eager_adam_updates_like_torch_adam(one_thread) -> None:
    from sb3_contrib import MaskablePPO

    from agents.optim import EagerAdam

    def trained(optimizer: type) -> dict:
        env = make_vec_env(2, "paper-default", seed=0)
        model = make_model("maskable-ppo", env, seed=0, tensorboard_log=None, n_steps=32, batch_size=32)
        if optimizer is not EagerAdam:  # torch's own Adam (SB3 gives it eps=1e-5 itself)
            kwargs = {k: v for k, v in model.policy_kwargs.items() if not k.startswith("optimizer")}
            model = MaskablePPO("MlpPolicy", env, seed=0, n_steps=32, batch_size=32, policy_kwargs=kwargs)
        assert type(model.policy.optimizer) is optimizer
        model.learn(64)
        return model.policy.state_dict()

    mine, torchs = trained(EagerAdam), trained(torch.optim.Adam)
    assert all(torch.equal(mine[k], torchs[k]) for k in torchs)


def test_two_threads_give_the_same_run_twice() -> None:
    before = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        states = []
        for _ in range(2):
            env = make_vec_env(2, "paper-default", seed=5)
            model = make_model("maskable-ppo", env, seed=5, tensorboard_log=None, n_steps=16, batch_size=32,
                               n_epochs=2)
            model.learn(32)
            states.append(model.policy.state_dict())
    finally:
        torch.set_num_threads(before)
    assert all(torch.equal(states[0][k], states[1][k]) for k in states[0])


def test_training_never_imports_torch_dynamo(tmp_path: Path) -> None:
    code = (
        "import sys, torch\n"
        "torch.set_num_threads(1)\n"
        "from agents.training import load_model, make_model, make_vec_env\n"
        "env = make_vec_env(2, 'paper-default', seed=0)\n"
        f"model = make_model('maskable-ppo', env, 0, {str(tmp_path / 'tb')!r}, n_steps=16, batch_size=32)\n"
        f"model.learn(32); model.save({str(tmp_path / 'm.zip')!r})\n"
        f"load_model('maskable-ppo', {str(tmp_path / 'm.zip')!r}, env=env).learn(32)\n"
        "print('torch._dynamo' in sys.modules)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=600, cwd=ROOT)
    assert out.returncode == 0, out.stderr[-3000:]
    assert out.stdout.strip().splitlines()[-1] == "False"
