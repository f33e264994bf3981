"""Float32 products of a few rows of x (2 to 16, or one against a large weight): each weight element read once a call.

Why: a decode step of the server's continuous batching multiplies 2-16 rows (one new token per request) by
every weight. For so few rows OpenBLAS's sgemm first copies the whole weight into its packed panels, then
multiplies: at 2-16 rows of GPT-2's head (50257 x 768, 154 MB) it took 2-4x the time of the one-row
matrix-vector product, which reads the weight once (benchmarks/rows.py). The products here read each element
of W once and use it for every row of x while it is in a register.

    head_product(x, w)        x (N, C) @ w.T, w (V, C) C-contiguous: the output head / tied embedding
                              (reference: zerollm.nn.linear.head_product). For each row r of W, the dot
                              products with 4 rows of x at a time: 4 running sums over C, which LLVM keeps in
                              vector registers (vfmadd on ymm / zmm), one horizontal sum per output. Where
                              the products, not the reading of W, take the time (a head that stays in the
                              cache, or 12 rows and more), 2 rows of W at a time: 8 sums, 6 loads for 8
                              multiply-adds instead of 5 for 4 (PAIRS_FROM_ROWS, PAIRS_UP_TO_BYTES).
    rows_product(x, w)        x (N, i) @ w, w (i, o) C-contiguous: the linear layers' layout (the fused decode
                              block, zerollm.engine.fast.decode), 2..COLUMN_ROWS_UP_TO rows. Columns in blocks
                              of ``COLUMNS``; in each block, 4 rows of W at a time are added into 2 rows of y at
                              a time (y's block stays in the L1 cache, W's rows pass once). One row against a W
                              of ONE_ROW_FROM_BYTES or more: rows k, k + q, k + 2q, k + 3q of W at a time over
                              all of y's columns, four streams from memory, faster than BLAS's gemv there.

    packless_product(x, w)    x (N, i) @ w, w (i, o) C-contiguous, 7..PACKLESS_UP_TO_ROWS rows (a decode step of
                              many requests, a prompt's prefill) on AVX-512 hosts: the attention's register-tile
                              sgemm (engine/fast/microkernel.py: 6 rows x 64 columns of y in registers, w read
                              where it lies), on one thread. OpenBLAS packs all of w into its panels at every
                              call first; at these rows that copy is a large part of the work.
    split_product(x, w, n)    the same from 7 rows, y's columns split over n threads: only on the server's
                              scheduler thread, where BLAS runs on one thread (blas.own_threads, serving_threads);
                              each part by the register-tile sgemm on AVX-512 hosts, by BLAS's sgemm elsewhere.

                              head_product takes the same sgemm as (W @ x^T)^T for 14-16 rows (8-16 against a
                              head read from memory): x^T padded with zeros to 16 columns, one vector.

Exactness: the same products as BLAS's, summed in another order: within float32 rounding of it.
Rows of W (head) or blocks of columns (rows_product) are split over threads like the quantized kernels
(blas.run_rows): rows_product's only for a w of SPLIT_FROM_BYTES or more, the head's only for a head read from
memory at 2 to COLUMN_ROWS_UP_TO rows, where large layers' products run on numba's threads too; elsewhere one
thread (beside BLAS's threads numba's took the cores from them, and a short launch lost more than it saved).
Outside those rows, for float64, non-contiguous arrays or under autocast the callers keep BLAS (head_product answers
NotImplemented, and the reference runs).
"""

import numpy as np
from numba import prange

from zerollm.engine.amp import autocast_format
from zerollm.engine.fast import microkernel
from zerollm.engine.fast.blas import (NO_TRANS, ROW_MAJOR, owns_threads, own_threads, run_planned, run_rows, sgemm,
                                     thread_cap)
from zerollm.engine.fast.jit import float32_arrays, kernel, parallel_kernel

