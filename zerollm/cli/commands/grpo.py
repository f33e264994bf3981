"""``zerollm grpo``: Group Relative Policy Optimization with verifiable rewards (Part 9).

    zerollm tasks make acrostic --out prompts.jsonl --n 2000 --split train
    zerollm grpo --init runs/sft --data prompts.jsonl --reward acrostic --group-size 8 --out runs/grpo
    zerollm grpo --out runs/grpo --resume

Each step samples --prompts-per-step prompts, --group-size answers each, scores them with the reward
sources, and turns each answer's reward into an advantage relative to its group (zerollm.align.rl).
"""

from zerollm.align.rl.build import build_rollout_objective
from zerollm.align.stage import Stage, add_stage_arguments, run_stage
from zerollm.align.rl.grpo import GRPOConfig, GRPOObjective



def build(model, tok, inputs, train_cfg, cfg, start):
    return build_rollout_objective(GRPOObjective, model, tok, inputs, train_cfg, cfg, start)


STAGE = Stage("grpo", GRPOConfig, build=build,
              defaults=dict(lr=1e-5, min_lr=1e-6, warmup_iters=0, max_iters=200, weight_decay=0.0,
                            eval_interval=50, checkpoint_interval=25, sample_tokens=0, grad_clip=1.0),
              skip=("batch_size", "eval_iters", "sample_tokens"))


def add_arguments(p):
    add_stage_arguments(p, STAGE)


def run(args):
    return run_stage(args, STAGE)


