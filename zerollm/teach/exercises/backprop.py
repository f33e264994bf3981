"""Exercises on single layers' forward and backward passes (Parts 1-3, 8 of the course): softmax and its
backward, cross-entropy, LayerNorm, RMSNorm, GELU, a linear layer and a LoRA layer.

Each ``grade_*`` draws inputs of several shapes and dtypes, runs zerollm's own layer as the reference,
runs the learner's function, and compares (grading.compare); backward passes are also checked
against finite differences of zerollm's forward. Shapes: B batch, T time, C channels, V vocabulary.
"""

import math

import numpy as np

from zerollm.nn.activation import gelu_tanh_backward, gelu_tanh_forward
from zerollm.nn.linear import linear_backward, linear_forward
from zerollm.nn.lora import lora_backward, lora_forward
from zerollm.nn.loss import cross_entropy_backward, cross_entropy_forward
from zerollm.nn.norm import layernorm_backward, layernorm_forward, rmsnorm_backward, rmsnorm_forward
from zerollm.nn.self_attention import softmax, softmax_backward
from zerollm.teach.exercises.grading import Exercise, Mistake, compare, finite_differences, in_case, outputs


def _n(rng, dtype, *shape, scale=1.0):
    return (rng.standard_normal(shape) * scale).astype(dtype)


def _cases(seed=0):
    """Three shapes, float64 first (it also gets finite differences), then float32."""
    rng = np.random.default_rng(seed)
    return rng, [((2, 3, 5), np.float64), ((4, 7), np.float32), ((1, 2, 3, 6), np.float64)]


def _what(shape, dtype):
    return f"shape {shape}, {np.dtype(dtype).name}"


# ----------------------------------------------------------------------------
# softmax

def grade_softmax(fn, lang):
    rng, cases = _cases()
    wrong_axis = Mistake(lambda x: softmax(x, axis=0), {
        "en": "Each row should add up to 1 along the LAST axis; yours are normalised along another one",
        "zh": "每一行应沿最后一个轴加起来等于 1；你的结果是沿另一个轴归一化的"})
    unnormalised = Mistake(lambda x: np.exp(x - x.max(axis=-1, keepdims=True)), {
        "en": "The rows do not add up to 1: the division by the row's sum is missing",
        "zh": "每行加起来不等于 1：少了除以该行之和这一步"})
    whole = Mistake(lambda x: np.exp(x - x.max()) / np.exp(x - x.max()).sum(), {
        "en": "The whole array adds up to 1, not each row: the sum must run over the last axis only",
        "zh": "整个数组加起来等于 1，而不是每一行：求和只能沿最后一个轴"})
    overflow = {"en": "exp of a large number overflows: subtract each row's max before exp",
                "zh": "大数的 exp 会溢出：先减去每行的最大值再取 exp"}
    for i, (shape, dt) in enumerate(cases + [((3, 4), np.float64)], 1):
        x = _n(rng, dt, *shape, scale=3.0)
        if i == 3:
            x.reshape(-1, shape[-1])[0, 1] = -np.inf          # a masked entry: weight 0
        if i == 4:
            x = x + dt(800.0)                                 # logits this large overflow a bare exp
        y = outputs(fn, (x,), ("y",), lang)[0]
        in_case(i, _what(shape, dt), lang, compare, "y", y, softmax(x), lang,
                mistakes=(wrong_axis, unnormalised, whole), inputs=(x,), nonfinite_note=overflow)
    return 4


