"""Dropout (Srivastava et al. 2014), inverted: scale the survivors by 1/(1-p) at train time so that
evaluation is the identity. The random numbers come from an explicit generator.
"""

from typing import NamedTuple

import numpy as np


class Dropout(NamedTuple):
    """A dropout as a layer is told it: the rate p, the generator of its masks, and whether this is
    training (dropout is the identity otherwise, and the generator is not touched)."""
    p: float = 0.0
    rng: np.random.Generator | None = None
    training: bool = False


class DropoutCache(NamedTuple):
    mask: np.ndarray | None   # (same as x) 0 or 1/(1-p); None when dropout was the identity


def dropout_forward(x, p, rng, training=True):
    """Zero each element with probability p, scale the rest by 1/(1-p). Identity when p == 0 or
    not training (and then ``rng`` is not touched, so eval never shifts the random stream)."""
    if not training or p == 0.0:
        return x, DropoutCache(None)
    keep = rng.random(x.shape, dtype=np.float64) >= p
    mask = keep.astype(x.dtype) * x.dtype.type(1.0 / (1.0 - p))
    return x * mask, DropoutCache(mask)


def dropout_backward(dy, cache):
    """forward was y = x * mask, so dx = dy * mask."""
    return dy if cache.mask is None else dy * cache.mask
