"""Fast BPE training: the merges of ``zerollm.tokenizers.bpe_train.learn_merges``, over flat int arrays.

The reference keeps each distinct chunk as a Python list and rebuilds the whole list when a merge
touches it. Here every symbol of every distinct chunk sits in one array, linked to its neighbours
(a doubly linked list per chunk), so a merge rewrites only the positions where it occurs:

    sym[i]         the token at position i (-1 once it was merged into its left neighbour)
    prv[i], nxt[i] the neighbours of i inside its chunk (-1 at the chunk's ends)
    wt[i]          how often i's chunk occurs in the text
    pairs[pid]     count, head of its occurrence list, key (left << 32 | right), last merge that
                   changed it; a hash table maps the key to the pid. An occurrence list holds the
                   positions where the pair started (stale once a neighbour changed: checked on use)
    heap           (count, key), highest count first, ties to the smallest key = smallest pair;
                   a pair whose count changed is pushed again; stale entries are skipped when popped

Merging (a, b) -> X at position i with right neighbour j, left p and right-of-j q (count w):
(p, a), (a, b), (b, q) lose w; (p, X) and (X, q) gain w; i becomes X and j leaves the list. Positions
of (a, a) are visited left to right, so a run "a a a" merges as the reference does: "X a".
A merge whose bytes already are a token reuses that token's id (a hash of the bytes finds it).
Everything runs in one compiled call: no Python per merge.

Encoding (``encode_chunks``, reference zerollm.tokenizers.bpe.encode_chunks) applies the reference's
rule to many chunks in one call: in each chunk, merge the pair of lowest rank, leftmost first.
"""

from collections import Counter

import numpy as np

from zerollm.engine.fast.jit import exact_kernel

_FNV_OFFSET, _FNV_PRIME = -3750763034362895579, 1099511628211     # 64-bit FNV-1a (as int64)
_GOLDEN = -7046029254386353131                                    # 2^64 / golden ratio (as int64)
_NO_RANK = np.int64(2 ** 62)
MIN_CHUNKS = 64        # encode_chunks leaves fewer chunks to the reference (building the table costs more)


# ----------------------------------------------------------------------------
# small pieces: growing arrays, the token hash, the heap

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
def _hash(pool, start, n):
    h = np.int64(_FNV_OFFSET)
    for k in range(start, start + n):
        h = (h ^ np.int64(pool[k])) * np.int64(_FNV_PRIME)     # wraps around, as FNV wants
    return h


@exact_kernel
def _heapsort(a, n):
    """Sort a[:n] in place (numba's own sort takes a second to compile; this takes little)."""
    for end in range(n, 0, -1):
        first = end // 2 - 1 if end == n else 0    # heapify once, then sift only the new root
        for start in range(first, -1, -1):
            i, x = start, a[start]
            while 2 * i + 1 < end:
                child = 2 * i + 1
                if child + 1 < end and a[child + 1] > a[child]:
                    child += 1
                if a[child] <= x:
                    break
                a[i] = a[child]
                i = child
            a[i] = x
        a[0], a[end - 1] = a[end - 1], a[0]       # the largest goes to the end


@exact_kernel
def _before(c1, k1, c2, k2):
    """Heap order: higher count first; equal counts: smaller (left << 32 | right) first."""
    return c1 > c2 or (c1 == c2 and k1 < k2)


@exact_kernel
def _push(hc, hk, n, c, k):
    """Push (count c, pair key k) onto the heap of n entries held in hc, hk; returns them and n + 1."""
    hc, hk = _grow(hc, n + 1), _grow(hk, n + 1)
    i = n
    while i > 0:
        parent = (i - 1) >> 1
        if not _before(c, k, hc[parent], hk[parent]):
            break
        hc[i], hk[i] = hc[parent], hk[parent]
        i = parent
    hc[i], hk[i] = c, k
    return hc, hk, n + 1


