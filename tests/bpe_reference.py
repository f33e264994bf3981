"""A slow BPE trainer that is obviously right, for tests: recount every pair after every merge."""

from collections import Counter


def naive_learn(chunks, n):
    """Recount every pair after every merge (slow, obviously right), with the trainer's two rules: the
    most frequent pair, ties to the smallest (left, right); a merge whose bytes already are a token
    reuses that token's id and adds nothing to the vocabulary."""
    words = Counter(tuple(c.encode("utf-8")) for c in chunks)
    vocab = {i: bytes([i]) for i in range(256)}
    id_of = {b: i for i, b in vocab.items()}
    merges = []
    while len(vocab) < 256 + n:
        counts = Counter()
        for w, f in words.items():
            for p in zip(w, w[1:]):
                counts[p] += f
        if not counts:
            break
        best = min(counts, key=lambda p: (-counts[p], p))
        joined = vocab[best[0]] + vocab[best[1]]
        if joined not in id_of:
            id_of[joined] = len(vocab)
            vocab[len(vocab)] = joined
        merges.append((*best, id_of[joined]))
        words = Counter({tuple(merge_pair(w, best, id_of[joined])): f for w, f in words.items()})
    return merges, vocab


def merge_pair(w, pair, new_id):
    out, i = [], 0
    while i < len(w):
        if tuple(w[i:i + 2]) == pair:
            out.append(new_id)
            i += 2
        else:
            out.append(w[i])
            i += 1
    return out
