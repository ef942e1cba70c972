"""Drawing an episode and writing it into the simulator core.

``start_episode`` draws everything an episode needs from one seeded generator (the workload,
a warm-up history for the retrieval predictor, fates, prediction noise, failures) and ``load``
writes it into slot e of a ``sim.Core``. The env, the vector env and ``geo_gym.simulate`` all
start episodes here, so the same seed gives the same episode everywhere.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import lru_cache
from typing import NamedTuple

import numba
import numpy as np

from geo_gym import sim
from geo_gym.scenarios import Scenario
from geo_gym.sim import FALLBACK_STORE_MEAN, FALLBACK_USER, PRED_RETRIEVAL, PRED_STATIC, Core
from geo_gym.state import SECONDS_PER_HOUR
from geo_gym.uncertainty import UncertaintyConfig, draws
from geo_gym.uncertainty.metadata import JobMetadata
from geo_gym.uncertainty.predictors import RetrievalPredictor, store_extend
from geo_gym.uncertainty.workload import FATE_FRACTION_BETA
from geo_gym.workload import (
    MAX_SUBMIT_S,
    JobSpec,
    JobTable,
    SpecTable,
    profile,
    profile_columns,
    spec_columns,
)


def draw_workload_seed(rng: np.random.Generator) -> int:
    """The seed of the next episode's workload; the env and ``geo_gym.simulate`` share it."""
    return int(rng.integers(0, 2**31 - 1))


class _History(NamedTuple):
    """A warm-up workload for the retrieval store: its jobs, in order, with the iterations
    each ran (its fate) and those it was configured to run."""

    jobs: Sequence[JobSpec]  # a tuple or a JobTable
    executed: np.ndarray
    configured: np.ndarray


def start_episode(
    core, e, make, rng, unc: UncertaintyConfig, warmup_workloads: int = 0,
    warmup_scenario: Scenario | None = None, num_jobs=None,
):
    """Draw one episode from ``rng`` (workload, warm-up history, fates, noise, failures) and
    load it into slot e; returns (core, jobs, scenario, scale). Shared by the env, the vector
    env and ``geo_gym.simulate`` so that the same seed gives the same episode everywhere.

    The retrieval history is pre-filled by ``warmup_workloads`` further draws of the scenario,
    or, with ``warmup_scenario`` (e.g. the trace window before this one), by that workload's
    jobs once; either way with fates drawn from ``rng``. Only the retrieval store reads that
    history: under any other predictor a warm-up workload is not drawn, only its seed and its
    fates' numbers (the episode's stream stays the same), for which ``num_jobs(seed)`` counts
    its jobs (``scenarios.ScenarioFactory.num_jobs``; None: drawing ``make(seed)``)."""
    if warmup_scenario is not None and warmup_workloads:
        raise ValueError("give warmup_workloads or warmup_scenario, not both")
    scen = make(draw_workload_seed(rng))
    history = []
    derived = _derived(unc)
    for _ in range(1 if warmup_scenario is not None else warmup_workloads):
        seed = draw_workload_seed(rng)  # drawn either way: the episode's numbers stay put
        past = warmup_scenario
        if past is None and (derived.retrieval or num_jobs is None):
            past = make(seed)
        # drawn either way, as above; where nothing reads the workload, its count sizes them
        u, frac = _fate_draws(rng, len(past.jobs) if past is not None else num_jobs(seed))
        if derived.retrieval:  # the retrieval store is the only reader of the warm-up history
            spec = spec_columns(past.jobs)
            cl = past.cluster
            full = profile_columns(
                past.jobs, cl.gpu, past.stage_overhead, cl.intra_region_gbps, past.memory_model, past.start_rule
            )["iterations"]
            ran = _apply_fates(u, frac, spec["fate_fraction"], spec["whole"], full, unc.early_end_rate)
            history.append(_History(past.jobs, ran, full))
    k = scen.cluster.num_regions
    if core.cap.shape[1] != k and core.cap.shape[0] == 1:
        # A one-simulation core (geo_gym.simulate) follows the workload's region count,
        # which the ``random`` scenario draws per seed; load() overwrites all state anyway.
        # Env cores keep theirs: their observation layout depends on it (load() raises).
        core = sim.allocate(1, k, 1, attempts=0)
    core = sim.ensure(core, len(scen.jobs), **_sizes(scen, unc, derived))
    jobs, scale = _load(core, e, scen, rng, unc, derived, history)
    return core, jobs, scen, scale


