"""Finite-difference checks of every hand-written backward pass.

For an op y = f(x1, x2, ...) we pick a random upstream gradient dy and look at the scalar
L = sum(y * dy). Its exact derivative w.r.t. each input is what ``op_backward(dy, cache)`` returns;
the central difference (L(x + eps e_i) - L(x - eps e_i)) / (2 eps) estimates the same number with
an error of order eps^2. In float64 the two agree to ~1e-9 relative when the backward is right,
and disagree wildly when a single term is missing.

``CASES`` is the registry of layers: ``zerollm gradcheck`` runs all of them, and the test suite
runs the same cases against PyTorch autograd too.
"""

from dataclasses import dataclass
from typing import Callable

import numpy as np

from zerollm.nn.self_attention import softmax, softmax_backward
from zerollm.model.config import GPTConfig
from zerollm.model.heads import scalar_head_backward, scalar_head_forward
from zerollm.model.gpt import param_shapes
from zerollm.nn.activation import (gelu_erf_backward, gelu_erf_forward, gelu_tanh_backward,
                                   gelu_tanh_forward, silu_backward, silu_forward)
from zerollm.nn.attention import (AttentionConfig, AttentionWeights, ForwardPass, mha_backward, mha_forward,
                                  sdpa_backward, sdpa_forward)
from zerollm.nn.block import block_backward, block_forward
from zerollm.nn.distill import distill_backward, distill_forward
from zerollm.nn.dropout import dropout_backward, dropout_forward
from zerollm.nn.embedding import embedding_backward, embedding_forward
from zerollm.nn.flash import flash_sdpa_backward, flash_sdpa_forward
from zerollm.nn.linear import linear_backward, linear_forward
from zerollm.nn.lora import Adapted, adapted_backward, adapted_forward
from zerollm.nn.logprobs import token_logprobs_backward, token_logprobs_forward
from zerollm.nn.loss import cross_entropy_backward, cross_entropy_forward
from zerollm.nn.mlp import MLPWeights, gelu_mlp_backward, gelu_mlp_forward, swiglu_backward, swiglu_forward
from zerollm.nn.moe import MoEConfig, moe_backward, moe_forward
from zerollm.nn.norm import layernorm_backward, layernorm_forward, rmsnorm_backward, rmsnorm_forward
from zerollm.nn.position import rope_backward, rope_forward, rope_tables


@dataclass
class OpCase:
    """One op on concrete inputs. ``backward`` returns the gradients of the inputs listed in ``wrt``."""
    name: str
    inputs: list
    wrt: tuple
    forward: Callable
    backward: Callable
    kwargs: dict        # keyword arguments of forward
    info: dict          # what a reference implementation needs to rebuild the op (config, names)


# ----------------------------------------------------------------------------
# the registry: name -> builder(rng, dtype) -> OpCase.  Sizes are small and deliberately odd.

B, T, C, V = 2, 5, 12, 7
RTOL = 1e-6   # a correct float64 backward agrees to ~1e-8; a wrong one is off by far more


def _n(rng, dtype, *shape, scale=1.0):
    return (rng.standard_normal(shape) * scale).astype(dtype)


def _case(name, inputs, wrt, forward, backward, info=None, **kwargs):
    return OpCase(name, inputs, wrt, forward, backward, kwargs, info or {})


def _linear(rng, dt, bias=True):
    x, w = _n(rng, dt, B, T, C), _n(rng, dt, C, 9, scale=0.3)
    b = _n(rng, dt, 9) if bias else None
    if bias:
        return _case("linear", [x, w, b], (0, 1, 2), linear_forward, linear_backward)
    return _case("linear (no bias)", [x, w], (0, 1), linear_forward, lambda d, c: linear_backward(d, c)[:2])


