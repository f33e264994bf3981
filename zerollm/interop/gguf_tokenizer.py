"""Tokenizers in GGUF metadata: byte, char and BPE tokenizers as GGUF's ``gpt2`` tokenizer model, and back.

    tokenizer.ggml.model       "gpt2"                    byte-level BPE (llama.cpp's name for it)
    tokenizer.ggml.pre         "gpt-2" | "llama-bpe" | "qwen2"   which split regex runs before the merges
    tokenizer.ggml.tokens      one string a token id     bytes spelled in GPT-2's byte alphabet
    tokenizer.ggml.token_type  1 normal, 3 control       our special tokens are control tokens (a char
                                                         tokenizer's unk: 2 unknown; padding: 5 unused)
    tokenizer.ggml.merges      "left right" in rank order
    zerollm.split_regex        our regex itself, so that zerollm reads back exactly what it wrote

What is carried (docs/gguf.md):
- bpe: as it is. Split pattern 'gpt2' -> pre "gpt-2"; 'gpt4' -> "llama-bpe" (llama.cpp and
  transformers use Llama 3's regex, cl100k's family); Llama 3's own regex -> "llama-bpe"; Qwen2's -> "qwen2"
  (read back with Qwen's NFC normalization); any other regex is refused.
- byte: the 256 byte tokens with no merges: each byte is its own token under every pre-tokenizer.
- char: each character is one token, its UTF-8 bytes joined by merges that name no token of their
  own (char_merges). llama.cpp merges by rank and looks a word's pieces up only at the end, so a
  partial character needs no id: the file has exactly the model's ids and no extra token rows (a
  SentencePiece vocabulary would need 256 byte pieces, rows whose logits GPT-2's layout, without an
  output bias, could not hold down). A character outside the vocabulary: llama.cpp leaves it out.
llama.cpp refuses a "gpt2" tokenizer without merges, and GGUF has no empty arrays: a tokenizer with
none (byte, or characters of one byte each) gets NO_MERGE, a merge no text can reach.
Reading, only "gpt2" is accepted (SentencePiece "llama" and the others are refused by name); a file in
the char form comes back as a CharTokenizer with the same ids.
"""

from zerollm.io.errors import ZeroLLMError
from zerollm.interop.gguf_meta import value
from zerollm.tokenizers.patterns import LLAMA3_PATTERN, QWEN2_PATTERN, known_pattern

NORMAL, UNKNOWN, CONTROL, UNUSED = 1, 2, 3, 5
PRE_OF_PATTERN = {"gpt2": "gpt-2", "gpt4": "llama-bpe"}
# llama.cpp's pre-tokenizer names: GPT-2's regex, or Llama 3's (the cl100k family) for Llama 3 style files
PATTERN_OF_PRE = {"gpt-2": "gpt2", "default": "gpt2", "llama-bpe": LLAMA3_PATTERN, "llama3": LLAMA3_PATTERN,
                  "qwen2": QWEN2_PATTERN}
PRE_OF_REGEX = {LLAMA3_PATTERN: "llama-bpe", QWEN2_PATTERN: "qwen2"}    # imported tokenizers' regexes, by text
SPLIT_KEY = "zerollm.split_regex"
# the one merge of a tokenizer that has none: its left side is two characters that no merge makes, so
# llama.cpp never finds the pair in a text
NO_MERGE = "ĠĠ ĠĠ"


# ----------------------------------------------------------------------------
# writing

def tokenizer_problems(tok):
    """What GGUF cannot carry of ``tok``, each with its fix: [] when it carries it all."""
    if tok.name == "bpe" and tok.pattern_name not in PRE_OF_PATTERN and tok.pattern not in PRE_OF_REGEX:
        return ["the BPE tokenizer splits text with a custom regex that GGUF readers do not know; "
                "train it with --pattern gpt2 or gpt4"]
    return []


def tokenizer_fields(tok, vocab_size):
    """{"tokens", "types", "merges", "pre", "regex", "special"} for ``tok``, padded to the model's ``vocab_size``
    (ids the tokenizer lacks become unused "[PADi]" tokens, never produced by encoding). "special": the
    {"bos"/"eos": id} llama.cpp is told. ``tok`` must have no tokenizer_problems."""
    from zerollm.tokenizers.hf import bytes_to_unicode, token_string
    table = bytes_to_unicode()
    vocab, merges, pre, regex = _pieces(tok, table)
    tokens, types = [f"[PAD{i}]" for i in range(vocab_size)], [UNUSED] * vocab_size
    for i, b in vocab.items():
        tokens[i], types[i] = token_string(b, table), NORMAL
    for text, i in tok.special_tokens.items():
        tokens[i], types[i] = text, CONTROL
    if getattr(tok, "unk", None) is not None:                  # a char tokenizer's id for unknown characters
        tokens[tok.unk_id], types[tok.unk_id] = tok.unk, UNKNOWN
    return {"tokens": tokens, "types": types, "merges": merges or [NO_MERGE], "pre": pre, "regex": regex,
            "special": special_ids(tok, vocab)}


