"""``zerollm shapes --n-expert E``: a mixture-of-experts layer shape by shape, and what it costs.

Runs the real ``zerollm.nn.moe`` functions on random numbers and prints each step (router, top-k,
grouping by expert, one expert's GEMMs, the weighted sum), then counts parameters and multiply-adds
per token: a MoE layer holds E experts but each token pays for k of them. Biases are left out of
the counts (Mixtral has none; they would add a few hundred numbers).

Letters (besides those of zerollm.teach.shapes): N = B*T tokens, E experts, k active experts,
H expert width, F = H (GELU) or 2H (SwiGLU: [gate | up]), S shared experts.
"""

import numpy as np

from zerollm.io.argtypes import FIELD_RANGES
from zerollm.model.config import GPTConfig
from zerollm.io.errors import ZeroLLMError
from zerollm.io.i18n import translator
from zerollm.model.gpt import param_shapes
from zerollm.nn.mlp import MLPWeights, gelu_mlp_forward, swiglu_forward
from zerollm.nn.moe import MoEConfig, moe_forward
from zerollm.teach.fmt import heading, pad

MAX_EXPERT_NUMBERS = 2 ** 24      # E * C * F: stacked expert weights this demo is willing to allocate

TEXT = {
    "title": {
        "zh": "混合专家层（MoE），形状一步一步（N = B*T = {N}, C={C}, E={E}, k={k}, H={H}{shared}）",
        "en": "A mixture-of-experts layer, shape by shape (N = B*T = {N}, C={C}, E={E}, k={k}, H={H}{shared})",
    },
    "intro": {
        "zh": "MoE 层替换 block 里的 MLP：路由器给每个 token 的 E 个专家打分，每个 token 只经过得分最高的 k 个专家。\n"
              "形状都是把 zerollm.nn.moe 的函数跑在随机数上量出来的（评估模式：没有容量限制）。",
        "en": "A MoE layer replaces a block's MLP: a router scores the E experts for every token, and each token\n"
              "goes through only its k best. Every shape below was measured by running zerollm.nn.moe on random\n"
              "numbers (eval mode: no capacity limit).",
    },
    "flatten": {"zh": "路由按 token 进行：把 batch 和时间两维摊平成 N 行。",
                "en": "Routing is per token: batch and time are flattened into N rows."},
    "router": {
        "zh": "路由器是一个没有偏置的线性层 C -> E：每个 token 对每个专家一个分数。",
        "en": "The router is a linear layer C -> E without bias: one score per token per expert.",
    },
    "softmax": {"zh": "softmax 沿专家维：每个 token 的 E 个概率和为 1。",
                "en": "softmax over the experts: each token's E probabilities sum to 1."},
    "topk": {
        "zh": "每个 token 选概率最大的 k 个专家（idx），门控权重 g 就是它们的概率（Switch）；\n"
              "--moe-norm-topk 时再除以它们的和（Mixtral）。",
        "en": "Each token keeps its k most probable experts (idx); the gate weights g are their probabilities\n"
              "(Switch), divided by their sum with moe_norm_topk (Mixtral).",
    },
    "counts": {
        "zh": "N*k = {pairs} 个（token，选择）对按专家分组（一次稳定排序）。每个专家分到的个数：{counts}。\n"
              "平均是 N*k/E = {mean}；训练时负载均衡损失把它们拉向平均。",
        "en": "The N*k = {pairs} (token, choice) pairs are grouped by expert (one stable sort). Pairs per expert:\n"
              "{counts}. The average is N*k/E = {mean}; in training the load-balancing loss pulls them toward it.",
    },
    "expert": {
        "zh": "专家 {e}（分到最多的那个）只对自己的 {n} 行做一次矩阵乘法：循环只遍历 E 个专家，从不遍历 token。",
        "en": "Expert {e} (the busiest) runs ONE matmul over its own {n} rows: the only loop is over the E experts,\n"
              "never over tokens.",
    },
    "combine": {
        "zh": "每个 token 的输出是它那 k 个专家输出的加权和（权重 g），再放回 (B, T, C)，加回残差流。",
        "en": "Each token's output is the g-weighted sum of its k experts' outputs, put back as (B, T, C) and added\n"
              "to the residual stream.",
    },
    "shared_step": {"zh": "共享专家：每个 token 都经过，宽度 S*H = {SH}，直接加到输出上。",
                    "en": "The shared expert(s): every token goes through them, width S*H = {SH}, added to the\n"
                          "output."},
    "check": {
        "zh": "核对：让每个专家都处理每个 token、再用门控权重（未选中的为 0）加权，得到同样的 y（最大差 {diff}），\n"
              "但要花 E/k = {ratio} 倍的专家计算量。",
        "en": "Check: running every expert on every token and weighting by the gates (0 where not chosen) gives the\n"
              "same y (max difference {diff}), at E/k = {ratio} times the expert compute.",
    },
    "cost_title": {"zh": "参数与每个 token 的乘加次数（一层 MoE，不计偏置）",
                   "en": "Parameters and multiply-adds per token (one MoE layer, biases left out)"},
    "cost_head": {"zh": ("部分", "参数", "每 token 乘加"), "en": ("part", "parameters", "mult-adds/token")},
    "rows": {
        "zh": ("路由器 (C, E)", "一个专家", "全部 {E} 个专家（每 token 跑 k 个）", "共享专家", "整层",
               "同宽度 H 的稠密 MLP"),
        "en": ("router (C, E)", "one expert", "all {E} experts (k run per token)", "shared expert(s)", "whole layer",
               "dense MLP of width H"),
    },
    "cost_note": {
        "zh": "这一层存了 {total} 个参数，每个 token 只用 {active} 个（{share}）：参数随 E 增长，每个 token 的计算只随 k 增长。",
        "en": "The layer holds {total} parameters and each token uses {active} of them ({share}): parameters grow\n"
              "with E, the compute per token only with k.",
    },
    "model_title": {
        "zh": "整个模型（n_layer={L}，MoE block：{layers}，V={V}，共享词嵌入）",
        "en": "The whole model (n_layer={L}, MoE blocks {layers}, V={V}, tied embeddings)",
    },
    "model": {
        "zh": "总参数 {total}，每个 token 用到的 {active}（{share}）。\n"
              "每个 token 的权重矩阵乘加：{macs}（若每个专家都参与则是 {macs_all}）；注意力分数的部分随 T 变化，见上文。",
        "en": "Parameters: {total} in total, {active} active per token ({share}).\n"
              "Multiply-adds per token in the weight matmuls: {macs} ({macs_all} if every expert ran); the\n"
              "attention scores add a part that grows with T, counted above.",
    },
}

