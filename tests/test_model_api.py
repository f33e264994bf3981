"""The model API that every loss after pre-training uses, against the PyTorch twin in float64:
backward from any dlogits, a scalar head on the final hidden states (dhidden), both at once, and the
per-token log-probabilities of given tokens with their backward."""

import numpy as np
import pytest
import torch

from zerollm.model.config import GPTConfig
from zerollm.io.errors import ZeroLLMError
from zerollm.model.heads import last_token_index, scalar_head_backward, scalar_head_forward, split_head_params
from zerollm.model.gpt import GPT
from zerollm.model.policy import token_logprobs, token_logprobs_backward
from zerollm.teach.torch_ref import TorchGPT, random_state

TOL = 1e-8
CONFIGS = {
    "gpt2": dict(),
    "llama": dict(norm="rmsnorm", pos="rope", mlp="swiglu", bias=False, n_kv_head=1, tie_embeddings=False),
}


def rel(ours, ref):
    ours, ref = np.asarray(ours, np.float64), np.asarray(ref, np.float64)
    return float(np.abs(ours - ref).max() / max(np.abs(ref).max(), 1e-30))


def twins(kind, seed=0):
    cfg = GPTConfig(vocab_size=13, block_size=9, n_layer=2, n_head=2, n_embd=8, dtype="float64", **CONFIGS[kind])
    state = random_state(cfg, seed=seed)
    ours = GPT(cfg).load_state_dict(state)
    ref = TorchGPT(cfg)
    ref.load_numpy_state(state)
    return cfg, ours, ref


def assert_grads_match(grads, ref):
    """Every gradient equal to torch's; a parameter torch gave no gradient (unused) must be 0 here."""
    t_grads = {name: np.zeros(tuple(p.shape)) if p.grad is None else p.grad.numpy()
               for name, p in ref.named_parameters()}
    assert set(grads) == set(t_grads)
    bad = {k: rel(grads[k], t_grads[k]) for k in grads if not rel(grads[k], t_grads[k]) <= TOL}
    assert not bad, bad


@pytest.mark.parametrize("kind", sorted(CONFIGS))
def test_backward_from_any_dlogits(kind):
    cfg, ours, ref = twins(kind)
    rng = np.random.default_rng(1)
    idx = rng.integers(0, cfg.vocab_size, (3, 7))
    dlogits = rng.standard_normal((3, 7, cfg.vocab_size))
    logits, loss = ours.forward(idx)
    assert loss is None
    grads = ours.backward(dlogits)
    t_logits, _ = ref(torch.from_numpy(idx))
    (t_logits * torch.from_numpy(dlogits)).sum().backward()
    assert rel(logits, t_logits.detach().numpy()) <= TOL
    assert_grads_match(grads, ref)


@pytest.mark.parametrize("kind", sorted(CONFIGS))
def test_reward_head_on_the_last_real_token(kind):
    """Right-padded rows of different lengths; the head reads each row's last real token."""
    cfg, ours, ref = twins(kind)
    rng = np.random.default_rng(2)
    idx = rng.integers(0, cfg.vocab_size, (3, 6))
    real = np.ones((3, 6), dtype=bool)
    real[0, 4:] = False
    real[2, 2:] = False
    last = last_token_index(real)
    assert last.tolist() == [3, 5, 1]
    w, b = rng.standard_normal((cfg.n_embd, 1)), rng.standard_normal(1)
    dr = rng.standard_normal(3)
    h = ours.forward_hidden(idx)
    r, cache = scalar_head_forward(h, w, b, last)
    dh, dw, db = scalar_head_backward(dr, cache)
    grads = ours.backward(dhidden=dh)

    tw = torch.tensor(w, requires_grad=True)
    tb = torch.tensor(b, requires_grad=True)
    t_h = ref.hidden_states(torch.from_numpy(idx))
    t_r = (t_h[torch.arange(3), torch.from_numpy(last)] @ tw)[:, 0] + tb
    (t_r * torch.from_numpy(dr)).sum().backward()
    assert rel(r, t_r.detach().numpy()) <= TOL
    assert rel(dw, tw.grad.numpy()) <= TOL and rel(db, tb.grad.numpy()) <= TOL
    assert_grads_match(grads, ref)
    head = "lm_head.weight" if "lm_head.weight" in grads else None
    if head:                                       # untied: the unused lm head gets exactly zero
        assert not grads[head].any()


