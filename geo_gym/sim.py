"""The discrete-event simulator core: arrivals, starts, completions, failures, metrics.

One core drives everything: the Gymnasium env (one simulation), the native vector env (N
simulations in one compiled call) and the fast whole-workload path ``geo_gym.simulate``. Its
state is a ``Core`` of numpy arrays with a leading env axis ``e``; numba-compiled
functions read and update it in place, so stepping N simulations is one compiled loop.

Event semantics (paper III-A): a job arrives at ``submit``, waits in the queue, is placed
(non-preemptive: path and GPU count fixed for the attempt, III-B2), runs (Eq. 2) and holds its
GPUs and its b_j reservation on every crossed link (both directions, Eq. 6) until it ends.
Electricity accrues while GPUs are held (Eq. 4), never while queued.

The state's fields (shape, unit, meaning) are declared in ``geo_gym/state.py``; fixed-policy
ordering and backfilling live beside the core in ``geo_gym/fixed.py``.

Uncertainty (SchedMate; geo_gym/uncertainty, all off by default):
  * a job's *fate*: it runs ``iters`` iterations, fewer than the configured ``full_iters``
    when it ends early (cancelled / application failure); schedulers never see ``iters``;
  * predictions ``pred_iters`` (oracle, noisy, user estimate, or retrieval from a history store
    of finished jobs, made when the job is submitted);
  * infrastructure failures: attempt a of job j holding g GPUs fails after
    ``failure_draws[j, a] / (rate x g)`` hours; progress falls back to the last checkpoint, the
    electricity already spent stays spent, ``gpus_per_failure`` GPUs of the first path region
    leave for a repair time, and the job re-enters the queue after the failure handler's delay
    (diagnosis when recognised, manual intervention otherwise);
  * an early end is an application failure or a cancellation (``end_kind``: the trace's final
    state, or drawn against the configured share). With the failure handler on, an
    application failure reaches it: judged infrastructure (its false-positive rate), the job
    is restarted from its last checkpoint after the diagnosis delay and fails again when it
    reaches the same point of its work (a bug in the job's code or data recurs), until the
    handler judges it an application failure or its attempts run out (``max_attempts``); then
    it ends. Cancellations never reach the handler.
At one instant events are processed as: completions and failures, repairs, re-queues, arrivals.
All random numbers are drawn up front when an episode is loaded (``geo_gym.loading``) from the
caller's seeded generator.

The queue is kept in submit order; ``pending[e, :n_pending[e]]`` are the pending job indices
(in no order only inside ``fixed.run_fixed_policy`` on a long queue: ``loosen_queue``).
Job indices are the workload's jobs sorted by submit time (stable), see ``loading.load``.
"""

from __future__ import annotations

from functools import cache
from typing import NamedTuple

import numba
import numpy as np
from numba import types
from numba.experimental import structref

from geo_gym import state
from geo_gym.costmodel import min_bandwidth_nb, pipeline_iteration_time_nb, t_comp_nb
from geo_gym.placement import FEASIBLE, apply_rule, apply_rule_kept, check_kernel, insertion_sort
from geo_gym.state import SECONDS_PER_HOUR
from geo_gym.uncertainty import draws
from geo_gym.uncertainty.failures import checkpoint_rollback, time_to_failure
from geo_gym.uncertainty.handler import handle_failure
from geo_gym.uncertainty.predictors import retrieval_estimate, store_append
from geo_gym.workload import END_APPLICATION_FAILURE, END_UNKNOWN

_jit = numba.njit(cache=True)
_inline = numba.njit(cache=True, inline="always")
# Kernels that take arrays and allocate nothing: without numba's reference counting, whose
# atomic operations on their arguments cost more than the kernels (docs/performance.md).
_leaf = numba.njit(cache=True, _nrt=False)

PENDING_FUTURE, PENDING, RUNNING, DONE, DELAYED = 0, 1, 2, 3, 4
PRED_STATIC, PRED_RETRIEVAL = 0, 1
# Predictions stay positive (remaining work is a share of them); trace jobs may be shorter
# than one iteration of their model, so the floor is far below one iteration.
MIN_PRED_ITERS = 1e-6
FALLBACK_USER, FALLBACK_STORE_MEAN = 0, 1

# The core's fields: its own (geo_gym.state) and the uncertainty sources' drawn columns.
_FIELDS = state.FIELDS + draws.FIELDS
FIELDS = tuple(f.name for f in _FIELDS)


@structref.register
class CoreType(types.StructRef):
    """Numba's type of the Core: a reference to one struct of array fields."""

    def preprocess_fields(self, fields):
        return tuple((name, types.unliteral(t)) for name, t in fields)


class Core(structref.StructRefProxy):
    """The simulator state: one array per field of ``geo_gym.state``, leading axis = env.

    Compiled code receives it as a numba StructRef, i.e. one pointer. (Given a tuple of the
    ~80 arrays, numba would count a reference to every array on each call of a compiled
    function with branches, which would be most of a step.) Python
    reads and writes the very same numpy arrays as attributes, ``core.free[e]`` etc."""

    _fields = FIELDS

    def __reduce__(self):
        # pickle and copy.deepcopy rebuild the struct around (copies of) the arrays; numba's
        # struct itself cannot be pickled.
        return _core, ({name: self.__dict__[name] for name in FIELDS},)


structref.define_constructor(Core, CoreType, FIELDS)
structref.define_boxing(CoreType, Core)


@_jit
def _new_core(*arrays):
    """``Core(*arrays)``, compiled once and cached on disk: ``Core(...)`` from Python compiles
    numba's constructor afresh in every process (seconds, for ~80 fields)."""
    return Core(*arrays)


def _core(arrays: dict[str, np.ndarray]) -> Core:
    core = _new_core(*(arrays[name] for name in FIELDS))
    core.__dict__.update(arrays)  # plain attributes: Python reads them as fast as a tuple's
    return core


