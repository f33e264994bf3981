"""Fast tiled ("flash") attention: the whole tile loop in one kernel, and the per-tile softmax steps.

1. ``flash_forward_tiles`` and ``flash_sdpa_backward`` (references in zerollm.nn.flash): every tile
   loop of the forward and the backward in numba, the products in our AVX-512 micro-kernel
   (zerollm/engine/fast/microkernel.py) or, without AVX-512, in NumPy's own BLAS (sgemm through ctypes,
   zerollm/engine/fast/blas.py), the online softmax fused between them, threads over heads
   and tiles (one Python thread per list of tiles, blas.run_planned). Used for float32 without a padding mask, dropout or autocast. With our
   micro-kernel, a tile that every query row sees whole (off the causal diagonal) and whose rows have
   a fixed m (FIXED_MAX) gets its weights exp(s - m) and their row sums straight from the product's
   registers (microkernel.sgemm_exp), and the backward's P = exp(s - lse) and dS = P (dP - D) likewise
   (sgemm_exp, sgemm_dsoftmax): no pass over the tile of scores of its own. The exp itself costs as much
   in the registers as in a pass of its own: what the fusion saves is the pass over the tile in memory,
   a small part of the forward and a larger one of the backward. The full-score kernel (sdpa.py) does not
   fuse: its blocks of 32 rows leave a causal diagonal of 32 columns that still needs a pass, its softmax
   pass is already cheap, and fused it was slower. The numbers:
   docs/profiles/design-decisions.md#flash-attention-the-softmax-in-the-products-registers.
2. ``tile_softmax_step``, ``tile_probs``, ``tile_softmax_backward``: one pass per tile row instead of
   NumPy's five, for what 1. declines (the reference's loops then run with these). A tile of scores
   s (..., tq, tk) is viewed as rows (R, tq, tk); with a causal TileMask, row r of the tile sees keys
   up to q0 + r - k0 (counted from the tile's first key), and the hidden rest of the row is written as
   0 without an exp.
"""

import functools

import numpy as np
from numba import prange

from zerollm.engine.amp import autocast_format
from zerollm.engine.fast import microkernel
from zerollm.engine.fast.blas import NO_TRANS, TRANS, kernel_threads, run_planned, sgemm
from zerollm.engine.fast.jit import exact_kernel, exp32, float32_arrays, inline, kernel
from zerollm.engine.fast.microkernel import product


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


# ----------------------------------------------------------------------------
# the whole tiled attention in one kernel: the tile loops in numba, the products in NumPy's BLAS
#
# References: ``flash_forward_tiles`` and ``flash_sdpa_backward`` in zerollm.nn.flash (same maths).
# Layout: q, out, dout as (BH, T, hs) with BH = B * nkv * g; k, v as (BKV, Tk, hs), BKV = B * nkv;
# query head bh reads kv head bh // g. Every block handed to BLAS is a run of whole rows of a
# C-contiguous array, so no copy is ever made. The work is cut into items, (query head, query tile)
# in the forward and (kv head, key tile) in the backward, and the items are dealt to the threads
# beforehand so that each thread gets the same number of (query tile, key tile) pairs (causal rows
# differ in length); each thread then runs its own list (blas.run_planned: the kernel's prange is
# a plain loop over the one list it is given).

def tiles(T):
    """(forward tq, tk, backward tq, tk): queries and keys per tile for T queries. Larger tiles make
    larger products, which BLAS runs faster (a (256, 256) float32 tile of scores is 256 KB, in L2);
    smaller ones compute and throw away less of the tiles on the causal diagonal. The fastest with
    benchmarks/attention_speed.py and benchmarks/profile.py: 64-tiles up to T = 512, 256-tiles from
    T = 4096 on, 128 x 256 between. The backward keeps 128-tiles from T = 4096 on: with the diagonal bands
    (DIAGONAL_ROWS) smaller tiles waste little on the diagonal, and a tile's q, dout and dq rows stay closer
    in cache (the numbers: docs/profiles/design-decisions.md#flash-attention-tile-sizes)."""
    if T <= SHORT_UNTIL:
        return SHORT_TILES
    return LONG_TILES if T >= LONG_FROM else MIDDLE_TILES


