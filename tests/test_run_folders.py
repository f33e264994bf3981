"""Where a new run may go: never into a folder of someone else's files (``--out ~``, ``--out /``), never
into an empty name, and what counts as "a run" when an output is refused for lying inside one. Each
refusal is one line on stderr before anything is written."""

import json

import pytest

from tiny_runs import TINY_MODEL, run_main, tiny_run, tiny_stage_base, tiny_text


def one_line_error(code, err, fragment):
    errors = [line for line in err.splitlines() if ": error:" in line]
    assert code in (1, 2) and len(errors) == 1 and "Traceback" not in err and fragment in errors[0], err


def listing(folder):
    return sorted(str(p.relative_to(folder)) for p in folder.rglob("*"))


@pytest.mark.parametrize("force", [False, True])
def test_train_refuses_a_folder_of_other_files_even_with_force(tmp_path, capsys, force):
    home = tmp_path / "home"
    (home / "projects" / "p1").mkdir(parents=True)
    (home / "notes.txt").write_text("mine\n", encoding="utf-8")
    before = listing(home)
    argv = ["train", "--data", tiny_text(tmp_path), "--out", home, *TINY_MODEL] + (["--force"] if force else [])
    code, _, err = run_main(argv, capsys)
    one_line_error(code, err, "already holds files a run does not write (notes.txt, projects)")
    assert listing(home) == before


def test_a_stage_refuses_a_folder_of_other_files(tmp_path, capsys):
    root = tiny_stage_base(tmp_path)
    out = tmp_path / "mine"
    (out / "sub").mkdir(parents=True)
    (out / "notes.txt").write_text("mine\n", encoding="utf-8")
    before = listing(out)
    code, _, err = run_main(["sft", "--init", root / "base", "--data", root / "sft.jsonl", "--out", out,
                             "--max-iters", "1", "--no-progress", "--force"], capsys)
    one_line_error(code, err, "already holds files a run does not write (notes.txt, sub)")
    assert listing(out) == before


def test_hidden_files_and_an_empty_folder_are_fine(tmp_path, capsys):
    out = tmp_path / "fresh"
    out.mkdir()
    (out / ".gitkeep").write_text("", encoding="utf-8")
    code, _, err = run_main(["train", "--data", tiny_text(tmp_path), "--out", out, *TINY_MODEL], capsys)
    assert code == 0, err
    assert (out / "latest.json").is_file() and (out / ".gitkeep").is_file()


