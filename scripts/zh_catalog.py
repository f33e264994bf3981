"""The 中文 catalog's to-do list: every error message and --help string of zerollm, as a template.

    python scripts/zh_catalog.py --missing            # templates that have no 中文 yet, by room
    python scripts/zh_catalog.py --missing --room align
    python scripts/zh_catalog.py --help-strings        # --help strings that have no 中文 yet

A template is what a message looks like before its values are filled in. It is read from the source
with ``ast`` (nothing is run): the first argument of every call of ZeroLLMError or one of its
subclasses, of argparse.ArgumentTypeError, of warnings.warn and of a parser's .error (the lines the
command line prints); a plain string is itself, an f-string's replacement fields become {0}, {1}, ... in the
order they appear (their format specs and conversions are dropped), literal braces are doubled, and
``"a" + f"b{x}"`` is joined with its fields numbered on. Other first arguments (a variable, a call)
give no template: they are listed as "built elsewhere" so someone looks at how that message is made.
The catalog (zerollm/io/zh/*.py, each module's ZH dict) maps templates to their 中文.
"""

import argparse
import ast
import pathlib
import sys

ROOT = pathlib.Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "zerollm"


def _modules():
    for path in sorted(PACKAGE.rglob("*.py")):
        if "__pycache__" not in path.parts:
            yield path, ast.parse(path.read_text(encoding="utf-8"), filename=str(path))


def error_classes(trees):
    """ZeroLLMError and every class that derives from it (by name, to a fixed point)."""
    names = {"ZeroLLMError"}
    while True:
        more = {node.name for _, tree in trees for node in ast.walk(tree) if isinstance(node, ast.ClassDef)
                and any(isinstance(b, (ast.Name, ast.Attribute)) and
                        (b.id if isinstance(b, ast.Name) else b.attr) in names for b in node.bases)}
        if more <= names:
            return names
        names |= more


def _escape(text):
    return text.replace("{", "{{").replace("}", "}}")


def template(node, start=0):
    """(template, number of fields) of a message expression, or None when it is not built in place."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return _escape(node.value), 0
    if isinstance(node, ast.JoinedStr):
        parts, n = [], start
        for value in node.values:
            if isinstance(value, ast.Constant):
                parts.append(_escape(value.value))
            else:
                parts.append("{%d}" % n)
                n += 1
        return "".join(parts), n - start
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        left = template(node.left, start)
        right = left and template(node.right, start + left[1])
        if left and right:
            return left[0] + right[0], left[1] + right[1]
    return None


# calls whose first argument is a line the user reads, besides the error classes
MESSAGE_CALLS = {"ArgumentTypeError", "warn", "error"}


def error_templates():
    """({template: [(relative path, line)]}, [(relative path, line, the message's expression) of messages
    built elsewhere])."""
    trees = list(_modules())
    classes = error_classes(trees)
    found, elsewhere = {}, []
    for path, tree in trees:
        rel = path.relative_to(ROOT).as_posix()
        for node in ast.walk(tree):
            if not (isinstance(node, ast.Call) and node.args):
                continue
            func = node.func
            name = func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else None
            if name not in classes and name not in MESSAGE_CALLS:
                continue
            t = template(node.args[0])
            if t is None:
                elsewhere.append((rel, node.lineno, ast.unparse(node.args[0])))
            else:
                found.setdefault(t[0], []).append((rel, node.lineno))
    return found, elsewhere


def catalog():
    """Every ZH entry of zerollm/io/zh/*.py, merged (zerollm.io.zh.catalog, the one the CLI uses)."""
    sys.path.insert(0, str(ROOT))
    from zerollm.io.zh import catalog as merged
    return merged()


def room(rel):
    parts = rel.split("/")
    return parts[1] if len(parts) > 2 else parts[-1]


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--missing", action="store_true", help="only the templates without 中文")
    p.add_argument("--room", help="only this room (align, cli, data, ...)")
    p.add_argument("--help-strings", action="store_true",
                   help="instead: every --help string of every command that no template matches")
    args = p.parse_args(argv)
    if args.help_strings:
        sys.path.insert(0, str(ROOT))
        from zerollm.cli.entry import build_parser
        from zerollm.cli.lang import help_strings
        from zerollm.io.zh import lookup
        for where, text in help_strings(build_parser()):
            if lookup(text) is None:
                print(f"{where}\t{text!r}")
        return
    found, elsewhere = error_templates()
    have = catalog() if args.missing else {}
    for t, where in sorted(found.items(), key=lambda kv: kv[1][0]):
        if t in have or (args.room and room(where[0][0]) != args.room):
            continue
        print(f"{where[0][0]}:{where[0][1]}\t{t}")
    for rel, line, expression in elsewhere:
        if not args.room or room(rel) == args.room:
            print(f"{rel}:{line}\t(built elsewhere) {expression}")


if __name__ == "__main__":
    main()
