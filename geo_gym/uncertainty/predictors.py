"""Duration predictors: what a scheduler is told about a job's duration.

SchedMate section 1 (C2) and section 3.1 (Scheduling Advisor), evaluated in section 5.4
(Fig. 12). Modes:

- ``oracle``: the actual duration (the perfect world of most scheduling papers).
- ``noisy``: actual x log-normal(0, sigma), from pre-drawn standard normals.
- ``user-estimate``: configured steps x step time; blind to early termination (section 2.1,
  "Config-based methods ... are unreliable under high failure/cancellation rates").
- ``retrieval``: the Scheduling Advisor in miniature. A history store of finished jobs
  (metadata vectors and what was recorded about them); the query's cosine similarity to every
  stored job; the top-k jobs with similarity >= threshold give the estimate (mean of their
  values); with no match a fallback (default: the user estimate; SchedMate section 4.1
  "If no match is found, we fall back to Lucid's original estimator").

Presets named after Fig. 12: ``schedmate`` (retrieval on full metadata, k=3 as in section
4.3) and ``metadata-only`` (a Lucid-like estimator: sparse metadata, user, GPUs and name
only, which records configured durations, i.e. assumes every job runs to completion, and
averages over many loosely similar jobs).

The retrieval kernels are numba functions on arrays so the simulator core calls the very
same code; the classes are thin wrappers for standalone use. Predictors never see actual
durations except ``oracle``/``noisy`` (a noisy view of the truth) and the retrieval store,
which only holds jobs that have finished.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numba
import numpy as np

from geo_gym.uncertainty.metadata import (
    DEFAULT_DIM,
    FIELDS,
    SPARSE_FIELDS,
    HashingVectorizer,
    JobMetadata,
    Vectorizer,
)

_jit = numba.njit(cache=True)

DEFAULT_STORE_CAPACITY = 8192


# --------------------------------------------------------------------------- array kernels


@_jit
def store_append(store_vecs, store_norms, store_vals, n_store, vec, val):
    """Record one finished job; returns the new ``n_store``.

    ``n_store`` counts every job ever appended. The store is a ring buffer of capacity
    ``store_vals.shape[0]``: once full, the oldest job is overwritten, so the store holds the
    most recent ``cap`` finished jobs (recurring workloads make recent history the most
    relevant, and a fixed capacity keeps the core allocation-free). ``store_vecs`` is
    (dim, cap), one column per job, so that a query streams down contiguous columns;
    ``store_norms`` keeps each job's L2 norm, so that a query does not recompute it.
    """
    cap = store_vals.shape[0]
    row = n_store % cap
    for j in range(store_vecs.shape[0]):
        store_vecs[j, row] = vec[j]
    store_norms[row] = _column_norm(store_vecs, row)
    store_vals[row] = val
    return n_store + 1


@_jit
def store_extend(store_vecs, store_norms, store_vals, n_store, vecs, vals):
    """:func:`store_append` of each row of ``vecs`` (jobs x dim, zero-padded to the store's
    dim) with its value, in order; returns the new ``n_store``."""
    vec = np.zeros(store_vecs.shape[0], np.float32)
    for i in range(vecs.shape[0]):
        for j in range(vecs.shape[1]):
            vec[j] = vecs[i, j]
        n_store = store_append(store_vecs, store_norms, store_vals, n_store, vec, vals[i])
    return n_store


@_jit
def _column_norm(store_vecs, col):
    """L2 norm of a stored job's vector, as stored (float32), summed in float64."""
    sn = 0.0
    for j in range(store_vecs.shape[0]):
        s = float(store_vecs[j, col])
        sn += s * s
    return np.sqrt(sn)


@_jit
def column_norms(store_vecs):
    """Every stored job's L2 norm (:func:`store_append` keeps them as jobs arrive)."""
    out = np.empty(store_vecs.shape[1])
    for i in range(store_vecs.shape[1]):
        out[i] = _column_norm(store_vecs, i)
    return out


