"""Direct Preference Optimization (Rafailov et al. 2023), beyond the course: learn from preference pairs
without a reward model or sampling, against a frozen copy of the starting model (the reference).

For a pair, with log pi(y|x) summed over the answer's tokens under the policy and the reference:

    z = [log pi(y_c|x) - log pi(y_r|x)] - [log ref(y_c|x) - log ref(y_r|x)]
    sigmoid (DPO):  loss = -log sigmoid(beta z)
    ipo (Azar et al. 2023):  loss = (z - 1/(2 beta))^2, with log-probabilities AVERAGED over the answer's
                             tokens (as Hugging Face TRL does for IPO)

beta (z) per side is the "implicit reward" beta (log pi - log ref): heldout accuracy counts the pairs
whose chosen answer gets the larger implicit reward.
"""

from dataclasses import dataclass, field

import numpy as np

from zerollm.io import docsmode
from zerollm.io.errors import ZeroLLMError
from zerollm.training.objective import Objective, ShardResult
from zerollm.align.objectives.pairs import PairSampler, both_sides, check_lengths, chunks, pair_batch
from zerollm.align.objectives.reward import _sigmoid, accuracy_with_interval, pair_accuracy
from zerollm.model.policy import token_logprobs, token_logprobs_backward

LOSS_TYPES = ("sigmoid", "ipo")


@dataclass(frozen=True)
class DPOConfig:
    beta: float = field(default=0.1, metadata={"help": "how far from the reference the policy may move: "
                                                       "larger = closer"})
    loss_type: str = field(default="sigmoid", metadata={"choices": LOSS_TYPES, "help": "sigmoid = DPO; ipo = IPO"})

    def __post_init__(self):
        if self.loss_type not in LOSS_TYPES:
            raise ZeroLLMError(f"DPO loss_type must be one of {', '.join(LOSS_TYPES)}; got {self.loss_type!r}")
        if not self.beta > 0:
            raise ZeroLLMError(f"--beta must be > 0, got {self.beta}")


def dpo_loss(pi_c, pi_r, ref_c, ref_r, beta=0.1, loss_type="sigmoid"):
    """Mean loss over pairs and its gradients w.r.t. pi_c and pi_r (the reference gets none).

    sigmoid: d/dz -log sigmoid(beta z) = -beta sigmoid(-beta z);  ipo: d/dz (z - 1/(2 beta))^2 = 2 (z - 1/(2 beta)).
    z grows with pi_c and falls with pi_r, so dpi_c = dz / B and dpi_r = -dz / B.

    >>> loss, dc, dr = dpo_loss(*np.zeros((4, 1)))      # policy == reference: z = 0
    >>> round(loss, 4), round(float(dc[0]), 4)          # log 2, -beta/2
    (0.6931, -0.05)
    """
    z = (pi_c - pi_r) - (ref_c - ref_r)
    B = z.shape[0]
    if loss_type == "ipo":
        gap = z - 1.0 / (2.0 * beta)
        loss, dz = float(np.mean(gap ** 2)), 2.0 * gap / B
    elif loss_type == "sigmoid":
        loss, dz = float(np.logaddexp(0.0, -beta * z).mean()), -beta * _sigmoid(-beta * z) / B
    else:
        raise ZeroLLMError(f"DPO loss_type must be one of {', '.join(LOSS_TYPES)}; got {loss_type!r}")
    return loss, dz, -dz


def sequence_logps(logp, mask, average):
    """Per-row log-probability of the answer: the sum over its tokens, or the mean (IPO)."""
    total = (logp * mask).sum(axis=1)
    return total / np.maximum(mask.sum(axis=1), 1) if average else total


class DPOObjective(Objective):
    kind = "dpo"
    progress = ("loss", "accuracy")

    def __init__(self, model, reference, pairs, *, batch_size, seed, config=DPOConfig(), eval_pairs=()):
        """reference: a frozen GPT, usually a second copy of the starting model."""
        super().__init__(model)
        self.ref, self.cfg = reference.eval(), config
        # a side of T+1 tokens is read as T (block_size) and scored on its last T: each token after the first
        limit = model.config.block_size + 1
        counted = (f"dpo takes per side (the model reads block_size {model.config.block_size} of them and "
                   "predicts the last one, which it never reads)")
        self.sampler = PairSampler(pairs, batch_size, seed, limit, counted)
        self.eval_pairs = list(eval_pairs)
        if self.eval_pairs:
            check_lengths(self.eval_pairs, limit, counted)


    def next_batch(self):
        return self.sampler.next()

    def tokens(self, batch):
        return int(batch["chosen"].size + batch["rejected"].size)

    def rngs(self):
        return {"pairs": self.sampler.rng}

    # ------------------------------------------------------------------
    def _logps(self, model, ids, mask, keep):
        logp, _, cache = token_logprobs(model, ids, mask, keep=keep)
        return sequence_logps(logp, mask, self.cfg.loss_type == "ipo"), cache

    def shard_loss(self, model, batch):
        ids, mask, _ = both_sides(batch)
        B = len(batch["chosen"])
        pi, cache = self._logps(model, ids, mask, keep=True)
        ref, _ = self._logps(self.ref, ids, mask, keep=False)
        loss, d_c, d_r = dpo_loss(pi[:B], pi[B:], ref[:B], ref[B:], self.cfg.beta, self.cfg.loss_type)
        dseq = np.concatenate([d_c, d_r])                                     # (2B,) d loss / d sequence logp
        if self.cfg.loss_type == "ipo":
            dseq = dseq / np.maximum(mask.sum(axis=1), 1)                     # the mean's 1/n
        grads = token_logprobs_backward(model, dseq[:, None] * mask, cache)   # every answer token gets dseq
        reward = self.cfg.beta * (pi - ref)
        metrics = {"reward_chosen": float(reward[:B].mean()), "reward_rejected": float(reward[B:].mean()),
                   "accuracy": pair_accuracy(reward[:B], reward[B:])}
        return ShardResult(loss + model.moe_loss(), grads, B, metrics)   # backward added the MoE terms

    # ------------------------------------------------------------------
    def evaluate(self, context):
        if not self.eval_pairs:
            return {}, None
        pairs = self.eval_pairs[:docsmode.limit("examples evaluated", len(self.eval_pairs))]
        report = self.implicit_rewards(context.sharded, pairs, context.stop_requested)
        text = (f"implicit-reward accuracy {report['val_accuracy']:.4f} on {report['pairs']} heldout pairs, "
                f"DPO loss {report['val_loss']:.4f}")
        return report, text

    def implicit_rewards(self, sharded, pairs, should_stop=lambda: False, batch_size=32):
        """Heldout: DPO loss and the share of pairs whose chosen answer has the larger implicit reward."""
        self.model.eval()
        parts = []
        for part in chunks(pairs, batch_size):
            if should_stop():
                break
            ids, mask, _ = both_sides(pair_batch(part))

            def seq(model, rows):
                pi, _ = self._logps(model, rows["ids"], rows["mask"], keep=False)
                ref, _ = self._logps(self.ref, rows["ids"], rows["mask"], keep=False)
                return pi - ref
            diff = np.concatenate(sharded.map(seq, {"ids": ids, "mask": mask}))
            parts.append((diff[:len(part)], diff[len(part):]))
        c = np.concatenate([p[0] for p in parts])
        r = np.concatenate([p[1] for p in parts])
        loss = dpo_loss(c, r, np.zeros_like(c), np.zeros_like(r), self.cfg.beta, self.cfg.loss_type)[0]
        return {"pairs": len(c), **accuracy_with_interval(c, r, "val_accuracy"), "val_loss": loss}