def allocate(
    num_envs: int, num_regions: int, max_jobs: int, attempts: int = 1, store: int = 1, dim: int = 1
) -> Core:
    """Zeroed state for ``num_envs`` simulations of ``num_regions`` regions, ``max_jobs`` jobs,
    ``attempts`` pre-drawn failures per job and a retrieval store of ``store`` x ``dim``."""
    sizes = {"K": num_regions, "J": max_jobs, "A": attempts, "S": store, "D": dim, "P": max_jobs * attempts}
    return _core({f.name: np.zeros(state.shape_of(f, num_envs, sizes), dtype=f.dtype) for f in _FIELDS})


def _sizes(core: Core) -> dict[str, int]:
    return {
        "J": core.submit_s.shape[1],
        "A": core.failure_draws.shape[2],
        "S": core.store_vals.shape[1],
        "D": core.store_vecs.shape[1],
    }


def ensure(core: Core, max_jobs: int = 0, attempts: int = 0, store: int = 0, dim: int = 0) -> Core:
    """``core`` if it is large enough, else a larger copy with the same state."""
    if (max_jobs <= core.submit_s.shape[1] and attempts <= core.failure_draws.shape[2]
            and store <= core.store_vals.shape[1] and dim <= core.store_vecs.shape[1]):
        return core  # (every env reset asks)
    old = _sizes(core)
    want = {"J": max_jobs, "A": attempts, "S": store, "D": dim}
    new_sizes = {x: max(old[x], want[x]) for x in old}
    if new_sizes == old:
        return core
    n, k = core.cap.shape
    new = allocate(n, k, new_sizes["J"], new_sizes["A"], new_sizes["S"], new_sizes["D"])
    for name in FIELDS:
        src, dst = getattr(core, name), getattr(new, name)
        dst[(slice(None),) + tuple(slice(0, s) for s in src.shape[1:])] = src
    return new


@_jit
def reset(c, e):
    """Empty cluster at t = 0; jobs submitted at 0 are queued."""
    c.now_s[e] = 0.0
    c.free[e] = c.cap[e]
    c.repairing[e] = 0
    c.reserved_gbps[e] = 0.0
    residual_bandwidth(c.bandwidth_gbps[e], c.reserved_gbps[e], c.residual_gbps[e])
    c.resv_nnz[e] = 0
    c.bandwidth_total_gbps[e] = _bandwidth_total(c.bandwidth_gbps[e])
    c.nbr_ready[e] = False
    c.status[e] = PENDING_FUTURE
    c.next_arrival[e] = 0
    c.n_pending[e] = 0
    c.queue_loose[e] = False
    c.n_running[e] = 0
    c.n_delayed[e] = 0
    c.n_repairs[e] = 0
    c.n_done[e] = 0
    c.done_iters[e] = 0.0
    c.attempt[e] = 0
    c.n_fail[e] = 0
    c.n_fail_total[e] = 0
    c.n_false_restart[e] = 0
    c.n_false_restart_total[e] = 0
    c.rerun_gpu_h[e] = 0.0
    c.rerun_usd[e] = 0.0
    c.start_s[e] = np.nan
    c.attempt_start_s[e] = np.nan
    c.end_s[e] = np.nan
    c.fail_s[e] = np.inf
    c.t_iter_s[e] = 0.0
    c.path[e] = -1
    c.plen[e] = 0
    c.alloc[e] = 0
    c.gpus[e] = 0
    c.b_gbps[e] = 0.0
    c.cost_per_s[e] = 0.0
    c.cost_usd[e] = 0.0
    c.job_seconds[e] = 0.0
    c.spent_usd[e] = 0.0
    _handle_arrivals(c, e)


@_leaf
def _put(dst, src, empty):
    """dst[:len(src)] = src, the rest of dst = empty (1-D, or 2-D with src's columns first)."""
    if dst.ndim == 1:
        for j in range(dst.shape[0]):
            dst[j] = src[j] if j < src.shape[0] else empty
    else:
        for j in range(dst.shape[0]):
            for a in range(dst.shape[1]):
                dst[j, a] = src[j, a] if j < src.shape[0] and a < src.shape[1] else empty


JobColumns = NamedTuple("JobColumns", [(f.name, np.ndarray) for f in state.LOADED])
JobColumns.__doc__ = """An episode's jobs as the core's per-job columns (length n, in submit order),
one per ``geo_gym.state.LOADED`` field of the same name; ``loading`` computes them."""


class ClusterColumns(NamedTuple):
    """An episode's cluster, as the core's fields of the same names."""

    cap: np.ndarray
    price: np.ndarray
    bandwidth_gbps: np.ndarray
    intra_gbps: float
    gpu_kw: float
    stage_overhead_s: float


class Settings(NamedTuple):
    """An episode's failure, failure-handler and predictor settings, as the core's fields of
    the same names (``loading._derived`` builds them once per uncertainty configuration)."""

    failure_rate_per_gpu_h: float
    checkpoint_h: float
    gpus_per_failure: int
    handler_on: bool
    handler_tpr: float
    handler_fpr: float
    diagnosis_h: float
    manual_h: float
    app_failure_share: float
    predictor_mode: int  # PRED_RETRIEVAL: loading has filled the retrieval fields and store first


# load_episode's scalars travel in one float64 array (a tuple or NamedTuple of them costs numba's
# dispatcher about 0.1 us per item, a third of a small episode's load): the Settings' fields
# (exact as float64: flags, small counts), then the cluster's three scalars.
_N_SETTINGS = len(Settings._fields)
# The loaded columns in the order _load_episode writes them (its fills[i] is that of _LOADED[i]).
_LOADED = (
    "submit_s", "work_s", "microbatches", "full_iters", "iters", "end_kind", "activation_gbit", "k_target",
    "min_gpus", "b_target_gbps", "t_iter_1gpu_s", "t_iter_target_s", "pred_iters",
    "failure_draws", "repair_h", "handler_u", "end_kind_u", "tracker_sees", "tracker_frac_noise", "tracker_step_noise",
)
LOADED_FIELDS = _LOADED  # (public: the per-job columns an episode's load writes)
_FILL_OF = {f.name: f.fill for f in state.LOADED + draws.FIELDS}
if sorted(_LOADED) != sorted(_FILL_OF):  # a column added to state.py or draws.py must be written here too
    raise ImportError(f"sim._load_episode writes {sorted(_LOADED)}, the loaded fields are {sorted(_FILL_OF)}")
