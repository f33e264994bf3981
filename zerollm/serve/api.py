"""The OpenAI-compatible HTTP API: /v1/models, /v1/chat/completions, /v1/completions, /health, and the
chat page at /.

    app = build_app(backend, api_key=None, max_body=1 << 20)     # then: uvicorn.run(app, ...)

Errors have OpenAI's shape, {"error": {"message", "type", "param", "code"}}, and status: 400 a bad
request (bad JSON, a wrong type, an unknown field, beyond the context), 401 a missing or wrong API
key, 404 an unknown model or route, 413 a body over the cap, 429 no free row or place in the queue (with Retry-After),
503 shutting down. Streams are server-sent events in OpenAI's chunk format, ending ``data: [DONE]``.
"""

import hmac
import json
import sys
import time
import uuid
from pathlib import Path

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import HTMLResponse, JSONResponse, StreamingResponse
from starlette.exceptions import HTTPException

from zerollm.io.errors import ZeroLLMError
from zerollm.generation.batching import Done, QueueFull
from zerollm.generation.sample import Sampling
from zerollm.serve.schemas import ChatRequest, CompletionRequest
from zerollm.serve.text import TextStream

RETRY_AFTER_S = 1
PAGE = Path(__file__).with_name("page.html")


class ApiError(Exception):
    def __init__(self, status, message, type="invalid_request_error", param=None, code=None, headers=None):
        super().__init__(message)
        self.status, self.message, self.type, self.param, self.code = status, message, type, param, code
        self.headers = headers


def error_body(message, type="invalid_request_error", param=None, code=None):
    return {"error": {"message": message, "type": type, "param": param, "code": code}}


def _error_response(err):
    return JSONResponse(error_body(err.message, err.type, err.param, err.code), err.status, headers=err.headers)


# ----------------------------------------------------------------------------
# the app

def build_app(backend, *, api_key=None, max_body=1 << 20):
    app = FastAPI(title="zerollm", docs_url=None, redoc_url=None, openapi_url=None)
    app.state.backend, app.state.draining = backend, False
    app.add_middleware(BodyLimit, max_body=max_body)
    app.add_middleware(Guard, state=app.state, api_key=api_key)       # the outermost: before any body is read
    _add_error_handlers(app)

    @app.get("/health")
    async def health():
        s = backend.scheduler
        return {"status": "draining" if app.state.draining else "ok", "active": len(s.rows),
                "waiting": len(s.waiting), "max_batch": s.max_batch}

    @app.get("/", response_class=HTMLResponse)
    async def page():
        return HTMLResponse(PAGE.read_text(encoding="utf-8").replace("@MODEL@", json.dumps(backend.name)
                                                                      .replace("<", "\\u003c")))

    @app.get("/v1/models")
    async def models():
        return {"object": "list", "data": [_model_card(backend)]}

    @app.get("/v1/models/{name}")
    async def model(name: str):
        _check_model(backend, name)
        return _model_card(backend)

    @app.post("/v1/chat/completions")
    async def chat_completions(body: ChatRequest, request: Request):
        _check_model(backend, body.model)
        try:
            prompt = backend.chat_prompt([{"role": m.role, "content": m.text()} for m in body.messages])
        except ZeroLLMError as err:
            raise ApiError(400, str(err), param="messages") from None
        return await _complete(backend, body, prompt, request, chat=True)

    @app.post("/v1/completions")
    async def completions(body: CompletionRequest, request: Request):
        _check_model(backend, body.model)
        prompt = backend.text_prompt(body.prompt)
        if not prompt:
            raise ApiError(400, "the prompt encodes to no tokens", param="prompt")
        return await _complete(backend, body, prompt, request, chat=False)

    return app


def _model_card(backend):
    return {"id": backend.name, "object": "model", "created": 0, "owned_by": "zerollm"}


def _check_model(backend, name):
    if name is not None and name != backend.name:
        raise ApiError(404, f"the model {name!r} does not exist here; this server serves {backend.name!r}",
                       param="model", code="model_not_found")


# ----------------------------------------------------------------------------
# errors

