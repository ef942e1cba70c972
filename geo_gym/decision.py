"""The RL decision interface over the simulator core, batched over envs and compiled.

At each decision the env shows a *window* of the first W pending jobs (queue order) and, for
each, the placement every rule of its option set would make now (R options: by default the
``NUM_RULES`` rules of ``geo_gym.placement.RULE_NAMES``; ``placement.rule_set``). An action is
``slot * R + option`` or ``W * R`` ("wait until the next event"). The observation layout, the
mask and the reward live here, once, for the single env and the vector env alike;
``geo_gym/env.py`` documents them for users.
"""

from __future__ import annotations

import math

import numba
import numpy as np
from numba.core import types
from numba.experimental import structref

from geo_gym.costmodel import alpha_nb, pipeline_iteration_time_nb
from geo_gym.placement import (
    FEASIBLE,
    NUM_RULES,
    RULE_PATHFINDER,
    aims_below_k_star,
    rule_ids,
    rule_set,
    rule_target,
)
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
    next_event_time,
    place,
    remaining_pred,
    residual_bandwidth,
    scratch,
    tracked_remaining_h,
)
from geo_gym.state import SECONDS_PER_HOUR

_jit = numba.njit(cache=True)
_inline = numba.njit(cache=True, inline="always")

# ------------------------------------------------------------------ the observation layout
# Named once, each feature with what it holds: the encoder below, the fixed policies
# (baselines/policies.py), the feature extractor (agents/features.py), env.py's table
# (``observation_table``) and the tests read these. The observation is
# [globals | region 0 | ... | region K-1 | slot 0 | its options | slot 1 | ...].
GLOBAL = (
    ("alpha", "alpha (Eq. 11): reserved / total inter-region bandwidth"),
    ("free_share", "free GPUs / all GPUs"),
    ("log_pending", "log1p(pending jobs)"),
    ("log_running", "log1p(running jobs)"),
    ("wait_possible", "1 if waiting is possible (an arrival, completion, failure, repair or re-queue will happen)"),
    ("log_delayed", "log1p(failed jobs waiting to re-enter the queue)"),
    ("log_tracker_soonest_h", "log1p(hours until the soonest completion the Metric Tracker can see), 0 when it sees none"),
    ("tracker_coverage", "share of running jobs whose progress the tracker sees (1 = all; 0 also when none run)"),
    ("log_failures", "log1p(infrastructure failures so far)"),
    ("repair_share", "GPUs under repair / all GPUs"),
)
GLOBAL_FEATURES = tuple(name for name, _ in GLOBAL)
(G_ALPHA, G_FREE, G_PENDING, G_RUNNING, G_WAIT, G_DELAYED, G_TRACKER_SOONEST, G_TRACKER_COVERAGE,
 G_FAILURES, G_REPAIR) = range(len(GLOBAL_FEATURES))
REGION = (
    ("free_share", "free / capacity"),
    ("capacity_share", "capacity / largest capacity"),
    ("price_share", "price / highest price"),
    ("residual_bandwidth_share", "mean residual out-bandwidth / largest link bandwidth"),
)
REGION_FEATURES = tuple(name for name, _ in REGION)
R_FREE, R_CAPACITY, R_PRICE, R_BANDWIDTH = range(len(REGION_FEATURES))
SLOT = (
    ("present", "1 if a job sits in the slot"),
    ("intensity", "I_j (Eq. 9) over the window"),
    ("sensitivity", "D_j (Eq. 10) over the window"),
    ("log_remaining_h", "log1p(predicted remaining E_j(K*) h)"),
    ("k_target", "k_target/128: the GPUs the rules aim at (K* over the counts its model fits on, "
                 "capped by its GPU request; under start rule `request` the request itself, "
                 "`geo_gym/start_rule.py`)"),
    ("log_waiting_h", "log1p(hours since submission: queueing, plus any earlier attempts and re-queue delays)"),
    ("log_job_failures", "log1p(failures of this job)"),
    ("retrieval_hit", "1 if the prediction came from similar finished jobs"),
    ("min_gpus", "minimum GPUs/128 (the start rule's: no option places it on fewer)"),
)
SLOT_FEATURES = tuple(name for name, _ in SLOT)
(S_PRESENT, S_INTENSITY, S_SENSITIVITY, S_LOG_REMAINING, S_K_TARGET, S_LOG_WAITING,
 S_JOB_FAILURES, S_RETRIEVAL_HIT, S_MIN_GPUS) = range(len(SLOT_FEATURES))
