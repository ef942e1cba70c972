"""UncertaintyConfig, per-episode random draws and the recurring workload."""

import numpy as np
import pytest

from geo_gym.uncertainty import UncertaintyConfig, draw_episode, recurring_jobs
from geo_gym.uncertainty.failures import LLAMA3_RATE_PER_GPU_HOUR


def test_default_is_the_perfect_world():
    c = UncertaintyConfig()
    assert c == UncertaintyConfig.preset("perfect")
    assert c.predictor == "oracle" and c.early_end_rate == 0 and c.failure_rate_per_gpu_hour == 0
    assert c.tracker_detect_prob == 1.0 and c.tracker_sigma() == 0.0


def test_presets():
    r = UncertaintyConfig.preset("realistic")
    s = UncertaintyConfig.preset("schedmate")
    assert r.predictor == "user-estimate" and not r.handler and r.tracker_detect_prob == 0
    assert s.predictor == "schedmate" and s.handler and s.tracker_detect_prob == 0.843
    assert r.failure_rate_per_gpu_hour == s.failure_rate_per_gpu_hour == LLAMA3_RATE_PER_GPU_HOUR
    assert s.make_predictor().name == "schedmate"
    tpr, fpr = s.handler_operating_point()
    assert tpr == pytest.approx(0.6123, abs=1e-4) and fpr == pytest.approx(0.0655, abs=1e-4)
    assert UncertaintyConfig.preset("schedmate", handler=False).handler is False
    with pytest.raises(ValueError, match="perfect"):
        UncertaintyConfig.preset("utopia")
    with pytest.raises(ValueError, match="colour"):
        UncertaintyConfig.preset("perfect", colour=1)


@pytest.mark.parametrize(
    "field, value",
    [("predictor", "magic"), ("early_end_rate", 1.5), ("failure_rate_per_gpu_hour", -1.0),
     ("repair_median_hours", float("nan")), ("tracker_detect_prob", -0.1),
     ("tracker_rmsre", -1.0), ("handler_precision", 0.0), ("handler_recall", 1.5),
     ("handler_base_rate", 1.0), ("manual_delay_hours", -2.0), ("gpus_per_failure", 0),
     ("max_attempts", 1.5), ("handler", 1), ("checkpoint_interval_hours", float("nan")),
     ("predictor_kwargs", {"sigma": -1.0})],
)
def test_validation_names_the_field(field, value):
    kw = {field: value}
    if field == "predictor_kwargs":
        kw["predictor"] = "noisy"
    with pytest.raises(ValueError, match=field):
        UncertaintyConfig(**kw)


def test_same_seed_same_draws():
    unc = UncertaintyConfig.preset("schedmate", tracker_detect_prob=0.5)
    za, a = draw_episode(np.random.default_rng(7), unc, 50, 4)
    zb, b = draw_episode(np.random.default_rng(7), unc, 50, 4)
    zc, c = draw_episode(np.random.default_rng(7), unc, 50, 8)  # more attempts: earlier ones unchanged
    np.testing.assert_array_equal(za, zb)
    np.testing.assert_array_equal(za, zc)
    for name in a._fields:
        np.testing.assert_array_equal(getattr(a, name), getattr(b, name))
        if getattr(a, name).ndim == 2:  # per attempt
            np.testing.assert_array_equal(getattr(a, name), getattr(c, name)[:, :4])
        else:
            np.testing.assert_array_equal(getattr(a, name), getattr(c, name))
    assert not np.array_equal(za, draw_episode(np.random.default_rng(8), unc, 50, 4)[0])
    # each source has its own child generator: switching the tracker off changes no failure
    _, off = draw_episode(np.random.default_rng(7), unc.replace(tracker_detect_prob=1.0), 50, 4)
    np.testing.assert_array_equal(a.failure_draws, off.failure_draws)
    assert off.tracker_sees.all() and not a.tracker_sees.all()
    w1 = recurring_jobs(300, np.random.default_rng(3))
    w2 = recurring_jobs(300, np.random.default_rng(3))
    assert w1.meta == w2.meta
    np.testing.assert_array_equal(w1.actual, w2.actual)


def test_recurring_workload_fates():
    wl = recurring_jobs(4000, np.random.default_rng(0))
    assert wl.fate.mean() == pytest.approx(0.45, abs=0.03)
    early = wl.fate == 1
    assert np.all(wl.fate_fraction[~early] == 1.0)
    assert np.all((wl.fate_fraction[early] > 0) & (wl.fate_fraction[early] < 1))
    assert np.median(wl.fate_fraction[early]) < 0.35  # skewed to early failures
    np.testing.assert_allclose(wl.actual, wl.true_work * wl.fate_fraction)
    assert np.median(np.abs(np.log(wl.user_estimate / wl.true_work))) < 0.1
    # Recurring: far fewer distinct templates than jobs.
    assert len(np.unique(wl.template)) < 150
    assert recurring_jobs(500, np.random.default_rng(0), early_end_rate=0.0).fate.sum() == 0
    with pytest.raises(ValueError, match="early_end_rate"):
        recurring_jobs(10, np.random.default_rng(0), early_end_rate=2.0)
