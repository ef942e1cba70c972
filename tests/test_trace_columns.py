"""Traces as columns (traces.mapping._map_columns, workload.SpecTable): the column path gives
the very scenario, mapped table and simulation results of the per-job path it replaced
(traces.mapping._map_row / _job_spec, a JobSpec per job), to the bit, on the committed
synthetic samples (Philly retries and failures, Acme NODE_FAIL and early ends) and on the real
RFold table when present."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import baselines
import geo_gym
from geo_gym import catalog, loading, workload
from geo_gym.cluster import paper_cluster
from geo_gym.scenarios import Scenario
from geo_gym.uncertainty import UncertaintyConfig
from geo_gym.workload import SpecTable
from traces import mapping, read_trace
from traces.mapping import FRAME_DTYPES, MappingOptions, _job_spec, _map_row, map_trace, select_jobs

DATA = Path(__file__).resolve().parents[1] / "traces" / "data"
TRACES_DIR = Path(os.environ.get("GEO_GYM_TRACES_DIR")
                  or Path(__file__).resolve().parents[1].parent / "shared" / "traces")
RFOLD = TRACES_DIR / "philly" / "rfold_philly_trace.csv.gz"
SAMPLES = [
    (DATA / "synthetic_philly_job_log.json", "philly_job_log"),
    (DATA / "synthetic_acme_seren.csv", "acme_seren"),
    (DATA / "synthetic_acme_kalos.csv", "acme_kalos"),
]


def per_job(table: pd.DataFrame, mapped, **options):
    """The per-job path: the mapped table and the JobSpec tuple as map_trace built them before
    the columns, one _map_row and one _job_spec per job."""
    opts = MappingOptions(**options)
    sub, _ = select_jobs(table, opts)
    base = opts.cluster or paper_cluster()
    rows = [_map_row(r, opts, base.gpu, catalog.DEFAULT_STAGE_OVERHEAD_S, base.intra_region_gbps)
            for r in sub.itertuples(index=False)]
    df = pd.DataFrame(rows)
    submit = (sub["submit"].to_numpy() - float(sub["submit"].min())) / opts.compression
    df.insert(2, "submit", submit)
    df = df.astype(FRAME_DTYPES)  # the mapped table's compact dtypes, same values
    specs = tuple(_job_spec(row, s) for row, s in zip(rows, submit, strict=True))
    scen = mapped.scenario
    return df, Scenario(scen.name, scen.cluster, specs, scen.stage_overhead, scen.start_rule, scen.memory_model)


def assert_same_specs(table: SpecTable, specs: tuple) -> None:
    assert len(table) == len(specs)
    for i, spec in enumerate(specs):
        got = table[i]
        assert got == spec, i
        assert got.metadata == spec.metadata, i  # metadata is no part of JobSpec equality
        assert [type(v) for v in got.metadata.values()] == [type(v) for v in spec.metadata.values()]
        assert got.failure_gpu_hours == spec.failure_gpu_hours
    assert tuple(table) == specs


def assert_same_results(a: geo_gym.SimResult, b: geo_gym.SimResult) -> None:
    pd.testing.assert_frame_equal(a.jobs, b.jobs, check_exact=True)
    assert a.summary == b.summary


@pytest.mark.parametrize("path, kind", SAMPLES, ids=[p.name for p, _ in SAMPLES])
@pytest.mark.parametrize("options", [{}, {"gpu_only": False, "start_rule": "memory"}, {"trace_failures": False}],
                         ids=["defaults", "cpu-jobs-memory-rule", "no-failures"])
def test_columns_equal_per_job_path(path, kind, options):
    table = read_trace(path, kind)
    mapped = map_trace(table, **options)
    df, reference = per_job(table, mapped, **options)
    pd.testing.assert_frame_equal(mapped.jobs, df, check_exact=True)
    assert isinstance(mapped.scenario.jobs, SpecTable)
    assert_same_specs(mapped.scenario.jobs, reference.jobs)
    # what loading reads of the jobs: the same columns, to the bit
    for columns in (workload.spec_columns, workload.profile_columns, workload.label_columns):
        got, want = columns(mapped.scenario.jobs), columns(reference.jobs)
        assert got.keys() == want.keys()
        for key in got:
            np.testing.assert_array_equal(np.asarray(got[key]), np.asarray(want[key]), err_msg=key)
    assert loading._plants_failures(mapped.scenario.jobs) == loading._plants_failures(reference.jobs)
    for policy, unc in [("bace_pipe", None), ("fcfs", "realistic"), ("schedmate_sjf", "schedmate")]:
        env_kwargs = {"uncertainty": unc}
        assert_same_results(geo_gym.simulate(mapped.scenario, baselines.make(policy), seed=3, env_kwargs=env_kwargs),
                            geo_gym.simulate(reference, baselines.make(policy), seed=3, env_kwargs=env_kwargs))


def test_planted_failures_survive_the_columns():
    """The Philly sample's retries become planted failures in the table, read by the core."""
    mapped = map_trace(read_trace(*SAMPLES[0]))
    jobs = mapped.scenario.jobs
    assert jobs.failure_gpu_hours and jobs.planted.sum() == len(jobs.failure_gpu_hours)
    i = next(iter(jobs.failure_gpu_hours))
    assert jobs[i].failure_gpu_hours == mapped.jobs["failure_gpu_hours"].iloc[i]
    assert loading.required_sizes(mapped.scenario, UncertaintyConfig())["attempts"] == 16
    off = map_trace(read_trace(*SAMPLES[0]), trace_failures=False)
    assert loading.required_sizes(off.scenario, UncertaintyConfig())["attempts"] == 0


