"""``zerollm exercise``: practise the course by writing its pieces yourself, graded on the spot.

    zerollm exercise list                      every exercise, by part of the course
    zerollm exercise start NAME [--dir DIR]    write DIR/NAME.py: the signature, the task, NotImplementedError
    zerollm exercise check NAME [--dir DIR]    grade it (exit 0 when right; else one line on what is wrong)
    zerollm exercise hint NAME [--dir DIR]     the next hint (three per exercise, gentle to nearly there)
    zerollm exercise solution NAME             zerollm's own code for it, from the package itself
"""

import importlib
import inspect
import json
import textwrap
from pathlib import Path

from zerollm.io.argtypes import Range
from zerollm.io.errors import ZeroLLMError
from zerollm.io.fileio import atomic_write
from zerollm.io.i18n import add_lang_argument, resolve_lang
from zerollm.teach.exercises.catalog import BY_NAME, EXERCISES
from zerollm.teach.exercises.check import check

DEFAULT_DIR = "exercises"
HINTS_FILE = ".hints.json"      # in the exercise folder: how many hints of each exercise were given

TEXT = {
    "list_head": {"en": "{n} exercises (start one: zerollm exercise start NAME):",
                  "zh": "共 {n} 道练习（开始一道：zerollm exercise start NAME）："},
    "part": {"en": "Part {part}", "zh": "第 {part} 部分"},
    "started": {"en": "wrote {path}: write {fn} in it, then run: zerollm exercise check {name}{dir}",
                "zh": "已写入 {path}：在里面写好 {fn}，然后运行：zerollm exercise check {name}{dir}"},
    "exists": {"en": "{path} already exists; it was left as it is (check it: zerollm exercise check {name}{dir})",
               "zh": "{path} 已经存在，保持原样未动（检查它：zerollm exercise check {name}{dir}）"},
    "hint": {"en": "hint {k} of {n} for {name}: {text}", "zh": "{name} 的提示 {k}/{n}：{text}"},
    "no_more": {"en": "that was the last hint for {name}; zerollm's own code: zerollm exercise solution {name}",
                "zh": "{name} 的提示已经给完了；zerollm 自己的实现：zerollm exercise solution {name}"},
    "solution": {"en": "zerollm's own code for {name} ({where}):", "zh": "{name} 在 zerollm 里的实现（{where}）："},
    "stub_head": {"en": "zerollm exercise {name} (Part {part}): {title}",
                  "zh": "zerollm 练习 {name}（第 {part} 部分）：{title}"},
    "stub_how": {"en": "check: zerollm exercise check {name}{dir}    hint: zerollm exercise hint {name}{dir}",
                 "zh": "检查：zerollm exercise check {name}{dir}    提示：zerollm exercise hint {name}{dir}"},
}


def _say(key, lang, **fields):
    return TEXT[key][lang].format(**fields)


def _names():
    return ", ".join(e.name for e in EXERCISES)


def add_arguments(p):
    add_lang_argument(p)
    p.add_argument("action", choices=("list", "start", "check", "hint", "solution"),
                   help="list the exercises, start one, check it, get a hint, or see zerollm's own code")
    p.add_argument("name", nargs="?", metavar="NAME", help="the exercise (see: zerollm exercise list)")
    p.add_argument("--dir", default=DEFAULT_DIR, metavar="DIR",
                   help=f"the folder of your exercise files (default: {DEFAULT_DIR})")
    p.add_argument("--time-limit", type=Range(float, 1.0, 3600.0), default=60.0, metavar="SECONDS",
                   help="check: stop your function after this many seconds (default 60)")


def _exercise(name, action):
    if name is None:
        raise ZeroLLMError(f"zerollm exercise {action} needs the exercise's name; one of: {_names()}")
    if name not in BY_NAME:
        raise ZeroLLMError(f"there is no exercise {name!r}; one of: {_names()}")
    return BY_NAME[name]


def _dir_flag(directory):
    return "" if directory == DEFAULT_DIR else f" --dir {directory}"


