"""Elementwise activations and their derivatives: GELU (tanh and erf forms) and SiLU.

GELU(x) = x * Phi(x), Phi the standard normal CDF (Hendrycks & Gimpel 2016). GPT-2 uses the tanh
approximation; nanoGPT (torch.nn.GELU) uses the exact erf form. NumPy has no erf: in float64 we call
math.erf per element (exact to the last bit, slow); in float32 we use Abramowitz & Stegun 7.1.26,
whose error (<= 1.5e-7) is below float32's own rounding, at NumPy speed.
"""

import math

import numpy as np

from zerollm.engine import accelerated
from zerollm.engine.caches import ActCache
from zerollm.engine.memory import cache_blocks, empty_apart

_SQRT_2_OVER_PI = math.sqrt(2.0 / math.pi)
_GELU_C = 0.044715
_MINUS_2_SQRT_2_OVER_PI = -2.0 * _SQRT_2_OVER_PI
_erf_exact = np.frompyfunc(math.erf, 1, 1)
_AS_P = 0.3275911
_AS_A = (0.254829592, -0.284496736, 1.421413741, -1.453152027, 1.061405429)


def erf(x):
    """erf elementwise, keeping the dtype: exact for float64, Abramowitz & Stegun 7.1.26 for float32.

    A&S 7.1.26: erf(|x|) = 1 - (a1 t + a2 t^2 + a3 t^3 + a4 t^4 + a5 t^5) exp(-x^2), t = 1 / (1 + p |x|).
    """
    if x.dtype != np.float32:
        return _erf_exact(x).astype(x.dtype)
    ax = np.abs(x)
    t = 1.0 / (1.0 + np.float32(_AS_P) * ax)
    poly = np.float32(_AS_A[4])
    for a in _AS_A[3::-1]:                       # Horner: ((a5 t + a4) t + a3) t ...
        poly = poly * t + np.float32(a)
    poly *= t
    y = 1.0 - poly * np.exp(-ax * ax)
    return np.copysign(y, x)


# ----------------------------------------------------------------------------
# GELU, tanh approximation (GPT-2's "gelu_new")

@accelerated
def gelu_tanh_forward(x):
    """y = 0.5 x (1 + tanh(u)),  u = sqrt(2/pi) (x + 0.044715 x^3).

    Computed as y = x * s with s = sigmoid(2u), since 0.5 (1 + tanh(u)) = 1 / (1 + exp(-2u)):
    the same function, but exp is about twice as fast as tanh in NumPy. Speed: in-place steps on
    one buffer (``0.5 * x * (1 + tanh(...))`` in one expression would allocate an array per operator),
    block by block, so that a block's seven steps run in the CPU cache (engine.memory.cache_blocks).
    """
    x = np.ascontiguousarray(x)
    y, s = _gelu_tanh(x)
    return y, ActCache(x, s)                         # s is kept for the backward


def _gelu_tanh(x):
    y = empty_apart(x.shape, x, dtype=x.dtype)     # apart in the page from x, s from both (4K aliasing:
    s = empty_apart(x.shape, x, y, dtype=x.dtype)  # engine.memory.empty_apart)
    xf, yf, sf = x.reshape(-1), y.reshape(-1), s.reshape(-1)
    for part in cache_blocks(xf.size, xf.itemsize):
        _gelu_tanh_block(xf[part], sf[part], yf[part])
    return y, s


def _gelu_tanh_block(x, s, y):
    np.multiply(x, x, out=s)                        # x^2
    s *= _GELU_C * _MINUS_2_SQRT_2_OVER_PI
    s += _MINUS_2_SQRT_2_OVER_PI
    s *= x                                          # -2u = -2 sqrt(2/pi) (x + c x^3)
    with np.errstate(over="ignore"):                # exp(-2u) = inf for very negative x: s = 0, exactly right
        np.exp(s, out=s)
    s += 1.0
    np.divide(1.0, s, out=s)                        # s = sigmoid(2u) (divide: SIMD, faster than np.reciprocal)
    np.multiply(x, s, out=y)


@accelerated
def gelu_tanh_backward(dy, cache):
    """dy/dx = s + x s (1 - s) 2 du/dx  with s = sigmoid(2u) = 0.5 (1 + tanh(u)),
    du/dx = sqrt(2/pi) (1 + 3 * 0.044715 x^2)   (the same as 0.5 (1 + t) + 0.5 x (1 - t^2) du/dx).
    Block by block, as the forward. A cache without s (the fast engine's forward keeps only x) gets
    s recomputed from x first."""
    x, s = cache
    if s is None:
        s = _gelu_tanh(x)[1]
    dy = np.ascontiguousarray(np.broadcast_to(dy, x.shape))
    g = empty_apart(x.shape, x, s, dy, dtype=x.dtype)
    xf, sf, df, gf = x.reshape(-1), s.reshape(-1), dy.reshape(-1), g.reshape(-1)
    blocks = cache_blocks(xf.size, xf.itemsize)
    one_minus_s = np.empty(blocks[0].stop if blocks else 0, s.dtype)
    for part in blocks:
        _gelu_tanh_backward_block(xf[part], sf[part], df[part], gf[part], one_minus_s[:part.stop - part.start])
    return g


def _gelu_tanh_backward_block(x, s, dy, g, tmp):
    np.multiply(x, x, out=g)
    g *= 2.0 * 3.0 * _GELU_C * _SQRT_2_OVER_PI
    g += 2.0 * _SQRT_2_OVER_PI                      # 2 du/dx
    g *= x
    g *= s
    np.subtract(1.0, s, out=tmp)
    g *= tmp                                        # x s (1 - s) 2 du/dx
    g += s
    g *= dy


# ----------------------------------------------------------------------------
# GELU, exact

@accelerated
def gelu_erf_forward(x):
    """y = x Phi(x),  Phi(x) = (1 + erf(x / sqrt 2)) / 2."""
    phi_cdf = 0.5 * (1.0 + erf(x * x.dtype.type(1 / math.sqrt(2.0))))
    return x * phi_cdf, ActCache(x, phi_cdf)


@accelerated
def gelu_erf_backward(dy, cache):
    """dy/dx = Phi(x) + x phi(x),  phi(x) = exp(-x^2/2) / sqrt(2 pi) the normal density."""
    x, phi_cdf = cache
    pdf = np.exp(-0.5 * x * x) / math.sqrt(2.0 * math.pi)
    return dy * (phi_cdf + x * pdf)


# ----------------------------------------------------------------------------
# SiLU / swish (used inside SwiGLU)

@accelerated
def silu_forward(x):
    """y = x * sigmoid(x)."""
    s = np.negative(x)
    with np.errstate(over="ignore"):                # exp(-x) = inf for very negative x gives s = 0, as it should
        np.exp(s, out=s)
    s += 1.0
    np.divide(1.0, s, out=s)                        # s = 1 / (1 + exp(-x)), in place
    return x * s, ActCache(x, s)


@accelerated
def silu_backward(dy, cache):
    """dy/dx = s + x s (1 - s) = s (1 + x (1 - s))."""
    x, s = cache
    return dy * s * (1.0 + x * (1.0 - s))
