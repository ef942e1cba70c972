"""Duration predictors (SchedMate section 3.1, Fig. 12) and job-metadata vectors."""

import numpy as np
import pytest

from geo_gym.uncertainty.metadata import SPARSE_FIELDS, JobMetadata, vectorize
from geo_gym.uncertainty.predictors import (
    PREDICTORS,
    HistoryStore,
    cosine_similarities,
    error_cdf,
    make_predictor,
    retrieval_estimate,
    retrieval_predict,
    store_append,
)
from geo_gym.uncertainty.workload import recurring_jobs

CALIBRATION_SEED = 2024
N_WARM, N_EVAL = 2000, 2000


def _online_cdf(name: str) -> float:
    """The calibration protocol of the presets (predictors.py): the first N_WARM jobs of the
    seeded default workload pre-fill the history store; each of the next N_EVAL jobs is
    predicted, then appended (it finishes before the next one arrives)."""
    wl = recurring_jobs(N_WARM + N_EVAL, np.random.default_rng(CALIBRATION_SEED))
    warm, ev = wl.split(N_WARM)
    p = make_predictor(name)
    p.observe(warm.meta, warm.actual, warm.user_estimate)
    pred = np.empty(len(ev))
    for i in range(len(ev)):
        s = slice(i, i + 1)
        pred[i] = p.predict(ev.meta[s], ev.user_estimate[s])[0]
        p.observe(ev.meta[s], ev.actual[s], ev.user_estimate[s])
    return float(error_cdf(pred, ev.actual, [1.0])[0])


def test_schedmate_preset_error_cdf():
    assert _online_cdf("schedmate") == pytest.approx(0.86, abs=0.05)  # paper: 0.857


def test_metadata_only_preset_error_cdf():
    assert _online_cdf("metadata-only") == pytest.approx(0.28, abs=0.06)  # paper: 0.277


def test_error_cdf_hand_values():
    pred = np.array([1.0, 3.0, 0.1, 1.5])
    actual = np.array([1.0, 1.0, 1.0, 1.0])
    np.testing.assert_allclose(error_cdf(pred, actual, [0.0, 0.5, 1.0, 2.0]), [0.25, 0.5, 0.75, 1])
    with pytest.raises(ValueError):
        error_cdf(pred, np.zeros(4), [1.0])


def _meta(i, **kw):
    base = dict(family="llama", size_b=7.0, dataset="c4", task="sft", user="alice", gpus=8,
                name=f"alice-ft-{i}")
    base.update(kw)
    return JobMetadata(**base)


def test_retrieval_finds_planted_similar_jobs():
    planted = [_meta(i) for i in range(3)]
    unrelated = [
        _meta(10 + i, family=f, size_b=s, dataset=d, task=t, user=u, gpus=g, name=f"{u}-x-{i}")
        for i, (f, s, d, t, u, g) in enumerate([
            ("gpt", 0.35, "pile", "pretrain", "bob", 1),
            ("qwen", 32.0, "alpaca", "dpo", "carol", 64),
            ("bloom", 3.0, "wikitext", "pretrain", "dave", 2),
            ("mistral", 12.0, "sharegpt", "continued-pretrain", "erin", 32),
        ])
    ]
    store = planted + unrelated
    vals = np.array([10.0, 12.0, 14.0, 100.0, 200.0, 300.0, 400.0])
    vecs = vectorize(store)
    cap = 16
    sv, norms, sval, n = np.zeros((vecs.shape[1], cap), np.float32), np.zeros(cap), np.zeros(cap), 0
    for v, x in zip(vecs, vals, strict=True):
        n = store_append(sv, norms, sval, n, v, x)
    q = vectorize([_meta(99)])[0]
    est, m = retrieval_estimate(q, sv, norms, sval, n, 3, 0.8)
    assert m == 3 and est == pytest.approx(12.0)
    # Same through the Python class.
    p = make_predictor("retrieval", k=3, threshold=0.8)
    p.observe(store, vals)
    assert p.predict([_meta(99)], np.array([5.0]))[0] == pytest.approx(12.0)
    assert p.last_n_matches[0] == 3


def test_retrieval_falls_back_when_nothing_is_similar():
    vecs = vectorize([_meta(0)])
    sv, norms, sval = np.zeros((vecs.shape[1], 4), np.float32), np.zeros(4), np.zeros(4)
    n = store_append(sv, norms, sval, 0, vecs[0], 10.0)
    q = vectorize([_meta(1, family="gpt", size_b=0.35, dataset="pile", task="pretrain",
                         user="bob", gpus=1, name="bob-x-1")])[0]
    est, m = retrieval_estimate(q, sv, norms, sval, n, 3, 0.8)
    assert m == 0 and np.isnan(est)
    assert retrieval_predict(q, sv, norms, sval, n, 3, 0.8, 42.0) == (42.0, 0)
    assert retrieval_estimate(q, sv, norms, sval, 0, 3, -1.0)[1] == 0  # empty store
    p = make_predictor("schedmate")
    assert p.predict([_meta(1)], np.array([7.5]))[0] == 7.5  # empty store -> user estimate
    assert p.last_n_matches[0] == 0


def _random_store(rng, rows, dim=16):
    """A HistoryStore of sparse vectors with repeated rows (tied similarities), as hashed
    metadata gives: a few templates, each stored many times."""
    templates = rng.normal(size=(6, dim)) * (rng.random((6, dim)) < 0.3)
    store = HistoryStore.empty(rows + 3, dim)  # rows + 3: the ring does not wrap
    store.append(templates[rng.integers(0, 6, rows)], rng.exponential(50.0, rows))
    return store, templates


