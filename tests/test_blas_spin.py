"""zerollm shortens OpenBLAS's spin after each call (zerollm/__init__.py), unless the user chose one.

OpenBLAS reads OPENBLAS_THREAD_TIMEOUT once, when NumPy loads it; importing zerollm first (the CLI always
does) sets it in time. Each case runs in a fresh interpreter, as that is the only place the order shows."""

import os
import subprocess
import sys

PROBE = "import zerollm, os; print(os.environ['OPENBLAS_THREAD_TIMEOUT'])"


def _probe(extra):
    env = {k: v for k, v in os.environ.items() if k != "OPENBLAS_THREAD_TIMEOUT"}
    env.update(extra)
    return subprocess.run([sys.executable, "-c", PROBE], env=env, capture_output=True, text=True,
                          check=True).stdout.strip()


def test_zerollm_sets_a_short_openblas_spin_before_numpy_loads_it():
    assert _probe({}) == "18"


def test_a_spin_the_user_set_is_kept():
    assert _probe({"OPENBLAS_THREAD_TIMEOUT": "7"}) == "7"