ROWS_FROM = 2          # one row: BLAS's matrix-vector product, but for a large W (ONE_ROW_FROM_BYTES, the head's below)
ROWS_UP_TO = 16        # head_product's crossover (benchmarks/rows.py): at 16 rows BLAS's packed sgemm is level
COLUMN_ROWS_UP_TO = 6  # rows_product's: 1.4x BLAS at 6 rows of GPT-2's c_fc, 0.9x at 8
COLUMNS = 1024         # columns of y a block of rows_product (4 KB a row of y's block and of w: L1 / L2; 256 and
                       # 512 were slower on GPT-2's c_fc)
_ROWS_PER_THREAD = 64  # at least this many rows of W (or columns of y) for a thread of its own
# one row of x against a w of (i, o) from this size: streamed from memory, four streams read it faster than BLAS's
# matrix-vector product (one thread, AMD EPYC Zen 4: GPT-2's 36 matrices 401-419 -> 310-313 us each, 29 against
# 22 GB/s); the tang model's (192 x 768 and smaller, in the caches) 7.8-7.9 against 8.3 us, so they keep BLAS
ONE_ROW_FROM_BYTES = 1 << 20
# rows_product splits y's columns over threads only for a w of this size or more: below it a launch on numba's
# threads cost more than it saved (the tang model's matrices, 192 x 768 and smaller, at 2-6 rows on 2 threads:
# a decode step 1.1-3.3 ms split against 0.7-1.6 on one thread; GPT-2's, 2.4 MB and more, 23-31 against 32-39 ms)
SPLIT_FROM_BYTES = 1 << 20
# head_product takes 2 rows of W at a time from this many rows of x, or at any number for a W of at most this
# many bytes (half this host's 32 MiB L3: a head that stays in the cache is bound by its products, not by
# memory). One thread, one row of W at a time against two: the tang head (5,713 x 192, 4.4 MB) at 2 / 4 / 8 /
# 16 rows 193 / 235 / 450 / 628 against 134 / 154 / 273 / 486 us; GPT-2's (50,257 x 768, 154 MB, read from
# memory) at 6 / 8 / 10 / 12 / 16 rows 15.9 / 14.3 / 20.5 / 26.4 / 34.0 against 17.9 / 16.7 / 21.4 / 22.8 / 27.8 ms
PAIRS_FROM_ROWS = 12
PAIRS_UP_TO_BYTES = 16 << 20
# packless_product from PACKLESS_FROM_ROWS rows of x against a w of PACKLESS_FROM_BYTES or more, from
# PACKLESS_ANY_FROM_ROWS rows against one of PACKLESS_SMALL_FROM_BYTES or more, up to PACKLESS_UP_TO_ROWS rows.
# One thread, AMD EPYC Zen 4 (AVX-512), OpenBLAS 0.3.31 SkylakeX, time of ours / BLAS's (each product alone on
# random x and w, best of five timeit runs; docs/serving.md has the step it changed): GPT-2's c_fc (768 x 3072)
# at 4 / 8 / 16 / 64 / 128 rows 0.20 / 0.39 / 0.44 / 0.87 / 0.93, its c_attn (768 x 2304) 0.39 / 0.58 / 0.69 /
# 0.83 / 0.93; the tang model's c_fc (192 x 768) at 8 / 16 rows 0.65 / 0.71, its c_attn (192 x 576, 442 KB)
# 1.30 at 8 rows but 0.71 at 12; its c_proj (192 x 192, 147 KB, in the L2 cache) 1.26-1.80: BLAS's. Below 7
# rows rows_product takes w (i, o). Past 256 rows (not measured; a training batch) BLAS keeps its products.
PACKLESS_FROM_ROWS = 7
PACKLESS_ANY_FROM_ROWS = 12
PACKLESS_UP_TO_ROWS = 256
PACKLESS_FROM_BYTES = 512 << 10
PACKLESS_SMALL_FROM_BYTES = 256 << 10
TILE_COLUMNS = 64       # the register-tile sgemm's widest block: split_product's parts are whole ones
# head_product through the same sgemm as (W @ x^T)^T, x^T padded to HEAD_LANES columns (one AVX-512 vector; fewer
# would fall to its scalar edge code, 20x slower), from PADDED_HEAD_FROM_ROWS rows, or PADDED_HEAD_READ_FROM_ROWS
# for a head read from memory. One thread, same host, time of it ÷ the head kernel's (transposes included):
# GPT-2's head (50,257 x 768, 154 MB) 0.81 / 0.51 / 0.61 / 0.57 at 8 / 10 / 12 / 16 rows (26.3 -> 14.9 ms at 16);
# the tang head (5,713 x 192, 4.4 MB) 1.15 / 1.04 / 0.81 / 0.83 at 8 / 12 / 14 / 16; the llama shape's (512 x 768)
# 1.69 / 1.12 / 0.92 / 0.88. One thread only, as packless_rows.
HEAD_LANES = 16
PADDED_HEAD_FROM_ROWS = 14
PADDED_HEAD_READ_FROM_ROWS = 8
# One row of x goes to head_product only against a head larger than PAIRS_UP_TO_BYTES (read from memory): GPT-2's
# (154 MB) 9.95 ms by BLAS's matrix-vector product, 5.1 ms here; a head in the cache is BLAS's (the tang head,
# 4.4 MB: 69 against 84 us; one thread, AMD EPYC Zen 4)


