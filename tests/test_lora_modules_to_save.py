"""LoRA with whole modules trained beside the adapters (--lora-modules-to-save, PEFT's modules_to_save), the
default targets (every linear layer) and what --help says about the learning rate (issue #57 item 6).

A small model's token table is most of its parameters; frozen, a LoRA fine-tune of the acrostic task learned
nothing (docs/lora.md). Here, on tiny models: the tables get exactly a full fine-tune's gradient, the rest of
the base none; merged = unmerged; and the PEFT adapter zerollm writes loads in peft on the transformers export
of the base with the same logits, and back in zerollm.
"""

import argparse
import json

import numpy as np
import pytest

from zerollm.interop import hf
from zerollm.io.errors import ZeroLLMError
from zerollm.io.safetensors import load_file
from zerollm.model.config import GPTConfig
from zerollm.model.gpt import GPT
from zerollm.nn.lora import LoRAConfig
from zerollm.training.flags import add_lora_arguments, lora_config

from tiny_runs import run_main

LAYOUTS = {
    "gpt2": dict(vocab_size=13, block_size=12, n_layer=2, n_head=2, n_embd=8),          # tied embeddings
    "llama": dict(vocab_size=13, block_size=12, n_layer=2, n_head=4, n_kv_head=2, n_embd=16, norm="rmsnorm",
                  pos="rope", mlp="swiglu", bias=False, n_inner=24, tie_embeddings=False),
}
SAVE = {"gpt2": ("wte",), "llama": ("wte", "lm_head")}
IDX = np.array([[1, 5, 2, 7, 3, 9], [4, 4, 0, 12, 6, 8]])
TGT = np.roll(IDX, -1, axis=1)


def flags(*argv):
    p = argparse.ArgumentParser()
    add_lora_arguments(p)
    return lora_config(p.parse_args(list(argv)))


def trained(layout, dtype="float32", seed=0):
    """A LoRA model with modules_to_save whose adapters and tables moved away from the base."""
    model = GPT(GPTConfig(**LAYOUTS[layout], dtype=dtype), seed=seed)
    model.add_lora(LoRAConfig(r=3, alpha=5.0, modules_to_save=SAVE[layout]), np.random.default_rng(seed))
    rng = np.random.default_rng(seed + 1)
    for a in model.trainable().values():
        a += (rng.standard_normal(a.shape) * 0.3).astype(a.dtype)
    return model


# ----------------------------------------------------------------------------
# the default targets, the flag, --help

@pytest.mark.parametrize("layout", sorted(LAYOUTS))
def test_the_default_targets_are_every_linear_layer_of_attention_and_mlp(layout):
    model = GPT(GPTConfig(**LAYOUTS[layout]), seed=0).add_lora(flags("--lora-r", "4"), np.random.default_rng(0))
    adapted = {s.linear for s in model.lora.sites}
    linears = {n.removesuffix(".weight") for n in model.params if n.startswith("h.") and n.endswith(".weight")
               and model.params[n].ndim == 2}
    assert adapted == linears and len(adapted) == 8          # c_attn, attn.c_proj, mlp.c_fc, mlp.c_proj per layer
    # an explicit choice still wins
    model = GPT(GPTConfig(**LAYOUTS[layout]), seed=0)
    model.add_lora(flags("--lora-r", "4", "--lora-targets", "c_attn"), np.random.default_rng(0))
    assert {s.name for s in model.lora.sites} == {"h.0.attn.c_attn", "h.1.attn.c_attn"}


def test_the_flag_reads_names_and_needs_a_rank():
    assert flags("--lora-r", "2", "--lora-modules-to-save", "wte, lm_head").modules_to_save == ("wte", "lm_head")
    assert flags("--lora-r", "2").modules_to_save == ()
    with pytest.raises(ZeroLLMError, match="--lora-modules-to-save needs --lora-r"):
        flags("--lora-modules-to-save", "wte")
    with pytest.raises(ZeroLLMError, match="'ln_f' is not a module that can train beside the adapters"):
        flags("--lora-r", "2", "--lora-modules-to-save", "ln_f")
    with pytest.raises(ZeroLLMError, match="ties its head to the token table"):     # tied: lm_head is wte
        GPT(GPTConfig(**LAYOUTS["gpt2"]), seed=0).add_lora(flags("--lora-r", "2", "--lora-modules-to-save",
                                                                  "lm_head"), np.random.default_rng(0))


@pytest.mark.parametrize("command", ["train", "sft", "dpo"])
def test_help_says_lora_wants_a_higher_learning_rate_and_names_the_new_flag(command, capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "1000")                    # argparse would break "all-linear" at its hyphen
    code, out, _ = run_main([command, "--help"], capsys)
    assert code == 0
    text = " ".join(out.split())
    assert "LoRA wants a higher --lr than a full fine-tune" in text
    assert "--lora-modules-to-save" in text and "default all-linear" in text


