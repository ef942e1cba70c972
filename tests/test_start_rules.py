"""Start rules (geo_gym/start_rule.py): parsing, the (min_gpus, k_target) table, and the
invariant that no job ever holds fewer GPUs than its memory minimum or its rule's minimum, on
paper-default, recurring, random and a mapped trace, under every policy and random agent
actions; the core refusing a placement below the minimum; the setting's plumbing."""

from __future__ import annotations

import argparse
import math
import zlib
from dataclasses import replace
from functools import cache
from pathlib import Path

import numpy as np
import pytest

import baselines
import geo_gym
from geo_gym import catalog, cli, costmodel, decision, loading, memory, sim
from geo_gym.env import GeoPipeEnv
from geo_gym.placement import NUM_RULES
from geo_gym.scenarios import Scenario, make_scenario
from geo_gym.start_rule import StartRule, gpu_bounds
from geo_gym.uncertainty import UncertaintyConfig
from geo_gym.vector import GeoPipeVectorEnv
from geo_gym.workload import JobSpec, JobTable, profile, profile_columns

SAMPLE = Path(__file__).resolve().parents[1] / "traces" / "data" / "synthetic_philly_job_log.json"
ALPACA = catalog.dataset_by_name("Alpaca-52k")


# ------------------------------------------------------------------ parsing
@pytest.mark.parametrize("text", ["memory", "any", "kstar", "request", "fraction:0.5", "fraction:1",
                                  "fraction:0.25"])
def test_parse_round_trips(text):
    rule = StartRule.parse(text)
    assert str(rule) == text
    assert StartRule.parse(str(rule)) == rule
    assert StartRule.parse(rule) is rule


def test_parse_fields_and_default():
    assert StartRule.parse("fraction:0.5") == StartRule("fraction", 0.5)
    assert StartRule.parse(None) == StartRule() == StartRule("memory")
    assert StartRule.parse(" kstar ") == StartRule("kstar")
    assert StartRule.parse("any").uses_memory is False
    assert all(StartRule.parse(t).uses_memory for t in ("memory", "kstar", "request", "fraction:0.5"))


@pytest.mark.parametrize("text,named", [
    ("fraction:0", "0"),
    ("fraction:1.5", "1.5"),
    ("fraction:-0.5", "-0.5"),
    ("fraction:nan", "nan"),
    ("fraction:x", "fraction:x"),
    ("fraction", "fraction"),
    ("fraction:", "fraction:"),
    ("bogus", "bogus"),
    ("kstar:3", "kstar:3"),
    ("memory:1", "memory:1"),
    ("", "''"),
])
def test_bad_rules_name_the_value(text, named):
    with pytest.raises(ValueError) as err:
        StartRule.parse(text)
    assert named in str(err.value)
    with pytest.raises(argparse.ArgumentTypeError) as err2:
        cli.start_rule(text)
    assert named in str(err2.value)


def test_non_string_rule_and_bad_fields():
    with pytest.raises(ValueError, match="3"):
        StartRule.parse(3)
    with pytest.raises(ValueError, match="0.5"):
        StartRule("kstar", 0.5)
    with pytest.raises(ValueError, match="True"):
        StartRule("fraction", True)


def test_cli_type_in_a_parser(capsys):
    parser = argparse.ArgumentParser()
    parser.add_argument("--start-rule", type=cli.start_rule, default="memory")
    assert parser.parse_args(["--start-rule", "fraction:0.50"]).start_rule == "fraction:0.5"
    assert parser.parse_args([]).start_rule == "memory"
    with pytest.raises(SystemExit):
        parser.parse_args(["--start-rule", "fraction:2"])
    assert "--start-rule" in capsys.readouterr().err


