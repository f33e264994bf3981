"""Text that is not text: bytes of the command line that are not UTF-8 arrive in Python as lone
surrogates ($'a\\xff' becomes "a\\udcff", PEP 383). Byte-level tokenizers (byte, BPE) encode them as the
bytes they stand for; the char tokenizer says which byte it cannot encode; nothing crashes."""

import os
import subprocess
import sys

import pytest

from tiny_runs import run_main, tiny_run
from zerollm.io.errors import ZeroLLMError
from zerollm.tokenizers import BPETokenizer, ByteTokenizer, CharTokenizer

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))



@pytest.mark.parametrize("tok", [ByteTokenizer(), BPETokenizer.train("a b c a b c", 262)], ids=["byte", "bpe"])
def test_byte_level_tokenizers_encode_escaped_bytes_as_themselves(tok):
    assert tok.decode(tok.encode("a\udcff\udcfeb")) == "a\ufffd\ufffdb"
    assert bytes(ByteTokenizer().encode("\udce4\udcbd\udca0")).decode("utf-8") == "你"   # escaped UTF-8 is UTF-8


@pytest.mark.parametrize("tok", [ByteTokenizer(), BPETokenizer.train("a b c a b c", 262),
                                 CharTokenizer.train("abc")], ids=["byte", "bpe", "char"])
def test_a_surrogate_that_is_no_byte_is_a_clear_error(tok):
    with pytest.raises(ZeroLLMError, match="surrogate|not in this char tokenizer"):
        tok.encode("a\ud800")


def test_char_tokenizer_names_the_byte(capfd):
    with pytest.raises(ZeroLLMError, match=r"byte 0xff \(not UTF-8\)"):
        CharTokenizer.train("abc").encode("a\udcff")


@pytest.mark.parametrize("tokenizer", ["byte", "bpe"])
def test_sample_a_prompt_with_undecodable_bytes(tokenizer, tmp_path_factory, capfd):
    run = tiny_run(tmp_path_factory, tokenizer)
    code, out, err = run_main(["sample", "--ckpt", run, "--prompt", "a\udcff", "--max-new-tokens", "3",
                               "--seed", "0"], capfd)
    assert code == 0 and out.startswith("a") and "Traceback" not in err


def test_char_model_refuses_such_a_prompt_in_one_line(tmp_path_factory, capfd):
    run = tiny_run(tmp_path_factory, "char")
    code, out, err = run_main(["sample", "--ckpt", run, "--prompt", "a\udcff"], capfd)
    assert code == 1 and "byte 0xff (not UTF-8)" in err and len(err.splitlines()) == 1


def test_real_process_echoes_the_prompt_bytes(tmp_path_factory):
    """A real argv with b'\\xff': the byte model reads it and stdout gives the same byte back."""
    run = tiny_run(tmp_path_factory, "byte")
    env = {**os.environ, "PYTHONPATH": REPO + os.pathsep + os.environ.get("PYTHONPATH", ""), "LC_ALL": "C.UTF-8"}
    res = subprocess.run([sys.executable.encode(), b"-m", b"zerollm", b"sample", b"--ckpt", os.fsencode(run),
                          b"--prompt", b"ab\xff", b"--max-new-tokens", b"2", b"--seed", b"0"],
                         capture_output=True, env=env, timeout=60)
    assert res.returncode == 0, res.stderr
    assert res.stdout.startswith(b"ab\xff") and b"Traceback" not in res.stderr


def test_a_file_name_that_is_not_utf8_is_printed_not_a_crash(tmp_path, capfd):
    data = os.fsdecode(os.fsencode(str(tmp_path)) + b"/corpus\xff.txt")
    with open(data, "w", encoding="utf-8") as f:
        f.write("to be or not to be " * 200)
    out_dir = os.fsdecode(os.fsencode(str(tmp_path)) + b"/out\xfe")
    code, out, err = run_main(["prepare", "--data", data, "--out", out_dir], capfd)
    assert code == 0 and "wrote" in out and "Traceback" not in err
