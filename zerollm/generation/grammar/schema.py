"""JSON Schema -> a pattern tree (regex.py's nodes) whose every match is JSON the schema accepts.

    schema_tree({"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]})
    # matches {"n":7}  {"n": -12}

Whitespace, stated once: the only whitespace written is ONE optional space after each ``:`` and ``,``
(WS below). So both json.dumps's default form ({"n": 7, "m": 1}) and its compact form ({"n":7,"m":1})
match, and a model cannot stall in a run of spaces or newlines.

The subset (anything else is refused by name, never ignored):
- ``type``: object, array, string, integer, number, boolean, null, or a list of them;
- objects: ``properties`` (written in the order given), ``required`` (the others may be left out),
  ``additionalProperties`` false or absent (either way only the listed properties are written); an
  object without ``properties`` is any JSON object (json_object, bounded nesting);
- arrays: ``items`` (one schema), ``minItems``, ``maxItems``;
- strings: ``enum``, ``const``, ``pattern`` (regex.py's syntax, inside the quotes; one that could write
  ``"``, ``\\`` or a control character is refused), ``minLength``, ``maxLength``, ``format`` date, time,
  date-time, uuid;
- ``enum`` and ``const`` of any JSON values (written compact), ``anyOf``, ``$ref`` to ``#/...`` in the
  same document (not recursive), and ``{}`` / ``true`` = any JSON value.
Annotations (title, description, default, examples, $schema, $id, $defs, definitions, $comment) are read
past. Integers and numbers are unbounded in length: max_tokens ends them.
"""

import json

from zerollm.io.errors import ZeroLLMError
from zerollm.generation.grammar.regex import (EMPTY, MAX_REPEAT, Alt, Cat, Chars, Repeat, Sep, literal, merge_ranges,
                                              negate, parse)

WS = Repeat(literal(" "), 0, 1)
DIGITS = Chars(((48, 57),))
INTEGER = Cat((Repeat(literal("-"), 0, 1), Alt((literal("0"), Cat((Chars(((49, 57),)), Repeat(DIGITS, 0, None)))))))
NUMBER = Cat((INTEGER, Repeat(Cat((literal("."), Repeat(DIGITS, 1, None))), 0, 1),
              Repeat(Cat((Chars(((69, 69), (101, 101))), Repeat(Chars(((43, 43), (45, 45))), 0, 1),
                          Repeat(DIGITS, 1, None))), 0, 1)))
HEX = Chars(merge_ranges([(48, 57), (65, 70), (97, 102)]))
# one character of a JSON string: anything but " \ and control characters, or an escape (RFC 8259 sec. 7)
STRING_CHAR = Alt((Chars(negate(merge_ranges([(0, 31), (34, 34), (92, 92)]))),
                   Cat((literal("\\"), Chars(merge_ranges([(ord(c), ord(c)) for c in '"\\/bfnrt'])))),
                   Cat((literal("\\u"), Repeat(HEX, 4, 4)))))
STRING = Cat((literal('"'), Repeat(STRING_CHAR, 0, None), literal('"')))
BOOLEAN = Alt((literal("true"), literal("false")))
NULL = literal("null")
JSON_DEPTH = 3            # json_object's nesting: objects and arrays inside the top object, this deep
FORMATS = {
    "date": r"[0-9]{4}-(0[1-9]|1[0-2])-(0[1-9]|[12][0-9]|3[01])",
    "time": r"([01][0-9]|2[0-3]):[0-5][0-9]:[0-5][0-9](\.[0-9]+)?(Z|[+-]([01][0-9]|2[0-3]):[0-5][0-9])?",
    "uuid": r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}",
}
FORMATS["date-time"] = FORMATS["date"] + "T" + FORMATS["time"]
ANNOTATIONS = {"title", "description", "default", "examples", "$schema", "$id", "$defs", "definitions",
               "$comment", "deprecated", "readOnly", "writeOnly"}
KNOWN = {"type", "properties", "required", "additionalProperties", "items", "minItems", "maxItems", "enum",
         "const", "pattern", "minLength", "maxLength", "format", "anyOf", "$ref"}
MAX_REF_DEPTH = 32
MAX_NESTING = 32          # schemas inside schemas (properties, items, anyOf): deeper is refused, not recursed into


def _sep_list(item, lo=0, hi=None):
    """item, item, ... between lo and hi times, each comma followed by WS."""
    comma = Cat((literal(","), WS))
    if hi is None and lo <= 1:
        items = Sep(item, comma)
        return items if lo == 1 else Repeat(items, 0, 1)
    if hi == 0:
        return EMPTY
    rest = Repeat(Cat((comma, item)), max(lo - 1, 0), None if hi is None else hi - 1)
    items = Cat((item, rest))
    return items if lo >= 1 else Repeat(items, 0, 1)