# ------------------------------------------------------------------ gpu_bounds by hand
@pytest.mark.parametrize("rule,k_star,mem_min,layers,req,expected", [
    ("memory", 48, 6, 48, None, (6, 48)),
    ("any", 48, 1, 48, None, (1, 48)),
    ("fraction:0.5", 48, 6, 48, None, (24, 48)),
    ("fraction:0.05", 48, 6, 48, None, (6, 48)),  # ceil(2.4) = 3, never below the memory minimum
    ("fraction:0.3", 48, 6, 48, None, (15, 48)),  # ceil(14.4) = 15
    ("fraction:1", 48, 6, 48, None, (48, 48)),
    ("kstar", 48, 6, 48, None, (48, 48)),
    ("request", 62, 27, 80, 64, (64, 64)),
    ("request", 62, 27, 80, 128, (80, 80)),  # at most one stage per layer
    ("memory", 48, 6, 48, 20, (6, 20)),  # the request caps k_target
    ("kstar", 48, 6, 48, 20, (20, 20)),
    ("fraction:0.5", 48, 6, 48, 20, (10, 20)),
    ("fraction:0.5", 48, 6, 48, 100, (24, 48)),  # a request above K* does not raise it
])
def test_gpu_bounds_table(rule, k_star, mem_min, layers, req, expected):
    assert gpu_bounds(StartRule.parse(rule), k_star, mem_min, layers, req) == expected


def test_gpu_bounds_errors():
    with pytest.raises(ValueError, match="request"):
        gpu_bounds(StartRule("request"), 48, 6, 48, None)
    with pytest.raises(ValueError, match=r"request of 4 GPUs.*memory minimum of 6"):
        gpu_bounds(StartRule("request"), 48, 6, 48, 4)
    for rule in ("memory", "kstar", "fraction:0.5"):
        with pytest.raises(ValueError, match=r"request of 4 GPUs.*memory minimum of 6"):
            gpu_bounds(StartRule.parse(rule), 48, 6, 48, 4)


def test_request_rule_on_catalog_jobs_names_the_job():
    scen = make_scenario("paper-default", 0, start_rule="request")
    with pytest.raises(ValueError, match=r"job1-FLM-101B.*request"):
        geo_gym.simulate(scen, baselines.make("fcfs"), seed=0)


def test_profile_applies_the_rule_and_job_minimum():
    qwen = catalog.model_by_name("Qwen2.5-14B")  # memory minimum 6, K* 48 on the A6000
    job = JobSpec("q", qwen, ALPACA)
    got = {r: (profile(job, start_rule=r).min_gpus, profile(job, start_rule=r).k_target)
           for r in ("memory", "any", "fraction:0.5", "kstar")}
    assert got == {"memory": (6, 48), "any": (1, 48), "fraction:0.5": (24, 48), "kstar": (48, 48)}
    # JobSpec.min_gpus raises the rule's minimum, never lowers it
    assert profile(replace(job, min_gpus=10)).min_gpus == 10
    assert profile(replace(job, min_gpus=2)).min_gpus == 6
    assert profile(replace(job, max_gpus=64), start_rule="request").min_gpus == 48  # layers
    with pytest.raises(ValueError, match=r"'q'.*Qwen2\.5-14B.*A6000.*memory minimum of 6"):
        profile_columns([replace(job, max_gpus=4)])


# ------------------------------------------------------------------ scenarios for the invariant
DEFAULT_MEMORY = memory.MemoryModel()


def memory_min(model, gpu=catalog.A6000, mm=DEFAULT_MEMORY, seq=catalog.DEFAULT_SEQ_LEN,
               micro=catalog.DEFAULT_MICRO_BATCH) -> int:
    """The memory minimum straight from geo_gym.memory (not through workload.profile)."""
    mb = costmodel.num_microbatches(model.batch_size, micro)
    return memory.min_stages(mm, model.params, model.layers, model.hidden, mb, micro * seq, gpu.memory_gb)


@cache
def trace_scenario() -> Scenario:
    """The committed synthetic Philly sample mapped (at most 40 jobs). If a job's size class
    does not fit its GPU request in memory (the mapping predates geo_gym.memory), its model is
    replaced by the largest catalog model that does, so that every rule can hold every job."""
    from traces import trace_scenario as map_file
    from traces.mapping import MappingOptions

    scen = map_file(SAMPLE, options=MappingOptions(max_jobs=40)).scenario
    jobs = []
    for job in scen.jobs:
        if memory_min(job.model) > job.max_gpus:
            fits = [m for m in catalog.MODELS if 1 <= memory_min(m) <= job.max_gpus]
            model = max(fits, key=lambda m: m.params)
            job = replace(job, model=model, name=f"{job.name}>{model.name}")
        jobs.append(job)
    return replace(scen, jobs=tuple(jobs))


