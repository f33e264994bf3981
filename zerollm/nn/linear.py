"""Linear layer, stored (in, out) as GPT-2's Conv1D does: y = x @ w + b.

Shapes: N = all leading dims flattened (B*T), i = in features, o = out features.
"""

from typing import NamedTuple

import numpy as np

from zerollm.engine.amp import cast


class LinearCache(NamedTuple):
    x: np.ndarray      # (..., i) the input, needed for dw
    w: np.ndarray      # (i, o)   needed for dx
    has_bias: bool


def linear_forward(x, w, b=None):
    """y = x @ w (+ b).  x: (..., i), w: (i, o), b: (o,) -> y: (..., o).

    Speed: the leading dims are flattened first, so BLAS gets one (N, i) @ (i, o) product; a 3-D
    ``x @ w`` would be one small product per sequence, about 15% slower at nanoGPT's sizes.
    Under zerollm.engine.amp.autocast x and w are first rounded to 16 bits; the cache keeps the rounded ones.
    """
    x, w = cast(x), cast(w)                     # no-ops in float32 mode
    y = x.reshape(-1, x.shape[-1]) @ w          # (N, i) @ (i, o) -> (N, o)
    if b is not None:
        y += b                                  # in place: no second (N, o) temporary
    return y.reshape(*x.shape[:-1], w.shape[1]), LinearCache(x, w, b is not None)


def linear_backward(dy, cache):
    """forward was y = x @ w + b, so:
        dx = dy @ w^T            (each input feeds every output through w)
        dw = x^T @ dy            (summed over every row N of the batch)
        db = sum_N dy
    Returns (dx, dw, db); db is None without bias.
    """
    x, w = cache.x, cache.w
    dy = cast(dy)                                   # mixed precision: the gradient enters in 16 bits too
    x2 = x.reshape(-1, x.shape[-1])                 # (N, i)
    dy2 = dy.reshape(-1, dy.shape[-1])              # (N, o)
    dx = (dy2 @ w.T).reshape(x.shape)               # (N, o) @ (o, i) -> (N, i) -> (..., i)
    dw = x2.T @ dy2                                 # (i, N) @ (N, o) -> (i, o)
    db = dy2.sum(axis=0) if cache.has_bias else None
    return dx, dw, db
