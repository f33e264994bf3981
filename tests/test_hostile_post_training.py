"""The post-training surface (tasks, sft, reward, dpo, ppo, grpo, convert, user reward code) as a hostile
user meets it: every bad input below ends in one line on stderr and a non-zero exit, and nothing the
user had is replaced. Each `test_hostile_*` case is one bad input (count them with
`pytest --collect-only -q tests/test_hostile_post_training.py tests/test_mpi_disagree.py | grep -c hostile`).

Most cases call the CLI's main(argv) in this process (tests/tiny_runs.py run_main): the same code path as
the `zerollm` script, without the second it costs to start Python.
"""

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tiny_runs import TINY_PREFS as PREFS, run_main, tiny_stage_base
from zerollm.model.config import GPTConfig
from zerollm.data.formats import write_jsonl
from zerollm.align.tasks import addition

SMALL = ["--max-iters", "2", "--no-progress", "--checkpoint-interval", "1", "--eval-interval", "100"]
RL = ["--reward", "addition", "--max-new-tokens", "3", "--prompts-per-step", "2", "--group-size", "2"]


@pytest.fixture(scope="module")
def root(tmp_path_factory):
    """A random base model (a zerollm model directory) and SFT, preference and prompt files."""
    return tiny_stage_base(tmp_path_factory.mktemp("hostile"))


def one_line_error(code, err, fragment):
    """Exit 1 or 2 with exactly one error line (a run that had started also printed its progress lines)."""
    errors = [line for line in err.splitlines() if ": error:" in line]
    assert code in (1, 2), (code, err)
    assert len(errors) == 1 and "Traceback" not in err and fragment in errors[0], err


# ----------------------------------------------------------------------------
# outputs: never over a file the command did not make, never into an input, a run or a device

def test_hostile_tasks_make_over_a_users_file(tmp_path, capsys):
    mine = tmp_path / "mine.jsonl"
    mine.write_text('{"prompt": "hand written", "completion": "keep me"}\n')
    code, _, err = run_main(["tasks", "make", "addition", "--out", mine, "--n", "3"], capsys)
    one_line_error(code, err, "already exists; pass --force to replace it")
    assert "keep me" in mine.read_text()
    code, _, _ = run_main(["tasks", "make", "addition", "--out", mine, "--n", "3", "--force"], capsys)
    assert code == 0 and len(mine.read_text().splitlines()) == 3           # --force replaces it


def _fifo(p):
    os.mkfifo(p)


def _link(p):
    (p.parent / "target.txt").write_text("linked")
    os.symlink(p.parent / "target.txt", p)


@pytest.mark.parametrize("make", [_fifo, _link, Path.mkdir], ids=["fifo", "symlink", "folder"])
def test_hostile_tasks_make_over_something_not_a_regular_file(tmp_path, capsys, make):
    target = tmp_path / "out.jsonl"
    make(target)
    code, _, err = run_main(["tasks", "make", "addition", "--out", target, "--n", "3", "--force"], capsys)
    one_line_error(code, err, "is not a regular file")
    assert os.path.lexists(target) and not target.is_file() or target.is_symlink()


def test_hostile_tasks_make_over_a_device(capsys):
    code, _, err = run_main(["tasks", "make", "addition", "--out", "/dev/null", "--n", "3", "--force"], capsys)
    one_line_error(code, err, "is not a regular file")
    assert Path("/dev/null").is_char_device()


def test_hostile_tasks_make_into_a_model_directory(root, capsys):
    code, _, err = run_main(["tasks", "make", "addition", "--out", root / "base" / "x.jsonl", "--n", "3"], capsys)
    one_line_error(code, err, "which is a model directory")
    assert not (root / "base" / "x.jsonl").exists()


