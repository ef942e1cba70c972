"""Fixed policies on the simulator core: a queue order x a placement rule, with backfilling.

The baselines of ``baselines/`` (BACE-Pipe and its ablations, LCF, LDF, CR-LCF, CR-LDF, FCFS,
SJF, QSSF) decide here on the compiled fast path (``run_fixed_policy``, used by ``geo_gym.simulate``);
through the env they read the same candidate features from the observation and order them
with the same ``order_key``, so both paths decide identically (tests/test_baselines.py).
At a scheduling point a policy walks the pending jobs in its order and starts the first one its
rule can place (backfilling, docs/design.md), or with ``strict`` only the first job in its order.
"""

from __future__ import annotations

import numba
import numpy as np

from geo_gym import costmodel
from geo_gym.placement import FEASIBLE
from geo_gym.sim import (
    CAND_D,
    CAND_I,
    CAND_LOG_IDEAL,
    NUM_CAND_FEATURES,
    advance,
    alpha_kept,
    candidate_features,
    done,
    fill_tc,
    job_log_ideal,
    job_placement_kept,
    job_priority_features,
    place,
    remaining_pred,
    scratch,
)

_jit = numba.njit(cache=True)
_inline = numba.njit(cache=True, inline="always")

ORDER_FCFS, ORDER_SJF, ORDER_PRIORITY, ORDER_QSSF = 0, 1, 2, 3


@_inline
def order_key(order, f_i, f_d, f_log, a, gpus):
    """A candidate's sort key from its float32 features and its k_target ``gpus`` (ascending =
    earlier): SJF its log1p(predicted E_j(K*) h); QSSF its predicted GPU time, gpus x the
    predicted hours that f_log holds (Helios, Hu et al. SC'21: quasi-shortest-service-first
    orders by GPUs requested x predicted duration); BACE-Pipe minus its Eq. (12) priority at
    alpha ``a``. The one place both paths compute it, so they order identically."""
    if order == ORDER_SJF:
        return np.float64(f_log)
    if order == ORDER_QSSF:
        return np.float64(gpus) * np.expm1(np.float64(f_log))
    return -costmodel.priority_nb(np.float64(f_i), np.float64(f_d), a)


@_jit
def order_candidates(order, feats, n, alpha32, gpus):
    """Queue order over n candidates from their float32 features (``sim.candidate_features``)
    and their k_target ``gpus``: FCFS (as queued), SJF (shortest predicted duration first),
    QSSF (least predicted GPU time first) or BACE-Pipe's priority (Eq. 12, highest first).
    Ties keep queue order (stable sort), so every path orders identically."""
    if order == ORDER_FCFS:
        return np.arange(n)
    key = np.empty(n)
    a = np.float64(alpha32)
    for i in range(n):
        key[i] = order_key(order, feats[i, CAND_I], feats[i, CAND_D], feats[i, CAND_LOG_IDEAL], a, gpus[i])
    return np.argsort(key, kind="mergesort")


# How many candidates ``_decide`` picks one by one (an O(n) scan each) before it sorts the
# rest: normally the first pick is placed, so the O(n log n) sort of the whole queue is rare.
SELECT_BEFORE_SORT = 8


@_jit
def _order_keys(c, e, n, order, alpha32, feats, keys):
    """keys[i] for the first n pending jobs: ``order_key`` of their ``candidate_features``
    (written into ``feats``, scratch of at least n rows)."""
    a = np.float64(alpha32)
    candidate_features(c, e, n, feats)
    pend, k_target = c.pending[e], c.k_target[e]
    for i in range(n):
        keys[i] = order_key(order, feats[i, CAND_I], feats[i, CAND_D], feats[i, CAND_LOG_IDEAL], a, k_target[pend[i]])


@_jit
def _before(x, y):
    """Strict order of keys as a stable mergesort has it (NaN after every number)."""
    if np.isnan(y):
        return not np.isnan(x)
    return x < y


