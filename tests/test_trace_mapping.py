"""traces.mapping: trace jobs -> PP LLM jobs (docs/traces.md). Hand-worked rows, options,
bad input, planted failures replayed by the core, and real files when present."""

from __future__ import annotations

import math
import os
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import baselines
import geo_gym
from geo_gym import catalog, costmodel, loading, sim
from geo_gym.cluster import Cluster, Region, paper_cluster
from geo_gym.uncertainty import UncertaintyConfig
from geo_gym.workload import JobSpec, profile
from traces import read_philly_job_log, read_philly_rfold
from traces.mapping import (
    EARLY_END_FRACTION,
    MappingOptions,
    calibrated_iterations,
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
A6000, OVERHEAD, INTRA = catalog.A6000, catalog.DEFAULT_STAGE_OVERHEAD_S, catalog.DEFAULT_INTRA_REGION_GBPS
NAN = float("nan")


def _need(path: Path) -> Path:
    if not path.exists():
        pytest.skip(f"real trace {path} not present (set GEO_GYM_TRACES_DIR to the shared "
                    f"traces folder to run this test)")
    return path


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
    (1, "Qwen2.5-14B"), (2, "Ministral-3-14B"), (3, "Gemma-3-27B"), (4, "Gemma-3-27B"),
    (5, "Qwen2.5-32B"), (8, "Qwen2.5-32B"), (16, "Falcon-40B"), (24, "Llama-3.1-70B"),
    (64, "Solar-Open-100B"), (65, "FLM-101B"), (1024, "FLM-101B"),
])
def test_size_class(gpus, model):
    assert size_class(gpus).name == model


@pytest.mark.parametrize("bad", [0, -1, 1.5, True])
def test_size_class_rejects_bad_requests(bad):
    with pytest.raises(ValueError, match="GPU request"):
        size_class(bad)


def test_calibration_equation():
    t = t_iter("Qwen2.5-14B", 1)
    assert ideal_iteration_time(catalog.model_by_name("Qwen2.5-14B"), 1, A6000, OVERHEAD, INTRA) == t
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
    t8 = t_iter("Qwen2.5-32B", 8)
    m = map_trace(table({"gpus": 8, "duration": 37.2 * t8}), target_load=None)
    row = m.jobs.iloc[0]
    assert (row.model, row.max_gpus, row.stages, row.kstar) == ("Qwen2.5-32B", 8, 8, 60)
    assert row.executed_iters == row.configured_iters == pytest.approx(37.2)  # not rounded
    assert row.t_iter_s == pytest.approx(t8) and row.run_s == pytest.approx(37.2 * t8)
    spec = m.scenario.jobs[0]
    assert spec.iterations == pytest.approx(37.2) and spec.max_gpus == 8 and spec.fate_fraction == 1.0
    p = profile(spec)
    assert p.iterations == spec.iterations and p.k_target == 8
    assert p.ideal_duration == pytest.approx(37.2 * t8)  # E_j on the request: the traced run
    assert spec.failure_gpu_hours is None  # no attempts recorded: the random process applies
    assert m.scenario.cluster.capacities.tolist() == paper_cluster().capacities.tolist()


def test_early_end_job_by_hand():
    t1 = t_iter("Qwen2.5-14B", 1)
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
    assert core.kstar[0, 0] == 1  # the rules aim at the request, not at K* = 48


def test_one_gpu_short_job_by_hand():
    """A 1-GPU 600 s job: Qwen2.5-14B capped at one GPU, 600 / t_iter(1) = 0.54 iterations, and
    its ideal replay (alone, on one GPU) takes exactly the traced 600 s under every baseline."""
    t1 = t_iter("Qwen2.5-14B", 1)
    m = map_trace(table({"gpus": 1, "duration": 600.0}), target_load=None)
    spec = m.scenario.jobs[0]
    assert spec.model.name == "Qwen2.5-14B" and spec.max_gpus == 1
    assert spec.iterations == pytest.approx(600 / t1) and 0.5 < spec.iterations < 0.6
    for name in baselines.names():
        res = geo_gym.simulate(m.scenario, baselines.make(name))
        job = res.jobs.iloc[0]
        assert job.gpus == 1, name
        assert job.iters == pytest.approx(600 / t1), name
        assert job.jct_h * 3600 == pytest.approx(600.0), name


@pytest.mark.parametrize("name", baselines.names())
def test_requests_cap_every_baseline(name):
    """A 16-GPU Falcon-40B job (K* 60) gets 16 GPUs, a 128-GPU FLM-101B job K* = 74, 1- and
    4-GPU jobs their request; each alone runs its traced time. The random policy never more."""
    jobs = [{"gpus": g, "duration": 3000.0, "submit": i * 1e5} for i, g in enumerate((16, 128, 1, 4))]
    m = map_trace(table(*jobs), target_load=None, cluster=Cluster((Region("R", 200, 0.2, 10.0),)))
    assert [s.max_gpus for s in m.scenario.jobs] == [16, 128, 1, 4]
    assert m.jobs.stages.tolist() == [16, 74, 1, 4]
    res = geo_gym.simulate(m.scenario, baselines.make(name))
    if name == "random":  # it may also pick the env's half- and quarter-target options
        assert (res.jobs.gpus <= m.jobs.stages).all() and (res.jobs.jct_h * 3600 >= 3000 - 1e-6).all()
        return
    assert res.jobs.gpus.tolist() == [16, 74, 1, 4]
    assert (res.jobs.jct_h * 3600).to_numpy() == pytest.approx([3000.0] * 4)


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
    assert res.jobs.gpus.tolist() == [1, 2, 8, 3, 32, 48]  # Solar-Open-100B: K* = 48


