"""``zerollm grpo``: Group Relative Policy Optimization with verifiable rewards (Part 9).

    zerollm tasks make acrostic --out prompts.jsonl --n 2000 --split train
    zerollm grpo --init runs/sft --data prompts.jsonl --reward acrostic --group-size 8 --out runs/grpo
    zerollm grpo --out runs/grpo --resume

Each step samples --prompts-per-step prompts, --group-size answers each, scores them with the reward
sources, and turns each answer's reward into an advantage relative to its group (zerollm.align.rl).
"""

from zerollm.align.stage import add_stage_arguments, run_stage
from zerollm.align.stages import GRPO as STAGE


def add_arguments(p):
    add_stage_arguments(p, STAGE)


def run(args):
    return run_stage(args, STAGE)
