"""Tokenizers in GGUF metadata: byte-level BPE as GGUF's ``gpt2`` tokenizer model, and back.

    tokenizer.ggml.model       "gpt2"                    byte-level BPE (llama.cpp's name for it)
    tokenizer.ggml.pre         "gpt-2" | "llama-bpe"     which split regex runs before the merges
    tokenizer.ggml.tokens      one string a token id     bytes spelled in GPT-2's byte alphabet
    tokenizer.ggml.token_type  1 normal, 3 control       our special tokens are control tokens
    tokenizer.ggml.merges      "left right" in rank order
    zerollm.split_regex        our regex itself, so that zerollm reads back exactly what it wrote

What is carried (docs/gguf.md):
- bpe: as it is. Split pattern 'gpt2' -> pre "gpt-2"; 'gpt4' -> "llama-bpe" (llama.cpp and
  transformers use Llama 3's regex, cl100k's family); any other regex is refused.
- byte: the 256 byte tokens with no merges: each byte is its own token under every pre-tokenizer.
- char: refused. GGUF has no character-level tokenizer model, and a character that is several
  UTF-8 bytes cannot be one token of a byte-level BPE without its partial-byte tokens.
Reading, only "gpt2" is accepted (SentencePiece "llama" and the others are refused by name).
"""

from zerollm.io.errors import ZeroLLMError
from zerollm.interop.gguf_meta import value
from zerollm.tokenizers.patterns import LLAMA3_PATTERN, known_pattern

NORMAL, CONTROL, UNUSED = 1, 3, 5
PRE_OF_PATTERN = {"gpt2": "gpt-2", "gpt4": "llama-bpe"}
# llama.cpp's pre-tokenizer names: GPT-2's regex, or Llama 3's (the cl100k family) for Llama 3 style files
PATTERN_OF_PRE = {"gpt-2": "gpt2", "default": "gpt2", "llama-bpe": LLAMA3_PATTERN, "llama3": LLAMA3_PATTERN}
SPLIT_KEY = "zerollm.split_regex"
CHAR_FIX = ("GGUF has no character-level tokenizer; train a byte-level one instead "
            "(zerollm train ... --tokenizer bpe, or --tokenizer byte), or convert with --no-tokenizer")


# ----------------------------------------------------------------------------
# writing

def tokenizer_fields(tok, vocab_size):
    """{"tokens", "types", "merges", "pre", "regex"} for ``tok``, padded to the model's ``vocab_size``
    (ids the tokenizer lacks become unused "[PADi]" tokens, never produced by encoding)."""
    from zerollm.tokenizers.hf import bytes_to_unicode, token_string
    if tok.name == "char":
        raise ZeroLLMError(f"the model's tokenizer is character-level: {CHAR_FIX}")
    table = bytes_to_unicode()
    if tok.name == "byte":
        vocab, merges, pattern, pre = {b: bytes([b]) for b in range(256)}, [], "gpt2", "gpt-2"
    else:
        pre = PRE_OF_PATTERN.get(tok.pattern_name)
        if pre is None:
            raise ZeroLLMError("the BPE tokenizer splits text with a custom regex that GGUF readers do not know; "
                               "train it with --pattern gpt2 or gpt4")
        vocab, merges, pattern = tok.vocab, tok.merges, tok.pattern
    tokens, types = [f"[PAD{i}]" for i in range(vocab_size)], [UNUSED] * vocab_size
    for i, b in vocab.items():
        tokens[i], types[i] = token_string(b, table), NORMAL
    for text, i in tok.special_tokens.items():
        tokens[i], types[i] = text, CONTROL
    names = {i: token_string(b, table) for i, b in vocab.items()}
    return {"tokens": tokens, "types": types, "merges": [f"{names[a]} {names[b]}" for a, b, _ in merges],
            "pre": pre, "regex": pattern}


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
    merges = [tuple(m.split(" ")) for m in value(meta, "tokenizer.ggml.merges", where, [])]
    if any(len(m) != 2 for m in merges):
        raise ZeroLLMError(f"{where}: a merge in tokenizer.ggml.merges is not two tokens separated by one space")
    specials = {t: i for i, (t, k) in enumerate(zip(tokens, types)) if k == CONTROL}
    plain = {t: i for i, (t, k) in enumerate(zip(tokens, types)) if k not in (CONTROL, UNUSED)}
    byte = _byte_tokenizer(plain, specials, merges)      # a byte tokenizer splits nothing: no regex is read
    return byte or _bpe_tokenizer(plain, specials, merges, _pattern(meta, where), where)


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


def _bpe_tokenizer(plain, specials, merges, pattern, where):
    from zerollm.tokenizers import BPETokenizer
    from zerollm.tokenizers.hf import _build
    return BPETokenizer(**_build(plain, merges, pattern, specials, where=where))
