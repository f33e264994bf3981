"""GGUF export / import and Q8_0 / Q4_0 (zerollm.interop.gguf, zerollm.interop.quant, zerollm.engine.fast.quant).

Checked against three outside references: the `gguf` package's reader and quantizer (llama.cpp's
own Python code), and transformers' independent GGUF loader (model logits and tokenizer ids).
"""

import struct
import subprocess
import sys

import gguf
import numpy as np
import pytest

from tests.tiny_runs import run_main
from zerollm.data import chat, corpora
from zerollm.engine import use_engine
from zerollm.interop import hf, quant
from zerollm.interop.gguf import export_gguf, gguf_tensors
from zerollm.interop.gguf_load import load_gguf
from zerollm.io.errors import ZeroLLMError
from zerollm.model.gpt import GPT, GPTConfig
from zerollm.nn.linear import quantized_matmul
from zerollm.tokenizers import BPETokenizer, ByteTokenizer, CharTokenizer
from zerollm.interop.opening import Source, open_model, save_zerollm

GGML = {"q8_0": gguf.GGMLQuantizationType.Q8_0, "q4_0": gguf.GGMLQuantizationType.Q4_0}
LLAMA = dict(norm="rmsnorm", pos="rope", mlp="swiglu", bias=False, n_kv_head=1, tie_embeddings=False, n_inner=96)
# transformers' GGUF reader takes a GPT-2's MLP width as 4 C and its positions as 1024 (it ignores
# gpt2.feed_forward_length and context_length), so the GPT-2 twin has exactly those sizes
GPT2 = dict(block_size=1024, gelu="tanh")
MOE = dict(LLAMA, n_expert=4, n_expert_active=2, moe_every=1, moe_norm_topk=True, n_kv_head=2)


@pytest.fixture(scope="module")
def bpe():
    return BPETokenizer.train(corpora.path("shakespeare").read_text()[:20000], 300)


def tiny(layout, vocab=300, seed=0):
    cfg = GPTConfig(**{"vocab_size": vocab, "block_size": 32, "n_layer": 2, "n_head": 2, "n_embd": 64, **layout})
    return GPT(cfg, seed=seed).eval()


def written(tmp_path, model, kind, tok=None, name="m"):
    path = tmp_path / f"{name}-{kind}.gguf"
    export_gguf(model, path, tokenizer=tok, quant_kind=kind)
    return path


# ----------------------------------------------------------------------------
# the quantizer: byte for byte the reference's

@pytest.mark.parametrize("kind", ["q8_0", "q4_0"])
@pytest.mark.parametrize("case", ["normal", "zeros", "halves", "one-big", "negative-max"])
def test_quantizer_bytes_equal_gguf_package(kind, case):
    rng = np.random.default_rng(1)
    x = {"normal": rng.standard_normal((9, 128)),
         "zeros": np.zeros((2, 64)),
         "halves": rng.integers(-16, 17, (5, 64)) / 4,               # x / d lands on .5 often: rounding ties
         "one-big": np.where(np.arange(64) == 7, 50.0, rng.standard_normal((3, 64)) * 1e-3),
         "negative-max": -np.abs(rng.standard_normal((4, 96))) * 3}[case].astype(np.float32)
    ours = quant.quantize(x, kind)
    theirs = gguf.quants.quantize(x, GGML[kind])
    assert ours.dtype == np.uint8 and ours.shape == theirs.shape
    assert np.array_equal(ours, theirs)
    assert np.array_equal(quant.dequantize(ours, kind, x.shape), gguf.quants.dequantize(theirs, GGML[kind]))


def test_quantization_error_is_within_half_a_step():
    """Rounding to the grid d * q misses by at most d / 2, except Q4_0's clipped end: its codes run
    -8..7, so numbers of the other sign than m reach only 7 d and may miss by up to d. d is stored as
    float16, which moves a large q d by up to 127 d 2^-11 more."""
    x = np.random.default_rng(2).standard_normal((4, 256)).astype(np.float32)
    for kind, levels, steps in (("q8_0", 127, 0.5), ("q4_0", 8, 1.0)):
        back = quant.dequantize(quant.quantize(x, kind), kind, x.shape)
        d = np.abs(x.reshape(-1, 32)).max(axis=1, keepdims=True) / levels       # each block's step
        err = np.abs(back - x).reshape(-1, 32)
        assert np.all(err <= steps * d * 1.1)    # 1.1: d is stored as float16 (q up to 127 times its rounding) and err.max() > 0.3 * steps * d.min()


