"""zerollm.interop.hf: load transformers GPT-2 / Llama directories, export zerollm models back, convert.

Every model is built here with transformers (tiny, random) and compared by logits (float32, 1e-4)
and by greedy generation token for token. Refusals must name the problem.
"""

import json
import os
import re
from dataclasses import replace

import numpy as np
import pytest
import torch
from transformers import (AutoModelForCausalLM, AutoTokenizer, GPT2Config, GPT2LMHeadModel, GPT2Model,
                          LlamaConfig, LlamaForCausalLM, MistralConfig, MistralForCausalLM, MixtralConfig,
                          MixtralForCausalLM)

from zerollm.interop import hf
from zerollm.training.checkpoint import Snapshot, save_checkpoint
from zerollm.cli import main
from zerollm.generation.display import printable, token_bytes
from zerollm.io.errors import ZeroLLMError
from zerollm.model.gpt import GPT, GPTConfig
from zerollm.io.safetensors import load_file, save_file
from zerollm.generation.decode import generate
from zerollm.generation.sample import Sampling
from zerollm.tokenizers import train_tokenizer
from zerollm.teach.torch_ref import random_state

from tiny_runs import run_main
from zerollm.interop.opening import Source, open_model, save_zerollm


def opened(path):
    """(model, tokenizer, checkpoint) of a zerollm run, step or model directory."""
    o = open_model(Source(ckpt=str(path)), tokenizer="may")
    return o.model, o.tokenizer, o.checkpoint

TOL = 1e-4
NO_SPECIAL = dict(bos_token_id=None, eos_token_id=None, pad_token_id=None)

GPT2_CASES = {
    "small": dict(vocab_size=37, n_positions=11, n_embd=12, n_layer=2, n_head=3),
    "odd-erf-untied": dict(vocab_size=53, n_positions=9, n_embd=20, n_layer=3, n_head=5, n_inner=28,
                           activation_function="gelu", tie_word_embeddings=False, layer_norm_epsilon=1e-3),
}
LLAMA_CASES = {
    "gqa2-untied": dict(vocab_size=37, hidden_size=16, intermediate_size=20, num_hidden_layers=2,
                        num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=16),
    "mqa-tied-theta500": dict(vocab_size=37, hidden_size=16, intermediate_size=12, num_hidden_layers=2,
                              num_attention_heads=4, num_key_value_heads=1, max_position_embeddings=16,
                              tie_word_embeddings=True, rope_theta=500.0, rms_norm_eps=1e-5),
    "odd-bias": dict(vocab_size=41, hidden_size=24, intermediate_size=20, num_hidden_layers=1,
                     num_attention_heads=6, num_key_value_heads=3, max_position_embeddings=16,
                     attention_bias=True, mlp_bias=True),
}
# several odd sizes: E experts, top-k, GQA / MQA, tied or not, RoPE bases
MIXTRAL_CASES = {
    "e4-top2-gqa2": dict(vocab_size=37, hidden_size=16, intermediate_size=12, num_hidden_layers=2,
                         num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=16,
                         num_local_experts=4, num_experts_per_tok=2),
    "e3-top1-mqa-tied-theta500": dict(vocab_size=29, hidden_size=16, intermediate_size=10, num_hidden_layers=2,
                                      num_attention_heads=4, num_key_value_heads=1, max_position_embeddings=16,
                                      num_local_experts=3, num_experts_per_tok=1, tie_word_embeddings=True,
                                      rope_theta=500.0),
    "e5-top3-odd": dict(vocab_size=41, hidden_size=24, intermediate_size=20, num_hidden_layers=1,
                        num_attention_heads=6, num_key_value_heads=3, max_position_embeddings=16,
                        num_local_experts=5, num_experts_per_tok=3, rms_norm_eps=1e-6),
}


# ----------------------------------------------------------------------------
# helpers

