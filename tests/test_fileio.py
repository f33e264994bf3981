"""zerollm.io.fileio: writes are all-or-nothing; JSON errors name the file and the fix."""

import os
import stat

import pytest

from zerollm.io.errors import ZeroLLMError
from zerollm.io.fileio import atomic_write, read_json, write_json


@pytest.mark.parametrize("mode, payload", [("wb", b"\x00\x01bytes"), ("w", "文字 text\n")])
def test_atomic_write_replaces_file(tmp_path, mode, payload):
    path = tmp_path / "out"
    path.write_text("old")
    with atomic_write(path, mode) as f:
        f.write(payload)
        assert path.read_text() == "old"           # nothing visible until the block ends
    got = path.read_bytes() if mode == "wb" else path.read_text(encoding="utf-8")
    assert got == payload
    assert os.listdir(tmp_path) == ["out"]


def test_new_file_gets_normal_permissions(tmp_path):
    with atomic_write(tmp_path / "new.txt", "w") as f:
        f.write("x")
    mask = os.umask(0)
    os.umask(mask)
    assert stat.S_IMODE(os.stat(tmp_path / "new.txt").st_mode) == 0o666 & ~mask


@pytest.mark.parametrize("error", [RuntimeError("boom"), KeyboardInterrupt()])
def test_exception_keeps_old_file_and_removes_temp(tmp_path, error):
    path = tmp_path / "data.bin"
    path.write_bytes(b"precious")
    with pytest.raises(type(error)):
        with atomic_write(path) as f:
            f.write(b"half of the new cont")
            raise error
    assert path.read_bytes() == b"precious"
    assert os.listdir(tmp_path) == ["data.bin"]


def test_exception_on_new_file_leaves_nothing(tmp_path):
    with pytest.raises(RuntimeError):
        with atomic_write(tmp_path / "fresh.bin") as f:
            f.write(b"x")
            raise RuntimeError
    assert os.listdir(tmp_path) == []


def test_missing_directory_and_bad_mode(tmp_path):
    with pytest.raises(ZeroLLMError, match="does not exist"):
        with atomic_write(tmp_path / "no" / "such" / "file"):
            pass
    with pytest.raises(ZeroLLMError, match="mode"):
        with atomic_write(tmp_path / "f", "a"):
            pass


def test_json_round_trip_keeps_chinese_readable(tmp_path):
    obj = {"名字": "唐诗", "n": 3, "xs": [1.5, None, True]}
    write_json(tmp_path / "m.json", obj)
    text = (tmp_path / "m.json").read_text(encoding="utf-8")
    assert "唐诗" in text and "\\u" not in text and text.endswith("\n")
    assert read_json(tmp_path / "m.json") == obj


def test_write_json_rejects_unserialisable(tmp_path):
    with pytest.raises(ZeroLLMError, match="tolist"):
        write_json(tmp_path / "m.json", {"a": {1, 2}})
    assert os.listdir(tmp_path) == []


@pytest.mark.parametrize("content, words", [
    (None, "model config not found"),
    (b'{"a": 1,', "not valid JSON"),
    (b"\xff\xfe\x00", "not UTF-8"),
    (b"[" * 100_000 + b"]" * 100_000, "nested too deeply to be a model config"),   # RecursionError in json
])
def test_read_json_errors(tmp_path, content, words):
    path = tmp_path / "config.json"
    if content is not None:
        path.write_bytes(content)
    with pytest.raises(ZeroLLMError, match=words) as err:
        read_json(path, what="model config")
    assert "config.json" in str(err.value)
