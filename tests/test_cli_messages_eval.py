"""The one-line messages of eval, tasks, heads, explain and chat on hostile input (a probe's findings)."""

import io
import json

import pytest

from tiny_runs import run_main, tiny_run

PYTHON_ADVICE = ("with_chars", "unk='<unk>'", "allowed_special")


@pytest.fixture(scope="module")
def char_run(tmp_path_factory):
    return tiny_run(tmp_path_factory, "char")        # trained on the start of tiny Shakespeare: no 藏, no 春


def _acrostic_prompts(folder):
    path = folder / "prompts.jsonl"
    path.write_text(json.dumps({"prompt": "藏头诗：春夏秋冬"}, ensure_ascii=False) + "\n", encoding="utf-8")
    return path


@pytest.mark.parametrize("argv, where", [
    (["eval", "--ckpt", "RUN", "--data", "odd.txt"], "--data odd.txt holds 2 characters"),
    (["tasks", "eval", "acrostic", "--ckpt", "RUN", "--data", "prompts.jsonl"],
     "a prompt of --data prompts.jsonl holds"),
    (["heads", "--ckpt", "RUN", "--text", "ROMEO 藏春", "--out", "h.png"], "--text holds 2 characters"),
    (["explain", "--ckpt", "RUN", "--text", "ROMEO 藏春", "--out", "p.html"], "--text holds 2 characters"),
    (["sample", "--ckpt", "RUN", "--prompt", "ROMEO 藏春", "--max-new-tokens", "2"], "--prompt holds 2 characters"),
])
def test_unknown_characters_get_command_line_advice(char_run, tmp_path, monkeypatch, capsys, argv, where):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "odd.txt").write_text("ROMEO: 藏 and 春\n" * 20, encoding="utf-8")
    _acrostic_prompts(tmp_path)
    code, out, err = run_main([str(char_run) if a == "RUN" else a for a in argv], capsys)
    command = " ".join(argv[:2] if argv[0] == "tasks" else argv[:1])
    assert code == 1 and err.count("\n") == 1 and err.startswith(f"zerollm {command}: error: {where}")
    assert "'春', '藏'" in err or "'春'" in err           # names the characters it lacks
    assert "--tokenizer byte or bpe" in err and not any(a in err for a in PYTHON_ADVICE)
    assert not (tmp_path / "h.png").exists() and not (tmp_path / "p.html").exists()


def test_more_unknown_characters_than_shown_are_counted():
    from zerollm.tokenizers.char import CharTokenizer, UnknownCharacters
    with pytest.raises(UnknownCharacters) as caught:
        CharTokenizer.train("ab").with_special_tokens(["<|end|>"]).encode("a<|end|>vwxyz")
    line = caught.value.command_line("--prompt")
    assert line.startswith("--prompt holds 11 characters this model does not know: ") and "and 6 more" in line
    assert "'<|end|>'" in line and not any(a in line for a in PYTHON_ADVICE)
    assert "with_chars" in str(caught.value)            # a Python caller still gets the Python advice


def test_chat_names_the_message_or_the_system_message(char_run, monkeypatch, capsys):
    monkeypatch.setattr("sys.stdin", io.StringIO("藏\n/system 春\n"))
    code, out, err = run_main(["chat", "--ckpt", char_run, "--raw", "--max-new-tokens", "2"], capsys)
    assert code == 0
    lines = [line for line in out.splitlines() if "does not know" in line]
    assert len(lines) == 2 and "your message holds 1 character this model does not know: '藏'" in lines[0]
    assert "the system message holds 1 character" in lines[1] and "'春'" in lines[1]
    assert "the system message is unchanged" in lines[1] and not any(a in out for a in PYTHON_ADVICE)
    code, out, err = run_main(["chat", "--ckpt", char_run, "--raw", "--system", "春"], capsys)
    assert code == 1 and err.count("\n") == 1
    assert err.startswith("zerollm chat: error: the system message holds 1 character") and "with_chars" not in err


# ----------------------------------------------------------------------------
# rerunning a command over the file it wrote earlier: the refusal is true, --force replaces it

def _rerun_refused(argv, target, capsys):
    """``argv`` writes ``target``; run again it is refused without a word that is false, the file untouched;
    with --force it is replaced."""
    code, _, err = run_main(argv, capsys)
    assert code == 0 and target.is_file(), err
    before = target.read_bytes()
    code, out, err = run_main(argv, capsys)
    assert code == 1 and err.count("\n") == 1 and "did not create" not in err
    assert f"{target} already exists; pass --force to replace it" in err and target.read_bytes() == before
    assert run_main([*argv, "--force"], capsys)[0] == 0 and target.is_file()


def test_tasks_make_rerun(tmp_path, capsys):
    out = tmp_path / "sums.jsonl"
    _rerun_refused(["tasks", "make", "addition", "--out", out, "--n", "3"], out, capsys)


def test_tasks_eval_answers_rerun(tmp_path_factory, tmp_path, capsys):
    byte_run = tiny_run(tmp_path_factory, "byte")
    data = tmp_path / "p.jsonl"
    data.write_text(json.dumps({"prompt": "1+1=", "answer": "2"}) + "\n", encoding="utf-8")
    answers = tmp_path / "answers.jsonl"
    _rerun_refused(["tasks", "eval", "addition", "--ckpt", byte_run, "--data", data, "--answers", answers,
                    "--format", "plain", "--max-new-tokens", "2"], answers, capsys)


def test_heads_rerun(tmp_path, capsys):
    out = tmp_path / "heads.png"
    _rerun_refused(["heads", "--random", "--seq", "3", "--n-layer", "1", "--n-head", "1", "--n-embd", "8",
                    "--out", out], out, capsys)
    code, out, _ = run_main(["heads", "--help"], capsys)
    assert "did not create" not in out        # --force replaces any existing --out, so its help says so


