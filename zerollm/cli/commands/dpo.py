"""``zerollm dpo``: Direct Preference Optimization against a frozen copy of the starting model.

    zerollm dpo --init runs/sft --data prefs.jsonl --eval-data prefs_heldout.jsonl --out runs/dpo --beta 0.1
    zerollm dpo ... --loss-type ipo

Heldout, it reports the share of pairs whose chosen answer gets the larger implicit reward
beta (log pi - log ref). The reference is the starting model itself, reloaded and checked against
the digest saved with the run when a run resumes.
"""

from zerollm.data.chat import chat_model
from zerollm.align.objectives.pairs import encode_pairs, read_pairs
from zerollm.align.stage import Stage, add_stage_arguments, frozen_reference, run_stage
from zerollm.align.objectives.dpo import DPOConfig, DPOObjective


def build(model, tok, inputs, train_cfg, cfg, start):
    rows, eval_rows = read_pairs(inputs)
    model, tok = chat_model(model, tok, rows + eval_rows, train_cfg.seed)
    reference = frozen_reference(model, tok, start, train_cfg.seed)  # the same new rows as the policy
    objective = DPOObjective(model, reference, encode_pairs(tok, rows), batch_size=train_cfg.batch_size,
                             seed=train_cfg.seed, config=cfg, eval_pairs=encode_pairs(tok, eval_rows))
    return objective, tok


STAGE = Stage("dpo", DPOConfig, build=build, reference=True, rows_per_example=2,
              defaults=dict(lr=5e-5, min_lr=5e-6, warmup_iters=20, max_iters=300, batch_size=16, weight_decay=0.0,
                            eval_interval=100, checkpoint_interval=100, sample_tokens=0))


def add_arguments(p):
    add_stage_arguments(p, STAGE)


def run(args):
    return run_stage(args, STAGE)
