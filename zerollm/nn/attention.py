"""Multi-head attention with one fused qkv projection, grouped-query heads, RoPE, masks, dropout.

Shapes used in this module:
    B batch, T query positions, Tk key positions (T unless a KV cache holds earlier tokens)
    C model width, nh query heads, nkv key/value heads, g = nh // nkv query heads per kv head
    hs head size = C // nh

Heads are an array axis, never a Python loop. Queries are kept as (B, nkv, g, T, hs) and keys and
values as (B, nkv, 1, Tk, hs): matmul broadcasting then lets every group of g query heads share
one key/value head (grouped-query attention, Ainslie et al. 2023) without copying k and v.
nkv == nh is ordinary multi-head attention, nkv == 1 is multi-query attention (Shazeer 2019).

QK-norm (Qwen3, OLMo 2; Dehghani et al. 2023): an RMSNorm over each head's hs numbers of q and of k,
with a gain of hs numbers shared by every head, before RoPE. It bounds the logits q.k, which keeps
big or long trainings from blowing up the softmax. The head size hs may differ from C // nh (Qwen3's
head_dim): c_attn is then (C, (nh + 2 nkv) hs) and c_proj (nh hs, C).
"""

from typing import NamedTuple

import numpy as np

from zerollm.engine.amp import autocast_format, cast
from zerollm.nn.self_attention import causal_mask, softmax, softmax_backward, softmax_unshifted
from zerollm.engine import accelerated
from zerollm.engine.memory import cache_blocks
from zerollm.io.errors import ZeroLLMError
from zerollm.nn.dropout import Dropout, DropoutCache, dropout_backward, dropout_forward
from zerollm.nn.flash import FlashCache, flash_sdpa_backward, flash_sdpa_forward, sum_groups
from zerollm.nn.lora import adapted_backward, adapted_forward
from zerollm.nn.norm import rmsnorm_backward, rmsnorm_forward
from zerollm.nn.position import rope_backward, rope_forward


# ----------------------------------------------------------------------------
# scaled dot-product attention on grouped heads (the "naive" implementation: full T x Tk scores)

class SDPACache(NamedTuple):
    q: np.ndarray         # (B, nkv, g, T, hs)
    k: np.ndarray         # (B, nkv, 1, Tk, hs)
    v: np.ndarray         # (B, nkv, 1, Tk, hs)
    att: np.ndarray       # (B, nkv, g, T, Tk) softmax weights
    att_used: np.ndarray  # att after dropout: what multiplied v
    drop: tuple           # DropoutCache
    scale: float
    causal: bool = True   # the keys after each query were hidden (their weights are 0)


def sdpa_forward(q, k, v, *, causal=True, mask=None, dropout=Dropout()):
    """softmax(q k^T / sqrt(hs) + mask) v on grouped heads. mask: bool, broadcastable to
    (B, 1, 1, T, Tk) after the caller inserted the head axes, True = hidden. dropout: a Dropout
    (zerollm.nn.dropout) on the attention weights."""
    scale = 1.0 / np.sqrt(q.shape[-1])
    if is_plain(mask, dropout.p, dropout.training):
        out, att = softmax_attention(q, k, v, scale, causal)   # the common case: one kernel on the fast engine
        return out, SDPACache(q, k, v, att, att, DropoutCache(None), scale, causal)
    att = attention_scores(q, k, scale)                     # (B, nkv, g, T, Tk)
    masked_softmax(att, causal=causal, mask=mask)           # in place; rows of all -inf give 0, not NaN
    att_used, drop = dropout_forward(att, dropout.p, dropout.rng, dropout.training)
    att_used = cast(att_used)                               # mixed precision: att @ v reads 16-bit weights
    out = att_used @ v                                      # (B,nkv,g,T,Tk) @ (B,nkv,1,Tk,hs) -> (B,nkv,g,T,hs)
    return out, SDPACache(q, k, v, att, att_used, drop, scale, causal)


