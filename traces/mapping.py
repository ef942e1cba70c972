"""Trace jobs -> pipeline-parallel LLM jobs: the documented mapping (docs/traces.md).

``map_trace(table, **options)`` turns a common job table (:mod:`traces.schema`, any reader)
into a :class:`geo_gym.scenarios.Scenario` that every geo_gym path runs (``geo_gym.simulate``,
``GeoPipeEnv``). Direction of dependency: traces -> geo_gym, never the reverse.

Per job (all rules are pure functions below, each with its docstring):

* **Size class** (:func:`size_class`): the GPU request picks a BACE-Pipe Table III model,
  larger requests larger models (:data:`SIZE_CLASSES`).
* **GPU cap** (``JobSpec.max_gpus`` = the request G; CPU-only jobs kept with
  ``gpu_only=False`` ask for 1): every placement rule aims at ``G' = min(G, K*)`` GPUs
  (:func:`ideal_stages`), never more than the user asked for.
* **Length** (:func:`calibrated_iterations`): ``JobSpec.iterations``, the fractional iteration
  count ``I = D / t_iter(G')`` whose ideal run -- Eq. (1) with G' stages in one region over the
  intra-region bandwidth, no queueing, no failure -- takes exactly the traced run time D. The
  core runs such jobs for exactly fate x I iterations (no rounding, geo_gym/loading.py).
* **Fate** (:func:`fate_rule`): from the final state. COMPLETED (and UNKNOWN: tables without
  states) run their configured work. CANCELLED, TIMEOUT and FAILED ended early: the traced run
  is what they executed, and their configured length (what a user estimate sees) is the traced
  run divided by :data:`EARLY_END_FRACTION`. NODE_FAIL and PREEMPTED were interrupted by the
  cluster at a point independent of their progress, so the traced run is taken as
  :data:`INTERRUPTED_FRACTION` of their work, and they run all of it here.
* **Infrastructure failures** (:func:`failure_points`): Philly retries of jobs that did not end
  FAILED (every attempt but the last), Acme NODE_FAIL at ``fail_time``; planted into the core
  as GPU-hours into each attempt (``JobSpec.failure_gpu_hours``: ``d_a x G' / 3600`` for a
  failure d_a seconds into an attempt), so that the ideal replay on G' GPUs fails at the
  traced point of the run. Retries of FAILED jobs are repeats of the application error
  (Philly retried every failure), not infrastructure failures.
* **Cluster** (:func:`capacity_scale_for_load`): the trace's single cluster becomes the
  scenario's regions (Table II by default), their GPU counts scaled together so that the
  workload's offered load -- the ideal runs, on G' GPUs each, that the rules aim at -- is
  ``target_load`` of the total capacity.

Options (``MappingOptions``): time window, job sampling, GPU-only, arrival-time compression,
at most ``max_jobs`` jobs, the load target or an explicit capacity scale, the two fate
fractions, trace failures on/off, at most ``max_failures`` planted failures per job.
"""

from __future__ import annotations

import math
import sys
from dataclasses import dataclass, field, fields, replace
from functools import lru_cache
from pathlib import Path

import numpy as np
import pandas as pd

from geo_gym import catalog, costmodel
from geo_gym.catalog import ModelSpec
from geo_gym.cluster import Cluster, paper_cluster
from geo_gym.scenarios import Scenario
from geo_gym.uncertainty.workload import FATE_FRACTION_BETA
from geo_gym.workload import JobSpec, profile

from .readers import read_trace
from .schema import validate_job_table