# The metadata keys job_metadata reads (a SpecTable's memo keys: its other keys, e.g. a trace
# job's id, do not change the vector).
METADATA_KEYS = ("family", "dataset", "task", "user", "gpus", "name")


def job_metadata(job) -> JobMetadata:
    """What a SchedMate-style Metadata Extractor would read off a job (uncertainty/metadata)."""
    md = job.metadata
    return JobMetadata(
        family=md.get("family", job.model.family or job.model.name),
        size_b=job.model.params / 1e9,
        dataset=md.get("dataset", job.dataset.name),
        task=md.get("task", "pretrain" if job.dataset.samples > 1_000_000 else "sft"),
        user=md.get("user", ""),
        gpus=int(md.get("gpus", 1)),
        name=md.get("name", job.model.name),
    )


class _Derived(NamedTuple):
    """What loading needs of an uncertainty configuration, worked out once per configuration
    (an env loads thousands of episodes with one)."""

    predictor: object  # its stateless ``predict``; the retrieval history lives in the core
    retrieval: bool  # a RetrievalPredictor: predictions are made in the core
    random: bool  # some source reads ``draws.draw_episode``'s numbers (planted failures aside)
    settings: sim.Settings  # the core's settings fields
    sizes: dict  # required_sizes' part that does not depend on the workload (see _sizes)
    vectors: dict  # retrieval: memoised metadata vectors, see _metadata_vectors


@lru_cache(maxsize=64)
def _derived(unc: UncertaintyConfig) -> _Derived:
    """``_Derived`` of ``unc``, built once per configuration (an LRU cache)."""
    pred = unc.make_predictor()
    retrieval = isinstance(pred, RetrievalPredictor)
    # The per-attempt columns (failure_draws, repair_h, handler_u: attempts per job, and the
    # core's J x attempts repair slots) are read only when an attempt can fail (random
    # failures) or be judged (the failure handler); otherwise none (a core allocated with
    # attempts=0, as geo_gym.simulate's, then holds none) instead of max_attempts (768 B per
    # job at 16). A workload with planted failures needs them all (_sizes).
    sizes = {"attempts": unc.max_attempts if unc.failure_rate_per_gpu_hour > 0 or unc.handler else 0}
    if retrieval:
        sizes.update(store=pred.store.vals.shape[0], dim=pred.vectorizer.dim)
    return _Derived(
        pred,
        retrieval,
        draws.reads_draws(unc),
        sim.Settings(
            float(unc.failure_rate_per_gpu_hour), float(unc.checkpoint_interval_hours), int(unc.gpus_per_failure),
            bool(unc.handler), *(float(x) for x in unc.handler_operating_point()), float(unc.diagnosis_delay_hours),
            float(unc.manual_delay_hours), float(unc.application_failure_share),
            PRED_RETRIEVAL if retrieval else PRED_STATIC,
        ),
        sizes,
        {},
    )


def required_sizes(scenario: Scenario, unc: UncertaintyConfig) -> dict:
    """The core sizes ``load`` needs for this scenario and uncertainty configuration."""
    return {"max_jobs": len(scenario.jobs), **_sizes(scenario, unc, _derived(unc))}


def _sizes(scenario: Scenario, unc: UncertaintyConfig, derived: _Derived) -> dict:
    """``derived.sizes``, with all of ``max_attempts`` when the workload plants failures
    (trace jobs with ``failure_gpu_hours``: the core then fails their attempts)."""
    if derived.sizes["attempts"] < unc.max_attempts and _plants_failures(scenario.jobs):
        return {**derived.sizes, "attempts": unc.max_attempts}
    return derived.sizes


def _plants_failures(jobs) -> bool:
    """Some job has trace-driven failures (``JobSpec.failure_gpu_hours`` not None)."""
    if isinstance(jobs, JobTable):
        return False  # catalog jobs plant none
    if isinstance(jobs, SpecTable):
        return bool(jobs.failure_gpu_hours)
    return any(job.failure_gpu_hours is not None for job in jobs)


