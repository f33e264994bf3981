"""k-quants (Q4_K, Q5_K, Q6_K), checked against the two programs that define them.

- gguf.quants (llama.cpp's Python package) dequantizes them: ours gives the same float32 numbers, to the bit;
- llama.cpp's C library quantizes them (quantize_row_q4_K_ref ..., what llama-quantize runs without an
  importance matrix): ours writes the same bytes, block for block, and a whole zerollm q4_K_M / q5_K_M / q6_K
  file holds the same tensors, type for type and byte for byte, as llama.cpp's own quantization of our f32
  file;
- llama.cpp runs zerollm's k-quant files, and zerollm runs llama.cpp's Q4_K_M / Q5_K_M / Q6_K / Q8_0 files,
  with the same greedy tokens and logits within a stated tolerance.
The models are 2 layers of width 256 (a super-block is 256 numbers, so every row is whole super-blocks).
"""

import ctypes
import os

import numpy as np
import pytest

from tests.test_gguf import GPT2, LLAMA, tiny
from tests.tiny_runs import run_main
from zerollm.engine import use_engine
from zerollm.interop import kquant, quant
from zerollm.interop.gguf import export_gguf, read_gguf
from zerollm.interop.gguf_load import load_gguf
from zerollm.io.errors import ZeroLLMError
from zerollm.teach.fmt import number
from zerollm.tokenizers import ByteTokenizer

gguf = pytest.importorskip("gguf")
llama_cpp = pytest.importorskip("llama_cpp", reason='llama.cpp\'s Python binding: pip install -e ".[test]"')

KINDS = ("q4_K", "q5_K", "q6_K")
FALLBACKS = ("q5_0", "q5_1")             # llama.cpp's types for rows that are not whole super-blocks
WIDE = dict(n_embd=256, n_head=4)
LAYOUTS = {"gpt2": dict(GPT2, **WIDE, block_size=64), "llama": dict(LLAMA, **WIDE, n_kv_head=2, n_inner=512),
           # as wide as the README's presets: rows of 128 and 344 numbers, none whole super-blocks (344: not even 32s)
           "llama-128": dict(LLAMA, n_embd=128, n_head=4, n_kv_head=2, n_inner=344)}
# what llama.cpp calls each file type, and the --quant that writes the same file with zerollm
FTYPES = {"Q4_K_M": "q4_K_M", "Q5_K_M": "q5_K_M", "Q6_K": "q6_K", "Q8_0": "q8_0"}


def ggml_type(kind):
    return getattr(gguf.GGMLQuantizationType, kind.upper())


