"""The OpenAI-compatible HTTP API: /v1/models, /v1/chat/completions, /v1/completions, /health, and the
chat page at /.

    app = build_app(backend, api_key=None, max_body=1 << 20)     # then: uvicorn.run(app, ...)

Errors have OpenAI's shape, {"error": {"message", "type", "param", "code"}}, and status: 400 a bad
request (bad JSON, a wrong type, an unknown field, beyond the context), 401 a missing or wrong API
key, 404 an unknown model or route, 408 a body slower than --body-timeout, 413 a body over the cap, 429
no free row or place in the queue (with Retry-After), 503 shutting down. Streams are server-sent events
in OpenAI's chunk format, ending ``data: [DONE]``. What a request meets before it gets here is guard.py.

A body is parsed and checked on a worker thread (``PARSERS`` at a time), and so is its prompt encoded:
the event loop that answers every other client never waits on one client's JSON.
"""

import json
import sys
import time
import uuid
from pathlib import Path
from typing import NamedTuple

import anyio
import pydantic
from fastapi import FastAPI, Request
from fastapi.responses import HTMLResponse, Response, StreamingResponse
from starlette.exceptions import HTTPException
from starlette.requests import ClientDisconnect

from zerollm.align.tools import CALCULATOR
from zerollm.io.errors import ZeroLLMError
from zerollm.generation.batching import BeyondContext, Done, QueueFull
from zerollm.generation.sample import Sampling
from zerollm.serve.backend import Choices
from zerollm.serve.guard import (JSON, RETRY_AFTER_S, SHUTDOWN, STREAM_END, ApiError, Ending, Framing, Guard,
                                 error_response, sse, stream_cut)
from zerollm.serve.metrics import CONTENT_TYPE as METRICS_TYPE
from zerollm.serve.schemas import ChatRequest, CompletionRequest, first_problem
from zerollm.serve.structured import incomplete_note, response_grammar
from zerollm.serve.tools import CALL_CLOSE, Answer, reasoning_tokens, template_messages, tool_plan

PAGE = Path(__file__).with_name("page.html")
PARSERS = 4                  # bodies parsed at once: each may hold tens of MB of Python objects for a moment
# A body of at most this many bytes is parsed, checked and turned into prompt ids on the event loop: that takes
# 10-100 us for 2 KiB (BPE's encoding the most), less than a hop to a worker thread and back, whose three hops
# a request cost the server 0.2-0.45 ms of CPU (docs/serving.md, "Small bodies on the event loop"). Larger bodies,
# the plan of a request with tools (it may build a forced call's grammar) and fitting a prompt to the context go
# to a worker thread, so none of them stalls the loop.
INLINE_BODY = 2048
SHOWN_NAME = 100             # characters of a field's name an error repeats (a JSON key may be a megabyte)


# ----------------------------------------------------------------------------
# the app