say = translator(TEXT)


# ----------------------------------------------------------------------------
# arguments and the config

# the flags that shape the MoE section only, with their defaults: without --n-expert they would change nothing
MOE_ONLY = {"n_expert_active": 2, "n_shared_expert": 0, "n_inner": None, "mlp": "gelu", "moe_norm_topk": False,
            "n_layer": 4, "moe_every": 1, "vocab_size": 65}


def add_moe_arguments(p):
    d = MOE_ONLY
    g = p.add_argument_group("mixture of experts (a section of its own when --n-expert > 0)")
    g.add_argument("--n-expert", type=FIELD_RANGES["n_expert"], default=0,
                   help="E, routed experts per MoE layer (default 0: none)")
    g.add_argument("--n-expert-active", type=FIELD_RANGES["n_expert_active"], default=d["n_expert_active"],
                   help="k, experts per token (default 2)")
    g.add_argument("--n-shared-expert", type=FIELD_RANGES["n_shared_expert"], default=d["n_shared_expert"],
                   help="S, experts every token goes through (default 0)")
    g.add_argument("--n-inner", type=FIELD_RANGES["n_inner"], default=d["n_inner"],
                   help="H, each expert's width (default: as the dense MLP)")
    g.add_argument("--mlp", choices=("gelu", "swiglu"), default=d["mlp"], help="expert kind (default gelu)")
    g.add_argument("--moe-norm-topk", action="store_true", help="renormalise the k gates (Mixtral)")
    g.add_argument("--n-layer", type=FIELD_RANGES["n_layer"], default=d["n_layer"],
                   help="blocks, for the whole-model count (default 4)")
    g.add_argument("--moe-every", type=FIELD_RANGES["moe_every"], default=d["moe_every"],
                   help="every m-th block is MoE (default 1: all)")
    g.add_argument("--vocab-size", type=FIELD_RANGES["vocab_size"], default=d["vocab_size"],
                   help="V, for the whole-model count (default 65)")


