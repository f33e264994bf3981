"""The tools a model may call (#58): the calculator on fair and hostile expressions, and user tools behind
the guard of user code (timeouts, exceptions, sys.exit, wrong outputs, SIGTERM)."""

import os
import signal
import textwrap

import pytest

from zerollm.align import tools
from zerollm.data.chat import ToolCall
from zerollm.io.errors import ZeroLLMError


@pytest.mark.parametrize("expression, value", [
    ("12*34", "408"), ("123456789 * 987654321", "121932631112635269"), ("(1+2)*-3", "-9"), ("7/2", "7/2"),
    ("8/2", "4"), ("2**10", "1024"), ("2**3**2", "512"), ("-2**2", "-4"), ("1-2-3", "-4"), ("2*(3+4)-5/5", "13"),
    ("0**0", "1"), ("(" * 30 + "1" + ")" * 30, "1"), ("10**100", "1" + "0" * 100), ("--3", "3"),
])
def test_the_calculator_answers_right(expression, value):
    assert tools.calculate(expression) == value


@pytest.mark.parametrize("expression, fragment", [
    ("9**9**9", "whole exponent from 0 to 400"), ("4**201", "past 2**400"), ("10**10**10**10", "whole exponent"),
    ("3**300", "past 2**400"), ("2**-1", "whole exponent from 0 to 400"), ("2**(1/2)", "whole exponent"),
    ("1**401", "whole exponent"),
    ("(" * 1000 + "1" + ")" * 1000, "longer than 256"), ("(" * 40 + "1" + ")" * 40, "nested more than 32"),
    ("-" * 100 + "1", "nested more than 32"), ("1/0", "division by zero"), ("1/(2-2)", "division by zero"),
    ("١٢+1", "'١' is not allowed"), ("１２", "is not allowed"), ("__import__('os')", "'_' is not allowed"),
    ("1e5", "'e' is not allowed"), ("1.5", "'.' is not allowed"), ("", "empty"), ("(1+2", "not closed"),
    ("1+", "expected a number"), ("1)", "unexpected ')'"), ("(10**100)*(10**100)*(10**100)*(10**100)", "past 2**400"),
])
def test_the_calculator_refuses_hostile_expressions(expression, fragment):
    with pytest.raises(ZeroLLMError, match="calculator: ") as err:
        tools.calculate(expression)
    assert fragment in str(err.value) and "\n" not in str(err.value)


def test_a_model_s_bad_call_gets_an_error_response_not_an_exception():
    box = tools.load_tools()
    assert box.names == ("calculator",) and box.specs() == [tools.CALCULATOR]
    assert box.run(ToolCall("calculator", {"expression": "6*7"})) == "42"
    assert box.run(ToolCall("calculator", {"expression": "1/0"})) == "error: division by zero"
    assert box.run(ToolCall("calculator", {"expression": 5})).startswith("error: the expression must be a string")
    assert box.run(ToolCall("calculator", {"expr": "1"})) == "error: calculator takes expression, not expr"
    assert box.run(ToolCall("calculator", {})) == "error: calculator needs expression"
    assert box.run(ToolCall("search", {"q": "x"})).startswith("error: no tool named 'search'")


USER_TOOLS = '''
import os, signal, sys, time
def spec(name):
    return {"type": "function", "function": {"name": name, "parameters": {"type": "object",
            "properties": {"text": {"type": "string"}}}}}
TOOLS = [spec(n) for n in ("reverse", "picky", "hang", "boom", "leave", "dict", "term", "big")]
def reverse(text): return text[::-1]
def picky(text):
    raise ValueError("text must be short")
def hang(text): time.sleep(30)
def boom(text): raise KeyError(text)
def leave(text): sys.exit(3)
def dict(text): return {"a": 1}
def term(text): os.kill(os.getpid(), signal.SIGTERM)
def big(text): return "x" * 10**6
'''


@pytest.fixture
def user_box(tmp_path):
    path = tmp_path / "my_tools.py"
    path.write_text(USER_TOOLS)
    return tools.load_tools(path, timeout=0.5)


def test_user_tools_run_and_their_failures_are_one_line(user_box):
    assert user_box.names[:2] == ("calculator", "reverse")
    assert user_box.run(ToolCall("reverse", {"text": "春夏"})) == "夏春"
    assert user_box.run(ToolCall("picky", {"text": "x"})) == "error: text must be short"   # the model's mistake
    assert len(user_box.run(ToolCall("big", {"text": "x"}))) == tools.MAX_RESPONSE_CHARS
    for name, fragment in [("hang", "did not finish within --tool-timeout 0.5 s"), ("boom", "raised KeyError"),
                           ("leave", r"called sys.exit\(3\); a tool returns its response"), ("dict", "returned dict; a tool returns a string")]:
        with pytest.raises(ZeroLLMError, match=fragment) as err:
            user_box.run(ToolCall(name, {"text": "x"}))
        assert f"'{name}'" in str(err.value) and "\n" not in str(err.value)
    with pytest.raises(KeyboardInterrupt):                        # SIGTERM stops at once
        user_box.run(ToolCall("term", {"text": "x"}))
    assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL or callable(signal.getsignal(signal.SIGTERM))


@pytest.mark.parametrize("source, fragment", [
    ("TOOLS = 3", "needs a list TOOLS"), ("raise RuntimeError('no')", "raised RuntimeError: no"),
    ("TOOLS = [{'type': 'function', 'function': {'name': 'f'}}]", "has no function of that name"),
    ("TOOLS = [{'name': 'f'}]", r"tools\[0\] must be like"),
    ("TOOLS = [{'type': 'function', 'function': {'name': 'calculator'}}]\ndef calculator(): pass", "given twice"),
    ("def f(:", "SyntaxError"),
])
def test_bad_tool_modules_are_one_line(tmp_path, source, fragment):
    path = tmp_path / "bad_tools.py"
    path.write_text(textwrap.dedent(source))
    with pytest.raises(ZeroLLMError, match=fragment):
        tools.load_tools(path)
    with pytest.raises(ZeroLLMError, match="no such file"):
        tools.load_tools(tmp_path / "missing.py")


def test_a_tool_called_with_a_wrong_type_tells_the_model_and_the_run_goes_on(tmp_path):
    # len("abc") works; len(5) raises TypeError inside the tool: the model asked wrongly (#58)
    path = tmp_path / "typed_tools.py"
    path.write_text('TOOLS = [{"type": "function", "function": {"name": "count", "parameters": {"type": "object", '
                    '"properties": {"text": {"type": "string"}}}}}]\ndef count(text):\n    return len(text)\n')
    box = tools.load_tools(path, timeout=5)
    assert box.run(ToolCall("count", {"text": "abc"})) == "3"
    assert box.run(ToolCall("count", {"text": 5})) == "error: object of type 'int' has no len()"
    assert box.run(ToolCall("count", {"text": None})) == "error: object of type 'NoneType' has no len()"
