"""What every zerollm tokenizer shares: the interface, the save format, and atomic writes.

A tokenizer turns text into a list of integer ids (``encode``) and back (``decode``). The rest of
zerollm (data preparation, training, sampling) only ever uses this interface, so the byte, char
and BPE tokenizers can be swapped freely.

The save format is versioned, human-readable JSON (UTF-8, one entry per line for long lists)::

    {"format": "zerollm-tokenizer", "version": 1, "type": "char", "chars": ["\\n", " ", "a"], ...}

Version 2 adds tokens appended after the trained vocabulary ("special_tokens" of a byte tokenizer,
"added" of a char tokenizer: a chat template's role markers, a character a task needs). A file
without them is still written as version 1, so older zerollm versions keep reading it; a file
with them says version 2, so an older zerollm refuses it instead of silently dropping them.

Special tokens (e.g. "<|end|>") are single ids whose text is never produced by ordinary
encoding: ``encode(text)`` treats their text as plain text, ``encode(text, allowed_special="all")``
turns each occurrence into its one id (as Hugging Face does with added tokens), and ``decode``
writes their text back. Existing ids never change when tokens are added: new ids come after all
the old ones.

Loading never runs code: it is ``json.load`` plus checks.
"""

import json
import os

import numpy as np
import regex

from zerollm.io.errors import ZeroLLMError
from zerollm.io.fileio import atomic_write, read_json

FORMAT = "zerollm-tokenizer"
VERSION = 2                 # the newest version this zerollm writes and reads
READABLE = (1, 2)
HF_KIND = "hf"              # read_tokenizer_file's kind of a Hugging Face tokenizer.json


def dumps_readable(obj, ascii_only=False):
    """JSON with the top-level keys on their own lines and every long list one item per line.

    Plain ``json.dumps(indent=2)`` would put each number of ``[116, 104]`` on its own line;
    here each item stays compact, so a merge or a vocab entry reads as one line.

    >>> print(dumps_readable({"a": 1, "b": [[1, 2], [3, 4]]}), end="")
    {
      "a": 1,
      "b": [
        [1, 2],
        [3, 4]
      ]
    }
    """
    def one(value):
        return json.dumps(value, ensure_ascii=ascii_only, separators=(", ", ": "))

    lines = []
    for key, value in obj.items():
        if isinstance(value, list) and value:
            items = ",\n".join("    " + one(item) for item in value)
            lines.append(f"  {one(key)}: [\n{items}\n  ]")
        else:
            lines.append(f"  {one(key)}: {one(value)}")
    return "{\n" + ",\n".join(lines) + "\n}\n"


def read_json_file(path, what):
    """Read a JSON object from ``path``; every failure is a ZeroLLMError naming the file."""
    data = read_json(path, what)
    if not isinstance(data, dict):
        raise ZeroLLMError(f"{os.fspath(path)} is not a valid {what}: expected a JSON object at the top")
    return data


# ----------------------------------------------------------------------------
# checking what encode() and decode() are given

def check_text(text):
    if not isinstance(text, str):
        raise ZeroLLMError(f"encode takes a str, got {type(text).__name__}; decode bytes first, "
                           "e.g. data.decode('utf-8')")


def text_bytes(text):
    """The UTF-8 bytes of ``text``, for the byte-level tokenizers (byte, BPE).

    Python hands over command-line bytes that are not UTF-8 as lone surrogates (b"a\\xff" arrives
    as "a\\udcff", PEP 383); they become those same bytes again, so a byte-level tokenizer sees exactly
    what was typed. Any other lone surrogate is not text at all: a ZeroLLMError.

    >>> text_bytes("a\\udcff")
    b'a\\xff'
    """
    try:
        return text.encode("utf-8", "surrogateescape")
    except UnicodeEncodeError as err:
        raise ZeroLLMError(f"the text holds {text[err.start]!r} at character {err.start}, half of a UTF-16 "
                           "surrogate pair, which is not a character; give valid Unicode text") from None


