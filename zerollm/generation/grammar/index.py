"""Where the automaton meets the vocabulary: which token ids may come next in each state, and where each leads.

    index = grammar_for_regex(r"-?[0-9]+").index(tokenizer, vocab_size)
    mask = index.allowed(state, end_ids)     # (V,) bool: the text tokens whose bytes keep the walk alive,
                                             # and the end ids when ``state`` accepts
    state = index.next_state(state, t)       # after token t

A token is allowed in state s when walking its bytes from s through the DFA never reaches DEAD; it leads
to the state where the walk ends. A state's row is worked out the first time a walk comes there (all
tokens at once, down the trie of their bytes level by level in NumPy, a prefix that falls off taking every
token below it along: see Vocab), so the first token comes after one row, not after every state of a big
schema.

Special tokens (a chat template's <|user|>, <|end|>, <|endoftext|>) are not text: no state allows them as
text. The ids that end the text (a request's stop ids: the end-of-turn id of a chat model) are allowed in
an accepting state only, and a state that accepts with no text token left to follow ends the row.

No dead state: the DFA keeps only states that can reach acceptance; with every single byte a token (byte
and byte-level BPE vocabularies) each such state has a token too. A vocabulary without all 256 bytes (a
character tokenizer) gets every row at once and the tokens into states that no TOKEN path can finish are
taken away; if the start is one of them, the tokenizer cannot write any accepted text (ZeroLLMError).
"""

import threading
import weakref
from dataclasses import dataclass

import numpy as np

from zerollm.io.errors import ZeroLLMError
from zerollm.generation.grammar.automaton import DEAD, MARKER_BYTE


# ----------------------------------------------------------------------------
# the vocabulary as bytes

def token_pieces(tokenizer, vocab_size=None, markers=()):
    """[bytes | None] per id: the bytes of each text token; None for special tokens, a character
    tokenizer's unknown-character id, ids the tokenizer does not use, and ids beyond it (up to vocab_size).
    ``markers``: special token ids a grammar may name (automaton.marker(k) is markers[k]): theirs are the
    bytes MARKER_BYTE, k, and text tokens holding MARKER_BYTE (never in UTF-8 text) are left out."""
    V = tokenizer.vocab_size if vocab_size is None else vocab_size
    specials = set(tokenizer.special_tokens.values())
    unk = getattr(tokenizer, "unk_id", None)
    named = {t: bytes([MARKER_BYTE, k]) for k, t in enumerate(markers)}
    pieces = []
    for i in range(V):
        if i in named:
            pieces.append(named[i])
            continue
        if i >= tokenizer.vocab_size or i in specials or i == unk:
            pieces.append(None)
            continue
        piece = _piece(tokenizer, i)
        if markers and piece and MARKER_BYTE in piece:
            piece = None
        pieces.append(piece or None)    # an empty token would allow itself forever: never text
    return pieces


def _piece(tokenizer, i):
    """The bytes of text token i: a byte tokenizer's id is its byte (decode would turn a lone byte of a
    longer character into U+FFFD); a BPE token's bytes may hold part of a character."""
    if tokenizer.name == "byte":
        return bytes([i])
    try:
        return tokenizer.token_bytes(i) if hasattr(tokenizer, "token_bytes") else tokenizer.decode([i]).encode()
    except ZeroLLMError:                # an id a vocabulary leaves unused
        return None


class Vocab:
    """The text tokens as a trie of their bytes, level by level: level j holds the distinct (j+1)-byte
    prefixes, each with its last byte and its parent in level j-1, sorted so that a node's children are one
    contiguous range of the next level. A state's row walks the trie from the top, and a prefix that falls
    off the automaton takes all the tokens below it along: in a state that expects '"' only the tokens
    beginning with '"' are walked further. ids (N,): the text tokens; ``ends``: each one's node (flat)."""

    def __init__(self, pieces, markers=False):
        self.size = len(pieces)
        text = [(p, i) for i, p in enumerate(pieces) if p]
        self.ids = np.array([i for _, i in text], np.int64)                              # (N,)
        self._piece = {i: p for p, i in text}
        # with markers the byte MARKER_BYTE is no text token: no text path of a grammar needs it
        singles = {p[0] for p, _ in text if len(p) == 1} | ({MARKER_BYTE} if markers else set())
        self.byte_complete = len(singles) == 256
        L = max((len(p) for p, _ in text), default=0)
        prefixes = [sorted({p[:j + 1] for p, _ in text if len(p) > j}) for j in range(L)]
        index = [{q: k for k, q in enumerate(level)} for level in prefixes]
        self.byte = [np.array([q[-1] for q in level], np.uint8) for level in prefixes]             # (n_j,)
        self.offset = np.cumsum([0] + [len(level) for level in prefixes])                         # flat index
        self.first_child, self.n_children = [], []
        for j in range(L - 1):                            # children of level j's nodes, in level j + 1
            parents = np.array([index[j][q[:-1]] for q in prefixes[j + 1]], np.int64)
            counts = np.bincount(parents, minlength=len(prefixes[j]))
            self.n_children.append(counts)
            self.first_child.append(np.cumsum(counts) - counts)
        self.ends = np.array([self.offset[len(p) - 1] + index[len(p) - 1][p] for p, _ in text], np.int64)

    @property
    def n_nodes(self):
        return int(self.offset[-1])

    def piece(self, i):
        """The bytes of text token ``i``."""
        return self._piece[i]

    def walk(self, delta, state):
        """(N,) the state after each text token's bytes from ``state`` (DEAD where it falls off)."""
        flat = np.full(self.n_nodes + 1, DEAD, np.int32)
        if not len(self.byte):
            return flat[self.ends]
        alive = np.arange(len(self.byte[0]))
        st = delta[state, self.byte[0]]                                                # (n_0,)
        for j in range(len(self.byte)):
            keep = st >= 0
            alive, st = alive[keep], st[keep]
            flat[self.offset[j] + alive] = st
            if j + 1 == len(self.byte) or not len(alive):
                break
            counts = self.n_children[j][alive]
            first = self.first_child[j][alive]
            total = int(counts.sum())
            if total == 0:
                break
            # the children of every live node, in order: ranges [first, first + count) joined
            children = np.repeat(first - np.cumsum(counts) + counts, counts) + np.arange(total)
            st = delta[np.repeat(st, counts), self.byte[j + 1][children]]
            alive = children
        return flat[self.ends]


