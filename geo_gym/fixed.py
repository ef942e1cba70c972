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

from geo_gym import costmodel, queue_index
from geo_gym.placement import FEASIBLE
from geo_gym.queue_index import key_before as _before
from geo_gym.sim import (
    CAND_D,
    CAND_I,
    CAND_LOG_IDEAL,
    NUM_CAND_FEATURES,
    PENDING,
    advance,
    alpha_kept,
    candidate_features,
    done,
    fill_tc,
    job_log_ideal,
    job_placement_kept,
    job_priority_features,
    loosen_queue,
    next_event_time,
    place,
    remaining_pred,
    scratch,
    tighten_queue,
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
    j = np.int64(pend[best])
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
    total_free = np.int64(0)  # a literal 0 would compile its callees once more
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


# ------------------------------------------------------------------ the queue index (long queues)


@_inline
def _index_entry(c, e, order, j):
    """(class value, value) of pending job j in the order's ``queue_index``: BACE-Pipe's b_j
    and predicted remaining E_j(1) (the numbers Eq. 9/10 normalise, computed as
    ``feature_scales`` and ``job_priority_features`` do), the key itself for SJF and QSSF,
    nothing for FCFS (job index = queue order)."""
    if order == ORDER_FCFS:
        return 0.0, 0.0
    if order == ORDER_SJF or order == ORDER_QSSF:
        return 0.0, _key_of(order, c.pred_iters[e, j], c.done_iters[e, j], c.t_iter_1gpu_s[e, j],
                            c.t_iter_target_s[e, j], 0.0, 0.0, 0.0, 0.0, c.k_target[e, j])
    return c.b_target_gbps[e, j], remaining_pred(c.pred_iters[e, j], c.done_iters[e, j]) * c.t_iter_1gpu_s[e, j]


@_inline
def _index_add(c, e, order, ix, j):
    """Job j enters ``ix`` (its ``room`` must be positive); False when its class is one too
    many (the caller then stops using the index)."""
    cv, v = _index_entry(c, e, order, j)
    k = queue_index.class_of(ix, cv)
    if k < 0:
        return False
    queue_index.insert(ix, k, v, np.int64(j), c.min_gpus[e, j])
    return True


@_inline
def _index_drop(c, e, order, ix, j):
    cv, v = _index_entry(c, e, order, j)
    queue_index.remove(ix, queue_index.class_of(ix, cv), v, j)


@_inline
def _class_key(order, v, cv, e1_max, b_max, a):
    """``order_key`` of an index entry of value v in the class of value cv: the entry's own
    key for SJF and QSSF; BACE-Pipe's from the float32 features ``job_priority_features``
    gives (the same expressions on the same numbers)."""
    if order != ORDER_PRIORITY:
        return v
    f_i = np.float32(v / e1_max if e1_max > 0 else 0.0)
    f_d = np.float32(cv / b_max if b_max > 0 else 0.0)
    return order_key(order, f_i, f_d, np.float32(0.0), a, 0)


@_jit
def _class_head(ix, k, order, min_g_free, stamp, e1_max, b_max, a, cur, head, head_key):
    """Class k's next job to try: its first entry from ``cur[k]`` that fits (min_gpus at most
    ``min_g_free``) and was not tried in this decision, moved to by skipping whole blocks that
    cannot fit; ``cur[k]`` is left there. For BACE-Pipe, later entries whose key rounds to the
    same (float32 features) come first when their job index is smaller: a tie of keys goes by
    queue order. Sets head[k] = (block position, entry, job) (job -1: none) and head_key[k]."""
    p, i = cur[k, 0], cur[k, 1]
    nb = ix.meta[0]
    found = False
    while p < nb:
        b = ix.order[p]
        if i >= ix.size[b] or ix.least[b] > min_g_free:
            p += 1
            i = 0
            continue
        if ix.cls[b, i] != k:
            break
        if ix.stamp[b, i] != stamp and ix.gpus[b, i] <= min_g_free:
            found = True
            break
        i += 1
    cur[k, 0], cur[k, 1] = p, i
    if not found:
        head[k, 2] = -1
        return
    cv = ix.class_value[k]
    b = ix.order[p]
    key0 = _class_key(order, ix.value[b, i], cv, e1_max, b_max, a)
    head[k, 0], head[k, 1], head[k, 2] = p, i, ix.job[b, i]
    head_key[k] = key0
    if order != ORDER_PRIORITY:
        return
    # entries of a larger value whose key rounds to key0 (keys are monotone in the value):
    # from the next entry, or past the entries of value v0 when the next one has it too
    v0 = ix.value[b, i]
    q, r = p, i + 1
    if r < ix.size[b] and ix.cls[b, r] == k and ix.value[b, r] == v0:
        q, r = queue_index.lower_bound(ix, k, v0, queue_index.LAST_JOB)
    while q < nb:
        b = ix.order[q]
        if r >= ix.size[b]:
            q += 1
            r = 0
            continue
        if ix.cls[b, r] != k or _before(key0, _class_key(order, ix.value[b, r], cv, e1_max, b_max, a)):
            return
        if ix.stamp[b, r] != stamp and ix.gpus[b, r] <= min_g_free and ix.job[b, r] < head[k, 2]:
            head[k, 0], head[k, 1], head[k, 2] = q, r, ix.job[b, r]
        r += 1


@_jit
def _decide_indexed(c, e, order, rule, ix, cur, head, head_key, tc, ws, out_path, out_alloc):
    """``_decide`` over the whole queue (no window, backfilling) read from ``ix``, the order's
    ``queue_index`` of the pending jobs: the same decision (the candidates that fit in the
    free GPUs, tried in (key, queue order) until one is placed) without a pass over the
    queue. BACE-Pipe's normalisers are each class's largest value and the largest class
    value; each class offers its next job (``_class_head``) and the best offer is tried.
    Returns the started job, -1, or -2 when alpha is outside [0, 1] (keys are then not
    monotone in the value; the caller decides by ``_decide``)."""
    if c.n_pending[e] == 0:
        return -1
    total_free = np.int64(0)  # a literal 0 would compile its callees once more
    for r in range(c.free.shape[1]):
        total_free += c.free[e, r]
    if total_free <= 0:
        return -1
    ncls = ix.meta[2]
    a = 0.0
    e1_max = 0.0
    b_max = 0.0
    if order == ORDER_PRIORITY:
        a = np.float64(np.float32(alpha_kept(c, e)))
        if not (0.0 <= a <= 1.0):
            return -2
        for k in range(ncls):
            if ix.class_count[k] > 0:
                b_max = max(b_max, ix.class_value[k])
                e1_max = max(e1_max, queue_index.class_last_value(ix, k))
    stamp = queue_index.next_stamp(ix)
    for k in range(ncls):
        head[k, 2] = -1
        if ix.class_count[k] > 0 and queue_index.class_least_gpus(ix, k) <= total_free:
            cur[k, 0], cur[k, 1] = queue_index.lower_bound(ix, k, -np.inf, -1)
            _class_head(ix, k, order, total_free, stamp, e1_max, b_max, a, cur, head, head_key)
    while True:
        best = np.int64(-1)
        for k in range(ncls):
            if head[k, 2] >= 0 and (
                best < 0 or queue_index.entry_before(head_key[k], head[k, 2], head_key[best], head[best, 2])
            ):
                best = k
        if best < 0:
            return -1
        j = head[best, 2]
        if _try_place(c, e, j, rule, tc, ws, out_path, out_alloc):
            return j
        ix.stamp[ix.order[head[best, 0]], head[best, 1]] = stamp
        _class_head(ix, best, order, total_free, stamp, e1_max, b_max, a, cur, head, head_key)


@_jit
def _index_catch_up(c, e, order, ix, first_arrival, was_out, n_out):
    """After ``advance``: the jobs it queued (arrivals from ``first_arrival``, and re-queued
    ones, which were running or delayed before: ``was_out[:n_out]``) enter the index (its
    ``room`` must be at least their number). False when it can no longer be used."""
    for j in range(first_arrival, c.next_arrival[e]):
        if not _index_add(c, e, order, ix, j):
            return False
    for m in range(n_out):
        if c.status[e, was_out[m]] == PENDING and not _index_add(c, e, order, ix, was_out[m]):
            return False
    return True


@_jit
def _index_build(c, e, order, ix):
    """``ix`` emptied, then holding every pending job (its ``room`` must be at least their
    number); False when their classes are too many."""
    queue_index.clear(ix)
    for m in range(c.n_pending[e]):
        if not _index_add(c, e, order, ix, c.pending[e, m]):
            return False
    return True


_DONE, _STUCK, _LONG, _SHORT, _ROOM, _CLASSES = 0, 1, 2, 3, 4, 5  # why a run phase stopped


@_jit
def _run_reading_queue(c, e, order, rule, window, strict, until_queue, feats, keys, tried, cand, tc, ws, out_path, out_alloc):
    """Decide by ``_decide`` until the end (_DONE), a deadlock (_STUCK) or a queue of
    ``until_queue`` jobs (_LONG)."""
    while not done(c, e):
        if c.n_pending[e] >= until_queue:
            return _LONG
        if _decide(c, e, order, rule, window, strict, feats, keys, tried, cand, tc, ws, out_path, out_alloc) < 0:
            if not advance(c, e):
                return _STUCK
    return _DONE


@_jit
def _queued_by_next_event(c, e):
    """The most jobs the next ``advance`` can queue: the running and delayed ones (failures,
    re-queues) and the arrivals at its instant."""
    n = c.n_running[e] + c.n_delayed[e]
    t = next_event_time(c, e)
    m = c.next_arrival[e]
    while m < c.n_jobs[e] and c.submit_s[e, m] <= t:
        n += 1
        m += 1
    return n


@_jit
def _run_indexed(c, e, order, rule, ix, until_queue, was_out, cur, head, head_key, feats, keys, tried, cand,
                 tc, ws, out_path, out_alloc):
    """Decide from ``ix`` (holding the queue) until the end (_DONE), a deadlock (_STUCK), a
    queue shorter than ``until_queue`` (_SHORT), an index or ``was_out`` without room for
    what the next event may queue (_ROOM: the caller grows them; the index still holds the
    queue) or too many classes (_CLASSES: the index no longer holds the queue). A decision
    that cannot use the index (alpha outside [0, 1]) is ``_decide``'s."""
    while not done(c, e):
        if c.n_pending[e] < until_queue:
            return _SHORT
        j = _decide_indexed(c, e, order, rule, ix, cur, head, head_key, tc, ws, out_path, out_alloc)
        if j == -2:  # _decide reads the queue in its order
            tighten_queue(c, e)
            j = _decide(c, e, order, rule, np.int64(0), np.bool_(False), feats, keys, tried, cand, tc, ws, out_path, out_alloc)
            loosen_queue(c, e)
        if j >= 0:
            _index_drop(c, e, order, ix, j)
            continue
        n_out = c.n_running[e] + c.n_delayed[e]
        if n_out > was_out.shape[0] or queue_index.room(ix) < _queued_by_next_event(c, e):
            return _ROOM
        first_arrival = c.next_arrival[e]
        was_out[: c.n_running[e]] = c.running[e, : c.n_running[e]]
        was_out[c.n_running[e] : n_out] = c.delayed[e, : c.n_delayed[e]]
        if not advance(c, e):
            return _STUCK
        if not _index_catch_up(c, e, order, ix, first_arrival, was_out, n_out):
            return _CLASSES
    return _DONE


# Queue lengths from which run_fixed_policy's decisions read a queue index, and below which
# they go back to reading the queue (keeping an index costs about 2 us a job; reading a queue
# of a few hundred jobs costs less: docs/performance.md).
INDEX_FROM = 1024
INDEX_UNTIL = 256


def run_fixed_policy(c, e, order, rule, window, strict=False, index_from=INDEX_FROM, index_until=INDEX_UNTIL):
    """The fast path: run the whole workload in slot e under (order, rule), backfilling unless
    ``strict`` (see ``decide``). Returns False if
    the workload deadlocks (a job that no rule can ever place). Work space is allocated once
    (one allocation instead of one per decision on a 100k-job trace). Over the whole queue
    with backfilling (window <= 0, not strict), once the queue holds ``index_from`` jobs, the
    decisions read a ``queue_index`` of the pending jobs, kept as jobs enter and leave the
    queue, until it is shorter than ``index_until``: then a decision's cost does not grow with
    the queue. Meanwhile the queue itself is loose (``sim.loosen_queue``: a start takes O(1),
    not a shift of the queue's tail); it is in submit order again whenever this returns. The
    decisions are ``_decide``'s either way (tests/test_queue_index.py).

    This driver is Python around compiled phases, which return only when the run switches
    between reading the queue and the index (rarely), so that a run whose queue stays short
    never compiles the index's code (a third of a cold ``geo_gym.simulate`` compile)."""
    e, order, rule, window = int(e), int(order), int(rule), int(window)
    strict = bool(strict)
    k = c.free.shape[1]
    n_max = c.submit_s.shape[1]
    feats = np.empty((n_max, NUM_CAND_FEATURES), dtype=np.float32)
    keys = np.empty(n_max)
    tried = np.empty(n_max, dtype=np.bool_)
    cand = np.empty(n_max, dtype=np.int64)
    out_path = np.empty(k, dtype=np.int64)
    out_alloc = np.empty(k, dtype=np.int64)
    tc, ws = scratch(c.k_target_max[e], k)
    index_from = int(index_from) if window <= 0 and not strict else n_max + 1
    index_until = min(int(index_until), index_from)  # else a queue between them would flip forever
    ix = None
    while True:
        why = _run_reading_queue(c, e, order, rule, window, strict, index_from, feats, keys, tried, cand, tc, ws,
                                 out_path, out_alloc)
        if why != _LONG:
            return why == _DONE
        if ix is None:
            ix = queue_index.new_index(4)
            cur = np.zeros((queue_index.MAX_CLASSES, 2), dtype=np.int64)
            head = np.zeros((queue_index.MAX_CLASSES, 3), dtype=np.int64)
            head_key = np.zeros(queue_index.MAX_CLASSES)
            was_out = np.empty(64, dtype=np.int32)
        if queue_index.room(ix) < c.n_pending[e]:
            ix = queue_index.grow(ix, int(c.n_pending[e]))
        if not _index_build(c, e, order, ix):
            index_from = n_max + 1  # too many classes: read the queue from now on
            continue
        loosen_queue(c, e)  # the index keeps the order: a start need not shift the queue
        why = _ROOM
        while why == _ROOM:
            why = _run_indexed(c, e, order, rule, ix, index_until, was_out, cur, head, head_key, feats, keys, tried,
                               cand, tc, ws, out_path, out_alloc)
            if why == _ROOM:
                n_out = c.n_running[e] + c.n_delayed[e]
                if n_out > was_out.shape[0]:
                    was_out = np.empty(2 * n_out, dtype=np.int32)
                need = int(_queued_by_next_event(c, e))
                if queue_index.room(ix) < need:
                    ix = queue_index.grow(ix, need)
        tighten_queue(c, e)
        if why == _CLASSES:
            index_from = n_max + 1
        elif why != _SHORT:
            return why == _DONE
