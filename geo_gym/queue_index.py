"""An ordered index over the queue, for the fixed policies' fast path (``fixed.run_fixed_policy``).

A decision walks the pending jobs in its order's key order and starts the first one its rule
can place (``fixed._decide``). Read off the queue itself that costs a pass over every pending
job per decision (BACE-Pipe's Eq. 9/10 normalisers, then the eligible jobs' keys), which grows
with the queue. This index keeps the pending jobs sorted by (class, value, job index), so a
decision reads each class's front instead:

* the value is what the order's key is a monotone function of while the job waits: nothing for
  FCFS (job index = queue order), the key itself for SJF and QSSF, and the predicted
  remaining single-GPU time E_j(1) = ``remaining_pred`` x t_iter(1) of Eq. (9) for BACE-Pipe;
* the class is BACE-Pipe's b_j of Eq. (10) (one class for the other orders). Within a class
  Eq. (12)'s key is a monotone function of the value for alpha in [0, 1], so a class's best
  job is at its front; a catalog's jobs have a handful of distinct b_j.

The jobs sit in blocks of at most ``BLOCK`` entries, kept in order (a two-level B-tree): an
insertion or a removal costs a binary search and a shift of at most ``BLOCK`` entries plus
one of the block list, and every block knows the least ``min_gpus`` of its jobs, so a walk
skips blocks whose jobs cannot fit in the free GPUs. Each entry has a stamp that a decision
sets on the jobs it has tried. The index holds entries, no per-job arrays: its size follows
the queue, not the workload.

Keys compare as ``key_before`` (a stable mergesort's order: NaN after every number), ties by
job index (= queue order), which is the order ``fixed.order_candidates`` gives.
"""

from __future__ import annotations

from typing import NamedTuple

import numba
import numpy as np

_jit = numba.njit(cache=True)
_inline = numba.njit(cache=True, inline="always")

BLOCK = 64  # entries per block (a split leaves two halves; a block under a quarter merges)
MAX_CLASSES = 64  # more distinct classes than this: the caller goes back to reading the queue
CLASS_GPUS = 8  # distinct min_gpus a class keeps count of (a catalog model has one or a few)

# meta slots
_NB, _N, _NCLS, _STAMP, _NPHYS, _NFREE = 0, 1, 2, 3, 4, 5
LAST_JOB = np.iinfo(np.int32).max  # above every job index: (c, v, LAST_JOB) follows every (c, v, j)


class QueueIndex(NamedTuple):
    meta: np.ndarray  # int64[6]: blocks in use, entries, classes, stamp, blocks ever made, free blocks
    order: np.ndarray  # int32[cap]: the blocks in key order (physical ids)
    spare: np.ndarray  # int32[cap]: emptied physical blocks, for reuse
    cls: np.ndarray  # int32[cap, BLOCK]: each entry's class
    value: np.ndarray  # float64[cap, BLOCK]: each entry's value
    job: np.ndarray  # int32[cap, BLOCK]: each entry's job index
    gpus: np.ndarray  # int32[cap, BLOCK]: each entry's min_gpus
    stamp: np.ndarray  # int32[cap, BLOCK]: the last decision that tried the entry
    size: np.ndarray  # int32[cap]: entries in each block
    least: np.ndarray  # int32[cap]: least min_gpus in each block
    # each block's last entry by its position in ``order``: the binary search over blocks reads
    # these contiguous rows rather than one cache line of each block it visits
    last_cls: np.ndarray  # int32[cap]
    last_value: np.ndarray  # float64[cap]
    last_job: np.ndarray  # int32[cap]
    class_value: np.ndarray  # float64[MAX_CLASSES]: the value that defines each class
    class_count: np.ndarray  # int64[MAX_CLASSES]: entries of each class
    class_max: np.ndarray  # float64[MAX_CLASSES]: each class's largest value, when known
    class_max_known: np.ndarray  # bool[MAX_CLASSES]
    # each class's distinct min_gpus and how many of its entries have each (CLASS_GPUS at most;
    # beyond, class_gpus_many and no least is known until the class empties)
    class_gpus: np.ndarray  # int32[MAX_CLASSES, CLASS_GPUS]
    class_gpus_n: np.ndarray  # int64[MAX_CLASSES, CLASS_GPUS]
    class_gpus_many: np.ndarray  # bool[MAX_CLASSES]


