"""Self-attention from first principles, in plain NumPy.

This is the course's Part 1.2: project tokens to queries, keys and values, compare every
query with every key, hide the future, turn scores into weights, and mix the values.

Shapes (letters used in every comment of this module):
    B  batch (or any leading dims, e.g. batch and heads)
    T  sequence length; Tq queries and Tk keys when they differ (KV cache)
    C  model width (d_model)
    hs head size (d_k for queries/keys; values may have their own width)

Mask convention everywhere in zerollm: a boolean array where True means "this key is hidden
from this query" (the seed's ``np.triu(..., k=1)``).
"""

from dataclasses import dataclass

import numpy as np

from zerollm.io.errors import ZeroLLMError
from zerollm.nn.reductions import COMMON_FLOATS, row_sums


# ----------------------------------------------------------------------------
# softmax and masks

def softmax(x, axis=-1, out=None):
    """Numerically stable softmax along ``axis``; keeps the dtype of ``x``.

    softmax(x)_i = exp(x_i - m) / sum_j exp(x_j - m), with m = max_j x_j. Subtracting the max
    changes nothing mathematically but keeps exp() <= 1, so huge logits never overflow.
    Entries equal to -inf get weight 0. A slice that is entirely -inf (a query whose keys are
    all masked) gets all zeros instead of the 0/0 = NaN the textbook formula would give.
    ``out=x`` computes in place (the training loop does this to avoid copies of big score arrays).

    >>> softmax(np.array([1000.0, 1000.0]))
    array([0.5, 0.5])
    """
    x = np.asarray(x)
    if not np.issubdtype(x.dtype, np.floating):
        x = x.astype(np.float64)
    m = np.max(x, axis=axis, keepdims=True)
    m[~np.isfinite(m)] = 0                        # all -inf slice: exp(-inf - 0) = 0, no NaN
    e = np.subtract(x, m, out=out)
    np.exp(e, out=e)
    total = np.sum(e, axis=axis, keepdims=True)
    total[total == 0] = 1                         # 0 / 1 = 0 for fully masked slices
    e /= total
    return e


# softmax_unshifted: exp(x) is taken without a shift while every score is at most UNSHIFTED_MAX (exp(64)
# times a million keys is ~1e34, below float32's 3.4e38), and a row whose exp-sum is below UNSHIFTED_FLOOR
# (its largest score under about -41: its small weights would underflow) is redone with its own max.
UNSHIFTED_MAX = 64.0
UNSHIFTED_FLOOR = 2.0 ** -60


def softmax_unshifted(x, scratch):
    """softmax over the last axis of x (..., n, k), in place: the same function as ``softmax``, computed
    as exp(x) / sum(exp(x)) with NO shift when no score exceeds UNSHIFTED_MAX.

    Why: the shift by the row max only keeps exp() from overflowing; any shift gives the same softmax.
    NumPy's max along short rows is slow (at attention's 64 keys it was half of the softmax's time),
    while the max of a whole block is one fast reduction. Without a shift there is also no subtraction
    to round: each weight carries only exp's own rounding, so the result is at least as accurate as the
    shifted one, and each row still depends on its own scores alone. The exps go into ``scratch`` (an
    array of x's shape), so that rows that must be redone (every key hidden, or all scores under about
    -41) are still there in x. A block with a score above UNSHIFTED_MAX (or a NaN), and any type other
    than float32/64 (float16 overflows at exp(11.1)), takes ``softmax``.
    """
    if x.dtype not in COMMON_FLOATS or not np.max(x, initial=-np.inf) <= UNSHIFTED_MAX:
        return softmax(x, axis=-1, out=x)                       # float16 (exp overflows past 11.1), big scores, NaN
    np.exp(x, out=scratch)
    total = row_sums(scratch)                                   # (..., n, 1), one einsum (nn.reductions)
    low = total[..., 0] < UNSHIFTED_FLOOR
    redo = np.nonzero(low) if low.any() else None
    if redo is not None:
        rows = softmax(x[redo])                   # fancy indexing copies the rows before x is overwritten
        total[redo] = 1                           # no 0 / 0 on the way
    np.divide(scratch, total, out=x)
    if redo is not None:
        x[redo] = rows
    return x


