"""Tokens appended to a trained tokenizer (special tokens for every kind, extra characters for char):
existing ids never move, a special token's text is one id when allowed, decode writes it back, the
versioned JSON keeps them; and every kind exports a Hugging Face tokenizer.json that AutoTokenizer loads
with the same ids, on whole corpora."""

import json

import pytest
from transformers import AutoTokenizer

from zerollm.interop import hf
from zerollm.io.errors import ZeroLLMError
from zerollm.model.gpt import GPT, GPTConfig
from zerollm.tokenizers import ENDOFTEXT, BPETokenizer, ByteTokenizer, CharTokenizer, load_tokenizer

SPECIALS = ["<|user|>", "<|assistant|>", "<|end|>"]
TEXT = "春眠不觉晓，处处闻啼鸟。\nTo be, or not"


@pytest.fixture(scope="module")
def corpora(shakespeare_path, tang_path):
    return {"shakespeare": shakespeare_path.read_text(encoding="utf-8"), "tang": tang_path.read_text(encoding="utf-8")}


@pytest.fixture(scope="module")
def base(corpora):
    text = corpora["shakespeare"][:20_000] + corpora["tang"][:5_000] + TEXT
    return {"byte": ByteTokenizer(), "char": CharTokenizer.train(text),
            "bpe": BPETokenizer.train(text, 400, special_tokens=(ENDOFTEXT,))}


@pytest.mark.parametrize("kind", ["byte", "char", "bpe"])
def test_special_tokens_are_appended_and_change_no_existing_id(base, kind):
    tok = base[kind]
    ext = tok.with_special_tokens(SPECIALS)
    assert tok.special_tokens.get("<|end|>") is None                         # the original is untouched
    assert [ext.special_tokens[s] for s in SPECIALS] == list(range(tok.vocab_size, tok.vocab_size + 3))
    assert ext.vocab_size == tok.vocab_size + 3
    assert ext.encode(TEXT) == tok.encode(TEXT)                              # old ids unchanged
    assert ext.with_special_tokens(SPECIALS[::-1]).to_dict() == ext.to_dict()   # idempotent


@pytest.mark.parametrize("kind", ["byte", "char", "bpe"])
def test_a_special_tokens_text_is_one_id_only_when_allowed(base, kind):
    ext = base[kind].with_special_tokens(SPECIALS)
    end, user = ext.special_tokens["<|end|>"], ext.special_tokens["<|user|>"]
    text = "<|user|>To be<|end|><|end|>"
    ids = ext.encode(text, allowed_special="all")
    assert ids == [user, *ext.encode("To be"), end, end]
    assert ext.decode(ids) == text
    assert ext.encode("To be<|end|><|end|>", allowed_special={"<|end|>"})[-2:] == [end, end]
    if kind == "char":          # '<' and '|' are not characters of this corpus: plain text cannot hold them
        with pytest.raises(ZeroLLMError, match="allowed_special='all'"):
            ext.encode(text)
    else:
        assert end not in ext.encode(text) and ext.decode(ext.encode(text)) == text   # plain text, many ids


def test_char_tokenizer_takes_extra_characters_after_its_own():
    tok = CharTokenizer.train("春夏秋冬")
    ext = tok.with_chars("藏头诗：春").with_special_tokens(["<|end|>"]).with_chars("！")
    assert ext.encode("春夏秋冬") == tok.encode("春夏秋冬")
    assert ext.encode("：") == [7] and ext.special_tokens == {"<|end|>": 8} and ext.encode("！") == [9]
    assert ext.decode(ext.encode("藏头诗：春！<|end|>", allowed_special="all")) == "藏头诗：春！<|end|>"
    assert ext.with_chars("：！春") is not ext and ext.with_chars("：！春").to_dict() == ext.to_dict()


@pytest.mark.parametrize("kind", ["byte", "char", "bpe"])
def test_appended_tokens_survive_save_and_load(base, tmp_path, kind):
    ext = base[kind].with_special_tokens(SPECIALS)
    if kind == "char":
        ext = ext.with_chars("：")
    ext.save(tmp_path / "t.json")
    back = load_tokenizer(tmp_path / "t.json")
    assert back.to_dict() == ext.to_dict() and back.special_tokens == ext.special_tokens
    text = "<|user|>藏头诗：" + TEXT + "<|end|>"
    if kind != "char":
        assert back.encode(text, allowed_special="all") == ext.encode(text, allowed_special="all")
    version = json.loads((tmp_path / "t.json").read_text(encoding="utf-8"))["version"]
    assert version == (1 if kind == "bpe" else 2)        # BPE's format always had special tokens
    base[kind].save(tmp_path / "plain.json")            # nothing appended: still version 1
    assert json.loads((tmp_path / "plain.json").read_text(encoding="utf-8"))["version"] == 1


