"""Rewrite the module paths that moved when zerollm was regrouped into rooms (docs/architecture.md).

    python scripts/update_imports.py my_script.py notebooks/*.py     # rewrites the files in place
    python scripts/update_imports.py --check my_script.py            # only lists what would change

The table of what moved (``MOVED``: old module -> new module; ``REHOMED``: a module whose name became a
room, and the module of that room where its contents went) lives here, in this script only: the package
itself carries no trace of the old layout, so an old import simply fails with ModuleNotFoundError and
this script is the way to update the code. It rewrites dotted paths (``zerollm.sample.generate``),
``from zerollm import x`` lines and source paths (``zerollm/sample.py``). A path that already names a
module of the new layout is left as it is, so running it twice changes nothing the second time.
"""

import argparse
import os
import re
import sys

# Every module that moved when the rooms were made: old path -> new path.
MOVED = {
    "zerollm.errors": "zerollm.io.errors",
    "zerollm.fileio": "zerollm.io.fileio",
    "zerollm.outdir": "zerollm.io.outdir",
    "zerollm.lock": "zerollm.io.lock",
    "zerollm.validate": "zerollm.io.validate",
    "zerollm.argtypes": "zerollm.io.argtypes",
    "zerollm.arrayio": "zerollm.io.arrayio",
    "zerollm.docsmode": "zerollm.io.docsmode",
    "zerollm.safetensors": "zerollm.io.safetensors",
    "zerollm.fast": "zerollm.engine.fast",
    "zerollm.threads": "zerollm.engine.threads",
    "zerollm.memory": "zerollm.engine.memory",
    "zerollm.amp": "zerollm.engine.amp",
    "zerollm.attention": "zerollm.nn.self_attention",
    "zerollm.config": "zerollm.model.config",
    "zerollm.heads": "zerollm.model.heads",
    "zerollm.policy": "zerollm.model.policy",
    "zerollm.kvcache": "zerollm.model.kvcache",
    "zerollm.budget": "zerollm.model.budget",
    "zerollm.formats": "zerollm.data.formats",
    "zerollm.download": "zerollm.data.download",
    "zerollm.corpora": "zerollm.data.corpora",
    "zerollm.sample": "zerollm.generation.sample",
    "zerollm.display": "zerollm.generation.display",
    "zerollm.train": "zerollm.training.trainer",
    "zerollm.optim": "zerollm.training.optim",
    "zerollm.checkpoint": "zerollm.training.checkpoint",
    "zerollm.parallel": "zerollm.training.parallel",
    "zerollm.dist": "zerollm.training.dist",
    "zerollm.runlog": "zerollm.training.runlog",
    "zerollm.presets": "zerollm.training.presets",
    "zerollm.objectives.base": "zerollm.training.objective",
    "zerollm.objectives.lm": "zerollm.training.lm",
    "zerollm.objectives": "zerollm.align.objectives",
    "zerollm.rl": "zerollm.align.rl",
    "zerollm.tasks": "zerollm.align.tasks",
    "zerollm.chat": "zerollm.data.chat",
    "zerollm.poems": "zerollm.align.tasks.poems",
    "zerollm.hf": "zerollm.interop.hf",
    "zerollm.gradcheck": "zerollm.teach.gradcheck",
    "zerollm.torch_ref": "zerollm.teach.torch_ref",
    "zerollm.explain": "zerollm.teach.explain",
    "zerollm.i18n": "zerollm.io.i18n",
    "zerollm.commands.train_plan": "zerollm.training.plan",
    "zerollm.commands": "zerollm.cli.commands",
}

# Modules whose name is now a room: their old contents live in one module of that room.
REHOMED = {
    "zerollm.model": "zerollm.model.gpt",
    "zerollm.data": "zerollm.data.tokens",
    "zerollm.cli": "zerollm.cli.entry",
}

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "zerollm")


def _is_new_module(dotted):
    """True where ``dotted`` is a module or package of the current tree (zerollm/...)."""
    rel = dotted.split(".")[1:]
    path = os.path.join(ROOT, *rel)
    return os.path.isdir(path) or os.path.isfile(path + ".py")


def rewrite_dotted(dotted):
    """``zerollm.sample.generate`` -> ``zerollm.generation.sample.generate``; other paths unchanged."""
    parts = dotted.split(".")
    for n in range(len(parts), 1, -1):
        head = ".".join(parts[:n])
        if head in MOVED:
            return ".".join([MOVED[head]] + parts[n:])
        if head in REHOMED:
            if n < len(parts) and _is_new_module(".".join(parts[:n + 1])):
                return dotted                           # zerollm.data.formats: already new
            return ".".join([REHOMED[head]] + parts[n:])
        if _is_new_module(head):
            return dotted
    return dotted


_DOTTED = re.compile(r"(?<![\w.])zerollm(?:\.[A-Za-z_]\w*)+")
_FROM = re.compile(r"^(\s*)from zerollm import ([^#\n]+?)(\s*(?:#.*)?)$", re.M)
_PATH = re.compile(r"(?:(?<=\.\./)|(?<![\w/]))zerollm(?:/[A-Za-z_]\w*)+(?:\.py)?/?")


def _rewrite_from(match):
    indent, names, tail = match.group(1), match.group(2), match.group(3)
    if names.strip().startswith("("):
        return match.group(0)                           # a parenthesised list: left for a person
    groups = {}
    for item in names.split(","):
        item = item.strip()
        if not item:
            continue
        name, _, alias = item.partition(" as ")
        new = rewrite_dotted("zerollm." + name.strip())
        parent, _, leaf = new.rpartition(".")
        if leaf != name.strip() and not alias:
            alias = name.strip()
        groups.setdefault(parent, []).append(leaf + (f" as {alias.strip()}" if alias else ""))
    lines = [f"{indent}from {parent} import {', '.join(items)}" for parent, items in groups.items()]
    return "\n".join(lines) + tail


def _rewrite_path(match):
    text = match.group(0)
    trail = "/" if text.endswith("/") else ""
    core = text.rstrip("/")
    suffix = ".py" if core.endswith(".py") else ""
    dotted = core[: len(core) - len(suffix)].replace("/", ".")
    new = rewrite_dotted(dotted)
    if new == dotted:
        return text
    return new.replace(".", "/") + suffix + trail


_IMPORTED = re.compile(r" import ([\w ,]+)")


def _rewrite_token(match):
    dotted = match.group(0)
    if dotted in REHOMED:                               # from zerollm.model import budget: a room's module
        names = _IMPORTED.match(match.string, match.end())
        if names and all(_is_new_module(f"{dotted}.{n.split(' as ')[0].strip()}")
                         for n in names.group(1).split(",")):
            return dotted
    return rewrite_dotted(dotted)


def rewrite(text):
    text = _FROM.sub(_rewrite_from, text)
    text = _DOTTED.sub(_rewrite_token, text)
    return _PATH.sub(_rewrite_path, text)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("files", nargs="+")
    p.add_argument("--check", action="store_true", help="list the files that would change; write nothing")
    args = p.parse_args(argv)
    changed = 0
    for path in args.files:
        if os.path.abspath(path) == os.path.abspath(__file__):
            continue                                    # its own table would be rewritten into new -> new
        with open(path, encoding="utf-8") as f:
            old = f.read()
        new = rewrite(old)
        if new != old:
            changed += 1
            print(("would rewrite " if args.check else "rewrote ") + path)
            if not args.check:
                with open(path, "w", encoding="utf-8") as f:
                    f.write(new)
    print(f"{changed} of {len(args.files)} files {'would change' if args.check else 'changed'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
