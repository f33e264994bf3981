"""The ``zerollm`` command line: one subcommand per module, all with ``main(argv=None)``.

Each command module exposes ``add_arguments(parser)`` and ``run(args) -> int``. Modules keep
heavy imports (torch, matplotlib) inside functions so ``zerollm --help`` stays instant.
User mistakes raise ``ZeroLLMError``; here they become one line on stderr and exit code 1. So do
the failures no check can rule out: a file that cannot be read or written (OSError: a full disk,
permissions) and memory that runs out although the estimate said it would fit (MemoryError).
Bad values on the command line are usage errors: one line and exit code 2 (argparse).
"""

import argparse
import codecs
import contextlib
import errno
import importlib
import io
import os
import re
import sys
import warnings

from zerollm import __version__
from zerollm.cli.lang import (ERROR, WARNING, add_command_argument, add_global_argument, lang_of, say,
                              translate_parser)
from zerollm.io.errors import ZeroLLMError

# name -> (module, one-line help), in the order of the course: Part 1 by hand, then training, then interop.
COMMANDS = {
    "attention": ("zerollm.teach.attention_walkthrough",
                  "self-attention by hand, every step printed (the course's seed example)"),
    "shapes": ("zerollm.teach.shapes",
               "multi-head attention (and with --n-expert a MoE layer) shape by shape: shapes, FLOPs, memory"),
    "heads": ("zerollm.teach.heads",
              "draw every layer's and head's attention weights as a grid of heat maps (PNG)"),
    "explain": ("zerollm.cli.commands.explain",
                "one offline, interactive HTML page: the walkthrough you can edit, and a model's attention"),
    "quantize": ("zerollm.teach.quantize",
                 "Q8_0 / Q4_0 quantization by hand on a small matrix: blocks, scales, rounding, error (--explain)"),
    "grammar": ("zerollm.teach.grammar",
                "constrained decoding by hand: a regex as an automaton, and the token ids each state allows (--explain)"),
    "gradcheck": ("zerollm.teach.gradcheck_cmd",
                  "check every layer's hand-written backward against finite differences"),
    "exercise": ("zerollm.teach.exercises.command",
                 "exercises along the course that grade themselves: list, start, check, hint, solution"),
    "download": ("zerollm.data.download",
                 "fetch a public corpus (tiny Shakespeare) into the cache, verified; prints its path"),
    "prepare": ("zerollm.data.tokens",
                "tokenize a text file (byte, char or BPE) into train.bin/val.bin + tokenizer.json"),
    "train": ("zerollm.cli.commands.train", "train a GPT on a text file, with crash-safe checkpoints"),
    "sample": ("zerollm.cli.commands.sample", "generate text from a trained checkpoint or a Hugging Face model"),
    "chat": ("zerollm.cli.commands.chat", "talk to a model in the terminal: multi-turn, streamed, in the chat template"),
    "serve": ("zerollm.cli.commands.serve",
              "an OpenAI-compatible HTTP server with continuous batching, and a chat page"),
    "eval": ("zerollm.cli.commands.evaluate", "the loss and bits per byte of a checkpoint on a text file"),
    "tasks": ("zerollm.cli.commands.tasks",
              "tasks a program can check (藏头诗, addition, preference pairs): make data, measure success"),
    "sft": ("zerollm.cli.commands.sft", "supervised fine-tuning on prompt/completion or chat data (chat template)"),
    "convert": ("zerollm.cli.commands.convert",
                "Hugging Face GPT-2/Llama directory <-> zerollm model directory (safetensors only), or a GGUF file"),
    "merge": ("zerollm.cli.commands.merge", "fold a LoRA run's adapters into the weights (an ordinary run directory)"),
    "reward": ("zerollm.cli.commands.reward", "train a reward model on preference pairs (Bradley-Terry or margin)"),
    "score": ("zerollm.cli.commands.score", "a reward model's verdict on a file: pairwise accuracy, or each answer's reward"),
    "dpo": ("zerollm.cli.commands.dpo", "Direct Preference Optimization (or IPO) against a frozen reference"),
    "ppo": ("zerollm.cli.commands.ppo", "reinforcement learning with PPO: a value head, GAE, a KL penalty to a reference"),
    "grpo": ("zerollm.cli.commands.grpo", "reinforcement learning with GRPO: group-relative advantages, no critic"),
    "distill": ("zerollm.cli.commands.distill",
                "train a small student on a bigger teacher's distributions (KL, reverse KL, GKD's JSD, on-policy)"),
    "report": ("zerollm.cli.commands.report",
               "training runs and their lm-eval scores side by side: one offline HTML page (中文/English)"),
}


