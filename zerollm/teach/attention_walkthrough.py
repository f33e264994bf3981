"""``zerollm attention``: self-attention computed by hand, every step printed and explained.

With no arguments it runs the course's seed example (B=1, T=3, d_model=4, d_k=2) and prints
exactly the seed's numbers. ``--random`` makes an example of any size, ``--x/--wq/--wk/--wv``
reads the learner's own numbers, ``--json`` dumps every intermediate. The JSON text grows as T^2
(four (B, T, T) matrices), so ``--json`` takes at most ``JSON_MAX_NUMBERS`` numbers: T up to 510
for B=1 and d_k=4; the printed walkthrough has no such cap.
"""

import json
import math
import sys
from typing import NamedTuple

import numpy as np

from zerollm.model import budget
from zerollm.io.argtypes import SEED, int_in_range, positive_int
from zerollm.io.arrayio import load_array
from zerollm.nn.self_attention import self_attention
from zerollm.io.errors import ZeroLLMError
from zerollm.io.i18n import add_lang_argument, resolve_lang, translator
from zerollm.teach.fmt import heading, matrix, number, to_json, vector

# ----------------------------------------------------------------------------
# the seed's example: 3 tokens with 4 numbers each, projected to d_k = 2

SEED_X = [[[0.1, 0.2, 0.3, 0.4],    # token 0
           [0.5, 0.4, 0.3, 0.2],    # token 1
           [0.0, 0.1, 0.0, 0.1]]]   # token 2
SEED_WQ = [[0.2, -0.1], [0.0, 0.1], [0.1, 0.2], [-0.1, 0.0]]
SEED_WK = [[0.1, 0.1], [0.0, -0.1], [0.2, 0.0], [0.0, 0.2]]
SEED_WV = [[0.1, 0.0], [-0.1, 0.1], [0.2, -0.1], [0.0, 0.2]]

MAX_EXPLAINED_ROWS = 8   # beyond this, the per-row explanations are cut short
# --json writes each number as ~10 characters of text at ~2.5 us each: 2^20 numbers are ~10 MB and
# a few seconds; T=2000 would be 140 MB and a minute, T=5000 gigabytes.
JSON_MAX_NUMBERS = 1 << 20

# ----------------------------------------------------------------------------
# the explanations, in both languages (format fields are filled in at print time)

