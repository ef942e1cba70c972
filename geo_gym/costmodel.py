"""The BACE-Pipe cost model (paper section III-A) as small pure functions.

Each function is named after the quantity it computes and cites its equation. They are
plain Python over floats and sequences, written in the subset numba compiles, so the
simulator core uses the very same code: ``<name>_nb`` is ``numba.njit(<name>)``.

Units: time in seconds, bandwidth in Gbit/s, activation sizes in Gbit (so that
``activation / bandwidth`` is seconds), prices in $/kWh, power in kW, money in dollars.
"""

from __future__ import annotations

from collections.abc import Sequence

import numba
import numpy as np


def forward_flops(params: float, tokens: float) -> float:
    """FLOPs of one forward pass over ``tokens`` tokens: the standard 2 x params per token."""
    return 2.0 * params * tokens


def stage_work(params: float, tokens_per_microbatch: float, effective_flops: float) -> float:
    """Seconds one GPU needs for a micro-batch's forward pass of the whole model."""
    return forward_flops(params, tokens_per_microbatch) / effective_flops


def t_comp(work: float, num_stages: int, stage_overhead: float) -> float:
    """t^j_comp(L): forward time of one micro-batch on one of L stages (Table I).

    The model's work splits evenly over the stages; the constant per-stage overhead is what
    makes Eq. (13)'s K* finite (docs/design.md). L never exceeds the layer count.
    """
    return work / num_stages + stage_overhead


def t_comm(activation_gbit: float, bandwidth_gbps: float) -> float:
    """t^j_comm(s): time to ship one micro-batch's activations over a link (Table I)."""
    return activation_gbit / bandwidth_gbps


def activation_gbit(
    micro_batch: int, seq_len: int, hidden: int, bytes_per_value: int = 2
) -> float:
    """A_j: activation (= gradient) tensor between adjacent stages, in Gbit."""
    return micro_batch * seq_len * hidden * bytes_per_value * 8.0 / 1e9


