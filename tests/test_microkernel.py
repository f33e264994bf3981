"""The attention kernels' own small products (zerollm/engine/fast/microkernel.py) against NumPy.

The kernels that call them are checked against torch in tests/test_fast_flash.py and
tests/test_fast_sdpa.py, both with these products and with NumPy's BLAS; here the products alone, on
every block size and edge: rows in blocks of 6, 4, 2, 1 (bands of 64 columns) and 8, 4, 2, 1 (bands of
32 and 16 columns), a scalar tail; an empty sum; a transposed A; row strides longer than the rows; beta 0 and 1; alpha.
"""

import os
import subprocess
import sys

import numpy as np
import pytest

from zerollm.engine.fast import microkernel

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
