"""Every zerollm tokenizer as a Hugging Face ``tokenizer.json`` (the format of the `tokenizers` library,
which ``transformers.AutoTokenizer`` loads), giving the same ids.

    char  ->  model WordLevel {character: id}, pre-tokenizer Split on every single character
              ([\\s\\S], "isolated"), decoder Fuse (concatenate the pieces, no spaces between them)
    byte  ->  model BPE with the 256 byte tokens and no merges, pre-tokenizer ByteLevel (each byte
              shown as one GPT-2 character, see hf.bytes_to_unicode), decoder ByteLevel
    bpe   ->  see hf.py (our merges, our split regex)

Each tokenizer class builds its own dict (``hf_tokenizer_json``) from the pieces here, so this module
knows no tokenizer class; reading a tokenizer.json back is hf_import.py.

Special tokens become "added_tokens" with their own ids (special: true). Note one difference:
Hugging Face always recognises an added token's text inside the input, like our
``encode(text, allowed_special="all")``; our plain ``encode(text)`` does not (so that user text
cannot forge a role marker).
"""

import json

from zerollm.io.errors import ZeroLLMError


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


def checked_json(tok, data):
    """``data`` (a tokenizer.json dict for ``tok``) as JSON text, after checking the ids with `tokenizers`."""
    text_json = json.dumps(data, ensure_ascii=False, indent=2)
    check_with_hf(tok, text_json)
    return text_json
