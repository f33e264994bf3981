"""``zerollm exercise``: every exercise's stub fails, zerollm's own answer passes, three plausible wrong answers
each fail with one line that names the mistake (and never the answer); hostile files end in one line;
start never overwrites, hint remembers, solution prints zerollm's own code."""

import inspect
import json

import pytest

from zerollm.cli import main
from zerollm.teach.exercises import command
from zerollm.teach.exercises.catalog import BY_NAME, EXERCISES
from zerollm.teach.exercises.check import check, grade_file, grade_function

from exercise_answers import RIGHT, WRONG

# the issue's list (#63), by the names of this command
ASKED = {"attention", "softmax", "softmax_backward", "cross_entropy_backward", "layernorm_backward",
         "rmsnorm_backward", "gelu_backward", "linear_backward", "attention_backward", "rope", "kv_cache",
         "bpe_step", "top_k_top_p", "adamw_step", "lora_backward", "dpo_gradient", "grpo_advantages", "grpo_loss"}


def run_cli(capsys, *argv):
    code = main(["exercise", *argv])
    out, err = capsys.readouterr()
    return code, out, err


def test_the_issue_list_is_there_in_course_order():
    assert len(EXERCISES) >= 15 and ASKED <= set(BY_NAME)
    parts = [e.part for e in EXERCISES]
    assert parts == sorted(parts)
    assert set(RIGHT) == set(WRONG) == set(BY_NAME)


# ----------------------------------------------------------------------------
# every exercise: the stub, the right answer, three wrong ones

@pytest.mark.parametrize("name", sorted(BY_NAME))
@pytest.mark.parametrize("lang", ["en", "zh"])
def test_the_untouched_stub_fails_with_one_line(tmp_path, name, lang):
    path = tmp_path / f"{name}.py"
    path.write_text(command.stub(BY_NAME[name], lang), encoding="utf-8")
    ok, message = grade_file(BY_NAME[name], str(path), lang)
    assert not ok and "\n" not in message
    assert ("NotImplementedError" in message) and (("not written yet" in message) == (lang == "en"))


@pytest.mark.parametrize("name", sorted(BY_NAME))
def test_zerollm_own_answer_passes(name):
    ok, message = grade_function(BY_NAME[name], RIGHT[name], "en")
    assert ok, message


def _solution_lines(name):
    lines = set()
    for dotted in BY_NAME[name].solution:
        code, _ = command.source_of(dotted)
        lines |= {ln.strip() for ln in code.splitlines() if len(ln.strip()) > 25 and not ln.strip().startswith(("#", '"'))}
    return lines


@pytest.mark.parametrize("name, number", [(n, i) for n in sorted(BY_NAME) for i in range(3)])
def test_a_wrong_answer_fails_and_points_at_the_mistake(name, number):
    fn, words = WRONG[name][number]
    ok, message = grade_function(BY_NAME[name], fn, "en")
    assert not ok
    assert words in message, message
    assert "\n" not in message and "Traceback" not in message
    assert not any(line in message for line in _solution_lines(name)), message     # names the mistake, not the code


def test_a_wrong_answer_is_explained_in_chinese_too():
    fn, _ = WRONG["softmax_backward"][0]
    ok, message = grade_function(BY_NAME["softmax_backward"], fn, "zh")
    assert not ok and "行和" in message and "雅可比" in message


# ----------------------------------------------------------------------------
# hostile files: each ends in one line, in the child process, within the time limit

SOFTMAX_RIGHT = "import numpy as np\n\ndef softmax(x):\n    e = np.exp(x - x.max(-1, keepdims=True))\n" \
                "    return e / e.sum(-1, keepdims=True)\n"

HOSTILE = {
    "syntax": ("def softmax(x)\n    return x\n", "does not import: SyntaxError at line 1"),
    "import_error": ("import numpy as np\nraise RuntimeError('boom')\n", "does not import: RuntimeError: boom at line 2"),
    "exit_on_import": ("import sys\nsys.exit(3)\n", "does not import: SystemExit"),
    "no_function": ("def soft_max(x):\n    return x\n", "has no function softmax"),
    "endless": ("def softmax(x):\n    while True:\n        pass\n", "did not finish within 3 s"),
    "wrong_shape": ("def softmax(x):\n    return x.sum(-1)\n", "has shape"),
    "nan": ("import numpy as np\n\ndef softmax(x):\n    return x * np.nan\n", "NaN or inf"),
    "other_dtype": (SOFTMAX_RIGHT.replace("return e /", "return (e /").replace("True)\n", "True)).astype(np.float64)\n"),
                    "is float64 but the inputs were float32"),
    "returns_none": ("def softmax(x):\n    pass\n", "returned NoneType"),
    "raises": ("def softmax(x):\n    return x[99]\n", "raised IndexError at line 2"),
    "prints_a_flood": ("def softmax(x):\n    print('x' * 100000)\n    return None\n", "returned NoneType"),
    "hard_exit": ("import os\n\ndef softmax(x):\n    os._exit(7)\n", "exit code 7"),
}


