"""Hugging Face interop: our BPE exported as tokenizer.json gives the same ids in `tokenizers`;
GPT-2-style files made by `tokenizers` import into zerollm and give the same ids as
`tokenizers` and `transformers`."""

import json
import re

import pytest
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
from transformers import GPT2TokenizerFast

from zerollm.io.errors import ZeroLLMError
from zerollm.tokenizers import ENDOFTEXT, BPETokenizer, find_tokenizer, load_tokenizer
from zerollm.tokenizers.hf import bytes_to_unicode

TRICKY = ["", "a", "你好，世界。秦川雄帝宅 😀👍🏽🇨🇳", "   lots   of\n\n\n spaces\t\t end  ",
          "it's they'll I'M 'S we've", "12345 3.14159 007 1,000,000", "naïve café\u00a0\u2003x",
          "\r\n\r\nwindows\r\n", "x<|endoftext|>y"]


@pytest.fixture(scope="module")
def corpora(shakespeare_path, tang_path):
    return {"shakespeare": shakespeare_path.read_text(encoding="utf-8"),
            "tang": tang_path.read_text(encoding="utf-8")}


# ----------------------------------------------------------------------------
# GPT-2's byte <-> character table

def test_bytes_to_unicode_matches_hugging_face():
    table = bytes_to_unicode()
    assert len(set(table.values())) == 256
    assert set(table.values()) == set(pre_tokenizers.ByteLevel.alphabet())
    byte_level = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)
    ascii_text = "".join(chr(b) for b in range(128))
    [(mapped, _)] = byte_level.pre_tokenize_str(ascii_text)
    assert mapped == "".join(table[b] for b in range(128))
    assert (table[32], table[10], table[ord("A")]) == ("Ġ", "Ċ", "A")


# ----------------------------------------------------------------------------
# export: zerollm -> tokenizer.json

@pytest.fixture(scope="module", params=["gpt4", "gpt2"])
def exported(request, corpora, tmp_path_factory):
    text = corpora["shakespeare"][:150_000] + corpora["tang"][:30_000]
    tok = BPETokenizer.train(text, 1024, pattern=request.param)
    path = tmp_path_factory.mktemp(request.param) / "tokenizer.json"
    tok.to_hf_tokenizer_json(path)
    return tok, Tokenizer.from_file(str(path)), path


@pytest.mark.slow
@pytest.mark.parametrize("corpus", ["shakespeare", "tang"])
def test_exported_tokenizer_gives_the_same_ids_on_a_whole_corpus(exported, corpora, corpus):
    tok, hf, _ = exported
    text = corpora[corpus]
    ids = tok.encode(text)
    assert hf.encode(text).ids == ids
    assert hf.decode(ids) == text


def test_exported_tokenizer_on_tricky_strings(exported):
    tok, hf, path = exported
    for text in TRICKY:
        ids = tok.encode(text, allowed_special="all")     # HF always recognises added tokens
        assert hf.encode(text).ids == ids, text
        assert hf.decode(ids, skip_special_tokens=False) == text
    assert hf.token_to_id(ENDOFTEXT) == tok.special_tokens[ENDOFTEXT]
    assert hf.get_vocab_size() == tok.vocab_size
    # and it reads back into zerollm unchanged
    back = BPETokenizer.from_hf_tokenizer_json(path)
    assert (back.merges, back.vocab, back.special_tokens) == (tok.merges, tok.vocab, tok.special_tokens)
    assert back.pattern == tok.pattern


@pytest.mark.parametrize("pattern, fragment", [
    (r"(?|(a)|(b))|.", "Hugging Face tokenizers cannot use this tokenizer"),   # branch reset: no Oniguruma
    (r"\h+|.", "splits text differently"),         # \h: horizontal space here, hex digit there
])
def test_patterns_hugging_face_cannot_express(tmp_path, pattern, fragment):
    tok = BPETokenizer.train("ab  cd   ef\t\t" * 20, 270, pattern=pattern)
    with pytest.raises(ZeroLLMError, match=fragment):
        tok.to_hf_tokenizer_json(tmp_path / "tokenizer.json")
    assert not (tmp_path / "tokenizer.json").exists()


# ----------------------------------------------------------------------------
# import: GPT-2 style files made by Hugging Face -> zerollm