@exact_kernel
def _pop(hc, hk, n):
    """Remove the first entry (it is read at index 0 before the call); returns n - 1."""
    n -= 1
    c, k = hc[n], hk[n]
    i = 0
    while True:
        child = 2 * i + 1
        if child >= n:
            break
        if child + 1 < n and _before(hc[child + 1], hk[child + 1], hc[child], hk[child]):
            child += 1
        if not _before(hc[child], hk[child], c, k):
            break
        hc[i], hk[i] = hc[child], hk[child]
        i = child
    if n > 0:
        hc[i], hk[i] = c, k
    return n


# ----------------------------------------------------------------------------
# pair bookkeeping

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
def _rehash(table, n):
    """``table`` itself while n pids fill at most half of it, else a table four times larger."""
    if 2 * n <= table.shape[0]:
        return table
    out = np.full((4 * table.shape[0], 2), -1, np.int64)
    for s in range(table.shape[0]):
        if table[s, 0] >= 0:
            r = _slot(out, table[s, 1])
            out[r, 0], out[r, 1] = table[s, 0], table[s, 1]
    return out


@exact_kernel
def _change(table, key, d, at, pairs, n_pid, occ, n_occ, changed, n_changed, stamp):
    """Count of pair ``key`` += d; a gain also records position ``at`` in the pair's occurrence list.

    pairs[pid] = (count, head of the occurrence list, key, stamp of the last merge that changed it);
    occ[e] = (position, next entry). The arrays and the table have room (the caller makes it).
    Returns the new n_pid, n_occ, n_changed."""
    s = _slot(table, key)
    pid = table[s, 0]
    if pid < 0:
        pid = n_pid
        n_pid += 1
        table[s, 0], table[s, 1] = pid, key
        pairs[pid, 0], pairs[pid, 1], pairs[pid, 2], pairs[pid, 3] = 0, -1, key, -1
    pairs[pid, 0] += d
    if pairs[pid, 3] != stamp:
        pairs[pid, 3] = stamp
        changed[n_changed] = pid
        n_changed += 1
    if d > 0:
        occ[n_occ, 0], occ[n_occ, 1] = at, pairs[pid, 1]
        pairs[pid, 1] = n_occ
        n_occ += 1
    return n_pid, n_occ, n_changed


@exact_kernel
def _room(a, need):
    """``a`` (2-D, one entry per row) itself if it has ``need`` rows, else a copy twice as long."""
    if need <= a.shape[0]:
        return a
    out = np.empty((max(need, 2 * a.shape[0]), a.shape[1]), a.dtype)
    for i in range(a.shape[0]):
        for k in range(a.shape[1]):
            out[i, k] = a[i, k]
    return out


@exact_kernel
def _same_bytes(pool, s1, s2, n):
    for k in range(n):
        if pool[s1 + k] != pool[s2 + k]:
            return False
    return True


@exact_kernel
def _new_token(a, b, pool, pool_end, tstart, tlen, id_of, next_id):
    """The id of the bytes of a + b: an existing token's, else next_id (registered).
    Returns (id, pool, pool_end, tstart, tlen, next_id)."""
    n = tlen[a] + tlen[b]
    pool = _grow(pool, pool_end + n)
    for k in range(tlen[a]):                       # the candidate's bytes go after the pool's end
        pool[pool_end + k] = pool[tstart[a] + k]
    for k in range(tlen[b]):
        pool[pool_end + tlen[a] + k] = pool[tstart[b] + k]
    h = _hash(pool, pool_end, n)
    r = _slot(id_of, h)
    while id_of[r, 0] >= 0:                        # the same hash: the same bytes, or a collision
        t = id_of[r, 0]
        if tlen[t] == n and _same_bytes(pool, tstart[t], pool_end, n):
            return t, pool, pool_end, tstart, tlen, next_id
        h += 1
        r = _slot(id_of, h)
    x = next_id
    tstart, tlen = _grow(tstart, x + 1), _grow(tlen, x + 1)
    tstart[x], tlen[x] = pool_end, n
    id_of[r, 0], id_of[r, 1] = x, h
    return x, pool, pool_end + n, tstart, tlen, next_id + 1


