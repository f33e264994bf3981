"""The attention kernels' own small products (zerollm/engine/fast/microkernel.py) against NumPy.

The kernels that call them are checked against torch in tests/test_fast_flash.py and
tests/test_fast_sdpa.py, both with these products and with NumPy's BLAS; here the products alone, on
every block size and edge: rows in blocks of 6, 4, 2, 1 (bands of 64 columns) and 8, 4, 2, 1 (bands of
32 and 16 columns), a scalar tail; an empty sum; a transposed A; row strides longer than the rows; beta 0 and 1; alpha. Then the two
products that finish in the registers: exp(S - u) with its row sums (the forward's weights) and
P (S - u) (the backward's dS), on the same shapes.
"""

import os
import subprocess
import sys

import numpy as np
import pytest

from zerollm.engine.fast import microkernel
from zerollm.engine.fast.jit import exp32

SHAPES = [(1, 1, 1), (7, 5, 3), (8, 32, 64), (9, 33, 2), (15, 48, 17), (64, 64, 64), (100, 100, 100),
          (13, 47, 0), (256, 256, 64), (3, 17, 5), (12, 16, 1),
          (7, 117, 9), (13, 128, 3), (256, 64, 256), (5, 64, 64)]


def product(M, N, K, transposed_a, beta, seed):
    """(C after sgemm, what it should be in float64, C's padding columns before and after)."""
    rng = np.random.default_rng(seed)
    a = rng.standard_normal((K, M) if transposed_a else (M, K), dtype=np.float32)
    op_a = a.T if transposed_a else a
    b = rng.standard_normal((K, N + 3), dtype=np.float32)[:, :N]          # rows 3 numbers longer than N
    c0 = rng.standard_normal((M, N + 2), dtype=np.float32)
    c = c0.copy()
    a_rows, a_cols = (1, M) if transposed_a else (K, 1)
    alpha = np.float32(0.5)
    microkernel.sgemm(M, N, K, alpha, a.ctypes.data, a_rows, a_cols, b.ctypes.data, b.strides[0] // 4, beta,
                      c.ctypes.data, c.strides[0] // 4)
    want = alpha * (op_a.astype(np.float64) @ b.astype(np.float64)) + beta * c0[:, :N]
    return c[:, :N], want, c0[:, N:], c[:, N:]


@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "x".join(map(str, s)))
@pytest.mark.parametrize("transposed_a", [False, True], ids=["A", "A^T"])
@pytest.mark.parametrize("beta", [0.0, 1.0], ids=["beta0", "beta1"])
def test_the_products_match_numpy_on_every_block_and_edge(shape, transposed_a, beta):
    M, N, K = shape
    c, want, pad_before, pad_after = product(M, N, K, transposed_a, beta, seed=M * 1000 + N * 10 + K)
    scale = max(np.abs(want).max(), 1.0)
    assert np.abs(c - want).max() <= 1e-6 * scale * max(K, 1) ** 0.5 * 4, shape
    assert (pad_after == pad_before).all()                  # nothing written past the N columns


def test_an_empty_product_leaves_c_alone():
    c = np.ones((3, 5), np.float32)
    microkernel.sgemm(0, 5, 4, 1.0, 0, 4, 1, 0, 5, 0.0, c.ctypes.data, 5)
    microkernel.sgemm(3, 0, 4, 1.0, 0, 4, 1, 0, 5, 0.0, c.ctypes.data, 5)
    assert (c == 1).all()


def test_transposed_copies_have_padded_rows():
    """(H, n, c) -> (H, c, n) with rows ROW_PAD numbers longer: no power-of-two stride for the products."""
    x = np.arange(2 * 256 * 64, dtype=np.float32).reshape(2, 256, 64)
    t = microkernel.transposed(x)
    assert t.shape == (2, 64, 256) and (t == np.swapaxes(x, 1, 2)).all()
    assert t.strides[1] == 4 * (256 + microkernel.ROW_PAD) and t.strides[2] == 4


def test_own_products_on_avx512_hosts_unless_turned_off(monkeypatch):
    class Features(dict):
        def flatten(self):
            return ""
    monkeypatch.setattr(microkernel.llvm_binding, "get_host_cpu_features", lambda: Features(avx512f=True))
    assert microkernel.available()
    monkeypatch.setattr(microkernel.llvm_binding, "get_host_cpu_features", lambda: Features(avx2=True))
    assert not microkernel.available()
    code = "from zerollm.engine.fast import microkernel as m; print(m.USE, m.available())"
    for setting, want in (("0", "False"), ("1", None)):
        env = dict(os.environ, ZEROLLM_OWN_PRODUCTS=setting)
        use, avx512 = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                                     check=True).stdout.split()
        assert use == (want or avx512)                      # 1 (the default): exactly where AVX-512 is