TEXT = {
    "title": {
        "zh": "手算自注意力（B={B}, T={T}, d_model={C}, d_k={K}）{source}",
        "en": "Self-attention by hand (B={B}, T={T}, d_model={C}, d_k={K}){source}",
    },
    "source_seed": {"zh": " —— 课程里的示例", "en": " — the course's example"},
    "source_random": {"zh": " —— 随机示例 seed={seed}", "en": " — random example, seed={seed}"},
    "source_files": {"zh": " —— 你自己的数据", "en": " — your own numbers"},
    "input": {
        "zh": "输入 X：形状 {shape}。每一行是一个 token 的向量（{C} 个数）。\n"
              "在真实模型里这些向量来自词嵌入加位置编码；这里直接给定。",
        "en": "Input X: shape {shape}. Each row is one token's vector ({C} numbers).\n"
              "In a real model these come from token embeddings plus positions; here they are given.",
    },
    "weights_in": {
        "zh": "三个投影矩阵 Wq、Wk、Wv，形状 {wq}、{wk}、{wv}：把每个 {C} 维向量压成 {K} 维。\n"
              "它们是模型学出来的参数；这里为了能手算，直接写死。",
        "en": "Three projection matrices Wq, Wk, Wv with shapes {wq}, {wk}, {wv}: each maps a\n"
              "{C}-number vector to {K} numbers. A model learns them; here they are fixed so you can check by hand.",
    },
    "batch": {"zh": "—— 第 {b} 个序列（batch 下标 {b}）——", "en": "--- sequence {b} (batch index {b}) ---"},
    "step1": {
        "zh": "第 1 步：线性投影 Q = X @ Wq，K = X @ Wk，V = X @ Wv",
        "en": "Step 1: linear projections Q = X @ Wq, K = X @ Wk, V = X @ Wv",
    },
    "step1_shape": {
        "zh": "{x} @ {w} -> {out}：只有最后一维从 d_model={C} 变成 d_k={K}，batch 和序列长度不变。",
        "en": "{x} @ {w} -> {out}: only the last dim changes, from d_model={C} to d_k={K}; batch and length stay.",
    },
    "q": {"zh": "Q（查询：这个 token 想找什么样的信息）形状 {shape}",
          "en": "Q (query: what this token is looking for), shape {shape}"},
    "k": {"zh": "K（键：这个 token 能被什么样的查询找到）形状 {shape}",
          "en": "K (key: what this token can be found by), shape {shape}"},
    "v": {"zh": "V（值：这个 token 被关注时交出去的内容）形状 {shape}",
          "en": "V (value: what this token hands over when attended to), shape {shape}"},
    "step2": {
        "zh": "第 2 步：缩放点积 scores = Q @ K^T * scale",
        "en": "Step 2: scaled dot product scores = Q @ K^T * scale",
    },
    "scale": {
        "zh": "缩放因子 scale = 1/sqrt(d_k) = 1/sqrt({K}) = {scale}\n"
              "为什么要缩放：d_k 个乘积相加，点积的方差随 d_k 增长；不缩放的话分数太大，\n"
              "softmax 会几乎变成 one-hot，梯度也随之变得极小。乘以 1/sqrt(d_k) 让分数的尺度与 d_k 无关。",
        "en": "scale = 1/sqrt(d_k) = 1/sqrt({K}) = {scale}\n"
              "Why scale: a dot product adds d_k products, so its spread grows with d_k. Unscaled,\n"
              "big scores push softmax towards one-hot and its gradients towards zero; 1/sqrt(d_k) keeps the size steady.",
    },
    "scores": {
        "zh": "注意力分数 {shape}：第 i 行第 j 列 = 查询 i 与键 j 的相似度\n"
              "  行 = 查询（正在看的 token），列 = 键（被看的 token）",
        "en": "Attention scores {shape}: row i, column j = how well query i matches key j\n"
              "  rows = queries (the token looking), columns = keys (the token looked at)",
    },
    "step3_causal": {
        "zh": "第 3 步：因果掩码 —— 每个 token 只能看见自己和前面的 token",
        "en": "Step 3: causal mask - each token may look only at itself and earlier tokens",
    },
    "causal_why": {
        "zh": "GPT 这类解码器逐个预测下一个 token：训练时如果位置 i 能看到 i 之后的 token，就等于偷看了答案。\n"
              "所以把对角线以上的位置遮住（1 = 遮住，0 = 可见）：",
        "en": "A decoder such as GPT predicts the next token; if position i could see later tokens during\n"
              "training it would be reading the answer. So everything above the diagonal is hidden (1 = hidden, 0 = visible):",
    },
    "masked": {
        "zh": "遮住后的分数：被遮住的位置设为 -inf。softmax 里 exp(-inf) = 0，所以它们的权重严格为 0。\n"
              "（课程里用 -1e9，效果几乎一样；-inf 得到的是精确的 0，并且保持 float32 不变。）",
        "en": "Masked scores: hidden positions become -inf. In softmax exp(-inf) = 0, so their weight is exactly 0.\n"
              "(The course uses -1e9, which is almost the same; -inf gives an exact 0 and keeps float32 as float32.)",
    },
    "step3_bidir": {
        "zh": "第 3 步：不加掩码（双向，BERT 式编码器）",
        "en": "Step 3: no mask (bidirectional, a BERT-style encoder)",
    },
    "bidir_why": {
        "zh": "编码器一次读入整句话，任务不是预测下一个 token，所以每个 token 都可以看见左右两边的全部 token。\n"
              "掩码全为 0，分数原样进入 softmax。",
        "en": "An encoder reads the whole sentence at once and does not predict the next token, so every token\n"
              "may see all tokens on both sides. The mask is all 0 and the scores go into softmax unchanged.",
    },
    "step4": {
        "zh": "第 4 步：softmax 把每一行分数变成权重",
        "en": "Step 4: softmax turns each row of scores into weights",
    },
    "softmax_how": {
        "zh": "weights = exp(s - max) / sum(exp(s - max))，逐行计算。先减去每行的最大值不改变结果，\n"
              "但保证 exp 不会溢出。每一行都是一个概率分布：非负，和为 1。",
        "en": "weights = exp(s - max) / sum(exp(s - max)), row by row. Subtracting the row max changes nothing\n"
              "but keeps exp from overflowing. Every row is a probability distribution: non-negative, summing to 1.",
    },
    "weights": {"zh": "注意力权重 {shape}：", "en": "Attention weights {shape}:"},
    "row_weights": {
        "zh": "  第 {i} 行：token {i} 能看见 {seen}，权重 {w}，和 = {total}",
        "en": "  row {i}: token {i} can see {seen}, weights {w}, sum = {total}",
    },
    "seen_one": {"zh": "token {a}", "en": "token {a}"},
    "seen_range": {"zh": "token {a} 到 {b}", "en": "tokens {a} to {b}"},
    "seen_none": {"zh": "（没有可见的 token）", "en": "(no visible token)"},
    "step5": {
        "zh": "第 5 步：按权重对 V 加权求和 out = weights @ V",
        "en": "Step 5: weighted sum of the values out = weights @ V",
    },
    "out_shape": {
        "zh": "{w} @ {v} -> {out}：每个 token 得到一个新的 {hv} 维向量。",
        "en": "{w} @ {v} -> {out}: every token gets a new {hv}-number vector.",
    },
    "out": {"zh": "输出 {shape}：", "en": "Output {shape}:"},
    "row_out": {"zh": "  第 {i} 行：out[{i}] = {terms} = {value}",
                "en": "  row {i}: out[{i}] = {terms} = {value}"},
    "rows_cut": {"zh": "  ……（只解释前 {n} 行）", "en": "  ... (only the first {n} rows are explained)"},
    "summary": {
        "zh": "小结：每个输出向量都是它能看见的那些值向量的加权平均；权重来自 查询·键 的相似度。\n"
              "Wq、Wk、Wv 是学出来的，所以“谁该关注谁”也是学出来的。",
        "en": "In short: every output vector is a weighted average of the value vectors its token can see; the\n"
              "weights come from query-key similarity. Wq, Wk, Wv are learned, so who attends to whom is learned too.",
    },
    "compare": {
        "zh": "与因果版本相比：每一行现在覆盖全部 {T} 个 token；第 {row} 行变化最大（最大变化 {delta}）；"
              "最后一行{last}。",
        "en": "Compared with the causal version: every row now covers all {T} tokens; row {row} changed most "
              "(largest change {delta}); the last row {last}.",
    },
    "last_same": {"zh": "完全不变（它本来就能看见所有 token）",
                  "en": "is unchanged (it could already see every token)"},
    "last_changed": {"zh": "也变了（变化 {delta}）",
                     "en": "changed too (by {delta})"},
}


