"""Data preparation, loading, batches, and `zerollm prepare` / `zerollm download` (against a
local HTTP server only; the internet is never touched)."""

import hashlib
import http.server
import json
import threading
from functools import partial

import numpy as np
import pytest

from zerollm.data import tokens as data_mod
from zerollm.data import download as dl
from zerollm.cli import main
from zerollm.data.tokens import get_batch, load_prepared, prepare, token_dtype
from zerollm.io.errors import ZeroLLMError

SHAKESPEARE_SHA = "86c4e6aa9db7c042ec79f339dcb96d42b0075e16b8fc2e86bf0ca57e2dc565ed"


def run_cli(capsys, *argv):
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def assert_one_line_error(code, err, command, fragment):
    assert code == 1
    assert err.count("\n") == 1 and err.startswith(f"zerollm {command}: error:")
    assert "Traceback" not in err
    assert fragment in err, err


# ----------------------------------------------------------------------------
# prepare + load_prepared

@pytest.mark.parametrize("kind", ["byte", "char"])
@pytest.mark.parametrize("corpus", ["shakespeare_path", "tang_path"])
def test_prepare_whole_corpus(request, tmp_path, kind, corpus):
    path = request.getfixturevalue(corpus)
    text = path.read_text(encoding="utf-8")
    meta = prepare(path, tmp_path / "out", kind)
    n = meta["train_tokens"] + meta["val_tokens"]
    assert n == (len(text.encode("utf-8")) if kind == "byte" else len(text))
    assert meta["val_tokens"] == round(n * 0.1) and meta["dtype"] == "uint16"
    assert meta["source"]["sha256"] == hashlib.sha256(path.read_bytes()).hexdigest()
    assert meta["source"]["file"] == path.name
    train, val, meta2, tok = load_prepared(tmp_path / "out")
    assert meta2 == meta and isinstance(train, np.memmap) and train.dtype == np.dtype("<u2")
    assert (tmp_path / "out" / "train.bin").stat().st_size == 2 * meta["train_tokens"]
    assert tok.name == kind and tok.vocab_size == meta["vocab_size"]
    ids = np.concatenate([train, val])
    assert tok.decode(ids) == text                                 # nothing lost at the split
    if kind == "char":
        assert tok.decode(val[:12]) == text[-meta["val_tokens"]:][:12]   # val = the LAST 10%


def test_prepare_bpe_on_a_slice(tmp_path, shakespeare_path):
    text = shakespeare_path.read_text(encoding="utf-8")[:60_000] + "<|endoftext|>" + "中文也行。" * 30
    src = tmp_path / "slice.txt"
    src.write_text(text, encoding="utf-8")
    meta = prepare(src, tmp_path / "out", "bpe", vocab_size=400, block_size=32, pattern="gpt2")
    train, val, _, tok = load_prepared(tmp_path / "out")
    assert meta["tokenizer"] == "bpe" and meta["vocab_size"] == tok.vocab_size == 400
    ids = np.concatenate([train, val]).tolist()
    assert tok.special_tokens["<|endoftext|>"] in ids              # recognised as a separator
    assert tok.decode(ids) == text and len(ids) < 0.7 * len(text)


@pytest.mark.parametrize("vocab_size, dtype", [(256, "uint16"), (65536, "uint16"), (65537, "uint32"),
                                                (100_277, "uint32")])
def test_token_dtype(vocab_size, dtype):
    assert token_dtype(vocab_size) == dtype


def test_more_than_65536_tokens_are_stored_as_uint32(tmp_path):
    # 70,000 distinct characters (surrogates skipped) -> a char vocabulary too big for uint16
    chars = [chr(c) for c in range(0x100, 0x100 + 72_100) if not 0xD800 <= c <= 0xDFFF][:70_000]
    src = tmp_path / "wide.txt"
    src.write_text("".join(chars), encoding="utf-8")
    meta = prepare(src, tmp_path / "out", "char")
    assert meta["vocab_size"] == 70_000 and meta["dtype"] == "uint32"
    train, val, _, tok = load_prepared(tmp_path / "out")
    assert train.dtype == np.dtype("<u4") and int(val.max()) == 69_999
    assert (tmp_path / "out" / "val.bin").stat().st_size == 4 * meta["val_tokens"]
    assert tok.decode(np.concatenate([train, val])) == "".join(chars)


