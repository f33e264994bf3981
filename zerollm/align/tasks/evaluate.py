"""Measure a model on a task: sample one completion per prompt, score it with the task's verifier, and
report the success rate (reward == 1.0) with its 95% Wilson interval.

Two ways to prompt (``fmt``):
    chat   the chat template (zerollm.data.chat): the prompt as a user turn, generation until <|end|>
    plain  a base model without a template: the task's ``plain_prompt`` text, generation until a newline,
           the completion being the task's prefix plus what was generated (see each task module)
"auto" picks chat when the tokenizer has the template's tokens (a checkpoint of ``zerollm sft``).
"""

import math
from dataclasses import dataclass

from zerollm.data import chat
from zerollm.io.errors import ZeroLLMError
from zerollm.data.formats import prompt_text
from zerollm.generation.sample import Sampling

FORMATS = ("auto", "chat", "plain")
TEXT_KEYS = ("prompt", "completion", "chosen", "rejected", "messages")


def wilson(k, n, z=1.96):
    """The Wilson score interval (Wilson 1927) for k successes in n trials: unlike p ± z·sqrt(p(1-p)/n),
    it stays inside [0, 1] and is not zero-width at 0% or 100%.

    >>> [round(x, 4) for x in wilson(0, 10)]
    [0.0, 0.2775]
    """
    if n == 0:
        return 0.0, 1.0
    p = k / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z / (1 + z * z / n) * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n))
    return max(0.0, centre - half), min(1.0, centre + half)


def fields_of(row):
    """The fields a verifier reads: everything but the texts."""
    return {k: v for k, v in row.items() if k not in TEXT_KEYS}


def resolve_format(fmt, tokenizer):
    if fmt not in FORMATS:
        raise ZeroLLMError(f"format must be one of {', '.join(FORMATS)}, got {fmt!r}")
    if fmt == "auto":
        return "chat" if chat.has_template(tokenizer) else "plain"
    if fmt == "chat":
        chat.end_id(tokenizer)                      # a clear error when the template's tokens are missing
    return fmt


def newline_ids(tokenizer):
    """Every id whose text holds a newline: where a plain completion ends."""
    ids = []
    for i in range(tokenizer.vocab_size):
        try:
            if "\n" in tokenizer.decode([i]):
                ids.append(i)
        except ZeroLLMError:                        # an unused id of an imported vocabulary
            continue
    return ids


def default_max_new_tokens(task, tokenizer):
    """Twice the tokens of a typical completion, plus the end token: room for a model that rambles. A
    model that thinks or calls tools gets twice the learned tokens of the task's own trace."""
    try:
        n = len(tokenizer.encode(task.EXAMPLE_COMPLETION))
        for attr, knows in (("with_tools", chat.has_tools), ("with_thinking", chat.has_thinking)):
            if hasattr(task, attr) and knows(tokenizer):
                ids, learned = chat.encode_example(tokenizer, getattr(task, attr)(task.make(1, "train", 0)[0]))
                n = max(n, sum(learned))
        return 2 * n + 1
    except ZeroLLMError:
        return 64


@dataclass(frozen=True)
class TaskSampling:
    """How sample_task samples: the prompt format (FORMATS), at most ``max_new_tokens`` per completion
    (None: default_max_new_tokens), ``sampling`` (zerollm.generation.sample.Sampling), row i drawing
    with the seed (seed, i)."""
    fmt: str = "auto"
    max_new_tokens: int | None = None
    sampling: Sampling = Sampling()
    seed: int = 0
    max_tool_calls: int = 3          # tool calls run per answer, for rows that list "tools" (#58)
    tools: object = None             # a zerollm.align.tools.Toolbox; None: the built-in tools


def sample_task(model, tokenizer, task, rows, how=TaskSampling(), should_stop=None):
    """One completion text per row (row i samples with the seed (how.seed, i)), and the format used."""
    texts, fmt, _ = answer_task(model, tokenizer, task, rows, how, should_stop)
    return texts, fmt


