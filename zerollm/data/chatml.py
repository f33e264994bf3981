"""Qwen's chat template (ChatML with Qwen3's thinking switch and Hermes-style tools), written in Python.

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

Pieces are (text, special, learned) as in zerollm.data.chat: special pieces are one token each (when the
tokenizer has them: <think> and the tool tags are added tokens of Qwen's vocabulary), text is encoded as
text, and "learned" marks what an assistant turn says (its end token included), for the SFT loss mask.
"""

import json

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


def _tool_json(tool):
    # transformers' tojson filter: json.dumps with ensure_ascii=False and the default separators
    return json.dumps(tool, ensure_ascii=False)


def _call_pieces(call, first, content):
    """One tool call of an assistant turn (learned)."""
    function = call.get("function", call)
    arguments = function.get("arguments")
    args = arguments if isinstance(arguments, str) else json.dumps(arguments, ensure_ascii=False)
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


def _system(messages, tools):
    out = []
    add = lambda text, special=False: out.append((text, special, False))
    if tools:
        add(IM_START, True), add("system\n")
        if messages and messages[0]["role"] == "system":
            add(messages[0]["content"] + "\n\n")
        add(TOOLS_INTRO + "".join("\n" + _tool_json(t) for t in tools) + TOOLS_OUTRO)
        add(TOOL_CALL, True), add(TOOL_CALL_END, True), add(TOOLS_OUTRO_END)
        add(TOOL_CALL, True), add(CALL_EXAMPLE), add(TOOL_CALL_END, True), add(IM_END, True), add("\n")
    elif messages and messages[0]["role"] == "system":
        add(IM_START, True), add("system\n" + messages[0]["content"]), add(IM_END, True), add("\n")
    return out


def _assistant(m, k, last, last_query):
    reasoning, content = _split_thinking(m)
    out = [(IM_START, True, False), ("assistant\n", False, False)]
    if k > last_query and (last or reasoning):
        out += [(THINK, True, True), ("\n" + reasoning.strip("\n") + "\n", False, True), (THINK_END, True, True),
                ("\n\n" + content.lstrip("\n"), False, True)]
    else:
        out.append((content, False, True))
    for j, call in enumerate(m.get("tool_calls") or ()):
        out += _call_pieces(call, j == 0, content)
    return out + [(IM_END, True, True), ("\n", False, False)]


def segments(messages, tools=None, add_generation_prompt=False, enable_thinking=True):
    """The conversation as [(text, special, learned)] in Qwen's template (Qwen3's rules, above)."""
    out = _system(messages, tools)
    last_query = _last_query(messages)
    for k, m in enumerate(messages):
        role, content = m["role"], m.get("content") if isinstance(m.get("content"), str) else ""
        if role == "user" or (role == "system" and k > 0):
            out += [(IM_START, True, False), (role + "\n" + content, False, False), (IM_END, True, False),
                    ("\n", False, False)]
        elif role == "assistant":
            out += _assistant(m, k, k == len(messages) - 1, last_query)
        elif role == "tool":
            if k == 0 or messages[k - 1]["role"] != "tool":
                out += [(IM_START, True, False), ("user", False, False)]
            out += [("\n", False, False), (TOOL_RESPONSE, True, False), ("\n" + content + "\n", False, False),
                    (TOOL_RESPONSE_END, True, False)]
            if k == len(messages) - 1 or messages[k + 1]["role"] != "tool":
                out += [(IM_END, True, False), ("\n", False, False)]
    if add_generation_prompt:
        out += [(IM_START, True, False), ("assistant\n", False, False)]
        if not enable_thinking:
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
