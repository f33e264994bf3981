"""The data files of fine-tuning, in the JSONL conventions of Hugging Face TRL: one JSON object a line.

    SFT          {"prompt": "藏头诗：春夏秋冬", "completion": "春眠不觉晓，..."}
                 {"messages": [{"role": "user", "content": "1+2="}, {"role": "assistant", "content": "3"}]}
    preferences  {"prompt": "...", "chosen": "...", "rejected": "...", ...}
    prompts      {"prompt": "...", ...}     (RL: the reward function gets the other fields too)

A prompt may also be a list of messages (TRL's conversational form). Roles: system, user, assistant.

Extra fields are kept, in every kind of file: reward functions read them ("heads", "answer",
"corruption"), and an SFT file made by ``zerollm tasks make`` doubles as an eval file. For SFT an
extra field never changes what is trained; a row that has both "messages" and "prompt"/"completion"
is refused, because it is unclear which one is meant.

Bad rows are refused with the file and line number: broken JSON, a row that is not an object, a
missing key, an empty completion (nothing to learn), chosen equal to rejected (nothing to prefer),
an unknown role. Blank lines are skipped. ``write_jsonl`` writes atomically (zerollm.io.fileio).
"""

import json
import os

from zerollm.io.errors import ZeroLLMError
from zerollm.io.fileio import atomic_write

ROLES = ("system", "user", "assistant")


# ----------------------------------------------------------------------------
# reading

def read_jsonl(path):
    """[(line number, dict)] of a JSONL file; broken JSON or a non-object is an error naming the line."""
    path = os.fspath(path)
    if not os.path.isfile(path):
        raise ZeroLLMError(f"data file not found: {path}; make one with 'zerollm tasks make' or check the path")
    rows = []
    with open(path, "rb") as f:
        for n, raw in enumerate(f, 1):
            try:
                line = raw.decode("utf-8-sig" if n == 1 else "utf-8")
            except UnicodeDecodeError:
                raise ZeroLLMError(f"{path} line {n}: not UTF-8 text; save the file as UTF-8") from None
            if not line.strip():
                continue
            try:
                row = json.loads(line)
            except json.JSONDecodeError as err:
                raise ZeroLLMError(f"{path} line {n}: not valid JSON ({err.msg} at column {err.colno}); "
                                   "each line must be one JSON object") from None
            if not isinstance(row, dict):
                raise ZeroLLMError(f"{path} line {n}: expected a JSON object {{...}}, got {type(row).__name__}")
            rows.append((n, row))
    if not rows:
        raise ZeroLLMError(f"{path} has no examples (it is empty or only blank lines)")
    return rows


def check_messages(messages, where, what="messages"):
    """A list of {"role", "content"} dicts with known roles and string contents; returns it."""
    if not isinstance(messages, list) or not messages:
        raise ZeroLLMError(f"{where}: '{what}' must be a non-empty list of {{\"role\": ..., \"content\": ...}}")
    for k, m in enumerate(messages):
        if not isinstance(m, dict) or set(m) != {"role", "content"}:
            got = sorted(m) if isinstance(m, dict) else type(m).__name__
            raise ZeroLLMError(f"{where}: {what}[{k}] must have exactly the keys 'role' and 'content', got {got}")
        if m["role"] not in ROLES:
            raise ZeroLLMError(f"{where}: {what}[{k}] has the unknown role {m['role']!r}; "
                               f"roles are {', '.join(ROLES)}")
        if not isinstance(m["content"], str):
            raise ZeroLLMError(f"{where}: {what}[{k}] content must be a string")
        if m["role"] == "system" and k != 0:
            raise ZeroLLMError(f"{where}: {what}[{k}] is a system message; it may only come first")
    return messages


def _need(row, keys, where):
    missing = [k for k in keys if k not in row]
    if missing:
        raise ZeroLLMError(f"{where}: missing key(s) {', '.join(repr(k) for k in missing)}; "
                           f"the row has {sorted(row)}")


def _text(row, key, where, empty_ok=False):
    value = row[key]
    if not isinstance(value, str):
        raise ZeroLLMError(f"{where}: '{key}' must be a string, got {type(value).__name__}")
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
        replies = [m for m in messages if m["role"] == "assistant"]
        if not replies:
            raise ZeroLLMError(f"{where}: no assistant message, so nothing would be learned from it")
        if any(not m["content"] for m in replies):
            raise ZeroLLMError(f"{where}: an assistant message is empty (an empty completion teaches nothing)")
        return row
    if "prompt" not in row and "completion" not in row:
        raise ZeroLLMError(f"{where}: an SFT row needs 'prompt' and 'completion', or 'messages'; "
                           f"the row has {sorted(row)}")
    _need(row, ("prompt", "completion"), where)
    _text(row, "prompt", where, empty_ok=True)
    _text(row, "completion", where)
    return row


def read_sft(path):
    """SFT examples: dicts with "prompt" + "completion" (strings) or "messages"; extra fields kept."""
    return [check_sft_row(row, f"{os.fspath(path)} line {n}") for n, row in read_jsonl(path)]


def read_prefs(path):
    """Preference pairs: "prompt", "chosen", "rejected" (chosen != rejected); extra fields kept."""
    rows = []
    for n, row in read_jsonl(path):
        where = f"{os.fspath(path)} line {n}"
        _need(row, ("prompt", "chosen", "rejected"), where)
        _prompt(row, where)
        if _text(row, "chosen", where) == _text(row, "rejected", where):
            raise ZeroLLMError(f"{where}: 'chosen' and 'rejected' are the same text; a pair must differ")
        rows.append(row)
    return rows


def read_prompts(path):
    """Prompts (for RL and evaluation): "prompt" (text or messages); extra fields kept."""
    rows = []
    for n, row in read_jsonl(path):
        where = f"{os.fspath(path)} line {n}"
        _need(row, ("prompt",), where)
        _prompt(row, where)
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