def make_moe_config(args):
    """The GPTConfig of the MoE section, validated before anything is printed; None without --n-expert
    (then a flag of the MoE section given anyway is an error: it would silently change nothing)."""
    if not args.n_expert:
        given = [f"--{k.replace('_', '-')}" for k, v in MOE_ONLY.items() if getattr(args, k) != v]
        # one whole message per number of flags, so that each has its own 中文 template
        if len(given) == 1:
            raise ZeroLLMError(f"{given[0]} shapes the mixture-of-experts section, which only --n-expert E (2 or "
                               "more) turns on: add --n-expert, or leave it out")
        if given:
            raise ZeroLLMError(f"{', '.join(given)} shape the mixture-of-experts section, which only --n-expert E "
                               "(2 or more) turns on: add --n-expert, or leave them out")
        return None
    cfg = GPTConfig(vocab_size=args.vocab_size, block_size=args.seq, n_layer=args.n_layer, n_head=args.n_head,
                    n_kv_head=args.n_kv_head, n_embd=args.n_embd, n_inner=args.n_inner, mlp=args.mlp, bias=False,
                    n_expert=args.n_expert, n_expert_active=args.n_expert_active, moe_every=args.moe_every,
                    moe_norm_topk=args.moe_norm_topk, n_shared_expert=args.n_shared_expert)
    numbers = cfg.n_expert * cfg.n_embd * _fc(cfg)
    if numbers > MAX_EXPERT_NUMBERS:
        raise ZeroLLMError(f"the stacked experts would hold {numbers:,} numbers, too many for this demo; the "
                           "shapes follow the same rules at any size, so pick a smaller --n-expert or --n-inner")
    return cfg


def _fc(cfg):
    return 2 * cfg.n_inner if cfg.mlp == "swiglu" else cfg.n_inner


# ----------------------------------------------------------------------------
# measuring

def measure_moe(cfg, batch, seed=0):
    """One MoE layer on random float32 numbers (eval mode); every array by name.

    >>> args = dict(vocab_size=5, block_size=6, n_layer=1, n_head=2, n_embd=8, n_expert=4, n_expert_active=2)
    >>> a = measure_moe(GPTConfig(**args), 2)
    >>> a["logits"].shape, a["idx"].shape, a["y"].shape, int(a["counts"].sum())
    ((12, 4), (12, 2), (2, 6, 8), 24)
    """
    B, T, C, E, H, F = batch, cfg.block_size, cfg.n_embd, cfg.n_expert, cfg.n_inner, _fc(cfg)
    rng = np.random.default_rng(seed)

    def n(*shape, fan_in):
        return rng.standard_normal(shape, dtype=np.float32) / np.float32(np.sqrt(fan_in))

    a = {"x": rng.standard_normal((B, T, C), dtype=np.float32), "router": n(C, E, fan_in=C),
         "c_fc": n(E, C, F, fan_in=C), "c_proj": n(E, H, C, fan_in=H)}
    S = cfg.n_shared_expert
    shared = MLPWeights(n(C, S * F, fan_in=C), None, n(S * H, C, fan_in=S * H), None) if S else None
    config = MoEConfig(cfg.n_expert_active, cfg.moe_norm_topk, mlp=cfg.mlp, gelu=cfg.gelu)
    a["y"], cache = moe_forward(a["x"], a["router"], MLPWeights(a["c_fc"], None, a["c_proj"], None), config,
                                shared=shared, training=False)
    a["x2"] = a["x"].reshape(-1, C)                                   # (N, C)
    a["logits"] = a["x2"] @ a["router"]                               # (N, E)
    a["probs"], a["idx"], a["gates"] = cache.probs, cache.idx, cache.gates
    a["counts"] = np.bincount(cache.idx.ravel(), minlength=E)         # (E,)
    e = int(np.argmax(a["counts"]))
    lo, hi = cache.bounds[e], cache.bounds[e + 1]
    a["e"], a["x_e"] = e, a["x2"][cache.order[lo:hi] % a["x2"].shape[0]]          # (n_e, C)
    a["h_e"] = a["x_e"] @ a["c_fc"][e]                                # (n_e, F)
    a["a_e"] = cache.experts[e].proj.x                                # (n_e, H) after the activation
    a["y_e"] = cache.outs[lo:hi]                                      # (n_e, C)
    a["dense_y"] = _every_expert_on_every_token(a, cache, shared, cfg)
    return a


