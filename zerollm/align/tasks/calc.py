"""Calc: "a*b=" -> the product, for a and b of three digits: arithmetic a small model cannot do by heart,
and can with the calculator tool.

    prompt      "123*456="
    completion  "56088"                         (plain: the model must know the product)
    fields      answer: 56088

``zerollm tasks make calc --tools`` writes the same problems as a tool-calling trace (TRL's conversational
completion, with the row's "tools"): the assistant calls the calculator with the expression, the tool
answers, the assistant writes the tool's result:

    {"prompt": "123*456=", "tools": [calculator],
     "completion": [{"role": "assistant", "content": "", "tool_calls": [... {"expression": "123*456"} ...]},
                    {"role": "tool", "tool_call_id": "call_1", "content": "56088"},
                    {"role": "assistant", "content": "56088"}], "answer": 56088}

A pair (a, b) is heldout when the SHA-256 of "a*b" says so (about 10% of the 810,000 pairs), so heldout
problems never appear in train. Verifier: 1.0 when the answer (the content of the last assistant turn),
spaces trimmed, is exactly the product in decimal; 0.0 otherwise.
"""

import numpy as np

from zerollm.align.tasks.common import check_make_args, split_of
from zerollm.align.tools import CALCULATOR
from zerollm.io.errors import ZeroLLMError

EXAMPLE_COMPLETION = "56088"
MAX_PAIRS_TRIED = 50          # draws per example before giving up


def prompt_for(a, b):
    return f"{a}*{b}="


def make(n, split, seed):
    """n distinct 3-digit by 3-digit products of ``split``, drawn from default_rng(seed)."""
    check_make_args(n, split, seed)
    rng = np.random.default_rng(seed)
    rows, seen = [], set()
    for _ in range(n * MAX_PAIRS_TRIED):
        if len(rows) == n:
            break
        a, b = (int(x) for x in rng.integers(100, 1000, size=2))
        if (a, b) in seen or split_of(f"{a}*{b}") != split:
            continue
        seen.add((a, b))
        rows.append({"prompt": prompt_for(a, b), "completion": str(a * b), "answer": a * b})
    if len(rows) < n:
        raise ZeroLLMError(f"could only draw {len(rows)} distinct {split} products; ask for fewer than {n}")
    return rows


def with_tools(row):
    """The row as a trace that calls the calculator and answers with its result."""
    expression = row["prompt"].rstrip("=")
    call = {"id": "call_1", "type": "function", "function": {"name": "calculator", "arguments": {"expression": expression}}}
    return {"prompt": row["prompt"], "tools": [CALCULATOR],
            "completion": [{"role": "assistant", "content": "", "tool_calls": [call]},
                           {"role": "tool", "tool_call_id": "call_1", "content": str(row["answer"])},
                           {"role": "assistant", "content": str(row["answer"])}],
            "answer": row["answer"]}


def answer_from(prompt, answer=None):
    """The product: the row's "answer" (a whole number) or the two numbers of the prompt multiplied."""
    if answer is not None:
        if isinstance(answer, int) and not isinstance(answer, bool):
            return answer
        raise ZeroLLMError(f'a calc row\'s "answer" must be a whole number like 56088, got {answer!r}')
    a, sep, b = prompt.rstrip("=").partition("*") if isinstance(prompt, str) else ("", "", "")
    if not (sep and a.isascii() and a.isdigit() and b.isascii() and b.isdigit() and len(a) <= 6 and len(b) <= 6):
        raise ZeroLLMError(f"a calc prompt reads like '123*456=', got {prompt!r}")
    return int(a) * int(b)


def reward(prompt, completion, answer=None, **fields):
    """1.0 if the answer is the product, else 0.0."""
    return 1.0 if completion.strip() == str(answer_from(prompt, answer)) else 0.0


def plain_prompt(prompt, **fields):
    """A model pre-trained on lines "a*b=c" is prompted with a newline and "a*b="."""
    return "\n" + prompt, ""


def text_line(row):
    return row["prompt"] + str(row["answer"])
