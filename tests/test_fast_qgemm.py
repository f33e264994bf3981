"""The fast engine's integer GEMM for many rows of x (zerollm.engine.fast.qgemm, issue #61): a prompt's prefill
multiplies the blocks as stored, register-blocked, where it used to decode W in slabs for BLAS.

It computes the decode kernels' integer sums (x rounded to the same 8-bit blocks), so each row of its y equals
what the decode kernels give for that row alone, up to the order of the float sums; and it is within
INT8_TOLERANCE of the NumPy reference (dequantize, then BLAS). Shapes are odd on purpose: 67 rows of W (two
threads cannot split them evenly, slabs cut short), N not a multiple of the 4 rows of a tile step, and K = 1280
(five super-blocks: two chunks of K, the second short).
"""

import numpy as np
import pytest

from tests.test_gguf import GPT2, LLAMA
from zerollm.engine import use_engine
from zerollm.engine.amp import exact_block_products
from zerollm.engine.threads import limit_threads
from zerollm.generation.decode import generate
from zerollm.generation.sample import Sampling
from zerollm.interop import kquant, quant
from zerollm.interop.gguf import export_gguf
from zerollm.interop.gguf_load import load_gguf
from zerollm.model.gpt import GPT, GPTConfig
from zerollm.nn.linear import quantized_matmul
from zerollm.tokenizers import ByteTokenizer

fast = pytest.importorskip("zerollm.engine.fast.quant")
from zerollm.engine.fast import jit, qgemm  # noqa: E402  (numba: the line above checks it is there)

KINDS = ("q8_0", "q4_0", "q4_K", "q5_K", "q6_K")
K = 1280

pytestmark = pytest.mark.skipif(not jit.BYTE_PRODUCTS, reason="the integer GEMM is written for x86 with AVX2; "
                                "elsewhere a prefill keeps the BLAS slabs (tests/test_fast_quant.py)")


def matrix(kind, rows, rng):
    """rows x K of a kind, every scale in use: row r scaled by r's step from 1e-6 to 3."""
    w = rng.standard_normal((rows, K)) * np.linspace(1e-6, 3, rows)[:, None]
    blocks = kquant.KQuantMatrix if kind.endswith("K") else quant.QuantizedMatrix
    return blocks.from_float(w, kind)


def spy(monkeypatch):
    """The kinds of the integer GEMMs called from now on (each still runs)."""
    calls = []

    def kind_of(name, args):                                       # q45_k(..., fifth): Q5_K when fifth
        if name == "q45_k":
            return "q5_K" if args[-1] else "q4_K"
        return "q6_K" if name == "q6_k" else name

    for name in ("q8_0", "q4_0", "q45_k", "q6_k"):
        real = getattr(qgemm, name)
        monkeypatch.setattr(qgemm, name, lambda *a, real=real, name=name: calls.append(kind_of(name, a)) or real(*a))
    return calls


@pytest.fixture(scope="module")
def matrices():
    rng = np.random.default_rng(3)
    return {kind: matrix(kind, 67, rng) for kind in KINDS}


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("N", [8, 32, 33, 64, 100])
@pytest.mark.parametrize("kind", KINDS)
def test_qgemm_equals_the_decode_kernels_row_by_row(monkeypatch, matrices, kind, N, threads):
    calls = spy(monkeypatch)
    w = matrices[kind]
    rng = np.random.default_rng(N)
    x = rng.standard_normal((N, K)).astype(np.float32)
    x[N - 1, :256] = 0                                             # a block of zeros in the tail row: scale 0
    with limit_threads(threads):
        got = fast.quantized_matmul(x, w)                         # ROWS_FROM rows or more: the integer GEMM
        rows = np.concatenate([fast.quantized_matmul(x[n:n + 1], w) for n in range(N)])   # the decode kernels
    ref = quantized_matmul.reference(x, w)
    assert calls == [kind] and got.shape == (N, 67) and got.dtype == np.float32
    np.testing.assert_allclose(got, rows, rtol=1e-5, atol=1e-6 * np.abs(ref).max())
    err = np.abs(got - ref).max() / np.abs(ref).max()
    assert 1e-5 < err <= fast.INT8_TOLERANCE                       # x in 8 bits: near the float product, not it


