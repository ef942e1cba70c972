"""A compiled reset (geo_gym.compiled_reset) loads the very episode loading would: every
field of the core and of the decision arrays, the observation, mask, reward scale, the
workload built from its seed and the generator's state afterwards; everything it does not
cover resets through loading."""

import numpy as np
import pytest

from geo_gym import compiled_reset, decision, sim
from geo_gym.env import GeoPipeEnv
from geo_gym.uncertainty import UncertaintyConfig
from geo_gym.vector import GeoPipeVectorEnv


def _same_state(a, b) -> None:
    for name in sim.FIELDS:
        assert np.array_equal(getattr(a.core, name), getattr(b.core, name), equal_nan=True), name
    for name in a.opts._fields:
        x, y = getattr(a.opts, name), getattr(b.opts, name)
        assert np.array_equal(x, y, equal_nan=True), name


def _pair(scenario, **kwargs):
    """(an env that resets compiled, its twin that resets through loading)."""
    fast, slow = GeoPipeEnv(scenario, **kwargs), GeoPipeEnv(scenario, **kwargs)
    assert fast._plan is not None
    slow._plan = None
    return fast, slow


CASES = [
    ("paper-default", {}),
    ("paper-default", {"scenario_kwargs": {"num_jobs": 20, "capacity_scale": 0.5}, "start_rule": "kstar"}),
    ("geo-wan", {"warmup_workloads": 2}),
    ("recurring", {}),
    ("recurring", {"warmup_workloads": 3, "scenario_kwargs": {"mean_interarrival": 0.0, "num_jobs": 9}}),
    ("recurring", {"uncertainty": UncertaintyConfig(predictor="user-estimate", early_end_rate=0.3)}),
    ("paper-default", {"uncertainty": UncertaintyConfig(early_end_rate=0.5), "rules": "levels"}),
]


@pytest.mark.parametrize("scenario,kwargs", CASES)
def test_a_compiled_reset_loads_what_loading_loads(scenario, kwargs):
    fast, slow = _pair(scenario, **kwargs)
    rng = np.random.default_rng(0)
    for episode in range(6):
        seed = 11 if episode == 0 else None
        obs_f, info_f = fast.reset(seed=seed)
        obs_s, info_s = slow.reset(seed=seed)
        _same_state(fast, slow)
        assert np.array_equal(obs_f, obs_s) and np.array_equal(info_f["action_mask"], info_s["action_mask"])
        assert fast._scale == slow._scale
        assert fast.np_random.bit_generator.state == slow.np_random.bit_generator.state
        assert fast._scenario is None  # not built until asked for
        assert [j.name for j in fast.jobs] == [j.name for j in slow.jobs]
        built, loaded = fast.current_scenario, slow.current_scenario
        assert built.cluster == loaded.cluster and built.start_rule == loaded.start_rule
        for column in ("model", "dataset", "submit", "epochs", "fate_fraction", "user", "template"):
            assert np.array_equal(getattr(built.jobs, column), getattr(loaded.jobs, column), equal_nan=True)
        for _ in range(3):  # the episodes go on alike
            a = int(rng.choice(np.flatnonzero(info_f["action_mask"])))
            obs_f, r_f, term_f, _, info_f = fast.step(a)
            obs_s, r_s, _, _, info_s = slow.step(a)
            assert np.array_equal(obs_f, obs_s) and r_f == r_s
            if term_f:
                break


def test_the_vector_env_resets_compiled_to_the_same_numbers():
    fast = GeoPipeVectorEnv(3, "recurring", {"num_jobs": 12}, warmup_workloads=1)
    slow = GeoPipeVectorEnv(3, "recurring", {"num_jobs": 12}, warmup_workloads=1)
    assert fast._plan is not None
    slow._plan = None
    obs_f, info_f = fast.reset(seed=5)
    obs_s, _ = slow.reset(seed=5)
    assert np.array_equal(obs_f, obs_s)
    rng = np.random.default_rng(1)
    ended = 0
    while ended < 4:  # episodes end and reset inside step
        masks = info_f["action_mask"]
        actions = (rng.random(masks.shape) * masks).argmax(axis=1)
        obs_f, r_f, term_f, trunc_f, info_f = fast.step(actions)
        obs_s, r_s, term_s, trunc_s, _ = slow.step(actions)
        assert np.array_equal(obs_f, obs_s) and np.array_equal(r_f, r_s) and np.array_equal(term_f, term_s)
        ended += int((term_f | trunc_f).sum())
    _same_state(fast, slow)
    assert [[j.name for j in jobs] for jobs in fast.jobs] == [[j.name for j in jobs] for jobs in slow.jobs]
    assert [s.name for s in fast.scenarios] == ["recurring"] * 3


@pytest.mark.parametrize("scenario,kwargs", [
    ("random", {"scenario_kwargs": {"num_regions": 4}}),  # its workload is drawn in Python
    ("paper-fig1", {}),
    ("recurring", {"uncertainty": "realistic"}),  # failures, noise, retrieval
    ("recurring", {"uncertainty": UncertaintyConfig(predictor="noisy")}),
    ("paper-default", {"uncertainty": UncertaintyConfig(predictor="retrieval")}),
])
def test_what_it_does_not_cover_resets_through_loading(scenario, kwargs):
    assert GeoPipeEnv(scenario, **kwargs)._plan is None


def test_a_warmup_scenario_resets_through_loading():
    from geo_gym.scenarios import make_scenario

    env = GeoPipeEnv("recurring", warmup_scenario=make_scenario("recurring", seed=3))
    assert env._plan is None


def test_a_generator_other_than_pcg64_resets_through_loading():
    env, twin = _pair("paper-default")
    env.reset(seed=0)
    twin.reset(seed=0)
    env.np_random = np.random.Generator(np.random.MT19937(4))
    twin.np_random = np.random.Generator(np.random.MT19937(4))
    env.reset()
    twin.reset()
    _same_state(env, twin)
    assert env._workload_seed is None and env.current_scenario is not None  # loaded through loading


def test_an_episode_loading_would_refuse_leaves_the_generator_as_it_was():
    from geo_gym.scenarios import ScenarioFactory

    env = GeoPipeEnv("recurring", scenario_kwargs={"num_jobs": 5})
    env.reset(seed=0)
    given = env._make_scenario
    # arrivals beyond workload.MAX_SUBMIT_S (a scenario refuses them, naming the job)
    far = ScenarioFactory(given.make, given.count, lambda: given.draw()._replace(mean_interarrival=1e16))
    p, _ = compiled_reset.plan(far, env.current_scenario, env.uncertainty, 0, env.core)
    held = compiled_reset.views(None, env.np_random)
    before = env.np_random.bit_generator.state
    assert compiled_reset.reset_env(compiled_reset.resetter(decision.pair(env.core, env.opts), p, held)) is None
    assert env.np_random.bit_generator.state == before


def test_numpy_sum_adds_as_numpy_does():
    x = np.random.default_rng(3).random(3000) * 1e6
    for n in [*range(300), 511, 512, 1000, 1031, 2999]:
        assert compiled_reset._numpy_sum(x[:n].copy()) == x[:n].sum()


def test_a_copied_env_resets_from_its_own_generator():
    import copy

    env = GeoPipeEnv("paper-default")
    env.reset(seed=2)
    twin = copy.deepcopy(env)
    assert twin._rng_views is None  # a copy of the views would not be the copy's generator's memory
    for _ in range(3):
        obs, _ = env.reset()
        obs_twin, _ = twin.reset()
        assert np.array_equal(obs, obs_twin)
        assert env.np_random.bit_generator.state == twin.np_random.bit_generator.state