# commands whose work is a file or folder they write (not only what they print): a closed output pipe
# that stops them early is an error (exit 141), while `zerollm attention | head` is not
MAKES_FILES = {"prepare", "download", "train", "sft", "reward", "dpo", "ppo", "grpo", "distill", "convert", "merge",
               "explain", "heads", "report", "tasks"}


class OneLineParser(argparse.ArgumentParser):
    """argparse prints usage + error over several lines; we print one line and point at --help.
    Flags are written out in full (no abbreviations, argparse's allow_abbrev): otherwise
    ``zerollm train --init runs/base`` (sft's flag, in the wrong command) is taken for train's
    --init-std and fails with "must be a number"."""

    def __init__(self, *args, **kwargs):
        kwargs.setdefault("allow_abbrev", False)
        super().__init__(*args, **kwargs)

    def error(self, message):
        lang = getattr(self, "lang", "en")     # set by translate_parser
        hint = _nearest_choice(message)
        if lang == "zh":
            hint = hint and f"（{say(hint.strip()[1:-1], lang)}）"
            self.exit(2, f"{self.prog}: {ERROR[lang]}{say(message, lang)}{hint}（见 '{self.prog} --help'）\n")
        self.exit(2, f"{self.prog}: error: {message}{hint} (see '{self.prog} --help')\n")


def _nearest_choice(message):
    """" (did you mean 'sample'?)" for argparse's "invalid choice: 'sampel' (choose from ...)", else ""."""
    import difflib
    import re
    m = re.search(r"invalid choice: '(.*)' \(choose from (.*)\)$", message)
    if m is None:
        return ""
    choices = re.findall(r"'([^']*)'", m.group(2))
    guess = difflib.get_close_matches(m.group(1), choices, n=1, cutoff=0.6)
    return f" (did you mean {guess[0]!r}?)" if guess else ""


class _Commands(argparse._SubParsersAction):
    """The subcommands. A lazy parser's commands get their flags (their module imported, with all it
    imports) only when the command line chooses one: ``zerollm --help`` imports no command, and
    ``zerollm sample`` only sample's."""

    def __call__(self, parser, namespace, values, option_string=None):
        if values and values[0] in self.choices:
            _fill(self.choices[values[0]])
        super().__call__(parser, namespace, values, option_string)


def _fill(cmd):
    """Give a command's parser its flags, once; in the language its parser was already set to."""
    if cmd.filled:
        return
    cmd.filled = True
    module = importlib.import_module(cmd.module_name)
    module.add_arguments(cmd)
    add_command_argument(cmd)
    cmd.set_defaults(_module=module)
    translate_parser(cmd, getattr(cmd, "lang", "en"))


def build_parser(lazy=False):
    """The whole command line, in English (main() hands it to cli.lang.translate_parser for 中文).
    ``lazy``: each command's flags are added when the command line chooses it (main: the start-up of
    every command pays for its own imports only); otherwise all at once (tools that read every flag)."""
    parser = OneLineParser(prog="zerollm", description="zerollm: an LLM built from zero in NumPy.")
    parser.register("action", "parsers", _Commands)
    parser.add_argument("--version", action="version", version=f"zerollm {__version__}")
    add_global_argument(parser)
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=OneLineParser)
    parser.commands = {}
    for name, (module_name, help_text) in COMMANDS.items():
        cmd = parser.commands[name] = sub.add_parser(name, help=help_text, description=help_text)
        cmd.module_name, cmd.filled = module_name, False
        if not lazy:
            _fill(cmd)
    return parser


