"""Qwen's chat templates (ChatML: Qwen2, Qwen2.5, and Qwen3 with its thinking switch), written in Python.

A Qwen2 / Qwen3 tokenizer has the special tokens <|im_start|> and <|im_end|>; a conversation is

    <|im_start|>system\nYou write poems.<|im_end|>\n<|im_start|>user\n藏头诗：春夏秋冬<|im_end|>\n
    <|im_start|>assistant\n<think>\n...\n</think>\n\n春眠不觉晓，...<|im_end|>\n

(the newlines are real "\n" characters of the text). A model directory's tokenizer_config.json carries the
same rules as a Jinja template; a template from a file is a program, so zerollm never runs it: the family is
recognised by the tokenizer's tokens (``is_chatml``) and rendered here, and tests/test_qwen.py checks the
ids against transformers' ``apply_chat_template`` running Qwen3's public template.

Qwen3's rules, as its template has them:
- tools go into the system turn, after the system message, one JSON object a line inside <tools></tools>,
  followed by how to call them; a call is <tool_call>\n{"name": ..., "arguments": ...}\n</tool_call>;
- tool results are user turns of <tool_response>\n...\n</tool_response>, consecutive ones in one turn;
- the reasoning of an assistant turn (``reasoning_content``, or a <think>...</think> at the start of its
  content) is shown only for the turns after the last real user message; the last turn always gets a
  think block, empty if need be;
- the generation prompt is <|im_start|>assistant\n, followed by an empty think block when thinking is
  switched off (``enable_thinking=False``): the model then answers at once.

Qwen2.5-Instruct's rules are Qwen3's without the thinking: a conversation without a system message gets
a default one ("You are Qwen, created by Alibaba Cloud. You are a helpful assistant."; with tools it opens
the tools' system turn), an assistant's content is shown as it is, a call's arguments always go through
tojson (a string becomes a JSON string), and there is no thinking switch. Qwen2-Instruct's are plainer
still: the default system turn "You are a helpful assistant.", then every message as
<|im_start|>role\ncontent<|im_end|>\n; it has no tools (they and tool calls are left out, as there).

Which rules a tokenizer gets (``family``) comes from the directory's template read as data
(``family_of``: distinctive literal sentences of each public template, never its code); a ChatML
tokenizer without a recognised template gets Qwen3's rules (and its directory a note, hf.loading).

Pieces are (text, special, learned) as in zerollm.data.chat: special pieces are one token each (when the
tokenizer has them: <think> and the tool tags are added tokens of Qwen's vocabulary), text is encoded as
text, and "learned" marks what an assistant turn says (its end token included), for the SFT loss mask.
"""

import json

from zerollm.tokenizers.bpe import CHAT_FAMILIES

IM_START, IM_END = "<|im_start|>", "<|im_end|>"
THINK, THINK_END = "<think>", "</think>"
TOOL_CALL, TOOL_CALL_END = "<tool_call>", "</tool_call>"
TOOL_RESPONSE, TOOL_RESPONSE_END = "<tool_response>", "</tool_response>"
TAGS = (THINK, THINK_END, TOOL_CALL, TOOL_CALL_END, TOOL_RESPONSE, TOOL_RESPONSE_END)
TOOLS_INTRO = ("# Tools\n\nYou may call one or more functions to assist with the user query.\n\n"
               "You are provided with function signatures within <tools></tools> XML tags:\n<tools>")
TOOLS_OUTRO = "\n</tools>\n\nFor each function call, return a json object with function name and arguments within "
TOOLS_OUTRO_END = " XML tags:\n"      # the tags between the two are tokens in transformers' rendering too
CALL_EXAMPLE = '\n{"name": <function-name>, "arguments": <args-json-object>}\n'

