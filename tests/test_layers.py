"""Every layer's forward and hand-written backward vs PyTorch autograd (float64 and float32) and
vs finite differences (float64), through the one helper in opcheck.py."""

import types

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from transformers.models.llama.modeling_llama import apply_rotary_pos_emb

from opcheck import check_op
from zerollm.teach.gradcheck import CASES, run_all
from zerollm.teach.torch_ref import moe_ffn

# ----------------------------------------------------------------------------
# the same ops written with torch (each takes the case and the inputs as float64 tensors)


def t_rope_tables(T, hs, theta):
    inv_freq = 1.0 / theta ** (torch.arange(0, hs, 2, dtype=torch.float64) / hs)
    angle = torch.outer(torch.arange(T, dtype=torch.float64), inv_freq)
    emb = torch.cat([angle, angle], dim=-1)
    return emb.cos(), emb.sin()


def t_linear(case, x, w, b=None):
    return x @ w + (0 if b is None else b)


def t_sdpa(q, k, v, causal, mask):
    # torch's kernel on (..., T, hs) with kv heads expanded; its bool mask means "may attend"
    k, v = k.expand_as(q) if k.shape[-2] == q.shape[-2] else k, v.expand(*q.shape[:-2], *v.shape[-2:])
    allowed = None if mask is None else ~torch.from_numpy(np.asarray(mask))
    return F.scaled_dot_product_attention(q, k, v, attn_mask=allowed, is_causal=causal and mask is None)


def t_flash(case, q, k, v):
    # the hidden mask written out (torch's is_causal aligns the diagonal top-left when Tk > T)
    T, Tk = q.shape[-2], k.shape[-2]
    hidden = np.triu(np.ones((T, Tk), dtype=bool), k=Tk - T + 1 if case.kwargs["causal"] else Tk)
    if case.kwargs["mask"] is not None:
        hidden = hidden | case.kwargs["mask"]
    k, v = (a.expand(*q.shape[:-2], *a.shape[-2:]) for a in (k, v))
    return F.scaled_dot_product_attention(q, k, v, attn_mask=torch.from_numpy(~hidden))


def t_mha(x, w_attn, b_attn, w_proj, b_proj, n_head, n_kv_head, rope=None, causal=True, qk_norm=None, eps=1e-6):
    """qk_norm: (q gain, k gain) of QK-norm, F.rms_norm over each head before RoPE (Qwen3's order)."""
    B, T, C = x.shape
    hs = w_proj.shape[0] // n_head
    q, k, v = (x @ w_attn + (0 if b_attn is None else b_attn)).split(
        [n_head * hs, n_kv_head * hs, n_kv_head * hs], dim=-1)
    q = q.view(B, T, n_head, hs).transpose(1, 2)
    k = k.view(B, T, n_kv_head, hs).transpose(1, 2)
    v = v.view(B, T, n_kv_head, hs).transpose(1, 2)
    if qk_norm is not None:
        q, k = F.rms_norm(q, (hs,), qk_norm[0], eps=eps), F.rms_norm(k, (hs,), qk_norm[1], eps=eps)
    if rope is not None:
        cos, sin = rope
        q, k = apply_rotary_pos_emb(q, k, cos[None], sin[None])     # Hugging Face's Llama code
    rep = n_head // n_kv_head
    k, v = k.repeat_interleave(rep, dim=1), v.repeat_interleave(rep, dim=1)
    y = F.scaled_dot_product_attention(q, k, v, is_causal=causal)
    y = y.transpose(1, 2).reshape(B, T, n_head * hs)
    return y @ w_proj + (0 if b_proj is None else b_proj)


def t_norm(cfg, x, w, b=None):
    if cfg.norm == "rmsnorm":
        return F.rms_norm(x, (x.shape[-1],), w, eps=cfg.norm_eps)
    return F.layer_norm(x, (x.shape[-1],), w, b, eps=cfg.norm_eps)


def t_mlp(cfg, x, w_fc, b_fc, w_proj, b_proj):
    h = t_linear(None, x, w_fc, b_fc)
    if cfg.mlp == "swiglu":
        gate, up = h.chunk(2, dim=-1)
        h = F.silu(gate) * up
    else:
        h = F.gelu(h, approximate="tanh" if cfg.gelu == "tanh" else "none")
    return t_linear(None, h, w_proj, b_proj)


