"""The server's event loop: uvloop where it is installed (the `serve` extra), asyncio's own loop where it
is not, and the same streamed events on either; and its engine: fast where numba is installed, unless
--engine or $ZEROLLM_ENGINE says otherwise (docs/serving.md, "The HTTP path")."""

import json
import os
from pathlib import Path

import httpx

from serve_helpers import ROOT, server, tiny_chat_model

BODY = {"messages": [{"role": "user", "content": "你好"}], "max_tokens": 24, "temperature": 0.9, "seed": 3,
        "stream": True, "stream_options": {"include_usage": True}}


def _maps(proc):
    """The files mapped into the server's process (Linux): an imported extension module is one of them."""
    return Path(f"/proc/{proc.pid}/maps").read_text()


def _stream(base):
    """A streamed answer as (its text, its finish_reason, its usage, whether it ended with [DONE]). How the
    tokens are grouped into events depends on timing (a stream that fell behind gets several in one), so the
    events are compared by what they add up to."""
    with httpx.stream("POST", base + "/v1/chat/completions", json=BODY, timeout=60) as r:
        assert r.status_code == 200
        text = r.read().decode()
    events = [json.loads(e[6:]) for e in text.split("\n\n") if e.startswith("data: {")]
    deltas = [c for e in events for c in e["choices"]]
    assert deltas[0]["delta"] == {"role": "assistant", "content": ""}
    answer = "".join(c["delta"].get("content") or "" for c in deltas)
    finish = [c["finish_reason"] for c in deltas if c["finish_reason"] is not None]
    return answer, finish, events[-1]["usage"], text.endswith("data: [DONE]\n\n")


def test_uvloop_where_installed_asyncio_without_it_and_the_same_stream(tmp_path):
    folder = tiny_chat_model(tmp_path)
    hidden = tmp_path / "hide" / "uvloop"               # an `import uvloop` that fails, as where it is absent
    hidden.mkdir(parents=True)
    (hidden / "__init__.py").write_text("raise ImportError('uvloop is hidden for this test')\n")
    with server(folder) as (base, proc):
        on_uvloop = _stream(base)
        assert "/uvloop/" in _maps(proc)
    with server(folder, env={"PYTHONPATH": os.pathsep.join((str(ROOT), str(hidden.parent)))}) as (base, proc):
        on_asyncio = _stream(base)
        assert "/uvloop/" not in _maps(proc)
    answer, finish, usage, ended = on_uvloop
    assert len(answer) > 3 and len(finish) == 1 and usage["completion_tokens"] > 3 and ended
    assert on_asyncio == on_uvloop


def test_the_engine_is_fast_where_numba_is_installed_unless_told(tmp_path):
    folder = tiny_chat_model(tmp_path)
    with server(folder, env={"ZEROLLM_ENGINE": ""}) as (base, proc):          # empty: as if unset
        answer, finish, usage, ended = _stream(base)
        assert "/numba/" in _maps(proc)
    assert len(answer) > 3 and len(finish) == 1 and usage["completion_tokens"] > 3 and ended
    with server(folder, "--engine", "numpy", env={"ZEROLLM_ENGINE": ""}) as (base, proc):
        assert _stream(base)[3] and "/numba/" not in _maps(proc)
