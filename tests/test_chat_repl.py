"""`zerollm chat` driven through a pseudo-terminal: turns, /reset, /save, Ctrl-C, context overflow."""

import contextlib
import json
import os
import pty
import select
import signal
import subprocess
import sys
import time

import numpy as np
import pytest

from serve_helpers import ROOT, bare_env, tiny_chat_model
from zerollm.data import chat
from zerollm.generation.display import StreamDecoder
from zerollm.interop.hf import load, load_tokenizer_dir
from zerollm.generation.decode import generate
from zerollm.generation.sample import Sampling


class Terminal:
    """A command on a pty: send lines and keys, wait for text."""

    def __init__(self, argv):
        self.pid, self.fd = pty.fork()
        if self.pid == 0:                          # the child: the command
            # as a shell starts it: Ctrl-C neither ignored nor blocked (a fork inherits both from this
            # test process, where an earlier test or library may have changed them)
            signal.signal(signal.SIGINT, signal.SIG_DFL)
            signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})
            os.environ["PYTHONPATH"] = str(ROOT)
            os.execv(sys.executable, [sys.executable, "-m", "zerollm", *argv])
        self.seen, self.status = "", None

    def expect(self, text, timeout=30):
        start = time.monotonic()
        while text not in self.seen:
            assert time.monotonic() - start < timeout, f"never saw {text!r}; saw {self.seen[-500:]!r}"
            ready, _, _ = select.select([self.fd], [], [], 0.1)
            if ready:
                try:
                    self.seen += os.read(self.fd, 4096).decode("utf-8", "replace")
                except OSError:
                    break
        at = self.seen.index(text) + len(text)
        before, self.seen = self.seen[:at], self.seen[at:]
        return before

    def send(self, text):
        os.write(self.fd, text.encode())

    def close(self):
        if self.status is None:
            os.kill(self.pid, signal.SIGKILL)
            os.waitpid(self.pid, 0)
        os.close(self.fd)

    def wait(self, timeout=20):
        start = time.monotonic()
        while time.monotonic() - start < timeout:
            pid, status = os.waitpid(self.pid, os.WNOHANG)
            if pid:
                self.status = os.waitstatus_to_exitcode(status)
                return self.status
            time.sleep(0.05)
        raise AssertionError("the chat did not exit")


@contextlib.contextmanager
def session(*argv):
    """`zerollm chat ARGV` on a pty, at its first prompt; after the block: /exit, which must exit 0."""
    term = Terminal(["chat", *map(str, argv), "--threads", "1"])
    try:
        term.expect("> ")
        yield term
        term.send("/exit\r")
        assert term.wait() == 0
    finally:
        term.close()


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    folder = tmp_path_factory.mktemp("chat")
    return (tiny_chat_model(folder),
            tiny_chat_model(folder, block_size=4096, n_embd=160, n_layer=4, name="base", chat_tokens=False))


def _greedy(folder, messages, n):
    model, tok = load(str(folder)), load_tokenizer_dir(str(folder))
    ids, stream, out = chat.encode_prompt(tok, messages), StreamDecoder(tok), ""
    for t in generate(model, np.array([ids]), n, Sampling(temperature=0)):
        if int(t[0]) == chat.end_id(tok):
            break
        out += stream.push(t[0])
    return out + stream.flush()


def test_two_turns_reset_and_save(models, tmp_path):
    model, _ = models
    with session("--hf", model, "--temperature", 0, "--max-new-tokens", 12) as term:
        term.send("hello\r")
        first = term.expect("\r\n> ").split("hello\r\n", 1)[1][:-len("\r\n> ")]
        a1 = _greedy(model, [{"role": "user", "content": "hello"}], 12)
        assert first.replace("\r\n", "\n") == a1
        term.send("again\r")
        second = term.expect("\r\n> ").split("again\r\n", 1)[1][:-len("\r\n> ")]
        history = [{"role": "user", "content": "hello"}, {"role": "assistant", "content": a1},
                   {"role": "user", "content": "again"}]
        assert second.replace("\r\n", "\n") == _greedy(model, history, 12)
        saved = tmp_path / "talk.jsonl"
        term.send(f"/save {saved}\r")
        term.expect("saved 2 turns")
        term.expect("> ")
        assert [m["role"] for m in json.loads(saved.read_text())["messages"]] == ["user", "assistant"] * 2
        term.send("/reset\r")
        term.expect("cleared")
        term.expect("> ")
        term.send("hello\r")
        assert term.expect("\r\n> ").split("hello\r\n", 1)[1][:-len("\r\n> ")].replace("\r\n", "\n") == a1


def test_help_and_a_save_without_a_file_name(models):
    model, _ = models
    with session("--hf", model, "--max-new-tokens", 4) as term:
        term.send("/help\r")
        assert "unknown" not in term.expect("/save FILE")
        term.expect("> ")
        term.send("/save\r")
        term.expect("/save needs a file name")
        term.expect("> ")


def test_ctrl_c_stops_the_answer_not_the_session(models):
    _, base = models
    with session("--hf", base, "--raw", "--temperature", 0, "--max-new-tokens", 2000) as term:
        term.send("go\r")
        term.expect("go\r\n")
        start = time.monotonic()
        while not term.seen:                       # wait for the answer's first bytes (2000 tokens take seconds)
            assert time.monotonic() - start < 30, "the answer never began"
            if select.select([term.fd], [], [], 0.05)[0]:
                term.seen += os.read(term.fd, 64).decode("utf-8", "replace")
        term.send("\x03")                          # Ctrl-C: SIGINT from the terminal, mid-answer
        term.expect("[stopped]")
        term.expect("> ")
        end = time.monotonic() + 1.0                # one prompt, not a second empty one after it
        while time.monotonic() < end:
            if select.select([term.fd], [], [], 0.05)[0]:
                term.seen += os.read(term.fd, 4096).decode("utf-8", "replace")
        assert "> " not in term.seen, repr(term.seen)


