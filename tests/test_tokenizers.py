"""Tokenizers: round trips, worked examples, incremental BPE vs a naive reference, save/load,
special tokens, unknown characters, bad files."""

import ast
import json
import sys
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from zerollm.io.errors import ZeroLLMError
from zerollm.tokenizers import (ENDOFTEXT, BPETokenizer, ByteTokenizer, CharTokenizer,
                                find_tokenizer, load_tokenizer, train_tokenizer)
from zerollm.tokenizers.bpe_train import count_pairs, learn_merges, merge_word
from zerollm.tokenizers.patterns import GPT2_PATTERN, compile_pattern, split_text

sys.path.insert(0, str(Path(__file__).parent))
from bpe_reference import merge_pair, naive_learn  # noqa: E402

CASES = {
    "empty": "",
    "one_char": "a",
    "cjk_emoji": "秦川雄帝宅，函谷壮皇居。你好 👋🏽😀 naïve",
    "whitespace": "  two  spaces\n\n\ttab\r\nwindows   \u00a0nbsp  ",
    "contractions_numbers": "I'LL say it's 12345 and 3.14, they've 'd",
}
SAMPLE = "".join(CASES.values())


@pytest.fixture(scope="module")
def shakespeare(shakespeare_path):
    return shakespeare_path.read_text(encoding="utf-8")


@pytest.fixture(scope="module")
def tang(tang_path):
    return tang_path.read_text(encoding="utf-8")


@pytest.fixture(scope="module")
def toks(shakespeare, tang):
    """One tokenizer of each kind; char and bpe know every character of CASES."""
    return {"byte": ByteTokenizer(),
            "char": CharTokenizer.train(SAMPLE),
            "bpe": BPETokenizer.train(shakespeare[:100_000] + tang[:20_000] + SAMPLE, 600)}


# ----------------------------------------------------------------------------
# round trips

@pytest.mark.parametrize("kind", ["byte", "char", "bpe"])
@pytest.mark.parametrize("case", list(CASES))
def test_round_trip(toks, kind, case):
    tok, text = toks[kind], CASES[case]
    ids = tok.encode(text)
    assert isinstance(ids, list) and all(isinstance(i, int) for i in ids)
    assert all(0 <= i < tok.vocab_size for i in ids)
    assert tok.decode(ids) == text
    assert tok.decode(np.array(ids, dtype=np.int64)) == text      # numpy ids work too
    assert (ids == []) == (text == "")


@pytest.mark.parametrize("kind", ["byte", "char", "bpe"])
@pytest.mark.parametrize("corpus", ["shakespeare", "tang"])
def test_whole_file_round_trip(request, kind, corpus):
    text = request.getfixturevalue(corpus)
    # BPE learns from a slice (training on all of tang takes seconds) and encodes the whole file
    tok = train_tokenizer(kind, text[:50_000] if kind == "bpe" else text, 300 if kind == "bpe" else None)
    ids = tok.encode(text)
    assert tok.decode(ids) == text
    if kind == "byte":
        assert len(ids) == len(text.encode("utf-8"))
    if kind == "char":
        assert len(ids) == len(text) and tok.vocab_size == len(set(text))
    if kind == "bpe":
        assert len(ids) < len(text.encode("utf-8"))               # merges compress


@settings(max_examples=60, deadline=None)
@given(text=st.text(max_size=40))
def test_any_text_round_trips_through_byte_and_bpe(toks, text):
    for kind in ("byte", "bpe"):
        assert toks[kind].decode(toks[kind].encode(text)) == text


# ----------------------------------------------------------------------------
# tiny worked examples (minbpe style)

def test_byte_examples():
    tok = ByteTokenizer()
    assert tok.encode("hi 你") == [104, 105, 32, 228, 189, 160]
    assert tok.decode([228, 189]) == "\ufffd"          # a cut multi-byte character: replaced
    assert tok.vocab_size == 256 and tok.name == "byte"


def test_char_examples():
    tok = CharTokenizer.train("hello")
    assert tok.chars == ["e", "h", "l", "o"] and tok.vocab_size == 4
    assert tok.encode("hole") == [1, 3, 2, 0]
    assert tok.decode([1, 0, 2, 2, 3]) == "hello"