FAMILIES = CHAT_FAMILIES                    # kept in a Qwen tokenizer's saved file (zerollm.tokenizers.bpe)
QWEN2, QWEN25, QWEN3 = FAMILIES
DEFAULT_SYSTEM = {QWEN2: "You are a helpful assistant.",
                  QWEN25: "You are Qwen, created by Alibaba Cloud. You are a helpful assistant."}


# What an export writes into tokenizer_config.json for transformers (zerollm's own short template: the
# turns and the thinking switch; tools and past reasoning are rendered by zerollm, not by this Jinja)
CHATML_JINJA = (
    "{%- for message in messages %}{{- '<|im_start|>' + message.role + '\n' + message.content + '<|im_end|>\n' }}"
    "{%- endfor %}{%- if add_generation_prompt %}{{- '<|im_start|>assistant\n' }}"
    "{%- if enable_thinking is defined and enable_thinking is false %}{{- '<think>\n\n</think>\n\n' }}{%- endif %}"
    "{%- endif %}")


def is_chatml(tokenizer):
    """True when ``tokenizer`` has <|im_start|> and <|im_end|> (Qwen2, Qwen2.5, Qwen3 and their kin)."""
    specials = getattr(tokenizer, "special_tokens", {}) or {}
    return IM_START in specials and IM_END in specials


def family_of(template):
    """Which of Qwen's templates a chat_template string is (QWEN2, QWEN25, QWEN3), or None when it is none
    of them. Only literal substrings are looked for: the template is a program from a download and is
    never run. Qwen3's mentions its thinking switch or past reasoning; Qwen2.5's and Qwen2's write their
    default system sentence (Qwen2.5's contains Qwen2's, so it is looked for first)."""
    if not isinstance(template, str) or IM_START not in template:
        return None
    if "enable_thinking" in template or "reasoning_content" in template:
        return QWEN3
    for name in (QWEN25, QWEN2):
        if DEFAULT_SYSTEM[name] in template:
            return name
    return None


def family(tokenizer):
    """The rules ``segments`` renders a ChatML tokenizer's conversations with: what its directory's
    template was recognised as (``chat_family``, set when it is loaded), else Qwen3's."""
    name = getattr(tokenizer, "chat_family", None)
    return name if name in FAMILIES else QWEN3


def _tool_json(tool):
    # transformers' tojson filter: json.dumps with ensure_ascii=False and the default separators
    return json.dumps(tool, ensure_ascii=False)


def _call_pieces(call, first, content, raw_strings=True):
    """One tool call of an assistant turn (learned). Qwen3 writes string arguments as they are
    (``raw_strings``); Qwen2.5's template passes every argument through tojson."""
    function = call.get("function", call)
    arguments = function.get("arguments")
    args = arguments if raw_strings and isinstance(arguments, str) else json.dumps(arguments, ensure_ascii=False)
    lead = "\n" if (not first or content) else ""
    return [(lead, False, True), (TOOL_CALL, True, True),
            ('\n{"name": "' + str(function["name"]) + '", "arguments": ' + args + "}\n", False, True),
            (TOOL_CALL_END, True, True)]


def _split_thinking(m):
    """(reasoning, content) of an assistant message, as Qwen3's template reads them."""
    content = m.get("content") or ""
    reasoning = m.get("reasoning_content")
    if isinstance(reasoning, str):
        return reasoning, content
    if THINK_END in content:
        reasoning = content.split(THINK_END)[0].rstrip("\n").split(THINK)[-1].lstrip("\n")
        return reasoning, content.split(THINK_END)[-1].lstrip("\n")
    return "", content


def _last_query(messages):
    """The index of the last user message that is not a wrapped tool response."""
    for i in range(len(messages) - 1, -1, -1):
        text = messages[i].get("content")
        if (messages[i]["role"] == "user" and isinstance(text, str)
                and not (text.startswith(TOOL_RESPONSE) and text.endswith(TOOL_RESPONSE_END))):
            return i
    return len(messages) - 1


