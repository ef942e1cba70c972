"""Built-in scenarios draw their workloads as columns (``JobTable``) and loading reads the
columns: the jobs, and every episode, must be exactly those of the equivalent JobSpecs."""

import numpy as np
import pytest

from geo_gym import catalog, sim
from geo_gym.catalog import GPUType
from geo_gym.env import as_uncertainty
from geo_gym.loading import load, required_sizes
from geo_gym.scenarios import Scenario, _templates, make_scenario
from geo_gym.workload import (
    JobSpec,
    JobTable,
    constant,
    label_columns,
    profile,
    profile_columns,
    spec_columns,
)


def small_table(**overrides) -> JobTable:
    cols = dict(
        model=[0, 5, 5], dataset=[0, 1, 2], submit=[0.0, 10.0, 10.0], epochs=[1.0, 0.5, 2.0],
        fate_fraction=[np.nan, 0.25, np.nan], user=[-1, 2, 2], template=[-1, 7, 7],
        name_format="job{i}-u{user}-{model}",
    )
    cols.update(overrides)
    return JobTable(**cols)


def test_job_table_is_the_tuple_of_its_jobspecs():
    table = small_table()
    specs = tuple(table)
    assert len(table) == 3 and all(isinstance(j, JobSpec) for j in specs)
    assert table == specs and specs == table.specs() and table[1] is specs[1]
    assert specs[1] == JobSpec(
        f"job2-u2-{catalog.PAPER_MODELS[5].name}", catalog.PAPER_MODELS[5],
        catalog.PAPER_DATASETS[1], submit=10.0, epochs=0.5, fate_fraction=0.25,
    )
    assert specs[1].metadata == {"user": "user2", "name": "template7"}
    assert specs[0].metadata == {} and specs[0].fate_fraction is None


@pytest.mark.parametrize("name", ["paper-default", "random", "recurring"])
def test_label_columns_of_a_table_are_its_jobspecs_names(name):
    table = make_scenario(name, seed=5).jobs
    fast = label_columns(table)
    assert table._specs is None  # answered from the columns
    assert fast == label_columns(tuple(table))  # JobSpec by JobSpec
    assert fast["name"][0] == table[0].name and len(fast["dataset"]) == len(table)


@pytest.mark.parametrize("override, words", [
    ({"model": [0, 99, 1]}, ["row 1", "model 99"]),
    ({"dataset": [0, 1, -1]}, ["row 2", "dataset -1"]),
    ({"submit": [0.0, 10.0, 5.0]}, ["row 2", "non-decreasing"]),
    ({"epochs": [1.0, 0.0, 1.0]}, ["row 1", "epochs 0.0"]),
    ({"fate_fraction": [np.nan, 1.5, np.nan]}, ["row 1", "fate_fraction 1.5"]),
    ({"epochs": [1.0, 1.0]}, ["JobTable.epochs", "(3,)"]),
])
def test_job_table_names_the_bad_row_or_column(override, words):
    with pytest.raises(ValueError) as err:
        small_table(**override)
    for word in words:
        assert word in str(err.value)


def test_shared_default_columns_keep_their_type_and_are_read_only():
    # Built-in scenarios share constant columns between episodes; 1, True and 1.0 are equal
    # cache keys, so each must still get its own dtype whichever was asked for first.
    yes, no = constant(5, True), constant(5, False)
    ones, zeros = constant(5, 1), constant(5, 0.0)
    assert (yes.dtype, no.dtype, ones.dtype, zeros.dtype) == (np.bool_, np.bool_, np.int64, np.float64)
    spec = spec_columns(make_scenario("paper-default", seed=3).jobs)
    assert spec["min_gpus"].dtype == np.int64 and spec["whole"].dtype == np.bool_
    assert spec["submit"].dtype == np.float64 and spec["planted"].dtype == np.bool_
    with pytest.raises(ValueError, match="read-only"):
        spec["submit"][0] = 1.0  # would change every later episode's workload