OPTION = (
    ("valid", "1 if the rule places the job now"),
    ("gpus_share", "GPUs / K*"),
    ("log_runtime_h", "log1p(predicted remaining runtime h on that placement)"),
    ("cost_rate", "sum_r n_r P_r / (K* max_r P_r)"),
)
OPTION_FEATURES = tuple(name for name, _ in OPTION)
O_VALID, O_GPUS, O_LOG_RUNTIME, O_COST_RATE = range(len(OPTION_FEATURES))
NUM_GLOBAL = len(GLOBAL_FEATURES)
NUM_REGION = len(REGION_FEATURES)
NUM_SLOT = len(SLOT_FEATURES)
NUM_OPTION = len(OPTION_FEATURES)


def per_slot(num_rules: int = NUM_RULES) -> int:
    """A slot's block with its options, for an option set of ``num_rules`` rules."""
    return NUM_SLOT + num_rules * NUM_OPTION


def max_inferred_regions(num_rules: int = NUM_RULES) -> int:
    """Two layouts have the same size when their region counts differ by a multiple of
    per_slot / gcd(per_slot, NUM_REGION): up to that many regions the size alone tells the layout."""
    return per_slot(num_rules) // math.gcd(per_slot(num_rules), NUM_REGION)


PER_SLOT = per_slot()  # the default option set's
MAX_INFERRED_REGIONS = max_inferred_regions()
MAX_STAGES_NORM = 128.0  # GPU counts are divided by this: no catalog model has more layers
OBS_HIGH = 100.0  # observations are clipped to [0, OBS_HIGH]; log1p(hours) reaches it only past 1e43 h


def region_index(num_regions: int, r: int, feature: int) -> int:
    """Index of region r's ``feature`` (an R_* constant)."""
    return NUM_GLOBAL + NUM_REGION * r + feature


def slot_index(num_regions: int, s: int, feature: int, num_rules: int = NUM_RULES) -> int:
    """Index of queue slot s's ``feature`` (an S_* constant) with ``num_rules`` options a slot."""
    return NUM_GLOBAL + NUM_REGION * num_regions + s * per_slot(num_rules) + feature


def option_index(num_regions: int, s: int, rule: int, feature: int, num_rules: int = NUM_RULES) -> int:
    """Index of slot s's placement option ``rule`` (its index in the option set)'s ``feature``
    (an O_* constant)."""
    return slot_index(num_regions, s, NUM_SLOT, num_rules) + rule * NUM_OPTION + feature


def feature_names(num_regions: int, window: int, rules=None) -> list[str]:
    """The name of every observation entry, in order (e.g. "slot3/min_gpus"); ``rules`` the
    option set (``placement.rule_set``)."""
    names = list(GLOBAL_FEATURES)
    names += [f"region{r}/{f}" for r in range(num_regions) for f in REGION_FEATURES]
    for s in range(window):
        names += [f"slot{s}/{f}" for f in SLOT_FEATURES]
        names += [f"slot{s}/{rule}/{f}" for rule in rule_set(rules) for f in OPTION_FEATURES]
    return names


def observation_table() -> str:
    """The observation's features as a markdown table (block, index in block, name, what it
    holds): env.py's docstring shows it."""
    lines = ["| block | index in block | name | feature |", "|---|---|---|---|"]
    for block, features in (("global", GLOBAL), ("region r", REGION), ("slot s", SLOT), ("option (s, rule)", OPTION)):
        lines += [f"| {block} | {i} | {name} | {what} |" for i, (name, what) in enumerate(features)]
    return "\n".join(lines)


