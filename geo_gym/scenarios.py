"""Named scenarios: a cluster plus a workload, with the sensitivity knobs of paper IV-C/D.

``make_scenario(name, seed=0, **knobs)``:

| name          | cluster                              | workload                                  |
|---------------|--------------------------------------|-------------------------------------------|
| paper-default | Table II, B_uv = (B_u + B_v)/2       | Table III jobs (cycled), datasets by seed |
| paper-fig1    | Fig. 1's regions A-D, Mbps links     | jobs P (Qwen2.5-14B), Q (Llama-3.1-70B)   |
| geo-wan       | Table II GPUs and prices, B_uv       | as paper-default                          |
|               | measured between AWS regions (DT-FM) |                                           |
| random        | 3-6 random regions (seeded)          | random Table III jobs, Poisson arrivals   |
| recurring     | Table II                             | users resubmitting variants of templates, |
|               |                                      | Poisson arrivals, recurring early ends    |

Knobs: ``bandwidth_scale`` (Fig. 5), ``capacity_scale`` (Fig. 6), ``num_jobs`` (Fig. 7), and
for ``random`` also ``num_regions`` and ``mean_interarrival`` (seconds). Every scenario also
takes the per-stage compute knobs (``COMPUTE_KNOBS``): ``stage_overhead`` (seconds per stage
and micro-batch in t_comp, default ``catalog.DEFAULT_STAGE_OVERHEAD_S``) and ``mfu`` (the GPU's
effective FLOP/s as a share of its datasheet peak, default ``catalog.ASSUMED_MFU``); both move
t_comp, hence K* (Eq. 13) and b_j (Eq. 6) (scripts/regime_map.py sweeps them).

``paper-default``, ``geo-wan``, ``random`` and ``recurring`` hold their jobs as a ``workload.JobTable``
(columns of catalog jobs, the ``JobSpec`` tuple built on first access), so that an env reset
draws and loads a workload without one Python object per job; the draws are the same as a
job-by-job loop's (``tests/test_loading.py``).
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from functools import cache, lru_cache, partial
from typing import NamedTuple

import numba
import numpy as np

from geo_gym import catalog, rng
from geo_gym.cluster import Cluster, Region, paper_cluster
from geo_gym.memory import MemoryModel
from geo_gym.start_rule import StartRule
from geo_gym.workload import (
    DEFAULT_MEMORY,
    DEFAULT_START_RULE,
    JobSpec,
    JobTable,
    _per_iteration,
    constant,
)


@dataclass(frozen=True)
class Scenario:
    name: str
    cluster: Cluster
    jobs: Sequence[JobSpec]  # a tuple, or a JobTable (the built-in scenarios: columns)
    stage_overhead: float = catalog.DEFAULT_STAGE_OVERHEAD_S
    # how few GPUs a job may start on (geo_gym/start_rule.py); a string is parsed
    start_rule: StartRule | str = DEFAULT_START_RULE
    memory_model: MemoryModel = DEFAULT_MEMORY  # GPU memory per stage (geo_gym/memory.py)

    def __post_init__(self) -> None:
        if not self.jobs:
            raise ValueError(f"Scenario {self.name!r} has no jobs")
        if not self.stage_overhead > 0:
            raise ValueError(f"Scenario.stage_overhead must be > 0, got {self.stage_overhead!r}")
        object.__setattr__(self, "start_rule", StartRule.parse(self.start_rule))
        if not isinstance(self.memory_model, MemoryModel):
            raise ValueError(f"Scenario.memory_model must be a geo_gym.memory.MemoryModel, got {self.memory_model!r}")


def _positive_int(name: str, value) -> int:
    """A knob that counts something: an integer >= 1 (2.5 regions or True users are errors)."""
    if isinstance(value, bool) or not isinstance(value, int | np.integer | float) or not (
        np.isfinite(value) and int(value) == value and value >= 1
    ):
        raise ValueError(f"{name} must be an integer >= 1, got {value!r}")
    return int(value)


def _check_num_jobs(num_jobs) -> int:
    return _positive_int("num_jobs", num_jobs)


def _finite_non_negative(name: str, value) -> float:
    if isinstance(value, bool) or not isinstance(value, int | np.integer | float) or not (
        np.isfinite(value) and value >= 0
    ):
        raise ValueError(f"{name} must be a finite number >= 0, got {value!r}")
    return float(value)


@lru_cache(maxsize=64)
def _paper_cluster_scaled(bandwidth_scale: float, capacity_scale: float) -> Cluster:
    return paper_cluster().scaled(bandwidth_scale, capacity_scale)  # immutable: safe to share


def paper_default(
    seed: int = 0, bandwidth_scale: float = 1.0, capacity_scale: float = 1.0, num_jobs: int = 8
) -> Scenario:
    """Paper IV-A: Table II regions; the eight Table III jobs (cycled beyond 8, as in Fig. 7's
    8-24 jobs), each with a dataset drawn uniformly from the three, all queued at t = 0."""
    jobs = _paper_jobs(seed, _check_num_jobs(num_jobs))
    cluster = _paper_cluster_scaled(float(bandwidth_scale), float(capacity_scale))
    return Scenario("paper-default", cluster, jobs)


def _paper_jobs(seed: int, num_jobs: int) -> JobTable:
    """Paper IV-A's workload: Table III's models cycled, a dataset per job drawn from ``seed``."""
    picks = _paper_picks(*rng.generator_state(seed), num_jobs, len(catalog.PAPER_DATASETS))
    return JobTable(
        model=_cycled_models(num_jobs),
        dataset=picks,
        submit=constant(num_jobs, 0.0),
        epochs=constant(num_jobs, float(catalog.DEFAULT_EPOCHS)),
        name_format="job{i}-{model}",
    )


@cache
def geo_wan_cluster() -> Cluster:
    """Table II's regions (GPUs, $/kWh) with DT-FM's measured AWS inter-region throughput as
    B_uv (catalog.DTFM_LINKS, 0.33-1.14 Gbps) in place of Table II's sampled 30-90 Gbps; the
    regions' own bandwidth field is unused (0), the matrix is given."""
    regions = tuple(Region(r.name, r.gpus, r.price_per_kwh, 0.0) for r in catalog.PAPER_REGIONS)
    cities = [catalog.DTFM_CITY[r.name] for r in regions]
    bw = np.array([[0.0 if u == v else catalog.measured_gbps(u, v) for v in cities] for u in cities])
    return Cluster(regions, bw)