@_jit
def cosine_similarities(query, store_vecs, store_norms, n_valid):
    """Cosine similarity of ``query`` to the first ``n_valid`` stored jobs (0 for zero vectors).

    Only the query's non-zero entries enter the dot products: hashed metadata vectors have
    about ten of 64 (docs/traces.md), and a zero entry adds a zero, which leaves every sum as
    it is (at most the sign of an exact zero changes, and -0.0 and 0.0 compare equal). Each
    job's products are added in entry order, as a row-by-row loop would; the loop over jobs
    is the inner one, over a contiguous column, which the compiler vectorises."""
    dim = query.shape[0]
    qn = 0.0
    for j in range(dim):
        qn += float(query[j]) * float(query[j])
    qn = np.sqrt(qn)
    sims = np.zeros(n_valid)
    for j in range(dim):
        if query[j] != 0:
            qj = float(query[j])
            column = store_vecs[j]
            for i in range(n_valid):
                sims[i] += qj * float(column[i])
    for i in range(n_valid):
        sn = store_norms[i]
        sims[i] = sims[i] / (qn * sn) if qn > 0.0 and sn > 0.0 else 0.0
    return sims


@_jit
def retrieval_estimate(query, store_vecs, store_norms, store_vals, n_store, k, threshold):
    """Mean value of the top-k stored jobs with cosine similarity >= ``threshold``.

    Returns ``(estimate, n_matches)``; ``n_matches`` is 0 and the estimate NaN when no stored
    job is similar enough (the caller applies its fallback). Ties in similarity go to the
    lower row, so results are deterministic. ``n_store`` is the append count of
    :func:`store_append` (valid rows: ``min(n_store, cap)``).
    """
    n_valid = min(n_store, store_vals.shape[0])
    if n_valid <= 0 or k <= 0:
        return np.nan, 0
    sims = cosine_similarities(query, store_vecs, store_norms, n_valid)
    total = 0.0
    m = 0
    if k <= 16:
        # One pass keeping the best k so far in order of similarity, then row: cheaper than
        # a sort for the small k retrieval uses. A later row displaces only a strictly more
        # similar one, so ties go to the lower row, and the total is summed in the order a
        # stable sort would give.
        best_row = np.empty(k, np.int64)
        best_sim = np.empty(k)
        for i in range(n_valid):
            s = sims[i]
            if s < threshold or (m == k and s <= best_sim[k - 1]):
                continue
            p = min(m, k - 1)  # the free slot, or the least similar one, which drops out
            while p > 0 and best_sim[p - 1] < s:
                best_sim[p] = best_sim[p - 1]
                best_row[p] = best_row[p - 1]
                p -= 1
            best_sim[p] = s
            best_row[p] = i
            m = min(m + 1, k)
        for t in range(m):
            total += store_vals[best_row[t]]
    else:
        # The order of a stable sort by similarity (equal similarities keep row order, as in
        # the one-pass branch), without sorting the store: when the k-th most similar row
        # (a partition finds its similarity) is at the threshold or above, the k are the
        # fewer than k rows more similar than it, sorted, then rows as similar as it, in row
        # order (metadata repeats, so thousands of rows may tie there).
        kth = -np.partition(-sims, k - 1)[k - 1] if n_valid > k else -np.inf
        if kth >= threshold:
            above = np.flatnonzero(sims > kth)
            for i in above[np.argsort(-sims[above], kind="mergesort")]:
                total += store_vals[i]
                m += 1
            for i in range(n_valid):
                if m == k:
                    break
                if sims[i] == kth:
                    total += store_vals[i]
                    m += 1
        else:
            rows = np.flatnonzero(sims >= threshold)  # fewer than k, or all of the store
            for i in rows[np.argsort(-sims[rows], kind="mergesort")][:k]:
                total += store_vals[i]
                m += 1
    if m == 0:
        return np.nan, 0
    return total / m, m


