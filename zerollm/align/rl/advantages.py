"""Advantages: how much better than expected each sampled answer (or token) turned out.

GRPO (Shao et al. 2024) needs no critic: it samples G answers per prompt and compares each one's reward
with its group's.  PPO (Schulman et al. 2017) as used for RLHF (Ouyang et al. 2022) learns a value
function and spreads the reward over the tokens with Generalized Advantage Estimation (Schulman et
al. 2016). Shapes: N prompts, G answers per prompt, B = N*G rows, T positions.
"""

import numpy as np

from zerollm.io.errors import ZeroLLMError

STD_EPS = 1e-4      # added to the group's std, as Hugging Face TRL does


def group_advantages(rewards, group_size, scale=True):
    """rewards (N*G,), grouped consecutively (rows i*G .. i*G+G-1 answer prompt i) -> advantages (N*G,).

        A = r - mean(group)                           (Dr. GRPO, Liu et al. 2025: scale=False)
        A = (r - mean(group)) / (std(group) + 1e-4)   (GRPO: scale=True; std with Bessel's correction)

    >>> group_advantages(np.array([1.0, 0.0, 0.0, 0.0]), 2).round(4).tolist()
    [0.707, -0.707, 0.0, 0.0]
    """
    r = np.asarray(rewards, dtype=np.float64)
    if isinstance(group_size, bool) or not isinstance(group_size, (int, np.integer)) or group_size < 2:
        raise ZeroLLMError(f"the group size must be a whole number >= 2 (GRPO compares answers within a group); "
                           f"got {group_size!r}")
    if r.ndim != 1 or r.size % group_size:
        raise ZeroLLMError(f"rewards must be (N*G,) with G = {group_size} answers per prompt; got shape {r.shape}")
    groups = r.reshape(-1, group_size)                               # (N, G)
    adv = groups - groups.mean(axis=1, keepdims=True)
    if scale:
        adv /= groups.std(axis=1, ddof=1, keepdims=True) + STD_EPS
    return adv.reshape(-1)


def gae(rewards, values, mask, gamma=1.0, lam=0.95):
    """Generalized Advantage Estimation over the masked (answer) positions of each row.

    rewards, values, mask: (B, T); the answer's tokens are one contiguous run of mask. Walking back
    from the last token (the value after the answer is 0):

        delta_t = r_t + gamma V_{t+1} - V_t
        A_t     = delta_t + gamma lam A_{t+1}
        returns = A + V                       (the value head's regression target)

    Returns (advantages, returns), both (B, T), 0 outside the mask.
    """
    rewards, values = np.asarray(rewards, np.float64), np.asarray(values, np.float64)
    mask = np.asarray(mask, dtype=bool)
    B, T = rewards.shape
    adv = np.zeros((B, T))
    next_value, next_adv = np.zeros(B), np.zeros(B)
    for t in reversed(range(T)):
        m = mask[:, t]
        delta = rewards[:, t] + gamma * next_value - values[:, t]
        a = delta + gamma * lam * next_adv
        adv[:, t] = np.where(m, a, 0.0)
        next_value = np.where(m, values[:, t], next_value)      # positions after the answer are skipped
        next_adv = np.where(m, a, next_adv)
    return adv, np.where(mask, adv + values, 0.0)


def whiten(x, mask, shift_mean=True):
    """(x - mean) / std over the masked entries (unbiased variance), as PPO-RLHF normalises advantages."""
    mask = np.asarray(mask, dtype=bool)
    vals = x[mask]
    if vals.size < 2:
        return np.where(mask, x, 0.0)
    mean, var = vals.mean(), vals.var(ddof=1)
    out = (x - mean) / np.sqrt(var + 1e-8)
    if not shift_mean:
        out += mean
    return np.where(mask, out, 0.0)