@pytest.mark.parametrize("answers, fragment", [
    ("{data}", "which this command reads"),
    ("{mine}", "already exists; pass --force to replace it"),
    ("{base}/answers.jsonl", "lies inside"),
], ids=["answers-is-data", "answers-over-file", "answers-in-model"])
def test_hostile_tasks_eval_answers(root, tmp_path, capsys, answers, fragment):
    data = tmp_path / "p.jsonl"
    data.write_bytes((root / "prompts.jsonl").read_bytes())
    (tmp_path / "mine.txt").write_text("mine")
    path = answers.format(data=data, mine=tmp_path / "mine.txt", base=root / "base")
    code, _, err = run_main(["tasks", "eval", "addition", "--ckpt", root / "base", "--data", data, "--answers", path],
                            capsys)
    one_line_error(code, err, fragment)
    assert data.read_bytes() == (root / "prompts.jsonl").read_bytes() and (tmp_path / "mine.txt").read_text() == "mine"
    assert not (root / "base" / "answers.jsonl").exists()


@pytest.mark.parametrize("out, fragment", [
    ("{base}/sft", "overlap"),                      # inside its own --init: would rewrite its tokenizer.json
    ("{base}", "overlap"),
    ("{tmp}/file.txt", "is a file, not a folder"),
    ("{tmp}/users", "already holds tokenizer.json"),
    ("{tmp}/prepared/run", "which is prepared data"),
], ids=["inside-init", "is-init", "a-file", "users-folder", "inside-prepared-data"])
def test_hostile_stage_out(root, tmp_path, capsys, out, fragment):
    (tmp_path / "file.txt").write_text("mine")
    (tmp_path / "users").mkdir()
    (tmp_path / "users" / "tokenizer.json").write_text("{}")
    (tmp_path / "prepared").mkdir()
    (tmp_path / "prepared" / "meta.json").write_text("{}")
    (tmp_path / "prepared" / "train.bin").write_bytes(b"")
    before = sorted(p.name for p in (root / "base").iterdir())
    out = out.format(base=root / "base", tmp=tmp_path)
    code, _, err = run_main(["sft", "--init", root / "base", "--data", root / "sft.jsonl", "--out", out, *SMALL],
                            capsys)
    one_line_error(code, err, fragment)
    assert sorted(p.name for p in (root / "base").iterdir()) == before
    assert (tmp_path / "users" / "tokenizer.json").read_text() == "{}" and (tmp_path / "file.txt").read_text() == "mine"


def test_hostile_stage_out_inside_a_checkpoint(root, tmp_path, capsys):
    run = tmp_path / "sft"
    assert run_main(["sft", "--init", root / "base", "--data", root / "sft.jsonl", "--out", run, *SMALL], capsys)[0] == 0
    step = next(run.glob("step-*"))
    before = (run / "tokenizer.json").read_bytes()
    for out in (step, step / "dpo", run / "dpo"):
        code, _, err = run_main(["dpo", "--init", step, "--data", root / "prefs.jsonl", "--out", out, *SMALL], capsys)
        one_line_error(code, err, "overlap" if out != run / "dpo" else "which is a training run")
    assert (run / "tokenizer.json").read_bytes() == before and not (run / "dpo").exists()


def test_hostile_convert_into_a_run(root, tmp_path, capsys):
    step = tmp_path / "run" / "step-0000001"          # a run: a folder with a checkpoint in it
    step.mkdir(parents=True)
    (step / "config.json").write_text('{"format": "zerollm-checkpoint"}')
    (step / "state.json").write_text("{}")
    code, _, err = run_main(["convert", "--from", root / "base", "--to", tmp_path / "run" / "hf"], capsys)
    one_line_error(code, err, "which is a training run")
    assert sorted(p.name for p in (tmp_path / "run").iterdir()) == ["step-0000001"]


# ----------------------------------------------------------------------------
# JSONL that is valid JSON but hostile, and fields of the wrong type: file and line in the message