def _dots(x, w, y, r0, r1):
    """y[:, r] = x @ w[r] for r0 <= r < r1: each row of w read once, against 4 rows of x at a time."""
    N, K = x.shape
    for r in range(r0, r1):
        n = 0
        while n + 4 <= N:
            s0 = s1 = s2 = s3 = np.float32(0)
            for k in range(K):
                wk = w[r, k]
                s0 += x[n, k] * wk
                s1 += x[n + 1, k] * wk
                s2 += x[n + 2, k] * wk
                s3 += x[n + 3, k] * wk
            y[n, r] = s0
            y[n + 1, r] = s1
            y[n + 2, r] = s2
            y[n + 3, r] = s3
            n += 4
        while n < N:                                   # the last 1-3 rows of x
            s = np.float32(0)
            for k in range(K):
                s += x[n, k] * w[r, k]
            y[n, r] = s
            n += 1


_dots_inline = kernel(_dots)


def _dot_pairs(x, w, y, r0, r1):
    """As _dots, two rows of w at a time against 4 rows of x: 8 running sums (an odd last row of w: _dots)."""
    N, K = x.shape
    r = r0
    while r + 2 <= r1:
        n = 0
        while n + 4 <= N:
            a0 = a1 = a2 = a3 = b0 = b1 = b2 = b3 = np.float32(0)
            for k in range(K):
                u, v = w[r, k], w[r + 1, k]
                x0, x1, x2, x3 = x[n, k], x[n + 1, k], x[n + 2, k], x[n + 3, k]
                a0 += x0 * u
                a1 += x1 * u
                a2 += x2 * u
                a3 += x3 * u
                b0 += x0 * v
                b1 += x1 * v
                b2 += x2 * v
                b3 += x3 * v
            y[n, r], y[n + 1, r], y[n + 2, r], y[n + 3, r] = a0, a1, a2, a3
            y[n, r + 1], y[n + 1, r + 1], y[n + 2, r + 1], y[n + 3, r + 1] = b0, b1, b2, b3
            n += 4
        while n < N:                                   # the last 1-3 rows of x
            a = b = np.float32(0)
            for k in range(K):
                a += x[n, k] * w[r, k]
                b += x[n, k] * w[r + 1, k]
            y[n, r], y[n, r + 1] = a, b
            n += 1
        r += 2
    if r < r1:
        _dots_inline(x, w, y, r, r1)


_dot_pairs_inline = kernel(_dot_pairs)


def _head_rows(x, w, y, r0, r1, pairs):
    if pairs:
        _dot_pairs_inline(x, w, y, r0, r1)
    else:
        _dots_inline(x, w, y, r0, r1)


_head_rows_inline = kernel(_head_rows)


def _head_serial(bounds, x, w, y, pairs):
    for t in range(bounds.shape[0] - 1):
        _head_rows_inline(x, w, y, bounds[t], bounds[t + 1], pairs)