def sdpa_backward(dout, cache, out=None):
    """forward was S = q k^T * scale, A = softmax(S), A' = dropout(A), out = A' v, so:
        dA' = dout v^T                       dv = A'^T dout   (summed over the g heads sharing v)
        dA  = dropout_backward(dA')
        dS  = A * (dA - sum_j dA * A)        (softmax Jacobian applied row by row)
        dq  = dS k * scale                   dk = dS^T q * scale (summed over the g heads)
    Masked entries have A = 0, so they get no gradient. Returns (dq, dk, dv); ``out``: optional
    arrays of their shapes (views of the dqkv buffer, say) that receive them.
    """
    q, k, v, att, att_used = cache.q, cache.k, cache.v, cache.att, cache.att_used
    if is_plain_cache(cache):
        return softmax_attention_backward(dout, q, k, v, att, cache.scale, cache.causal, out)
    datt = dout @ np.swapaxes(v, -1, -2)                                        # (B,nkv,g,T,Tk)
    dv = sum_groups(np.swapaxes(att_used, -1, -2) @ dout)                      # (B,nkv,1,Tk,hs)
    datt = dropout_backward(datt, cache.drop)
    ds = masked_softmax_backward(datt, att)                                     # (B,nkv,g,T,Tk), in place
    ds = cast(ds)                                                               # 16-bit under autocast
    dq, dk = attention_scores_backward(ds, q, k, cache.scale)
    return _into(out, (dq, dk, dv))


def is_plain(mask, dropout, training):
    """No padding mask, no dropout applied, no autocast: sdpa is softmax_attention then."""
    return mask is None and (dropout == 0.0 or not training) and autocast_format() is None


def is_plain_cache(cache):
    """The forward applied no dropout and no autocast: sdpa_backward is softmax_attention_backward then."""
    return cache.drop.mask is None and cache.att_used is cache.att and autocast_format() is None


def _into(out, grads):
    """``grads`` copied into the arrays ``out`` (when given), which are returned then."""
    if out is None:
        return grads
    for into, grad in zip(out, grads):
        into[...] = grad
    return tuple(out)


# query rows per step of the causal softmax_attention (and its backward). Smaller blocks skip more of the
# hidden keys, larger ones make larger products; 64 rows was the fastest at 6x384's and nanoGPT's shapes
# and within 3% of 128 at T = 1024, and every block size beat no blocks (the numbers:
# docs/profiles/design-decisions.md#numpy-engine-causal-attention-in-blocks-of-64-query-rows).
QUERY_BLOCK = 64


def query_blocks(T, Tk, causal, block=None):
    """(i0, i1, stop) for each block of query rows i0..i1-1: the keys 0..stop-1 are the ones its last
    row may see (all Tk without ``causal``; one block then). The queries are the last T of Tk
    positions (causal_mask), so a causal block of the first rows sees few keys.

    >>> list(query_blocks(4, 4, True, block=2)), list(query_blocks(4, 6, True, block=2))
    ([(0, 2, 2), (2, 4, 4)], [(0, 2, 4), (2, 4, 6)])
    """
    if not causal:
        yield 0, T, Tk
        return
    block = QUERY_BLOCK if block is None else block
    for i0 in range(0, T, block):
        i1 = min(i0 + block, T)
        yield i0, i1, min(Tk, max(Tk - T + i1, 0))


@accelerated
def softmax_attention(q, k, v, scale, causal):
    """The core of sdpa_forward without a padding mask, dropout or autocast (pre-training's case):
    A = softmax(q k^T * scale, the keys after each query hidden when ``causal``), out = A v.
    Returns (out, A). The fast engine runs it as one kernel per head (zerollm/engine/fast/sdpa.py).

    Speed: with ``causal`` about half of A is hidden, and its weights are 0. So the queries go in
    blocks of rows (query_blocks), and a block multiplies only the keys its last row sees: at T = 256
    in blocks of 64 that is 62% of the products of the full T x T scores, and the softmax reads no
    more than that either. The result is the same as the three lines

        att = attention_scores(q, k, scale); masked_softmax(att, causal=causal); out = att @ v

    up to the rounding of sums in another order."""
    T, Tk = q.shape[-2], k.shape[-2]
    if q.size == 0 or k.size == 0:                                      # nothing to block: the three lines
        att = attention_scores(q, k, scale)
        return masked_softmax(att, causal=causal) @ v, att
    att = np.empty(q.shape[:-1] + (Tk,), np.result_type(q, k))          # (B, nkv, g, T, Tk)
    out = np.empty(q.shape[:-1] + (v.shape[-1],), np.result_type(att, v))
    qs, kt = q * q.dtype.type(scale), transposed(k, T)                 # scale the smaller array (see attention_scores)
    table = np.where(causal_mask(T, Tk), att.dtype.type(-np.inf), att.dtype.type(0)) if causal else None
    for i0, i1, stop in query_blocks(T, Tk, causal):
        att[..., i0:i1, stop:] = 0                                      # the keys no row of the block sees
        if stop == 0:                                                   # more queries than keys: rows that see none
            out[..., i0:i1, :] = 0
            continue
        a = block_scores(qs[..., i0:i1, :], kt[..., :stop], att[..., i0:i1, :stop])
        block_softmax(att, i0, i1, stop, table)
        block_values(a, v[..., :stop, :], out[..., i0:i1, :])
    return out, att