def scenario(name: str, seed: int) -> Scenario:
    if name == "paper-default":
        return make_scenario("paper-default", seed)
    if name == "recurring":
        return make_scenario("recurring", seed, num_jobs=20)
    if name == "random":
        return make_scenario("random", seed, num_regions=4, num_jobs=10)
    assert name == "trace"
    return trace_scenario()


SCENARIOS = ("paper-default", "recurring", "random", "trace")
RULES = ("memory", "fraction:0.5", "kstar", "request")
CASES = [(s, r) for s in SCENARIOS for r in RULES if r != "request" or s == "trace"]


def expected_bounds(scen: Scenario, rule: str) -> tuple[list, np.ndarray, np.ndarray, np.ndarray]:
    """(jobs in core order, memory minimum, rule minimum, k_target) per job; the rule minimum
    is worked out here from the memory minimum and k_target, and checked against
    profile_columns' min_gpus."""
    jobs = scen.jobs if isinstance(scen.jobs, JobTable) else sorted(scen.jobs, key=lambda j: j.submit)
    cl = scen.cluster
    cols = profile_columns(jobs, cl.gpu, scen.stage_overhead, cl.intra_region_gbps, scen.memory_model, rule)
    mem = np.array([memory_min(j.model, cl.gpu, scen.memory_model, j.seq_len, j.micro_batch) for j in jobs])
    target = cols["k_target"]
    if rule == "memory":
        want = mem
    elif rule.startswith("fraction:"):
        x = float(rule.split(":")[1])
        want = np.maximum(mem, np.ceil(x * target - 1e-9).astype(np.int64))
    elif rule == "kstar":
        want = target
    else:  # request
        want = np.array([min(j.max_gpus, j.model.layers) for j in jobs])
        np.testing.assert_array_equal(target, want)
    np.testing.assert_array_equal(cols["min_gpus"], want)
    assert (mem >= 1).all() and (want >= mem).all() and (target >= want).all()
    return list(jobs), mem, want, target


# ------------------------------------------------------------------ (a) every policy, fast path
POLICIES = baselines.names()  # all are fast on these workloads (random goes through the env)


@pytest.mark.parametrize("scen_name,rule", CASES)
def test_no_policy_starts_a_job_below_its_minimum(scen_name, rule):
    seeds = (0, 1) if scen_name != "trace" else (0,)
    below_target = 0
    for seed in seeds:
        scen = replace(scenario(scen_name, seed), start_rule=rule)
        jobs, mem, want, target = expected_bounds(scen, rule)
        largest_region = int(scen.cluster.capacities.max())
        for name in POLICIES:
            try:
                res = geo_gym.simulate(scen, baselines.make(name), seed=seed)
            except RuntimeError as err:
                # Only a single-region rule may be unable to place a job, and only one whose
                # minimum exceeds every region (the mapped trace's small scaled cluster).
                assert name in ("lcf", "ldf") and "cannot place" in str(err), (name, err)
                stuck = [j for j, job in enumerate(jobs) if job.name in str(err)]
                assert stuck and all(want[j] > largest_region for j in stuck), err
                continue
            assert res.jobs["name"].tolist() == [j.name for j in jobs]
            gpus = res.jobs["gpus"].to_numpy()
            per_region = res.jobs["gpus_per_region"]
            assert [sum(x) for x in per_region] == gpus.tolist()
            bad = np.flatnonzero((gpus < want) | (gpus < mem))
            assert bad.size == 0, (
                f"{name} under {rule}: jobs {[jobs[j].name for j in bad]} hold {gpus[bad]} GPUs, "
                f"memory minimum {mem[bad]}, rule minimum {want[bad]}")
            assert (gpus <= target).all(), name  # and never above what the rules aim at
            below_target += int((gpus < target).sum())
    if rule == "kstar" or rule == "request":
        assert below_target == 0  # the gang rules: all of k_target or wait


def test_the_minimum_binds_somewhere():
    """Not vacuous: under the memory rule some policy starts jobs on fewer GPUs than they aim
    at (so the lower bound is what stops them going lower)."""
    below = 0
    for seed in (0, 1):
        scen = scenario("paper-default", seed)
        _, mem, _, target = expected_bounds(scen, "memory")
        for name in ("lcf", "ldf", "random"):
            gpus = geo_gym.simulate(scen, baselines.make(name), seed=seed).jobs["gpus"].to_numpy()
            below += int(((gpus < target) & (gpus >= mem)).sum())
    assert below > 0


