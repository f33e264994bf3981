"""KV cache: incremental decoding equals recomputation; sliding window + sinks and the rolling buffer
equal the full computation under the same window rule."""

import warnings

import numpy as np
import pytest

from zerollm.model.config import GPTConfig
from zerollm.io.errors import ZeroLLMError
from zerollm.model.kvcache import KVCache, visible, window_mask
from zerollm.model.gpt import GPT
from zerollm.generation.batching import Context
from zerollm.generation.decode import generate
from zerollm.generation.sample import Sampling, filter_logits, sample_next

ARCHS = {
    "gpt2": dict(),
    "llama-gqa": dict(norm="rmsnorm", pos="rope", mlp="swiglu", bias=False, n_kv_head=2),
    "sinusoidal-mqa": dict(pos="sinusoidal", n_kv_head=1),
}


def model_for(arch, block_size=40, seed=1):
    cfg = GPTConfig(vocab_size=50, block_size=block_size, n_layer=2, n_head=4, n_embd=32, **ARCHS[arch])
    return GPT(cfg, seed=seed).eval()


@pytest.mark.parametrize("arch", sorted(ARCHS))
@pytest.mark.parametrize("prefill", [1, 6])
def test_incremental_decoding_equals_recomputing_the_prefix(arch, prefill):
    model = model_for(arch)
    seq = np.random.default_rng(0).integers(0, 50, (3, 25))
    cache = KVCache(model.config, 3, max_len=40)
    logits, _ = model.forward(seq[:, :prefill], kv_cache=cache)
    full, _ = model.forward(seq[:, :prefill])
    worst = np.abs(logits - full).max()
    for t in range(prefill, 25):
        step, _ = model.forward(seq[:, t:t + 1], kv_cache=cache)
        full, _ = model.forward(seq[:, :t + 1])
        worst = max(worst, np.abs(step[:, -1] - full[:, -1]).max())
    assert logits.dtype == np.float32
    assert worst <= 1e-5, worst
    assert cache.pos == 25


def test_window_rule():
    # query 6 with window 3 and 2 sinks sees keys 0, 1 (sinks) and 4, 5, 6 (the window)
    assert visible([6], np.arange(8), window=3, sinks=2)[0].tolist() == [1, 1, 0, 0, 1, 1, 1, 0]
    assert not window_mask(4)[3].any() and window_mask(4)[0, 1]     # no window = causal


@pytest.mark.parametrize("arch", ["llama-gqa", "sinusoidal-mqa", "gpt2"])
@pytest.mark.parametrize("window, sinks, prefill", [(4, 2, 9), (5, 0, 3), (3, 1, 1)])
def test_rolling_buffer_equals_full_computation_with_the_window_mask(arch, window, sinks, prefill):
    model = model_for(arch)
    seq = np.random.default_rng(1).integers(0, 50, (2, 30))
    cache = KVCache(model.config, 2, window=window, sinks=sinks)
    logits, _ = model.forward(seq[:, :prefill], kv_cache=cache)
    full, _ = model.forward(seq[:, :prefill], mask=window_mask(prefill, window, sinks))
    worst = np.abs(logits - full).max()
    for t in range(prefill, 30):
        step, _ = model.forward(seq[:, t:t + 1], kv_cache=cache)
        full, _ = model.forward(seq[:, :t + 1], mask=window_mask(t + 1, window, sinks))
        worst = max(worst, np.abs(step[:, -1] - full[:, -1]).max())
    assert worst <= 1e-5, worst
    # the ring never grows: sinks + window slots per layer
    assert cache.k[0].shape[-2] == sinks + window


def test_window_really_forgets():
    """With a window, a token outside it cannot change the next prediction (except via sinks)."""
    model = model_for("llama-gqa")
    seq = np.random.default_rng(2).integers(0, 50, (1, 20))
    other = seq.copy()
    other[0, 5] = (other[0, 5] + 1) % 50           # far outside the window of the last token
    out = []
    for s in (seq, other):
        cache = KVCache(model.config, 1, window=4, sinks=0)
        model.forward(s[:, :19], kv_cache=cache)
        out.append(model.forward(s[:, 19:], kv_cache=cache)[0])
    # one layer of influence per step of receptive field: 2 layers x window 4 cannot reach 14 back
    np.testing.assert_array_equal(out[0], out[1])


def test_rolling_cache_generates_past_block_size_with_rope():
    model = model_for("llama-gqa", block_size=16)
    with warnings.catch_warnings():
        warnings.simplefilter("error")              # no "context full" fallback with a rolling cache
        ids = list(generate(model, [1, 2, 3], 40, Sampling(temperature=0), context=Context(window=8, sinks=2)))
    assert len(ids) == 40


def test_full_cache_falls_back_to_recomputation_when_full():
    model = model_for("gpt2", block_size=12)
    with pytest.warns(UserWarning, match="context is full"):
        ids = [int(t[0]) for t in generate(model, [1, 2, 3], 20, Sampling(temperature=0))]
    # the same tokens as nanoGPT-style generation that recomputes every step on the last block
    idx = [1, 2, 3]
    for _ in range(20):
        logits, _ = model.forward(np.array([idx[-12:]]))
        idx.append(int(np.argmax(logits[0, -1])))
    assert ids == idx[3:]