@accelerated
def softmax_attention_backward(dout, q, k, v, att, scale, causal, out=None):
    """The backward of softmax_attention (sdpa_backward's steps without dropout): (dq, dk, dv),
    written into ``out`` when given. Hidden weights are 0, so ``causal`` changes nothing in the
    result; it lets the blocks (as in the forward) skip the hidden keys:

        dA = dout v^T    dS = A * (dA - sum_j dA A)    dq = scale dS k     (by blocks of query rows)
        dv = A^T dout                                  dk = scale dS^T q   (by blocks of keys)

    A key block's dv and dk read only the rows that see its keys, and are written once (summed over
    the g query heads that share a kv head), never added up block by block."""
    T, Tk = att.shape[-2:]
    kind = np.result_type(dout, att, q, k, v)
    direct = out is not None and all(o.dtype == kind for o in out)
    if direct:
        dq, dk, dv = out                               # the products write straight into the caller's arrays
    else:
        dq, dk, dv = np.empty(q.shape, kind), np.empty(k.shape, kind), np.empty(v.shape, kind)
    ds = np.empty(att.shape, kind)                     # dA, then dS; a block's keys past its stop stay unset
    vt = transposed(v, T)
    blocks = list(query_blocks(T, Tk, causal))
    for i0, i1, stop in blocks:
        if stop == 0:                                  # more queries than keys: rows that see none
            dq[..., i0:i1, :] = 0
            continue
        block_values_backward(dout[..., i0:i1, :], vt[..., :stop], ds[..., i0:i1, :stop])      # dA
        block_softmax_backward(ds, att, i0, i1, stop)                                         # dS
        block_scores_backward(ds[..., i0:i1, :stop], k[..., :stop, :], dq[..., i0:i1, :])     # dq
    for j0, j1, r0 in key_blocks(T, Tk, blocks):       # rows r0.. see keys j0..j1-1, and theirs are set
        key_block_values(att[..., r0:, j0:j1], dout[..., r0:, :], dv[..., j0:j1, :])
        key_block_scores(ds[..., r0:, j0:j1], q[..., r0:, :], dk[..., j0:j1, :])
    dq *= dq.dtype.type(scale)
    dk *= dk.dtype.type(scale)
    return (dq, dk, dv) if direct else _into(out, (dq, dk, dv))


# from this many query rows on, k^T and v^T are copied for the products (see transposed)
COPY_ROWS = 16


def transposed(x, rows):
    """x^T over the last two axes, (..., Tk, hs) -> (..., hs, Tk), as the right operand of products with
    ``rows`` query rows: copied into an array of its own from COPY_ROWS rows on, a view below that.

    Why a copy: OpenBLAS multiplies small matrices by a transposed right operand (q k^T with k^T a
    view) slower than by a plain one, by more than the copy costs at nanoGPT's and 6x384's shapes
    (docs/profiles/design-decisions.md#transposed-operands-copied). A decoding step (one query row
    against a KV cache) would pay more for the copy than the product, so few rows take the view."""
    t = np.swapaxes(x, -1, -2)
    return np.ascontiguousarray(t) if rows >= COPY_ROWS else t


