"""Many rows of x times a quantized W, on the blocks as stored: an integer GEMM for a prompt's prefill.

y = x @ W^T for N rows of x (ROWS_FROM or more: engine/fast/quant.py and kquant.py send them here in inference), W
as Q8_0 / Q4_0 blocks or Q4_K / Q5_K / Q6_K super-blocks. The callers round the rows of x to 8-bit blocks once, with
the decode kernels' own ``_quantize_rows`` (and hand over a Q4_K / Q5_K matrix's scales and mins, unpacked at its
first prefill and kept: ``_many_rows`` in quant.py and kquant.py; this module imports neither); then the products
are integer products, as in the decode kernels, but register-blocked: a tile step takes NX = 4 rows of x and one row
of W, loads and unpacks each block of W ONCE and multiplies it by the four rows of x, each product summed into its
own vector of eight float32 lanes (one horizontal sum an output, at the end). A slab of rows of W, cut along K into
chunks of about CHUNK numbers (SLAB_BYTES a chunk: it stays in L1), is walked by every group of four rows of x
before the next, so W is read from memory once a call and x comes from the caches; the chunks add into y. Rows of W
are split between threads as in the decode kernels.

Why not BLAS on decoded slabs (quant.py's ``_by_slabs``, which the float path still takes): decoding costs a pass
over W in float32, and sgemm's FMAs, 8 numbers each, run on two of the core's four vector pipes, where AVX2's
integer products (vpmaddubsw: 32 bytes) and the adds, shifts and conversions around them spread over all four.
The compiled inner loops (``inspect_asm``), in instructions per 32 weights and row of x: Q4_0 6.0 (4.9 of them
vector), Q4_K 5.9 and Q5_K 6.9 (their mins' term included), Q8_0 7.6, Q6_K 7.6 (its -32 included), against
sgemm's 4 FMAs and their broadcasts; measured, about 1.2-1.5x sgemm's speed on a 64 x 768 @ 3072 x 768 product
(benchmarks/qgemm.py; docs/gguf.md). W is read in its own 4.5 to 8.5 bits a number.

Per kind (x86 with AVX2 only, ``jit.BYTE_PRODUCTS``, and Q8_0 / Q4_0 with an even number of blocks a row;
elsewhere the callers keep the BLAS slabs):

- Q4_0: blocks two at a time in the decode kernel's pair layout (quant.py's ``_pair_layout``): one load, an and and
  a shift give the 64 nibbles of two blocks; per row of x two vpmaddubsw, one 16-bit add, a vpmaddwd by ones,
  the weights' -8 off as x's lane sums, then one float multiply-add by the two blocks' scales.
- Q8_0: the same pair layout; vpmaddubsw takes one side unsigned, so |w| (once a row of W) against x with w's
  sign (vpsignb, per row of x), as llama.cpp's AVX2 kernels do; a vpmaddwd by ones for each of the two halves.
- Q4_K: a super-block's eight sub-blocks of 32, vpmaddubsw by x's bytes and vpmaddwd by the sub-block's six-bit
  scale (int16, broadcast from the unpacked copy) into int32 lanes, one float multiply-add by d e a super-block;
  the mins' term in the same step: dmin m (eight float lanes, once a row of W) times x's e times its sums of 32
  (eight float lanes, once a call), one more multiply-add per row of x. (It was a separate BLAS GEMM, K / 32 long,
  and the scales were unpacked at every call.)
- Q5_K: Q4_K's step with each code's fifth bit taken from the super-block's 32 qh bytes (an and and a shift for
  each sub-block, once a row of W); codes 0..31, so a vpmaddubsw pair is <= 2 * 31 * 127, no saturation.
- Q6_K: the six-bit codes (0..63) built in registers from ql and qh, vpmaddwd by the int8 scales of two groups
  of 16 (read from the super-block, sign-extended once a row of W); the -32 of every code comes off in int32 in
  the same step, the 16 scales times x's 16 sums of 16.

The integer sums are those of the decode kernels (the same codes of x, the same integer products), so each
output differs from theirs only in the order of the float sums over the blocks: tests/test_fast_qgemm.py checks
it row by row, and against the NumPy reference within INT8_TOLERANCE.
"""

import numpy as np
from llvmlite import ir
from numba import prange, types
from numba.core import cgutils
from numba.extending import intrinsic

from zerollm.engine.fast import jit
from zerollm.engine.fast.blas import run_rows, thread_cap
from zerollm.engine.fast.jit import avx2_call, kernel, parallel_kernel

ROWS_FROM = 8             # rows of x from which quant.py / kquant.py come here: measured faster than the decode
#                           kernels from 8 rows for every kind, 4 for all but Q6_K (benchmarks/qgemm.py --rows 4 8 16)
NX = 4                    # rows of x in one tile step (6 and 8 measured no faster: registers run out)
SLAB_BYTES = 16384        # bytes of W in a slab's chunk: with x's rows it stays in a 32 KiB L1
CHUNK = 1024              # numbers of K in a chunk (a K of 3072, GPT-2's MLP down matrix, goes in three)
BLOCK, QK, LANES = 32, 256, 8