@_jit
def _try_place(c, e, j, rule, tc, ws, out_path, out_alloc):
    """Place pending job j with ``rule`` on the residual bandwidth (``c.residual_gbps``, kept
    by the core) if the rule finds a placement; True when started."""
    fill_tc(c.work_s[e, j], c.k_target[e, j], c.stage_overhead_s[e], tc)
    g, plen = job_placement_kept(
        c, e, c.k_target[e, j], c.activation_gbit[e, j], c.min_gpus[e, j], rule, tc, ws, out_path, out_alloc
    )
    return g > 0 and place(c, e, j, out_path, plen, out_alloc) == FEASIBLE


@_inline
def _key_of(order, pred, done_it, t1, tk, b_ref, e1_max, b_max, a, gpus):
    """``order_key`` of one pending job from its own numbers and the window's normalisers:
    the very float32 features ``sim.candidate_features`` writes, computing only those the
    order reads (BACE-Pipe's priority needs no log1p, SJF and QSSF no I_j, D_j)."""
    if order == ORDER_SJF or order == ORDER_QSSF:
        f_log = job_log_ideal(pred, done_it, tk)
        return order_key(order, np.float32(0.0), np.float32(0.0), f_log, a, gpus)
    f_i, f_d = job_priority_features(pred, done_it, t1, b_ref, e1_max, b_max)
    return order_key(order, f_i, f_d, np.float32(0.0), a, gpus)


@_jit
def _decide_strict(c, e, order, rule, n, total_free, feats, keys, tc, ws, out_path, out_alloc):
    """``_decide`` with ``strict``: only the first job in the order over the whole window may
    start; when it needs more GPUs than are free in all regions together, nothing starts."""
    pend = c.pending[e]
    if order == ORDER_FCFS:
        best = 0
    else:
        _order_keys(c, e, n, order, np.float32(alpha_kept(c, e)), feats, keys)
        best = 0
        for i in range(1, n):
            if _before(keys[i], keys[best]):
                best = i
    j = pend[best]
    if c.min_gpus[e, j] > total_free:
        return -1
    if _try_place(c, e, j, rule, tc, ws, out_path, out_alloc):
        return j
    return -1


