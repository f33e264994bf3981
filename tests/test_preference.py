"""Reward models and DPO: the losses and their gradients against torch in float64, and the objectives'
whole gradient (model + head) against the PyTorch twin, with ragged pairs and thread shards."""

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from zerollm.model.config import GPTConfig
from zerollm.io.errors import ZeroLLMError
from zerollm.model.gpt import GPT
from zerollm.align.objectives.dpo import DPOConfig, DPOObjective, dpo_loss
from zerollm.align.objectives.pairs import both_sides, pair_batch
from zerollm.align.objectives.reward import RewardConfig, RewardObjective, bradley_terry_loss, margin_ranking_loss
from zerollm.training.parallel import ShardedModel
from zerollm.teach.torch_ref import TorchGPT, random_state

TOL = 1e-8


def rel(ours, ref):
    """Relative error; the 1e-6 floor covers gradients that are 0 in exact arithmetic (a bias that every
    pair pushes up and down equally, e.g. the reward head's) and come out as rounding noise."""
    ours, ref = np.asarray(ours, np.float64), np.asarray(ref, np.float64)
    return float(np.abs(ours - ref).max() / max(np.abs(ref).max(), 1e-6))


def torch_grads(fn, *arrays):
    ts = [torch.tensor(a, requires_grad=True) for a in arrays]
    loss = fn(*ts)
    loss.backward()
    return loss.item(), [t.grad.numpy() for t in ts]


# ----------------------------------------------------------------------------
# the losses alone

@pytest.mark.parametrize("with_margin", [False, True])
def test_bradley_terry_matches_torch(with_margin):
    rng = np.random.default_rng(0)
    r_c, r_r = rng.standard_normal(7) * 3, rng.standard_normal(7) * 3
    m = rng.random(7) if with_margin else np.zeros(7)
    loss, dc, dr = bradley_terry_loss(r_c, r_r, m)
    t_loss, (t_dc, t_dr) = torch_grads(lambda c, r: -F.logsigmoid(c - r - torch.from_numpy(m)).mean(), r_c, r_r)
    assert abs(loss - t_loss) <= TOL * abs(t_loss) and rel(dc, t_dc) <= TOL and rel(dr, t_dr) <= TOL


def test_bradley_terry_is_finite_for_huge_gaps():
    loss, dc, _ = bradley_terry_loss(np.array([-800.0, 800.0]), np.array([800.0, -800.0]))
    assert np.isfinite(loss) and np.isfinite(dc).all() and loss == pytest.approx(800.0)


def test_margin_ranking_matches_torch():
    rng = np.random.default_rng(1)
    r_c, r_r = rng.standard_normal(9), rng.standard_normal(9)
    loss, dc, dr = margin_ranking_loss(r_c, r_r, 0.5)
    t_loss, (t_dc, t_dr) = torch_grads(lambda c, r: F.margin_ranking_loss(c, r, torch.ones(9, dtype=torch.float64),
                                                                          margin=0.5), r_c, r_r)
    assert abs(loss - t_loss) <= TOL and rel(dc, t_dc) <= TOL and rel(dr, t_dr) <= TOL


def torch_dpo(pc, pr, rc, rr, beta, loss_type):
    z = (pc - pr) - (rc - rr)
    if loss_type == "ipo":
        return ((z - 1 / (2 * beta)) ** 2).mean()
    return -F.logsigmoid(beta * z).mean()


@pytest.mark.parametrize("loss_type", ["sigmoid", "ipo"])
@pytest.mark.parametrize("beta", [0.1, 2.0])
def test_dpo_loss_matches_torch(loss_type, beta):
    rng = np.random.default_rng(2)
    pc, pr, rc, rr = (rng.standard_normal(6) * 4 for _ in range(4))
    loss, dc, dr = dpo_loss(pc, pr, rc, rr, beta, loss_type)
    t_loss, (t_dc, t_dr, t_rc, t_rr) = torch_grads(lambda *a: torch_dpo(*a, beta, loss_type), pc, pr, rc, rr)
    assert abs(loss - t_loss) <= TOL * abs(t_loss) and rel(dc, t_dc) <= TOL and rel(dr, t_dr) <= TOL


