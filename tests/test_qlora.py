"""QLoRA (issue #62): LoRA on a base whose linear layers stay in Q8_0 / Q4_0 blocks. The gradients equal those of
the same LoRA on the dequantized float base, nothing is computed or stored for the base's weights, the backward
never dequantizes a whole matrix, a stage run with --quantize-base resumes bit-identically, and the misuses are
refused in one line."""

import json

import numpy as np
import pytest

from zerollm.cli.entry import main
from zerollm.interop.opening import save_zerollm
from zerollm.interop.quant import QuantizedMatrix, quantize_linears
from zerollm.io.errors import ZeroLLMError
from zerollm.io.safetensors import load_file
from zerollm.model.config import GPTConfig
from zerollm.model.gpt import GPT
from zerollm.nn import linear
from zerollm.nn.lora import LoRAConfig
from zerollm.tokenizers import CharTokenizer

CFG = GPTConfig(vocab_size=50, block_size=16, n_layer=2, n_head=2, n_embd=64, dropout=0.0)


def _lora_model(targets=("all-linear",)):
    model = GPT(CFG, seed=1).add_lora(LoRAConfig(r=4, alpha=8.0, targets=targets), np.random.default_rng(0))
    for name, a in model.lora.adapters.items():             # B != 0, so the adapters change the logits
        if name.endswith("lora_B"):
            a[...] = np.random.default_rng(3).normal(0, 0.1, a.shape)
    return model


@pytest.mark.parametrize("kind", ["q8_0", "q4_0"])
@pytest.mark.parametrize("targets", [("all-linear",), ("c_attn",)])
def test_qlora_gradients_equal_lora_on_the_dequantized_float_base(kind, targets, monkeypatch):
    monkeypatch.setattr(linear, "QUANT_ROWS", 40)             # several row blocks per matrix, one cut short
    quant, plain = _lora_model(targets), _lora_model(targets)
    quantize_linears(quant, kind)
    blocks = {k: v for k, v in quant.params.items() if isinstance(v, QuantizedMatrix)}
    assert len(blocks) == 4 * CFG.n_layer
    for k, v in blocks.items():
        plain.params[k] = v.dequantize().T.copy()            # the float base QLoRA stands for
        assert v.nbytes < plain.params[k].nbytes / 3
    x = np.random.default_rng(2).integers(0, CFG.vocab_size, (3, CFG.block_size))
    y = np.roll(x, -1, axis=1)
    grads = []
    for model in (quant, plain):
        model.train()
        model.forward(x, y)
        grads.append(model.backward())
    assert sorted(grads[0]) == sorted(grads[1]) == sorted(quant.trainable())
    assert not set(grads[0]) & set(blocks)                   # no gradient for a base weight
    for k in grads[1]:
        np.testing.assert_allclose(grads[0][k], grads[1][k], rtol=1e-5, atol=1e-7)


def test_the_backward_dequantizes_a_few_rows_at_a_time_never_a_whole_matrix(monkeypatch):
    model = quantize_linears(_lora_model(), "q4_0")
    model.train()
    model.forward(np.zeros((1, CFG.block_size), dtype=np.int64), np.zeros((1, CFG.block_size), dtype=np.int64))
    rows = []
    monkeypatch.setattr(QuantizedMatrix, "dequantize", lambda self: pytest.fail("a whole matrix dequantized"))
    real = QuantizedMatrix.__getitem__
    monkeypatch.setattr(QuantizedMatrix, "__getitem__", lambda self, idx: rows.append(np.size(idx)) or real(self, idx))
    model.backward()
    assert rows and max(rows) <= linear.QUANT_ROWS and sum(rows) >= 4 * CFG.n_layer * CFG.n_embd


def test_quantize_base_needs_lora_and_widths_of_whole_blocks():
    with pytest.raises(ZeroLLMError, match="--lora-r"):
        quantize_linears(GPT(CFG, seed=1), "q8_0")
    narrow = GPT(GPTConfig(vocab_size=50, block_size=8, n_layer=1, n_head=2, n_embd=48), seed=1)
    with pytest.raises(ZeroLLMError, match="multiple of 32"):
        quantize_linears(narrow.add_lora(LoRAConfig(r=2), np.random.default_rng(0)), "q4_0")


