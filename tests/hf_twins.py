"""Hugging Face twins of a zerollm model: the same weights in GPT2LMHeadModel / LlamaForCausalLM /
MixtralForCausalLM.

A test helper: tests/test_torch_ref.py uses it to prove zerollm.teach.torch_ref right against transformers.
"""

import functools
import types
from contextlib import contextmanager
from dataclasses import replace

import numpy as np
import torch

from zerollm.model.config import GPTConfig
from zerollm.io.errors import ZeroLLMError
from zerollm.teach.torch_ref import param_shapes

# ----------------------------------------------------------------------------
# Hugging Face twins: the same weights in GPT2LMHeadModel / LlamaForCausalLM (float64, eager attention)

def _require(config, family, **needed):
    wrong = [f"{key}={getattr(config, key)!r} (needs {value!r})"
             for key, value in needed.items() if getattr(config, key) != value]
    if wrong:
        raise ZeroLLMError(f"{family} cannot express this config: {', '.join(wrong)}")


def gpt2_kwargs(config: GPTConfig) -> dict:
    """GPT2Config arguments for a GPTConfig (layernorm, learned positions, GELU MLP, causal)."""
    _require(config, "GPT-2", norm="layernorm", pos="learned", mlp="gelu", causal=True)
    return dict(vocab_size=config.vocab_size, n_positions=config.block_size, n_embd=config.n_embd,
                n_layer=config.n_layer, n_head=config.n_head, n_inner=config.n_inner,
                activation_function="gelu_new" if config.gelu == "tanh" else "gelu",
                layer_norm_epsilon=config.norm_eps, tie_word_embeddings=config.tie_embeddings,
                resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0, bos_token_id=None, eos_token_id=None)


def llama_kwargs(config: GPTConfig) -> dict:
    """LlamaConfig arguments for a GPTConfig (rmsnorm, RoPE, SwiGLU, causal)."""
    _require(config, "Llama", norm="rmsnorm", pos="rope", mlp="swiglu", causal=True)
    return dict(vocab_size=config.vocab_size, max_position_embeddings=config.block_size,
                hidden_size=config.n_embd, intermediate_size=config.n_inner,
                num_hidden_layers=config.n_layer, num_attention_heads=config.n_head,
                num_key_value_heads=config.n_kv_head, head_dim=config.head_size, hidden_act="silu",
                rms_norm_eps=config.norm_eps, tie_word_embeddings=config.tie_embeddings,
                rope_parameters={"rope_type": "default", "rope_theta": config.rope_theta},  # transformers 5
                rope_theta=config.rope_theta,                                               # transformers 4
                attention_bias=config.bias, mlp_bias=config.bias, attention_dropout=0.0,
                bos_token_id=None, eos_token_id=None, pad_token_id=None)


def mixtral_kwargs(config: GPTConfig) -> dict:
    """MixtralConfig arguments for a GPTConfig (Llama's settings, every block MoE, renormalised top-k)."""
    _require(config, "Mixtral", norm="rmsnorm", pos="rope", mlp="swiglu", causal=True, bias=False, moe_every=1,
             moe_norm_topk=True, n_shared_expert=0)
    kw = llama_kwargs(config)
    for key in ("attention_bias", "mlp_bias"):
        del kw[key]
    return dict(kw, num_local_experts=config.n_expert, num_experts_per_tok=config.n_expert_active,
                router_jitter_noise=0.0, sliding_window=None)


# ----------------------------------------------------------------------------
# name maps: each of our parameters is one HF tensor, or several side by side
# (c_attn = [q | k | v], c_fc = [gate | up])

_TABLES = ("wte.weight", "wpe.weight", "lm_head.weight")    # (rows, C) in both layouts, never transposed


def gpt2_pieces(config):
    """{our name: [(HF name, width)]}: GPT-2 keeps our layout; only a "transformer." prefix is added."""
    pieces = {name: [("transformer." + name, shape[-1])] for name, shape in param_shapes(config).items()}
    if not config.tie_embeddings:
        pieces["lm_head.weight"] = [("lm_head.weight", config.n_embd)]
    return pieces


