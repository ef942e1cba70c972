"""The discrete-event simulator core: arrivals, starts, completions, metrics.

One core drives everything: the Gymnasium env (one simulation), the native vector env (N
simulations in one compiled call) and the fast whole-workload path ``geo_gym.simulate``. Its
state is a ``Core`` namedtuple of numpy arrays with a leading env axis ``e``; numba-compiled
functions read and update it in place, so stepping N simulations is one compiled loop.

Event semantics (paper III-A): a job arrives at ``submit``, waits W_j in the queue, is placed
once (non-preemptive: path and GPU count fixed until it ends, III-B2), runs E_j = I_j t_iter
(Eq. 2) and holds its GPUs and its b_j reservation on every crossed link (both directions,
Eq. 6) until then. Electricity accrues while GPUs are held (Eq. 4), never while queued.
At one instant, completions are processed before arrivals; a scheduling point is any instant
after events; the core advances to the next event only when the driver says "wait" (or nobody
can place anything).

The queue is kept in submit order; ``pend[e, :n_pend[e]]`` are the pending job indices.
Job indices are the workload's jobs sorted by submit time (stable), see ``load``.
"""

from __future__ import annotations

from collections import namedtuple

import numba
import numpy as np

from geo_gym import costmodel
from geo_gym.costmodel import alpha_nb, min_bandwidth_nb, pipeline_iteration_time_nb, t_comp_nb
from geo_gym.placement import FEASIBLE, apply_rule, check_kernel
from geo_gym.scenarios import Scenario
from geo_gym.workload import profile

_jit = numba.njit(cache=True)

PENDING_FUTURE, PENDING, RUNNING, DONE = 0, 1, 2, 3

_STATIC = {  # name: (shape suffix, dtype); "K" regions, "J" jobs
    "cap": ("K", np.int64),
    "price": ("K", np.float64),
    "bw": ("KK", np.float64),
    "intra": ("", np.float64),
    "gpu_kw": ("", np.float64),
    "overhead": ("", np.float64),
    "n_jobs": ("", np.int64),
    "submit": ("J", np.float64),
    "work": ("J", np.float64),
    "mb": ("J", np.int64),
    "iters": ("J", np.float64),  # iterations the job actually runs (its fate, hidden)
    "pred_iters": ("J", np.float64),  # what schedulers are told (a prediction)
    "act": ("J", np.float64),
    "kstar": ("J", np.int64),
    "min_gpus": ("J", np.int64),
    "e1_pred": ("J", np.float64),  # predicted E_j(1), Eq. (9)
    "ideal_pred": ("J", np.float64),  # predicted E_j(K*) in one region
    "b_ref": ("J", np.float64),  # b_j at K*, the Eq. (10) sensitivity input
    "t1": ("J", np.float64),  # t_iter on one GPU
    "tk": ("J", np.float64),  # t_iter on K* GPUs in one region
}
_DYNAMIC = {
    "t": ("", np.float64),
    "free": ("K", np.int64),
    "resv": ("KK", np.float64),
    "status": ("J", np.int8),
    "next_arr": ("", np.int64),
    "pend": ("J", np.int64),
    "n_pend": ("", np.int64),
    "run": ("J", np.int64),
    "n_run": ("", np.int64),
    "n_done": ("", np.int64),
    "start": ("J", np.float64),
    "end": ("J", np.float64),
    "path": ("JK", np.int64),
    "plen": ("J", np.int64),
    "alloc": ("JK", np.int64),
    "gpus": ("J", np.int64),
    "bj": ("J", np.float64),
    "rate": ("J", np.float64),  # $/s while running
    "cost": ("J", np.float64),
    "area": ("", np.float64),  # integral of (jobs in system) dt: sum of JCT once all end
    "spent": ("", np.float64),  # electricity spent so far, $
}
Core = namedtuple("Core", list(_STATIC) + list(_DYNAMIC))


def allocate(num_envs: int, num_regions: int, max_jobs: int) -> Core:
    """Zeroed state for ``num_envs`` simulations of ``num_regions`` regions, ``max_jobs`` jobs."""
    sizes = {"K": num_regions, "J": max_jobs}
    arrays = {}
    for name, (suffix, dtype) in {**_STATIC, **_DYNAMIC}.items():
        shape = (num_envs,) + tuple(sizes[s] for s in suffix)
        arrays[name] = np.zeros(shape, dtype=dtype)
    return Core(**arrays)


