"""The failure handler's false positives (SchedMate 3.3, Table 4): early ends carry a kind
(application failure or cancellation, from the trace's final state or a configured share); with
the handler on, an application failure it misjudges as infrastructure is restarted from its
checkpoint after the diagnosis delay and fails again at the same point of its work, until the
handler judges it right or its attempts run out. Cancellations never reach the handler; with
the handler off nothing changes."""

import json
from pathlib import Path

import numpy as np
import pytest

import baselines
import geo_gym
from geo_gym import catalog, fixed, loading, sim
from geo_gym.cluster import Cluster, Region
from geo_gym.placement import RULE_PATHFINDER
from geo_gym.scenarios import Scenario
from geo_gym.uncertainty import UncertaintyConfig
from geo_gym.workload import END_APPLICATION_FAILURE, END_CANCELLED, END_UNKNOWN, JobSpec, profile
from traces import read_trace
from traces.mapping import end_kind_rule, map_trace

DATA = Path(__file__).resolve().parents[1] / "traces" / "data"
QWEN = catalog.model_by_name("Qwen2.5-14B")  # K* = 48
ALPACA = catalog.dataset_by_name("Alpaca-52k")
DIAGNOSIS_H = UncertaintyConfig().diagnosis_delay_hours  # 10 min


# ------------------------------------------------------------------ kinds from the traces
def test_end_kind_rule_table():
    assert end_kind_rule("FAILED") == "application_failure"
    assert end_kind_rule("CANCELLED") == end_kind_rule("TIMEOUT") == "cancelled"
    for state in ("COMPLETED", "UNKNOWN", "NODE_FAIL", "PREEMPTED"):
        assert end_kind_rule(state) is None  # they run all their work here
    with pytest.raises(ValueError, match="RUNNING"):
        end_kind_rule("RUNNING")


def test_philly_statuses_give_the_kinds():
    # Philly's raw log: Failed -> application failure, Killed -> cancelled, Pass -> none
    raw = {job["jobid"]: job["status"] for job in json.loads((DATA / "synthetic_philly_job_log.json").read_text())}
    m = map_trace(read_trace(DATA / "synthetic_philly_job_log.json"), target_load=None, max_jobs=300)
    want = {"Failed": "application_failure", "Killed": "cancelled", "Pass": None}
    seen = set()
    for spec in m.scenario.jobs:
        status = raw[spec.metadata["trace_id"]]
        assert spec.end_kind == want[status], spec.name
        seen.add(status)
    assert seen == set(want)
    d = m.jobs
    assert (d.end_kind == "application_failure").sum() == (d.state == "FAILED").sum() > 0


def test_real_philly_day_kinds():
    # the real raw log (skipped without it): of its 447 mapped jobs, 83 Failed and 34 Killed
    import os

    from traces.mapping import describe

    root = Path(os.environ.get("GEO_GYM_TRACES_DIR") or Path(__file__).resolve().parents[1].parent / "shared" / "traces")
    path = root / "philly" / "cluster_job_log_2017-10-07_subset.json.gz"
    if not path.exists():
        pytest.skip(f"real trace {path} not present (set GEO_GYM_TRACES_DIR to the shared traces folder)")
    d = describe(map_trace(read_trace(path), target_load=None))
    assert (d["jobs"], d["early_ends"], d["application_failures"], d["cancellations"]) == (447, 117, 83, 34)


@pytest.mark.parametrize("name", ["synthetic_acme_seren.csv", "synthetic_acme_kalos.csv"])
def test_acme_states_give_the_kinds(name):
    m = map_trace(read_trace(DATA / name), target_load=None, max_jobs=600)
    states = dict(zip(m.jobs.job_id, m.jobs.state, strict=True))
    for spec in m.scenario.jobs:
        assert spec.end_kind == end_kind_rule(states[spec.metadata["trace_id"]])
    assert {spec.end_kind for spec in m.scenario.jobs} == {"application_failure", "cancelled", None}
    core = sim.ensure(sim.allocate(1, m.scenario.cluster.num_regions, 1),
                      **loading.required_sizes(m.scenario, UncertaintyConfig()))
    loading.load(core, 0, m.scenario, np.random.default_rng(0), UncertaintyConfig())
    codes = core.end_kind[0, : len(m.scenario.jobs)]
    by_state = {"FAILED": END_APPLICATION_FAILURE, "CANCELLED": END_CANCELLED, "COMPLETED": END_UNKNOWN}
    for spec, code in zip(m.scenario.jobs, codes, strict=True):
        state = states[spec.metadata["trace_id"]]
        if state in by_state:
            assert code == by_state[state]


