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
threads. Any objective (zerollm.align.objectives) runs through the same ``run``.

Where fork is safe (Linux), functions marked ``model_only`` (the language-model loss, the forward
of ``forward``) run their shards in worker processes instead of threads, which share no GIL
(zerollm.training.processes); the shards, seeds and sums are the same, and so are the results.
$ZEROLLM_SHARD_WORKERS=threads keeps every shard in a thread.
"""

import numpy as np

from zerollm.engine.threads import ThreadPool
from zerollm.io.errors import ZeroLLMError
from zerollm.training.objective import reduce_shards, split_rows
from zerollm.training.processes import ProcessShards, model_only, picklable, worker_mode


class ShardedModel:
    """Runs ``model`` on batch shards in ``n_threads`` threads (of each of ``world.size`` MPI ranks,
    zerollm.training.dist). With 1 thread in a world of one it is the model itself."""

    def __init__(self, model, n_threads, world=None, workers=None):
        """workers: 'processes' or 'threads' for the shards of ``model_only`` functions (default:
        zerollm.training.processes.worker_mode()); other functions always use threads."""
        if isinstance(n_threads, bool) or not isinstance(n_threads, int) or n_threads < 1:
            raise ZeroLLMError(f"the number of threads must be a whole number >= 1, got {n_threads!r}")
        from zerollm.training.dist import SINGLE
        self.model, self.n_threads, self.world = model, n_threads, world or SINGLE
        self.n_shards = n_threads * self.world.size
        # the shard threads; between steps also the threads that share the per-parameter work (the
        # gradient sum here, the norm and AdamW in the Trainer: zerollm.engine.threads.by_name_in_parts)
        self.pool = ThreadPool(n_threads, "zerollm-shard") if n_threads > 1 else None
        # processes only in a world of one: forking an MPI rank is not supported by MPI libraries
        self.workers = workers or worker_mode()
        self.procs = None      # ProcessShards, forked at the first batch that can use them

    def _processes(self, fn):
        """The worker processes for fn, or None when its shards run in threads."""
        if (self.n_threads == 1 or self.world.size > 1 or self.workers != "processes"
                or not getattr(fn, "model_only", False) or not hasattr(self.model, "replica")
                or not picklable(fn)):
            return None
        if self.procs is not None and not self.procs.matches(self.model):
            dead = not self.procs.alive
            self.procs.close()
            self.procs = None
            if dead:                       # a worker died: threads from now on
                self.workers = "threads"
                return None
        if self.procs is None:
            self.procs = ProcessShards(self.model, self.n_threads - 1, self.pool)
        return self.procs

    def _replicas(self, seeds):
        """Replicas sharing the parameters. Their dropout generators are seeded from the model's own,
        so a saved model.rng still decides every future mask (exact resume)."""
        return [self.model.replica(np.random.default_rng(int(s))) for s in seeds]

    def map(self, fn, batch, *, training=False, reduced=False):
        """[fn(replica, shard) for each shard of the batch's rows], in shard order, on every rank.

        This rank computes its own shards (in parallel threads) and gathers the others' results.
        ``training``: the replicas need dropout generators, drawn from the model's; inference draws
        nothing, so evaluating never moves the training stream. ``reduced``: the caller reduces the
        results before the next call, so worker processes' arrays may stay in shared memory."""
        if self.n_shards == 1:
            return [fn(self.model, batch)]
        shards = split_rows(batch, self.n_shards)
        # every rank draws every shard's seed, so model.rng stays the same on all of them
        seeds = self.model.rng.integers(0, 2**63, size=len(shards)) if training else np.zeros(len(shards))
        procs = self._processes(fn)
        if procs is not None:
            local = lambda i: fn(self.model.replica(np.random.default_rng(int(seeds[i]))), shards[i])
            return procs.map(fn, shards, seeds, local, copy=not reduced)
        mine = range(self.world.rank * self.n_threads, min((self.world.rank + 1) * self.n_threads, len(shards)))
        replicas = self._replicas(seeds[mine.start:mine.stop])
        local = list((self.pool or _Serial()).map(lambda i: fn(replicas[i - mine.start], shards[i]), mine))
        if self.world.size == 1:
            return local
        return [r for part in self.world.allgather(local) for r in part]

    def run(self, shard_loss, batch):
        """One batch through ``shard_loss(model, rows) -> ShardResult``: the reduced ShardResult."""
        return reduce_shards(self.map(shard_loss, batch, training=True, reduced=True), self.pool)

    def forward_backward(self, x, y):
        """(mean loss over the batch's valid targets, gradients of that loss), like forward + backward."""
        from zerollm.training.lm import lm_shard_loss
        result = self.run(lm_shard_loss, {"x": x, "y": y})
        return result.loss, result.grads

    def forward(self, x):
        """Logits of the whole batch, computed shard by shard in parallel (inference)."""
        parts = self.map(forward_logits, {"x": x})
        return parts[0] if len(parts) == 1 else np.concatenate(parts, axis=0)

    def close(self):
        if self.pool is not None:
            self.pool.shutdown()
        if self.procs is not None:
            self.procs.close()
            self.procs = None


@model_only
def forward_logits(model, rows):
    """The logits of rows["x"] (what ``ShardedModel.forward`` computes per shard)."""
    return model.forward(rows["x"])[0]


class _Serial:
    """map() in the calling thread (one thread per rank)."""

    def map(self, fn, items):
        return [fn(i) for i in items]
