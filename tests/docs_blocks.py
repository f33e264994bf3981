"""The runnable parts of the documentation: every fenced ```bash and ```python block of README.md and
docs/*.md, cut into tours and commands. tests/test_docs_run.py runs them; this module only reads.

A *tour* is what one reader runs top to bottom, in one fresh folder: a whole page, or, on a page
written twice (a ``## 中文`` half after the English one), each half on its own; a reader follows one.

A bash block is cut into *commands*: one per line (a line ending in ``\\`` continues on the next);
comment-only lines are not commands. A python block is one command. Two visible markers, written
in a ``#`` comment, say what a command needs; a marker on a comment line of its own at the top of a
block applies to the whole block:

    [online]             the command needs the internet: the test runs it against local servers
                         (tests/docs_servers.py); commands without it run with the network cut off
    [not tested: WHY]    the test does not run it, and counts it; WHY says what it would need

    >>> [c.text for c in commands_of("bash", "a --x 1   # [online] fetch\\nb \\\\\\n  c\\n# note\\n")]
    ['a --x 1   # [online] fetch', 'b c']
    >>> [(c.online, c.untested) for c in commands_of("bash", "# [not tested: several machines]\\nmpirun x\\n")]
    [(False, 'several machines')]
"""

import io
import re
import tokenize
from pathlib import Path
from typing import NamedTuple

FENCE = re.compile(r"^```([\w+-]*)[^\n]*\n(.*?)^```[ \t]*$", re.M | re.S)
HALF = re.compile(r"^## 中文[ \t]*$", re.M)
ONLINE = "[online]"
UNTESTED = re.compile(r"\[not tested: ([^\]]+)\]")
LANGUAGES = ("bash", "python")


class Command(NamedTuple):
    lang: str              # "bash" (one command line) or "python" (a whole block)
    text: str              # what runs: the line(s) as written, continuation lines joined
    line: int              # where it starts in the page (1-based)
    online: bool           # [online]: run against the local servers
    untested: str | None   # [not tested: WHY] -> WHY


class Tour(NamedTuple):
    page: str              # "README.md", "docs/training.md"
    name: str              # the page, plus "#中文" for the second half of a page written twice
    commands: tuple


def pages(repo):
    """README.md and every docs/*.md, as paths relative to ``repo``."""
    repo = Path(repo)
    return ["README.md"] + sorted(p.relative_to(repo).as_posix() for p in (repo / "docs").glob("*.md"))


def comment_of(line):
    """The ``# comment`` of a shell line (outside quotes), or ''.

    >>> comment_of('zerollm sample --prompt "# not this"   # this')
    '# this'
    """
    quote = None
    for i, ch in enumerate(line):
        if quote:
            quote = None if ch == quote else quote
        elif ch in "'\"":
            quote = ch
        elif ch == "#" and (i == 0 or line[i - 1].isspace()):
            return line[i:]
    return ""


def without_comment(line):
    """A shell line without its ``# comment`` (what bash runs), trailing spaces cut.

    >>> without_comment('zerollm sample --prompt "# kept"   # cut')
    'zerollm sample --prompt "# kept"'
    """
    return line[:len(line) - len(comment_of(line))].rstrip()


def _markers(comment):
    found = UNTESTED.search(comment)
    return ONLINE in comment, found.group(1).strip() if found else None


def commands_of(lang, body, first_line=1):
    """The commands of one fenced block (see the module docstring)."""
    if lang == "python":
        online, untested = False, None
        for line in body.splitlines():
            if line.lstrip().startswith("#"):
                a, b = _markers(line)
                online, untested = online or a, untested or b
        return [Command(lang, body, first_line, online, untested)]
    block_online, block_untested, out, pending, start = False, None, [], "", None
    for n, raw in enumerate(body.splitlines(), first_line):
        line = raw.strip()
        if not pending and (not line or line.startswith("#")):
            if not out and line:                           # a comment line before any command
                a, b = _markers(line)
                block_online, block_untested = block_online or a, block_untested or b
            continue
        start = start if pending else n
        pending = f"{pending} {line}" if pending else line
        if pending.endswith("\\"):
            pending = pending[:-1].rstrip()
            continue
        online, untested = _markers(comment_of(pending))
        out.append(Command(lang, pending, start, online or block_online, untested or block_untested))
        pending = ""
    return out


def blocks(text):
    """(lang, body, line of the body's first line) of every fenced block in a markdown text."""
    for m in FENCE.finditer(text):
        yield m.group(1), m.group(2), text.count("\n", 0, m.start(2)) + 1


