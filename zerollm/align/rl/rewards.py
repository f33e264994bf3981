"""Where rewards come from: a task's verifier, a function of yours, or a trained reward model.

    --reward acrostic               zerollm.align.tasks.acrostic.reward(prompt, completion, **fields) per answer
    --reward my_module:my_fn        my_fn(prompts, completions, **fields) -> list of floats (the TRL convention:
                                    each extra JSONL field arrives as a list, one item per answer)
    --rm runs/rm                    a reward model (zerollm reward) reading prompt + answer
    --reward acrostic --reward-weights 1.0 ...    several sources, summed with weights

Every source is checked on every call: an exception, a NaN, a wrong count or a non-number stops the run
with one line that names the source (the last good checkpoint stays as it is).

Your own code (``module:function``) runs behind one guard, ``call_user`` (zerollm.align.guard), both when its module is
imported and at every call: an error of any kind (a SyntaxError, an exception at import, ``sys.exit``)
becomes that one line, and so does a call that takes longer than ``--reward-timeout`` seconds
(DEFAULT_TIMEOUT; 0 = no limit). The function runs in the main thread, exactly as it would without the
guard (so its rewards are exactly its own), and the time limit is a SIGALRM timer (setitimer): Python
interrupts the function between two bytecodes, also inside time.sleep or a blocking read. SIGTERM
(and a second Ctrl-C) stop the run at once while your code runs, keeping the last checkpoint. What no
guard in the same process can stop: a single C call that never returns to Python (one giant regex
match, a C extension's loop) and os._exit(); keep those out of reward functions.
"""

import importlib
import math
import os
import sys
from typing import Callable, NamedTuple

import numpy as np

from zerollm.io.errors import ZeroLLMError
from zerollm.align.guard import DEFAULT_TIMEOUT, call_user   # the guard of user code (also user tools')


class RewardSource(NamedTuple):
    name: str
    score: Callable      # score(prompts, completions, fields, sequences) -> sequence of floats
    weight: float = 1.0
    task: object = None  # a task's module, when its verifier is the source (its rows can be checked first)


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
    return RewardSource(name, score, weight, task)


def reward_tasks():
    """The tasks that can be a --reward: those with a verifier (``reward``)."""
    from zerollm.align.tasks import TASKS
    return [name for name, module in TASKS.items() if hasattr(module, "reward")]


def function_source(spec, weight=1.0, timeout=DEFAULT_TIMEOUT):
    """'module:function' (a module on the import path or a .py file beside you), TRL's calling convention;
    imported and called behind call_user's guard."""
    module_name, _, fn_name = spec.partition(":")
    if not module_name or not fn_name:
        raise ZeroLLMError(f"--reward {spec!r}: write a task name ({', '.join(reward_tasks())}) or "
                           "module:function (e.g. my_rewards:length)")
    if os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())                  # a my_rewards.py in the current folder is found
    try:
        module = call_user(f"--reward {spec}: cannot import {module_name}, which", lambda: importlib.import_module(module_name),
                           timeout)
    except ZeroLLMError as err:
        raise ZeroLLMError(f"{err}; fix the module (or the name) and start again") from None
    fn = getattr(module, fn_name, None)
    if fn is None:
        raise ZeroLLMError(f"--reward {spec!r}: the module {module_name} has no {fn_name!r}")
    if not callable(fn):
        raise ZeroLLMError(f"--reward {spec!r} is not a function")

    def score(prompts, completions, fields, sequences):
        columns = {k: [f.get(k) for f in fields] for k in sorted({k for f in fields for k in f})}

        def call():
            out = fn(prompts, completions, **columns)
            # read it here, under the time limit: a generator may never end
            return list(out) if hasattr(out, "__iter__") and not isinstance(out, (str, bytes, dict)) else out
        return call_user(f"reward {spec}", call, timeout)
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


def sources_from_flags(rewards, weights, rm, tokenizer, engine_factory, timeout=DEFAULT_TIMEOUT):
    """--reward NAME|module:fn (repeatable), --reward-weights, --rm DIR -> [RewardSource]."""
    specs = list(rewards or []) + ([f"rm:{rm}"] if rm else [])
    if not specs:
        raise ZeroLLMError(f"give --reward NAME (a task: {', '.join(reward_tasks())}; or module:function) "
                           "and/or --rm DIR (a reward model)")
    weights = list(weights) if weights else [1.0] * len(specs)
    if len(weights) != len(specs):
        raise ZeroLLMError(f"--reward-weights gives {len(weights)} weights for {len(specs)} reward sources")
    out = []
    for spec, w in zip(specs, weights):
        if spec.startswith("rm:"):
            out.append(model_source(spec[3:], tokenizer, engine_factory, w))
        elif ":" in spec:
            out.append(function_source(spec, w, timeout))
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


MAX_REWARD = 1e6


def check_rewards(name, values, n):
    try:
        if any(isinstance(v, (str, bytes)) for v in values):     # float("1") works, but "1" is text
            raise TypeError
        values = [float(v) for v in values]
    except Exception:                             # noqa: BLE001 - a user's object may fail in __float__ any way
        raise ZeroLLMError(f"reward {name} must return a list of numbers, one per answer; got {values!r:.80}") from None
    if len(values) != n:
        raise ZeroLLMError(f"reward {name} returned {len(values)} values for {n} answers; return one per answer")
    bad = [i for i, v in enumerate(values) if not math.isfinite(v)]
    if bad:
        raise ZeroLLMError(f"reward {name} returned {values[bad[0]]} for answer {bad[0]} "
                           f"({len(bad)} non-finite values); rewards must be finite numbers")
    big = [i for i, v in enumerate(values) if abs(v) > MAX_REWARD]
    if big:       # their squares (the group's variance, the value loss) overflow: "diverged" would mislead
        raise ZeroLLMError(f"reward {name} returned {values[big[0]]:.3g} for answer {big[0]}; rewards must be "
                           f"numbers up to {MAX_REWARD:g} in size (scale them down)")
    return np.array(values)