def grow(core: Core, max_jobs: int) -> Core:
    """A copy of ``core`` with room for ``max_jobs`` jobs per env (state kept)."""
    n, k = core.cap.shape
    if max_jobs <= core.submit.shape[1]:
        return core
    new = allocate(n, k, max_jobs)
    j = core.submit.shape[1]
    for name, (suffix, _) in {**_STATIC, **_DYNAMIC}.items():
        src, dst = getattr(core, name), getattr(new, name)
        if suffix.startswith("J"):
            dst[:, :j] = src
        else:
            dst[...] = src
    new.path[:, j:] = -1
    return new


def load(core: Core, e: int, scenario: Scenario, pred_iters: np.ndarray | None = None) -> list:
    """Write ``scenario`` into slot ``e`` of ``core`` and reset it. Returns the jobs in core
    index order (sorted by submit time, stable). ``pred_iters`` (in that order) replaces the
    oracle prediction; the uncertainty layer supplies it."""
    cl = scenario.cluster
    k = cl.num_regions
    if core.cap.shape[1] != k:
        raise ValueError(f"core has {core.cap.shape[1]} regions, scenario {k}")
    jobs = sorted(scenario.jobs, key=lambda j: j.submit)
    if len(jobs) > core.submit.shape[1]:
        raise ValueError(
            f"scenario has {len(jobs)} jobs, more than max_jobs={core.submit.shape[1]}"
        )
    core.cap[e] = cl.capacities
    core.price[e] = cl.prices
    core.bw[e] = cl.bandwidth
    core.intra[e] = cl.intra_region_gbps
    core.gpu_kw[e] = cl.gpu.power_kw
    core.overhead[e] = scenario.stage_overhead
    core.n_jobs[e] = len(jobs)
    n = len(jobs)
    profiles = [profile(j, cl.gpu, scenario.stage_overhead, cl.intra_region_gbps) for j in jobs]
    min_gpus = np.array([j.min_gpus for j in jobs], dtype=np.int64)
    if n and min_gpus.max() > cl.capacities.sum():
        bad = jobs[int(min_gpus.argmax())]
        raise ValueError(
            f"job {bad.name!r}: min_gpus={bad.min_gpus} exceeds the cluster's "
            f"{int(cl.capacities.sum())} GPUs"
        )
    columns = {
        "submit": [j.submit for j in jobs],
        "work": [p.work for p in profiles],
        "mb": [p.num_microbatches for p in profiles],
        "iters": [p.iterations for p in profiles],
        "act": [p.activation_gbit for p in profiles],
        "kstar": [p.k_star for p in profiles],
        "b_ref": [p.b_j(p.k_star) for p in profiles],
        "t1": [p.e1 / p.iterations for p in profiles],
        "tk": [p.ideal_duration / p.iterations for p in profiles],
    }
    for name, values in columns.items():
        arr = getattr(core, name)
        arr[e] = 0
        arr[e, :n] = values
    core.min_gpus[e] = 1
    core.min_gpus[e, :n] = min_gpus
    set_predictions(core, e, core.iters[e, :n].copy() if pred_iters is None else pred_iters)
    reset(core, e)
    return jobs


def set_predictions(core: Core, e: int, pred_iters) -> None:
    """Predicted iterations -> the predicted E_j(1) and E_j(K*) every policy and observation use."""
    n = int(core.n_jobs[e])
    pred = np.asarray(pred_iters, dtype=np.float64)
    if pred.shape != (n,) or not np.all(pred > 0):
        raise ValueError(f"pred_iters must be {n} positive values, got shape {pred.shape}")
    core.pred_iters[e] = 0.0
    core.pred_iters[e, :n] = pred
    core.e1_pred[e] = core.pred_iters[e] * core.t1[e]
    core.ideal_pred[e] = core.pred_iters[e] * core.tk[e]


@_jit
def reset(c, e):
    """Empty cluster at t = 0; jobs submitted at 0 are queued."""
    c.t[e] = 0.0
    c.free[e] = c.cap[e]
    c.resv[e] = 0.0
    c.status[e] = PENDING_FUTURE
    c.next_arr[e] = 0
    c.n_pend[e] = 0
    c.n_run[e] = 0
    c.n_done[e] = 0
    c.start[e] = np.nan
    c.end[e] = np.nan
    c.path[e] = -1
    c.plen[e] = 0
    c.alloc[e] = 0
    c.gpus[e] = 0
    c.bj[e] = 0.0
    c.rate[e] = 0.0
    c.cost[e] = 0.0
    c.area[e] = 0.0
    c.spent[e] = 0.0
    _arrivals(c, e)


@_jit
def _arrivals(c, e):
    n = c.n_jobs[e]
    while c.next_arr[e] < n and c.submit[e, c.next_arr[e]] <= c.t[e]:
        j = c.next_arr[e]
        c.status[e, j] = PENDING
        c.pend[e, c.n_pend[e]] = j
        c.n_pend[e] += 1
        c.next_arr[e] += 1


