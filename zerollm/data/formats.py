"""The data files of fine-tuning, in the JSONL conventions of Hugging Face TRL: one JSON object a line.

    SFT          {"prompt": "藏头诗：春夏秋冬", "completion": "春眠不觉晓，..."}
                 {"messages": [{"role": "user", "content": "1+2="}, {"role": "assistant", "content": "3"}]}
    preferences  {"prompt": "...", "chosen": "...", "rejected": "...", ...}
                 {"chosen": [{"role": "user", ...}, {"role": "assistant", ...}], "rejected": [...same user..., ...]}
    prompts      {"prompt": "...", ...}     (RL: the reward function gets the other fields too)

A prompt may also be a list of messages (TRL's conversational form). Roles: system, user, assistant, and
tool (a tool's result; with OpenAI's "tool_calls" and "reasoning_content" on assistant messages and a
row's "tools", see zerollm.data.chat).

Extra fields are kept, in every kind of file: reward functions read them ("heads", "answer",
"corruption"), and an SFT file made by ``zerollm tasks make`` doubles as an eval file. For SFT an
extra field never changes what is trained; a row that has both "messages" and "prompt"/"completion"
is refused, because it is unclear which one is meant.

Bad rows are refused with the file and line number: broken JSON, a row that is not an object, a
missing key, an empty prompt (in every kind of file), an empty completion (nothing to learn), chosen
equal to rejected (nothing to prefer), an unknown role, a field of the wrong type (``"margin": "big"``).
Blank lines are skipped.

Valid JSON can still be hostile, so the one reader, ``read_jsonl``, has limits (docs/troubleshooting.md):
a line of at most MAX_LINE_BYTES, nesting at most MAX_DEPTH deep, integers of at most MAX_INT_DIGITS
digits, finite numbers only (no NaN, Infinity or 1e400), no lone surrogate (``"\\ud800"``: half of
a UTF-16 pair, which no UTF-8 text can hold), and no key twice in one object. ``write_jsonl`` writes
atomically (zerollm.io.fileio).
"""

import json
import math
import os

from zerollm.io.errors import ZeroLLMError
from zerollm.io.fileio import atomic_write, not_utf8_advice, open_regular, require_regular

ROLES = ("system", "user", "assistant", "tool")
MESSAGE_KEYS = {"system": ("content",), "user": ("content",), "tool": ("content", "tool_call_id", "name"),
                "assistant": ("content", "reasoning_content", "tool_calls")}   # the keys each role may have
MAX_LINE_BYTES = 16 * 2 ** 20      # one example; a longer line is almost surely not one
MAX_DEPTH = 64                     # objects/lists inside each other (a chat is 3 deep)
MAX_INT_DIGITS = 30                # integers up to 10**30: any count or answer a task can have
MAX_MARGIN = 1000.0                # a preference margin is a reward difference: past ~50 the loss is flat

# fields zerollm itself reads, in any kind of file -> (their JSON types, in words)
FIELD_TYPES = {"margin": ((int, float), "a number"), "answer": ((int, str), "an integer or a string"),
               "heads": ((str,), "a string"), "corruption": ((str,), "a string"), "line": ((int,), "an integer")}


class _Hostile(ValueError):
    """Valid JSON that exceeds one of the reader's limits."""


# ----------------------------------------------------------------------------
# reading