def test_bad_settings_are_clear_errors():
    with pytest.raises(ZeroLLMError, match="sigmoid, ipo"):
        DPOConfig(loss_type="hinge")
    with pytest.raises(ZeroLLMError, match="beta"):
        DPOConfig(beta=0)
    with pytest.raises(ZeroLLMError, match="bt, margin"):
        RewardConfig(loss="logistic")


# ----------------------------------------------------------------------------
# the objectives against the torch twin

CFG = GPTConfig(vocab_size=11, block_size=9, n_layer=2, n_head=2, n_embd=8, dtype="float64")


def make_pairs(rng, n=5):
    """Ragged pairs: prompt + answer, the loss mask on the answer's tokens."""
    pairs = []
    for i in range(n):
        prompt = list(rng.integers(0, CFG.vocab_size, rng.integers(2, 4)))
        sides = {}
        for side in ("chosen", "rejected"):
            answer = list(rng.integers(0, CFG.vocab_size, rng.integers(1, 5)))
            sides[side] = (prompt + answer, [False] * len(prompt) + [True] * len(answer))
        pairs.append({**sides, "margin": float(rng.random()), "corruption": ["a", "b"][i % 2]})
    return pairs


def twin(seed):
    state = random_state(CFG, seed=seed)
    ref = TorchGPT(CFG)
    ref.load_numpy_state(state)
    return GPT(CFG).load_state_dict(state), ref


def all_grads(named, names):
    return {n: (np.zeros(tuple(p.shape)) if p.grad is None else p.grad.numpy()) for n, p in named if n in names}


@pytest.mark.parametrize("loss", ["bt", "margin"])
def test_reward_objective_gradients_match_torch(loss):
    rng = np.random.default_rng(3)
    model, t_model = twin(0)
    pairs = make_pairs(rng)
    obj = RewardObjective(model, pairs, batch_size=5, seed=0, config=RewardConfig(loss=loss, margin=0.3))
    obj.head["score.weight"][:] = rng.standard_normal((CFG.n_embd, 1))
    obj.head["score.bias"][:] = 0.7
    batch = pair_batch(pairs)
    result = obj.shard_loss(model.train(), batch)

    ids, _, last = both_sides(batch)
    w = torch.tensor(obj.head["score.weight"], requires_grad=True)
    b = torch.tensor(obj.head["score.bias"], requires_grad=True)
    h = t_model.hidden_states(torch.from_numpy(ids))
    r = (h[torch.arange(len(ids)), torch.from_numpy(last)] @ w)[:, 0] + b
    rc, rr = r[:5], r[5:]
    if loss == "bt":
        t_loss = -F.logsigmoid(rc - rr - torch.from_numpy(batch["margin"])).mean()
    else:
        t_loss = F.margin_ranking_loss(rc, rr, torch.ones(5, dtype=torch.float64), margin=0.3)
    t_loss.backward()
    assert abs(result.loss - t_loss.item()) <= TOL * abs(t_loss.item())
    expected = {**all_grads(t_model.named_parameters(), model.params),
                "score.weight": w.grad.numpy(), "score.bias": b.grad.numpy()}
    assert set(result.grads) == set(expected)
    bad = {k: rel(result.grads[k], expected[k]) for k in expected if not rel(result.grads[k], expected[k]) <= TOL}
    assert not bad, bad


def torch_seq_logps(t_model, ids, mask, average):
    logits, _ = t_model(torch.from_numpy(ids[:, :-1]))
    logq = torch.log_softmax(logits, -1).gather(-1, torch.from_numpy(ids[:, 1:])[..., None])[..., 0]
    m = torch.from_numpy(mask[:, 1:]).double()
    total = (logq * m).sum(1)
    return total / m.sum(1) if average else total


@pytest.mark.parametrize("loss_type", ["sigmoid", "ipo"])
def test_dpo_objective_gradients_match_torch(loss_type):
    rng = np.random.default_rng(4)
    model, t_model = twin(0)
    ref, t_ref = twin(1)                            # a reference that differs from the policy
    pairs = make_pairs(rng)
    obj = DPOObjective(model, ref, pairs, batch_size=5, seed=0, config=DPOConfig(beta=0.5, loss_type=loss_type))
    batch = pair_batch(pairs)
    result = obj.shard_loss(model.train(), batch)

    ids, mask, _ = both_sides(batch)
    pi = torch_seq_logps(t_model, ids, mask, loss_type == "ipo")
    with torch.no_grad():
        rf = torch_seq_logps(t_ref, ids, mask, loss_type == "ipo")
    t_loss = torch_dpo(pi[:5], pi[5:], rf[:5], rf[5:], 0.5, loss_type)
    t_loss.backward()
    assert abs(result.loss - t_loss.item()) <= TOL * abs(t_loss.item())
    expected = all_grads(t_model.named_parameters(), model.params)
    bad = {k: rel(result.grads[k], expected[k]) for k in expected if not rel(result.grads[k], expected[k]) <= TOL}
    assert not bad, bad


