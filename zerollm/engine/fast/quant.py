"""Weight-only quantized matmul: y = x @ W^T with W held as Q8_0 / Q4_0 blocks, never as floats.

Reference: ``zerollm.nn.linear.quantized_matmul`` (dequantize the whole matrix, then BLAS).
Decoding one token (x is one row) reads every weight once, so it is bound by memory: Q8_0 reads 34
bytes per 32 weights and Q4_0 18, where float32 reads 128. Two ways to multiply, both on the blocks
as stored:

**Integer products** (inference, the default; what llama.cpp does). Each row of x is first quantized
to Q8_0 blocks itself (32 numbers share a float32 scale e, codes p = round(x / e) in -127..127, e = max|x| / 127),
once per call; the codes are held as int16, the width vpmaddwd multiplies. Then each block of a row of W against the same block of x is one integer dot product:

    y[n, r] = sum_b  d[r, b] e[n, b]  sum_j q[r, 32 b + j] p[n, 32 b + j]        (int32 inner sum)
    Q4_0:  q[j] = c[j] - 8, c the 4-bit codes (byte j of a block: c[j] | c[j + 16] << 4)

The inner sum is written in LLVM's vector IR (``_block_dot``): 32 bytes of each side loaded at once,
widened and multiplied; LLVM turns it into AVX2's vpmaddwd (16-bit products summed in pairs into 32-bit
lanes), and the eight 32-bit sums of a block go to float and into an 8-lane float accumulator times the
two scales, so a row needs one horizontal sum at its end, not one a block (docs/gguf.md shows the
assembly counts). The Q4_0 nibbles are unpacked in registers (an and, a shift), never to an array.
On x86 with AVX2 (engine/fast/jit.py's ``BYTE_PRODUCTS``) Q4_0 takes x's codes as bytes instead: the 32 nibbles of a block go into one
register, AVX2's vpmaddubsw multiplies them (unsigned, 0..15) by x's bytes and adds neighbours, vpmaddwd by
ones adds neighbours again, and the weights' -8 comes off as 8 times x's sums precomputed per row of x
(``_lane_sums``). That is 3 vector operations a block where the 16-bit lanes take 7. With an even number of
blocks a row (every model width that is a multiple of 64) two blocks go at once (``_row_dot_q4_pairs``): their
32 bytes are adjacent, so one load, one and and one shift give the low nibbles of both and the high nibbles of
both, x is laid out to match once per call (``_pair_layout``), and the two scales multiply 4 lanes each; about
8 instructions a block, and Q4_0, which reads half Q8_0's bytes, is faster than Q8_0 (docs/gguf.md#decode-speed).
Elsewhere the 16-bit kernel runs.
Rounding x to 8 bits changes y by about 0.5% of its largest entry, as in llama.cpp: the fast engine's
logits on a quantized file are within ``INT8_TOLERANCE`` of the NumPy engine's, relative to the largest
logit (tests/test_fast_quant.py).

**Float products** (training: a QLoRA base in train mode, so its gradients are those of the reference;
see ``zerollm.engine.amp.exact_block_products``): each 32-number block of a row of W is decoded into
registers and multiplied by the float row of x; this differs from the reference only in the order of
the sums.

**Many rows of x** (a prompt's prefill, a server's batch of 8 or more): in inference, from qgemm.ROWS_FROM
rows, engine/fast/qgemm.py's integer GEMM on the blocks as stored (each block of W unpacked once for 4 rows of
x). In training (float products) and where qgemm has no kernel, from SLAB_FROM rows, W is decoded 256 rows at a
time into a float buffer and BLAS multiplies (``_by_slabs``), as a GEMM reuses each weight for every row of x.

Rows of W are split between threads (numba's, as many as BLAS may use: ``--threads``); one row is 24 blocks at
GPT-2's width, so the split is even. Each thread takes its Q8_0 rows, and its Q4_0 rows of an even number of blocks,
four at a time, a quarter of them apart: four streams from memory (kquant.py's _QUARTERS says why). Streaming a llama
file's matrices on one thread (AMD EPYC Zen 4): Q8_0 16.4-17.2 -> 23.4-23.8 GB/s, Q4_0 13.4-15.5 -> 18.5-19.3.

Shapes: x (N, K), W (R, K) as scales (R, nb) float32 and codes, y (N, R); nb = K / 32.

A ``StackedBlocks`` W (parts of different kinds, as Llama Q4_K_M's c_attn: q, k in Q4_K, v in Q6_K) goes part by
part, except where every part is Q4_K or Q6_K on the byte kernels: then x is rounded once and all the rows are
one launch (``one_launch``), bit for bit the same numbers.

``quantized_matmul(x, w)`` dispatches on ``w.kind``; a kind without a branch here (a new block
format) answers NotImplemented and the reference runs. Add a format by adding a branch in
``quantized_matmul`` that keeps its signature (x, w) -> y or NotImplemented.
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
from zerollm.engine.fast.jit import avx2_call, float32_arrays, inline, kernel, parallel_kernel, vector_load
from zerollm.engine.fast.kquant import _q45k_span, _q6k_span, _x_codes, kquant_matmul
from zerollm.engine.fast.kquant import integer_product as kquant_product
from zerollm.engine.fast.qlora import _DECODERS as DECODERS, ROWS

BLOCK = 32
LANES = 8                 # float32 lanes of the accumulator: one AVX2 register
INT8_TOLERANCE = 2e-2     # |fast - reference| <= this * max|reference| with the activations in 8 bits
_F32 = np.dtype(np.float32)
SLAB_FROM = 32            # rows of x from which W is decoded in slabs for BLAS (measured crossover: 16-64)


# ----------------------------------------------------------------------------
# one block of W against one block of x, in LLVM vector IR

def _pairs(builder, w, x):
    """<n x i32> w and x, both within 16 bits -> <n/2 x i32>: w[2i] x[2i] + w[2i+1] x[2i+1]. Products of
    16-bit numbers with neighbours added is vpmaddwd's pattern, which LLVM then emits."""
    i32 = ir.IntType(32)
    n = w.type.count
    prod = builder.mul(w, x)
    pick = lambda idx: builder.shuffle_vector(prod, prod, ir.Constant(ir.VectorType(i32, len(idx)), idx))   # noqa: E731
    return builder.add(pick(list(range(0, n, 2))), pick(list(range(1, n, 2))))


