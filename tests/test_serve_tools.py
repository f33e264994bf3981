"""Tools and thinking through `zerollm serve` (#58): OpenAI's tools, tool_choice, tool_calls (whole and
streamed) and reasoning_content.

The answer's parsing is checked on written texts (no model); the requests' checks on an app in this
process over a random model; the whole tool loop with the official openai client against a real server
whose model was fine-tuned in the test to call the calculator (serve_helpers.tiny_tool_run).
"""

import json

import openai
import pytest
from fastapi.testclient import TestClient

from serve_helpers import CALCULATOR, TOOL_PROBLEMS, server, tiny_tool_run
from zerollm.data import chat
from zerollm.model.gpt import GPT, GPTConfig
from zerollm.serve.api import build_app
from zerollm.serve.backend import Backend
from zerollm.serve.tools import Answer, ToolPlan
from zerollm.tokenizers import ByteTokenizer

PLAN = ToolPlan(tools=(CALCULATOR,), names=frozenset({"calculator"}), thinking=True)
CALL = '<tool_call>{"name": "calculator", "arguments": {"expression": "2*3"}}</tool_call>'
WEATHER = {"type": "function", "function": {"name": "weather", "parameters": {
    "type": "object", "properties": {"city": {"type": "string", "enum": ["Paris", "Rome"]},
                                     "days": {"type": "integer", "enum": [1, 2, 3]}}, "required": ["city", "days"]}}}
BAD_CALL = '<tool_call>{"name": "calculator", "arguments": [2, 3]}</tool_call>'


# ----------------------------------------------------------------------------
# the answer: streamed pieces add up to the message, tool calls only whole

def _streamed(text, size, plan=PLAN):
    """Stream ``text`` in pieces of ``size`` characters -> (reasoning, content, calls, finish, deltas)."""
    answer, deltas = Answer(plan), []
    for k in range(0, len(text), size):
        deltas += answer.stream(text[k:k + size], None)[0]
    rest, finish = answer.stream("", "stop")
    deltas += rest
    reasoning = "".join(d.get("reasoning_content", "") for d in deltas)
    content = "".join(d.get("content", "") for d in deltas)
    calls = {}
    for d in deltas:
        for c in d.get("tool_calls", ()):
            if c["index"] not in calls:                    # the first delta of a call: OpenAI's whole head
                assert set(c) == {"index", "id", "type", "function"} and c["function"]["arguments"] == ""
                calls[c["index"]] = {"id": c["id"], "name": c["function"]["name"], "arguments": ""}
            else:
                calls[c["index"]]["arguments"] += c["function"]["arguments"]
    return reasoning, content, list(calls.values()), finish, deltas


TEXTS = [
    "<think>calc</think>" + CALL,
    "plain answer",
    "<think>it never closes",
    "hi " + BAD_CALL + " bye",
    '<tool_call>{"name": "weather", "arguments": {}}</tool_call>',        # not one of the tools: text
    CALL + CALL.replace("2*3", "4*5"),
    "first " + CALL + " then",
    "cut short <tool_call>{\"name\": \"calculator\", \"argu",
    "<thin", "x </thin", "a < b and c <tool_ca",
]


@pytest.mark.parametrize("text", TEXTS, ids=range(len(TEXTS)))
@pytest.mark.parametrize("size", [1, 3, 8])
def test_streamed_deltas_add_up_to_the_whole_message(text, size):
    reasoning, content, calls, finish, _ = _streamed(text, size)
    message, whole_finish = Answer(PLAN).message(text, "stop")
    assert finish == whole_finish
    assert reasoning == (message.get("reasoning_content") or "")
    assert content == (message["content"] or "")
    assert [(c["name"], c["arguments"]) for c in calls] == [
        (c["function"]["name"], c["function"]["arguments"]) for c in message.get("tool_calls", ())]


