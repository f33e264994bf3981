"""Reward modelling (Part 7): learn to score answers so that the preferred one of a pair scores higher.

The model is a GPT trunk plus a scalar head read at the last real token of "prompt + answer"
(zerollm.model.heads, prefix "score"). For a pair with rewards r_c (chosen) and r_r (rejected):

    Bradley-Terry (Bradley & Terry 1952; Ouyang et al. 2022):  loss = -log sigmoid(r_c - r_r - m)
    margin ranking (a hinge):                                  loss = max(0, m - (r_c - r_r))

m is the pair's "margin" field (default 0) for Bradley-Terry, and the --margin setting for the hinge
(default 1). Only differences of rewards matter to either loss, so the scale and offset of r are free.
"""

from dataclasses import dataclass, field

import numpy as np

from zerollm.io import docsmode
from zerollm.io.errors import ZeroLLMError
from zerollm.model.heads import head_params, scalar_head_backward, scalar_head_forward
from zerollm.training.objective import Objective, ShardResult
from zerollm.align.objectives.pairs import PairSampler, both_sides, check_lengths, chunks, pad_rows, pair_batch

LOSSES = ("bt", "margin")


@dataclass(frozen=True)
class RewardConfig:
    loss: str = field(default="bt", metadata={"choices": LOSSES, "help": "bt = Bradley-Terry; margin = hinge"})
    margin: float = field(default=1.0, metadata={"help": "the hinge's margin (with bt, each pair's own "
                                                         "'margin' field is used)"})

    def __post_init__(self):
        if self.loss not in LOSSES:
            raise ZeroLLMError(f"reward loss must be one of {', '.join(LOSSES)}; got {self.loss!r}")
        if not self.margin >= 0:
            raise ZeroLLMError(f"--margin must be >= 0, got {self.margin}")


# ----------------------------------------------------------------------------
# the losses: (mean loss, d/dr_chosen, d/dr_rejected)

def bradley_terry_loss(r_chosen, r_rejected, margin=0.0):
    """mean over pairs of -log sigmoid(d), d = r_c - r_r - m.

    -log sigmoid(d) = log(1 + exp(-d)) = logaddexp(0, -d) (no overflow for any d), and
    d/dd [-log sigmoid(d)] = -sigmoid(-d), so dr_c = -sigmoid(-d) / B and dr_r = +sigmoid(-d) / B.

    >>> round(bradley_terry_loss(np.array([0.0]), np.array([0.0]))[0], 4)    # log 2
    0.6931
    """
    d = r_chosen - r_rejected - margin
    B = d.shape[0]
    loss = float(np.logaddexp(0.0, -d).mean())
    g = -_sigmoid(-d) / B
    return loss, g, -g


def margin_ranking_loss(r_chosen, r_rejected, margin=1.0):
    """mean over pairs of max(0, m - (r_c - r_r)), as torch.nn.MarginRankingLoss with target 1.

    The gradient is -1/B (chosen) and +1/B (rejected) where the hinge is active, else 0."""
    gap = margin - (r_chosen - r_rejected)
    B = gap.shape[0]
    loss = float(np.maximum(gap, 0.0).mean())
    g = -(gap > 0).astype(r_chosen.dtype) / B
    return loss, g, -g


def _sigmoid(x):
    return 0.5 * (1.0 + np.tanh(0.5 * x))             # = 1 / (1 + exp(-x)), without overflow


# ----------------------------------------------------------------------------
# the objective

class RewardObjective(Objective):
    kind = "reward"
    progress = ("loss", "accuracy")

    def __init__(self, model, pairs, *, batch_size, seed, config=RewardConfig(), eval_pairs=(), head=None):
        """pairs: encoded preference pairs (zerollm.align.objectives.pairs); head: saved "score.*" params, or
        None for a fresh head that starts at 0 for every text."""
        super().__init__(model)
        self.cfg = config
        # the reward is read at a side's last token, so the model reads every token of it
        counted = "the reward model reads per side (its block_size: the reward is read at the last one)"
        self.sampler = PairSampler(pairs, batch_size, seed, model.config.block_size, counted)
        self.eval_pairs = list(eval_pairs)
        if self.eval_pairs:
            check_lengths(self.eval_pairs, model.config.block_size, counted)
        self.head = head if head is not None else head_params("score", model.config.n_embd, model.dtype)
        self._params = {**model.trainable(), **self.head}

    def params(self):
        return self._params


    def next_batch(self):
        return self.sampler.next()

    def tokens(self, batch):
        return int(batch["chosen"].size + batch["rejected"].size)

    def rngs(self):
        return {"pairs": self.sampler.rng}

    # ------------------------------------------------------------------
    def rewards(self, model, ids, last, keep=False):
        """(2B, T) ids -> (2B,) rewards at the given last positions, and the head's cache."""
        return read_rewards(model, self.head, ids, last, keep)

    def loss(self, r_c, r_r, margin):
        if self.cfg.loss == "margin":
            return margin_ranking_loss(r_c, r_r, self.cfg.margin)
        return bradley_terry_loss(r_c, r_r, margin)

    def shard_loss(self, model, batch):
        ids, _, last = both_sides(batch)
        B = len(batch["chosen"])
        r, cache = self.rewards(model, ids, last, keep=True)
        loss, dr_c, dr_r = self.loss(r[:B], r[B:], batch["margin"])
        dh, dw, db = scalar_head_backward(np.concatenate([dr_c, dr_r]), cache)
        grads = dict(model.backward(dhidden=dh))
        grads["score.weight"], grads["score.bias"] = dw, db
        metrics = {"accuracy": pair_accuracy(r[:B], r[B:]), "margin": float(np.mean(r[:B] - r[B:]))}
        return ShardResult(loss + model.moe_loss(), grads, B, metrics)   # backward added the MoE terms

    # ------------------------------------------------------------------
    def evaluate(self, context):
        if not self.eval_pairs:
            return {}, None
        pairs = self.eval_pairs[:docsmode.limit("examples evaluated", len(self.eval_pairs))]
        result = self.score_pairs(context.sharded, pairs, context.stop_requested)
        return {k: v for k, v in result.items() if not isinstance(v, dict)}, format_pair_report(result)

    def score_pairs(self, sharded, pairs, should_stop=lambda: False, batch_size=32):
        """Rewards of every pair (chosen, rejected) -> accuracy, mean margin, loss, and per corruption."""
        self.model.eval()
        r_c, r_r = [], []
        for part in chunks(pairs, batch_size):
            if should_stop():
                break
            ids, _, last = both_sides(pair_batch(part))
            r = batch_rewards(sharded, self.head, ids, last)
            r_c.append(r[:len(part)])
            r_r.append(r[len(part):])
        return pair_report(pairs[:sum(len(c) for c in r_c)], np.concatenate(r_c), np.concatenate(r_r))


