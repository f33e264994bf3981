"""The contract between the training loop and an objective.

A batch is a dict. Arrays whose key does not start with "_" have one row per example on axis 0, so
the loop can cut the batch into shards (threads, MPI ranks) by rows; keys starting with "_" are
passed whole to every shard (a global normaliser, say) and "_metrics" holds numbers about the whole
batch (mean reward, say) that go straight into log.jsonl.

A shard's result says how much it weighs: the loss of the whole batch is the weighted mean of the
shard losses, and its gradient the weighted sum of theirs (the loop adds them in shard order, so a
run is reproducible for a given number of shards). The weight is whatever the loss averages over:
target tokens for cross-entropy, pairs for DPO, sequences for GRPO.
"""

from dataclasses import dataclass
from typing import Callable, NamedTuple

import numpy as np

from zerollm.engine import accelerated
from zerollm.engine.memory import cache_blocks
from zerollm.engine.threads import by_name_in_parts


class ShardResult(NamedTuple):
    loss: float
    grads: dict            # parameter name -> gradient of this shard's mean loss
    weight: float          # how many things this shard's loss averages over (> 0)
    metrics: dict          # name -> float or array, averaged over shards with the same weights


@dataclass(frozen=True)
class RunContext:
    """What an objective sees of the run that trains it, never the Trainer itself: the policy on the run's
    thread shards, and whether a stop was asked for. attach() gets it once; evaluate() gets it with ``step``."""
    sharded: object                       # zerollm.training.parallel.ShardedModel: forward / map over a batch's rows
    stop_requested: Callable[[], bool]    # Ctrl-C or SIGTERM arrived: long evaluations and rollouts check it
    step: int | None = None               # optimizer steps done, at an evaluation (seeds its draws)


class Objective:
    """Base class. Subclasses set ``kind`` and implement next_batch, shard_loss and evaluate."""

    kind = "base"
    progress = ("loss",)       # the step record's numbers the progress bar shows (zerollm.training.trainer.fit)

    def __init__(self, model):
        self.model = model
        self.saved = {}        # what the command records to rebuild this objective on resume (config.json)
        self.context = None    # the RunContext of the run training it (attach)

    def attach(self, context):
        """Called by the Trainer that runs this objective with its RunContext (rollouts sample on its thread
        shards and stop when it asks)."""
        self.context = context

    # -- what is trained -------------------------------------------------------
    def params(self):
        """name -> array of everything the optimizer updates (the model's, or with LoRA its adapters; plus
        any head's)."""
        return self.model.trainable()

    def config(self):
        """JSON-able settings of this objective, saved in the checkpoint's config.json."""
        return {"kind": self.kind, **self.saved}

    def describe(self):
        """One line for the start of a run: what is trained on what."""
        return self.kind

    def fingerprint(self):
        """What every MPI rank must agree on before training (zerollm.training.dist): the objective's settings and a
        digest of the starting weights; subclasses add their data."""
        from zerollm.training.checkpoint import weights_digest
        return {**self.config(), "weights": weights_digest(self.params())}

    # -- one step --------------------------------------------------------------
    def next_batch(self):
        raise NotImplementedError

    def shard_loss(self, model, batch):
        """model: the policy (a replica sharing the parameters, in train mode); batch: some rows."""
        raise NotImplementedError

    def tokens(self, batch):
        """Tokens processed for this batch (for tokens/s)."""
        return 0

    # -- evaluation --------------------------------------------------------------
    def evaluate(self, context):
        """context: a RunContext with this evaluation's step -> (metrics dict for log.jsonl, text to print or
        None). Checks context.stop_requested() inside long loops so Ctrl-C is honoured quickly."""
        return {}, None

    # -- exact resume ------------------------------------------------------------
    def rngs(self):
        """name -> np.random.Generator whose state must survive a resume (saved in rng.json)."""
        return {}

    def state(self):
        """(JSON-able dict, dict of arrays) of anything else that decides the future (a rollout buffer)."""
        return {}, {}

    def restore(self, state, arrays):
        pass


@accelerated
def add_scaled(g, a, other, b):
    """g <- g a + other b, in place: one step of the shards' gradient sum. a and b are scalars of g's
    dtype; a == 1 leaves g's own term as it is. Block by block (engine.memory.cache_blocks), so that
    other * b needs no temporary of the whole gradient's size and each block is still in cache for the sum."""
    if not (g.flags.c_contiguous and other.flags.c_contiguous and g.shape == other.shape):
        if a != 1:
            g *= a
        g += other * b
        return
    flat_g, flat_o = g.reshape(-1), other.reshape(-1)
    blocks = cache_blocks(g.size, g.itemsize)
    buf = np.empty(blocks[0].stop - blocks[0].start if blocks else 0, g.dtype)
    for part in blocks:
        block, scaled = flat_g[part], buf[:part.stop - part.start]
        if a != 1:
            block *= a
        np.multiply(flat_o[part], b, out=scaled)
        block += scaled


def split_rows(batch, n):
    """Cut a batch into at most n shards of consecutive rows (as equal as possible, never empty).

    >>> [s["x"].tolist() for s in split_rows({"x": np.arange(5), "_k": 1}, 2)]
    [[0, 1, 2], [3, 4]]
    """
    B = batch_rows(batch)
    shards = []
    for rows in np.array_split(np.arange(B), min(n, B)):
        if len(rows):
            part = slice(rows[0], rows[-1] + 1)
            shards.append({k: (v if k.startswith("_") else v[part]) for k, v in batch.items()})
    return shards


def batch_rows(batch):
    """The number of rows: the length of axis 0 of every row-wise array (they must agree)."""
    sizes = {len(v) for k, v in batch.items() if not k.startswith("_")}
    if len(sizes) != 1:
        raise ValueError(f"a batch's row-wise arrays must have the same number of rows, got {sorted(sizes)}")
    return sizes.pop()


def reduce_shards(results, pool=None):
    """Weighted mean of the shards' losses, gradients and metrics, added in shard order.

    The first shard's gradient arrays are reused for the sum (no new allocation). ``pool``: a
    zerollm.engine.threads.ThreadPool whose threads share the parameters among them (the same sums)."""
    if len(results) == 1:
        return results[0]
    total = float(sum(r.weight for r in results))
    if not total > 0:
        raise ValueError("the shards' weights add up to 0: nothing in this batch carries a loss")
    loss = sum(r.loss * r.weight for r in results) / total
    grads = results[0].grads

    def add(name):
        g = grads[name]
        scale = g.dtype.type
        for k, other in enumerate(results[1:]):     # the first shard's own term is scaled once
            add_scaled(g, scale(results[0].weight / total) if k == 0 else scale(1), other.grads[name],
                       scale(other.weight / total))
    by_name_in_parts(pool, grads, add)
    metrics = {}
    for r in results:
        for k, v in r.metrics.items():      # arrays (an MoE's per-expert shares) element by element
            metrics[k] = metrics.get(k, 0.0) + np.asarray(v, dtype=np.float64) * (r.weight / total)
    metrics = {k: float(v) if np.ndim(v) == 0 else v for k, v in metrics.items()}
    return ShardResult(loss, grads, total, metrics)
