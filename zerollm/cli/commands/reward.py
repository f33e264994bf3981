"""``zerollm reward``: train a reward model on preference pairs (Part 7 of the course).

    zerollm tasks make prefs --out prefs.jsonl --n 4000 --split train
    zerollm reward --init runs/sft --data prefs.jsonl --eval-data prefs_heldout.jsonl --out runs/rm
    zerollm score --rm runs/rm --data prefs_heldout.jsonl

The trunk starts from a base or SFT checkpoint; a scalar head (zerollm.model.heads, "score") reads the last
real token of "prompt + answer" (the end-of-turn token of the chat template). Loss: Bradley-Terry
(-log sigmoid(r_chosen - r_rejected - margin)) or --loss margin (a hinge).
"""

from zerollm.data.chat import chat_model
from zerollm.align.objectives.pairs import encode_pairs, read_pairs
from zerollm.align.stage import Stage, add_stage_arguments, run_stage
from zerollm.align.objectives.reward import RewardConfig, RewardObjective



def build(model, tok, inputs, train_cfg, cfg, start):
    rows, eval_rows = read_pairs(inputs)
    model, tok = chat_model(model, tok, rows + eval_rows, train_cfg.seed)
    objective = RewardObjective(model, encode_pairs(tok, rows), batch_size=train_cfg.batch_size,
                                seed=train_cfg.seed, config=cfg, eval_pairs=encode_pairs(tok, eval_rows))
    return objective, tok


STAGE = Stage("reward", RewardConfig, build=build, rows_per_example=2,
              defaults=dict(lr=1e-4, min_lr=1e-5, warmup_iters=20, max_iters=400, batch_size=16, weight_decay=0.0,
                            eval_interval=100, checkpoint_interval=100, sample_tokens=0))


def add_arguments(p):
    add_stage_arguments(p, STAGE)


def run(args):
    return run_stage(args, STAGE)
