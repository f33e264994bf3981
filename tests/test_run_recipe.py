"""The one run recipe (zerollm.training.run.run_recipe): ``zerollm train`` and every post-training stage go
through it, and nothing else in zerollm/ locks a run directory, builds a command's Trainer or fits it."""

import ast
import importlib
from pathlib import Path

import pytest

# the commands' modules imported before any test below patches the recipe: what a test sees must not depend
# on whether an earlier one happened to import them first
import zerollm.align.stage
import zerollm.cli.commands.train
from tiny_runs import TINY_MODEL, run_main, tiny_stage_base, tiny_text
from zerollm.training import run

PACKAGE = Path(__file__).resolve().parents[1] / "zerollm"


def callers():
    """{called name: {"module:function" of every function whose body calls it}} over zerollm/: a call
    ``f(...)`` or ``x.f(...)`` counts as one of f."""
    found = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        module = ".".join(path.relative_to(PACKAGE.parent).with_suffix("").parts)
        for func in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not isinstance(func, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            for node in ast.walk(func):
                if isinstance(node, ast.Call):
                    name = getattr(node.func, "id", None) or getattr(node.func, "attr", None)
                    found.setdefault(name, set()).add(f"{module}:{func.name}")
    return found


@pytest.mark.parametrize("name, only", [
    ("locked_run_dir", {"zerollm.training.run:run_recipe"}),
    ("train_and_report", {"zerollm.training.run:run_recipe"}),
    ("fit", {"zerollm.training.run:_train_and_report"}),
    # lm_trainer: the one-call Trainer of a library caller or a test, never a command's
    ("Trainer", {"zerollm.training.run:run_recipe", "zerollm.training.trainer:lm_trainer"}),
])
def test_the_recipe_alone_locks_builds_and_fits(name, only):
    assert callers().get(name, set()) == only


def test_train_and_the_stages_call_the_recipe():
    assert {"zerollm.cli.commands.train:run", "zerollm.align.stage:run_stage"} <= callers()["run_recipe"]


@pytest.mark.parametrize("command", ["sft", "reward", "dpo", "ppo", "grpo"])
def test_a_stage_builds_its_objective_in_align_not_in_its_command(command):
    """align.stage calls the Stage's builder: one in the command's module would take the run back up into
    the cli room it came from."""
    stage = importlib.import_module(f"zerollm.cli.commands.{command}").STAGE
    assert stage.build.__module__.startswith("zerollm.align."), stage.build.__module__


# ----------------------------------------------------------------------------
# the commands, up to the point where fit() would begin

@pytest.fixture(scope="module")
def base(tmp_path_factory):
    return tiny_stage_base(tmp_path_factory.mktemp("recipe"))


COMMANDS = {
    "train": ["--data", "{text}", *TINY_MODEL],
    "sft": ["--init", "{base}/base", "--data", "{base}/sft.jsonl"],
    "reward": ["--init", "{base}/base", "--data", "{base}/prefs.jsonl"],
    "dpo": ["--init", "{base}/base", "--data", "{base}/prefs.jsonl"],
    "ppo": ["--init", "{base}/base", "--data", "{base}/prompts.jsonl", "--reward", "addition"],
    "grpo": ["--init", "{base}/base", "--data", "{base}/prompts.jsonl", "--reward", "addition"],
}


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_each_command_hands_its_trainer_to_the_recipe(command, base, tmp_path, monkeypatch, capsys):
    """The recipe's last step is replaced: every command ends there, with its own objective in a Trainer
    built by the recipe, and exits with what that step returns."""
    handed = []

    def report(trainer, run_dir, name, *, resumed, progress, blas_threads):
        handed.append((name, trainer.objective.kind, run_dir, resumed))
        return 7
    monkeypatch.setattr(run, "train_and_report", report)
    out = tmp_path / "run"
    argv = [a.format(text=tiny_text(tmp_path), base=base) for a in COMMANDS[command]]
    code, _, err = run_main([command, *argv, "--out", out, "--no-progress"], capsys)
    assert (code, handed) == (7, [(command, "lm" if command == "train" else command, str(out), False)]), err
