"""The README's assistant recipe (Part 6) is the one that works (issue 22): its SFT line carries the
learning rate and steps that docs/alignment.md §5 measured (about 25% sampled, 63% greedy), not the
stage's defaults, which end at 0% from the same base."""

import shlex
from pathlib import Path

from docs_blocks import tours

REPO = Path(__file__).resolve().parent.parent
RECIPE = ("--lr", "--min-lr", "--max-iters")


def _flags(command):
    words = shlex.split(command.split("#")[0])
    return {w: words[i + 1] for i, w in enumerate(words[:-1]) if w.startswith("--")}


def _sft_line(page, init):
    for tour in tours(REPO, page):
        for command in tour.commands:
            if command.text.startswith(f"zerollm sft --init {init} "):
                return _flags(command.text)
    raise AssertionError(f"{page} has no 'zerollm sft --init {init}' line")


def test_the_readme_sft_line_is_the_measured_recipe():
    readme, measured = _sft_line("README.md", "runs/tang"), _sft_line("docs/alignment.md", "runs/tang")
    assert {f: readme.get(f) for f in RECIPE} == {f: measured[f] for f in RECIPE}, (readme, measured)


def test_the_recipe_script_reads_the_readme_block_it_runs():
    """scripts/readme_recipe.py runs the README's Part 6 lines as printed: the base, the data, the SFT."""
    import importlib.util
    spec = importlib.util.spec_from_file_location("readme_recipe", REPO / "scripts" / "readme_recipe.py")
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    commands = script.part6_commands(REPO / "README.md")
    assert commands[0].startswith("zerollm train --preset tang --out runs/tang ")
    sft = next(c for c in commands if c.startswith("zerollm sft --init runs/tang "))
    assert "\\" not in sft and "#" not in sft                   # continuation joined, comment cut
    assert {f: _flags(sft).get(f) for f in RECIPE} == {f: _sft_line("README.md", "runs/tang")[f] for f in RECIPE}