def tours(repo, page):
    """The tours of one page (see the module docstring); a page without runnable blocks gives one empty tour."""
    text = (Path(repo) / page).read_text(encoding="utf-8")
    half = HALF.search(text)
    cuts = [(page, 0, half.start() if half else len(text))]
    if half:
        cuts.append((f"{page}#中文", half.start(), len(text)))
    result = []
    for name, start, end in cuts:
        commands = []
        for lang, body, line in blocks(text):
            if lang in LANGUAGES and start <= _pos(text, line) < end:
                commands.extend(commands_of(lang, body, line))
        result.append(Tour(page, name, tuple(commands)))
    return result


def _pos(text, line):
    """The character offset of a 1-based line."""
    return len("".join(text.splitlines(keepends=True)[:line - 1]))


def what_runs(tour):
    """What a shell runs of each command, in order: its language, its text without the comment (bash
    ignores it), where it runs ([online]) and whether it runs at all ([not tested]). Two halves of a page
    with the same ``what_runs`` run the same commands; only their comments are in two languages.

    >>> en = Tour("p", "p", tuple(commands_of("bash", "zerollm shapes   # the shapes\\n")))
    >>> zh = Tour("p", "p#中文", tuple(commands_of("bash", "zerollm shapes   # 形状\\n")))
    >>> what_runs(en) == what_runs(zh)
    True
    """
    return tuple((c.lang, without_comment(c.text) if c.lang == "bash" else python_code(c.text), c.online,
                  c.untested is not None) for c in tour.commands)


def python_code(source):
    """A python block's tokens without its comments and blank lines: what the interpreter runs. Two
    blocks that differ only in the language of their comments give the same tuple.

    >>> python_code("x = 1   # one\\n\\n# done\\n") == python_code("x = 1   # 一\\n")
    True
    >>> python_code("x = 1\\n") == python_code("x = 2\\n")
    False
    """
    skip = (tokenize.COMMENT, tokenize.NL)
    try:
        tokens = tokenize.generate_tokens(io.StringIO(source).readline)
        return tuple((t.type, t.string) for t in tokens if t.type not in skip)
    except (tokenize.TokenError, SyntaxError):     # not python at all: it is run (and fails) as written
        return source


def twin_of(tour, all_tours):
    """The earlier tour of the same page that runs exactly what ``tour`` runs (what_runs), or None."""
    for other in all_tours:
        if other.name == tour.name:
            return None
        if other.page == tour.page and what_runs(other) == what_runs(tour):
            return other
    return None


def own_rest(tour, other, k):
    """The commands a branch (``branch_of``: ``tour`` begins with ``other``'s first k) must run itself:
    those after its first k, less a tail that is ``other``'s own last commands. A 中文 half that repeats
    the English setup and then the English half's closing section (a section that makes its own files
    and folders, as alignment's tools chapter does) has run all of it in the English tour already.

    >>> en = Tour("p", "p", tuple(commands_of("bash", "zerollm a\\nzerollm b\\nzerollm c\\n")))
    >>> zh = Tour("p", "p#中文", tuple(commands_of("bash", "zerollm a   # 一\\nzerollm c   # 三\\n")))
    >>> own_rest(zh, en, 1), [c.text for c in own_rest(Tour("p", "p#中文", zh.commands + en.commands[1:2]), en, 1)]
    ((), ['zerollm c   # 三', 'zerollm b'])
    """
    mine, theirs = what_runs(tour), what_runs(other)
    n = len(mine) - k
    if 0 < n < len(theirs) - k and mine[k:] == theirs[len(theirs) - n:]:
        return ()
    return tour.commands[k:]


def branch_of(tour, all_tours):
    """(earlier tour, k) when ``tour`` begins with that tour's first k commands (what_runs; k >= 1) and
    then goes its own way: a 中文 half that repeats the English half's setup and then shows something
    else. A copy of the earlier tour's folder, taken after its k-th command, is where ``tour`` would be
    after its own first k; the rest of ``tour`` runs there. None if there is no such tour (or a twin).

    >>> en = Tour("p", "p", tuple(commands_of("bash", "zerollm a\\nzerollm b\\nzerollm c\\n")))
    >>> zh = Tour("p", "p#中文", tuple(commands_of("bash", "zerollm a   # 一\\nzerollm d\\n")))
    >>> branch_of(zh, [en, zh])[1]
    1
    """
    mine = what_runs(tour)
    for other in all_tours:
        if other.name == tour.name:
            return None
        if other.page == tour.page:
            theirs, k = what_runs(other), 0
            while k < min(len(mine), len(theirs)) and mine[k] == theirs[k]:
                k += 1
            if k and theirs != mine:
                return other, k
    return None
