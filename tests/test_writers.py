"""Data is never lost: one writer per directory (zerollm.io.lock), directories swapped in whole
(zerollm.io.outdir), outputs that cannot overlap their inputs, and a full disk that leaves the old output."""

import json
import os
import resource
import shutil
import signal
import subprocess
import sys
import time

import pytest

from tiny_runs import TINY_MODEL, copy_run, run_main, step_dir, tiny_run, tiny_text
from zerollm.training.checkpoint import latest_checkpoint, load_checkpoint
from zerollm.io.lock import DirectoryBusy, lock_path, read_owner, writing
from zerollm.io.outdir import atomic_dir

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ENV = {**os.environ, "PYTHONPATH": REPO + os.pathsep + os.environ.get("PYTHONPATH", "")}


def zerollm(*argv, **kw):
    return subprocess.Popen([sys.executable, "-m", "zerollm", *map(str, argv)], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, env=ENV, **kw)


def finish(proc, timeout=60):
    out, err = proc.communicate(timeout=timeout)
    return proc.returncode, out.decode("utf-8", "replace"), err.decode("utf-8", "replace")


def wait_for(condition, proc, timeout=60):
    end = time.monotonic() + timeout
    while not condition():
        assert proc.poll() is None, finish(proc)
        assert time.monotonic() < end, "timed out"
        time.sleep(0.05)



@pytest.fixture(scope="module")
def pristine(tmp_path_factory):
    return tiny_run(tmp_path_factory, "char")


HOLD = ("import sys, time; from zerollm.io.lock import writing\n"
        "with writing(sys.argv[1], beside=sys.argv[2] == 'beside'):\n"
        "    print('locked', flush=True); time.sleep(60)")


def hold_lock(directory, beside=False):
    """A second real process that holds ``directory``'s write lock until it is killed."""
    proc = subprocess.Popen([sys.executable, "-c", HOLD, str(directory), "beside" if beside else "inside"],
                            stdout=subprocess.PIPE, env=ENV)
    assert proc.stdout.readline() == b"locked\n"
    return proc


# ----------------------------------------------------------------------------
# two writers, one directory

def test_two_trainings_on_one_directory(pristine, tmp_path, capsys):
    """A runs; B (--resume) and C (a fresh run) stop at once naming A's pid; a reader samples meanwhile;
    A is stopped with Ctrl-C and leaves a loadable checkpoint and no lock."""
    run = copy_run(pristine, tmp_path)
    a = zerollm("train", "--resume", "--out", run, "--max-iters", "100000", "--checkpoint-interval", "50",
                "--eval-interval", "100000", "--no-progress")
    wait_for(lambda: os.path.exists(lock_path(run)) and read_owner(lock_path(run)).get("pid") == a.pid, a)
    b = zerollm("train", "--resume", "--out", run, "--no-progress")
    c = zerollm("train", "--data", tiny_text(tmp_path), "--out", run, *TINY_MODEL)
    for proc in (b, c):
        code, out, err = finish(proc)
        assert code == 1 and err.startswith(f"zerollm train: error: {run} is being written by pid {a.pid}"), err
        assert len(err.splitlines()) == 1 and "Traceback" not in err
    reader = zerollm("sample", "--ckpt", run, "--max-new-tokens", "5", "--seed", "1")
    code, out, err = finish(reader)
    assert code == 0 and out.strip(), err
    a.send_signal(signal.SIGINT)
    code, _, err = finish(a)
    assert code == 130 and "continue with --resume" in err
    assert not os.path.exists(lock_path(run))
    ckpt = load_checkpoint(latest_checkpoint(run))
    assert ckpt.step > 2


def test_a_lock_left_by_a_killed_process_is_taken_over(tmp_path):
    holder = hold_lock(tmp_path / "out")
    with pytest.raises(DirectoryBusy, match=f"is being written by pid {holder.pid}"):
        with writing(tmp_path / "out"):
            pass
    holder.kill()                                   # SIGKILL: no cleanup runs, the lock file stays
    holder.wait()
    assert read_owner(lock_path(tmp_path / "out"))["pid"] == holder.pid
    with writing(tmp_path / "out"):                 # the kernel dropped the dead holder's flock
        assert read_owner(lock_path(tmp_path / "out"))["pid"] == os.getpid()
    assert not os.path.exists(lock_path(tmp_path / "out"))