# GPU request -> Table III model: the smallest class whose bound holds the request. Larger
# requests get larger models (BACE-Pipe Table III, ordered by parameters); two 14B models
# split the 1- and 2-GPU jobs, which are 90 % of Philly (RFold table: 96,662 + 2,522 of 111,549).
SIZE_CLASSES: tuple[tuple[int, str], ...] = (
    (1, "Qwen2.5-14B"),
    (2, "Ministral-3-14B"),
    (4, "Gemma-3-27B"),
    (8, "Qwen2.5-32B"),
    (16, "Falcon-40B"),
    (32, "Llama-3.1-70B"),
    (64, "Solar-Open-100B"),
    (sys.maxsize, "FLM-101B"),
)
# The length of every trace job is set by its iteration count (JobSpec.iterations), so the
# dataset only names the job for the duration predictors' metadata.
TRACE_DATASET = catalog.dataset_by_name("WikiText-103")
# Early ends (CANCELLED, TIMEOUT, FAILED) stopped at an unknown fraction of the work the user
# configured: the mean of the project's early-end fraction, Beta(0.7, 2) (uncertainty/workload.py).
EARLY_END_FRACTION = FATE_FRACTION_BETA[0] / (FATE_FRACTION_BETA[0] + FATE_FRACTION_BETA[1])
# NODE_FAIL / PREEMPTED: an interruption independent of the job's progress lands, on average,
# half-way through its run.
INTERRUPTED_FRACTION = 0.5
# Philly's official ratio: on average 1,167 GPUs busy (RFold table: GPU-seconds / 129.4-day
# span) on the 2,490 GPUs of cluster_machine_list, i.e. ~0.47; we default to one half.
DEFAULT_TARGET_LOAD = 0.5

COMPLETE_STATES = ("COMPLETED", "UNKNOWN")
EARLY_END_STATES = ("CANCELLED", "TIMEOUT", "FAILED")
INTERRUPTED_STATES = ("NODE_FAIL", "PREEMPTED")
DROPPED_STATES = ("RUNNING",)  # still running when the trace was cut: its length is unknown


@dataclass(frozen=True)
class MappingOptions:
    """How to cut and map a trace; every field is validated (ValueError naming it).

    Times are seconds on the table's clock (``submit`` = 0 at the first job of the file).
    """

    start: float = 0.0  # window start
    length: float | None = None  # window length; None: to the end of the trace
    sample: float = 1.0  # fraction of the window's jobs kept (Bernoulli, seeded)
    sample_seed: int = 0
    max_jobs: int | None = None  # keep the first max_jobs jobs (after sampling)
    gpu_only: bool = True  # drop CPU-only jobs; False keeps them as 1-GPU jobs
    compression: float = 1.0  # arrival times divided by this (>1: denser arrivals)
    target_load: float | None = DEFAULT_TARGET_LOAD  # offered load / total capacity
    capacity_scale: float | None = None  # explicit scale instead of target_load
    early_end_fraction: float = EARLY_END_FRACTION
    interrupted_fraction: float = INTERRUPTED_FRACTION
    trace_failures: bool = True  # plant the trace's infrastructure failures
    max_failures: int = 15  # planted failures per job (UncertaintyConfig.max_attempts - 1)
    cluster: Cluster | None = field(default=None, compare=False)  # None: Table II

    def __post_init__(self) -> None:
        def bad(name: str, why: str) -> ValueError:
            return ValueError(f"MappingOptions.{name}: {why}, got {getattr(self, name)!r}")

        if not (math.isfinite(self.start) and self.start >= 0):
            raise bad("start", "must be a finite number of seconds >= 0")
        if self.length is not None and not (self.length > 0 and math.isfinite(self.length)):
            raise bad("length", "must be a finite number of seconds > 0, or None")
        if not 0 < self.sample <= 1:
            raise bad("sample", "must be in (0, 1]")
        if isinstance(self.sample_seed, bool) or int(self.sample_seed) != self.sample_seed:
            raise bad("sample_seed", "must be an integer")
        if self.max_jobs is not None and (int(self.max_jobs) != self.max_jobs or self.max_jobs < 1):
            raise bad("max_jobs", "must be an integer >= 1, or None")
        if not isinstance(self.gpu_only, bool):
            raise bad("gpu_only", "must be True or False")
        if not (self.compression > 0 and math.isfinite(self.compression)):
            raise bad("compression", "must be a finite number > 0")
        if self.target_load is not None and not (self.target_load > 0 and math.isfinite(self.target_load)):
            raise bad("target_load", "must be a finite number > 0, or None")
        if self.capacity_scale is not None and not (
            self.capacity_scale > 0 and math.isfinite(self.capacity_scale)
        ):
            raise bad("capacity_scale", "must be a finite number > 0, or None")
        if self.capacity_scale is not None and self.target_load is not None:
            raise bad("capacity_scale", "give either capacity_scale or target_load (set it to None)")
        for name in ("early_end_fraction", "interrupted_fraction"):
            if not 0 < getattr(self, name) <= 1:
                raise bad(name, "must be in (0, 1]")
        if not isinstance(self.trace_failures, bool):
            raise bad("trace_failures", "must be True or False")
        if isinstance(self.max_failures, bool) or int(self.max_failures) != self.max_failures or self.max_failures < 0:
            raise bad("max_failures", "must be an integer >= 0")
        if self.cluster is not None and not isinstance(self.cluster, Cluster):
            raise bad("cluster", "must be a geo_gym.cluster.Cluster or None")


