"""The tree of a pattern -> an automaton over BYTES: a Thompson NFA, then a DFA by the subset construction.

Why bytes and not characters: a byte-level BPE token may end in the middle of a character (「春」 is
e6 98 a5, and GPT-2 has tokens holding only e6 98). Each character class is written as the UTF-8 byte
sequences of its code points (Russ Cox, "Regular expression matching can be simple and fast"; the same
split as Rust's regex-automata), so a token of any bytes has a place in the automaton, and a
character tokenizer's tokens are just their UTF-8 bytes.

    dfa = compile_tree(parse("ab?"))
    dfa.step(dfa.start, b"a")  -> 1         dfa.accepting[1] -> True
    dfa.delta                  (S, 256) int32, the next state for every byte; DEAD (= -1) when none

Every state the DFA keeps can still reach an accepting state (the others are cut, their bytes lead to
DEAD): a walk that stays out of DEAD can always be finished. The limits below are checked while the
automaton is built, so a hostile pattern is refused within a bounded amount of work.
"""

from dataclasses import dataclass

import numpy as np

from zerollm.io.errors import ZeroLLMError
from zerollm.generation.grammar.regex import Alt, Cat, Chars, Repeat, Sep

MAX_NFA_STATES = 200_000
MAX_DFA_STATES = 20_000
MAX_WORK = 5_000_000         # NFA states visited while building DFA states
DEAD = -1


# ----------------------------------------------------------------------------
# code points -> UTF-8 byte ranges

def _encode(cp):
    return chr(cp).encode("utf-8", "surrogatepass")


def _nfa_too_big():
    return ZeroLLMError(f"the pattern's automaton would need more than {MAX_NFA_STATES:,} states (its counts "
                        "multiply out too far); use smaller {n,m} counts or fewer nested repeats")


def _least_states(node, memo):
    """At least how many NFA states _NFA.build makes for ``node`` (2 a node, copies for counts): a cheap
    lower bound, so that a pattern far past the limit is refused before any of it is built."""
    got = memo.get(id(node))
    if got is not None:
        return got
    if isinstance(node, Chars):
        got = 2
    elif isinstance(node, (Cat, Alt)):
        got = 2 + sum(_least_states(k, memo) for k in (node.parts if isinstance(node, Cat) else node.choices))
    elif isinstance(node, Sep):
        got = 2 + _least_states(node.item, memo) + _least_states(node.sep, memo)
    else:
        copies = max(node.hi, node.lo) if node.hi is not None else node.lo + 1
        got = 2 + copies * _least_states(node.item, memo)
    memo[id(node)] = got
    return got


# Special tokens in a grammar (a forced tool call after an optional <think>...</think>): "code points" past
# Unicode, MARKER_BASE + k, stand for the k-th special token a TokenIndex is given, written as the bytes
# MARKER_BYTE, k. No UTF-8 text holds the byte 0xFF, so only that special token can walk there (index.py
# leaves text tokens holding 0xFF out of a vocabulary with markers).
MARKER_BASE = 0x110000
MARKER_BYTE = 0xFF
MAX_MARKERS = 16


def marker(k):
    """The tree node of the k-th special token of a TokenIndex (index.token_pieces ``markers``)."""
    if not 0 <= k < MAX_MARKERS:
        raise ZeroLLMError(f"a grammar takes at most {MAX_MARKERS} special tokens")
    return Chars(((MARKER_BASE + k, MARKER_BASE + k),))


def utf8_sequences(lo, hi):
    """[lo, hi] code points (surrogates left out) -> a list of byte-range sequences [((b0, b1), ...)] whose
    byte strings are exactly the UTF-8 encodings of those code points (a marker: its two bytes)."""
    if lo >= MARKER_BASE:
        return [((MARKER_BYTE, MARKER_BYTE), (lo - MARKER_BASE, lo - MARKER_BASE))]
    if lo == hi and not 0xD800 <= lo <= 0xDFFF:                  # one character: its own bytes
        return [tuple((b, b) for b in _encode(lo))]
    out = []
    for a, b in ((lo, min(hi, 0xD7FF)), (max(lo, 0xE000), hi)):
        if a <= b:
            _split(a, b, out)
    return out


