"""Every random number the uncertainty model needs in an episode, drawn once at reset, and the
core columns each source fills.

docs/design.md ("Every random draw comes from the env's seeded generator"): the numba core
stays deterministic and every policy sees the same random numbers (common random numbers).
Each source draws from its own child generator (``Generator.spawn``), and every array is drawn
whatever the configuration, so switching a source on or off, or changing ``max_attempts``,
never shifts the numbers of another source.

A source is one row of ``SOURCES``: the core columns it fills (declared here, beside their
draws; ``sim.Core`` holds them with the fields of ``geo_gym.state``), whether a configuration
reads its numbers, and how it turns them into the columns. Adding a source is a knob in
``config.py``, a row here, and the code in ``sim.py`` that reads its columns and writes them
when an episode is loaded (``sim._load_episode``, by name; importing ``sim`` fails naming a
column it does not write). A new row is spawned after the
existing ones, so their numbers within an episode stay put (later episodes of one generator
shift: it has spawned one child more per episode).

The noisy predictor's normals are drawn first, from their own child, and are no core column:
static predictions are made when the episode is loaded (``geo_gym.loading``).
"""

from __future__ import annotations

from collections.abc import Callable
from functools import lru_cache
from typing import NamedTuple

import numpy as np

from geo_gym.state import Field
from geo_gym.uncertainty.failures import repair_hours
from geo_gym.uncertainty.tracker import sigma_for_rmsre


class Source(NamedTuple):
    """One uncertainty source. ``columns(gen, unc, n, attempts)`` returns its columns in the
    order of ``fields``: from its child generator ``gen``, or, with ``gen`` None, the neutral
    numbers that switch it off (no failure, no noise)."""

    name: str
    fields: tuple[Field, ...]  # each with ``fill``: the value of rows beyond the episode's jobs
    reads: Callable  # (UncertaintyConfig) -> bool: the configuration uses these numbers
    columns: Callable


def _per_attempt(gen: np.random.Generator | None, n: int, attempts: int, kind: str, neutral: float):
    """(n, attempts) numbers, drawn one attempt column at a time (an (attempts, jobs) block
    is the same stream), so attempt a of job j gets the same number for any attempts > a."""
    if gen is None:
        return np.full((n, attempts), neutral)
    shape = (attempts, n)
    if kind == "exp":
        block = gen.standard_exponential(shape)
    elif kind == "normal":
        block = gen.standard_normal(shape)
    else:
        block = gen.random(shape)
    return np.ascontiguousarray(block.T)


def _failures(gen, unc, n, attempts):
    """Unit exponentials: attempt a of job j holding g GPUs fails after
    ``failure_draws[j, a] / (rate x g)`` hours (failures.time_to_failure)."""
    return (_per_attempt(gen, n, attempts, "exp", np.inf),)


def _repair(gen, unc, n, attempts):
    """Repair hours after each failure: log-normal (failures.repair_hours)."""
    z = _per_attempt(gen, n, attempts, "normal", 0.0)
    return (repair_hours(z, unc.repair_median_hours, unc.repair_sigma),)


def _handler(gen, unc, n, attempts):
    """What the failure handler sees and decides: a uniform per attempt deciding its verdict on
    the failure that ends it (handler.handle_failure), and a uniform per job deciding whether
    an early end of no given kind is an application failure (below
    ``application_failure_share``) or a cancellation. The kinds' uniforms come from a child of
    this source's generator (spawning one draws nothing from it): adding them moved no number
    of any episode, and they do not depend on the number of attempts."""
    kinds = gen.spawn(1)[0].random(n) if gen is not None else np.ones(n)
    return _per_attempt(gen, n, attempts, "uniform", 1.0), kinds


def _tracker(gen, unc, n, attempts):
    """The Metric Tracker (tracker.observe_progress): whether it sees each job (a uniform
    against the detection probability) and log-normal factors on the progress fraction and
    the step time it reports."""
    u = gen.random(n) if gen is not None else np.zeros(n)
    z = gen.standard_normal((n, 2)) if gen is not None else np.zeros((n, 2))
    sigma = sigma_for_rmsre(unc.tracker_rmsre)
    return u < unc.tracker_detect_prob, np.exp(sigma * z[:, 0]), np.exp(sigma * z[:, 1])


