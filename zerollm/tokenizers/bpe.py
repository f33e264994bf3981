"""BPETokenizer: byte-level byte-pair encoding, as in GPT-2 (Radford et al. 2019) and minbpe.

Start from the 256 bytes; repeatedly give the most frequent adjacent pair of tokens a new id.
Encoding replays the learned merges, lowest rank (= learned first) first. Because the base
vocabulary is all 256 bytes, any text can be encoded; nothing is ever unknown.

>>> tok = BPETokenizer.train("aaabdaaabac", 259, pattern=r".+", special_tokens=())
>>> [tok.token_bytes(i) for i in (256, 257, 258)]   # Wikipedia's example: aa, ab, then aa+ab
[b'aa', b'ab', b'aaab']
>>> tok.encode("aaabdaaabac")
[258, 100, 258, 97, 99]
>>> tok.decode([258, 100])
'aaabd'

Special tokens (e.g. "<|endoftext|>") get the ids after all merges. They are only recognised
in text when you allow them: ``encode(text, allowed_special="all")``; by default a special
token's text is encoded like any other text, so user input cannot forge one (``encode`` and the
special-token handling live in tokenizers/base.py, shared with the byte and char tokenizers).
"""

import unicodedata

from zerollm.engine import accelerated
from zerollm.io.errors import ZeroLLMError
from zerollm.tokenizers.base import Tokenizer, as_id_list, read_tokenizer_file, text_bytes
from zerollm.tokenizers.bpe_train import learn_merges
from zerollm.tokenizers.patterns import compile_pattern, known_pattern, resolve_pattern, split_text

ENDOFTEXT = "<|endoftext|>"
NO_RANK = float("inf")
CACHE_LIMIT = 200_000   # distinct chunks remembered by encode (cleared when full)
BLOCK = 50_000          # chunks encoded per call of encode_chunks
BYTE_IDS = list(range(256))


# ----------------------------------------------------------------------------
# how a token's bytes are written in the JSON file: as text when they are valid UTF-8

def token_to_json(b):
    """b' the' -> ' the'; b'\\xe4\\xbd' (part of a character) -> [228, 189].

    >>> token_to_json("你".encode()), token_to_json("你".encode()[:2])
    ('你', [228, 189])
    """
    try:
        return b.decode("utf-8")
    except UnicodeDecodeError:
        return list(b)


def token_from_json(t):
    if isinstance(t, str):
        return t.encode("utf-8")
    if isinstance(t, list) and all(isinstance(x, int) and 0 <= x < 256 for x in t) and t:
        return bytes(t)
    raise ZeroLLMError(f"bad token {t!r}: expected a string or a list of byte values 0..255")


# ----------------------------------------------------------------------------
# the tokenizer

NORMALIZERS = (None, "NFC")        # the Unicode normalizations a BPETokenizer can apply first
# the rules a Qwen tokenizer's conversations are rendered with (zerollm.data.chatml), read from its
# directory's chat template when it is opened, and kept in zerollm's tokenizer.json so that a model
# fine-tuned from Qwen2.5 renders by Qwen2.5's rules when it is opened again
CHAT_FAMILIES = ("qwen2", "qwen2.5", "qwen3")


