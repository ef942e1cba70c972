"""The native vector env is gymnasium's SyncVectorEnv over GeoPipeEnv, step for step, in every
autoreset mode and under gymnasium's vector wrappers; it takes what ``gym.make_vec`` passes."""

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.vector import AutoresetMode

import geo_gym  # noqa: F401
from geo_gym.vector import GeoPipeVectorEnv

ID = "geo_gym/GeoPipe-v0"
# short episodes that end all three ways: terminated, idle-truncated, cut by the step limit
ENV_KWARGS = {"scenario": "paper-default", "scenario_kwargs": {"num_jobs": 6}, "window": 3, "max_idle_steps": 3}


def assert_same(a, b, where="info"):
    """Equal values of equal types, recursively (NaN equals NaN, dtypes must match)."""
    if isinstance(a, dict):
        assert isinstance(b, dict) and set(a) == set(b), (where, sorted(set(a) ^ set(b)))
        for key in a:
            assert_same(a[key], b[key], f"{where}[{key!r}]")
    elif isinstance(a, np.ndarray):
        assert isinstance(b, np.ndarray), (where, type(b))
        assert (a.dtype, a.shape) == (b.dtype, b.shape), (where, a.dtype, a.shape, b.dtype, b.shape)
        if a.dtype == object:
            for i, (x, y) in enumerate(zip(a, b, strict=True)):
                assert_same(x, y, f"{where}[{i}]")
        else:
            np.testing.assert_array_equal(a, b, err_msg=where)
    elif isinstance(a, list | tuple):
        assert type(a) is type(b) and len(a) == len(b), where
        for i, (x, y) in enumerate(zip(a, b, strict=True)):
            assert_same(x, y, f"{where}[{i}]")
    elif isinstance(a, float) and np.isnan(a):
        assert isinstance(b, float) and np.isnan(b), (where, b)
    else:
        assert type(a) is type(b) and a == b, (where, a, b)


def make_pair(mode, num_envs=3, max_episode_steps=10, wrappers=(), job_records=True):
    kwargs = {**ENV_KWARGS, "max_episode_steps": max_episode_steps, "job_records": job_records}
    native = gym.make_vec(ID, num_envs, vectorization_mode="vector_entry_point", autoreset_mode=mode, **kwargs)
    sync = gym.make_vec(ID, num_envs, vectorization_mode="sync", vector_kwargs={"autoreset_mode": mode}, **kwargs)
    assert isinstance(native, GeoPipeVectorEnv) and isinstance(sync, gym.vector.SyncVectorEnv)
    assert native.metadata["autoreset_mode"] == sync.metadata["autoreset_mode"] == mode
    for wrap in wrappers:
        native, sync = wrap(native), wrap(sync)
    return native, sync


def actions_for(masks, wait, rng, wait_share=(0.5, 0.1, 0.0)):
    """A random valid action per env, or (env i with probability ``wait_share[i]``, and when
    nothing is valid) the wait action, masked or not: steps that change nothing, for the idle
    truncation."""
    valid = [np.flatnonzero(m) for m in masks]
    return np.array([wait if not len(v) or rng.random() < p else rng.choice(v)
                     for v, p in zip(valid, wait_share, strict=True)])


def run_side_by_side(native, sync, steps, mode, drop=()):
    """Step both with the same actions; returns how episodes ended (terminated, idle, cut)."""
    wait = native.unwrapped._template.wait_action
    rng = np.random.default_rng(0)
    out_n, out_s = native.reset(seed=5), sync.reset(seed=5)
    assert_same(out_n, out_s, "reset")
    info = out_n[1]
    ends = {"terminated": 0, "idle": 0, "cut": 0}
    for t in range(steps):
        acts = actions_for(info["action_mask"], wait, rng)
        out_n, out_s = native.step(acts), sync.step(acts)
        for key in drop:  # wall-clock entries
            for out in (out_n, out_s):
                out[4].get("episode", {}).pop(key, None)
        assert_same(out_n, out_s, f"step {t}")
        _, _, terminated, truncated, info = out_n
        end_info = info.get("final_info", info)
        ends["terminated"] += int(terminated.sum())
        ends["idle"] += int(end_info.get("truncated_idle", np.zeros(1, bool)).sum())
        ends["cut"] += int((truncated & ~terminated & ~end_info.get("truncated_idle", np.zeros_like(truncated))).sum())
        if mode == AutoresetMode.DISABLED and (terminated | truncated).any():
            mask = terminated | truncated
            out_n = native.reset(options={"reset_mask": mask.copy()})
            out_s = sync.reset(options={"reset_mask": mask.copy()})
            assert_same(out_n, out_s, f"reset_mask at step {t}")
            info = {"action_mask": np.where(mask[:, None], out_n[1]["action_mask"], info["action_mask"])}
    return ends


