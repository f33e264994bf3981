"""``zerollm train``: train a GPT on a text file (or a prepared folder), with crash-safe checkpoints.

    zerollm train --preset shakespeare-cpu --data shakespeare.txt --out runs/shakespeare
    zerollm train --out runs/shakespeare --resume            # continue after a stop or a crash
    zerollm train --preset tang --n-embd 512 --dry-run       # what it would build, and its memory
    zerollm train --preset tang --show-config                # every setting, and where it comes from

Every field of GPTConfig and TrainConfig is a flag (--n-layer, --lr, ...) whose values are checked
against the field's declared range (zerollm.argtypes); booleans come in pairs (--bias/--no-bias).
Precedence: the dataclass defaults, then --preset (without one: presets.DEFAULT_PRESET, a small model
that trains on a CPU, never GPTConfig's GPT-2-size defaults), then the flags you give.

Before anything is written the run is planned (zerollm.commands.train_plan) and its memory checked
(zerollm.budget). The run directory is locked while training (zerollm.lock): a second writer stops
at once, readers (sample, eval) are not affected.
"""

import argparse
import contextlib
import dataclasses
import os
import sys

import numpy as np

from zerollm import budget, dist
from zerollm.argtypes import field_kind, field_range, undeclared_range
from zerollm.commands.train_plan import make_plan, print_config, print_plan
from zerollm.config import GPTConfig
from zerollm.engine import add_engine_argument, apply_engine_argument, get_engine
from zerollm.errors import ZeroLLMError
from zerollm.lock import run_directory
from zerollm.memory import keep_freed_memory
from zerollm.runlog import JsonlLog, plot_expert_load, plot_losses
from zerollm.threads import add_threads_argument, limit_threads
from zerollm.presets import DEFAULT_PRESET, MODEL_FIELDS, PRESETS, build_configs, preset_values
from zerollm.train import TrainConfig, TrainingInterrupted, fit, lm_trainer
from zerollm.training.outlets import closed_pipes_tolerated

CHOICES = {"norm": ("layernorm", "rmsnorm"), "pos": ("learned", "sinusoidal", "rope"),
           "mlp": ("gelu", "swiglu"), "gelu": ("tanh", "erf"), "attn_impl": ("naive", "flash"),
           "dtype": ("float32", "float64"), "tokenizer": ("byte", "char", "bpe")}


def _flag_type(cls, field):
    """The argparse type of a field: its declared Range for numbers (zerollm.argtypes), else str.
    A numeric field without one still gets a safe range (finite, >= 0); tests/test_robust_cli.py
    fails until its real range is declared."""
    kind = field_kind(field)
    if kind in (int, float):
        return field_range(cls, field) or undeclared_range(kind)
    return kind


def add_config_flags(parser, cls, skip=(), defaults=None):
    """One flag per dataclass field; default None so that only the flags given override anything.
    A field's metadata may give "choices", "help" and "metavar" (dataclasses.field(metadata=...)).
    ``defaults``: {field: value} shown in the help instead of the dataclass's (a command's own defaults)."""
    group = parser.add_argument_group(f"{cls.__name__} fields")
    for field in dataclasses.fields(cls):
        if field.name in skip:
            continue
        flag = "--" + field.name.replace("_", "-")
        kind = field_kind(field)
        default = field.default if field.default is not dataclasses.MISSING else None
        default = (defaults or {}).get(field.name, default)
        about = field.metadata.get("help", "")
        if "(default" not in about:                  # a help text may say its default in its own words
            about = f"{about} (default {default})" if about else f"(default {default})"
        if kind is bool:
            group.add_argument(flag, dest=field.name, action=argparse.BooleanOptionalAction, default=None,
                               help=about)
            continue
        flag_type = _flag_type(cls, field)
        choices = field.metadata.get("choices") or CHOICES.get(field.name)
        scope = f"; {flag_type.describe()}" if hasattr(flag_type, "describe") else ""
        group.add_argument(flag, dest=field.name, type=flag_type, choices=choices, default=None,
                           metavar=None if choices else field.metadata.get("metavar", kind.__name__.upper()),
                           help=f"{about[:-1]}{scope})")