class BPETokenizer(Tokenizer):
    """A byte-level BPE tokenizer.

    pattern:        'gpt2' | 'gpt4' | a regex; text is split with it before BPE (see patterns.py). A file
                    may hold only a known one (patterns.known_pattern): a tokenizer with a regex of its own
                    is saved, but refused when read back.
    merges:         [(left_id, right_id, new_id), ...] in rank order (rank 0 is applied first).
    special_tokens: strings (their ids follow all other tokens) or a dict {string: id}.
    vocab:          {id: bytes} of the non-special tokens. Default: id i is byte i (0..255) and
                    each merge's new_id is the bytes of left + right (what ``train`` makes).
                    Imported GPT-2 files bring their own numbering.
    normalizer:     None, or "NFC": text (not special tokens) is put in Unicode normal form C before
                    it is split, as Qwen2's and Qwen3's tokenizer.json ask ("é" typed as e + U+0301 is then
                    the one character U+00E9, and encodes as it does).
    """
    name = "bpe"

    def __init__(self, pattern="gpt4", merges=(), special_tokens=(), vocab=None, normalizer=None):
        if normalizer not in NORMALIZERS:
            raise ZeroLLMError(f"normalizer must be None or one of {', '.join(NORMALIZERS[1:])}, got {normalizer!r}")
        self.normalizer = normalizer
        self.pattern_name, self.pattern = resolve_pattern(pattern)
        self._regex = compile_pattern(self.pattern)
        self.merges = [tuple(int(x) for x in m) for m in merges]
        self.vocab = dict(vocab) if vocab is not None else _default_vocab(self.merges)
        if isinstance(special_tokens, dict):
            self.special_tokens = dict(special_tokens)
        else:
            special_tokens = list(special_tokens)
            if len(set(special_tokens)) != len(special_tokens):
                raise ZeroLLMError(f"special tokens must be distinct, got {special_tokens}")
            first = max(self.vocab, default=-1) + 1
            self.special_tokens = {s: first + k for k, s in enumerate(special_tokens)}
        _check_tables(self.vocab, self.merges, self.special_tokens)
        self._build_lookups()

    def _build_lookups(self):
        self._ranks = {(a, b): r for r, (a, b, _) in enumerate(self.merges)}   # pair -> rank
        self._merged = [new for _, _, new in self.merges]                      # rank -> new id
        self._vocab_size = 1 + max(max(self.vocab), max(self.special_tokens.values(), default=-1))
        id_of = {b: i for i, b in self.vocab.items()}
        self._byte_ids = [id_of[bytes([x])] for x in range(256)]
        table = [None] * self.vocab_size                                       # id -> bytes
        for i, b in self.vocab.items():
            table[i] = b
        for s, i in self.special_tokens.items():
            table[i] = s.encode("utf-8")
        self._table = table
        self._special_re = {}
        self._cache = {}

    def with_special_tokens(self, tokens):
        """A NEW tokenizer with ``tokens`` appended as special tokens (ids vocab_size, vocab_size+1, ...);
        tokens it already has are skipped. Merges, vocabulary and existing ids are unchanged."""
        new = self._new_specials(tokens)
        specials = {**self.special_tokens, **{s: self.vocab_size + k for k, s in enumerate(new)}}
        tok = BPETokenizer(self.pattern, self.merges, specials, self.vocab, self.normalizer)
        if getattr(self, "chat_family", None) is not None:      # a Qwen tokenizer keeps its template's rules
            tok.chat_family = self.chat_family
        return tok

    # ------------------------------------------------------------------
    # training

    @classmethod
    def train(cls, text, vocab_size, pattern="gpt4", special_tokens=(ENDOFTEXT,)):
        """Learn ``vocab_size - 256 - len(special_tokens)`` merges from ``text``.

        If the text runs out of pairs first (a tiny text), the vocabulary is smaller than asked;
        ``tok.vocab_size`` is always the true size.
        """
        special_tokens = list(special_tokens)
        smallest = 256 + len(special_tokens)
        if isinstance(vocab_size, bool) or not isinstance(vocab_size, int) or vocab_size < smallest:
            raise ZeroLLMError(f"BPE vocab_size must be an integer >= {smallest} (256 bytes + "
                               f"{len(special_tokens)} special token(s)), got {vocab_size!r}; "
                               "try 512, 1024 or 4096")
        if not isinstance(text, str):
            raise ZeroLLMError(f"BPE trains on a str, got {type(text).__name__}")
        name, regex_text = resolve_pattern(pattern)
        chunks = split_text(text, compile_pattern(regex_text), covers_all=name is not None)
        merges, vocab = learn_merges(chunks, vocab_size - smallest)
        return cls(pattern, merges, special_tokens, vocab)

    # ------------------------------------------------------------------
    # encoding

    def _encode_ordinary(self, text):
        """Split into chunks; BPE each distinct chunk once (most chunks repeat: " the", "，").
        Chunks not seen before are encoded together (one call of ``encode_chunks``), a block at a time."""
        if self.normalizer is not None:
            text = unicodedata.normalize(self.normalizer, text)
        chunks = split_text(text, self._regex, self.pattern_name is not None)
        out = []
        for start in range(0, len(chunks), BLOCK):
            block = chunks[start:start + BLOCK]
            cache = self._cache
            new = list(dict.fromkeys(c for c in block if c not in cache))
            if len(cache) + len(new) > CACHE_LIMIT:
                cache.clear()
                new = list(dict.fromkeys(block))
            data = [text_bytes(c) for c in new]                     # undecodable argv bytes: themselves
            cache.update(zip(new, encode_chunks(data, self._byte_ids, self._ranks, self._merged)))
            for chunk in block:
                out.extend(cache[chunk])
        return out

    # ------------------------------------------------------------------
    # decoding and the vocabulary

    def decode(self, ids):
        """ids -> text. Bytes that are not valid UTF-8 (a token can hold part of a character,
        and generation can stop anywhere) become U+FFFD (errors="replace")."""
        ids = as_id_list(ids, self.vocab_size)
        table = self._table
        try:
            data = b"".join([table[i] for i in ids])
        except TypeError:   # a None entry: an id number that this vocabulary does not use
            bad = next(i for i in ids if table[i] is None)
            raise ZeroLLMError(f"id {bad} is not used by this tokenizer's vocabulary") from None
        return data.decode("utf-8", errors="replace")

    def token_bytes(self, i):
        """The bytes of token ``i`` (a special token: its UTF-8 text)."""
        if not 0 <= i < self.vocab_size or self._table[i] is None:
            raise ZeroLLMError(f"no token with id {i} (vocab_size {self.vocab_size})")
        return self._table[i]

    @property
    def vocab_size(self):
        return self._vocab_size

    # ------------------------------------------------------------------
    # saving, loading, Hugging Face

    def hf_tokenizer_json(self):
        from zerollm.tokenizers.hf import bpe_tokenizer_json
        return bpe_tokenizer_json(self)

    def _payload(self):
        tokens = {i: token_to_json(b) for i, b in self.vocab.items()}
        payload = {
            "pattern": self.pattern_name or "custom",
            "regex": self.pattern,
            "special_tokens": self.special_tokens,
            "vocab": [[i, tokens[i]] for i in sorted(tokens)],
            "merges": [[tokens[a], tokens[b]] for a, b, _ in self.merges],
        }
        if self.normalizer is not None:          # only then: files without one stay as they were
            payload["normalizer"] = self.normalizer
        if getattr(self, "chat_family", None) is not None:     # the same: only a Qwen tokenizer has one
            payload["chat_family"] = self.chat_family
        return payload

    @classmethod
    def _from_payload(cls, data):
        vocab = {}
        for entry in data["vocab"]:
            i, token = entry
            vocab[int(i)] = token_from_json(token)
        id_of = {b: i for i, b in vocab.items()}
        merges = []
        for left, right in data["merges"]:
            a, b = token_from_json(left), token_from_json(right)
            if a not in id_of or b not in id_of or a + b not in id_of:
                raise ZeroLLMError(f"merge {[left, right]} uses tokens missing from 'vocab'")
            merges.append((id_of[a], id_of[b], id_of[a + b]))
        specials = data["special_tokens"]
        if not isinstance(specials, dict):
            raise ZeroLLMError("'special_tokens' must be an object {text: id}")
        normalizer = data.get("normalizer")
        if normalizer not in NORMALIZERS:
            raise ZeroLLMError(f"'normalizer' must be one of {', '.join(NORMALIZERS[1:])} or absent, got {normalizer!r}")
        family = data.get("chat_family")
        if family is not None and family not in CHAT_FAMILIES:
            raise ZeroLLMError(f"'chat_family' must be one of {', '.join(CHAT_FAMILIES)} or absent, got {family!r}")
        tok = cls(known_pattern(data["regex"], '"regex"'), merges, specials, vocab, normalizer)
        if family is not None:
            tok.chat_family = family
        return tok

    @classmethod
    def from_gpt2_files(cls, vocab_json, merges_txt):
        """Import GPT-2's ``vocab.json`` + ``merges.txt`` (see hf.py)."""
        from zerollm.tokenizers.hf import read_gpt2_files
        return cls(**read_gpt2_files(vocab_json, merges_txt))

    @classmethod
    def from_hf_tokenizer_json(cls, path):
        """Import a byte-level BPE ``tokenizer.json`` (GPT-2 style; see hf.py). A folder's tokenizer of any
        kind: zerollm.tokenizers.find_tokenizer."""
        from zerollm.tokenizers.hf import hf_bpe_arguments
        _, data = read_tokenizer_file(path)
        return cls(**hf_bpe_arguments(data, path))


