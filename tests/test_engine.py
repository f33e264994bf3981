"""The fast engine (zerollm.engine.fast) against the NumPy reference, kernel by kernel and for the whole model,
and the engine switch itself (zerollm.engine).

Elementwise kernels without exp (GELU/SiLU backward, AdamW) must be bit-identical to NumPy; the others
must agree to 1e-6 relative to the largest reference value (float32), and to torch through opcheck.
"""

import numpy as np
import pytest

from opcheck import check_op
from zerollm.training import objective, optim
from zerollm.model.config import GPTConfig
from zerollm.engine import ENV, get_engine, set_engine, use_engine
from zerollm.io.errors import ZeroLLMError
from zerollm.engine.fast.jit import exp32, kernel
from zerollm.model.gpt import GPT
from zerollm.nn import activation, attention, norm
from zerollm.training.parallel import ShardedModel

TOL = 1e-6


def rel(ours, ref):
    ours, ref = np.asarray(ours, np.float64), np.asarray(ref, np.float64)
    return float(np.abs(ours - ref).max() / max(np.abs(ref).max(), 1e-30))


def normal(rng, *shape, scale=1.0):
    return np.asarray(rng.standard_normal(shape) * scale, np.float32)


@pytest.fixture(autouse=True)
def fast_engine():
    """Every test here runs with the fast engine selected; the reference is called as fn.reference."""
    with use_engine("fast"):
        yield


# ----------------------------------------------------------------------------
# exp

@kernel
def _exp_all(x, out):
    for i in range(x.size):
        out[i] = exp32(x[i])


def test_exp32_is_within_2_ulp_of_numpy_and_keeps_special_values():
    x = np.concatenate([np.linspace(-87, 88, 200_001, dtype=np.float32),
                        np.array([0.0, -0.0, 1e-30, -1e-30], np.float32)])
    out = np.empty_like(x)
    _exp_all(x, out)
    ref = np.exp(x.astype(np.float64))
    assert np.max(np.abs(out - ref) / ref) < 2.5e-7
    special = np.array([-np.inf, -200.0, np.inf, 200.0, np.nan], np.float32)
    out = np.empty_like(special)
    _exp_all(special, out)
    assert out[0] == 0 and out[1] == 0 and out[2] == np.inf and out[3] == np.inf and np.isnan(out[4])


def test_exp32_at_the_ends_of_float32_rounds_like_the_exact_exp():
    """Up to the largest float32 (exp(88.72) = 3.4e38) the result is finite, then inf; below the
    smallest normal (exp(-87.34)) it is the subnormal nearest the exact exp, within one step of
    the smallest subnormal (1.4e-45), and 0 where the exact exp is below half that step."""
    x = np.linspace(-110, 90, 400_001, dtype=np.float32)
    out = np.empty_like(x)
    _exp_all(x, out)
    exact = np.exp(x.astype(np.float64))
    with np.errstate(over="ignore"):
        nearest = exact.astype(np.float32)                 # the correctly rounded float32 of the exact exp
    normal = np.isfinite(nearest) & (nearest >= np.finfo(np.float32).tiny)
    assert np.max(np.abs(out[normal] - exact[normal]) / exact[normal]) < 2.5e-7
    assert np.array_equal(np.isinf(out), np.isinf(nearest))           # inf exactly where float32 overflows
    small = ~normal & np.isfinite(nearest)
    step = np.float64(np.finfo(np.float32).smallest_subnormal)
    assert np.max(np.abs(out[small] - exact[small])) <= step
    assert np.all(out[exact < step / 4] == 0)


