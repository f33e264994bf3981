"""The request bodies zerollm serve accepts, as pydantic models: OpenAI's fields that mean something
here, plus top_k, min_p and repetition_penalty as extensions. Any other field is refused by name
(extra="forbid"), types are strict (no "1" for 1), and NaN or infinite numbers are refused.

``first_problem`` looks at a parsed body before pydantic does: pydantic builds one error per unknown
field or bad item, so a 1 MB body of 100,000 unknown fields cost it about a second; the walk stops at the
first one, and past it pydantic only sees a bounded body (at most MAX_MESSAGES messages of at most
MAX_PARTS parts, every object with only its known keys).
"""

import json
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from zerollm.generation.sample import PENALTY_RANGE

MAX_MESSAGES = 1024
MAX_PARTS = 256                    # text parts in one message's content
MAX_STOP = 4                       # as OpenAI
MAX_STOP_CHARS = 256               # per stop string: a stop is a few characters ("\n\n", "</answer>")
MAX_N = 16
MAX_TOOLS = 128                    # tools in a request, and calls in one message (as OpenAI)
MAX_TOOL_NAME = 64                 # characters of a function's name (OpenAI's limit) or a call's id

Float = Annotated[float, Field(allow_inf_nan=False)]


class _Body(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True, allow_inf_nan=False)


class TextPart(_Body):
    type: Literal["text"]
    text: str


class FunctionCall(_Body):
    """A call an assistant made, as OpenAI sends it back: ``arguments`` a JSON string of an object (an
    object itself is taken too, as the chat template's own rows hold it)."""
    name: Annotated[str, Field(min_length=1, max_length=MAX_TOOL_NAME)]
    arguments: str | dict


class ToolCall(_Body):
    id: Annotated[str, Field(max_length=MAX_TOOL_NAME)]
    type: Literal["function"] = "function"
    function: FunctionCall


class Message(_Body):
    role: Literal["system", "user", "assistant", "tool"]
    # None only for an assistant message that made tool calls (_content_needed says so otherwise)
    content: str | list[TextPart] | None = None
    tool_calls: Annotated[list[ToolCall], Field(max_length=MAX_TOOLS)] | None = None    # role assistant
    tool_call_id: Annotated[str, Field(max_length=MAX_TOOL_NAME)] | None = None            # role tool
    reasoning_content: str | None = None                                                 # role assistant

    @field_validator("content", mode="before")
    @classmethod
    def _text_only(cls, content):
        """Checked before the union (str | list[TextPart]), which would report only its first branch
        ('content.str: Input should be a valid string') for an image part or a number."""
        shape = "give a string or a list of text parts {\"type\": \"text\", \"text\": \"...\"}"
        if isinstance(content, str) or content is None:          # None: _content_needed checks the role
            return content
        if not isinstance(content, list):
            raise ValueError(f"{shape}, not {type(content).__name__}")
        for i, part in enumerate(content):
            if not isinstance(part, dict):
                raise ValueError(f"{shape}; part {i} is {type(part).__name__}")
            if part.get("type") != "text":
                raise ValueError(f"part {i} is of type {part.get('type')!r}: this server reads text only ({shape})")
            if not isinstance(part.get("text"), str):          # other keys: first_problem refused them
                raise ValueError(f"{shape}; part {i} has no string 'text'")
        return content

    @model_validator(mode="after")
    def _content_needed(self):
        """Tool fields on the roles that carry them, and content everywhere but an assistant's tool calls."""
        if self.tool_calls is not None and self.role != "assistant":
            raise ValueError(f"tool_calls belong to assistant messages; this one's role is {self.role!r}")
        if self.reasoning_content is not None and self.role != "assistant":
            raise ValueError(f"reasoning_content belongs to assistant messages; this one's role is {self.role!r}")
        if (self.role == "tool") != (self.tool_call_id is not None):
            raise ValueError("a tool message needs the tool_call_id of the call it answers" if self.role == "tool"
                             else f"tool_call_id belongs to tool messages; this one's role is {self.role!r}")
        if self.content is None and not self.tool_calls:
            raise ValueError("content is missing: every message needs one, except an assistant message "
                             "with tool_calls")
        return self

    def text(self):
        if self.content is None:
            return ""
        return self.content if isinstance(self.content, str) else "".join(p.text for p in self.content)


class Function(_Body):
    name: str
    description: str | None = None
    parameters: dict | None = None                                        # a JSON schema of the arguments
    strict: bool | None = None

    @field_validator("name")
    @classmethod
    def _name(cls, name):
        """OpenAI's rule for a function's name (the model writes it inside a JSON string)."""
        if not 1 <= len(name) <= MAX_TOOL_NAME or not all(c.isascii() and (c.isalnum() or c in "_-") for c in name):
            raise ValueError(f"a function's name is 1 to {MAX_TOOL_NAME} letters, digits, '_' or '-' (the pattern "
                             f"^[A-Za-z0-9_-]{{1,64}}$); got {name[:MAX_TOOL_NAME]!r}")
        return name