@_jit
def new_index(blocks=4):
    """An empty index with room for ``blocks`` blocks (``grow`` makes more)."""
    return QueueIndex(
        np.zeros(6, dtype=np.int64),
        np.empty(blocks, dtype=np.int32),
        np.empty(blocks, dtype=np.int32),
        np.empty((blocks, BLOCK), dtype=np.int32),
        np.empty((blocks, BLOCK), dtype=np.float64),
        np.empty((blocks, BLOCK), dtype=np.int32),
        np.empty((blocks, BLOCK), dtype=np.int32),
        np.zeros((blocks, BLOCK), dtype=np.int32),
        np.zeros(blocks, dtype=np.int32),
        np.zeros(blocks, dtype=np.int32),
        np.empty(blocks, dtype=np.int32),
        np.empty(blocks, dtype=np.float64),
        np.empty(blocks, dtype=np.int32),
        np.empty(MAX_CLASSES, dtype=np.float64),
        np.zeros(MAX_CLASSES, dtype=np.int64),
        np.empty(MAX_CLASSES, dtype=np.float64),
        np.zeros(MAX_CLASSES, dtype=np.bool_),
        np.zeros((MAX_CLASSES, CLASS_GPUS), dtype=np.int32),
        np.zeros((MAX_CLASSES, CLASS_GPUS), dtype=np.int64),
        np.zeros(MAX_CLASSES, dtype=np.bool_),
    )


@_jit
def clear(ix):
    """Empty the index (its room stays)."""
    ix.meta[:] = 0
    ix.class_count[:] = 0
    ix.class_max_known[:] = False
    ix.class_gpus_n[:] = 0
    ix.class_gpus_many[:] = False


@_inline
def key_before(x, y):
    """Strict order of keys as a stable mergesort has it (NaN after every number)."""
    if np.isnan(y):
        return not np.isnan(x)
    return x < y


@_inline
def entry_before(v1, j1, v2, j2):
    """(value, job) order within a class: ``key_before``, ties by job index."""
    if key_before(v1, v2):
        return True
    if key_before(v2, v1):
        return False
    return j1 < j2


@_inline
def _less(ix, b, i, c, v, j):
    """Entry i of block b comes before (c, v, j)."""
    ci = ix.cls[b, i]
    if ci != c:
        return ci < c
    return entry_before(ix.value[b, i], ix.job[b, i], v, j)


@_jit
def class_of(ix, value):
    """The class whose defining value equals ``value`` (made if new); -1 when there are
    MAX_CLASSES already."""
    n = ix.meta[_NCLS]
    for k in range(n):
        if ix.class_value[k] == value:
            return k
    if n == MAX_CLASSES:
        return -1
    ix.class_value[n] = value
    ix.class_count[n] = 0
    ix.class_max_known[n] = False
    ix.class_gpus_n[n] = 0
    ix.class_gpus_many[n] = False
    ix.meta[_NCLS] = n + 1
    return n


@_inline
def _last_before(ix, p, c, v, j):
    """The last entry of the block at position p comes before (c, v, j)."""
    cp = ix.last_cls[p]
    if cp != c:
        return cp < c
    return entry_before(ix.last_value[p], ix.last_job[p], v, j)


@_inline
def _set_last(ix, p):
    """Record the last entry of the block at position p (after it changed)."""
    b = ix.order[p]
    n = ix.size[b] - 1
    ix.last_cls[p] = ix.cls[b, n]
    ix.last_value[p] = ix.value[b, n]
    ix.last_job[p] = ix.job[b, n]


