"""`zerollm serve` as a real process on 127.0.0.1, spoken to with the official `openai` client and httpx.

One server for most tests (started once for the module) and a second, tight one (--max-batch 1,
--max-queue 1, an API key, a small body cap) for 401, 413, 429, a disconnect and SIGTERM.
"""

import concurrent.futures
import json
import random
import signal
import subprocess
import sys
import threading
import time

import httpx
import openai
import pytest

from serve_helpers import bare_env, greedy_reference, seeds, server, tiny_chat_model
from zerollm.generation.display import printable
from zerollm.generation.text import TextStream
from zerollm.tokenizers import ByteTokenizer

KEY = "sk-test-0123456789"


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory):
    return tiny_chat_model(tmp_path_factory.mktemp("serve"))


@pytest.fixture(scope="module")
def base(model_dir):
    with server(model_dir, "--max-batch", "8", "--max-queue", "64") as (url, proc):
        yield url
        assert proc.poll() is None, "the server died during the tests"


@pytest.fixture(scope="module")
def client(base):
    return openai.OpenAI(base_url=base + "/v1", api_key="unused", max_retries=0, timeout=60)


def _chat(client, text, **kw):
    return client.chat.completions.create(model="tiny-chat", messages=[{"role": "user", "content": text}], **kw)


# ----------------------------------------------------------------------------
# the API, with the openai client

def test_models_list(client):
    assert [m.id for m in client.models.list()] == ["tiny-chat"]


def as_sample_prints(choice):
    """The text `zerollm sample` prints for the tokens of an API answer (asked with logprobs=True): the API
    sends bytes that are not UTF-8 as U+FFFD, as decoders do, and the terminal shows them as \\xNN."""
    raw = b"".join(bytes(t.bytes) for t in choice.logprobs.content)
    assert choice.message.content == raw.decode("utf-8", "replace")
    return printable(raw.decode("utf-8", "backslashreplace")) + "\n"


def test_greedy_answer_equals_zerollm_sample(client, model_dir):
    for prompt in ("hello", "藏头诗：春夏秋冬"):
        r = _chat(client, prompt, max_tokens=12, temperature=0, logprobs=True)
        assert as_sample_prints(r.choices[0]) == greedy_reference(model_dir, prompt, 12)
        assert r.usage.prompt_tokens == 2 + len(prompt.encode()) + 1       # markers + bytes + assistant marker
        assert r.usage.completion_tokens == 12 or r.choices[0].finish_reason == "stop"
        assert r.choices[0].finish_reason in ("stop", "length")


@pytest.mark.slow
@pytest.mark.parametrize("seed", [1234, 2 ** 40 + 7])          # the API's seeds are 64-bit: sample's too
def test_seeded_sampling_equals_zerollm_sample_with_that_seed(client, model_dir, seed):
    r = _chat(client, "abc", max_tokens=10, temperature=1.0, seed=seed, n=2, logprobs=True)
    out = subprocess.run([sys.executable, "-m", "zerollm", "sample", "--hf", str(model_dir), "--prompt", "abc",
                          "--temperature", "1", "--seed", str(seed), "--max-new-tokens", "10", "--threads", "1"],
                         capture_output=True, text=True, env=bare_env(), timeout=60)
    assert as_sample_prints(r.choices[0]) == out.stdout
    assert len(r.choices) == 2 and r.choices[1].index == 1
    again = _chat(client, "abc", max_tokens=10, temperature=1.0, seed=seed, n=2)
    assert [c.message.content for c in again.choices] == [c.message.content for c in r.choices]


def test_stream_equals_the_whole_answer_and_ends_with_usage(client):
    whole = _chat(client, "你好，世界", max_tokens=30, temperature=0.9, seed=5)
    pieces, finish, usage = [], None, None
    for chunk in _chat(client, "你好，世界", max_tokens=30, temperature=0.9, seed=5, stream=True,
                       stream_options={"include_usage": True}):
        if chunk.usage is not None:
            usage = chunk.usage
        for c in chunk.choices:
            if c.delta.content:      # a character cut in two would be two U+FFFD here, one character whole
                pieces.append(c.delta.content)
            finish = c.finish_reason or finish
    assert "".join(pieces) == whole.choices[0].message.content
    assert finish == whole.choices[0].finish_reason
    assert usage.completion_tokens == whole.usage.completion_tokens
    # the prompt's first 16 tokens (one prefix-cache block; 18 in all) were stored by the whole answer just before
    assert usage.prompt_tokens == 18 and usage.prompt_tokens_details.cached_tokens == 16


