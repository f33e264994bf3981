"""A transformer block for decode rows in a few compiled calls: the fast engine's ``block_forward``.

Reference: ``zerollm.nn.block.block_forward``. Decoding one token per row through a KV cache, the
reference's block makes about sixty small NumPy calls (norm statistics, reshapes, split_qkv's
transposes, RoPE's concatenations, the cache's fancy-index writes, a masked softmax, residual adds,
named tuples of caches), each a few microseconds of Python on (B, C) arrays of a few kilobytes. On a
GPT-2-124M-shaped Q8_0 file that was about two thirds of a token's time, the matrix products the other
third (docs/gguf.md#decode-speed). Here the same steps are five compiled kernels around the four matrix
products, which stay those of the rest of the fast engine (BLAS for float32 weights, engine/fast/quant.py
and kquant.py for blocks):

    _norm_rows      h = norm_1(x)                                  (LayerNorm or RMSNorm, one pass a row)
    product         qkv = h @ W_attn
    _attend         + b_attn; RoPE on q and k; k, v written into the cache at each row's position;
                    softmax(q k^T / sqrt(hs)) v over that row's slots 0..pos, every head
    product         a = y @ W_proj
    _add_norm       x1 = x + (a + b_proj);  h = norm_2(x1)
    product         f = h @ W_fc
    _activate       g = gelu(f + b_fc), or silu(gate) * up for SwiGLU
    product         m = g @ W_proj2
    _add_rows       x1 += m + b_proj2

Each step computes what the reference computes, in float32, with sums taken in another order and exp
from engine/fast/jit.py's exp32 (<= 2 ulp): logits within the fast engine's tolerances of the
reference, greedy tokens the same (tests/test_fast_decode.py).

Taken only for what it was written for, else NotImplemented and the reference runs: one new token per
row (T = 1) through a full (not rolling) KV cache with room for it, inference (no dropout, no LoRA, no
padding mask), a dense block (no mixture of experts, no QK-norm), tanh GELU or SwiGLU, float32 without
autocast, weights float32 (i, o) or a block format engine/fast/quant.py multiplies. A prompt's prefill
(T > 1) keeps the reference's block, whose products are large enough for Python not to matter.
The block keeps no activations (there is no backward through a KV cache): its cache has moe=False and
nothing else.

Python around the kernels is kept small, as a step repeats it for every layer: a layer's weights and config are
checked once and the answer kept (``_layer_weights``: weak references, checked again when any weight is
replaced), the step's positions and RoPE tables are made once for all layers, and the quantized products go
straight to the integer kernels (quant.integer_product), each one compiled call that also rounds x to 8 bits.
At 2 threads or more the attention over a long cache (ATTEND_SPLIT_FROM) of a quantized layer splits its (row, head)
pairs between numba's threads (``_attend_threaded``: each pair the same arithmetic, y bit for bit the serial kernel's);
it is the largest part of a step that is not a matrix product, and otherwise ran on one thread while the other waited.
Between float32 layers' BLAS products it stays on one thread: the two thread pools, each spinning after its call,
took the cores from each other.
"""

import operator
import weakref
from typing import NamedTuple

import numpy as np
from numba import prange

from zerollm.engine.amp import autocast_format, block_products_exact
from zerollm.engine.fast import qgemm
from zerollm.engine.fast.blas import run_threaded, thread_cap
from zerollm.engine.fast.jit import exp32, inline, kernel, parallel_kernel
from zerollm.engine.fast.norm import row_mean_rstd
from zerollm.engine.fast.quant import SLAB_FROM, integer_product, quantized_matmul
from zerollm.engine.fast.rows import (column_rows, packless_product, packless_rows, rows_product, split_product,
                                      split_rows)

BLOCK_KINDS = ("q8_0", "q4_0", "q4_K", "q5_K", "q6_K")   # what quant.quantized_matmul multiplies as stored
_NONE = np.zeros(0, np.float32)                           # "no bias": one numba signature for both cases
_NO_ROPE = np.zeros((1, 0), np.float32)               # one row of no angles: RoPE off


class FusedBlockCache(NamedTuple):
    """What the model reads of a block's cache when it keeps none (zerollm.model.gpt: ``c.moe``)."""
    moe: bool = False


# ----------------------------------------------------------------------------
# the kernels

