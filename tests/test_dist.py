"""Data parallelism over MPI with real processes (mpirun from the mpich wheel): 2 ranks give bit-identical
losses to one process with 2 threads, rank 0 alone writes, resume works with the same and with another
number of ranks, a killed rank ends the job quickly with the last checkpoint intact, and bad launches
are one-line errors."""

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from zerollm.training import dist
from zerollm.io.errors import ZeroLLMError
from zerollm.training.runlog import read_log
from zerollm.io.safetensors import load_file

pytestmark = pytest.mark.slow   # MPI jobs of two ranks: not in the fast loop

MPIRUN = shutil.which("mpirun") or os.path.join(sys.prefix, "bin", "mpirun")
SMALL = ["--tokenizer", "char", "--n-layer", "2", "--n-head", "2", "--n-embd", "32", "--block-size", "32",
         "--batch-size", "8", "--eval-interval", "10", "--eval-iters", "2", "--sample-tokens", "8",
         "--no-progress", "--seed", "7", "--dropout", "0.1", "--checkpoint-interval", "10", "--lr-decay-iters", "20",
         "--warmup-iters", "5"]
ZEROLLM = [sys.executable, "-m", "zerollm"]


@pytest.fixture(scope="module")
def corpus(tmp_path_factory, shakespeare_path):
    path = tmp_path_factory.mktemp("data") / "small.txt"
    path.write_text(shakespeare_path.read_text()[:40_000])
    return path


def mpirun(n, *argv, timeout=120, **kw):
    assert os.path.exists(MPIRUN), f"mpirun not found at {MPIRUN}: pip install mpich (the test extra has it)"
    return subprocess.run([MPIRUN, "-n", str(n), *ZEROLLM, *argv], capture_output=True, text=True,
                          timeout=timeout, **kw)


def single(*argv):
    return subprocess.run([*ZEROLLM, *argv], capture_output=True, text=True, timeout=120)


def losses(run_dir):
    return [(r["step"], r["loss"]) for r in read_log(Path(run_dir) / "log.jsonl") if "loss" in r]


def evals(run_dir):
    return [r for r in read_log(Path(run_dir) / "log.jsonl") if "val_loss" in r]


def final_weights(run_dir):
    latest = json.loads((Path(run_dir) / "latest.json").read_text())
    return load_file(Path(run_dir) / latest["dir"] / "model.safetensors")


@pytest.fixture(scope="module")
def two_threads(tmp_path_factory, corpus):
    """The reference: one process, 2 thread shards, 20 steps."""
    out = tmp_path_factory.mktemp("runs") / "threads"
    res = single("train", "--data", str(corpus), "--out", str(out), "--max-iters", "20", "--threads", "2", *SMALL)
    assert res.returncode == 0, res.stderr
    return out


@pytest.fixture(scope="module")
def two_ranks(tmp_path_factory, corpus):
    out = tmp_path_factory.mktemp("runs") / "ranks"
    res = mpirun(2, "train", "--data", str(corpus), "--out", str(out), "--max-iters", "20", *SMALL)
    assert res.returncode == 0, res.stderr
    return out, res


def test_two_ranks_equal_one_process_with_two_threads_bit_for_bit(two_threads, two_ranks):
    out, _ = two_ranks
    assert len(losses(out)) == 20 and losses(out) == losses(two_threads)
    assert evals(out) == evals(two_threads)
    a, b = final_weights(out), final_weights(two_threads)
    assert all(np.array_equal(a[k], b[k]) for k in a)


def test_rank_zero_alone_prints_and_writes(two_ranks):
    out, res = two_ranks
    assert res.stdout.count("done: step 20") == 1              # not once per rank
    assert not list(out.glob(".tmp-*")) and sorted(p.name for p in out.glob("step-*")) == ["step-0000010",
                                                                                         "step-0000020"]


