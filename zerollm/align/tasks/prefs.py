"""Preference pairs for the acrostic task: chosen = a real poem with the asked heads, rejected = the same
poem corrupted in one labelled way (the "corruption" field; "line" = which line, 0-3).

    wrong_head      the line's first character replaced by another character
    line_length     the line made 4 characters (one non-head character deleted) or 6 (one inserted)
    shuffled        the line's four non-head characters permuted (the head stays in place)
    repeated_line   the line replaced by a copy of another line of the poem (one with another head)
    foreign_line    the line replaced by a line of another poem of the same split (another head)

The verifier (``reward``, the acrostic one) scores every chosen poem 1.0 and every rejected one below
1.0, except "shuffled": its head and length are intact, so both sides score 1.0 there and only a
learned reward model can tell the real poem from the scrambled one. Corruption types come in equal
shares (in an order drawn from the seed). Poems, and the other poems lines are taken from, come from
the acrostic split of the same name, so the heldout pairs share no poem with train.
"""

import numpy as np

from zerollm.align.tasks import acrostic
from zerollm.align.tasks.common import check_make_args, pick

CORRUPTIONS = ("wrong_head", "line_length", "shuffled", "repeated_line", "foreign_line")
EXAMPLE_COMPLETION = acrostic.EXAMPLE_COMPLETION
reward = acrostic.reward
plain_prompt = acrostic.plain_prompt


def text_line(row):
    """The real poem, for a plain-text corpus."""
    return row["chosen"]


def render(lines):
    """Four lines -> 「L1，L2。L3，L4。」 (the corpus's form)."""
    return f"{lines[0]}，{lines[1]}。{lines[2]}，{lines[3]}。"


def make(n, split, seed):
    """n pairs from n different poems of ``split``."""
    check_make_args(n, split, seed)
    poems = pick(acrostic.pool(split), n, seed, f"acrostic {split} split")
    others = [acrostic.poem_lines(p) for _, p in acrostic.pool(split)]
    rng = np.random.default_rng([seed, 1])
    kinds = rng.permutation(np.resize(np.arange(len(CORRUPTIONS)), n))
    rows = []
    for (heads, poem), kind in zip(poems, kinds):
        name = CORRUPTIONS[int(kind)]
        lines, k = corrupt(acrostic.poem_lines(poem), name, rng, others)
        rows.append({"prompt": acrostic.prompt_for(heads), "chosen": poem, "rejected": render(lines),
                     "heads": heads, "corruption": name, "line": k})
    return rows


# ----------------------------------------------------------------------------
# the corruptions: each takes the four lines and returns (new lines, index of the changed line)

def corrupt(lines, name, rng, others):
    lines = list(lines)
    k = int(rng.integers(4))
    if name == "wrong_head":
        lines[k] = _other_char(lines[k][0], rng, others) + lines[k][1:]
    elif name == "line_length":
        line = lines[k]
        if rng.random() < 0.5:
            j = int(rng.integers(1, 5))
            lines[k] = line[:j] + line[j + 1:]                                  # 4 characters
        else:
            j = int(rng.integers(1, 6))
            lines[k] = line[:j] + _other_char(None, rng, others) + line[j:]     # 6 characters
    elif name == "shuffled":
        k = next((i for i in _from(k) if len(set(lines[i][1:])) > 1), k)
        rest = lines[k][1:]
        while len(set(rest)) > 1 and rest == lines[k][1:]:
            rest = "".join(rng.permutation(list(rest)))
        lines[k] = lines[k][0] + rest
    elif name == "repeated_line":
        k = next((i for i in _from(k) if any(lines[j][0] != lines[i][0] for j in range(4))), k)
        sources = [j for j in range(4) if lines[j][0] != lines[k][0]] or [j for j in range(4) if j != k]
        lines[k] = lines[sources[int(rng.integers(len(sources)))]]
    elif name == "foreign_line":
        while True:
            other = others[int(rng.integers(len(others)))][int(rng.integers(4))]
            if other[0] != lines[k][0] and other not in lines:
                break
        lines[k] = other
    else:
        raise ValueError(name)
    return lines, k


def _from(k):
    """Line indices starting at k: k, k+1, ... wrapping round."""
    return [(k + i) % 4 for i in range(4)]


def _other_char(avoid, rng, others):
    """A character from a random line of another poem, different from ``avoid``."""
    while True:
        line = others[int(rng.integers(len(others)))][int(rng.integers(4))]
        c = line[int(rng.integers(len(line)))]
        if c != avoid:
            return c