def _lora(cols, dropout):
    """A frozen linear (C -> 9) with LoRA adapters of rank 3 on the given column ranges; the gradients are
    those of x and of each adapter's A and B (the base gets none). Dropout masks come from a fixed seed,
    so every forward of the finite differences draws the same ones."""
    def build(rng, dt):
        r, scale = 3, 2.0 / 3
        ins = [_n(rng, dt, B, T, C), _n(rng, dt, C, 9, scale=0.3), _n(rng, dt, 9, scale=0.1)]
        for lo, hi in cols:
            ins += [_n(rng, dt, C, r, scale=0.3), _n(rng, dt, r, hi - lo, scale=0.3)]

        def fwd(x, w, b, *ab):
            adapted = Adapted(tuple(f"a{j}" for j in range(len(cols))), tuple(slice(*c) for c in cols),
                              ab[0::2], ab[1::2], scale, dropout)
            return adapted_forward(x, w, b, adapted, np.random.default_rng(7), training=True)

        def bwd(dy, cache):
            grads = {}
            dx, dw, db = adapted_backward(dy, cache, grads)
            assert dw is None and db is None                     # the base is frozen
            return (dx, *[grads[f"a{j}.lora_{m}"] for j in range(len(cols)) for m in "AB"])
        wrt = (0, *range(3, 3 + 2 * len(cols)))
        name = f"lora (rank {r}, columns {cols}" + (f", dropout {dropout})" if dropout else ")")
        return _case(name, ins, wrt, fwd, bwd, info=dict(cols=cols, scale=scale, dropout=dropout))
    return build


def _embedding(rng, dt):
    idx = rng.integers(0, V, (B, T))
    idx[0, :2] = 3                                   # a repeated id: its gradients must add up
    return _case("embedding", [idx, _n(rng, dt, V, C)], (1,), embedding_forward,
                 lambda d, c: (embedding_backward(d, c),))


def _rope(rng, dt):
    cos, sin = rope_tables(T, 6, theta=100.0, dtype=dt)
    return _case("rope", [_n(rng, dt, B, 3, T, 6), cos, sin], (0,), rope_forward,
                 lambda d, c: (rope_backward(d, c),))


def _layernorm(rng, dt, bias=True):
    x, w = _n(rng, dt, B, T, C, scale=2.0) + 1.0, _n(rng, dt, C) + 1.0
    if bias:
        return _case("layernorm", [x, w, _n(rng, dt, C)], (0, 1, 2), layernorm_forward, layernorm_backward)
    return _case("layernorm (no bias)", [x, w], (0, 1), layernorm_forward,
                 lambda d, c: layernorm_backward(d, c)[:2])


def _rmsnorm(rng, dt):
    return _case("rmsnorm", [_n(rng, dt, B, T, C, scale=2.0), _n(rng, dt, C) + 1.0], (0, 1),
                 rmsnorm_forward, rmsnorm_backward)


def _elementwise(name, fwd, bwd):
    def build(rng, dt):
        return _case(name, [_n(rng, dt, B, T, C, scale=2.0)], (0,), fwd, lambda d, c: (bwd(d, c),))
    return build


def _softmax(rng, dt):
    def fwd(x):
        y = softmax(x)
        return y, y
    return _case("softmax", [_n(rng, dt, B, T, C, scale=3.0)], (0,), fwd, lambda d, y: (softmax_backward(d, y),))


def _mlp(kind):
    def build(rng, dt):
        H = 10
        width = 2 * H if kind == "swiglu" else H
        ins = [_n(rng, dt, B, T, C), _n(rng, dt, C, width, scale=0.3), _n(rng, dt, width, scale=0.1),
               _n(rng, dt, H, C, scale=0.3), _n(rng, dt, C, scale=0.1)]
        if kind == "swiglu":
            return _case("swiglu mlp", ins, (0, 1, 2, 3, 4), lambda x, *w: swiglu_forward(x, MLPWeights(*w)),
                         swiglu_backward)
        return _case("gelu mlp", ins, (0, 1, 2, 3, 4), lambda x, *w: gelu_mlp_forward(x, MLPWeights(*w), gelu="tanh"),
                     gelu_mlp_backward)
    return build


def _sdpa(causal, padded=False):
    def build(rng, dt):
        q, k, v = _n(rng, dt, B, 2, 3, T, 4), _n(rng, dt, B, 2, 1, T, 4), _n(rng, dt, B, 2, 1, T, 4)
        mask = None
        if padded:
            mask = np.zeros((B, 1, 1, 1, T), dtype=bool)
            mask[0, ..., -2:] = True                 # the last two keys of sequence 0 are padding
        name = "attention (" + ("causal" if causal else "bidirectional") + (", padding" if padded else "") + ")"
        return _case(name, [q, k, v], (0, 1, 2), sdpa_forward, sdpa_backward, causal=causal, mask=mask)
    return build


