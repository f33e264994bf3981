"""LayerNorm (Ba et al. 2016, GPT-2) and RMSNorm (Zhang & Sennrich 2019, Llama).

Both normalise each token's C numbers on their own; shapes (..., C) in and out.
"""


import numpy as np

from zerollm.engine import accelerated
from zerollm.engine.caches import NormCache
from zerollm.nn.reductions import column_sums, row_means


# ----------------------------------------------------------------------------
# LayerNorm

@accelerated
def layernorm_forward(x, w, b=None, eps=1e-5):
    """y = (x - mean) / sqrt(var + eps) * w + b, statistics over the last dim (biased variance)."""
    C = x.shape[-1]
    mean = row_means(x)                                      # (..., 1)
    xhat = x - mean                                          # (..., C) centred; normalised in place below
    var = np.einsum("...c,...c->...", xhat, xhat)[..., None] / C   # (..., 1) without an x^2 temporary
    rstd = 1.0 / np.sqrt(var + eps)                          # (..., 1)
    xhat *= rstd                                             # (..., C)
    y = xhat * w
    if b is not None:
        y += b
    return y, NormCache(xhat, rstd, w, b is not None)


@accelerated
def layernorm_backward(dy, cache):
    """forward was xhat = (x - mean) * rstd, y = xhat * w + b, so:
        dw = sum dy * xhat,  db = sum dy          (over every token)
        dxhat = dy * w
        dx = rstd * (dxhat - mean(dxhat) - xhat * mean(dxhat * xhat))
    The two mean terms are the paths through mean and var: shifting all of x changes nothing,
    and scaling x along xhat changes nothing either, so those components are projected out.
    """
    xhat, rstd, w = cache.xhat, cache.rstd, cache.w
    C = xhat.shape[-1]
    dy2, xhat2 = dy.reshape(-1, C), xhat.reshape(-1, C)
    dw = np.einsum("nc,nc->c", dy2, xhat2)
    db = column_sums(dy2) if cache.has_bias else None
    dx = dy * w                                              # dxhat, turned into dx in place
    proj = np.einsum("...c,...c->...", dx, xhat)[..., None] / C   # mean(dxhat * xhat), (..., 1)
    dx -= row_means(dx)
    dx -= xhat * proj
    dx *= rstd
    return dx, dw, db


# ----------------------------------------------------------------------------
# RMSNorm: no centring, no bias, one statistic

@accelerated
def rmsnorm_forward(x, w, eps=1e-5):
    """y = x / sqrt(mean(x^2) + eps) * w."""
    ms = np.einsum("...c,...c->...", x, x)[..., None] / x.shape[-1]       # mean(x^2), (..., 1)
    rstd = 1.0 / np.sqrt(ms + eps)                                        # (..., 1)
    xhat = x * rstd                                                       # (..., C)
    return xhat * w, NormCache(xhat, rstd, w, False)


@accelerated
def rmsnorm_backward(dy, cache):
    """forward was xhat = x * rstd, rstd = (mean(x^2) + eps)^-1/2, y = xhat * w, so:
        dw = sum dy * xhat
        dx = rstd * (dxhat - xhat * mean(dxhat * xhat)),  dxhat = dy * w
    (LayerNorm's formula without the mean-shift term.)
    """
    xhat, rstd, w = cache.xhat, cache.rstd, cache.w
    C = xhat.shape[-1]
    dw = np.einsum("nc,nc->c", dy.reshape(-1, C), xhat.reshape(-1, C))
    dx = dy * w                                              # dxhat, turned into dx in place
    dx -= xhat * (np.einsum("...c,...c->...", dx, xhat)[..., None] / C)
    dx *= rstd
    return dx, dw