def test_long_prompt_is_truncated_with_a_warning():
    model = model_for("gpt2", block_size=8)
    with pytest.warns(UserWarning, match="keeping its last 8 tokens"):
        first = next(generate(model, np.arange(20) % 50, 1, Sampling(temperature=0)))
    logits, _ = model.forward(np.array([np.arange(12, 20)]))
    assert first[0] == np.argmax(logits[0, -1])


def test_cache_errors():
    model = model_for("gpt2")
    with pytest.raises(ZeroLLMError, match="full"):
        cache = KVCache(model.config, 1, max_len=3)
        model.forward(np.array([[1, 2, 3, 4]]), kv_cache=cache)
    enc = GPT(GPTConfig(vocab_size=10, block_size=4, n_layer=1, n_head=2, n_embd=8, causal=False))
    with pytest.raises(ZeroLLMError, match="causal"):
        KVCache(enc.config, 1, max_len=4)


# ----------------------------------------------------------------------------
# sampling

def test_top_k_and_top_p_filters():
    logits = np.log(np.array([[0.5, 0.3, 0.15, 0.05]]))
    assert np.isfinite(filter_logits(logits, top_k=2)).tolist() == [[True, True, False, False]]
    # nucleus 0.75: 0.5 + 0.3 reaches it, so the first two stay
    assert np.isfinite(filter_logits(logits, top_p=0.75)).tolist() == [[True, True, False, False]]
    assert np.isfinite(filter_logits(logits, top_p=0.5)).tolist() == [[True, False, False, False]]
    assert np.isfinite(filter_logits(logits, top_p=1.0)).all()


def test_sampling_frequencies_follow_the_distribution():
    rng = np.random.default_rng(0)
    logits = np.log(np.tile([0.6, 0.3, 0.1], (20000, 1)))
    counts = np.bincount(sample_next(logits, rng), minlength=3) / 20000
    np.testing.assert_allclose(counts, [0.6, 0.3, 0.1], atol=0.015)
    low_t = np.bincount(sample_next(logits, rng, temperature=0.25), minlength=3) / 20000
    assert low_t[0] > 0.9                       # low temperature sharpens towards the argmax
    assert set(sample_next(logits[:50], rng, top_k=1)) == {0}


def test_generate_is_reproducible_and_validates():
    model = model_for("gpt2")
    a = [int(t[0]) for t in generate(model, [1, 2], 15, rng=np.random.default_rng(5))]
    b = [int(t[0]) for t in generate(model, [1, 2], 15, rng=np.random.default_rng(5))]
    c = [int(t[0]) for t in generate(model, [1, 2], 15, rng=np.random.default_rng(5), context=Context(cache=False))]
    assert a == b == c
    for kwargs in (dict(temperature=-1), dict(top_k=0), dict(top_p=0.0), dict(top_p=1.5)):
        with pytest.raises(ZeroLLMError):
            next(generate(model, [1], 1, Sampling(**kwargs)))


# ----------------------------------------------------------------------------
# a prompt, or a chunk of one, in a full cache: the plain causal rule (KVCache.causal_only)

@pytest.mark.parametrize("arch", sorted(ARCHS))
def test_a_full_caches_mask_is_exactly_the_causal_rule_and_only_it_says_so(arch):
    from zerollm.nn.self_attention import causal_mask
    cfg = model_for(arch).config
    k = np.zeros((2, cfg.n_kv_head, 1, 4, cfg.head_size), np.float32)
    full = KVCache(cfg, 2, 40)
    for T in (4, 3, 1):                                    # a prompt, a chunk after it, one token
        _, _, mask = full.update(0, k[..., :T, :], k[..., :T, :])
        assert np.array_equal(mask, causal_mask(T, full.pos + T))
        full.advance(T)
    assert full.causal_only
    assert not KVCache(cfg, 2, window=3, sinks=1).causal_only                  # the window hides more
    assert not KVCache(cfg, 2, 40, per_row=True).causal_only                    # a mask of each row's own


@pytest.mark.parametrize("arch", sorted(ARCHS))
@pytest.mark.parametrize("engine", ["numpy", "fast"])
def test_a_prompt_in_chunks_through_the_cache_runs_the_plain_attention_and_equals_recomputation(arch, engine,
                                                                                                monkeypatch):
    """Two chunks (5 then 4 tokens) into a KV cache go through softmax_attention with causal=True and no mask,
    the fused kernel on the fast engine (as a forward without cache does), and give the full forward's logits."""
    pytest.importorskip("numba") if engine == "fast" else None
    import zerollm.nn.attention as attention
    from zerollm.engine import use_engine
    model = model_for(arch)
    ids = np.random.default_rng(3).integers(0, 50, (2, 9))
    calls = []
    plain = attention.softmax_attention
    monkeypatch.setattr(attention, "softmax_attention",
                        lambda q, k, v, scale, causal: calls.append((q.shape[3], k.shape[3], causal))
                        or plain(q, k, v, scale, causal))
    with use_engine(engine):
        full = model.forward(ids)[0]
        calls.clear()
        cache = KVCache(model.config, 2, 40)
        first = model.forward(ids[:, :5], kv_cache=cache)[0]
        second = model.forward(ids[:, 5:], kv_cache=cache)[0]
    assert calls == [(5, 5, True)] * 2 + [(4, 9, True)] * 2                    # 2 layers a chunk
    got = np.concatenate([first, second], axis=1)
    np.testing.assert_allclose(got, full, rtol=0, atol=1e-5 * np.abs(full).max())