def test_written_files_are_little_endian_and_complete(tmp_path):
    src = tmp_path / "t.txt"
    src.write_text("abcdefgh" * 40, encoding="utf-8")
    prepare(src, tmp_path / "out", "byte", block_size=8)
    raw = (tmp_path / "out" / "train.bin").read_bytes()
    assert raw[:4] == bytes([97, 0, 98, 0])                        # 'a', 'b' as <u2
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == [
        "meta.json", "tokenizer.json", "train.bin", "val.bin"]     # no temp files left behind


# ----------------------------------------------------------------------------
# get_batch

@pytest.fixture
def small_ids():
    return (np.arange(1000) * 3).astype(np.uint16)       # the id at position i is 3 * i


@pytest.mark.parametrize("B, T", [(1, 1), (4, 8), (16, 64), (3, 999)])
def test_batch_shapes_and_shift(small_ids, B, T):
    x, y = get_batch(small_ids, B, T, np.random.default_rng(0))
    assert x.shape == y.shape == (B, T) and x.dtype == y.dtype == np.int64
    np.testing.assert_array_equal(x[:, 1:], y[:, :-1])             # y is x shifted by one
    starts = x[:, 0] // 3
    assert starts.min() >= 0 and starts.max() + T < len(small_ids)  # y's last id exists
    for b, s in enumerate(starts):                                  # each row is a real window
        np.testing.assert_array_equal(x[b], small_ids[s:s + T])
        np.testing.assert_array_equal(y[b], small_ids[s + 1:s + T + 1])


def test_every_window_can_be_drawn():
    x, y = get_batch(np.arange(5, dtype=np.uint16), 2000, 3, np.random.default_rng(0))
    assert set(x[:, 0].tolist()) == {0, 1}                          # starts 0 and 1 only (5 = 1 + 3 + 1)
    assert y.max() == 4


def test_batches_depend_only_on_the_rng(small_ids):
    a, b = np.random.default_rng(42), np.random.default_rng(42)
    np.random.seed(0)
    first = [get_batch(small_ids, 4, 16, a) for _ in range(3)]
    np.random.seed(1)                                              # the global state plays no role
    second = [get_batch(small_ids, 4, 16, b) for _ in range(3)]
    for (x1, y1), (x2, y2) in zip(first, second):
        np.testing.assert_array_equal(x1, x2)
        np.testing.assert_array_equal(y1, y2)
    assert not np.array_equal(first[0][0], first[1][0])            # the rng advances
    other = get_batch(small_ids, 4, 16, np.random.default_rng(43))[0]
    assert not np.array_equal(other, first[0][0])


def test_batches_from_a_memmap(tmp_path, shakespeare_path):
    prepare(shakespeare_path, tmp_path / "out", "char")
    train, _, _, tok = load_prepared(tmp_path / "out")
    x, y = get_batch(train, 2, 32, np.random.default_rng(0))
    assert isinstance(x, np.ndarray) and not isinstance(x, np.memmap)
    assert len(tok.decode(x[0])) == 32


@pytest.mark.parametrize("B, T, fragment", [(0, 4, "batch_size"), (2, 1000, "needs 1001"),
                                            (2, 2.5, "block_size"), (True, 4, "batch_size")])
def test_bad_batch_arguments(small_ids, B, T, fragment):
    with pytest.raises(ZeroLLMError, match=fragment):
        get_batch(small_ids, B, T, np.random.default_rng(0))


# ----------------------------------------------------------------------------
# load_prepared errors

@pytest.fixture
def prepared(tmp_path):
    src = tmp_path / "t.txt"
    src.write_text("hello world, " * 100, encoding="utf-8")
    prepare(src, tmp_path / "out", "char")
    return tmp_path / "out"