_VOCABS = weakref.WeakKeyDictionary()
_LOCK = threading.Lock()


def vocab_of(tokenizer, vocab_size=None, markers=()):
    """The Vocab of ``tokenizer`` padded to ``vocab_size`` ids (with the special tokens ``markers`` a
    grammar may name), built once per tokenizer."""
    V = tokenizer.vocab_size if vocab_size is None else vocab_size
    key = (V, tuple(markers))
    with _LOCK:
        per = _VOCABS.setdefault(tokenizer, {})
        if key not in per:
            per[key] = Vocab(token_pieces(tokenizer, V, key[1]), markers=bool(key[1]))
        return per[key]


# ----------------------------------------------------------------------------
# the index

@dataclass(frozen=True)
class _Row:
    ids: np.ndarray          # (n,) allowed text token ids, sorted
    nxt: np.ndarray          # (n,) the state each leads to
    mask: np.ndarray         # (V,) bool


class TokenIndex:
    """The rows of one DFA over one Vocab, each made the first time it is asked for (thread-safe)."""

    def __init__(self, dfa, vocab):
        self.dfa, self.vocab = dfa, vocab
        self.rows = {}
        self.lock = threading.Lock()
        self.start = dfa.start
        if not vocab.byte_complete:
            self._all_rows_token_live()

    @property
    def n_states(self):
        return self.dfa.n_states

    def walk(self, states):
        """(k,) states -> (k, N) the state after each text token's bytes from each (DEAD: not allowed)."""
        return np.stack([self.vocab.walk(self.dfa.delta, int(s)) for s in states])

    def _row_from(self, after, live=None):
        ok = after >= 0 if live is None else (after >= 0) & live[after.clip(0)]
        ids, nxt = self.vocab.ids[ok], after[ok]
        order = np.argsort(ids)
        mask = np.zeros(self.vocab.size, bool)
        mask[ids] = True
        return _Row(ids[order], nxt[order].astype(np.int32), mask)

    def row(self, state):
        row = self.rows.get(state)
        if row is None:
            with self.lock:
                row = self.rows.get(state)
                if row is None:
                    row = self.rows[state] = self._row_from(self.walk([state])[0])
        return row

    def _all_rows_token_live(self):
        """Every row at once, keeping only the tokens into states from which some TOKEN path accepts."""
        S = self.n_states
        after = self.walk(np.arange(S))                                             # (S, N)
        live = self.dfa.accepting.copy()
        while True:
            more = live | ((after >= 0) & live[after.clip(0)]).any(axis=1)
            if (more == live).all():
                break
            live = more
        if not live[self.start]:
            raise ZeroLLMError("this tokenizer's vocabulary cannot write any text the pattern accepts (it lacks "
                               "characters the pattern needs); pick a pattern within the tokenizer's characters")
        self.rows = {s: self._row_from(after[s], live) for s in range(S) if live[s]}
        if self.finished(self.start):
            raise ZeroLLMError("this tokenizer's vocabulary can write only the empty text under the pattern")

    # ------------------------------------------------------------------
    # what the decode loop asks

    def accepting(self, state):
        return bool(self.dfa.accepting[state])

    def finished(self, state):
        """Accepted, and no text token can follow: the text is complete."""
        return self.accepting(state) and len(self.row(state).ids) == 0

    def allowed(self, state, end_ids=()):
        """(V,) bool: the text tokens allowed in ``state``, and ``end_ids`` when it accepts."""
        mask = self.row(state).mask.copy()
        if self.accepting(state):
            mask[[i for i in end_ids if i < len(mask)]] = True
        return mask

    def next_state(self, state, token):
        """The state after ``token``; DEAD if it was not allowed."""
        row = self.row(state)
        k = np.searchsorted(row.ids, token)
        return int(row.nxt[k]) if k < len(row.ids) and row.ids[k] == token else DEAD

    def count(self, state):
        """How many text tokens are allowed in ``state``."""
        return len(self.row(state).ids)
