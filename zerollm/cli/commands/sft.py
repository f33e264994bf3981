"""``zerollm sft``: supervised fine-tuning of a checkpoint (or a Hugging Face model) on prompt/completion data.

    zerollm sft --init runs/tang --data acrostic-train.jsonl --eval-data acrostic-heldout.jsonl \\
                --task acrostic --out runs/tang-sft
    zerollm sft --out runs/tang-sft --resume                 # continue after Ctrl-C or a crash

The tokenizer gets the chat template's special tokens (and, for a char tokenizer, any character of the
data it lacks), the model the matching new embedding rows (zerollm.data.chat); the run directory and every
checkpoint hold that extended tokenizer, so ``zerollm sample`` and ``zerollm tasks eval`` work on it.
The run itself (flags, inputs copied into RUN/inputs/, resume) is the one every post-training command
shares (zerollm/align/stage.py); SFT's own settings are SFTConfig (zerollm/align/objectives/sft.py).
"""

import numpy as np

from zerollm.align.stage import Stage, add_stage_arguments, run_stage
from zerollm.align.objectives.sft import SFTConfig

# a short, gentle run: the model already knows the language, it learns the format and the task
SFT_DEFAULTS = dict(batch_size=16, max_iters=300, lr=5e-4, min_lr=5e-5, warmup_iters=20, weight_decay=0.0,
                    eval_interval=100, checkpoint_interval=100)


def build(model, tok, inputs, train_cfg, cfg, start):
    """The SFT objective on the chat-template encoding of the data; the extended tokenizer."""
    from zerollm.data import chat
    from zerollm.data.formats import read_sft
    from zerollm.align.objectives.sft import Heldout, SFTObjective, fitting
    from zerollm.align.tasks import get_task
    task = get_task(cfg.task) if cfg.task is not None else None
    rows = read_sft(inputs["data"])
    heldout = read_sft(inputs["eval_data"]) if inputs["eval_data"] else []
    tok = chat.prepare_tokenizer(tok, [text for row in rows + heldout for text in chat.example_texts(row)])
    model = chat.resize_model(model, max(model.config.vocab_size, tok.vocab_size),
                              np.random.default_rng([train_cfg.seed, 6]))
    model.rng = np.random.default_rng([train_cfg.seed, 5])          # dropout: decided by the run's seed
    block = model.config.block_size
    train = fitting([chat.encode_example(tok, row) for row in rows], block, "training examples")
    held = fitting([chat.encode_example(tok, row) for row in heldout], block, "heldout examples") if heldout else []
    prompts = [row for row in heldout if "prompt" in row and len(chat.encode_prompt(tok, row["prompt"])) < block]
    objective = SFTObjective(model, tok, train, batch_size=train_cfg.batch_size, seed=train_cfg.seed, cfg=cfg,
                             heldout=Heldout(tuple(held), tuple(prompts)), task=task)
    return objective, tok


STAGE = Stage("sft", SFTConfig, build=build, defaults=SFT_DEFAULTS, skip=("sample_tokens", "eval_iters"))


def add_arguments(p):
    add_stage_arguments(p, STAGE)


def run(args):
    return run_stage(args, STAGE)
