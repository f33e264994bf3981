"""GRPO and PPO losses, group advantages and GAE against torch (autograd for the gradients) in float64:
all three GRPO loss types, beta = 0 and > 0, ragged masks, ratios on both sides of the clip range."""

import numpy as np
import pytest
import torch

from zerollm.io.errors import ZeroLLMError
from zerollm.align.rl import Critic, PPOSettings, gae, group_advantages, grpo_loss, policy_stats, ppo_loss, whiten

TOL = 1e-10


def rel(ours, ref):
    ours, ref = np.asarray(ours, np.float64), np.asarray(ref, np.float64)
    return float(np.abs(ours - ref).max() / max(np.abs(ref).max(), 1e-12))


def ragged_batch(seed, B=5, T=7):
    """Log-probs whose ratios fall inside and outside [0.8, 1.2]; answers of different lengths."""
    rng = np.random.default_rng(seed)
    old = -rng.random((B, T)) * 3
    logp = old + rng.normal(0, 0.3, (B, T))
    ref = old + rng.normal(0, 0.2, (B, T))
    mask = np.zeros((B, T), dtype=bool)
    for b, n in enumerate(rng.integers(1, T + 1, B)):
        mask[b, :n] = True
    return logp, old, ref, rng.standard_normal(B), mask


# ----------------------------------------------------------------------------
# GRPO, written in torch the way Hugging Face TRL computes it

def torch_grpo(logp, old, ref, adv, mask, epsilon, beta, loss_type):
    ratio = torch.exp(logp - old)
    A = adv[:, None]
    per_token = -torch.min(ratio * A, torch.clamp(ratio, 1 - epsilon, 1 + epsilon) * A)
    if beta:
        per_token = per_token + beta * (torch.exp(ref - logp) - (ref - logp) - 1)
    m = mask.double()
    if loss_type == "grpo":
        return ((per_token * m).sum(-1) / m.sum(-1).clamp(min=1)).mean()
    if loss_type == "bnpo":
        return (per_token * m).sum() / m.sum().clamp(min=1)
    return (per_token * m).sum() / (per_token.shape[0] * per_token.shape[1])


@pytest.mark.parametrize("loss_type", ["grpo", "bnpo", "dr_grpo"])
@pytest.mark.parametrize("beta", [0.0, 0.04, 0.5])
@pytest.mark.parametrize("seed", [0, 1])
def test_grpo_loss_and_gradient_match_torch(loss_type, beta, seed):
    logp, old, ref, adv, mask = ragged_batch(seed)
    loss, dlogp = grpo_loss(logp, old, ref, adv, mask, epsilon=0.2, beta=beta, loss_type=loss_type)
    t_logp = torch.tensor(logp, requires_grad=True)
    t_loss = torch_grpo(t_logp, *(torch.from_numpy(a) for a in (old, ref, adv, mask)), 0.2, beta, loss_type)
    t_loss.backward()
    assert abs(loss - t_loss.item()) <= TOL * max(abs(t_loss.item()), 1e-12)
    assert dlogp.shape == logp.shape and rel(dlogp, t_logp.grad.numpy()) <= TOL
    assert not dlogp[~mask].any()                       # nothing flows from outside the answers


def test_grpo_loss_types_differ_only_in_the_normaliser():
    logp, old, ref, adv, mask = ragged_batch(2)
    kw = dict(beta=0.0, epsilon=0.2)
    g = grpo_loss(logp, old, ref, adv, mask, loss_type="grpo", **kw)[0]
    b = grpo_loss(logp, old, ref, adv, mask, loss_type="bnpo", **kw)[0]
    d = grpo_loss(logp, old, ref, adv, mask, loss_type="dr_grpo", **kw)[0]
    # the same per-token sum, divided by B*T (dr_grpo) or by the number of answer tokens (bnpo)
    assert d * mask.size == pytest.approx(b * mask.sum())
    assert g != pytest.approx(b)


def test_first_pass_ratio_is_one_and_kl_is_zero_at_the_reference():
    logp, _, _, adv, mask = ragged_batch(3)
    loss, dlogp = grpo_loss(logp, logp, logp, adv, mask, beta=0.5)
    stats = policy_stats(logp, logp, logp, adv, mask)
    assert stats == {"clip_frac": 0.0, "kl": 0.0, "approx_kl": 0.0}
    # rho = 1: the gradient is -A / (B |o_i|) on every answer token
    B = mask.shape[0]
    expected = -adv[:, None] * mask / (B * mask.sum(1, keepdims=True))
    np.testing.assert_allclose(dlogp, expected, rtol=1e-12)


def test_group_advantages_match_torch_std_with_bessel():
    rng = np.random.default_rng(4)
    rewards = rng.random(12)
    ours = group_advantages(rewards, 4)
    r = torch.from_numpy(rewards).view(-1, 4)
    ref = ((r - r.mean(1, keepdim=True)) / (r.std(1, keepdim=True) + 1e-4)).view(-1)
    np.testing.assert_allclose(ours, ref.numpy(), rtol=1e-12)
    np.testing.assert_allclose(group_advantages(rewards, 4, scale=False),
                               (r - r.mean(1, keepdim=True)).view(-1).numpy(), rtol=1e-12)
    assert not group_advantages(np.ones(6), 3).any()       # a group that agrees teaches nothing


