"""Our own small matrix products for the attention kernels: C = alpha A B (+ C), in AVX-512 registers.

Why: the attention kernels (engine/fast/flash.py, engine/fast/sdpa.py) multiply thousands of small
blocks, q (64..256 rows) by k^T with an inner size of hs = 64, weights by v with one of 32..256.
NumPy's OpenBLAS runs such products well below the speed of its large GEMMs: with an inner size of 64
every call packs both operands into its own layout and then multiplies each packed piece only 64
times. The products here pack nothing. A block of 6 rows by 64 columns of C lives in 24 vector
registers for the whole inner loop; each step loads 4 vectors of a row of B, broadcasts 6 numbers of
a column of A and does 24 fused multiply-adds. Blocks of 6 x 64, with one register per row of A
rather than a chain of additions, beat the first design's 8 x 32 on every attention shape measured,
and both beat OpenBLAS on these shapes on an AVX-512 host (the numbers:
docs/profiles/design-decisions.md#the-attention-micro-kernel-blocks-of-6-x-64).

How: the loop over the inner dimension is written in LLVM's IR (with llvmlite, like the float32 exp
bits in jit.py), because numba gives Python no vector type, and an accumulator that is a NumPy array
lives in memory, not in a register. ``_block(MR, NV)`` builds the loop for a block of MR rows and NV
vectors of 16 columns; ``sgemm`` tiles C with those blocks (6 x 64, then 4, 2, 1 rows; then 8 x 32 and
8 x 16, then 4, 2, 1 rows) and does the last N % 16 columns with scalar code.

Operands: A (M, K) is read at a[i * a_rows + k * a_cols] (a row-major A has a_cols = 1; a transposed
one a_rows = 1), B (K, N) row-major with row stride ldb, C (M, N) row-major with row stride ldc, all
float32 given by address (``x.ctypes.data``). beta is 0 (C is overwritten) or 1 (C += ...). The sums
over k run in order, one fused multiply-add per step, so the results agree with a BLAS to float
rounding (for the attention's shapes they came out identical to OpenBLAS's), not bit for bit in general.

Where: only on CPUs with AVX-512F (``available()``), the hosts where it beats OpenBLAS. Elsewhere (an AMD
EPYC without AVX-512, where OpenBLAS's kernels are the fast ones) the attention kernels keep calling
NumPy's BLAS. The code is correct on any x86-64 CPU (LLVM splits the 16-lane vectors), which is how
the tests check both ways on every host.
"""

import os

import numba
import numpy as np
from llvmlite import binding as llvm_binding
from llvmlite import ir
from numba import types
from numba.core import cgutils
from numba.extending import intrinsic

from zerollm.engine.fast import jit  # (importing it sets numba's CPU features before any compile)
from zerollm.engine.fast.jit import exp32
from zerollm.engine.fast.blas import NO_TRANS, ROW_MAJOR, TRANS

LANES = 16                     # float32 numbers in an AVX-512 register


PLAIN, EXP, DSOFTMAX = 0, 1, 2      # what a block does with its sums (the epilogue), see _block


