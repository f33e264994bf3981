"""``zerollm dpo``: Direct Preference Optimization against a frozen copy of the starting model.

    zerollm dpo --init runs/sft --data prefs.jsonl --eval-data prefs_heldout.jsonl --out runs/dpo --beta 0.1
    zerollm dpo ... --loss-type ipo

Heldout, it reports the share of pairs whose chosen answer gets the larger implicit reward
beta (log pi - log ref). The reference is the starting model itself, reloaded and checked against
the digest saved with the run when a run resumes.
"""

from zerollm.align.stage import add_stage_arguments, run_stage
from zerollm.align.stages import DPO as STAGE


def add_arguments(p):
    add_stage_arguments(p, STAGE)


def run(args):
    return run_stage(args, STAGE)