def _halves_added(builder, v):
    """<2m x i32> -> <m x i32>: v[:m] + v[m:]."""
    i32, m = ir.IntType(32), v.type.count // 2
    pick = lambda idx: builder.shuffle_vector(v, v, ir.Constant(ir.VectorType(i32, m), idx))   # noqa: E731
    return builder.add(pick(list(range(m))), pick(list(range(m, 2 * m))))


def _eight_sums_q8(builder, w8, x16):
    """<32 x i8> weights and <32 x i16> activations -> <8 x i32>: each lane the sum of four of the 32 products."""
    wide = ir.VectorType(ir.IntType(32), BLOCK)
    return _halves_added(builder, _pairs(builder, builder.sext(w8, wide), builder.sext(x16, wide)))


def _eight_sums_q4(builder, c16, x16):
    """16 packed bytes (low nibbles: positions 0..15, high: 16..31; weight c - 8) and <32 x i16> activations
    -> <8 x i32>. The nibbles are unpacked in registers (an and, a shift) and each half multiplies its own
    half of x: no shuffle across the halves."""
    i8, i32 = ir.IntType(8), ir.IntType(32)
    v16, w16 = ir.VectorType(i8, 16), ir.VectorType(i32, 16)
    eight = ir.Constant(w16, [8] * 16)
    low = builder.sub(builder.zext(builder.and_(c16, ir.Constant(v16, [15] * 16)), w16), eight)
    high = builder.sub(builder.zext(builder.lshr(c16, ir.Constant(v16, [4] * 16)), w16), eight)
    x = builder.sext(x16, ir.VectorType(i32, BLOCK))
    half = lambda lo: builder.shuffle_vector(x, x, ir.Constant(w16, list(range(lo, lo + 16))))   # noqa: E731
    return builder.add(_pairs(builder, low, half(0)), _pairs(builder, high, half(16)))


def _float_lanes(builder):
    """An accumulator of LANES float32 lanes, zeroed (an alloca: LLVM keeps it in a register)."""
    vf = ir.VectorType(ir.FloatType(), LANES)
    acc_ptr = builder.alloca(vf)
    builder.store(ir.Constant(vf, [0.0] * LANES), acc_ptr)
    return acc_ptr


def _add_scaled(builder, acc_ptr, sums, scales):
    """acc += sums * scales (float32 vectors)."""
    builder.store(builder.fadd(builder.load(acc_ptr), builder.fmul(sums, scales, flags=["contract"]), flags=["contract"]),
                  acc_ptr)


def _row_results(context, builder, sig, accs):
    """Each accumulator's lanes summed -> the float32 result, or a tuple of them (the four-row intrinsics)."""
    i32, totals = ir.IntType(32), []
    for acc_ptr in accs:
        acc = builder.load(acc_ptr)
        total = builder.extract_element(acc, ir.Constant(i32, 0))
        for lane in range(1, LANES):
            total = builder.fadd(total, builder.extract_element(acc, ir.Constant(i32, lane)))
        totals.append(total)
    return totals[0] if len(totals) == 1 else context.make_tuple(builder, sig.return_type, totals)


def _rows_of_w(context, builder, sig, args, first_extra):
    """W's rows an intrinsic takes: (codes data, scales data) of args[0], args[1], then of each (codes, scales) pair
    from args[first_extra] on (the four-row intrinsics give three more rows after nb)."""
    pairs = [(args[0], args[1])] + list(zip(args[first_extra::2], args[first_extra + 1::2]))
    return [(context.make_array(sig.args[0])(context, builder, value=c).data,
             context.make_array(sig.args[1])(context, builder, value=d).data) for c, d in pairs]


