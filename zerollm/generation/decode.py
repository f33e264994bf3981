"""Decoding in the caller's thread: the one loop (zerollm.generation.batching.Scheduler) run for one call.

    for ids in generate(model, prompt_ids, 100, Sampling(temperature=0.8, top_k=40), rng=rng):
        ...   # ids: (B,) the next id of every row, as soon as it is chosen
    completions = sample_completions(model, prompts, Completions(64, stop_ids=(end,)), seeds=range(len(prompts)))

``generate``: the B rows of one prompt length draw from ONE generator, in row order, and may outgrow
the context (zerollm.generation.batching.Context: the prompt cut to its last block_size tokens, a rolling
window cache, or recomputing the last block_size tokens; each warned with ContextWarning).
``sample_completions``: many prompts of any lengths (evaluation, RL rollouts), each drawing from its own
np.random.default_rng(seed), so a completion is the same however the prompts are batched.
"""

import warnings
from dataclasses import dataclass

import numpy as np

from zerollm.io.errors import ZeroLLMError
from zerollm.generation.batching import Context, Request, Scheduler, Token
from zerollm.generation.sample import Sampling

MAX_ROWS = 256      # rows per forward pass; results do not depend on it (each row has its own generator)


def generate(model, idx, max_new_tokens, sampling=Sampling(), *, rng=None, context=Context(), allowed=None):
    """Yield (B,) next-token ids, max_new_tokens times. idx: (B, T) or (T,) prompt ids.
    allowed: (V,) bool, the ids that may be chosen (e.g. those the tokenizer can decode); None = all.
    The penalties of ``sampling`` count the prompt for repetition_penalty (zerollm.generation.sample)."""
    if max_new_tokens < 1:
        return                                 # nothing to yield (the scheduler refuses a request for none)
    idx = np.atleast_2d(np.asarray(idx, dtype=np.int64))
    rng = rng if rng is not None else np.random.default_rng()
    reqs = [Request(row.tolist(), max_new_tokens, sampling, rng, context=context) for row in idx]
    for events in Scheduler(model, max_batch=len(reqs), allowed=allowed).stream(reqs):
        ids = [ev.id for _, ev in events if isinstance(ev, Token)]          # row order: one per row
        if ids:
            yield np.array(ids, dtype=np.int64)


@dataclass(frozen=True)
class Completions:
    """What sample_completions makes of every prompt: up to ``max_new_tokens`` ids chosen with ``sampling``,
    ending after the first id in ``stop_ids`` (kept as the completion's last id); with ``grammar`` (a
    zerollm.generation.grammar TokenIndex) only text it matches, as for RL rollouts that must be JSON."""
    max_new_tokens: int
    sampling: Sampling = Sampling()
    stop_ids: tuple = ()
    grammar: object = None


def sample_completions(model, prompts, how, *, seeds, should_stop=None):
    """Sample one completion for each prompt -> a list of id lists (the completions only).

    prompts: a list of id lists, of any lengths. how: Completions. seeds: one per prompt (an int or a
    tuple of ints); row i draws from its own np.random.default_rng(seeds[i]), so its completion is the
    same however the prompts are batched, split across processes or resumed. Prompts of equal length
    go through the KV cache together (a group of the Scheduler), each at positions 0..P-1 as in
    training. The prompt and its completion must fit in one forward pass of the context (block_size + 1
    tokens: the model reads all but the last), so a long prompt gets fewer new tokens (warned once) and
    one longer than the context is an error. ``should_stop()`` is asked between tokens (Ctrl-C); when it
    says True the completions so far are returned and prompts not started yet get [].
    """
    cfg, max_new_tokens = model.config, how.max_new_tokens
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
    stop = frozenset(int(s) for s in how.stop_ids)
    was_training = model.training
    scheduler = Scheduler(model, max_batch=MAX_ROWS)
    try:
        for length in sorted(groups):
            rows = groups[length]
            for start in range(0, len(rows), MAX_ROWS):
                chunk = rows[start:start + MAX_ROWS]
                n_new = min(int(max_new_tokens), cfg.block_size + 1 - length)
                reqs = [Request(prompts[i], n_new, how.sampling, np.random.default_rng(seeds[i]), stop_ids=stop,
                                grammar=how.grammar) for i in chunk]
                for i, req in zip(chunk, reqs):
                    out[i] = req.ids                   # filled step by step, the stop id included
                for _ in scheduler.stream(reqs):
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
