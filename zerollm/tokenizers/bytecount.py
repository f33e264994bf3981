"""How many bytes of text each token stands for: what bits per byte divides by (zerollm.evaluate.bpb).

1 for a byte token, len(c.encode()) for a character c (3 for 「春」), len(token_bytes) for a BPE token
(which may hold part of a character: the parts of a text still add up to its bytes), 0 for a special
token (it is no part of the text).
"""

import math

import numpy as np

from zerollm.io.errors import ZeroLLMError

LN2 = math.log(2.0)


def token_byte_lengths(tokenizer):
    """int64 (V,): the UTF-8 bytes of each token's text (0 for special tokens), or None when the
    tokenizer cannot say (a char tokenizer with ``unk``).

    >>> from zerollm.tokenizers import CharTokenizer
    >>> token_byte_lengths(CharTokenizer.train("a春")).tolist()
    [1, 3]
    """
    specials = set(tokenizer.special_tokens.values())
    kind = tokenizer.name
    if kind == "char" and tokenizer.unk is not None:
        return None
    out = np.zeros(tokenizer.vocab_size, dtype=np.int64)
    for i in range(tokenizer.vocab_size):
        if i in specials:
            continue
        if kind == "byte":
            out[i] = 1
        elif kind == "char":
            out[i] = len(tokenizer.decode([i]).encode("utf-8"))
        elif kind == "bpe":
            out[i] = len(_bpe_bytes(tokenizer, i))
        else:
            return None
    return out


def _bpe_bytes(tokenizer, i):
    try:
        return tokenizer.token_bytes(i)
    except ZeroLLMError:             # an id an imported vocabulary leaves unused: no bytes of any text
        return b""


def bits_and_bytes(nll, targets, lengths):
    """(bits, bytes) of the targets: the summed NLL in bits and the summed UTF-8 bytes, over targets
    that have bytes (special tokens and ignored targets, < 0, count for neither)."""
    targets = np.asarray(targets)
    nbytes = np.where(targets >= 0, lengths[np.maximum(targets, 0)], 0)
    counted = nbytes > 0
    return float(np.asarray(nll)[counted].sum() / LN2), int(nbytes.sum())
