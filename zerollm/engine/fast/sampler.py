"""The sampler's one pass over the logits (reference: zerollm.generation.sample.block_masses).

    block_masses(x, m, temperature)   (B, V) float32 logits, (B, 1) float32 row maxima -> (B, nb) float64: the
                                      mass up to the end of each block of BLOCK ids. Per id float32
                                      exp32((x - m) * (1 / temperature)), added in float32 within its block,
                                      the blocks in float64: what the reference computes in five passes
                                      (subtract, scale, exp, the blocks' sums, their cumulative sum).

Exactness: the same float32 operations except exp, exp32's within 2 ulp where NumPy's is within its own few;
sample.draw's margin allows 4 ulp for exp and any order of a block's 8 additions, so the ids it draws are
draw_exact's either way (tests/test_fast_sampler.py). The kernel is compiled without fastmath's "reassoc":
(x - m) * s must not become x * s - m * s, whose rounding the margin does not bound.
"""

import numba
import numpy as np

from zerollm.engine.fast.jit import FASTMATH, exp32

BLOCK = 8          # zerollm.generation.sample.BLOCK (the engine sits below generation; a test checks they agree)


@numba.njit(nogil=True, cache=True, fastmath=FASTMATH - {"reassoc"}, error_model="numpy")
def _masses(x, m, scale, cum):
    B, V = x.shape
    nb = cum.shape[1]
    e = np.empty(V, np.float32)
    for r in range(B):
        mr = m[r, 0]
        for j in range(V):                      # elementwise: vectorised (exp32 on 8 lanes at once)
            e[j] = exp32((x[r, j] - mr) * scale)
        total = 0.0
        for b in range(nb):                     # a block's 8 in order, then the blocks in float64
            s = np.float32(0)
            for j in range(b * BLOCK, min(b * BLOCK + BLOCK, V)):
                s += e[j]
            total += s
            cum[r, b] = total


def block_masses(x, m, temperature):
    """The kernel for float32 C-contiguous logits and float32 maxima; NotImplemented for anything else."""
    if not (isinstance(x, np.ndarray) and isinstance(m, np.ndarray) and x.ndim == 2 and x.dtype == np.float32
            and m.dtype == np.float32 and m.shape == (x.shape[0], 1) and x.flags.c_contiguous and x.shape[1] > 0):
        return NotImplemented
    cum = np.empty((x.shape[0], -(-x.shape[1] // BLOCK)), np.float64)
    _masses(x, m, np.float32(1 / temperature) if temperature != 1.0 else np.float32(1), cum)
    return cum


KERNELS = {"block_masses": block_masses}
