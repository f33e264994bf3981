"""transformers ``config.json`` <-> GPTConfig, for the families zerollm can run: GPT-2, Llama (Mistral,
SmolLM2), Qwen2, Qwen3, Mixtral.

Qwen2 is Llama with biases on q_proj, k_proj and v_proj only (GPTConfig.qkv_bias); Qwen3 drops them and
adds an RMSNorm over each head's queries and keys before RoPE (qk_norm), with a head size of its own
(head_dim: Qwen3-0.6B has 16 heads of 128 on a width of 1024).

Reading, every option that would change what the network computes is checked; one we do not
implement is a ZeroLLMError naming it (never a silently different model). Dropout is not carried
over: a loaded model is for inference, set dropout yourself before fine-tuning.

>>> family, cfg = hf_to_config({"model_type": "gpt2", "vocab_size": 50257, "n_positions": 1024,
...                             "n_embd": 768, "n_layer": 12, "n_head": 12})
>>> family, cfg.gelu, cfg.tie_embeddings
('gpt2', 'tanh', True)
"""

from zerollm.model.config import GPTConfig
from zerollm.io.errors import ZeroLLMError

ARCHITECTURES = {"GPT2LMHeadModel": "gpt2", "GPT2Model": "gpt2", "LlamaForCausalLM": "llama",
                 "LlamaModel": "llama", "MistralForCausalLM": "llama", "MistralModel": "llama",
                 "MixtralForCausalLM": "mixtral", "MixtralModel": "mixtral",
                 "Qwen2ForCausalLM": "qwen2", "Qwen2Model": "qwen2", "Qwen3ForCausalLM": "qwen3", "Qwen3Model": "qwen3"}
MODEL_TYPES = {"gpt2": "gpt2", "llama": "llama", "mistral": "llama", "mixtral": "mixtral", "qwen2": "qwen2",
               "qwen3": "qwen3"}
GPT2_ACTIVATIONS = {"gelu_new": "tanh", "gelu_pytorch_tanh": "tanh", "gelu_fast": "tanh", "gelu": "erf"}
# what each exported layout can express (anything else in GPTConfig is a size, or free)
# (tried in this order: a plain Llama-shaped config exports as Llama, not as Qwen)
_DENSE_ROPE = dict(norm="rmsnorm", pos="rope", mlp="swiglu", causal=True, n_expert=0)
LAYOUT_NEEDS = {"gpt2": dict(norm="layernorm", pos="learned", mlp="gelu", causal=True, n_expert=0, qkv_bias=False,
                             qk_norm=False, head_dim=None),
                "llama": dict(_DENSE_ROPE, qkv_bias=False, qk_norm=False),
                # Qwen2: biases on q, k and v only, never on o_proj or the MLP
                "qwen2": dict(_DENSE_ROPE, bias=False, qkv_bias=True, qk_norm=False),
                # Qwen3: QK-norm, no biases
                "qwen3": dict(_DENSE_ROPE, bias=False, qkv_bias=False, qk_norm=True),
                # Mixtral (Jiang et al. 2024): every block MoE, top-k renormalised, SwiGLU experts, no biases
                "mixtral": dict(norm="rmsnorm", pos="rope", mlp="swiglu", causal=True, bias=False, moe_every=1,
                                moe_norm_topk=True, n_shared_expert=0, qkv_bias=False, qk_norm=False)}
FAMILY_NAMES = {"gpt2": "GPT-2", "llama": "Llama", "qwen2": "Qwen2", "qwen3": "Qwen3", "mixtral": "Mixtral"}


# ----------------------------------------------------------------------------
# reading: config.json -> GPTConfig

def family_of(hf, where="config.json"):
    """'gpt2' or 'llama', from "architectures" (preferred) or "model_type"."""
    archs = hf.get("architectures") or []
    if not isinstance(archs, list):
        raise ZeroLLMError(f"{where}: \"architectures\" must be a list of class names, got {archs!r}")
    known = [ARCHITECTURES[a] for a in archs if isinstance(a, str) and a in ARCHITECTURES]
    if archs and not known:
        raise ZeroLLMError(f"{where}: architecture {', '.join(map(str, archs))} is not supported; "
                           f"zerollm loads {', '.join(ARCHITECTURES)}")
    model_type = hf.get("model_type")
    family = known[0] if known else MODEL_TYPES.get(model_type) if isinstance(model_type, str) else None
    if family is None:
        raise ZeroLLMError(f"{where}: model_type {hf.get('model_type')!r} is not supported; zerollm "
                           f"loads model types {', '.join(MODEL_TYPES)} (GPT-2, Llama, Qwen and Mixtral-style models)")
    return family


def _refuse(where, problems):
    if problems:
        raise ZeroLLMError(f"{where}: zerollm cannot run this model because of {'; '.join(problems)}; "
                           "only plain GPT-2, Llama, Qwen2, Qwen3 and Mixtral architectures are implemented")