@pytest.mark.parametrize("gpu, overhead, intra", [
    (catalog.A6000, catalog.DEFAULT_STAGE_OVERHEAD_S, catalog.DEFAULT_INTRA_REGION_GBPS),
    (GPUType("test", 80.0, 2.5e14, 0.7), 0.01, 25.0),
])
def test_profile_columns_of_a_table_equal_those_of_its_jobspecs(gpu, overhead, intra):
    rng = np.random.default_rng(0)
    n = 40
    table = JobTable(
        model=rng.integers(0, len(catalog.PAPER_MODELS), n),
        dataset=rng.integers(0, len(catalog.PAPER_DATASETS), n),
        submit=np.sort(rng.uniform(0, 1e5, n)),
        epochs=rng.uniform(0.1, 3.0, n),
    )
    fast = profile_columns(table, gpu, overhead, intra)
    slow = profile_columns(tuple(table), gpu, overhead, intra)  # JobSpec by JobSpec
    assert fast.keys() == slow.keys()
    for key in fast:
        assert fast[key].dtype == slow[key].dtype, key
        assert np.array_equal(fast[key], slow[key]), key


def core_state(core, e=0) -> dict:
    return {name: np.asarray(getattr(core, name)[e]) for name in core._fields}


@pytest.mark.parametrize("rule", ["memory", "any", "fraction:0.5", "kstar", "request"])
def test_profile_columns_of_jobspecs_equal_each_jobs_profile(rule):
    # Trace-style jobs: explicit fractional iterations, GPU caps at and above the memory
    # minimum and above K*, other batch settings; the columns share work between jobs of a
    # class, bit for bit, under every start rule.
    rng = np.random.default_rng(1)
    jobs = []
    for i in range(60):
        model = catalog.MODELS[int(rng.integers(0, len(catalog.MODELS)))]
        micro_batch = int(rng.choice([1, 2]))
        probe = profile(JobSpec("probe", model, catalog.PAPER_DATASETS[0], micro_batch=micro_batch))
        request = [None, probe.memory_min, probe.memory_min + 3, 1000][i % 4]
        if rule == "request" and request is None:
            request = probe.k_star
        jobs.append(JobSpec(
            f"j{i}", model, catalog.PAPER_DATASETS[int(rng.integers(0, 3))],
            submit=float(i), epochs=float(rng.uniform(0.2, 2.0)), micro_batch=micro_batch,
            max_gpus=request, iterations=[None, 0.37, 1234.5][i % 3],
        ))
    cols = profile_columns(jobs, start_rule=rule)
    for i, job in enumerate(jobs):
        p = profile(job, start_rule=rule)
        assert (cols["work"][i], cols["mb"][i], cols["act"][i]) == (p.work, p.num_microbatches, p.activation_gbit)
        assert (cols["iterations"][i], cols["k_target"][i]) == (p.iterations, p.k_target)
        assert cols["min_gpus"][i] == p.min_gpus >= (1 if rule == "any" else p.memory_min)
        assert cols["b_ref"][i] == p.b_j(p.k_target)
        assert (cols["t1"][i], cols["tk"][i]) == (p.e1 / p.iterations, p.ideal_duration / p.iterations)


@pytest.mark.parametrize("name, knobs, uncertainty", [
    ("paper-default", {"num_jobs": 12}, None),
    ("random", {"num_regions": 4}, "realistic"),
    ("recurring", {"num_jobs": 30}, "realistic"),
    ("recurring", {"num_jobs": 30}, {"predictor": "schedmate", "failure_rate_per_gpu_hour": 0.01}),
])
def test_loading_a_table_equals_loading_its_jobspecs(name, knobs, uncertainty):
    unc = as_uncertainty(uncertainty)
    scen = make_scenario(name, seed=4, **knobs)
    assert isinstance(scen.jobs, JobTable)
    as_specs = Scenario(scen.name, scen.cluster, tuple(scen.jobs), scen.stage_overhead)
    history = [(job, 3.0) for job in tuple(scen.jobs)[:5]]
    states = []
    for s in (scen, as_specs):
        core = sim.ensure(sim.allocate(1, scen.cluster.num_regions, 1), **required_sizes(s, unc))
        jobs = load(core, 0, s, np.random.default_rng(9), unc, history)
        assert [j.name for j in jobs] == [j.name for j in as_specs.jobs]
        states.append(core_state(core))
    for field, value in states[0].items():
        assert np.array_equal(value, states[1][field], equal_nan=value.dtype.kind == "f"), field


