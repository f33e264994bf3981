"""Shards in worker processes (zerollm.training.processes): the threads' results, bit for bit, and robust."""

import os
import signal
import sys

import numpy as np
import pytest

from zerollm.io.errors import ZeroLLMError
from zerollm.model.config import GPTConfig
from zerollm.model.gpt import GPT
from zerollm.nn.lora import LoRAConfig
from zerollm.training.parallel import ShardedModel
from zerollm.training.processes import ENV, model_only, worker_mode

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="worker processes need fork (Linux)")


def setup(B, dropout=0.0, dtype="float32", seed=0):
    cfg = GPTConfig(vocab_size=40, block_size=12, n_layer=2, n_head=2, n_embd=16, dtype=dtype, dropout=dropout)
    rng = np.random.default_rng(seed)
    x, y = rng.integers(0, 40, (B, 12)), rng.integers(0, 40, (B, 12))
    y[0, :5] = -100                                   # shards with different numbers of targets
    return GPT(cfg, seed=1), x, y


def both(model, threads):
    return ShardedModel(model, threads, workers="threads"), ShardedModel(model, threads, workers="processes")


def same_step(a, b, x, y):
    """a's and b's step from the same dropout generator state (the same masks): the same numbers."""
    state = a.model.rng.bit_generator.state
    la, ga = a.forward_backward(x, y)
    ga = {k: v.copy() for k, v in ga.items()}
    b.model.rng.bit_generator.state = state
    lb, gb = b.forward_backward(x, y)
    assert la == lb
    assert set(ga) == set(gb)
    for name in ga:
        assert np.array_equal(ga[name], gb[name]), name
    return la


@pytest.mark.parametrize("B, threads, dtype", [(6, 2, "float32"), (7, 3, "float64"), (2, 4, "float32")])
def test_processes_give_the_threads_results_bit_for_bit(B, threads, dtype):
    model, x, y = setup(B, dtype=dtype)
    t, p = both(model, threads)
    same_step(t, p, x, y)
    assert p.procs is not None and all(proc.is_alive() for proc in p.procs.procs)   # really forked
    assert np.array_equal(t.forward(x), p.forward(x))
    t.close(), p.close()


@pytest.mark.parametrize("share_from", [None, 0])
def test_dropout_seeds_are_the_threads_and_weight_updates_reach_the_workers(share_from, monkeypatch):
    """share_from=0: the shard threads share the weights' copying and the gradient sum even for this
    small model (zerollm.engine.threads.by_name_in_parts), as they do for large ones."""
    if share_from is not None:
        from zerollm.engine import threads
        monkeypatch.setattr(threads, "SHARE_FROM", share_from)
    model, x, y = setup(6, dropout=0.3)
    model.train()
    t, p = both(model, 2)
    state = model.rng.bit_generator.state
    _, grads = t.forward_backward(x, y)
    grads = {k: v.copy() for k, v in grads.items()}
    model.rng.bit_generator.state = state
    for step in range(3):
        state = model.rng.bit_generator.state
        lt, gt = t.forward_backward(x, y)
        gt = {k: v.copy() for k, v in gt.items()}
        model.rng.bit_generator.state = state
        lp, gp = p.forward_backward(x, y)
        assert lt == lp and all(np.array_equal(gt[k], gp[k]) for k in gt)
        for name, arr in model.params.items():       # an optimizer step, in place
            arr -= 0.1 * gp[name]
    model.params["wte.weight"] = model.params["wte.weight"] * 0.5   # replaced, not in place
    same_step(t, p, x, y)
    dropped = p.forward(x)                           # train mode: dropout on in every shard
    assert np.array_equal(dropped, t.forward(x))
    model.eval()                                     # the mode travels too: no dropout now
    assert np.array_equal(p.forward(x), model.forward(x)[0])
    assert not np.array_equal(p.forward(x), dropped)
    t.close(), p.close()


def test_lora_adapters_and_a_changed_model_reach_the_workers():
    model, x, y = setup(6)
    t, p = both(model, 2)
    same_step(t, p, x, y)
    first = p.procs
    model.add_lora(LoRAConfig(r=2, alpha=4.0), np.random.default_rng(3))
    for arr in model.lora.adapters.values():         # B = 0 at the start: make the adapters matter
        arr += 0.01
    same_step(t, p, x, y)
    assert p.procs is not first                      # new weights to hold: new workers
    t.close(), p.close()


