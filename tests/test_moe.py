"""Mixture of experts (zerollm.nn.moe) beyond the op checks of test_layers.py and the torch parity of
test_model_parity.py: the capacity rule, eval vs training, the aux/z gradients in the model, thread
shards, the KV cache, the optimizer, the log, and bad configurations."""

import json
from dataclasses import replace

import numpy as np
import pytest

from zerollm.model.config import GPTConfig
from zerollm.io.errors import ZeroLLMError
from zerollm.model.gpt import GPT, param_shapes
from zerollm.nn.mlp import MLPWeights
from zerollm.nn.moe import MoEConfig, capacity_of, dispatch, moe_backward, moe_forward
from zerollm.training.objective import ShardResult, reduce_shards
from zerollm.training.optim import AdamW
from zerollm.training.parallel import ShardedModel
from zerollm.training.runlog import JsonlLog, read_log
from zerollm.generation.decode import generate
from zerollm.generation.sample import Sampling
from zerollm.teach.torch_ref import random_state

MOE = GPTConfig(vocab_size=23, block_size=8, n_layer=2, n_head=2, n_embd=16, n_inner=12, n_expert=4,
                n_expert_active=2, norm="rmsnorm", pos="rope", mlp="swiglu", bias=False, dtype="float64")


def model_and_batch(cfg=MOE, seed=0, B=3):
    model = GPT(cfg).load_state_dict(random_state(cfg, seed))
    rng = np.random.default_rng(seed)
    return model, rng.integers(0, cfg.vocab_size, (B, cfg.block_size)), rng.integers(0, cfg.vocab_size,
                                                                                    (B, cfg.block_size))


# ----------------------------------------------------------------------------
# the layer