def layout_from_obs_size(size: int, num_regions: int | None = None, num_rules: int = NUM_RULES) -> tuple[int, int]:
    """(num_regions, window) of an observation vector of ``size`` entries with ``num_rules``
    options a slot. Without ``num_regions`` it is inferred, which is unique for up to
    ``max_inferred_regions(num_rules)`` regions (45 for the default set); envs with more must
    pass it (``env.num_regions``)."""
    block = per_slot(num_rules)
    most = max_inferred_regions(num_rules)
    candidates = [num_regions] if num_regions is not None else range(1, most + 1)
    for k in candidates:
        rest = size - NUM_GLOBAL - NUM_REGION * k
        if rest > 0 and rest % block == 0:
            return k, rest // block
    with_rules = "" if num_rules == NUM_RULES else f" and {num_rules} placement options a slot"
    if num_regions is not None:
        raise ValueError(
            f"observation of size {size} does not match the GeoPipe layout with {num_regions} regions{with_rules}"
        )
    raise ValueError(
        f"observation of size {size} does not match the GeoPipe layout with up to "
        f"{most} regions{with_rules}; pass num_regions (env.num_regions)"
    )


OPTION_FIELDS = (
    "rules", "win", "n_win", "path", "alloc", "g", "plen", "t_iter", "feats", "wait_ok", "deadlock", "obs", "mask",
)


@structref.register
class OptionsType(types.StructRef):
    """numba's type of the decision arrays: one reference (as a named tuple of 11 arrays,
    numba's dispatcher typed each array on every call: 4.2-4.5 us a call, against 2.0;
    docs/performance.md)."""

    def preprocess_fields(self, fields):
        return tuple((name, types.unliteral(t)) for name, t in fields)


class Options(structref.StructRefProxy):
    """Each env's current decision (``allocate_options``): ``rules`` the option set's rule ids,
    ``win`` the window's jobs (``n_win`` of them), and per slot and option the placement
    (``path``, ``plen``, ``alloc``, ``g`` GPUs; 0: invalid) and its iteration time
    (``t_iter``); the slots' candidate features (``feats``); whether waiting is possible
    (``wait_ok``) and whether the env is stuck (``deadlock``); its observation (``obs``) and
    action mask (``mask``), which ``begin`` and ``step_env`` write. Python reads the same numpy
    arrays as attributes, as ``sim.Core``'s."""

    _fields = OPTION_FIELDS

    def __reduce__(self):  # pickle and deepcopy: rebuilt around (copies of) the arrays
        return _options, ({name: self.__dict__[name] for name in OPTION_FIELDS},)


structref.define_constructor(Options, OptionsType, OPTION_FIELDS)
structref.define_boxing(OptionsType, Options)


@_jit
def _new_options(*arrays):
    """``Options(*arrays)``, compiled once and cached on disk (``sim._new_core``)."""
    return Options(*arrays)


def _options(arrays: dict[str, np.ndarray]) -> Options:
    o = _new_options(*(arrays[name] for name in OPTION_FIELDS))
    o.__dict__.update(arrays)
    return o


def obs_size(num_regions: int, window: int, num_rules: int = NUM_RULES) -> int:
    return NUM_GLOBAL + NUM_REGION * num_regions + window * per_slot(num_rules)


def num_actions(window: int, num_rules: int = NUM_RULES) -> int:
    return window * num_rules + 1


