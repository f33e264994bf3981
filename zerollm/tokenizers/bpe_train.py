"""Learning BPE merges (Sennrich et al. 2016, "Neural Machine Translation of Rare Words with
Subword Units"), byte-level as in GPT-2, with incremental pair counts over flat NumPy arrays.

The textbook loop recounts every pair of the whole corpus after each merge: O(corpus) per merge.
``count_pairs`` and ``merge_word`` below are the textbook step on a few words (the exercises teach
from them). ``learn_merges`` does the same work with no Python step per byte, from three observations:

1. Chunks repeat. " the" occurs thousands of times in Shakespeare; each distinct chunk is stored once,
   with its count as the weight of its pairs. All of them sit end to end in one array (``Pairs``),
   linked to their neighbours, so a merge rewrites only the positions where it occurs (Hugging Face's
   and tiktoken's trainers keep per-word positions the same way).
2. A merge only changes the pairs next to its occurrences: ``... p a b q ...`` becomes ``... p X q ...``,
   so (p, a), (a, b), (b, q) lose the chunk's count and (p, X), (X, q) gain it. Every pair keeps the
   list of positions where it was made, so a merge visits its own occurrences and nothing else, all of
   them at once, as arrays (a Chinese line is one chunk of distinct characters: no word is rebuilt).
3. The most frequent pair is looked for among a few candidates, not among all pairs (``Best``).

Tie rule (documented so training is deterministic): among pairs with the same count, the pair
with the smallest (left id, right id) wins.

>>> merges, vocab = learn_merges(["aaab", "aaab", "ab"], 2)   # (a,a) is seen 4 times, (a,b) 3
>>> merges                       # (left, right, new id), in the order they were learned
[(97, 97, 256), (97, 98, 257)]
>>> vocab[256], vocab[257]
(b'aa', b'ab')
"""

from collections import Counter, defaultdict

import numpy as np


CANDIDATES = 1024      # how many of the most frequent pairs the search for the best one starts from


# ----------------------------------------------------------------------------
# the textbook step, on a few words

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



# ----------------------------------------------------------------------------
# the corpus as arrays

def _key(a, b):
    """One int64 per pair: left << 32 | right (ids stay far below 2**31), ordered as (left, right) is."""
    return (a << 32) | b


def _groups(codes):
    """Sort ``codes`` (small ints, stably: equal codes keep their order) -> (order, where each group of
    equal codes starts in the sorted order, the group of each sorted entry).

    >>> _groups(np.array([7, 3, 7, 3, 9]))
    (array([1, 3, 0, 2, 4]), array([0, 2, 4]), array([0, 0, 1, 1, 2]))
    """
    if codes.size > 256 and codes.max() < 1 << 16:
        order = np.argsort(codes.astype(np.uint16), kind="stable")      # 16 bits: NumPy sorts by radix
    else:
        order = np.argsort(codes, kind="stable")
    sorted_codes = codes[order]
    new_group = np.empty(codes.size, bool)
    new_group[0], new_group[1:] = True, sorted_codes[1:] != sorted_codes[:-1]
    return order, np.flatnonzero(new_group), np.cumsum(new_group) - 1


