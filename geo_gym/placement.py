"""Placement rules: BACE-Pipe's Alg. 1 (Pathfinder) and Alg. 2 (Cost-Min allocator), the
baselines' rules of paper section IV-A, and the Eq. (5)/(6) feasibility check.

Each rule is a numba-compiled kernel over small arrays (the simulator calls them at every
decision), wrapped by a plain Python function with a readable signature. A rule sees the
*free* GPUs per region and a bandwidth matrix (for a live cluster the policy passes the
residual bandwidth); it returns the ordered region path and the GPUs per region, or None.

Conventions shared by every kernel:
  * ``tc`` is a table of t_comp(L) for L = 0..k (entry 0 unused), so a rule never calls back
    into Python; ``activation / bandwidth`` and ``tc`` are both seconds.
  * ``out_path[:n]`` receives the path (region indices, pipeline order), ``out_alloc[r]`` the
    GPUs in region r (zero off the path). The return value is (total GPUs, path length);
    (0, 0) means "no placement".
  * Ties between regions go to the lower region index, as the paper's argmin/argmax do when
    read left to right.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numba
import numpy as np

_jit = numba.njit(cache=True)
_inline = numba.njit(cache=True, inline="always")
# Kernels that take arrays and allocate nothing: without numba's reference counting, whose
# atomic operations on their arguments cost more than the kernels (docs/performance.md).
_leaf = numba.njit(cache=True, _nrt=False)

# Allocators that a path-based rule can end with.
ALLOC_COST_MIN = 0
ALLOC_UNIFORM = 1
ALLOC_FILL = 2  # take each region's share in path order (the CR baselines)


@dataclass(frozen=True)
class Placement:
    """A job's placement S_j: the ordered region path and the GPUs in each path region."""

    path: tuple[int, ...]
    gpus: tuple[int, ...]

    def __post_init__(self) -> None:
        if len(self.path) != len(self.gpus):
            raise ValueError(f"Placement: path {self.path} and gpus {self.gpus} differ in length")
        if len(set(self.path)) != len(self.path):
            raise ValueError(f"Placement.path visits a region twice: {self.path}")
        if any(n < 1 for n in self.gpus):
            raise ValueError(f"Placement.gpus must be >= 1 in every path region: {self.gpus}")

    @property
    def total(self) -> int:
        return int(sum(self.gpus))

    def gpus_per_region(self, num_regions: int) -> np.ndarray:
        out = np.zeros(num_regions, dtype=np.int64)
        for r, n in zip(self.path, self.gpus, strict=True):
            out[r] = n
        return out

    def as_dict(self) -> dict[int, int]:
        return dict(zip(self.path, self.gpus, strict=True))


# --------------------------------------------------------------------------- allocators


@_inline
def _fill(a, value):
    """a[:] = value as an element loop: numba's slice assignment costs more than the
    kernels' real work on arrays of a few regions."""
    for i in range(a.shape[0]):
        a[i] = value


@_inline
def _cost_min_kernel(path, path_len, g, free, prices, out_alloc, order):
    """Alg. 2 lines 1-10: one GPU per path region, then the surplus to the cheapest regions.

    Regions are sorted by price, ties kept in path order (a stable sort); ``order`` is scratch
    space of at least path_len entries."""
    _fill(out_alloc, 0)
    return _cost_min_on_path(path, path_len, g, free, prices, out_alloc, order)


@_inline
def _cost_min_on_path(path, path_len, g, free, prices, out_alloc, order):
    """``_cost_min_kernel`` writing only the path's entries of ``out_alloc`` (zero elsewhere
    already)."""
    for i in range(path_len):
        out_alloc[path[i]] = 1
        order[i] = path[i]
    g_rem = g - path_len
    for i in range(1, path_len):  # insertion sort: stable, and paths are a few regions long
        x = order[i]
        j = i - 1
        while j >= 0 and prices[order[j]] > prices[x]:
            order[j + 1] = order[j]
            j -= 1
        order[j + 1] = x
    for i in range(path_len):
        if g_rem == 0:
            break
        r = order[i]
        n_add = min(free[r] - 1, g_rem)
        out_alloc[r] += n_add
        g_rem -= n_add
    return g - g_rem


@_inline
def _uniform_kernel(path, path_len, g, free, out_alloc):
    """Ablation "w/o Cost-Min": spread g GPUs evenly over the path, one at a time in path
    order, skipping regions that are full (so capacity is respected).

    Computed in whole rounds: while every region that still has room can take another
    ``rounds`` GPUs and at least one GPU per such region is left to place, a round gives each
    one GPU, exactly as the one-at-a-time loop would; the last, partial round goes to the
    first regions in path order."""
    _fill(out_alloc, 0)
    return _uniform_on_path(path, path_len, g, free, out_alloc)