def softmax_backward(dy, y, axis=-1, out=None):
    """Backward of ``y = softmax(x)``: dx = y * (dy - sum(dy * y)) along ``axis``.

    The Jacobian dy_i/dx_j = y_i (delta_ij - y_j) is never formed; applied to dy it reduces to one
    weighted sum per row. Entries with y == 0 (masked) get dx == 0. ``out=dy`` works in place.
    Speed: along the last axis the row sums are an einsum, which reads dy and y once and writes no
    dy * y temporary (half the time of ``np.sum(dy * y)`` on attention's rows of 64 to 256).
    """
    if (axis in (-1, np.ndim(y) - 1) and np.ndim(y) >= 1 and np.shape(dy) == np.shape(y)
            and np.result_type(dy, y) in COMMON_FLOATS):
        weighted = np.einsum("...k,...k->...", dy, y)[..., None]
    else:
        weighted = np.sum(dy * y, axis=axis, keepdims=True)
    dx = np.subtract(dy, weighted, out=out)
    dx *= y
    return dx


def causal_mask(T, Tk=None):
    """Boolean (T, Tk) mask, True above the diagonal: query i may not look at key j > i.

    With ``Tk > T`` (a KV cache holding earlier tokens) the T queries are the LAST T positions,
    so query i sits at absolute position Tk - T + i and sees keys 0 .. Tk - T + i.

    >>> causal_mask(3).astype(int)
    array([[0, 1, 1],
           [0, 0, 1],
           [0, 0, 0]])
    """
    Tk = T if Tk is None else Tk
    if T <= 0 or Tk <= 0:
        raise ZeroLLMError(f"causal_mask needs positive sizes, got T={T}, Tk={Tk}")
    return np.triu(np.ones((T, Tk), dtype=bool), k=Tk - T + 1)


# ----------------------------------------------------------------------------
# scaled dot-product attention

@dataclass
class AttentionSteps:
    """Every intermediate of one attention computation, in the order it is computed."""
    scale: float
    scores: np.ndarray         # (..., Tq, Tk) raw q.k * scale
    mask: np.ndarray           # (..., Tq, Tk) bool, True = hidden
    masked_scores: np.ndarray  # (..., Tq, Tk) scores with -inf where mask is True
    weights: np.ndarray        # (..., Tq, Tk) softmax rows, each sums to 1 (or 0 if all hidden)
    out: np.ndarray            # (..., Tq, hv) weighted sum of values


def _float_dtype(*arrays):
    dtype = np.result_type(*arrays)
    return dtype if np.issubdtype(dtype, np.floating) else np.dtype(np.float64)


def _check_qkv(q, k, v):
    if q.ndim < 2 or k.ndim < 2 or v.ndim < 2:
        raise ZeroLLMError(
            f"q, k, v must be at least 2-D (..., T, hs); got shapes {q.shape}, {k.shape}, {v.shape}")
    if q.shape[-1] != k.shape[-1]:
        raise ZeroLLMError(
            f"q and k must have the same last dim (head size) to be dotted; got q {q.shape} "
            f"and k {k.shape}: project both with weights of the same output width")
    if k.shape[-2] != v.shape[-2]:
        raise ZeroLLMError(
            f"k and v must have one row per key (same T); got k {k.shape} and v {v.shape}")
    try:
        np.broadcast_shapes(q.shape[:-2], k.shape[:-2], v.shape[:-2])
    except ValueError:
        raise ZeroLLMError(
            f"the leading (batch/head) dims of q {q.shape}, k {k.shape}, v {v.shape} "
            "do not broadcast; give them the same batch size") from None


def _blocked(Tq, Tk, causal, mask, lead_shape):
    """Combine the causal mask and an optional padding mask into one (..., Tq, Tk) bool array."""
    blocked = causal_mask(Tq, Tk) if causal else np.zeros((Tq, Tk), dtype=bool)
    if mask is not None:
        mask = np.asarray(mask)
        if mask.dtype != np.bool_:
            raise ZeroLLMError(
                f"mask must be boolean (True = hidden), got dtype {mask.dtype}; use mask.astype(bool)")
        try:
            blocked = blocked | mask
        except ValueError:
            raise ZeroLLMError(
                f"mask of shape {mask.shape} does not broadcast to (..., Tq, Tk) = (..., {Tq}, {Tk})"
            ) from None
    return np.broadcast_to(blocked, np.broadcast_shapes(lead_shape + (Tq, Tk), blocked.shape))


