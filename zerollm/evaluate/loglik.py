"""Log-likelihoods: of a continuation given a context, of a whole text, and multiple choice by them.

Shapes: B requests in a batch, L the longest of them (at most block_size T), V vocab.

1. ``loglikelihoods``: for each (context ids, continuation ids), log p(continuation | context) summed
   over its tokens, and whether greedy decoding would have produced it (every continuation token is
   the argmax). Context + continuation are read as one sequence; when longer than the model can read
   (T + 1 tokens: the last token is only predicted), the context is cut from the left, as lm-eval does.
   Requests are sorted longest first, padded on the right (a causal model never looks right, so the
   padding changes nothing) and batched; each batch is split over threads (zerollm.training.parallel).

2. ``rolling_windows`` / ``rolling_loglikelihood``: a text longer than the context, every token scored
   once. The sequence s is the text's ids (with ``prefix``, e.g. <|endoftext|>, in front, so the first
   token is scored too; without one the first token is only context). Its targets s[1:] are cut into
   consecutive groups of T; the group s[j0:j1] is predicted by one forward pass over the T tokens
   before its last target, s[max(0, j1-1-T) : j1-1], and only its own j1-j0 predictions are scored. So a
   full group sees only its own window (1 token of context at its start); the last, shorter group
   reads back into the previous one for more context. These are lm-eval's rolling windows
   (``get_rolling_token_windows`` with context_len=1, then ``make_disjoint_window``), and the windows of
   ``zerollm eval`` for every full group.

3. ``multiple_choice``: lm-eval's acc (the choice with the highest summed log-likelihood) and acc_norm
   (the highest log-likelihood per character of the choice's text).
"""

import numpy as np

from zerollm.io.errors import ZeroLLMError
from zerollm.nn.loss import token_nll


def _packed(context, continuation, T):
    """(model input ids, number of continuation tokens) for one request."""
    context, continuation = [int(t) for t in context], [int(t) for t in continuation]
    if not continuation:
        raise ZeroLLMError("a continuation needs at least one token to score")
    if len(continuation) > T:
        raise ZeroLLMError(f"a continuation of {len(continuation)} tokens does not fit the context of {T}")
    if not context:
        raise ZeroLLMError("a context needs at least one token (give a prefix such as <|endoftext|>)")
    full = (context + continuation)[-(T + 1):]          # cut the context from the left to fit
    return full[:-1], full[1:], len(continuation)


def loglikelihoods(model, requests, *, batch_size=8, threads=1):
    """[(log p(continuation | context), greedy)] for requests [(context ids, continuation ids)], in order."""
    from zerollm.training.parallel import ShardedModel
    T = model.config.block_size
    packed = [_packed(ctx, cont, T) for ctx, cont in requests]
    order = sorted(range(len(packed)), key=lambda i: -len(packed[i][0]))     # longest first
    out = [None] * len(packed)
    sharded = ShardedModel(model, threads)
    model.eval()
    try:
        for start in range(0, len(order), batch_size):
            chunk = order[start:start + batch_size]
            L = len(packed[chunk[0]][0])
            x = np.zeros((len(chunk), L), dtype=np.int64)                   # (B, L), right-padded
            for r, i in enumerate(chunk):
                x[r, :len(packed[i][0])] = packed[i][0]
            logits = sharded.forward(x)                                     # (B, L, V)
            for r, i in enumerate(chunk):
                inp, targets, n = packed[i]
                z = logits[r, len(inp) - n:len(inp)]                        # (n, V): the continuation's predictions
                want = np.asarray(targets[-n:])
                logp = -float(token_nll(z, want).sum())
                out[i] = (logp, bool(np.all(z.argmax(axis=-1) == want)))
    finally:
        sharded.close()
    return out


def rolling_windows(n, T):
    """[(a, j0, j1)] for a sequence of n ids: targets s[j0:j1] are scored from the input s[a:j1-1].

    >>> rolling_windows(10, 4)
    [(0, 1, 5), (4, 5, 9), (5, 9, 10)]
    """
    return [(max(0, min(j0 + T, n) - 1 - T), j0, min(j0 + T, n)) for j0 in range(1, n, T)]


def rolling_loglikelihood(model, ids, *, prefix=None, batch_size=8, threads=1):
    """Summed log p of every token of ``ids`` (but the first, without ``prefix``) by rolling windows."""
    s = ([int(prefix)] if prefix is not None else []) + [int(t) for t in ids]
    if len(s) < 2:
        return 0.0
    requests = [(s[a:j0], s[j0:j1]) for a, j0, j1 in rolling_windows(len(s), model.config.block_size)]
    return sum(lp for lp, _ in loglikelihoods(model, requests, batch_size=batch_size, threads=threads))


def multiple_choice(logps, choices, gold):
    """{"acc", "acc_norm"} (each 0.0 or 1.0) of one question: logps[k] is the log-likelihood of the
    text choices[k]; acc_norm divides by the choice's length in characters, as lm-eval does.

    >>> multiple_choice([-4.0, -3.0], ["a long one", "b"], 0)
    {'acc': 0.0, 'acc_norm': 1.0}
    """
    logps = np.asarray(logps, dtype=np.float64)
    lengths = np.array([max(len(c), 1) for c in choices], dtype=np.float64)
    return {"acc": float(np.argmax(logps) == gold), "acc_norm": float(np.argmax(logps / lengths) == gold)}
