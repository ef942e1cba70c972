"""The queue index (geo_gym/queue_index.py) and the decisions read from it
(fixed._decide_indexed): the index holds exactly the pending jobs in (class, value, job) order
through inserts, removals, splits, merges and growth, and every decision read from it equals
``fixed._decide``'s on the same state, step by step, with re-queued jobs (failures), ties
of float32-rounded keys and more classes than it keeps (then run_fixed_policy goes back to
``_decide``)."""

from __future__ import annotations

import numpy as np
import pytest
from test_trace_fast_path import reference_run

from geo_gym import catalog, fixed, loading, queue_index, scenarios, sim
from geo_gym.cluster import Cluster, Region
from geo_gym.placement import RULE_NAMES
from geo_gym.scenarios import Scenario
from geo_gym.uncertainty import UncertaintyConfig
from geo_gym.workload import JobSpec

RULE = {name: i for i, name in enumerate(RULE_NAMES)}
ORDERS = [fixed.ORDER_FCFS, fixed.ORDER_SJF, fixed.ORDER_PRIORITY, fixed.ORDER_QSSF]


def check_invariants(ix, expected):
    """The index's entries are ``expected`` (a dict job -> (class, value, gpus)) in order, and
    every block's bookkeeping is right."""
    c, v, j, g = queue_index.entries(ix)
    assert sorted(j.tolist()) == sorted(expected)
    want = sorted(expected, key=lambda job: (expected[job][0], expected[job][1], job))
    assert j.tolist() == want
    assert [(int(ci), float(vi), int(gi)) for ci, vi, gi in zip(c, v, g, strict=True)] == [expected[job] for job in want]
    meta = ix.meta
    blocks = ix.order[: meta[0]]
    assert len(set(blocks.tolist())) == len(blocks)
    for p, b in enumerate(blocks):
        n = ix.size[b]
        assert 1 <= n <= queue_index.BLOCK
        assert ix.least[b] == ix.gpus[b, :n].min()
        last = (ix.last_cls[p], ix.last_value[p], ix.last_job[p])
        assert last == (ix.cls[b, n - 1], ix.value[b, n - 1], ix.job[b, n - 1])
    for k in range(meta[2]):
        assert ix.class_count[k] == sum(1 for e in expected.values() if e[0] == k)
        gpus = [e[2] for e in expected.values() if e[0] == k]
        least = queue_index.class_least_gpus(ix, k)
        assert least == 0 if ix.class_gpus_many[k] else least == min(gpus, default=np.iinfo(np.int32).max)


def test_index_keeps_order_through_random_inserts_and_removals():
    rng = np.random.default_rng(0)
    ix = queue_index.new_index(1)
    expected = {}
    free_jobs = list(range(6000))
    many_seen = False
    for step in range(12000):
        grow = len(expected) < 50 or (rng.random() < (0.55 if step < 8000 else 0.3) and free_jobs)
        if grow and free_jobs:
            j = free_jobs.pop(int(rng.integers(len(free_jobs))))
            c = int(rng.integers(3))
            v = float(rng.integers(0, 40)) / 4  # many equal values: ties go by job index
            g = int(rng.integers(1, 9 if c < 2 else 13))  # class 2: more than CLASS_GPUS distinct
            if queue_index.room(ix) < 1:
                ix = queue_index.grow(ix, 1)
            queue_index.insert(ix, c, v, j, g)
            expected[j] = (c, v, g)
        else:
            j = list(expected)[int(rng.integers(len(expected)))]
            c, v, _ = expected.pop(j)
            queue_index.remove(ix, c, v, j)
            free_jobs.append(j)
        if step % 1000 == 999:
            check_invariants(ix, expected)
            many_seen = many_seen or bool(ix.class_gpus_many[2])
    check_invariants(ix, expected)
    assert ix.order.shape[0] > 1 and many_seen  # it grew; class 2 outgrew its counts
    for j in list(expected):
        c, v, _ = expected.pop(j)
        queue_index.remove(ix, c, v, j)
    check_invariants(ix, expected)
    assert ix.meta[0] == 0


def test_index_lookups():
    ix = queue_index.new_index()
    assert queue_index.class_of(ix, 2.5) == 0 and queue_index.class_of(ix, 1.0) == 1
    assert queue_index.class_of(ix, 2.5) == 0
    for j, (c, v) in enumerate([(0, 3.0), (1, 9.0), (0, 1.0), (1, 2.0), (0, 3.0)]):
        queue_index.insert(ix, c, v, j, 1)
    assert queue_index.class_last_value(ix, 0) == 3.0 and queue_index.class_last_value(ix, 1) == 9.0
    p, i = queue_index.lower_bound(ix, 0, 3.0, -1)
    assert ix.job[ix.order[p], i] == 0  # the first (0, 3.0) entry: job 0 before job 4
    assert queue_index.lower_bound(ix, 2, -np.inf, -1) == (ix.meta[0], 0)
    with pytest.raises(AssertionError, match="not in the index"):
        queue_index.remove(ix, 0, 3.0, 7)
    for k in range(2, queue_index.MAX_CLASSES):
        assert queue_index.class_of(ix, float(k) + 0.25) == k
    assert queue_index.class_of(ix, 1e9) == -1


