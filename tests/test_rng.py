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