def test_full_avx512_width_only_on_avx512_hosts_and_never_over_the_users_setting(monkeypatch):
    from zerollm.engine.fast import jit
    monkeypatch.delenv("NUMBA_CPU_FEATURES", raising=False)
    monkeypatch.delenv("NUMBA_CPU_NAME", raising=False)

    class Features(dict):
        def flatten(self):
            return ",".join(("+" if on else "-") + name for name, on in self.items())

    monkeypatch.setattr(jit.llvm_binding, "get_host_cpu_features", lambda: Features(avx2=True, avx512f=True))
    assert jit.wide_vector_features() == "+avx2,+avx512f,-prefer-256-bit"
    monkeypatch.setattr(jit.llvm_binding, "get_host_cpu_features", lambda: Features(avx2=True, avx512f=False))
    assert jit.wide_vector_features() is None                       # AVX2 only: numba's own choice
    monkeypatch.setattr(jit.llvm_binding, "get_host_cpu_features", lambda: Features(avx512f=True))
    monkeypatch.setenv("NUMBA_CPU_FEATURES", "+avx2")
    assert jit.wide_vector_features() is None                       # the user's features stay
    monkeypatch.delenv("NUMBA_CPU_FEATURES")
    monkeypatch.setenv("NUMBA_CPU_NAME", "generic")
    assert jit.wide_vector_features() is None


# ----------------------------------------------------------------------------
# attention's masked softmax

@pytest.mark.parametrize("shape, causal", [((2, 3, 2, 37, 37), True), ((2, 2, 1, 5, 19), True),
                                           ((1, 2, 1, 1, 9), True), ((3, 1, 1, 16, 16), False),
                                           ((8, 6, 1, 64, 64), True)])
def test_masked_softmax_and_its_backward(shape, causal):
    rng = np.random.default_rng(0)
    scores = normal(rng, *shape, scale=4.0)
    ours, ref = scores.copy(), scores.copy()
    attention.masked_softmax(ours, causal=causal)
    attention.masked_softmax.reference(ref, causal=causal)
    assert rel(ours, ref) <= TOL
    assert np.array_equal(ours == 0, ref == 0)                  # hidden keys are exactly 0
    d = normal(rng, *shape)
    d_ours, d_ref = d.copy(), d.copy()
    attention.masked_softmax_backward(d_ours, ref)
    attention.masked_softmax_backward.reference(d_ref, ref)
    assert rel(d_ours, d_ref) <= TOL


def test_masked_softmax_of_a_fully_hidden_row_is_zero_not_nan():
    scores = np.full((1, 1, 1, 2, 3), -np.inf, np.float32)
    scores[0, 0, 0, 1] = [1.0, 2.0, 3.0]
    attention.masked_softmax(scores, causal=False)
    assert np.all(scores[0, 0, 0, 0] == 0) and scores[0, 0, 0, 1].sum() == pytest.approx(1.0)


def test_padding_masks_and_float64_run_the_reference():
    rng = np.random.default_rng(1)
    scores = normal(rng, 2, 1, 1, 6, 6)
    mask = np.zeros((2, 1, 1, 1, 6), bool)
    mask[0, ..., -2:] = True
    ours, ref = scores.copy(), scores.copy()
    attention.masked_softmax(ours, causal=True, mask=mask)
    attention.masked_softmax.reference(ref, causal=True, mask=mask)
    assert np.array_equal(ours, ref)
    x64 = rng.standard_normal((4, 10))
    w64 = rng.standard_normal(10)
    assert np.array_equal(norm.layernorm_forward(x64, w64)[0], norm.layernorm_forward.reference(x64, w64)[0])


# ----------------------------------------------------------------------------
# norms and activations

@pytest.mark.parametrize("kind", ["layernorm", "layernorm_nobias", "rmsnorm"])
@pytest.mark.parametrize("shape", [(2, 7, 48), (4, 64, 384)])
def test_norms(kind, shape):
    rng = np.random.default_rng(2)
    x, dy = normal(rng, *shape, scale=3.0) + 0.5, normal(rng, *shape)
    w, b = normal(rng, shape[-1]), normal(rng, shape[-1])
    name = "rmsnorm" if kind == "rmsnorm" else "layernorm"
    fwd, bwd = getattr(norm, f"{name}_forward"), getattr(norm, f"{name}_backward")
    args = (x, w) if kind != "layernorm" else (x, w, b)
    (y, c), (y_ref, c_ref) = fwd(*args), fwd.reference(*args)
    assert rel(y, y_ref) <= TOL and rel(c.xhat, c_ref.xhat) <= TOL and rel(c.rstd, c_ref.rstd) <= TOL
    grads, grads_ref = bwd(dy, c_ref), bwd.reference(dy, c_ref)
    assert len(grads) == len(grads_ref)
    for g, g_ref in zip(grads, grads_ref):
        assert (g is None) == (g_ref is None)
        if g is not None:
            assert g.dtype == np.float32 and g.shape == g_ref.shape and rel(g, g_ref) <= TOL