def test_two_converts_to_one_target(pristine, tmp_path, capsys):
    target = tmp_path / "model"
    holder = hold_lock(target, beside=True)        # another convert writing the same target
    try:
        code, _, err = run_main(["convert", "--from", pristine, "--to", target], capsys)
        assert code == 1 and f"is being written by pid {holder.pid}" in err and len(err.splitlines()) == 1
    finally:
        holder.kill()
        holder.wait()
    assert not target.exists()
    assert run_main(["convert", "--from", pristine, "--to", target], capsys)[0] == 0
    code, _, err = run_main(["convert", "--from", pristine, "--to", target], capsys)   # the second one
    assert code == 1 and "exists and is not empty" in err


def test_the_lock_is_reentrant_in_one_process(tmp_path):
    with writing(tmp_path / "x") as path:
        with writing(tmp_path / "x"):          # a command took it early; its writer takes it again
            assert read_owner(path)["pid"] == os.getpid()
        assert os.path.exists(path)            # still held by the outer block
    assert not os.path.exists(path)


# ----------------------------------------------------------------------------
# outputs never overlap inputs, never replace what is not theirs

def test_convert_into_its_own_run_is_refused(pristine, tmp_path, capsys):
    run = copy_run(pristine, tmp_path)
    before = sorted(p.name for p in step_dir(run).iterdir())
    for target in (step_dir(run), run, run / "inside", tmp_path):
        code, _, err = run_main(["convert", "--from", run, "--to", target, "--overwrite"], capsys)
        assert code == 1 and "overlap" in err, (target, err)
    assert sorted(p.name for p in step_dir(run).iterdir()) == before
    assert load_checkpoint(run).step == 2


def test_convert_never_overwrites_a_checkpoint(pristine, tmp_path, capsys):
    run = copy_run(pristine, tmp_path)
    other = copy_run(pristine, tmp_path, "other")
    code, _, err = run_main(["convert", "--from", other, "--to", step_dir(run), "--overwrite"], capsys)
    assert code == 1 and "which is a training run" in err and "choose a path outside it" in err, err
    assert load_checkpoint(step_dir(run)).step == 2


def test_prepare_refuses_a_folder_that_is_not_its_own(tmp_path, capsys):
    folder = tmp_path / "mine"
    folder.mkdir()
    (folder / "notes.txt").write_text("my notes")
    code, _, err = run_main(["prepare", "--data", tiny_text(tmp_path), "--out", folder], capsys)
    assert code == 1 and "holds other files (notes.txt)" in err
    assert os.listdir(folder) == ["notes.txt"]
    code, _, err = run_main(["prepare", "--data", tiny_text(tmp_path), "--out", tmp_path], capsys)
    assert code == 1 and "overlap" in err


@pytest.mark.parametrize("name, text", [("tokenizer.json", '{"my": "hand-made"}'), ("meta.json", "my notes"),
                                        ("train.bin", "mine")])
def test_prepare_refuses_a_users_file_with_one_of_its_names(name, text, tmp_path, capsys):
    """A folder holding only files named like prepare's (tokenizer.json, meta.json, train.bin, val.bin) is not
    an earlier prepared folder unless prepare's meta.json is there: the user's file stays, byte for byte;
    a folder prepare did write is replaced as before."""
    folder = tmp_path / "mine"
    folder.mkdir()
    (folder / name).write_text(text)
    code, _, err = run_main(["prepare", "--data", tiny_text(tmp_path), "--out", folder], capsys)
    assert code == 1 and f"holds {name} but no meta.json that prepare wrote" in err, err
    assert os.listdir(folder) == [name] and (folder / name).read_text() == text
    ours = tmp_path / "prepared"
    for _ in range(2):
        code, _, err = run_main(["prepare", "--data", tiny_text(tmp_path), "--out", ours], capsys)
        assert code == 0, err


def test_prepare_never_replaces_a_runs_own_data(pristine, tmp_path, capsys):
    """RUN/data is the run's: prepared again (another text, same tokenizer), --resume would go on training on
    other tokens without a word. prepare refuses any --out inside a run; the data stay byte for byte."""
    run = copy_run(pristine, tmp_path)
    before = {p.name: p.read_bytes() for p in (run / "data").iterdir()}
    other = tmp_path / "other.txt"
    other.write_text("another text entirely, " * 200, encoding="utf-8")
    code, _, err = run_main(["prepare", "--data", other, "--out", run / "data", "--tokenizer", "char"], capsys)
    assert code == 1 and "which is a training run" in err and len(err.splitlines()) == 1, err
    assert {p.name: p.read_bytes() for p in (run / "data").iterdir()} == before


