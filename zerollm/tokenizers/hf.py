"""Hugging Face interop for BPETokenizer: write a ``tokenizer.json``; read GPT-2's files.

GPT-2 stores tokens as *strings*, not bytes: each byte is shown as one printable character
(``bytes_to_unicode``), so the space before a word appears as 'Ġ' and "Ġthe" means b" the".
Hugging Face's ``ByteLevel`` pre-tokenizer and decoder use the same table.

Three files exist in the wild:
    vocab.json   {"Ġthe": 262, ...}        token string -> id
    merges.txt   "#version: 0.2" then "Ġ t" lines, in rank order
    tokenizer.json   everything above plus the pre-tokenizer, decoder and added tokens

Only data is read (``json.load`` and text lines); nothing here runs code from a file.
"""

import json
import os

from zerollm.io.errors import ZeroLLMError
from zerollm.io.fileio import open_regular
from zerollm.tokenizers.base import read_json_file
from zerollm.tokenizers.patterns import GPT2_PATTERN, known_pattern, split_text


# ----------------------------------------------------------------------------
# GPT-2's byte <-> character table

def bytes_to_unicode():
    """{byte: char}. Printable Latin-1 bytes map to themselves; the other 68 (control chars,
    space, 127-160, 173) map to chr(256), chr(257), ... in byte order, so every token is a
    string of visible characters (GPT-2, openai/gpt-2 src/encoder.py).

    >>> table = bytes_to_unicode()
    >>> table[ord("a")], table[ord(" ")], table[ord("\\n")]
    ('a', 'Ġ', 'Ċ')
    """
    keep = [*range(ord("!"), ord("~") + 1), *range(ord("¡"), ord("¬") + 1), *range(ord("®"), 256)]
    table, extra = {}, 0
    for b in range(256):
        if b in keep:
            table[b] = chr(b)
        else:
            table[b] = chr(256 + extra)
            extra += 1
    return table


def token_string(b, table):
    return "".join(table[x] for x in b)


def string_bytes(s, inverse):
    """A GPT-2 token string back to bytes, or None if it holds a character outside the table."""
    try:
        return bytes(inverse[c] for c in s)
    except KeyError:
        return None


# ----------------------------------------------------------------------------
# export: tokenizer.json

# A probe text for checking that Hugging Face's regex engine (Oniguruma) splits like ours.
PROBE = ("Hello, world! It's 2024: I'LL pay $3.50 (or 12345 yen)...\n\n  \t indented\r\n"
         "你好，世界。秦川雄帝宅，函谷壮皇居。 😀👍🏽 naïve café  \u00a0\u2003end \x00\x7f")


def hf_tokenizer_dict(tok):
    """The tokenizer.json contents for a BPETokenizer (a dict ready for json.dump)."""
    table = bytes_to_unicode()
    names = {i: token_string(b, table) for i, b in tok.vocab.items()}
    vocab = {names[i]: i for i in sorted(names)}
    for s, i in tok.special_tokens.items():
        vocab.setdefault(s, i)          # GPT-2 lists <|endoftext|> in vocab.json too
    byte_level = {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True}
    return {
        "version": "1.0", "truncation": None, "padding": None,
        "added_tokens": [{"id": i, "content": s, "single_word": False, "lstrip": False,
                          "rstrip": False, "normalized": False, "special": True}
                         for s, i in sorted(tok.special_tokens.items(), key=lambda kv: kv[1])],
        "normalizer": {"type": tok.normalizer} if tok.normalizer else None,
        # split with our regex ("isolated": matches and the text between them become pieces),
        # then map bytes to GPT-2 characters without splitting again (use_regex False)
        "pre_tokenizer": {"type": "Sequence", "pretokenizers": [
            {"type": "Split", "pattern": {"Regex": tok.pattern}, "behavior": "Isolated", "invert": False},
            {**byte_level, "use_regex": False}]},
        "post_processor": None,
        "decoder": {**byte_level, "use_regex": False},
        "model": {"type": "BPE", "dropout": None, "unk_token": None, "continuing_subword_prefix": None,
                  "end_of_word_suffix": None, "fuse_unk": False, "byte_fallback": False,
                  "ignore_merges": False, "vocab": vocab,
                  "merges": [f"{names[a]} {names[b]}" for a, b, _ in tok.merges]},
    }


