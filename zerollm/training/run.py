"""The one run recipe of ``zerollm train`` and every post-training stage (``run_recipe``):

    plan -> --dry-run: print it, write nothing
         -> lock the run directory -> a fresh run or a resumed one -> the Trainer -> fit() -> the report

A command supplies what differs as a RunCommand: zerollm.cli.commands.train its plan, its data and the
language-modelling objective; zerollm.align.stage a stage's inputs, starting model and objective. The
recipe does the rest, once: one writer per run directory, fit() with log.jsonl, Ctrl-C answered with a
checkpoint and exit code 130, the final line and plots.
"""

import contextlib
import os
import sys
from dataclasses import dataclass

import numpy as np

from zerollm.engine import get_engine
from zerollm.engine.memory import keep_freed_memory
from zerollm.engine.threads import limit_threads
from zerollm.io.errors import ZeroLLMError
from zerollm.io.lock import run_directory
from zerollm.training import dist
from zerollm.training.outlets import closed_pipes_tolerated
from zerollm.io.i18n import default_lang
from zerollm.training.runlog import JsonlLog, find_fonts, import_font_manager, plot_expert_load, plot_losses
from zerollm.training.trainer import Trainer, TrainingInterrupted, fit


# ----------------------------------------------------------------------------
# the recipe

@dataclass(frozen=True)
class Setup:
    """What a command's fresh() or resume() hands the recipe to build the Trainer from."""
    objective: object          # zerollm.training.objective.Objective, its model built (and adapted, with LoRA)
    train_cfg: object          # zerollm.training.trainer.TrainConfig
    tokenizer_path: str        # the tokenizer.json every checkpoint records
    ckpt: object = None        # on --resume: the Checkpoint the Trainer is restored from


class RunCommand:
    """What a command supplies to the recipe: its name (as its messages say it), its parsed flags (the
    recipe reads resume, threads and no_progress), its run directory, and the steps below."""

    def __init__(self, name, args, run_dir):
        self.name, self.args, self.run_dir = name, args, run_dir

    def dry(self):
        """Does this command only print its plan (--dry-run)?"""
        return getattr(self.args, "dry_run", False)

    def dry_run(self):
        """Plan, print the plan; write nothing."""
        raise NotImplementedError

    def check_out(self):
        """The run directory's checks that come before the lock creates it."""

    def fresh(self, world):
        """A new run, under the lock: plan, check, build the objective -> Setup."""
        raise NotImplementedError

    def resume(self, world):
        """--resume, under the lock: the last checkpoint and the objective it was trained with -> Setup."""
        raise NotImplementedError

    def ready(self, trainer):
        """Once the Trainer is built (and restored): a command's own line about it, say."""


def run_recipe(command):
    """Run ``command`` (a RunCommand) the way every training command runs -> the exit code.

    1. --dry-run: plan and print, nothing is written
    2. lock the run directory: a second writer stops here (zerollm.io.lock)
    3. the command's fresh run, or on --resume its checkpoint's
    4. the Trainer, restored from that checkpoint on --resume
    5. fit() with log.jsonl, Ctrl-C and the final report (train_and_report)
    """
    args = command.args
    keep_freed_memory()            # reuse freed activation memory step after step (zerollm.engine.memory)
    if command.dry():
        command.dry_run()
        return 0
    command.check_out()
    world = dist.world()
    with locked_run_dir(command.run_dir, world) as started:
        setup = command.resume(world) if args.resume else command.fresh(world)
        trainer = Trainer(setup.objective, setup.train_cfg, threads=args.threads or 1,
                          tokenizer_path=setup.tokenizer_path, world=world)
        if setup.ckpt is not None:
            trainer.restore(setup.ckpt)
        command.ready(trainer)
        started()                  # from here on the run directory is kept; a run that failed before leaves nothing
        return train_and_report(trainer, command.run_dir, command.name, resumed=args.resume,
                                progress=not args.no_progress, blas_threads=args.threads)


# ----------------------------------------------------------------------------
# its parts

@contextlib.contextmanager
def locked_run_dir(run_dir, world):
    """Rank 0 (the one process that writes) holds the run directory's lock (zerollm.io.lock.run_directory);
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


def say(message):
    """A line on stderr, from rank 0 only (zerollm.training.dist)."""
    if dist.world().is_main:
        print(message, file=sys.stderr)


def train_and_report(trainer, run_dir, name, *, resumed, progress, blas_threads):
    """Run fit() with log.jsonl, Ctrl-C and the final plot: the recipe's last step, once the Trainer is
    built. Returns the exit code. Output to a pipe nobody reads any more
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
        # with several threads (or ranks) each shard runs single-threaded BLAS (see zerollm.training.parallel)
        one_each = trainer.threads > 1 or trainer.world.size > 1
        with limit_threads(1 if one_each else blas_threads):
            best = fit(trainer, run_dir, log=log, progress=progress)
    except TrainingInterrupted as stop:
        say(f"zerollm {name}: {stop}")
        return 130
    except KeyboardInterrupt:                  # a second Ctrl-C (zerollm.training.trainer.StopRequests)
        say(f"zerollm {name}: stopped at once at step {trainer.iter}; " + _what_is_kept(run_dir, resumed))
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


def _what_is_kept(run_dir, resumed):
    """After a stop that saved nothing: the checkpoint there is to resume from, if there is one."""
    from zerollm.training.checkpoint import latest_checkpoint
    if latest_checkpoint(run_dir) is not None:
        return f"the last checkpoint in {run_dir} is kept: continue with --resume"
    return ("no checkpoint was saved yet, so there is nothing to resume: run the command again"
            + (" without --resume" if resumed else ""))


def _moe_line(model):
    cfg = model.config
    if not cfg.n_expert:
        return ""
    return (f"; mixture of experts in blocks {cfg.moe_layers}: top-{cfg.n_expert_active} of {cfg.n_expert} experts"
            f"{f' + {cfg.n_shared_expert} shared' if cfg.n_shared_expert else ''}, "
            f"{model.num_params(active=True):,} parameters active per token")


PLOTS_ENV = "ZEROLLM_PLOTS"      # 0: no loss.png / expert_load.png (sweeps, and the test suite: ~0.8 s CPU a run)


def _maybe_plot(log_path, run_dir, model_cfg, kind):
    if os.environ.get(PLOTS_ENV, "1").strip() == "0":
        print(f"plots skipped: {PLOTS_ENV}=0 (log.jsonl holds every number)")
        return
    png = os.path.join(run_dir, "loss.png")
    try:
        lang = default_lang()                       # 中文 labels in a Chinese locale, when a CJK font is there
        families = find_fonts(import_font_manager())[0] if lang == "zh" else None
        plot_losses(log_path, png, kind=kind, lang=lang, families=families if families and len(families) > 1 else None)
        print(f"loss curve: {png}")
        if model_cfg.n_expert:
            png = os.path.join(run_dir, "expert_load.png")
            if plot_expert_load(log_path, png, model_cfg.moe_layers):
                print(f"expert load: {png}")
    except ImportError:
        print('plots skipped: matplotlib is not installed (pip install "zerollm[viz]")', file=sys.stderr)
    except (ValueError, OverflowError) as err:      # numbers near float64's limit: matplotlib cannot place ticks
        print(f"plots skipped: the log holds numbers matplotlib cannot draw ({err}); the run itself is saved",
              file=sys.stderr)