def test_retries_become_planted_failures():
    t4 = t_iter("Gemma-3-27B", 4)
    att = ((0.0, 3 * t4), (3 * t4 + 60, 10 * t4 + 60))  # 3 + 7 iterations' worth
    m = map_trace(table({"gpus": 4, "attempts": att}), target_load=None)
    spec = m.scenario.jobs[0]
    assert m.jobs.iloc[0].executed_iters == pytest.approx(10)
    assert spec.failure_gpu_hours == pytest.approx((3 * t4 * 4 / 3600,))  # d_a x G' / 3600
    # a request above K*: the failure is counted on the K* GPUs the job aims at
    big = map_trace(table({"gpus": 128, "attempts": ((0.0, 500.0), (600.0, 900.0))}), target_load=None)
    assert big.jobs.iloc[0].stages == 74
    assert big.scenario.jobs[0].failure_gpu_hours == pytest.approx((500 * 74 / 3600,))


def test_planted_failures_replay_the_trace():
    """On a region with exactly the ideal stage count, continuous checkpointing and no delays,
    the core reproduces the traced attempts: a failure at the end of each retried attempt."""
    t2 = t_iter("Ministral-3-14B", 2)
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
    t1 = t_iter("Qwen2.5-14B", 1)
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
    t1 = t_iter("Qwen2.5-14B", 1)
    job = {"state": "NODE_FAIL", "attempts": ((0.0, 4 * t1),), "fail_time": 3 * t1}
    m = map_trace(table(job), target_load=None)
    row, spec = m.jobs.iloc[0], m.scenario.jobs[0]
    assert (row.executed_iters, row.configured_iters, spec.fate_fraction) == (pytest.approx(8), pytest.approx(8), 1.0)
    assert spec.failure_gpu_hours == pytest.approx((3 * t1 / 3600,))


# ----------------------------------------------------------------------------- options
def _many(n=40, gpus=1, gap=600.0):
    t1 = t_iter("Qwen2.5-14B", 1)
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
    t1 = t_iter("Qwen2.5-14B", 1)
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
    # of 8 GPUs, traced runs of 1-5 x 1,102 s, arrivals every 60 s (runs past the last
    # arrival are not counted)
    submit = np.arange(200) * 60.0
    run = (1 + np.arange(200) % 5) * t_iter("Qwen2.5-14B", 1)
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
])
def test_bad_options_name_the_field(kw, field):
    with pytest.raises(ValueError, match=f"MappingOptions.{field}"):
        MappingOptions(**kw)


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

    t1 = t_iter("Qwen2.5-14B", 1)
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
    t8 = t_iter("Qwen2.5-32B", 8)
    n = 193256 / t8  # 886.4 iterations
    assert (row.model, row.stages, spec.max_gpus) == ("Qwen2.5-32B", 8, 8)
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
    t1 = t_iter("Qwen2.5-14B", 1)
    assert (row.model, spec.max_gpus) == ("Qwen2.5-14B", 1)
    assert row.executed_iters == pytest.approx(1743 / t1)  # 1.58 iterations
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
    # the largest requests (128) reach FLM-101B's K* = 74
    assert (j.gpus == 1).sum() == 96_662 - 10 and j.stages.max() == 74
    assert (j.max_gpus == j.gpus).all() and (j.stages == np.minimum(j.gpus, j.kstar)).all()
    assert (j.fate_fraction == 1).all() and j.failure_gpu_hours.isna().all()
    # ideal runs take exactly the traced durations
    assert np.allclose(j.run_s.to_numpy(), j.duration_s.to_numpy(), rtol=1e-12, atol=0)
    # the offered load is the trace's GPU-seconds over its 129.4-day span (1,167 GPUs), less
    # the requests above K* (128-GPU jobs run on 74)
    assert m.offered_load_gpus == pytest.approx(1167, rel=0.05)
    assert math.isclose(m.capacity_scale * 336 * 0.5, m.offered_load_gpus)


def test_describe_and_cli(capsys):
    import json

    from traces.__main__ import main
    from traces.mapping import describe

    t1 = t_iter("Qwen2.5-14B", 1)
    tab = table({"duration": 0.2 * t1}, {"duration": 3 * t1, "state": "FAILED"},
                {"attempts": ((0.0, t1), (t1, 4 * t1))})
    d = describe(map_trace(tab, target_load=None))
    assert (d["jobs"], d["early_ends"], d["planted_failures"], d["jobs_with_planted_failures"]) == (3, 1, 1, 1)
    assert d["share_shorter_than_one_iteration"] == pytest.approx(1 / 3)
    assert d["median_iterations"] == pytest.approx(3.0)
    assert d["executed_gpu_hours"] == pytest.approx((0.2 + 3 + 4) * t1 / 3600)
    assert d["target_over_requested_gpu_seconds"] == pytest.approx(1.0) and d["capped_at_kstar"] == 0
    big = describe(map_trace(table({"gpus": 128, "duration": 100.0}, {"gpus": 8, "duration": 100.0}),
                             target_load=None))
    assert big["capped_at_kstar"] == 1 and big["gpus_per_job_target"] == pytest.approx((74 + 8) / 2)
    assert big["target_over_requested_gpu_seconds"] == pytest.approx((74 + 8) / (128 + 8))
    main([str(Path(__file__).resolve().parents[1] / "traces" / "data" / "synthetic_acme_kalos.csv"),
          "--options", '{"max_jobs": 20}'])
    out = json.loads(capsys.readouterr().out)
    assert out["jobs"] == 20 and out["dropped"]["cpu_only"] > 0