def _head_threaded(bounds, x, w, y, pairs):
    for t in prange(bounds.shape[0] - 1):
        _head_rows_inline(x, w, y, bounds[t], bounds[t + 1], pairs)


_HEAD = (kernel(_head_serial), parallel_kernel(_head_threaded))


def two_rows_of_w(n, w):
    """Whether the head takes 2 rows of W at a time for n rows of x against w: where the products take the
    time (PAIRS_FROM_ROWS rows of x, or a W of at most PAIRS_UP_TO_BYTES), else one."""
    return n >= PAIRS_FROM_ROWS or w.nbytes <= PAIRS_UP_TO_BYTES


def _axpys(x, w, y, c0, c1):
    """y[:, c0:c1] = x @ w[:, c0:c1]: 4 rows of w at a time added into 2 rows of y's block at a time (each
    element of w loaded once for both). Slices, not indices from c0: a loop index that starts at 0 lets LLVM
    drop the negative-index check and vectorise."""
    N, K = x.shape
    for n in range(N):
        yn = y[n, c0:c1]
        for j in range(yn.shape[0]):
            yn[j] = 0
    k = 0
    while k + 4 <= K:
        w0, w1, w2, w3 = w[k, c0:c1], w[k + 1, c0:c1], w[k + 2, c0:c1], w[k + 3, c0:c1]
        n = 0
        while n + 2 <= N:
            a0, a1, a2, a3 = x[n, k], x[n, k + 1], x[n, k + 2], x[n, k + 3]
            b0, b1, b2, b3 = x[n + 1, k], x[n + 1, k + 1], x[n + 1, k + 2], x[n + 1, k + 3]
            yn, ym = y[n, c0:c1], y[n + 1, c0:c1]
            for j in range(yn.shape[0]):
                u0, u1, u2, u3 = w0[j], w1[j], w2[j], w3[j]
                yn[j] += a0 * u0 + a1 * u1 + a2 * u2 + a3 * u3
                ym[j] += b0 * u0 + b1 * u1 + b2 * u2 + b3 * u3
            n += 2
        if n < N:                                      # an odd last row
            a0, a1, a2, a3 = x[n, k], x[n, k + 1], x[n, k + 2], x[n, k + 3]
            yn = y[n, c0:c1]
            for j in range(yn.shape[0]):
                yn[j] += a0 * w0[j] + a1 * w1[j] + a2 * w2[j] + a3 * w3[j]
        k += 4
    while k < K:                                       # the last 1-3 rows of w
        wk = w[k, c0:c1]
        for n in range(N):
            a = x[n, k]
            yn = y[n, c0:c1]
            for j in range(yn.shape[0]):
                yn[j] += a * wk[j]
        k += 1


_axpys_inline = kernel(_axpys)


def _columns_serial(bounds, x, w, y):
    for t in range(bounds.shape[0] - 1):
        for c0 in range(bounds[t], bounds[t + 1], COLUMNS):
            _axpys_inline(x, w, y, c0, min(c0 + COLUMNS, bounds[t + 1]))


def _columns_threaded(bounds, x, w, y):
    for t in prange(bounds.shape[0] - 1):
        for c0 in range(bounds[t], bounds[t + 1], COLUMNS):
            _axpys_inline(x, w, y, c0, min(c0 + COLUMNS, bounds[t + 1]))


_COLUMNS = (kernel(_columns_serial), parallel_kernel(_columns_threaded))


