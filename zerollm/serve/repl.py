"""The terminal chat of ``zerollm chat``: a conversation kept in the chat template, answers streamed.

    conv = Conversation(tok, block_size=256, system="You write poems.")
    ids, dropped = conv.prompt("藏头诗：春夏秋冬", max_new=100)   # the prompt; oldest turns dropped to fit
    conv.add("藏头诗：春夏秋冬", answer)
    repl(model, tok, conv, Answers(Sampling(temperature=0.7), 100, np.random.default_rng(0)))   # zerollm chat

Each answer is one request of zerollm.generation.batching.Scheduler, streamed as a batch of one: its
TextStream writes whole characters (escaped for the terminal), the end-of-turn id ends it.

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
from dataclasses import dataclass

import numpy as np

from zerollm.data import chat
from zerollm.generation.batching import Context, Request, Scheduler
from zerollm.generation.sample import Sampling
from zerollm.generation.text import TextStream
from zerollm.io.errors import ZeroLLMError
from zerollm.io.fileio import atomic_write, refuse_non_regular
from zerollm.io.outdir import check_outside_runs

HELP = "commands: /reset  /system TEXT  /save FILE  /help  /exit   (Ctrl-C stops an answer)"


class Conversation:
    def __init__(self, tok, block_size, system=None, raw=False):
        if not raw and not chat.has_template(tok):
            raise ZeroLLMError("this model has no chat template (it is a base model): fine-tune it with "
                               "`zerollm sft --init RUN --data chat.jsonl --out RUN-sft`, or add --raw to "
                               "continue plain text")
        self.tok, self.block_size, self.system, self.raw = tok, block_size, system, raw
        self.turns = []                            # [(user text, answer text)]

    def messages(self, turns=None):
        """The conversation (or the system message and ``turns``) as {"role", "content"} dicts."""
        head = [{"role": "system", "content": self.system}] if self.system else []
        pairs = self.turns if turns is None else turns
        return head + [{"role": r, "content": t} for u, a in pairs for r, t in (("user", u), ("assistant", a))]

    def add(self, user, answer):
        self.turns.append((user, answer))

    def _ids(self, turns, user):
        if self.raw:
            return self.tok.encode((self.system or "") + "".join(u + a for u, a in turns) + user)
        return chat.encode_prompt(self.tok, self.messages(turns) + [{"role": "user", "content": user}])

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


def answer(model, tok, ids, stop, answers, out):
    """Stream one answer to ``out`` -> (its text, stopped by Ctrl-C). ``stop``: the id that ends it, or None."""
    text = TextStream(tok, escape=True)
    req = Request(list(ids), answers.max_new, answers.sampling, answers.rng, text=text, context=Context(),
                  stop_ids=frozenset(() if stop is None else (stop,)))
    pieces = []
    try:
        for events in Scheduler(model, max_batch=1, allowed=answers.allowed).stream([req]):
            for _, ev in events:                      # each Token's text, then Done's held-back rest
                pieces.append(ev.text)
                out.write(ev.text)
                out.flush()
    except KeyboardInterrupt:
        pieces.append(text.flush())
        out.write(pieces[-1] + " [stopped]\n")
        out.flush()
        return "".join(pieces), True
    out.write("\n")
    out.flush()
    return "".join(pieces), False


def repl(model, tok, conv, answers, *, read=input, out=sys.stdout):
    """Read a line, answer it (as ``answers`` says), until /exit or the end of input. Returns 0."""
    stop = None if conv.raw else chat.end_id(tok)
    max_new = answers.max_new
    out.write(f"zerollm chat: {HELP}\n")
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
            if _command(conv, line, out, max_new):
                return 0
            continue
        try:
            ids, dropped = conv.prompt(line, max_new)
        except ZeroLLMError as err:
            out.write(f"zerollm chat: {err}\n")
            continue
        if dropped:
            out.write(f"(the conversation outgrew the context of {conv.block_size} tokens: dropped the oldest "
                      f"{dropped} turn{'s' if dropped > 1 else ''})\n")
        text, _ = answer(model, tok, ids, stop, answers, out)
        conv.add(line, text)


def _command(conv, line, out, max_new):
    """Run a /command; True means exit."""
    name, _, arg = line.strip().partition(" ")
    if name in ("/exit", "/quit"):
        return True
    if name in ("/help", "/?"):
        out.write(f"{HELP}\n")
    elif name == "/save" and not arg.strip():
        out.write("zerollm chat: /save needs a file name, e.g. /save talk.jsonl\n")
    elif name == "/reset":
        conv.turns = []
        out.write("(the conversation is cleared)\n")
    elif name == "/system":
        old, conv.system = conv.system, arg.strip() or None
        try:
            conv.check_system(max_new, how="give a shorter one")
        except ZeroLLMError as err:
            conv.system = old
            out.write(f"zerollm chat: {err}; the system message is unchanged\n")
            return False
        out.write(f"(system message: {conv.system!r})\n" if conv.system else "(no system message)\n")
    elif name == "/save" and arg.strip():
        try:
            conv.save(arg.strip())
            n = len(conv.turns)
            out.write(f"(saved {n} turn{'' if n == 1 else 's'} to {arg.strip()})\n")
        except (ZeroLLMError, OSError) as err:
            out.write(f"zerollm chat: {err}\n")
    else:
        out.write(f"zerollm chat: unknown command {line.strip()!r}; {HELP}\n")
    return False
