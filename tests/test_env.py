"""GeoPipeEnv: API conformance, reward identity, masked actions, determinism."""

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env

import geo_gym  # noqa: F401
from geo_gym import sim
from geo_gym.env import GeoPipeEnv
from geo_gym.placement import FEASIBLE, NUM_RULES, VIOLATES_BANDWIDTH, VIOLATES_GPUS
from geo_gym.vector import GeoPipeVectorEnv


def rollout(env, seed, policy_seed=0, invalid_share=0.0):
    rng = np.random.default_rng(policy_seed)
    obs, info = env.reset(seed=seed)
    trace = [obs]
    rewards = []
    while True:
        if rng.random() < invalid_share:
            a = int(rng.integers(env.action_space.n))
        else:
            a = int(rng.choice(np.flatnonzero(info["action_mask"])))
        obs, r, term, trunc, info = env.step(a)
        trace.append(obs)
        rewards.append(r)
        if term:
            return trace, rewards, info


def test_check_env_gymnasium_and_sb3():
    from stable_baselines3.common.env_checker import check_env as sb3_check

    check_env(GeoPipeEnv("random", {"num_regions": 4}, window=4))
    sb3_check(GeoPipeEnv("paper-default"), warn=False)


def test_registered_make():
    env = gym.make("geo_gym/GeoPipe-v0", scenario="paper-fig1", window=2)
    obs, info = env.reset(seed=0)
    assert obs.shape == env.observation_space.shape
    assert info["action_mask"].dtype == np.bool_ and info["action_mask"].shape == (2 * NUM_RULES + 1,)


@pytest.mark.parametrize("cost_weight", [0.0, 0.1, 2.0])
def test_episode_return_is_affine_in_avg_jct_and_cost(cost_weight):
    env = GeoPipeEnv("random", {"num_regions": 5}, cost_weight=cost_weight)
    _, rewards, info = rollout(env, seed=3, invalid_share=0.2)
    n = len(env.jobs)
    expected = -(n * info["avg_jct_h"] + cost_weight * info["total_cost"]) / info["reward_scale"]
    assert sum(rewards) == pytest.approx(expected, rel=1e-9)
    jobs = info["jobs"]
    assert len(jobs) == n and np.mean([j["jct_h"] for j in jobs]) == pytest.approx(info["avg_jct_h"])
    assert sum(j["cost"] for j in jobs) == pytest.approx(info["total_cost"])
    assert info["makespan_h"] >= max(j["jct_h"] for j in jobs) - 1e-9


def test_job_records_describe_each_placement():
    # Half the GPUs per region: K* rarely fits in one, so paths have several entries.
    env = GeoPipeEnv("paper-default", {"num_jobs": 16, "capacity_scale": 0.5})
    _, _, info = rollout(env, seed=1)
    names = env.current_scenario.cluster.names
    crossed = 0
    for i, job in enumerate(info["jobs"]):
        assert job["name"] == env.jobs[i].name and job["model"] == env.jobs[i].model.name
        assert len(job["path"]) == len(job["gpus_per_region"]) == env.core.plen[0, i] >= 1
        assert job["path"] == [names[r] for r in env.core.path[0, i, : env.core.plen[0, i]]]
        assert sum(job["gpus_per_region"]) == job["gpus"] and min(job["gpus_per_region"]) >= 1
        assert job["wait_h"] == pytest.approx(job["start_h"] - job["submit_h"])
        assert job["jct_h"] == pytest.approx(job["end_h"] - job["submit_h"])
        assert all(type(v) in (str, int, float, list) for v in job.values())
        crossed += len(job["path"]) > 1
    assert crossed > 0


def test_same_seed_same_trajectory():
    a = rollout(GeoPipeEnv("random", {"num_regions": 4}), seed=11, policy_seed=5)
    b = rollout(GeoPipeEnv("random", {"num_regions": 4}), seed=11, policy_seed=5)
    assert all(np.array_equal(x, y) for x, y in zip(a[0], b[0], strict=True))
    assert a[1] == b[1]
    assert a[2]["avg_jct_h"] == b[2]["avg_jct_h"] and a[2]["total_cost"] == b[2]["total_cost"]
    c = rollout(GeoPipeEnv("random", {"num_regions": 4}), seed=12, policy_seed=5)
    assert c[2]["avg_jct_h"] != a[2]["avg_jct_h"]


