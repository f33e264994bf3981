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


upd_spec = importlib.util.spec_from_file_location("update_imports", REPO / "scripts" / "update_imports.py")
update_imports = importlib.util.module_from_spec(upd_spec)
upd_spec.loader.exec_module(update_imports)


def test_importing_zerollm_adds_no_import_hook():
    # the old layout's paths are the update script's business: the package installs no finder and its
    # rooms answer no missing name with a message, so an old path is an ordinary ModuleNotFoundError
    code = ("import sys; before = list(sys.meta_path)\n"
            "import zerollm, zerollm.model, zerollm.data, zerollm.cli\n"
            "assert sys.meta_path == before, sys.meta_path\n"
            "assert not hasattr(zerollm, 'MOVED') and not hasattr(zerollm, 'moved_names')\n"
            "for room in (zerollm.model, zerollm.data, zerollm.cli):\n"
            "    assert '__getattr__' not in vars(room), room\n"
            "try:\n    import zerollm.sample\nexcept ModuleNotFoundError as e:\n"
            "    assert 'moved' not in str(e), e\nelse:\n    raise AssertionError('zerollm.sample imported')\n")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO,
                       env={**os.environ, "PYTHONPATH": str(REPO)})
    assert r.returncode == 0, r.stderr


@pytest.mark.parametrize("old", sorted(update_imports.MOVED))
def test_update_imports_rewrites_every_moved_path(old):
    new = update_imports.MOVED[old]
    assert update_imports.rewrite(f"import {old}\n") == f"import {new}\n"
    assert update_imports.rewrite(f"x = 'zerollm/{old[8:].replace('.', '/')}.py'\n") == \
        f"x = 'zerollm/{new[8:].replace('.', '/')}.py'\n"
    assert _exists(new) and not _exists(old)            # the table leads from no module to a module


def _exists(module):
    """True where ``module`` can be imported (found without running it: torch_ref would import torch)."""
    try:
        return importlib.util.find_spec(module) is not None
    except ModuleNotFoundError:                         # its package is missing
        return False


def test_update_imports_rewrites_names_of_a_room_that_was_a_module():
    assert update_imports.rewrite("from zerollm.data import get_batch\n") == \
        "from zerollm.data.tokens import get_batch\n"
    assert update_imports.rewrite("from zerollm.data import formats, tokens\n") == \
        "from zerollm.data import formats, tokens\n"      # the room's own modules: already new
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


def _slow(node):
    """True where a decorator or a ``pytestmark`` value names ``pytest.mark.slow``."""
    return "mark.slow" in ast.unparse(node)


def fast_test_modules(folder=REPO / "tests"):
    """{test module: the rooms it imports} for each module that ``-m "not slow"`` still runs some test of."""
    out = {}
    for path in sorted(folder.glob("test_*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        if any(isinstance(n, ast.Assign) and any(getattr(t, "id", None) == "pytestmark" for t in n.targets)
               and _slow(n.value) for n in tree.body):
            continue
        tests = [n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef) and n.name.startswith("test_")]
        if all(any(_slow(d) for d in t.decorator_list) for t in tests):
            continue
        rooms = set()
        for n in ast.walk(tree):
            if isinstance(n, ast.Import):
                rooms.update(a.name.split(".")[1] for a in n.names if a.name.startswith("zerollm."))
            elif isinstance(n, ast.ImportFrom) and n.module and n.module.startswith("zerollm."):
                rooms.add(n.module.split(".")[1])
            elif isinstance(n, ast.ImportFrom) and n.module == "zerollm":
                rooms.update(a.name for a in n.names)
        out[path.name] = rooms
    return out


def test_the_fast_loop_still_tests_every_room():
    # python -m pytest -m "not slow" is the loop a contributor runs after each change: it must leave no
    # room without a test module that imports it
    rooms = {p.name for p in (REPO / "zerollm").iterdir() if (p / "__init__.py").exists()}
    covered = set().union(*fast_test_modules().values())
    assert rooms <= covered, f"rooms no fast test module imports: {sorted(rooms - covered)}"


