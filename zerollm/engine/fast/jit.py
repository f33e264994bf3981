"""What every fast kernel shares: the numba settings, a vectorisable float32 exp, input checks, and for the
block kernels (quant.py, kquant.py) vector loads, AVX2's byte products (``BYTE_PRODUCTS``) and the row split.

Settings (``kernel`` and ``exact_kernel``):
- nogil=True: a kernel releases Python's GIL like a NumPy ufunc does, so the batch shards of
  ``zerollm train --threads N`` (zerollm.training.parallel) run their kernels at the same time;
- cache=True: the machine code is saved next to this package, in a folder of its own for each version
  of these sources (``kernel_cache_folder``; where that folder is read-only, in numba's per-user cache;
  NUMBA_CACHE_DIR moves it), so only the first run compiles (seconds);
- no threads inside a kernel: the threads are the shards', as for the BLAS calls. The one exception
  is ``parallel_kernel`` (numba's prange), for the small quantized products of a decode step
  (engine/fast/quant.py, kquant.py), where a launch must cost microseconds; each has a serial twin for
  one thread. The attention kernels (flash.py, sdpa.py), large and launched for milliseconds of work,
  instead run one list of items per Python thread (blas.run_planned): a parallel=True twin of them
  costs 10-25 s of compilation each;
- on CPUs with AVX-512, vectors of the full 512-bit width (``wide_vector_features`` below).
``kernel`` lets LLVM reorder sums (fastmath 'reassoc') so that loops with a running sum or max
use SIMD registers; it never assumes away inf or NaN (no 'nnan' / 'ninf'), so masked -inf scores
and overflow behave as in NumPy. ``exact_kernel`` allows nothing: it rounds every operation exactly
as the NumPy reference does, and gives bit-identical results.
"""

import contextlib
import functools
import hashlib
import os
import platform
import shutil
import sys
import tempfile

import numba
import numpy as np
from llvmlite import binding as llvm_binding
from llvmlite import ir
from numba import types
from numba.core import cgutils
from numba.extending import intrinsic

from zerollm.io.errors import ZeroLLMError

FASTMATH = {"reassoc", "contract", "nsz", "arcp", "afn"}     # everything except nnan, ninf


def wide_vector_features():
    """The host's CPU features for numba's code generator, with AVX-512's full width allowed, or None.

    On Intel CPUs LLVM's tuning says "prefer 256-bit vectors" even where AVX-512 exists (early AVX-512
    chips slowed their clock on 512-bit instructions), so a vectorised kernel uses 8 float32 lanes of
    the 16 the registers hold. The kernels here are short streams of arithmetic on data that sits in
    the caches (the online softmax's exp, GELU's tanh), where the full width makes the exp loop of the
    attention kernel clearly faster (docs/profiles/design-decisions.md#avx-512-at-full-width). Only
    where the CPU has AVX-512F; the rounding of each operation is the same at any width, so exact
    kernels stay exact. None (numba decides) without AVX-512, or where the user set NUMBA_CPU_FEATURES."""
    if os.environ.get("NUMBA_CPU_FEATURES") is not None or os.environ.get("NUMBA_CPU_NAME") is not None:
        return None
    features = llvm_binding.get_host_cpu_features()
    if not features.get("avx512f"):
        return None
    return features.flatten() + ",-prefer-256-bit"


def check_cpu_settings():
    """NUMBA_CPU_NAME and NUMBA_CPU_FEATURES, when set, must name a processor and features LLVM knows:
    LLVM would print a line for each kernel it compiles and build for a generic CPU. One clear error
    instead (zerollm.io.errors)."""
    features = os.environ.get("NUMBA_CPU_FEATURES", "").strip()
    if features:
        known = llvm_binding.get_host_cpu_features()
        for item in features.split(","):
            item = item.strip()
            if item and (item[0] not in "+-" or item[1:] not in known):
                raise ZeroLLMError(f"$NUMBA_CPU_FEATURES holds {item!r}, which is not +NAME or -NAME of a feature LLVM "
                                   f"knows (such as +avx2, -avx512f): fix it or unset it, or use --engine numpy")
    name = os.environ.get("NUMBA_CPU_NAME", "").strip()
    if name and name != "host" and _llvm_complaint(name):
        raise ZeroLLMError(f"$NUMBA_CPU_NAME={name!r} is not a processor LLVM knows (such as host, generic, "
                           f"{llvm_binding.get_host_cpu_name()}): fix it or unset it, or use --engine numpy")


