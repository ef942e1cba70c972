"""A synthetic recurring workload with hidden fates, for tests and scenarios.

SchedMate section 2.1 ("History-based methods exploit recurring job submission patterns")
and section 1, C2 ("up to half of all jobs terminate prematurely"): users resubmit variants
of a few experiment templates, and many jobs end early. This module draws such a workload:
each user owns a few templates (model family, size, dataset, task, GPU request, a typical
amount of work and a typical way of ending); each job is a variant of one template with a
small work jitter and its own hidden fate.

Defaults and their sources:

- Early-end share ``early_end_rate = 0.45``: between Philly (Jeon et al., ATC'19, official
  summary: COMPLETED 60.4 %, CANCELLED 9.0 %, FAILED 30.5 % -> 39.5 % end early) and Acme's
  Seren GPU jobs (Hu et al., NSDI'24: COMPLETED 49.7 %, FAILED 42.9 %, CANCELLED 7.5 % ->
  50.4 % end early).
- Application failures among early ends, ``application_failure_share = 0.81`` (the rest are
  cancellations; the failure handler sees only the former): FAILED / (FAILED + CANCELLED)
  between Philly (official summary: 30.5 / 39.5 = 0.772) and Seren's GPU jobs (42.9 / 50.4 =
  0.851), as the early-end share above (Acme's ``cluster_summary.csv``, columns
  ``fail_rate_gpu`` and ``cancel_rate_gpu``). Kalos's GPU jobs give 0.865, the raw Philly
  day of 2017-10-07 0.70 (85 Failed, 36 Killed; ``traces.read_trace``). The traces do not
  separate infrastructure from application failures among FAILED jobs (Acme's NODE_FAIL
  aside); infrastructure failures are a process of their own here (failures.py).
- Early ends are skewed to small fractions of the work (both trace studies find most failed
  jobs die soon after start): a template's typical end point is Beta(0.7, 2.0) (median ~0.21,
  mean ~0.26), jittered per job by a log-normal factor (sigma 0.25).
- Fates recur: a template's early-end probability is Beta with mean ``early_end_rate`` and
  concentration ``fate_concentration`` (default 1.0, i.e. strongly bimodal: buggy/debug
  templates mostly end early, stable ones mostly complete). This is what lets history-based
  estimators (SchedMate Fig. 12) beat config-based ones on early-ending jobs.
- Template work: log-normal, median 4 h, sigma 1.5 (heavy tail, in the spirit of the
  duration CDFs of SchedMate Fig. 2a; absolute units are arbitrary). Per-job jitter: 10 %.
- User estimate (configured steps x step time): true work times log-normal(0, 0.1).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from geo_gym.uncertainty.metadata import JobMetadata

DEFAULT_EARLY_END_RATE = 0.45  # between Philly (0.395) and Acme Seren (0.504), see above
DEFAULT_APPLICATION_FAILURE_SHARE = 0.81  # of early ends: between Philly (0.772) and Seren (0.851)
FATE_FRACTION_BETA = (0.7, 2.0)  # template end point, skewed to early failures
FATE_FRACTION_JITTER = 0.25
FRACTION_MIN, FRACTION_MAX = 0.005, 0.995  # an early end executes some, never all, work

FAMILY_SIZES: dict[str, tuple[float, ...]] = {
    "llama": (1.0, 7.0, 8.0, 13.0, 70.0),
    "gpt": (0.35, 1.3, 2.7, 6.7, 20.0),
    "qwen": (0.5, 1.8, 7.0, 14.0, 32.0),
    "mistral": (7.0, 12.0),
    "bloom": (0.56, 3.0, 7.1),
}
DATASETS: tuple[str, ...] = (
    "c4", "pile", "redpajama", "openwebtext", "wikitext", "alpaca", "sharegpt", "the-stack",
)
TASKS: tuple[str, ...] = ("pretrain", "sft", "continued-pretrain", "dpo")
# Name stems users pick; a few per user, so names only partly identify an experiment.
NAME_STEMS: tuple[str, ...] = ("train", "run", "exp", "ft", "job", "test", "dev", "final")


@dataclass(frozen=True)
class RecurringWorkload:
    """Jobs in submission order; arrays are aligned with ``meta``."""

    meta: list[JobMetadata]
    template: np.ndarray  # int64, global template id (for analysis; no predictor sees it)
    true_work: np.ndarray  # work if the job ran to completion
    fate: np.ndarray  # int8: 0 completes, 1 ends early (cancelled / application failure)
    fate_fraction: np.ndarray  # fraction of true_work executed; 1.0 when it completes
    actual: np.ndarray  # true_work * fate_fraction
    user_estimate: np.ndarray  # configured steps x step time: true_work x small error

    def __len__(self) -> int:
        return len(self.meta)

    def split(self, n_first: int) -> tuple[RecurringWorkload, RecurringWorkload]:
        """The first ``n_first`` jobs (e.g. a history warm-up) and the rest."""
        return self._take(slice(0, n_first)), self._take(slice(n_first, len(self)))

    def _take(self, s: slice) -> RecurringWorkload:
        return RecurringWorkload(
            self.meta[s], self.template[s], self.true_work[s], self.fate[s],
            self.fate_fraction[s], self.actual[s], self.user_estimate[s],
        )


def _beta_mean(rng: np.random.Generator, mean: float, concentration: float, size: int):
    if mean <= 0.0:
        return np.zeros(size)
    if mean >= 1.0:
        return np.ones(size)
    return rng.beta(mean * concentration, (1.0 - mean) * concentration, size)


def match_weighted_mean(p: np.ndarray, weights: np.ndarray, target: float) -> np.ndarray:
    """Power-transform probabilities ``p`` (p**g, g > 0) so that their ``weights``-weighted mean
    is ``target``.

    Without this, a popular template's propensity would swing the realised early-end share of
    a whole workload by several points (a few templates carry much of the load); the power
    map keeps the order and the bimodal shape of the draws.
    """
    if target <= 0.0 or target >= 1.0 or np.all((p == 0.0) | (p == 1.0)):
        return p
    lo, hi = -10.0, 10.0  # bisection on log g; the weighted mean falls as g grows
    for _ in range(80):
        mid = 0.5 * (lo + hi)
        if float(np.dot(weights, p ** np.exp(mid))) > target:
            lo = mid
        else:
            hi = mid
    return p ** np.exp(0.5 * (lo + hi))


def recurring_jobs(
    n: int,
    rng: np.random.Generator,
    n_users: int = 30,
    templates_per_user: int = 4,
    early_end_rate: float = DEFAULT_EARLY_END_RATE,
    fate_concentration: float = 1.0,
    work_median: float = 4.0,
    work_sigma: float = 1.5,
    work_jitter: float = 0.1,
    user_error_sigma: float = 0.1,
    families: Sequence[str] | None = None,
) -> RecurringWorkload:
    """Draw ``n`` jobs of a recurring workload (see the module docstring for the model).

    All randomness comes from ``rng`` in a fixed order, so a seed fixes the workload.
    """
    if n < 0:
        raise ValueError(f"n must be >= 0, got {n}")
    if n_users < 1 or templates_per_user < 1:
        raise ValueError("n_users and templates_per_user must be >= 1")
    if not 0.0 <= early_end_rate <= 1.0:
        raise ValueError(f"early_end_rate must be in [0, 1], got {early_end_rate}")
    if fate_concentration <= 0:
        raise ValueError(f"fate_concentration must be > 0, got {fate_concentration}")
    fams = tuple(families) if families is not None else tuple(FAMILY_SIZES)
    for f in fams:
        if f not in FAMILY_SIZES:
            raise ValueError(f"unknown family {f!r}; known: {', '.join(FAMILY_SIZES)}")

    n_t = n_users * templates_per_user
    users = [f"user{u:03d}" for u in range(n_users)]
    # Templates. Each user names experiments with 2 of the stems (habits differ per user).
    t_user = np.repeat(np.arange(n_users), templates_per_user)
    user_stems = [rng.choice(len(NAME_STEMS), 2, replace=False) for _ in range(n_users)]
    t_family = rng.integers(0, len(fams), n_t)
    t_size = [
        FAMILY_SIZES[fams[f]][rng.integers(0, len(FAMILY_SIZES[fams[f]]))] for f in t_family
    ]
    t_dataset = rng.integers(0, len(DATASETS), n_t)
    t_task = rng.integers(0, len(TASKS), n_t)
    t_gpus = 2 ** rng.integers(0, 7, n_t)
    t_stem = [NAME_STEMS[user_stems[u][rng.integers(0, 2)]] for u in t_user]
    t_work = work_median * np.exp(work_sigma * rng.standard_normal(n_t))
    t_p_early = _beta_mean(rng, early_end_rate, fate_concentration, n_t)
    t_end_point = rng.beta(*FATE_FRACTION_BETA, n_t)
    # Activity: some users and some of a user's templates are far more frequent (Zipf-like).
    user_w = rng.dirichlet(np.full(n_users, 1.0))
    tmpl_w = np.concatenate([rng.dirichlet(np.full(templates_per_user, 1.0)) for _ in users])
    p_t = tmpl_w * user_w[t_user]
    p_t = p_t / p_t.sum()
    t_p_early = match_weighted_mean(t_p_early, p_t, early_end_rate)

    # Jobs.
    tmpl = rng.choice(n_t, n, p=p_t)
    true_work = t_work[tmpl] * np.exp(work_jitter * rng.standard_normal(n))
    ends_early = rng.random(n) < t_p_early[tmpl]
    frac = np.clip(
        t_end_point[tmpl] * np.exp(FATE_FRACTION_JITTER * rng.standard_normal(n)),
        FRACTION_MIN,
        FRACTION_MAX,
    )
    fate_fraction = np.where(ends_early, frac, 1.0)
    user_estimate = true_work * np.exp(user_error_sigma * rng.standard_normal(n))
    run_ids = rng.integers(1, 1000, n)
    meta = [
        JobMetadata(
            family=fams[t_family[t]],
            size_b=float(t_size[t]),
            dataset=DATASETS[t_dataset[t]],
            task=TASKS[t_task[t]],
            user=users[t_user[t]],
            gpus=int(t_gpus[t]),
            name=f"{users[t_user[t]]}-{t_stem[t]}-{int(r)}",
        )
        for t, r in zip(tmpl, run_ids, strict=True)
    ]
    return RecurringWorkload(
        meta=meta,
        template=tmpl.astype(np.int64),
        true_work=true_work,
        fate=ends_early.astype(np.int8),
        fate_fraction=fate_fraction,
        actual=true_work * fate_fraction,
        user_estimate=user_estimate,
    )
