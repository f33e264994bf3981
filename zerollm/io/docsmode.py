"""``ZEROLLM_DOCS_TEST``: the documentation's long commands, shrunk, in this one place.

tests/test_docs_run.py runs every command of README.md and docs/*.md exactly as a reader types it.
A few of them run for minutes (2000 training steps, 300 sampled poems, a benchmark); with this
variable set they stop early instead, and each limit that bites says so once on stderr. Nothing
else changes, so the text a reader sees never has to be edited for a test. Two sizes:

- ``ZEROLLM_DOCS_TEST=1`` (a smoke run, seconds): every command runs, at the LIMITS below, and a
  preset's model is SMALL_MODEL (2 layers, 64 wide; a flag the user gives still wins), so what is built
  on it later (SFT, GRPO's rollouts, a server) is quick too. A model learns nothing in 4 steps, but every
  file and line of output is there. benchmarks/*.py and scripts/*.py ask ``active()`` and then measure
  one small case only.
- ``ZEROLLM_DOCS_TEST=small`` (tens of seconds): a run that still learns. The same SMALL_MODEL, and the
  steps at SMALL's limits: the stage that teaches a task (SFT) keeps most of its steps, pre-training few
  (the base only has to have seen the characters).
  tests/test_readme_recipe.py runs the README's assistant path this way and requires its SFT model to
  succeed clearly more often than its base.

    >>> limit("poems", 300, environ={})
    300
    >>> limit("training steps", 2000, environ={ENV: "small"}, quiet=True)
    800
"""

import os
import sys

ENV = "ZEROLLM_DOCS_TEST"
LIMITS = {
    "pre-training steps": 4,     # per command: a --resume after it runs 4 more
    "training steps": 4,         # the other stages (SFT, reward, DPO, PPO, GRPO)
    "evaluation batches": 1,     # of each split, at each evaluation: one batch prints every number a reader sees
    "sample tokens": 20,         # the sample printed at each evaluation
    "poems": 8,                  # scripts/tang_form.py
    "examples evaluated": 16,    # a task's prompts sampled by `tasks eval` and at each SFT evaluation
    "rollout prompts per step": 4,   # GRPO / PPO: prompts of each rollout batch (each answered group-size times)
    "answers per prompt": 4,     # GRPO's group: enough to compare answers, a quarter of a group of 16's work
    "BPE training characters": 100_000,   # the text a BPE learns its merges from (it still encodes all of it)
    "examples made": 2_000,      # by `tasks make`: more than 4 steps of any stage read (each SFT encodes them all)
}
SMALL = {**LIMITS, "pre-training steps": 150, "training steps": 800, "evaluation batches": 4,
         "examples evaluated": 64, "BPE training characters": 400_000, "answers per prompt": 64,
         "examples made": 1_000_000}       # 800 SFT steps learn from every example a recipe makes
SMALL_MODEL = {"n_layer": 2, "n_embd": 64}      # in place of a preset's own (a flag the user gives still wins)
_said = set()


def profile(environ=None):
    """None (off), "smoke" (ZEROLLM_DOCS_TEST=1 or any other value) or "small"."""
    value = (os.environ if environ is None else environ).get(ENV, "")
    if value in ("", "0"):
        return None
    return "small" if value.strip().lower() == "small" else "smoke"


def active(environ=None):
    """Is the documentation test running? (ZEROLLM_DOCS_TEST set to anything but '' or '0')"""
    return profile(environ) is not None


def _say(key, message, quiet):
    if key not in _said and not quiet:
        _said.add(key)
        print(f"zerollm: {ENV} is set: {message}", file=sys.stderr)


def limit(what, value, environ=None, quiet=False):
    """``value``, or the profile's limit of ``what`` when the docs test is on and ``value`` is larger."""
    size = profile(environ)
    if size is None:
        return value
    cap = (SMALL if size == "small" else LIMITS)[what]
    if value <= cap:
        return value
    _say(what, f"{what} limited to {cap} (asked for {value})", quiet)
    return cap


def preset_model(values, environ=None, quiet=False):
    """A preset's values, with SMALL_MODEL in place of its model size whenever the docs test is on."""
    if profile(environ) is None:
        return values
    _say("model", f"the preset's model shrunk to {SMALL_MODEL['n_layer']} layers, {SMALL_MODEL['n_embd']} wide", quiet)
    return {**values, **SMALL_MODEL}
