"""The whole NumPy model vs the same model in PyTorch (zerollm.teach.torch_ref, itself proven against Hugging
Face in test_torch_ref.py) and vs transformers.GPT2LMHeadModel directly: logits, loss, every gradient."""

import itertools

import numpy as np
import pytest
import torch

import hf_twins as hf
from zerollm.model.config import GPTConfig
from zerollm.engine import use_engine
from zerollm.io.errors import ZeroLLMError
from zerollm.model.gpt import GPT, param_shapes
from zerollm.teach.torch_ref import TorchGPT, random_state

TOL = {"float64": 1e-8, "float32": 1e-4}


def rel(ours, ref):
    ours, ref = np.asarray(ours, np.float64), np.asarray(ref, np.float64)
    return float(np.abs(ours - ref).max() / max(np.abs(ref).max(), 1e-30))


def batch(cfg, seed=0, B=2, T=None):
    rng = np.random.default_rng(seed)
    T = T or cfg.block_size
    idx = rng.integers(0, cfg.vocab_size, (B, T))
    targets = rng.integers(0, cfg.vocab_size, (B, T))
    targets[0, 0] = -100                   # an ignored position
    return idx, targets


def compare(cfg, seed=0):
    """Same weights in both models; returns the worst relative error of logits, loss and grads."""
    state = random_state(cfg, seed=seed, dtype=np.float64)
    ours = GPT(cfg)
    ours.load_state_dict(state)
    ref = TorchGPT(GPTConfig(**{**cfg.to_dict(), "dtype": "float64"}))
    ref.load_numpy_state(state)
    idx, targets = batch(cfg, seed)
    logits, loss = ours.forward(idx, targets)
    grads = ours.backward()
    moe_loss = ours.moe_loss()                 # the aux and z losses that backward() added
    t_logits, t_loss = ref(torch.from_numpy(idx), torch.from_numpy(targets))
    t_moe_loss = ref.moe_loss()
    (t_loss + t_moe_loss).backward()
    t_grads = ref.grads_numpy()
    assert logits.dtype == np.dtype(cfg.dtype)
    assert set(grads) == set(t_grads) == set(param_shapes(cfg))
    errors = {"logits": rel(logits, t_logits.detach().numpy()), "loss": rel(loss, t_loss.item())}
    if cfg.n_expert:
        errors["moe_loss"] = rel(moe_loss, t_moe_loss.item())
        dropped = sum(b.mlp.last["dropped"] for b in ref.h if hasattr(b.mlp, "last"))
        assert ours.moe_stats["dropped_frac"] * cfg.n_expert_active * idx.size * len(cfg.moe_layers) == \
            pytest.approx(dropped)
        assert (dropped > 0) == (cfg.capacity_factor > 0)       # a capacity case really drops pairs
    for name in grads:
        assert grads[name].shape == t_grads[name].shape and grads[name].dtype == np.dtype(cfg.dtype), name
        errors[name] = rel(grads[name], t_grads[name])
    return errors


COMBOS = list(itertools.product(("layernorm", "rmsnorm"), ("learned", "sinusoidal", "rope"),
                                ("gelu", "swiglu"), (True, False), (True, False), (True, False), (4, 2)))


@pytest.mark.slow
@pytest.mark.parametrize("norm, pos, mlp, bias, tied, causal, n_kv_head", COMBOS,
                         ids=["-".join(map(str, c)) for c in COMBOS])
def test_every_architecture_matches_torch_float64(norm, pos, mlp, bias, tied, causal, n_kv_head):
    cfg = GPTConfig(vocab_size=19, block_size=6, n_layer=2, n_head=4, n_kv_head=n_kv_head, n_embd=16,
                    norm=norm, pos=pos, mlp=mlp, bias=bias, tie_embeddings=tied, causal=causal,
                    dtype="float64")
    errors = compare(cfg)
    worst = max(errors, key=errors.get)
    assert errors[worst] <= TOL["float64"], (worst, errors[worst])


@pytest.mark.slow
@pytest.mark.parametrize("engine", ["numpy", "fast"])
@pytest.mark.parametrize("extra", [dict(), dict(norm="rmsnorm", pos="rope", mlp="swiglu", n_kv_head=1,
                                                bias=False, tie_embeddings=False, rope_theta=500.0)])
def test_float32_model_matches_torch_float64(extra, engine):
    """Both engines (zerollm.engine): the fast one's kernels stand in for the NumPy layers in float32."""
    cfg = GPTConfig(vocab_size=41, block_size=9, n_layer=3, n_head=4, n_embd=24, dtype="float32", **extra)
    with use_engine(engine):
        errors = compare(cfg, seed=3)
    assert max(errors.values()) <= TOL["float32"], max(errors.items(), key=lambda kv: kv[1])


