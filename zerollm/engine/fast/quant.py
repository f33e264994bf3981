"""Weight-only quantized matmul: y = x @ W^T with W held as Q8_0 / Q4_0 blocks, never as floats.

Reference: ``zerollm.nn.linear.quantized_matmul`` (dequantize the whole matrix, then BLAS).
Here each 32-number block of a row of W is decoded into registers, used against every row of x,
and dropped: the float matrix never exists. Decoding one token (x is one row) reads every weight
once, so it is memory-bound, and Q8_0 reads 34 bytes per 32 weights where float32 reads 128.

    block b of row r:  w[j] = d[r, b] * q[j]   (Q8_0, q int8)
                       w[j] = d[r, b] * (c[j] - 8)   (Q4_0, c the 4-bit codes; byte j: c[j] | c[j+16] << 4)
    y[n, r] = sum_b sum_j d[r, b] q[j] x[n, 32 b + j]

Shapes: x (N, K), W (R, K) as scales (R, nb) float32 and codes, y (N, R); nb = K / 32.
"""

import numpy as np

from zerollm.engine.fast.jit import float32_arrays, kernel

BLOCK = 32


@kernel
def _q8_0_matmul(x, scales, codes, y):
    """32 running sums, one per position j in a block: lane j adds d * q[j] * x[32 b + j] over the
    blocks b, and the lanes are summed at the end. Written so, the lane loop is one SIMD multiply-add
    per 8 or 16 lanes; a sum over each block first is a chain LLVM leaves scalar (4x slower)."""
    N, K = x.shape
    R, nb = scales.shape
    lanes = np.empty(BLOCK, np.float32)
    for r in range(R):                                   # row r of W stays in cache for every row of x
        for n in range(N):
            lanes[:] = 0
            for b in range(nb):
                d = scales[r, b]
                start = b * BLOCK
                for j in range(BLOCK):                   # one block, decoded on the fly
                    lanes[j] += d * (np.float32(codes[r, start + j]) * x[n, start + j])
            s = np.float32(0.0)
            for j in range(BLOCK):
                s += lanes[j]
            y[n, r] = s


@kernel
def _q4_0_matmul(x, scales, codes, y):
    """As _q8_0_matmul; byte j of a block holds the codes of positions j (low nibble) and j + 16 (high)."""
    N, K = x.shape
    R, nb = scales.shape
    half = BLOCK // 2
    lanes = np.empty(BLOCK, np.float32)
    for r in range(R):
        for n in range(N):
            lanes[:] = 0
            for b in range(nb):
                d = scales[r, b]
                start, packed = b * BLOCK, b * half
                for j in range(half):
                    c = codes[r, packed + j]
                    lanes[j] += d * (np.float32(np.int32(c & 15) - 8) * x[n, start + j])
                    lanes[half + j] += d * (np.float32(np.int32(c >> 4) - 8) * x[n, start + half + j])
            s = np.float32(0.0)
            for j in range(BLOCK):
                s += lanes[j]
            y[n, r] = s


_KERNELS = {"q8_0": _q8_0_matmul, "q4_0": _q4_0_matmul}


def quantized_matmul(x, w):
    """x (N, K) float32, w a QuantizedMatrix (R, K) -> y (N, R) float32."""
    kernel_fn = _KERNELS.get(getattr(w, "kind", None))
    if kernel_fn is None or not float32_arrays(x, w.scales) or x.ndim != 2 or x.shape[1] != w.shape[1]:
        return NotImplemented
    y = np.empty((x.shape[0], w.shape[0]), np.float32)
    kernel_fn(x, w.scales, np.ascontiguousarray(w.codes), y)
    return y


KERNELS = {"quantized_matmul": quantized_matmul}