def _one_row_axpys(x, w, y, c0, c1):
    """y[0, c0:c1] = x[0] @ w[:, c0:c1] for one row of x: rows k, k + q, k + 2q and k + 3q of w (q a quarter of
    w's rows) added into y's columns together, so w is read as four streams front to back (the k-quant kernels'
    four streams, engine/fast/kquant.py's _QUARTERS) and y's columns are loaded and stored once for four rows."""
    K = w.shape[0]
    q = K // 4
    yn = y[0, c0:c1]
    for j in range(yn.shape[0]):
        yn[j] = 0
    for k in range(q):
        a0, a1, a2, a3 = x[0, k], x[0, k + q], x[0, k + 2 * q], x[0, k + 3 * q]
        w0, w1, w2, w3 = w[k, c0:c1], w[k + q, c0:c1], w[k + 2 * q, c0:c1], w[k + 3 * q, c0:c1]
        for j in range(yn.shape[0]):
            yn[j] += a0 * w0[j] + a1 * w1[j] + a2 * w2[j] + a3 * w3[j]
    for k in range(4 * q, K):
        a, wk = x[0, k], w[k, c0:c1]
        for j in range(yn.shape[0]):
            yn[j] += a * wk[j]


_one_row_inline = kernel(_one_row_axpys)


def _one_row_serial(bounds, x, w, y):
    for t in range(bounds.shape[0] - 1):
        _one_row_inline(x, w, y, bounds[t], bounds[t + 1])


def _one_row_threaded(bounds, x, w, y):
    for t in prange(bounds.shape[0] - 1):
        _one_row_inline(x, w, y, bounds[t], bounds[t + 1])


_ONE_ROW = (kernel(_one_row_serial), parallel_kernel(_one_row_threaded))


def _sgemm(plan, a, b, c):
    """c = a @ b for a (M, K), b (K, N), c (M, N), float32 C-contiguous, by the attention's register-tile sgemm
    (addresses and row strides): the columns plan[t, 0]..plan[t, 1] of c for each row t of the plan (one row:
    one thread's share, blas.run_planned)."""
    M, K = a.shape
    N = b.shape[1]
    for t in range(plan.shape[0]):
        c0, c1 = plan[t, 0], plan[t, 1]
        microkernel.sgemm(M, c1 - c0, K, np.float32(1.0), a.ctypes.data, K, 1, b.ctypes.data + 4 * c0, N,
                          np.float32(0.0), c.ctypes.data + 4 * c0, N)


_sgemm_kernel = kernel(_sgemm)


def few_rows(x, w, up_to=ROWS_UP_TO, from_rows=ROWS_FROM):
    """True when x (N, K) @ a float32 weight goes to these kernels: from_rows..up_to rows (ROWS_UP_TO for the
    head's layout, COLUMN_ROWS_UP_TO for rows_product's), float32, C-contiguous, no autocast."""
    return (x.ndim == 2 and from_rows <= x.shape[0] <= up_to and w.ndim == 2 and float32_arrays(x, w)
            and autocast_format() is None)


def column_rows(x, w, threads):
    """Does x (N, i) @ w (i, o) go to rows_product on ``threads`` threads? 2..COLUMN_ROWS_UP_TO rows, or one row
    on one thread against a w of at least ONE_ROW_FROM_BYTES (smaller ones stay in the caches, where BLAS's
    matrix-vector product is as fast; on two threads the split of y's columns read w in pieces, and BLAS's threads
    and numba's took the cores from each other: GPT-2 / llama f32 decode 80 / 86 -> 60 / 77 tok/s). Inside
    blas.own_threads(), where BLAS runs on one thread, one row goes to rows_product on any number (the callers
    give it one thread)."""
    one_row_ok = (threads == 1 or owns_threads()) and w.nbytes >= ONE_ROW_FROM_BYTES
    return few_rows(x, w, COLUMN_ROWS_UP_TO, 1) and (x.shape[0] > 1 or one_row_ok)


def rows_product(x, w, threads=None):
    """y = x @ w for x (N, i), w (i, o), both float32 C-contiguous (few_rows(x, w, COLUMN_ROWS_UP_TO, 1): the
    caller checks). One row goes as four streams of w's rows (``_one_row_axpys``), more in blocks of columns.
    threads: blas.thread_cap() when None, one for a w under SPLIT_FROM_BYTES; the threads split y's columns, so
    the sums are the same on any number."""
    y = np.empty((x.shape[0], w.shape[1]), np.float32)
    pair = _ONE_ROW if x.shape[0] == 1 else _COLUMNS
    threads = 1 if w.nbytes < SPLIT_FROM_BYTES else thread_cap() if threads is None else threads
    run_rows(pair, threads, w.shape[1], x, w, y, per_thread=_ROWS_PER_THREAD)
    return y