def grade_softmax_backward(fn, lang):
    rng, cases = _cases(1)
    diagonal = Mistake(lambda dy, y: dy * y, {
        "en": "Only the diagonal of the Jacobian is there: the term from the row's sum (every output depends "
              "on every input through the normaliser) is missing",
        "zh": "只用了雅可比矩阵的对角线：少了来自行和的那一项（每个输出都通过归一化分母依赖每个输入）"})
    axis = Mistake(lambda dy, y: y * (dy - (dy * y).sum(axis=0, keepdims=True)), {
        "en": "The sum runs over the wrong axis: it must run over the axis softmax normalised (the last)",
        "zh": "求和的轴错了：应沿 softmax 归一化的那个轴（最后一个轴）"})
    for i, (shape, dt) in enumerate(cases, 1):
        y = softmax(_n(rng, dt, *shape, scale=2.0))
        dy = _n(rng, dt, *shape)
        dx = outputs(fn, (dy, y), ("dx",), lang)[0]
        in_case(i, _what(shape, dt), lang, compare, "dx", dx, softmax_backward(dy, y), lang,
                mistakes=(diagonal, axis), inputs=(dy, y))
    x = _n(rng, np.float64, 2, 5, scale=2.0)
    finite_differences("dx", lambda x: (softmax(x),) * 2, lambda d, y: (fn(d, y),), [x], (0,), lang)
    return len(cases) + 1


# ----------------------------------------------------------------------------
# cross-entropy

def _ce_ref(logits, targets):
    _, cache = cross_entropy_forward(logits, targets)
    return cross_entropy_backward(cache)


def _onehot(logits, targets):
    t = np.where(targets >= 0, targets, 0)
    return np.eye(logits.shape[-1], dtype=logits.dtype)[t]


def grade_cross_entropy_backward(fn, lang):
    rng = np.random.default_rng(2)
    every_row = Mistake(lambda z, t: (softmax(z) - _onehot(z, t)) / t.size, {
        "en": "Positions whose target is -100 (ignored) still get a gradient, or count in the mean: "
              "they count for nothing",
        "zh": "目标为 -100（忽略）的位置仍有梯度，或被算进了平均数：它们应完全不计"})
    summed = Mistake(lambda z, t: (softmax(z) - _onehot(z, t)) * (t >= 0)[..., None], {
        "en": "The loss is the MEAN over the counted positions: the gradient is missing the 1/count",
        "zh": "损失是对计入位置的平均：梯度少了 1/count"})
    no_onehot = Mistake(lambda z, t: softmax(z) * (t >= 0)[..., None] / max((t >= 0).sum(), 1), {
        "en": "The term from -z[target] (the one-hot) is missing",
        "zh": "少了来自 -z[target] 的那一项（one-hot）"})
    cases = [((2, 4, 7), np.float64), ((5, 3), np.float32), ((3, 2, 6), np.float64)]
    for i, (shape, dt) in enumerate(cases, 1):
        z = _n(rng, dt, *shape, scale=2.0)
        t = rng.integers(0, shape[-1], shape[:-1])
        t.reshape(-1)[1] = -100
        dz = outputs(fn, (z, t), ("dlogits",), lang)[0]
        in_case(i, _what(shape, dt), lang, compare, "dlogits", dz, _ce_ref(z, t), lang,
                mistakes=(every_row, summed, no_onehot), inputs=(z, t))
    z, t = _n(rng, np.float64, 3, 5, scale=2.0), np.array([1, -100, 4])

    def forward(z):
        loss, cache = cross_entropy_forward(z, t)
        return np.asarray(loss), cache
    finite_differences("dlogits", forward, lambda d, c: (fn(z, t) * d,), [z], (0,), lang)
    return len(cases) + 1


# ----------------------------------------------------------------------------
# LayerNorm and RMSNorm

def _norm_inputs(rng, dt, shape):
    x = _n(rng, dt, *shape, scale=2.0) + dt(1.0)
    return x, _n(rng, dt, shape[-1]) + dt(1.0), _n(rng, dt, shape[-1]), _n(rng, dt, *shape)


def _ln_parts(dy, x, w):
    """(xhat, rstd, dxhat) of LayerNorm, for the mistakes' variants."""
    y, cache = layernorm_forward(x, w)
    return cache.xhat, cache.rstd, dy * w


