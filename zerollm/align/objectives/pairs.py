"""Preference pairs as batches: what the reward model and DPO both train on.

An encoded pair is a dict with "chosen" and "rejected", each (ids, loss_mask) as
zerollm.data.chat.encode_example returns them (loss_mask True on the answer's tokens), plus any extra
fields of the JSONL line (e.g. "corruption", the kind of damage done to the rejected answer).

A batch keeps each pair in one row, so the thread shards cut between pairs, never through one:

    chosen (B, T) ids, chosen_mask (B, T) answer tokens, chosen_last (B,) last real position,
    rejected ... the same, padded on the right to the same T.
"""

import numpy as np

from zerollm.io.errors import ZeroLLMError
from zerollm.model.heads import last_token_index


def pad_rows(rows, pad_id=0, length=None):
    """Right-pad lists of ids -> (ids (B, T) int64, real (B, T) bool).

    >>> ids, real = pad_rows([[5, 6, 7], [8]])
    >>> ids.tolist(), real.sum(axis=1).tolist()
    ([[5, 6, 7], [8, 0, 0]], [3, 1])
    """
    T = length or max(len(r) for r in rows)
    ids = np.full((len(rows), T), pad_id, dtype=np.int64)
    real = np.zeros((len(rows), T), dtype=bool)
    for i, r in enumerate(rows):
        ids[i, :len(r)] = r
        real[i, :len(r)] = True
    return ids, real


def pair_batch(pairs):
    """A list of encoded pairs -> the row-wise batch described in the module docstring."""
    T = max(len(p[side][0]) for p in pairs for side in ("chosen", "rejected"))
    batch = {}
    for side in ("chosen", "rejected"):
        ids, real = pad_rows([p[side][0] for p in pairs], length=T)
        mask, _ = pad_rows([p[side][1] for p in pairs], length=T)
        batch[side], batch[side + "_mask"] = ids, mask.astype(bool) & real
        batch[side + "_last"] = last_token_index(real)
    batch["margin"] = np.array([float(p.get("margin", 0.0)) for p in pairs])
    return batch


def both_sides(batch):
    """(chosen rows then rejected rows) as one (2B, T) array, and the same for the masks and last positions."""
    ids = np.concatenate([batch["chosen"], batch["rejected"]])
    mask = np.concatenate([batch["chosen_mask"], batch["rejected_mask"]])
    last = np.concatenate([batch["chosen_last"], batch["rejected_last"]])
    return ids, mask, last


class PairSampler:
    """Random mini-batches of pairs, from a generator that the checkpoint saves (exact resume)."""

    def __init__(self, pairs, batch_size, seed, max_len, counted="the model can read"):
        check_lengths(pairs, max_len, counted)
        self.pairs, self.batch_size = pairs, batch_size
        self.rng = np.random.default_rng([seed, 1])

    def next(self):
        picks = self.rng.integers(0, len(self.pairs), size=self.batch_size)
        return pair_batch([self.pairs[i] for i in picks])


def check_lengths(pairs, max_len, counted="the model can read"):
    """Refuse (with the line number) pairs that do not fit: max_len tokens per side. ``counted`` says what the
    limit counts, as the command sees it (dpo scores a side's tokens after the first, so it takes one more
    than the reward model, which reads them all)."""
    if not pairs:
        raise ZeroLLMError("the preference file has no pairs")
    lengths = [max(len(p["chosen"][0]), len(p["rejected"][0])) for p in pairs]
    too_long = [i for i, n in enumerate(lengths) if n > max_len]
    if too_long:
        which = (f"the pair on line {too_long[0] + 1} is" if len(too_long) == 1 else
                 f"{len(too_long)} pairs (the first on line {too_long[0] + 1}) are")
        raise ZeroLLMError(f"{which} longer than the {max_len} tokens {counted} (a side counts the prompt and the "
                           f"answer with their chat markers; the longest has {max(lengths)}); shorten them or "
                           "drop them")


def chunks(items, size):
    """Consecutive slices of at most ``size`` items (for evaluating a whole file in batches)."""
    return [items[i:i + size] for i in range(0, len(items), size)]


def encode_pairs(tok, rows):
    """Preference rows {"prompt", "chosen", "rejected", ...} -> encoded pairs through the chat template. A
    prompt that is a list of messages (TRL's conversational form) is that conversation before the answer."""
    from zerollm.data.chat import encode_example

    def side(row, key):
        if isinstance(row["prompt"], list):
            return encode_example(tok, {"messages": [*row["prompt"], {"role": "assistant", "content": row[key]}]})
        return encode_example(tok, {"prompt": row["prompt"], "completion": row[key]})
    return [{**{k: v for k, v in row.items() if k not in ("prompt", "chosen", "rejected")},
             "chosen": side(row, "chosen"), "rejected": side(row, "rejected")}
            for row in rows]


def read_pairs(inputs):
    from zerollm.data.formats import read_prefs
    return read_prefs(inputs["data"]), (read_prefs(inputs["eval_data"]) if inputs["eval_data"] else [])
