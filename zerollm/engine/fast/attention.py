"""Fast masked softmax for attention: one pass per score row instead of NumPy's five or six; RoPE in one pass.

Reference: ``zerollm.nn.attention.masked_softmax`` / ``masked_softmax_backward``. Scores are viewed
as rows: att (R, T, Tk) with R = B * nkv * g. With a causal mask, query i of a row sees keys
0 .. i + Tk - T; the hidden tail of the row is written as 0 without computing an exp for it.

``rope_forward`` (reference: ``zerollm.nn.position.rope_forward``): y = x cos + rotate_half(x) sin, read from q's
and k's views into the fused qkv product where they lie, written once. NumPy builds rotate_half(x) (a negation
and a concatenation) and makes three more passes. The same multiplications and additions in the same order,
with no fused multiply-add, so the same float32 bits.
"""

import numpy as np

from zerollm.engine.caches import RopeCache
from zerollm.engine.fast.jit import exact_kernel, exp32, float32_arrays, kernel


@kernel
def _softmax_rows(att, causal):
    """att (R, T, Tk) <- softmax over the last axis, the hidden part of each row set to 0."""
    R, T, Tk = att.shape
    for r in range(R):
        for i in range(T):
            row = att[r, i]
            n = min(max(i + Tk - T + 1, 0), Tk) if causal else Tk    # visible keys of this query
            if n == 0:                                                # every key hidden: weights 0
                row[:] = 0
                continue
            m = row[0]
            for j in range(1, n):                                     # 1. the row max (stability)
                v = row[j]
                m = v if v > m else m
            if m == -np.inf:                                          # only -inf scores: weights 0
                row[:] = 0
                continue
            total = np.float32(0.0)
            for j in range(n):                                        # 2. exp(s - max) and its sum
                e = exp32(row[j] - m)
                row[j] = e
                total += e
            inv = np.float32(1.0) / total
            for j in range(n):                                        # 3. normalise
                row[j] *= inv
            row[n:] = 0                                               # 4. the hidden keys


@kernel
def _softmax_backward_rows(datt, att):
    """datt (R, Tk) <- att * (datt - sum(datt * att)) row by row."""
    R, Tk = datt.shape
    for r in range(R):
        d, a = datt[r], att[r]
        s = np.float32(0.0)
        for j in range(Tk):
            s += d[j] * a[j]
        for j in range(Tk):
            d[j] = a[j] * (d[j] - s)


def masked_softmax(att, *, causal=True, mask=None):
    if mask is not None or not float32_arrays(att) or att.ndim < 2:
        return NotImplemented                      # padding masks, float64: the NumPy reference
    T, Tk = att.shape[-2:]
    _softmax_rows(att.reshape(-1, T, Tk), bool(causal))
    return att


def masked_softmax_backward(datt, att):
    if not float32_arrays(datt, att) or datt.shape != att.shape:
        return NotImplemented
    Tk = att.shape[-1]
    _softmax_backward_rows(datt.reshape(-1, Tk), att.reshape(-1, Tk))
    return datt


@exact_kernel
def _rope5(x, cos, sin, y):
    """y = x * cos + rotate_half(x) * sin for x (A, B, C, T, hs) of any strides, cos and sin (T, hs), y C-contiguous:
    for i < hs / 2, y_i = x_i cos_i + (-x_{i + h}) sin_i; above, y_i = x_i cos_i + x_{i - h} sin_i."""
    A, B, C, T, hs = x.shape
    h = hs // 2
    for a in range(A):
        for b in range(B):
            for c in range(C):
                for t in range(T):
                    xr, yr, cr, sr = x[a, b, c, t], y[a, b, c, t], cos[t], sin[t]
                    for i in range(h):
                        lo, hi = xr[i], xr[i + h]
                        yr[i] = lo * cr[i] + (-hi) * sr[i]
                        yr[i + h] = hi * cr[i + h] + lo * sr[i + h]


def rope_forward(x, cos, sin):
    if (not isinstance(x, np.ndarray) or x.dtype != np.float32 or not 2 <= x.ndim <= 5
            or not float32_arrays(cos, sin) or cos.ndim != 2 or cos.shape != sin.shape
            or x.shape[-2:] != cos.shape or x.shape[-1] % 2):
        return NotImplemented                      # float64, tables broadcast another way: the NumPy reference
    y = np.empty(x.shape, np.float32)
    lead = (1,) * (5 - x.ndim)
    _rope5(np.ascontiguousarray(x).reshape(lead + x.shape), cos, sin, y.reshape(lead + x.shape))
    return y, RopeCache(cos, sin)


KERNELS = {"masked_softmax": masked_softmax, "masked_softmax_backward": masked_softmax_backward,
           "rope_forward": rope_forward}
