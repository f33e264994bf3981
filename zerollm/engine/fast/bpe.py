"""Fast BPE encoding: ``zerollm.tokenizers.bpe.encode_chunks`` over flat int arrays, many chunks in one call.

In each chunk the reference's rule is applied: merge the pair of lowest rank, leftmost first. The pair
ranks live in an open-addressing hash table (rows of value, key), so no Python runs per merge.

Training has no kernel here: the reference trainer (zerollm/tokenizers/bpe_train.py) does its work in
whole-array NumPy steps and, measured in a fresh process as a user meets it, beats this engine's old
compiled trainer on both corpora even before the old one's compilation (docs/benchmarks.md, "BPE").
So the fast engine trains with it too, and nothing has to be compiled for `zerollm prepare`.
"""

import numpy as np

from zerollm.engine.fast.jit import exact_kernel

_GOLDEN = -7046029254386353131                                    # 2^64 / golden ratio (as int64)
_NO_RANK = np.int64(2 ** 62)
MIN_CHUNKS = 64        # encode_chunks leaves fewer chunks to the reference (building the table costs more)


@exact_kernel
def _grow(a, need):
    """``a`` itself if it holds ``need`` entries, else a copy twice as long."""
    if need <= a.size:
        return a
    out = np.empty(max(need, 2 * a.size), a.dtype)
    for i in range(a.size):
        out[i] = a[i]
    return out


@exact_kernel
def _slot(table, key):
    """The row of ``key`` in an open-addressing hash table of rows (value, key), value -1 when empty,
    probing the next row on a clash: the row that holds ``key``, or the empty row where it belongs."""
    mask = table.shape[0] - 1
    s = (((key ^ (key >> 32)) * _GOLDEN) >> 32) & mask     # Fibonacci hashing of both halves
    while table[s, 0] >= 0 and table[s, 1] != key:
        s = (s + 1) & mask
    return s


@exact_kernel
def _encode(ids, ends, table, merged):
    """BPE on each chunk ids[ends[c-1]:ends[c]] in place, the reference's rule (lowest rank, leftmost
    first); table maps left << 32 | right to a rank (see _slot). Returns each chunk's new length."""
    lengths = np.empty(ends.size, np.int64)
    r = np.empty(0, np.int64)
    start = 0
    for c in range(ends.size):
        n = ends[c] - start
        r = _grow(r, n)
        for i in range(n - 1):
            r[i] = _rank(table, ids[start + i], ids[start + i + 1])
        while n > 1:
            i, best = -1, _NO_RANK
            for k in range(n - 1):                 # the leftmost lowest rank
                if r[k] < best:
                    i, best = k, r[k]
            if i < 0:
                break
            ids[start + i] = merged[best]
            for k in range(i + 1, n - 1):          # close the gap: ids and ranks move one left
                ids[start + k] = ids[start + k + 1]
                r[k] = r[k + 1]
            n -= 1
            if i > 0:
                r[i - 1] = _rank(table, ids[start + i - 1], ids[start + i])
            if i < n - 1:
                r[i] = _rank(table, ids[start + i], ids[start + i + 1])
        lengths[c] = n
        start = ends[c]
    return lengths


@exact_kernel
def _rank(table, a, b):
    row = table[_slot(table, (a << 32) | b)]
    return row[0] if row[0] >= 0 else _NO_RANK


def encode_chunks(chunks, byte_ids, ranks, merged):
    """Same arguments and results as zerollm.tokenizers.bpe.encode_chunks. The rank table is built per
    call (a few ms for a large vocabulary): a call with few chunks leaves the work to the reference."""
    if len(chunks) < MIN_CHUNKS:
        return NotImplemented
    size = 1 << 10
    while size < 2 * len(ranks):
        size *= 2
    table = np.full((size, 2), -1, np.int64)
    keys = np.array([(a << 32) | b for a, b in ranks], np.int64).reshape(-1)
    _fill(table, keys, np.fromiter(ranks.values(), np.int64, len(ranks)))
    lengths = np.fromiter(map(len, chunks), np.int64, len(chunks))
    ends = np.cumsum(lengths)
    ids = np.asarray(byte_ids, np.int64)[np.frombuffer(b"".join(chunks), np.uint8)]
    new_lengths = _encode(ids, ends, table, np.asarray(merged, np.int64))
    flat = ids.tolist()
    return [flat[s:s + n] for s, n in zip((ends - lengths).tolist(), new_lengths.tolist())]


@exact_kernel
def _fill(table, keys, values):
    for k in range(keys.size):
        r = _slot(table, keys[k])
        table[r, 0], table[r, 1] = values[k], keys[k]



KERNELS = {"encode_chunks": encode_chunks}
