"""``response_format`` on /v1/chat/completions and /v1/completions: the answer's text constrained by a grammar.

    {"type": "text"}                                   no constraint (the default)
    {"type": "json_object"}                            any JSON object (nesting bounded: schema.JSON_DEPTH)
    {"type": "json_schema", "json_schema": {"name": "person", "schema": {...}, "strict": true}}

The grammar (zerollm.generation.grammar) is compiled on a worker thread, never on the event loop, and goes
into every choice's Request: the scheduler masks each row by it. What the schema subset does not support is
a 400 naming the keyword (param "response_format"). ``strict`` may be true or false: the output follows the
schema either way. A choice that runs out of max_tokens before its JSON is complete ends with
finish_reason "length" and, in a whole (not streamed) answer, {"zerollm": {"note": "..."}} saying so.
"""

import anyio

from zerollm.generation.grammar import grammar_for_schema, json_object_grammar
from zerollm.io.errors import ZeroLLMError
from zerollm.serve.guard import ApiError

JSON_SCHEMA_KEYS = {"name", "schema", "strict", "description"}
MAX_SCHEMA_DEPTH = 64               # objects nested in a schema: deeper is refused before translating it


def _refuse(message, param="response_format"):
    return ApiError(400, message, param=param)


def grammar_of(response_format):
    """The zerollm.generation.grammar.Grammar a response_format asks for, or None ("text" or absent)."""
    rf = response_format
    if rf is None:
        return None
    kind = rf.get("type")
    if kind == "text":
        _only(rf, {"type"}, "response_format")
        return None
    if kind == "json_object":
        _only(rf, {"type"}, "response_format")
        return json_object_grammar()
    if kind != "json_schema":
        raise _refuse(f"response_format.type must be \"text\", \"json_object\" or \"json_schema\"; got {kind!r}",
                      "response_format.type")
    _only(rf, {"type", "json_schema"}, "response_format")
    spec = rf.get("json_schema")
    if not isinstance(spec, dict):
        raise _refuse("response_format.json_schema must be an object with \"name\" and \"schema\"",
                      "response_format.json_schema")
    _only(spec, JSON_SCHEMA_KEYS, "response_format.json_schema")
    if not isinstance(spec.get("name"), str) or not spec["name"]:
        raise _refuse("response_format.json_schema.name must be a non-empty string", "response_format.json_schema.name")
    if not isinstance(spec.get("strict", False), bool):
        raise _refuse("response_format.json_schema.strict must be true or false", "response_format.json_schema.strict")
    schema = spec.get("schema", {})
    if not isinstance(schema, dict) or _depth(schema) > MAX_SCHEMA_DEPTH:
        raise _refuse(f"response_format.json_schema.schema must be a JSON Schema object nested at most "
                      f"{MAX_SCHEMA_DEPTH} deep", "response_format.json_schema.schema")
    try:
        return grammar_for_schema(schema)
    except ZeroLLMError as err:
        raise _refuse(str(err), "response_format.json_schema.schema") from None


def _only(obj, keys, where):
    extra = [k for k in obj if k not in keys]
    if extra:
        raise _refuse(f"{where} has the unknown field {extra[0]!r}; it takes {', '.join(sorted(keys))}", where)


def _depth(value, limit=MAX_SCHEMA_DEPTH + 1):
    """How deep dicts and lists nest in ``value`` (stops counting past ``limit``), without recursion."""
    deepest, stack = 0, [(value, 1)]
    while stack and deepest <= limit:
        v, d = stack.pop()
        deepest = max(deepest, d)
        kids = v.values() if isinstance(v, dict) else v if isinstance(v, list) else ()
        stack.extend((k, d + 1) for k in kids if isinstance(k, (dict, list)))
    return deepest


def _index(backend, response_format):
    grammar = grammar_of(response_format)
    if grammar is None:
        return None
    try:
        return grammar.index(backend.tok, backend.model.config.vocab_size)
    except ZeroLLMError as err:
        raise _refuse(str(err)) from None


def incomplete_note(note):
    """A choice's {"zerollm": {"note": ...}} when max_tokens ended it before its text matched the grammar
    (finish_reason "length"), else {}: the answer says why its JSON is cut short."""
    return {"zerollm": {"note": note}} if note else {}


async def response_grammar(backend, body):
    """The TokenIndex every choice of ``body`` decodes under, or None; compiled on a worker thread."""
    if body.response_format is None:
        return None
    return await anyio.to_thread.run_sync(_index, backend, body.response_format)