@_inline
def _uniform_on_path(path, path_len, g, free, out_alloc):
    """``_uniform_kernel`` writing only the path's entries of ``out_alloc`` (zero elsewhere
    already)."""
    placed = 0
    while placed < g:
        active = 0
        room = 0
        for i in range(path_len):
            r = path[i]
            left = free[r] - out_alloc[r]
            if left > 0:
                room = left if active == 0 else min(room, left)
                active += 1
        if active == 0:
            break
        rounds = min((g - placed) // active, room)
        if rounds > 0:
            for i in range(path_len):
                r = path[i]
                if free[r] - out_alloc[r] > 0:
                    out_alloc[r] += rounds
            placed += rounds * active
        else:
            for i in range(path_len):
                r = path[i]
                if placed < g and out_alloc[r] < free[r]:
                    out_alloc[r] += 1
                    placed += 1
    return placed


@_inline
def _fill_kernel(path, path_len, g, free, out_alloc):
    """Take GPUs region by region in path order until g are placed."""
    _fill(out_alloc, 0)
    left = g
    for i in range(path_len):
        r = path[i]
        n = min(free[r], left)
        out_alloc[r] = n
        left -= n
    return g - left


@_inline
def _allocate(kind, path, path_len, g, free, prices, out_alloc, order):
    if kind == ALLOC_COST_MIN:
        return _cost_min_kernel(path, path_len, g, free, prices, out_alloc, order)
    if kind == ALLOC_UNIFORM:
        return _uniform_kernel(path, path_len, g, free, out_alloc)
    return _fill_kernel(path, path_len, g, free, out_alloc)


@_inline
def _best_neighbour(bw, v, free, in_path):
    """Alg. 1 line 10: the region u off the path with free GPUs maximising B[v, u]
    (ties to the lower index); -1 when there is none."""
    u = -1
    for cand in range(free.shape[0]):
        if not in_path[cand] and free[cand] > 0:
            if u < 0 or bw[v, cand] > bw[v, u]:
                u = cand
    return u


# --------------------------------------------------------------------------- Alg. 1


@_inline
def _pathfinder_phase1(free, prices, k_star, out_path, out_alloc):
    """Alg. 1, lines 1-4: all K* in the cheapest region with that many free GPUs (ties to the
    lower index). Clears ``out_path`` / ``out_alloc``; True when it placed the job."""
    _fill(out_path, -1)
    _fill(out_alloc, 0)
    best_r = -1
    for r in range(free.shape[0]):
        if free[r] >= k_star and (best_r < 0 or prices[r] < prices[best_r]):
            best_r = r
    if best_r < 0:
        return False
    out_path[0] = best_r
    out_alloc[best_r] = k_star
    return True


@_inline
def insertion_sort(row, m):
    """``row[:m]`` sorted ascending in place: a few entries (a path's regions, a region's
    reserved links), where an insertion sort beats any call."""
    for i in range(1, m):
        x = row[i]
        q = i - 1
        while q >= 0 and row[q] > x:
            row[q + 1] = row[q]
            q -= 1
        row[q + 1] = x


@_leaf
def _pathfinder_kernel(free, prices, bw, k_star, activation, tc, allocator, out_path, out_alloc, ws):
    """Alg. 1 exactly as printed, with free GPUs in place of G_r.

    Phase 1: the cheapest region with >= K* free GPUs gets all K*. Phase 2: from every start
    region (skipped when it has no free GPU, since Alg. 2 gives each path region a GPU), grow
    the path from its tail over the highest-bandwidth link to a region with free GPUs; stop at
    the first neighbour with activation / bottleneck > t_comp(g'). Keep the path with the most
    GPUs, then the lowest average price; an earlier start region wins a full tie.
    ``ws`` is (4, K) int64 scratch space, so the kernel allocates nothing.
    """
    k = free.shape[0]
    if _pathfinder_phase1(free, prices, k_star, out_path, out_alloc):
        return k_star, 1
    # Phase 2 (lines 5-23)
    g_max = 0
    c_min = np.inf
    best_len = 0
    path = ws[0]
    alloc = ws[1]
    in_path = ws[2]
    for rs in range(k):
        if free[rs] <= 0:
            continue
        _fill(in_path, 0)
        path[0] = rs
        in_path[rs] = 1
        n = 1
        v = rs
        g = free[rs]
        b_min = np.inf
        while n < k and g < k_star:
            u = _best_neighbour(bw, v, free, in_path)
            if u < 0:
                break
            b_tmp = min(b_min, bw[v, u])
            g_new = min(g + free[u], k_star)
            if b_tmp > 0 and activation / b_tmp <= tc[g_new]:  # line 13
                path[n] = u
                in_path[u] = 1
                n += 1
                v = u
                b_min = b_tmp
                g = g_new
            else:
                break
        if g < g_max:
            continue  # every allocator places exactly g here, so this path cannot win
        placed = _allocate(allocator, path, n, g, free, prices, alloc, ws[3])
        # Summed in region order, not path order: the same allocation reached along another
        # path then has the very same average, and the strict < below gives the tie to the
        # earlier start region (summed along the path, the last bit decided it).
        c_avg = 0.0
        for r in range(k):
            c_avg += alloc[r] * prices[r]
        c_avg /= placed
        if placed > g_max or (placed == g_max and c_avg < c_min):
            g_max = placed
            c_min = c_avg
            best_len = n
            for q in range(k):  # element loops: numba copies a sliced source first
                out_path[q] = path[q] if q < n else -1
                out_alloc[q] = alloc[q]
    return g_max, best_len


@_jit
def sort_neighbours(bandwidth, v, out):
    """Row v's regions by the bandwidth a policy could use on (v, u) with nothing reserved,
    ``max(0, min(B_vu, B_uv))`` (``sim.residual_bandwidth`` at R = 0), highest first, ties
    to the lower index (a stable sort): what ``_pathfinder_sorted_kernel`` walks."""
    k = bandwidth.shape[0]
    key = np.empty(k)
    for u in range(k):
        key[u] = -max(0.0, min(bandwidth[v, u], bandwidth[u, v]))
    order = np.argsort(key, kind="mergesort")
    for i in range(k):
        out[i] = order[i]


@_inline
def _best_neighbour_sorted(bw, v, free, in_path, nbr_v, resv_v, n_resv_v, first):
    """``_best_neighbour``'s answer (the region u off the path with free GPUs maximising
    bw[v, u], ties to the lower index) without scanning every region: ``nbr_v`` is row v's
    regions sorted as ``sort_neighbours`` does, which is bw's order on every link without a
    reservation; the ``n_resv_v`` reserved links ``resv_v`` (reservations are symmetric) are
    compared one by one. Row v holds only regions without free GPUs before ``first[v]``
    (the core keeps it so: ``sim._freed``), and the walk moves it past those it finds at its
    head: on a busy cluster the best-connected regions are full, and each was walked at every
    step from every tail."""
    u = -1
    start = first[v]
    while start < nbr_v.shape[0] and free[nbr_v[start]] <= 0:
        start += 1
    first[v] = start
    for i in range(start, nbr_v.shape[0]):
        cand = nbr_v[i]
        if in_path[cand] or free[cand] <= 0:
            continue
        reserved = False
        for q in range(n_resv_v):
            if resv_v[q] == cand:
                reserved = True
                break
        if not reserved:
            u = cand
            break
    for q in range(n_resv_v):
        cand = resv_v[q]
        if not in_path[cand] and free[cand] > 0:
            if u < 0 or bw[v, cand] > bw[v, u] or (bw[v, cand] == bw[v, u] and cand < u):
                u = cand
    return u


@_inline
def _pathfinder_sorted_kernel(free, prices, bw, k_star, activation, tc, allocator, out_path, out_alloc, ws,
                              bandwidth, nbr, nbr_ready, nbr_pos, nbr_first, resv_cols, resv_nnz):
    """``_pathfinder_kernel``'s placement to the bit, without its O(K^2) work per call: the
    expansion walks each tail's neighbours sorted once per episode (``nbr``: row v is
    ``sort_neighbours(bandwidth, v)`` once ``nbr_ready[v]``; sorted here on first use, with
    ``nbr_pos`` its inverse and ``nbr_first[v]`` the place before which row v has only
    regions without free GPUs), with the reserved links (``resv_cols``/``resv_nnz``, as
    ``sim`` keeps them; ``bw`` is the residual bandwidth) compared one by one; per start
    region only the path's entries of the scratch rows are cleared, and the average price sums
    the path's regions in index order (the other regions' terms are 0 x price = +0.0, which
    add nothing)."""
    k = free.shape[0]
    if _pathfinder_phase1(free, prices, k_star, out_path, out_alloc):
        return k_star, 1
    # Phase 2 (lines 5-23)
    g_max = 0
    c_min = np.inf
    best_len = 0
    path = ws[0]
    alloc = ws[1]
    in_path = ws[2]
    order = ws[3]
    _fill(in_path, 0)
    _fill(alloc, 0)
    for rs in range(k):
        if free[rs] <= 0:
            continue
        path[0] = rs
        in_path[rs] = 1
        n = 1
        v = rs
        g = free[rs]
        b_min = np.inf
        while n < k and g < k_star:
            if not nbr_ready[v]:
                sort_neighbours(bandwidth, v, nbr[v])
                for i in range(k):
                    nbr_pos[v, nbr[v, i]] = i
                nbr_first[v] = 0
                nbr_ready[v] = True
            u = _best_neighbour_sorted(bw, v, free, in_path, nbr[v], resv_cols[v], resv_nnz[v], nbr_first)
            if u < 0:
                break
            b_tmp = min(b_min, bw[v, u])
            g_new = min(g + free[u], k_star)
            if b_tmp > 0 and activation / b_tmp <= tc[g_new]:  # line 13
                path[n] = u
                in_path[u] = 1
                n += 1
                v = u
                b_min = b_tmp
                g = g_new
            else:
                break
        if g >= g_max:
            if allocator == ALLOC_COST_MIN:
                placed = _cost_min_on_path(path, n, g, free, prices, alloc, order)
            else:
                placed = _uniform_on_path(path, n, g, free, alloc)
            order[:n] = path[:n]  # the path's regions in index order: as summing over all regions
            insertion_sort(order, n)
            c_avg = 0.0
            for i in range(n):
                c_avg += alloc[order[i]] * prices[order[i]]
            c_avg /= placed
            if placed > g_max or (placed == g_max and c_avg < c_min):
                g_max = placed
                c_min = c_avg
                for q in range(best_len):
                    out_alloc[out_path[q]] = 0
                    out_path[q] = -1
                best_len = n
                for q in range(n):
                    out_path[q] = path[q]
                    out_alloc[path[q]] = alloc[path[q]]
        for i in range(n):
            in_path[path[i]] = 0
            alloc[path[i]] = 0
    return g_max, best_len


# --------------------------------------------------------------------------- baselines


@_leaf
def _single_region_kernel(free, prices, k_star, cheapest, out_path, out_alloc, min_gpus=1):
    """LCF (cheapest=True): the cheapest region with at least ``min_gpus`` free GPUs (the
    job's minimum; 1 in the paper); LDF: the region with the most free GPUs. Either takes
    min(free, K*) GPUs there (paper IV-A caps every policy at K*)."""
    _fill(out_path, -1)
    _fill(out_alloc, 0)
    best = -1
    for r in range(free.shape[0]):
        if free[r] <= 0 or free[r] < min_gpus:
            continue
        if best < 0:
            best = r
        elif cheapest and prices[r] < prices[best]:
            best = r
        elif not cheapest and free[r] > free[best]:
            best = r
    if best < 0:
        return 0, 0
    n = min(free[best], k_star)
    out_path[0] = best
    out_alloc[best] = n
    return n, 1


@_leaf
def _cr_lcf_kernel(free, prices, bw, k_star, activation, tc, out_path, out_alloc, ws):
    """CR-LCF: aggregate regions in ascending price order until K* GPUs. A region whose link
    from the current tail cannot carry b_j = A / t_comp(g') (Eq. 6, all links of the path
    checked through the bottleneck) is skipped and the next cheapest is tried."""
    k = free.shape[0]
    _fill(out_path, -1)
    _fill(out_alloc, 0)
    order = ws[3]
    for i in range(k):  # regions by ascending price, ties to the lower index (stable)
        x = i
        j = i - 1
        while j >= 0 and prices[order[j]] > prices[x]:
            order[j + 1] = order[j]
            j -= 1
        order[j + 1] = x
    n = 0
    g = 0
    b_min = np.inf
    for i in range(k):
        r = order[i]
        if g >= k_star:
            break
        if free[r] <= 0:
            continue
        take = min(free[r], k_star - g)
        if n == 0:
            out_path[0] = r
            out_alloc[r] = take
            n = 1
            g = take
            continue
        b_tmp = min(b_min, bw[out_path[n - 1], r])
        if b_tmp > 0 and activation / b_tmp <= tc[g + take]:
            out_path[n] = r
            out_alloc[r] = take
            n += 1
            g += take
            b_min = b_tmp
    return g, n


@_inline
def _cr_ldf_path_kernel(free, bw, k_star, activation, tc, out_path, in_path):
    """CR-LDF's path: start at the region with the most free GPUs, then greedily append the
    tail's highest-bandwidth neighbour with free GPUs while the bottleneck still carries
    b_j = A / t_comp(g'); the first neighbour that cannot ends the path. Returns (g, length)."""
    k = free.shape[0]
    _fill(out_path, -1)
    start = -1
    for r in range(k):
        if free[r] > 0 and (start < 0 or free[r] > free[start]):
            start = r
    if start < 0:
        return 0, 0
    _fill(in_path, 0)
    out_path[0] = start
    in_path[start] = 1
    n = 1
    g = min(free[start], k_star)
    v = start
    b_min = np.inf
    while n < k and g < k_star:
        u = _best_neighbour(bw, v, free, in_path)
        if u < 0:
            break
        b_tmp = min(b_min, bw[v, u])
        g_new = min(g + free[u], k_star)
        if b_tmp > 0 and activation / b_tmp <= tc[g_new]:
            out_path[n] = u
            in_path[u] = 1
            n += 1
            v = u
            g = g_new
            b_min = b_tmp
        else:
            break
    return g, n


@_leaf
def _cr_ldf_kernel(free, prices, bw, k_star, activation, tc, allocator, out_path, out_alloc, ws):
    """CR-LDF (allocator=fill) and BACE-Pipe w/o Pathfinder (CR-LDF's path, Cost-Min)."""
    g, n = _cr_ldf_path_kernel(free, bw, k_star, activation, tc, out_path, ws[2])
    if n == 0:
        _fill(out_alloc, 0)
        return 0, 0
    placed = _allocate(allocator, out_path, n, g, free, prices, out_alloc, ws[3])
    return placed, n


# --------------------------------------------------------------------------- rules by id

# The rule ids double as the env's placement options (geo_gym/env.py): the first NUM_RULES
# (RULE_NAMES) are the default option set; the GPU-level rules after them (LEVEL_RULE_NAMES)
# join it in the "levels" set (``RULE_SETS``).
RULE_PATHFINDER = 0  # BACE-Pipe: Alg. 1 + Alg. 2
RULE_PATHFINDER_UNIFORM = 1  # ablation w/o Cost-Min
RULE_CR_LDF_COST_MIN = 2  # ablation w/o Pathfinder
RULE_LCF = 3
RULE_LDF = 4
RULE_CR_LCF = 5
RULE_CR_LDF = 6
RULE_PATHFINDER_HALF = 7  # Pathfinder + Cost-Min aiming at ceil(K*/2) GPUs
RULE_PATHFINDER_QUARTER = 8  # ... at ceil(K*/4) GPUs
RULE_PATHFINDER_MIN = 9  # ... at the job's minimum (the start rule's; by default its memory's)
RULE_PATHFINDER_SPAN25 = 10  # ... a quarter of the way from that minimum to K*
RULE_PATHFINDER_SPAN50 = 11  # ... half of the way
RULE_PATHFINDER_SPAN75 = 12  # ... three quarters of the way
RULE_NAMES = (
    "pathfinder",
    "pathfinder_uniform",
    "cr_ldf_cost_min",
    "lcf",
    "ldf",
    "cr_lcf",
    "cr_ldf",
    "pathfinder_half",
    "pathfinder_quarter",
)
NUM_RULES = len(RULE_NAMES)
LEVEL_RULE_NAMES = ("pathfinder_min", "pathfinder_span25", "pathfinder_span50", "pathfinder_span75")
ALL_RULE_NAMES = RULE_NAMES + LEVEL_RULE_NAMES  # every rule id's name, by id
# Named option sets: "default" (the 9 rules), "levels" (the GPU count as part of the action:
# Pathfinder + Cost-Min at five levels from the memory minimum to K*, beside the 9 rules).
RULE_SETS = {"default": RULE_NAMES, "levels": ALL_RULE_NAMES}


def rule_set(rules=None) -> tuple[str, ...]:
    """An option set's rule names: None or "default" (``RULE_NAMES``), "levels"
    (``ALL_RULE_NAMES``), or a sequence of ``ALL_RULE_NAMES`` entries (no repeats)."""
    if rules is None:
        return RULE_NAMES
    if isinstance(rules, str):
        if rules not in RULE_SETS:
            raise ValueError(f"unknown rule set {rules!r}; known: {sorted(RULE_SETS)} or a list of rule names")
        return RULE_SETS[rules]
    names = tuple(rules)
    if not names:
        raise ValueError("a rule set needs at least one rule")
    for name in names:
        if name not in ALL_RULE_NAMES:
            raise ValueError(f"unknown placement rule {name!r} in the rule set; known: {list(ALL_RULE_NAMES)}")
    if len(set(names)) != len(names):
        raise ValueError(f"a rule set names a rule twice: {list(names)}")
    return names


def rule_ids(rules=None) -> np.ndarray:
    """The rule ids of an option set (``rule_set``), in option order: what the compiled
    decision code reads (``geo_gym.decision.allocate_options``)."""
    return np.array([ALL_RULE_NAMES.index(name) for name in rule_set(rules)], dtype=np.int64)


@_inline
def aims_below_k_star(rule):
    """Whether a rule is Alg. 1 + Alg. 2 with a smaller GPU target than K* (the half, quarter
    and level rules): on free GPUs that cannot reach its target it places as Pathfinder does."""
    return rule == RULE_PATHFINDER_HALF or rule == RULE_PATHFINDER_QUARTER or rule >= RULE_PATHFINDER_MIN


@_inline
def is_pathfinder(rule):
    """Whether a rule is Alg. 1 (every variant: its own allocator and GPU target)."""
    return rule == RULE_PATHFINDER or rule == RULE_PATHFINDER_UNIFORM or aims_below_k_star(rule)


@_inline
def rule_target(rule, k_star, min_gpus=1):
    """The GPU count a rule aims at: K*, or a fraction of it for the smaller options, never
    below the job's minimum (the start rule's, geo_gym/start_rule.py); the level rules aim at
    min_gpus + ceil(q (K* - min_gpus) / 4) for q = 0..3."""
    if rule == RULE_PATHFINDER_HALF:
        return max(min_gpus, (k_star + 1) // 2)
    if rule == RULE_PATHFINDER_QUARTER:
        return max(min_gpus, (k_star + 3) // 4)
    if rule >= RULE_PATHFINDER_MIN:
        span = max(k_star - min_gpus, 0)
        return min_gpus + (span * (rule - RULE_PATHFINDER_MIN) + 3) // 4
    return k_star


@_inline
def _allocator(rule):
    """The allocator a path rule ends with. An int64, not a literal: numba compiles a called
    kernel once per literal argument value."""
    if rule == RULE_PATHFINDER_UNIFORM:
        return np.int64(ALLOC_UNIFORM)
    if is_pathfinder(rule) or rule == RULE_CR_LDF_COST_MIN:
        return np.int64(ALLOC_COST_MIN)
    return np.int64(ALLOC_FILL)


@_inline
def apply_rule_kept(rule, free, prices, bw, k_star, activation, tc, out_path, out_alloc, ws, min_gpus,
                    bandwidth, nbr, nbr_ready, nbr_pos, nbr_first, resv_cols, resv_nnz):
    """``apply_rule`` with the Pathfinder rules on ``_pathfinder_sorted_kernel`` (the same
    placements; what the simulator keeps per episode passed in). That kernel is inlined, at
    this one call site: the fixed policies' Pathfinder rules run it at every try."""
    if is_pathfinder(rule):
        return _pathfinder_sorted_kernel(
            free, prices, bw, np.int64(rule_target(rule, k_star, min_gpus)), activation, tc, _allocator(rule),
            out_path, out_alloc, ws, bandwidth, nbr, nbr_ready, nbr_pos, nbr_first, resv_cols, resv_nnz,
        )
    return apply_rule(rule, free, prices, bw, k_star, activation, tc, out_path, out_alloc, ws, min_gpus)


@_inline
def apply_rule(rule, free, prices, bw, k_star, activation, tc, out_path, out_alloc, ws, min_gpus=1):
    """Dispatch a rule id to its kernel. ``tc`` must cover L = 0..k_star; ``ws`` is (4, K)
    int64 scratch space. Single-region rules choose among regions with at least ``min_gpus``
    free GPUs; the path rules may return fewer, which the caller refuses. Each kernel is a
    compiled function of its own, called with one signature (no literal arguments): numba
    copies an inlined function's IR at every call site, inlined ones included, and the core's
    cold compile took 40% longer with these kernels inlined, its run no faster
    (docs/performance.md, "Compiling the core")."""
    target = np.int64(rule_target(rule, k_star, min_gpus))
    if is_pathfinder(rule):
        return _pathfinder_kernel(free, prices, bw, target, activation, tc, _allocator(rule), out_path, out_alloc, ws)
    if rule == RULE_LCF or rule == RULE_LDF:
        return _single_region_kernel(free, prices, target, rule == RULE_LCF, out_path, out_alloc, np.int64(min_gpus))
    if rule == RULE_CR_LCF:
        return _cr_lcf_kernel(free, prices, bw, target, activation, tc, out_path, out_alloc, ws)
    return _cr_ldf_kernel(free, prices, bw, target, activation, tc, _allocator(rule), out_path, out_alloc, ws)


# --------------------------------------------------------------------------- Eq. (5)/(6)

FEASIBLE = 0
VIOLATES_GPUS = 1  # Eq. (5)
VIOLATES_BANDWIDTH = 2  # Eq. (6)
MALFORMED = 3


@_jit
def check_kernel(free, reserved, bw, path, path_len, alloc, b_j):
    """Eq. (5): alloc[r] <= free[r]; Eq. (6): every crossed link carries b_j more in both
    directions (activations forward, gradients back). Returns a code above."""
    k = free.shape[0]
    if path_len < 1:
        return MALFORMED
    seen = np.zeros(k, dtype=np.bool_)
    for i in range(path_len):
        r = path[i]
        if r < 0 or r >= k or seen[r] or alloc[r] < 1:
            return MALFORMED
        seen[r] = True
    for r in range(k):
        if alloc[r] != 0 and not seen[r]:
            return MALFORMED
        if alloc[r] > free[r]:
            return VIOLATES_GPUS
    eps = 1e-9
    for i in range(path_len - 1):
        u = path[i]
        v = path[i + 1]
        if reserved[u, v] + b_j > bw[u, v] + eps or reserved[v, u] + b_j > bw[v, u] + eps:
            return VIOLATES_BANDWIDTH
    return FEASIBLE


# --------------------------------------------------------------------------- Python API


def _as_free(free_gpus: Sequence[int]) -> np.ndarray:
    free = np.asarray(free_gpus, dtype=np.int64)
    if free.ndim != 1:
        raise ValueError(f"free_gpus must be 1-D, got shape {free.shape}")
    if (free < 0).any():
        raise ValueError(f"free_gpus must be >= 0, got {free.tolist()}")
    return free


def _as_prices(prices: Sequence[float], k: int) -> np.ndarray:
    p = np.asarray(prices, dtype=np.float64)
    if p.shape != (k,):
        raise ValueError(f"prices must have shape ({k},), got {p.shape}")
    if (p < 0).any() or not np.isfinite(p).all():
        raise ValueError(f"prices must be finite and >= 0, got {p.tolist()}")
    return p


def _as_bandwidth(bandwidth, k: int) -> np.ndarray:
    b = np.asarray(bandwidth, dtype=np.float64)
    if b.shape != (k, k):
        raise ValueError(f"bandwidth must have shape ({k}, {k}), got {b.shape}")
    if (b < 0).any() or np.isnan(b).any():
        raise ValueError("bandwidth entries must be >= 0")
    return b


def _tc_table(t_comp: Callable[[int], float], k_star: int) -> np.ndarray:
    if k_star < 1:
        raise ValueError(f"k_star must be >= 1, got {k_star}")
    tc = np.empty(k_star + 1, dtype=np.float64)
    tc[0] = np.inf
    for L in range(1, k_star + 1):
        tc[L] = float(t_comp(L))
    return tc


def _result(g: int, n: int, out_path: np.ndarray, out_alloc: np.ndarray) -> Placement | None:
    if n == 0 or g == 0:
        return None
    path = tuple(int(r) for r in out_path[:n])
    return Placement(path=path, gpus=tuple(int(out_alloc[r]) for r in path))


def _run(rule_kernel, free, *args, scratch: bool = True) -> Placement | None:
    out_path = np.full(free.shape[0], -1, dtype=np.int64)
    out_alloc = np.zeros(free.shape[0], dtype=np.int64)
    extra = (np.zeros((4, free.shape[0]), dtype=np.int64),) if scratch else ()
    g, n = rule_kernel(*args, out_path, out_alloc, *extra)
    return _result(g, n, out_path, out_alloc)


def pathfinder(
    free_gpus: Sequence[int],
    prices: Sequence[float],
    bandwidth,
    k_star: int,
    activation: float,
    t_comp: Callable[[int], float],
    allocator: str = "cost_min",
) -> Placement | None:
    """Alg. 1 (Pathfinder) with Alg. 2 (``allocator="cost_min"``) or the uniform ablation.

    ``activation / bandwidth[u, v]`` must be seconds; ``t_comp(g)`` seconds for g GPUs.
    Returns None only when no region has a free GPU.
    """
    free = _as_free(free_gpus)
    k = free.shape[0]
    kinds = {"cost_min": ALLOC_COST_MIN, "uniform": ALLOC_UNIFORM}
    if allocator not in kinds:
        raise ValueError(f"allocator must be one of {sorted(kinds)}, got {allocator!r}")
    return _run(
        _pathfinder_kernel,
        free,
        free,
        _as_prices(prices, k),
        _as_bandwidth(bandwidth, k),
        int(k_star),
        float(activation),
        _tc_table(t_comp, int(k_star)),
        kinds[allocator],
    )


def _path_array(path: Sequence[int], k: int) -> np.ndarray:
    p = np.asarray(path, dtype=np.int64)
    if p.ndim != 1 or len(p) == 0:
        raise ValueError(f"path must be a non-empty sequence of region indices, got {path!r}")
    if (p < 0).any() or (p >= k).any() or len(set(p.tolist())) != len(p):
        raise ValueError(f"path must hold distinct region indices in 0..{k - 1}, got {list(path)}")
    return p


def cost_min_allocate(
    path: Sequence[int], g: int, free_gpus: Sequence[int], prices: Sequence[float]
) -> dict[int, int]:
    """Alg. 2 (Cost-Min allocator): {region: GPUs} over ``path``.

    Raises ValueError when g < len(path) (every path region needs a GPU) or the path regions
    cannot hold g GPUs.
    """
    free = _as_free(free_gpus)
    p = _path_array(path, free.shape[0])
    if g < len(p):
        raise ValueError(f"g={g} is smaller than the path length {len(p)}")
    if (free[p] < 1).any() or free[p].sum() < g:
        raise ValueError(f"path {list(path)} cannot hold g={g} GPUs with free={free.tolist()}")
    alloc = np.zeros(free.shape[0], dtype=np.int64)
    order = np.zeros(len(p), dtype=np.int64)
    _cost_min_kernel(p, len(p), int(g), free, _as_prices(prices, free.shape[0]), alloc, order)
    return {int(r): int(alloc[r]) for r in p}


def uniform_allocate(path: Sequence[int], g: int, free_gpus: Sequence[int]) -> dict[int, int]:
    """Ablation w/o Cost-Min: g GPUs spread evenly over ``path`` within free capacity."""
    free = _as_free(free_gpus)
    p = _path_array(path, free.shape[0])
    if free[p].sum() < g:
        raise ValueError(f"path {list(path)} cannot hold g={g} GPUs with free={free.tolist()}")
    alloc = np.zeros(free.shape[0], dtype=np.int64)
    _uniform_kernel(p, len(p), int(g), free, alloc)
    return {int(r): int(alloc[r]) for r in p}


def lcf(free_gpus: Sequence[int], prices: Sequence[float], k_star: int) -> Placement | None:
    """Lowest-Cost-First: all of the job in the cheapest region with a free GPU."""
    free = _as_free(free_gpus)
    return _run(
        _single_region_kernel,
        free,
        free,
        _as_prices(prices, free.shape[0]),
        int(k_star),
        True,
        scratch=False,
    )


def ldf(free_gpus: Sequence[int], k_star: int) -> Placement | None:
    """Lowest-Delay-First: all of the job in the region with the most free GPUs."""
    free = _as_free(free_gpus)
    prices = np.zeros(free.shape[0])
    return _run(_single_region_kernel, free, free, prices, int(k_star), False, scratch=False)


def cr_lcf(
    free_gpus, prices, bandwidth, k_star: int, activation: float, t_comp
) -> Placement | None:
    """Cross-region LCF: regions by ascending price until K* GPUs, Eq. (6) respected."""
    free = _as_free(free_gpus)
    k = free.shape[0]
    return _run(
        _cr_lcf_kernel,
        free,
        free,
        _as_prices(prices, k),
        _as_bandwidth(bandwidth, k),
        int(k_star),
        float(activation),
        _tc_table(t_comp, int(k_star)),
    )


def cr_ldf(
    free_gpus,
    prices,
    bandwidth,
    k_star: int,
    activation: float,
    t_comp,
    allocator: str = "fill",
) -> Placement | None:
    """Cross-region LDF: from the largest region, greedily over the highest-bandwidth
    neighbours. ``allocator="cost_min"`` gives BACE-Pipe's w/o-Pathfinder ablation."""
    free = _as_free(free_gpus)
    k = free.shape[0]
    kinds = {"fill": ALLOC_FILL, "cost_min": ALLOC_COST_MIN}
    if allocator not in kinds:
        raise ValueError(f"allocator must be one of {sorted(kinds)}, got {allocator!r}")
    return _run(
        _cr_ldf_kernel,
        free,
        free,
        _as_prices(prices, k),
        _as_bandwidth(bandwidth, k),
        int(k_star),
        float(activation),
        _tc_table(t_comp, int(k_star)),
        kinds[allocator],
    )


def check_placement(
    placement: Placement,
    free_gpus: Sequence[int],
    reserved,
    bandwidth,
    b_j: float,
) -> None:
    """Raise ValueError when ``placement`` breaks Eq. (5) (GPU capacity) or Eq. (6) (bandwidth:
    each crossed link, both directions, must carry b_j on top of what is reserved)."""
    free = _as_free(free_gpus)
    k = free.shape[0]
    bw = _as_bandwidth(bandwidth, k)
    res = np.asarray(reserved, dtype=np.float64)
    if res.shape != (k, k):
        raise ValueError(f"reserved must have shape ({k}, {k}), got {res.shape}")
    if any(r < 0 or r >= k for r in placement.path):
        raise ValueError(f"placement path {placement.path} names a region outside 0..{k - 1}")
    alloc = placement.gpus_per_region(k)
    path = np.asarray(placement.path, dtype=np.int64)
    code = check_kernel(free, res, bw, path, len(path), alloc, float(b_j))
    if code == VIOLATES_GPUS:
        bad = [int(r) for r in range(k) if alloc[r] > free[r]]
        raise ValueError(
            f"Eq. (5) violated: placement wants {alloc[bad].tolist()} GPUs in regions {bad}, "
            f"free {free[bad].tolist()}"
        )
    if code == VIOLATES_BANDWIDTH:
        links = [
            (int(u), int(v))
            for u, v in zip(path[:-1], path[1:], strict=True)
            if res[u, v] + b_j > bw[u, v] + 1e-9 or res[v, u] + b_j > bw[v, u] + 1e-9
        ]
        raise ValueError(
            f"Eq. (6) violated: b_j={b_j:.4g} Gbps does not fit on links {links} "
            f"(capacity minus reservations)"
        )
    if code == MALFORMED:
        raise ValueError(f"malformed placement {placement}")