def _flash(nkv, g, Tq, Tk, tile, causal=True, padded=False):
    """Tiled attention on T=7-ish sizes with tiny tiles: several tiles per row, a partial last tile,
    skipped tiles above the causal diagonal; Tk > Tq puts the queries last (KV-cache offset)."""
    def build(rng, dt):
        q = _n(rng, dt, B, nkv, g, Tq, 4)
        k, v = _n(rng, dt, B, nkv, 1, Tk, 4), _n(rng, dt, B, nkv, 1, Tk, 4)
        mask = None
        if padded:
            mask = np.zeros((B, 1, 1, 1, Tk), dtype=bool)
            mask[0, ..., -2:] = True                 # the last two keys of sequence 0 are padding
        pad = ", padding" if padded else ""
        name = f"flash attention (nkv={nkv}, g={g}, T={Tq}, Tk={Tk}, tile={tile}{pad})"
        return _case(name, [q, k, v], (0, 1, 2), flash_sdpa_forward, flash_sdpa_backward,
                     causal=causal, mask=mask, tile=tile)
    return build


def _mha(n_head, n_kv_head, rope=False, qk_norm=False, head_dim=None):
    """qk_norm: QK-norm's gains are inputs 5 and 6 (Qwen3); head_dim: a head size other than C // nh."""
    def build(rng, dt):
        hs = head_dim or C // n_head
        width = (n_head + 2 * n_kv_head) * hs
        ins = [_n(rng, dt, B, T, C), _n(rng, dt, C, width, scale=0.4), _n(rng, dt, width, scale=0.1),
               _n(rng, dt, n_head * hs, C, scale=0.3), _n(rng, dt, C, scale=0.1)]
        if qk_norm:
            ins += [1.0 + _n(rng, dt, hs, scale=0.3), 1.0 + _n(rng, dt, hs, scale=0.3)]
        kw = dict(n_head=n_head, n_kv_head=n_kv_head, causal=True)
        if rope:
            kw["rope"] = rope_tables(T, hs, dtype=dt)

        def fwd(x, *weights, n_head, n_kv_head, causal, rope=None):
            return mha_forward(x, AttentionWeights(*weights), AttentionConfig(n_head, n_kv_head, causal),
                               ForwardPass(rope=rope))
        kind = "multi-head" if n_kv_head == n_head else "multi-query" if n_kv_head == 1 else "grouped-query"
        extra = (", rope" if rope else "") + (", qk-norm" if qk_norm else "") + (f", hs={hs}" if head_dim else "")
        name = f"{kind} attention (nh={n_head}, nkv={n_kv_head}{extra})"
        wrt = tuple(range(len(ins)))
        return _case(name, ins, wrt, fwd, lambda d, c: mha_backward(d, c)[:len(wrt)], **kw)
    return build


def _dropout(rng, dt):
    # a fresh generator with a fixed seed on every call: the same mask for every perturbed forward
    fwd = lambda x: dropout_forward(x, 0.3, np.random.default_rng(0), training=True)
    return _case("dropout (p=0.3)", [_n(rng, dt, B, T, C)], (0,), fwd, lambda d, c: (dropout_backward(d, c),))


def _cross_entropy(rng, dt):
    targets = rng.integers(0, V, (B, T))
    targets[1, 0] = -100                             # ignore_index: contributes nothing
    def fwd(logits, t):
        loss, cache = cross_entropy_forward(logits, t)
        return np.asarray(loss, dtype=logits.dtype), cache
    return _case("cross-entropy", [_n(rng, dt, B, T, V, scale=2.0), targets], (0,), fwd,
                 lambda d, c: (cross_entropy_backward(c, float(d)),))