@lru_cache(maxsize=64)
def _geo_wan_scaled(bandwidth_scale: float, capacity_scale: float) -> Cluster:
    return geo_wan_cluster().scaled(bandwidth_scale, capacity_scale)


def geo_wan(
    seed: int = 0, bandwidth_scale: float = 1.0, capacity_scale: float = 1.0, num_jobs: int = 8
) -> Scenario:
    """paper-default with measured WAN links: the same regions, GPUs, jobs and draws, but
    B_uv is what DT-FM measured between the AWS regions of Table II's cities (sub-Gbps to
    1.14 Gbps), so Eq. (6) binds: b_j at K* is 0.5-1.4 Gbps (docs/geo_wan.md)."""
    jobs = _paper_jobs(seed, _check_num_jobs(num_jobs))
    return Scenario("geo-wan", _geo_wan_scaled(float(bandwidth_scale), float(capacity_scale)), jobs)


@lru_cache(maxsize=64)
def _cycled_models(num_jobs: int) -> np.ndarray:
    """Table III's models in order, cycled to ``num_jobs`` (read-only, shared by episodes)."""
    out = np.arange(num_jobs) % len(catalog.PAPER_MODELS)
    out.setflags(write=False)
    return out


# Fig. 1 (paper II-B), drawn with C top-left, D top-right, A bottom-left, B bottom-right.
# Read off the figure: C-D 300 Mbps (top edge), A-B 300 Mbps (bottom edge); the text names
# A-C 1000 Mbps and B-D 200 Mbps. GUESSED: the two diagonals carry the remaining labels,
# B-C 700 Mbps and A-D 400 Mbps (the figure does not tie them to edges unambiguously).
FIG1_REGIONS = (
    Region("A", 4, 0.230, 0.0),  # Fig. 1: 4 GPUs, $0.230/kWh
    Region("B", 3, 0.222, 0.0),  # Fig. 1: 3 GPUs, $0.222/kWh
    Region("C", 2, 0.191, 0.0),  # Fig. 1: 2 GPUs, $0.191/kWh
    Region("D", 2, 0.291, 0.0),  # Fig. 1: 2 GPUs, $0.291/kWh
)
FIG1_BANDWIDTH_MBPS = np.array(
    [  # to:  A      B      C      D
        [0.0, 300.0, 1000.0, 400.0],  # from A
        [300.0, 0.0, 700.0, 200.0],  # from B
        [1000.0, 700.0, 0.0, 300.0],  # from C
        [400.0, 200.0, 300.0, 0.0],  # from D
    ]
)