def check_with_hf(tok, text_json):
    """If the `tokenizers` package is installed, load the JSON with it and compare, on PROBE,
    both the pre-split pieces and the ids with ours."""
    try:
        from tokenizers import Tokenizer
    except ImportError:
        return
    try:
        hf = Tokenizer.from_str(text_json)
        pieces = [piece for piece, _ in hf.pre_tokenizer.pre_tokenize_str(PROBE)]
        ids = hf.encode(PROBE).ids
    except Exception as err:   # noqa: BLE001 - any failure inside the Rust library means "cannot express"
        raise ZeroLLMError(f"Hugging Face tokenizers cannot use this tokenizer ({err}); the split "
                           f"regex {tok.pattern!r} may use a feature its regex engine (Oniguruma) "
                           "lacks: use pattern 'gpt2' or 'gpt4'") from None
    table = bytes_to_unicode()
    ours = [token_string(c.encode("utf-8"), table)
            for c in split_text(PROBE, tok._regex, tok.pattern_name is not None)]
    if pieces != ours or ids != tok.encode(PROBE):
        raise ZeroLLMError(f"Hugging Face's regex engine (Oniguruma) splits text differently with "
                           f"the pattern {tok.pattern!r}, so tokenizer.json would give other ids; "
                           "use pattern 'gpt2' or 'gpt4'")


def bpe_tokenizer_json(tok):
    """The tokenizer.json text of a BPETokenizer, after checking Hugging Face splits and encodes alike."""
    text_json = json.dumps(hf_tokenizer_dict(tok), ensure_ascii=False, indent=2)
    check_with_hf(tok, text_json)
    return text_json


# ----------------------------------------------------------------------------
# import: GPT-2 files and tokenizer.json -> arguments of BPETokenizer(...)

def _build(vocab_strings, merge_strings, pattern, specials=None, where="vocab.json"):
    """{token string: id} + [(left string, right string)] -> BPETokenizer keyword arguments.

    ``specials``: {text: id} when the file lists them (tokenizer.json's added tokens). When None
    (vocab.json), every token that is neither a single byte nor the result of a merge is special:
    that is how GPT-2's <|endoftext|> is found.
    """
    inverse = {c: b for b, c in bytes_to_unicode().items()}
    listed = specials is not None
    specials = dict(specials or {})
    merged = {left + right for left, right in merge_strings}
    vocab = {}
    for s, i in vocab_strings.items():
        if specials.get(s) == i:
            continue
        b = string_bytes(s, inverse)
        if listed and b is None:
            raise ZeroLLMError(f"{where}: token {s!r} is not a byte-level token; only "
                               "byte-level BPE (GPT-2 style) tokenizers can be imported")
        if not listed and (b is None or (len(b) > 1 and s not in merged)):
            specials[s] = i
        else:
            vocab[i] = b
    present = set(vocab.values())
    missing = [x for x in range(256) if bytes([x]) not in present]
    if missing:
        shown = bytes_to_unicode()[missing[0]]
        raise ZeroLLMError(f"{where}: the vocabulary lacks {len(missing)} of the 256 single-byte tokens (the first: "
                           f"byte {missing[0]}, written {shown!r}); a byte-level BPE tokenizer needs every one: the "
                           "file is incomplete, or its tokenizer is not GPT-2 style")
    merges = []
    for left, right in merge_strings:
        try:
            merges.append((vocab_strings[left], vocab_strings[right], vocab_strings[left + right]))
        except KeyError as err:
            raise ZeroLLMError(f"{where}: merge '{left} {right}' needs token {err}, which is not "
                               "in the vocabulary; do these files belong together?") from None
    return {"pattern": pattern, "merges": merges, "special_tokens": specials, "vocab": vocab}


