"""Tiled ("flash") attention: the same softmax(q k^T / sqrt(hs) + mask) v as ``sdpa_forward``, in O(T) memory.

The naive implementation builds the whole (T, Tk) score matrix, softmaxes it and keeps it for the
backward: 4 * T^2 bytes per head in float32, 256 MB at T = 8192. Here the keys are visited one tile
at a time and only a (tile, tile) block of scores ever exists:

* forward: the online softmax (Milakov & Gimelshein 2018, "Online normalizer calculation for
  softmax"; Dao et al. 2022, FlashAttention) keeps, for every query row, the running max m, the
  running sum l of exp(s - m) and the running (unnormalised) output. When a new tile raises the max,
  what was summed so far was measured against the old, too small max and is rescaled by exp(m_old - m_new).
* backward: nothing T x Tk was saved, so every tile's scores are recomputed from q, k and the saved
  logsumexp (P = exp(S - lse) is then already normalised), and D = rowsum(dout * out) replaces the
  row sums of the softmax backward (Dao 2023, FlashAttention-2).

A worked example: one query, scores [1, 3] in two tiles of one key each, values v1, v2.
    tile 1: m = 1, l = e^0 = 1,          acc = v1
    tile 2: m = 3, alpha = e^(1-3),      l = e^-2 * 1 + e^0,   acc = e^-2 v1 + v2
    out = acc / l = (e^-2 v1 + v2) / (e^-2 + 1) = (e^1 v1 + e^3 v2) / (e^1 + e^3): softmax([1, 3]) v.

Only (q, k, v, out, lse) are kept: O(T * hs) memory, plus O(tile^2) of temporaries.
This is the algorithm, not the speed of the CUDA kernel: NumPy still loops over tiles in Python,
so big tiles (128-512) are what make it fast. The fast engine runs the same loops compiled, with
threads over heads and tiles (``flash_forward_tiles`` and ``flash_sdpa_backward`` are its entry
points, zerollm/engine/fast/flash.py).

Shapes (as in zerollm.nn.attention): B batch, nkv key/value heads, g = nh // nkv query heads per kv
head, T query positions, Tk key positions, hs head size, tq/tk the sizes of one query/key tile.
q is (B, nkv, g, T, hs); k and v are (B, nkv, 1, Tk, hs).
"""

from typing import NamedTuple

import numpy as np

from zerollm.engine.amp import cast
from zerollm.engine import accelerated
from zerollm.io.errors import ZeroLLMError
from zerollm.nn.dropout import Dropout
from zerollm.nn.reductions import row_sums

# tile sizes (measured with benchmarks/attention_memory.py and the benchmark's attention rows, 2-core CPU):
DEFAULT_TILE = 256      # long sequences: of 128 / 256 / 512 the fastest from about 1024 keys on
SHORT_TILE = 128        # up to SHORT_UNTIL keys: several tiles, so that whole tiles above the causal
SHORT_UNTIL = 512       #   diagonal are skipped (at T = 256 one 256-tile is about 1.4x slower than three 128s)


def default_tile(Tk):
    """The tile size used when none is given, for Tk keys."""
    return SHORT_TILE if Tk <= SHORT_UNTIL else DEFAULT_TILE


class FlashOptions(NamedTuple):
    """What the tile loops need besides q, k and v."""
    causal: bool
    mask: np.ndarray | None  # the padding mask broadcast to (..., T, Tk): a view, no copy
    tile: int                # queries and keys per tile
    scale: float             # 1 / sqrt(hs)
    dropout: float           # the rate, applied when seed is not None
    seed: int | None         # dropout masks are generated from it per tile, forward and backward alike


class FlashCache(NamedTuple):
    q: np.ndarray            # (B, nkv, g, T, hs)
    k: np.ndarray            # (B, nkv, 1, Tk, hs)
    v: np.ndarray            # (B, nkv, 1, Tk, hs)
    out: np.ndarray          # (B, nkv, g, T, hs)
    lse: np.ndarray          # (B, nkv, g, T, 1) log sum_j exp(s_j); +inf for a row with every key hidden
    causal: bool
    mask: np.ndarray | None  # the padding mask broadcast to (..., T, Tk): a view, no copy
    tile: int
    scale: float
    dropout: float
    seed: int | None         # dropout masks are regenerated from it per tile in the backward


# ----------------------------------------------------------------------------
# tiles, masks and dropout

def _tiles(n, tile):
    """[0, n) cut into [start, stop) pieces: _tiles(7, 3) -> [(0, 3), (3, 6), (6, 7)]."""
    return [(i, min(i + tile, n)) for i in range(0, n, tile)]