def paper_fig1(bandwidth_scale: float = 1.0, capacity_scale: float = 1.0) -> Scenario:
    """The motivating example: jobs P then Q (FCFS order), both on Alpaca-52k, at t = 0.

    Its start rule is "any": Fig. 1's 11 GPUs cannot hold Q at all (Llama-3.1-70B needs at
    least 27 A6000s for its weights, gradients and Adam state, geo_gym/memory.py) nor P on
    fewer than 6, so the example exists only under the paper's literal reading."""
    cluster = Cluster(FIG1_REGIONS, FIG1_BANDWIDTH_MBPS / 1000.0).scaled(
        bandwidth_scale, capacity_scale
    )
    alpaca = catalog.dataset_by_name("Alpaca-52k")
    jobs = (
        JobSpec("P", catalog.model_by_name("Qwen2.5-14B"), alpaca),
        JobSpec("Q", catalog.model_by_name("Llama-3.1-70B"), alpaca),
    )
    return Scenario("paper-fig1", cluster, jobs, start_rule="any")


def random_scenario(
    seed: int = 0,
    num_regions: int | None = None,
    num_jobs: int | None = None,
    mean_interarrival: float = 3600.0,
    bandwidth_scale: float = 1.0,
    capacity_scale: float = 1.0,
) -> Scenario:
    """A seeded random world for tests and training: 3-6 regions with 8-128 GPUs, prices
    $0.08-0.35/kWh (the paper's intro range), region bandwidth 1-100 Gbps (low values make
    Eq. (6) bind), and Table III jobs with random datasets arriving as a Poisson process.
    Jobs are drawn among the Table III models that fit in the largest region (their memory
    minimum on its GPU, geo_gym/memory.py): every job can then run, even under a
    single-region rule, in the world as drawn."""
    gen = np.random.default_rng(seed)
    k = int(gen.integers(3, 7)) if num_regions is None else _positive_int("num_regions", num_regions)
    n = int(gen.integers(6, 25)) if num_jobs is None else _check_num_jobs(num_jobs)
    mean_interarrival = _finite_non_negative("mean_interarrival", mean_interarrival)
    regions = tuple(
        Region(
            f"R{i}",
            int(gen.choice([8, 16, 32, 64, 128])),
            float(np.round(gen.uniform(0.08, 0.35), 3)),
            float(np.round(np.exp(gen.uniform(np.log(1.0), np.log(100.0))), 2)),
        )
        for i in range(k)
    )
    cluster = Cluster(regions).scaled(bandwidth_scale, capacity_scale)
    arrivals = np.cumsum(gen.exponential(mean_interarrival, size=n)) if mean_interarrival else np.zeros(n)
    arrivals[0] = 0.0
    fits = _models_fitting(cluster.gpu, int(cluster.capacities.max()))
    models = fits[gen.integers(0, len(fits), size=n)]
    datasets = gen.integers(0, len(catalog.PAPER_DATASETS), size=n)
    jobs = JobTable(models, datasets, arrivals, np.full(n, catalog.DEFAULT_EPOCHS))
    return Scenario("random", cluster, jobs)