@dataclass(frozen=True)
class MappedTrace:
    """The scenario plus what the mapping did: one row per mapped job (``jobs``), the dropped
    jobs by reason, the offered load and the capacity scale."""

    scenario: Scenario
    jobs: pd.DataFrame
    dropped: dict[str, int]
    offered_load_gpus: float  # average GPUs the ideal runs keep busy over the arrival span
    capacity_scale: float
    source: str


# ------------------------------------------------------------------------------- pure rules
def size_class(gpus: int) -> ModelSpec:
    """The Table III model of a job requesting ``gpus`` GPUs (:data:`SIZE_CLASSES`)."""
    if isinstance(gpus, bool) or int(gpus) != gpus or gpus < 1:
        raise ValueError(f"GPU request must be an integer >= 1, got {gpus!r}")
    for bound, name in SIZE_CLASSES:
        if gpus <= bound:
            return catalog.model_by_name(name)
    raise AssertionError("SIZE_CLASSES ends with an unbounded class")


@lru_cache(maxsize=64)
def _model_profile(model: ModelSpec, cluster_gpu, overhead: float, intra: float):
    return profile(JobSpec("probe", model, TRACE_DATASET), cluster_gpu, overhead, intra)


@lru_cache(maxsize=4096)
def ideal_iteration_time(model: ModelSpec, stages: int, gpu, overhead: float, intra: float) -> float:
    """Eq. (1) for ``stages`` stages inside one region (every link intra-region), seconds."""
    p = _model_profile(model, gpu, overhead, intra)
    return costmodel.single_region_iteration_time(
        p.work, stages, p.activation_gbit, intra, overhead, p.num_microbatches
    )


def ideal_stages(model: ModelSpec, gpus: int, gpu, overhead: float, intra: float) -> int:
    """G' = min(request, K*): the GPUs every rule aims at for a job with ``max_gpus`` = the
    request (``JobProfile.k_target``; K* is the paper's cap, IV-A)."""
    return min(int(gpus), _model_profile(model, gpu, overhead, intra).k_star)


def calibrated_iterations(duration: float, t_iter: float) -> float:
    """The fractional iteration count whose ideal run takes exactly ``duration`` seconds:
    D / t_iter (``JobSpec.iterations``; a job shorter than one iteration gets a fraction)."""
    if not (duration > 0 and math.isfinite(duration)) or not (t_iter > 0 and math.isfinite(t_iter)):
        raise ValueError(
            f"need a finite duration > 0 and a finite t_iter > 0, got duration={duration!r}, t_iter={t_iter!r}"
        )
    return duration / t_iter