def add_arguments(p):
    p.add_argument("--data", metavar="FILE|DIR|NAME",
                   help="a UTF-8 text file (prepared on the fly into OUT/data), a folder from 'zerollm prepare', "
                        "or a corpus that ships with zerollm: shakespeare, tang (default: the preset's corpus)")
    p.add_argument("--out", metavar="DIR", help="run directory: log.jsonl, checkpoints, loss.png "
                   "(default: runs/<preset or 'run'>)")
    p.add_argument("--preset", choices=sorted(PRESETS),
                   help=f"a named configuration; flags override it (default: {DEFAULT_PRESET}'s values; "
                        "each preset's values are listed at the end)")
    p.add_argument("--resume", action="store_true", help="continue from the last checkpoint in --out")
    p.add_argument("--dry-run", action="store_true",
                   help="print the model, the data and the memory estimate of a training step, then stop "
                        "(nothing is written)")
    p.add_argument("--show-config", action="store_true",
                   help="print every setting of the run (preset + flags, or the checkpoint's on --resume) "
                        "and where each comes from, then stop (nothing is written)")
    budget.add_force_argument(p)
    p.add_argument("--no-progress", action="store_true", help="no progress bar (e.g. in logs)")
    add_threads_argument(p, data_parallel=True)
    add_engine_argument(p, training=True)
    shown = preset_values(None)
    add_config_flags(p, GPTConfig, skip={"vocab_size"}, defaults=shown)
    add_config_flags(p, TrainConfig, defaults=shown)
    p.formatter_class = argparse.RawDescriptionHelpFormatter
    p.epilog = preset_table()


def preset_table():
    """The values each preset sets, one row per field (the --help epilog)."""
    names = sorted(PRESETS)
    fields = sorted({f for values in PRESETS.values() for f in values})
    width = max(len(f) for f in fields) + 2
    col = max(len(n) for n in names) + 2                     # every column as wide as the longest name, plus 2
    rows = [f"{'preset values':<{width}}" + "".join(f"{n:>{col}}" for n in names)]
    for f in fields:
        rows.append(f"  {f:<{width - 2}}" + "".join(f"{PRESETS[n].get(f, '-')!s:>{col}}" for n in names))
    return "\n".join(rows) + (f"\n(no --preset: {DEFAULT_PRESET}'s values; '-' = the default shown above. "
                              "zerollm train --preset NAME --show-config prints one in full.)")


def _overrides(args):
    names = MODEL_FIELDS | {f.name for f in dataclasses.fields(TrainConfig)}
    return {name: getattr(args, name) for name in names if getattr(args, name, None) is not None}


# ----------------------------------------------------------------------------
# data

def _prepared_dir(plan, run_dir, force=False):
    """The prepared-data folder to train on, preparing the plan's text file into RUN/data when needed."""
    if plan.prepared:
        return plan.data
    from zerollm.data import prepare
    target = os.path.join(run_dir, "data")
    t = plan.train_cfg
    print(f"preparing {plan.data} with the {t.tokenizer} tokenizer into {target} ...", file=sys.stderr)
    prepare(plan.data, target, tokenizer=t.tokenizer, vocab_size=t.vocab_size, block_size=plan.model_cfg.block_size,
            force=force)
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
    apply_engine_argument(args)     # --engine numpy|fast (zerollm.engine)
    world = dist.world()
    run_dir = args.out or os.path.join("runs", args.preset or "run")
    overrides = _overrides(args)
    if args.dry_run or args.show_config:
        plan = make_plan(args, run_dir, overrides, world)
        if world.is_main:
            print_config(plan, run_dir, args.preset) if args.show_config else print_plan(plan, run_dir)
        if args.dry_run:
            budget.require(plan.estimate, force=args.force)
        return 0
    with locked_run_dir(run_dir, world) as started:     # one writer at a time; a second stops here
        trainer = _setup(args, run_dir, overrides, world)
        started()                                       # from here on the run directory is kept
        return train_and_report(trainer, run_dir, "train", resumed=args.resume, progress=not args.no_progress,
                                blas_threads=args.threads)


@contextlib.contextmanager
def locked_run_dir(run_dir, world):
    """Rank 0 (the one process that writes) holds the run directory's lock (zerollm.lock.run_directory);
    under MPI the other ranks learn at once whether it got it, and stop with it if not. Yields started()."""
    with contextlib.ExitStack() as stack:
        started, failure = (lambda: None), None
        if world.is_main:
            try:
                started = stack.enter_context(run_directory(run_dir))
            except ZeroLLMError as err:
                failure = err
        if world.comm is not None:         # all ranks fail together, as for a bad command line
            message = world.comm.allgather(None if failure is None else str(failure))[0]
            failure = failure or (ZeroLLMError(message) if message else None)
        if failure is not None:
            raise failure
        yield started