# Each column's value in the rows beyond the episode's jobs. Passed in, not read as globals:
# numba's disk cache would keep a changed fill's old value (they are declared in other files).
_FILLS = np.array([float(_FILL_OF[name]) for name in _LOADED])
_FILLS.setflags(write=False)


def load_episode(c, e, cluster: ClusterColumns, settings: Settings, jobs: JobColumns,
                 drawn: draws.DrawnColumns) -> None:
    """Write env e's cluster, settings, n jobs (``JobColumns``) and their drawn uncertainty
    (``draws.DrawnColumns``), fill the rows beyond n with each field's ``fill``, and ``reset``:
    one compiled call per episode (``loading`` computes the columns). The arrays are
    C-contiguous, read-only or not: float64, int64 for the cluster's GPUs and the jobs'
    integer columns, the drawn columns of their field's dtype (a TypeError names others)."""
    _loader()(
        c, e, cluster.cap, cluster.price, cluster.bandwidth_gbps, episode_scalars(settings, cluster), _FILLS,
        jobs.submit_s, jobs.work_s, jobs.microbatches, jobs.full_iters, jobs.iters, jobs.end_kind,
        jobs.activation_gbit, jobs.k_target, jobs.min_gpus, jobs.b_target_gbps, jobs.t_iter_1gpu_s,
        jobs.t_iter_target_s, jobs.pred_iters,
        drawn.failure_draws, drawn.repair_h, drawn.handler_u, drawn.end_kind_u, drawn.tracker_sees,
        drawn.tracker_frac_noise, drawn.tracker_step_noise,
    )


def episode_scalars(settings: Settings, cluster: ClusterColumns) -> np.ndarray:
    """``write_episode``'s scalars: the settings' fields, then the cluster's three."""
    return np.array((*settings, cluster.intra_gbps, cluster.gpu_kw, cluster.stage_overhead_s), np.float64)


def _readonly(dtype, ndim: int = 1) -> types.Array:
    return types.Array(numba.from_dtype(np.dtype(dtype)), ndim, "C", readonly=True)


def _core_type() -> CoreType:
    """numba's type of every Core: its fields are C-contiguous, writable arrays (``allocate``)."""
    sizes = dict.fromkeys("KJASDP", 1)
    return CoreType([(f.name, numba.typeof(np.zeros(state.shape_of(f, 1, sizes), f.dtype))) for f in _FIELDS])


# What loading passes of each job: float64 columns, int64 counts, GPU numbers and codes.
_INT_COLUMNS = ("microbatches", "end_kind", "k_target", "min_gpus")


@cache
def _loader():
    """``_load_episode``, compiled once for read-only arrays, and only for them: a writable
    array converts to its read-only type at the call. Otherwise numba would compile one
    specialisation for each mix of read-only columns (loading's shared constants: a
    workload's default columns, the neutral draws) and writable ones (fresh columns), seven
    and more over the tests, each 4-8 s on a cold cache."""
    f8, i8 = _readonly(np.float64), _readonly(np.int64)
    signature = types.void(
        _core_type(), types.int64, i8, f8, _readonly(np.float64, 2), f8, f8,  # cluster, scalars, fills
        *(i8 if name in _INT_COLUMNS else f8 for name in JobColumns._fields),
        *(_readonly(f.dtype, len(f.shape)) for f in draws.FIELDS),
    )
    _load_episode.compile(signature)
    _load_episode.disable_compile()
    return _load_episode


@_jit
def write_episode(
    c, e, cap, price, bandwidth_gbps, scalars, fills,
    submit_s, work_s, microbatches, full_iters, iters, end_kind, activation_gbit, k_target, min_gpus,
    b_target_gbps, t_iter_1gpu_s, t_iter_target_s, pred_iters,
    failure_draws, repair_h, handler_u, end_kind_u, tracker_sees, tracker_frac_noise, tracker_step_noise,
):
    """``load_episode``'s work, for compiled callers (``geo_gym.compiled_reset``), whose fresh
    columns are writable: ``_load_episode`` is compiled for read-only arrays only."""
    # Every field by name (tests/test_loading.py checks that none is missed). Not getattr with
    # literal names: numba 0.68 keeps a reference to the core for every such lookup, so no
    # core that had been loaded was ever freed.
    c.cap[e] = cap
    c.price[e] = price
    c.bandwidth_gbps[e] = bandwidth_gbps
    c.failure_rate_per_gpu_h[e] = scalars[0]
    c.checkpoint_h[e] = scalars[1]
    c.gpus_per_failure[e] = np.int64(scalars[2])
    c.handler_on[e] = scalars[3] != 0.0
    c.handler_tpr[e] = scalars[4]
    c.handler_fpr[e] = scalars[5]
    c.diagnosis_h[e] = scalars[6]
    c.manual_h[e] = scalars[7]
    c.app_failure_share[e] = scalars[8]
    mode = np.int64(scalars[9])
    c.predictor_mode[e] = mode
    c.intra_gbps[e] = scalars[_N_SETTINGS]
    c.gpu_kw[e] = scalars[_N_SETTINGS + 1]
    c.stage_overhead_s[e] = scalars[_N_SETTINGS + 2]
    c.pred_hit[e] = False
    if mode != PRED_RETRIEVAL:
        # The store's rows are left as they are: only the first n_store are ever read, and
        # clearing a store of thousands of rows took longer than the rest of a load.
        c.n_store[e] = 0
    n = submit_s.shape[0]
    c.n_jobs[e] = n
    _put(c.submit_s[e], submit_s, fills[0])
    _put(c.work_s[e], work_s, fills[1])
    _put(c.microbatches[e], microbatches, fills[2])
    _put(c.full_iters[e], full_iters, fills[3])
    _put(c.iters[e], iters, fills[4])
    _put(c.end_kind[e], end_kind, fills[5])
    _put(c.activation_gbit[e], activation_gbit, fills[6])
    _put(c.k_target[e], k_target, fills[7])
    _put(c.min_gpus[e], min_gpus, fills[8])
    _put(c.b_target_gbps[e], b_target_gbps, fills[9])
    _put(c.t_iter_1gpu_s[e], t_iter_1gpu_s, fills[10])
    _put(c.t_iter_target_s[e], t_iter_target_s, fills[11])
    _put(c.pred_iters[e], pred_iters, fills[12])
    _put(c.failure_draws[e], failure_draws, fills[13])
    _put(c.repair_h[e], repair_h, fills[14])
    _put(c.handler_u[e], handler_u, fills[15])
    _put(c.end_kind_u[e], end_kind_u, fills[16])
    _put(c.tracker_sees[e], tracker_sees, fills[17] != 0.0)
    _put(c.tracker_frac_noise[e], tracker_frac_noise, fills[18])
    _put(c.tracker_step_noise[e], tracker_step_noise, fills[19])
    k_max = 1
    for j in range(n):
        k_max = max(k_max, k_target[j])
    c.k_target_max[e] = k_max
    reset(c, e)


