"""Sampling text from a model: temperature, top-k, top-p, with a KV cache.

    for tokens in generate(model, prompt_ids, 100, temperature=0.8, top_k=40, rng=rng):
        ...   # tokens: (B,) the next id of every sequence, as soon as it is chosen

Context length: a prompt longer than block_size is cut to its last block_size tokens (with a
warning). When generation fills the context, a full KV cache cannot take more tokens; we then do
what nanoGPT does: recompute on the last block_size tokens for every further token (slower, warned
once). With ``window=W`` (RoPE or sinusoidal positions) a rolling cache of sinks + W slots keeps
generation cheap for any length, under the sliding-window rule of zerollm.kvcache.
"""

import warnings

import numpy as np

from zerollm.attention import softmax
from zerollm.errors import ZeroLLMError
from zerollm.kvcache import KVCache


# ----------------------------------------------------------------------------
# choosing the next token from logits

def filter_logits(logits, top_k=None, top_p=None):
    """Hide (set to -inf) every logit outside the top-k and outside the top-p nucleus.

    top-k keeps the k largest logits; top-p (Holtzman et al. 2019) keeps the smallest set of tokens
    whose probabilities add up to at least p. logits: (B, V) -> (B, V).
    """
    logits = np.array(logits, dtype=np.float64)
    V = logits.shape[-1]
    if top_k is not None and top_k < V:
        kth = np.partition(logits, V - top_k, axis=-1)[:, V - top_k][:, None]   # (B, 1) k-th largest
        logits[logits < kth] = -np.inf
    if top_p is not None and top_p < 1.0:
        order = np.argsort(-logits, axis=-1)                                     # (B, V) best first
        probs = softmax(np.take_along_axis(logits, order, axis=-1))
        before = np.cumsum(probs, axis=-1) - probs        # mass of the better tokens
        drop_sorted = before >= top_p                     # already reached p without this token
        drop = np.zeros_like(drop_sorted)
        np.put_along_axis(drop, order, drop_sorted, axis=-1)
        logits[drop] = -np.inf
    return logits


def sample_next(logits, rng, temperature=1.0, top_k=None, top_p=None):
    """(B, V) logits -> (B,) ids. temperature 0 means greedy (argmax)."""
    if temperature == 0:
        return np.argmax(logits, axis=-1)
    probs = softmax(filter_logits(np.asarray(logits, np.float64) / temperature, top_k, top_p))
    # inverse-CDF sampling with one uniform number per row: reproducible from the rng alone
    u = rng.random((probs.shape[0], 1))
    ids = (np.cumsum(probs, axis=-1) < u).sum(axis=-1)
    return np.minimum(ids, probs.shape[-1] - 1)


def check_sampling_args(temperature, top_k, top_p):
    if not temperature >= 0:
        raise ZeroLLMError(f"temperature must be >= 0 (0 = greedy), got {temperature}")
    if top_k is not None and top_k < 1:
        raise ZeroLLMError(f"top_k must be >= 1, got {top_k}")
    if top_p is not None and not 0 < top_p <= 1:
        raise ZeroLLMError(f"top_p must be in (0, 1], got {top_p}")


# ----------------------------------------------------------------------------
# generation

def generate(model, idx, max_new_tokens, *, temperature=1.0, top_k=None, top_p=None, rng=None,
             window=None, sinks=0, use_cache=True):
    """Yield (B,) next-token ids, max_new_tokens times. idx: (B, T) or (T,) prompt ids."""
    check_sampling_args(temperature, top_k, top_p)
    cfg = model.config
    rng = rng if rng is not None else np.random.default_rng()
    idx = np.atleast_2d(np.asarray(idx, dtype=np.int64))
    if idx.shape[1] == 0:
        raise ZeroLLMError("the prompt is empty: give at least one token")
    if idx.shape[1] > cfg.block_size and not (window is not None and cfg.pos != "learned"):
        warnings.warn(f"prompt of {idx.shape[1]} tokens is longer than the context ({cfg.block_size}); "
                      f"keeping its last {cfg.block_size} tokens", stacklevel=2)
        idx = idx[:, -cfg.block_size:]
    model.eval()
    cache = _new_cache(model, idx.shape[0], window, sinks) if use_cache else None
    logits, _ = model.forward(idx, kv_cache=cache) if cache else model.forward(idx[:, -cfg.block_size:])
    warned = False
    for step in range(max_new_tokens):
        nxt = sample_next(logits[:, -1], rng, temperature, top_k, top_p)        # (B,)
        yield nxt
        if step == max_new_tokens - 1:
            break
        idx = np.concatenate([idx, nxt[:, None]], axis=1)
        if cache is not None and _fits(cache, cfg):
            logits, _ = model.forward(nxt[:, None], kv_cache=cache)
        else:
            if cache is not None and not warned:
                warnings.warn(f"the context is full ({cfg.block_size} tokens): each further token recomputes "
                              "the last block_size tokens; use a window for a rolling cache", stacklevel=2)
                warned = True
            cache = None
            logits, _ = model.forward(idx[:, -cfg.block_size:])


def _new_cache(model, batch, window, sinks):
    cfg = model.config
    if window is not None:
        return KVCache(cfg, batch, window=window, sinks=sinks)
    return KVCache(cfg, batch, max_len=cfg.block_size)


def _fits(cache, cfg):
    """Can the cache take one more token? Rolling caches always can, unless positions are learned."""
    if cache.rolling and cfg.pos != "learned":
        return True
    return cache.pos < cfg.block_size
