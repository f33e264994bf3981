"""Pre-splitting text into chunks before BPE: merges never cross a chunk boundary.

Why split at all: without it, BPE happily learns tokens such as "dog." and "dog!" and "dog?",
wasting vocabulary on punctuation glued to words (Radford et al. 2019, GPT-2 paper, section
2.2). A regex cuts the text into words, numbers, punctuation runs and whitespace first.

>>> split_text("Hello world's 2024!", compile_pattern(GPT2_PATTERN))
['Hello', ' world', "'s", ' 2024', '!']
"""

import regex

from zerollm.io.errors import ZeroLLMError

# GPT-2 (openai/gpt-2, src/encoder.py): contractions, an optional space + letters, an optional
# space + digits, an optional space + other symbols, then whitespace. "\s+(?!\S)" leaves the last
# space of a run to start the next word, so " world" keeps its space.
GPT2_PATTERN = r"""'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"""

# GPT-4's cl100k_base (openai/tiktoken): case-insensitive contractions, numbers in groups of at
# most 3 digits, newlines kept apart from other whitespace. "?+" and "++" are possessive
# quantifiers (no backtracking), which the `regex` package (not the stdlib `re`) supports.
GPT4_PATTERN = (r"""'(?i:[sdmt]|ll|ve|re)|[^\r\n\p{L}\p{N}]?+\p{L}+|\p{N}{1,3}|"""
                r""" ?[^\s\p{L}\p{N}]++[\r\n]*|\s*[\r\n]|\s+(?!\S)|\s+""")

# Llama 3's (meta-llama/llama3, tokenizer.py): cl100k's family with greedy quantifiers and "\s*[\r\n]+";
# llama.cpp's "llama-bpe" pre-tokenizer, and what Llama 3's tokenizer.json gives its Split
LLAMA3_PATTERN = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}"
                  r"| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")

# Qwen2's, Qwen2.5's and Qwen3's (transformers' tokenization_qwen2.py, llama.cpp's "qwen2" pre-tokenizer): Llama 3's
# with every digit a chunk of its own ("\p{N}" where Llama 3 groups up to three), so numbers are read digit by digit
QWEN2_PATTERN = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}"
                 r"| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")

PATTERNS = {"gpt2": GPT2_PATTERN, "gpt4": GPT4_PATTERN}
# every split regex zerollm runs when a file names it: each takes time in proportion to the text it splits
# (tests/test_qwen.py times none but checks that long runs of spaces, newlines and marks split at once)
KNOWN_PATTERNS = (GPT2_PATTERN, GPT4_PATTERN, LLAMA3_PATTERN, QWEN2_PATTERN)


def resolve_pattern(pattern):
    """'gpt2' | 'gpt4' | a regex string -> (name or None, regex string)."""
    if not isinstance(pattern, str) or not pattern:
        raise ZeroLLMError(f"pattern must be 'gpt2', 'gpt4' or a regex string, got {pattern!r}")
    if pattern in PATTERNS:
        return pattern, PATTERNS[pattern]
    for name, text in PATTERNS.items():
        if pattern == text:
            return name, text
    return None, pattern


def known_pattern(text, key, where=None):
    """``text``, a split regex read from a file (under ``key``), if it is one of KNOWN_PATTERNS or the name of
    one ('gpt2', 'gpt4'), compared as a string; any other is a ZeroLLMError naming ``where`` (the file) and the key.

    Why a file's regex is never compiled: a regex is a program whose running time depends on the text it
    splits. ``(a|aa)+$`` tries every way of cutting a run of a's (2^n of them) on a prompt of a's, and a few
    nested counts such as ``((a{100}){100}){100}`` exhaust memory while the `regex` package compiles them, so
    one hostile file would hang every command that loads it. Regexes given in code (``BPETokenizer(pattern=...)``)
    are the caller's own and are run as given.
    """
    if isinstance(text, str) and (text in KNOWN_PATTERNS or text in PATTERNS):
        return text
    shown = repr(text) if len(repr(text)) <= 80 else repr(text)[:77] + "..."
    file = f"{where}: " if where else ""
    raise ZeroLLMError(f"{file}{key} is a split regex zerollm does not run ({shown}): "
                       "a tokenizer read from a file may only use GPT-2's, GPT-4's, Llama 3's or Qwen2's split regex; "
                       "retrain the tokenizer with --pattern gpt2 or gpt4")


def compile_pattern(text):
    try:
        return regex.compile(text)
    except regex.error as err:
        raise ZeroLLMError(f"the split pattern {text!r} is not a valid regex ({err}); "
                           "use 'gpt2', 'gpt4' or fix the regex") from None


def split_text(text, compiled, covers_all=True):
    """Cut ``text`` into chunks; ''.join(chunks) == text always holds.

    The named patterns match every character, so ``findall`` is enough. A custom pattern may
    skip characters; then the pieces between matches become chunks too (exactly what Hugging
    Face's ``Split(..., behavior="isolated")`` does), so no text is ever lost.

    >>> split_text("a1b", compile_pattern(r"\\d"), covers_all=False)
    ['a', '1', 'b']
    """
    if covers_all:
        return compiled.findall(text)
    chunks, start = [], 0
    for m in compiled.finditer(text):
        if m.start() > start:
            chunks.append(text[start:m.start()])
        if m.end() > m.start():   # empty matches carry no text
            chunks.append(m.group())
        start = m.end()
    if start < len(text):
        chunks.append(text[start:])
    return chunks
