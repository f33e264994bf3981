"""Exercises on the rest of the pipeline: one BPE merge (Part 4), top-k / top-p filtering (Part 2),
AdamW's step (Part 2), the DPO loss's gradient (Part 7) and GRPO's group advantages and loss (Part 9).

References: ``tokenizers.bpe_train`` (count_pairs, merge_word), ``generation.sample.filter_logits``,
``training.optim.adamw_update``, ``align.objectives.dpo.dpo_loss``, ``align.rl.advantages`` and
``align.rl.losses``. Shapes: B rows, V vocabulary, T positions, N prompts, G answers per prompt.
"""

import math

import numpy as np

from zerollm.align.objectives.dpo import dpo_loss
from zerollm.align.rl.advantages import group_advantages
from zerollm.align.rl.losses import grpo_loss
from zerollm.generation.sample import filter_logits
from zerollm.tokenizers.bpe_train import count_pairs, merge_word
from zerollm.training.optim import AdamWStep, adamw_update
from zerollm.teach.exercises.grading import Mistake, Wrong, compare, finite_differences, in_case, outputs

TEXT = {
    "pair": {"en": "the pair you merged, {got}, is not the most frequent one (it is seen {n} times; "
                   "the most frequent is seen {best} times{tie})",
             "zh": "你合并的词对 {got} 不是出现最多的（它出现 {n} 次；最多的出现 {best} 次{tie}）"},
    "tie": {"en": ", and among pairs seen equally often the smallest (left id, right id) wins",
            "zh": "；出现次数相同时，取 (左 id, 右 id) 最小的那一对"},
    "ids": {"en": "the ids after the merge are wrong from position {at} on ({got} of them, expected {want}){why}",
            "zh": "合并后的 id 从第 {at} 个位置起不对（共 {got} 个，应为 {want} 个）{why}"},
    "overlap": {"en": ": in a run like a a a, merge from the left, and never reuse a token already merged",
                "zh": "：遇到 a a a 这样的连续段，从左往右合并，已经合并过的词元不能再用"},
    "kept": {"en": "row {row}: {kept} tokens kept, expected {want}{why}", "zh": "第 {row} 行：保留了 {kept} 个词元，应为 {want} 个{why}"},
    "not_largest": {"en": ": the kept tokens must be the most likely ones (the largest logits)",
                    "zh": "：保留的必须是最可能的那些词元（logit 最大的）"},
    "crossing": {"en": ": the token whose probability takes the running total past top_p stays in the nucleus",
                 "zh": "：使累计概率越过 top_p 的那个词元也要留在核里"},
    "changed": {"en": "row {row}: the kept logits must stay as they were (only the others become -inf)",
                "zh": "第 {row} 行：保留的 logit 必须保持原值（只有其余的变成 -inf）"},
}


def _say(key, lang, **fields):
    return TEXT[key][lang].format(**fields)


# ----------------------------------------------------------------------------
# one BPE merge

def _bpe_ref(ids, new_id):
    counts, _ = count_pairs([list(ids)], [1])
    best = min(counts, key=lambda p: (-counts[p], p))               # most frequent; ties: the smallest pair
    return best, merge_word(list(ids), *best, new_id, 1, {}, []), counts


def grade_bpe_step(fn, lang):
    rng = np.random.default_rng(20)
    cases = [[97, 97, 97, 98], [1, 2, 3, 1, 2, 3, 1, 2], [5, 5, 5, 5, 5], [4, 3, 4, 3, 3, 4],
             [int(i) for i in rng.integers(0, 4, 30)], [7, 8]]
    for i, ids in enumerate(cases, 1):
        new_id = 256
        best, want, counts = _bpe_ref(ids, new_id)
        got = outputs(fn, (list(ids), new_id), ("pair", "ids"), lang)
        pair = tuple(int(a) for a in got[0]) if isinstance(got[0], (tuple, list, np.ndarray)) else got[0]
        if pair != best:
            tie = _say("tie", lang) if pair in counts and counts[pair] == counts[best] else ""
            msg = _say("pair", lang, got=pair, n=counts.get(pair, 0), best=counts[best], tie=tie)
            raise Wrong(f"{msg} [ids {ids}]")
        ours = [int(a) for a in got[1]] if isinstance(got[1], (list, tuple, np.ndarray)) else got[1]
        if ours != want:
            at = next((j for j, (a, b) in enumerate(zip(ours, want)) if a != b), min(len(ours), len(want))) \
                if isinstance(ours, list) else 0
            overlap = isinstance(ours, list) and best[0] == best[1]
            raise Wrong(_say("ids", lang, at=at, got=len(ours) if isinstance(ours, list) else type(ours).__name__,
                             want=len(want), why=_say("overlap", lang) if overlap else "") + f" [ids {ids}]")
    return len(cases)


