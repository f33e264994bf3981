"""What the tasks share: the deterministic train/heldout split and argument checks."""

import hashlib

from zerollm.io.errors import ZeroLLMError

SPLITS = ("train", "heldout")
HELDOUT_PERCENT = 10


def split_of(key):
    """'train' or 'heldout' for an example's key text, from its SHA-256: stable across machines and
    Python versions (unlike hash()), and about HELDOUT_PERCENT% heldout.

    >>> split_of("春夏秋冬"), split_of("1+2")
    ('train', 'train')
    """
    bucket = int.from_bytes(hashlib.sha256(key.encode("utf-8")).digest()[:8], "big") % 100
    return "heldout" if bucket < HELDOUT_PERCENT else "train"


def check_make_args(n, split, seed):
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise ZeroLLMError(f"n must be a whole number >= 1, got {n!r}")
    if split not in SPLITS:
        raise ZeroLLMError(f"split must be 'train' or 'heldout', got {split!r}")
    if isinstance(seed, bool) or not isinstance(seed, int):
        raise ZeroLLMError(f"seed must be an integer, got {seed!r}")


def pick(pool, n, seed, what):
    """n distinct items of ``pool`` in an order drawn from default_rng(seed); too few is an error."""
    import numpy as np
    if n > len(pool):
        raise ZeroLLMError(f"asked for {n} examples but the {what} has only {len(pool)}; ask for fewer")
    order = np.random.default_rng(seed).permutation(len(pool))[:n]
    return [pool[i] for i in order]
