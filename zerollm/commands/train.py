"""``zerollm train``: train a GPT on a text file (or a prepared folder), with crash-safe checkpoints.

    zerollm train --preset shakespeare-cpu --data shakespeare.txt --out runs/shakespeare
    zerollm train --out runs/shakespeare --resume            # continue after a stop or a crash

Every field of GPTConfig and TrainConfig is a flag (--n-layer, --lr, ...); booleans come in pairs
(--bias/--no-bias). Precedence: the dataclass defaults, then --preset, then the flags you give.
"""

import argparse
import dataclasses
import os
import sys
import typing

import numpy as np

from zerollm import corpora, dist
from zerollm.config import GPTConfig
from zerollm.errors import ZeroLLMError
from zerollm.memory import keep_freed_memory
from zerollm.runlog import JsonlLog, plot_losses
from zerollm.threads import add_threads_argument, limit_threads
from zerollm.presets import MODEL_FIELDS, PRESET_CORPUS, PRESETS, build_configs
from zerollm.train import TrainConfig, TrainingInterrupted, configs_from_checkpoint, fit, lm_trainer, resume_point

CHOICES = {"norm": ("layernorm", "rmsnorm"), "pos": ("learned", "sinusoidal", "rope"),
           "mlp": ("gelu", "swiglu"), "gelu": ("tanh", "erf"), "attn_impl": ("naive", "flash"),
           "dtype": ("float32", "float64"), "tokenizer": ("byte", "char", "bpe")}


def _flag_type(field):
    """int / float / str from the field's annotation (``int | None`` counts as int)."""
    args = [a for a in typing.get_args(field.type) if a is not type(None)]
    return args[0] if args else field.type


def add_config_flags(parser, cls, skip=()):
    """One flag per dataclass field; default None so that only the flags given override anything.
    A field's metadata may give "choices" and "help" (dataclasses.field(metadata=...))."""
    group = parser.add_argument_group(f"{cls.__name__} fields")
    for field in dataclasses.fields(cls):
        if field.name in skip:
            continue
        flag = "--" + field.name.replace("_", "-")
        kind = _flag_type(field)
        default = field.default if field.default is not dataclasses.MISSING else None
        about = field.metadata.get("help", "")
        about = f"{about} (default {default})" if about else f"(default {default})"
        if kind is bool:
            group.add_argument(flag, dest=field.name, action=argparse.BooleanOptionalAction, default=None,
                               help=about)
        else:
            choices = field.metadata.get("choices") or CHOICES.get(field.name)
            group.add_argument(flag, dest=field.name, type=kind, choices=choices, default=None,
                               metavar=None if choices else kind.__name__.upper(), help=about)


def add_arguments(p):
    p.add_argument("--data", metavar="FILE|DIR|NAME",
                   help="a UTF-8 text file (prepared on the fly into OUT/data), a folder from 'zerollm prepare', "
                        "or a corpus that ships with zerollm: shakespeare, tang (default: the preset's corpus)")
    p.add_argument("--out", metavar="DIR", help="run directory: log.jsonl, checkpoints, loss.png "
                   "(default: runs/<preset or 'run'>)")
    p.add_argument("--preset", choices=sorted(PRESETS), help="a named configuration; flags override it")
    p.add_argument("--resume", action="store_true", help="continue from the last checkpoint in --out")
    p.add_argument("--no-progress", action="store_true", help="no progress bar (e.g. in logs)")
    add_threads_argument(p, data_parallel=True)
    add_config_flags(p, GPTConfig, skip={"vocab_size"})
    add_config_flags(p, TrainConfig)


def _overrides(args):
    names = MODEL_FIELDS | {f.name for f in dataclasses.fields(TrainConfig)}
    return {name: getattr(args, name) for name in names if getattr(args, name, None) is not None}


# ----------------------------------------------------------------------------
# data

def _prepared_dir(args, run_dir, tokenizer, vocab_size, block_size):
    """The prepared-data folder to train on, preparing a text file into RUN/data when needed."""
    from zerollm.data import prepare
    data = args.data
    if data is None and os.path.isfile(os.path.join(run_dir, "data", "meta.json")):
        return os.path.join(run_dir, "data")
    if data is None and args.preset in PRESET_CORPUS:
        data = PRESET_CORPUS[args.preset]
    if data is None:
        raise ZeroLLMError("give --data FILE (a text file), --data DIR (from 'zerollm prepare') or the name of "
                           f"a shipped corpus ({', '.join(corpora.CORPORA)})")
    if os.path.isdir(data):
        return data
    if not os.path.isfile(data) and data in corpora.CORPORA:
        data = str(corpora.path(data))                  # a corpus that ships with zerollm
    if not os.path.isfile(data):
        raise ZeroLLMError(f"--data: no such file or folder: {data} (shipped corpora: "
                           f"{', '.join(corpora.CORPORA)})")
    target = os.path.join(run_dir, "data")
    print(f"preparing {data} with the {tokenizer} tokenizer into {target} ...", file=sys.stderr)
    prepare(data, target, tokenizer=tokenizer, vocab_size=vocab_size, block_size=block_size)
    return target