class Tool(_Body):
    type: Literal["function"]
    function: Function


class ChosenFunction(_Body):
    name: Annotated[str, Field(min_length=1, max_length=MAX_TOOL_NAME)]


class NamedToolChoice(_Body):
    """tool_choice {"type": "function", "function": {"name": ...}}: that function must be called."""
    type: Literal["function"]
    function: ChosenFunction


class StreamOptions(_Body):
    include_usage: bool = False


class _Generation(_Body):
    model: str | None = None
    max_tokens: Annotated[int, Field(ge=1)] | None = None
    temperature: Annotated[Float, Field(ge=0, le=2)] = 1.0
    top_p: Annotated[Float, Field(gt=0, le=1)] = 1.0
    n: Annotated[int, Field(ge=1, le=MAX_N)] = 1
    stop: str | Annotated[list[str], Field(max_length=MAX_STOP)] | None = None
    seed: Annotated[int, Field(ge=0, lt=2 ** 63)] | None = None
    stream: bool = False
    stream_options: StreamOptions | None = None
    presence_penalty: Annotated[Float, Field(ge=-2, le=2)] = 0.0
    frequency_penalty: Annotated[Float, Field(ge=-2, le=2)] = 0.0
    user: str | None = None                       # an end-user id: accepted, not used
    # extensions (vLLM spells them the same)
    top_k: Annotated[int, Field(ge=1)] | None = None
    min_p: Annotated[Float, Field(ge=0, le=1)] | None = None
    repetition_penalty: Annotated[Float, Field(ge=PENALTY_RANGE[0], le=PENALTY_RANGE[1])] = 1.0
    response_format: dict | None = None          # text, json_object or json_schema: zerollm.serve.structured

    @field_validator("stop", mode="before")
    @classmethod
    def _stop_shape(cls, stop):
        """Checked before the union (str | list[str]): pydantic would report only the union's first branch
        ('stop.str: Input should be a valid string') for a list that is too long or holds a number."""
        shape = f"give a string or a list of at most {MAX_STOP} strings (as OpenAI)"
        if stop is None:
            return stop
        if not isinstance(stop, (str, list)):
            raise ValueError(f"{shape}, not {type(stop).__name__}")
        stops = [stop] if isinstance(stop, str) else stop
        odd = next((i for i, s in enumerate(stops) if not isinstance(s, str)), None)
        if odd is not None:
            raise ValueError(f"{shape}; item {odd} is {type(stops[odd]).__name__}")
        if len(stops) > MAX_STOP:
            raise ValueError(f"{shape}; got {len(stops)}")
        long = next((s for s in stops if len(s) > MAX_STOP_CHARS), None)
        if long is not None:
            raise ValueError(f"a stop string is {len(long)} characters; at most {MAX_STOP_CHARS} are allowed")
        for i, s in enumerate(stops):
            try:
                s.encode("utf-8")
            except UnicodeEncodeError as err:     # JSON's "\ud800": half of a UTF-16 pair, in no text
                where = "the stop string" if isinstance(stop, str) else f"stop string {i}"
                raise ValueError(f"{where} holds a lone surrogate {s[err.start]!r} (half of a UTF-16 pair, e.g. an "
                                 "emoji cut in two), which is not text; send the whole character") from None
        return stop

    @field_validator("stop")
    @classmethod
    def _stops_not_empty(cls, stop):
        stops = [stop] if isinstance(stop, str) else (stop or [])
        if any(not s for s in stops):
            raise ValueError("stop strings must not be empty")
        return stops

    def stops(self):
        return self.stop or []


class ChatTemplateKwargs(_Body):
    """Switches of the chat template, under vLLM's and SGLang's name: Qwen3's enable_thinking (False: an
    empty think block after the prompt, the model answers at once). Nothing else: the template is zerollm's."""
    enable_thinking: bool = True


