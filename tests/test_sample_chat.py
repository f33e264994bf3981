"""``zerollm sample`` on a chat model (issue 22): "the context is full" only when a reply really reached the
end of the context, ``--prompt -`` reads stdin, ``--system TEXT`` is the system turn, defaults in --help."""

import io
import json

import pytest

from tests.tiny_runs import run_main, tiny_run
from zerollm.data import chat


@pytest.fixture(scope="module")
def chat_run(tmp_path_factory):
    """A one-step SFT run of the tiny base: a checkpoint whose tokenizer has the chat template."""
    from zerollm.cli.entry import main
    base = tiny_run(tmp_path_factory, "char")
    folder = tmp_path_factory.mktemp("chat")
    data = folder / "sft.jsonl"
    data.write_text(json.dumps({"prompt": "To be", "completion": " or not"}) + "\n")
    assert main(["sft", "--init", str(base), "--data", str(data), "--out", str(folder / "run"),
                 "--max-iters", "1", "--batch-size", "1", "--no-progress"]) == 0
    return folder / "run"


def rigged(monkeypatch, favourite):
    """Load models so that decoding always picks the token ``favourite(tokenizer)`` (its logit raised by
    100); records the prompts given to the scheduler."""
    from zerollm.cli.commands import sample as command
    load, stream, prompts = command.load_source, command.Scheduler.stream, []

    def load_rigged(args):
        model, tok = load(args)
        forward, best = model.forward, favourite(tok)

        def forward_rigged(*a, **kw):
            logits, rest = forward(*a, **kw)
            logits[..., best] += 100.0                     # (B, T, V): the favourite wins every time
            return logits, rest

        model.forward = forward_rigged
        return model, tok

    def stream_spy(scheduler, reqs):
        prompts.extend(list(r.prompt) for r in reqs)
        return stream(scheduler, reqs)

    monkeypatch.setattr(command, "load_source", load_rigged)
    monkeypatch.setattr(command.Scheduler, "stream", stream_spy)
    return prompts


def test_a_short_reply_gives_no_context_warning(chat_run, monkeypatch, capsys):
    rigged(monkeypatch, chat.end_id)                    # the reply ends at once
    code, out, err = run_main(["sample", "--ckpt", chat_run, "--prompt", "To be", "--temperature", "0"], capsys)
    assert code == 0 and "context is full" not in err, err


def test_a_reply_that_reaches_the_end_of_the_context_is_warned_after_it(chat_run, monkeypatch, capsys):
    rigged(monkeypatch, lambda tok: tok.encode("e")[0])  # never ends: 200 tokens > the 16 of the context
    code, out, err = run_main(["sample", "--ckpt", chat_run, "--prompt", "To be", "--temperature", "0"], capsys)
    assert code == 0 and err.count("the context is full") == 1, err
    assert out.strip().startswith("eeee")


@pytest.mark.parametrize("chat_prompt", [True, False], ids=["chat", "plain"])
def test_a_prompt_longer_than_the_context_is_one_warning_line(chat_run, monkeypatch, capsys, chat_prompt):
    rigged(monkeypatch, lambda tok: tok.encode("e")[0])   # never ends
    argv = ["sample", "--ckpt", chat_run, "--prompt", "To be, or not to be " * 4, "--temperature", "0",
            "--max-new-tokens", "5", *([] if chat_prompt else ["--no-chat"])]
    code, out, err = run_main(argv, capsys)
    warned = [line for line in err.splitlines() if "warning" in line]
    assert code == 0 and len(warned) == 1, err
    assert "is longer than the context (16); keeping its last 16 tokens, so each further token recomputes" in warned[0]


def test_prompt_from_stdin_and_a_system_turn(chat_run, monkeypatch, capsys):
    prompts = rigged(monkeypatch, chat.end_id)
    monkeypatch.setattr("sys.stdin", io.StringIO("To be"))
    code, _, err = run_main(["sample", "--ckpt", chat_run, "--prompt", "-", "--system", "Be brief",
                             "--temperature", "0"], capsys)
    assert code == 0, err
    from zerollm.tokenizers import load_tokenizer
    tok = load_tokenizer(chat_run / "tokenizer.json")
    expected = chat.encode_prompt(tok, [{"role": "system", "content": "Be brief"},
                                        {"role": "user", "content": "To be"}])
    assert prompts == [expected]


def test_stdin_prompt_of_a_plain_model_is_continued(tmp_path_factory, monkeypatch, capsys):
    monkeypatch.setattr("sys.stdin", io.StringIO("ROMEO:"))
    code, out, err = run_main(["sample", "--ckpt", tiny_run(tmp_path_factory, "char"), "--prompt", "-",
                               "--max-new-tokens", "3", "--seed", "0"], capsys)
    assert code == 0 and out.startswith("ROMEO:"), (out, err)
    code, _, err = run_main(["sample", "--ckpt", tiny_run(tmp_path_factory, "char"), "--system", "x"], capsys)
    assert code == 1 and "--system needs a chat model" in err, err


def test_sample_help_shows_the_defaults(capsys):
    code, out, _ = run_main(["sample", "--help"], capsys)
    text = " ".join(out.split())
    assert "(default 200)" in text and "(default 1)" in text and "'-' reads it from stdin" in text
    assert "--system TEXT" in text


@pytest.mark.parametrize("stream, words", [("stdin", "standard input is closed (the command was started with 0<&-)"),
                                           ("stdout", "standard output is closed (the command was started with >&-)")])
def test_a_closed_standard_stream_is_one_line_not_a_traceback(stream, words, chat_run, tmp_path_factory,
                                                               monkeypatch, capsys):
    """``zerollm sample --prompt - 0<&-``, ``zerollm chat >&-``: Python starts with that stream set to None, and
    the first read or print used to end in an AttributeError (or input()'s "lost sys.stdin")."""
    plain = str(tiny_run(tmp_path_factory, "char"))
    for argv in (["sample", "--ckpt", plain, "--prompt", "-", "--max-new-tokens", "2"],
                 ["chat", "--ckpt", str(chat_run), "--max-new-tokens", "2"]):
        monkeypatch.setattr("sys.stdin", io.StringIO("To be\n"))       # a prompt, for the closed-stdout case
        monkeypatch.setattr(f"sys.{stream}", None)
        code, _, err = run_main(argv, capsys)
        lines = err.strip().splitlines()
        assert code == 1 and words in lines[-1] and "Traceback" not in err, err


@pytest.mark.parametrize("command", ["chat", "serve"])
def test_a_missing_chat_model_points_at_sft_not_train(capsys, tmp_path, command):
    # `zerollm chat --ckpt runs/tang-sft` before the SFT run exists used to say "train first with zerollm train"
    from zerollm.cli import main
    code = main([command, "--ckpt", str(tmp_path / "tang-sft")])
    err = capsys.readouterr().err
    assert code == 1 and len(err.strip().splitlines()) == 1, err
    assert "checkpoint directory not found" in err and "zerollm sft --init" in err


def test_a_missing_base_model_still_points_at_train(capsys, tmp_path):
    from zerollm.cli import main
    code = main(["sample", "--ckpt", str(tmp_path / "shakespeare")])
    err = capsys.readouterr().err
    assert code == 1 and "train first with `zerollm train`" in err and "sft" not in err
