"""Guessing the next few tokens cheaply, so that one forward pass can check several (speculative decoding).

Prompt lookup (Saxena 2023, "prompt lookup decoding"; vLLM's n-gram proposer): text often repeats what
came before (a copied passage, code being edited, a poem completed from a quotation). Find the last
``n`` tokens earlier in the text; the tokens that followed them then are the guess:

    tokens: 床 前 明 月 光 ， 疑 是 地 上 霜 。 床 前 明        last 3: 床 前 明, seen at 0
    guess:                                                  月 光 ， 疑     (what followed, k = 4)

The scheduler (zerollm.generation.batching) runs the row's last token and the guess in one forward and
keeps the guessed tokens the model agrees with (a draft model's greedy guesses are checked the same way), by the acceptance rule of Leviathan et al. 2023 and
Chen et al. 2023 ("Fast inference from transformers via speculative decoding"): a guess g is kept with
probability p(g) (the model's own distribution after temperature, filters and penalties; a lookup's
guess is certain, q(g) = 1), and when it is refused the token comes from p with g taken out,
renormalized. So every token is distributed exactly as without the guess; at greedy, a guess is kept
exactly when it is the argmax, and the text is the same token for token.

Speculating (below) is that check as the Scheduler's methods: the guesses of every row of the shared
batch (a lookup here, or the draft model's greedy steps over its own KV cache), one (A, 1 + G) forward,
and the acceptance rule row by row.

Shapes: A active rows, G the most guesses of a row, K speculation.tokens, C channels, V vocabulary.
"""

from dataclasses import dataclass

import numpy as np

from zerollm.generation.sample import GREEDY_BELOW, probabilities


@dataclass(frozen=True)
class Speculation:
    """``method``: 'off', 'ngram' (prompt lookup) or 'draft' (a smaller model's greedy guesses, Features.draft;
    run by the scheduler, which holds its KV cache); ``tokens``: at most this many guessed per step;
    ``ngram``: the longest tail looked up (shorter ones are tried after it, down to ``min_ngram``)."""
    method: str = "off"
    tokens: int = 4
    ngram: int = 3
    min_ngram: int = 1


def lookup(tokens, k, ngram=3, min_ngram=1):
    """Prompt lookup: the (at most k) tokens that followed the latest earlier occurrence of the longest
    tail of ``tokens`` (n = ngram down to min_ngram) -> a list, [] when no tail was seen before.

    lookup([1, 2, 3, 9, 1, 2], 2) -> [3, 9]    (the tail 1 2 was seen at 0; 3 9 followed it)
    """
    t = np.asarray(tokens, dtype=np.int64)
    if k < 1:
        return []
    for n in range(min(ngram, len(t) - 1), min_ngram - 1, -1):
        windows = np.lib.stride_tricks.sliding_window_view(t[:-1], n)          # (T - n, n): all but the tail itself
        seen = np.flatnonzero((windows == t[-n:]).all(axis=1))
        if seen.size:
            start = int(seen[-1]) + n
            return t[start:start + k].tolist()
    return []


# ----------------------------------------------------------------------------
# the check, in the scheduler

