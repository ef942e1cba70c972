"""traces.mapping: trace jobs -> PP LLM jobs (docs/traces.md). The request -> model rule, the
request start rule, hand-worked rows, options, bad input, planted failures replayed by the
core, strict FCFS against a reference written here, and real files when present."""

from __future__ import annotations

import heapq
import math
import os
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import baselines
import geo_gym
from geo_gym import catalog, costmodel, loading, memory, sim
from geo_gym.catalog import GPUType
from geo_gym.cluster import Cluster, Region, paper_cluster
from geo_gym.memory import MemoryModel
from geo_gym.start_rule import StartRule
from geo_gym.uncertainty import UncertaintyConfig
from geo_gym.workload import DEFAULT_MEMORY, JobSpec, profile, profile_columns
from traces import read_philly_job_log, read_philly_rfold, read_trace
from traces.mapping import (
    EARLY_END_FRACTION,
    MappingOptions,
    calibrated_iterations,
    capacity_scale_to_hold,
    failure_points,
    fate_rule,
    ideal_iteration_time,
    map_trace,
    offered_load,
    size_class,
)
from traces.schema import build_job_table

TRACES_DIR = Path(os.environ.get("GEO_GYM_TRACES_DIR")
                  or Path(__file__).resolve().parents[1].parent / "shared" / "traces")
RAW_SUBSET = TRACES_DIR / "philly" / "cluster_job_log_2017-10-07_subset.json.gz"
RFOLD = TRACES_DIR / "philly" / "rfold_philly_trace.csv.gz"
SYNTHETIC_PHILLY = Path(__file__).resolve().parents[1] / "traces" / "data" / "synthetic_philly_job_log.json"
A6000, OVERHEAD, INTRA = catalog.A6000, catalog.DEFAULT_STAGE_OVERHEAD_S, catalog.DEFAULT_INTRA_REGION_GBPS
NAN = float("nan")


def _need(path: Path) -> Path:
    if not path.exists():
        pytest.skip(f"real trace {path} not present (set GEO_GYM_TRACES_DIR to the shared "
                    f"traces folder to run this test)")
    return path


# The size classes of the defaults (A6000, 16 bytes per parameter, GPipe with recomputation):
# the models the mapping gives 1-, 2-, 4-, 8- and 16-GPU requests (test_size_class).
ONE, TWO, FOUR, EIGHT, SIXTEEN = "Qwen2.5-1.5B", "Llama-3.2-3B", "Llama-3.1-8B", "Qwen2.5-14B", "Qwen2.5-32B"


def memory_min(model, gpu=A6000, mem=DEFAULT_MEMORY) -> int:
    """The memory minimum from geo_gym.memory directly (not through traces.mapping)."""
    mb = costmodel.num_microbatches(model.batch_size, catalog.DEFAULT_MICRO_BATCH)
    return memory.min_stages(mem, model.params, model.layers, model.hidden, mb,
                             catalog.DEFAULT_MICRO_BATCH * catalog.DEFAULT_SEQ_LEN, gpu.memory_gb)


def t_iter(model_name: str, stages: int) -> float:
    """Eq. (1) in one region, computed here from the job profile, not from traces.mapping."""
    p = profile(JobSpec("x", catalog.model_by_name(model_name), catalog.PAPER_DATASETS[0]))
    return costmodel.single_region_iteration_time(
        p.work, stages, p.activation_gbit, INTRA, OVERHEAD, p.num_microbatches
    )


def table(*jobs: dict) -> pd.DataFrame:
    """A common job table from a few jobs (attempts as (start, end) on the submit clock)."""
    cols = {c: [] for c in ("job_id", "submit", "gpus", "gpus_per_node", "duration", "queue",
                            "state", "attempts", "fail_time", "user", "vc", "type")}
    for i, job in enumerate(jobs):
        attempts = job.get("attempts", ())
        row = {
            "job_id": f"j{i}", "submit": job.get("submit", float(i)), "gpus": job.get("gpus", 1),
            "gpus_per_node": NAN, "queue": NAN, "state": job.get("state", "COMPLETED"),
            "attempts": attempts, "fail_time": job.get("fail_time", NAN),
            "duration": job.get("duration", sum(e - s for s, e in attempts) if attempts else NAN),
            "user": job.get("user"), "vc": None, "type": job.get("type"),
        }
        for k, v in row.items():
            cols[k].append(v)
    return build_job_table(cols, "test-table", None)


# ----------------------------------------------------------------------------- the rules
@pytest.mark.parametrize("gpus,model", [
    (1, "Qwen2.5-1.5B"), (2, "Llama-3.2-3B"), (3, "Llama-3.2-3B"), (4, "Llama-3.1-8B"),
    (5, "Llama-3.1-8B"), (6, "Qwen2.5-14B"), (8, "Qwen2.5-14B"), (11, "Gemma-3-27B"),
    (12, "Gemma-3-27B"), (13, "Qwen2.5-32B"), (16, "Qwen2.5-32B"), (20, "Falcon-40B"),
    (24, "Falcon-40B"), (32, "Llama-3.1-70B"), (39, "Llama-3.1-70B"), (40, "FLM-101B"),
    (64, "FLM-101B"), (128, "FLM-101B"), (1024, "FLM-101B"),
])
def test_size_class(gpus, model):
    """docs/traces.md's table: memory minima on the A6000 are 1 (Llama-3.2-1B, Qwen2.5-1.5B),
    2, 4 (Qwen2.5-7B, Llama-3.1-8B), 6 (the 14B pair), 11, 13, 20, 27, 40 (FLM-101B), 48."""
    assert size_class(gpus).name == model


