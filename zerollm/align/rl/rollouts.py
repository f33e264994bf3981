"""Rollouts: let the policy answer a batch of prompts, then score every token it chose.

    completions = sample(engine, prompt_ids, seeds, Completions(64, Sampling(0.8), (end,)))   # ids per row
    ids, mask = sequences(prompt_ids, completions)                 # (B, T) right-padded, mask = answer tokens
    logp = logprobs(engine, model, ids, mask)                      # (B, T), no activations kept

Each row samples from its own generator (its seed), so the answers do not depend on how the rows are
spread over threads or processes, nor on where a run was stopped and resumed.
"""

import numpy as np

from zerollm.align.objectives.pairs import pad_rows
from zerollm.model.policy import token_logprobs


def sample(engine, prompt_ids, seeds, how, should_stop=None):
    """Completions of every prompt (lists of ids, the stop id included when reached), rows in parallel.
    how: zerollm.generation.decode.Completions (max_new_tokens, sampling, stop_ids)."""
    from zerollm.generation.decode import sample_completions

    def run(model, rows):
        return sample_completions(model, list(rows["prompts"]), how, seeds=list(rows["seeds"]), should_stop=should_stop)
    parts = engine.map(run, {"prompts": list(prompt_ids), "seeds": list(seeds)})
    return [c for part in parts for c in part]


def sequences(prompt_ids, completions, learned=None):
    """prompt + completion per row -> (ids (B, T), mask (B, T) True on the completion's tokens). ``learned``
    (one list of bools per completion) leaves out what the model did not write: the tool responses of an
    answer that called tools (zerollm.align.tools.run_tool_loop), out of the loss and the KL."""
    ids, real = pad_rows([list(p) + list(c) for p, c in zip(prompt_ids, completions)])
    mask = real.copy()
    for b, p in enumerate(prompt_ids):
        mask[b, :len(p)] = False
        if learned is not None:
            mask[b, len(p):len(p) + len(learned[b])] = learned[b]
    return ids, mask


def logprobs(engine, model, ids, mask, *, entropy=False):
    """Per-token log-probabilities (and entropies) of the answers under ``model`` (eval mode, nothing kept).
    ``model`` may be the policy (engine.model) or a frozen reference; rows are spread over threads."""
    def run(replica, rows):
        m = replica if model is engine.model else model
        logp, H, _ = token_logprobs(m, rows["ids"], rows["mask"], entropy=entropy, keep=False)
        return logp if H is None else np.stack([logp, H])
    model.eval()
    parts = engine.map(run, {"ids": ids, "mask": mask})
    return np.concatenate(parts, axis=-2)