def llama_pieces(config):
    """{our name: [(HF name, width)]}: the HF pieces sit side by side, in order, along our last axis."""
    C, H, hs = config.n_embd, config.n_inner, config.head_size
    q, kv = config.n_head * hs, config.n_kv_head * hs
    pieces = {"wte.weight": [("model.embed_tokens.weight", C)], "ln_f.weight": [("model.norm.weight", C)],
              "lm_head.weight": [("lm_head.weight", C)]}
    for i in range(config.n_layer):
        layer = {"ln_1": [("input_layernorm", C)], "ln_2": [("post_attention_layernorm", C)],
                 "attn.c_attn": [("self_attn.q_proj", q), ("self_attn.k_proj", kv),
                                 ("self_attn.v_proj", kv)],
                 "attn.c_proj": [("self_attn.o_proj", C)],
                 "mlp.c_fc": [("mlp.gate_proj", H), ("mlp.up_proj", H)],
                 "mlp.c_proj": [("mlp.down_proj", C)]}
        for ours, theirs in layer.items():
            for kind in ("weight", "bias"):
                pieces[f"h.{i}.{ours}.{kind}"] = [(f"model.layers.{i}.{name}.{kind}", width)
                                                  for name, width in theirs]
    return {name: pieces[name] for name in param_shapes(config)}   # only what this config has


def mixtral_pieces(config):
    """Llama's map for attention and norms; a stacked expert tensor maps to one piece list per expert."""
    pieces = {name: parts for name, parts in llama_pieces(replace(config, n_expert=0)).items()
              if ".mlp." not in name}
    C, H, E = config.n_embd, config.n_inner, config.n_expert
    for i in range(config.n_layer):
        moe = f"model.layers.{i}.block_sparse_moe."
        pieces[f"h.{i}.mlp.router.weight"] = [(moe + "gate.weight", E)]
        pieces[f"h.{i}.mlp.experts.c_fc.weight"] = [[(f"{moe}experts.{j}.w1.weight", H),
                                                     (f"{moe}experts.{j}.w3.weight", H)] for j in range(E)]
        pieces[f"h.{i}.mlp.experts.c_proj.weight"] = [[(f"{moe}experts.{j}.w2.weight", C)] for j in range(E)]
    return {name: pieces[name] for name in param_shapes(config)}


def _per_expert(parts, value):
    """[(piece list, array)]: one pair for a plain tensor, one per expert for a stacked one."""
    if isinstance(parts[0], list):
        return list(zip(parts, value))
    return [(parts, value)]


def _transposed(name, value, out_in):
    # nn.Linear stores (out, in); our matrices and GPT-2's Conv1D store (in, out)
    return value.T if out_in and value.ndim == 2 and name not in _TABLES else value


def to_hf_arrays(state, pieces, out_in):
    """Our arrays -> HF arrays: split along our last axis, then transpose matrices for nn.Linear."""
    hf = {}
    for name, all_parts in pieces.items():
        for parts, value in _per_expert(all_parts, np.asarray(state[name])):
            cuts = np.cumsum([width for _, width in parts])[:-1]
            for (hf_name, _), piece in zip(parts, np.split(value, cuts, axis=-1)):
                hf[hf_name] = _transposed(name, piece, out_in)
    return hf


def from_hf_arrays(hf, pieces, out_in):
    """HF arrays -> ours (the inverse of ``to_hf_arrays``); works for weights and for gradients."""
    def join(name, parts):
        return np.concatenate([_transposed(name, np.asarray(hf[n]), out_in) for n, _ in parts], axis=-1)
    return {name: np.stack([join(name, p) for p in parts]) if isinstance(parts[0], list) else join(name, parts)
            for name, parts in pieces.items()}


# ----------------------------------------------------------------------------
# building the HF models