def test_masked_action_is_treated_as_wait():
    env = GeoPipeEnv("random", {"num_regions": 4, "num_jobs": 10}, window=4)
    twin = GeoPipeEnv("random", {"num_regions": 4, "num_jobs": 10}, window=4)
    _, info = env.reset(seed=2)
    twin.reset(seed=2)
    first = int(np.flatnonzero(info["action_mask"])[0])
    env.step(first)  # start something so events exist
    *_, info = twin.step(first)
    masked = np.flatnonzero(~info["action_mask"])
    assert masked.size and info["action_mask"][env.wait_action]
    o1, r1, _, _, i1 = env.step(int(masked[0]))
    o2, r2, _, _, i2 = twin.step(env.wait_action)
    assert i1["invalid_action"] and not i2["invalid_action"]
    assert np.array_equal(o1, o2) and r1 == r2 and i1["time_h"] == i2["time_h"]


def test_masked_action_without_events_changes_nothing():
    env = GeoPipeEnv("paper-fig1", window=2)
    obs, info = env.reset(seed=0)
    assert not info["action_mask"][env.wait_action]  # nothing running, nothing to arrive
    obs2, r, term, _, info2 = env.step(env.wait_action)
    assert info2["invalid_action"] and r == 0.0 and not term
    assert np.array_equal(obs, obs2)


def test_observations_are_predictions_and_in_space():
    env = GeoPipeEnv("paper-default")
    obs, _ = env.reset(seed=0)
    assert env.observation_space.contains(obs)
    assert env.decode_action(env.wait_action) is None
    assert env.decode_action(NUM_RULES + 3) == (1, "lcf")


def test_core_enforces_eq5_eq6_whoever_proposes():
    env = GeoPipeEnv("paper-fig1", window=2)
    env.reset(seed=0)
    c = env.core
    j = int(c.pending[0, 0])
    k = c.free.shape[1]
    too_many = np.zeros(k, np.int64)
    too_many[0] = 5  # region A has 4 GPUs
    assert sim.place(c, 0, j, np.array([0, -1, -1, -1]), 1, too_many) == VIOLATES_GPUS
    # Qwen2.5-14B over the 200 Mbps B-D link: b_j > 0.2 Gbps
    alloc = np.array([0, 3, 0, 1])
    assert sim.place(c, 0, j, np.array([1, 3, -1, -1]), 2, alloc) == VIOLATES_BANDWIDTH
    assert c.n_running[0] == 0 and c.free[0].tolist() == [4, 3, 2, 2]
    ok = np.array([4, 0, 2, 0])
    assert sim.place(c, 0, j, np.array([0, 2, -1, -1]), 2, ok) == FEASIBLE
    assert c.free[0].tolist() == [0, 3, 0, 2] and c.reserved_gbps[0, 0, 2] == c.reserved_gbps[0, 2, 0] > 0


def test_bad_arguments():
    with pytest.raises(ValueError, match="window"):
        GeoPipeEnv(window=0)
    with pytest.raises(ValueError, match="cost_weight"):
        GeoPipeEnv(cost_weight=-1)
    with pytest.raises(ValueError, match="cost_weight"):
        GeoPipeEnv(cost_weight=float("inf"))  # 0 x inf would make rewards NaN
    with pytest.raises(ValueError, match="num_regions"):
        GeoPipeEnv("random")  # its region count varies by seed; the observation size cannot
    with pytest.raises(ValueError, match="known scenarios"):
        GeoPipeEnv("nope")


def test_a_deep_copy_continues_exactly_and_independently():
    """Planning-style use: copy.deepcopy of an env (and pickling its state) clones the episode;
    both copies then step to identical results without sharing state."""
    import copy
    import pickle

    from geo_gym.vector import GeoPipeVectorEnv

    env = GeoPipeEnv("recurring", {"num_jobs": 10}, uncertainty="realistic")
    _, info = env.reset(seed=1)
    clone = copy.deepcopy(env)
    assert clone.core.free is not env.core.free
    rng = np.random.default_rng(0)
    for _ in range(200):
        a = int(rng.choice(np.flatnonzero(info["action_mask"])))
        o1, r1, done1, _, info = env.step(a)
        o2, r2, done2, _, _ = clone.step(a)
        assert np.array_equal(o1, o2) and r1 == r2 and done1 == done2
        if done1:
            break
    assert done1
    state = pickle.loads(pickle.dumps(env.core))
    assert np.array_equal(state.end_s, env.core.end_s, equal_nan=True)
    venv = GeoPipeVectorEnv(3, "paper-default")
    venv.reset(seed=0)
    vclone = copy.deepcopy(venv)
    acts = np.full(3, venv.single_action_space.n - 1)
    o1, r1, *_ = venv.step(acts)
    o2, r2, *_ = vclone.step(acts)
    assert np.array_equal(o1, o2) and np.array_equal(r1, r2)