@lru_cache(maxsize=256)
def _models_fitting(gpu, gpus: int) -> np.ndarray:
    """Indices of the Table III models whose memory minimum on ``gpu`` (default memory model)
    is at most ``gpus``; at least the smallest one, so that a draw is always possible."""
    mins = [
        _per_iteration(m, catalog.DEFAULT_SEQ_LEN, catalog.DEFAULT_MICRO_BATCH, gpu,
                       catalog.DEFAULT_STAGE_OVERHEAD_S, catalog.DEFAULT_INTRA_REGION_GBPS, DEFAULT_MEMORY)[6]
        for m in catalog.PAPER_MODELS
    ]
    fits = [i for i, need in enumerate(mins) if 0 < need <= gpus]
    if not fits:
        fits = [int(np.argmin([need if need > 0 else np.inf for need in mins]))]
    return np.array(fits, dtype=np.int64)


# Early-end end points are skewed to small fractions (many failures happen early): the same
# Beta as geo_gym/uncertainty/workload.py.
_END_POINT_BETA = (0.7, 2.0)


def recurring(
    seed: int = 0,
    num_jobs: int = 60,
    num_users: int = 6,
    templates_per_user: int = 3,
    mean_interarrival: float = 1800.0,
    early_end_rate: float = 0.45,
    population_seed: int = 0,
    bandwidth_scale: float = 1.0,
    capacity_scale: float = 1.0,
) -> Scenario:
    """A workload with the recurring structure of real clusters (SchedMate 2.2, Acme): each
    user owns a few templates (a Table III model, a dataset, an epoch count) and resubmits
    variants of them (epochs jittered by 10%). Each template has its own early-end probability
    (mean ``early_end_rate``) and typical end point, so fates recur too, which is what makes
    history-based prediction work. Fates are part of the world (``JobSpec.fate_fraction``);
    predictors never see them. The users and their templates come from ``population_seed``
    (the same cluster population in every episode), the job stream from ``seed``."""
    num_jobs = _check_num_jobs(num_jobs)
    if not 0 <= early_end_rate <= 1:
        raise ValueError(f"early_end_rate must be in [0, 1], got {early_end_rate!r}")
    num_users = _positive_int("num_users", num_users)
    templates_per_user = _positive_int("templates_per_user", templates_per_user)
    mean_interarrival = _finite_non_negative("mean_interarrival", mean_interarrival)
    cluster = _paper_cluster_scaled(float(bandwidth_scale), float(capacity_scale))
    t_model, t_data, t_epochs, t_p_early, t_end = _templates(
        population_seed, num_users * templates_per_user, float(early_end_rate)
    )
    arrivals, tmpl, fate, epochs = _recurring_jobs(
        *rng.generator_state(seed), num_jobs, mean_interarrival, t_p_early, t_end, t_epochs
    )
    jobs = JobTable(
        model=t_model[tmpl],
        dataset=t_data[tmpl],
        submit=arrivals,
        epochs=epochs,
        fate_fraction=fate,
        user=tmpl // templates_per_user,
        template=tmpl,
        name_format="job{i}-u{user}-t{template}",
    )
    return Scenario("recurring", cluster, jobs)


