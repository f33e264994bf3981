"""--resume as a hostile (or hurried) user meets it: a run resumed by the wrong command, with other data,
with a --max-iters it has already passed, or with LoRA flags it was not trained with. Each ends in one
line on stderr before anything in the run directory changes; the run's files stay byte for byte."""

import hashlib
import shutil

import pytest

from tiny_runs import TINY_MODEL, copy_run, run_main, tiny_run, tiny_stage_base, tiny_text

SMALL = ["--max-iters", "2", "--no-progress", "--checkpoint-interval", "1", "--eval-interval", "100"]


def one_line_error(code, err, fragment):
    errors = [line for line in err.splitlines() if ": error:" in line]
    assert code in (1, 2) and len(errors) == 1 and "Traceback" not in err and fragment in errors[0], err


def snapshot(folder):
    """{relative path: sha256} of every file under ``folder``."""
    return {str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(folder.rglob("*")) if p.is_file()}


@pytest.fixture(scope="module")
def sft_run(tmp_path_factory):
    root = tiny_stage_base(tmp_path_factory.mktemp("resume-base"))
    run = root / "sft-run"
    assert run_main(["sft", "--init", root / "base", "--data", root / "sft.jsonl", "--out", run, *SMALL],
                    _NoCapture())[0] == 0
    return run


class _NoCapture:
    def readouterr(self):
        return "", ""


def test_train_resume_refuses_a_run_another_command_wrote(sft_run, tmp_path, capsys):
    run = copy_run(sft_run, tmp_path)
    before = snapshot(run)
    text = tiny_text(tmp_path)
    code, _, err = run_main(["train", "--resume", "--out", run, "--data", text, "--no-progress"], capsys)
    one_line_error(code, err, "was not written by 'zerollm train'")
    assert "'sft'" in err and snapshot(run) == before


def test_train_resume_with_another_text_file_is_refused_and_the_data_kept(tmp_path_factory, tmp_path, capsys):
    run = copy_run(tiny_run(tmp_path_factory, "char"), tmp_path)
    before = snapshot(run)
    other = tmp_path / "other.txt"
    other.write_text("a different text altogether, with other letters: xyzq 0123\n" * 40, encoding="utf-8")
    for data in (other, "tang"):
        code, _, err = run_main(["train", "--resume", "--out", run, "--data", data, "--max-iters", "3",
                                 "--no-progress"], capsys)
        one_line_error(code, err, "is not the data the run began with")
        assert snapshot(run) == before


def test_train_resume_with_the_same_text_file_continues(tmp_path_factory, tmp_path, capsys):
    original = tiny_run(tmp_path_factory, "char")
    run = copy_run(original, tmp_path)
    data_before = snapshot(run / "data")
    same = tiny_text(original.parent)                 # the file the run was prepared from
    code, _, err = run_main(["train", "--resume", "--out", run, "--data", same, "--max-iters", "3",
                             "--no-progress"], capsys)
    assert code == 0 and "preparing" not in err, err
    assert snapshot(run / "data") == data_before     # not prepared again
    assert (run / "step-0000003").is_dir()


def test_train_resume_below_the_step_reached_is_refused(tmp_path_factory, tmp_path, capsys):
    run = copy_run(tiny_run(tmp_path_factory, "char"), tmp_path)
    before = snapshot(run)
    code, _, err = run_main(["train", "--resume", "--out", run, "--max-iters", "1", "--no-progress"], capsys)
    one_line_error(code, err, "is already at step 2; --max-iters 1 would end the run before where it stands")
    assert snapshot(run) == before


def test_sft_resume_below_the_step_reached_or_with_lora_flags_is_refused(sft_run, tmp_path, capsys):
    run = copy_run(sft_run, tmp_path)
    before = snapshot(run)
    for extra, fragment in ((["--max-iters", "1"], "is already at step 2"),
                            (["--lora-r", "4"], "was trained without LoRA; resume it without --lora-* flags")):
        code, _, err = run_main(["sft", "--resume", "--out", run, "--no-progress", *extra], capsys)
        one_line_error(code, err, fragment)
        assert snapshot(run) == before


def test_sft_resume_names_the_flags_it_ignores(sft_run, tmp_path, capsys):
    run = copy_run(sft_run, tmp_path)
    code, _, err = run_main(["sft", "--resume", "--out", run, "--no-progress", "--max-iters", "3", "--lr", "0.5"],
                            capsys)
    assert code == 0 and "note: on --resume the saved configuration is used; ignoring --lr" in err, err