# flags of one command that users give to another, and what to do instead
ELSEWHERE = {
    ("zerollm train", "--init"): "zerollm train starts from random weights: fine-tune a trained model with "
                                 "`zerollm sft --init RUN`, or continue a run with `zerollm train --out RUN --resume`",
    ("zerollm tasks eval", "--task"): "the task is the word after eval: zerollm tasks eval acrostic --ckpt RUN "
                                      "--data FILE",
    ("zerollm tasks make", "--task"): "the task is the word after make: zerollm tasks make acrostic --out FILE",
}


def _innermost(parser, args):
    """The parser of the (sub)command the arguments chose: ``zerollm tasks eval``'s own, not ``tasks``'."""
    owner = parser.commands.get(args.command, parser)
    while True:
        chosen = [a.choices[getattr(args, a.dest)] for a in owner._actions
                  if isinstance(a, argparse._SubParsersAction) and getattr(args, a.dest, None) in a.choices]
        if not chosen:
            return owner
        owner = chosen[0]


def parse(parser, argv=None):
    """parse_args, but an unknown flag is reported by its own command's parser with the closest flag it
    has: ``zerollm sample --temprature 1`` -> "... (did you mean --temperature?)", or with what to do
    where the flag belongs to another command (ELSEWHERE)."""
    args, extras = parser.parse_known_args(argv)
    if extras:
        import difflib
        owner = _innermost(parser, args)
        flags = [word.split("=")[0] for word in extras if word.startswith("--")]
        elsewhere = [ELSEWHERE[owner.prog, f] for f in flags if (owner.prog, f) in ELSEWHERE]
        known = [k for k in owner._option_string_actions if k.startswith("--")]
        guesses = [close for flag in flags                      # the flag it abbreviates, else the closest
                   for close in ([k for k in known if k.startswith(flag)][:2]
                                 or difflib.get_close_matches(flag, known, n=1, cutoff=0.75))]
        hint = (f"; {elsewhere[0]}" if elsewhere else
                f" (did you mean {' or '.join(dict.fromkeys(guesses))}?)" if guesses else "")
        owner.error(f"unrecognized arguments: {' '.join(extras)}{hint}")
    _no_empty_paths(_innermost(parser, args), args)
    return args


_PATH_METAVAR = re.compile(r"FILE|DIR|RUN")
_OUTPUTS = {"out", "dst", "answers"}          # --out, --to, --answers: what a command writes


def _no_empty_paths(owner, args):
    """``--out ''`` (an unset shell variable) names no file: it used to fall back to the default run
    directory, or to the current folder. Every file or folder argument must name something."""
    for action in owner._actions:
        value = getattr(args, action.dest, None)
        values = value if isinstance(value, list) else [value]
        if action.metavar and _PATH_METAVAR.search(str(action.metavar)) and \
                any(isinstance(v, str) and not v.strip() for v in values):
            name = action.option_strings[-1] if action.option_strings else action.metavar
            owner.error(f"{name} is empty: give a file or folder name (is a shell variable unset?)")
        if action.option_strings and action.dest in _OUTPUTS and value == "-":
            owner.error(f"{action.option_strings[-1]} -: zerollm writes its outputs to files, not to standard "
                        "output, and will not make a file named '-': give a file name")


def _one_line(message):
    return " ".join(str(message).split())


def _one_line_warnings(prog, lang="en"):
    """Warnings (e.g. "prompt truncated") as one plain line on stderr, without file/line noise.
    Returns the previous handler so main() can put it back."""
    def show(message, category, filename, lineno, file=None, line=None):
        print(f"{prog}: {WARNING[lang]}{_one_line(say(message, lang))}", file=sys.stderr)
    old, warnings.showwarning = warnings.showwarning, show
    return old