def test_prepare_replaces_its_own_folder_whole(tmp_path, capsys):
    text = tiny_text(tmp_path)
    assert run_main(["prepare", "--data", text, "--out", tmp_path / "p", "--tokenizer", "char"], capsys)[0] == 0
    assert run_main(["prepare", "--data", text, "--out", tmp_path / "p", "--tokenizer", "byte"], capsys)[0] == 0
    assert json.loads((tmp_path / "p" / "meta.json").read_text())["tokenizer"] == "byte"
    assert sorted(os.listdir(tmp_path)) == ["p", "tiny.txt"]          # no temporary siblings, no lock


def test_atomic_dir_keeps_the_old_directory_on_any_error(tmp_path):
    target = tmp_path / "out"
    target.mkdir()
    (target / "a.txt").write_text("old")
    for error in (OSError(28, "No space left on device"), KeyboardInterrupt()):
        with pytest.raises(type(error)):
            with atomic_dir(target) as tmp:
                with open(os.path.join(tmp, "a.txt"), "w") as f:
                    f.write("new, half written")
                raise error
        assert (target / "a.txt").read_text() == "old" and sorted(os.listdir(tmp_path)) == ["out"]
    with atomic_dir(target) as tmp:
        with open(os.path.join(tmp, "b.txt"), "w") as f:
            f.write("new")
    assert os.listdir(target) == ["b.txt"] and sorted(os.listdir(tmp_path)) == ["out"]


def test_atomic_dir_clears_what_a_killed_build_left(tmp_path):
    leftover = tmp_path / ".out.abc123.tmp"
    leftover.mkdir()
    (leftover / "train.bin").write_bytes(b"half")
    with atomic_dir(tmp_path / "out") as tmp:
        open(os.path.join(tmp, "x"), "w").close()
    assert sorted(os.listdir(tmp_path)) == ["out"]


# ----------------------------------------------------------------------------
# a full disk: ulimit -f in a real process (SIGXFSZ ignored, so writes fail with EFBIG)

def limited(limit_bytes):
    def apply():
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit_bytes, limit_bytes))
    return apply


def snapshot(folder):
    return {name: (folder / name).read_bytes() for name in sorted(os.listdir(folder))}


def test_disk_full_during_prepare_keeps_the_old_folder(tmp_path, capsys):
    small = tmp_path / "small.txt"
    small.write_text("to be or not to be " * 100)
    assert run_main(["prepare", "--data", small, "--out", tmp_path / "data", "--tokenizer", "byte"], capsys)[0] == 0
    before = snapshot(tmp_path / "data")
    big = tmp_path / "big.txt"
    big.write_text("that is the question " * 4000)         # 84 KB of text: 150 KB of token ids
    proc = zerollm("prepare", "--data", big, "--out", tmp_path / "data", "--tokenizer", "byte",
                   preexec_fn=limited(100_000))
    code, out, err = finish(proc)
    assert code == 1 and len(err.splitlines()) == 1 and "File too large" in err and "Traceback" not in err, err
    assert "free some space" in err and "untouched" in err
    assert snapshot(tmp_path / "data") == before
    assert sorted(os.listdir(tmp_path)) == ["big.txt", "data", "small.txt"]


def test_disk_full_during_a_checkpoint_keeps_the_last_one(pristine, tmp_path):
    run = copy_run(pristine, tmp_path)
    size = os.path.getsize(step_dir(run) / "model.safetensors")
    proc = zerollm("train", "--resume", "--out", run, "--max-iters", "4", "--no-progress",
                   preexec_fn=limited(size // 2))
    code, out, err = finish(proc)
    assert code == 1 and "File too large" in err.splitlines()[-1] and "Traceback" not in err, err
    ckpt = load_checkpoint(run)
    assert ckpt.step == 2 and not [n for n in os.listdir(run) if n.startswith(".tmp-")]
    assert not os.path.exists(lock_path(run))


def test_under_mpi_rank_0_holds_the_lock_and_every_rank_stops_with_it(pristine, tmp_path):
    """mpirun -n 2 on a directory another process writes: one line (from rank 0), every rank exits."""
    mpirun = shutil.which("mpirun") or os.path.join(sys.prefix, "bin", "mpirun")
    run = copy_run(pristine, tmp_path)
    holder = hold_lock(run)
    try:
        res = subprocess.run([mpirun, "-n", "2", sys.executable, "-m", "zerollm", "train", "--resume", "--out",
                              str(run), "--no-progress"], capture_output=True, text=True, timeout=120, env=ENV)
    finally:
        holder.kill()
        holder.wait()
    lines = [line for line in res.stderr.splitlines() if line.startswith("zerollm train:")]
    assert res.returncode != 0 and len(lines) == 1 and f"is being written by pid {holder.pid}" in lines[0], res.stderr
    assert "Traceback" not in res.stderr