DEEP = "[" * 50_000 + "]" * 50_000
HOSTILE_LINES = {
    "deep-50000": ('{"prompt": "1+1=", "chosen": "2", "rejected": "3", "x": %s}' % DEEP, "nested deeper than"),
    "deep-100": ('{"prompt": "1+1=", "chosen": "2", "rejected": "3", "x": %s}' % ("[" * 100 + "]" * 100),
                 "nested deeper than"),
    "int-5000-digits": ('{"prompt": "1+1=", "chosen": "2", "rejected": "3", "x": %s}' % ("9" * 5000),
                        "an integer of 5000 digits"),
    "surrogate-value": ('{"prompt": "1+1=\\ud800", "chosen": "2", "rejected": "3"}', "lone surrogate"),
    "surrogate-key": ('{"prompt": "1+1=", "chosen": "2", "rejected": "3", "\\udfff": 1}', "lone surrogate"),
    "margin-string": ('{"prompt": "1+1=", "chosen": "2", "rejected": "3", "margin": "big"}', "'margin' must be a number"),
    "margin-null": ('{"prompt": "1+1=", "chosen": "2", "rejected": "3", "margin": null}', "'margin' must be a number"),
    "margin-bool": ('{"prompt": "1+1=", "chosen": "2", "rejected": "3", "margin": true}', "'margin' must be a number"),
    "margin-1e308": ('{"prompt": "1+1=", "chosen": "2", "rejected": "3", "margin": 1e308}', "'margin' must be from"),
    "margin-huge-int": ('{"prompt": "1+1=", "chosen": "2", "rejected": "3", "margin": -5000}', "'margin' must be from"),
    "margin-1e400": ('{"prompt": "1+1=", "chosen": "2", "rejected": "3", "margin": 1e400}', "too large for a float"),
    "margin-nan": ('{"prompt": "1+1=", "chosen": "2", "rejected": "3", "margin": NaN}', "is not a JSON number"),
    "chosen-number": ('{"prompt": "1+1=", "chosen": 2, "rejected": "3"}', "'chosen' must be a string"),
    "corruption-list": ('{"prompt": "1+1=", "chosen": "2", "rejected": "3", "corruption": []}',
                        "'corruption' must be a string"),
    "duplicate-key": ('{"prompt": "1+1=", "chosen": "2", "rejected": "3", "chosen": "4"}',
                      "the key 'chosen' appears twice"),
    "empty-prompt": ('{"prompt": "", "chosen": "2", "rejected": "3"}', "'prompt' is empty"),
    "trl-other-conversations": ('{"chosen": [{"role": "user", "content": "1+1="}, {"role": "assistant", "content": "2"}],'
                                ' "rejected": [{"role": "user", "content": "1+2="}, {"role": "assistant", '
                                '"content": "3"}]}', "must hold the same conversation before their last"),
    "trl-no-answer": ('{"chosen": [{"role": "user", "content": "1+1="}], "rejected": [{"role": "user", '
                      '"content": "1+2="}]}', "'chosen' must end with the assistant's answer"),
    "trl-mixed": ('{"prompt": "1+1=", "chosen": [{"role": "assistant", "content": "2"}], "rejected": "3"}',
                  "must both be texts or both lists of messages"),
    "no-prompt": ('{"question": "1+1=", "chosen": "2", "rejected": "3"}', "missing key(s) 'prompt'; the row has"),
}


def _trl(pair, implicit):
    """TRL's conversational form of a text pair: implicit (the user turn inside chosen/rejected) or explicit."""
    user = [{"role": "user", "content": pair["prompt"]}]
    answer = {key: [{"role": "assistant", "content": pair[key]}] for key in ("chosen", "rejected")}
    if implicit:
        return {key: user + answer[key] for key in answer}
    return {"prompt": user, **answer}


@pytest.mark.parametrize("implicit", [True, False])
def test_trl_conversational_preferences_are_the_text_pairs(implicit):
    from zerollm.align.objectives.pairs import encode_pairs
    from zerollm.data.chat import prepare_tokenizer
    from zerollm.data.formats import check_pref_row
    from zerollm.tokenizers import ByteTokenizer
    tok = prepare_tokenizer(ByteTokenizer())
    text = [dict(p) for p in PREFS]
    conversational = [check_pref_row(_trl(p, implicit), f"line {n}") for n, p in enumerate(PREFS, 1)]
    assert encode_pairs(tok, conversational) == encode_pairs(tok, text)