def _lenient(err):
    """Error handler for printing: bytes of the command line that were not UTF-8 (lone surrogates,
    PEP 383) go out as those bytes; anything else the terminal cannot show becomes \\uXXXX."""
    try:
        return codecs.lookup_error("surrogateescape")(err)
    except UnicodeError:
        return codecs.lookup_error("backslashreplace")(err)


@contextlib.contextmanager
def _lenient_stdout():
    """Printing a file name or a prompt never fails over its characters (a latin-1 terminal, a
    filename that is not UTF-8)."""
    codecs.register_error("zerollm-lenient", _lenient)
    stream = sys.stdout
    old = getattr(stream, "errors", None)
    changed = hasattr(stream, "reconfigure") and old in ("strict", None)
    if changed:
        stream.reconfigure(errors="zerollm-lenient")
    try:
        yield
    finally:
        if changed:
            with contextlib.suppress(ValueError):      # closed meanwhile
                stream.reconfigure(errors=old or "strict")


def _for_command_line(err, args):
    """An error's line as a command prints it. Text with characters a char model does not know gets advice
    for the command line (the tokenizer's own message tells a Python caller to use tokenizer.with_chars);
    commands that know which input held them say so themselves (err.command_line("--text"))."""
    from zerollm.tokenizers.char import UnknownCharacters
    if not isinstance(err, UnknownCharacters):
        return err
    flags = [f for f in ("--prompt", "--system") if getattr(args, f[2:], None)] if args.command == "sample" else []
    return err.command_line(" or ".join(flags) or "the text")


def _os_error(err):
    """'PATH: No such file or directory' rather than Python's "[Errno 2] No such file or directory: 'PATH'"."""
    if err.strerror and err.filename is not None:
        names = " -> ".join(os.fsdecode(n) for n in (err.filename, err.filename2) if n is not None)
        return f"{names}: {err.strerror}"
    return _one_line(err)


def _disk_full_hint(err):
    if err.errno in (errno.ENOSPC, errno.EDQUOT, errno.EFBIG):
        return ("; the disk (or your quota, or ulimit -f) is full: free some space and run the command again "
                "(what was there before is untouched)")
    return ""


# commands that build a model from sizes given on the command line (the others load one as it is)
_SIZED = {"train", "sft", "reward", "dpo", "ppo", "grpo", "distill", "shapes", "attention", "gradcheck", "heads", "quantize"}


def _out_of_memory(err, command=None):
    detail = f" ({_one_line(err)})" if str(err) else ""
    if command in _SIZED:
        fix = "use smaller sizes (--batch-size, --block-size, --n-embd, --window, ...) or close other programs"
    else:
        fix = "close other programs, or use a smaller model"
    return f"out of memory{detail}; the estimate said it would fit, but it did not: {fix}"


def _parse_under_mpi(parser, argv, lang="en"):
    """(args, None) when every rank of the mpirun job parsed its command line and all agree; else
    (None, exit code) on every rank, the first failing rank's line printed once (zerollm.training.dist)."""
    from zerollm.training import dist
    captured = io.StringIO()
    args, failure = None, None
    try:
        with contextlib.redirect_stderr(captured):
            args = parse(parser, argv)
    except SystemExit as exc:
        if not exc.code:
            raise                                  # --help, --version: printed, done
        failure = (exc.code if isinstance(exc.code, int) else 2, captured.getvalue().strip())
    prog = f"zerollm {getattr(args, 'command', None) or ''}".strip()
    try:
        code = dist.check_command(prog, sys.argv[1:] if argv is None else argv, args, failure)
    except ZeroLLMError as err:                    # mpi4py missing
        print(f"{prog}: {ERROR[lang]}{_one_line(say(err, lang))}", file=sys.stderr)
        return None, 1
    return (args, None) if code is None else (None, code)