def allocate_options(num_envs: int, num_regions: int, window: int, rules=None) -> Options:
    """The decision arrays of ``num_envs`` envs; ``rules`` the option set (``placement.rule_set``),
    held as its rule ids in option order (``rules``)."""
    ids = rule_ids(rules)
    o = len(ids)
    return _options({
        "rules": ids,
        "win": np.full((num_envs, window), -1, dtype=np.int64),
        "n_win": np.zeros(num_envs, dtype=np.int64),
        "path": np.full((num_envs, window, o, num_regions), -1, dtype=np.int64),
        "alloc": np.zeros((num_envs, window, o, num_regions), dtype=np.int64),
        "g": np.zeros((num_envs, window, o), dtype=np.int64),
        "plen": np.zeros((num_envs, window, o), dtype=np.int64),
        "t_iter": np.zeros((num_envs, window, o)),
        "feats": np.zeros((num_envs, window, NUM_CAND_FEATURES), dtype=np.float32),
        "wait_ok": np.zeros(num_envs, dtype=np.bool_),
        "deadlock": np.zeros(num_envs, dtype=np.bool_),
        "obs": np.zeros((num_envs, obs_size(num_regions, window, o)), dtype=np.float32),
        "mask": np.zeros((num_envs, num_actions(window, o)), dtype=np.bool_),
    })


@_jit
def _compute_options(c, o, e):
    """Window and every rule's placement (and its iteration time, Eq. 1) for every window
    slot; returns whether any is valid.

    Two shortcuts keep this cheap without changing any result: a slot whose job has the same
    placement inputs as an earlier slot's copies that slot's options (recurring workloads and
    trace size classes repeat models), and the Pathfinder variants aiming at K*, K*/2 and K*/4
    are computed once when the free GPUs cannot reach the smaller target (Alg. 1 with a target
    at or above the free total behaves as with the free total: phase 1 needs a region holding
    them all, phase 2 grows until every region with free GPUs is on the path or a link fails).

    The loops index env e's rows element by element and place into local buffers: numba
    counts a reference (an atomic increment and decrement) for every array view it creates
    or passes, and per option those cost more than the rules themselves.
    """
    w = o.win.shape[1]
    k = c.free.shape[1]
    n = min(w, c.n_pending[e])
    o.n_win[e] = n
    win, g_e, plen_e, path_e, alloc_e, titer_e = o.win[e], o.g[e], o.plen[e], o.path[e], o.alloc[e], o.t_iter[e]
    feats = o.feats[e]
    pend = c.pending[e]
    rules = o.rules
    num_opts = rules.shape[0]
    pf = -1  # Pathfinder's (aiming at K*) option, which the smaller Pathfinder targets may copy
    for q in range(num_opts):
        if rules[q] == RULE_PATHFINDER:
            pf = q
    for s in range(w):
        win[s] = pend[s] if s < n else -1
        for r in range(num_opts):
            g_e[s, r] = 0
            plen_e[s, r] = 0
    candidate_features(c, e, n, feats)
    for s in range(n, w):
        for f in range(feats.shape[1]):
            feats[s, f] = 0.0
    free, prices = c.free[e], c.price[e]
    free_total = 0
    for r in range(k):
        free_total += free[r]
    if free_total == 0:
        return False
    eff = np.empty((k, k))
    residual_bandwidth(c.bandwidth_gbps[e], c.reserved_gbps[e], eff)
    tc, ws = scratch(c.k_target_max[e], k)
    path_buf = np.empty(k, dtype=np.int64)
    alloc_buf = np.empty(k, dtype=np.int64)
    any_valid = False
    bw, intra, overhead = c.bandwidth_gbps[e], c.intra_gbps[e], c.stage_overhead_s[e]
    kstar_e, act_e, work_e, ming_e, mb_e = c.k_target[e], c.activation_gbit[e], c.work_s[e], c.min_gpus[e], c.microbatches[e]
    for s in range(n):
        j = pend[s]
        kstar, act, min_gpus, work, mb = kstar_e[j], act_e[j], ming_e[j], work_e[j], mb_e[j]
        # An earlier slot whose job gets identical placements from every rule on any state:
        # placement depends on K*, A_j, t_comp (work, M_j) and min_gpus, never on iterations.
        twin = -1
        for s2 in range(s):
            i = pend[s2]
            if kstar_e[i] == kstar and act_e[i] == act and work_e[i] == work and ming_e[i] == min_gpus and mb_e[i] == mb:
                twin = s2
                break
        if twin < 0:
            fill_tc(work, kstar, overhead, tc)
        for r in range(num_opts):
            rule = rules[r]
            src, src_r = twin, r  # the option this one copies, if any
            if twin < 0 and pf >= 0 and r > pf and aims_below_k_star(rule):
                if free_total <= rule_target(rule, kstar, min_gpus):
                    src, src_r = s, pf
            if src >= 0:
                g_e[s, r] = g_e[src, src_r]
                plen_e[s, r] = plen_e[src, src_r]
                titer_e[s, r] = titer_e[src, src_r]
                for q in range(k):
                    path_e[s, r, q] = path_e[src, src_r, q]
                    alloc_e[s, r, q] = alloc_e[src, src_r, q]
            else:
                g, plen = job_placement(free, prices, eff, kstar, act, min_gpus, rule, tc, ws, path_buf, alloc_buf)
                g_e[s, r] = g
                plen_e[s, r] = plen
                for q in range(k):
                    path_e[s, r, q] = path_buf[q]
                    alloc_e[s, r, q] = alloc_buf[q]
                titer_e[s, r] = 0.0
                if g > 0:
                    titer_e[s, r] = pipeline_iteration_time_nb(
                        path_buf, plen, alloc_buf, bw, intra, act, work, overhead, mb
                    )
            any_valid = any_valid or g_e[s, r] > 0
    return any_valid


