"""``zerollm ppo``: PPO with a learned value head and a reward model or a verifier (Part 8).

    zerollm ppo --init runs/sft --data prompts.jsonl --rm runs/rm --out runs/ppo --task acrostic
    zerollm ppo --init runs/sft --data prompts.jsonl --reward acrostic --out runs/ppo-verifier

With --rm the policy is trained on what the reward model says; --task (default: the --reward task)
logs the verifier's verdict beside it, so a policy that fools the reward model shows up as a rising
reward with a flat or falling success.
"""

from zerollm.align.stage import add_stage_arguments, run_stage
from zerollm.align.stages import PPO as STAGE


def add_arguments(p):
    add_stage_arguments(p, STAGE)


def run(args):
    return run_stage(args, STAGE)
