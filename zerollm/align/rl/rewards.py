"""Where rewards come from: a task's verifier, a function of yours, or a trained reward model.

    --reward acrostic               zerollm.align.tasks.acrostic.reward(prompt, completion, **fields) per answer
    --reward my_module:my_fn        my_fn(prompts, completions, **fields) -> list of floats (the TRL convention:
                                    each extra JSONL field arrives as a list, one item per answer)
    --rm runs/rm                    a reward model (zerollm reward) reading prompt + answer
    --reward acrostic --reward-weights 1.0 ...    several sources, summed with weights

Every source is checked on every call: an exception, a NaN, a wrong count or a non-number stops the run
with one line that names the source (the last good checkpoint stays as it is).
"""

import importlib
import math
import os
import sys
from typing import Callable, NamedTuple

import numpy as np

from zerollm.io.errors import ZeroLLMError


class RewardSource(NamedTuple):
    name: str
    score: Callable      # score(prompts, completions, fields, sequences) -> sequence of floats
    weight: float = 1.0


def task_source(name, weight=1.0):
    """A task's own verifier, called once per answer."""
    from zerollm.align.tasks import TASKS
    if name not in reward_tasks():
        what = f"the task {name!r} has no verifier" if name in TASKS else f"unknown task {name!r}"
        raise ZeroLLMError(f"--reward: {what}; the reward tasks are {', '.join(reward_tasks())} "
                           "(or write module:function, or give --rm DIR)")
    task = TASKS[name]

    def score(prompts, completions, fields, sequences):
        # a prompts file made by `zerollm tasks make` keeps the reference answer as "completion": it is
        # not an input of the verifier, which judges the sampled answer
        return [task.reward(p, c, **{k: v for k, v in f.items() if k != "completion"})
                for p, c, f in zip(prompts, completions, fields)]
    return RewardSource(name, score, weight)


def reward_tasks():
    """The tasks that can be a --reward: those with a verifier (``reward``)."""
    from zerollm.align.tasks import TASKS
    return [name for name, module in TASKS.items() if hasattr(module, "reward")]


def function_source(spec, weight=1.0):
    """'module:function' (a module on the import path or a .py file beside you), TRL's calling convention."""
    module_name, _, fn_name = spec.partition(":")
    if not module_name or not fn_name:
        raise ZeroLLMError(f"--reward {spec!r}: write a task name ({', '.join(reward_tasks())}) or "
                           "module:function (e.g. my_rewards:length)")
    if os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())                  # a my_rewards.py in the current folder is found
    try:
        fn = getattr(importlib.import_module(module_name), fn_name)
    except (ImportError, AttributeError) as err:
        raise ZeroLLMError(f"--reward {spec!r}: cannot import it ({err})") from None
    if not callable(fn):
        raise ZeroLLMError(f"--reward {spec!r} is not a function")

    def score(prompts, completions, fields, sequences):
        columns = {k: [f.get(k) for f in fields] for k in sorted({k for f in fields for k in f})}
        return fn(prompts, completions, **columns)
    return RewardSource(spec, score, weight)


def model_source(path, policy_tokenizer, engine_factory, weight=1.0):
    """A trained reward model; it must read the very token ids the policy writes (same tokenizer)."""
    from zerollm.align.objectives.reward import load_reward_model
    from zerollm.align.objectives.reward import sequence_rewards
    model, head, tok = load_reward_model(path)
    if tok.to_dict() != policy_tokenizer.to_dict():
        raise ZeroLLMError(f"the reward model {path} uses another tokenizer than the policy (different vocabulary "
                           "or special tokens); train the reward model from the same SFT checkpoint")
    engine = engine_factory(model)

    def score(prompts, completions, fields, sequences):
        return sequence_rewards(engine, head, sequences)
    return RewardSource(f"rm:{os.path.basename(os.path.normpath(path))}", score, weight)


def sources_from_flags(rewards, weights, rm, tokenizer, engine_factory):
    """--reward NAME|module:fn (repeatable), --reward-weights, --rm DIR -> [RewardSource]."""
    specs = list(rewards or []) + ([f"rm:{rm}"] if rm else [])
    if not specs:
        raise ZeroLLMError("give --reward NAME (a task: " + ", ".join(reward_tasks()) + "; or module:function) "
                           "and/or --rm DIR (a reward model)")
    weights = list(weights) if weights else [1.0] * len(specs)
    if len(weights) != len(specs):
        raise ZeroLLMError(f"--reward-weights gives {len(weights)} weights for {len(specs)} reward sources")
    out = []
    for spec, w in zip(specs, weights):
        if spec.startswith("rm:"):
            out.append(model_source(spec[3:], tokenizer, engine_factory, w))
        elif ":" in spec:
            out.append(function_source(spec, w))
        else:
            out.append(task_source(spec, w))
    return out


def score_all(sources, prompts, completions, fields, sequences):
    """-> (weighted total (B,), {source name: its rewards (B,)}), every source's output checked."""
    n = len(completions)
    total, each = np.zeros(n), {}
    for src in sources:
        try:
            values = src.score(prompts, completions, fields, sequences)
        except ZeroLLMError:
            raise
        except Exception as err:                           # a user's function: report it, don't crash
            raise ZeroLLMError(f"reward {src.name} raised {type(err).__name__}: {err}") from None
        values = check_rewards(src.name, values, n)
        each[src.name] = values
        total += src.weight * values
    return total, each


def check_rewards(name, values, n):
    try:
        values = [float(v) for v in values]
    except (TypeError, ValueError):
        raise ZeroLLMError(f"reward {name} must return a list of numbers, one per answer; got {values!r:.80}") from None
    if len(values) != n:
        raise ZeroLLMError(f"reward {name} returned {len(values)} values for {n} answers; return one per answer")
    bad = [i for i, v in enumerate(values) if not math.isfinite(v)]
    if bad:
        raise ZeroLLMError(f"reward {name} returned {values[bad[0]]} for answer {bad[0]} "
                           f"({len(bad)} non-finite values); rewards must be finite numbers")
    return np.array(values)