@_jit
def refresh(c, o, e):
    """Bring env e to its next decision: advance through instants where nobody can place
    anything, until a placement is possible or the workload is done."""
    o.deadlock[e] = False
    while True:
        any_valid = _compute_options(c, o, e)
        if any_valid or done(c, e):
            o.wait_ok[e] = next_event_time(c, e) < np.inf
            return
        if not advance(c, e):
            o.wait_ok[e] = False
            o.deadlock[e] = True  # pending jobs, nothing placeable, nothing will happen
            return


@_jit
def action_mask(o, e, out):
    """out[slot * R + option] = that option is valid; out[-1] = waiting is possible."""
    w = o.win.shape[1]
    num_opts = o.rules.shape[0]
    for s in range(w):
        for r in range(num_opts):
            out[s * num_opts + r] = s < o.n_win[e] and o.g[e, s, r] > 0
    out[w * num_opts] = o.wait_ok[e]


@_inline
def reward(d_job_seconds, d_spent_usd, cost_weight, scale):
    """One step's reward and its two parts (env.py, "Rewards"): (reward, JCT part, cost part)
    = -(d hours in the system + cost_weight x d dollars) / scale, and each term alone. The
    only place the reward is computed: the env, the vector env and their infos read it."""
    total = -(d_job_seconds / SECONDS_PER_HOUR + cost_weight * d_spent_usd) / scale
    jct = -d_job_seconds / SECONDS_PER_HOUR / scale
    cost = -cost_weight * d_spent_usd / scale
    return total, jct, cost


@_jit
def step_one(c, o, e, action, cost_weight, scale):
    """Apply one action to env e and bring it to its next decision.

    A masked (invalid) action is treated as "wait": time advances to the next event if there
    is one, otherwise nothing happens. Returns (reward, its JCT part, its cost part, invalid)
    (``reward``), so an episode's return is -(N avg JCT_h + cost_weight x total cost) / scale.
    """
    area0 = c.job_seconds[e]
    spent0 = c.spent_usd[e]
    w = o.win.shape[1]
    num_opts = o.rules.shape[0]
    invalid = True
    if 0 <= action < w * num_opts:
        s = action // num_opts
        r = action % num_opts
        if s < o.n_win[e] and o.g[e, s, r] > 0:
            # the job as int64, as the fast path passes it: one compiled place() for both
            code = place(c, e, np.int64(o.win[e, s]), o.path[e, s, r], o.plen[e, s, r], o.alloc[e, s, r])
            invalid = code != FEASIBLE
    elif action == w * num_opts and o.wait_ok[e]:
        advance(c, e)
        invalid = False
    if invalid and o.wait_ok[e]:
        advance(c, e)
    refresh(c, o, e)
    total, jct, cost = reward(c.job_seconds[e] - area0, c.spent_usd[e] - spent0, cost_weight, scale)
    return total, jct, cost, invalid