def _vector_exp(builder, fma, x):
    """exp of the 16 float32 numbers of x, the same steps as jit.exp32 (Cephes' expf: clamp, 2^n exp(r)
    with a degree-6 polynomial for exp(r), ldexp), in LLVM's IR, so that a block's epilogue can take the
    exp of its sums while they are still in registers. NaN stays NaN."""
    f32, i32 = ir.FloatType(), ir.IntType(32)
    vec, ivec = ir.VectorType(f32, LANES), ir.VectorType(i32, LANES)

    def c(v):
        return ir.Constant(vec, [float(np.float32(v))] * LANES)

    def call(name, ty, args):
        fn = cgutils.get_or_insert_function(builder.module, ty, name)
        return builder.call(fn, args)
    binary = ir.FunctionType(vec, [vec, vec])
    xc = call("llvm.minnum.v16f32", binary, [call("llvm.maxnum.v16f32", binary, [x, c(jit._EXP_MIN)]),
                                             c(jit._EXP_MAX)])
    n = call("llvm.floor.v16f32", ir.FunctionType(vec, [vec]), [builder.call(fma, [xc, c(jit._LOG2E), c(jit._HALF)])])
    r = builder.call(fma, [n, c(-jit._LN2_HI), xc])
    r = builder.call(fma, [n, c(-jit._LN2_LO), r])
    p = c(jit._P0)
    for coef in (jit._P1, jit._P2, jit._P3, jit._P4, jit._P5):
        p = builder.call(fma, [p, r, c(coef)])
    p = builder.call(fma, [p, builder.fmul(r, r), builder.fadd(r, c(1.0))])
    y = call("llvm.ldexp.v16f32.v16i32", ir.FunctionType(vec, [vec, ivec]), [p, builder.fptosi(n, ivec)])
    return builder.select(builder.fcmp_unordered("uno", x, x), x, y)


