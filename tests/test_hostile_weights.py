"""Weights that are not numbers never enter a model, whatever door they come in by (issue #55, part C).

Every source of weights: a training run's checkpoint, a zerollm model directory and a Hugging Face folder
(both written by `zerollm convert`), GGUF files (f32, f16, and the float16 block scales of q8_0 / q4_0), a
PEFT adapter's lora_A / lora_B, and a LoRA run's adapters. Each is damaged with NaN, +inf or -inf (in one
number or in all), or with 1e300 stored as F64 (infinity once cast to the model's float32), and each
command that reads it (sample, eval, chat, serve, merge, a stage's --adapter) must refuse it: exit 1, one
line on stderr naming the file and the tensor, no traceback, nothing printed on stdout (the sampler used to
print garbage, or NUL bytes, with exit 0). Finite adapters whose fold W + alpha/r A B overflows float32 are
refused the same way. The undamaged files still load and sample the same text as before.
"""

import shutil
import subprocess
import sys

import numpy as np
import pytest

from tiny_runs import TINY_MODEL, run_main, step_dir, tiny_run, tiny_text
from zerollm.io.safetensors import load_file, load_metadata, save_file
from zerollm.interop.opening import Source, open_model, save_zerollm

BAD = {"nan": np.nan, "+inf": np.inf, "-inf": -np.inf}
SPREAD = ("one", "all")
BEYOND_FLOAT32 = 1e300         # finite as F64; inf as the model's float32
GREEDY = ["--prompt", "ab", "--max-new-tokens", "4", "--temperature", "0", "--no-chat"]
QKV = "h.0.attn.c_attn"
ADAPTER_KEY = "base_model.model.transformer.h.0.attn.c_attn.lora_{}.weight"


# ----------------------------------------------------------------------------
# the sources: made once per module, copied per test

@pytest.fixture(scope="module")
def made(tmp_path_factory):
    """base (a random zerollm model directory, byte tokenizer), hf and z (`zerollm convert` of it, and back),
    m-KIND.gguf for each GGUF kind, adapter (a PEFT adapter on base with B != 0), run (a tiny training run)
    and lora (a tiny `train --lora-r` run)."""
    from zerollm.cli.entry import main
    from zerollm.data.formats import write_jsonl
    from zerollm.interop import hf
    from zerollm.interop.peft import save_adapter
    from zerollm.model.gpt import GPT, GPTConfig
    from zerollm.nn.lora import LoRAConfig
    from zerollm.tokenizers import ByteTokenizer
    folder = tmp_path_factory.mktemp("weights")
    # n_embd 32: rows of whole 32-number blocks, so the GGUF matrices are really stored as q8_0 / q4_0
    model = GPT(GPTConfig(vocab_size=256, block_size=16, n_layer=1, n_head=2, n_embd=32), seed=0)
    save_zerollm(model, folder / "base", tokenizer=ByteTokenizer())
    model.add_lora(LoRAConfig(r=2, alpha=4.0, targets=("c_attn", "c_proj", "c_fc")), np.random.default_rng(0))
    rng = np.random.default_rng(1)
    for a in model.lora.adapters.values():
        a[...] = rng.standard_normal(a.shape) * 0.3
    save_adapter(model, folder / "adapter", str(folder / "base"))
    write_jsonl(folder / "sft.jsonl", [{"prompt": "ab", "completion": "cd"}] * 4)
    assert main(["convert", "--from", str(folder / "base"), "--to", str(folder / "hf")]) == 0
    assert main(["convert", "--from", str(folder / "hf"), "--to", str(folder / "z")]) == 0
    for kind in GGUF_KINDS:
        assert main(["convert", "--from", str(folder / "base"), "--to", str(folder / f"m-{kind}.gguf"),
                     "--quant", kind]) == 0
    assert main(["train", "--data", str(tiny_text(folder)), "--out", str(folder / "lora"), "--tokenizer", "char",
                 "--lora-r", "2", "--lora-targets", "c_attn", *TINY_MODEL]) == 0
    shutil.copytree(tiny_run(tmp_path_factory, "char"), folder / "run")
    return folder


def copied(made, tmp_path, name):
    src = made / name
    if src.is_file():
        shutil.copy(src, tmp_path / name)
    else:
        shutil.copytree(src, tmp_path / name)
    return tmp_path / name


