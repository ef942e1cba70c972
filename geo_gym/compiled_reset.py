"""An episode's reset in one compiled call: the workload's seed and draw, the warm-up
workloads' seeds and fates, the episode's fates, the profile columns, the load and the first
decision.

``loading.start_episode`` does the same in Python around compiled pieces; its numbers and
these are the same, bit for bit (the generator's stream included: ``geo_gym.rng`` is numpy's
PCG64 in compiled code, advancing the env's own ``np_random``), which
tests/test_compiled_reset.py checks field by field of the core. It applies where every
number an episode draws is one of those: a built-in scenario whose workload compiled code
draws (``scenarios.WorkloadDraw``: paper-default, geo-wan, recurring) and an uncertainty
configuration that draws nothing else (``draws.reads_draws`` False: no noisy predictor, no
failures, handler or tracker noise) and predicts statically (oracle or user estimate: the
retrieval predictor reads the workload's metadata). Any other setting, and an episode that
``loading`` would refuse (``reset_env`` returns None, the generator put back), resets through
``loading``, which raises the error that names the job.

The episode's ``Scenario`` is not built: ``reset_env`` returns the workload's seed, from which
``scenario_factory``'s function builds it when the env is asked for it.
"""

from __future__ import annotations

import numba
import numpy as np
from numba import types
from numba.experimental import structref

from geo_gym import catalog, decision, rng, sim
from geo_gym.loading import _apply_fates, _derived
from geo_gym.scenarios import DRAW_PAPER, Scenario, ScenarioFactory, _paper_picks, _recurring_jobs
from geo_gym.state import SECONDS_PER_HOUR
from geo_gym.uncertainty import UncertaintyConfig, draws
from geo_gym.uncertainty.predictors import OraclePredictor, UserEstimatePredictor
from geo_gym.uncertainty.workload import FATE_FRACTION_BETA
from geo_gym.workload import END_UNKNOWN, MAX_SUBMIT_S, _catalog_table, catalog_iterations, constant

_SEED_HIGH = 2**31 - 1  # loading.draw_workload_seed's bound


# A Plan's fields, in _new_plan's order: the workload draw's (scenarios.WorkloadDraw's), then
# the catalog's per-model profile (workload._catalog_table), the cluster and settings, the
# neutral drawn columns (draws.neutral_columns).
PLAN_FIELDS = (
    "kind", "num_jobs", "mean_interarrival", "models", "datasets", "epochs", "p_early", "end",
    "n_datasets", "warmups", "early_end_rate", "predict_user",
    "work", "mb", "act", "t1", "target", "tk", "min_g", "b_ref", "batch", "samples",
    "cap", "price", "bandwidth", "scalars", "fills", "end_kind",
    "failure_draws", "repair_h", "handler_u", "end_kind_u", "tracker_sees", "tracker_frac_noise",
    "tracker_step_noise",
)


@structref.register
class PlanType(types.StructRef):
    """numba's type of a Plan: one reference to its fields (passing them one by one cost
    numba's dispatcher about 8 us a reset)."""

    def preprocess_fields(self, fields):
        return tuple((name, types.unliteral(t)) for name, t in fields)


class Plan(structref.StructRefProxy):
    """Everything of an env's episodes that does not change between them (``PLAN_FIELDS``):
    the workload draw's constants, the catalog's per-model profile, the cluster and settings,
    the neutral drawn columns. Arrays read-only, so that every plan has one numba type."""

    def __reduce__(self):  # pickle: rebuilt from its fields (numba's struct cannot be pickled)
        return _make_plan, (self.__dict__["fields"],)

    def __deepcopy__(self, memo):
        return self  # immutable: a copied env shares it


structref.define_constructor(Plan, PlanType, PLAN_FIELDS)
structref.define_boxing(PlanType, Plan)


@numba.njit(cache=True)
def _new_plan(*fields):
    """``Plan(*fields)``, compiled once and cached on disk (see ``sim._new_core``)."""
    return Plan(*fields)


def _make_plan(fields: tuple) -> Plan:
    p = _new_plan(*fields)
    p.__dict__["fields"] = fields
    return p


def _frozen(a) -> np.ndarray:
    a = np.array(a)  # a copy: the plan's own
    a.setflags(write=False)
    return a


