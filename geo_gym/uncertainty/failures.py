"""Infrastructure failures, checkpoint rollback and repair times.

SchedMate section 2.1 ("Prevalence of Failures") and section 1, C3: "the pretraining of
LLaMA-3.1 encountered 419 failures, averaging one every three hours". Failures are a Poisson
process over GPU-hours held: an attempt holding g GPUs fails after an exponential time of
rate ``rate * g``. Randomness is pre-drawn at episode reset as unit exponentials ``e``; the
time to the next failure is then ``e / (rate * g)`` hours, a pure function the numba core
evaluates without a generator (and which gives common random numbers across policies: a
policy that gives the job more GPUs makes the same ``e`` arrive sooner).

A failure kills the attempt; progress falls back to the last completed checkpoint
(:func:`checkpoint_rollback`); the faulty GPUs leave their region for a repair time.

Default rate, from the Llama 3 report (Dubey et al., 2024, section 3.3.4): 419 unexpected
interruptions in a 54-day snapshot of pre-training on 16,384 H100 GPUs:

    419 / (54 days x 24 h/day x 16,384 GPUs) = 419 / 21,233,664 GPU-h
                                             = 1.973e-5 failures per GPU-hour
    (mean time between failures: 50,677 GPU-hours; a 1,024-GPU job fails every ~49.5 h)

All 419 count as infrastructure failures here (the report attributes ~78 % to hardware and
most of the rest to host/software maintenance issues, none to the user's code).

Repair time (assumption, no public distribution we can cite): log-normal with median 3 h and
sigma 1.0 (mean ~4.9 h). A reboot or re-seat takes minutes, a node swap hours, a part
replacement a day or more; the log-normal covers that spread. ``sigma = 0`` gives a constant.
"""

from __future__ import annotations

import numba
import numpy as np

_jit = numba.njit(cache=True)

LLAMA3_INTERRUPTIONS = 419
LLAMA3_DAYS = 54.0
LLAMA3_GPUS = 16_384
HOURS_PER_DAY = 24.0

DEFAULT_REPAIR_MEDIAN_HOURS = 3.0
DEFAULT_REPAIR_SIGMA = 1.0


def failure_rate_per_gpu_hour(
    interruptions: float = LLAMA3_INTERRUPTIONS,
    days: float = LLAMA3_DAYS,
    gpus: float = LLAMA3_GPUS,
) -> float:
    """Failures per GPU-hour from a fleet observation: interruptions / (days x 24 x GPUs)."""
    if interruptions < 0 or days <= 0 or gpus <= 0:
        raise ValueError(
            f"need interruptions >= 0, days > 0, gpus > 0; got {interruptions}, {days}, {gpus}"
        )
    return interruptions / (days * HOURS_PER_DAY * gpus)


LLAMA3_RATE_PER_GPU_HOUR = failure_rate_per_gpu_hour()


@_jit
def time_to_failure(e, rate_per_gpu_hour, gpus):
    """Hours until an attempt holding ``gpus`` GPUs fails, from a unit exponential ``e``.

    Infinite when the rate or the GPU count is zero (failures off).
    """
    lam = rate_per_gpu_hour * gpus
    if lam <= 0.0:
        return np.inf
    return e / lam


@_jit
def checkpoint_rollback(progress_work, checkpoint_interval):
    """Work kept after a failure: progress rounded down to the last completed checkpoint.

    Checkpoints are taken every ``checkpoint_interval`` units of work (same units as
    ``progress_work``); lost work is ``progress_work - kept``. ``checkpoint_interval <= 0``
    means continuous checkpointing (nothing lost), ``inf`` means no checkpoints (all lost).
    A relative 1e-9 slack keeps e.g. 0.3 / 0.1 on the checkpoint it lands on.
    """
    if checkpoint_interval <= 0.0:
        return progress_work
    if np.isinf(checkpoint_interval):
        return 0.0
    n = np.floor(progress_work / checkpoint_interval * (1.0 + 1e-9))
    kept = n * checkpoint_interval
    return min(kept, progress_work)


@_jit
def repair_hours(z, median_hours, sigma):
    """Repair time from a pre-drawn standard normal ``z``: log-normal(median, sigma)."""
    return median_hours * np.exp(sigma * z)


def draw_failure_exponentials(rng: np.random.Generator, n_jobs: int, max_attempts: int):
    """Unit exponentials, one per (job, attempt): attempt a of job j fails after
    ``time_to_failure(e[j, a], rate, gpus)`` hours unless it ends first."""
    return rng.standard_exponential((n_jobs, max_attempts))
