"""``zerollm serve``: an OpenAI-compatible HTTP server with continuous batching, and a chat page at /.

    zerollm serve --ckpt runs/tang-sft                       # http://127.0.0.1:8000, the page at /
    curl http://127.0.0.1:8000/v1/chat/completions -H 'Content-Type: application/json' \\
         -d '{"messages": [{"role": "user", "content": "藏头诗：春夏秋冬"}], "max_tokens": 40}'

Needs ``pip install "zerollm[serve]"`` (FastAPI + uvicorn, and uvloop for the event loop where it
installs; without it asyncio's own loop serves the same answers, more slowly). Binds 127.0.0.1; any
other --host needs --api-key (or $ZEROLLM_API_KEY). SIGTERM or Ctrl-C: stop accepting, let what is running finish for up
to --grace seconds, end the rest (a 503, or a stream's error event and [DONE]), exit 0.
"""

import contextlib
import errno
import functools
import ipaddress
import logging
import os
import signal
import socket
import sys

from zerollm.io.argtypes import Range
from zerollm.model.budget import add_force_argument
from zerollm.engine import add_engine_argument, engine_for, use_engine
from zerollm.io.errors import ZeroLLMError
from zerollm.cli.source import add_source_arguments, load_source
from zerollm.engine.threads import add_threads_argument, limit_threads

KEY_ENV = "ZEROLLM_API_KEY"


def add_arguments(p):
    add_source_arguments(p)
    p.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1: this machine only)")
    p.add_argument("--port", type=Range(int, 0, 65535), default=8000, help="port (default 8000; 0 = any free one)")
    p.add_argument("--api-key", default=None,
                   help=f"require 'Authorization: Bearer KEY' on /v1 (default: ${KEY_ENV}, else none)")
    p.add_argument("--model-name", default=None, help="the model's id in the API (default: the directory's name)")
    p.add_argument("--max-batch", type=Range(int, 1, 4096), default=16, help="rows in one forward pass (default 16)")
    p.add_argument("--max-queue", type=Range(int, 0, 1 << 20), default=64,
                   help="requests that may wait while all --max-batch rows are busy; more get 429 "
                        "(default 64; 0: none wait)")
    p.add_argument("--max-body", type=Range(int, 1024, 1 << 30), default=1 << 20,
                   help="largest request body in bytes (default 1 MiB); larger ones get 413")
    p.add_argument("--grace", type=Range(float, 0, 600), default=5.0,
                   help="seconds a shutdown waits for running requests (default 5)")
    p.add_argument("--header-timeout", type=Range(float, 0.1, 3600), default=10.0,
                   help="seconds a client has to send a request's line and headers, from connecting or from "
                        "its previous answer; later: 408 and the connection is closed (default 10)")
    p.add_argument("--body-timeout", type=Range(float, 0.1, 3600), default=30.0,
                   help="seconds a client has to send a request's whole body after its headers; later: 408 "
                        "and the connection is closed (default 30)")
    add_feature_arguments(p)
    add_force_argument(p)
    add_threads_argument(p)
    add_engine_argument(p, prefer_fast=True)


def serve_engine(args):
    """The engine zerollm serve runs on: --engine, else $ZEROLLM_ENGINE, else 'fast' where numba is installed
    (more tokens/s at 1, 4 and 16 clients on both shapes measured in docs/serving.md), else 'numpy'."""
    return engine_for(args, prefer_fast=True)


STEP_TOKENS = 64          # docs/serving.md, "Chunked prefill": how this default was chosen
STREAM_INTERVAL_MS = 16   # docs/serving.md, "The HTTP path": a page shows at most one update a frame


