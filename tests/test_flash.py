"""Tiled ("flash") attention equals the naive one (values and gradients), inside the whole model too,
in O(T) memory. Torch and finite-difference checks of the same op are in test_layers.py (flash_* cases)."""

import tracemalloc
from dataclasses import replace

import numpy as np
import pytest

import zerollm.nn.flash as flash
from zerollm.model.config import GPTConfig
from zerollm.io.errors import ZeroLLMError
from zerollm.teach.gradcheck import OpCase, check_case
from zerollm.model.kvcache import KVCache
from zerollm.model.gpt import GPT
from zerollm.nn.attention import AttentionConfig, AttentionWeights, mha_forward, sdpa_backward, sdpa_forward
from zerollm.nn.dropout import Dropout
from zerollm.nn.flash import flash_sdpa_backward, flash_sdpa_forward, tile_dropout

TOL = {np.float32: 1e-5, np.float64: 1e-10}


def qkv(nkv, g, T, Tk, hs=8, B=2, dtype=np.float64, seed=0):
    """q (B, nkv, g, T, hs), k and v (B, nkv, 1, Tk, hs), dout like q."""
    rng = np.random.default_rng(seed)
    n = lambda *shape: rng.standard_normal(shape).astype(dtype)
    return n(B, nkv, g, T, hs), n(B, nkv, 1, Tk, hs), n(B, nkv, 1, Tk, hs), n(B, nkv, g, T, hs)


def padding(B, T, Tk, kind):
    """'keys': the last two keys of sequence 0 hidden; 'rows': an irregular (B, 1, 1, T, Tk) mask."""
    if kind == "keys":
        mask = np.zeros((B, 1, 1, 1, Tk), dtype=bool)
        mask[0, ..., -2:] = True
        return mask
    if kind == "rows":
        return np.random.default_rng(5).random((B, 1, 1, T, Tk)) < 0.3
    return None


def both(q, k, v, dout, **kw):
    """(naive results, flash results), each (out, dq, dk, dv)."""
    tile = kw.pop("tile")
    out, c = sdpa_forward(q, k, v, **kw)
    f_out, f_c = flash_sdpa_forward(q, k, v, tile=tile, **kw)
    return (out, *sdpa_backward(dout, c)), (f_out, *flash_sdpa_backward(dout, f_c))


def assert_close(ours, ref, dtype):
    for name, a, b in zip(("out", "dq", "dk", "dv"), ours, ref):
        assert a.dtype == dtype and a.shape == b.shape, name
        assert np.isfinite(a).all(), name
        err = np.abs(a - b).max() / max(1.0, np.abs(b).max())
        assert err <= TOL[dtype], f"{name}: {err:.2e}"


# ----------------------------------------------------------------------------
# the op equals sdpa_forward / sdpa_backward

CASES = {                       # nkv, g, T, Tk, causal, padding, tile
    "causal, T not a multiple of tile": (2, 1, 7, 7, True, None, 3),
    "causal, tile 1": (1, 1, 5, 5, True, None, 1),
    "bidirectional": (2, 1, 9, 9, False, None, 4),
    "causal + padded keys": (2, 1, 9, 9, True, "keys", 2),
    "bidirectional + row mask": (1, 2, 8, 8, False, "rows", 3),
    "gqa": (2, 3, 10, 10, True, None, 4),
    "mqa": (1, 4, 6, 6, True, "keys", 4),
    "T < tile": (2, 2, 5, 5, True, None, 16),
    "Tk > T (kv-cache offset)": (2, 2, 3, 10, True, None, 4),
    "Tk > T, unaligned": (1, 3, 5, 12, True, "rows", 3),
    "one query (decoding step)": (1, 2, 1, 6, True, None, 2),
    "longer, tile 16": (2, 2, 64, 64, True, None, 16),
    "longer, tile 32": (1, 1, 70, 70, False, "keys", 32),
}


@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=["float32", "float64"])
@pytest.mark.parametrize("case", sorted(CASES))
def test_flash_equals_naive(case, dtype):
    nkv, g, T, Tk, causal, pad, tile = CASES[case]
    q, k, v, dout = qkv(nkv, g, T, Tk, dtype=dtype)
    ref, ours = both(q, k, v, dout, causal=causal, mask=padding(2, T, Tk, pad), tile=tile)
    assert_close(ours, ref, dtype)


