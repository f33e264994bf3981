"""The chat template: how a conversation becomes one sequence of token ids, and which of them are learned.

Each message is its role marker, its text, and the end-of-turn token; nothing else (no newlines, no
spaces), so the template means the same for byte, char and BPE tokenizers:

    <|system|>You write poems.<|end|><|user|>藏头诗：春夏秋冬<|end|><|assistant|>春眠不觉晓，...<|end|>

A plain {"prompt", "completion"} example is one user turn (the prompt) and one assistant turn (the
completion). The four markers are special tokens appended to the tokenizer (``prepare_tokenizer``), so
existing ids never move; a model gets matching new embedding rows with ``resize_model``.

What is learned (``encode_example``'s loss mask): every token of every assistant turn's text AND its
end-of-turn token, which is how the model learns to stop. The markers that open a turn and everything
the user or system wrote are context only. Generation starts after ``encode_prompt``: the conversation
so far followed by the assistant marker, and stops at ``END``.

The same template as Jinja (``chat_template_jinja``) goes into an exported tokenizer_config.json, so
transformers' ``apply_chat_template`` gives exactly these ids (tests/test_chat.py checks it); its
``{% generation %}`` block marks the same tokens as our loss mask (return_assistant_tokens_mask).

One difference by design: message text is encoded as plain text, so a user who types "<|end|>" gets
the characters, never the end-of-turn token (Hugging Face would turn that text into the token).

Thinking and tools (#58) extend the template the Qwen/Hermes way, still with no newlines of our own.
Messages use OpenAI's fields: an assistant message may carry ``reasoning_content`` and ``tool_calls``
(``[{"id", "type": "function", "function": {"name", "arguments"}}]``), a ``tool`` message carries a
result, and a conversation may list ``tools`` (OpenAI's function specs):

    <|system|>You can calculate.<tools>{"type": "function", ...}</tools><|end|><|user|>12*34=<|end|>
    <|assistant|><think>...</think><tool_call>{"name": "calculator", "arguments": {...}}</tool_call><|end|>
    <|user|><tool_response>408</tool_response><|end|><|assistant|>408<|end|>

(one line in reality). The tools go into the system turn (one is made when there is none); consecutive
tool messages become ONE user turn of tool responses, which is context, never learned; everything an
assistant turn holds (thinking, text, calls, its end) is learned. A call is
``json.dumps({"name": ..., "arguments": ...}, ensure_ascii=False)``; arguments given as a JSON string (as
OpenAI's clients send them back) are checked to be an object and then written as given, which is what
the Jinja template can do too. The eight new special tokens (THINK_TOKENS, TOOL_TOKENS) are appended
only to tokenizers of models trained on such data (``prepare_tokenizer(..., needs=template_needs(rows))``),
so older models keep their ids; ``has_thinking`` / ``has_tools`` say whether a model knows them.

A Qwen2 / Qwen3 tokenizer (one with <|im_start|> and <|im_end|>) gets Qwen's own template instead, written
in Python in zerollm.data.chatml (never run from the model directory's Jinja): every function below that
takes a tokenizer picks the template by its tokens (``chatml.is_chatml``).

What a model writes is read back by ``parse_reply`` (the one parser: the server, ``zerollm chat`` and
RL rollouts use it): a leading think block is the reasoning, each well-formed ``<tool_call>`` naming a
known tool is a call, everything else is content; a malformed call stays in the content as text.
"""

import json
from dataclasses import dataclass, replace

import numpy as np

from zerollm.io.errors import ZeroLLMError
from zerollm.data import chatml
from zerollm.data.formats import check_messages, check_sft_row, check_tools

SYSTEM, USER, ASSISTANT, END = "<|system|>", "<|user|>", "<|assistant|>", "<|end|>"
MARKERS = {"system": SYSTEM, "user": USER, "assistant": ASSISTANT}
SPECIALS = (SYSTEM, USER, ASSISTANT, END)
THINK, THINK_END = "<think>", "</think>"
TOOL_CALL, TOOL_CALL_END = "<tool_call>", "</tool_call>"
TOOL_RESPONSE, TOOL_RESPONSE_END = "<tool_response>", "</tool_response>"
TOOLS, TOOLS_END = "<tools>", "</tools>"
THINK_TOKENS = (THINK, THINK_END)
TOOL_TOKENS = (TOOL_CALL, TOOL_CALL_END, TOOL_RESPONSE, TOOL_RESPONSE_END, TOOLS, TOOLS_END)
NEEDS = {"think": THINK_TOKENS, "tools": TOOL_TOKENS}    # what a kind of data adds to the tokenizer
MAX_CALL_CHARS = 65536    # the body of one tool call the parser reads; longer is left as text
NEW_ROW_NOISE = 0.01      # new embedding rows: the mean row plus this much of the rows' spread (see resize_model)