def _operands(M, N, K, transposed_a, seed):
    rng = np.random.default_rng(seed)
    a = rng.standard_normal((K, M) if transposed_a else (M, K), dtype=np.float32)
    b = rng.standard_normal((K, N + 3), dtype=np.float32)[:, :N]
    a_rows, a_cols = (1, M) if transposed_a else (K, 1)
    u = (rng.standard_normal(M) + 3).astype(np.float32)
    return rng, a, a_rows, a_cols, b, u


@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "x".join(map(str, s)))
@pytest.mark.parametrize("transposed_a", [False, True], ids=["A", "A^T"])
def test_exp_of_the_product_and_its_row_sums(shape, transposed_a):
    """sgemm_exp: C = exp(alpha A B - u) per row, w += the rows' sums; the same numbers as sgemm followed
    by exp32 (the kernels' unfused path) to a few float32 roundings, nothing past N written."""
    M, N, K = shape
    rng, a, a_rows, a_cols, b, u = _operands(M, N, K, transposed_a, seed=M * 7 + N * 3 + K)
    alpha = np.float32(0.25)
    c = np.full((M, N + 2), 7.0, np.float32)
    w0 = rng.standard_normal(M).astype(np.float32)
    w = w0.copy()
    microkernel.sgemm_exp(M, N, K, alpha, a.ctypes.data, a_rows, a_cols, b.ctypes.data, b.strides[0] // 4,
                          c.ctypes.data, c.strides[0] // 4, u.ctypes.data, w.ctypes.data)
    s = np.zeros((M, N), np.float32)
    microkernel.sgemm(M, N, K, alpha, a.ctypes.data, a_rows, a_cols, b.ctypes.data, b.strides[0] // 4, 0.0,
                      s.ctypes.data, N)
    want = np.array([[exp32(x - u[i]) for x in row] for i, row in enumerate(s)], np.float32).reshape(M, N)
    assert np.allclose(c[:, :N], want, rtol=4e-7, atol=0), shape
    assert (c[:, N:] == 7).all()
    assert np.allclose(w - w0, want.astype(np.float64).sum(axis=1), rtol=1e-5, atol=1e-6)
    w_before = w.copy()                                     # w = 0 (no address): no sums, the same C
    c2 = np.empty_like(c)
    microkernel.sgemm_exp(M, N, K, alpha, a.ctypes.data, a_rows, a_cols, b.ctypes.data, b.strides[0] // 4,
                          c2.ctypes.data, c.strides[0] // 4, u.ctypes.data, 0)
    assert (c2[:, :N] == c[:, :N]).all() and (w == w_before).all()


@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "x".join(map(str, s)))
def test_softmax_backward_of_the_product(shape):
    """sgemm_dsoftmax: C = P (A B - u), bit for bit what sgemm then P * (C - u) gives (the unfused path)."""
    M, N, K = shape
    rng, a, a_rows, a_cols, b, u = _operands(M, N, K, False, seed=M + N + K)
    p = rng.random((M, N + 2), dtype=np.float32)
    c = np.full((M, N + 2), 7.0, np.float32)
    microkernel.sgemm_dsoftmax(M, N, K, 1.0, a.ctypes.data, a_rows, a_cols, b.ctypes.data, b.strides[0] // 4,
                               c.ctypes.data, c.strides[0] // 4, u.ctypes.data, p.ctypes.data)
    s = np.zeros((M, N), np.float32)
    microkernel.sgemm(M, N, K, 1.0, a.ctypes.data, a_rows, a_cols, b.ctypes.data, b.strides[0] // 4, 0.0,
                      s.ctypes.data, N)
    assert (c[:, :N] == p[:, :N] * (s - u[:, None])).all(), shape
    assert (c[:, N:] == 7).all()


def test_exp_epilogue_edges():
    """exp's clamps in the registers as in exp32: far below -104 gives 0, above 89 inf, NaN stays NaN."""
    a = np.array([[1.0]], np.float32)
    b = np.array([[-200.0, -90.0, 0.0, 1.0, 88.0, 100.0, np.nan] + [0.0] * 9], np.float32)   # 16: one vector
    u = np.zeros(1, np.float32)
    c = np.empty((1, 16), np.float32)
    microkernel.sgemm_exp(1, 16, 1, 1.0, a.ctypes.data, 1, 1, b.ctypes.data, 16, c.ctypes.data, 16, u.ctypes.data, 0)
    want = np.array([exp32(x) for x in b[0]], np.float32)
    assert c[0, 0] == 0 and np.isinf(c[0, 5]) and np.isnan(c[0, 6])
    assert np.allclose(c[0, :5], want[:5], rtol=2e-7, atol=0)
