"""The BPE training cases of bpe_merges_ab437b9.json (tests/golden/make_bpe_golden.py wrote it with the old
trainer; tests/test_bpe_golden.py trains them again): name -> (shipped corpus, split pattern, characters
from its start, merges to learn)."""

from zerollm.data import corpora
from zerollm.tokenizers.patterns import compile_pattern, resolve_pattern, split_text

CASES = {
    "shakespeare-gpt4": ("shakespeare", "gpt4", 100_000, 767),
    "shakespeare-gpt2": ("shakespeare", "gpt2", 100_000, 767),
    "tang-gpt4": ("tang", "gpt4", 100_000, 767),
    "tang-gpt2": ("tang", "gpt2", 100_000, 767),
}


def chunks_of(corpus, pattern, chars):
    """The first ``chars`` characters of a shipped corpus, split as BPETokenizer.train splits them."""
    text = corpora.path(corpus).read_text(encoding="utf-8")[:chars]
    name, regex_text = resolve_pattern(pattern)
    return split_text(text, compile_pattern(regex_text), covers_all=name is not None)