def key_blocks(T, Tk, blocks):
    """(j0, j1, r0) for the backward's key blocks: the queries are the last T of Tk positions, so the
    keys before them (a KV cache's) are seen by every row, and each query block's own keys by its rows
    and the later ones. Every row r0.. of a key block has its dS set there (a block's stop).

    >>> list(key_blocks(4, 6, list(query_blocks(4, 6, True, block=2))))
    [(0, 4, 0), (4, 6, 2)]
    >>> list(key_blocks(4, 4, list(query_blocks(4, 4, False))))
    [(0, 4, 0)]
    """
    offset, start = Tk - T, 0
    for i0, i1, stop in blocks:
        if stop > start:
            yield start, stop, max(start - offset, 0)
            start = stop


# the steps of softmax_attention for one block of query rows or keys (each a function of its own, so
# that the profile, benchmarks/profile.py, times them apart)

def block_scores(q_rows, kt_keys, out):
    """out = q k^T of the block (q already scaled): (..., n, hs) @ (..., hs, stop)."""
    return np.matmul(q_rows, kt_keys, out=out)


def block_softmax(att, i0, i1, stop, table):
    """Rows i0..i1-1 of A, keys 0..stop-1: add the mask table (0 / -inf; None: no mask), then softmax in
    place, a few heads at a time so that both passes run in the CPU cache (engine.memory.cache_blocks).
    The table is added only to the block's last i1 - i0 keys: the keys before them are seen by every row."""
    heads = att.reshape(-1, *att.shape[-2:])                           # a view: att is C-contiguous
    edge = max(stop - (i1 - i0), 0)
    parts = cache_blocks(len(heads), (i1 - i0) * stop * att.itemsize)
    scratch = np.empty((parts[0].stop - parts[0].start, i1 - i0, stop), att.dtype)
    for part in parts:
        block = heads[part, i0:i1, :stop]
        if table is not None:
            block[..., edge:] += table[i0:i1, edge:stop]                # x + 0 = x, x - inf = -inf
        softmax_unshifted(block, scratch[:len(block)])


def block_values(a, v_keys, out):
    """out = A v of the block: (..., n, stop) @ (..., stop, hs)."""
    return np.matmul(a, v_keys, out=out)


def block_values_backward(d_out, vt_keys, out):
    """dA = dout v^T of a block of query rows, into ``out``."""
    return np.matmul(d_out, vt_keys, out=out)


def block_softmax_backward(ds, att, i0, i1, stop):
    """dS = A (dA - sum_j dA A) in place of dA (rows i0..i1-1, keys 0..stop-1), a few heads at a time."""
    d_heads, heads = ds.reshape(-1, *ds.shape[-2:]), att.reshape(-1, *att.shape[-2:])
    for part in cache_blocks(len(heads), (i1 - i0) * stop * att.itemsize):
        d = d_heads[part, i0:i1, :stop]
        softmax_backward(d, heads[part, i0:i1, :stop], out=d)


def block_scores_backward(ds_rows, k_keys, dq_out):
    """dq = dS k of a block of query rows (unscaled), into ``dq_out``."""
    return np.matmul(ds_rows, k_keys, out=dq_out)


def key_block_values(a_cols, dout_rows, dv_out):
    """dv = A^T dout of a block of keys, summed over the g query heads of a kv head, into ``dv_out``."""
    _group_product(np.swapaxes(a_cols, -1, -2), dout_rows, dv_out)


def key_block_scores(ds_cols, q_rows, dk_out):
    """dk = dS^T q of a block of keys (unscaled), summed over the g query heads, into ``dk_out``."""
    _group_product(np.swapaxes(ds_cols, -1, -2), q_rows, dk_out)


def _group_product(x, y, out):
    if x.shape[2] == 1:
        np.matmul(x, y, out=out)                       # one query head per kv head: straight into out
    else:
        out[...] = sum_groups(x @ y)


# ----------------------------------------------------------------------------
# the steps of sdpa: scores, masked softmax, and their backward passes

def attention_scores(q, k, scale):
    """S = (q * scale) k^T: (B,nkv,g,T,hs) @ (B,nkv,1,hs,Tk) -> (B,nkv,g,T,Tk).

    Speed: scaling q (T x hs numbers) instead of S (T x Tk) saves a pass over the biggest array.
    """
    return (q * q.dtype.type(scale)) @ np.swapaxes(k, -1, -2)


