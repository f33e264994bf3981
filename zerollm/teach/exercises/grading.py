"""How ``zerollm exercise check`` judges a learner's function: one output at a time, against zerollm's own
layer and against finite differences, and what it says when something is off.

A check raises ``Wrong`` with one line: which output or gradient, where (the worst index), by how much,
and (when the numbers match a well-known mistake) what that mistake usually is. It never prints the
right numbers: a learner who reads the message still has to find the fix.
"""

from dataclasses import dataclass

import numpy as np

from zerollm.teach.gradcheck import OpCase, check_case, rel_err

# how close is right: float64 sums in another order agree to ~1e-12, float32 ones to ~1e-6
TOL = {np.dtype(np.float64): 1e-7, np.dtype(np.float32): 2e-4}

TEXT = {
    "not_array": {"en": "{label} should be an array of shape {shape}, but your function returned {got}",
                  "zh": "{label} 应是形状为 {shape} 的数组，你的函数却返回了 {got}"},
    "shape": {"en": "{label} has shape {got}, expected {shape}{why}",
              "zh": "{label} 的形状是 {got}，应为 {shape}{why}"},
    "transposed": {"en": " (transposed: a product in the wrong order, or a missing .T?)",
                   "zh": "（转置了：乘法顺序反了，或少了 .T？）"},
    "summed": {"en": " (an axis is missing: was it summed away, or not summed over the batch?)",
               "zh": "（少了一个维度：是不是把某个轴求和掉了，或没有对批次求和？）"},
    "dtype": {"en": "{label} is {got} but the inputs were {want}: keep the input's dtype "
                    "(make new arrays with dtype=x.dtype, and mind Python floats that promote)",
              "zh": "{label} 的类型是 {got}，而输入是 {want}：请保持输入的 dtype"
                    "（新建数组时写 dtype=x.dtype，当心 Python 浮点数把类型提升）"},
    "nonfinite": {"en": "{label} has NaN or inf at index {where} (the right value there is finite){why}",
                  "zh": "{label} 在下标 {where} 处是 NaN 或 inf（正确值是有限数）{why}"},
    "values": {"en": "{label} is wrong at index {where}: off by {diff:.3g} (relative error {rel:.2g}, "
                     "allowed {tol:g}); {count} of {size} entries are off{why}",
               "zh": "{label} 在下标 {where} 处不对：差了 {diff:.3g}（相对误差 {rel:.2g}，允许 {tol:g}）；"
                     "{size} 个数中有 {count} 个不对{why}"},
    "sign": {"en": ". It is the right value with the sign flipped: a sign error (a minus lost or doubled)",
             "zh": "。它恰好是正确值的相反数：符号错了（丢了或多了一个负号）"},
    "factor": {"en": ". It is the right value times {factor:.4g}: a missing or extra constant factor "
                     "(a mean taken as a sum, a scale, a 1/N)",
               "zh": "。它恰好是正确值乘以 {factor:.4g}：少了或多了一个常数因子（把平均写成了求和、缩放系数、1/N）"},
    "fd": {"en": "{label} disagrees with finite differences of zerollm's forward (max relative error {rel:.2g}): "
                 "the gradient is not the derivative of the forward",
           "zh": "{label} 与 zerollm 前向的有限差分不一致（最大相对误差 {rel:.2g}）：这个梯度不是前向的导数"},
    "case": {"en": "{msg} [case {case}: {what}]", "zh": "{msg} [第 {case} 组：{what}]"},
}


SEP = {"en": ". ", "zh": "。"}        # between what is wrong and what it usually means


class Wrong(Exception):
    """The learner's function gave a wrong result; the message is the one line ``check`` prints."""


@dataclass(frozen=True)
class Mistake:
    """A well-known wrong version of an output and what it means: ``variant(inputs)`` computes the wrong
    numbers with zerollm's pieces; when the learner's output matches them, ``note`` is said."""
    variant: object
    note: dict


def say(key, lang, **fields):
    return TEXT[key][lang].format(**fields)


def worst_index(ours, ref):
    diff = np.abs(np.asarray(ours, np.float64) - np.asarray(ref, np.float64))
    diff = np.where(np.isnan(diff), np.inf, diff)
    return np.unravel_index(int(np.argmax(diff)), diff.shape) if diff.size else ()


def _where(index):
    return "(" + ", ".join(str(int(i)) for i in index) + ")"


def _matches(ours, other, tol):
    other = np.asarray(other, np.float64)
    return other.shape == ours.shape and np.all(np.isfinite(other)) and rel_err(ours, other) <= tol


def _explain(ours, ref, tol, mistakes, inputs, lang):
    """What the wrong numbers look like: a known mistake, a flipped sign, a constant factor, or nothing."""
    for m in mistakes:
        if _matches(ours, m.variant(*inputs), tol):
            return SEP[lang] + m.note[lang]
    ref = np.asarray(ref, np.float64)
    if ref.size < 2:                                   # one number is a multiple of any other: no pattern to name
        return ""
    if _matches(ours, -ref, tol) and np.abs(ref).max() > 0:
        return say("sign", lang)
    big = np.abs(ref) > 1e-3 * max(np.abs(ref).max(), 1e-30)
    if big.any():
        ratios = ours[big] / ref[big]
        factor = float(np.median(ratios))
        if abs(factor - 1) > 1e-3 and factor != 0 and _matches(ours, factor * ref, tol):
            return say("factor", lang, factor=factor)
    return ""