@_jit
def encode(c, o, e, out):
    """The observation vector of env e (layout in geo_gym/env.py). Reads env e's rows once:
    numba re-reads a struct field after every store into ``out``."""
    cap, free, price, bw, resv = c.cap[e], c.free[e], c.price[e], c.bandwidth_gbps[e], c.reserved_gbps[e]
    kstar, submit, pred_iters, done_iters = c.k_target[e], c.submit_s[e], c.pred_iters[e], c.done_iters[e]
    win, g_e, titer_e, alloc_e, feats = o.win[e], o.g[e], o.t_iter[e], o.alloc[e], o.feats[e]
    k = free.shape[0]
    w = win.shape[0]
    n_win = o.n_win[e]
    num_opts = o.rules.shape[0]
    t = c.now_s[e]
    cap_total = 0
    free_total = 0
    max_cap = 1
    max_price = 1e-12
    max_bw = 1e-12
    for r in range(k):
        cap_total += cap[r]
        free_total += free[r]
        max_cap = max(max_cap, cap[r])
        max_price = max(max_price, price[r])
        for v in range(k):
            max_bw = max(max_bw, bw[r, v])
    # Metric Tracker: what is visible of the running jobs' progress (never the true end time)
    n_run = c.n_running[e]
    run = c.running[e]
    known = 0
    soonest = np.inf
    for i in range(n_run):
        j = run[i]
        ok, hours = tracked_remaining_h(
            c.tracker_sees[e, j], done_iters[j], t - c.attempt_start_s[e, j], c.t_iter_s[e, j],
            c.full_iters[e, j], c.tracker_frac_noise[e, j], c.tracker_step_noise[e, j],
        )
        if ok:
            known += 1
            soonest = min(soonest, hours)
    repairing = 0
    for r in range(k):
        repairing += c.repairing[e, r]
    out[G_ALPHA] = alpha_nb(resv, bw)
    out[G_FREE] = free_total / max(cap_total, 1)
    out[G_PENDING] = np.log1p(c.n_pending[e])
    out[G_RUNNING] = np.log1p(n_run)
    out[G_WAIT] = 1.0 if o.wait_ok[e] else 0.0
    out[G_DELAYED] = np.log1p(c.n_delayed[e])
    out[G_TRACKER_SOONEST] = np.log1p(soonest) if known > 0 else 0.0
    out[G_TRACKER_COVERAGE] = known / n_run if n_run > 0 else 0.0
    out[G_FAILURES] = np.log1p(c.n_fail_total[e])
    out[G_REPAIR] = repairing / max(cap_total, 1)
    p = NUM_GLOBAL
    for r in range(k):
        res = 0.0
        for v in range(k):
            if v != r:
                res += max(0.0, bw[r, v] - resv[r, v])
        out[p + R_FREE] = free[r] / max(cap[r], 1)
        out[p + R_CAPACITY] = cap[r] / max_cap
        out[p + R_PRICE] = price[r] / max_price
        out[p + R_BANDWIDTH] = res / max(k - 1, 1) / max_bw
        p += NUM_REGION
    for s in range(w):
        j = win[s] if s < n_win else -1
        if j >= 0:
            out[p + S_PRESENT] = 1.0
            out[p + S_INTENSITY] = feats[s, CAND_I]
            out[p + S_SENSITIVITY] = feats[s, CAND_D]
            out[p + S_LOG_REMAINING] = feats[s, CAND_LOG_IDEAL]
            out[p + S_K_TARGET] = kstar[j] / MAX_STAGES_NORM
            out[p + S_LOG_WAITING] = np.log1p((t - submit[j]) / SECONDS_PER_HOUR)
            out[p + S_JOB_FAILURES] = np.log1p(c.n_fail[e, j])
            out[p + S_RETRIEVAL_HIT] = 1.0 if c.pred_hit[e, j] else 0.0
            out[p + S_MIN_GPUS] = c.min_gpus[e, j] / MAX_STAGES_NORM
        else:
            for q in range(NUM_SLOT):
                out[p + q] = 0.0
        p += NUM_SLOT
        for r in range(num_opts):
            g = g_e[s, r] if j >= 0 else 0
            if g > 0:
                rate = 0.0
                for q in range(k):
                    rate += alloc_e[s, r, q] * price[q]
                remaining = remaining_pred(pred_iters[j], done_iters[j])
                out[p + O_VALID] = 1.0
                out[p + O_GPUS] = g / kstar[j]
                out[p + O_LOG_RUNTIME] = np.log1p(remaining * titer_e[s, r] / SECONDS_PER_HOUR)
                out[p + O_COST_RATE] = rate / (kstar[j] * max_price)
            else:
                for q in range(NUM_OPTION):
                    out[p + q] = 0.0
            p += NUM_OPTION
    for i in range(out.shape[0]):
        out[i] = min(out[i], OBS_HIGH)


