"""The fast engine's full-score attention kernel (zerollm/engine/fast/sdpa.py: per head, the scores in
BLAS, the causal softmax in one pass, the weighted values in BLAS; the backward likewise) against torch's
scaled_dot_product_attention in float64, on the strided views of a qkv buffer that mha hands it, and its
fall-backs to the NumPy reference."""

import numpy as np
import pytest
from threadpoolctl import threadpool_limits

import zerollm.engine.fast.sdpa as fast
from zerollm.engine import use_engine
from zerollm.engine.amp import autocast
from zerollm.nn.attention import (AttentionConfig, AttentionWeights, ForwardPass, mha_backward, mha_forward,
                                  sdpa_backward, sdpa_forward, softmax_attention, softmax_attention_backward,
                                  split_qkv)
from zerollm.nn.dropout import Dropout
from tests.test_fast_flash import TOL, inputs, on_one_and_two_threads, products, rel, torch_sdpa  # noqa: F401

CASES = {                                      # B, nkv, g, T, Tk, hs, causal
    "nanoGPT's heads (T = BLOCK)": (2, 4, 1, 64, 64, 32, True),
    "T not a multiple of BLOCK": (1, 2, 1, 150, 150, 16, True),
    "grouped-query heads": (2, 1, 3, 45, 45, 8, True),
    "Tk > T (kv-cache offset)": (1, 2, 2, 7, 140, 8, True),
    "bidirectional": (2, 1, 1, 133, 133, 8, False),
    "one query": (1, 1, 1, 1, 9, 4, True),
    "heads of 64 (whole vector blocks)": (1, 2, 1, 100, 100, 64, True),
    "heads of 48 (32 + 16 columns)": (2, 1, 2, 77, 77, 48, True),
}


def fast_sdpa(q, k, v, dout, causal, out=None):
    with use_engine("fast"):
        o, cache = sdpa_forward(q, k, v, causal=causal)
        return [o, cache.att, *sdpa_backward(dout, cache, out=out)]


def torch_weights(q, k, causal):
    """softmax(q k^T / sqrt(hs)) in float64, hidden keys 0 (what the cache keeps for the backward)."""
    s = (q.astype(np.float64) @ np.swapaxes(k, -1, -2).astype(np.float64)) / np.sqrt(q.shape[-1])
    T, Tk = s.shape[-2:]
    if causal:
        s = np.where(np.tri(T, Tk, Tk - T, dtype=bool), s, -np.inf)
    m = s.max(axis=-1, keepdims=True)
    e = np.exp(s - np.where(np.isfinite(m), m, 0.0))
    total = e.sum(axis=-1, keepdims=True)
    return np.divide(e, total, out=np.zeros_like(e), where=total > 0)


@pytest.mark.parametrize("case", sorted(CASES))
def test_fused_attention_matches_torch(case):
    B, nkv, g, T, Tk, hs, causal = CASES[case]
    q, k, v, dout = inputs(B, nkv, g, T, Tk, hs)
    with threadpool_limits(limits=1):
        out, att, dq, dk, dv = fast_sdpa(q, k, v, dout, causal)
    t_out, t_dq, t_dk, t_dv = torch_sdpa(q, k, v, dout, causal)
    for name, a, b in zip(("out", "att", "dq", "dk", "dv"), (out, att, dq, dk, dv),
                          (t_out, torch_weights(q, k, causal), t_dq, t_dk, t_dv)):
        assert a.dtype == np.float32 and a.shape == b.shape, name
        assert rel(a, b) <= TOL, f"{name}: {rel(a, b):.2e}"


@pytest.mark.slow
def test_queries_that_see_no_key_get_zeros_as_in_the_reference():
    """Causal with Tk < T: the first T - Tk queries see no key; weights, output and their gradients are 0."""
    q, k, v, dout = inputs(1, 1, 2, 10, 5, 4, seed=7)
    results = []
    for engine in ("numpy", "fast"):
        with use_engine(engine):
            out, cache = sdpa_forward(q, k, v, causal=True)
            results.append([out, cache.att, *sdpa_backward(dout, cache)])
    fast_out, fast_att, fast_dq = results[1][:3]
    assert (fast_out[..., :5, :] == 0).all() and (fast_att[..., :5, :] == 0).all() and (fast_dq[..., :5, :] == 0).all()
    for a, b in zip(*results):
        assert rel(b, a) <= 1e-6