def test_stop_string_cuts_the_answer_before_it(client):
    full = _chat(client, "xyz", max_tokens=20, temperature=0).choices[0].message.content
    stop = full[5:7]
    assert len(stop) == 2
    r = _chat(client, "xyz", max_tokens=20, temperature=0, stop=[stop])
    assert r.choices[0].message.content == full[:full.index(stop)]
    assert r.choices[0].finish_reason == "stop"
    streamed = "".join(c.choices[0].delta.content or "" for c in
                       _chat(client, "xyz", max_tokens=20, temperature=0, stop=stop, stream=True) if c.choices)
    assert streamed == full[:full.index(stop)]


def test_logprobs_and_top_logprobs(client):
    r = _chat(client, "q", max_tokens=4, temperature=0, logprobs=True, top_logprobs=3)
    content = r.choices[0].logprobs.content
    assert len(content) == r.usage.completion_tokens - (r.choices[0].finish_reason == "stop")
    for entry in content:
        assert len(entry.top_logprobs) == 3 and entry.top_logprobs[0].logprob == pytest.approx(entry.logprob)
        assert entry.logprob <= 0


def test_completions_endpoint(client):
    r = client.completions.create(model="tiny-chat", prompt="Once", max_tokens=6, temperature=0, logprobs=2)
    again = client.completions.create(model="tiny-chat", prompt="Once", max_tokens=6, temperature=0)
    assert r.choices[0].text == again.choices[0].text and r.usage.prompt_tokens == 4
    assert len(r.choices[0].logprobs.tokens) == len(r.choices[0].logprobs.top_logprobs) >= 1


@pytest.mark.slow
def test_32_concurrent_clients_each_get_the_answer_they_get_alone(base):
    prompts = [f"prompt {i} " + "汉字" * (i % 3) for i in range(32)]
    bodies = [{"model": "tiny-chat", "messages": [{"role": "user", "content": p}], "max_tokens": 8 + i % 9,
               "temperature": 0.8 if i % 2 else 0, "seed": s} for i, (p, s) in enumerate(zip(prompts, seeds(32)))]

    def ask(body):
        r = httpx.post(base + "/v1/chat/completions", json=body, timeout=60)
        assert r.status_code == 200, r.text
        return r.json()["choices"][0]["message"]["content"]

    start = time.monotonic()
    with concurrent.futures.ThreadPoolExecutor(32) as pool:
        together = list(pool.map(ask, bodies))
    took = time.monotonic() - start
    alone = [ask(b) for b in bodies]
    assert together == alone
    assert took < 30


# ----------------------------------------------------------------------------
# bad requests: the status, the error body, and the server keeps serving

CHAT, COMPLETIONS = "/v1/chat/completions", "/v1/completions"
GOOD = {"messages": [{"role": "user", "content": "hi"}], "max_tokens": 2}
BAD = [
    (CHAT, b'{"messages": [', 400, None),
    (CHAT, b'\xff\xfe{}', 400, None),
    (CHAT, json.dumps({**GOOD, "tools": []}).encode(), 400, "tools"),
    (CHAT, json.dumps({**GOOD, "temperature": "hot"}).encode(), 400, "temperature"),
    (CHAT, json.dumps({**GOOD, "temperature": -1}).encode(), 400, "temperature"),
    (CHAT, b'{"messages": [{"role": "user", "content": "hi"}], "top_p": NaN}', 400, "top_p"),
    (CHAT, json.dumps({**GOOD, "max_tokens": 10 ** 6}).encode(), 400, "max_tokens"),
    (CHAT, json.dumps({"messages": []}).encode(), 400, "messages"),
    (CHAT, json.dumps({"messages": [{"role": "wizard", "content": "x"}]}).encode(), 400, "messages.0.role"),
    (CHAT, json.dumps({"messages": [{"role": "user", "content": "x" * 200}]}).encode(), 400, "messages"),
    (CHAT, json.dumps({**GOOD, "model": "gpt-9"}).encode(), 404, "model"),
    ("/v1/embeddings", b"{}", 404, None),
    ("/v1/completions", json.dumps({"prompt": "hi", "presence_penalty": 9}).encode(), 400, "presence_penalty"),
    ("/v1/completions", json.dumps({"prompt": "hi", "n": 0}).encode(), 400, "n"),
    (CHAT, json.dumps({**GOOD, "stop": ["a", "b", "c", "d", "e"]}).encode(), 400, "stop"),   # not 'stop.str'
    (CHAT, json.dumps({**GOOD, "stop": 5}).encode(), 400, "stop"),
    (CHAT, json.dumps({**GOOD, "repetition_penalty": 1e-320}).encode(), 400, "repetition_penalty"),
    (COMPLETIONS, json.dumps({"prompt": "hi", "stop": ["a", 1]}).encode(), 400, "stop"),
    (COMPLETIONS, json.dumps({"prompt": "hi", "stop": ["a", "x" * 257]}).encode(), 400, "stop"),   # over 256
    (CHAT, json.dumps({**GOOD, "stop": "x" * 20000}).encode(), 400, "stop"),
    (CHAT, json.dumps({"messages": [{"role": "user", "content": 5}]}).encode(), 400, "messages.0.content"),
    (CHAT, json.dumps({**GOOD, "top_logprobs": 2}).encode(), 400, "top_logprobs"),          # without logprobs
    (CHAT, json.dumps({**GOOD, "logprobs": False, "top_logprobs": 0}).encode(), 400, "top_logprobs"),
    (CHAT, json.dumps({"messages": [{"role": "user", "content": [{"type": "image_url", "image_url": {"url": "x"}}]}]}
                      ).encode(), 400, "messages.0.content"),
    (CHAT, json.dumps({**GOOD, "stop": "\ud800"}).encode(), 400, "stop"),          # a lone surrogate, as JSON sends it
    (COMPLETIONS, json.dumps({"prompt": "hi", "stop": ["a", "x\udfff"]}).encode(), 400, "stop"),
]


