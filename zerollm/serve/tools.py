"""Tools and thinking through the server: OpenAI's ``tools`` / ``tool_choice`` / ``tool_calls`` and the
``reasoning_content`` of vLLM and DeepSeek, over zerollm's chat template (zerollm.data.chat).

    plan = tool_plan(tok, body)                          # 400s for tools the model cannot take
    messages = template_messages(body)                   # OpenAI messages -> the template's messages
    prompt = chat.encode_prompt(tok, messages, tools=plan.tools) + plan.forced_ids(tok)
    answer = Answer(plan)                                # one per choice
    deltas, finish = answer.stream(piece, finish)        # streamed: reasoning / content / whole tool calls
    message, finish = answer.message(whole_text, finish) # not streamed: the assistant message

A model writes its answer as the template says: ``<think>…</think>`` first when it thinks, then its text,
then ``<tool_call>{"name": …, "arguments": {…}}</tool_call>`` per call. The one parser of that text is
zerollm.data.chat.parse_reply (the REPL and RL rollouts use it too); here it is only applied.

Streaming, as OpenAI streams: a tool call is held back until its ``</tool_call>``, then sent as a first
delta with its index, id, type, name and arguments "", and a second with the arguments; only a call the
parser accepts is sent as one (a malformed call is text, sent as content). Everything before an
unclosed ``<tool_call>``, and before a tail that may begin a marker, is parsed as it grows, and what the
parse adds to the reasoning or the content is sent. So the streamed pieces add up to the message of the
same text not streamed.

``tool_choice``: "auto" (the default with tools): the model decides; "none": no tools in the prompt and
no call parsed; "required" or a named function: the answer is begun with ``<tool_call>{"name": "`` (or
with the named function's whole head up to its arguments), and the rest is constrained by a grammar
(zerollm.generation.grammar): one of the tools' names, then arguments that match its ``parameters``
schema, then the closing brace, where the grammar ends the answer and ``</tool_call>`` is added. The
result is still read by the parser like any other answer; one cut short by max_tokens is text. A forced
call is one call (parallel_tool_calls off). A model that thinks may think first: then nothing is put in
the prompt, and the grammar is the whole answer, an optional ``<think>…</think>`` (any text inside),
``<tool_call>`` and the same head and arguments (the special tokens are grammar markers, automaton.marker).
``parallel_tool_calls: false`` (with "auto"): ``</tool_call>`` is a stop id of the request, so the answer
ends at the end of its first call (the server puts the marker the stop id took back into the text).
"""

import functools
import json
import uuid
from dataclasses import dataclass

from zerollm.data import chat
from zerollm.generation.grammar import Grammar, grammar_for_regex, regex_for_schema
from zerollm.generation.grammar.automaton import marker
from zerollm.generation.grammar.regex import MAX_CHAR, Cat, Chars, Repeat, literal
from zerollm.generation.grammar.regex import parse as parse_pattern
from zerollm.io.errors import ZeroLLMError
from zerollm.serve.guard import ApiError

CALL_OPEN, CALL_CLOSE, THINK_OPEN, THINK_CLOSE = chat.TOOL_CALL, chat.TOOL_CALL_END, chat.THINK, chat.THINK_END


# ----------------------------------------------------------------------------
# the request

@dataclass(frozen=True)
class ToolPlan:
    """What one chat request asks of tools: ``tools`` rendered into the prompt (OpenAI's dicts), the
    ``names`` whose calls come back as calls, the text ``forced`` that begins the answer (tool_choice
    required or named), and whether more than one call may come back (``parallel``)."""
    tools: tuple = ()
    names: frozenset = frozenset()
    forced: str = ""
    parallel: bool = True
    thinking: bool = False        # the model knows <think>: its reasoning is parsed out of the answer
    grammar: object = None        # forced: the TokenIndex the rest of the call must match (zerollm.generation.grammar)
    stop_ids: frozenset = frozenset()   # parallel_tool_calls false: </tool_call> ends the answer (one call)

    @property
    def parsed(self):
        """Whether answers are parsed at all: a model without tools or thinking answers plain content."""
        return bool(self.thinking or self.names or self.forced)

    def forced_ids(self, tok):
        """The forced beginning as ids, the marker as its special token (as the template encodes a call)."""
        if not self.forced:
            return []
        rest = self.forced[len(CALL_OPEN):]
        return [chat.special_id(tok, CALL_OPEN), *tok.encode(rest)]


