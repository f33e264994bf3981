"""``zerollm shapes``: the shape of every array in multi-head attention, measured, not recited.
With ``--n-expert E`` also a mixture-of-experts layer (zerollm.teach.moe_shapes).

Runs the real functions of ``zerollm.nn.attention`` (linear_forward, split_qkv, sdpa_forward,
merge_heads, mha_forward) on random numbers and prints each step as

    qkv = x @ c_attn.weight          (2, 8, 64) @ (64, 192) -> (2, 8, 192)

with a line on why, the multiply-adds of every matmul, the memory of the T x T scores and, for
grouped-query attention (nkv < nh), how much the keys, values and KV cache shrink.

Letters: B batch, T tokens, C = n_embd, nh query heads, nkv key/value heads,
g = nh // nkv query heads per kv head, hs = C // nh head size, W = (nh + 2 nkv) hs.
"""

import math
from fractions import Fraction

import numpy as np

from zerollm.model import budget
from zerollm.io.argtypes import FIELD_RANGES, SIZE
from zerollm.model.config import GPTConfig
from zerollm.io.errors import ZeroLLMError
from zerollm.io.i18n import add_lang_argument, resolve_lang, translator
from zerollm.nn.attention import (AttentionConfig, AttentionWeights, merge_heads, mha_forward, sdpa_forward,
                                  split_qkv)
from zerollm.nn.linear import linear_forward
from zerollm.teach.fmt import display_width, heading, pad
from zerollm.teach.moe_shapes import add_moe_arguments, make_moe_config, print_moe

MAX_ARRAY = 2 ** 24       # numbers in one array (64 MiB of float32): enough to see every rule
FORMULA_WIDTH = 34        # column where the shapes start

# ----------------------------------------------------------------------------
# the explanations, in both languages (format fields are filled in at print time)