@pytest.mark.parametrize("gpu,mem", [
    (A6000, DEFAULT_MEMORY),
    (A6000, MemoryModel(schedule="1f1b", usable_fraction=0.9)),
    (GPUType("H100-80", 80.0, 400e12, 0.7), DEFAULT_MEMORY),
    (GPUType("A10-24", 24.0, 50e12, 0.15), DEFAULT_MEMORY),
])
def test_size_class_is_the_largest_model_that_fits(gpu, mem):
    """For every request: the model fits on the request (memory minimum from geo_gym.memory,
    computed here) and no catalog model with more parameters does; on equal parameters the
    one with more layers wins (Qwen2.5-14B over Ministral-3-14B)."""
    mins = {m.name: memory_min(m, gpu, mem) for m in catalog.MODELS}
    for gpus in range(1, 131):
        fits = [m for m in catalog.MODELS if 0 < mins[m.name] <= gpus]
        if not fits:
            with pytest.raises(ValueError, match=f"GPU request of {gpus}"):
                size_class(gpus, gpu, mem)
            continue
        model = size_class(gpus, gpu, mem)
        assert 0 < mins[model.name] <= gpus
        assert not any(m.params > model.params for m in fits), (gpus, model.name)
        assert not any(m.params == model.params and m.layers > model.layers for m in fits)
    assert min(v for v in mins.values() if v > 0) <= 130  # the loop saw models fit


def test_size_class_one_gpu_and_ties():
    one = size_class(1)
    assert memory_min(one) == 1 and one.name == ONE  # a 1-GPU job's model fits on one A6000
    assert memory_min(catalog.model_by_name("Qwen2.5-14B")) == memory_min(catalog.model_by_name("Ministral-3-14B"))
    assert size_class(6).name == size_class(10).name == "Qwen2.5-14B"  # 48 layers > 40
    assert size_class(64).name == "FLM-101B"  # 101B, minimum 40, over Solar-Open-100B (minimum 48)


def test_size_class_without_a_fitting_model_is_a_clear_error():
    tiny = GPUType("tiny", 1.0, 1e12, 0.1)  # the 1 GiB framework reserve alone fills it
    with pytest.raises(ValueError, match=r"GPU request of 4: no catalog model fits on 4 tiny.*even at one layer"):
        size_class(4, tiny)
    small = GPUType("small-16", 16.0, 50e12, 0.1)  # 1.24B x 16 B = 19.8 GB: no model on one GPU
    with pytest.raises(ValueError, match=r"GPU request of 1: .*small-16.*smallest memory minimum is 2"):
        size_class(1, small)
    assert size_class(2, small).name in ("Llama-3.2-1B", "Qwen2.5-1.5B")
    with pytest.raises(ValueError, match="job 'j0'.*GPU request of 1"):
        map_trace(table({"duration": 100.0}), target_load=None,
                  cluster=Cluster((Region("R", 8, 0.2, 10.0),), gpu=small))


def test_a_request_beyond_the_tables_int32_counts_is_a_clear_error():
    """The mapped table holds GPU counts as int32 (mapping.FRAME_DTYPES): a request that does
    not fit is refused, naming the job, never wrapped around."""
    with pytest.raises(ValueError, match=r"job 'j1': requests 2147483648 GPUs, more than 2147483647"):
        map_trace(table({"duration": 100.0}, {"duration": 100.0, "gpus": 2**31}), target_load=None)
    ok = map_trace(table({"duration": 100.0}, {"duration": 100.0, "gpus": 2**31 - 1}), target_load=None)
    assert ok.jobs["max_gpus"].tolist() == [1, 2**31 - 1]


@pytest.mark.parametrize("bad", [0, -1, 1.5, True])
def test_size_class_rejects_bad_requests(bad):
    with pytest.raises(ValueError, match="GPU request"):
        size_class(bad)


def test_calibration_equation():
    t = t_iter(ONE, 1)
    assert ideal_iteration_time(catalog.model_by_name(ONE), 1, A6000, OVERHEAD, INTRA) == t
    assert calibrated_iterations(10 * t, t) == pytest.approx(10)
    assert calibrated_iterations(10.4 * t, t) == pytest.approx(10.4)  # no rounding
    assert calibrated_iterations(0.1 * t, t) == pytest.approx(0.1)  # a fraction of one iteration
    for bad in (NAN, 0.0, -1.0, math.inf):
        with pytest.raises(ValueError, match="duration"):
            calibrated_iterations(bad, t)


def test_fate_rule_table():
    assert fate_rule("COMPLETED") == (1.0, 1.0) and fate_rule("UNKNOWN") == (1.0, 1.0)
    for state in ("CANCELLED", "TIMEOUT", "FAILED"):
        assert fate_rule(state) == (1.0, pytest.approx(1 / EARLY_END_FRACTION))
    assert fate_rule("NODE_FAIL") == (2.0, 2.0) and fate_rule("PREEMPTED") == (2.0, 2.0)
    assert EARLY_END_FRACTION == pytest.approx(0.7 / 2.7)
    with pytest.raises(ValueError, match="RUNNING"):
        fate_rule("RUNNING")