def jitter(model, seed=0):
    """HF initialises biases to 0 and norm gains to 1; random values make a swapped tensor visible."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for _, p in model.named_parameters():
            if p.ndim == 1:
                p.add_(0.1 * torch.randn(p.shape, generator=g))
            else:
                p.copy_(0.1 * torch.randn(p.shape, generator=g))
    return model.eval()


def gpt2(**kw):
    return jitter(GPT2LMHeadModel(GPT2Config(**kw, **NO_SPECIAL, resid_pdrop=0, embd_pdrop=0, attn_pdrop=0)))


def llama(**kw):
    return jitter(LlamaForCausalLM(LlamaConfig(**kw, **NO_SPECIAL)))


# transformers 5's default grouped_mm kernel for experts needs 16-byte aligned strides on a CPU, which
# odd test sizes are not; the "eager" implementation is its plain per-expert loop
EAGER_EXPERTS = dict(experts_implementation="eager")


def mixtral(**kw):
    return jitter(MixtralForCausalLM(MixtralConfig(**kw, **NO_SPECIAL, **EAGER_EXPERTS)))


def ids(vocab, T=9, B=2, seed=0):
    return np.random.default_rng(seed).integers(0, vocab, (B, T))


def hf_logits(model, idx):
    with torch.no_grad():
        return model(torch.tensor(idx)).logits.float().numpy()


def gap(ours, theirs, idx):
    """max |logits difference|, after checking both models see something (not all-zero logits)."""
    mine = ours.forward(idx)[0]
    assert np.abs(mine).max() > 1e-2
    return np.abs(mine - hf_logits(theirs, idx)).max()


def random_gpt(cfg, seed=0):
    """A zerollm GPT whose every parameter (biases, norm gains too) is random."""
    model = GPT(cfg)
    model.load_state_dict(random_state(cfg, seed, dtype=np.float32))
    return model.eval()


# ----------------------------------------------------------------------------
# loading transformers directories

@pytest.mark.parametrize("name", GPT2_CASES)
def test_load_gpt2_matches_transformers(tmp_path, name):
    theirs = gpt2(**GPT2_CASES[name])
    theirs.save_pretrained(tmp_path, safe_serialization=True)
    ours = hf.load(tmp_path)
    assert ours.config.tie_embeddings == theirs.config.tie_word_embeddings
    assert gap(ours, theirs, ids(theirs.config.vocab_size)) <= TOL


@pytest.mark.parametrize("name", LLAMA_CASES)
@pytest.mark.parametrize("sharded", [False, True])
def test_load_llama_matches_transformers(tmp_path, name, sharded):
    theirs = llama(**LLAMA_CASES[name])
    theirs.save_pretrained(tmp_path, safe_serialization=True, **({"max_shard_size": "2KB"} if sharded else {}))
    assert os.path.isfile(tmp_path / "model.safetensors.index.json") == sharded
    ours = hf.load(tmp_path)
    assert (ours.config.n_kv_head, ours.config.bias) == (theirs.config.num_key_value_heads,
                                                         theirs.config.attention_bias)
    assert gap(ours, theirs, ids(theirs.config.vocab_size)) <= TOL


@pytest.mark.parametrize("name", MIXTRAL_CASES)
def test_load_mixtral_matches_transformers(tmp_path, name):
    theirs = mixtral(**MIXTRAL_CASES[name])
    theirs.save_pretrained(tmp_path, safe_serialization=True, **({"max_shard_size": "4KB"} if "odd" in name else {}))
    ours = hf.load(tmp_path)
    c = theirs.config
    assert (ours.config.n_expert, ours.config.n_expert_active, ours.config.moe_norm_topk, ours.config.moe_layers) == \
        (c.num_local_experts, c.num_experts_per_tok, True, list(range(c.num_hidden_layers)))
    assert ours.config.aux_loss_coef == pytest.approx(c.router_aux_loss_coef * c.num_experts_per_tok)
    assert gap(ours, theirs, ids(c.vocab_size)) <= TOL


def test_load_gpt2_base_model_without_head(tmp_path):
    theirs = jitter(GPT2Model(GPT2Config(**GPT2_CASES["small"], **NO_SPECIAL)))
    theirs.save_pretrained(tmp_path)
    idx = ids(37)
    with torch.no_grad():
        expected = (theirs(torch.tensor(idx)).last_hidden_state @ theirs.wte.weight.T).numpy()
    assert np.abs(hf.load(tmp_path).forward(idx)[0] - expected).max() <= TOL


def test_load_gpt2_hub_layout_with_buffers(tmp_path):
    """The hub's gpt2/model.safetensors: no "transformer." prefix, plus the attn.bias mask buffers."""
    theirs = gpt2(**GPT2_CASES["small"])
    theirs.save_pretrained(tmp_path)
    saved = load_file(tmp_path / "model.safetensors")
    tensors = {name.removeprefix("transformer."): a for name, a in saved.items()}
    for i in range(2):
        tensors[f"h.{i}.attn.bias"] = np.tril(np.ones((1, 1, 11, 11), np.float32))
        tensors[f"h.{i}.attn.masked_bias"] = np.array(-1e4, np.float32)
    save_file(tensors, tmp_path / "model.safetensors", {"format": "pt"})
    assert gap(hf.load(tmp_path), theirs, ids(37)) <= TOL


@pytest.mark.parametrize("rope", [{"rope_theta": 500.0},                                   # transformers 4
                                  {"rope_theta": 500.0, "rope_scaling": None},
                                  {"rope_parameters": {"rope_type": "default", "rope_theta": 500.0}}])
def test_rope_theta_from_either_transformers_version(rope):
    family, cfg = hf.hf_to_config({"model_type": "llama", **LLAMA_CASES["gqa2-untied"], **rope})
    assert (family, cfg.rope_theta, cfg.pos, cfg.n_kv_head) == ("llama", 500.0, "rope", 2)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_load_half_precision_weights(tmp_path, dtype):
    theirs = llama(**LLAMA_CASES["gqa2-untied"]).to(dtype)
    theirs.save_pretrained(tmp_path)
    ours = hf.load(tmp_path, dtype="float64")
    assert ours.params["wte.weight"].dtype == np.float64
    assert gap(ours, theirs.float(), ids(37)) <= TOL      # same rounded weights, both in full precision


