"""Tasks whose answers a program can check, offline and deterministic: the ground SFT, reward models,
DPO and RL stand on.

    acrostic   藏头诗: 「藏头诗：春夏秋冬」 -> a five-character quatrain whose line i starts with head i
    addition   "12+345=" -> "357"
    calc       "123*456=" -> "56088": too hard by heart, easy with the calculator tool
    prefs      preference pairs from the acrostic task: a real poem vs the same poem corrupted one way

Every task module has the same parts:

    make(n, split, seed) -> list of dicts     the examples ("prompt", "completion" or "chosen"/"rejected",
                                              and fields the verifier reads); split "train" or "heldout"
    reward(prompt, completion, **fields) -> float     the verifier, 1.0 = fully right
    plain_prompt(prompt) -> (text, prefix)    how a base model (no chat template) is prompted, and the
                                              text its continuation is appended to before scoring
    text_line(row) -> str                     one line of plain text for pre-training a base model

and some have the variants of #58 (``zerollm tasks make NAME --tools`` / ``--think``):

    with_tools(row) -> row                    calc: a trace that calls the calculator (zerollm.align.tools)
    with_thinking(row) -> row                 addition, acrostic: a program's steps inside <think>

``TASKS`` maps names to the modules; ``get_task(name)`` gives one or a clear error.
"""

from zerollm.io.errors import ZeroLLMError
from zerollm.align.tasks import acrostic, addition, calc, prefs
from zerollm.align.tasks.common import SPLITS, split_of

TASKS = {"acrostic": acrostic, "addition": addition, "calc": calc, "prefs": prefs}

__all__ = ["TASKS", "SPLITS", "get_task", "split_of"]


def get_task(name):
    """The task module called ``name``."""
    if name not in TASKS:
        raise ZeroLLMError(f"unknown task {name!r}; the tasks are {', '.join(TASKS)}")
    return TASKS[name]