def test_pair_counting_and_merging():
    counts, where = count_pairs([[1, 2, 3], [1, 2]], [10, 1])
    assert dict(counts) == {(1, 2): 11, (2, 3): 10}
    assert dict(where) == {(1, 2): {0, 1}, (2, 3): {0}}
    delta, added = {}, []
    assert merge_word([1, 2, 1, 2, 3], 1, 2, 9, 5, delta, added) == [9, 9, 3]
    assert {p: d for p, d in delta.items() if d} == {(1, 2): -10, (2, 1): -5, (2, 3): -5,
                                                     (9, 9): 5, (9, 3): 5}
    assert merge_word([1, 1, 1], 1, 1, 9, 1, {}, []) == [9, 1]      # left to right, no overlap


def test_wikipedia_bpe_example():
    # en.wikipedia.org/wiki/Byte_pair_encoding: aaabdaaabac -> ZabdZabac -> ZYdZYac -> XdXac
    tok = BPETokenizer.train("aaabdaaabac", 259, pattern=r".+", special_tokens=())
    assert [tok.token_bytes(i) for i in (256, 257, 258)] == [b"aa", b"ab", b"aaab"]
    assert tok.encode("aaabdaaabac") == [258, 100, 258, 97, 99]


def test_ties_go_to_the_smallest_pair():
    # every pair of "abcd" occurs once: (a,b) < (b,c) < (c,d), so (a,b) first, then (c,d)
    merges, _ = learn_merges(["abcd"], 2)
    assert merges == [(97, 98, 256), (99, 100, 257)]


def test_split_patterns():
    gpt2 = compile_pattern(GPT2_PATTERN)
    assert split_text("Hello world's 2024!", gpt2) == ["Hello", " world", "'s", " 2024", "!"]
    assert split_text("a  b", gpt2) == ["a", " ", " b"]     # the last space starts the next word
    gpt4 = BPETokenizer(pattern="gpt4")._regex
    assert split_text("12345 I'LL", gpt4) == ["123", "45", " I", "'LL"]


# ----------------------------------------------------------------------------
# incremental training == the textbook algorithm

@pytest.mark.parametrize("corpus, n", [("shakespeare", 120), ("tang", 60)])
def test_incremental_training_matches_naive(request, corpus, n):
    text = request.getfixturevalue(corpus)[:6000]
    chunks = split_text(text, BPETokenizer(pattern="gpt4")._regex)
    assert learn_merges(chunks, n) == naive_learn(chunks, n)


def test_encode_matches_naive_merge_replay(toks, shakespeare):
    tok, text = toks["bpe"], shakespeare[200_000:210_000]
    expected = []
    for chunk in split_text(text, tok._regex):
        ids = list(chunk.encode("utf-8"))
        for a, b, new in tok.merges:        # replay every merge in rank order (minbpe's way)
            ids = merge_pair(ids, (a, b), new)
        expected += ids
    assert tok.encode(text) == expected


def test_training_is_deterministic(shakespeare):
    a = BPETokenizer.train(shakespeare[:50_000], 400, pattern="gpt2")
    b = BPETokenizer.train(shakespeare[:50_000], 400, pattern="gpt2")
    assert a.to_dict() == b.to_dict()
    assert a.merges != BPETokenizer.train(shakespeare[:50_000], 400).merges   # gpt4 splits differently


def test_tiny_text_stops_early():
    tok = BPETokenizer.train("ab ab", 1000)
    assert tok.vocab_size < 1000 and tok.decode(tok.encode("ab ab")) == "ab ab"
    assert tok.special_tokens == {ENDOFTEXT: tok.vocab_size - 1}


def test_custom_pattern_keeps_text_between_matches():
    tok = BPETokenizer.train("ab12cd345ef" * 20, 270, pattern=r"\d+")
    assert tok.pattern_name is None
    for text in ("ab12cd345ef", "no digits", "9"):
        assert tok.decode(tok.encode(text)) == text


# ----------------------------------------------------------------------------
# special tokens