def build_app(backend, *, api_key=None, max_body=1 << 20, body_timeout=30.0, metrics_public=False):
    app = FastAPI(title="zerollm", docs_url=None, redoc_url=None, openapi_url=None)
    app.state.backend, app.state.draining = backend, False
    parsers = anyio.CapacityLimiter(PARSERS)
    app.add_middleware(Guard, state=app.state, api_key=api_key,       # before any body is read
                       metrics_public=metrics_public)
    app.add_middleware(Framing, max_body=max_body, body_timeout=body_timeout)
    app.add_middleware(Ending)                                         # the outermost
    _add_error_handlers(app)

    def off_loop(fn, *args, small=False):
        if small:                   # see INLINE_BODY
            return _now(fn, *args)
        return anyio.to_thread.run_sync(fn, *args, limiter=parsers)

    @app.get("/health")
    async def health():
        s = backend.scheduler
        return {"status": "draining" if app.state.draining else "ok", "active": len(s.rows),
                "waiting": len(s.waiting), "max_batch": s.max_batch}

    @app.get("/metrics")
    async def metrics():
        # Prometheus' text format (zerollm.serve.metrics); a scrape renders a few dozen lines
        return Response(backend.metrics.render(), media_type=METRICS_TYPE)

    @app.get("/", response_class=HTMLResponse)
    async def page():
        script = lambda value: json.dumps(value).replace("<", "\\u003c")     # never closes the <script>
        return HTMLResponse(PAGE.read_text(encoding="utf-8").replace("@CALCULATOR@", script(CALCULATOR))
                            .replace("@MODEL@", script(backend.name)))

    @app.get("/v1/models")
    async def models():
        return {"object": "list", "data": [_model_card(backend)]}

    @app.get("/v1/models/{name}")
    async def model(name: str):
        _check_model(backend, name)
        return _model_card(backend)

    @app.post("/v1/chat/completions")
    async def chat_completions(request: Request):
        raw = await _body_bytes(request)
        small = len(raw) <= INLINE_BODY
        body = await off_loop(parse_body, raw, ChatRequest, small=small)
        _check_model(backend, body.model)
        plan = await off_loop(tool_plan, backend.tok, body, backend.model.config.vocab_size,
                              small=small and not body.tools)     # tools: a forced call's grammar is built
        messages = template_messages(body)
        thinking = body.chat_template_kwargs is None or body.chat_template_kwargs.enable_thinking
        try:
            if body.fit_context:
                prompt, fitted = await off_loop(_fit, backend, body, messages, plan.tools, thinking)
            else:
                prompt, fitted = await off_loop(backend.chat_prompt, messages, plan.tools, thinking, small=small), None
        except ZeroLLMError as err:
            raise ApiError(400, str(err), param="messages") from None
        prompt = prompt + plan.forced_ids(backend.tok)         # tool_choice required or named: a call begun
        return await _complete(backend, body, prompt, request, chat=plan, fitted=fitted)

    @app.post("/v1/completions")
    async def completions(request: Request):
        raw = await _body_bytes(request)
        small = len(raw) <= INLINE_BODY
        body = await off_loop(parse_body, raw, CompletionRequest, small=small)
        _check_model(backend, body.model)
        prompt = await off_loop(backend.text_prompt, body.prompt, small=small)
        if not prompt:
            raise ApiError(400, "the prompt encodes to no tokens", param="prompt")
        return await _complete(backend, body, prompt, request, chat=False)

    return app


async def _now(fn, *args):
    return fn(*args)


def _model_card(backend):
    # max_model_len: the context in tokens, named as vLLM names it (the chat page's context meter reads it)
    return {"id": backend.name, "object": "model", "created": 0, "owned_by": "zerollm",
            "max_model_len": backend.block_size}


def _check_model(backend, name):
    if name is not None and name != backend.name:
        raise ApiError(404, f"the model {name!r} does not exist here; this server serves {backend.name!r}",
                       param="model", code="model_not_found")


# ----------------------------------------------------------------------------
# errors

def _add_error_handlers(app):
    @app.exception_handler(ApiError)
    async def api_error(request, err):
        return error_response(err)

    @app.exception_handler(HTTPException)
    async def http_error(request, err):
        message = {404: f"no route {request.method} {request.url.path}", 405: "method not allowed"}
        return error_response(ApiError(err.status_code, message.get(err.status_code, str(err.detail))))

    @app.exception_handler(ZeroLLMError)
    async def refused(request, err):
        return error_response(ApiError(400, str(err)))


# ----------------------------------------------------------------------------
# the body: bytes on the event loop, JSON and pydantic on a worker thread

async def _body_bytes(request):
    kind = request.headers.get("content-type", "")
    if "json" not in kind.lower():
        raise ApiError(400, f"the body must be JSON, sent with the header Content-Type: application/json "
                            f"(this one came as {kind or 'no type'!r})")
    try:
        return await request.body()                   # Framing holds it to --max-body and --body-timeout
    except ClientDisconnect:
        raise ApiError(400, "the client went away before its body was read") from None