def read_jsonl(path):
    """[(line number, dict)] of a JSONL file; broken or hostile JSON, or a non-object, is an error naming the line."""
    path = os.fspath(path)
    require_regular(path, "JSONL file")
    if not os.path.isfile(path):
        raise ZeroLLMError(f"data file not found: {path}; make one with 'zerollm tasks make' or check the path")
    rows = []
    with open_regular(path, "rb", what="JSONL file") as f:
        for n, raw in enumerate(iter(lambda: f.readline(MAX_LINE_BYTES + 1), b""), 1):
            where = f"{path} line {n}"
            if len(raw) > MAX_LINE_BYTES:
                raise ZeroLLMError(f"{where}: longer than {MAX_LINE_BYTES // 2 ** 20} MiB; one example a line, "
                                   "each shorter than that (is this really a JSONL file?)")
            try:
                line = raw.decode("utf-8-sig" if n == 1 else "utf-8")
            except UnicodeDecodeError:
                advice = not_utf8_advice(raw[:4]) if n == 1 else "save the file as UTF-8"
                raise ZeroLLMError(f"{where}: not UTF-8 text; {advice}") from None
            if not line.strip():
                continue
            row = _parse(line, where)
            if not isinstance(row, dict):
                raise ZeroLLMError(f"{where}: expected a JSON object {{...}}, got {type(row).__name__}")
            _check_known_fields(row, where)
            rows.append((n, row))
    if not rows:
        raise ZeroLLMError(f"{path} has no examples (it is empty or only blank lines)")
    return rows


def _parse(line, where):
    """json.loads within the limits: integers, non-finite numbers, depth and lone surrogates refused."""
    try:
        value = json.loads(line, parse_int=_small_int, parse_float=_finite_float, parse_constant=_no_constant,
                           object_pairs_hook=_unique_keys)
    except json.JSONDecodeError as err:
        raise ZeroLLMError(f"{where}: not valid JSON ({err.msg} at column {err.colno}); "
                           "each line must be one JSON object") from None
    except _Hostile as err:
        raise ZeroLLMError(f"{where}: {err}") from None
    except RecursionError:
        raise ZeroLLMError(f"{where}: nested deeper than {MAX_DEPTH} levels; an example is a flat object "
                           "of texts and numbers") from None
    _check_tree(value, where)
    return value


def _unique_keys(pairs):
    """A JSON object as a dict; a key given twice is refused (json.loads would keep the last one silently)."""
    row = {}
    for key, value in pairs:
        if key in row:
            raise _Hostile(f"the key {key!r} appears twice in one object; keep one of them (JSON readers "
                           "disagree on which one counts)")
        row[key] = value
    return row


def _small_int(text):
    if len(text.lstrip("-")) > MAX_INT_DIGITS:
        raise _Hostile(f"an integer of {len(text.lstrip('-'))} digits (at most {MAX_INT_DIGITS} are read); "
                       "write it as a string if it is an identifier")
    return int(text)


def _finite_float(text):
    value = float(text)
    if not math.isfinite(value):
        raise _Hostile(f"the number {text[:20]} is too large for a float; write a finite number")
    return value


def _no_constant(name):
    raise _Hostile(f"{name} is not a JSON number; write a finite number (or null)")


def _check_tree(value, where):
    """Walk the parsed value without recursion: depth and text that cannot be UTF-8."""
    stack = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if depth > MAX_DEPTH:
            raise ZeroLLMError(f"{where}: nested deeper than {MAX_DEPTH} levels; an example is a flat object "
                               "of texts and numbers")
        if isinstance(item, dict):
            stack += [(k, depth) for k in item] + [(v, depth + 1) for v in item.values()]
        elif isinstance(item, list):
            stack += [(v, depth + 1) for v in item]
        elif isinstance(item, str):
            try:
                item.encode("utf-8")
            except UnicodeEncodeError as err:
                raise ZeroLLMError(f"{where}: the text holds a lone surrogate {item[err.start]!r} (half of a "
                                   "UTF-16 pair, e.g. from an emoji cut in two); remove it or write the whole "
                                   "character") from None


def _check_known_fields(row, where):
    """The fields zerollm reads (FIELD_TYPES) have their type, checked now rather than mid-training."""
    for key, (types, words) in FIELD_TYPES.items():
        if key in row and (not isinstance(row[key], types) or isinstance(row[key], bool)):
            raise ZeroLLMError(f"{where}: '{key}' must be {words}, got {_json_type(row[key])} {row[key]!r:.40}")
    if "margin" in row and abs(row["margin"]) > MAX_MARGIN:
        raise ZeroLLMError(f"{where}: 'margin' must be from {-MAX_MARGIN:g} to {MAX_MARGIN:g} (a difference of "
                           f"rewards, in the reward model's units), got {row['margin']!r:.40}")