def json_value(depth=JSON_DEPTH):
    """Any JSON value with objects and arrays nested at most ``depth`` deep."""
    scalars = [STRING, NUMBER, BOOLEAN, NULL]
    if depth <= 0:
        return Alt(tuple(scalars))
    inner = json_value(depth - 1)
    return Alt(tuple(scalars) + (_object_of(inner), _array_of(inner)))


def _object_of(value):
    member = Cat((STRING, literal(":"), WS, value))
    return Cat((literal("{"), _sep_list(member), literal("}")))


def _array_of(item, lo=0, hi=None):
    return Cat((literal("["), _sep_list(item, lo, hi), literal("]")))


def json_object(depth=JSON_DEPTH):
    """Any JSON object (response_format json_object), values nested at most ``depth`` deep inside it."""
    return _object_of(json_value(depth - 1))


# ----------------------------------------------------------------------------
# the translation

def schema_tree(schema):
    """A JSON Schema (a dict, or true) -> the tree; ZeroLLMError names what it does not support."""
    return _Translator(schema).tree(schema, "#", ())


class _Translator:
    def __init__(self, root):
        self.root, self.depth = root, 0

    def tree(self, s, where, refs):
        if self.depth >= MAX_NESTING:
            raise ZeroLLMError(f"the schema nests more than {MAX_NESTING} schemas deep at {where[:200]}; flatten it")
        self.depth += 1
        try:
            return self._tree(s, where, refs)
        finally:
            self.depth -= 1

    def _tree(self, s, where, refs):
        if s is True or s == {}:
            return json_value()
        if not isinstance(s, dict):
            raise ZeroLLMError(f"the schema at {where} must be an object (or true), got {json.dumps(s)[:60]}")
        unknown = sorted(k for k in s if k not in KNOWN and k not in ANNOTATIONS)
        if unknown:
            raise ZeroLLMError(f"the JSON Schema keyword(s) {', '.join(unknown)} at {where} are not supported by "
                               f"constrained decoding; supported: {', '.join(sorted(KNOWN))}")
        if "$ref" in s:
            return self.ref(s, where, refs)
        if "const" in s:
            return literal(_dumps(s["const"]))
        if "enum" in s:
            if not isinstance(s["enum"], list) or not s["enum"]:
                raise ZeroLLMError(f"enum at {where} must be a non-empty list")
            return Alt(tuple(literal(_dumps(v)) for v in s["enum"]))
        if "anyOf" in s:
            if not isinstance(s["anyOf"], list) or not s["anyOf"]:
                raise ZeroLLMError(f"anyOf at {where} must be a non-empty list of schemas")
            return Alt(tuple(self.tree(sub, f"{where}/anyOf/{k}", refs) for k, sub in enumerate(s["anyOf"])))
        kind = s.get("type")
        if kind is None:
            return self.untyped(s, where)
        kinds = kind if isinstance(kind, list) else [kind]
        return Alt(tuple(self.typed(s, k, where, refs) for k in kinds)) if len(kinds) > 1 else \
            self.typed(s, kinds[0], where, refs)

    def untyped(self, s, where):
        used = sorted(k for k in s if k in KNOWN)
        if used:
            raise ZeroLLMError(f"the schema at {where} uses {', '.join(used)} without a \"type\"; give its type")
        return json_value()

    def ref(self, s, where, refs):
        target = s["$ref"]
        if not isinstance(target, str) or not target.startswith("#"):
            raise ZeroLLMError(f"$ref at {where} must point inside the same document (#/...), got {target!r}")
        if target in refs:
            raise ZeroLLMError(f"$ref {target} at {where} refers back to itself (a recursive schema), which "
                               "constrained decoding does not support")
        if len(refs) >= MAX_REF_DEPTH:
            raise ZeroLLMError(f"$refs nest more than {MAX_REF_DEPTH} deep at {where}")
        node = self.root
        for part in [p for p in target[1:].split("/") if p]:
            part = part.replace("~1", "/").replace("~0", "~")
            if not isinstance(node, dict) or part not in node:
                raise ZeroLLMError(f"$ref {target} at {where} points at nothing in the schema")
            node = node[part]
        return self.tree(node, target, refs + (target,))

    def typed(self, s, kind, where, refs):
        if kind == "object":
            return self.object(s, where, refs)
        if kind == "array":
            return self.array(s, where, refs)
        if kind == "string":
            return self.string(s, where)
        simple = {"integer": INTEGER, "number": NUMBER, "boolean": BOOLEAN, "null": NULL}
        if kind not in simple:
            raise ZeroLLMError(f"\"type\": {json.dumps(kind)} at {where} is not a JSON Schema type; use object, "
                               "array, string, integer, number, boolean or null")
        return simple[kind]

    def object(self, s, where, refs):
        extra = s.get("additionalProperties", False)
        if extra not in (False, True) and extra != {}:
            raise ZeroLLMError(f"additionalProperties as a schema at {where} is not supported; leave it out or "
                               "set it to false (only the listed properties are written)")
        props = s.get("properties")
        if props is None:
            if s.get("required"):
                raise ZeroLLMError(f"required at {where} names properties that \"properties\" does not give")
            return json_object()
        required = s.get("required", [])
        missing = [r for r in required if r not in props]
        if missing:
            raise ZeroLLMError(f"required at {where} names {', '.join(missing)}, which \"properties\" does not give")
        members = [(Cat((literal(_dumps(name)), literal(":"), WS,
                         self.tree(sub, f"{where}/properties/{name}", refs))), name in required)
                   for name, sub in props.items()]
        return Cat((literal("{"), _members(members), literal("}")))

    def array(self, s, where, refs):
        lo, hi = s.get("minItems", 0), s.get("maxItems")
        for name, n in (("minItems", lo), ("maxItems", hi)):
            if n is not None and (not isinstance(n, int) or not 0 <= n <= MAX_REPEAT):
                raise ZeroLLMError(f"{name} at {where} must be a whole number from 0 to {MAX_REPEAT}, got {n!r}")
        if hi is not None and hi < lo:
            raise ZeroLLMError(f"maxItems ({hi}) at {where} is below minItems ({lo})")
        items = s.get("items", True)
        if isinstance(items, list):
            raise ZeroLLMError(f"items as a list (tuple validation) at {where} is not supported; give one schema")
        return _array_of(self.tree(items, f"{where}/items", refs), lo, hi)

    def string(self, s, where):
        if "format" in s:
            if s["format"] not in FORMATS:
                raise ZeroLLMError(f"format {s['format']!r} at {where} is not supported; supported: "
                                   f"{', '.join(sorted(FORMATS))}")
            return Cat((literal('"'), parse(FORMATS[s["format"]]), literal('"')))
        if "pattern" in s:
            inner = parse(s["pattern"])
            if _may_write(inner, merge_ranges([(0, 31), (34, 34), (92, 92)])):
                raise ZeroLLMError(f"the pattern at {where} could write \", \\ or a control character inside "
                                   "the string, which would need JSON escapes; leave those out of the pattern")
            return Cat((literal('"'), inner, literal('"')))
        lo, hi = s.get("minLength", 0), s.get("maxLength")
        for name, n in (("minLength", lo), ("maxLength", hi)):
            if n is not None and (not isinstance(n, int) or not 0 <= n <= MAX_REPEAT):
                raise ZeroLLMError(f"{name} at {where} must be a whole number from 0 to {MAX_REPEAT}, got {n!r}")
        if hi is not None and hi < lo:
            raise ZeroLLMError(f"maxLength ({hi}) at {where} is below minLength ({lo})")
        return Cat((literal('"'), Repeat(STRING_CHAR, lo, hi), literal('"')))


def _dumps(value):
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def _members(members):
    """The members in order, each optional one maybe left out, commas only between those written.
    Choose which member comes first (any up to the first required one), then each later one, with its
    comma, required or optional."""
    comma = Cat((literal(","), WS))
    first_required = next((k for k, (_, req) in enumerate(members) if req), None)
    choices = []
    for k in range(len(members) if first_required is None else first_required + 1):
        rest = [Cat((comma, m)) if req else Repeat(Cat((comma, m)), 0, 1) for m, req in members[k + 1:]]
        choices.append(Cat((members[k][0], *rest)))
    if first_required is None:
        choices.append(EMPTY)
    return Alt(tuple(choices)) if len(choices) > 1 else choices[0]


def _may_write(node, ranges):
    """Whether the tree has a character in ``ranges``."""
    if isinstance(node, Chars):
        return any(lo <= h and l <= hi for lo, hi in node.ranges for l, h in ranges)
    kids = {Cat: lambda n: n.parts, Alt: lambda n: n.choices, Repeat: lambda n: (n.item,),
            Sep: lambda n: (n.item, n.sep)}[type(node)](node)
    return any(_may_write(k, ranges) for k in kids)
