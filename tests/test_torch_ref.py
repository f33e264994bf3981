"""zerollm/teach/torch_ref.py is the yardstick for zerollm.model.gpt, so it is itself checked against Hugging Face.

Where GPT2LMHeadModel or LlamaForCausalLM can express a GPTConfig, logits and gradients must agree to
1e-10 in float64. Where neither can (sinusoidal positions, causal=False, ...), a property is checked.
"""

from dataclasses import replace

import numpy as np
import pytest
import torch
from transformers.models.llama.modeling_llama import LlamaRMSNorm

import hf_twins as hf
from zerollm.teach import torch_ref as ref
from zerollm.model.config import GPTConfig
from zerollm.io.errors import ZeroLLMError

TOL = 1e-10
HF_LOSS_TOL = 1e-6   # HF's ForCausalLMLoss casts logits to float32 before the cross-entropy

GPT2_SMALL = GPTConfig(vocab_size=37, block_size=11, n_layer=2, n_head=3, n_embd=12)
GPT2_ODD = GPTConfig(vocab_size=53, block_size=9, n_layer=3, n_head=5, n_embd=20, n_inner=28)
LLAMA = GPTConfig(vocab_size=37, block_size=11, n_layer=2, n_head=4, n_kv_head=2, n_embd=16,
                  norm="rmsnorm", pos="rope", mlp="swiglu", bias=False, tie_embeddings=False)

GPT2_CONFIGS = {
    "small": GPT2_SMALL,
    "odd": GPT2_ODD,
    "erf-untied": replace(GPT2_SMALL, gelu="erf", tie_embeddings=False, norm_eps=1e-3),
    "no-bias": replace(GPT2_ODD, bias=False),
}
MIXTRAL = replace(LLAMA, n_expert=4, n_expert_active=2, moe_norm_topk=True)
MIXTRAL_CONFIGS = {
    "e4-top2-gqa2-untied": MIXTRAL,
    "e3-top1-mqa-tied": replace(MIXTRAL, n_expert=3, n_expert_active=1, n_kv_head=1, tie_embeddings=True),
    "e5-top3-odd-heads": replace(MIXTRAL, n_embd=24, n_head=6, n_kv_head=3, n_layer=1, vocab_size=41, n_inner=20,
                                 n_expert=5, n_expert_active=3, rope_theta=500.0),
}
LLAMA_CONFIGS = {
    "gqa2-untied": LLAMA,
    "mqa-tied": replace(LLAMA, n_kv_head=1, tie_embeddings=True),
    "mha-theta500-eps1e-3": replace(LLAMA, n_kv_head=4, rope_theta=500.0, norm_eps=1e-3),
    "gqa2-theta5e5-eps1e-6-bias": replace(LLAMA, rope_theta=5e5, norm_eps=1e-6, bias=True),
    "odd-heads": replace(LLAMA, n_embd=24, n_head=6, n_kv_head=3, n_layer=1, vocab_size=41, n_inner=20),
}


def batch(config, seed=0, B=2, T=7):
    """Token ids (B, T) and HF-style labels (a copy of the ids with a few -100) as LongTensors."""
    rng = np.random.default_rng(seed)
    idx = torch.tensor(rng.integers(0, config.vocab_size, (B, T)))
    labels = idx.clone()
    labels[0, 3] = labels[1, 5] = ref.IGNORE_INDEX
    return idx, labels


def shift(labels):
    """HF's labels predict the NEXT token; our targets are aligned: targets[t] = labels[t + 1]."""
    pad = torch.full_like(labels[:, :1], ref.IGNORE_INDEX)
    return torch.cat([labels[:, 1:], pad], dim=1)


def cross_entropy_by_formula(logits, targets):
    """mean over kept positions of logsumexp(logits) - logits[target], written out (no F.cross_entropy)."""
    keep = targets != ref.IGNORE_INDEX
    rows, picked = logits[keep], targets[keep]               # (N, V), (N,)
    return (torch.logsumexp(rows, dim=-1) - rows[torch.arange(len(picked)), picked]).mean()