def parse_body(raw, model):
    """JSON bytes -> a ``model`` (ChatRequest or CompletionRequest), or the ApiError that says what is wrong
    with them. Runs on a worker thread for a body over INLINE_BODY, on the event loop for a smaller one;
    ``first_problem`` bounds what pydantic is given."""
    if not raw:
        raise ApiError(400, "the request needs a JSON object body")
    try:
        body = json.loads(raw)
    except json.JSONDecodeError as err:
        raise ApiError(400, f"the request body is not valid JSON ({err.msg} at line {err.lineno} "
                            f"column {err.colno})") from None
    except (ValueError, RecursionError) as err:
        raise unreadable_body(err) from None
    problem = first_problem(body, model)
    if problem is not None:
        raise validation_error([problem])
    try:
        return model.model_validate(body)
    except pydantic.ValidationError as err:
        raise validation_error(err.errors(include_url=False, include_input=False)) from None


def validation_error(errors):
    """The first complaint (pydantic's, or first_problem's in the same form) as one OpenAI error that
    names the field."""
    e = errors[0]
    loc = [str(x) for x in e.get("loc", ())]
    param = ".".join(loc) or None
    shown = param if param is None or len(param) <= SHOWN_NAME else param[:SHOWN_NAME] + "..."
    if e["type"] == "extra_forbidden":
        return ApiError(400, f"unsupported field {shown!r}: zerollm serve does not implement it; leave it out",
                        param=shown, code="unsupported_parameter")
    if e["type"] == "missing" and not loc:
        return ApiError(400, "the request needs a JSON object body")
    if e["type"] == "missing":
        return ApiError(400, f"missing field {shown!r}", param=shown)
    return ApiError(400, f"{shown or 'body'}: {_reason(e)}", param=shown, code="invalid_value")


def _reason(e):
    """pydantic's message without the "Value error, " (or "Assertion failed, ") it puts before the text a
    validator raised: the client reads our words, not pydantic's error class."""
    msg = str(e["msg"])
    for prefix in ("Value error, ", "Assertion failed, "):
        if msg.startswith(prefix):
            return msg[len(prefix):]
    return msg


def unreadable_body(cause):
    """Why json.loads could not take a body that is not a plain syntax error."""
    if isinstance(cause, RecursionError):
        return ApiError(400, "the request body's JSON is nested too deeply (about a thousand arrays or "
                             "objects inside each other); no field here needs more than a few levels")
    if isinstance(cause, ValueError) and not isinstance(cause, UnicodeError) and "digits" in str(cause):
        return ApiError(400, f"the request body holds a number over {sys.get_int_max_str_digits()} digits "
                             "long; no field here takes one")
    return ApiError(400, "the request body could not be read: send JSON in UTF-8")


# ----------------------------------------------------------------------------
# completions

class _Choice:
    """One answer being put together: its text (the scheduler cut out the stop strings), token count,
    logprobs, ending."""

    def __init__(self):
        self.text, self.tokens, self.logprobs, self.finish = "", 0, [], None
        self.note = ""                  # why a response_format answer is incomplete (max_tokens came first)


def _sampling(body):
    try:
        return Sampling(body.temperature, body.top_k, None if body.top_p >= 1 else body.top_p, body.min_p,
                        body.repetition_penalty, body.presence_penalty, body.frequency_penalty)
    except ZeroLLMError as err:
        raise ApiError(400, str(err)) from None


def _max_tokens(backend, body, prompt):
    """The new tokens asked for; unasked, what the context leaves (at least one: the scheduler's check
    then says that the prompt alone fills the context)."""
    n = body.new_tokens()
    return max(backend.block_size - len(prompt), 1) if n is None else n


# fit_context without max_tokens: the oldest turns go until this share of the context is left for the answer
FIT_ANSWER_SHARE = 4


class Fitted(NamedTuple):
    """What fit_context did, returned as the response's "zerollm" object (the chat page shows it)."""
    dropped_turns: int            # the oldest turns left out of the prompt
    context: int                  # the model's context, in tokens
    prompt_tokens: int
    max_tokens: int               # the new tokens this answer may have


