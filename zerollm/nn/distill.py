"""Distillation losses: how far the student's next-token distribution is from the teacher's.

Shapes: B sequences, T positions, V vocabulary; ``mask`` (B, T) bool says which positions count. With a
temperature tau both sets of logits are divided by tau first:

    q = softmax(z_student / tau)      the student       p = softmax(z_teacher / tau)      the teacher

    forward KL   D = KL(p || q) = sum_v p_v (log p_v - log q_v)         (Hinton et al. 2015; mean-seeking)
    reverse KL   D = KL(q || p) = sum_v q_v (log q_v - log p_v)         (MiniLLM; mode-seeking)
    JSD(beta)    m = beta p + (1 - beta) q
                 D = beta KL(p || m) + (1 - beta) KL(q || m)          (GKD, Agarwal et al. 2024)

The loss is the mean of D over the positions the mask keeps. JSD(beta) follows TRL's
``generalized_jsd_loss``: beta = 0 there means the forward KL and beta = 1 the reverse KL (the mixture
formula itself vanishes at both ends, so those two are its named cases), and no tau^2 factor multiplies
the loss (Hinton's rescaling is left to the learning rate).

The teacher gets no gradient. For the student, with s = z_student / tau:

    forward KL   dD/ds = q - p
    reverse KL   dD/ds = q (g - sum_u q_u g_u),  g = log q - log p
    JSD(beta)    dD/ds = q (g - sum_u q_u g_u),  g = (1 - beta)(log q - log m)

(dD/dq_v = g_v up to a constant that the softmax Jacobian removes: the terms with 1/m_v sum to
(1 - beta)(beta p_v + (1 - beta) q_v) / m_v = 1 - beta.) Then dz_student = dD/ds / tau.
"""

from typing import NamedTuple

import numpy as np

DIVERGENCES = ("forward_kl", "reverse_kl", "jsd")


class DistillCache(NamedTuple):
    logq: np.ndarray       # (B, T, V) the student's log-softmax at temperature tau
    g: np.ndarray | None   # (B, T, V) dD/dq (reverse KL, JSD); None for the forward KL
    p: np.ndarray | None   # (B, T, V) the teacher's probabilities (forward KL)
    mask: np.ndarray       # (B, T) bool
    count: int             # positions kept (the mean's denominator)
    tau: float


def _log_softmax(z):
    z = z - z.max(axis=-1, keepdims=True)                          # (B, T, V): no overflow in exp
    return z - np.log(np.exp(z).sum(axis=-1, keepdims=True))


def divergence_kind(divergence, beta):
    """The divergence that (divergence, beta) computes: "jsd" at beta 0 or 1 is TRL's forward / reverse KL."""
    if divergence == "jsd" and beta == 0.0:
        return "forward_kl"
    if divergence == "jsd" and beta == 1.0:
        return "reverse_kl"
    return divergence


def distill_forward(student, teacher, mask, divergence="forward_kl", beta=0.5, tau=1.0):
    """student, teacher: logits (B, T, V); mask (B, T) bool -> (mean divergence over kept positions, cache).

    Computed in the student's dtype; the teacher's logits are only read."""
    if divergence not in DIVERGENCES:
        raise ValueError(f"divergence must be one of {DIVERGENCES}, got {divergence!r}")
    kind = divergence_kind(divergence, beta)
    mask = np.asarray(mask, dtype=bool)
    logq = _log_softmax(student / student.dtype.type(tau))                 # (B, T, V)
    logp = _log_softmax(np.asarray(teacher, dtype=student.dtype) / student.dtype.type(tau))
    q = np.exp(logq)
    g = p = None
    if kind == "forward_kl":
        p = np.exp(logp)
        D = (p * (logp - logq)).sum(axis=-1)                                # (B, T)
    elif kind == "reverse_kl":
        g = logq - logp
        D = (q * g).sum(axis=-1)
    else:
        p_ = np.exp(logp)
        b, one = student.dtype.type(beta), student.dtype.type(1)       # scalars of the logits' dtype
        # log m by logsumexp of the two weighted log-probabilities, exact where one side underflows
        logm = np.logaddexp(logp + np.log(b), logq + np.log1p(-b))           # (B, T, V)
        D = b * (p_ * (logp - logm)).sum(axis=-1) + (one - b) * (q * (logq - logm)).sum(axis=-1)
        g = (one - b) * (logq - logm)
    count = int(mask.sum())
    loss = float((D * mask).sum() / max(count, 1))
    return loss, DistillCache(logq, g, p, mask, count, float(tau))


def distill_backward(cache, dloss=1.0):
    """-> dz_student (B, T, V): the gradient of the mean divergence w.r.t. the student's logits (see the module
    docstring for each formula). Masked positions get zero."""
    q = np.exp(cache.logq)                                                  # (B, T, V)
    if cache.g is None:
        ds = q - cache.p                                                    # forward KL
    else:
        ds = q * (cache.g - (q * cache.g).sum(axis=-1, keepdims=True))      # softmax Jacobian times g
    scale = dloss / (max(cache.count, 1) * cache.tau)
    ds *= ds.dtype.type(scale)
    ds *= cache.mask[..., None]
    return ds