# ----------------------------------------------------------------------------
# top-k and top-p

def grade_top_k_top_p(fn, lang):
    rng = np.random.default_rng(21)
    cases = [(None, 0.9), (3, None), (4, 0.6), (None, 0.5), (1, None), (6, 0.99)]
    for i, (top_k, top_p) in enumerate(cases, 1):
        logits = rng.standard_normal((3, 8)) * 2.0
        want = filter_logits(logits, top_k, top_p)
        ours = outputs(fn, (logits, top_k, top_p), ("logits",), lang)[0]
        what = f"top_k={top_k}, top_p={top_p}"
        in_case(i, what, lang, _check_filtered, np.asarray(ours) if isinstance(ours, np.ndarray) else ours,
                logits, want, top_p, lang)
    return len(cases)


def _check_filtered(ours, logits, want, top_p, lang):
    if not isinstance(ours, np.ndarray) or ours.shape != want.shape:
        compare("logits", ours, want, lang)
    for row in range(want.shape[0]):
        kept, should = np.isfinite(ours[row]), np.isfinite(want[row])
        if not np.array_equal(kept, should):
            crossing = top_p is not None and kept.sum() == should.sum() - 1
            why = _say("crossing", lang) if crossing else ""
            if kept.sum() and logits[row][kept].min() < logits[row][~kept].max(initial=-np.inf):
                why = _say("not_largest", lang)
            raise Wrong(_say("kept", lang, row=row, kept=int(kept.sum()), want=int(should.sum()), why=why))
        if not np.allclose(ours[row][kept], logits[row][kept], rtol=1e-12, atol=0):
            raise Wrong(_say("changed", lang, row=row))


# ----------------------------------------------------------------------------
# AdamW

def _adamw_ref(p, g, m, v, t, hp):
    p, m, v = p.copy(), m.copy(), v.copy()
    b1, b2 = hp["betas"]
    step = AdamWStep(hp["lr"], (b1, b2), hp["eps"], hp["weight_decay"], hp["lr"] / (1 - b1 ** t),
                     math.sqrt(1 - b2 ** t))
    adamw_update(p, g, m, v, np.empty_like(p), step)
    return p, m, v


def _adamw_mistakes():
    def no_correction(p, g, m, v, t, hp):
        b1, b2 = hp["betas"]
        m2, v2 = b1 * m + (1 - b1) * g, b2 * v + (1 - b2) * g * g
        return p * (1 - hp["lr"] * hp["weight_decay"]) - hp["lr"] * m2 / (np.sqrt(v2) + hp["eps"])

    def l2(p, g, m, v, t, hp):
        return _adamw_ref(p, g + hp["weight_decay"] * p, m, v, t, {**hp, "weight_decay": 0.0})[0]
    def eps_inside(p, g, m, v, t, hp):
        b1, b2 = hp["betas"]
        m2, v2 = b1 * m + (1 - b1) * g, b2 * v + (1 - b2) * g * g
        mhat, vhat = m2 / (1 - b1 ** t), v2 / (1 - b2 ** t)
        return p * (1 - hp["lr"] * hp["weight_decay"]) - hp["lr"] * mhat / np.sqrt(vhat + hp["eps"])
    return (
        Mistake(eps_inside, {"en": "eps went under the square root; it is added after it, to sqrt(vhat)",
                             "zh": "eps 放进了平方根里；它应加在开方之后，加到 sqrt(vhat) 上"}),
        Mistake(no_correction, {"en": "The bias correction is missing: m and v start at 0, so early steps must "
                                      "divide them by (1 - beta^t)",
                                "zh": "少了偏差修正：m 和 v 从 0 开始，前几步要除以 (1 - beta^t)"}),
        Mistake(l2, {"en": "The weight decay went into the gradient (that is Adam with L2); AdamW shrinks p directly, "
                           "outside Adam's scaling",
                     "zh": "权重衰减被加进了梯度（那是带 L2 的 Adam）；AdamW 直接缩小 p，不经过 Adam 的缩放"}),
    )