@pytest.mark.parametrize("bad", [1, 0, 2.0, True])
def test_group_size_must_be_at_least_two(bad):
    with pytest.raises(ZeroLLMError, match="group size"):
        group_advantages(np.zeros(4), bad)


def test_rewards_must_split_into_groups():
    with pytest.raises(ZeroLLMError, match="G = 3"):
        group_advantages(np.zeros(4), 3)


# ----------------------------------------------------------------------------
# PPO

def torch_ppo(logp, old, adv, mask, v, v_old, R, H, eps, eps_v, vf_coef, ent_coef):
    m = mask.double()
    mean = lambda x: (x * m).sum() / m.sum()
    ratio = torch.exp(logp - old)
    pg = torch.max(-adv * ratio, -adv * torch.clamp(ratio, 1 - eps, 1 + eps))
    v_clip = v_old + torch.clamp(v - v_old, -eps_v, eps_v)
    vf = 0.5 * mean(torch.max((v - R) ** 2, (v_clip - R) ** 2))
    return mean(pg) + vf_coef * vf - ent_coef * mean(H)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_ppo_loss_and_gradients_match_torch(seed):
    logp, old, _, _, mask = ragged_batch(seed)
    rng = np.random.default_rng(seed + 10)
    adv, v_old = rng.standard_normal(logp.shape), rng.standard_normal(logp.shape)
    v = v_old + rng.normal(0, 0.3, logp.shape)          # some values move past the 0.2 clip, some not
    R, H = rng.standard_normal(logp.shape), rng.random(logp.shape) * 2
    settings = PPOSettings(epsilon=0.2, epsilon_value=0.2, vf_coef=0.1, ent_coef=0.01)
    loss, dlogp, dv, dH = ppo_loss(logp, old, adv, mask, critic=Critic(v, v_old, R), entropy=H, settings=settings)
    t = [torch.tensor(a, requires_grad=True) for a in (logp, v, H)]
    t_loss = torch_ppo(t[0], torch.from_numpy(old), torch.from_numpy(adv), torch.from_numpy(mask), t[1],
                       torch.from_numpy(v_old), torch.from_numpy(R), t[2], 0.2, 0.2, 0.1, 0.01)
    t_loss.backward()
    assert abs(loss - t_loss.item()) <= TOL * abs(t_loss.item())
    for ours, ref in ((dlogp, t[0].grad), (dv, t[1].grad), (dH, t[2].grad)):
        assert rel(ours, ref.numpy()) <= TOL


def test_ppo_without_a_critic_is_the_clipped_policy_loss():
    logp, old, _, _, mask = ragged_batch(5)
    adv = np.random.default_rng(0).standard_normal(logp.shape)
    loss, dlogp, dv, dH = ppo_loss(logp, old, adv, mask)
    assert dv is None and dH is None and np.isfinite(loss) and not dlogp[~mask].any()


# ----------------------------------------------------------------------------
# GAE

def torch_gae(rewards, values, lengths, start, gamma, lam):
    """The textbook loop, one row at a time over its answer positions start .. start+n-1."""
    adv = torch.zeros_like(rewards)
    for b, n in enumerate(lengths):
        last = 0.0
        for t in reversed(range(start[b], start[b] + n)):
            nxt = values[b, t + 1] if t + 1 < start[b] + n else 0.0
            delta = rewards[b, t] + gamma * nxt - values[b, t]
            last = delta + gamma * lam * last
            adv[b, t] = last
    return adv


@pytest.mark.parametrize("gamma, lam", [(1.0, 0.95), (0.9, 0.5), (1.0, 1.0)])
def test_gae_matches_the_textbook_loop(gamma, lam):
    rng = np.random.default_rng(6)
    B, T = 4, 9
    rewards, values = rng.standard_normal((B, T)), rng.standard_normal((B, T))
    start, lengths = [2, 3, 1, 4], [5, 6, 1, 3]
    mask = np.zeros((B, T), dtype=bool)
    for b in range(B):
        mask[b, start[b]:start[b] + lengths[b]] = True
    adv, ret = gae(rewards, values, mask, gamma, lam)
    ref = torch_gae(torch.from_numpy(rewards), torch.from_numpy(values), lengths, start, gamma, lam).numpy()
    np.testing.assert_allclose(adv, ref, rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(ret, np.where(mask, ref + values, 0.0), rtol=1e-12, atol=1e-14)


def test_whiten_gives_zero_mean_unit_variance_on_the_mask():
    rng = np.random.default_rng(7)
    x, mask = rng.standard_normal((3, 5)) * 4 + 2, rng.random((3, 5)) > 0.3
    w = whiten(x, mask)
    assert abs(w[mask].mean()) < 1e-12 and abs(w[mask].std(ddof=1) - 1) < 1e-6 and not w[~mask].any()