def _pieces(tok, table):
    """({id: bytes} of the plain tokens, the merges as GGUF's "left right" lines, llama.cpp's pre-tokenizer
    name, the split regex zerollm.split_regex records or None)."""
    from zerollm.tokenizers.hf import token_string
    if tok.name == "byte":
        return {b: bytes([b]) for b in range(256)}, [], "gpt-2", "gpt2"
    if tok.name == "char":
        vocab = char_vocab(tok)
        return vocab, char_merges(vocab.values(), table), "gpt-2", None
    names = {i: token_string(b, table) for i, b in tok.vocab.items()}
    merges = [f"{names[a]} {names[b]}" for a, b, _ in tok.merges]
    pre = PRE_OF_PATTERN[tok.pattern_name] if tok.pattern_name in PRE_OF_PATTERN else PRE_OF_REGEX[tok.pattern]
    return tok.vocab, merges, pre, tok.pattern


def char_vocab(tok):
    """{id: UTF-8 bytes} of a char tokenizer's characters (its trained ones and those added later)."""
    specials = set(tok.special_tokens.values())
    return {i: tok.decode([i]).encode("utf-8") for i in range(tok.vocab_size)
            if i not in specials and i != tok.unk_id}


def char_merges(words, table):
    """The merges that join each character's UTF-8 bytes into it, left to right, in GPT-2's byte alphabet:
    '你' (e4 bd a0) -> ['ä ½', 'ä½ ł']. No merge crosses two characters (its right side is always a
    continuation byte 10xxxxxx, which never starts a character), and the partial characters ('ä½') are
    no tokens: llama.cpp looks a word's pieces up only when no merge applies any more."""
    from zerollm.tokenizers.hf import token_string
    out = {}
    for b in words:
        for k in range(1, len(b)):
            out.setdefault(f"{token_string(b[:k], table)} {token_string(b[k:k + 1], table)}", None)
    return list(out)


def special_ids(tok, vocab):
    """{"bos"/"eos": id} llama.cpp is told. Without an end token of its own, a char tokenizer names its
    newline (``vocab``: {id: bytes}): llama.cpp takes id 11 when a file names no eos, and in a char
    vocabulary that is a letter, where generation would stop."""
    from zerollm.interop.hf.exporting import _special_ids
    ids = _special_ids(tok)
    if tok.name == "char" and "eos" not in ids:
        ids.update({"eos": i for i, b in vocab.items() if b == b"\n"})
    return ids


# ----------------------------------------------------------------------------
# reading

def read_tokenizer(meta, where, n_vocab):
    """A zerollm tokenizer from the GGUF metadata dict ``meta``, or None when the file has none. ``n_vocab``: the
    model's token rows; every token id must have one. Each key is checked by gguf_meta.value."""
    model = value(meta, "tokenizer.ggml.model", where, None)
    if model is None:
        return None
    if model != "gpt2":
        raise ZeroLLMError(f"{where}: tokenizer.ggml.model is {model!r}; zerollm reads only byte-level BPE "
                           "('gpt2', as GPT-2 and Llama 3 files have), not SentencePiece or other kinds")
    tokens, types = value(meta, "tokenizer.ggml.tokens", where, []), value(meta, "tokenizer.ggml.token_type", where, [])
    if not tokens or len(types) not in (0, len(tokens)):
        raise ZeroLLMError(f"{where}: tokenizer.ggml.tokens / token_type are missing or of different lengths")
    if len(tokens) > n_vocab:
        raise ZeroLLMError(f"{where}: metadata key tokenizer.ggml.tokens lists {len(tokens)} tokens but the model has "
                           f"{n_vocab} token rows (token_embd.weight); the file is damaged")
    for key in ("tokenizer.ggml.bos_token_id", "tokenizer.ggml.eos_token_id"):
        if value(meta, key, where, 0) >= len(tokens):
            raise ZeroLLMError(f"{where}: metadata key {key} is {meta[key]}, past the {len(tokens)} "
                               "tokens of tokenizer.ggml.tokens; the file is damaged")
    types = types or [NORMAL] * len(tokens)
    lines = value(meta, "tokenizer.ggml.merges", where, [])
    lines = [] if lines == [NO_MERGE] else lines         # alone, it stands for none; code models merge "ĠĠ ĠĠ" too
    merges = [tuple(m.split(" ")) for m in lines]
    if any(len(m) != 2 for m in merges):
        raise ZeroLLMError(f"{where}: a merge in tokenizer.ggml.merges is not two tokens separated by one space")
    specials = {t: i for i, (t, k) in enumerate(zip(tokens, types)) if k == CONTROL}
    plain = {t: i for i, (t, k) in enumerate(zip(tokens, types)) if k not in (CONTROL, UNUSED)}
    # neither a byte nor a char tokenizer splits text before its lookups: no regex is read for them
    return (_byte_tokenizer(plain, specials, merges) or _char_tokenizer(tokens, types, lines)
            or _bpe_tokenizer(plain, specials, merges, _pattern(meta, where), where))