def poison(path, name, value, spread="one"):
    """Put ``value`` into the first number (or every number) of tensor ``name`` of a safetensors file; a
    value beyond float32 stores that tensor as F64."""
    tensors, meta = load_file(path), load_metadata(path)
    a = tensors[name].astype(np.float64 if abs(value) == BEYOND_FLOAT32 else tensors[name].dtype)
    if spread == "all":
        a[...] = value
    else:
        a.flat[0] = value
    tensors[name] = a
    save_file(tensors, path, meta)


def refused(code, out, err, *words):
    """The one-line refusal: exit 1, nothing on stdout (never a NUL byte), no traceback, the words named."""
    assert code == 1, (code, out, err)
    assert "\x00" not in out and not out.strip(), repr(out)
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err and "warning" not in err, err
    for word in words:
        assert str(word) in err, (word, err)


VALUES = [(v, s) for v in BAD for s in SPREAD] + [("1e300", "one"), ("-1e300", "all")]


def value_of(label):
    return BAD[label] if label in BAD else float(label)


# ----------------------------------------------------------------------------
# safetensors files: a training run, a model directory, a Hugging Face folder

def _checkpoint(made, tmp_path, text):
    run = copied(made, tmp_path, "run")
    file = step_dir(run) / "model.safetensors"
    return file, f"{QKV}.weight", [["sample", "--ckpt", run, *GREEDY], ["eval", "--ckpt", run, "--data", text]]


def _model_dir(made, tmp_path, text):
    z = copied(made, tmp_path, "z")
    return z / "model.safetensors", f"{QKV}.weight", [["sample", "--ckpt", z, *GREEDY],
                                                     ["eval", "--ckpt", z, "--data", text]]


def _hf_folder(made, tmp_path, text):
    folder = copied(made, tmp_path, "hf")
    return folder / "model.safetensors", f"transformer.{QKV}.weight", [["sample", "--hf", folder, *GREEDY]]


SAFETENSORS = {"checkpoint": _checkpoint, "model directory": _model_dir, "hugging face folder": _hf_folder}


@pytest.mark.parametrize("value, spread", VALUES)
@pytest.mark.parametrize("source", sorted(SAFETENSORS))
def test_weights_not_finite_in_float32_are_refused_by_file_and_tensor(made, tmp_path, capsys, source, value,
                                                                      spread):
    file, tensor, commands = SAFETENSORS[source](made, tmp_path, tiny_text(tmp_path))
    poison(file, tensor, value_of(value), spread)
    for argv in commands:
        refused(*run_main(argv, capsys), file, tensor, "hold NaN or infinity")


@pytest.mark.parametrize("value", sorted(BAD))
@pytest.mark.parametrize("stored", ("F16", "BF16"))
@pytest.mark.parametrize("source", ("hugging face folder", "adapter"))
def test_half_precision_tensors_not_finite_are_refused(made, tmp_path, capsys, source, stored, value):
    """F16 and BF16 hold NaN and infinity too (BF16 is read as float32, F16 is summed in float64)."""
    if source == "adapter":
        folder = copied(made, tmp_path, "adapter")
        file, tensor = folder / "adapter_model.safetensors", ADAPTER_KEY.format("B")
        argv = ["sample", "--ckpt", made / "base", "--adapter", folder, *GREEDY]
    else:
        folder = copied(made, tmp_path, "hf")
        file, tensor = folder / "model.safetensors", f"transformer.{QKV}.weight"
        argv = ["sample", "--hf", folder, *GREEDY]
    tensors, meta = load_file(file), load_metadata(file)
    tensors[tensor] = tensors[tensor].copy()
    tensors[tensor].flat[-1] = BAD[value]
    if stored == "F16":
        tensors[tensor] = tensors[tensor].astype(np.float16)
    save_file(tensors, file, meta, bf16=(tensor,) if stored == "BF16" else ())
    assert load_file(file)[tensor].dtype == (np.float16 if stored == "F16" else np.float32)
    refused(*run_main(argv, capsys), file, tensor, "hold NaN or infinity")


@pytest.fixture(scope="module")
def reward_run(tmp_path_factory):
    from tiny_runs import tiny_stage_base
    from zerollm.cli.entry import main
    folder = tiny_stage_base(tmp_path_factory.mktemp("reward"))
    assert main(["reward", "--init", str(folder / "base"), "--data", str(folder / "prefs.jsonl"), "--out",
                 str(folder / "rm"), "--max-iters", "2", "--batch-size", "2", "--no-progress"]) == 0
    return folder


