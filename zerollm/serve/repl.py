"""The terminal chat of ``zerollm chat``: a conversation kept in the chat template, answers streamed.

    conv = Conversation(tok, block_size=256, system="You write poems.")
    ids, dropped = conv.prompt("藏头诗：春夏秋冬", max_new=100)   # the prompt; oldest turns dropped to fit
    conv.add("藏头诗：春夏秋冬", answer)
    repl(model, tok, conv, Answers(Sampling(temperature=0.7), 100, np.random.default_rng(0)))   # zerollm chat

Each answer is one request of zerollm.generation.batching.Scheduler, streamed as a batch of one: its
TextStream writes whole characters (escaped for the terminal), the end-of-turn id ends it.

A model trained with thinking or tools (zerollm.data.chat.has_thinking / has_tools) gets a ``box`` of tools
(zerollm.align.tools: the calculator, and `--tools module.py`): its answer is read as it streams by
zerollm.serve.tools.Answer (the server's reader, over the template's one parser), the thinking shown
dimmed, each tool call printed once it is whole, run, and its response shown; then the model goes on
with the response in its context, up to ``max_tool_calls`` calls a turn.

Commands: /reset (forget the turns), /system TEXT (set or, without TEXT, clear the system message),
/save FILE (the conversation as one TRL "messages" JSONL row), /exit. Ctrl-C while an answer is
written stops that answer (what was shown is kept); at the prompt it clears the line.

When the conversation no longer fits the context the oldest turns (a user message and its answer)
are dropped whole, with a note; the system message always stays. A base model (no template tokens)
is refused unless ``raw``: then the turns are plain text one after another, continued by the model.
"""

import json
import os
import re
import sys
from dataclasses import dataclass, replace

import numpy as np

from zerollm.data import chat
from zerollm.generation.batching import Context, Request, Scheduler
from zerollm.generation.sample import Sampling
from zerollm.generation.text import TextStream
from zerollm.io.errors import ZeroLLMError
from zerollm.io.fileio import atomic_write, refuse_non_regular
from zerollm.io.outdir import check_outside_runs
from zerollm.serve.tools import Answer, ToolPlan, call_id

HELP = "commands: /reset  /system TEXT  /save FILE  /help  /exit   (Ctrl-C stops an answer)"


class Conversation:
    def __init__(self, tok, block_size, system=None, raw=False, tools=()):
        if not raw and not chat.has_template(tok):
            raise ZeroLLMError("this model has no chat template (it is a base model): fine-tune it with "
                               "`zerollm sft --init RUN --data chat.jsonl --out RUN-sft`, or add --raw to "
                               "continue plain text")
        self.tok, self.block_size, self.system, self.raw = tok, block_size, system, raw
        self.tools = list(tools)                   # OpenAI tool specs listed in the system turn
        self.thinking = True                       # Qwen3's enable_thinking (zerollm chat --no-thinking)
        self.turns = []                            # [(user text, answer text, or the answer's messages)]

    def messages(self, turns=None):
        """The conversation (or the system message and ``turns``) as chat-template messages; an answer
        that called tools is its assistant and tool messages."""
        head = [{"role": "system", "content": self.system}] if self.system else []
        out = []
        for user, answer in self.turns if turns is None else turns:
            out.append({"role": "user", "content": user})
            out += [{"role": "assistant", "content": answer}] if isinstance(answer, str) else answer
        return head + out

    def add(self, user, answer):
        self.turns.append((user, answer))

    def _ids(self, turns, user):
        if self.raw:
            return self.tok.encode((self.system or "") + "".join(u + a for u, a in turns) + user)
        return chat.encode_prompt(self.tok, self.messages(turns) + [{"role": "user", "content": user}],
                                  tools=self.tools or None, enable_thinking=self.thinking)

    def follow_up(self, user, answer):
        """The prompt for the next part of an answer that called tools: the conversation, ``user``, and the
        answer's messages so far (ending with the tool responses)."""
        return chat.encode_prompt(self.tok, self.messages() + [{"role": "user", "content": user}, *answer],
                                  tools=self.tools or None, enable_thinking=self.thinking)

    def prompt(self, user, max_new):
        """(ids of the prompt for the next answer, how many old turns were dropped to fit). The turns
        dropped are forgotten, so the next prompt does not drop them again."""
        ids, dropped = chat.fit_turns(lambda k: self._ids(self.turns[k:], user), len(self.turns), max_new,
                                      self.block_size)
        if len(ids) + max_new <= self.block_size:
            self.turns = self.turns[dropped:]
            return ids, dropped
        self.check_system(max_new)                 # the system message may be what leaves no room
        raise ZeroLLMError(f"this message alone ({len(ids)} tokens) leaves no room for a {max_new}-token answer "
                           f"in the context of {self.block_size} tokens; write a shorter one (or lower "
                           "--max-new-tokens)")

    def check_system(self, max_new, how="shorten it with /system TEXT, clear it with /system"):
        """The system message (with an empty first message) must leave room for an answer."""
        if not self.system:
            return
        n = len(self._ids([], ""))
        if n + max_new > self.block_size:
            raise ZeroLLMError(f"the system message alone takes {n} tokens and leaves no room for a {max_new}-token "
                               f"answer in the context of {self.block_size} tokens: {how}, or lower --max-new-tokens")

    def save(self, path):
        """One JSONL row {"messages": [...]}, the TRL conversational format; never over an existing file."""
        if "\0" in path:
            raise ZeroLLMError("a file name cannot hold a NUL character; give another name")
        refuse_non_regular(path, "/save")
        check_outside_runs(path, "/save")     # never inside a run, checkpoint or model directory
        if os.path.exists(path):
            raise ZeroLLMError(f"{path} exists already; /save writes a new file, give another name")
        row = valid_text(json.dumps({"messages": self.messages()}, ensure_ascii=False))
        try:
            with atomic_write(path, "w") as f:
                f.write(row + "\n")
        except OSError as err:
            raise ZeroLLMError(f"cannot write {path}: {err.strerror or err}; give another name") from None


