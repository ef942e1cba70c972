"""Pipeline-parallel training jobs and the per-job quantities of the cost model.

A ``JobSpec`` is what a user submits (model, dataset, batch settings, submit time); a
``JobProfile`` is what BACE-Pipe's Job Parser extracts from it for a given GPU type and
cluster: t_comp's work term, M_j, I_j, A_j, K* (Eq. 13), E_j(1) (Eq. 9's numerator).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import lru_cache

import numba
import numpy as np

from geo_gym import catalog, costmodel, memory
from geo_gym.catalog import DatasetSpec, GPUType, ModelSpec
from geo_gym.memory import MemoryModel
from geo_gym.start_rule import StartRule, gpu_bounds

# The latest submit time a job may have, in seconds (1e15 s: about 31.7 million years). The
# clock is a float64 of seconds: at 1e15 s its spacing is 0.125 s, so event times and JCTs
# still resolve to an eighth of a second; much beyond it a job's run vanishes in the sum
# (1e300 + 3600 == 1e300: a JCT of 0) and the spacing soon exceeds any run. Loading also
# refuses a job whose own ideal run is lost when added to its submit time
# (``geo_gym.loading``). Real traces span months (~1e7 s); inf and NaN are refused too.
MAX_SUBMIT_S = 1e15

# How a job that ends early ends (``JobSpec.end_kind``), as the core holds it (``end_kind``):
# an application failure (a crash of the user's code, which the failure handler sees and may
# misjudge as infrastructure, SchedMate 3.3) or a cancellation (the user or a time limit
# stopped it; no failure for the handler to judge). 0: not given, drawn against
# ``UncertaintyConfig.application_failure_share`` when the job ends early.
END_UNKNOWN, END_APPLICATION_FAILURE, END_CANCELLED = 0, 1, 2
END_KINDS = {"application_failure": END_APPLICATION_FAILURE, "cancelled": END_CANCELLED}


@dataclass(frozen=True)
class JobSpec:
    name: str
    model: ModelSpec
    dataset: DatasetSpec
    submit: float = 0.0  # seconds
    epochs: float = catalog.DEFAULT_EPOCHS
    seq_len: int = catalog.DEFAULT_SEQ_LEN
    micro_batch: int = catalog.DEFAULT_MICRO_BATCH
    min_gpus: int = 1
    # Fraction of its configured work the job will run before it ends (1 = completes). None:
    # drawn from the uncertainty configuration's early-end rate. Hidden from schedulers.
    fate_fraction: float | None = None
    # SchedMate-style metadata (user, task, ...) for duration predictors; free-form strings.
    metadata: dict = field(default_factory=dict, compare=False)
    # Trace-driven infrastructure failures (traces/mapping.py): attempt a fails after holding
    # its GPUs for failure_gpu_hours[a] GPU-hours, later attempts never fail. None: the
    # uncertainty configuration's random failure process applies (geo_gym/loading.py).
    failure_gpu_hours: tuple[float, ...] | None = None
    # The GPUs the user asked for (trace jobs): every placement rule then aims at
    # min(K*, max_gpus) instead of K*. None: K* (the paper's cap, IV-A).
    max_gpus: int | None = None
    # The configured iteration count I_j, overriding epochs x samples / batch (Table I). Trace
    # jobs calibrated to a traced run time use it; it may be fractional (a job shorter than
    # one iteration of its model). None: whole iterations from the dataset and epochs.
    iterations: float | None = None
    # How it ends if it ends early: "application_failure" or "cancelled" (END_KINDS; trace
    # jobs take it from their final state). None: drawn (UncertaintyConfig.
    # application_failure_share). Hidden from schedulers; only the failure handler reads it.
    end_kind: str | None = None

    def __post_init__(self) -> None:
        if not self.submit >= 0:
            raise ValueError(f"JobSpec {self.name!r}: submit must be >= 0, got {self.submit!r}")
        if not self.submit <= MAX_SUBMIT_S:
            raise ValueError(
                f"JobSpec {self.name!r}: submit {self.submit!r} s is beyond {MAX_SUBMIT_S:g} s "
                "(~31.7 million years), where float64 seconds no longer resolve run times"
            )
        if not self.epochs > 0:
            raise ValueError(f"JobSpec {self.name!r}: epochs must be > 0, got {self.epochs!r}")
        for f in ("seq_len", "micro_batch", "min_gpus"):
            v = getattr(self, f)
            if int(v) != v or v < 1:
                raise ValueError(f"JobSpec {self.name!r}: {f} must be an integer >= 1, got {v!r}")
        if self.fate_fraction is not None and not 0 < self.fate_fraction <= 1:
            raise ValueError(
                f"JobSpec {self.name!r}: fate_fraction must be in (0, 1], got {self.fate_fraction!r}"
            )
        if self.end_kind is not None and self.end_kind not in END_KINDS:
            raise ValueError(
                f"JobSpec {self.name!r}: end_kind must be one of {list(END_KINDS)} or None, "
                f"got {self.end_kind!r}"
            )
        if self.failure_gpu_hours is not None:  # a tuple, so that the spec stays hashable
            object.__setattr__(self, "failure_gpu_hours", tuple(self.failure_gpu_hours))
        if self.failure_gpu_hours is not None and not all(
            isinstance(h, int | float) and 0 <= h < float("inf") for h in self.failure_gpu_hours
        ):
            raise ValueError(
                f"JobSpec {self.name!r}: failure_gpu_hours must be finite GPU-hours >= 0, "
                f"got {self.failure_gpu_hours!r}"
            )
        if self.max_gpus is not None and (
            isinstance(self.max_gpus, bool) or int(self.max_gpus) != self.max_gpus
            or self.max_gpus < self.min_gpus
        ):
            raise ValueError(
                f"JobSpec {self.name!r}: max_gpus must be an integer >= min_gpus "
                f"({self.min_gpus}), got {self.max_gpus!r}"
            )
        if self.iterations is not None and not 0 < self.iterations < float("inf"):
            raise ValueError(
                f"JobSpec {self.name!r}: iterations must be a finite number > 0, got {self.iterations!r}"
            )
        if self.micro_batch > self.model.batch_size:
            raise ValueError(
                f"JobSpec {self.name!r}: micro_batch {self.micro_batch} exceeds the batch size "
                f"{self.model.batch_size}"
            )


@dataclass(frozen=True)
class JobProfile:
    """Derived quantities of one job on one GPU type (all seconds / Gbit)."""

    work: float  # forward seconds of one micro-batch on one GPU; t_comp(L) = work / L + overhead
    stage_overhead: float
    num_microbatches: int  # M_j
    iterations: float  # I_j
    activation_gbit: float  # A_j
    k_star: int  # Eq. (13) over the stage counts the start rule allows
    e1: float  # E_j(1), Eq. (2) on one GPU
    ideal_duration: float  # E_j(k_target) inside one region
    k_target: int  # the GPUs every rule aims at (geo_gym.start_rule.gpu_bounds)
    min_gpus: int = 1  # the fewest GPUs it may start on: start rule, memory and JobSpec.min_gpus
    memory_min: int = 1  # the fewest GPUs its model fits on (geo_gym.memory); 1 under "any"

    def t_comp(self, num_stages: int) -> float:
        return costmodel.t_comp(self.work, num_stages, self.stage_overhead)

    def b_j(self, num_stages: int) -> float:
        """Minimum bandwidth on every crossed link (Eq. 6)."""
        return costmodel.min_bandwidth(self.activation_gbit, self.t_comp(num_stages))


DEFAULT_MEMORY = MemoryModel()
DEFAULT_START_RULE = StartRule()


def profile(
    job: JobSpec,
    gpu: GPUType = catalog.A6000,
    stage_overhead: float = catalog.DEFAULT_STAGE_OVERHEAD_S,
    intra_gbps: float = catalog.DEFAULT_INTRA_REGION_GBPS,
    memory_model: MemoryModel = DEFAULT_MEMORY,
    start_rule: StartRule | str = DEFAULT_START_RULE,
) -> JobProfile:
    rule = StartRule.parse(start_rule)
    work, mb, act, ks, t1, target, tk, min_g, mem_min = _shared_profile(
        job, gpu, stage_overhead, intra_gbps, memory_model, rule
    )[:9]
    if job.iterations is not None:
        iters = float(job.iterations)
    else:
        iters = costmodel.num_iterations(job.dataset.samples, job.model.batch_size, job.epochs)
    return JobProfile(
        work, stage_overhead, mb, iters, act, ks, iters * t1, iters * tk, target, min_g, mem_min
    )


# Everything but the iteration count depends on the model and batch settings only, so
# workloads with jittered epochs or trace-calibrated lengths share one K* scan per model.
@lru_cache(maxsize=4096)
def _per_iteration(
    m: ModelSpec, seq_len: int, micro_batch: int, gpu: GPUType, stage_overhead: float, intra_gbps: float,
    memory_model: MemoryModel | None = None,
) -> tuple[float, int, float, int, float, float, int]:
    """(work, M_j, A_j, K*, t_iter on 1 GPU, t_iter on K* GPUs in one region, memory minimum).
    With a memory model K* is the argmin over the counts the model fits on; without one
    (start rule "any") over 1..layers and the minimum is 1. A minimum of 0: the model does not
    fit even at one layer per GPU (K* is then over 1..layers, and loading refuses the job)."""
    work = costmodel.stage_work(m.params, micro_batch * seq_len, gpu.effective_flops)
    mb = costmodel.num_microbatches(m.batch_size, micro_batch)
    act = costmodel.activation_gbit(micro_batch, seq_len, m.hidden, catalog.BYTES_PER_ACTIVATION)
    mem_min = 1
    if memory_model is not None:
        mem_min = memory.min_stages(memory_model, m.params, m.layers, m.hidden, mb, micro_batch * seq_len, gpu.memory_gb)
    ks = costmodel.k_star(work, mb, act, intra_gbps, stage_overhead, m.layers, max(mem_min, 1))
    t1 = costmodel.single_region_iteration_time(work, 1, act, intra_gbps, stage_overhead, mb)
    tk = costmodel.single_region_iteration_time(work, ks, act, intra_gbps, stage_overhead, mb)
    return work, mb, act, ks, t1, tk, mem_min


@lru_cache(maxsize=4096)
def _t_iter_single_region(
    m: ModelSpec, seq_len: int, micro_batch: int, gpu: GPUType, stage_overhead: float,
    intra_gbps: float, k: int,
) -> float:
    """Eq. (1) on k GPUs in one region (a job whose target is not K*)."""
    work, mb, act, *_ = _per_iteration(m, seq_len, micro_batch, gpu, stage_overhead, intra_gbps)
    return costmodel.single_region_iteration_time(work, k, act, intra_gbps, stage_overhead, mb)


@lru_cache(maxsize=256, typed=True)  # typed: 1, True and 1.0 are equal keys otherwise
def constant(n: int, value: bool | int | float) -> np.ndarray:
    """A read-only length-n column of ``value`` (bool, int64 or float64 after its type), built
    once per (n, value): built-in scenarios fill the same default columns every episode."""
    dtype = np.bool_ if isinstance(value, bool) else np.int64 if isinstance(value, int) else np.float64
    out = np.full(n, value, dtype=dtype)
    out.setflags(write=False)
    return out


@numba.njit(cache=True)
def _first_bad_row(model, dataset, submit, epochs, fate, n_models, n_datasets):
    """The first row a JobTable cannot hold (-1: none); one compiled pass, since built-in
    scenarios build a table per episode."""
    for i in range(model.shape[0]):
        if not (
            0 <= model[i] < n_models
            and 0 <= dataset[i] < n_datasets
            and 0 <= submit[i] <= MAX_SUBMIT_S
            and (i == 0 or submit[i] >= submit[i - 1])
            and epochs[i] > 0
            and (np.isnan(fate[i]) or 0 < fate[i] <= 1)
        ):
            return i
    return -1


class JobTable(Sequence):
    """A workload of catalog jobs (Table III models and datasets, default batch settings) held
    as columns, in submit order. It behaves as the tuple of ``JobSpec`` it stands for, built on
    first access; loading reads the columns, so an episode of a built-in scenario starts
    without building one object per job (``geo_gym/scenarios.py``).

    ``fate_fraction`` is NaN where none is given. ``user``/``template`` (-1: none) become the
    metadata ``{"user": "user<u>", "name": "template<t>"}``. Names come from ``name_format``
    with ``i`` (1-based), ``model``, ``user`` and ``template``."""

    def __init__(
        self,
        model,
        dataset,
        submit,
        epochs,
        fate_fraction=None,
        user=None,
        template=None,
        name_format: str = "job{i}",
    ):
        self.model = np.asarray(model, dtype=np.int64)
        n = self.model.shape[0]
        self.dataset = np.asarray(dataset, dtype=np.int64)
        self.submit = np.asarray(submit, dtype=np.float64)
        self.epochs = np.asarray(epochs, dtype=np.float64)
        self.fate_fraction = constant(n, np.nan) if fate_fraction is None else np.asarray(fate_fraction, np.float64)
        self.user = constant(n, -1) if user is None else np.asarray(user, np.int64)
        self.template = constant(n, -1) if template is None else np.asarray(template, np.int64)
        self.name_format = name_format
        for col in ("dataset", "submit", "epochs", "fate_fraction", "user", "template"):
            if getattr(self, col).shape != (n,):
                raise ValueError(f"JobTable.{col} has shape {getattr(self, col).shape}, expected ({n},)")
        bad = _first_bad_row(
            self.model, self.dataset, self.submit, self.epochs, self.fate_fraction,
            len(catalog.MODELS), len(catalog.PAPER_DATASETS),
        )
        if bad >= 0 and float(self.submit[bad]) > MAX_SUBMIT_S and 0 <= self.model[bad] < len(catalog.MODELS):
            name = self._name(bad, catalog.MODELS[self.model[bad]].name, int(self.user[bad]), int(self.template[bad]))
            raise ValueError(
                f"JobTable row {bad} (job {name!r}): submit {float(self.submit[bad])!r} s is beyond "
                f"{MAX_SUBMIT_S:g} s (~31.7 million years), where float64 seconds no longer resolve "
                "run times"
            )
        if bad >= 0:
            raise ValueError(
                f"JobTable row {bad}: model {self.model[bad]} (0..{len(catalog.MODELS) - 1}), "
                f"dataset {self.dataset[bad]} (0..{len(catalog.PAPER_DATASETS) - 1}), submit "
                f"{self.submit[bad]} (>= 0, <= {MAX_SUBMIT_S:g}, non-decreasing), epochs {self.epochs[bad]} (> 0), "
                f"fate_fraction {self.fate_fraction[bad]} (NaN or in (0, 1])"
            )
        self._specs: tuple[JobSpec, ...] | None = None

    def specs(self) -> tuple[JobSpec, ...]:
        """The jobs as ``JobSpec`` objects (validated as any JobSpec), built once."""
        if self._specs is None:
            self._specs = tuple(self.spec(i) for i in range(len(self)))
        return self._specs

    def spec(self, i: int) -> JobSpec:
        """Job i as a ``JobSpec``, built without the others."""
        m = catalog.MODELS[self.model[i]]
        u, t = int(self.user[i]), int(self.template[i])
        fate = float(self.fate_fraction[i])
        return JobSpec(
            name=self._name(i, m.name, u, t),
            model=m,
            dataset=catalog.PAPER_DATASETS[self.dataset[i]],
            submit=float(self.submit[i]),
            epochs=float(self.epochs[i]),
            fate_fraction=None if np.isnan(fate) else fate,
            metadata={"user": f"user{u}", "name": f"template{t}"} if t >= 0 else {},
        )

    def _name(self, i: int, model: str, user: int, template: int) -> str:
        return self.name_format.format(i=i + 1, model=model, user=user, template=template)

    def __len__(self) -> int:
        return self.model.shape[0]

    def __getitem__(self, i):
        return self.specs()[i]

    def __eq__(self, other) -> bool:
        if isinstance(other, JobTable | tuple | list):
            return tuple(self) == tuple(other)
        return NotImplemented

    def __hash__(self) -> int:
        return hash(self.specs())

    def __repr__(self) -> str:
        return f"JobTable({len(self)} catalog jobs)"


def _item(value):
    """A numpy scalar as the Python number a JobSpec field holds; anything else as it is."""
    return value.item() if isinstance(value, np.generic) else value


class SpecTable(Sequence):
    """A workload of jobs with explicit iteration counts and GPU requests (trace jobs,
    ``traces.mapping``) held as columns, in submit order. It behaves as the tuple of
    ``JobSpec`` it stands for (job i built on access, ``spec(i)``, never kept); loading,
    profiling and the result table read the columns, so a trace of millions of jobs is mapped,
    loaded and tabulated without one Python object per job.

    Columns (length n): ``name`` (strings), ``model`` (index into ``catalog.MODELS``),
    ``submit`` (non-decreasing), ``iterations`` (``JobSpec.iterations``), ``max_gpus``,
    ``fate_fraction`` (NaN: none given), ``end_kind`` (``END_*`` codes); ``dataset``: one
    ``DatasetSpec`` for every job; ``failure_gpu_hours``: {row: tuple} of the jobs with planted
    failures (every other job: None); ``metadata``: {key: column}, job i's metadata
    ``{key: column[i]}``. The batch settings, epochs and ``min_gpus`` are JobSpec's defaults.
    Every column is checked as JobSpec checks its field (ValueError naming the job)."""

    def __init__(
        self,
        name: Sequence[str],
        model,
        submit,
        iterations,
        max_gpus,
        dataset: DatasetSpec,
        fate_fraction=None,
        end_kind=None,
        failure_gpu_hours: dict[int, tuple] | None = None,
        metadata: dict[str, Sequence] | None = None,
    ):
        self.model = np.asarray(model, dtype=np.int64)
        n = self.model.shape[0]
        self.name = name
        self.submit = np.asarray(submit, dtype=np.float64)
        self.iterations = np.asarray(iterations, dtype=np.float64)
        self.max_gpus = np.asarray(max_gpus, dtype=np.int64)
        self.dataset = dataset
        self.fate_fraction = np.full(n, np.nan) if fate_fraction is None else np.asarray(fate_fraction, np.float64)
        self.end_kind = np.zeros(n, np.int64) if end_kind is None else np.asarray(end_kind, np.int64)
        self.failure_gpu_hours = dict(failure_gpu_hours or {})
        self.metadata = dict(metadata or {})
        for col, values in [("name", name), *((f"metadata[{k!r}]", v) for k, v in self.metadata.items())]:
            if len(values) != n:
                raise ValueError(f"SpecTable.{col} has {len(values)} rows, expected {n}")
        for col in ("submit", "iterations", "max_gpus", "fate_fraction", "end_kind"):
            if getattr(self, col).shape != (n,):
                raise ValueError(f"SpecTable.{col} has shape {getattr(self, col).shape}, expected ({n},)")
        if not ((0 <= self.model) & (self.model < len(catalog.MODELS))).all():
            raise ValueError(f"SpecTable.model: indexes into catalog.MODELS (0..{len(catalog.MODELS) - 1})")
        bad = ~(
            (self.submit >= 0) & (self.submit <= MAX_SUBMIT_S)
            & (self.iterations > 0) & (self.iterations < np.inf)
            & (self.max_gpus >= 1)
            & (np.isnan(self.fate_fraction) | ((self.fate_fraction > 0) & (self.fate_fraction <= 1)))
            & np.isin(self.end_kind, (END_UNKNOWN, *END_KINDS.values()))
        )
        bad[1:] |= self.submit[1:] < self.submit[:-1]
        for row, hours in self.failure_gpu_hours.items():
            if not 0 <= row < n:
                raise ValueError(f"SpecTable.failure_gpu_hours: row {row} is not one of the {n} jobs")
            self.failure_gpu_hours[row] = tuple(hours)
        batch = np.array([m.batch_size for m in catalog.MODELS])
        bad |= batch[self.model] < catalog.DEFAULT_MICRO_BATCH
        if bad.any():
            i = int(np.argmax(bad))
            if i and self.submit[i] < self.submit[i - 1]:
                raise ValueError(f"SpecTable row {i} (job {self.name[i]!r}): submit times must not decrease")
            self.spec(i)  # JobSpec's own error
            raise ValueError(f"SpecTable row {i} (job {self.name[i]!r}): not a valid job")  # not reached
        for row in self.failure_gpu_hours:
            self.spec(row)  # checks the planted failures as JobSpec does

    @property
    def planted(self) -> np.ndarray:
        """Jobs with trace-driven failures (``failure_gpu_hours`` not None), as a bool column."""
        out = np.zeros(len(self), dtype=bool)
        out[list(self.failure_gpu_hours)] = True
        return out

    def spec(self, i: int) -> JobSpec:
        """Job i as a ``JobSpec`` (built each time; the table keeps none)."""
        fate = float(self.fate_fraction[i])
        kind = int(self.end_kind[i])
        return JobSpec(
            name=self.name[i],
            model=catalog.MODELS[self.model[i]],
            dataset=self.dataset,
            submit=float(self.submit[i]),
            iterations=float(self.iterations[i]),
            max_gpus=int(self.max_gpus[i]),
            fate_fraction=None if np.isnan(fate) else fate,
            end_kind=next((k for k, v in END_KINDS.items() if v == kind), None),
            failure_gpu_hours=self.failure_gpu_hours.get(i),
            metadata={key: _item(col[i]) for key, col in self.metadata.items()},
        )

    def __len__(self) -> int:
        return self.model.shape[0]

    def __getitem__(self, i):
        if isinstance(i, slice):
            return tuple(self.spec(j) for j in range(len(self))[i])
        i = int(i)
        if not -len(self) <= i < len(self):
            raise IndexError(f"job {i} of a SpecTable of {len(self)} jobs")
        return self.spec(i % len(self))

    def __eq__(self, other) -> bool:
        if isinstance(other, SpecTable | JobTable | tuple | list):
            return len(self) == len(other) and tuple(self) == tuple(other)
        return NotImplemented

    def __hash__(self) -> int:
        return hash(tuple(self))

    def __repr__(self) -> str:
        return f"SpecTable({len(self)} jobs)"


def label_columns(jobs: Sequence[JobSpec], arrays: bool = False) -> dict[str, list[str]]:
    """Each job's name, model name and dataset name, as lists (result tables). A ``JobTable``
    or ``SpecTable`` answers without building JobSpecs, with the names its JobSpecs would
    have; with ``arrays``, a SpecTable's columns come as arrays (its own name column, object
    arrays of the shared model and dataset names), without a Python string per job."""
    if isinstance(jobs, SpecTable):
        columns = {
            "name": jobs.name,
            "model": _model_names()[jobs.model],
            "dataset": np.full(len(jobs), jobs.dataset.name, dtype=object),
        }
        if arrays:
            return columns
        return {key: col.tolist() if hasattr(col, "tolist") else list(col) for key, col in columns.items()}
    if isinstance(jobs, JobTable):
        models = [catalog.MODELS[m].name for m in jobs.model.tolist()]
        rows = zip(models, jobs.user.tolist(), jobs.template.tolist(), strict=True)
        return {
            "name": [jobs._name(i, m, u, t) for i, (m, u, t) in enumerate(rows)],
            "model": models,
            "dataset": [catalog.PAPER_DATASETS[d].name for d in jobs.dataset.tolist()],
        }
    return {
        "name": [job.name for job in jobs],
        "model": [job.model.name for job in jobs],
        "dataset": [job.dataset.name for job in jobs],
    }


@lru_cache(maxsize=1)
def _model_names() -> np.ndarray:
    """catalog.MODELS' names as an object array (a model column's names by one lookup)."""
    return np.array([m.name for m in catalog.MODELS], dtype=object)


def spec_columns(jobs: Sequence[JobSpec]) -> dict[str, np.ndarray]:
    """The per-job settings loading needs, as columns: submit, min_gpus, fate_fraction (NaN:
    none given), end_kind (END_* codes; END_UNKNOWN: none given), whole (runs whole
    iterations: no explicit ``iterations``), planted (has trace-driven ``failure_gpu_hours``).
    A ``JobTable`` answers without building JobSpecs (its jobs give no end kind)."""
    n = len(jobs)
    if isinstance(jobs, SpecTable):  # fresh columns: a long trace's are not kept after its run
        return {
            "submit": jobs.submit, "min_gpus": np.ones(n, np.int64), "fate_fraction": jobs.fate_fraction,
            "end_kind": jobs.end_kind, "whole": np.zeros(n, bool), "planted": jobs.planted,
        }
    if isinstance(jobs, JobTable):
        return {
            "submit": jobs.submit, "min_gpus": constant(n, 1), "fate_fraction": jobs.fate_fraction,
            "end_kind": constant(n, END_UNKNOWN), "whole": constant(n, True), "planted": constant(n, False),
        }
    return {
        "submit": np.array([j.submit for j in jobs], dtype=np.float64),
        "min_gpus": np.array([j.min_gpus for j in jobs], dtype=np.int64),
        "fate_fraction": np.array([np.nan if j.fate_fraction is None else j.fate_fraction for j in jobs], dtype=float),
        "end_kind": np.array([END_KINDS.get(j.end_kind, END_UNKNOWN) for j in jobs], dtype=np.int64),
        "whole": np.array([j.iterations is None for j in jobs], dtype=bool),
        "planted": np.array([j.failure_gpu_hours is not None for j in jobs], dtype=bool),
    }


@lru_cache(maxsize=64)
def _catalog_table(
    gpu: GPUType, stage_overhead: float, intra_gbps: float, memory_model: MemoryModel, rule: StartRule
) -> tuple[np.ndarray, ...]:
    """Per catalog model: (work, M_j, A_j, t_iter(1), k_target, t_iter(k_target), min GPUs,
    b_j(k_target), batch size; memory minimum 0 where the model does not fit), and per catalog
    dataset its samples; the per-job numbers of a JobTable are lookups into these."""
    rows = []
    for m in catalog.MODELS:
        try:
            rows.append(_bounded(m, catalog.DEFAULT_SEQ_LEN, catalog.DEFAULT_MICRO_BATCH, None, 1,
                                 gpu, stage_overhead, intra_gbps, memory_model, rule))
        except ValueError:  # a model that never fits: refused when a job uses it (profile_columns)
            rows.append((np.nan, 1, np.nan, np.nan, 0, np.nan, 0, np.nan))
    work, mb, act, t1, target, tk, min_g, b_ref = (np.array(col) for col in zip(*rows, strict=True))
    batch = np.array([m.batch_size for m in catalog.MODELS], dtype=np.float64)
    samples = np.array([d.samples for d in catalog.PAPER_DATASETS], dtype=np.float64)
    out = (work, mb.astype(np.int64), act, t1, target.astype(np.int64), tk, min_g.astype(np.int64), b_ref, batch, samples)
    for a in out:
        a.setflags(write=False)  # shared by every episode
    return out


@numba.njit(cache=True)
def catalog_iterations(model, dataset, epochs, samples, batch, t1, tk):
    """(I_j, t_iter on 1 GPU, t_iter on k_target GPUs) of catalog jobs, from ``_catalog_table``'s
    per-model ``batch``, ``t1``, ``tk`` and per-dataset ``samples``: I_j as
    ``costmodel.num_iterations``, the times as e1 / I and E(K*) / I are computed in
    ``JobProfile``, so that the bits agree (also ``geo_gym.compiled_reset``'s)."""
    n = model.shape[0]
    iters, t1_j, tk_j = np.empty(n), np.empty(n), np.empty(n)
    for i in range(n):
        m = model[i]
        iters[i] = np.ceil(epochs[i] * samples[dataset[i]] / batch[m])
        t1_j[i] = iters[i] * t1[m] / iters[i]
        tk_j[i] = iters[i] * tk[m] / iters[i]
    return iters, t1_j, tk_j


def profile_columns(
    jobs: Sequence[JobSpec],
    gpu: GPUType = catalog.A6000,
    stage_overhead: float = catalog.DEFAULT_STAGE_OVERHEAD_S,
    intra_gbps: float = catalog.DEFAULT_INTRA_REGION_GBPS,
    memory_model: MemoryModel = DEFAULT_MEMORY,
    start_rule: StartRule | str = DEFAULT_START_RULE,
) -> dict[str, np.ndarray]:
    """What the simulator core needs of each job's ``profile``, as columns: work, mb, act,
    iterations (I_j), k_target, min_gpus, b_ref (b_j at k_target), t1 and tk (t_iter on 1 and
    on k_target GPUs in one region). A ``JobTable`` is profiled per model, without a JobSpec
    per job, to the very same numbers. A job the start rule cannot hold (a model too large for
    the GPU even at one layer per GPU, a request below the memory minimum) is a ValueError
    naming the job, its model and the GPU."""
    rule = StartRule.parse(start_rule)
    if isinstance(jobs, JobTable):
        work, mb, act, t1, target, tk, min_g, b_ref, batch, samples = _catalog_table(
            gpu, stage_overhead, intra_gbps, memory_model, rule
        )
        m = jobs.model
        unfit = min_g[m] == 0
        if unfit.any():
            i = int(np.argmax(unfit))
            _bounded(catalog.MODELS[m[i]], catalog.DEFAULT_SEQ_LEN, catalog.DEFAULT_MICRO_BATCH, None, 1,
                     gpu, stage_overhead, intra_gbps, memory_model, rule, jobs.spec(i).name)
        iters, t1_j, tk_j = catalog_iterations(m, jobs.dataset, jobs.epochs, samples, batch, t1, tk)
        return {
            "work": work[m], "mb": mb[m], "act": act[m], "iterations": iters, "k_target": target[m],
            "min_gpus": min_g[m], "b_ref": b_ref[m], "t1": t1_j, "tk": tk_j,
        }
    if isinstance(jobs, SpecTable):
        # one _bounded per (model, request), in the order of each pair's first job (an error
        # names the same job as the loop below would); the same functions, so the same bits
        key = jobs.model * (int(jobs.max_gpus.max(initial=0)) + 1) + jobs.max_gpus
        _, first, row = np.unique(key, return_index=True, return_inverse=True)
        shared = [None] * first.shape[0]
        for r in np.argsort(first, kind="stable").tolist():
            i = int(first[r])
            shared[r] = _bounded(catalog.MODELS[jobs.model[i]], catalog.DEFAULT_SEQ_LEN, catalog.DEFAULT_MICRO_BATCH,
                                 int(jobs.max_gpus[i]), 1, gpu, stage_overhead, intra_gbps, memory_model, rule,
                                 jobs.name[i])
        iters = jobs.iterations
        row = row.reshape(-1)
    else:
        row, iters, shared = _profile_rows(jobs, gpu, stage_overhead, intra_gbps, memory_model, rule)
    columns = [np.array(col) for col in zip(*shared, strict=True)] if shared else [np.empty(0)] * 8
    work, mb, act, t1, target, tk, min_g, b_ref = columns
    return {
        "work": work[row], "mb": mb.astype(np.int64)[row], "act": act[row], "iterations": iters,
        "k_target": target.astype(np.int64)[row], "min_gpus": min_g.astype(np.int64)[row], "b_ref": b_ref[row],
        # e1 / I and E(k_target) / I, computed as JobProfile's fields are, so that the bits agree
        "t1": iters * t1[row] / iters, "tk": iters * tk[row] / iters,
    }


def _profile_rows(jobs, gpu, stage_overhead, intra_gbps, memory_model, rule):
    """(each job's row of ``shared``, iteration counts, ``_bounded``'s tuple per distinct
    model, batch settings and GPU bounds) of a sequence of JobSpecs."""
    # Per job only its iteration count and a lookup: everything else depends on the model,
    # batch settings and GPU bounds, shared by many jobs (a trace maps 100k jobs to a few
    # size classes). The same functions as ``profile``, so the same bits.
    rows: dict[tuple, int] = {}  # (model, seq_len, micro_batch, max_gpus, min_gpus) -> row of `shared`
    shared = []  # _bounded's tuples
    row = np.empty(len(jobs), dtype=np.int64)
    iters = np.empty(len(jobs))
    for i, job in enumerate(jobs):
        key = (id(job.model), job.seq_len, job.micro_batch, job.max_gpus, job.min_gpus)  # jobs keep models alive
        r = rows.get(key)
        if r is None:
            r = rows[key] = len(shared)
            shared.append(_bounded(job.model, job.seq_len, job.micro_batch, job.max_gpus, job.min_gpus,
                                   gpu, stage_overhead, intra_gbps, memory_model, rule, job.name))
        row[i] = r
        if job.iterations is not None:
            iters[i] = job.iterations
        else:
            iters[i] = costmodel.num_iterations(job.dataset.samples, job.model.batch_size, job.epochs)
    return row, iters, shared


def _shared_profile(
    job: JobSpec, gpu: GPUType, stage_overhead: float, intra_gbps: float,
    memory_model: MemoryModel, rule: StartRule,
) -> tuple:
    """What ``profile`` computes for ``job`` apart from its iteration count: (work, M_j, A_j,
    K*, t_iter on 1 GPU, k_target, t_iter on k_target GPUs in one region, min GPUs, memory
    minimum)."""
    key = (job.model, job.seq_len, job.micro_batch, gpu, stage_overhead, intra_gbps)
    work, mb, act, t1, target, tk, min_g, _ = _bounded(
        job.model, job.seq_len, job.micro_batch, job.max_gpus, job.min_gpus, gpu, stage_overhead,
        intra_gbps, memory_model, rule, job.name,
    )
    per_iteration = _per_iteration(*key, memory_model if rule.uses_memory else None)
    ks, mem_min = per_iteration[3], per_iteration[6]
    return work, mb, act, ks, t1, target, tk, min_g, mem_min


def _bounded(
    model: ModelSpec, seq_len: int, micro_batch: int, request: int | None, job_min: int,
    gpu: GPUType, stage_overhead: float, intra_gbps: float, memory_model: MemoryModel,
    rule: StartRule, name: str = "",
) -> tuple:
    """(work, M_j, A_j, t_iter(1), k_target, t_iter(k_target), min GPUs, b_j(k_target)) of a
    job of ``model`` with GPU ``request`` (or None) and its own ``job_min`` under ``rule``
    (``start_rule.gpu_bounds``); ValueError naming the job ``name``, its model and the GPU
    when the rule cannot hold it."""
    try:
        return _bounded_cached(model, seq_len, micro_batch, request, job_min, gpu, stage_overhead,
                               intra_gbps, memory_model, rule)
    except ValueError as err:
        raise ValueError(f"job {name!r}: {err}") from None


@lru_cache(maxsize=4096)
def _bounded_cached(model, seq_len, micro_batch, request, job_min, gpu, stage_overhead, intra_gbps,
                    memory_model, rule) -> tuple:
    key = (model, seq_len, micro_batch, gpu, stage_overhead, intra_gbps)
    work, mb, act, ks, t1, tk, mem_min = _per_iteration(*key, memory_model if rule.uses_memory else None)
    if mem_min == 0:
        need = memory.stage_memory_bytes(memory_model, model.params, model.layers, model.hidden,
                                         model.layers, mb, micro_batch * seq_len) / memory.GIB
        raise ValueError(
            f"model {model.name} does not fit on a {gpu.name} ({gpu.memory_gb:g} GB) "
            f"even at one layer per GPU: a stage needs {need:.1f} GiB (geo_gym.memory)"
        )
    try:
        min_g, target = gpu_bounds(rule, ks, mem_min, model.layers, request)
    except ValueError as err:
        raise ValueError(f"{model.name} on {gpu.name}, start rule {rule}: {err}") from None
    min_g = max(min_g, int(job_min))
    if target != ks:
        tk = _t_iter_single_region(*key, target)
    b_ref = costmodel.min_bandwidth(act, costmodel.t_comp(work, target, stage_overhead))
    return work, mb, act, t1, target, tk, min_g, b_ref