def _key_tiles(i0, i1, Tk, offset, causal, tile):
    """The key tiles that the queries i0 .. i1-1 need.

    Query i sits at absolute position offset + i (offset = Tk - T with a KV cache, as in
    ``zerollm.nn.self_attention.causal_mask``). Causal: the LAST query of the tile sees keys up to
    offset + i1 - 1, so every key tile starting after that is entirely above the diagonal: skipped.
    """
    stop = min(Tk, offset + i1) if causal else Tk
    return [(j0, min(j0 + tile, Tk)) for j0 in range(0, stop, tile)]


class TileMask(NamedTuple):
    """Which entries of one (tq, tk) tile of scores are hidden. Row r of the tile is the query at
    absolute position q0 + r, column c the key at k0 + c: with ``causal`` a key after its query is
    hidden; ``padding`` is the padding mask's (..., tq, tk) tile (a view) or None."""
    q0: int
    k0: int
    causal: bool
    padding: np.ndarray | None

    def hidden(self, tq, tk):
        """Bool (..., tq, tk), True = hidden; None when every entry is visible."""
        hidden = None
        if self.causal and self.k0 + tk - 1 > self.q0:          # the tile crosses the diagonal
            rows = np.arange(self.q0, self.q0 + tq)[:, None]    # absolute query positions (tq, 1)
            hidden = np.arange(self.k0, self.k0 + tk)[None, :] > rows   # key after query: (tq, tk)
        if self.padding is not None:
            hidden = self.padding if hidden is None else (hidden | self.padding)
        return hidden


def _tile_mask(i0, i1, j0, j1, offset, causal, mask):
    return TileMask(offset + i0, j0, causal, None if mask is None else mask[..., i0:i1, j0:j1])


def _scores(q_s, k_j):
    """s = (q * scale) k^T for one tile: (B, nkv, g, tq, hs) @ (B, nkv, 1, hs, tk) -> (B, nkv, g, tq, tk)."""
    return q_s @ np.swapaxes(k_j, -1, -2)


def _hide(s, where):
    hidden = where.hidden(*s.shape[-2:])
    if hidden is not None:
        np.copyto(s, s.dtype.type(-np.inf), where=hidden)   # in place: no second (tq, tk) array


# ----------------------------------------------------------------------------
# the softmax of one tile (the fast engine has a kernel for each)

@accelerated
def tile_softmax_step(s, m, l, where):
    """One key tile of the online softmax, in place: the scores s (..., tq, tk) become
    p = exp(s - m_new) (0 where ``where`` hides them), the running max m and sum l (..., tq, 1) are
    updated. Returns alpha = exp(m_old - m_new), the factor that rescales what was summed before."""
    _hide(s, where)
    # the new max. A row that has seen only hidden keys so far still has max -inf;
    # measure it against 0 instead, so that exp(-inf - (-inf)) = NaN never happens.
    m_new = np.maximum(m, s.max(axis=-1, keepdims=True))
    m_ref = np.where(m_new == -np.inf, s.dtype.type(0), m_new)
    # WHY rescale: l (and the caller's acc) were summed as exp(s_old - m_old). Against the new max each
    # term must become exp(s_old - m_new) = exp(s_old - m_old) * exp(m_old - m_new),
    # so multiply both by alpha = exp(m_old - m_new) <= 1 (= 1 when the max did not grow).
    alpha = np.exp(m - m_ref)
    s -= m_ref
    np.exp(s, out=s)                                           # all <= 1: no overflow
    l *= alpha
    l += row_sums(s)
    m[...] = m_new
    return alpha


@accelerated
def tile_probs(s, lse, where):
    """The backward's weights of one tile, in place: s -> P = exp(s - lse), 0 where hidden.
    lse (..., tq, 1) is +inf on a row with every key hidden: P = 0 there."""
    _hide(s, where)
    s -= lse
    return np.exp(s, out=s)


@accelerated
def tile_softmax_backward(p, dp, D):
    """dS = P * (dP - D) in place in dp: the softmax backward with D = rowsum(dout * out) instead of
    a row sum over all Tk keys; hidden entries have P = 0, so they get no gradient."""
    dp -= D
    return np.multiply(p, dp, out=dp)


def tile_dropout(seed, p, shape, i0, j0, dtype):
    """The inverted-dropout multiplier (0 or 1/(1-p)) of the tile whose corner is (i0, j0); None
    without dropout (seed None).

    Each tile draws from its own generator, seeded by (seed, i0, j0), so the backward regenerates
    exactly the forward's mask without storing a T x Tk array.
    """
    if seed is None:
        return None
    keep = np.random.default_rng([seed, i0, j0]).random(shape) >= p
    return keep.astype(dtype) * dtype.type(1.0 / (1.0 - p))