def grade_adamw_step(fn, lang):
    rng = np.random.default_rng(22)
    cases = [(1, 0.1, np.float64), (5, 0.0, np.float64), (3, 0.1, np.float32), (20, 0.01, np.float64)]
    mistakes = _adamw_mistakes()
    for i, (t, wd, dt) in enumerate(cases, 1):
        p, g = rng.standard_normal((4, 3)).astype(dt), rng.standard_normal((4, 3)).astype(dt)
        g[0, :2] = dt(1e-6) if t == 1 else g[0, :2]        # a nearly unused weight: there eps matters
        m = (rng.standard_normal((4, 3)) * 0.1 * (t > 1)).astype(dt)
        v = (rng.random((4, 3)) * 0.1 * (t > 1)).astype(dt)
        hp = {"lr": 0.01, "betas": (0.9, 0.999), "eps": 1e-8, "weight_decay": wd}
        got = outputs(fn, (p, g, m, v, t, hp), ("p", "m", "v"), lang)
        for label, ours, want in zip(("p", "m", "v"), got, _adamw_ref(p, g, m, v, t, hp)):
            in_case(i, f"step t={t}, weight_decay={wd}, {np.dtype(dt).name}", lang, compare, label, ours, want, lang,
                    mistakes=mistakes if label == "p" else (), inputs=(p, g, m, v, t, hp))
    return len(cases)


# ----------------------------------------------------------------------------
# DPO

def grade_dpo_gradient(fn, lang):
    rng = np.random.default_rng(23)
    sign = Mistake(lambda pc, pr, rc, rr, beta: -beta / pc.shape[0] / (1 + np.exp(-beta * ((pc - pr) - (rc - rr)))), {
        "en": "sigmoid(+beta z) where the derivative of -log sigmoid(beta z) has sigmoid(-beta z)",
        "zh": "写成了 sigmoid(+beta z)；-log sigmoid(beta z) 的导数里是 sigmoid(-beta z)"})
    no_beta = Mistake(lambda pc, pr, rc, rr, beta: -1 / (1 + np.exp(beta * ((pc - pr) - (rc - rr)))) / pc.shape[0], {
        "en": "The chain rule's beta (from d(beta z)/dz) is missing", "zh": "少了链式法则中的 beta（来自 d(beta z)/dz）"})
    cases = [(4, 0.1), (1, 0.5), (6, 2.0)]
    for i, (B, beta) in enumerate(cases, 1):
        pc, pr, rc, rr = (rng.standard_normal(B) * 3 - 10 for _ in range(4))
        want = dpo_loss(pc, pr, rc, rr, beta)
        got = outputs(fn, (pc, pr, rc, rr, beta), ("loss", "d_pi_c", "d_pi_r"), lang)
        for label, ours, ref in zip(("loss", "d_pi_c", "d_pi_r"), got, (np.float64(want[0]), *want[1:])):
            in_case(i, f"B={B} pairs, beta={beta}", lang, compare, label,
                    np.float64(ours) if isinstance(ours, float) else ours, ref, lang,
                    mistakes=(sign, no_beta) if label == "d_pi_c" else (), inputs=(pc, pr, rc, rr, beta))
    pc, pr, rc, rr = (rng.standard_normal(3) for _ in range(4))
    finite_differences("(d_pi_c, d_pi_r)", lambda a, b: (np.asarray(dpo_loss(a, b, rc, rr, 0.3)[0]), None),
                       lambda d, c: tuple(np.asarray(x) * d for x in fn(pc, pr, rc, rr, 0.3)[1:]), [pc, pr], (0, 1), lang)
    return len(cases) + 1


# ----------------------------------------------------------------------------
# GRPO

