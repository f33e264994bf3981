"""Ctrl-C behind a pipe (issue 22): `zerollm train ... 2>&1 | tee log`, then Ctrl-C at the terminal. The
terminal sends SIGINT to the whole process group, so tee ends too and the next progress-bar write hits a
pipe nobody reads. The run must still stop as the signal asks: save a checkpoint and exit 130. A real
pipe, a real tee, a real SIGINT to the group."""

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time

import pytest

pytestmark = pytest.mark.slow   # trainings and mpirun interrupted through a pipe: not in the fast loop

SMALL = ["--n-layer", "1", "--n-head", "2", "--n-embd", "16", "--block-size", "16", "--batch-size", "4",
         "--seed", "0", "--eval-iters", "1", "--sample-tokens", "0", "--max-iters", "1000000",
         "--eval-interval", "1000000", "--checkpoint-interval", "1000000"]


def _as_at_a_terminal():
    signal.signal(signal.SIGINT, signal.SIG_DFL)     # see tests/test_interrupts.py


def piped(argv, log):
    """``zerollm ARGV 2>&1 | tee LOG`` as one process group (a terminal's foreground job):
    -> (the zerollm process, the tee process)."""
    cmd = [sys.executable, "-m", "zerollm", *map(str, argv)]
    job = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, process_group=0,
                           preexec_fn=_as_at_a_terminal)
    tee = subprocess.Popen(["tee", str(log)], stdin=job.stdout, stdout=subprocess.DEVNULL,
                           process_group=job.pid, preexec_fn=_as_at_a_terminal)
    job.stdout.close()                                 # tee alone reads the pipe now
    return job, tee


def wait_for_steps(log, job, timeout=90):
    """Until the progress bar has counted a few steps (so a write follows every step)."""
    t0 = time.monotonic()
    while time.monotonic() - t0 < timeout:
        text = log.read_text(errors="replace") if log.exists() else ""
        if "run dir:" in text and any(int(n) >= 3 for n in re.findall(r"(\d+)/1000000", text)):
            return
        if job.poll() is not None:
            break
        time.sleep(0.2)
    job.kill()
    raise AssertionError("training never showed its progress bar:\n" + text)


def ctrl_c(job, tee):
    os.killpg(job.pid, signal.SIGINT)
    tee.wait(30)
    return job.wait(60)


@pytest.fixture(scope="module")
def corpus(tmp_path_factory, shakespeare_path):
    path = tmp_path_factory.mktemp("corpus") / "slice.txt"
    path.write_text(shakespeare_path.read_text(encoding="utf-8")[:20_000], encoding="utf-8")
    return path


def test_ctrl_c_of_a_piped_train_saves_and_exits_130(tmp_path, corpus):
    run, log = tmp_path / "run", tmp_path / "train.log"
    job, tee = piped(["train", "--data", corpus, "--out", run, *SMALL], log)
    wait_for_steps(log, job)
    code = ctrl_c(job, tee)
    assert tee.returncode == -signal.SIGINT           # the reader really is gone
    assert code == 130, (code, log.read_text(errors="replace"))
    step = json.loads((run / "latest.json").read_text())["step"]
    assert step >= 3                                   # the checkpoint of the step where it stopped
    res = subprocess.run([sys.executable, "-m", "zerollm", "train", "--out", str(run), "--resume",
                          "--max-iters", str(step + 1), "--no-progress"], capture_output=True, text=True,
                         timeout=120)
    assert res.returncode == 0 and f"done: step {step + 1}" in res.stdout, res.stderr