@pytest.mark.parametrize("mode, job_records", [(m.value, True) for m in AutoresetMode] + [("NextStep", False)])
def test_native_vector_env_is_sync_vector_env_step_for_step(mode, job_records):
    mode = AutoresetMode(mode)
    native, sync = make_pair(mode, job_records=job_records)
    ends = run_side_by_side(native, sync, 150, mode)
    assert all(n >= 1 for n in ends.values()), ends  # every kind of episode end was compared


def test_the_default_mode_is_gymnasiums():
    native = gym.make_vec(ID, 2, vectorization_mode="vector_entry_point")
    sync = gym.make_vec(ID, 2, vectorization_mode="sync")
    assert native.metadata["autoreset_mode"] == sync.metadata["autoreset_mode"] == AutoresetMode.NEXT_STEP
    assert GeoPipeVectorEnv(2, autoreset_mode="SameStep").metadata["autoreset_mode"] == AutoresetMode.SAME_STEP
    assert GeoPipeVectorEnv.metadata["autoreset_mode"] == AutoresetMode.NEXT_STEP  # instances own theirs


@pytest.mark.parametrize("mode", [AutoresetMode.NEXT_STEP, AutoresetMode.SAME_STEP])
def test_under_gymnasiums_vector_wrappers(mode):
    from gymnasium.wrappers import vector as vw

    wrappers = [vw.NormalizeReward, vw.RecordEpisodeStatistics]
    if mode == AutoresetMode.NEXT_STEP:  # gymnasium's observation wrappers refuse SAME_STEP envs
        wrappers = [vw.FlattenObservation, vw.NormalizeObservation, *wrappers]
    native, sync = make_pair(mode, wrappers=wrappers)
    run_side_by_side(native, sync, 120, mode, drop=("t",))
    assert native.episode_count == sync.episode_count >= 3
    assert list(native.return_queue) == list(sync.return_queue)
    assert list(native.length_queue) == list(sync.length_queue)


def test_make_vec_arguments_and_their_errors():
    venv = gym.make_vec(ID, 2, vectorization_mode="vector_entry_point", render_mode=None, max_episode_steps=5)
    assert venv.max_episode_steps == 5 and venv.render_mode is None
    with pytest.raises(ValueError, match="render_mode must be None, got 'rgb_array'"):
        gym.make_vec(ID, 2, vectorization_mode="vector_entry_point", render_mode="rgb_array")
    with pytest.raises(ValueError, match=r"autoreset_mode must be one of .*'NextStep'.*got 'soon'"):
        GeoPipeVectorEnv(2, autoreset_mode="soon")
    with pytest.raises(ValueError, match="max_episode_steps must be an integer >= 1 or None, got 0"):
        GeoPipeVectorEnv(2, max_episode_steps=0)
    with pytest.raises(TypeError, match="unexpected arguments"):
        GeoPipeVectorEnv(2, bogus=1)
    with pytest.raises(ValueError, match="job_records must be True or False, got 'yes'"):
        GeoPipeVectorEnv(2, job_records="yes")


def test_disabled_mode_refuses_to_step_a_finished_env_and_reset_mask_is_checked():
    venv = GeoPipeVectorEnv(2, autoreset_mode=AutoresetMode.DISABLED, max_episode_steps=2, **ENV_KWARGS)
    venv.reset(seed=0)
    wait = venv._template.wait_action
    for _ in range(2):
        _, _, _, truncated, _ = venv.step([wait, wait])
    assert truncated.all()
    with pytest.raises(RuntimeError, match=r"envs \[0, 1\] ended their episode .* DISABLED"):
        venv.step([wait, wait])
    with pytest.raises(ValueError, match="reset_mask"):
        venv.reset(options={"reset_mask": np.array([1, 0])})
    obs, info = venv.reset(options={"reset_mask": np.array([True, False])})
    assert info["_action_mask"].tolist() == [True, False]
    with pytest.raises(RuntimeError, match=r"envs \[1\] ended"):
        venv.step([wait, wait])


def test_the_sb3_adapter_steps_the_same_in_every_autoreset_mode():
    """SB3's VecEnv resets in the step that ends an episode: under NEXT_STEP and DISABLED the
    adapter resets the finished envs itself, with the same episodes and the same outputs."""
    from geo_gym.sb3 import SB3VecEnv

    runs = []
    for mode in AutoresetMode:
        venv = SB3VecEnv(GeoPipeVectorEnv(3, autoreset_mode=mode, **ENV_KWARGS))
        venv.seed(4)
        steps = [venv.reset()]
        rng = np.random.default_rng(0)
        for _ in range(60):
            masks = np.stack(venv.env_method("action_masks"))
            steps.append(venv.step(actions_for(masks, venv.venv._template.wait_action, rng)))
        runs.append(steps)
    ends = [info for _, _, dones, infos in runs[0][1:] for info, done in zip(infos, dones, strict=True) if done]
    assert len(ends) >= 10 and any(info["TimeLimit.truncated"] for info in ends)
    for other in runs[1:]:
        assert_same(runs[0], other, "sb3")
