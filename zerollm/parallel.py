"""Data parallelism inside one process: a batch cut into shards, one thread per shard.

NumPy releases Python's GIL inside BLAS calls and inside ufunc loops over large arrays, so two
Python threads really do compute at the same time. With BLAS limited to one thread each, every
part of the step runs on all cores: the matrix products AND the elementwise work (GELU, softmax,
layernorm), which BLAS's own threading leaves on a single core. On 2 cores this made a training
step of nanoGPT's CPU model about 1.45x faster than letting BLAS use both cores.

The maths is the same as one big batch: the loss is the token-weighted mean of the shard losses
and the gradient is the token-weighted sum of the shard gradients (the mean loss of a batch is
a weighted mean of the mean losses of its parts). Only the order of the float additions changes,
so results are reproducible for a given number of threads.
"""

from concurrent.futures import ThreadPoolExecutor

import numpy as np

from zerollm.errors import ZeroLLMError
from zerollm.nn.loss import IGNORE_INDEX


class ShardedModel:
    """Runs ``model`` on batch shards in ``n_threads`` threads. With 1 thread it is the model itself."""

    def __init__(self, model, n_threads):
        if not isinstance(n_threads, int) or n_threads < 1:
            raise ZeroLLMError(f"the number of threads must be a whole number >= 1, got {n_threads!r}")
        self.model, self.n_threads = model, n_threads
        self.pool = ThreadPoolExecutor(n_threads, thread_name_prefix="zerollm-shard") if n_threads > 1 else None

    def _shards(self, B):
        """Contiguous row ranges, as equal as possible; never an empty shard."""
        return [s for s in np.array_split(np.arange(B), min(self.n_threads, B)) if len(s)]

    def _replicas(self, k):
        """k replicas sharing the parameters. Their dropout generators are seeded from the model's own,
        so a saved model.rng still decides every future mask (exact resume)."""
        seeds = self.model.rng.integers(0, 2**63, size=k)
        return [self.model.replica(np.random.default_rng(int(s))) for s in seeds]

    def forward_backward(self, x, y):
        """(mean loss over the batch's valid targets, gradients of that loss), like forward + backward."""
        if self.pool is None:
            _, loss = self.model.forward(x, y)
            return loss, self.model.backward()
        shards = self._shards(x.shape[0])
        replicas = self._replicas(len(shards))

        def run(i):
            rows = slice(shards[i][0], shards[i][-1] + 1)
            _, loss = replicas[i].forward(x[rows], y[rows])
            return loss, replicas[i].backward(), int(np.count_nonzero(y[rows] != IGNORE_INDEX))

        results = list(self.pool.map(run, range(len(shards))))
        total = sum(n for _, _, n in results)
        if total == 0:
            raise ZeroLLMError("every target in the batch is ignore_index: there is nothing to learn from")
        loss = sum(l * n for l, _, n in results) / total
        grads = results[0][1]
        for name, g in grads.items():               # token-weighted sum, in shard order
            g *= g.dtype.type(results[0][2] / total)
            for _, other, n in results[1:]:
                g += other[name] * g.dtype.type(n / total)
        return loss, grads

    def forward(self, x):
        """Logits of the whole batch, computed shard by shard in parallel (inference)."""
        if self.pool is None:
            return self.model.forward(x)[0]
        shards = self._shards(x.shape[0])
        replicas = self._replicas(len(shards))
        parts = self.pool.map(lambda i: replicas[i].forward(x[shards[i][0]:shards[i][-1] + 1])[0],
                              range(len(shards)))
        return np.concatenate(list(parts), axis=0)

    def close(self):
        if self.pool is not None:
            self.pool.shutdown()