@_inline
def _block_of(ix, c, v, j):
    """Position (in ``order``) of the first block whose last entry is not before (c, v, j);
    the last block when every entry is before it. Needs at least one block."""
    lo, hi = 0, ix.meta[_NB] - 1
    while lo < hi:
        mid = (lo + hi) // 2
        if _last_before(ix, mid, c, v, j):
            lo = mid + 1
        else:
            hi = mid
    return lo


@_inline
def _slot_of(ix, b, c, v, j):
    """The first entry of block b that is not before (c, v, j) (its size when none)."""
    lo, hi = 0, ix.size[b]
    while lo < hi:
        mid = (lo + hi) // 2
        if _less(ix, b, mid, c, v, j):
            lo = mid + 1
        else:
            hi = mid
    return lo


@_inline
def lower_bound(ix, c, v, j):
    """(block position, entry) of the first entry not before (c, v, j); (blocks in use, 0)
    when there is none."""
    nb = ix.meta[_NB]
    if nb == 0:
        return nb, 0
    p = _block_of(ix, c, v, j)
    i = _slot_of(ix, ix.order[p], c, v, j)
    if i == ix.size[ix.order[p]]:
        return p + 1, 0
    return p, i


@_jit
def grow(ix, insertions):
    """The same index with room for at least ``insertions`` more (``room``)."""
    cap = ix.order.shape[0]
    new_cap = 2 * cap
    while new_cap - cap < insertions:
        new_cap *= 2
    big = new_index(new_cap)
    big.meta[:] = ix.meta
    big.order[:cap] = ix.order
    big.spare[:cap] = ix.spare
    big.cls[:cap] = ix.cls
    big.value[:cap] = ix.value
    big.job[:cap] = ix.job
    big.gpus[:cap] = ix.gpus
    big.stamp[:cap] = ix.stamp
    big.size[:cap] = ix.size
    big.least[:cap] = ix.least
    big.last_cls[:cap] = ix.last_cls
    big.last_value[:cap] = ix.last_value
    big.last_job[:cap] = ix.last_job
    big.class_value[:] = ix.class_value
    big.class_count[:] = ix.class_count
    big.class_max[:] = ix.class_max
    big.class_max_known[:] = ix.class_max_known
    big.class_gpus[:] = ix.class_gpus
    big.class_gpus_n[:] = ix.class_gpus_n
    big.class_gpus_many[:] = ix.class_gpus_many
    return big


@_inline
def room(ix):
    """How many insertions the index takes before it must ``grow`` (each may split a block)."""
    return ix.meta[_NFREE] + ix.order.shape[0] - ix.meta[_NPHYS]


@_inline
def _new_block(ix):
    """Physical id of an empty block (``room`` must be positive)."""
    if ix.meta[_NFREE] > 0:
        ix.meta[_NFREE] -= 1
        b = ix.spare[ix.meta[_NFREE]]
    else:
        b = ix.meta[_NPHYS]
        ix.meta[_NPHYS] += 1
    ix.size[b] = 0
    return b


@_inline
def _least(ix, b):
    m = np.iinfo(np.int32).max
    for i in range(ix.size[b]):
        m = min(m, ix.gpus[b, i])
    return m


@_inline
def _move(ix, src, s0, dst, d0, count):
    """Copy ``count`` entries from block src (from s0) to block dst (from d0)."""
    for k in range(count):
        ix.cls[dst, d0 + k] = ix.cls[src, s0 + k]
        ix.value[dst, d0 + k] = ix.value[src, s0 + k]
        ix.job[dst, d0 + k] = ix.job[src, s0 + k]
        ix.gpus[dst, d0 + k] = ix.gpus[src, s0 + k]
        ix.stamp[dst, d0 + k] = ix.stamp[src, s0 + k]