def train_hf_gpt2_style(text, vocab_size=1000, full_alphabet=True):
    hf = Tokenizer(models.BPE())
    hf.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    hf.decoder = decoders.ByteLevel()
    alphabet = pre_tokenizers.ByteLevel.alphabet() if full_alphabet else []
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=[ENDOFTEXT],
                                  initial_alphabet=alphabet, show_progress=False)
    hf.train_from_iterator([text], trainer)
    return hf


@pytest.fixture(scope="module")
def gpt2_files(corpora, tmp_path_factory):
    """A GPT-2-style tokenizer as HF saves it: vocab.json + merges.txt in one folder,
    tokenizer.json in another. Note HF puts <|endoftext|> at id 0, not at the end."""
    hf = train_hf_gpt2_style(corpora["shakespeare"][:200_000])
    files = tmp_path_factory.mktemp("gpt2_files")
    hf.model.save(str(files))
    full = tmp_path_factory.mktemp("gpt2_json")
    hf.save(str(full / "tokenizer.json"))
    return hf, files, full


def imported_all_ways(files, full):
    return {"vocab+merges": BPETokenizer.from_gpt2_files(files / "vocab.json", files / "merges.txt"),
            "tokenizer.json": BPETokenizer.from_hf_tokenizer_json(full / "tokenizer.json"),
            "dir (vocab+merges)": find_tokenizer(files),
            "dir (tokenizer.json)": find_tokenizer(full)}


@pytest.mark.slow
def test_imported_gpt2_files_agree_with_hugging_face(gpt2_files, corpora):
    hf, files, full = gpt2_files
    toks = imported_all_ways(files, full)
    tok = toks["vocab+merges"]
    for name, other in toks.items():
        assert other.special_tokens == {ENDOFTEXT: 0}, name
        assert other.vocab_size == hf.get_vocab_size() == 1000, name
        assert other.pattern_name == "gpt2", name
        assert (other.merges, other.vocab) == (tok.merges, tok.vocab), name
    for text in [*TRICKY, corpora["shakespeare"], corpora["tang"]]:
        ids = tok.encode(text, allowed_special="all")
        assert hf.encode(text).ids == ids, text[:40]
        assert tok.decode(ids) == text


def test_imported_gpt2_files_agree_with_transformers(gpt2_files, corpora):
    _, files, full = gpt2_files
    tok = BPETokenizer.from_gpt2_files(files / "vocab.json", files / "merges.txt")
    # from_pretrained reads vocab.json + merges.txt in every transformers version (4.x names the
    # constructor arguments vocab_file/merges_file, 5.x vocab/merges)
    gpt2 = GPT2TokenizerFast.from_pretrained(str(files))
    assert gpt2.eos_token_id == tok.special_tokens[ENDOFTEXT]
    for text in [*TRICKY, corpora["shakespeare"][:300_000], corpora["tang"][:100_000]]:
        ids = tok.encode(text, allowed_special="all")
        assert gpt2.encode(text) == ids, text[:40]
        assert gpt2.decode(ids) == text


def test_imported_tokenizer_saves_loads_and_exports(gpt2_files, corpora, tmp_path):
    hf, files, _ = gpt2_files
    tok = find_tokenizer(files)
    tok.save(tmp_path / "zerollm.json")
    back = load_tokenizer(tmp_path / "zerollm.json")
    text = corpora["shakespeare"][:50_000] + TRICKY[2]
    assert back.encode(text) == tok.encode(text)
    back.to_hf_tokenizer_json(tmp_path / "tokenizer.json")           # non-standard ids survive
    assert Tokenizer.from_file(str(tmp_path / "tokenizer.json")).encode(text).ids == hf.encode(text).ids


# ----------------------------------------------------------------------------
# import errors

def _edit_json(src, dst, edit):
    data = json.loads(src.read_text(encoding="utf-8"))
    edit(data)
    dst.write_text(json.dumps(data), encoding="utf-8")
    return dst