def _distill(divergence, beta=0.5, tau=1.0):
    """The student's logits against a teacher's (input 1, no gradient), with a ragged mask and a temperature."""
    def build(rng, dt):
        mask = np.ones((B, T), dtype=bool)
        mask[1, -2:] = False

        def fwd(student, teacher):
            loss, cache = distill_forward(student, teacher, mask, divergence, beta, tau)
            return np.asarray(loss, dtype=student.dtype), cache
        name = {"forward_kl": "distill forward KL", "reverse_kl": "distill reverse KL"}.get(divergence,
                                                                                             f"distill JSD({beta})")
        return _case(name, [_n(rng, dt, B, T, V, scale=2.0), _n(rng, dt, B, T, V, scale=2.0)], (0,), fwd,
                     lambda d, c: (distill_backward(c, float(d)),),
                     info=dict(mask=mask, divergence=divergence, beta=beta, tau=tau))
    return build


def _token_logprobs(entropy):
    """log p of chosen tokens (and, stacked after it, the entropy), with a ragged mask."""
    def build(rng, dt):
        targets = rng.integers(0, V, (B, T))
        mask = np.ones((B, T), dtype=bool)
        mask[0, -2:] = False                          # a shorter sequence: its tail counts for nothing
        mask[:, 0] = False

        def fwd(logits):
            logp, H, cache = token_logprobs_forward(logits, targets, mask, entropy=entropy)
            return (np.stack([logp, H]) if entropy else logp), cache

        def bwd(d, cache):
            if entropy:
                return (token_logprobs_backward(d[0], cache, dentropy=d[1]),)
            return (token_logprobs_backward(d, cache),)
        name = "token log-probs" + (" + entropy" if entropy else "")
        return _case(name, [_n(rng, dt, B, T, V, scale=2.0)], (0,), fwd, bwd, info=dict(targets=targets, mask=mask))
    return build


def _scalar_head(last):
    """A reward head read at each row's last real token, or a value head read everywhere."""
    def build(rng, dt):
        index = np.array([T - 1, 2]) if last else None

        def fwd(h, w, b):
            return scalar_head_forward(h, w, b, index)
        name = "reward head (last token)" if last else "value head (every position)"
        return _case(name, [_n(rng, dt, B, T, C), _n(rng, dt, C, 1, scale=0.3), _n(rng, dt, 1)], (0, 1, 2),
                     fwd, scalar_head_backward, info=dict(index=index))
    return build


def _block(**cfg_kw):
    def build(rng, dt):
        cfg = GPTConfig(vocab_size=V, block_size=T, n_layer=1, n_embd=C, **{"n_head": 3, **cfg_kw})
        names = [n for n in param_shapes(cfg) if n.startswith("h.0.")]
        shapes = param_shapes(cfg)
        values = [_n(rng, dt, *shapes[n], scale=0.3) + (1.0 if len(shapes[n]) == 1 and "ln" in n else 0.0)
                  + (1.0 if n.endswith("_norm.weight") else 0.0) for n in names]
        rope = rope_tables(T, cfg.head_size, cfg.rope_theta, dtype=dt) if cfg.pos == "rope" else None

        def fwd(x, *ws):
            return block_forward(x, dict(zip(names, ws)), "h.0.", cfg, ForwardPass(rope=rope))

        def bwd(dy, cache):
            grads = {}
            dx = block_backward(dy, cache, "h.0.", cfg, grads)
            return (dx, *(grads[n] for n in names))
        qwen = ", qkv bias" if cfg.qkv_bias else ", qk-norm" if cfg.qk_norm else ""
        label = f"block ({cfg.norm}, {cfg.mlp}, {cfg.pos}{', gqa' if cfg.n_kv_head != cfg.n_head else ''}{qwen})"
        return _case(label, [_n(rng, dt, B, T, C), *values], tuple(range(1 + len(names))), fwd, bwd,
                     info=dict(config=cfg, names=names))
    return build