def grade_layernorm_backward(fn, lang):
    rng, cases = _cases(3)
    no_mean = Mistake(lambda dy, x, w, b: (lambda xh, r, d: r * (d - xh * (d * xh).mean(-1, keepdims=True)))(
        *_ln_parts(dy, x, w)), {
        "en": "The path through the mean is missing (shifting every x by the same amount changes nothing, "
              "so that component of dx must go)",
        "zh": "少了经过均值的那条路径（把所有 x 平移同一个量不改变输出，dx 中这一分量应去掉）"})
    no_var = Mistake(lambda dy, x, w, b: (lambda xh, r, d: r * (d - d.mean(-1, keepdims=True)))(
        *_ln_parts(dy, x, w)), {
        "en": "The path through the variance is missing (rstd depends on x too)",
        "zh": "少了经过方差的那条路径（rstd 也依赖 x）"})
    neither = Mistake(lambda dy, x, w, b: (lambda xh, r, d: r * d)(*_ln_parts(dy, x, w)), {
        "en": "mean and rstd were treated as constants: both of their paths back to x are missing",
        "zh": "把 mean 和 rstd 当成了常数：两条回到 x 的路径都少了"})
    for i, (shape, dt) in enumerate(cases, 1):
        x, w, b, dy = _norm_inputs(rng, dt, shape)
        ref = layernorm_backward(dy, layernorm_forward(x, w, b)[1])
        got = outputs(fn, (dy, x, w, b), ("dx", "dw", "db"), lang)
        for label, ours, want in zip(("dx", "dw", "db"), got, ref):
            in_case(i, _what(shape, dt), lang, compare, label, ours, want, lang,
                    mistakes=(no_mean, no_var, neither) if label == "dx" else (), inputs=(dy, x, w, b))
    x, w, b, _ = _norm_inputs(rng, np.float64, (3, 5))
    finite_differences("(dx, dw, db)", layernorm_forward, lambda d, c: fn(d, x, w, b), [x, w, b], (0, 1, 2), lang)
    return len(cases) + 1


def grade_rmsnorm_backward(fn, lang):
    rng, cases = _cases(4)

    def plain(dy, x, w):
        _, cache = rmsnorm_forward(x, w)
        return dy * w * cache.rstd
    constant = Mistake(plain, {"en": "rstd was treated as a constant: its path back to x is missing",
                               "zh": "把 rstd 当成了常数：少了它回到 x 的路径"})

    def centred(dy, x, w):
        dx = rmsnorm_backward(dy, rmsnorm_forward(x, w)[1])[0]
        return dx - dx.mean(-1, keepdims=True)
    mean_term = Mistake(centred, {"en": "RMSNorm does not subtract the mean: there is no mean-shift term "
                                        "(that one is LayerNorm's)",
                                  "zh": "RMSNorm 不减均值：没有均值平移那一项（那是 LayerNorm 的）"})
    for i, (shape, dt) in enumerate(cases, 1):
        x, w, _, dy = _norm_inputs(rng, dt, shape)
        ref = rmsnorm_backward(dy, rmsnorm_forward(x, w)[1])
        got = outputs(fn, (dy, x, w), ("dx", "dw"), lang)
        for label, ours, want in zip(("dx", "dw"), got, ref):
            in_case(i, _what(shape, dt), lang, compare, label, ours, want, lang,
                    mistakes=(constant, mean_term) if label == "dx" else (), inputs=(dy, x, w))
    x, w, _, _ = _norm_inputs(rng, np.float64, (3, 5))
    finite_differences("(dx, dw)", rmsnorm_forward, lambda d, c: fn(d, x, w), [x, w], (0, 1), lang)
    return len(cases) + 1


# ----------------------------------------------------------------------------
# GELU (tanh), linear, LoRA

_K = math.sqrt(2.0 / math.pi)