@contextmanager
def _llama_in_float64():
    """Run HF Llama's own code with its float32 casts turned into float64.

    modeling_llama computes RMSNorm, the attention softmax and the RoPE angles in float32 on purpose
    (safe bf16 training). That caps agreement near 1e-7, too coarse to prove a layout. Inside this
    context the names ``torch.float32`` and ``torch.float`` in that one module mean float64; every
    formula stays HF's.
    """
    from transformers.models.llama import modeling_llama
    real = modeling_llama.torch
    fake = types.ModuleType("torch")
    fake.__dict__.update(real.__dict__)
    fake.float32 = fake.float = torch.float64
    modeling_llama.torch = fake
    try:
        yield
    finally:
        modeling_llama.torch = real


@contextmanager
def _mixtral_in_float64():
    """As _llama_in_float64, for modeling_mixtral; its router also calls ``tensor.float()``, which a
    module name cannot reach, so inside this context that method converts to float64 too."""
    from transformers.models.mixtral import modeling_mixtral
    real, own_float = modeling_mixtral.torch, torch.Tensor.__dict__.get("float")
    fake = types.ModuleType("torch")
    fake.__dict__.update(real.__dict__)
    fake.float32 = fake.float = torch.float64
    modeling_mixtral.torch = fake
    torch.Tensor.float = lambda self, *a, **kw: self.to(torch.float64)
    try:
        yield
    finally:
        modeling_mixtral.torch = real
        if own_float is None:
            del torch.Tensor.float               # back to the inherited method
        else:
            torch.Tensor.float = own_float


def _load(model, arrays, zero_biases=False):
    """Copy arrays into every entry of ``model.state_dict()``; absent biases become zeros if allowed."""
    tensors = {}
    for name, current in model.state_dict().items():
        if name in arrays:
            value = torch.tensor(np.asarray(arrays[name]), dtype=torch.float64)
        elif zero_biases and name.endswith(".bias"):
            value = torch.zeros_like(current)
        else:
            raise ZeroLLMError(f"no weights for HF parameter {name}")
        if value.shape != current.shape:
            raise ZeroLLMError(f"{name}: got shape {tuple(value.shape)}, HF expects {tuple(current.shape)}")
        tensors[name] = value
    model.load_state_dict(tensors, strict=True)
    return model


def to_hf_gpt2(state, config):
    """A float64 ``GPT2LMHeadModel`` (eager attention, eval mode) holding ``state``.

    With bias=False its (always present) biases are zeros, which computes exactly our bias-free model.
    """
    from transformers import GPT2Config, GPT2LMHeadModel
    hf_config = GPT2Config(**gpt2_kwargs(config), attn_implementation="eager")
    model = GPT2LMHeadModel(hf_config).to(torch.float64).eval()
    arrays = to_hf_arrays(state, gpt2_pieces(config), out_in=False)
    if config.tie_embeddings:
        arrays["lm_head.weight"] = arrays["transformer.wte.weight"]   # one shared tensor in HF
    return _load(model, arrays, zero_biases=not config.bias)


def to_hf_llama(state, config):
    """A float64 ``LlamaForCausalLM`` (eager attention, eval mode) holding ``state``.

    Its forward runs inside ``_llama_in_float64``, so HF's float32 casts do not blur the comparison.
    """
    from transformers import LlamaConfig, LlamaForCausalLM
    hf_config = LlamaConfig(**llama_kwargs(config), attn_implementation="eager")
    with _llama_in_float64():
        model = LlamaForCausalLM(hf_config)                  # RoPE inv_freq is computed here
    model = model.to(torch.float64).eval()
    arrays = to_hf_arrays(state, llama_pieces(config), out_in=True)
    if config.tie_embeddings:
        arrays["lm_head.weight"] = arrays["model.embed_tokens.weight"]
    forward = model.forward

    @functools.wraps(forward)
    def forward_in_float64(*args, **kwargs):
        with _llama_in_float64():
            return forward(*args, **kwargs)

    model.forward = forward_in_float64
    return _load(model, arrays)


