"""What a request meets before the API sees it, and how it ends if the server stops under it.

    app = Ending(Framing(Guard(api, state, api_key), max_body, body_timeout))    # build_app does this
    uvicorn.Config(app, http=functools.partial(Protocol, header_timeout=10.0), ...)

- ``Protocol``: uvicorn's HTTP/1.1 protocol (h11) with a deadline for a request's headers, and its 400
  for a request h11 cannot parse in OpenAI's error shape.
- ``Framing``: Content-Length beside Transfer-Encoding is a 400 (RFC 9112 §6.1); a body over the cap is a
  413; a body not in within the body deadline is a 408. A response that starts before the body was read
  to its end closes the connection, so the server never reads (drains) a body it refused.
- ``Guard``: 503 from the first shutdown signal on, then 401 without the key, before any body is read.
- ``Ending``: a request that uvicorn cancels (the shutdown's --grace has passed) still ends as
  documented: a 503, or a stream's error event and ``data: [DONE]``.

Errors have OpenAI's shape, ``{"error": {"message", "type", "param", "code"}}``.
"""

import asyncio
import hmac
import http
import json

import h11
from fastapi.responses import JSONResponse
from uvicorn.protocols.http.h11_impl import H11Protocol

RETRY_AFTER_S = 1
CLOSE = (b"connection", b"close")


class ApiError(Exception):
    def __init__(self, status, message, type="invalid_request_error", param=None, code=None, headers=None):
        super().__init__(message)
        self.status, self.message, self.type, self.param, self.code = status, message, type, param, code
        self.headers = headers


def error_body(message, type="invalid_request_error", param=None, code=None):
    return {"error": {"message": message, "type": type, "param": param, "code": code}}


def error_response(err):
    return JSONResponse(error_body(err.message, err.type, err.param, err.code), err.status, headers=err.headers)


# json.dumps(obj, ensure_ascii=False) is this encoder's encode(obj), but builds the encoder on every call: a
# stream makes one event a token
JSON = json.JSONEncoder(ensure_ascii=False)


def sse(obj):
    return f"data: {JSON.encode(obj)}\n\n"


def stream_cut(why):
    """The event a stream gets when its answer ends early (OpenAI's error shape, as the openai client reads it)."""
    return sse(error_body("the answer was cut short: " + why, "server_error"))


STREAM_END = "data: [DONE]\n\n"
SHUTDOWN = "the server is shutting down"


# ----------------------------------------------------------------------------
# the connection: headers on time, and a JSON 400 for what h11 refuses

class Protocol(H11Protocol):
    """uvicorn's h11 protocol, plus: a request's line and headers must be in within ``header_timeout``
    seconds of the connection opening (or of the previous answer), else 408 and the connection is closed
    (closed without a word if nothing at all was sent); a request h11 refuses (a Content-Length that is
    not digits or has two values, a Transfer-Encoding other than chunked, a broken request line) gets
    OpenAI's error shape instead of uvicorn's plain text. Both close the connection."""

    def __init__(self, *args, header_timeout, **kwargs):
        super().__init__(*args, **kwargs)
        self.header_timeout, self._headers_due = header_timeout, None

    def connection_made(self, transport):
        super().connection_made(transport)
        self._await_headers()

    def data_received(self, data):
        super().data_received(data)
        if self.conn.their_state is not h11.IDLE:         # the request's line and headers are in
            self._stop_waiting()

    def on_response_complete(self):
        super().on_response_complete()
        if self.conn.their_state is h11.IDLE and not self.transport.is_closing():   # kept alive: the next one
            self._await_headers()

    def connection_lost(self, exc):
        self._stop_waiting()
        super().connection_lost(exc)

    def send_400_response(self, msg):
        self._refuse(ApiError(400, "the request is not valid HTTP/1.1: check its request line and headers "
                                   "(Content-Length is digits and given once, Transfer-Encoding is only "
                                   "'chunked', headers under 16 KiB)", code="bad_http_request"))

    def _await_headers(self):
        self._stop_waiting()
        self._headers_due = self.loop.call_later(self.header_timeout, self._headers_late)

    def _stop_waiting(self):
        if self._headers_due is not None:
            self._headers_due.cancel()
            self._headers_due = None

    def _headers_late(self):
        self._headers_due = None
        if self.transport.is_closing() or self.conn.their_state is not h11.IDLE:
            return
        if self.conn.trailing_data[0]:                    # a request was begun: say why it is refused
            self._refuse(ApiError(408, f"the request's headers did not arrive within {self.header_timeout:g} s "
                                       "(--header-timeout); send the whole request at once",
                                  code="request_timeout"))
        else:                                             # an idle connection: nothing to answer
            self.transport.close()

    def _refuse(self, err):
        """Write ``err`` as a whole response, bypassing h11 (whose state no longer allows one), and close."""
        body = json.dumps(error_body(err.message, err.type, err.param, err.code)).encode()
        head = (f"HTTP/1.1 {err.status} {http.HTTPStatus(err.status).phrase}\r\ncontent-type: application/json\r\n"
                f"content-length: {len(body)}\r\nconnection: close\r\n\r\n")
        self.transport.write(head.encode() + body)
        self.transport.close()