def num_microbatches(batch_size: int, micro_batch: int) -> int:
    """M_j = global batch / micro-batch size."""
    return max(1, batch_size // micro_batch)


def num_iterations(samples: float, batch_size: int, epochs: float = 1.0) -> float:
    """I_j = ceil(epochs x samples / global batch): iterations to finish the job."""
    return float(np.ceil(epochs * samples / batch_size))


def iteration_from_parts(
    tc: float, comm_sum: float, comm_max: float, num_stages: int, num_microbatches: int
) -> float:
    """Eq. (1) from its parts: (sum t_comm + L t_comp + (M-1) Delta) x 2, Delta = max(t_comp, max t_comm)."""
    delta = max(tc, comm_max)
    return 2.0 * (comm_sum + num_stages * tc + (num_microbatches - 1) * delta)


def iteration_time(t_comp: float, t_comm: Sequence[float], num_microbatches: int) -> float:
    """Eq. (1): t_iter(L), seconds. ``t_comm`` holds the L-1 inter-stage times.

    The factor 2 is the paper's: the backward pass mirrors the forward pass.
    """
    comm_sum = 0.0
    comm_max = 0.0
    for x in t_comm:
        comm_sum += x
        comm_max = max(comm_max, x)
    return iteration_from_parts(t_comp, comm_sum, comm_max, len(t_comm) + 1, num_microbatches)


def execution_time(iterations: float, t_iter: float) -> float:
    """Eq. (2): E_j = I_j x t_iter(L_j)."""
    return iterations * t_iter


def job_completion_time(wait: float, execution: float) -> float:
    """Eq. (3): T_j = W_j + E_j."""
    return wait + execution


def energy_cost(
    hours: float,
    gpus_per_region: Sequence[int],
    price_per_kwh: Sequence[float],
    gpu_kw: float = 0.3,
) -> float:
    """Eq. (4): C_j = E_j x sum_r n_jr P_r, with P_r in $/kWh times the GPU's power draw."""
    rate = 0.0
    for i in range(len(gpus_per_region)):
        rate += gpus_per_region[i] * price_per_kwh[i]
    return hours * rate * gpu_kw


def min_bandwidth(activation_gbit: float, tc: float) -> float:
    """b_j = A_j / t_comp(L_j): bandwidth a job needs on each crossed link (Eq. 6)."""
    return activation_gbit / tc


def intensity(e1: float, e1_max: float) -> float:
    """Eq. (9): I_j = E_j(1) / max_k E_k(1)."""
    return e1 / e1_max if e1_max > 0 else 0.0


def sensitivity(b: float, b_max: float) -> float:
    """Eq. (10): D_j = b_j / max_k b_k."""
    return b / b_max if b_max > 0 else 0.0


def priority(intensity: float, sensitivity: float, alpha: float) -> float:
    """Eq. (12): (1 - alpha)(1 - I_j) + alpha (1 - D_j); higher is scheduled first."""
    return (1.0 - alpha) * (1.0 - intensity) + alpha * (1.0 - sensitivity)


def alpha(reserved: np.ndarray, bandwidth: np.ndarray) -> float:
    """Eq. (11): reserved inter-region bandwidth over total, summed over directed links u != v."""
    used = 0.0
    total = 0.0
    n = bandwidth.shape[0]
    for u in range(n):
        for v in range(n):
            if u != v:
                used += reserved[u, v]
                total += bandwidth[u, v]
    return used / total if total > 0 else 0.0


def single_region_iteration_time(
    work: float,
    k: int,
    activation_gbit: float,
    intra_gbps: float,
    stage_overhead: float,
    num_microbatches: int,
) -> float:
    """Eq. (1) for k stages inside one region: every link is intra-region."""
    tc = t_comp(work, k, stage_overhead)
    link = t_comm(activation_gbit, intra_gbps) if k > 1 else 0.0
    return iteration_from_parts(tc, (k - 1) * link, link, k, num_microbatches)


def k_star(
    work: float,
    num_microbatches: int,
    activation_gbit: float,
    intra_gbps: float,
    stage_overhead: float,
    max_stages: int,
    min_stages: int = 1,
) -> int:
    """Eq. (13): K* = argmin_k t_iter(k) over min_stages..max_stages (the memory minimum, or
    1, up to the layer count: only counts the model fits on); ties to fewer GPUs."""
    best_k = min_stages
    best = single_region_iteration_time(
        work, min_stages, activation_gbit, intra_gbps, stage_overhead, num_microbatches
    )
    for k in range(min_stages + 1, max_stages + 1):
        t = single_region_iteration_time(
            work, k, activation_gbit, intra_gbps, stage_overhead, num_microbatches
        )
        if t < best:
            best = t
            best_k = k
    return best_k


def pipeline_iteration_time(
    path: np.ndarray,
    path_len: int,
    alloc: np.ndarray,
    bandwidth: np.ndarray,
    intra_gbps: float,
    activation_gbit: float,
    work: float,
    stage_overhead: float,
    num_microbatches: int,
) -> float:
    """Eq. (1) for a placement: stages laid out along ``path``, ``alloc[r]`` consecutive stages
    in region r; the L-1 links are intra-region inside a region and B[u, v] between regions."""
    num_stages = 0
    comm_sum = 0.0
    comm_max = 0.0
    intra = t_comm(activation_gbit, intra_gbps)
    for i in range(path_len):
        r = path[i]
        n = alloc[r]
        num_stages += n
        if n > 1:
            comm_sum += (n - 1) * intra
            comm_max = max(comm_max, intra)
        if i + 1 < path_len:
            x = t_comm(activation_gbit, bandwidth[r, path[i + 1]])
            comm_sum += x
            comm_max = max(comm_max, x)
    tc = t_comp(work, num_stages, stage_overhead)
    return iteration_from_parts(tc, comm_sum, comm_max, num_stages, num_microbatches)


_jit = numba.njit(cache=True)
t_comp_nb = _jit(t_comp)
t_comm_nb = _jit(t_comm)
iteration_from_parts_nb = _jit(iteration_from_parts)
min_bandwidth_nb = _jit(min_bandwidth)
priority_nb = _jit(priority)
alpha_nb = _jit(alpha)
# The pipeline version calls t_comp/t_comm/iteration_from_parts by name, so compile it in a
# namespace where those names are the compiled ones. Inlined into its callers (once per
# placement option and decision): a compiled call passing its arrays costs as much as its work.
_pipeline_globals = dict(globals())
_pipeline_globals.update(
    t_comp=t_comp_nb, t_comm=t_comm_nb, iteration_from_parts=iteration_from_parts_nb
)
pipeline_iteration_time_nb = numba.njit(cache=True, inline="always")(
    type(pipeline_iteration_time)(pipeline_iteration_time.__code__, _pipeline_globals)
)