def test_load_mistral_without_sliding_window(tmp_path):
    kw = {**LLAMA_CASES["gqa2-untied"], "sliding_window": None}
    theirs = jitter(MistralForCausalLM(MistralConfig(**kw, **NO_SPECIAL)))
    theirs.save_pretrained(tmp_path)
    assert gap(hf.load(tmp_path), theirs, ids(37)) <= TOL


# ----------------------------------------------------------------------------
# exporting zerollm models

EXPORT_CASES = {
    "gpt2-tied": (GPTConfig(vocab_size=37, block_size=11, n_layer=2, n_head=3, n_embd=12), "GPT2LMHeadModel"),
    # GPT-2 has neither bias switches nor GQA: zero biases and repeated kv heads must compute the same
    "gpt2-erf-nobias-gqa": (GPTConfig(vocab_size=29, block_size=9, n_layer=2, n_head=4, n_kv_head=2, n_embd=16,
                                      gelu="erf", bias=False, tie_embeddings=False, norm_eps=1e-3),
                            "GPT2LMHeadModel"),
    "gpt2-mqa-bias": (GPTConfig(vocab_size=31, block_size=8, n_layer=1, n_head=6, n_kv_head=1, n_embd=12),
                      "GPT2LMHeadModel"),
    "llama-gqa-untied": (GPTConfig(vocab_size=37, block_size=11, n_layer=2, n_head=4, n_kv_head=2, n_embd=16,
                                   norm="rmsnorm", pos="rope", mlp="swiglu", bias=False, tie_embeddings=False),
                         "LlamaForCausalLM"),
    "llama-mqa-tied-bias": (GPTConfig(vocab_size=41, block_size=9, n_layer=1, n_head=6, n_kv_head=1, n_embd=24,
                                      norm="rmsnorm", pos="rope", mlp="swiglu", rope_theta=5e5, norm_eps=1e-6),
                            "LlamaForCausalLM"),
    "mixtral-e4-top2-gqa": (GPTConfig(vocab_size=37, block_size=11, n_layer=2, n_head=4, n_kv_head=2, n_embd=16,
                                      n_inner=12, norm="rmsnorm", pos="rope", mlp="swiglu", bias=False,
                                      tie_embeddings=False, n_expert=4, n_expert_active=2, moe_norm_topk=True),
                            "MixtralForCausalLM"),
    "mixtral-e3-top3-tied-odd": (GPTConfig(vocab_size=31, block_size=9, n_layer=1, n_head=3, n_kv_head=1, n_embd=18,
                                           n_inner=14, norm="rmsnorm", pos="rope", mlp="swiglu", bias=False,
                                           n_expert=3, n_expert_active=3, moe_norm_topk=True, rope_theta=500.0),
                                 "MixtralForCausalLM"),
}


@pytest.mark.parametrize("name", EXPORT_CASES)
def test_export_loads_in_transformers(tmp_path, name):
    cfg, architecture = EXPORT_CASES[name]
    ours = random_gpt(cfg)
    hf.export(ours, tmp_path / "out")
    theirs = AutoModelForCausalLM.from_pretrained(tmp_path / "out", **(EAGER_EXPERTS if cfg.n_expert else {})).eval()
    assert type(theirs).__name__ == architecture
    idx = ids(cfg.vocab_size, T=cfg.block_size)
    assert gap(ours, theirs, idx) <= TOL
    back = hf.load(tmp_path / "out")                         # and back into zerollm
    assert np.abs(back.forward(idx)[0] - ours.forward(idx)[0]).max() <= TOL


@pytest.mark.parametrize("name", ["llama-mqa-tied-bias", "mixtral-e4-top2-gqa"])
def test_export_round_trip_is_exact(tmp_path, name):
    cfg = EXPORT_CASES[name][0]
    ours = random_gpt(cfg, seed=4)
    back = hf.load(hf.export(ours, tmp_path / "x"))
    # Mixtral's config.json has no z-loss (a training setting): it comes back as 0
    assert back.config == (replace(cfg, z_loss_coef=0.0) if cfg.n_expert else cfg)
    for name, value in ours.params.items():
        np.testing.assert_array_equal(back.params[name], value, err_msg=name)