def answer_task(model, tokenizer, task, rows, how=TaskSampling(), should_stop=None):
    """sample_task, and what the answers did with thinking and tools: (texts, format, stats). A chat model
    that knows the tool or think tokens answers through zerollm.align.tools.run_tool_loop (a row that lists
    "tools" gets them in its prompt and has its calls run); its answer is the parsed content, and
    stats holds the mean tool calls, the share of valid calls and the mean think length."""
    from zerollm.generation.decode import Completions, sample_completions
    fmt = resolve_format(how.fmt, tokenizer)
    max_new_tokens = how.max_new_tokens or default_max_new_tokens(task, tokenizer)
    seeds = [(how.seed, i) for i in range(len(rows))]
    if fmt == "chat" and (chat.has_tools(tokenizer) or chat.has_thinking(tokenizer)):
        how_each = Completions(max_new_tokens, how.sampling, (chat.end_id(tokenizer),))
        return _answer_with_tools(model, tokenizer, rows, how, how_each, should_stop)
    if fmt == "chat":
        prompts = [chat.encode_prompt(tokenizer, row["prompt"]) for row in rows]
        stop, prefixes = [chat.end_id(tokenizer)], [""] * len(rows)
    else:
        plain = [task.plain_prompt(prompt_text(row["prompt"]), **fields_of(row)) for row in rows]
        prompts = [tokenizer.encode(text) for text, _ in plain]
        stop, prefixes = newline_ids(tokenizer), [prefix for _, prefix in plain]
    ids = sample_completions(model, prompts, Completions(max_new_tokens, how.sampling, tuple(stop)),
                             seeds=seeds, should_stop=should_stop)
    if fmt == "chat":
        return [chat.decode_completion(tokenizer, c) for c in ids], fmt, {}
    return [prefix + tokenizer.decode(c).split("\n")[0] for prefix, c in zip(prefixes, ids)], fmt, {}


def _answer_with_tools(model, tokenizer, rows, how, completions, should_stop):
    from zerollm.align.tools import ToolLoop, load_tools, run_tool_loop, tool_stats
    from zerollm.generation.decode import sample_completions
    box = how.tools or load_tools()
    prompts = [chat.encode_prompt(tokenizer, row["prompt"], tools=row.get("tools")) for row in rows]
    sample = lambda ps, seeds, c: sample_completions(model, ps, c, seeds=seeds, should_stop=should_stop)
    loop = ToolLoop(completions, model.config.block_size, how.max_tool_calls if chat.has_tools(tokenizer) else 0)
    boxes = [box if chat.has_tools(tokenizer) and row.get("tools") else None for row in rows]   # no tools listed: none run
    answers = run_tool_loop(sample, tokenizer, prompts, [(how.seed, i) for i in range(len(rows))], boxes, loop)
    return [a.reply.content for a in answers], "chat", tool_stats(answers)


def check_examples(task, rows, where="example"):
    """The task's verifier reads every row's fields once (scoring an empty answer), so that a field it
    cannot use (an addition "answer" that is no number) stops a command before minutes of sampling or
    training, in one line naming the example (``where`` i, counted from 1)."""
    for i, row in enumerate(rows, 1):
        try:
            task.reward(prompt_text(row["prompt"]), "", **fields_of(row))
        except ZeroLLMError as err:
            raise ZeroLLMError(f"{where} {i}: {err}") from None


def score(task, rows, completions):
    """Per-example results and the summary: successes, rate, 95% interval, mean reward."""
    results = []
    for row, completion in zip(rows, completions):
        r = float(task.reward(prompt_text(row["prompt"]), completion, **fields_of(row)))
        results.append({"prompt": row["prompt"], "completion": completion, "reward": r, "success": r == 1.0})
    n, k = len(results), sum(r["success"] for r in results)
    low, high = wilson(k, n)
    summary = {"n": n, "successes": k, "success_rate": k / n if n else 0.0, "ci95": [low, high],
               "mean_reward": sum(r["reward"] for r in results) / n if n else 0.0}
    return summary, results


def evaluate(model, tokenizer, task, rows, how=TaskSampling()):
    """sample_task + score -> (summary with the format, results); the rows are checked first."""
    check_examples(task, rows)
    completions, fmt, stats = answer_task(model, tokenizer, task, rows, how)
    summary, results = score(task, rows, completions)
    return {**summary, "format": fmt, **stats}, results
