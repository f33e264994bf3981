"""How many CPU threads the matrix library (BLAS) may use.

NumPy's BLAS starts one thread per core. For the small matrices of a tiny model, or on a machine
that is busy with other work, fewer threads are often faster: BLAS threads that wait for each other
while the OS runs something else waste whole time slices. ``--threads`` sets the limit.
"""

import contextlib

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