say = translator(TEXT)


# ----------------------------------------------------------------------------
# arguments

def add_arguments(p):
    add_lang_argument(p)
    p.add_argument("--bidirectional", action="store_true",
                   help="no causal mask (a BERT-style encoder); also shows how the weights changed")
    g = p.add_argument_group("random example (any of these implies --random)")
    g.add_argument("--random", action="store_true", help="use random X and weights instead of the seed's")
    g.add_argument("--batch", type=positive_int, help="B, number of sequences (default 1)")
    g.add_argument("--seq", type=positive_int, help="T, tokens per sequence (default 4)")
    g.add_argument("--d-model", type=positive_int, help="C, numbers per token (default 8)")
    g.add_argument("--d-k", type=positive_int, help="d_k, width of queries/keys/values (default 4)")
    g.add_argument("--seed", type=SEED, default=0, help="random seed (default 0)")
    f = p.add_argument_group("your own numbers (.npy or .json nested lists; give all four)")
    f.add_argument("--x", metavar="FILE", help="X, shape (T, d_model) or (B, T, d_model)")
    f.add_argument("--wq", metavar="FILE", help="Wq, shape (d_model, d_k)")
    f.add_argument("--wk", metavar="FILE", help="Wk, shape (d_model, d_k)")
    f.add_argument("--wv", metavar="FILE", help="Wv, shape (d_model, d_v)")
    p.add_argument("--dtype", choices=("float32", "float64"), default="float32",
                   help="precision of the computation (default float32, as in the course)")
    p.add_argument("--json", action="store_true",
                   help=f"print every intermediate as one JSON object (at most {JSON_MAX_NUMBERS:,} numbers: "
                        "T up to 510 for B=1, d_k=4)")
    p.add_argument("--precision", type=int_in_range(0, 16), default=4, help="decimals to print (default 4)")