def grade_gelu_backward(fn, lang):
    rng, cases = _cases(5)
    only_gate = Mistake(lambda dy, x: dy * 0.5 * (1 + np.tanh(_K * (x + 0.044715 * x ** 3))), {
        "en": "Only 0.5 (1 + tanh u) is there: the product rule's second term (x times the derivative of "
              "the gate) is missing",
        "zh": "只有 0.5 (1 + tanh u)：少了乘积法则的第二项（x 乘以门控的导数）"})

    def no_cubic(dy, x):
        t = np.tanh(_K * (x + 0.044715 * x ** 3))
        return dy * (0.5 * (1 + t) + 0.5 * x * (1 - t * t) * _K)
    cubic = Mistake(no_cubic, {"en": "du/dx lost the derivative of the 0.044715 x^3 term",
                               "zh": "du/dx 少了 0.044715 x^3 那一项的导数"})
    for i, (shape, dt) in enumerate(cases, 1):
        x, dy = _n(rng, dt, *shape, scale=2.0), _n(rng, dt, *shape)
        dx = outputs(fn, (dy, x), ("dx",), lang)[0]
        in_case(i, _what(shape, dt), lang, compare, "dx", dx, gelu_tanh_backward(dy, gelu_tanh_forward(x)[1]),
                lang, mistakes=(only_gate, cubic), inputs=(dy, x))
    x = _n(rng, np.float64, 3, 4, scale=2.0)
    finite_differences("dx", gelu_tanh_forward, lambda d, c: (fn(d, x),), [x], (0,), lang)
    return len(cases) + 1


def grade_linear_backward(fn, lang):
    rng = np.random.default_rng(6)
    per_row = Mistake(lambda dy, x, w: dy.reshape(-1, dy.shape[-1]).mean(0), {
        "en": "db is a mean over the rows; each row adds its own gradient, so it is their sum",
        "zh": "db 取了各行的平均；每一行都贡献自己的梯度，所以应是求和"})
    cases = [((2, 3, 4), 5, np.float64), ((6, 3), 2, np.float32), ((1, 4, 2, 5), 3, np.float64)]
    for i, (shape, o, dt) in enumerate(cases, 1):
        x, w, b = _n(rng, dt, *shape), _n(rng, dt, shape[-1], o), _n(rng, dt, o)
        dy = _n(rng, dt, *shape[:-1], o)
        ref = linear_backward(dy, linear_forward(x, w, b)[1])
        got = outputs(fn, (dy, x, w), ("dx", "dw", "db"), lang)
        for label, ours, want in zip(("dx", "dw", "db"), got, ref):
            in_case(i, _what(shape, dt) + f" -> {o}", lang, compare, label, ours, want, lang,
                    mistakes=(per_row,) if label == "db" else (), inputs=(dy, x, w))
    x, w, b = _n(rng, np.float64, 2, 3, 4), _n(rng, np.float64, 4, 3), _n(rng, np.float64, 3)
    finite_differences("(dx, dw, db)", linear_forward, lambda d, c: fn(d, x, w), [x, w, b], (0, 1, 2), lang)
    return len(cases) + 1


def grade_lora_backward(fn, lang):
    rng = np.random.default_rng(7)
    cases = [((2, 3, 6), 2, 5, np.float64), ((4, 5), 3, 4, np.float32), ((1, 2, 7), 1, 3, np.float64)]
    for i, (shape, r, o, dt) in enumerate(cases, 1):
        x, A, B = _n(rng, dt, *shape), _n(rng, dt, shape[-1], r, scale=0.5), _n(rng, dt, r, o, scale=0.5)
        scale = 2.0 / r
        dd = _n(rng, dt, *shape[:-1], o)
        ref = lora_backward(dd, lora_forward(x, A, B, scale)[1])
        got = outputs(fn, (dd, x, A, B, scale), ("dx", "dA", "dB"), lang)
        for label, ours, want in zip(("dx", "dA", "dB"), got, ref):
            in_case(i, _what(shape, dt) + f", rank {r}", lang, compare, label, ours, want, lang)
    x, A, B = _n(rng, np.float64, 2, 3, 4), _n(rng, np.float64, 4, 2), _n(rng, np.float64, 2, 3)
    finite_differences("(dx, dA, dB)", lambda x, A, B: lora_forward(x, A, B, 0.5), lambda d, c: fn(d, x, A, B, 0.5),
                       [x, A, B], (0, 1, 2), lang)
    return len(cases) + 1