def _json_type(value):
    return {type(None): "null", bool: "a boolean", str: "a string", int: "an integer", float: "a number",
            list: "a list", dict: "an object"}.get(type(value), type(value).__name__)


def check_messages(messages, where, what="messages"):
    """A list of {"role", "content"} dicts with known roles and string contents; returns it. OpenAI's
    thinking and tool fields are read too (#58): an assistant message may have "reasoning_content" and
    "tool_calls" (then its content may be null), a "tool" message has the result as its content and may
    name its "tool_call_id"."""
    if not isinstance(messages, list) or not messages:
        raise ZeroLLMError(f"{where}: '{what}' must be a non-empty list of {{\"role\": ..., \"content\": ...}}")
    for k, m in enumerate(messages):
        if not isinstance(m, dict) or not isinstance(m.get("role"), str) or not set(m) <= {"role", *MESSAGE_KEYS.get(m["role"], ())}:
            if isinstance(m, dict) and m.get("role") in ("assistant", "tool"):
                allowed = " and ".join(repr(key) for key in ("role", *MESSAGE_KEYS[m["role"]]))
                raise ZeroLLMError(f"{where}: {what}[{k}] ({m['role']}) may have only the keys {allowed}, "
                                   f"got {sorted(m)}")
            if isinstance(m, dict) and isinstance(m.get("role"), str) and m["role"] not in ROLES and "content" in m:
                raise ZeroLLMError(f"{where}: {what}[{k}] has the unknown role {m['role']!r}; "
                                   f"roles are {', '.join(ROLES)}")
            got = sorted(m) if isinstance(m, dict) else type(m).__name__
            raise ZeroLLMError(f"{where}: {what}[{k}] must have exactly the keys 'role' and 'content', got {got}")
        if "content" not in m and not (m["role"] == "assistant" and m.get("tool_calls")):
            raise ZeroLLMError(f"{where}: {what}[{k}] has no 'content'")
        content = m.get("content")
        if not isinstance(content, str) and not (content is None and m["role"] == "assistant" and m.get("tool_calls")):
            raise ZeroLLMError(f"{where}: {what}[{k}] content must be a string")
        if m["role"] == "system" and k != 0:
            raise ZeroLLMError(f"{where}: {what}[{k}] is a system message; it may only come first")
        for key in ("reasoning_content", "tool_call_id", "name"):
            if key in m and not isinstance(m[key], str):
                raise ZeroLLMError(f"{where}: {what}[{k}] '{key}' must be a string, got {_json_type(m[key])}")
        if "tool_calls" in m:
            _check_tool_calls(m["tool_calls"], f"{where}: {what}[{k}]")
    return messages


def _check_tool_calls(calls, where):
    """OpenAI's tool_calls: [{"id", "type": "function", "function": {"name", "arguments"}}]."""
    form = ('[{"id": "call_1", "type": "function", "function": {"name": "calculator", '
            '"arguments": {"expression": "2*3"}}}]')
    if not isinstance(calls, list):
        raise ZeroLLMError(f"{where}: 'tool_calls' must be a list like {form}")
    for j, call in enumerate(calls):
        ok = (isinstance(call, dict) and set(call) <= {"id", "type", "function"} and call.get("type", "function") == "function"
              and isinstance(call.get("id", ""), str) and isinstance(call.get("function"), dict)
              and set(call["function"]) <= {"name", "arguments"} and isinstance(call["function"].get("name"), str)
              and isinstance(call["function"].get("arguments", {}), (dict, str)))
        if not ok:
            raise ZeroLLMError(f"{where}: tool_calls[{j}] must be like {form} (arguments an object or a JSON "
                               f"string of one)")