TEXT = "床前明月光，疑是地上霜。举头望明月，低头思故乡。" * 40


def _distill(tmp_path, out, *extra):
    tok = CharTokenizer.train(TEXT)
    if not (tmp_path / "teacher").exists():
        cfg = dict(vocab_size=tok.vocab_size, n_head=2, block_size=16)
        save_zerollm(GPT(GPTConfig(n_layer=2, n_embd=32, **cfg), seed=1), tmp_path / "teacher", tokenizer=tok)
        save_zerollm(GPT(GPTConfig(n_layer=1, n_embd=64, **cfg), seed=2), tmp_path / "student", tokenizer=tok)
        (tmp_path / "poems.txt").write_text(TEXT, encoding="utf-8")
    return main(["distill", "--teacher", str(tmp_path / "teacher"), "--init", str(tmp_path / "student"),
                 "--data", str(tmp_path / "poems.txt"), "--out", str(tmp_path / out), "--batch-size", "4",
                 "--eval-interval", "2", "--eval-iters", "1", "--checkpoint-interval", "2", "--no-progress",
                 "--lr-decay-iters", "4", "--warmup-iters", "1", *extra])


def test_quantize_base_without_lora_is_refused_in_one_line(tmp_path, capsys):
    assert _distill(tmp_path, "o", "--max-iters", "2", "--quantize-base", "q8_0") == 1
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "--lora-r" in err


@pytest.mark.slow
def test_a_qlora_stage_resumes_bit_identical_and_saves_only_the_adapters(tmp_path):
    flags = ("--lora-r", "4", "--quantize-base", "q4_0")
    assert _distill(tmp_path, "whole", "--max-iters", "4", *flags) == 0
    assert _distill(tmp_path, "cut", "--max-iters", "2", *flags) == 0
    assert main(["distill", "--out", str(tmp_path / "cut"), "--resume", "--max-iters", "4", "--no-progress"]) == 0
    whole = load_file(str(tmp_path / "whole" / "step-0000004" / "model.safetensors"))
    cut = load_file(str(tmp_path / "cut" / "step-0000004" / "model.safetensors"))
    assert whole.keys() == cut.keys() and all(k.endswith(("lora_A", "lora_B")) for k in whole)
    assert all(np.array_equal(whole[k], cut[k]) for k in whole)
    saved = json.load(open(tmp_path / "cut" / "step-0000004" / "config.json"))["objective"]
    assert saved["quantize_base"] == "q4_0"


@pytest.mark.parametrize("kind", ["q8_0", "q4_0"])
def test_the_dry_run_counts_the_base_in_blocks(kind, tmp_path, capsys):
    from zerollm.interop.quant import quantized_bytes
    model = _lora_model()
    expected = quantized_bytes(model.params, kind)
    quantize_linears(model, kind)
    assert expected == sum(w.nbytes for w in model.params.values())         # what the blocks really hold
    _distill(tmp_path, "plain", "--lora-r", "4", "--dry-run")
    plain = capsys.readouterr().out
    _distill(tmp_path, "blocks", "--lora-r", "4", "--quantize-base", kind, "--dry-run")
    blocks = capsys.readouterr().out
    assert "parameters (linear layers in blocks)" in blocks and "in blocks" not in plain


# ----------------------------------------------------------------------------
# the fast engine's backward through the blocks (zerollm.engine.fast.qlora)

@pytest.mark.parametrize("kind", ["q8_0", "q4_0"])
@pytest.mark.parametrize("rows", [256, 40])
def test_fast_backward_through_the_blocks_equals_the_numpy_reference(kind, rows, monkeypatch):
    from zerollm.engine.fast import qlora
    monkeypatch.setattr(qlora, "ROWS", rows)                  # 300 rows of W: 2 slabs, or 8 with one cut short
    rng = np.random.default_rng(5)
    w = QuantizedMatrix.from_float(rng.standard_normal((300, 96)), kind)       # (R, K)
    dy = rng.standard_normal((7, 300)).astype(np.float32)                      # (N, R)
    ref = linear.quantized_matmul_t.reference(dy, w)
    got = qlora.quantized_matmul_t(dy, w)
    assert got.shape == ref.shape == (7, 96)
    np.testing.assert_allclose(got, ref, rtol=1e-5, atol=1e-5 * np.abs(ref).max())
    np.testing.assert_allclose(got, dy.astype(np.float64) @ w.dequantize(), rtol=1e-4, atol=1e-4)