def add_feature_arguments(p):
    """The serving engine's features (docs/serving.md): each can be switched off; the defaults give the same
    greedy tokens as without them."""
    p.add_argument("--prefix-cache", type=Range(float, 0, 1 << 20), default=256, metavar="MIB",
                   help="MiB of prompt keys and values kept so that later prompts beginning alike skip that part "
                        "of their prefill (default 256; 0: off)")
    # --prefill-chunk: the flag's earlier name (a chunk of one prompt), kept so that scripts written for it run
    p.add_argument("--max-num-batched-tokens", "--prefill-chunk", type=Range(int, 0, 1 << 20), default=STEP_TOKENS, metavar="TOKENS",
                   help="tokens one step puts through the model: the running streams' next tokens first, then "
                        "chunks of waiting prompts, so a long prompt does not stall them (vLLM's name; default "
                        f"{STEP_TOKENS}; 0: each prompt whole at once)")
    p.add_argument("--speculate", choices=("off", "ngram"), default="off",
                   help="guess tokens by prompt lookup and check them in one forward: the same tokens at "
                        "greedy, the same distribution when sampling (default off: it pays on repetitive text)")
    p.add_argument("--speculate-tokens", type=Range(int, 1, 64), default=4,
                   help="tokens guessed per step with --speculate ngram or --draft (default 4)")
    p.add_argument("--draft", default=None, metavar="RUN",
                   help="a smaller model with the same tokenizer (a zerollm run, step or model directory) whose "
                        "greedy guesses the served model checks, --speculate-tokens at a time")
    p.add_argument("--stream-interval", type=Range(float, 0, 10_000), default=STREAM_INTERVAL_MS, metavar="MS",
                   help="milliseconds between a streamed answer's chunks at least: tokens that come sooner go "
                        "together into the next chunk; the first token and the end go at once (default "
                        f"{STREAM_INTERVAL_MS:g}: a 60 Hz screen's frame; 0: a chunk per token)")
    p.add_argument("--metrics-public", action="store_true",
                   help="serve GET /metrics without the API key (default: it needs the key as /v1 does)")


def features_of(args, draft=None):
    """The scheduler's Features (zerollm.generation.batching) the flags describe; ``draft``: the --draft model."""
    from zerollm.generation.batching import Features
    from zerollm.generation.speculate import Speculation
    method = "draft" if draft is not None else args.speculate
    return Features(prefix_cache=int(args.prefix_cache * (1 << 20)), step_tokens=args.max_num_batched_tokens or None,
                    speculation=Speculation(method, args.speculate_tokens), draft=draft)


def open_draft(args, model, tok):
    """The --draft model, refused at startup when it cannot guess for the served one (check_draft)."""
    if args.draft is None:
        return None
    if args.speculate != "off":
        raise ZeroLLMError(f"--draft and --speculate {args.speculate} are two ways to guess: give one of them")
    from zerollm.interop.opening import Source, open_model
    from zerollm.serve.backend import check_draft
    opened = open_model(Source(ckpt=args.draft), prog="zerollm serve --draft")
    check_draft(model, tok, opened.model, opened.tokenizer, args.draft)
    return opened.model.eval()


def _name_of(path):
    """The default model id: the directory's (or the GGUF file's) name, without .gguf."""
    name = os.path.basename(os.path.normpath(path))
    return name[:-len(".gguf")] if name.lower().endswith(".gguf") else name


def api_key_of(args):
    """--api-key, else $ZEROLLM_API_KEY, else None; a key no HTTP client can send is refused: empty,
    whitespace around it (HTTP drops it from a header), or a character that is not printable ASCII."""
    key, name = (args.api_key, "--api-key") if args.api_key is not None else (os.environ.get(KEY_ENV), f"${KEY_ENV}")
    if key is None:
        return None
    if not key.strip():
        unset = f", or unset {KEY_ENV}" if name != "--api-key" else ""
        raise ZeroLLMError(f"{name} is empty: give the key clients will send as 'Authorization: Bearer KEY'{unset}")
    if key != key.strip():
        raise ZeroLLMError(f"{name} begins or ends with whitespace, which HTTP drops from headers: remove it")
    odd = next((c for c in key if not " " <= c <= "~"), None)
    if odd is not None:
        raise ZeroLLMError(f"{name} holds {odd!r}, which is not printable ASCII, so HTTP clients cannot send it "
                           "in a header; use letters, digits and punctuation")
    return key


def check_host(host, api_key):
    """A server reachable from other machines must ask for a key."""
    if api_key:
        return
    with contextlib.suppress(ValueError):
        if ipaddress.ip_address(host).is_loopback:
            return
    if host == "localhost":
        return
    raise ZeroLLMError(f"--host {host} makes the server reachable from other machines, so it needs --api-key KEY "
                       f"(or ${KEY_ENV}); or keep the default --host 127.0.0.1")