def test_failure_points():
    att = ((0.0, 10.0), (12.0, 40.0), (50.0, 55.0))
    assert failure_points("COMPLETED", att, 43.0, NAN) == (10.0, 28.0)  # all but the last attempt
    assert failure_points("CANCELLED", att, 43.0, NAN) == (10.0, 28.0)
    assert failure_points("FAILED", att, 43.0, NAN) == ()  # repeats of the application error
    assert failure_points("COMPLETED", ((0.0, 10.0),), 10.0, NAN) == ()
    assert failure_points("NODE_FAIL", ((5.0, 25.0),), 20.0, 17.0) == (12.0,)  # fail_time - start
    assert failure_points("NODE_FAIL", ((5.0, 25.0),), 20.0, NAN) == (20.0,)  # no fail_time: end


def test_offered_load_counts_overlap_with_the_arrival_span():
    submit = np.array([0.0, 50.0, 100.0])
    run = np.array([100.0, 10.0, 1000.0])
    gpus = np.array([2, 4, 8])
    # span [0, 100]: 2 x 100 + 4 x 10 + 8 x 0 GPU-seconds over 100 s
    assert offered_load(submit, run, gpus) == pytest.approx(2.4)
    assert offered_load(np.zeros(2), np.array([10.0, 20.0]), np.array([1, 1])) == pytest.approx(1.5)


# ----------------------------------------------------------------------------- one job, by hand
def test_completed_job_by_hand():
    t8 = t_iter(EIGHT, 8)
    m = map_trace(table({"gpus": 8, "duration": 37.2 * t8}), target_load=None)
    row = m.jobs.iloc[0]
    assert (row.model, row.max_gpus, row.stages, row.kstar) == (EIGHT, 8, 8, 48)
    assert (row.layers, row.memory_min, row.min_gpus) == (48, 6, 8)  # gang: all 8 or wait
    assert row.executed_iters == row.configured_iters == pytest.approx(37.2)  # not rounded
    assert row.t_iter_s == pytest.approx(t8) and row.run_s == pytest.approx(37.2 * t8)
    spec = m.scenario.jobs[0]
    assert spec.iterations == pytest.approx(37.2) and spec.max_gpus == 8 and spec.fate_fraction == 1.0
    p = profile(spec, memory_model=m.scenario.memory_model, start_rule=m.scenario.start_rule)
    assert p.iterations == spec.iterations and p.k_target == p.min_gpus == 8
    assert p.ideal_duration == pytest.approx(37.2 * t8)  # E_j on the request: the traced run
    assert spec.failure_gpu_hours is None  # no attempts recorded: the random process applies
    assert m.scenario.cluster.capacities.tolist() == paper_cluster().capacities.tolist()


def test_early_end_job_by_hand():
    t1 = t_iter(ONE, 1)
    m = map_trace(table({"state": "FAILED", "duration": 20.3 * t1}), target_load=None)
    row = m.jobs.iloc[0]
    configured = 20.3 / EARLY_END_FRACTION  # 78.3, not rounded
    assert row.executed_iters == pytest.approx(20.3) and row.configured_iters == pytest.approx(configured)
    spec = m.scenario.jobs[0]
    assert profile(spec).iterations == pytest.approx(configured)
    assert spec.fate_fraction == pytest.approx(EARLY_END_FRACTION)
    core = sim.ensure(sim.allocate(1, 6, 1), **loading.required_sizes(m.scenario, UncertaintyConfig()))
    loading.load(core, 0, m.scenario, np.random.default_rng(0), UncertaintyConfig())
    # it runs exactly the traced work; a user estimate sees the configured length
    assert core.iters[0, 0] == pytest.approx(20.3) and core.full_iters[0, 0] == pytest.approx(configured)
    assert core.k_target[0, 0] == core.min_gpus[0, 0] == 1  # the request, not K* = 19


def test_one_gpu_short_job_by_hand():
    """A 1-GPU 600 s job: Qwen2.5-1.5B (fits on one A6000) on one GPU, 600 / t_iter(1) = 2.33
    iterations, and its ideal replay (alone, on one GPU) takes exactly the traced 600 s under
    every baseline."""
    t1 = t_iter(ONE, 1)
    m = map_trace(table({"gpus": 1, "duration": 600.0}), target_load=None)
    spec = m.scenario.jobs[0]
    assert spec.model.name == ONE and spec.max_gpus == 1
    assert spec.iterations == pytest.approx(600 / t1) and 2.3 < spec.iterations < 2.4
    for name in baselines.names():
        res = geo_gym.simulate(m.scenario, baselines.make(name))
        job = res.jobs.iloc[0]
        assert job.gpus == 1, name
        assert job.iters == pytest.approx(600 / t1), name
        assert job.jct_h * 3600 == pytest.approx(600.0), name


@pytest.mark.parametrize("name", baselines.names())
def test_requests_cap_every_baseline(name):
    """Under the default ``request`` start rule a 16-GPU Qwen2.5-32B job (K* 60) gets 16 GPUs,
    a 128-GPU FLM-101B job its 80 layers (above its K* of 74: never capped by K*), 1- and 4-GPU
    jobs their request; each alone runs its traced time. The random policy too: its half- and
    quarter-target options are below the jobs' minimum."""
    jobs = [{"gpus": g, "duration": 3000.0, "submit": i * 1e5} for i, g in enumerate((16, 128, 1, 4))]
    m = map_trace(table(*jobs), target_load=None, cluster=Cluster((Region("R", 200, 0.2, 10.0),)))
    assert [s.max_gpus for s in m.scenario.jobs] == [16, 128, 1, 4]
    assert m.jobs.stages.tolist() == m.jobs.min_gpus.tolist() == [16, 80, 1, 4]
    assert m.jobs.kstar.tolist()[:2] == [60, 74]
    res = geo_gym.simulate(m.scenario, baselines.make(name))
    assert res.jobs.gpus.tolist() == [16, 80, 1, 4]
    assert (res.jobs.jct_h * 3600).to_numpy() == pytest.approx([3000.0] * 4)