def plan(
    factory, probe: Scenario, unc: UncertaintyConfig, warmup_workloads: int, core, warmup_scenario=None
) -> tuple[Plan | None, object]:
    """(the ``Plan`` of an env's episodes, or None where they reset through ``loading``; the
    core, sized for them). ``probe``: a workload of the factory (its cluster and physics are
    every seed's)."""
    draw = factory.draw() if isinstance(factory, ScenarioFactory) and factory.draw is not None else None
    derived = _derived(unc)
    if draw is None or warmup_scenario is not None or derived.retrieval or derived.random:
        return None, core
    if type(derived.predictor) not in (OraclePredictor, UserEstimatePredictor):
        return None, core  # (a subclass may predict otherwise)
    cl = probe.cluster
    table = _catalog_table(cl.gpu, probe.stage_overhead, cl.intra_region_gbps, probe.memory_model, probe.start_rule)
    min_g = table[6][draw.models]  # _catalog_table: (work, M, A, t1, k_target, tk, min GPUs, ...)
    if (min_g == 0).any() or min_g.max(initial=0) > cl.total_gpus:
        return None, core  # a model that cannot run: loading names the job when one is drawn
    n = draw.num_jobs
    core = sim.ensure(core, n, **derived.sizes)
    scalars = sim.episode_scalars(derived.settings, sim.ClusterColumns(
        cl.capacities, cl.prices, cl.bandwidth, float(cl.intra_region_gbps), float(cl.gpu.power_kw),
        float(probe.stage_overhead)))
    arrays = (
        draw.models.astype(np.int64), draw.datasets.astype(np.int64), draw.epochs, draw.p_early, draw.end,
    )
    settings = (len(catalog.PAPER_DATASETS), int(warmup_workloads), float(unc.early_end_rate),
                isinstance(derived.predictor, UserEstimatePredictor))
    cluster = (cl.capacities.astype(np.int64), cl.prices.astype(np.float64), cl.bandwidth.astype(np.float64),
               scalars, sim._FILLS, constant(n, END_UNKNOWN))
    drawn = tuple(draws.neutral_columns(unc, n, sim._sizes(core)["A"]))
    return _make_plan((
        int(draw.kind), int(n), float(draw.mean_interarrival), *(_frozen(a) for a in arrays), *settings,
        *(_frozen(a) for a in (*table, *cluster, *drawn)),
    )), core


class Views:
    """A numpy generator and its ``rng.state_arrays``. A copy or pickle of it is None: the
    copied arrays would not be the copied generator's memory (``views`` makes new ones)."""

    __slots__ = ("generator", "s", "b")

    def __init__(self, generator: np.random.Generator):
        self.generator = generator
        self.s, self.b = rng.state_arrays(generator)

    def __copy__(self):
        return None

    def __deepcopy__(self, memo):
        return None

    def __reduce__(self):
        return type(None), ()


def views(held: Views | None, generator: np.random.Generator) -> Views | None:
    """``held`` if it is ``generator``'s already (an env keeps it between resets), else new
    ``Views``; None for a generator that is not numpy's PCG64."""
    if held is not None and held.generator is generator:
        return held
    try:
        return Views(generator)
    except ValueError:
        return None


RESETTER_FIELDS = ("pair", "plan", "s", "b")


@structref.register
class ResetterType(types.StructRef):
    """numba's type of a ``Resetter``."""

    def preprocess_fields(self, fields):
        return tuple((name, types.unliteral(t)) for name, t in fields)


class Resetter(structref.StructRefProxy):
    """What a single env's compiled reset reads, as one argument of ``reset_env``: its
    ``decision.Pair``, its ``Plan`` and its generator's state arrays. numba's dispatcher
    unboxes each struct argument for about 1.7 us (docs/performance.md): three of them and
    two arrays a reset, one with this. A copy or pickle of it is None, like ``Views``'s:
    the env builds a new one around its copied generator."""

    def __copy__(self):
        return None

    def __deepcopy__(self, memo):
        return None

    def __reduce__(self):
        return type(None), ()


structref.define_constructor(Resetter, ResetterType, RESETTER_FIELDS)
structref.define_boxing(ResetterType, Resetter)


@numba.njit(cache=True)
def _new_resetter(pair, p, s, b):
    """``Resetter(pair, p, s, b)``, compiled once and cached on disk (``sim._new_core``)."""
    return Resetter(pair, p, s, b)


def resetter(pair, p: Plan, held: Views) -> Resetter:
    """A ``Resetter`` of env 0 of ``pair`` (``decision.pair``) drawing from ``held``'s
    generator (``views``), which each reset advances."""
    r = _new_resetter(pair, p, held.s, held.b)
    r.__dict__.update(pair=pair, views=held)
    return r


def reset_env(r: Resetter) -> tuple[int, float] | None:
    """Draw and load the next episode of a ``Resetter``'s env and bring it to its first
    decision: (the workload's seed, the reward scale), or None (nothing changed, the
    generator put back) when ``loading`` must load it."""
    seed, scale = _reset_one(r)
    return None if seed < 0 else (int(seed), float(scale))


@numba.njit(cache=True)
def _reset_one(r):
    return _reset(r.pair.core, r.pair.opts, 0, r.s, r.b, r.plan)