def test_special_tokens(toks):
    tok = toks["bpe"]
    eot = tok.special_tokens[ENDOFTEXT]
    assert eot == 256 + len(tok.merges) == tok.vocab_size - 1       # ids after the merges
    text = f"one{ENDOFTEXT}two"
    assert eot not in tok.encode(text)                              # default: plain text
    assert tok.decode(tok.encode(text)) == text
    for allowed in ("all", {ENDOFTEXT}):
        ids = tok.encode(text, allowed_special=allowed)
        assert ids == tok.encode("one") + [eot] + tok.encode("two")
        assert tok.decode(ids) == text
    assert tok.encode(ENDOFTEXT * 2, allowed_special="all") == [eot, eot]


def test_several_special_tokens_longest_first():
    tok = BPETokenizer(special_tokens=["<|a|>", "<|a|>b", "<|im_end|>"])
    assert tok.special_tokens == {"<|a|>": 256, "<|a|>b": 257, "<|im_end|>": 258}
    assert tok.encode("<|a|>b<|a|>", allowed_special="all") == [257, 256]
    assert tok.encode("<|a|>b", allowed_special={"<|a|>"}) == [256, 98]


@pytest.mark.parametrize("kwargs, fragment", [
    ({"allowed_special": {"<|nope|>"}}, "not special tokens"),
    ({"allowed_special": "some"}, "allowed_special must be"),
])
def test_bad_allowed_special(toks, kwargs, fragment):
    with pytest.raises(ZeroLLMError, match=fragment):
        toks["bpe"].encode("x", **kwargs)


@pytest.mark.parametrize("vocab_size, specials", [(256, [ENDOFTEXT]), (257, ["<a>", "<b>"]), (100, []),
                                                  (300.0, []), (True, [])])
def test_vocab_size_too_small_or_not_an_integer(vocab_size, specials):
    with pytest.raises(ZeroLLMError, match="vocab_size must be an integer >="):
        BPETokenizer.train("hello", vocab_size, special_tokens=specials)


def test_duplicate_special_tokens_are_an_error():
    with pytest.raises(ZeroLLMError, match="distinct"):
        BPETokenizer(special_tokens=["<s>", "<s>"])


# ----------------------------------------------------------------------------
# unknown characters (char tokenizer)

def test_unknown_characters_are_a_clear_error():
    tok = CharTokenizer.train("abc")
    with pytest.raises(ZeroLLMError) as err:
        tok.encode("abxyz你好🙂")
    message = str(err.value)
    assert "7 character(s)" not in message and "6 character(s)" in message
    assert "'x'" in message and "and 1 more" in message and "unk=" in message


def test_unknown_characters_with_unk():
    tok = CharTokenizer.train("abc", unk="<unk>")
    assert tok.vocab_size == 4 and tok.unk_id == 3
    assert tok.encode("a?b") == [0, 3, 1]
    assert tok.decode(tok.encode("a?b")) == "a<unk>b"


# ----------------------------------------------------------------------------
# encode() / decode() input checks

@pytest.mark.parametrize("kind", ["byte", "char", "bpe"])
def test_encode_wants_str(toks, kind):
    with pytest.raises(ZeroLLMError, match="encode takes a str"):
        toks[kind].encode(b"bytes")

@pytest.mark.parametrize("kind", ["byte", "char", "bpe"])
@pytest.mark.parametrize("ids, fragment", [
    ([0, 100_000], "outside this tokenizer's vocabulary"),
    ([-1], "outside this tokenizer's vocabulary"),
    ([[1, 2], [3, 4]], "1-D"),
    ([1.5], "integer ids"),
])
def test_bad_ids(toks, kind, ids, fragment):
    with pytest.raises(ZeroLLMError, match=fragment):
        toks[kind].decode(ids)


def test_gaps_in_imported_vocabularies_are_an_error():
    tok = BPETokenizer(special_tokens={"<s>": 300})              # ids 256..299 are unused
    assert tok.vocab_size == 301 and tok.decode([300, 104]) == "<s>h"
    with pytest.raises(ZeroLLMError, match="id 280 is not used"):
        tok.decode([280])


# ----------------------------------------------------------------------------
# save / load

