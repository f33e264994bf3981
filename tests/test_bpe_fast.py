"""The BPE trainer (zerollm/tokenizers/bpe_train.py, which both engines use) learns exactly what a slow
recount after every merge learns: the same pairs, in the same order, with the same ids; and the fast
engine's encoder (zerollm/engine/fast/bpe.py) gives the reference encoder's ids.

Corpora: the small texts of tests/test_tokenizers.py, ties, runs of one byte ("a a a" merges left to
right), Han text (3 bytes a character), random texts, and slices of both shipped corpora under both
split patterns. Speed is measured in benchmarks/bpe_speed.py, not here.
"""

import sys
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from zerollm.engine import use_engine
from zerollm.engine.fast import KERNELS
from zerollm.engine.fast import bpe as fast_bpe
from zerollm.tokenizers import BPETokenizer
from zerollm.tokenizers.bpe import encode_chunks
from zerollm.tokenizers.bpe_train import learn_merges
from zerollm.tokenizers.patterns import compile_pattern, resolve_pattern, split_text

sys.path.insert(0, str(Path(__file__).parent))
from bpe_reference import naive_learn  # noqa: E402

SMALL = {   # text, split pattern
    "wikipedia": ("aaabdaaabac", r".+"),
    "ties": ("abcd", r".+"),                                       # every pair once: smallest pair first
    "runs": ("aaaa a aaaaaaa aaa bbbb abab ababab", "gpt4"),       # overlapping (a, a) and (b, b)
    "mixed": ("秦川雄帝宅，函谷壮皇居。你好 👋🏽😀 naïve  two  spaces\n\n\ttab\r\nwindows   \u00a0nbsp  "
              "I'LL say it's 12345 and 3.14, they've 'd", "gpt4"),
    "stops_early": ("ab ab", "gpt4"),
    "custom_pattern": ("ab12cd345ef" * 20, r"\d+"),
}


def chunks_of(text, pattern):
    name, regex_text = resolve_pattern(pattern)
    return split_text(text, compile_pattern(regex_text), covers_all=name is not None)


def both(chunks, n):
    """(the slow reference's merges and vocab, the trainer's)."""
    return naive_learn(chunks, n), learn_merges(chunks, n)


def test_the_fast_engine_trains_with_the_reference_trainer():
    """Its compiled trainer was slower than the array trainer (docs/benchmarks.md, "BPE"): it has none."""
    assert "learn_merges" not in KERNELS


@pytest.mark.parametrize("case", list(SMALL))
@pytest.mark.parametrize("n", [0, 1, 3, 40])
def test_small_corpora(case, n):
    ref, fast = both(chunks_of(*SMALL[case]), n)
    assert fast == ref
    assert len(fast[0]) == min(n, len(ref[0]))


def test_empty_input_learns_nothing():
    assert learn_merges([], 10) == ([], {i: bytes([i]) for i in range(256)})


@pytest.mark.parametrize("corpus", ["shakespeare", "tang"])
@pytest.mark.parametrize("pattern", ["gpt2", "gpt4"])
def test_slices_of_the_shipped_corpora(request, corpus, pattern):
    text = request.getfixturevalue(f"{corpus}_path").read_text(encoding="utf-8")[:8_000]
    ref, fast = both(chunks_of(text, pattern), 100)      # (the whole corpora: tests/test_bpe_golden.py)
    assert len(ref[0]) == 100 and fast == ref


@settings(max_examples=150, deadline=None)
@given(words=st.lists(st.text(alphabet="aab 你好，", min_size=1, max_size=12), max_size=30),
       n=st.integers(0, 30))
def test_random_texts(words, n):
    """Few symbols, many repeats: ties and overlapping runs on every draw."""
    ref, fast = both(words, n)
    assert fast == ref


def test_train_with_the_fast_engine_gives_the_same_tokenizer(shakespeare_path):
    text = shakespeare_path.read_text(encoding="utf-8")[:30_000]
    with use_engine("numpy"):
        ref = BPETokenizer.train(text, 400)
    with use_engine("fast"):
        fast = BPETokenizer.train(text, 400)
    assert fast.to_dict() == ref.to_dict()
    assert fast.encode(text[:2000]) == ref.encode(text[:2000])


# ----------------------------------------------------------------------------
# encoding: zerollm/engine/fast/bpe.py encode_chunks == zerollm/tokenizers/bpe.py encode_chunks

@pytest.mark.parametrize("corpus", ["shakespeare", "tang"])
def test_encoding_matches_the_reference(request, corpus):
    text = request.getfixturevalue(f"{corpus}_path").read_text(encoding="utf-8")[:30_000]
    tok = BPETokenizer.train(text, 500)
    chunks = [c.encode("utf-8") for c in dict.fromkeys(split_text(text, tok._regex))] + [b"", b"\xff\xfe"]
    args = (tok._byte_ids, tok._ranks, tok._merged)
    assert fast_bpe.encode_chunks(chunks, *args) == encode_chunks.reference(chunks, *args)
    shuffled = list(np.random.default_rng(0).permutation(256))      # byte ids of an imported vocabulary
    assert fast_bpe.encode_chunks(chunks, shuffled, *args[1:]) == encode_chunks.reference(chunks, shuffled, *args[1:])
    with use_engine("fast"):                     # a fresh tokenizer: nothing in its chunk cache
        ids = BPETokenizer(tok.pattern, tok.merges, tok.special_tokens, tok.vocab).encode(text)
    assert ids == tok.encode(text) and tok.decode(ids) == text


def test_few_chunks_are_left_to_the_reference():
    assert fast_bpe.encode_chunks([b"ab"], list(range(256)), {(97, 98): 0}, [256]) is NotImplemented
