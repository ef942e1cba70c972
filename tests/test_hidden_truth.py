"""What policies and agents may know: predictions, never the hidden truth (fates, true
durations); and the uncertainty streams and features that carry it (env.py, sim.py docstrings)."""

import math

import numpy as np
import pytest

import baselines
import geo_gym
from geo_gym import catalog, decision, fixed, loading, sim
from geo_gym.cluster import Cluster, Region
from geo_gym.env import GeoPipeEnv
from geo_gym.placement import RULE_NAMES, RULE_PATHFINDER
from geo_gym.scenarios import Scenario
from geo_gym.uncertainty import UncertaintyConfig
from geo_gym.workload import JobSpec

QWEN = catalog.model_by_name("Qwen2.5-14B")
ALPACA = catalog.dataset_by_name("Alpaca-52k")


def one_region(jobs, gpus=8):
    return Scenario("truth", Cluster((Region("R", gpus, 0.2, 10.0),)), tuple(jobs))


# Two jobs whose true and predicted lengths rank oppositely under user estimates: "long" asks
# for 3 epochs but ends after 1% of them; "short" asks for 1 epoch and runs it all.
OPPOSITE = [
    JobSpec("long", QWEN, ALPACA, epochs=3.0, fate_fraction=0.01),
    JobSpec("short", QWEN, ALPACA, epochs=1.0, fate_fraction=1.0),
]
USER_ESTIMATES = UncertaintyConfig(predictor="user-estimate")


@pytest.mark.parametrize("order", ["sjf", "bace_pipe"])
def test_policies_rank_jobs_on_predictions_not_on_true_durations(order):
    # One 8-GPU region: the first job started takes every GPU, so the order decides who waits.
    res = geo_gym.simulate(one_region(OPPOSITE), baselines.make(order), env_kwargs={"uncertainty": USER_ESTIMATES})
    jobs = res.jobs.set_index("name")
    assert jobs.iters["long"] < jobs.iters["short"] < jobs.predicted_iters["long"]  # truth vs belief
    assert jobs.start_h["short"] == 0.0 and jobs.start_h["long"] > 0.0  # the belief decided
    oracle = geo_gym.simulate(one_region(OPPOSITE), baselines.make(order))
    assert oracle.jobs.set_index("name").start_h["long"] == 0.0  # with the truth, the other order


def test_the_observation_shows_predicted_durations_only():
    env = GeoPipeEnv(one_region(OPPOSITE), window=2, uncertainty=USER_ESTIMATES)
    obs, _ = env.reset(seed=0)
    feats, valid, _ = decision.slot_feature_columns(2, 1)
    c = env.core
    for slot in range(2):
        j = int(c.pending[0, slot])
        predicted_h = c.pred_iters[0, j] * c.t_iter_target_s[0, j] / 3600.0
        true_h = c.iters[0, j] * c.t_iter_target_s[0, j] / 3600.0
        shown = obs[feats[slot, 2]]  # log1p(predicted remaining E_j(K*) h)
        assert shown == pytest.approx(math.log1p(predicted_h), rel=1e-6)
        if c.iters[0, j] < c.pred_iters[0, j]:  # the early ender: the truth would show less
            assert shown > math.log1p(true_h) + 1.0
        runtime = obs[valid[slot, RULE_PATHFINDER] + 2]  # the option's log1p(predicted runtime h)
        assert runtime > math.log1p(true_h)  # 8 GPUs, slower than K*, on the predicted work


def test_switching_one_uncertainty_component_leaves_the_others_draws_alone():
    # Common random numbers (uncertainty/draws.py): fates and prediction noise do not move when
    # failures are switched on.
    base = UncertaintyConfig(predictor="noisy", predictor_kwargs={"sigma": 1.0}, early_end_rate=0.5)
    kw = {"scenario_kwargs": {"num_jobs": 16}}
    off = geo_gym.simulate("paper-default", baselines.make("fcfs"), seed=4, env_kwargs={"uncertainty": base}, **kw)
    on = geo_gym.simulate(
        "paper-default", baselines.make("fcfs"), seed=4,
        env_kwargs={"uncertainty": base.replace(failure_rate_per_gpu_hour=1e-12)}, **kw,
    )
    for column in ("iters", "configured_iters", "predicted_iters"):
        assert off.jobs[column].tolist() == on.jobs[column].tolist()
    assert (off.jobs.iters < off.jobs.configured_iters).any()  # some fates are early ends