def test_cosine_similarities_are_those_of_the_full_vectors():
    rng = np.random.default_rng(0)
    s, templates = _random_store(rng, 40)
    for q in [templates[2], rng.normal(size=16), np.zeros(16)]:
        q = q.astype(np.float32)
        vecs, q64 = s.vecs.T.astype(float), q.astype(float)
        full = vecs @ q64 / np.maximum(np.linalg.norm(vecs, axis=1) * np.linalg.norm(q64), 1e-300)
        np.testing.assert_allclose(cosine_similarities(q, s.vecs, s.norms, s.n), full[: s.n], atol=1e-12)


@pytest.mark.parametrize("k", [1, 3, 16, 17, 40])
def test_top_k_takes_the_most_similar_ties_to_the_lower_row(k):
    # Either branch (one pass for k <= 16, a stable sort above) must equal this reference,
    # to the bit: rows by similarity, then row, above the threshold, summed in that order.
    rng = np.random.default_rng(k)
    for trial in range(20):
        s, templates = _random_store(rng, int(rng.integers(1, 60)))
        q = (templates[trial % 6] + (trial % 3) * 0.1 * rng.normal(size=16)).astype(np.float32)
        thr = float(rng.choice([-1.0, 0.0, 0.5, 0.9]))
        sims = cosine_similarities(q, s.vecs, s.norms, s.n)
        taken = [i for i in sorted(range(s.n), key=lambda i: (-sims[i], i)) if sims[i] >= thr][:k]
        total = 0.0
        for i in taken:
            total += s.vals[i]
        est, m = retrieval_estimate(q, s.vecs, s.norms, s.vals, s.n, k, thr)
        assert m == len(taken)
        assert (np.isnan(est) and not taken) or est == total / m


def test_store_is_a_ring_buffer():
    s = HistoryStore.empty(capacity=3, dim=4)
    s.append(np.eye(4, dtype=np.float32), [1.0, 2.0, 3.0, 4.0])
    assert s.n == 4 and s.size == 3
    np.testing.assert_array_equal(s.vals, [4.0, 2.0, 3.0])  # the oldest (1.0) overwritten


def test_oracle_exact_and_noisy_statistics():
    rng = np.random.default_rng(5)
    n = 20000
    actual = rng.lognormal(1.0, 1.0, n)
    meta = [None] * n
    np.testing.assert_array_equal(make_predictor("oracle").predict(meta, actual=actual), actual)
    z = rng.standard_normal(n)
    sigma = 0.6
    pred = make_predictor("noisy", sigma=sigma).predict(meta, actual=actual, z=z)
    log_ratio = np.log(pred / actual)
    assert np.median(np.exp(log_ratio)) == pytest.approx(1.0, abs=0.03)
    assert log_ratio.std() == pytest.approx(sigma, rel=0.03)


def test_user_estimate_is_blind_to_early_termination():
    wl = recurring_jobs(3000, np.random.default_rng(1))
    pred = make_predictor("user-estimate").predict(wl.meta, wl.user_estimate, wl.actual)
    np.testing.assert_array_equal(pred, wl.user_estimate)
    early = wl.fate == 1
    # Tracks the full work, so early-ending jobs are overestimated by 1 / fate_fraction.
    ratio = pred / wl.true_work
    assert np.median(ratio[early]) == pytest.approx(np.median(ratio[~early]), abs=0.02)
    assert np.median(pred[early] / wl.actual[early]) > 3.0


def test_make_predictor_errors_list_names():
    with pytest.raises(ValueError, match="oracle.*noisy.*user-estimate.*retrieval"):
        make_predictor("magic")
    for bad in (-1, float("inf"), float("nan"), 400.0):  # inf and 400 gave NaN observations
        with pytest.raises(ValueError, match=r"sigma must be in \[0, 10\]"):
            make_predictor("noisy", sigma=bad)
    with pytest.raises(ValueError, match="noisy"):
        make_predictor("noisy", bogus=1)
    assert set(PREDICTORS) >= {"oracle", "noisy", "user-estimate", "retrieval", "schedmate",
                               "metadata-only"}


def test_vectorize_is_deterministic_normalised_and_bucketed():
    a = vectorize([_meta(0), _meta(1, size_b=8.0), _meta(2, size_b=70.0)])
    assert a.dtype == np.float32 and a.shape == (3, 64)
    np.testing.assert_allclose(np.linalg.norm(a, axis=1), 1.0, rtol=1e-6)
    np.testing.assert_array_equal(a, vectorize([_meta(0), _meta(1, size_b=8.0),
                                                _meta(2, size_b=70.0)]))
    assert a[0] @ a[1] > a[0] @ a[2]  # 7B is nearer 8B than 70B
    sparse = vectorize([_meta(0), _meta(1, family="gpt")], fields=SPARSE_FIELDS)
    assert sparse[0] @ sparse[1] == pytest.approx(1.0, abs=1e-6)  # family not in the subset
    with pytest.raises(ValueError, match="unknown metadata field"):
        vectorize([_meta(0)], fields=("colour",))


def test_history_store_from_arrays_knows_its_norms_and_checks_its_layout():
    rng = np.random.default_rng(3)
    s, _ = _random_store(rng, 30)
    rebuilt = HistoryStore(s.vecs.copy(), s.vals.copy(), s.n)  # norms computed, not given
    np.testing.assert_array_equal(rebuilt.norms, s.norms)  # as store_append kept them
    q = s.vecs[:, 4].copy()
    assert retrieval_estimate(q, rebuilt.vecs, rebuilt.norms, rebuilt.vals, rebuilt.n, 3, 0.5) == \
        retrieval_estimate(q, s.vecs, s.norms, s.vals, s.n, 3, 0.5)
    with pytest.raises(ValueError, match=r"\(dim, capacity\)"):
        HistoryStore(s.vecs.T.copy(), s.vals, s.n)  # one row per job: the old layout