TEXT = {
    "title": {
        "zh": "多头注意力的形状，一步一步（B={B}, T={T}, C={C}, nh={nh}, nkv={nkv}；g={g}, hs={hs}）",
        "en": "Multi-head attention, shape by shape (B={B}, T={T}, C={C}, nh={nh}, nkv={nkv}; g={g}, hs={hs})",
    },
    "letters": {
        "zh": "字母：B = {B} 个序列，每个 T = {T} 个 token，每个 token C = {C} 个数；nh = {nh} 个查询头，\n"
              "nkv = {nkv} 个键/值头，每个键/值头配 g = nh/nkv = {g} 个查询头；每个头 hs = C/nh = {hs} 个数。\n"
              "下面每个形状都是把 zerollm.nn.attention 的函数真的跑在随机数上量出来的。",
        "en": "Letters: B = {B} sequences of T = {T} tokens, C = {C} numbers per token; nh = {nh} query heads,\n"
              "nkv = {nkv} key/value heads, g = nh/nkv = {g} query heads per kv head; hs = C/nh = {hs} numbers per head.\n"
              "Every shape below was measured by running the functions of zerollm.nn.attention on random numbers.",
    },
    "x": {
        "zh": "输入：B 个序列，每个 T 个 token，每个 token 是 C 个数的向量（在模型里是 ln_1 的输出）。",
        "en": "The input: B sequences of T tokens, each token a vector of C numbers (in the model: ln_1's output).",
    },
    "qkv": {
        "zh": "一次矩阵乘法算出所有头的查询、键和值。只有最后一维变了：C -> W = (nh + 2 nkv) hs = {W}，\n"
              "这些列依次是 [q：nh*hs = {nq} | k：nkv*hs = {nkvw} | v：nkv*hs = {nkvw}]。\n"
              "（GPT-2 还加一个 ({W},) 的偏置，加法不改变形状。）",
        "en": "One matmul computes the queries, keys and values of every head at once. Only the last axis changes:\n"
              "C -> W = (nh + 2 nkv) hs = {W}, columns [q: nh*hs = {nq} | k: nkv*hs = {nkvw} | v: nkv*hs = {nkvw}].\n"
              "(GPT-2 also adds a bias of shape ({W},); an addition changes no shape.)",
    },
    "split": {
        "zh": "每一段切成多个头：先 reshape (B, T, nkv*g*hs) -> (B, T, nkv, g, hs)，再转置成 (B, nkv, g, T, hs)。\n"
              "为什么转置：@ 只对最后两维做矩阵乘法，所以每个头的 (T, hs) 矩阵必须放在最后；\n"
              "前面的头维度就像 batch 维，所有头一次乘完，不需要 Python 循环。",
        "en": "Each slice is cut into heads: reshape (B, T, nkv*g*hs) -> (B, T, nkv, g, hs), then transpose to\n"
              "(B, nkv, g, T, hs). Why the transpose: @ multiplies the last two axes, so each head's (T, hs) matrix\n"
              "must sit at the end; the head axes in front act as batch axes and all heads go in one matmul, no loop.",
    },
    "layout": {
        "zh": "我们的分组布局：q    是 (B, nkv, g, T, hs) = {qshape}，\n"
              "                k, v 是 (B, nkv, 1, T, hs) = {kshape}。\n"
              "第 1 维选键/值头，第 2 维选组内的查询头：查询头 j = kv*g + i 使用第 j // g 个键/值头。\n"
              "k、v 的第 2 维大小为 1，矩阵乘法的广播让一组的 g 个查询头共享同一个键/值头，不用复制。",
        "en": "Our grouped layout: q    is  (B, nkv, g, T, hs) = {qshape},\n"
              "                    k, v are (B, nkv, 1, T, hs) = {kshape}.\n"
              "Axis 1 picks the key/value head, axis 2 the query head inside its group: query head j = kv*g + i\n"
              "uses kv head j // g. In k and v axis 2 has size 1, so matmul broadcasting lets the g query heads of\n"
              "a group share one k/v head without copying it.",
    },
    "view_mha": {
        "zh": "熟悉的四维视图 (B, nh, T, hs)（nanoGPT、PyTorch 的写法）：nkv == nh 时 g == 1，组维大小为 1，\n"
              "reshape 去掉它（不复制数据）就正好是通常的布局。在这个视图里算出的分数完全相同（最大差 {diff}）。",
        "en": "The familiar 4-D view (B, nh, T, hs), as in nanoGPT and PyTorch: with nkv == nh we have g == 1, so the\n"
              "group axis has size 1 and dropping it (a reshape, no copy) gives exactly the usual layout. Scores\n"
              "computed in this view are the same numbers (max difference {diff}).",
    },
    "view_gqa": {
        "zh": "熟悉的四维视图 (B, nh, T, hs)：q 只需 reshape，因为 nkv 和 g 两维相邻，合起来就是 nh = nkv*g 个头。\n"
              "k、v 只有 nkv 个头；四维写法要把每个复制 g 份（Hugging Face 的 repeat_kv 就是这样），会复制数据。\n"
              "我们的五维布局算出同样的分数（最大差 {diff}），却不用复制。",
        "en": "The familiar 4-D view (B, nh, T, hs): q needs only a reshape, since axes nkv and g sit side by side and\n"
              "merge into nh = nkv*g heads. k and v have just nkv heads; 4-D code must repeat each g times (what\n"
              "Hugging Face's repeat_kv does), a copy. Our 5-D layout gets the same scores (max difference {diff})\n"
              "without it.",
    },
    "scores": {
        "zh": "每个头里，每个查询与本序列的每个键做点积：(T, hs) @ (hs, T) -> 每个头一个 T x T 矩阵，\n"
              "行 = 查询，列 = 键。k^T 的组维大小为 1，与 q 的 g 维广播。scale = 1/sqrt(hs) = {scale}，\n"
              "让分数的大小不随 hs 变化。",
        "en": "In every head each query is dotted with every key of its sequence: (T, hs) @ (hs, T) -> one T x T\n"
              "matrix per head, row = query, column = key. The size-1 group axis of k^T broadcasts against q's g\n"
              "axis. scale = 1/sqrt(hs) = {scale} keeps the scores' size independent of hs.",
    },
    "memory": {
        "zh": "T x T 是最贵的部分：B*nh*T*T = {n} 个数，float32 下 {size}，每一层都有；训练时还要为反向传播\n"
              "存下权重。T 翻倍，它就变成 4 倍。（flash attention 分块算出同样的结果，从不存下整个矩阵。）",
        "en": "That T x T is the expensive part: B*nh*T*T = {n} numbers, {size} in float32, in every layer, and\n"
              "training keeps the weights for the backward pass. Doubling T makes it 4 times bigger. (Flash\n"
              "attention computes the same result in tiles and never stores the whole matrix.)",
    },
    "weights": {
        "zh": "因果掩码把键 j > 查询 i 的位置设为 -inf，softmax 沿最后一维（键）把每行变成和为 1 的权重。\n"
              "这些都是逐元素的操作：形状不变。",
        "en": "The causal mask sets key j > query i to -inf, and softmax along the last axis (the keys) turns each\n"
              "row into weights that sum to 1. Elementwise steps: the shape does not change.",
    },
    "ctx": {
        "zh": "每个查询的输出是值向量的加权平均：每个头 (T, T) @ (T, hs) -> (T, hs)。v 的组维同样被 g 个查询头共享。",
        "en": "Each query's output is the weighted average of the value rows: (T, T) @ (T, hs) -> (T, hs) per head.\n"
              "Again v's size-1 group axis is shared by the g query heads.",
    },
    "merge": {
        "zh": "切分的逆过程：把 T 转置回 B 旁边，(B, nkv, g, T, hs) -> (B, T, nkv, g, hs)，再 reshape，\n"
              "让每个 token 的 nh 个头（各 hs 个数）并排：C = nh*hs = {C}。",
        "en": "The split in reverse: transpose T back next to B, (B, nkv, g, T, hs) -> (B, T, nkv, g, hs), then\n"
              "reshape so each token's nh heads of hs numbers sit side by side: C = nh*hs = {C}.",
    },
    "proj": {
        "zh": "c_proj 把各个头混合起来（每个头只看到自己的 hs 个数），并回到残差流的宽度 C，这样 block 才能把结果加回 x。",
        "en": "c_proj mixes the heads (each head only saw its own hs numbers) and returns to the residual stream's\n"
              "width C, so the block can add the result back to x.",
    },
    "check": {
        "zh": "核对：在同样的数上调用 mha_forward(x, ...)，得到同样的 out（最大差 {diff}）。",
        "en": "Check: mha_forward(x, ...) on the same numbers gives the same out (max difference {diff}).",
    },
    "flops_title": {"zh": "一层注意力的乘加次数（一次前向）", "en": "Multiply-adds of one attention layer (one forward pass)"},
    "flops_head": {"zh": ("矩阵乘法", "乘加次数", "占比"), "en": ("matmul", "multiply-adds", "share")},
    "total": {"zh": "合计", "en": "total"},
    "flops_note": {
        "zh": "一次乘加 = 一次乘法加一次加法，所以 FLOPs ≈ 2 x {total} = {flops}。(m, k) @ (k, n) 需要 m*k*n 次乘加。\n"
              "两个 T x T 的乘法随 T^2 增长；因果掩码遮住了约一半的分数，但这个朴素实现仍然全部计算。",
        "en": "A multiply-add is one multiplication and one addition, so FLOPs ~ 2 x {total} = {flops}. A matmul\n"
              "(m, k) @ (k, n) costs m*k*n of them. The two T x T matmuls grow like T^2; the causal mask hides about\n"
              "half of the scores, but this naive implementation computes them all anyway.",
    },
    "gqa_title": {
        "zh": "分组查询注意力（GQA）：{nh} 个查询头只用 nkv = {nkv} 个键/值头",
        "en": "Grouped-query attention: nkv = {nkv} key/value heads for nh = {nh} query heads",
    },
    "mqa_title": {
        "zh": "多查询注意力（MQA）：{nh} 个查询头共用 nkv = 1 个键/值头",
        "en": "Multi-query attention: all nh = {nh} query heads share nkv = 1 key/value head",
    },
    "gqa": {
        "zh": "c_attn.weight：(C, (nh + 2 nkv) hs) = ({C}, {W})，而 nkv = nh 时是 ({C}, {W_mha})；\n"
              "  其中 k/v 部分 2*nkv*hs = {kv} 列，而不是 {kv_mha} 列（{ratio}）。\n"
              "KV cache（生成时保存的键和值）：每个 token 每层 2*nkv*hs = {kv} 个数，而不是 {kv_mha}；\n"
              "  这 B*T = {BT} 个 token 每层 {cache}（float32），而不是 {cache_mha}。\n"
              "qkv 矩阵乘法的乘加次数：{macs}，而不是 {macs_mha}。T x T 部分不变：每个查询头仍有自己的分数。",
        "en": "c_attn.weight: (C, (nh + 2 nkv) hs) = ({C}, {W}) instead of ({C}, {W_mha}) with nkv = nh;\n"
              "  its k/v part has 2*nkv*hs = {kv} columns instead of {kv_mha} ({ratio}).\n"
              "KV cache (keys and values kept while generating): 2*nkv*hs = {kv} numbers per token per layer\n"
              "  instead of {kv_mha}; for these B*T = {BT} tokens {cache} per layer in float32 instead of {cache_mha}.\n"
              "Multiply-adds of the qkv matmul: {macs} instead of {macs_mha}. The T x T part does not shrink:\n"
              "every query head still has its own scores.",
    },
    "mem_title": {"zh": "内存（zerollm.model.budget 的估算，float32；训练前 zerollm train 用同样的估算检查内存）",
                  "en": "Memory (zerollm.model.budget's estimate, float32; zerollm train checks the same estimate before it starts)"},
    "mem_rows": {"zh": ("注意力层的权重 c_attn + c_proj", "一个 block 为反向传播保存的激活（B*T 个 token）",
                        "  其中注意力权重 (B, nh, T, T)", "这 B*T 个 token 在一层里的 KV cache"),
                 "en": ("weights of the attention layer, c_attn + c_proj", "activations one block keeps for backward (B*T tokens)",
                        "  of which the attention weights (B, nh, T, T)", "KV cache of these B*T tokens, one layer")},
    "mem_note": {
        "zh": "一个完整模型：权重、梯度和 AdamW 的两个矩（共约 4 倍权重），加上每层的激活、再加 (B, T, V) 的 logits。\n"
              "zerollm train --dry-run 会打印整个模型的估算。",
        "en": "A whole model needs the weights, their gradients and AdamW's two moments (about 4x the weights), plus\n"
              "these activations in every layer and the (B, T, V) logits. zerollm train --dry-run prints that estimate.",
    },
    "mha_hint": {
        "zh": "nkv = nh：普通的多头注意力。KV cache 每个 token 每层存 2*nh*hs = {kv} 个数（这 B*T = {BT} 个 token\n"
              "每层 {cache}，float32）。试试 --n-kv-head 1（多查询注意力）或 nh 的其他因数（分组查询），看它变小。",
        "en": "nkv = nh: ordinary multi-head attention. The KV cache holds 2*nh*hs = {kv} numbers per token per layer\n"
              "({cache} for these B*T = {BT} tokens in float32). Try --n-kv-head 1 (multi-query) or another divisor\n"
              "of nh (grouped-query) to see it shrink.",
    },
}