def _block(MR, NV, epilogue=PLAIN):
    """An intrinsic block(a, a_rows, a_cols, b, ldb, c, ldc, K, alpha, accumulate, u, w) for the (MR, NV * 16)
    block of C at address c, K >= 1 steps over k; with S = alpha * A B, the block's epilogue writes
    - PLAIN: C = S, or C += S when accumulate (u and w unused);
    - EXP: C = exp(S - u[i]) for row i, u a float32 per row at address u; when w is not 0, the row's sum
      of these is added to the float32 w[i] (the online softmax's running sum);
    - DSOFTMAX: C = P (S - u[i]), P the (MR, NV * 16) block at address w with C's row stride (the
      softmax's backward: dS = P (dP - D))."""
    @intrinsic
    def block(typingctx, a, a_rows, a_cols, b, ldb, c, ldc, K, alpha, accumulate, u, w):
        sig = types.void(types.intp, types.intp, types.intp, types.intp, types.intp, types.intp, types.intp,
                         types.intp, types.float32, types.boolean, types.intp, types.intp)

        def codegen(context, builder, signature, args):
            a, a_rows, a_cols, b, ldb, c, ldc, K, alpha, accumulate, u, w = args
            f32, i32, i64 = ir.FloatType(), ir.IntType(32), ir.IntType(64)
            vec = ir.VectorType(f32, LANES)
            fma = cgutils.get_or_insert_function(builder.module, ir.FunctionType(vec, [vec, vec, vec]),
                                                 "llvm.fma.v%df32" % LANES)
            undef = ir.Constant(vec, ir.Undefined)
            lane0, broadcast = ir.Constant(i32, 0), ir.Constant(ir.VectorType(i32, LANES), [0] * LANES)

            def splat(x):
                return builder.shuffle_vector(builder.insert_element(undef, x, lane0), undef, broadcast)

            def const(n):
                return ir.Constant(i64, n)

            def vector_at(base, offset):
                return builder.bitcast(builder.gep(base, [offset]), vec.as_pointer())

            a_ptr, b_ptr, c_ptr = (builder.inttoptr(x, f32.as_pointer()) for x in (a, b, c))
            # each row's address through an empty asm: LLVM no longer sees that they are a + r a_rows, and
            # keeps one address per row in a register instead of reaching row r from row r-1 by an addition
            # (a chain of MR dependent additions in every step of the loop, as long as its MR*NV FMAs)
            opaque = ir.FunctionType(i64, [i64])
            a_row_ptrs = [builder.inttoptr(builder.asm(opaque, "", "=r,0", [builder.add(a, builder.mul(const(4 * r), a_rows))],
                                                       False, "row%d" % r), f32.as_pointer()) for r in range(MR)]
            entry = builder.block
            loop, done = builder.append_basic_block("k_loop"), builder.append_basic_block("k_done")
            builder.branch(loop)

            builder.position_at_end(loop)                      # one step k: NV loads, MR broadcasts, MR*NV FMAs
            k = builder.phi(i64)
            k.add_incoming(const(0), entry)
            accs = []
            for _ in range(MR * NV):
                acc = builder.phi(vec)
                acc.add_incoming(ir.Constant(vec, None), entry)     # zeros
                accs.append(acc)
            b_row = builder.gep(b_ptr, [builder.mul(k, ldb)])
            bs = [builder.load(vector_at(b_row, const(v * LANES)), align=4) for v in range(NV)]
            k_a = builder.mul(k, a_cols)
            sums = []
            for r in range(MR):
                x = splat(builder.load(builder.gep(a_row_ptrs[r], [k_a])))
                sums += [builder.call(fma, [x, bs[v], accs[r * NV + v]]) for v in range(NV)]
            k_next = builder.add(k, const(1))
            k.add_incoming(k_next, loop)
            for acc, s in zip(accs, sums):
                acc.add_incoming(s, loop)
            builder.cbranch(builder.icmp_signed("<", k_next, K), loop, done)

            builder.position_at_end(done)
            scale = splat(alpha)
            u_ptr, w_ptr = builder.inttoptr(u, f32.as_pointer()), builder.inttoptr(w, f32.as_pointer())
            for r in range(MR):
                row = builder.mul(const(r), ldc)
                if epilogue != PLAIN:
                    u_r = splat(builder.load(builder.gep(u_ptr, [const(r)]), align=4))
                total = None
                for v in range(NV):
                    offset = builder.add(row, const(v * LANES))
                    where = vector_at(c_ptr, offset)
                    s = sums[r * NV + v]
                    if epilogue == EXP:                        # C = exp(S - u)
                        e = _vector_exp(builder, fma, builder.fsub(builder.fmul(scale, s), u_r))
                        builder.store(e, where, align=4)
                        total = e if total is None else builder.fadd(total, e)
                    elif epilogue == DSOFTMAX:                 # C = P (S - u)
                        p = builder.load(vector_at(w_ptr, offset), align=4)
                        builder.store(builder.fmul(p, builder.fsub(builder.fmul(scale, s), u_r)), where, align=4)
                    else:                                      # C = S (+ C)
                        with builder.if_else(accumulate) as (add, overwrite):
                            with add:
                                builder.store(builder.call(fma, [scale, s, builder.load(where, align=4)]), where,
                                              align=4)
                            with overwrite:
                                builder.store(builder.fmul(scale, s), where, align=4)
                if epilogue == EXP:                            # w[r] += the row's sum, where w is given
                    with builder.if_then(builder.icmp_unsigned("!=", w, const(0))):
                        reduce = cgutils.get_or_insert_function(builder.module, ir.FunctionType(f32, [f32, vec]),
                                                                "llvm.vector.reduce.fadd.v16f32")
                        add = builder.call(reduce, [ir.Constant(f32, 0.0), total],
                                           fastmath=("reassoc",))     # any order: a tree of additions, not a chain
                        slot = builder.gep(w_ptr, [const(r)])
                        builder.store(builder.fadd(builder.load(slot, align=4), add), slot, align=4)
            return context.get_dummy_value()

        return sig, codegen
    return block


@intrinsic
def _load(typingctx, address):
    """The float32 at an address."""
    def codegen(context, builder, signature, args):
        return builder.load(builder.inttoptr(args[0], ir.FloatType().as_pointer()), align=4)
    return types.float32(types.intp), codegen


@intrinsic
def _store(typingctx, address, x):
    """Write the float32 x at an address."""
    def codegen(context, builder, signature, args):
        builder.store(args[1], builder.inttoptr(args[0], ir.FloatType().as_pointer()), align=4)
        return context.get_dummy_value()
    return types.void(types.intp, types.float32), codegen