def _system(messages, tools, name):
    out = []
    add = lambda text, special=False: out.append((text, special, False))
    has_system = bool(messages) and messages[0]["role"] == "system"
    if tools and name != QWEN2:
        add(IM_START, True), add("system\n")
        if has_system or name == QWEN25:
            add((messages[0]["content"] if has_system else DEFAULT_SYSTEM[name]) + "\n\n")
        add(TOOLS_INTRO + "".join("\n" + _tool_json(t) for t in tools) + TOOLS_OUTRO)
        add(TOOL_CALL, True), add(TOOL_CALL_END, True), add(TOOLS_OUTRO_END)
        add(TOOL_CALL, True), add(CALL_EXAMPLE), add(TOOL_CALL_END, True), add(IM_END, True), add("\n")
    elif has_system or name != QWEN3:
        text = messages[0]["content"] if has_system else DEFAULT_SYSTEM[name]
        add(IM_START, True), add("system\n" + text), add(IM_END, True), add("\n")
    return out


def _assistant(m, k, last, last_query, name):
    if name == QWEN3:
        reasoning, content = _split_thinking(m)
    else:                               # no thinking in Qwen2's or Qwen2.5's template: the content as it is
        reasoning, content = "", m.get("content") or ""
    out = [(IM_START, True, False), ("assistant\n", False, False)]
    if name == QWEN2:                   # its template shows the content only; tool calls are left out
        return out + [(content, False, True), (IM_END, True, True), ("\n", False, False)]
    if name == QWEN3 and k > last_query and (last or reasoning):
        out += [(THINK, True, True), ("\n" + reasoning.strip("\n") + "\n", False, True), (THINK_END, True, True),
                ("\n\n" + content.lstrip("\n"), False, True)]
    else:
        out.append((content, False, True))
    for j, call in enumerate(m.get("tool_calls") or ()):
        out += _call_pieces(call, j == 0, content, raw_strings=name == QWEN3)
    return out + [(IM_END, True, True), ("\n", False, False)]


def segments(messages, tools=None, add_generation_prompt=False, enable_thinking=True, name=QWEN3):
    """The conversation as [(text, special, learned)] in Qwen's template of family ``name`` (the rules
    above; ``enable_thinking`` is Qwen3's switch, which the others' templates do not have)."""
    out = _system(messages, tools, name)
    last_query = _last_query(messages)
    for k, m in enumerate(messages):
        role, content = m["role"], m.get("content") if isinstance(m.get("content"), str) else ""
        if role == "user" or (role == "system" and k > 0) or (name == QWEN2 and role == "tool"):
            out += [(IM_START, True, False), (role + "\n" + content, False, False), (IM_END, True, False),
                    ("\n", False, False)]
        elif role == "assistant":
            out += _assistant(m, k, k == len(messages) - 1, last_query, name)
        elif role == "tool":
            if k == 0 or messages[k - 1]["role"] != "tool":
                out += [(IM_START, True, False), ("user", False, False)]
            out += [("\n", False, False), (TOOL_RESPONSE, True, False), ("\n" + content + "\n", False, False),
                    (TOOL_RESPONSE_END, True, False)]
            if k == len(messages) - 1 or messages[k + 1]["role"] != "tool":
                out += [(IM_END, True, False), ("\n", False, False)]
    if add_generation_prompt:
        out += [(IM_START, True, False), ("assistant\n", False, False)]
        if not enable_thinking and name == QWEN3:
            out += [(THINK, True, False), ("\n\n", False, False), (THINK_END, True, False), ("\n\n", False, False)]
    return out


def merged(pieces, specials):
    """The pieces with each tag the tokenizer lacks made text, and neighbouring texts of the same kind
    joined: transformers tokenizes the rendered text between special tokens in one go, and so must we."""
    out = []
    for text, special, learned in pieces:
        special = special and text in specials
        if out and not special and not out[-1][1] and out[-1][2] == learned:
            out[-1] = (out[-1][0] + text, False, learned)
        elif text or special:
            out.append((text, special, learned))
    return out
