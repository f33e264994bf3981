"""Weight-only matmul with k-quant weights: y = x @ W^T, W held as Q4_K / Q5_K / Q6_K super-blocks as stored.

The layouts are zerollm.interop.kquant's (the engine room cannot import it; the matrix comes in as an object
with ``kind``, ``blocks`` (R, nb, bytes a block) uint8 and ``shape``). Each super-block of a row of W is
decoded sub-block by sub-block into registers and used against every row of x; the float matrix never
exists. The sub-block's scale and min are taken out of the inner sum:

    Q4_K / Q5_K   sum_l (d sc q_l - dmin m) x_l  =  d sc * sum_l q_l x_l  -  dmin m * sum_l x_l
    Q6_K          sum_l d sc (q_l - 32) x_l      =  d sc * sum_l (q_l - 32) x_l

Two ways, as engine/fast/quant.py does for Q8_0 / Q4_0:

**Integer products** (inference, the default; llama.cpp's vec_dot_q4_K_q8_K and its siblings). Each row of
x is first rounded to 8-bit blocks of 256 (Q8_K: a float32 scale e = max|x| / 127, codes p in -127..127,
and the sum of the codes of every 16), once per call; then a sub-block's inner sum is a sum of code times
code, and the min's term needs only the codes' sums:

    Q4_K / Q5_K   y += e * (d * sum_j sc_j sum_l q_l p_l  -  dmin * sum_j m_j sum_l p_l)
    Q6_K          y += e * d * sum_j sc_j (sum_l q_l p_l - 32 sum_l p_l)

The codes are whole numbers held in float32 (the nibbles split off with a floor): every product and every
sub-block's sum is below 2^24, so exact, as int32 sums would be, but numba types int32 arithmetic as int64
(4 lanes of AVX2) where float32 takes 8: measured 3.7-5x faster so (3072 x 768, one row, under load).
On x86 with AVX2 (engine/fast/jit.py's ``BYTE_PRODUCTS``) Q4_K and Q6_K take x's codes as bytes instead, as Q4_0
does there: vpmaddubsw multiplies 32 codes by 32 bytes of x and adds neighbours, vpmaddwd by the sub-block's scale
adds neighbours again into int32 lanes; a whole row is one intrinsic (``_q4k_row``, ``_q6k_row``, and ``_q5k_row``:
Q4_K's with a fifth bit from qh): the six-bit scales and mins split in vector byte lanes, the mins' (or Q6_K's offset's)
term as eight products of vectors, each super-block's int32 lanes into float lanes times its scales, one horizontal
sum a row. About Q4_0's time per byte (benchmarks/kquant_matvec.py); exact integer sums, the float sums in another
order than the float-lane kernels'. Where the host has AVX-512BW (``jit.WIDE_BYTE_PRODUCTS``) Q4_K's row takes 64
bytes of codes a register (``_q4k_wide_codegen``): the same integer sums and float steps, so the same float32 bit
for bit, with half the multiply instructions (about 10% less time a super-block on an AMD Zen 4). Elsewhere every
kind keeps the float lanes. The float16 scales are widened by LLVM's fpext (vcvtph2ps), not by float arithmetic
with a power of two from libm. Rounding x to 8 bits moves y by
about 0.5% of its largest entry, as in llama.cpp (the tolerance is engine/fast/quant.py's INT8_TOLERANCE). Rows of W
are split between threads like the Q8_0 / Q4_0 kernels', and each thread takes its rows four at a time, a quarter
of them apart (``_QUARTERS``: four streams from memory; each row's numbers are its one-row intrinsic's, bit for bit).

**Many rows of x** (qgemm.ROWS_FROM or more, a prompt's prefill): on x86 with AVX2 the integer GEMM of
engine/fast/qgemm.py (``_many_rows``), Q4_K / Q5_K scales unpacked once a matrix (``_k_scales``). Elsewhere, from
SLAB_FROM rows, W is decoded ROWS rows at a time into one reused
float buffer by a compiled decoder (``_decode_q45_k``, ``_decode_q6_k``: the NumPy dequantizer's numbers, bit
for bit) and BLAS multiplies each slab, as engine/fast/quant.py does for Q8_0 / Q4_0: a GEMM reuses each weight
for every row of x. The float matrix never exists whole. (The slabs were the matrix's own ``m[rows]``, NumPy's
dequantizer with its temporaries: most of a q4_K prefill's time.)

**Float products** (a model in train mode: zerollm.engine.amp.exact_block_products): the sub-block decoded
in registers is multiplied by the float row of x, which then differs from the NumPy reference (dequantize,
then BLAS) only in the order of the float32 sums.

Shapes: x (N, K), W (R, K) as blocks (R, nb, bytes), y (N, R); nb = K / 256.
"""

import weakref

import numpy as np
from llvmlite import ir
from numba import prange, types
from numba.core import cgutils
from numba.extending import intrinsic

from zerollm.engine.amp import block_products_exact
from zerollm.engine.fast.blas import run_rows, thread_cap
from zerollm.engine.fast import jit, qgemm
from zerollm.engine.fast.jit import avx2_call, avx512_call, inline, kernel, parallel_kernel, vector_load

QK = 256
_F32 = np.dtype(np.float32)
SLAB_FROM = 32            # rows of x from which W is dequantized in slabs for BLAS (engine/fast/quant.py's)
ROWS = 256                # rows of W in one slab


@intrinsic
def _f16(typingctx, lo, hi):
    """Two bytes (little-endian) of an IEEE float16 -> its value as float32 (exact, subnormals, inf and NaN
    included): LLVM's fpext from half, one vcvtph2ps where the CPU has F16C. Written out in float32 arithmetic
    it took a power of two from libm, twice a super-block: a quarter of Q4_K's time."""
    def codegen(context, builder, sig, args):
        i16 = ir.IntType(16)
        a, b = (builder.zext(context.cast(builder, v, t, types.uint8), i16) for v, t in zip(args, sig.args))
        bits = builder.or_(a, builder.shl(b, ir.Constant(i16, 8)))
        return builder.fpext(builder.bitcast(bits, ir.HalfType()), ir.FloatType())
    return types.float32(lo, hi), codegen


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


