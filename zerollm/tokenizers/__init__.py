"""tokenizers: text <-> integer ids. Byte, char and byte-level BPE, one interface. May import io only.

Everything else in zerollm uses only these functions and the ``Tokenizer`` interface
(``encode``, ``decode``, ``vocab_size``, ``save``, ``name``). A tokenizer file is read in one place
(``base.read_tokenizer_file``: zerollm's format or a Hugging Face tokenizer.json, told apart by their
keys): ``load_tokenizer`` builds the tokenizer of a file, ``find_tokenizer`` the one saved in a folder::

    from zerollm.tokenizers import train_tokenizer, load_tokenizer
    tok = train_tokenizer("bpe", text, vocab_size=1024)
    ids = tok.encode("To be, or not to be")
    tok.save("tokenizer.json")
    tok = load_tokenizer("tokenizer.json")
    assert tok.decode(ids) == "To be, or not to be"
"""

import os

from zerollm.io.errors import ZeroLLMError
from zerollm.tokenizers.base import HF_KIND, Tokenizer, read_tokenizer_file
from zerollm.tokenizers.bpe import ENDOFTEXT, BPETokenizer
from zerollm.tokenizers.byte import ByteTokenizer
from zerollm.tokenizers.char import CharTokenizer
from zerollm.tokenizers.hf import hf_bpe_arguments
from zerollm.tokenizers.hf_import import tokenizer_from_json
from zerollm.tokenizers.patterns import GPT2_PATTERN, GPT4_PATTERN

KINDS = {"byte": ByteTokenizer, "char": CharTokenizer, "bpe": BPETokenizer}

__all__ = ["Tokenizer", "ByteTokenizer", "CharTokenizer", "BPETokenizer", "KINDS", "ENDOFTEXT",
           "GPT2_PATTERN", "GPT4_PATTERN", "train_tokenizer", "load_tokenizer",
           "find_tokenizer"]


def train_tokenizer(kind, text, vocab_size=None, **kw):
    """Build a tokenizer of ``kind`` ('byte' | 'char' | 'bpe') from ``text``.

    byte: ignores text; vocab_size must be None or 256.
    char: the distinct characters of text; vocab_size must be None (it is decided by the text);
          kw: unk=None | "<unk>".
    bpe:  vocab_size is required; kw: pattern='gpt4' | 'gpt2' | regex,
          special_tokens=("<|endoftext|>",).

    >>> train_tokenizer("char", "abba").vocab_size
    2
    """
    if kind not in KINDS:
        raise ZeroLLMError(f"unknown tokenizer {kind!r}; choose one of {', '.join(KINDS)}")
    if kind == "byte":
        if vocab_size not in (None, 256) or kw:
            raise ZeroLLMError("the byte tokenizer always has vocab_size 256 and no options; "
                               "drop --vocab-size, or use the bpe tokenizer for another size")
        return ByteTokenizer()
    if not isinstance(text, str):
        raise ZeroLLMError(f"text must be a str, got {type(text).__name__}")
    if kind == "char":
        if vocab_size is not None:
            raise ZeroLLMError("the char tokenizer's vocab_size is the number of distinct characters "
                               "in the text; drop --vocab-size, or use the bpe tokenizer")
        return CharTokenizer.train(text, **kw)
    if vocab_size is None:
        raise ZeroLLMError("the bpe tokenizer needs a vocab_size (e.g. --vocab-size 1024)")
    return BPETokenizer.train(text, vocab_size, **kw)


def load_tokenizer(path):
    """The tokenizer of a file: zerollm's own format (``Tokenizer.save``; its "type" picks the class) or a
    Hugging Face tokenizer.json (a char or byte tokenizer that zerollm exported, else byte-level BPE)."""
    kind, data = read_tokenizer_file(path)
    if kind == HF_KIND:
        tok = tokenizer_from_json(data, path)
        return tok if tok is not None else BPETokenizer(**hf_bpe_arguments(data, path))
    if not isinstance(kind, str) or kind not in KINDS:
        raise ZeroLLMError(f"{path}: unknown tokenizer type {kind!r}; this zerollm knows "
                           f"{', '.join(KINDS)}")
    try:
        return KINDS[kind]._from_payload(data)
    except ZeroLLMError as err:
        raise ZeroLLMError(f"{path} is a damaged {kind} tokenizer file: {err}") from None
    except (KeyError, TypeError, ValueError, AttributeError) as err:
        raise ZeroLLMError(f"{path} is a damaged {kind} tokenizer file ({type(err).__name__}: {err}); "
                           "re-create it, e.g. with 'zerollm prepare'") from None


TOKENIZER_FILE = "tokenizer.json"      # a run's, a step's, a prepared folder's and a model directory's


def tokenizer_file(folder):
    """Where ``folder`` (a run, a checkpoint step, a prepared data folder, a model directory) keeps its
    tokenizer: the one name every writer and reader uses."""
    return os.path.join(os.fspath(folder), TOKENIZER_FILE)


def find_tokenizer(folder, required=False):
    """The tokenizer saved in ``folder``: its tokenizer.json (either form load_tokenizer reads), else GPT-2's
    vocab.json + merges.txt. None when it has neither, or with required=True a ZeroLLMError that says so."""
    folder = os.fspath(folder)
    file = tokenizer_file(folder)
    if os.path.isfile(file):
        return load_tokenizer(file)
    vocab, merges = os.path.join(folder, "vocab.json"), os.path.join(folder, "merges.txt")
    if os.path.isfile(vocab) and os.path.isfile(merges):
        return BPETokenizer.from_gpt2_files(vocab, merges)
    if required:
        raise ZeroLLMError(f"{folder} has neither tokenizer.json nor vocab.json + merges.txt; "
                           "point at a Hugging Face model folder such as a saved 'gpt2'")
    return None