def check_tools(tools, where):
    """OpenAI's tools list: [{"type": "function", "function": {"name", "description", "parameters"}}]."""
    form = '[{"type": "function", "function": {"name": "calculator", "description": "...", "parameters": {...}}}]'
    if not isinstance(tools, list):
        raise ZeroLLMError(f"{where}: 'tools' must be a list like {form}")
    for j, tool in enumerate(tools):
        if not (isinstance(tool, dict) and tool.get("type") == "function" and isinstance(tool.get("function"), dict)
                and isinstance(tool["function"].get("name"), str) and tool["function"]["name"]):
            raise ZeroLLMError(f"{where}: tools[{j}] must be like {form}")
    return tools


def _need(row, keys, where):
    missing = [k for k in keys if k not in row]
    if missing:
        raise ZeroLLMError(f"{where}: missing key(s) {', '.join(repr(k) for k in missing)}; "
                           f"the row has {sorted(row)}")


def _text(row, key, where, empty_ok=False):
    value = row[key]
    if not isinstance(value, str):
        raise ZeroLLMError(f"{where}: '{key}' must be a string, got {_json_type(value)}")
    if not value and not empty_ok:
        raise ZeroLLMError(f"{where}: '{key}' is empty; an example needs some text there")
    return value


def _prompt(row, where):
    """A prompt is a non-empty string or a list of messages (conversational)."""
    if isinstance(row["prompt"], list):
        return check_messages(row["prompt"], where, "prompt")
    return _text(row, "prompt", where)


def check_sft_row(row, where):
    """One SFT example: prompt + completion, or messages with at least one non-empty assistant turn."""
    if "messages" in row:
        both = sorted({"prompt", "completion"} & set(row))
        if both:
            raise ZeroLLMError(f"{where}: has 'messages' and {both}; give either messages or prompt + completion")
        messages = check_messages(row["messages"], where)
        if "tools" in row:
            check_tools(row["tools"], where)
        replies = [m for m in messages if m["role"] == "assistant"]
        if not replies:
            raise ZeroLLMError(f"{where}: no assistant message, so nothing would be learned from it")
        if any(not (m.get("content") or m.get("tool_calls") or m.get("reasoning_content")) for m in replies):
            raise ZeroLLMError(f"{where}: an assistant message is empty (an empty completion teaches nothing)")
        return row
    if "prompt" not in row and "completion" not in row:
        raise ZeroLLMError(f"{where}: an SFT row needs 'prompt' and 'completion', or 'messages'; "
                           f"the row has {sorted(row)}")
    _need(row, ("prompt", "completion"), where)
    _prompt(row, where)                          # empty is refused, as in every other kind of file
    if "tools" in row:
        check_tools(row["tools"], where)
    if isinstance(row["completion"], list):      # TRL's conversational completion: the assistant's turns,
        turns = check_messages(row["completion"], where, "completion")     # with tool calls and results
        if turns[0]["role"] != "assistant" or any(m["role"] in ("system", "user") for m in turns):
            raise ZeroLLMError(f"{where}: a 'completion' list holds the assistant's messages (and tool results "
                               "between them), beginning with an assistant message")
        return row
    _text(row, "completion", where)
    return row


def read_sft(path):
    """SFT examples: dicts with "prompt" + "completion" (strings) or "messages"; extra fields kept."""
    return [check_sft_row(row, f"{os.fspath(path)} line {n}") for n, row in read_jsonl(path)]


PREFS_FORMAT = ('{"prompt": "...", "chosen": "...", "rejected": "..."} (the prompt may be a list of messages), '
                'or TRL\'s conversational form with "chosen" and "rejected" as lists of messages that end in '
                'the assistant\'s answer')


def check_pref_row(row, where):
    """One preference pair, as {"prompt", "chosen", "rejected"} with chosen/rejected texts; returns it.

    TRL's conversational forms are read too: "chosen" and "rejected" as lists of messages, each ending in an
    assistant message (the answer), either after a "prompt" (explicit) or holding the same conversation
    before their answers (implicit prompt, no "prompt" key). They become the text form, with the prompt as
    a list of messages."""
    if isinstance(row.get("chosen"), list) or isinstance(row.get("rejected"), list):
        row = _conversational_pair(row, where)
    if not {"prompt", "chosen", "rejected"} <= set(row):
        missing = [k for k in ("prompt", "chosen", "rejected") if k not in row]
        raise ZeroLLMError(f"{where}: missing key(s) {', '.join(repr(k) for k in missing)}; the row has "
                           f"{sorted(row)}, a preference pair is {PREFS_FORMAT}")
    _prompt(row, where)
    if _text(row, "chosen", where) == _text(row, "rejected", where):
        raise ZeroLLMError(f"{where}: 'chosen' and 'rejected' are the same text; a pair must differ")
    return row