def both(config, to_hf, seed=0):
    state = ref.random_state(config, seed=seed)
    model = ref.TorchGPT(config)
    model.load_numpy_state(state)
    return model, to_hf(state, config)


def check_forward(ours, theirs, config):
    idx, labels = batch(config)
    logits, loss = ours(idx, shift(labels))
    out = theirs(input_ids=idx, labels=labels)
    assert logits.shape == out.logits.shape == (2, 7, config.vocab_size)
    assert torch.allclose(logits, out.logits, rtol=0, atol=TOL), (logits - out.logits).abs().max()
    assert abs(loss.item() - cross_entropy_by_formula(out.logits, shift(labels)).item()) < TOL
    assert abs(loss.item() - out.loss.item()) < HF_LOSS_TOL


def assert_grads_equal(ours, theirs):
    assert set(ours) == set(theirs)
    for name in ours:
        assert ours[name].shape == theirs[name].shape, name
        assert np.abs(ours[name]).max() > 0, f"{name}: all-zero gradient tests nothing"
        np.testing.assert_allclose(ours[name], theirs[name], rtol=0, atol=TOL, err_msg=name)


# ----------------------------------------------------------------------------
# parity with Hugging Face

@pytest.mark.parametrize("name", GPT2_CONFIGS)
def test_matches_hf_gpt2(name):
    config = GPT2_CONFIGS[name]
    check_forward(*both(config, hf.to_hf_gpt2), config)


@pytest.mark.parametrize("name", LLAMA_CONFIGS)
def test_matches_hf_llama(name):
    config = LLAMA_CONFIGS[name]
    check_forward(*both(config, hf.to_hf_llama), config)


@pytest.mark.parametrize("name", MIXTRAL_CONFIGS)
def test_matches_hf_mixtral(name):
    """The twin's mixture of experts (dense dispatch/combine) against MixtralForCausalLM's own code."""
    config = MIXTRAL_CONFIGS[name]
    check_forward(*both(config, hf.to_hf_mixtral), config)


@pytest.mark.parametrize("name", MIXTRAL_CONFIGS)
def test_grads_match_hf_mixtral(name):
    config = replace(MIXTRAL_CONFIGS[name], aux_loss_coef=0.0, z_loss_coef=0.0)   # the cross-entropy alone
    ours, theirs = both(config, hf.to_hf_mixtral)
    idx, labels = batch(config)
    ours(idx, shift(labels))[1].backward()
    cross_entropy_by_formula(theirs(input_ids=idx).logits, shift(labels)).backward()
    assert_grads_equal(ours.grads_numpy(), hf.hf_grads_numpy(theirs, config))


def test_load_balancing_loss_is_mixtrals_over_k():
    """transformers' load_balancing_loss_func counts each of the k choices as a token (shares summing
    to k); ours counts pairs (shares summing to 1). With one MoE block the two differ by exactly k,
    which is why zerollm.interop.hf maps router_aux_loss_coef * k to aux_loss_coef."""
    config = replace(MIXTRAL_CONFIGS["e5-top3-odd-heads"], z_loss_coef=0.0)
    state = ref.random_state(config, seed=2)
    ours = ref.TorchGPT(config)
    ours.load_numpy_state(state)
    theirs = hf.to_hf_mixtral(state, config, output_router_logits=True)
    idx, _ = batch(config)
    ours(idx)
    aux = ours.h[0].mlp.last["aux"]
    assert 1.0 < aux.item() < config.n_expert                       # neither balanced nor collapsed: a real test
    assert abs(theirs(input_ids=idx).aux_loss.item() - config.n_expert_active * aux.item()) < TOL