def test_resume_with_the_same_ranks_is_bit_identical(tmp_path, corpus, two_threads):
    out = tmp_path / "resumed"
    first = mpirun(2, "train", "--data", str(corpus), "--out", str(out), "--max-iters", "10", *SMALL)
    assert first.returncode == 0, first.stderr
    again = mpirun(2, "train", "--out", str(out), "--resume", "--max-iters", "20", "--no-progress")
    assert again.returncode == 0, again.stderr
    assert losses(out) == losses(two_threads)


def test_resume_with_another_number_of_ranks(tmp_path, corpus, two_threads):
    """2 ranks x 1 thread -> 1 rank x 2 threads: the same 2 shards, so still bit-identical."""
    out = tmp_path / "switch"
    assert mpirun(2, "train", "--data", str(corpus), "--out", str(out), "--max-iters", "10", *SMALL).returncode == 0
    res = single("train", "--out", str(out), "--resume", "--max-iters", "20", "--threads", "2", "--no-progress")
    assert res.returncode == 0, res.stderr
    assert losses(out) == losses(two_threads)


def test_a_killed_rank_ends_the_job_quickly_and_the_checkpoint_survives(tmp_path, corpus):
    out = tmp_path / "killed"
    argv = [MPIRUN, "-n", "2", *ZEROLLM, "train", "--data", str(corpus), "--out", str(out), "--max-iters", "100000",
            *SMALL]
    job = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.time() + 90
        while not (out / "latest.json").exists() and time.time() < deadline and job.poll() is None:
            time.sleep(0.1)
        assert (out / "latest.json").exists(), "no checkpoint appeared"
        # the ranks are python processes under MPICH's proxy; their command line names this run's folder
        ranks = [int(p) for p in subprocess.run(["pgrep", "-f", f"^{sys.executable} -m zerollm train .*{out}"],
                                                 capture_output=True, text=True).stdout.split()]
        assert len(ranks) == 2, f"expected the 2 ranks' processes, found {ranks}"
        os.kill(ranks[-1], signal.SIGKILL)
        killed_at = time.time()
        job.wait(timeout=30)
        assert time.time() - killed_at < 30 and job.returncode != 0
    finally:
        if job.poll() is None:
            job.kill()
            job.wait()
        # a rank left behind (if the test failed half-way) must not train on for ever
        subprocess.run(["pkill", "-9", "-f", f"^{sys.executable} -m zerollm train .*{out}"], check=False)
    saved = json.loads((out / "latest.json").read_text())["step"]
    res = mpirun(2, "train", "--out", str(out), "--resume", "--max-iters", str(saved + 3), "--no-progress")
    assert res.returncode == 0, res.stderr
    assert [s for s, _ in losses(out)][-3:] == [saved, saved + 1, saved + 2]


def test_a_batch_that_does_not_split_is_one_line(tmp_path, corpus):
    res = mpirun(3, "train", "--data", str(corpus), "--out", str(tmp_path / "x"), "--max-iters", "2", *SMALL)
    assert res.returncode != 0
    assert res.stderr.count("does not split over 3 ranks") == 1 and "Traceback" not in res.stderr
    assert "Abort" not in res.stderr          # every rank found it in one collective call and exited: no MPI_Abort
    assert not (tmp_path / "x").exists()


def test_ranks_started_differently_are_detected(tmp_path, corpus):
    common = ["train", "--data", str(corpus), "--out", str(tmp_path / "y"), "--max-iters", "2", *SMALL]
    argv = [MPIRUN, "-n", "1", *ZEROLLM, *common, "--lr", "0.001", ":", "-n", "1", *ZEROLLM, *common, "--lr", "0.002"]
    res = subprocess.run(argv, capture_output=True, text=True, timeout=120)
    assert res.returncode != 0 and "Traceback" not in res.stderr
    assert res.stderr.count("ranks [1] started with other settings") == 1
    assert not (tmp_path / "y" / "latest.json").exists()


# ----------------------------------------------------------------------------
# in-process pieces

def test_launcher_detection():
    assert dist.launched_by_mpi({"PMI_SIZE": "2"}) and dist.launched_by_mpi({"OMPI_COMM_WORLD_SIZE": "4"})
    assert not dist.launched_by_mpi({}) and not dist.launched_by_mpi({"PMI_SIZE": "1"})