def test_any_rule_lets_jobs_start_below_their_memory_minimum():
    """Under "any" (the paper's literal reading, memory not modelled) some policy starts a job
    on fewer GPUs than its model fits on: e.g. paper-default seed 1 under lcf starts
    Falcon-40B (memory minimum 20) on 18 GPUs."""
    found = []
    for seed in (0, 1):
        scen = replace(scenario("paper-default", seed), start_rule="any")
        jobs, mem, want, _ = expected_bounds(scen, "memory")  # the memory minima of these jobs
        assert (profile_columns(jobs, start_rule="any")["min_gpus"] == 1).all()
        for name in POLICIES:
            gpus = geo_gym.simulate(scen, baselines.make(name), seed=seed).jobs["gpus"].to_numpy()
            found += [(seed, name, jobs[j].model.name, int(gpus[j]), int(mem[j]))
                      for j in np.flatnonzero(gpus < mem)]
    assert found, "no job started below its memory minimum under 'any'"
    assert any(f[1] == "lcf" for f in found)


# ------------------------------------------------------------------ (b) random agent actions
def check_state(env: GeoPipeEnv, obs: np.ndarray, mem: np.ndarray, want: np.ndarray) -> int:
    """Every running job holds >= its minima; the observation's slot features show each
    window job's minimum and target. Returns the number of running jobs."""
    c = env.core
    n = len(env.jobs)
    running = np.flatnonzero(c.status[0, :n] == sim.RUNNING)
    g = c.gpus[0, running]
    assert (g >= c.min_gpus[0, running]).all() and (g >= mem[running]).all() and (g >= want[running]).all(), (
        [(env.jobs[j].name, int(c.gpus[0, j]), int(mem[j]), int(want[j])) for j in running])
    assert (c.alloc[0, running].sum(axis=1) == g).all()
    waiting = np.isin(c.status[0, :n], (sim.PENDING_FUTURE, sim.PENDING, sim.DELAYED))
    assert (c.gpus[0, :n][waiting] == 0).all()  # only running (and finished) jobs hold GPUs
    k = env.num_regions
    o = env.opts
    for s in range(env.window):
        def slot(feature, s=s):
            return obs[decision.slot_index(k, s, feature)]

        if s < o.n_win[0]:
            j = o.win[0, s]
            assert c.status[0, j] == sim.PENDING
            assert slot(decision.S_PRESENT) == 1.0
            assert slot(decision.S_MIN_GPUS) == np.float32(c.min_gpus[0, j] / decision.MAX_STAGES_NORM) == np.float32(
                want[j] / 128.0)
            assert slot(decision.S_K_TARGET) == np.float32(c.k_target[0, j] / decision.MAX_STAGES_NORM)
            # every valid option of this slot places at least the minimum
            for r in range(NUM_RULES):
                if o.g[0, s, r] > 0:
                    assert o.g[0, s, r] >= want[j] and o.alloc[0, s, r].sum() == o.g[0, s, r]
        else:
            assert slot(decision.S_MIN_GPUS) == 0.0 and slot(decision.S_PRESENT) == 0.0
    return len(running)


@pytest.mark.parametrize("scen_name,rule", CASES)
def test_random_agent_never_holds_fewer_gpus_than_the_minimum(scen_name, rule):
    rng = np.random.default_rng(zlib.crc32(f"{scen_name}/{rule}".encode()))
    placed = invalid_tried = 0
    for seed in (0, 1):
        scen = scenario(scen_name, seed)
        env = GeoPipeEnv(scen, window=4, start_rule=rule)
        assert env.start_rule == StartRule.parse(rule)
        obs, info = env.reset(seed=seed)
        jobs, mem, want, target = expected_bounds(env.current_scenario, rule)
        assert [j.name for j in env.jobs] == [j.name for j in jobs]
        np.testing.assert_array_equal(env.core.min_gpus[0, : len(jobs)], want)
        np.testing.assert_array_equal(env.core.k_target[0, : len(jobs)], target)
        check_state(env, obs, mem, want)
        for _ in range(600):
            mask = info["action_mask"]
            if rng.random() < 0.2:  # any action, often a masked one (treated as wait)
                a = int(rng.integers(env.action_space.n))
                invalid_tried += not mask[a]
            else:
                a = int(rng.choice(np.flatnonzero(mask)))
            obs, _, term, _, info = env.step(a)
            assert info["invalid_action"] == (not mask[a])
            placed += int(mask[a] and a != env.wait_action)
            check_state(env, obs, mem, want)
            if term:
                gpus = np.array([rec["gpus"] for rec in info["jobs"]])
                assert (gpus >= want).all() and (gpus >= mem).all()
                break
        else:
            pytest.fail(f"{scen_name}/{rule} seed {seed}: episode did not end in 600 steps")
    assert placed > 0 and invalid_tried > 0