class Pairs:
    """Every distinct chunk once, as linked token positions, and the count of every pair.

    Positions (module docstring, point 1):
    sym[i]          the token at position i; -1 after each chunk, and once i was merged into its left
                    neighbour (the array ends with a -1, so sym[-1], the look-up of "no neighbour", is -1)
    nxt[i], prv[i]  the neighbours of i inside its chunk, -1 at the chunk's ends
    wt[i]           how often i's chunk occurs in the text
    pid_at[i]       the id of the pair that starts at i, -1 where none does
    Pairs, by id (a pair gets an id when it is first made, and keeps it):
    keys[pid], counts[pid]   the pair (see _key) and its count
    occ[first[pid]:first[pid + 1]]   the positions where it was made, in order (where a merge next to it
                    has replaced it since, pid_at[i] != pid); ``moved[pid]`` instead, for the few pairs
                    made again later (see _add_existing)

    >>> c = Pairs(["ab", "b", "ab"])
    >>> c.sym.tolist(), c.wt.tolist(), c.nxt.tolist(), c.pid_at.tolist()
    ([97, 98, -1, 98, -1], [2, 2, 2, 1, 1], [1, -1, -1, -1, -1], [0, -1, -1, -1, -1])
    >>> c.keys[:c.n].tolist() == [_key(97, 98)], c.counts[:c.n].tolist()
    (True, [2])
    """

    def __init__(self, chunks):
        counts = Counter(chunks)
        encoded = [c.encode("utf-8") for c in counts]
        lengths = np.fromiter((len(e) + 1 for e in encoded), np.int64, len(encoded))   # + the -1 after it
        self.sym = np.frombuffer(b"\xff".join(encoded) + b"\xff", np.uint8).astype(np.int64)
        self.sym[np.cumsum(lengths) - 1] = -1
        self.sym[-1] = -1                                  # also when there is no chunk at all
        self.wt = np.repeat(np.fromiter(counts.values(), np.int64, len(counts)), lengths)
        N = self.sym.size
        linked = np.zeros(N, bool)                         # i and i + 1 pair up
        linked[:-1] = (self.sym[:-1] >= 0) & (self.sym[1:] >= 0)
        left = np.flatnonzero(linked)                      # (P,) positions that start a pair
        self.nxt, self.prv = np.full(N, -1), np.full(N, -1)
        self.nxt[left], self.prv[left + 1] = left + 1, left
        self.pid_at = np.full(N, -1)
        self.n, self.n_occ = 0, 0
        self.keys, self.counts, self.first, self.occ = (np.empty(1024, np.int64) for _ in range(4))
        self.first[0], self.moved = 0, {}
        self.add_new(left, self.sym[left] << 8 | self.sym[left + 1], self.wt[left])

    def add_new(self, at, codes, weights):
        """Give the pairs made at positions ``at`` (in order) their ids, a new one per distinct code (codes
        are small ints that tell the pairs apart); count them. Returns the new ids."""
        if at.size == 0:
            return at
        order, starts, group = _groups(codes)
        ids = np.arange(self.n, self.n + starts.size)
        self._room(self.n + starts.size + 1, self.n_occ + at.size)
        at = at[order]
        self.keys[ids] = _key(self.sym[at[starts]], self.sym[self.nxt[at[starts]]])
        self.counts[ids] = np.add.reduceat(weights[order], starts)
        self.first[ids] = self.n_occ + starts
        self.first[self.n + starts.size] = self.n_occ + at.size
        self.occ[self.n_occ:self.n_occ + at.size] = at
        self.pid_at[at] = self.n + group
        self.n, self.n_occ = self.n + starts.size, self.n_occ + at.size
        return ids

    def _room(self, n, n_occ):
        if n > self.keys.size:
            size = max(n, 2 * self.keys.size)
            self.keys, self.counts, self.first = (np.concatenate((a, np.empty(size - a.size, a.dtype)))
                                                  for a in (self.keys, self.counts, self.first))
        if n_occ > self.occ.size:
            self.occ = np.concatenate((self.occ, np.empty(max(n_occ, 2 * self.occ.size) - self.occ.size, np.int64)))

    def occurrences(self, pid, run):
        """The positions where pair ``pid`` starts, in order. ``run``: the pair is (a, a); then, in a run
        "a a a", only every other one from the left (it merges as "X a", as ``merge_word`` does)."""
        at = self.moved[pid] if pid in self.moved else self.occ[self.first[pid]:self.first[pid + 1]]
        at = at[self.pid_at[at] == pid]
        if run and at.size > 1:
            follows = np.zeros(at.size, bool)              # (a, a) right after another
            follows[1:] = self.nxt[at[:-1]] == at[1:]
            if follows.any():
                k = np.arange(at.size)
                run_start = np.maximum.accumulate(np.where(follows, 0, k))
                at = at[(k - run_start) % 2 == 0]
        return at

    def merge(self, pid, a, b, x, x_is_new):
        """Merge pair ``pid`` = (a, b) -> token x everywhere, and count the pairs that changed. Returns the
        ids of the pairs whose count rose.

        For an occurrence at i (j = nxt[i], p = prv[i], q = nxt[j], the chunk seen w times), the pairs
        starting at p, i and j lose w; p and i start new pairs with x, which gain it. An occurrence right
        after another ("a b a b") shares its left pair with the other's right one: counted once.
        """
        sym, nxt, pid_at = self.sym, self.nxt, self.pid_at
        i = self.occurrences(pid, a == b)                  # (n,)
        j, p, w = nxt[i], self.prv[i], self.wt[i]
        q = nxt[j]
        own_left = p >= 0
        own_left[1:] &= p[1:] != j[:-1]
        has_right = q >= 0
        pl, wl, qr, ir, wr = p[own_left], w[own_left], q[has_right], i[has_right], w[has_right]
        np.subtract.at(self.counts, np.concatenate((pid_at[pl], pid_at[j[has_right]])), np.concatenate((wl, wr)))
        self.counts[pid] = 0              # no (a, b) is left: each was merged or gave its a to the one on its left
        sym[i], sym[j], pid_at[j], pid_at[i] = x, -1, -1, -1     # i becomes x; j leaves its chunk
        nxt[i] = q
        self.prv[qr] = ir
        made, weights = np.concatenate((pl, ir)), np.concatenate((wl, wr))
        if not x_is_new:                                   # pairs with x may exist already (see learn_merges)
            return self._add_existing(made, weights)
        return self.add_new(made, np.concatenate((sym[pl], sym[qr] + x + 1)), weights)   # (t, x) and (x, t)

    def _add_existing(self, at, weights):
        """As add_new, where x already was a token: a pair seen before keeps its id and gains counts and
        positions (its position list goes to ``moved``, old and new positions in order)."""
        order = np.argsort(at)                             # (x, x) may come from both sides
        at, weights = at[order], weights[order]
        keys = _key(self.sym[at], self.sym[self.nxt[at]])
        known = np.isin(keys, self.keys[:self.n])
        ids = self.add_new(at[~known], np.unique(keys[~known], return_inverse=True)[1], weights[~known])
        if not known.any():
            return ids
        pid_of = dict(zip(self.keys[:self.n].tolist(), range(self.n)))
        old = np.array([pid_of[k] for k in keys[known].tolist()], np.int64)
        np.add.at(self.counts, old, weights[known])
        self.pid_at[at[known]] = old
        for pid in np.unique(old).tolist():
            listed = self.moved[pid] if pid in self.moved else self.occ[self.first[pid]:self.first[pid + 1]]
            self.moved[pid] = np.union1d(listed, at[known][old == pid])
        return np.concatenate((ids, old))