@inline
def _q6_code(blk, low_at, low_shift, high_at, high_shift):
    """One six-bit Q6_K code (0..63): four bits of ql's byte low_at, two of qh's byte high_at."""
    return ((np.int32(blk[low_at]) >> low_shift) & 15) | (((np.int32(blk[high_at]) >> high_shift) & 3) << 4)


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
                                q = _q6_code(blk, low_at + l, low_shift, 128 + 32 * half + l, high_shift)
                                acc += np.float32(q - 32) * x[n, start + l]
                            s += (d * sc) * acc
            y[n, r] = s


# ----------------------------------------------------------------------------
# many rows of x: rows r0..r1 of W decoded into a float slab for BLAS

@kernel
def _decode_q45_k(blocks, fifth, r0, r1, out):
    """Rows r0..r1 of a Q4_K / Q5_K matrix into out (r1 - r0, K): (d * sc) * q - dmin * m, in the order and the
    float32 rounding of zerollm.interop.kquant's dequantizer (so the same numbers, bit for bit)."""
    nb = blocks.shape[1]
    codes = 48 if fifth else 16
    for r in range(r0, r1):
        for b in range(nb):
            blk = blocks[r, b]
            d, dmin = _f16(blk[0], blk[1]), _f16(blk[2], blk[3])
            for j in range(8):
                sc, m = _scale_min(blk, j, 4)
                scale, shift = d * sc, dmin * m
                start, bits, at = b * QK + 32 * j, 4 * (j & 1), codes + 32 * (j >> 1)
                for l in range(32):
                    q = (np.int32(blk[at + l]) >> bits) & 15
                    if fifth:
                        q |= ((np.int32(blk[16 + l]) >> j) & 1) << 4
                    out[r - r0, start + l] = scale * np.float32(q) - shift


@kernel
def _decode_q6_k(blocks, r0, r1, out):
    """Rows r0..r1 of a Q6_K matrix into out: (d * sc) * (q - 32), as the NumPy dequantizer computes it."""
    nb = blocks.shape[1]
    for r in range(r0, r1):
        for b in range(nb):
            blk = blocks[r, b]
            d = _f16(blk[208], blk[209])
            for half in range(2):
                for quarter in range(4):                  # numbers 128 half + 32 quarter + l
                    low_at = 64 * half + 32 * (quarter & 1)
                    low_shift, high_shift = 4 * (quarter >> 1), 2 * quarter
                    start = b * QK + 128 * half + 32 * quarter
                    for g in range(2):
                        scale = d * np.float32(np.int8(blk[192 + 8 * half + 2 * quarter + g]))
                        for l in range(16 * g, 16 * g + 16):
                            q = _q6_code(blk, low_at + l, low_shift, 128 + 32 * half + l, high_shift)
                            out[r - r0, start + l] = scale * np.float32(q - 32)


def _by_slabs(x, blocks, kind, y):
    """y = x @ W^T with W decoded ROWS rows at a time into one reused float buffer and each slab multiplied by
    BLAS (a GEMM reuses each weight for every row of x); the float matrix never exists whole."""
    R, K = blocks.shape[0], x.shape[1]
    buf = np.empty((min(ROWS, R), K), np.float32)
    part = np.empty((x.shape[0], buf.shape[0]), np.float32)
    for r0 in range(0, R, ROWS):
        r1 = min(r0 + ROWS, R)
        if kind == "q6_K":
            _decode_q6_k(blocks, r0, r1, buf)
        else:
            _decode_q45_k(blocks, kind == "q5_K", r0, r1, buf)
        np.matmul(x, buf[:r1 - r0].T, out=part[:, :r1 - r0])          # (N, K) @ (K, r1 - r0)
        y[:, r0:r1] = part[:, :r1 - r0]
    return y


# ----------------------------------------------------------------------------
# many rows of x in inference: engine/fast/qgemm.py's integer GEMM, with W's scales unpacked once a call

@kernel
def _unpack_k_scales(blocks, sc, mins):
    """blocks (R, nb, 144 or 176) -> sc (R, nb * 8) int16 the six-bit scales (int16: qgemm's tile broadcasts one
    straight from memory) and mins (R, nb * 8) uint8 the six-bit mins."""
    R, nb = blocks.shape[0], blocks.shape[1]
    for r in range(R):
        for b in range(nb):
            blk = blocks[r, b]
            for j in range(8):
                s, m = _sc_m(blk, j)
                sc[r, 8 * b + j] = s
                mins[r, 8 * b + j] = m


class _Unpacked:
    """What _k_scales keeps for one matrix: its blocks array (to see it replaced) and (scales, mins) unpacked."""
    __slots__ = ("blocks", "scales")

    def __init__(self, blocks, scales):
        self.blocks, self.scales = blocks, scales


_SCALES = weakref.WeakKeyDictionary()    # a k-quant matrix -> _Unpacked; freed with the matrix


def _k_scales(w, blocks):
    """A Q4_K / Q5_K matrix's scales and mins unpacked from their 12 packed bytes once, at its first prefill, and
    kept with the matrix (24 bytes a super-block of 144 or 176: 17% / 14% of the weights' bytes), instead of once a
    call. Unpacked again if w.blocks is replaced by another array; an object that takes no weak reference is
    unpacked every call."""
    known = _SCALES.get(w) if _weak(w) else None
    if known is not None and known.blocks is w.blocks:
        return known.scales
    R, nb = blocks.shape[0], blocks.shape[1]
    scales = np.empty((R, nb * 8), np.int16), np.empty((R, nb * 8), np.uint8)
    _unpack_k_scales(blocks, *scales)
    if _weak(w):
        _SCALES[w] = _Unpacked(w.blocks, scales)
    return scales