def test_overflow_drops_the_oldest_turn_with_a_note(models):
    model, _ = models
    with session("--hf", model, "--temperature", 0, "--max-new-tokens", 30) as term:
        for i in range(3):
            term.send(f"message number {i} is this long\r")
            term.expect(f"is this long\r\n")
            term.expect("> ")
        term.send("one more\r")
        before = term.expect("> ")
        assert "dropped the oldest" in before


def test_a_base_model_is_refused_without_raw(models):
    _, base = models
    out = subprocess.run([sys.executable, "-m", "zerollm", "chat", "--hf", str(base)], input="", capture_output=True,
                         text=True, env=bare_env(), timeout=60)
    assert out.returncode == 1 and out.stderr.count("\n") == 1
    assert "zerollm sft" in out.stderr and "--raw" in out.stderr


# ----------------------------------------------------------------------------
# the REPL in this process (zerollm.serve.repl.repl): /save with a name or a text no file can hold

def _run_repl(folder, lines):
    """Feed ``lines`` to the REPL of the model in ``folder`` (greedy, 3-token answers) -> what it wrote."""
    import io
    from zerollm.serve.repl import Answers, Conversation, repl
    model, tok = load(str(folder)), load_tokenizer_dir(str(folder))
    conv, out, feed = Conversation(tok, model.config.block_size), io.StringIO(), iter(lines)

    def read(prompt):
        try:
            return next(feed)
        except StopIteration:
            raise EOFError from None

    assert repl(model, tok, conv, Answers(Sampling(0), 3, np.random.default_rng(0)), read=read,
                out=out) == 0
    return out.getvalue()


def test_save_refuses_names_no_file_can_have_in_one_line(models, tmp_path):
    long_name = tmp_path / ("x" * 300 + ".jsonl")
    said = _run_repl(models[0], ["hello", f"/save {tmp_path}/a\0b.jsonl", f"/save {long_name}",
                                 f"/save {tmp_path}/ok.jsonl"])
    assert "a file name cannot hold a NUL character" in said
    assert f"cannot write {long_name}: File name too long; give another name" in said and "[Errno" not in said
    assert json.loads((tmp_path / "ok.jsonl").read_text())["messages"][0] == {"role": "user", "content": "hello"}


def test_bytes_a_terminal_sent_that_are_not_utf8_are_read_as_replacement_characters(models, tmp_path):
    broken = b"caf\xe9 ok".decode("utf-8", "surrogateescape")     # what input() gives for Latin-1 bytes
    said = _run_repl(models[0], [broken, f"/system be \udcff brief", f"/save {tmp_path}/talk.jsonl"])
    assert "are read as \ufffd" in said and "(saved 1 turn to " in said     # one turn, not "1 turns"
    messages = json.loads((tmp_path / "talk.jsonl").read_text(encoding="utf-8"))["messages"]
    assert messages[0] == {"role": "system", "content": "be \ufffd brief"}
    assert messages[1] == {"role": "user", "content": "caf\ufffd ok"}


def test_a_system_message_too_long_for_the_context_is_named_as_the_cause(models):
    """Every line used to be told "this message alone leaves no room ...; write a shorter one", though the
    two-character message was not the cause: the system message was. /system with such a text is refused
    and the old one kept."""
    from zerollm.io.errors import ZeroLLMError
    from zerollm.serve.repl import Conversation
    tok = load_tokenizer_dir(str(models[0]))
    block = load(str(models[0])).config.block_size
    conv = Conversation(tok, block, system="x" * (2 * block))
    with pytest.raises(ZeroLLMError, match="the system message alone takes"):
        conv.prompt("hi", 3)
    said = _run_repl(models[0], ["/system short", "/system " + "y" * (2 * block), "hi", "/save"])
    assert "(system message: 'short')" in said
    assert "the system message alone takes" in said and "the system message is unchanged" in said
    assert "this message alone" not in said          # "hi" was answered, under the short system message


def test_chat_refuses_a_system_flag_that_fills_the_context_at_once(models):
    model, _ = models
    out = subprocess.run([sys.executable, "-m", "zerollm", "chat", "--hf", str(model), "--system", "z" * 5000],
                         input="", capture_output=True, text=True, env=bare_env(), timeout=60)
    assert out.returncode == 1 and out.stderr.count("\n") == 1, out.stderr
    assert "the system message alone takes" in out.stderr and "give a shorter --system" in out.stderr


def test_save_never_writes_inside_a_model_or_over_a_special_file(models, tmp_path):
    """/save follows the one output rule: nothing is written inside a run, checkpoint or model directory
    (it would become part of what is loaded), and a pipe or a folder is never written into."""
    os.mkfifo(tmp_path / "pipe.jsonl")
    (tmp_path / "folder.jsonl").mkdir()
    inside = [os.path.join(models[0], "talk.jsonl")]
    said = _run_repl(models[0], ["hello", f"/save {inside[0]}", f"/save {tmp_path}/pipe.jsonl",
                                 f"/save {tmp_path}/folder.jsonl", f"/save {tmp_path}/ok.jsonl"])
    assert f"/save {inside[0]} lies inside" in said and not os.path.exists(inside[0])
    assert said.count("exists and is not a regular file") == 2
    assert (tmp_path / "folder.jsonl").is_dir() and not any((tmp_path / "folder.jsonl").iterdir())
    assert json.loads((tmp_path / "ok.jsonl").read_text())["messages"][0] == {"role": "user", "content": "hello"}