def test_other_start_rules_aim_at_min_request_kstar():
    """Under ``memory`` (and ``kstar``) the rules aim at min(request, K*): the 128-GPU FLM-101B
    job at K* = 74, still calibrated to its traced time there; ``memory`` lets a job start
    from its memory minimum, ``kstar`` only on all of its target."""
    jobs = [{"gpus": g, "duration": 3000.0, "submit": i * 1e5} for i, g in enumerate((16, 128, 1))]
    cl = Cluster((Region("R", 200, 0.2, 10.0),))
    for rule, mins in (("memory", [13, 40, 1]), ("kstar", [16, 74, 1])):
        m = map_trace(table(*jobs), target_load=None, cluster=cl, start_rule=rule)
        assert m.scenario.start_rule == StartRule.parse(rule)
        assert m.jobs.stages.tolist() == [16, 74, 1] and m.jobs.min_gpus.tolist() == mins
        res = geo_gym.simulate(m.scenario, baselines.make("fcfs"))
        assert res.jobs.gpus.tolist() == [16, 74, 1]
        assert (res.jobs.jct_h * 3600).to_numpy() == pytest.approx([3000.0] * 3)


def test_mapped_jobs_load_at_their_request():
    """Every Philly request size: the scenario's start rule is ``request`` and geo_gym loads
    each job with min_gpus == k_target == min(request, layers) (what the simulator enforces,
    workload.profile_columns), the model fitting on that many GPUs."""
    sizes = (1, 2, 4, 8, 16, 24, 32, 64, 128)
    m = map_trace(table(*[{"gpus": g, "duration": 600.0} for g in sizes]), target_load=None)
    scen, cl = m.scenario, m.scenario.cluster
    assert scen.start_rule == StartRule("request") and scen.memory_model == DEFAULT_MEMORY
    cols = profile_columns(scen.jobs, cl.gpu, scen.stage_overhead, cl.intra_region_gbps,
                           scen.memory_model, scen.start_rule)
    expected = [min(g, s.model.layers) for g, s in zip(sizes, scen.jobs, strict=True)]
    assert expected[-1] == 80  # 128 GPUs on FLM-101B's 80 layers
    assert cols["min_gpus"].tolist() == cols["k_target"].tolist() == expected == m.jobs.stages.tolist()
    assert all(0 < memory_min(s.model) <= g for g, s in zip(expected, scen.jobs, strict=True))
    # the calibration: the ideal run on G' GPUs takes the traced 600 s
    assert (cols["iterations"] * cols["tk"]) == pytest.approx([600.0] * len(sizes))


def test_ideal_replay_takes_the_traced_run_times():
    """Jobs far apart (no queueing) on one large region: every job's JCT is its traced run
    (COMPLETED, UNKNOWN, early ends), twice it for an interruption (it runs all its work)."""
    states = ("COMPLETED", "FAILED", "CANCELLED", "PREEMPTED", "UNKNOWN", "TIMEOUT")
    durations = (45.0, 700.0, 1234.5, 300.0, 86_400.0, 5.0)
    gpus = (1, 2, 8, 3, 32, 64)
    jobs = [{"state": st, "duration": d, "gpus": g, "submit": i * 1e6}
            for i, (st, d, g) in enumerate(zip(states, durations, gpus, strict=True))]
    m = map_trace(table(*jobs), target_load=None, cluster=Cluster((Region("R", 100, 0.2, 10.0),)))
    res = geo_gym.simulate(m.scenario, baselines.make("bace_pipe"))
    expected = [d * (2.0 if st == "PREEMPTED" else 1.0) for st, d in zip(states, durations, strict=True)]
    assert (res.jobs.jct_h * 3600).to_numpy() == pytest.approx(expected)
    assert res.jobs.gpus.tolist() == [1, 2, 8, 3, 32, 64]  # each its request (64: FLM-101B)


def test_retries_become_planted_failures():
    t4 = t_iter(FOUR, 4)
    att = ((0.0, 3 * t4), (3 * t4 + 60, 10 * t4 + 60))  # 3 + 7 iterations' worth
    m = map_trace(table({"gpus": 4, "attempts": att}), target_load=None)
    spec = m.scenario.jobs[0]
    assert m.jobs.iloc[0].executed_iters == pytest.approx(10)
    assert spec.failure_gpu_hours == pytest.approx((3 * t4 * 4 / 3600,))  # d_a x G' / 3600
    # a request above the model's layers: the failure is counted on the 80 GPUs the job runs on
    big = map_trace(table({"gpus": 128, "attempts": ((0.0, 500.0), (600.0, 900.0))}), target_load=None)
    assert big.jobs.iloc[0].stages == 80
    assert big.scenario.jobs[0].failure_gpu_hours == pytest.approx((500 * 80 / 3600,))