@pytest.mark.parametrize("name", ["gelu_tanh", "silu", "gelu_erf"])
def test_activations_forward_close_and_backward_bit_identical(name):
    rng = np.random.default_rng(3)
    x = normal(rng, 16, 64, 96, scale=3.0)
    x[0, 0, :6] = [-100.0, -30.0, 0.0, -0.0, 30.0, 100.0]        # saturated both ways, and zero
    dy = normal(rng, *x.shape)
    fwd, bwd = getattr(activation, f"{name}_forward"), getattr(activation, f"{name}_backward")
    (y, c), (y_ref, c_ref) = fwd(x), fwd.reference(x)
    assert np.all(np.isfinite(y)) and rel(y, y_ref) <= TOL
    if name == "gelu_tanh":      # the fast forward keeps only x; its backward recomputes s
        assert c.x is x and c.aux is None
    else:
        assert rel(c.aux, c_ref.aux) <= TOL
    if name == "gelu_erf":       # its backward calls exp too (the normal density): close, not identical
        assert rel(bwd(dy, c_ref), bwd.reference(dy, c_ref)) <= TOL
    else:
        assert np.array_equal(bwd(dy, c_ref), bwd.reference(dy, c_ref))


def test_fast_silu_takes_swiglu_s_gate_where_it_lies_in_c_fc_s_output():
    """SwiGLU's gate is gu[..., :H], a view whose rows are not adjacent: the fast SiLU reads it where it lies
    (engine/fast/activation.py: _row_span) and gives what it gives for the same numbers copied out, bit for bit,
    close to the reference; its cache keeps the view. A view it cannot read row by row (every other number) is
    left to the reference (NotImplemented). Through SwiGLU the layer's answer is the reference's, to rounding."""
    from zerollm.engine.fast import activation as kernels
    from zerollm.nn.mlp import MLPWeights, swiglu_forward
    rng = np.random.default_rng(11)
    gu = normal(rng, 3, 5, 2 * 96, scale=3.0)
    gu[0, 0, :4] = [-100.0, 0.0, 100.0, -0.0]
    gate = gu[..., :96]
    assert not gate.flags.c_contiguous
    y, c = kernels.silu_forward(gate)
    y_copy, c_copy = kernels.silu_forward(np.ascontiguousarray(gate))
    assert np.array_equal(y, y_copy) and np.array_equal(c.aux, c_copy.aux) and c.x is gate
    y_ref, _ = activation.silu_forward.reference(gate)
    assert rel(y, y_ref) <= TOL and np.array_equal(gu[..., 96:], gu.copy()[..., 96:])     # the up half untouched
    assert kernels.silu_forward(gu[..., ::2]) is NotImplemented
    assert kernels.silu_forward(gu[:, ::2, :96]) is NotImplemented              # rows do not step evenly
    every_other = gu.reshape(15, 2 * 96)[::2, :96]                               # they do: read where it lies
    assert np.array_equal(kernels.silu_forward(every_other)[0], kernels.silu_forward(every_other.copy())[0])
    w = MLPWeights(normal(rng, 24, 2 * 96), None, normal(rng, 96, 24), None)
    x = normal(rng, 3, 5, 24)
    with use_engine("numpy"):
        want, _ = swiglu_forward(x, w)
    got, cache = swiglu_forward(x, w)
    assert rel(got, want) <= TOL and cache.silu.x.base is not None             # the gate was not copied