# load_episode's dispatcher: the same function, compiled for read-only arrays only (_loader)
_load_episode = _jit(write_episode.py_func)


@_jit
def _predict_on_submit(c, e, j):
    """Retrieval predictions are made when a job is submitted, from the jobs finished by then
    (SchedMate 3.1); with no similar job the fallback estimator answers."""
    if c.predictor_mode[e] != PRED_RETRIEVAL:
        return
    est, m = retrieval_estimate(
        c.metadata_vec[e, j], c.store_vecs[e], c.store_norms[e], c.store_vals[e], c.n_store[e], c.retrieval_k[e],
        c.retrieval_threshold[e],
    )
    if m > 0:
        c.pred_iters[e, j] = max(est, MIN_PRED_ITERS)
        c.pred_hit[e, j] = True
        return
    c.pred_hit[e, j] = False
    n_valid = min(c.n_store[e], c.store_vals.shape[1])
    if c.retrieval_fallback[e] == FALLBACK_STORE_MEAN and n_valid > 0:
        c.pred_iters[e, j] = max(c.store_vals[e, :n_valid].mean(), MIN_PRED_ITERS)
    else:
        c.pred_iters[e, j] = c.full_iters[e, j]


@_inline
def _append(c, e, j):
    """j joins the end of the queue (``queue_pos`` kept while the queue is loose)."""
    n = c.n_pending[e]
    c.pending[e, n] = j
    if c.queue_loose[e]:
        c.queue_pos[e, j] = n
    c.n_pending[e] = n + 1


@_jit
def loosen_queue(c, e):
    """From now on the queue need not be in submit order: a job leaves it by taking the last
    job to its place (O(1) instead of shifting the queue's tail), re-queued jobs join its end.
    Only for a caller that keeps the order itself and reads no queue order meanwhile
    (``fixed.run_fixed_policy`` with its queue index); ``tighten_queue`` restores it."""
    for m in range(c.n_pending[e]):
        c.queue_pos[e, c.pending[e, m]] = m
    c.queue_loose[e] = True


@_jit
def tighten_queue(c, e):
    """The queue in submit order again (job index order, see ``loosen_queue``)."""
    if c.queue_loose[e]:
        c.pending[e, : c.n_pending[e]].sort()
        c.queue_loose[e] = False


@_jit
def _enqueue(c, e, j):
    """Put j in the queue at its submit-order position (re-queued jobs keep their place)."""
    c.status[e, j] = PENDING
    if c.queue_loose[e]:
        _append(c, e, j)
        return
    n = c.n_pending[e]
    pend = c.pending[e]
    i = n
    while i > 0 and pend[i - 1] > j:
        pend[i] = pend[i - 1]
        i -= 1
    pend[i] = j
    c.n_pending[e] = n + 1


@_jit
def _handle_arrivals(c, e):
    """Jobs submitted by now enter the queue (a retrieval predictor predicts them now)."""
    n = c.n_jobs[e]
    while c.next_arrival[e] < n and c.submit_s[e, c.next_arrival[e]] <= c.now_s[e]:
        j = c.next_arrival[e]
        _predict_on_submit(c, e, j)
        c.status[e, j] = PENDING
        _append(c, e, j)  # arrivals come in index order
        c.next_arrival[e] += 1


@_jit
def next_event_time(c, e):
    """The next arrival, completion, failure, repair or re-queue; inf when nothing more will
    happen by itself."""
    t_next = np.inf
    if c.next_arrival[e] < c.n_jobs[e]:
        t_next = c.submit_s[e, c.next_arrival[e]]
    # Loops read row views: a field of the Core is re-read after every store otherwise.
    run, end, t_fail = c.running[e], c.end_s[e], c.fail_s[e]
    for i in range(c.n_running[e]):
        j = run[i]
        t_next = min(t_next, end[j], t_fail[j])
    rep_t = c.repair_end_s[e]
    for i in range(c.n_repairs[e]):
        t_next = min(t_next, rep_t[i])
    dly, ready = c.delayed[e], c.requeue_s[e]
    for i in range(c.n_delayed[e]):
        t_next = min(t_next, ready[dly[i]])
    return t_next