def _split(lo, hi, out):
    for limit in (0x7F, 0x7FF, 0xFFFF):                 # one encoded length per piece
        if lo <= limit < hi:
            _split(lo, limit, out)
            _split(limit + 1, hi, out)
            return
    n = len(_encode(lo))
    for i in range(1, n):                               # make every continuation byte range whole
        m = (1 << (6 * i)) - 1
        if lo & ~m != hi & ~m:
            if lo & m:
                _split(lo, lo | m, out)
                _split((lo | m) + 1, hi, out)
                return
            if hi & m != m:
                _split(lo, (hi & ~m) - 1, out)
                _split(hi & ~m, hi, out)
                return
    out.append(tuple(zip(_encode(lo), _encode(hi))))


# ----------------------------------------------------------------------------
# the NFA: state i has byte edges (lo, hi, to) and empty edges

class _NFA:
    def __init__(self):
        self.edges, self.empty = [], []

    def state(self):
        if len(self.edges) >= MAX_NFA_STATES:
            raise _nfa_too_big()
        self.edges.append([])
        self.empty.append([])
        return len(self.edges) - 1

    def build(self, node):
        """node -> (start, end) of a fragment with one way in and one way out."""
        s, e = self.state(), self.state()
        if isinstance(node, Chars):
            for lo, hi in node.ranges:
                for seq in utf8_sequences(lo, hi):
                    at = s
                    for k, (b0, b1) in enumerate(seq):
                        to = e if k == len(seq) - 1 else self.state()
                        self.edges[at].append((b0, b1, to))
                        at = to
        elif isinstance(node, Cat):
            at = s
            for part in node.parts:
                ps, pe = self.build(part)
                self.empty[at].append(ps)
                at = pe
            self.empty[at].append(e)
        elif isinstance(node, Alt):
            for choice in node.choices:
                cs, ce = self.build(choice)
                self.empty[s].append(cs)
                self.empty[ce].append(e)
        elif isinstance(node, Sep):
            is_, ie = self.build(node.item)
            ss, se = self.build(node.sep)
            self.empty[s].append(is_)
            self.empty[ie] += [e, ss]
            self.empty[se].append(is_)
        elif isinstance(node, Repeat):
            self._repeat(node, s, e)
        else:
            raise TypeError(f"not a pattern tree node: {node!r}")
        return s, e

    def _repeat(self, node, s, e):
        at = s
        for _ in range(node.lo):                    # the required copies, one after another
            ps, pe = self.build(node.item)
            self.empty[at].append(ps)
            at = pe
        if node.hi is None:                          # then a loop
            ps, pe = self.build(node.item)
            self.empty[at] += [ps, e]
            self.empty[pe] += [ps, e]
            return
        for _ in range(node.hi - node.lo):           # or up to hi - lo optional copies
            ps, pe = self.build(node.item)
            self.empty[at] += [ps, e]
            at = pe
        self.empty[at].append(e)


# ----------------------------------------------------------------------------
# the DFA

@dataclass
class DFA:
    """delta: (S, 256) int32 next state per byte (DEAD: none); accepting: (S,) bool; start: 0."""
    delta: np.ndarray
    accepting: np.ndarray
    start: int = 0

    @property
    def n_states(self):
        return len(self.accepting)

    def step(self, state, data):
        """The state after the bytes ``data`` from ``state`` (DEAD once no way on)."""
        for b in data:
            if state == DEAD:
                break
            state = int(self.delta[state, b])
        return state


def compile_tree(tree):
    """tree -> DFA with its dead states cut; ZeroLLMError when it matches nothing or passes a limit."""
    if _least_states(tree, {}) > MAX_NFA_STATES:                 # refused before any of it is built
        raise _nfa_too_big()
    nfa = _NFA()
    start, end = nfa.build(tree)
    table, accepting, where = _subsets(nfa, start, end)
    small = _minimize(_prune(table, accepting))                   # on (S, K) byte classes, then (S, 256)
    return DFA(small.delta[:, where[:256]], small.accepting)


class _Closures:
    """The empty-edge closure of each NFA state, kept to its IMPORTANT states (those with byte edges, and the
    end): two subsets with the same important states move alike on every byte, so a DFA state is named by
    them alone (the usual trick of the subset construction; smaller keys, fewer states). Each closure is
    worked out once and the work is counted against MAX_WORK."""

    def __init__(self, nfa, end):
        self.nfa, self.end, self.memo, self.work = nfa, end, {}, 0

    def of(self, q):
        got = self.memo.get(q)
        if got is None:
            seen, stack = {q}, [q]
            while stack:
                for t in self.nfa.empty[stack.pop()]:
                    if t not in seen:
                        seen.add(t)
                        stack.append(t)
            self.work += len(seen)
            if self.work > MAX_WORK:
                raise _too_big()
            got = self.memo[q] = frozenset(t for t in seen if self.nfa.edges[t] or t == self.end)
        return got

    def union(self, states):
        out = set()
        for q in states:
            out |= self.of(q)
        self.work += len(out)
        return frozenset(out)