@pytest.mark.parametrize("kind", KINDS)
def test_many_rows_go_to_qgemm_in_inference_and_to_float_products_in_training(monkeypatch, matrices, kind):
    """quantized_matmul hands qgemm.ROWS_FROM rows or more to the integer GEMM, fewer to the decode kernels; a model
    in train mode (exact_block_products) keeps its float products, the reference's numbers up to the order of
    the sums."""
    calls = spy(monkeypatch)
    w = matrices[kind]
    x = np.random.default_rng(1).standard_normal((qgemm.ROWS_FROM, K)).astype(np.float32)
    ref = quantized_matmul.reference(x, w)
    fast.quantized_matmul(x[:-1], w)
    assert calls == []
    got = fast.quantized_matmul(x, w)
    assert calls == [kind] and np.abs(got - ref).max() <= fast.INT8_TOLERANCE * np.abs(ref).max()
    with exact_block_products():
        trained = fast.quantized_matmul(x, w)
    assert calls == [kind] and np.abs(trained - ref).max() <= 1e-5 * np.abs(ref).max()


@pytest.mark.parametrize("kind", ["q8_0", "q4_0"])
def test_an_odd_number_of_blocks_a_row_keeps_the_blas_slabs(monkeypatch, kind):
    """The integer GEMM takes Q8_0 / Q4_0 blocks two at a time: a row of 3 blocks (K = 96) goes to the BLAS slabs,
    the reference's numbers up to the order of the sums."""
    calls = spy(monkeypatch)
    rng = np.random.default_rng(4)
    w = quant.QuantizedMatrix.from_float(rng.standard_normal((67, 96)), kind)
    x = rng.standard_normal((fast.SLAB_FROM, 96)).astype(np.float32)
    got, ref = fast.quantized_matmul(x, w), quantized_matmul.reference(x, w)
    assert calls == [] and np.abs(got - ref).max() <= 1e-5 * np.abs(ref).max()


def _model(layout):
    cfg = GPTConfig(**{"vocab_size": 260, "block_size": 64, "n_layer": 2, "n_head": 4, "n_embd": 256, **layout})
    return GPT(cfg, seed=0).eval()


@pytest.mark.parametrize("layout, ftype", [(GPT2, "q4_0"), (dict(LLAMA, n_kv_head=2, n_inner=512), "q4_K_M")],
                         ids=["gpt2-q4_0", "llama-q4_K_M"])
def test_a_long_prompt_s_prefill_through_qgemm_keeps_logits_and_greedy_tokens(monkeypatch, tmp_path, layout, ftype):
    """A 40-token prompt (a prefill) on a GGUF file: the fast engine's logits within
    INT8_TOLERANCE of the NumPy engine's dequantized copy, through the integer GEMM (in the Llama Q4_K_M file,
    attn_v and ffn_down are Q6_K), and the same greedy tokens."""
    calls = spy(monkeypatch)
    path = tmp_path / "m.gguf"
    export_gguf(_model(layout), path, tokenizer=ByteTokenizer(["<|endoftext|>"]), quant_kind=ftype)
    prompt = np.random.default_rng(2).integers(0, 256, (1, 40))
    out = {}
    for engine, blocks in (("fast", True), ("numpy", False)):
        model, _, _ = load_gguf(path, quantized=blocks)
        with use_engine(engine):
            logits = model.forward(prompt)[0][0]
            tokens = [int(t[0]) for t in generate(model, prompt, 4, Sampling(0.0))]
        out[engine] = logits, tokens
    (got, fast_tokens), (want, numpy_tokens) = out["fast"], out["numpy"]
    assert set(calls) >= ({"q4_0"} if ftype == "q4_0" else {"q4_K", "q6_K"})
    assert 1e-5 * np.abs(want).max() < np.abs(got - want).max() <= fast.INT8_TOLERANCE * np.abs(want).max()
    assert fast_tokens == numpy_tokens