def packless_rows(x, w, threads):
    """Does x (N, i) @ w (i, o) go to packless_product? On one thread (``threads``: blas.thread_cap()) of a host
    where microkernel.USE (AVX-512), float32 C-contiguous, no autocast, PACKLESS_FROM_ROWS..PACKLESS_UP_TO_ROWS rows
    against a w of PACKLESS_FROM_BYTES or more (PACKLESS_SMALL_FROM_BYTES from PACKLESS_ANY_FROM_ROWS rows): where
    BLAS's packing costs more than it saves (see the numbers above). On more threads only inside blas.own_threads()
    (the server's scheduler thread), where BLAS runs on one thread too (and a w of SPLIT_FROM_BYTES or more goes to
    split_product first). Outside it, on two threads and more, BLAS's two threads keep the product: split over
    threads beside BLAS's spinning ones, it ran at about one thread's speed (blas.own_threads)."""
    if ((threads != 1 and not owns_threads()) or not microkernel.USE
            or not few_rows(x, w, PACKLESS_UP_TO_ROWS, PACKLESS_FROM_ROWS) or x.shape[1] != w.shape[0]):
        return False
    return w.nbytes >= (PACKLESS_SMALL_FROM_BYTES if x.shape[0] >= PACKLESS_ANY_FROM_ROWS else PACKLESS_FROM_BYTES)


def packless_product(x, w):
    """y = x @ w for x (N, i), w (i, o), both float32 C-contiguous (packless_rows(x, w, threads): the caller checks),
    by the register-tile sgemm, on this thread."""
    y = np.empty((x.shape[0], w.shape[1]), np.float32)
    _sgemm_kernel(np.array([[0, w.shape[1]]], np.int64), x, w, y)
    return y


def split_rows(x, w, threads):
    """Does x (N, i) @ w (i, o) go to split_product? Only inside blas.own_threads() on two threads or more (the
    server's scheduler thread, where BLAS runs on that thread alone): PACKLESS_FROM_ROWS rows or more (no upper
    limit) against a w of SPLIT_FROM_BYTES or more, float32 C-contiguous, no autocast. A smaller w stays on one
    thread (a launch on the other costs more than it saves: blas.run_planned hands a part to a Python thread)."""
    return (threads > 1 and owns_threads() and w.nbytes >= SPLIT_FROM_BYTES
            and few_rows(x, w, x.shape[0], PACKLESS_FROM_ROWS) and x.shape[1] == w.shape[0])


def _blas_columns(plan, x, w, y):
    """y's columns plan[t, 0]..plan[t, 1] of x @ w for each row t of the plan, by BLAS's sgemm on this thread."""
    gemm, (M, K), N = sgemm(), x.shape, w.shape[1]
    for c0, c1 in plan:
        gemm(ROW_MAJOR, NO_TRANS, NO_TRANS, M, int(c1 - c0), K, 1.0, x.ctypes.data, K, w.ctypes.data + 4 * int(c0), N,
             0.0, y.ctypes.data + 4 * int(c0), N)


