"""``zerollm sft``: supervised fine-tuning of a checkpoint (or a Hugging Face model) on prompt/completion data.

    zerollm sft --init runs/tang --data acrostic-train.jsonl --eval-data acrostic-heldout.jsonl \\
                --task acrostic --out runs/tang-sft
    zerollm sft --out runs/tang-sft --resume                 # continue after Ctrl-C or a crash

The tokenizer gets the chat template's special tokens (and, for a char tokenizer, any character of the
data it lacks), the model the matching new embedding rows (zerollm.chat); the run directory and every
checkpoint hold that extended tokenizer, so ``zerollm sample`` and ``zerollm tasks eval`` work on it.
Every TrainConfig field is a flag, with SFT's own defaults (SFT_DEFAULTS); the SFT settings (SFTConfig:
--data, --eval-data, --task, --curriculum, ...) are flags too. On --resume the saved settings are used.
"""

import dataclasses
import hashlib
import os
import sys

import numpy as np

from zerollm.commands.train import _maybe_plot, add_config_flags
from zerollm.errors import ZeroLLMError
from zerollm.memory import keep_freed_memory
from zerollm.objectives.sft import SFTConfig
from zerollm.threads import add_threads_argument, limit_threads
from zerollm.train import TrainConfig

# a short, gentle run: the model already knows the language, it only learns the format and the task
SFT_DEFAULTS = dict(batch_size=16, max_iters=300, lr=5e-4, min_lr=5e-5, warmup_iters=20, weight_decay=0.0,
                    eval_interval=100, checkpoint_interval=100)
SKIP = {"tokenizer", "vocab_size", "sample_tokens", "eval_iters"}      # pre-training only


def add_arguments(p):
    src = p.add_mutually_exclusive_group()
    src.add_argument("--init", metavar="DIR", help="start from a zerollm training run, checkpoint or model directory")
    src.add_argument("--hf", metavar="DIR", help="start from a Hugging Face model directory (GPT-2 / Llama)")
    p.add_argument("--out", required=True, metavar="DIR", help="run directory: log.jsonl, checkpoints, tokenizer.json")
    p.add_argument("--resume", action="store_true", help="continue from the last checkpoint in --out")
    p.add_argument("--no-progress", action="store_true", help="no progress bar (e.g. in logs)")
    add_threads_argument(p, data_parallel=True)
    add_config_flags(p, SFTConfig)
    add_config_flags(p, TrainConfig, skip=SKIP, defaults=SFT_DEFAULTS)


def _given(args, cls, skip=()):
    return {f.name: getattr(args, f.name) for f in dataclasses.fields(cls)
            if f.name not in skip and getattr(args, f.name, None) is not None}


def run(args):
    from zerollm.runlog import JsonlLog
    from zerollm.train import TrainingInterrupted, fit
    keep_freed_memory()
    threads = args.threads or 1
    trainer = _resume(args, threads) if args.resume else _start(args, threads)
    log_path = os.path.join(args.out, "log.jsonl")
    log = JsonlLog(log_path, keep_before=trainer.iter if args.resume else None)
    cfg = trainer.model_cfg
    print(f"sft: {trainer.model.num_params():,} parameters (vocab {cfg.vocab_size}, block {cfg.block_size}), "
          f"{len(trainer.objective.train)} training examples; run dir {args.out}; starting at step {trainer.iter} "
          f"of {trainer.cfg.max_iters}", file=sys.stderr)
    try:
        with limit_threads(1 if threads > 1 else args.threads):
            best = fit(trainer, args.out, log=log, progress=not args.no_progress)
    except TrainingInterrupted as stop:
        print(f"zerollm sft: {stop}", file=sys.stderr)
        return 130
    finally:
        log.close()
    print(f"done: step {trainer.iter}, best heldout loss {best:.4f}; checkpoint in {args.out}")
    _maybe_plot(log_path, os.path.join(args.out, "loss.png"))
    return 0


# ----------------------------------------------------------------------------
# a new run