# ----------------------------------------------------------------------------
# training: the tables get a full fine-tune's gradient, the rest of the base none

@pytest.mark.parametrize("layout", sorted(LAYOUTS))
def test_the_saved_tables_get_exactly_the_full_fine_tunes_gradient(layout):
    cfg = GPTConfig(**LAYOUTS[layout], dtype="float64")
    full = GPT(cfg, seed=0).train()
    full.forward(IDX, TGT)
    want = full.backward()
    model = GPT(cfg, seed=0).train()
    model.add_lora(LoRAConfig(r=2, modules_to_save=SAVE[layout]), np.random.default_rng(0))
    model.forward(IDX, TGT)
    grads = model.backward()                                 # B = 0: the adapters change no other gradient
    tables = {"wte.weight"} | ({"lm_head.weight"} if layout == "llama" else set())
    assert set(grads) == set(model.lora.adapters) | tables
    for name in tables:
        assert np.array_equal(grads[name], want[name]), name
        assert model.trainable()[name] is model.params[name]     # the optimizer updates the model's own table
    assert model.lora.num_params() == sum(a.size for a in model.trainable().values())


@pytest.mark.parametrize("layout", sorted(LAYOUTS))
def test_merged_keeps_the_trained_tables_and_the_reference_keeps_the_start(layout):
    model = GPT(GPTConfig(**LAYOUTS[layout], dtype="float64"), seed=0)
    start = {k: v.copy() for k, v in model.params.items()}
    model.add_lora(LoRAConfig(r=2, modules_to_save=SAVE[layout]), np.random.default_rng(0))
    reference = model.without_adapters()                     # DPO's frozen reference, made before training
    for a in model.trainable().values():
        a += 0.1
    merged = model.merged()
    assert np.abs(merged.eval().forward(IDX)[0] - model.eval().forward(IDX)[0]).max() < 1e-12
    assert np.array_equal(merged.params["wte.weight"], model.params["wte.weight"])
    assert np.array_equal(reference.params["wte.weight"], start["wte.weight"])


# ----------------------------------------------------------------------------
# PEFT: zerollm writes modules_to_save as peft does, and reads them back

@pytest.mark.parametrize("layout", sorted(LAYOUTS))
def test_peft_loads_the_adapter_with_its_tables_on_the_base_export_with_the_same_logits(layout, tmp_path):
    torch = pytest.importorskip("torch")
    pytest.importorskip("peft")
    from peft import PeftModel
    from transformers import AutoModelForCausalLM
    from zerollm.interop.peft import load_adapter, save_adapter
    hf.export(GPT(GPTConfig(**LAYOUTS[layout]), seed=0), tmp_path / "base")   # the base, before training
    model = trained(layout)
    save_adapter(model, tmp_path / "adapter", str(tmp_path / "base"))
    config = json.loads((tmp_path / "adapter" / "adapter_config.json").read_text())
    table = "transformer.wte" if layout == "gpt2" else "model.embed_tokens"
    assert config["modules_to_save"] == [table.split(".")[1], "lm_head"]        # tied: the head's copy too
    tensors = load_file(tmp_path / "adapter" / "adapter_model.safetensors")
    assert np.array_equal(tensors[f"base_model.model.{table}.weight"], model.params["wte.weight"])
    base = AutoModelForCausalLM.from_pretrained(tmp_path / "base", attn_implementation="eager")
    twin = PeftModel.from_pretrained(base, tmp_path / "adapter").eval()
    theirs = twin(input_ids=torch.from_numpy(IDX)).logits.detach().numpy()
    ours, _ = model.eval().forward(IDX)
    assert np.abs(ours - theirs).max() < 1e-5
    back = load_adapter(GPT(GPTConfig(**LAYOUTS[layout]), seed=0), tmp_path / "adapter").eval()
    assert back.lora.config.modules_to_save == SAVE[layout]
    assert np.array_equal(back.forward(IDX)[0], ours)


def test_a_peft_adapter_that_unties_a_tied_table_is_refused(tmp_path):
    from zerollm.interop.peft import load_adapter, save_adapter
    save_adapter(trained("gpt2"), tmp_path / "a", "base")
    file = tmp_path / "a" / "adapter_config.json"
    file.write_text(json.dumps({**json.loads(file.read_text()), "modules_to_save": ["wte"]}))    # PEFT's default
    weights = tmp_path / "a" / "adapter_model.safetensors"
    from zerollm.io.safetensors import save_file
    save_file({k: v for k, v in load_file(weights).items() if not k.endswith("lm_head.weight")}, weights)
    with pytest.raises(ZeroLLMError, match="ties lm_head to the token table"):
        load_adapter(GPT(GPTConfig(**LAYOUTS["gpt2"]), seed=0), tmp_path / "a")
