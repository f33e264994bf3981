"""Answers for tests/test_exercises.py: for every exercise of ``zerollm exercise``, a right one built on
zerollm's own functions, and plausible wrong ones (a sign error, a missing term, a wrong axis, ...),
each with words its one-line verdict must contain (English) to point at the mistake.
"""

import math

import numpy as np

from zerollm.align.objectives.dpo import dpo_loss
from zerollm.align.rl.advantages import group_advantages
from zerollm.align.rl import losses
from zerollm.generation.sample import filter_logits
from zerollm.nn import activation, linear, lora, loss, norm
from zerollm.nn.self_attention import scaled_dot_product_attention, self_attention, softmax, softmax_backward
from zerollm.teach.exercises.attention import _kv_ref, _rope_ref, _sdpa_grads
from zerollm.teach.exercises.pipeline import _adamw_ref, _bpe_ref


# ----------------------------------------------------------------------------
# right answers (zerollm's own functions behind the exercise's signature)

def _attention(x, wq, wk, wv):
    r = self_attention(x, wq, wk, wv)
    return r.out, r.weights


def _ce(z, t):
    _, cache = loss.cross_entropy_forward(z, t)
    return loss.cross_entropy_backward(cache)


RIGHT = {
    "attention": _attention,
    "softmax": softmax,
    "softmax_backward": softmax_backward,
    "cross_entropy_backward": _ce,
    "layernorm_backward": lambda dy, x, w, b: norm.layernorm_backward(dy, norm.layernorm_forward(x, w, b)[1]),
    "rmsnorm_backward": lambda dy, x, w: norm.rmsnorm_backward(dy, norm.rmsnorm_forward(x, w)[1]),
    "gelu_backward": lambda dy, x: activation.gelu_tanh_backward(dy, activation.gelu_tanh_forward(x)[1]),
    "linear_backward": lambda dy, x, w: linear.linear_backward(dy, linear.linear_forward(x, w, np.zeros(w.shape[1],
                                                                                                      w.dtype))[1]),
    "attention_backward": _sdpa_grads,
    "rope": _rope_ref,
    "kv_cache": _kv_ref,
    "bpe_step": lambda ids, new_id: _bpe_ref(ids, new_id)[:2],
    "top_k_top_p": filter_logits,
    "adamw_step": _adamw_ref,
    "lora_backward": lambda dd, x, A, B, s: lora.lora_backward(dd, lora.lora_forward(x, A, B, s)[1]),
    "dpo_gradient": lambda pc, pr, rc, rr, beta: dpo_loss(pc, pr, rc, rr, beta),
    "grpo_advantages": group_advantages,
    "grpo_loss": lambda lp, old, ref, adv, mask, epsilon=0.2, beta=0.04: losses.grpo_loss(
        lp, old, ref, adv, mask, epsilon=epsilon, beta=beta),
}


# ----------------------------------------------------------------------------
# wrong answers: (function, words the verdict must contain)

def _att_parts(x, wq, wk, wv):
    q, k, v = x @ wq, x @ wk, x @ wv
    return q, k, v, q @ np.swapaxes(k, -1, -2)


def _masked(s):
    T = s.shape[-1]
    return np.where(np.triu(np.ones((T, T), bool), 1), -np.inf, s)


def _att_no_scale(x, wq, wk, wv):
    q, k, v, s = _att_parts(x, wq, wk, wv)
    w = softmax(_masked(s))
    return w @ v, w


def _att_no_mask(x, wq, wk, wv):
    q, k, v, s = _att_parts(x, wq, wk, wv)
    w = softmax(s / np.sqrt(q.shape[-1]))
    return w @ v, w


def _att_axis(x, wq, wk, wv):
    q, k, v, s = _att_parts(x, wq, wk, wv)
    w = softmax(_masked(s / np.sqrt(q.shape[-1])), axis=-2)
    return w @ v, w


def _sm_no_max(x):
    e = np.exp(x)
    return e / e.sum(-1, keepdims=True)


def _sm_axis(x):
    e = np.exp(x - x.max(0, keepdims=True))
    return e / e.sum(0, keepdims=True)


def _sm_nonorm(x):
    return np.exp(x - x.max(-1, keepdims=True))


def _ce_parts(z, t):
    p = softmax(z)
    onehot = np.eye(z.shape[-1], dtype=z.dtype)[np.where(t >= 0, t, 0)]
    valid = (t >= 0)[..., None]
    return p, onehot, valid, max(int(valid.sum()), 1)


def _ce_sign(z, t):
    p, oh, valid, n = _ce_parts(z, t)
    return ((oh - p) * valid / n).astype(z.dtype)


def _ce_sum(z, t):
    p, oh, valid, n = _ce_parts(z, t)
    return ((p - oh) * valid).astype(z.dtype)