@pytest.mark.parametrize("value, spread", [("nan", "one"), ("-inf", "all"), ("1e300", "one")])
@pytest.mark.parametrize("tensor", ("score.weight", "score.bias"))
def test_a_reward_heads_weights_not_finite_are_refused(reward_run, tmp_path, capsys, tensor, value, spread):
    """The reward head lives beside the model's weights in model.safetensors: the same check, the same line."""
    run = tmp_path / "rm"
    shutil.copytree(reward_run / "rm", run)
    file = step_dir(run) / "model.safetensors"
    poison(file, tensor, value_of(value), spread)
    refused(*run_main(["score", "--rm", run, "--data", reward_run / "prefs.jsonl"], capsys), file, tensor,
            "hold NaN or infinity")
    code, out, err = run_main(["score", "--rm", reward_run / "rm", "--data", reward_run / "prefs.jsonl"], capsys)
    assert code == 0 and "accuracy" in out, err


# ----------------------------------------------------------------------------
# GGUF: float tensors, and the float16 scale of each 32-number block

GGUF_KINDS = ("f32", "f16", "q8_0", "q4_0")
BLOCK_BYTES = {"Q8_0": 34, "Q4_0": 18}           # a float16 scale, then the codes


def poison_gguf(path, tensor, value, spread):
    """NaN / inf in the first (or every) number of an f32 / f16 tensor, or in the scale of its first (or
    every) block when it is quantized: all 32 numbers of a block depend on its scale."""
    import gguf
    t = next(t for t in gguf.GGUFReader(path).tensors if t.name == tensor)
    kind = t.tensor_type.name
    if kind == "F32":
        code, stride, count = np.float32(value).tobytes(), 4, int(t.n_elements)
    else:
        code = np.float16(value).tobytes()
        stride = BLOCK_BYTES.get(kind, 2)
        count = int(t.n_bytes) // stride
    data = bytearray(path.read_bytes())
    for i in range(count if spread == "all" else 1):
        start = int(t.data_offset) + i * stride
        data[start:start + len(code)] = code
    path.write_bytes(bytes(data))
    return kind


@pytest.mark.parametrize("value, spread", [(v, s) for v in BAD for s in SPREAD])
@pytest.mark.parametrize("kind", GGUF_KINDS)
def test_gguf_tensors_and_block_scales_not_finite_are_refused_by_gguf_name(made, tmp_path, capsys, kind, value,
                                                                           spread):
    path = copied(made, tmp_path, f"m-{kind}.gguf")
    stored = poison_gguf(path, "blk.0.attn_qkv.weight", BAD[value], spread)
    assert stored == kind.upper()                   # the damage hit what the kind says: a scale, or a number
    for argv in (["sample", "--gguf", path, *GREEDY], ["eval", "--gguf", path, "--data", tiny_text(tmp_path)]):
        refused(*run_main(argv, capsys), path, "blk.0.attn_qkv.weight", "hold NaN or infinity")
    if (value, spread) == ("nan", "one"):         # beside it, the file undamaged: f32 samples the base's text
        code, out, err = run_main(["sample", "--gguf", made / f"m-{kind}.gguf", *GREEDY], capsys)
        assert code == 0 and out.startswith("ab") and "\x00" not in out, err
        if kind == "f32":
            assert out == run_main(["sample", "--ckpt", made / "base", *GREEDY], capsys)[1]


# ----------------------------------------------------------------------------
# PEFT adapters: lora_A, lora_B; and finite adapters whose fold overflows

def adapter_commands(made, adapter, text):
    """Every command that puts --adapter on a model: sample on a zerollm model and a Hugging Face one, eval,
    and a stage starting from base + adapter (folded in)."""
    return [["sample", "--ckpt", made / "base", "--adapter", adapter, *GREEDY],
            ["sample", "--hf", made / "hf", "--adapter", adapter, *GREEDY],
            ["eval", "--ckpt", made / "base", "--adapter", adapter, "--data", text],
            ["sft", "--init", made / "base", "--adapter", adapter, "--data", made / "sft.jsonl",
             "--out", adapter.parent / "out", "--max-iters", "1", "--no-progress"]]


