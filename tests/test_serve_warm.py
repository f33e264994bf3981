"""`zerollm serve` decodes a few tokens before it listens (zerollm.serve.backend.Backend.warm_up): the engine's
first calls (the fast engine loading its kernels) are not paid by the first client, and the served scheduler,
its prefix cache and /metrics are left as they were."""

import os
import subprocess
import sys

from serve_helpers import ROOT, tiny_chat_model
from zerollm.interop.opening import Source, open_model
from zerollm.serve.backend import Backend


def test_warm_up_leaves_the_served_scheduler_and_metrics_as_they_were(tmp_path):
    opened = open_model(Source(hf=str(tiny_chat_model(tmp_path))), prog="test")
    backend = Backend(opened.model, opened.tokenizer, name="t")
    before = backend.metrics.render()
    backend.warm_up()
    s = backend.scheduler
    assert s.steps == 0 and not s.rows and not s.waiting and not s.prefills
    assert s.prefix is None or len(s.prefix.blocks) == 0
    assert backend.metrics.render() == before


def test_after_warm_up_the_fast_engines_decode_and_sampler_kernels_are_loaded(tmp_path):
    """In a process of its own (numba keeps a loaded kernel for the process's life): none before, all after."""
    folder = tiny_chat_model(tmp_path)
    code = f"""
from zerollm.engine import use_engine
from zerollm.engine.fast import decode, sampler
from zerollm.interop.opening import Source, open_model
from zerollm.serve.backend import Backend
with use_engine("fast"):
    opened = open_model(Source(hf={str(folder)!r}), prog="test")
    backend = Backend(opened.model, opened.tokenizer, name="t")
    kernels = (decode._attend, sampler._shortcut)
    print([len(k.signatures) for k in kernels])
    backend.warm_up()
    print([len(k.signatures) for k in kernels])
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=300,
                         env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert out.returncode == 0, out.stderr[-2000:]
    before, after = out.stdout.split("\n")[:2]
    assert before == "[0, 0]" and after == "[1, 1]"