def test_missing_mpi4py_under_mpirun_is_a_hint(monkeypatch):
    monkeypatch.setenv("PMI_SIZE", "2")
    monkeypatch.setattr(dist, "_world", None)
    monkeypatch.setitem(sys.modules, "mpi4py", None)           # import mpi4py now fails
    with pytest.raises(ZeroLLMError, match=r'pip install "zerollm\[mpi\]"'):
        dist.world()


def test_divisibility_message_suggests_sizes():
    world = dist.World()
    world.size = 4
    with pytest.raises(ZeroLLMError, match=r"multiple of 4 \(e\.g\. 8 or 12\)"):
        dist.check_divisible(10, world)
    dist.check_divisible(12, world)


# ----------------------------------------------------------------------------
# the post-training stages run over ranks the same way: rollouts sampled on each rank and gathered


@pytest.fixture(scope="module")
def tiny_base(tmp_path_factory):
    root = tmp_path_factory.mktemp("stage")
    res = single("train", "--preset", "tiny", "--out", str(root / "base"), "--max-iters", "2", "--eval-iters", "1",
                 "--sample-tokens", "0", "--no-progress", "--batch-size", "2", "--block-size", "160")
    assert res.returncode == 0, res.stderr
    res = single("tasks", "make", "addition", "--out", str(root / "prompts.jsonl"), "--n", "40", "--seed", "0")
    assert res.returncode == 0, res.stderr
    return root


def _ranks_and_threads(argv, tmp_path, field):
    """Run a stage over 2 MPI ranks (into tmp_path/ranks) and as one process with 2 threads (tmp_path/threads);
    each run's logged (step, loss, field) of every training step."""
    ranks = mpirun(2, *argv, "--out", str(tmp_path / "ranks"), timeout=300)
    threads = single(*argv, "--out", str(tmp_path / "threads"), "--threads", "2")
    assert ranks.returncode == 0 and threads.returncode == 0, ranks.stderr + threads.stderr
    return [[(r["step"], r["loss"], r[field]) for r in read_log(tmp_path / run / "log.jsonl") if "loss" in r]
            for run in ("ranks", "threads")]


@pytest.mark.parametrize("prompts, group", [(2, 4), (3, 3)])      # 8 answers split 4 + 4; 9 split 5 + 4
def test_grpo_over_two_ranks_equals_two_threads(tiny_base, tmp_path, prompts, group):
    """A post-training stage's batch need not split evenly: a rank may hold a row more than the other,
    and the numbers stay those of one process with 2 threads."""
    argv = ["grpo", "--init", str(tiny_base / "base"), "--data", str(tiny_base / "prompts.jsonl"),
            "--reward", "addition", "--max-new-tokens", "6", "--prompts-per-step", str(prompts), "--group-size", str(group),
            "--max-iters", "4", "--epochs", "1", "--minibatches", "1", "--eval-interval", "100", "--no-progress",
            "--checkpoint-interval", "2"]
    steps = _ranks_and_threads(argv, tmp_path, "reward")
    assert len(steps[0]) == 4 and steps[0] == steps[1]
    mine, theirs = final_weights(tmp_path / "ranks"), final_weights(tmp_path / "threads")
    assert mine.keys() == theirs.keys() and all(np.array_equal(mine[k], theirs[k]) for k in mine)


# rank 1 arrives LATE seconds after rank 0 at a collective call; each rank prints the CPU seconds it
# spent in that call into its own file (process time: a sleeping wait costs almost none of it, a spinning
# one as much as the scheduler gives it)
_LATE_RANK = """
import pathlib, sys, time
from zerollm.training import dist
w = dist.world()
if w.rank == 1:
    time.sleep({late})
start = time.process_time()
{call}
pathlib.Path(sys.argv[1], str(w.rank)).write_text(str(time.process_time() - start))
"""


