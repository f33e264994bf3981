"""NumPy's own BLAS, callable from inside a numba kernel: sgemm and the BLAS thread count.

Why: a kernel that loops over attention tiles multiplies small blocks (128 x 64 by 64 x 256, say)
thousands of times. Calling np.matmul for each from Python costs microseconds of glue per call and
cannot run in numba's threads. Here the very library NumPy uses (the same OpenBLAS, the same speed,
the same threadpoolctl limits) is opened with ctypes, and its C entry point ``cblas_sgemm`` is handed
to the kernels as an argument (numba calls ctypes functions natively; passed as an argument, not as a
global, the function's address stays out of numba's on-disk cache).

``sgemm()`` is None when NumPy's BLAS is not an OpenBLAS we can find (another NumPy build): the
kernels that need it then answer NotImplemented and the NumPy reference runs.

Row-major cblas_sgemm: C (M, N) = alpha * op(A) (M, K) @ op(B) (K, N) + beta * C, with lda, ldb,
ldc the row strides in elements; op(X) = X or X^T (TRANS).
"""

import ctypes
import functools
import glob
import os
import threading

import numba
import numpy as np

from zerollm.engine.fast.jit import row_bounds

ROW_MAJOR, NO_TRANS, TRANS = 101, 111, 112

# (sgemm symbol, threads setter, threads getter, integer type): NumPy's wheels ship a 64-bit-integer
# OpenBLAS with a "scipy_" prefix and a "64_" suffix; a plain OpenBLAS has the unprefixed names
_SYMBOLS = [("scipy_cblas_sgemm64_", "scipy_openblas_set_num_threads64_", "scipy_openblas_get_num_threads64_",
             ctypes.c_int64),
            ("cblas_sgemm64_", "openblas_set_num_threads64_", "openblas_get_num_threads64_", ctypes.c_int64),
            ("cblas_sgemm", "openblas_set_num_threads", "openblas_get_num_threads", ctypes.c_int)]


def _numpy_blas_files():
    """Candidate shared libraries of NumPy's BLAS: threadpoolctl's answer first, then numpy.libs."""
    files = []
    try:
        from threadpoolctl import threadpool_info
        files += [i["filepath"] for i in threadpool_info()
                  if i.get("internal_api") == "openblas" and "numpy" in i["filepath"]]
    except ImportError:
        pass
    libs = os.path.join(os.path.dirname(os.path.dirname(np.__file__)), "numpy.libs")
    return files + sorted(glob.glob(os.path.join(libs, "*openblas*")))


class _Blas:
    def __init__(self, lib, names):
        gemm, setter, getter, integer = names
        self.sgemm = getattr(lib, gemm)
        c_float, ptr = ctypes.c_float, ctypes.c_void_p
        self.sgemm.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_int, integer, integer, integer, c_float,
                               ptr, integer, ptr, integer, c_float, ptr, integer]
        self.sgemm.restype = None
        self.set_threads, self.get_threads = getattr(lib, setter), getattr(lib, getter)
        self.set_threads.argtypes, self.set_threads.restype = [ctypes.c_int], None
        self.get_threads.argtypes, self.get_threads.restype = [], ctypes.c_int


@functools.cache
def _blas():
    for path in _numpy_blas_files():
        try:
            lib = ctypes.CDLL(path)
        except OSError:
            continue
        for names in _SYMBOLS:
            if all(hasattr(lib, n) for n in names[:3]):
                return _Blas(lib, names)
    return None


def sgemm():
    """The ctypes function cblas_sgemm of NumPy's BLAS, or None when it cannot be found."""
    blas = _blas()
    return None if blas is None else blas.sgemm


def blas_threads():
    """How many threads NumPy's BLAS may use now (what --threads / threadpoolctl set)."""
    blas = _blas()
    return 1 if blas is None else max(int(blas.get_threads()), 1)


class single_threaded_blas:
    """Inside the block NumPy's BLAS runs on the calling thread only: the kernel's own threads each
    call it, and a BLAS that started threads of its own inside each call would oversubscribe the CPUs."""

    def __enter__(self):
        self.before = blas_threads()
        if self.before != 1:
            _blas().set_threads(1)
        return self

    def __exit__(self, *exc):
        if self.before != 1:
            _blas().set_threads(self.before)


_OWN = [None]     # inside own_threads(): the threads the kernels split over while BLAS runs on one