def _llvm_complaint(cpu):
    """What LLVM writes to the process's stderr (file descriptor 2) while building a code generator for
    ``cpu``: empty for a processor it knows."""
    llvm_binding.initialize_native_target()
    target = llvm_binding.Target.from_default_triple()
    with tempfile.TemporaryFile() as caught:
        sys.stderr.flush()
        saved = os.dup(2)
        os.dup2(caught.fileno(), 2)
        try:
            target.create_target_machine(cpu=cpu)
        finally:
            os.dup2(saved, 2)
            os.close(saved)
        caught.seek(0)
        return caught.read().strip()


check_cpu_settings()

# numba builds its code generator, and reads this setting, at the first compile or cache load of the
# process, which comes after this module is imported (every kernel module imports it first). The
# cache of compiled kernels is keyed by the features, so code built with other settings is not reused.
if wide_vector_features() is not None:
    numba.config.CPU_FEATURES = wide_vector_features()



def kernel_cache_folder(folder=os.path.dirname(os.path.abspath(__file__))):
    """Where this version of the engine's sources keeps its compiled kernels: ``__pycache__/kernels-<key>``
    beside them, the key a hash of every .py file in this folder.

    Why not numba's own place: numba reuses a cached kernel while the file of the function it compiled
    keeps its size and time, and does not look at what that function inlined from another file. After a
    ``git pull`` that changed exp32 here but not activation.py, the GELU kernel went on running the old
    exp32 (6x slower; a changed meaning would have been a wrong answer). One folder per version of the
    sources cannot hold a kernel built from other sources."""
    digest = hashlib.sha1()
    for name in sorted(f for f in os.listdir(folder) if f.endswith(".py")):
        with open(os.path.join(folder, name), "rb") as f:
            digest.update(name.encode() + b"\0" + f.read())
    return os.path.join(folder, "__pycache__", "kernels-" + digest.hexdigest()[:12])


def _keep_kernels_by_version():
    """numba's CACHE_DIR set to kernel_cache_folder(), unless the user chose one (NUMBA_CACHE_DIR; the tests
    choose one keyed the same way, tests/conftest.py). Kernels of earlier versions in that __pycache__ (older
    keys, and numba's files from before this scheme) are removed: only these sources could load them. Where
    the folder cannot be written (a read-only install), numba falls back to its per-user cache, as before."""
    if os.environ.get("NUMBA_CACHE_DIR"):
        return
    numba.config.CACHE_DIR = here = kernel_cache_folder()
    pycache = os.path.dirname(here)
    with contextlib.suppress(OSError):
        for entry in os.listdir(pycache):
            path = os.path.join(pycache, entry)
            if entry.startswith("kernels-") and path != here:
                shutil.rmtree(path, ignore_errors=True)
            elif entry.endswith((".nbi", ".nbc")):
                os.remove(path)


_keep_kernels_by_version()

kernel = numba.njit(nogil=True, cache=True, fastmath=FASTMATH, error_model="numpy")
parallel_kernel = numba.njit(nogil=True, cache=True, fastmath=FASTMATH, error_model="numpy", parallel=True)
exact_kernel = numba.njit(nogil=True, cache=True, error_model="numpy")
inline = numba.njit(inline="always", fastmath=FASTMATH, error_model="numpy")


def one_layout(dispatcher, args, loose):
    """Compile ``dispatcher`` once for ``args``, with the arrays at the positions ``loose`` typed as any
    layout ('A'), then no more: a C-contiguous array and a strided view then run the same machine code,
    where numba would compile one specialisation per layout combination (sdpa.py's kernels met four, each
    several seconds of compilation). A later call whose other types differ raises TypeError before any of
    the kernel runs (the caller then answers NotImplemented, and the NumPy reference runs)."""
    if not dispatcher.signatures:
        kinds = [numba.typeof(a) for a in args]
        for i in loose:
            kinds[i] = types.Array(kinds[i].dtype, kinds[i].ndim, "A")
        dispatcher.compile(tuple(kinds))             # from numba's disk cache when it is there
        dispatcher.disable_compile()


def float32_arrays(*arrays):
    """True when every array is float32 and C-contiguous (what the kernels are compiled for);
    otherwise the caller answers NotImplemented and the NumPy reference runs."""
    return all(isinstance(a, np.ndarray) and a.dtype == np.float32 and a.flags.c_contiguous for a in arrays)


# ----------------------------------------------------------------------------
# exp for float32, written so that LLVM can vectorise it (numba's math.exp is one libm call per
# element, 5x slower than NumPy's SIMD exp). Cephes' expf: exp(x) = 2^n exp(r) with
# n = round(x / ln 2) and |r| <= ln(2)/2, exp(r) from a degree-6 polynomial, then times 2^n by
# LLVM's ldexp. Error < 1 ulp (about 1e-7 relative) against the exact exp.
# All in float32 (16 lanes per AVX-512 register), and compiled as a function of its own WITHOUT
# 'reassoc': reordering the polynomial's sums costs up to 4 ulp. It is small enough that LLVM
# inlines it into every kernel's loop (and vectorises it there) all the same.