say = translator(TEXT)


# ----------------------------------------------------------------------------
# arguments and the config

def add_arguments(p):
    add_lang_argument(p)
    p.add_argument("--batch", type=SIZE, default=2, help="B, sequences in the batch (default 2)")
    p.add_argument("--seq", type=FIELD_RANGES["block_size"], default=8, help="T, tokens per sequence (default 8)")
    p.add_argument("--n-embd", type=FIELD_RANGES["n_embd"], default=64, help="C, numbers per token (default 64)")
    p.add_argument("--n-head", type=FIELD_RANGES["n_head"], default=4, help="nh, query heads (default 4)")
    p.add_argument("--n-kv-head", type=FIELD_RANGES["n_kv_head"], default=None,
                   help="nkv, key/value heads; must divide n_head (default: = n_head)")
    add_moe_arguments(p)


def make_config(batch, seq, n_embd, n_head, n_kv_head=None):
    """GPTConfig for one attention layer; any impossible combination is a ZeroLLMError.

    >>> make_config(2, 8, 64, 4).head_size
    16
    """
    flags = {"--batch": batch, "--seq": seq, "--n-embd": n_embd, "--n-head": n_head, "--n-kv-head": n_kv_head}
    for flag, value in flags.items():
        if value is not None and value < 1:
            raise ZeroLLMError(f"{flag} must be a positive whole number, got {value}")
    cfg = GPTConfig(vocab_size=1, block_size=seq, n_layer=1, n_head=n_head, n_kv_head=n_kv_head,
                    n_embd=n_embd)                      # GPTConfig checks divisibility with a fix
    W = (cfg.n_head + 2 * cfg.n_kv_head) * cfg.head_size
    for what, n in (("scores (B, nh, T, T)", batch * n_head * seq * seq), ("qkv (B, T, W)", batch * seq * W),
                    ("c_attn.weight (C, W)", n_embd * W)):
        if n > MAX_ARRAY:
            raise ZeroLLMError(f"{what} would hold {n:,} numbers ({_size(4 * n)}), too many for this demo; "
                               "the shapes follow the same rules at any size, so pick a smaller "
                               "--batch, --seq, --n-head or --n-embd")
    return cfg