def read_merges_txt(path):
    """merges.txt lines 'Ġ t' -> [('Ġ', 't'), ...]; the '#version' header and blank lines skipped."""
    if not os.path.exists(path):
        raise ZeroLLMError(f"merges file not found: {path}")
    pairs = []
    with open_regular(path, "r", what="merges file", encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            line = line.rstrip("\r\n")
            if not line or (n == 1 and line.startswith("#version")):
                continue
            parts = line.split(" ")
            if len(parts) != 2:
                raise ZeroLLMError(f"{path} line {n}: expected two tokens separated by one space, "
                                   f"got {line!r}")
            pairs.append(tuple(parts))
    return pairs


def read_gpt2_files(vocab_json, merges_txt):
    vocab = read_json_file(vocab_json, "vocab.json")
    if not all(isinstance(i, int) for i in vocab.values()):
        raise ZeroLLMError(f"{vocab_json}: expected {{token: integer id}}")
    return _build(vocab, read_merges_txt(merges_txt), "gpt2", where=os.fspath(vocab_json))


def _pattern_of(pre, path):
    """The split regex of a tokenizer.json pre-tokenizer (GPT-2 ByteLevel, or Split + ByteLevel)."""
    def byte_level_ok(p, use_regex):
        return (p.get("type") == "ByteLevel" and not p.get("add_prefix_space", True)
                and p.get("use_regex", True) == use_regex)

    if pre is not None and byte_level_ok(pre, True):
        return GPT2_PATTERN
    if pre is not None and pre.get("type") == "Sequence" and len(pre.get("pretokenizers", [])) == 2:
        split, byte_level = pre["pretokenizers"]
        pattern = split.get("pattern", {}) if split.get("type") == "Split" else {}
        if ("Regex" in pattern and split.get("behavior") == "Isolated" and not split.get("invert")
                and byte_level_ok(byte_level, False)):
            return known_pattern(pattern["Regex"], "the pre_tokenizer's Split \"Regex\"", path)
    raise ZeroLLMError(f"{path}: unsupported pre_tokenizer; zerollm imports ByteLevel "
                       "(add_prefix_space false) or Split(regex, isolated) + ByteLevel(use_regex false)")


def check_tokenizer_json(data, path):
    """The parts of a tokenizer.json that the importers read have the types its format gives them, or a
    ZeroLLMError says which one is wrong (a hand edit or a damaged file, not a traceback)."""
    def wrong(what, expected):
        return ZeroLLMError(f"{path}: {what} must be {expected}; the file is damaged or not a Hugging Face "
                            "tokenizer.json")

    def whole(x):
        return isinstance(x, int) and not isinstance(x, bool) and x >= 0

    model = data.get("model")
    if model is not None and not isinstance(model, dict):
        raise wrong('"model"', "a JSON object")
    model = model or {}
    if model.get("type") not in ("BPE", "WordLevel"):   # e.g. Unigram (a list vocabulary): the importers say
        model = {}                                     # that they read BPE only, in their own words
    vocab = model.get("vocab", {})
    if not (isinstance(vocab, dict) and all(whole(i) for i in vocab.values())):
        raise wrong('"model.vocab"', "an object of token: id (a whole number >= 0)")
    merges = model.get("merges", [])
    if not (isinstance(merges, list) and all(
            (isinstance(m, str) and m.count(" ") == 1)
            or (isinstance(m, list) and len(m) == 2 and all(isinstance(x, str) for x in m)) for m in merges)):
        raise wrong('"model.merges"', 'a list of "left right" strings or [left, right] pairs')
    added = data.get("added_tokens", [])
    if not (isinstance(added, list) and all(isinstance(t, dict) and isinstance(t.get("content"), str)
                                             and whole(t.get("id")) for t in added)):
        raise wrong('"added_tokens"', 'a list of {"id": whole number, "content": text} objects')
    for key in ("pre_tokenizer", "decoder", "normalizer"):
        if data.get(key) is not None and not isinstance(data[key], dict):
            raise wrong(f'"{key}"', "a JSON object or null")
    parts = (data.get("pre_tokenizer") or {}).get("pretokenizers", [])
    if not (isinstance(parts, list) and all(isinstance(p, dict) for p in parts)):
        raise wrong('"pre_tokenizer.pretokenizers"', "a list of JSON objects")
    pattern = parts[0].get("pattern", {}) if parts else {}
    if not isinstance(pattern, dict):
        raise wrong('"pre_tokenizer.pretokenizers[0].pattern"', "a JSON object")


def hf_bpe_arguments(data, path):
    """BPETokenizer keyword arguments from ``data``, the JSON of a byte-level BPE tokenizer.json at ``path``
    (zerollm.tokenizers.base.read_tokenizer_file reads it)."""
    check_tokenizer_json(data, path)
    model = data.get("model") or {}
    if model.get("type") != "BPE":
        raise ZeroLLMError(f"{path}: model type is {model.get('type')!r}; only BPE can be imported")
    normalizer = data.get("normalizer")
    if normalizer is not None and normalizer != {"type": "NFC"}:
        raise ZeroLLMError(f"{path}: has a normalizer zerollm does not implement ({str(normalizer)[:60]}); "
                           "only NFC (Qwen2's and Qwen3's) is")
    for key in ("continuing_subword_prefix", "end_of_word_suffix", "dropout", "byte_fallback",
                "ignore_merges"):
        if model.get(key):
            raise ZeroLLMError(f"{path}: BPE option {key}={model[key]!r} is not supported")
    pattern = _pattern_of(data.get("pre_tokenizer"), path)
    merges = [tuple(m.split(" ")) if isinstance(m, str) else tuple(m) for m in model.get("merges", [])]
    specials = {t["content"]: t["id"] for t in data.get("added_tokens", [])}
    return dict(_build(model.get("vocab", {}), merges, pattern, specials, where=os.fspath(path)),
                normalizer="NFC" if normalizer else None)