# ----------------------------------------------------------------------------
# the tokenizer and the model

def has_template(tokenizer):
    """True when ``tokenizer`` has the template's four special tokens, or Qwen's two (zerollm.data.chatml)."""
    specials = getattr(tokenizer, "special_tokens", {}) or {}
    return all(s in specials for s in SPECIALS) or chatml.is_chatml(tokenizer)


def has_thinking(tokenizer):
    """True when ``tokenizer`` knows <think> and </think> (a model trained on thinking data; Qwen3)."""
    specials = getattr(tokenizer, "special_tokens", {}) or {}
    return has_template(tokenizer) and all(s in specials for s in THINK_TOKENS)


def has_tools(tokenizer):
    """True when ``tokenizer`` knows the tool tokens (a model trained on tool-calling data)."""
    specials = getattr(tokenizer, "special_tokens", {}) or {}
    return has_template(tokenizer) and all(s in specials for s in TOOL_TOKENS)


def template_needs(rows):
    """Which extra tokens a set of rows needs: a tuple of NEEDS keys ("think", "tools"). Thinking when an
    assistant message has reasoning; tools when a row lists tools or a message calls one or answers one."""
    think = tools = False
    for row in rows:
        tools = tools or bool(row.get("tools"))
        for key in ("messages", "prompt", "completion"):
            messages = row.get(key)
            for m in messages if isinstance(messages, list) else ():
                think = think or bool(m.get("reasoning_content"))
                tools = tools or bool(m.get("tool_calls")) or m.get("role") == "tool"
    return tuple(k for k, on in (("think", think), ("tools", tools)) if on)


def prepare_tokenizer(tokenizer, texts=(), needs=()):
    """The tokenizer with the template's special tokens (and, for a char tokenizer, every character
    of ``texts`` it lacks) appended; existing ids unchanged. Idempotent: a tokenizer that has them
    all comes back as it is. ``needs`` (from ``template_needs``) adds the thinking and tool tokens too.

    >>> from zerollm.tokenizers import CharTokenizer
    >>> tok = prepare_tokenizer(CharTokenizer.train("春夏秋冬"), ["藏头诗：春夏秋冬"])
    >>> tok.vocab_size, tok.encode("春"), prepare_tokenizer(tok) is tok
    (12, [2], True)
    """
    unknown = sorted(set(needs) - set(NEEDS))
    if unknown:
        raise ZeroLLMError(f"unknown template needs {unknown}; they are {', '.join(NEEDS)}")
    wanted = SPECIALS + tuple(t for k in NEEDS if k in needs for t in NEEDS[k])
    if chatml.is_chatml(tokenizer):          # Qwen's template: its own markers; <tools> is text there
        wanted = tuple(t for t in wanted if t in chatml.TAGS)
    tok = tokenizer.with_special_tokens(wanted)
    if tok.name == "char":
        chars = set()
        for text in texts:
            chars.update(text)
        tok = tok.with_chars(chars)
    if tok.to_dict() == tokenizer.to_dict():
        return tokenizer
    if chatml.is_chatml(tokenizer):          # the new tokenizer keeps the rules its directory's template named
        tok.chat_family = chatml.family(tokenizer)
    return tok