def load(
    core: Core,
    e: int,
    scenario: Scenario,
    rng: np.random.Generator | None = None,
    uncertainty: UncertaintyConfig | None = None,
    history: list | None = None,
) -> list:
    """Write ``scenario`` into slot ``e`` of ``core`` and reset it; returns the jobs in core
    index order (sorted by submit time, stable). ``rng`` draws the episode's random numbers
    (fates, noise, failures); ``history`` is a list of (JobSpec, executed iterations) that
    pre-fill the retrieval store (a warm-up workload). ``core`` must be large enough
    (``ensure(core, **required_sizes(...))``)."""
    unc = uncertainty or UncertaintyConfig()
    rng = rng if rng is not None else np.random.default_rng(0)
    if history:
        specs = tuple(spec for spec, _ in history)
        executed = np.array([float(value) for _, value in history])
        history = [_History(specs, executed, np.array([profile(spec).iterations for spec in specs]))]
    return _load(core, e, scenario, rng, unc, _derived(unc), history)[0]


def _load(core, e, scenario, rng, unc, derived, history) -> tuple[list, float]:
    """``load``, returning (the jobs, the episode's reward scale: the hours of its configured
    work, each job on its k_target GPUs in one region)."""
    cl = scenario.cluster
    k = cl.num_regions
    if core.cap.shape[1] != k:
        raise ValueError(f"core has {core.cap.shape[1]} regions, scenario {k}")
    # A JobTable or SpecTable is in submit order already (it checks); sorting would build its JobSpecs.
    columns = isinstance(scenario.jobs, JobTable | SpecTable)
    jobs = scenario.jobs if columns else sorted(scenario.jobs, key=lambda j: j.submit)
    n = len(jobs)
    sizes = sim._sizes(core)
    if n > sizes["J"]:
        raise ValueError(f"scenario has {n} jobs, more than max_jobs={sizes['J']}")
    prof = profile_columns(
        jobs, cl.gpu, scenario.stage_overhead, cl.intra_region_gbps, scenario.memory_model, scenario.start_rule
    )
    spec = spec_columns(jobs)
    min_gpus = prof["min_gpus"]  # start rule, memory and the job's own minimum
    if n and min_gpus.max() > cl.total_gpus:
        bad = int(min_gpus.argmax())
        raise ValueError(
            f"job {jobs[bad].name!r}: needs at least {min_gpus[bad]} GPUs (start rule "
            f"{scenario.start_rule}), more than the cluster's {cl.total_gpus}"
        )
    _check_time_resolution(jobs, spec["submit"], prof["iterations"] * prof["tk"])
    planted = spec["planted"]
    any_planted = bool(planted.any())
    if derived.random or any_planted:  # (at least one attempt drawn: the same numbers for any count)
        pred_z, drawn = draws.draw_episode(rng, unc, n, max(sizes["A"], 1))
    else:
        pred_z, drawn = _zeros(n), draws.neutral_columns(unc, n, sizes["A"])
    full = prof["iterations"]
    iters = _apply_fates(*_fate_draws(rng, n), spec["fate_fraction"], spec["whole"], full, unc.early_end_rate)
    pred_iters = _load_uncertainty(core, e, jobs, derived, pred_z, history, iters, full)
    settings = derived.settings
    if any_planted:
        failure_draws, rate = _plant_failures(jobs, planted, drawn.failure_draws, settings.failure_rate_per_gpu_h)
        drawn, settings = drawn._replace(failure_draws=failure_draws), settings._replace(failure_rate_per_gpu_h=rate)
    sim.load_episode(
        core, e,
        sim.ClusterColumns(cl.capacities, cl.prices, cl.bandwidth, float(cl.intra_region_gbps), float(cl.gpu.power_kw),
                           float(scenario.stage_overhead)),
        settings,
        sim.JobColumns(
            submit_s=spec["submit"], work_s=prof["work"], microbatches=prof["mb"], full_iters=full,
            iters=iters, end_kind=spec["end_kind"], activation_gbit=prof["act"], k_target=prof["k_target"],
            b_target_gbps=prof["b_ref"], t_iter_1gpu_s=prof["t1"], t_iter_target_s=prof["tk"],
            min_gpus=min_gpus, pred_iters=pred_iters,
        ),
        drawn,
    )
    return jobs, float((full * prof["tk"]).sum() / SECONDS_PER_HOUR)


