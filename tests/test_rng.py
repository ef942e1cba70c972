"""geo_gym.rng draws numpy's streams bit for bit: states, raw words and every distribution
a compiled reset uses, on fresh generators and on a numpy Generator's own memory."""

import numpy as np
import pytest

from geo_gym import rng

SEEDS = [0, 1, 5, 42, 2**31 - 2, 2**32 - 1, 2**32, 2**40 + 7, 123456789]


def _state(s, b):
    lo_hi = [int(x) for x in s]
    return {"state": lo_hi[0] | lo_hi[1] << 64, "inc": lo_hi[2] | lo_hi[3] << 64,
            "has_uint32": int(b[0]), "uinteger": int(b[1])}


def _numpy_state(g):
    st = g.bit_generator.state
    return {**st["state"], "has_uint32": st["has_uint32"], "uinteger": st["uinteger"]}


@pytest.mark.parametrize("seed", SEEDS)
def test_a_seeded_state_is_default_rngs(seed):
    s, b = rng.seeded(seed)
    assert _state(s, b) == _numpy_state(np.random.default_rng(seed))


def test_raw_words_doubles_and_buffered_halves_follow_numpy():
    s, b = rng.seeded(7)
    g = np.random.default_rng(7)
    assert [int(rng.next_uint64(s)) for _ in range(50)] == g.bit_generator.random_raw(50).tolist()
    assert [rng.next_double(s) for _ in range(50)] == g.random(50).tolist()
    assert _state(s, b) == _numpy_state(g)


@pytest.mark.parametrize("low,high", [(0, 3), (0, 2**31 - 1), (3, 7), (0, 1), (-5, 2**32 - 5), (0, 2**32)])
def test_bounded_integers_follow_numpy_scalar_and_array(low, high):
    s, b = rng.seeded(11)
    g = np.random.default_rng(11)
    ours = [rng.bounded(s, b, low, high) for _ in range(40)]
    assert ours[:20] == g.integers(low, high, size=20).tolist()
    assert ours[20:] == [int(g.integers(low, high)) for _ in range(20)]
    # the buffered half of a 64-bit draw carries over to the next 32-bit draw, and to the state
    assert _state(s, b) == _numpy_state(g)


def test_bounded_refuses_a_range_it_does_not_implement():
    s, b = rng.seeded(0)
    with pytest.raises(ValueError, match="beyond 2\\*\\*32"):
        rng.bounded(s, b, 0, 2**33)


@pytest.mark.parametrize("seed", [0, 3, 99])
def test_continuous_distributions_follow_numpy(seed):
    n = 3000  # enough for the ziggurats' rare branches (about 1 in 100 draws)
    s, b = rng.seeded(seed)
    g = np.random.default_rng(seed)
    assert [rng.standard_normal(s) for _ in range(n)] == g.standard_normal(n).tolist()
    assert [rng.standard_exponential(s) for _ in range(n)] == g.standard_exponential(n).tolist()
    for shape in (0.3, 0.7, 1.0, 2.0, 5.5):
        assert [rng.standard_gamma(s, shape) for _ in range(500)] == g.standard_gamma(shape, 500).tolist()
    assert [rng.beta(s, 0.7, 2.0) for _ in range(n)] == g.beta(0.7, 2.0, n).tolist()
    assert [rng.uniform(s, 0.9, 1.1) for _ in range(n)] == g.uniform(0.9, 1.1, n).tolist()
    assert [rng.lognormal(s, 0.0, 0.25) for _ in range(n)] == g.lognormal(0.0, 0.25, n).tolist()
    assert _state(s, b) == _numpy_state(g)


def test_beta_refuses_johnks_case():
    s, _ = rng.seeded(0)
    with pytest.raises(ValueError, match="Johnk"):
        rng.beta(s, 0.5, 0.5)


def test_state_arrays_advance_the_generator_python_sees():
    g = np.random.default_rng(21)
    twin = np.random.default_rng(21)
    g.integers(0, 5)  # leaves a buffered half: the views must carry it
    twin.integers(0, 5)
    s, b = rng.state_arrays(g)
    ours = [rng.bounded(s, b, 0, 9) for _ in range(5)] + [rng.next_double(s) for _ in range(5)]
    assert ours == twin.integers(0, 9, size=5).tolist() + twin.random(5).tolist()
    assert g.random(4).tolist() == twin.random(4).tolist()  # numpy goes on from where we left it


def test_state_arrays_refuse_another_bit_generator():
    with pytest.raises(ValueError, match="PCG64"):
        rng.state_arrays(np.random.Generator(np.random.MT19937(0)))


def _numpy_recurring(seed, n, mean, t_p_early, t_end, t_epochs):
    """recurring's job stream as numpy's Generator draws it (the scenario's former code)."""
    g = np.random.default_rng(seed)
    arrivals = np.concatenate([[0.0], np.cumsum(g.exponential(mean, size=n - 1))])
    tmpl, fate, epochs = [], np.ones(n), []
    for i in range(n):
        t = int(g.integers(0, len(t_p_early)))
        tmpl.append(t)
        if g.random() < t_p_early[t]:
            fate[i] = min(max(t_end[t] * g.lognormal(0.0, 0.25), 0.01), 1.0)
        epochs.append(t_epochs[t] * g.uniform(0.9, 1.1))
    return arrivals.tolist(), tmpl, fate.tolist(), epochs


@pytest.mark.parametrize("seed", [0, 7, 2**31 - 2, 2**63 + 5])
def test_the_built_in_workloads_draw_numpys_numbers(seed):
    from geo_gym import scenarios

    g = np.random.default_rng(seed)
    picks = scenarios._paper_picks(*rng.generator_state(seed), 24, 3)
    assert picks.tolist() == g.integers(0, 3, size=24).tolist()
    t_model, t_data, t_epochs, t_p_early, t_end = scenarios._templates(0, 18, 0.45)
    for mean in (1800.0, 0.0):
        for n in (1, 2, 60):
            ours = scenarios._recurring_jobs(*rng.generator_state(seed), n, mean, t_p_early, t_end, t_epochs)
            assert [a.tolist() for a in ours] == list(_numpy_recurring(seed, n, mean, t_p_early, t_end, t_epochs))


def test_generator_state_refuses_what_numpy_refuses():
    with pytest.raises(ValueError):
        rng.generator_state(-1)
