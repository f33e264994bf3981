"""Supervised fine-tuning (Part 6 of the course): learn the completion (the assistant's turns), not the prompt.

    example: ids (L,) of the whole conversation (zerollm.data.chat) and loss_mask (L,), True on the tokens to learn
    batch:   x (B, T) ids[:, :-1] and y (B, T) ids[:, 1:] with IGNORE_INDEX wherever the target is not learned
    loss:    mean cross-entropy over the learned target tokens of the batch (prompt tokens and padding have none)

Padding, not packing: each row is one example, right-padded with id 0 to the longest row of its batch.
Attention is causal, so a real token only ever sees the tokens before it, never the padding after it,
and the padding's targets are IGNORE_INDEX: no attention mask is needed and padding changes nothing
(tests/test_sft.py checks both). Packing several examples into one row would need a block-diagonal mask
so that an example cannot attend to the one before it; with examples this short padding wastes little.

Order: each epoch is a permutation of the examples drawn from the data generator, cut into batches.
With ``curriculum`` the first epoch goes from the shortest example to the longest (ties in a random
order), as the course does; later epochs are random. The permutation and the position in it are saved
in every checkpoint (objective.safetensors / state.json), so a resumed run sees exactly the same batches.

Evaluation: the loss on the first ``eval_examples`` train examples and on the heldout file, and, for a
known task, the success rate of one sampled completion per heldout prompt (zerollm.align.tasks.evaluate),
sampled from fixed seeds (seed, i): never from the training generators, and the same draws at every
evaluation, so successive success rates differ only because the model changed.
"""

import hashlib
import json
import warnings
from dataclasses import dataclass, field

import numpy as np

from zerollm.io import docsmode
from zerollm.io.argtypes import Range
from zerollm.io.errors import ZeroLLMError
from zerollm.nn.loss import IGNORE_INDEX, cross_entropy_forward
from zerollm.training.objective import Objective
from zerollm.training.lm import lm_shard_loss

PAD_ID = 0          # any valid id: padded positions are never attended to by real tokens and never targets


@dataclass(frozen=True)
class SFTConfig:
    """The settings of an SFT run besides the shared TrainConfig (each is a flag of ``zerollm sft``; the data
    files are the --data and --eval-data of every post-training command)."""
    task: str | None = field(default=None, metadata=dict(
        metavar="NAME", help="a task of 'zerollm tasks list': its success rate on --eval-data at each eval"))
    curriculum: bool = field(default=False, metadata=dict(
        help="the first epoch from the shortest example to the longest"))
    eval_examples: int = field(default=200, metadata=dict(
        metavar="N", range=Range(int, 1, 10 ** 7), help="examples (and prompts) used at each eval"))
    eval_temperature: float = field(default=1.0, metadata=dict(
        metavar="T", range=Range(float, 0, 100), help="sampling temperature of the success rate (0 = greedy)"))
    eval_max_new_tokens: int | None = field(default=None, metadata=dict(
        metavar="N", range=Range(int, 1, 10 ** 7), help="longest sampled completion (None: twice a typical one)"))

    def __post_init__(self):
        if self.eval_examples < 1:
            raise ZeroLLMError(f"--eval-examples must be >= 1, got {self.eval_examples}")
        if not self.eval_temperature >= 0:
            raise ZeroLLMError(f"--eval-temperature must be >= 0, got {self.eval_temperature}")
        if self.eval_max_new_tokens is not None and self.eval_max_new_tokens < 1:
            raise ZeroLLMError(f"--eval-max-new-tokens must be >= 1, got {self.eval_max_new_tokens}")


@dataclass(frozen=True)
class Heldout:
    """What SFT evaluates on besides the training examples: the heldout file's examples (its val_loss) and
    those of its rows that have a "prompt" the model can answer (the task's success rate)."""
    examples: tuple = ()       # [(ids, loss_mask)]
    prompts: tuple = ()        # rows {"prompt", ...fields the task's verifier reads}


# ----------------------------------------------------------------------------
# examples -> batches

def collate(examples):
    """[(ids, loss_mask)] -> {"x", "y", "lengths"}: right-padded to the longest, targets shifted by one.

    >>> b = collate([([5, 6, 7], [False, True, True]), ([5, 8], [False, True])])
    >>> b["x"].tolist(), b["y"].tolist()
    ([[5, 6], [5, 8]], [[6, 7], [8, -100]])
    """
    L = max(len(ids) for ids, _ in examples)
    ids = np.full((len(examples), L), PAD_ID, dtype=np.int64)       # (B, L)
    learn = np.zeros((len(examples), L), dtype=bool)                # (B, L)
    for b, (row, mask) in enumerate(examples):
        ids[b, :len(row)], learn[b, :len(mask)] = row, mask
    y = np.where(learn[:, 1:], ids[:, 1:], IGNORE_INDEX)            # (B, L-1) learned targets only
    return {"x": ids[:, :-1], "y": y, "lengths": np.array([len(row) for row, _ in examples])}