MOE_GRID = list(itertools.product((1, 2, 3), (False, True), (0.0, 1.0), (0, 1), (1, 2)))


@pytest.mark.slow
@pytest.mark.parametrize("k, norm_topk, capacity, shared, every", MOE_GRID,
                         ids=[f"k{k}-{'norm' if n else 'raw'}-cap{c:g}-shared{s}-every{e}"
                              for k, n, c, s, e in MOE_GRID])
def test_mixture_of_experts_matches_torch_float64(k, norm_topk, capacity, shared, every):
    """The MoE grid: top-k, gates renormalised or not, capacity on/off, a shared expert or not, every
    block or the hybrid stack (blocks 1, 3). The MLP kind, biases and norm vary along the grid too."""
    n = len(MOE_GRID)
    i = MOE_GRID.index((k, norm_topk, capacity, shared, every))
    llama = i % 2 == 0
    cfg = GPTConfig(vocab_size=19, block_size=6, n_layer=4 if every == 2 else 2, n_head=2, n_embd=16,
                    n_inner=12, n_expert=4, n_expert_active=k, moe_norm_topk=norm_topk, capacity_factor=capacity,
                    n_shared_expert=shared, moe_every=every, aux_loss_coef=0.1, z_loss_coef=0.01,
                    norm="rmsnorm" if llama else "layernorm", pos="rope" if llama else "learned",
                    mlp="swiglu" if llama else "gelu", bias=i % 3 == 0, dtype="float64")
    assert i < n and cfg.moe_layers == ([1, 3] if every == 2 else [0, 1])
    errors = compare(cfg, seed=i)
    worst = max(errors, key=errors.get)
    assert errors[worst] <= TOL["float64"], (worst, errors[worst])


@pytest.mark.slow
def test_mixture_of_experts_float32_matches_torch_float64():
    cfg = GPTConfig(vocab_size=29, block_size=8, n_layer=2, n_head=2, n_embd=16, n_expert=5, n_expert_active=2,
                    moe_norm_topk=True, capacity_factor=1.25, n_shared_expert=2, mlp="swiglu", norm="rmsnorm",
                    pos="rope", bias=False, dtype="float32")
    errors = compare(cfg, seed=2)
    assert max(errors.values()) <= TOL["float32"], max(errors.items(), key=lambda kv: kv[1])


def test_exact_gelu_and_odd_sizes():
    cfg = GPTConfig(vocab_size=23, block_size=7, n_layer=1, n_head=3, n_embd=15, n_inner=22, gelu="erf",
                    norm_eps=1e-3, dtype="float64")
    assert max(compare(cfg, seed=5).values()) <= TOL["float64"]


@pytest.mark.slow
def test_gpt2_settings_match_transformers_gpt2lmheadmodel():
    cfg = GPTConfig(vocab_size=37, block_size=8, n_layer=2, n_head=3, n_embd=12, dtype="float64")
    state = random_state(cfg, seed=7)
    ours = GPT(cfg).load_state_dict(state)
    hf_model = hf.to_hf_gpt2(state, cfg)
    idx, _ = batch(cfg, seed=7, T=8)
    # Hugging Face shifts labels inside the model: labels=idx means "predict idx[t+1] at t"
    targets = np.concatenate([idx[:, 1:], np.full((2, 1), -100)], axis=1)
    logits, loss = ours.forward(idx, targets)
    grads = ours.backward()
    out = hf_model(input_ids=torch.from_numpy(idx), labels=torch.from_numpy(idx))
    assert rel(logits, out.logits.detach().numpy()) <= 1e-10
    assert abs(loss - out.loss.item()) <= 1e-6          # HF computes its loss in float32
    # gradients through HF's float64 logits and a float64 cross-entropy
    V = cfg.vocab_size
    hf_model.zero_grad()
    logits64 = hf_model(input_ids=torch.from_numpy(idx)).logits
    torch.nn.functional.cross_entropy(logits64.reshape(-1, V), torch.from_numpy(targets).reshape(-1),
                                      ignore_index=-100).backward()
    hf_grads = hf.hf_grads_numpy(hf_model, cfg)
    for name, g in grads.items():
        assert rel(g, hf_grads[name]) <= 1e-9, name


@pytest.mark.slow
def test_ten_sgd_steps_give_the_same_losses_as_torch():
    cfg = GPTConfig(vocab_size=29, block_size=8, n_layer=2, n_head=2, n_embd=12, dtype="float64",
                    norm="rmsnorm", pos="rope", mlp="swiglu", n_kv_head=1)
    state = random_state(cfg, seed=11)
    ours = GPT(cfg).load_state_dict(state)
    ref = TorchGPT(cfg)
    ref.load_numpy_state(state)
    lr = 0.2
    ours_losses, ref_losses = [], []
    idx, targets = batch(cfg, seed=100)        # one batch, so the loss must fall step after step
    for step in range(10):
        _, loss = ours.forward(idx, targets)
        for name, g in ours.backward().items():
            ours.params[name] -= lr * g
        ours_losses.append(loss)
        ref.zero_grad()
        _, t_loss = ref(torch.from_numpy(idx), torch.from_numpy(targets))
        t_loss.backward()
        with torch.no_grad():
            for p in ref.parameters():
                p -= lr * p.grad
        ref_losses.append(t_loss.item())
    assert all(b < a for a, b in zip(ours_losses, ours_losses[1:]))
    np.testing.assert_allclose(ours_losses, ref_losses, rtol=0, atol=1e-10)