@pytest.mark.parametrize("seed", [0, 1, 17])
def test_recurring_jobs_follow_the_per_job_generator_stream(seed):
    """The compiled per-job draws are the documented job-by-job numpy Generator draws:
    template, early-end coin, end-point jitter (only if early), epoch jitter."""
    scen = make_scenario("recurring", seed=seed, num_jobs=50)
    t_model, t_data, t_epochs, t_p_early, t_end = _templates(0, 18, 0.45)
    rng = np.random.default_rng(seed)
    rng.exponential(1800.0, size=49)  # the arrivals come first
    for job in scen.jobs:
        t = int(rng.integers(0, 18))
        early = rng.random() < t_p_early[t]
        fate = min(max(float(t_end[t] * rng.lognormal(0.0, 0.25)), 0.01), 1.0) if early else 1.0
        epochs = float(t_epochs[t] * rng.uniform(0.9, 1.1))
        assert job.model == catalog.PAPER_MODELS[int(t_model[t])]
        assert job.dataset == catalog.PAPER_DATASETS[int(t_data[t])]
        assert (job.fate_fraction, job.epochs) == (fate, epochs)
        assert job.metadata == {"user": f"user{t // 3}", "name": f"template{t}"}


def test_load_episode_writes_every_loaded_column_and_setting():
    """sim.load_episode writes each field by name: every column of state.LOADED and
    draws.FIELDS (its rows beyond the episode's jobs get the field's fill), the cluster and
    the settings, so that a field added to either file cannot go unwritten."""
    from geo_gym import state
    from geo_gym.uncertainty import draws

    n, attempts, k = 3, 2, 4
    core = sim.allocate(2, k, 5, attempts=attempts)
    rng = np.random.default_rng(1)

    def column(field):
        shape = (n, attempts) if field.shape == "JA" else (n,)
        if field.dtype == np.bool_:
            return rng.random(shape) < 0.5
        if np.issubdtype(field.dtype, np.integer):  # loading passes int64 (the core holds int32)
            return rng.integers(1, 9, shape)
        return rng.random(shape) + 1.0

    jobs = sim.JobColumns(*(column(f) for f in state.LOADED))
    drawn = draws.DrawnColumns(*(column(f) for f in draws.FIELDS))
    cluster = sim.ClusterColumns(
        np.array([3, 5, 7, 9]), rng.random(k), rng.random((k, k)), 17.0, 0.25, 0.125
    )
    settings = sim.Settings(0.5, 2.0, 3, True, 0.75, 0.125, 1.5, 4.5, 0.375, sim.PRED_STATIC)
    sim.load_episode(core, 1, cluster, settings, jobs, drawn)
    for field, values in zip(state.LOADED + draws.FIELDS, (*jobs, *drawn), strict=True):
        row = getattr(core, field.name)[1]
        assert np.array_equal(row[:n], values), field.name
        assert (row[n:] == field.fill).all(), field.name
        assert not getattr(core, field.name)[0].any(), field.name  # env 0 untouched
    for name in ("cap", "price", "bandwidth_gbps", "intra_gbps", "gpu_kw", "stage_overhead_s"):
        assert np.array_equal(getattr(core, name)[1], getattr(cluster, name)), name
    for name in sim.Settings._fields:
        assert getattr(core, name)[1] == getattr(settings, name), name
    assert core.n_jobs[1] == n and core.k_target_max[1] == max(1, int(jobs.k_target.max()))