def _tiling(epilogue):
    """tile(M, N, K, alpha, a, a_rows, a_cols, b, ldb, beta, c, ldc, u, w): all of C (M, N) in blocks with
    the given epilogue (see _block): bands of 64 columns in blocks of 6 rows (then 4, 2, 1), a band of 32
    and one of 16 in blocks of 8 rows (then 4, 2, 1), the last N % 16 columns one number at a time (all
    of them when K = 0). Inlined into the compiled functions below, one per epilogue."""
    b6x4, b4x4, b2x4, b1x4 = (_block(r, 4, epilogue) for r in (6, 4, 2, 1))
    b8x2, b4x2, b2x2, b1x2 = (_block(r, 2, epilogue) for r in (8, 4, 2, 1))
    b8x1, b4x1, b2x1, b1x1 = (_block(r, 1, epilogue) for r in (8, 4, 2, 1))

    @numba.njit(inline="always", error_model="numpy")
    def one_block(rows, nv, K, alpha, a, a_rows, a_cols, b, ldb, add, c, ldc, u, w):
        args = (a, a_rows, a_cols, b, ldb, c, ldc, K, alpha, add, u, w)
        if nv == 4:
            if rows == 6:
                b6x4(*args)
            elif rows == 4:
                b4x4(*args)
            elif rows == 2:
                b2x4(*args)
            else:
                b1x4(*args)
        elif nv == 2:
            if rows == 8:
                b8x2(*args)
            elif rows == 4:
                b4x2(*args)
            elif rows == 2:
                b2x2(*args)
            else:
                b1x2(*args)
        elif rows == 8:
            b8x1(*args)
        elif rows == 4:
            b4x1(*args)
        elif rows == 2:
            b2x1(*args)
        else:
            b1x1(*args)

    @numba.njit(inline="always", error_model="numpy")
    def column_band(M, K, alpha, a, a_rows, a_cols, b, ldb, beta, c, ldc, u, w, nv):
        first = 6 if nv == 4 else 8
        i = 0
        while i < M:
            left = M - i
            rows = first if left >= first else 4 if left >= 4 else 2 if left >= 2 else 1
            # u: a number per row; w: a number per row (EXP, 0 for none) or a matrix shaped like C (DSOFTMAX)
            w_i = w + 4 * i * ldc if epilogue == DSOFTMAX else (w + 4 * i if w != 0 else 0)
            one_block(rows, nv, K, alpha, a + 4 * i * a_rows, a_rows, a_cols, b, ldb, beta != 0, c + 4 * i * ldc, ldc,
                      u + 4 * i, w_i)
            i += rows

    @numba.njit(inline="always", error_model="numpy")
    def scalar_columns(M, j0, N, K, alpha, a, a_rows, a_cols, b, ldb, beta, c, ldc, u, w):
        for i in range(M):
            for j in range(j0, N):
                s = np.float32(0.0)
                for k in range(K):
                    s += _load(a + 4 * (i * a_rows + k * a_cols)) * _load(b + 4 * (k * ldb + j))
                where = c + 4 * (i * ldc + j)
                if epilogue == EXP:
                    e = exp32(alpha * s - _load(u + 4 * i))
                    _store(where, e)
                    if w != 0:
                        _store(w + 4 * i, _load(w + 4 * i) + e)
                elif epilogue == DSOFTMAX:
                    _store(where, _load(w + 4 * (i * ldc + j)) * (alpha * s - _load(u + 4 * i)))
                else:
                    _store(where, alpha * s + _load(where) if beta != 0 else alpha * s)

    @numba.njit(inline="always", error_model="numpy")
    def tile(M, N, K, alpha, a, a_rows, a_cols, b, ldb, beta, c, ldc, u, w):
        if M <= 0 or N <= 0:
            return
        alpha = np.float32(alpha)
        j = 0
        if K > 0:
            for nv, width in ((4, 64), (2, 32), (1, 16)):
                while j + width <= N:
                    w_j = w + 4 * j if epilogue == DSOFTMAX else w
                    column_band(M, K, alpha, a, a_rows, a_cols, b + 4 * j, ldb, beta, c + 4 * j, ldc, u, w_j, nv)
                    j += width
                    if nv != 4:
                        break
        scalar_columns(M, j, N, K, alpha, a, a_rows, a_cols, b, ldb, beta, c, ldc, u, w)
    return tile


