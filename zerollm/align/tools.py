"""Tools a model may call (#58): the built-in calculator, and your own tools from a Python module.

    box = load_tools("my_tools.py")          # the calculator plus the tools of my_tools.py (or load_tools())
    box.specs()                              # OpenAI's tool list, for the prompt (zerollm.data.chat)
    box.run(chat.ToolCall("calculator", {"expression": "12*34"}))   # -> "408"

The calculator reads arithmetic itself, never with eval: whole numbers written with the ASCII digits
0-9, + - * / ( ) and ** (a power with a whole exponent from 0 to MAX_EXPONENT whose result stays within
MAX_RESULT_BITS). Division is exact: 7/2 is "7/2", 8/2 is "4". Everything else is refused with a line
that says what is allowed, and the limits (MAX_EXPRESSION characters, MAX_DEPTH parentheses or signs
deep, MAX_RESULT_BITS) keep every answer to microseconds, whatever the expression.

Your tools: a module that lists OpenAI tool specs in ``TOOLS`` and defines a function of the same name for
each, called with the call's arguments as keywords and returning a string (or a whole number or a finite
float, written as text):

    TOOLS = [{"type": "function", "function": {"name": "reverse", "description": "the text backwards",
              "parameters": {"type": "object", "properties": {"text": {"type": "string"}}}}}]
    def reverse(text):
        return text[::-1]

It runs behind the guard of user reward functions (zerollm.align.rl.rewards.call_user): its import and
every call have a time limit (``timeout``), and SIGTERM stops at once. A tool says that the model's
arguments were wrong by raising ValueError (or ZeroLLMError): the model gets "error: ..." as the tool's
response, as it does for a call of an unknown tool or with wrong argument names. Anything else (another
exception, sys.exit, a timeout, a result that is not text or a number) is a bug of the tool and stops
with one line that names it.
"""

import importlib
import importlib.util
import math
import os
import sys
from dataclasses import dataclass
from fractions import Fraction
from typing import Callable

from zerollm.align.rl.rewards import DEFAULT_TIMEOUT, call_user
from zerollm.data.formats import check_tools
from zerollm.io.errors import ZeroLLMError

MAX_EXPRESSION = 256      # characters of one calculator expression
MAX_DEPTH = 32            # parentheses and signs inside each other
MAX_EXPONENT = 400        # the largest power (the result bound stops most before this)
MAX_RESULT_BITS = 400     # numerators and denominators stay below 2**400 (about 120 digits)
MAX_RESPONSE_CHARS = 2000 # a tool's response longer than this is cut (the model's context is small)

CALCULATOR = {"type": "function", "function": {
    "name": "calculator", "description": "exact arithmetic on whole numbers: + - * / ( ) **",
    "parameters": {"type": "object", "properties": {"expression": {"type": "string"}}, "required": ["expression"]}}}


# ----------------------------------------------------------------------------
# the calculator

class _Expression:
    """A recursive-descent reader of one expression, with its depth counted (never past MAX_DEPTH)."""

    def __init__(self, text):
        self.text, self.at, self.depth = text, 0, 0

    def peek(self, token):
        return self.text.startswith(token, self.at)

    def take(self, token):
        if self.peek(token):
            self.at += len(token)
            return True
        return False

    def deeper(self):
        self.depth += 1
        if self.depth > MAX_DEPTH:
            raise ZeroLLMError(f"calculator: nested more than {MAX_DEPTH} deep; write a simpler expression")

    def expression(self):
        value = self.term()
        while self.peek("+") or self.peek("-"):
            op = self.text[self.at]
            self.at += 1
            right = self.term()
            value = _checked(value + right if op == "+" else value - right)
        return value

    def term(self):
        value = self.unary()
        while (self.peek("*") and not self.peek("**")) or self.peek("/"):
            op = self.text[self.at]
            self.at += 1
            right = self.unary()
            if op == "/" and right == 0:
                raise ZeroLLMError("calculator: division by zero")
            value = _checked(value * right if op == "*" else value / right)
        return value

    def unary(self):
        if self.peek("-") or self.peek("+"):
            sign = self.text[self.at]
            self.at += 1
            self.deeper()
            value = self.unary()
            self.depth -= 1
            return -value if sign == "-" else value
        return self.power()

    def power(self):
        base = self.atom()
        if self.take("**"):
            self.deeper()
            exponent = self.unary()          # right-associative: 2**3**2 is 2**9
            self.depth -= 1
            return _power(base, exponent)
        return base

    def atom(self):
        if self.take("("):
            self.deeper()
            value = self.expression()
            self.depth -= 1
            if not self.take(")"):
                raise ZeroLLMError(f"calculator: a '(' is not closed (at character {self.at + 1})")
            return value
        start = self.at
        while self.at < len(self.text) and self.text[self.at] in "0123456789":
            self.at += 1
        if start == self.at:
            found = repr(self.text[self.at]) if self.at < len(self.text) else "the end"
            raise ZeroLLMError(f"calculator: expected a number or '(' at character {self.at + 1}, found {found}; "
                               "write whole numbers with the digits 0-9 and + - * / ( ) **")
        return Fraction(int(self.text[start:self.at]))


