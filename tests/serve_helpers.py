"""A tiny chat model on disk and a real `zerollm serve` process for the server's tests.

    folder = tiny_chat_model(tmp_path)            # a Hugging Face directory: byte tokenizer + chat tokens
    with server(folder, "--max-batch", "8") as (base, proc):
        ...                                        # base = "http://127.0.0.1:PORT"
"""

import contextlib
import fcntl
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]


def bare_env():
    """The environment of a command checked as from a clean shell: PYTHONPATH alone, plus the suite's cache of
    compiled kernels and its BLAS kernels (tests/conftest.py). Without the cache a fast-engine start in a fresh
    clone compiled its kernels into a second, cold folder (a port-in-use refusal took 15 s against 1.6)."""
    keep = ("NUMBA_CACHE_DIR", "OPENBLAS_CORETYPE")
    return {"PYTHONPATH": str(ROOT), **{name: os.environ[name] for name in keep if name in os.environ}}


def tiny_chat_model(folder, block_size=96, seed=1, n_embd=32, n_layer=2, name="tiny-chat", chat_tokens=True):
    """A random GPT (2 layers, width 32) with a byte tokenizer and the chat template's tokens, exported
    as a Hugging Face directory (``chat_tokens=False``: a base model, bytes only, that never stops early). Its weights are scaled up so greedy answers vary from token to token
    (a fresh model's near-uniform logits would repeat one id)."""
    from zerollm.data import chat
    from zerollm.interop.hf import export
    from zerollm.model.gpt import GPT, GPTConfig
    from zerollm.tokenizers import ByteTokenizer
    tok = chat.prepare_tokenizer(ByteTokenizer()) if chat_tokens else ByteTokenizer()
    model = GPT(GPTConfig(vocab_size=tok.vocab_size, block_size=block_size, n_layer=n_layer, n_head=2,
                                n_embd=n_embd), seed=seed)
    for value in model.params.values():
        if value.ndim == 2:
            value *= 8
    path = Path(folder) / name
    export(model, path, tokenizer=tok)
    return path


CALCULATOR = {"type": "function", "function": {     # zerollm.align.tools.CALCULATOR, as `zerollm chat` lists it
    "name": "calculator", "description": "exact arithmetic on whole numbers: + - * / ( ) **",
    "parameters": {"type": "object", "properties": {"expression": {"type": "string"}}, "required": ["expression"]}}}
TOOL_PROBLEMS = (("12*34", "408"), ("56*78", "4368"))


def tool_rows():
    """Two conversations in which the assistant thinks, calls the calculator, reads its answer and says it."""
    rows = []
    for question, answer in TOOL_PROBLEMS:
        call = {"id": "call_1", "type": "function", "function": {"name": "calculator",
                                                                "arguments": {"expression": question}}}
        rows.append({"tools": [CALCULATOR], "messages": [
            {"role": "user", "content": question + "=?"},
            {"role": "assistant", "reasoning_content": "calc", "content": "", "tool_calls": [call]},
            {"role": "tool", "tool_call_id": "call_1", "content": answer},
            {"role": "assistant", "reasoning_content": "ok", "content": answer}]})
    return rows


_TOOL_RUNS = {}


def tiny_tool_run(tmp_path_factory, steps=400):
    """A run of a 2-layer byte model fine-tuned (about ten seconds of CPU; once per test run) on
    ``tool_rows`` until it says them by heart: greedy, it thinks "calc", calls the calculator with the
    question, and after the tool's answer thinks "ok" and repeats it. The suite's pytest-xdist workers
    share it: the first to ask trains it, another that asks meanwhile waits for it (the runs of four test
    files, and every worker trained its own)."""
    if steps not in _TOOL_RUNS:
        _TOOL_RUNS[steps] = _shared_tool_run(_run_folder(tmp_path_factory), steps)
    return _TOOL_RUNS[steps]


def _run_folder(tmp_path_factory):
    """The temporary folder every worker of this test run sees: pytest-xdist gives each worker a folder of
    its own inside it; a run without xdist has its basetemp alone (its parent holds earlier runs)."""
    base = tmp_path_factory.getbasetemp()
    return base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base


def _shared_tool_run(root, steps):
    folder, done = root / f"tool-run-{steps}", root / f"tool-run-{steps}.done"
    with open(root / f"tool-run-{steps}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)                  # released when the file closes
        if not done.exists():
            shutil.rmtree(folder, ignore_errors=True)     # what a worker whose training failed left
            folder.mkdir()
            _train_tool_run(folder, steps)
            done.touch()
    return folder / "run"


def _train_tool_run(folder, steps):
    from zerollm.cli.entry import main
    from zerollm.data import chat
    from zerollm.data.formats import write_jsonl
    from zerollm.interop.opening import save_zerollm
    from zerollm.model.gpt import GPT, GPTConfig
    from zerollm.tokenizers import ByteTokenizer
    tok = chat.prepare_tokenizer(ByteTokenizer(), needs=("think", "tools"))
    model = GPT(GPTConfig(vocab_size=tok.vocab_size, block_size=384, n_layer=2, n_head=2, n_embd=32), seed=0)
    save_zerollm(model, folder / "base", tokenizer=tok)
    write_jsonl(folder / "tools.jsonl", tool_rows())
    code = main(["sft", "--init", str(folder / "base"), "--data", str(folder / "tools.jsonl"), "--out",
                 str(folder / "run"), "--max-iters", str(steps), "--batch-size", "2", "--lr", "3e-3",
                 "--warmup-iters", "5", "--eval-interval", str(steps), "--checkpoint-interval", str(steps),
                 "--no-progress", "--threads", "1"])
    assert code == 0
    return folder / "run"


@contextlib.contextmanager
def server(folder, *args, env=None, source="--hf"):
    """Start `zerollm serve --hf folder --port 0 ARGS` (``source="--ckpt"``: a run), wait until it listens;
    SIGTERM it afterwards. It runs the NumPy engine unless ``env`` says otherwise: the tests compare its
    answers with `zerollm sample`'s, whose default that is (serve's own default is tests/test_serve_loop.py's)."""
    environ = {**os.environ, "PYTHONPATH": str(ROOT), "ZEROLLM_ENGINE": "numpy", **(env or {})}
    proc = subprocess.Popen([sys.executable, "-m", "zerollm", "serve", source, str(folder), "--port", "0",
                             "--threads", "1", *args], stderr=subprocess.PIPE, text=True, env=environ)
    try:
        base = _wait_for_url(proc)
        yield base, proc
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(20)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


def _wait_for_url(proc, timeout=60):
    start = time.monotonic()
    while time.monotonic() - start < timeout:
        line = proc.stderr.readline()
        if not line and proc.poll() is not None:
            raise RuntimeError(f"zerollm serve exited with {proc.returncode} before listening")
        found = re.search(r"on (http://\S+)", line)
        if found:
            return found.group(1)
    raise RuntimeError("zerollm serve did not start listening in time")


def greedy_reference(folder, prompt, n):
    """What `zerollm sample --temperature 0` prints for the chat prompt (the reply and a newline)."""
    out = subprocess.run([sys.executable, "-m", "zerollm", "sample", "--hf", str(folder), "--prompt", prompt,
                          "--temperature", "0", "--max-new-tokens", str(n), "--threads", "1"],
                         capture_output=True, text=True, env={**os.environ, "PYTHONPATH": str(ROOT)}, timeout=60)
    assert out.returncode == 0, out.stderr
    return out.stdout


def seeds(n, seed=0):
    return [int(s) for s in np.random.default_rng(seed).integers(0, 2 ** 31, n)]