def test_planted_failures_replay_the_trace():
    """On a region with exactly the ideal stage count, continuous checkpointing and no delays,
    the core reproduces the traced attempts: a failure at the end of each retried attempt."""
    t2 = t_iter(TWO, 2)
    att = ((0.0, 4 * t2), (4 * t2 + 5, 6.3 * t2 + 5), (7 * t2, 11.5 * t2))
    cl = Cluster((Region("R", 8, 0.2, 10.0),))  # more GPUs than asked for: the job keeps 2
    m = map_trace(table({"gpus": 2, "attempts": att}), cluster=cl, target_load=None)
    unc = UncertaintyConfig(checkpoint_interval_hours=0.0, repair_median_hours=0.0,
                            manual_delay_hours=0.0, repair_sigma=0.0)
    res = geo_gym.simulate(m.scenario, baselines.make("fcfs"), env_kwargs={"uncertainty": unc})
    job = res.jobs.iloc[0]
    assert job.failures == 2 and job.gpus == 2
    assert job.end_h * 3600 == pytest.approx(10.8 * t2)  # 4 + 2.3 + 4.5 iterations, no gap
    assert job.cost == pytest.approx(10.8 * t2 * 2 * 0.2 * A6000.power_kw / 3600)
    # failure_gpu_hours is ignored (random process) when the option is off
    off = map_trace(table({"gpus": 2, "attempts": att}), cluster=cl, target_load=None, trace_failures=False)
    assert off.scenario.jobs[0].failure_gpu_hours is None
    assert geo_gym.simulate(off.scenario, baselines.make("fcfs")).summary["failures"] == 0


def test_planted_failures_leave_other_jobs_alone_and_override_random_draws():
    t1 = t_iter(ONE, 1)
    jobs = [{"attempts": ((0.0, t1), (t1 + 1, 3 * t1))}, {"attempts": ((5.0, 5 + 2 * t1),)}]
    m = map_trace(table(*jobs), target_load=None)
    assert m.scenario.jobs[1].failure_gpu_hours == ()  # one attempt: the trace says no failure
    res = geo_gym.simulate(m.scenario, baselines.make("lcf"))  # perfect world: rate 0
    assert res.jobs.failures.tolist() == [1, 0]
    heavy = {"failure_rate_per_gpu_hour": 10.0}  # would fail every job at once if drawn
    res = geo_gym.simulate(m.scenario, baselines.make("lcf"), env_kwargs={"uncertainty": heavy})
    assert res.jobs.failures.tolist() == [1, 0]


def test_too_many_planted_failures_is_a_clear_error():
    spec = JobSpec("j", catalog.PAPER_MODELS[0], catalog.PAPER_DATASETS[0], failure_gpu_hours=(1.0,) * 3)
    scen = geo_gym.scenarios.Scenario("s", paper_cluster(), (spec,))
    with pytest.raises(ValueError, match="planted failures exceed"):
        geo_gym.simulate(scen, baselines.make("lcf"), env_kwargs={"uncertainty": {"max_attempts": 2}})
    with pytest.raises(ValueError, match="failure_gpu_hours"):
        JobSpec("j", catalog.PAPER_MODELS[0], catalog.PAPER_DATASETS[0], failure_gpu_hours=(-1.0,))


def test_node_fail_is_an_infrastructure_failure_then_a_restart():
    t1 = t_iter(ONE, 1)
    job = {"state": "NODE_FAIL", "attempts": ((0.0, 4 * t1),), "fail_time": 3 * t1}
    m = map_trace(table(job), target_load=None)
    row, spec = m.jobs.iloc[0], m.scenario.jobs[0]
    assert (row.executed_iters, row.configured_iters, spec.fate_fraction) == (pytest.approx(8), pytest.approx(8), 1.0)
    assert spec.failure_gpu_hours == pytest.approx((3 * t1 / 3600,))


# ----------------------------------------------------------------------------- options
def _many(n=40, gpus=1, gap=600.0):
    t1 = t_iter(ONE, 1)
    return table(*[{"submit": i * gap, "gpus": gpus, "duration": (1 + i % 5) * t1} for i in range(n)])


def test_window_sample_max_jobs_compression():
    tab = _many()
    m = map_trace(tab, start=600 * 10, length=600 * 20, target_load=None)
    assert len(m.scenario.jobs) == 20 and m.jobs.job_id.iloc[0] == "j10"
    assert m.scenario.jobs[0].submit == 0.0 and m.scenario.jobs[-1].submit == 600 * 19
    c = map_trace(tab, start=600 * 10, length=600 * 20, target_load=None, compression=4.0)
    assert [j.submit for j in c.scenario.jobs] == [j.submit / 4 for j in m.scenario.jobs]
    a = map_trace(tab, sample=0.5, sample_seed=3, target_load=None)
    b = map_trace(tab, sample=0.5, sample_seed=3, target_load=None)
    other = map_trace(tab, sample=0.5, sample_seed=4, target_load=None)
    assert a.jobs.job_id.tolist() == b.jobs.job_id.tolist() != other.jobs.job_id.tolist()
    assert a.dropped["not_sampled"] + len(a.scenario.jobs) == 40
    assert len(map_trace(tab, max_jobs=7, target_load=None).scenario.jobs) == 7


def test_filters_and_cpu_jobs():
    t1 = t_iter(ONE, 1)
    tab = table({"duration": t1}, {"gpus": 0, "duration": t1}, {"state": "RUNNING", "duration": t1},
                {"duration": 0.0}, {"duration": NAN})
    m = map_trace(tab, target_load=None)
    assert len(m.scenario.jobs) == 1
    assert m.dropped == {"running": 1, "no_duration": 1, "zero_duration": 1, "cpu_only": 1}
    keep = map_trace(tab, target_load=None, gpu_only=False)
    assert len(keep.scenario.jobs) == 2 and keep.jobs.stages.tolist() == [1, 1]
    assert [s.max_gpus for s in keep.scenario.jobs] == [1, 1]  # the CPU-only job: one GPU


