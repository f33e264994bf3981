"""Cross-entropy over logits, fused with softmax in the backward pass.

Shapes: N positions (B*T flattened), V vocabulary.
"""

from typing import NamedTuple

import numpy as np

IGNORE_INDEX = -100   # the PyTorch / Hugging Face convention for "no target here"


class CrossEntropyCache(NamedTuple):
    probs: np.ndarray     # (N, V) softmax of the logits
    targets: np.ndarray   # (N,) with ignored positions set to 0
    valid: np.ndarray     # (N,) bool, False where the target was ignore_index
    count: int            # number of valid positions (the mean's denominator)
    shape: tuple          # shape of the logits


def cross_entropy_forward(logits, targets, ignore_index=IGNORE_INDEX):
    """loss = mean over valid positions of  -log softmax(logits)[target].

    logits: (..., V); targets: (...) ints; positions whose target == ignore_index count for nothing.
    Computed as logsumexp(z) - z[target] with the max subtracted, so large logits cannot overflow.
    """
    V = logits.shape[-1]
    z = logits.reshape(-1, V)                                   # (N, V)
    t = np.asarray(targets).reshape(-1)                         # (N,)
    valid = t != ignore_index
    t = np.where(valid, t, 0)
    zmax = z.max(axis=-1, keepdims=True)                        # (N, 1)
    e = np.exp(z - zmax)                                        # (N, V)
    sumexp = e.sum(axis=-1, keepdims=True)                      # (N, 1)
    logsumexp = (zmax + np.log(sumexp))[:, 0]                   # (N,)
    nll = logsumexp - z[np.arange(z.shape[0]), t]               # (N,) -log p(target)
    count = int(valid.sum())
    loss = float(nll[valid].sum() / max(count, 1))
    e /= sumexp                                                 # e becomes the softmax probs
    return loss, CrossEntropyCache(e, t, valid, count, logits.shape)


def cross_entropy_backward(cache, dloss=1.0):
    """forward was loss = mean(logsumexp(z) - z[t]), so dloss/dz = (softmax(z) - onehot(t)) / count.

    The softmax Jacobian never has to be formed: the fused gradient is just probs minus one at
    the target. Ignored positions get zero gradient. Reuses the cached probs buffer (in place).
    """
    probs, t, valid, count = cache.probs, cache.targets, cache.valid, cache.count
    dz = probs
    dz[np.arange(dz.shape[0]), t] -= 1.0
    dz *= dz.dtype.type(dloss / max(count, 1))
    dz[~valid] = 0.0
    return dz.reshape(cache.shape)


def token_nll(logits, targets):
    """-log p(target) in nats for every position: logits (B, T, V), targets (B, T) -> (B, T) float64.

    log-softmax in float64 (z - max - log sum exp(z - max)), so sums over long texts stay exact."""
    z = np.asarray(logits, dtype=np.float64)
    zmax = z.max(axis=-1, keepdims=True)                                   # (B, T, 1)
    lse = (zmax + np.log(np.exp(z - zmax).sum(axis=-1, keepdims=True)))[..., 0]   # (B, T)
    t = np.maximum(np.asarray(targets), 0)                                 # an ignored target (< 0) reads id 0
    picked = np.take_along_axis(z, t[..., None], axis=-1)[..., 0]
    return lse - picked