def loaded(scen, unc, seed=0):
    core = sim.ensure(sim.allocate(1, scen.cluster.num_regions, 1), **loading.required_sizes(scen, unc))
    loading.load(core, 0, scen, np.random.default_rng(seed), unc)
    return core


def lockstep(scen, order, rule, unc=None):
    """run_fixed_policy's loop in Python on two copies of one episode: the decision read from
    the index on one (its queue loose), ``_decide`` on the other, compared at every step, and
    the index and the loose queue checked against the other's queue. Returns (decisions, core)."""
    unc = unc or UncertaintyConfig()
    a, b = loaded(scen, unc), loaded(scen, unc)
    k, n_max = a.free.shape[1], a.submit_s.shape[1]
    tc, ws = sim.scratch(a.k_target_max[0], k)
    work = (np.empty((n_max, sim.NUM_CAND_FEATURES), np.float32), np.empty(n_max), np.empty(n_max, np.bool_),
            np.empty(n_max, np.int64), tc, ws, np.empty(k, np.int64), np.empty(k, np.int64))
    ix = queue_index.new_index(1)
    cur = np.zeros((queue_index.MAX_CLASSES, 2), np.int64)
    head = np.zeros((queue_index.MAX_CLASSES, 3), np.int64)
    head_key = np.zeros(queue_index.MAX_CLASSES)
    ix = queue_index.grow(ix, a.n_pending[0])
    for j in a.pending[0, : a.n_pending[0]]:
        assert fixed._index_add(a, 0, order, ix, j)
    sim.loosen_queue(a, 0)  # as run_fixed_policy does: starts swap, re-queued jobs append
    decisions = 0
    while not sim.done(a, 0):
        j = fixed._decide_indexed(a, 0, order, rule, ix, cur, head, head_key, *work[4:])
        assert j != -2
        assert j == fixed._decide(b, 0, order, rule, 0, False, *work)
        decisions += 1
        if j >= 0:
            fixed._index_drop(a, 0, order, ix, j)
        else:
            first = a.next_arrival[0]
            if queue_index.room(ix) < fixed._queued_by_next_event(a, 0):
                ix = queue_index.grow(ix, fixed._queued_by_next_event(a, 0))
            was_out = np.concatenate([a.running[0, : a.n_running[0]], a.delayed[0, : a.n_delayed[0]]]).astype(np.int32)
            assert sim.advance(a, 0) and sim.advance(b, 0)
            assert fixed._index_catch_up(a, 0, order, ix, first, was_out, len(was_out))
        _, _, jobs, _ = queue_index.entries(ix)
        pend = a.pending[0, : a.n_pending[0]]
        assert sorted(jobs.tolist()) == sorted(pend.tolist()) == sorted(b.pending[0, : b.n_pending[0]].tolist())
        assert (a.pending[0, a.queue_pos[0, pend]] == pend).all()
    assert a.queue_loose[0] and not b.queue_loose[0]
    for name in ("start_s", "end_s", "cost_usd", "gpus", "path"):
        assert np.array_equal(getattr(a, name), getattr(b, name), equal_nan=True), name
    return decisions, a


@pytest.mark.parametrize("order", ORDERS)
def test_indexed_decisions_equal_the_queue_walk(order):
    # an overloaded queue (hundreds waiting), most jobs too large for the GPUs free at a time
    scen = scenarios.make_scenario("random", 0, num_jobs=400, num_regions=11)
    decisions, core = lockstep(scen, order, RULE["pathfinder"])
    assert decisions > 400
    assert (core.start_s[0, :400] - core.submit_s[0, :400]).max() > 50 * 3600


@pytest.mark.parametrize("order", [fixed.ORDER_PRIORITY, fixed.ORDER_SJF])
def test_indexed_decisions_with_requeued_jobs(order):
    """Failures re-queue jobs with less work left (a new value), through the delayed set."""
    unc = UncertaintyConfig.preset("realistic").replace(failure_rate_per_gpu_hour=0.01)
    scen = scenarios.make_scenario("random", 2, num_jobs=300, num_regions=11)
    _, core = lockstep(scen, order, RULE["lcf"], unc)
    assert core.n_fail[0].sum() > 20