def reset_many(p: Plan, core, opts, envs: np.ndarray, states: np.ndarray, bufs: np.ndarray,
               seeds: np.ndarray, scales: np.ndarray) -> None:
    """``reset_env`` of each env in ``envs`` (int64), in one call: env e draws from row e of
    ``states`` and ``bufs`` (a vector env's generators, (N, 4) and (N, 2), as
    ``rng.state_arrays``). ``seeds[e]``/``scales[e]`` get env e's workload seed and reward
    scale (arrays of all N envs); a seed of -1: nothing changed, ``loading`` must load that env."""
    _reset_many(core, opts, envs, states, bufs, seeds, scales, p)


def generator(s: np.ndarray, b: np.ndarray) -> np.random.Generator:
    """A numpy Generator in state (s, b) (for ``loading``, where a compiled reset cannot load)."""
    gen = np.random.Generator(np.random.PCG64())
    held = Views(gen)
    held.s[:], held.b[:] = s, b
    return gen


def store(gen: np.random.Generator, s: np.ndarray, b: np.ndarray) -> None:
    """Copy numpy Generator ``gen``'s PCG64 state into (s, b)."""
    held = Views(gen)  # (a ValueError for another bit generator)
    s[:], b[:] = held.s, held.b


@numba.njit(cache=True)
def _reset_many(c, o, envs, states, bufs, seeds, scales, p):
    for k in range(envs.shape[0]):
        e = envs[k]
        seeds[e], scales[e] = _reset(c, o, e, states[e], bufs[e], p)


@numba.njit(cache=True)
def _numpy_sum(x):
    """``x.sum()`` as numpy adds float64: pairwise, eight running sums within blocks of 128."""
    n = x.shape[0]
    if n < 8:
        total = 0.0
        for i in range(n):
            total += x[i]
        return total
    if n <= 128:
        r = x[:8].copy()
        i = 8
        while i < n - n % 8:
            for j in range(8):
                r[j] += x[i + j]
            i += 8
        total = ((r[0] + r[1]) + (r[2] + r[3])) + ((r[4] + r[5]) + (r[6] + r[7]))
        while i < n:
            total += x[i]
            i += 1
        return total
    half = n // 2
    half -= half % 8
    return _numpy_sum(x[:half]) + _numpy_sum(x[half:])


@numba.njit(cache=True)
def _reset(c, o, e, s, b, p):
    saved_s, saved_b = s.copy(), b.copy()
    beta_a, beta_b = FATE_FRACTION_BETA
    n = p.num_jobs
    # loading.start_episode's order: the workload's seed, each warm-up workload's seed and
    # fates (drawn though nothing reads them, so that the stream is the same), the fates
    seed = rng.bounded(s, b, 0, _SEED_HIGH)
    for _ in range(p.warmups):
        rng.bounded(s, b, 0, _SEED_HIGH)
        for _ in range(n):
            rng.next_double(s)
        for _ in range(n):
            rng.beta(s, beta_a, beta_b)
    ws, wb = rng.seeded(seed)
    model = np.empty(n, np.int64)
    dataset = np.empty(n, np.int64)
    ep = np.empty(n)
    if p.kind == DRAW_PAPER:
        dataset[:] = _paper_picks(ws, wb, n, p.n_datasets)
        model[:] = p.models
        ep[:] = p.epochs
        submit = np.zeros(n)
        given = np.full(n, np.nan)
    else:
        submit, tmpl, given, jittered = _recurring_jobs(ws, wb, n, p.mean_interarrival, p.p_early, p.end, p.epochs)
        for i in range(n):
            model[i], dataset[i], ep[i] = p.models[tmpl[i]], p.datasets[tmpl[i]], jittered[i]
    u = np.empty(n)
    frac = np.empty(n)
    for i in range(n):
        u[i] = rng.next_double(s)
    for i in range(n):
        frac[i] = rng.beta(s, beta_a, beta_b)
    full, t1_j, tk_j = catalog_iterations(model, dataset, ep, p.samples, p.batch, p.t1, p.tk)
    ideal = full * tk_j
    last, shortest = submit[n - 1], ideal.min()
    if not (last <= MAX_SUBMIT_S and shortest > 0 and last + shortest != last):
        s[:], b[:] = saved_s, saved_b  # loading's _check_time_resolution decides (and names the job)
        return -1, 0.0
    iters = _apply_fates(u, frac, given, np.ones(n, np.bool_), full, p.early_end_rate)
    pred = np.maximum(full if p.predict_user else iters, sim.MIN_PRED_ITERS)
    sim.write_episode(
        c, e, p.cap, p.price, p.bandwidth, p.scalars, p.fills,
        submit, p.work[model], p.mb[model], full, iters, p.end_kind, p.act[model], p.target[model],
        p.min_g[model], p.b_ref[model], t1_j, tk_j, pred,
        p.failure_draws, p.repair_h, p.handler_u, p.end_kind_u, p.tracker_sees, p.tracker_frac_noise,
        p.tracker_step_noise,
    )
    decision.begin(c, o, e)
    return seed, _numpy_sum(ideal) / SECONDS_PER_HOUR