class own_threads:
    """Inside the block the engine's own kernels split their work over the threads BLAS was allowed
    (``thread_cap()`` still says so), and BLAS itself runs on the calling thread only. The server's
    scheduler thread runs this way (rows.serving_threads), its large many-row products split by rows.split_product.

    Why: after a call on two threads or more, OpenBLAS's worker threads spin, waiting for the next call,
    for about 100 ms of CPU each (measured: 104 ms of one core after one 512 x 512 product on 2 threads;
    0.1 ms after one on 1 thread). A server makes such calls every step, so its BLAS workers never stop
    spinning, on the cores its event loop needs: on a 2-core host at --threads 2, one streaming client's
    tokens cost the server 2.2-2.6 ms of CPU each, against 1.2-1.8 with BLAS held here (tang shape,
    alternated runs; docs/serving.md).
    A kernel of ours split over threads beside them gets about one core's speed (a llama f32 prefill of
    64 tokens split over 2 threads: 132 ms, against 88 ms by BLAS's own threads).
    Nested blocks, and one thread, change nothing."""

    def __enter__(self):
        threads = thread_cap()
        self.blas = single_threaded_blas() if threads > 1 and _OWN[0] is None else None
        if self.blas is not None:
            self.blas.__enter__()
            _OWN[0] = threads
        return self

    def __exit__(self, *exc):
        if self.blas is not None:
            self.blas.__exit__(*exc)
            _OWN[0] = None


def owns_threads():
    """Is this inside own_threads() on more than one thread?"""
    return _OWN[0] is not None


def thread_cap():
    """What BLAS was allowed (--threads), at most numba's threads: kernel_threads' limit, asked once by a caller
    that launches several kernels in a row (engine/fast/decode.py's block). Inside own_threads(), the threads
    BLAS was allowed before it."""
    own = _OWN[0]
    return own if own is not None else min(blas_threads(), numba.config.NUMBA_NUM_THREADS)


def kernel_threads(n_items):
    """Threads for a threaded kernel (engine/fast/flash.py, quant.py): what BLAS was allowed
    (--threads), at most numba's and one per item."""
    return max(1, min(thread_cap(), n_items))


_THREADED = threading.Lock()      # one threaded launch at a time (numba's workqueue layer allows no more)


_PLANNED = {"pool": None, "split": 0}    # the planned kernels' Python threads; launches split over 2+ threads


def run_planned(serial, n_threads, plan, *args, per_thread=()):
    """``serial(plan, *args)``, where row t of the int plan is thread t's list of work items: on one thread,
    or with each row on its own Python thread (the kernels are nogil, so the rows run at once), BLAS on
    one thread each. ``per_thread``: the positions in ``args`` of arrays with one slab per thread (axis 0),
    each row given its own. The attention kernels (sdpa.py, flash.py) run this way rather than through a
    parallel=True twin: compiling a kernel that large again for numba's threads costs 10-25 s of CPU
    each, the same arithmetic a row at a time costs nothing more, and a launch of milliseconds does not
    feel the ~50 us a Python thread takes to start its row."""
    if n_threads == 1 or plan.shape[0] == 1:
        return serial(plan, *args)
    if _PLANNED["pool"] is None:
        from concurrent.futures import ThreadPoolExecutor
        _PLANNED["pool"] = ThreadPoolExecutor(max_workers=max(1, numba.config.NUMBA_NUM_THREADS - 1),
                                              thread_name_prefix="zerollm-kernel")
    with single_threaded_blas():
        def row(t):
            return plan[t:t + 1], *(a[t:t + 1] if i in per_thread else a for i, a in enumerate(args))
        rest = [_PLANNED["pool"].submit(serial, *row(t)) for t in range(1, plan.shape[0])]
        serial(*row(0))                             # this thread takes the first row
        for row in rest:
            row.result()
    _PLANNED["split"] += 1


def planned_splits():
    """How many planned launches have run over two threads or more (for the tests)."""
    return _PLANNED["split"]


def run_threaded(serial, threaded, n_threads, *args):
    """The serial kernel on one thread, else the threaded one on n_threads numba threads. While another Python
    thread's threaded launch runs, this one runs serially. The row kernels launched here never call BLAS, so
    BLAS's thread count is left as it is, and numba's is changed only where it differs from n_threads (on a
    machine of n_threads cores, never): a decode step makes about fifty launches, and switching both counts
    there and back was about 8 us of Python each (engine/fast/decode.py)."""
    if n_threads == 1 or not _THREADED.acquire(blocking=False):
        return serial(*args)
    try:
        before = numba.get_num_threads()
        if before == n_threads:
            return threaded(*args)
        numba.set_num_threads(n_threads)
        try:
            return threaded(*args)
        finally:
            numba.set_num_threads(before)
    finally:
        _THREADED.release()


def run_rows(pair, threads, R, *args, per_thread=64):
    """A (serial, threaded) pair of row kernels over R rows of W, each thread given at least ``per_thread`` rows
    and at most ``threads`` threads (blas.thread_cap()); the kernels get the row bounds first, then args. One
    thread calls the serial kernel straight away: a decode step's usual case, fifty products a token. The kernels
    must not call BLAS (run_threaded leaves BLAS's thread count as it is)."""
    n_threads = max(1, min(threads, R // per_thread))
    bounds = row_bounds(R, n_threads)
    if n_threads == 1:
        return pair[0](bounds, *args)
    return run_threaded(*pair, n_threads, bounds, *args)