def grade_grpo_advantages(fn, lang):
    rng = np.random.default_rng(24)
    population = Mistake(lambda r, G: ((r.reshape(-1, G) - r.reshape(-1, G).mean(1, keepdims=True))
                                       / (r.reshape(-1, G).std(1, keepdims=True) + 1e-4)).reshape(-1), {
        "en": "The std is the population one (divide by G); GRPO's uses Bessel's correction (G - 1)",
        "zh": "用了总体标准差（除以 G）；GRPO 用贝塞尔校正（除以 G - 1）"})
    batch = Mistake(lambda r, G: (r - r.mean()) / (r.reshape(-1, G).std(1, ddof=1).repeat(G) + 1e-4), {
        "en": "The mean is over the whole batch; each answer is compared with its own group (the same prompt)",
        "zh": "均值取了整个批次；每个回答只应和自己组（同一个提示）比较"})
    zero = {"en": "a group whose answers all got the same reward has std 0: keep the small constant added to the std",
            "zh": "一组回答奖励都相同时标准差为 0：别忘了标准差上加的那个小常数"}
    cases = [([1.0, 0.0, 0.0, 1.0, 1.0, 1.0], 3), (list(rng.random(8)), 4), ([0.0, 1.0] * 3, 2),
             (list(rng.random(12).round(1)), 6)]
    for i, (rewards, G) in enumerate(cases, 1):
        r = np.array(rewards)
        ours = outputs(fn, (r, G), ("advantages",), lang)[0]
        in_case(i, f"{len(r) // G} prompts x {G} answers", lang, compare, "advantages", ours, group_advantages(r, G),
                lang, mistakes=(population, batch), inputs=(r, G), nonfinite_note=zero)
    return len(cases)


def grade_grpo_loss(fn, lang):
    rng = np.random.default_rng(25)
    all_tokens = Mistake(lambda *a: grpo_loss(*a, loss_type="bnpo")[1], {
        "en": "Each token was weighted by 1 / (all answer tokens of the batch); GRPO averages over each answer's "
              "tokens first, then over the answers",
        "zh": "每个词元的权重成了 1 / (整批的回答词元数)；GRPO 先在每个回答的词元上平均，再对回答平均"})
    no_kl = Mistake(lambda *a: grpo_loss(*a, beta=0.0)[1], {
        "en": "The KL penalty's term (beta k3) is missing from the gradient",
        "zh": "梯度里少了 KL 惩罚项（beta k3）"})
    cases = [(4, 5), (2, 3), (6, 4)]
    for i, (B, T) in enumerate(cases, 1):
        old = rng.standard_normal((B, T)) - 2
        logp = old + rng.standard_normal((B, T)) * 0.3
        ref = old + rng.standard_normal((B, T)) * 0.2
        adv = rng.standard_normal(B)
        mask = np.ones((B, T), bool)
        mask[0, -2:] = False
        mask[-1, :1] = False
        want = grpo_loss(logp, old, ref, adv, mask, epsilon=0.2, beta=0.04)
        got = outputs(fn, (logp, old, ref, adv, mask), ("loss", "dlogp"), lang, epsilon=0.2, beta=0.04)
        for label, ours, ref_value in zip(("dlogp", "loss"), got[::-1], (want[1], np.float64(want[0]))):
            in_case(i, f"B={B}, T={T}", lang, compare, label, np.float64(ours) if isinstance(ours, float) else ours,
                    ref_value, lang, mistakes=(all_tokens, no_kl) if label == "dlogp" else (),
                    inputs=(logp, old, ref, adv, mask))
    B, T = 3, 4
    old, ref, adv = rng.standard_normal((B, T)), rng.standard_normal((B, T)), rng.standard_normal(B)
    logp, mask = old + 0.05 * rng.standard_normal((B, T)), np.ones((B, T), bool)
    finite_differences("dlogp", lambda lp: (np.asarray(grpo_loss(lp, old, ref, adv, mask)[0]), None),
                       lambda d, c: (np.asarray(fn(logp, old, ref, adv, mask, epsilon=0.2, beta=0.04)[1]) * d,),
                       [logp], (0,), lang)
    return len(cases) + 1
