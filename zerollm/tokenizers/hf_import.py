"""A zerollm tokenizer back from a Hugging Face ``tokenizer.json`` of the char or byte form that
hf_export.py describes (the general byte-level BPE importer is hf.py)."""

from zerollm.io.errors import ZeroLLMError
from zerollm.tokenizers.byte import ByteTokenizer
from zerollm.tokenizers.char import CharTokenizer
from zerollm.tokenizers.hf import bytes_to_unicode, check_tokenizer_json

CHAR_SPLIT = {"type": "Split", "pattern": {"Regex": r"[\s\S]"}, "behavior": "Isolated", "invert": False}


def tokenizer_from_json(data, path):
    """A zerollm tokenizer from a tokenizer.json dict written by ``write_tokenizer_json``: WordLevel over
    single characters -> char, byte-level BPE without merges over the 256 bytes -> byte; else None
    (the caller tries the general BPE importer)."""
    check_tokenizer_json(data, path)
    model, specials = data.get("model") or {}, {t["content"]: t["id"] for t in data.get("added_tokens", [])}
    vocab = model.get("vocab", {})
    if model.get("type") == "WordLevel" and data.get("pre_tokenizer") == CHAR_SPLIT:
        return _char_from(vocab, model.get("unk_token"), specials, path)
    if model.get("type") == "BPE" and not model.get("merges") and (data.get("decoder") or {}).get("type") == "ByteLevel":
        table = bytes_to_unicode()
        if all(vocab.get(table[b]) == b for b in range(256)) and set(vocab) - set(specials) == set(table.values()):
            return ByteTokenizer(sorted(specials, key=specials.get))
    return None


def _char_from(vocab, unk_token, specials, path):
    """Ids in order: the leading plain characters, then unk (if the vocabulary has it), then the rest."""
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