def _ce_ignore(z, t):
    p, oh, valid, n = _ce_parts(z, t)
    return ((p - oh) / t.size).astype(z.dtype)


def _ln_parts(dy, x, w):
    mean = x.mean(-1, keepdims=True)
    rstd = 1 / np.sqrt(((x - mean) ** 2).mean(-1, keepdims=True) + 1e-5)
    xhat = (x - mean) * rstd
    dw = (dy * xhat).reshape(-1, x.shape[-1]).sum(0)
    db = dy.reshape(-1, x.shape[-1]).sum(0)
    return xhat, rstd, dy * w, dw, db


def _ln_no_mean(dy, x, w, b):
    xhat, rstd, d, dw, db = _ln_parts(dy, x, w)
    return rstd * (d - xhat * (d * xhat).mean(-1, keepdims=True)), dw, db


def _ln_no_var(dy, x, w, b):
    xhat, rstd, d, dw, db = _ln_parts(dy, x, w)
    return rstd * (d - d.mean(-1, keepdims=True)), dw, db


def _ln_dw_unsummed(dy, x, w, b):
    xhat, rstd, d, dw, db = _ln_parts(dy, x, w)
    dx = rstd * (d - d.mean(-1, keepdims=True) - xhat * (d * xhat).mean(-1, keepdims=True))
    return dx, (dy * xhat).reshape(-1, x.shape[-1]), db


def _rms_parts(dy, x, w):
    rstd = 1 / np.sqrt((x * x).mean(-1, keepdims=True) + 1e-5)
    xhat = x * rstd
    return xhat, rstd, dy * w, (dy * xhat).reshape(-1, x.shape[-1]).sum(0)


def _rms_const(dy, x, w):
    xhat, rstd, d, dw = _rms_parts(dy, x, w)
    return rstd * d, dw


def _rms_mean(dy, x, w):
    xhat, rstd, d, dw = _rms_parts(dy, x, w)
    dx = rstd * (d - xhat * (d * xhat).mean(-1, keepdims=True))
    return dx - dx.mean(-1, keepdims=True), dw


def _rms_sign(dy, x, w):
    xhat, rstd, d, dw = _rms_parts(dy, x, w)
    return rstd * (d + xhat * (d * xhat).mean(-1, keepdims=True)), dw


K = math.sqrt(2 / math.pi)


def _gelu_parts(x):
    t = np.tanh(K * (x + 0.044715 * x ** 3))
    return t, K * (1 + 3 * 0.044715 * x * x)


def _gelu_gate(dy, x):
    t, du = _gelu_parts(x)
    return dy * 0.5 * (1 + t)


def _gelu_cubic(dy, x):
    t, du = _gelu_parts(x)
    return dy * (0.5 * (1 + t) + 0.5 * x * (1 - t * t) * K)


def _gelu_sign(dy, x):
    t, du = _gelu_parts(x)
    return dy * (0.5 * (1 + t) - 0.5 * x * (1 - t * t) * du)


def _lin(dy, x, w):
    x2, dy2 = x.reshape(-1, x.shape[-1]), dy.reshape(-1, dy.shape[-1])
    return (dy2 @ w.T).reshape(x.shape), x2.T @ dy2, dy2.sum(0)


def _lin_transposed(dy, x, w):
    dx, dw, db = _lin(dy, x, w)
    return dx, dw.T, db


def _lin_db_mean(dy, x, w):
    dx, dw, db = _lin(dy, x, w)
    return dx, dw, dy.reshape(-1, dy.shape[-1]).mean(0)


def _lin_sign(dy, x, w):
    dx, dw, db = _lin(dy, x, w)
    return -dx, dw, db


def _sdpa_no_sum(dout, q, k, v):
    dq, dk, dv = _sdpa_grads(dout, q, k, v)
    s = _masked(q @ np.swapaxes(k, -1, -2) / np.sqrt(q.shape[-1]))
    a = softmax(s)
    ds = a * (dout @ np.swapaxes(v, -1, -2))
    return ds @ k / np.sqrt(q.shape[-1]), dk, dv


def _sdpa_dv(dout, q, k, v):
    dq, dk, dv = _sdpa_grads(dout, q, k, v)
    a = softmax(_masked(q @ np.swapaxes(k, -1, -2) / np.sqrt(q.shape[-1])))
    return dq, dk, a @ dout


def _sdpa_no_scale(dout, q, k, v):
    dq, dk, dv = _sdpa_grads(dout, q, k, v)
    return dq * np.sqrt(q.shape[-1]).astype(q.dtype), dk, dv


