"""The rooms of zerollm and the imports between them, read from the code (docs/architecture.md).

    python scripts/architecture.py            # check the import rule; print the picture of the layers
    python scripts/architecture.py --write    # also paste the picture into docs/architecture.md

Every ``import`` and ``from ... import`` of every module is read with ``ast`` (at module level and
inside functions alike; nothing is executed). A room is a folder under zerollm/ (the package itself
and ``__main__`` stand apart). The rule: a room imports only rooms BELOW it in the order that
docs/architecture.md states, and no module imports itself through others (no circles).
"""

import argparse
import ast
import os
import re
import sys
from collections import defaultdict

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
PACKAGE = os.path.join(REPO, "zerollm")
DOC = os.path.join(REPO, "docs", "architecture.md")
ORDER_LINE = re.compile(r"^Layers, bottom to top: (.+)$", re.M)


def modules():
    """{dotted module name: file path} for every .py file of the package."""
    found = {}
    for folder, dirs, files in os.walk(PACKAGE):
        dirs[:] = sorted(d for d in dirs if d != "__pycache__")
        for name in sorted(files):
            if name.endswith(".py"):
                path = os.path.join(folder, name)
                dotted = os.path.relpath(path, REPO)[:-3].replace(os.sep, ".")
                found[dotted.removesuffix(".__init__")] = path
    return found


def imports_of(name, path, known):
    """The zerollm modules that ``name`` imports anywhere in its file (a name imported from a package
    counts as that submodule when one exists)."""
    tree = ast.parse(open(path, encoding="utf-8").read(), path)
    is_package = path.endswith("__init__.py")
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = name.split(".") if is_package else name.split(".")[:-1]
                base = base[:len(base) - node.level + 1]
                source = ".".join(base + ([node.module] if node.module else []))
            else:
                source = node.module
            subs = [f"{source}.{a.name}" for a in node.names if f"{source}.{a.name}" in known]
            out.update(subs if subs and len(subs) == len(node.names) else [source, *subs])
    return {m for m in out if m in known and m != name}


def graph():
    known = modules()
    return {name: imports_of(name, path, known) for name, path in known.items()}


def room(module):
    """zerollm.training.trainer -> 'training'; the package root and __main__ are rooms of their own."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "zerollm"


def documented_order(doc=DOC):
    """The layer order, bottom first, as the line 'Layers, bottom to top: io < engine < ...' states it."""
    match = ORDER_LINE.search(open(doc, encoding="utf-8").read())
    if not match:
        raise SystemExit(f"{doc} has no line 'Layers, bottom to top: a < b < ...'")
    return [r.strip(" `") for r in match.group(1).split("<")]


def cycles(g):
    """Every import circle, as a list of modules (found by depth-first search; each reported once)."""
    seen, stack, on_stack, found = set(), [], set(), []

    def visit(m):
        seen.add(m)
        stack.append(m)
        on_stack.add(m)
        for n in sorted(g[m]):
            if n in on_stack:
                found.append(stack[stack.index(n):] + [n])
            elif n not in seen:
                visit(n)
        stack.pop()
        on_stack.discard(m)

    for m in sorted(g):
        if m not in seen:
            visit(m)
    return found


def violations(g, order):
    """(module, imported module) pairs where a room imports a room at or above its own level."""
    level = {r: i for i, r in enumerate(order)}
    bad = []
    for m, deps in sorted(g.items()):
        if room(m) in ("zerollm", "__main__"):
            continue
        for d in sorted(deps):
            a, b = room(m), room(d)
            if a == b or b == "zerollm":
                continue
            if a not in level or b not in level:
                bad.append((m, d, f"room {a if a not in level else b!r} is not in the documented order"))
            elif level[b] > level[a]:
                bad.append((m, d, f"{a} is below {b}"))
    return bad


def picture(g, order):
    """The layers as text: each room, what it holds, and the rooms it imports directly."""
    uses = defaultdict(set)
    size = defaultdict(int)
    for m, deps in g.items():
        size[room(m)] += 1
        for d in deps:
            if room(d) != room(m) and room(d) != "zerollm":
                uses[room(m)].add(room(d))
    width = max(len(r) for r in order)
    lines = []
    for r in reversed(order):
        below = sorted(uses[r], key=order.index, reverse=True)
        lines.append(f"{r:<{width}}  {size[r]:>3} modules   imports: {', '.join(below) if below else '-'}")
    return "\n".join(lines)


BEGIN, END = "<!-- layers: begin (scripts/architecture.py --write) -->", "<!-- layers: end -->"


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--write", action="store_true", help="paste the picture into docs/architecture.md")
    args = p.parse_args(argv)
    g = graph()
    order = documented_order()
    problems = [f"circle: {' -> '.join(c)}" for c in cycles(g)]
    problems += [f"{m} imports {d}: {why}" for m, d, why in violations(g, order)]
    text = picture(g, order)
    print(text)
    if args.write:
        doc = open(DOC, encoding="utf-8").read()
        block = f"{BEGIN}\n```text\n{text}\n```\n{END}"
        doc = re.sub(re.escape(BEGIN) + ".*?" + re.escape(END), lambda _: block, doc, flags=re.S)
        with open(DOC, "w", encoding="utf-8") as f:
            f.write(doc)
    for line in problems:
        print(line, file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