def _fit(backend, body, messages, tools=(), thinking=True):
    """(prompt ids, Fitted) for fit_context: the oldest turns left out until the answer's room fits (the
    max tokens asked for, else a quarter of the context), and max tokens lowered to the room left."""
    block, asked = backend.block_size, body.new_tokens()
    room = min(asked if asked is not None else max(block // FIT_ANSWER_SHARE, 1), block)
    ids, dropped = backend.fit_chat_prompt(messages, room, tools, thinking)
    left = block - len(ids)
    if left < 1:
        raise ApiError(400, f"the message being answered (with the system message) takes {len(ids)} tokens and leaves "
                            f"no room for an answer in the context of {block} tokens; shorten it",
                       param="messages", code="context_length_exceeded")
    return ids, Fitted(dropped, block, len(ids), min(asked if asked is not None else left, left))


def _beyond_context(err, backend, body, prompt, chat):
    """The scheduler's BeyondContext as a 400 naming the field to change: the prompt when it leaves no
    room, else the max tokens asked for."""
    if len(prompt) >= backend.block_size:
        param = "messages" if chat else "prompt"
    else:
        param = "max_completion_tokens" if chat and body.max_completion_tokens is not None else "max_tokens"
    return ApiError(400, str(err), param=param, code="context_length_exceeded")


def _check_n(backend, n):
    """n choices take n rows (or places in the queue) at once: more than the server holds would get 429
    for ever, which a client retries for ever."""
    s = backend.scheduler
    if n > s.capacity:
        raise ApiError(400, f"n={n} can never run here: this server holds at most {s.capacity} choices at once "
                            f"(--max-batch {s.max_batch} + --max-queue {s.max_queue}); ask for n <= {s.capacity}",
                       param="n")


async def _complete(backend, body, prompt, request, chat, fitted=None):
    """``chat``: False for /v1/completions, else the request's ToolPlan (zerollm.serve.tools)."""
    max_tokens = fitted.max_tokens if fitted is not None else _max_tokens(backend, body, prompt)
    grammar = chat.grammar if chat and chat.grammar is not None else await response_grammar(backend, body)
    asked = Choices(body.n, _sampling(body), max_tokens, body.seed, tuple(body.stops()), body.logprob_count(), grammar,
                    chat.stop_ids if chat else frozenset())
    _check_n(backend, body.n)
    try:
        run = backend.submit(prompt, asked)
    except QueueFull as err:
        raise ApiError(429, str(err), "rate_limit_error", code="queue_full",
                       headers={"Retry-After": str(RETRY_AFTER_S)}) from None
    except BeyondContext as err:
        raise _beyond_context(err, backend, body, prompt, chat) from None
    meta = {"id": ("chatcmpl-" if chat else "cmpl-") + uuid.uuid4().hex, "created": int(time.time()),
            "model": backend.name, **({"zerollm": fitted._asdict()} if fitted is not None else {})}
    choices = [_Choice() for _ in range(body.n)]
    if body.stream:
        usage = body.stream_options is not None and body.stream_options.include_usage
        return StreamingResponse(_stream(backend, run, choices, meta, len(prompt), chat, usage),
                                 media_type="text/event-stream", headers={"Cache-Control": "no-cache"})
    async for i, ev in run.events(request.is_disconnected):
        _take(backend, run, choices, i, ev, chat)
    for c in choices:
        if c.finish == "error":
            raise ApiError(500, "the model failed while generating; see the server's log", "server_error")
        if c.finish in (None, "cancelled"):
            raise ApiError(503, f"the request was cancelled ({SHUTDOWN})", "server_error", code="shutting_down")
    return {**_whole(choices, meta, _usage(backend, run, choices, len(prompt), chat), chat),
            **_speculation(backend, run)}


def _take(backend, run, choices, i, ev, chat):
    """Apply one scheduler event to choice i -> the new text piece ('' when nothing new can be shown)."""
    c = choices[i]
    if c.finish is not None:
        return ""
    if isinstance(ev, Done):
        c.tokens = len(run.reqs[i].ids)            # a stop id was generated too
        c.finish = ev.reason                       # stop (an id or a string), length, cancelled, error
        c.note = ev.message if ev.reason == "length" else ""
        ids = run.reqs[i].ids
        if chat and ev.reason == "stop" and ids and ids[-1] in chat.stop_ids:
            ev = ev._replace(text=ev.text + CALL_CLOSE)       # the call's end marker, which the stop id took
    elif ev.logprob is not None:
        c.logprobs.append(_logprob_entry(backend, ev, chat))
    c.text += ev.text
    return ev.text


def _logprob_entry(backend, ev, chat):
    text, raw = backend.token_text(ev.id)
    top = [dict(zip(("token", "logprob", "bytes"), (*backend.token_text(t)[:1], lp, backend.token_text(t)[1])))
           for t, lp in ev.top]
    if chat:
        return {"token": text, "logprob": ev.logprob, "bytes": raw, "top_logprobs": top}
    return {"token": text, "logprob": ev.logprob, "top": {t["token"]: t["logprob"] for t in top}}


def _usage(backend, run, choices, n_prompt, chat):
    """OpenAI's usage: the token counts, prompt_tokens_details.cached_tokens (the prompt tokens the prefix cache
    gave: one prompt for all choices) and, for a chat answer, completion_tokens_details.reasoning_tokens (the
    choices' think blocks, counted in completion_tokens too)."""
    done = sum(c.tokens for c in choices)
    usage = {"prompt_tokens": n_prompt, "completion_tokens": done, "total_tokens": n_prompt + done,
             "prompt_tokens_details": {"cached_tokens": max((r.cached for r in run.reqs), default=0)}}
    if chat:
        thought = sum(reasoning_tokens(backend.tok, r.ids) for r in run.reqs) if chat.thinking else 0
        usage["completion_tokens_details"] = {"reasoning_tokens": thought}
    return usage


def _speculation(backend, run):
    """vLLM's per-request numbers of speculative decoding, as a response's (or the usage chunk's) ``metrics``
    field: tokens guessed and kept over the request's choices; {} when the server does not speculate."""
    if backend.scheduler.features.speculation.method == "off":
        return {}
    drafted, kept = sum(r.drafted for r in run.reqs), sum(r.accepted for r in run.reqs)
    return {"metrics": {"speculative_decoding": {"num_draft_tokens": drafted, "num_accepted_draft_tokens": kept,
                                                 "draft_acceptance_rate": kept / drafted if drafted else 0.0}}}


def _choice_logprobs(c, chat):
    if not c.logprobs:
        return None
    return {"content": c.logprobs} if chat else _completion_logprobs(c.logprobs)


def _completion_logprobs(entries):
    """The legacy completions' logprobs: parallel lists."""
    return {"tokens": [e["token"] for e in entries], "token_logprobs": [e["logprob"] for e in entries],
            "top_logprobs": [e["top"] for e in entries], "text_offset": _offsets(entries)}


def _offsets(entries):
    out, at = [], 0
    for e in entries:
        out.append(at)
        at += len(e["token"])
    return out


def _whole(choices, meta, usage, chat):
    if chat:
        body = [{"index": i, **dict(zip(("message", "finish_reason"), Answer(chat).message(c.text, c.finish))),
                 "logprobs": _choice_logprobs(c, chat), **incomplete_note(c.note)} for i, c in enumerate(choices)]
        return {**meta, "object": "chat.completion", "choices": body, "usage": usage, "system_fingerprint": None}
    body = [{"index": i, "text": c.text, "logprobs": _choice_logprobs(c, chat), "finish_reason": c.finish,
             **incomplete_note(c.note)} for i, c in enumerate(choices)]
    return {**meta, "object": "text_completion", "choices": body, "usage": usage}


async def _stream(backend, run, choices, meta, n_prompt, chat, include_usage):
    """Server-sent events: a first chunk per choice (chat: the role), one per new text piece, one with the
    finish_reason, the usage chunk if asked for, then [DONE]. Leaving (a disconnect) cancels the run."""
    obj = "chat.completion.chunk" if chat else "text_completion"
    extra = {"usage": None} if include_usage else {}
    answers = [Answer(chat) for _ in choices] if chat else []

    def chat_event(i, d, lp, f):
        if lp is None and f is None and len(d) == 1:
            (key, text), = d.items()
            if type(text) is str:
                return framed(i, key, text)
        return sse({**meta, "object": obj, **extra, "choices": [
            {"index": i, "delta": d, "logprobs": lp, "finish_reason": f}]})

    def chunk(i, piece=None, finish=None, logprobs=None):
        if chat:                # reasoning, content and whole tool calls, each its own delta (serve.tools)
            deltas, finish = answers[i].stream(piece, finish)
            events = [(d, logprobs if k == 0 else None, None) for k, d in enumerate(deltas or [{}] * bool(logprobs))]
            events += [({}, None, finish)] if finish is not None else []
            return "".join(chat_event(i, d, lp, f) for d, lp, f in events)
        if logprobs is None and finish is None and piece:
            return framed(i, "text", piece)
        choice = {"index": i, "text": piece or "", "logprobs": logprobs, "finish_reason": finish}
        return sse({**meta, "object": obj, "choices": [choice], **extra})

    framed = _Framed(lambda i, key, text: ({**meta, "object": obj, **extra, "choices": [
        {"index": i, "delta": {key: text}, "logprobs": None, "finish_reason": None}]}) if chat else
        {**meta, "object": obj, "choices": [{"index": i, "text": text, "logprobs": None, "finish_reason": None}],
         **extra})

    try:
        if chat:
            for i in range(len(choices)):
                yield sse({**meta, "object": obj, **extra, "choices": [
                    {"index": i, "delta": {"role": "assistant", "content": ""}, "logprobs": None, "finish_reason": None}]})
        async for batch in run.batches():
            text = "".join(_chunks(backend, run, choices, batch, chat, chunk))
            if text:
                yield text
            if any(c.finish in CUT for c in choices):     # the error event said it: nothing else is complete
                yield STREAM_END
                return
        if include_usage:
            yield sse({**meta, "object": obj, "choices": [], "usage": _usage(backend, run, choices, n_prompt, chat),
                       **_speculation(backend, run)})
        yield STREAM_END
    finally:
        run.cancel()


class _Framed:
    """A stream's text events, each serialised as sse() would, from a frame made once per (choice, field):
    the event's JSON cut where its one text field goes, so each token json-escapes only its own text. A
    frame is the event of a marker text, split at the marker's JSON; a stream whose other fields hold the
    marker too (a model named with a NUL) keeps using sse()."""

    MARK = "\0"

    def __init__(self, event):
        self.event, self.frames = event, {}

    def __call__(self, i, key, text):
        frame = self.frames.get((i, key))
        if frame is None:
            frame = self.frames[i, key] = sse(self.event(i, key, self.MARK)).split(JSON.encode(self.MARK))
        if len(frame) != 2:
            return sse(self.event(i, key, text))
        return frame[0] + JSON.encode(text) + frame[1]


# how a stream ends when its answer cannot be finished: the model failed, or the server is shutting down
CUT = {"error": "the model failed", "cancelled": SHUTDOWN}


def _chunks(backend, run, choices, batch, chat, chunk):
    """The SSE events for a batch of scheduler events: per choice, one with all its new text (and
    logprobs), then one with its finish_reason if it ended. A choice that could not finish (CUT) gets
    OpenAI's error event instead of a finish_reason, which the openai client raises as APIError: no
    chunk says "stop" for an answer that was cut short."""
    for i in dict.fromkeys(i for i, _ in batch):               # choices in order of first appearance
        c = choices[i]
        before, known, pieces = c.finish, len(c.logprobs), []
        for _, ev in (item for item in batch if item[0] == i):
            pieces.append(_take(backend, run, choices, i, ev, chat))
        piece, lp = "".join(pieces), c.logprobs[known:]
        logprobs = ({"content": lp} if chat else _completion_logprobs(lp)) if lp else None
        if piece or logprobs:
            yield chunk(i, piece, None, logprobs)
        if before is None and c.finish in CUT:
            yield stream_cut(CUT[c.finish])
        elif before is None and c.finish is not None:
            yield chunk(i, None, c.finish)
