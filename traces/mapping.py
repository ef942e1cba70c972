"""Trace jobs -> pipeline-parallel LLM jobs: the documented mapping (docs/traces.md).

``map_trace(table, **options)`` turns a common job table (:mod:`traces.schema`, any reader)
into a :class:`geo_gym.scenarios.Scenario` that every geo_gym path runs (``geo_gym.simulate``,
``GeoPipeEnv``). Direction of dependency: traces -> geo_gym, never the reverse.

Per job (all rules are pure functions below, each with its docstring):

* **Size class** (:func:`size_class`): the GPU request G picks the largest catalog model
  (``geo_gym.catalog.MODELS``, by parameters) whose memory minimum on the cluster's GPU
  (``geo_gym.memory``, under ``MappingOptions.memory_model``) is at most G: a 1-GPU job trains
  a model that fits on one GPU, a 64-GPU job FLM-101B.
* **Start rule and stages** (``MappingOptions.start_rule``, :func:`ideal_stages`): the job
  carries G as ``JobSpec.max_gpus`` (CPU-only jobs kept with ``gpu_only=False`` ask for 1), and
  the scenario's start rule (default ``request``: the trace's jobs ran gang-scheduled on the
  GPUs they asked for) gives the GPUs G' every rule aims at, ``geo_gym.start_rule.gpu_bounds``:
  under ``request`` G' = min(G, layers), and the job may start on no fewer; under the other
  rules G' = min(G, K*). Pure PP cannot use more stages than its model has layers, so a request
  above them (Philly's 128-GPU jobs on FLM-101B's 80 layers) runs on ``layers`` GPUs
  (``describe``: ``capped_at_layers``).
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
* **Early-end kind** (:func:`end_kind_rule`): FAILED (Philly Failed) is an application failure,
  which a failure handler may misjudge as infrastructure and restart; CANCELLED (Philly
  Killed) and TIMEOUT are cancellations, which never reach it (``JobSpec.end_kind``).
* **Infrastructure failures** (:func:`failure_points`): Philly retries of jobs that did not end
  FAILED (every attempt but the last), Acme NODE_FAIL at ``fail_time``; planted into the core
  as GPU-hours into each attempt (``JobSpec.failure_gpu_hours``: ``d_a x G' / 3600`` for a
  failure d_a seconds into an attempt), so that the ideal replay on G' GPUs fails at the
  traced point of the run. Retries of FAILED jobs are repeats of the application error
  (Philly retried every failure), not infrastructure failures.
* **Cluster** (:func:`capacity_scale_for_load`): the trace's single cluster becomes the
  scenario's regions (Table II by default), their GPU counts scaled together so that the
  workload's offered load -- the ideal runs, on G' GPUs each, that the rules aim at -- is
  ``target_load`` of the total capacity, and never so small that no region holds the largest
  job's minimum (:func:`capacity_scale_to_hold`).

Options (``MappingOptions``): time window, job sampling, GPU-only, arrival-time compression,
at most ``max_jobs`` jobs, the load target or an explicit capacity scale, the two fate
fractions, trace failures on/off, at most ``max_failures`` planted failures per job, the start
rule and the memory model.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, fields, replace
from functools import lru_cache
from pathlib import Path

import numpy as np
import pandas as pd

from geo_gym import catalog, workload
from geo_gym.catalog import GPUType, ModelSpec
from geo_gym.cluster import Cluster, paper_cluster
from geo_gym.memory import MemoryModel
from geo_gym.scenarios import Scenario
from geo_gym.start_rule import StartRule, gpu_bounds
from geo_gym.uncertainty.workload import FATE_FRACTION_BETA
from geo_gym.workload import DEFAULT_MEMORY, JobSpec

from .readers import read_trace
from .schema import validate_job_table

# Philly and Acme started a job only on all the GPUs it asked for (gang scheduling), so a
# trace job's GPU request is where it starts (geo_gym/start_rule.py, "request").
DEFAULT_START_RULE = "request"
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
# How each early end ends (JobSpec.end_kind): FAILED is the user's code or data failing (Acme
# reports node failures apart, as NODE_FAIL; Philly does not separate them, so its Failed jobs
# count as application failures); CANCELLED is the user's kill, TIMEOUT the time limit's.
END_KIND_OF_STATE = {"FAILED": "application_failure", "CANCELLED": "cancelled", "TIMEOUT": "cancelled"}
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
    # how few GPUs a job may start on and what the rules aim at (geo_gym/start_rule.py; a
    # string is parsed): "request", the trace's own gang scheduling at the requested count
    start_rule: StartRule | str = DEFAULT_START_RULE
    # GPU memory per stage (geo_gym/memory.py): picks the size class and the memory minimum;
    # a dict of MemoryModel fields is accepted (``python -m traces --options``)
    memory_model: MemoryModel | dict = DEFAULT_MEMORY

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
        try:  # frozen: store the parsed rule, so that every use sees a StartRule
            object.__setattr__(self, "start_rule", StartRule.parse(self.start_rule))
        except ValueError as err:
            raise bad("start_rule", str(err)) from None
        if isinstance(self.memory_model, dict):
            try:
                object.__setattr__(self, "memory_model", MemoryModel(**self.memory_model))
            except (TypeError, ValueError) as err:
                raise bad("memory_model", str(err)) from None
        if not isinstance(self.memory_model, MemoryModel):
            raise bad("memory_model", "must be a geo_gym.memory.MemoryModel or a dict of its fields")


@dataclass(frozen=True)
class MappedTrace:
    """The scenario plus what the mapping did: one row per mapped job (``jobs``), the dropped
    jobs by reason, the offered load and the capacity scale."""

    scenario: Scenario
    jobs: pd.DataFrame  # a row per job; labels as categories, counts as int32 (FRAME_DTYPES)
    dropped: dict[str, int]
    offered_load_gpus: float  # average GPUs the ideal runs keep busy over the arrival span
    capacity_scale: float
    source: str


# ------------------------------------------------------------------------------- pure rules
def memory_minimum(model: ModelSpec, gpu: GPUType = catalog.A6000,
                   memory_model: MemoryModel = DEFAULT_MEMORY) -> int:
    """The fewest GPUs (pipeline stages) ``model`` fits on at the trace jobs' batch settings
    (``geo_gym.memory.min_stages``); 0 where even one layer per GPU does not fit. It is the
    number the simulator enforces (``workload._per_iteration``, which the job's profile uses);
    it depends on neither the stage overhead nor the intra-region bandwidth, so the catalog's
    defaults are passed for those."""
    return workload._per_iteration(
        model, catalog.DEFAULT_SEQ_LEN, catalog.DEFAULT_MICRO_BATCH, gpu,
        catalog.DEFAULT_STAGE_OVERHEAD_S, catalog.DEFAULT_INTRA_REGION_GBPS, memory_model,
    )[6]


def _size_key(model: ModelSpec) -> tuple[float, int, int]:
    """Larger first: parameters; on a tie the model with more layers (under pure PP it can
    honour a larger request before the layer cap), then the earlier entry of catalog.MODELS.
    The catalog's one tie, Qwen2.5-14B (48 layers) and Ministral-3-14B (40), goes to Qwen."""
    return model.params, model.layers, -catalog.MODELS.index(model)


def size_class(gpus: int, gpu: GPUType = catalog.A6000, memory_model: MemoryModel = DEFAULT_MEMORY) -> ModelSpec:
    """The model of a job requesting ``gpus`` GPUs: the largest catalog model (``catalog.MODELS``,
    by parameters, ties by :func:`_size_key`) whose memory minimum on ``gpu`` under
    ``memory_model`` (:func:`memory_minimum`) is at most the request, so the job's model fits
    on the GPUs it asked for. ValueError if the request is not an integer >= 1 or no model fits."""
    if isinstance(gpus, bool) or int(gpus) != gpus or gpus < 1:
        raise ValueError(f"GPU request must be an integer >= 1, got {gpus!r}")
    return _size_class(int(gpus), gpu, memory_model)


@lru_cache(maxsize=4096)
def _size_class(gpus: int, gpu: GPUType, memory_model: MemoryModel) -> ModelSpec:
    # a request only picks among the models that fit on that many GPUs (minimum 0: never fits)
    fits = [m for m in catalog.MODELS if 0 < memory_minimum(m, gpu, memory_model) <= gpus]
    if not fits:
        mins = {m.name: memory_minimum(m, gpu, memory_model) for m in catalog.MODELS}
        smallest = min((v for v in mins.values() if v > 0), default=None)
        hint = (f"the smallest memory minimum is {smallest} GPUs" if smallest is not None
                else "no catalog model fits on it at all, even at one layer per GPU")
        raise ValueError(
            f"GPU request of {gpus}: no catalog model fits on {gpus} {gpu.name} GPU(s) "
            f"({gpu.memory_gb:g} GB each) under {memory_model}; {hint} (geo_gym.memory)"
        )
    return max(fits, key=_size_key)


@lru_cache(maxsize=4096)
def gpu_plan(model: ModelSpec, gpus: int, gpu: GPUType, overhead: float, intra: float,
             memory_model: MemoryModel = DEFAULT_MEMORY,
             start_rule: StartRule | str = DEFAULT_START_RULE) -> tuple[int, int, int, int]:
    """(K*, memory minimum, min GPUs, G') of a job of ``model`` requesting ``gpus`` GPUs, as the
    simulator computes them for ``JobSpec.max_gpus`` = ``gpus`` (``workload._bounded_cached``):
    K* and the memory minimum from ``workload._per_iteration`` (without a memory model under
    ``any``), then ``geo_gym.start_rule.gpu_bounds``. G' is what every rule aims at: under
    ``request`` min(gpus, layers), the job starting on no fewer; otherwise min(gpus, K*)."""
    rule = StartRule.parse(start_rule)
    per = workload._per_iteration(
        model, catalog.DEFAULT_SEQ_LEN, catalog.DEFAULT_MICRO_BATCH, gpu, overhead, intra,
        memory_model if rule.uses_memory else None,
    )
    kstar, mem_min = per[3], per[6]
    min_gpus, target = gpu_bounds(rule, kstar, mem_min, model.layers, int(gpus))
    return kstar, mem_min, min_gpus, target


def ideal_stages(model: ModelSpec, gpus: int, gpu: GPUType, overhead: float, intra: float,
                 memory_model: MemoryModel = DEFAULT_MEMORY,
                 start_rule: StartRule | str = DEFAULT_START_RULE) -> int:
    """G': the GPUs every rule aims at for a job with ``max_gpus`` = the request
    (``JobProfile.k_target``; :func:`gpu_plan`)."""
    return gpu_plan(model, int(gpus), gpu, overhead, intra, memory_model, StartRule.parse(start_rule))[3]


def ideal_iteration_time(model: ModelSpec, stages: int, gpu: GPUType, overhead: float, intra: float) -> float:
    """Eq. (1) for ``stages`` stages inside one region (every link intra-region), seconds: the
    function the job's profile uses for t_iter on its k_target (the same bits)."""
    return workload._t_iter_single_region(
        model, catalog.DEFAULT_SEQ_LEN, catalog.DEFAULT_MICRO_BATCH, gpu, overhead, intra, int(stages)
    )


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


def end_kind_rule(state: str) -> str | None:
    """``JobSpec.end_kind`` for a final state: "application_failure" (FAILED), "cancelled"
    (CANCELLED, TIMEOUT), None for the states that do not end early (their fate is 1)."""
    if state in EARLY_END_STATES:
        return END_KIND_OF_STATE[state]
    fate_rule(state)  # an unknown state is an error here too
    return None


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


def capacity_scale_to_hold(gpus: int, cluster: Cluster) -> float:
    """The smallest factor (to 1e-3 relative) whose scaled cluster (``Cluster.scaled``, rounded
    per region) has a region of at least ``gpus`` GPUs. A job that must start on ``gpus`` GPUs
    (its start rule's minimum) can never start on fewer; a cluster of that many in all could
    still leave it unplaceable forever, by the single-region rules (LCF, LDF) and wherever the
    links between regions are below its b_j (Eq. 6), while one region that holds it can start
    it, under every rule, once that region is free."""
    largest = int(cluster.capacities.max())
    if largest < 1:
        raise ValueError("the cluster has no GPUs to scale")
    scale = gpus / largest
    while int(cluster.scaled(1.0, scale).capacities.max()) < gpus:  # rounded down
        scale *= 1.001
    return scale


# ------------------------------------------------------------------------------- selection
def select_jobs(table: pd.DataFrame, opts: MappingOptions) -> tuple[pd.DataFrame, dict[str, int]]:
    """The window, the filters (dropped counts by reason, each rule counting the rows the rules
    before it kept), the sample, the first max_jobs. The table is copied once, by one mask, and
    sorted only when it is not in submit order already (a 1M-job table is hundreds of MB)."""
    keep = (table["submit"] >= opts.start).to_numpy(copy=True)
    if opts.length is not None:
        keep &= (table["submit"] < opts.start + opts.length).to_numpy()
    dropped = {}
    rules = [
        ("running", lambda t: t["state"].isin(DROPPED_STATES)),
        ("no_duration", lambda t: t["duration"].isna()),
        ("zero_duration", lambda t: t["duration"] <= 0),
        ("cpu_only", lambda t: (t["gpus"] == 0) & opts.gpu_only),
    ]
    for reason, rule in rules:
        mask = rule(table).to_numpy() & keep
        dropped[reason] = int(mask.sum())
        keep &= ~mask
    if opts.sample < 1:
        rng = np.random.default_rng(opts.sample_seed)
        sampled = rng.random(int(keep.sum())) < opts.sample
        dropped["not_sampled"] = int((~sampled).sum())
        keep[np.flatnonzero(keep)[~sampled]] = False
    sub = table[keep]
    if not sub["submit"].is_monotonic_increasing:
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
        hint = (" (load_basis was removed: the offered load is always that of the runs on the "
                "G' GPUs every rule aims at, MappingOptions.start_rule)" if "load_basis" in unknown else "")
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
    columns, model_index = _map_columns(sub, opts, gpu, overhead, intra)
    # The frame takes the columns as they are (no second copy of the whole table at once: the
    # peak memory of a 1M-job mapping); those read from ``sub`` were copied by _map_columns, so
    # that the frame keeps none of ``sub``'s blocks alive.
    jobs_df = pd.DataFrame(columns, copy=False)
    del columns
    submit = (sub["submit"].to_numpy() - float(sub["submit"].min())) / opts.compression
    jobs_df.insert(2, "submit", submit)
    # The ideal runs the rules aim at: the executed work on G' GPUs (the start rule's target).
    load = offered_load(submit, jobs_df["run_s"].to_numpy(), jobs_df["stages"].to_numpy())
    if opts.capacity_scale is not None:
        scale = opts.capacity_scale
    elif opts.target_load is not None:
        # a small sample's average load may be below its largest job, which must start on all
        # of its min_gpus at once: the cluster's largest region then holds that job, at a lower
        # load than the target (an explicit capacity_scale or cluster is kept as given)
        scale = max(capacity_scale_for_load(load, base, opts.target_load),
                    capacity_scale_to_hold(int(jobs_df["min_gpus"].max()), base))
    else:
        scale = 1.0
    cluster = base.scaled(1.0, scale) if scale != 1.0 else base
    specs = _spec_table(jobs_df, model_index)
    name = f"trace:{Path(source).name}"
    scenario = Scenario(name, cluster, specs, overhead, opts.start_rule, opts.memory_model)
    jobs_df.attrs["source"] = source
    return MappedTrace(scenario, jobs_df, dropped, load, float(scale), source)


# The dtypes of the mapped table's columns of a few distinct labels (categories) and of its GPU
# and layer counts (int32), which _map_columns builds them in: about 110 B a job less than
# strings and int64 (a 1M-job trace's peak memory, docs/performance.md). The other columns are
# strings, float64 and objects.
FRAME_DTYPES = {
    "state": "category", "model": "category", "end_kind": "category",
    "user": "category", "vc": "category", "type": "category",
    **dict.fromkeys(("gpus", "max_gpus", "layers", "memory_min", "kstar", "min_gpus", "stages"), np.int32),
}


def _map_columns(sub: pd.DataFrame, opts: MappingOptions, gpu, overhead: float,
                 intra: float) -> tuple[dict, np.ndarray]:
    """The mapped jobs as columns (those of :func:`_map_row`, the per-job rules, in its order)
    and each job's index into ``catalog.MODELS``: the rules run once per GPU request and once
    per final state, then one gather per column, to the same numbers as :func:`_map_row`
    (tests/test_trace_mapping.py). No Python object per job: ids and names stay in pandas'
    string dtype, labels are categories; the planted failures' tuples only for the jobs that
    have them."""
    n = len(sub)
    # the frame's string dtype as it is (no Python string per job: building them was a fifth of
    # a 1M-job mapping); indexed only for an error's job id
    job_id = sub["job_id"].astype("str").reset_index(drop=True)
    gpus = sub["gpus"].to_numpy(dtype=np.int64)
    request = np.maximum(gpus, 1)  # CPU-only jobs reach here only with gpu_only=False: 1 GPU
    if int(request.max()) > np.iinfo(np.int32).max:  # the table's counts are int32 (FRAME_DTYPES)
        i = int(request.argmax())
        raise ValueError(f"job {job_id[i]!r}: requests {int(request[i])} GPUs, more than {np.iinfo(np.int32).max}")
    # per distinct request, in the order of each one's first job (an error names that job)
    which, requests = pd.factorize(request)
    first = _first_rows(which)
    per_request = [None] * requests.shape[0]
    for r in range(requests.shape[0]):
        model, kstar, mem_min, min_gpus, stages, t_iter = _request_plan(
            int(requests[r]), job_id[first[r]], opts, gpu, overhead, intra)
        per_request[r] = (catalog.MODELS.index(model), model.layers, mem_min, kstar, min_gpus, stages, t_iter)
    # gathered straight into their dtypes (the counts' as FRAME_DTYPES says), one array each
    counts = [FRAME_DTYPES[key] for key in ("layers", "memory_min", "kstar", "min_gpus", "stages")]
    model_i, layers, mem_min, kstar, min_gpus, stages, t_iter = (
        np.array(col, dtype=dtype)[which] for col, dtype in zip(
            zip(*per_request, strict=True), (np.int64, *counts, np.float64), strict=True)
    )
    # per distinct final state
    state = sub["state"].to_numpy(dtype=object)  # (a view where it can: read, not kept)
    state_i, states = pd.factorize(state)  # in order of first appearance
    states = np.asarray(states, dtype=object)
    ratios = [fate_rule(str(st), opts.early_end_fraction, opts.interrupted_fraction) for st in states]
    executed_ratio = np.array([e for e, _ in ratios])[state_i]
    configured_ratio = np.array([c for _, c in ratios])[state_i]
    fate = np.array([e / c for e, c in ratios])[state_i]
    end_kinds = np.array([end_kind_rule(str(st)) for st in states], dtype=object)
    duration = sub["duration"].to_numpy(dtype=np.float64, copy=True)
    bad = ~((duration > 0) & np.isfinite(duration) & (t_iter > 0) & np.isfinite(t_iter))
    if bad.any():
        i = int(np.argmax(bad))
        try:
            calibrated_iterations(float(duration[i]), float(t_iter[i]))
        except ValueError as err:
            raise ValueError(f"job {job_id[i]!r}: {err}") from None
    traced_iters = duration / t_iter  # calibrated_iterations
    executed = traced_iters * executed_ratio
    configured = traced_iters * configured_ratio
    # The ideal run (G' GPUs, one region) executes the traced run in exactly D seconds, so a
    # failure d_a seconds into an attempt is d_a x G' GPU-hours / 3600 into it.
    hours = np.full(n, None, dtype=object)
    if opts.trace_failures:
        tried = sub["num_attempts"].to_numpy() + (state == "NODE_FAIL") > 0
        attempts, fail_time = sub["attempts"].to_numpy(dtype=object), sub["fail_time"].to_numpy(dtype=np.float64)
        for i in np.flatnonzero(tried).tolist():
            points = failure_points(state[i], attempts[i], float(duration[i]), float(fail_time[i]))
            hours[i] = tuple(p * int(stages[i]) / 3600.0 for p in points[: opts.max_failures])
    names = _model_names()
    columns = {
        "job_id": job_id.array,
        "name": (job_id + pd.Series(("-" + names)[model_i], dtype="str")).array,
        "state": _categorical(states, state_i),
        "gpus": gpus.astype(FRAME_DTYPES["gpus"]),  # the trace's request (0: a CPU-only job)
        "max_gpus": request.astype(FRAME_DTYPES["max_gpus"]),  # JobSpec.max_gpus
        "model": _categorical(names, model_i),
        "layers": layers,  # the most stages pure PP can split it into
        "memory_min": mem_min,  # the fewest GPUs it fits on (geo_gym.memory)
        "kstar": kstar,
        "min_gpus": min_gpus,  # the fewest it may start on (the start rule's)
        "stages": stages,  # G': what every rule aims at (request: min(max_gpus, layers))
        "t_iter_s": t_iter,
        "duration_s": duration,
        "executed_iters": executed,
        "configured_iters": configured,  # JobSpec.iterations
        "fate_fraction": fate,
        "end_kind": _categorical(end_kinds, state_i),
        "run_s": executed * t_iter,  # the ideal run of the executed work
        "failure_gpu_hours": hours,
        **{key: _categorical(*_labels(sub[key])) for key in ("user", "vc", "type")},
    }
    return columns, model_i


def _labels(values) -> tuple[np.ndarray, np.ndarray]:
    """(distinct values, each row's index into them; -1 where missing), by ``pd.factorize``."""
    index, labels = pd.factorize(values)
    return labels, index


def _first_rows(index: np.ndarray) -> np.ndarray:
    """The first row of each value of ``pd.factorize``'s codes (which number the values in the
    order of their first rows, so the codes' running maximum rises exactly there)."""
    return np.flatnonzero(np.diff(np.maximum.accumulate(index), prepend=-1) > 0)


def _categorical(labels, index: np.ndarray) -> pd.Categorical:
    """``pd.Categorical(labels[index])`` (index -1: missing) without the per-job labels: the
    categories are the labels used, sorted, as pd.Categorical builds them from the values.
    Building them from a million strings was a third of a 1M-job mapping's time."""
    labels = np.asarray(labels, dtype=object)
    index = np.asarray(index, dtype=np.intp)  # (category codes may be int8: no overflow below)
    used = np.flatnonzero(np.bincount(index + 1, minlength=len(labels) + 1)[1:])  # labels some row has
    used = used[pd.notna(labels[used])]
    categories = np.unique(labels[used])  # sorted, a label listed twice once
    code_of = np.full(len(labels) + 1, -1, dtype=np.int64)  # its last entry is index -1's: missing
    code_of[used] = np.searchsorted(categories, labels[used])
    return pd.Categorical.from_codes(code_of[index], categories=pd.Index(categories))


@lru_cache(maxsize=1)
def _model_names() -> np.ndarray:
    return np.array([m.name for m in catalog.MODELS], dtype=object)


def _spec_table(jobs: pd.DataFrame, model_index: np.ndarray) -> workload.SpecTable:
    """The scenario's jobs as columns (``workload.SpecTable``): the JobSpecs :func:`_job_spec`
    builds, one per row of the mapped table, without building them."""
    def text(column: str) -> tuple[np.ndarray, np.ndarray]:
        """A category column as (labels, per-job index), missing (None) -> "" as `row[...] or ""`."""
        values = jobs[column].array
        labels = np.append(np.asarray(values.categories, dtype=object), "")
        return labels, np.where(values.codes < 0, len(labels) - 1, values.codes)

    def per_distinct(rule, *columns: tuple[np.ndarray, np.ndarray]) -> pd.Categorical:
        """rule(*labels) for each row, computed once per distinct combination of labels."""
        key = np.zeros(len(jobs), dtype=np.int64)
        for labels, index in columns:
            key = key * len(labels) + index
        which, _ = pd.factorize(key)
        values = [rule(*(labels[index[i]] for labels, index in columns)) for i in _first_rows(which).tolist()]
        return _categorical(values, which)

    vc, typ = text("vc"), text("type")
    task = per_distinct(lambda t: (t or "train").lower(), typ)
    label = per_distinct(lambda v, t, m: " ".join(x for x in (v, t) if x) or m, vc, typ, text("model"))
    # a few distinct strings per column: categories (1-2 B a job) rather than object arrays (8)
    user, vc, typ = (_categorical(*c) for c in (text("user"), vc, typ))
    hours = jobs["failure_gpu_hours"].to_numpy(dtype=object)
    planted = {i: hours[i] for i in np.flatnonzero(pd.notna(hours)).tolist()}
    max_gpus = jobs["max_gpus"].to_numpy(dtype=np.int64)  # one int64 copy, for both uses
    kinds = jobs["end_kind"].array  # categories; code -1 where no end kind (END_UNKNOWN)
    kind_codes = [workload.END_KINDS.get(k, workload.END_UNKNOWN) for k in kinds.categories] + [workload.END_UNKNOWN]
    return workload.SpecTable(
        name=jobs["name"].array,
        model=model_index,
        submit=jobs["submit"].to_numpy(dtype=np.float64),
        iterations=jobs["configured_iters"].to_numpy(dtype=np.float64),
        max_gpus=max_gpus,
        dataset=TRACE_DATASET,
        fate_fraction=jobs["fate_fraction"].to_numpy(dtype=np.float64),
        end_kind=np.array(kind_codes, np.int64)[kinds.codes],
        failure_gpu_hours=planted,
        metadata={
            "user": user,
            "vc": vc,
            "type": typ,
            "task": task,
            "gpus": max_gpus,
            "name": label,
            "trace_id": jobs["job_id"].array,
        },
    )


def _request_plan(request: int, job_id, opts: MappingOptions, gpu, overhead: float, intra: float) -> tuple:
    """What a GPU request maps to: (model, K*, memory minimum, min GPUs, stages G', ideal
    iteration time); G' under the start rule: request -> min(request, layers), others ->
    min(request, K*). An error names ``job_id``."""
    try:
        model = size_class(request, gpu, opts.memory_model)
        kstar, mem_min, min_gpus, stages = gpu_plan(
            model, request, gpu, overhead, intra, opts.memory_model, opts.start_rule
        )
    except ValueError as err:
        raise ValueError(f"job {job_id!r}: {err}") from None
    return model, kstar, mem_min, min_gpus, stages, ideal_iteration_time(model, stages, gpu, overhead, intra)


def _map_row(r, opts: MappingOptions, gpu, overhead: float, intra: float) -> dict:
    """One job by the rules, one call each: the reference that :func:`_map_columns` is tested
    against (tests/test_trace_mapping.py)."""
    request = max(int(r.gpus), 1)  # CPU-only jobs reach here only with gpu_only=False: 1 GPU
    model, kstar, mem_min, min_gpus, stages, t_iter = _request_plan(request, r.job_id, opts, gpu, overhead, intra)
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
        "layers": model.layers,  # the most stages pure PP can split it into
        "memory_min": mem_min,  # the fewest GPUs it fits on (geo_gym.memory)
        "kstar": kstar,
        "min_gpus": min_gpus,  # the fewest it may start on (the start rule's)
        "stages": stages,  # G': what every rule aims at (request: min(max_gpus, layers))
        "t_iter_s": t_iter,
        "duration_s": duration,
        "executed_iters": executed,
        "configured_iters": configured,  # JobSpec.iterations
        "fate_fraction": executed_ratio / configured_ratio,
        "end_kind": end_kind_rule(r.state),
        "run_s": executed * t_iter,  # the ideal run of the executed work
        "failure_gpu_hours": hours,
        "user": r.user,
        "vc": r.vc,
        "type": r.type,
    }