@pytest.mark.parametrize("kind", ["byte", "char", "bpe"])
def test_save_load_round_trip(toks, tmp_path, kind):
    tok = toks[kind]
    path = tmp_path / "tok.json"
    tok.save(path)
    back = load_tokenizer(path)
    assert type(back) is type(tok) and back.vocab_size == tok.vocab_size
    assert back.to_dict() == tok.to_dict()
    text = SAMPLE + (ENDOFTEXT if kind == "bpe" else "")
    assert back.encode(text) == tok.encode(text)
    data = json.loads(path.read_text(encoding="utf-8"))
    assert (data["format"], data["version"], data["type"]) == ("zerollm-tokenizer", 1, kind)
    assert [p.name for p in tmp_path.iterdir()] == ["tok.json"]      # no temp files left


def test_saved_bpe_is_readable(toks, tmp_path):
    toks["bpe"].save(tmp_path / "t.json")
    text = (tmp_path / "t.json").read_text(encoding="utf-8")
    data = json.loads(text)
    assert data["pattern"] == "gpt4" and data["special_tokens"] == {ENDOFTEXT: 599}
    assert '    [" ", "t"],' in text                         # one merge per line, as text
    assert '    [97, "a"],' in text                          # vocab: [id, token]
    assert [228] in [tok for _, tok in data["vocab"]]       # a partial character: byte list
    assert len(data["merges"]) == len(toks["bpe"].merges)


def test_unk_survives_save_and_load(tmp_path):
    CharTokenizer.train("ab", unk="?").save(tmp_path / "c.json")
    assert load_tokenizer(tmp_path / "c.json").encode("abc") == [0, 1, 2]


def _bpe_file(tmp_path, toks, edit):
    data = toks["bpe"].to_dict()
    edit(data)
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(data), encoding="utf-8")
    return path


@pytest.mark.parametrize("content, fragment", [
    (None, "tokenizer file not found"),
    ("{not json", "not valid JSON"),
    ("[1, 2]", "expected a JSON object"),
    (b"\xff\xfe", "not UTF-8"),
    ('{"format": "something-else", "version": 1, "type": "byte"}', "not a zerollm tokenizer"),
    ('{"format": "zerollm-tokenizer", "version": 3, "type": "byte"}', "version 3"),
    ('{"format": "zerollm-tokenizer", "version": 1, "type": "wordpiece"}', "unknown tokenizer type"),
    ('{"format": "zerollm-tokenizer", "version": 1, "type": "char"}', "damaged char"),
    ('{"format": "zerollm-tokenizer", "version": 1, "type": "char", "chars": "abc"}', "must be a list"),
    ('{"format": "zerollm-tokenizer", "version": 1, "type": "char", "chars": ["a", "a"]}', "distinct"),
    ('{"format": "zerollm-tokenizer", "version": 1, "type": "byte", "x": 1}', "no settings"),
])
def test_bad_tokenizer_files(tmp_path, content, fragment):
    path = tmp_path / "tok.json"
    if isinstance(content, bytes):
        path.write_bytes(content)
    elif content is not None:
        path.write_text(content, encoding="utf-8")
    with pytest.raises(ZeroLLMError, match=fragment):
        load_tokenizer(path)


@pytest.mark.parametrize("edit, fragment", [
    (lambda d: d["merges"].append(["zz", "top"]), "missing from 'vocab'"),
    (lambda d: d["vocab"].pop(3), "all 256 single bytes"),
    (lambda d: d["vocab"].append([9999, "a"]), "same bytes"),
    (lambda d: d.update(special_tokens={ENDOFTEXT: 5}), "free id"),
    (lambda d: d.update(special_tokens=[ENDOFTEXT]), "must be an object"),
    (lambda d: d.update(regex="(unclosed"), "split regex zerollm does not run"),   # never compiled: not known
    (lambda d: d["vocab"].__setitem__(0, [0, [300]]), "byte values 0..255"),
    (lambda d: d.pop("merges"), "damaged bpe"),
])
def test_damaged_bpe_files(tmp_path, toks, edit, fragment):
    with pytest.raises(ZeroLLMError, match=fragment):
        load_tokenizer(_bpe_file(tmp_path, toks, edit))


# ----------------------------------------------------------------------------
# one reader of a tokenizer file, in both forms