def tool_plan(tok, body, vocab_size=None):
    """The ToolPlan of a ChatRequest ``body`` for a model with tokenizer ``tok`` (and ``vocab_size`` logits);
    ApiError 400 naming the field for tools the model cannot take or a tool_choice that does not fit the
    tools. A forced call's grammar is built here: call it off the event loop."""
    plain = ToolPlan(thinking=chat.has_thinking(tok))
    choice = body.tool_choice
    if not body.tools:
        if body.tools is not None:
            raise ApiError(400, "tools is an empty list; give at least one tool, or leave tools out", param="tools")
        if choice not in (None, "none"):
            raise ApiError(400, "tool_choice asks for a tool call but no tools are given; add tools, or leave "
                                "tool_choice out", param="tool_choice")
        return plain
    if not chat.has_tools(tok):
        raise ApiError(400, "this model was not trained with tools: its tokenizer has no <tool_call> tokens; "
                            "leave tools out (or fine-tune it on tool-call conversations with zerollm sft)",
                       param="tools")
    names = [t.function.name for t in body.tools]
    twice = next((n for i, n in enumerate(names) if n in names[:i]), None)
    if twice is not None:
        raise ApiError(400, f"two tools are named {twice!r}; give each function its own name", param="tools")
    for i, t in enumerate(body.tools):
        _check_parameters(t.function.parameters, i)
    if choice == "none":
        return plain
    tools = tuple(t.model_dump(exclude_none=True) for t in body.tools)
    if choice in (None, "auto"):
        # one call at most: the answer ends where the first call does, as OpenAI's answer would
        one = frozenset() if body.parallel_tool_calls else frozenset({chat.special_id(tok, CALL_CLOSE)})
        return ToolPlan(tools, frozenset(names), "", body.parallel_tool_calls, plain.thinking, stop_ids=one)
    if choice != "required":
        if choice.function.name not in names:
            raise ApiError(400, f"tool_choice names the function {choice.function.name!r}, which is not among "
                                f"the tools ({', '.join(names)}); name one of them", param="tool_choice")
        tools = tuple(t for t in tools if t["function"]["name"] == choice.function.name)
    rf = body.response_format
    if rf is not None and not (isinstance(rf, dict) and rf.get("type") == "text"):
        # two grammars for one answer: the call's arguments follow the tool's parameters, so the other
        # would be ignored; say so instead of choosing one silently
        raise ApiError(400, "tool_choice forces a tool call, whose arguments follow the tool's parameters, so "
                            "response_format cannot apply too; leave out response_format, or set tool_choice to "
                            "\"auto\"", param="tool_choice")
    forced = _head(tools[0]["function"]["name"]) if len(tools) == 1 else CALL_OPEN + '{"name": "'
    called = frozenset(t["function"]["name"] for t in tools)
    if plain.thinking:
        # a thinking model may think first: nothing is forced into the prompt, and the grammar is an optional
        # <think>...</think>, then <tool_call>, the forced head as text, and the arguments
        grammar = _forced_grammar(tools, len(tools) > 1, names, forced[len(CALL_OPEN):])
        markers = [chat.special_id(tok, t) for t in (THINK_OPEN, THINK_CLOSE, CALL_OPEN)]
        return ToolPlan(tools, called, "", False, True, grammar.index(tok, vocab_size, markers))
    grammar = _forced_grammar(tools, len(tools) > 1, names).index(tok, vocab_size)
    return ToolPlan(tools, called, forced, False, plain.thinking, grammar)


def _head(name):
    """A call's text up to its arguments, as the template writes it (json.dumps with its separators)."""
    return CALL_OPEN + json.dumps({"name": name, "arguments": 0}, ensure_ascii=False)[:-2]


