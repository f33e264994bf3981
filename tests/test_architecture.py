"""The import rule of docs/architecture.md, checked on every module of the package.

Every import is read with ``ast`` (module level and inside functions), by scripts/architecture.py, the
same code that draws the picture in docs/architecture.md. A circle, a room importing a room above it, a
command importing another command, or a root entry without its docstring fails here.
"""

import ast
import importlib
import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
spec = importlib.util.spec_from_file_location("architecture", REPO / "scripts" / "architecture.py")
arch = importlib.util.module_from_spec(spec)
spec.loader.exec_module(arch)


@pytest.fixture(scope="module")
def graph():
    return arch.graph()


def test_the_documented_order_names_every_room():
    order = arch.documented_order()
    rooms = sorted(p.name for p in (REPO / "zerollm").iterdir() if p.is_dir() and p.name != "__pycache__")
    assert set(rooms) <= set(order), f"rooms missing from docs/architecture.md: {set(rooms) - set(order)}"
    assert order[0] == "io" and order[-1] == "cli"
    assert len(order) == len(set(order))


def test_no_import_circles(graph):
    assert arch.cycles(graph) == []


def test_no_room_imports_a_room_above_it(graph):
    assert arch.violations(graph, arch.documented_order()) == []


def test_the_checker_sees_a_circle_and_an_upward_import():
    # the rule can fail: a made-up graph with both faults
    g = {"zerollm.io.a": {"zerollm.cli.b"}, "zerollm.cli.b": {"zerollm.io.a"}}
    assert arch.cycles(g) == [["zerollm.cli.b", "zerollm.io.a", "zerollm.cli.b"]]
    assert [(m, d) for m, d, _ in arch.violations(g, ["io", "cli"])] == [("zerollm.io.a", "zerollm.cli.b")]


def test_imports_inside_functions_count(tmp_path):
    src = tmp_path / "m.py"
    src.write_text("def f():\n    from zerollm.cli import entry\n")
    assert arch.imports_of("zerollm.io.m", str(src), {"zerollm.cli", "zerollm.cli.entry"}) == {"zerollm.cli.entry"}


def test_no_command_imports_another_command(graph):
    commands = {m for m in graph if m.startswith("zerollm.cli.commands.")}
    bad = {(m, d) for m in commands for d in graph[m] if d in commands}
    assert not bad, bad


def test_the_root_holds_about_a_dozen_rooms_each_with_its_docstring():
    entries = sorted(p.name for p in (REPO / "zerollm").iterdir() if p.name != "__pycache__")
    assert len(entries) <= 16, entries          # 14 rooms + __init__.py + __main__.py
    for name in entries:
        path = REPO / "zerollm" / name
        init = path / "__init__.py" if path.is_dir() else path
        assert init.exists(), f"zerollm/{name} is not a package"
        doc = ast.get_docstring(ast.parse(init.read_text(encoding="utf-8")))
        assert doc and len(doc) > 40, f"zerollm/{name} has no docstring saying what lives there"


def test_the_picture_in_the_docs_is_the_one_the_code_gives(graph):
    text = (REPO / "docs" / "architecture.md").read_text(encoding="utf-8")
    assert arch.picture(graph, arch.documented_order()) in text, \
        "docs/architecture.md is out of date: run python scripts/architecture.py --write"


@pytest.mark.parametrize("old", sorted(__import__("zerollm").MOVED))
def test_an_old_path_fails_naming_the_new_one(old):
    import zerollm
    with pytest.raises(ImportError) as err:
        importlib.import_module(old)
    # a module whose package moved elsewhere is named in its package's message
    assert f"{old} moved to {zerollm.MOVED[old]}" in str(err.value) or \
        f"{old} to {zerollm.MOVED[old]}" in str(err.value)
    assert importlib.import_module(zerollm.MOVED[old])


def test_old_names_of_a_room_that_was_a_module_fail_naming_the_new_module():
    with pytest.raises(ImportError, match="zerollm.data.get_batch moved to zerollm.data.tokens.get_batch"):
        exec("from zerollm.data import get_batch", {})
    from zerollm.model import GPT, GPTConfig    # the public path stays
    assert GPT.__module__ == "zerollm.model.gpt" and GPTConfig.__module__ == "zerollm.model.config"


def test_update_imports_rewrites_old_code_once(tmp_path):
    f = tmp_path / "old.py"
    f.write_text("from zerollm import budget, corpora\nimport zerollm.sample\n"
                 "from zerollm.tasks.acrostic import reward\nx = 'zerollm/fast/jit.py'\n")
    run = lambda: subprocess.run([sys.executable, str(REPO / "scripts" / "update_imports.py"), str(f)],
                                 capture_output=True, text=True, check=True, cwd=REPO)
    run()
    assert f.read_text() == ("from zerollm.model import budget\nfrom zerollm.data import corpora\n"
                             "import zerollm.generation.sample\nfrom zerollm.align.tasks.acrostic import reward\n"
                             "x = 'zerollm/engine/fast/jit.py'\n")
    before = f.read_text()
    run()
    assert f.read_text() == before
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    subprocess.run([sys.executable, str(f)], check=True, env=env, cwd=tmp_path)