@pytest.mark.parametrize("config, to_hf", [(GPT2_SMALL, hf.to_hf_gpt2),
                                           (GPT2_CONFIGS["erf-untied"], hf.to_hf_gpt2),
                                           (LLAMA_CONFIGS["gqa2-theta5e5-eps1e-6-bias"], hf.to_hf_llama),
                                           (LLAMA_CONFIGS["mqa-tied"], hf.to_hf_llama)])
def test_grads_match_hf(config, to_hf):
    ours, theirs = both(config, to_hf)
    idx, labels = batch(config)
    ours(idx, shift(labels))[1].backward()
    # HF's own loss runs in float32, so its float64 logits go through the written-out cross-entropy
    cross_entropy_by_formula(theirs(input_ids=idx).logits, shift(labels)).backward()
    assert_grads_equal(ours.grads_numpy(), hf.hf_grads_numpy(theirs, config))


def test_llama_float32_casts_are_what_the_float64_context_removes():
    """Without _llama_in_float64, HF Llama's float32 RMSNorm/softmax/RoPE miss 1e-10 but pass 1e-6."""
    from transformers import LlamaConfig, LlamaForCausalLM
    state = ref.random_state(LLAMA)
    plain = LlamaForCausalLM(LlamaConfig(**hf.llama_kwargs(LLAMA), attn_implementation="eager"))
    arrays = hf.to_hf_arrays(state, hf.llama_pieces(LLAMA), out_in=True)
    plain = hf._load(plain.to(torch.float64).eval(), arrays)
    ours, patched = both(LLAMA, hf.to_hf_llama)
    idx, _ = batch(LLAMA)
    gap = (plain(input_ids=idx).logits - ours(idx)[0]).abs().max().item()
    assert TOL < gap < 1e-6
    assert (patched(input_ids=idx).logits - ours(idx)[0]).abs().max().item() < TOL


