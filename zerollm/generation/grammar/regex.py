"""A regular expression read by hand into a small tree (no Python ``re``: a pattern is data, never run).

    parse(r'"[a-z]{1,3}"')  ->  Cat((Chars(((34, 34),)), Repeat(Chars(((97, 122),)), 1, 3), Chars(((34, 34),))))

The whole text must match (as ``re.fullmatch``), so a ``^`` first and a ``$`` last change nothing.

Supported: literal characters; ``.`` (any character but a newline); classes ``[a-z_]``, ``[^"\\\\]``;
escapes ``\\d \\w \\s \\D \\W \\S`` (their ASCII meanings), ``\\n \\t \\r \\f \\v``, ``\\xHH``, ``\\uHHHH`` and a
backslash before any punctuation; groups ``( )`` and ``(?: )``; ``|``; ``* + ?`` and ``{n}``, ``{n,}``,
``{n,m}``. Refused, by name: lazy and possessive quantifiers, back-references, look-around, named and
flag groups, ``\\b \\B \\A \\Z``, ``\\p{..}`` classes, anchors anywhere but the two ends.

Limits, so that no pattern can hang a server: MAX_PATTERN characters, a count of at most MAX_REPEAT,
MAX_DEPTH nested groups (the automaton's own limits are in automaton.py).
"""

from dataclasses import dataclass

from zerollm.io.errors import ZeroLLMError

MAX_PATTERN = 100_000
MAX_REPEAT = 1000
MAX_DEPTH = 64
MAX_CHAR = 0x10FFFF


# ----------------------------------------------------------------------------
# the tree

@dataclass(frozen=True)
class Chars:
    """One character out of ``ranges``: sorted, disjoint (lo, hi) code point pairs, both ends included."""
    ranges: tuple


@dataclass(frozen=True)
class Cat:
    """The parts one after another; Cat(()) matches the empty text."""
    parts: tuple


@dataclass(frozen=True)
class Alt:
    """Any one of the choices."""
    choices: tuple


@dataclass(frozen=True)
class Repeat:
    """``item`` from ``lo`` to ``hi`` times (hi None: no upper bound)."""
    item: object
    lo: int
    hi: int | None


@dataclass(frozen=True)
class Sep:
    """``item (sep item)*``: a list of one or more. Only the JSON Schema translation builds it, so that the
    item is built once in the automaton, not twice as ``item(sep item)*`` would (nested lists double)."""
    item: object
    sep: object


EMPTY = Cat(())


def literal(text):
    """The tree matching exactly ``text``."""
    return Cat(tuple(Chars(((ord(c), ord(c)),)) for c in text))


def merge_ranges(ranges):
    """[(lo, hi)] -> sorted, disjoint, adjacent ones joined."""
    out = []
    for lo, hi in sorted(ranges):
        if out and lo <= out[-1][1] + 1:
            out[-1] = (out[-1][0], max(out[-1][1], hi))
        else:
            out.append((lo, hi))
    return tuple(out)


def negate(ranges):
    """Every code point not in ``ranges`` (sorted, disjoint)."""
    out, start = [], 0
    for lo, hi in ranges:
        if lo > start:
            out.append((start, lo - 1))
        start = hi + 1
    if start <= MAX_CHAR:
        out.append((start, MAX_CHAR))
    return tuple(out)


DIGIT = ((48, 57),)
WORD = merge_ranges([(48, 57), (65, 90), (95, 95), (97, 122)])
SPACE = merge_ranges([(9, 13), (32, 32)])
CLASS_ESCAPES = {"d": DIGIT, "w": WORD, "s": SPACE, "D": negate(DIGIT), "W": negate(WORD), "S": negate(SPACE)}
CHAR_ESCAPES = {"n": "\n", "t": "\t", "r": "\r", "f": "\f", "v": "\v", "0": "\0"}
REFUSED_ESCAPES = {"b": "a word boundary \\b", "B": "\\B", "A": "\\A", "Z": "\\Z", "z": "\\z", "G": "\\G",
                   "p": "a Unicode property class \\p{..}", "P": "a Unicode property class \\P{..}",
                   "k": "a named back-reference \\k<..>"}


def refuse(what, pos, pattern):
    return ZeroLLMError(f"the pattern uses {what} (at character {pos}), which constrained decoding does not "
                        f"support; supported: literals, ., [classes], \\d \\w \\s, ( ), (?: ), |, * + ? {{n,m}} "
                        f"(pattern: {shorten(pattern)})")


def shorten(pattern, n=60):
    return pattern if len(pattern) <= n else pattern[:n] + "..."


# ----------------------------------------------------------------------------
# the parser: one recursive descent, alternation > concatenation > repetition > atom