@lru_cache(maxsize=64)
def _templates(population_seed: int, n_t: int, early_end_rate: float) -> tuple[np.ndarray, ...]:
    """The recurring population's templates: model, dataset, epochs, early-end probability and
    typical end point, one row each (fixed by ``population_seed``, so drawn once)."""
    pop = np.random.default_rng(population_seed)
    t_model = pop.integers(0, len(catalog.PAPER_MODELS), size=n_t)
    # fine-tuning-sized runs: Alpaca mostly, some WikiText; OpenWebText runs take months here
    t_data = pop.choice([0, 0, 0, 1], size=n_t)
    t_epochs = pop.choice([0.5, 1.0, 2.0, 3.0], size=n_t)
    # A low Beta concentration makes templates bimodal: mostly-always or mostly-never ending
    # early, as recurring jobs of one user tend to be (same code, same bug, same habit).
    conc = 0.3
    t_p_early = pop.beta(max(early_end_rate, 1e-9) * conc, max(1 - early_end_rate, 1e-9) * conc, size=n_t)
    t_end = pop.beta(*_END_POINT_BETA, size=n_t)
    out = (t_model, t_data, t_epochs, t_p_early, t_end)
    for a in out:
        a.setflags(write=False)  # shared by every episode
    return out


@numba.njit(cache=True)
def _paper_picks(s, b, n, n_datasets):
    """Paper IV-A's dataset per job, uniform over the ``n_datasets``, from generator state
    (s, b) (``geo_gym.rng``): ``default_rng(seed).integers(0, n_datasets, size=n)``'s numbers,
    compiled so that ``geo_gym.compiled_reset`` draws a workload in the same call as its load."""
    out = np.empty(n, np.int64)
    for i in range(n):
        out[i] = rng.bounded(s, b, 0, n_datasets)
    return out


@numba.njit(cache=True)
def _recurring_jobs(s, b, n, mean_interarrival, t_p_early, t_end, t_epochs):
    """Each job's arrival (Poisson, the first at 0), template, fate (1.0: completes) and epochs,
    drawn from generator state (s, b) (``geo_gym.rng``: numpy's stream of
    ``default_rng(seed)``): first the n - 1 exponential gaps, then job by job its template,
    early-end coin, end-point jitter only when early and epoch jitter."""
    n_t = t_p_early.shape[0]
    arrivals = np.zeros(n)
    t = 0.0
    for i in range(1, n):  # np.cumsum of Generator.exponential(mean_interarrival, n - 1)
        t += mean_interarrival * rng.standard_exponential(s)
        arrivals[i] = t
    tmpl = np.empty(n, np.int64)
    # 1.0, not NaN: NaN means "no fate given", and loading would then draw one more
    # early-end coin (UncertaintyConfig.early_end_rate) on top of the template's.
    fate = np.ones(n)
    epochs = np.empty(n)
    for i in range(n):
        k = rng.bounded(s, b, 0, n_t)
        tmpl[i] = k
        if rng.next_double(s) < t_p_early[k]:
            fate[i] = min(max(t_end[k] * rng.lognormal(s, 0.0, 0.25), 0.01), 1.0)
        epochs[i] = t_epochs[k] * rng.uniform(s, 0.9, 1.1)
    return arrivals, tmpl, fate, epochs


SCENARIOS = {
    "paper-default": paper_default,
    "paper-fig1": paper_fig1,
    "geo-wan": geo_wan,
    "random": random_scenario,
    "recurring": recurring,
}


def scenario_names() -> list[str]:
    return sorted(SCENARIOS)


# Knobs every scenario takes: they replace the per-stage compute of t_comp (Table I), a
# property of the training setup rather than of a scenario's cluster or workload.
COMPUTE_KNOBS = ("mfu", "stage_overhead")


def scenario_knobs(name: str) -> list[str]:
    """The knobs a named scenario takes (``make_scenario(name, seed, **knobs)``), seed aside:
    its own and ``COMPUTE_KNOBS``."""
    if name not in SCENARIOS:
        raise ValueError(f"unknown scenario {name!r}; known scenarios: {scenario_names()}")
    return sorted(set(_parameters(SCENARIOS[name])) - {"seed"} | set(COMPUTE_KNOBS))