def test_llama_heads_need_no_permutation():
    """Our q columns j*hs..(j+1)*hs go to HF q_proj rows as they are; Meta's pair order would not fit."""
    state = ref.random_state(LLAMA)
    ours, theirs = both(LLAMA, hf.to_hf_llama)
    hs, nh = LLAMA.head_size, LLAMA.n_head
    # within each head, reorder dims (0, hs/2, 1, hs/2+1, ...) -> rotate-half pairs become adjacent pairs
    order = np.stack([np.arange(hs // 2), np.arange(hs // 2, hs)], axis=1).reshape(-1)
    cols = np.concatenate([j * hs + order for j in range(nh)])
    w = state["h.0.attn.c_attn.weight"].copy()
    w[:, :nh * hs] = w[:, cols]
    theirs_permuted = hf.to_hf_llama({**state, "h.0.attn.c_attn.weight": w}, LLAMA)
    idx, _ = batch(LLAMA)
    assert (ours(idx)[0] - theirs(input_ids=idx).logits).abs().max() < TOL
    assert (ours(idx)[0] - theirs_permuted(input_ids=idx).logits).abs().max() > 1e-6


@pytest.mark.parametrize("config, to_hf", [(GPT2_CONFIGS["no-bias"], hf.to_hf_gpt2),
                                           (LLAMA_CONFIGS["gqa2-theta5e5-eps1e-6-bias"], hf.to_hf_llama),
                                           (MIXTRAL_CONFIGS["e5-top3-odd-heads"], hf.to_hf_mixtral)])
def test_hf_weights_round_trip(config, to_hf):
    state = ref.random_state(config, seed=3)
    back = hf.hf_state_numpy(to_hf(state, config), config)
    assert set(back) == set(state)
    for name in state:
        np.testing.assert_array_equal(back[name], state[name], err_msg=name)


@pytest.mark.parametrize("config, to_hf, field", [
    (LLAMA, hf.to_hf_gpt2, "norm='rmsnorm'"),
    (GPT2_SMALL, hf.to_hf_llama, "pos='learned'"),
    (replace(LLAMA, causal=False), hf.to_hf_llama, "causal=False"),
    (replace(MIXTRAL, moe_norm_topk=False), hf.to_hf_mixtral, "moe_norm_topk=False"),
    (replace(MIXTRAL, n_shared_expert=1), hf.to_hf_mixtral, "n_shared_expert=1"),
])
def test_hf_refuses_configs_it_cannot_express(config, to_hf, field):
    with pytest.raises(ZeroLLMError, match=field):
        to_hf(ref.random_state(config), config)


# ----------------------------------------------------------------------------
# what HF cannot express: properties and layer-level checks

def test_sinusoidal_table_by_hand():
    pe = ref.sinusoidal_table(3, 5).numpy()                  # odd C: the last column is a sin
    np.testing.assert_array_equal(pe[0], [0, 1, 0, 1, 0])
    for p in (1, 2):
        for i in (0, 1, 2):
            angle = p / 10000 ** (2 * i / 5)
            assert pe[p, 2 * i] == pytest.approx(np.sin(angle), abs=1e-15)
            if 2 * i + 1 < 5:
                assert pe[p, 2 * i + 1] == pytest.approx(np.cos(angle), abs=1e-15)


@pytest.mark.parametrize("base", [GPT2_SMALL, replace(GPT2_ODD, gelu="erf")])
def test_sinusoidal_equals_gpt2_with_the_table_as_wpe(base):
    config = replace(base, pos="sinusoidal")
    state = ref.random_state(config)
    ours = ref.TorchGPT(config)
    ours.load_numpy_state(state)
    table = ref.sinusoidal_table(base.block_size, base.n_embd).numpy()
    theirs = hf.to_hf_gpt2({**state, "wpe.weight": table}, base)
    idx, _ = batch(config)
    assert (ours(idx)[0] - theirs(input_ids=idx).logits).abs().max() < TOL


def test_causal_false_sees_the_future():
    """One layer: the last position sees everything either way, so only earlier positions change."""
    config = replace(GPT2_SMALL, n_layer=1)                 # deeper, the last query reads changed keys
    state = ref.random_state(config)
    causal, bidir = ref.TorchGPT(config), ref.TorchGPT(replace(config, causal=False))
    causal.load_numpy_state(state)
    bidir.load_numpy_state(state)
    idx, _ = batch(config)
    changed = idx.clone()
    changed[:, -1] = (changed[:, -1] + 1) % config.vocab_size
    a, b = causal(idx)[0], bidir(idx)[0]
    assert (a[:, -1] - b[:, -1]).abs().max() < TOL
    assert (a[:, 0] - b[:, 0]).abs().max() > 1e-4
    assert (causal(changed)[0][:, :-1] - a[:, :-1]).abs().max() == 0           # the past ignores the future
    assert (bidir(changed)[0][:, 0] - b[:, 0]).abs().max() > 1e-6


def test_rmsnorm_layer_equals_llama_rmsnorm():
    config = replace(GPT2_SMALL, norm="rmsnorm", norm_eps=1e-2)   # rmsnorm + GELU: no HF model has both
    ours = ref.Norm(config, torch.float64)
    theirs = LlamaRMSNorm(config.n_embd, eps=config.norm_eps).to(torch.float64)
    weight = torch.tensor(ref.random_state(config)["h.0.ln_1.weight"])
    with torch.no_grad():
        ours.weight.copy_(weight)
        theirs.weight.copy_(weight)
    x = torch.tensor(np.random.default_rng(0).standard_normal((2, 3, config.n_embd)))
    with hf._llama_in_float64():
        expected = theirs(x)
    assert (ours(x) - expected).abs().max() < TOL
    assert [n for n, _ in ref.TorchGPT(config).named_parameters()].count("h.0.ln_1.bias") == 0


def test_rope_scores_depend_only_on_relative_position():
    """Su et al. 2021: <R_m q, R_n k> is a function of m - n, whatever the absolute positions."""
    rng = np.random.default_rng(0)
    q, k = (torch.tensor(rng.standard_normal(8)) for _ in range(2))
    cos, sin = ref.rope_cos_sin(10, 8, theta=100.0)
    def score(m, n):
        return (ref.apply_rope(q, cos[m], sin[m]) @ ref.apply_rope(k, cos[n], sin[n])).item()
    assert score(5, 2) == pytest.approx(score(9, 6), abs=1e-12)
    assert score(0, 0) == pytest.approx((q @ k).item(), abs=1e-12)
    assert abs(score(5, 2) - score(5, 3)) > 1e-3


def test_rope_with_layernorm_and_gelu_is_position_aware():
    """RoPE + layernorm + GELU: no wpe, so telling orders apart must come from RoPE alone."""
    config = replace(GPT2_SMALL, pos="rope")
    model = ref.TorchGPT(config)
    assert "wpe.weight" not in dict(model.named_parameters())
    idx = torch.tensor([[1, 2, 3, 4]])
    last_forward = model(idx)[0][0, -1]
    last_swapped = model(torch.tensor([[2, 1, 3, 4]]))[0][0, -1]
    assert (last_forward - last_swapped).abs().max() > 1e-6


# ----------------------------------------------------------------------------
# the helper's own contract

@pytest.mark.parametrize("config", [GPT2_SMALL, LLAMA,
                                    replace(LLAMA, pos="sinusoidal", bias=True, norm="layernorm"),
                                    replace(GPT2_SMALL, n_layer=4, n_expert=3, moe_every=2, n_shared_expert=2)])
def test_named_parameters_follow_param_shapes(config):
    model = ref.TorchGPT(config)
    got = {name: tuple(p.shape) for name, p in model.named_parameters()}
    assert list(got.items()) == list(ref.param_shapes(config).items())
    state = ref.random_state(config, seed=5)
    model.load_numpy_state(state)
    assert all(np.array_equal(model.state_numpy()[n], state[n]) for n in state)


def test_load_numpy_state_names_the_problem():
    model = ref.TorchGPT(GPT2_SMALL)
    state = ref.random_state(GPT2_SMALL)
    with pytest.raises(ZeroLLMError, match=r"missing \['wpe.weight'\]"):
        model.load_numpy_state({k: v for k, v in state.items() if k != "wpe.weight"})
    with pytest.raises(ZeroLLMError, match=r"unexpected \['lm_head.weight'\]"):
        model.load_numpy_state({**state, "lm_head.weight": state["wte.weight"]})
    with pytest.raises(ZeroLLMError, match="ln_f.weight has shape"):
        model.load_numpy_state({**state, "ln_f.weight": np.ones(3)})


def test_guards():
    model = ref.TorchGPT(GPT2_SMALL)
    with pytest.raises(ZeroLLMError, match="no gradient"):
        model.grads_numpy()
    with pytest.raises(ZeroLLMError, match="block_size"):
        model(torch.zeros(1, GPT2_SMALL.block_size + 1, dtype=torch.long))


def test_dropout_only_in_training():
    config = replace(GPT2_SMALL, dropout=0.3)
    state = ref.random_state(config)
    model, plain = ref.TorchGPT(config), ref.TorchGPT(GPT2_SMALL)
    model.load_numpy_state(state)
    plain.load_numpy_state(state)
    idx, _ = batch(config)
    assert (model.eval()(idx)[0] - plain(idx)[0]).abs().max() == 0
    torch.manual_seed(0)
    assert (model.train()(idx)[0] - plain(idx)[0]).abs().max() > 1e-4


def test_float32_model_is_close_to_float64():
    state = ref.random_state(LLAMA)
    m64, m32 = ref.TorchGPT(LLAMA), ref.TorchGPT(LLAMA, dtype=torch.float32)
    m64.load_numpy_state(state)
    m32.load_numpy_state(state)
    idx, _ = batch(LLAMA)
    logits32 = m32(idx)[0]
    assert logits32.dtype == torch.float32
    assert (logits32.double() - m64(idx)[0]).abs().max() < 1e-5
