"""Sampling text from a model: temperature, top-k, top-p, with a KV cache.

    for tokens in generate(model, prompt_ids, 100, temperature=0.8, top_k=40, rng=rng):
        ...   # tokens: (B,) the next id of every sequence, as soon as it is chosen

Context length: a prompt longer than block_size is cut to its last block_size tokens (with a
warning). When generation fills the context, a full KV cache cannot take more tokens; we then do
what nanoGPT does: recompute on the last block_size tokens for every further token (slower, warned
once). With ``window=W`` (RoPE or sinusoidal positions) a rolling cache of sinks + W slots keeps
generation cheap for any length, under the sliding-window rule of zerollm.model.kvcache.
"""

import warnings
from dataclasses import dataclass

import numpy as np

from zerollm.io.argtypes import Range
from zerollm.nn.self_attention import softmax
from zerollm.io.errors import ZeroLLMError
from zerollm.model.kvcache import KVCache


# ----------------------------------------------------------------------------
# choosing the next token from logits

def filter_logits(logits, top_k=None, top_p=None, min_p=None):
    """Hide (set to -inf) every logit outside the top-k, outside the top-p nucleus, and below min-p.

    top-k keeps the k largest logits; top-p (Holtzman et al. 2019) keeps the smallest set of tokens
    whose probabilities add up to at least p; min-p (Nguyen et al. 2024) keeps the tokens whose
    probability is at least min_p times the most likely token's. logits: (B, V) -> (B, V).
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
    if min_p is not None and min_p > 0:
        # p_i >= min_p * p_max  <=>  logit_i >= logit_max + log(min_p): no softmax needed
        logits[logits < logits.max(axis=-1, keepdims=True) + np.log(min_p)] = -np.inf
    return logits


def penalize(logits, counts, seen=None, *, repetition_penalty=1.0, presence_penalty=0.0, frequency_penalty=0.0):
    """Logits made less (or more) keen on ids already there. logits, counts: (B, V) -> (B, V) float64.

    counts[b, i]: how often row b has generated id i so far; seen[b, i]: id i is in row b's prompt.
    - repetition_penalty r (Keskar et al. 2019, CTRL; as transformers' RepetitionPenaltyLogitsProcessor):
      every id in the prompt or the output so far has its logit divided by r when positive, multiplied
      by r when negative, so r > 1 always makes it less likely.
    - presence_penalty a and frequency_penalty f (OpenAI's definitions): over the OUTPUT so far,
      logit_i -= a * [counts_i > 0] + f * counts_i.
    """
    logits = np.array(logits, dtype=np.float64)
    counts = np.asarray(counts)
    if repetition_penalty != 1.0:
        there = counts > 0 if seen is None else (counts > 0) | seen
        scaled = np.where(logits < 0, logits * repetition_penalty, logits / repetition_penalty)
        logits = np.where(there, scaled, logits)
    if presence_penalty or frequency_penalty:
        logits -= presence_penalty * (counts > 0) + frequency_penalty * counts
    return logits


# a temperature below this is greedy: dividing the logits by 1e-320 would make them infinite (NaN
# probabilities), and below 1e-5 the most likely token wins every draw anyway (as vLLM does)
GREEDY_BELOW = 1e-5
# repetition_penalty's range: a logit divided by less than 0.01 could overflow in the same way
PENALTY_RANGE = (0.01, 100.0)


def sample_next(logits, rng, temperature=1.0, top_k=None, top_p=None, min_p=None):
    """(B, V) logits -> (B,) ids. temperature 0 (or below GREEDY_BELOW) means greedy (argmax). ``rng``:
    one generator for all rows, or a list of one per row (then row b's draw depends on rngs[b] only)."""
    if temperature < GREEDY_BELOW:
        return np.argmax(logits, axis=-1)
    probs = softmax(filter_logits(np.asarray(logits, np.float64) / temperature, top_k, top_p, min_p))
    # inverse-CDF sampling with one uniform number per row: reproducible from the rng alone
    if isinstance(rng, (list, tuple)):
        u = np.array([r.random() for r in rng])[:, None]                  # (B, 1) each from its own row's
    else:
        u = rng.random((probs.shape[0], 1))
    ids = (np.cumsum(probs, axis=-1) < u).sum(axis=-1)
    return np.minimum(ids, probs.shape[-1] - 1)


@dataclass(frozen=True)
class Sampling:
    """How the next token is chosen; ``choose`` applies it. The defaults leave the model's distribution
    as it is (temperature 1, no filter, no penalty)."""
    temperature: float = 1.0
    top_k: int | None = None
    top_p: float | None = None
    min_p: float | None = None
    repetition_penalty: float = 1.0
    presence_penalty: float = 0.0
    frequency_penalty: float = 0.0

    def __post_init__(self):
        check_sampling_args(self.temperature, self.top_k, self.top_p, self.min_p, self.repetition_penalty,
                            self.presence_penalty, self.frequency_penalty)

    @property
    def penalized(self):
        return self.repetition_penalty != 1.0 or bool(self.presence_penalty) or bool(self.frequency_penalty)


def choose(logits, rng, sampling, counts=None, seen=None, allowed=None):
    """(B, V) logits -> (B,) ids: penalties (``counts``/``seen`` as in penalize), then the ``allowed``
    ids only, then temperature, top-k, top-p, min-p and one uniform number per row from ``rng`` (one
    generator, or one per row as in sample_next)."""
    s = sampling
    if s.penalized:
        logits = penalize(logits, counts, seen, repetition_penalty=s.repetition_penalty,
                          presence_penalty=s.presence_penalty, frequency_penalty=s.frequency_penalty)
    if allowed is not None:
        logits = np.where(allowed, logits, -np.inf)
    return sample_next(logits, rng, s.temperature, s.top_k, s.top_p, s.min_p)


def check_sampling_args(temperature, top_k, top_p, min_p=None, repetition_penalty=1.0, presence_penalty=0.0,
                        frequency_penalty=0.0):
    if not temperature >= 0:
        raise ZeroLLMError(f"temperature must be >= 0 (0 = greedy), got {temperature}")
    if top_k is not None and top_k < 1:
        raise ZeroLLMError(f"top_k must be >= 1, got {top_k}")
    if top_p is not None and not 0 < top_p <= 1:
        raise ZeroLLMError(f"top_p must be in (0, 1], got {top_p}")
    if min_p is not None and not 0 <= min_p <= 1:
        raise ZeroLLMError(f"min_p must be in [0, 1], got {min_p}")
    if not PENALTY_RANGE[0] <= repetition_penalty <= PENALTY_RANGE[1]:
        raise ZeroLLMError(f"repetition_penalty must be in [{PENALTY_RANGE[0]:g}, {PENALTY_RANGE[1]:g}] (1 = none, "
                           f"> 1 discourages repeats), got {repetition_penalty}")
    for name, value in (("presence_penalty", presence_penalty), ("frequency_penalty", frequency_penalty)):
        if not -2 <= value <= 2:
            raise ZeroLLMError(f"{name} must be in [-2, 2] (0 = none), got {value}")


def token_counts(ids, vocab_size):
    """(B, T) ids -> (B, V) how often each id occurs in each row."""
    ids = np.atleast_2d(np.asarray(ids, dtype=np.int64))
    counts = np.zeros((ids.shape[0], vocab_size), dtype=np.int64)
    np.add.at(counts, (np.arange(ids.shape[0])[:, None], ids), 1)
    return counts


def add_penalty_arguments(p):
    """--min-p and the three repetition penalties (zerollm.generation.sample.penalize), for `zerollm sample`, `chat`, `serve`."""
    p.add_argument("--min-p", type=Range(float, 0, 1), default=None,
                   help="keep only tokens at least this fraction as likely as the most likely one")
    p.add_argument("--repetition-penalty", type=Range(float, *PENALTY_RANGE), default=1.0,
                   help="divide the logit of every id already in the text by this (1 = off; as transformers)")
    p.add_argument("--presence-penalty", type=Range(float, -2, 2), default=0.0,
                   help="subtract this from the logit of every id already generated (as OpenAI's)")
    p.add_argument("--frequency-penalty", type=Range(float, -2, 2), default=0.0,
                   help="subtract this times its count from the logit of every id generated (as OpenAI's)")


def sampling_of(args):
    """The zerollm.generation.sample.Sampling the command-line flags describe."""
    return Sampling(args.temperature, args.top_k, args.top_p, args.min_p, args.repetition_penalty,
                    args.presence_penalty, args.frequency_penalty)


# ----------------------------------------------------------------------------
# generation

class ContextWarning(UserWarning):
    """The prompt or the generation does not fit the context (see context_notes)."""


def context_notes(cfg, n_prompt, max_new_tokens, window=None):
    """The context warnings generate() will give, known before it starts: a command prints them before
    any text, so they never land in the middle of the streamed output."""
    if window is not None and cfg.pos != "learned":
        return []                              # a rolling cache: any length fits
    if n_prompt > cfg.block_size:             # one line: the context is full from the start
        crop = (f"prompt of {n_prompt} tokens is longer than the context ({cfg.block_size}); keeping its last "
                f"{cfg.block_size} tokens")
        return [crop + (f", so {_recomputed(cfg)}" if max_new_tokens > 1 else "")]
    if n_prompt + max_new_tokens - 1 > cfg.block_size:
        return [_full_message(cfg)]
    return []


def _full_message(cfg):
    return f"the context is full ({cfg.block_size} tokens) before the last new token: {_recomputed(cfg)}"


def _recomputed(cfg):
    how = ("use --window for a rolling cache" if cfg.pos != "learned" else
           "this model's positions are learned, so its context cannot roll")
    return f"each further token recomputes the last block_size tokens (slower); {how}"


def generate(model, idx, max_new_tokens, *, temperature=1.0, top_k=None, top_p=None, rng=None,
             window=None, sinks=0, use_cache=True, allowed=None, min_p=None, repetition_penalty=1.0,
             presence_penalty=0.0, frequency_penalty=0.0):
    """Yield (B,) next-token ids, max_new_tokens times. idx: (B, T) or (T,) prompt ids.
    allowed: (V,) bool, the ids that may be chosen (e.g. those the tokenizer can decode); None = all.
    min_p and the penalties: see filter_logits and penalize (the prompt counts for repetition_penalty)."""
    sampling = Sampling(temperature, top_k, top_p, min_p, repetition_penalty, presence_penalty, frequency_penalty)
    cfg = model.config
    rng = rng if rng is not None else np.random.default_rng()
    idx = np.atleast_2d(np.asarray(idx, dtype=np.int64))
    if idx.shape[1] == 0:
        raise ZeroLLMError("the prompt is empty: give at least one token")
    if idx.shape[1] > cfg.block_size and not (window is not None and cfg.pos != "learned"):
        warnings.warn(context_notes(cfg, idx.shape[1], 1, window)[0], ContextWarning, stacklevel=2)
        idx = idx[:, -cfg.block_size:]
    model.eval()
    cache = _new_cache(model, idx.shape[0], window, sinks) if use_cache else None
    logits, _ = model.forward(idx, kv_cache=cache) if cache else model.forward(idx[:, -cfg.block_size:])
    warned = False
    seen = token_counts(idx, cfg.vocab_size) > 0 if sampling.penalized else None      # (B, V) the prompt's ids
    counts = np.zeros((idx.shape[0], cfg.vocab_size), dtype=np.int64)                 # (B, V) the output's
    for step in range(max_new_tokens):
        nxt = choose(logits[:, -1], rng, sampling, counts, seen, allowed)        # (B, V) -> (B,)
        counts[np.arange(len(nxt)), nxt] += 1
        yield nxt
        if step == max_new_tokens - 1:
            break
        idx = np.concatenate([idx, nxt[:, None]], axis=1)
        if cache is not None and _fits(cache, cfg):
            logits, _ = model.forward(nxt[:, None], kv_cache=cache)
        else:
            if cache is not None and not warned:
                warnings.warn(_full_message(cfg), ContextWarning, stacklevel=2)
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


# ----------------------------------------------------------------------------
# many prompts at once, each with its own random stream (evaluation, RL rollouts)

MAX_ROWS = 256      # rows per forward pass; results do not depend on it (each row has its own generator)


def sample_completions(model, prompts, max_new_tokens, *, stop_ids=(), temperature=1.0, top_k=None, top_p=None,
                       seeds, should_stop=None):
    """Sample one completion for each prompt -> a list of id lists (the completions only).

    prompts: a list of id lists, of any lengths. seeds: one per prompt (an int or a tuple of ints);
    row i draws from its own np.random.default_rng(seeds[i]), so its completion is the same however
    the prompts are batched, split across processes or resumed. Prompts of equal length go through
    the KV cache together, each at positions 0..P-1 as in training. A row ends after its first id in
    ``stop_ids`` (kept as the completion's last id) or after max_new_tokens ids. The prompt and its
    completion must fit in one forward pass of the context (block_size + 1 tokens: the model reads all
    but the last), so a long prompt gets fewer new tokens (warned once) and one longer than the
    context is an error. ``should_stop()`` is asked between tokens (Ctrl-C); when it says True the
    completions so far are returned and prompts not started yet get [].
    """
    check_sampling_args(temperature, top_k, top_p)
    cfg = model.config
    prompts = [_prompt_ids(p, i, cfg) for i, p in enumerate(prompts)]
    seeds = list(seeds)
    if len(seeds) != len(prompts):
        raise ZeroLLMError(f"give one seed per prompt: {len(prompts)} prompts but {len(seeds)} seeds")
    if isinstance(max_new_tokens, bool) or not isinstance(max_new_tokens, (int, np.integer)) or max_new_tokens < 1:
        raise ZeroLLMError(f"max_new_tokens must be a whole number >= 1, got {max_new_tokens!r}")
    longest = max((len(p) for p in prompts), default=0)
    if longest + max_new_tokens > cfg.block_size + 1:
        warnings.warn(f"prompts of up to {longest} tokens leave room for only {cfg.block_size + 1 - longest} new "
                      f"tokens in the context of {cfg.block_size}; those completions are cut there", stacklevel=2)
    groups = {}
    for i, p in enumerate(prompts):
        groups.setdefault(len(p), []).append(i)
    out = [[] for _ in prompts]
    was_training = model.training
    model.eval()
    try:
        for length in sorted(groups):
            rows = groups[length]
            for start in range(0, len(rows), MAX_ROWS):
                chunk = rows[start:start + MAX_ROWS]
                n_new = min(int(max_new_tokens), cfg.block_size + 1 - length)
                done = _sample_rows(model, np.array([prompts[i] for i in chunk]), n_new,
                                    [np.random.default_rng(seeds[i]) for i in chunk], set(int(s) for s in stop_ids),
                                    (temperature, top_k, top_p), should_stop)
                for i, ids in zip(chunk, done):
                    out[i] = ids
                if should_stop is not None and should_stop():
                    return out
    finally:
        model.training = was_training
    return out


def _prompt_ids(prompt, i, cfg):
    ids = [int(t) for t in prompt]
    if not ids:
        raise ZeroLLMError(f"prompt {i} is empty: give at least one token")
    if len(ids) > cfg.block_size:
        raise ZeroLLMError(f"prompt {i} is {len(ids)} tokens long but the model's context is {cfg.block_size} "
                           "tokens, which leaves no room for a completion; shorten the prompt")
    return ids


def _sample_rows(model, idx, n_new, rngs, stop, sampling, should_stop):
    """Rows of one prompt length through one KV cache; finished rows leave the batch."""
    B, P = idx.shape
    cache = KVCache(model.config, B, max_len=P + n_new - 1)
    h = model.forward_hidden(idx, kv_cache=cache)[:, -1]                    # (B, C) the last position
    logits = h @ model.head_weight.T                                        # (B, V)
    out = [[] for _ in range(B)]
    active = np.arange(B)
    for step in range(n_new):
        nxt = sample_next(logits, [rngs[a] for a in active], *sampling)     # (A,)
        for a, t in zip(active, nxt):
            out[a].append(int(t))
        keep = np.array([int(t) not in stop for t in nxt])
        if step == n_new - 1 or not keep.any() or (should_stop is not None and should_stop()):
            break
        if not keep.all():
            cache.keep_rows(np.flatnonzero(keep))
            active, nxt = active[keep], nxt[keep]
        h = model.forward_hidden(nxt[:, None], kv_cache=cache)[:, -1]        # (A, C)
        logits = h @ model.head_weight.T                                    # (A, V)
    return out