def test_the_kernel_reads_and_writes_the_strided_heads_of_qkv_without_copies():
    """mha's q, k, v are views of the qkv buffer (row stride 3C); the output comes back as a view of a
    (B, T, C) buffer, so merging the heads costs nothing; the gradients go straight into dqkv."""
    B, nh, T, hs = 3, 4, 70, 16
    rng = np.random.default_rng(1)
    qkv = rng.standard_normal((B, T, 3 * nh * hs)).astype(np.float32)
    q, k, v = split_qkv(qkv, nh, nh)
    assert not q.flags.c_contiguous
    dout = rng.standard_normal((B, T, nh * hs)).astype(np.float32).reshape(B, T, nh, 1, hs).transpose(0, 2, 3, 1, 4)
    dqkv = np.full_like(qkv, np.nan)
    views = split_qkv(dqkv, nh, nh)
    with threadpool_limits(limits=1):
        out, _, *grads = fast_sdpa(q, k, v, dout, True, out=views)
    assert all(g is view for g, view in zip(grads, views)) and np.isfinite(dqkv).all()
    assert np.shares_memory(out.transpose(0, 3, 1, 2, 4).reshape(B, T, -1), out)      # merge_heads: a view
    want = torch_sdpa(*(np.ascontiguousarray(a) for a in (q, k, v, dout)), True)
    for a, b in zip((out, *grads), want):
        assert rel(a, b) <= TOL


@pytest.mark.slow
def test_two_threads_split_the_heads_and_agree_with_one():
    q, k, v, dout = inputs(3, 2, 2, 90, 90, 8, seed=3)
    one, two = on_one_and_two_threads(fast_sdpa, fast, q, k, v, dout, True)
    for a, b in zip(one, two):
        assert rel(a, b) <= 1e-6


