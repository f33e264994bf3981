"""中文 for the command line: each module here holds ``ZH = {English template: 中文 template}``.

A template is a message with its values written {0}, {1}, ... in the order they appear in the English
(scripts/zh_catalog.py lists the templates of every error message and what is still missing). Literal
braces are doubled, as in str.format.

    >>> translate("--out runs/x is a file, not a folder; training writes a run directory there: choose a new directory name")
    '--out runs/x 是一个文件，不是文件夹；训练要在那里写一个运行目录：换一个新的目录名'

translate() matches a message against every template (the one with the most literal text wins), puts the
values it captured into the 中文 template, and gives the English back unchanged when nothing matches.
A captured value that is itself a whole known message (argparse's "argument --lr: must be ...") is
translated too. The catalog is read the first time it is needed, so ``zerollm --help`` in English never
loads it.
"""

import functools
import importlib
import pkgutil
import re
import unicodedata

# "{{", "}}" or a field "{3}"
_TOKEN = re.compile(r"\{\{|\}\}|\{(\d+)\}")
# a value inside a message is translated only by a whole entry without fields ("a directory"), or by a
# template with at least this much literal text: a file name such as "a: b" is not taken for the message
# "{0}: {1}" and changed
_NESTED_MIN = 10
_NESTED_WORD_MIN = 6
# how deep messages nest: argparse's "argument --lr: {1}" around an argtype's "must be {0}, got {1}" around
# a range's "a number from {0} to {1}"
_DEPTH = 3


def catalog():
    """Every module's ZH of this package, merged: {English template: 中文 template}."""
    return dict(_merged())


@functools.lru_cache(maxsize=1)
def _merged():
    merged = {}
    for info in sorted(pkgutil.iter_modules(__path__), key=lambda i: i.name):
        merged.update(getattr(importlib.import_module(f"{__name__}.{info.name}"), "ZH", {}))
    return merged


def pieces(template):
    """The literal parts and field numbers of a template, in order.

    >>> pieces("{0} is {{x}}: {1}")
    [0, ' is {x}: ', 1]
    """
    out, pos = [], 0
    for m in _TOKEN.finditer(template):
        literal = template[pos:m.start()] + ("" if m.group(1) else m.group(0)[0])
        if literal:
            if out and isinstance(out[-1], str):
                out[-1] += literal
            else:
                out.append(literal)
        if m.group(1):
            out.append(int(m.group(1)))
        pos = m.end()
    tail = template[pos:]
    if tail:
        if out and isinstance(out[-1], str):
            out[-1] += tail
        else:
            out.append(tail)
    return out


def fields(template):
    """The set of field numbers of a template: {0, 1} for "{0} and {1}"."""
    return {p for p in pieces(template) if isinstance(p, int)}


class _Template:
    """One English template: its literal parts (to rule it out cheaply) and, compiled only when those
    parts all occur in order, an anchored pattern with one lazy group per field."""

    def __init__(self, english, chinese):
        self.english, self.chinese = english, chinese
        self.parts = pieces(english)
        self.literals = [p for p in self.parts if isinstance(p, str)]
        self.literal_size = sum(len(s) for s in self.literals)
        self.order = [p for p in self.parts if isinstance(p, int)]
        self._pattern = None

    def _possible(self, message):
        first, last = self.parts[0], self.parts[-1]
        if isinstance(first, str) and not message.startswith(first):
            return False
        if isinstance(last, str) and not message.endswith(last):
            return False
        at = 0
        for literal in self.literals:
            at = message.find(literal, at)
            if at < 0:
                return False
            at += len(literal)
        return True

    def match(self, message):
        """The captured values by field number, or None. Each field is one lazy ``(.*?)`` between escaped
        literals: no nested quantifier, so a long message cannot make the match blow up."""
        if not self._possible(message):
            return None
        if self._pattern is None:
            self._pattern = re.compile(
                r"\A" + "".join("(.*?)" if isinstance(p, int) else re.escape(p) for p in self.parts) + r"\Z",
                re.DOTALL)
        m = self._pattern.match(message)
        return None if m is None else dict(zip(self.order, m.groups()))