def fate_rule(state: str, early_end_fraction: float = EARLY_END_FRACTION,
              interrupted_fraction: float = INTERRUPTED_FRACTION) -> tuple[float, float]:
    """(executed work / traced run, configured work / traced run) for a final state.

    COMPLETED, UNKNOWN: (1, 1). CANCELLED, TIMEOUT, FAILED: (1, 1/early_end_fraction): they
    executed the traced run and stopped early. NODE_FAIL, PREEMPTED: (1/interrupted_fraction)
    twice: the traced run was cut by the cluster and the job runs all of its work here."""
    if state in COMPLETE_STATES:
        return 1.0, 1.0
    if state in EARLY_END_STATES:
        return 1.0, 1.0 / early_end_fraction
    if state in INTERRUPTED_STATES:
        return 1.0 / interrupted_fraction, 1.0 / interrupted_fraction
    raise ValueError(f"no fate rule for state {state!r} (RUNNING jobs are dropped)")


def failure_points(state: str, attempts: tuple, duration: float, fail_time: float) -> tuple[float, ...]:
    """Each infrastructure failure's point, in attempt order: the seconds that attempt ran before
    it failed (per attempt, not cumulative: ``JobSpec.failure_gpu_hours`` counts from each
    attempt's start).

    * Philly retries: every attempt but the last ended in a failure that the cluster retried.
      Unless the job finally FAILED, each is an infrastructure failure at the end of its
      attempt (its run time). A FAILED job's earlier attempts repeated the application error.
    * Acme NODE_FAIL: one failure at ``fail_time`` (minus the run's start), else at the end.
    """
    if state == "NODE_FAIL":
        start = attempts[0][0] if attempts else math.nan
        point = fail_time - start if math.isfinite(fail_time) and math.isfinite(start) else duration
        return (float(min(max(point, 0.0), duration)),)
    if state == "FAILED" or len(attempts) < 2:
        return ()
    return tuple(float(end - start) for start, end in attempts[:-1])


def offered_load(submit: np.ndarray, run: np.ndarray, gpus: np.ndarray) -> float:
    """Average GPUs the jobs keep busy over the arrival span [first, last submit] if each runs
    its ideal run from its submit time: sum_j g_j |[s_j, s_j + r_j] & span| / |span|. Parts
    of runs past the last arrival are not counted (a week's window of a trace with 60-day jobs
    would otherwise count each long job's whole run against one week). With a single arrival
    instant the span is the longest run."""
    t0, t1 = float(submit.min()), float(submit.max())
    if t1 <= t0:
        t1 = t0 + float(run.max())
    overlap = np.clip(np.minimum(submit + run, t1) - np.maximum(submit, t0), 0.0, None)
    return float((gpus * overlap).sum() / (t1 - t0))


def capacity_scale_for_load(load_gpus: float, cluster: Cluster, target_load: float) -> float:
    """The factor on every region's GPUs that makes ``load_gpus`` be ``target_load`` of the
    total capacity (Cluster.scaled rounds per region)."""
    return load_gpus / (target_load * cluster.total_gpus)


# ------------------------------------------------------------------------------- selection
def select_jobs(table: pd.DataFrame, opts: MappingOptions) -> tuple[pd.DataFrame, dict[str, int]]:
    """The window, the filters (dropped counts by reason), the sample, the first max_jobs."""
    sub = table[table["submit"] >= opts.start]
    if opts.length is not None:
        sub = sub[sub["submit"] < opts.start + opts.length]
    dropped = {}
    rules = [
        ("running", lambda t: t["state"].isin(DROPPED_STATES)),
        ("no_duration", lambda t: t["duration"].isna()),
        ("zero_duration", lambda t: t["duration"] <= 0),
        ("cpu_only", lambda t: (t["gpus"] == 0) & opts.gpu_only),
    ]
    for reason, rule in rules:
        mask = rule(sub)
        dropped[reason] = int(mask.sum())
        sub = sub[~mask]
    if opts.sample < 1:
        rng = np.random.default_rng(opts.sample_seed)
        keep = rng.random(len(sub)) < opts.sample
        dropped["not_sampled"] = int((~keep).sum())
        sub = sub[keep]
    sub = sub.sort_values("submit", kind="stable")
    if opts.max_jobs is not None and len(sub) > opts.max_jobs:
        dropped["over_max_jobs"] = len(sub) - int(opts.max_jobs)
        sub = sub.iloc[: int(opts.max_jobs)]
    return sub, dropped


