"""Our own small matrix products for the attention kernels: C = alpha A B (+ C), in AVX-512 registers.

Why: the attention kernels (engine/fast/flash.py, engine/fast/sdpa.py) multiply thousands of small
blocks, q (64..256 rows) by k^T with an inner size of hs = 64, weights by v with one of 32..256.
NumPy's OpenBLAS runs such products at 100-115 GFLOP/s on a 2-vCPU Xeon with AVX-512, where its large
GEMMs reach 165-175: with an inner size of 64 every call packs both operands into its own layout and
then multiplies each packed piece only 64 times. The products here pack nothing. A block of 6 rows
by 64 columns of C lives in 24 vector registers for the whole inner loop; each step loads 4 vectors
of a row of B, broadcasts 6 numbers of a column of A and does 24 fused multiply-adds. Measured on
that host, 1 thread, hot in cache (min of 7 runs, ours / OpenBLAS, GFLOP/s): 256x64 @ 64x256 139 /
109, 256x256 @ 256x64 153 / 112, 64x64 @ 64x64 129 / 105; with A read transposed 121 / 115, 133 / 115
(with blocks of 8 x 32, the first design). The 6 x 64 blocks, and one register per row of A instead
of a chain of additions, were 5-15% faster than 8 x 32 on every attention shape (2026-12-06, 9
alternating rounds in one process: 256x64 @ 64x256 84-87 -> 94 GFLOP/s, 256x256 @ 256x64 70 -> 77-79,
A transposed 71 -> 75-78, on a busy hour where torch.mm's MKL reached 83-100 on the same shapes).

How: the loop over the inner dimension is written in LLVM's IR (with llvmlite, like the float32 exp
bits in jit.py), because numba gives Python no vector type, and an accumulator that is a NumPy array
lives in memory, not in a register. ``_block(MR, NV)`` builds the loop for a block of MR rows and NV
vectors of 16 columns; ``sgemm`` tiles C with those blocks (6 x 64, then 4, 2, 1 rows; then 8 x 32 and
8 x 16, then 4, 2, 1 rows) and does the last N % 16 columns with scalar code.

Operands: A (M, K) is read at a[i * a_rows + k * a_cols] (a row-major A has a_cols = 1; a transposed
one a_rows = 1), B (K, N) row-major with row stride ldb, C (M, N) row-major with row stride ldc, all
float32 given by address (``x.ctypes.data``). beta is 0 (C is overwritten) or 1 (C += ...). The sums
over k run in order, one fused multiply-add per step, so the results agree with a BLAS to float
rounding (measured: identical to OpenBLAS's for these shapes), not bit for bit in general.

Where: only on CPUs with AVX-512F (``available()``), where it was measured to win. Elsewhere (an AMD
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

from zerollm.engine.fast import jit  # noqa: F401  (sets numba's CPU features before any compile)
from zerollm.engine.fast.blas import NO_TRANS, ROW_MAJOR, TRANS

LANES = 16                     # float32 numbers in an AVX-512 register


def _block(MR, NV):
    """An intrinsic block(a, a_rows, a_cols, b, ldb, c, ldc, K, alpha, accumulate): the (MR, NV * 16) block
    of C at address c gets alpha * A B (+ its old value when accumulate), K >= 1 steps over k."""
    @intrinsic
    def block(typingctx, a, a_rows, a_cols, b, ldb, c, ldc, K, alpha, accumulate):
        sig = types.void(types.intp, types.intp, types.intp, types.intp, types.intp, types.intp, types.intp,
                         types.intp, types.float32, types.boolean)

        def codegen(context, builder, signature, args):
            a, a_rows, a_cols, b, ldb, c, ldc, K, alpha, accumulate = args
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

            builder.position_at_end(done)                      # C = alpha * sums (+ C)
            scale = splat(alpha)
            for r in range(MR):
                for v in range(NV):
                    where = vector_at(c_ptr, builder.add(builder.mul(const(r), ldc), const(v * LANES)))
                    s = sums[r * NV + v]
                    with builder.if_else(accumulate) as (add, overwrite):
                        with add:
                            builder.store(builder.call(fma, [scale, s, builder.load(where, align=4)]), where, align=4)
                        with overwrite:
                            builder.store(builder.fmul(scale, s), where, align=4)
            return context.get_dummy_value()

        return sig, codegen
    return block


_B6x4, _B4x4, _B2x4, _B1x4 = _block(6, 4), _block(4, 4), _block(2, 4), _block(1, 4)
_B8x2, _B4x2, _B2x2, _B1x2 = _block(8, 2), _block(4, 2), _block(2, 2), _block(1, 2)
_B8x1, _B4x1, _B2x1, _B1x1 = _block(8, 1), _block(4, 1), _block(2, 1), _block(1, 1)


@numba.njit(inline="always", error_model="numpy")
def _one_block(rows, nv, K, alpha, a, a_rows, a_cols, b, ldb, add, c, ldc):
    """The block of ``rows`` rows (6, 4, 2 or 1 when nv is 4; 8, 4, 2 or 1 otherwise) by nv * 16 columns."""
    if nv == 4:
        if rows == 6:
            _B6x4(a, a_rows, a_cols, b, ldb, c, ldc, K, alpha, add)
        elif rows == 4:
            _B4x4(a, a_rows, a_cols, b, ldb, c, ldc, K, alpha, add)
        elif rows == 2:
            _B2x4(a, a_rows, a_cols, b, ldb, c, ldc, K, alpha, add)
        else:
            _B1x4(a, a_rows, a_cols, b, ldb, c, ldc, K, alpha, add)
    elif nv == 2:
        if rows == 8:
            _B8x2(a, a_rows, a_cols, b, ldb, c, ldc, K, alpha, add)
        elif rows == 4:
            _B4x2(a, a_rows, a_cols, b, ldb, c, ldc, K, alpha, add)
        elif rows == 2:
            _B2x2(a, a_rows, a_cols, b, ldb, c, ldc, K, alpha, add)
        else:
            _B1x2(a, a_rows, a_cols, b, ldb, c, ldc, K, alpha, add)
    elif rows == 8:
        _B8x1(a, a_rows, a_cols, b, ldb, c, ldc, K, alpha, add)
    elif rows == 4:
        _B4x1(a, a_rows, a_cols, b, ldb, c, ldc, K, alpha, add)
    elif rows == 2:
        _B2x1(a, a_rows, a_cols, b, ldb, c, ldc, K, alpha, add)
    else:
        _B1x1(a, a_rows, a_cols, b, ldb, c, ldc, K, alpha, add)


@numba.njit(inline="always", error_model="numpy")
def _column_band(M, K, alpha, a, a_rows, a_cols, b, ldb, beta, c, ldc, nv):
    """Rows 0 .. M-1 of one band of nv * 16 columns: blocks of 6 (nv = 4) or 8 rows, then 4, 2 and 1."""
    first = 6 if nv == 4 else 8
    i = 0
    while i < M:
        left = M - i
        rows = first if left >= first else 4 if left >= 4 else 2 if left >= 2 else 1
        _one_block(rows, nv, K, alpha, a + 4 * i * a_rows, a_rows, a_cols, b, ldb, beta != 0, c + 4 * i * ldc, ldc)
        i += rows


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


@numba.njit(inline="always", error_model="numpy")
def _scalar_columns(M, j0, N, K, alpha, a, a_rows, a_cols, b, ldb, beta, c, ldc):
    """Columns j0 .. N-1 of C one number at a time (the last N % 16; also every column when K = 0)."""
    for i in range(M):
        for j in range(j0, N):
            s = np.float32(0.0)
            for k in range(K):
                s += _load(a + 4 * (i * a_rows + k * a_cols)) * _load(b + 4 * (k * ldb + j))
            where = c + 4 * (i * ldc + j)
            _store(where, alpha * s + _load(where) if beta != 0 else alpha * s)


@numba.njit(nogil=True, cache=True, error_model="numpy")     # one compiled function, called, not inlined
def sgemm(M, N, K, alpha, a, a_rows, a_cols, b, ldb, beta, c, ldc):
    """C (M, N) = alpha A (M, K) B (K, N) + beta C, beta 0 or 1; a, b, c are addresses of float32
    (see the module's docstring for the strides)."""
    if M <= 0 or N <= 0:
        return
    alpha = np.float32(alpha)
    j = 0
    if K > 0:                                             # (K = 0: C = beta C, by the scalar columns)
        while j + 64 <= N:
            _column_band(M, K, alpha, a, a_rows, a_cols, b + 4 * j, ldb, beta, c + 4 * j, ldc, 4)
            j += 64
        if j + 32 <= N:
            _column_band(M, K, alpha, a, a_rows, a_cols, b + 4 * j, ldb, beta, c + 4 * j, ldc, 2)
            j += 32
        if j + 16 <= N:
            _column_band(M, K, alpha, a, a_rows, a_cols, b + 4 * j, ldb, beta, c + 4 * j, ldc, 1)
            j += 16
    _scalar_columns(M, j, N, K, alpha, a, a_rows, a_cols, b, ldb, beta, c, ldc)


def available():
    """True on CPUs with AVX-512F, where these products were measured faster than OpenBLAS's."""
    return bool(llvm_binding.get_host_cpu_features().get("avx512f"))


# Rows of a B operand that lie a power of two of bytes apart (k^T of T = 4096 keys: 16 KiB) fall into
# the same few sets of the L1 and L2 caches, and the 64 rows one block reads evict each other: 256x64 @
# 64x256 ran at 113-125 GFLOP/s with row strides of 256..8192 numbers, 134-152 with 16 or 32 more.
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