def test_a_module_marked_slow_leaves_the_fast_loop(tmp_path):
    # the check above can fail: a module marked slow as a whole, or in each of its tests, covers nothing
    (tmp_path / "test_a.py").write_text("import pytest\nfrom zerollm.io import errors\n"
                                        "pytestmark = [pytest.mark.slow]\ndef test_x():\n    pass\n")
    (tmp_path / "test_b.py").write_text("import pytest\nimport zerollm.nn.loss\n"
                                        "@pytest.mark.slow\ndef test_x():\n    pass\n")
    (tmp_path / "test_c.py").write_text("import pytest\nfrom zerollm import model\n"
                                        "@pytest.mark.slow\ndef test_x():\n    pass\ndef test_y():\n    pass\n")
    assert fast_test_modules(tmp_path) == {"test_c.py": {"model"}}


# ----------------------------------------------------------------------------
# one way to open a model (issue #56): the readers behind open_model have one caller

OPENERS = {                     # (module, function): what reads a saved model or its tokenizer
    ("zerollm.training.modeldir", "load_trained"), ("zerollm.training.modeldir", "read_tokenizer"),
    ("zerollm.training.modeldir", "saved_checkpoint"),
    ("zerollm.interop.hf.loading", "load"), ("zerollm.interop.hf.loading", "load_tokenizer_dir"),
    ("zerollm.interop.hf", "load"), ("zerollm.interop.hf", "load_tokenizer_dir"),
    ("zerollm.interop.gguf_load", "load_gguf"), ("zerollm.tokenizers", "load_tokenizer"),
    ("zerollm.tokenizers", "find_tokenizer"),
}
OPENER_MAY_CALL = {
    "zerollm.interop.opening": {f for _, f in OPENERS},          # the one opener
    "zerollm.interop.hf": {"load", "load_tokenizer_dir"},          # re-exports its own loader
    "zerollm.data.tokens": {"load_tokenizer"},                     # a prepared data folder, not a model
}


def opener_uses(name, source):
    """The OPENERS functions that module ``name`` reaches: imported by name (``from M import f``) or called
    through an imported module (``from P import m; m.f()``, ``import M as m; m.f()``)."""
    tree = ast.parse(source)
    used, aliases = set(), {}
    openers = {m for m, _ in OPENERS}
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module:
            for a in node.names:
                if (node.module, a.name) in OPENERS:
                    used.add(a.name)
                if f"{node.module}.{a.name}" in openers:
                    aliases[a.asname or a.name] = f"{node.module}.{a.name}"
        elif isinstance(node, ast.Import):
            for a in node.names:
                if a.name in openers and a.asname:
                    aliases[a.asname] = a.name
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id in aliases:
            if (aliases[node.value.id], node.attr) in OPENERS:
                used.add(node.attr)
    return used


def test_only_open_model_reads_a_saved_model_or_its_tokenizer():
    bad = {}
    for name, path in arch.modules().items():
        if any(name == m for m, _ in OPENERS):
            continue                                  # where a reader is defined
        used = opener_uses(name, Path(path).read_text(encoding="utf-8")) - OPENER_MAY_CALL.get(name, set())
        if used:
            bad[name] = sorted(used)
    assert not bad, f"open models with zerollm.interop.opening.open_model, not these readers: {bad}"


def test_the_opener_check_sees_a_second_opener():
    # the check above can fail: each way a module could reach a reader is caught
    assert opener_uses("zerollm.cli.commands.x", "from zerollm.training.modeldir import load_trained\n") \
        == {"load_trained"}
    assert opener_uses("zerollm.teach.x", "from zerollm.interop import hf\nm = hf.load(p)\n") == {"load"}
    assert opener_uses("zerollm.align.x", "from zerollm.training import modeldir as md\nt = md.read_tokenizer(p)\n") \
        == {"read_tokenizer"}
    assert opener_uses("zerollm.serve.x", "import zerollm.interop.gguf_load as g\ng.load_gguf(f)\n") == {"load_gguf"}
    assert opener_uses("zerollm.cli.x", "from zerollm.interop import hf\nhf.is_hf_dir(p)\n") == set()


# ----------------------------------------------------------------------------
# one decode loop (issue #56): only the Scheduler runs the model over a KV cache and samples

DECODE_LOOP = "zerollm.generation.batching"
DECODE_CALLS = {"KVCache", "choose", "sample_next"}


