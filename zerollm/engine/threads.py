"""How many CPU threads the matrix library (BLAS) may use.

NumPy's BLAS starts one thread per core. For the small matrices of a tiny model, or on a machine
that is busy with other work, fewer threads are often faster: BLAS threads that wait for each other
while the OS runs something else waste whole time slices. ``--threads`` sets the limit.

``ThreadPool`` and ``by_name_in_parts``: the shard threads of zerollm.training.parallel also share
the per-parameter work between two steps (the gradient sum, its norm, AdamW), parameter by parameter.
"""

import contextlib
from concurrent.futures import ThreadPoolExecutor

from zerollm.engine import accelerated
from zerollm.io.argtypes import THREADS


def add_threads_argument(parser, data_parallel=False):
    more = (" For training, N > 1 splits every batch into N shards computed in parallel threads "
            "(faster than BLAS threads alone); resume with the same N for bit-identical losses.") if data_parallel else ""
    parser.add_argument("--threads", type=THREADS, default=None, metavar="N",
                        help="CPU threads for the matrix products (default: the library's own choice, "
                             "usually one per core)." + more)


@contextlib.contextmanager
def limit_threads(n):
    """Limit every BLAS/OpenMP pool in this process to n threads inside the block (None = no change)."""
    if n is None:
        yield
        return
    from zerollm.io.errors import ZeroLLMError
    if n < 1:
        raise ZeroLLMError(f"--threads must be >= 1, got {n}")
    from threadpoolctl import threadpool_limits
    with threadpool_limits(limits=n):
        yield


@accelerated
def serving_threads():
    """The context a scheduler's own thread runs in (generation.batching.Scheduler.run: the server's, beside its
    event loop). Here nothing changes: NumPy's BLAS takes the threads --threads allowed. The fast engine's
    kernel of this name runs BLAS on the calling thread only, so that BLAS's idle workers do not spin on the
    cores the event loop needs, and splits the large products over those threads itself (engine/fast/rows.py)."""
    return contextlib.nullcontext()


class ThreadPool(ThreadPoolExecutor):
    """A ThreadPoolExecutor that says how many threads it has (``n_threads``)."""

    def __init__(self, n_threads, name):
        super().__init__(n_threads, thread_name_prefix=name)
        self.n_threads = n_threads


# Below this many numbers in all the arrays together, by_name_in_parts works in the calling thread: waking
# the pool's threads and handing Python's GIL back and forth costs more than the split saves: nanoGPT's
# CPU model (0.8M parameters) got slower on 2 threads, 6x384 (10.7M) faster on both engines
# (docs/profiles/design-decisions.md#work-shared-between-threads-share_from).
SHARE_FROM = 1 << 21


def by_name_in_parts(pool, arrays, fn):
    """fn(name) for every name of ``arrays`` (a dict of NumPy arrays); returns {name: result}, in the
    dict's order.

    pool None (or one thread), or fewer than SHARE_FROM numbers in all: one after another, here. A
    ThreadPool of n threads: the names cut into n groups of about the same number of elements (largest
    first, each to the lightest group), one group per thread. Meant for per-parameter work between two
    training steps (adding the shards' gradients, their norm, the AdamW update): NumPy's loops and the
    fast engine's kernels let go of Python's GIL on large arrays, so the groups really do run on n cores.
    Each name's work is the same whichever thread does it, so the results are bit-identical to the
    serial ones."""
    n = 1 if pool is None else pool.n_threads
    if n <= 1 or len(arrays) < 2 or sum(a.size for a in arrays.values()) < SHARE_FROM:
        return {name: fn(name) for name in arrays}
    groups, loads = [[] for _ in range(n)], [0] * n
    for name in sorted(arrays, key=lambda k: -arrays[k].size):
        lightest = loads.index(min(loads))
        groups[lightest].append(name)
        loads[lightest] += arrays[name].size
    done = {}
    for part in pool.map(lambda names: [(name, fn(name)) for name in names], groups):
        done.update(part)
    return {name: done[name] for name in arrays}
