"""Lookup tables: token embeddings (wte) and learned position embeddings (wpe).

A lookup is a matrix product with a one-hot vector, so its gradient adds each output gradient
back into the row it was read from. Rows read several times (a token that repeats) accumulate.
"""

from typing import NamedTuple

import numpy as np


class EmbeddingCache(NamedTuple):
    idx: np.ndarray        # (...) int ids that were looked up
    shape: tuple           # (V, C) of the table


def embedding_forward(idx, w):
    """out[..., :] = w[idx[...], :].  idx: (...) ints, w: (V, C) -> (..., C)."""
    return w[idx], EmbeddingCache(idx, w.shape)


def embedding_backward(dout, cache):
    """forward was out = w[idx], so dw[v] = sum of dout over every position where idx == v."""
    V, C = cache.shape
    dw = np.zeros((V, C), dtype=dout.dtype)
    np.add.at(dw, cache.idx.ravel(), dout.reshape(-1, C))   # unbuffered: repeated ids all add up
    return dw