@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=["float32", "float64"])
def test_fully_masked_row_gives_zeros_not_nan(dtype):
    q, k, v, dout = qkv(2, 2, 7, 7, dtype=dtype)
    mask = np.zeros((2, 1, 1, 7, 7), dtype=bool)
    mask[0, ..., 4, :] = True                              # query 4 of sequence 0 sees nothing
    mask[1, ..., :, 5:] = True
    ref, ours = both(q, k, v, dout, causal=True, mask=mask, tile=3)
    assert_close(ours, ref, dtype)
    out, dq = ours[0], ours[1]
    assert not out[0, :, :, 4].any() and not dq[0, :, :, 4].any()


def test_skipped_tiles_are_really_skipped():
    """Causal with T = 8 and tile 2: 4 query tiles need 1 + 2 + 3 + 4 = 10 key tiles, not 16."""
    assert sum(len(flash._key_tiles(i0, i1, 8, 0, True, 2)) for i0, i1 in flash._tiles(8, 2)) == 10
    assert flash._key_tiles(0, 2, 10, 8, True, 4) == [(0, 4), (4, 8), (8, 10)]   # offset 8: all keys


# ----------------------------------------------------------------------------
# dropout: per-tile masks regenerated in the backward

def dropped(seed_rng=0, **kw):
    return lambda q, k, v: flash_sdpa_forward(q, k, v, dropout=Dropout(0.3, np.random.default_rng(seed_rng),
                                                                       training=True), tile=3, **kw)


def test_dropout_forward_is_naive_attention_with_the_tile_masks():
    q, k, v, _ = qkv(2, 2, 7, 7)
    out, cache = dropped()(q, k, v)
    full = np.zeros(q.shape[:-1] + (7,))                   # assemble the (B, nkv, g, T, Tk) mask
    for i0, i1 in flash._tiles(7, 3):
        for j0, j1 in flash._tiles(7, 3):
            full[..., i0:i1, j0:j1] = tile_dropout(cache.seed, 0.3, full[..., i0:i1, j0:j1].shape,
                                                   i0, j0, q.dtype)
    _, naive = sdpa_forward(q, k, v, causal=True)
    np.testing.assert_allclose(out, (naive.att * full) @ v, atol=1e-12)
    assert 0.5 < (full != 0).mean() < 0.9                 # about 70% kept


def test_dropout_backward_passes_finite_differences():
    q, k, v, _ = qkv(1, 2, 7, 9, hs=4)
    case = OpCase("flash dropout", [q, k, v], (0, 1, 2), dropped(), flash_sdpa_backward, {}, {})
    result = check_case(case)
    assert result.ok, result.max_rel


def test_dropout_off_in_eval():
    q, k, v, _ = qkv(1, 1, 6, 6)
    out, cache = flash_sdpa_forward(q, k, v, dropout=Dropout(0.3, rng=None, training=False), tile=2)
    assert cache.seed is None
    np.testing.assert_allclose(out, sdpa_forward(q, k, v)[0], atol=1e-12)


# ----------------------------------------------------------------------------
# the whole model

ARCHS = {
    "gpt2": dict(),
    "llama-gqa": dict(norm="rmsnorm", pos="rope", mlp="swiglu", bias=False, n_kv_head=2),
    "bidirectional-mqa": dict(causal=False, n_kv_head=1),
}


@pytest.fixture
def small_tiles(monkeypatch):
    monkeypatch.setattr(flash, "DEFAULT_TILE", 4)         # several tiles on a 13-token sequence
    monkeypatch.setattr(flash, "SHORT_TILE", 4)


@pytest.mark.parametrize("with_mask", [False, True], ids=["plain", "padding"])
@pytest.mark.parametrize("arch", sorted(ARCHS))
def test_model_flash_equals_naive(arch, with_mask, small_tiles):
    cfg = GPTConfig(vocab_size=40, block_size=16, n_layer=2, n_head=4, n_embd=32, **ARCHS[arch])
    rng = np.random.default_rng(0)
    idx, targets = rng.integers(0, 40, (2, 13)), rng.integers(0, 40, (2, 13))
    mask = None
    if with_mask:
        mask = np.zeros((2, 13, 13), dtype=bool)
        mask[1, :, 10:] = True                             # sequence 1 is padded after 10 tokens
    runs = []
    for impl in ("naive", "flash"):
        model = GPT(replace(cfg, attn_impl=impl), seed=3)
        logits, loss = model.forward(idx, targets, mask=mask)
        runs.append((logits, loss, model.backward()))
    (logits, loss, grads), (f_logits, f_loss, f_grads) = runs
    assert f_logits.dtype == np.float32
    assert np.abs(f_logits - logits).max() <= 1e-5
    assert abs(f_loss - loss) <= 1e-5
    for name, g in grads.items():
        assert np.abs(f_grads[name] - g).max() <= 1e-5 * max(1.0, np.abs(g).max()), name


