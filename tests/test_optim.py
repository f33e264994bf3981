"""zerollm.training.optim: AdamW and clipping against torch, the schedule's key points, exact resume."""

import math
import tracemalloc

import numpy as np
import pytest
import torch

from zerollm.io.errors import ZeroLLMError
from zerollm.training.optim import AdamW, clip_grad_norm, lr_at

SHAPES = {"wte.weight": (11, 8), "h.0.attn.c_attn.weight": (8, 24), "h.0.attn.c_attn.bias": (24,),
          "h.0.ln_1.weight": (8,), "lm_scale": ()}
TOL = {np.float64: 1e-12, np.float32: 1e-6}


def make_params(dtype, seed=0):
    rng = np.random.default_rng(seed)
    return {name: np.array(rng.standard_normal(shape), dtype) for name, shape in SHAPES.items()}


def make_grads(params, rng, scale=1.0):
    return {n: np.array(rng.standard_normal(p.shape) * scale, p.dtype) for n, p in params.items()}


def max_rel(a, b):
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    return float(np.max(np.abs(a - b)) / max(np.max(np.abs(b)), 1e-30))


# ----------------------------------------------------------------------------
# AdamW vs torch.optim.AdamW

@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("betas, eps, wd", [((0.9, 0.999), 1e-8, 0.1), ((0.9, 0.95), 1e-6, 0.5),
                                            ((0.0, 0.99), 1e-8, 0.0)])
def test_adamw_matches_torch_over_20_steps(dtype, betas, eps, wd):
    params = make_params(dtype)
    opt = AdamW(params, lr=3e-3, betas=betas, eps=eps, weight_decay=wd)
    assert opt.decay_names == {"wte.weight", "h.0.attn.c_attn.weight"}        # ndim >= 2 only
    tp = {n: torch.tensor(p, requires_grad=True) for n, p in params.items()}   # copies
    groups = [{"params": [tp[n] for n in SHAPES if n in opt.decay_names], "weight_decay": wd},
              {"params": [tp[n] for n in SHAPES if n not in opt.decay_names], "weight_decay": 0.0}]
    topt = torch.optim.AdamW(groups, lr=3e-3, betas=betas, eps=eps, foreach=False)
    rng = np.random.default_rng(1)
    for step in range(20):
        lr = lr_at(step, lr=3e-3, min_lr=3e-4, warmup_iters=5, decay_iters=20)
        grads = make_grads(params, rng, scale=10.0 ** rng.integers(-3, 2))
        for n, t in tp.items():
            t.grad = torch.from_numpy(grads[n].copy())
        for group in topt.param_groups:
            group["lr"] = lr
        topt.step()
        opt.step(grads, lr=lr)
    for n, t in tp.items():
        assert params[n].dtype == dtype
        assert max_rel(params[n], t.detach()) <= TOL[dtype], n
        assert max_rel(opt.m[n], topt.state[t]["exp_avg"]) <= TOL[dtype], n
        assert max_rel(opt.v[n], topt.state[t]["exp_avg_sq"]) <= TOL[dtype], n
    assert opt.step_count == 20


def test_step_updates_the_same_arrays_in_place():
    params = make_params(np.float32)
    model_view = params["wte.weight"][:2]          # what a model holding the array would see
    ids = {n: id(p) for n, p in params.items()}
    before = model_view.copy()
    AdamW(params, lr=0.1).step(make_grads(params, np.random.default_rng(0)))
    assert {n: id(p) for n, p in params.items()} == ids
    assert not np.array_equal(model_view, before)


def test_step_allocates_no_parameter_sized_temporaries():
    params = {"big.weight": np.zeros((1000, 1000)), "big.bias": np.zeros(1000)}   # 8 MB matrix
    grads = make_grads(params, np.random.default_rng(0))
    opt = AdamW(params, weight_decay=0.1)
    opt.step(grads)
    tracemalloc.start()
    opt.step(grads)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert peak < 100_000, peak        # bytes; one temporary of the matrix would be 8,000,000