@_inline
def _shift(ix, b, i, by):
    """Entries i.. of block b move by +1 (a gap at i) or -1 (entry i goes)."""
    n = ix.size[b]
    if by > 0:
        for k in range(n - 1, i - 1, -1):
            _move(ix, b, k, b, k + 1, 1)
    else:
        for k in range(i, n - 1):
            _move(ix, b, k + 1, b, k, 1)


@_inline
def _insert_block(ix, p, b):
    """Block b enters the block order at position p (its last entry to be set)."""
    nb = ix.meta[_NB]
    for q in range(nb, p, -1):
        ix.order[q] = ix.order[q - 1]
        ix.last_cls[q] = ix.last_cls[q - 1]
        ix.last_value[q] = ix.last_value[q - 1]
        ix.last_job[q] = ix.last_job[q - 1]
    ix.order[p] = b
    ix.meta[_NB] = nb + 1


@_inline
def _drop_block(ix, p):
    """The block at position p leaves the order and is kept for reuse."""
    b = ix.order[p]
    nb = ix.meta[_NB]
    for q in range(p, nb - 1):
        ix.order[q] = ix.order[q + 1]
        ix.last_cls[q] = ix.last_cls[q + 1]
        ix.last_value[q] = ix.last_value[q + 1]
        ix.last_job[q] = ix.last_job[q + 1]
    ix.meta[_NB] = nb - 1
    ix.spare[ix.meta[_NFREE]] = b
    ix.meta[_NFREE] += 1


@_jit
def insert(ix, c, v, j, gpus):
    """Add job j (class c, value v, min_gpus ``gpus``); ``room`` must be positive."""
    p = 0
    if ix.meta[_NB] == 0:
        b = _new_block(ix)
        _insert_block(ix, 0, b)
    else:
        p = _block_of(ix, c, v, j)
        b = ix.order[p]
        if ix.size[b] == BLOCK:  # split: the upper half goes to a new block after it
            upper = _new_block(ix)
            half = BLOCK // 2
            _move(ix, b, half, upper, 0, BLOCK - half)
            ix.size[upper] = BLOCK - half
            ix.size[b] = half
            ix.least[b] = _least(ix, b)
            ix.least[upper] = _least(ix, upper)
            _insert_block(ix, p + 1, upper)
            _set_last(ix, p)
            _set_last(ix, p + 1)
            if _less(ix, b, half - 1, c, v, j):
                b = upper
                p += 1
    i = _slot_of(ix, b, c, v, j)
    _shift(ix, b, i, 1)
    ix.cls[b, i] = c
    ix.value[b, i] = v
    ix.job[b, i] = j
    ix.gpus[b, i] = gpus
    ix.stamp[b, i] = 0
    ix.least[b] = gpus if ix.size[b] == 0 else min(ix.least[b], gpus)
    ix.size[b] += 1
    _set_last(ix, p)
    ix.meta[_N] += 1
    if ix.class_count[c] == 0:
        ix.class_max[c] = v
        ix.class_max_known[c] = True
    elif ix.class_max_known[c] and key_before(ix.class_max[c], v):
        ix.class_max[c] = v
    ix.class_count[c] += 1
    _count_gpus(ix, c, gpus, 1)


@_jit
def remove(ix, c, v, j):
    """Remove job j, entered with class c and value v."""
    p, i = lower_bound(ix, c, v, j)
    b = ix.order[p] if p < ix.meta[_NB] else -1
    if b < 0 or ix.job[b, i] != j:
        raise AssertionError("queue_index.remove: the job is not in the index")
    gone = ix.gpus[b, i]
    _shift(ix, b, i, -1)
    ix.size[b] -= 1
    ix.meta[_N] -= 1
    ix.class_count[c] -= 1
    _count_gpus(ix, c, gone, -1)
    if not key_before(v, ix.class_max[c]):  # the largest went (or one equal to it)
        ix.class_max_known[c] = False
    if ix.size[b] == 0:
        _drop_block(ix, p)
        return
    _set_last(ix, p)
    if gone == ix.least[b]:
        ix.least[b] = _least(ix, b)
    if ix.size[b] < BLOCK // 4:  # merge with a neighbour that has room
        if p + 1 < ix.meta[_NB] and ix.size[b] + ix.size[ix.order[p + 1]] <= BLOCK:
            _merge(ix, p)
        elif p > 0 and ix.size[ix.order[p - 1]] + ix.size[b] <= BLOCK:
            _merge(ix, p - 1)


