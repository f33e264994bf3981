"""Pre-training: predict the next token of random windows of a text (Part 2 of the course).

    batch: x (B, T) token ids, y (B, T) the same windows shifted left by one
    loss:  mean cross-entropy of y given x, over every target token
           (+ aux_loss_coef * aux + z_loss_coef * z for a mixture of experts, zerollm.nn.moe)

A mixture of experts also reports, per step: ce_loss (the cross-entropy alone, comparable with a
dense model's loss), aux_loss, z_loss, dropped_frac and expert_frac (one list of E shares per MoE
block): the fields docs/moe.md describes.

Evaluation estimates the train and validation loss on ``eval_iters`` random batches each, drawn from
a generator seeded by (seed, step) so it never shifts the training stream, and prints a short sample.
With a tokenizer whose tokens have a known size in bytes, the validation batches are also given in
bits per UTF-8 byte (``val_bpb``, zerollm.evaluate.bpb), comparable across tokenizers.
"""

import hashlib
import warnings

import numpy as np

from zerollm.io import docsmode
from zerollm.data.tokens import get_batch
from zerollm.generation.display import printable
from zerollm.nn.loss import IGNORE_INDEX, cross_entropy_forward, token_nll
from zerollm.training.objective import Objective, ShardResult
from zerollm.training.processes import model_only
from zerollm.tokenizers.bytecount import bits_and_bytes, token_byte_lengths


@model_only
def lm_shard_loss(model, batch):
    """Cross-entropy of batch["y"] given batch["x"] (plus the MoE auxiliary losses, whose gradients
    backward() always adds); its weight is the number of target tokens. Marked model_only: with
    --threads N its shards may run in worker processes (zerollm.training.processes)."""
    _, ce = model.forward(batch["x"], batch["y"])
    weight = int(np.count_nonzero(batch["y"] != IGNORE_INDEX))
    return ShardResult(ce + model.moe_loss(), model.backward(), weight, moe_metrics(model, ce))


def moe_metrics(model, ce):
    """The routing of the last forward as log fields ({} for a dense model)."""
    stats = model.moe_stats
    if stats is None:
        return {}
    return {"ce_loss": float(ce), "aux_loss": stats["aux_loss"], "z_loss": stats["z_loss"],
            "dropped_frac": stats["dropped_frac"], "expert_frac": stats["expert_frac"]}


class LMObjective(Objective):
    kind = "lm"

    def __init__(self, model, train_data, val_data, *, batch_size, seed, eval_iters, sample_tokens=0,
                 tokenizer=None):
        super().__init__(model)
        self.train_data, self.val_data = train_data, val_data
        self.batch_size, self.seed = batch_size, seed
        self.eval_iters, self.sample_tokens, self.tokenizer = eval_iters, sample_tokens, tokenizer
        self.data_rng = np.random.default_rng([seed, 1])
        self.byte_lengths = token_byte_lengths(tokenizer) if tokenizer is not None else None

    def _batch(self, data, rng):
        return get_batch(data, self.batch_size, self.model.config.block_size, rng)

    def next_batch(self):
        x, y = self._batch(self.train_data, self.data_rng)
        return {"x": x, "y": y}

    shard_loss = staticmethod(lm_shard_loss)    # the function itself, so the trainer sees its model_only mark

    def tokens(self, batch):
        return batch["x"].size

    def rngs(self):
        return {"data": self.data_rng}

    def fingerprint(self):
        digest = lambda a: hashlib.sha256(np.ascontiguousarray(a).tobytes()).hexdigest()
        return {**super().fingerprint(), "train_data": digest(self.train_data), "val_data": digest(self.val_data)}

    # ------------------------------------------------------------------
    def evaluate(self, context):
        metrics = self.estimate_loss(context)
        text = None
        if self.sample_tokens and self.tokenizer is not None and not context.stop_requested():
            text = "--- sample ---\n" + self.sample(context) + "\n--------------"
        return metrics, text

    def estimate_loss(self, context):
        """Mean loss over eval_iters random batches of each split, from an RNG seeded by the step."""
        self.model.eval()
        out = {}
        for split, data in (("train", self.train_data), ("val", self.val_data)):
            rng = np.random.default_rng([self.seed, 2, context.step])
            losses, bits, nbytes = [], 0.0, 0
            for _ in range(docsmode.limit("evaluation batches", self.eval_iters)):
                if context.stop_requested():          # Ctrl-C: a partial estimate, then the loop stops
                    break
                x, y = self._batch(data, rng)
                logits = context.sharded.forward(x)
                losses.append(cross_entropy_forward(logits, y)[0])
                if split == "val" and self.byte_lengths is not None:
                    b, n = bits_and_bytes(token_nll(logits, y), y, self.byte_lengths)
                    bits, nbytes = bits + b, nbytes + n
            out[f"{split}_loss"] = float(np.mean(losses)) if losses else float("nan")
        if self.byte_lengths is not None and nbytes:
            out["val_bpb"] = bits / nbytes            # the same batches in bits per UTF-8 byte (zerollm.evaluate.bpb)
        return out

    def sample(self, context):
        """A short sample from the start of the validation text (for the eval printout)."""
        from zerollm.generation.decode import generate
        from zerollm.generation.sample import Sampling
        prompt = np.asarray(self.val_data[:1], dtype=np.int64)
        rng = np.random.default_rng([self.seed, 3, context.step])
        ids = [int(prompt[0])]
        with warnings.catch_warnings():          # a sample longer than the context is expected here
            warnings.simplefilter("ignore")
            n = docsmode.limit("sample tokens", self.sample_tokens)
            for t in generate(self.model, prompt, n, Sampling(temperature=0.8), rng=rng):
                ids.append(int(t[0]))
                if context.stop_requested():
                    break
        return printable(self.tokenizer.decode(ids))     # an untrained model emits control bytes too