# ----------------------------------------------------------------------------
# the body: framing, the cap, the deadline, and no draining of a refused body

class Framing:
    """ASGI middleware over the request body (see the module docstring). The cap and the deadline are
    checked as the app reads: a chunked body has no length to check first."""

    def __init__(self, app, max_body, body_timeout):
        self.app, self.max_body, self.body_timeout = app, max_body, body_timeout

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        names = [name for name, _ in scope["headers"]]
        length = int(dict(scope["headers"]).get(b"content-length", b"0"))      # h11 let only digits through
        unread = b"transfer-encoding" in names or length > 0
        seen, due = 0, asyncio.get_running_loop().time() + self.body_timeout

        async def read():
            nonlocal seen, unread
            if not unread:
                return await receive()
            try:
                message = await asyncio.wait_for(receive(), due - asyncio.get_running_loop().time())
            except TimeoutError:
                raise self._late() from None
            seen += len(message.get("body", b""))
            if seen > self.max_body:
                raise self._too_large()
            unread = message["type"] == "http.request" and message.get("more_body", False)
            return message

        async def respond(message):
            if message["type"] == "http.response.start" and unread:     # answered before the body is in:
                message = {**message, "headers": [*message.get("headers", []), CLOSE]}   # close, not drain
            await send(message)

        refused = self._refusal(names, length)
        if refused is not None:
            return await error_response(refused)(scope, receive, respond)
        await self.app(scope, read, respond)

    def _refusal(self, names, length):
        if b"transfer-encoding" in names and b"content-length" in names:
            return ApiError(400, "the request has both Content-Length and Transfer-Encoding, which a proxy in front "
                                 "may read differently (request smuggling, RFC 9112 section 6.1); send one of them",
                            code="bad_http_request")
        if length > self.max_body:
            return self._too_large()
        return None

    def _too_large(self):
        return ApiError(413, f"the request body is over {self.max_body} bytes (--max-body)", code="request_too_large")

    def _late(self):
        return ApiError(408, f"the request body did not arrive within {self.body_timeout:g} s of its headers "
                             "(--body-timeout); send the whole body at once", code="request_timeout")


# ----------------------------------------------------------------------------
# the key and the shutdown

class Guard:
    """ASGI middleware in front of /v1 and /metrics (unless ``metrics_public``): 503 from the first shutdown
    signal on, then 401 without the key. Both come before the body is read, so a client without the key
    gets 401 whatever it sends."""

    def __init__(self, app, state, api_key, metrics_public=False):
        self.app, self.state, self.metrics_public = app, state, metrics_public
        self.key = None if api_key is None else api_key.encode()

    def _guarded(self, path):
        return path == "/v1" or path.startswith("/v1/") or (path == "/metrics" and not self.metrics_public)

    async def __call__(self, scope, receive, send):
        if scope["type"] == "http" and self._guarded(scope["path"]):
            refused = self._refusal(dict(scope["headers"]).get(b"authorization", b""))
            if refused is not None:
                return await error_response(refused)(scope, receive, send)
        await self.app(scope, receive, send)

    def _refusal(self, given):
        if self.state.draining:
            return ApiError(503, SHUTDOWN, "server_error", code="shutting_down",
                            headers={"Retry-After": str(RETRY_AFTER_S)})
        token = given[7:] if given[:7].lower() == b"bearer " else b""
        if self.key is None or hmac.compare_digest(token, self.key):        # constant time
            return None
        return ApiError(401, "invalid or missing API key: send the header 'Authorization: Bearer KEY'",
                        code="invalid_api_key")


class Ending:
    """ASGI middleware, the outermost: uvicorn cancels the requests still running when --grace has passed
    (it cancels a request's task at no other time). Such a request still ends as documented: with a 503 if
    nothing was sent yet, else (a stream) with an error event and ``data: [DONE]``; nothing is logged."""

    def __init__(self, app):
        self.app = app

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        started, done, stream = False, False, False

        async def watched(message):
            nonlocal started, done, stream
            if message["type"] == "http.response.start":
                started = True
                stream = any(k.lower() == b"content-type" and v.startswith(b"text/event-stream")
                             for k, v in message.get("headers", []))
            else:
                done = not message.get("more_body", False)
            await send(message)

        try:
            await self.app(scope, receive, watched)
        except asyncio.CancelledError:
            asyncio.current_task().uncancel()             # this task ends here, with its answer
            if not started:
                err = ApiError(503, f"{SHUTDOWN} and its --grace period has passed: this request was stopped "
                                    "unfinished; send it again once the server is back", "server_error",
                               code="shutting_down", headers={"Connection": "close"})
                await error_response(err)(scope, receive, send)
            elif not done:
                end = (stream_cut(SHUTDOWN) + STREAM_END).encode() if stream else b""
                await send({"type": "http.response.body", "body": end, "more_body": False})
