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
    """forward was out = w[idx], so dw[v] = sum of dout over every position where idx == v.

    Speed: the rows are sorted by id (stable), then each id's run of rows is summed with one
    ``np.add.reduceat``; ``np.add.at(dw, idx, rows)`` computes the same sums about 6x slower.
    """
    V, C = cache.shape
    ids = cache.idx.reshape(-1)                             # (N,)
    order = np.argsort(ids, kind="stable")
    sorted_ids = ids[order]
    starts = np.flatnonzero(np.r_[True, sorted_ids[1:] != sorted_ids[:-1]])   # where each id's run begins
    dw = np.zeros((V, C), dtype=dout.dtype)
    dw[sorted_ids[starts]] = np.add.reduceat(dout.reshape(-1, C)[order], starts, axis=0)   # (ids, C)
    return dw