# ----------------------------------------------------------------------------
# BPE on chunks

@accelerated
def encode_chunks(chunks, byte_ids, ranks, merged):
    """BPE on each chunk (bytes): start from the id of each byte (``byte_ids[b]``), merge the adjacent
    pair of lowest rank, leftmost first, until no pair has a rank. ranks: {(left, right): rank};
    merged[rank]: its new id. The fast engine runs zerollm/engine/fast/bpe.py's ``encode_chunks``
    instead (same results).

    >>> encode_chunks([b"aaab"], list(range(256)), {(97, 97): 0, (256, 98): 1}, [256, 257])
    [[256, 97, 98]]
    """
    if list(byte_ids) == BYTE_IDS:                 # the usual numbering: byte b is token b
        return [encode_chunk(list(data), ranks, merged) for data in chunks]
    return [encode_chunk([byte_ids[x] for x in data], ranks, merged) for data in chunks]


def encode_chunk(ids, ranks, merged):
    """One chunk, in place. ``r[i]`` is the rank of (ids[i], ids[i+1]); after a merge only its two
    neighbours change, and ``min``/``index`` scan the list at C speed."""
    r = [ranks.get(p, NO_RANK) for p in zip(ids, ids[1:])]
    while r:
        best = min(r)
        if best == NO_RANK:
            break
        i = r.index(best)
        ids[i:i + 2] = [merged[best]]
        del r[i]
        if i > 0:
            r[i - 1] = ranks.get((ids[i - 1], ids[i]), NO_RANK)
        if i < len(r):
            r[i] = ranks.get((ids[i], ids[i + 1]), NO_RANK)
    return ids