def test_fast_rope_is_the_reference_bit_for_bit_on_q_and_k_where_they_lie():
    """RoPE's kernel reads q's and k's views into the fused qkv product (not adjacent rows) and plain arrays of 2 to
    5 dimensions, and gives the reference's float32 bits, with the same cache; float64 and tables of another shape
    are left to the reference (NotImplemented)."""
    from zerollm.engine.fast import attention as kernels
    from zerollm.nn.position import rope_forward, rope_tables
    rng = np.random.default_rng(12)
    qkv = normal(rng, 2, 9, (4 + 2 * 2) * 16, scale=3.0)
    q, k, v = attention.split_qkv(qkv, 4, 2)                      # (2, 2, 2, 9, 16), (2, 2, 1, 9, 16): views
    cos, sin = rope_tables(9, 16, offset=5)
    assert not q.flags.c_contiguous
    for x in (q, k, np.ascontiguousarray(q), q[0, 0], q[0, 0, 0], normal(rng, 3, 9, 16)):
        (y, c), (y_ref, c_ref) = kernels.rope_forward(x, cos, sin), rope_forward.reference(x, cos, sin)
        assert np.array_equal(y, y_ref) and y.dtype == np.float32 and c.cos is cos and c.sin is sin
        assert type(c) is type(c_ref)
    from zerollm.engine.fast import KERNELS
    assert KERNELS["rope_forward"] is kernels.rope_forward             # what the fast engine dispatches to
    assert kernels.rope_forward(q.astype(np.float64), cos, sin) is NotImplemented
    assert kernels.rope_forward(q, cos[None], sin[None]) is NotImplemented
    assert kernels.rope_forward(q[..., :15], cos[:, :15], sin[:, :15]) is NotImplemented   # an odd head size


def test_fast_gelu_tanh_backward_recomputes_the_forwards_s_bit_for_bit():
    """The fast forward keeps no s; its backward recomputes s with the forward's own steps
    (engine/fast/activation.py: _sigmoid_2u), so it equals the exact backward given the forward's s, bit for bit.
    And each engine's backward takes the other's cache: the reference, given no s, computes its own."""
    rng = np.random.default_rng(7)
    x = normal(rng, 8, 4096, scale=3.0)
    x[0, :6] = [-100.0, -30.0, 0.0, -0.0, 30.0, 100.0]
    dy = normal(rng, *x.shape)
    y, c = activation.gelu_tanh_forward(x)
    from zerollm.engine.fast import activation as kernels
    s = np.array([kernels._sigmoid_2u(v) for v in x.reshape(-1)], np.float32).reshape(x.shape)
    np.testing.assert_allclose(y, x * s, rtol=3e-7, atol=0)         # y = x / (1 + e): x s to an ulp
    dx = activation.gelu_tanh_backward(dy, c)
    want = np.empty_like(x)
    kernels._gelu_tanh_backward(x.reshape(-1), s.reshape(-1), dy.reshape(-1), want.reshape(-1))
    assert np.array_equal(dx, want)
    y_ref, c_ref = activation.gelu_tanh_forward.reference(x)
    assert np.array_equal(activation.gelu_tanh_backward.reference(dy, c),            # fast cache, reference
                          activation.gelu_tanh_backward.reference(dy, c_ref))
    assert np.array_equal(activation.gelu_tanh_backward(dy, c_ref),                   # reference cache, fast
                          activation.gelu_tanh_backward.reference(dy, c_ref))
    assert kernels.gelu_tanh_backward(dy[:, ::2].copy(), c) is NotImplemented         # shapes differ


# ----------------------------------------------------------------------------
# the linear layer: bias folded into the product