def _check_time_resolution(jobs, submit: np.ndarray, ideal_s: np.ndarray) -> None:
    """ValueError naming the first job whose times float64 seconds cannot hold: a submit time
    beyond ``workload.MAX_SUBMIT_S`` (JobSpec and JobTable refuse it already; a job built
    otherwise is caught here), or one so large that adding the job's ideal run (I_j on
    k_target GPUs in one region) leaves it unchanged, which would give a JCT of 0. Jobs with
    no run at all (ideal 0) are not refused."""
    if not submit.shape[0]:
        return
    # submits are sorted, so the last has the coarsest resolution; when it still resolves the
    # shortest run, every job does (one reduction per load instead of four array passes)
    last, shortest = float(submit[-1]), float(ideal_s.min())
    if last <= MAX_SUBMIT_S and shortest > 0 and last + shortest != last:
        return
    lost = ~(submit <= MAX_SUBMIT_S) | ((ideal_s > 0) & (submit + ideal_s == submit))
    if lost.any():
        i = int(np.argmax(lost))
        job = jobs.spec(i) if isinstance(jobs, JobTable | SpecTable) else jobs[i]
        raise ValueError(
            f"job {job.name!r}: submit time {float(submit[i])!r} s is too large for float64 "
            f"seconds to resolve its ideal run of {float(ideal_s[i]):.6g} s (submit + run == "
            f"submit); submit times must be <= {MAX_SUBMIT_S:g} s (workload.MAX_SUBMIT_S)"
        )


def _zeros(n: int) -> np.ndarray:
    """The noisy predictor's normals when nothing reads them (read-only; built once per size
    up to ``draws.CACHED_JOBS`` jobs, where envs load episode after episode, and afresh above,
    so that a long trace's column is not kept after its run)."""
    return _zeros_cached(n) if n <= draws.CACHED_JOBS else _zeros_fresh(n)


@lru_cache(maxsize=256)
def _zeros_cached(n: int) -> np.ndarray:
    return _zeros_fresh(n)


def _zeros_fresh(n: int) -> np.ndarray:
    z = np.zeros(n)
    z.setflags(write=False)
    return z


def _fate_draws(rng: np.random.Generator, n: int) -> tuple[np.ndarray, np.ndarray]:
    """The numbers behind n jobs' fates: a uniform (early end or not) and a Beta(0.7, 2) end
    point (early ends are skewed to small fractions, uncertainty/workload.py) for every job,
    whatever its fate, so the stream stays put."""
    return rng.random(n), rng.beta(*FATE_FRACTION_BETA, size=n)


@numba.njit(cache=True)
def _apply_fates(u, frac, given, whole, full, early_end_rate):
    """Iterations each job runs: its configured ones ``full`` times its fate, the share of its
    work it runs. The fate is the job's own ``fate_fraction`` (``given``, NaN where none:
    trace jobs, recurring scenarios) or, with probability ``early_end_rate`` (``u``), its end
    point ``frac``. Catalog jobs (``whole``) run whole iterations, at least one; a job with an
    explicit (calibrated, possibly fractional) iteration count runs exactly its share.
    Compiled: a dozen numpy calls cost more than an episode's scheduling."""
    out = np.empty(given.shape[0])
    for i in range(given.shape[0]):
        fate = min(max(frac[i], 0.01), 1.0) if u[i] < early_end_rate else 1.0
        if not np.isnan(given[i]):
            fate = given[i]
        ran = full[i] * fate
        out[i] = max(1.0, np.round(ran)) if whole[i] else ran
    return out


def _load_uncertainty(core, e, jobs, derived: _Derived, pred_z, history, iters, full) -> np.ndarray:
    """Write env e's retrieval predictor and its store, pre-filled by ``history`` (the core's
    other settings are written with the jobs); returns the static predictions (zeros under
    retrieval, which predicts in the core when a job is submitted). ``iters``: what each job
    runs; ``full``: configured."""
    n = len(jobs)
    pred = derived.predictor
    pred_iters = np.zeros(n)
    if derived.retrieval:
        core.n_store[e] = 0
        core.retrieval_k[e] = pred.k
        core.retrieval_threshold[e] = pred.threshold
        core.retrieval_records_actual[e] = pred.record == "actual"
        core.retrieval_fallback[e] = FALLBACK_USER if pred.fallback == "user-estimate" else FALLBACK_STORE_MEAN
        d = pred.vectorizer.dim
        if n:
            core.metadata_vec[e, :n, :d] = _metadata_vectors(jobs, derived)
            core.metadata_vec[e, :n, d:] = 0.0  # a core sized for a wider vectoriser
        for past in history or []:
            values = past.executed if pred.record == "actual" else past.configured
            core.n_store[e] = store_extend(
                core.store_vecs[e], core.store_norms[e], core.store_vals[e], core.n_store[e],
                _metadata_vectors(past.jobs, derived), values,
            )
    else:
        values = pred.predict([None] * n, user_estimate=full, actual=iters, z=pred_z)
        pred_iters = np.maximum(np.asarray(values, dtype=float), sim.MIN_PRED_ITERS)
    return pred_iters