@pytest.mark.slow
@pytest.mark.parametrize("path, body, status, param", BAD, ids=[f"{i}" for i in range(len(BAD))])
def test_bad_requests_get_openai_errors_and_the_server_keeps_serving(base, path, body, status, param):
    r = httpx.post(base + path, content=body, headers={"Content-Type": "application/json"}, timeout=30)
    assert r.status_code == status, r.text
    error = r.json()["error"]
    assert set(error) == {"message", "type", "param", "code"} and error["message"]
    assert error["param"] == param
    ok = httpx.post(base + CHAT, json=GOOD, timeout=30)
    assert ok.status_code == 200


@pytest.mark.parametrize("body, message", [
    ({**GOOD, "stop": 5}, "stop: give a string or a list of at most 4 strings (as OpenAI), not int"),
    ({**GOOD, "stop": ["a", "x\udfff"]}, "stop: stop string 1 holds a lone surrogate '\\udfff' (half of a UTF-16 pair"),
    ({**GOOD, "top_logprobs": 2}, 'top_logprobs: top_logprobs needs "logprobs": true'),
])
def test_error_messages_are_our_words_without_pydantics_prefix(base, body, message):
    r = httpx.post(base + CHAT, content=json.dumps(body).encode(), headers={"Content-Type": "application/json"},
                   timeout=30)
    text = r.json()["error"]["message"]
    assert r.status_code == 400 and text.startswith(message) and "Value error" not in text, text


def test_a_public_host_without_a_key_refuses_to_start(model_dir):
    out = subprocess.run([sys.executable, "-m", "zerollm", "serve", "--hf", str(model_dir), "--host", "0.0.0.0"],
                         capture_output=True, text=True, env=bare_env(), timeout=60)
    assert out.returncode == 1
    assert out.stderr.count("\n") == 1 and "--api-key" in out.stderr


@pytest.mark.slow
def test_a_port_in_use_is_one_line_with_the_reason(model_dir):
    """uvicorn logs its own "[Errno 98] ..." line when it cannot bind; it becomes part of zerollm's one line."""
    import socket
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        out = subprocess.run([sys.executable, "-m", "zerollm", "serve", "--hf", str(model_dir), "--port", str(port)],
                             capture_output=True, text=True, env=bare_env(), timeout=60)
    assert out.returncode == 1 and out.stderr.count("\n") == 1, out.stderr
    assert f"could not listen on 127.0.0.1:{port} ([Errno 98]" in out.stderr and "try another --port" in out.stderr


# ----------------------------------------------------------------------------
# the tight server: keys, body cap, a full queue, a disconnect, SIGTERM