# ----------------------------------------------------------------------------
# reading rewards (also what `zerollm score` and PPO's --rm use)

def read_rewards(model, head, ids, last, keep=False):
    """ids (B, T) -> (rewards (B,) read at positions last (B,), the head's cache)."""
    h = model.forward_hidden(ids, keep=keep)
    return scalar_head_forward(h, head["score.weight"], head["score.bias"], last)


def batch_rewards(sharded, head, ids, last):
    """Rewards of a padded batch, its rows spread over the thread shards (a ShardedModel)."""
    parts = sharded.map(lambda m, rows: read_rewards(m, head, rows["ids"], rows["last"])[0], {"ids": ids, "last": last})
    return np.concatenate(parts)


def sequence_rewards(sharded, head, sequences, batch_size=32, should_stop=lambda: False):
    """Rewards of token sequences (lists of ids, each read at its last token), batch by batch."""
    out = []
    for part in chunks(sequences, batch_size):
        if should_stop():
            break
        ids, real = pad_rows(part)
        out.append(batch_rewards(sharded, head, ids, real.sum(axis=1) - 1))
    return np.concatenate(out) if out else np.zeros(0)


def pair_accuracy(r_c, r_r):
    """The share of pairs whose chosen answer scores higher; a tie counts half (a coin flip).

    >>> pair_accuracy(np.array([1.0, 0.0, 2.0]), np.array([0.0, 0.0, 3.0]))
    0.5
    """
    return float(np.mean(r_c > r_r) + 0.5 * np.mean(r_c == r_r))


def accuracy_with_interval(r_c, r_r, name):
    """{name, name_low, name_high}: the pairwise accuracy and its 95% Wilson interval (loss.png draws it)."""
    from zerollm.align.tasks.evaluate import wilson
    accuracy = pair_accuracy(r_c, r_r)
    low, high = wilson(accuracy * len(r_c), len(r_c))
    return {name: accuracy, f"{name}_low": low, f"{name}_high": high}


def pair_report(pairs, r_c, r_r):
    """Accuracy (chosen scored higher), mean margin and Bradley-Terry loss, overall and per corruption type."""
    report = {"pairs": len(pairs), **accuracy_with_interval(r_c, r_r, "val_accuracy"),
              "val_margin": float(np.mean(r_c - r_r)), "val_loss": bradley_terry_loss(r_c, r_r)[0]}
    kinds = sorted({p["corruption"] for p in pairs if isinstance(p.get("corruption"), str)})
    if kinds:
        which = np.array([p.get("corruption") for p in pairs], dtype=object)
        report["by_corruption"] = {k: {"pairs": int((which == k).sum()),
                                       "accuracy": pair_accuracy(r_c[which == k], r_r[which == k]),
                                       "margin": float(np.mean(r_c[which == k] - r_r[which == k]))}
                                   for k in kinds}
    return report


def format_pair_report(report):
    lines = [f"pairwise accuracy {report['val_accuracy']:.4f} on {report['pairs']} pairs, "
             f"mean margin {report['val_margin']:.4f}"]
    for kind, r in report.get("by_corruption", {}).items():
        lines.append(f"  {kind:<16} {r['accuracy']:.4f}  ({r['pairs']} pairs, margin {r['margin']:.3f})")
    return "\n".join(lines)


def load_reward_model(path):
    """(GPT trunk in eval mode, {"score.weight", "score.bias"}, tokenizer) of a reward-model checkpoint
    (zerollm.interop.opening; a LoRA reward run comes with its base)."""
    from zerollm.interop.opening import Source, open_model
    opened = open_model(Source(ckpt=path), tokenizer="may")
    heads = opened.heads
    if not {"score.weight", "score.bias"} <= set(heads):
        raise ZeroLLMError(f"{path} is not a reward model (it has no score head); train one with 'zerollm reward'")
    return opened.model, {k: heads[k] for k in ("score.weight", "score.bias")}, opened.need_tokenizer()
