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
from geo_gym.costmodel import alpha_nb
from geo_gym.placement import FEASIBLE
from geo_gym.sim import (
    CAND_D,
    CAND_I,
    CAND_LOG_IDEAL,
    NUM_CAND_FEATURES,
    advance,
    candidate_features,
    done,
    fill_tc,
    job_placement,
    place,
    residual_bandwidth,
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
def _try_place(c, e, j, rule, eff, tc, ws, out_path, out_alloc):
    """Place pending job j with ``rule`` if the rule finds a placement; True when started."""
    fill_tc(c.work_s[e, j], c.k_target[e, j], c.stage_overhead_s[e], tc)
    g, plen = job_placement(
        c.free[e], c.price[e], eff, c.k_target[e, j], c.activation_gbit[e, j], c.min_gpus[e, j], rule, tc, ws,
        out_path, out_alloc,
    )
    return g > 0 and place(c, e, j, out_path, plen, out_alloc) == FEASIBLE


@_jit
def _decide(c, e, order, rule, window, strict, feats, keys, tried, eff, tc, ws, out_path, out_alloc):
    """``decide`` with its work space passed in. The same decision as walking
    ``order_candidates``' full order, with less work on long queues: nothing is computed when
    no GPU is free (every rule needs g >= min_gpus >= 1), FCFS needs no keys, and the other
    orders pick the best remaining candidate by an O(n) scan (ties: queue order, as the stable
    sort) and sort only after SELECT_BEFORE_SORT candidates could not be placed. ``strict``:
    only the first job in the order may start (no backfilling)."""
    n = c.n_pending[e] if window <= 0 else min(window, c.n_pending[e])
    if n == 0:
        return -1
    total_free = 0
    for r in range(c.free.shape[1]):
        total_free += c.free[e, r]
    if total_free <= 0:
        return -1
    residual_bandwidth(c.bandwidth_gbps[e], c.reserved_gbps[e], eff)
    pend = c.pending[e]
    if order == ORDER_FCFS:
        # Placing j shifts the queue, but we return at once; a failed try changes nothing.
        for i in range(1 if strict else n):
            j = pend[i]
            if _try_place(c, e, j, rule, eff, tc, ws, out_path, out_alloc):
                return j
        return -1
    _order_keys(c, e, n, order, np.float32(alpha_nb(c.reserved_gbps[e], c.bandwidth_gbps[e])), feats, keys)
    tried[:n] = False
    for _ in range(1 if strict else min(n, SELECT_BEFORE_SORT)):
        best = -1
        for i in range(n):
            if not tried[i] and (best < 0 or _before(keys[i], keys[best])):
                best = i
        tried[best] = True
        j = pend[best]
        if _try_place(c, e, j, rule, eff, tc, ws, out_path, out_alloc):
            return j
    if strict or n <= SELECT_BEFORE_SORT:
        return -1
    idx = np.argsort(keys[:n], kind="mergesort")
    for m in range(n):
        if tried[idx[m]]:
            continue  # the picks above are exactly the first entries of this order
        j = pend[idx[m]]
        if _try_place(c, e, j, rule, eff, tc, ws, out_path, out_alloc):
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
        np.empty(n_max), np.empty(n_max, dtype=np.bool_), np.empty((k, k)),
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
    eff = np.empty((k, k))
    out_path = np.empty(k, dtype=np.int64)
    out_alloc = np.empty(k, dtype=np.int64)
    tc, ws = scratch(c.k_target_max[e], c.free.shape[1])
    while not done(c, e):
        if _decide(c, e, order, rule, window, strict, feats, keys, tried, eff, tc, ws, out_path, out_alloc) < 0:
            if not advance(c, e):
                return False
    return True