@pytest.mark.parametrize("case, change, field", [
    ("gpt2-tied", dict(pos="sinusoidal"), "pos='sinusoidal'"),
    ("gpt2-tied", dict(causal=False), "causal=False"),
    ("gpt2-tied", dict(norm="rmsnorm"), "norm='rmsnorm'"),                 # rmsnorm + GELU: no family
    ("gpt2-tied", dict(n_expert=4), "as GPT-2 it has n_expert=4"),
    ("mixtral-e4-top2-gqa", dict(n_layer=4, moe_every=2), "as Mixtral it has moe_every=2"),   # the hybrid stack
    ("mixtral-e4-top2-gqa", dict(n_shared_expert=1), "n_shared_expert=1 (needs 0)"),
    ("mixtral-e4-top2-gqa", dict(moe_norm_topk=False), "moe_norm_topk=False (needs True)"),
    ("mixtral-e4-top2-gqa", dict(bias=True), "as Mixtral it has bias=True"),
])
def test_export_refuses_what_transformers_cannot_express(tmp_path, case, change, field):
    cfg = replace(EXPORT_CASES[case][0], **change)
    with pytest.raises(ZeroLLMError, match=re.escape(field)):
        hf.export(GPT(cfg), tmp_path / "out")
    assert not os.path.exists(tmp_path / "out") and os.listdir(tmp_path) == []


def test_export_directory_is_replaced_only_when_asked(tmp_path):
    model = random_gpt(EXPORT_CASES["gpt2-tied"][0])
    out = hf.export(model, tmp_path / "m")
    with pytest.raises(ZeroLLMError, match="not empty"):
        hf.export(model, out)
    (tmp_path / "m" / "notes.txt").write_text("mine")
    hf.export(model, out, overwrite=True)
    assert sorted(os.listdir(out)) == ["config.json", "model.safetensors", "notes.txt"]   # the model replaced
    assert (tmp_path / "m" / "notes.txt").read_text() == "mine"
    (tmp_path / "notes").mkdir()
    (tmp_path / "notes" / "a.txt").write_text("keep me")
    with pytest.raises(ZeroLLMError, match="not a model directory"):
        hf.export(model, tmp_path / "notes", overwrite=True)
    assert (tmp_path / "notes" / "a.txt").read_text() == "keep me"
    assert sorted(os.listdir(tmp_path)) == ["m", "notes"]      # no temp directories left behind


def test_export_bpe_tokenizer_loads_in_autotokenizer(tmp_path, shakespeare_path):
    tok = train_tokenizer("bpe", shakespeare_path.read_text()[:20000], vocab_size=300)
    model = random_gpt(GPTConfig(vocab_size=304, block_size=16, n_layer=1, n_head=2, n_embd=8))
    hf.export(model, tmp_path / "m", tokenizer=tok)
    theirs = AutoTokenizer.from_pretrained(tmp_path / "m")
    text = "First Citizen:\nBefore we proceed, hear me speak. 你好！<|endoftext|>"
    assert theirs.encode(text) == tok.encode(text, allowed_special="all")
    assert theirs.eos_token_id == tok.special_tokens["<|endoftext|>"]
    assert json.loads((tmp_path / "m" / "config.json").read_text())["eos_token_id"] == theirs.eos_token_id
    assert hf.load_tokenizer_dir(tmp_path / "m").encode(text) == tok.encode(text)   # and back


@pytest.mark.parametrize("kind", ["byte", "char"])
def test_byte_and_char_tokenizers_are_exported_too(tmp_path, kind):
    model = random_gpt(replace(EXPORT_CASES["gpt2-tied"][0], vocab_size=256))
    tok = train_tokenizer(kind, "hello, world\n")
    hf.export(model, tmp_path / "m", tokenizer=tok)
    assert sorted(os.listdir(tmp_path / "m")) == ["config.json", "model.safetensors", "tokenizer.json",
                                                  "tokenizer_config.json"]
    assert AutoTokenizer.from_pretrained(tmp_path / "m").encode("world, hello") == tok.encode("world, hello")


def test_a_model_directory_opens_with_a_hugging_face_tokenizer_json(tmp_path):
    """zerollm's one tokenizer reader takes either form wherever a tokenizer.json is read, here a model
    directory whose file was replaced by the same tokenizer as Hugging Face writes it."""
    model = random_gpt(replace(EXPORT_CASES["gpt2-tied"][0], vocab_size=256))
    tok = train_tokenizer("char", "hello, world\n")
    save_zerollm(model, tmp_path / "m", tokenizer=tok)
    tok.to_hf_tokenizer_json(tmp_path / "m" / "tokenizer.json")
    opened = open_model(Source(ckpt=tmp_path / "m"))
    assert opened.tokenizer.name == "char"
    assert opened.tokenizer.encode("world, hello") == tok.encode("world, hello")


# ----------------------------------------------------------------------------
# greedy generation with the KV cache equals transformers' generate