def decoding_calls(name, source):
    """What module ``name`` does that only the decode loop may: a call passing a kv_cache (other than None),
    a KVCache built, or the sampler (choose / sample_next) called."""
    found = set()
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, ast.Call):
            continue
        for kw in node.keywords:
            if kw.arg == "kv_cache" and not (isinstance(kw.value, ast.Constant) and kw.value.value is None):
                found.add("kv_cache=")
        callee = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", None)
        if callee in DECODE_CALLS:
            found.add(callee)
    return found


DECODE_MAY = {
    "zerollm.model.gpt": {"kv_cache="},                  # forward hands its own cache on to forward_hidden
    "zerollm.model.kvcache": {"KVCache"},                # the class itself (its docstring's examples)
    "zerollm.generation.sample": {"sample_next"},        # choose ends in sample_next
    "zerollm.generation.prefill": {"KVCache", "kv_cache="},   # the Scheduler's step 2, mixed into it
    "zerollm.generation.speculate": {"kv_cache="},       # the Scheduler's step 5 with guesses, mixed into it
}


def test_only_the_scheduler_decodes():
    bad = {}
    for name, path in arch.modules().items():
        if name == DECODE_LOOP or name.startswith("zerollm.engine.fast"):
            continue
        found = decoding_calls(name, Path(path).read_text(encoding="utf-8")) - DECODE_MAY.get(name, set())
        if found:
            bad[name] = sorted(found)
    assert not bad, f"decode through zerollm.generation.batching.Scheduler, not a loop of your own: {bad}"


def test_the_decode_check_sees_a_second_loop():
    loop = ("def gen(model, idx, n, rng):\n    cache = KVCache(model.config, 1, max_len=64)\n"
            "    for _ in range(n):\n        logits, _ = model.forward(idx, kv_cache=cache)\n"
            "        idx = choose(logits[:, -1], rng, s)\n")
    assert decoding_calls("zerollm.serve.x", loop) == {"KVCache", "kv_cache=", "choose"}
    assert decoding_calls("zerollm.evaluate.x", "model.forward(idx, kv_cache=None)\n") == set()


# ----------------------------------------------------------------------------
# the paths of #56 go down the rooms: traced call by call (scripts/room_trace.py)

trace_spec = importlib.util.spec_from_file_location("room_trace", REPO / "scripts" / "room_trace.py")
room_trace = importlib.util.module_from_spec(trace_spec)
trace_spec.loader.exec_module(room_trace)


@pytest.mark.slow
def test_sft_init_and_a_chat_request_never_call_back_up_a_room(tmp_path, capsys):
    """`zerollm sft --init RUN` (RUN a LoRA run, so its base is opened too) and one chat request to the
    server's app, from the command to the model and back: every call into a higher room goes through an
    object or a function handed down (a contract, a callback), never to a module-level function of a
    room the path had left. On e7f1a09 align.stage called its command's objective builder back up in cli."""
    from tiny_runs import run_main, tiny_stage_base
    tiny_stage_base(tmp_path)
    sft = ["--data", tmp_path / "sft.jsonl", "--max-iters", "2", "--batch-size", "2", "--no-progress"]
    code, _, err = run_main(["sft", "--init", tmp_path / "base", "--out", tmp_path / "lora", "--lora-r", "2", *sft],
                            capsys)
    assert code == 0, err
    code, trace = room_trace.trace_command(["sft", "--init", tmp_path / "lora", "--out", tmp_path / "sft", *sft])
    assert code == 0 and trace.rooms["nn"] > 0 and trace.rooms["interop"] > 0      # it reached the model
    assert dict(trace.up) == {}, trace.up
    answer, trace = room_trace.trace_chat(tmp_path / "sft", "1+2=")
    assert trace.rooms["serve"] > 0 and trace.rooms["nn"] > 0 and isinstance(answer, str)
    assert dict(trace.up) == {}, trace.up


def test_the_trace_sees_a_call_back_up():
    # the check above can fail: a function of a lower room calling a module-level function of a higher one
    code = compile("def upper():\n    return 1\n", "zerollm/cli/fake.py", "exec")
    scope = {"__name__": "zerollm.cli.fake"}
    exec(code, scope)
    low_scope = {"__name__": "zerollm.io.fake"}
    exec(compile("def lower(f):\n    return f()\n", "zerollm/io/fake.py", "exec"), low_scope)
    with room_trace.Trace() as trace:
        low_scope["lower"](scope["upper"])
    assert list(trace.up) == [("io: zerollm.io.fake.lower", "cli: zerollm.cli.fake.upper")]