@pytest.mark.slow
def test_key_body_cap_queue_disconnect_and_sigterm(tmp_path):
    """A base model (bytes only: no token ends an answer) wide and long enough that 1000 tokens take seconds."""
    base_model = tiny_chat_model(tmp_path, block_size=1024, n_embd=160, n_layer=4, name="base", chat_tokens=False)
    with server(base_model, "--max-batch", "1", "--max-queue", "1", "--api-key", KEY, "--max-body", "2048",
                "--grace", "3") as (url, proc):
        auth = {"Authorization": f"Bearer {KEY}"}
        long = {"prompt": "go", "max_tokens": 1000, "stream": True}
        assert httpx.get(url + "/v1/models").status_code == 401
        assert httpx.get(url + "/v1/models", headers={"Authorization": "Bearer wrong"}).json()["error"]["code"] \
            == "invalid_api_key"
        assert httpx.get(url + "/v1/models", headers=auth).status_code == 200
        chat = httpx.post(url + CHAT, headers=auth, json=GOOD)
        assert chat.status_code == 400 and "zerollm sft" in chat.json()["error"]["message"]     # a base model
        big = httpx.post(url + COMPLETIONS, headers=auth, json={"prompt": "x" * 5000})
        assert big.status_code == 413 and big.json()["error"]["code"] == "request_too_large"

        # a disconnect mid-stream frees the only row
        with httpx.Client(timeout=30) as c:
            with c.stream("POST", url + COMPLETIONS, headers=auth, json=long) as r:
                next(r.iter_lines())
        _wait(lambda: httpx.get(url + "/health").json()["active"] == 0)

        # one row busy, one waiting, the third gets 429 with Retry-After
        holders = [threading.Thread(target=_read_all, args=(url, auth, long)) for _ in range(2)]
        holders[0].start()
        _wait(lambda: httpx.get(url + "/health").json()["active"] == 1)
        holders[1].start()
        _wait(lambda: httpx.get(url + "/health").json()["waiting"] == 1)
        full = httpx.post(url + COMPLETIONS, headers=auth, json={**long, "stream": False})
        assert full.status_code == 429 and full.headers["Retry-After"] and full.json()["error"]["code"] == "queue_full"

        # SIGTERM with requests in flight: exits 0 within a few seconds
        start = time.monotonic()
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(15) == 0
        assert time.monotonic() - start < 10
        for t in holders:
            t.join(10)


def _read_all(url, auth, body):
    try:
        with httpx.Client(timeout=30) as c, c.stream("POST", url + COMPLETIONS, headers=auth, json=body) as r:
            for _ in r.iter_lines():
                pass
    except httpx.HTTPError:
        pass                          # cut off by the shutdown


def _wait(condition, timeout=10):
    start = time.monotonic()
    while not condition():
        assert time.monotonic() - start < timeout, "timed out"
        time.sleep(0.02)


# ----------------------------------------------------------------------------
# whole characters and stop strings, token by token (no server)

def test_text_stream_holds_back_broken_characters_and_stop_prefixes():
    stream = TextStream(ByteTokenizer(), stop=["END"])
    pieces = [stream.push(b) for b in "你好 EN然后END后".encode()]
    assert pieces[:3] == ["", "", "你"]                         # the first two bytes of 你 are held back
    assert "EN然" in pieces and "E" not in pieces              # "EN" waited: it could have begun "END"
    assert "".join(pieces) == stream.text == "你好 EN然后" and stream.stopped
    assert stream.flush() == "" and stream.push(0x41) == ""    # nothing after the stop


class _Pieces:
    """A tokenizer whose ids are strings, so one text can be cut into tokens anywhere: id i is pieces[i]."""
    name = "pieces"

    def __init__(self, pieces):
        self.pieces = pieces

    def decode(self, ids):
        return "".join(self.pieces[i] for i in ids)


def _cuts(text, k):
    """Every way to cut ``text`` into tokens, or ``k`` random ones for a long text."""
    n = len(text) - 1
    rng = random.Random(0)
    masks = range(2 ** n) if n <= 10 else [rng.getrandbits(n) for _ in range(k)]
    for mask in masks:
        at = [0] + [i + 1 for i in range(n) if mask >> i & 1] + [len(text)]
        yield [text[a:b] for a, b in zip(at, at[1:])]


def _before_first_stop(text, stops):
    """The answer: text up to the stop string completed first (the longest of those ending there)."""
    for end in range(1, len(text) + 1):
        done = [s for s in stops if text[:end].endswith(s)]
        if done:
            return text[:end - max(map(len, done))]
    return text