def resize_model(model, vocab_size, rng):
    """A new GPT with ``vocab_size`` rows in its token embedding (and untied head); every existing
    parameter is copied unchanged, so the old tokens' logits are exactly what they were.

    Each new row is the mean of the existing rows plus a little noise (NEW_ROW_NOISE times the rows'
    per-dimension standard deviation, drawn from ``rng``). Why the mean (Hewitt 2021, "Initializing
    New Word Embeddings for Pretrained Language Models"): a new token's logit h·mean is the average of
    the old logits, which is below their log-sum-exp, so each new token starts with a probability of
    at most about 1/V and the model's predictions barely move; a random row could instead take a
    large share of the probability before it has learned anything. The noise makes the new tokens
    differ from each other, so they can be told apart from the first step.
    """
    from zerollm.model.gpt import GPT
    cfg = model.config
    if isinstance(vocab_size, bool) or not isinstance(vocab_size, int) or vocab_size < cfg.vocab_size:
        raise ZeroLLMError(f"resize_model grows the vocabulary; got vocab_size={vocab_size!r} for a model "
                           f"with {cfg.vocab_size} tokens")
    bigger = GPT(replace(cfg, vocab_size=vocab_size), init=False)
    extra = vocab_size - cfg.vocab_size
    for name, value in model.params.items():
        if name in ("wte.weight", "lm_head.weight") and extra:
            mean, std = value.mean(axis=0), value.std(axis=0)                            # (C,), (C,)
            rows = mean + NEW_ROW_NOISE * std * rng.standard_normal((extra, value.shape[1]))   # (extra, C)
            bigger.params[name] = np.concatenate([value, rows.astype(value.dtype)], axis=0)   # (V', C), a new array:
            continue                                                                    # kept, not copied again
        if not isinstance(value, np.ndarray):       # a QLoRA base's matrix in quantized blocks: frozen, shared
            bigger.params[name] = value
            continue
        np.copyto(bigger.params[name], value)
    bigger.rng.bit_generator.state = model.rng.bit_generator.state
    bigger.lora = model.lora         # adapters do not depend on the vocabulary; the new rows will train
    bigger.training = model.training
    return bigger


def special_id(tokenizer, token):
    """The id of one of the template's special tokens, or an error that says how to add them."""
    specials = getattr(tokenizer, "special_tokens", {}) or {}
    if token not in specials and has_template(tokenizer) and (token in THINK_TOKENS or token in TOOL_TOKENS):
        kind = "thinking" if token in THINK_TOKENS else "tool calls"
        raise ZeroLLMError(f"the tokenizer has no {token} token: this model was not trained on {kind}; fine-tune it "
                           f"with zerollm sft on data that has them (e.g. zerollm tasks make calc --tools)")
    if token not in specials:
        raise ZeroLLMError(f"the tokenizer has no {token} token, so it cannot use the chat template; "
                           "extend it first with zerollm.data.chat.prepare_tokenizer (zerollm sft does this)")
    return specials[token]


def end_id(tokenizer):
    """The id of the end-of-turn token: where generation stops (<|im_end|> for a Qwen tokenizer)."""
    return special_id(tokenizer, chatml.IM_END if chatml.is_chatml(tokenizer) else END)


# ----------------------------------------------------------------------------
# conversations -> ids

def as_messages(example, where="example"):
    """{"prompt", "completion"} or {"messages"} -> the list of messages (checked)."""
    if not isinstance(example, dict):
        raise ZeroLLMError(f"{where}: an example is a dict with 'prompt' and 'completion', or 'messages'")
    check_sft_row(example, where)
    if "messages" in example:
        return example["messages"]
    prompt = example["prompt"]
    prompt = prompt if isinstance(prompt, list) else [{"role": "user", "content": prompt}]
    completion = example["completion"]     # a text, or the assistant's messages (thinking, tool calls, results)
    return prompt + (completion if isinstance(completion, list) else [{"role": "assistant", "content": completion}])


def _call_json(call, where="tool call"):
    """One tool call of a message as the template writes it: '{"name": ..., "arguments": {...}}'."""
    function = call["function"]
    arguments = function.get("arguments", {})
    if isinstance(arguments, str):      # OpenAI's clients send the arguments back as a JSON string
        try:
            parsed = json.loads(arguments)
        except (ValueError, RecursionError):
            parsed = None
        if not isinstance(parsed, dict):
            raise ZeroLLMError(f"{where}: the arguments of {function['name']!r} must be a JSON object "
                               f"(or a string holding one), got {arguments[:60]!r}")
        args_text = arguments
    else:
        args_text = json.dumps(arguments, ensure_ascii=False)
    return '{"name": ' + json.dumps(function["name"], ensure_ascii=False) + ', "arguments": ' + args_text + "}"