def _start(args, threads):
    from zerollm import chat
    from zerollm.checkpoint import latest_checkpoint
    from zerollm.formats import read_sft
    from zerollm.train import Trainer
    if latest_checkpoint(args.out):
        raise ZeroLLMError(f"{args.out} already holds a training run; continue it with --resume, or choose another --out")
    if not (args.init or args.hf):
        raise ZeroLLMError("give the model to fine-tune: --init DIR (a zerollm run or model) or --hf DIR")
    cfg = SFTConfig(**_given(args, SFTConfig))
    if cfg.data is None:
        raise ZeroLLMError("give --data FILE: JSONL with prompt/completion or messages (see 'zerollm tasks make')")
    train_cfg = TrainConfig(**{**SFT_DEFAULTS, **_given(args, TrainConfig, SKIP)})
    task = _task(cfg.task)
    rows, heldout = read_sft(cfg.data), read_sft(cfg.eval_data) if cfg.eval_data else []
    model, tok = _base_model(args)
    tok = chat.prepare_tokenizer(tok, [t for row in rows + heldout for t in chat.example_texts(row)])
    model = chat.resize_model(model, max(model.config.vocab_size, tok.vocab_size),
                              np.random.default_rng([train_cfg.seed, 6]))
    model.rng = np.random.default_rng([train_cfg.seed, 5])           # dropout: decided by the run's seed
    cfg = dataclasses.replace(cfg, data=os.path.abspath(cfg.data),
                              eval_data=os.path.abspath(cfg.eval_data) if cfg.eval_data else None)
    saved = {"sft": dataclasses.asdict(cfg), "init": args.init, "hf": args.hf, "sha256": _hashes(cfg)}
    objective = _objective(model, tok, cfg, train_cfg, rows, heldout, task, saved)
    os.makedirs(args.out, exist_ok=True)                               # only now: every check has passed
    tok_path = os.path.join(args.out, "tokenizer.json")
    tok.save(tok_path)
    return Trainer(objective, train_cfg, threads=threads, tokenizer_path=tok_path)


def _base_model(args):
    from zerollm import hf
    if args.hf:
        return hf.load(args.hf), hf.load_tokenizer_dir(args.hf)
    model, tok = hf.load_zerollm(args.init), hf.load_zerollm_tokenizer(args.init)
    if tok is None:
        raise ZeroLLMError(f"--init {args.init} has no tokenizer.json, so the data cannot be encoded")
    return model, tok


def _task(name):
    from zerollm.tasks import get_task
    return get_task(name) if name is not None else None


def _hashes(cfg):
    out = {}
    for path in (cfg.data, cfg.eval_data):
        if path is not None:
            with open(path, "rb") as f:
                out[path] = hashlib.sha256(f.read()).hexdigest()
    return out


def _objective(model, tok, cfg, train_cfg, rows, heldout, task, saved):
    from zerollm import chat
    from zerollm.objectives.sft import SFTObjective, fitting
    block = model.config.block_size
    train = fitting([chat.encode_example(tok, row) for row in rows], block, "training examples")
    held = fitting([chat.encode_example(tok, row) for row in heldout], block, "heldout examples") if heldout else []
    prompts = [row for row in heldout if "prompt" in row and len(chat.encode_prompt(tok, row["prompt"])) < block]
    return SFTObjective(model, tok, train, batch_size=train_cfg.batch_size, seed=train_cfg.seed, cfg=cfg,
                        heldout=held, prompts=prompts, task=task, extra_config=saved)


# ----------------------------------------------------------------------------
# resuming

def _resume(args, threads):
    from zerollm.config import GPTConfig
    from zerollm.formats import read_sft
    from zerollm.model import GPT
    from zerollm.tokenizers import load_tokenizer
    from zerollm.train import Trainer, configs_from_checkpoint, resume_point
    ckpt = resume_point(args.out)
    if ckpt.objective.get("kind") != "sft":
        raise ZeroLLMError(f"{args.out} is a {ckpt.objective.get('kind')!r} run, not an SFT run; resume it with its "
                           "own command")
    model_cfg, train_cfg, ignored = configs_from_checkpoint(ckpt, _given(args, TrainConfig, SKIP))
    ignored += sorted(_given(args, SFTConfig)) + (["init"] if args.init else []) + (["hf"] if args.hf else [])
    if ignored:
        print(f"note: on --resume the saved settings are used; ignoring {', '.join(ignored)}", file=sys.stderr)
    cfg = SFTConfig(**ckpt.objective["sft"])
    for path, digest in ckpt.objective.get("sha256", {}).items():
        if not os.path.isfile(path) or _hashes(dataclasses.replace(cfg, data=path, eval_data=None))[path] != digest:
            raise ZeroLLMError(f"{path} is missing or changed since this run started; resuming needs the same data")
    tok = load_tokenizer(ckpt.tokenizer_path)
    heldout = read_sft(cfg.eval_data) if cfg.eval_data else []
    model = GPT(GPTConfig.from_dict(ckpt.model_config), init=False)
    objective = _objective(model, tok, cfg, train_cfg, read_sft(cfg.data), heldout, _task(cfg.task), ckpt.objective)
    trainer = Trainer(objective, train_cfg, threads=threads, tokenizer_path=os.path.join(args.out, "tokenizer.json"))
    trainer.restore(ckpt)
    return trainer
