"""Learning BPE merges (Sennrich et al. 2016, "Neural Machine Translation of Rare Words with
Subword Units"), byte-level as in GPT-2, with incremental pair counts.

The textbook loop recounts every pair of the whole corpus after each merge: O(corpus) per merge.
Three observations make it fast enough for a laptop:

1. Chunks repeat. " the" occurs thousands of times in Shakespeare; we keep ``chunk -> count``
   and process each distinct chunk once, weighting its pairs by its count.
2. A merge only changes the chunks that contain the merged pair. An index ``pair -> chunks``
   finds them; only their pairs are subtracted and re-added.
3. The most frequent pair comes from a heap of (-count, pair) entries. A count that changes
   gets a fresh entry; stale entries are skipped when popped ("lazy deletion").

Tie rule (documented so training is deterministic): among pairs with the same count, the pair
with the smallest (left id, right id) wins.

>>> merges, vocab = learn_merges(["aaab", "aaab", "ab"], 2)   # (a,a) is seen 4 times, (a,b) 3
>>> merges                       # (left, right, new id), in the order they were learned
[(97, 97, 256), (97, 98, 257)]
>>> vocab[256], vocab[257]
(b'aa', b'ab')
"""

import contextlib
import gc
import heapq
from collections import Counter, defaultdict

from zerollm.engine import accelerated


# ----------------------------------------------------------------------------
# small pieces

def count_pairs(words, freqs):
    """Weighted counts of adjacent pairs, and which words contain each pair.

    >>> counts, where = count_pairs([[1, 2, 3], [1, 2]], [10, 1])
    >>> dict(counts), dict(where)
    ({(1, 2): 11, (2, 3): 10}, {(1, 2): {0, 1}, (2, 3): {0}})
    """
    counts, where = defaultdict(int), defaultdict(set)
    for wi, (w, f) in enumerate(zip(words, freqs)):
        for pair in zip(w, w[1:]):
            counts[pair] += f
            where[pair].add(wi)
    return counts, where


def pop_best(heap, counts):
    """The pair with the highest current count (ties: smallest pair), or None if none is left."""
    while heap:
        neg, pair = heapq.heappop(heap)
        if counts.get(pair, 0) == -neg > 0:    # a stale entry has an old count: skip it
            return pair
    return None


# ----------------------------------------------------------------------------
# one merge, applied only where it matters

def merge_word(w, a, b, new_id, f, delta, added):
    """Merge (a, b) -> new_id in word ``w`` (seen ``f`` times); record how pair counts change.

    Only the neighbours of each merge change: ``... p a b q ...`` becomes ``... p X q ...``, so
    (p, a), (a, b), (b, q) lose ``f`` and (p, X), (X, q) gain ``f``. ``p`` is read from the
    merged output so far, so runs such as ``a b a b`` are counted right (Hugging Face's
    ``Word::merge`` uses the same in-place bookkeeping). ``list.index`` finds each ``a`` at C
    speed, so a long word with one match costs little. New pairs are appended to ``added``.

    >>> delta, added = {}, []
    >>> merge_word([1, 2, 1, 2], 1, 2, 9, 1, delta, added)
    [9, 9]
    >>> delta                # (1, 2) x2 and (2, 1) are gone; (9, 1) came and went; (9, 9) is new
    {(1, 2): -2, (2, 1): -1, (9, 1): 0, (9, 9): 1}
    """
    out, i, last = [], 0, len(w) - 1
    while i < last:
        try:
            j = w.index(a, i, last)
        except ValueError:
            break
        if w[j + 1] != b:
            out.extend(w[i:j + 1])
            i = j + 1
            continue
        out.extend(w[i:j])
        delta[(a, b)] = delta.get((a, b), 0) - f
        if out:                                   # left neighbour p (already merged if it was)
            p = out[-1]
            delta[(p, a)] = delta.get((p, a), 0) - f
            delta[(p, new_id)] = delta.get((p, new_id), 0) + f
            added.append((p, new_id))
        if j + 2 <= last:                         # right neighbour q (not merged yet)
            q = w[j + 2]
            delta[(b, q)] = delta.get((b, q), 0) - f
            delta[(new_id, q)] = delta.get((new_id, q), 0) + f
            added.append((new_id, q))
        out.append(new_id)
        i = j + 2
    out.extend(w[i:])
    return out


def apply_merge(pair, new_id, words, freqs, counts, where):
    """Merge ``pair`` in every word that (may) contain it; update counts and the index; return
    the pairs whose count changed (they need fresh heap entries).

    The index may hold stale entries (a word listed under a pair it no longer has): merging
    such a word changes nothing, which is cheaper than keeping the index exact.
    """
    a, b = pair
    delta = {}
    for wi in where.pop(pair):
        added = []
        words[wi] = merge_word(words[wi], a, b, new_id, freqs[wi], delta, added)
        for p in added:
            where[p].add(wi)
    changed = []
    for p, d in delta.items():
        if d:
            counts[p] = counts.get(p, 0) + d
            if counts[p] <= 0:
                del counts[p]
                where.pop(p, None)
            changed.append(p)
    return changed


# ----------------------------------------------------------------------------
# the training loop

@contextlib.contextmanager
def paused_gc():
    """Pause Python's cycle collector for a block, then restore it. Training makes millions of small
    lists, sets and tuples and no reference cycles, yet each collection walks them all: on the Tang
    poems the collector took half of the training time."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


@accelerated
def learn_merges(chunks, n_new_tokens):
    """Learn merges until ``n_new_tokens`` tokens were added to the 256 bytes (or no pair is left).

    The fast engine (``--engine fast``) runs zerollm/engine/fast/bpe.py instead: the same merges,
    computed over flat arrays in compiled code (tests/test_bpe_fast.py compares them).

    chunks: the pre-split training text (a list of strings).
    Returns ``merges`` [(left, right, new_id), ...] in learning order (= rank order) and
    ``vocab`` {id: bytes}. A merge whose bytes already exist as a token (e.g. "a"+"bc" after
    "ab"+"c") reuses that token's id instead of adding a duplicate, so every token's bytes are
    unique, as Hugging Face's vocab.json requires.
    """
    with paused_gc():
        return _learn(chunks, n_new_tokens)


def _learn(chunks, n_new_tokens):
    """learn_merges's loop (the collector paused around it)."""
    vocab = {i: bytes([i]) for i in range(256)}
    id_of = {v: k for k, v in vocab.items()}
    chunk_counts = Counter(chunks)
    words = [list(c.encode("utf-8")) for c in chunk_counts]
    freqs = list(chunk_counts.values())
    counts, where = count_pairs(words, freqs)
    heap = [(-c, p) for p, c in counts.items()]
    heapq.heapify(heap)
    merges, next_id = [], 256
    while next_id < 256 + n_new_tokens:
        pair = pop_best(heap, counts)
        if pair is None:
            break                                   # every chunk is a single token already
        merged = vocab[pair[0]] + vocab[pair[1]]
        new_id = id_of.get(merged)
        if new_id is None:
            new_id, next_id = next_id, next_id + 1
            vocab[new_id], id_of[merged] = merged, new_id
        merges.append((pair[0], pair[1], new_id))
        for p in apply_merge(pair, new_id, words, freqs, counts, where):
            if p in counts:
                heapq.heappush(heap, (-counts[p], p))
    return merges, vocab