@pytest.mark.parametrize("edit, fragment", [
    (lambda d: d["model"].update(type="WordPiece"), "only BPE"),
    (lambda d: d.update(normalizer={"type": "NFKC"}), "normalizer"),      # NFC (Qwen's) is read: tests/test_qwen.py
    (lambda d: d["pre_tokenizer"].update(add_prefix_space=True), "unsupported pre_tokenizer"),
    (lambda d: d.update(pre_tokenizer={"type": "Whitespace"}), "unsupported pre_tokenizer"),
    (lambda d: d["model"].update(ignore_merges=True), "ignore_merges"),
    (lambda d: d["model"]["merges"].append(["Ġzz", "top"]), "not in the vocabulary"),
    (lambda d: d["model"]["vocab"].update({"日本": 5000}), "not a byte-level token"),
])
def test_bad_tokenizer_json(gpt2_files, tmp_path, edit, fragment):
    _, _, full = gpt2_files
    path = _edit_json(full / "tokenizer.json", tmp_path / "tokenizer.json", edit)
    with pytest.raises(ZeroLLMError, match=fragment):
        BPETokenizer.from_hf_tokenizer_json(path)


@pytest.mark.parametrize("edit, fragment", [
    (lambda d: d.update(added_tokens=[{"id": "x"}]), '"added_tokens" must be a list'),
    (lambda d: d.update(added_tokens={"a": 1}), '"added_tokens" must be a list'),
    (lambda d: d["model"].update(vocab=[1, 2]), '"model.vocab" must be an object'),
    (lambda d: d["model"]["vocab"].update(x=-1), '"model.vocab" must be an object'),
    (lambda d: d["model"]["merges"].append("a b c"), '"model.merges" must be a list'),
    (lambda d: d["model"]["merges"].append([1, 2]), '"model.merges" must be a list'),
    (lambda d: d.update(model=[]), '"model" must be a JSON object'),
    (lambda d: d.update(pre_tokenizer=5), '"pre_tokenizer" must be a JSON object or null'),
    (lambda d: d.update(decoder=[]), '"decoder" must be a JSON object or null'),
    (lambda d: d.update(pre_tokenizer={"type": "Sequence", "pretokenizers": [1, 2]}), "pretokenizers"),
    (lambda d: d.update(model={"type": "Unigram", "vocab": [["a", -1.0]]}), "only BPE can be imported"),   # valid
])
def test_tokenizer_json_of_the_wrong_shape_is_one_clear_error(gpt2_files, tmp_path, edit, fragment):
    """Hand edits or damage in the structure (types the format fixes), through both importers: the folder
    loader (which first tries zerollm's own char / byte forms) and the BPE one."""
    from zerollm.interop.hf.loading import load_tokenizer_dir
    _, _, full = gpt2_files
    path = _edit_json(full / "tokenizer.json", tmp_path / "tokenizer.json", edit)
    for load in (lambda: load_tokenizer_dir(tmp_path), lambda: BPETokenizer.from_hf_tokenizer_json(path)):
        with pytest.raises(ZeroLLMError, match=re.escape(fragment)) as err:
            load()
        assert "tokenizer.json" in str(err.value)


def test_bad_gpt2_files(gpt2_files, tmp_path):
    _, files, _ = gpt2_files
    merges = (files / "merges.txt").read_text(encoding="utf-8")
    (tmp_path / "merges.txt").write_text(merges + "a b c\n", encoding="utf-8")
    with pytest.raises(ZeroLLMError, match="two tokens separated by one space"):
        BPETokenizer.from_gpt2_files(files / "vocab.json", tmp_path / "merges.txt")
    with pytest.raises(ZeroLLMError, match="merges file not found"):
        BPETokenizer.from_gpt2_files(files / "vocab.json", tmp_path / "nope.txt")
    with pytest.raises(ZeroLLMError, match="neither tokenizer.json nor vocab.json"):
        find_tokenizer(tmp_path / "empty_dir_that_is_missing", required=True)


def test_vocabulary_without_all_bytes_is_refused(corpora, tmp_path):
    hf = train_hf_gpt2_style(corpora["shakespeare"][:20_000], 400, full_alphabet=False)
    hf.save(str(tmp_path / "tokenizer.json"))
    with pytest.raises(ZeroLLMError, match="the vocabulary lacks .* of the 256 single-byte tokens") as err:
        BPETokenizer.from_hf_tokenizer_json(tmp_path / "tokenizer.json")
    assert str(err.value).startswith(str(tmp_path / "tokenizer.json"))       # the file is named