_plain, _exp, _dsoftmax = _tiling(PLAIN), _tiling(EXP), _tiling(DSOFTMAX)


# three compiled functions, called, not inlined (each holds every block of its epilogue)

@numba.njit(nogil=True, cache=True, error_model="numpy")
def sgemm(M, N, K, alpha, a, a_rows, a_cols, b, ldb, beta, c, ldc):
    """C (M, N) = alpha A (M, K) B (K, N) + beta C, beta 0 or 1; a, b, c are addresses of float32
    (see the module's docstring for the strides)."""
    _plain(M, N, K, alpha, a, a_rows, a_cols, b, ldb, beta, c, ldc, 0, 0)


@numba.njit(nogil=True, cache=True, error_model="numpy")
def sgemm_exp(M, N, K, alpha, a, a_rows, a_cols, b, ldb, c, ldc, u, w):
    """C = exp(alpha A B - u) row by row (u: M float32 at address u), and, when w is not 0, each row's
    sum of C added to w (M float32 at address w): the scores of a tile of attention turned into
    unnormalised weights while they are still in registers (no pass over the tile of its own)."""
    _exp(M, N, K, alpha, a, a_rows, a_cols, b, ldb, 0.0, c, ldc, u, w)


@numba.njit(nogil=True, cache=True, error_model="numpy")
def sgemm_dsoftmax(M, N, K, alpha, a, a_rows, a_cols, b, ldb, c, ldc, u, p):
    """C = P (alpha A B - u), elementwise by P (M, N) at address p with C's row stride ldc, u a float32 per
    row: dS = P (dP - D) of the attention's backward, with dP = dout v^T still in registers."""
    _dsoftmax(M, N, K, alpha, a, a_rows, a_cols, b, ldb, 0.0, c, ldc, u, p)


def available():
    """True on CPUs with AVX-512F, where these products were measured faster than OpenBLAS's."""
    return bool(llvm_binding.get_host_cpu_features().get("avx512f"))


# Rows of a B operand that lie a power of two of bytes apart (k^T of T = 4096 keys: 16 KiB) fall into
# the same few sets of the L1 and L2 caches, and the 64 rows one block reads evict each other; a few
# numbers more per row spread them over the sets (docs/profiles/design-decisions.md#padded-rows-row_pad).
# The kernels' transposed copies (k^T, v^T) get rows this many numbers longer than they need.
ROW_PAD = 32


def transposed(x):
    """(H, n, c) -> an (H, c, n) copy, as a view of rows ROW_PAD numbers longer (see above)."""
    H, n, c = x.shape
    rows = np.empty((H, c, n + ROW_PAD), x.dtype)[:, :, :n]
    rows[...] = np.swapaxes(x, 1, 2)
    return rows


# whether the attention kernels multiply with ``sgemm`` here (True) or with NumPy's BLAS (False): on
# AVX-512 hosts unless ZEROLLM_OWN_PRODUCTS=0 (to compare the two, or where ours turn out slower). Read at
# each call, so that a test can set it.
USE = available() and os.environ.get("ZEROLLM_OWN_PRODUCTS", "1") != "0"


@numba.njit(inline="always", error_model="numpy")
def product(gemm, own, trans_a, M, N, K, alpha, a, lda, b, ldb, beta, c, ldc):
    """The attention kernels' one way to multiply: cblas_sgemm's row-major arguments (B never
    transposed; a, b, c as ``x.ctypes``), run by ``sgemm`` above when own, else by NumPy's BLAS (gemm)."""
    if own:
        a_rows, a_cols = (1, lda) if trans_a == TRANS else (lda, 1)
        sgemm(M, N, K, alpha, a.data, a_rows, a_cols, b.data, ldb, beta, c.data, ldc)
    else:
        gemm(ROW_MAJOR, trans_a, NO_TRANS, M, N, K, alpha, a, lda, b, ldb, beta, c, ldc)