def _segments(messages, tools=None):
    """The conversation as [(text, special, learned)]: special pieces are one token each, the others are
    encoded as plain text. The one description of the template; ids, masks and texts all come from it."""
    out = []
    add = lambda text, special=False, learned=False: out.append((text, special, learned))
    tools_part = ([(TOOLS, True, False), ("".join(json.dumps(t, ensure_ascii=False) for t in tools), False, False),
                   (TOOLS_END, True, False)] if tools else [])
    rest = messages
    if messages and messages[0]["role"] == "system":
        add(SYSTEM, True), add(messages[0]["content"]), out.extend(tools_part), add(END, True)
        rest = messages[1:]
    elif tools:
        add(SYSTEM, True), out.extend(tools_part), add(END, True)
    for k, m in enumerate(rest):
        role = m["role"]
        if role == "tool":
            if k == 0 or rest[k - 1]["role"] != "tool":
                add(USER, True)
            add(TOOL_RESPONSE, True), add(m["content"]), add(TOOL_RESPONSE_END, True)
            if k == len(rest) - 1 or rest[k + 1]["role"] != "tool":
                add(END, True)
        elif role == "assistant":
            add(ASSISTANT, True)
            if m.get("reasoning_content"):
                add(THINK, True, True), add(m["reasoning_content"], False, True), add(THINK_END, True, True)
            add(m.get("content") or "", False, True)
            for call in m.get("tool_calls") or ():
                add(TOOL_CALL, True, True), add(_call_json(call), False, True), add(TOOL_CALL_END, True, True)
            add(END, True, True)
        else:
            add(MARKERS[role], True), add(m["content"]), add(END, True)
    return out


def _encode_segments(tokenizer, segments, allowed_special="none"):
    if chatml.is_chatml(tokenizer):
        segments = chatml.merged(segments, tokenizer.special_tokens)
    ids, mask = [], []
    for text, special, learned in segments:
        piece = [special_id(tokenizer, text)] if special else tokenizer.encode(text, allowed_special=allowed_special)
        ids += piece
        mask += [learned] * len(piece)
    return ids, mask


def render(messages, tools=None, add_generation_prompt=False):
    """The conversation as the template's text (what transformers' apply_chat_template renders)."""
    text = "".join(t for t, _, _ in _segments(messages, tools))
    return text + ASSISTANT if add_generation_prompt else text


def encode_example(tokenizer, example, allowed_special="none"):
    """-> (ids, loss_mask): the whole conversation, and True exactly on the assistant turns' text and
    their end-of-turn tokens (thinking and tool calls included; tool responses never). Special tokens
    written as text (e.g. "<|end|>") are an error unless ``allowed_special="all"`` (then they become
    their ids: for answers a model wrote itself). An example may list its "tools".

    >>> from zerollm.tokenizers import ByteTokenizer
    >>> tok = prepare_tokenizer(ByteTokenizer())
    >>> encode_example(tok, {"prompt": "1+2=", "completion": "3"})[1]
    [False, False, False, False, False, False, False, True, True]
    """
    messages = as_messages(example)
    if chatml.is_chatml(tokenizer):
        pieces = chatml.segments(messages, example.get("tools"), name=chatml.family(tokenizer))
        return _encode_segments(tokenizer, pieces, allowed_special)
    return _encode_segments(tokenizer, _segments(messages, example.get("tools")), allowed_special)


def encode_prompt(tokenizer, prompt_or_messages, tools=None, enable_thinking=True):
    """The generation prompt: a text (one user turn) or a list of messages (with the ``tools`` they may
    call), then the assistant marker. ``enable_thinking=False``: Qwen3's switch, an empty think block
    after the marker (a tokenizer without Qwen's template ignores it)."""
    if isinstance(prompt_or_messages, str):
        messages = [{"role": "user", "content": prompt_or_messages}]
    else:
        messages = check_messages(prompt_or_messages, "prompt")
    if tools:
        check_tools(tools, "prompt")
    if chatml.is_chatml(tokenizer):
        pieces = chatml.segments(messages, tools, add_generation_prompt=True, enable_thinking=enable_thinking,
                                 name=chatml.family(tokenizer))
        return _encode_segments(tokenizer, pieces)[0]
    return _encode_segments(tokenizer, _segments(messages, tools))[0] + [special_id(tokenizer, ASSISTANT)]


def fit_turns(ids_of, n_turns, room, block_size):
    """Drop the oldest turns until a prompt leaves ``room`` new tokens in the context.

    ids_of(k) -> the prompt's ids without its first k turns (a turn: a user message and the answer after
    it; the system message and the message being answered always stay). -> (ids, k) for the smallest k
    with len(ids) + room <= block_size, or (ids with every droppable turn gone, n_turns) when even that
    does not fit: the caller says what leaves no room. `zerollm chat` and the server's fit_context (the
    chat page) both fit this way, so both forget the same turns.
    """
    for k in range(n_turns + 1):
        ids = ids_of(k)
        if len(ids) + room <= block_size:
            return ids, k
    return ids, n_turns