# ----------------------------------------------------------------------------
# building and checking the tables

def _default_vocab(merges):
    vocab = {i: bytes([i]) for i in range(256)}
    for a, b, new in merges:
        if a not in vocab or b not in vocab:
            raise ZeroLLMError(f"merge ({a}, {b}) uses an id that no earlier token has")
        vocab[new] = vocab[a] + vocab[b]
    return vocab


def _check_tables(vocab, merges, specials):
    """Every rule a usable vocabulary must follow; a broken file fails here, not mid-encode."""
    if any(not isinstance(i, int) or i < 0 for i in vocab):
        raise ZeroLLMError("token ids must be integers >= 0")
    id_of = {}
    for i, b in vocab.items():
        if b in id_of:
            raise ZeroLLMError(f"tokens {id_of[b]} and {i} have the same bytes {b!r}; each must be unique")
        id_of[b] = i
    missing = [x for x in range(256) if bytes([x]) not in id_of]
    if missing:
        raise ZeroLLMError(f"a byte-level BPE vocabulary needs all 256 single bytes; {len(missing)} of them "
                           f"missing (the first: byte {missing[0]}): train with the full byte alphabet")
    for a, b, new in merges:
        if vocab.get(a) is None or vocab.get(b) is None or vocab.get(new) != vocab[a] + vocab[b]:
            raise ZeroLLMError(f"merge ({a}, {b}) -> {new} does not match the vocabulary")
    for s, i in specials.items():
        if not isinstance(s, str) or not s or not isinstance(i, int) or i < 0 or i in vocab:
            raise ZeroLLMError(f"special token {s!r} -> {i!r}: needs non-empty text and a free id >= 0")
    if len(set(specials.values())) != len(specials):
        raise ZeroLLMError("two special tokens share an id")