def test_the_fast_engine_trains_qlora_with_the_numpy_engines_gradients():
    from zerollm.engine import use_engine
    from zerollm.engine.fast import KERNELS, qlora
    assert KERNELS["quantized_matmul_t"] is qlora.quantized_matmul_t       # what the fast engine dispatches to
    grads = []
    for engine in ("numpy", "fast"):
        model = quantize_linears(_lora_model(), "q4_0")
        model.train()
        x = np.random.default_rng(2).integers(0, CFG.vocab_size, (2, CFG.block_size))
        with use_engine(engine):
            model.forward(x, np.roll(x, -1, axis=1))
            grads.append(model.backward())
    assert sorted(grads[0]) == sorted(grads[1])
    for k in grads[0]:
        np.testing.assert_allclose(grads[1][k], grads[0][k], rtol=1e-3, atol=1e-5 * np.abs(grads[0][k]).max())


# ----------------------------------------------------------------------------
# the base opened in blocks (zerollm.interop.opening: Source(quantize=KIND)), and a QLoRA run afterwards

def _saved_base(tmp_path):
    """A 2-layer model of width 64 saved three ways: a zerollm model directory, a run step and a Hugging Face dir."""
    from zerollm.interop import hf
    from zerollm.training.checkpoint import Snapshot, save_checkpoint
    tok = CharTokenizer.train(TEXT)
    model = GPT(GPTConfig(vocab_size=tok.vocab_size, block_size=16, n_layer=2, n_head=2, n_embd=64), seed=4)
    save_zerollm(model, tmp_path / "dir", tokenizer=tok)
    hf.export(model, tmp_path / "hf", tokenizer=tok)
    moments = {"step": 0, "lr": 0.0, "betas": [0.9, 0.99], "eps": 1e-8, "weight_decay": 0.0, "decay": [], "m": {},
               "v": {}}
    save_checkpoint(tmp_path / "run", Snapshot(step=1, model_config=model.config.to_dict(), train_config={},
                                               params=model.params, optimizer_state=moments, rng_state=model.rng,
                                               tokenizer_path=None, objective={"kind": "lm"}, extra={}))
    return model


@pytest.mark.parametrize("where", ["dir", "run", "hf"])
def test_the_base_is_quantized_as_it_is_read_one_matrix_at_a_time(where, tmp_path, monkeypatch):
    from zerollm.interop import quant
    from zerollm.interop.opening import Source, open_model
    model = _saved_base(tmp_path)
    readings = []
    real_init = quant.QuantizeOnRead.__init__
    monkeypatch.setattr(quant.QuantizeOnRead, "__init__",
                        lambda self, *a: readings.append(self) or real_init(self, *a))
    key = "hf" if where == "hf" else "ckpt"
    opened = open_model(Source(**{key: str(tmp_path / where)}, quantize="q4_0"), tokenizer="skip").model
    linear_bytes = [w.nbytes for n, w in model.params.items() if quant.is_base_linear(n, w)]
    assert len(readings) == 1 and len(linear_bytes) == 8
    assert readings[0].peak_float_bytes == max(linear_bytes) < sum(linear_bytes) / 4    # never the float base whole
    expected = quant.quantize_base(dict(model.params), "q4_0")                           # quantized after reading
    for name, w in expected.items():
        got = opened.params[name]
        if isinstance(w, QuantizedMatrix):
            assert isinstance(got, QuantizedMatrix) and np.array_equal(got.codes, w.codes)
            assert np.array_equal(got.scales, w.scales)
        else:
            np.testing.assert_array_equal(got, w)


