"""MPI ranks that disagree, with a real mpirun (the mpich wheel): a bad command line on one rank, ranks
given different data files, an error one rank meets alone (memory, its user reward code). Every case must
end the whole job within seconds, with that rank's one line, and write nothing; before, the other ranks
waited for ever in their first collective call, or ran on with rank 0's data."""

import os
import shutil
import subprocess
import sys
import time

import pytest

from tiny_runs import tiny_stage_base

pytestmark = pytest.mark.slow   # MPI jobs of two ranks: not in the fast loop

MPIRUN = shutil.which("mpirun") or os.path.join(sys.prefix, "bin", "mpirun")
ZEROLLM = [sys.executable, "-m", "zerollm"]
SMALL = ["--max-iters", "2", "--no-progress", "--checkpoint-interval", "1", "--eval-interval", "100"]
LIMIT = 60          # seconds; a job that hangs is killed here and the test fails


@pytest.fixture(scope="module")
def root(tmp_path_factory):
    return tiny_stage_base(tmp_path_factory.mktemp("mpi"))


def two_ranks(rank0, rank1, cwd, env1=None):
    """mpirun with one command line per rank (MPMD: 'A : B'); -env sets a variable on rank 1 only."""
    assert os.path.exists(MPIRUN), f"mpirun not found at {MPIRUN}: pip install mpich (the test extra has it)"
    extra = [a for k, v in (env1 or {}).items() for a in ("-env", k, v)]
    argv = [MPIRUN, "-n", "1", *ZEROLLM, *rank0, ":", "-n", "1", *extra, *ZEROLLM, *rank1]
    started = time.time()
    res = subprocess.run(argv, capture_output=True, text=True, timeout=LIMIT, cwd=cwd)
    return res, time.time() - started


def one_reason(res, fragment):
    lines = [line for line in res.stderr.splitlines() if ": error:" in line]
    assert res.returncode != 0 and "Traceback" not in res.stderr, res.stderr
    assert len(lines) == 1 and fragment in lines[0], res.stderr
    return lines[0]


@pytest.mark.parametrize("command, bad, fragment", [
    ("sft", ["--lr", "nan"], "must be a number from"),
    ("sft", ["--no-such-flag"], "unrecognized arguments"),
    ("grpo", ["--group-size", "1"], "must be a whole number from"),
], ids=["bad-value", "unknown-flag", "out-of-range"])
def test_hostile_mpi_a_bad_command_line_on_one_rank(root, tmp_path, command, bad, fragment):
    argv = [command, "--init", str(root / "base"), "--data", str(root / "prompts.jsonl"), "--out",
            str(tmp_path / "run"), "--reward", "addition", *SMALL]
    if command == "sft":
        argv.remove("--reward"), argv.remove("addition")
    res, took = two_ranks(argv, argv + bad, tmp_path)
    assert one_reason(res, fragment).startswith("(rank 1) ")
    assert took < 20 and not (tmp_path / "run").exists()


def test_hostile_mpi_ranks_with_different_data_files(root, tmp_path):
    """The same command, run in two folders whose data.jsonl differ (-wdir): the digests differ."""
    for name, n in (("a", 12), ("b", 11)):
        (tmp_path / name).mkdir()
        lines = (root / "sft.jsonl").read_text().splitlines()[:n]
        (tmp_path / name / "data.jsonl").write_text("\n".join(lines) + "\n")
    argv = [*ZEROLLM, "sft", "--init", str(root / "base"), "--data", "data.jsonl", "--out", str(tmp_path / "run"),
            *SMALL]
    started = time.time()
    res = subprocess.run([MPIRUN, "-n", "1", "-wdir", str(tmp_path / "a"), *argv, ":",
                          "-n", "1", "-wdir", str(tmp_path / "b"), *argv], capture_output=True, text=True, timeout=LIMIT)
    one_reason(res, "ranks [1] started with other settings (command line, data files")
    assert time.time() - started < 20 and not (tmp_path / "run").exists()


def test_hostile_mpi_an_error_one_rank_meets_alone(root, tmp_path):
    """Rank 1 alone has too little memory: the job ends at once with rank 1's line, not rank 0 waiting."""
    argv = ["dpo", "--init", str(root / "base"), "--data", str(root / "prefs.jsonl"), "--out", str(tmp_path / "run"),
            *SMALL]
    res, took = two_ranks(argv, argv, tmp_path, env1={"ZEROLLM_MEMORY_LIMIT": "1KiB"})
    assert one_reason(res, "needs about").startswith("zerollm dpo: error: (rank 1) ")
    assert took < 30 and not (tmp_path / "run" / "latest.json").exists()


def test_hostile_mpi_user_reward_code_fails_on_one_rank(root, tmp_path):
    (tmp_path / "user_reward_rank.py").write_text(
        "import os\ndef f(prompts, completions, **kw):\n"
        "    if os.environ.get('PMI_RANK') == '1':\n        raise ValueError('rank one is unhappy')\n"
        "    return [0.0] * len(completions)\n")
    argv = ["grpo", "--init", str(root / "base"), "--data", str(root / "prompts.jsonl"), "--out", str(tmp_path / "run"),
            "--reward", "user_reward_rank:f", "--max-new-tokens", "3", "--prompts-per-step", "2", "--group-size", "2",
            *SMALL]
    res, took = two_ranks(argv, argv, tmp_path)
    line = one_reason(res, "(rank 1) reward user_reward_rank:f raised ValueError: rank one is unhappy")
    assert line.startswith("zerollm grpo: error:") and took < 30