@_jit
def next_event_time(c, e):
    """The next arrival or completion; inf when nothing more will happen by itself."""
    t_next = np.inf
    if c.next_arr[e] < c.n_jobs[e]:
        t_next = c.submit[e, c.next_arr[e]]
    for i in range(c.n_run[e]):
        t_next = min(t_next, c.end[e, c.run[e, i]])
    return t_next


@_jit
def done(c, e):
    return c.n_done[e] == c.n_jobs[e]


@_jit
def _release(c, e, j):
    for r in range(c.free.shape[1]):
        c.free[e, r] += c.alloc[e, j, r]
    for i in range(c.plen[e, j] - 1):
        u = c.path[e, j, i]
        v = c.path[e, j, i + 1]
        c.resv[e, u, v] = max(0.0, c.resv[e, u, v] - c.bj[e, j])
        c.resv[e, v, u] = max(0.0, c.resv[e, v, u] - c.bj[e, j])


@_jit
def advance(c, e):
    """Move to the next event, process every completion, then every arrival, at that instant.
    Returns False when there is no next event."""
    t_next = next_event_time(c, e)
    if t_next == np.inf:
        return False
    dt = t_next - c.t[e]
    c.area[e] += (c.n_pend[e] + c.n_run[e]) * dt
    for i in range(c.n_run[e]):
        c.spent[e] += c.rate[e, c.run[e, i]] * dt
    c.t[e] = t_next
    i = 0
    while i < c.n_run[e]:
        j = c.run[e, i]
        if c.end[e, j] <= t_next:
            _release(c, e, j)
            c.status[e, j] = DONE
            c.cost[e, j] = c.rate[e, j] * (c.end[e, j] - c.start[e, j])
            c.n_done[e] += 1
            c.n_run[e] -= 1
            c.run[e, i] = c.run[e, c.n_run[e]]  # order of the running set is irrelevant
        else:
            i += 1
    _arrivals(c, e)
    return True


@_jit
def residual_bandwidth(c, e, out):
    """What a policy may still use on each link in both directions: min(B-R, (B-R)^T) >= 0."""
    k = c.bw.shape[1]
    for u in range(k):
        for v in range(k):
            a = c.bw[e, u, v] - c.resv[e, u, v]
            b = c.bw[e, v, u] - c.resv[e, v, u]
            out[u, v] = max(0.0, min(a, b))


@_jit
def scratch(c, e):
    """Work space for ``job_placement``: a t_comp table long enough for any job of env e, and
    the placement kernels' (4, K) scratch rows, so that no kernel allocates per call."""
    tc = np.empty(c.kstar[e].max() + 1)
    ws = np.empty((4, c.free.shape[1]), dtype=np.int64)
    return tc, ws


@_jit
def fill_tc(c, e, j, tc):
    """tc[L] = t_comp(L) of job j for L = 1..K* (Table I); tc[0] is unused."""
    tc[0] = np.inf
    for L in range(1, c.kstar[e, j] + 1):
        tc[L] = t_comp_nb(c.work[e, j], L, c.overhead[e])


@_jit
def job_placement(c, e, j, rule, eff, tc, ws, out_path, out_alloc):
    """Apply placement rule ``rule`` to pending job j on the current state; (0, 0) if the rule
    finds nothing or fewer than the job's min_gpus. ``tc`` holds job j's t_comp table
    (``fill_tc``), ``eff`` the residual bandwidth (``residual_bandwidth``)."""
    g, n = apply_rule(
        rule, c.free[e], c.price[e], eff, c.kstar[e, j], c.act[e, j], tc, out_path, out_alloc, ws
    )
    if g < c.min_gpus[e, j]:
        return 0, 0
    return g, n


