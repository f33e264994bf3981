"""Fast GELU (tanh and erf forms) and SiLU: one pass over the (N, H) activations instead of eight or more.

References: ``zerollm.nn.activation``; the same formulas, the same ActCache(x, aux), except that the
tanh GELU's forward keeps no aux (None) and its backward recomputes s from x, as torch does; either
engine's backward takes either engine's cache. Given the same s, the backward passes round every
operation in the reference's order: they are bit-identical to NumPy's. The forward passes (and s
recomputed) differ from NumPy's only through exp (<= 2 ulp).
"""

import math

import numba
import numpy as np

from zerollm.engine.fast.jit import FASTMATH, exact_kernel, exp32, float32_arrays, kernel
from zerollm.engine.caches import ActCache
from zerollm.engine.memory import empty_apart

_K = np.float32(-2.0 * math.sqrt(2.0 / math.pi))                 # -2 sqrt(2/pi)
_CK = np.float32(0.044715 * (-2.0 * math.sqrt(2.0 / math.pi)))
_D2 = np.float32(2.0 * 3.0 * 0.044715 * math.sqrt(2.0 / math.pi))
_D0 = np.float32(2.0 * math.sqrt(2.0 / math.pi))
_ONE = np.float32(1.0)


@numba.njit(fastmath=FASTMATH, error_model="numpy")
def _sigmoid_2u(v):
    """s = sigmoid(2u) = 1 / (1 + exp(-2u)), u = sqrt(2/pi) (v + 0.044715 v^3), in the reference's
    rounding order. A function of its own, compiled with these settings whichever kernel calls it (LLVM
    inlines it and keeps each operation's flags), so the exact backward recomputes bit for bit the s
    of the forward."""
    e = exp32(((v * v) * _CK + _K) * v)                           # exp(-2u)
    return _ONE / (e + _ONE)


@kernel
def _gelu_tanh(x, y):
    """y = x s. s is not kept: the backward recomputes it from x (one array fewer to write and to hold
    from the forward to the backward, 12 MiB a layer at 6x384; torch keeps only x as well)."""
    for i in range(x.size):
        v = x[i]
        y[i] = v * _sigmoid_2u(v)


@numba.njit(error_model="numpy")
def _gelu_tanh_grad(v, t, g):
    """dx = dy (s + x s (1 - s) 2 du/dx), 2 du/dx = 2 sqrt(2/pi) (1 + 3 * 0.044715 x^2), for one number
    (v = x, t = s, g = dy), every operation rounded as the reference rounds it."""
    return (((((v * v) * _D2 + _D0) * v) * t) * (_ONE - t) + t) * g


@exact_kernel
def _gelu_tanh_backward(x, s, dy, dx):
    for i in range(x.size):
        dx[i] = _gelu_tanh_grad(x[i], s[i], dy[i])


@exact_kernel
def _gelu_tanh_backward_from_x(x, dy, dx):
    """The same dx, with s recomputed from x (the cache of this engine's forward)."""
    for i in range(x.size):
        dx[i] = _gelu_tanh_grad(x[i], _sigmoid_2u(x[i]), dy[i])


# GELU, exact (erf) form, as zerollm.nn.activation computes it in float32: Abramowitz & Stegun 7.1.26
_RSQRT2 = np.float32(1 / math.sqrt(2.0))
_AS_P = np.float32(0.3275911)
_A1, _A2, _A3, _A4, _A5 = (np.float32(a) for a in (0.254829592, -0.284496736, 1.421413741, -1.453152027,
                                                   1.061405429))
_HALF = np.float32(0.5)
_MINUS_HALF = np.float32(-0.5)
_SQRT_2PI = np.float32(math.sqrt(2.0 * math.pi))


@kernel
def _gelu_erf(x, y, phi):
    """phi = (1 + erf(x / sqrt 2)) / 2, y = x phi; each operation in the reference's order and precision."""
    for i in range(x.size):
        v = x[i]
        z = v * _RSQRT2
        az = abs(z)
        t = _ONE / (_ONE + _AS_P * az)
        poly = (((((_A5 * t + _A4) * t + _A3) * t + _A2) * t + _A1) * t)
        e = _ONE - poly * exp32(-az * az)
        e = math.copysign(e, z)                    # a select, not a branch: the loop stays SIMD
        c = _HALF * (_ONE + e)
        phi[i] = c
        y[i] = v * c


@kernel
def _gelu_erf_backward(x, phi, dy, dx):
    """dx = dy (phi + x pdf), pdf = exp(-x^2 / 2) / sqrt(2 pi)."""
    for i in range(x.size):
        v = x[i]
        pdf = exp32((_MINUS_HALF * v) * v) / _SQRT_2PI
        dx[i] = dy[i] * (phi[i] + v * pdf)


