"""Bits per byte: a model's loss in a unit that does not depend on its tokenizer.

The per-token loss of a char model and of a BPE model of the same text cannot be compared: a BPE token
covers several characters, so each prediction carries more of the text. Summing the negative
log-likelihood over the whole text and dividing by the text's size in UTF-8 bytes removes the
tokenizer (the measure of nanochat's val_bpb and of lm-eval's ``bits_per_byte``):

    bpb = sum_t -log2 p(token_t | tokens_<t)  /  sum_t bytes(token_t)        over the predicted tokens

Each predicted token counts its own UTF-8 bytes: 1 for a byte token, len(c.encode()) for a character
c (3 for 「春」), len(token_bytes) for a BPE token (which may hold part of a character; the parts of a
text still add up to its bytes). The first token of a text is never predicted (nothing comes before
it), so its bytes are not counted either. Special tokens have no bytes of the text: they are left out
of both sums. A char tokenizer's ``unk`` stands for characters of unknown size, so a tokenizer that has
one gets no bpb (``token_byte_lengths`` returns None).
"""

import numpy as np

from zerollm.io.errors import ZeroLLMError
from zerollm.nn.loss import token_nll
from zerollm.tokenizers.bytecount import bits_and_bytes, token_byte_lengths

__all__ = ["bpb", "score_text", "token_byte_lengths", "bits_and_bytes", "token_nll"]


def bpb(bits, nbytes):
    """bits / bytes, or NaN for a text without bytes."""
    return bits / nbytes if nbytes else float("nan")


def score_text(model, ids, lengths=None, batch_size=16):
    """Loss (mean nats per predicted token), count, and (bits, bytes) of a token sequence.

    The text is cut into consecutive windows of block_size predictions: window k reads ids[kT:kT+T] and
    predicts ids[kT+1:kT+T+1], so every token after the first is predicted exactly once (the windows of
    zerollm.evaluate.loglik.rolling_windows). ``lengths``: token_byte_lengths, or None for no bpb.
    """
    T = model.config.block_size
    ids = np.asarray(ids, dtype=np.int64)
    if len(ids) < 2:
        raise ZeroLLMError("the text has fewer than 2 tokens: nothing to predict")
    starts = list(range(0, len(ids) - 1, T))
    full = [s for s in starts if s + T + 1 <= len(ids)]
    batches = [np.stack([ids[s:s + T + 1] for s in full[i:i + batch_size]]) for i in range(0, len(full), batch_size)]
    batches += [ids[s:][None] for s in starts[len(full):]]                 # the short tail, if any
    nats, count, bits, nbytes = 0.0, 0, 0.0, 0
    model.eval()
    for rows in batches:                                                   # rows (B, T+1)
        logits, _ = model.forward(rows[:, :-1])
        nll = np.stack([token_nll(row, y) for row, y in zip(logits, rows[:, 1:])])   # (B, T), a row at a time
        nats, count = nats + float(nll.sum()), count + nll.size
        if lengths is not None:
            b, n = bits_and_bytes(nll, rows[:, 1:], lengths)
            bits, nbytes = bits + b, nbytes + n
    return nats / count, count, (bits, nbytes) if lengths is not None else None