def turn_starts(messages):
    """Where each turn begins among ``messages`` (after any leading system messages): the index of each
    user message. The last turn is the one being answered."""
    return [i for i, m in enumerate(messages) if m["role"] == "user"]


def decode_completion(tokenizer, ids):
    """The text of a generated completion: everything before its first end-of-turn token."""
    ids = [int(i) for i in ids]
    end = end_id(tokenizer)
    if end in ids:
        ids = ids[:ids.index(end)]
    return tokenizer.decode(ids)


def example_texts(example):
    """Every text of an SFT example (what a char tokenizer must be able to encode)."""
    return [t for t, special, _ in _segments(as_messages(example), example.get("tools")) if not special]


# ----------------------------------------------------------------------------
# what a model wrote -> reasoning, content and tool calls

@dataclass(frozen=True)
class ToolCall:
    name: str
    arguments: dict

    def as_json(self):
        """The call as the template writes it (and as a tool-calling model learns to write it)."""
        return json.dumps({"name": self.name, "arguments": self.arguments}, ensure_ascii=False)


@dataclass(frozen=True)
class Reply:
    """One parsed assistant turn: ``reasoning`` is None when there was no think block."""
    content: str
    reasoning: str | None = None
    tool_calls: tuple = ()


def _read_call(body, tool_names):
    """A ToolCall when ``body`` is a JSON object {"name": a known tool, "arguments": {...}}, else None."""
    if len(body) > MAX_CALL_CHARS:
        return None
    try:
        value = json.loads(body)
    except (ValueError, RecursionError):
        return None
    if not (isinstance(value, dict) and isinstance(value.get("name"), str)     # other keys (an "id") are ignored
            and isinstance(value.get("arguments"), dict)):
        return None
    if tool_names is not None and value["name"] not in tool_names:
        return None
    return ToolCall(value["name"], value["arguments"])


def parse_reply(text, tool_names=None):
    """The text of a finished assistant turn (decoded with its special tokens, without <|end|>) -> Reply.

    reasoning: the text between a leading <think> and its </think> (all of the rest when it never closes,
    and then content is empty). tool_calls: each <tool_call>...</tool_call> whose body is a JSON object
    with a string "name" (one of ``tool_names`` when given) and an object "arguments". Everything else is
    content, malformed calls included (as the text the model wrote): a model's output never raises here.

    >>> parse_reply('<think>2*3</think>ok<tool_call>{"name": "calculator", "arguments": {"expression": "2*3"}}</tool_call>')
    Reply(content='ok', reasoning='2*3', tool_calls=(ToolCall(name='calculator', arguments={'expression': '2*3'}),))
    """
    reasoning, rest = None, text
    if text.lstrip().startswith(THINK):
        rest = text.lstrip()[len(THINK):]
        close = rest.find(THINK_END)
        if close < 0:
            return Reply("", rest)
        reasoning, rest = rest[:close], rest[close + len(THINK_END):]
    names = None if tool_names is None else set(tool_names)
    content, calls, at = [], [], 0
    while True:
        start = rest.find(TOOL_CALL, at)
        stop = rest.find(TOOL_CALL_END, start + len(TOOL_CALL)) if start >= 0 else -1
        if stop < 0:
            content.append(rest[at:])
            break
        call = _read_call(rest[start + len(TOOL_CALL):stop], names)
        content.append(rest[at:start] if call else rest[at:stop + len(TOOL_CALL_END)])
        calls += [call] if call else []
        at = stop + len(TOOL_CALL_END)
    return Reply("".join(content), reasoning, tuple(calls))


def reply_message(reply, call_ids):
    """A parsed Reply as an OpenAI assistant message (``call_ids``: one id per tool call), which the
    template renders back to the same text."""
    message = {"role": "assistant", "content": reply.content}
    if reply.reasoning is not None:
        message["reasoning_content"] = reply.reasoning
    if reply.tool_calls:
        message["tool_calls"] = [{"id": i, "type": "function", "function": {"name": c.name, "arguments": c.arguments}}
                                 for i, c in zip(call_ids, reply.tool_calls)]
    return message