class ChatRequest(_Generation):
    messages: Annotated[list[Message], Field(min_length=1)]     # at most MAX_MESSAGES: first_problem
    max_completion_tokens: Annotated[int, Field(ge=1)] | None = None
    logprobs: bool = False
    top_logprobs: Annotated[int, Field(ge=0, le=20)] | None = None
    # zerollm's extension (the chat page sends it): fit the context as `zerollm chat` does, leaving out the
    # oldest turns and asking for no more new tokens than the context has room for
    fit_context: bool = False
    # tools the model may call, and whether it must (zerollm.serve.tools checks them against the model)
    tools: Annotated[list[Tool], Field(max_length=MAX_TOOLS)] | None = None
    tool_choice: Literal["auto", "none", "required"] | NamedToolChoice | None = None
    parallel_tool_calls: bool = True
    chat_template_kwargs: ChatTemplateKwargs | None = None

    @field_validator("tool_choice", mode="before")
    @classmethod
    def _choice_shape(cls, choice):
        """Checked before the union, which would name its first branch ("tool_choice.literal[...]")."""
        if choice is None or isinstance(choice, dict) or choice in ("auto", "none", "required"):
            return choice
        raise ValueError(f'give "auto", "none", "required" or {{"type": "function", "function": {{"name": ...}}}}, '
                         f"not {json.dumps(choice)[:80]}")

    @field_validator("max_completion_tokens")
    @classmethod
    def _one_length(cls, n, info):
        """max_completion_tokens is OpenAI's newer name for max_tokens: two different values are a 400."""
        old = info.data.get("max_tokens")
        if n is not None and old is not None and old != n:
            raise ValueError(f"max_tokens ({old}) and max_completion_tokens ({n}) disagree; give one of them")
        return n

    @field_validator("top_logprobs")
    @classmethod
    def _needs_logprobs(cls, k, info):
        """As OpenAI: top_logprobs without "logprobs": true is a 400 (it would silently return none)."""
        if k is not None and info.data.get("logprobs") is not True:
            raise ValueError('top_logprobs needs "logprobs": true; add it, or leave top_logprobs out')
        return k

    def new_tokens(self):
        return self.max_completion_tokens if self.max_completion_tokens is not None else self.max_tokens

    def logprob_count(self):
        """None = no logprobs; k = the chosen token's and the k best."""
        return (self.top_logprobs or 0) if self.logprobs else None


class CompletionRequest(_Generation):
    prompt: Annotated[str, Field(min_length=1)]
    logprobs: Annotated[int, Field(ge=0, le=5)] | None = None

    def new_tokens(self):
        return self.max_tokens if self.max_tokens is not None else 16      # OpenAI's default for completions

    def logprob_count(self):
        return self.logprobs


# ----------------------------------------------------------------------------
# before pydantic

def first_problem(body, model):
    """The first thing wrong with a parsed JSON ``body`` for ``model`` (ChatRequest or CompletionRequest)
    that costs pydantic work in proportion to the body, as an error in pydantic's form ({"type", "loc",
    "msg"}), or None. Keys are checked in the body's order, so the first unknown one is named.

    >>> first_problem({"messages": [{"role": "user", "content": "hi", "name": "x"}], "logit_bias": {}}, ChatRequest)
    {'type': 'extra_forbidden', 'loc': ('logit_bias',), 'msg': 'unknown field'}
    """
    return next(_problems(body, model), None)


def _problems(body, model):
    if not isinstance(body, dict):
        yield {"type": "missing", "loc": (), "msg": "the body must be a JSON object"}
        return
    yield from _unknown(body, model, ())
    options = body.get("stream_options")
    if isinstance(options, dict):
        yield from _unknown(options, StreamOptions, ("stream_options",))
    tools = body.get("tools") if model is ChatRequest else None
    if isinstance(tools, list):
        yield from _too_many(tools, MAX_TOOLS, ("tools",), "tools")
    messages = body.get("messages") if model is ChatRequest else None
    if isinstance(messages, list):
        yield from _too_many(messages, MAX_MESSAGES, ("messages",), "messages (drop the oldest turns)")
        for i, message in enumerate(messages):
            if isinstance(message, dict):
                yield from _message_problems(message, ("messages", i))


def _message_problems(message, loc):
    yield from _unknown(message, Message, loc)
    calls = message.get("tool_calls")
    if isinstance(calls, list):
        yield from _too_many(calls, MAX_TOOLS, (*loc, "tool_calls"), "tool calls")
    parts = message.get("content")
    if isinstance(parts, list):
        yield from _too_many(parts, MAX_PARTS, (*loc, "content"), "text parts (join them into one string)")
        for j, part in enumerate(parts):
            if isinstance(part, dict) and part.get("type") == "text":     # another type: Message says which
                yield from _unknown(part, TextPart, (*loc, "content", j))


def _unknown(obj, model, loc):
    for key in obj:
        if key not in model.model_fields:
            yield {"type": "extra_forbidden", "loc": (*loc, key), "msg": "unknown field"}
            return


def _too_many(items, most, loc, what):
    if len(items) > most:
        yield {"type": "too_long", "loc": loc, "msg": f"at most {most} {what}, got {len(items)}"}