@model_only
def where(m, rows):
    return os.getpid()


@model_only
def fails_on_rows_2_and_3(m, rows):
    if rows["x"].shape[0] == 2 and rows["x"][0, 0] == -1:
        raise ZeroLLMError("shard 2 cannot be computed")
    return 1.0


def test_other_functions_stay_in_threads():
    model, x, _ = setup(4)
    p = ShardedModel(model, 2, workers="processes")
    assert p.map(lambda m, rows: os.getpid(), {"x": x}) == [os.getpid()] * 2      # not marked
    local = model_only(lambda m, rows: os.getpid())                                  # marked, cannot be sent
    assert p.map(local, {"x": x}) == [os.getpid()] * 2 and p.procs is None
    pids = p.map(where, {"x": x})
    assert pids[0] == os.getpid() and pids[1] != os.getpid()
    p.close()


def test_an_error_in_a_worker_is_raised_here():
    model, x, y = setup(4)
    p = ShardedModel(model, 2, workers="processes")
    x[2, 0] = -1
    with pytest.raises(ZeroLLMError, match="shard 2 cannot"):
        p.map(fails_on_rows_2_and_3, {"x": x})
    x[2, 0] = 0
    assert p.map(fails_on_rows_2_and_3, {"x": x}) == [1.0, 1.0]          # the same workers still answer
    l1, _ = p.forward_backward(x, y)
    assert np.isfinite(l1)
    p.close()


def test_a_dead_worker_costs_nothing_but_speed():
    model, x, y = setup(6)
    t, p = both(model, 2)
    same_step(t, p, x, y)
    proc = p.procs.procs[0]
    os.kill(proc.pid, signal.SIGKILL)
    proc.join()
    same_step(t, p, x, y)                            # its shard computed here instead
    same_step(t, p, x, y)
    assert p.procs is None and p.workers == "threads"
    t.close(), p.close()


def test_an_interrupt_while_waiting_retires_the_workers():
    """Answers left unread in a pipe must never be taken for the next batch's."""
    model, x, y = setup(4)
    t, p = both(model, 2)
    same_step(t, p, x, y)
    conn = p.procs.conns[0]
    real = conn.recv

    def interrupted():
        conn.recv = real
        raise KeyboardInterrupt
    conn.recv = interrupted
    with pytest.raises(KeyboardInterrupt):
        p.forward_backward(x, y)
    same_step(t, p, x, y)
    assert p.procs is None and p.workers == "threads"
    t.close(), p.close()


def test_workers_ignore_ctrl_c():
    model, x, y = setup(4)
    t, p = both(model, 2)
    same_step(t, p, x, y)
    proc = p.procs.procs[0]
    os.kill(proc.pid, signal.SIGINT)                 # what a terminal sends to the whole process group
    same_step(t, p, x, y)
    assert proc.is_alive()
    t.close(), p.close()
    assert not proc.is_alive()                       # close() ends them


def test_worker_mode_from_the_environment(monkeypatch):
    monkeypatch.setenv(ENV, "threads")
    assert worker_mode() == "threads"
    monkeypatch.setenv(ENV, "processes")
    assert worker_mode() == "processes"
    monkeypatch.delenv(ENV)
    assert worker_mode() == "processes"              # Linux
    monkeypatch.setenv(ENV, "forks")
    with pytest.raises(ZeroLLMError, match="processes' or 'threads"):
        worker_mode()


def test_workers_report_their_own_memory():
    """The pages a worker shares with this process since the fork are not its own; its activations are."""
    model, x, y = setup(64)
    p = ShardedModel(model, 2, workers="processes")
    p.forward_backward(x, y)
    (kib,) = p.procs.memory_kib()
    assert kib is None or 0 < kib < 200 * 1024        # None: no /proc/self/clear_refs (not Linux >= 4)
    p.close()


