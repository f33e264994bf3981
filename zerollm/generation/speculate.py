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
"""

from dataclasses import dataclass

import numpy as np


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