SHORT_TILES, MIDDLE_TILES, LONG_TILES = (64, 128, 64, 64), (128, 256, 128, 128), (256, 256, 128, 128)
SHORT_UNTIL, LONG_FROM = 512, 4096


# The online softmax subtracts a running row max m before exp, so that exp never overflows, and
# rescales by exp(m_old - m_new) when m grows. Any upper bound of the row's scores does as well as
# the max: with |q_s . k| <= |q_s| max_j |k_j| (Cauchy-Schwarz), m is fixed per row before the first
# tile, no max pass, no rescaling. Exact maths either way; the bound is used where it is at most
# FIXED_MAX, so that exp(s - m) >= exp(-2 FIXED_MAX) stays a normal float32 (no lost precision).
FIXED_MAX = 40.0

# query rows per product in a tile on the causal diagonal (see _band_rows): a band of rows multiplies only
# the keys its last row sees, so less of the hidden triangle is computed and thrown away. Bands of 32 rows
# beat whole tiles at every T and thread count tried (the numbers:
# docs/profiles/design-decisions.md#flash-attention-diagonal-bands-of-32-rows).
DIAGONAL_ROWS = 32


@inline
def _row_max(row, n, m):
    """max(m, row[0 .. n-1]) with 8 running maxima in 8 scalars, which LLVM keeps in one SIMD register
    (a single running max is a chain that LLVM leaves scalar, 3x slower; 16 maxima kept in a small
    array were slower still: the array lives in memory and is allocated on every call)."""
    m0 = m1 = m2 = m3 = m4 = m5 = m6 = m7 = m
    body = n // 8 * 8
    for j in range(0, body, 8):
        x0, x1, x2, x3 = row[j], row[j + 1], row[j + 2], row[j + 3]
        x4, x5, x6, x7 = row[j + 4], row[j + 5], row[j + 6], row[j + 7]
        m0, m1, m2, m3 = (x0 if x0 > m0 else m0), (x1 if x1 > m1 else m1), (x2 if x2 > m2 else m2), (x3 if x3 > m3 else m3)
        m4, m5, m6, m7 = (x4 if x4 > m4 else m4), (x5 if x5 > m5 else m5), (x6 if x6 > m6 else m6), (x7 if x7 > m7 else m7)
    for j in range(body, n):
        m0 = row[j] if row[j] > m0 else m0
    m0, m1, m2, m3 = (m0 if m0 > m4 else m4), (m1 if m1 > m5 else m5), (m2 if m2 > m6 else m6), (m3 if m3 > m7 else m7)
    m0, m1 = (m0 if m0 > m2 else m2), (m1 if m1 > m3 else m3)
    return m0 if m0 > m1 else m1


@inline
def _band_rows(row, k0, n, nk, causal):
    """Query rows per product in a tile of n queries (the first at absolute position ``row``) and nk
    keys (the first ``k0``): all n where every row sees every key, else DIAGONAL_ROWS, so that each
    band multiplies only the keys its last row sees (a 256 x 256 tile on the diagonal: 36/64 of the
    work in 8 bands of 32)."""
    return DIAGONAL_ROWS if causal and row < k0 + nk - 1 and n > DIAGONAL_ROWS else n


@inline
def _seen(row, k0, nb, nk, causal):
    """Keys of k0 .. k0 + nk - 1 that the last of nb queries from absolute position ``row`` sees."""
    return _visible(row + nb - 1, k0, nk, causal)


@inline
def _visible(row, k0, nk, causal):
    """How many of the keys k0 .. k0 + nk - 1 the query at absolute position ``row`` sees."""
    return min(max(row - k0 + 1, 0), nk) if causal else nk