@cache
def _parameters(fn) -> dict:
    return dict(inspect.signature(fn).parameters)


def make_scenario(
    name: str | Scenario, seed: int = 0, start_rule: StartRule | str | None = None,
    memory_model: MemoryModel | None = None, **knobs,
) -> Scenario:
    """Build a named scenario; a ``Scenario`` passes through (its own knobs then forbidden,
    ``COMPUTE_KNOBS`` allowed), a list or tuple of Scenarios is a pool (e.g. trace
    windows) from which ``seed`` modulo its size picks one, and a function ``seed ->
    Scenario`` (e.g. ``scenario_mixture``) is called. ``start_rule`` / ``memory_model`` replace the scenario's own
    (None: keep them)."""
    return scenario_factory(name, start_rule, memory_model, **knobs)(seed)


def scenario_factory(
    name: str | Scenario, start_rule: StartRule | str | None = None,
    memory_model: MemoryModel | None = None, stage_overhead: float | None = None,
    mfu: float | None = None, **knobs,
) -> ScenarioFactory:
    """``seed -> make_scenario(name, seed, start_rule, memory_model, **knobs)``, with the name
    and knobs checked once: an env draws a workload per episode, and the checks cost as much as
    a small workload. ``stage_overhead`` and ``mfu`` (``COMPUTE_KNOBS``; None: the scenario's
    own) replace the scenario's per-stage overhead and its GPU's effective FLOP/s. Its
    ``num_jobs(seed)`` counts the jobs without drawing the workload where the knobs fix it."""
    make, count = _factory(name, **knobs)
    draw = cache(partial(_DRAWS[name], **knobs)) if isinstance(name, str) and name in _DRAWS else None
    physics = {}
    if start_rule is not None:
        physics["start_rule"] = StartRule.parse(start_rule)
    if memory_model is not None:
        if not isinstance(memory_model, MemoryModel):
            raise ValueError(f"memory_model must be a geo_gym.memory.MemoryModel, got {memory_model!r}")
        physics["memory_model"] = memory_model
    if stage_overhead is not None:
        if isinstance(stage_overhead, bool) or not isinstance(stage_overhead, int | np.integer | float) or not (
            np.isfinite(stage_overhead) and stage_overhead > 0
        ):
            raise ValueError(f"stage_overhead must be a finite number > 0, got {stage_overhead!r}")
        physics["stage_overhead"] = float(stage_overhead)
    if mfu is not None:
        catalog.A6000.at_mfu(mfu)  # checks the value once, whatever the scenario's GPU
    if not physics and mfu is None:
        return ScenarioFactory(make, count, draw)
    last = [None, None]  # the last cluster seen and its MFU-adjusted copy (one per scenario, mostly)

    def with_physics(seed: int) -> Scenario:
        scen = make(seed)
        changes = {k: v for k, v in physics.items() if getattr(scen, k) != v}
        if mfu is not None:
            if scen.cluster is not last[0]:
                gpu = scen.cluster.gpu.at_mfu(mfu)
                last[:] = scen.cluster, scen.cluster if gpu is scen.cluster.gpu else replace(scen.cluster, gpu=gpu)
            if last[1] is not scen.cluster:
                changes["cluster"] = last[1]
        # most callers name the scenario's own rule: no copy of the scenario per episode then
        return replace(scen, **changes) if changes else scen

    return ScenarioFactory(with_physics, count, draw)  # physics moves no job: the same jobs


# WorkloadDraw.kind
DRAW_PAPER = 0  # paper-default, geo-wan: Table III's models cycled, datasets drawn (_paper_picks)
DRAW_RECURRING = 1  # recurring: templates, Poisson arrivals, recurring fates (_recurring_jobs)