# ----------------------------------------------------------------------------
# round trip through the gguf package's reader

@pytest.mark.parametrize("layout", [GPT2, LLAMA, MOE], ids=["gpt2", "llama", "mixtral"])
@pytest.mark.parametrize("kind", ["f32", "f16", "q8_0", "q4_0"])
def test_reader_reads_back_our_tensors(tmp_path, layout, kind):
    model = tiny(layout)
    _, ours = gguf_tensors(model)
    reader = gguf.GGUFReader(written(tmp_path, model, kind))
    assert sorted(t.name for t in reader.tensors) == sorted(ours)
    for t in reader.tensors:
        want = ours[t.name]
        got = gguf.quants.dequantize(t.data, t.tensor_type).reshape(want.shape)
        if t.tensor_type == gguf.GGMLQuantizationType.F32:
            assert np.array_equal(got, want), t.name
        elif t.tensor_type == gguf.GGMLQuantizationType.F16:
            assert np.array_equal(got, want.astype(np.float16).astype(np.float32)), t.name
        else:
            assert t.tensor_type == GGML[kind] and want.ndim >= 2
            assert np.array_equal(got, quant.dequantize(quant.quantize(want, kind), kind, want.shape)), t.name
    stored = {"f32": gguf.GGMLQuantizationType.F32, "f16": gguf.GGMLQuantizationType.F16, **GGML}[kind]
    assert stored in {t.tensor_type for t in reader.tensors}


@pytest.mark.parametrize("layout", [GPT2, LLAMA, MOE], ids=["gpt2", "llama", "mixtral"])
def test_load_gives_back_the_same_model(tmp_path, layout, bpe):
    model = tiny(layout)
    back, tok, info = load_gguf(written(tmp_path, model, "f32", bpe))
    idx = np.array([bpe.encode("ROMEO: what light")[:12]])
    assert np.array_equal(back.forward(idx)[0], model.forward(idx)[0])
    assert tok.encode("O Romeo, Romeo!") == bpe.encode("O Romeo, Romeo!") and set(info["kinds"]) == {"f32"}


# ----------------------------------------------------------------------------
# an independent reader: transformers

@pytest.mark.parametrize("layout,kind", [(GPT2, "q8_0"), (LLAMA, "q4_0"), (LLAMA, "f32")], ids=["gpt2-q8_0", "llama-q4_0", "llama-f32"])
def test_transformers_reads_the_same_numbers_and_ids(tmp_path, layout, kind, bpe, shakespeare_path, tang_path):
    torch = pytest.importorskip("torch")
    from transformers import AutoModelForCausalLM, AutoTokenizer
    model = tiny(layout, seed=3)
    path = written(tmp_path, model, kind, bpe)
    ours, _, _ = load_gguf(path, quantized=False)                     # our dequantized weights
    idx = np.array([bpe.encode("But, soft! what light through yonder window breaks?")[:20]])
    theirs = AutoModelForCausalLM.from_pretrained(tmp_path, gguf_file=path.name, dtype=torch.float32)
    with torch.no_grad():
        logits = theirs(torch.tensor(idx)).logits.numpy()
    assert np.abs(logits - ours.forward(idx)[0]).max() <= 1e-4
    if kind == "f32":                                                 # and both are the model we wrote
        assert np.abs(logits - model.forward(idx)[0]).max() <= 1e-4
    their_tok = AutoTokenizer.from_pretrained(tmp_path, gguf_file=path.name)
    for text in (shakespeare_path.read_text()[:60000], tang_path.read_text()[:8000]):   # slices: see docs/gguf.md
        assert their_tok(text)["input_ids"] == bpe.encode(text)


# ----------------------------------------------------------------------------
# the quantized matmul kernel