@_jit
def _decide(c, e, order, rule, window, strict, feats, keys, tried, cand, tc, ws, out_path, out_alloc):
    """``decide`` with its work space passed in. The same decision as walking
    ``order_candidates``' full order and trying each job in turn, with less work on long
    queues:

    * nothing is computed when no GPU is free (every rule needs g >= min_gpus >= 1);
    * a candidate whose ``min_gpus`` exceeds the free GPUs of all regions together is never
      tried and gets no key: ``place`` refuses a placement that holds more GPUs than are free
      in some region (Eq. 5) or fewer than ``min_gpus``, so its try would fail whatever the
      rule, and a failed try changes nothing. The stable order restricted to the other
      candidates is their own stable order, so its first placeable job is the same;
    * FCFS needs no keys; the other orders compute the normalisers of Eq. (9)/(10) over the
      whole window (they depend on every candidate) but the keys of the eligible candidates
      only, pick the best remaining one by an O(n) scan (ties: queue order, as the stable
      sort) and sort only after SELECT_BEFORE_SORT of them could not be placed.

    ``strict``: only the first job in the order may start (no backfilling, ``_decide_strict``).
    ``cand`` (their job indices, in queue order), ``keys`` and ``tried`` are indexed by eligible
    candidate."""
    n = c.n_pending[e] if window <= 0 else min(window, c.n_pending[e])
    if n == 0:
        return -1
    total_free = 0
    for r in range(c.free.shape[1]):
        total_free += c.free[e, r]
    if total_free <= 0:
        return -1
    if strict:
        return _decide_strict(c, e, order, rule, n, total_free, feats, keys, tc, ws, out_path, out_alloc)
    pend, min_g = c.pending[e], c.min_gpus[e]
    pred, done_it, t1, tk, b_ref, k_target = (
        c.pred_iters[e], c.done_iters[e], c.t_iter_1gpu_s[e], c.t_iter_target_s[e], c.b_target_gbps[e], c.k_target[e]
    )
    # One pass over the window: the eligible candidates (``cand``: job indices, in queue
    # order) and, for the priority order, the normalisers (``sim.feature_scales``' maxima).
    priority = order != ORDER_FCFS and order != ORDER_SJF and order != ORDER_QSSF
    e1_max = 0.0
    b_max = 0.0
    m = 0
    for i in range(n):
        j = pend[i]
        if priority:
            e1_max = max(e1_max, remaining_pred(pred[j], done_it[j]) * t1[j])
            b_max = max(b_max, b_ref[j])
        if min_g[j] <= total_free:
            cand[m] = j
            m += 1
    if m == 0:
        return -1
    if order == ORDER_FCFS:
        # Placing j shifts the queue, but we return at once; a failed try changes nothing.
        for q in range(m):
            j = cand[q]
            if _try_place(c, e, j, rule, tc, ws, out_path, out_alloc):
                return j
        return -1
    a = np.float64(np.float32(alpha_kept(c, e)))
    best = 0
    for q in range(m):  # the keys, and the first pick with them
        j = cand[q]
        keys[q] = _key_of(order, pred[j], done_it[j], t1[j], tk[j], b_ref[j], e1_max, b_max, a, k_target[j])
        tried[q] = False
        if _before(keys[q], keys[best]):
            best = q
    for pick in range(min(m, SELECT_BEFORE_SORT)):
        if pick > 0:
            best = -1
            for q in range(m):
                if not tried[q] and (best < 0 or _before(keys[q], keys[best])):
                    best = q
        tried[best] = True
        j = cand[best]
        if _try_place(c, e, j, rule, tc, ws, out_path, out_alloc):
            return j
    if m <= SELECT_BEFORE_SORT:
        return -1
    idx = np.argsort(keys[:m], kind="mergesort")
    for q in range(m):
        if tried[idx[q]]:
            continue  # the picks above are exactly the first entries of this order
        j = cand[idx[q]]
        if _try_place(c, e, j, rule, tc, ws, out_path, out_alloc):
            return j
    return -1


@_jit
def decide(c, e, order, rule, window, strict=False):
    """A fixed policy's decision at the current instant: walk the first ``window`` pending jobs
    (all when window <= 0) in ``order`` (``order_candidates`` on ``candidate_features``) and
    start the first one ``rule`` can place (backfilling), or with ``strict`` only the first
    job in the order. Returns the started job index or -1 (its placement is then the job's row
    of ``c.path`` / ``c.alloc``)."""
    k = c.free.shape[1]
    n_max = c.submit_s.shape[1]
    tc, ws = scratch(c.k_target_max[e], k)
    return _decide(
        c, e, order, rule, window, strict, np.empty((n_max, NUM_CAND_FEATURES), dtype=np.float32),
        np.empty(n_max), np.empty(n_max, dtype=np.bool_), np.empty(n_max, dtype=np.int64),
        tc, ws, np.empty(k, dtype=np.int64), np.empty(k, dtype=np.int64),
    )


@_jit
def run_fixed_policy(c, e, order, rule, window, strict=False):
    """The fast path: run the whole workload in slot e under (order, rule), backfilling unless
    ``strict`` (see ``decide``). Returns False if
    the workload deadlocks (a job that no rule can ever place). Work space is allocated once
    (one allocation instead of one per decision on a 100k-job trace)."""
    k = c.free.shape[1]
    n_max = c.submit_s.shape[1]
    feats = np.empty((n_max, NUM_CAND_FEATURES), dtype=np.float32)
    keys = np.empty(n_max)
    tried = np.empty(n_max, dtype=np.bool_)
    cand = np.empty(n_max, dtype=np.int64)
    out_path = np.empty(k, dtype=np.int64)
    out_alloc = np.empty(k, dtype=np.int64)
    tc, ws = scratch(c.k_target_max[e], c.free.shape[1])
    while not done(c, e):
        if _decide(c, e, order, rule, window, strict, feats, keys, tried, cand, tc, ws, out_path, out_alloc) < 0:
            if not advance(c, e):
                return False
    return True