# ----------------------------------------------------------------------------
# LLVM helpers: pointers to rows of C-contiguous 2-D arrays, vector loads, splats


def _row(context, builder, aty, ary, row):
    """A pointer to element [row, 0] of a C-contiguous 2-D array."""
    a = context.make_array(aty)(context, builder, value=ary)
    cols = cgutils.unpack_tuple(builder, a.shape)[1]
    return builder.gep(a.data, [builder.mul(row, cols)])


def _load(builder, ptr, at, vtype):
    """A vector of type vtype from ptr + at elements (unaligned)."""
    return builder.load(builder.bitcast(builder.gep(ptr, [at]), vtype.as_pointer()), align=1)


def _splat(builder, scalar, n):
    vec = ir.VectorType(scalar.type, n)
    v = builder.insert_element(ir.Constant(vec, ir.Undefined), scalar, ir.Constant(ir.IntType(32), 0))
    return builder.shuffle_vector(v, v, ir.Constant(ir.VectorType(ir.IntType(32), n), [0] * n))


def _hsum_add(builder, acc, out_ptr, first):
    """*out_ptr = (0 if first else *out_ptr) + the sum of acc's 8 lanes (y is not cleared first: a memset of N R
    floats a call, a few per cent of a prefill)."""
    i32 = ir.IntType(32)
    total = builder.extract_element(acc, ir.Constant(i32, 0))
    for lane in range(1, LANES):
        total = builder.fadd(total, builder.extract_element(acc, ir.Constant(i32, lane)))
    before = builder.select(first, ir.Constant(ir.FloatType(), 0.0), builder.load(out_ptr))
    builder.store(builder.fadd(before, total), out_ptr)


def _tile_frame(context, builder, sig, args, body):
    """The common frame of a tile step: args end with (y, r, n, last, start, stop); NX float accumulators of 8
    lanes, ``body(k, r, rows_x, accs)`` for k in start..stop - 1 (steps of K: a pair of blocks, a block or a
    super-block) adding into them, then y[n + i, r] += sum(acc_i) for the rows n + i <= last (= for the first
    chunk, start 0). ``rows_x`` are the
    NX row indices of x, none past ``last`` (a tail computes the last row again, and does not add it twice)."""
    f32, i64 = ir.FloatType(), ir.IntType(64)
    vf = ir.VectorType(f32, LANES)
    y_ty, y = sig.args[-6], args[-6]
    r, n, last, start, stop = args[-5:]
    rows_x, inside = [], []
    for i in range(NX):
        k = builder.add(n, ir.Constant(i64, i))
        inside.append(builder.icmp_signed("<=", k, last))
        rows_x.append(builder.select(inside[-1], k, last))
    accs = []
    for _ in range(NX):
        p = cgutils.alloca_once(builder, vf)
        builder.store(ir.Constant(vf, [0.0] * LANES), p)
        accs.append(p)
    with cgutils.for_range(builder, stop, start=start) as loop:
        body(loop.index, r, rows_x, accs)
    first = builder.icmp_signed("==", start, ir.Constant(i64, 0))
    for i in range(NX):
        with builder.if_then(inside[i], likely=True):
            out = builder.gep(_row(context, builder, y_ty, y, rows_x[i]), [r])
            _hsum_add(builder, builder.load(accs[i]), out, first)


def _fma_into(builder, acc_ptr, sums, scale):
    """acc += float(sums) * scale (8 lanes)."""
    vf = ir.VectorType(ir.FloatType(), LANES)
    acc = builder.load(acc_ptr)
    prod = builder.fmul(builder.sitofp(sums, vf), scale, flags=["contract"])
    builder.store(builder.fadd(acc, prod, flags=["contract"]), acc_ptr)


_TILE_ARGS = (types.int64,) * 5          # r, n, last, start, stop


# ----------------------------------------------------------------------------
# Q4_0: two blocks a step, x in the pair layout (quant._pair_layout)

