"""GRPO (Shao et al. 2024, DeepSeekMath): no critic, G answers per prompt, each judged against its group.

    A_i  = (r_i - mean(r_group)) / (std(r_group) + 1e-4)     (scale_rewards; Dr. GRPO leaves out the std)
    loss = normalise( -min(rho A, clip(rho, 1-eps, 1+eps) A) + beta k3(policy || reference) )

With one pass over each rollout batch (epochs = minibatches = 1, TRL's default) rho is exactly 1 and the
clipping never acts; more passes reuse the samples, and then it does.
"""

from dataclasses import dataclass, field

from zerollm.io import docsmode
from zerollm.io.errors import ZeroLLMError
from zerollm.training.objective import ShardResult
from zerollm.model.policy import token_logprobs, token_logprobs_backward
from zerollm.align.rl.advantages import group_advantages
from zerollm.align.rl.losses import LOSS_TYPES, grpo_loss, policy_stats
from zerollm.align.rl.objective import RolloutConfig, RolloutObjective


@dataclass(frozen=True)
class GRPOConfig(RolloutConfig):
    group_size: int = field(default=8, metadata={"help": "answers sampled per prompt (G)"})
    beta: float = field(default=0.04, metadata={"help": "weight of the k3 KL term to the reference (0 = none)"})
    loss_type: str = field(default="grpo", metadata={"choices": LOSS_TYPES,
                                                      "help": "how token losses are averaged (as in TRL)"})
    scale_rewards: bool = field(default=True, metadata={"help": "divide advantages by the group's std "
                                                                "(--no-scale-rewards: Dr. GRPO)"})

    def __post_init__(self):
        super().__post_init__()
        if self.group_size < 2:
            raise ZeroLLMError(f"--group-size must be >= 2: GRPO compares answers within a group; got {self.group_size}")
        if self.beta < 0:
            raise ZeroLLMError(f"--beta must be >= 0, got {self.beta}")
        if self.loss_type not in LOSS_TYPES:
            raise ZeroLLMError(f"--loss-type must be one of {', '.join(LOSS_TYPES)}; got {self.loss_type!r}")


class GRPOObjective(RolloutObjective):
    kind = "grpo"

    def __init__(self, *args, config, **kw):
        super().__init__(*args, config=config, **kw)
        self.group = docsmode.limit("answers per prompt", config.group_size)    # tests/test_docs_run.py

    def advantages(self, buffer):
        return {"adv": group_advantages(buffer["reward"], self.group, scale=self.cfg.scale_rewards)}

    def shard_loss(self, model, batch):
        ids, mask = batch["ids"], batch["mask"]
        logp, H, cache = token_logprobs(model, ids, mask, entropy=True, keep=True)   # H only logged (no bonus)
        args = (logp, batch["old_logp"], batch["ref_logp"], batch["adv"], mask)
        loss, dlogp = grpo_loss(*args, epsilon=self.cfg.epsilon, beta=self.cfg.beta, loss_type=self.cfg.loss_type)
        grads = token_logprobs_backward(model, dlogp, cache)
        weight = mask.sum() if self.cfg.loss_type == "bnpo" else len(ids)    # what the loss averages over
        stats = policy_stats(*args, epsilon=self.cfg.epsilon)
        stats["entropy"] = float((H * mask).sum() / max(mask.sum(), 1))   # exact, over the whole vocabulary
        return ShardResult(loss + model.moe_loss(), grads, float(weight), stats)   # backward added the MoE terms