def valid_text(text):
    """``text`` with every lone surrogate (bytes a terminal sent that are not UTF-8) as U+FFFD, so that
    it can be encoded, tokenized and saved."""
    return SURROGATES.sub("\ufffd", text)


SURROGATES = re.compile("[\ud800-\udfff]")


@dataclass(frozen=True)
class Answers:
    """How the REPL's answers are sampled: ``sampling`` (zerollm.generation.sample.Sampling), at most
    ``max_new`` tokens, from the one generator ``rng`` (answer after answer), only ``allowed`` ids."""
    sampling: Sampling
    max_new: int
    rng: np.random.Generator
    allowed: np.ndarray | None = None


@dataclass(frozen=True)
class ChatTools:
    """The tools of `zerollm chat`: ``box`` (a zerollm.align.tools.Toolbox, or None: a thinking model
    without tools), at most ``max_calls`` tool calls run per turn."""
    box: object = None
    max_calls: int = 3

    def plan(self, tok):
        """How answers are read (zerollm.serve.tools.ToolPlan): the box's tools, the model's thinking."""
        box = self.box
        return ToolPlan(tuple(box.specs()) if box else (), frozenset(box.names) if box else frozenset(),
                        thinking=chat.has_thinking(tok))


DIM, UNDIM = "\x1b[2m", "\x1b[0m"


class _Shown:
    """An answer on the terminal as it streams: plain text, or (with a ToolPlan) read by serve.tools.Answer:
    the thinking dimmed (on a terminal; "(thinking) " before it anywhere), each tool call once it is whole."""

    def __init__(self, out, plan):
        self.out, self.reader = out, (Answer(plan) if plan is not None and plan.parsed else None)
        self.tty, self.thinking, self.names, self.last = _isatty(out), False, {}, "\n"

    def write(self, piece, finish=None):
        if self.reader is None:
            self._put(piece)
        else:
            for delta in self.reader.stream(piece, finish)[0]:
                self._delta(delta)
        self.out.flush()

    def _put(self, text):
        if text:
            self.out.write(text)
            self.last = text[-1]

    def _delta(self, delta):
        if "reasoning_content" in delta:
            if not self.thinking:
                self._put((DIM if self.tty else "") + "(thinking) ")
                self.thinking = True
            self._put(delta["reasoning_content"])
            return
        self._undim()
        self._put(delta.get("content", ""))
        for call in delta.get("tool_calls", ()):
            if "id" in call:
                self.names[call["index"]] = call["function"]["name"]
            else:
                self._put(("" if self.last == "\n" else "\n") +
                          f"[tool call] {self.names[call['index']]} {call['function']['arguments']}\n")

    def _undim(self):
        if self.thinking:
            self._put((UNDIM if self.tty else "") + "\n")
            self.thinking = False

    def end(self, finish):
        self.write("", finish)
        self._undim()


def _isatty(out):
    try:
        return out.isatty()
    except (AttributeError, ValueError):
        return False


def answer(model, tok, ids, stop, answers, out, plan=None):
    """Stream one answer to ``out`` -> (its text, stopped by Ctrl-C). ``stop``: the id that ends it, or None.
    ``plan``: a zerollm.serve.tools.ToolPlan: the answer is shown as it is read (thinking, tool calls)."""
    text = TextStream(tok, escape=True)
    req = Request(list(ids), answers.max_new, answers.sampling, answers.rng, text=text, context=Context(),
                  stop_ids=frozenset(() if stop is None else (stop,)))
    pieces, shown = [], _Shown(out, plan)
    try:
        for events in Scheduler(model, max_batch=1, allowed=answers.allowed).stream([req]):
            for _, ev in events:                      # each Token's text, then Done's held-back rest
                pieces.append(ev.text)
                shown.write(ev.text)
    except KeyboardInterrupt:
        pieces.append(text.flush())
        shown.write(pieces[-1])
        shown.end("length")
        out.write(" [stopped]\n")
        out.flush()
        return "".join(pieces), True
    shown.end("stop")
    out.write("" if shown.last == "\n" else "\n")
    out.flush()
    return "".join(pieces), False


