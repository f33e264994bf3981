"""Printing helpers shared by the walkthroughs: matrices, rules, aligned columns, JSON-safe arrays."""

import unicodedata

import numpy as np

RULE = "=" * 72


def matrix(a, precision, indent="  "):
    """A 2-D (or 1-D) array as NumPy prints it with ``suppress=True``: the course's format."""
    with np.printoptions(precision=precision, suppress=True, linewidth=120, threshold=2000):
        text = np.array2string(np.asarray(a))
    return "\n".join(indent + line for line in text.splitlines())


def number(x, precision):
    """One number rounded to ``precision`` decimals, trailing zeros trimmed: 0.5006, 1, -0.01."""
    text = f"{float(x):.{precision}f}"
    if "." in text:
        text = text.rstrip("0").rstrip(".")
    return "0" if text == "-0" else text


def vector(a, precision):
    return "[" + ", ".join(number(x, precision) for x in np.asarray(a).ravel()) + "]"


def display_width(text):
    """Columns ``text`` takes in a terminal: CJK characters are two columns wide, others one.

    >>> display_width("abc"), display_width("乘加次数")
    (3, 8)
    """
    return sum(2 if unicodedata.east_asian_width(ch) in ("W", "F") else 1 for ch in text)


def pad(text, width, align="<"):
    """``text`` padded with spaces to ``width`` terminal columns (``str.ljust`` counts CJK as 1).

    >>> pad("头", 4) + "|", pad("ab", 4, ">") + "|"
    ('头  |', '  ab|')
    """
    fill = " " * max(width - display_width(text), 0)
    return fill + text if align == ">" else text + fill


def heading(title):
    print(f"\n{RULE}\n{title}\n{RULE}")


def _json_number(x, dtype):
    # float32 values print with the shortest decimal that round-trips in float32 (0.11, not
    # 0.10999999940395355), so the JSON shows the numbers the learner typed.
    return float(str(dtype.type(x))) if dtype == np.float32 else float(x)


def to_json(a, hidden=None):
    """Nested lists from an array; entries where ``hidden`` is True become None (JSON null)."""
    a = np.asarray(a)
    if a.dtype == np.bool_:
        return a.tolist()
    flat = [_json_number(x, a.dtype) for x in a.ravel().tolist()]
    if hidden is not None:
        flat = [None if h else x for x, h in zip(flat, np.broadcast_to(hidden, a.shape).ravel())]
    return _nest(flat, a.shape)


def _nest(flat, shape):
    if not shape:
        return flat[0]
    if len(shape) == 1:
        return flat
    step = len(flat) // shape[0]
    return [_nest(flat[i * step:(i + 1) * step], shape[1:]) for i in range(shape[0])]