def parse(pattern):
    """pattern -> tree. ZeroLLMError names what is not supported, or the limit a pattern goes past."""
    if not isinstance(pattern, str):
        raise ZeroLLMError(f"a pattern must be text, got {type(pattern).__name__}")
    if len(pattern) > MAX_PATTERN:
        raise ZeroLLMError(f"the pattern is {len(pattern):,} characters long; the limit is {MAX_PATTERN:,}")
    body = pattern
    if body.startswith("^"):
        body = body[1:]
    if body.endswith("$") and not _escaped(body, len(body) - 1):
        body = body[:-1]
    p = _Parser(body, pattern)
    tree = p.alternation(0)
    if p.i < len(body):
        raise ZeroLLMError(f"the pattern has a ')' with no '(' (at character {p.i}): {shorten(pattern)}")
    return tree


def _escaped(s, i):
    n = 0
    while i - 1 - n >= 0 and s[i - 1 - n] == "\\":
        n += 1
    return n % 2 == 1


class _Parser:
    def __init__(self, s, pattern):
        self.s, self.i, self.pattern = s, 0, pattern

    def peek(self):
        return self.s[self.i] if self.i < len(self.s) else None

    def alternation(self, depth):
        if depth > MAX_DEPTH:
            raise ZeroLLMError(f"the pattern nests groups more than {MAX_DEPTH} deep: {shorten(self.pattern)}")
        choices = [self.concatenation(depth)]
        while self.peek() == "|":
            self.i += 1
            choices.append(self.concatenation(depth))
        return choices[0] if len(choices) == 1 else Alt(tuple(choices))

    def concatenation(self, depth):
        parts = []
        while self.peek() not in (None, "|", ")"):
            parts.append(self.repetition(depth))
        return parts[0] if len(parts) == 1 else Cat(tuple(parts))

    def repetition(self, depth):
        item, counted = self.atom(depth), False
        while self.peek() in ("*", "+", "?", "{"):
            if self.peek() == "{" and not self._is_count():
                break
            lo, hi = self.quantifier()
            if self.peek() in ("?", "+"):
                kind = "a lazy quantifier (*?, +?, ??, {n,m}?)" if self.peek() == "?" else "a possessive quantifier"
                raise refuse(kind, self.i, self.pattern)
            if counted:
                raise refuse("a quantifier right after another (as a** or a{2}{3})", self.i, self.pattern)
            item, counted = Repeat(item, lo, hi), True
        return item

    def _is_count(self):
        j = self.s.find("}", self.i)
        inside = self.s[self.i + 1:j] if j > 0 else ""
        return bool(inside) and all(c.isdigit() or c == "," for c in inside) and inside[0] != ","

    def quantifier(self):
        c = self.s[self.i]
        self.i += 1
        if c != "{":
            return {"*": (0, None), "+": (1, None), "?": (0, 1)}[c]
        j = self.s.index("}", self.i)
        lo, comma, hi = self.s[self.i:j].partition(",")
        self.i = j + 1
        lo = int(lo)
        hi = lo if not comma else (int(hi) if hi else None)
        if max(lo, hi or 0) > MAX_REPEAT:
            raise ZeroLLMError(f"the pattern repeats something {max(lo, hi or 0):,} times; counts in {{n,m}} are "
                               f"limited to {MAX_REPEAT}: {shorten(self.pattern)}")
        if hi is not None and hi < lo:
            raise ZeroLLMError(f"{{{lo},{hi}}} in the pattern has its larger number first: {shorten(self.pattern)}")
        return lo, hi

    def atom(self, depth):
        c, at = self.s[self.i], self.i
        self.i += 1
        if c == "(":
            return self.group(depth, at)
        if c == "[":
            return Chars(self.char_class())
        if c == ".":
            return Chars(((0, 9), (11, MAX_CHAR)))
        if c == "\\":
            return Chars(self.escape(in_class=False))
        if c in "*+?":
            raise ZeroLLMError(f"'{c}' at character {at} has nothing before it to repeat: {shorten(self.pattern)}")
        if c in "^$":
            raise refuse(f"the anchor {c} inside the pattern (only first or last)", at, self.pattern)
        return Chars(((ord(c), ord(c)),))

    def group(self, depth, at):
        if self.s.startswith("?", self.i):
            if not self.s.startswith("?:", self.i):
                kinds = {"?=": "a look-ahead (?=", "?!": "a look-ahead (?!", "?<=": "a look-behind (?<=",
                         "?<!": "a look-behind (?<!", "?P": "a named group (?P<", "?<": "a named group (?<",
                         "?>": "an atomic group (?>", "?#": "a comment (?#"}
                name = next((v for k, v in kinds.items() if self.s.startswith(k, self.i)), "a flag group (?flags)")
                raise refuse(name, at, self.pattern)
            self.i += 2
        inner = self.alternation(depth + 1)
        if self.peek() != ")":
            raise ZeroLLMError(f"the group opened at character {at} is never closed: {shorten(self.pattern)}")
        self.i += 1
        return inner

    def char_class(self):
        at = self.i - 1
        negated = self.peek() == "^"
        self.i += negated
        ranges, first = [], True
        while True:
            c = self.peek()
            if c is None:
                raise ZeroLLMError(f"the class [ opened at character {at} is never closed: {shorten(self.pattern)}")
            if c == "]" and not first:
                self.i += 1
                break
            first = False
            lo = self.class_atom()
            if self.peek() == "-" and self.s[self.i + 1:self.i + 2] not in ("]", ""):
                self.i += 1
                hi = self.class_atom()
                if len(lo) != 1 or len(hi) != 1 or lo[0][0] != lo[0][1] or hi[0][0] != hi[0][1]:
                    raise refuse("a range with a class at one end (as [\\d-z])", self.i, self.pattern)
                if hi[0][0] < lo[0][0]:
                    raise ZeroLLMError(f"the range ending at character {self.i} runs backwards: {shorten(self.pattern)}")
                ranges.append((lo[0][0], hi[0][0]))
            else:
                ranges.extend(lo)
        ranges = merge_ranges(ranges)
        return negate(ranges) if negated else ranges

    def class_atom(self):
        c = self.s[self.i]
        self.i += 1
        if c == "\\":
            return self.escape(in_class=True)
        if c == "[" and self.peek() == ":":
            raise refuse("a POSIX class [:name:]", self.i - 1, self.pattern)
        return ((ord(c), ord(c)),)

    def escape(self, in_class):
        at = self.i - 1
        c = self.peek()
        if c is None:
            raise ZeroLLMError(f"the pattern ends with a lone backslash: {shorten(self.pattern)}")
        self.i += 1
        if c in CLASS_ESCAPES:
            return CLASS_ESCAPES[c]
        if c in CHAR_ESCAPES:
            return ((ord(CHAR_ESCAPES[c]),) * 2,)
        if c in ("x", "u"):
            n = 2 if c == "x" else 4
            digits = self.s[self.i:self.i + n]
            if len(digits) != n or any(d not in "0123456789abcdefABCDEF" for d in digits):
                raise ZeroLLMError(f"\\{c} at character {at} needs {n} hex digits: {shorten(self.pattern)}")
            self.i += n
            return ((int(digits, 16),) * 2,)
        if c == "b" and in_class:
            return ((8, 8),)
        if c in REFUSED_ESCAPES or c.isdigit():
            raise refuse(REFUSED_ESCAPES.get(c, f"a back-reference \\{c}"), at, self.pattern)
        if c.isalnum():
            raise refuse(f"the escape \\{c}", at, self.pattern)
        return ((ord(c), ord(c)),)


