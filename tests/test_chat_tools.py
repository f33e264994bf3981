"""`zerollm chat` with a model that thinks and calls tools (#58): the calculator runs, the call and its
response are shown as they happen, the thinking is dimmed on a terminal, and the turn is kept as
messages (what /save writes)."""

import io
import json

import numpy as np
import pytest

from serve_helpers import tiny_chat_model, tiny_tool_run
from tiny_runs import run_main
from zerollm.align.tools import load_tools
from zerollm.generation.sample import Sampling
from zerollm.interop.opening import Source, open_model
from zerollm.data import chat
from zerollm.serve.repl import DIM, UNDIM, Answers, ChatTools, Conversation, _Shown, repl
from zerollm.tokenizers import ByteTokenizer

SLOW = pytest.mark.slow           # a model fine-tuned in the test (seconds)


@pytest.fixture(scope="module")
def tool_model(tmp_path_factory):
    opened = open_model(Source(ckpt=str(tiny_tool_run(tmp_path_factory))))
    return opened.model, opened.tokenizer


class Terminal(io.StringIO):
    def isatty(self):
        return True


def _chat(model, tok, lines, out, tools, max_new=100):
    conv = Conversation(tok, model.config.block_size, tools=tools.box.specs() if tools.box else ())
    answers = Answers(Sampling(temperature=0), max_new, np.random.default_rng(0))
    lines = iter(lines)

    def read(prompt):
        try:
            return next(lines)
        except StopIteration:
            raise EOFError from None

    assert repl(model, tok, conv, answers, read=read, out=out, tools=tools) == 0
    return conv


@SLOW
@pytest.mark.parametrize("tty", [False, True])
def test_the_calculator_runs_and_the_turn_is_shown_as_it_happens(tool_model, tty):
    model, tok = tool_model
    out = Terminal() if tty else io.StringIO()
    conv = _chat(model, tok, ["12*34=?"], out, ChatTools(load_tools()))
    dim, undim = (DIM, UNDIM) if tty else ("", "")
    assert (f"\n{dim}(thinking) calc{undim}\n[tool call] calculator {{\"expression\": \"12*34\"}}\n[calculator] 408\n"
            f"{dim}(thinking) ok{undim}\n408\n") in out.getvalue()
    [(user, parts)] = conv.turns
    call = parts[0]["tool_calls"][0]
    assert user == "12*34=?" and [p["role"] for p in parts] == ["assistant", "tool", "assistant"]
    assert call["function"] == {"name": "calculator", "arguments": {"expression": "12*34"}}
    assert parts[1] == {"role": "tool", "tool_call_id": call["id"], "content": "408"}
    assert parts[2] == {"role": "assistant", "content": "408", "reasoning_content": "ok"}


@SLOW
def test_max_tool_calls_0_shows_the_call_but_does_not_run_it(tool_model):
    model, tok = tool_model
    out = io.StringIO()
    conv = _chat(model, tok, ["12*34=?"], out, ChatTools(load_tools(), max_calls=0))
    assert "[tool call] calculator" in out.getvalue() and "not run: raise --max-tool-calls" in out.getvalue()
    assert "[calculator]" not in out.getvalue() and len(conv.turns[0][1]) == 1


@SLOW
def test_save_writes_the_tool_turn_as_messages(tool_model, tmp_path):
    model, tok = tool_model
    conv = _chat(model, tok, ["56*78=?"], io.StringIO(), ChatTools(load_tools()))
    conv.save(str(tmp_path / "talk.jsonl"))
    row = json.loads((tmp_path / "talk.jsonl").read_text())
    assert [m["role"] for m in row["messages"]] == ["user", "assistant", "tool", "assistant"]
    assert row["messages"][2]["content"] == "4368" and row["messages"][3]["content"] == "4368"


@SLOW
def test_the_command_runs_a_user_tool_module_beside_the_calculator(tool_model, tmp_path, capsys, monkeypatch):
    module = tmp_path / "mytools.py"
    module.write_text('TOOLS = [{"type": "function", "function": {"name": "up"}}]\ndef up():\n    return "UP"\n')
    box = load_tools(str(module))
    assert box.names == ("calculator", "up")
    from zerollm.data.chat import ToolCall
    assert box.run(ToolCall("up", {})) == "UP"
    run = tiny_tool_run(None)                      # made by the fixture already
    monkeypatch.setattr("sys.stdin", io.StringIO("12*34=?\n"))
    # the model learned a prompt with the calculator alone: what it answers beside a second tool is not asked
    code, out, err = run_main(["chat", "--ckpt", run, "--tools", module, "--temperature", "0", "--max-new-tokens", "40",
                               "--threads", "1"], capsys)
    assert code == 0 and err == "" and "no room" not in out and "zerollm chat:" not in out.splitlines()[-1]


@SLOW
def test_tools_for_a_model_that_never_learned_them_is_one_line(tmp_path, capsys, monkeypatch):
    folder = tiny_chat_model(tmp_path)
    monkeypatch.setattr("sys.stdin", io.StringIO("hi\n"))
    code, out, err = run_main(["chat", "--hf", folder, "--tools", tmp_path / "none.py"], capsys)
    assert code != 0 and "not trained with tools" in err and len(err.strip().splitlines()) == 1
    code, out, err = run_main(["chat", "--hf", folder, "--max-new-tokens", "4"], capsys)     # and without: it chats
    assert code == 0 and err == ""



@pytest.mark.parametrize("size", [1, 5, 100])
def test_a_thinking_model_without_tools_shows_its_thinking_and_a_call_as_text(size):
    # ChatTools() without a box: the thinking is read, a call the model writes anyway is its text
    text = '<think>two times six</think>12<tool_call>{"name": "calculator", "arguments": {}}</tool_call>'
    out = io.StringIO()
    shown = _Shown(out, ChatTools().plan(chat.prepare_tokenizer(ByteTokenizer(), needs=("think",))))
    for k in range(0, len(text), size):
        shown.write(text[k:k + size])
    shown.end("stop")
    assert out.getvalue() == "(thinking) two times six\n12" + text[text.index("<tool_call>"):]


class _Broken:
    """A toolbox whose tool fails as a user's tool does past its --tool-timeout (zerollm.align.tools)."""

    def __init__(self):
        self.box = load_tools()
        self.names = self.box.names

    def specs(self):
        return self.box.specs()

    def run(self, call):
        from zerollm.io.errors import ZeroLLMError
        raise ZeroLLMError(f"the tool {call.name!r} did not finish within --tool-timeout 1 s")


@SLOW
def test_a_failing_tool_is_one_line_and_the_chat_goes_on(tool_model):
    model, tok = tool_model
    out = io.StringIO()
    conv = _chat(model, tok, ["12*34=?", "/help"], out, ChatTools(_Broken()))
    shown = out.getvalue()
    assert "zerollm chat: the tool 'calculator' did not finish within --tool-timeout 1 s\n" in shown
    assert shown.count("commands: /reset") == 2                 # the /help after it was answered
    [(_, parts)] = conv.turns
    assert [p["role"] for p in parts] == ["assistant"] and parts[0]["tool_calls"]
