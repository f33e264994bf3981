"""The metadata zerollm reads from a GGUF file, each key checked for its type and range in one place.

    value(meta, "llama.attention.head_count", "m.gguf")      # -> 4, or one ZeroLLMError such as
    # m.gguf: metadata key llama.attention.head_count must be a whole number from 1 to 65536, got 'x'

A file is data written by anyone: a head count of 0 or "x", a width of 2^63, a list of tokens holding
numbers would otherwise surface as a ZeroDivisionError or a TypeError deep inside the loader. A size takes
the declared range of the GPTConfig field it becomes (zerollm.io.argtypes.FIELD_RANGES), so a GGUF file,
a config.json and the command line agree on what is allowed.
"""

from dataclasses import dataclass
from typing import Callable

from zerollm.io.argtypes import FIELD_RANGES, Range
from zerollm.io.errors import ZeroLLMError

REQUIRED = object()           # value()'s default: the key must be there


@dataclass(frozen=True)
class Want:
    """What a key's value must be: ``what`` says it to the user, ``fits`` tests one value (or one item)."""
    what: str
    fits: Callable
    each: bool = False        # a list whose every item fits


def number(r):
    """A Want from an argtypes Range: whole numbers are ints (never bools, never 2.0), numbers ints or floats."""
    kinds = (int,) if r.kind is int else (int, float)
    return Want(r.describe(), lambda v: isinstance(v, kinds) and not isinstance(v, bool) and r.contains(v))


TEXT = Want("a text", lambda v: isinstance(v, str))
TEXTS = Want("a list of texts", TEXT.fits, each=True)
# GGUF's token types (llama.cpp's llama_token_type): 0 undefined, 1 normal ... 6 byte
TOKEN_TYPES = Want("a list of token types (whole numbers from 0 to 6)", number(Range(int, 0, 6)).fits, each=True)
TOKEN_ID = number(Range(int, 0, FIELD_RANGES["vocab_size"].high - 1))
# GGUF's data alignment: a power of two; llama.cpp writes 32, and no writer aligns beyond a 2 MiB huge page
_ALIGNED = number(Range(int, 1, 2 ** 21))
ALIGNMENT = Want("a power of two from 1 to 2097152", lambda v: _ALIGNED.fits(v) and v & (v - 1) == 0)

# the model's own keys, after "ARCH.": the GPTConfig field each becomes (its range is that field's)
_MODEL_KEYS = {"context_length": "block_size", "embedding_length": "n_embd", "block_count": "n_layer",
               "feed_forward_length": "n_inner", "attention.head_count": "n_head",
               "attention.head_count_kv": "n_kv_head", "attention.layer_norm_epsilon": "norm_eps",
               "attention.layer_norm_rms_epsilon": "norm_eps", "rope.freq_base": "rope_theta",
               "rope.dimension_count": "n_embd", "expert_count": "n_expert",
               "expert_used_count": "n_expert_active", "vocab_size": "vocab_size",
               "attention.key_length": "head_dim", "attention.value_length": "head_dim"}
_KEYS = {"general.architecture": TEXT, "general.alignment": ALIGNMENT,
         "tokenizer.ggml.model": TEXT, "tokenizer.ggml.pre": TEXT, "zerollm.split_regex": TEXT,
         "tokenizer.ggml.tokens": TEXTS, "tokenizer.ggml.token_type": TOKEN_TYPES, "tokenizer.ggml.merges": TEXTS,
         "tokenizer.ggml.bos_token_id": TOKEN_ID, "tokenizer.ggml.eos_token_id": TOKEN_ID}


def wanted(key):
    """The Want of a metadata key zerollm reads: 'gpt2.block_count' -> a whole number from 1 to 10000."""
    if key in _KEYS:
        return _KEYS[key]
    return number(FIELD_RANGES[_MODEL_KEYS[key.split(".", 1)[1]]])


def _shown(v):
    text = repr(v)
    return text if len(text) <= 60 else text[:57] + "..."


def value(meta, key, where, default=REQUIRED):
    """``meta[key]`` when it is what zerollm expects of that key; ``default`` when the key is absent (absent
    and REQUIRED: the file is incomplete). Anything else is one ZeroLLMError naming the file and the key."""
    if key not in meta:
        if default is REQUIRED:
            raise ZeroLLMError(f"{where}: the metadata lacks {key}, which a {key.split('.')[0]} model needs; "
                               "the file is incomplete")
        return default
    want, v = wanted(key), meta[key]
    if want.each and isinstance(v, list):
        bad = next((i for i, item in enumerate(v) if not want.fits(item)), None)
        if bad is not None:
            raise ZeroLLMError(f"{where}: metadata key {key} must be {want.what}, but item {bad} is "
                               f"{_shown(v[bad])}; the file is damaged")
    elif want.each or not want.fits(v):
        raise ZeroLLMError(f"{where}: metadata key {key} must be {want.what}, got {_shown(v)}; the file is damaged")
    return v
