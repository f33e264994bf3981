"""Fast full-score ("naive") attention: scores, causal softmax and weighted values of a head in one kernel.

References: ``softmax_attention`` and ``softmax_attention_backward`` in zerollm.nn.attention, the
mask-free, dropout-free core of ``sdpa_forward`` / ``sdpa_backward`` (what pre-training runs).

Why a kernel of its own: at a small model's size (nanoGPT's 4 heads of 32 over T = 64, batch 12) the
NumPy reference makes 48 tiny products per matmul call and several passes over the score array
(scale, mask, softmax, copies of the strided heads); the profile showed them at a third to a half of
the large GEMMs' speed, with the head splitting and merging around them. Here, per head:

    forward    S = scale * q k^T      (sgemm, from the strided q view of qkv and a k^T copy)
               A = softmax(S) by row  (max, exp and scale of a row while it is in L1; hidden keys 0)
               out = A v              (sgemm, written straight into the merged (B, T, C) layout)
    backward   dA = dout v^T, dS = A (dA - rowsum(dA A)), dv += A^T dout, dq = scale dS k,
               dk += scale dS^T q     (dq, dk, dv written into the caller's strided views of dqkv)

The products run in microkernel.product (ours on AVX-512 hosts, NumPy's BLAS elsewhere).
No operand of a product is copied except k^T and v^T (Tk x hs numbers per kv head): the products read the
rest through their row strides.

Causal attention skips the keys after a block's last query: the queries go in blocks of ``BLOCK``
rows, and a block multiplies only the keys its last row sees. The full (T, Tk) weights are kept, as
the reference keeps them (the backward reads them). Threads: one item per query head (forward) or
per kv head (backward, which sums its g query heads into dk and dv), dealt to numba's threads as in
the flash kernel; BLAS runs on one thread inside each.
"""

import numpy as np
from numba import prange

from zerollm.engine.amp import autocast_format
from zerollm.engine.fast import microkernel
from zerollm.engine.fast.blas import NO_TRANS, TRANS, kernel_threads, run_planned, sgemm
from zerollm.engine.fast.flash import _plan, _row_max
from zerollm.engine.fast.jit import exp32, inline, kernel, one_layout
from zerollm.engine.fast.microkernel import ROW_PAD, product

# query rows per product. Smaller blocks skip more of the hidden keys but multiply smaller blocks. 32 was
# the best block for this kernel on an AVX-512 Intel host and within 1% of the best on an AMD one, at
# nanoGPT's and 6x384's shapes and at T = 1024 (the numbers:
# docs/profiles/design-decisions.md#full-score-attention-blocks-of-32-query-rows).
BLOCK = 32


def block_pairs(T, Tk, causal, block=BLOCK):
    """(query, key) pairs the kernel multiplies for one head: what a product's FLOPs are counted on."""
    if not causal:
        return T * Tk
    total = 0
    for i0 in range(0, T, block):
        n = min(block, T - i0)
        total += n * min(Tk, max(Tk - T + i0 + n, 0))
    return total


@inline
def _rows_of(a):
    """The row stride, in elements, of a 2-D float32 view whose last axis is contiguous."""
    return a.strides[0] // 4


@inline
def _transpose(x, xt):
    """xt (hs, Tk) <- x (Tk, hs)^T: BLAS multiplies these small blocks by a transposed operand at about
    half the speed of a plain one (docs/profiles/design-decisions.md#transposed-operands-copied), and a
    copy of Tk x hs numbers costs less.
    In bands of 16 rows of x: each row of xt is then written 16 numbers (a cache line) at a time. Row
    by row, the writes would go down a column of xt, Tk floats apart: at Tk = 256 that is 1 KiB, a
    stride whose cache lines share a few cache sets and evict each other (4 ns a number, 10x slower)."""
    n, c = x.shape
    for i0 in range(0, n, 16):
        i1 = min(i0 + 16, n)
        for j in range(c):
            for i in range(i0, i1):
                xt[j, i] = x[i, j]


@inline
def _softmax_row(row, vis, stop):
    """row[:vis] <- softmax(row[:vis]); row[vis:] <- 0. The exp and the scaling run over all ``stop``
    scores of the block (the same count for every row of it, so they stay in SIMD registers), the
    hidden ones set to 0 after the exp."""
    m = _row_max(row, vis, np.float32(-np.inf))
    if m == -np.inf:                                  # every key hidden (or only -inf scores): weights 0
        row[:] = 0
        return
    total = np.float32(0.0)
    for j in range(stop):
        e = exp32(row[j] - m)
        e = e if j < vis else np.float32(0.0)
        row[j] = e
        total += e
    inv = np.float32(1.0) / total
    for j in range(stop):
        row[j] *= inv
    row[stop:] = 0


