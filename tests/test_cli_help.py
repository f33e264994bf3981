"""The command line says what it does (issue 22): whole descriptions, each default once, a stage's epilog
naming only its own flags, the --reward tasks the same in the help and the error, "did you mean" for a
mistyped flag, and a download error that points at the corpus that ships."""

import re
import urllib.error
import urllib.request

import pytest

from tests.tiny_runs import run_main


def _help(command, capsys):
    code, out, _ = run_main([command, "--help"], capsys)
    assert code == 0
    return " ".join(out.split())


def test_tasks_list_keeps_whole_sentences(capsys):
    from zerollm.align.tasks import TASKS
    code, out, _ = run_main(["tasks", "list"], capsys)
    assert code == 0
    text = " ".join(out.split())
    for name, module in TASKS.items():
        first = " ".join(module.__doc__.strip().split("\n\n")[0].split())
        assert f"{name} {first}" in text, (name, out)


@pytest.mark.parametrize("command", ["grpo", "ppo", "dpo", "reward", "sft"])
def test_stage_help_says_each_default_once_and_only_its_flags(command, capsys):
    text = _help(command, capsys)
    assert not re.search(r"\(default: [^)]*\) \(default", text), text     # "(default: …) (default None)"
    options, _, epilog = text.partition("Defaults of this stage")
    for flag in re.findall(r"--[a-z-]+", epilog):
        assert flag in options, f"{command}: the epilog gives a default for {flag}, which is not its flag"


def test_reward_tasks_are_the_same_in_help_and_error(capsys):
    from zerollm.io.errors import ZeroLLMError
    from zerollm.align.rl.rewards import sources_from_flags
    text = _help("grpo", capsys)
    listed = text[text.index("a task (") + len("a task ("):].split(")")[0]
    with pytest.raises(ZeroLLMError) as err:
        sources_from_flags([], None, None, None, None)
    assert f"a task: {listed};" in str(err.value), (listed, str(err.value))
    with pytest.raises(ZeroLLMError, match="the reward tasks are " + listed):
        sources_from_flags(["poetry"], None, None, None, None)


@pytest.mark.parametrize("argv, guess", [
    (["sample", "--temprature", "1"], "--temperature"),
    (["train", "--max-itres", "3"], "--max-iters"),
    (["grpo", "--rewrd", "acrostic"], "--reward"),
    (["sample", "--temp", "0.5"], "--temperature"),          # an abbreviation is not taken, but named
    (["sample", "--top", "3"], "--top-k or --top-p"),
])
def test_a_mistyped_flag_gets_did_you_mean(argv, guess, capsys):
    code, _, err = run_main(argv, capsys)
    assert code == 2 and f"did you mean {guess}?" in err and f"zerollm {argv[0]} --help" in err, err
    assert len(err.strip().splitlines()) == 1


def test_sfts_init_given_to_train_is_not_taken_for_init_std(capsys):
    code, _, err = run_main(["train", "--init", "runs/base", "--out", "x"], capsys)
    assert code == 2 and "--init-std" not in err and "zerollm sft --init RUN" in err and "--resume" in err, err
    assert len(err.strip().splitlines()) == 1


def test_a_subcommands_flag_is_checked_by_the_subcommand(capsys):
    code, _, err = run_main(["tasks", "eval", "acrostic", "--ckpt", "x", "--data", "y", "--tempe", "1"], capsys)
    assert code == 2 and "did you mean --temperature?" in err and "zerollm tasks eval --help" in err, err
    code, _, err = run_main(["tasks", "eval", "--task", "acrostic", "--ckpt", "x", "--data", "y"], capsys)
    assert code == 2 and "zerollm tasks eval acrostic --ckpt RUN" in err and len(err.strip().splitlines()) == 1, err


def test_a_failed_download_points_at_the_shipped_corpus(tmp_path, monkeypatch, capsys):
    def offline(*args, **kwargs):
        raise urllib.error.URLError("no network")
    monkeypatch.setattr(urllib.request, "urlopen", offline)
    code, _, err = run_main(["download", "shakespeare", "--dir", tmp_path, "--force"], capsys)
    assert code == 1 and "--data shakespeare" in err, err


def test_an_os_error_names_the_path_without_errno_noise(tmp_path, capsys):
    (tmp_path / "afile").write_text("x")
    code, _, err = run_main(["train", "--data", "shakespeare", "--out", tmp_path / "afile" / "run"], capsys)
    assert code == 1 and f"{tmp_path / 'afile' / 'run'}: Not a directory" in err and "[Errno" not in err, err
    assert len(err.strip().splitlines()) == 1


@pytest.mark.parametrize("argv, guess", [
    (["sampel"], "'sample'"), (["trian"], "'train'"), (["xyzzy"], None), (["chta"], "'chat'"),
    (["train", "--preset", "shakespear"], "'shakespeare-cpu'"), (["train", "--norm", "rmsnrom"], "'rmsnorm'"),
])
def test_a_mistyped_choice_gets_a_did_you_mean(capsys, argv, guess):
    from zerollm.cli import main
    with pytest.raises(SystemExit) as stop:
        main(argv)
    err = capsys.readouterr().err
    assert stop.value.code == 2 and len(err.strip().splitlines()) == 1 and "invalid choice" in err, err
    if guess is None:
        assert "did you mean" not in err
    else:
        assert f"(did you mean {guess}?)" in err
