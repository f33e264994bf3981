"""response_format through `zerollm serve` (#59): json_object and json_schema on /v1/chat/completions and
/v1/completions, the official openai client streamed and not, and unsupported keywords as a 400 naming them.

The request checks run on an app in this process; the openai client talks to a real server process.
"""

import json

import jsonschema
import openai
import pytest
from fastapi.testclient import TestClient

from serve_helpers import server, tiny_chat_model
from zerollm.data import chat
from zerollm.model.gpt import GPT, GPTConfig
from zerollm.serve.api import build_app
from zerollm.serve.backend import Backend
from zerollm.tokenizers import ByteTokenizer

PERSON = {"type": "object", "properties": {"name": {"type": "string", "maxLength": 10},
                                           "age": {"type": "integer"}, "pet": {"enum": ["cat", "dog", None]}},
          "required": ["name", "age", "pet"]}
AS_SCHEMA = {"type": "json_schema", "json_schema": {"name": "person", "schema": PERSON, "strict": True}}


@pytest.fixture(scope="module")
def app():
    tok = chat.prepare_tokenizer(ByteTokenizer())
    model = GPT(GPTConfig(vocab_size=tok.vocab_size, block_size=256, n_layer=1, n_head=2, n_embd=16), seed=0)
    backend = Backend(model, tok, name="t")
    backend.start()
    yield TestClient(build_app(backend))
    backend.close()


def _post(app, path, response_format, **kw):
    body = {"max_tokens": 120, "temperature": 1.5, "seed": 3, "response_format": response_format, **kw}
    if path == "/v1/chat/completions":
        body["messages"] = [{"role": "user", "content": "who?"}]
    else:
        body["prompt"] = "person: "
    return app.post(path, json=body)


def _text(reply):
    choice = reply.json()["choices"][0]
    return choice.get("text", choice.get("message", {}).get("content")), choice["finish_reason"]


@pytest.mark.parametrize("path", ["/v1/chat/completions", "/v1/completions"])
def test_json_schema_and_json_object_answers_are_valid_on_both_endpoints(app, path):
    for seed in range(4):
        text, finish = _text(_post(app, path, AS_SCHEMA, seed=seed))
        assert finish == "stop", text
        jsonschema.validate(json.loads(text), PERSON)
        text, finish = _text(_post(app, path, {"type": "json_object"}, seed=seed))
        if finish == "stop":
            assert isinstance(json.loads(text), dict)
    free, _ = _text(_post(app, path, {"type": "text"}, seed=1))
    with pytest.raises(ValueError):                # without it this model writes no JSON at all
        json.loads(free)


@pytest.mark.parametrize("response_format, param, named", [
    ({"type": "json_schema", "json_schema": {"name": "x", "schema": {"type": "integer", "minimum": 3}}},
     "response_format.json_schema.schema", "minimum"),
    ({"type": "json_schema", "json_schema": {"name": "x", "schema": {"type": "object", "properties": {},
                                                                     "patternProperties": {}}}},
     "response_format.json_schema.schema", "patternProperties"),
    ({"type": "json_schema", "json_schema": {"name": "x", "schema": {"type": "string", "pattern": "(a|b)*a(a|b){20}"}}},
     "response_format.json_schema.schema", "20,000 states"),
    ({"type": "yaml"}, "response_format.type", "json_schema"),
    ({"type": "json_schema", "json_schema": {"schema": {}}}, "response_format.json_schema.name", "name"),
    ({"type": "json_object", "schema": {}}, "response_format", "'schema'"),
])
def test_unsupported_response_formats_are_a_400_naming_them_and_the_server_goes_on(app, response_format, param, named):
    reply = _post(app, "/v1/completions", response_format)
    assert reply.status_code == 400
    error = reply.json()["error"]
    assert error["param"] == param and named in error["message"]
    text, finish = _text(_post(app, "/v1/completions", AS_SCHEMA))
    assert finish == "stop" and jsonschema.validate(json.loads(text), PERSON) is None


def test_max_tokens_before_the_json_is_whole_is_length_with_a_note(app):
    for path in ("/v1/completions", "/v1/chat/completions"):
        reply = _post(app, path, AS_SCHEMA, max_tokens=4)
        text, finish = _text(reply)
        assert finish == "length" and text.startswith('{"na')
        assert "incomplete" in reply.json()["choices"][0]["zerollm"]["note"]
    assert "zerollm" not in _post(app, "/v1/completions", AS_SCHEMA).json()["choices"][0]


@pytest.mark.slow
def test_the_openai_client_gets_schema_valid_json_streamed_and_not(tmp_path):
    folder = tiny_chat_model(tmp_path, block_size=160)
    with server(folder) as (url, _):
        client = openai.OpenAI(base_url=url + "/v1", api_key="unused", max_retries=0, timeout=60)
        messages = [{"role": "user", "content": "a person, please"}]
        for seed in range(3):
            whole = client.chat.completions.create(model="tiny-chat", messages=messages, seed=seed, max_tokens=80,
                                                   response_format=AS_SCHEMA)
            jsonschema.validate(json.loads(whole.choices[0].message.content), PERSON)
            pieces = client.chat.completions.create(model="tiny-chat", messages=messages, seed=seed, max_tokens=80,
                                                    response_format=AS_SCHEMA, stream=True)
            streamed = "".join(c.choices[0].delta.content or "" for c in pieces if c.choices)
            assert streamed == whole.choices[0].message.content
        text = client.completions.create(model="tiny-chat", prompt="person:", max_tokens=80, seed=1,
                                         extra_body={"response_format": AS_SCHEMA}).choices[0].text
        jsonschema.validate(json.loads(text), PERSON)
        with pytest.raises(openai.BadRequestError, match="uniqueItems"):
            client.chat.completions.create(model="tiny-chat", messages=messages, response_format={
                "type": "json_schema", "json_schema": {"name": "x", "schema": {"type": "array", "uniqueItems": True}}})
