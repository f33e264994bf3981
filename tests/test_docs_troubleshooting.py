"""docs/troubleshooting.md quotes the errors zerollm prints: each quoted message must still exist, and
the English and Chinese halves must explain the same messages."""

import argparse
import errno
import os
import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
DOC = REPO / "docs" / "troubleshooting.md"
# messages that come from argparse or from the operating system (strerror), not from zerollm's code
OUTSIDE = {"invalid choice", "expected one argument", "the following arguments are required"} | {
    os.strerror(code) for code in (errno.EACCES, errno.ENOSPC, errno.EDQUOT, errno.EFBIG)}


def sections():
    text = DOC.read_text(encoding="utf-8")
    english, chinese = text.split("\n## 中文\n")
    return english, chinese


def quoted_messages(section):
    """The `fragments` in the first column of every table row (the message column)."""
    found = []
    for line in section.splitlines():
        cells = line.split("|")
        if line.startswith("| `") and len(cells) > 3:
            found += re.findall(r"`([^`]+)`", cells[1])
    return found


def _error(fn, *args):
    try:
        fn(*args)
    except Exception as err:          # noqa: BLE001 - the message is what is being checked
        return str(err)
    raise AssertionError(f"{fn.__name__}{args} did not fail")


def composed_messages(tmp_path, monkeypatch):
    """Messages put together at run time (a range's description, a file's name), produced for real."""
    from zerollm.model import budget
    from zerollm.io.argtypes import LEARNING_RATE, PROBABILITY
    from zerollm.model.config import GPTConfig
    from zerollm.interop.hf.configs import family_of
    from zerollm.interop.hf.exporting import check_target
    from zerollm.io.outdir import check_separate
    from zerollm.tokenizers import ByteTokenizer
    from zerollm.io.validate import checkpoint_state, dataclass_from_dict, generator_from_state
    step = tmp_path / "step-0000001"
    step.mkdir()
    (step / "config.json").write_text('{"format": "zerollm-checkpoint"}')
    (step / "x").write_text("")
    monkeypatch.setenv(budget.ENV, "1KiB")
    tokenizing = _error(budget.require, budget.tokenizing(10 ** 6))
    return [_error(LEARNING_RATE, "nan"), _error(PROBABILITY, "0"), tokenizing,
            _error(dataclass_from_dict, GPTConfig, {"dropout": "x"}, "f"),
            _error(dataclass_from_dict, GPTConfig, {"norm": 1}, "f"),
            _error(dataclass_from_dict, GPTConfig, {"bias": 1}, "f"),
            _error(generator_from_state, {"bit_generator": "PCG64", "state": 5}, "f"),
            _error(checkpoint_state, {"step": "2"}, "f"), _error(ByteTokenizer().encode, "\ud800"),
            _error(check_separate, str(step), [str(tmp_path)]), _error(check_target, str(step), True),
            _error(family_of, {"architectures": ["BertModel"]}), _bad_field_message(tmp_path)]


def _bad_field_message(tmp_path):
    """A JSONL field of the wrong type: the message composes the field's name and its expected type."""
    from zerollm.data.formats import read_prefs
    path = tmp_path / "prefs.jsonl"
    path.write_text('{"prompt": "p", "chosen": "a", "rejected": "b", "margin": "big"}\n')
    return _error(read_prefs, path)


def source_text():
    parts = []
    for path in (REPO / "zerollm").rglob("*.py"):
        parts.append(path.read_text(encoding="utf-8").replace('\\"', '"'))
    return "\n".join(parts)


def test_every_quoted_message_exists(tmp_path, monkeypatch):
    """Each quoted message is in zerollm's code, or in a message zerollm composes at run time, or is
    argparse's or the operating system's own wording."""
    code = source_text() + "\n".join(composed_messages(tmp_path, monkeypatch))
    messages = quoted_messages(sections()[0])
    missing = [m for m in messages if m not in code and m not in OUTSIDE]
    assert len(messages) >= 60 and not missing, missing
    assert "invalid choice" in Path(argparse.__file__).read_text()


def test_both_languages_explain_the_same_messages():
    english, chinese = sections()
    assert quoted_messages(english) == quoted_messages(chinese)