@pytest.mark.parametrize("shape,i,o", [((2, 7, 48), 48, 80), ((300, 1536), 1536, 33), ((5, 64), 64, 1)])
@pytest.mark.parametrize("tied", [False, True])
def test_fast_linear_folds_the_bias_into_the_product(shape, i, o, tied):
    """engine/fast/linear.py: y starts as rows of b and BLAS adds x @ w onto it (beta = 1). The same
    products and sums as the reference's y = x @ w; y += b, only b joins the sums first: within an ulp
    or two of the largest entry. w may be a transposed (o, i) array (a tied embedding); the cache is the
    reference's, so either engine's backward takes it. Without bias or in float64 the reference runs."""
    from zerollm.engine.fast import linear as kernels
    from zerollm.nn import linear
    rng = np.random.default_rng(11)
    x = normal(rng, *shape)
    w = normal(rng, o, i).T if tied else normal(rng, i, o)
    b = normal(rng, o, scale=10.0)
    y, c = linear.linear_forward(x, w, b)
    y_ref, c_ref = linear.linear_forward.reference(x, w, b)
    assert y.shape == y_ref.shape == (*shape[:-1], o) and y.dtype == np.float32
    assert rel(y, y_ref) <= TOL and not np.array_equal(y, np.broadcast_to(b, y.shape))
    assert c.x is x and c.w is w and c.has_bias
    dy = normal(rng, *y.shape)
    for got, want in zip(linear.linear_backward(dy, c), linear.linear_backward(dy, c_ref)):
        assert np.array_equal(got, want)
    assert kernels.linear_forward(x, w) is NotImplemented                    # no bias: nothing to fold
    assert kernels.linear_forward(x.astype(np.float64), w.astype(np.float64), b.astype(np.float64)) is NotImplemented
    assert kernels.linear_forward(x, normal(rng, i, 2 * o)[:, ::2], b) is NotImplemented   # BLAS cannot step over it
    x2 = normal(rng, 9, 2 * i)[:, ::2]                                        # a non-contiguous input: copied first
    np.testing.assert_allclose(kernels.linear_forward(x2, w, b)[0], x2 @ w + b, rtol=0,
                               atol=TOL * np.abs(x2 @ w + b).max())


# ----------------------------------------------------------------------------
# the optimizer

@pytest.mark.parametrize("weight_decay", [0.0, 0.1])
def test_adamw_is_bit_identical_to_numpy(weight_decay):
    rng = np.random.default_rng(4)
    shapes = {"w": (33, 40), "b": (40,), "scale": ()}
    fast = {n: normal(rng, *s) for n, s in shapes.items()}
    ref = {n: p.copy() for n, p in fast.items()}
    opts = [optim.AdamW(p, lr=3e-3, betas=(0.9, 0.95), weight_decay=weight_decay) for p in (fast, ref)]
    for _ in range(5):
        grads = {n: normal(rng, *s, scale=10.0 ** rng.integers(-3, 2)) for n, s in shapes.items()}
        opts[0].step(grads)
        with use_engine("numpy"):
            opts[1].step(grads)
    for n in shapes:
        assert np.array_equal(fast[n], ref[n]) and np.array_equal(opts[0].m[n], opts[1].m[n])
        assert np.array_equal(opts[0].v[n], opts[1].v[n]), n


def test_the_shard_sum_is_bit_identical_to_numpy():
    """add_scaled (zerollm.training.objective, the gradient sum of zerollm.training.parallel's shards):
    one pass g a + other b, rounded as NumPy's g *= a; g += other * b; with a == 1 g's own term is kept."""
    rng = np.random.default_rng(6)
    for shape, a, b in (((300, 17), 0.375, 0.625), ((1001,), 1.0, 0.25), ((), 0.5, 0.5)):
        g, other = normal(rng, *shape), normal(rng, *shape, scale=1e3)
        fast, ref = g.copy(), g.copy()
        f = np.float32
        assert objective.add_scaled(fast, f(a), other, f(b)) is None
        objective.add_scaled.reference(ref, f(a), other, f(b))
        assert np.array_equal(fast, ref) and not np.array_equal(fast, g)
    big, other = normal(rng, 1000, 333), normal(rng, 1000, 333)        # several of the reference's cache blocks
    want = big * np.float32(0.75) + other * np.float32(0.25)
    objective.add_scaled.reference(big, np.float32(0.75), other, np.float32(0.25))
    assert np.array_equal(big, want)
    g64 = normal(rng, 5).astype(np.float64)          # float64: the reference runs
    want = g64 * 0.5 + g64 * 0.5
    objective.add_scaled(g64, np.float64(0.5), g64.copy(), np.float64(0.5))
    assert np.array_equal(g64, want)


def test_sum_of_squares_accumulates_in_float64():
    g = normal(np.random.default_rng(5), 1_000_003, scale=3.0)
    exact = float(np.sum(g.astype(np.float64) ** 2))
    assert optim.sum_of_squares(g) == pytest.approx(exact, rel=1e-12)
    assert optim.sum_of_squares.reference(g) == pytest.approx(exact, rel=TOL)