@inline
def _forward_items(plan, q, k_t, v, bound, out, lse, g, offset, causal, tq, tk, gemm, own):
    """Each item: one query tile of one head, all its key tiles, the online softmax in between."""
    BH, T, hs = q.shape
    Tk = k_t.shape[2]
    n_tiles = (T + tq - 1) // tq
    n_threads = plan.shape[0]
    S = np.empty((n_threads, tq, tk), np.float32)             # per thread: one tile of scores, then weights
    ACC = np.empty((n_threads, tq, hs), np.float32)           # running output, unnormalised
    M = np.empty((n_threads, tq), np.float32)                 # running max per query row
    L = np.empty((n_threads, tq), np.float32)                 # running sum of exp(s - m)
    for t in prange(n_threads):
        s, acc, m, l = S[t], ACC[t], M[t], L[t]               # this thread's own buffers
        for w in range(plan.shape[1]):
            item = plan[t, w]
            if item < 0:
                break
            bh, i0 = item // n_tiles, (item % n_tiles) * tq
            kv = bh // g
            n = min(tq, T - i0)
            acc[:n] = 0
            l[:n] = 0
            all_fixed = True
            for r in range(n):                                # the reference of exp(s - m): see FIXED_MAX
                b = bound[bh, i0 + r]
                m[r] = b if b <= FIXED_MAX else -np.inf
                all_fixed = all_fixed and b <= FIXED_MAX
            stop = min(Tk, offset + i0 + n) if causal else Tk   # keys after the tile's last query: skipped
            for j0 in range(0, stop, tk):
                nk = min(tk, stop - j0)
                rows = _band_rows(offset + i0, j0, n, nk, causal)
                if own and all_fixed and _visible(offset + i0, j0, nk, causal) == nk:
                    # every row sees every key (one band) and m is fixed: p = exp(q_s k^T - m) and l += its row
                    # sums straight from the product's registers (microkernel.sgemm_exp)
                    microkernel.sgemm_exp(n, nk, hs, np.float32(1.0), q[bh, i0:].ctypes.data, hs, 1,
                                          k_t[kv, :, j0:].ctypes.data, k_t.strides[1] // 4, s.ctypes.data, tk,
                                          m.ctypes.data, l.ctypes.data)
                else:
                    for r0 in range(0, n, rows):                  # s = q_s k^T, band by band on the diagonal
                        nb, seen = min(rows, n - r0), _seen(offset + i0 + r0, j0, min(rows, n - r0), nk, causal)
                        if seen > 0:
                            product(gemm, own, NO_TRANS, nb, seen, hs, np.float32(1.0), q[bh, i0 + r0:].ctypes, hs,
                                    k_t[kv, :, j0:].ctypes, k_t.strides[1] // 4, np.float32(0.0), s[r0:].ctypes, tk)
                    for r in range(n):
                        row = s[r]
                        vis = _visible(offset + i0 + r, j0, nk, causal)
                        m_old = m[r]
                        fixed = bound[bh, i0 + r] <= FIXED_MAX
                        m_new = m_old if fixed else _row_max(row, vis, m_old)
                        ref = np.float32(0.0) if m_new == -np.inf else m_new
                        total = np.float32(0.0)
                        for c in range(vis):
                            e = exp32(row[c] - ref)
                            row[c] = e
                            total += e
                        for c in range(vis, nk):
                            row[c] = 0
                        if fixed:
                            l[r] += total
                        else:
                            a = exp32(m_old - ref)                # rescales what was summed against m_old
                            l[r] = l[r] * a + total
                            m[r] = m_new
                            for c in range(hs):
                                acc[r, c] *= a
                for r0 in range(0, n, rows):                  # acc += p v, over the keys each band sees
                    nb, seen = min(rows, n - r0), _seen(offset + i0 + r0, j0, min(rows, n - r0), nk, causal)
                    if seen > 0:
                        product(gemm, own, NO_TRANS, nb, hs, seen, np.float32(1.0), s[r0:].ctypes, tk,
                                v[kv, j0:].ctypes, hs, np.float32(1.0), acc[r0:].ctypes, hs)
            for r in range(n):
                if l[r] == 0:                                 # every key hidden: output 0, lse +inf
                    out[bh, i0 + r] = 0
                    lse[bh, i0 + r] = np.inf
                else:
                    inv = np.float32(1.0) / l[r]
                    for c in range(hs):
                        out[bh, i0 + r, c] = acc[r, c] * inv
                    lse[bh, i0 + r] = m[r] + np.log(l[r])


@inline
def _backward_items(plan, q, k, k_t, v_t, dout, lse, D, dq, dk, dv, g, offset, causal, tq, tk, gemm, own):
    """Each item: one key tile of one kv head; every query tile that sees it, of its g query heads.
    dk, dv of the tile are summed locally and written once; dq goes to this thread's own buffer
    dq[t] (the threads' buffers are added up afterwards), so no two threads write the same row."""
    BH, T, hs = q.shape
    Tk = k.shape[1]
    n_tiles = (Tk + tk - 1) // tk
    n_threads = plan.shape[0]
    S = np.empty((n_threads, tq, tk), np.float32)             # per thread: scores, then the weights P
    DP = np.empty((n_threads, tq, tk), np.float32)            # dP, then dS
    DK = np.empty((n_threads, tk, hs), np.float32)            # dk and dv of the key tile, summed here
    DV = np.empty((n_threads, tk, hs), np.float32)
    for t in prange(n_threads):
        s, dp, dk_j, dv_j, dq_t = S[t], DP[t], DK[t], DV[t], dq[t]   # this thread's own buffers
        for w in range(plan.shape[1]):
            item = plan[t, w]
            if item < 0:
                break
            kv, j0 = item // n_tiles, (item % n_tiles) * tk
            nk = min(tk, Tk - j0)
            dk_j[:nk] = 0
            dv_j[:nk] = 0
            first = max(j0 - offset, 0) // tq * tq if causal else 0   # the first query tile that sees key j0
            for h in range(g):
                bh = kv * g + h
                for i0 in range(first, T, tq):
                    n = min(tq, T - i0)
                    rows = _band_rows(offset + i0, j0, n, nk, causal)
                    for r0 in range(i0, i0 + n, rows):        # a band of query rows and the keys it sees
                        nb = min(rows, i0 + n - r0)
                        seen = _seen(offset + r0, j0, nb, nk, causal)
                        if seen == 0:
                            continue
                        if own and _visible(offset + r0, j0, seen, causal) == seen:   # P = exp(q_s k^T - lse),
                            microkernel.sgemm_exp(nb, seen, hs, np.float32(1.0), q[bh, r0:].ctypes.data, hs, 1,  # fused
                                                  k_t[kv, :, j0:].ctypes.data, k_t.strides[1] // 4, s.ctypes.data,
                                                  tk, lse[bh, r0:].ctypes.data, 0)
                        else:
                            product(gemm, own, NO_TRANS, nb, seen, hs, np.float32(1.0), q[bh, r0:].ctypes, hs,
                                    k_t[kv, :, j0:].ctypes, k_t.strides[1] // 4, np.float32(0.0), s.ctypes,
                                    tk)  # s = q_s k^T
                            for r in range(nb):                                       # P = exp(s - lse)
                                row = s[r]
                                vis = _visible(offset + r0 + r, j0, seen, causal)
                                c0 = lse[bh, r0 + r]
                                for c in range(vis):
                                    row[c] = exp32(row[c] - c0)
                                for c in range(vis, seen):
                                    row[c] = 0
                        product(gemm, own, TRANS, seen, hs, nb, np.float32(1.0), s.ctypes, tk,
                                dout[bh, r0:].ctypes, hs, np.float32(1.0), dv_j.ctypes, hs)  # dv += P^T dout
                        if own:                                   # dS = P (dout v^T - D), from the registers
                            microkernel.sgemm_dsoftmax(nb, seen, hs, np.float32(1.0), dout[bh, r0:].ctypes.data, hs,
                                                       1, v_t[kv, :, j0:].ctypes.data, v_t.strides[1] // 4,
                                                       dp.ctypes.data, tk, D[bh, r0:].ctypes.data, s.ctypes.data)
                        else:
                            product(gemm, own, NO_TRANS, nb, seen, hs, np.float32(1.0), dout[bh, r0:].ctypes, hs,
                                    v_t[kv, :, j0:].ctypes, v_t.strides[1] // 4,
                                    np.float32(0.0), dp.ctypes, tk)  # dP = dout v^T
                            for r in range(nb):                                       # dS = P (dP - D)
                                d = D[bh, r0 + r]
                                for c in range(seen):
                                    dp[r, c] = s[r, c] * (dp[r, c] - d)
                        product(gemm, own, NO_TRANS, nb, hs, seen, np.float32(1.0), dp.ctypes, tk,
                                k[kv, j0:].ctypes, hs, np.float32(1.0), dq_t[bh, r0:].ctypes, hs)   # dq += dS k
                        product(gemm, own, TRANS, seen, hs, nb, np.float32(1.0), dp.ctypes, tk,
                                q[bh, r0:].ctypes, hs, np.float32(1.0), dk_j.ctypes, hs)     # dk += dS^T q_s
            dk[kv, j0:j0 + nk] = dk_j[:nk]
            dv[kv, j0:j0 + nk] = dv_j[:nk]


def _row_dots(a, b, out):
    """out[h, i] = a[h, i] . b[h, i]: D = rowsum(dout * out) of the backward."""
    H, T, hs = a.shape
    for h in range(H):
        for i in range(T):
            x = np.float32(0.0)
            for c in range(hs):
                x += a[h, i, c] * b[h, i, c]
            out[h, i] = x


# one compiled kernel each (prange is range there), run a plan row per thread (blas.run_planned)

@kernel
def _forward_serial(plan, q, k_t, v, bound, out, lse, g, offset, causal, tq, tk, gemm, own):
    _forward_items(plan, q, k_t, v, bound, out, lse, g, offset, causal, tq, tk, gemm, own)


@kernel
def _backward_serial(plan, q, k, k_t, v_t, dout, lse, D, dq, dk, dv, g, offset, causal, tq, tk, gemm, own):
    _backward_items(plan, q, k, k_t, v_t, dout, lse, D, dq, dk, dv, g, offset, causal, tq, tk, gemm, own)


_row_dots = kernel(_row_dots)


@functools.lru_cache(maxsize=64)
def _plan(n_threads, costs):
    """Deal items 0 .. len(costs)-1 to n_threads lists of about equal total cost (the largest item
    first, always to the least loaded thread). Returns an (n_threads, longest) int64 array, -1 padded."""
    lists, load = [[] for _ in range(n_threads)], [0] * n_threads
    for item in sorted(range(len(costs)), key=lambda i: -costs[i]):
        t = load.index(min(load))
        lists[t].append(item)
        load[t] += costs[item]
    plan = np.full((n_threads, max(len(x) for x in lists)), -1, np.int64)
    for t, items in enumerate(lists):
        plan[t, :len(items)] = items
    return plan




def _supported(q, k, v, mask, seed):
    """float32 heads without a padding mask, dropout (a seed) or autocast, and NumPy's BLAS found."""
    return (mask is None and seed is None and autocast_format() is None and sgemm() is not None
            and all(isinstance(a, np.ndarray) and a.dtype == np.float32 and a.ndim == 5 for a in (q, k, v)))




def flash_forward_tiles(q, k, v, options):
    causal, mask, scale, seed = options.causal, options.mask, options.scale, options.seed   # nn.flash.FlashOptions
    if not _supported(q, k, v, mask, seed):
        return NotImplemented
    B, nkv, g, T, hs = q.shape
    Tk, offset = k.shape[-2], k.shape[-2] - T
    q_s = np.empty((B * nkv * g, T, hs), np.float32)
    np.multiply(q.reshape(q_s.shape), np.float32(scale), out=q_s)        # scaled, C-contiguous
    k_c = np.ascontiguousarray(k).reshape(B * nkv, Tk, hs)
    v_c = np.ascontiguousarray(v).reshape(B * nkv, Tk, hs)
    out = np.empty(q_s.shape, np.float32)
    lse = np.empty(q_s.shape[:2], np.float32)
    k_max = np.sqrt(np.einsum("hkc,hkc->hk", k_c, k_c).max(axis=1, initial=0.0))          # (BKV,)
    bound = np.sqrt(np.einsum("htc,htc->ht", q_s, q_s)) * np.repeat(k_max, g)[:, None]   # (BH, T)
    tq, tk = tiles(T)[:2]
    n_tiles = -(-T // tq)
    costs = tuple(min(Tk, offset + min(i + 1, n_tiles) * tq) if causal else Tk
                  for _ in range(q_s.shape[0]) for i in range(n_tiles))
    n_threads = kernel_threads(len(costs))
    k_t = microkernel.transposed(k_c)                                    # (BKV, hs, Tk)
    run_planned(_forward_serial, n_threads, _plan(n_threads, costs), q_s, k_t, v_c, bound, out, lse,
         g, offset, bool(causal), tq, tk, sgemm(), microkernel.USE)
    return out.reshape(q.shape), lse.reshape(q.shape[:-1] + (1,))


def flash_sdpa_backward(dout, cache):
    q, k, v = cache.q, cache.k, cache.v
    if not _supported(q, k, v, cache.mask, cache.seed) or not isinstance(dout, np.ndarray) \
            or dout.dtype != np.float32:
        return NotImplemented
    B, nkv, g, T, hs = q.shape
    Tk, offset = k.shape[-2], k.shape[-2] - T
    BH, BKV = B * nkv * g, B * nkv
    q_s = np.empty((BH, T, hs), np.float32)
    np.multiply(q.reshape(BH, T, hs), np.float32(cache.scale), out=q_s)
    do = np.ascontiguousarray(dout).reshape(BH, T, hs)
    k_c = np.ascontiguousarray(k).reshape(BKV, Tk, hs)
    v_c = np.ascontiguousarray(v).reshape(BKV, Tk, hs)
    lse = np.ascontiguousarray(cache.lse).reshape(BH, T)
    D = np.empty((BH, T), np.float32)
    _row_dots(do, np.ascontiguousarray(cache.out).reshape(BH, T, hs), D)
    tq, tk = tiles(T)[2:]
    n_tiles, causal = -(-Tk // tk), bool(cache.causal)
    costs = tuple(g * (T - max(j * tk - offset, 0) // tq * tq if causal else T)
                  for _ in range(BKV) for j in range(n_tiles))
    n_threads = kernel_threads(len(costs))
    dq = np.zeros((n_threads, BH, T, hs), np.float32)                    # one buffer per thread
    dk, dv = np.empty((BKV, Tk, hs), np.float32), np.empty((BKV, Tk, hs), np.float32)
    k_t, v_t = microkernel.transposed(k_c), microkernel.transposed(v_c)  # (BKV, hs, Tk)
    run_planned(_backward_serial, n_threads, _plan(n_threads, costs), q_s, k_c, k_t, v_t, do, lse, D,
         dq, dk, dv, g, offset, causal, tq, tk, sgemm(), microkernel.USE, per_thread=(7,))
    dq = dq[0] if n_threads == 1 else dq.sum(axis=0)
    dq *= np.float32(cache.scale)
    return dq.reshape(q.shape), dk.reshape(k.shape), dv.reshape(v.shape)


KERNELS = {"tile_softmax_step": tile_softmax_step, "tile_probs": tile_probs,
           "tile_softmax_backward": tile_softmax_backward,
           "flash_forward_tiles": flash_forward_tiles, "flash_sdpa_backward": flash_sdpa_backward}
