"""藏头诗 (acrostic poem): given four head characters, write a five-character quatrain whose line i
starts with head i.

    prompt      「藏头诗：春夏秋冬」                       the raw task text
    completion  「春眠不觉晓，夏...，秋...，冬...。」       in the corpus's own form (two couplets)
    fields      heads: 「春夏秋冬」

Examples come from real poems of the shipped tang_poems.txt (zerollm.data.corpora): the heads of a quatrain
(绝句), or of the first four lines of a regulated verse (律诗), whose completion is then those four
lines. A poem is heldout when the SHA-256 of its head set says so (about 10%): every poem with a given
head set lands in the same split, so the heldout split shares no poem and no head set with train.

``--think`` (``with_thinking``) writes the heads into the reasoning, one by one ("1:春 2:夏 3:秋 4:冬"),
before the poem.

The verifier (``reward``) accepts lines separated by 「，」, 「。」 and newlines, in any mix and number
(「春眠不觉晓，夏...」, one line per row, a trailing 「。」 or none); spaces around a line are ignored.
Any other separator (an ASCII comma, 「；」, 「？」) is not one, so the text around it counts as one line.
Partial credit: each of the first four lines that has exactly five Han characters and starts with its
head earns 0.25; each line beyond the fourth costs 0.25 (never below 0). So the reward is 1.0 exactly
when there are four such lines and nothing else; ``success`` means reward == 1.0.
"""

import functools

import regex as re

from zerollm.data import corpora
from zerollm.io.errors import ZeroLLMError
from zerollm.align.tasks.poems import POEM, couplets
from zerollm.align.tasks.common import check_make_args, pick, split_of

PREFIX = "藏头诗："
SEPARATORS = re.compile(r"[，。\n\r]+")
LINE = re.compile(r"\p{Han}{5}")
HEADS_IN_PROMPT = re.compile(r"藏头诗[：:]\s*(\p{Han}{4})\s*")
EXAMPLE_COMPLETION = "春眠不觉晓，处处闻啼鸟。夜来风雨声，花落知多少。"


def prompt_for(heads):
    return PREFIX + heads


# ----------------------------------------------------------------------------
# the poems

@functools.lru_cache(maxsize=1)
def all_quatrains():
    """[(heads, poem)] of every poem of the corpus, first four lines only, duplicates removed, in corpus
    order. poem = 「L1，L2。L3，L4。」."""
    seen, out = set(), []
    for line in corpora.read_text("tang").splitlines():
        if not POEM.fullmatch(line) or len(couplets(line)) not in (2, 4):
            continue
        poem = "".join(couplets(line)[:2])
        if poem not in seen:
            seen.add(poem)
            out.append((heads_of(poem), poem))
    return out


def heads_of(poem):
    return "".join(line[0] for line in poem_lines(poem))


def poem_lines(text):
    """The lines of a poem: split at 「，」/「。」/newlines, spaces trimmed, empty pieces dropped."""
    return [piece.strip() for piece in SEPARATORS.split(text) if piece.strip()]


def pool(split):
    """[(heads, poem)] of one split."""
    return [(h, p) for h, p in all_quatrains() if split_of(h) == split]


def make(n, split, seed):
    """n examples of ``split``, in an order drawn from ``seed``, each a different poem."""
    check_make_args(n, split, seed)
    return [{"prompt": prompt_for(h), "completion": p, "heads": h}
            for h, p in pick(pool(split), n, seed, f"acrostic {split} split")]


def with_thinking(row):
    """The row as a thinking trace (``tasks make acrostic --think``): the four heads, one by one, inside
    <think>, then the poem."""
    thought = " ".join(f"{k}:{h}" for k, h in enumerate(row["heads"], 1))
    return {**row, "completion": [{"role": "assistant", "reasoning_content": thought, "content": row["completion"]}]}


# ----------------------------------------------------------------------------
# the verifier

def heads_from(prompt, heads=None):
    """The four head characters: the ``heads`` field when given, else read from 「藏头诗：XXXX」."""
    if heads is not None:
        if not isinstance(heads, str) or len(heads) != 4:
            raise ZeroLLMError(f"heads must be four characters, got {heads!r}")
        return heads
    found = HEADS_IN_PROMPT.search(prompt) if isinstance(prompt, str) else None
    if found is None:
        raise ZeroLLMError(f"cannot find four head characters in the prompt {prompt!r}; "
                           f"an acrostic prompt reads {prompt_for('春夏秋冬')!r}")
    return found.group(1)


def line_checks(heads, completion):
    """[(line, ok)] for each line of the completion; ok = five Han characters starting with its head."""
    lines = poem_lines(completion)
    return [(line, k < 4 and bool(LINE.fullmatch(line)) and line[0] == heads[k]) for k, line in enumerate(lines)]


def reward(prompt, completion, heads=None, **fields):
    """1.0 for four five-character lines with the right heads and nothing else; partial credit as the
    module docstring says."""
    checks = line_checks(heads_from(prompt, heads), completion)
    score = sum(ok for _, ok in checks[:4]) / 4 - 0.25 * max(0, len(checks) - 4)
    return max(0.0, score)


# ----------------------------------------------------------------------------
# a base model (no chat template) and plain text

def plain_prompt(prompt, heads=None, **fields):
    """A poem model pre-trained on one poem per line is prompted with a newline (a poem starts there)
    and the first head; what it writes until the next newline follows that head."""
    first = heads_from(prompt, heads)[0]
    return "\n" + first, first


def text_line(row):
    """The poem itself (the corpus's form), for a plain-text corpus."""
    return row["completion"]