# ----------------------------------------------------------------------------
# measuring: run the real functions and keep every array

def measure(cfg, batch, seed=0):
    """Run one causal attention layer on random float32 numbers; return every array by name.

    >>> a = measure(make_config(2, 8, 64, 4, 2), 2)
    >>> a["q"].shape, a["k"].shape, a["scores"].shape
    ((2, 2, 2, 8, 16), (2, 2, 1, 8, 16), (2, 2, 2, 8, 8))
    """
    B, T, C = batch, cfg.block_size, cfg.n_embd
    nh, nkv, hs = cfg.n_head, cfg.n_kv_head, cfg.head_size
    g, W = nh // nkv, (nh + 2 * nkv) * hs
    rng = np.random.default_rng(seed)
    a = {"x": rng.standard_normal((B, T, C), dtype=np.float32),
         "c_attn.weight": (rng.standard_normal((C, W), dtype=np.float32) / np.float32(math.sqrt(C))),
         "c_proj.weight": (rng.standard_normal((C, C), dtype=np.float32) / np.float32(math.sqrt(C)))}
    a["qkv"], _ = linear_forward(a["x"], a["c_attn.weight"])          # (B, T, C) @ (C, W) -> (B, T, W)
    a["q"], a["k"], a["v"] = split_qkv(a["qkv"], nh, nkv)             # (B,nkv,g,T,hs), (B,nkv,1,T,hs) x2
    a["k^T"] = np.swapaxes(a["k"], -1, -2)                            # (B, nkv, 1, hs, T)
    a["scores"] = a["q"] @ a["k^T"] * np.float32(1 / math.sqrt(hs))   # the product sdpa_forward starts with
    a["ctx"], sdpa = sdpa_forward(a["q"], a["k"], a["v"], causal=True)   # (B, nkv, g, T, hs)
    a["weights"] = sdpa.att                                           # (B, nkv, g, T, T)
    a["y"] = merge_heads(a["ctx"])                                    # (B, T, C)
    a["out"], _ = linear_forward(a["y"], a["c_proj.weight"])          # (B, T, C)
    # the 4-D view of nanoGPT / PyTorch: (B, nh, T, hs), kv heads repeated g times
    a["q4"] = a["q"].reshape(B, nh, T, hs)
    a["k4"] = np.repeat(a["k"], g, axis=2).reshape(B, nh, T, hs)
    a["scores4"] = a["q4"] @ np.swapaxes(a["k4"], -1, -2) * np.float32(1 / math.sqrt(hs))   # (B, nh, T, T)
    a["mha_out"], _ = mha_forward(a["x"], AttentionWeights(a["c_attn.weight"], None, a["c_proj.weight"], None),
                                  AttentionConfig(n_head=nh, n_kv_head=nkv, causal=True))
    return a


