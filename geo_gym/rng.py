"""numpy's PCG64 ``Generator`` in compiled code, bit for bit: the same streams, without
numpy's Python around each draw.

An episode's reset draws a few dozen numbers through half a dozen numpy calls (a fresh
``default_rng(seed)`` for the workload, bounded integers, uniforms, Beta end points), and
numpy's Python around those calls costs more than the draws. The functions here are numpy's
C algorithms (numpy/random/src: ``pcg64.h``, ``distributions.c``, ``bit_generator.pyx``'s
SeedSequence) written again for numba, so that a reset can draw in one compiled call and
every seeded number stays what it was (tests/test_rng.py compares each against numpy,
state included).

A generator's state is two small arrays: ``s`` (uint64[4]: the 128-bit LCG state and
increment, low word first) and ``b`` (uint32[2]: PCG64's buffered half of a 64-bit draw,
which ``next_uint32`` hands out first). ``state_arrays(generator)`` returns views of a
numpy ``Generator``'s own memory, so that compiled draws advance the very generator Python
sees (the env's ``np_random``); ``seeded(seed)`` builds fresh ones as ``default_rng(seed)``
does. numba's own ``Generator`` support reads the same memory, but unboxes it at every call
(about 6 us), longer than a reset's draws.
"""

from __future__ import annotations

import ctypes

import numba
import numpy as np

# numpy's ziggurat tables and constants (numpy/random/src/distributions/ziggurat_constants.h),
# as numba ships them for its own Generator support
from numba.np.random import _constants as _zig

_U = np.uint64
# Draws take only the state arrays and allocate nothing: compiled without numba's reference
# counting (``_nrt=False``), which costs more than a draw itself (docs/performance.md).
_leaf = numba.njit(cache=True, _nrt=False)
_M32 = _U(0xFFFFFFFF)
_S11, _S32, _S58, _S63 = _U(11), _U(32), _U(58), _U(63)
_MULT_HI, _MULT_LO = _U(0x2360ED051FC65DA4), _U(0x4385DF649FCCF645)  # PCG_DEFAULT_MULTIPLIER_128
_TO_DOUBLE = 1.0 / 9007199254740992.0  # 2**-53

_KI, _WI, _FI = _zig.ki_double, _zig.wi_double, _zig.fi_double
_KE, _WE, _FE = _zig.ke_double, _zig.we_double, _zig.fe_double
_NOR_R, _NOR_INV_R, _EXP_R = _zig.ziggurat_nor_r, _zig.ziggurat_nor_inv_r, _zig.ziggurat_exp_r

# SeedSequence's hash constants (numpy/random/bit_generator.pyx)
_INIT_A, _MULT_A = _U(0x43B0D7E5), _U(0x931E8875)
_INIT_B, _MULT_B = _U(0x8B51F9DD), _U(0x58F38DED)
_MIX_L, _MIX_R = _U(0xCA01F9DD), _U(0x4973F715)
_XSHIFT = _U(16)
_POOL = 4


# ------------------------------------------------------------------------------ PCG64 (pcg64.h)
@numba.njit(inline="always")
def _mul_full(a, b):
    """(high, low) words of the 128-bit product of two uint64."""
    a_lo, a_hi, b_lo, b_hi = a & _M32, a >> _S32, b & _M32, b >> _S32
    p0, p1, p2, p3 = a_lo * b_lo, a_lo * b_hi, a_hi * b_lo, a_hi * b_hi
    mid = (p0 >> _S32) + (p1 & _M32) + (p2 & _M32)
    return p3 + (p1 >> _S32) + (p2 >> _S32) + (mid >> _S32), (p0 & _M32) | (mid << _S32)


@numba.njit(inline="always")
def _step(s):
    """One LCG step, state = state x multiplier + increment (mod 2**128)."""
    hi, lo = _mul_full(s[0], _MULT_LO)
    hi = hi + s[0] * _MULT_HI + s[1] * _MULT_LO
    lo2 = lo + s[2]
    s[0] = lo2
    s[1] = hi + s[3] + (_U(1) if lo2 < lo else _U(0))


@_leaf
def next_uint64(s):
    """PCG64's output: step, then XSL-RR of the new state."""
    _step(s)
    x = s[1] ^ s[0]
    rot = s[1] >> _S58
    return (x >> rot) | (x << ((_U(64) - rot) & _S63))


@_leaf
def next_uint32(s, b):
    """PCG64's 32-bit draw: the low half of a 64-bit draw, the high half kept for the next."""
    if b[0]:
        b[0] = 0
        return b[1]
    x = next_uint64(s)
    b[0] = 1
    b[1] = np.uint32(x >> _S32)
    return np.uint32(x & _M32)