# ----------------------------------------------------------------------------
# the training loop, compiled

@exact_kernel
def _link(sym):
    """nxt[i], prv[i]: the neighbours of position i inside its chunk, -1 at a chunk's ends."""
    N = sym.size
    nxt, prv = np.full(N, -1, np.int64), np.full(N, -1, np.int64)
    for i in range(N - 1):
        if sym[i] >= 0 and sym[i + 1] >= 0:
            nxt[i], prv[i + 1] = i + 1, i
    return nxt, prv


@exact_kernel
def _byte_tokens(n_new):
    """The 256 byte tokens: their bytes (token t is pool[tstart[t]:tstart[t] + tlen[t]]) and a hash table
    (id, hash of the bytes) with room for n_new more (see _slot and _new_token)."""
    pool = np.arange(256).astype(np.uint8)
    tstart, tlen = np.arange(256).astype(np.int64), np.ones(256, np.int64)
    size = 1 << 10
    while size < 2 * (256 + n_new):
        size *= 2
    id_of = np.full((size, 2), -1, np.int64)
    for t in range(256):
        h = _hash(pool, t, 1)
        r = _slot(id_of, h)
        id_of[r, 0], id_of[r, 1] = t, h
    return pool, tstart, tlen, id_of


@exact_kernel
def _occurrences(e, occ, sym, nxt, a, b, positions):
    """The positions where (a, b) still starts, from the occurrence list that begins at entry e (stale
    entries skipped), left to right where it matters. Returns (positions, how many)."""
    n = 0
    while e >= 0:
        i = occ[e, 0]
        if sym[i] == a and nxt[i] >= 0 and sym[nxt[i]] == b:
            positions = _grow(positions, n + 1)
            positions[n] = i
            n += 1
        e = occ[e, 1]
    if a == b:                                     # only runs "a a a" overlap; there order matters
        _heapsort(positions, n)
    return positions, n


