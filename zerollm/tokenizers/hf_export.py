"""Every zerollm tokenizer as a Hugging Face ``tokenizer.json`` (the format of the `tokenizers` library,
which ``transformers.AutoTokenizer`` loads), giving the same ids.

    char  ->  model WordLevel {character: id}, pre-tokenizer Split on every single character
              ([\\s\\S], "isolated"), decoder Fuse (concatenate the pieces, no spaces between them)
    byte  ->  model BPE with the 256 byte tokens and no merges, pre-tokenizer ByteLevel (each byte
              shown as one GPT-2 character, see hf.bytes_to_unicode), decoder ByteLevel
    bpe   ->  see hf.py (our merges, our split regex)

Special tokens become "added_tokens" with their own ids (special: true). Note one difference:
Hugging Face always recognises an added token's text inside the input, like our
``encode(text, allowed_special="all")``; our plain ``encode(text)`` does not (so that user text
cannot forge a role marker).
"""

import json

from zerollm.errors import ZeroLLMError
from zerollm.fileio import atomic_write


def added_tokens(specials):
    """{text: id} -> tokenizer.json's "added_tokens" list (by id)."""
    return [{"id": i, "content": s, "single_word": False, "lstrip": False, "rstrip": False,
             "normalized": False, "special": True} for s, i in sorted(specials.items(), key=lambda kv: kv[1])]


def with_specials(vocab, tok):
    """The model's vocabulary plus the special tokens. `tokenizers` numbers an added token that the model
    does not know after the model's vocabulary, whatever id the file gives it, so they are listed in
    both places (as GPT-2's vocab.json lists <|endoftext|>)."""
    return {**vocab, **tok.special_tokens}


def _skeleton(tok, pre_tokenizer, decoder, model):
    return {"version": "1.0", "truncation": None, "padding": None,
            "added_tokens": added_tokens(tok.special_tokens), "normalizer": None,
            "pre_tokenizer": pre_tokenizer, "post_processor": None, "decoder": decoder, "model": model}


def char_tokenizer_dict(tok):
    """A char tokenizer as WordLevel over single characters. Without ``unk``, an unknown character
    is an error there too ("<unk>" is named as unk_token but is not in the vocabulary)."""
    vocab = {c: i for c, i in tok._stoi.items()}
    if tok.unk is not None:
        vocab[tok.unk] = tok.unk_id
    vocab = dict(sorted(with_specials(vocab, tok).items(), key=lambda kv: kv[1]))
    split = {"type": "Split", "pattern": {"Regex": r"[\s\S]"}, "behavior": "Isolated", "invert": False}
    model = {"type": "WordLevel", "vocab": vocab, "unk_token": tok.unk if tok.unk is not None else "<unk>"}
    return _skeleton(tok, split, {"type": "Fuse"}, model)


def byte_tokenizer_dict(tok):
    """The byte tokenizer as byte-level BPE without merges: every byte is its own token."""
    from zerollm.tokenizers.hf import bytes_to_unicode
    table = bytes_to_unicode()
    byte_level = {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": False}
    model = {"type": "BPE", "dropout": None, "unk_token": None, "continuing_subword_prefix": None,
             "end_of_word_suffix": None, "fuse_unk": False, "byte_fallback": False, "ignore_merges": False,
             "vocab": with_specials({table[b]: b for b in range(256)}, tok), "merges": []}
    return _skeleton(tok, byte_level, dict(byte_level), model)


def _probe(tok):
    """Text to compare both libraries on: every ordinary token of a char tokenizer, or a mixed
    sample for the byte tokenizer, with every special token in between."""
    if tok.name == "char":
        text = "".join(tok._stoi)
    else:
        text = "Hello, world!\n你好，世界。 😀 naïve\t\r\n\x00\x7f"
    return text + "".join(tok.special_tokens) + text[:5]


def check_with_hf(tok, text_json):
    """If the `tokenizers` package is installed, load the JSON with it and compare the ids on a probe."""
    try:
        from tokenizers import Tokenizer
    except ImportError:
        return
    probe = _probe(tok)
    try:
        theirs = Tokenizer.from_str(text_json).encode(probe).ids
    except Exception as err:   # noqa: BLE001 - any failure inside the Rust library means "cannot express"
        raise ZeroLLMError(f"Hugging Face tokenizers cannot use this {tok.name} tokenizer ({err})") from None
    if theirs != tok.encode(probe, allowed_special="all"):
        raise ZeroLLMError(f"Hugging Face tokenizers would give other ids for this {tok.name} tokenizer; "
                           "please report this as a zerollm bug")


def write_tokenizer_json(tok, path):
    """Write ``tok`` (byte, char or bpe) as a Hugging Face tokenizer.json, atomically, after checking it."""
    if tok.name == "bpe":
        from zerollm.tokenizers.hf import write_hf_tokenizer_json
        write_hf_tokenizer_json(tok, path)
        return
    build = {"char": char_tokenizer_dict, "byte": byte_tokenizer_dict}.get(tok.name)
    if build is None:
        raise ZeroLLMError(f"no Hugging Face form for a {tok.name!r} tokenizer")
    text_json = json.dumps(build(tok), ensure_ascii=False, indent=2)
    check_with_hf(tok, text_json)
    with atomic_write(path, "w") as f:
        f.write(text_json)


# ----------------------------------------------------------------------------
# and back: the char and byte forms above -> zerollm tokenizers (BPE: hf.py)

CHAR_SPLIT = {"type": "Split", "pattern": {"Regex": r"[\s\S]"}, "behavior": "Isolated", "invert": False}


def tokenizer_from_json(data, path):
    """A zerollm tokenizer from a tokenizer.json dict written by ``write_tokenizer_json``: WordLevel over
    single characters -> char, byte-level BPE without merges over the 256 bytes -> byte; else None
    (the caller tries the general BPE importer)."""
    model, specials = data.get("model") or {}, {t["content"]: t["id"] for t in data.get("added_tokens", [])}
    if model.get("type") == "WordLevel" and data.get("pre_tokenizer") == CHAR_SPLIT:
        return _char_from(model["vocab"], model.get("unk_token"), specials, path)
    if model.get("type") == "BPE" and not model.get("merges") and data.get("decoder", {}).get("type") == "ByteLevel":
        from zerollm.tokenizers.byte import ByteTokenizer
        from zerollm.tokenizers.hf import bytes_to_unicode
        table = bytes_to_unicode()
        if all(model["vocab"].get(table[b]) == b for b in range(256)) and set(model["vocab"]) - set(specials) == \
                set(table.values()):
            return ByteTokenizer(sorted(specials, key=specials.get))
    return None


def _char_from(vocab, unk_token, specials, path):
    """Ids in order: the leading plain characters, then unk (if the vocabulary has it), then the rest."""
    from zerollm.tokenizers.char import CharTokenizer
    by_id = sorted(vocab.items(), key=lambda kv: kv[1])
    if [i for _, i in by_id] != list(range(len(by_id))):
        raise ZeroLLMError(f"{path}: a character vocabulary must use the ids 0, 1, 2, ... without gaps")
    chars, unk, added = [], None, []
    for text, i in by_id:
        if text in specials:
            added.append((text, True))
        elif text == unk_token and not added and unk is None:
            unk = text
        elif unk is None and not added:
            chars.append(text)
        else:
            added.append((text, False))
    return CharTokenizer(chars, unk=unk, added=added)