def _q4_0_codegen(context, builder, sig, args):
    codes_ty, d_ty, x_ty, e_ty, l_ty = sig.args[:5]
    codes, d, xp, e, lanes = args[:5]
    i8, i16, i32, i64, f32 = ir.IntType(8), ir.IntType(16), ir.IntType(32), ir.IntType(64), ir.FloatType()
    v32, v2f, vf = ir.VectorType(i8, 32), ir.VectorType(f32, 2), ir.VectorType(f32, LANES)
    spread = ir.Constant(ir.VectorType(i32, LANES), [0] * 4 + [1] * 4)
    ones = ir.Constant(ir.VectorType(i16, 16), [1] * 16)

    def body(p, r, rows_x, accs):
        w = _load(builder, _row(context, builder, codes_ty, codes, r), builder.mul(p, ir.Constant(i64, BLOCK)), v32)
        low = builder.and_(w, ir.Constant(v32, [15] * 32))
        high = builder.lshr(w, ir.Constant(v32, [4] * 32))
        dv = _load(builder, _row(context, builder, d_ty, d, r), builder.mul(p, ir.Constant(i64, 2)), v2f)
        dv = builder.shuffle_vector(dv, dv, spread)
        for i, n in enumerate(rows_x):
            xrow = _row(context, builder, x_ty, xp, n)
            at = builder.mul(p, ir.Constant(i64, 2 * BLOCK))
            x_low = _load(builder, xrow, at, v32)
            x_high = _load(builder, xrow, builder.add(at, ir.Constant(i64, BLOCK)), v32)
            pairs = builder.add(avx2_call(builder, "pmadd.ub.sw", [low, x_low]),
                                avx2_call(builder, "pmadd.ub.sw", [high, x_high]))
            sums = avx2_call(builder, "pmadd.wd", [pairs, ones])
            lane_sums = _load(builder, _row(context, builder, l_ty, lanes, n), builder.mul(p, ir.Constant(i64, LANES)),
                              ir.VectorType(i32, LANES))
            ev = _load(builder, _row(context, builder, e_ty, e, n), builder.mul(p, ir.Constant(i64, LANES)), vf)
            _fma_into(builder, accs[i], builder.sub(sums, lane_sums), builder.fmul(dv, ev))

    _tile_frame(context, builder, sig, args, body)
    return context.get_dummy_value()


@intrinsic
def _q4_0_tile(typingctx, codes, d, xp, e, lanes, y, r, n, last, start, stop):
    """y[n_i, r] for the NX rows n_i of x and row r of a Q4_0 W (nb blocks, even); e (N, 4 nb) holds x's scales
    as the accumulator's lanes take them (``_pair_scales``)."""
    return types.void(codes, d, xp, e, lanes, y, *_TILE_ARGS), _q4_0_codegen


# ----------------------------------------------------------------------------
# Q8_0: two blocks a step, x in the same pair layout as Q4_0's

def _sign(builder, x, w):
    """AVX2's vpsignb: x where w > 0, -x where w < 0, 0 where w = 0 (32 bytes)."""
    v32 = ir.VectorType(ir.IntType(8), 32)
    fn = cgutils.get_or_insert_function(builder.module, ir.FunctionType(v32, [v32, v32]), "llvm.x86.avx2.psign.b")
    return builder.call(fn, [x, w])


def _q8_0_codegen(context, builder, sig, args):
    """vpmaddubsw takes one side unsigned: |w| against x with w's sign (vpsignb), the trick of llama.cpp's AVX2
    kernels (|w| <= 128, so a pair of products is <= 2 * 128 * 127: no saturation). The two blocks' 64 codes are
    regrouped once a row of W (two vperm2i128) into the halves of the pair layout: positions 0..15 of both blocks,
    then 16..31 of both, so that lanes 0..3 of the sums are block 2p's and 4..7 block 2p + 1's."""
    codes_ty, d_ty, x_ty, e_ty = sig.args[:4]
    codes, d, xp, e = args[:4]
    i8, i16, i32, i64, f32 = ir.IntType(8), ir.IntType(16), ir.IntType(32), ir.IntType(64), ir.FloatType()
    v32, v2f, vf = ir.VectorType(i8, 32), ir.VectorType(f32, 2), ir.VectorType(f32, LANES)
    spread = ir.Constant(ir.VectorType(i32, LANES), [0] * 4 + [1] * 4)
    ones = ir.Constant(ir.VectorType(i16, 16), [1] * 16)

    def halves(a, b, first):
        return builder.shuffle_vector(a, b, ir.Constant(ir.VectorType(i32, 32), [first + i for i in range(16)]
                                                        + [32 + first + i for i in range(16)]))

    def body(p, r, rows_x, accs):
        wrow = _row(context, builder, codes_ty, codes, r)
        at = builder.mul(p, ir.Constant(i64, 2 * BLOCK))
        wa, wb = _load(builder, wrow, at, v32), _load(builder, wrow, builder.add(at, ir.Constant(i64, BLOCK)), v32)
        w_low, w_high = halves(wa, wb, 0), halves(wa, wb, 16)
        abs_low, abs_high = (builder.select(builder.icmp_signed("<", v, ir.Constant(v32, [0] * 32)), builder.neg(v), v)
                             for v in (w_low, w_high))
        dv = _load(builder, _row(context, builder, d_ty, d, r), builder.mul(p, ir.Constant(i64, 2)), v2f)
        dv = builder.shuffle_vector(dv, dv, spread)
        for i, n in enumerate(rows_x):
            xrow = _row(context, builder, x_ty, xp, n)
            x_low = _load(builder, xrow, at, v32)
            x_high = _load(builder, xrow, builder.add(at, ir.Constant(i64, BLOCK)), v32)
            low = avx2_call(builder, "pmadd.ub.sw", [abs_low, _sign(builder, x_low, w_low)])
            high = avx2_call(builder, "pmadd.ub.sw", [abs_high, _sign(builder, x_high, w_high)])
            sums = builder.add(avx2_call(builder, "pmadd.wd", [low, ones]),
                               avx2_call(builder, "pmadd.wd", [high, ones]))
            ev = _load(builder, _row(context, builder, e_ty, e, n), builder.mul(p, ir.Constant(i64, LANES)), vf)
            _fma_into(builder, accs[i], sums, builder.fmul(dv, ev))

    _tile_frame(context, builder, sig, args, body)
    return context.get_dummy_value()


