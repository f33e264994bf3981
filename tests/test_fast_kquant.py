"""The fast engine's k-quant kernels on x86 with AVX2 (zerollm.engine.fast.kquant, issue #61): Q5_K's byte kernel
for a decode step, the Q4_K / Q5_K scales a prefill unpacks once a matrix, and the four streams of rows a decode
step's byte kernels take (each row bit for bit its one-row intrinsic's).

Q5_K's codes are Q4_K's nibbles with a fifth bit from the 32 qh bytes of its super-block; the byte kernel takes x's
8-bit codes as bytes (vpmaddubsw) where the float-lane kernel holds them in float32 lanes: the same integer sums,
so the two agree to float32 rounding, and both are within INT8_TOLERANCE of the NumPy reference (dequantize, then
BLAS). The prefill's integer GEMM (engine/fast/qgemm.py) is checked row by row against the decode kernels in
tests/test_fast_qgemm.py, Q5_K included.
"""

import numpy as np
import pytest

from zerollm.interop import kquant
from zerollm.nn.linear import quantized_matmul

fast = pytest.importorskip("zerollm.engine.fast.quant")
from zerollm.engine.fast import jit, kquant as kernels  # noqa: E402  (numba: the line above checks it is there)
from zerollm.engine.threads import limit_threads  # noqa: E402

pytestmark = pytest.mark.skipif(not jit.BYTE_PRODUCTS, reason="the byte kernels are written for x86 with AVX2; "
                                "elsewhere the float-lane kernels run (tests/test_kquant.py)")


def matrix(kind, rows=131, cols=512, seed=6):
    """Every scale, min, code and fifth bit in use: row r scaled by r's step from 1e-6 to 3."""
    rng = np.random.default_rng(seed)
    return kquant.KQuantMatrix.from_float(rng.standard_normal((rows, cols)) * np.linspace(1e-6, 3, rows)[:, None], kind)


@pytest.mark.parametrize("threads", [1, 2])
def test_q5_k_decode_rows_go_through_the_byte_kernel_and_equal_the_float_lanes_and_the_reference(monkeypatch,
                                                                                                 threads):
    calls = []
    serial, threaded = kernels._Q45K_BYTES
    monkeypatch.setattr(kernels, "_Q45K_BYTES", (lambda *a: calls.append(1) or serial(*a),
                                                lambda *a: calls.append(2) or threaded(*a)))
    w = matrix("q5_K")
    x = np.random.default_rng(7).standard_normal((3, 512)).astype(np.float32)
    x[1, 256:] = 0                                            # a super-block of x all zeros: its scale is 0
    with limit_threads(threads):
        got = kernels.kquant_matmul(x, w)
        assert calls == [threads]                             # the byte kernel ran, serial or threaded
        monkeypatch.setattr(jit, "BYTE_PRODUCTS", False)
        lanes = kernels.kquant_matmul(x, w)                   # the float-lane kernel
    assert calls == [threads] and got.shape == (3, 131) and np.abs(got).max() > 0
    np.testing.assert_allclose(got, lanes, rtol=1e-6, atol=1e-6 * np.abs(lanes).max())
    ref = quantized_matmul.reference(x, w)
    err = np.abs(got - ref).max() / np.abs(ref).max()
    assert 1e-5 < err <= fast.INT8_TOLERANCE                  # x in 8 bits: near the float product, not it


@pytest.mark.parametrize("kind", ["q4_K", "q5_K"])
def test_a_prefill_unpacks_a_matrix_s_scales_once_and_again_when_its_blocks_are_replaced(monkeypatch, kind):
    """The six-bit scales and mins of a Q4_K / Q5_K matrix are unpacked at its first prefill and kept with it; a
    second prefill reuses them; a matrix whose blocks array is replaced (another matrix's bytes) is unpacked
    again and multiplies as the new bytes say."""
    unpacked = []
    real = kernels._unpack_k_scales
    monkeypatch.setattr(kernels, "_unpack_k_scales", lambda *a: unpacked.append(1) or real(*a))
    w, other = matrix(kind, seed=1), matrix(kind, seed=2)
    x = np.random.default_rng(3).standard_normal((16, 512)).astype(np.float32)
    first = kernels.kquant_matmul(x, w)
    second = kernels.kquant_matmul(x, w)
    assert len(unpacked) == 1 and np.array_equal(first, second)
    w.blocks = other.blocks.copy()
    third = kernels.kquant_matmul(x, w)
    ref = quantized_matmul.reference(x, other)
    assert len(unpacked) == 2
    assert np.abs(third - ref).max() <= fast.INT8_TOLERANCE * np.abs(ref).max()
    assert np.abs(third - first).max() > 0.1 * np.abs(ref).max()


