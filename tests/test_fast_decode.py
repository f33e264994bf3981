"""The fast engine's fused decode block (zerollm.engine.fast.decode) against the unfused fast engine and the
NumPy engine (issue #61): the GPT-2 and Llama layouts, float32 / Q8_0 / Q4_0 / Q4_K weights, 1 and 3 rows,
1 and 2 threads.

Logits are compared step by step through a KV cache on the same forced tokens (so one near-tie cannot send
two runs down different paths), then the greedy tokens of the Scheduler's decode loop. Tiny models: 2 layers,
width 64 (256 for Q4_K, whose super-blocks are 256 wide).
"""

import numpy as np
import pytest

from tests.test_gguf import GPT2, LLAMA, tiny
from zerollm.engine import use_engine
from zerollm.engine.threads import limit_threads
from zerollm.generation.decode import generate
from zerollm.generation.sample import Sampling
from zerollm.interop import kquant, quant
from zerollm.model.gpt import GPT, GPTConfig
from zerollm.model.kvcache import KVCache

pytest.importorskip("numba")                               # the fast engine's one requirement
from zerollm.engine.fast import KERNELS, decode            # noqa: E402
from zerollm.engine.fast.quant import INT8_TOLERANCE       # noqa: E402

PROMPTS = np.array([[1, 7, 42, 99, 5], [3, 4, 5, 6, 7], [9, 9, 8, 8, 7]])
STEPS = 6


def model_of(layout, kind):
    """A tiny eval-mode model with its attention and MLP weights in ``kind`` (the head stays float)."""
    if kind == "q4_K":                     # rows of 256: the super-block
        H = 256 if layout is LLAMA else 1024
        cfg = GPTConfig(**{"vocab_size": 300, "block_size": 32, "n_layer": 2, "n_head": 4, "n_embd": 256,
                           **layout, "n_inner": H})
        model = GPT(cfg, seed=0).eval()
    else:
        model = tiny(layout)
    if kind != "f32":
        blocks = kquant.KQuantMatrix if kind == "q4_K" else quant.QuantizedMatrix
        for name, w in list(model.params.items()):
            if quant.is_base_linear(name, w):
                model.params[name] = blocks.from_float(np.asarray(w).T, kind)
    return model


class unfused:
    """The fast engine without its fused block: each layer through the reference's steps."""

    def __enter__(self):
        self.saved = KERNELS.pop("block_forward")

    def __exit__(self, *exc):
        KERNELS["block_forward"] = self.saved


def forced_logits(model, rows):
    """(STEPS, rows, V): the logits of each decode step through a per-row KV cache, the inputs fixed."""
    cache = KVCache(model.config, rows, 16, per_row=True)
    model.forward(PROMPTS[:rows], kv_cache=cache)
    steps = np.random.default_rng(3).integers(0, model.config.vocab_size, (STEPS, rows, 1))
    return np.stack([model.forward(tokens, kv_cache=cache)[0][:, -1] for tokens in steps])


def greedy(model, rows):
    return [[int(t) for t in step] for step in generate(model, PROMPTS[:rows], STEPS, Sampling(0.0))]


def close(got, ref, tol):
    return np.abs(got - ref).max() <= tol * np.abs(ref).max()


@pytest.mark.parametrize("kind", ["f32", "q8_0", "q4_0", "q4_K"])
@pytest.mark.parametrize("layout", [GPT2, LLAMA], ids=["gpt2", "llama"])
def test_fused_decode_equals_the_unfused_fast_engine_and_numpy(layout, kind):
    model = model_of(layout, kind)
    # float32: sums reordered and exp32; blocks: the same 8-bit activations as the unfused fast engine
    # (rounded from norms computed in another order), so a code can move by one, and the steps after it
    # follow (on the Llama q4_K model one such code moved the logits by 4.4e-3 of the largest)
    tol_unfused = 1e-5 if kind == "f32" else INT8_TOLERANCE / 2
    tol_numpy = 1e-5 if kind == "f32" else INT8_TOLERANCE
    for rows in (1, 3):
        with use_engine("numpy"):
            ref = forced_logits(model, rows)
            ref_tokens = greedy(model, rows)
        for threads in (1, 2):
            with limit_threads(threads), use_engine("fast"):
                fused = forced_logits(model, rows)
                fused_tokens = greedy(model, rows)
                with unfused():
                    plain = forced_logits(model, rows)
                    plain_tokens = greedy(model, rows)
            assert close(fused, plain, tol_unfused), (rows, threads)
            assert close(fused, ref, tol_numpy), (rows, threads)
            assert fused_tokens == plain_tokens, (rows, threads)
            if kind == "f32":
                assert fused_tokens == ref_tokens, (rows, threads)
            else:           # 8-bit activations move a logit by up to tol_numpy: argmax equal where the lead is wider
                top2 = np.sort(ref, axis=-1)[..., -2:]
                clear = top2[..., 1] - top2[..., 0] > 2 * tol_numpy * np.abs(ref).max()
                assert clear.any() and (fused.argmax(-1) == ref.argmax(-1))[clear].all(), (rows, threads)