@intrinsic
def _q8_0_tile(typingctx, codes, d, xp, e, y, r, n, last, start, stop):
    """y[n_i, r] for the NX rows n_i of x (int8 codes in the pair layout, scales as Q4_0's) and row r of a Q8_0 W
    (an even number of blocks)."""
    return types.void(codes, d, xp, e, y, *_TILE_ARGS), _q8_0_codegen


# ----------------------------------------------------------------------------
# Q4_K / Q5_K: one super-block a step; W's six-bit scales and mins unpacked once a matrix (kquant._k_scales)

def _half(builder, ptr):
    """The float16 at ptr (a byte pointer) as float32: LLVM's fpext, vcvtph2ps on F16C."""
    return builder.fpext(builder.load(builder.bitcast(ptr, ir.HalfType().as_pointer()), align=1), ir.FloatType())


def fifth_bit(builder, qh, j):
    """Bit j of each of Q5_K's 32 qh bytes moved to bit 4 (the code's fifth bit, 0 or 16): an and, a shift."""
    v32 = qh.type
    bit = builder.and_(qh, ir.Constant(v32, [1 << j] * 32))
    if j < 4:
        return builder.shl(bit, ir.Constant(v32, [4 - j] * 32))
    return builder.lshr(bit, ir.Constant(v32, [j - 4] * 32)) if j > 4 else bit


def _q45_k_codegen(fifth):
    width, codes_at = (176, 48) if fifth else (144, 16)

    def codegen(context, builder, sig, args):
        blocks_ty, sc_ty, m_ty, x_ty, e_ty, xs_ty = sig.args[:6]
        blocks, sc, mb, xq, e, xs = args[:6]
        i8, i32, i64, f32 = ir.IntType(8), ir.IntType(32), ir.IntType(64), ir.FloatType()
        v32, l8, vf = ir.VectorType(i8, 32), ir.VectorType(i32, LANES), ir.VectorType(f32, LANES)
        zero = ir.Constant(l8, [0] * LANES)

        def body(b, r, rows_x, accs):
            brow = _row(context, builder, blocks_ty, blocks, r)
            scrow = _row(context, builder, sc_ty, sc, r)
            base = builder.mul(b, ir.Constant(i64, width))
            at = lambda k: builder.gep(brow, [builder.add(base, ir.Constant(i64, k))])      # noqa: E731
            eight = builder.mul(b, ir.Constant(i64, 8))
            qh = _load(builder, brow, builder.add(base, ir.Constant(i64, 16)), v32) if fifth else None
            ints = [zero] * NX
            for g in range(4):
                w = _load(builder, brow, builder.add(base, ir.Constant(i64, codes_at + 32 * g)), v32)
                halves = [builder.and_(w, ir.Constant(v32, [15] * 32)), builder.lshr(w, ir.Constant(v32, [4] * 32))]
                if fifth:       # codes 0..31: a pair of products <= 2 * 31 * 127, no saturation
                    halves = [builder.or_(halves[h], fifth_bit(builder, qh, 2 * g + h)) for h in range(2)]
                for h in range(2):
                    j = builder.add(eight, ir.Constant(i64, 2 * g + h))
                    s = _splat(builder, builder.load(builder.gep(scrow, [j])), 16)
                    for i, n in enumerate(rows_x):
                        xat = builder.add(builder.mul(b, ir.Constant(i64, QK)), ir.Constant(i64, 64 * g + 32 * h))
                        x = _load(builder, _row(context, builder, x_ty, xq, n), xat, v32)
                        prod = avx2_call(builder, "pmadd.wd", [avx2_call(builder, "pmadd.ub.sw", [halves[h], x]), s])
                        ints[i] = builder.add(ints[i], prod)
            # the mins' term: dmin m_j (eight float lanes, once a row of W) times x's e times its sums of 32
            mins = builder.uitofp(_load(builder, _row(context, builder, m_ty, mb, r), eight, ir.VectorType(i8, 8)), vf)
            mins = builder.fmul(mins, _splat(builder, _half(builder, at(2)), LANES))
            d = _half(builder, at(0))
            nine = builder.mul(b, ir.Constant(i64, 9))
            for i, n in enumerate(rows_x):
                exrow = _row(context, builder, xs_ty, xs, n)     # x's scale of the super-block, then its 8 e sums
                eb = builder.load(builder.gep(exrow, [nine]))
                _fma_into(builder, accs[i], ints[i], _splat(builder, builder.fmul(d, eb), LANES))
                xsv = _load(builder, exrow, builder.add(nine, ir.Constant(i64, 1)), vf)
                acc = builder.load(accs[i])
                builder.store(builder.fsub(acc, builder.fmul(mins, xsv, flags=["contract"]), flags=["contract"]),
                              accs[i])

        _tile_frame(context, builder, sig, args, body)
        return context.get_dummy_value()
    return codegen


