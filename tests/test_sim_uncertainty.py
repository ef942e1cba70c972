"""The uncertainty layer inside the simulator core: fates, predictions, failures, repairs,
failure handler, Metric Tracker (SchedMate; geo_gym/uncertainty)."""

import numpy as np
import pytest

import baselines
import geo_gym
from geo_gym import catalog, decision, fixed, loading, sim
from geo_gym.cluster import Cluster, Region
from geo_gym.env import GeoPipeEnv
from geo_gym.placement import RULE_PATHFINDER
from geo_gym.scenarios import Scenario, make_scenario
from geo_gym.uncertainty import UncertaintyConfig
from geo_gym.workload import JobSpec

QWEN = catalog.model_by_name("Qwen2.5-14B")  # K* = 48
ALPACA = catalog.dataset_by_name("Alpaca-52k")


def one_region(gpus=64, jobs=None):
    cl = Cluster((Region("R", gpus, 0.2, 10.0), Region("S", gpus, 0.3, 10.0)))
    return Scenario("test", cl, tuple(jobs or [JobSpec("j", QWEN, ALPACA)]))


def loaded(scen, unc, history=None):
    core = sim.ensure(sim.allocate(1, scen.cluster.num_regions, 1), **loading.required_sizes(scen, unc))
    jobs = loading.load(core, 0, scen, np.random.default_rng(0), unc, history)
    return core, jobs


def test_failure_rolls_back_to_checkpoint_and_keeps_charging():
    unc = UncertaintyConfig(failure_rate_per_gpu_hour=1e-3, checkpoint_interval_hours=1.0,
                            repair_median_hours=3.0, repair_sigma=0.0)
    core, _ = loaded(one_region(), unc)
    g = 48
    core.failure_draws[0, 0, 0] = 2.5 * 1e-3 * g  # the first attempt fails after exactly 2.5 h
    core.failure_draws[0, 0, 1:] = np.inf
    assert fixed.run_fixed_policy(core, 0, fixed.ORDER_FCFS, RULE_PATHFINDER, 0)
    t_iter = core.t_iter_s[0, 0]
    kept = 2.0 * 3600 / t_iter  # checkpoints at 1 h and 2 h; 0.5 h of work is lost
    assert core.done_iters[0, 0] == pytest.approx(kept)
    assert core.n_fail[0, 0] == 1 and core.attempt[0, 0] == 2
    manual = unc.manual_delay_hours
    restart = (2.5 + manual) * 3600
    assert core.attempt_start_s[0, 0] == pytest.approx(restart)  # handler off: manual delay
    assert core.end_s[0, 0] == pytest.approx(restart + (core.iters[0, 0] - kept) * t_iter)
    rate = core.cost_per_s[0, 0]  # same placement: region R still has 63 >= 48 GPUs
    assert core.cost_usd[0, 0] == pytest.approx(rate * (2.5 * 3600 + (core.iters[0, 0] - kept) * t_iter))
    assert core.repairing[0].sum() == 0 and (core.free[0] == core.cap[0]).all()


def test_repaired_gpu_leaves_and_comes_back():
    unc = UncertaintyConfig(failure_rate_per_gpu_hour=1e-3, repair_median_hours=3.0, repair_sigma=0.0)
    core, _ = loaded(one_region(gpus=48), unc)
    core.failure_draws[0, 0, 0] = 1.0 * 1e-3 * 48  # fails after 1 h
    core.failure_draws[0, 0, 1:] = np.inf
    assert fixed.decide(core, 0, fixed.ORDER_FCFS, RULE_PATHFINDER, 0) == 0
    sim.advance(core, 0)  # the failure at 1 h
    assert core.now_s[0] == pytest.approx(3600) and core.status[0, 0] == sim.DELAYED
    assert core.repairing[0].tolist() == [1, 0] and core.free[0].tolist() == [47, 48]
    sim.advance(core, 0)  # re-queued after the manual delay (2 h)
    assert core.now_s[0] == pytest.approx(3 * 3600) and core.status[0, 0] == sim.PENDING
    assert core.repairing[0].tolist() == [1, 0]
    sim.advance(core, 0)  # the repair (3 h after the failure)
    assert core.now_s[0] == pytest.approx(4 * 3600)
    assert core.repairing[0].tolist() == [0, 0] and core.free[0].tolist() == [48, 48]


