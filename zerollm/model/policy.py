"""A model seen as a policy: the log-probability it gives to each token of a sequence, and the gradient
of any function of those log-probabilities back into the model's parameters.

    logp, H, cache = token_logprobs(model, ids, mask, entropy=True)     # (B, T) each
    grads = token_logprobs_backward(model, dlogp, cache, dentropy=dH)

``logp[b, t] = log p(ids[b, t] | ids[b, :t])`` where ``mask[b, t]`` is True, else 0. Token 0 has no
prediction, so mask[:, 0] must be False. The model reads ids[:, :-1] (the last token predicts nothing),
so a sequence may be one token longer than the context. SFT, DPO, PPO and GRPO all build on this.
"""

from typing import NamedTuple

import numpy as np

from zerollm.io.errors import ZeroLLMError
from zerollm.nn.logprobs import token_logprobs_backward as _logprobs_backward
from zerollm.nn.logprobs import token_logprobs_forward as _logprobs_forward


class PolicyCache(NamedTuple):
    nn: tuple               # zerollm.nn.logprobs.LogprobCache of positions 1..T-1
    keep: bool              # whether the model kept its activations (backward possible)


def check_sequences(ids, mask):
    """ids (B, T) ints and mask (B, T) bool with nothing selected at position 0 -> (ids, mask)."""
    ids, mask = np.asarray(ids), np.asarray(mask)
    if ids.ndim != 2 or ids.shape[1] < 2 or not np.issubdtype(ids.dtype, np.integer):
        raise ZeroLLMError(f"ids must be (B, T) integer token ids with T >= 2; got {ids.dtype} {ids.shape}")
    if mask.shape != ids.shape:
        raise ZeroLLMError(f"mask must have the shape of ids {ids.shape}; got {mask.shape}")
    mask = mask.astype(bool)
    if mask[:, 0].any():
        raise ZeroLLMError("mask[:, 0] must be False: the first token has no prediction to score")
    return ids, mask


def token_logprobs(model, ids, mask, *, entropy=False, keep=None):
    """-> (logp (B, T), entropy (B, T) or None, cache). keep: as GPT.forward (default: train mode)."""
    ids, mask = check_sequences(ids, mask)
    keep = model.training if keep is None else keep
    logits, _ = model.forward(ids[:, :-1], keep=keep)                 # (B, T-1, V): position t predicts t+1
    lp, H, cache = _logprobs_forward(logits, ids[:, 1:], mask[:, 1:], entropy)
    zero = np.zeros((ids.shape[0], 1), lp.dtype)
    logp = np.concatenate([zero, lp], axis=1)                         # (B, T), 0 at position 0
    if H is not None:
        H = np.concatenate([zero, H], axis=1)
    return logp, H, PolicyCache(cache, keep)


def token_logprobs_backward(model, dlogp, cache, dentropy=None, dhidden=None):
    """Gradients of sum(dlogp * logp + dentropy * H) w.r.t. the model's parameters (a dict).

    ``dhidden`` (B, T-1, C): an extra gradient on the final hidden states (a value head on the trunk).
    """
    if not cache.keep:
        raise ZeroLLMError("token_logprobs ran without keeping activations; call it in train mode or "
                           "with keep=True before backward")
    dlogits = _logprobs_backward(np.asarray(dlogp)[:, 1:], cache.nn,
                                 None if dentropy is None else np.asarray(dentropy)[:, 1:])
    return model.backward(dlogits, dhidden=dhidden)