def _load_data(folder, tokenizer_kind):
    from zerollm.data import load_prepared
    train, val, meta, tok = load_prepared(folder)
    if meta["tokenizer"] != tokenizer_kind:
        raise ZeroLLMError(f"{folder} was prepared with the {meta['tokenizer']} tokenizer but this run asks "
                           f"for {tokenizer_kind}; pass --tokenizer {meta['tokenizer']} or prepare again")
    return train, val, tok, os.path.join(folder, "tokenizer.json")


# ----------------------------------------------------------------------------

def run(args):
    keep_freed_memory()             # reuse freed activation memory step after step (zerollm.memory)
    world = dist.world()
    run_dir = args.out or os.path.join("runs", args.preset or "run")
    overrides = _overrides(args)
    if args.resume:
        ckpt = resume_point(run_dir)
        model_cfg, train_cfg, ignored = configs_from_checkpoint(ckpt, overrides)
        if ignored:
            say(f"note: on --resume the saved configuration is used; ignoring {', '.join(ignored)}")
    else:
        from zerollm.checkpoint import latest_checkpoint
        if os.path.isdir(run_dir) and latest_checkpoint(run_dir):
            raise ZeroLLMError(f"{run_dir} already holds a training run; continue it with --resume, "
                               "or choose another --out")
        model_cfg, train_cfg = build_configs(args.preset, overrides)     # validates before any work
    dist.check_divisible(train_cfg.batch_size, world)
    folder = None
    if world.is_main:               # one process prepares the data; the others wait and then read it
        folder = _prepared_dir(args, run_dir, train_cfg.tokenizer, train_cfg.vocab_size, model_cfg.block_size)
    folder = world.allgather(folder)[0]
    train, val, tok, tok_path = _load_data(folder, train_cfg.tokenizer)
    if not args.resume:
        model_cfg, train_cfg = build_configs(args.preset, overrides, vocab_size=tok.vocab_size)
    threads = args.threads or 1
    trainer = lm_trainer(model_cfg, train_cfg, train, val, threads=threads, tokenizer=tok, tokenizer_path=tok_path,
                         world=world)
    if args.resume:
        trainer.restore(ckpt)
    say(f"model: {trainer.model.num_params():,} parameters ({model_cfg.n_layer} layers, {model_cfg.n_head} heads, "
        f"{model_cfg.n_embd} dims, block {model_cfg.block_size}, vocab {model_cfg.vocab_size})")
    return train_and_report(trainer, run_dir, "train", resumed=args.resume, progress=not args.no_progress,
                            blas_threads=args.threads)


def say(message):
    """A line on stderr, from rank 0 only (zerollm.dist)."""
    if dist.world().is_main:
        print(message, file=sys.stderr)


def train_and_report(trainer, run_dir, name, *, resumed, progress, blas_threads):
    """Run fit() with log.jsonl, Ctrl-C and the final plot: what `zerollm train` and every post-training
    command do once their Trainer is built. Returns the exit code."""
    main = trainer.world.is_main
    log_path = os.path.join(run_dir, "log.jsonl")
    if main:
        os.makedirs(run_dir, exist_ok=True)
    log = JsonlLog(log_path, keep_before=trainer.iter if resumed else None) if main else None
    say(f"run dir: {run_dir}; {trainer.objective.describe()}; step {trainer.iter} of {trainer.cfg.max_iters}"
        + (f"; {trainer.world.size} ranks x {trainer.threads} threads" if trainer.world.size > 1 else ""))
    try:
        # with several threads (or ranks) each shard runs single-threaded BLAS (see zerollm.parallel)
        one_each = trainer.threads > 1 or trainer.world.size > 1
        with limit_threads(1 if one_each else blas_threads):
            best = fit(trainer, run_dir, log=log, progress=progress)
    except TrainingInterrupted as stop:
        say(f"zerollm {name}: {stop}")
        return 130
    finally:
        if log is not None:
            log.close()
    if main:
        shown = f", best val loss {best:.4f}" if np.isfinite(best) else ""
        print(f"done: step {trainer.iter}{shown}; checkpoint in {run_dir}")
        _maybe_plot(log_path, os.path.join(run_dir, "loss.png"))
    return 0


def _maybe_plot(log_path, png_path):
    try:
        plot_losses(log_path, png_path)
    except ImportError:
        print('loss curve skipped: matplotlib is not installed (pip install "zerollm[viz]")', file=sys.stderr)
        return
    print(f"loss curve: {png_path}")