@pytest.mark.parametrize("family", ["gpt2", "llama", "mixtral", "mixtral-odd"])
def test_greedy_generation_matches_transformers(tmp_path, family):
    if family == "gpt2":
        theirs = gpt2(vocab_size=50, n_positions=32, n_embd=16, n_layer=2, n_head=2)
    elif family == "llama":
        theirs = llama(vocab_size=50, hidden_size=16, intermediate_size=24, num_hidden_layers=2,
                       num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=32)
    elif family == "mixtral":
        theirs = mixtral(vocab_size=50, hidden_size=16, intermediate_size=24, num_hidden_layers=2,
                         num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=32,
                         num_local_experts=4, num_experts_per_tok=2)
    else:
        theirs = mixtral(vocab_size=50, hidden_size=24, intermediate_size=10, num_hidden_layers=2,
                         num_attention_heads=6, num_key_value_heads=3, max_position_embeddings=32,
                         num_local_experts=6, num_experts_per_tok=1, rope_theta=1e4)
    theirs.save_pretrained(tmp_path)
    prompt = ids(50, T=5, B=1, seed=1)
    with torch.no_grad():
        out = theirs.generate(torch.tensor(prompt), do_sample=False, max_new_tokens=20)
    expected = out[0, 5:].tolist()
    ours = [int(t[0]) for t in generate(hf.load(tmp_path), prompt, 20, Sampling(temperature=0))]
    assert len(set(expected)) > 3, "a degenerate model would test nothing"
    assert ours == expected


def test_sample_hf_on_the_command_line(tmp_path, shakespeare_path, capsys):
    """`zerollm sample --hf DIR` on a saved model + tokenizer: greedy text equals transformers'."""
    tok = train_tokenizer("bpe", shakespeare_path.read_text()[:20000], vocab_size=300)
    theirs = gpt2(vocab_size=tok.vocab_size, n_positions=48, n_embd=16, n_layer=2, n_head=2)
    theirs.save_pretrained(tmp_path)
    tok.to_hf_tokenizer_json(tmp_path / "tokenizer.json")
    prompt = "ROMEO: What"
    with torch.no_grad():
        out = theirs.generate(torch.tensor([tok.encode(prompt)]), do_sample=False, max_new_tokens=15)
    # the text shown: the tokens' bytes, with any that are not UTF-8 escaped (zerollm.generation.display), not U+FFFD
    raw = b"".join(token_bytes(tok, i) for i in out[0].tolist()).decode("utf-8", "surrogateescape")
    expected = printable(raw)
    assert main(["sample", "--hf", str(tmp_path), "--prompt", prompt, "--temperature", "0",
                 "--max-new-tokens", "15"]) == 0
    assert capsys.readouterr().out == expected + "\n"
    assert main(["sample", "--hf", str(tmp_path / "nowhere")]) == 1
    assert capsys.readouterr().err.count("\n") == 1


# ----------------------------------------------------------------------------
# refusals

def write_config(folder, **hf_config):
    folder.mkdir(exist_ok=True)
    (folder / "config.json").write_text(json.dumps(hf_config))
    return folder


def test_pickle_only_directory_is_refused(tmp_path):
    folder = write_config(tmp_path / "m", architectures=["GPT2LMHeadModel"], model_type="gpt2",
                          **GPT2_CASES["small"])
    torch.save({"wte.weight": torch.zeros(37, 12)}, folder / "pytorch_model.bin")
    expected = r"pickle.*run arbitrary code.*save_pretrained\(d, safe_serialization=True\)"
    with pytest.raises(ZeroLLMError, match=expected):
        hf.load(folder)


LLAMA_JSON = dict(architectures=["LlamaForCausalLM"], model_type="llama", **LLAMA_CASES["gqa2-untied"])
MIXTRAL_JSON = dict(architectures=["MixtralForCausalLM"], model_type="mixtral", **MIXTRAL_CASES["e4-top2-gqa2"])


@pytest.mark.parametrize("config, message", [
    (dict(architectures=["BertForMaskedLM"], model_type="bert"), "BertForMaskedLM is not supported"),
    (dict(model_type="t5"), "model_type 't5' is not supported"),
    ({**LLAMA_JSON, "rope_scaling": {"rope_type": "llama3", "factor": 8.0}}, "rope scaling 'llama3'"),
    ({**LLAMA_JSON, "rope_parameters": {"rope_type": "yarn", "rope_theta": 1e4}}, "rope scaling 'yarn'"),
    ({**LLAMA_JSON, "model_type": "qwen2", "architectures": ["Qwen2ForCausalLM"], "use_sliding_window": True},
     "use_sliding_window=True"),
    ({**LLAMA_JSON, "model_type": "qwen3", "architectures": ["Qwen3ForCausalLM"], "attention_bias": True},
     "attention_bias=true"),
    ({**LLAMA_JSON, "hidden_act": "gelu"}, "hidden_act='gelu'"),
    ({**LLAMA_JSON, "attention_bias": True}, "attention_bias=True with mlp_bias=False"),
    ({**LLAMA_JSON, "architectures": ["MistralForCausalLM"], "sliding_window": 4}, "sliding_window=4"),
    (dict(architectures=["GPT2LMHeadModel"], **GPT2_CASES["small"], scale_attn_by_inverse_layer_idx=True),
     "scale_attn_by_inverse_layer_idx=True"),
    (dict(architectures=["GPT2LMHeadModel"], **GPT2_CASES["small"], activation_function="relu"),
     "activation_function='relu'"),
    ({**MIXTRAL_JSON, "router_jitter_noise": 0.01}, "router_jitter_noise=0.01"),
    ({**MIXTRAL_JSON, "sliding_window": 4}, "sliding_window=4"),
    ({**MIXTRAL_JSON, "hidden_act": "gelu"}, "hidden_act='gelu'"),
    ({**MIXTRAL_JSON, "rope_scaling": {"rope_type": "yarn", "factor": 2.0}}, "rope scaling 'yarn'"),
    ({**MIXTRAL_JSON, "num_experts_per_tok": 5}, "n_expert_active=5 must be between 1 and n_expert=4"),
    ({**MIXTRAL_JSON, "num_local_experts": 1, "num_experts_per_tok": 1}, "n_expert=1"),
])
def test_unsupported_configs_are_refused_by_name(tmp_path, config, message):
    with pytest.raises(ZeroLLMError, match=message) as err:
        hf.load(write_config(tmp_path / "m", **config))
    assert "damaged" not in str(err.value)          # the file is fine: zerollm lacks the architecture