@inline
def _forward_items(plan, q, k, v, att, out, scale, causal, block, gemm, own):
    B, nkv, g, T, hs = q.shape
    Tk = k.shape[3]
    offset = Tk - T
    KT = np.empty((plan.shape[0], hs, Tk + ROW_PAD), np.float32)   # per thread: k^T of the current kv head
    for t in prange(plan.shape[0]):
        kt = KT[t]
        last = -1
        for w in range(plan.shape[1]):
            item = plan[t, w]
            if item < 0:
                break
            b, h, gi = item // (nkv * g), item // g % nkv, item % g
            qh, vh, a, o = q[b, h, gi], v[b, h, 0], att[b, h, gi], out[b, h, gi]
            if item // g != last:                               # a new kv head: transpose its keys once
                _transpose(k[b, h, 0], kt)
                last = item // g
            for i0 in range(0, T, block):
                n = min(block, T - i0)
                stop = min(Tk, max(offset + i0 + n, 0)) if causal else Tk   # keys the block's last row sees
                if stop == 0:                                   # no query of the block sees a key
                    a[i0:i0 + n] = 0
                    o[i0:i0 + n] = 0
                    continue
                product(gemm, own, NO_TRANS, n, stop, hs, np.float32(scale), qh[i0:].ctypes, _rows_of(qh),
                        kt.ctypes, Tk + ROW_PAD, np.float32(0.0), a[i0:].ctypes, Tk)                  # S = scale q k^T
                for r in range(n):
                    vis = min(max(offset + i0 + r + 1, 0), stop) if causal else stop
                    _softmax_row(a[i0 + r], vis, stop)
                product(gemm, own, NO_TRANS, n, hs, stop, np.float32(1.0), a[i0:].ctypes, Tk,
                        vh.ctypes, _rows_of(vh), np.float32(0.0), o[i0:].ctypes, _rows_of(o))   # out = A v