def _too_big():
    return ZeroLLMError(f"the pattern's automaton grows past {MAX_DFA_STATES:,} states (or {MAX_WORK:,} steps of "
                        "work to build): it is too big to constrain decoding with; simplify it (fewer counted "
                        "repeats after a '*', smaller {n,m})")


def _subsets(nfa, start, end):
    """The subset construction over the byte classes (bytes that no edge tells apart move alike) ->
    ((S, K) next state per class, (S,) accepting, (257,) the class of each byte)."""
    cuts = {0, 256}
    for edges in nfa.edges:
        for lo, hi, _ in edges:
            cuts.update((lo, hi + 1))
    cuts = sorted(cuts)
    where = np.searchsorted(cuts, np.arange(257), side="right") - 1          # byte -> its class
    # each state's byte edges as (first class, last class, target)
    by_class = [[(int(where[lo]), int(where[hi]), to) for lo, hi, to in edges] for edges in nfa.edges]
    closures = _Closures(nfa, end)
    first = closures.of(start)
    ids, order, rows, targets = {first: 0}, [first], [], {}
    while len(rows) < len(order):
        moved = {}
        for q in order[len(rows)]:
            for c0, c1, to in by_class[q]:
                for c in range(c0, c1 + 1):
                    moved.setdefault(c, set()).add(to)
        row = np.full(len(cuts) - 1, DEAD, np.int32)
        for c, tos in moved.items():
            tos = frozenset(tos)
            target = targets.get(tos)
            if target is None:
                target = targets[tos] = closures.union(tos)
            if target not in ids:
                if len(order) >= MAX_DFA_STATES:
                    raise _too_big()
                ids[target] = len(order)
                order.append(target)
            row[c] = ids[target]
        rows.append(row)
    accepting = np.array([end in s for s in order], dtype=bool)
    return np.stack(rows), accepting, where                                   # (S, K) by class, byte -> class


def _prune(delta, accepting):
    """Cut the states from which no accepting state can be reached; renumber the rest. delta: (S, K)."""
    S = len(accepting)
    live = accepting.copy()
    while True:                                                      # backwards until nothing changes
        nxt = delta.clip(0)                                          # (S, K), DEAD read as state 0 ...
        reach = (live[nxt] & (delta != DEAD)).any(axis=1) | accepting  # ... and masked out here
        if (reach == live).all():
            break
        live = reach
    if not live[0]:
        raise ZeroLLMError("the pattern matches no text at all, so nothing could be generated under it")
    new = np.full(S, DEAD, np.int32)
    new[live] = np.arange(int(live.sum()), dtype=np.int32)
    kept = delta[live]
    kept = np.where(kept == DEAD, DEAD, new[kept.clip(0)])
    return DFA(kept.astype(np.int32), accepting[live])


def _minimize(dfa):
    """Merge the states no text tells apart (Moore's partition refinement): fewer states, fewer index rows.
    Start with {accepting, not}; split a block while its states go, on some byte, to different blocks.
    Blocks are numbered in order of their first state, so the start stays 0."""
    delta = dfa.delta
    columns = delta                                                       # (S, K): a column per byte class
    block, n = dfa.accepting.astype(np.int32), -1
    while True:
        ext = np.append(block, -1).astype(np.int32)                       # DEAD (-1) reads the extra slot
        key = np.ascontiguousarray(np.column_stack([block, ext[columns]]))   # (S, 1 + K)
        rows = key.view(np.dtype((np.void, key.itemsize * key.shape[1]))).ravel()   # each row as one value
        _, first, same = np.unique(rows, return_index=True, return_inverse=True)
        rank = np.empty(len(first), np.int32)
        rank[np.argsort(first)] = np.arange(len(first), dtype=np.int32)  # blocks numbered by first state
        block = rank[same.ravel()]
        if len(first) == n:
            break
        n = len(first)
    firsts = np.unique(block, return_index=True)[1]                       # the first state of each block
    kept = delta[firsts]
    kept = np.where(kept == DEAD, DEAD, block[kept.clip(0)])
    return DFA(kept.astype(np.int32), dfa.accepting[firsts])