@_leaf
def next_double(s):
    """``Generator.random()``: 53 random bits in [0, 1)."""
    return np.float64(next_uint64(s) >> _S11) * _TO_DOUBLE


@_leaf
def _set_seed(s, b, w):
    """``pcg64_set_seed`` from SeedSequence's four words ``w`` (seed high, low; inc high, low)."""
    s[0], s[1] = _U(0), _U(0)
    s[2], s[3] = (w[3] << _U(1)) | _U(1), (w[2] << _U(1)) | (w[3] >> _S63)  # inc = initseq << 1 | 1
    _step(s)
    lo = s[0] + w[1]
    s[1] = s[1] + w[0] + (_U(1) if lo < s[0] else _U(0))
    s[0] = lo
    _step(s)
    b[0], b[1] = 0, 0


# ---------------------------------------------------------- SeedSequence (bit_generator.pyx)
@numba.njit(inline="always")
def _hashmix(value, hash_const):
    value = (value ^ hash_const[0]) & _M32
    hash_const[0] = (hash_const[0] * _MULT_A) & _M32
    value = (value * hash_const[0]) & _M32
    return value ^ (value >> _XSHIFT)


@numba.njit(inline="always")
def _mix(x, y):
    r = (_MIX_L * x - _MIX_R * y) & _M32
    return r ^ (r >> _XSHIFT)


@numba.njit(cache=True)
def _seed_words(seed):
    """``SeedSequence(seed).generate_state(4, np.uint64)`` of an int seed >= 0."""
    entropy = np.zeros(max(_POOL, 2), np.uint64)
    n = 1
    entropy[0] = _U(seed) & _M32
    if _U(seed) >> _S32:
        entropy[1] = _U(seed) >> _S32
        n = 2
    hc = np.array([_INIT_A])
    pool = np.empty(_POOL, np.uint64)
    for i in range(_POOL):
        pool[i] = _hashmix(entropy[i] if i < n else _U(0), hc)
    for i_src in range(_POOL):
        for i_dst in range(_POOL):
            if i_src != i_dst:
                pool[i_dst] = _mix(pool[i_dst], _hashmix(pool[i_src], hc))
    h = _INIT_B
    words = np.empty(8, np.uint64)
    for i in range(8):
        v = pool[i % _POOL] ^ h
        h = (h * _MULT_B) & _M32
        v = (v * h) & _M32
        words[i] = v ^ (v >> _XSHIFT)
    out = np.empty(4, np.uint64)
    for i in range(4):  # uint32 pairs read as little-endian uint64, as numpy's view is
        out[i] = words[2 * i] | (words[2 * i + 1] << _S32)
    return out


@numba.njit(cache=True)
def seeded(seed):
    """(s, b) of ``np.random.default_rng(seed)`` for an int seed >= 0."""
    s = np.empty(4, np.uint64)
    b = np.empty(2, np.uint32)
    _set_seed(s, b, _seed_words(seed))
    return s, b


# ------------------------------------------------------------ distributions (distributions.c)
@_leaf
def bounded(s, b, low, high):
    """``Generator.integers(low, high)`` (int64, high exclusive, high > low): Lemire's method
    on 32-bit draws when the range fits in 32 bits (every caller here), as numpy's
    ``random_bounded_uint64_fill``; larger ranges (numpy's 64-bit Lemire) raise."""
    rng = _U(high - low - 1)
    if rng == _U(0):
        return low
    if rng == _M32:
        return low + np.int64(next_uint32(s, b))
    if rng > _M32:
        raise ValueError("rng.bounded: ranges beyond 2**32 are not implemented")
    excl = rng + _U(1)
    m = _U(next_uint32(s, b)) * excl
    leftover = m & _M32
    if leftover < excl:
        threshold = (_M32 - rng) % excl
        while leftover < threshold:
            m = _U(next_uint32(s, b)) * excl
            leftover = m & _M32
    return low + np.int64(m >> _S32)


@_leaf
def standard_normal(s):
    """``random_standard_normal``: the ziggurat with numpy's tables."""
    while True:
        r = next_uint64(s)
        idx = r & _U(0xFF)
        r >>= _U(8)
        rabs = (r >> _U(1)) & _U(0x000FFFFFFFFFFFFF)
        x = np.float64(rabs) * _WI[idx]
        if r & _U(1):
            x = -x
        if rabs < _KI[idx]:
            return x
        if idx == 0:
            while True:
                xx = -_NOR_INV_R * np.log1p(-next_double(s))
                yy = -np.log1p(-next_double(s))
                if yy + yy > xx * xx:
                    return -(_NOR_R + xx) if (rabs >> _U(8)) & _U(1) else _NOR_R + xx
        elif (_FI[idx - _U(1)] - _FI[idx]) * next_double(s) + _FI[idx] < np.exp(-0.5 * x * x):
            return x