def _setup(args, run_dir, overrides, world):
    """Plan, check the memory, prepare the data (rank 0), build (or restore) the trainer."""
    plan = make_plan(args, run_dir, overrides, world)
    if not args.resume:
        from zerollm.checkpoint import latest_checkpoint
        if latest_checkpoint(run_dir):
            raise ZeroLLMError(f"{run_dir} already holds a training run; continue it with --resume, "
                               "or choose another --out")
    dist.check_divisible(plan.train_cfg.batch_size, world)
    budget.require(plan.estimate, force=args.force)      # before preparing data or building anything
    folder = None
    if world.is_main:               # one process prepares the data; the others wait and then read it
        folder = _prepared_dir(plan, run_dir, args.force)
    folder = world.allgather(folder)[0]
    train, val, tok, tok_path = _load_data(folder, plan.train_cfg.tokenizer)
    model_cfg, train_cfg = plan.model_cfg, plan.train_cfg
    if not args.resume:
        model_cfg, train_cfg = build_configs(args.preset, plan.overrides, vocab_size=tok.vocab_size)
    trainer = lm_trainer(model_cfg, train_cfg, train, val, threads=args.threads or 1, tokenizer=tok,
                         tokenizer_path=tok_path, world=world)
    if args.resume:
        trainer.restore(plan.ckpt)
    say(f"model: {trainer.model.num_params():,} parameters ({model_cfg.n_layer} layers, {model_cfg.n_head} heads, "
        f"{model_cfg.n_embd} dims, block {model_cfg.block_size}, vocab {model_cfg.vocab_size})"
        + _moe_line(trainer.model))
    return trainer


def say(message):
    """A line on stderr, from rank 0 only (zerollm.dist)."""
    if dist.world().is_main:
        print(message, file=sys.stderr)


def train_and_report(trainer, run_dir, name, *, resumed, progress, blas_threads):
    """Run fit() with log.jsonl, Ctrl-C and the final plot: what `zerollm train` and every post-training
    command do once their Trainer is built. Returns the exit code. Output to a pipe nobody reads any more
    (``| tee log`` ended by the same Ctrl-C) is dropped, never an error (zerollm.training.outlets)."""
    with closed_pipes_tolerated():
        return _train_and_report(trainer, run_dir, name, resumed=resumed, progress=progress,
                                 blas_threads=blas_threads)


def _train_and_report(trainer, run_dir, name, *, resumed, progress, blas_threads):
    main = trainer.world.is_main
    log_path = os.path.join(run_dir, "log.jsonl")
    if main:
        os.makedirs(run_dir, exist_ok=True)
    log = JsonlLog(log_path, keep_before=trainer.iter if resumed else None) if main else None
    say(f"run dir: {run_dir}; {trainer.objective.describe()}; step {trainer.iter} of {trainer.cfg.max_iters}"
        + (f"; {trainer.world.size} ranks x {trainer.threads} threads" if trainer.world.size > 1 else "")
        + f"; {get_engine()} engine")
    try:
        # with several threads (or ranks) each shard runs single-threaded BLAS (see zerollm.parallel)
        one_each = trainer.threads > 1 or trainer.world.size > 1
        with limit_threads(1 if one_each else blas_threads):
            best = fit(trainer, run_dir, log=log, progress=progress)
    except TrainingInterrupted as stop:
        say(f"zerollm {name}: {stop}")
        return 130
    except KeyboardInterrupt:                  # a second Ctrl-C (zerollm.train.StopRequests)
        say(f"zerollm {name}: stopped at once at step {trainer.iter}; the last checkpoint in {run_dir} is kept: "
            "continue with --resume")
        return 130
    finally:
        if log is not None:
            log.close()
    if main:
        shown = f", best val loss {best:.4f}" if np.isfinite(best) else ""
        print(f"done: step {trainer.iter}{shown}; checkpoint in {run_dir}")
        if trainer.scaler is not None:
            print(f"fp16 loss scale {float(trainer.scaler.scale):g}; {trainer.scaler.skipped} steps skipped on overflow")
        _maybe_plot(log_path, run_dir, trainer.model.config, trainer.objective.kind)
    return 0


def _moe_line(model):
    cfg = model.config
    if not cfg.n_expert:
        return ""
    return (f"; mixture of experts in blocks {cfg.moe_layers}: top-{cfg.n_expert_active} of {cfg.n_expert} experts"
            f"{f' + {cfg.n_shared_expert} shared' if cfg.n_shared_expert else ''}, "
            f"{model.num_params(active=True):,} parameters active per token")


def _maybe_plot(log_path, run_dir, model_cfg, kind):
    png = os.path.join(run_dir, "loss.png")
    try:
        from matplotlib import font_manager
        from zerollm.i18n import default_lang
        from zerollm.teach.heads import find_fonts
        families, _ = find_fonts(font_manager)     # Chinese labels only where a CJK font can draw them
        plot_losses(log_path, png, kind=kind, lang=default_lang(), families=families if len(families) > 1 else None)
        print(f"loss curve: {png}")
        if model_cfg.n_expert:
            png = os.path.join(run_dir, "expert_load.png")
            if plot_expert_load(log_path, png, model_cfg.moe_layers):
                print(f"expert load: {png}")
    except ImportError:
        print('plots skipped: matplotlib is not installed (pip install "zerollm[viz]")', file=sys.stderr)