@pytest.mark.parametrize("argv", [
    ["train", "--preset", "tiny", "--out", ""],
    ["sft", "--init", "x", "--data", "y", "--out", " "],
    ["tasks", "make", "addition", "--n", "2", "--out", ""],
    ["sample", "--ckpt", ""],
    ["report", "", "--out", "r.html"],
])
def test_an_empty_file_or_folder_name_is_refused(argv, tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    code, _, err = run_main(argv, capsys)
    one_line_error(code, err, "is empty: give a file or folder name")
    assert code == 2 and not (tmp_path / "runs").exists() and list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("argv", [
    ["tasks", "make", "addition", "--n", "2", "--out", "-"],
    ["convert", "--from", "x", "--to", "-"],
    ["train", "--preset", "tiny", "--out", "-"],
])
def test_a_dash_output_is_refused_not_made_a_file_named_dash(argv, tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    code, _, err = run_main(argv, capsys)
    one_line_error(code, err, "will not make a file named '-'")
    assert list(tmp_path.iterdir()) == []


def test_a_stray_latest_json_or_step_folder_does_not_make_a_run(tmp_path, capsys):
    proj = tmp_path / "proj"
    (proj / "sub").mkdir(parents=True)
    (proj / "latest.json").write_text(json.dumps({"version": "1.2.3"}), encoding="utf-8")
    (proj / "step-0000001").mkdir()
    code, _, err = run_main(["tasks", "make", "addition", "--n", "2", "--out", proj / "sub" / "a.jsonl"], capsys)
    assert code == 0, err
    assert (proj / "sub" / "a.jsonl").is_file()


def test_an_output_inside_a_real_run_is_still_refused(tmp_path_factory, tmp_path, capsys):
    run = tiny_run(tmp_path_factory, "char")
    code, _, err = run_main(["tasks", "make", "addition", "--n", "2", "--out", run / "sub" / "a.jsonl"], capsys)
    one_line_error(code, err, "which is a training run")
    assert not (run / "sub").exists()


@pytest.mark.parametrize("cmd", ["sample", "eval", "sft", "report", "merge"])
def test_a_hugging_face_folder_given_as_a_run_is_named_as_such(tmp_path_factory, tmp_path, capsys, cmd):
    """It used to say "checkpoint ... is incomplete (missing optimizer.safetensors, ...)", as if it were broken."""
    hf = tmp_path_factory.getbasetemp() / "as-hf"
    if not hf.exists():
        assert run_main(["convert", "--from", tiny_run(tmp_path_factory, "char"), "--to", hf], capsys)[0] == 0
    text = tiny_text(tmp_path)
    argv = {"sample": ["sample", "--ckpt", hf, "--max-new-tokens", "2"],
            "eval": ["eval", "--ckpt", hf, "--data", text],
            "sft": ["sft", "--init", hf, "--data", text, "--out", tmp_path / "s", "--max-iters", "1"],
            "report": ["report", hf, "--out", tmp_path / "r.html"],
            "merge": ["merge", "--from", hf, "--to", tmp_path / "m"]}[cmd]
    code, _, err = run_main(argv, capsys)
    one_line_error(code, err, f"{hf} is a Hugging Face model directory")
    assert f"--hf {hf}" in err and "incomplete" not in err


@pytest.mark.parametrize("cmd", ["train", "sft"])
def test_a_users_step_folder_is_not_taken_for_a_run_and_replaced(tmp_path, capsys, cmd):
    """A folder of the user's named step-0000001 passed as "what a run writes": the run's checkpoint of
    step 1 replaced it, files and all (and checkpoint rotation deleted older ones)."""
    out = tmp_path / "mine"
    (out / "step-0000001").mkdir(parents=True)
    (out / "step-0000001" / "notes.txt").write_text("mine\n", encoding="utf-8")
    if cmd == "train":
        argv = ["train", "--data", tiny_text(tmp_path), "--out", out, *TINY_MODEL]
    else:
        root = tiny_stage_base(tmp_path)
        argv = ["sft", "--init", root / "base", "--data", root / "sft.jsonl", "--out", out, "--max-iters", "1",
                "--no-progress"]
    code, _, err = run_main(argv, capsys)
    one_line_error(code, err, "already holds files a run does not write (step-0000001)")
    assert (out / "step-0000001" / "notes.txt").read_text(encoding="utf-8") == "mine\n"


def test_a_new_run_without_data_trains_on_left_data_only_if_it_is_what_was_asked(tmp_path, capsys):
    """`train --preset tiny --out RUN` (the byte tokenizer, Shakespeare) with RUN/data prepared by hand with
    the char tokenizer, or from another text, trained on that without a word: vocab 65, another corpus."""
    from zerollm.data import corpora
    shakespeare = str(corpora.path("shakespeare"))
    out = tmp_path / "run"
    assert run_main(["prepare", "--data", shakespeare, "--tokenizer", "char", "--out", out / "data"], capsys)[0] == 0
    small = ["--max-iters", "1", "--no-progress", "--sample-tokens", "0", "--eval-iters", "1"]
    code, _, err = run_main(["train", "--preset", "tiny", "--out", out, *small], capsys)
    one_line_error(code, err, "was prepared with the char tokenizer, but this run uses the byte tokenizer")
    code, _, err = run_main(["train", "--preset", "tang", "--out", out, *small], capsys)
    one_line_error(code, err, "holds data prepared from another text than --preset tang's corpus")
    assert not (out / "latest.json").exists()
    code, _, err = run_main(["train", "--preset", "tiny", "--tokenizer", "char", "--out", out, *small], capsys)
    assert code == 0 and (out / "latest.json").exists(), err           # what was asked for: reused