@_leaf
def standard_exponential(s):
    """``random_standard_exponential``: the ziggurat with numpy's tables."""
    while True:
        ri = next_uint64(s) >> _U(3)
        idx = ri & _U(0xFF)
        ri >>= _U(8)
        x = np.float64(ri) * _WE[idx]
        if ri < _KE[idx]:
            return x
        if idx == 0:
            return _EXP_R - np.log1p(-next_double(s))
        if (_FE[idx - _U(1)] - _FE[idx]) * next_double(s) + _FE[idx] < np.exp(-x):
            return x


@_leaf
def standard_gamma(s, shape):
    """``random_standard_gamma``: Marsaglia and Tsang above shape 1, numpy's rejection below."""
    if shape == 1.0:
        return standard_exponential(s)
    if shape == 0.0:
        return 0.0
    if shape < 1.0:
        while True:
            u = next_double(s)
            v = standard_exponential(s)
            if u <= 1.0 - shape:
                x = u ** (1.0 / shape)
                if x <= v:
                    return x
            else:
                y = -np.log((1.0 - u) / shape)
                x = (1.0 - shape + shape * y) ** (1.0 / shape)
                if x <= v + y:
                    return x
    b = shape - 1.0 / 3.0
    c = 1.0 / np.sqrt(9.0 * b)
    while True:
        while True:
            x = standard_normal(s)
            v = 1.0 + c * x
            if v > 0.0:
                break
        v = v * v * v
        u = next_double(s)
        if u < 1.0 - 0.0331 * (x * x) * (x * x):
            return b * v
        if np.log(u) < 0.5 * x * x + b * (1.0 - v + np.log(v)):
            return b * v


@_leaf
def beta(s, a, b):
    """``random_beta`` for a or b above 1 (the ratio of two gammas); Johnk's algorithm, which
    numpy uses when both are at most 1, is not implemented."""
    if a <= 1.0 and b <= 1.0:
        raise ValueError("rng.beta: a <= 1 and b <= 1 (Johnk's algorithm) is not implemented")
    ga = standard_gamma(s, a)
    gb = standard_gamma(s, b)
    return ga / (ga + gb)


@_leaf
def uniform(s, low, high):
    """``Generator.uniform(low, high)``: low + (high - low) x U."""
    return low + (high - low) * next_double(s)


@_leaf
def lognormal(s, mean, sigma):
    """``Generator.lognormal(mean, sigma)``: exp(mean + sigma x N(0, 1))."""
    return np.exp(mean + sigma * standard_normal(s))


# ------------------------------------------------------------------ a numpy Generator's memory
def state_arrays(generator: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """(s, b): views of ``generator``'s PCG64 state (``pcg64_state`` and the 128-bit
    ``pcg64_random_t`` it points to), so that compiled draws advance it. The views do not keep
    the generator alive: hold both. A ValueError for another bit generator or a memory layout
    other than the one checked here (x86-64 and aarch64 builds with 128-bit integers)."""
    bitgen = generator.bit_generator
    if type(bitgen) is not np.random.PCG64:
        raise ValueError(f"rng.state_arrays needs a PCG64 generator, got {type(bitgen).__name__}")
    address = bitgen.ctypes.state_address
    pointer = ctypes.c_void_p.from_address(address).value
    s = np.ctypeslib.as_array((ctypes.c_uint64 * 4).from_address(pointer))
    b = np.ctypeslib.as_array((ctypes.c_uint32 * 2).from_address(address + ctypes.sizeof(ctypes.c_void_p)))
    state = bitgen.state
    mask = (1 << 64) - 1
    expected = [state["state"]["state"] & mask, state["state"]["state"] >> 64,
                state["state"]["inc"] & mask, state["state"]["inc"] >> 64]
    if s.tolist() != expected or b.tolist() != [state["has_uint32"], state["uinteger"]]:
        raise ValueError("rng.state_arrays: this numpy build lays PCG64's state out differently")
    return s, b


def generator_state(seed) -> tuple[np.ndarray, np.ndarray]:
    """(s, b) of ``np.random.default_rng(seed)``: compiled for an int in [0, 2**63), numpy's
    own SeedSequence for any other seed (its errors for a bad one)."""
    if isinstance(seed, int | np.integer) and not isinstance(seed, bool) and 0 <= seed < 2**63:
        return seeded(int(seed))
    s = np.empty(4, np.uint64)
    b = np.empty(2, np.uint32)
    _set_seed(s, b, np.random.SeedSequence(seed).generate_state(4, np.uint64))
    return s, b