_VECTOR_MEMO_SIZE = 1 << 16  # metadata vectors kept per configuration (256 B each)


def _metadata_vectors(jobs, derived: _Derived) -> np.ndarray:
    """The jobs' metadata vectors, (n, dim), memoised per configuration: the vectoriser hashes
    tokens in Python (about 40 us a job), and workloads repeat their metadata (recurring
    templates, the catalog's models and datasets). Each row depends only on its own record,
    so a memoised row equals a freshly computed one. A JobTable's rows are keyed by what
    their metadata is made of (model, dataset, user, template), a SpecTable's by its model,
    dataset and metadata columns, without building JobSpecs."""
    memo = derived.vectors
    table = isinstance(jobs, JobTable | SpecTable)
    if isinstance(jobs, JobTable):
        cols = (jobs.model, jobs.dataset, jobs.user, jobs.template)
        keys = list(zip(*(c.tolist() for c in cols), strict=True))
    elif table:
        read = [k for k in METADATA_KEYS if k in jobs.metadata]  # what job_metadata reads
        cols = [jobs.model.tolist(), *(_as_list(jobs.metadata[k]) for k in read)]
        label = ("spec", jobs.dataset, *read)  # never equal to a JobTable's key
        keys = [(label, *row) for row in zip(*cols, strict=True)]
    else:
        keys = [job_metadata(j) for j in jobs]
    missing = {}  # key -> first job with it
    for i, key in enumerate(keys):
        if key not in memo and key not in missing:
            missing[key] = i
    fresh = {}
    if missing:
        records = [job_metadata(jobs.spec(i)) if table else key for key, i in missing.items()]
        fresh = dict(zip(missing, derived.predictor.vectorizer.transform(records), strict=True))
        if len(memo) + len(fresh) > _VECTOR_MEMO_SIZE:
            memo.clear()  # bounded: a stream of ever new metadata does not pile up
        if len(fresh) <= _VECTOR_MEMO_SIZE:
            memo.update(fresh)
    rows = [fresh[key] if key in fresh else memo[key] for key in keys]
    return np.array(rows, dtype=np.float32).reshape(len(keys), -1)


def _as_list(column) -> list:
    """A column (numpy array, pandas array, list) as a list of Python values."""
    return column.tolist() if hasattr(column, "tolist") else list(column)


# --------------------------------------------------------------- trace-driven failures (traces/)
def _plant_failures(jobs, planted: np.ndarray, fail_e: np.ndarray, rate: float) -> tuple[np.ndarray, float]:
    """(``fail_e`` (the drawn unit exponentials, (n, attempts)) with ``JobSpec.failure_gpu_hours``
    (trace-driven infrastructure failures) written over them, the failure rate to load). The
    core fails attempt a of job j after ``fail_e[j, a] / (rate x g)`` hours on g GPUs
    (``sim.place``), so a failure X GPU-hours into an attempt is ``fail_e = X x rate``; the
    job's later attempts never fail. When the random process is off (rate 0) a nominal rate
    of 1 switches the core's failure check on, and every other job gets no failure."""
    fail_e = fail_e.copy()
    a = fail_e.shape[1]
    if rate <= 0.0:
        rate = 1.0
        fail_e[:] = np.inf
    for i in np.flatnonzero(planted):
        job = jobs[i]
        hours = job.failure_gpu_hours
        if len(hours) > a:
            raise ValueError(
                f"job {job.name!r}: {len(hours)} planted failures exceed the core's {a} attempts "
                f"(raise UncertaintyConfig.max_attempts, or map with fewer max_failures)"
            )
        fail_e[i] = np.inf
        fail_e[i, : len(hours)] = np.asarray(hours, dtype=np.float64) * rate
    return fail_e, rate