def _rope_parts(x, theta, exponent=2.0, sign=1.0):
    T, hs = x.shape[-2:]
    inv = theta ** (-exponent * np.arange(hs // 2) / hs)
    a = np.outer(np.arange(T), inv)
    c, s = np.cos(a), sign * np.sin(a)
    x1, x2 = x[..., : hs // 2], x[..., hs // 2:]
    return np.concatenate([x1 * c - x2 * s, x1 * s + x2 * c], -1).astype(x.dtype)


def _rope_interleaved(x, theta):
    T, hs = x.shape[-2:]
    a = np.outer(np.arange(T), theta ** (-2.0 * np.arange(hs // 2) / hs))
    c, s = np.cos(a), np.sin(a)
    y = np.empty_like(x)
    y[..., 0::2] = x[..., 0::2] * c - x[..., 1::2] * s
    y[..., 1::2] = x[..., 1::2] * c + x[..., 0::2] * s
    return y


def _kv_top_left(kc, vc, q, kn, vn):
    k, v = np.concatenate([kc, kn], -2), np.concatenate([vc, vn], -2)
    hidden = np.triu(np.ones((q.shape[-2], k.shape[-2]), bool), 1)
    return scaled_dot_product_attention(q, k, v, causal=False, mask=hidden)[0], k, v


def _kv_no_mask(kc, vc, q, kn, vn):
    k, v = np.concatenate([kc, kn], -2), np.concatenate([vc, vn], -2)
    return scaled_dot_product_attention(q, k, v, causal=False)[0], k, v


def _kv_order(kc, vc, q, kn, vn):
    out, k, v = _kv_ref(kc, vc, q, kn, vn)
    return out, np.concatenate([kn, kc], -2), v


def _bpe_largest_tie(ids, new_id):
    from collections import Counter
    counts = Counter(zip(ids, ids[1:]))
    best = max(counts, key=lambda p: (counts[p], p))
    return best, _bpe_ref(ids, new_id)[1] if best == _bpe_ref(ids, new_id)[0] else [new_id]


def _bpe_overlap(ids, new_id):
    best, _ = _bpe_ref(ids, new_id)[:2]
    out, i = [], 0
    while i < len(ids):                 # merges every position, even one already used by the previous merge
        if i + 1 < len(ids) and (ids[i], ids[i + 1]) == best:
            out.append(new_id)
        elif not (i > 0 and (ids[i - 1], ids[i]) == best):
            out.append(ids[i])
        i += 1
    return best, out


def _bpe_first_only(ids, new_id):
    best, _ = _bpe_ref(ids, new_id)[:2]
    for i in range(len(ids) - 1):
        if (ids[i], ids[i + 1]) == best:
            return best, ids[:i] + [new_id] + ids[i + 2:]
    return best, ids


def _topp_exclusive(logits, top_k, top_p):
    out = filter_logits(logits, top_k, None)
    if top_p is None:
        return out
    for row in out:
        order = np.argsort(-row)
        p = softmax(row[order])
        drop = np.cumsum(p) > top_p
        row[order[drop]] = -np.inf
    return out


def _topk_smallest(logits, top_k, top_p):
    out = np.array(logits, dtype=np.float64)
    if top_k is not None:
        kth = np.sort(out, -1)[:, top_k - 1:top_k]
        out[out > kth] = -np.inf
    return filter_logits(out, None, top_p)


def _topp_on_logits(logits, top_k, top_p):
    out = filter_logits(logits, top_k, None)
    if top_p is None:
        return out
    for row in out:
        order = np.argsort(-row)
        z = np.where(np.isfinite(row[order]), row[order], 0)
        share = z / z.sum()
        row[order[(np.cumsum(share) - share) >= top_p]] = -np.inf
    return out


def _adam(p, g, m, v, t, hp, correct=True, l2=False, eps_inside=False):
    b1, b2 = hp["betas"]
    if l2:
        g = g + hp["weight_decay"] * p
    m = b1 * m + (1 - b1) * g
    v = b2 * v + (1 - b2) * g * g
    mh, vh = (m / (1 - b1 ** t), v / (1 - b2 ** t)) if correct else (m, v)
    if not l2:
        p = p * (1 - hp["lr"] * hp["weight_decay"])
    denom = np.sqrt(vh + hp["eps"]) if eps_inside else np.sqrt(vh) + hp["eps"]
    return (p - hp["lr"] * mh / denom).astype(p.dtype), m.astype(p.dtype), v.astype(p.dtype)


def _sigmoid(a):
    return 1 / (1 + np.exp(-a))


def _dpo(pc, pr, rc, rr, beta, kind):
    z = (pc - pr) - (rc - rr)
    B = len(z)
    loss = float(np.logaddexp(0, -beta * z).mean())
    dz = {"sign": -beta * _sigmoid(beta * z) / B, "beta": -_sigmoid(-beta * z) / B,
          "mean": -beta * _sigmoid(-beta * z)}[kind]
    return loss, dz, -dz


def _adv(r, G, ddof=1, whole=False, eps=1e-4):
    g = r.reshape(-1, G)
    mean = r.mean() if whole else g.mean(1, keepdims=True)
    return ((g - mean) / (g.std(1, ddof=ddof, keepdims=True) + eps)).reshape(-1)


def _grpo(kind):
    def fn(lp, old, ref, adv, mask, epsilon=0.2, beta=0.04):
        if kind == "bnpo":
            return losses.grpo_loss(lp, old, ref, adv, mask, epsilon=epsilon, beta=beta, loss_type="bnpo")
        if kind == "nokl":
            return losses.grpo_loss(lp, old, ref, adv, mask, epsilon=epsilon, beta=0.0)
        loss_value, d = losses.grpo_loss(lp, old, ref, adv, mask, epsilon=epsilon, beta=beta)
        return loss_value, -d                           # "sign"
    return fn


WRONG = {
    "attention": [(_att_no_scale, "sqrt(d_k)"), (_att_no_mask, "causal mask"), (_att_axis, "axis")],
    "softmax": [(_sm_no_max, "subtract each row's max"), (_sm_axis, "LAST axis"), (_sm_nonorm, "division")],
    "softmax_backward": [(lambda dy, y: dy * y, "row's sum"), (lambda dy, y: -softmax_backward(dy, y), "sign"),
                         (lambda dy, y: y * (dy - (dy * y).sum(0, keepdims=True)), "wrong axis")],
    "cross_entropy_backward": [(_ce_sign, "sign"), (_ce_sum, "1/count"), (_ce_ignore, "-100")],
    "layernorm_backward": [(_ln_no_mean, "through the mean"), (_ln_no_var, "through the variance"),
                           (_ln_dw_unsummed, "dw has shape")],
    "rmsnorm_backward": [(_rms_const, "constant"), (_rms_mean, "mean-shift"), (_rms_sign, "dx is wrong")],
    "gelu_backward": [(_gelu_gate, "product rule"), (_gelu_cubic, "x^3"), (_gelu_sign, "dx is wrong")],
    "linear_backward": [(_lin_transposed, "transposed"), (_lin_db_mean, "sum"), (_lin_sign, "sign")],
    "attention_backward": [(_sdpa_no_sum, "row-sum"), (_sdpa_dv, "transposed"), (_sdpa_no_scale, "factor")],
    "rope": [(_rope_interleaved, "i + hs/2"), (lambda x, th: _rope_parts(x, th, sign=-1.0), "sign of the sin"),
             (lambda x, th: _rope_parts(x, th, exponent=1.0), "frequencies")],
    "kv_cache": [(_kv_top_left, "positions P"), (_kv_no_mask, "causal mask"), (_kv_order, "in order")],
    "bpe_step": [(_bpe_largest_tie, "smallest"), (_bpe_overlap, "a a a"), (_bpe_first_only, "wrong from position")],
    "top_k_top_p": [(_topp_exclusive, "past top_p"), (_topk_smallest, "tokens kept"),
                    (_topp_on_logits, "tokens kept")],
    "adamw_step": [(lambda *a: _adam(*a, correct=False), "bias correction"), (lambda *a: _adam(*a, l2=True), "L2"),
                   (lambda *a: _adam(*a, eps_inside=True), "square root")],
    "lora_backward": [(lambda dd, x, A, B, s: _lora_wrong(dd, x, A, B, s, "scale"), "factor"),
                      (lambda dd, x, A, B, s: _lora_wrong(dd, x, A, B, s, "transpose"), "transposed"),
                      (lambda dd, x, A, B, s: _lora_wrong(dd, x, A, B, s, "sign"), "sign")],
    "dpo_gradient": [(lambda *a: _dpo(*a, "sign"), "sigmoid(-beta z)"), (lambda *a: _dpo(*a, "beta"), "beta"),
                     (lambda *a: _dpo(*a, "mean"), "factor")],
    "grpo_advantages": [(lambda r, G: _adv(r, G, ddof=0), "Bessel"), (lambda r, G: _adv(r, G, whole=True), "own group"),
                        (lambda r, G: _adv(r, G, eps=0.0), "std 0")],
    "grpo_loss": [(_grpo("bnpo"), "each answer's tokens"), (_grpo("nokl"), "KL"), (_grpo("sign"), "sign")],
}


def _lora_wrong(dd, x, A, B, s, kind):
    dx, dA, dB = lora.lora_backward(dd, lora.lora_forward(x, A, B, s)[1])
    if kind == "scale":
        return dx / s, dA / s, dB / s
    if kind == "transpose":
        return dx, dA, dB.T
    return dx, -dA, dB
