"""A stream's text events are cut from a frame serialised once (zerollm.serve.api._Framed): each must be
byte for byte the event sse() makes of the whole chunk, whatever the text holds."""

import json

import pytest

from zerollm.serve.api import _Framed
from zerollm.serve.guard import sse

# quotes and backslashes, control characters, the marker itself (a model named just that keeps using
# sse()), characters JSON may leave raw, braces
TEXTS = ["春", 'say "hi" \\ ok', "line\nnext\tend\r", "\0", "\x1f\x7f", "\u2028\u2029 \U0001f600", "{0}}{", "",
         "</script>"]


def _event(model, chat):
    meta = {"id": "chatcmpl-1", "created": 7, "model": model, "zerollm": {"dropped_turns": 1}}

    def event(i, key, text):
        if chat:
            return {**meta, "object": "chat.completion.chunk", "usage": None, "choices": [
                {"index": i, "delta": {key: text}, "logprobs": None, "finish_reason": None}]}
        return {**meta, "object": "text_completion", "choices": [
            {"index": i, "text": text, "logprobs": None, "finish_reason": None}]}
    return event


@pytest.mark.parametrize("model", ["tang", "模型 \"q\"", "named\0inside", "\0"])
@pytest.mark.parametrize("chat", [True, False])
def test_framed_events_equal_sse_of_the_whole_chunk(model, chat):
    event = _event(model, chat)
    framed = _Framed(event)
    for i in (0, 2, 0):                                # a frame is reused: the same choice twice
        for key in (("content", "reasoning_content") if chat else ("text",)):
            for text in TEXTS:
                got = framed(i, key, text)
                assert got == sse(event(i, key, text))
                assert got.startswith("data: ") and got.endswith("\n\n")
                body = json.loads(got[6:])
                assert (body["choices"][0]["delta"][key] if chat else body["choices"][0]["text"]) == text
