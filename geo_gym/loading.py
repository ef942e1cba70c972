"""Drawing an episode and writing it into the simulator core.

``start_episode`` draws everything an episode needs from one seeded generator (the workload,
a warm-up history for the retrieval predictor, fates, prediction noise, failures) and ``load``
writes it into slot e of a ``sim.Core``. The env, the vector env and ``geo_gym.simulate`` all
start episodes here, so the same seed gives the same episode everywhere.
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np

from geo_gym import sim
from geo_gym.scenarios import Scenario
from geo_gym.sim import FALLBACK_STORE_MEAN, FALLBACK_USER, PRED_RETRIEVAL, PRED_STATIC, Core
from geo_gym.uncertainty import UncertaintyConfig, draw_episode
from geo_gym.uncertainty.draws import neutral_draws
from geo_gym.uncertainty.failures import repair_hours
from geo_gym.uncertainty.metadata import JobMetadata
from geo_gym.uncertainty.predictors import RetrievalPredictor, store_append
from geo_gym.uncertainty.workload import FATE_FRACTION_BETA
from geo_gym.workload import profile


def draw_workload_seed(rng: np.random.Generator) -> int:
    """The seed of the next episode's workload; the env and ``geo_gym.simulate`` share it."""
    return int(rng.integers(0, 2**31 - 1))


def start_episode(
    core, e, make, rng, unc: UncertaintyConfig, warmup_workloads: int = 0,
    warmup_scenario: Scenario | None = None,
):
    """Draw one episode from ``rng`` (workload, warm-up history, fates, noise, failures) and
    load it into slot e; returns (core, jobs, scenario, scale). Shared by the env, the vector
    env and ``geo_gym.simulate`` so that the same seed gives the same episode everywhere.

    The retrieval history is pre-filled by ``warmup_workloads`` further draws of the scenario,
    or, with ``warmup_scenario`` (e.g. the trace window before this one), by that workload's
    jobs once; either way with fates drawn from ``rng``."""
    if warmup_scenario is not None and warmup_workloads:
        raise ValueError("give warmup_workloads or warmup_scenario, not both")
    scen = make(draw_workload_seed(rng))
    history = []
    for _ in range(1 if warmup_scenario is not None else warmup_workloads):
        seed = draw_workload_seed(rng)  # drawn either way: the episode's numbers stay put
        past = make(seed) if warmup_scenario is None else warmup_scenario
        fates = _fates(past.jobs, unc, rng)
        for job, f in zip(past.jobs, fates, strict=True):
            iters = profile(job, past.cluster.gpu, past.stage_overhead, past.cluster.intra_region_gbps).iterations
            ran = iters * f
            history.append((job, max(1.0, round(ran)) if job.iterations is None else ran))
    k = scen.cluster.num_regions
    if core.cap.shape[1] != k and core.cap.shape[0] == 1:
        # A one-simulation core (geo_gym.simulate) follows the workload's region count,
        # which the ``random`` scenario draws per seed; load() overwrites all state anyway.
        # Env cores keep theirs: their observation layout depends on it (load() raises).
        core = sim.allocate(1, k, 1)
    core = sim.ensure(core, **required_sizes(scen, unc))
    jobs = load(core, e, scen, rng, unc, history)
    n = len(jobs)
    scale = float((core.full_iters[e, :n] * core.tk[e, :n]).sum() / 3600.0)
    return core, jobs, scen, scale


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


@lru_cache(maxsize=64)
def _predictor(unc: UncertaintyConfig):
    """The configuration's predictor, built once: loading reads its settings and uses its
    stateless ``predict``; the retrieval history lives in the core, not in this object."""
    return unc.make_predictor()


def _uses_draws(unc: UncertaintyConfig, jobs) -> bool:
    """Whether any random component of the episode reads ``draw_episode``'s numbers. When
    none does (the perfect world), loading skips spawning their generators; the results are
    the same, and the workload stream, drawn from the parent generator, is untouched."""
    return (
        getattr(_predictor(unc), "uses_noise", False)
        or unc.failure_rate_per_gpu_hour > 0
        or 0.0 < unc.tracker_detect_prob < 1.0
        or unc.tracker_sigma() > 0
        or any(job.failure_gpu_hours is not None for job in jobs)
    )