def run(args):
    if args.model_name is not None and (not args.model_name.strip() or args.model_name != args.model_name.strip()):
        raise ZeroLLMError(f"--model-name {args.model_name!r}: give the id clients send as \"model\" (no spaces "
                           "around it), or leave the flag out to use the folder's name")
    api_key = api_key_of(args)
    check_host(args.host, api_key)
    try:
        import uvicorn
        from zerollm.serve.api import build_app
        from zerollm.serve.backend import Backend
        from zerollm.serve.guard import Protocol
    except ImportError as err:
        raise ZeroLLMError(f"zerollm serve needs FastAPI, uvicorn and prometheus-client ({err}); install them with "
                           "pip install \"zerollm[serve]\"") from None
    # the engine for this command only: `zerollm serve` called in a process that goes on (a test) leaves it as it was
    with use_engine(serve_engine(args)), limit_threads(args.threads):
        model, tok = load_source(args, "zerollm serve")
        name = args.model_name if args.model_name is not None else _name_of(args.ckpt or args.hf or args.gguf)
        backend = Backend(model, tok, name=name, max_batch=args.max_batch, max_queue=args.max_queue,
                          features=features_of(args, open_draft(args, model, tok)),
                          stream_interval=args.stream_interval / 1000)
        app = build_app(backend, api_key=api_key, max_body=args.max_body, body_timeout=args.body_timeout,
                        metrics_public=args.metrics_public)
        # loop "auto": uvloop where it is installed (the serve extra), else asyncio's own loop; a streamed token
        # wakes the loop from the scheduler's thread, which costs less on uvloop (docs/serving.md, "The HTTP path")
        config = uvicorn.Config(app, host=args.host, port=args.port, log_level="warning", lifespan="off",
                                timeout_graceful_shutdown=args.grace, ws="none", loop="auto",
                                http=functools.partial(Protocol, header_timeout=args.header_timeout))  # h11: guard.py
        server = _server(uvicorn, config, app)
        backend.warm_up()                     # the engine's first calls before listening, not in a client's answer
        backend.start()
        try:
            server.run()
        finally:
            backend.close()
    if not server.started:
        raise ZeroLLMError(_bind_failure(args.host, args.port, getattr(server, "bind_error", None)))
    print("zerollm serve: stopped", file=sys.stderr)
    return 0


def _bind_failure(host, port, err):
    """The one line for a server that could not listen, with the flag to change: --host for a name that
    does not resolve or an address this machine does not have, --port for one in use or reserved."""
    where = f"could not listen on {url_host(host)}:{port} ({err or 'no reason given'})"
    code = getattr(err, "errno", None)
    if isinstance(err, socket.gaierror):
        return f"{where}: --host {host} is not a name or address this machine can resolve; try another --host"
    if code == errno.EADDRNOTAVAIL:
        return f"{where}: --host {host} is not an address of this machine; try another --host"
    if code == errno.EADDRINUSE:
        return f"{where}; try another --port"
    if code == errno.EACCES:
        return f"{where}: ports below 1024 need privileges; try a --port above 1023"
    return f"{where}; check --host and --port"


def url_host(host):
    """An IPv6 address goes in brackets in a URL: http://[::1]:8000."""
    return f"[{host}]" if ":" in host else host


def _server(uvicorn, config, app):
    """uvicorn's Server, told to answer 503 from the first signal on, to say where it listens, and not to
    re-raise the signal once it has shut down (so a SIGTERM ends with exit code 0)."""

    class Server(uvicorn.Server):
        def handle_exit(self, sig, frame):
            app.state.draining = True
            super().handle_exit(sig, frame)

        @contextlib.contextmanager
        def capture_signals(self):
            old = {s: signal.signal(s, self.handle_exit) for s in (signal.SIGINT, signal.SIGTERM)}
            try:
                yield
            finally:
                for s, handler in old.items():
                    signal.signal(s, handler)

        async def startup(self, sockets=None):
            log = logging.getLogger("uvicorn.error")

            def keep(record):             # uvicorn's own "[Errno 98] ..." line goes into our one line instead
                if record.levelno >= logging.ERROR:
                    self.bind_error = record.msg if isinstance(record.msg, OSError) else record.getMessage()
                    return False
                return True
            log.addFilter(keep)
            try:
                await super().startup(sockets)
            except SystemExit:            # uvicorn could not bind
                self.should_exit = True
                return
            finally:
                log.removeFilter(keep)
            host, port = self.servers[0].sockets[0].getsockname()[:2]
            print(f"zerollm serve: serving {app.state.backend.name!r} on http://{url_host(host)}:{port} "
                  "(the chat page at /, the API at /v1)", file=sys.stderr, flush=True)

        async def shutdown(self, sockets=None):
            log = logging.getLogger("uvicorn.error")

            def say(record):              # uvicorn's "Cancel 3 running task(s), ..." said as what a client sees
                if record.levelno >= logging.ERROR and str(record.msg).startswith("Cancel "):
                    print(f"zerollm serve: --grace {config.timeout_graceful_shutdown:g} s passed; ending "
                          f"{record.args[0]} request(s) unfinished (a 503, or a stream's error event and [DONE])",
                          file=sys.stderr, flush=True)
                    return False
                return True
            log.addFilter(say)
            try:
                await super().shutdown(sockets)
            finally:
                log.removeFilter(say)

    return Server(config)