def _weak(w):
    try:
        weakref.ref(w)
    except TypeError:
        return False
    return True


def _many_rows(x, w, blocks):
    """y = x @ W^T for many rows of x (a prompt's prefill), Q4_K, Q5_K or Q6_K, by the integer GEMM on the blocks
    as stored: x rounded to Q8_K blocks once (_x_codes, as the decode kernels round it); a Q4_K / Q5_K matrix's
    scales unpacked at its first call (_k_scales), Q6_K's int8 scales read from its blocks."""
    R, kind = blocks.shape[0], w.kind
    xq, e, sums = _x_codes(x, np.int8)
    flat = blocks.reshape(R, -1)
    if kind == "q6_K":
        return qgemm.q6_k(xq, e, sums, flat)
    return qgemm.q45_k(xq, e, sums, flat, _k_scales(w, blocks), kind == "q5_K")


# ----------------------------------------------------------------------------
# integer products: x in Q8_K blocks

@kernel
def _quantize_rows(x, xq, e, sums):
    """x (N, K) -> xq (N, K) codes in -127..127 (whole numbers in float32, or int8 for the Q4_K kernel of AVX2),
    e (N, nb) = max|x| / 127 of each 256, and sums
    (N, K / 16) int32: the codes of each 16 added (the min's and Q6_K's offset's term)."""
    N, K = x.shape
    for n in range(N):
        for b in range(K // QK):
            row, codes = x[n, b * QK:(b + 1) * QK], xq[n, b * QK:(b + 1) * QK]
            d = jit.max_abs(row) / np.float32(127.0)
            e[n, b] = d
            jit.round_codes(row, np.float32(1.0) / d if d > 0 else np.float32(0.0), codes)
            for g in range(QK // 16):
                total = np.int32(0)
                for l in range(16):
                    total += np.int32(codes[16 * g + l])
                sums[n, b * (QK // 16) + g] = total


@kernel
def _x_codes(x, dtype):
    """x (N, K) in Q8_K blocks: codes (N, K) as ``dtype`` (np.int8 for the AVX2 byte kernels, np.float32, whole
    numbers, for the float-lane kernels), scales (N, K / 256) and the sums of each 16 codes."""
    N, K = x.shape
    xq, e, sums = np.empty((N, K), dtype), np.empty((N, K // QK), np.float32), np.empty((N, K // 16), np.int32)
    _quantize_rows(x, xq, e, sums)
    return xq, e, sums


@inline
def _sc_m(blk, j):
    """Sub-block j's six-bit scale and min as int32 (the 12 bytes from blk[4])."""
    if j < 4:
        return np.int32(blk[4 + j] & 63), np.int32(blk[8 + j] & 63)
    return (np.int32((blk[8 + j] & 15) | ((blk[j] >> 6) << 4)),
            np.int32((blk[8 + j] >> 4) | ((blk[4 + j] >> 6) << 4)))


@inline
def _split16(v):
    """A float32 holding 0..255 -> (v // 16, v % 16), in float32: exact, and 8 lanes wide where ints would be
    widened to 64 bits by numba's typing (4 lanes)."""
    high = np.floor(v * np.float32(0.0625))
    return high, v - np.float32(16.0) * high


@inline
def _q45_row(blk_row, xq, e, sums, fifth):
    """One row of W (nb, bytes) against one row of x in Q8_K: sum over its super-blocks. By 64 numbers: byte l
    of a group gives sub-block 2g's code l (low nibble) and 2g + 1's (high). The codes and x's 8-bit codes
    are whole numbers held in float32, so each product and each sub-block's sum is exact (at most
    32 * 31 * 127 < 2^24): integer arithmetic in float lanes, which LLVM vectorises 8 (or 16) wide."""
    codes = 48 if fifth else 16
    s = np.float32(0.0)
    for b in range(blk_row.shape[0]):
        blk = blk_row[b]
        scaled, shifted = np.float32(0.0), np.int32(0)
        for g in range(4):
            at, start = codes + 32 * g, b * QK + 64 * g
            low, high = np.float32(0.0), np.float32(0.0)
            if fifth:
                step = np.float32(0.5 ** (2 * g))
                for l in range(32):
                    hi4, lo4 = _split16(np.float32(blk[at + l]))
                    h = np.floor(np.float32(blk[16 + l]) * step)              # qh[l] >> 2 g
                    h2 = np.floor(h * np.float32(0.5))
                    h4 = np.floor(h2 * np.float32(0.5))
                    low += (lo4 + np.float32(16.0) * (h - np.float32(2.0) * h2)) * xq[start + l]
                    high += (hi4 + np.float32(16.0) * (h2 - np.float32(2.0) * h4)) * xq[start + 32 + l]
            else:
                for l in range(32):
                    hi4, lo4 = _split16(np.float32(blk[at + l]))
                    low += lo4 * xq[start + l]
                    high += hi4 * xq[start + 32 + l]
            sc0, m0 = _sc_m(blk, 2 * g)
            sc1, m1 = _sc_m(blk, 2 * g + 1)
            k = b * 16 + 4 * g                                   # this group's four sums of 16 codes
            scaled += np.float32(sc0) * low + np.float32(sc1) * high
            shifted += m0 * (sums[k] + sums[k + 1]) + m1 * (sums[k + 2] + sums[k + 3])
        s += e[b] * (_f16(blk[0], blk[1]) * scaled - _f16(blk[2], blk[3]) * np.float32(shifted))
    return s


@inline
def _q6_row(blk_row, xq, e, sums):
    """As _q45_row for Q6_K: by halves of 128 and 16 positions l, the four codes of l, l+32, l+64, l+96 from
    ql[l], ql[l+32] and qh[l] (its four 2-bit pairs); each 16 numbers have their own int8 scale."""
    s = np.float32(0.0)
    for b in range(blk_row.shape[0]):
        blk = blk_row[b]
        total = np.float32(0.0)
        for half in range(2):
            ql, qh, start = 64 * half, 128 + 32 * half, b * QK + 128 * half
            for g in range(2):
                d0, d1, d2, d3 = np.float32(0.0), np.float32(0.0), np.float32(0.0), np.float32(0.0)
                for l in range(16 * g, 16 * g + 16):
                    a_hi, a_lo = _split16(np.float32(blk[ql + l]))
                    c_hi, c_lo = _split16(np.float32(blk[ql + 32 + l]))
                    h = np.float32(blk[qh + l])
                    h1 = np.floor(h * np.float32(0.25))
                    h2 = np.floor(h1 * np.float32(0.25))
                    h3 = np.floor(h2 * np.float32(0.25))
                    d0 += (a_lo + np.float32(16.0) * (h - np.float32(4.0) * h1)) * xq[start + l]
                    d1 += (c_lo + np.float32(16.0) * (h1 - np.float32(4.0) * h2)) * xq[start + 32 + l]
                    d2 += (a_hi + np.float32(16.0) * (h2 - np.float32(4.0) * h3)) * xq[start + 64 + l]
                    d3 += (c_hi + np.float32(16.0) * h3) * xq[start + 96 + l]
                k, sc = (start + 16 * g) // 16, 192 + 8 * half + g           # sums of codes; scale of quarter 0
                total += np.float32(np.int8(blk[sc])) * (d0 - np.float32(32 * sums[k]))
                total += np.float32(np.int8(blk[sc + 2])) * (d1 - np.float32(32 * sums[k + 2]))
                total += np.float32(np.int8(blk[sc + 4])) * (d2 - np.float32(32 * sums[k + 4]))
                total += np.float32(np.int8(blk[sc + 6])) * (d3 - np.float32(32 * sums[k + 6]))
        s += e[b] * _f16(blk[208], blk[209]) * total
    return s


# ----------------------------------------------------------------------------
# Q4_K and Q6_K with x's codes as bytes (x86 with AVX2: jit.BYTE_PRODUCTS), as Q4_0's kernel there

def _row_frame(context, builder, sig, args, width, superblock):
    """The frame of the k-quant row intrinsics: a loop over the row's nb super-blocks of ``width`` bytes, where
    ``superblock(b, at, eb)`` gives super-block b's 8 float32 lanes (at(k): a pointer to its byte k; eb: x's scale
    of it), added into one float accumulator; one horizontal sum at the end -> the float32 dot product. Rows of W
    given after nb (the four-row intrinsics) go through the same loop, each with its own accumulator -> a tuple:
    x's loads serve all of them, and each row's chain of multiply-adds runs beside the others'."""
    blk_rows, e, nb = [args[0], *args[5:]], args[2], args[4]
    f32, i32, i64 = ir.FloatType(), ir.IntType(32), ir.IntType(64)
    vf = ir.VectorType(f32, 8)
    datas = [context.make_array(sig.args[0])(context, builder, value=blk).data for blk in blk_rows]
    e_data = context.make_array(sig.args[2])(context, builder, value=e).data
    accs = [builder.alloca(vf) for _ in datas]
    for acc_ptr in accs:
        builder.store(ir.Constant(vf, [0.0] * 8), acc_ptr)
    with cgutils.for_range(builder, nb) as loop:
        b = loop.index
        base = builder.mul(b, ir.Constant(i64, width))
        eb = builder.load(builder.gep(e_data, [b]))
        for data, acc_ptr in zip(datas, accs):
            at = lambda k, data=data: builder.gep(data, [builder.add(base, ir.Constant(i64, k))])  # noqa: E731
            total = superblock(b, at, eb)
            builder.store(builder.fadd(builder.load(acc_ptr), total, flags=["contract"]), acc_ptr)
    outs = []
    for acc_ptr in accs:
        acc = builder.load(acc_ptr)
        out = builder.extract_element(acc, ir.Constant(i32, 0))
        for lane in range(1, 8):
            out = builder.fadd(out, builder.extract_element(acc, ir.Constant(i32, lane)))
        outs.append(out)
    return outs[0] if len(outs) == 1 else context.make_tuple(builder, sig.return_type, outs)


def _k_scale_vectors(builder, at):
    """Q4_K / Q5_K's eight six-bit scales and eight six-bit mins as two <8 x i8>, from the 12 packed bytes at at(4)
    loaded as one vector (bytes 4..19 of the super-block, the last four unused) and split in byte lanes:

        scale j < 4: b[j] & 63          scale j >= 4: (b[j + 4] & 15) | (b[j - 4] >> 6) << 4
        min j < 4:   b[j + 4] & 63      min j >= 4:   (b[j + 4] >> 4) | (b[j] >> 6) << 4

    Two byte shuffles put each lane's low part and its two high bits in place, then ands, shifts and ors: no
    general-purpose register and no insert into a vector."""
    i8, i32 = ir.IntType(8), ir.IntType(32)
    v16 = ir.VectorType(i8, 16)

    def bytes_(values):
        return ir.Constant(v16, values)

    def lanes(idx):
        return ir.Constant(ir.VectorType(i32, len(idx)), idx)

    b = builder.load(builder.bitcast(at(4), v16.as_pointer()), align=1)
    low = builder.shuffle_vector(b, b, lanes([0, 1, 2, 3, 8, 9, 10, 11, 4, 5, 6, 7, 8, 9, 10, 11]))
    top = builder.shuffle_vector(b, b, lanes([0, 1, 2, 3, 0, 1, 2, 3, 4, 5, 6, 7, 4, 5, 6, 7]))
    low = builder.or_(builder.and_(low, bytes_([63] * 4 + [15] * 4 + [63] * 4 + [0] * 4)),
                      builder.and_(builder.lshr(low, bytes_([4] * 16)), bytes_([0] * 12 + [15] * 4)))
    high = builder.and_(builder.lshr(top, bytes_([2] * 16)), bytes_(([0] * 4 + [0x30] * 4) * 2))
    both = builder.or_(low, high)                        # the eight scales, then the eight mins
    return tuple(builder.shuffle_vector(both, both, lanes(list(range(k, k + 8)))) for k in (0, 8))


def _k_float_lanes(context, builder, sig, args, b, at, eb, acc, mins):
    """A Q4_K / Q5_K super-block b's eight float32 lanes from its integer sums: acc (<8 x i32>, the scaled code
    products) times d e, less the mins' term times dmin e. The mins' term: the eight mins (<8 x i32>) times x's code
    sums of each 32 (the row intrinsic's args[3] holds them by 16), one vpmulld."""
    i32, i64, f32 = ir.IntType(32), ir.IntType(64), ir.FloatType()
    l8, vf = ir.VectorType(i32, 8), ir.VectorType(f32, 8)
    s16 = vector_load(context, builder, sig.args[3], args[3], builder.mul(b, ir.Constant(i64, 16)), 16)
    pick = lambda idx: builder.shuffle_vector(s16, s16, ir.Constant(l8, idx))   # noqa: E731
    shifted = builder.mul(mins, builder.add(pick(list(range(0, 16, 2))), pick(list(range(1, 16, 2)))))
    de, dme = _d_dmin(builder, at, eb)

    def splat(v):
        one = builder.insert_element(ir.Constant(vf, ir.Undefined), v, ir.Constant(i32, 0))
        return builder.shuffle_vector(one, one, ir.Constant(l8, [0] * 8))

    total = builder.fmul(builder.sitofp(acc, vf), splat(de), flags=["contract"])
    return builder.fsub(total, builder.fmul(builder.sitofp(shifted, vf), splat(dme), flags=["contract"]),
                        flags=["contract"])


def _d_dmin(builder, at, eb):
    """A Q4_K / Q5_K super-block's d and dmin (float16 at bytes 0..3) times x's scale eb, as two float32: bytes
    0..7 loaded as four halves and widened at once (vcvtph2ps from memory; the other two halves unused)."""
    f32, i32 = ir.FloatType(), ir.IntType(32)
    halves = builder.load(builder.bitcast(at(0), ir.VectorType(ir.HalfType(), 4).as_pointer()), align=1)
    wide = builder.fpext(halves, ir.VectorType(f32, 4))
    return (builder.fmul(builder.extract_element(wide, ir.Constant(i32, 0)), eb),
            builder.fmul(builder.extract_element(wide, ir.Constant(i32, 1)), eb))


def _q45k_row_codegen(fifth, wide=None):
    """The row intrinsic's codegen for Q4_K (fifth False) or Q5_K (fifth True: 176 bytes a super-block, the qh
    bytes at 16..47 give each code its bit 4, codes from byte 48). Q4_K on 64-byte registers (_q4k_wide_codegen)
    where the host has them (wide None: jit.WIDE_BYTE_PRODUCTS; numba's disk cache is kept apart for each CPU's
    features, so a kernel compiled here with them is never loaded where they are missing)."""
    if not fifth and (jit.WIDE_BYTE_PRODUCTS if wide is None else wide):
        return _q4k_wide_codegen
    return lambda context, builder, sig, args: _q4k_row_body(context, builder, sig, args, fifth)


def _q4k_row_body(context, builder, sig, args, fifth):
    """One row of W (nb super-blocks of 144 bytes) against one row of x (int8 codes, nb scales, sums of 16 codes),
    all in registers, one horizontal sum a row. Each super-block: the 12 scale bytes split in vector lanes
    (_k_scale_vectors); for each 64 numbers the 32 bytes of codes give sub-block 2g
    (low nibbles) and 2g + 1 (high), vpmaddubsw multiplies each by its 32 bytes of x and adds neighbours (<= 2 *
    15 * 127, no saturation), vpmaddwd by the sub-block's scale (a register lane broadcast, <= 63) adds
    neighbours again, and the eight 32-bit lanes add up over the super-block (<= 8 * 2 * 3810 * 63: no
    overflow); then _k_float_lanes (the mins' term, d and dmin) into one float accumulator."""
    xq = args[1]
    i8, i16, i32, i64 = ir.IntType(8), ir.IntType(16), ir.IntType(32), ir.IntType(64)
    v32, l8 = ir.VectorType(i8, 32), ir.VectorType(i32, 8)

    def superblock(b, at, eb):
        scales, mins = _k_scale_vectors(builder, at)
        scales, mins = builder.zext(scales, ir.VectorType(i16, 8)), builder.zext(mins, l8)
        acc = ir.Constant(l8, [0] * 8)
        x0 = builder.mul(b, ir.Constant(i64, QK))
        qh = builder.load(builder.bitcast(at(16), v32.as_pointer()), align=1) if fifth else None
        for g in range(4):
            q = builder.load(builder.bitcast(at((48 if fifth else 16) + 32 * g), v32.as_pointer()), align=1)
            low = builder.and_(q, ir.Constant(v32, [15] * 32))
            high = builder.lshr(q, ir.Constant(v32, [4] * 32))
            if fifth:           # codes 0..31: a pair of products <= 2 * 31 * 127, still no saturation
                low = builder.or_(low, qgemm.fifth_bit(builder, qh, 2 * g))
                high = builder.or_(high, qgemm.fifth_bit(builder, qh, 2 * g + 1))
            for codes, off, j in ((low, 64 * g, 2 * g), (high, 64 * g + 32, 2 * g + 1)):
                x = vector_load(context, builder, sig.args[1], xq, builder.add(x0, ir.Constant(i64, off)), 32)
                pairs = avx2_call(builder, "pmadd.ub.sw", [codes, x])
                scale = builder.shuffle_vector(scales, scales, ir.Constant(ir.VectorType(i32, 16), [j] * 16))
                acc = builder.add(acc, avx2_call(builder, "pmadd.wd", [pairs, scale]))
        return _k_float_lanes(context, builder, sig, args, b, at, eb, acc, mins)

    return _row_frame(context, builder, sig, args, 176 if fifth else 144, superblock)


def _q4k_wide_codegen(context, builder, sig, args):
    """As _q4k_row_body's Q4_K, 64 bytes of codes at a time (hosts with jit.WIDE_BYTE_PRODUCTS). A zmm of the
    super-block's codes holds two groups of 32 bytes: its low nibbles are sub-blocks 4h and 4h + 2, its high
    nibbles 4h + 1 and 4h + 3; x's two matching runs of 32 codes are put side by side in one register, and the
    sub-blocks' two scales fill the two halves of the scale register. Half the multiply instructions of the
    AVX2 form, the same integer sums (the 16 lanes folded to 8 before the float step)."""
    xq = args[1]
    i8, i16, i32, i64 = ir.IntType(8), ir.IntType(16), ir.IntType(32), ir.IntType(64)
    v64, l8, l16 = ir.VectorType(i8, 64), ir.VectorType(i32, 8), ir.VectorType(i32, 16)

    def lanes(idx):
        return ir.Constant(ir.VectorType(i32, len(idx)), idx)

    def superblock(b, at, eb):
        scales, mins = _k_scale_vectors(builder, at)
        scales, mins = builder.zext(scales, ir.VectorType(i16, 8)), builder.zext(mins, l8)
        acc = ir.Constant(l16, [0] * 16)
        x0 = builder.mul(b, ir.Constant(i64, QK))

        def x_pair(a, c):                  # x's codes a..a + 31 and c..c + 31 of this super-block, side by side
            xa = vector_load(context, builder, sig.args[1], xq, builder.add(x0, ir.Constant(i64, a)), 32)
            xc = vector_load(context, builder, sig.args[1], xq, builder.add(x0, ir.Constant(i64, c)), 32)
            return builder.shuffle_vector(xa, xc, lanes(list(range(64))))

        for h in range(2):
            q = builder.load(builder.bitcast(at(16 + 64 * h), v64.as_pointer()), align=1)
            low = builder.and_(q, ir.Constant(v64, [15] * 64))
            high = builder.lshr(q, ir.Constant(v64, [4] * 64))
            for codes, j in ((low, 4 * h), (high, 4 * h + 1)):
                pairs = avx512_call(builder, "pmaddubs.w.512", [codes, x_pair(32 * j, 32 * j + 64)])
                scale = builder.shuffle_vector(scales, scales, lanes([j] * 16 + [j + 2] * 16))
                acc = builder.add(acc, avx512_call(builder, "pmaddw.d.512", [pairs, scale]))
        acc = builder.add(builder.shuffle_vector(acc, acc, lanes(list(range(8)))),
                          builder.shuffle_vector(acc, acc, lanes(list(range(8, 16)))))
        return _k_float_lanes(context, builder, sig, args, b, at, eb, acc, mins)

    return _row_frame(context, builder, sig, args, 144, superblock)


@intrinsic
def _q4k_ymm_row(typingctx, blk_row, xq, e, sums, nb):
    """_q4k_row as AVX2 hosts compile it (32-byte registers), on any host: what tests compare the 64-byte form with."""
    return types.float32(blk_row, xq, e, sums, types.int64), _q45k_row_codegen(False, wide=False)


@intrinsic
def _q4k_row(typingctx, blk_row, xq, e, sums, nb):
    """One row of a Q4_K matrix (nb, 144) uint8 against one row of x in Q8_K: codes int8 (nb * 256), scales (nb),
    sums of 16 codes (nb * 16) int32 -> the float32 dot product (x86 with AVX2 only: jit.BYTE_PRODUCTS)."""
    return types.float32(blk_row, xq, e, sums, types.int64), _q45k_row_codegen(False)


@intrinsic
def _q5k_row(typingctx, blk_row, xq, e, sums, nb):
    """One row of a Q5_K matrix (nb, 176) uint8 against one row of x in Q8_K (as _q4k_row's) -> float32."""
    return types.float32(blk_row, xq, e, sums, types.int64), _q45k_row_codegen(True)


def _rows4(codegen, what):
    """A k-quant intrinsic for four rows of W against one row of x (the one-row intrinsic's arguments, then the
    other three rows) -> four float32."""
    def typer(typingctx, blk_row, xq, e, sums, nb, blk_row2, blk_row3, blk_row4):
        return (types.UniTuple(types.float32, 4)(blk_row, xq, e, sums, types.int64, blk_row2, blk_row3, blk_row4),
                codegen)
    typer.__doc__ = f"Four rows of a {what} matrix against one row of x -> (float32,) * 4."
    return intrinsic(typer)


_q4k_rows4 = _rows4(_q45k_row_codegen(False), "Q4_K")
_q5k_rows4 = _rows4(_q45k_row_codegen(True), "Q5_K")


def _q6k_row_codegen(context, builder, sig, args):
    """One row of W (nb super-blocks of 210 bytes) against one row of x (int8 codes, nb scales, sums of 16 codes),
    all in registers, one horizontal sum a row. Each super-block by halves of 128: 32 bytes of ql (twice) and 32
    of qh give four registers of 32 six-bit codes (positions l, l + 32, l + 64, l + 96: a low or high nibble and
    two bits of qh); vpmaddubsw by x's bytes (<= 2 * 63 * 127, no saturation), vpmaddwd by the two int8 scales
    of the register's two groups of 16 (8 lanes each, picked from the 16 scales loaded once). Per lane at most
    8 * 2 * 16002 * 128: no overflow. The codes' offset of 32: the 16 scales times x's 16 code sums (vpmulld), 32
    times that taken off in int32 (exact); then float lanes times d e into one float accumulator."""
    xq, sums = args[1], args[3]
    f32, i8, i32, i64 = ir.FloatType(), ir.IntType(8), ir.IntType(32), ir.IntType(64)
    l8, vf = ir.VectorType(i32, 8), ir.VectorType(f32, 8)

    def lanes(n, idx):
        return ir.Constant(ir.VectorType(i32, n), idx)

    def superblock(b, at, eb):
        load = lambda k, n: builder.load(builder.bitcast(at(k), ir.VectorType(i8, n).as_pointer()),   # noqa: E731
                                         align=1)
        sc8 = load(192, 16)
        _, pick = qgemm.q6_scales(builder, sc8)
        acc = ir.Constant(l8, [0] * 8)
        x0 = builder.mul(b, ir.Constant(i64, QK))
        for half in range(2):
            ql0, ql1, qh = load(64 * half, 32), load(64 * half + 32, 32), load(128 + 32 * half, 32)
            for k, codes in enumerate(qgemm.q6_codes(builder, ql0, ql1, qh)):
                x = vector_load(context, builder, sig.args[1], xq,
                                builder.add(x0, ir.Constant(i64, 128 * half + 32 * k)), 32)
                pairs = avx2_call(builder, "pmadd.ub.sw", [codes, x])
                acc = builder.add(acc, avx2_call(builder, "pmadd.wd", [pairs, pick(8 * half + 2 * k)]))
        s16 = vector_load(context, builder, sig.args[3], sums, builder.mul(b, ir.Constant(i64, 16)), 16)
        sc32 = builder.sext(sc8, ir.VectorType(i32, 16))
        prod = builder.mul(sc32, s16)
        shifted = builder.add(builder.shuffle_vector(prod, prod, lanes(8, list(range(8)))),
                              builder.shuffle_vector(prod, prod, lanes(8, list(range(8, 16)))))
        total = builder.sub(acc, builder.shl(shifted, ir.Constant(l8, [5] * 8)))
        d = builder.fpext(builder.load(builder.bitcast(at(208), ir.HalfType().as_pointer()), align=1), f32)
        de = builder.fmul(eb, d)
        one = builder.insert_element(ir.Constant(vf, ir.Undefined), de, ir.Constant(i32, 0))
        return builder.fmul(builder.sitofp(total, vf), builder.shuffle_vector(one, one, lanes(8, [0] * 8)),
                            flags=["contract"])

    return _row_frame(context, builder, sig, args, 210, superblock)


@intrinsic
def _q6k_row(typingctx, blk_row, xq, e, sums, nb):
    """One row of a Q6_K matrix (nb, 210) uint8 against one row of x in Q8_K (as _q4k_row's) -> float32."""
    return types.float32(blk_row, xq, e, sums, types.int64), _q6k_row_codegen


_q6k_rows4 = _rows4(_q6k_row_codegen, "Q6_K")


# _QUARTERS: a thread's rows r0..r1 - 1 go as four streams, rows i, i + q, i + 2q and i + 3q together (q a quarter of
# them), the few left over one at a time. A decode step reads each matrix once from memory (a 45 MB model does not
# fit in the caches), so the kernel's speed is how fast one core streams the blocks in, and one row at a time is
# limited by its instructions (a Q4_K row's scales, broadcasts and multiply-adds: about 14 GB/s of blocks, in the
# caches or not). Four rows at a time share x's loads and run four chains of multiply-adds side by side, but four
# NEIGHBOURING rows are four interleaved streams whose hardware prefetches fall on one another: streamed from memory
# they were slower than one row at a time (Q6_K 4.7 against 16-19 GB/s). Four rows a quarter apart are four
# separate streams: a llama Q4_K_M file's Q4_K matrices 13.0-13.6 -> 16.5-17.7 GB/s, its Q6_K 14-20 -> 18-19.5
# (2026-12-07, AMD EPYC Zen 4, one thread; the 4-stream reading beats a software prefetch, which was tried).
@inline
def _q6k_span(r0, r1, blocks, xq, e, sums, y, at):
    """Rows r0..r1 - 1 of a Q6_K matrix against every row of x, as four streams (``_QUARTERS``), into columns
    at + r0 .. at + r1 - 1 of y (at: where the matrix's rows begin in y, 0 but in a stack of parts)."""
    nb, q = blocks.shape[1], (r1 - r0) // 4
    for i in range(r0, r0 + q):
        for n in range(xq.shape[0]):
            y[n, at + i], y[n, at + i + q], y[n, at + i + 2 * q], y[n, at + i + 3 * q] = _q6k_rows4(
                blocks[i], xq[n], e[n], sums[n], nb, blocks[i + q], blocks[i + 2 * q], blocks[i + 3 * q])
    for i in range(r0 + 4 * q, r1):
        for n in range(xq.shape[0]):
            y[n, at + i] = _q6k_row(blocks[i], xq[n], e[n], sums[n], nb)


def _q6k_bytes_rows_serial(bounds, blocks, x, y):
    xq, e, sums = _x_codes(x, np.int8)
    for t in range(bounds.shape[0] - 1):
        _q6k_span(bounds[t], bounds[t + 1], blocks, xq, e, sums, y, 0)


def _q6k_bytes_rows_threaded(bounds, blocks, x, y):
    xq, e, sums = _x_codes(x, np.int8)
    for t in prange(bounds.shape[0] - 1):
        _q6k_span(bounds[t], bounds[t + 1], blocks, xq, e, sums, y, 0)


_Q6K_BYTES = (kernel(_q6k_bytes_rows_serial), parallel_kernel(_q6k_bytes_rows_threaded))


@inline
def _q45k_row(blk_row, xq, e, sums, nb, fifth):
    """One row of Q4_K (fifth False) or Q5_K blocks by its byte intrinsic; fifth is the same for a whole launch."""
    if fifth:
        return _q5k_row(blk_row, xq, e, sums, nb)
    return _q4k_row(blk_row, xq, e, sums, nb)


@inline
def _q45k_rows4(blk_row, xq, e, sums, nb, fifth, blk_row2, blk_row3, blk_row4):
    """Four rows of Q4_K (fifth False) or Q5_K blocks by their four-row intrinsic -> (float32,) * 4."""
    if fifth:
        return _q5k_rows4(blk_row, xq, e, sums, nb, blk_row2, blk_row3, blk_row4)
    return _q4k_rows4(blk_row, xq, e, sums, nb, blk_row2, blk_row3, blk_row4)


@inline
def _q45k_span(r0, r1, blocks, xq, e, sums, fifth, y, at):
    """Rows r0..r1 - 1 of a Q4_K / Q5_K matrix against every row of x, as four streams (``_QUARTERS``), into
    columns at + r0 .. at + r1 - 1 of y (as _q6k_span's)."""
    nb, q = blocks.shape[1], (r1 - r0) // 4
    for i in range(r0, r0 + q):
        for n in range(xq.shape[0]):
            y[n, at + i], y[n, at + i + q], y[n, at + i + 2 * q], y[n, at + i + 3 * q] = _q45k_rows4(
                blocks[i], xq[n], e[n], sums[n], nb, fifth, blocks[i + q], blocks[i + 2 * q], blocks[i + 3 * q])
    for i in range(r0 + 4 * q, r1):
        for n in range(xq.shape[0]):
            y[n, at + i] = _q45k_row(blocks[i], xq[n], e[n], sums[n], nb, fifth)


def _q45k_bytes_rows_serial(bounds, blocks, x, fifth, y):
    xq, e, sums = _x_codes(x, np.int8)
    for t in range(bounds.shape[0] - 1):
        _q45k_span(bounds[t], bounds[t + 1], blocks, xq, e, sums, fifth, y, 0)


def _q45k_bytes_rows_threaded(bounds, blocks, x, fifth, y):
    xq, e, sums = _x_codes(x, np.int8)
    for t in prange(bounds.shape[0] - 1):
        _q45k_span(bounds[t], bounds[t + 1], blocks, xq, e, sums, fifth, y, 0)


_Q45K_BYTES = (kernel(_q45k_bytes_rows_serial), parallel_kernel(_q45k_bytes_rows_threaded))



# two functions for each kind and way, not one dispatcher: numba's disk cache is keyed by the function. Each
# rounds x itself inside its one compiled call (a decode step launches about fifty products: engine/fast/quant.py)
def _q45_rows_serial(bounds, blocks, x, fifth, y):
    xq, e, sums = _x_codes(x, np.float32)
    for t in range(bounds.shape[0] - 1):
        for r in range(bounds[t], bounds[t + 1]):
            for n in range(xq.shape[0]):
                y[n, r] = _q45_row(blocks[r], xq[n], e[n], sums[n], fifth)


def _q45_rows_threaded(bounds, blocks, x, fifth, y):
    xq, e, sums = _x_codes(x, np.float32)
    for t in prange(bounds.shape[0] - 1):
        for r in range(bounds[t], bounds[t + 1]):
            for n in range(xq.shape[0]):
                y[n, r] = _q45_row(blocks[r], xq[n], e[n], sums[n], fifth)


def _q6_rows_serial(bounds, blocks, x, y):
    xq, e, sums = _x_codes(x, np.float32)
    for t in range(bounds.shape[0] - 1):
        for r in range(bounds[t], bounds[t + 1]):
            for n in range(xq.shape[0]):
                y[n, r] = _q6_row(blocks[r], xq[n], e[n], sums[n])


def _q6_rows_threaded(bounds, blocks, x, y):
    xq, e, sums = _x_codes(x, np.float32)
    for t in prange(bounds.shape[0] - 1):
        for r in range(bounds[t], bounds[t + 1]):
            for n in range(xq.shape[0]):
                y[n, r] = _q6_row(blocks[r], xq[n], e[n], sums[n])


_Q45 = (kernel(_q45_rows_serial), parallel_kernel(_q45_rows_threaded))
_Q6 = (kernel(_q6_rows_serial), parallel_kernel(_q6_rows_threaded))


def kquant_matmul(x, w):
    """x (N, K) float32, w a k-quant matrix (R, K) -> y (N, R) float32; NotImplemented (the reference runs)
    for any other matrix or input."""
    kind = getattr(w, "kind", None)
    if (kind not in ("q4_K", "q5_K", "q6_K") or not (type(x) is np.ndarray and x.dtype == _F32 and x.flags.c_contiguous)
            or x.ndim != 2 or x.shape[1] != w.shape[1]):
        return NotImplemented
    blocks = w.blocks if w.blocks.flags.c_contiguous else np.ascontiguousarray(w.blocks)
    N, R = x.shape[0], w.shape[0]
    if N >= qgemm.ROWS_FROM and not block_products_exact() and qgemm.available(kind, x.shape[1]):
        return _many_rows(x, w, blocks)                  # several rows of x (a prefill): the integer GEMM
    y = np.empty((N, R), np.float32)
    if N >= SLAB_FROM and not block_products_exact():   # no AVX2 (or Q5_K): BLAS slabs
        return _by_slabs(x, blocks, kind, y)
    if block_products_exact():
        if kind == "q6_K":
            _q6_k_matmul(x, blocks, y)
        else:
            _q45_k_matmul(x, blocks, kind == "q5_K", y)
        return y
    return integer_product(x, w, thread_cap(), blocks)


def integer_product(x, w, threads, blocks=None):
    """quant.integer_product for k-quant blocks (the same contract): y = x @ W^T by the integer kernels for fewer
    than SLAB_FROM rows of x, every check already made; blocks: w.blocks C-contiguous (w.blocks when None)."""
    kind = w.kind
    blocks = w.blocks if blocks is None else blocks
    N, R = x.shape[0], w.shape[0]
    y = np.empty((N, R), np.float32)
    if jit.BYTE_PRODUCTS:
        if kind == "q6_K":
            run_rows(_Q6K_BYTES, threads, R, blocks, x, y)
        else:
            run_rows(_Q45K_BYTES, threads, R, blocks, x, kind == "q5_K", y)
    elif kind == "q6_K":
        run_rows(_Q6, threads, R, blocks, x, y)
    else:
        run_rows(_Q45, threads, R, blocks, x, kind == "q5_K", y)
    return y
