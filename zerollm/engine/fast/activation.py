"""Fast GELU (tanh form) and SiLU: one pass over the (N, H) activations instead of eight or nine.

References: ``zerollm.nn.activation``; the same formulas, the same ActCache(x, aux). The backward
passes use no exp and round every operation in the reference's order: they are bit-identical to
NumPy's. The forward passes differ from NumPy's only through exp (<= 2 ulp).
"""

import math

import numpy as np

from zerollm.engine.fast.jit import exact_kernel, exp32, float32_arrays, kernel
from zerollm.engine.caches import ActCache

_K = np.float32(-2.0 * math.sqrt(2.0 / math.pi))                 # -2 sqrt(2/pi)
_CK = np.float32(0.044715 * (-2.0 * math.sqrt(2.0 / math.pi)))
_D2 = np.float32(2.0 * 3.0 * 0.044715 * math.sqrt(2.0 / math.pi))
_D0 = np.float32(2.0 * math.sqrt(2.0 / math.pi))
_ONE = np.float32(1.0)


@kernel
def _gelu_tanh(x, y, s):
    """s = sigmoid(2u) = 1 / (1 + exp(-2u)), u = sqrt(2/pi) (x + 0.044715 x^3);  y = x s."""
    for i in range(x.size):
        v = x[i]
        e = exp32(((v * v) * _CK + _K) * v)                      # exp(-2u), the reference's rounding order
        t = _ONE / (e + _ONE)
        s[i] = t
        y[i] = v * t


@exact_kernel
def _gelu_tanh_backward(x, s, dy, dx):
    """dx = dy (s + x s (1 - s) 2 du/dx), 2 du/dx = 2 sqrt(2/pi) (1 + 3 * 0.044715 x^2)."""
    for i in range(x.size):
        v, t = x[i], s[i]
        g = (((((v * v) * _D2 + _D0) * v) * t) * (_ONE - t) + t) * dy[i]
        dx[i] = g


@kernel
def _silu(x, y, s):
    for i in range(x.size):
        t = _ONE / (_ONE + exp32(-x[i]))
        s[i] = t
        y[i] = x[i] * t


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
    y, s = np.empty_like(x), np.empty_like(x)
    fn(*_flat(x, y, s))
    return y, ActCache(x, s)


def _backward(fn, dy, cache):
    x, s = cache
    if not float32_arrays(x, s, dy) or dy.shape != x.shape:
        return NotImplemented
    dx = np.empty_like(x)
    fn(*_flat(x, s, dy, dx))
    return dx


def gelu_tanh_forward(x):
    return _forward(_gelu_tanh, x)


def gelu_tanh_backward(dy, cache):
    return _backward(_gelu_tanh_backward, dy, cache)


def silu_forward(x):
    return _forward(_silu, x)


def silu_backward(dy, cache):
    return _backward(_silu_backward, dy, cache)


KERNELS = {"gelu_tanh_forward": gelu_tanh_forward, "gelu_tanh_backward": gelu_tanh_backward,
           "silu_forward": silu_forward, "silu_backward": silu_backward}
