"""Every random number the uncertainty model needs in an episode, drawn once at reset.

docs/design.md ("Every random draw comes from the env's seeded generator"): the numba core
stays deterministic and every policy sees the same random numbers (common random numbers).
Each component draws from its own child generator (``Generator.spawn``), and every array is
drawn whatever the configuration, so switching a component on or off, or changing
``max_attempts``, never shifts the numbers of another component.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

import numpy as np

COMPONENTS = ("predictor", "failures", "repair", "handler", "tracker")


@dataclass(frozen=True)
class EpisodeDraws:
    pred_z: np.ndarray  # (n,) standard normals for the noisy predictor
    fail_e: np.ndarray  # (n, max_attempts) unit exponentials, failures.time_to_failure
    repair_z: np.ndarray  # (n, max_attempts) standard normals, failures.repair_hours
    handler_u: np.ndarray  # (n, max_attempts) uniforms, handler.handle_failure
    tracker_u: np.ndarray  # (n,) uniforms, tracker.observe_progress detection
    tracker_z: np.ndarray  # (n, 2) standard normals: fraction, step-time errors


def draw_episode(rng: np.random.Generator, n_jobs: int, max_attempts: int = 16) -> EpisodeDraws:
    """Draw all per-job and per-attempt numbers for ``n_jobs`` jobs."""
    if n_jobs < 0 or max_attempts < 1:
        raise ValueError(f"need n_jobs >= 0 and max_attempts >= 1, got {n_jobs}, {max_attempts}")
    g = dict(zip(COMPONENTS, rng.spawn(len(COMPONENTS)), strict=True))
    # Per-attempt arrays are drawn one attempt column at a time (an (attempts, jobs) block is
    # the same stream), so attempt a of job j gets the same number for any max_attempts > a.
    def per_attempt(gen: np.random.Generator, kind: str) -> np.ndarray:
        shape = (max_attempts, n_jobs)
        if kind == "exp":
            block = gen.standard_exponential(shape)
        elif kind == "normal":
            block = gen.standard_normal(shape)
        else:
            block = gen.random(shape)
        return np.ascontiguousarray(block.T)

    return EpisodeDraws(
        pred_z=g["predictor"].standard_normal(n_jobs),
        fail_e=per_attempt(g["failures"], "exp"),
        repair_z=per_attempt(g["repair"], "normal"),
        handler_u=per_attempt(g["handler"], "uniform"),
        tracker_u=g["tracker"].random(n_jobs),
        tracker_z=g["tracker"].standard_normal((n_jobs, 2)),
    )


@lru_cache(maxsize=256)
def neutral_draws(n_jobs: int, max_attempts: int = 16) -> EpisodeDraws:
    """Numbers that switch every random component off: no noise, no failure, a tracker that
    sees every job exactly when its detection probability is 1. For configurations that use
    none of the draws (the perfect world), so that no generators are spawned for nothing.
    Constants, so built once per size and shared (read-only)."""
    draws = EpisodeDraws(
        pred_z=np.zeros(n_jobs),
        fail_e=np.full((n_jobs, max_attempts), np.inf),
        repair_z=np.zeros((n_jobs, max_attempts)),
        handler_u=np.ones((n_jobs, max_attempts)),
        tracker_u=np.zeros(n_jobs),
        tracker_z=np.zeros((n_jobs, 2)),
    )
    for a in vars(draws).values():
        a.setflags(write=False)
    return draws