def _row_dot_codegen(q4):
    def codegen(context, builder, sig, args):
        """acc = 0 (8 floats); for each block b: acc += (d[b] e[b]) * float(eight_sums(w_b, x_b)); return sum(acc).
        With more rows of W after nb: each row its own acc, x's block loaded once for all."""
        xq, e, nb = args[2], args[3], args[4]
        f32, i64 = ir.FloatType(), ir.IntType(64)
        vf = ir.VectorType(f32, LANES)
        rows = _rows_of_w(context, builder, sig, args, 5)
        accs = [_float_lanes(builder) for _ in rows]
        e_data = context.make_array(sig.args[3])(context, builder, value=e).data
        width = BLOCK // 2 if q4 else BLOCK
        with cgutils.for_range(builder, nb) as loop:
            b = loop.index
            xb = vector_load(context, builder, sig.args[2], xq, builder.mul(b, ir.Constant(i64, BLOCK)), BLOCK)
            eb = builder.load(builder.gep(e_data, [b]))
            for (codes, d), acc_ptr in zip(rows, accs):
                wb = builder.load(builder.bitcast(builder.gep(codes, [builder.mul(b, ir.Constant(i64, width))]),
                                                  ir.VectorType(ir.IntType(8), width).as_pointer()), align=1)
                sums = _eight_sums_q4(builder, wb, xb) if q4 else _eight_sums_q8(builder, wb, xb)
                scale = builder.fmul(builder.load(builder.gep(d, [b])), eb)
                splat = builder.insert_element(ir.Constant(vf, ir.Undefined), scale, ir.Constant(ir.IntType(32), 0))
                splat = builder.shuffle_vector(splat, splat, ir.Constant(ir.VectorType(ir.IntType(32), LANES), [0] * LANES))
                _add_scaled(builder, acc_ptr, builder.sitofp(sums, vf), splat)
        return _row_results(context, builder, sig, accs)
    return codegen


@intrinsic
def _row_dot_q8(typingctx, codes, d, xq, e, nb):
    """sum_b d[b] e[b] sum_j codes[32 b + j] xq[32 b + j] for one row of W (int8 codes) and one of x."""
    return types.float32(codes, d, xq, e, types.int64), _row_dot_codegen(q4=False)


@intrinsic
def _row_dot_q8_rows4(typingctx, codes, d, xq, e, nb, codes2, d2, codes3, d3, codes4, d4):
    """_row_dot_q8 for four rows of W (each its codes and scales, the first before x, three after nb) -> 4 float32."""
    return (types.UniTuple(types.float32, 4)(codes, d, xq, e, types.int64, codes2, d2, codes3, d3, codes4, d4),
            _row_dot_codegen(q4=False))


@intrinsic
def _row_dot_q4(typingctx, codes, d, xq, e, nb):
    """As _row_dot_q8 for a Q4_0 row: codes are 16 packed bytes a block, each nibble c - 8."""
    return types.float32(codes, d, xq, e, types.int64), _row_dot_codegen(q4=True)


def _eight_sums_q4_bytes(builder, c16, x8, lane_sums):
    """16 packed bytes (Q4_0) and <32 x i8> activations -> <8 x i32>, as _eight_sums_q4 but with x in 8 bits:
    the nibbles c (0..15, unsigned) go into one 32-byte register (the low ones, then the high ones: positions
    0..31 in order), vpmaddubsw multiplies them by x and adds neighbours into 16-bit lanes (|sum| <= 2 * 15 *
    127: no saturation), vpmaddwd by ones adds neighbours again into 32-bit lanes, and the weight's -8 comes off
    as 8 times the activations' sum over each lane's four positions (``lane_sums``, once per row of x). Three
    vector operations a block where _eight_sums_q4 takes seven; LLVM does not find vpmaddubsw in generic IR
    (its saturation pattern compiled to a slow clamp), so it is called by name."""
    i8, i16, i32 = ir.IntType(8), ir.IntType(16), ir.IntType(32)
    v16 = ir.VectorType(i8, 16)
    low = builder.and_(c16, ir.Constant(v16, [15] * 16))
    high = builder.lshr(c16, ir.Constant(v16, [4] * 16))
    c32 = builder.shuffle_vector(low, high, ir.Constant(ir.VectorType(i32, BLOCK), list(range(BLOCK))))
    pairs = avx2_call(builder, "pmadd.ub.sw", [c32, x8])
    sums = avx2_call(builder, "pmadd.wd", [pairs, ir.Constant(ir.VectorType(i16, 16), [1] * 16)])
    return builder.sub(sums, lane_sums)


