"""The caches that a forward pass leaves for its backward, shared by both engines.

The NumPy layers (zerollm.nn) and the fused kernels (zerollm.engine.fast) fill the same caches, so a
backward of one engine can read a forward of the other. They live here, below both, so that neither
imports the other.
"""

from typing import NamedTuple

import numpy as np


class LinearCache(NamedTuple):
    x: np.ndarray      # (..., i) the input, needed for dw
    w: np.ndarray      # (i, o)   needed for dx
    has_bias: bool


class ActCache(NamedTuple):
    x: np.ndarray
    aux: np.ndarray   # a value from the forward pass the derivative reuses (sigmoid(2u), Phi(x), sigmoid(x))


class NormCache(NamedTuple):
    xhat: np.ndarray    # (..., C) the normalised input
    rstd: np.ndarray    # (..., 1) 1 / standard deviation (or 1 / rms)
    w: np.ndarray       # (C,) gain
    has_bias: bool


class RopeCache(NamedTuple):
    cos: np.ndarray   # (T, hs)
    sin: np.ndarray   # (T, hs)
