"""tokenizers: text <-> integer ids. Byte, char and byte-level BPE, one interface. May import io only.

Everything else in zerollm uses only these two functions and the ``Tokenizer`` interface
(``encode``, ``decode``, ``vocab_size``, ``save``, ``name``)::

    from zerollm.tokenizers import train_tokenizer, load_tokenizer
    tok = train_tokenizer("bpe", text, vocab_size=1024)
    ids = tok.encode("To be, or not to be")
    tok.save("tokenizer.json")
    tok = load_tokenizer("tokenizer.json")
    assert tok.decode(ids) == "To be, or not to be"
"""

from zerollm.io.errors import ZeroLLMError
from zerollm.tokenizers.base import Tokenizer, check_header, read_json_file
from zerollm.tokenizers.bpe import ENDOFTEXT, BPETokenizer
from zerollm.tokenizers.byte import ByteTokenizer
from zerollm.tokenizers.char import CharTokenizer
from zerollm.tokenizers.patterns import GPT2_PATTERN, GPT4_PATTERN

KINDS = {"byte": ByteTokenizer, "char": CharTokenizer, "bpe": BPETokenizer}

__all__ = ["Tokenizer", "ByteTokenizer", "CharTokenizer", "BPETokenizer", "KINDS", "ENDOFTEXT",
           "GPT2_PATTERN", "GPT4_PATTERN", "train_tokenizer", "load_tokenizer"]


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
    """Load any tokenizer saved by ``Tokenizer.save``; the file's "type" picks the class."""
    data = read_json_file(path, "tokenizer file")
    kind = check_header(data, path)
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