def t_block(case, x, *ws):
    cfg = case.info["config"]
    p = dict(zip(case.info["names"], ws))
    g = lambda name: p.get("h.0." + name)
    rope = t_rope_tables(x.shape[1], cfg.head_size, cfg.rope_theta) if cfg.pos == "rope" else None
    h = t_norm(cfg, x, g("ln_1.weight"), g("ln_1.bias"))
    qk_norm = (g("attn.q_norm.weight"), g("attn.k_norm.weight")) if cfg.qk_norm else None
    x = x + t_mha(h, g("attn.c_attn.weight"), g("attn.c_attn.bias"), g("attn.c_proj.weight"),
                  g("attn.c_proj.bias"), cfg.n_head, cfg.n_kv_head, rope, cfg.causal, qk_norm, cfg.norm_eps)
    h = t_norm(cfg, x, g("ln_2.weight"), g("ln_2.bias"))
    return x + t_mlp(cfg, h, g("mlp.c_fc.weight"), g("mlp.c_fc.bias"), g("mlp.c_proj.weight"), g("mlp.c_proj.bias"))


def t_mha_case(case, x, w_attn, b_attn, w_proj, b_proj, *qk_norm):
    kw = case.kwargs
    rope = None
    if "rope" in kw:
        rope = t_rope_tables(x.shape[1], w_proj.shape[0] // kw["n_head"], 10000.0)
    return t_mha(x, w_attn, b_attn, w_proj, b_proj, kw["n_head"], kw["n_kv_head"], rope, kw["causal"],
                 qk_norm or None)


def t_rope(case, x, cos, sin):
    tcos, tsin = t_rope_tables(x.shape[-2], x.shape[-1], 100.0)    # independent of our tables
    return apply_rotary_pos_emb(x, x, tcos[None], tsin[None])[0]


def t_dropout(case, x):
    # torch's random stream differs from NumPy's, so reuse our mask: the check is of the backward
    _, cache = case.forward(*case.inputs)
    return x * torch.from_numpy(cache.mask.astype(np.float64))


def t_cross_entropy(case, logits, targets):
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1), ignore_index=-100)


def t_distill(case, student, teacher):
    """The divergences of zerollm.nn.distill written plainly (tests/test_distill.py also checks TRL's)."""
    info = case.info
    logq, logp = F.log_softmax(student / info["tau"], -1), F.log_softmax(teacher / info["tau"], -1)
    q, p = logq.exp(), logp.exp()
    if info["divergence"] == "forward_kl":
        D = (p * (logp - logq)).sum(-1)
    elif info["divergence"] == "reverse_kl":
        D = (q * (logq - logp)).sum(-1)
    else:
        beta = info["beta"]
        logm = (beta * p + (1 - beta) * q).log()
        D = beta * (p * (logp - logm)).sum(-1) + (1 - beta) * (q * (logq - logm)).sum(-1)
    mask = torch.from_numpy(info["mask"])
    return D[mask].mean()


def t_token_logprobs(case, logits):
    targets = torch.from_numpy(case.info["targets"])
    mask = torch.from_numpy(case.info["mask"]).to(torch.float64)
    logq = torch.log_softmax(logits, dim=-1)
    logp = logq.gather(-1, targets[..., None])[..., 0] * mask
    if case.name.endswith("entropy"):
        return torch.stack([logp, -(logq.exp() * logq).sum(-1) * mask])
    return logp


def t_scalar_head(case, h, w, b):
    index = case.info["index"]
    if index is None:
        return (h @ w)[..., 0] + b
    return (h[torch.arange(h.shape[0]), torch.from_numpy(index)] @ w)[:, 0] + b


def t_layernorm(case, x, w, b=None):
    return F.layer_norm(x, (x.shape[-1],), w, b, eps=1e-5)


def t_moe(case, x, w_router, w_fc, b_fc, w_proj, b_proj, *shared):
    """zerollm.teach.torch_ref's dense dispatch/combine MoE; output, aux and z stacked like the case's."""
    kw = case.info
    cfg = types.SimpleNamespace(n_expert_active=kw["k"], moe_norm_topk=kw["norm_topk"], mlp=kw["mlp"],
                                capacity_factor=kw["capacity_factor"], gelu=kw["gelu"])
    y, aux, z, dropped = moe_ffn(x, w_router, (w_fc, b_fc, w_proj, b_proj), tuple(shared) or None, cfg,
                                 training=True)
    assert (dropped > 0) == (kw["capacity_factor"] > 0)      # the capacity cases really drop pairs
    return torch.cat([y.reshape(-1), aux[None], z[None]])