@pytest.mark.parametrize("stored, quantize", [("q8_0", "stored"), ("q4_K", "stored"), ("f32", "q4_0")])
def test_a_gguf_base_is_read_in_its_blocks_never_through_float_copies(stored, quantize, tmp_path, monkeypatch):
    from zerollm.interop import gguf_load, quant
    from zerollm.interop.gguf import export_gguf
    from zerollm.interop.opening import Source, open_model
    tok = CharTokenizer.train(TEXT)
    cfg = GPTConfig(vocab_size=tok.vocab_size, block_size=8, n_layer=1, n_head=2, n_embd=256)   # whole super-blocks
    path = str(tmp_path / "m.gguf")
    export_gguf(GPT(cfg, seed=3), path, tokenizer=tok, quant_kind=stored)
    expected = gguf_load.load_gguf(path, quantized=False)[0].params                # every tensor dequantized
    readings, floated = [], []
    real_init, real_float = quant.QuantizeOnRead.__init__, gguf_load._finite_float
    monkeypatch.setattr(quant.QuantizeOnRead, "__init__",
                        lambda self, *a: readings.append(self) or real_init(self, *a))
    monkeypatch.setattr(gguf_load, "_finite_float",
                        lambda t, name, where: floated.append(name) or real_float(t, name, where))
    model = open_model(Source(gguf=path, quantize=quantize), tokenizer="skip").model
    linears = [n for n, w in expected.items() if quant.is_base_linear(n, w)]
    assert len(readings) == 1 and len(linears) == 4
    assert not any(isinstance(model.params[n], np.ndarray) for n in linears)              # in blocks
    assert isinstance(model.params["wte.weight"], np.ndarray)                             # the table: float32
    if stored == "f32":          # a float file's linear matrices are quantized one at a time as they are read
        assert readings[0].peak_float_bytes == max(expected[n].nbytes for n in linears)
        want = quant.quantize_base(dict(expected), quantize)
        assert all(np.array_equal(model.params[n].codes, want[n].codes) for n in linears)
        return
    assert readings[0].peak_float_bytes == 0                                              # no float base at all
    dequantized = [n for n in floated if n.startswith("blk.") and n.endswith(".weight") and "norm" not in n]
    assert floated and dequantized == []          # only the table and the norms and biases became float
    for n in linears:
        np.testing.assert_allclose(quant.float_param(n, model.params[n]), expected[n], rtol=0, atol=1e-6)
    for n, w in expected.items():
        if n not in linears:
            np.testing.assert_array_equal(model.params[n], w)


def _acrostic(tmp_path):
    from zerollm.align.tasks import acrostic
    from zerollm.data.formats import write_jsonl
    rows = acrostic.make(24, "train", 0)
    write_jsonl(tmp_path / "train.jsonl", rows)
    tok = CharTokenizer.train("\n" + "".join(r["completion"] for r in rows))
    save_zerollm(GPT(GPTConfig(vocab_size=tok.vocab_size, block_size=40, n_layer=1, n_head=2, n_embd=64), seed=0),
                 tmp_path / "base", tokenizer=tok)


def _sft(tmp_path, out, *extra):
    return main(["sft", "--init", str(tmp_path / "base"), "--data", str(tmp_path / "train.jsonl"), "--out",
                 str(tmp_path / out), "--batch-size", "4", "--lr", "2e-2", "--max-iters", "3", "--warmup-iters", "1",
                 "--lr-decay-iters", "3", "--eval-interval", "100", "--checkpoint-interval", "3", "--no-progress",
                 "--lora-r", "4", *extra])