@_jit
def done(c, e):
    return c.n_done[e] == c.n_jobs[e]


@_inline
def _residual(bw, resv, u, v):
    """``residual_bandwidth``'s entry (u, v): the one expression both compute it with."""
    a = bw[u, v] - resv[u, v]
    b = bw[v, u] - resv[v, u]
    return max(0.0, min(a, b))


@_jit
def _bandwidth_total(bw):
    """Eq. (11)'s denominator, summed as ``costmodel.alpha`` sums it."""
    total = 0.0
    n = bw.shape[0]
    for u in range(n):
        for v in range(n):
            if u != v:
                total += bw[u, v]
    return total


@_jit
def _track_link(c, e, u, v, was_reserved):
    """Link (u, v)'s reservation changed: keep ``resv_cols``/``resv_nnz`` (the links with a
    non-zero reservation) and ``residual_gbps`` (both directions) up to date."""
    resv = c.reserved_gbps[e]
    now_reserved = resv[u, v] != 0.0
    if now_reserved and not was_reserved:
        c.resv_cols[e, u, c.resv_nnz[e, u]] = v
        c.resv_nnz[e, u] += 1
    elif was_reserved and not now_reserved:
        cols = c.resv_cols[e, u]
        last = c.resv_nnz[e, u] - 1
        i = 0
        while cols[i] != v:
            i += 1
        cols[i] = cols[last]
        c.resv_nnz[e, u] = last
    bw, out = c.bandwidth_gbps[e], c.residual_gbps[e]
    out[u, v] = _residual(bw, resv, u, v)
    out[v, u] = _residual(bw, resv, v, u)


@_jit
def alpha_kept(c, e):
    """Eq. (11) from the kept links: ``costmodel.alpha_nb(reserved_gbps, bandwidth_gbps)`` to
    the bit without its O(K^2) pass. alpha sums every reservation in row-major order, and
    every one left out here is +0.0 (reservations are never negative), which adds nothing to
    a sum of non-negative numbers; the non-zero ones are summed in the same order (each row's
    few columns sorted first)."""
    resv, nnz, cols = c.reserved_gbps[e], c.resv_nnz[e], c.resv_cols[e]
    used = 0.0
    for u in range(nnz.shape[0]):
        m = nnz[u]
        if m == 0:
            continue
        row = cols[u]
        insertion_sort(row, m)  # a region is on the paths of a few jobs
        for i in range(m):
            used += resv[u, row[i]]
    total = c.bandwidth_total_gbps[e]
    return used / total if total > 0 else 0.0


@_jit
def _freed(c, e, r):
    """Region r gets free GPUs again: each sorted neighbour list (``nbr_order``) that skips
    it as full (``nbr_first`` past it) starts at it again. Regions that fill up need nothing:
    Pathfinder moves ``nbr_first`` past them when it next walks the list."""
    for v in range(c.nbr_ready.shape[1]):
        if c.nbr_ready[e, v] and c.nbr_pos[e, v, r] < c.nbr_first[e, v]:
            c.nbr_first[e, v] = c.nbr_pos[e, v, r]


@_jit
def _release(c, e, j):
    """Give back job j's GPUs and its b_j on every link of its path."""
    free, resv, alloc, path, bj = c.free[e], c.reserved_gbps[e], c.alloc[e, j], c.path[e, j], c.b_gbps[e, j]
    for r in range(free.shape[0]):
        if free[r] <= 0 < free[r] + alloc[r]:
            _freed(c, e, np.int64(r))
        free[r] += alloc[r]
    for i in range(c.plen[e, j] - 1):
        u = np.int64(path[i])  # as ``place`` calls _track_link (one signature)
        v = np.int64(path[i + 1])
        was_uv, was_vu = resv[u, v] != 0.0, resv[v, u] != 0.0
        resv[u, v] = max(0.0, resv[u, v] - bj)
        resv[v, u] = max(0.0, resv[v, u] - bj)
        _track_link(c, e, u, v, was_uv)
        _track_link(c, e, v, u, was_vu)


@_jit
def _count_rerun(c, e, j, t):
    """An attempt of j ends at t: if it re-ran a misjudged application failure (the job was
    restarted as one before), its GPU-hours and electricity were spent in vain."""
    if c.n_false_restart[e, j] > 0:
        c.rerun_gpu_h[e] += c.gpus[e, j] * (t - c.attempt_start_s[e, j]) / SECONDS_PER_HOUR
        c.rerun_usd[e] += c.cost_per_s[e, j] * (t - c.attempt_start_s[e, j])


@_jit
def _complete(c, e, j):
    _release(c, e, j)
    _count_rerun(c, e, j, c.end_s[e, j])
    c.status[e, j] = DONE
    c.cost_usd[e, j] += c.cost_per_s[e, j] * (c.end_s[e, j] - c.attempt_start_s[e, j])
    c.n_done[e] += 1
    if c.predictor_mode[e] == PRED_RETRIEVAL:
        value = c.iters[e, j] if c.retrieval_records_actual[e] else c.full_iters[e, j]
        c.n_store[e] = store_append(
            c.store_vecs[e], c.store_norms[e], c.store_vals[e], c.n_store[e], c.metadata_vec[e, j], value
        )


@_jit
def _stop_attempt(c, e, j, t):
    """j's attempt stops at t without finishing: progress falls back to the last checkpoint,
    the electricity of the whole attempt (the lost work's too) is spent, and its GPUs and b_j
    are given back."""
    elapsed_h = (t - c.attempt_start_s[e, j]) / SECONDS_PER_HOUR
    kept_h = checkpoint_rollback(elapsed_h, c.checkpoint_h[e])
    c.done_iters[e, j] = min(c.iters[e, j], c.done_iters[e, j] + kept_h * SECONDS_PER_HOUR / c.t_iter_s[e, j])
    c.cost_usd[e, j] += c.cost_per_s[e, j] * (t - c.attempt_start_s[e, j])  # the lost work's electricity too
    _count_rerun(c, e, j, t)
    _release(c, e, j)