@pytest.mark.slow
def test_mha_on_the_fast_engine_follows_the_numpy_engine():
    """The whole attention sub-layer, forward and backward, with and without RoPE (with RoPE dq and dk
    take a detour through rope_backward before they reach dqkv)."""
    rng = np.random.default_rng(2)
    B, T, C, nh = 2, 40, 32, 4
    x = rng.standard_normal((B, T, C)).astype(np.float32)
    w_attn, w_proj = (rng.standard_normal(s).astype(np.float32) * 0.2 for s in ((C, 3 * C), (C, C)))
    dout = rng.standard_normal((B, T, C)).astype(np.float32)
    ang = np.arange(T)[:, None] * 0.1 * np.arange(1, C // nh // 2 + 1)[None]
    rope = (np.cos(np.repeat(ang, 2, -1)).astype(np.float32), np.sin(np.repeat(ang, 2, -1)).astype(np.float32))
    for rp in (None, rope):
        results = []
        for engine in ("numpy", "fast"):
            with use_engine(engine):
                y, cache = mha_forward(x, AttentionWeights(w_attn, None, w_proj, None), AttentionConfig(nh, nh),
                                       ForwardPass(rope=rp))
                results.append([y, *(g for g in mha_backward(dout, cache) if g is not None)])
        for a, b in zip(*results):
            assert rel(b, a) <= 1e-5


def test_what_the_kernel_was_not_written_for_runs_the_reference():
    """float64 and autocast: the kernels decline (NotImplemented); a padding mask or dropout never reaches
    them (sdpa_forward's general path); each gives the numpy engine's numbers."""
    q, k, v, dout = inputs(1, 1, 2, 20, 20, 8, seed=5)
    q64, k64, v64 = (a.astype(np.float64) for a in (q, k, v))
    assert fast.softmax_attention(q64, k64, v64, 0.3, True) is NotImplemented
    with autocast("bf16"):
        assert fast.softmax_attention(q, k, v, 0.3, True) is NotImplemented
    with use_engine("fast"):
        _, cache = sdpa_forward(q, k, v)
    assert fast.softmax_attention_backward(dout.astype(np.float64), q, k, v, cache.att, 0.3, True) is NotImplemented
    mask = np.zeros((1, 1, 1, 1, 20), bool)
    mask[..., -3:] = True
    runs = [dict(args=(q64, k64, v64), kw={}, amp=None), dict(args=(q, k, v), kw=dict(mask=mask), amp=None),
            dict(args=(q, k, v), kw=dict(dropout=0.5), amp=None),
            dict(args=(q, k, v), kw={}, amp="bf16")]
    for run in runs:
        results = []
        for engine in ("numpy", "fast"):
            with use_engine(engine), autocast(run["amp"]):
                kw = run["kw"]
                if "dropout" in kw:        # the same mask for both engines: a fresh generator each
                    kw = dict(dropout=Dropout(kw["dropout"], np.random.default_rng(0), training=True))
                out, cache = sdpa_forward(*run["args"], **kw)
                results.append([out, *sdpa_backward(dout.astype(out.dtype), cache)])
        for a, b in zip(*results):
            assert a.dtype == b.dtype and rel(a, b) <= 1e-6


def test_the_reference_core_is_what_sdpa_forward_computes_in_the_plain_case():
    """softmax_attention / _backward (the NumPy reference the kernel stands in for) against sdpa's general
    path, reached here with a padding mask that hides nothing."""
    q, k, v, dout = inputs(2, 2, 2, 33, 33, 8, seed=6)
    none_hidden = np.zeros((1, 1, 1, 33, 33), bool)
    with use_engine("numpy"):
        out, att = softmax_attention(q, k, v, 1 / np.sqrt(8), True)
        ref_out, cache = sdpa_forward(q, k, v, mask=none_hidden)
        grads = softmax_attention_backward(dout, q, k, v, att, cache.scale, True)
        ref_grads = sdpa_backward(dout, cache)
    np.testing.assert_allclose(out, ref_out, rtol=1e-6, atol=1e-7)
    np.testing.assert_allclose(att, cache.att, rtol=1e-6, atol=1e-7)
    for a, b in zip(grads, ref_grads):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)


def test_block_pairs_counts_what_the_causal_blocks_multiply():
    assert fast.block_pairs(64, 64, True, block=64) == 64 * 64
    assert fast.block_pairs(128, 128, True, block=64) == 64 * 64 + 64 * 128
    assert fast.block_pairs(10, 5, True, block=4) == 4 * 0 + 4 * 3 + 2 * 5
    assert fast.block_pairs(7, 9, False) == 63


def test_views_and_contiguous_arrays_run_one_compiled_kernel():
    """q, k, v as strided views of one qkv array (as the model passes them) and as C-contiguous copies (as
    other callers do) run the same compiled kernels (jit.one_layout: one specialisation, not one per layout),
    with the same numbers; the kernels really ran (not the reference's NotImplemented)."""
    rng = np.random.default_rng(0)
    qkv = rng.standard_normal((2, 16, 3, 2, 1, 8)).astype(np.float32)       # (B, T, 3, nkv, g, hs)
    views = [qkv[:, :, i].transpose(0, 2, 3, 1, 4) for i in range(3)]      # (B, nkv, g, T, hs), strided
    copies = [np.ascontiguousarray(v) for v in views]
    dout = rng.standard_normal(copies[0].shape).astype(np.float32)
    results = []
    for q, k, v in (views, copies):
        forward = fast.softmax_attention(q, k, v, 0.3, True)
        assert forward is not NotImplemented
        backward = fast.softmax_attention_backward(dout, q, k, v, forward[1], 0.3, True)
        assert backward is not NotImplemented
        results.append((*forward, *backward))
    for a, b in zip(*results):
        assert np.array_equal(a, b)
    assert len(fast._forward_serial.signatures) == 1 and len(fast._backward_serial.signatures) == 1