def _router_inputs(rng, dt, E, k, capacity_factor, margin=0.05):
    """x (B, T, C) and a router (C, E) whose logits have no near-ties: every gap between a token's
    sorted logits is >= margin, so a finite-difference step (1e-6) never changes which experts win,
    in which order, or which pairs are over capacity. Drawn again until that holds (and, with a
    capacity, until some pair is dropped and every expert still has one kept)."""
    from zerollm.nn.moe import capacity_of, dispatch
    for _ in range(1000):
        x, w = _n(rng, dt, B, T, C), _n(rng, dt, C, E, scale=0.8)
        logits = np.sort(x.reshape(-1, C).astype(np.float64) @ w, axis=1)
        if np.diff(logits, axis=1).min() < margin:
            continue
        idx = np.argsort(-(x.reshape(-1, C) @ w), axis=1, kind="stable")[:, :k]
        order, bounds, _ = dispatch(idx, E, capacity_of(capacity_factor, B * T, k, E))
        if np.diff(bounds).min() > 0 and (capacity_factor == 0 or len(order) < idx.size):
            return x, w
    raise AssertionError("no router inputs without near-ties found")


def _moe(k, norm_topk=False, capacity_factor=0.0, shared=False, mlp="gelu", bias=True, E=4):
    """The MoE layer, with its aux and z losses stacked after the output (so both are checked)."""
    def build(rng, dt):
        H = 6
        F = 2 * H if mlp == "swiglu" else H
        x, w_router = _router_inputs(rng, dt, E, k, capacity_factor)
        ins = [x, w_router, _n(rng, dt, E, C, F, scale=0.3), _n(rng, dt, E, F, scale=0.1) if bias else None,
               _n(rng, dt, E, H, C, scale=0.3), _n(rng, dt, E, C, scale=0.1) if bias else None]
        if shared:
            ins += [_n(rng, dt, C, 2 * F, scale=0.3), _n(rng, dt, 2 * F, scale=0.1) if bias else None,
                    _n(rng, dt, 2 * H, C, scale=0.3), _n(rng, dt, C, scale=0.1) if bias else None]
        config = MoEConfig(k, norm_topk, capacity_factor, mlp, gelu="tanh")

        def fwd(x, wr, wf, bf, wp, bp, *sh):
            y, cache = moe_forward(x, wr, MLPWeights(wf, bf, wp, bp), config, shared=MLPWeights(*sh) if sh else None)
            return np.concatenate([y.reshape(-1), np.array([cache.aux, cache.z], y.dtype)]), cache

        def bwd(d, cache):
            dx, dwr, (dwf, dbf, dwp, dbp), dsh = moe_backward(d[:-2].reshape(cache.shape), cache, d[-2], d[-1])
            grads = (dx, dwr, dwf, dbf, dwp, dbp) + (dsh if shared else ())
            return tuple(g for g in grads if g is not None)
        wrt = tuple(i for i, a in enumerate(ins) if a is not None)
        parts = [f"top-{k} of {E}", "renormalised" if norm_topk else "raw gates", mlp]
        parts += [f"capacity {capacity_factor:g}"] * (capacity_factor > 0) + ["shared expert"] * shared
        return _case("moe (" + ", ".join(parts) + ") + aux + z", ins, wrt, fwd, bwd, info=config._asdict())
    return build