def test_train_resume_of_a_run_on_a_prepared_folder_elsewhere_still_works(tmp_path, capsys):
    text = tiny_text(tmp_path)
    prepared = tmp_path / "prepared"
    assert run_main(["prepare", "--data", text, "--out", prepared, "--tokenizer", "char", "--block-size", "16"],
                    capsys)[0] == 0
    run = tmp_path / "run"
    assert run_main(["train", "--data", prepared, "--out", run, *TINY_MODEL], capsys)[0] == 0
    code, _, err = run_main(["train", "--resume", "--data", prepared, "--out", run, "--max-iters", "3",
                             "--no-progress"], capsys)
    assert code == 0 and (run / "step-0000003").is_dir() and not (run / "data").exists(), err
    shutil.rmtree(run)


@pytest.mark.parametrize("argv, named, not_named", [
    (["--tokenizer", "bpe", "--vocab-size", "30000", "--n-embd", "64", "--n-layer", "1"], "lower --vocab-size, --batch-size",
     "--n-embd"),
    (["--tokenizer", "char", "--n-embd", "2048", "--n-layer", "2"], "lower --n-embd or --n-layer", "--vocab-size"),
    (["--tokenizer", "char", "--n-embd", "2048", "--n-expert", "4"], "lower --n-embd, --n-layer or --n-expert",
     "--vocab-size"),
    (["--tokenizer", "byte", "--batch-size", "4096", "--n-embd", "16"], "--batch-size", "--vocab-size"),
])
def test_train_memory_advice_names_the_flags_that_drive_it(tmp_path, capsys, monkeypatch, argv, named, not_named):
    monkeypatch.setenv("ZEROLLM_MEMORY_LIMIT", "1M")
    code, _, err = run_main(["train", "--data", tiny_text(tmp_path), "--out", tmp_path / "run", *argv,
                             "--no-progress"], capsys)
    one_line_error(code, err, "needs about")
    assert named in err and not_named not in err, err


def test_train_resume_memory_advice_says_the_sizes_are_the_checkpoints(tmp_path_factory, tmp_path, capsys,
                                                                        monkeypatch):
    mine = copy_run(tiny_run(tmp_path_factory), tmp_path)
    monkeypatch.setenv("ZEROLLM_MEMORY_LIMIT", "40K")      # loading fits, a step does not
    code, _, err = run_main(["train", "--out", mine, "--resume", "--max-iters", "3", "--no-progress"], capsys)
    one_line_error(code, err, "needs about")
    assert "on --resume the checkpoint's --batch-size, --block-size, --n-embd and --n-layer are kept" in err, err


@pytest.mark.parametrize("damage, why, used", [
    (lambda run: shutil.rmtree(run / "step-0000002"), "latest.json names step-0000002, which is missing", 1),
    (lambda run: (run / "step-0000002" / "rng.json").unlink(), "latest.json names step-0000002, which is incomplete",
     1),
    (lambda run: (run / "latest.json").write_text("{"), "latest.json is unreadable", 2),
])
@pytest.mark.parametrize("command", ["sample", "train"])
def test_a_stale_latest_json_is_told_in_one_note(tmp_path_factory, tmp_path, capsys, damage, why, used, command):
    """latest.json naming a step that is gone falls back to the newest complete step, and says so once."""
    mine = copy_run(tiny_run(tmp_path_factory), tmp_path)
    damage(mine)
    argv = {"sample": ["sample", "--ckpt", mine, "--max-new-tokens", "2", "--seed", "0"],
            "train": ["train", "--out", mine, "--resume", "--max-iters", "3", "--no-progress"]}[command]
    code, _, err = run_main(argv, capsys)
    notes = [line for line in err.splitlines() if line.startswith("note:")]
    assert code == 0, err
    assert notes == [f"note: {mine}/{why}; using step-000000{used}, the newest complete checkpoint there"], err


def test_train_resume_names_the_preset_and_flags_it_ignores(tmp_path_factory, tmp_path, capsys):
    mine = copy_run(tiny_run(tmp_path_factory), tmp_path)
    code, _, err = run_main(["train", "--out", mine, "--resume", "--preset", "tang", "--lr", "0.5", "--max-iters", "3",
                             "--no-progress"], capsys)
    notes = [line for line in err.splitlines() if line.startswith("note:")]
    assert code == 0 and notes == ["note: on --resume the saved configuration is used; ignoring --preset tang, --lr"]