@pytest.mark.parametrize("kind", ["reward", "dpo"])
def test_thread_shards_give_the_same_loss_and_gradients(kind):
    rng = np.random.default_rng(5)
    pairs = make_pairs(rng, n=6)
    results = []
    for threads in (1, 3):
        model, _ = twin(0)
        if kind == "reward":
            obj = RewardObjective(model, pairs, batch_size=6, seed=0)
            obj.head["score.weight"][:] = 0.1
        else:
            obj = DPOObjective(model, twin(1)[0], pairs, batch_size=6, seed=0)
        engine = ShardedModel(model.train(), threads)
        results.append(engine.run(obj.shard_loss, pair_batch(pairs)))
        engine.close()
    one, three = results
    assert abs(one.loss - three.loss) <= 1e-12 * abs(one.loss)
    assert all(rel(three.grads[k], one.grads[k]) <= 1e-10 for k in one.grads)


def test_reward_evaluation_reports_each_corruption():
    rng = np.random.default_rng(6)
    model, _ = twin(0)
    pairs = make_pairs(rng, n=8)
    obj = RewardObjective(model, pairs, batch_size=4, seed=0, eval_pairs=pairs)
    obj.head["score.weight"][:] = rng.standard_normal((CFG.n_embd, 1))
    report = obj.score_pairs(ShardedModel(model, 1), pairs, batch_size=3)
    assert report["pairs"] == 8 and set(report["by_corruption"]) == {"a", "b"}
    assert sum(v["pairs"] for v in report["by_corruption"].values()) == 8
    assert 0.0 <= report["val_accuracy"] <= 1.0


def test_pairs_longer_than_the_context_are_refused():
    model, _ = twin(0)
    long = [{"chosen": ([1] * 10, [False] + [True] * 9), "rejected": ([1, 2], [False, True])}]
    with pytest.raises(ZeroLLMError, match="line 1"):
        RewardObjective(model, long, batch_size=1, seed=0)


def test_dpo_and_reward_limits_say_what_they_count():
    """A side of block_size + 1 tokens fits DPO (it reads block_size of them and predicts the last) but not
    the reward model (it reads them all); each refusal names its own count and the longest side."""
    model, _ = twin(0)
    T = model.config.block_size

    def pair(n):
        return {"chosen": ([1] * n, [False] + [True] * (n - 1)), "rejected": ([1, 2], [False, True])}
    DPOObjective(model, twin(1)[0], [pair(T + 1)], batch_size=1, seed=0)
    with pytest.raises(ZeroLLMError) as err:
        DPOObjective(model, twin(1)[0], [pair(T + 2)], batch_size=1, seed=0)
    assert (f"longer than the {T + 1} tokens dpo takes per side (the model reads block_size {T} of them and "
            f"predicts the last one" in str(err.value)) and f"the longest has {T + 2}" in str(err.value)
    RewardObjective(model, [pair(T)], batch_size=1, seed=0)
    with pytest.raises(ZeroLLMError) as err:
        RewardObjective(model, [pair(T + 1)], batch_size=1, seed=0)
    assert f"longer than the {T} tokens the reward model reads per side (its block_size" in str(err.value)
    assert f"the longest has {T + 1}" in str(err.value)


def test_pairs_too_long_are_counted_in_words_that_fit_the_count():
    from zerollm.align.objectives.pairs import check_lengths
    short, long = {"chosen": ([1] * 3,), "rejected": ([1] * 3,)}, {"chosen": ([1] * 9,), "rejected": ([1],)}
    with pytest.raises(ZeroLLMError, match=r"^the pair on line 2 is longer than the 5 tokens"):
        check_lengths([short, long], 5)
    with pytest.raises(ZeroLLMError, match=r"^2 pairs \(the first on line 1\) are longer than the 5 tokens"):
        check_lengths([long, long, short], 5)