def split_product(x, w, threads):
    """y = x @ w for x (N, i), w (i, o), both float32 C-contiguous (split_rows(x, w, threads): the caller checks):
    y's columns in ``threads`` parts of whole 64-column tiles, one a thread (blas.run_planned), each part by the
    register-tile sgemm where microkernel.USE (AVX-512; the same sums as on one thread, bit for bit), else by BLAS's
    sgemm on that thread. The register-tile sgemm was faster than BLAS's on one thread at every size measured (64-
    1,024 rows of llama's 768 x 2,048, 2,048 x 768 and 768 x 768: 1.04-1.39x)."""
    o = w.shape[1]
    y = np.empty((x.shape[0], o), np.float32)
    parts = max(1, min(threads, o // TILE_COLUMNS))
    edges = [o * t // parts // TILE_COLUMNS * TILE_COLUMNS for t in range(parts)] + [o]
    plan = np.array([edges[:-1], edges[1:]], np.int64).T
    run_planned(_sgemm_kernel if microkernel.USE else _blas_columns, parts, plan, x, w, y)
    return y


def serving_threads():
    """The context the server's scheduler thread runs in (zerollm.engine.threads.serving_threads): blas.own_threads(),
    so that BLAS's idle threads never spin beside the event loop; its products of many rows against a large w split
    over the threads by split_product."""
    return own_threads()


def padded_head(n, w, threads):
    """Does a head product of n rows against w (V, C) go to the register-tile sgemm (_padded_head)? On one thread
    (as packless_rows) of an AVX-512 host (microkernel.USE), from PADDED_HEAD_FROM_ROWS rows
    (PADDED_HEAD_READ_FROM_ROWS for a head of more than PAIRS_UP_TO_BYTES, read from memory) up to HEAD_LANES."""
    low = PADDED_HEAD_READ_FROM_ROWS if w.nbytes > PAIRS_UP_TO_BYTES else PADDED_HEAD_FROM_ROWS
    return threads == 1 and microkernel.USE and low <= n <= HEAD_LANES


def _padded_head(x, w):
    """x @ w.T as (w @ x^T)^T: x^T padded with zeros to HEAD_LANES columns, one AVX-512 vector, so the sgemm's
    8 x 16 tile takes 8 rows of W against all of x at each step and reads W once."""
    n, C = x.shape
    xt = np.zeros((C, HEAD_LANES), np.float32)
    xt[:, :n] = x.T
    yt = np.empty((w.shape[0], HEAD_LANES), np.float32)
    _sgemm_kernel(np.array([[0, HEAD_LANES]], np.int64), w, xt, yt)
    return np.ascontiguousarray(yt[:, :n].T)


def head_product(x, w):
    """logits = x @ w.T for x (N, C), w (V, C) (the fast twin of zerollm.nn.linear.head_product); NotImplemented
    outside few_rows or when the shapes do not match."""
    if not (isinstance(x, np.ndarray) and isinstance(w, np.ndarray) and x.ndim == 2 and w.ndim == 2
            and x.shape[1] == w.shape[1] and w.shape[0] > 0
            and few_rows(x, w, ROWS_UP_TO, 1 if w.nbytes > PAIRS_UP_TO_BYTES else ROWS_FROM)):
        return NotImplemented
    # numba's threads only for a head read from memory (GPT-2's) at 2..COLUMN_ROWS_UP_TO rows, where a float32
    # model's large layers multiply on them too (rows_product); elsewhere one thread, whatever --threads says. The
    # layers' float32 products go to BLAS for one row and from 7 rows, and numba's threads and BLAS's, each spinning
    # after its own call, took the cores from each other (engine/fast/decode.py keeps its attention on one thread
    # there for the same reason); and a head in the cache is too short for a launch that wakes numba's threads once
    # a step. A decode step at 2 threads on a 2-core host, the head on 2 numba threads -> on one: tang 16 rows
    # 7.6-7.9 -> 2.2-2.6 ms, 8 rows 7.6-8.1 -> 1.2-1.5 ms, 2 / 4 rows (with rows_product's SPLIT_FROM_BYTES)
    # 1.4-2.7 / 1.7-2.4 -> 0.7 / 1.0 ms; GPT-2 1 / 8 / 16 rows 29-30 / 68-70 / 85-89 -> 21 / 52-59 / 63-71 ms.
    threads = thread_cap() if 1 < x.shape[0] <= COLUMN_ROWS_UP_TO and w.nbytes > PAIRS_UP_TO_BYTES else 1
    if padded_head(x.shape[0], w, threads):
        return _padded_head(x, w)
    y = np.empty((x.shape[0], w.shape[0]), np.float32)
    run_rows(_HEAD, threads, w.shape[0], x, w, y, two_rows_of_w(x.shape[0], w), per_thread=_ROWS_PER_THREAD)
    return y


KERNELS = {"head_product": head_product, "serving_threads": serving_threads}