def _report(prog, text, lang="en"):
    """One error line; under MPI it also ends the job (every rank exits, or MPI_Abort: dist.report_error)."""
    from zerollm.training.dist import report_error
    report_error(lambda line: print(f"{prog}: {ERROR[lang]}{_one_line(say(line, lang))}", file=sys.stderr,
                                    flush=True), text)


class _ClosedStream:
    """What stands in for sys.stdin or sys.stdout when the command was started with that file descriptor
    closed (``0<&-``, ``>&-``; Python then sets the stream to None and the first read or print would end
    in a traceback): reading or writing raises a ZeroLLMError that says so, in one line."""

    encoding, errors = "utf-8", "strict"

    def __init__(self, message):
        self.message = message

    def _closed(self, *args, **kwargs):
        raise ZeroLLMError(self.message)

    read = readline = readlines = write = writelines = fileno = __iter__ = _closed

    def flush(self):
        pass

    def close(self):
        pass

    def isatty(self):
        return False


def _stand_in_for_closed_streams():
    if sys.stdin is None:
        sys.stdin = _ClosedStream("standard input is closed (the command was started with 0<&-): there is "
                                  "nothing to read; give it < FILE or < /dev/null instead")
    if sys.stdout is None:
        sys.stdout = _ClosedStream("standard output is closed (the command was started with >&-): there is "
                                   "nowhere to print; give it > FILE or > /dev/null instead")
    if sys.stderr is None:            # no place for the error line itself: it is dropped, the exit code stays
        sys.stderr = open(os.devnull, "w")


def main(argv=None):
    _stand_in_for_closed_streams()
    lang = lang_of(sys.argv[1:] if argv is None else argv)
    parser = build_parser(lazy=True)
    translate_parser(parser, lang)               # help and usage errors in 中文 when lang is "zh"
    from zerollm.training.dist import launched_by_mpi     # here: `zerollm --help` needs none of training
    if launched_by_mpi():
        args, code = _parse_under_mpi(parser, argv, lang)
        if args is None:
            return code
    else:
        args = parse(parser, argv)
    if args.command is None:
        parser.print_help()
        return 0
    if getattr(args, "lang", None) is None and args.global_lang:     # one flag: before or after the command
        args.lang = args.global_lang
    prog = _innermost(parser, args).prog          # "zerollm tasks eval", as argparse's own errors name it
    old_showwarning = _one_line_warnings(prog, lang)
    try:
        with _lenient_stdout():
            return args._module.run(args) or 0
    except ZeroLLMError as err:
        _report(prog, _for_command_line(err, args), lang)
        return 1
    except MemoryError as err:
        _report(prog, _out_of_memory(err, args.command), lang)
        return 1
    except BrokenPipeError:
        # the reader stopped early. Point stdout at /dev/null so Python's final flush does not complain
        # a second time. For `zerollm attention | head` that is not an error: what was wanted was read.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        if args.command not in MAKES_FILES:
            return 0
        # `zerollm train ... 2>&1 | head -1 && next-step`: the work was cut short before it was done,
        # and the pipeline must not go on as if it had been (128 + SIGPIPE, as a shell reports it)
        with contextlib.suppress(OSError, ValueError):
            print(f"{prog}: {ERROR[lang]}" + say("the pipe that reads this command's output was closed before "
                  "the work was done; nothing was finished: run it again with its output going to a reader "
                  "that stays (or to a file)", lang), file=sys.stderr, flush=True)
        return 141
    except OSError as err:  # a file the user named could not be read or written
        _report(prog, f"{_os_error(err)}{_disk_full_hint(err)}", lang)
        return 1
    except KeyboardInterrupt:
        print(f"{prog}: {say('interrupted', lang)}", file=sys.stderr)
        return 130
    finally:
        warnings.showwarning = old_showwarning