@kernel
def _norm_row(x, w, b, eps, rms, out):
    """out = norm(x) * w (+ b) for one row: RMSNorm, or LayerNorm with the biased variance."""
    mean, rstd = row_mean_rstd(x, np.float32(eps), not rms)
    for c in range(x.shape[0]):
        v = (x[c] - mean) * rstd * w[c]
        out[c] = v + b[c] if b.shape[0] else v


@kernel
def _norm_rows(x, w, b, eps, rms, out):
    for n in range(x.shape[0]):
        _norm_row(x[n], w, b, eps, rms, out[n])


@kernel
def _add_norm(x, a, ba, w, b, eps, rms, x_out, h_out):
    """x_out = x + (a + ba) (the attention's output with its bias, then the residual), h_out = norm(x_out)."""
    N, C = x.shape
    for n in range(N):
        for c in range(C):
            v = a[n, c] + ba[c] if ba.shape[0] else a[n, c]
            x_out[n, c] = x[n, c] + v
        _norm_row(x_out[n], w, b, eps, rms, h_out[n])


@kernel
def _add_rows(x, m, bm):
    """x += m + bm (the MLP's output with its bias, then the residual), in place."""
    N, C = x.shape
    for n in range(N):
        for c in range(C):
            x[n, c] += m[n, c] + bm[c] if bm.shape[0] else m[n, c]


_K = np.float32(-2.0 * np.sqrt(2.0 / np.pi))               # -2 sqrt(2/pi): exp(-2u) for the tanh GELU
_CK = np.float32(0.044715 * (-2.0 * np.sqrt(2.0 / np.pi)))


@kernel
def _activate(f, bf, swiglu, out):
    """GELU (tanh form, as x sigmoid(2u)) of f + bf, or for SwiGLU silu(gate) * up with [gate | up] = f + bf."""
    N = f.shape[0]
    H = out.shape[1]
    one = np.float32(1.0)
    for n in range(N):
        for i in range(H):
            v = f[n, i] + bf[i] if bf.shape[0] else f[n, i]
            if swiglu:
                u = f[n, H + i] + bf[H + i] if bf.shape[0] else f[n, H + i]
                out[n, i] = (v * (one / (one + exp32(-v)))) * u
            else:
                out[n, i] = v * (one / (exp32(((v * v) * _CK + _K) * v) + one))


@kernel
def _rotate(src, bias, at, cos, sin, out):
    """out = src[at:at + hs] (+ bias[at:at + hs]), turned by RoPE (rotate-half layout) unless cos is empty."""
    hs = out.shape[0]
    half = hs // 2
    for i in range(hs):
        out[i] = src[at + i] + bias[at + i] if bias.shape[0] else src[at + i]
    if cos.shape[0]:
        for i in range(half):
            a, b = out[i], out[half + i]
            out[i] = a * cos[i] - b * sin[i]
            out[half + i] = b * cos[half + i] + a * sin[half + i]


@kernel
def _store_new(qkv, bias, cos, sin, kc, vc, pos):
    """Each row b's new key (with the bias, turned by RoPE) and value into slot pos[b] of the cache kc, vc."""
    B = qkv.shape[0]
    nkv, hs = kc.shape[1], kc.shape[3]
    nq = qkv.shape[1] - 2 * nkv * hs
    kn = np.empty(hs, np.float32)
    for b in range(B):
        p = pos[b]
        r = b if cos.shape[0] > 1 else 0
        for h in range(nkv):
            _rotate(qkv[b], bias, nq + h * hs, cos[r], sin[r], kn)
            for i in range(hs):
                kc[b, h, p, i] = kn[i]
                at = nq + nkv * hs + h * hs + i
                vc[b, h, p, i] = qkv[b, at] + bias[at] if bias.shape[0] else qkv[b, at]


@inline
def _attend_head(qkv, bias, cos, sin, kc, vc, pos, n_head, y, item, q, scores, acc):
    """Query head j = item % n_head of row b = item // n_head (turned by RoPE) over slots 0..pos[b] of its
    key/value head j // g: y[b, j hs:(j + 1) hs] = softmax(q k^T / sqrt(hs)) v. q, acc: hs floats of scratch,
    scores: S floats."""
    b, j = item // n_head, item % n_head
    nkv, hs = kc.shape[1], kc.shape[3]
    kvh = j // (n_head // nkv)
    p = pos[b]
    r = b if cos.shape[0] > 1 else 0
    scale = np.float32(1.0 / np.sqrt(np.float64(hs)))
    _rotate(qkv[b], bias, j * hs, cos[r], sin[r], q)
    m = np.float32(-np.inf)
    for t in range(p + 1):
        s = np.float32(0.0)
        for i in range(hs):
            s += q[i] * kc[b, kvh, t, i]
        s *= scale
        scores[t] = s
        m = max(m, s)
    total = np.float32(0.0)
    for t in range(p + 1):
        e = exp32(scores[t] - m)
        scores[t] = e
        total += e
    acc[:] = 0
    for t in range(p + 1):
        w = scores[t]
        for i in range(hs):
            acc[i] += w * vc[b, kvh, t, i]
    inv = np.float32(1.0) / total
    for i in range(hs):
        y[b, j * hs + i] = acc[i] * inv