def test_ctrl_c_of_a_piped_stage_saves_and_exits_130(tmp_path, corpus, tmp_path_factory):
    from tests.tiny_runs import tiny_run
    base = tiny_run(tmp_path_factory, "char")
    data = tmp_path / "sft.jsonl"
    data.write_text("".join(json.dumps({"prompt": "To be", "completion": " or not"}) + "\n" for _ in range(8)))
    run, log = tmp_path / "sft", tmp_path / "sft.log"
    job, tee = piped(["sft", "--init", base, "--data", data, "--out", run, "--batch-size", "2",
                      *SMALL[SMALL.index("--max-iters"):]], log)
    wait_for_steps(log, job)
    assert ctrl_c(job, tee) == 130, log.read_text(errors="replace")
    assert json.loads((run / "latest.json").read_text())["step"] >= 3


MPIRUN = shutil.which("mpirun") or os.path.join(sys.prefix, "bin", "mpirun")


def test_ctrl_c_of_a_piped_mpirun_saves(tmp_path, corpus):
    """docs/distributed.md's line for a log under mpirun: mpiexec started with SIGPIPE ignored (it prints a
    line of its own on Ctrl-C), the ranks hold their output from the stop request until the checkpoint is
    written. Without the hold, the first progress redraw after tee ended made mpiexec give up and Hydra
    killed the ranks before they saved."""
    run, log = tmp_path / "run", tmp_path / "train.log"
    argv = " ".join([MPIRUN, "-n", "2", sys.executable, "-m", "zerollm", "train", "--data", str(corpus),
                     "--out", str(run), *SMALL])
    job = subprocess.Popen(["bash", "-c", f"(trap '' PIPE; {argv}) 2>&1 | tee {log} > /dev/null"],
                           process_group=0, preexec_fn=_as_at_a_terminal)
    wait_for_steps(log, job)
    os.killpg(job.pid, signal.SIGINT)
    job.wait(60)
    step = json.loads((run / "latest.json").read_text())["step"]
    assert step >= 3, log.read_text(errors="replace")
    res = subprocess.run([sys.executable, "-m", "zerollm", "train", "--out", str(run), "--resume",
                          "--max-iters", str(step + 1), "--no-progress"], capture_output=True, text=True,
                         timeout=120)
    assert res.returncode == 0 and f"done: step {step + 1}" in res.stdout, res.stderr


@pytest.mark.parametrize("cmd", ["train", "attention"])
def test_a_pipe_closed_before_the_work_is_done_is_not_success(tmp_path, corpus, cmd):
    """`zerollm train ... 2>&1 | head -1 && next-step`: head leaves after the "preparing" line, before
    training began. That used to exit 0 (the run folder removed, nothing trained), so the pipeline went
    on as if training had succeeded. `zerollm attention | head -1` got what it wanted: still 0."""
    run = tmp_path / "run"
    argv = ["train", "--data", corpus, "--out", run, *SMALL] if cmd == "train" else ["attention"]
    job = subprocess.Popen([sys.executable, "-m", "zerollm", *map(str, argv)], stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT)
    first = job.stdout.readline()
    job.stdout.close()                                 # head -1 has what it wanted and leaves
    code = job.wait(120)
    assert first
    if cmd == "train":       # on a slow machine training may have begun: then it stops as for Ctrl-C
        assert (code == 141 and not run.exists()) or (code == 130 and (run / "latest.json").exists()), code
    else:
        assert code == 0


def test_an_output_on_a_full_disk_stops_the_run_with_a_checkpoint(tmp_path, corpus):
    """`zerollm train ... > /dev/full`: the first line that cannot be written used to end the run with a
    disk-full error and no checkpoint at all. It now stops as a closed pipe does: saved, exit 130."""
    run = tmp_path / "run"
    with open("/dev/full", "w") as full:
        res = subprocess.run([sys.executable, "-m", "zerollm", "train", "--data", str(corpus), "--out", str(run),
                              *SMALL[:SMALL.index("--max-iters")], "--max-iters", "5", "--no-progress"],
                             stdout=full, stderr=subprocess.PIPE, text=True, timeout=120)
    assert res.returncode == 130, res.stderr
    assert "the output cannot be written (No space left on device)" in res.stderr and "Traceback" not in res.stderr
    assert (run / "latest.json").exists()