# ----------------------------------------------------------------------------
# choosing the example

def memory_estimate(B, T, C, K, as_json=False):
    """Bytes the walkthrough holds: X and the weights, q/k/v/out, and four (B, T, T) arrays (scores,
    masked scores, weights, mask), each in float64 and once more in the chosen dtype; --json turns
    every number into a Python float in nested lists (about 40 bytes each)."""
    terms = {"BTC": B * T * C, "CK": 3 * C * K, "BTK": 4 * B * T * K, "BTT": 4 * B * T * T}
    numbers = sum(terms.values())
    parts = (("arrays (float64, then the chosen dtype)", 2 * 8 * numbers),
             ("JSON lists", 40 * numbers if as_json else 0))
    # the flags that drive it: halving one halves the terms it is in (--seq twice in (B, T, T)); a value of 1
    # cannot be lowered
    share = {flag: sum(n * term.count(dim) for term, n in terms.items())
             for flag, dim, value in (("--seq", "T", T), ("--batch", "B", B), ("--d-model", "C", C), ("--d-k", "K", K))
             if value > 1}
    flags = sorted((f for f in share if 2 * share[f] >= numbers), key=share.get, reverse=True) or ["--seq"]
    return budget.Estimate("this attention example", parts, " or ".join(flags))


def json_numbers(B, T, K, Kv):
    """Numbers --json writes: four (B, T, T) arrays (scores, mask, masked scores, weights), q and k
    (B, T, d_k), v and out (B, T, d_v), and the scale.

    >>> json_numbers(1, 3, 2, 2)        # the seed's example
    61
    """
    return 4 * B * T * T + 2 * B * T * K + 2 * B * T * Kv + 1


def largest_json_T(B, K, Kv):
    """The largest T whose --json output stays within JSON_MAX_NUMBERS (0 if none does).

    >>> largest_json_T(1, 4, 4)
    510
    """
    a, b, c = 4 * B, 2 * B * (K + Kv), JSON_MAX_NUMBERS - 1        # a T^2 + b T <= c
    T = (math.isqrt(b * b + 4 * a * c) - b) // (2 * a) if c > 0 else 0
    while T > 0 and json_numbers(B, T, K, Kv) > JSON_MAX_NUMBERS:  # isqrt rounds down: at most a step off
        T -= 1
    while json_numbers(B, T + 1, K, Kv) <= JSON_MAX_NUMBERS:
        T += 1
    return T


def check_json_size(B, T, K, Kv, fix_T, fix_small):
    """Refuse a --json output too big to print in seconds. ``fix_T`` says how to set a smaller T
    (``{most}`` is filled in); ``fix_small`` what to do when even T=1 is too big."""
    n = json_numbers(B, T, K, Kv)
    if n <= JSON_MAX_NUMBERS:
        return
    most = largest_json_T(B, K, Kv)
    head = (f"--json prints every intermediate as text: B={B}, T={T}, d_k={K} make {n:,} numbers "
            f"(four (B, T, T) matrices grow as T^2), more than the {JSON_MAX_NUMBERS:,} it allows")
    fix = f"T can be at most {most:,} here: use {fix_T.format(most=f'{most:,}')}" if most else \
        f"too many even at T=1: use {fix_small}"
    raise ZeroLLMError(f"{head}; {fix}, or leave out --json for the printed walkthrough")


def _random_example(args):
    B, T = args.batch or 1, args.seq or 4
    C, K = args.d_model or 8, args.d_k or 4
    if args.json:
        check_json_size(B, T, K, K, "--seq {most} or less", "a smaller --batch or --d-k")
    budget.require(memory_estimate(B, T, C, K, args.json))   # before drawing anything (no --force here)
    rng = np.random.default_rng(args.seed)
    x = rng.standard_normal((B, T, C))
    # weights ~ N(0, 1/C) keep q.k of order 1, as a trained model's would be
    wq, wk, wv = (rng.standard_normal((C, K)) / np.sqrt(C) for _ in range(3))
    return x, wq, wk, wv


