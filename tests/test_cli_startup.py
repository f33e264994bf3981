"""The command line starts quickly: ``zerollm --help`` imports no command (nor NumPy), and a command imports
its own module only; the lazy parser that allows it prints every --help exactly as the full parser does,
in English and in 中文 (zerollm.cli.entry.build_parser, zerollm.cli.lang.translate_parser)."""

import argparse
import contextlib
import io
import json
import subprocess
import sys

import pytest

from zerollm.cli import entry
from zerollm.cli.lang import translate_parser

# what a fresh interpreter has imported after running the command line in it
IMPORTED = """
import json, sys
from zerollm.cli.entry import main
try:
    main({argv!r})
except SystemExit:
    pass
print(json.dumps(sorted(sys.modules)), file=sys.stderr)
"""


def imported_by(argv):
    done = subprocess.run([sys.executable, "-c", IMPORTED.format(argv=argv)], capture_output=True, text=True,
                          timeout=120)
    return set(json.loads(done.stderr.strip().splitlines()[-1]))


def test_help_imports_no_command_and_no_numpy():
    modules = imported_by(["--help"])
    commands = {module for module, _ in entry.COMMANDS.values()}
    assert modules & commands == set()
    assert "numpy" not in modules
    assert "zerollm.cli.entry" in modules          # the probe did run the command line


def test_a_command_imports_its_own_module_and_no_other_command():
    modules = imported_by(["download", "--help"])
    others = {module for name, (module, _) in entry.COMMANDS.items() if name != "download"}
    assert entry.COMMANDS["download"][0] in modules
    assert modules & others == set()


def choices(parser):
    """A parser's subcommands by name ({} for a command without)."""
    return next((a.choices for a in parser._actions if isinstance(a, argparse._SubParsersAction)), {})


def command_lines():
    """Every (sub)command's words: [], ["train"], ["tasks", "make"], ..."""
    found, todo = [], [((), entry.build_parser())]
    while todo:
        words, parser = todo.pop(0)
        found.append(list(words))
        todo += [(words + (name,), sub) for name, sub in choices(parser).items()]
    return found


def printed(argv):
    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(out), pytest.raises(SystemExit):
        entry.main(argv)
    return out.getvalue()


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_the_lazy_parser_prints_every_help_as_the_full_parser(lang, monkeypatch):
    monkeypatch.setenv("COLUMNS", "100")
    full = entry.build_parser()
    translate_parser(full, lang)
    lines = command_lines()
    assert len(lines) > len(entry.COMMANDS)         # nested commands (tasks make, ...) are in the table
    for words in lines:
        parser = full
        for word in words:
            parser = choices(parser)[word]
        wanted = parser.format_help()
        assert printed(["--lang", lang] + words + ["--help"]) == wanted, words
        if words in (["train"], ["download"], ["tasks", "eval"]):      # --lang after the command
            assert printed(words + ["--help", "--lang", lang]) == wanted, words
    assert all(p.filled for p in full.commands.values())
    assert not any(p.filled for p in entry.build_parser(lazy=True).commands.values())