def test_capacity_keeps_first_choices_first_then_token_order():
    # 4 tokens, k = 2, 3 experts. Expert 0 is wanted by the second choices of tokens 0, 1 and the
    # first choices of tokens 2, 3: with capacity 2 the first choices win, whatever the token order
    idx = np.array([[1, 0], [2, 0], [0, 1], [0, 2]])
    order, bounds, counts = dispatch(idx, 3, capacity=2)
    pairs = [(p // 4, p % 4) for p in order]                    # (choice j, token n) of every kept pair
    assert counts.tolist() == [4, 2, 2]
    assert pairs[:bounds[1]] == [(0, 2), (0, 3)]                # expert 0: first choices of tokens 2, 3
    assert pairs[bounds[1]:bounds[2]] == [(0, 0), (1, 2)]       # expert 1
    assert pairs[bounds[2]:] == [(0, 1), (1, 3)]                # expert 2
    assert capacity_of(1.0, 4, 2, 3) == 3 and capacity_of(0.0, 4, 2, 3) is None and capacity_of(0.01, 4, 2, 3) == 1


def _layer(E=3, k=1, C=6, H=5, N=12, seed=0):
    """x, the router, and the experts' MLPWeights (no biases)."""
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((N, C))
    return x, rng.standard_normal((C, E)), MLPWeights(rng.standard_normal((E, C, H)), None,
                                                      rng.standard_normal((E, H, C)), None)


def test_dropped_tokens_get_exactly_zero_and_eval_drops_nothing():
    x, wr, experts = _layer()
    config = MoEConfig(k=1, capacity_factor=0.5, mlp="gelu")
    y, cache = moe_forward(x, wr, experts, config)
    y_eval, cache_eval = moe_forward(x, wr, experts, config, training=False)
    kept = np.zeros(12, bool)
    kept[cache.order % 12] = True
    assert cache.dropped == 12 - kept.sum() > 0 and cache_eval.dropped == 0
    assert np.all(y[~kept] == 0)                                # the residual stream carries them
    np.testing.assert_array_equal(y[kept], y_eval[kept])        # the others are untouched
    dx, dwr, (dwf, _, dwp, _), _ = moe_backward(np.ones_like(y), cache)
    assert np.all(dx[~kept] == 0)                               # no gradient through a dropped pair


def test_all_experts_active_with_renormalised_gates_is_the_softmax_mixture():
    x, wr, experts = _layer(E=3, k=3)
    y, _ = moe_forward(x, wr, experts, MoEConfig(k=3, norm_topk=True, mlp="gelu"))
    p = np.exp(x @ wr)
    p /= p.sum(axis=1, keepdims=True)
    from zerollm.nn.mlp import gelu_mlp_forward
    expected = sum(p[:, e:e + 1] * gelu_mlp_forward(x, MLPWeights(experts.w_fc[e], None, experts.w_proj[e], None))[0]
                   for e in range(3))
    np.testing.assert_allclose(y, expected, rtol=1e-12, atol=1e-12)


def test_aux_loss_is_one_when_balanced_and_large_when_collapsed():
    x, wr, experts = _layer(E=4, k=1, N=400)
    _, spread = moe_forward(x, wr * 0.0, experts, MoEConfig(k=1))       # uniform probs: aux = E * sum f / E = 1
    assert spread.aux == pytest.approx(1.0) and spread.z == pytest.approx(np.log(4) ** 2)
    collapsed = np.zeros_like(wr)
    collapsed[:, 2] = 50.0 * np.sign(x.mean(axis=0))                    # expert 2 wins for (almost) everyone
    _, one = moe_forward(np.abs(x) * np.sign(x.mean(axis=0)), collapsed, experts, MoEConfig(k=1))
    assert one.frac[2] == 1.0 and one.aux == pytest.approx(4.0, rel=1e-6)


# ----------------------------------------------------------------------------
# the model

def test_backward_adds_the_aux_and_z_gradients_to_the_router_only():
    """The aux and z losses depend on the router's logits alone: with and without their coefficients,
    the gradients of the experts are equal and those of the router are not."""
    plain_cfg = replace(MOE, aux_loss_coef=0.0, z_loss_coef=0.0)
    with_cfg = replace(MOE, aux_loss_coef=0.5, z_loss_coef=0.1)
    grads = {}
    for name, cfg in (("plain", plain_cfg), ("with", with_cfg)):
        model, x, y = model_and_batch(cfg)
        _, loss = model.forward(x, y)
        grads[name] = {k: v.copy() for k, v in model.backward().items()}
        if name == "with":
            stats = model.moe_stats
            assert model.moe_loss() == pytest.approx(0.5 * stats["aux_loss"] + 0.1 * stats["z_loss"])
            assert stats["expert_frac"].shape == (2, 4) and np.allclose(stats["expert_frac"].sum(axis=1), 1.0)
    last = "h.1.mlp."                                           # the last block: nothing above it is routed
    experts = last + "experts.c_fc.weight"
    np.testing.assert_array_equal(grads["plain"][experts], grads["with"][experts])
    assert not np.allclose(grads["plain"][last + "router.weight"], grads["with"][last + "router.weight"])


def test_hybrid_stack_has_dense_and_moe_blocks():
    cfg = replace(MOE, n_layer=4, moe_every=2, n_shared_expert=1)
    names = param_shapes(cfg)
    assert cfg.moe_layers == [1, 3]
    assert "h.0.mlp.c_fc.weight" in names and "h.1.mlp.c_fc.weight" not in names
    assert names["h.1.mlp.experts.c_fc.weight"] == (4, 16, 24) and names["h.3.mlp.router.weight"] == (16, 4)
    assert names["h.3.mlp.shared.c_proj.weight"] == (12, 16)
    model = GPT(cfg)
    assert model.num_params() - model.num_params(active=True) == 2 * 2 * (16 * 24 + 12 * 16)


def test_thread_shards_average_the_routing_statistics():
    model, x, y = model_and_batch(replace(MOE, capacity_factor=1.0), B=4)
    from zerollm.training.lm import lm_shard_loss
    halves = [lm_shard_loss(model, {"x": x[rows], "y": y[rows]}) for rows in (slice(0, 2), slice(2, 4))]
    halves = [r._replace(grads={k: v.copy() for k, v in r.grads.items()}) for r in halves]
    sharded = ShardedModel(model, 2)
    both = sharded.run(lm_shard_loss, {"x": x, "y": y})
    sharded.close()
    assert both.loss == pytest.approx(np.mean([r.loss for r in halves]), rel=1e-12)
    np.testing.assert_allclose(both.metrics["expert_frac"], np.mean([r.metrics["expert_frac"] for r in halves], axis=0))
    assert both.loss == pytest.approx(both.metrics["ce_loss"] + MOE.aux_loss_coef * both.metrics["aux_loss"]
                                      + MOE.z_loss_coef * both.metrics["z_loss"])


def test_kv_cache_generation_equals_recomputation():
    """Capacity is a training device: in generation each new token is routed alone, and the result
    must equal recomputing the whole sequence, capacity factor or not."""
    model, x, _ = model_and_batch(replace(MOE, capacity_factor=0.5, dtype="float32"), B=1)
    model.eval()
    prompt = x[:, :3]
    cached = [int(t[0]) for t in generate(model, prompt, 5, Sampling(temperature=0))]
    ids = list(prompt[0])
    for _ in range(5):
        ids.append(int(np.argmax(model.forward(np.array([ids]))[0][0, -1])))
    assert cached == ids[3:]


def test_expert_biases_are_not_decayed():
    model, _, _ = model_and_batch(replace(MOE, bias=True))
    opt = AdamW(model.params, weight_decay=0.1)
    assert "h.0.mlp.experts.c_fc.weight" in opt.decay_names and "h.0.mlp.router.weight" in opt.decay_names
    assert "h.0.mlp.experts.c_fc.bias" not in opt.decay_names and model.params["h.0.mlp.experts.c_fc.bias"].ndim == 2


def test_expert_load_plot_skips_damaged_records(tmp_path):
    from zerollm.training.runlog import plot_expert_load
    log = tmp_path / "log.jsonl"
    good = [json.dumps({"step": i, "expert_frac": [[0.5, 0.5], [0.9, 0.1]]}) for i in range(5)]
    bad = ['{"step": 5, "expert_frac": [[0.5]]}', '{"step": "6", "expert_frac": [[1, 0], [0, 1]]}',
           '{"step": 7, "expert_frac": "junk"}', '{"step": 8, "expert_frac": [[null, 1], [0, 1]]}', '{"step": 9, "exp']
    log.write_text("\n".join(good[:3] + bad + good[3:]) + "\n")
    assert plot_expert_load(log, tmp_path / "load.png", [1, 3])
    assert (tmp_path / "load.png").read_bytes()[:4] == b"\x89PNG"
    log.write_text('{"step": 0, "loss": 1.0}\n')
    assert not plot_expert_load(log, tmp_path / "none.png") and not (tmp_path / "none.png").exists()


def test_array_metrics_reduce_and_log_as_json(tmp_path):
    a = ShardResult(1.0, {"w": np.ones(2)}, 1.0, {"aux_loss": 1.0, "expert_frac": np.array([[0.5, 0.5]])})
    b = ShardResult(2.0, {"w": np.ones(2)}, 3.0, {"aux_loss": 2.0, "expert_frac": np.array([[1.0, 0.0]])})
    out = reduce_shards([a, b])
    assert out.metrics["aux_loss"] == pytest.approx(1.75) and isinstance(out.metrics["aux_loss"], float)
    np.testing.assert_allclose(out.metrics["expert_frac"], [[0.875, 0.125]])
    log = JsonlLog(tmp_path / "log.jsonl")
    log.write(step=0, **out.metrics)
    log.close()
    line = (tmp_path / "log.jsonl").read_text()
    assert json.loads(line)["expert_frac"] == [[0.875, 0.125]] and read_log(tmp_path / "log.jsonl")[0]["step"] == 0


# ----------------------------------------------------------------------------
# bad configurations

BASE = dict(vocab_size=10, block_size=8, n_layer=2, n_head=2, n_embd=8)


@pytest.mark.parametrize("kwargs, fragment", [
    (dict(n_expert=1), "n_expert=1 is a dense MLP"),
    (dict(n_expert=4, n_expert_active=5), "n_expert_active=5 must be between 1 and n_expert=4"),
    (dict(n_expert=4, n_expert_active=0), "n_expert_active must be a whole number from 1"),
    (dict(n_expert=4, moe_every=3), "moe_every=3 must be between 1 and n_layer=2"),
    (dict(n_expert=4, aux_loss_coef=-0.01), "aux_loss_coef must be a number from 0"),
    (dict(n_expert=4, z_loss_coef=-1.0), "z_loss_coef must be a number from 0"),
    (dict(n_expert=4, capacity_factor=-0.5), "capacity_factor must be a number from 0"),
    (dict(n_expert=4, capacity_factor=float("inf")), "capacity_factor"),
    (dict(n_expert=-2), "n_expert must be a whole number from 0"),
    (dict(n_expert=4, n_expert_active=2.0), "n_expert_active must be a whole number"),
    (dict(n_shared_expert=1), "n_shared_expert=1 needs routed experts"),
    (dict(n_expert=4, moe_norm_topk=1), "moe_norm_topk must be True or False"),
])
def test_bad_moe_configs_raise_clear_errors(kwargs, fragment):
    with pytest.raises(ZeroLLMError, match=fragment):
        GPTConfig(**BASE, **kwargs)


def test_the_router_walkthrough_in_the_docs_is_what_the_script_prints():
    """docs/moe.md shows scripts/moe_router_example.py's output verbatim, in both languages."""
    import subprocess
    import sys
    from pathlib import Path
    root = Path(__file__).resolve().parents[1]
    out = subprocess.run([sys.executable, str(root / "scripts" / "moe_router_example.py")], capture_output=True,
                         text=True, check=True).stdout
    assert "token 3 (choice 1), token 2 (choice 2), token 3 (choice 2)" in out and "aux = E * sum(f * P)" in out
    assert (root / "docs" / "moe.md").read_text(encoding="utf-8").count(out.rstrip("\n")) == 2