# ----------------------------------------------------------------------------
# against torch (the float32 checks of tests/test_layers.py), and the whole model

@pytest.mark.slow
@pytest.mark.parametrize("key", ["layernorm", "layernorm_nobias", "rmsnorm", "gelu_tanh", "gelu_erf", "silu",
                                 "sdpa_causal", "sdpa_bidirectional", "mha", "gqa", "gelu_mlp", "swiglu", "block_gpt2",
                                 "block_llama"])
def test_fast_layers_match_torch_float32(key):
    from test_layers import TORCH
    check_op(key, TORCH[key], np.float32)


CFG = dict(vocab_size=37, block_size=24, n_layer=2, n_head=4, n_embd=32, bias=False)


@pytest.mark.parametrize("extra", [dict(), dict(norm="rmsnorm", pos="rope", mlp="swiglu", n_kv_head=2)])
def test_model_gradients_and_training_follow_the_numpy_engine(extra):
    cfg = GPTConfig(**CFG, **extra)
    rng = np.random.default_rng(6)
    x, y = rng.integers(0, 37, (3, 24)), rng.integers(0, 37, (3, 24))
    runs = {}
    for engine in ("numpy", "fast"):
        with use_engine(engine):
            model = GPT(cfg, seed=1)
            opt = optim.AdamW(model.params, lr=1e-2)
            losses = []
            for _ in range(4):
                _, loss = model.forward(x, y)
                grads = model.backward()
                if not losses:
                    first = {k: g.copy() for k, g in grads.items()}      # the gradients of step 1
                losses.append(loss)
                optim.clip_grad_norm(grads, 1.0)
                opt.step(grads)
            runs[engine] = losses, first
    (loss_np, g_np), (loss_fast, g_fast) = runs["numpy"], runs["fast"]
    assert np.allclose(loss_fast, loss_np, rtol=1e-5, atol=0)
    assert max(rel(g_fast[k], g_np[k]) for k in g_np) <= 1e-5


def test_two_shard_threads_run_the_kernels_and_agree():
    cfg = GPTConfig(**CFG)
    rng = np.random.default_rng(7)
    x, y = rng.integers(0, 37, (4, 24)), rng.integers(0, 37, (4, 24))
    model = GPT(cfg, seed=2)
    loss_1, grads_1 = ShardedModel(model, 1).forward_backward(x, y)
    grads_1 = {k: g.copy() for k, g in grads_1.items()}
    sharded = ShardedModel(model, 2)
    loss_2, grads_2 = sharded.forward_backward(x, y)
    sharded.close()
    assert loss_2 == pytest.approx(loss_1, rel=1e-6)
    assert max(rel(grads_2[k], grads_1[k]) for k in grads_1) <= 1e-5


# ----------------------------------------------------------------------------
# the switch

def test_unknown_engine_and_env_variable(monkeypatch):
    with pytest.raises(ZeroLLMError, match="numpy, fast"):
        set_engine("gpu")
    assert get_engine() == "fast"                               # a failed switch changes nothing
    with use_engine("numpy"):
        assert get_engine() == "numpy"
    assert get_engine() == "fast"
    from zerollm import engine
    monkeypatch.setitem(engine._selected, "name", None)         # as in a fresh process
    monkeypatch.setenv(ENV, "gpu")
    with pytest.raises(ZeroLLMError, match=r"\$ZEROLLM_ENGINE must be one of numpy, fast; got 'gpu'"):
        get_engine()
    monkeypatch.setenv(ENV, "numpy")
    assert get_engine() == "numpy"


def test_fast_engine_without_numba_says_how_to_install(monkeypatch):
    import sys
    import zerollm.engine
    monkeypatch.setitem(sys.modules, "zerollm.engine.fast", None)      # as if numba were missing
    monkeypatch.setitem(zerollm.engine._selected, "fast", None)         # and never imported in this process
    with pytest.raises(ZeroLLMError, match=r'pip install "zerollm\[fast\]"'):
        set_engine("fast")