@_jit
def _merge(ix, p):
    """The block at p + 1 joins the block at p."""
    a, b = ix.order[p], ix.order[p + 1]
    _move(ix, b, 0, a, ix.size[a], ix.size[b])
    ix.size[a] += ix.size[b]
    ix.least[a] = min(ix.least[a], ix.least[b])
    _set_last(ix, p)
    _drop_block(ix, p + 1)


@_inline
def _count_gpus(ix, c, gpus, by):
    """Class c has ``by`` (+1 or -1) more entries needing ``gpus``."""
    if ix.class_count[c] == 0:  # emptied: start counting afresh
        ix.class_gpus_n[c] = 0
        ix.class_gpus_many[c] = False
        return
    if ix.class_gpus_many[c]:
        return
    free_slot = -1
    for s in range(CLASS_GPUS):
        if ix.class_gpus_n[c, s] > 0 and ix.class_gpus[c, s] == gpus:
            ix.class_gpus_n[c, s] += by
            return
        if ix.class_gpus_n[c, s] == 0 and free_slot < 0:
            free_slot = s
    if free_slot < 0:
        ix.class_gpus_many[c] = True
    else:
        ix.class_gpus[c, free_slot] = gpus
        ix.class_gpus_n[c, free_slot] = by


@_jit
def class_least_gpus(ix, c):
    """The least min_gpus of class c's entries; 0 when it has more distinct ones than it counts
    (then a caller cannot skip the class)."""
    if ix.class_gpus_many[c]:
        return 0
    least = np.iinfo(np.int32).max
    for s in range(CLASS_GPUS):
        if ix.class_gpus_n[c, s] > 0:
            least = min(least, ix.class_gpus[c, s])
    return least


@_jit
def next_stamp(ix):
    """A fresh stamp for a decision's tries (every entry's stamp differs from it)."""
    s = ix.meta[_STAMP] + 1
    if s >= np.iinfo(np.int32).max:  # wrap: clear every stamp
        ix.stamp[:] = 0
        s = 1
    ix.meta[_STAMP] = s
    return s


@_jit
def class_last_value(ix, c):
    """The largest value of class c (which must have entries)."""
    if ix.class_max_known[c]:
        return ix.class_max[c]
    p, i = lower_bound(ix, c + 1, -np.inf, -1)
    if i > 0:
        v = ix.value[ix.order[p], i - 1]
    else:
        b = ix.order[p - 1]
        v = ix.value[b, ix.size[b] - 1]
    ix.class_max[c] = v
    ix.class_max_known[c] = True
    return v


@_jit
def entries(ix):
    """(class, value, job, min_gpus) of every entry, in order (for tests)."""
    n = ix.meta[_N]
    out_c = np.empty(n, dtype=np.int64)
    out_v = np.empty(n)
    out_j = np.empty(n, dtype=np.int64)
    out_g = np.empty(n, dtype=np.int64)
    m = 0
    for p in range(ix.meta[_NB]):
        b = ix.order[p]
        for i in range(ix.size[b]):
            out_c[m], out_v[m], out_j[m], out_g[m] = ix.cls[b, i], ix.value[b, i], ix.job[b, i], ix.gpus[b, i]
            m += 1
    return out_c, out_v, out_j, out_g