@pytest.mark.slow                  # a child process each (about 0.7 s), one of them waits out its 3 s limit
@pytest.mark.parametrize("case", sorted(HOSTILE))
def test_check_survives_a_hostile_file(tmp_path, case):
    source, words = HOSTILE[case]
    path = tmp_path / "softmax.py"
    path.write_text(source, encoding="utf-8")
    ok, message = check(BY_NAME["softmax"], path, "en", time_limit=3.0 if case == "endless" else 60.0)
    assert not ok and words in message, message
    assert "\n" not in message and "Traceback" not in message


def test_check_passes_a_right_file_and_the_cli_exits_0(tmp_path, capsys):
    (tmp_path / "softmax.py").write_text(SOFTMAX_RIGHT, encoding="utf-8")
    code, out, err = run_cli(capsys, "check", "softmax", "--dir", str(tmp_path), "--lang", "en")
    assert code == 0 and "softmax: right on all" in out and err == ""


def test_the_cli_says_a_wrong_file_in_one_line_and_exits_1(tmp_path, capsys):
    (tmp_path / "softmax.py").write_text(SOFTMAX_RIGHT.replace("x - x.max(-1, keepdims=True)", "x"), encoding="utf-8")
    code, out, err = run_cli(capsys, "check", "softmax", "--dir", str(tmp_path), "--lang", "en")
    assert code == 1 and out == "" and len(err.strip().splitlines()) == 1
    assert "subtract each row's max" in err and "Traceback" not in err


# ----------------------------------------------------------------------------
# start, hint, solution, list, and the names a user can get wrong

def test_start_writes_a_stub_and_never_overwrites(tmp_path, capsys):
    code, out, _ = run_cli(capsys, "start", "rope", "--dir", str(tmp_path), "--lang", "en")
    path = tmp_path / "rope.py"
    stub = path.read_text(encoding="utf-8")
    assert code == 0 and str(path) in out
    assert "def rope(x, theta):" in stub and "raise NotImplementedError" in stub and "theta^(-2i/hs)" in stub
    path.write_text("# my own work\n", encoding="utf-8")
    code, out, _ = run_cli(capsys, "start", "rope", "--dir", str(tmp_path), "--lang", "en")
    assert code == 0 and "already exists" in out
    assert path.read_text(encoding="utf-8") == "# my own work\n"


def test_start_in_chinese_writes_the_task_in_chinese(tmp_path, capsys):
    run_cli(capsys, "start", "softmax", "--dir", str(tmp_path), "--lang", "zh")
    assert "最后一个轴" in (tmp_path / "softmax.py").read_text(encoding="utf-8")


def test_hints_come_one_at_a_time_and_are_remembered(tmp_path, capsys):
    seen = []
    for _ in range(4):
        code, out, _ = run_cli(capsys, "hint", "softmax", "--dir", str(tmp_path), "--lang", "en")
        assert code == 0
        seen.append(out.strip())
    hints = BY_NAME["softmax"].hints["en"]
    assert [s.split(": ", 1)[1] for s in seen[:3]] == list(hints)
    assert seen[0].startswith("hint 1 of 3") and "last hint" in seen[3]
    assert json.loads((tmp_path / command.HINTS_FILE).read_text())["softmax"] == 3
    code, out, _ = run_cli(capsys, "hint", "rope", "--dir", str(tmp_path), "--lang", "en")   # its own count
    assert out.startswith("hint 1 of 3")


def test_a_damaged_hint_record_starts_again(tmp_path, capsys):
    (tmp_path / command.HINTS_FILE).write_text("{not json", encoding="utf-8")
    code, out, _ = run_cli(capsys, "hint", "softmax", "--dir", str(tmp_path), "--lang", "en")
    assert code == 0 and out.startswith("hint 1 of 3")


def test_solution_prints_zerollm_own_code(capsys):
    from zerollm.nn.norm import layernorm_backward
    code, out, _ = run_cli(capsys, "solution", "layernorm_backward", "--lang", "en")
    assert code == 0 and inspect.getsource(inspect.unwrap(layernorm_backward)).strip() in out


def test_list_names_every_exercise(capsys):
    code, out, _ = run_cli(capsys, "list", "--lang", "en")
    assert code == 0 and all(e.name in out for e in EXERCISES)


@pytest.mark.parametrize("argv, words", [
    (["start"], "needs the exercise's name"),
    (["check", "sofmax"], "there is no exercise 'sofmax'"),
    (["check", "softmax", "--dir", "{tmp}/nothing"], "does not exist: write it first"),
])
def test_user_mistakes_are_one_line(tmp_path, capsys, argv, words):
    code, out, err = run_cli(capsys, *[a.format(tmp=tmp_path) for a in argv], "--lang", "en")
    assert code == 1 and words in err and len(err.strip().splitlines()) == 1
