"""Special files where a regular file is expected, and outputs over inputs, through the real CLI.

Every file zerollm reads goes through zerollm.io.fileio.open_regular, and every file it writes through the
one output rule of zerollm.io.outdir. So a named pipe, a socket, a device or a folder where a file is read
is refused with one line that says it must be a regular file (a pipe opened for reading waits for a writer
forever; /dev/zero never ends), and no output, --force or not, replaces what the same command reads or
lies inside a run, a checkpoint or a model. Each case runs ``python -m zerollm`` in a subprocess with a
timeout: a command that hangs fails its case instead of hanging the suite.
"""

import contextlib
import io
import json
import os
import shutil
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from tiny_runs import TINY_MODEL, random_base, tiny_run, tiny_text
from zerollm.evaluate.taskfiles import MARKER

pytestmark = pytest.mark.slow      # every case starts a zerollm process: the full suite's, not the fast loop's

REPO = Path(__file__).resolve().parents[1]
ENV = {**os.environ, "PYTHONPATH": str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", "")}
TIMEOUT = 20
REGULAR = "must be a regular file"
NOT_REGULAR_OUT = "is not a regular file"


def zerollm(*argv, cwd=None, stdin=subprocess.DEVNULL, blocks=True):
    """(exit code, stdout, stderr) of ``python -m zerollm ARGV``; a command still running after TIMEOUT
    seconds (blocked on a pipe, reading a device without end) fails the test. ``blocks=False``: a case that
    cannot block (no pipe and no endless device in it) runs in this process, which is ~50 times faster."""
    if not blocks:
        return _in_process(argv)
    try:
        done = subprocess.run([sys.executable, "-m", "zerollm", *map(str, argv)], cwd=cwd, env=ENV, stdin=stdin,
                              capture_output=True, timeout=TIMEOUT)
    except subprocess.TimeoutExpired:
        pytest.fail(f"zerollm {' '.join(map(str, argv))} still ran after {TIMEOUT} s (blocked on a special file?)")
    return done.returncode, done.stdout.decode("utf-8", "replace"), done.stderr.decode("utf-8", "replace")


def _in_process(argv):
    from zerollm.cli.entry import main
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = main([str(a) for a in argv])
        except SystemExit as exc:
            code = exc.code
    return code, out.getvalue(), err.getvalue()


def refused(result, fragment, progress=False):
    """A non-zero exit, exactly one line on stderr (an error that holds ``fragment``), no traceback;
    ``progress``: the command may first have said what it loaded (train's "model: ..." line)."""
    code, _, err = result
    lines = err.splitlines()
    assert code != 0 and lines and "Traceback" not in err, (code, err)
    assert (len(lines) == 1 or progress) and sum(": error: " in line for line in lines) == 1, err
    assert ": error: " in lines[-1] and fragment in lines[-1], err


# ----------------------------------------------------------------------------
# the special files

def make_fifo(path):
    os.mkfifo(path)


def make_folder(path):
    os.mkdir(path)


def make_socket(path):
    """A Unix socket file at ``path`` (bound from its folder: a socket's path may hold only ~100 bytes)."""
    here = os.getcwd()
    os.chdir(os.path.dirname(path))
    try:
        with socket.socket(socket.AF_UNIX) as s:
            s.bind(os.path.basename(path))
    finally:
        os.chdir(here)


def make_device(path):
    """A character device under the name: a link to /dev/null (links to files are read; to devices, not)."""
    os.symlink("/dev/null", path)


SPECIAL = {"fifo": make_fifo, "folder": make_folder, "socket": make_socket, "device": make_device}


def special(path, kind):
    """Replace ``path`` (a file or nothing) by a special file of ``kind``."""
    path = Path(path)
    if path.exists() or path.is_symlink():
        path.unlink()
    SPECIAL[kind](str(path))
    return path


# ----------------------------------------------------------------------------
# fixtures: one tiny run, copied per test

@pytest.fixture(scope="module")
def pristine(tmp_path_factory):
    return tiny_run(tmp_path_factory, "char")


@pytest.fixture
def run(pristine, tmp_path):
    return Path(shutil.copytree(pristine, tmp_path / "run"))


def results_file(path, run_dir):
    """An lm-eval results_*.json for ``run_dir`` at ``path`` (its name is the caller's)."""
    data = {"config": {"model_args": f"ckpt={os.path.realpath(run_dir)}"},
            "results": {"zerollm_addition": {"success,none": 0.5, "success_stderr,none": 0.1}},
            "n-samples": {"zerollm_addition": {"effective": 10}}}
    Path(path).write_text(json.dumps(data), encoding="utf-8")
    return Path(path)


def step(run_dir, n=2):
    return Path(run_dir) / f"step-{n:07d}"


def snapshot(path):
    path = Path(path)
    return path.read_bytes(), path.stat().st_mtime_ns


# ----------------------------------------------------------------------------
# inputs: a special file where a file is read

def _report_log(run, tmp, kind):
    return special(run / "log.jsonl", kind), ["report", run, "--out", tmp / "r.html"]


def _report_meta(run, tmp, kind):
    return special(run / "data" / "meta.json", kind), ["report", run, "--out", tmp / "r.html"]


def _report_results_in_folder(run, tmp, kind):
    (tmp / "scores").mkdir()
    results_file(tmp / "scores" / "results_1.json", run)
    return (special(tmp / "scores" / "results_2.json", kind),
            ["report", run, "--results", tmp / "scores", "--out", tmp / "r.html"])


def _report_results_file(run, tmp, kind):
    return special(tmp / "results_1.json", kind), ["report", run, "--results", tmp / "results_1.json",
                                                        "--out", tmp / "r.html"]


def _step_config(run, tmp, kind):
    return special(step(run) / "config.json", kind), ["sample", "--ckpt", step(run), "--max-new-tokens", "2"]


def _resume_log(run, tmp, kind):
    return special(run / "log.jsonl", kind), ["train", "--resume", "--out", run, "--max-iters", "3",
                                                  "--no-progress"]


def _eval_data(run, tmp, kind):
    return special(tmp / "text.txt", kind), ["eval", "--ckpt", run, "--data", tmp / "text.txt"]


def _train_data(run, tmp, kind):
    return special(tmp / "text.txt", kind), ["train", "--data", tmp / "text.txt", "--out", tmp / "new", *TINY_MODEL]


def _sft_data(run, tmp, kind):
    return special(tmp / "sft.jsonl", kind), ["sft", "--init", run, "--data", tmp / "sft.jsonl", "--out", tmp / "new",
                                              "--max-iters", "1"]


def _prepare_data(run, tmp, kind):
    return special(tmp / "text.txt", kind), ["prepare", "--data", tmp / "text.txt", "--out", tmp / "prepared"]


def _tasks_eval_data(run, tmp, kind):
    return special(tmp / "prompts.jsonl", kind), ["tasks", "eval", "addition", "--ckpt", run,
                                                      "--data", tmp / "prompts.jsonl"]


def _attention_matrix(run, tmp, kind):
    x = special(tmp / "x.json", kind)
    return x, ["attention", "--x", x, "--wq", x, "--wk", x, "--wv", x]


INPUTS = {"report RUN/log.jsonl": _report_log, "report RUN/data/meta.json": _report_meta,
          "report --results DIR/results_*.json": _report_results_in_folder,
          "report --results FILE": _report_results_file, "sample --ckpt STEP/config.json": _step_config,
          "train --resume RUN/log.jsonl": _resume_log, "eval --data": _eval_data, "prepare --data": _prepare_data,
          "train --data": _train_data, "sft --data": _sft_data,
          "tasks eval --data": _tasks_eval_data, "attention --x": _attention_matrix}
# a folder is named a folder the same way; "is a directory" is how the special-file rule says it
KINDS = ["fifo", "socket", "device", "folder"]


# where a folder is a good answer: --results searches it; train --data reads a folder from `zerollm prepare`
FOLDERS_WANTED = {("report --results FILE", "folder"), ("train --data", "folder")}


@pytest.mark.parametrize("role, kind", [(r, k) for r in INPUTS for k in KINDS if (r, k) not in FOLDERS_WANTED])
def test_a_special_file_read_as_a_file_is_refused(run, tmp_path, role, kind):
    path, argv = INPUTS[role](run, tmp_path, kind)
    result = zerollm(*argv, blocks=kind == "fifo")
    refused(result, REGULAR, progress=argv[0] == "train")
    assert str(path) in result[2]
    assert not any((tmp_path / name).exists() for name in ("r.html", "prepared", "new"))


@pytest.mark.parametrize("device", ["/dev/zero", "/dev/urandom", "/dev/null"])
@pytest.mark.parametrize("command", ["eval", "prepare", "tasks eval", "report --results", "attention --x"])
def test_a_device_given_as_an_input_is_refused_not_read_forever(run, tmp_path, command, device):
    argv = {"eval": ["eval", "--ckpt", run, "--data", device],
            "prepare": ["prepare", "--data", device, "--out", tmp_path / "prepared"],
            "tasks eval": ["tasks", "eval", "addition", "--ckpt", run, "--data", device],
            "report --results": ["report", run, "--results", device, "--out", tmp_path / "r.html"],
            "attention --x": None}[command]
    if command == "attention --x":          # its files are named .json or .npy: a link with that name
        os.symlink(device, tmp_path / "x.json")
        argv = ["attention", *[a for flag in ("--x", "--wq", "--wk", "--wv") for a in (flag, tmp_path / "x.json")]]
    refused(zerollm(*argv, blocks=device != "/dev/null"), f"is a character device, not a")


@pytest.mark.parametrize("command", ["eval", "prepare", "tasks eval"])
def test_dev_stdin_from_a_pipe_is_refused_and_from_a_file_is_read(run, tmp_path, command):
    text = tiny_text(tmp_path)
    prompts = tmp_path / "prompts.jsonl"
    prompts.write_text('{"prompt": "1+1=", "answer": 2}\n', encoding="utf-8")
    argv = {"eval": ["eval", "--ckpt", run, "--data", "/dev/stdin"],
            "prepare": ["prepare", "--data", "/dev/stdin", "--out", tmp_path / "prepared", "--block-size", "8"],
            "tasks eval": ["tasks", "eval", "addition", "--ckpt", run, "--data", "/dev/stdin",
                           "--max-new-tokens", "2"]}[command]
    refused(zerollm(*argv, stdin=subprocess.PIPE), "/dev/stdin is a named pipe (FIFO), not a")
    with open(prompts if command == "tasks eval" else text, "rb") as f:    # < FILE: /dev/stdin is that file
        code, out, err = zerollm(*argv, stdin=f)
    assert code in (0, 1) and "Traceback" not in err and REGULAR not in err, err
    if command != "tasks eval":        # a char model may not know "+": a refusal of the text, not of the file
        assert code == 0, err


def test_pipes_named_like_a_runs_pointer_or_checkpoint_are_passed_over(run):
    """A pipe as latest.json is a damaged pointer (the newest complete step is used, with a note); a pipe
    named like a step folder is no checkpoint."""
    special(run / "latest.json", "fifo")
    code, out, err = zerollm("sample", "--ckpt", run, "--max-new-tokens", "2")
    assert code == 0 and "latest.json is unreadable" in err and "Traceback" not in err, err
    shutil.rmtree(step(run, 2))
    special(step(run, 2), "fifo")
    code, out, err = zerollm("sample", "--ckpt", run, "--max-new-tokens", "2")
    assert code == 0 and "using step-0000001" in err and "Traceback" not in err, err


def test_lm_eval_tasks_over_a_folder_with_a_pipe_in_it(tmp_path):
    folder = tmp_path / "lm-tasks"
    assert zerollm("tasks", "make", "lm-eval", "--out", folder, "--n", "2")[0] == 0
    special(folder / MARKER, "fifo")
    refused(zerollm("tasks", "make", "lm-eval", "--out", folder, "--n", "2"), "pass --force")
    code, _, err = zerollm("tasks", "make", "lm-eval", "--out", folder, "--n", "2", "--force")
    assert code == 0 and (folder / MARKER).is_file(), err


# ----------------------------------------------------------------------------
# the good path: links to regular files are read, and a separate output is written

def test_links_to_regular_files_are_read_and_a_pipe_beside_them_is_not(run, tmp_path):
    (tmp_path / "scores").mkdir()
    results = results_file(tmp_path / "real.json", run)
    os.symlink(results, tmp_path / "scores" / "results_1.json")
    os.symlink(tiny_text(tmp_path), tmp_path / "text.txt")
    code, out, err = zerollm("report", run, "--results", tmp_path / "scores", "--out", tmp_path / "r.html")
    assert code == 0 and "1 with lm-eval scores" in out and (tmp_path / "r.html").is_file(), err
    code, out, err = zerollm("eval", "--ckpt", run, "--data", tmp_path / "text.txt")
    assert code == 0 and "bits per byte" in out, err
    special(tmp_path / "scores" / "results_2.json", "fifo")
    refused(zerollm("report", run, "--results", tmp_path / "scores", "--out", tmp_path / "r2.html"), REGULAR)


# ----------------------------------------------------------------------------
# outputs: a special file where a file is written, --force or not

def _convert_gguf(run, tmp):
    return tmp / "model.gguf", ["convert", "--from", run, "--to", tmp / "model.gguf", "--overwrite"]


def _report_out(run, tmp):
    return tmp / "r.html", ["report", run, "--out", tmp / "r.html"]


def _explain_out(run, tmp):
    return tmp / "e.html", ["explain", "--out", tmp / "e.html"]


def _heads_out(run, tmp):
    return tmp / "h.png", ["heads", "--random", "--seq", "4", "--out", tmp / "h.png"]


def _tasks_out(run, tmp):
    return tmp / "sums.jsonl", ["tasks", "make", "addition", "--n", "2", "--out", tmp / "sums.jsonl"]


OUTPUTS = {"convert --to FILE.gguf": _convert_gguf, "report --out": _report_out, "explain --out": _explain_out,
           "heads --out": _heads_out, "tasks make --out": _tasks_out}


@pytest.mark.parametrize("force", [False, True], ids=["plain", "force"])
@pytest.mark.parametrize("kind", ["fifo", "socket", "device"])
@pytest.mark.parametrize("role", list(OUTPUTS))
def test_a_special_file_as_an_output_is_never_written(run, tmp_path, role, kind, force):
    path, argv = OUTPUTS[role](run, tmp_path)
    special(path, kind)
    flag = "--force" if role != "convert --to FILE.gguf" else "--overwrite"
    argv = [a for a in argv if a != "--overwrite"] + ([flag] if force else [])
    refused(zerollm(*argv, blocks=kind == "fifo"), NOT_REGULAR_OUT)
    assert os.path.lexists(path) and not path.is_file()


# ----------------------------------------------------------------------------
# outputs over inputs

@pytest.fixture(scope="module")
def hf_sharded(tmp_path_factory):
    """A Hugging Face directory whose weights are shards named by model.safetensors.index.json (so no
    model.safetensors), made from a random 1-layer model."""
    from zerollm.io.safetensors import read_header
    root = tmp_path_factory.mktemp("sharded")
    random_base(root, "abcdefgh ", block_size=16)
    folder = root / "hf"
    code, _, err = zerollm("convert", "--from", root / "base", "--to", folder)
    assert code == 0, err
    names = [n for n in read_header(folder / "model.safetensors") if n != "__metadata__"]
    os.rename(folder / "model.safetensors", folder / "model-00001-of-00001.safetensors")
    index = {"metadata": {}, "weight_map": {n: "model-00001-of-00001.safetensors" for n in names}}
    (folder / "model.safetensors.index.json").write_text(json.dumps(index), encoding="utf-8")
    return folder


# each: (run, tmp_path, the sharded HF folder) -> (a file the command reads, or that lies beside where it
# would write: it must stay as it was, and its folder must get no new file; the command; the error's fragment)

def _results_as_out(run, tmp, hf):
    scores = results_file(tmp / "scores.html", run)
    return scores, ["report", run, "--results", scores, "--out", scores], "which this command reads"


def _out_in_results_folder(run, tmp, hf):
    (tmp / "scores").mkdir()
    scores = results_file(tmp / "scores" / "results_1.json", run)
    return scores, ["report", run, "--results", tmp / "scores", "--out", tmp / "scores" / "r.html"], \
        "which this command reads"


def _report_into_its_run(run, tmp, hf):
    return run / "log.jsonl", ["report", run, "--out", run / "r.html"], "lies inside"


def _lm_eval_into_checkpoint(run, tmp, hf):
    return step(run) / "config.json", ["tasks", "make", "lm-eval", "--n", "2", "--out", step(run) / "tasks"], \
        "which is a checkpoint"


def _lm_eval_into_run(run, tmp, hf):
    return run / "latest.json", ["tasks", "make", "lm-eval", "--n", "2", "--out", run / "tasks"], \
        "which is a training run"


def _explain_into_sharded_hf(run, tmp, hf):
    return hf / "config.json", ["explain", "--hf", hf, "--text", "abc", "--out", hf / "e.html"], "--hf"


def _explain_into_its_ckpt(run, tmp, hf):
    return run / "log.jsonl", ["explain", "--ckpt", run, "--text", "First", "--out", run / "e.html"], "lies inside"


def _heads_into_its_ckpt(run, tmp, hf):
    return step(run) / "model.safetensors", ["heads", "--ckpt", step(run), "--text", "First",
                                             "--out", step(run) / "h.png"], "--ckpt"


def _convert_into_its_source(run, tmp, hf):
    return step(run) / "model.safetensors", ["convert", "--from", run, "--to", step(run) / "out.gguf"], "overlap"


def _answers_over_data(run, tmp, hf):
    data = tmp / "prompts.jsonl"
    data.write_text('{"prompt": "1+1=", "answer": 2}\n', encoding="utf-8")
    return data, ["tasks", "eval", "addition", "--ckpt", run, "--data", data, "--answers", data], \
        "which this command reads"


def _train_over_its_data(run, tmp, hf):
    (tmp / "new").mkdir()
    data = tmp / "new" / "log.jsonl"            # a text file that happens to have the name of a run's log
    data.write_text(tiny_text(tmp).read_text(encoding="utf-8"), encoding="utf-8")
    return data, ["train", "--data", data, "--out", tmp / "new", *TINY_MODEL], "is where this run writes"


def _sft_over_its_data(run, tmp, hf):
    (tmp / "new").mkdir()
    data = tmp / "new" / "tokenizer.json"
    data.write_text('{"prompt": "1+1=", "completion": "2"}\n', encoding="utf-8")
    return data, ["sft", "--init", run, "--data", data, "--out", tmp / "new", "--max-iters", "1"], \
        "is where this run writes"


OVER_INPUTS = {"report --results F --out F": _results_as_out,
               "report --out inside --results DIR": _out_in_results_folder,
               "report --out inside its RUN": _report_into_its_run,
               "tasks make lm-eval --out inside a checkpoint": _lm_eval_into_checkpoint,
               "tasks make lm-eval --out inside a run": _lm_eval_into_run,
               "explain --out inside its sharded --hf": _explain_into_sharded_hf,
               "explain --out inside its --ckpt": _explain_into_its_ckpt,
               "heads --out inside its --ckpt": _heads_into_its_ckpt,
               "convert --to inside its --from": _convert_into_its_source,
               "tasks eval --answers over its --data": _answers_over_data,
               "train --out around its --data": _train_over_its_data, "sft --out around its --data": _sft_over_its_data}


@pytest.mark.parametrize("force", [False, True], ids=["plain", "force"])
@pytest.mark.parametrize("case", list(OVER_INPUTS))
def test_an_output_never_replaces_or_enters_an_input(run, tmp_path, hf_sharded, case, force):
    kept, argv, fragment = OVER_INPUTS[case](run, tmp_path, hf_sharded)
    if force:
        argv += ["--overwrite"] if argv[0] == "convert" else ["--force"]
    before, listing = snapshot(kept), sorted(os.listdir(kept.parent))
    refused(zerollm(*argv, blocks=False), fragment)
    assert snapshot(kept) == before and sorted(os.listdir(kept.parent)) == listing


def test_an_output_beside_the_inputs_is_written_and_one_over_them_is_not(run, tmp_path, hf_sharded):
    scores = results_file(tmp_path / "scores.html", run)
    before = snapshot(scores)
    refused(zerollm("report", run, "--results", scores, "--out", scores, "--force"), "which this command reads")
    code, out, err = zerollm("report", run, "--results", scores, "--out", tmp_path / "r.html")
    assert code == 0 and (tmp_path / "r.html").is_file() and snapshot(scores) == before, err
    refused(zerollm("explain", "--hf", hf_sharded, "--text", "abc", "--out", hf_sharded / "e.html"), "--hf")
    code, out, err = zerollm("explain", "--hf", hf_sharded, "--text", "abc", "--out", tmp_path / "e.html")
    assert code == 0 and (tmp_path / "e.html").is_file() and not (hf_sharded / "e.html").exists(), err
    refused(zerollm("tasks", "make", "lm-eval", "--n", "2", "--out", step(run) / "tasks"), "which is a checkpoint")
    code, out, err = zerollm("tasks", "make", "lm-eval", "--n", "2", "--out", tmp_path / "tasks")
    assert code == 0 and (tmp_path / "tasks" / MARKER).is_file() and not (step(run) / "tasks").exists(), err
