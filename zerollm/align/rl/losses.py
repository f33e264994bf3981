"""The policy losses of PPO and GRPO with their gradients, written out.

Everything is per token: logp (B, T) are the current policy's log-probabilities of the sampled tokens,
old_logp those at sampling time (the same numbers on the first pass over a batch), mask (B, T) marks
the answer's tokens. The importance ratio rho = exp(logp - old_logp) lets several optimizer steps reuse
one batch of samples; clipping it to [1 - eps, 1 + eps] keeps each step close to the sampling policy
(Schulman et al. 2017):

    per-token objective = min(rho A, clip(rho, 1-eps, 1+eps) A)        (maximised; loss = minus it)

Its gradient w.r.t. logp is rho A where the unclipped term is the smaller one, else 0.
"""

from typing import NamedTuple

import numpy as np

from zerollm.io.errors import ZeroLLMError

LOSS_TYPES = ("grpo", "bnpo", "dr_grpo")


def _clipped_surrogate(logp, old_logp, adv, epsilon):
    """-> (per-token loss -min(rho A, clip(rho) A), its derivative w.r.t. logp, rho, clipped?)."""
    rho = np.exp(logp - old_logp)
    clipped = np.clip(rho, 1.0 - epsilon, 1.0 + epsilon)
    unclipped_wins = rho * adv <= clipped * adv          # the min picks rho A (ties: either, same value)
    loss = -np.where(unclipped_wins, rho * adv, clipped * adv)
    dlogp = np.where(unclipped_wins, -rho * adv, 0.0)   # d(rho)/d(logp) = rho; the clipped branch is flat
    return loss, dlogp, rho, ~unclipped_wins


def _masked_normaliser(mask, loss_type):
    """The weight each token's loss gets, by loss type (as Hugging Face TRL defines them):

    grpo:    mean over each answer's tokens, then mean over answers      1 / (B * |o_i|)
    bnpo:    mean over every answer token of the batch                   1 / sum(mask)
    dr_grpo: sum over tokens / (B * T), T = the longest answer           1 / (B * T)  (Liu et al. 2025)
    """
    B, T = mask.shape
    if loss_type == "grpo":
        return mask / (B * np.maximum(mask.sum(axis=1, keepdims=True), 1))
    if loss_type == "bnpo":
        return mask / max(mask.sum(), 1)
    if loss_type == "dr_grpo":
        return mask / (B * T)
    raise ZeroLLMError(f"loss_type must be one of {', '.join(LOSS_TYPES)}; got {loss_type!r}")


def grpo_loss(logp, old_logp, ref_logp, advantages, mask, *, epsilon=0.2, beta=0.04, loss_type="grpo"):
    """GRPO's clipped objective with an explicit KL penalty to the reference -> (loss, dlogp (B, T)).

    advantages (B,) one per answer. KL per token with the k3 estimator (Schulman 2020), unbiased and >= 0:
        k3 = exp(ref - logp) - (ref - logp) - 1,      d k3 / d logp = 1 - exp(ref - logp)
    loss = normalise_{loss_type}( -min(rho A, clip(rho) A) + beta k3 ).
    """
    logp, old_logp = np.asarray(logp, np.float64), np.asarray(old_logp, np.float64)
    mask = np.asarray(mask, dtype=bool)
    adv = np.asarray(advantages, np.float64)[:, None]                # (B, 1)
    per_token, dlogp, _, _ = _clipped_surrogate(logp, old_logp, adv, epsilon)
    if beta:
        diff = np.asarray(ref_logp, np.float64) - logp
        per_token = per_token + beta * (np.exp(diff) - diff - 1.0)
        dlogp = dlogp + beta * (1.0 - np.exp(diff))
    w = _masked_normaliser(mask, loss_type)
    return float((per_token * w).sum()), dlogp * w


def policy_stats(logp, old_logp, ref_logp, advantages, mask, epsilon=0.2):
    """Numbers to log: the share of answer tokens whose ratio the clip holds back, the mean k3 KL to the
    reference, and the approximate KL to the sampling policy (mean of (rho - 1) - log rho).
    advantages: (B,) one per answer (GRPO) or (B, T) per token (PPO)."""
    mask = np.asarray(mask, dtype=bool)
    adv = np.asarray(advantages, np.float64)
    _, _, rho, clipped = _clipped_surrogate(logp, old_logp, adv[:, None] if adv.ndim == 1 else adv, epsilon)
    diff = ref_logp - logp
    n = max(mask.sum(), 1)
    return {"clip_frac": float((clipped & mask).sum() / n),
            "kl": float(((np.exp(diff) - diff - 1.0) * mask).sum() / n),
            "approx_kl": float((((rho - 1.0) - np.log(rho)) * mask).sum() / n)}


class Critic(NamedTuple):
    """What PPO's value loss reads, each (B, T): the value head's estimates now and at sampling time, and
    the returns they regress to."""
    values: np.ndarray
    old_values: np.ndarray
    returns: np.ndarray


class PPOSettings(NamedTuple):
    """PPO's clip ranges and loss weights."""
    epsilon: float = 0.2          # clip range of the ratio rho
    epsilon_value: float = 0.2    # clip range of the value update
    vf_coef: float = 0.1          # weight of the value loss
    ent_coef: float = 0.0         # weight of the entropy bonus


def ppo_loss(logp, old_logp, advantages, mask, *, critic=None, entropy=None, settings=PPOSettings()):
    """PPO for language models (Ziegler et al. 2019, Ouyang et al. 2022) -> (loss, dlogp, dvalues, dentropy).

    advantages (B, T) per token (GAE); critic: a Critic or None; settings: PPOSettings. Averages are over
    every answer token of the batch:
        policy:  mean -min(rho A, clip(rho) A)
        value:   0.5 mean max((V - R)^2, (V_clip - R)^2),  V_clip = old_V + clip(V - old_V, +-epsilon_value)
        entropy: mean H (the exact entropy of the whole next-token distribution), a bonus: - ent_coef H
    loss = policy + vf_coef value - ent_coef entropy. Without a critic the value terms vanish;
    dvalues / dentropy are None when critic / entropy are not given.
    """
    epsilon, epsilon_value, vf_coef, ent_coef = settings
    logp, old_logp = np.asarray(logp, np.float64), np.asarray(old_logp, np.float64)
    mask = np.asarray(mask, dtype=bool)
    w = mask / max(mask.sum(), 1)                                     # (B, T) the masked mean's weights
    per_token, dlogp, _, _ = _clipped_surrogate(logp, old_logp, np.asarray(advantages, np.float64), epsilon)
    loss = float((per_token * w).sum())
    dlogp = dlogp * w
    dvalues = dentropy = None
    if critic is not None:
        v, v_old, R = (np.asarray(a, np.float64) for a in critic)
        v_clip = v_old + np.clip(v - v_old, -epsilon_value, epsilon_value)
        plain, clipped = (v - R) ** 2, (v_clip - R) ** 2
        use_plain = plain >= clipped
        loss += vf_coef * 0.5 * float((np.maximum(plain, clipped) * w).sum())
        inside = np.abs(v - v_old) <= epsilon_value                    # where v_clip moves with v
        dv = np.where(use_plain, 2 * (v - R), np.where(inside, 2 * (v_clip - R), 0.0))
        dvalues = vf_coef * 0.5 * dv * w
    if entropy is not None:
        loss -= ent_coef * float((np.asarray(entropy, np.float64) * w).sum())
        dentropy = -ent_coef * w
    return loss, dlogp, dvalues, dentropy
