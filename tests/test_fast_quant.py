"""The fast engine's quantized matmul (zerollm.engine.fast.quant) against the NumPy reference, and decoding
a GGUF file on it (issue #61).

Inference multiplies with the activations rounded to Q8_0 blocks and integer products per block, as
llama.cpp does: checked exactly against that arithmetic written in NumPy, and within INT8_TOLERANCE of the
reference (dequantize, then BLAS). A model in train mode (a QLoRA base) gets float products instead.
Shapes are odd on purpose: rows that two threads cannot split evenly, K = 3 blocks.
"""

import numpy as np
import pytest

from tests.test_gguf import GPT2, LLAMA, tiny, written
from zerollm.engine import use_engine
from zerollm.engine.amp import exact_block_products
from zerollm.engine.threads import limit_threads
from zerollm.generation.decode import generate
from zerollm.generation.sample import Sampling
from zerollm.interop import quant
from zerollm.interop.gguf_load import load_gguf
from zerollm.nn.linear import quantized_matmul

fast = pytest.importorskip("zerollm.engine.fast.quant")
from zerollm.engine.fast import jit        # noqa: E402  (numba: the line above checks it is there)


def int8_products(x, w):
    """What the integer kernel computes, in NumPy: x rounded to Q8_0 blocks (float32 scale max|x| / 127,
    halves away from zero), int32 dot products per block, times both scales, summed over the blocks."""
    N, K = x.shape
    xb = x.reshape(N, K // 32, 32)
    e = np.abs(xb).max(axis=2) / np.float32(127)
    inv = np.divide(np.float32(1), e, out=np.zeros_like(e), where=e > 0)
    v = xb * inv[:, :, None]
    p = np.trunc(v + np.where(v >= 0, np.float32(0.5), np.float32(-0.5))).astype(np.int64)
    q = np.rint(w.dequantize() / np.repeat(w.scales, 32, axis=1)).astype(np.int64)   # the codes, q or c - 8
    q = q.reshape(w.shape[0], K // 32, 32)
    sums = np.einsum("nbj,rbj->nrb", p, q).astype(np.float64)                        # exact integers
    return (sums * e[:, None, :] * w.scales[None, :, :]).sum(axis=2)


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("N", [1, 5])
@pytest.mark.parametrize("kind", ["q8_0", "q4_0"])
def test_integer_kernel_equals_the_same_arithmetic_in_numpy(kind, N, threads):
    rng = np.random.default_rng(7)
    w = quant.QuantizedMatrix.from_float(rng.standard_normal((131, 96)), kind)     # 131 rows: no even split
    x = rng.standard_normal((N, 96)).astype(np.float32)
    x[0, :32] = 0                                                                  # a block of zeros: scale 0
    with limit_threads(threads):
        got = fast.quantized_matmul(x, w)
    ref = quantized_matmul.reference(x, w)
    assert got.shape == (N, 131) and got.dtype == np.float32
    np.testing.assert_allclose(got, int8_products(x, w), rtol=1e-5, atol=1e-5 * np.abs(ref).max())
    err = np.abs(got - ref).max() / np.abs(ref).max()
    assert 0 < err <= fast.INT8_TOLERANCE              # rounded activations: close to, not equal to, float products


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("K", [96, 128], ids=["odd-blocks", "block-pairs"])
def test_q4_0_through_vpmaddubsw_equals_the_16_bit_kernel(monkeypatch, K, threads):
    """On x86 with AVX2 Q4_0 multiplies 8-bit activations with vpmaddubsw (jit.BYTE_PRODUCTS): two blocks at a time
    (_Q4_PAIRS) when a row has an even number of blocks, else one at a time; elsewhere the 16-bit lanes of
    _row_dot_q4. The same integer sum a block (its eight lanes split differently), so y agrees to float32's
    rounding of the running sums, and all equal the same arithmetic written in NumPy."""
    if not jit.BYTE_PRODUCTS:
        pytest.skip("this host has no AVX2 (or numba compiles for another CPU): only the 16-bit kernel runs here")
    calls = []
    serial, threaded = fast._Q4_PAIRS
    monkeypatch.setattr(fast, "_Q4_PAIRS", (lambda *a: calls.append(1) or serial(*a),
                                            lambda *a: calls.append(2) or threaded(*a)))
    rng = np.random.default_rng(11)
    w = quant.QuantizedMatrix.from_float(rng.standard_normal((131, K)), "q4_0")
    x = rng.standard_normal((3, K)).astype(np.float32)
    x[1, 32:64] = 0
    with limit_threads(threads):
        got = fast.quantized_matmul(x, w)
        assert len(calls) == (K // 32 + 1) % 2                 # pairs for 4 blocks, one at a time for 3
        monkeypatch.setattr(jit, "BYTE_PRODUCTS", False)
        lanes16 = fast.quantized_matmul(x, w)
    assert not np.array_equal(got, lanes16)            # (the two did take different paths)
    np.testing.assert_allclose(got, lanes16, rtol=1e-5, atol=1e-6 * np.abs(got).max())
    np.testing.assert_allclose(got, int8_products(x, w), rtol=1e-5, atol=1e-5 * np.abs(got).max())


@pytest.mark.parametrize("kind", ["q8_0", "q4_0"])
def test_float_products_in_train_mode_equal_the_reference(kind):
    rng = np.random.default_rng(8)
    w = quant.QuantizedMatrix.from_float(rng.standard_normal((67, 64)), kind)
    x = rng.standard_normal((3, 64)).astype(np.float32)
    ref = quantized_matmul.reference(x, w)
    with exact_block_products():
        got = fast.quantized_matmul(x, w)
    assert np.abs(got - ref).max() <= 1e-5 * np.abs(ref).max()


@pytest.mark.parametrize("kind", ["q8_0", "q4_0"])
def test_many_rows_multiply_decoded_slabs_through_blas(kind):
    """From SLAB_FROM rows of x in train mode (a QLoRA base's batch), W is decoded in slabs of 256 rows (300: one
    slab cut short) and BLAS multiplies in float: the reference's numbers up to the order of the sums. (In
    inference, and on AVX2, the integer GEMM takes them: tests/test_fast_qgemm.py.)"""
    rng = np.random.default_rng(10)
    w = quant.QuantizedMatrix.from_float(rng.standard_normal((300, 64)), kind)
    x = rng.standard_normal((fast.SLAB_FROM, 64)).astype(np.float32)
    ref = quantized_matmul.reference(x, w)
    with exact_block_products():
        got = fast.quantized_matmul(x, w)
    assert got.shape == ref.shape and np.abs(got - ref).max() <= 1e-5 * np.abs(ref).max()


def test_a_model_in_train_mode_multiplies_its_blocks_in_float():
    """GPT's forward in train mode runs under exact_block_products (a QLoRA base's gradients are the reference's)."""
    model = tiny(LLAMA)
    w = quant.QuantizedMatrix.from_float(np.asarray(model.params["h.0.mlp.c_fc.weight"]).T, "q8_0")
    model.params["h.0.mlp.c_fc.weight"] = w
    idx = np.array([[1, 7, 42, 99, 5]])
    with use_engine("numpy"):
        ref = model.forward(idx)[0]
    with use_engine("fast"):
        trained = model.train().forward(idx)[0]
        inferred = model.eval().forward(idx)[0]
    assert np.abs(trained - ref).max() <= 1e-5 * np.abs(ref).max()
    assert 1e-4 * np.abs(ref).max() < np.abs(inferred - ref).max() <= fast.INT8_TOLERANCE * np.abs(ref).max()


@pytest.mark.parametrize("kind", ["q8_0", "q4_0"])
@pytest.mark.parametrize("layout", [GPT2, LLAMA], ids=["gpt2", "llama"])
def test_greedy_tokens_on_a_gguf_equal_the_numpy_engine_s(tmp_path, layout, kind):
    path = written(tmp_path, tiny(layout), kind)
    prompt = np.array([[1, 7, 42, 99, 5]])
    tokens = {}
    for engine in ("numpy", "fast"):
        with use_engine(engine):
            model, _, info = load_gguf(path)
            tokens[engine] = [int(t[0]) for t in generate(model, prompt, 12, Sampling(0.0))]
            assert bool(info["quantized"]) == (engine == "fast")
    assert tokens["fast"] == tokens["numpy"]


def test_decoding_one_row_multiplies_through_numpy_s_matrix_vector_product():
    """The fast linear layer leaves one row to NumPy (BLAS gemv streams w once; sgemm with M = 1 packs all
    of w first) and folds the bias into sgemm from two rows on."""
    from zerollm.engine.fast.linear import linear_forward
    rng = np.random.default_rng(9)
    w, b = rng.standard_normal((64, 96)).astype(np.float32), rng.standard_normal(96).astype(np.float32)
    assert linear_forward(rng.standard_normal((1, 1, 64)).astype(np.float32), w, b) is NotImplemented
    x = rng.standard_normal((2, 64)).astype(np.float32)
    y, _ = linear_forward(x, w, b)
    np.testing.assert_allclose(y, x @ w + b, rtol=1e-5, atol=1e-5)


def test_a_float_gguf_s_linear_weights_are_contiguous_as_blas_wants(tmp_path):
    """(in, out) C-contiguous, like a checkpoint's: BLAS reads them without a stride."""
    model, _, _ = load_gguf(written(tmp_path, tiny(GPT2), "f32"))
    for name in ("h.0.attn.c_attn.weight", "h.1.mlp.c_proj.weight"):
        w = model.params[name]
        assert w.flags.c_contiguous and w.shape == np.asarray(tiny(GPT2).params[name]).shape


@pytest.mark.skipif(not jit.BYTE_PRODUCTS, reason="Q4_0's pair kernel is written for x86 with AVX2")
@pytest.mark.parametrize("kind", ["q8_0", "q4_0"])
@pytest.mark.parametrize("threads", [1, 2])
def test_four_streams_of_rows_give_each_row_s_one_row_product_bit_for_bit(kind, threads):
    """A decode step's Q8_0 / Q4_0 rows go four at a time, a quarter of a thread's rows apart (kquant.py's
    _QUARTERS), the rest one by one: every row gets exactly what the one-row intrinsic gives it."""
    import numba

    @numba.njit(cache=False)
    def q8_rows(codes, d, xq, e, lanes, y):
        for r in range(codes.shape[0]):
            for n in range(xq.shape[0]):
                y[n, r] = fast._row_dot_q8(codes[r], d[r], xq[n], e[n], d.shape[1])

    @numba.njit(cache=False)
    def q4_rows(codes, d, xq, e, lanes, y):
        for r in range(codes.shape[0]):
            for n in range(xq.shape[0]):
                y[n, r] = fast._row_dot_q4_pairs(codes[r], d[r], xq[n], e[n], lanes[n], d.shape[1])

    one_at_a_time = q8_rows if kind == "q8_0" else q4_rows

    x = np.random.default_rng(9).standard_normal((2, 128)).astype(np.float32)
    if kind == "q8_0":
        (xq, e), lanes = fast._x_int16(x), np.zeros((2, 1), np.int32)
    else:
        xq, e, lanes = fast._x_pairs(x)
    for rows in (1, 3, 4, 5, 8, 11, 131):
        w = quant.QuantizedMatrix.from_float(np.random.default_rng(rows).standard_normal((rows, 128)), kind)
        want = np.full((2, rows), np.nan, np.float32)
        one_at_a_time(w.codes, w.scales, xq, e, lanes, want)
        with limit_threads(threads):
            got = fast.integer_product(x, w, threads)
        assert np.isfinite(want).all() and np.abs(want).max() > 0
        np.testing.assert_array_equal(got, want, err_msg=f"{kind}, {rows} rows, {threads} threads")


@pytest.mark.parametrize("block", [32, 256])
@pytest.mark.parametrize("dtype", [np.int8, np.int16, np.float32])
def test_x_in_8_bit_blocks_is_max_over_127_and_halves_rounded_away_from_zero(block, dtype):
    """The activations' rounding that every integer kernel starts from (Q8_0 blocks of 32 in quant.py, Q8_K blocks
    of 256 with the sums of each 16 codes in kquant.py), against its definition in NumPy: e = max|x| / 127 of each
    block (within an ulp: the kernel multiplies by 1 / 127), code = x / e rounded to the nearest whole number with
    halves away from zero, a block of zeros all zero codes. Rows whose largest |x| sits at every lane of the
    kernel's eight running maxima, halves placed on purpose, and a block all zero."""
    from zerollm.engine.fast import kquant as kernels
    rng = np.random.default_rng(block)
    N, K = 9, 4 * block
    x = rng.standard_normal((N, K)).astype(np.float32)
    for n in range(8):
        x[n, n::block] = 5.0 * (1 + n)                        # the largest at lane n of the eight maxima
    x[8, :block] = 0
    x[0, 1] = 5.0 * 63.5 / 127                               # exactly half a step: rounds away from zero
    x[0, 2] = -x[0, 1]
    xq = np.full((N, K), 99, dtype)
    e = np.zeros((N, K // block), np.float32)
    if block == 32:
        fast._quantize_rows(x, xq, e)
    else:
        sums = np.zeros((N, K // 16), np.int32)
        kernels._quantize_rows(x, xq, e, sums)
        np.testing.assert_array_equal(sums, xq.astype(np.int32).reshape(N, -1, 16).sum(-1))
    blocks = x.reshape(N, -1, block)
    want_e = np.abs(blocks).max(-1) / np.float32(127)
    np.testing.assert_allclose(e, want_e, rtol=2e-7, atol=0)
    v = blocks / np.where(e > 0, e, 1)[..., None]
    want = np.where(e[..., None] > 0, np.trunc(v + np.where(v >= 0, 0.5, -0.5)), 0).reshape(N, K)
    assert np.abs(xq.astype(np.float64) - want).max() <= 1                 # 1 / e as the kernel rounds it
    exact = np.abs(np.abs(v) % 1 - 0.5).reshape(N, K) > 1e-3              # not near a half: the code is sure
    np.testing.assert_array_equal(xq[exact], want[exact])
    assert xq[0, 1] == 64 and xq[0, 2] == -64 and (xq[8, :block] == 0).all() and np.abs(xq).max() == 127