def _gpt2_fields(hf, where):
    act = hf.get("activation_function", "gelu_new")
    # reorder_and_upcast_attn only computes the same formula in another float order: accepted
    problems = [f"{key}={hf[key]!r} (needs {need!r})"
                for key, need in (("scale_attn_weights", True), ("scale_attn_by_inverse_layer_idx", False),
                                  ("add_cross_attention", False)) if hf.get(key, need) != need]
    if act not in GPT2_ACTIVATIONS:
        problems.append(f"activation_function={act!r} (needs one of {', '.join(GPT2_ACTIVATIONS)})")
    _refuse(where, problems)
    return dict(vocab_size=hf["vocab_size"], block_size=hf.get("n_positions", hf.get("n_ctx", 1024)),
                n_layer=hf["n_layer"], n_head=hf["n_head"], n_embd=hf["n_embd"], n_inner=hf.get("n_inner"),
                norm_eps=hf.get("layer_norm_epsilon", 1e-5), gelu=GPT2_ACTIVATIONS[act],
                tie_embeddings=hf.get("tie_word_embeddings", True))


def _rope_theta(hf, where):
    """transformers 5 keeps RoPE settings in rope_parameters; transformers 4 in rope_theta + rope_scaling."""
    params = hf.get("rope_parameters") or {}
    scaling = hf.get("rope_scaling") or {}
    kind = params.get("rope_type") or scaling.get("rope_type") or scaling.get("type") or "default"
    if kind != "default":
        _refuse(where, [f"rope scaling {kind!r} (only plain RoPE is implemented)"])
    return float(params.get("rope_theta", hf.get("rope_theta", 10000.0)))