@pytest.mark.parametrize("record", ["actual", "configured"])
def test_the_core_retrieval_store_records_what_its_setting_says(record):
    jobs = [JobSpec(f"j{i}", QWEN, ALPACA, submit=i * 400_000.0, fate_fraction=0.25, metadata={"user": "u"})
            for i in range(3)]
    unc = UncertaintyConfig(predictor="schedmate", predictor_kwargs={"record": record})
    scen = one_region(jobs, gpus=64)
    core = sim.ensure(sim.allocate(1, 1, 1), **loading.required_sizes(scen, unc))
    loading.load(core, 0, scen, np.random.default_rng(0), unc)
    assert fixed.run_fixed_policy(core, 0, fixed.ORDER_FCFS, RULE_PATHFINDER, 0)
    expected = core.iters[0, :3] if record == "actual" else core.full_iters[0, :3]
    assert core.iters[0, 0] < core.full_iters[0, 0]
    assert core.store_vals[0, :3].tolist() == expected.tolist()
    assert core.pred_iters[0, 2] == pytest.approx(expected[:2].mean())  # j2 saw j0 and j1 finished


def test_metadata_only_falls_back_to_the_store_mean():
    # metadata-only answers from the store's mean when nothing is similar (fallback "store-mean"),
    # schedmate from the user estimate.
    jobs = [JobSpec("j0", QWEN, ALPACA, metadata={"user": "u"}),
            JobSpec("j1", catalog.model_by_name("FLM-101B"), catalog.dataset_by_name("OpenWebText"),
                    submit=1e9, metadata={"user": "v"})]
    for name, fallback in (("metadata-only", "store"), ("schedmate", "user")):
        unc = UncertaintyConfig(predictor=name, predictor_kwargs={"threshold": 0.9999, "k": 1})
        scen = one_region(jobs, gpus=128)
        core = sim.ensure(sim.allocate(1, 1, 1), **loading.required_sizes(scen, unc))
        loading.load(core, 0, scen, np.random.default_rng(0), unc)
        assert fixed.run_fixed_policy(core, 0, fixed.ORDER_FCFS, RULE_PATHFINDER, 0)
        stored = core.store_vals[0, 0]
        want = stored if fallback == "store" else core.full_iters[0, 1]
        assert not core.pred_hit[0, 1] and core.pred_iters[0, 1] == pytest.approx(want)
        assert stored != pytest.approx(core.full_iters[0, 1])


def test_tracker_noise_reaches_the_observation():
    exact = UncertaintyConfig(tracker_detect_prob=1.0, tracker_rmsre=0.0)
    noisy = exact.replace(tracker_rmsre=0.4)
    seen = []
    for unc in (exact, noisy):
        env = GeoPipeEnv("paper-default", uncertainty=unc)
        _, info = env.reset(seed=3)
        obs, *_ = env.step(int(np.flatnonzero(info["action_mask"])[0]))  # one job running
        seen.append(obs[decision.G_TRACKER_SOONEST])
    assert seen[0] > 0 and seen[1] > 0 and seen[0] != seen[1]


def test_a_failure_takes_gpus_per_failure_gpus_and_shows_in_the_observation():
    unc = UncertaintyConfig(failure_rate_per_gpu_hour=1e-3, gpus_per_failure=3, repair_median_hours=3.0,
                            repair_sigma=0.0)
    env = GeoPipeEnv(one_region([JobSpec("j", QWEN, ALPACA)], gpus=48), window=1, uncertainty=unc)
    obs, info = env.reset(seed=0)
    env.core.failure_draws[0, 0, 0] = 1.0 * 1e-3 * 48  # the first attempt fails after 1 h on 48 GPUs
    env.core.failure_draws[0, 0, 1:] = np.inf
    # Start it: it fails at 1 h, and the next decision is its re-queue after the manual delay
    # (2 h), while its 3 GPUs are still in repair (until 4 h).
    obs, _, _, _, info = env.step(0 * len(RULE_NAMES) + RULE_PATHFINDER)
    assert env.core.now_s[0] == pytest.approx(3 * 3600) and env.core.n_fail[0, 0] == 1
    assert env.core.repairing[0].tolist() == [3] and env.core.free[0].tolist() == [45]
    assert obs[decision.G_FAILURES] == pytest.approx(math.log1p(1))  # one failure so far
    assert obs[decision.G_REPAIR] == pytest.approx(3 / 48)  # GPUs under repair / all GPUs
    feats, _, _ = decision.slot_feature_columns(1, 1)
    assert obs[feats[0, 0] + 5] == pytest.approx(math.log1p(1))  # the slot's job failed once