@intrinsic
def _q4_k_tile(typingctx, blocks, sc, mb, xq, e, xs, y, r, n, last, start, stop):
    """sum over super-blocks of e (d sum_j sc_j sum_l q_l x_l - dmin sum_j m_j sum_l x_l) for the NX rows of x and
    row r of a Q4_K W (blocks (R, nb * 144) uint8; sc (R, nb * 8) int16 its six-bit scales and mb (R, nb * 8) uint8
    its mins, kquant._k_scales); x's codes xq (N, K) int8, and xs (N, nb * 9) float32: for each super-block x's
    scale e, then e times x's eight sums of 32 codes (_scaled_sums). e (N, nb), x's scales again, only sizes the
    loops: reading e from xs keeps one pointer a row of x, so the step's pointers stay in registers (a separate e
    and xs spilled them: 211 instructions a step against 189)."""
    return types.void(blocks, sc, mb, xq, e, xs, y, *_TILE_ARGS), _q45_k_codegen(False)


@intrinsic
def _q5_k_tile(typingctx, blocks, sc, mb, xq, e, xs, y, r, n, last, start, stop):
    """As _q4_k_tile for Q5_K (blocks (R, nb * 176): the fifth bits at bytes 16..47, the nibbles from 48)."""
    return types.void(blocks, sc, mb, xq, e, xs, y, *_TILE_ARGS), _q45_k_codegen(True)


# ----------------------------------------------------------------------------
# Q6_K: one super-block a step; its int8 scales and d read from the super-block itself

def q6_codes(builder, ql0, ql1, qh):
    """A half super-block's four registers of 32 six-bit Q6_K codes (0..63: positions l, l + 32, l + 64, l + 96)
    from its two 32-byte ql loads (low nibbles, then high) and its 32 bytes of qh (two bits each). Shared by
    kquant.py's row intrinsic and the tile step here."""
    v32 = ql0.type

    def byte_splat(v):
        return ir.Constant(v32, [v] * 32)

    out = []
    for k, (ql, high) in enumerate(((ql0, False), (ql1, False), (ql0, True), (ql1, True))):
        nibble = builder.lshr(ql, byte_splat(4)) if high else builder.and_(ql, byte_splat(15))
        two = builder.and_(builder.lshr(qh, byte_splat(2 * k)), byte_splat(3))
        out.append(builder.or_(nibble, builder.shl(two, byte_splat(4))))
    return out


def q6_scales(builder, sc8):
    """The 16 int8 scales of a Q6_K super-block -> (sc16, pick): sc16 the 16 as int16 lanes, and pick(i) the 16
    int16 lanes [sc_i] * 8 + [sc_(i+1)] * 8 that vpmaddwd needs for the register of codes with groups i, i + 1.
    The eight scales of a half are put in both 128-bit halves of a register once (one vpermq), so a pick is one
    in-lane vpshufb, where LLVM had made each pick of a sign extension and a shuffle of its own."""
    i16, i32 = ir.IntType(16), ir.IntType(32)
    sc16 = builder.sext(sc8, ir.VectorType(i16, 16))
    both = [builder.shuffle_vector(sc16, sc16, ir.Constant(ir.VectorType(i32, 16), list(range(8 * h, 8 * h + 8)) * 2))
            for h in range(2)]

    def pick(i):
        half, j = divmod(i, 8)
        return builder.shuffle_vector(both[half], both[half],
                                      ir.Constant(ir.VectorType(i32, 16), [j] * 8 + [8 + j + 1] * 8))
    return sc16, pick

