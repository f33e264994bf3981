"""Exercises on attention (Parts 1 and 3 of the course): the seed's self-attention step by step, causal
attention's backward, RoPE, and attending with a KV cache.

The references are zerollm's own: ``nn.self_attention`` (the seed's example), ``nn.attention``'s
sdpa pair, ``nn.position``'s RoPE, and for the cache the rule a cached run must keep: it equals the
full causal attention over every token so far (``model.kvcache``). Shapes: B batch, nh heads,
T time, P tokens already cached, C model width, hs head size.
"""

import numpy as np

from zerollm.nn.attention import sdpa_backward, sdpa_forward
from zerollm.nn.position import rope_forward, rope_tables
from zerollm.nn.self_attention import scaled_dot_product_attention, self_attention
from zerollm.teach.exercises.grading import Mistake, compare, finite_differences, in_case, outputs


def _n(rng, dtype, *shape, scale=1.0):
    return (rng.standard_normal(shape) * scale).astype(dtype)


def _what(shape, dtype):
    return f"shape {shape}, {np.dtype(dtype).name}"


# ----------------------------------------------------------------------------
# the seed's self-attention, step by step

def _variant(which, **kw):
    def make(x, wq, wk, wv):
        out, weights = scaled_dot_product_attention(x @ wq, x @ wk, x @ wv, **kw)
        return out if which == "out" else weights
    return make


def _attention_mistakes(which):
    return (
        Mistake(_variant(which, scale=1.0), {
            "en": "The scores were not divided by sqrt(d_k), so the softmax is too peaked",
            "zh": "分数没有除以 sqrt(d_k)，softmax 因此过于尖锐"}),
        Mistake(_variant(which, causal=False), {
            "en": "Every query sees the future keys too: the causal mask is missing",
            "zh": "每个查询也看到了未来的键：少了因果掩码"}),
        Mistake(lambda x, wq, wk, wv: _wrong_axis(x @ wq, x @ wk, x @ wv, which), {
            "en": "The softmax normalised over the queries (axis -2); each query's weights over the keys "
                  "(the last axis) must add up to 1",
            "zh": "softmax 沿查询方向（轴 -2）归一化了；应是每个查询对各个键的权重（最后一个轴）加起来等于 1"}),
    )


def _wrong_axis(q, k, v, which):
    s = q @ np.swapaxes(k, -1, -2) / np.sqrt(q.shape[-1])
    s = np.where(np.triu(np.ones(s.shape[-2:], bool), 1), -np.inf, s)
    e = np.exp(s - s.max(axis=-2, keepdims=True))
    w = e / e.sum(axis=-2, keepdims=True)
    return w @ v if which == "out" else w


def grade_attention(fn, lang):
    rng = np.random.default_rng(10)
    seed_x = np.array([[[1.0, 0, 1, 0], [0, 2, 0, 2], [1, 1, 1, 1]]])      # the seed's example, B=1, T=3
    seed_w = np.array([[1.0, 0], [0, 1], [1, 0], [0, 1]])
    cases = [(seed_x, seed_w, seed_w, seed_w)]
    for B, T, C, hs, dt in ((2, 5, 6, 4, np.float64), (1, 4, 3, 2, np.float32), (3, 6, 4, 3, np.float64)):
        cases.append((_n(rng, dt, B, T, C), _n(rng, dt, C, hs), _n(rng, dt, C, hs), _n(rng, dt, C, hs + 1)))
    for i, inputs in enumerate(cases, 1):
        ref = self_attention(*inputs)
        out, weights = outputs(fn, inputs, ("out", "weights"), lang)
        what = _what(inputs[0].shape, inputs[0].dtype)
        in_case(i, what, lang, compare, "weights", weights, ref.weights, lang,
                mistakes=_attention_mistakes("weights"), inputs=inputs)
        in_case(i, what, lang, compare, "out", out, ref.out, lang, mistakes=_attention_mistakes("out"), inputs=inputs)
    return len(cases)