def _checked(value):
    if max(value.numerator.bit_length(), value.denominator.bit_length()) > MAX_RESULT_BITS:
        raise ZeroLLMError(f"calculator: a number past 2**{MAX_RESULT_BITS} (about {int(MAX_RESULT_BITS * 0.301)} "
                           "digits); the calculator keeps to smaller numbers")
    return value


def _power(base, exponent):
    if exponent.denominator != 1 or not 0 <= exponent <= MAX_EXPONENT:
        raise ZeroLLMError(f"calculator: a power needs a whole exponent from 0 to {MAX_EXPONENT}, got {_text(exponent)}")
    bits = max(base.numerator.bit_length(), base.denominator.bit_length())
    if (bits - 1) * int(exponent) > MAX_RESULT_BITS:        # refused before it is computed
        raise ZeroLLMError(f"calculator: {_text(base)}**{_text(exponent)} is past 2**{MAX_RESULT_BITS}; "
                           "the calculator keeps to smaller numbers")
    return _checked(base ** int(exponent))


def _text(value):
    return str(value.numerator) if value.denominator == 1 else f"{value.numerator}/{value.denominator}"


def calculate(expression):
    """The exact value of an arithmetic expression, as text ("408", "7/2", "-3"); a ZeroLLMError that says
    what is allowed for anything else.

    >>> calculate("12*34"), calculate("(1+2)*-3"), calculate("7/2"), calculate("2**10")
    ('408', '-9', '7/2', '1024')
    """
    if not isinstance(expression, str):
        raise ZeroLLMError("calculator: the expression must be a string, e.g. \"12*34\"")
    if len(expression) > MAX_EXPRESSION:
        raise ZeroLLMError(f"calculator: the expression is longer than {MAX_EXPRESSION} characters")
    text = "".join(expression.split(" "))
    bad = [c for c in text if c not in "0123456789+-*/()"]
    if bad:
        raise ZeroLLMError(f"calculator: {bad[0]!r} is not allowed; write whole numbers with the digits 0-9 "
                           "and + - * / ( ) **")
    if not text:
        raise ZeroLLMError("calculator: the expression is empty")
    reader = _Expression(text)
    value = reader.expression()
    if reader.at != len(text):
        raise ZeroLLMError(f"calculator: unexpected {text[reader.at]!r} at character {reader.at + 1}")
    return _text(value)


def _calculator(expression):
    try:
        return calculate(expression)
    except ZeroLLMError as err:
        raise ValueError(str(err).removeprefix("calculator: ")) from None


# ----------------------------------------------------------------------------
# a set of tools

@dataclass(frozen=True)
class Tool:
    spec: dict                      # OpenAI's {"type": "function", "function": {"name", ...}}
    fn: Callable                    # fn(**arguments) -> str (or a number)
    user: bool = False              # user code: called behind call_user's guard