# ------------------------------------------------------------------ the core's own check
def test_sim_place_refuses_a_placement_below_the_minimum():
    scen = make_scenario("paper-default", 0)  # all 8 jobs queued at t = 0
    unc = UncertaintyConfig()
    core = sim.ensure(sim.allocate(1, scen.cluster.num_regions, 1), **loading.required_sizes(scen, unc))
    jobs = loading.load(core, 0, scen, np.random.default_rng(0), unc)
    j = next(i for i, job in enumerate(jobs) if job.model.name == "Llama-3.1-70B")
    assert core.min_gpus[0, j] == 27 and core.status[0, j] == sim.PENDING
    k = scen.cluster.num_regions
    r = int(np.argmax(core.free[0]))  # EA-East, 128 GPUs
    path = np.full(k, -1, np.int64)
    path[0] = r
    before = {name: getattr(core, name).copy() for name in sim.FIELDS}
    for g in (26, 1, 0):
        alloc = np.zeros(k, np.int64)
        alloc[r] = g
        assert sim.place(core, 0, j, path, 1, alloc) != 0
        for name in sim.FIELDS:
            np.testing.assert_array_equal(getattr(core, name), before[name], err_msg=name)
    # split across two regions, 13 + 13 = 26 < 27: refused as well
    r2 = (r + 1) % k
    path2 = path.copy()
    path2[1] = r2
    alloc = np.zeros(k, np.int64)
    alloc[r], alloc[r2] = 13, 13
    assert sim.place(core, 0, j, path2, 2, alloc) != 0
    assert core.status[0, j] == sim.PENDING and (core.free[0] == before["free"][0]).all()
    # the minimum itself is accepted: the check is not refusing everything
    alloc = np.zeros(k, np.int64)
    alloc[r] = 27
    assert sim.place(core, 0, j, path, 1, alloc) == 0
    assert core.status[0, j] == sim.RUNNING and core.gpus[0, j] == 27
    assert core.free[0, r] == before["free"][0, r] - 27


# ------------------------------------------------------------------ the setting's plumbing
def test_env_start_rule_setting():
    assert GeoPipeEnv().start_rule == StartRule("memory")
    env = GeoPipeEnv(start_rule="kstar")
    assert env.start_rule == StartRule("kstar")
    env.reset(seed=0)
    n = len(env.jobs)
    np.testing.assert_array_equal(env.core.min_gpus[0, :n], env.core.k_target[0, :n])
    mem_env = GeoPipeEnv()
    mem_env.reset(seed=0)
    assert (mem_env.core.min_gpus[0, :n] < mem_env.core.k_target[0, :n]).any()
    # None keeps the scenario's own rule; a given rule replaces it
    own = make_scenario("paper-default", 0, start_rule="fraction:0.5")
    assert own.start_rule == StartRule("fraction", 0.5)
    assert GeoPipeEnv(own).start_rule == StartRule("fraction", 0.5)
    assert GeoPipeEnv(own, start_rule="any").start_rule == StartRule("any")
    with pytest.raises(ValueError, match="bogus"):
        GeoPipeEnv(start_rule="bogus")


def _run_vector(rule: str, steps: int = 60):
    venv = GeoPipeVectorEnv(2, start_rule=rule, window=4, autoreset_mode="SameStep")  # every mask has a valid action
    obs, info = venv.reset(seed=3)
    rng = np.random.default_rng(0)
    held = []  # (gpus, min_gpus, kstar) of every running job after every step
    for _ in range(steps):
        actions = [int(rng.choice(np.flatnonzero(m))) for m in info["action_mask"]]
        obs, _, _, _, info = venv.step(actions)
        c = venv.core
        for e in range(2):
            n = c.n_jobs[e]
            run = np.flatnonzero(c.status[e, :n] == sim.RUNNING)
            held += list(zip(c.gpus[e, run], c.min_gpus[e, run], c.k_target[e, run], strict=True))
    return venv, np.array(held)