def _q6_k_codegen(context, builder, sig, args):
    """The -32 of every code comes off in int32 inside the step: the 16 scales times x's 16 sums of 16 codes (one
    vpmaddwd), times 32, from the same lanes (exact; per lane <= 8 * 2 * 16002 * 128 + 32 * 2 * 128 * 2032)."""
    blocks_ty, x_ty, e_ty, s_ty = sig.args[:4]
    blocks, xq, e, s16 = args[:4]
    i8, i16, i32, i64 = ir.IntType(8), ir.IntType(16), ir.IntType(32), ir.IntType(64)
    v32, l8 = ir.VectorType(i8, 32), ir.VectorType(i32, LANES)
    zero = ir.Constant(l8, [0] * LANES)

    def body(b, r, rows_x, accs):
        brow = _row(context, builder, blocks_ty, blocks, r)
        base = builder.mul(b, ir.Constant(i64, 210))
        at = lambda k: builder.add(base, ir.Constant(i64, k))   # noqa: E731
        sc16, pick = q6_scales(builder, _load(builder, brow, at(192), ir.VectorType(i8, 16)))
        ints = [zero] * NX
        for half in range(2):
            ql0, ql1 = _load(builder, brow, at(64 * half), v32), _load(builder, brow, at(64 * half + 32), v32)
            qh = _load(builder, brow, at(128 + 32 * half), v32)
            for k, codes in enumerate(q6_codes(builder, ql0, ql1, qh)):
                sv = pick(8 * half + 2 * k)                  # the scales of its two groups of 16
                for t, n in enumerate(rows_x):
                    xat = builder.add(builder.mul(b, ir.Constant(i64, QK)), ir.Constant(i64, 128 * half + 32 * k))
                    x = _load(builder, _row(context, builder, x_ty, xq, n), xat, v32)
                    prod = avx2_call(builder, "pmadd.wd", [avx2_call(builder, "pmadd.ub.sw", [codes, x]), sv])
                    ints[t] = builder.add(ints[t], prod)
        d = _half(builder, builder.gep(brow, [at(208)]))
        for t, n in enumerate(rows_x):
            # x's 16 sums of 16 codes as int16 (|sum| <= 2032) by the 16 scales: one vpmaddwd gives 8 lanes of
            # two products each; 32 times that off the lanes (any lane split of the super-block's sum is exact)
            sums = _load(builder, _row(context, builder, s_ty, s16, n), builder.mul(b, ir.Constant(i64, 16)),
                         ir.VectorType(i16, 16))
            shifted = avx2_call(builder, "pmadd.wd", [sc16, sums])
            total = builder.sub(ints[t], builder.shl(shifted, ir.Constant(l8, [5] * LANES)))
            eb = builder.load(builder.gep(_row(context, builder, e_ty, e, n), [b]))
            _fma_into(builder, accs[t], total, _splat(builder, builder.fmul(d, eb), LANES))

    _tile_frame(context, builder, sig, args, body)
    return context.get_dummy_value()


@intrinsic
def _q6_k_tile(typingctx, blocks, xq, e, s16, y, r, n, last, start, stop):
    """sum over super-blocks of d e sum_i sc_i sum_l (q_l - 32) x_l for the NX rows of x and row r of a Q6_K W
    (blocks (R, nb * 210) uint8, scales and d read from them); x's sums of 16 codes s16 (N, K / 16) int16."""
    return types.void(blocks, xq, e, s16, y, *_TILE_ARGS), _q6_k_codegen


# ----------------------------------------------------------------------------
# the tile loops: slabs of `tile` rows of W by chunks of K, every group of NX rows of x over each; rows of W by thread

def _q4_0_serial(bounds, codes, d, xq, e, lanes, y, tile, chunk):
    N, steps = xq.shape[0], d.shape[1] // 2
    for t in range(bounds.shape[0] - 1):
        for r0 in range(bounds[t], bounds[t + 1], tile):
            r1 = min(r0 + tile, bounds[t + 1])
            for k0 in range(0, steps, chunk):
                for n in range(0, N, NX):
                    for r in range(r0, r1):
                        _q4_0_tile(codes, d, xq, e, lanes, y, r, n, N - 1, k0, min(k0 + chunk, steps))


def _q4_0_threaded(bounds, codes, d, xq, e, lanes, y, tile, chunk):
    N, steps = xq.shape[0], d.shape[1] // 2
    for t in prange(bounds.shape[0] - 1):
        for r0 in range(bounds[t], bounds[t + 1], tile):
            r1 = min(r0 + tile, bounds[t + 1])
            for k0 in range(0, steps, chunk):
                for n in range(0, N, NX):
                    for r in range(r0, r1):
                        _q4_0_tile(codes, d, xq, e, lanes, y, r, n, N - 1, k0, min(k0 + chunk, steps))


def _q8_0_serial(bounds, codes, d, xq, e, y, tile, chunk):
    N, steps = xq.shape[0], d.shape[1] // 2
    for t in range(bounds.shape[0] - 1):
        for r0 in range(bounds[t], bounds[t + 1], tile):
            r1 = min(r0 + tile, bounds[t + 1])
            for k0 in range(0, steps, chunk):
                for n in range(0, N, NX):
                    for r in range(r0, r1):
                        _q8_0_tile(codes, d, xq, e, y, r, n, N - 1, k0, min(k0 + chunk, steps))