def _scale_by_ldexp():
    """Does llvm.ldexp vectorise on this host? One instruction (vscalefps) with AVX-512; without it LLVM calls
    libm's ldexpf once per lane (measured on an AVX2 AMD EPYC: GELU of 3072 numbers 19 us, most of it those
    calls), so there 2^n is built in the exponent bits instead."""
    if os.environ.get("NUMBA_CPU_FEATURES") is not None or os.environ.get("NUMBA_CPU_NAME") is not None:
        return False
    return bool(llvm_binding.get_host_cpu_features().get("avx512f"))


_LDEXP = _scale_by_ldexp()


@intrinsic
def _ldexp(typingctx, x, n):
    """x * 2^n for a float32 x and an int32 n with -252 <= n <= 254, rounded once. With AVX-512, llvm.ldexp
    (vscalefps). Elsewhere two exact powers of two built in the exponent bits, 2^(n >> 1) and 2^(n - (n >> 1)),
    each a normal float32: x times the first is exact for the x exp32 gives it (1/2 <= x < 2), and the
    second multiply rounds once, so the result is the same bit for bit, subnormals, 0 and inf included,
    with shifts, adds and multiplies that vectorise."""
    def codegen(context, builder, signature, args):
        f32, i32 = ir.FloatType(), ir.IntType(32)
        if _LDEXP:
            ldexp = cgutils.get_or_insert_function(builder.module, ir.FunctionType(f32, [f32, i32]),
                                                   "llvm.ldexp.f32.i32")
            return builder.call(ldexp, args)
        v, k = args
        low = builder.ashr(k, ir.Constant(i32, 1))

        def power_of_two(e):
            return builder.bitcast(builder.shl(builder.add(e, ir.Constant(i32, 127)), ir.Constant(i32, 23)), f32)

        return builder.fmul(builder.fmul(v, power_of_two(low)), power_of_two(builder.sub(k, low)))
    return types.float32(types.float32, types.int32), codegen


_LOG2E = np.float32(1.4426950408889634)
_LN2_HI, _LN2_LO = np.float32(0.693359375), np.float32(-2.12194440e-4)    # ln 2 = HI + LO, HI exact in 9 bits
# the clamp keeps n in int32 and r small; exp(-104) < half the smallest subnormal, exp(89) > the largest float32,
# so ldexp's own rounding gives exactly 0 and inf out there (and exp(-inf) = 0, exp(inf) = inf)
_EXP_MAX, _EXP_MIN = np.float32(89.0), np.float32(-104.0)
_P = [np.float32(c) for c in (1.9875691500e-4, 1.3981999507e-3, 8.3334519073e-3, 4.1665795894e-2,
                               1.6666665459e-1, 5.0000001201e-1)]
_P0, _P1, _P2, _P3, _P4, _P5 = _P
_ONE, _HALF = np.float32(1.0), np.float32(0.5)


@numba.njit(fastmath=FASTMATH - {"reassoc"}, error_model="numpy")
def exp32(x):
    """exp(x) for a float32 x: 0 below -103.97 (and for -inf), subnormal from -87.3, inf above 88.72,
    NaN for NaN.

    2^n comes from ldexp rather than being built in the exponent bits (shift, add, multiply, and two
    selects for under- and overflow): one instruction on AVX-512, faster, and bit for bit the same
    wherever both are normal (docs/profiles/design-decisions.md#exp32-ldexp-rather-than-exponent-bits)."""
    xc = min(max(x, _EXP_MIN), _EXP_MAX)
    # np.floor keeps n a float32 (math.floor gives an int64, and then the whole polynomial ran in
    # float64: half the SIMD lanes and conversions both ways, 3x slower)
    n = np.floor(xc * _LOG2E + _HALF)
    r = (xc - n * _LN2_HI) - n * _LN2_LO                      # x - n ln 2, in two steps for accuracy
    p = ((((_P0 * r + _P1) * r + _P2) * r + _P3) * r + _P4) * r + _P5
    p = p * (r * r) + r + _ONE                                 # exp(r)
    y = _ldexp(p, np.int32(n))                                 # times 2^n
    return x if x != x else y                                  # NaN stays NaN


# ----------------------------------------------------------------------------
# what the block kernels (quant.py, kquant.py) share: vector loads, AVX2's byte products, the row split

