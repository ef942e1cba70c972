"""The GPU count as part of the action: the "levels" option set (Pathfinder at five GPU levels
from the memory minimum to K*) in the placement rules, the env, the fixed policies and the
protocol; the default set stays what it was."""

from __future__ import annotations

import numpy as np
import pytest

from agents import protocol
from baselines.policies import FixedPolicy, RandomPolicy
from geo_gym import decision, placement
from geo_gym.env import GeoPipeEnv
from geo_gym.placement import ALL_RULE_NAMES, LEVEL_RULE_NAMES, NUM_RULES, RULE_NAMES, rule_set
from geo_gym.runner import simulate

KW = {"uncertainty": "realistic", "warmup_workloads": 2}


def target(name: str, k_star: int, min_gpus: int) -> int:
    return int(placement.rule_target(ALL_RULE_NAMES.index(name), k_star, min_gpus))


@pytest.mark.parametrize("k_star,min_gpus", [(40, 12), (13, 13), (7, 1), (48, 45)])
def test_levels_run_from_the_minimum_to_k_star_in_quarters_of_the_span(k_star, min_gpus):
    span = k_star - min_gpus
    levels = [target(name, k_star, min_gpus) for name in (*LEVEL_RULE_NAMES, "pathfinder")]
    assert levels == [min_gpus + -(-span * q // 4) for q in range(5)]
    assert levels[0] == min_gpus and levels[-1] == k_star
    assert levels == sorted(levels)
    # the default rules aim where they did
    assert target("pathfinder_quarter", k_star, min_gpus) == max(min_gpus, -(-k_star // 4))
    assert target("pathfinder_half", k_star, min_gpus) == max(min_gpus, -(-k_star // 2))


def test_a_level_placement_takes_its_gpus_when_they_are_free():
    free = np.array([30, 30, 30], dtype=np.int64)
    prices = np.array([0.1, 0.2, 0.3])
    bw = np.full((3, 3), 100.0)
    k_star, min_gpus = 40, 12
    tc = np.full(k_star + 1, 1.0)
    ws = np.empty((4, 3), dtype=np.int64)
    for name in (*LEVEL_RULE_NAMES, "pathfinder"):
        path, alloc = np.full(3, -1, dtype=np.int64), np.zeros(3, dtype=np.int64)
        g, _ = placement.apply_rule(ALL_RULE_NAMES.index(name), free, prices, bw, k_star, 0.1, tc, path, alloc, ws,
                                    min_gpus)
        assert g == target(name, k_star, min_gpus) == alloc.sum(), name


def test_rule_sets_name_their_options_and_refuse_unknown_ones():
    assert rule_set(None) == rule_set("default") == RULE_NAMES and len(RULE_NAMES) == NUM_RULES == 9
    assert rule_set("levels") == RULE_NAMES + LEVEL_RULE_NAMES
    assert rule_set(["pathfinder_min", "lcf"]) == ("pathfinder_min", "lcf")
    with pytest.raises(ValueError, match="unknown rule set 'most'"):
        rule_set("most")
    with pytest.raises(ValueError, match="unknown placement rule 'pathfinder_tenth'"):
        rule_set(["pathfinder", "pathfinder_tenth"])
    with pytest.raises(ValueError, match="names a rule twice"):
        rule_set(["lcf", "lcf"])
    with pytest.raises(ValueError, match="unknown rule set"):
        GeoPipeEnv("paper-default", rules="most")


def test_the_levels_env_has_thirteen_options_a_slot():
    env = GeoPipeEnv("recurring", rules="levels", **KW)
    k, w, r = env.num_regions, env.window, len(ALL_RULE_NAMES)
    assert env.num_rules == r == 13
    assert env.action_space.n == w * r + 1 == env.wait_action + 1
    assert env.observation_space.shape == (decision.obs_size(k, w, r),)
    assert decision.layout_from_obs_size(env.observation_space.shape[0], num_rules=r) == (k, w)
    names = decision.feature_names(k, w, "levels")
    assert len(names) == env.observation_space.shape[0]
    assert names[decision.option_index(k, 2, 11, decision.O_GPUS, r)] == "slot2/pathfinder_span50/gpus_share"
    assert env.decode_action(3 * r + 9) == (3, "pathfinder_min")
    assert env.decode_action(env.wait_action) is None
    obs, info = env.reset(seed=4)
    assert env.observation_space.contains(obs)
    assert info["action_mask"].shape == (env.action_space.n,)
    # the first nine options of a slot are the default env's, to the last bit
    plain = GeoPipeEnv("recurring", **KW)
    obs9, info9 = plain.reset(seed=4)
    for s in range(w):
        a = decision.slot_index(k, s, 0, r)
        b = decision.slot_index(k, s, 0)
        assert np.array_equal(obs[a: a + decision.per_slot()], obs9[b: b + decision.per_slot()])
        assert np.array_equal(info["action_mask"][s * r: s * r + 9], info9["action_mask"][s * 9: s * 9 + 9])


def test_a_level_option_places_the_gpus_it_shows():
    env = GeoPipeEnv("recurring", rules="levels", **KW)
    obs, info = env.reset(seed=2)
    k, r = env.num_regions, env.num_rules
    starts = 0
    while True:
        mask = info["action_mask"]
        level_actions = [a for a in np.flatnonzero(mask[:-1]) if a % r >= NUM_RULES]
        action = level_actions[0] if level_actions else int(np.flatnonzero(mask)[-1])
        if level_actions:
            slot, option = divmod(action, r)
            shown = obs[decision.option_index(k, slot, option, decision.O_GPUS, r)]
            job = int(env.opts.win[0, slot])
            obs, _, done, _, info = env.step(action)
            assert not info["invalid_action"]
            assert env.core.gpus[0, job] == round(shown * env.core.k_target[0, job])
            assert env.core.gpus[0, job] >= env.core.min_gpus[0, job]
            starts += 1
        else:
            obs, _, done, _, info = env.step(action)
        if done:
            break
    assert starts > 10


@pytest.mark.parametrize("rule", ["pathfinder_min", "pathfinder_span50", "pathfinder_quarter"])
def test_level_policies_decide_the_same_on_the_env_and_the_fast_path(rule):
    policy = FixedPolicy("p", "qssf", rule, rules="levels")
    env = GeoPipeEnv("recurring", rules="levels", **KW)
    obs, _ = env.reset(seed=7)
    done = False
    while not done:
        obs, _, done, _, info = env.step(int(policy.predict(obs)[0]))
        assert not info["invalid_action"]
    fast = simulate("recurring", policy, seed=7, window=env.window, env_kwargs=KW)
    assert fast.summary["avg_jct_h"] == info["avg_jct_h"]
    assert fast.summary["total_cost"] == info["total_cost"]
    assert fast.jobs["gpus"].tolist() == [j["gpus"] for j in info["jobs"]]


def test_a_fixed_policy_names_its_option_set():
    assert FixedPolicy("p", "sjf", "lcf").rules == "default"
    assert FixedPolicy("p", "sjf", "pathfinder_min").rules == "levels"
    with pytest.raises(ValueError, match="not in the option set"):
        FixedPolicy("p", "sjf", "pathfinder_min", rules="default")
    # a default rule acts in a levels env at its index there, which is its default index
    env = GeoPipeEnv("recurring", rules="levels", **KW)
    obs, _ = env.reset(seed=1)
    a = int(FixedPolicy("p", "sjf", "lcf", rules="levels").predict(obs)[0])
    assert env.decode_action(a)[1] == "lcf"
    m = RandomPolicy.mask(obs, num_rules=env.num_rules)
    assert m.shape == (env.action_space.n,) and m[a]


def test_the_protocol_family_follows_the_envs_option_set(monkeypatch):
    assert len(protocol.order_rule_policies(("sjf",))) == NUM_RULES
    family = protocol.order_rule_policies(("sjf", "qssf"), "levels")
    assert list(family) == [f"{o}+{r}" for o in ("sjf", "qssf") for r in ALL_RULE_NAMES]
    best, means = protocol.select_best_fixed("recurring", [1_020_000], 0.1, env_kwargs={**KW, "rules": "levels"},
                                             orders=("qssf",))
    assert list(means.index) == [f"qssf+{r}" for r in ALL_RULE_NAMES]
    assert best == means["validation_objective"].idxmin()


def test_the_minimum_level_starts_every_job_on_its_minimum():
    env = GeoPipeEnv("recurring", rules="levels", **KW)
    policy = FixedPolicy("p", "sjf", "pathfinder_min", rules="levels")
    obs, _ = env.reset(seed=3)
    done = False
    while not done:
        obs, _, done, _, info = env.step(int(policy.predict(obs)[0]))
    n = int(env.core.n_jobs[0])
    assert np.array_equal(env.core.gpus[0, :n], env.core.min_gpus[0, :n])
    assert (env.core.min_gpus[0, :n] < env.core.k_target[0, :n]).any()  # the level differs from K* here


def test_simulate_gives_the_random_policy_the_envs_options():
    import baselines

    res = simulate("recurring", baselines.make("random"), seed=5, env_kwargs={**KW, "rules": "levels"})
    assert res.summary["invalid_actions"] == 0 and res.summary["steps"] > 0


def test_a_levels_agent_trains_reloads_to_identical_actions_and_acts_in_its_options(tmp_path):
    from agents.policy import AgentPolicy
    from agents.training import load_model, make_model, make_vec_env

    env = make_vec_env(2, "recurring", seed=0, rules="levels", **KW)
    model = make_model("maskable-ppo", env, seed=0, tensorboard_log=None, n_steps=32, batch_size=32,
                       features="attention")
    encoder = model.policy.features_extractor
    assert (encoder.num_rules, encoder.slot_size) == (13, decision.per_slot(13))
    model.learn(64)
    model.save(str(tmp_path / "m.zip"))
    again = load_model("maskable-ppo", tmp_path / "m.zip")
    assert again.policy.features_extractor.num_rules == 13
    single = GeoPipeEnv("recurring", rules="levels", **KW)
    rows, masks = [], []
    obs, info = single.reset(seed=3)
    for _ in range(6):
        rows.append(obs)
        masks.append(info["action_mask"])
        obs, _, done, _, info = single.step(int(np.flatnonzero(info["action_mask"])[0]))
    batch = np.stack(rows)
    a1, _ = AgentPolicy(model).predict(batch)
    a2, _ = AgentPolicy(again).predict(batch)
    assert np.array_equal(a1, a2)
    assert np.stack(masks)[np.arange(len(rows)), a1].all()  # only valid options of the 13-option layout


def test_evaluate_names_the_rules_a_checkpoint_was_trained_with(tmp_path):
    import subprocess
    import sys
    from pathlib import Path

    from agents.training import make_model, make_vec_env

    env = make_vec_env(2, "paper-fig1", seed=0, window=2, rules="levels")
    model = make_model("maskable-ppo", env, seed=0, tensorboard_log=None, n_steps=32, batch_size=32)
    ckpt = tmp_path / "last.zip"
    model.save(str(ckpt))
    script = Path(__file__).resolve().parents[1] / "scripts" / "evaluate.py"
    cmd = [sys.executable, str(script), "--policies", "lcf", str(ckpt), "--scenario", "paper-fig1", "--window", "2",
           "--seeds", "1", "--validation-seeds", "1", "--out", str(tmp_path / "out")]
    wrong = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    assert wrong.returncode != 0 and "--rules default" in wrong.stderr and "Traceback" not in wrong.stderr
    right = subprocess.run(cmd + ["--rules", "levels"], capture_output=True, text=True, timeout=600)
    assert right.returncode == 0, right.stderr[-3000:]
    assert "best fixed (" in right.stdout


def test_baselines_read_a_levels_env_and_the_vector_env_matches_the_single_one():
    import baselines
    from geo_gym.vector import GeoPipeVectorEnv

    policy = baselines.make("bace_pipe", rules="levels")
    venv = GeoPipeVectorEnv(2, "recurring", rules="levels", **KW)
    obs, _ = venv.reset(seed=10)
    singles = [GeoPipeEnv("recurring", rules="levels", **KW) for _ in range(2)]
    single_obs = [env.reset(seed=10 + i)[0] for i, env in enumerate(singles)]
    for _ in range(30):
        actions = policy.predict(obs)[0]
        assert all(venv.opts.rules == placement.rule_ids("levels"))
        obs, rewards, terminated, _, _ = venv.step(actions)
        assert not terminated.any()  # a recurring episode is longer than 30 decisions
        for i, env in enumerate(singles):
            single_obs[i], r, _, _, _ = env.step(int(actions[i]))
            assert r == rewards[i]
        assert np.array_equal(obs, np.stack(single_obs))