@pytest.mark.parametrize("command", ["reward", "dpo"])
def test_trl_conversational_preferences_train(root, tmp_path, capsys, command):
    data = tmp_path / "prefs.jsonl"
    write_jsonl(data, [_trl(p, implicit=n % 2 == 0) for n, p in enumerate(PREFS)])
    code, _, err = run_main([command, "--init", root / "base", "--data", data, "--out", tmp_path / "run", *SMALL],
                            capsys)
    assert code == 0, err


@pytest.mark.parametrize("command", ["reward", "dpo"])
@pytest.mark.parametrize("name", sorted(HOSTILE_LINES))
def test_hostile_preference_lines(root, tmp_path, capsys, command, name):
    line, fragment = HOSTILE_LINES[name]
    data = tmp_path / "prefs.jsonl"
    data.write_text(json.dumps(PREFS[0]) + "\n" + line + "\n", encoding="utf-8")
    code, _, err = run_main([command, "--init", root / "base", "--data", data, "--out", tmp_path / "run", *SMALL], capsys)
    one_line_error(code, err, fragment)
    assert f"{data} line 2" in err and not (tmp_path / "run").exists()


PROMPT_LINES = {
    "answer-list": ('{"prompt": "1+1=", "answer": [2]}', "'answer' must be an integer or a string"),
    "answer-text": ('{"prompt": "1+1=", "answer": "abc"}', "example 2: an addition row's \"answer\" must be a whole"),
    "answer-exponent": ('{"prompt": "1+1=", "answer": "1e5"}', "must be a whole number like 357, got '1e5'"),
    "heads-number": ('{"prompt": "1+1=", "heads": 5}', "'heads' must be a string"),
    "completion-null": ('{"prompt": "1+1=", "completion": null}', "'completion' must be a string"),
    "prompt-object": ('{"prompt": {"role": "user"}}', "'prompt' must be a string"),
    "deep-messages": ('{"prompt": %s}' % DEEP, "nested deeper than"),
    "int-key-huge": ('{"prompt": "1+1=", "line": %s}' % ("1" * 400), "an integer of 400 digits"),
}


@pytest.mark.parametrize("name", sorted(PROMPT_LINES))
def test_hostile_prompt_lines_for_grpo_and_tasks_eval(root, tmp_path, capsys, name):
    line, fragment = PROMPT_LINES[name]
    data = tmp_path / "prompts.jsonl"
    data.write_text('{"prompt": "1+2="}\n' + line + "\n", encoding="utf-8")
    code, _, err = run_main(["grpo", "--init", root / "base", "--data", data, "--out", tmp_path / "run", *RL, *SMALL],
                            capsys)
    one_line_error(code, err, fragment)
    assert (f"{data} line 2" in err or f"--data {data} example 2" in err) and not (tmp_path / "run").exists()
    code, _, err = run_main(["tasks", "eval", "addition", "--ckpt", root / "base", "--data", data], capsys)
    one_line_error(code, err, fragment)


def test_hostile_line_longer_than_the_limit(root, tmp_path, capsys):
    from zerollm.data.formats import MAX_LINE_BYTES
    data = tmp_path / "sft.jsonl"
    data.write_text('{"prompt": "1+2=", "completion": "3"}\n{"prompt": "' + "1" * MAX_LINE_BYTES + '"}\n')
    code, _, err = run_main(["sft", "--init", root / "base", "--data", data, "--out", tmp_path / "run", *SMALL], capsys)
    one_line_error(code, err, f"{data} line 2: longer than 16 MiB")


# ----------------------------------------------------------------------------
# resuming a stage whose copied inputs changed, or with other inputs