@_jit
def _delay(c, e, j, t, delay_h):
    """j waits ``delay_h`` hours before it re-enters the queue; it holds nothing meanwhile."""
    c.status[e, j] = DELAYED
    c.requeue_s[e, j] = t + delay_h * SECONDS_PER_HOUR
    c.delayed[e, c.n_delayed[e]] = j
    c.n_delayed[e] += 1
    c.alloc[e, j] = 0
    c.gpus[e, j] = 0
    c.b_gbps[e, j] = 0.0
    c.plen[e, j] = 0
    c.fail_s[e, j] = np.inf


@_jit
def _fail(c, e, j):
    """An infrastructure failure of j's current attempt at time t (see the module docstring)."""
    t = c.now_s[e]
    r = c.path[e, j, 0]
    broken = min(c.gpus_per_failure[e], c.alloc[e, j, r])
    _stop_attempt(c, e, j, t)
    a = c.attempt[e, j] - 1
    if broken > 0:
        if c.n_repairs[e] == c.repair_end_s.shape[1]:
            raise RuntimeError("more repairs in progress than pre-drawn failures: a core bug")
        i = c.n_repairs[e]
        c.repair_end_s[e, i] = t + c.repair_h[e, j, a] * SECONDS_PER_HOUR
        c.repair_region[e, i] = r
        c.repair_gpus[e, i] = broken
        c.n_repairs[e] += 1
        c.free[e, r] -= broken
        c.repairing[e, r] += broken
    _, delay_h = handle_failure(
        np.bool_(True), c.handler_u[e, j, a], c.handler_on[e], c.handler_tpr[e], c.handler_fpr[e], c.diagnosis_h[e], c.manual_h[e]
    )
    _delay(c, e, j, t, delay_h)
    c.n_fail[e, j] += 1
    c.n_fail_total[e] += 1


@_jit
def _application_failure(c, e, j):
    """j's end is an early end of the kind application failure: its given kind, or, with none
    given, its drawn uniform below the configured share. A completion or a cancellation is not."""
    if not c.iters[e, j] < c.full_iters[e, j]:
        return False
    kind = c.end_kind[e, j]
    if kind == END_UNKNOWN:
        return c.end_kind_u[e, j] < c.app_failure_share[e]
    return kind == END_APPLICATION_FAILURE


@_jit
def _misjudged(c, e, j):
    """The failure handler judges j's ending attempt, an application failure, infrastructure
    and restarts it (probability FPR, handler.handle_failure on the attempt's pre-drawn
    uniform). Never without the handler, for a completion or a cancellation, or once j has
    started ``max_attempts`` attempts (the core's pre-drawn attempts): that one ends it."""
    if not c.handler_on[e] or c.attempt[e, j] >= c.handler_u.shape[2] or not _application_failure(c, e, j):
        return False
    restarted, _ = handle_failure(  # plain bools: a literal compiles it once per value
        np.bool_(False), c.handler_u[e, j, c.attempt[e, j] - 1], np.bool_(True), c.handler_tpr[e], c.handler_fpr[e],
        c.diagnosis_h[e], c.manual_h[e],
    )
    return restarted


@_jit
def _restart_misjudged(c, e, j):
    """An application failure judged infrastructure (``_misjudged``): restarted from its last
    checkpoint after the diagnosis delay, as the handler restarts an infrastructure failure
    (SchedMate 3.3, Automated Recovery). Its GPUs are healthy: none goes to repair. The rerun
    reaches the same point of the work and fails again there."""
    t = c.now_s[e]
    _stop_attempt(c, e, j, t)
    _delay(c, e, j, t, c.diagnosis_h[e])
    c.n_false_restart[e, j] += 1
    c.n_false_restart_total[e] += 1


# ------------------------------------------------------------------ events
# One handler per kind of event, inlined into ``advance`` (a compiled call per handler would
# cost more than most handlers' work). At one instant they run in this order: completions and
# failures, repairs, re-queues, arrivals (module docstring).


@_inline
def _accrue(c, e, dt):
    """Time passes: every job in the system adds dt to the sum of JCTs, every running job its
    electricity (Eq. 4)."""
    c.job_seconds[e] += (c.n_pending[e] + c.n_running[e] + c.n_delayed[e]) * dt
    running, rate = c.running[e], c.cost_per_s[e]
    spent = c.spent_usd[e]
    for i in range(c.n_running[e]):
        spent += rate[running[i]] * dt
    c.spent_usd[e] = spent


@_inline
def _handle_ends(c, e, t):
    """Running jobs whose attempt ends (``_complete``; an application failure the handler
    misjudges is restarted instead, ``_restart_misjudged``) or fails (``_fail``) by t leave the
    running set; an end at the instant of a failure wins."""
    running, end, fail = c.running[e], c.end_s[e], c.fail_s[e]
    n_run = c.n_running[e]
    i = 0
    while i < n_run:
        j = running[i]
        finished = end[j] <= t and end[j] <= fail[j]
        failed = not finished and fail[j] <= t
        if finished or failed:
            if finished and _misjudged(c, e, j):
                _restart_misjudged(c, e, j)
            elif finished:
                _complete(c, e, j)
            else:
                _fail(c, e, j)
            n_run -= 1
            running[i] = running[n_run]  # order of the running set is irrelevant
        else:
            i += 1
    c.n_running[e] = n_run


@_inline
def _handle_repairs(c, e, t):
    """Repairs that end by t give their GPUs back to their region."""
    i = 0
    while i < c.n_repairs[e]:
        if c.repair_end_s[e, i] <= t:
            r = c.repair_region[e, i]
            if c.free[e, r] <= 0 < c.free[e, r] + c.repair_gpus[e, i]:
                _freed(c, e, np.int64(r))
            c.free[e, r] += c.repair_gpus[e, i]
            c.repairing[e, r] -= c.repair_gpus[e, i]
            last = c.n_repairs[e] - 1
            c.repair_end_s[e, i] = c.repair_end_s[e, last]
            c.repair_region[e, i] = c.repair_region[e, last]
            c.repair_gpus[e, i] = c.repair_gpus[e, last]
            c.n_repairs[e] = last
        else:
            i += 1