# ----------------------------------------------------------------------------
# the most frequent pair

class Best:
    """The pair with the highest count, found among a few candidates instead of all pairs.

    The candidates are every pair whose count is at or above ``floor``. The floor is set at the
    CANDIDATES-th largest count; a pair whose count rises to it joins them (counts otherwise only fall).
    So the highest candidate at or above the floor is the highest of all pairs, with all its ties.
    When every candidate has fallen below the floor, or twice as many have joined, the floor is set again.
    """

    def __init__(self, pairs):
        self.pairs = pairs
        self._choose()

    def _choose(self):
        counts = self.pairs.counts[:self.pairs.n]
        self.floor = 1 if counts.size <= CANDIDATES else max(1, int(np.partition(counts, -CANDIDATES)[-CANDIDATES]))
        self.candidates = np.flatnonzero(counts >= self.floor)
        self.limit = 2 * max(CANDIDATES, self.candidates.size)     # many ties at the floor: more

    def pop(self):
        """The id of the pair with the highest count (ties: the smallest key), or None if no pair is left."""
        while True:
            c = self.pairs.counts[self.candidates]
            top = c.max(initial=0)
            if top >= self.floor:
                tied = self.candidates[c == top]
                return int(tied[0] if tied.size == 1 else tied[np.argmin(self.pairs.keys[tied])])
            if self.floor == 1:
                return None
            self._choose()

    def rose(self, pids):
        """Pairs whose count rose: those now at or above the floor become candidates (too many: the floor
        is set again)."""
        up = pids[self.pairs.counts[pids] >= self.floor]
        if up.size:
            self.candidates = np.concatenate((self.candidates, up))
            if self.candidates.size > self.limit:
                self._choose()


# ----------------------------------------------------------------------------
# the training loop

def learn_merges(chunks, n_new_tokens):
    """Learn merges until ``n_new_tokens`` tokens were added to the 256 bytes (or no pair is left).

    The fast engine trains with it too: its compiled trainer was slower than these array steps, as a
    user meets them (docs/benchmarks.md, "BPE"), so it was removed and nothing compiles for training.

    chunks: the pre-split training text (a list of strings).
    Returns ``merges`` [(left, right, new_id), ...] in learning order (= rank order) and
    ``vocab`` {id: bytes}. A merge whose bytes already exist as a token (e.g. "a"+"bc" after
    "ab"+"c") reuses that token's id instead of adding a duplicate, so every token's bytes are
    unique, as Hugging Face's vocab.json requires.
    """
    vocab = {i: bytes([i]) for i in range(256)}
    id_of = {v: k for k, v in vocab.items()}
    pairs = Pairs(chunks)
    best = Best(pairs)
    merges, next_id = [], 256
    while next_id < 256 + n_new_tokens:
        pid = best.pop()
        if pid is None:
            break                                   # every chunk is a single token already
        key = int(pairs.keys[pid])
        a, b = key >> 32, key & 0xFFFFFFFF
        merged = vocab[a] + vocab[b]
        new_id = id_of.get(merged)
        is_new = new_id is None
        if is_new:
            new_id, next_id = next_id, next_id + 1
            vocab[new_id], id_of[merged] = merged, new_id
        merges.append((a, b, new_id))
        best.rose(pairs.merge(pid, a, b, new_id, is_new))
    return merges, vocab