def attention_scores_backward(ds, q, k, scale):
    """forward was S = q k^T * scale, so dq = dS k * scale and dk = dS^T q * scale (summed over the g
    query heads that share k). Returns (dq, dk).

    Speed: the scale multiplies the (T, hs) products, not the (T, Tk) matrix dS.
    """
    dq = ds @ k                                                 # (B,nkv,g,T,Tk) @ (B,nkv,1,Tk,hs)
    dq *= dq.dtype.type(scale)
    dk = sum_groups(np.swapaxes(ds, -1, -2) @ q)                # (B,nkv,1,Tk,hs)
    dk *= dk.dtype.type(scale)
    return dq, dk


@accelerated
def masked_softmax(att, *, causal=True, mask=None):
    """att <- softmax(att + M) along the last axis, in place; returns att. M is -inf where a key is
    hidden (after the query when ``causal``; True in the bool ``mask``) and 0 elsewhere.

    Speed: the score array is the biggest thing attention makes (B*nh*T*Tk numbers), so masking
    and softmax work on it in place. The mask is ADDED as a (T, Tk) table of 0 / -inf: one pass
    of float additions is cheaper than writing -inf through a boolean ``where``. Without a padding
    mask the heads go through mask and softmax a few at a time (engine.memory.cache_blocks), so that
    the six passes over a block run in the CPU cache instead of six passes over the whole array.
    """
    T, Tk = att.shape[-2:]
    hidden = causal_mask(T, Tk) if causal else None         # (T, Tk)
    if mask is not None:
        hidden = mask if hidden is None else (hidden | mask)
    table = None if hidden is None else np.where(hidden, att.dtype.type(-np.inf), att.dtype.type(0))
    if mask is not None or not att.flags.c_contiguous or att.size == 0:    # a mask per sequence: all at once
        if table is not None:
            att += table                                     # x + 0 = x, x - inf = -inf
        return softmax(att, axis=-1, out=att)
    heads = att.reshape(-1, T, Tk)                           # a view: att is C-contiguous
    parts = cache_blocks(len(heads), T * Tk * att.itemsize)
    scratch = np.empty((parts[0].stop - parts[0].start, T, Tk), att.dtype)
    for part in parts:
        block = heads[part]
        if table is not None:
            block += table
        softmax_unshifted(block, scratch[:len(block)])
    return att


@accelerated
def masked_softmax_backward(datt, att):
    """dS = A * (dA - sum_j dA * A), in place in datt (hidden entries have A = 0: no gradient); a few
    heads at a time, as the forward."""
    if datt.shape != att.shape or not (datt.flags.c_contiguous and att.flags.c_contiguous) or att.size == 0:
        return softmax_backward(datt, att, out=datt)
    T, Tk = att.shape[-2:]
    d_heads, heads = datt.reshape(-1, T, Tk), att.reshape(-1, T, Tk)
    for part in cache_blocks(len(heads), T * Tk * att.itemsize):
        softmax_backward(d_heads[part], heads[part], out=d_heads[part])
    return datt


# ----------------------------------------------------------------------------
# splitting the fused qkv projection into heads, and merging back

def split_qkv(qkv, n_head, n_kv_head):
    """(B, T, (nh + 2 nkv) hs) -> q (B, nkv, g, T, hs), k and v (B, nkv, 1, T, hs).

    Column layout of c_attn: [q | k | v]; inside each block head j owns columns j*hs .. (j+1)*hs,
    so query head j = kv_head * g + i belongs to kv head j // g (as in Hugging Face's GQA).
    """
    B, T, width = qkv.shape
    hs = width // (n_head + 2 * n_kv_head)
    g = n_head // n_kv_head
    nq = n_head * hs
    q = qkv[..., :nq].reshape(B, T, n_kv_head, g, hs).transpose(0, 2, 3, 1, 4)
    k = qkv[..., nq:nq + n_kv_head * hs].reshape(B, T, n_kv_head, 1, hs).transpose(0, 2, 3, 1, 4)
    v = qkv[..., nq + n_kv_head * hs:].reshape(B, T, n_kv_head, 1, hs).transpose(0, 2, 3, 1, 4)
    return q, k, v


def merge_heads(x):
    """(B, nkv, g, T, hs) -> (B, T, nkv * g * hs): heads side by side again, in head order."""
    B, nkv, g, T, hs = x.shape
    return x.transpose(0, 3, 1, 2, 4).reshape(B, T, nkv * g * hs)


# ----------------------------------------------------------------------------
# the whole attention sub-layer