def sum_groups(x):
    """(B, nkv, g, ., hs) -> (B, nkv, 1, ., hs): a shared k/v head gets the gradients of all g query
    heads that used it (grouped-query attention). With g == 1 nothing is added and nothing copied."""
    return x if x.shape[2] == 1 else x.sum(axis=2, keepdims=True)


def _check(q, k, v, mask, tile, dropout):
    if q.ndim != 5 or k.ndim != 5 or v.shape != k.shape or q.shape[-1] != k.shape[-1]:
        raise ZeroLLMError(f"flash attention needs q (B, nkv, g, T, hs) and k, v (B, nkv, 1, Tk, hs); "
                           f"got q {q.shape}, k {k.shape}, v {v.shape}")
    if isinstance(tile, bool) or not isinstance(tile, (int, np.integer)) or tile < 1:
        raise ZeroLLMError(f"tile must be a positive integer (e.g. {DEFAULT_TILE}), got {tile!r}")
    if dropout.training and dropout.p > 0 and dropout.rng is None:
        raise ZeroLLMError("attention dropout in training needs rng=np.random.default_rng(seed)")
    if mask is None:
        return None
    mask = np.asarray(mask)
    if mask.dtype != np.bool_:
        raise ZeroLLMError(f"mask must be boolean (True = hidden), got {mask.dtype}; use mask.astype(bool)")
    T, Tk = q.shape[-2], k.shape[-2]
    try:
        return np.broadcast_to(mask, np.broadcast_shapes(mask.shape, (T, Tk)))   # a view, no copy
    except ValueError:
        raise ZeroLLMError(f"mask of shape {mask.shape} does not broadcast to (B, 1, 1, T, Tk) = "
                           f"(B, 1, 1, {T}, {Tk})") from None


# ----------------------------------------------------------------------------
# forward

def flash_sdpa_forward(q, k, v, *, causal=True, mask=None, tile=None, dropout=Dropout()):
    """softmax(q k^T / sqrt(hs) + mask) v, one (tile x tile) block of scores at a time.

    Same arguments and result as ``sdpa_forward``, plus ``tile``: queries and keys per tile
    (None = ``default_tile(Tk)``). Returns (out, FlashCache).

    >>> rng = np.random.default_rng(0)
    >>> q, k, v = (rng.standard_normal((1, 1, 1, 5, 4)) for _ in range(3))
    >>> out, _ = flash_sdpa_forward(q, k, v, tile=2)
    >>> from zerollm.nn.attention import sdpa_forward
    >>> bool(np.allclose(out, sdpa_forward(q, k, v)[0]))
    True
    """
    tile = default_tile(k.shape[-2]) if tile is None else tile
    mask = _check(q, k, v, mask, tile, dropout)
    scale = 1.0 / np.sqrt(q.shape[-1])
    seed = int(dropout.rng.integers(2**63)) if dropout.training and dropout.p > 0 else None
    out, lse = flash_forward_tiles(q, k, v, FlashOptions(causal, mask, tile, scale, dropout.p, seed))
    return out, FlashCache(q, k, v, out, lse, causal, mask, tile, scale, dropout.p, seed)


@accelerated
def flash_forward_tiles(q, k, v, options):
    """The tile loops of the forward: returns (out, lse). The fast engine runs all of it in one
    kernel (zerollm/engine/fast/flash.py), with tile sizes of its own."""
    causal, mask, tile, scale, dropout, seed = options
    T, Tk = q.shape[-2], k.shape[-2]
    dt, offset = q.dtype, Tk - T
    out = np.empty_like(q)                                     # (B, nkv, g, T, hs)
    lse = np.empty(q.shape[:-1] + (1,), dt)                    # (B, nkv, g, T, 1)
    for i0, i1 in _tiles(T, tile):
        q_s = q[..., i0:i1, :] * dt.type(scale)                # (B, nkv, g, tq, hs): cheaper than scaling s
        # 1. per query row: running max m, running sum l of exp(s - m), running output acc = sum exp(s - m) v
        m = np.full(q_s.shape[:-1] + (1,), -np.inf, dt)        # (B, nkv, g, tq, 1)
        l = np.zeros_like(m)
        acc = np.zeros_like(q_s)                               # (B, nkv, g, tq, hs)
        for j0, j1 in _key_tiles(i0, i1, Tk, offset, causal, tile):
            # 2. this tile's scores, then its part of the online softmax: the causal diagonal and the
            #    padding hidden, the running max m and sum l updated, s turned into p = exp(s - m)
            s = _scores(q_s, k[..., j0:j1, :])                 # (B, nkv, g, tq, tk)
            alpha = tile_softmax_step(s, m, l, _tile_mask(i0, i1, j0, j1, offset, causal, mask))
            p = s                                              # the step turned the scores into weights
            drop = tile_dropout(seed, dropout, p.shape, i0, j0, dt)
            if drop is not None:
                p *= drop                                      # dropout hits the weights, not the normaliser
            # 3. acc was summed against the old max: rescale it, then add this tile's values
            acc *= alpha
            acc += cast(p) @ v[..., j0:j1, :]                  # (B,nkv,g,tq,tk) @ (B,nkv,1,tk,hs)
        # 4. normalise once at the end: out = acc / l. A row with every key hidden has l = 0 and gets 0
        #    (like the naive path); its lse is +inf, so the backward's exp(s - lse) is 0 there too.
        empty = l == 0
        out[..., i0:i1, :] = acc / np.where(empty, dt.type(1), l)
        lse[..., i0:i1, :] = np.where(empty, dt.type(np.inf), m + np.log(np.where(empty, dt.type(1), l)))
    return out, lse