def _q8_0_threaded(bounds, codes, d, xq, e, y, tile, chunk):
    N, steps = xq.shape[0], d.shape[1] // 2
    for t in prange(bounds.shape[0] - 1):
        for r0 in range(bounds[t], bounds[t + 1], tile):
            r1 = min(r0 + tile, bounds[t + 1])
            for k0 in range(0, steps, chunk):
                for n in range(0, N, NX):
                    for r in range(r0, r1):
                        _q8_0_tile(codes, d, xq, e, y, r, n, N - 1, k0, min(k0 + chunk, steps))


def _q4_k_serial(bounds, blocks, sc, mb, xq, e, xs, y, tile, chunk):
    N, steps = xq.shape[0], e.shape[1]
    for t in range(bounds.shape[0] - 1):
        for r0 in range(bounds[t], bounds[t + 1], tile):
            r1 = min(r0 + tile, bounds[t + 1])
            for k0 in range(0, steps, chunk):
                for n in range(0, N, NX):
                    for r in range(r0, r1):
                        _q4_k_tile(blocks, sc, mb, xq, e, xs, y, r, n, N - 1, k0, min(k0 + chunk, steps))


def _q4_k_threaded(bounds, blocks, sc, mb, xq, e, xs, y, tile, chunk):
    N, steps = xq.shape[0], e.shape[1]
    for t in prange(bounds.shape[0] - 1):
        for r0 in range(bounds[t], bounds[t + 1], tile):
            r1 = min(r0 + tile, bounds[t + 1])
            for k0 in range(0, steps, chunk):
                for n in range(0, N, NX):
                    for r in range(r0, r1):
                        _q4_k_tile(blocks, sc, mb, xq, e, xs, y, r, n, N - 1, k0, min(k0 + chunk, steps))


def _q5_k_serial(bounds, blocks, sc, mb, xq, e, xs, y, tile, chunk):
    N, steps = xq.shape[0], e.shape[1]
    for t in range(bounds.shape[0] - 1):
        for r0 in range(bounds[t], bounds[t + 1], tile):
            r1 = min(r0 + tile, bounds[t + 1])
            for k0 in range(0, steps, chunk):
                for n in range(0, N, NX):
                    for r in range(r0, r1):
                        _q5_k_tile(blocks, sc, mb, xq, e, xs, y, r, n, N - 1, k0, min(k0 + chunk, steps))


def _q5_k_threaded(bounds, blocks, sc, mb, xq, e, xs, y, tile, chunk):
    N, steps = xq.shape[0], e.shape[1]
    for t in prange(bounds.shape[0] - 1):
        for r0 in range(bounds[t], bounds[t + 1], tile):
            r1 = min(r0 + tile, bounds[t + 1])
            for k0 in range(0, steps, chunk):
                for n in range(0, N, NX):
                    for r in range(r0, r1):
                        _q5_k_tile(blocks, sc, mb, xq, e, xs, y, r, n, N - 1, k0, min(k0 + chunk, steps))


def _q6_k_serial(bounds, blocks, xq, e, s16, y, tile, chunk):
    N, steps = xq.shape[0], e.shape[1]
    for t in range(bounds.shape[0] - 1):
        for r0 in range(bounds[t], bounds[t + 1], tile):
            r1 = min(r0 + tile, bounds[t + 1])
            for k0 in range(0, steps, chunk):
                for n in range(0, N, NX):
                    for r in range(r0, r1):
                        _q6_k_tile(blocks, xq, e, s16, y, r, n, N - 1, k0, min(k0 + chunk, steps))


def _q6_k_threaded(bounds, blocks, xq, e, s16, y, tile, chunk):
    N, steps = xq.shape[0], e.shape[1]
    for t in prange(bounds.shape[0] - 1):
        for r0 in range(bounds[t], bounds[t + 1], tile):
            r1 = min(r0 + tile, bounds[t + 1])
            for k0 in range(0, steps, chunk):
                for n in range(0, N, NX):
                    for r in range(r0, r1):
                        _q6_k_tile(blocks, xq, e, s16, y, r, n, N - 1, k0, min(k0 + chunk, steps))


_LOOPS = {"q4_0": (kernel(_q4_0_serial), parallel_kernel(_q4_0_threaded)),
          "q8_0": (kernel(_q8_0_serial), parallel_kernel(_q8_0_threaded)),
          "q4_K": (kernel(_q4_k_serial), parallel_kernel(_q4_k_threaded)),
          "q5_K": (kernel(_q5_k_serial), parallel_kernel(_q5_k_threaded)),
          "q6_K": (kernel(_q6_k_serial), parallel_kernel(_q6_k_threaded))}