def to_hf_mixtral(state, config, **extra):
    """A float64 ``MixtralForCausalLM`` (eager, eval mode) holding ``state``, run in _mixtral_in_float64.
    ``extra``: more MixtralConfig settings (output_router_logits=True, say)."""
    from transformers import MixtralConfig, MixtralForCausalLM
    hf_config = MixtralConfig(**mixtral_kwargs(config), attn_implementation="eager", experts_implementation="eager",
                              **extra)
    with _mixtral_in_float64():
        model = MixtralForCausalLM(hf_config)
    model = model.to(torch.float64).eval()
    arrays = to_hf_arrays(state, mixtral_pieces(config), out_in=True)
    if config.tie_embeddings:
        arrays["lm_head.weight"] = arrays["model.embed_tokens.weight"]
    forward = model.forward

    @functools.wraps(forward)
    def forward_in_float64(*args, **kwargs):
        with _mixtral_in_float64():
            return forward(*args, **kwargs)

    model.forward = forward_in_float64
    return _load(model, _fused_experts(model, arrays))


def _fused_experts(model, arrays):
    """transformers 5 holds a layer's experts fused in memory (gate_up_proj (E, 2H, C), down_proj
    (E, C, H)); the per-expert w1/w2/w3 tensors of the checkpoint layout are put together here."""
    fused = {k: v for k, v in arrays.items() if ".block_sparse_moe." not in k}
    names = model.state_dict()
    for i in range(model.config.num_hidden_layers):
        moe, mlp = f"model.layers.{i}.block_sparse_moe.", f"model.layers.{i}.mlp."
        E = model.config.num_local_experts
        if mlp + "experts.gate_up_proj" not in names:                 # transformers 4: per-expert modules
            fused.update({k: v for k, v in arrays.items() if k.startswith(moe)})
            continue
        fused[mlp + "gate.weight"] = arrays[moe + "gate.weight"]
        fused[mlp + "experts.gate_up_proj"] = np.stack(
            [np.concatenate([arrays[f"{moe}experts.{j}.w1.weight"], arrays[f"{moe}experts.{j}.w3.weight"]])
             for j in range(E)])
        fused[mlp + "experts.down_proj"] = np.stack([arrays[f"{moe}experts.{j}.w2.weight"] for j in range(E)])
    return fused


def _hf_pieces(model, config):
    if model.config.model_type == "llama":
        return llama_pieces(config), True
    if model.config.model_type == "mixtral":
        return mixtral_pieces(config), True
    return gpt2_pieces(config), False


def hf_state_numpy(model, config):
    """The HF model's weights, in our names and layout."""
    arrays = {name: t.detach().numpy() for name, t in model.state_dict().items()}
    return from_hf_arrays(_split_experts(model, arrays), *_hf_pieces(model, config))


def hf_grads_numpy(model, config):
    """The HF model's gradients (after backward), in our names and layout. Tied: the shared tensor's grad."""
    params = model.state_dict(keep_vars=True)                # tied: both HF names, one Parameter
    arrays = {name: p.grad.numpy() for name, p in params.items() if p.grad is not None}
    return from_hf_arrays(_split_experts(model, arrays), *_hf_pieces(model, config))


def _split_experts(model, arrays):
    """The inverse of _fused_experts: fused expert tensors back into per-expert checkpoint names."""
    if model.config.model_type != "mixtral":
        return arrays
    out = {k: v for k, v in arrays.items() if ".experts." not in k and ".mlp.gate." not in k}
    H = model.config.intermediate_size
    for i in range(model.config.num_hidden_layers):
        moe, mlp = f"model.layers.{i}.block_sparse_moe.", f"model.layers.{i}.mlp."
        out[moe + "gate.weight"] = arrays[mlp + "gate.weight"]
        for j, (gate_up, down) in enumerate(zip(arrays[mlp + "experts.gate_up_proj"],
                                                arrays[mlp + "experts.down_proj"])):
            out[f"{moe}experts.{j}.w1.weight"], out[f"{moe}experts.{j}.w3.weight"] = gate_up[:H], gate_up[H:]
            out[f"{moe}experts.{j}.w2.weight"] = down
    return out