@kernel
def _silu(x, y, s):
    for i in range(x.size):
        t = _ONE / (_ONE + exp32(-x[i]))
        s[i] = t
        y[i] = x[i] * t


@kernel
def _silu_rows(x, step, y, s):
    """_silu over rows of H = y.shape[1] numbers that need not be adjacent in memory (SwiGLU's gate: the first half
    of each row of c_fc's output): row n is x[n * step:n * step + H], x a 1-D contiguous view over all of them (the
    rows between are only stepped over), so the inner loop is contiguous and LLVM makes it vector code."""
    H = y.shape[1]
    for n in range(y.shape[0]):
        _silu(x[n * step:n * step + H], y[n], s[n])


def _row_span(x):
    """x (..., H) float32 whose last axis is contiguous and whose other axes step evenly (a slice of the last axis
    of a C-contiguous array) -> (a 1-D contiguous view from x's first number to its last, elements from one row
    to the next); None for anything else."""
    if not (isinstance(x, np.ndarray) and x.dtype == np.float32 and x.ndim >= 2 and x.size and x.strides[-1] == 4
            and x.strides[-2] % 4 == 0 and x.strides[-2] >= 4 * x.shape[-1]):
        return None
    for k in range(x.ndim - 2):
        if x.strides[k] != x.strides[k + 1] * x.shape[k + 1]:
            return None
    step = x.strides[-2] // 4
    rows = x.size // x.shape[-1]
    return np.lib.stride_tricks.as_strided(x, ((rows - 1) * step + x.shape[-1],), (4,)), step


@exact_kernel
def _silu_backward(x, s, dy, dx):
    """dx = dy * s * (1 + x (1 - s))."""
    for i in range(x.size):
        dx[i] = (dy[i] * s[i]) * (_ONE + x[i] * (_ONE - s[i]))


def _flat(*arrays):
    return [a.reshape(-1) for a in arrays]


def _forward(fn, x):
    if not float32_arrays(x):
        return NotImplemented
    y = empty_apart(x.shape, x)                   # apart in the page from x, and s from both (4K aliasing)
    s = empty_apart(x.shape, x, y)
    fn(*_flat(x, y, s))
    return y, ActCache(x, s)


def _backward(fn, dy, cache):
    x, s = cache
    if not float32_arrays(x, s, dy) or dy.shape != x.shape:
        return NotImplemented
    dx = empty_apart(x.shape, x, s, dy)
    fn(*_flat(x, s, dy, dx))
    return dx


def gelu_tanh_forward(x):
    if not float32_arrays(x):
        return NotImplemented
    y = empty_apart(x.shape, x)
    _gelu_tanh(x.reshape(-1), y.reshape(-1))
    return y, ActCache(x, None)                     # no s: the backward recomputes it


def gelu_tanh_backward(dy, cache):
    x, s = cache
    if s is not None:                               # a cache of the reference's forward
        return _backward(_gelu_tanh_backward, dy, cache)
    if not float32_arrays(x, dy) or dy.shape != x.shape:
        return NotImplemented                       # the reference recomputes s itself
    dx = empty_apart(x.shape, x, dy)
    _gelu_tanh_backward_from_x(*_flat(x, dy, dx))
    return dx


def gelu_erf_forward(x):
    return _forward(_gelu_erf, x)


def gelu_erf_backward(dy, cache):
    return _backward(_gelu_erf_backward, dy, cache)


def silu_forward(x):
    """Also for a gate that is a view into c_fc's output (SwiGLU: gu[..., :H], rows not adjacent), which the
    reference took: about a sixth of a llama prompt's time outside its matrix products went to it."""
    if float32_arrays(x):
        return _forward(_silu, x)
    span = _row_span(x)
    if span is None:
        return NotImplemented
    y = empty_apart(x.shape, x)
    s = empty_apart(x.shape, x, y)
    shape = (x.size // x.shape[-1], x.shape[-1])
    _silu_rows(*span, y.reshape(shape), s.reshape(shape))
    return y, ActCache(x, s)


def silu_backward(dy, cache):
    return _backward(_silu_backward, dy, cache)


KERNELS = {"gelu_tanh_forward": gelu_tanh_forward, "gelu_tanh_backward": gelu_tanh_backward,
           "gelu_erf_forward": gelu_erf_forward, "gelu_erf_backward": gelu_erf_backward,
           "silu_forward": silu_forward, "silu_backward": silu_backward}