def _add_error_handlers(app):
    @app.exception_handler(ApiError)
    async def api_error(request, err):
        return _error_response(err)

    @app.exception_handler(RequestValidationError)
    async def invalid(request, err):
        kind = request.headers.get("content-type", "")
        if request.method == "POST" and "json" not in kind.lower():     # FastAPI read the body as text
            return _error_response(ApiError(400, f"the body must be JSON, sent with the header Content-Type: "
                                                 f"application/json (this one came as {kind or 'no type'!r})"))
        return _error_response(validation_error(err.errors()))

    @app.exception_handler(HTTPException)
    async def http_error(request, err):
        if err.status_code == 400:
            return _error_response(unreadable_body(err.__cause__))
        message = {404: f"no route {request.method} {request.url.path}", 405: "method not allowed"}
        return _error_response(ApiError(err.status_code, message.get(err.status_code, str(err.detail))))

    @app.exception_handler(ZeroLLMError)
    async def refused(request, err):
        return _error_response(ApiError(400, str(err)))


def validation_error(errors):
    """pydantic's first complaint as one OpenAI error that names the field."""
    e = errors[0]
    loc = [str(x) for x in e.get("loc", ()) if x != "body"]
    param = ".".join(loc) or None
    if e["type"] == "json_invalid":
        return ApiError(400, f"the request body is not valid JSON ({e.get('ctx', {}).get('error', e['msg'])})")
    if e["type"] == "extra_forbidden":
        return ApiError(400, f"unsupported field {param!r}: zerollm serve does not implement it; leave it out",
                        param=param, code="unsupported_parameter")
    if e["type"] == "missing" and not loc:
        return ApiError(400, "the request needs a JSON object body")
    if e["type"] == "missing":
        return ApiError(400, f"missing field {param!r}", param=param)
    return ApiError(400, f"{param or 'body'}: {_reason(e)}", param=param, code="invalid_value")


def _reason(e):
    """pydantic's message without the "Value error, " (or "Assertion failed, ") it puts before the text a
    validator raised: the client reads our words, not pydantic's error class."""
    msg = str(e["msg"])
    for prefix in ("Value error, ", "Assertion failed, "):
        if msg.startswith(prefix):
            return msg[len(prefix):]
    return msg


def unreadable_body(cause):
    """FastAPI's one 400 for a body json.loads could not take (it keeps the reason as __cause__) -> why."""
    if isinstance(cause, _TooLarge):               # a body without Content-Length, read past --max-body
        return cause.error
    if isinstance(cause, RecursionError):
        return ApiError(400, "the request body's JSON is nested too deeply (about a thousand arrays or "
                             "objects inside each other); no field here needs more than a few levels")
    if isinstance(cause, ValueError) and not isinstance(cause, UnicodeError) and "digits" in str(cause):
        return ApiError(400, f"the request body holds a number over {sys.get_int_max_str_digits()} digits "
                             "long; no field here takes one")
    return ApiError(400, "the request body could not be read: send JSON in UTF-8")


class Guard:
    """ASGI middleware in front of /v1: 503 from the first shutdown signal on, then 401 without the key.
    Both come before the body is read, so a client without the key gets 401 whatever it sends."""

    def __init__(self, app, state, api_key):
        self.app, self.state = app, state
        self.key = None if api_key is None else api_key.encode()

    async def __call__(self, scope, receive, send):
        if scope["type"] == "http" and (scope["path"] == "/v1" or scope["path"].startswith("/v1/")):
            refused = self._refusal(dict(scope["headers"]).get(b"authorization", b""))
            if refused is not None:
                return await _error_response(refused)(scope, receive, send)
        await self.app(scope, receive, send)

    def _refusal(self, given):
        if self.state.draining:
            return ApiError(503, "the server is shutting down", "server_error", code="shutting_down",
                            headers={"Retry-After": str(RETRY_AFTER_S)})
        token = given[7:] if given[:7].lower() == b"bearer " else b""
        if self.key is None or hmac.compare_digest(token, self.key):        # constant time
            return None
        return ApiError(401, "invalid or missing API key: send the header 'Authorization: Bearer KEY'",
                        code="invalid_api_key")