class ToolFailed(Exception):
    """A user's tool failed: ``error``, the ZeroLLMError of zerollm.align.tools that says why; ``parts``, the
    turn's messages so far (the REPL keeps them and goes on)."""

    def __init__(self, error, parts):
        super().__init__(error)
        self.error, self.parts = error, parts


def tool_turn(model, tok, conv, line, ids, answers, out, tools):
    """Answer ``line`` from the prompt ``ids``, running the tools it calls -> the answer: its text, or its
    messages (assistant, tool, ..., assistant) when the model thinks or calls tools."""
    stop, plan = chat.end_id(tok), tools.plan(tok)
    parts, calls = [], 0
    while True:
        text, stopped = answer(model, tok, ids, stop, answers, out, plan)
        reply = chat.parse_reply(text, plan.names)
        parts.append(chat.reply_message(reply, [call_id() for _ in reply.tool_calls]))
        if stopped or not reply.tool_calls:
            return parts
        if calls + len(reply.tool_calls) > tools.max_calls:
            out.write(f"(the answer asks for more than {tools.max_calls} tool calls in one turn; not run: raise "
                      "--max-tool-calls)\n")
            return parts
        for call, sent in zip(reply.tool_calls, parts[-1]["tool_calls"]):
            try:
                response = tools.box.run(call)
            except ZeroLLMError as err:             # the user's tool failed (not the model's arguments)
                raise ToolFailed(err, parts) from None
            out.write(f"[{call.name}] {response}\n")
            parts.append({"role": "tool", "tool_call_id": sent["id"], "content": response})
        calls += len(reply.tool_calls)
        ids = conv.follow_up(line, parts)
        room = min(answers.max_new, conv.block_size - len(ids))     # the rest of the answer: what the context leaves
        if room < 1:
            out.write(f"(no room left in the context of {conv.block_size} tokens for an answer after the tool's "
                      "response; the turn ends here)\n")
            return parts
        answers = replace(answers, max_new=room)


def repl(model, tok, conv, answers, *, read=input, out=sys.stdout, tools=None, say=str):
    """Read a line, answer it (as ``answers`` says), until /exit or the end of input. Returns 0.
    ``tools``: ChatTools, for a model that thinks or calls tools (None: plain answers). ``say``: an error
    message -> the line shown (the command line's language, zerollm.cli.lang)."""
    stop = None if conv.raw else chat.end_id(tok)
    max_new = answers.max_new
    out.write(f"zerollm chat: {say(HELP)}\n")
    while True:
        try:
            line = read("> ")
        except EOFError:
            out.write("\n")
            return 0
        except KeyboardInterrupt:
            out.write("\n")
            continue
        if not line.strip():
            continue
        if valid_text(line) != line:
            line = valid_text(line)
            out.write("(bytes in this line that are not UTF-8 are read as \ufffd)\n")
        if line.startswith("/"):
            if _command(conv, line, out, max_new, say):
                return 0
            continue
        try:
            ids, dropped = conv.prompt(line, max_new)
        except ZeroLLMError as err:
            out.write(f"zerollm chat: {say(err)}\n")
            continue
        if dropped:
            out.write(f"(the conversation outgrew the context of {conv.block_size} tokens: dropped the oldest "
                      f"{dropped} turn{'s' if dropped > 1 else ''})\n")
        if tools is not None and not conv.raw:
            try:
                conv.add(line, tool_turn(model, tok, conv, line, ids, answers, out, tools))
            except ToolFailed as err:
                out.write(f"zerollm chat: {say(err.error)}\n")
                conv.add(line, err.parts)
            continue
        text, _ = answer(model, tok, ids, stop, answers, out)
        conv.add(line, text)


def _command(conv, line, out, max_new, say=str):
    """Run a /command; True means exit."""
    name, _, arg = line.strip().partition(" ")
    if name in ("/exit", "/quit"):
        return True
    if name in ("/help", "/?"):
        out.write(f"{say(HELP)}\n")
    elif name == "/save" and not arg.strip():
        out.write(f"zerollm chat: {say('/save needs a file name, e.g. /save talk.jsonl')}\n")
    elif name == "/reset":
        conv.turns = []
        out.write("(the conversation is cleared)\n")
    elif name == "/system":
        old, conv.system = conv.system, arg.strip() or None
        try:
            conv.check_system(max_new, how="give a shorter one")
        except ZeroLLMError as err:
            conv.system = old
            out.write(f"zerollm chat: {say(f'{err}; the system message is unchanged')}\n")
            return False
        out.write(f"(system message: {conv.system!r})\n" if conv.system else "(no system message)\n")
    elif name == "/save" and arg.strip():
        try:
            conv.save(arg.strip())
            n = len(conv.turns)
            out.write(f"(saved {n} turn{'' if n == 1 else 's'} to {arg.strip()})\n")
        except (ZeroLLMError, OSError) as err:
            out.write(f"zerollm chat: {say(err)}\n")
    else:
        out.write(f"zerollm chat: {say(f'unknown command {line.strip()!r}; {HELP}')}\n")
    return False