@pytest.mark.parametrize("value, spread", VALUES)
@pytest.mark.parametrize("part", ("A", "B"))
def test_a_peft_adapter_not_finite_is_refused_by_file_and_tensor(made, tmp_path, capsys, part, value, spread):
    adapter = copied(made, tmp_path, "adapter")
    file, tensor = adapter / "adapter_model.safetensors", ADAPTER_KEY.format(part)
    poison(file, tensor, value_of(value), spread)
    for argv in adapter_commands(made, adapter, tiny_text(tmp_path))[:3]:
        refused(*run_main(argv, capsys), file, tensor, "hold NaN or infinity")


@pytest.mark.parametrize("size", (1e20, -1e20, 3e19))
def test_a_finite_adapter_whose_fold_overflows_float32_is_refused(made, tmp_path, capsys, size):
    """lora_A and lora_B of 1e20 are finite, but A B is 1e40 per entry: infinity in float32, merged or not."""
    adapter = copied(made, tmp_path, "adapter")
    file = adapter / "adapter_model.safetensors"
    for part in "AB":
        poison(file, ADAPTER_KEY.format(part), size, "all")
    for argv in adapter_commands(made, adapter, tiny_text(tmp_path)):
        refused(*run_main(argv, capsys), file, "base_model.model.transformer.h.0.attn.c_attn (lora_A, lora_B)",
                "overflows float32")
    assert not (tmp_path / "out").exists()


def test_good_adapters_load_and_sample_the_same_text_on_either_base(made, tmp_path, capsys):
    """The same adapter on the zerollm base and on its Hugging Face export samples the same text; large but
    harmless values (x 1000, their fold far inside float32) still load. Beside them, one NaN is refused."""
    texts = []
    for argv in (["--ckpt", made / "base"], ["--hf", made / "hf"]):
        code, out, err = run_main(["sample", *argv, "--adapter", made / "adapter", *GREEDY], capsys)
        assert code == 0 and "\x00" not in out, err
        texts.append(out)
    assert texts[0] == texts[1] and texts[0].startswith("ab")
    large = copied(made, tmp_path, "adapter")
    file = large / "adapter_model.safetensors"
    tensors = {k: v * 1000 for k, v in load_file(file).items()}
    save_file(tensors, file, load_metadata(file))
    code, out, err = run_main(["sample", "--ckpt", made / "base", "--adapter", large, *GREEDY], capsys)
    assert code == 0 and out.startswith("ab"), err
    poison(file, ADAPTER_KEY.format("B"), np.nan)
    refused(*run_main(["sample", "--ckpt", made / "base", "--adapter", large, *GREEDY], capsys), file)


# ----------------------------------------------------------------------------
# a LoRA run: its adapters, and merge

@pytest.mark.parametrize("value, spread", [("nan", "one"), ("+inf", "all"), ("1e300", "one")])
def test_a_lora_runs_adapters_not_finite_are_refused_by_merge_and_sample(made, tmp_path, capsys, value, spread):
    run = copied(made, tmp_path, "lora")
    file = step_dir(run) / "model.safetensors"
    poison(file, f"{QKV}.lora_B", value_of(value), spread)
    for argv in (["merge", "--from", run, "--to", tmp_path / "merged"], ["sample", "--ckpt", run, *GREEDY]):
        refused(*run_main(argv, capsys), file, f"{QKV}.lora_B", "hold NaN or infinity")
    assert not (tmp_path / "merged").exists()


@pytest.mark.parametrize("size", (1e20, -1e25))
def test_a_lora_run_whose_fold_overflows_is_refused_by_merge_and_sample(made, tmp_path, capsys, size):
    run = copied(made, tmp_path, "lora")
    file = step_dir(run) / "model.safetensors"
    for part in "AB":
        poison(file, f"{QKV}.lora_{part}", size, "all")
    for argv in (["merge", "--from", run, "--to", tmp_path / "merged"], ["sample", "--ckpt", run, *GREEDY]):
        refused(*run_main(argv, capsys), file, f"{QKV} (lora_A, lora_B)", "overflows float32")
    assert not (tmp_path / "merged").exists()
    good = made / "lora"
    code, out, err = run_main(["merge", "--from", good, "--to", tmp_path / "merged"], capsys)
    assert code == 0, err
    texts = [run_main(["sample", "--ckpt", c, *GREEDY], capsys) for c in (good, tmp_path / "merged")]
    assert texts[0][0] == texts[1][0] == 0 and texts[0][1] == texts[1][1]