def compare(label, ours, ref, lang, *, mistakes=(), inputs=(), nonfinite_note=None):
    """Raise Wrong unless ``ours`` has the shape, dtype and values of ``ref`` (zerollm's own output)."""
    ref = np.asarray(ref)
    if not isinstance(ours, (np.ndarray, np.generic, float, int)) or isinstance(ours, bool):
        got = type(ours).__name__ if not isinstance(ours, (tuple, list)) else f"a {type(ours).__name__} of {len(ours)}"
        raise Wrong(say("not_array", lang, label=label, shape=ref.shape, got=got))
    ours = np.asarray(ours)
    if ours.shape != ref.shape:
        why = ""
        if ours.shape == ref.shape[::-1] and ours.ndim > 1:
            why = say("transposed", lang)
        elif ours.ndim < ref.ndim:
            why = say("summed", lang)
        raise Wrong(say("shape", lang, label=label, got=ours.shape, shape=ref.shape, why=why))
    if ref.dtype.kind == "f" and ours.dtype != ref.dtype:
        raise Wrong(say("dtype", lang, label=label, got=ours.dtype, want=ref.dtype))
    tol = TOL.get(ref.dtype, 1e-7)
    if ref.ndim == 0:                                  # a loss: one number, compared as an array of one
        ours, ref = ours.reshape(1), ref.reshape(1)
    ours64, ref64 = ours.astype(np.float64), ref.astype(np.float64)
    bad_finite = ~np.isfinite(ours64) & np.isfinite(ref64)
    if bad_finite.any():
        where = tuple(int(i[0]) for i in np.nonzero(bad_finite))
        why = (SEP[lang] + nonfinite_note[lang]) if nonfinite_note else ""
        raise Wrong(say("nonfinite", lang, label=label, where=_where(where), why=why))
    both = np.isfinite(ref64)
    if not np.array_equal(np.isfinite(ours64), both) or not np.array_equal(ours64[~both], ref64[~both]):
        where = tuple(int(i[0]) for i in np.nonzero((ours64 != ref64) & ~both))
        raise Wrong(say("values", lang, label=label, where=_where(where), diff=float("inf"), rel=float("inf"),
                        tol=tol, count=int(np.sum((ours64 != ref64) & ~both)), size=ours.size, why=""))
    scale = max(np.abs(ref64[both]).max(initial=0.0), 1e-30)
    err = np.abs(ours64 - ref64)
    err[~both] = 0
    if err.max(initial=0.0) / scale <= tol:
        return
    index = worst_index(np.where(both, ours64, 0), np.where(both, ref64, 0))
    why = _explain(np.where(both, ours64, 0), np.where(both, ref64, 0), tol, mistakes, inputs, lang)
    raise Wrong(say("values", lang, label=label, where=_where(index), diff=float(err[index]),
                    rel=float(err[index] / scale), tol=tol, count=int((err / scale > tol).sum()),
                    size=ours.size, why=why))


def finite_differences(label, forward, backward, inputs, wrt, lang):
    """Raise Wrong unless ``backward`` (the learner's, wrapped to return the gradients of ``wrt``) agrees
    with central differences of zerollm's ``forward`` (teach.gradcheck.check_case, float64)."""
    inputs = [np.array(a, dtype=np.float64) if i in wrt else a for i, a in enumerate(inputs)]
    result = check_case(OpCase(label, inputs, wrt, forward, backward, {}, {}))
    if not result.ok:
        raise Wrong(say("fd", lang, label=label, rel=result.max_rel))


def unpack(result, n, labels, lang):
    """The learner's return value as ``n`` outputs (a tuple of n, or the one array when n == 1)."""
    if n == 1:
        return (result,)
    if not isinstance(result, (tuple, list)) or len(result) != n:
        got = f"a {type(result).__name__} of {len(result)}" if isinstance(result, (tuple, list)) else type(result).__name__
        raise Wrong(say("not_array", lang, label="(" + ", ".join(labels) + ")", shape=f"{n} arrays", got=got))
    return tuple(result)


def in_case(number, what, lang, fn, *args, **kwargs):
    """Run one case's checks; a Wrong says which case (shapes and dtype) it came from."""
    try:
        fn(*args, **kwargs)
    except Wrong as err:
        raise Wrong(say("case", lang, msg=str(err), case=number, what=what)) from None


# ----------------------------------------------------------------------------
# an exercise, and calling the learner's function

@dataclass(frozen=True)
class Exercise:
    """One exercise. ``doc`` and ``hints`` are {"en": ..., "zh": ...}; ``solution`` names the functions of
    zerollm whose source ``solution`` prints; ``grade(fn, lang)`` raises Wrong or returns the cases passed."""
    name: str
    part: int
    title: dict
    signature: str
    doc: dict
    hints: dict
    solution: tuple
    grade: object

    @property
    def function(self):
        return self.signature.split("(")[0]


class Raised(Exception):
    """The learner's function raised: ``kind`` is the exception's class name, ``line`` where in their file."""

    def __init__(self, kind, message, line):
        super().__init__(message)
        self.kind, self.line = kind, line


def call(fn, *args, **kwargs):
    """fn(*args) on copies of the arrays (a function that writes into its inputs must not change the next
    check); an exception of the learner's becomes Raised, with the line of their file it came from."""
    args = [a.copy() if isinstance(a, np.ndarray) else a for a in args]
    try:
        return fn(*args, **kwargs)
    except Exception as err:   # noqa: BLE001 -- any error of the learner's code is reported, never re-raised
        import traceback
        frames = traceback.extract_tb(err.__traceback__)
        own = [f for f in frames if getattr(fn, "__code__", None) is not None
               and f.filename == fn.__code__.co_filename]
        line = own[-1].lineno if own else None
        raise Raised(type(err).__name__, str(err).splitlines()[0] if str(err) else "", line) from None


def outputs(fn, args, labels, lang, **kwargs):
    return unpack(call(fn, *args, **kwargs), len(labels), labels, lang)
