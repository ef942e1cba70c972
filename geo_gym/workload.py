"""Pipeline-parallel training jobs and the per-job quantities of the cost model.

A ``JobSpec`` is what a user submits (model, dataset, batch settings, submit time); a
``JobProfile`` is what BACE-Pipe's Job Parser extracts from it for a given GPU type and
cluster: t_comp's work term, M_j, I_j, A_j, K* (Eq. 13), E_j(1) (Eq. 9's numerator).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import lru_cache

from geo_gym import catalog, costmodel
from geo_gym.catalog import DatasetSpec, GPUType, ModelSpec


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

    def __post_init__(self) -> None:
        if not self.submit >= 0:
            raise ValueError(f"JobSpec {self.name!r}: submit must be >= 0, got {self.submit!r}")
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
    k_star: int  # Eq. (13)
    e1: float  # E_j(1), Eq. (2) on one GPU
    ideal_duration: float  # E_j(k_target) inside one region
    k_target: int  # the GPUs every rule aims at: K*, or the job's max_gpus when smaller

    def t_comp(self, num_stages: int) -> float:
        return costmodel.t_comp(self.work, num_stages, self.stage_overhead)

    def b_j(self, num_stages: int) -> float:
        """Minimum bandwidth on every crossed link (Eq. 6)."""
        return costmodel.min_bandwidth(self.activation_gbit, self.t_comp(num_stages))


def profile(
    job: JobSpec,
    gpu: GPUType = catalog.A6000,
    stage_overhead: float = catalog.DEFAULT_STAGE_OVERHEAD_S,
    intra_gbps: float = catalog.DEFAULT_INTRA_REGION_GBPS,
) -> JobProfile:
    key = (job.model, job.seq_len, job.micro_batch, gpu, stage_overhead, intra_gbps)
    work, mb, act, ks, t1, tk = _per_iteration(*key)
    if job.iterations is not None:
        iters = float(job.iterations)
    else:
        iters = costmodel.num_iterations(job.dataset.samples, job.model.batch_size, job.epochs)
    target = ks if job.max_gpus is None else min(ks, int(job.max_gpus))
    if target != ks:
        tk = _t_iter_single_region(*key, target)
    return JobProfile(work, stage_overhead, mb, iters, act, ks, iters * t1, iters * tk, target)


# Everything but the iteration count depends on the model and batch settings only, so
# workloads with jittered epochs or trace-calibrated lengths share one K* scan per model.
@lru_cache(maxsize=4096)
def _per_iteration(
    m: ModelSpec, seq_len: int, micro_batch: int, gpu: GPUType, stage_overhead: float, intra_gbps: float
) -> tuple[float, int, float, int, float, float]:
    """(work, M_j, A_j, K*, t_iter on 1 GPU, t_iter on K* GPUs in one region)."""
    work = costmodel.stage_work(m.params, micro_batch * seq_len, gpu.effective_flops)
    mb = costmodel.num_microbatches(m.batch_size, micro_batch)
    act = costmodel.activation_gbit(micro_batch, seq_len, m.hidden, catalog.BYTES_PER_ACTIVATION)
    ks = costmodel.k_star(work, mb, act, intra_gbps, stage_overhead, m.layers)
    t1 = costmodel.single_region_iteration_time(work, 1, act, intra_gbps, stage_overhead, mb)
    tk = costmodel.single_region_iteration_time(work, ks, act, intra_gbps, stage_overhead, mb)
    return work, mb, act, ks, t1, tk


@lru_cache(maxsize=4096)
def _t_iter_single_region(
    m: ModelSpec, seq_len: int, micro_batch: int, gpu: GPUType, stage_overhead: float,
    intra_gbps: float, k: int,
) -> float:
    """Eq. (1) on k GPUs in one region (a job capped below K* by its request)."""
    work, mb, act, *_ = _per_iteration(m, seq_len, micro_batch, gpu, stage_overhead, intra_gbps)
    return costmodel.single_region_iteration_time(work, k, act, intra_gbps, stage_overhead, mb)