def _forced_grammar(tools, with_name, names, thinking_head=None):
    """What follows a forced call's head: its arguments as the tool's parameters schema says, then the
    closing brace (``with_name``: first one of the names, for tool_choice required among several tools).
    The grammar ends the answer there; Answer writes the </tool_call> marker after it. ``thinking_head``
    (a thinking model): the whole answer instead, an optional <think>...</think>, <tool_call>, this text
    (the head after the marker), then the same; the special tokens are automaton.marker 0, 1 and 2."""
    heads = []
    for t in tools:
        fn = t["function"]
        try:
            args = regex_for_schema(fn.get("parameters") or {"type": "object"})
        except ZeroLLMError as err:
            i = names.index(fn["name"])
            raise ApiError(400, f"tools[{i}].function.parameters: {err} (a forced call's arguments follow the "
                                "schema)", param=f"tools.{i}.function.parameters") from None
        heads.append((fn["name"] + '", "arguments": ' if with_name else "") + args)
    pattern = "(" + "|".join(heads) + ")\\}"
    if thinking_head is None:
        return grammar_for_regex(pattern)
    return _thinking_grammar(pattern, thinking_head)


@functools.lru_cache(maxsize=64)
def _thinking_grammar(pattern, head):
    any_text = Repeat(Chars(((0, MAX_CHAR),)), 0, None)        # the thinking: any text (markers are not text)
    think = Repeat(Cat((marker(0), any_text, marker(1))), 0, 1)
    return Grammar(Cat((think, marker(2), literal(head), parse_pattern(pattern))), "thinking, then " + head + pattern)


def _check_parameters(parameters, i):
    """A function's parameters are a JSON schema of an object, as OpenAI asks."""
    if parameters is not None and parameters.get("type", "object") != "object":
        raise ApiError(400, f"tools[{i}].function.parameters must be a JSON schema of an object "
                            f"(\"type\": \"object\"); got type {parameters.get('type')!r}",
                       param=f"tools.{i}.function.parameters")


def template_messages(body):
    """A ChatRequest's messages as the chat template takes them: role and text, and an assistant's
    reasoning_content and tool_calls (arguments as objects), a tool message's tool_call_id."""
    out = []
    for i, m in enumerate(body.messages):
        message = {"role": m.role, "content": m.text()}
        if m.reasoning_content is not None:
            message["reasoning_content"] = m.reasoning_content
        if m.tool_calls:
            message["tool_calls"] = [_template_call(c, f"messages.{i}.tool_calls.{j}")
                                     for j, c in enumerate(m.tool_calls)]
        if m.tool_call_id is not None:
            message["tool_call_id"] = m.tool_call_id
        out.append(message)
    return out


def _template_call(call, where):
    """A call sent back by the client, its arguments kept as given (a JSON string is written as it is, as
    transformers' apply_chat_template does) once they are seen to be an object."""
    args = call.function.arguments
    try:
        value = json.loads(args) if isinstance(args, str) else args
    except (ValueError, RecursionError):
        value = None
    if not isinstance(value, dict):
        raise ApiError(400, f"{where}.function.arguments must be a JSON object (or a string of one), as the "
                            "model wrote it", param=f"{where}.function.arguments")
    return {"id": call.id, "type": "function", "function": {"name": call.function.name, "arguments": args}}


# ----------------------------------------------------------------------------
# the answer

def parse(text, names):
    """-> (reasoning or None, content, [chat.ToolCall]) of an assistant's text, by the template's one
    parser (zerollm.data.chat.parse_reply); calls only of the functions ``names`` (none when empty)."""
    parsed = chat.parse_reply(text, names)
    return parsed.reasoning, parsed.content, list(parsed.tool_calls)


def reasoning_tokens(tok, ids):
    """OpenAI's completion_tokens_details.reasoning_tokens of one choice: its ids from a <think> it begins with
    through the matching </think> (all of them when the block never closes, as parse() reads such an answer),
    0 when it does not begin by thinking."""
    if not ids or ids[0] != chat.special_id(tok, THINK_OPEN):
        return 0
    close = chat.special_id(tok, THINK_CLOSE)
    return ids.index(close) + 1 if close in ids else len(ids)