def describe_char(c):
    """repr of a character, saying what an escaped undecodable byte stood for.

    >>> describe_char("\\udcff")
    'byte 0xff (not UTF-8)'
    """
    if "\udc80" <= c <= "\udcff":
        return f"byte {ord(c) - 0xdc00:#04x} (not UTF-8)"
    return repr(c)

def as_id_list(ids, vocab_size):
    """A 1-D list/array of integer ids -> a Python list of ints, each in [0, vocab_size).

    >>> as_id_list(np.array([3, 1]), 5)
    [3, 1]
    """
    arr = np.asarray(ids)
    if arr.size == 0:
        return []
    if arr.ndim != 1:
        raise ZeroLLMError(f"decode takes a 1-D sequence of ids, got shape {arr.shape}; "
                           "decode one row at a time, e.g. [tok.decode(row) for row in ids]")
    if not np.issubdtype(arr.dtype, np.integer):
        raise ZeroLLMError(f"decode takes integer ids, got {arr.dtype} values such as {arr[0]!r}")
    low, high = int(arr.min()), int(arr.max())
    if low < 0 or high >= vocab_size:
        bad = low if low < 0 else high
        raise ZeroLLMError(f"id {bad} is outside this tokenizer's vocabulary (0..{vocab_size - 1}); "
                           "were these ids made with a different tokenizer?")
    return arr.tolist()


# ----------------------------------------------------------------------------
# the interface

class Tokenizer:
    """Base class: ``encode``, ``decode``, ``vocab_size``, ``special_tokens``, ``save``.

    Subclasses set ``name`` ("byte" | "char" | "bpe") and implement ``_encode_ordinary`` (text
    without special tokens -> ids), ``decode``, ``vocab_size``, ``special_tokens`` ({text: id},
    empty when there are none), ``with_special_tokens``, ``_payload`` (their part of the saved
    JSON) and ``_from_payload``.
    """
    name = "base"

    def encode(self, text, allowed_special="none"):
        """text -> ids. allowed_special: 'none' (special tokens' text is plain text, so user input
        cannot forge one), 'all', or a set of special token strings to recognise as single ids.

        >>> tok = ByteTokenizer().with_special_tokens(["<|end|>"])   # doctest: +SKIP
        >>> tok.encode("a<|end|>", allowed_special="all")            # doctest: +SKIP
        [97, 256]
        """
        check_text(text)
        specials = self._allowed(allowed_special)
        if not specials:
            return self._encode_ordinary(text)
        ids = []
        for k, part in enumerate(self._special_splitter(specials).split(text)):
            if k % 2:                      # split() with one capture group: odd parts are specials
                ids.append(specials[part])
            elif part:
                ids.extend(self._encode_ordinary(part))
        return ids

    def _encode_ordinary(self, text):
        raise NotImplementedError

    def decode(self, ids):
        raise NotImplementedError

    def with_special_tokens(self, tokens):
        """A NEW tokenizer with ``tokens`` (strings) appended as special tokens, in order, after
        every existing id; tokens it already has are skipped, so calling it twice changes nothing.
        This tokenizer is left unchanged."""
        raise NotImplementedError

    def _new_specials(self, tokens):
        """The strings of ``tokens`` not special yet, checked: non-empty, distinct."""
        tokens = [tokens] if isinstance(tokens, str) else list(tokens)
        if any(not isinstance(t, str) or not t for t in tokens):
            raise ZeroLLMError(f"special tokens must be non-empty strings, got {tokens!r}")
        new = []
        for t in tokens:
            if t not in self.special_tokens and t not in new:
                new.append(t)
        return new

    def _allowed(self, allowed_special):
        if allowed_special == "none":
            return {}
        if allowed_special == "all":
            return self.special_tokens
        if isinstance(allowed_special, (set, frozenset, list, tuple)):
            unknown = sorted(set(allowed_special) - set(self.special_tokens))
            if unknown:
                raise ZeroLLMError(f"{unknown} are not special tokens of this tokenizer; "
                                   f"it has {sorted(self.special_tokens)}")
            return {s: self.special_tokens[s] for s in allowed_special}
        raise ZeroLLMError(f"allowed_special must be 'none', 'all' or a set of special tokens, "
                           f"got {allowed_special!r}")

    def _special_splitter(self, specials):
        """A regex that splits text around the given special tokens (cached per set)."""
        cache = self.__dict__.setdefault("_special_re", {})
        key = frozenset(specials)
        if key not in cache:
            # longest first, so tokens that share a prefix ("<|a|>", "<|a|>x") match whole
            alternatives = "|".join(regex.escape(s) for s in sorted(specials, key=len, reverse=True))
            cache[key] = regex.compile(f"({alternatives})")
        return cache[key]

    @property
    def vocab_size(self):
        raise NotImplementedError

    def _payload(self):
        raise NotImplementedError

    @classmethod
    def _from_payload(cls, data):
        raise NotImplementedError

    def _format_version(self):
        """The oldest format version that can hold this tokenizer (1 unless tokens were added)."""
        return 1

    def to_dict(self):
        """The saved form: a header that says what this is, then the tokenizer's own fields."""
        return {"format": FORMAT, "version": self._format_version(), "type": self.name, **self._payload()}

    def to_hf_tokenizer_json(self, path):
        """Write a Hugging Face ``tokenizer.json`` that encodes to the same ids (AutoTokenizer loads it)."""
        text_json = self.hf_tokenizer_json()
        with atomic_write(path, "w") as f:
            f.write(text_json)

    def hf_tokenizer_json(self):
        """The Hugging Face ``tokenizer.json`` text of this tokenizer, checked to give the same ids."""
        raise ZeroLLMError(f"no Hugging Face form for a {self.name!r} tokenizer")

    def save(self, path):
        """Write the tokenizer as JSON, atomically (temp file + rename)."""
        with atomic_write(path, "w") as f:
            f.write(dumps_readable(self.to_dict()))

    def __repr__(self):
        return f"{type(self).__name__}(vocab_size={self.vocab_size})"


