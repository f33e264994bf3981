"""Objectives: the one thing that differs between pre-training, SFT, reward modelling, DPO, PPO and GRPO.

The training loop (zerollm.training.trainer) is written once: learning-rate schedule, gradient accumulation,
clipping, AdamW, thread shards, log.jsonl, checkpoints, exact resume, Ctrl-C. It asks an objective
only for what is particular to it:

    batch = objective.next_batch()                         # from the objective's own RNGs
    result = objective.shard_loss(model, batch_rows)       # loss, gradients, weight, metrics
    metrics, text = objective.evaluate(context)            # at each eval interval (a RunContext)

See zerollm.training.objective for the full contract and zerollm.training.lm for the simplest one.
"""

from zerollm.training.objective import Objective, ShardResult

__all__ = ["Objective", "ShardResult"]