def test_a_qlora_run_opens_on_its_base_in_blocks_merges_and_exports_a_peft_adapter(tmp_path, capsys, monkeypatch):
    from zerollm.interop.opening import Source, open_model
    _acrostic(tmp_path)
    assert _sft(tmp_path, "qlora", "--quantize-base", "q4_0") == 0
    run = open_model(Source(ckpt=str(tmp_path / "qlora")), tokenizer="skip").model
    blocks = [n for n, w in run.params.items() if isinstance(w, QuantizedMatrix)]
    assert len(blocks) == 4 and run.lora is not None                       # adapters on the base in blocks
    idx = np.arange(1, 30)[None] % run.config.vocab_size
    logits = run.forward(idx)[0]
    base = open_model(Source(ckpt=str(tmp_path / "base")), tokenizer="skip").model
    assert np.abs(logits[..., :base.config.vocab_size] - base.forward(idx)[0]).max() > 1e-3    # the adapters act
    capsys.readouterr()
    # merge: float32 = the dequantized base + the adapters, the same logits
    assert main(["merge", "--from", str(tmp_path / "qlora"), "--to", str(tmp_path / "merged")]) == 0
    merged = open_model(Source(ckpt=str(tmp_path / "merged")), tokenizer="skip").model
    assert all(isinstance(w, np.ndarray) and w.dtype == np.float32 for w in merged.params.values())
    np.testing.assert_allclose(merged.forward(idx)[0], logits, atol=1e-4)
    # merge --quant: re-quantized into a GGUF file that opens with the merged model's logits, up to its rounding
    assert main(["merge", "--from", str(tmp_path / "qlora"), "--to", str(tmp_path / "m.gguf"), "--quant", "q8_0"]) == 0
    again = open_model(Source(gguf=str(tmp_path / "m.gguf")), tokenizer="skip").model
    assert 0 < np.abs(again.forward(idx)[0] - logits).max() < 0.05
    code = main(["merge", "--from", str(tmp_path / "qlora"), "--to", str(tmp_path / "m2"), "--quant", "q4_0"])
    err = capsys.readouterr().err.strip()
    assert code != 0 and len(err.splitlines()) == 1 and "--to FILE.gguf" in err
    # PEFT export: the dequantized base with the adapter beside it, read back with --adapter: the run's logits
    assert main(["convert", "--from", str(tmp_path / "qlora"), "--to", str(tmp_path / "hf")]) == 0
    peft = open_model(Source(hf=str(tmp_path / "hf"), adapter=str(tmp_path / "hf" / "adapter")),
                      tokenizer="skip").model
    assert peft.lora is not None
    np.testing.assert_allclose(peft.forward(idx)[0], logits, atol=1e-4)
    # sample over the run's base read in blocks
    assert main(["sample", "--ckpt", str(tmp_path / "qlora"), "--prompt", "春", "--max-new-tokens", "4",
                 "--temperature", "0"]) == 0
    # sample and serve --adapter over the exported base opened in blocks (--quantize-base): unmerged, the run's logits
    _adapter_over_blocks(tmp_path, monkeypatch, capsys, run, logits)


def _adapter_over_blocks(tmp_path, monkeypatch, capsys, run, logits):
    from zerollm.cli import source
    from zerollm.serve import backend
    seen, real_open = [], source.open_model
    monkeypatch.setattr(source, "open_model", lambda *a, **k: seen.append(real_open(*a, **k)) or seen[-1])

    def stop(model, tok, **kwargs):
        raise ZeroLLMError("stopped before serving")
    monkeypatch.setattr(backend, "Backend", stop)
    given = ["--hf", str(tmp_path / "hf"), "--adapter", str(tmp_path / "hf" / "adapter"), "--quantize-base", "q4_0"]
    # sample, serve and eval: each opens the base in blocks with the adapter on top
    capsys.readouterr()
    assert main(["sample", *given, "--prompt", "春", "--max-new-tokens", "4", "--temperature", "0"]) == 0
    assert main(["serve", *given]) == 1 and "stopped before serving" in capsys.readouterr().err
    from zerollm.interop import opening
    real_opener = opening.open_model                 # zerollm eval opens through the opener itself
    monkeypatch.setattr(opening, "open_model", lambda *a, **k: seen.append(real_opener(*a, **k)) or seen[-1])
    rows = (json.loads(line) for line in (tmp_path / "train.jsonl").read_text(encoding="utf-8").splitlines())
    (tmp_path / "eval.txt").write_text("\n".join(r["completion"] for r in rows), encoding="utf-8")   # known characters
    assert main(["eval", *given, "--data", str(tmp_path / "eval.txt")]) == 0, capsys.readouterr().err
    assert len(seen) == 3
    idx = np.arange(1, 30)[None] % run.config.vocab_size
    for opened in seen:
        model = opened.model
        assert model.lora is not None and len(model.lora.adapters) == len(run.lora.adapters)   # on top, unmerged
        assert sum(isinstance(w, QuantizedMatrix) for w in model.params.values()) == 4          # the base in blocks
        np.testing.assert_allclose(model.forward(idx)[0], logits, rtol=0, atol=1e-5)