def test_capacity_scaled_to_the_target_load():
    tab = _many(n=200, gpus=8, gap=60.0)
    for target in (0.25, 0.5, 1.0):
        m = map_trace(tab, target_load=target)
        total = m.scenario.cluster.capacities.sum()
        assert m.offered_load_gpus / total == pytest.approx(target, rel=0.05)
        # Table II proportions are kept (up to rounding)
        share = m.scenario.cluster.capacities / total
        assert share == pytest.approx(paper_cluster().capacities / 336, abs=0.01)
    # the offered load is the request-sized runs, i.e. the trace's own GPU-seconds: 200 jobs
    # of 8 GPUs, traced runs of 1-5 x 258 s, arrivals every 60 s (runs past the last
    # arrival are not counted)
    submit = np.arange(200) * 60.0
    run = (1 + np.arange(200) % 5) * t_iter(ONE, 1)
    expected = (8 * (np.minimum(submit + run, submit[-1]) - submit)).sum() / submit[-1]
    assert map_trace(tab).offered_load_gpus == pytest.approx(expected)
    with pytest.raises(ValueError, match="load_basis was removed"):
        map_trace(tab, load_basis="kstar")
    with pytest.raises(ValueError, match="no option"):
        map_trace(tab, tagret_load=0.5)
    explicit = map_trace(tab, target_load=None, capacity_scale=2.0)
    assert explicit.scenario.cluster.capacities.sum() == 672


@pytest.mark.parametrize("kw,field", [
    ({"start": -1.0}, "start"), ({"length": 0.0}, "length"), ({"sample": 0.0}, "sample"),
    ({"sample": 1.5}, "sample"), ({"max_jobs": 0}, "max_jobs"), ({"compression": 0.0}, "compression"),
    ({"target_load": -0.5}, "target_load"), ({"capacity_scale": 2.0}, "capacity_scale"),
    ({"early_end_fraction": 0.0}, "early_end_fraction"),
    ({"interrupted_fraction": 2.0}, "interrupted_fraction"), ({"max_failures": -1}, "max_failures"),
    ({"gpu_only": "yes"}, "gpu_only"), ({"sample_seed": 1.5}, "sample_seed"),
    ({"start_rule": "gang"}, "start_rule"), ({"start_rule": "fraction:2"}, "start_rule"),
    ({"start_rule": 3}, "start_rule"), ({"memory_model": "big"}, "memory_model"),
    ({"memory_model": {"schedule": "zb"}}, "memory_model"), ({"memory_model": {"nope": 1}}, "memory_model"),
])
def test_bad_options_name_the_field(kw, field):
    with pytest.raises(ValueError, match=f"MappingOptions.{field}"):
        MappingOptions(**kw)


def test_start_rule_and_memory_model_options():
    tab = table({"gpus": 1, "duration": 600.0})
    assert MappingOptions().start_rule == StartRule("request")
    with pytest.raises(ValueError, match="MappingOptions.start_rule.*unknown start rule 'gang'"):
        map_trace(tab, start_rule="gang")
    # a memory model that needs less (BF16 weights only: 28 GB for 14B) gives a 1-GPU job a 14B model,
    # and the scenario carries it, so that geo_gym enforces the same minimum
    light = {"bytes_per_param": 2.0}
    m = map_trace(tab, target_load=None, memory_model=light)
    assert m.scenario.memory_model == MemoryModel(bytes_per_param=2.0)
    assert m.jobs.model.iloc[0] == size_class(1, A6000, MemoryModel(bytes_per_param=2.0)).name == "Qwen2.5-14B"


def test_capacity_holds_the_largest_job():
    """At the target load a small sample's cluster would be smaller than its 64-GPU job, which
    must start on all 64 at once: the largest region is then enlarged to hold it, whatever the
    rule (LCF places in one region), and the load is below the target."""
    jobs = [{"gpus": 1, "duration": 600.0, "submit": i * 600.0} for i in range(30)]
    jobs.append({"gpus": 64, "duration": 60.0, "submit": 30 * 600.0})
    m = map_trace(table(*jobs))
    assert m.scenario.cluster.capacities.max() == 64
    assert m.offered_load_gpus / m.scenario.cluster.total_gpus < 0.5
    for name in ("lcf", "fcfs"):
        res = geo_gym.simulate(m.scenario, baselines.make(name))
        assert res.jobs.gpus.tolist()[-1] == 64
    assert capacity_scale_to_hold(64, paper_cluster()) == pytest.approx(0.5, rel=2e-3)  # 128 x 0.5


def test_empty_window_and_bad_table_are_clear_errors():
    with pytest.raises(ValueError, match="no job left to map"):
        map_trace(_many(), start=1e9, target_load=None)
    bad = _many().drop(columns=["state"])
    with pytest.raises(ValueError, match="state"):
        map_trace(bad)


def test_metadata_for_the_predictors():
    tab = table({"duration": 3000.0, "user": "alice", "type": "SFT"})
    spec = map_trace(tab, target_load=None).scenario.jobs[0]
    meta = loading.job_metadata(spec)
    assert (meta.user, meta.task, meta.gpus, meta.family) == ("alice", "sft", 1, "qwen")


