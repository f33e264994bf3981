"""Data parallelism inside one process: a batch cut into shards, one thread per shard.

NumPy releases Python's GIL inside BLAS calls and inside ufunc loops over large arrays, so two
Python threads really do compute at the same time. With BLAS limited to one thread each, every
part of the step runs on all cores: the matrix products AND the elementwise work (GELU, softmax,
layernorm), which BLAS's own threading leaves on a single core. On 2 cores this made a training
step of nanoGPT's CPU model about 1.45x faster than letting BLAS use both cores.

The maths is the same as one big batch: the loss is the weighted mean of the shard losses and the
gradient is the weighted sum of the shard gradients (the mean loss of a batch is a weighted mean of
the mean losses of its parts; the weight is what each part averages over, e.g. its target tokens).
Only the order of the float additions changes, so results are reproducible for a given number of
threads. Any objective (zerollm.objectives) runs through the same ``run``.
"""

from concurrent.futures import ThreadPoolExecutor

import numpy as np

from zerollm.errors import ZeroLLMError
from zerollm.objectives.base import reduce_shards, split_rows


class ShardedModel:
    """Runs ``model`` on batch shards in ``n_threads`` threads. With 1 thread it is the model itself."""

    def __init__(self, model, n_threads):
        if isinstance(n_threads, bool) or not isinstance(n_threads, int) or n_threads < 1:
            raise ZeroLLMError(f"the number of threads must be a whole number >= 1, got {n_threads!r}")
        self.model, self.n_threads = model, n_threads
        self.pool = ThreadPoolExecutor(n_threads, thread_name_prefix="zerollm-shard") if n_threads > 1 else None

    def _replicas(self, k):
        """k replicas sharing the parameters. Their dropout generators are seeded from the model's own,
        so a saved model.rng still decides every future mask (exact resume)."""
        seeds = self.model.rng.integers(0, 2**63, size=k)
        return [self.model.replica(np.random.default_rng(int(s))) for s in seeds]

    def map(self, fn, batch):
        """[fn(replica, shard) for each shard of the batch's rows], computed in parallel, in shard order."""
        if self.pool is None:
            return [fn(self.model, batch)]
        shards = split_rows(batch, self.n_threads)
        replicas = self._replicas(len(shards))
        return list(self.pool.map(lambda i: fn(replicas[i], shards[i]), range(len(shards))))

    def run(self, shard_loss, batch):
        """One batch through ``shard_loss(model, rows) -> ShardResult``: the reduced ShardResult."""
        return reduce_shards(self.map(shard_loss, batch))

    def forward_backward(self, x, y):
        """(mean loss over the batch's valid targets, gradients of that loss), like forward + backward."""
        from zerollm.objectives.lm import lm_shard_loss
        result = self.run(lm_shard_loss, {"x": x, "y": y})
        return result.loss, result.grads

    def forward(self, x):
        """Logits of the whole batch, computed shard by shard in parallel (inference)."""
        parts = self.map(lambda model, rows: model.forward(rows["x"])[0], {"x": x})
        return parts[0] if len(parts) == 1 else np.concatenate(parts, axis=0)

    def close(self):
        if self.pool is not None:
            self.pool.shutdown()