@inline
def max_abs(row):
    """max |row[j]| over a 1-D float32 array whose length is a multiple of 8: eight running maxima side by side,
    which LLVM keeps in one vector register, where one running maximum is a chain of dependent steps (without
    'nnan' LLVM may not reorder it). The activations' rounding to 8-bit blocks (quant.py, kquant.py) took about
    half its time in that chain."""
    m0 = m1 = m2 = m3 = m4 = m5 = m6 = m7 = np.float32(0.0)
    for j in range(0, row.shape[0], 8):
        m0, m1 = max(m0, abs(row[j])), max(m1, abs(row[j + 1]))
        m2, m3 = max(m2, abs(row[j + 2])), max(m3, abs(row[j + 3]))
        m4, m5 = max(m4, abs(row[j + 4])), max(m5, abs(row[j + 5]))
        m6, m7 = max(m6, abs(row[j + 6])), max(m7, abs(row[j + 7]))
    return max(max(max(m0, m1), max(m2, m3)), max(max(m4, m5), max(m6, m7)))


@inline
def round_codes(row, inv, out):
    """out[j] = row[j] * inv rounded to the nearest whole number, halves away from zero (the 8-bit codes of x; out
    int8, int16 or float32): a loop of its own, with no sum in it, so that LLVM makes it vector code."""
    for j in range(row.shape[0]):
        v = row[j] * inv
        out[j] = np.int32(v + _HALF if v >= 0 else v - _HALF)


def vector_load(context, builder, array_type, array, offset, n):
    """n integers at array's element ``offset`` as an LLVM vector (<n x i8> or <n x i16>; unaligned load)."""
    data = context.make_array(array_type)(context, builder, value=array).data
    vec = ir.VectorType(ir.IntType(array_type.dtype.bitwidth), n)
    return builder.load(builder.bitcast(builder.gep(data, [offset]), vec.as_pointer()), align=1)


def avx2_call(builder, name, operands):
    """AVX2's vpmaddubsw ("pmadd.ub.sw": <32 x u8> x <32 x i8> -> <16 x i16>) or vpmaddwd ("pmadd.wd":
    <16 x i16> x <16 x i16> -> <8 x i32>), each product added to its neighbour's."""
    i8, i16, i32 = ir.IntType(8), ir.IntType(16), ir.IntType(32)
    types_ = {"pmadd.ub.sw": (ir.VectorType(i16, 16), [ir.VectorType(i8, 32)] * 2),
              "pmadd.wd": (ir.VectorType(i32, 8), [ir.VectorType(i16, 16)] * 2)}[name]
    fn = cgutils.get_or_insert_function(builder.module, ir.FunctionType(*types_), "llvm.x86.avx2." + name)
    return builder.call(fn, operands)


def avx512_call(builder, name, operands):
    """AVX-512BW's vpmaddubsw ("pmaddubs.w.512": <64 x u8> x <64 x i8> -> <32 x i16>) or vpmaddwd ("pmaddw.d.512":
    <32 x i16> x <32 x i16> -> <16 x i32>), as avx2_call's on registers twice as wide (hosts with
    WIDE_BYTE_PRODUCTS only)."""
    i8, i16, i32 = ir.IntType(8), ir.IntType(16), ir.IntType(32)
    types_ = {"pmaddubs.w.512": (ir.VectorType(i16, 32), [ir.VectorType(i8, 64)] * 2),
              "pmaddw.d.512": (ir.VectorType(i32, 16), [ir.VectorType(i16, 32)] * 2)}[name]
    fn = cgutils.get_or_insert_function(builder.module, ir.FunctionType(*types_), "llvm.x86.avx512." + name)
    return builder.call(fn, operands)


def _avx2_host():
    """May the kernels call AVX2's instructions by name? x86-64 with AVX2, and numba compiling for this very
    CPU (no NUMBA_CPU_NAME / NUMBA_CPU_FEATURES, which could name a CPU without them)."""
    if platform.machine().lower() not in ("x86_64", "amd64") or os.environ.get("NUMBA_CPU_NAME") \
            or os.environ.get("NUMBA_CPU_FEATURES"):
        return False
    return bool(llvm_binding.get_host_cpu_features().get("avx2"))


BYTE_PRODUCTS = _avx2_host()    # Q4_0, Q4_K, Q6_K against 8-bit activations through vpmaddubsw (quant.py, kquant.py)
# the same products 64 bytes at a time (AVX-512BW's vpmaddubsw and vpmaddwd on zmm registers: kquant.py's Q4_K)
WIDE_BYTE_PRODUCTS = BYTE_PRODUCTS and bool(llvm_binding.get_host_cpu_features().get("avx512bw"))


@functools.lru_cache(maxsize=256)
def row_bounds(R, n_threads):
    """n_threads + 1 row boundaries: thread t multiplies rows bounds[t] .. bounds[t + 1] - 1. Cached: a decode
    step asks for the same few a hundred times, and np.linspace costs about 10 us of Python a call."""
    bounds = np.linspace(0, R, n_threads + 1).astype(np.int64)
    bounds.flags.writeable = False
    return bounds