def test_more_concurrent_repairs_than_jobs():
    # A job can fail again while its earlier failure's GPUs are still being repaired, so
    # repairs in progress can outnumber the jobs (at most one failure per attempt).
    unc = UncertaintyConfig.preset(
        "realistic", handler=True, failure_rate_per_gpu_hour=1e-2, repair_median_hours=24.0,
        diagnosis_delay_hours=0.0,
    )
    env = GeoPipeEnv("recurring", {"num_jobs": 10}, uncertainty=unc)
    _, info = env.reset(seed=0)
    most = 0
    while True:
        a = int(np.flatnonzero(info["action_mask"])[0])
        _, _, done, _, info = env.step(a)
        most = max(most, int(env.core.n_repairs[0]))
        if done:
            break
    assert most > len(env.jobs)
    assert len(info["jobs"]) == 10 and info["failures"] > 10
    assert (env.core.free[0] <= env.core.cap[0]).all()


def test_handler_recognised_failure_waits_only_the_diagnosis_delay():
    unc = UncertaintyConfig(failure_rate_per_gpu_hour=1e-3, handler=True)
    core, _ = loaded(one_region(), unc)
    core.failure_draws[0, 0, 0] = 1e-3 * 48
    core.failure_draws[0, 0, 1:] = np.inf
    core.handler_u[0, 0, 0] = 0.0  # below the true-positive rate: recognised
    assert fixed.run_fixed_policy(core, 0, fixed.ORDER_FCFS, RULE_PATHFINDER, 0)
    assert core.attempt_start_s[0, 0] == pytest.approx((1.0 + unc.diagnosis_delay_hours) * 3600)


def test_same_seed_same_failures_and_fates():
    kw = dict(scenario_kwargs={"num_regions": 4}, env_kwargs={"uncertainty": "realistic"})
    a = geo_gym.simulate("random", baselines.make("bace_pipe"), seed=7, **kw)
    b = geo_gym.simulate("random", baselines.make("bace_pipe"), seed=7, **kw)
    assert a.summary == b.summary and a.jobs.equals(b.jobs)
    assert a.summary["failures"] == a.jobs["failures"].sum()


def test_early_ends_are_hidden_from_user_estimates():
    kw = dict(scenario_kwargs={"num_regions": 4, "num_jobs": 24},
              env_kwargs={"uncertainty": UncertaintyConfig(predictor="user-estimate", early_end_rate=0.5)})
    jobs = geo_gym.simulate("random", baselines.make("fcfs"), seed=1, **kw).jobs
    early = jobs["iters"] < jobs["configured_iters"]
    assert 0 < early.sum() < len(jobs)
    assert (jobs["predicted_iters"] == jobs["configured_iters"]).all()


def test_retrieval_finds_planted_history_and_falls_back():
    target = JobSpec("t", QWEN, ALPACA, metadata={"user": "alice"})
    other = JobSpec("o", catalog.model_by_name("FLM-101B"), catalog.dataset_by_name("OpenWebText"),
                    metadata={"user": "bob"})
    history = [(JobSpec("h", QWEN, ALPACA, metadata={"user": "alice"}), 40.0)] * 3
    history += [(JobSpec("x", catalog.model_by_name("Falcon-40B"), catalog.dataset_by_name("WikiText-103"),
                         metadata={"user": "carol"}), 9999.0)]
    core, jobs = loaded(one_region(jobs=[target, other]), UncertaintyConfig(predictor="schedmate"), history)
    names = [j.name for j in jobs]
    t, o = names.index("t"), names.index("o")
    assert core.pred_hit[0, t] and core.pred_iters[0, t] == pytest.approx(40.0)
    assert not core.pred_hit[0, o] and core.pred_iters[0, o] == core.full_iters[0, o]


