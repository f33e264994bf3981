"""The BPE trainers learn today exactly what the trainer of commit ab437b9 learned: the same merges, in
the same order, with the same ids, and the same vocabulary.

tests/golden/bpe_merges_ab437b9.json holds what that trainer (one Python list per distinct chunk, rebuilt
at each merge) learned on the cases of tests/golden/bpe_cases.py (both shipped corpora, both split
patterns); tests/golden/make_bpe_golden.py wrote it, running the old code. Here the trainer (both
engines use it) trains them again. Speed is measured in
benchmarks/bpe_speed.py, not here.
"""

import json
import sys
from pathlib import Path

import numpy as np
import pytest

from zerollm.tokenizers import bpe_train
from zerollm.tokenizers.bpe_train import learn_merges

GOLDEN = Path(__file__).with_name("golden")
sys.path.insert(0, str(GOLDEN))

from bpe_cases import CASES, chunks_of  # noqa: E402

RECORDED = json.loads((GOLDEN / "bpe_merges_ab437b9.json").read_text(encoding="utf-8"))


def as_recorded(merges, vocab):
    return {"merges": [list(m) for m in merges], "vocab": [vocab[i].hex() for i in range(len(vocab))]}


@pytest.fixture(scope="module")
def chunks():
    return {name: chunks_of(*case[:3]) for name, case in CASES.items()}


@pytest.mark.parametrize("name", list(CASES))
def test_the_numpy_trainer_learns_what_the_old_one_did(chunks, name):
    assert len(RECORDED[name]["merges"]) == CASES[name][3]
    assert as_recorded(*learn_merges(chunks[name], CASES[name][3])) == RECORDED[name]


@pytest.mark.parametrize("candidates", [1, 3])
def test_few_candidates_give_the_same_merges(chunks, monkeypatch, candidates):
    """With one or three candidates the floor is set again after nearly every merge: the search for the
    most frequent pair must still find it, ties included."""
    monkeypatch.setattr(bpe_train, "CANDIDATES", candidates)
    name = "tang-gpt2"
    assert as_recorded(*learn_merges(chunks[name], 200))["merges"] == RECORDED[name]["merges"][:200]


def recount(pairs):
    """{key: count} of the pairs in the linked arrays as they are now (the slow way: every live position)."""
    at = np.flatnonzero((pairs.sym >= 0) & (pairs.nxt >= 0))
    keys = bpe_train._key(pairs.sym[at], pairs.sym[pairs.nxt[at]])
    out = {}
    for k, w in zip(keys.tolist(), pairs.wt[at].tolist()):
        out[k] = out.get(k, 0) + w
    return out, dict(zip(at.tolist(), keys.tolist()))


def listed(pairs, pid):
    return pairs.moved[pid] if pid in pairs.moved else pairs.occ[pairs.first[pid]:pairs.first[pid + 1]]


@pytest.mark.parametrize("seed", range(6))
def test_counts_and_positions_stay_exact_when_a_merge_reuses_a_token(seed):
    """A merge whose bytes are already a token reuses its id (learn_merges); the pairs it makes may then
    exist already (Pairs._add_existing). No shipped corpus makes such a merge, so here the new token is an
    earlier one on every other merge, and after each merge every count, every position's pair and every
    position list is checked against a recount of the arrays."""
    rng = np.random.default_rng(seed)
    chunks = ["".join(rng.choice(list("abcab"), rng.integers(1, 9))) for _ in range(40)]
    pairs = bpe_train.Pairs(chunks)
    best = bpe_train.Best(pairs)
    made = []
    for step in range(25):
        pid = best.pop()
        if pid is None:
            break
        a, b = divmod(int(pairs.keys[pid]), 1 << 32)
        earlier = [t for t in made if t not in (a, b)]
        reuse = step % 2 == 1 and earlier
        x = earlier[int(rng.integers(len(earlier)))] if reuse else 256 + step
        made.append(x)
        best.rose(pairs.merge(pid, a, b, x, not reuse))
        counts, key_at = recount(pairs)
        mine = {int(pairs.keys[i]): int(pairs.counts[i]) for i in range(pairs.n) if pairs.counts[i]}
        assert mine == counts
        for pos, key in key_at.items():
            assert pairs.keys[pairs.pid_at[pos]] == key and pos in listed(pairs, pairs.pid_at[pos])
        top = max(counts.values(), default=0)
        assert best.pop() is None if not top else pairs.keys[best.pop()] == min(k for k, c in counts.items() if c == top)
