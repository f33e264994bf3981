"""``zerollm gradcheck``: check every hand-written backward pass against finite differences.

Prints one row per layer (max abs error, max rel error, OK/FAIL) and exits 1 if any layer fails.
"""

from zerollm.io.argtypes import SEED
from zerollm.teach.gradcheck import CASES, RTOL, run_all
from zerollm.io.i18n import add_lang_argument, resolve_lang

TEXT = {
    "intro": {
        "zh": "有限差分检验：对每一层，用 (L(x+eps) - L(x-eps)) / (2 eps) 数值地估计梯度，\n"
              "与手写的反向传播结果比较（float64，eps = 1e-6，每个输入随机抽取最多 24 个元素）。",
        "en": "Finite-difference check: for every layer, estimate the gradient numerically with\n"
              "(L(x+eps) - L(x-eps)) / (2 eps) and compare it with the hand-written backward\n"
              "(float64, eps = 1e-6, up to 24 random entries per input).",
    },
    "header": {"zh": ("层", "最大绝对误差", "最大相对误差", "结果"),
               "en": ("layer", "max abs error", "max rel error", "result")},
    "summary_ok": {"zh": "全部 {n} 层通过（相对误差阈值 {tol:g}）。",
                   "en": "All {n} layers passed (relative tolerance {tol:g})."},
    "summary_fail": {"zh": "{bad} / {n} 层失败：这些层的反向传播有错。",
                     "en": "{bad} of {n} layers FAILED: their backward passes are wrong."},
}


def add_arguments(p):
    add_lang_argument(p)
    p.add_argument("--layer", action="append", choices=sorted(CASES), metavar="NAME",
                   help="check only this layer (repeatable); names: " + ", ".join(sorted(CASES)))
    p.add_argument("--seed", type=SEED, default=0, help="random inputs seed (default 0)")


def run(args):
    lang = resolve_lang(args.lang)
    print(TEXT["intro"][lang] + "\n")
    results = run_all(args.layer, seed=args.seed)
    head = TEXT["header"][lang]
    width = max(len(r.name) for r in results) + 2
    print(f"{head[0]:<{width}}{head[1]:>16}{head[2]:>16}   {head[3]}")
    print("-" * (width + 40))
    for r in results:
        print(f"{r.name:<{width}}{r.max_abs:>16.2e}{r.max_rel:>16.2e}   {'OK' if r.ok else 'FAIL'}")
    bad = sum(not r.ok for r in results)
    print()
    if bad:
        print(TEXT["summary_fail"][lang].format(bad=bad, n=len(results)))
        return 1
    print(TEXT["summary_ok"][lang].format(n=len(results), tol=RTOL))
    return 0