class WorkloadDraw(NamedTuple):
    """A built-in scenario's workload as compiled code draws it from a seed, with the very
    numbers of the scenario function (``geo_gym.compiled_reset``): which draw, the job count
    and the scenario's constants. The cluster and physics are the same for every seed."""

    kind: int
    num_jobs: int
    mean_interarrival: float  # recurring: seconds between arrivals
    models: np.ndarray  # paper: each job's model; recurring: each template's
    datasets: np.ndarray  # recurring: each template's dataset (paper: empty)
    epochs: np.ndarray  # paper: each job's; recurring: each template's
    p_early: np.ndarray  # recurring: each template's early-end probability (paper: empty)
    end: np.ndarray  # recurring: each template's typical end point (paper: empty)


def _paper_draw(num_jobs: int = 8, **_) -> WorkloadDraw:
    n = _check_num_jobs(num_jobs)
    empty_i, empty_f = np.zeros(0, np.int64), np.zeros(0)
    return WorkloadDraw(DRAW_PAPER, n, 0.0, _cycled_models(n), empty_i,
                        constant(n, float(catalog.DEFAULT_EPOCHS)), empty_f, empty_f)


def _recurring_draw(num_jobs: int = 60, num_users: int = 6, templates_per_user: int = 3,
                    mean_interarrival: float = 1800.0, early_end_rate: float = 0.45,
                    population_seed: int = 0, **_) -> WorkloadDraw:
    probe = recurring(0, num_jobs, num_users, templates_per_user, mean_interarrival, early_end_rate,
                      population_seed)  # the scenario's own checks of every knob
    t_model, t_data, t_epochs, t_p_early, t_end = _templates(
        population_seed, num_users * templates_per_user, float(early_end_rate)
    )
    return WorkloadDraw(DRAW_RECURRING, len(probe.jobs), float(mean_interarrival), t_model, t_data, t_epochs,
                        t_p_early, t_end)


# The scenarios whose workload compiled code draws (the other knobs: the cluster's, the same
# for every seed)
_DRAWS = {"paper-default": _paper_draw, "geo-wan": _paper_draw, "recurring": _recurring_draw}


@dataclass(frozen=True)
class ScenarioFactory:
    """``seed -> Scenario`` (``scenario_factory``), and ``num_jobs(seed)``: how many jobs that
    scenario has. Loading draws warm-up workloads only for their fates' draws when no
    retrieval predictor reads their jobs (``loading.start_episode``), and then needs only
    their count: known from the knobs for the built-in scenarios with a ``num_jobs`` (and for
    a ready-made Scenario, a pool, a mixture of those), drawn otherwise."""

    make: Callable[[int], Scenario]
    # seed -> the job count, without drawing the workload; None: only the workload knows it
    count: Callable[[int], int] | None = None
    # () -> the WorkloadDraw of a built-in scenario whose workload is drawn in compiled code
    # (geo_gym.compiled_reset); None: the others
    draw: Callable[[], WorkloadDraw] | None = None

    def __call__(self, seed: int) -> Scenario:
        return self.make(seed)

    def num_jobs(self, seed: int) -> int:
        return self.count(seed) if self.count is not None else len(self.make(seed).jobs)