def required_sizes(scenario: Scenario, unc: UncertaintyConfig) -> dict:
    """The core sizes ``load`` needs for this scenario and uncertainty configuration."""
    sizes = {"max_jobs": len(scenario.jobs), "attempts": unc.max_attempts}
    pred = _predictor(unc)
    if isinstance(pred, RetrievalPredictor):
        sizes.update(store=pred.store.vecs.shape[0], dim=pred.vectorizer.dim)
    return sizes


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
    cl = scenario.cluster
    k = cl.num_regions
    if core.cap.shape[1] != k:
        raise ValueError(f"core has {core.cap.shape[1]} regions, scenario {k}")
    jobs = sorted(scenario.jobs, key=lambda j: j.submit)
    n = len(jobs)
    sizes = sim._sizes(core)
    if n > sizes["J"]:
        raise ValueError(f"scenario has {n} jobs, more than max_jobs={sizes['J']}")
    core.cap[e] = cl.capacities
    core.price[e] = cl.prices
    core.bw[e] = cl.bandwidth
    core.intra[e] = cl.intra_region_gbps
    core.gpu_kw[e] = cl.gpu.power_kw
    core.overhead[e] = scenario.stage_overhead
    core.n_jobs[e] = n
    profiles = [profile(j, cl.gpu, scenario.stage_overhead, cl.intra_region_gbps) for j in jobs]
    min_gpus = np.array([j.min_gpus for j in jobs], dtype=np.int64)
    if n and min_gpus.max() > cl.capacities.sum():
        bad = jobs[int(min_gpus.argmax())]
        raise ValueError(
            f"job {bad.name!r}: min_gpus={bad.min_gpus} exceeds the cluster's "
            f"{int(cl.capacities.sum())} GPUs"
        )
    draws = draw_episode(rng, n, sizes["A"]) if _uses_draws(unc, jobs) else neutral_draws(n, sizes["A"])
    fate = _fates(jobs, unc, rng)
    full = np.array([p.iterations for p in profiles])
    # Catalog jobs run whole iterations; a job with an explicit (calibrated, possibly
    # fractional) iteration count runs exactly its fate's share of it.
    whole = np.array([j.iterations is None for j in jobs], dtype=bool)
    ran = full * fate
    columns = {
        "submit": [j.submit for j in jobs],
        "work": [p.work for p in profiles],
        "mb": [p.num_microbatches for p in profiles],
        "full_iters": full,
        "iters": np.where(whole, np.maximum(1.0, np.round(ran)), ran),
        "act": [p.activation_gbit for p in profiles],
        "kstar": [p.k_target for p in profiles],  # what the rules aim at (K*, or the request)
        "b_ref": [p.b_j(p.k_target) for p in profiles],
        "t1": [p.e1 / p.iterations for p in profiles],
        "tk": [p.ideal_duration / p.iterations for p in profiles],
        "min_gpus": min_gpus,
    }
    for name, values in columns.items():
        arr = getattr(core, name)
        arr[e] = 0
        arr[e, :n] = values
    core.min_gpus[e, n:] = 1
    core.kstar_max[e] = core.kstar[e, :n].max() if n else 1
    _load_uncertainty(core, e, jobs, unc, draws, history)
    _plant_failures(core, e, jobs)
    sim.reset(core, e)
    return jobs


def _fates(jobs, unc: UncertaintyConfig, rng: np.random.Generator) -> np.ndarray:
    """Fraction of its configured work each job runs: a JobSpec's own ``fate_fraction`` (trace
    jobs, recurring scenarios) or, with probability ``early_end_rate``, Beta(0.7, 2) (early
    ends are skewed to small fractions, uncertainty/workload.py)."""
    n = len(jobs)
    u = rng.random(n)
    frac = rng.beta(*FATE_FRACTION_BETA, size=n)
    out = np.where(u < unc.early_end_rate, np.clip(frac, 0.01, 1.0), 1.0)
    for i, job in enumerate(jobs):
        if job.fate_fraction is not None:
            out[i] = job.fate_fraction
    return out