def reference_quantize(x, kind):
    """llama.cpp's own quantize_row_{kind}_ref, called in its shared library through ctypes."""
    lib = ctypes.CDLL(os.path.join(os.path.dirname(llama_cpp.__file__), "lib", "libggml-base.so"))
    x = np.ascontiguousarray(x, dtype=np.float32)
    out = np.zeros((x.size // kquant.BLOCK_NUMBERS[kind], kquant.BLOCK_BYTES[kind]), np.uint8)
    getattr(lib, f"quantize_row_{kind}_ref")(x.ctypes.data_as(ctypes.c_void_p), out.ctypes.data_as(ctypes.c_void_p),
                                             ctypes.c_int64(x.size))
    return out.reshape(*x.shape[:-1], -1)


def cases(rng):
    x = rng.standard_normal((24, 512)).astype(np.float32)
    spiky = x.copy()
    spiky[:, ::37] *= 50                                   # one big number per sub-block
    part_zero = x.copy()
    part_zero[:, :300] = 0                                 # whole sub-blocks of zeros, a super-block half zero
    return {"normal": x, "uniform": rng.uniform(-1, 1, x.shape).astype(np.float32), "positive": np.abs(x) + 1,
            "spiky": spiky, "zeros": part_zero, "tiny": x * 1e-6}


def model(layout, seed=0):
    m = tiny(dict(LAYOUTS[layout], tie_embeddings=False), vocab=257, seed=seed)
    # logits far apart, so that one argmax stands out; untied, or a random model repeats its last input token
    m.params["lm_head.weight"] *= 40.0
    return m


def llama_quantize(src, dst, ftype):
    params = llama_cpp.llama_model_quantize_default_params()
    params.ftype, params.nthread = getattr(llama_cpp, f"LLAMA_FTYPE_MOSTLY_{ftype}"), 1
    assert llama_cpp.llama_model_quantize(str(src).encode(), str(dst).encode(), ctypes.byref(params)) == 0
    return dst


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    """{layout: (model, zerollm's f32 file)} for both layouts."""
    tmp, tok = tmp_path_factory.mktemp("kquant"), ByteTokenizer(["<|endoftext|>"])
    out = {}
    for layout in LAYOUTS:
        m = model(layout)
        out[layout] = m, tmp / f"{layout}-f32.gguf"
        export_gguf(m, out[layout][1], tokenizer=tok)
    return out


def llama(path):
    return llama_cpp.Llama(model_path=str(path), n_threads=1, verbose=False, n_ctx=32, logits_all=True)


def assert_agree(want, got):
    """llama.cpp's logits ``got`` (T, V) against zerollm's ``want``: within 1% of their spread everywhere
    (llama.cpp rounds the activations to 8 bits before a quantized matmul, zerollm does not: 0.3-0.8% of
    the spread measured on these models), and the same argmax at every position where zerollm's top two are
    more than twice that apart (a random model has near ties, where a 1% difference may swap them; at
    least a third of the positions must be clear)."""
    tol = 1e-2 * (want.max() - want.min())
    assert np.abs(got - want).max() <= tol
    top2 = np.sort(want, axis=1)[:, -2:]
    clear = top2[:, 1] - top2[:, 0] > 2 * tol
    assert clear.mean() >= 1 / 3
    assert np.array_equal(got.argmax(axis=1)[clear], want.argmax(axis=1)[clear])
    return clear


# ----------------------------------------------------------------------------
# the blocks

@pytest.mark.parametrize("kind", KINDS + FALLBACKS)
def test_dequantize_equals_gguf_package_on_random_blocks(kind):
    """Random bytes are a valid block of every kind once its float16 scales are finite."""
    rng = np.random.default_rng(3)
    blocks = rng.integers(0, 256, (64, kquant.BLOCK_BYTES[kind]), dtype=np.uint8)
    scales = rng.standard_normal((64, 2)).astype(np.float16).view(np.uint8)
    where = {"q6_K": [slice(208, 210)], "q5_0": [slice(0, 2)]}.get(kind, [slice(0, 2), slice(2, 4)])
    for at, s in zip(where, (scales[:, :2], scales[:, 2:])):
        blocks[:, at] = s
    ours = kquant.dequantize(blocks.reshape(4, -1), kind)
    theirs = gguf.quants.dequantize(blocks.reshape(4, -1), ggml_type(kind))
    assert ours.dtype == np.float32 and ours.shape == (4, 16 * kquant.BLOCK_NUMBERS[kind])
    assert np.array_equal(ours.view(np.int32), theirs.view(np.int32))            # to the bit


@pytest.mark.parametrize("kind", KINDS + FALLBACKS)
def test_quantizer_bytes_equal_llama_cpp(kind):
    """gguf.quants has no k-quant quantizer; llama.cpp's reference is the one to equal, byte for byte (and
    gguf.quants' Q5_0 / Q5_1 quantizers too)."""
    for name, x in cases(np.random.default_rng(1)).items():
        ours = quant.quantize(x, kind)
        assert ours.shape == (24, 512 // kquant.BLOCK_NUMBERS[kind] * kquant.BLOCK_BYTES[kind])
        assert np.array_equal(ours, reference_quantize(x, kind)), name
        if kind in FALLBACKS:
            assert np.array_equal(ours, gguf.quants.quantize(x, ggml_type(kind))), name
        if name == "tiny":                     # the scales underflow float16 there, in llama.cpp's bytes too
            continue
        err = np.abs(quant.dequantize(ours, kind, x.shape) - x).max(axis=1)
        bound = {"q4_K": 0.2, "q5_K": 0.1, "q6_K": 0.05, "q5_0": 0.07, "q5_1": 0.05}[kind]
        assert (err <= bound * np.abs(x).max(axis=1)).all(), name


def test_a_row_of_the_wrong_length_is_refused_in_one_line():
    with pytest.raises(ZeroLLMError, match="multiple of 256 numbers for k-quants"):
        quant.quantize(np.ones((2, 96)), "q4_K")
    with pytest.raises(ZeroLLMError, match="whole 176-byte blocks a row, got 170 bytes; the file is"):
        quant.dequantize(np.zeros((2, 170), np.uint8), "q5_K", (2, 256))
    with pytest.raises(ZeroLLMError, match="holds 512 numbers, not the 1024"):
        kquant.KQuantMatrix.from_bytes(np.zeros((2, 210), np.uint8), "q6_K", (2, 512))
    w = kquant.KQuantMatrix.from_float(np.arange(2 * 512, dtype=np.float32).reshape(2, 512) / 512, "q6_K")
    assert np.abs(w.dequantize() - np.arange(1024).reshape(2, 512) / 512).max() < 0.03      # 1.5% of 2
    assert np.array_equal(w[np.array([[1]])], w.dequantize()[None, 1:2])


# ----------------------------------------------------------------------------
# files: zerollm's and llama.cpp's quantization of the same f32 file are the same file

@pytest.mark.parametrize("layout", list(LAYOUTS))
@pytest.mark.parametrize("ftype", ["Q4_K_M", "Q5_K_M", "Q6_K"])
def test_zerollm_writes_the_tensors_llama_quantize_writes(tmp_path, files, layout, ftype):
    """Every tensor of `zerollm convert --quant q4_K_M` (etc.) has the type and the bytes llama.cpp gives it
    when it quantizes zerollm's f32 file: the mix (which tensors get Q6_K) and the quantizer both."""
    m, f32 = files[layout]
    theirs = {t.name: t for t in gguf.GGUFReader(llama_quantize(f32, tmp_path / "theirs.gguf", ftype)).tensors}
    ours_path = tmp_path / "ours.gguf"
    export_gguf(m, ours_path, tokenizer=ByteTokenizer(["<|endoftext|>"]), quant_kind=FTYPES[ftype])
    ours = {t.name: t for t in gguf.GGUFReader(ours_path).tensors}
    assert sorted(ours) == sorted(theirs)
    assert {n: ours[n].tensor_type.name for n in ours} == {n: theirs[n].tensor_type.name for n in theirs}
    assert {t.tensor_type.name for t in ours.values()} != {"F32"}               # quantized at all
    for n in theirs:
        assert np.array_equal(ours[n].data, theirs[n].data), n


@pytest.mark.parametrize("layout", list(LAYOUTS))
@pytest.mark.parametrize("ftype", list(FTYPES))
def test_zerollm_runs_llama_cpp_files_as_llama_cpp_does(tmp_path, files, layout, ftype):
    """llama.cpp's Q4_K_M / Q5_K_M / Q6_K / Q8_0 of our f32 file: zerollm reads every tensor as gguf.quants
    dequantizes it, and its NumPy logits at every position of the prompt agree with llama.cpp's
    (assert_agree)."""
    path = llama_quantize(files[layout][1], tmp_path / f"{ftype}.gguf", ftype)
    _, tensors = read_gguf(path)
    for t in gguf.GGUFReader(path).tensors:
        if t.tensor_type.name in ("Q4_K", "Q5_K", "Q6_K", "Q8_0"):
            want = gguf.quants.dequantize(t.data, t.tensor_type).reshape(tensors[t.name].shape)
            assert np.array_equal(quant.dequantize(tensors[t.name].data, tensors[t.name].kind, want.shape), want)
    back, _, info = load_gguf(path, quantized=False)
    kinds = {"Q4_K_M": {"q4_K", "q6_K"}, "Q5_K_M": {"q5_K", "q6_K"}, "Q6_K": {"q6_K"}, "Q8_0": {"q8_0"}}[ftype]
    if layout == "llama-128":                       # no row is whole super-blocks: llama.cpp's fallbacks,
        kinds = {kquant.FALLBACK.get(k, k) for k in kinds} | {"f16"}      # and F16 for ffn_down's 344
    assert set(info["kinds"]) - {"f32"} == kinds
    prompt = [int(i) for i in np.random.default_rng(0).integers(0, 256, 20)]
    with use_engine("numpy"):
        want = back.forward(np.array([prompt]))[0][0]
    llm = llama(path)
    llm.eval(prompt)
    assert_agree(want, np.array(llm.scores[:len(prompt)]))


@pytest.mark.parametrize("layout,kind", [("gpt2", "q4_K"), ("gpt2", "q6_K"), ("gpt2", "q4_K_M"), ("llama", "q5_K"),
                                         ("llama", "q4_K_M"), ("llama-128", "q5_K_M")])
def test_llama_cpp_runs_zerollm_k_files_with_the_same_greedy_tokens(tmp_path, files, layout, kind):
    """A zerollm k-quant file in llama.cpp (every type, both layouts, and the fallbacks of a narrow model): its
    logits along zerollm's 8-token greedy continuation agree (assert_agree),
    and llama.cpp's own greedy continuation, through its KV cache, is zerollm's up to the first step where
    zerollm's top two are too close to call."""
    m = files[layout][0]
    path = tmp_path / f"{kind}.gguf"
    export_gguf(m, path, tokenizer=ByteTokenizer(["<|endoftext|>"]), quant_kind=kind)
    back, _, _ = load_gguf(path, quantized=False)
    ours = [72, 101, 108, 108, 111]
    with use_engine("numpy"):
        for _ in range(8):
            ours.append(int(np.argmax(back.forward(np.array([ours]))[0][0, -1])))
        want = back.forward(np.array([ours]))[0][0]
    llm = llama(path)
    llm.eval(ours)
    clear = assert_agree(want, np.array(llm.scores[:len(ours)]))
    llm.reset()
    theirs = ours[:5]
    llm.eval(theirs)
    for _ in range(8):
        theirs.append(int(np.argmax(llm.scores[llm.n_tokens - 1])))
        llm.eval(theirs[-1:])
    sure = int(np.argmin(clear[4:-1])) if not clear[4:-1].all() else 8       # steps before the first near tie
    assert theirs[:5 + sure] == ours[:5 + sure] and len(set(ours[5:])) > 2


# ----------------------------------------------------------------------------
# what zerollm refuses

def test_a_tensor_type_zerollm_does_not_read_is_named_in_one_line(tmp_path):
    """A Q2_K tensor (llama.cpp writes it in Q2_K / Q3_K files): refused by name and type, with the fix."""
    path = tmp_path / "q2.gguf"
    w = gguf.GGUFWriter(str(path), "llama")
    w.add_tensor("token_embd.weight", np.zeros((4, 84), np.uint8), raw_dtype=gguf.GGMLQuantizationType.Q2_K)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    with pytest.raises(ZeroLLMError) as err:
        read_gguf(path)
    msg = str(err.value)
    assert "tensor token_embd.weight is of type Q2_K; zerollm reads F32, F16, Q8_0, Q4_0, Q5_0, Q5_1, Q4_K, Q5_K and Q6_K" in msg
    assert "\n" not in msg


def test_a_k_block_with_an_infinite_scale_is_refused_by_name(tmp_path, files):
    """A super-block whose float16 d is inf damages its 256 numbers: the load names the tensor."""
    m, _ = files["llama"]
    path = tmp_path / "bad.gguf"
    export_gguf(m, path, tokenizer=ByteTokenizer(["<|endoftext|>"]), quant_kind="q4_K")
    t = next(t for t in gguf.GGUFReader(path).tensors if t.name == "blk.1.ffn_up.weight")
    data = bytearray(path.read_bytes())
    data[t.data_offset:t.data_offset + 2] = np.array([np.inf], np.float16).view(np.uint8).tobytes()
    path.write_bytes(bytes(data))
    with pytest.raises(ZeroLLMError, match="blk.1.ffn_up.weight"):
        load_gguf(path)


# ----------------------------------------------------------------------------
# the fast engine's kernels

@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("threads", [1, 2])
def test_fast_kernels_equal_the_numpy_reference(kind, threads):
    """engine/fast/kquant.py multiplies by the blocks as stored; the reference dequantizes, then BLAS. Rows of
    W from a random matrix (every scale, min and code in use; one row of scale 1e-6), x of 1 and 3 rows, on 1
    and 2 threads, and of 40 rows (a prefill: W decoded in slabs of 256 rows for BLAS). Integer products (x in 8-bit blocks, llama.cpp's way) within the Q8_0 / Q4_0 kernels'
    tolerance of the largest entry; float products (a model in train mode) to float32 rounding."""
    fast = pytest.importorskip("zerollm.engine.fast.quant")
    from zerollm.engine.amp import exact_block_products
    from zerollm.engine.threads import limit_threads
    from zerollm.nn.linear import quantized_matmul
    rng = np.random.default_rng(5)
    w = kquant.KQuantMatrix.from_float(rng.standard_normal((131, 512)) * np.linspace(1e-6, 3, 131)[:, None], kind)
    for N in (1, 3):
        x = rng.standard_normal((N, 512)).astype(np.float32)
        want = quantized_matmul.reference(x, w)
        with limit_threads(threads):
            got = fast.quantized_matmul(x, w)
        assert got is not NotImplemented and got.shape == (N, 131)
        assert np.abs(got - want).max() <= fast.INT8_TOLERANCE * np.abs(want).max()
        assert np.abs(got - want).max() > 1e-5 * np.abs(want).max()             # x was rounded: not the float path
        with exact_block_products():
            got = fast.quantized_matmul(x, w)
        assert np.allclose(got, want, rtol=1e-5, atol=1e-5 * np.abs(want).max())
    x = rng.standard_normal((40, 512)).astype(np.float32)    # a prefill: engine/fast/qgemm.py (AVX2), else slabs
    got, want = fast.quantized_matmul(x, w), quantized_matmul.reference(x, w)
    assert np.abs(got - want).max() <= fast.INT8_TOLERANCE * np.abs(want).max()


@pytest.mark.parametrize("kind", KINDS)
def test_prefill_slabs_are_decoded_to_the_numpy_dequantizer_s_numbers_bit_for_bit(kind):
    """A prompt's rows multiply W decoded slab by slab by compiled decoders: rows r0..r1 (a slab cut short at the
    end, and one starting mid-matrix) equal the NumPy dequantizer's float32 numbers to the bit."""
    fk = pytest.importorskip("zerollm.engine.fast.kquant")
    rng = np.random.default_rng(8)
    w = kquant.KQuantMatrix.from_float(rng.standard_normal((300, 512)) * np.linspace(1e-6, 3, 300)[:, None], kind)
    want = w.dequantize()
    for r0, r1 in ((0, 256), (256, 300), (7, 20)):
        out = np.full((r1 - r0, 512), np.nan, np.float32)
        if kind == "q6_K":
            fk._decode_q6_k(w.blocks, r0, r1, out)
        else:
            fk._decode_q45_k(w.blocks, kind == "q5_K", r0, r1, out)
        assert np.array_equal(out.view(np.int32), want[r0:r1].view(np.int32))


@pytest.mark.parametrize("kind", ["q4_K", "q6_K"])
@pytest.mark.parametrize("threads", [1, 2])
def test_k_quants_through_vpmaddubsw_equal_the_float_lane_kernels(monkeypatch, threads, kind):
    """On x86 with AVX2 (jit.BYTE_PRODUCTS) Q4_K and Q6_K multiply x's codes as bytes (vpmaddubsw, then vpmaddwd by
    each sub-block's scale); elsewhere the codes are whole numbers in float32 lanes. Q4_K's integer sums are
    exact both ways, but the bytes kernel adds the super-blocks in 8 float lanes (one horizontal sum a row) where
    the float-lane kernel adds one float a super-block; Q6_K's float-lane sum of a super-block passes 2^24 and
    rounds where the bytes kernel's int32 does not: both equal to float32's rounding of the sums. Every scale,
    min and code in use, and a block of x all zeros."""
    pytest.importorskip("zerollm.engine.fast.quant")
    from zerollm.engine.fast import jit
    if not jit.BYTE_PRODUCTS:
        pytest.skip("this host has no AVX2 (or numba compiles for another CPU): only the float-lane kernel runs here")
    from zerollm.engine.fast import kquant as kernels
    from zerollm.engine.threads import limit_threads
    calls = []
    name = "_Q45K_BYTES" if kind == "q4_K" else "_Q6K_BYTES"
    serial, threaded = getattr(kernels, name)
    monkeypatch.setattr(kernels, name, (lambda *a: calls.append(1) or serial(*a),
                                        lambda *a: calls.append(2) or threaded(*a)))
    rng = np.random.default_rng(6)
    w = kquant.KQuantMatrix.from_float(rng.standard_normal((131, 512)) * np.linspace(1e-6, 3, 131)[:, None], kind)
    x = rng.standard_normal((3, 512)).astype(np.float32)
    x[1, 256:] = 0
    with limit_threads(threads):
        got = kernels.kquant_matmul(x, w)
        assert len(calls) == 1                                   # the bytes kernel ran
        monkeypatch.setattr(jit, "BYTE_PRODUCTS", False)
        lanes = kernels.kquant_matmul(x, w)
    assert len(calls) == 1 and np.abs(got).max() > 0
    np.testing.assert_allclose(got, lanes, rtol=1e-6, atol=1e-6 * np.abs(lanes).max())


# ----------------------------------------------------------------------------
# zerollm quantize --explain --kind q4_K

@pytest.mark.parametrize("lang", ["en", "zh"])
def test_quantize_explain_walks_through_a_q4_k_super_block(capsys, lang):
    """The walkthrough prints the bytes convert writes (the 12 packed scale bytes, sub-block 0's codes), the
    super-block's error next to Q4_0's on the same numbers, and gguf.quants reading the bytes back alike."""
    code, out, _ = run_main(["quantize", "--explain", "--kind", "q4_K", "--rows", "1", "--seed", "3", "--lang", lang],
                            capsys)
    assert code == 0
    x = (np.random.default_rng(3).standard_normal((1, 256)) * 0.5).astype(np.float32)
    raw = quant.quantize(x, "q4_K")[0]
    assert " ".join(f"{v:02x}" for v in raw[4:16]) in out                       # the six-bit scales, packed
    codes = (raw[16:48] & 15).reshape(4, 8)
    assert all(" ".join(f"{c:2d}" for c in row) in out for row in codes)         # sub-block 0's codes
    errors = {}
    for kind in ("q4_K", "q4_0"):
        back = quant.dequantize(quant.quantize(x, kind), kind, x.shape)
        errors[kind] = float(np.sqrt(np.mean((back - x) ** 2)))
        assert f"RMS {number(errors[kind], 5)}" in out or f"均方根 {number(errors[kind], 5)}" in out
    assert errors["q4_K"] < errors["q4_0"]
    assert ("完全相同" if lang == "zh" else "identical") in out


def test_quantize_explain_q4_k_needs_whole_super_blocks(capsys):
    code, _, err = run_main(["quantize", "--explain", "--kind", "q4_K", "--cols", "96"], capsys)
    assert code != 0 and err.strip().endswith("--cols must be a multiple of 256 (whole blocks), got 96")
    assert len(err.strip().splitlines()) == 1


@pytest.mark.parametrize("layout", ["gpt2", "llama"])
def test_fast_engine_runs_a_q4_k_m_file_in_its_blocks(tmp_path, files, layout):
    """--engine fast keeps the file's k-quant matrices as blocks (KQuantMatrix) and its logits agree with the
    NumPy engine's dequantized copy within the integer kernels' tolerance, the same argmax where clear."""
    pytest.importorskip("zerollm.engine.fast.quant")
    from zerollm.engine.fast.quant import INT8_TOLERANCE
    path = tmp_path / "m.gguf"
    export_gguf(files[layout][0], path, tokenizer=ByteTokenizer(["<|endoftext|>"]), quant_kind="q4_K_M")
    blocks, _, info = load_gguf(path, quantized=True)
    dense, _, _ = load_gguf(path, quantized=False)
    kept = [v for v in blocks.params.values() if isinstance(v, (kquant.KQuantMatrix, quant.StackedBlocks))]
    assert info["quantized"] == len(kept) and {m.kind for m in kept} >= {"q4_K"}
    prompt = np.array([[72, 101, 108, 108, 111, 32, 119, 111]])
    with use_engine("fast"):
        got = blocks.forward(prompt)[0][0]
    with use_engine("numpy"):
        want = dense.forward(prompt)[0][0]
    assert np.abs(got - want).max() <= INT8_TOLERANCE * np.abs(want).max()
    top2 = np.sort(want, axis=1)[:, -2:]
    clear = top2[:, 1] - top2[:, 0] > 2 * INT8_TOLERANCE * np.abs(want).max()
    assert np.array_equal(got.argmax(axis=1)[clear], want.argmax(axis=1)[clear])


def test_a_truncated_k_quant_file_is_one_line_from_the_cli(tmp_path, files, capsys):
    """A q4_K file cut inside its last super-block: `zerollm sample --gguf` says so in one line, no traceback."""
    path = tmp_path / "cut.gguf"
    export_gguf(files["llama"][0], path, tokenizer=ByteTokenizer(["<|endoftext|>"]), quant_kind="q4_K")
    path.write_bytes(path.read_bytes()[:-100])
    code, _, err = run_main(["sample", "--gguf", str(path), "--prompt", "a", "--max-new-tokens", "2"], capsys)
    assert code != 0 and "Traceback" not in err and len(err.strip().splitlines()) == 1
    assert str(path) in err and ("truncated" in err or "damaged" in err)


def test_a_q4_k_m_llama_file_keeps_q_k_v_of_different_kinds_in_their_own_blocks(tmp_path, files):
    """In a Llama Q4_K_M file attn_q / attn_k are Q4_K and attn_v Q6_K (where llama.cpp gives v more bits): the
    stacked c_attn keeps each piece in its own blocks (StackedBlocks), no linear weight is turned into float32,
    the fast engine's logits agree with the NumPy engine's dequantized copy, and greedy decoding gives the same
    tokens (the fused decode block multiplies the parts one after the other)."""
    pytest.importorskip("zerollm.engine.fast.quant")
    from zerollm.engine.fast.quant import INT8_TOLERANCE
    from zerollm.generation.decode import generate
    from zerollm.generation.sample import Sampling
    path = tmp_path / "m.gguf"
    export_gguf(files["llama"][0], path, tokenizer=ByteTokenizer(["<|endoftext|>"]), quant_kind="q4_K_M")
    blocks, _, info = load_gguf(path, quantized=True)
    dense, _, _ = load_gguf(path, quantized=False)
    stacked = [v for v in blocks.params.values() if isinstance(v, quant.StackedBlocks)]
    assert [m.kinds for m in stacked] == [("q4_K", "q4_K", "q6_K")]          # layer 1's c_attn (llama.cpp's rule)
    floats = [k for k, v in blocks.params.items() if isinstance(v, np.ndarray) and v.ndim == 2]
    assert floats == [] and info["quantized"] == 10
    w = stacked[0]
    assert w.nbytes < w.size and np.array_equal(w.dequantize(), dense.params["h.1.attn.c_attn.weight"].T)
    rows = np.array([[0, 300], [511, 256]])                                  # rows of q, k, v (offsets 0, 256, 384)
    assert np.array_equal(w[rows], w.dequantize()[rows])
    from zerollm.engine.fast.decode import _weight_ok
    assert _weight_ok(w, 256)                                  # the fused decode block takes it, not the reference
    prompt = [1, 7, 42, 99, 5]
    with use_engine("numpy"):
        numpy_tokens = [int(t[0]) for t in generate(dense, np.array([prompt]), 8, Sampling(0.0))]
        want = dense.forward(np.array([prompt + numpy_tokens]))[0][0]        # every step's logits, teacher-forced
    with use_engine("fast"):
        fast_tokens = [int(t[0]) for t in generate(blocks, np.array([prompt]), 8, Sampling(0.0))]
        got = blocks.forward(np.array([prompt + numpy_tokens]))[0][0]
    tol = INT8_TOLERANCE * np.abs(want).max()
    assert np.abs(got - want).max() <= tol
    top2 = np.sort(want, axis=1)[len(prompt) - 1:-1, -2:]
    assert (top2[:, 1] - top2[:, 0] > 2 * tol).all()         # no near tie on this path, so the tokens must agree
    assert fast_tokens == numpy_tokens


@pytest.mark.parametrize("N", [1, 40])
def test_stacked_blocks_multiply_part_by_part_as_the_reference(N):
    """The fast engine's quantized_matmul on a StackedBlocks (Q4_K, Q6_K, Q8_0 parts): each part's columns equal
    that part alone through its own kernel, for one row (decode) and for a prompt's rows (the slab path)."""
    fast = pytest.importorskip("zerollm.engine.fast.quant")
    from zerollm.nn.linear import quantized_matmul
    rng = np.random.default_rng(3)
    parts = [kquant.KQuantMatrix.from_float(rng.standard_normal((64, 256)), "q4_K"),
             kquant.KQuantMatrix.from_float(rng.standard_normal((32, 256)), "q6_K"),
             quant.QuantizedMatrix.from_float(rng.standard_normal((96, 256)), "q8_0")]
    w = quant.StackedBlocks(parts)
    x = rng.standard_normal((N, 256)).astype(np.float32)
    got = fast.quantized_matmul(x, w)
    assert got.shape == (N, 192)
    for part, r0, r1 in zip(parts, w.offsets[:-1], w.offsets[1:]):
        assert np.array_equal(got[:, r0:r1], fast.quantized_matmul(x, part))
    ref = quantized_matmul.reference(x, w)
    assert np.abs(got - ref).max() <= fast.INT8_TOLERANCE * np.abs(ref).max()


def test_two_stacked_bases_that_differ_in_one_part_have_different_digests():
    """weights_digest (an adapter's record of its base) reads every part of a StackedBlocks: a base whose v rows
    alone differ is another base."""
    from zerollm.training.checkpoint import weights_digest
    rng = np.random.default_rng(5)
    q = kquant.KQuantMatrix.from_float(rng.standard_normal((64, 256)), "q4_K")
    v1, v2 = (kquant.KQuantMatrix.from_float(rng.standard_normal((32, 256)), "q6_K") for _ in range(2))
    one, two = quant.StackedBlocks([q, v1]), quant.StackedBlocks([q, v2])
    assert weights_digest({"c_attn": one}) != weights_digest({"c_attn": two})
    assert weights_digest({"c_attn": one}) == weights_digest({"c_attn": quant.StackedBlocks([q, v1])})