def matmul_macs(a_shape, b_shape):
    """Multiply-adds of a @ b with numpy's broadcasting: (batch..., m, k) @ (batch..., k, n) -> batch*m*k*n.

    >>> matmul_macs((2, 8, 64), (64, 192))
    196608
    """
    batch = np.broadcast_shapes(tuple(a_shape[:-2]), tuple(b_shape[:-2]))
    return math.prod(batch) * a_shape[-2] * a_shape[-1] * b_shape[-1]


# ----------------------------------------------------------------------------
# printing

def _shape(a):
    return str(tuple(a.shape))


def _size(n_bytes):
    """1536 -> '1.5 KiB'."""
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if n_bytes < 1024 or unit == "TiB":
            return f"{n_bytes:.0f} {unit}" if unit == "B" else f"{n_bytes:.1f} {unit}"
        n_bytes /= 1024


def _diff(a, b):
    return f"{float(np.abs(a - b).max()):.1e}"


def _row(number, formula, shapes):
    label = f"{number:>2}  " if number else "    "
    print(label + pad(formula, FORMULA_WIDTH) + shapes)


def _note(text):
    print("\n".join("    " + line for line in text.splitlines()))


def _matmul(number, formula, a, b, out):
    _row(number, formula, f"{_shape(a)} @ {_shape(b)} -> {_shape(out)}")