def test_spec_table_checks_its_columns():
    ok = {"name": ["a", "b"], "model": [0, 1], "submit": [0.0, 5.0], "iterations": [1.0, 2.0],
          "max_gpus": [1, 4], "dataset": catalog.PAPER_DATASETS[0]}
    table = SpecTable(**ok)
    assert table[-1].name == "b" and table[1].max_gpus == 4 and table[:1] == (table[0],)
    for change, match in [({"submit": [5.0, 0.0]}, "must not decrease"),
                          ({"iterations": [1.0, 0.0]}, "iterations"),
                          ({"max_gpus": [0, 1]}, "max_gpus"),
                          ({"fate_fraction": [0.5, 1.5]}, "fate_fraction"),
                          ({"failure_gpu_hours": {0: (-1.0,)}}, "failure_gpu_hours"),
                          ({"name": ["a"]}, "rows")]:
        with pytest.raises(ValueError, match=match):
            SpecTable(**{**ok, **change})


@pytest.mark.skipif(not RFOLD.exists(), reason=f"real trace {RFOLD} not present")
def test_rfold_sample_columns_equal_per_job_path():
    table = read_trace(RFOLD)
    options = {"sample": 0.05, "sample_seed": 1}
    mapped = map_trace(table, **options)
    df, reference = per_job(table, mapped, **options)
    pd.testing.assert_frame_equal(mapped.jobs, df, check_exact=True)
    assert_same_specs(mapped.scenario.jobs, reference.jobs)
    assert_same_results(geo_gym.simulate(mapped.scenario, baselines.make("bace_pipe")),
                        geo_gym.simulate(reference, baselines.make("bace_pipe")))


@pytest.mark.parametrize("unc", [None, "realistic"])
def test_result_table_from_arrays_equals_the_lists(unc):
    """geo_gym.simulate's per-job table, built from numpy columns (env.episode_arrays), equals
    the table built from episode_columns' Python lists, dtypes included."""
    from gymnasium.utils import seeding

    from geo_gym import fixed, runner, sim
    from geo_gym.env import as_uncertainty, episode_arrays, episode_columns
    from geo_gym.scenarios import scenario_factory

    mapped = map_trace(read_trace(*SAMPLES[0]))
    rng, _ = seeding.np_random(5)
    core, jobs, scen, _ = loading.start_episode(sim.allocate(1, 11, 1), 0, scenario_factory(mapped.scenario), rng,
                                                as_uncertainty(unc))
    policy = baselines.make("bace_pipe")
    assert fixed.run_fixed_policy(core, 0, policy.order_code, policy.rule_code, 0, False)
    lists = pd.DataFrame(episode_columns(core, 0, jobs, scen.cluster.names))
    pd.testing.assert_frame_equal(pd.DataFrame(episode_arrays(core, 0, jobs, scen.cluster.names)), lists,
                                  check_exact=True)
    columns, summary = runner._collect(core, jobs, scen)
    pd.testing.assert_frame_equal(runner._table(columns, summary).jobs, lists, check_exact=True)
    assert (lists["failures"] > 0).any() == (unc is not None or bool(jobs.failure_gpu_hours))


