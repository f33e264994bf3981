"""Fast softmax steps of tiled ("flash") attention: one pass per tile row instead of NumPy's five.

References: ``tile_softmax_step``, ``tile_probs`` and ``tile_softmax_backward`` in zerollm.nn.flash.
The matrix products of each tile stay NumPy's (BLAS). A tile of scores s (..., tq, tk) is viewed as
rows (R, tq, tk); with a causal TileMask, row r of the tile sees keys up to q0 + r - k0 (counted from
the tile's first key), and the hidden rest of the row is written as 0 without an exp.
"""

import numpy as np

from zerollm.engine.fast.jit import exact_kernel, exp32, float32_arrays, kernel


@kernel
def _online_softmax(s, m, l, alpha, q0, k0, causal):
    R, tq, tk = s.shape
    for h in range(R):
        for r in range(tq):
            row = s[h, r]
            n = min(max(q0 + r - k0 + 1, 0), tk) if causal else tk
            m_old = m[h, r]
            m_new = m_old
            for j in range(n):
                v = row[j]
                m_new = v if v > m_new else m_new
            ref = np.float32(0.0) if m_new == -np.inf else m_new     # only hidden keys so far: no NaN
            total = np.float32(0.0)
            for j in range(n):
                e = exp32(row[j] - ref)
                row[j] = e
                total += e
            row[n:] = 0
            a = exp32(m_old - ref)
            alpha[h, r] = a
            l[h, r] = l[h, r] * a + total
            m[h, r] = m_new


@kernel
def _probs(s, lse, q0, k0, causal):
    R, tq, tk = s.shape
    for h in range(R):
        for r in range(tq):
            row = s[h, r]
            n = min(max(q0 + r - k0 + 1, 0), tk) if causal else tk
            c = lse[h, r]
            for j in range(n):
                row[j] = exp32(row[j] - c)
            row[n:] = 0


@exact_kernel
def _softmax_backward(p, dp, D):
    R, tq, tk = p.shape
    for h in range(R):
        for r in range(tq):
            d = D[h, r]
            for j in range(tk):
                dp[h, r, j] = p[h, r, j] * (dp[h, r, j] - d)


def _rows(a, tq):
    """(..., tq, 1) -> a contiguous (R, tq) view or copy (lse and D arrive as slices of (..., T, 1))."""
    return np.ascontiguousarray(a).reshape(-1, tq)


def tile_softmax_step(s, m, l, where):
    if where.padding is not None or not float32_arrays(s, m, l):
        return NotImplemented
    tq, tk = s.shape[-2:]
    alpha = np.empty_like(m)
    _online_softmax(s.reshape(-1, tq, tk), m.reshape(-1, tq), l.reshape(-1, tq), alpha.reshape(-1, tq),
                    where.q0, where.k0, where.causal)
    return alpha


def tile_probs(s, lse, where):
    if where.padding is not None or not float32_arrays(s) or lse.dtype != np.float32:
        return NotImplemented
    tq, tk = s.shape[-2:]
    _probs(s.reshape(-1, tq, tk), _rows(lse, tq), where.q0, where.k0, where.causal)
    return s


def tile_softmax_backward(p, dp, D):
    if not float32_arrays(p, dp) or D.dtype != np.float32 or p.shape != dp.shape:
        return NotImplemented
    tq, tk = p.shape[-2:]
    _softmax_backward(p.reshape(-1, tq, tk), dp.reshape(-1, tq, tk), _rows(D, tq))
    return dp


KERNELS = {"tile_softmax_step": tile_softmax_step, "tile_probs": tile_probs,
           "tile_softmax_backward": tile_softmax_backward}
