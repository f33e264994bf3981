"""Scalar heads on a GPT's final hidden states: the reward head (Part 7) and the value head (Part 8).

A language model ends in a (C, V) head that scores every next token. A reward model asks one number
of a whole text, "how good is it?", and PPO's critic asks one number of every prefix, "how much reward
is still to come?". Both are a linear map C -> 1 of the last hidden states (after the final norm):

    r[b]    = h[b, last[b]] @ w + b0          reward: read at the last real token of each sequence
    v[b, t] = h[b, t] @ w + b0                value: at every position

The weights live in the same flat parameter dict as the model's, under a prefix ("score" for the
reward head, as Hugging Face's GPT2ForSequenceClassification names it; "v_head" for the value head),
so the optimizer, the checkpoints and the thread shards treat them like any other parameter.
Shapes: B batch, T time, C channels.
"""

from typing import NamedTuple

import numpy as np

from zerollm.io.errors import ZeroLLMError


HEAD_PREFIXES = ("score", "v_head")      # reward head (Part 7), value head (Part 8)


def split_head_params(params):
    """A checkpoint's flat dict -> (the GPT's own parameters, the scalar heads' parameters)."""
    heads = {k: v for k, v in params.items() if k.split(".")[0] in HEAD_PREFIXES}
    return {k: v for k, v in params.items() if k not in heads}, heads


def head_params(prefix, n_embd, dtype, rng=None, std=0.0):
    """{prefix.weight: (C, 1), prefix.bias: (1,)}. Zero weights by default: a fresh head says 0 for
    every text, so training starts from "no opinion" (rng and std draw small random weights instead)."""
    w = np.zeros((n_embd, 1), dtype) if rng is None else (rng.standard_normal((n_embd, 1)) * std).astype(dtype)
    return {f"{prefix}.weight": w, f"{prefix}.bias": np.zeros(1, dtype)}


class ScalarHeadCache(NamedTuple):
    h: np.ndarray            # (B, T, C) the hidden states the head read
    w: np.ndarray            # (C, 1)
    index: np.ndarray | None # (B,) the position read in each row, or None (every position)


def scalar_head_forward(h, w, b, index=None):
    """h (B, T, C) -> (B,) read at ``index`` (B,) ints, or (B, T) at every position when index is None."""
    B, T, C = h.shape
    if index is None:
        out = (h.reshape(B * T, C) @ w).reshape(B, T)             # (B*T, C) @ (C, 1) -> (B, T)
    else:
        index = np.asarray(index)
        if index.shape != (B,) or index.min() < 0 or index.max() >= T:
            raise ZeroLLMError(f"the head's read positions must be (B,) = ({B},) ints in [0, {T}); got {index}")
        out = (h[np.arange(B), index] @ w)[:, 0]                  # (B, C) @ (C, 1) -> (B,)
    out += b[0]
    return out, ScalarHeadCache(h, w, index)


def scalar_head_backward(dout, cache):
    """forward was out = h[., index] @ w + b, so dh = dout w^T at the read positions (0 elsewhere),
    dw = h^T dout summed over what was read, db = sum(dout). Returns (dh (B, T, C), dw (C, 1), db (1,))."""
    h, w, index = cache.h, cache.w, cache.index
    B, T, C = h.shape
    dout = np.asarray(dout, dtype=h.dtype)
    if index is None:
        d2 = dout.reshape(B * T, 1)                               # (B*T, 1)
        dh = (d2 @ w.T).reshape(B, T, C)                          # (B*T, 1) @ (1, C) -> (B, T, C)
        dw = h.reshape(B * T, C).T @ d2                           # (C, B*T) @ (B*T, 1) -> (C, 1)
    else:
        rows = h[np.arange(B), index]                             # (B, C)
        dh = np.zeros_like(h)
        dh[np.arange(B), index] = dout[:, None] * w[:, 0]         # (B, C)
        dw = rows.T @ dout[:, None]                               # (C, B) @ (B, 1) -> (C, 1)
    return dh, dw, np.array([dout.sum()], dtype=h.dtype)


def last_token_index(mask):
    """(B, T) bool mask of real tokens (right padding) -> (B,) position of each row's last real token.

    >>> last_token_index(np.array([[1, 1, 0], [1, 1, 1]], dtype=bool)).tolist()
    [1, 2]
    """
    mask = np.asarray(mask, dtype=bool)
    if not mask[:, 0].all():
        raise ZeroLLMError("every sequence needs at least one real token at position 0 (right padding)")
    return mask.shape[1] - 1 - np.argmax(mask[:, ::-1], axis=1)
