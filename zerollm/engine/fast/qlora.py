"""QLoRA's backward through a frozen quantized weight: dx = dy @ W with W (R, K) held as Q8_0 / Q4_0 blocks.

Reference: ``zerollm.nn.linear.quantized_matmul_t`` (W's rows dequantized QUANT_ROWS at a time by NumPy,
through several temporaries and a fancy-indexed copy of the rows' codes, then one BLAS product per slab).
Here the same slabs are decoded straight from the blocks into one reused (ROWS, K) buffer by a numba
loop, and BLAS multiplies dy's matching columns by it, accumulating into dx:

    for each slab of rows r0..r1 of W:
        buf[r - r0, 32 b + j] = d[r, b] * q[r, 32 b + j]          (decode: one pass over the slab's bytes)
        dx += dy[:, r0:r1] @ buf[:r1 - r0]                         (N, r1 - r0) @ (r1 - r0, K)

So the float weight exists ROWS rows at a time, never whole (a GPT-2-124M c_fc W^T is 3072 x 768: 9 MiB
in float32, a 768 KiB slab here), and the product is BLAS's, not a hand loop: the backward's work is a
GEMM of the same size as the forward's, and decoding a slab costs a pass over 256 * K numbers against
the GEMM's 2 N * 256 * K operations. The decoded numbers are exactly the reference's (d * q in float32),
so dx differs from the reference only by BLAS's summation order over the slabs.

Shapes: dy (N, R), W (R, K) as scales (R, nb) float32 and codes, dx (N, K); nb = K / 32.
"""

import numpy as np

from zerollm.engine.fast.jit import float32_arrays, kernel

BLOCK = 32
ROWS = 256            # rows of W decoded at a time: the slab BLAS multiplies by


@kernel
def _decode_q8_0(scales, codes, r0, r1, out):
    """out[r - r0] = row r of W for r in r0..r1 (Q8_0: d * q)."""
    nb = scales.shape[1]
    for r in range(r0, r1):
        for b in range(nb):
            d = scales[r, b]
            start = b * BLOCK
            for j in range(BLOCK):
                out[r - r0, start + j] = d * np.float32(codes[r, start + j])


@kernel
def _decode_q4_0(scales, codes, r0, r1, out):
    """As _decode_q8_0 for Q4_0: d * (c - 8), byte j of a block holding positions j (low) and j + 16 (high)."""
    nb = scales.shape[1]
    half = BLOCK // 2
    for r in range(r0, r1):
        for b in range(nb):
            d = scales[r, b]
            start, packed = b * BLOCK, b * half
            for j in range(half):
                c = codes[r, packed + j]
                out[r - r0, start + j] = d * np.float32(np.int32(c & 15) - 8)
                out[r - r0, start + half + j] = d * np.float32(np.int32(c >> 4) - 8)


_DECODERS = {"q8_0": _decode_q8_0, "q4_0": _decode_q4_0}


def quantized_matmul_t(dy, w):
    """dy (N, R) float32, w a QuantizedMatrix (R, K) -> dx (N, K) float32 = dy @ W, W decoded ROWS rows at
    a time. NotImplemented (the reference runs) for other kinds or inputs the decoders were not built for."""
    decode = _DECODERS.get(getattr(w, "kind", None))
    if (decode is None or not float32_arrays(dy, w.scales) or dy.ndim != 2 or dy.shape[1] != w.shape[0]
            or not w.codes.flags.c_contiguous):
        return NotImplemented
    R, K = w.shape
    N = dy.shape[0]
    dx = np.empty((N, K), np.float32)
    buf = np.empty((min(ROWS, R), K), np.float32)        # the one slab of float weights alive at a time
    part = np.empty((N, K), np.float32) if R > ROWS else None
    for r0 in range(0, R, ROWS):
        r1 = min(r0 + ROWS, R)
        decode(w.scales, w.codes, r0, r1, buf)
        if r0 == 0:                                       # the first slab writes dx, the others add to it
            np.matmul(dy[:, r0:r1], buf[:r1 - r0], out=dx)          # (N, r1 - r0) @ (r1 - r0, K)
        else:
            np.matmul(dy[:, r0:r1], buf[:r1 - r0], out=part)
            dx += part
    return dx


KERNELS = {"quantized_matmul_t": quantized_matmul_t}
