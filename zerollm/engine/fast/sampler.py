"""The sampler's float32 shortcut in one pass a row (reference: zerollm.generation.sample.draw_shortcut).

    draw_shortcut(x, u, temperature)   (B, V) float32 logits, (B,) float64 uniform numbers -> ((B,) ids,
                                       (B,) sure). Per row: its maximum m; per id float32
                                       exp32((x - m) * (1 / temperature)), added in float32 within its block
                                       of BLOCK ids, the blocks in float64; the block and then the id whose
                                       cumulative mass reaches u times the total; sure where u lies farther than
                                       sample._margin's bound from that id's cumulative bounds. The reference
                                       makes about twenty NumPy calls a step, which at one row cost more than
                                       the arithmetic.

Exactness: the same float32 operations as the reference except exp, exp32's within 2 ulp where the margin
allows 4, and sums in the same order; so an id marked sure is draw_exact's, and sample.draw draws the
others again in float64: the ids are the same on both engines (tests/test_fast_sampler.py runs every
boundary test of tests/test_sample_draw.py on this kernel). Compiled without fastmath's "reassoc":
(x - m) * s must not become x * s - m * s, whose rounding the margin does not bound.
"""

import math

import numba
import numpy as np

from zerollm.engine.fast.jit import FASTMATH, exp32

BLOCK = 8            # zerollm.generation.sample.BLOCK (the engine sits below generation; a test checks they agree)
_U32 = 2.0 ** -24    # float32's unit roundoff


@numba.njit(nogil=True, cache=True, fastmath=FASTMATH - {"reassoc"}, error_model="numpy")
def _shortcut(x, u, scale, temperature, ids, sure):
    B, V = x.shape
    nb = (V + BLOCK - 1) // BLOCK
    e = np.zeros(nb * BLOCK, np.float32)                # the ids past V stay 0
    cum = np.empty(nb, np.float64)
    # sample._margin without the row's max: 3 u ln V (the exponent's roundings), 8 u (exp), BLOCK - 1 (a block)
    per = 3 * _U32 * math.log(V) + 8 * _U32 + (BLOCK - 1) * _U32
    for r in range(B):
        m = x[r, 0]
        for j in range(1, V):
            m = max(m, x[r, j])
        if not math.isfinite(m):                        # an all -inf row (or +inf): as the reference, m = 0
            m = np.float32(0)
        for j in range(V):                              # elementwise: exp32 on 8 lanes at once
            e[j] = exp32((x[r, j] - m) * scale)
        total = 0.0
        for b in range(nb):                             # a block's 8 in order, then the blocks in float64
            s = np.float32(0)
            for j in range(b * BLOCK, b * BLOCK + BLOCK):
                s += e[j]
            total += s
            cum[b] = total
        target = u[r] * total
        b = 0
        while b < nb - 1 and cum[b] < target:           # the block reaching the target (cum never decreases)
            b += 1
        before = cum[b - 1] if b > 0 else 0.0
        lower, upper, partial, j = before, before, 0.0, BLOCK - 1
        for k in range(BLOCK):                          # the id within it: the first reaching the target
            partial += e[b * BLOCK + k]
            upper = before + partial
            if not upper < target:
                j = k
                break
            if k < BLOCK - 1:
                lower = upper
        margin = (2 * (per + abs(m) / temperature * 2.0 ** -51) + 1e-12) * total
        ids[r] = b * BLOCK + j
        sure[r] = lower < target - margin and upper >= target + margin and b * BLOCK + j < V


def draw_shortcut(x, u, temperature):
    """The kernel for float32 C-contiguous logits and float64 u; NotImplemented for anything else."""
    if not (isinstance(x, np.ndarray) and isinstance(u, np.ndarray) and x.ndim == 2 and x.dtype == np.float32
            and x.flags.c_contiguous and x.shape[1] > 0 and u.dtype == np.float64 and u.shape == (x.shape[0],)):
        return NotImplemented
    ids = np.empty(x.shape[0], np.int64)
    sure = np.empty(x.shape[0], np.bool_)
    scale = np.float32(1 / temperature) if temperature != 1.0 else np.float32(1)
    _shortcut(x, u, scale, float(temperature), ids, sure)
    return ids, sure


KERNELS = {"draw_shortcut": draw_shortcut}