def test_a_loaded_core_is_freed():
    """sim.load_episode keeps no reference to the core (numba's getattr on a StructRef did: every
    core geo_gym.simulate loaded stayed in memory), so a run's core goes with its last name."""
    import gc
    import weakref

    from gymnasium.utils import seeding

    from geo_gym import fixed, sim
    from geo_gym.scenarios import scenario_factory

    rng, _ = seeding.np_random(0)
    core, *_ = loading.start_episode(sim.allocate(1, 6, 1, attempts=0), 0, scenario_factory("recurring"), rng,
                                     UncertaintyConfig())
    policy = baselines.make("bace_pipe")
    assert fixed.run_fixed_policy(core, 0, policy.order_code, policy.rule_code, 0, False)
    column = weakref.ref(core.submit_s)
    del core
    gc.collect()
    assert column() is None


def test_bench_traces_tiles_a_trace(tmp_path):
    """Smoke run of scripts/bench_traces.py --tile on the committed synthetic Philly sample (the
    speed and memory themselves are not tested): the tiled case's row, every phase timed, the
    same outcome as simulate on the tiled table."""
    import subprocess
    import sys

    root = Path(__file__).resolve().parents[1]
    sample = DATA / "synthetic_philly_job_log.json"
    out = subprocess.run(
        [sys.executable, str(root / "scripts" / "bench_traces.py"), "--trace-file", str(sample),
         "--tile", "700", "--out", str(tmp_path)],
        capture_output=True, text=True, timeout=600,
    )
    assert out.returncode == 0, out.stderr[-2000:]
    row = pd.read_csv(tmp_path / "bench_tiled_700.csv").iloc[0]
    for phase in ("read", "tile", "map", "load", "run", "table"):
        assert row[f"{phase}_s"] >= 0 and row[f"peak_{phase}_mb"] > 0
    assert row.peak_mb >= row.base_mb and row.peak_b_per_job > 0
    import importlib.util

    spec = importlib.util.spec_from_file_location("bench_traces", root / "scripts" / "bench_traces.py")
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    table = read_trace(sample, "philly_job_log")
    tiled = bench.tile_table(table, 700)
    assert len(tiled) == 700 and tiled.job_id.is_unique and tiled.submit.is_monotonic_increasing
    res = geo_gym.simulate(map_trace(tiled).scenario, baselines.make("bace_pipe"))
    assert row.jobs == len(res.jobs) and row.avg_jct_h == res.summary["avg_jct_h"]


def test_simulate_returns_the_cores_memory_on_large_workloads(monkeypatch):
    """From runner.RETURN_FREED_JOBS jobs on, simulate hands the dropped core's pages back to
    the system (glibc's malloc_trim) before the table is built; the results do not change."""
    import platform

    from geo_gym import runner

    mapped = map_trace(read_trace(*SAMPLES[1]))
    plain = geo_gym.simulate(mapped.scenario, baselines.make("bace_pipe"))
    calls = []
    real = runner._return_freed_memory
    monkeypatch.setattr(runner, "_return_freed_memory", lambda: calls.append(1) or real())
    monkeypatch.setattr(runner, "RETURN_FREED_JOBS", len(mapped.scenario.jobs))
    assert_same_results(geo_gym.simulate(mapped.scenario, baselines.make("bace_pipe")), plain)
    assert calls == [1]
    monkeypatch.setattr(runner, "RETURN_FREED_JOBS", len(mapped.scenario.jobs) + 1)
    geo_gym.simulate(mapped.scenario, baselines.make("bace_pipe"))
    assert calls == [1]
    if platform.system() == "Linux" and platform.libc_ver()[0] == "glibc":
        assert runner._malloc_trim() is not None


@settings(max_examples=60, deadline=None)
@given(st.lists(st.sampled_from(["b", "a", "", "c", None]), min_size=0, max_size=6),
       st.lists(st.integers(-1, 5), min_size=0, max_size=40))
def test_categorical_from_codes_is_pandas_own(labels, index):
    # the mapped table's label columns are built from (labels, index) without per-job strings;
    # they must be the Categorical pandas builds from the per-job values (sorted categories,
    # a label listed twice once, index -1 and None missing, unused labels absent)
    labels = np.array(labels + ["d"], dtype=object)
    index = np.array([i for i in index if i < len(labels)], dtype=np.int64)
    values = np.array([labels[i] if i >= 0 else None for i in index], dtype=object)
    pd.testing.assert_extension_array_equal(mapping._categorical(labels, index), pd.Categorical(values))