def test_trace_scenario_env_path_equals_fast_path():
    """A mapped trace (arrivals, early ends, planted failures) decides identically through
    GeoPipeEnv and the compiled fast path when the queue fits the window."""
    from geo_gym.env import GeoPipeEnv

    t1 = t_iter(ONE, 1)
    jobs = [{"submit": i * 4000.0, "gpus": 1 + (i % 3) * 3, "state": ("COMPLETED", "FAILED")[i % 2],
             "attempts": ((i * 4000.0 + 10, i * 4000.0 + 10 + (2 + i) * t1),) if i % 3 else
             ((i * 4000.0 + 10, i * 4000.0 + 10 + t1), (i * 4000.0 + 20 + t1, i * 4000.0 + 20 + 4 * t1))}
            for i in range(12)]
    scen = map_trace(table(*jobs)).scenario
    for name in ("bace_pipe", "lcf", "sjf"):
        policy = baselines.make(name)
        fast = geo_gym.simulate(scen, policy, seed=1, window=64)
        env = GeoPipeEnv(scen, window=64)
        obs, info = env.reset(seed=1)
        term = False
        while not term:
            obs, _, term, _, info = env.step(policy.predict(obs)[0])
        assert fast.summary["avg_jct_h"] == info["avg_jct_h"]
        assert fast.summary["total_cost"] == info["total_cost"]
        assert fast.summary["failures"] == info["failures"] > 0


# ----------------------------------------------------------------------------- strict FCFS
def fcfs_reference(submit, gpus, run, capacity: int) -> np.ndarray:
    """Start times under strict FCFS with gang starts on one cluster of ``capacity`` GPUs,
    written independently of geo_gym: jobs start in submit order (ties: table order), each as
    soon as its predecessor has started and ``gpus`` GPUs are free, and holds them for ``run``
    seconds."""
    free, running, t, starts = capacity, [], 0.0, []  # running: heap of (end, gpus)
    for s, g, r in zip(submit, gpus, run, strict=True):
        assert g <= capacity
        t = max(t, s)
        while running and running[0][0] <= t or free < g:  # release what ended, wait for g
            end, held = heapq.heappop(running)
            t, free = max(t, end), free + held
        starts.append(t)
        free -= g
        heapq.heappush(running, (t + r, g))
    return np.array(starts)


@pytest.mark.parametrize("capacity", [40, 64])
def test_strict_fcfs_on_one_region_agrees_with_a_reference(capacity):
    """The "agrees job for job" property: a mapped trace window (the committed synthetic Philly
    sample, 1-32 GPUs, completed and early-ending jobs, no planted failures) on one region under
    strict FCFS runs every job on exactly its request, starting when the reference above
    starts it, for its calibrated ideal run (the traced run of its executed work)."""
    tab = read_trace(SYNTHETIC_PHILLY)
    cl = Cluster((Region("R", capacity, 0.2, 10.0),))
    m = map_trace(tab, MappingOptions(trace_failures=False, target_load=None, cluster=cl, max_jobs=400))
    j = m.jobs
    assert (j.stages == j.gpus).all() and j.gpus.max() == 32  # every request at most 32 < layers
    res = geo_gym.simulate(m.scenario, baselines.make("fcfs", strict=True))
    assert res.jobs.failures.sum() == 0
    assert res.jobs.gpus.tolist() == j.gpus.tolist()
    starts = fcfs_reference(j.submit.to_numpy(), j.stages.to_numpy(), j.run_s.to_numpy(), capacity)
    assert (starts > j.submit.to_numpy() + 1).sum() > 100  # a queue: the order decides
    assert (res.jobs.start_h * 3600).to_numpy() == pytest.approx(starts, rel=1e-9, abs=1e-6)
    assert (res.jobs.end_h * 3600).to_numpy() == pytest.approx(starts + j.run_s.to_numpy(), rel=1e-9, abs=1e-6)


# ----------------------------------------------------------------------------- real files
@pytest.fixture(scope="module")
def raw_mapped():
    return map_trace(read_philly_job_log(_need(RAW_SUBSET)), target_load=None)


def test_raw_subset_counts(raw_mapped):
    # README: 452 jobs; 3 never started and 2 have an attempt without an end time
    assert len(raw_mapped.scenario.jobs) == 447
    assert raw_mapped.dropped == {"running": 0, "no_duration": 5, "zero_duration": 0, "cpu_only": 0}
    j = raw_mapped.jobs
    assert j.stages.between(1, 16).all() and (j.gpus == j.stages).all()  # README: max 16 GPUs
    assert set(j.state) == {"COMPLETED", "FAILED", "CANCELLED"}
    assert (j.fate_fraction[j.state == "COMPLETED"] == 1).all() and (j.fate_fraction[j.state != "COMPLETED"] < 1).all()


def _row(mapped, job_id):
    jobs = mapped.jobs.set_index("job_id")
    spec = next(s for s in mapped.scenario.jobs if s.metadata["trace_id"] == job_id)
    return jobs.loc[job_id], spec