# ----------------------------------------------------------------------------
# resume: what feeds the next step's weights

def test_negative_second_moments_are_refused_on_resume(made, tmp_path, capsys):
    """AdamW divides by sqrt(v): a negative v made the resumed run's weights NaN at its first step."""
    run = copied(made, tmp_path, "run")
    file = step_dir(run) / "optimizer.safetensors"
    poison(file, f"v.{QKV}.weight", -1.0)
    refused(*run_main(["train", "--resume", "--max-iters", "3", "--no-progress", "--out", run], capsys),
            file, f"{QKV}.weight", "negative")


@pytest.fixture(scope="module")
def grpo_run(reward_run):
    """A one-step GRPO run on the reward fixture's base: its checkpoint holds objective.safetensors."""
    from zerollm.cli.entry import main
    run = reward_run / "grpo"
    assert main(["grpo", "--init", str(reward_run / "base"), "--data", str(reward_run / "prompts.jsonl"), "--reward",
                 "addition", "--prompts-per-step", "2", "--group-size", "2", "--max-new-tokens", "4",
                 "--max-iters", "1", "--out", str(run), "--no-progress"]) == 0
    return run


@pytest.mark.parametrize("tensor, value", [("buffer.adv", np.nan), ("buffer.old_logp", -np.inf),
                                           ("buffer.reward", np.inf)])
def test_a_rollout_buffer_not_finite_is_refused_on_resume(grpo_run, tmp_path, capsys, tensor, value):
    """A GRPO run saves its rollout (advantages, log-probabilities) beside the weights: the next steps'
    gradients come from it, so it passes the same check."""
    run = tmp_path / "grpo"
    shutil.copytree(grpo_run, run)
    file = step_dir(run) / "objective.safetensors"
    poison(file, tensor, value)
    refused(*run_main(["grpo", "--resume", "--out", run, "--max-iters", "2", "--no-progress"], capsys), file, tensor,
            "hold NaN or infinity")


# ----------------------------------------------------------------------------
# the real process: the exit code, the bytes on stdout, one line on stderr

def real_cli(*argv, stdin=""):
    proc = subprocess.run([sys.executable, "-m", "zerollm", *map(str, argv)], input=stdin.encode(),
                          capture_output=True, timeout=120)
    return proc.returncode, proc.stdout.decode("utf-8", "replace"), proc.stderr.decode("utf-8", "replace")


@pytest.mark.parametrize("command", ("sample", "chat", "serve"))
def test_the_real_command_refuses_a_nan_adapter_in_one_line(made, tmp_path, command):
    """As a user runs them: sample printed the NaN model's text with exit 0; chat and serve load the
    same way and must stop before they prompt or listen."""
    adapter = copied(made, tmp_path, "adapter")
    file = adapter / "adapter_model.safetensors"
    poison(file, ADAPTER_KEY.format("A"), np.nan, "all")
    extra = {"sample": GREEDY, "chat": [], "serve": ["--port", "0", "--host", "127.0.0.1"]}[command]
    refused(*real_cli(command, "--hf", made / "hf", "--adapter", adapter, *extra), file, ADAPTER_KEY.format("A"))


@pytest.mark.parametrize("kind", ("fifo", "folder", "device"))
@pytest.mark.parametrize("name", ("adapter_config.json", "adapter_model.safetensors"))
def test_an_adapters_file_that_is_no_regular_file_is_named_as_such(made, tmp_path, capsys, name, kind):
    """A pipe, a folder or a device where an adapter's file should be is refused for what it is (before:
    'no adapter_config.json', as if it were missing), and a pipe is never opened."""
    import os
    adapter = copied(made, tmp_path, "adapter")
    (adapter / name).unlink()
    {"fifo": os.mkfifo, "folder": os.mkdir, "device": lambda p: os.symlink("/dev/null", p)}[kind](adapter / name)
    code, out, err = run_main(["sample", "--ckpt", made / "base", "--adapter", adapter, *GREEDY], capsys)
    assert code != 0 and len(err.splitlines()) == 1 and "Traceback" not in err, err
    assert f"{adapter / name} is a" in err and "must be a regular file" in err, err