def test_bad_end_kind_names_the_field():
    with pytest.raises(ValueError, match="end_kind"):
        JobSpec("j", QWEN, ALPACA, end_kind="crashed")
    with pytest.raises(ValueError, match="application_failure_share"):
        UncertaintyConfig(application_failure_share=1.5)


# ------------------------------------------------------------------ one job by hand
def _one_job(kind, hours_to_end=2.5):
    """One Qwen2.5-14B job that ends early after exactly ``hours_to_end`` hours on its K* = 48
    GPUs in region R (half of its configured work), on a 64 + 64 GPU cluster."""
    spec = JobSpec("j", QWEN, ALPACA)
    p = profile(spec)
    iters = hours_to_end * 3600.0 / (p.ideal_duration / p.iterations)
    job = JobSpec("j", QWEN, ALPACA, iterations=2 * iters, fate_fraction=0.5, end_kind=kind)
    cl = Cluster((Region("R", 64, 0.2, 10.0), Region("S", 64, 0.3, 10.0)))
    return Scenario("one", cl, (job,))


def _run(scen, unc, verdicts):
    """Run ``scen`` under FCFS + Pathfinder with the handler's uniforms set by hand: attempt a's
    verdict is ``verdicts[a]`` (0: misjudged as infrastructure when the FPR is above 0)."""
    core = sim.ensure(sim.allocate(1, scen.cluster.num_regions, 1), **loading.required_sizes(scen, unc))
    loading.load(core, 0, scen, np.random.default_rng(0), unc)
    core.handler_u[0, 0, :] = verdicts[-1]
    # without the handler the core holds one attempt's uniforms, which nothing reads
    core.handler_u[0, 0, : len(verdicts)] = verdicts[: core.handler_u.shape[2]]
    assert fixed.run_fixed_policy(core, 0, fixed.ORDER_FCFS, RULE_PATHFINDER, 0)
    return core


def test_misjudged_application_failure_is_restarted_and_fails_again():
    on = UncertaintyConfig(handler=True, checkpoint_interval_hours=1.0)
    core = _run(_one_job("application_failure"), on, [0.0, 1.0])
    # attempt 1: 0-2.5 h, the application fails; misjudged: checkpoint at 2 h kept, restart
    # after the diagnosis delay; attempt 2 reruns 2-2.5 h of the work and fails again there;
    # judged right this time, the job ends
    assert core.n_false_restart[0, 0] == 1 and core.n_false_restart_total[0] == 1
    assert core.attempt[0, 0] == 2 and core.n_fail[0, 0] == 0 and core.status[0, 0] == sim.DONE
    end_h = 2.5 + DIAGNOSIS_H + 0.5
    assert core.end_s[0, 0] / 3600 == pytest.approx(end_h)
    assert core.attempt_start_s[0, 0] / 3600 == pytest.approx(2.5 + DIAGNOSIS_H)
    rate = core.cost_per_s[0, 0]  # the same 48 GPUs of R both times
    assert core.cost_usd[0, 0] == pytest.approx(rate * 3.0 * 3600)  # 2.5 h + the 0.5 h rerun
    assert core.rerun_gpu_h[0] == pytest.approx(48 * 0.5) and core.rerun_usd[0] == pytest.approx(rate * 0.5 * 3600)
    assert core.done_iters[0, 0] < core.iters[0, 0] < core.full_iters[0, 0]  # it never got further
    assert (core.free[0] == core.cap[0]).all() and core.repairing[0].sum() == 0  # healthy GPUs
    # without the handler the same job just ends at 2.5 h
    off = _run(_one_job("application_failure"), on.replace(handler=False), [0.0, 1.0])
    assert off.end_s[0, 0] / 3600 == pytest.approx(2.5) and off.n_false_restart[0, 0] == 0
    assert off.cost_usd[0, 0] == pytest.approx(rate * 2.5 * 3600)


def test_restarts_stop_at_max_attempts():
    unc = UncertaintyConfig(handler=True, checkpoint_interval_hours=1.0, max_attempts=3)
    core = _run(_one_job("application_failure"), unc, [0.0])  # misjudged every time
    assert core.attempt[0, 0] == 3 and core.n_false_restart[0, 0] == 2 and core.status[0, 0] == sim.DONE
    assert core.end_s[0, 0] / 3600 == pytest.approx(2.5 + 2 * (DIAGNOSIS_H + 0.5))
    assert core.rerun_gpu_h[0] == pytest.approx(48 * 2 * 0.5)  # two reruns of 0.5 h on 48 GPUs