@_inline
def _handle_requeues(c, e, t):
    """Failed jobs whose handler delay is over by t re-enter the queue at their place."""
    i = 0
    while i < c.n_delayed[e]:
        j = c.delayed[e, i]
        if c.requeue_s[e, j] <= t:
            _enqueue(c, e, j)
            c.n_delayed[e] -= 1
            c.delayed[e, i] = c.delayed[e, c.n_delayed[e]]
        else:
            i += 1


@_jit
def advance(c, e):
    """Move to the next event and process everything that happens at that instant.
    Returns False when there is no next event."""
    t_next = next_event_time(c, e)
    if t_next == np.inf:
        return False
    _accrue(c, e, t_next - c.now_s[e])
    c.now_s[e] = t_next
    _handle_ends(c, e, t_next)
    _handle_repairs(c, e, t_next)
    _handle_requeues(c, e, t_next)
    _handle_arrivals(c, e)
    return True


@_leaf
def residual_bandwidth(bw, resv, out):
    """What a policy may still use on each link in both directions: min(B-R, (B-R)^T) >= 0
    (one env's bandwidth and reservation matrices)."""
    k = bw.shape[0]
    for u in range(k):
        for v in range(k):
            out[u, v] = _residual(bw, resv, u, v)


@_jit
def scratch(kstar_max, num_regions):
    """Work space for ``job_placement``: a t_comp table long enough for any job of the env
    (``kstar_max``), and the placement kernels' (4, K) scratch rows, so that no kernel
    allocates per call."""
    tc = np.empty(kstar_max + 1)
    ws = np.empty((4, num_regions), dtype=np.int64)
    return tc, ws


@_leaf
def fill_tc(work, kstar, overhead, tc):
    """tc[L] = t_comp(L) of a job for L = 1..K* (Table I); tc[0] is unused."""
    tc[0] = np.inf
    for L in range(1, kstar + 1):
        tc[L] = t_comp_nb(work, L, overhead)


@_leaf
def job_placement(free, prices, eff, kstar, act, min_gpus, rule, tc, ws, out_path, out_alloc):
    """Apply placement rule ``rule`` to a pending job (K*, activation, min_gpus) on the free
    GPUs; (0, 0) if the rule finds nothing or fewer than min_gpus. ``tc`` holds the job's
    t_comp table (``fill_tc``), ``eff`` the residual bandwidth (``residual_bandwidth``).
    Takes one env's arrays, so that the fast path and the env share it."""
    g, n = apply_rule(rule, free, prices, eff, kstar, act, tc, out_path, out_alloc, ws, min_gpus)
    if g < min_gpus:
        return 0, 0
    return g, n


@_jit
def job_placement_kept(c, e, kstar, act, min_gpus, rule, tc, ws, out_path, out_alloc):
    """``job_placement`` on env e's free GPUs and the residual bandwidth the core keeps, with
    the Pathfinder rules on ``placement.apply_rule_kept`` (same placements, less work on many
    regions)."""
    g, n = apply_rule_kept(
        rule, c.free[e], c.price[e], c.residual_gbps[e], kstar, act, tc, out_path, out_alloc, ws, min_gpus,
        c.bandwidth_gbps[e], c.nbr_order[e], c.nbr_ready[e], c.nbr_pos[e], c.nbr_first[e], c.resv_cols[e],
        c.resv_nnz[e],
    )
    if g < min_gpus:
        return 0, 0
    return g, n


@_jit
def place(c, e, j, path, plen, alloc):
    """Start (an attempt of) pending job j on (path, alloc) now. Eq. (5)/(6) are checked
    whoever proposed the placement; returns placement.FEASIBLE (0) or the violation code,
    changing nothing then."""
    if c.status[e, j] != PENDING:
        return -1
    k = c.free.shape[1]
    g = np.int64(0)  # not a literal 0: t_comp_nb and time_to_failure compile once
    for r in range(k):
        g += alloc[r]
    if g < c.min_gpus[e, j] or g < 1:
        return -1
    tc = t_comp_nb(c.work_s[e, j], g, c.stage_overhead_s[e])
    b = min_bandwidth_nb(c.activation_gbit[e, j], tc)
    code = check_kernel(c.free[e], c.reserved_gbps[e], c.bandwidth_gbps[e], path, plen, alloc, b)
    if code != FEASIBLE:
        return code
    t_iter = pipeline_iteration_time_nb(
        path, plen, alloc, c.bandwidth_gbps[e], c.intra_gbps[e], c.activation_gbit[e, j], c.work_s[e, j], c.stage_overhead_s[e], c.microbatches[e, j]
    )
    rate = 0.0
    for r in range(k):
        c.free[e, r] -= alloc[r]
        c.alloc[e, j, r] = alloc[r]
        rate += alloc[r] * c.price[e, r]
    c.path[e, j] = -1
    for i in range(plen):
        c.path[e, j, i] = path[i]
    for i in range(plen - 1):
        u, v = path[i], path[i + 1]
        was_uv, was_vu = c.reserved_gbps[e, u, v] != 0.0, c.reserved_gbps[e, v, u] != 0.0
        c.reserved_gbps[e, u, v] += b
        c.reserved_gbps[e, v, u] += b
        _track_link(c, e, u, v, was_uv)
        _track_link(c, e, v, u, was_vu)
    c.plen[e, j] = plen
    c.gpus[e, j] = g
    c.b_gbps[e, j] = b
    c.cost_per_s[e, j] = rate * c.gpu_kw[e] / SECONDS_PER_HOUR  # $/kWh x kW -> $/h -> $/s
    t = c.now_s[e]
    if c.attempt[e, j] == 0:
        c.start_s[e, j] = t
    c.attempt_start_s[e, j] = t
    c.t_iter_s[e, j] = t_iter
    c.end_s[e, j] = t + (c.iters[e, j] - c.done_iters[e, j]) * t_iter
    a = c.attempt[e, j]
    c.fail_s[e, j] = np.inf
    if a < c.failure_draws.shape[2] and c.failure_rate_per_gpu_h[e] > 0:
        c.fail_s[e, j] = t + time_to_failure(c.failure_draws[e, j, a], c.failure_rate_per_gpu_h[e], g) * SECONDS_PER_HOUR
    c.attempt[e, j] = a + 1
    c.status[e, j] = RUNNING
    c.running[e, c.n_running[e]] = j
    c.n_running[e] += 1
    # leave the queue, keeping submit order (the queue is sorted by job index)
    n = c.n_pending[e]
    pend = c.pending[e]
    if c.queue_loose[e]:
        last = pend[n - 1]
        pend[c.queue_pos[e, j]] = last
        c.queue_pos[e, last] = c.queue_pos[e, j]
        c.n_pending[e] = n - 1
        return FEASIBLE
    i = np.searchsorted(pend[:n], j)
    if n - i > 256:  # a long queue's tail: numba copies overlapping slices as numpy does, by block
        pend[i : n - 1] = pend[i + 1 : n]
    else:
        for m in range(i, n - 1):
            pend[m] = pend[m + 1]
    c.n_pending[e] = n - 1
    return FEASIBLE