@pytest.mark.parametrize("damage, fragment", [
    (lambda d: d.rename(d.parent / "gone"), "folder not found"),
    (lambda d: (d / "meta.json").unlink(), "no meta.json"),
    (lambda d: (d / "meta.json").write_text("{oops"), "not valid JSON"),
    (lambda d: (d / "meta.json").write_text('{"format": "zerollm-data", "version": 9}'), "version 1"),
    (lambda d: (d / "train.bin").write_bytes((d / "train.bin").read_bytes()[:-2]), "damaged"),
    (lambda d: (d / "val.bin").unlink(), "missing"),
    (lambda d: (d / "meta.json").write_text((d / "meta.json").read_text().replace(
        '"train_tokens": ', '"train_tokens": -')), "train_tokens must be a whole number >= 1"),
    (lambda d: (d / "tokenizer.json").write_text(
        json.dumps({"format": "zerollm-tokenizer", "version": 1, "type": "byte"})), "vocab_size 256"),
])
def test_load_prepared_errors(prepared, damage, fragment):
    damage(prepared)
    with pytest.raises(ZeroLLMError, match=fragment):
        load_prepared(prepared)


# ----------------------------------------------------------------------------
# `zerollm prepare`

def test_prepare_cli_default_out_dir(capsys, tmp_path, monkeypatch, shakespeare_path):
    monkeypatch.chdir(tmp_path)
    code, out, err = run_cli(capsys, "prepare", "--data", str(shakespeare_path), "--tokenizer", "char")
    assert code == 0 and err == ""
    assert "vocab_size 65" in out and "1,115,394" in out
    assert "data/tinyshakespeare-char" in out
    meta = json.loads((tmp_path / "data" / "tinyshakespeare-char" / "meta.json").read_text())
    assert meta["tokenizer"] == "char" and meta["block_size"] == 64


def _folder(path):
    path.mkdir()
    return path


def _write(tmp_path, name, content):
    path = tmp_path / name
    path.write_bytes(content if isinstance(content, bytes) else content.encode("utf-8"))
    return str(path)


@pytest.mark.parametrize("case, fragment", [
    ("missing", "data file not found"),
    ("a_folder", "is a directory, not a text file"),
    ("empty", "is empty"),
    ("not_utf8", "byte offset 6"),
    ("utf16", "it is UTF-16 text (it starts with a UTF-16 byte-order mark); save it as UTF-8 (e.g. iconv -f UTF-16 "),
    ("utf16be", "iconv -f UTF-16 -t UTF-8"),
    ("utf32", "iconv -f UTF-32 -t UTF-8"),
    ("too_small", "corpus too small"),
    ("bpe_no_vocab", "needs a vocab_size"),
    ("char_with_vocab", "drop --vocab-size"),
    ("byte_with_vocab", "always has vocab_size 256"),
    ("pattern_not_bpe", "--pattern only applies"),
])
def test_prepare_cli_errors(capsys, tmp_path, case, fragment):
    good = _write(tmp_path, "good.txt", "some text to learn from. " * 20)
    args = {
        "missing": ["--data", str(tmp_path / "nope.txt")],
        "a_folder": ["--data", str(_folder(tmp_path / "texts"))],
        "empty": ["--data", _write(tmp_path, "empty.txt", "")],
        "not_utf8": ["--data", _write(tmp_path, "gbk.txt", b"hello \xc4\xe3\xba\xc3")],
        "utf16": ["--data", _write(tmp_path, "u16.txt", "some text to learn from".encode("utf-16"))],
        "utf16be": ["--data", _write(tmp_path, "u16be.txt", "\ufeffsome text".encode("utf-16-be"))],
        "utf32": ["--data", _write(tmp_path, "u32.txt", "some text to learn from".encode("utf-32"))],
        "too_small": ["--data", good, "--block-size", "64"],
        "bpe_no_vocab": ["--data", good, "--tokenizer", "bpe"],
        "char_with_vocab": ["--data", good, "--tokenizer", "char", "--vocab-size", "500"],
        "byte_with_vocab": ["--data", good, "--vocab-size", "300"],
        "pattern_not_bpe": ["--data", good, "--pattern", "gpt2"],
    }[case]
    code, out, err = run_cli(capsys, "prepare", *args, "--out", str(tmp_path / "out"))
    assert_one_line_error(code, err, "prepare", fragment)
    assert out == "" and not (tmp_path / "out" / "meta.json").exists()