@kernel
def _attend(qkv, bias, cos, sin, kc, vc, pos, n_head, y):
    """For each row b at position p = pos[b]: its new key and value (with the bias, k turned by RoPE) go
    into slot p of the cache kc, vc (B, nkv, S, hs); each query head j (turned by RoPE) attends to slots
    0..p of its key/value head j // g; y[b, j hs:(j + 1) hs] = softmax(q k^T / sqrt(hs)) v.
    cos, sin: (B, hs), or (1, hs) for every row, or (1, 0) without RoPE."""
    _store_new(qkv, bias, cos, sin, kc, vc, pos)
    S, hs = kc.shape[2], kc.shape[3]
    q, acc, scores = np.empty(hs, np.float32), np.empty(hs, np.float32), np.empty(S, np.float32)
    for item in range(qkv.shape[0] * n_head):
        _attend_head(qkv, bias, cos, sin, kc, vc, pos, n_head, y, item, q, scores, acc)


@parallel_kernel
def _attend_threaded(qkv, bias, cos, sin, kc, vc, pos, n_head, y):
    """_attend with the (row, head) pairs split between numba's threads: each pair is the same arithmetic as on
    one thread, so y is bit for bit _attend's."""
    _store_new(qkv, bias, cos, sin, kc, vc, pos)
    S, hs = kc.shape[2], kc.shape[3]
    for item in prange(qkv.shape[0] * n_head):
        q, acc, scores = np.empty(hs, np.float32), np.empty(hs, np.float32), np.empty(S, np.float32)
        _attend_head(qkv, bias, cos, sin, kc, vc, pos, n_head, y, item, q, scores, acc)


# Attention is split between threads from this many cached key numbers read a step (heads x slots x head size,
# the longest row's): a threaded launch costs about 5 us more than a serial call (blas.run_threaded). One row of a
# Llama-124M-shaped step (12 heads of 64, best of 3000, load 3.6): 64 slots 10.4 us serial / 9.9 us on 2 threads,
# 128 slots 17.7 / 13.7, 192 slots 25.5 / 17.7; so from about 86 slots at that width.
ATTEND_SPLIT_FROM = 1 << 16


# ----------------------------------------------------------------------------
# when the fused block applies, and the block itself

def _weight_ok(w, n_in):
    """A weight the fused block multiplies: float32 (n_in, o), or blocks of a kind quant.py takes."""
    if isinstance(w, np.ndarray):
        return w.dtype == np.float32 and w.ndim == 2 and w.shape[0] == n_in
    kind = getattr(w, "kind", None)
    if kind == "stacked":                         # parts of several kinds, each multiplied in its own blocks
        return w.shape[1] == n_in and all(_weight_ok(p, n_in) for p in w.parts)
    if kind not in BLOCK_KINDS or w.shape[1] != n_in:
        return False
    if kind in ("q8_0", "q4_0"):
        return w.scales.dtype == np.float32 and w.scales.flags.c_contiguous and w.codes.flags.c_contiguous
    return w.blocks.flags.c_contiguous


def _product(h, w, threads):
    """h (N, i) @ the weight: BLAS for float32 (i, o), the block kernels for a quantized (o, i): straight to the
    integer kernels (quant.integer_product: the weights were checked with the layer), or through quantized_matmul
    when threads is 0 (many rows, or float products asked for)."""
    if isinstance(w, np.ndarray):
        # 2-6 rows (a decode step of a few requests): w read once (engine/fast/rows.py); BLAS would pack it first.
        # One row against a large w: four streams (rows.ONE_ROW_FROM_BYTES). 7 rows and more on AVX-512: the
        # register-tile sgemm, which packs nothing (rows.packless_rows; threads is 0 from qgemm.ROWS_FROM rows)
        if threads and column_rows(h, w, threads):
            # one row on this thread: four streams take what memory gives a core (inside blas.own_threads, split over
            # numba's threads, GPT-2's decode step took 24 ms against 20)
            return rows_product(h, w, threads if h.shape[0] > 1 else 1)
        threads = threads or thread_cap()
        if split_rows(h, w, threads):                  # the server's thread (rows.serving_threads)
            return split_product(h, w, threads)
        return packless_product(h, w) if packless_rows(h, w, threads) else h @ w
    return integer_product(h, w, threads) if threads else quantized_matmul(h, w)