def _head_dim(hf):
    """head_dim, or None when it is hidden_size / num_attention_heads (zerollm's default head size)."""
    C, nh, head_dim = hf["hidden_size"], hf["num_attention_heads"], hf.get("head_dim")
    return None if head_dim is None or (C % nh == 0 and head_dim == C // nh) else head_dim


def _llama_fields(hf, where):
    C, nh = hf["hidden_size"], hf["num_attention_heads"]
    attn_bias, mlp_bias = hf.get("attention_bias", False), hf.get("mlp_bias", False)
    act, window = hf.get("hidden_act", "silu"), hf.get("sliding_window")
    checks = [
        (act not in ("silu", "swish"), f"hidden_act={act!r} (needs 'silu')"),
        (attn_bias != mlp_bias,
         f"attention_bias={attn_bias} with mlp_bias={mlp_bias} (zerollm has one bias switch)"),
        (window is not None and window < hf.get("max_position_embeddings", 2048), f"sliding_window={window}"),
    ]
    _refuse(where, [problem for bad, problem in checks if bad])
    return dict(vocab_size=hf["vocab_size"], block_size=hf.get("max_position_embeddings", 2048),
                n_layer=hf["num_hidden_layers"], n_head=nh, n_kv_head=hf.get("num_key_value_heads") or nh,
                n_embd=C, n_inner=hf["intermediate_size"], norm="rmsnorm",
                norm_eps=hf.get("rms_norm_eps", 1e-6), pos="rope", rope_theta=_rope_theta(hf, where),
                mlp="swiglu", bias=attn_bias, tie_embeddings=hf.get("tie_word_embeddings", False),
                head_dim=_head_dim(hf))


def _qwen_fields(hf, where, family):
    """Qwen2 / Qwen3 = Llama's fields with the attention options of the family. Their configs name a
    sliding_window even when it is off (use_sliding_window false): only a window in use is refused."""
    sliding = hf.get("use_sliding_window", False) or "sliding_attention" in (hf.get("layer_types") or [])
    act, attn_bias = hf.get("hidden_act", "silu"), hf.get("attention_bias", False)
    checks = [(bool(sliding), f"use_sliding_window={hf.get('use_sliding_window')} (sliding-window attention "
                              "is not implemented)"),
              (family == "qwen3" and bool(attn_bias),
               "attention_bias=true (a bias on o_proj as well; zerollm's Qwen3 has none)")]
    _refuse(where, [problem for bad, problem in checks if bad])
    fields = _llama_fields({**hf, "attention_bias": False, "mlp_bias": False, "sliding_window": None,
                            "hidden_act": act}, where)
    return dict(fields, qkv_bias=family == "qwen2", qk_norm=family == "qwen3",
                tie_embeddings=hf.get("tie_word_embeddings", False))


def _mixtral_fields(hf, where):
    """Mixtral = Llama's attention and norms + a mixture of experts in every block.

    Its load-balancing loss counts each of the k choices as a token (shares that sum to k), ours
    counts pairs (shares that sum to 1): the same loss is ours times k, so the coefficient is scaled.
    Mixtral has no z-loss, no capacity and no shared expert.
    """
    jitter = hf.get("router_jitter_noise") or 0.0
    _refuse(where, [f"router_jitter_noise={jitter} (zerollm's router has no input jitter)"] if jitter else [])
    k = hf.get("num_experts_per_tok", 2)
    fields = _llama_fields({**hf, "attention_bias": False, "mlp_bias": False}, where)
    return dict(fields, n_expert=hf.get("num_local_experts", 8), n_expert_active=k, moe_every=1,
                moe_norm_topk=True, capacity_factor=0.0, n_shared_expert=0, z_loss_coef=0.0,
                aux_loss_coef=float(hf.get("router_aux_loss_coef", 0.001) or 0.0) * k)


def hf_to_config(hf, where="config.json", dtype="float32"):
    """A transformers config dict -> (family, GPTConfig)."""
    if not isinstance(hf, dict):
        raise ZeroLLMError(f"{where} must hold a JSON object")
    family = family_of(hf, where)
    read = {"gpt2": _gpt2_fields, "llama": _llama_fields, "mixtral": _mixtral_fields,
            "qwen2": lambda h, w: _qwen_fields(h, w, "qwen2"), "qwen3": lambda h, w: _qwen_fields(h, w, "qwen3")}
    try:
        fields = read[family](hf, where)
    except ZeroLLMError:                         # an architecture zerollm does not implement: said as is
        raise
    except KeyError as err:
        raise ZeroLLMError(f"{where} lacks {err}, which a {family} config needs; "
                           "the file is incomplete") from None
    except (TypeError, ValueError, ZeroDivisionError, AttributeError) as err:   # "12" heads, 0 heads, theta "x"
        raise ZeroLLMError(f"{where} has a value of the wrong type or size ({err}); the file is damaged") from None
    try:
        return family, GPTConfig(**fields, dropout=0.0, dtype=dtype)
    except ZeroLLMError as err:                  # a size of the wrong type or out of range: name the file
        raise ZeroLLMError(f"{where}: {err}") from None
    except TypeError as err:
        raise ZeroLLMError(f"{where} has a value of the wrong type ({err}); the file is damaged") from None


# ----------------------------------------------------------------------------
# writing: GPTConfig -> config.json

def export_family(cfg):
    """'gpt2', 'llama', 'qwen2', 'qwen3' or 'mixtral': the transformers layout that computes exactly this config."""
    wrong = {family: [f"{k}={getattr(cfg, k)!r} (needs {v!r})"
                      for k, v in needs.items() if getattr(cfg, k) != v]
             for family, needs in LAYOUT_NEEDS.items()}
    if cfg.n_expert == 0:
        wrong["mixtral"].insert(0, "n_expert=0 (needs experts)")
    for family, problems in wrong.items():
        if not problems:
            return family
    said = "; ".join(f"as {FAMILY_NAMES[f]} it has {', '.join(p)}" for f, p in wrong.items())
    raise ZeroLLMError(f"transformers has no model that computes this config: {said}. "
                       "Train with one of those layouts to export it")


def config_to_hf(cfg, family, special=None):
    """The config.json dict for ``cfg`` in ``family``'s layout. ``special``: {"eos": id, ...} or None.

    GPT-2 has no grouped-query attention: the exporter repeats the shared key/value heads, so the
    file always has n_kv_head == n_head.
    """
    special = special or {}
    common = dict(vocab_size=cfg.vocab_size, tie_word_embeddings=cfg.tie_embeddings, dtype="float32",
                  bos_token_id=special.get("bos"), eos_token_id=special.get("eos"), pad_token_id=None,
                  use_cache=True)
    if family == "gpt2":
        return dict(architectures=["GPT2LMHeadModel"], model_type="gpt2", n_positions=cfg.block_size,
                    n_embd=cfg.n_embd, n_layer=cfg.n_layer, n_head=cfg.n_head, n_inner=cfg.n_inner,
                    activation_function="gelu_new" if cfg.gelu == "tanh" else "gelu",
                    layer_norm_epsilon=cfg.norm_eps, resid_pdrop=cfg.dropout, embd_pdrop=cfg.dropout,
                    attn_pdrop=cfg.dropout, scale_attn_weights=True, **common)
    rope_llama = dict(hidden_size=cfg.n_embd, intermediate_size=cfg.n_inner, num_hidden_layers=cfg.n_layer,
                      num_attention_heads=cfg.n_head, num_key_value_heads=cfg.n_kv_head, head_dim=cfg.head_size,
                      hidden_act="silu", max_position_embeddings=cfg.block_size, rms_norm_eps=cfg.norm_eps,
                      rope_parameters={"rope_type": "default", "rope_theta": cfg.rope_theta},   # transformers 5
                      rope_theta=cfg.rope_theta, rope_scaling=None,                             # transformers 4
                      attention_dropout=0.0, **common)
    if family == "mixtral":
        k = cfg.n_expert_active
        return dict(architectures=["MixtralForCausalLM"], model_type="mixtral", num_local_experts=cfg.n_expert,
                    num_experts_per_tok=k, router_aux_loss_coef=cfg.aux_loss_coef / k, output_router_logits=False,
                    router_jitter_noise=0.0, sliding_window=None, **rope_llama)
    if family in ("qwen2", "qwen3"):
        arch = "Qwen2ForCausalLM" if family == "qwen2" else "Qwen3ForCausalLM"
        return dict(architectures=[arch], model_type=family, attention_bias=False, use_sliding_window=False,
                    sliding_window=None, max_window_layers=cfg.n_layer, **rope_llama)
    return dict(architectures=["LlamaForCausalLM"], model_type="llama", attention_bias=cfg.bias, mlp_bias=cfg.bias,
                **rope_llama)