# ----------------------------------------------------------------------------
# causal attention's backward

def _heads(a):
    return a[:, None, None]                            # (B, T, hs) -> (B, 1, 1, T, hs): zerollm's grouped layout


def _sdpa(q, k, v):
    out, cache = sdpa_forward(_heads(q), _heads(k), _heads(v), causal=True)
    return out[:, 0, 0], cache


def _sdpa_grads(dout, q, k, v):
    return tuple(g[:, 0, 0] for g in sdpa_backward(_heads(dout), _sdpa(q, k, v)[1]))


def grade_attention_backward(fn, lang):
    rng = np.random.default_rng(11)

    def no_sum(dout, q, k, v):
        att = _sdpa(q, k, v)[1].att[:, 0, 0]
        ds = att * (dout @ np.swapaxes(v, -1, -2))
        return ds @ k / np.sqrt(q.shape[-1])
    missing = Mistake(no_sum, {"en": "The softmax's backward lost its row-sum term (ds = A * dA alone)",
                               "zh": "softmax 的反向少了行和那一项（只写了 ds = A * dA）"})

    def untransposed(dout, q, k, v):
        return _sdpa(q, k, v)[1].att[:, 0, 0] @ dout
    dv_mistake = Mistake(untransposed, {"en": "dv multiplies dout by A, not by A transposed (each key's value "
                                              "collects from the queries that looked at it)",
                                        "zh": "dv 用 A 乘了 dout，应该用 A 的转置（每个键的值从看它的那些查询汇集梯度）"})
    cases = [(2, 4, 3, np.float64), (1, 5, 2, np.float32), (3, 3, 4, np.float64)]
    for i, (B, T, hs, dt) in enumerate(cases, 1):
        q, k, v, dout = (_n(rng, dt, B, T, hs) for _ in range(4))
        ref = _sdpa_grads(dout, q, k, v)
        got = outputs(fn, (dout, q, k, v), ("dq", "dk", "dv"), lang)
        for label, ours, want in zip(("dq", "dk", "dv"), got, ref):
            mistakes = (missing,) if label == "dq" else (dv_mistake,) if label == "dv" else ()
            in_case(i, _what((B, T, hs), dt), lang, compare, label, ours, want, lang,
                    mistakes=mistakes, inputs=(dout, q, k, v))
    q, k, v = (_n(rng, np.float64, 2, 4, 3) for _ in range(3))
    finite_differences("(dq, dk, dv)", _sdpa, lambda d, c: fn(d, q, k, v), [q, k, v], (0, 1, 2), lang)
    return len(cases) + 1


# ----------------------------------------------------------------------------
# RoPE

def _rope_ref(x, theta):
    cos, sin = rope_tables(x.shape[-2], x.shape[-1], theta, dtype=x.dtype)
    return rope_forward(x, cos, sin)[0]