@pytest.fixture(scope="module")
def sft_run(root, tmp_path_factory):
    run = tmp_path_factory.mktemp("sftrun") / "run"
    from zerollm.cli.entry import main
    assert main(["sft", "--init", str(root / "base"), "--data", str(root / "sft.jsonl"), "--eval-data",
                 str(root / "sft.jsonl"), "--out", str(run), *SMALL]) == 0
    return run


def _damage_delete(run):
    (run / "inputs" / "data.jsonl").unlink()


def _damage_truncate(run):
    path = run / "inputs" / "data.jsonl"
    path.write_bytes(path.read_bytes()[:30])


def _damage_empty(run):
    (run / "inputs" / "data.jsonl").write_bytes(b"")


def _damage_eval(run):
    path = run / "inputs" / "eval_data.jsonl"
    path.write_text(path.read_text().replace("=", "= ", 1))


@pytest.mark.parametrize("damage, fragment", [
    (_damage_delete, "is missing"), (_damage_truncate, "has changed since the run began"),
    (_damage_empty, "has changed since the run began"), (_damage_eval, "has changed since the run began"),
], ids=["deleted", "truncated", "emptied", "eval-edited"])
def test_hostile_resume_with_damaged_inputs(sft_run, tmp_path, capsys, damage, fragment):
    import shutil
    run = tmp_path / "run"
    shutil.copytree(sft_run, run)
    damage(run)
    code, _, err = run_main(["sft", "--out", run, "--resume", "--max-iters", "3", "--no-progress"], capsys)
    one_line_error(code, err, fragment)
    assert json.loads((run / "latest.json").read_text())["step"] == 2       # the checkpoint is untouched


def test_hostile_resume_with_another_data_file(root, sft_run, tmp_path, capsys):
    import shutil
    run = tmp_path / "run"
    shutil.copytree(sft_run, run)
    other = tmp_path / "other.jsonl"
    write_jsonl(other, addition.make(5, "train", 1))
    for flag, path, fragment in (("--data", other, "is not the file the run began with"),
                                 ("--eval-data", other, "is not the file the run began with"),
                                 ("--data", tmp_path / "nope.jsonl", "no such file"),
                                 ("--init", tmp_path, "is another model")):
        code, _, err = run_main(["sft", "--out", run, "--resume", flag, path, "--max-iters", "3", "--no-progress"],
                                capsys)
        one_line_error(code, err, fragment)
    code, _, err = run_main(["sft", "--out", run, "--resume", "--data", root / "sft.jsonl", "--max-iters", "3",
                             "--no-progress"], capsys)
    assert code == 0, err                                   # the very same file is fine


# ----------------------------------------------------------------------------
# user reward code behind one guard

REWARD_MODULES = {
    "syntax": ("def f(prompts, completions, **kw)\n    return [0.0]\n", "cannot import", "SyntaxError"),
    "raises_at_import": ("raise RuntimeError('no config file')\n", "cannot import", "RuntimeError: no config file"),
    "exits_at_import": ("import sys\nsys.exit(3)\n", "cannot import", "called sys.exit(3)"),
    "no_function": ("x = 1\n", "has no 'f'", "--reward"),
    "raises": ("def f(prompts, completions, **kw):\n    raise KeyError('answer')\n", "raised KeyError", "reward"),
    "exits": ("import sys\ndef f(prompts, completions, **kw):\n    sys.exit(0)\n", "called sys.exit(0)", "reward"),
    "sleeps": ("import time\ndef f(prompts, completions, **kw):\n    time.sleep(1000)\n", "did not finish within",
               "--reward-timeout 0.5"),
    "spins": ("def f(prompts, completions, **kw):\n    while True:\n        pass\n", "did not finish within", "reward"),
    "swallows": ("def f(prompts, completions, **kw):\n    while True:\n        try:\n            while True: pass\n"
                 "        except Exception:\n            pass\n", "did not finish within", "reward"),
    "endless_generator": ("def f(prompts, completions, **kw):\n    while True:\n        yield 1.0\n",
                          "did not finish within", "reward"),
    "huge": ("def f(prompts, completions, **kw):\n    return [1e308 for _ in completions]\n",
             "rewards must be numbers up to 1e+06 in size", "reward"),
    "bad_float": ("class X:\n    def __float__(self):\n        raise OSError('disk')\n"
                  "def f(prompts, completions, **kw):\n    return [X() for _ in completions]\n",
                  "must return a list of numbers", "reward"),
}