def test_weight_decay_only_on_chosen_names():
    # with zero gradients m = v = 0, so the update is exactly the decay factor (1 - lr*wd)
    params = make_params(np.float64)
    before = {n: p.copy() for n, p in params.items()}
    zeros = {n: np.zeros_like(p) for n, p in params.items()}
    AdamW(params, lr=0.1, weight_decay=0.5, decay={"h.0.ln_1.weight"}).step(zeros)
    for n in SHAPES:
        factor = 0.95 if n == "h.0.ln_1.weight" else 1.0
        np.testing.assert_array_equal(params[n], before[n] * factor, err_msg=n)


def test_decay_predicate():
    params = make_params(np.float32)
    opt = AdamW(params, decay=lambda name, p: name.startswith("wte"))
    assert opt.decay_names == {"wte.weight"}


# ----------------------------------------------------------------------------
# state_dict: resuming gives the very same numbers

def test_state_dict_round_trip_continues_bit_identically():
    rng = np.random.default_rng(3)
    params = make_params(np.float32)
    grads = [make_grads(params, rng) for _ in range(10)]
    opt = AdamW(params, lr=1e-2, betas=(0.8, 0.95), weight_decay=0.1)
    for g in grads[:5]:
        opt.step(g)
    saved = {k: ({n: a.copy() for n, a in v.items()} if k in "mv" else v)
             for k, v in opt.state_dict().items()}
    resumed_params = {n: p.copy() for n, p in params.items()}
    resumed = AdamW(resumed_params)                  # default hyperparams: all come from the state
    resumed.load_state_dict(saved)
    assert resumed.lr == 1e-2 and resumed.betas == (0.8, 0.95) and resumed.step_count == 5
    for g in grads[5:]:
        opt.step(g)
        resumed.step(g)
    for n in SHAPES:
        np.testing.assert_array_equal(resumed_params[n], params[n], err_msg=n)
    assert saved["m"]["wte.weight"] is not resumed.m["wte.weight"]   # copied in, not aliased


def bad_state(edit):
    params = make_params(np.float32)
    sd = AdamW(params).state_dict()
    edit(sd)
    return params, sd


@pytest.mark.parametrize("edit, words", [
    (lambda sd: sd.pop("v"), "lacks"),
    (lambda sd: sd["m"].pop("wte.weight"), "missing"),
    (lambda sd: sd["v"].update(extra=np.zeros(2)), "unexpected"),
    (lambda sd: sd["m"].update({"wte.weight": np.zeros((8, 11))}), "shape"),
    (lambda sd: sd.update(step=-1), "step"),
    (lambda sd: sd.update(decay=["nope"]), "unknown parameters"),
    (lambda sd: sd.update(betas=[0.9]), "betas"),
])
def test_load_state_dict_errors(edit, words):
    params, sd = bad_state(edit)
    with pytest.raises(ZeroLLMError, match=words):
        AdamW(params).load_state_dict(sd)


@pytest.mark.parametrize("grads_edit, words", [
    (lambda g: g.pop("lm_scale"), "missing"),
    (lambda g: g.update({"h.0.ln_1.weight": np.zeros(9)}), "shape"),
])
def test_step_rejects_mismatched_grads(grads_edit, words):
    params = make_params(np.float32)
    grads = make_grads(params, np.random.default_rng(0))
    grads_edit(grads)
    with pytest.raises(ZeroLLMError, match=words):
        AdamW(params).step(grads)


@pytest.mark.parametrize("kwargs, words", [
    ({"lr": -1.0}, "lr"), ({"betas": (0.9, 1.0)}, "betas"), ({"eps": "x"}, "eps"),
    ({"decay": {"nope"}}, "not parameters"),
])
def test_bad_hyperparams(kwargs, words):
    with pytest.raises(ZeroLLMError, match=words):
        AdamW(make_params(np.float32), **kwargs)


