"""Hostile input for `zerollm serve`: what a probe found, each as the answer a client must get.

One server (--max-batch 2, --max-queue 0, an API key, a 150 kB body cap) for admission, bodies that
cannot be parsed, and the key checked before the body is read; the scheduler's room in this process;
flags refused at startup as processes that exit at once.
"""

import json
import os
import socket
import subprocess
import sys

import httpx
import numpy as np
import pytest

from serve_helpers import ROOT, server, tiny_chat_model
from zerollm.generation.batching import QueueFull, Request, Scheduler
from zerollm.generation.sample import Sampling
from zerollm.io.errors import ZeroLLMError
from zerollm.model.gpt import GPT, GPTConfig

pytestmark = pytest.mark.slow   # a server process per test: not in the fast loop

KEY = "sk-hostile-0123"
AUTH = {"Authorization": f"Bearer {KEY}"}
CHAT = "/v1/chat/completions"
GOOD = {"messages": [{"role": "user", "content": "hi"}], "max_tokens": 2}
MAX_BODY = 150_000


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    return tiny_chat_model(tmp_path_factory.mktemp("hostile"))


@pytest.fixture(scope="module")
def base(folder):
    with server(folder, "--max-batch", "2", "--max-queue", "0", "--api-key", KEY,
                "--max-body", str(MAX_BODY)) as (url, proc):
        yield url
        assert proc.poll() is None, "the server died during the tests"


def _post(base, body, headers=AUTH):
    """POST ``body`` (a dict as JSON, or bytes as they are) to the chat endpoint."""
    content = body if isinstance(body, bytes) else json.dumps(body).encode()
    return httpx.post(base + CHAT, content=content, headers={"Content-Type": "application/json", **headers},
                      timeout=30)


def _still_serving(base):
    assert httpx.post(base + CHAT, json=GOOD, headers=AUTH, timeout=30).status_code == 200


# ----------------------------------------------------------------------------
# room: free rows first, then --max-queue places; an n that can never fit is a 400

def _scheduler(max_batch, max_queue):
    model = GPT(GPTConfig(vocab_size=16, block_size=16, n_layer=1, n_head=1, n_embd=8), seed=0)
    return Scheduler(model, max_batch=max_batch, max_queue=max_queue)


def _request():
    return Request([1, 2], 3, Sampling(0), np.random.default_rng(0), emit=lambda ev: None)


def test_free_rows_take_requests_without_counting_against_the_queue():
    s = _scheduler(max_batch=1, max_queue=1)
    s.submit_all([_request(), _request()])          # n=2 on an idle server: one row, one place
    with pytest.raises(QueueFull, match="--max-queue 1"):
        s.submit(_request())
    s.step()                                         # one joins its row, one still waits: still full
    assert len(s.rows) == 1 and s.busy == 2
    with pytest.raises(QueueFull):
        s.submit(_request())

    none_wait = _scheduler(max_batch=2, max_queue=0)
    none_wait.submit(_request())
    none_wait.submit(_request())
    with pytest.raises(QueueFull):
        none_wait.submit(_request())


def test_requests_are_queued_all_or_none_and_more_than_the_server_holds_never():
    s = _scheduler(max_batch=2, max_queue=1)
    s.submit(_request())
    with pytest.raises(QueueFull):
        s.submit_all([_request(), _request(), _request()])
    assert s.busy == 1                               # none of the three stayed
    with pytest.raises(ZeroLLMError, match="never fit"):
        s.submit_all([_request() for _ in range(4)])


def test_max_queue_0_serves_from_free_rows_and_an_n_that_never_fits_is_a_400(base):
    r = _post(base, {**GOOD, "n": 2})
    assert r.status_code == 200 and len(r.json()["choices"]) == 2, r.text
    r = _post(base, {**GOOD, "n": 3})
    assert r.status_code == 400, r.text
    error = r.json()["error"]
    assert error["param"] == "n" and error["type"] == "invalid_request_error"
    assert "--max-batch 2" in error["message"] and "--max-queue 0" in error["message"]
    _still_serving(base)


# ----------------------------------------------------------------------------
# bodies that cannot be parsed: the reason, and the server keeps serving

def _chunks(data, size=4096):
    """``data`` as a stream, so httpx sends it chunked: no Content-Length for the server to check first."""
    for i in range(0, len(data), size):
        yield data[i:i + size]


def test_a_chunked_body_over_the_cap_is_the_same_413_as_one_with_a_length(base):
    body = json.dumps({**GOOD, "user": "x" * MAX_BODY}).encode()
    with_length = _post(base, body)
    chunked = httpx.post(base + CHAT, content=_chunks(body), headers={"Content-Type": "application/json", **AUTH},
                         timeout=30)
    assert "content-length" not in chunked.request.headers
    assert with_length.status_code == chunked.status_code == 413, chunked.text
    assert chunked.json() == with_length.json() and chunked.json()["error"]["code"] == "request_too_large"
    _still_serving(base)


@pytest.mark.parametrize("body, says", [
    (b"[" * 100_000, "nested too deeply"),
    (b'{"messages": ' + b"[" * 5000 + b"]" * 5000 + b"}", "nested too deeply"),
    (json.dumps(GOOD).encode()[:-1] + b', "seed": 1' + b"0" * 5000 + b"}", "number over"),
    (b'{"messages": "\xff"}', "send JSON in UTF-8"),          # not UTF-8: the message it had
])
def test_a_body_json_cannot_take_says_why(base, body, says):
    r = _post(base, body)
    assert r.status_code == 400, r.text
    error = r.json()["error"]
    assert says in error["message"] and error["type"] == "invalid_request_error"
    _still_serving(base)


