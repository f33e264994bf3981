"""``ZEROLLM_DOCS_TEST=1``: the documentation's long commands, shrunk to seconds, in this one place.

tests/test_docs_run.py runs every command of README.md and docs/*.md exactly as a reader types it.
A few of them run for minutes (2000 training steps, 300 sampled poems, a benchmark); with this
variable set they stop early instead, at the LIMITS below, and each limit that bites says so once
on stderr. benchmarks/run.py asks ``active()`` and then measures one small GEMM only. Nothing else
changes, so the text a reader sees never has to be edited for the test.

    >>> limit("poems", 300, environ={})
    300
"""

import os
import sys

ENV = "ZEROLLM_DOCS_TEST"
LIMITS = {
    "training steps": 8,         # per command: a --resume after it runs 8 more
    "evaluation batches": 2,     # of each split, at each evaluation
    "sample tokens": 20,         # the sample printed at each evaluation
    "poems": 8,                  # scripts/tang_form.py
    "examples evaluated": 16,    # a task's prompts sampled by `tasks eval` and at each SFT evaluation
    "rollout prompts per step": 4,   # GRPO / PPO: prompts of each rollout batch (each answered group-size times)
}
_said = set()


def active(environ=None):
    """Is the documentation test running? (ZEROLLM_DOCS_TEST set to anything but '' or '0')"""
    return (os.environ if environ is None else environ).get(ENV, "") not in ("", "0")


def limit(what, value, environ=None):
    """``value``, or LIMITS[what] when the docs test is on and ``value`` is larger."""
    cap = LIMITS[what]
    if not active(environ) or value <= cap:
        return value
    if what not in _said:
        _said.add(what)
        print(f"zerollm: {ENV} is set: {what} limited to {cap} (asked for {value})", file=sys.stderr)
    return cap