def test_retrieval_store_grows_as_jobs_finish():
    jobs = [JobSpec(f"j{i}", QWEN, ALPACA, submit=i * 400_000.0, metadata={"user": "u"}) for i in range(3)]
    core, _ = loaded(one_region(jobs=jobs), UncertaintyConfig(predictor="schedmate"))
    assert fixed.run_fixed_policy(core, 0, fixed.ORDER_FCFS, RULE_PATHFINDER, 0)
    assert core.n_store[0] == 3
    assert not core.pred_hit[0, 0]  # nothing had finished when j0 arrived
    assert core.pred_hit[0, 2] and core.pred_iters[0, 2] == pytest.approx(core.iters[0, 0])


def test_metric_tracker_in_the_observation():
    perfect = GeoPipeEnv("paper-fig1", window=2)
    blind = GeoPipeEnv("paper-fig1", window=2, uncertainty=UncertaintyConfig(tracker_detect_prob=0.0))
    for env in (perfect, blind):
        env.reset(seed=0)
        obs, *_ = env.step(0)  # start P
    c = perfect.core
    j = int(c.running[0, 0])
    truth_h = (c.end_s[0, j] - c.now_s[0]) / 3600
    coverage, soonest = decision.G_TRACKER_COVERAGE, decision.G_TRACKER_SOONEST
    assert perfect._obs[coverage] == 1.0 and perfect._obs[soonest] == pytest.approx(np.log1p(truth_h), rel=1e-5)
    assert blind._obs[coverage] == 0.0 and blind._obs[soonest] == 0.0


def test_schedmate_sjf_runs_with_its_own_predictor_and_handler():
    pol = baselines.make("schedmate_sjf")
    assert pol.uncertainty == {"predictor": "schedmate", "predictor_kwargs": {}, "handler": True}
    kw = {"scenario_kwargs": {"num_jobs": 20}, "env_kwargs": {"uncertainty": "realistic", "warmup_workloads": 1}}
    res = geo_gym.simulate("recurring", pol, seed=2, **kw).jobs
    plain = geo_gym.simulate("recurring", baselines.make("sjf"), seed=2, **kw).jobs
    # realistic tells sjf the user estimates (configured iterations); schedmate_sjf brings its
    # own retrieval predictor, which answers from finished look-alikes once there are some
    assert (plain.predicted_iters == plain.configured_iters).all()
    assert (res.predicted_iters != res.configured_iters).any()


def test_metadata_vectors_are_memoised_to_the_same_bits():
    derived = loading._derived(UncertaintyConfig(predictor="schedmate"))
    table = make_scenario("recurring", seed=3, num_jobs=40).jobs
    fresh = derived.predictor.vectorizer.transform([loading.job_metadata(j) for j in table])
    # keyed by the table's rows, by metadata records, then from the memo
    for jobs in (table, tuple(table), table):
        np.testing.assert_array_equal(loading._metadata_vectors(jobs, derived), fresh.astype(np.float32))


def test_the_metadata_memo_stays_within_its_bound(monkeypatch):
    monkeypatch.setattr(loading, "_VECTOR_MEMO_SIZE", 5)
    derived = loading._derived(UncertaintyConfig(predictor="schedmate", max_attempts=3))
    table = make_scenario("recurring", seed=3, num_jobs=40).jobs  # more than 5 records
    fresh = derived.predictor.vectorizer.transform([loading.job_metadata(j) for j in table])
    for jobs in (table, tuple(table)[:3], table[:2], table):
        np.testing.assert_array_equal(loading._metadata_vectors(jobs, derived), fresh[: len(jobs)].astype(np.float32))
        assert len(derived.vectors) <= 5


def test_a_reused_env_forgets_the_last_episodes_retrieval_store():
    # Loading resets only the store's count, not its rows: nothing may read past the count.
    def run(env, seed):
        obs, info = env.reset(seed=seed)
        out, done = [obs], False
        while not done:
            obs, reward, done, _, info = env.step(int(np.flatnonzero(info["action_mask"])[0]))
            out += [obs, reward]
        return out

    kwargs = dict(scenario="recurring", scenario_kwargs={"num_jobs": 20}, uncertainty="schedmate")
    used = GeoPipeEnv(**kwargs)
    run(used, 1)
    assert used.core.n_store[0] == 20
    for a, b in zip(run(used, 2), run(GeoPipeEnv(**kwargs), 2), strict=True):
        np.testing.assert_array_equal(a, b)
