"""Log-probabilities of chosen tokens, and the entropy of the whole next-token distribution.

Every loss after pre-training starts here: SFT, DPO, PPO and GRPO all ask "how likely did the model
find THIS token?", and PPO adds "how spread out was its distribution?". One forward/backward pair
gives both from the logits, so nothing is computed twice and the (B, T, V) log-softmax is kept once.

Shapes: B sequences, T positions, V vocabulary. ``mask`` (B, T) bool says which positions count;
elsewhere the outputs are 0 and no gradient flows.

    logq[b, t, :] = z[b, t, :] - logsumexp(z[b, t, :])            log-softmax
    logp[b, t]    = logq[b, t, y[b, t]]                             the chosen token's log-probability
    H[b, t]       = -sum_v q log q = -sum_v exp(logq) logq          the exact entropy (not -logp)
"""

from typing import NamedTuple

import numpy as np


class LogprobCache(NamedTuple):
    logq: np.ndarray       # (B, T, V) log-softmax of the logits
    targets: np.ndarray    # (B, T) ints, 0 where masked out
    mask: np.ndarray       # (B, T) bool
    entropy: np.ndarray | None   # (B, T) when asked for, else None


def token_logprobs_forward(logits, targets, mask, entropy=False):
    """logits (B, T, V), targets (B, T) ints, mask (B, T) bool -> (logp (B, T), H (B, T) or None, cache)."""
    mask = np.asarray(mask, dtype=bool)
    targets = np.where(mask, targets, 0)                          # masked ids may be padding: any value
    zmax = logits.max(axis=-1, keepdims=True)                     # (B, T, 1): no overflow in exp
    logq = logits - zmax                                          # (B, T, V) a new array
    lse = np.log(np.exp(logq).sum(axis=-1, keepdims=True))        # (B, T, 1)
    logq -= lse                                                   # log-softmax
    logp = np.take_along_axis(logq, targets[..., None], axis=-1)[..., 0]   # (B, T)
    logp *= mask
    H = None
    if entropy:
        H = -(np.exp(logq) * logq).sum(axis=-1)                   # (B, T)
        H *= mask
    return logp, H, LogprobCache(logq, targets, mask, H)


def token_logprobs_backward(dlogp, cache, dentropy=None):
    """forward was logp = logq[y], H = -sum q logq with logq = z - logsumexp(z), so per position:
        d logp / dz_v = onehot(y)_v - q_v
        d H / dz_v    = -q_v (logq_v + H)
    and dz = dlogp * (onehot - q) + dH * (-q (logq + H)). Masked positions get zero. Returns dz (B, T, V).
    """
    logq, targets, mask = cache.logq, cache.targets, cache.mask
    dlogp = np.where(mask, dlogp, 0).astype(logq.dtype)           # (B, T)
    q = np.exp(logq)                                              # (B, T, V)
    if dentropy is not None:
        if cache.entropy is None:
            raise ValueError("dentropy needs token_logprobs_forward(..., entropy=True)")
        dH = np.where(mask, dentropy, 0).astype(logq.dtype)[..., None]       # (B, T, 1)
        # dz = -q * (dlogp + dH * (logq + H)), then + dlogp at the target
        coef = logq + cache.entropy[..., None]                    # (B, T, V)
        coef *= dH
        coef += dlogp[..., None]
        q *= coef
    else:
        q *= dlogp[..., None]
    dz = np.negative(q, out=q)
    np.put_along_axis(dz, targets[..., None], np.take_along_axis(dz, targets[..., None], axis=-1)
                      + dlogp[..., None], axis=-1)
    return dz