class Toolbox:
    """Tools by name; ``run(call)`` -> the text of the tool's response (never raises for a model's mistake)."""

    def __init__(self, tools, timeout=DEFAULT_TIMEOUT, flag="--tool-timeout"):
        self.tools = {t.spec["function"]["name"]: t for t in tools}
        self.timeout, self.flag = timeout, flag

    def specs(self):
        return [t.spec for t in self.tools.values()]

    @property
    def names(self):
        return tuple(self.tools)

    def run(self, call):
        """The response to one chat.ToolCall: the tool's text, or "error: ..." when the model asked wrongly."""
        tool = self.tools.get(call.name)
        if tool is None:
            return f"error: no tool named {call.name!r}; the tools are {', '.join(self.tools)}"
        spec = tool.spec["function"]
        wanted = set((spec.get("parameters") or {}).get("properties") or {})
        wrong = sorted(set(call.arguments) - wanted) if wanted else []
        if wrong:
            return f"error: {call.name} takes {', '.join(sorted(wanted))}, not {', '.join(wrong)}"
        missing = sorted(set((spec.get("parameters") or {}).get("required") or ()) - set(call.arguments))
        if missing:
            return f"error: {call.name} needs {', '.join(missing)}"

        def invoke():
            try:
                return ("ok", tool.fn(**call.arguments))
            except (ValueError, ZeroLLMError) as err:   # the tool's way of saying the arguments were wrong
                return ("error", str(err))
            except SystemExit as err:
                raise ZeroLLMError(f"called sys.exit({err.code!r}); a tool returns its response (raise "
                                   "ValueError to tell the model its arguments were wrong)") from None
        if tool.user:
            status, value = call_user(f"the tool {call.name!r}", invoke, self.timeout, self.flag)
        else:
            status, value = invoke()
        if status == "error":
            return f"error: {' '.join(value.split())}"[:MAX_RESPONSE_CHARS]
        return _response_text(call.name, value)[:MAX_RESPONSE_CHARS]


def _response_text(name, value):
    if isinstance(value, str):
        return value
    if isinstance(value, int) and not isinstance(value, bool):
        return str(value)
    if isinstance(value, float) and math.isfinite(value):
        return repr(value)
    raise ZeroLLMError(f"the tool {name!r} returned {type(value).__name__}; a tool returns a string "
                       "(or a whole number or a finite float)")


def builtin_tools():
    """The tools zerollm brings: the calculator."""
    return [Tool(CALCULATOR, _calculator)]


def load_tools(path=None, timeout=DEFAULT_TIMEOUT, flag="--tool-timeout"):
    """A Toolbox of the built-in tools plus, with ``path`` (a .py file or a module name), the module's TOOLS.
    ``flag``: the option that sets ``timeout`` (named when a tool runs past it)."""
    tools = builtin_tools()
    if path:
        tools += _user_tools(os.fspath(path), timeout, flag)
    names = [t.spec["function"]["name"] for t in tools]
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice:
        raise ZeroLLMError(f"--tools {path}: the tool name(s) {', '.join(twice)} are given twice (calculator is "
                           "built in); rename yours")
    return Toolbox(tools, timeout, flag)


def _import(path):
    if path.endswith(".py"):
        if not os.path.isfile(path):
            raise ZeroLLMError(f"no such file {path}")
        name = "zerollm_user_tools_" + os.path.basename(path)[:-3]
        spec = importlib.util.spec_from_file_location(name, path)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        return module
    if os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())
    return importlib.import_module(path)


def _user_tools(path, timeout, flag):
    try:
        module = call_user(f"--tools {path}: importing it", lambda: _import(path), timeout, flag)
    except ZeroLLMError as err:
        raise ZeroLLMError(f"{err}; fix the module (or the path) and start again") from None
    specs = getattr(module, "TOOLS", None)
    form = '[{"type": "function", "function": {"name": ..., "description": ..., "parameters": {...}}}]'
    if not isinstance(specs, list) or not specs:
        raise ZeroLLMError(f"--tools {path}: the module needs a list TOOLS of tool specs like {form}")
    check_tools(specs, f"--tools {path}")
    tools = []
    for spec in specs:
        name = spec["function"]["name"]
        fn = getattr(module, name, None)
        if not callable(fn):
            raise ZeroLLMError(f"--tools {path}: TOOLS lists {name!r} but the module has no function of that name")
        tools.append(Tool(spec, fn, user=True))
    return tools