@functools.lru_cache(maxsize=1)
def _templates():
    """Templates with words to match on, the most literal text first."""
    found = [_Template(en, zh) for en, zh in _merged().items()]
    # a template whose literal text has no letter ("{0}: {1}; {2}") would only change punctuation, and would
    # take any message it does not know apart at its colons
    found = [t for t in found if any(c.isalpha() for s in t.literals for c in s)]
    return sorted(found, key=lambda t: -t.literal_size)


@functools.lru_cache(maxsize=1)
def _whole():
    """Entries without fields or braces, by their English: a message equal to one needs no pattern, and
    no template can have more literal text in common with it."""
    return {t.english: t for t in _templates() if "{" not in t.english and "}" not in t.english}


@functools.lru_cache(maxsize=1)
def _index():
    """The templates split by what a message must start with (the first character of a leading literal) or,
    for a template that starts with a field, end with; the rest (a field at both ends) on their own. Each
    list keeps the most-literal-first order, so a message is tried only against templates it could match."""
    by_first, by_last, other = {}, {}, []
    for t in _templates():
        first, last = t.parts[0], t.parts[-1]
        if isinstance(first, str):
            by_first.setdefault(first[0], []).append(t)
        elif isinstance(last, str):
            by_last.setdefault(last[-1], []).append(t)
        else:
            other.append(t)
    return by_first, by_last, other


def _first_match(templates, message, nested):
    for t in templates:
        if nested and (t.literal_size < _NESTED_WORD_MIN if not t.order else t.literal_size < _NESTED_MIN):
            continue
        values = t.match(message)
        if values is not None:
            return t, values
    return None


def _best(message, nested=False):
    whole = _whole().get(message)
    if whole is not None and (not nested or whole.literal_size >= _NESTED_WORD_MIN):
        return whole, {}
    by_first, by_last, other = _index()
    found = [_first_match(templates, message, nested)
             for templates in (by_first.get(message[:1], ()), by_last.get(message[-1:], ()), other)]
    found = [f for f in found if f is not None]
    return max(found, key=lambda f: f[0].literal_size, default=None)


def lookup(message):
    """The English template a message was made from, or None when the catalog has no match."""
    found = _best(message)
    return found and found[0].english


def translate(message, _depth=_DEPTH):
    """The 中文 of an English message, or the message unchanged when the catalog does not know it."""
    message = str(message)
    found = _best(message, nested=_depth < _DEPTH)
    if found is None:
        return message
    t, values = found
    translated = {}
    if _depth > 1:
        translated = {n: translate(v, _depth - 1) for n, v in values.items()}
        translated = {n: v for n, v in translated.items() if v != values[n]}
    return _fill(t.chinese, {**values, **translated}, translated)


def _wide(char):
    return bool(char) and unicodedata.east_asian_width(char) in "WF"


def _fill(chinese, values, translated):
    """The 中文 template with its values put in, as they are (a value is never read as a template). The
    space a template keeps beside a field for an English value ("是 {1}") goes where that value became
    中文 ("是字符设备", not "是 字符设备")."""
    parts = pieces(chinese)
    out = []
    for i, part in enumerate(parts):
        if isinstance(part, int):
            out.append(values.get(part, ""))
            continue
        before = parts[i - 1] if i else None
        after = parts[i + 1] if i + 1 < len(parts) else None
        if before in translated and part.startswith(" ") and _wide(translated[before][-1:]):
            part = part[1:]
        if after in translated and part.endswith(" ") and _wide(translated[after][:1]):
            part = part[:-1]
        out.append(part)
    return "".join(out)


def say(message, lang):
    """The message in ``lang`` ('zh' or 'en')."""
    return translate(message) if lang == "zh" else str(message)