@pytest.mark.parametrize("call", ["got = w.allgather(w.rank); assert got == [0, 1], got", "w.barrier()"])
@pytest.mark.parametrize("wait", ["sleep", "spin"])
def test_a_waiting_rank_sleeps_instead_of_spinning(tmp_path, call, wait):
    """A rank that reaches a collective first must not burn a core while it waits (on a busy machine that
    core is what the late rank needs); ZEROLLM_MPI_WAIT=spin keeps MPICH's busy wait, and proves that
    the measurement can tell the two apart."""
    late = 2.0
    env = {**os.environ, "ZEROLLM_MPI_WAIT": wait}
    script = _LATE_RANK.format(late=late, call=call)
    res = subprocess.run([MPIRUN, "-n", "2", sys.executable, "-c", script, str(tmp_path)],
                         capture_output=True, text=True, timeout=60, env=env)
    assert res.returncode == 0, res.stderr
    waited = float((tmp_path / "0").read_text())
    if wait == "sleep":
        assert waited < 0.25, waited
    else:
        assert waited > 0.5, waited


def test_mpi_wait_values():
    assert dist.mpi_wait({}) == "sleep" and dist.mpi_wait({"ZEROLLM_MPI_WAIT": " Spin "}) == "spin"
    with pytest.raises(ZeroLLMError, match="ZEROLLM_MPI_WAIT='poll' is not a way to wait; use one of: sleep, spin"):
        dist.mpi_wait({"ZEROLLM_MPI_WAIT": "poll"})


def test_a_bad_mpi_wait_is_one_line_on_each_rank(tmp_path, corpus):
    res = mpirun(2, "train", "--data", str(corpus), "--out", str(tmp_path / "x"), "--max-iters", "2", *SMALL,
                 env={**os.environ, "ZEROLLM_MPI_WAIT": "poll"})
    assert res.returncode != 0 and "Traceback" not in res.stderr
    assert "ZEROLLM_MPI_WAIT='poll' is not a way to wait" in res.stderr
    assert not (tmp_path / "x").exists()


def test_distill_over_two_ranks_equals_two_threads(tmp_path):
    """distill runs on the one trainer: over MPI its losses, divergences and weights are those of one process with
    2 threads (teacher and student saved beside the text; the student samples half its batches, on-policy)."""
    from zerollm.interop.opening import save_zerollm
    from zerollm.model.config import GPTConfig
    from zerollm.model.gpt import GPT
    from zerollm.tokenizers import CharTokenizer
    text = "床前明月光，疑是地上霜。举头望明月，低头思故乡。" * 40
    tok = CharTokenizer.train(text)
    cfg = dict(vocab_size=tok.vocab_size, n_head=2, block_size=16, dropout=0.0)
    save_zerollm(GPT(GPTConfig(n_layer=2, n_embd=32, **cfg), seed=1), tmp_path / "teacher", tokenizer=tok)
    save_zerollm(GPT(GPTConfig(n_layer=1, n_embd=16, **cfg), seed=2), tmp_path / "student", tokenizer=tok)
    (tmp_path / "poems.txt").write_text(text, encoding="utf-8")
    argv = ["distill", "--teacher", str(tmp_path / "teacher"), "--init", str(tmp_path / "student"),
            "--data", str(tmp_path / "poems.txt"), "--batch-size", "4", "--max-iters", "4", "--eval-interval", "2",
            "--eval-iters", "1", "--checkpoint-interval", "2", "--lr-decay-iters", "4", "--warmup-iters", "1",
            "--ce-weight", "0.5", "--on-policy", "0.5", "--no-progress"]
    steps = _ranks_and_threads(argv, tmp_path, "kd")
    assert len(steps[0]) == 4 and steps[0] == steps[1]
    held_out = [[(r["step"], r["val_loss"], r["val_kd"]) for r in evals(tmp_path / run)] for run in ("ranks", "threads")]
    assert len(held_out[0]) == 3 and held_out[0] == held_out[1]
    mine, theirs = final_weights(tmp_path / "ranks"), final_weights(tmp_path / "threads")
    assert mine.keys() == theirs.keys() and all(np.array_equal(mine[k], theirs[k]) for k in mine)