@_jit
def begin(c, o, e):
    """Bring freshly loaded env e to its first decision; write its observation and mask
    (``o.obs[e]``, ``o.mask[e]``). (One compiled call per reset.)"""
    refresh(c, o, e)
    encode(c, o, e, o.obs[e])
    action_mask(o, e, o.mask[e])


@_jit
def step_env(c, o, e, action, cost_weight, scale):
    """``step_one``, then env e's observation and mask (``o.obs[e]``, ``o.mask[e]``); returns
    (reward, its JCT part, its cost part, invalid, terminated)."""
    total, jct, cost, invalid = step_one(c, o, e, action, cost_weight, scale)
    encode(c, o, e, o.obs[e])
    action_mask(o, e, o.mask[e])
    return total, jct, cost, invalid, done(c, e)


PAIR_FIELDS = ("core", "opts")


@structref.register
class PairType(types.StructRef):
    """numba's type of a ``Pair``."""

    def preprocess_fields(self, fields):
        return tuple((name, types.unliteral(t)) for name, t in fields)


class Pair(structref.StructRefProxy):
    """A single env's core and options as one argument (``step_pair``). numba's dispatcher
    unboxes each struct argument of a call from Python for about 1.7 us, however few its
    fields (docs/performance.md), so one struct for the two takes that off every step of
    ``GeoPipeEnv``."""

    def __reduce__(self):  # pickle and deepcopy: around the (copied) core and options
        return pair, (self.__dict__["core"], self.__dict__["opts"])


structref.define_constructor(Pair, PairType, PAIR_FIELDS)
structref.define_boxing(PairType, Pair)


@_jit
def _new_pair(core, opts):
    """``Pair(core, opts)``, compiled once and cached on disk (``sim._new_core``)."""
    return Pair(core, opts)


def pair(core, opts) -> Pair:
    """``core`` and ``opts`` (one env's: row 0 of each) as a ``Pair``."""
    p = _new_pair(core, opts)
    p.__dict__.update(core=core, opts=opts)
    return p


@_jit
def step_pair(p, action, cost_weight, scale):
    """``step_env`` of env 0 of pair ``p``'s core and options."""
    return step_env(p.core, p.opts, 0, action, cost_weight, scale)