def check_header(data, path):
    """Check format and version of a loaded tokenizer dict; return its type."""
    if data.get("format") != FORMAT:
        raise ZeroLLMError(f"{path} is not a zerollm tokenizer (format is {data.get('format')!r}, "
                           f"expected {FORMAT!r}); save one with tokenizer.save(path)")
    if data.get("version") not in READABLE:
        raise ZeroLLMError(f"{path} has tokenizer format version {data.get('version')!r}, but this "
                           f"zerollm reads versions {READABLE[0]} to {READABLE[-1]}; re-create the tokenizer "
                           "or upgrade zerollm")
    return data.get("type")


def read_tokenizer_file(path):
    """(kind, data) of a tokenizer file: its JSON object and what it holds, "hf" for a Hugging Face
    tokenizer.json (it has a "model" and no "format"), else the "type" of zerollm's own format, its header
    checked (check_header). The one place a tokenizer file is opened, parsed and told apart; a missing or
    damaged file is a ZeroLLMError naming it.

    >>> read_tokenizer_file("runs/x/tokenizer.json")[0]    # doctest: +SKIP
    'char'
    """
    data = read_json_file(path, "tokenizer file")
    if "format" not in data and "model" in data:
        return HF_KIND, data
    return check_header(data, os.fspath(path)), data


def specials_by_id(specials, first, what):
    """Check a saved {text: id} table of appended special tokens: ids first, first+1, ... in order."""
    if not isinstance(specials, dict):
        raise ZeroLLMError(f"'{what}' must be an object {{text: id}}")
    expected = list(range(first, first + len(specials)))
    if sorted(specials.values()) != expected or any(not isinstance(t, str) or not t for t in specials):
        raise ZeroLLMError(f"'{what}' must map non-empty texts to the ids {first}, {first + 1}, ... "
                           f"that follow the vocabulary, got {specials}")
    return sorted(specials, key=specials.get)