def test_vector_env_start_rule_setting():
    venv, held = _run_vector("kstar")
    assert all(s.start_rule == StartRule("kstar") for s in venv.scenarios)
    assert len(held) and (held[:, 0] == held[:, 2]).all() and (held[:, 1] == held[:, 2]).all()
    venv_m, held_m = _run_vector("memory")
    assert (held_m[:, 0] >= held_m[:, 1]).all()
    assert (held_m[:, 0] < held_m[:, 2]).any()  # memory lets random agents start below K*
    assert (held_m[:, 1] < held_m[:, 2]).any()


def test_make_scenario_and_simulate_start_rule_settings():
    lcf = baselines.make("lcf")
    kst = make_scenario("paper-default", 1, start_rule="kstar")
    assert kst.start_rule == StartRule("kstar")
    mem_scen = make_scenario("paper-default", 1)
    _, _, _, target = expected_bounds(mem_scen, "memory")
    by_scenario = geo_gym.simulate(kst, lcf, seed=1).jobs["gpus"].to_numpy()
    by_kwargs = geo_gym.simulate(mem_scen, lcf, seed=1, env_kwargs={"start_rule": "kstar"}).jobs["gpus"].to_numpy()
    by_name = geo_gym.simulate("paper-default", lcf, seed=1, env_kwargs={"start_rule": "kstar"})
    default = geo_gym.simulate(mem_scen, lcf, seed=1).jobs["gpus"].to_numpy()
    np.testing.assert_array_equal(by_scenario, target)
    np.testing.assert_array_equal(by_kwargs, target)
    for model, g in zip(by_name.jobs["model"], by_name.jobs["gpus"], strict=True):
        assert g == profile(JobSpec("x", catalog.model_by_name(model), ALPACA)).k_target
    assert (default < target).any()  # memory: lcf starts some jobs on fewer GPUs
    # the env path (the random policy) takes the setting too
    rnd = geo_gym.simulate(mem_scen, baselines.make("random"), seed=1, env_kwargs={"start_rule": "kstar"})
    np.testing.assert_array_equal(rnd.jobs["gpus"].to_numpy(), target)
    with pytest.raises(ValueError, match=r"fraction:X.*7"):
        geo_gym.simulate(mem_scen, lcf, seed=1, env_kwargs={"start_rule": "fraction:7"})
    # and so does the scenario's own, for fraction: every job at least ceil(k_target / 2)
    half = geo_gym.simulate(make_scenario("paper-default", 1, start_rule="fraction:0.5"), lcf, seed=1)
    assert (half.jobs["gpus"].to_numpy() >= np.ceil(target / 2)).all()
    assert not np.array_equal(half.jobs["gpus"].to_numpy(), default)


def test_rule_minimum_is_refused_when_above_the_cluster():
    # kstar on a small cluster: Qwen2.5-14B's K* of 48 exceeds the 16 GPUs, memory's 6 does not
    from geo_gym.cluster import Cluster, Region

    cl = Cluster((Region("R0", 8, 0.2, 50.0), Region("R1", 8, 0.1, 50.0)))
    scen = Scenario("small", cl, (JobSpec("q", catalog.model_by_name("Qwen2.5-14B"), ALPACA),))
    res = geo_gym.simulate(scen, baselines.make("bace_pipe"), seed=0)
    assert 6 <= res.jobs["gpus"].iloc[0] <= 16
    with pytest.raises(ValueError, match=r"'q'.*48 GPUs.*kstar.*16"):
        geo_gym.simulate(scen, baselines.make("bace_pipe"), seed=0, env_kwargs={"start_rule": "kstar"})
    assert math.ceil(0.5 * 48) == 24 > 16
    with pytest.raises(ValueError, match=r"'q'.*24 GPUs.*fraction:0.5"):
        GeoPipeEnv(scen, start_rule="fraction:0.5").reset(seed=0)