def test_model_flash_with_kv_cache(small_tiles):
    cfg = GPTConfig(vocab_size=40, block_size=24, n_layer=2, n_head=4, n_embd=32, n_kv_head=2, pos="rope")
    flash_model = GPT(replace(cfg, attn_impl="flash"), seed=1).eval()
    naive = GPT(cfg, seed=1).eval()
    seq = np.random.default_rng(0).integers(0, 40, (2, 20))
    cache = KVCache(flash_model.config, 2, max_len=24)
    step, _ = flash_model.forward(seq[:, :7], kv_cache=cache)           # a prefill over several tiles
    worst = np.abs(step - naive.forward(seq[:, :7])[0]).max()
    for t in range(7, 20):
        step, _ = flash_model.forward(seq[:, t:t + 1], kv_cache=cache)
        worst = max(worst, np.abs(step[:, -1] - naive.forward(seq[:, :t + 1])[0][:, -1]).max())
    assert worst <= 1e-5


# ----------------------------------------------------------------------------
# errors

def test_errors_name_the_fix():
    model = GPT(GPTConfig(vocab_size=10, block_size=8, n_layer=1, n_head=2, n_embd=8, attn_impl="flash"))
    model.forward(np.array([[1, 2, 3]]))
    with pytest.raises(ZeroLLMError, match="attn_impl='naive'"):
        model.attention_weights()
    q, k, v, _ = qkv(1, 1, 4, 4)
    with pytest.raises(ZeroLLMError, match="tile must be a positive integer"):
        flash_sdpa_forward(q, k, v, tile=0)
    with pytest.raises(ZeroLLMError, match="boolean"):
        flash_sdpa_forward(q, k, v, mask=np.zeros((4, 4)))
    with pytest.raises(ZeroLLMError, match="does not broadcast"):
        flash_sdpa_forward(q, k, v, mask=np.zeros((3, 4), dtype=bool))
    with pytest.raises(ZeroLLMError, match="rng"):
        flash_sdpa_forward(q, k, v, dropout=Dropout(0.1, training=True))
    with pytest.raises(ZeroLLMError, match="attn_impl must be"):
        mha_forward(np.zeros((1, 4, 8)), AttentionWeights(np.zeros((8, 24)), None, np.zeros((8, 8)), None),
                    AttentionConfig(n_head=2, n_kv_head=2, attn_impl="fast"))


# ----------------------------------------------------------------------------
# memory: O(T * hs), not O(T^2)

def peak_bytes(forward, backward, q, k, v, dout, **kw):
    tracemalloc.start()
    try:
        _, cache = forward(q, k, v, causal=True, **kw)
        backward(dout, cache)
        return tracemalloc.get_traced_memory()[1]        # (current, peak): the peak
    finally:
        tracemalloc.stop()


def test_flash_peak_memory_is_a_small_fraction_of_naive():
    T, hs, tile = 2048, 64, 64
    q, k, v, dout = qkv(1, 1, T, T, hs=hs, B=1, dtype=np.float32)
    naive = peak_bytes(sdpa_forward, sdpa_backward, q, k, v, dout)
    tiled = peak_bytes(flash_sdpa_forward, flash_sdpa_backward, q, k, v, dout, tile=tile)
    assert naive >= T * T * 4                              # at least one (T, T) float32 matrix: 16 MB
    # naive keeps A (T, T) for its backward, which adds dS (T, T) and temporaries a block of rows at a time
    assert tiled < naive / 10, (tiled, naive)
    # O(T hs + tile^2): out, dq, dk, dv (4 T hs floats, 2 MB) plus a few (tile, tile) temporaries
    assert tiled < (5 * T * hs + 16 * tile * tile) * 4, tiled