def _row_dot_q4_bytes_codegen(context, builder, sig, args):
    """acc = 0 (8 floats); for each block b: acc += (d[b] e[b]) * float(eight_sums(c_b, x_b) - 8 lane sums);
    return sum(acc). The arguments of _row_dot_codegen's, and the lane sums (nb * 8 int32) after x's scales."""
    codes, d, xq, e, lanes, nb = args
    f32, i64, i32 = ir.FloatType(), ir.IntType(64), ir.IntType(32)
    vf = ir.VectorType(f32, LANES)
    acc_ptr = _float_lanes(builder)
    d_data = context.make_array(sig.args[1])(context, builder, value=d).data
    e_data = context.make_array(sig.args[3])(context, builder, value=e).data
    with cgutils.for_range(builder, nb) as loop:
        b = loop.index
        xb = vector_load(context, builder, sig.args[2], xq, builder.mul(b, ir.Constant(i64, BLOCK)), BLOCK)
        c16 = vector_load(context, builder, sig.args[0], codes, builder.mul(b, ir.Constant(i64, BLOCK // 2)), BLOCK // 2)
        lane_sums = vector_load(context, builder, sig.args[4], lanes, builder.mul(b, ir.Constant(i64, LANES)), LANES)
        sums = builder.sitofp(_eight_sums_q4_bytes(builder, c16, xb, lane_sums), vf)
        scale = builder.fmul(builder.load(builder.gep(d_data, [b])), builder.load(builder.gep(e_data, [b])))
        splat = builder.insert_element(ir.Constant(vf, ir.Undefined), scale, ir.Constant(i32, 0))
        splat = builder.shuffle_vector(splat, splat, ir.Constant(ir.VectorType(i32, LANES), [0] * LANES))
        _add_scaled(builder, acc_ptr, sums, splat)
    return _row_results(context, builder, sig, [acc_ptr])


@intrinsic
def _row_dot_q4_bytes(typingctx, codes, d, xq, e, lanes, nb):
    """As _row_dot_q4 with x's codes in int8 and their lane sums (x86 with AVX2 only: jit.BYTE_PRODUCTS)."""
    return types.float32(codes, d, xq, e, lanes, types.int64), _row_dot_q4_bytes_codegen


def _row_dot_q4_pairs_codegen(context, builder, sig, args):
    """_row_dot_q4_bytes two blocks at a time (an even number of blocks): the 32 bytes of blocks 2p and 2p + 1 are
    next to each other in a row, so one load, one and and one shift give two registers of 32 nibbles, the low
    ones of both blocks and the high ones of both. x is laid out to match (``_pair_layout``: x_2p[0:16],
    x_2p+1[0:16], x_2p[16:32], x_2p+1[16:32]), the two vpmaddubsw results are added in 16 bits (<= 4 * 15 * 127),
    and one vpmaddwd by ones gives 8 lanes: 0..3 of block 2p, 4..7 of block 2p + 1, scaled by [d e of 2p] * 4 +
    [d e of 2p + 1] * 4. About 8 instructions a block where one block at a time takes 13.5."""
    xq, e, lanes, nb = args[2], args[3], args[4], args[5]
    f32, i8, i16, i32, i64 = ir.FloatType(), ir.IntType(8), ir.IntType(16), ir.IntType(32), ir.IntType(64)
    vf, v32 = ir.VectorType(f32, LANES), ir.VectorType(i8, 32)
    rows = _rows_of_w(context, builder, sig, args, 6)
    accs = [_float_lanes(builder) for _ in rows]
    e_data = context.make_array(sig.args[3])(context, builder, value=e).data

    def two(data, at):
        v2 = ir.VectorType(f32, 2)
        return builder.load(builder.bitcast(builder.gep(data, [at]), v2.as_pointer()), align=4)

    with cgutils.for_range(builder, builder.udiv(nb, ir.Constant(i64, 2))) as loop:
        p = loop.index
        x_low = vector_load(context, builder, sig.args[2], xq, builder.mul(p, ir.Constant(i64, 2 * BLOCK)), BLOCK)
        x_high = vector_load(context, builder, sig.args[2], xq, builder.add(builder.mul(p, ir.Constant(i64, 2 * BLOCK)),
                                                                       ir.Constant(i64, BLOCK)), BLOCK)
        lane_sums = vector_load(context, builder, sig.args[4], lanes, builder.mul(p, ir.Constant(i64, LANES)), LANES)
        at = builder.mul(p, ir.Constant(i64, 2))
        e2 = two(e_data, at)
        for (codes, d), acc_ptr in zip(rows, accs):
            c32 = builder.load(builder.bitcast(builder.gep(codes, [builder.mul(p, ir.Constant(i64, BLOCK))]),
                                               v32.as_pointer()), align=1)
            low = builder.and_(c32, ir.Constant(v32, [15] * 32))
            high = builder.lshr(c32, ir.Constant(v32, [4] * 32))
            pairs = builder.add(avx2_call(builder, "pmadd.ub.sw", [low, x_low]),
                                avx2_call(builder, "pmadd.ub.sw", [high, x_high]))
            sums = avx2_call(builder, "pmadd.wd", [pairs, ir.Constant(ir.VectorType(i16, 16), [1] * 16)])
            sums = builder.sitofp(builder.sub(sums, lane_sums), vf)
            scales = builder.fmul(two(d, at), e2)
            scales = builder.shuffle_vector(scales, scales, ir.Constant(ir.VectorType(i32, LANES), [0] * 4 + [1] * 4))
            _add_scaled(builder, acc_ptr, sums, scales)
    return _row_results(context, builder, sig, accs)


@intrinsic
def _row_dot_q4_pairs(typingctx, codes, d, xq, e, lanes, nb):
    """As _row_dot_q4_bytes with x in the pair layout (an even number of blocks nb)."""
    return types.float32(codes, d, xq, e, lanes, types.int64), _row_dot_q4_pairs_codegen


@intrinsic
def _row_dot_q4_pairs_rows4(typingctx, codes, d, xq, e, lanes, nb, codes2, d2, codes3, d3, codes4, d4):
    """_row_dot_q4_pairs for four rows of W (the first before x, three after nb) -> 4 float32."""
    return (types.UniTuple(types.float32, 4)(codes, d, xq, e, lanes, types.int64, codes2, d2, codes3, d3, codes4, d4),
            _row_dot_q4_pairs_codegen)


# ----------------------------------------------------------------------------
# the activations in Q8_0 blocks (float32 scales: nothing is stored, so no float16 rounding)

@kernel
def _quantize_rows(x, xq, e):
    """x (N, K) -> xq (N, K) and e (N, nb): e = max|x| / 127 over each block, xq = round(x / e) in -127..127,
    held as int16: the kernels then load x's 16-bit lanes as vpmaddwd takes them, with no widening a block
    (int8 for the Q4_0 kernel of AVX2, whose vpmaddubsw takes bytes)."""
    N, K = x.shape
    for n in range(N):
        for b in range(K // BLOCK):
            row = x[n, b * BLOCK:(b + 1) * BLOCK]
            d = jit.max_abs(row) / np.float32(127.0)
            e[n, b] = d
            jit.round_codes(row, np.float32(1.0) / d if d > 0 else np.float32(0.0), xq[n, b * BLOCK:(b + 1) * BLOCK])


@kernel
def _lane_sums(xq, lanes):
    """lanes[n, 8 b + k] = 8 * (xq[n, 32 b + 4 k] + ... + xq[n, 32 b + 4 k + 3]): the -8 of every Q4_0 weight
    times the four activations that land in lane k of a block's eight sums."""
    N, K = xq.shape
    for n in range(N):
        for i in range(K // 4):
            lanes[n, i] = 8 * (np.int32(xq[n, 4 * i]) + np.int32(xq[n, 4 * i + 1]) + np.int32(xq[n, 4 * i + 2])
                               + np.int32(xq[n, 4 * i + 3]))


@kernel
def _pair_layout(xq, xp, lanes):
    """xq (N, K) int8 in order -> xp (N, K), each two blocks as x_2p[0:16], x_2p+1[0:16], x_2p[16:32],
    x_2p+1[16:32] (the order of _row_dot_q4_pairs' two nibble registers), and lanes (N, K / 8): 8 times the
    sum of the codes of each of its 8 lanes (the -8 of the weights)."""
    N, K = xq.shape
    for n in range(N):
        for p in range(K // (2 * BLOCK)):
            src, dst = 2 * p * BLOCK, 2 * p * BLOCK
            for h in range(2):                      # the low nibbles' positions, then the high ones'
                for blk in range(2):
                    for i in range(16):
                        xp[n, dst + 32 * h + 16 * blk + i] = xq[n, src + BLOCK * blk + 16 * h + i]
            for lane in range(LANES):
                blk, k = lane // 4, lane % 4
                total = np.int32(0)
                for i in range(4):
                    total += np.int32(xq[n, src + BLOCK * blk + 4 * k + i]) + np.int32(xq[n, src + BLOCK * blk + 16 + 4 * k + i])
                lanes[n, p * LANES + lane] = 8 * total


@kernel
def _x_int16(x):
    """x (N, K) in Q8_0 blocks for the 16-bit lanes: codes (N, K) int16 and scales (N, K / 32)."""
    xq, e = np.empty(x.shape, np.int16), np.empty((x.shape[0], x.shape[1] // BLOCK), np.float32)
    _quantize_rows(x, xq, e)
    return xq, e


@kernel
def _x_bytes(x):
    """x (N, K) in Q8_0 blocks for _row_dot_q4_bytes: codes int8, scales and the lane sums of the weights' -8."""
    xq, e = np.empty(x.shape, np.int8), np.empty((x.shape[0], x.shape[1] // BLOCK), np.float32)
    lanes = np.empty((x.shape[0], x.shape[1] // 4), np.int32)
    _quantize_rows(x, xq, e)
    _lane_sums(xq, lanes)
    return xq, e, lanes


@kernel
def _x_pairs(x):
    """x (N, K) in Q8_0 blocks laid out for _row_dot_q4_pairs: codes int8 in the pair layout, scales, lane sums."""
    xq, e = np.empty(x.shape, np.int8), np.empty((x.shape[0], x.shape[1] // BLOCK), np.float32)
    xp, lanes = np.empty(x.shape, np.int8), np.empty((x.shape[0], x.shape[1] // 8), np.int32)
    _quantize_rows(x, xq, e)
    _pair_layout(xq, xp, lanes)
    return xp, e, lanes


# Each kernel takes x as floats and rounds it itself, inside the one compiled call: a decode step makes about
# fifty of these products, and three launches each from Python (quantize, lay out, multiply) with their
# scratch arrays allocated by NumPy cost more than a small matrix's arithmetic. Two functions of their own
# for each kind, not one dispatcher: numba's disk cache is keyed by the function.
@inline
def _q8_span(r0, r1, codes, d, xq, e, y):
    """Rows r0..r1 - 1 of a Q8_0 matrix against every row of x, as four streams (kquant.py's _QUARTERS)."""
    nb, q = d.shape[1], (r1 - r0) // 4
    for i in range(r0, r0 + q):
        j, k, m = i + q, i + 2 * q, i + 3 * q
        for n in range(xq.shape[0]):
            y[n, i], y[n, j], y[n, k], y[n, m] = _row_dot_q8_rows4(codes[i], d[i], xq[n], e[n], nb, codes[j], d[j],
                                                                   codes[k], d[k], codes[m], d[m])
    for i in range(r0 + 4 * q, r1):
        for n in range(xq.shape[0]):
            y[n, i] = _row_dot_q8(codes[i], d[i], xq[n], e[n], nb)


def _q8_rows_serial(bounds, codes, d, x, y):
    xq, e = _x_int16(x)
    for t in range(bounds.shape[0] - 1):
        _q8_span(bounds[t], bounds[t + 1], codes, d, xq, e, y)


def _q8_rows_threaded(bounds, codes, d, x, y):
    xq, e = _x_int16(x)
    for t in prange(bounds.shape[0] - 1):
        _q8_span(bounds[t], bounds[t + 1], codes, d, xq, e, y)


def _q4_rows_serial(bounds, codes, d, x, y):
    xq, e = _x_int16(x)
    for t in range(bounds.shape[0] - 1):
        for r in range(bounds[t], bounds[t + 1]):
            for n in range(xq.shape[0]):
                y[n, r] = _row_dot_q4(codes[r], d[r], xq[n], e[n], d.shape[1])


def _q4_rows_threaded(bounds, codes, d, x, y):
    xq, e = _x_int16(x)
    for t in prange(bounds.shape[0] - 1):
        for r in range(bounds[t], bounds[t + 1]):
            for n in range(xq.shape[0]):
                y[n, r] = _row_dot_q4(codes[r], d[r], xq[n], e[n], d.shape[1])


def _q4_bytes_rows_serial(bounds, codes, d, x, y):
    xq, e, lanes = _x_bytes(x)
    for t in range(bounds.shape[0] - 1):
        for r in range(bounds[t], bounds[t + 1]):
            for n in range(xq.shape[0]):
                y[n, r] = _row_dot_q4_bytes(codes[r], d[r], xq[n], e[n], lanes[n], d.shape[1])


def _q4_bytes_rows_threaded(bounds, codes, d, x, y):
    xq, e, lanes = _x_bytes(x)
    for t in prange(bounds.shape[0] - 1):
        for r in range(bounds[t], bounds[t + 1]):
            for n in range(xq.shape[0]):
                y[n, r] = _row_dot_q4_bytes(codes[r], d[r], xq[n], e[n], lanes[n], d.shape[1])


_Q4_BYTES = (kernel(_q4_bytes_rows_serial), parallel_kernel(_q4_bytes_rows_threaded))


@inline
def _q4_pairs_span(r0, r1, codes, d, xq, e, lanes, y):
    """Rows r0..r1 - 1 of a Q4_0 matrix (an even number of blocks a row) against every row of x in the pair layout,
    as four streams (kquant.py's _QUARTERS)."""
    nb, q = d.shape[1], (r1 - r0) // 4
    for i in range(r0, r0 + q):
        j, k, m = i + q, i + 2 * q, i + 3 * q
        for n in range(xq.shape[0]):
            y[n, i], y[n, j], y[n, k], y[n, m] = _row_dot_q4_pairs_rows4(codes[i], d[i], xq[n], e[n], lanes[n], nb,
                                                                         codes[j], d[j], codes[k], d[k], codes[m], d[m])
    for i in range(r0 + 4 * q, r1):
        for n in range(xq.shape[0]):
            y[n, i] = _row_dot_q4_pairs(codes[i], d[i], xq[n], e[n], lanes[n], nb)


def _q4_pairs_rows_serial(bounds, codes, d, x, y):
    xq, e, lanes = _x_pairs(x)
    for t in range(bounds.shape[0] - 1):
        _q4_pairs_span(bounds[t], bounds[t + 1], codes, d, xq, e, lanes, y)


def _q4_pairs_rows_threaded(bounds, codes, d, x, y):
    xq, e, lanes = _x_pairs(x)
    for t in prange(bounds.shape[0] - 1):
        _q4_pairs_span(bounds[t], bounds[t + 1], codes, d, xq, e, lanes, y)


_Q4_PAIRS = (kernel(_q4_pairs_rows_serial), parallel_kernel(_q4_pairs_rows_threaded))
_INT8 = {"q8_0": (kernel(_q8_rows_serial), parallel_kernel(_q8_rows_threaded)),
         "q4_0": (kernel(_q4_rows_serial), parallel_kernel(_q4_rows_threaded))}


# ----------------------------------------------------------------------------
# float products (a QLoRA base in training): the blocks decoded in registers, x kept in float32

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


_FLOAT = {"q8_0": _q8_0_matmul, "q4_0": _q4_0_matmul}


def _by_slabs(x, w):
    """y = x @ W^T with W decoded ROWS rows at a time (QLoRA's backward decoders, engine/fast/qlora.py) and
    each slab multiplied by BLAS: for many rows of x (a prompt's prefill, a training batch) a GEMM beats
    SLAB_FROM or more integer dot products per row of W. The float matrix never exists whole."""
    N, (R, K) = x.shape[0], w.shape
    y = np.empty((N, R), np.float32)
    buf = np.empty((min(ROWS, R), K), np.float32)
    part = np.empty((N, buf.shape[0]), np.float32)
    for r0 in range(0, R, ROWS):
        r1 = min(r0 + ROWS, R)
        DECODERS[w.kind](w.scales, w.codes, r0, r1, buf)
        np.matmul(x, buf[:r1 - r0].T, out=part[:, :r1 - r0])         # (N, K) @ (K, r1 - r0)
        y[:, r0:r1] = part[:, :r1 - r0]
    return y


def _many_rows(x, w):
    """y = x @ W^T for many rows of x (a prompt's prefill) by engine/fast/qgemm.py's integer GEMM on the blocks as
    stored, x rounded to 8-bit blocks once as the decode kernels round it."""
    xp, e, lanes = _x_pairs(x)                           # both kinds take two blocks at a time
    if w.kind == "q8_0":
        return qgemm.q8_0(xp, e, w.codes, w.scales)
    return qgemm.q4_0(xp, e, lanes, w.codes, w.scales)


def quantized_matmul(x, w):
    """x (N, K) float32, w a QuantizedMatrix (R, K) -> y (N, R) float32, or NotImplemented (the
    reference then runs) for a kind or an input this module has no kernel for."""
    kind = getattr(w, "kind", None)
    if kind == "stacked":                                # parts of different kinds (q, k in Q4_K, v in Q6_K)
        return _stacked_matmul(x, w)
    if kind in ("q4_K", "q5_K", "q6_K"):                 # super-blocks of 256: engine/fast/kquant.py
        return kquant_matmul(x, w)
    if (kind not in _FLOAT or not (type(x) is np.ndarray and x.dtype == _F32 and x.flags.c_contiguous)
            or not float32_arrays(w.scales) or x.ndim != 2 or x.shape[1] != w.shape[1]
            or not w.codes.flags.c_contiguous):
        return NotImplemented
    N, K = x.shape
    if N >= qgemm.ROWS_FROM and not block_products_exact() and qgemm.available(kind, K):
        return _many_rows(x, w)                          # several rows of x (a prefill): the integer GEMM
    if N >= SLAB_FROM:                                   # training (or no AVX2): BLAS slabs
        return _by_slabs(x, w)
    y = np.empty((N, w.shape[0]), np.float32)
    if block_products_exact():
        _FLOAT[kind](x, w.scales, w.codes, y)
        return y
    return integer_product(x, w, thread_cap())


# ----------------------------------------------------------------------------
# stacked Q4_K / Q6_K parts in one launch (llama.cpp's Q4_K_M c_attn: q and k in Q4_K, v in Q6_K)

_STACK_KINDS = {"q4_K": 0, "q6_K": 1}          # which row intrinsic a part takes (kquant.py's byte kernels)


@inline
def _stack_span(r0, r1, parts, offsets, six, xq, e, sums, y):
    """Rows r0..r1 - 1 of the stacked W: the rows of each part among them through that part's kernel span (six[p]:
    Q6_K, else Q4_K), four streams at a time as for one matrix (kquant.py's _QUARTERS)."""
    for p in range(len(offsets) - 1):
        lo, hi = max(r0, offsets[p]), min(r1, offsets[p + 1])
        if lo < hi:
            if six[p]:
                _q6k_span(lo - offsets[p], hi - offsets[p], parts[p], xq, e, sums, y, offsets[p])
            else:
                _q45k_span(lo - offsets[p], hi - offsets[p], parts[p], xq, e, sums, False, y, offsets[p])


def _kstack_rows_serial(bounds, parts, offsets, six, x, y):
    xq, e, sums = _x_codes(x, np.int8)
    for t in range(bounds.shape[0] - 1):
        _stack_span(bounds[t], bounds[t + 1], parts, offsets, six, xq, e, sums, y)


def _kstack_rows_threaded(bounds, parts, offsets, six, x, y):
    xq, e, sums = _x_codes(x, np.int8)
    for t in prange(bounds.shape[0] - 1):
        _stack_span(bounds[t], bounds[t + 1], parts, offsets, six, xq, e, sums, y)


_KSTACK = (kernel(_kstack_rows_serial), parallel_kernel(_kstack_rows_threaded))


def one_launch(w):
    """Is a StackedBlocks multiplied in one launch? Where every part is Q4_K or Q6_K on the byte kernels
    (jit.BYTE_PRODUCTS), contiguous: both kinds take x rounded to the same Q8_K blocks, so x is rounded once
    for all the parts and the threads split all of W's rows together, where part by part x was rounded once a
    part and each part (v's 256 rows at Llama-124M's size, say) was a launch and a split of its own. Each row
    is the same intrinsic on the same codes, so y is bit for bit the part-by-part product."""
    return jit.BYTE_PRODUCTS and all(getattr(p, "kind", None) in _STACK_KINDS and p.blocks.flags.c_contiguous
                                     for p in w.parts)


_STACKS = {}             # id(StackedBlocks) -> (a weak reference to it, its kernel arguments)


def _stack_arguments(w):
    """The parts' blocks as read-only views (a file's parts can be some read-only, some not, and numba indexes a
    tuple by a runtime number only where its arrays are of one type), the offsets and each part's kind code;
    made once per StackedBlocks (weakly kept)."""
    got = _STACKS.get(id(w))
    if got is not None and got[0]() is w:
        return got[1]
    views = []
    for p in w.parts:
        v = p.blocks.view()
        v.flags.writeable = False
        views.append(v)
    args = (tuple(views), np.asarray(w.offsets, np.int64), np.array([_STACK_KINDS[p.kind] for p in w.parts], np.int64))
    if len(_STACKS) >= 4096:
        _STACKS.clear()
    _STACKS[id(w)] = (weakref.ref(w), args)
    return args


def _stacked_kquant(x, w, threads):
    """y = x @ W^T for a StackedBlocks that ``one_launch`` takes, fewer than SLAB_FROM rows of x (float32 C)."""
    y = np.empty((x.shape[0], w.shape[0]), np.float32)
    run_rows(_KSTACK, threads, w.shape[0], *_stack_arguments(w), x, y)
    return y


def integer_product(x, w, threads):
    """y = x @ W^T by the integer kernels (x rounded to 8-bit blocks), for fewer than SLAB_FROM rows of x, with
    every check already made: x float32 C-contiguous (N, K), W blocks of a kind that has an integer kernel here or
    in kquant.py (or stacked parts of such kinds), contiguous, with float32 scales; threads: blas.thread_cap().
    quantized_matmul ends here after its checks; the fused decode block (engine/fast/decode.py), which checks
    a layer's weights once and not at every step, calls it directly."""
    kind = w.kind
    if kind == "stacked":
        if one_launch(w):
            return _stacked_kquant(x, w, threads)
        y = np.empty((x.shape[0], w.shape[0]), np.float32)
        for part, r0, r1 in zip(w.parts, w.offsets[:-1], w.offsets[1:]):
            y[:, r0:r1] = integer_product(x, part, threads)
        return y
    if kind in ("q4_K", "q5_K", "q6_K"):
        return kquant_product(x, w, threads)
    (N, K), R = x.shape, w.shape[0]
    y = np.empty((N, R), np.float32)
    if kind == "q4_0" and jit.BYTE_PRODUCTS:
        pick = _Q4_PAIRS if (K // BLOCK) % 2 == 0 else _Q4_BYTES     # blocks two at a time, else one
    else:
        pick = _INT8[kind]
    run_rows(pick, threads, R, w.codes, w.scales, x, y)
    return y


def _stacked_matmul(x, w):
    """y = x @ W^T for a StackedBlocks W: each part (rows offsets[i]:offsets[i + 1] of W) through its own kind's
    kernel into its columns of y; NotImplemented when one part has no kernel here (the reference then runs).
    A decode step's few rows of x and Q4_K / Q6_K parts: all parts in one launch (``one_launch``)."""
    if (type(x) is np.ndarray and x.dtype == _F32 and x.flags.c_contiguous and x.ndim == 2 and x.shape[1] == w.shape[1]
            and x.shape[0] < min(qgemm.ROWS_FROM, SLAB_FROM) and not block_products_exact() and one_launch(w)):
        return _stacked_kquant(x, w, thread_cap())
    y = np.empty((x.shape[0], w.shape[0]), np.float32)
    for part, r0, r1 in zip(w.parts, w.offsets[:-1], w.offsets[1:]):
        got = quantized_matmul(x, part)
        if got is NotImplemented:
            return NotImplemented
        y[:, r0:r1] = got
    return y


KERNELS = {"quantized_matmul": quantized_matmul}