@inline
def _backward_items(plan, dout, q, k, v, att, dq, dk, dv, scale, causal, block, gemm, own):
    B, nkv, g, T, hs = q.shape
    Tk = k.shape[3]
    offset = Tk - T
    DP = np.empty((plan.shape[0], block, Tk), np.float32)     # per thread: dA of a block, then dS
    VT = np.empty((plan.shape[0], hs, Tk + ROW_PAD), np.float32)   # per thread: v^T of the kv head
    for t in prange(plan.shape[0]):
        dp, vt = DP[t], VT[t]
        for w in range(plan.shape[1]):
            item = plan[t, w]
            if item < 0:
                break
            b, h = item // nkv, item % nkv
            kh, vh, dkh, dvh = k[b, h, 0], v[b, h, 0], dk[b, h, 0], dv[b, h, 0]
            _transpose(vh, vt)
            for gi in range(g):
                qh, doh, a, dqh = q[b, h, gi], dout[b, h, gi], att[b, h, gi], dq[b, h, gi]
                for i0 in range((T - 1) // block * block, -1, -block):   # the last block first: it sees every key,
                    n = min(block, T - i0)                               # so its products start dk and dv (beta 0)
                    beta = np.float32(0.0) if gi == 0 and i0 + n == T else np.float32(1.0)
                    stop = min(Tk, max(offset + i0 + n, 0)) if causal else Tk
                    if stop == 0:
                        dqh[i0:i0 + n] = 0
                        continue
                    product(gemm, own, NO_TRANS, n, stop, hs, np.float32(1.0), doh[i0:].ctypes, _rows_of(doh),
                            vt.ctypes, Tk + ROW_PAD, np.float32(0.0), dp.ctypes, Tk)                 # dA = dout v^T
                    # dS before dv: the rows of A come from memory (the forward wrote them long ago) in this
                    # row-by-row pass, where the hardware prefetcher streams them, and are in cache for the
                    # product that reads them transposed (6x384's shapes: 3% off the backward, same bits)
                    for r in range(n):                          # dS = A (dA - sum_j dA A); hidden A = 0
                        ar, dr = a[i0 + r], dp[r]
                        s = np.float32(0.0)
                        for j in range(stop):
                            s += dr[j] * ar[j]
                        for j in range(stop):
                            dr[j] = ar[j] * (dr[j] - s)
                    product(gemm, own, TRANS, stop, hs, n, np.float32(1.0), a[i0:].ctypes, Tk,
                            doh[i0:].ctypes, _rows_of(doh), beta, dvh.ctypes, _rows_of(dvh))  # dv += A^T dout
                    product(gemm, own, NO_TRANS, n, hs, stop, np.float32(scale), dp.ctypes, Tk,
                            kh.ctypes, _rows_of(kh), np.float32(0.0), dqh[i0:].ctypes, _rows_of(dqh))  # dq = scale dS k
                    product(gemm, own, TRANS, stop, hs, n, np.float32(scale), dp.ctypes, Tk,
                            qh[i0:].ctypes, _rows_of(qh), beta, dkh.ctypes, _rows_of(dkh))  # dk += scale dS^T q


# one compiled kernel each, run a plan row per thread (blas.run_planned)

@kernel
def _forward_serial(plan, q, k, v, att, out, scale, causal, block, gemm, own):
    _forward_items(plan, q, k, v, att, out, scale, causal, block, gemm, own)


@kernel
def _backward_serial(plan, dout, q, k, v, att, dq, dk, dv, scale, causal, block, gemm, own):
    _backward_items(plan, dout, q, k, v, att, dq, dk, dv, scale, causal, block, gemm, own)


def _blas_rows(*arrays):
    """float32 5-D arrays whose last axis is contiguous and whose rows BLAS can step over (a view of
    qkv, a transposed buffer: any layout with those two properties, no copy needed)."""
    for a in arrays:
        if not (isinstance(a, np.ndarray) and a.dtype == np.float32 and a.ndim == 5 and a.size
                and (a.shape[-1] == 1 or a.strides[-1] == 4)
                and a.strides[-2] % 4 == 0 and a.strides[-2] >= 4 * a.shape[-1]):
            return False
    return True


def _plain(q, k, v):
    return (autocast_format() is None and sgemm() is not None and _blas_rows(q, k, v)
            and k.shape[2] == 1 and v.shape == k.shape and q.shape[:2] == k.shape[:2])


def softmax_attention(q, k, v, scale, causal):
    if not _plain(q, k, v):
        return NotImplemented                          # float64, autocast, odd layouts: the reference
    B, nkv, g, T, hs = q.shape
    Tk = k.shape[3]
    att = np.empty((B, nkv, g, T, Tk), np.float32)
    merged = np.empty((B, T, nkv, g, hs), np.float32)   # out is its transpose: merge_heads is then a view
    out = merged.transpose(0, 2, 3, 1, 4)
    n_items = B * nkv * g
    n_threads = kernel_threads(n_items)
    args = (_plan(n_threads, (1,) * n_items), q, k, v, att, out, float(scale), bool(causal), BLOCK, sgemm(),
            microkernel.USE)
    one_layout(_forward_serial, args, loose=(1, 2, 3, 5))            # q, k, v, out: views or not
    try:
        run_planned(_forward_serial, n_threads, *args)
    except TypeError:                                               # types the one compiled version cannot take
        return NotImplemented
    return out, att


def softmax_attention_backward(dout, q, k, v, att, scale, causal, out=None):
    if not (_plain(q, k, v) and _blas_rows(dout) and dout.shape == q.shape
            and isinstance(att, np.ndarray) and att.dtype == np.float32 and att.flags.c_contiguous):
        return NotImplemented
    if out is None:
        out = (np.empty(q.shape, np.float32), np.empty(k.shape, np.float32), np.empty(v.shape, np.float32))
    dq, dk, dv = out
    if not (_blas_rows(dq, dk, dv) and dq.shape == q.shape and dk.shape == k.shape and dv.shape == v.shape):
        return NotImplemented
    B, nkv = k.shape[:2]
    n_items = B * nkv
    n_threads = kernel_threads(n_items)
    args = (_plan(n_threads, (1,) * n_items), dout, q, k, v, att, dq, dk, dv, float(scale), bool(causal), BLOCK,
            sgemm(), microkernel.USE)
    one_layout(_backward_serial, args, loose=(1, 2, 3, 4, 6, 7, 8))   # all but att: views or not
    try:
        run_planned(_backward_serial, n_threads, *args)
    except TypeError:                                               # types the one compiled version cannot take
        return NotImplemented
    return dq, dk, dv


KERNELS = {"softmax_attention": softmax_attention, "softmax_attention_backward": softmax_attention_backward}