@_jit
def _step_or_skip(c, o, e, actions, stepping, cost_weight, scale, rewards, reward_jct, reward_cost, invalid, terminated):
    """Row e of ``step_batch``: ``step_env`` if env e steps, else a step of nothing."""
    if stepping[e]:
        rewards[e], reward_jct[e], reward_cost[e], invalid[e], terminated[e] = step_env(
            c, o, e, actions[e], cost_weight, scale[e]
        )
    else:
        rewards[e], reward_jct[e], reward_cost[e], invalid[e], terminated[e] = 0.0, 0.0, 0.0, False, False


@_jit
def step_batch(c, o, actions, stepping, cost_weight, scale, rewards, reward_jct, reward_cost, invalid, terminated):
    """Step every env of the batch marked in ``stepping`` once (the others, just reset by a
    NEXT_STEP autoreset, get reward 0): the native vector env's whole inner loop."""
    for e in range(actions.shape[0]):
        _step_or_skip(c, o, e, actions, stepping, cost_weight, scale, rewards, reward_jct, reward_cost,
                      invalid, terminated)


@numba.njit(cache=True, parallel=True)
def step_batch_parallel(c, o, actions, stepping, cost_weight, scale, rewards, reward_jct, reward_cost, invalid, terminated):
    """``step_batch`` with the envs spread over numba's threads (``numba.set_num_threads``).
    Env e reads and writes only row e of the core and the options (and allocates its own
    scratch), so the results are exactly those of ``step_batch``."""
    for e in numba.prange(actions.shape[0]):  # prange's index is unsigned: int64, as step_batch's
        _step_or_skip(c, o, np.int64(e), actions, stepping, cost_weight, scale, rewards, reward_jct, reward_cost,
                      invalid, terminated)


SUMMARY_KEYS = (
    "avg_jct_h", "total_cost", "makespan_h", "avg_wait_h", "failures", "false_restarts", "rerun_gpu_h", "rerun_cost",
)
SUMMARY_COUNTS = ("failures", "false_restarts")  # the summary's integers (ints in an env's info)


@_jit
def summary_values(c, e, out):
    """Env e's finished episode, in SUMMARY_KEYS order: average JCT (Eq. 3) and waiting in
    hours, total electricity cost (Eq. 4), makespan in hours, infrastructure failures,
    application failures the failure handler misjudged as infrastructure and restarted, and the
    GPU-hours and electricity of the attempts that re-ran them in vain."""
    n = c.n_jobs[e]
    jct = 0.0
    wait = 0.0
    cost = 0.0
    first = np.inf
    last = -np.inf
    for j in range(n):
        jct += c.end_s[e, j] - c.submit_s[e, j]
        wait += c.start_s[e, j] - c.submit_s[e, j]
        cost += c.cost_usd[e, j]
        first = min(first, c.submit_s[e, j])
        last = max(last, c.end_s[e, j])
    out[0] = jct / n / SECONDS_PER_HOUR
    out[1] = cost
    out[2] = (last - first) / SECONDS_PER_HOUR if not np.isnan(jct) else np.nan  # unfinished: undefined
    out[3] = wait / n / SECONDS_PER_HOUR
    out[4] = c.n_fail_total[e]
    out[5] = c.n_false_restart_total[e]
    out[6] = c.rerun_gpu_h[e]
    out[7] = c.rerun_usd[e]


def slot_feature_columns(window: int, num_regions: int, num_rules: int = NUM_RULES) -> tuple[np.ndarray, np.ndarray, int]:
    """Where the per-slot candidate features and per-option validity sit in the observation:
    (indices of [I, D, log remaining] per slot (W, 3), indices of the option 'valid' flags
    (W, R), index of alpha). Fixed policies read these to act from an observation alone."""
    feats = np.array([[slot_index(num_regions, s, f, num_rules) for f in (S_INTENSITY, S_SENSITIVITY, S_LOG_REMAINING)]
                      for s in range(window)], dtype=np.int64).reshape(window, 3)
    valid = np.array([[option_index(num_regions, s, r, O_VALID, num_rules) for r in range(num_rules)]
                      for s in range(window)], dtype=np.int64).reshape(window, num_rules)
    return feats, valid, G_ALPHA
