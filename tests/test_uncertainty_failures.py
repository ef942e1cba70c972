"""Failures, checkpoints (SchedMate section 2.1), the Failure Handler (section 3.3, Table 4)
and the Metric Tracker (section 3.2, section 5.4)."""

import math

import numpy as np
import pytest

from geo_gym.uncertainty import failures, handler, tracker


def test_failure_rate_arithmetic():
    assert failures.failure_rate_per_gpu_hour() == pytest.approx(419 / (54 * 24 * 16384))
    assert failures.LLAMA3_RATE_PER_GPU_HOUR == pytest.approx(1.9733e-5, rel=1e-4)
    # The SchedMate paper's "one every three hours" for the whole 16,384-GPU job.
    assert 1 / (failures.LLAMA3_RATE_PER_GPU_HOUR * 16384) == pytest.approx(3.09, abs=0.01)
    with pytest.raises(ValueError):
        failures.failure_rate_per_gpu_hour(days=0)


def test_time_to_failure_scales_with_gpus_and_is_exponential():
    r = 1e-3
    assert failures.time_to_failure(2.0, r, 10) == pytest.approx(200.0)
    assert failures.time_to_failure(1.0, 0.0, 10) == math.inf
    e = failures.draw_failure_exponentials(np.random.default_rng(0), 20000, 2)
    t = np.array([failures.time_to_failure(x, r, 8) for x in e[:, 0]])
    assert t.mean() == pytest.approx(1 / (r * 8), rel=0.03)


@pytest.mark.parametrize(
    "progress, interval, kept",
    [(2.5, 1.0, 2.0), (0.3, 0.1, 0.3), (0.99, 1.0, 0.0), (7.0, 2.0, 6.0), (3.0, 1.5, 3.0),
     (2.5, 0.0, 2.5), (2.5, math.inf, 0.0), (0.0, 1.0, 0.0)],
)
def test_checkpoint_rollback_hand_values(progress, interval, kept):
    got = failures.checkpoint_rollback(progress, interval)
    assert got == pytest.approx(kept)
    assert 0.0 <= progress - got < max(interval, 1e-12) or interval in (0.0, math.inf)


def test_repair_hours_lognormal():
    z = np.random.default_rng(3).standard_normal(20000)
    h = np.array([failures.repair_hours(x, 3.0, 1.0) for x in z])
    assert np.median(h) == pytest.approx(3.0, rel=0.05)
    assert failures.repair_hours(1.7, 3.0, 0.0) == 3.0


def test_recall_from_f1():
    r = handler.recall_from_f1(0.677, 0.757)
    assert r == pytest.approx(0.677 * 0.757 / (2 * 0.757 - 0.677))
    assert 2 * 0.757 * r / (0.757 + r) == pytest.approx(0.677)


def _measure(h: handler.FailureHandler, n: int, base_rate: float, seed: int):
    rng = np.random.default_rng(seed)
    infra = rng.random(n) < base_rate
    u = rng.random(n)
    rec = np.array([h(i, x)[0] for i, x in zip(infra, u, strict=True)])
    tp = np.sum(rec & infra)
    return tp / rec.sum(), tp / infra.sum()


def test_handler_precision_recall_match_table4():
    h = handler.FailureHandler()
    p, r = _measure(h, 60000, handler.TABLE4_BASE_RATE, seed=11)
    assert p == pytest.approx(0.757, abs=0.015)
    assert r == pytest.approx(handler.TABLE4_RECALL, abs=0.015)
    f1 = 2 * p * r / (p + r)
    assert f1 == pytest.approx(0.677, abs=0.015)


def test_handler_delays_and_off_switch():
    h = handler.FailureHandler()
    assert h(True, 0.0) == (True, pytest.approx(10 / 60))
    assert h(True, 0.999) == (False, 2.0)
    off = handler.FailureHandler(enabled=False)
    u = np.random.default_rng(0).random(1000)
    assert all(off(i % 2 == 0, x) == (False, 2.0) for i, x in enumerate(u))


def test_tracker_detection_share_and_noise():
    t = tracker.MetricTracker()  # 0.843, RMSRE 0.42
    rng = np.random.default_rng(8)
    n = 40000
    u, zf, zs = rng.random(n), rng.standard_normal(n), rng.standard_normal(n)
    out = [t(0.5, 2.0, u[i], zf[i], zs[i]) for i in range(n)]
    known = np.array([o[0] for o in out])
    assert known.mean() == pytest.approx(0.843, abs=0.01)
    step = np.array([o[2] for o in out])[known]
    rmsre = np.sqrt(np.mean(((step - 2.0) / 2.0) ** 2))
    assert rmsre == pytest.approx(0.42, rel=0.05)
    frac = np.array([o[1] for o in out])
    assert np.all((frac[known] >= 0) & (frac[known] <= 1)) and np.all(np.isnan(frac[~known]))
    assert tracker.rmsre_of_sigma(tracker.sigma_for_rmsre(0.42)) == pytest.approx(0.42)


def test_tracker_perfect_and_blind():
    perfect = tracker.MetricTracker(detect_prob=1.0, rmsre=0.0)
    assert perfect(0.3, 1.5, 0.99, 2.0, -2.0) == (True, 0.3, 1.5)
    assert perfect(1.0, 1.5, 0.0, 3.0, 0.0)[1] == 1.0  # clipped
    blind = tracker.MetricTracker(detect_prob=0.0)
    assert blind(0.3, 1.5, 0.0, 0.0, 0.0)[0] is False
