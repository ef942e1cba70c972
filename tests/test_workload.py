"""Job-level settings that trace jobs rely on: a GPU request capping every rule, and an
explicit (possibly fractional) iteration count."""

import numpy as np
import pytest

import baselines
import geo_gym
from geo_gym import catalog, costmodel
from geo_gym.cluster import Cluster, Region
from geo_gym.env import GeoPipeEnv
from geo_gym.placement import NUM_RULES
from geo_gym.scenarios import Scenario
from geo_gym.workload import JobSpec, profile

QWEN = catalog.model_by_name("Qwen2.5-14B")  # K* = 48, fits on no fewer than 6 A6000s
SMALL = catalog.model_by_name("Llama-3.2-1B")  # K* = 16, fits on one A6000
ALPACA = catalog.dataset_by_name("Alpaca-52k")


def two_regions(jobs):
    cl = Cluster((Region("R", 64, 0.2, 10.0), Region("S", 64, 0.3, 10.0)))
    return Scenario("test", cl, tuple(jobs))


def test_max_gpus_caps_the_target_and_the_ideal_duration():
    free = profile(JobSpec("a", SMALL, ALPACA))
    capped = profile(JobSpec("b", SMALL, ALPACA, max_gpus=4))
    assert free.k_target == free.k_star == 16 and capped.k_target == 4
    work, mb, act = capped.work, capped.num_microbatches, capped.activation_gbit
    t4 = costmodel.single_region_iteration_time(
        work, 4, act, catalog.DEFAULT_INTRA_REGION_GBPS, catalog.DEFAULT_STAGE_OVERHEAD_S, mb
    )
    assert capped.ideal_duration == pytest.approx(capped.iterations * t4)
    assert capped.ideal_duration > free.ideal_duration  # fewer GPUs, slower


@pytest.mark.parametrize("name", ["bace_pipe", "lcf", "ldf", "cr_lcf", "cr_ldf", "bace_pipe_no_costmin"])
def test_every_rule_respects_the_request(name):
    jobs = [JobSpec(f"j{i}", SMALL, ALPACA, max_gpus=g) for i, g in enumerate([1, 3, 8, 100])]
    res = geo_gym.simulate(two_regions(jobs), baselines.make(name), seed=0)
    assert list(res.jobs.gpus) == [1, 3, 8, 16]  # the request, or K* when the request is larger


def test_a_request_below_the_memory_minimum_is_refused_at_load():
    job = JobSpec("tight", QWEN, ALPACA, max_gpus=4)
    with pytest.raises(ValueError, match=r"'tight'.*Qwen2\.5-14B.*A6000.*memory minimum of 6"):
        geo_gym.simulate(two_regions([job]), baselines.make("bace_pipe"), seed=0)
    res = geo_gym.simulate(two_regions([job]), baselines.make("bace_pipe"), seed=0,
                           env_kwargs={"start_rule": "any"})  # the paper's reading: no memory
    assert list(res.jobs.gpus) == [4]


def test_env_options_respect_the_request():
    env = GeoPipeEnv(two_regions([JobSpec("j", SMALL, ALPACA, max_gpus=5)]), window=1)
    env.reset(seed=0)
    g = env.opts.g[0, 0]
    assert g.max() == 5 and (g[: NUM_RULES] > 0).all()


def test_fractional_iterations_run_exactly():
    job = JobSpec("short", SMALL, ALPACA, iterations=0.3, max_gpus=2)
    res = geo_gym.simulate(two_regions([job]), baselines.make("lcf"), seed=0)
    p = profile(job)
    assert res.jobs.loc[0, "iters"] == pytest.approx(0.3)
    assert res.jobs.loc[0, "jct_h"] * 3600 == pytest.approx(p.ideal_duration)  # 2 GPUs in one region


def test_fates_of_fractional_jobs_are_not_rounded():
    job = JobSpec("f", QWEN, ALPACA, iterations=2.0, fate_fraction=0.1)
    res = geo_gym.simulate(two_regions([job]), baselines.make("lcf"), seed=0)
    assert res.jobs.loc[0, "iters"] == pytest.approx(0.2)
    assert res.jobs.loc[0, "configured_iters"] == pytest.approx(2.0)


@pytest.mark.parametrize(
    "field, value", [("max_gpus", 0), ("max_gpus", 2.5), ("iterations", 0.0), ("iterations", np.inf)]
)
def test_bad_job_settings_name_the_field(field, value):
    with pytest.raises(ValueError, match=field):
        JobSpec("x", QWEN, ALPACA, **{field: value})


def test_max_gpus_below_min_gpus_is_rejected():
    with pytest.raises(ValueError, match="max_gpus"):
        JobSpec("x", QWEN, ALPACA, min_gpus=4, max_gpus=2)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_simulate_follows_the_drawn_region_count(seed):
    """``random`` draws 3-6 regions per seed; the fast path sizes its core to the workload."""
    res = geo_gym.simulate("random", baselines.make("lcf"), seed=seed, scenario_kwargs={"num_jobs": 30})
    assert len(res.jobs) == 30 and (res.jobs.jct_h > 0).all()


@pytest.mark.parametrize("submit", [1e300, np.inf, 1e15 * (1 + 1e-15)])
def test_submit_times_beyond_float_resolution_are_refused(submit):
    """Beyond MAX_SUBMIT_S (1e15 s) float64 seconds stop resolving run times: at 1e300 s an
    hour-long run vanishes (1e300 + 3600 == 1e300) and its JCT would be 0."""
    from geo_gym.workload import MAX_SUBMIT_S, JobTable

    assert 1e300 + 3600.0 == 1e300 and MAX_SUBMIT_S + 0.125 != MAX_SUBMIT_S
    with pytest.raises(ValueError, match=r"JobSpec 'late': submit .* beyond 1e\+15 s"):
        JobSpec("late", SMALL, ALPACA, submit=submit)
    with pytest.raises(ValueError, match=r"JobTable row 1 \(job 'job2'\): submit .* beyond 1e\+15 s"):
        JobTable(model=[0, 0], dataset=[0, 0], submit=[0.0, submit], epochs=[1.0, 1.0])


def test_submit_time_at_the_bound_is_simulated():
    from geo_gym.workload import MAX_SUBMIT_S

    res = geo_gym.simulate(two_regions([JobSpec("a", SMALL, ALPACA, submit=MAX_SUBMIT_S)]),
                           baselines.make("lcf"), seed=0)
    assert res.jobs.loc[0, "jct_h"] > 0


def test_loading_refuses_a_run_lost_in_its_submit_time():
    """A submit time within the bound, but a run so short that submit + run == submit: refused
    at load, naming the job and its submit time (not a JCT of 0)."""
    tiny = JobSpec("tiny", SMALL, ALPACA, submit=1e9, iterations=1e-12)
    with pytest.raises(ValueError, match=r"job 'tiny': submit time 1000000000.0 s .*submit \+ run == submit"):
        geo_gym.simulate(two_regions([tiny]), baselines.make("lcf"), seed=0)
    # a job built around JobSpec's check is refused at load all the same
    late = JobSpec("late", SMALL, ALPACA)
    object.__setattr__(late, "submit", 1e300)
    with pytest.raises(ValueError, match=r"job 'late': submit time 1e\+300 s"):
        geo_gym.simulate(two_regions([late]), baselines.make("lcf"), seed=0)