# ----------------------------------------------------------------------------
# tiled attention

@pytest.mark.parametrize("T, Tk, tile, causal, g", [(37, 37, 8, True, 1), (64, 64, 64, True, 2), (5, 19, 4, True, 1),
                                                   (16, 16, 5, False, 1), (300, 300, 128, True, 1)])
def test_flash_attention_on_the_fast_engine(T, Tk, tile, causal, g):
    from zerollm.nn.flash import flash_sdpa_backward, flash_sdpa_forward
    rng = np.random.default_rng(8)
    q, k, v = normal(rng, 2, 2, g, T, 16), normal(rng, 2, 2, 1, Tk, 16), normal(rng, 2, 2, 1, Tk, 16)
    dout = normal(rng, *q.shape)
    out, cache = flash_sdpa_forward(q, k, v, causal=causal, tile=tile)
    grads = flash_sdpa_backward(dout, cache)
    with use_engine("numpy"):
        out_ref, cache_ref = flash_sdpa_forward(q, k, v, causal=causal, tile=tile)
        grads_ref = flash_sdpa_backward(dout, cache_ref)
    assert rel(out, out_ref) <= TOL and rel(cache.lse, cache_ref.lse) <= TOL
    for g_fast, g_ref in zip(grads, grads_ref):
        assert rel(g_fast, g_ref) <= TOL


# ----------------------------------------------------------------------------
# numba's settings in the environment: one line naming the setting, never numba's traceback

@pytest.mark.parametrize("name, value, fragment", [
    ("NUMBA_DISABLE_JIT", "1", "turns numba's compiler off"),
    ("NUMBA_NUM_THREADS", "0", "must be a whole number above 0"),
    ("NUMBA_NUM_THREADS", "many", "must be a whole number above 0"),
])
def test_numba_settings_that_break_the_fast_engine_are_refused(monkeypatch, name, value, fragment):
    import zerollm.engine
    with use_engine("numpy"):
        monkeypatch.setenv(name, value)
        monkeypatch.setitem(zerollm.engine._selected, "fast", None)     # as in a new process
        with pytest.raises(ZeroLLMError, match=fragment):
            set_engine("fast")
        assert get_engine() == "numpy"                 # the selection is unchanged
        monkeypatch.undo()


@pytest.mark.parametrize("name, value", [("NUMBA_CPU_NAME", "bogus-cpu"), ("NUMBA_CPU_FEATURES", "+bogus"),
                                         ("NUMBA_CPU_FEATURES", "avx2")])
def test_a_cpu_llvm_does_not_know_is_one_clear_error(monkeypatch, capfd, name, value):
    from zerollm.engine.fast.jit import check_cpu_settings
    monkeypatch.setenv(name, value)
    capfd.readouterr()
    with pytest.raises(ZeroLLMError, match=f"\\${name}"):
        check_cpu_settings()
    assert capfd.readouterr().err == ""               # LLVM's own complaint was caught, not printed


@pytest.mark.parametrize("name, value", [("NUMBA_CPU_NAME", "generic"), ("NUMBA_CPU_NAME", "host"),
                                         ("NUMBA_CPU_FEATURES", "+avx2,-avx512f")])
def test_cpu_settings_llvm_knows_pass(monkeypatch, name, value):
    from zerollm.engine.fast.jit import check_cpu_settings
    monkeypatch.setenv(name, value)
    check_cpu_settings()


def test_a_numba_setting_numba_cannot_read_is_one_line_from_the_cli(tmp_path):
    import os
    import subprocess
    import sys
    env = {**os.environ, "NUMBA_OPT": "9", "ZEROLLM_ENGINE": "numpy"}
    proc = subprocess.run([sys.executable, "-m", "zerollm", "train", "--preset", "tiny", "--dry-run", "--engine",
                           "fast"], env=env, capture_output=True, text=True, cwd=tmp_path, timeout=120)
    assert proc.returncode == 1 and proc.stderr.count("\n") == 1, proc.stderr
    assert "$NUMBA_OPT='9' cannot be read by numba" in proc.stderr and "Traceback" not in proc.stderr