# ----------------------------------------------------------------------------
# the same template for Hugging Face

def chat_template_jinja():
    """The template as Jinja, for tokenizer_config.json's "chat_template" (transformers'
    apply_chat_template renders it, then tokenizes the text; the markers are added tokens there).
    The same pieces as ``_segments``: tools in the system turn, thinking and calls in the assistant's
    {% generation %} block, consecutive tool messages as one user turn. transformers' ``tojson`` is
    json.dumps with ensure_ascii=False and the default separators, as ours."""
    markers = "{" + ", ".join(f"'{role}': '{marker}'" for role, marker in MARKERS.items()) + "}"
    tools = ("'" + TOOLS + "' -}}{%- for tool in tools -%}{{- tool | tojson -}}{%- endfor -%}{{- '" + TOOLS_END + "'")
    return (
        "{%- set markers = " + markers + " -%}"
        "{%- for message in messages -%}"
        "{%- if message['role'] not in markers and message['role'] != 'tool' -%}"
        "{{- raise_exception('unknown role ' + message['role'] + '; roles are system, user, assistant, tool') -}}"
        "{%- endif -%}"
        "{%- endfor -%}"
        "{%- set ns = namespace(start=0) -%}"
        "{%- if messages and messages[0]['role'] == 'system' -%}"
        "{{- '" + SYSTEM + "' + messages[0]['content'] -}}"
        "{%- if tools -%}{{- " + tools + " -}}{%- endif -%}"
        "{{- '" + END + "' -}}"
        "{%- set ns.start = 1 -%}"
        "{%- elif tools -%}"
        "{{- '" + SYSTEM + "' -}}{{- " + tools + " -}}{{- '" + END + "' -}}"
        "{%- endif -%}"
        "{%- for message in messages[ns.start:] -%}"
        "{%- if message['role'] == 'tool' -%}"
        "{%- if loop.first or loop.previtem['role'] != 'tool' -%}{{- '" + USER + "' -}}{%- endif -%}"
        "{{- '" + TOOL_RESPONSE + "' + message['content'] + '" + TOOL_RESPONSE_END + "' -}}"
        "{%- if loop.last or loop.nextitem['role'] != 'tool' -%}{{- '" + END + "' -}}{%- endif -%}"
        "{%- elif message['role'] == 'assistant' -%}"
        "{{- '" + ASSISTANT + "' -}}"
        "{%- generation -%}"
        "{%- if message['reasoning_content'] -%}"
        "{{- '" + THINK + "' + message['reasoning_content'] + '" + THINK_END + "' -}}"
        "{%- endif -%}"
        "{%- if message['content'] is string -%}{{- message['content'] -}}{%- endif -%}"
        "{%- if message['tool_calls'] -%}{%- for call in message['tool_calls'] -%}"
        "{{- '" + TOOL_CALL + "{\"name\": ' + (call['function']['name'] | tojson) + ', \"arguments\": ' -}}"
        "{%- if call['function']['arguments'] is string -%}{{- call['function']['arguments'] -}}"
        "{%- else -%}{{- call['function']['arguments'] | tojson -}}{%- endif -%}"
        "{{- '}" + TOOL_CALL_END + "' -}}"
        "{%- endfor -%}{%- endif -%}"
        "{{- '" + END + "' -}}"
        "{%- endgeneration -%}"
        "{%- else -%}"
        "{{- markers[message['role']] + message['content'] + '" + END + "' -}}"
        "{%- endif -%}"
        "{%- endfor -%}"
        "{%- if add_generation_prompt -%}{{- '" + ASSISTANT + "' -}}{%- endif -%}"
    )


def chat_model(model, tok, rows, seed):
    """The tokenizer with the chat template's tokens (and any characters the rows need), and the model
    resized to it; both unchanged when they already fit."""
    texts = [str(v) for row in rows for k, v in row.items() if k in ("prompt", "chosen", "rejected", "completion")]
    texts += [json.dumps(t, ensure_ascii=False) for row in rows for t in row.get("tools") or ()]
    tok = prepare_tokenizer(tok, texts, needs=template_needs(rows))
    if tok.vocab_size > model.config.vocab_size:      # a model may have more rows than its tokenizer (GPT-2 shapes)
        model = resize_model(model, tok.vocab_size, np.random.default_rng([seed, 9]))
    return model, tok