def _factory(name, **knobs) -> tuple[Callable[[int], Scenario], Callable[[int], int] | None]:
    """(seed -> Scenario, seed -> its job count or None: ``ScenarioFactory``'s fields)."""
    if isinstance(name, Scenario):
        if knobs:
            raise ValueError(f"knobs {sorted(knobs)} given with a ready-made Scenario")
        return (lambda seed: name), (lambda seed: len(name.jobs))
    if isinstance(name, list | tuple):
        return _pool(tuple(name), knobs)
    if isinstance(name, ScenarioFactory):  # e.g. scenario_mixture's
        if knobs:
            raise ValueError(f"knobs {sorted(knobs)} given with a workload function")
        return partial(_call, name.make), name.count
    if callable(name):
        if knobs:
            raise ValueError(f"knobs {sorted(knobs)} given with a workload function")
        return partial(_call, name), None
    if name not in SCENARIOS:
        raise ValueError(f"unknown scenario {name!r}; known scenarios: {scenario_names()}")
    fn = SCENARIOS[name]
    params = _parameters(fn)
    bad = sorted(set(knobs) - set(params) | {"seed"} & set(knobs))
    if bad:
        raise ValueError(f"scenario {name!r} has no knob(s) {bad}; its knobs: {scenario_knobs(name)}")
    # a num_jobs knob that is given (not drawn: random's default None) is the job count
    given = knobs.get("num_jobs", params["num_jobs"].default) if "num_jobs" in params else None
    count = None if given is None else partial(_fixed_count, given)
    if "seed" in params:
        return partial(fn, **knobs), count
    return (lambda seed: fn(**knobs)), (lambda seed: len(fn(**knobs).jobs))


def _fixed_count(num_jobs, seed: int) -> int:
    return _check_num_jobs(num_jobs)  # the scenario's own check: a bad knob fails as building it would


def _pool(scenarios: tuple, knobs: dict) -> tuple[Callable[[int], Scenario], Callable[[int], int]]:
    """A workload per seed from a fixed pool (e.g. a trace's training windows): the seed modulo
    the pool's size picks it, so an env's seeded draws pick them uniformly."""
    if knobs:
        raise ValueError(f"knobs {sorted(knobs)} given with a pool of ready-made Scenarios")
    if not scenarios:
        raise ValueError("an empty pool of scenarios")
    for i, scen in enumerate(scenarios):
        if not isinstance(scen, Scenario):
            raise ValueError(f"scenario pool entry {i}: not a Scenario, got {type(scen).__name__}")
        if scen.cluster.num_regions != scenarios[0].cluster.num_regions:
            raise ValueError(f"scenario pool entry {i} has {scen.cluster.num_regions} regions, entry 0 "
                             f"{scenarios[0].cluster.num_regions}: an env's observation has one size")
    return (lambda seed: scenarios[seed % len(scenarios)]), (lambda seed: len(scenarios[seed % len(scenarios)].jobs))


def _call(fn: Callable[[int], Scenario], seed: int) -> Scenario:
    scen = fn(seed)
    if not isinstance(scen, Scenario):
        raise ValueError(f"workload function {getattr(fn, '__name__', fn)!r} returned {type(scen).__name__}, "
                         "not a Scenario")
    return scen


def scenario_mixture(name: str, grid: dict[str, Sequence], **knobs) -> ScenarioFactory:
    """``seed -> Scenario`` drawing from every combination of ``grid``'s knob values (a
    distribution of workloads: user populations, loads, capacities): the seed modulo the
    number of combinations picks the combination, the rest of it the workload, so an env's
    seeded draws give each combination with equal probability. ``knobs`` hold for all."""
    import itertools

    if not isinstance(grid, dict) or not grid:
        raise ValueError(f"a scenario grid is a non-empty dict of knob -> list of values, got {grid!r}")
    for knob, values in grid.items():
        if not isinstance(values, list | tuple) or not values:
            raise ValueError(f"scenario grid {knob!r}: a non-empty list of values, got {values!r}")
        if knob in knobs:
            raise ValueError(f"scenario grid {knob!r} is also a fixed knob ({knobs[knob]!r})")
    combos = [dict(zip(grid, values, strict=True)) for values in itertools.product(*grid.values())]
    makers = tuple(scenario_factory(name, **knobs, **combo) for combo in combos)  # checks every knob now
    counts = None if any(m.count is None for m in makers) else partial(_mixed_count, makers)
    return ScenarioFactory(partial(_mixed, makers), counts)


def _mixed(makers: tuple, seed: int) -> Scenario:
    return makers[seed % len(makers)](seed // len(makers))


def _mixed_count(makers: tuple, seed: int) -> int:
    return makers[seed % len(makers)].count(seed // len(makers))