@kernel
def _scaled_sums(e, sums, out):
    """out (N, nb * 9): for each super-block of x its scale e, then e times its eight sums of 32 codes (sums: of
    16): x's side of the Q4_K / Q5_K tile step (the scale of its integer sums and the mins' term)."""
    N, nb = e.shape
    for n in range(N):
        for b in range(nb):
            out[n, 9 * b] = e[n, b]
            for j in range(8):
                g = 8 * b + j
                out[n, 9 * b + 1 + j] = e[n, b] * np.float32(sums[n, 2 * g] + sums[n, 2 * g + 1])


# ----------------------------------------------------------------------------
# the entry points: x already rounded to 8-bit blocks (and W's k-quant scales unpacked) by the caller,
# engine/fast/quant.py or kquant.py, with the decode kernels' own functions

def available(kind, K):
    """Is there an integer GEMM for this kind and width on this host?"""
    if not jit.BYTE_PRODUCTS:
        return False
    if kind in ("q4_0", "q8_0"):
        return K % (2 * BLOCK) == 0                     # blocks two at a time
    return kind in ("q4_K", "q5_K", "q6_K")


def _plan(K, step, step_bytes):
    """(tile, chunk): rows of W in a slab and steps of K in a chunk, so that a slab's chunk of W is about SLAB_BYTES
    (it stays in L1 while every group of NX rows of x passes over it) and a chunk about CHUNK numbers of K (a group
    of x's rows over a chunk, a few KiB, stays there too)."""
    chunk = max(1, min(K // step, CHUNK // step))
    return max(NX, SLAB_BYTES // (chunk * step_bytes)), chunk


def _run(kind, R, K, *args):
    """y (N, R) = the tile loops of ``kind`` over args (ending with y), rows of W split between threads."""
    step, step_bytes = {"q4_0": (2 * BLOCK, 36), "q8_0": (2 * BLOCK, 68), "q4_K": (QK, 144), "q5_K": (QK, 176),
                        "q6_K": (QK, 210)}[kind]
    run_rows(_LOOPS[kind], thread_cap(), R, *args, *_plan(K, step, step_bytes))
    return args[-1]


def q8_0(xp, e, codes, scales):
    """xp (N, K) int8 codes of x in the pair layout (quant._pair_layout) and e (N, K / 32) their scales, W as Q8_0
    codes (R, K) int8 and scales (R, K / 32) -> y (N, R)."""
    (N, K), R = xp.shape, codes.shape[0]
    e = np.repeat(e, 4, axis=1)                         # lanes 0..3 take block 2p's scale, 4..7 block 2p + 1's
    return _run("q8_0", R, K, codes, scales, xp, e, np.empty((N, R), np.float32))


def q4_0(xp, e, lanes, codes, scales):
    """xp (N, K) int8 codes of x in the pair layout and lanes (N, K / 8) their lane sums (quant._pair_layout), e
    (N, K / 32) x's scales, W as Q4_0 codes (R, K / 2) and scales (R, K / 32) -> y (N, R)."""
    (N, K), R = xp.shape, codes.shape[0]
    e = np.repeat(e, 4, axis=1)                         # lanes 0..3 take block 2p's scale, 4..7 block 2p + 1's
    return _run("q4_0", R, K, codes, scales, xp, e, lanes, np.empty((N, R), np.float32))


def q45_k(xq, e, sums, blocks, scales, fifth):
    """xq (N, K) int8, e (N, K / 256), sums (N, K / 16) of x in Q8_K blocks (kquant._x_codes); W as Q4_K (fifth
    False) or Q5_K blocks (R, K / 256 * 144 or 176) uint8 with its scales and mins unpacked (kquant._k_scales:
    (sc, m), each (R, K / 32), int16 and uint8) -> y (N, R). The mins' term is inside the tile step: dmin m times
    e times x's sums of 32, one multiply-add of eight float lanes a super-block and row of x."""
    # xs: e and the eight e sums of each super-block side by side (the tile reads both through one row pointer)
    (N, K), R = xq.shape, blocks.shape[0]
    xs = np.empty((N, K // 256 * 9), np.float32)
    _scaled_sums(e, sums, xs)
    return _run("q5_K" if fifth else "q4_K", R, K, blocks, *scales, xq, e, xs, np.empty((N, R), np.float32))


def q6_k(xq, e, sums, blocks):
    """As q45_k for Q6_K (blocks (R, K / 256 * 210) uint8; its scales are read from them) -> y (N, R)."""
    (N, K), R = xq.shape, blocks.shape[0]
    s16 = sums.astype(np.int16)                          # |a sum of 16 codes| <= 16 * 127: the tile's vpmaddwd
    return _run("q6_K", R, K, blocks, xq, e, s16, np.empty((N, R), np.float32))