# ----------------------------------------------------------------------------
# backward

@accelerated
def flash_sdpa_backward(dout, cache):
    """forward was S = q k^T * scale (hidden = -inf), P = softmax(S), P' = P * dropout, out = P' v, so:
        P   = exp(S - lse)                   recomputed per tile; lse makes it normalised at once
        dv  = P'^T dout                      dP' = dout v^T,   dP = dP' * dropout
        dS  = P * (dP - D),  D = rowsum(dout * out) = rowsum(dP * P)   (the softmax backward)
        dq  = dS k * scale                   dk = dS^T (q * scale)
    dk and dv are summed over the g query heads sharing a kv head. Returns (dq, dk, dv).
    """
    q, k, v, lse, mask, tile = cache.q, cache.k, cache.v, cache.lse, cache.mask, cache.tile
    T, Tk, dt = q.shape[-2], k.shape[-2], q.dtype
    offset, scale = Tk - T, dt.type(cache.scale)
    # 1. D_i = sum_j P_ij dP_ij: with out_i = sum_j P'_ij v_j this equals dout_i . out_i, an O(T hs) product
    D = np.sum(dout * cache.out, axis=-1, keepdims=True)      # (B, nkv, g, T, 1)
    dq, dk, dv = np.zeros_like(q), np.zeros_like(k), np.zeros_like(v)
    for i0, i1 in _tiles(T, tile):
        q_s, do_i = q[..., i0:i1, :] * scale, dout[..., i0:i1, :]   # (B, nkv, g, tq, hs)
        lse_i, D_i = lse[..., i0:i1, :], D[..., i0:i1, :]          # (B, nkv, g, tq, 1)
        for j0, j1 in _key_tiles(i0, i1, Tk, offset, cache.causal, tile):
            k_j, v_j = k[..., j0:j1, :], v[..., j0:j1, :]     # (B, nkv, 1, tk, hs)
            # 2. recompute this tile's weights from the saved logsumexp: no T x Tk matrix was stored
            s = _scores(q_s, k_j)
            p = tile_probs(s, lse_i, _tile_mask(i0, i1, j0, j1, offset, cache.causal, mask))   # (B,nkv,g,tq,tk)
            drop = tile_dropout(cache.seed, cache.dropout, p.shape, i0, j0, dt)
            p_used = cast(p if drop is None else p * drop)    # 16-bit under autocast, as in the forward
            # 3. out = P' v  =>  dv += P'^T dout,  dP' = dout v^T
            dv[..., j0:j1, :] += sum_groups(np.swapaxes(p_used, -1, -2) @ do_i)
            dp = do_i @ np.swapaxes(v_j, -1, -2)              # (B,nkv,g,tq,hs) @ (B,nkv,1,hs,tk)
            if drop is not None:
                dp *= drop
            # 4. softmax backward: dS = P * (dP - D), in place
            ds = cast(tile_softmax_backward(p, dp, D_i))   # 16-bit under autocast
            # 5. S = (q * scale) k^T  =>  dq += dS k (times scale, once at the end),  dk += dS^T (q * scale)
            dq[..., i0:i1, :] += ds @ k_j                     # (B,nkv,g,tq,tk) @ (B,nkv,1,tk,hs)
            dk[..., j0:j1, :] += sum_groups(np.swapaxes(ds, -1, -2) @ q_s)
    dq *= scale                                               # (B, nkv, g, T, hs): once, not per tile
    return dq, dk, dv