def test_workers_end_when_their_parent_is_killed(tmp_path):
    """kill -9 of a training process must not leave its workers behind (holding its output open)."""
    import subprocess
    import time
    script = tmp_path / "parent.py"
    script.write_text(
        "import sys, time, numpy as np\n"
        "from zerollm.model.config import GPTConfig\n"
        "from zerollm.model.gpt import GPT\n"
        "from zerollm.training.parallel import ShardedModel\n"
        "m = GPT(GPTConfig(vocab_size=10, block_size=8, n_layer=1, n_head=2, n_embd=8))\n"
        "s = ShardedModel(m, 3, workers='processes')\n"
        "x = np.zeros((4, 8), dtype=np.int64)\n"
        "s.forward_backward(x, x)\n"
        "print(*[p.pid for p in s.procs.procs], flush=True)\n"
        "time.sleep(60)\n")
    proc = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE, text=True)
    pids = [int(p) for p in proc.stdout.readline().split()]
    assert len(pids) == 2
    proc.kill()
    proc.wait()
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and any(running(pid) for pid in pids):
        time.sleep(0.05)
    assert not any(running(pid) for pid in pids)
    assert proc.stdout.read() == ""                  # EOF: nobody holds the output pipe any more


def test_a_process_with_workers_exits_at_once_even_with_its_own_sigterm_handler(tmp_path):
    """The trainer handles SIGTERM itself; its workers must not inherit that, or exiting waits on them."""
    import subprocess
    script = tmp_path / "parent.py"
    script.write_text(
        "import signal, numpy as np\n"
        "from zerollm.model.config import GPTConfig\n"
        "from zerollm.model.gpt import GPT\n"
        "from zerollm.training.parallel import ShardedModel\n"
        "signal.signal(signal.SIGTERM, lambda *a: None)\n"
        "m = GPT(GPTConfig(vocab_size=10, block_size=8, n_layer=1, n_head=2, n_embd=8))\n"
        "s = ShardedModel(m, 2, workers='processes')\n"
        "x = np.zeros((4, 8), dtype=np.int64)\n"
        "print(s.forward_backward(x, x)[0], flush=True)\n")           # no close(): exit must end them
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert float(done.stdout) > 0


def running(pid):
    """True while the process exists and is not a zombie."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


NUMBA_IN_A_WORKER = """
import os, sys
import numpy as np
from zerollm.engine import set_engine
from zerollm.model.config import GPTConfig
from zerollm.model.gpt import GPT
from zerollm.training.parallel import ShardedModel
from zerollm.training.processes import model_only

@model_only
def numba_state(m, rows):
    numba = sys.modules.get("numba")
    return (os.getpid(), numba is not None, os.environ.get("NUMBA_NUM_THREADS"),
            None if numba is None else numba.get_num_threads())

if sys.argv[1] == "fast":
    set_engine("fast")                      # imports numba here, before the fork
model = GPT(GPTConfig(vocab_size=40, block_size=12, n_layer=1, n_head=2, n_embd=16), seed=1)
p = ShardedModel(model, 2, workers="processes")
here, there = p.map(numba_state, {"x": np.zeros((4, 12), dtype=np.int64)})
assert there[0] != os.getpid(), "shard 1 ran here, not in a worker"
print(repr(there[1:]))
p.close()
"""


@pytest.mark.parametrize("engine", ["numpy", "fast"])
def test_a_worker_imports_numba_only_for_the_fast_engine_and_gives_it_one_thread(engine):
    """numba takes ~0.4 s to import: a NumPy-engine worker does without it (NUMBA_NUM_THREADS=1 waits
    for a later import); a fast-engine worker has the parent's numba, set to one thread."""
    import ast
    import subprocess
    if engine == "fast":
        pytest.importorskip("numba")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("NUMBA_", "ZEROLLM_"))}
    proc = subprocess.run([sys.executable, "-c", NUMBA_IN_A_WORKER, engine], capture_output=True, text=True,
                          timeout=120, env=env)
    assert proc.returncode == 0, proc.stderr[-2000:]
    imported, variable, threads = ast.literal_eval(proc.stdout.strip())
    if engine == "numpy":
        assert (imported, variable, threads) == (False, "1", None)
    else:
        assert imported and threads == 1
