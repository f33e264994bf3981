"""PPO for language models (Ziegler et al. 2019; Ouyang et al. 2022), with a value head on the shared trunk.

Per rollout batch:
    per-token reward  r_t = -kl_coef (log pi_old - log ref)_t,   plus the answer's score at its last token
    values            V_t from the value head ("v_head") at sampling time
    advantages        GAE(gamma, lambda) over the answer, whitened over the batch; returns = A + V
Per minibatch:
    loss = clipped policy loss + vf_coef * clipped value loss - ent_coef * exact entropy

The value head reads the same final hidden states as the language-model head (a shared trunk, as the
course does): one forward serves both, and the value loss's gradient flows into the trunk too.
kl_coef can adapt (Ziegler et al. 2019): after each rollout batch it moves toward the value that keeps
the measured KL near --target-kl.
"""

from dataclasses import dataclass, field

import numpy as np

from zerollm.io.errors import ZeroLLMError
from zerollm.model.heads import head_params, scalar_head_backward, scalar_head_forward
from zerollm.training.objective import ShardResult
from zerollm.model.policy import token_logprobs, token_logprobs_backward
from zerollm.align.rl.advantages import gae, whiten
from zerollm.align.rl.losses import Critic, PPOSettings, policy_stats, ppo_loss
from zerollm.align.rl.objective import RolloutConfig, RolloutObjective


@dataclass(frozen=True)
class PPOConfig(RolloutConfig):
    epochs: int = field(default=2, metadata={"help": "passes over each rollout batch"})
    minibatches: int = field(default=2, metadata={"help": "optimizer steps per pass"})
    gamma: float = field(default=1.0, metadata={"help": "discount of future rewards"})
    lam: float = field(default=0.95, metadata={"help": "GAE's lambda"})
    vf_coef: float = field(default=0.1, metadata={"help": "weight of the value loss"})
    epsilon_value: float = field(default=0.2, metadata={"help": "clip range of the value update"})
    ent_coef: float = field(default=0.0, metadata={"help": "weight of the entropy bonus"})
    kl_coef: float = field(default=0.05, metadata={"help": "KL penalty to the reference inside the reward"})
    target_kl: float | None = field(default=None, metadata={"help": "adapt kl_coef to keep the KL near this "
                                                                    "(None = fixed coefficient)"})
    kl_horizon: int = field(default=10000, metadata={"help": "the adaptive controller's horizon, in answers"})

    def __post_init__(self):
        super().__post_init__()
        if not (0 <= self.gamma <= 1 and 0 <= self.lam <= 1):
            raise ZeroLLMError("--gamma and --lam must be in [0, 1]")
        if min(self.vf_coef, self.epsilon_value, self.ent_coef, self.kl_coef) < 0:
            raise ZeroLLMError("--vf-coef, --epsilon-value, --ent-coef and --kl-coef must be >= 0")
        if self.target_kl is not None and not self.target_kl > 0 or self.kl_horizon < 1:
            raise ZeroLLMError("--target-kl must be > 0 and --kl-horizon >= 1")


class PPOObjective(RolloutObjective):
    kind = "ppo"

    def __init__(self, *args, config, value_head=None, **kw):
        super().__init__(*args, config=config, **kw)
        C = self.model.config.n_embd
        self.head = value_head if value_head is not None else head_params("v_head", C, self.model.dtype)
        self._params = {**self.model.trainable(), **self.head}
        self.kl_coef = config.kl_coef

    def params(self):
        return self._params

    # ------------------------------------------------------------------
    def values(self, model, ids, keep=False):
        """V (B, T) for the answer tokens: V[:, t] is read from the hidden state that predicts token t."""
        logits_input = ids[:, :-1]
        h = model.forward_hidden(logits_input, keep=keep)                # (B, T-1, C)
        v, cache = scalar_head_forward(h, self.head["v_head.weight"], self.head["v_head.bias"])
        return np.concatenate([np.zeros((len(ids), 1), v.dtype), v], axis=1), cache

    def advantages(self, buffer):
        ids, mask = buffer["ids"], buffer["mask"]
        parts = self.context.sharded.map(lambda m, rows: self.values(m.eval(), rows["ids"])[0], {"ids": ids})
        old_values = np.concatenate(parts) * mask
        kl = (buffer["old_logp"] - buffer["ref_logp"]) * mask             # k1 per token, as in InstructGPT
        rewards = -self.kl_coef * kl
        last = mask.shape[1] - 1 - np.argmax(mask[:, ::-1], axis=1)       # each answer's last token
        rewards[np.arange(len(ids)), last] += buffer["reward"]
        adv, returns = gae(rewards, old_values, mask, self.cfg.gamma, self.cfg.lam)
        self._adapt_kl(float(kl.sum(axis=1).mean()), len(ids))
        return {"adv": whiten(adv, mask), "returns": returns, "old_values": old_values}

    def _adapt_kl(self, kl, n):
        """Ziegler et al. (2019): kl_coef *= 1 + clip(KL / target - 1, -0.2, 0.2) * n / horizon."""
        if self.cfg.target_kl is not None:
            error = np.clip(kl / self.cfg.target_kl - 1.0, -0.2, 0.2)
            self.kl_coef *= 1.0 + error * n / self.cfg.kl_horizon

    def _rollout_metrics(self, reward, *args):
        m = super()._rollout_metrics(reward, *args)
        m["kl_coef"] = self.kl_coef
        return m

    # ------------------------------------------------------------------
    def shard_loss(self, model, batch):
        ids, mask = batch["ids"], batch["mask"]
        logp, H, cache = token_logprobs(model, ids, mask, entropy=True, keep=True)
        x_f = model.last_hidden()                                         # (B, T-1, C): what the head reads
        v, vcache = scalar_head_forward(x_f, self.head["v_head.weight"], self.head["v_head.bias"])
        values = np.concatenate([np.zeros((len(ids), 1), v.dtype), v], axis=1)
        loss, dlogp, dvalues, dH = ppo_loss(
            logp, batch["old_logp"], batch["adv"], mask, critic=Critic(values, batch["old_values"], batch["returns"]),
            entropy=H, settings=PPOSettings(self.cfg.epsilon, self.cfg.epsilon_value, self.cfg.vf_coef,
                                            self.cfg.ent_coef))
        dh, dw, db = scalar_head_backward(dvalues[:, 1:], vcache)
        grads = dict(token_logprobs_backward(model, dlogp, cache, dentropy=dH, dhidden=dh))
        grads["v_head.weight"], grads["v_head.bias"] = dw, db
        n = max(mask.sum(), 1)
        stats = policy_stats(logp, batch["old_logp"], batch["ref_logp"], batch["adv"], mask, self.cfg.epsilon)
        stats["entropy"] = float((H * mask).sum() / n)
        stats["value_loss"] = float((0.5 * (values - batch["returns"]) ** 2 * mask).sum() / n)
        return ShardResult(loss + model.moe_loss(), grads, float(mask.sum()), stats)   # + the MoE terms backward added

    # ------------------------------------------------------------------
    def state(self):
        state, arrays = super().state()
        return {**state, "kl_coef": self.kl_coef}, arrays

    def restore(self, state, arrays):
        super().restore(state, arrays)
        self.kl_coef = state.get("kl_coef", self.cfg.kl_coef)