def attention_steps(q, k, v, *, causal=True, mask=None, scale=None):
    """Scaled dot-product attention, returning every intermediate (see ``AttentionSteps``)."""
    q, k, v = np.asarray(q), np.asarray(k), np.asarray(v)
    _check_qkv(q, k, v)
    dtype = _float_dtype(q, k, v)
    q, k, v = q.astype(dtype, copy=False), k.astype(dtype, copy=False), v.astype(dtype, copy=False)
    Tq, Tk = q.shape[-2], k.shape[-2]
    if scale is None:
        scale = 1.0 / np.sqrt(q.shape[-1])   # Vaswani et al. 2017: keeps score variance ~1
    scale = float(scale)

    # 1. similarity of every query with every key
    scores = (q @ np.swapaxes(k, -1, -2)) * dtype.type(scale)      # (..., Tq, hs) @ (..., hs, Tk) -> (..., Tq, Tk)
    # 2. hide what each query must not see; -inf in the SAME dtype keeps float32 float32
    lead = np.broadcast_shapes(q.shape[:-2], k.shape[:-2])
    blocked = _blocked(Tq, Tk, causal, mask, lead)
    masked_scores = np.where(blocked, dtype.type(-np.inf), scores)  # (..., Tq, Tk)
    # 3. each row of scores -> a probability distribution over keys
    weights = softmax(masked_scores, axis=-1)                        # (..., Tq, Tk)
    # 4. each output row is the weighted average of the value rows
    out = weights @ v                                                # (..., Tq, Tk) @ (..., Tk, hv) -> (..., Tq, hv)
    return AttentionSteps(scale, scores, blocked, masked_scores, weights, out)


def scaled_dot_product_attention(q, k, v, *, causal=True, mask=None, scale=None):
    """softmax(q k^T * scale + mask) v for (..., T, hs) inputs with any leading dims.

    Args:
        q: (..., Tq, hs) queries; k: (..., Tk, hs) keys; v: (..., Tk, hv) values.
        causal: hide keys that come after each query (decoder / GPT). False = BERT-style.
        mask: optional bool array broadcastable to (..., Tq, Tk), True = hidden (e.g. padding).
        scale: defaults to 1/sqrt(hs).
    Returns:
        (out, weights): (..., Tq, hv) and (..., Tq, Tk). A query whose keys are all hidden gets
        weights 0 and output 0 (never NaN). float32 inputs give float32 outputs.
    """
    steps = attention_steps(q, k, v, causal=causal, mask=mask, scale=scale)
    return steps.out, steps.weights


# ----------------------------------------------------------------------------
# a single self-attention head, with everything the walkthrough shows

@dataclass
class SelfAttention:
    """All intermediates of ``self_attention``: q, k, v, then the ``AttentionSteps`` fields."""
    q: np.ndarray
    k: np.ndarray
    v: np.ndarray
    scale: float
    scores: np.ndarray
    mask: np.ndarray
    masked_scores: np.ndarray
    weights: np.ndarray
    out: np.ndarray


def _check_projection(x, w, name):
    if w.ndim != 2:
        raise ZeroLLMError(f"{name} must be a 2-D matrix (d_model, d_k); got shape {w.shape}")
    if w.shape[0] != x.shape[-1]:
        raise ZeroLLMError(
            f"{name} has {w.shape[0]} rows but x has d_model={x.shape[-1]} columns; "
            f"{name} must be ({x.shape[-1]}, d_k) so that x @ {name} works")


def self_attention(x, wq, wk, wv, *, causal=True, mask=None):
    """One attention head over x: (..., T, C) with projections wq, wk (C, hs) and wv (C, hv).

    >>> x = np.eye(3, dtype=np.float32)[None]                   # (1, 3, 3): three one-hot tokens
    >>> r = self_attention(x, np.eye(3), np.eye(3), np.eye(3))
    >>> r.weights[0, 0].tolist()                                 # token 0 can only see itself
    [1.0, 0.0, 0.0]
    """
    x, wq, wk, wv = (np.asarray(a) for a in (x, wq, wk, wv))
    if x.ndim < 2:
        raise ZeroLLMError(f"x must be (T, d_model) or (B, T, d_model); got shape {x.shape}")
    for w, name in ((wq, "wq"), (wk, "wk"), (wv, "wv")):
        _check_projection(x, w, name)
    if wq.shape[1] != wk.shape[1]:
        raise ZeroLLMError(
            f"wq {wq.shape} and wk {wk.shape} must have the same number of columns (d_k), "
            "because every query is dotted with every key")
    dtype = _float_dtype(x, wq, wk, wv)
    x, wq, wk, wv = (a.astype(dtype, copy=False) for a in (x, wq, wk, wv))
    q = x @ wq   # (..., T, C) @ (C, hs) -> (..., T, hs)  "what am I looking for?"
    k = x @ wk   # (..., T, C) @ (C, hs) -> (..., T, hs)  "what do I contain?"
    v = x @ wv   # (..., T, C) @ (C, hv) -> (..., T, hv)  "what do I hand over?"
    s = attention_steps(q, k, v, causal=causal, mask=mask)
    return SelfAttention(q, k, v, s.scale, s.scores, s.mask, s.masked_scores, s.weights, s.out)
