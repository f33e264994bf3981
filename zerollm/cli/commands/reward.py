"""``zerollm reward``: train a reward model on preference pairs (Part 7 of the course).

    zerollm tasks make prefs --out prefs.jsonl --n 4000 --split train
    zerollm reward --init runs/sft --data prefs.jsonl --eval-data prefs_heldout.jsonl --out runs/rm
    zerollm score --rm runs/rm --data prefs_heldout.jsonl

The trunk starts from a base or SFT checkpoint; a scalar head (zerollm.model.heads, "score") reads the last
real token of "prompt + answer" (the end-of-turn token of the chat template). Loss: Bradley-Terry
(-log sigmoid(r_chosen - r_rejected - margin)) or --loss margin (a hinge).
"""

from zerollm.align.stage import add_stage_arguments, run_stage
from zerollm.align.stages import REWARD as STAGE


def add_arguments(p):
    add_stage_arguments(p, STAGE)


def run(args):
    return run_stage(args, STAGE)