def fitting(examples, block_size, what="examples"):
    """The examples that fit the context (block_size + 1 ids: the model reads all but the last);
    the others are left out with a one-line warning, and none fitting is an error."""
    limit = block_size + 1
    kept = [e for e in examples if len(e[0]) <= limit]
    if len(kept) < len(examples):
        longest = max(len(e[0]) for e in examples)
        message = (f"{len(examples) - len(kept)} of {len(examples)} {what} are longer than the context "
                   f"({limit} tokens with block_size {block_size}; the longest has {longest}) and were left out, "
                   "not truncated: a cut completion would lose its end token")
        if not kept:
            raise ZeroLLMError(message.replace(" and were left out", ", so none is left") +
                               "; fine-tune a model with a longer context or use shorter examples")
        warnings.warn(message, stacklevel=2)
    return kept


# ----------------------------------------------------------------------------
# the objective

class SFTObjective(Objective):
    kind = "sft"

    def __init__(self, model, tokenizer, train, *, batch_size, seed, cfg=SFTConfig(), heldout=Heldout(), task=None):
        """train: [(ids, loss_mask)]; heldout: a Heldout; task: a task module (zerollm.align.tasks) or None."""
        super().__init__(model)
        if not train:
            raise ZeroLLMError("no training examples")
        self.tokenizer, self.train, self.heldout = tokenizer, list(train), list(heldout.examples)
        n = docsmode.limit("examples evaluated", cfg.eval_examples)
        self.prompts, self.task, self.cfg = list(heldout.prompts)[:n], task, cfg
        self.batch_size, self.seed = batch_size, seed
        self.data_rng = np.random.default_rng([seed, 1])
        self.order, self.cursor, self.epoch = self._epoch_order(0), 0, 0

    def _epoch_order(self, epoch):
        order = self.data_rng.permutation(len(self.train))
        if self.cfg.curriculum and epoch == 0:
            lengths = np.array([len(self.train[i][0]) for i in order])
            order = order[np.argsort(lengths, kind="stable")]          # short first; ties stay random
        return order

    def next_batch(self):
        picked = []
        while len(picked) < self.batch_size:
            if self.cursor == len(self.order):
                self.epoch += 1
                self.order, self.cursor = self._epoch_order(self.epoch), 0
            take = self.order[self.cursor:self.cursor + self.batch_size - len(picked)]
            picked.extend(int(i) for i in take)
            self.cursor += len(take)
        return collate([self.train[i] for i in picked])

    shard_loss = staticmethod(lm_shard_loss)    # model_only: shards may run in worker processes

    def tokens(self, batch):
        return int(batch["lengths"].sum())

    def describe(self):
        task = f", {self.task.__name__.rsplit('.', 1)[-1]} success at each eval" if self.task else ""
        return f"sft on {len(self.train)} examples ({len(self.heldout)} heldout{task})"

    def fingerprint(self):
        digest = hashlib.sha256(json.dumps([self.train, self.heldout]).encode()).hexdigest()
        return {**super().fingerprint(), "examples": digest}

    # -- exact resume ------------------------------------------------------------
    def rngs(self):
        return {"data": self.data_rng}

    def state(self):
        return {"cursor": self.cursor, "epoch": self.epoch}, {"order": self.order}

    def restore(self, state, arrays):
        self.cursor, self.epoch = int(state["cursor"]), int(state["epoch"])
        self.order = np.asarray(arrays["order"], dtype=np.int64)

    # -- evaluation ----------------------------------------------------------------
    def evaluate(self, context):
        self.model.eval()
        n = docsmode.limit("examples evaluated", self.cfg.eval_examples)
        metrics = {"train_loss": self.loss_on(context, self.train[:n])}
        if self.heldout:
            metrics["val_loss"] = self.loss_on(context, self.heldout[:n])
        text = None
        if self.task is not None and self.prompts and not context.stop_requested():
            success, text = self.task_success(context)
            metrics.update(success)
        return metrics, text

    def loss_on(self, context, examples):
        """Mean cross-entropy over every learned token of ``examples`` (batches of batch_size)."""
        total, count = 0.0, 0
        for start in range(0, len(examples), self.batch_size):
            if context.stop_requested():
                break
            batch = collate(examples[start:start + self.batch_size])
            n = int(np.count_nonzero(batch["y"] != IGNORE_INDEX))
            total += cross_entropy_forward(context.sharded.forward(batch["x"]), batch["y"])[0] * n
            count += n
        return total / count if count else float("nan")

    def task_success(self, context):
        from zerollm.align.tasks.evaluate import TaskSampling, sample_task, score
        from zerollm.generation.sample import Sampling
        how = TaskSampling("chat", self.cfg.eval_max_new_tokens, Sampling(self.cfg.eval_temperature), self.seed)
        completions, _ = sample_task(self.model, self.tokenizer, self.task, self.prompts, how,
                                     should_stop=context.stop_requested)
        summary, results = score(self.task, self.prompts, completions)
        shown = "\n".join(f"  {r['prompt']} -> {r['completion']}  (reward {r['reward']:.2f})" for r in results[:3])
        metrics = {"success": summary["success_rate"], "success_low": summary["ci95"][0],
                   "success_high": summary["ci95"][1], "reward": summary["mean_reward"]}
        return metrics, f"--- {self.task.__name__.rsplit('.', 1)[-1]} samples ---\n{shown}"