@pytest.mark.parametrize("kind", ["q8_0", "q4_0"])
@pytest.mark.parametrize("N", [1, 7])
def test_kernel_equals_dequantize_then_matmul(kind, N):
    from zerollm.engine.fast.quant import INT8_TOLERANCE, quantized_matmul as kernel
    rng = np.random.default_rng(4)
    w = quant.QuantizedMatrix.from_float(rng.standard_normal((96, 160)), kind)
    x = rng.standard_normal((N, 160)).astype(np.float32)
    ref = quantized_matmul.reference(x, w)
    got = kernel(x, w)
    assert got.shape == ref.shape == (N, 96)
    assert np.abs(got - ref).max() <= INT8_TOLERANCE * np.abs(ref).max()      # x rounded to 8 bits (test_fast_quant)


@pytest.mark.parametrize("layout", [GPT2, LLAMA], ids=["gpt2", "llama"])
def test_fast_engine_runs_the_blocks_with_the_same_logits(tmp_path, layout):
    model = tiny(layout)
    path = written(tmp_path, model, "q4_0")
    idx = np.array([[1, 7, 42, 99, 5]])
    from zerollm.engine.fast.quant import INT8_TOLERANCE
    with use_engine("fast"):
        blocks, _, info = load_gguf(path)
        fast = blocks.forward(idx)[0]
    floats, _, dense = load_gguf(path)
    assert info["quantized"] == 9 + ("lm_head.weight" in model.params) and not info["dequantized"]
    assert isinstance(blocks.params["h.0.attn.c_attn.weight"], quant.QuantizedMatrix) and dense["dequantized"]
    ref = floats.forward(idx)[0]
    assert np.abs(fast - ref).max() <= INT8_TOLERANCE * np.abs(ref).max()


# ----------------------------------------------------------------------------
# the command line, and every bad input as one line

@pytest.fixture
def model_dir(tmp_path, bpe):
    return save_zerollm(tiny(GPT2), tmp_path / "model", tokenizer=bpe)


def test_convert_sample_and_eval(tmp_path, model_dir, capsys, shakespeare_path):
    out = tmp_path / "m.gguf"
    code, said, _ = run_main(["convert", "--from", model_dir, "--to", out, "--quant", "q8_0"], capsys)
    assert code == 0 and "q8_0" in said and out.is_file()
    code, said, err = run_main(["sample", "--gguf", out, "--engine", "fast", "--max-new-tokens", "5", "--seed", "0",
                                "--prompt", "ROMEO:"], capsys)
    assert code == 0 and said.startswith("ROMEO:") and "quantized matmul kernel" in err
    text = tmp_path / "t.txt"
    text.write_text(shakespeare_path.read_text()[:2000])
    code, said, err = run_main(["eval", "--gguf", out, "--data", text, "--engine", "numpy"], capsys)
    assert code == 0 and "loss" in said and "dequantized at load" in err
    code, _, err = run_main(["convert", "--from", model_dir, "--to", out, "--quant", "q4_0"], capsys)
    assert code == 1 and "exists" in err and "--overwrite" in err and len(err.strip().splitlines()) == 1
    assert run_main(["convert", "--from", model_dir, "--to", out, "--quant", "q4_0", "--overwrite"], capsys)[0] == 0


def _error(capsys, path, tmp_path):
    text = tmp_path / "t.txt"
    text.write_text("hello world")
    code, _, err = run_main(["eval", "--gguf", path, "--data", text], capsys)
    assert code == 1 and len(err.strip().splitlines()) == 1 and "Traceback" not in err, err
    return err


def _type_offset(path, name):
    """Where the 4-byte type of tensor ``name`` sits in the file (in its tensor-info record)."""
    t = next(t for t in gguf.GGUFReader(path).tensors if t.name == name)
    return t.field.offset + sum(p.nbytes for p in t.field.parts[:4])


def _rewrite(monkeypatch, tmp_path, change, name="bad"):
    """A file whose tensors are ``change``d before they are written (the metadata stays the model's)."""
    import zerollm.interop.gguf as g
    real = g.gguf_tensors
    monkeypatch.setattr(g, "gguf_tensors", lambda model: (real(model)[0], change(real(model)[1])))
    path = tmp_path / f"{name}.gguf"
    g.export_gguf(tiny(GPT2), path, tokenizer=ByteTokenizer())
    monkeypatch.setattr(g, "gguf_tensors", real)
    return path