def test_state_dict_round_trip_and_clear_errors():
    cfg = GPTConfig(vocab_size=13, block_size=4, n_layer=1, n_head=2, n_embd=8, tie_embeddings=False)
    model = GPT(cfg, seed=1)
    sd = {k: v.copy() for k, v in model.state_dict().items()}
    other = GPT(cfg, seed=2)
    assert not np.array_equal(other.params["wte.weight"], sd["wte.weight"])
    other.load_state_dict(sd)
    for k in sd:
        np.testing.assert_array_equal(other.params[k], sd[k])
    assert "lm_head.weight" in sd and "wpe.weight" in sd and sd["h.0.attn.c_attn.weight"].shape == (8, 24)
    bad = dict(sd)
    del bad["ln_f.bias"]
    bad["extra.weight"] = np.zeros(3)
    bad["wte.weight"] = np.zeros((13, 9))
    with pytest.raises(ZeroLLMError) as err:
        other.load_state_dict(bad)
    msg = str(err.value)
    assert "ln_f.bias" in msg and "extra.weight" in msg and "wte.weight: expected (13, 8), got (13, 9)" in msg


def test_tied_embeddings_have_no_head_tensor_and_count_once():
    cfg = GPTConfig(vocab_size=13, block_size=4, n_layer=1, n_head=2, n_embd=8)
    model = GPT(cfg)
    assert "lm_head.weight" not in model.state_dict()
    assert model.num_params() == sum(np.prod(s) for s in param_shapes(cfg).values())
    assert model.num_params(non_embedding=True) == model.num_params() - 4 * 8


def test_dropout_only_in_train_mode_and_backward_errors():
    cfg = GPTConfig(vocab_size=13, block_size=6, n_layer=1, n_head=2, n_embd=8, dropout=0.5)
    model = GPT(cfg)
    idx, targets = batch(cfg)
    a = model.eval().forward(idx)[0]
    b = model.forward(idx)[0]
    np.testing.assert_array_equal(a, b)                  # eval: deterministic
    c = model.train().forward(idx)[0]
    assert not np.allclose(a, c)                         # train: dropout changes things
    with pytest.raises(ZeroLLMError, match="with targets"):
        model.backward()


@pytest.mark.parametrize("kwargs, fragment", [
    (dict(n_embd=10, n_head=3), "not divisible"),
    (dict(n_head=4, n_kv_head=3), "must divide"),
    (dict(n_embd=12, n_head=4, pos="rope"), "head size must be even"),
    (dict(norm="batchnorm"), "norm must be one of"),
    (dict(dropout=1.0), "dropout"),
    (dict(n_layer=0), "positive integer"),
    (dict(bias=1), "True or False"),
])
def test_invalid_configs_raise_clear_errors(kwargs, fragment):
    base = dict(vocab_size=10, block_size=8, n_layer=1, n_head=2, n_embd=8)
    with pytest.raises(ZeroLLMError, match=fragment):
        GPTConfig(**{**base, **kwargs})


def test_bad_inputs_to_forward():
    model = GPT(GPTConfig(vocab_size=10, block_size=4, n_layer=1, n_head=2, n_embd=8))
    with pytest.raises(ZeroLLMError, match="block_size"):
        model.forward(np.zeros((1, 5), dtype=np.int64))
    with pytest.raises(ZeroLLMError, match=r"\[0, 10\)"):
        model.forward(np.array([[1, 10]]))
    with pytest.raises(ZeroLLMError, match="integer token ids"):
        model.forward(np.zeros((1, 2)))


def test_eval_forward_keeps_no_activations_unless_asked():
    model = GPT(GPTConfig(vocab_size=13, block_size=6, n_layer=2, n_head=2, n_embd=8)).eval()
    idx, targets = batch(model.config)
    logits, _ = model.forward(idx, targets)
    with pytest.raises(ZeroLLMError, match="keep=True"):
        model.backward()
    with pytest.raises(ZeroLLMError, match="keep=True"):
        model.attention_weights()
    kept, _ = model.forward(idx, targets, keep=True)
    np.testing.assert_array_equal(kept, logits)
    assert len(model.attention_weights()) == 2 and set(model.backward())   # both work when kept
