"""The native vector env equals N single envs, and plugs into SB3 / sb3-contrib."""

import subprocess
import sys

import gymnasium as gym
import numpy as np
import pytest

import geo_gym  # noqa: F401
from geo_gym.env import GeoPipeEnv
from geo_gym.sb3 import SB3VecEnv
from geo_gym.vector import GeoPipeVectorEnv


def test_make_vec_returns_native_vector_env_with_batched_mask():
    v = gym.make_vec(
        "geo_gym/GeoPipe-v0", num_envs=3, vectorization_mode="vector_entry_point",
        scenario="paper-default",
    )
    assert isinstance(v, GeoPipeVectorEnv)
    obs, info = v.reset(seed=0)
    assert obs.shape == (3,) + v.single_observation_space.shape
    assert info["action_mask"].dtype == np.bool_
    assert info["action_mask"].shape == (3, v.single_action_space.n)


def test_vector_env_matches_single_envs_step_for_step():
    kwargs = {"num_regions": 4}
    venv = GeoPipeVectorEnv(3, "random", kwargs, window=4, autoreset_mode="SameStep")
    with pytest.raises(RuntimeError, match="reset"):
        venv.step(np.zeros(3, np.int64))
    obs, info = venv.reset(seed=10)
    singles = [GeoPipeEnv("random", kwargs, window=4) for _ in range(3)]
    first = [s.reset(seed=10 + i)[0] for i, s in enumerate(singles)]
    assert all(np.array_equal(obs[i], first[i]) for i in range(3))
    rng = np.random.default_rng(0)
    episodes = 0
    for _ in range(400):
        acts = np.array([rng.choice(np.flatnonzero(m)) for m in info["action_mask"]])
        obs, rew, term, trunc, info = venv.step(acts)
        for i, s in enumerate(singles):
            o, r, t, _, i_single = s.step(int(acts[i]))
            assert r == rew[i] and t == term[i]
            for key in ("reward_jct", "reward_cost"):  # the finished episode's: in final_info
                assert (info["final_info"] if t else info)[key][i] == i_single[key]
            if t:
                episodes += 1
                assert np.array_equal(info["final_obs"][i], o)
                assert info["final_info"]["avg_jct_h"][i] == i_single["avg_jct_h"]
                assert info["final_info"]["reward_scale"][i] == i_single["reward_scale"]
                o, i_single = s.reset()
            assert np.array_equal(obs[i], o) and info["time_h"][i] == i_single["time_h"]
    assert episodes >= 3


@pytest.mark.parametrize("scenario, kwargs, uncertainty", [
    ("recurring", {"num_jobs": 12}, "realistic"),
    ("random", {"num_regions": 5}, None),
])
def test_parallel_stepping_gives_the_serial_results(scenario, kwargs, uncertainty):
    """``parallel=True`` spreads the envs over threads; every observation, reward, mask and
    episode summary must stay exactly the serial one (the envs share no state)."""
    serial = GeoPipeVectorEnv(6, scenario, kwargs, uncertainty=uncertainty, autoreset_mode="SameStep")
    threaded = GeoPipeVectorEnv(6, scenario, kwargs, uncertainty=uncertainty, parallel=True, autoreset_mode="SameStep")
    (o1, i1), (o2, i2) = serial.reset(seed=3), threaded.reset(seed=3)
    assert np.array_equal(o1, o2)
    rng = np.random.default_rng(1)
    ends = 0
    for _ in range(150):
        a = (rng.random(i1["action_mask"].shape) * i1["action_mask"]).argmax(1)
        o1, r1, t1, _, i1 = serial.step(a)
        o2, r2, t2, _, i2 = threaded.step(a)
        assert np.array_equal(o1, o2) and np.array_equal(r1, r2) and np.array_equal(t1, t2)
        assert np.array_equal(i1["action_mask"], i2["action_mask"])
        if t1.any():
            ends += int(t1.sum())
            for key in ("avg_jct_h", "total_cost", "failures"):
                assert np.array_equal(i1["final_info"][key], i2["final_info"][key])
    assert ends >= 6


def test_sb3_adapter_terminal_observation_and_masks():
    from stable_baselines3.common.vec_env import VecMonitor

    sv = VecMonitor(SB3VecEnv(GeoPipeVectorEnv(2, "paper-fig1", window=2)))  # SB3's episode records
    sv.seed(0)
    obs = sv.reset()
    assert obs.shape == (2,) + sv.observation_space.shape
    masks = np.stack(sv.env_method("action_masks"))
    assert masks.shape == (2, sv.action_space.n)
    done_seen = False
    for _ in range(50):
        masks = np.stack(sv.env_method("action_masks"))
        obs, rewards, dones, infos = sv.step(masks.argmax(axis=1))
        for d, info in zip(dones, infos, strict=True):
            if d:
                done_seen = True
                assert info["terminal_observation"].shape == obs.shape[1:]
                assert info["episode"]["l"] >= 1 and info["avg_jct_h"] > 0
    assert done_seen
    with pytest.raises(AttributeError):
        sv.env_method("render")


def test_maskable_ppo_and_ppo_accept_the_adapter():
    from sb3_contrib import MaskablePPO
    from stable_baselines3 import PPO
    from stable_baselines3.common.vec_env import VecMonitor

    sv = VecMonitor(SB3VecEnv(GeoPipeVectorEnv(2, "paper-default")))
    for algo in (MaskablePPO, PPO):
        model = algo("MlpPolicy", sv, n_steps=32, batch_size=32, n_epochs=1, seed=0).learn(64)
        assert model.num_timesteps == 64 and len(model.ep_info_buffer) > 0  # episodes ended