@_jit
def retrieval_predict(query, store_vecs, store_norms, store_vals, n_store, k, threshold, fallback):
    """:func:`retrieval_estimate` with the fallback value applied; returns (value, n_matches)."""
    est, m = retrieval_estimate(query, store_vecs, store_norms, store_vals, n_store, k, threshold)
    if m == 0:
        return fallback, 0
    return est, m


MAX_NOISE_SIGMA = 10.0


@_jit
def noisy_durations(actual, z, sigma):
    """actual x exp(sigma z): log-normal noise with median ratio 1 from standard normals z."""
    out = np.empty(actual.shape[0])
    for i in range(actual.shape[0]):
        out[i] = actual[i] * np.exp(sigma * z[i])
    return out


def error_cdf(pred, actual, thresholds) -> np.ndarray:
    """Share of jobs whose relative error |pred - actual| / actual is <= each threshold.

    The metric of SchedMate Fig. 12. Note that an underestimate never exceeds 100 % error, so
    "within 100 %" is exactly "pred <= 2 x actual".
    """
    pred = np.asarray(pred, dtype=float)
    actual = np.asarray(actual, dtype=float)
    if pred.shape != actual.shape:
        raise ValueError(f"pred shape {pred.shape} != actual shape {actual.shape}")
    if np.any(actual <= 0):
        raise ValueError("actual durations must be > 0 for relative errors")
    rel = np.abs(pred - actual) / actual
    th = np.atleast_1d(np.asarray(thresholds, dtype=float))
    return (rel[None, :] <= th[:, None]).mean(axis=1)


# --------------------------------------------------------------------------- Python classes


def _as_1d(x, n: int, what: str) -> np.ndarray:
    if x is None:
        raise ValueError(f"this predictor needs {what}")
    a = np.asarray(x, dtype=float)
    if a.shape != (n,):
        raise ValueError(f"{what} must have shape ({n},), got {a.shape}")
    return a


class DurationPredictor:
    """Base class: ``predict`` estimates durations of submitted jobs, ``observe`` is told
    about finished ones (a no-op except for retrieval). ``uses_truth`` marks the predictors
    that read ``actual`` (the simulator passes it only to them)."""

    name = "base"
    uses_truth = False
    uses_noise = False  # reads the pre-drawn standard normals ``z``

    def predict(
        self,
        meta: Sequence[JobMetadata],
        user_estimate=None,
        actual=None,
        z=None,
    ) -> np.ndarray:
        raise NotImplementedError

    def observe(self, meta: Sequence[JobMetadata], actual, user_estimate=None) -> None:
        """Finished jobs: nothing to learn for stateless predictors."""


class OraclePredictor(DurationPredictor):
    name = "oracle"
    uses_truth = True

    def predict(self, meta, user_estimate=None, actual=None, z=None):
        return _as_1d(actual, len(meta), "actual").copy()


class NoisyPredictor(DurationPredictor):
    """actual x log-normal(0, sigma): centred (in the median) on the iterations the job will
    really run, so it knows each job's fate; its mean is exp(sigma^2 / 2) x actual (1.65 x at
    sigma = 1). ``z`` are pre-drawn standard normals (one per job), drawn at episode reset so
    policies see common random numbers."""

    name = "noisy"
    uses_truth = True
    uses_noise = True

    def __init__(self, sigma: float = 0.5):
        # Above 10 a prediction is off by e^30 at three sigma (it carries no information), and
        # exp(sigma z) overflows float64 into inf predictions once sigma z passes 709.
        if isinstance(sigma, bool) or not 0 <= sigma <= MAX_NOISE_SIGMA:
            raise ValueError(f"noisy predictor: sigma must be in [0, {MAX_NOISE_SIGMA:g}], got {sigma!r}")
        self.sigma = float(sigma)

    def predict(self, meta, user_estimate=None, actual=None, z=None):
        n = len(meta)
        return noisy_durations(_as_1d(actual, n, "actual"), _as_1d(z, n, "z"), self.sigma)