def test_a_decode_step_takes_the_fused_block_and_a_prefill_does_not(monkeypatch):
    """One _attend call per layer and decode step; none for the prompt (T > 1), none on the NumPy engine."""
    calls = []
    attend = decode._attend
    monkeypatch.setattr(decode, "_attend", lambda *a: calls.append(a[0].shape[0]) or attend(*a))
    model = model_of(LLAMA, "q8_0")
    cache = KVCache(model.config, 3, 16, per_row=True)
    with use_engine("fast"):
        model.forward(PROMPTS, kv_cache=cache)
        assert calls == []
        model.forward(np.array([[1], [2], [3]]), kv_cache=cache)
    assert calls == [3] * model.config.n_layer
    with use_engine("numpy"):
        model.forward(np.array([[1], [2], [3]]), kv_cache=cache)
    assert len(calls) == model.config.n_layer


def test_what_the_fused_block_was_not_written_for_runs_the_reference():
    """A rolling KV cache (a window), LoRA, train-mode dropout: NotImplemented, and the reference's block runs."""
    model = model_of(GPT2, "f32")
    p, cfg = model.params, model.config
    x = np.ones((1, 1, cfg.n_embd), np.float32)
    from zerollm.nn.attention import ForwardPass
    rolling = KVCache(cfg, 1, window=4)
    assert decode.block_forward(x, p, "h.0.", cfg, ForwardPass(kv=rolling)) is NotImplemented
    full = KVCache(cfg, 1, 8)
    assert decode.block_forward(x, p, "h.0.", cfg, ForwardPass(kv=full), lora=object()) is NotImplemented
    assert decode.block_forward(x, p, "h.0.", cfg, ForwardPass()) is NotImplemented          # no cache
    assert decode.block_forward(x.astype(np.float64), p, "h.0.", cfg, ForwardPass(kv=full)) is NotImplemented
    out, cache = decode.block_forward(x, p, "h.0.", cfg, ForwardPass(kv=full))
    assert out.shape == x.shape and cache.moe is False


def test_a_block_s_checks_are_kept_until_one_of_its_weights_is_replaced():
    """The fused block checks a layer's weights once and keeps the answer (decode.py's _layer_weights); replacing
    a weight by another object is seen at the next step: a weight it cannot take sends the step to the reference,
    a new float32 one is multiplied (the step then equals the reference's block with it). It keeps only weak
    references: a dropped model's weights are freed."""
    import gc
    import weakref
    from zerollm.nn.attention import ForwardPass
    from zerollm.nn.block import block_forward
    model = model_of(GPT2, "f32")
    p, cfg = model.params, model.config
    x = np.random.default_rng(4).standard_normal((1, 1, cfg.n_embd)).astype(np.float32)

    def step(params):
        return decode.block_forward(x, params, "h.0.", cfg, ForwardPass(kv=KVCache(cfg, 1, 8)))

    assert step(p) is not NotImplemented
    p["h.0.mlp.c_fc.weight"] = p["h.0.mlp.c_fc.weight"].astype(np.float64)       # not a weight it takes
    assert step(p) is NotImplemented
    shape = p["h.0.mlp.c_fc.weight"].shape
    p["h.0.mlp.c_fc.weight"] = np.random.default_rng(5).standard_normal(shape).astype(np.float32)
    out, _ = step(p)
    with use_engine("numpy"):
        ref, _ = block_forward(x, p, "h.0.", cfg, ForwardPass(kv=KVCache(cfg, 1, 8)))
    assert close(out, ref, 1e-5)
    freed = weakref.ref(p["h.1.attn.c_attn.weight"])
    assert decode.block_forward(x, p, "h.1.", cfg, ForwardPass(kv=KVCache(cfg, 1, 8))) is not NotImplemented
    del model, p
    gc.collect()
    assert freed() is None


def test_exp32_scales_by_two_to_the_n_in_registers_bit_for_bit_as_ldexp():
    """exp32's 2^n (jit._ldexp), which the decode block's GELU, SwiGLU and softmax use: without AVX-512 it is built
    in the exponent bits (LLVM turned llvm.ldexp into one libm call per lane there), and equals np.ldexp bit for
    bit over exp32's whole range of n, subnormal results, 0 and inf included; the compiled loop calls no ldexp."""
    import numba
    from zerollm.engine.fast import jit

    @numba.njit(fastmath=jit.FASTMATH)
    def scaled(x, n, out):
        for i in range(x.shape[0]):
            out[i] = jit._ldexp(x[i], n[i])

    n = np.repeat(np.arange(-152, 130, dtype=np.int32), 64)
    x = np.random.default_rng(2).uniform(0.5, 2.0, n.size).astype(np.float32)
    x[::64], x[1::64] = np.float32(1.0), np.nextafter(np.float32(2.0), np.float32(0))
    out = np.empty_like(x)
    scaled(x, n, out)
    with np.errstate(over="ignore"):
        want = np.ldexp(x, n).astype(np.float32)
    assert (want == 0).any() and np.isinf(want).any() and ((want > 0) & (want < np.finfo(np.float32).tiny)).any()
    assert np.array_equal(out.view(np.int32), want.view(np.int32))
    if not jit._LDEXP:
        assert "ldexpf" not in scaled.inspect_asm(scaled.signatures[0])           # libm's, once per number