def stub(exercise, lang, directory=DEFAULT_DIR):
    """The file ``start`` writes: the task in comments, the signature, the docstring and NotImplementedError."""
    head = _say("stub_head", lang, name=exercise.name, part=exercise.part, title=exercise.title[lang])
    how = _say("stub_how", lang, name=exercise.name, dir=_dir_flag(directory))
    return (f"# {head}\n# {how}\n\nimport numpy as np\n\n\ndef {exercise.signature}:\n"
            f'    """{exercise.doc[lang]}\n    """\n    raise NotImplementedError\n')


def run(args):
    lang = resolve_lang(args.lang)
    if args.action == "list":
        return _list(lang)
    exercise = _exercise(args.name, args.action)
    if args.action == "solution":
        return _solution(exercise, lang)
    directory = Path(args.dir)
    if args.action == "start":
        return _start(exercise, directory, args.dir, lang)
    if args.action == "hint":
        return _hint(exercise, directory, lang)
    path = directory / f"{exercise.name}.py"
    if not path.is_file():
        raise ZeroLLMError(f"{path} does not exist: write it first with `zerollm exercise start {exercise.name}"
                           f"{_dir_flag(args.dir)}`")
    ok, message = check(exercise, path, lang, args.time_limit)
    if not ok:
        raise ZeroLLMError(message)
    print(message)
    return 0


def _list(lang):
    print(_say("list_head", lang, n=len(EXERCISES)))
    width = max(len(e.name) for e in EXERCISES) + 2
    for e in EXERCISES:
        print(f"  {_say('part', lang, part=e.part):<10}{e.name:<{width}}{e.title[lang]}")
    return 0


def _start(exercise, directory, given, lang):
    path = directory / f"{exercise.name}.py"
    if path.exists():
        print(_say("exists", lang, path=path, name=exercise.name, dir=_dir_flag(given)))
        return 0
    if directory.exists() and not directory.is_dir():
        raise ZeroLLMError(f"--dir {directory} is a file, not a folder: give a folder for the exercise files")
    directory.mkdir(parents=True, exist_ok=True)
    try:
        with open(path, "x", encoding="utf-8") as f:        # "x": never replaces a file that appeared meanwhile
            f.write(stub(exercise, lang, given))
    except FileExistsError:
        print(_say("exists", lang, path=path, name=exercise.name, dir=_dir_flag(given)))
        return 0
    print(_say("started", lang, path=path, fn=exercise.function, name=exercise.name, dir=_dir_flag(given)))
    return 0


def _read_hints(path):
    try:
        given = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}           # no record yet, or one damaged by hand: start the hints again
    return given if isinstance(given, dict) else {}


def _hint(exercise, directory, lang):
    record = directory / HINTS_FILE
    given = _read_hints(record)
    shown = given.get(exercise.name, 0)
    hints = exercise.hints[lang]
    if not isinstance(shown, int) or shown < 0:
        shown = 0
    if shown >= len(hints):
        print(_say("no_more", lang, name=exercise.name))
        return 0
    print(_say("hint", lang, k=shown + 1, n=len(hints), name=exercise.name, text=hints[shown]))
    directory.mkdir(parents=True, exist_ok=True)
    with atomic_write(record, "w") as f:
        f.write(json.dumps({**given, exercise.name: shown + 1}, indent=1) + "\n")
    return 0


def source_of(dotted):
    """The source of a function (or method) of zerollm named 'module.function' or 'module.Class.method'."""
    parts = dotted.split(".")
    for cut in range(len(parts) - 1, 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:cut]))
        except ImportError:
            continue
        for attr in parts[cut:]:
            obj = getattr(obj, attr)
        obj = inspect.unwrap(obj)
        return textwrap.dedent(inspect.getsource(obj)), inspect.getsourcefile(obj)   # a method: no class indent
    raise LookupError(dotted)


def _solution(exercise, lang):
    for dotted in exercise.solution:
        code, where = source_of(dotted)
        print(_say("solution", lang, name=exercise.name, where=dotted))
        print()
        print(code.rstrip())
        print()
    return 0
