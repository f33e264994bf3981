"""The functions the task YAML files of zerollm.evaluate.taskfiles name (``!function``).

Importing this module registers ``--model zerollm`` with lm-eval (zerollm.evaluate.harness). lm-eval
0.4 finds models only in its own registry, filled by imports; it has no entry points for them. Given
YAML files as tasks (``--tasks DIR`` or ``--tasks DIR/a.yaml,DIR/b.yaml``) it reads them, and so
imports this module, before it looks up the model: so

    lm_eval --model zerollm --model_args ckpt=RUN --tasks DIR

works. With ``--include_path DIR --tasks zerollm_tang_next`` it reads the YAML only after looking up
the model, and ``--model zerollm`` is not found yet.
"""

from zerollm.align.tasks import acrostic, addition

import zerollm.evaluate.harness  # noqa: F401  (registers lm_eval's --model zerollm)


def choices(doc):
    return list(doc["choices"])


def acrostic_results(doc, results):
    return _results(acrostic, doc, results)


def addition_results(doc, results):
    return _results(addition, doc, results)


def _results(task, doc, results):
    """lm-eval's process_results: the first generation scored by the task's verifier."""
    fields = {k: v for k, v in doc.items() if k not in ("prompt", "completion")}
    reward = float(task.reward(doc["prompt"], results[0], **fields))
    return {"success": float(reward == 1.0), "reward": reward}