@pytest.fixture(scope="module")
def one_row_at_a_time():
    """The byte kernels' arithmetic one row of W at a time (the one-row intrinsics), to check the four streams by."""
    import numba

    @numba.njit(cache=False)
    def rows(blocks, xq, e, sums, kind, y):
        for r in range(blocks.shape[0]):
            for n in range(xq.shape[0]):
                if kind == 6:
                    y[n, r] = kernels._q6k_row(blocks[r], xq[n], e[n], sums[n], blocks.shape[1])
                elif kind == 5:
                    y[n, r] = kernels._q5k_row(blocks[r], xq[n], e[n], sums[n], blocks.shape[1])
                else:
                    y[n, r] = kernels._q4k_row(blocks[r], xq[n], e[n], sums[n], blocks.shape[1])
    return rows


@pytest.mark.parametrize("kind", ["q4_K", "q5_K", "q6_K"])
@pytest.mark.parametrize("threads", [1, 2])
def test_four_streams_of_rows_give_each_row_s_one_row_product_bit_for_bit(one_row_at_a_time, kind, threads):
    """A thread's rows go four at a time, a quarter of its rows apart, the rest one by one (_QUARTERS): every row
    count, split or not between two threads, gives each row exactly what the one-row intrinsic gives it."""
    x = np.random.default_rng(8).standard_normal((2, 512)).astype(np.float32)
    xq, e, sums = kernels._x_codes(x, np.int8)
    for rows in (1, 3, 4, 5, 8, 11, 131):
        w = kquant.KQuantMatrix.from_float(np.random.default_rng(rows).standard_normal((rows, 512)), kind)
        want = np.full((2, rows), np.nan, np.float32)
        one_row_at_a_time(w.blocks, xq, e, sums, int(kind[1]), want)
        with limit_threads(threads):
            got = kernels.integer_product(x, w, threads)
        assert np.isfinite(want).all() and np.abs(want).max() > 0
        np.testing.assert_array_equal(got, want, err_msg=f"{kind}, {rows} rows, {threads} threads")


@pytest.mark.skipif(not jit.WIDE_BYTE_PRODUCTS, reason="the 64-byte form needs AVX-512BW; without it _q4k_row is the "
                    "32-byte form that every other test here runs")
def test_q4_k_on_64_byte_registers_gives_the_32_byte_kernel_s_numbers_bit_for_bit():
    """Where the host has AVX-512BW, Q4_K's row intrinsic is compiled for zmm registers (two sub-blocks in each,
    x's matching codes side by side): the same integer sums and the same float steps as the AVX2 form, so every
    row is the same float32, bit for bit, with every scale, min and code in use and a super-block of x all zero.
    The compiled code is checked too: vpmaddubsw on zmm in the one, on ymm only in the other."""
    import numba

    @numba.njit(cache=False)
    def wide(blocks, xq, e, sums, y):
        for r in range(blocks.shape[0]):
            for n in range(xq.shape[0]):
                y[n, r] = kernels._q4k_row(blocks[r], xq[n], e[n], sums[n], blocks.shape[1])

    @numba.njit(cache=False)
    def narrow(blocks, xq, e, sums, y):
        for r in range(blocks.shape[0]):
            for n in range(xq.shape[0]):
                y[n, r] = kernels._q4k_ymm_row(blocks[r], xq[n], e[n], sums[n], blocks.shape[1])

    w = matrix("q4_K")
    x = np.random.default_rng(9).standard_normal((3, 512)).astype(np.float32)
    x[1, 256:] = 0
    xq, e, sums = kernels._x_codes(x, np.int8)
    got, want = (np.full((3, 131), np.nan, np.float32) for _ in range(2))
    wide(w.blocks, xq, e, sums, got)
    narrow(w.blocks, xq, e, sums, want)
    assert np.isfinite(want).all() and np.abs(want).max() > 0 and (want[1] != 0).all()
    np.testing.assert_array_equal(got, want)
    with limit_threads(2):
        np.testing.assert_array_equal(kernels.integer_product(x, w, 2), want)    # four streams, two threads

    def products(f):
        asm = f.inspect_asm(f.signatures[0])
        return {line.split()[-1] for line in asm.splitlines() if line.strip().startswith("vpmaddubsw")}
    assert any("zmm" in r for r in products(wide)) and not any("zmm" in r for r in products(narrow))