def t_lora(case, x, w, b, *ab):
    """y = x W + b + (dropout(x) A B) s on each adapter's columns, the dropout masks drawn as zerollm draws them."""
    info, y = case.info, x @ w + b
    rng, parts = np.random.default_rng(7), []
    for (lo, hi), A, B in zip(info["cols"], ab[0::2], ab[1::2]):
        u = x
        if info["dropout"]:
            keep = rng.random(tuple(x.reshape(-1, x.shape[-1]).shape)) >= info["dropout"]
            u = x * torch.from_numpy(keep.reshape(x.shape) / (1 - info["dropout"]))
        parts.append((lo, hi, (u @ A @ B) * info["scale"]))
    delta = torch.zeros_like(y)
    for lo, hi, d in parts:
        delta = delta + F.pad(d, (lo, y.shape[-1] - hi))
    return y + delta


TORCH = {
    "lora": t_lora,
    "lora_columns_dropout": t_lora,
    "linear": t_linear,
    "linear_nobias": t_linear,
    "embedding": lambda case, idx, w: w[idx],
    "rope": t_rope,
    "layernorm": t_layernorm,
    "layernorm_nobias": t_layernorm,
    "rmsnorm": lambda case, x, w: F.rms_norm(x, (x.shape[-1],), w, eps=1e-5),
    "gelu_tanh": lambda case, x: F.gelu(x, approximate="tanh"),
    "gelu_erf": lambda case, x: F.gelu(x),
    "silu": lambda case, x: F.silu(x),
    "softmax": lambda case, x: torch.softmax(x, dim=-1),
    "gelu_mlp": lambda case, *a: t_mlp(type("cfg", (), {"mlp": "gelu", "gelu": "tanh"}), *a),
    "swiglu": lambda case, *a: t_mlp(type("cfg", (), {"mlp": "swiglu"}), *a),
    "sdpa_causal": lambda case, q, k, v: t_sdpa(q, k, v, True, None),
    "sdpa_bidirectional": lambda case, q, k, v: t_sdpa(q, k, v, False, None),
    "sdpa_padding": lambda case, q, k, v: t_sdpa(q, k, v, False, case.kwargs["mask"]),
    "flash_causal": t_flash,
    "flash_padding": t_flash,
    "flash_gqa_kvoffset": t_flash,
    "mha": t_mha_case,
    "gqa": t_mha_case,
    "mqa": t_mha_case,
    "mha_qk_norm": t_mha_case,
    "dropout": t_dropout,
    "cross_entropy": t_cross_entropy,
    "distill_forward_kl": t_distill,
    "distill_reverse_kl": t_distill,
    "distill_jsd": t_distill,
    "token_logprobs": t_token_logprobs,
    "token_logprobs_entropy": t_token_logprobs,
    "reward_head": t_scalar_head,
    "value_head": t_scalar_head,
    "block_gpt2": t_block,
    "block_llama": t_block,
    "block_qwen2": t_block,
    "block_qwen3": t_block,
    "moe_top1": t_moe,
    "moe_top2": t_moe,
    "moe_top2_norm_capacity": t_moe,
    "moe_top3_capacity_shared": t_moe,
}


def test_every_registered_layer_has_a_torch_reference():
    assert set(TORCH) == set(CASES)


@pytest.mark.parametrize("dtype", [np.float64, np.float32], ids=["float64", "float32"])
@pytest.mark.parametrize("key", sorted(CASES))
def test_layer_matches_torch(key, dtype):
    check_op(key, TORCH[key], dtype)


def test_gradcheck_catches_a_wrong_backward():
    """The finite-difference checker must be able to fail: break one backward on purpose."""
    from zerollm.teach.gradcheck import check_case
    case = CASES["layernorm"](np.random.default_rng(0), np.float64)
    right = case.backward
    case.backward = lambda d, c: tuple(g * 1.01 if i == 0 else g for i, g in enumerate(right(d, c)))
    assert not check_case(case).ok


def test_all_cases_pass_finite_differences():
    results = run_all()
    assert all(r.ok for r in results), [(r.name, r.max_rel) for r in results if not r.ok]
    assert max(r.max_rel for r in results) < 1e-6