@pytest.mark.parametrize("kind", ["byte", "char", "bpe"])
def test_load_tokenizer_reads_zerollms_form_and_hugging_faces(toks, kind, tmp_path):
    tok = toks[kind]
    tok.save(tmp_path / "ours.json")
    tok.to_hf_tokenizer_json(tmp_path / "theirs.json")
    for file in ("ours.json", "theirs.json"):
        back = load_tokenizer(tmp_path / file)
        assert (back.name, back.vocab_size) == (tok.name, tok.vocab_size), file
        assert back.encode(SAMPLE) == tok.encode(SAMPLE), file


def test_find_tokenizer_finds_a_folders_tokenizer_or_says_there_is_none(toks, tmp_path):
    assert find_tokenizer(tmp_path) is None
    with pytest.raises(ZeroLLMError, match="has neither tokenizer.json nor vocab.json"):
        find_tokenizer(tmp_path, required=True)
    toks["char"].to_hf_tokenizer_json(tmp_path / "tokenizer.json")
    assert find_tokenizer(tmp_path, required=True).encode("abc") == toks["char"].encode("abc")
    (tmp_path / "tokenizer.json").write_text("{not json", encoding="utf-8")
    with pytest.raises(ZeroLLMError, match="tokenizer.json is not valid JSON"):
        find_tokenizer(tmp_path)                   # a damaged file is an error, never taken for "none"


READERS = {"read_json", "read_json_file", "open_regular", "load", "loads", "open"}


def tokenizer_file_readers(root):
    """(module, function) of every call in ``root`` that opens or parses a file it names as a tokenizer's
    (a read_json / open_regular / json.load / open call with a string that mentions "tokenizer")."""
    def reads_one(call):
        name = getattr(call.func, "id", getattr(call.func, "attr", None))
        return name in READERS and any(isinstance(c, ast.Constant) and isinstance(c.value, str)
                                       and "tokenizer" in c.value.lower() for c in ast.walk(call))

    def visit(node, module, where, found):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            where = node.name
        elif isinstance(node, ast.Call) and where and reads_one(node):
            found.add((module, where))
        for child in ast.iter_child_nodes(node):
            visit(child, module, where, found)

    found = set()
    for path in sorted(Path(root).rglob("*.py")):
        text = path.read_text(encoding="utf-8")
        if "tokenizer" in text.lower():
            visit(ast.parse(text), path.relative_to(root).with_suffix("").as_posix(), None, found)
    return found


def test_one_function_reads_a_tokenizer_file():
    # checkpoint.py's copy opens the file to copy its bytes; its kind comes from read_tokenizer_file
    root = Path(__file__).parent.parent / "zerollm"
    assert tokenizer_file_readers(root) == {("tokenizers/base", "read_tokenizer_file"),
                                            ("training/checkpoint", "_copy_tokenizer")}


def test_the_reader_check_sees_a_second_reader(tmp_path):
    (tmp_path / "x.py").write_text('def f(p):\n    return read_json(p, what="tokenizer.json")\n'
                                   'def g(p):\n    return read_json(p, what="meta.json")\n')
    assert tokenizer_file_readers(tmp_path) == {("x", "f")}


# ----------------------------------------------------------------------------
# train_tokenizer

@pytest.mark.parametrize("kind, vocab_size, kw, fragment", [
    ("wordpiece", None, {}, "unknown tokenizer"),
    ("byte", 300, {}, "always has vocab_size 256"),
    ("char", 10, {}, "drop --vocab-size"),
    ("char", None, {}, "empty text"),
    ("bpe", None, {}, "needs a vocab_size"),
    ("bpe", 300, {"pattern": "[a-"}, "not a valid regex"),
])
def test_train_tokenizer_errors(kind, vocab_size, kw, fragment):
    with pytest.raises(ZeroLLMError, match=fragment):
        train_tokenizer(kind, "" if kind == "char" and vocab_size is None else "some text",
                        vocab_size, **kw)


def test_train_tokenizer_kinds():
    assert train_tokenizer("byte", "ignored").vocab_size == 256
    assert train_tokenizer("char", "abba", unk="<unk>").vocab_size == 3
    tok = train_tokenizer("bpe", "hello hello hello", 260, pattern="gpt2", special_tokens=())
    assert tok.pattern_name == "gpt2" and tok.vocab_size == 260