def _pattern(meta, where):
    """The split regex: ours (zerollm.split_regex), else the one llama.cpp's pre-tokenizer name stands for."""
    split = value(meta, SPLIT_KEY, where, None)
    if split is not None:
        return known_pattern(split, f"metadata key {SPLIT_KEY}", where)
    return _pattern_of_pre(value(meta, "tokenizer.ggml.pre", where, "default"), where)


def _pattern_of_pre(pre, where):
    if pre not in PATTERN_OF_PRE:
        raise ZeroLLMError(f"{where}: tokenizer.ggml.pre {pre!r} is a split regex zerollm does not know; "
                           f"it reads {', '.join(PATTERN_OF_PRE)}")
    return PATTERN_OF_PRE[pre]


def _byte_tokenizer(plain, specials, merges):
    """The 256 byte tokens in byte order and no merges: zerollm's byte tokenizer."""
    from zerollm.tokenizers.byte import ByteTokenizer
    from zerollm.tokenizers.hf import bytes_to_unicode
    table = bytes_to_unicode()
    if merges or plain != {table[b]: b for b in range(256)}:
        return None
    if sorted(specials.values()) != list(range(256, 256 + len(specials))):
        return None
    return ByteTokenizer(sorted(specials, key=specials.get))


def _char_tokenizer(tokens, types, merges):
    """A CharTokenizer with the file's ids when it holds tokenizer_fields' char form: one character a normal
    token, its bytes joined by exactly char_merges; characters first, then the unk token (type unknown), then
    characters and special tokens added later, then unused padding. Else None."""
    from zerollm.tokenizers import CharTokenizer
    from zerollm.tokenizers.hf import bytes_to_unicode, string_bytes
    table = bytes_to_unicode()
    inverse = {c: b for b, c in table.items()}
    kinds = [k for k in types if k != UNUSED]
    if UNUSED in types[:len(kinds)] or kinds.count(UNKNOWN) > 1:     # padding only at the end, one unk at most
        return None
    chars, words, unk, added = [], [], None, []
    for text, kind in zip(tokens, kinds):
        char = _one_char(string_bytes(text, inverse)) if kind == NORMAL else ""
        if char is None:
            return None
        words += [char.encode("utf-8")] if kind == NORMAL else []
        if kind == UNKNOWN and not added:
            unk = text
        elif kind == NORMAL and unk is None and not added:
            chars.append(char)
        elif kind in (NORMAL, CONTROL):
            added.append((char or text, kind == CONTROL))
        else:
            return None
    if not chars or set(merges) != set(char_merges(words, table)):
        return None
    return CharTokenizer(chars, unk=unk, added=added)


def _one_char(b):
    """The character the bytes ``b`` spell, or None when they are not exactly one (or not UTF-8)."""
    try:
        text = b.decode("utf-8") if b else ""
    except UnicodeDecodeError:
        return None
    return text if len(text) == 1 else None


def _bpe_tokenizer(plain, specials, merges, pattern, where):
    from zerollm.tokenizers import BPETokenizer
    from zerollm.tokenizers.hf import _build
    # Qwen's tokenizer.json puts text in NFC first; llama.cpp's "qwen2" does not, zerollm reads it as Qwen does
    normalizer = "NFC" if pattern == QWEN2_PATTERN else None
    return BPETokenizer(**_build(plain, merges, pattern, specials, where=where), normalizer=normalizer)