def call_id():
    return "call_" + uuid.uuid4().hex[:24]


def openai_call(call, cid, index=None):
    """A parsed call (chat.ToolCall) as OpenAI's tool_calls item (arguments: a JSON string)."""
    fn = {"name": call.name, "arguments": json.dumps(call.arguments, ensure_ascii=False)}
    return {**({} if index is None else {"index": index}), "id": cid, "type": "function", "function": fn}


class Answer:
    """One choice's answer, parsed as it grows. ``push(piece)`` -> the deltas to stream now; ``finish()``
    -> the rest; ``message(text)`` -> the whole assistant message (not streamed)."""

    def __init__(self, plan):
        self.plan, self.text = plan, plan.forced
        self.sent_reasoning, self.sent_content, self.ids = "", "", []

    def _calls(self, calls):
        return calls if self.plan.parallel else calls[:1]

    def push(self, piece):
        self.text += piece
        return self._deltas(self.text[:_settled(self.text, bool(self.plan.names))])

    def finish(self, finish="stop"):
        self.text += self._closing(finish)
        return self._deltas(self.text)

    def _closing(self, finish):
        """A forced call's grammar ends the answer at its closing brace: the </tool_call> marker follows."""
        return CALL_CLOSE if self.plan.grammar is not None and finish == "stop" else ""

    def _deltas(self, text):
        reasoning, content, calls = parse(text, self.plan.names)
        out = []
        if reasoning and len(reasoning) > len(self.sent_reasoning) and reasoning.startswith(self.sent_reasoning):
            out.append({"reasoning_content": reasoning[len(self.sent_reasoning):]})
            self.sent_reasoning = reasoning
        if len(content) > len(self.sent_content) and content.startswith(self.sent_content):
            out.append({"content": content[len(self.sent_content):]})
            self.sent_content = content
        for k, call in enumerate(self._calls(calls)[len(self.ids):], start=len(self.ids)):
            self.ids.append(call_id())
            head = openai_call(call, self.ids[-1], k)
            args, head["function"]["arguments"] = head["function"]["arguments"], ""
            out += [{"tool_calls": [head]}, {"tool_calls": [{"index": k, "function": {"arguments": args}}]}]
        return out

    def stream(self, piece, finish):
        """(the deltas for a new ``piece`` of text, the finish_reason): at the end (``finish`` given) the
        held-back rest too, and "tool_calls" for an answer that stopped after making calls."""
        if not self.plan.parsed:
            return ([{"content": piece}] if piece else []), finish
        deltas = self.push(piece) if piece else []
        if finish is None:
            return deltas, None
        return deltas + self.finish(finish), ("tool_calls" if finish == "stop" and self.ids else finish)

    def message(self, text, finish):
        """(the assistant message of the whole ``text``, the finish_reason: "tool_calls" for an answer
        that stopped after making calls)."""
        if not self.plan.parsed:
            return {"role": "assistant", "content": text}, finish
        reasoning, content, calls = parse(self.plan.forced + text + self._closing(finish), self.plan.names)
        calls = self._calls(calls)
        message = {"role": "assistant", "content": content if content or not calls else None}
        if reasoning is not None:
            message["reasoning_content"] = reasoning
        if calls:
            message["tool_calls"] = [openai_call(c, call_id()) for c in calls]
        return message, ("tool_calls" if calls and finish == "stop" else finish)


def _settled(text, calls):
    """How much of ``text`` parses now as it will when more follows: up to an unclosed <tool_call> (when
    calls are parsed) and before a tail that may be the start of a marker."""
    end = len(text)
    if calls:
        opened = text.rfind(CALL_OPEN)
        if opened >= 0 and text.find(CALL_CLOSE, opened) < 0:
            end = opened
    for tag in (CALL_OPEN, THINK_CLOSE, THINK_OPEN):          # (not `marker`: the grammar's, imported above)
        for k in range(min(len(tag) - 1, end), 0, -1):
            if text.endswith(tag[:k], 0, end):
                end = min(end, end - k)
                break
    return end