def test_continuous_checkpoints_fail_again_at_once():
    # nothing to rerun: the restarted attempt ends where it starts, costing only the delay
    unc = UncertaintyConfig(handler=True, checkpoint_interval_hours=0.0, max_attempts=4)
    core = _run(_one_job("application_failure"), unc, [0.0])
    assert core.n_false_restart[0, 0] == 3
    assert core.end_s[0, 0] / 3600 == pytest.approx(2.5 + 3 * DIAGNOSIS_H)
    assert core.cost_usd[0, 0] == pytest.approx(core.cost_per_s[0, 0] * 2.5 * 3600)
    assert core.rerun_gpu_h[0] == 0.0


def test_a_cancellation_never_reaches_the_handler():
    unc = UncertaintyConfig(handler=True, checkpoint_interval_hours=1.0)
    core = _run(_one_job("cancelled"), unc, [0.0])  # a verdict that would restart a failure
    assert core.n_false_restart[0, 0] == 0 and core.attempt[0, 0] == 1
    assert core.end_s[0, 0] / 3600 == pytest.approx(2.5)


def test_a_completion_never_reaches_the_handler():
    spec = JobSpec("j", QWEN, ALPACA, iterations=10.0, end_kind="application_failure")  # fate 1
    scen = Scenario("done", Cluster((Region("R", 64, 0.2, 10.0),)), (spec,))
    core = _run(scen, UncertaintyConfig(handler=True), [0.0])
    assert core.n_false_restart[0, 0] == 0 and core.attempt[0, 0] == 1


@pytest.mark.parametrize("share,restarted", [(0.0, 0), (1.0, 1)])
def test_unknown_kind_is_drawn_against_the_share(share, restarted):
    unc = UncertaintyConfig(handler=True, application_failure_share=share)
    core = _run(_one_job(None), unc, [0.0, 1.0])
    assert core.n_false_restart[0, 0] == restarted


# ------------------------------------------------------------------ whole workloads
RECURRING = {"num_jobs": 30}


def _recurring(seed, **unc):
    res = geo_gym.simulate("recurring", baselines.make("sjf"), seed=seed, scenario_kwargs=RECURRING,
                           env_kwargs={"uncertainty": UncertaintyConfig.preset("realistic", **unc)})
    return res


def test_handler_precision_changes_outcomes():
    seeds = range(4)
    exact = [_recurring(s, handler=True, handler_precision=1.0) for s in seeds]  # FPR 0
    table4 = [_recurring(s, handler=True) for s in seeds]
    poor = [_recurring(s, handler=True, handler_precision=0.3) for s in seeds]  # FPR 0.48
    assert sum(r.summary["false_restarts"] for r in exact) == 0
    assert 0 < sum(r.summary["false_restarts"] for r in table4) < sum(r.summary["false_restarts"] for r in poor)
    # misjudged failures hold GPUs again and re-queue, which moves every later decision (not
    # always to the worse: a delayed start can land on a better placement), so only "changed"
    for r, x in zip(poor, exact, strict=True):
        assert r.summary["false_restarts"] > 0 and not r.jobs.equals(x.jobs)
        assert r.summary["rerun_gpu_h"] > 0 and 0 < r.summary["rerun_cost"] < r.summary["total_cost"]
        assert x.summary["rerun_gpu_h"] == x.summary["rerun_cost"] == 0
    # a handler that never misjudges is the world where no early end is an application failure
    for s, r in zip(seeds, exact, strict=True):
        none = _recurring(s, handler=True, application_failure_share=0.0)
        assert r.jobs.equals(none.jobs)


def test_handler_off_ignores_the_kinds():
    for seed in range(3):
        a = _recurring(seed, application_failure_share=0.0)
        b = _recurring(seed, application_failure_share=1.0)
        assert a.jobs.equals(b.jobs) and a.summary == b.summary
        assert a.summary["false_restarts"] == 0


def test_env_path_counts_the_same_restarts():
    from geo_gym.env import GeoPipeEnv

    unc = UncertaintyConfig.preset("realistic", handler=True, handler_precision=0.3)
    policy = baselines.make("sjf")
    fast = geo_gym.simulate("recurring", policy, seed=1, window=8, scenario_kwargs=RECURRING,
                            env_kwargs={"uncertainty": unc})  # the env window
    env = GeoPipeEnv("recurring", RECURRING, uncertainty=unc)
    obs, _ = env.reset(seed=1)
    while True:
        obs, _, done, _, info = env.step(policy.predict(obs)[0])
        if done:
            break
    assert fast.summary["false_restarts"] == info["false_restarts"] > 0
    assert fast.summary["avg_jct_h"] == info["avg_jct_h"] and fast.summary["total_cost"] == info["total_cost"]