def test_mismatched_weights_are_listed(tmp_path):
    gpt2(**GPT2_CASES["small"]).save_pretrained(tmp_path)
    config = json.loads((tmp_path / "config.json").read_text())
    write_config(tmp_path, **{**config, "n_layer": 3})
    with pytest.raises(ZeroLLMError, match=r"missing \['h\.2\.attn\.c_attn\.bias'"):
        hf.load(tmp_path)


def test_shard_index_cannot_point_outside_the_directory(tmp_path):
    folder = write_config(tmp_path / "m", **LLAMA_JSON)
    (folder / "model.safetensors.index.json").write_text(json.dumps(
        {"weight_map": {"model.norm.weight": "../secret.safetensors"}}))
    with pytest.raises(ZeroLLMError, match="outside its directory"):
        hf.load(folder)


# ----------------------------------------------------------------------------
# zerollm's own model directories and `zerollm convert`

def test_save_and_load_zerollm_model_directory(tmp_path):
    tok = train_tokenizer("byte", "")
    model = random_gpt(EXPORT_CASES["llama-gqa-untied"][0])
    save_zerollm(model, tmp_path / "z", tokenizer=tok)
    back = open_model(Source(ckpt=tmp_path / "z"), tokenizer="skip").model
    assert back.config == model.config and not back.training
    assert all(np.array_equal(back.params[n], v) for n, v in model.params.items())
    assert open_model(Source(ckpt=tmp_path / "z"), tokenizer="may").tokenizer.name == "byte"
    assert not hf.is_hf_dir(tmp_path / "z")


def test_load_zerollm_reads_a_training_run(tmp_path):
    model = random_gpt(EXPORT_CASES["gpt2-tied"][0])
    save_checkpoint(tmp_path / "run", Snapshot(step=3, model_config=model.config.to_dict(), train_config={},
                                               params=model.params, optimizer_state={"m": {}, "v": {}, "t": 3},
                                               rng_state={}, tokenizer_path=None))
    back = open_model(Source(ckpt=tmp_path / "run"), tokenizer="skip").model
    idx = ids(37)
    assert np.array_equal(back.forward(idx)[0], model.forward(idx)[0])
    assert open_model(Source(ckpt=tmp_path / "run"), tokenizer="may").tokenizer is None


@pytest.mark.parametrize("make, case", [(llama, LLAMA_CASES["mqa-tied-theta500"]),
                                        (mixtral, MIXTRAL_CASES["e3-top1-mqa-tied-theta500"])])
def test_convert_round_trip_on_the_command_line(tmp_path, capsys, make, case):
    theirs = make(**case)
    theirs.save_pretrained(tmp_path / "hf")
    assert main(["convert", "--from", str(tmp_path / "hf"), "--to", str(tmp_path / "z")]) == 0
    assert "zerollm model directory" in capsys.readouterr().out
    assert main(["convert", "--from", str(tmp_path / "z"), "--to", str(tmp_path / "hf2")]) == 0
    out = capsys.readouterr().out
    assert "Hugging Face directory" in out and ("Mixtral layout" in out) == (make is mixtral)
    again = AutoModelForCausalLM.from_pretrained(tmp_path / "hf2", **(EAGER_EXPERTS if make is mixtral else {}))
    assert type(again) is type(theirs)
    idx = ids(case["vocab_size"])
    assert np.abs(hf_logits(again, idx) - hf_logits(theirs, idx)).max() <= TOL


def test_convert_refuses_an_unsupported_mixtral_in_one_line(tmp_path, capsys):
    theirs = mixtral(**MIXTRAL_CASES["e4-top2-gqa2"])
    theirs.config.router_jitter_noise = 0.05                  # training-time noise zerollm's router lacks
    theirs.save_pretrained(tmp_path / "hf")
    capsys.readouterr()
    assert main(["convert", "--from", str(tmp_path / "hf"), "--to", str(tmp_path / "z")]) == 1
    err = capsys.readouterr().err
    assert "router_jitter_noise=0.05" in err and err.count("\n") == 1 and not (tmp_path / "z").exists()


