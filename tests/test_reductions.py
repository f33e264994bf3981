"""zerollm.nn.reductions: the row and column sums the NumPy engine's softmax, LayerNorm and linear layers use."""

import numpy as np
import pytest

from zerollm.nn.reductions import column_sums, row_means, row_sums


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.float16])
@pytest.mark.parametrize("shape", [(7,), (5, 64), (3, 4, 128), (2, 3, 0), (0, 9)])
def test_row_sums_and_means_are_numpys(dtype, shape):
    x = np.random.default_rng(0).standard_normal(shape).astype(dtype)
    tol = dict(rtol=2e-3 if dtype == np.float16 else 1e-5 if dtype == np.float32 else 1e-12, atol=1e-6)
    assert row_sums(x).shape == x.sum(axis=-1, keepdims=True).shape and row_sums(x).dtype == dtype
    np.testing.assert_allclose(row_sums(x), x.sum(axis=-1, keepdims=True, dtype=np.float64), **tol)
    if x.shape[-1]:                                  # a mean of no numbers is NaN, as NumPy's (with its warning)
        np.testing.assert_allclose(row_means(x), x.mean(axis=-1, keepdims=True, dtype=np.float64), **tol)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_a_rows_sum_depends_on_that_row_alone(dtype):
    """The same bits whatever else the array holds: a KV cache's padding, a batch's other rows."""
    x = np.random.default_rng(1).standard_normal((6, 37, 100)).astype(dtype)
    full = row_sums(x)
    np.testing.assert_array_equal(row_sums(x[:, :5].copy()), full[:, :5])
    np.testing.assert_array_equal(row_sums(x[2:3]), full[2:3])
    np.testing.assert_array_equal(row_sums(x[:, 7:9, :]), full[:, 7:9])    # a strided view


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.float16])
@pytest.mark.parametrize("n", [0, 1, 300])
def test_column_sums_are_numpys(dtype, n):
    x = np.random.default_rng(2).standard_normal((n, 48)).astype(dtype)
    got = column_sums(x)
    assert got.shape == (48,) and got.dtype == dtype
    if dtype == np.float16:                           # no BLAS for float16: NumPy's own sum, bit for bit
        np.testing.assert_array_equal(got, x.sum(axis=0))
    else:
        np.testing.assert_allclose(got, x.sum(axis=0, dtype=np.float64), rtol=1e-5, atol=1e-5)