@_jit
def place(c, e, j, path, plen, alloc):
    """Start pending job j on (path, alloc) now. Eq. (5)/(6) are checked whoever proposed the
    placement; returns placement.FEASIBLE (0) or the violation code, changing nothing then."""
    if c.status[e, j] != PENDING:
        return -1
    k = c.free.shape[1]
    g = 0
    for r in range(k):
        g += alloc[r]
    if g < c.min_gpus[e, j] or g < 1:
        return -1
    tc = t_comp_nb(c.work[e, j], g, c.overhead[e])
    b = min_bandwidth_nb(c.act[e, j], tc)
    code = check_kernel(c.free[e], c.resv[e], c.bw[e], path, plen, alloc, b)
    if code != FEASIBLE:
        return code
    t_iter = pipeline_iteration_time_nb(
        path, plen, alloc, c.bw[e], c.intra[e], c.act[e, j], c.work[e, j], c.overhead[e], c.mb[e, j]
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
        c.resv[e, path[i], path[i + 1]] += b
        c.resv[e, path[i + 1], path[i]] += b
    c.plen[e, j] = plen
    c.gpus[e, j] = g
    c.bj[e, j] = b
    c.rate[e, j] = rate * c.gpu_kw[e] / 3600.0  # $/kWh x kW -> $/h -> $/s
    c.start[e, j] = c.t[e]
    c.end[e, j] = c.t[e] + c.iters[e, j] * t_iter
    c.status[e, j] = RUNNING
    c.run[e, c.n_run[e]] = j
    c.n_run[e] += 1
    # leave the queue, keeping submit order
    n = c.n_pend[e]
    i = 0
    while c.pend[e, i] != j:
        i += 1
    for m in range(i, n - 1):
        c.pend[e, m] = c.pend[e, m + 1]
    c.n_pend[e] = n - 1
    return FEASIBLE


# ------------------------------------------------------------------ decisions shared by all paths

ORDER_FCFS, ORDER_SJF, ORDER_PRIORITY = 0, 1, 2
CAND_I, CAND_D, CAND_LOG_IDEAL = 0, 1, 2  # columns of candidate_features
NUM_CAND_FEATURES = 3


@_jit
def candidate_features(c, e, n, out):
    """Features of the first n pending jobs, as float32 (exactly what the observation holds):
    I_j (Eq. 9) and D_j (Eq. 10) normalised over these candidates, log1p(predicted E_j(K*) h)."""
    e1_max = 0.0
    b_max = 0.0
    for i in range(n):
        j = c.pend[e, i]
        e1_max = max(e1_max, c.e1_pred[e, j])
        b_max = max(b_max, c.b_ref[e, j])
    for i in range(n):
        j = c.pend[e, i]
        out[i, CAND_I] = c.e1_pred[e, j] / e1_max if e1_max > 0 else 0.0
        out[i, CAND_D] = c.b_ref[e, j] / b_max if b_max > 0 else 0.0
        out[i, CAND_LOG_IDEAL] = np.log1p(c.ideal_pred[e, j] / 3600.0)


@_jit
def order_candidates(order, feats, n, alpha32):
    """Queue order over n candidates from their float32 features: FCFS (as queued), SJF
    (shortest predicted duration first) or BACE-Pipe's priority (Eq. 12, highest first).
    Ties keep queue order (stable sort), so every path orders identically."""
    if order == ORDER_FCFS:
        return np.arange(n)
    key = np.empty(n)
    a = np.float64(alpha32)
    for i in range(n):
        if order == ORDER_SJF:
            key[i] = np.float64(feats[i, CAND_LOG_IDEAL])
        else:
            key[i] = -costmodel.priority_nb(
                np.float64(feats[i, CAND_I]), np.float64(feats[i, CAND_D]), a
            )
    return np.argsort(key, kind="mergesort")


@_jit
def decide(c, e, order, rule, window, feats, eff, out_path, out_alloc):
    """A fixed policy's decision at the current instant: walk the first ``window`` pending jobs
    (all when window <= 0) in ``order`` and start the first one ``rule`` can place
    (backfilling). Returns the started job index or -1."""
    n = c.n_pend[e] if window <= 0 else min(window, c.n_pend[e])
    if n == 0:
        return -1
    candidate_features(c, e, n, feats)
    alpha32 = np.float32(alpha_nb(c.resv[e], c.bw[e]))
    residual_bandwidth(c, e, eff)
    idx = order_candidates(order, feats, n, alpha32)
    tc, ws = scratch(c, e)
    for m in range(n):
        j = c.pend[e, idx[m]]
        fill_tc(c, e, j, tc)
        g, plen = job_placement(c, e, j, rule, eff, tc, ws, out_path, out_alloc)
        if g > 0:
            code = place(c, e, j, out_path, plen, out_alloc)
            if code == FEASIBLE:
                return j
    return -1


@_jit
def run_fixed_policy(c, e, order, rule, window):
    """The fast path: run the whole workload in slot e under (order, rule). Returns False if
    the workload deadlocks (a job that no rule can ever place)."""
    k = c.free.shape[1]
    feats = np.empty((c.submit.shape[1], NUM_CAND_FEATURES), dtype=np.float32)
    eff = np.empty((k, k))
    out_path = np.empty(k, dtype=np.int64)
    out_alloc = np.empty(k, dtype=np.int64)
    while not done(c, e):
        if decide(c, e, order, rule, window, feats, eff, out_path, out_alloc) < 0:
            if not advance(c, e):
                return False
    return True