@pytest.mark.parametrize("args", [["--vocab-size", "many"], ["--vocab-size", "100"], ["--block-size", "0"],
                                  ["--tokenizer", "word"], ["--val-fraction", "1.5"]])
def test_prepare_cli_usage_errors(capsys, tmp_path, args):
    with pytest.raises(SystemExit) as exc:
        main(["prepare", "--data", "x.txt", *args])
    assert exc.value.code == 2 and capsys.readouterr().err.count("\n") == 1


def test_prepare_refuses_a_bpe_size_without_merges_up_front(capsys, tmp_path):
    """--vocab-size 256 (the bytes alone, no merge) is refused while the arguments are read, with the range,
    not after the text was read."""
    with pytest.raises(SystemExit) as exc:
        main(["prepare", "--data", str(tmp_path / "absent.txt"), "--tokenizer", "bpe", "--vocab-size", "256"])
    err = capsys.readouterr().err
    assert exc.value.code == 2 and err.count("\n") == 1
    assert "--vocab-size: must be a whole number from 257 to 16777216, got '256'" in err


def test_a_utf16_jsonl_file_is_named(tmp_path):
    from zerollm.data.formats import read_jsonl
    path = tmp_path / "rows.jsonl"
    path.write_bytes('{"prompt": "a", "completion": "b"}\n'.encode("utf-16"))
    with pytest.raises(ZeroLLMError, match="line 1: not UTF-8 text; it is UTF-16 text .*iconv -f UTF-16 -t UTF-8"):
        read_jsonl(path)


# ----------------------------------------------------------------------------
# `zerollm download`, against a server on 127.0.0.1

class QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):
        pass