class Speculating:
    """The Scheduler's step 5 with guesses (a mixin: zerollm.generation.batching.Scheduler is the one class
    using it); ``drafted`` and ``accepted`` count the tokens guessed and kept."""

    def _guesses(self, batch, nxt):
        """Each row's guessed next tokens (a list per row; none past what its max_new_tokens leaves)."""
        if self.features.speculation.method != "draft":
            return [self._guess(row) for row in batch.rows]
        drafted = self._draft(batch, nxt)                                        # (A, K)
        return [drafted[a, :self._room(row)].tolist() for a, row in enumerate(batch.rows)]

    def _room(self, row):
        """How many tokens a row may guess: none without speculation, for a grammar row (a guess would need
        its mask too) or in its last token; else up to speculation.tokens."""
        req = row.req
        if self.features.speculation.method == "off" or req.grammar is not None:
            return 0
        return max(min(self.features.speculation.tokens, req.max_new_tokens - len(req.ids) - 1), 0)

    def _draft(self, batch, nxt):
        """The draft model's greedy guesses (A, K) after each row's new id nxt: K + 1 steps of (A, 1) over its
        own cache, the last one only to store the K-th guess's keys (the big model may keep every guess)."""
        draft, cache, K = self.features.draft, batch.draft, self.features.speculation.tokens
        cache.reserve(int(cache.pos.max()) + K + 1)
        out, tok = np.zeros((len(batch.rows), K), np.int64), nxt
        for j in range(K + 1):
            h = draft.forward_hidden(tok[:, None], kv_cache=cache)[:, -1]            # (A, C)
            if j == K:
                break
            logits = draft.head(h)                                                   # (A, V)
            if self.allowed is not None:
                logits = np.where(self.allowed, logits, -np.inf)
            out[:, j] = tok = np.argmax(logits, axis=-1)
        return out

    def _guess(self, row):
        """Prompt lookup's guess for one row."""
        s, room = self.features.speculation, self._room(row)
        return lookup(row.req.prompt + row.req.ids, room, s.ngram, s.min_ngram) if room else []

    def _verify(self, batch, nxt, guesses):
        """Step 5 with guesses: each row's new id and its guesses (up to G) in one forward, (A, 1 + G); each
        row keeps the guesses its own distribution accepts and goes on after the last one kept."""
        A, G = len(batch.rows), max(len(g) for g in guesses)
        idx = np.zeros((A, 1 + G), np.int64)                          # rows with fewer guesses pad with 0
        idx[:, 0] = nxt
        for a, g in enumerate(guesses):
            idx[a, 1:1 + len(g)] = g
        cache = batch.cache
        cache.reserve(int(cache.pos.max()) + 1 + G)
        start = cache.pos.copy()
        logits = self.model.head(self.model.forward_hidden(idx, kv_cache=cache))   # (A, 1 + G, V)
        kept = np.array([self._check_guess(row, g, logits[a]) for a, (row, g) in enumerate(zip(batch.rows, guesses))],
                        dtype=np.int64)
        cache.pos = start + 1 + kept                  # a refused guess's keys are overwritten before any query sees them
        batch.logits = logits[np.arange(A), kept]                                   # (A, V)

    def _check_guess(self, row, guess, logits):
        """Keep guess[j] with probability p(guess[j]), p from logits[j] as choose would make it; at the first
        refusal draw the row's next id from p without the guess (it is ``forced`` on the next step) ->
        the number of guesses kept. Every kept token is emitted now."""
        req, seen = row.req, row.seen[None] if row.seen is not None else None
        for j, g in enumerate(guess):
            p = probabilities(logits[j][None], req.sampling, row.counts[None], seen, self.allowed)[0]  # (V,)
            greedy = req.sampling.temperature < GREEDY_BELOW                    # p is then one-hot: no draw
            self.drafted += 1
            req.drafted += 1
            if (p[g] == 1.0) if greedy else (req.rng.random() < p[g]):
                self.accepted += 1
                req.accepted += 1
                if req.keep_logits:
                    req.logits.append(logits[j].copy())
                if not self._emit(row, g, logits[j]):
                    row.ended = True
                    return j + 1
                continue
            rest = p.copy()
            rest[g] = 0.0
            row.forced = int(np.argmax(rest)) if greedy else _draw(rest / rest.sum(), req.rng)
            self.drafted += len(guess) - j - 1
            req.drafted += len(guess) - j - 1
            return j
        return len(guess)


def _draw(probs, rng):
    """One id from the (V,) ``probs`` by the inverse CDF, as the sampler draws (one uniform number)."""
    return int(min((np.cumsum(probs) < rng.random()).sum(), len(probs) - 1))