# ----------------------------------------------------------------------------
# tasks make lm-eval

def _lm_eval(out, capsys, *more):
    return run_main(["tasks", "make", "lm-eval", "--out", out, "--n", "3", *more], capsys)


def test_lm_eval_folder_edited_by_hand_is_named_as_the_cause(tmp_path, capsys):
    out = tmp_path / "lm"
    assert _lm_eval(out, capsys)[0] == 0
    yaml = out / "zerollm_addition.yaml"
    yaml.write_text(yaml.read_text().replace("max_gen_toks: 48", "max_gen_toks: 99"))
    code, _, err = _lm_eval(out, capsys)
    assert code == 1 and err.count("\n") == 1 and "another --n" not in err
    assert "zerollm_addition.yaml changed since this command wrote it" in err and "--force" in err
    assert "max_gen_toks: 99" in yaml.read_text()                                   # the edit is kept
    code, _, err = _lm_eval(out, capsys, "--seed", "1")      # other settings, and the edit: both are said
    assert code == 1 and "written with --n 3 --seed 0 and zerollm_addition.yaml changed since" in err
    assert "max_gen_toks: 99" in yaml.read_text()
    assert _lm_eval(out, capsys, "--force")[0] == 0 and "max_gen_toks: 48" in yaml.read_text()
    code, _, err = run_main(["tasks", "make", "lm-eval", "--out", out, "--n", "4"], capsys)
    assert code == 1 and "written with --n 3 --seed 0; pass --force to replace them with --n 4" in err


def test_lm_eval_folder_moved_or_missing_a_file_is_written_again_without_force(tmp_path, capsys):
    assert _lm_eval(tmp_path / "lm", capsys)[0] == 0
    moved = tmp_path / "moved"
    (tmp_path / "lm").rename(moved)
    (moved / "zerollm_acrostic.jsonl").unlink()
    code, out, err = _lm_eval(moved, capsys)
    assert code == 0, err
    assert (moved / "zerollm_acrostic.jsonl").is_file()
    assert str(moved / "zerollm_addition.jsonl") in (moved / "zerollm_addition.yaml").read_text()


@pytest.mark.parametrize("flags, fragment", [
    (["--split", "train"], "heldout data only"),
    (["--format", "text"], "not plain text: leave out --format text"),
])
def test_lm_eval_refuses_what_it_cannot_honour(tmp_path, capsys, flags, fragment):
    code, _, err = _lm_eval(tmp_path / "lm", capsys, *flags)
    assert code == 1 and err.count("\n") == 1 and fragment in err and not (tmp_path / "lm").exists()
    assert _lm_eval(tmp_path / "lm", capsys, "--split", "heldout", "--format", "jsonl")[0] == 0


def test_tasks_list_names_lm_eval_and_tasks_eval_points_at_lm_eval(tmp_path, capsys):
    code, out, _ = run_main(["tasks", "list"], capsys)
    assert code == 0 and "\nlm-eval " in out and "lm_eval --model zerollm" in " ".join(out.split())
    code, _, err = run_main(["tasks", "eval", "lm-eval", "--ckpt", tmp_path, "--data", tmp_path / "x"], capsys)
    assert code == 1 and err.count("\n") == 1 and "tasks make lm-eval" in err and "lm_eval --model zerollm" in err


# ----------------------------------------------------------------------------
# heads --ckpt with the random GPT's flags

@pytest.mark.parametrize("flags, named", [
    (["--n-layer", "3"], "--n-layer is for the random GPT"),
    (["--n-head", "1", "--n-embd", "8", "--bidirectional"], "--n-head, --n-embd and --bidirectional are for"),
    (["--seed", "5"], "--seed is for the random GPT"),
])
def test_heads_refuses_the_random_gpts_flags_with_a_checkpoint(char_run, tmp_path, capsys, flags, named):
    out = tmp_path / "h.png"
    code, _, err = run_main(["heads", "--ckpt", char_run, "--text", "ROMEO", "--out", out, *flags], capsys)
    assert code == 1 and err.count("\n") == 1 and err.startswith(f"zerollm heads: error: {named}")
    assert "leave" in err and not out.exists()
    assert run_main(["heads", "--ckpt", char_run, "--text", "ROMEO", "--out", out], capsys)[0] == 0
    code, text, _ = run_main(["heads", "--random", "--seq", "3", "--n-layer", "3", "--n-head", "1", "--n-embd", "8",
                              "--out", tmp_path / "r.png"], capsys)
    assert code == 0 and "3 layers x 1 heads" in text                               # the random GPT takes them


def test_heads_reads_a_model_directory_as_its_run(char_run, tmp_path, capsys):
    """A zerollm model directory (a Hugging Face export converted back) is a --ckpt for heads, as for sample and
    chat: the same picture as its run's, and no "incomplete checkpoint" error."""
    folder = tmp_path / "model"
    assert run_main(["convert", "--from", char_run, "--to", tmp_path / "hf"], capsys)[0] == 0
    assert run_main(["convert", "--from", tmp_path / "hf", "--to", folder], capsys)[0] == 0
    pictures = {}
    for name, ckpt in (("run", char_run), ("dir", folder)):
        pictures[name] = tmp_path / f"{name}.png"
        code, out, err = run_main(["heads", "--ckpt", ckpt, "--text", "ROMEO", "--out", pictures[name], "--lang", "en"],
                                  capsys)
        assert code == 0, err
    assert f"This is a trained model ({folder}):" in out               # no step: a model directory has none
    assert pictures["run"].read_bytes() == pictures["dir"].read_bytes()