@pytest.mark.parametrize("argv, message", [
    (["--from", "{tmp}/nowhere", "--to", "{tmp}/out"], "directory not found"),
    (["--from", "{tmp}/hf", "--to", "{tmp}/hf"], "overlap"),
    (["--from", "{tmp}/hf", "--to", "{tmp}/hf/inside"], "overlap"),
    (["--from", "{tmp}/hf", "--to", "{tmp}/hf-copy/.."], "overlap"),
])
def test_convert_errors_are_one_line(tmp_path, capsys, argv, message):
    gpt2(**GPT2_CASES["small"]).save_pretrained(tmp_path / "hf")
    capsys.readouterr()                                       # drop transformers' progress bar
    assert main(["convert", *[a.format(tmp=tmp_path) for a in argv]]) == 1
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1 and "Traceback" not in err


def clone_of_a_hub_repo(folder, model):
    """A model directory as `git clone https://huggingface.co/...` leaves it: the model's files and the
    repository's own (.git/, README.md, generation_config.json), plus an old adapter with its model card."""
    hf.export(model, folder, tokenizer=train_tokenizer("char", "abcdefgh\n"))
    (folder / ".git" / "objects").mkdir(parents=True)
    (folder / ".git" / "HEAD").write_text("ref: refs/heads/main\n")
    (folder / "README.md").write_text("# my model card\n")
    (folder / "generation_config.json").write_text('{"max_new_tokens": 20}')
    (folder / "adapter").mkdir()
    (folder / "adapter" / "adapter_config.json").write_text("{}")
    (folder / "adapter" / "README.md").write_text("# the adapter's card\n")
    return {p.relative_to(folder).as_posix(): p.read_bytes() for p in folder.rglob("*") if p.is_file()}


def test_convert_overwrite_replaces_the_model_and_keeps_everything_else(tmp_path, capsys):
    """--overwrite on a cloned repository: the model files are new, .git/, README.md, generation_config.json and
    adapter/README.md are untouched, the old adapter_config.json (no adapter now) is gone, one note names
    what stayed; without --overwrite the one line says --overwrite, not the Python keyword."""
    clone = tmp_path / "clone"
    before = clone_of_a_hub_repo(clone, random_gpt(GPTConfig(vocab_size=12, block_size=8, n_layer=1, n_head=2,
                                                             n_embd=8)))
    new = random_gpt(GPTConfig(vocab_size=12, block_size=8, n_layer=2, n_head=2, n_embd=8), seed=1)
    save_zerollm(new, tmp_path / "new", tokenizer=train_tokenizer("char", "abcdefgh\n"))
    code, out, err = run_main(["convert", "--from", tmp_path / "new", "--to", clone], capsys)
    assert code == 1 and len(err.strip().splitlines()) == 1 and err.rstrip().endswith("with --overwrite"), err
    assert "overwrite=True" not in err
    code, out, err = run_main(["convert", "--from", tmp_path / "new", "--to", clone, "--overwrite"], capsys)
    assert code == 0, err
    after = {p.relative_to(clone).as_posix(): p.read_bytes() for p in clone.rglob("*") if p.is_file()}
    kept = [".git/HEAD", "README.md", "generation_config.json", "adapter/README.md"]
    assert {k: after[k] for k in kept} == {k: before[k] for k in kept}
    assert sorted(set(after) - set(kept)) == ["config.json", "model.safetensors", "tokenizer.json",
                                               "tokenizer_config.json"]
    assert (clone / ".git" / "objects").is_dir()
    assert hf.load(clone).config.n_layer == 2 and after["model.safetensors"] != before["model.safetensors"]
    assert "note: kept .git, README.md, adapter/README.md, generation_config.json" in err, err
    assert sorted(os.listdir(tmp_path)) == ["clone", "new"]                 # no temporary folder left


def test_overwrite_that_fails_midway_leaves_every_file_as_it_was(tmp_path, monkeypatch):
    clone = tmp_path / "clone"
    before = clone_of_a_hub_repo(clone, random_gpt(GPTConfig(vocab_size=12, block_size=8, n_layer=1, n_head=2,
                                                             n_embd=8)))
    import zerollm.interop.hf.exporting as exporting

    def disk_full(*args, **kwargs):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(exporting, "save_file", disk_full)
    with pytest.raises(OSError):
        hf.export(random_gpt(GPTConfig(vocab_size=12, block_size=8, n_layer=2, n_head=2, n_embd=8)), clone,
                  overwrite=True)
    assert {p.relative_to(clone).as_posix(): p.read_bytes() for p in clone.rglob("*") if p.is_file()} == before
    assert sorted(os.listdir(tmp_path)) == ["clone"]