class AttentionWeights(NamedTuple):
    """The two linears of the layer, named as in GPT-2's checkpoints (attn.c_attn, attn.c_proj), and the
    gains of QK-norm when the layer has it (attn.q_norm, attn.k_norm)."""
    w_attn: np.ndarray          # (C, (nh + 2 nkv) hs): q, k and v in one matmul
    b_attn: np.ndarray | None   # ((nh + 2 nkv) hs,)
    w_proj: np.ndarray          # (nh hs, C)
    b_proj: np.ndarray | None   # (C,)
    q_norm: np.ndarray | None = None   # (hs,): RMSNorm gain over each query head (Qwen3); None = no QK-norm
    k_norm: np.ndarray | None = None   # (hs,): the same for each key head


class AttentionConfig(NamedTuple):
    """How the layer is built: the same for every call (the model's GPTConfig has each field)."""
    n_head: int
    n_kv_head: int
    causal: bool = True         # False: every query sees every key (an encoder)
    dropout: float = 0.0        # on the attention weights and on the output, in training
    attn_impl: str = "naive"    # 'naive' (sdpa_forward, full T x Tk scores) or 'flash' (zerollm.nn.flash, O(T))
    norm_eps: float = 1e-6      # QK-norm's epsilon (the model's norm_eps)


class ForwardPass(NamedTuple):
    """What one forward pass of the model tells each layer besides its input and weights."""
    rope: tuple | None = None       # (cos, sin) tables of shape (T, hs) for these positions
    mask: np.ndarray | None = None  # bool (B, T, T) or (T, T), True = hidden (e.g. padding), on top of causal
    kv: object = None               # KVCache (zerollm.model.kvcache): keys and values of earlier tokens
    rng: np.random.Generator | None = None   # dropout's random numbers
    training: bool = False          # dropout is on in training only


class MHACache(NamedTuple):
    attn: tuple             # LinearCache of c_attn
    rope_q: tuple | None
    rope_k: tuple | None
    sdpa: SDPACache         # or FlashCache with attn_impl='flash'
    proj: tuple             # LinearCache of c_proj
    drop: tuple             # DropoutCache of the residual dropout
    n_head: int
    n_kv_head: int
    qk_norm: tuple | None = None    # (NormCache of q, NormCache of k) with QK-norm


def mha_forward(x, weights, config, run=ForwardPass(), *, layer=0, lora=None):
    """Multi-head self-attention: x (B, T, C) -> (B, T, C).

    weights: AttentionWeights; config: AttentionConfig; run: ForwardPass (RoPE tables, padding mask,
    KV cache, dropout's rng and training). With a KV cache the new keys/values are stored in it under
    ``layer``, the queries attend to everything it holds, and its own mask (causal + window rule)
    replaces ``config.causal``.
    lora: optional (Adapted of c_attn, Adapted of c_proj) (zerollm.nn.lora): frozen projections with adapters.
    """
    w_attn, b_attn, w_proj, b_proj = weights[:4]
    n_head, n_kv_head, causal, dropout, attn_impl = config[:5]
    rope, mask, kv, rng, training = run
    lora_attn, lora_proj = lora or (None, None)
    if attn_impl not in ("naive", "flash"):
        raise ZeroLLMError(f"attn_impl must be 'naive' or 'flash', got {attn_impl!r}")
    qkv, attn = adapted_forward(x, w_attn, b_attn, lora_attn, rng, training)   # (B, T, C) -> (B, T, (nh + 2 nkv) hs)
    q, k, v = split_qkv(qkv, n_head, n_kv_head)            # (B,nkv,g,T,hs), (B,nkv,1,T,hs) x2
    q, k, qk_norm = qk_norm_forward(q, k, weights, config.norm_eps)
    rope_q = rope_k = None
    if rope is not None:
        q, rope_q = rope_forward(q, *rope)
        k, rope_k = rope_forward(k, *rope)
    q, k, v = cast(q), cast(k), cast(v)                    # mixed precision: 16-bit inputs of q k^T and a v
    if kv is not None:
        T = k.shape[-2]
        k, v, mask = kv.update(layer, k, v)                # (B,nkv,1,Tk,hs) x2, (T, Tk)
        causal = False                                     # the cache's mask already hides the future
        if T > 1 and kv.causal_only:                       # a prompt, or a chunk of one: the causal rule alone,
            mask, causal = None, True                      # which the fused kernel takes (one token: its mask
                                                           # path is 1.4-3.9x faster than the kernel)
    if mask is not None and mask.ndim == 3:
        mask = mask[:, None, None]                         # (B, T, Tk) -> (B, 1, 1, T, Tk)
    sdpa = flash_sdpa_forward if attn_impl == "flash" else sdpa_forward
    y, sd = sdpa(q, k, v, causal=causal, mask=mask, dropout=Dropout(dropout, rng, training))
    y = merge_heads(y)                                     # (B, nkv, g, T, hs) -> (B, T, C)
    out, proj = adapted_forward(y, w_proj, b_proj, lora_proj, rng, training)   # (B, T, C) -> (B, T, C)
    out, drop = dropout_forward(out, dropout, rng, training)
    return out, MHACache(attn, rope_q, rope_k, sd, proj, drop, n_head, n_kv_head, qk_norm)


