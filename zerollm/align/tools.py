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

It runs behind the guard of user reward functions (zerollm.align.guard.call_user): its import and
every call have a time limit (``timeout``), and SIGTERM stops at once. A tool says that the model's
arguments were wrong by raising ValueError (or ZeroLLMError; a TypeError, what a wrong type of argument
raises, counts the same): the model gets "error: ..." as the tool's response, as it does for a call of
an unknown tool or with wrong argument names. Anything else (another
exception, sys.exit, a timeout, a result that is not text or a number) is a bug of the tool and stops
with one line that names it.
"""

import importlib
import importlib.util
import math
import os
import sys
import warnings
from dataclasses import dataclass
from fractions import Fraction
from typing import Callable

from zerollm.align.guard import DEFAULT_TIMEOUT, call_user
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
            # the tool's way of saying the arguments were wrong; a TypeError is what a wrong type of argument
            # raises in most Python (len(5), "a" + 1): the model asked wrongly, the run goes on
            except (ValueError, TypeError, ZeroLLMError) as err:
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


# ----------------------------------------------------------------------------
# a turn that calls tools: rollouts, evaluation

@dataclass(frozen=True)
class ToolLoop:
    """How run_tool_loop answers: ``completions`` (zerollm.generation.decode.Completions: at most
    max_new_tokens generated in all of a turn's segments together, the sampling, the stop ids = the
    end-of-turn token), at most ``max_tool_calls`` tool calls run per answer, within ``block_size``."""
    completions: object
    block_size: int
    max_tool_calls: int = 3


@dataclass(frozen=True)
class ToolRollout:
    """One answer with its tool turns: ``ids`` everything after the prompt, ``learned`` True on the
    tokens the model wrote (False on the tool responses and the markers around them: never learned,
    never in the KL), ``reply`` the last assistant segment parsed (its content is the answer)."""
    ids: tuple
    learned: tuple
    reply: object
    calls: int = 0            # tool calls run
    attempted: int = 0        # <tool_call> the model opened, in every segment
    valid: int = 0            # of those, calls the parser accepted
    think_tokens: int = 0     # tokens inside <think>...</think>, every segment
    format_ok: bool = False   # every segment ended at <|end|>, every call parsed, every think block closed


def _round_seed(seed, k):
    """Segment k of an answer draws from (seed..., k); segment 0 from the seed itself, so an answer that
    calls no tool is exactly what plain sampling gives."""
    if k == 0:
        return seed
    return (*(seed if isinstance(seed, (tuple, list)) else (seed,)), 1000 + k)


_UNKNOWN_SEEN = set()       # characters a warning has named already (each is named once a process)


def _encode_known(tokenizer, text):
    """A tool's response as ids: a char tokenizer drops the characters it has never seen (a tool may
    answer with any text; the model can only read what its vocabulary holds), and a warning names them,
    each character once, so a model that reads less than the tool said is never a silent surprise."""
    try:
        return tokenizer.encode(text)
    except ZeroLLMError:
        ids, dropped = [], []
        for ch in text:
            try:
                ids += tokenizer.encode(ch)
            except ZeroLLMError:
                dropped.append(ch)
        new = sorted(set(dropped) - _UNKNOWN_SEEN)
        if new:
            _UNKNOWN_SEEN.update(new)
            shown = " ".join(repr(ch) for ch in new[:5]) + (" ..." if len(new) > 5 else "")
            warnings.warn(f"a tool's response holds characters the model's vocabulary does not have ({shown}); "
                          "they are left out of what the model reads (a char tokenizer knows only the "
                          "characters of its training text)", stacklevel=2)
        return ids


def tool_turn_ids(tokenizer, responses):
    """The tool turn after a call, and the opening of the next assistant segment:
    <|user|><tool_response>r1</tool_response>...<|end|><|assistant|> (the template's rendering)."""
    from zerollm.data import chat
    sid = lambda t: chat.special_id(tokenizer, t)
    ids = [sid(chat.USER)]
    for text in responses:
        ids += [sid(chat.TOOL_RESPONSE), *_encode_known(tokenizer, text), sid(chat.TOOL_RESPONSE_END)]
    return ids + [sid(chat.END), sid(chat.ASSISTANT)]


def run_tool_loop(sample, tokenizer, prompts, seeds, box, loop):
    """Answer every prompt, running the tools the answers call -> [ToolRollout].

    ``sample(prompts, seeds, how)`` is the one decode loop's batch call (zerollm.generation.decode.
    sample_completions, or rollouts.sample over the shard threads): every round submits the segment of
    each unfinished answer as one request, all answers of a round batched together. A segment ends at
    <|end|>; when its text (zerollm.data.chat.parse_reply) holds tool calls and fewer than
    ``max_tool_calls`` have run, ``box`` runs them, the tool turn is appended and the answer goes on.
    ``box``: a Toolbox, or a list of one per prompt; None: a plain turn, parsed, no tools run. The tools
    run here, in the caller's thread."""
    from dataclasses import replace as with_fields
    from zerollm.data import chat
    end, think, think_end = chat.end_id(tokenizer), None, None
    if chat.has_thinking(tokenizer):
        think, think_end = chat.special_id(tokenizer, chat.THINK), chat.special_id(tokenizer, chat.THINK_END)
    boxes = list(box) if isinstance(box, (list, tuple)) else [box] * len(prompts)
    state = [dict(ids=[], learned=[], calls=0, attempted=0, valid=0, think=0, ok=True, reply=None, done=False)
             for _ in prompts]
    budget = loop.completions.max_new_tokens
    for k in range(loop.max_tool_calls + 1):
        active = [i for i, s in enumerate(state) if not s["done"]]
        groups = {}
        for i in active:
            used = sum(state[i]["learned"])
            room = loop.block_size + 1 - len(prompts[i]) - len(state[i]["ids"])
            n_new = min(budget - used, room)
            if n_new < 1:
                state[i]["done"] = True
                continue
            groups.setdefault(n_new, []).append(i)
        if not groups:
            break
        for n_new, rows in sorted(groups.items()):
            how = with_fields(loop.completions, max_new_tokens=n_new)
            outs = sample([list(prompts[i]) + state[i]["ids"] for i in rows], [_round_seed(seeds[i], k) for i in rows], how)
            for i, seg in zip(rows, outs):
                names = boxes[i].names if boxes[i] is not None else ()
                _segment_done(state[i], [int(t) for t in seg], tokenizer, (end, think, think_end), names)
        for i in active:
            s = state[i]
            if s["done"] or boxes[i] is None:
                s["done"] = True
                continue
            calls = s["reply"].tool_calls
            if not calls or s["calls"] >= loop.max_tool_calls:
                s["done"] = True
                continue
            calls = calls[:loop.max_tool_calls - s["calls"]]
            turn = tool_turn_ids(tokenizer, [boxes[i].run(call) for call in calls])
            s["calls"] += len(calls)
            if len(prompts[i]) + len(s["ids"]) + len(turn) >= loop.block_size:
                s["done"] = True          # no room for an answer after the tool's: the turn ends here
                continue
            s["ids"] += turn
            s["learned"] += [False] * len(turn)
    return [ToolRollout(tuple(s["ids"]), tuple(s["learned"]), s["reply"] or chat.Reply(""), s["calls"], s["attempted"],
                        s["valid"], s["think"], s["ok"]) for s in state]


def _segment_done(s, seg, tokenizer, specials, names):
    """Append one generated segment to an answer's state and parse it."""
    from zerollm.data import chat
    end, think, think_end = specials
    s["ids"] += seg
    s["learned"] += [True] * len(seg)
    ended = bool(seg) and seg[-1] == end
    text = tokenizer.decode(seg[:-1] if ended else seg)
    reply = chat.parse_reply(text, names)
    opened = text.count(chat.TOOL_CALL)
    s["attempted"] += opened
    s["valid"] += len(reply.tool_calls)
    if think is not None and think in seg:
        start = seg.index(think)
        stop = seg.index(think_end, start) if think_end in seg[start:] else len(seg)
        s["think"] += stop - start - 1
    closed = reply.reasoning is None or chat.THINK_END in text
    s["ok"] = s["ok"] and ended and closed and opened == len(reply.tool_calls)
    s["reply"] = reply
    if not ended:
        s["done"] = True


def tool_stats(answers):
    """What a batch of ToolRollouts did: mean tool calls run per answer, the share of opened calls that
    parsed (1.0 when none was opened), the share of answers in the template's form, mean think tokens and
    mean tokens the model wrote (tool responses left out)."""
    n = max(len(answers), 1)
    attempted = sum(a.attempted for a in answers)
    return {"tool_calls": sum(a.calls for a in answers) / n,
            "tool_call_valid": sum(a.valid for a in answers) / attempted if attempted else 1.0,
            "format_ok": sum(a.format_ok for a in answers) / n,
            "think_tokens": sum(a.think_tokens for a in answers) / n,
            "response_tokens": sum(sum(a.learned) for a in answers) / n}       # what the model wrote
