"""``zerollm reward``: train a reward model on preference pairs (Part 7 of the course).

    zerollm tasks make prefs --out prefs.jsonl --n 4000 --split train
    zerollm reward --init runs/sft --data prefs.jsonl --eval-data prefs_heldout.jsonl --out runs/rm
    zerollm score --rm runs/rm --data prefs_heldout.jsonl

The trunk starts from a base or SFT checkpoint; a scalar head (zerollm.heads, "score") reads the last
real token of "prompt + answer" (the end-of-turn token of the chat template). Loss: Bradley-Terry
(-log sigmoid(r_chosen - r_rejected - margin)) or --loss margin (a hinge).
"""

import numpy as np

from zerollm.commands.stage import Stage, add_stage_arguments, reload_start, run_stage
from zerollm.objectives.reward import RewardConfig, RewardObjective


def encode_pairs(tok, rows):
    """Preference rows {"prompt", "chosen", "rejected", ...} -> encoded pairs through the chat template."""
    from zerollm.chat import encode_example
    return [{**{k: v for k, v in row.items() if k not in ("prompt", "chosen", "rejected")},
             "chosen": encode_example(tok, {"prompt": row["prompt"], "completion": row["chosen"]}),
             "rejected": encode_example(tok, {"prompt": row["prompt"], "completion": row["rejected"]})}
            for row in rows]


def chat_model(model, tok, rows, seed):
    """The tokenizer with the chat template's tokens (and any characters the rows need), and the model
    resized to it; both unchanged when they already fit."""
    from zerollm.chat import prepare_tokenizer, resize_model
    texts = [str(v) for row in rows for k, v in row.items() if k in ("prompt", "chosen", "rejected", "completion")]
    tok = prepare_tokenizer(tok, texts)
    if tok.vocab_size > model.config.vocab_size:      # a model may have more rows than its tokenizer (GPT-2 shapes)
        model = resize_model(model, tok.vocab_size, np.random.default_rng([seed, 9]))
    return model, tok


def frozen_reference(policy, tok, start, seed):
    """The frozen reference of DPO, PPO and GRPO: with LoRA the policy's own base with the adapters switched
    off (no second copy of the weights, as TRL does with peft); otherwise the starting model reloaded (and
    checked by digest) with the same new embedding rows as the policy."""
    if policy.lora is not None:
        return policy.without_adapters().eval()
    reference, _ = reload_start(start)
    if reference.config.vocab_size != policy.config.vocab_size:
        reference, _ = chat_model(reference, tok, [], seed)
    return reference


def read_pairs(inputs):
    from zerollm.formats import read_prefs
    return read_prefs(inputs["data"]), (read_prefs(inputs["eval_data"]) if inputs["eval_data"] else [])


def build(model, tok, inputs, train_cfg, cfg, start):
    rows, eval_rows = read_pairs(inputs)
    model, tok = chat_model(model, tok, rows + eval_rows, train_cfg.seed)
    objective = RewardObjective(model, encode_pairs(tok, rows), batch_size=train_cfg.batch_size,
                                seed=train_cfg.seed, config=cfg, eval_pairs=encode_pairs(tok, eval_rows))
    return objective, tok


STAGE = Stage("reward", RewardConfig, build=build,
              defaults=dict(lr=1e-4, min_lr=1e-5, warmup_iters=20, max_iters=400, batch_size=16, weight_decay=0.0,
                            eval_interval=100, checkpoint_interval=100, sample_tokens=0))


def add_arguments(p):
    add_stage_arguments(p, STAGE)


def run(args):
    return run_stage(args, STAGE)