@pytest.mark.parametrize("text, stops", [
    ("hello END world", ["END"]),
    ("aaaab", ["aaab"]),                         # a partial match falls back, not to zero
    ("ababcabab", ["abab", "xx"]),
    ("abcd", ["abcd", "bc"]),                    # "bc" is complete first
    ("xabcx", ["bc", "abc"]),                    # both end at c: the longer cuts
    ("no stop here", ["zz", "ere!"]),
    ("你好世界你好", ["好世"]),
    ("a\n\nb\n" * 3 + "tail", ["\n\nb\n\nx", "l"]),
])
def test_text_stream_finds_a_stop_string_wherever_the_tokens_cut_it(text, stops):
    for tokens in _cuts(text, 200):
        stream = TextStream(_Pieces(tokens), stop=stops)
        pieces = [stream.push(i) for i in range(len(tokens))] + [stream.flush()]
        assert "".join(pieces) == stream.text == _before_first_stop(text, stops), tokens
        assert stream.stopped == (stream.text != text)


def test_text_stream_with_long_stop_strings_stays_fast():
    """Stop strings of 20000 characters, each partly matched after every token: re-testing every prefix
    of every stop string per token took 7 s for these 300 tokens (the API caps a stop string at 256)."""
    tokens = ["x" * 7 + "y"] * 300
    start = time.monotonic()
    stream = TextStream(_Pieces(tokens), stop=["x" * 20000] * 3 + ["xy" * 10000])
    pieces = [stream.push(i) for i in range(len(tokens))] + [stream.flush()]
    assert time.monotonic() - start < 2
    assert "".join(pieces) == "".join(tokens) and not stream.stopped


# ----------------------------------------------------------------------------
# fit_context: the conversation fits the context as in `zerollm chat` (the chat page asks for it)

def test_fit_context_leaves_out_the_oldest_turns_as_the_repl_does(tmp_path_factory):
    from zerollm.data import chat
    from zerollm.interop.opening import Source, open_model
    from zerollm.serve.repl import Conversation
    folder = tiny_chat_model(tmp_path_factory.mktemp("fit"), block_size=64, seed=3)
    tok = open_model(Source(hf=str(folder))).tokenizer
    with server(folder) as (url, _):
        card = httpx.get(url + "/v1/models").json()["data"][0]
        assert card["max_model_len"] == 64
        turns = [("第一问：春", "答一"), ("第二问：夏天", "答二答二"), ("第三问：秋", "答三")]
        messages = [{"role": r, "content": t} for u, a in turns for r, t in (("user", u), ("assistant", a))]
        messages.append({"role": "user", "content": "第四问：冬"})
        drops = []
        for asked in (8, 20, 40, None):
            body = {"messages": messages, "temperature": 0, "fit_context": True,
                    **({"max_tokens": asked} if asked else {})}
            r = httpx.post(url + "/v1/chat/completions", json=body, timeout=30)
            assert r.status_code == 200, r.text
            fitted, usage = r.json()["zerollm"], r.json()["usage"]
            conv = Conversation(tok, 64)                       # `zerollm chat` with the same turns and room
            conv.turns = list(turns)
            room = asked if asked else 64 // 4
            ids, dropped = conv.prompt("第四问：冬", min(room, 64 - len(chat.encode_prompt(tok, "第四问：冬"))))
            assert (fitted["dropped_turns"], fitted["prompt_tokens"]) == (dropped, len(ids)) == \
                (fitted["dropped_turns"], usage["prompt_tokens"])
            assert fitted["context"] == 64 and fitted["prompt_tokens"] + fitted["max_tokens"] <= 64
            assert fitted["max_tokens"] == (min(asked, 64 - len(ids)) if asked else 64 - len(ids))
            drops.append(dropped)
        assert len(set(drops)) > 1, drops                              # more room asked, more turns left out
        plain = httpx.post(url + "/v1/chat/completions", json={"messages": messages, "max_tokens": 60}, timeout=30)
        assert plain.status_code == 400 and "zerollm" not in plain.text      # without it: OpenAI's behaviour
        alone = httpx.post(url + "/v1/chat/completions", timeout=30,
                           json={"messages": [{"role": "user", "content": "长" * 80}], "fit_context": True})
        err = alone.json()["error"]
        assert alone.status_code == 400 and err["code"] == "context_length_exceeded" and err["param"] == "messages"
        assert "leaves no room for an answer in the context of 64 tokens" in err["message"]
        stream = httpx.post(url + "/v1/chat/completions", timeout=30, json={**body, "stream": True})
        first = json.loads(stream.text.split("\n\n")[0][len("data: "):])
        assert first["zerollm"] == fitted                              # a stream says it in its first chunk