# ------------------------------------------------------------------------------- the mapping
def map_trace(table: pd.DataFrame, options: MappingOptions | None = None, **kwargs) -> MappedTrace:
    """Map a common job table to a Scenario (see the module docstring and docs/traces.md).
    ``kwargs`` are MappingOptions fields (or give ``options``)."""
    unknown = sorted(set(kwargs) - set(OPTION_NAMES))
    if unknown:
        hint = (" (load_basis was removed: every rule aims at min(request, K*) GPUs, so the "
                "offered load is always that of those runs)" if "load_basis" in unknown else "")
        raise ValueError(f"MappingOptions has no option(s) {unknown}{hint}; options: {list(OPTION_NAMES)}")
    opts = replace(options, **kwargs) if options is not None else MappingOptions(**kwargs)
    source = str(table.attrs.get("source", "<job table>"))
    validate_job_table(table, source)
    sub, dropped = select_jobs(table, opts)
    if sub.empty:
        raise ValueError(
            f"{source}: no job left to map (window start={opts.start}, length={opts.length}, "
            f"sample={opts.sample}, gpu_only={opts.gpu_only}; dropped {dropped})"
        )
    base = opts.cluster or paper_cluster()
    overhead, gpu, intra = catalog.DEFAULT_STAGE_OVERHEAD_S, base.gpu, base.intra_region_gbps
    rows = [_map_row(r, opts, gpu, overhead, intra) for r in sub.itertuples(index=False)]
    jobs_df = pd.DataFrame(rows)
    submit = (sub["submit"].to_numpy() - float(sub["submit"].min())) / opts.compression
    jobs_df.insert(2, "submit", submit)
    # The ideal runs the rules aim at: the executed work on G' = min(request, K*) GPUs.
    load = offered_load(submit, jobs_df["run_s"].to_numpy(), jobs_df["stages"].to_numpy())
    if opts.capacity_scale is not None:
        scale = opts.capacity_scale
    elif opts.target_load is not None:
        scale = capacity_scale_for_load(load, base, opts.target_load)
    else:
        scale = 1.0
    cluster = base.scaled(1.0, scale) if scale != 1.0 else base
    specs = tuple(_job_spec(row, s) for row, s in zip(rows, submit, strict=True))
    name = f"trace:{Path(source).name}"
    scenario = Scenario(name, cluster, specs, overhead)
    jobs_df.attrs["source"] = source
    return MappedTrace(scenario, jobs_df, dropped, load, float(scale), source)


def _map_row(r, opts: MappingOptions, gpu, overhead: float, intra: float) -> dict:
    request = max(int(r.gpus), 1)  # CPU-only jobs reach here only with gpu_only=False: 1 GPU
    model = size_class(request)
    kstar = _model_profile(model, gpu, overhead, intra).k_star
    stages = ideal_stages(model, request, gpu, overhead, intra)  # G' = min(request, K*)
    t_iter = ideal_iteration_time(model, stages, gpu, overhead, intra)
    executed_ratio, configured_ratio = fate_rule(r.state, opts.early_end_fraction, opts.interrupted_fraction)
    duration = float(r.duration)
    try:
        traced_iters = calibrated_iterations(duration, t_iter)
    except ValueError as err:
        raise ValueError(f"job {r.job_id!r}: {err}") from None
    executed = traced_iters * executed_ratio
    configured = traced_iters * configured_ratio
    # The ideal run (G' GPUs, one region) executes the traced run in exactly D seconds, so a
    # failure d_a seconds into an attempt is d_a x G' GPU-hours / 3600 into it.
    hours = None
    if opts.trace_failures and r.num_attempts + (r.state == "NODE_FAIL") > 0:
        points = failure_points(r.state, r.attempts, duration, float(r.fail_time))
        hours = tuple(p * stages / 3600.0 for p in points[: opts.max_failures])
    return {
        "job_id": r.job_id,
        "name": f"{r.job_id}-{model.name}",
        "state": r.state,
        "gpus": int(r.gpus),  # the trace's request (0: a CPU-only job)
        "max_gpus": request,  # JobSpec.max_gpus
        "model": model.name,
        "kstar": kstar,
        "stages": stages,  # G' = min(max_gpus, K*): what every rule aims at
        "t_iter_s": t_iter,
        "duration_s": duration,
        "executed_iters": executed,
        "configured_iters": configured,  # JobSpec.iterations
        "fate_fraction": executed_ratio / configured_ratio,
        "run_s": executed * t_iter,  # the ideal run of the executed work
        "failure_gpu_hours": hours,
        "user": r.user,
        "vc": r.vc,
        "type": r.type,
    }