@pytest.fixture
def server(tmp_path, monkeypatch):
    """Serves tmp_path/www at http://127.0.0.1:PORT/; yields (www folder, base url)."""
    for var in ("http_proxy", "HTTP_PROXY", "https_proxy", "HTTPS_PROXY", "all_proxy", "ALL_PROXY"):
        monkeypatch.delenv(var, raising=False)
    www = tmp_path / "www"
    www.mkdir()
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), partial(QuietHandler, directory=str(www)))
    thread = threading.Thread(target=httpd.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    yield www, f"http://127.0.0.1:{httpd.server_address[1]}"
    httpd.shutdown()
    httpd.server_close()


def test_download_with_url_then_skip(capsys, tmp_path, server):
    www, base = server
    (www / "input.txt").write_text("To be, or not to be", encoding="utf-8")
    cache = tmp_path / "cache"
    argv = ["download", "shakespeare", "--dir", str(cache), "--url", f"{base}/input.txt"]
    code, out, err = run_cli(capsys, *argv)
    assert code == 0 and out.strip() == str(cache / "tinyshakespeare.txt") and "downloaded" in err
    assert (cache / "tinyshakespeare.txt").read_text(encoding="utf-8") == "To be, or not to be"
    (www / "input.txt").unlink()                                   # present and valid: not fetched again
    code, out, err = run_cli(capsys, *argv)
    assert code == 0 and "already present" in err


def test_default_url_is_verified(capsys, tmp_path, server, monkeypatch, shakespeare_path):
    www, base = server
    monkeypatch.setitem(dl.DATASETS["shakespeare"], "url", f"{base}/input.txt")
    monkeypatch.setenv("ZEROLLM_CACHE", str(tmp_path / "cache"))
    (www / "input.txt").write_text("not shakespeare", encoding="utf-8")
    code, _, err = run_cli(capsys, "download", "shakespeare")
    assert_one_line_error(code, err, "download", "checksum mismatch")
    assert not any((tmp_path / "cache").iterdir())                 # nothing half-written left
    (www / "input.txt").write_bytes(shakespeare_path.read_bytes())
    code, out, _ = run_cli(capsys, "download", "shakespeare")
    path = tmp_path / "cache" / "tinyshakespeare.txt"
    assert code == 0 and out.strip() == str(path)
    assert dl.sha256_of(path) == SHAKESPEARE_SHA
    path.write_text("damaged")                                     # present but invalid: kept, refused
    code, out, err = run_cli(capsys, "download", "shakespeare")
    assert_one_line_error(code, err, "download", "is not the expected download")
    assert out == "" and path.read_text() == "damaged"
    code, out, err = run_cli(capsys, "download", "shakespeare", "--force")   # ... replaced with --force
    assert code == 0 and "downloaded" in err and dl.sha256_of(path) == SHAKESPEARE_SHA


@pytest.mark.parametrize("sha", [SHAKESPEARE_SHA, None])
def test_a_file_of_the_same_name_is_replaced_only_with_force(capsys, tmp_path, server, shakespeare_path, sha):
    """--dir can be any folder: a file there named like the download is the user's unless it checks
    out; it is replaced only with --force. Without a sha256 to check (a --url of its own), any file
    there counts as already present."""
    www, base = server
    (www / "input.txt").write_bytes(shakespeare_path.read_bytes())
    mine = tmp_path / "tinyshakespeare.txt"
    mine.write_text("my notes", encoding="utf-8")
    argv = ["download", "shakespeare", "--dir", str(tmp_path), "--url", f"{base}/input.txt"]
    argv += ["--sha256", sha] if sha else []
    code, out, err = run_cli(capsys, *argv)
    assert mine.read_text(encoding="utf-8") == "my notes"
    if sha is None:
        assert code == 0 and "already present" in err
        return
    assert_one_line_error(code, err, "download", f"{mine} already exists and is not the expected download")
    assert "--force" in err and "another --dir" in err and out == ""
    code, out, err = run_cli(capsys, *argv, "--force")
    assert code == 0 and out.strip() == str(mine) and dl.sha256_of(mine) == SHAKESPEARE_SHA


@pytest.mark.parametrize("case, fragment", [
    ("404", "HTTP 404"),
    ("sha_mismatch", "checksum mismatch"),
    ("refused", "could not download"),
    ("scheme", "must start with http"),
    ("ipv6", "is not a valid URL"),
    ("port", "is not a valid URL"),
    ("no-host", "names no host"),
])
def test_download_errors(capsys, tmp_path, server, case, fragment):
    www, base = server
    (www / "input.txt").write_text("some text", encoding="utf-8")
    args = {"404": ["--url", f"{base}/missing.txt"],
            "sha_mismatch": ["--url", f"{base}/input.txt", "--sha256", "0" * 64],
            "refused": ["--url", "http://127.0.0.1:9/input.txt"],      # port 9 (discard): nothing listens
            "scheme": ["--url", "ftp://example.com/input.txt"],
            "ipv6": ["--url", "http://[::1"],                           # urllib's ValueError, before any request
            "port": ["--url", "http://127.0.0.1:99999999/input.txt"],
            "no-host": ["--url", "https:///input.txt"]}[case]
    code, out, err = run_cli(capsys, "download", "shakespeare", "--dir", str(tmp_path / "c"), *args)
    assert_one_line_error(code, err, "download", fragment)
    assert out == "" and list((tmp_path / "c").iterdir()) == []


@pytest.mark.parametrize("mirror, fragment", [
    ("ftp://mirror.example/data", "(from $ZEROLLM_MIRROR) must start with http:// or https://; set $ZEROLLM_MIRROR"),
    ("http://[::1", "(from $ZEROLLM_MIRROR) is not a valid URL"),
    ("https://", "(from $ZEROLLM_MIRROR) must start with http"),
    ("http://127.0.0.1:9/data", "check your internet connection and $ZEROLLM_MIRROR"),
])
def test_a_bad_mirror_is_named_not_url(capsys, tmp_path, monkeypatch, mirror, fragment):
    monkeypatch.setenv("ZEROLLM_MIRROR", mirror)
    code, out, err = run_cli(capsys, "download", "shakespeare", "--dir", str(tmp_path / "c"))
    assert_one_line_error(code, err, "download", fragment)
    assert "--url" not in err.split("use 'zerollm prepare")[0] and out == ""


def test_a_mirror_answering_404_is_named(capsys, tmp_path, server, monkeypatch):
    www, base = server
    monkeypatch.setenv("ZEROLLM_MIRROR", base)
    code, _, err = run_cli(capsys, "download", "shakespeare", "--dir", str(tmp_path / "c"))
    assert_one_line_error(code, err, "download", "HTTP 404")
    assert "check the URL ($ZEROLLM_MIRROR)" in err and "--url" not in err


@pytest.mark.parametrize("sha", ["abc", "0" * 63, "g" * 64, "0" * 65, ""])
def test_a_malformed_sha256_is_refused_before_downloading(capsys, tmp_path, server, sha):
    www, base = server
    (www / "input.txt").write_text("some text", encoding="utf-8")
    code, out, err = run_cli(capsys, "download", "shakespeare", "--dir", str(tmp_path / "c"), "--url",
                             f"{base}/input.txt", "--sha256", sha)
    assert_one_line_error(code, err, "download", "--sha256 must be 64 hex digits (as sha256sum prints them)")
    assert out == "" and not (tmp_path / "c").exists()
    with pytest.raises(ZeroLLMError, match="--sha256 must be 64 hex digits"):    # and from Python
        dl.download("shakespeare", tmp_path / "c", f"{base}/input.txt", sha)
    assert not (tmp_path / "c").exists()


def test_download_with_matching_sha256(capsys, tmp_path, server):
    www, base = server
    (www / "input.txt").write_bytes(b"abc")
    code, _, _ = run_cli(capsys, "download", "shakespeare", "--dir", str(tmp_path / "c"),
                         "--url", f"{base}/input.txt", "--sha256", hashlib.sha256(b"abc").hexdigest().upper())
    assert code == 0 and (tmp_path / "c" / "tinyshakespeare.txt").read_bytes() == b"abc"


@pytest.mark.parametrize("env, expected", [
    ({"ZEROLLM_CACHE": "/z", "XDG_CACHE_HOME": "/x"}, "/z"),
    ({"XDG_CACHE_HOME": "/x"}, "/x/zerollm"),
])
def test_cache_dir(env, expected):
    assert str(dl.cache_dir(env)) == expected


def test_cache_dir_default_is_in_home(monkeypatch, tmp_path):
    monkeypatch.setenv("HOME", str(tmp_path))
    assert dl.cache_dir({}) == tmp_path / ".cache" / "zerollm"


def test_module_docstrings_match_the_commands():
    assert "zerollm prepare" in data_mod.__doc__ and "zerollm download" in dl.__doc__


@pytest.mark.parametrize("argv", [["prepare", "--data"], ["eval", "--ckpt", "RUN", "--data"]])
def test_a_missing_data_file_points_at_the_corpora_that_ship(capsys, tmp_path, tmp_path_factory, argv):
    # it used to suggest `zerollm download shakespeare`, a download of what the package already holds
    from tiny_runs import tiny_run
    from zerollm.data import corpora
    argv = [str(tiny_run(tmp_path_factory, "char")) if a == "RUN" else a for a in argv]
    capsys.readouterr()                                  # what training the tiny run printed
    code = main([*argv, str(tmp_path / "nofile.txt")])
    err = capsys.readouterr().err
    assert code == 1 and len(err.strip().splitlines()) == 1, err
    assert "data file not found" in err and "download" not in err
    assert str(corpora.HERE) in err and "tinyshakespeare.txt" in err and "tang_poems.txt" in err
    assert corpora.path("shakespeare").parent == corpora.HERE          # the folder named is where they are