def test_a_gguf_base_trains_adapters_over_its_own_blocks_and_resumes(tmp_path, capsys):
    from zerollm.interop.gguf import export_gguf
    from zerollm.interop.gguf_load import load_gguf
    from zerollm.interop.opening import Source, open_model
    _acrostic(tmp_path)
    base = open_model(Source(ckpt=str(tmp_path / "base")))
    export_gguf(base.model, str(tmp_path / "base.gguf"), tokenizer=base.tokenizer, quant_kind="q4_0")
    stored = load_gguf(str(tmp_path / "base.gguf"), quantized=True)[0].params
    flags = ["sft", "--gguf", str(tmp_path / "base.gguf"), "--data", str(tmp_path / "train.jsonl"), "--batch-size",
             "4", "--lr", "2e-2", "--warmup-iters", "1", "--lr-decay-iters", "2", "--eval-interval", "100",
             "--checkpoint-interval", "1", "--no-progress"]
    assert main([*flags, "--out", str(tmp_path / "full"), "--max-iters", "1"]) == 1     # no --lora-r: one line
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "--lora-r" in err
    assert main([*flags, "--out", str(tmp_path / "whole"), "--max-iters", "2", "--lora-r", "4"]) == 0
    assert main([*flags, "--out", str(tmp_path / "cut"), "--max-iters", "1", "--lora-r", "4"]) == 0
    assert main(["sft", "--out", str(tmp_path / "cut"), "--resume", "--max-iters", "2", "--no-progress"]) == 0
    whole = load_file(str(tmp_path / "whole" / "step-0000002" / "model.safetensors"))
    cut = load_file(str(tmp_path / "cut" / "step-0000002" / "model.safetensors"))
    assert whole.keys() == cut.keys() and all(np.array_equal(whole[k], cut[k]) for k in whole)
    run = open_model(Source(ckpt=str(tmp_path / "whole")), tokenizer="skip").model
    kept = [n for n, w in run.params.items() if isinstance(w, QuantizedMatrix)]
    assert len(kept) == 4 and all(np.array_equal(run.params[n].codes, stored[n].codes) for n in kept)   # as stored
    assert isinstance(run.params["wte.weight"], np.ndarray)                                       # the table: float


@pytest.mark.parametrize("kind", ["q4_K", "q6_K"])
def test_a_k_quant_gguf_base_keeps_its_super_blocks_and_gives_loras_gradients(kind, tmp_path):
    from zerollm.interop.gguf import export_gguf
    from zerollm.interop.kquant import KQuantMatrix
    from zerollm.interop.opening import Source, open_model
    tok = CharTokenizer.train(TEXT)
    cfg = GPTConfig(vocab_size=tok.vocab_size, block_size=8, n_layer=1, n_head=2, n_embd=256)   # whole super-blocks
    export_gguf(GPT(cfg, seed=3), str(tmp_path / "m.gguf"), tokenizer=tok, quant_kind=kind)
    quant = open_model(Source(gguf=str(tmp_path / "m.gguf"), quantize="stored"), tokenizer="skip").model
    blocks = {k: v for k, v in quant.params.items() if isinstance(v, KQuantMatrix)}
    assert len(blocks) == 4 and isinstance(quant.params["wte.weight"], np.ndarray)
    plain = GPT(cfg, init=False)
    plain.params = {k: v.dequantize().T.copy() if k in blocks else v.copy() for k, v in quant.params.items()}
    x = np.random.default_rng(2).integers(0, cfg.vocab_size, (2, cfg.block_size))
    grads = []
    for model in (quant, plain):
        model.add_lora(LoRAConfig(r=4, alpha=8.0), np.random.default_rng(0))
        for name, a in model.lora.adapters.items():
            if name.endswith("lora_B"):
                a[...] = np.random.default_rng(3).normal(0, 0.1, a.shape)
        model.train()
        model.forward(x, np.roll(x, -1, axis=1))
        grads.append(model.backward())
    assert sorted(grads[0]) == sorted(grads[1]) and not set(grads[0]) & set(blocks)
    for k in grads[1]:
        np.testing.assert_allclose(grads[0][k], grads[1][k], rtol=1e-4, atol=1e-6)