class UserEstimatePredictor(DurationPredictor):
    name = "user-estimate"

    def predict(self, meta, user_estimate=None, actual=None, z=None):
        return _as_1d(user_estimate, len(meta), "user_estimate").copy()


@dataclass
class HistoryStore:
    """Arrays of the retrieval history (ring buffer, see :func:`store_append`). ``norms``
    (each job's L2 norm, kept by store_append) is computed from ``vecs`` when not given."""

    vecs: np.ndarray  # (dim, cap) float32: one column per job
    vals: np.ndarray  # (cap,) float64
    n: int = 0  # jobs ever appended
    norms: np.ndarray | None = None  # (cap,) float64

    def __post_init__(self) -> None:
        self.vecs = np.ascontiguousarray(self.vecs, dtype=np.float32)
        self.vals = np.ascontiguousarray(self.vals, dtype=np.float64)
        if self.vecs.ndim != 2 or self.vals.shape != (self.vecs.shape[1],):
            raise ValueError(
                f"HistoryStore: vecs must be (dim, capacity) and vals (capacity,), got "
                f"{self.vecs.shape} and {self.vals.shape}"
            )
        if self.norms is None:
            self.norms = column_norms(self.vecs)

    @classmethod
    def empty(cls, capacity: int, dim: int) -> HistoryStore:
        if capacity < 1:
            raise ValueError(f"store capacity must be >= 1, got {capacity}")
        return cls(np.zeros((dim, capacity), np.float32), np.zeros(capacity), 0, np.zeros(capacity))

    @property
    def size(self) -> int:
        return min(self.n, self.vals.shape[0])

    def append(self, vecs: np.ndarray, vals) -> None:
        vecs = np.ascontiguousarray(vecs, dtype=np.float32)
        self.n = store_extend(self.vecs, self.norms, self.vals, self.n, vecs, np.asarray(vals, dtype=float))


class RetrievalPredictor(DurationPredictor):
    """SchedMate's Scheduling Advisor (section 3.1) over a :class:`HistoryStore`.

    ``record`` says what the store keeps for a finished job: ``"actual"`` (its measured
    duration, SchedMate) or ``"configured"`` (its user estimate, i.e. the duration had it run
    to completion: how a config-trained Lucid-style model sees history). ``fallback`` is used
    when nothing in the store reaches ``threshold``: ``"user-estimate"`` or ``"store-mean"``
    (mean of everything stored; user estimate while the store is empty).
    """

    name = "retrieval"

    def __init__(
        self,
        k: int = 3,
        threshold: float = 0.8,
        fields: Sequence[str] = FIELDS,
        weights: dict[str, float] | None = None,
        dim: int = DEFAULT_DIM,
        capacity: int = DEFAULT_STORE_CAPACITY,
        record: str = "actual",
        fallback: str = "user-estimate",
        vectorizer: Vectorizer | None = None,
    ):
        if int(k) != k or k < 1:
            raise ValueError(f"retrieval predictor: k must be an integer >= 1, got {k!r}")
        if not -1.0 <= threshold <= 1.0:
            raise ValueError(f"retrieval predictor: threshold must be in [-1, 1], got {threshold}")
        if record not in ("actual", "configured"):
            raise ValueError(
                f"retrieval predictor: record must be 'actual' or 'configured', got {record!r}"
            )
        if fallback not in ("user-estimate", "store-mean"):
            raise ValueError(
                "retrieval predictor: fallback must be 'user-estimate' or 'store-mean', "
                f"got {fallback!r}"
            )
        self.k = int(k)
        self.threshold = float(threshold)
        self.record = record
        self.fallback = fallback
        self.vectorizer = vectorizer or HashingVectorizer(
            dim=dim, fields=tuple(fields), weights=tuple(sorted((weights or {}).items()))
        )
        self.store = HistoryStore.empty(capacity, self.vectorizer.dim)
        self.last_n_matches = np.zeros(0, dtype=np.int64)

    def observe(self, meta, actual, user_estimate=None) -> None:
        """Add finished jobs to the history (their actual durations are known now)."""
        vals = actual if self.record == "actual" else user_estimate
        self.store.append(self.vectorizer.transform(meta), _as_1d(vals, len(meta), self.record))

    def predict(self, meta, user_estimate=None, actual=None, z=None):
        n = len(meta)
        q = self.vectorizer.transform(meta)
        if self.fallback == "user-estimate" or self.store.size == 0:
            fb = _as_1d(user_estimate, n, "user_estimate")
        else:
            fb = np.full(n, self.store.vals[: self.store.size].mean())
        out = np.empty(n)
        matches = np.zeros(n, dtype=np.int64)
        s = self.store
        for i in range(n):
            out[i], matches[i] = retrieval_predict(
                q[i], s.vecs, s.norms, s.vals, s.n, self.k, self.threshold, fb[i]
            )
        self.last_n_matches = matches
        return out