def test_a_zerollm_directory_over_an_export_leaves_no_stale_tokenizer_config(tmp_path):
    """tokenizer_config.json is written only in the Hugging Face layout: over an export holding the user's
    notes, a zerollm model directory removes it (a loader would pair it with the new model)."""
    model = random_gpt(GPTConfig(vocab_size=12, block_size=8, n_layer=1, n_head=2, n_embd=8))
    tok = train_tokenizer("char", "abcdefgh\n")
    hf.export(model, tmp_path / "m", tokenizer=tok)
    (tmp_path / "m" / "notes.txt").write_text("mine")
    save_zerollm(model, tmp_path / "m", tokenizer=tok, overwrite=True)
    assert sorted(os.listdir(tmp_path / "m")) == ["config.json", "model.safetensors", "notes.txt", "tokenizer.json"]
    assert open_model(Source(ckpt=tmp_path / "m"), tokenizer="skip").model.config.n_layer == 1


# ----------------------------------------------------------------------------
# a reward model: transformers' sequence classifier with one label

@pytest.mark.parametrize("lora", [False, True])
def test_a_reward_model_exports_as_a_sequence_classifier_with_the_same_rewards(tmp_path, capsys, lora):
    """`zerollm reward` adds a score head; convert used to drop it silently. Now AutoModelForSequenceClassification
    gives the reward zerollm reads (at the last token), for the plain and the LoRA reward model."""
    from transformers import AutoModelForSequenceClassification
    from tiny_runs import tiny_stage_base
    from zerollm.align.objectives.reward import read_rewards
    from zerollm.model.heads import split_head_params
    tiny_stage_base(tmp_path)
    run = tmp_path / "rm"
    code, out, err = run_main(["reward", "--init", tmp_path / "base", "--data", tmp_path / "prefs.jsonl", "--out", run,
                               "--max-iters", "3", "--batch-size", "2", "--lr", "1e-2", "--no-progress",
                               *(["--lora-r", "2"] if lora else [])], capsys)
    assert code == 0, err
    code, out, err = run_main(["convert", "--from", run, "--to", tmp_path / "rm-hf"], capsys)
    assert code == 0 and "GPT2ForSequenceClassification" in out, err
    config = json.loads((tmp_path / "rm-hf" / "config.json").read_text())
    assert config["architectures"] == ["GPT2ForSequenceClassification"] and config["id2label"] == {"0": "LABEL_0"}
    assert not (tmp_path / "rm-hf" / "adapter").exists()
    theirs = AutoModelForSequenceClassification.from_pretrained(tmp_path / "rm-hf", dtype=torch.float64).eval()
    assert theirs.config.num_labels == 1
    model, tok, ckpt = opened(run)                              # a LoRA run: with its base, adapters on
    head = split_head_params(ckpt.params)[1]
    assert (model.lora is not None) == lora
    assert np.abs(head["score.weight"]).max() > 0                 # trained: not the zero head it starts as
    bias = float(head["score.bias"][0])                           # left out: transformers' score has none
    assert bias == 0 or f"the score head's bias ({bias:.6g}) is left out" in err, err
    for text in ["1+1=2", "3+4=8", "12+30=42\n"]:
        ids = np.array([tok.encode(text)])
        ours = read_rewards(model, head, ids, np.array([ids.shape[1] - 1]))[0]
        with torch.no_grad():
            logits = theirs(torch.from_numpy(ids)).logits.numpy()
        assert logits.shape == (1, 1)
        assert abs(logits[0, 0] - (ours[0] - bias)) <= 1e-5 * max(1.0, abs(ours[0])), (text, logits, ours)


@pytest.mark.parametrize("name", ["gpt2-erf-nobias-gqa", "llama-gqa-untied", "mixtral-e4-top2-gqa"])
def test_every_layout_exports_its_reward_head(tmp_path, name):
    """hf.export(score=...) for each family: the sequence classifier's logit is h[last] @ w (no bias)."""
    from transformers import AutoModelForSequenceClassification
    from zerollm.model.heads import head_params
    cfg, architecture = EXPORT_CASES[name]
    ours = random_gpt(cfg)
    head = head_params("score", cfg.n_embd, np.float32, np.random.default_rng(3), std=0.5)
    hf.export(ours, tmp_path / "out", score=head)
    theirs = AutoModelForSequenceClassification.from_pretrained(tmp_path / "out", dtype=torch.float64,
                                                                 **(EAGER_EXPERTS if cfg.n_expert else {})).eval()
    assert type(theirs).__name__ == architecture.replace("LMHeadModel", "ForCausalLM").replace(
        "ForCausalLM", "ForSequenceClassification")
    idx = ids(cfg.vocab_size, T=cfg.block_size, B=1)
    expected = ours.forward_hidden(idx)[0, -1] @ head["score.weight"]             # (C,) @ (C, 1) -> (1,)
    with torch.no_grad():
        got = theirs(torch.from_numpy(idx)).logits.numpy()                        # (1, 1)
    assert abs(got[0, 0] - expected[0]) <= TOL * max(1.0, abs(expected[0])), (got, expected)