# ----------------------------------------------------------------------------
# back to text (what `zerollm grammar` shows and what other libraries are given)

def to_regex(node):
    """tree -> a pattern that means the same (Sep written out as item(sep item)*)."""
    if isinstance(node, Chars):
        return _chars_regex(node.ranges)
    if isinstance(node, Cat):
        return "".join(_group_if(p, (Alt,)) for p in node.parts)
    if isinstance(node, Alt):
        return "|".join(to_regex(c) for c in node.choices)
    if isinstance(node, Sep):
        return f"{_group_if(node.item, (Alt,))}({to_regex(node.sep)}{_group_if(node.item, (Alt,))})*"
    count = {(0, None): "*", (1, None): "+", (0, 1): "?"}.get((node.lo, node.hi))
    if count is None:
        count = f"{{{node.lo}}}" if node.lo == node.hi else f"{{{node.lo},{'' if node.hi is None else node.hi}}}"
    item = to_regex(node.item)
    single = isinstance(node.item, Chars)
    return (item if single else f"({item})") + count


def _group_if(node, kinds):
    return f"({to_regex(node)})" if isinstance(node, kinds) or isinstance(node, Sep) else to_regex(node)


def _char(cp):
    c = chr(cp)
    if c in "\\]^-[.()|*+?{}$":
        return "\\" + c
    if cp < 0x20 or cp == 0x7F or 0xD800 <= cp <= 0xDFFF:
        return f"\\x{cp:02x}" if cp < 0x100 else f"\\u{cp:04x}"
    return c


def _chars_regex(ranges):
    if len(ranges) == 1 and ranges[0][0] == ranges[0][1]:
        return _char(ranges[0][0])
    if ranges == ((0, 9), (11, MAX_CHAR)):
        return "."
    inside = "".join(_char(lo) if lo == hi else f"{_char(lo)}-{_char(hi)}" for lo, hi in ranges if lo <= 0xFFFF)
    if ranges[-1][1] == MAX_CHAR:           # written as a negated class: the rest is short
        rest = negate(ranges)
        return "[^" + "".join(_char(lo) if lo == hi else f"{_char(lo)}-{_char(hi)}" for lo, hi in rest) + "]"
    return f"[{inside}]"