def test_a_step_after_loading_grew_the_core_acts_on_the_new_core():
    """A workload larger than the env's first one makes loading allocate a bigger core; the
    env's steps (one compiled struct of core and options, decision.Pair) then act on it."""
    env = GeoPipeEnv("random", {"num_regions": 4})
    env.reset(seed=0)
    first = env.core
    env.reset(seed=3)  # 23 jobs against seed 0's 22 (found by drawing seeds)
    assert env.core is not first and env.core.submit_s.shape[1] > first.submit_s.shape[1]
    first_now, started = first.now_s.copy(), np.isfinite(env.core.start_s[0]).sum()
    _, _, _, _, info = env.step(int(np.flatnonzero(env.action_masks()[:-1])[0]))  # start a job
    assert not info["invalid_action"]
    assert np.isfinite(env.core.start_s[0]).sum() > started
    assert np.array_equal(first.now_s, first_now)  # the old core is left alone


def test_actions_are_one_integer_and_decode_in_range():
    env = GeoPipeEnv("paper-fig1", window=2)
    _, info = env.reset(seed=0)
    wait = 2 * NUM_RULES
    assert env.decode_action(np.int64(wait)) is None
    assert env.decode_action(np.array([NUM_RULES + 3])) == (1, "lcf")
    for bad in (-1, wait + 1):
        with pytest.raises(ValueError, match="outside"):
            env.decode_action(bad)
    with pytest.raises(ValueError, match="one integer"):
        env.step(np.array([0, 1]))
    with pytest.raises(ValueError, match="one integer"):
        env.step(1.5)
    with pytest.raises(ValueError, match="one integer"):
        env.step(True)
    for bad in (-1, wait + 1, 10**6, 2**64):  # outside Discrete(19): an error, not a "wait"
        with pytest.raises(ValueError, match=rf"action {bad} is outside the action space Discrete\({wait + 1}\)"):
            env.step(bad)
    for bad in (-5, float("nan"), 2.5):
        with pytest.raises(ValueError, match="max_jobs"):
            GeoPipeEnv("paper-default", max_jobs=bad)
    valid = int(np.flatnonzero(info["action_mask"])[0])
    _, _, _, _, info = env.step(np.array([valid]))  # a one-element array, as SB3 passes it
    assert not info["invalid_action"]


def _first_valid_rollout(env, seed):
    """Every step's info, always taking the first valid action."""
    _, info = env.reset(seed=seed)
    infos = []
    while True:
        _, r, done, _, info = env.step(int(np.flatnonzero(info["action_mask"])[0]))
        infos.append((r, info))
        if done:
            return infos


def test_reward_parts_add_up_and_the_scale_ignores_fates_and_predictions():
    runs = {w: _first_valid_rollout(GeoPipeEnv("paper-default", {"num_jobs": 12}, cost_weight=w), 2)
            for w in (0.5, 1.0)}
    for (r, info), (_, twice) in zip(runs[0.5], runs[1.0], strict=True):
        assert r == pytest.approx(info["reward_jct"] + info["reward_cost"], rel=1e-12, abs=1e-15)
        assert twice["reward_cost"] == pytest.approx(2 * info["reward_cost"])  # cost_weight applies
        assert twice["reward_jct"] == info["reward_jct"]
    assert any(info["reward_cost"] < 0 for _, info in runs[0.5])
    # the scale is the configured work's ideal hours: early ends and a noisy predictor change
    # neither it nor, therefore, what a return means
    other = {"predictor": "noisy", "predictor_kwargs": {"sigma": 1.0}, "early_end_rate": 0.9}
    final = _first_valid_rollout(GeoPipeEnv("paper-default", {"num_jobs": 12}, uncertainty=other), 2)[-1][1]
    assert any(j["iters"] < j["configured_iters"] for j in final["jobs"])
    assert final["reward_scale"] == runs[0.5][-1][1]["reward_scale"]


