"""Every post-training stage as the one run recipe takes it (zerollm.training.run, through zerollm.align.stage):
its name, its settings, the TrainConfig defaults that suit it, and how it builds its objective from the
starting model and the inputs copied into the run. The commands (zerollm.cli.commands.sft, reward, dpo,
ppo, grpo, distill) parse flags and hand their Stage to run_stage; the run never climbs back up into them.

    objective, tok = SFT.build(model, tok, inputs, train_cfg, cfg, start)
"""

import numpy as np

from zerollm.align.objectives.distill import (DistillConfig, DistillObjective, open_student, reopen_student,
                                              reopen_teacher, teacher_memory, text_ids)
from zerollm.align.objectives.dpo import DPOConfig, DPOObjective
from zerollm.align.objectives.pairs import encode_pairs, read_pairs
from zerollm.align.objectives.reward import RewardConfig, RewardObjective
from zerollm.align.objectives.sft import Heldout, SFTConfig, SFTObjective, fitting
from zerollm.align.rl.build import rollout_stage
from zerollm.align.rl.grpo import GRPOConfig, GRPOObjective
from zerollm.align.rl.ppo import PPOConfig, PPOObjective
from zerollm.align.stage import Stage, frozen_reference
from zerollm.align.tasks import get_task
from zerollm.data import chat
from zerollm.data.chat import chat_model
from zerollm.data.formats import read_sft


def build_sft(model, tok, inputs, train_cfg, cfg, start):
    """The SFT objective on the chat-template encoding of the data; the extended tokenizer."""
    task = get_task(cfg.task) if cfg.task is not None else None
    rows = read_sft(inputs["data"])
    heldout = read_sft(inputs["eval_data"]) if inputs["eval_data"] else []
    tok = chat.prepare_tokenizer(tok, [text for row in rows + heldout for text in chat.example_texts(row)],
                                 needs=chat.template_needs(rows + heldout))   # tool/think tokens only for such data
    model = chat.resize_model(model, max(model.config.vocab_size, tok.vocab_size),
                              np.random.default_rng([train_cfg.seed, 6]))
    model.rng = np.random.default_rng([train_cfg.seed, 5])          # dropout: decided by the run's seed
    block = model.config.block_size
    train = fitting([chat.encode_example(tok, row) for row in rows], block, "training examples")
    held = fitting([chat.encode_example(tok, row) for row in heldout], block, "heldout examples") if heldout else []
    prompts = [row for row in heldout
               if "prompt" in row and len(chat.encode_prompt(tok, row["prompt"], tools=row.get("tools"))) < block]
    objective = SFTObjective(model, tok, train, batch_size=train_cfg.batch_size, seed=train_cfg.seed, cfg=cfg,
                             heldout=Heldout(tuple(held), tuple(prompts)), task=task)
    return objective, tok


def build_reward(model, tok, inputs, train_cfg, cfg, start):
    """A scalar head on the starting model's trunk, trained on the chat-template encoding of the pairs."""
    rows, eval_rows = read_pairs(inputs)
    model, tok = chat_model(model, tok, rows + eval_rows, train_cfg.seed)
    objective = RewardObjective(model, encode_pairs(tok, rows), batch_size=train_cfg.batch_size,
                                seed=train_cfg.seed, config=cfg, eval_pairs=encode_pairs(tok, eval_rows))
    return objective, tok


def build_dpo(model, tok, inputs, train_cfg, cfg, start):
    """DPO against the frozen starting model, both extended alike for the chat template."""
    rows, eval_rows = read_pairs(inputs)
    model, tok = chat_model(model, tok, rows + eval_rows, train_cfg.seed)
    reference = frozen_reference(model, tok, start, train_cfg.seed)  # the same new rows as the policy
    objective = DPOObjective(model, reference, encode_pairs(tok, rows), batch_size=train_cfg.batch_size,
                             seed=train_cfg.seed, config=cfg, eval_pairs=encode_pairs(tok, eval_rows))
    return objective, tok


def build_distill(model, tok, inputs, train_cfg, cfg, start):
    """The student on windows of the text, against the teacher the start record names (checked by digest)."""
    teacher, _ = reopen_teacher(start["teacher"])
    model.rng = np.random.default_rng([train_cfg.seed, 5])          # dropout: decided by the run's seed
    data = text_ids(inputs["data"], tok, model.config.block_size)
    objective = DistillObjective(model, teacher, data, batch_size=train_cfg.batch_size, seed=train_cfg.seed,
                                 eval_iters=train_cfg.eval_iters, cfg=cfg, tokenizer=tok)
    return objective, tok


# a short, gentle run: the model already knows the language, it learns the format and the task
SFT = Stage("sft", SFTConfig, build=build_sft, skip=("sample_tokens", "eval_iters"),
            defaults=dict(batch_size=16, max_iters=300, lr=5e-4, min_lr=5e-5, warmup_iters=20, weight_decay=0.0,
                          eval_interval=100, checkpoint_interval=100))

REWARD = Stage("reward", RewardConfig, build=build_reward, rows_per_example=2,
               defaults=dict(lr=1e-4, min_lr=1e-5, warmup_iters=20, max_iters=400, batch_size=16, weight_decay=0.0,
                             eval_interval=100, checkpoint_interval=100, sample_tokens=0))

DPO = Stage("dpo", DPOConfig, build=build_dpo, reference=True, rows_per_example=2,
            defaults=dict(lr=5e-5, min_lr=5e-6, warmup_iters=20, max_iters=300, batch_size=16, weight_decay=0.0,
                          eval_interval=100, checkpoint_interval=100, sample_tokens=0))

PPO = rollout_stage("ppo", PPOConfig, PPOObjective)

GRPO = rollout_stage("grpo", GRPOConfig, GRPOObjective)

# a student trained from a teacher on plain text: pre-training's pace, no samples printed
DISTILL = Stage("distill", DistillConfig, build=build_distill, inputs=("data",), skip=("sample_tokens",),
                open_start=open_student, reopen_start=reopen_student, more_memory=teacher_memory, input_ext="txt",
                defaults=dict(max_iters=300, eval_interval=100, checkpoint_interval=100))