def _every_expert_on_every_token(a, cache, shared, cfg):
    """The same layer the slow way: all E experts on all N tokens, weighted by a dense (N, E) gate matrix."""
    N, E = a["probs"].shape
    combine = np.zeros((N, E), np.float32)
    np.put_along_axis(combine, cache.idx, cache.gates, axis=1)       # 0 where an expert was not chosen
    y = sum(combine[:, e:e + 1] * _mlp(a["x2"], a["c_fc"][e], a["c_proj"][e], cfg) for e in range(E))
    if shared is not None:
        y = y + _mlp(a["x2"], shared.w_fc, shared.w_proj, cfg)
    return y.reshape(a["y"].shape)


def _mlp(x, w_fc, w_proj, cfg):
    if cfg.mlp == "swiglu":
        return swiglu_forward(x, MLPWeights(w_fc, None, w_proj, None))[0]
    return gelu_mlp_forward(x, MLPWeights(w_fc, None, w_proj, None), gelu=cfg.gelu)[0]


def layer_costs(cfg):
    """(parameters, multiply-adds per token) of the parts of one MoE layer, biases left out."""
    C, E, k, H, S = cfg.n_embd, cfg.n_expert, cfg.n_expert_active, cfg.n_inner, cfg.n_shared_expert
    expert = C * _fc(cfg) + H * C                                     # c_fc + c_proj of one expert
    router = C * E
    return {"router": (router, router), "expert": (expert, expert), "experts": (E * expert, k * expert),
            "shared": (S * expert, S * expert), "total": (router + (E + S) * expert, router + (k + S) * expert),
            "dense": (expert, expert)}


def model_costs(cfg):
    """(total parameters, active parameters, weight multiply-adds per token active, and if all experts ran)."""
    shapes = param_shapes(cfg)
    total = sum(int(np.prod(s)) for s in shapes.values())
    expert_params = sum(int(np.prod(s)) for name, s in shapes.items() if ".mlp.experts." in name)
    idle = expert_params * (cfg.n_expert - cfg.n_expert_active) // cfg.n_expert
    matrices = sum(int(np.prod(s)) for name, s in shapes.items() if len(s) >= 2 and name.startswith("h."))
    head = cfg.vocab_size * cfg.n_embd                                # the tied head: (V, C) per token
    return total, total - idle, matrices - idle + head, matrices + head


# ----------------------------------------------------------------------------
# printing

def _row(number, formula, shapes, width=40):
    print((f"{number:>2}  " if number else "    ") + pad(formula, width) + shapes)


def _note(text):
    print("\n".join("    " + line for line in text.splitlines()))


def _s(a):
    return str(tuple(np.shape(a)))