def test_the_docstring_table_names_every_feature_in_layout_order():
    # The observation layout is named once (geo_gym.decision); env.py's table must follow it.
    from geo_gym import decision
    from geo_gym.env import __doc__ as doc

    rows = [line.split("|")[1:4] for line in doc.splitlines() if line.startswith("| ") and "|" in line[2:]]
    table = [(block.strip(), int(i), name.strip()) for block, i, name in rows if i.strip().isdigit()]
    want = [("global", i, n) for i, n in enumerate(decision.GLOBAL_FEATURES)]
    want += [("region r", i, n) for i, n in enumerate(decision.REGION_FEATURES)]
    want += [("slot s", i, n) for i, n in enumerate(decision.SLOT_FEATURES)]
    want += [("option (s, rule)", i, n) for i, n in enumerate(decision.OPTION_FEATURES)]
    assert table == want
    env = GeoPipeEnv("paper-default", window=3)
    names = decision.feature_names(env.num_regions, env.window)
    assert len(names) == env.observation_space.shape[0]
    assert names[decision.slot_index(env.num_regions, 2, decision.S_MIN_GPUS)] == "slot2/min_gpus"
    assert names[decision.option_index(env.num_regions, 1, 8, decision.O_VALID)] == "slot1/pathfinder_quarter/valid"


def _always_masked_wait(env, steps):
    """Step ``env`` with the wait action while waiting is masked (nothing is pending at t = 0
    on paper-default: every job is queued, none runs), i.e. a step that changes nothing."""
    obs, info = env.reset(seed=0)
    assert not info["action_mask"][env.wait_action]
    for i in range(steps):
        obs, reward, terminated, truncated, info = env.step(env.wait_action)
        assert reward == 0.0 and info["invalid_action"] and not terminated
        if truncated:
            return i + 1, info
    return None, info


def test_an_episode_of_steps_that_change_nothing_is_truncated():
    steps, info = _always_masked_wait(GeoPipeEnv("paper-default", max_idle_steps=7), 50)
    assert steps == 7 and info["truncated_idle"]
    # the end-of-episode keys as at a termination; nothing finished, so no JCT or makespan
    assert np.isnan(info["avg_jct_h"]) and np.isnan(info["makespan_h"]) and info["total_cost"] == 0.0
    assert len(info["jobs"]) == 8 and info["reward_scale"] > 0 and info["failures"] == 0
    env = GeoPipeEnv("paper-default")
    assert _always_masked_wait(env, 500)[0] == env.max_idle_steps == 100
    with pytest.raises(ValueError, match="max_idle_steps"):
        GeoPipeEnv("paper-default", max_idle_steps=0)


def test_the_vector_env_truncates_and_resets_idle_envs():
    venv = GeoPipeVectorEnv(2, "paper-default", max_idle_steps=3, autoreset_mode="SameStep")
    obs, info = venv.reset(seed=0)
    wait = venv._template.wait_action
    rng = np.random.default_rng(0)
    for _ in range(3):
        valid = int(rng.choice(np.flatnonzero(info["action_mask"][1])))
        obs, _, terminated, truncated, info = venv.step([wait, valid])  # env 0 idles, env 1 acts
    assert truncated.tolist() == [True, False] and not terminated.any()
    assert info["_final_info"].tolist() == [True, False] and info["final_info"]["truncated_idle"][0]
    assert info["time_h"][0] == 0.0 and not info["action_mask"][0][wait]  # env 0 starts afresh


def test_sb3_evaluate_policy_returns_for_a_policy_stuck_on_a_masked_action():
    from stable_baselines3.common.evaluation import evaluate_policy

    env = gym.make("geo_gym/GeoPipe-v0", scenario="paper-default", max_idle_steps=10)

    class AlwaysWait:  # an unmasked policy's worst case: the same invalid action forever
        def predict(self, obs, state=None, episode_start=None, deterministic=True):
            return np.full(len(obs), env.unwrapped.wait_action), None

    mean, _ = evaluate_policy(AlwaysWait(), env, n_eval_episodes=2, deterministic=True)
    assert mean == 0.0  # nothing happened, and the episodes ended