def qk_norm_forward(q, k, weights, eps):
    """q, k <- RMSNorm over the last axis (each head's hs numbers), with the gains weights.q_norm and
    weights.k_norm; unchanged (and no cache) when the layer has no QK-norm. Returns (q, k, cache)."""
    if weights.q_norm is None:
        return q, k, None
    q, q_cache = rmsnorm_forward(q, weights.q_norm, eps)      # (B, nkv, g, T, hs)
    k, k_cache = rmsnorm_forward(k, weights.k_norm, eps)      # (B, nkv, 1, T, hs)
    return q, k, (q_cache, k_cache)


def qk_norm_backward(dq, dk, cache):
    """forward was q' = rmsnorm(q) * w_q per head (and k' likewise), so each head's gradient goes through
    rmsnorm_backward, and the gain's gradient sums over every head and position. Returns
    (dq, dk, (dw_q, dw_k)); (dq, dk, None) without QK-norm."""
    if cache is None:
        return dq, dk, None
    dq, dw_q = rmsnorm_backward(dq, cache[0])
    dk, dw_k = rmsnorm_backward(dk, cache[1])
    return dq, dk, (dw_q, dw_k)


def mha_backward(dout, cache, grads=None):
    """Returns (dx, dw_attn, db_attn, dw_proj, db_proj, dq_norm, dk_norm): the forward steps in reverse.
    With LoRA the weight gradients are None and the adapters' go into ``grads``; without QK-norm the
    last two are None."""
    dout = dropout_backward(dout, cache.drop)
    dy, dw_proj, db_proj = adapted_backward(dout, cache.proj, grads)           # (B, T, C)
    B, T, C = dy.shape                                     # C here: nh hs, c_proj's input
    nkv, g = cache.n_kv_head, cache.n_head // cache.n_kv_head
    dy = cast(dy).reshape(B, T, nkv, g, C // cache.n_head).transpose(0, 2, 3, 1, 4)   # (B,nkv,g,T,hs)
    # the inverse of split_qkv: split_qkv on the gradient buffer gives views of the right places,
    # so each head's gradient is written once, straight into (B, T, (nh + 2 nkv) hs)
    dqkv = np.empty((B, T, C // cache.n_head * (cache.n_head + 2 * nkv)), dtype=dy.dtype)
    views = split_qkv(dqkv, cache.n_head, nkv)
    if isinstance(cache.sdpa, FlashCache):
        dq, dk, dv = flash_sdpa_backward(dy, cache.sdpa)
    else:                                                  # without RoPE the gradients go into dqkv at once
        direct = cache.rope_q is None and cache.qk_norm is None
        dq, dk, dv = sdpa_backward(dy, cache.sdpa, out=views if direct else None)
    if cache.rope_q is not None:
        dq = rope_backward(dq, cache.rope_q)
        dk = rope_backward(dk, cache.rope_k)
    dq, dk, dnorm = qk_norm_backward(dq, dk, cache.qk_norm)
    for view, grad in zip(views, (dq, dk, dv)):
        if grad is not view:
            view[...] = grad
    dx, dw_attn, db_attn = adapted_backward(dqkv, cache.attn, grads)
    return (dx, dw_attn, db_attn, dw_proj, db_proj, *(dnorm or (None, None)))