def print_moe(cfg, batch, lang):
    a = measure_moe(cfg, batch)
    B, T, C, E, k, H = batch, cfg.block_size, cfg.n_embd, cfg.n_expert, cfg.n_expert_active, cfg.n_inner
    N, F, S = B * T, _fc(cfg), cfg.n_shared_expert
    heading(say("title", lang, N=N, C=C, E=E, k=k, H=H, shared=f", S={S}" if S else ""))
    print(say("intro", lang) + "\n")
    _row(1, "x2 = x.reshape(N, C)", f"{_s(a['x'])} -> {_s(a['x2'])}")
    _note(say("flatten", lang))
    _row(2, "logits = x2 @ router.weight", f"{_s(a['x2'])} @ {_s(a['router'])} -> {_s(a['logits'])}")
    _note(say("router", lang))
    _row(3, "probs = softmax(logits)", f"{_s(a['logits'])} -> {_s(a['probs'])}")
    _note(say("softmax", lang))
    _row(4, f"idx, g = top-{k}(probs)", f"{_s(a['probs'])} -> {_s(a['idx'])}, {_s(a['gates'])}")
    _note(say("topk", lang))
    _row(5, "pairs per expert = bincount(idx)", f"{_s(a['idx'])} -> {_s(a['counts'])}")
    _note(say("counts", lang, pairs=N * k, counts=a["counts"].tolist(), mean=f"{N * k / E:g}"))
    e = a["e"]
    _row(6, f"x_e = x2[rows of expert {e}]", f"{_s(a['x2'])} -> {_s(a['x_e'])}")
    _row(None, f"h_e = x_e @ experts.c_fc.weight[{e}]", f"{_s(a['x_e'])} @ {_s(a['c_fc'][e])} -> {_s(a['h_e'])}")
    act = "silu(gate) * up" if cfg.mlp == "swiglu" else "gelu(h_e)"
    _row(None, f"y_e = {act} @ c_proj.weight[{e}]", f"{_s(a['a_e'])} @ {_s(a['c_proj'][e])} -> {_s(a['y_e'])}")
    _note(say("expert", lang, e=e, n=len(a["x_e"])))
    _row(7, "y = sum_j g_j * y_(idx_j)", f"{k} x {_s(a['x2'])} -> {_s(a['y'])}")
    _note(say("combine", lang))
    if S:
        _row(8, "y += shared(x2)", f"{_s(a['x2'])} @ ({C}, {S * F}) ... -> {_s(a['x2'])}")
        _note(say("shared_step", lang, SH=S * H))
    diff = f"{float(np.abs(a['dense_y'] - a['y']).max()):.1e}"
    print("\n" + say("check", lang, diff=diff, ratio=f"{E / k:g}"))
    print_costs(cfg, lang)


def print_costs(cfg, lang):
    heading(say("cost_title", lang))
    costs = layer_costs(cfg)
    head, names = TEXT["cost_head"][lang], TEXT["rows"][lang]
    print(pad(head[0], 38) + pad(head[1], 14, ">") + pad(head[2], 18, ">"))
    keys = ("router", "expert", "experts", "shared", "total", "dense")
    for key, label in zip(keys, names):
        if key == "shared" and not cfg.n_shared_expert:
            continue
        params, macs = costs[key]
        print(pad(label.format(E=cfg.n_expert), 38) + pad(f"{params:,}", 14, ">") + pad(f"{macs:,}", 18, ">"))
    total, active = costs["total"]                    # a matrix weight does one multiply-add per token it sees
    print("\n" + say("cost_note", lang, total=f"{total:,}", active=f"{active:,}", share=f"{100 * active / total:.0f}%"))
    m_total, m_active, macs, macs_all = model_costs(cfg)
    heading(say("model_title", lang, L=cfg.n_layer, layers=cfg.moe_layers, V=cfg.vocab_size))
    print(say("model", lang, total=f"{m_total:,}", active=f"{m_active:,}", share=f"{100 * m_active / m_total:.0f}%",
              macs=f"{macs:,}", macs_all=f"{macs_all:,}"))