def _job_spec(row: dict, submit: float) -> JobSpec:
    model = catalog.model_by_name(row["model"])
    return JobSpec(
        name=row["name"],
        model=model,
        dataset=TRACE_DATASET,
        submit=float(submit),
        iterations=row["configured_iters"],
        max_gpus=row["max_gpus"],
        fate_fraction=row["fate_fraction"],
        failure_gpu_hours=row["failure_gpu_hours"],
        metadata={
            "user": row["user"] or "",
            "vc": row["vc"] or "",
            "type": row["type"] or "",
            "task": (row["type"] or "train").lower(),
            "gpus": row["max_gpus"],
            "name": " ".join(x for x in (row["vc"], row["type"]) if x) or row["model"],
            "trace_id": row["job_id"],
        },
    )


def trace_scenario(path: str | Path, kind: str | None = None, options: MappingOptions | None = None,
                   **kwargs) -> MappedTrace:
    """Read ``path`` with :func:`traces.read_trace` and map it (``kwargs``: MappingOptions)."""
    return map_trace(read_trace(path, kind), options, **kwargs)


OPTION_NAMES = tuple(f.name for f in fields(MappingOptions))


# ------------------------------------------------------------------------------- summary / CLI
def describe(mapped: MappedTrace) -> dict:
    """What the mapping did to a trace, in numbers (``python -m traces PATH``).

    ``gpus_per_job_target``: mean G' = min(request, K*), the GPUs the rules aim at;
    ``capped_at_kstar``: jobs that asked for more than their model's K*;
    ``share_shorter_than_one_iteration``: jobs whose traced run is a fraction of one iteration
    (they run that fraction); ``target_over_requested_gpu_seconds``: the ideal runs' GPU-seconds
    over the trace's (request x traced run), below 1 only through the K* cap;
    ``executed_gpu_hours``: what the ideal runs execute (interrupted jobs run their whole work)."""
    j = mapped.jobs
    planted = [len(h) for h in j["failure_gpu_hours"] if h]
    traced_gpu_s = (j["max_gpus"] * j["duration_s"]).sum()
    return {
        "jobs": len(j),
        "dropped": mapped.dropped,
        "requested_gpus_per_job": float(j["max_gpus"].mean()),
        "gpus_per_job_target": float(j["stages"].mean()),
        "capped_at_kstar": int((j["max_gpus"] > j["kstar"]).sum()),
        "models": j["model"].value_counts().to_dict(),
        "median_iterations": float(j["executed_iters"].median()),
        "share_shorter_than_one_iteration": float((j["duration_s"] < j["t_iter_s"]).mean()),
        "target_over_requested_gpu_seconds": float((j["stages"] * j["duration_s"]).sum() / traced_gpu_s),
        "executed_gpu_hours": float((j["stages"] * j["run_s"]).sum() / 3600.0),
        "early_ends": int((j["fate_fraction"] < 1).sum()),
        "jobs_with_planted_failures": len(planted),
        "planted_failures": int(sum(planted)),
        "offered_load_gpus": mapped.offered_load_gpus,
        "capacity_scale": mapped.capacity_scale,
        "cluster_gpus": mapped.scenario.cluster.total_gpus,
    }