def _files_example(args):
    names = ("--x", "--wq", "--wk", "--wv")
    paths = (args.x, args.wq, args.wk, args.wv)
    missing = [n for n, p in zip(names, paths) if p is None]
    if missing:
        raise ZeroLLMError(f"give all four of --x --wq --wk --wv; missing {' '.join(missing)}")
    x, wq, wk, wv = (load_array(p, n) for p, n in zip(paths, names))
    if x.ndim == 2:
        x = x[None]      # (T, C) -> (1, T, C): the batch dim is always there
    if x.ndim != 3:
        raise ZeroLLMError(f"--x must be (T, d_model) or (B, T, d_model); got shape {x.shape}")
    B, T, C = x.shape
    K = wq.shape[-1] if wq.ndim == 2 else 1          # self_attention checks the shapes themselves
    if args.json:
        check_json_size(B, T, K, wv.shape[-1] if wv.ndim == 2 else 1, "an --x of at most {most} tokens",
                        "fewer sequences in --x, or narrower --wq/--wk/--wv")
    estimate = memory_estimate(B, T, C, K, args.json)
    budget.require(budget.Estimate(estimate.what, estimate.parts, "the length of --x (fewer rows)"))
    return x, wq, wk, wv


class Example(NamedTuple):
    """The numbers the walkthrough runs on, and where they came from."""
    kind: str           # 'seed' | 'random' | 'files'
    x: np.ndarray       # (B, T, C)
    wq: np.ndarray      # (C, K)
    wk: np.ndarray      # (C, K)
    wv: np.ndarray      # (C, Kv)

    def astype(self, dtype):
        return Example(self.kind, *(a.astype(dtype) for a in (self.x, self.wq, self.wk, self.wv)))


def choose_example(args):
    """Return an Example."""
    sizes = (args.batch, args.seq, args.d_model, args.d_k)
    files = (args.x, args.wq, args.wk, args.wv)
    wants_random = args.random or any(s is not None for s in sizes)
    wants_files = any(f is not None for f in files)
    if wants_random and wants_files:
        raise ZeroLLMError("choose one example: --random (with sizes) OR your files --x --wq --wk --wv")
    if wants_files:
        return Example("files", *_files_example(args))
    if wants_random:
        return Example("random", *_random_example(args))
    return Example("seed", np.array(SEED_X), np.array(SEED_WQ), np.array(SEED_WK), np.array(SEED_WV))


# ----------------------------------------------------------------------------
# printing

def _shape(a):
    return str(tuple(a.shape))


def _seen(mask_row, lang):
    visible = np.flatnonzero(~mask_row)
    if visible.size == 0:
        return say("seen_none", lang)
    if visible.size == 1:
        return say("seen_one", lang, a=visible[0])
    if visible.size == visible[-1] - visible[0] + 1:
        return say("seen_range", lang, a=visible[0], b=visible[-1])
    return ", ".join(f"token {j}" for j in visible)


def _explain_rows(r, b, lang, p, key):
    T = r.weights.shape[-2]
    for i in range(min(T, MAX_EXPLAINED_ROWS)):
        w = r.weights[b, i]
        if key == "row_weights":
            print(say("row_weights", lang, i=i, seen=_seen(r.mask[b, i], lang),
                      w=vector(w, p), total=number(w.sum(), p)))
        else:
            terms = " + ".join(f"{number(w[j], p)}*V[{j}]" for j in np.flatnonzero(~r.mask[b, i])) or "0"
            print(say("row_out", lang, i=i, terms=terms, value=vector(r.out[b, i], p)))
    if T > MAX_EXPLAINED_ROWS:
        print(say("rows_cut", lang, n=MAX_EXPLAINED_ROWS))


def _per_batch(x, fn, lang):
    for b in range(x.shape[0]):
        if x.shape[0] > 1:
            print(say("batch", lang, b=b))
        fn(b)


def _print_inputs(x, r, w_shapes, lang, p):
    C, K = x.shape[-1], r.q.shape[-1]
    print(say("input", lang, shape=_shape(x), C=C))
    _per_batch(x, lambda b: print(matrix(x[b], p)), lang)
    print(say("weights_in", lang, wq=w_shapes[0], wk=w_shapes[1], wv=w_shapes[2], C=C, K=K))