def _job_spec(row: dict, submit: float) -> JobSpec:
    """Job ``row`` of :func:`_map_row` as a JobSpec: the reference for :func:`_spec_table`."""
    model = catalog.model_by_name(row["model"])
    return JobSpec(
        name=row["name"],
        model=model,
        dataset=TRACE_DATASET,
        submit=float(submit),
        iterations=row["configured_iters"],
        max_gpus=row["max_gpus"],
        fate_fraction=row["fate_fraction"],
        end_kind=row["end_kind"],
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

    ``start_rule``: the scenario's (``MappingOptions.start_rule``); ``models``: jobs per model
    (:func:`size_class`); ``gpus_per_job_target``: mean G', the GPUs the rules aim at;
    ``capped_at_layers``: jobs that asked for more GPUs than their model has layers (pure PP:
    at most one stage per layer; under ``request`` they run on ``layers`` GPUs);
    ``below_request``: jobs whose G' is below their request under the start rule (under
    ``request`` exactly the layer-capped ones, otherwise also those above K*);
    ``share_shorter_than_one_iteration``: jobs whose traced run is a fraction of one iteration
    (they run that fraction); ``target_over_requested_gpu_seconds``: the ideal runs' GPU-seconds
    over the trace's (request x traced run), below 1 only through ``below_request``;
    ``executed_gpu_hours``: what the ideal runs execute (interrupted jobs run their whole work);
    ``early_ends``, split into ``application_failures`` and ``cancellations`` (:func:`end_kind_rule`);
    ``load_over_capacity``: the offered load over the scaled cluster (below ``target_load``
    where the cluster was enlarged to hold the largest job)."""
    j = mapped.jobs
    planted = [len(h) for h in j["failure_gpu_hours"] if h]
    traced_gpu_s = (j["max_gpus"] * j["duration_s"]).sum()
    cluster_gpus = mapped.scenario.cluster.total_gpus
    return {
        "jobs": len(j),
        "dropped": mapped.dropped,
        "start_rule": str(mapped.scenario.start_rule),
        "requested_gpus_per_job": float(j["max_gpus"].mean()),
        "gpus_per_job_target": float(j["stages"].mean()),
        "capped_at_layers": int((j["max_gpus"] > j["layers"]).sum()),
        "below_request": int((j["stages"] < j["max_gpus"]).sum()),
        "models": j["model"].value_counts().to_dict(),
        "median_iterations": float(j["executed_iters"].median()),
        "share_shorter_than_one_iteration": float((j["duration_s"] < j["t_iter_s"]).mean()),
        "target_over_requested_gpu_seconds": float((j["stages"] * j["duration_s"]).sum() / traced_gpu_s),
        "executed_gpu_hours": float((j["stages"] * j["run_s"]).sum() / 3600.0),
        "early_ends": int((j["fate_fraction"] < 1).sum()),
        "application_failures": int((j["end_kind"] == "application_failure").sum()),
        "cancellations": int((j["end_kind"] == "cancelled").sum()),
        "jobs_with_planted_failures": len(planted),
        "planted_failures": int(sum(planted)),
        "offered_load_gpus": mapped.offered_load_gpus,
        "capacity_scale": mapped.capacity_scale,
        "cluster_gpus": cluster_gpus,
        "load_over_capacity": mapped.offered_load_gpus / cluster_gpus,
    }
