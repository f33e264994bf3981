"""Linear layer, stored (in, out) as GPT-2's Conv1D does: y = x @ w + b.

Shapes: N = all leading dims flattened (B*T), i = in features, o = out features.
"""

from typing import NamedTuple

import numpy as np


class LinearCache(NamedTuple):
    x: np.ndarray      # (..., i) the input, needed for dw
    w: np.ndarray      # (i, o)   needed for dx
    has_bias: bool


def linear_forward(x, w, b=None):
    """y = x @ w (+ b).  x: (..., i), w: (i, o), b: (o,) -> y: (..., o)."""
    y = x @ w                       # (..., i) @ (i, o) -> (..., o)
    if b is not None:
        y += b                      # in place: no second (..., o) temporary
    return y, LinearCache(x, w, b is not None)


def linear_backward(dy, cache):
    """forward was y = x @ w + b, so:
        dx = dy @ w^T            (each input feeds every output through w)
        dw = x^T @ dy            (summed over every row N of the batch)
        db = sum_N dy
    Returns (dx, dw, db); db is None without bias.
    """
    x, w = cache.x, cache.w
    dx = dy @ w.T                                   # (..., o) @ (o, i) -> (..., i)
    x2 = x.reshape(-1, x.shape[-1])                 # (N, i)
    dy2 = dy.reshape(-1, dy.shape[-1])              # (N, o)
    dw = x2.T @ dy2                                 # (i, N) @ (N, o) -> (i, o)
    db = dy2.sum(axis=0) if cache.has_bias else None
    return dx, dw, db
