"""``zerollm ppo``: PPO with a learned value head and a reward model or a verifier (Part 8).

    zerollm ppo --init runs/sft --data prompts.jsonl --rm runs/rm --out runs/ppo --task acrostic
    zerollm ppo --init runs/sft --data prompts.jsonl --reward acrostic --out runs/ppo-verifier

With --rm the policy is trained on what the reward model says; --task (default: the --reward task)
logs the verifier's verdict beside it, so a policy that fools the reward model shows up as a rising
reward with a flat or falling success.
"""

from zerollm.align.rl.build import build_rollout_objective
from zerollm.align.stage import Stage, add_stage_arguments, run_stage
from zerollm.align.rl.ppo import PPOConfig, PPOObjective


def build(model, tok, inputs, train_cfg, cfg, start):
    return build_rollout_objective(PPOObjective, model, tok, inputs, train_cfg, cfg, start)


STAGE = Stage("ppo", PPOConfig, build=build,
              defaults=dict(lr=1e-5, min_lr=1e-6, warmup_iters=0, max_iters=200, weight_decay=0.0,
                            eval_interval=50, checkpoint_interval=25, sample_tokens=0, grad_clip=1.0),
              skip=("batch_size", "eval_iters", "sample_tokens"))


def add_arguments(p):
    add_stage_arguments(p, STAGE)


def run(args):
    return run_stage(args, STAGE)