def test_a_call_is_parsed_out_of_the_text_with_its_thinking():
    message, finish = Answer(PLAN).message("<think>calc</think>" + CALL, "stop")
    assert finish == "tool_calls"
    assert message["content"] is None and message["reasoning_content"] == "calc"
    [call] = message["tool_calls"]
    assert call["id"].startswith("call_") and call["type"] == "function"
    assert call["function"] == {"name": "calculator", "arguments": '{"expression": "2*3"}'}


def test_a_malformed_call_comes_back_as_text_and_is_never_streamed_as_a_call():
    text = "hi " + BAD_CALL + " bye"
    message, finish = Answer(PLAN).message(text, "stop")
    assert message == {"role": "assistant", "content": text} and finish == "stop"
    *_, deltas = _streamed(text, 1)
    assert not any("tool_calls" in d for d in deltas)


def test_a_call_is_held_back_until_it_closes():
    answer = Answer(PLAN)
    deltas = answer.stream("ok " + CALL[:-5], None)[0]
    assert deltas == [{"content": "ok "}]                        # nothing of the call yet
    deltas = answer.stream(CALL[-5:], None)[0]
    assert [set(d["tool_calls"][0]) for d in deltas] == [{"index", "id", "type", "function"}, {"index", "function"}]


def test_parallel_tool_calls_false_keeps_the_first_call():
    plan = ToolPlan(PLAN.tools, PLAN.names, parallel=False)
    message, _ = Answer(plan).message(CALL + CALL.replace("2*3", "4*5"), "stop")
    assert [c["function"]["arguments"] for c in message["tool_calls"]] == ['{"expression": "2*3"}']
    assert len(_streamed(CALL + CALL.replace("2*3", "4*5"), 2, plan)[2]) == 1


def test_a_model_without_tools_or_thinking_answers_plain_content():
    text = "<think>x</think>" + CALL
    assert Answer(ToolPlan()).message(text, "stop") == ({"role": "assistant", "content": text}, "stop")
    assert Answer(ToolPlan()).stream(text, "stop") == ([{"content": text}], "stop")


# ----------------------------------------------------------------------------
# the requests: a 400 naming the field, and the same request made right answered

def _app(needs):
    tok = chat.prepare_tokenizer(ByteTokenizer(), needs=needs)
    model = GPT(GPTConfig(vocab_size=tok.vocab_size, block_size=512, n_layer=1, n_head=2, n_embd=16), seed=0)
    backend = Backend(model, tok, name="t")
    backend.start()
    return backend, TestClient(build_app(backend))


@pytest.fixture(scope="module")
def tools_app():
    backend, client = _app(("think", "tools"))
    yield client
    backend.close()


@pytest.fixture(scope="module")
def no_think_app():
    backend, client = _app(("tools",))          # a model that calls tools but never learned to think
    yield client
    backend.close()


@pytest.fixture(scope="module")
def plain_app():
    backend, client = _app(())
    yield client
    backend.close()


ASK = [{"role": "user", "content": "12*34=?"}]
SENT_CALL = {"id": "call_1", "type": "function", "function": {"name": "calculator", "arguments": '{"expression": "12*34"}'}}
LOOP = [*ASK, {"role": "assistant", "content": None, "tool_calls": [SENT_CALL]},
        {"role": "tool", "tool_call_id": "call_1", "content": "408"}]


def _post(client, **body):
    return client.post("/v1/chat/completions", json={"messages": ASK, "max_tokens": 4, "temperature": 0, **body})


