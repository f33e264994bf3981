"""`zerollm serve --stream-interval MS` (zerollm.serve.backend.Run): tokens that come within the interval go
out together in the next chunk; the first token and a choice's end go at once; the text is the same."""

import asyncio
import json
import subprocess
import sys
import threading
import time

import httpx

from serve_helpers import ROOT, server, tiny_chat_model
from zerollm.generation.request import Done, Token
from zerollm.serve.backend import Run


def _batches(interval, plan):
    """Run a Run whose events a thread emits at the times of ``plan`` [(seconds from the start, event)]
    -> [(seconds from the start when the loop took the batch, [event, ...])]."""
    async def main():
        run = Run(asyncio.get_running_loop(), interval)
        run.reqs = [_Req()]
        t0 = time.perf_counter()

        def scheduler():
            for at, ev in plan:
                time.sleep(max(0.0, at - (time.perf_counter() - t0)))
                run.emit((0, ev))
        thread = threading.Thread(target=scheduler)
        thread.start()
        got = [(time.perf_counter() - t0, [ev for _, ev in batch]) async for batch in run.batches()]
        thread.join()
        return got
    return asyncio.run(main())


class _Req:                      # what Run.cancel needs of a scheduler request
    def cancel(self):
        pass


def test_tokens_within_the_interval_go_together_and_an_end_is_not_held():
    t = [Token(i, text=str(i)) for i in range(6)]
    # 0.1 s between the first token and the next: a loaded machine's late wake-up still takes the first alone
    plan = [(0.0, t[1]), (0.1, t[2]), (0.12, t[3]), (0.14, t[4]), (0.65, t[5]), (0.7, Done("stop"))]
    got = _batches(0.5, plan)
    assert [b for _, b in got] == [[t[1]], [t[2], t[3], t[4]], [t[5], Done("stop")]]
    first, held, ended = (at for at, _ in got)
    assert first < 0.1                  # the first token is not held
    assert held >= 0.48                 # the next ones wait out the interval ...
    assert ended < 0.95                 # ... but the end does not: the interval would hold it until 1.0 s


def test_interval_zero_takes_each_token_as_it_comes():
    t = [Token(i, text=str(i)) for i in range(4)]
    plan = [(0.0, t[1]), (0.1, t[2]), (0.2, t[3]), (0.3, Done("length"))]
    got = _batches(0.0, plan)
    assert [b for _, b in got] == [[t[1]], [t[2]], [t[3]], [Done("length")]]


def _stream(base):
    body = {"prompt": "Once upon a time", "max_tokens": 40, "temperature": 0.9, "seed": 5, "stream": True}
    with httpx.stream("POST", base + "/v1/completions", json=body, timeout=60) as r:
        assert r.status_code == 200
        text = r.read().decode()
    events = [json.loads(e[6:]) for e in text.split("\n\n") if e.startswith("data: {")]
    pieces = [c["text"] for e in events for c in e["choices"] if c["text"]]
    return "".join(pieces), len(pieces), text.endswith("data: [DONE]\n\n")


def test_a_long_interval_sends_the_first_token_then_the_rest_at_the_end(tmp_path):
    folder = tiny_chat_model(tmp_path, chat_tokens=False)     # a base model: it never stops early
    with server(folder, "--stream-interval", "0") as (base, _):
        each, pieces_each, ended = _stream(base)
    with server(folder, "--stream-interval", "10000") as (base, _):
        held, pieces_held, ended_held = _stream(base)
    assert ended and ended_held
    assert held == each and len(each) > 10                    # the same text
    assert pieces_each > 2                                    # a chunk per token, or nearly
    assert pieces_held <= 2                                   # the first token's, then all the rest with the end


def test_a_negative_interval_is_refused_in_one_line(tmp_path):
    out = subprocess.run([sys.executable, "-m", "zerollm", "serve", "--hf", str(tmp_path), "--stream-interval", "-1"],
                         capture_output=True, text=True, cwd=ROOT, timeout=60)
    assert out.returncode != 0 and "Traceback" not in out.stderr
    assert "--stream-interval" in out.stderr and len(out.stderr.strip().splitlines()) == 1