CASES = {
    "linear": _linear,
    "linear_nobias": lambda r, d: _linear(r, d, bias=False),
    "lora": _lora(((0, 9),), 0.0),
    "lora_columns_dropout": _lora(((0, 4), (4, 9)), 0.25),
    "embedding": _embedding,
    "rope": _rope,
    "layernorm": _layernorm,
    "layernorm_nobias": lambda r, d: _layernorm(r, d, bias=False),
    "rmsnorm": _rmsnorm,
    "gelu_tanh": _elementwise("gelu (tanh)", gelu_tanh_forward, gelu_tanh_backward),
    "gelu_erf": _elementwise("gelu (erf)", gelu_erf_forward, gelu_erf_backward),
    "silu": _elementwise("silu", silu_forward, silu_backward),
    "softmax": _softmax,
    "gelu_mlp": _mlp("gelu"),
    "swiglu": _mlp("swiglu"),
    "sdpa_causal": _sdpa(True),
    "sdpa_bidirectional": _sdpa(False),
    "sdpa_padding": _sdpa(False, padded=True),
    "flash_causal": _flash(2, 3, 7, 7, tile=3),
    "flash_padding": _flash(2, 1, 7, 7, tile=2, padded=True),
    "flash_gqa_kvoffset": _flash(1, 4, 5, 7, tile=2),
    "mha": _mha(3, 3),
    "gqa": _mha(6, 3, rope=True),
    "mqa": _mha(4, 1),
    "mha_qk_norm": _mha(2, 1, rope=True, qk_norm=True, head_dim=4),
    "dropout": _dropout,
    "cross_entropy": _cross_entropy,
    "distill_forward_kl": _distill("forward_kl", tau=2.0),
    "distill_reverse_kl": _distill("reverse_kl"),
    "distill_jsd": _distill("jsd", beta=0.4, tau=0.7),
    "token_logprobs": _token_logprobs(False),
    "token_logprobs_entropy": _token_logprobs(True),
    "reward_head": _scalar_head(True),
    "value_head": _scalar_head(False),
    "moe_top1": _moe(1),
    "moe_top2": _moe(2, bias=False),
    "moe_top2_norm_capacity": _moe(2, norm_topk=True, capacity_factor=1.0, mlp="swiglu", bias=False),
    "moe_top3_capacity_shared": _moe(3, capacity_factor=0.8, shared=True, E=5),
    "block_gpt2": _block(),
    "block_llama": _block(norm="rmsnorm", pos="rope", mlp="swiglu", bias=False, n_head=2, n_kv_head=1),
    "block_qwen2": _block(norm="rmsnorm", pos="rope", mlp="swiglu", bias=False, qkv_bias=True, n_head=2,
                          n_kv_head=1),
    "block_qwen3": _block(norm="rmsnorm", pos="rope", mlp="swiglu", bias=False, qk_norm=True, head_dim=4,
                          n_head=3, n_kv_head=1),
}


# ----------------------------------------------------------------------------
# the check itself

@dataclass
class CheckResult:
    name: str
    max_abs: float      # largest |analytic - numeric| over the checked entries
    max_rel: float      # max_abs divided by the largest |numeric| of that input (scale-free)
    ok: bool


def rel_err(ours, ref):
    """max |ours - ref| over the largest |ref|: the error measure of the parity tests (tests/opcheck.py)
    and of ``zerollm exercise check``, scale-free so one tolerance fits every tensor."""
    ours, ref = np.asarray(ours, dtype=np.float64), np.asarray(ref, dtype=np.float64)
    if ours.size == 0:
        return 0.0
    return float(np.abs(ours - ref).max() / max(np.abs(ref).max(), 1e-30))


def _loss(case, dy):
    out, _ = case.forward(*case.inputs, **case.kwargs)
    return float(np.sum(out * dy))


def check_case(case, eps=1e-6, max_entries=24, rtol=RTOL, seed=0):
    """Compare ``case.backward`` with central differences on up to ``max_entries`` entries per input."""
    rng = np.random.default_rng(seed)
    out, cache = case.forward(*case.inputs, **case.kwargs)
    dy = rng.standard_normal(np.shape(out)).astype(np.asarray(out).dtype)
    analytic = case.backward(dy, cache)
    worst_abs, worst_rel = 0.0, 0.0
    for g, i in zip(analytic, case.wrt):
        x = case.inputs[i]
        flat = x.reshape(-1)             # a view: perturbing it perturbs the input
        picks = rng.choice(flat.size, size=min(max_entries, flat.size), replace=False)
        num = np.empty(len(picks))
        for n, j in enumerate(picks):
            old = flat[j]
            flat[j] = old + eps
            plus = _loss(case, dy)
            flat[j] = old - eps
            minus = _loss(case, dy)
            flat[j] = old
            num[n] = (plus - minus) / (2 * eps)
        err = np.abs(np.asarray(g).reshape(-1)[picks] - num)
        worst_abs = max(worst_abs, float(err.max()))
        worst_rel = max(worst_rel, float(err.max() / max(np.abs(num).max(), 1e-12)))
    return CheckResult(case.name, worst_abs, worst_rel, worst_rel <= rtol)


def run_all(names=None, seed=0):
    """Check every registered layer (or the given names) in float64."""
    results = []
    for key in names or CASES:
        case = CASES[key](np.random.default_rng(seed), np.float64)
        results.append(check_case(case, seed=seed))
    return results