# Presets, calibrated with the protocol of tests/test_uncertainty_predictors.py: workload
# recurring_jobs(4000, np.random.default_rng(2024)); the first 2000 jobs pre-fill the store
# (warm-up history), the next 2000 are predicted online, each appended once predicted (it
# finishes before the next one arrives). Share within 100 % relative error on that seed:
# schedmate 0.8595 (paper 0.857), metadata-only 0.2775 (paper 0.277). Over seeds 0..5 the
# spread is schedmate 0.83-0.91 and metadata-only 0.26-0.40 (mean 0.34): the template pool
# is itself random, and heavy-tailed means are noisy.
#
# schedmate: k=3 as in SchedMate section 4.3; threshold 0.8 accepts jobs sharing all but
# about one field of seven.
SCHEDMATE_PRESET = dict(k=3, threshold=0.8, fields=FIELDS, record="actual")
# metadata-only: Lucid-like (SchedMate section 4.1: "relies on limited, surface-level
# metadata (e.g., username, job name)"). Two biases make it this bad, each realistic: it
# records configured durations, i.e. assumes every job runs to completion (SchedMate C2), and
# it smooths heavily over loosely similar jobs (k=400, threshold 0: any similarity, zero
# included, so every stored job can be a neighbour), as a
# squared-loss regressor on sparse features does, so its estimates sit near heavy-tailed
# conditional means, far above most jobs' durations.
METADATA_ONLY_PRESET = dict(
    k=400, threshold=0.0, fields=SPARSE_FIELDS, record="configured", fallback="store-mean"
)

PREDICTORS: dict[str, object] = {
    "oracle": OraclePredictor,
    "noisy": NoisyPredictor,
    "user-estimate": UserEstimatePredictor,
    "retrieval": RetrievalPredictor,
    "schedmate": lambda **kw: _preset(RetrievalPredictor, "schedmate", SCHEDMATE_PRESET, kw),
    "metadata-only": lambda **kw: _preset(
        RetrievalPredictor, "metadata-only", METADATA_ONLY_PRESET, kw
    ),
}


def _preset(cls, name: str, preset: dict, overrides: dict) -> DurationPredictor:
    p = cls(**{**preset, **overrides})
    p.name = name
    return p


def make_predictor(name: str, **kwargs) -> DurationPredictor:
    """Build a predictor by name; kwargs go to its constructor (presets: overrides)."""
    try:
        factory = PREDICTORS[name]
    except KeyError:
        raise ValueError(
            f"unknown predictor {name!r}; choose one of: {', '.join(PREDICTORS)}"
        ) from None
    try:
        return factory(**kwargs)
    except TypeError as e:
        raise ValueError(f"predictor {name!r}: bad arguments {sorted(kwargs)}: {e}") from None