BAD = [   # (the body's fields, the field the error names, words of the message); each next to one made right
    ({"tools": []}, "tools", "empty list"),
    ({"tools": [{"type": "function", "function": {"name": "two words"}}]}, "tools.0.function.name", "letters, digits"),
    ({"tools": [{"type": "retrieval"}]}, "tools.0.type", "function"),
    ({"tools": [CALCULATOR, CALCULATOR]}, "tools", "two tools are named 'calculator'"),
    ({"tools": [{"type": "function", "function": {"name": "f", "parameters": {"type": "array"}}}]},
     "tools.0.function.parameters", "schema of an object"),
    ({"tools": [CALCULATOR], "tool_choice": "sometimes"}, "tool_choice", "auto"),
    ({"tools": [CALCULATOR], "tool_choice": {"type": "function", "function": {"name": "weather"}}}, "tool_choice",
     "not among the tools (calculator)"),
    ({"tool_choice": "required"}, "tool_choice", "no tools are given"),
    ({"tools": [CALCULATOR], "messages": [*ASK, {"role": "assistant", "tool_calls": [
        {**SENT_CALL, "function": {"name": "calculator", "arguments": "[1]"}}]}]},
     "messages.1.tool_calls.0.function.arguments", "JSON object"),
    ({"tools": [CALCULATOR], "messages": [*ASK, {"role": "tool", "content": "408"}]}, "messages.1", "tool_call_id"),
    ({"messages": [{"role": "user", "content": "x", "tool_calls": [SENT_CALL]}]}, "messages.0", "assistant messages"),
    ({"messages": [*ASK, {"role": "assistant"}]}, "messages.1", "content is missing"),
    ({"tools": [CALCULATOR], "tool_choice": "required", "response_format": {"type": "json_object"}}, "tool_choice",
     "forces a tool call, whose arguments follow the tool's parameters, so response_format cannot apply too"),
]
GOOD = [
    {"tools": [CALCULATOR]},
    {"tools": [{"type": "function", "function": {"name": "calc_2-x"}}]},
    {"tools": [{"type": "function", "function": {"name": "f"}}]},
    {"tools": [CALCULATOR, {"type": "function", "function": {"name": "weather"}}]},
    {"tools": [{"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}]},
    {"tools": [CALCULATOR], "tool_choice": "auto"},
    {"tools": [CALCULATOR], "tool_choice": {"type": "function", "function": {"name": "calculator"}}},
    {"tools": [CALCULATOR], "tool_choice": "required"},
    {"tools": [CALCULATOR], "messages": LOOP},
    {"tools": [CALCULATOR], "messages": LOOP},
    {"messages": [*ASK, {"role": "assistant", "content": "ok", "reasoning_content": "hmm"}, *ASK]},
    {"messages": [*ASK, {"role": "assistant", "content": "", "tool_calls": [SENT_CALL]}]},
    {"tools": [CALCULATOR], "tool_choice": "required", "response_format": {"type": "text"}},
]


@pytest.mark.parametrize("k", range(len(BAD)))
def test_bad_tools_get_a_400_naming_the_field_and_the_right_request_is_answered(tools_app, k):
    body, param, words = BAD[k]
    r = _post(tools_app, **body)
    assert r.status_code == 400, r.text
    error = r.json()["error"]
    assert error["param"] == param and words in error["message"], error
    assert _post(tools_app, **GOOD[k]).status_code == 200


def test_a_model_that_never_learned_tools_says_so(plain_app, tools_app):
    r = _post(plain_app, tools=[CALCULATOR])
    assert r.status_code == 400
    assert r.json()["error"]["param"] == "tools" and "not trained with tools" in r.json()["error"]["message"]
    assert _post(plain_app).status_code == 200 and _post(tools_app, tools=[CALCULATOR]).status_code == 200


# ----------------------------------------------------------------------------
# where a request is read: a small body on the event loop, a large one (or a forced call's grammar) on a worker

OFF_LOOP = {"parse_body", "tool_plan", "chat_prompt", "text_prompt"}


@pytest.fixture
def hops(monkeypatch):
    """The names of the functions sent to a worker thread (anyio.to_thread.run_sync) while the test runs."""
    import anyio.to_thread
    names, real = [], anyio.to_thread.run_sync

    def counting(fn, *args, **kw):
        names.append(getattr(fn, "__name__", repr(fn)))
        return real(fn, *args, **kw)
    monkeypatch.setattr(anyio.to_thread, "run_sync", counting)
    return names


@pytest.mark.parametrize("path, body, worker", [
    ("/v1/chat/completions", {"messages": ASK}, ["parse_body", "tool_plan", "chat_prompt"]),
    ("/v1/completions", {"prompt": "12*34="}, ["parse_body", "text_prompt"]),
])
def test_a_small_body_is_read_on_the_loop_a_large_one_on_a_worker_with_the_same_answer(plain_app, hops, path,
                                                                                           body, worker):
    from zerollm.serve.api import INLINE_BODY
    raw = json.dumps({**body, "max_tokens": 4, "temperature": 0})
    small = plain_app.post(path, content=raw, headers={"content-type": "application/json"})
    assert small.status_code == 200, small.text
    assert not OFF_LOOP & set(hops), hops
    padded = raw[:-1] + " " * INLINE_BODY + "}"              # the same JSON, past the limit in bytes
    large = plain_app.post(path, content=padded, headers={"content-type": "application/json"})
    assert large.status_code == 200, large.text
    assert [h for h in hops if h in OFF_LOOP] == worker
    assert small.json()["choices"] == large.json()["choices"]


def test_a_small_body_with_tools_still_plans_them_on_a_worker(tools_app, hops):
    r = _post(tools_app, tools=[CALCULATOR], tool_choice="required")       # a forced call: its grammar is built
    assert r.status_code == 200, r.text
    assert "tool_plan" in hops and "parse_body" not in hops, hops


@pytest.mark.parametrize("raw, says", [
    (b"[" * 2000, "nested too deeply"),                               # json.loads's own recursion limit, on the loop
    (b'{"messages": ' + b"[" * 1010 + b"]" * 1010 + b"}", "nested too deeply"),
    (b'{"messages": [{"role": "user", "content": "x"}], "max_tokens": -1}', "max_tokens"),
])
def test_a_small_bad_body_read_on_the_loop_gets_its_400_and_the_next_request_its_answer(plain_app, hops, raw, says):
    from zerollm.serve.api import INLINE_BODY
    assert len(raw) <= INLINE_BODY
    r = plain_app.post("/v1/chat/completions", content=raw, headers={"content-type": "application/json"})
    assert r.status_code == 400, r.text
    assert says in r.json()["error"]["message"] and not OFF_LOOP & set(hops)
    assert _post(plain_app).status_code == 200


def test_reasoning_tokens_are_a_leading_think_block_through_its_end():
    from zerollm.serve.tools import reasoning_tokens
    tok = chat.prepare_tokenizer(ByteTokenizer(), needs=("think",))
    think, end = chat.special_id(tok, "<think>"), chat.special_id(tok, "</think>")
    assert reasoning_tokens(tok, [think, 99, 98, end, 97, 96]) == 4
    assert reasoning_tokens(tok, [think, 99, 98]) == 3                       # never closed: all of it
    assert reasoning_tokens(tok, [97, think, 99, end]) == 0                  # it did not begin by thinking
    assert reasoning_tokens(tok, []) == 0


def test_a_chat_answer_counts_its_reasoning_tokens_and_a_completion_has_no_such_field(plain_app, tools_app):
    r = _post(plain_app).json()["usage"]
    assert r["completion_tokens_details"] == {"reasoning_tokens": 0} and "cached_tokens" in r["prompt_tokens_details"]
    done = plain_app.post("/v1/completions", json={"prompt": "12*34=", "max_tokens": 4}).json()["usage"]
    assert "completion_tokens_details" not in done and set(done) >= {"prompt_tokens", "prompt_tokens_details"}
    r = _post(tools_app, max_tokens=12).json()                # a random model: it may or may not begin with <think>
    thought = r["usage"]["completion_tokens_details"]["reasoning_tokens"]
    assert (thought > 0) == ("reasoning_content" in r["choices"][0]["message"]), r
    assert thought <= r["usage"]["completion_tokens"]


def test_parallel_tool_calls_false_makes_the_end_of_a_call_a_stop_id():
    from zerollm.serve.schemas import ChatRequest
    from zerollm.serve.tools import tool_plan
    tok = chat.prepare_tokenizer(ByteTokenizer(), needs=("tools",))
    ask = lambda **kw: tool_plan(tok, ChatRequest.model_validate({"messages": ASK, "tools": [CALCULATOR], **kw}))
    assert ask(parallel_tool_calls=False).stop_ids == {chat.special_id(tok, chat.TOOL_CALL_END)}
    assert ask().stop_ids == ask(parallel_tool_calls=True).stop_ids == frozenset()


def test_tool_choice_none_leaves_the_tools_out_of_the_prompt(tools_app):
    plain, none = _post(tools_app).json(), _post(tools_app, tools=[CALCULATOR], tool_choice="none").json()
    auto = _post(tools_app, tools=[CALCULATOR]).json()
    assert none["usage"]["prompt_tokens"] == plain["usage"]["prompt_tokens"] < auto["usage"]["prompt_tokens"]
    assert "tool_calls" not in none["choices"][0]["message"]


@pytest.mark.parametrize("choice", ["required", {"type": "function", "function": {"name": "weather"}}])
def test_a_forced_call_cut_short_comes_back_as_text(no_think_app, choice):
    # weather's two required arguments cannot be written in 4 tokens: the begun call is text, not a 500
    r = _post(no_think_app, tools=[WEATHER], tool_choice=choice)
    assert r.status_code == 200
    choice = r.json()["choices"][0]
    assert choice["message"]["content"].startswith('<tool_call>{"name": "weather", "arguments": {"')
    assert "tool_calls" not in choice["message"] and choice["finish_reason"] == "length"


def test_a_thinking_model_may_think_before_a_forced_call():
    # the grammar of a forced call for a model that knows <think>: the answer begins with <think> or
    # <tool_call> (special tokens as grammar markers), any text thinks, then the call as the schema says
    from zerollm.serve.schemas import ChatRequest
    from zerollm.serve.tools import tool_plan
    sid = lambda t: chat.special_id(THINKER, t)
    for choice in ("required", {"type": "function", "function": {"name": "calculator"}}):
        plan = tool_plan(THINKER, ChatRequest.model_validate({"messages": ASK, "tools": [CALCULATOR, WEATHER],
                                                               "tool_choice": choice}))
        index, call = plan.grammar, '<tool_call>{"name": "calculator", "arguments": {"expression": "1"}}'
        assert plan.forced == "" and plan.forced_ids(THINKER) == []            # nothing forced into the prompt
        assert sorted(index.row(index.start).ids) == [sid(chat.THINK), sid(chat.TOOL_CALL)]
        for text in ("<think>12*34: 乘法\n</think>" + call, call):
            state = index.start
            for t in THINKER.encode(text, allowed_special="all"):
                state = index.next_state(state, t)
                assert state >= 0, text
            assert index.finished(state)
        inside = index.row(index.next_state(index.start, sid(chat.THINK))).ids
        assert sid(chat.THINK_END) in inside and sid(chat.TOOL_CALL) not in inside and 255 not in inside
        weather = '<tool_call>{"name": "weather", "arguments": {"city": "Rome", "days": 2}}'
        state = index.start
        for t in THINKER.encode(weather, allowed_special="all"):
            state = index.next_state(state, t)
        assert (state >= 0 and index.finished(state)) == (choice == "required")
    plan = tool_plan(NO_THINKER, ChatRequest.model_validate({"messages": ASK, "tools": [CALCULATOR],
                                                              "tool_choice": "required"}))
    assert plan.forced.startswith("<tool_call>") and plan.forced_ids(NO_THINKER)[0] == chat.special_id(
        NO_THINKER, chat.TOOL_CALL)                                          # no thinking: the call starts it


THINKER = chat.prepare_tokenizer(ByteTokenizer(), needs=("think", "tools"))
NO_THINKER = chat.prepare_tokenizer(ByteTokenizer(), needs=("tools",))
DICE = {"type": "function", "function": {"name": "dice", "parameters": {
    "type": "object", "properties": {"sides": {"type": "integer", "enum": [6, 20]}}, "required": ["sides"]}}}


@pytest.mark.parametrize("seed", range(3))
@pytest.mark.parametrize("stream", [False, True])
def test_tool_choice_required_makes_even_a_random_model_write_a_valid_call(no_think_app, seed, stream):
    # the arguments have a few possible values: a random model finishes them within 70 tokens (bytes); a
    # model without thinking (one that thinks may think first: test_a_thinking_model_may_think_before_...)
    tools_app = no_think_app
    body = {"messages": ASK, "max_tokens": 70, "temperature": 1, "seed": seed, "tools": [DICE, WEATHER],
            "tool_choice": {"type": "function", "function": {"name": "weather"}} if seed == 2 else "required"}
    if stream:
        events = [json.loads(line[6:]) for line in tools_app.post("/v1/chat/completions", json={**body, "stream": True})
                  .text.splitlines() if line.startswith("data: {")]
        deltas = [e["choices"][0]["delta"] for e in events]
        calls = [c for d in deltas for c in d.get("tool_calls", ())]
        name, arguments = calls[0]["function"]["name"], "".join(c["function"]["arguments"] for c in calls)
        content, finish = "".join(d.get("content") or "" for d in deltas), events[-1]["choices"][0]["finish_reason"]
    else:
        choice = tools_app.post("/v1/chat/completions", json=body).json()["choices"][0]
        [call], content, finish = choice["message"]["tool_calls"], choice["message"]["content"], choice["finish_reason"]
        name, arguments = call["function"]["name"], call["function"]["arguments"]
    assert (content or "", finish) == ("", "tool_calls")
    if name == "weather":
        args = json.loads(arguments)
        assert args["city"] in ("Paris", "Rome") and args["days"] in (1, 2, 3)
    else:
        assert name == "dice" and json.loads(arguments) in ({"sides": 6}, {"sides": 20})


# ----------------------------------------------------------------------------
# the whole loop, with the openai client, against a served model that learned to call the calculator

@pytest.fixture(scope="module")
def client(tmp_path_factory):
    run = tiny_tool_run(tmp_path_factory)
    with server(run, "--max-batch", "4", source="--ckpt") as (url, proc):
        yield openai.OpenAI(base_url=url + "/v1", api_key="unused", max_retries=0, timeout=60)
        assert proc.poll() is None


def calculator(expression):
    """The client's own tool: "A*B"."""
    a, b = expression.split("*")
    return str(int(a) * int(b))


def _streamed_choice(stream):
    """An openai stream -> (reasoning, content, calls [(id, name, arguments)], finish_reason)."""
    reasoning, content, calls, finish = "", "", {}, None
    for chunk in stream:
        choice = chunk.choices[0]
        delta = choice.delta.model_dump()
        reasoning += delta.get("reasoning_content") or ""
        content += delta.get("content") or ""
        for c in choice.delta.tool_calls or ():
            if c.index not in calls:
                assert c.id.startswith("call_") and c.type == "function" and c.function.arguments == ""
                calls[c.index] = [c.id, c.function.name, ""]
            else:
                calls[c.index][2] += c.function.arguments
        finish = choice.finish_reason or finish
    return reasoning, content, [tuple(c) for c in calls.values()], finish


@pytest.mark.slow
@pytest.mark.parametrize("stream", [False, True])
@pytest.mark.parametrize("question, answer", TOOL_PROBLEMS)
def test_the_openai_client_drives_the_tool_loop(client, stream, question, answer):
    messages = [{"role": "user", "content": question + "=?"}]
    ask = dict(model="run", tools=[CALCULATOR], temperature=0)
    if stream:
        reasoning, content, calls, finish = _streamed_choice(
            client.chat.completions.create(messages=messages, stream=True, **ask))
        [(cid, name, arguments)] = calls
        # the thinking goes back too, as the non-streamed message holds it (the model learned it in context)
        messages.append({"role": "assistant", "content": None, "reasoning_content": reasoning, "tool_calls": [
            {"id": cid, "type": "function", "function": {"name": name, "arguments": arguments}}]})
    else:
        reply = client.chat.completions.create(messages=messages, **ask)
        choice = reply.choices[0]
        reasoning, content, finish = choice.message.reasoning_content, choice.message.content, choice.finish_reason
        assert reply.usage.completion_tokens_details.reasoning_tokens == 6          # <think> c a l c </think>
        [call] = choice.message.tool_calls
        cid, name, arguments = call.id, call.function.name, call.function.arguments
        messages.append(choice.message.model_dump(exclude_none=True))
    assert (reasoning, content or "", finish, name) == ("calc", "", "tool_calls", "calculator")
    result = calculator(**json.loads(arguments))
    assert result == answer
    messages.append({"role": "tool", "tool_call_id": cid, "content": result})
    if stream:
        reasoning, content, calls, finish = _streamed_choice(
            client.chat.completions.create(messages=messages, stream=True, **ask))
    else:
        choice = client.chat.completions.create(messages=messages, **ask).choices[0]
        reasoning, content, calls, finish = (choice.message.reasoning_content, choice.message.content,
                                             choice.message.tool_calls or [], choice.finish_reason)
    assert (reasoning, content, calls, finish) == ("ok", answer, [], "stop")


@pytest.mark.slow
@pytest.mark.parametrize("stream", [False, True])
def test_a_forced_call_of_the_trained_model_is_a_call(client, stream):
    # forced, the model still thinks first as it learned ("calc"), then writes its call, which the grammar
    # keeps to the schema: the call it learned, whole
    ask = dict(model="run", messages=[{"role": "user", "content": "56*78=?"}], tools=[CALCULATOR], temperature=0,
               tool_choice={"type": "function", "function": {"name": "calculator"}})
    if stream:
        reasoning, content, [(_, name, arguments)], finish = _streamed_choice(
            client.chat.completions.create(stream=True, **ask))
    else:
        choice = client.chat.completions.create(**ask).choices[0]
        content, finish, [call] = choice.message.content, choice.finish_reason, choice.message.tool_calls
        reasoning, name, arguments = choice.message.reasoning_content, call.function.name, call.function.arguments
    assert (reasoning, content or "", finish, name) == ("calc", "", "tool_calls", "calculator")
    assert json.loads(arguments) == {"expression": "56*78"}


@pytest.mark.slow
@pytest.mark.parametrize("stream", [False, True])
def test_parallel_tool_calls_false_ends_the_answer_at_the_end_of_the_first_call(client, stream):
    # the trained model writes its call, then <|end|>: with parallel_tool_calls false the answer ends at
    # </tool_call> (one token sooner), as OpenAI's one-call answer does, and the call still comes back whole
    ask = dict(model="run", messages=[{"role": "user", "content": "12*34=?"}], tools=[CALCULATOR], temperature=0)
    runs = {}
    for parallel in (True, False):
        if stream:
            chunks = list(client.chat.completions.create(stream=True, parallel_tool_calls=parallel,
                                                         stream_options={"include_usage": True}, **ask))
            _, _, calls, finish = _streamed_choice(c for c in chunks if c.choices)
            runs[parallel] = ([(n, a) for _, n, a in calls], finish, chunks[-1].usage.completion_tokens)
        else:
            r = client.chat.completions.create(parallel_tool_calls=parallel, **ask)
            calls = [(c.function.name, c.function.arguments) for c in r.choices[0].message.tool_calls]
            runs[parallel] = (calls, r.choices[0].finish_reason, r.usage.completion_tokens)
    assert runs[True][:2] == runs[False][:2] == ([("calculator", '{"expression": "12*34"}')], "tool_calls")
    assert runs[False][2] == runs[True][2] - 1