@pytest.mark.parametrize("params, words", [
    ({}, "non-empty"), ({"a": np.zeros(3, np.int64)}, "float"), ({"a": [1.0]}, "float"),
])
def test_bad_params(params, words):
    with pytest.raises(ZeroLLMError, match=words):
        AdamW(params)


# ----------------------------------------------------------------------------
# clip_grad_norm vs torch.nn.utils.clip_grad_norm_

@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("max_norm", [0.1, 1.0, 1e6])
def test_clip_matches_torch(dtype, max_norm):
    params = make_params(dtype)
    grads = make_grads(params, np.random.default_rng(5), scale=0.3)
    tgrads = {n: torch.from_numpy(g.copy()) for n, g in grads.items()}
    tparams = [torch.zeros_like(tgrads[n]) for n in SHAPES]
    for p, n in zip(tparams, SHAPES):
        p.grad = tgrads[n]
    torch_norm = float(torch.nn.utils.clip_grad_norm_(tparams, max_norm))
    before = {n: g.copy() for n, g in grads.items()}
    norm = clip_grad_norm(grads, max_norm)
    assert norm == pytest.approx(torch_norm, rel=TOL[dtype])
    for n in SHAPES:
        assert grads[n].dtype == dtype
        assert max_rel(grads[n], tgrads[n]) <= TOL[dtype], n
        if max_norm == 1e6:
            np.testing.assert_array_equal(grads[n], before[n])     # no clipping, untouched
    new_norm = math.sqrt(sum(float(np.sum(g.astype(np.float64) ** 2)) for g in grads.values()))
    assert new_norm == pytest.approx(min(norm, max_norm), rel=1e-5)


def test_clip_non_finite_norm_leaves_grads_alone():
    grads = {"a": np.array([np.inf, 1.0]), "b": np.array([2.0])}
    assert clip_grad_norm(grads, 1.0) == np.inf
    assert grads["b"][0] == 2.0
    with pytest.raises(ZeroLLMError, match="max_norm"):
        clip_grad_norm(grads, 0.0)


# ----------------------------------------------------------------------------
# learning-rate schedule

SCHED = dict(lr=6e-4, min_lr=6e-5, warmup_iters=100, decay_iters=1000)


@pytest.mark.parametrize("step, expected", [
    (0, 6e-4 * 1 / 101),            # first step: small but not 0
    (50, 6e-4 * 51 / 101),
    (99, 6e-4 * 100 / 101),         # last warmup step
    (100, 6e-4),                    # warmup end: the peak
    (550, (6e-4 + 6e-5) / 2),       # middle of the cosine: halfway between lr and min_lr
    (325, 6e-5 + (6e-4 - 6e-5) * (1 + math.cos(math.pi / 4)) / 2),
    (1000, 6e-5),                   # end of decay
    (5000, 6e-5),                   # after: constant min_lr
])
def test_schedule_key_points(step, expected):
    assert lr_at(step, **SCHED) == pytest.approx(expected, rel=1e-12)


def test_schedule_shape():
    lrs = [lr_at(s, **SCHED) for s in range(1200)]
    assert all(a < b for a, b in zip(lrs[:100], lrs[1:101]))          # rises during warmup
    assert all(a >= b for a, b in zip(lrs[100:], lrs[101:]))         # never rises after
    assert lr_at(0, lr=1.0, min_lr=0.0, warmup_iters=0, decay_iters=10) == 1.0   # no warmup
    assert lr_at(7, lr=1.0, min_lr=0.5, warmup_iters=5, decay_iters=5) == 0.5    # no decay phase


@pytest.mark.parametrize("step, kwargs, words", [
    (-1, SCHED, "step"),
    (1.5, SCHED, "step"),
    (0, {**SCHED, "min_lr": 1e-3}, "min_lr"),
    (0, {**SCHED, "decay_iters": 50}, "warmup_iters"),
])
def test_schedule_errors(step, kwargs, words):
    with pytest.raises(ZeroLLMError, match=words):
        lr_at(step, **kwargs)
