"""The user paths of docs/ecosystem.md: the id in a fresh process, the wrappers, MaskablePPO on a
``gym.make`` env, a CleanRL-style loop and RLlib (in a loopback-only network namespace)."""

import os
import re
import subprocess
import sys
import uuid
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env

from geo_gym.wrappers import ActionMaskObservation

ROOT = Path(__file__).resolve().parents[1]
ID = "geo_gym:geo_gym/GeoPipe-v0"  # "module:id": gymnasium imports geo_gym itself


def _python(code: str, **kwargs) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, **kwargs)


def test_the_id_resolves_in_a_fresh_process_without_an_import():
    code = (
        "import gymnasium as gym\n"
        f"env = gym.make({ID!r}, scenario='paper-fig1', window=2)\n"
        f"venv = gym.make_vec({ID!r}, num_envs=2)\n"
        "print(type(env.unwrapped).__name__, type(venv).__name__, env.reset(seed=0)[0].shape)\n"
    )
    out = _python(code, timeout=600)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.split()[:2] == ["GeoPipeEnv", "GeoPipeVectorEnv"]
    # without the module part the id is unknown until geo_gym is imported: say so
    out = _python("import gymnasium as gym; gym.make('geo_gym/GeoPipe-v0')", timeout=600)
    assert out.returncode != 0 and "geo_gym" in out.stderr


@pytest.mark.filterwarnings("ignore:.*different from the unwrapped version")  # the wrapper is what is checked
def test_action_mask_observation_is_the_dict_rllib_reads():
    env = ActionMaskObservation(gym.make(ID, scenario="paper-fig1", window=2))
    check_env(env, skip_render_check=True)
    space = env.observation_space
    assert set(space.spaces) == {"observations", "action_mask"}
    assert space["action_mask"] == gym.spaces.Box(0.0, 1.0, (env.action_space.n,), np.float32)
    obs, info = env.reset(seed=0)
    rng = np.random.default_rng(0)
    for _ in range(30):
        assert space.contains(obs)
        assert np.array_equal(obs["action_mask"], info["action_mask"].astype(np.float32))
        assert np.array_equal(obs["action_mask"] > 0, env.get_wrapper_attr("action_masks")())
        action = rng.choice(np.flatnonzero(obs["action_mask"]))
        obs, _, terminated, truncated, info = env.step(action)
        if terminated or truncated:
            obs, info = env.reset()
    with pytest.raises(ValueError, match="Discrete action space"):
        ActionMaskObservation(gym.make("MountainCarContinuous-v0"))


def test_maskable_ppo_learns_on_a_gym_make_env_and_action_masker_reaches_the_mask():
    from sb3_contrib import MaskablePPO
    from sb3_contrib.common.maskable.evaluation import evaluate_policy
    from sb3_contrib.common.wrappers import ActionMasker

    env = gym.make(ID, scenario="paper-fig1", window=2)
    assert not hasattr(env, "action_masks")  # gym.make's wrappers do not forward attributes ...
    model = MaskablePPO("MlpPolicy", env, n_steps=128, batch_size=64, n_epochs=1, seed=0).learn(256)
    assert model.num_timesteps == 256 and len(model.ep_info_buffer) > 0  # ... MaskablePPO finds it
    mean, _ = evaluate_policy(model, env, n_eval_episodes=3, use_masking=True)
    assert np.isfinite(mean) and mean < 0
    masked = ActionMasker(gym.make(ID, scenario="paper-fig1", window=2), lambda e: e.unwrapped.action_masks())
    _, info = masked.reset(seed=0)
    assert np.array_equal(masked.action_masks(), info["action_mask"])


def test_cleanrl_style_masked_ppo_over_the_native_vector_env():
    out = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "cleanrl_ppo.py"), "--iterations", "2", "--num-envs", "4",
         "--num-steps", "32", "--rules", "levels"],  # the GPU levels: the network follows the env's action space
        capture_output=True, text=True, timeout=600, env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    assert out.returncode == 0, out.stderr[-2000:]
    lines = out.stdout.strip().splitlines()
    assert [line.split(":")[0] for line in lines] == ["iteration 1", "iteration 2"]
    assert "256 steps" in lines[1] and "nan" not in lines[1]


def _namespace_problem() -> str | None:
    """Why no loopback-only network namespace can be made here, or None."""
    try:
        probe = subprocess.run(["unshare", "-rn", "--pid", "--fork", "--mount-proc", "sh", "-c", "ip link set lo up"],
                               capture_output=True, text=True, timeout=60)
    except (FileNotFoundError, subprocess.TimeoutExpired) as e:
        return f"unshare/ip unavailable: {e}"
    return None if probe.returncode == 0 else f"unshare -rn failed: {probe.stderr.strip()}"


def _processes_with(marker: str) -> list[int]:
    """Live processes whose environment holds ``marker``."""
    pids = []
    for proc in Path("/proc").iterdir():
        if proc.name.isdigit():
            try:
                if marker.encode() in (proc / "environ").read_bytes():
                    pids.append(int(proc.name))
            except OSError:
                pass
    return pids


def test_rllib_ppo_with_the_action_masking_module_in_a_loopback_namespace():
    """RLlib PPO, 1 remote env runner, 2 iterations, in its own network and PID namespace (so
    every Ray process ends with it); no masked action is taken, no Ray process survives."""
    pytest.importorskip("ray.rllib", reason="ray[rllib] is not installed (pip install -e '.[dev]' or '.[rllib]')")
    problem = _namespace_problem()
    if problem:
        pytest.skip(problem)
    marker = f"GEO_GYM_RLLIB_TEST={uuid.uuid4().hex}"
    env = {**os.environ, "PYTHONPATH": str(ROOT), "GEO_GYM_RLLIB_TEST": marker.split("=")[1]}
    script = ROOT / "scripts" / "rllib_ppo.py"
    try:
        out = subprocess.run(
            ["unshare", "-rn", "--pid", "--fork", "--mount-proc", "sh", "-c",
             f"ip link set lo up && exec '{sys.executable}' '{script}' --iterations 2 --env-runners 1 --rules levels"],
            capture_output=True, text=True, timeout=600, env=env,
        )
    finally:
        survivors = _processes_with(marker)
    assert not survivors, f"Ray processes left running: {survivors}"
    assert out.returncode == 0, (out.stdout + out.stderr)[-3000:]
    lines = [line for line in out.stdout.splitlines() if line.startswith("iteration")]
    assert len(lines) == 2 and all(line.endswith("masked actions 0") for line in lines), out.stdout
    assert "512" in lines[1] and " 0 episodes" not in lines[1]


def test_every_python_block_of_docs_ecosystem_runs():
    text = (ROOT / "docs" / "ecosystem.md").read_text()
    blocks = re.findall(r"```python\n(.*?)```", text, flags=re.S)
    assert len(blocks) >= 4
    out = _python("\n".join(blocks), timeout=600)
    assert out.returncode == 0, out.stderr[-3000:]