@pytest.mark.parametrize("make, fragment", [
    (lambda: CharTokenizer.train("ab").with_special_tokens(["a"]), "already ordinary"),
    (lambda: CharTokenizer.train("ab").with_chars(["<x>"]), "single characters"),
    (lambda: CharTokenizer.train("ab").with_special_tokens(["x"]).with_chars("x"), "already special"),
    (lambda: ByteTokenizer().with_special_tokens([""]), "non-empty"),
    (lambda: ByteTokenizer(["<a>", "<a>"]), "distinct"),
])
def test_bad_appended_tokens(make, fragment):
    with pytest.raises(ZeroLLMError, match=fragment):
        make()


@pytest.mark.parametrize("content, fragment", [
    ('{"format": "zerollm-tokenizer", "version": 2, "type": "byte", "special_tokens": {"<a>": 300}}', "ids 256"),
    ('{"format": "zerollm-tokenizer", "version": 2, "type": "byte", "special_tokens": ["<a>"]}', "must be an object"),
    ('{"format": "zerollm-tokenizer", "version": 2, "type": "char", "chars": ["a"], "added": [["b"]]}', "pairs"),
    ('{"format": "zerollm-tokenizer", "version": 2, "type": "char", "chars": ["a"], "added": [["a", false]]}',
     "distinct"),
])
def test_damaged_appended_tokens(tmp_path, content, fragment):
    (tmp_path / "t.json").write_text(content, encoding="utf-8")
    with pytest.raises(ZeroLLMError, match=fragment):
        load_tokenizer(tmp_path / "t.json")


# ----------------------------------------------------------------------------
# Hugging Face: tokenizer.json for every kind, through AutoTokenizer

def _export(tok, folder):
    model = GPT(GPTConfig(vocab_size=tok.vocab_size, block_size=16, n_layer=1, n_head=2, n_embd=8))
    hf.export(model, folder, tokenizer=tok)
    return AutoTokenizer.from_pretrained(folder, model_max_length=10**9)


@pytest.mark.slow
@pytest.mark.parametrize("kind, corpus", [("char", "tang"), ("byte", "shakespeare")])
def test_autotokenizer_gives_the_same_ids_on_a_whole_corpus(corpora, tmp_path, kind, corpus):
    text = corpora[corpus]
    tok = (CharTokenizer.train(text) if kind == "char" else ByteTokenizer()).with_special_tokens(SPECIALS)
    theirs = _export(tok, tmp_path / "m")
    ids = tok.encode(text)
    assert theirs.encode(text, add_special_tokens=False) == ids
    assert theirs.decode(ids) == text
    tricky = "<|user|>" + text[:300] + "<|end|>"
    assert theirs.encode(tricky) == tok.encode(tricky, allowed_special="all")
    assert theirs.decode(tok.encode(tricky, allowed_special="all")) == tricky


def test_char_tokenizer_with_unk_and_extra_characters_exports(tmp_path):
    tok = CharTokenizer.train("春夏秋冬\n", unk="<unk>").with_chars("：").with_special_tokens(SPECIALS)
    theirs = _export(tok, tmp_path / "m")
    text = "春：夏\n冬X秋"                        # X is unknown: the unk id on both sides
    assert theirs.encode(text) == tok.encode(text) and tok.encode("X") == [tok.unk_id]


@pytest.mark.parametrize("make", [
    lambda: CharTokenizer.train("春夏秋冬\n").with_chars("：").with_special_tokens(SPECIALS),
    lambda: CharTokenizer.train("ab", unk="<unk>").with_special_tokens(SPECIALS).with_chars("c"),
    lambda: ByteTokenizer().with_special_tokens(SPECIALS),
    lambda: ByteTokenizer(),
])
def test_exported_char_and_byte_tokenizers_come_back_unchanged(tmp_path, make):
    tok = make()
    _export(tok, tmp_path / "m")
    back = hf.load_tokenizer_dir(tmp_path / "m")
    assert type(back) is type(tok) and back.special_tokens == tok.special_tokens
    assert back.vocab_size == tok.vocab_size and [back.decode([i]) for i in range(back.vocab_size)] == \
        [tok.decode([i]) for i in range(tok.vocab_size)]              # every id means the same text
    assert getattr(back, "unk", None) == getattr(tok, "unk", None)