def test_raw_subset_hand_picked_rows(raw_mapped):
    # 14199: Pass, 8 GPUs, attempts 4270-4344 and 4351-197533 s (74 s + 193,182 s)
    row, spec = _row(raw_mapped, "application_1506638472019_14199")
    t8 = t_iter(EIGHT, 8)
    n = 193256 / t8  # 700.5 iterations
    assert (row.model, row.stages, spec.max_gpus) == (EIGHT, 8, 8)
    assert row.executed_iters == row.configured_iters == pytest.approx(n) and spec.iterations == pytest.approx(n)
    assert spec.failure_gpu_hours == pytest.approx((74 * 8 / 3600,))  # 74 s on 8 GPUs
    assert spec.submit == 4240.0  # 2017-10-07 01:11:39, 4,240 s after the first (kept) job
    assert (spec.metadata["user"], spec.metadata["vc"]) == ("ce2f4c", "ee9e8c")
    # 14563: Failed, 8 GPUs, 5 attempts summing to 108,563 s: one early-ending run, no failures
    row, spec = _row(raw_mapped, "application_1506638472019_14563")
    n = 108563 / t8
    assert row.executed_iters == pytest.approx(n) and row.configured_iters == pytest.approx(n / EARLY_END_FRACTION)
    assert spec.iterations == pytest.approx(n / EARLY_END_FRACTION)
    assert spec.failure_gpu_hours == ()
    # 14253: Killed, 1 GPU, attempts of 926 s and 817 s: one failure, then cancelled
    row, spec = _row(raw_mapped, "application_1506638472019_14253")
    t1 = t_iter(ONE, 1)
    assert (row.model, spec.max_gpus) == (ONE, 1)
    assert row.executed_iters == pytest.approx(1743 / t1)  # 6.76 iterations
    assert spec.failure_gpu_hours == pytest.approx((926 / 3600,))


def test_raw_subset_runs_with_its_failures(raw_mapped):
    res = geo_gym.simulate(raw_mapped.scenario, baselines.make("bace_pipe"))
    planted = sum(len(h) for h in raw_mapped.jobs.failure_gpu_hours if h)
    assert planted == 32
    assert 0 < res.summary["failures"] <= planted
    assert res.summary["num_jobs"] == 447 and np.isfinite(res.summary["avg_jct_h"])


def test_rfold_whole_table_maps():
    m = map_trace(read_philly_rfold(_need(RFOLD)))
    assert len(m.scenario.jobs) == 111_549 - 10 and m.dropped["zero_duration"] == 10
    j = m.jobs
    # README size mix: 96,662 single-GPU jobs, of which the 10 zero-length ones are dropped;
    # the largest requests (128) run on FLM-101B's 80 layers, every other one on its request
    assert (j.gpus == 1).sum() == 96_662 - 10 and j.stages.max() == 80
    assert (j.max_gpus == j.gpus).all() and (j.stages == np.minimum(j.gpus, j.layers)).all()
    assert (j.min_gpus == j.stages).all() and (j.memory_min <= j.stages).all()
    assert ((j.gpus > j.layers) == (j.gpus == 128)).all() and (j.gpus == 128).sum() == 11
    assert (j.fate_fraction == 1).all() and j.failure_gpu_hours.isna().all()
    # ideal runs take exactly the traced durations
    assert np.allclose(j.run_s.to_numpy(), j.duration_s.to_numpy(), rtol=1e-12, atol=0)
    # the offered load is the trace's GPU-seconds over its 129.4-day span (1,167 GPUs), less
    # the requests above the layer count (128-GPU jobs run on 80)
    assert m.offered_load_gpus == pytest.approx(1167, rel=0.05)
    assert math.isclose(m.capacity_scale * 336 * 0.5, m.offered_load_gpus)


def test_describe_and_cli(capsys):
    import json

    from traces.__main__ import main
    from traces.mapping import describe

    t1 = t_iter(ONE, 1)
    tab = table({"duration": 0.2 * t1}, {"duration": 3 * t1, "state": "FAILED"},
                {"attempts": ((0.0, t1), (t1, 4 * t1))})
    d = describe(map_trace(tab, target_load=None))
    assert (d["jobs"], d["early_ends"], d["planted_failures"], d["jobs_with_planted_failures"]) == (3, 1, 1, 1)
    assert d["share_shorter_than_one_iteration"] == pytest.approx(1 / 3)
    assert d["median_iterations"] == pytest.approx(3.0)
    assert d["executed_gpu_hours"] == pytest.approx((0.2 + 3 + 4) * t1 / 3600)
    assert d["target_over_requested_gpu_seconds"] == pytest.approx(1.0)
    assert (d["capped_at_layers"], d["below_request"], d["start_rule"]) == (0, 0, "request")
    assert d["models"] == {ONE: 3}
    two = table({"gpus": 128, "duration": 100.0}, {"gpus": 8, "duration": 100.0}, {"gpus": 64, "duration": 100.0})
    big = describe(map_trace(two, target_load=None))  # 128 on FLM-101B's 80 layers
    assert (big["capped_at_layers"], big["below_request"]) == (1, 1)
    assert big["gpus_per_job_target"] == pytest.approx((80 + 8 + 64) / 3)
    assert big["target_over_requested_gpu_seconds"] == pytest.approx((80 + 8 + 64) / (128 + 8 + 64))
    assert big["models"] == {"FLM-101B": 2, EIGHT: 1}
    # under "memory" the rules aim at min(request, K*): FLM-101B's K* = 74 caps the 128-GPU job
    # (below its 80 layers); 64 stays
    mem = describe(map_trace(two, target_load=None, start_rule="memory"))
    assert (mem["start_rule"], mem["capped_at_layers"], mem["below_request"]) == ("memory", 1, 1)
    assert mem["gpus_per_job_target"] == pytest.approx((74 + 8 + 64) / 3)
    main([str(Path(__file__).resolve().parents[1] / "traces" / "data" / "synthetic_acme_kalos.csv"),
          "--options", '{"max_jobs": 20}'])
    out = json.loads(capsys.readouterr().out)
    assert out["jobs"] == 20 and out["dropped"]["cpu_only"] > 0