def test_vector_reset_takes_one_seed_per_env_and_masks_final_infos():
    venv = GeoPipeVectorEnv(3, "paper-fig1", window=2, autoreset_mode="SameStep")
    obs, _ = venv.reset(seed=[7, 3, 5])
    for i, seed in enumerate([7, 3, 5]):
        assert np.array_equal(obs[i], GeoPipeEnv("paper-fig1", window=2).reset(seed=seed)[0])
    with pytest.raises(ValueError, match="2 seeds for 3 envs"):
        venv.reset(seed=[1, 2])
    info = {"action_mask": venv.action_masks()}
    for _ in range(200):
        acts = np.array([np.flatnonzero(m)[0] for m in info["action_mask"]])
        _, _, term, _, info = venv.step(acts)
        if term.any():
            assert info["_final_obs"].tolist() == term.tolist() == info["_final_info"].tolist()
            assert all((info["final_obs"][i] is not None) == bool(term[i]) for i in range(3))
            return
    raise AssertionError("no episode ended in 200 steps")


def test_bench_env_script_prints_the_comparison_table():
    """Smoke run of scripts/bench_env.py on a tiny budget (the speed itself is not tested)."""
    import subprocess
    import sys
    from pathlib import Path

    script = Path(__file__).resolve().parents[1] / "scripts" / "bench_env.py"
    out = subprocess.run(
        [sys.executable, str(script), "--seconds", "0.05", "--num-envs", "1", "2"],
        capture_output=True, text=True, timeout=600,
    )
    assert out.returncode == 0, out.stderr[-2000:]
    lines = out.stdout.strip().splitlines()
    assert lines[0].startswith("numba threads:")
    for column in ("native_steps_per_s", "parallel_steps_per_s", "sync_steps_per_s", "ratio",
                   "us_per_step", "compiled_us_per_step", "step_over_compiled", "env_us_per_step",
                   "env_over_compiled", "reset_us_per_episode"):
        assert column in lines[1]
    assert len(lines) == 6  # threads, header, rule, N=1, N=2, the single env's reset
    assert lines[5].startswith("GeoPipeEnv.reset() on paper-default: ") and lines[5].endswith(" us")
    for row in lines[3:5]:  # the compiled step is inside the env's calls, and they inside the wall time
        cells = [c.strip() for c in row.strip("|").split("|")]
        header = [c.strip() for c in lines[1].strip("|").split("|")]
        values = dict(zip(header, cells, strict=True))
        assert float(values["compiled_us_per_step"]) < float(values["env_us_per_step"]) <= float(values["us_per_step"])


def test_vector_env_does_not_import_stable_baselines3_or_torch():
    # Evaluation and other trainers use the vector env without SB3; importing torch costs
    # them most of a second at start-up (the SB3 adapter lives in geo_gym.sb3).
    code = (
        "import sys, gymnasium as gym, geo_gym, geo_gym.vector\n"
        "gym.make_vec('geo_gym/GeoPipe-v0', num_envs=2, vectorization_mode='vector_entry_point')\n"
        "print(sorted(m for m in ('stable_baselines3', 'torch') if m in sys.modules))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_vector_actions_and_flags_are_checked():
    venv = GeoPipeVectorEnv(2, "paper-default")
    venv.reset(seed=0)
    n = venv.single_action_space.n
    with pytest.raises(ValueError, match="integers, got dtype float64"):
        venv.step(np.array([0.7, 1.2]))  # would have been truncated to 0 and 1
    with pytest.raises(ValueError, match=r"actions \[-1\] \(envs \[1\]\) are outside"):
        venv.step([0, -1])
    with pytest.raises(ValueError, match=rf"outside Discrete\({n}\)"):
        venv.step([n, 0])
    with pytest.raises(ValueError, match="expected 2 actions"):
        venv.step([0, 1, 2])
    with pytest.raises(ValueError, match="parallel must be True or False, got 'no'"):
        GeoPipeVectorEnv(2, "paper-default", parallel="no")


def test_a_workload_no_rule_can_ever_place_is_an_error_naming_env_and_jobs():
    """Two regions without a link between them, a job whose memory minimum neither holds
    alone: nothing will ever free up, so the vector env says which env is stuck and on what,
    as the single env does, rather than stepping forever."""
    from geo_gym import catalog
    from geo_gym.cluster import Cluster, Region
    from geo_gym.scenarios import Scenario
    from geo_gym.workload import JobSpec

    cluster = Cluster((Region("A", 24, 0.2, 0.0), Region("B", 24, 0.1, 0.0)))
    huge = JobSpec("huge", catalog.PAPER_MODELS[0], catalog.PAPER_DATASETS[0], submit=0.0, epochs=0.05, min_gpus=40)
    venv = GeoPipeVectorEnv(2, Scenario("stuck", cluster, (huge,)))
    with pytest.raises(RuntimeError, match=r"env 0: no rule can ever place pending jobs \['huge'\]"):
        venv.reset(seed=0)
    with pytest.raises(RuntimeError, match=r"no rule can ever place pending jobs \['huge'\]"):
        GeoPipeEnv(Scenario("stuck", cluster, (huge,))).reset(seed=0)