def test_a_decode_step_s_products_go_straight_to_the_integer_kernels(monkeypatch):
    """The fused block checked the layer's blocks once, so its products call quant.integer_product, not
    quantized_matmul and its checks, each step; under exact_block_products (float products) they go through
    quantized_matmul. Both give the unfused engine's numbers."""
    from zerollm.engine.amp import exact_block_products
    calls = {"integer": 0, "checked": 0}
    direct, checked = decode.integer_product, decode.quantized_matmul
    monkeypatch.setattr(decode, "integer_product", lambda *a: calls.__setitem__("integer", calls["integer"] + 1)
                        or direct(*a))
    monkeypatch.setattr(decode, "quantized_matmul", lambda *a: calls.__setitem__("checked", calls["checked"] + 1)
                        or checked(*a))
    model = model_of(LLAMA, "q4_0")
    with use_engine("fast"), limit_threads(1):
        fused = forced_logits(model, 1)
        assert calls == {"integer": 4 * model.config.n_layer * STEPS, "checked": 0}
        with exact_block_products():
            forced_logits(model, 1)
        assert calls["checked"] == 4 * model.config.n_layer * STEPS
        with unfused():
            plain = forced_logits(model, 1)
    assert close(fused, plain, INT8_TOLERANCE / 2)


def test_stacked_k_quant_parts_are_one_launch_bit_for_bit_the_part_by_part_products(monkeypatch):
    """Llama Q4_K_M's c_attn (q, k in Q4_K, v in Q6_K): x is rounded once and all of W's rows are one launch, split
    between the threads across the parts' edges; every column is bit for bit that part's own product. A stack
    with a part of another kind keeps the part-by-part loop."""
    from zerollm.engine.fast import blas, kquant as fast_kquant, quant as fast_quant
    rng = np.random.default_rng(4)
    parts = [kquant.KQuantMatrix.from_float(rng.standard_normal((rows, 256)), kind)
             for rows, kind in ((96, "q4_K"), (64, "q4_K"), (96, "q6_K"))]
    parts[2].blocks.flags.writeable = False                  # as a file's parts can be: some read-only, some not
    w = quant.StackedBlocks(parts)
    launches = []
    for module in (fast_quant, fast_kquant):
        real = module.run_rows
        monkeypatch.setattr(module, "run_rows", lambda *a, real=real, **k: launches.append(a[0]) or real(*a, **k))
    for threads in (1, 2):
        with limit_threads(threads):
            cap = blas.thread_cap()
            for N in (1, 3):
                x = rng.standard_normal((N, 256)).astype(np.float32)
                want = np.concatenate([fast_kquant.integer_product(x, p, cap) for p in parts], axis=1)
                del launches[:]
                got = fast_quant.integer_product(x, w, cap)              # the fused decode block's way in
                assert len(launches) == 1 and np.array_equal(got, want)
                del launches[:]
                assert np.array_equal(fast_quant.quantized_matmul(x, w), want) and len(launches) == 1
    mixed = quant.StackedBlocks(parts[:2] + [quant.QuantizedMatrix.from_float(rng.standard_normal((64, 256)), "q8_0")])
    assert fast_quant.one_launch(w) and not fast_quant.one_launch(mixed)


def test_attention_over_a_long_enough_cache_is_split_between_threads_bit_for_bit(monkeypatch):
    """At 2 threads the fused block splits the attention's (row, head) pairs between numba's threads once a step
    reads ATTEND_SPLIT_FROM cached numbers, and the logits are bit for bit those of the one-thread attention;
    below the threshold, or at 1 thread, the serial kernel runs."""
    split = []
    threaded = decode._attend_threaded
    monkeypatch.setattr(decode, "_attend_threaded", lambda *a: split.append(1) or threaded(*a))
    model = model_of(LLAMA, "q4_0")
    with use_engine("fast"), limit_threads(2):
        monkeypatch.setattr(decode, "ATTEND_SPLIT_FROM", 1 << 30)          # never: the serial attention
        serial = forced_logits(model, 3)
        assert split == []
        monkeypatch.setattr(decode, "ATTEND_SPLIT_FROM", 1)                # always
        threads = forced_logits(model, 3)
        assert len(split) == model.config.n_layer * STEPS
    assert np.array_equal(serial, threads)
    with use_engine("fast"), limit_threads(1):
        one = forced_logits(model, 3)
    assert len(split) == model.config.n_layer * STEPS and np.array_equal(one, serial)
    # float32 layers multiply with BLAS: their attention stays on one thread (two spinning pools fought)
    with use_engine("fast"), limit_threads(2):
        forced_logits(model_of(LLAMA, "f32"), 3)
    assert len(split) == model.config.n_layer * STEPS
