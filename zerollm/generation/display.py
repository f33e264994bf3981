"""Generated text, made safe to print: a model can emit any id, so its text can hold control bytes
(ESC would drive the terminal), bytes that are not UTF-8, and ids its tokenizer cannot decode.

    >>> printable("a\\x1b[2Jb\\tc\\n")
    'a\\\\x1b[2Jb\\tc\\n'
    >>> d = StreamDecoder(ByteTokenizer())
    >>> [d.push(b) for b in "你".encode()] + [d.push(0xff), d.flush()]
    ['', '', '你', '\\\\xff', '']
    >>> api = StreamDecoder(ByteTokenizer(), escape=False)   # text for a program: U+FFFD, as decoders write
    >>> [api.push(0xff), api.push(0xe4), api.flush()]
    ['\\ufffd', '', '\\ufffd']
"""

import codecs
import re

import numpy as np

from zerollm.io.errors import ZeroLLMError
from zerollm.tokenizers.byte import ByteTokenizer

# C0 and C1 control characters except tab and newline, DEL, and lone surrogates (bytes that were not
# UTF-8, carried by surrogateescape): everything a terminal would act on instead of showing
UNPRINTABLE = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\ud800-\udfff]")


def _escape(match):
    c = ord(match.group())
    if 0xdc80 <= c <= 0xdcff:                 # an undecodable byte, as surrogateescape carries it
        return f"\\x{c - 0xdc00:02x}"
    return f"\\x{c:02x}" if c < 0x100 else f"\\u{c:04x}"


def printable(text):
    """``text`` with control characters (but tab and newline) shown as escapes such as ``\\x1b``."""
    return UNPRINTABLE.sub(_escape, text)


def token_bytes(tok, i):
    """The bytes of token ``i`` of a byte-level tokenizer (byte, BPE); None for a char tokenizer."""
    if hasattr(tok, "token_bytes"):
        return tok.token_bytes(i)
    return bytes([i]) if tok.name == "byte" and i < 256 else None


def token_piece(tok, i):
    """Token ``i`` as bytes where the tokenizer has them (byte, BPE), else its text: what two tokenizers
    must agree on for one model to read the other's ids."""
    raw = token_bytes(tok, i)
    return raw if raw is not None else tok.decode([i])


def first_difference(tok, other):
    """(i, piece in ``tok``, piece in ``other``) of the first id the two tokenizers read differently, or None
    when every id of ``tok`` is the same piece in ``other`` (a draft model and the served one, a teacher and
    its student). The vocabulary sizes are the caller's to compare first."""
    for i in range(tok.vocab_size):
        mine, theirs = token_piece(tok, i), token_piece(other, i)
        if mine != theirs:
            return i, mine, theirs
    return None


def decodable(tok, vocab_size):
    """(V,) bool: the ids below the model's ``vocab_size`` that the tokenizer can decode. Real checkpoints
    often pad the embedding table beyond the tokenizer (GPT-2 to 50304 for speed); those ids are never
    trained to be likely, but sampling can still pick one."""
    ok = np.zeros(vocab_size, dtype=bool)
    ok[:min(vocab_size, tok.vocab_size)] = True
    if hasattr(tok, "token_bytes"):            # a BPE vocabulary may skip some id numbers
        for i in np.flatnonzero(ok):
            try:
                tok.token_bytes(int(i))
            except ZeroLLMError:
                ok[i] = False
    return ok


class StreamDecoder:
    """Turns ids, one at a time, into newly printable text. A byte-level token may end in the middle
    of a UTF-8 character: an incremental UTF-8 decoder holds it back until the character is complete,
    and shows bytes that can never be UTF-8 as ``\\xNN`` (U+FFFD with ``escape=False``). Each id is decoded
    once, so streaming stays linear in the length of the output."""

    def __init__(self, tokenizer, escape=True):
        # escape=False: the text for a program (JSON), not a terminal. Bytes that can never be UTF-8 are then
        # U+FFFD, as every decoder writes them: "\\xbc" would read as a backslash the model wrote
        self.tok, self.escape = tokenizer, escape
        self.utf8 = codecs.getincrementaldecoder("utf-8")(errors="backslashreplace" if escape else "replace")

    def push(self, token_id):
        raw = token_bytes(self.tok, int(token_id))
        text = self.tok.decode([int(token_id)]) if raw is None else self.utf8.decode(raw)
        return printable(text) if self.escape else text

    def flush(self):
        text = self.utf8.decode(b"", final=True)
        return printable(text) if self.escape else text