def print_steps(a, lang, f):
    """The nine steps, each with its measured shapes and an explanation."""
    nq, kvw = f["nq"], f["nkvw"]
    _row(1, "x", _shape(a["x"]))
    _note(say("x", lang))
    _matmul(2, "qkv = x @ c_attn.weight", a["x"], a["c_attn.weight"], a["qkv"])
    _note(say("qkv", lang, **f))
    slices = (("q", 0, nq), ("k", nq, nq + kvw), ("v", nq + kvw, nq + 2 * kvw))   # [q | k | v] columns
    for n, (name, lo, hi) in enumerate(slices):
        part = a["qkv"][..., lo:hi]
        _row(3 if n == 0 else None, f"{name} = heads(qkv[..., {lo}:{hi}])",
             f"{_shape(part)} -> {_shape(a[name])}")
    _note(say("split", lang))
    _note(say("layout", lang, qshape=_shape(a["q"]), kshape=_shape(a["k"])))
    g = f["g"]
    _row(4, "q4 = q.reshape(B, nh, T, hs)", f"{_shape(a['q'])} -> {_shape(a['q4'])}")
    k_formula = "k4 = k.reshape(B, nh, T, hs)" if g == 1 else f"k4 = repeat_kv(k, g={g})"
    _row(None, k_formula, f"{_shape(a['k'])} -> {_shape(a['k4'])}")
    diff = _diff(a["scores4"], a["scores"].reshape(a["scores4"].shape))
    _note(say("view_mha" if g == 1 else "view_gqa", lang, diff=diff))
    _matmul(5, "scores = q @ k^T * scale", a["q"], a["k^T"], a["scores"])
    _note(say("scores", lang, scale=f"{1 / math.sqrt(f['hs']):.4f}"))
    n = a["scores"].size
    _note(say("memory", lang, n=f"{n:,}", size=_size(4 * n)))
    _row(6, "weights = softmax(mask(scores))", f"{_shape(a['scores'])} -> {_shape(a['weights'])}")
    _note(say("weights", lang))
    _matmul(7, "ctx = weights @ v", a["weights"], a["v"], a["ctx"])
    _note(say("ctx", lang))
    _row(8, "y = merge_heads(ctx)", f"{_shape(a['ctx'])} -> {_shape(a['y'])}")
    _note(say("merge", lang, **f))
    _matmul(9, "out = y @ c_proj.weight", a["y"], a["c_proj.weight"], a["out"])
    _note(say("proj", lang))
    print("\n" + say("check", lang, diff=_diff(a["out"], a["mha_out"])))