@pytest.mark.parametrize("name", sorted(REWARD_MODULES))
def test_hostile_reward_code(root, tmp_path, capsys, monkeypatch, name):
    source, fragment, names = REWARD_MODULES[name]
    module = f"user_reward_{name}"
    (tmp_path / f"{module}.py").write_text(source)
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    run = tmp_path / "run"
    started = time.time()
    code, _, err = run_main(["grpo", "--init", root / "base", "--data", root / "prompts.jsonl", "--out", run, *RL,
                             "--reward", f"{module}:f", "--reward-timeout", "0.5", *SMALL], capsys)
    one_line_error(code, err, fragment)
    assert module in err and names in err and time.time() - started < 60     # not hung (generous under load)
    assert not run.exists() or not list(run.glob("step-*"))        # it failed at step 0: nothing to keep


def test_hostile_reward_fails_later_and_the_checkpoint_is_kept(root, tmp_path, capsys, monkeypatch):
    (tmp_path / "user_reward_later.py").write_text(
        "calls = []\ndef f(prompts, completions, **kw):\n    calls.append(1)\n"
        "    if len(calls) > 2:\n        import sys; sys.exit('bye')\n    return [0.0] * len(completions)\n")
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    run = tmp_path / "run"
    code, _, err = run_main(["grpo", "--init", root / "base", "--data", root / "prompts.jsonl", "--out", run, *RL,
                             "--reward", "user_reward_later:f", "--max-iters", "5", "--no-progress",
                             "--checkpoint-interval", "1", "--eval-interval", "100"], capsys)
    one_line_error(code, err, "called sys.exit('bye')")
    assert json.loads((run / "latest.json").read_text())["step"] == 2
    code, _, err = run_main(["sample", "--ckpt", run, "--max-new-tokens", "2", "--prompt", "1"], capsys)
    assert code == 0, err                                            # the kept checkpoint loads