@_jit
def remaining_pred(pred_iters, done_iters):
    """Predicted iterations still to run: the prediction minus checkpointed progress (a
    restarted job's scheduler knows its checkpoint), at least 1% of the prediction."""
    return max(pred_iters - done_iters, 0.01 * pred_iters)


@_jit
def tracked_remaining_h(known, done_iters, elapsed, t_iter, full_iters, zf, zs):
    """The Metric Tracker's view of a running job: (known, hours left) from its observed
    progress fraction (of the configured steps) and observed step time; (False, nan) when
    the job's progress is not visible (SchedMate 3.2). ``zf``/``zs`` are the job's noise
    factors, ``elapsed`` the seconds since its attempt started."""
    if not known:
        return False, np.nan
    progress = done_iters + elapsed / t_iter
    frac = min(max(progress / full_iters * zf, 0.0), 1.0)
    return True, (1.0 - frac) * full_iters * t_iter * zs / SECONDS_PER_HOUR


# ------------------------------------------------------------------ queue-candidate features
# Shared by the observation (geo_gym/decision.py) and the fixed policies (geo_gym/fixed.py).

CAND_I, CAND_D, CAND_LOG_IDEAL = 0, 1, 2  # columns of candidate_features
NUM_CAND_FEATURES = 3


# Helpers called per candidate take scalars: numba counts a reference to every array a
# function receives, on every call, inlined or not (an atomic increment and decrement each),
# which on a window of candidates cost more than the features themselves.


@_leaf
def feature_scales(pend, pred_iters, done_iters, t1, b_ref, n):
    """The normalisers of Eq. (9)/(10) over the first n pending jobs: the largest predicted
    remaining E_j(1) and the largest b_j(K*)."""
    e1_max = 0.0
    b_max = 0.0
    for i in range(n):
        j = pend[i]
        e1_max = max(e1_max, remaining_pred(pred_iters[j], done_iters[j]) * t1[j])
        b_max = max(b_max, b_ref[j])
    return e1_max, b_max


@_inline
def job_priority_features(pred_iters, done_iters, t1, b_ref, e1_max, b_max):
    """A pending job's (I_j, D_j) (Eq. 9/10) as float32, normalised by the window's
    ``feature_scales``: the one place they are computed."""
    rem = remaining_pred(pred_iters, done_iters)
    f_i = np.float32(rem * t1 / e1_max if e1_max > 0 else 0.0)
    f_d = np.float32(b_ref / b_max if b_max > 0 else 0.0)
    return f_i, f_d


@_inline
def job_log_ideal(pred_iters, done_iters, tk):
    """A pending job's log1p(predicted remaining E_j(K*) in hours) as float32: the one place
    it is computed."""
    return np.float32(np.log1p(remaining_pred(pred_iters, done_iters) * tk / SECONDS_PER_HOUR))


@_jit
def _job_features(pred_iters, done_iters, t1, tk, b_ref, e1_max, b_max):
    """A pending job's (I_j, D_j, log1p(predicted E_j(K*) h)) from its own numbers, as
    float32, the precision the observation holds, so that every path orders on the very same
    numbers."""
    f_i, f_d = job_priority_features(pred_iters, done_iters, t1, b_ref, e1_max, b_max)
    return f_i, f_d, job_log_ideal(pred_iters, done_iters, tk)


@_jit
def candidate_features(c, e, n, out):
    """Features of the first n pending jobs, as float32 (exactly what the observation holds):
    I_j (Eq. 9) and D_j (Eq. 10) normalised over these candidates, log1p(predicted E_j(K*) h),
    all on *predicted remaining* work (``remaining_pred``), never the truth."""
    pend, pred, done_it, t1, tk, b_ref = c.pending[e], c.pred_iters[e], c.done_iters[e], c.t_iter_1gpu_s[e], c.t_iter_target_s[e], c.b_target_gbps[e]
    e1_max, b_max = feature_scales(pend, pred, done_it, t1, b_ref, n)
    for i in range(n):
        j = pend[i]
        out[i, CAND_I], out[i, CAND_D], out[i, CAND_LOG_IDEAL] = _job_features(
            pred[j], done_it[j], t1[j], tk[j], b_ref[j], e1_max, b_max
        )