# ----------------------------------------------------------------------------
# the API key: one no client can send refuses to start; without it, 401 whatever the body

def _serve(folder, *args, env=None):
    environ = {k: v for k, v in os.environ.items() if k != "ZEROLLM_API_KEY"}
    return subprocess.run([sys.executable, "-m", "zerollm", "serve", "--hf", str(folder), "--port", "0",
                           "--threads", "1", *args], capture_output=True, text=True, timeout=60,
                          env={**environ, "PYTHONPATH": str(ROOT), **(env or {})})


@pytest.mark.parametrize("key, says", [
    ("", "is empty"), ("   ", "is empty"), (" sk-1", "whitespace"), ("sk-1\n", "whitespace"),
    ("ключ", "not printable ASCII"), ("sk\x7f1", "not printable ASCII"),
])
def test_an_api_key_no_client_can_send_refuses_to_start(folder, key, says):
    out = _serve(folder, "--api-key", key)
    assert out.returncode == 1 and out.stderr.count("\n") == 1, out.stderr
    assert says in out.stderr and "--api-key" in out.stderr and "Traceback" not in out.stderr


@pytest.mark.parametrize("name", ["", "  ", " tiny"])
def test_a_model_name_no_client_could_send_refuses_to_start(folder, name):
    """--model-name '' used to fall back to the folder's name without a word."""
    out = _serve(folder, "--model-name", name)
    assert out.returncode == 1 and out.stderr.count("\n") == 1, out.stderr
    assert "--model-name" in out.stderr and "Traceback" not in out.stderr


def test_an_empty_key_in_the_environment_refuses_to_start_too(folder):
    out = _serve(folder, env={"ZEROLLM_API_KEY": ""})
    assert out.returncode == 1 and out.stderr.count("\n") == 1, out.stderr
    assert "$ZEROLLM_API_KEY is empty" in out.stderr


@pytest.mark.parametrize("body", [b'{"messages": [', b"[" * 100_000, json.dumps(GOOD).encode()])
@pytest.mark.parametrize("auth", [{}, {"Authorization": "Bearer wrong"}, {"Authorization": KEY}])
def test_without_the_key_a_bad_body_is_401_not_400(base, body, auth):
    r = _post(base, body, headers=auth)
    assert r.status_code == 401 and r.json()["error"]["code"] == "invalid_api_key", r.text
    _still_serving(base)


# ----------------------------------------------------------------------------
# where to listen: the flag to change, and an IPv6 URL a browser can open

@pytest.mark.parametrize("host", ["nosuch.invalid", "192.0.2.1"])      # no such name; TEST-NET, not ours
def test_a_host_it_cannot_listen_on_names_host_not_port(folder, host):
    out = _serve(folder, "--host", host, "--api-key", KEY)
    assert out.returncode == 1 and out.stderr.count("\n") == 1, out.stderr
    assert f"could not listen on {host}:0" in out.stderr and f"--host {host}" in out.stderr
    assert "try another --host" in out.stderr and "--port" not in out.stderr


def _ipv6_loopback():
    try:
        with socket.socket(socket.AF_INET6) as s:
            s.bind(("::1", 0))
        return True
    except OSError:
        return False


@pytest.mark.skipif(not _ipv6_loopback(), reason="this machine has no IPv6 loopback")
def test_an_ipv6_host_is_bracketed_in_the_url(folder):
    with server(folder, "--host", "::1") as (url, proc):
        assert url.startswith("http://[::1]:")
        assert httpx.get(url + "/health", timeout=30).json()["status"] == "ok"


def test_a_char_models_missing_characters_are_told_as_an_api_client_can_act_on():
    """The tokenizer's own message advises Python calls (tokenizer.with_chars(...)): no use over HTTP."""
    from zerollm.data import chat
    from zerollm.io.errors import ZeroLLMError
    from zerollm.model.gpt import GPT, GPTConfig
    from zerollm.serve.backend import Backend
    from zerollm.tokenizers import CharTokenizer
    tok = chat.prepare_tokenizer(CharTokenizer.train("abc \n"))
    model = GPT(GPTConfig(vocab_size=tok.vocab_size, block_size=32, n_layer=1, n_head=2, n_embd=16), seed=0)
    backend = Backend(model, tok, name="char")                    # not started: only its text side is used
    assert backend.text_prompt("abc") == tok.encode("abc")
    for encode in (lambda: backend.text_prompt("abz"),
                   lambda: backend.chat_prompt([{"role": "user", "content": "zz"}])):
        with pytest.raises(ZeroLLMError) as err:
            encode()
        said = str(err.value)
        assert "'z'" in said and "leave these out" in said and "with_chars" not in said, said


@pytest.mark.parametrize("kind", ["text/plain", "application/x-www-form-urlencoded"])   # curl -d without -H
def test_a_json_body_sent_as_another_type_is_told_to_say_json(base, kind):
    r = httpx.post(base + CHAT, content=json.dumps(GOOD).encode(), headers={"Content-Type": kind, **AUTH},
                   timeout=30)
    assert r.status_code == 400 and "Content-Type: application/json" in r.json()["error"]["message"], r.text
    assert kind in r.json()["error"]["message"]
    _still_serving(base)


def test_max_tokens_and_max_completion_tokens_that_disagree_are_a_400(base):
    r = _post(base, {**GOOD, "max_tokens": 2, "max_completion_tokens": 3})
    assert r.status_code == 400 and "disagree" in r.json()["error"]["message"], r.text
    assert r.json()["error"]["param"] == "max_completion_tokens"
    assert _post(base, {**GOOD, "max_tokens": 2, "max_completion_tokens": 2}).status_code == 200