def _float_or_none(a, n):
    return a is None or (isinstance(a, np.ndarray) and a.dtype == np.float32 and a.shape == (n,)
                         and a.flags.c_contiguous)


NAMES = ("ln_1.weight", "ln_1.bias", "ln_2.weight", "ln_2.bias", "attn.c_attn.weight", "attn.c_attn.bias",
         "attn.c_proj.weight", "attn.c_proj.bias", "mlp.c_fc.weight", "mlp.c_fc.bias", "mlp.c_proj.weight",
         "mlp.c_proj.bias")


def _layer_fits(w, cfg, layer, C):
    """Do a block's config and weights (in NAMES' order) suit the fused block at width C?"""
    if (cfg.is_moe(layer) or getattr(cfg, "qk_norm", False) or not cfg.causal or cfg.mlp not in ("gelu", "swiglu")
            or (cfg.mlp == "gelu" and cfg.gelu != "tanh")):
        return False
    H = cfg.n_inner
    fc = 2 * H if cfg.mlp == "swiglu" else H
    qkv = (cfg.n_head + 2 * cfg.n_kv_head) * cfg.head_size
    for i, (n_in, n_out) in enumerate(((C, C), (C, C), (C, qkv), (cfg.attn_width, C), (C, fc), (H, C))):
        weight, bias = w[2 * i], w[2 * i + 1]
        if i < 2:                                                    # the norms
            if not (weight is not None and _float_or_none(weight, C) and _float_or_none(bias, C)):
                return False
        elif not (_weight_ok(weight, n_in) and _float_or_none(bias, n_out)):
            return False
    return True


def _none():
    return None


class _Layer(NamedTuple):
    """What was decided about one block of one model: its parameter names, weak references to its weights and
    its config as they were when checked, and whether they fit."""
    names: tuple
    refs: tuple
    cfg: weakref.ref
    fits: bool


_LAYERS = {}            # (id(params), prefix, layer, C) -> _Layer
_MAX_LAYERS = 4096      # forgotten all at once past this (dropped models leave their small entries behind)


def _layer_weights(params, prefix, cfg, layer, C):
    """The block's weights in NAMES' order, or None where the fused block cannot take them. The checks run once
    per block, not once per step: the answer is kept until any weight or the config is replaced by another
    object. Only weak references are kept, so a dropped model's weights are freed."""
    key = (id(params), prefix, layer, C)
    known = _LAYERS.get(key)
    get = params.get
    if known is not None and known.cfg() is cfg:
        w = tuple(map(get, known.names))
        if all(map(operator.is_, w, [r() for r in known.refs])):
            return w if known.fits else None
    names = tuple(prefix + n for n in NAMES)
    w = tuple(map(get, names))
    fits = _layer_fits(w, cfg, layer, C)
    try:
        refs = tuple(_none if v is None else weakref.ref(v) for v in w)
        cfg_ref = weakref.ref(cfg)
    except TypeError:                             # an object that takes no weak reference: checked every step
        return w if fits else None
    if len(_LAYERS) >= _MAX_LAYERS:
        _LAYERS.clear()
    _LAYERS[key] = _Layer(names, refs, cfg_ref, fits)
    return w if fits else None


_SHARED_POS = {}        # (B, p) -> every row at position p, the last step's only


def _positions(kv, B, S):
    """Each row's position as int64 (B,) and the largest of them, or None where one would not fit the cache's S
    slots."""
    pos = kv.pos
    if isinstance(pos, np.ndarray):
        if pos.dtype != np.int64 or pos.shape != (B,) or not pos.flags.c_contiguous:
            return None
        top = int(pos.max(initial=0))
        return None if top >= S else (pos, top)
    p = int(pos)
    if p >= S:
        return None
    got = _SHARED_POS.get((B, p))
    if got is None:
        _SHARED_POS.clear()
        got = _SHARED_POS[B, p] = np.full(B, p, np.int64)
    return got, p


