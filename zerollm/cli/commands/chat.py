"""``zerollm chat``: talk to a model in the terminal, turn after turn, answers streamed as they are sampled.

    zerollm chat --ckpt runs/tang-sft --system "你是一位诗人。" --temperature 0.7
    zerollm chat --ckpt runs/shakespeare --raw           # a base model: plain continuation
    zerollm chat --ckpt runs/calc-sft --tools my_tools.py   # a tool model: the calculator and my tools

Inside: /reset, /system TEXT, /save FILE, /exit; Ctrl-C stops an answer, not the session
(zerollm.serve.repl). Readline editing and history where Python has readline. A model trained with
tools gets the built-in calculator (zerollm.align.tools), and the tools of --tools; its calls are run
and shown as they happen, its thinking is shown dimmed.
"""

import argparse
import sys

import numpy as np

from zerollm.align.rl.rewards import DEFAULT_TIMEOUT
from zerollm.io.argtypes import PROBABILITY, SAMPLING_SEED, Range
from zerollm.io.i18n import resolve_lang
from zerollm.model.budget import add_force_argument
from zerollm.generation.display import decodable
from zerollm.engine import add_engine_argument, apply_engine_argument
from zerollm.generation.sample import add_penalty_arguments, sampling_of
from zerollm.cli.lang import say
from zerollm.cli.source import add_source_arguments, load_source
from zerollm.engine.threads import add_threads_argument, limit_threads


def add_arguments(p):
    add_source_arguments(p)
    p.add_argument("--system", default=None, help="the system message the conversation starts with")
    p.add_argument("--raw", action="store_true",
                   help="no chat template: the turns are plain text the model continues (for a base model)")
    p.add_argument("--max-new-tokens", type=Range(int, 1, 10 ** 6), default=200,
                   help="longest answer (default 200; at most half the context)")
    p.add_argument("--temperature", type=Range(float, 0, 100), default=0.8, help="0 = greedy (default 0.8)")
    p.add_argument("--top-k", type=Range(int, 1, 2 ** 24), default=None)
    p.add_argument("--top-p", type=PROBABILITY, default=None)
    add_penalty_arguments(p)
    p.add_argument("--seed", type=SAMPLING_SEED, default=None, help="random seed (default: different every run)")
    p.add_argument("--tools", default=None, metavar="FILE",
                   help="a Python module (FILE.py or a module name) whose TOOLS the model may call, beside the "
                        "built-in calculator (for a model trained with tools)")
    p.add_argument("--tool-timeout", type=Range(float, 0, 10 ** 6), default=DEFAULT_TIMEOUT, metavar="S",
                   help="seconds one call of a --tools tool (or its import) may take; 0 = no limit (default %(default)g)")
    p.add_argument("--max-tool-calls", type=Range(int, 0, 64), default=3, metavar="N",
                   help="tool calls run in one turn at most; 0 shows the calls without running them (default %(default)s)")
    p.add_argument("--thinking", action=argparse.BooleanOptionalAction, default=True,
                   help="Qwen3's thinking switch (enable_thinking): --no-thinking puts an empty think block after "
                        "the prompt, so the model answers at once (default: on)")
    add_force_argument(p)
    add_threads_argument(p)
    add_engine_argument(p)

def _conversation(tok, block_size, system, raw, tools=()):
    """The REPL's conversation, with characters a char model does not know named in the command line's words
    (the tokenizer's own message advises Python calls), for a message or --system alike."""
    from zerollm.io.errors import ZeroLLMError
    from zerollm.serve.repl import Conversation
    from zerollm.tokenizers.char import UnknownCharacters

    class CommandLineConversation(Conversation):
        def _ids(self, turns, user):
            try:
                return super()._ids(turns, user)
            except UnknownCharacters as err:
                # earlier turns were read already: the new message, or else the system message, holds them
                raise ZeroLLMError(err.command_line("your message" if user else "the system message")) from None

    return CommandLineConversation(tok, block_size, system=system, raw=raw, tools=tools)


def _tools(args, tok):
    """The ChatTools of a model trained with tools (the calculator and --tools) or thinking; None otherwise."""
    from zerollm.align.tools import load_tools
    from zerollm.data import chat
    from zerollm.io.errors import ZeroLLMError
    from zerollm.serve.repl import ChatTools
    if args.raw:
        return None
    if not chat.has_tools(tok):
        if args.tools:
            raise ZeroLLMError("--tools: this model was not trained with tools (its tokenizer has no <tool_call> "
                               "token); leave --tools out, or fine-tune it on tool calls first (zerollm tasks make "
                               "calc --tools, then zerollm sft)")
        return ChatTools() if chat.has_thinking(tok) else None
    return ChatTools(load_tools(args.tools, args.tool_timeout), args.max_tool_calls)


def run(args):
    from zerollm.serve.repl import Answers, repl
    apply_engine_argument(args)
    sampling = sampling_of(args)
    with limit_threads(args.threads):
        model, tok = load_source(args, "zerollm chat")
        tools = _tools(args, tok)
        conv = _conversation(tok, model.config.block_size, args.system, args.raw,
                             tools.box.specs() if tools is not None and tools.box else ())
        conv.thinking = args.thinking
        try:
            import readline  # noqa: F401  - line editing and history for input()
        except ImportError:
            pass
        max_new = min(args.max_new_tokens, model.config.block_size // 2)
        conv.check_system(max_new, how="give a shorter --system")
        allowed = decodable(tok, model.config.vocab_size)
        # out: the sys.stdout of now (repl's default is the one of when it was imported)
        answers = Answers(sampling, max_new, np.random.default_rng(args.seed), None if allowed.all() else allowed)
        lang = resolve_lang(args.lang)              # --lang, before or after the command, else the locale
        return repl(model, tok, conv, answers, out=sys.stdout, tools=tools, say=lambda m: say(m, lang))