def test_keys_that_round_to_one_float32_go_by_queue_order():
    """BACE-Pipe's I_j is E_j(1) / max rounded to float32: jobs of one b_j (one class) whose
    E_j(1) differ by less than its precision tie, and then the earlier job goes first, even
    though its E_j(1) is larger (the index holds them in E_j(1) order)."""
    cl = Cluster((Region("A", 16, 0.2, 40.0), Region("B", 16, 0.1, 10.0)))
    model = catalog.PAPER_MODELS[7]
    jobs = [JobSpec("long", model, catalog.PAPER_DATASETS[0], submit=0.0, iterations=200.0, min_gpus=16)]
    for i in range(40):  # later jobs slightly shorter
        jobs.append(JobSpec(f"j{i}", model, catalog.PAPER_DATASETS[0], submit=10.0 + i,
                            iterations=10.0 * (1 + (40 - i) * 1e-10), min_gpus=16))
    scen = Scenario("ties", cl, tuple(jobs))
    _, core = lockstep(scen, fixed.ORDER_PRIORITY, RULE["lcf"])
    e1 = core.pred_iters[0, 1:41] * core.t_iter_1gpu_s[0, 1:41]
    assert len(np.unique(e1)) == 40 and len(np.unique(np.float32(e1 / e1.max()))) == 1
    assert len(np.unique(core.b_target_gbps[0, :41])) == 1
    assert np.argsort(core.start_s[0, 1:41], kind="stable").tolist() == list(range(40))  # queue order


def test_more_classes_than_kept_fall_back_to_the_queue_walk():
    """Over MAX_CLASSES distinct b_j the index is dropped and run_fixed_policy decides by
    ``_decide``: the same run as the plain loop."""
    cl = Cluster((Region("A", 32, 0.2, 40.0), Region("B", 32, 0.1, 10.0)))
    rng = np.random.default_rng(5)
    jobs = []
    for i in range(queue_index.MAX_CLASSES + 30):
        model = catalog.ModelSpec(f"m{i}", 2e9, 32, 1024 + 16 * i, 256)
        jobs.append(JobSpec(f"j{i}", model, catalog.PAPER_DATASETS[0], submit=float(i * 20),
                            epochs=float(rng.uniform(0.05, 0.3))))
    scen = Scenario("classes", cl, tuple(jobs))
    unc = UncertaintyConfig()
    fast, ref = loaded(scen, unc), loaded(scen, unc)
    assert len(np.unique(fast.b_target_gbps[0, : len(jobs)])) > queue_index.MAX_CLASSES
    assert fixed.run_fixed_policy(fast, 0, fixed.ORDER_PRIORITY, RULE["pathfinder"], 0)
    assert reference_run(ref, 0, fixed.ORDER_PRIORITY, RULE["pathfinder"], 0)
    for name in ("start_s", "end_s", "cost_usd", "gpus", "path"):
        assert np.array_equal(getattr(fast, name), getattr(ref, name), equal_nan=True), name
    assert (fast.start_s[0, : len(jobs)] > fast.submit_s[0, : len(jobs)]).sum() > 20  # a queue formed


@pytest.mark.parametrize("order", ORDERS)
def test_run_switching_between_index_and_queue_equals_the_plain_loop(order):
    """run_fixed_policy with low thresholds: the queue crosses them both ways several times
    (index built, grown, dropped, built again), under failures that re-queue jobs; the run
    equals the plain loop's."""
    unc = UncertaintyConfig.preset("realistic").replace(failure_rate_per_gpu_hour=0.002)
    n = 400
    scen = scenarios.make_scenario("random", 4, num_jobs=n, num_regions=11, mean_interarrival=2400.0)
    fast, ref = loaded(scen, unc), loaded(scen, unc)
    assert fixed.run_fixed_policy(fast, 0, order, RULE["pathfinder"], 0, False, 24, 6)
    assert reference_run(ref, 0, order, RULE["pathfinder"], 0)
    for name in ("start_s", "end_s", "cost_usd", "gpus", "alloc", "path", "n_fail"):
        assert np.array_equal(getattr(fast, name), getattr(ref, name), equal_nan=True), name
    assert fast.n_fail[0].sum() > 0 and not fast.queue_loose[0]
    sub, start = fast.submit_s[0, :n], fast.start_s[0, :n]
    times = np.sort(np.concatenate([sub, start]))
    queue = np.searchsorted(np.sort(sub), times, "right") - np.searchsorted(np.sort(start), times, "right")
    assert ((queue[:-1] < 24) & (queue[1:] >= 24)).sum() >= 2  # (last attempts' starts: roughly)


def test_a_run_left_stuck_returns_its_queue_in_submit_order():
    """A deadlock inside the indexed phase (a job LDF cannot place: it keeps a job in one
    region, and min_gpus is beyond every region) returns with the queue in submit order: the
    caller names the stuck jobs from it."""
    cl = Cluster((Region("A", 8, 0.2, 40.0), Region("B", 8, 0.1, 10.0)))
    model = catalog.PAPER_MODELS[7]
    jobs = [JobSpec(f"j{i}", model, catalog.PAPER_DATASETS[0], submit=float(i), iterations=50.0,
                    min_gpus=12 if i % 10 == 3 else 4) for i in range(60)]
    core = loaded(Scenario("stuck", cl, tuple(jobs)), UncertaintyConfig())
    assert not fixed.run_fixed_policy(core, 0, fixed.ORDER_SJF, RULE["ldf"], 0, False, 8, 1)
    assert not core.queue_loose[0]
    assert core.pending[0, : core.n_pending[0]].tolist() == [3, 13, 23, 33, 43, 53]