def _load_uncertainty(core, e, jobs, unc: UncertaintyConfig, draws, history) -> None:
    n = len(jobs)
    sizes = sim._sizes(core)
    a = sizes["A"]
    pred = _predictor(unc)
    core.pred_mode[e] = PRED_STATIC
    core.store_vecs[e] = 0.0
    core.store_vals[e] = 0.0
    core.n_store[e] = 0
    core.meta_vec[e] = 0.0
    core.pred_hit[e] = False
    core.pred_iters[e] = 0.0
    if isinstance(pred, RetrievalPredictor):
        core.pred_mode[e] = PRED_RETRIEVAL
        core.ret_k[e] = pred.k
        core.ret_thr[e] = pred.threshold
        core.ret_record_actual[e] = pred.record == "actual"
        core.ret_fallback[e] = FALLBACK_USER if pred.fallback == "user-estimate" else FALLBACK_STORE_MEAN
        d = pred.vectorizer.dim
        if n:
            core.meta_vec[e, :n, :d] = pred.vectorizer.transform([job_metadata(j) for j in jobs])
        for spec, executed in history or []:
            vec = np.zeros(sizes["D"], np.float32)
            vec[:d] = pred.vectorizer.transform([job_metadata(spec)])[0]
            value = executed if pred.record == "actual" else profile(spec).iterations
            core.n_store[e] = store_append(
                core.store_vecs[e], core.store_vals[e], core.n_store[e], vec, float(value)
            )
    else:
        truth = core.iters[e, :n]
        user = core.full_iters[e, :n]
        values = pred.predict([None] * n, user_estimate=user, actual=truth, z=draws.pred_z)
        core.pred_iters[e, :n] = np.maximum(np.asarray(values, dtype=float), sim.MIN_PRED_ITERS)
    core.fail_rate[e] = unc.failure_rate_per_gpu_hour
    core.ckpt_h[e] = unc.checkpoint_interval_hours
    core.gpus_per_failure[e] = unc.gpus_per_failure
    core.handler_on[e] = unc.handler
    core.tpr[e], core.fpr[e] = unc.handler_operating_point()
    core.diag_h[e] = unc.diagnosis_delay_hours
    core.manual_h[e] = unc.manual_delay_hours
    core.fail_e[e] = np.inf
    core.fail_e[e, :n, :a] = draws.fail_e[:, :a]
    core.repair_h[e] = 0.0
    core.repair_h[e, :n, :a] = repair_hours(draws.repair_z[:, :a], unc.repair_median_hours, unc.repair_sigma)
    core.handler_u[e] = 1.0
    core.handler_u[e, :n, :a] = draws.handler_u[:, :a]
    sigma = unc.tracker_sigma()
    core.track_known[e] = False
    core.track_known[e, :n] = draws.tracker_u < unc.tracker_detect_prob
    core.track_zf[e] = 1.0
    core.track_zs[e] = 1.0
    core.track_zf[e, :n] = np.exp(sigma * draws.tracker_z[:, 0])
    core.track_zs[e, :n] = np.exp(sigma * draws.tracker_z[:, 1])


# --------------------------------------------------------------- trace-driven failures (traces/)
def _plant_failures(core, e, jobs) -> None:
    """Write ``JobSpec.failure_gpu_hours`` (trace-driven infrastructure failures) over the drawn
    failures. The core fails attempt a of job j after ``fail_e[j, a] / (rate x g)`` hours on g
    GPUs (``sim.place``), so a failure X GPU-hours into an attempt is ``fail_e = X x rate``;
    the job's later attempts never fail. When the random process is off (rate 0) a nominal
    rate of 1 switches the core's failure check on, and every other job gets no failure."""
    planted = [(i, job) for i, job in enumerate(jobs) if job.failure_gpu_hours is not None]
    if not planted:
        return
    a = core.fail_e.shape[2]
    rate = float(core.fail_rate[e])
    if rate <= 0.0:
        rate = 1.0
        core.fail_rate[e] = rate
        core.fail_e[e] = np.inf
    for i, job in planted:
        hours = job.failure_gpu_hours
        if len(hours) > a:
            raise ValueError(
                f"job {job.name!r}: {len(hours)} planted failures exceed the core's {a} attempts "
                f"(raise UncertaintyConfig.max_attempts, or map with fewer max_failures)"
            )
        core.fail_e[e, i] = np.inf
        core.fail_e[e, i, : len(hours)] = np.asarray(hours, dtype=np.float64) * rate