def _interleaved(x, theta):
    T, hs = x.shape[-2:]
    cos, sin = rope_tables(T, hs, theta, dtype=np.float64)
    c, s = cos[:, : hs // 2], sin[:, : hs // 2]
    y = np.empty(x.shape)
    y[..., 0::2] = x[..., 0::2] * c - x[..., 1::2] * s
    y[..., 1::2] = x[..., 1::2] * c + x[..., 0::2] * s
    return y


def grade_rope(fn, lang):
    rng = np.random.default_rng(12)
    mistakes = (
        Mistake(_interleaved, {"en": "Neighbours (2i, 2i+1) were rotated together; zerollm (as Llama and Hugging "
                                     "Face) pairs channel i with channel i + hs/2 (rotate-half)",
                               "zh": "把相邻的 (2i, 2i+1) 当成一对旋转了；zerollm（与 Llama、Hugging Face 一样）"
                                     "把第 i 个通道与第 i + hs/2 个配对（rotate-half）"}),
        Mistake(lambda x, theta: _rope_ref(x, theta) - 2 * _rope_ref(x, theta) + 2 * x * rope_tables(
            x.shape[-2], x.shape[-1], theta, dtype=np.float64)[0], {
            "en": "Every pair turned the wrong way: the sign of the sin terms is flipped",
            "zh": "每一对都转反了：sin 项的符号反了"}),
        Mistake(lambda x, theta: _rope_ref(x, theta ** 0.5), {
            "en": "The frequencies are off: the exponent is -2i/hs over the pair index i < hs/2",
            "zh": "频率不对：指数应为 -2i/hs，i 是配对的下标（i < hs/2）"}),
    )
    cases = [((1, 2, 5, 4), 10000.0, np.float64), ((2, 3, 6), 100.0, np.float32), ((2, 1, 7, 8), 500.0, np.float64)]
    for i, (shape, theta, dt) in enumerate(cases, 1):
        x = _n(rng, dt, *shape)
        y = outputs(fn, (x, theta), ("y",), lang)[0]
        in_case(i, _what(shape, dt) + f", theta {theta:g}", lang, compare, "y", y, _rope_ref(x, theta), lang,
                mistakes=mistakes, inputs=(x, theta))
    return len(cases)


# ----------------------------------------------------------------------------
# attending with a KV cache

def _kv_ref(k_cache, v_cache, q_new, k_new, v_new):
    k = np.concatenate([k_cache, k_new], axis=-2)                            # (B, P+T, hs)
    v = np.concatenate([v_cache, v_new], axis=-2)
    out, _ = scaled_dot_product_attention(q_new, k, v, causal=True)         # the T queries are the last T positions
    return out, k, v


def grade_kv_cache(fn, lang):
    rng = np.random.default_rng(13)

    def top_left(kc, vc, q, kn, vn):
        k, v = np.concatenate([kc, kn], -2), np.concatenate([vc, vn], -2)
        hidden = np.triu(np.ones((q.shape[-2], k.shape[-2]), bool), 1)
        return scaled_dot_product_attention(q, k, v, causal=False, mask=hidden)[0]
    offset = Mistake(top_left, {"en": "The causal mask starts at the cache's first key: the new queries sit at "
                                      "positions P .. P+T-1 and see every cached key",
                                "zh": "因果掩码从缓存的第一个键开始算了：新查询位于 P .. P+T-1，能看到缓存里的所有键"})

    def unmasked(kc, vc, q, kn, vn):
        k, v = np.concatenate([kc, kn], -2), np.concatenate([vc, vn], -2)
        return scaled_dot_product_attention(q, k, v, causal=False)[0]
    future = Mistake(unmasked, {"en": "A new query sees the new tokens after it: the causal mask is missing",
                                "zh": "新查询看到了它之后的新词元：少了因果掩码"})
    order = Mistake(lambda kc, vc, q, kn, vn: np.concatenate([kn, kc], -2), {
        "en": "The new keys went in front of the cached ones: positions must stay in order",
        "zh": "新的键被放到了缓存的前面：位置顺序必须保持"})
    cases = [(1, 0, 3, 4, np.float64), (2, 4, 1, 3, np.float64), (2, 3, 2, 4, np.float32), (1, 5, 3, 2, np.float64)]
    for i, (B, P, T, hs, dt) in enumerate(cases, 1):
        inputs = (_n(rng, dt, B, P, hs), _n(rng, dt, B, P, hs), *(_n(rng, dt, B, T, hs) for _ in range(3)))
        what = f"B={B}, P={P} cached, T={T} new, hs={hs}, {np.dtype(dt).name}"
        got = outputs(fn, inputs, ("out", "k", "v"), lang)
        for label, ours, want in zip(("k", "v", "out"), (got[1], got[2], got[0]), (*_kv_ref(*inputs)[1:], _kv_ref(*inputs)[0])):
            mistakes = (offset, future) if label == "out" else (order,) if label == "k" else ()
            in_case(i, what, lang, compare, label, ours, want, lang, mistakes=mistakes, inputs=inputs)
    return len(cases)