def _failing(unc) -> bool:
    return unc.failure_rate_per_gpu_hour > 0


SOURCES: tuple[Source, ...] = (
    Source(
        "failures",
        (Field("failure_draws", "JA", np.float64, "unit exponentials: attempt a fails after failure_draws / (rate x GPUs) hours", np.inf),),
        _failing,
        _failures,
    ),
    Source(
        "repair",
        (Field("repair_h", "JA", np.float64, "repair time after each attempt's failure", 0.0),),
        _failing,
        _repair,
    ),
    Source(
        "handler",
        (
            Field("handler_u", "JA", np.float64, "uniforms deciding the handler's verdict per failure", 1.0),
            Field("end_kind_u", "J", np.float64, "uniform: an early end of no given kind is an application failure below application_failure_share", 1.0),
        ),
        lambda unc: _failing(unc) or unc.handler,
        _handler,
    ),
    Source(
        "tracker",
        (
            Field("tracker_sees", "J", np.bool_, "the tracker sees this job's progress", False),
            Field("tracker_frac_noise", "J", np.float64, "log-normal factor on the progress fraction it sees", 1.0),
            Field("tracker_step_noise", "J", np.float64, "log-normal factor on the step time it sees", 1.0),
        ),
        lambda unc: 0.0 < unc.tracker_detect_prob < 1.0 or unc.tracker_rmsre > 0,
        _tracker,
    ),
)

FIELDS: tuple[Field, ...] = tuple(f for s in SOURCES for f in s.fields)
NAMES: tuple[str, ...] = tuple(f.name for f in FIELDS)

DrawnColumns = NamedTuple("DrawnColumns", [(name, np.ndarray) for name in NAMES])
DrawnColumns.__doc__ = """An episode's drawn columns (length n, the per-attempt ones (n, attempts)),
one per field of ``FIELDS``, as ``sim.load_episode`` writes them into the core."""


def reads_draws(unc) -> bool:
    """Whether ``unc`` reads any drawn number (the noisy predictor's included). When none does
    (the perfect world) loading uses ``neutral_columns`` and spawns no generators: the results
    are the same, and the parent generator's stream is untouched."""
    predictor = unc.make_predictor()
    return bool(getattr(predictor, "uses_noise", False)) or any(s.reads(unc) for s in SOURCES)


def draw_episode(rng: np.random.Generator, unc, n_jobs: int, max_attempts: int = 16):
    """(the noisy predictor's standard normals (n,), ``DrawnColumns``) of one episode of
    ``n_jobs`` jobs: one child generator for the predictor, then one per source in
    ``SOURCES`` order."""
    if n_jobs < 0 or max_attempts < 1:
        raise ValueError(f"need n_jobs >= 0 and max_attempts >= 1, got {n_jobs}, {max_attempts}")
    children = rng.spawn(1 + len(SOURCES))
    pred_z = children[0].standard_normal(n_jobs)
    columns = []
    for source, gen in zip(SOURCES, children[1:], strict=True):
        columns += source.columns(gen, unc, n_jobs, max_attempts)
    return pred_z, DrawnColumns(*columns)


# Workloads of at most this many jobs (env episodes, loaded again and again) share their
# neutral columns; larger ones (a whole trace, loaded once) build them afresh, so that they
# are not kept after the run (561 B per job at 16 attempts).
CACHED_JOBS = 1 << 14


def neutral_columns(unc, n_jobs: int, max_attempts: int = 16) -> DrawnColumns:
    """The columns with every source switched off: no failure, no noise, a tracker that sees
    every job exactly when its detection probability is 1. Constants of the configuration
    (read-only), built once per size and shared up to ``CACHED_JOBS`` jobs."""
    if n_jobs <= CACHED_JOBS:
        return _neutral_cached(unc, n_jobs, max_attempts)
    return _neutral(unc, n_jobs, max_attempts)


@lru_cache(maxsize=256)
def _neutral_cached(unc, n_jobs: int, max_attempts: int) -> DrawnColumns:
    return _neutral(unc, n_jobs, max_attempts)


def _neutral(unc, n_jobs: int, max_attempts: int) -> DrawnColumns:
    columns = []
    for source in SOURCES:
        columns += source.columns(None, unc, n_jobs, max_attempts)
    for a in columns:
        a.setflags(write=False)
    return DrawnColumns(*columns)