def _print_projections(x, r, lang, p):
    heading(say("step1", lang))
    print(say("step1_shape", lang, x=_shape(x), w=f"({x.shape[-1]}, {r.q.shape[-1]})",
              out=_shape(r.q), C=x.shape[-1], K=r.q.shape[-1]))
    for key in ("q", "k", "v"):
        a = getattr(r, key)
        print("\n" + say(key, lang, shape=_shape(a)))
        _per_batch(x, lambda b: print(matrix(a[b], p)), lang)


def _print_scores(x, r, causal, lang, p):
    heading(say("step2", lang))
    print(say("scale", lang, K=r.q.shape[-1], scale=f"{r.scale:.{p}f}"))
    print("\n" + say("scores", lang, shape=_shape(r.scores)))
    _per_batch(x, lambda b: print(matrix(r.scores[b], p)), lang)
    if causal:
        heading(say("step3_causal", lang))
        print(say("causal_why", lang))
        print(matrix(r.mask[0].astype(int), p))
        print("\n" + say("masked", lang))
        _per_batch(x, lambda b: print(matrix(r.masked_scores[b], p)), lang)
    else:
        heading(say("step3_bidir", lang))
        print(say("bidir_why", lang))


def _print_weights_and_output(x, r, lang, p):
    heading(say("step4", lang))
    print(say("softmax_how", lang))
    print("\n" + say("weights", lang, shape=_shape(r.weights)))

    def weights_block(b):
        print(matrix(r.weights[b], p))
        _explain_rows(r, b, lang, p, "row_weights")
    _per_batch(x, weights_block, lang)

    heading(say("step5", lang))
    print(say("out_shape", lang, w=_shape(r.weights), v=_shape(r.v), out=_shape(r.out), hv=r.v.shape[-1]))
    print("\n" + say("out", lang, shape=_shape(r.out)))

    def out_block(b):
        print(matrix(r.out[b], p))
        _explain_rows(r, b, lang, p, "row_out")
    _per_batch(x, out_block, lang)


def _print_comparison(x, wq, wk, wv, r, lang, p):
    """One line on how removing the mask changed the weights (for --bidirectional)."""
    causal = self_attention(x, wq, wk, wv, causal=True)
    change = np.abs(r.weights - causal.weights).max(axis=(0, 2))    # (T,) largest change per row
    row = int(np.argmax(change))
    last = say("last_same", lang) if change[-1] == 0 else say("last_changed", lang, delta=number(change[-1], p))
    print("\n" + say("compare", lang, T=x.shape[1], row=row, delta=number(change[row], p), last=last))


def print_walkthrough(example, r, causal, lang, p, seed):
    """The walkthrough of ``r`` = self_attention(x, wq, wk, wv) on ``example`` (an Example), in ``lang``,
    numbers to ``p`` digits; ``seed`` made a random example."""
    x, wq, wk, wv = example.x, example.wq, example.wk, example.wv
    B, T, C = x.shape
    source = {"seed": say("source_seed", lang), "files": say("source_files", lang),
              "random": say("source_random", lang, seed=seed)}[example.kind]
    heading(say("title", lang, B=B, T=T, C=C, K=r.q.shape[-1], source=source))
    _print_inputs(x, r, [_shape(w) for w in (wq, wk, wv)], lang, p)
    _print_projections(x, r, lang, p)
    _print_scores(x, r, causal, lang, p)
    _print_weights_and_output(x, r, lang, p)
    if not causal:
        _print_comparison(x, wq, wk, wv, r, lang, p)
    print("\n" + say("summary", lang))


def as_json(r):
    """Every intermediate, batch dim kept; hidden scores are null."""
    return {
        "q": to_json(r.q), "k": to_json(r.k), "v": to_json(r.v),
        "scale": float(r.scale),
        "scores": to_json(r.scores),
        "mask": to_json(r.mask),
        "masked_scores": to_json(r.masked_scores, hidden=r.mask),
        "weights": to_json(r.weights),
        "out": to_json(r.out),
    }


def run(args):
    example = choose_example(args).astype(np.dtype(args.dtype))
    causal = not args.bidirectional
    r = self_attention(example.x, example.wq, example.wk, example.wv, causal=causal)
    if args.json:
        json.dump(as_json(r), sys.stdout, ensure_ascii=False)
        print()
        return 0
    print_walkthrough(example, r, causal, resolve_lang(args.lang), args.precision, args.seed)
    return 0