def test_hostile_sigterm_while_reward_code_runs(root, tmp_path):
    (tmp_path / "user_reward_hang.py").write_text(
        "import time\ndef f(prompts, completions, **kw):\n    open('inside', 'w').close()\n    time.sleep(1000)\n")
    argv = [sys.executable, "-m", "zerollm", "grpo", "--init", str(root / "base"), "--data", str(root / "prompts.jsonl"),
            "--out", str(tmp_path / "run"), *RL, "--reward", "user_reward_hang:f", "--reward-timeout", "0", *SMALL]
    job = subprocess.Popen(argv, cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.time() + 60
        while not (tmp_path / "inside").exists() and time.time() < deadline and job.poll() is None:
            time.sleep(0.05)
        assert (tmp_path / "inside").exists(), job.communicate()[1]
        job.send_signal(signal.SIGTERM)
        sent = time.time()
        _, err = job.communicate(timeout=20)
    finally:
        if job.poll() is None:
            job.kill()
            job.wait()
    assert time.time() - sent < 15 and job.returncode == 130, err      # at once, not after the 1000 s sleep
    assert "Traceback" not in err and "stopped at once" in err
    # it stopped in step 0's rollout: there is no checkpoint, and the line must not promise one
    assert "no checkpoint was saved yet" in err and "is kept" not in err, err


# ----------------------------------------------------------------------------
# sizes that cannot work

PAIRS = {"heldout": 100083, "train": 899917}       # the addition splits' sizes, as make() counts them


@pytest.mark.parametrize("argv, fragment", [
    (["addition", "--n", "900000", "--split", "heldout"], f"has only {PAIRS['heldout']} distinct problems"),
    (["addition", "--n", "10000000"], f"has only {PAIRS['train']} distinct problems"),
    (["acrostic", "--n", "9000000"], "ask for fewer"),
], ids=["addition-heldout", "addition-train", "acrostic"])
def test_hostile_tasks_make_more_than_there_are(tmp_path, capsys, argv, fragment):
    started = time.time()
    code, _, err = run_main(["tasks", "make", *argv, "--out", tmp_path / "x.jsonl"], capsys)
    one_line_error(code, err, fragment)
    # refused before making them, not after: a generous bound (making 9 million takes minutes), so that a
    # loaded machine cannot fail it
    assert time.time() - started < 60 and not (tmp_path / "x.jsonl").exists()


def test_addition_counts_its_pairs_only_above_what_each_split_surely_has():
    """make() skips the count (a million hashes) for n up to SURELY_THERE: each split must have more (PAIRS,
    which the test above checks against the count, so this one need not count again)."""
    from zerollm.align.tasks import addition
    assert set(addition.SURELY_THERE) == set(PAIRS)
    for split, pairs in PAIRS.items():
        assert addition.SURELY_THERE[split] < pairs, split


@pytest.mark.parametrize("command, argv", [
    ("grpo", [*RL, "--group-size", "65536"]),
    ("ppo", ["--reward", "addition", "--prompts-per-step", "65536", "--max-new-tokens", "3"]),
    ("grpo", [*RL, "--prompts-per-step", "4096", "--group-size", "64"]),
], ids=["grpo-group-65536", "ppo-prompts-65536", "grpo-262144-rows"])
def test_hostile_rollout_sizes_are_refused_by_the_estimate(root, tmp_path, command, argv):
    """A subprocess with a time limit: before the estimate counted rollouts, these ran on (for hours)."""
    env = {**os.environ, "ZEROLLM_MEMORY_LIMIT": "1GiB"}
    res = subprocess.run([sys.executable, "-m", "zerollm", command, "--init", str(root / "base"), "--data",
                          str(root / "prompts.jsonl"), "--out", str(tmp_path / "run"), *argv, *SMALL],
                         capture_output=True, text=True, timeout=60, env=env)
    one_line_error(res.returncode, res.stderr, "needs about")
    assert "--prompts-per-step, --group-size" in res.stderr and not (tmp_path / "run").exists()


def test_the_estimate_counts_references_and_rollouts(root):
    from zerollm.model import budget
    cfg = GPTConfig(vocab_size=20, block_size=32, n_layer=1, n_head=2, n_embd=16)
    plain = budget.training(cfg, 8).total
    dpo = budget.post_training(cfg, 16, reference=True)
    grpo = budget.post_training(cfg, 8, reference=True, rollout_rows=8 * 65536)
    assert dict(dpo.parts)["frozen reference (a second copy)"] == budget.param_count(cfg) * 4 and dpo.total > plain
    assert dict(grpo.parts)["rollout buffer (rows, T)"] > 8 * 65536 * 32 * 8 and grpo.total > 4 * 2 ** 30


@pytest.mark.parametrize("weights", ["nan", "inf", "1,-inf"])
def test_hostile_reward_weights_that_are_not_finite(root, tmp_path, capsys, weights):
    """A nan or inf weight made every reward nan: the run "diverged" at step 0 and pointed at --lr."""
    rewards = ["--reward", "addition"] + (["--reward", "addition"] if "," in weights else [])
    run = tmp_path / "run"
    code, _, err = run_main(["grpo", "--init", root / "base", "--data", root / "prompts.jsonl", "--out", run,
                             *RL[2:], *rewards, "--reward-weights", weights, *SMALL], capsys)
    one_line_error(code, err, "--reward-weights must be finite numbers")
    assert not run.exists()