class BodyLimit:
    """ASGI middleware: a request body over ``max_body`` bytes gets 413 before the app reads it all."""

    def __init__(self, app, max_body):
        self.app, self.max_body = app, max_body

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        length = dict(scope["headers"]).get(b"content-length")
        if length is not None and (not length.isdigit() or int(length) > self.max_body):
            return await self._too_large(scope, receive, send)
        seen = 0

        async def limited():
            nonlocal seen
            message = await receive()
            seen += len(message.get("body", b""))
            if seen > self.max_body:
                raise _TooLarge(self.max_body)
            return message
        try:
            await self.app(scope, limited, send)
        except _TooLarge:                          # read by something other than FastAPI's body parsing
            await self._too_large(scope, receive, send)

    async def _too_large(self, scope, receive, send):
        await _error_response(_TooLarge(self.max_body).error)(scope, receive, send)


class _TooLarge(Exception):
    """A body read past --max-body; FastAPI turns it into an HTTPException 400 with this as __cause__."""

    def __init__(self, max_body):
        super().__init__(max_body)
        self.error = ApiError(413, f"the request body is over {max_body} bytes (--max-body)",
                              code="request_too_large")


# ----------------------------------------------------------------------------
# completions

class _Choice:
    """One answer being put together: its text (stop strings cut out), token count, logprobs, ending."""

    def __init__(self, backend, stops):
        self.text, self.tokens, self.logprobs, self.finish = TextStream(backend.tok, stops), 0, [], None


def _sampling(body):
    try:
        return Sampling(body.temperature, body.top_k, None if body.top_p >= 1 else body.top_p, body.min_p,
                        body.repetition_penalty, body.presence_penalty, body.frequency_penalty)
    except ZeroLLMError as err:
        raise ApiError(400, str(err)) from None


def _max_tokens(backend, body, prompt, chat):
    room = backend.block_size - len(prompt)
    if room < 1:
        raise ApiError(400, f"the prompt is {len(prompt)} tokens but the model's context is {backend.block_size}: "
                            "no room for an answer; shorten it", param="messages" if chat else "prompt",
                       code="context_length_exceeded")
    n = body.new_tokens()
    if n is None:
        return room
    if n > room:
        name = "max_completion_tokens" if chat and body.max_completion_tokens is not None else "max_tokens"
        raise ApiError(400, f"{name}={n} does not fit: the prompt is {len(prompt)} tokens and the context "
                            f"{backend.block_size}, so at most {room} new tokens", param=name,
                       code="context_length_exceeded")
    return n


def _check_n(backend, n):
    """n choices take n rows (or places in the queue) at once: more than the server holds would get 429
    for ever, which a client retries for ever."""
    s = backend.scheduler
    if n > s.capacity:
        raise ApiError(400, f"n={n} can never run here: this server holds at most {s.capacity} choices at once "
                            f"(--max-batch {s.max_batch} + --max-queue {s.max_queue}); ask for n <= {s.capacity}",
                       param="n")


async def _complete(backend, body, prompt, request, chat):
    sampling, n_new = _sampling(body), _max_tokens(backend, body, prompt, chat)
    _check_n(backend, body.n)
    try:
        run = backend.submit(prompt, n=body.n, sampling=sampling, seed=body.seed, max_tokens=n_new,
                             top_logprobs=body.logprob_count())
    except QueueFull as err:
        raise ApiError(429, str(err), "rate_limit_error", code="queue_full",
                       headers={"Retry-After": str(RETRY_AFTER_S)}) from None
    meta = {"id": ("chatcmpl-" if chat else "cmpl-") + uuid.uuid4().hex, "created": int(time.time()),
            "model": backend.name}
    choices = [_Choice(backend, body.stops()) for _ in range(body.n)]
    if body.stream:
        usage = body.stream_options is not None and body.stream_options.include_usage
        return StreamingResponse(_stream(backend, run, choices, meta, len(prompt), chat, usage),
                                 media_type="text/event-stream", headers={"Cache-Control": "no-cache"})
    async for i, ev in run.events(request.is_disconnected):
        _take(backend, run, choices, i, ev, chat)
    for c in choices:
        if c.finish == "error":
            raise ApiError(500, "the model failed while generating; see the server's log", "server_error")
        if c.finish is None:
            raise ApiError(503, "the request was cancelled (the server is shutting down)", "server_error")
    return _whole(choices, meta, len(prompt), chat)


