"""Weight-only matmul with k-quant weights: y = x @ W^T, W held as Q4_K / Q5_K / Q6_K super-blocks as stored.

The layouts are zerollm.interop.kquant's (the engine room cannot import it; the matrix comes in as an object
with ``kind``, ``blocks`` (R, nb, bytes a block) uint8 and ``shape``). Each super-block of a row of W is
decoded sub-block by sub-block into registers and used against every row of x; the float matrix never
exists. The sub-block's scale and min are taken out of the inner sum:

    Q4_K / Q5_K   sum_l (d sc q_l - dmin m) x_l  =  d sc * sum_l q_l x_l  -  dmin m * sum_l x_l
    Q6_K          sum_l d sc (q_l - 32) x_l      =  d sc * sum_l (q_l - 32) x_l

so the inner loop is one integer-to-float multiply-add per weight. The float32 sums run in another order
than the NumPy reference (dequantize, then BLAS): results agree to float32 rounding, not to the bit.

Shapes: x (N, K), W (R, K) as blocks (R, nb, bytes), y (N, R); nb = K / 256.
"""

import numpy as np

from zerollm.engine.fast.jit import float32_arrays, inline, kernel

QK = 256


@inline
def _f16(lo, hi):
    """Two bytes (little-endian) of an IEEE float16 -> its value as float32 (exact)."""
    h = np.int32(lo) | (np.int32(hi) << 8)
    e, f = (h >> 10) & 31, h & 1023
    if e == 0:
        v = np.float32(f) * np.float32(2.0 ** -24)                       # subnormal
    elif e == 31:
        v = np.float32(np.inf) if f == 0 else np.float32(np.nan)
    else:
        v = np.float32(1024 + f) * np.float32(2.0) ** np.float32(e - 25)
    return -v if h & 0x8000 else v


@inline
def _scale_min(blk, j, o):
    """Sub-block j's six-bit scale and min from the 12 bytes at blk[o:o + 12]."""
    if j < 4:
        return np.float32(blk[o + j] & 63), np.float32(blk[o + 4 + j] & 63)
    sc = (blk[o + 4 + j] & 15) | ((blk[o + j - 4] >> 6) << 4)
    m = (blk[o + 4 + j] >> 4) | ((blk[o + j] >> 6) << 4)
    return np.float32(sc), np.float32(m)


@kernel
def _q45_k_matmul(x, blocks, fifth, y):
    """Q4_K (fifth False) and Q5_K (fifth True, its qh bits at bytes 16..47, codes from byte 48)."""
    N = x.shape[0]
    R, nb = blocks.shape[0], blocks.shape[1]
    codes = 48 if fifth else 16
    for r in range(R):
        for n in range(N):
            s = np.float32(0.0)
            for b in range(nb):
                blk = blocks[r, b]
                d, dmin = _f16(blk[0], blk[1]), _f16(blk[2], blk[3])
                for j in range(8):
                    sc, m = _scale_min(blk, j, 4)
                    start, shift, at = b * QK + 32 * j, 4 * (j & 1), codes + 32 * (j >> 1)
                    qx = np.float32(0.0)
                    xs = np.float32(0.0)
                    for l in range(32):
                        q = (np.int32(blk[at + l]) >> shift) & 15
                        if fifth:
                            q |= ((np.int32(blk[16 + l]) >> j) & 1) << 4
                        xv = x[n, start + l]
                        qx += np.float32(q) * xv
                        xs += xv
                    s += (d * sc) * qx - (dmin * m) * xs
            y[n, r] = s


@kernel
def _q6_k_matmul(x, blocks, y):
    """Q6_K: ql (128 bytes), qh (64), int8 scales (16), d; by halves of 128 numbers and quarters of 32."""
    N = x.shape[0]
    R, nb = blocks.shape[0], blocks.shape[1]
    for r in range(R):
        for n in range(N):
            s = np.float32(0.0)
            for b in range(nb):
                blk = blocks[r, b]
                d = _f16(blk[208], blk[209])
                for half in range(2):
                    for quarter in range(4):              # numbers 128 half + 32 quarter + l
                        low_at = 64 * half + 32 * (quarter & 1)
                        low_shift, high_shift = 4 * (quarter >> 1), 2 * quarter
                        start = b * QK + 128 * half + 32 * quarter
                        for g in range(2):                # two sub-blocks of 16, each its own scale
                            sc = np.float32(np.int8(blk[192 + 8 * half + 2 * quarter + g]))
                            acc = np.float32(0.0)
                            for l in range(16 * g, 16 * g + 16):
                                q = ((np.int32(blk[low_at + l]) >> low_shift) & 15) | \
                                    (((np.int32(blk[128 + 32 * half + l]) >> high_shift) & 3) << 4)
                                acc += np.float32(q - 32) * x[n, start + l]
                            s += (d * sc) * acc
            y[n, r] = s


def kquant_matmul(x, w):
    """x (N, K) float32, w a k-quant matrix (R, K) -> y (N, R) float32; NotImplemented (the reference runs)
    for any other matrix or input."""
    kind = getattr(w, "kind", None)
    if kind not in ("q4_K", "q5_K", "q6_K") or not float32_arrays(x) or x.ndim != 2 or x.shape[1] != w.shape[1]:
        return NotImplemented
    blocks = np.ascontiguousarray(w.blocks)
    y = np.empty((x.shape[0], w.shape[0]), np.float32)
    if kind == "q6_K":
        _q6_k_matmul(x, blocks, y)
    else:
        _q45_k_matmul(x, blocks, kind == "q5_K", y)
    return y