def flop_rows(a):
    """(name, multiply-adds) of the four matmuls, from the measured shapes."""
    return [("x @ c_attn", matmul_macs(a["x"].shape, a["c_attn.weight"].shape)),
            ("q @ k^T", matmul_macs(a["q"].shape, a["k^T"].shape)),
            ("weights @ v", matmul_macs(a["weights"].shape, a["v"].shape)),
            ("y @ c_proj", matmul_macs(a["y"].shape, a["c_proj.weight"].shape))]


def print_flops(a, lang):
    heading(say("flops_title", lang))
    rows = flop_rows(a)
    total = sum(n for _, n in rows)
    head = TEXT["flops_head"][lang]
    print(pad(head[0], 16) + pad(head[1], 18, ">") + pad(head[2], 10, ">"))
    for name, n in rows + [(say("total", lang), total)]:
        print(pad(name, 16) + pad(f"{n:,}", 18, ">") + pad(f"{100 * n / total:.1f}%", 10, ">"))
    print("\n" + say("flops_note", lang, total=f"{total:,}", flops=f"{2 * total:,}"))


def print_kv(a, lang, f):
    """The GQA savings (nkv < nh), or a hint to try them (nkv == nh)."""
    B, T, C, nh, nkv, hs = f["B"], f["T"], f["C"], f["nh"], f["nkv"], f["hs"]
    kv, kv_mha = 2 * nkv * hs, 2 * nh * hs
    cache, cache_mha = _size(4 * B * T * kv), _size(4 * B * T * kv_mha)
    if nkv == nh:
        print("\n" + say("mha_hint", lang, kv=kv, BT=B * T, cache=cache))
        return
    heading(say("mqa_title" if nkv == 1 else "gqa_title", lang, nh=nh, nkv=nkv))
    W_mha = 3 * C                                     # c_attn's width if every query head had its own k, v
    macs = matmul_macs(a["x"].shape, a["c_attn.weight"].shape)
    macs_mha = matmul_macs(a["x"].shape, (C, W_mha))
    print(say("gqa", lang, C=C, W=f["W"], W_mha=W_mha, kv=kv, kv_mha=kv_mha, ratio=str(Fraction(nkv, nh)),
              BT=B * T, cache=cache, cache_mha=cache_mha, macs=f"{macs:,}", macs_mha=f"{macs_mha:,}"))


def print_memory(cfg, batch, lang):
    """What one layer of these sizes holds, from the same estimate zerollm train checks (zerollm.model.budget)."""
    heading(say("mem_title", lang))
    W = (cfg.n_head + 2 * cfg.n_kv_head) * cfg.head_size
    T = cfg.block_size
    att = 0 if cfg.attn_impl == "flash" else batch * cfg.n_head * T * T
    values = (4 * cfg.n_embd * (W + cfg.n_embd), 4 * budget.layer_numbers(cfg, batch, T), 4 * att,
              4 * 2 * batch * T * cfg.n_kv_head * cfg.head_size)
    labels = TEXT["mem_rows"][lang]
    width = max(display_width(label) for label in labels) + 2
    for label, value in zip(labels, values):
        print(pad(label, width) + pad(budget.fmt_bytes(value), 12, ">"))
    print("\n" + say("mem_note", lang))


def fields(cfg, batch):
    nh, nkv, hs = cfg.n_head, cfg.n_kv_head, cfg.head_size
    return dict(B=batch, T=cfg.block_size, C=cfg.n_embd, nh=nh, nkv=nkv, g=nh // nkv, hs=hs,
                W=(nh + 2 * nkv) * hs, nq=nh * hs, nkvw=nkv * hs)


def run(args):
    lang = resolve_lang(args.lang)
    cfg = make_config(args.batch, args.seq, args.n_embd, args.n_head, args.n_kv_head)
    moe_cfg = make_moe_config(args)             # every check before any output (None: no MoE section)
    a = measure(cfg, args.batch)
    f = fields(cfg, args.batch)
    heading(say("title", lang, **f))
    print(say("letters", lang, **f) + "\n")
    print_steps(a, lang, f)
    print_flops(a, lang)
    print_kv(a, lang, f)
    print_memory(cfg, args.batch, lang)
    if moe_cfg is not None:
        print_moe(moe_cfg, args.batch, lang)
    return 0
