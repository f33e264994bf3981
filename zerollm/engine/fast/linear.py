"""The linear layer's forward with its bias folded into the product: one pass over y instead of two.

Reference: ``zerollm.nn.linear.linear_forward``, y = x @ w, then y += b. BLAS computes
C = alpha * A @ B + beta * C; with beta = 0 (what NumPy asks for) OpenBLAS first writes zeros over
the whole of C, multiplies, and then the reference reads and writes all of y once more to add b.
Here C starts as b repeated on every row and BLAS is called with beta = 1:

    y[n, :] = b                       (one write pass, instead of OpenBLAS's zeros)
    y += x @ w                        (cblas_sgemm, alpha = 1, beta = 1: the add happens in registers)

Same products, same sums; b enters the sum of each entry of y first instead of last, so an entry can
differ from the reference in its last bit where BLAS splits the sum over K into several blocks.
The gain is a few percent of the linear layers alone and less inside a training step, where y is still
in the L3 cache when the reference adds b (docs/profiles/design-decisions.md#the-bias-folded-into-the-product).
Small, but it costs one BLAS call.

For 2-16 rows of x (2-6 for w (i, o)) the few-row kernels of engine/fast/rows.py multiply instead, and b is
added after, as in the reference; so does the register-tile sgemm at 7-256 rows against a large enough w (i, o)
on one thread of an AVX-512 host (rows.packless_rows), and so does rows.split_product from 7 rows against a w of
1 MiB or more on the server's threads, split over them (rows.split_rows): the ways a layer without bias comes here.
The backward is the reference's (three products; nothing to fold). One row of x (decoding), float64, autocast,
weights that are neither (i, o) nor (o, i).T in memory, and layers without bias outside those answer
NotImplemented.
"""

import numpy as np

from zerollm.engine.amp import autocast_format
from zerollm.engine.fast.blas import NO_TRANS, ROW_MAJOR, TRANS, sgemm, thread_cap
from zerollm.engine.caches import LinearCache
from zerollm.engine.fast.rows import (column_rows, head_product, packless_product, packless_rows, rows_product,
                                      split_product, split_rows)


def _weight_layout(w):
    """(op, row stride) for cblas: w (i, o) C-contiguous -> (NO_TRANS, o); w the transpose of a
    C-contiguous (o, i) array (tied embeddings) -> (TRANS, i); anything else None."""
    if w.flags.c_contiguous:
        return NO_TRANS, w.shape[1]
    if w.T.flags.c_contiguous:
        return TRANS, w.shape[0]
    return None


def linear_forward(x, w, b=None):
    gemm = sgemm()
    if (gemm is None or autocast_format() is not None or not isinstance(w, np.ndarray)
            or not isinstance(x, np.ndarray) or not (b is None or isinstance(b, np.ndarray))
            or x.dtype != np.float32 or w.dtype != np.float32 or (b is not None and b.dtype != np.float32)
            or w.ndim != 2 or x.ndim < 1 or (b is not None and b.shape != (w.shape[1],))
            or x.shape[-1] != w.shape[0] or x.size == 0 or w.size == 0):
        return NotImplemented
    layout = _weight_layout(w)
    if layout is None:
        return NotImplemented
    op, ldb = layout
    i, o = w.shape
    x2 = np.ascontiguousarray(x.reshape(-1, i))         # (N, i): a view when x is contiguous
    n, threads = x2.shape[0], thread_cap()
    split = op == NO_TRANS and split_rows(x2, w, threads)
    if split or (op == NO_TRANS and packless_rows(x2, w, threads)):
        # 7-256 rows (a prompt's prefill, a decode step of many requests) on one AVX-512 thread: nothing packed; from
        # 7 rows on the server's threads (rows.serving_threads), y's columns split over them
        y = split_product(x2, w, threads) if split else packless_product(x2, w)
        if b is not None:
            y += b
        return y.reshape(*x.shape[:-1], o), LinearCache(x, w, b is not None)
    if b is None:                                       # nothing to fold: the reference's one BLAS call it is
        return NotImplemented
    # 2-16 rows (a decode step of a few requests), or one row against a large w: w read once (engine/fast/rows.py);
    # BLAS's sgemm packs it first
    few = (rows_product(x2, w, threads if n > 1 else 1) if op == NO_TRANS and column_rows(x2, w, threads)
           else head_product(x2, w.T) if op == TRANS else NotImplemented)
    if few is not NotImplemented:
        few += b
        return few.reshape(*x.shape[:-1], o), LinearCache(x, w, True)
    if n == 1:
        # one row (decoding a token) otherwise: NumPy's matmul calls BLAS's matrix-vector product, which streams w
        # once; sgemm with M = 1 first copies all of w into its packed panels, 4-6x slower (docs/gguf.md#decode-speed)
        return NotImplemented
    y = np.empty((n, o), np.float32)
    y[...] = b                                          # every row starts as the bias
    gemm(ROW_MAJOR, NO_TRANS, op, n, o, i, 1.0, x2.ctypes.data, i, w.ctypes.data, ldb,   # y += x2 @ w
         1.0, y.ctypes.data, o)
    return y.reshape(*x.shape[:-1], o), LinearCache(x, w, True)


KERNELS = {"linear_forward": linear_forward}
