"""The fast engine's BPE trainer (zerollm/engine/fast/bpe.py) learns exactly the reference's merges
(zerollm/tokenizers/bpe_train.py): the same pairs, in the same order, with the same ids.

Corpora: the small texts of tests/test_tokenizers.py, ties, runs of one byte ("a a a" merges left to
right), Han text (3 bytes a character), random texts, and slices of both shipped corpora under both
split patterns. Speed is measured in benchmarks/bpe_speed.py, not here.
"""

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
    """(reference merges and vocab, fast merges and vocab)."""
    return learn_merges.reference(chunks, n), fast_bpe.learn_merges(chunks, n)


def test_the_fast_engine_has_the_trainer():
    assert KERNELS["learn_merges"] is fast_bpe.learn_merges


@pytest.mark.parametrize("case", list(SMALL))
@pytest.mark.parametrize("n", [0, 1, 3, 40])
def test_small_corpora(case, n):
    ref, fast = both(chunks_of(*SMALL[case]), n)
    assert fast == ref
    assert len(fast[0]) == min(n, len(ref[0]))


def test_empty_input_learns_nothing():
    assert fast_bpe.learn_merges([], 10) == learn_merges.reference([], 10) == ([], {i: bytes([i]) for i in range(256)})


@pytest.mark.parametrize("corpus", ["shakespeare", "tang"])
@pytest.mark.parametrize("pattern", ["gpt2", "gpt4"])
def test_slices_of_the_shipped_corpora(request, corpus, pattern):
    text = request.getfixturevalue(f"{corpus}_path").read_text(encoding="utf-8")[:20_000]
    ref, fast = both(chunks_of(text, pattern), 200)
    assert len(ref[0]) == 200 and fast == ref


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


def test_a_merge_whose_bytes_exist_reuses_the_id():
    """Tokens a, b, c (97..99), 256 = "ab", 257 = "bc": "a" + "bc" is 256 + "c"'s bytes -> not new,
    "ab" + "c" registered as 258 -> "a" + "bc" finds 258."""
    pool = np.zeros(1024, np.uint8)
    pool[:256] = np.arange(256)
    tstart, tlen = np.arange(256, dtype=np.int64), np.ones(256, np.int64)
    id_of = np.full((1024, 2), -1, np.int64)
    for t in range(256):
        h = fast_bpe._hash(pool, t, 1)
        r = fast_bpe._slot(id_of, h)
        id_of[r] = t, h
    end, next_id = np.int64(256), np.int64(256)
    for left, right, expected in ((97, 98, 256), (98, 99, 257), (256, 99, 258), (97, 257, 258), (97, 98, 256)):
        x, pool, end, tstart, tlen, next_id = fast_bpe._new_token(left, right, pool, end, tstart, tlen, id_of, next_id)
        assert x == expected
    assert next_id == 259 and pool[tstart[258]:tstart[258] + tlen[258]].tobytes() == b"abc"


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