def test_bad_files_are_one_line_errors(tmp_path, capsys, monkeypatch):
    good = written(tmp_path, tiny(GPT2), "q8_0", ByteTokenizer())
    data = good.read_bytes()
    truncated = tmp_path / "truncated.gguf"
    truncated.write_bytes(data[:len(data) // 2])
    assert "truncated" in _error(capsys, truncated, tmp_path)
    corrupted = tmp_path / "corrupted.gguf"
    corrupted.write_bytes(b"GGUX" + data[4:])
    assert "not a readable GGUF file" in _error(capsys, corrupted, tmp_path)
    assert "GGUF file not found" in _error(capsys, tmp_path / "absent.gguf", tmp_path)
    assert "is not a GGUF file but a directory" in _error(capsys, tmp_path, tmp_path)
    assert "is not a GGUF file but a device or pipe" in _error(capsys, "/dev/null", tmp_path)
    unknown = bytearray(data)
    at = _type_offset(good, "blk.0.attn_qkv.weight")
    unknown[at:at + 4] = (77).to_bytes(4, "little")
    (tmp_path / "unknown.gguf").write_bytes(bytes(unknown))
    assert "77" in _error(capsys, tmp_path / "unknown.gguf", tmp_path)
    other = tmp_path / "q4_1.gguf"
    w = gguf.GGUFWriter(other, "gpt2")
    w.add_tensor("token_embd.weight", gguf.quants.quantize(np.ones((8, 32), np.float32), gguf.GGMLQuantizationType.Q4_1),
                 raw_dtype=gguf.GGMLQuantizationType.Q4_1)
    w.write_header_to_file(), w.write_kv_data_to_file(), w.write_tensors_to_file(), w.close()
    assert "Q4_1" in _error(capsys, other, tmp_path)

    bert = tmp_path / "bert.gguf"
    w = gguf.GGUFWriter(bert, "bert")
    w.add_tensor("token_embd.weight", np.ones((8, 32), np.float32))
    w.write_header_to_file(), w.write_kv_data_to_file(), w.write_tensors_to_file(), w.close()
    assert "architecture 'bert'" in _error(capsys, bert, tmp_path)

    missing = _rewrite(monkeypatch, tmp_path, lambda t: {k: v for k, v in t.items() if k != "blk.1.ffn_up.weight"},
                       "missing")
    err = _error(capsys, missing, tmp_path)                 # GGUF names, and the metadata (not config.json)
    assert f"{missing}: the tensors do not fit the file's metadata (gpt2.block_count=2, gpt2.embedding_length=64" in err
    assert "missing ['blk.1.ffn_up.weight'], unexpected []" in err and "config.json" not in err, err
    wrong = _rewrite(monkeypatch, tmp_path, lambda t: {**t, "blk.0.attn_output.weight": np.ones((64, 32), np.float32)},
                     "wrong")
    err = _error(capsys, wrong, tmp_path)
    assert "do not fit the file's metadata" in err and "blk.0.attn_output.weight is (64, 32), not (64, 64)" in err, err
    stray = _rewrite(monkeypatch, tmp_path, lambda t: {**t, "blk.5.attn_norm.weight": np.ones(64, np.float32)},
                     "stray")
    assert "unexpected ['blk.5.attn_norm.weight']" in _error(capsys, stray, tmp_path)
    rope = _rewrite(monkeypatch, tmp_path, lambda t: {**t, "rope_freqs.weight": np.ones(32, np.float32)}, "rope")
    assert "tensor rope_freqs.weight has no place in the gpt2 models" in _error(capsys, rope, tmp_path)
    more_rows = _rewrite(monkeypatch, tmp_path, lambda t: {**t, "token_embd.weight": np.ones((301, 64), np.float32)},
                         "rows")
    assert "disagrees with the tensors" in _error(capsys, more_rows, tmp_path)


def _gguf_bytes(*fields):
    """A GGUF v3 file with no tensors and these (key, value bytes) metadata fields."""
    def string(b):
        return struct.pack("<Q", len(b)) + b
    return b"GGUF" + struct.pack("<IQQ", 3, 0, len(fields)) + b"".join(string(k) + v for k, v in fields)


def test_counts_that_cannot_fit_the_file_are_refused_at_once(tmp_path, capsys):
    """gguf's own reader loops over the items an array declares, reading nothing past the end of the file:
    a 130-byte file declaring 2^40 of them made `sample --gguf` run and grow for ever. check_layout walks
    the header first, each count against the bytes left (run in a subprocess, bounded, in case it ever
    goes back to hanging)."""
    huge = tmp_path / "huge.gguf"
    huge.write_bytes(_gguf_bytes((b"general.architecture", struct.pack("<IIQ", 9, 0, 2 ** 40))) + bytes(64))
    proc = subprocess.run([sys.executable, "-m", "zerollm", "sample", "--gguf", str(huge), "--prompt", "hi"],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode != 0 and len(proc.stderr.strip().splitlines()) == 1, proc.stderr
    assert "not a readable GGUF file (1099511627776 bytes declared" in proc.stderr

    good = written(tmp_path, tiny(GPT2), "f32", ByteTokenizer())
    data = bytearray(good.read_bytes())
    at = data.index(b"tokenizer.ggml.tokens") + len(b"tokenizer.ggml.tokens") + 4   # the array's item type
    assert struct.unpack_from("<I", data, at)[0] == 8                                 # strings
    data[at:at + 4] = struct.pack("<I", 9)                                            # now arrays of arrays
    nested = tmp_path / "nested.gguf"
    nested.write_bytes(bytes(data))
    assert "not a readable GGUF file" in _error(capsys, nested, tmp_path)
    deep = tmp_path / "deep.gguf"
    deep.write_bytes(_gguf_bytes((b"x", struct.pack("<I", 9) + struct.pack("<IQ", 9, 1) * 6 + struct.pack("<IQ", 0, 0))))
    assert "arrays nested more than 4 deep" in _error(capsys, deep, tmp_path)
    short = tmp_path / "short.gguf"
    short.write_bytes(b"GGUF\x03\x00\x00\x00")
    assert "shorter than a GGUF header" in _error(capsys, short, tmp_path)
    lying = tmp_path / "lying.gguf"
    lying.write_bytes(_gguf_bytes((b"general.name", struct.pack("<IQ", 8, 10 ** 9) + b"abc")))
    assert "1000000000 bytes declared" in _error(capsys, lying, tmp_path)


def test_export_refusals(tmp_path, capsys, model_dir):
    not_gguf = tmp_path / "notes.gguf"
    not_gguf.write_text("my notes")
    code, _, err = run_main(["convert", "--from", model_dir, "--to", not_gguf, "--overwrite"], capsys)
    assert code == 1 and "not a GGUF file" in err and not_gguf.read_text() == "my notes"
    erf = save_zerollm(tiny(dict(GPT2, gelu="erf")), tmp_path / "erf", tokenizer=ByteTokenizer())
    code, _, err = run_main(["convert", "--from", erf, "--to", tmp_path / "e.gguf"], capsys)
    assert code == 1 and "gelu='erf'" in err and "--gelu tanh" in err and not (tmp_path / "e.gguf").exists()


def test_every_problem_is_named_in_one_line(tmp_path, capsys):
    """shakespeare-cpu's erf GELU with its char tokenizer is one problem (the tokenizer is carried); erf with a
    BPE tokenizer of a custom regex, and a Llama layout with biases, are named together, numbered."""
    char = CharTokenizer.train("ROMEO: what light")
    shakespeare_cpu = save_zerollm(tiny(dict(GPT2, gelu="erf"), vocab=char.vocab_size), tmp_path / "s", tokenizer=char)
    code, _, err = run_main(["convert", "--from", shakespeare_cpu, "--to", tmp_path / "s.gguf"], capsys)
    assert code == 1 and len(err.strip().splitlines()) == 1 and "gelu='erf'" in err and "tokenizer" not in err
    with_tanh = save_zerollm(tiny(GPT2, vocab=char.vocab_size), tmp_path / "t", tokenizer=char)   # what it says to do
    code, out, _ = run_main(["convert", "--from", with_tanh, "--to", tmp_path / "t.gguf"], capsys)
    assert code == 0 and "tokenizer: char" in out
    custom = BPETokenizer.train("low lower lowest " * 20, 260, pattern=r"\w+| ")
    with pytest.raises(ZeroLLMError) as err:
        export_gguf(tiny(dict(GPT2, gelu="erf")), tmp_path / "b.gguf", tokenizer=custom)
    said = str(err.value)
    assert "\n" not in said and not (tmp_path / "b.gguf").exists()
    assert "for 2 reasons: (1) GGUF's gpt2 architecture computes the tanh GELU" in said and "--gelu tanh" in said
    assert "(2) the BPE tokenizer splits text with a custom regex" in said and "--pattern gpt2 or gpt4" in said
    with pytest.raises(ZeroLLMError, match=r"for 2 reasons: \(1\) GGUF's llama .* bias=True.*\(2\) .*custom regex"):
        export_gguf(tiny(dict(LLAMA, bias=True)), tmp_path / "l.gguf", tokenizer=custom)


def _limited(limit_bytes):
    """ulimit -f for a child process, SIGXFSZ ignored: a write past the limit is short, then EFBIG."""
    import resource
    import signal

    def apply():
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit_bytes, limit_bytes))
    return apply


def test_a_full_disk_keeps_the_old_file_and_says_the_disk_is_full(tmp_path, model_dir):
    """numpy's tofile reports a short write as "12288 requested and 3120 written" (no errno); the line
    must say what the HF writer says, the old file must stay whole, and no temporary file may be left."""
    import os
    out = tmp_path / "m.gguf"
    export_gguf(open_model(Source(ckpt=model_dir), tokenizer="skip").model, out, quant_kind="q8_0")
    before = out.read_bytes()
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    for target, extra in ((out, ["--overwrite"]), (tmp_path / "new.gguf", [])):
        proc = subprocess.run([sys.executable, "-m", "zerollm", "convert", "--from", str(model_dir), "--to",
                               str(target), *extra], capture_output=True, text=True, timeout=120, env=env,
                              preexec_fn=_limited(len(before) // 2))
        assert proc.returncode == 1 and len(proc.stderr.strip().splitlines()) == 1, proc.stderr
        assert f"{target}: File too large; the disk (or your quota, or ulimit -f) is full" in proc.stderr
        assert "requested and" not in proc.stderr and "Traceback" not in proc.stderr
    assert out.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["m.gguf", "model"]


@pytest.mark.parametrize("layout", [GPT2, LLAMA], ids=["gpt2", "llama"])
def test_a_char_tokenizer_is_carried(tmp_path, layout, tang_path):
    """The same ids for the characters, an unk token, and the characters and special tokens added later (a chat
    model's); the same text back (tests/test_gguf_llamacpp.py: llama.cpp's ids are these too)."""
    text = tang_path.read_text()[:5000]
    tok = chat.prepare_tokenizer(CharTokenizer.train(text, unk="<unk>"), ["藏头诗：春夏秋冬"])
    model = tiny(layout, vocab=tok.vocab_size + 3)                         # padded: unused tokens at the end
    back, got, _ = load_gguf(written(tmp_path, model, "f32", tok))
    prompt = "藏头诗：春夏秋冬" + text[:200] + "\u2603"
    assert got.name == "char" and got.unk == "<unk>" and got.special_tokens == tok.special_tokens
    assert got.encode(prompt) == tok.encode(prompt) and got.decode(tok.encode(prompt)) == tok.decode(tok.encode(prompt))
    ids = chat.encode_prompt(tok, "藏头诗：春夏秋冬")
    assert chat.encode_prompt(got, "藏头诗：春夏秋冬") == ids
    assert np.array_equal(back.forward(np.array([ids]))[0], model.forward(np.array([ids]))[0])


def test_a_byte_tokenizer_is_carried(tmp_path):
    tok = ByteTokenizer(["<|endoftext|>"])
    _, back, _ = load_gguf(written(tmp_path, tiny(GPT2, vocab=257), "f32", tok))
    assert back.name == "byte" and back.special_tokens == tok.special_tokens
    assert back.encode("naïve 你好", allowed_special="all") == tok.encode("naïve 你好", allowed_special="all")


# ----------------------------------------------------------------------------
# zerollm quantize --explain

@pytest.mark.parametrize("lang", ["en", "zh"])
def test_quantize_explain_prints_the_real_numbers(capsys, lang):
    code, out, _ = run_main(["quantize", "--explain", "--kind", "q8_0", "--rows", "1", "--cols", "32",
                             "--seed", "3", "--lang", lang], capsys)
    assert code == 0
    w = (np.random.default_rng(3).standard_normal((1, 32)) * 0.5).astype(np.float32)
    raw = quant.quantize(w, "q8_0")[0]
    assert " ".join(f"{v:02x}" for v in raw) in out                  # the stored bytes, as written to files
    assert ("完全相同" if lang == "zh" else "identical") in out         # the gguf package agrees


def test_quantize_without_explain_or_with_bad_cols_is_one_line(capsys):
    for argv in (["quantize"], ["quantize", "--explain", "--cols", "40"]):
        code, _, err = run_main(argv, capsys)
        assert code != 0 and len(err.strip().splitlines()) == 1 and "Traceback" not in err


def test_a_chat_model_carries_its_template_and_end_of_turn(tmp_path, bpe):
    from zerollm.data import chat
    tok = chat.prepare_tokenizer(bpe)
    path = written(tmp_path, tiny(GPT2, vocab=tok.vocab_size), "f32", tok)
    fields = gguf.GGUFReader(path).fields
    template = bytes(fields["tokenizer.chat_template"].parts[-1]).decode()
    assert template == chat.chat_template_jinja()
    assert int(fields["tokenizer.ggml.eos_token_id"].parts[-1][0]) == chat.end_id(tok)
    _, back, _ = load_gguf(path)
    assert chat.has_template(back) and back.special_tokens == tok.special_tokens


def test_a_reward_model_to_gguf_says_its_score_head_is_left_out(tmp_path, capsys):
    from tests.tiny_runs import tiny_stage_base
    tiny_stage_base(tmp_path)
    run = tmp_path / "rm"
    code, _, err = run_main(["reward", "--init", tmp_path / "base", "--data", tmp_path / "prefs.jsonl", "--out", run,
                             "--max-iters", "2", "--batch-size", "2", "--no-progress"], capsys)
    assert code == 0, err
    code, out, err = run_main(["convert", "--from", run, "--to", tmp_path / "rm.gguf", "--no-tokenizer"], capsys)
    assert code == 0 and "wrote GGUF file" in out, err
    assert err.strip() == ("zerollm convert: note: the reward model's score head is not exported (GGUF has no place "
                           "for it); the file is a plain language model")
    code, out, err = run_main(["convert", "--from", tmp_path / "base", "--to", tmp_path / "lm.gguf", "--no-tokenizer"],
                              capsys)
    assert code == 0 and err == "", err                                  # a language model: no note


def test_the_gguf_suffix_is_read_in_any_case_and_a_trailing_slash_is_refused(tmp_path, model_dir, capsys):
    upper = tmp_path / "UP.GGUF"
    code, out, err = run_main(["convert", "--from", model_dir, "--to", upper, "--quant", "q8_0"], capsys)
    assert code == 0 and "wrote GGUF file" in out, err
    assert upper.is_file() and upper.read_bytes()[:4] == b"GGUF"             # a file, not a Hugging Face folder
    assert load_gguf(upper)[2]["kinds"]["q8_0"] > 0
    code, out, err = run_main(["convert", "--from", model_dir, "--to", f"{tmp_path / 'x.gguf'}/"], capsys)
    assert code == 1 and len(err.strip().splitlines()) == 1, err
    assert "ends in .gguf and a slash: for a GGUF file give --to" in err and "Hugging Face folder" in err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["UP.GGUF", "model"]


def test_without_the_gguf_package_convert_and_sample_say_how_to_install_it(tmp_path, model_dir, capsys, monkeypatch):
    path = tmp_path / "m.gguf"
    code, _, err = run_main(["convert", "--from", model_dir, "--to", path], capsys)
    assert code == 0, err
    monkeypatch.setitem(sys.modules, "gguf", None)           # what `import gguf` meets when it is not installed
    wanted = 'GGUF files need the gguf package: pip install "zerollm[gguf]"'
    for argv in (["convert", "--from", model_dir, "--to", tmp_path / "again.gguf"],
                 ["sample", "--gguf", path, "--max-new-tokens", "2"]):
        code, out, err = run_main(argv, capsys)
        assert code == 1 and err.strip().splitlines() == [f"zerollm {argv[0]}: error: {wanted}"], err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["m.gguf", "model"]     # nothing half-written