def _conversational_pair(row, where):
    sides = {}
    for key in ("chosen", "rejected"):
        if key not in row:
            raise ZeroLLMError(f"{where}: missing key {key!r}; a preference pair is {PREFS_FORMAT}")
        if not isinstance(row[key], list):
            raise ZeroLLMError(f"{where}: 'chosen' and 'rejected' must both be texts or both lists of messages, "
                               f"got {_json_type(row['chosen'])} and {_json_type(row['rejected'])}")
        messages = check_messages(row[key], where, key)
        if messages[-1]["role"] != "assistant":
            raise ZeroLLMError(f"{where}: {key!r} must end with the assistant's answer, its last message is "
                               f"{messages[-1]['role']!r}; a preference pair is {PREFS_FORMAT}")
        sides[key] = messages
    chosen, rejected = sides["chosen"], sides["rejected"]
    if "prompt" in row:
        if len(chosen) != 1 or len(rejected) != 1:
            raise ZeroLLMError(f"{where}: with a 'prompt', 'chosen' and 'rejected' are one assistant message "
                               "each (the answers); put the conversation before them in 'prompt'")
        prompt = row["prompt"]
    else:
        if chosen[:-1] != rejected[:-1] or len(chosen) < 2:
            raise ZeroLLMError(f"{where}: without a 'prompt', 'chosen' and 'rejected' must hold the same "
                               "conversation before their last (assistant) message; give the prompt as 'prompt' "
                               "and one assistant message in each, or make the conversations agree")
        prompt = chosen[:-1]
    return {**row, "prompt": prompt, "chosen": chosen[-1]["content"], "rejected": rejected[-1]["content"]}


def read_prefs(path):
    """Preference pairs: "prompt", "chosen", "rejected" (chosen != rejected), or TRL's conversational form
    (``check_pref_row``); extra fields kept."""
    return [check_pref_row(row, f"{os.fspath(path)} line {n}") for n, row in read_jsonl(path)]


def read_prompts(path):
    """Prompts (for RL and evaluation): "prompt" (text or messages); extra fields kept."""
    rows = []
    for n, row in read_jsonl(path):
        where = f"{os.fspath(path)} line {n}"
        _need(row, ("prompt",), where)
        _prompt(row, where)
        if "tools" in row:                    # the tools a prompt offers (#58)
            check_tools(row["tools"], where)
        if isinstance(row.get("completion"), list):      # a reference trace with tool calls or thinking
            check_sft_row(row, where)
        elif "completion" in row:             # a file of 'tasks make' keeps the reference answer
            _text(row, "completion", where, empty_ok=True)
        rows.append(row)
    return rows


def prompt_text(prompt):
    """The task text of a prompt: the string itself, or the last user message of a conversation."""
    if isinstance(prompt, str):
        return prompt
    users = [m["content"] for m in prompt if m["role"] == "user"]
    return users[-1] if users else ""


# ----------------------------------------------------------------------------
# writing

def write_jsonl(path, rows):
    """Write dicts as JSONL (UTF-8, Chinese kept readable), atomically: the whole file or nothing."""
    lines = []
    for k, row in enumerate(rows):
        if not isinstance(row, dict):
            raise ZeroLLMError(f"row {k} is a {type(row).__name__}; write_jsonl writes dicts")
        try:
            lines.append(json.dumps(row, ensure_ascii=False) + "\n")
        except (TypeError, ValueError) as err:
            raise ZeroLLMError(f"row {k} cannot be written as JSON ({err})") from None
    with atomic_write(path, "w") as f:
        f.writelines(lines)