def _take(backend, run, choices, i, ev, chat):
    """Apply one scheduler event to choice i -> the new text piece ('' when nothing new can be shown)."""
    c = choices[i]
    if c.finish is not None:
        return ""
    if isinstance(ev, Done):
        piece = c.text.flush()
        c.tokens += ev.reason == "stop"            # the stop id was generated too
        c.finish = "stop" if c.text.stopped else ev.reason       # stop, length, cancelled, error
        return piece
    c.tokens += 1
    if ev.logprob is not None:
        c.logprobs.append(_logprob_entry(backend, ev, chat))
    piece = c.text.push(ev.id)
    if c.text.stopped:
        c.finish = "stop"
        run.cancel(i)
    return piece


def _logprob_entry(backend, ev, chat):
    text, raw = backend.token_text(ev.id)
    top = [dict(zip(("token", "logprob", "bytes"), (*backend.token_text(t)[:1], lp, backend.token_text(t)[1])))
           for t, lp in ev.top]
    if chat:
        return {"token": text, "logprob": ev.logprob, "bytes": raw, "top_logprobs": top}
    return {"token": text, "logprob": ev.logprob, "top": {t["token"]: t["logprob"] for t in top}}


def _usage(choices, n_prompt):
    done = sum(c.tokens for c in choices)
    return {"prompt_tokens": n_prompt, "completion_tokens": done, "total_tokens": n_prompt + done}


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


def _whole(choices, meta, n_prompt, chat):
    if chat:
        body = [{"index": i, "message": {"role": "assistant", "content": c.text.text},
                 "logprobs": _choice_logprobs(c, chat), "finish_reason": c.finish} for i, c in enumerate(choices)]
        return {**meta, "object": "chat.completion", "choices": body, "usage": _usage(choices, n_prompt),
                "system_fingerprint": None}
    body = [{"index": i, "text": c.text.text, "logprobs": _choice_logprobs(c, chat), "finish_reason": c.finish}
            for i, c in enumerate(choices)]
    return {**meta, "object": "text_completion", "choices": body, "usage": _usage(choices, n_prompt)}


def _sse(obj):
    return f"data: {json.dumps(obj, ensure_ascii=False)}\n\n"


async def _stream(backend, run, choices, meta, n_prompt, chat, include_usage):
    """Server-sent events: a first chunk per choice (chat: the role), one per new text piece, one with the
    finish_reason, the usage chunk if asked for, then [DONE]. Leaving (a disconnect) cancels the run."""
    obj = "chat.completion.chunk" if chat else "text_completion"
    extra = {"usage": None} if include_usage else {}

    def chunk(i, piece=None, finish=None, logprobs=None):
        if chat:
            delta = {} if piece is None else {"content": piece}
            choice = {"index": i, "delta": delta, "logprobs": logprobs, "finish_reason": finish}
        else:
            choice = {"index": i, "text": piece or "", "logprobs": logprobs, "finish_reason": finish}
        return _sse({**meta, "object": obj, "choices": [choice], **extra})

    try:
        if chat:
            for i in range(len(choices)):
                yield _sse({**meta, "object": obj, **extra, "choices": [
                    {"index": i, "delta": {"role": "assistant", "content": ""}, "logprobs": None, "finish_reason": None}]})
        async for batch in run.batches():
            text = "".join(_chunks(backend, run, choices, batch, chat, chunk))
            if text:
                yield text
        if include_usage:
            yield _sse({**meta, "object": obj, "choices": [], "usage": _usage(choices, n_prompt)})
        yield "data: [DONE]\n\n"
    finally:
        run.cancel()


def _chunks(backend, run, choices, batch, chat, chunk):
    """The SSE events for a batch of scheduler events: per choice, one with all its new text (and
    logprobs), then one with its finish_reason if it ended."""
    for i in dict.fromkeys(i for i, _ in batch):               # choices in order of first appearance
        c = choices[i]
        before, known, pieces = c.finish, len(c.logprobs), []
        for _, ev in (item for item in batch if item[0] == i):
            pieces.append(_take(backend, run, choices, i, ev, chat))
        piece, lp = "".join(pieces), c.logprobs[known:]
        logprobs = ({"content": lp} if chat else _completion_logprobs(lp)) if lp else None
        if piece or logprobs:
            yield chunk(i, piece, None, logprobs)
        if before is None and c.finish is not None:
            if c.finish in ("error", "cancelled"):
                why = "the model failed" if c.finish == "error" else "the server is shutting down"
                yield _sse(error_body("the answer was cut short: " + why, "server_error"))
                c.finish = "stop"
            yield chunk(i, None, c.finish)