@exact_kernel
def _train(sym, wt, n_new):
    """sym: the bytes of every distinct chunk, each chunk followed by -1 (pairs with nothing);
    wt: the count of each position's chunk. Returns merges (M, 3) and each token's bytes as
    (pool, start, length) in id order."""
    N = sym.size
    nxt, prv = _link(sym)
    pool, tstart, tlen, id_of = _byte_tokens(n_new)
    pool_end, next_id = np.int64(256), np.int64(256)

    # every pair once: counts and occurrence lists; backwards, so each list is in position order
    table = np.full((1 << 16, 2), -1, np.int64)     # left << 32 | right -> pid, see _slot
    pairs = np.empty((1024, 4), np.int64)
    occ = np.empty((N, 2), np.int64)
    n_pid, n_occ, n_changed, stamp = np.int64(0), np.int64(0), np.int64(0), np.int64(-2)
    changed = np.empty(N + 1, np.int64)
    for i in range(N - 1, -1, -1):
        if nxt[i] >= 0:
            pairs = _room(pairs, n_pid + 1)
            table = _rehash(table, n_pid + 1)
            n_pid, n_occ, n_changed = _change(table, (sym[i] << 32) | sym[nxt[i]], wt[i], i, pairs, n_pid,
                                              occ, n_occ, changed, n_changed, stamp)
    hc, hk = np.empty(n_pid + 1024, np.int64), np.empty(n_pid + 1024, np.int64)
    n_heap = np.int64(0)
    for pid in range(n_pid):
        hc, hk, n_heap = _push(hc, hk, n_heap, pairs[pid, 0], pairs[pid, 2])

    merges = np.empty((max(n_new, 1), 3), np.int64)
    n_merges = np.int64(0)
    positions = np.empty(64, np.int64)
    while next_id < 256 + n_new and n_heap > 0:
        c, key = hc[0], hk[0]
        n_heap = _pop(hc, hk, n_heap)
        pid = table[_slot(table, key), 0]
        if pairs[pid, 0] != c:
            continue                               # a stale entry: the count has changed since
        a, b = key >> 32, key & 0xFFFFFFFF
        x, pool, pool_end, tstart, tlen, next_id = _new_token(a, b, pool, pool_end, tstart, tlen, id_of, next_id)
        merges = _room(merges, n_merges + 1)
        merges[n_merges, 0], merges[n_merges, 1], merges[n_merges, 2] = a, b, x

        # where (a, b) still starts, left to right (stale entries skipped); the list is used up
        positions, n_pos = _occurrences(pairs[pid, 1], occ, sym, nxt, a, b, positions)
        pairs[pid, 1] = -1

        # room for what this merge can add: per position 2 new pairs, 2 occurrences, 4 changes
        pairs, occ = _room(pairs, n_pid + 2 * n_pos), _room(occ, n_occ + 2 * n_pos)
        table = _rehash(table, n_pid + 2 * n_pos)
        changed = _grow(changed, 4 * n_pos + 1)
        n_changed = np.int64(0)
        for k in range(n_pos):
            i = positions[k]
            j = nxt[i]
            if sym[i] != a or j < 0 or sym[j] != b:
                continue                           # "a a a": the middle a went into the first pair
            w, p, q = wt[i], prv[i], nxt[j]
            pairs[pid, 0] -= w
            if p >= 0:
                n_pid, n_occ, n_changed = _change(table, (sym[p] << 32) | a, -w, p, pairs, n_pid, occ, n_occ,
                                                  changed, n_changed, n_merges)
                n_pid, n_occ, n_changed = _change(table, (sym[p] << 32) | x, w, p, pairs, n_pid, occ, n_occ,
                                                  changed, n_changed, n_merges)
            if q >= 0:
                n_pid, n_occ, n_changed = _change(table, (b << 32) | sym[q], -w, j, pairs, n_pid, occ, n_occ,
                                                  changed, n_changed, n_merges)
                n_pid, n_occ, n_changed = _change(table, (x << 32) | sym[q], w, i, pairs, n_pid, occ, n_occ,
                                                  changed, n_changed, n_merges)
            sym[i], sym[j] = x, -1                 # i becomes X; j leaves the chunk's list
            nxt[i] = q
            if q >= 0:
                prv[q] = i
        for k in range(n_changed):                 # fresh heap entries for the counts that changed
            dp = changed[k]
            if pairs[dp, 0] > 0:
                hc, hk, n_heap = _push(hc, hk, n_heap, pairs[dp, 0], pairs[dp, 2])
        n_merges += 1
    return merges[:n_merges], pool[:pool_end], tstart[:next_id], tlen[:next_id]


# ----------------------------------------------------------------------------
# encoding: BPE on many chunks in one call

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


# ----------------------------------------------------------------------------
# the kernel: the reference's arguments and results

def learn_merges(chunks, n_new_tokens):
    """Same arguments and results as zerollm.tokenizers.bpe_train.learn_merges."""
    chunk_counts = Counter(chunks)
    encoded = [c.encode("utf-8") for c in chunk_counts]
    lengths = np.fromiter((len(e) + 1 for e in encoded), np.int64, len(encoded))     # + the -1 separator
    data = np.frombuffer(b"\xff".join(encoded) + b"\xff", np.uint8) if encoded else np.empty(0, np.uint8)
    sym = data.astype(np.int64)
    sym[np.cumsum(lengths) - 1] = -1               # 0xff never occurs in UTF-8: it marks chunk ends
    wt = np.repeat(np.fromiter(chunk_counts.values(), np.int64, len(encoded)), lengths)
    merges, pool, start, length = _train(sym, wt, int(n_new_tokens))
    vocab = {i: pool[s:s + n].tobytes() for i, (s, n) in enumerate(zip(start.tolist(), length.tolist()))}
    return [tuple(m) for m in merges.tolist()], vocab


KERNELS = {"learn_merges": learn_merges, "encode_chunks": encode_chunks}
