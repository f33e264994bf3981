"""Addition: "a+b=" -> the sum, for a and b of one to three digits.

    prompt      "12+345="
    completion  "357"
    fields      answer: 357

Each operand first draws its number of digits (1, 2 or 3, equally likely) and then a value with that
many digits, so short sums are not drowned by three-digit ones. The pair (a, b) is heldout when the
SHA-256 of "a+b" says so (about 10% of pairs), so heldout prompts never appear in train; a make() call
never repeats a pair. (b, a) is a different pair and may land in the other split.

``--think`` (``with_thinking``) writes a program's steps into the reasoning: the column sums from the ones
up, "8+5=13 1+1+1=3" for 18+15 (a carry shows as "+1"), then the sum as the answer.

Verifier: 1.0 when the completion, spaces and newlines trimmed, is exactly the decimal sum (no sign, no
leading zeros); 0.0 otherwise. No partial credit: a sum with one wrong digit is wrong.
"""

import collections
import functools

import regex as re

import numpy as np

from zerollm.io.errors import ZeroLLMError
from zerollm.align.tasks.common import check_make_args, split_of

PROMPT = re.compile(r"\s*(\d{1,3})\+(\d{1,3})=\s*")
EXAMPLE_COMPLETION = "1998"
MAX_PAIRS_TRIED = 50          # draws per example before giving up (small splits run out of pairs)
# Up to these sizes a split surely has enough pairs (899,917 train and 100,083 heldout: the hostile tests
# check the count), so make() counts (a million hashes, ~2 s) only when asked for more.
SURELY_THERE = {"train": 800_000, "heldout": 50_000}


def prompt_for(a, b):
    return f"{a}+{b}="


def _operand(rng):
    digits = int(rng.integers(1, 4))
    low = 0 if digits == 1 else 10 ** (digits - 1)
    return int(rng.integers(low, 10 ** digits))


def distinct_pairs(split):
    """How many (a, b) pairs of ``split`` exist at all (a, b from 0 to 999): about 900,000 train and
    100,000 heldout; counted (a second, once) rather than trusted, since the split comes from a hash."""
    return _split_sizes()[split]


@functools.lru_cache(maxsize=None)
def _split_sizes():
    return collections.Counter(split_of(f"{a}+{b}") for a in range(1000) for b in range(1000))


def make(n, split, seed):
    """n distinct pairs of ``split``, drawn from default_rng(seed)."""
    check_make_args(n, split, seed)
    if n > SURELY_THERE[split] and n > (have := distinct_pairs(split)):
        raise ZeroLLMError(f"--n {n}: the addition {split} split has only {have} distinct problems "
                           f"(a+b with a, b up to 999); ask for at most {have}")
    rng = np.random.default_rng(seed)
    rows, seen = [], set()
    for _ in range(n * MAX_PAIRS_TRIED):
        if len(rows) == n:
            break
        a, b = _operand(rng), _operand(rng)
        if (a, b) in seen or split_of(f"{a}+{b}") != split:
            continue
        seen.add((a, b))
        rows.append({"prompt": prompt_for(a, b), "completion": str(a + b), "answer": a + b})
    if len(rows) < n:
        raise ZeroLLMError(f"could only draw {len(rows)} distinct {split} pairs; ask for fewer than {n}")
    return rows


def steps(a, b):
    """The column sums of a+b, ones first, as a pupil writes them: "8+5=13 1+1+1=3" (a carry is "+1")."""
    out, carry = [], 0
    while a or b or carry:
        x, y = a % 10, b % 10
        total = x + y + carry
        out.append(f"{x}+{y}{'+1' if carry else ''}={total}")
        a, b, carry = a // 10, b // 10, total // 10
    return " ".join(out) or "0+0=0"


def with_thinking(row):
    """The row as a thinking trace (``tasks make addition --think``): the column sums inside <think>, then
    the sum."""
    a, b = (int(x) for x in row["prompt"].rstrip("=").split("+"))
    return {**row, "completion": [{"role": "assistant", "reasoning_content": steps(a, b), "content": str(a + b)}]}


def answer_from(prompt, answer=None):
    """The sum a completion must give: the row's "answer" (a whole number, or a string of digits) when it
    has one, else the two numbers of the prompt added."""
    if answer is not None:
        if isinstance(answer, str) and re.fullmatch(r"\s*-?[0-9]{1,30}\s*", answer):
            return int(answer)
        if isinstance(answer, int) and not isinstance(answer, bool):
            return answer
        if isinstance(answer, float) and answer.is_integer() and abs(answer) < 1e15:
            return int(answer)
        raise ZeroLLMError(f'an addition row\'s "answer" must be a whole number like 357, got {answer!r}')
    found = PROMPT.fullmatch(prompt) if isinstance(prompt, str) else None
    if found is None:
        raise ZeroLLMError(f"an addition prompt reads like '12+345=', got {prompt!r}")
    return int(found.group(1)) + int(found.group(2))


def reward(prompt, completion, answer=None, **fields):
    """1.0 if the completion is the sum, else 0.0."""
    return 1.0 if completion.strip() == str(answer_from(prompt, answer)) else 0.0


def plain_prompt(prompt, **fields):
    """A model pre-trained on lines "a+b=c" is prompted with a newline and "a+b="; it writes the sum."""
    return "\n" + prompt, ""


def text_line(row):
    return row["prompt"] + row["completion"]