def _factories():
    from geo_gym.scenarios import scenario_factory, scenario_mixture

    pool = [make_scenario("recurring", seed=s, num_jobs=n) for s, n in ((0, 7), (1, 11), (2, 5))]
    return {
        "paper-default": scenario_factory("paper-default", num_jobs=12),
        "recurring": scenario_factory("recurring", start_rule="any", mfu=0.3),
        "random": scenario_factory("random"),  # the job count is drawn from the seed
        "paper-fig1": scenario_factory("paper-fig1"),
        "a Scenario": scenario_factory(pool[1]),
        "a pool": scenario_factory(pool),
        "a mixture": scenario_factory(scenario_mixture("recurring", {"num_jobs": [4, 9]})),
        "a function": scenario_factory(lambda seed: pool[seed % 2]),
    }


@pytest.mark.parametrize("kind", list(_factories()))
def test_a_factory_counts_the_jobs_of_each_seeds_workload(kind):
    make = _factories()[kind]
    for seed in range(6):
        assert make.num_jobs(seed) == len(make(seed).jobs), seed
    # the count comes without drawing the workload wherever the knobs fix it
    assert (make.count is None) == (kind in ("random", "a function"))


@pytest.mark.parametrize("uncertainty, built", [("realistic", 1), ("schedmate", 3)])
def test_warmup_workloads_are_drawn_only_when_the_retrieval_store_reads_them(uncertainty, built):
    # Under user estimates nothing reads the two warm-up workloads: only the first make(seed)
    # runs, and the core is loaded exactly as when they are drawn (their seeds and fates'
    # numbers are drawn either way). The retrieval predictor (schedmate) reads all three.
    from geo_gym.loading import start_episode
    from geo_gym.scenarios import scenario_factory

    unc = as_uncertainty(uncertainty)
    make = scenario_factory("recurring", num_jobs=20)
    calls = []

    def counted(seed):
        calls.append(seed)
        return make(seed)

    states = []
    for num_jobs in (make.num_jobs, None):
        calls.clear()
        core = sim.ensure(sim.allocate(1, 11, 1), **required_sizes(make(0), unc))
        core, *_ = start_episode(core, 0, counted, np.random.default_rng(3), unc, 2, None, num_jobs)
        states.append(core_state(core))
        assert len(calls) == (built if num_jobs is not None else 3)
    for field, value in states[0].items():
        assert np.array_equal(value, states[1][field], equal_nan=value.dtype.kind == "f"), field


def test_every_kind_of_workload_loads_through_one_compiled_loader():
    """Loading's columns come read-only (shared constants: a table's default columns, the
    neutral draws) or writable (fresh columns, drawn numbers): all of them convert to the one
    compiled loader (sim._loader; numba compiles nothing more and would raise a TypeError for
    a column of another type), for catalog tables, JobSpecs and trace tables, with and without
    drawn uncertainty."""
    from pathlib import Path

    from traces import read_philly_job_log
    from traces.mapping import map_trace

    sample = Path(__file__).resolve().parents[1] / "traces" / "data" / "synthetic_philly_job_log.json"
    trace = map_trace(read_philly_job_log(sample), max_jobs=40).scenario
    paper = make_scenario("paper-default", seed=2)
    workloads = [paper, Scenario(paper.name, paper.cluster, tuple(paper.jobs)),
                 make_scenario("recurring", seed=1, num_jobs=12), trace]
    for scen in workloads:
        for uncertainty in (None, "realistic", "schedmate"):
            unc = as_uncertainty(uncertainty)
            core = sim.ensure(sim.allocate(1, scen.cluster.num_regions, 1), **required_sizes(scen, unc))
            load(core, 0, scen, np.random.default_rng(0), unc)
            assert core.n_jobs[0] == len(scen.jobs)
    assert len(sim._loader().signatures) == 1
