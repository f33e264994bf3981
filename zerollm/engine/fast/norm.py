"""Fast LayerNorm and RMSNorm: each token's C numbers normalised in one visit to its row.

References: ``zerollm.nn.norm``. The caches are the reference's NormCache (xhat, rstd, w, has_bias),
so either engine's backward can follow either engine's forward. Rows: x (N, C), N = all leading dims.
The weight gradient dw = sum over rows of dy * xhat is accumulated in float64 (a float32 running
sum over thousands of rows would drift by about 1e-6).
"""

import numpy as np

from zerollm.engine.fast.jit import float32_arrays, inline, kernel
from zerollm.engine.caches import NormCache
from zerollm.engine.memory import empty_apart


@inline
def row_mean_rstd(row, eps, centre):
    """(mean, 1 / sqrt(variance + eps)) of one row: LayerNorm's (centre), or RMSNorm's mean square with
    mean 0. The one place both norms' statistics are computed (this file's kernels, decode.py's block)."""
    C = row.shape[0]
    mean = np.float32(0.0)
    if centre:
        for j in range(C):
            mean += row[j]
        mean /= np.float32(C)
    var = np.float32(0.0)
    for j in range(C):
        d = row[j] - mean
        var += d * d
    return mean, np.float32(1.0) / np.sqrt(var / np.float32(C) + eps)


@kernel
def _layernorm_rows(x, w, b, eps, centre, y, xhat, rstd):
    """Per row: mean (centre only), variance or mean square, rstd, xhat, y = xhat * w (+ b)."""
    N, C = x.shape
    for n in range(N):
        row = x[n]
        mean, r = row_mean_rstd(row, eps, centre)
        rstd[n, 0] = r
        for j in range(C):
            h = (row[j] - mean) * r
            xhat[n, j] = h
            y[n, j] = h * w[j] + b[j]


@kernel
def _layernorm_backward_rows(dy, xhat, rstd, w, centre, dx, dw, db):
    """dx = rstd * (dxhat - mean(dxhat) - xhat * mean(dxhat * xhat)),  dxhat = dy * w;
    dw += dy * xhat and db += dy over rows (float64 accumulators). centre=False drops mean(dxhat)."""
    N, C = dy.shape
    for n in range(N):
        g, h = dy[n], xhat[n]
        s1 = np.float32(0.0)
        s2 = np.float32(0.0)
        for j in range(C):
            d = g[j] * w[j]
            s1 += d
            s2 += d * h[j]
            dw[j] += np.float64(g[j]) * np.float64(h[j])
            db[j] += np.float64(g[j])
        s1 = s1 / np.float32(C) if centre else np.float32(0.0)
        s2 /= np.float32(C)
        r = rstd[n, 0]
        for j in range(C):
            dx[n, j] = (g[j] * w[j] - s1 - h[j] * s2) * r


def _forward(x, w, b, eps, centre):
    if not float32_arrays(x, w) or (b is not None and not float32_arrays(b)):
        return NotImplemented
    C = x.shape[-1]
    x2 = x.reshape(-1, C)                                   # (N, C)
    y = empty_apart(x2.shape, x2)                  # apart in the page from x, xhat from both (4K aliasing)
    xhat = empty_apart(x2.shape, x2, y)
    rstd = np.empty((x2.shape[0], 1), np.float32)
    _layernorm_rows(x2, w, np.zeros(C, np.float32) if b is None else b, np.float32(eps), centre, y, xhat, rstd)
    lead = x.shape[:-1]
    return y.reshape(x.shape), NormCache(xhat.reshape(x.shape), rstd.reshape(*lead, 1), w, b is not None)


def _backward(dy, cache, centre):
    xhat, rstd, w = cache.xhat, cache.rstd, cache.w
    if not float32_arrays(dy, xhat, rstd, w):
        return NotImplemented
    C = xhat.shape[-1]
    dy2 = dy.reshape(-1, C)
    dx = empty_apart(dy2.shape, dy2, xhat)
    dw, db = np.zeros(C), np.zeros(C)                       # float64 accumulators
    _layernorm_backward_rows(dy2, xhat.reshape(-1, C), rstd.reshape(-1, 1), w, centre, dx, dw, db)
    return dx.reshape(dy.shape), dw.astype(np.float32), db.astype(np.float32)


def layernorm_forward(x, w, b=None, eps=1e-5):
    return _forward(x, w, b, eps, True)


def layernorm_backward(dy, cache):
    out = _backward(dy, cache, True)
    if out is NotImplemented:
        return out
    dx, dw, db = out
    return dx, dw, db if cache.has_bias else None


def rmsnorm_forward(x, w, eps=1e-5):
    return _forward(x, w, None, eps, False)


def rmsnorm_backward(dy, cache):
    out = _backward(dy, cache, False)
    return out if out is NotImplemented else out[:2]


KERNELS = {"layernorm_forward": layernorm_forward, "layernorm_backward": layernorm_backward,
           "rmsnorm_forward": rmsnorm_forward, "rmsnorm_backward": rmsnorm_backward}