def test_dlogits_and_dhidden_together_add_up():
    """A value head beside the language-model head (PPO on a shared trunk)."""
    cfg, ours, ref = twins("gpt2")
    rng = np.random.default_rng(3)
    idx = rng.integers(0, cfg.vocab_size, (2, 5))
    dlogits, dhidden = rng.standard_normal((2, 5, cfg.vocab_size)), rng.standard_normal((2, 5, cfg.n_embd))
    ours.forward(idx)
    grads = ours.backward(dlogits, dhidden=dhidden)
    t_h = ref.hidden_states(torch.from_numpy(idx))
    t_logits = t_h @ ref.wte.weight.T
    ((t_logits * torch.from_numpy(dlogits)).sum() + (t_h * torch.from_numpy(dhidden)).sum()).backward()
    assert_grads_match(grads, ref)


@pytest.mark.parametrize("kind", sorted(CONFIGS))
def test_token_logprobs_and_entropy_with_their_backward(kind):
    cfg, ours, ref = twins(kind)
    rng = np.random.default_rng(4)
    ids = rng.integers(0, cfg.vocab_size, (3, 8))
    mask = np.zeros((3, 8), dtype=bool)
    mask[0, 3:] = True                    # completion tokens of different lengths (ragged)
    mask[1, 5:7] = True
    mask[2, 1:] = True
    dlogp, dH = rng.standard_normal((3, 8)), rng.standard_normal((3, 8))
    logp, H, cache = token_logprobs(ours.train(), ids, mask, entropy=True)
    grads = token_logprobs_backward(ours, dlogp, cache, dentropy=dH)

    t_logits, _ = ref(torch.from_numpy(ids[:, :-1]))
    logq = torch.log_softmax(t_logits, dim=-1)
    t_mask = torch.from_numpy(mask[:, 1:]).double()
    t_logp = logq.gather(-1, torch.from_numpy(ids[:, 1:])[..., None])[..., 0] * t_mask
    t_H = -(logq.exp() * logq).sum(-1) * t_mask
    ((t_logp * torch.from_numpy(dlogp[:, 1:])).sum() + (t_H * torch.from_numpy(dH[:, 1:])).sum()).backward()
    assert logp.shape == H.shape == (3, 8) and not logp[:, 0].any() and not logp[~mask].any()
    assert rel(logp[:, 1:], t_logp.detach().numpy()) <= TOL and rel(H[:, 1:], t_H.detach().numpy()) <= TOL
    assert_grads_match(grads, ref)


def test_padding_on_the_right_changes_nothing_for_the_real_tokens():
    """Causal attention: a real token never sees the pads after it, so right padding needs no mask."""
    cfg, ours, _ = twins("gpt2")
    ours.eval()
    ids = np.array([[3, 4, 5, 6]])
    padded = np.array([[3, 4, 5, 6, 0, 0, 0]])
    np.testing.assert_array_equal(ours.forward(padded)[0][:, :4], ours.forward(ids)[0])


def test_clear_errors():
    cfg, ours, _ = twins("gpt2")
    ids = np.array([[1, 2, 3]])
    with pytest.raises(ZeroLLMError, match="mask\\[:, 0\\]"):
        token_logprobs(ours, ids, np.ones((1, 3), bool))
    with pytest.raises(ZeroLLMError, match="shape"):
        token_logprobs(ours, ids, np.ones((1, 2), bool))
    ours.train().forward(ids)
    with pytest.raises(ZeroLLMError, match="dlogits must have shape"):
        ours.backward(np.zeros((1, 3, 2)))
    ours.forward_hidden(ids)
    with pytest.raises(ZeroLLMError, match="needs logits"):
        ours.backward(np.zeros((1, 3, cfg.vocab_size)))
    ours.forward(ids)
    with pytest.raises(ZeroLLMError, match="built-in cross-entropy"):
        ours.backward()
    with pytest.raises(ZeroLLMError, match="at least one real token"):
        last_token_index(np.array([[False, True]]))


def test_head_parameters_are_told_apart_from_the_model():
    trunk, heads = split_head_params({"wte.weight": 1, "h.0.ln_1.weight": 2, "score.weight": 3, "v_head.bias": 4})
    assert set(trunk) == {"wte.weight", "h.0.ln_1.weight"} and set(heads) == {"score.weight", "v_head.bias"}