def _plan(x, params, prefix, cfg, run, layer, lora):
    """The weights of the fused block in NAMES' order, each row's position and the largest, or None where the
    reference must run."""
    if (run is None or lora is not None or run.training or run.mask is not None or not isinstance(x, np.ndarray)
            or x.dtype != np.float32 or x.ndim != 3 or x.shape[1] != 1 or autocast_format() is not None):
        return None
    kv = run.kv
    if kv is None or kv.rolling or layer >= len(kv.k):
        return None
    B, _, C = x.shape
    kc, vc = kv.k[layer], kv.v[layer]
    if kc.dtype != np.float32 or not kc.flags.c_contiguous or not vc.flags.c_contiguous or kc.shape[0] != B:
        return None
    w = _layer_weights(params, prefix, cfg, layer, C)
    if w is None:
        return None
    pos = _positions(kv, B, kc.shape[-2])
    return None if pos is None else (w, *pos)


_ROPE = {}              # id of the last step's (cos, sin) -> (the pair itself, its tables as (rows, hs))


def _rope_rows(run, B, hs):
    """RoPE's cos and sin as (rows, hs) float32 (one row for all, or one per row), or the empty tables. Every
    block of a step gets the same pair: turned into tables once."""
    if run.rope is None:
        return _NO_ROPE, _NO_ROPE
    got = _ROPE.get(id(run.rope))
    if got is not None and got[0] is run.rope and got[1][0].shape[1] == hs:
        cos, sin = got[1]
    else:
        cos, sin = (np.ascontiguousarray(t, np.float32).reshape(-1, hs) for t in run.rope)
        _ROPE.clear()
        _ROPE[id(run.rope)] = (run.rope, (cos, sin))
    if cos.shape[0] not in (1, B):
        return None
    return cos, sin


def _bias(b):
    return _NONE if b is None else b


def block_forward(x, params, prefix, cfg, run=None, *, layer=0, lora=None):
    plan = _plan(x, params, prefix, cfg, run, layer, lora)
    if plan is None:
        return NotImplemented
    (ln1, ln1_b, ln2, ln2_b, w_attn, b_attn, w_proj, b_proj, w_fc, b_fc, w_proj2, b_proj2), pos, top = plan
    B, _, C = x.shape
    hs, nkv = cfg.head_size, cfg.n_kv_head
    rope = _rope_rows(run, B, hs)
    if rope is None:
        return NotImplemented
    rms, eps = cfg.norm == "rmsnorm", float(cfg.norm_eps)
    # 0: through quantized_matmul, which sends several rows to qgemm's integer GEMM, and float products to theirs
    threads = 0 if B >= min(qgemm.ROWS_FROM, SLAB_FROM) or block_products_exact() else thread_cap()
    x2 = x.reshape(B, C)
    h = np.empty((B, C), np.float32)
    _norm_rows(x2, ln1, _bias(ln1_b), eps, rms, h)
    qkv = _product(h, w_attn, threads)                                                # (B, (nh + 2 nkv) hs)
    kc, vc = run.kv.k[layer], run.kv.v[layer]                                # (B, nkv, 1, S, hs) each
    S = kc.shape[-2]
    y = np.empty((B, cfg.n_head * hs), np.float32)
    args = (qkv, _bias(b_attn), rope[0], rope[1], kc.reshape(B, nkv, S, hs), vc.reshape(B, nkv, S, hs), pos,
            cfg.n_head, y)
    # not between BLAS products (float32 weights): numba's threads, still spinning after the attention, took the
    # cores from BLAS's (a GPT-2 f32 decode at 2 threads 74 -> 49 tok/s); the block kernels are numba's own
    if (threads > 1 and not isinstance(w_attn, np.ndarray)
            and cfg.n_head * hs * (top + 1) >= ATTEND_SPLIT_FROM):
        run_threaded(_attend, _attend_threaded, min(threads, B * cfg.n_head), *args)
    else:
        _attend(*args)
    a = _product(y, w_proj, threads)                                                  # (B, C)
    out = np.empty((B, C), np.float32)
    _add_norm(x2, a, _bias(b_proj), ln2, _bias(ln2_b), eps, rms, out, h)
    f = _product(h, w_fc, threads)                                                    # (B, H) or (B, 2H)
    g = np.empty((B, cfg.n_inner), np.float32)
    _activate(f, _bias(b_fc), cfg.mlp == "swiglu", g)
    _add_rows(out, _product(g, w_proj2, threads), _bias(b_proj2))
    return out.reshape(B, 1, C), FusedBlockCache()


KERNELS = {"block_forward": block_forward}
