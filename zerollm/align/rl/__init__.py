"""Reinforcement learning from feedback (Parts 8-9): PPO with a value head and GRPO with verifiable rewards.

The functions tests and users call directly:

    group_advantages(rewards, group_size, scale=True) -> advantages
    grpo_loss(logp, old_logp, ref_logp, advantages, mask, *, epsilon=0.2, beta=0.04, loss_type="grpo")
        -> (loss, dlogp)
    ppo_loss(logp, old_logp, advantages, mask, *, critic=Critic(values, old_values, returns), entropy=,
             settings=PPOSettings(epsilon, epsilon_value, vf_coef, ent_coef))
        -> (loss, dlogp, dvalues, dentropy)
    gae(rewards, values, mask, gamma, lam) -> (advantages, returns)
"""

from zerollm.align.rl.advantages import gae, group_advantages, whiten
from zerollm.align.rl.losses import LOSS_TYPES, Critic, PPOSettings, grpo_loss, policy_stats, ppo_loss

__all__ = ["group_advantages", "gae", "whiten", "grpo_loss", "policy_stats", "ppo_loss", "Critic", "PPOSettings",
           "LOSS_TYPES"]
