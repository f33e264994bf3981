"""``zerollm train``: train a GPT on a text file (or a prepared folder), with crash-safe checkpoints.

    zerollm train --preset shakespeare-cpu --data shakespeare.txt --out runs/shakespeare
    zerollm train --out runs/shakespeare --resume            # continue after a stop or a crash
    zerollm train --preset tang --n-embd 512 --dry-run       # what it would build, and its memory
    zerollm train --preset tang --show-config                # every setting, and where it comes from

Every field of GPTConfig and TrainConfig is a flag (--n-layer, --lr, ...) whose values are checked
against the field's declared range (zerollm.io.argtypes); booleans come in pairs (--bias/--no-bias).
Precedence: the dataclass defaults, then --preset (without one: presets.DEFAULT_PRESET, a small model
that trains on a CPU, never GPTConfig's GPT-2-size defaults), then the flags you give.

Before anything is written the run is planned (zerollm.training.plan) and its memory checked
(zerollm.model.budget). The run directory is locked while training (zerollm.io.lock): a second writer stops
at once, readers (sample, eval) are not affected.
"""

import argparse
import dataclasses
import os
import sys

from zerollm.model import budget

from zerollm.training import dist
from zerollm.training.plan import make_plan, print_config, print_plan
from zerollm.model.config import GPTConfig
from zerollm.engine import add_engine_argument, apply_engine_argument
from zerollm.io.errors import ZeroLLMError
from zerollm.engine.threads import add_threads_argument
from zerollm.training.presets import DEFAULT_PRESET, MODEL_FIELDS, PRESETS, build_configs, preset_values
from zerollm.training.flags import add_config_flags, add_lora_arguments
from zerollm.training.run import RunCommand, Setup, _moe_line, run_recipe, say
from zerollm.training.trainer import TrainConfig, lm_objective
from zerollm.tokenizers import tokenizer_file


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
    budget.add_force_argument(p, replaces="files in --out (log.jsonl, loss.png, latest.json)")
    p.add_argument("--no-progress", action="store_true", help="no progress bar (e.g. in logs)")
    add_threads_argument(p, data_parallel=True)
    add_engine_argument(p, training=True)
    add_lora_arguments(p)
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
    from zerollm.data.tokens import prepare
    target = os.path.join(run_dir, "data")
    t = plan.train_cfg
    def announce():         # only once the text is read and usable: bad data gets the error line alone
        print(f"preparing {plan.data} with the {t.tokenizer} tokenizer into {target} ...", file=sys.stderr)
    prepare(plan.data, target, tokenizer=t.tokenizer, vocab_size=t.vocab_size, block_size=plan.model_cfg.block_size,
            force=force, announce=announce)
    return target


# what a fresh run writes at the top of its --out (step-*/ and data/ are checked by their own rules)
RUN_FILES = ("log.jsonl", "loss.png", "expert_load.png", "latest.json")


def check_fresh_out(run_dir, force=False, data=None):
    """A new run's --out: not inside another run, a checkpoint, prepared data or a model directory, and not
    a folder holding a log.jsonl, loss.png, ... that someone else made (they would be replaced), unless
    ``force``; never one where the text it reads (``data``) is such a file, --force or not. A folder left by
    an earlier attempt that stopped before its first checkpoint (its log.jsonl is zerollm's) is started over."""
    from zerollm.io.outdir import check_inputs_apart, check_outside_runs, check_run_folder
    check_outside_runs(run_dir)
    check_inputs_apart(run_dir, RUN_FILES, [("--data", data)])     # RUN/data: prepare's own rule
    check_run_folder(run_dir, RUN_FILES + ("data",))
    present = [n for n in RUN_FILES if os.path.lexists(os.path.join(run_dir, n))]
    if present and not force and not _earlier_attempt(os.path.join(run_dir, "log.jsonl")):
        raise ZeroLLMError(f"--out {run_dir} already holds {', '.join(present)}, which this command did not create "
                           "and would replace; pass --force to replace them, or choose another --out")


def _earlier_attempt(log_path):
    """Is ``log_path`` a log.jsonl that zerollm wrote (empty, or step records with at most its last line cut
    short by a crash)?"""
    from zerollm.training.runlog import read_log
    if not os.path.isfile(log_path) or os.path.islink(log_path):
        return False
    if os.path.getsize(log_path) == 0:
        return True
    try:
        records, skipped = read_log(log_path, count_skipped=True)
    except OSError:
        return False
    return bool(records) and skipped <= 1 and all("step" in r for r in records)


def _load_data(folder, tokenizer_kind):
    from zerollm.data.tokens import load_prepared
    train, val, meta, tok = load_prepared(folder)
    if meta["tokenizer"] != tokenizer_kind:
        raise ZeroLLMError(f"{folder} was prepared with the {meta['tokenizer']} tokenizer but this run asks "
                           f"for {tokenizer_kind}; pass --tokenizer {meta['tokenizer']} or prepare again")
    return train, val, tok, tokenizer_file(folder)


# ----------------------------------------------------------------------------

def run(args):
    apply_engine_argument(args)     # --engine numpy|fast (zerollm.engine)
    return run_recipe(Pretraining(args))


class Pretraining(RunCommand):
    """``zerollm train`` in the one run recipe (zerollm.training.run): its plan (zerollm.training.plan), its
    data, prepared into RUN/data when it is a text file, and the language-modelling objective."""

    def __init__(self, args):
        super().__init__("train", args, args.out or os.path.join("runs", args.preset or "run"))
        self.overrides = _overrides(args)

    def dry(self):
        return self.args.dry_run or self.args.show_config

    def dry_run(self):
        args, world = self.args, dist.world()
        plan = make_plan(args, self.run_dir, self.overrides, world)
        if world.is_main:
            print_config(plan, self.run_dir, args.preset) if args.show_config else print_plan(plan, self.run_dir)
        if args.dry_run:
            budget.require(plan.estimate, force=args.force)

    def check_out(self):
        if os.path.lexists(self.run_dir) and not os.path.isdir(self.run_dir):     # before the lock makes the folder
            raise ZeroLLMError(f"--out {self.run_dir} is a file, not a folder; training writes a run directory "
                               "there: choose a new directory name")

    def fresh(self, world):
        """Plan, check the memory, prepare the data (rank 0), build the objective (and on --resume check it
        against the checkpoint's)."""
        args, run_dir = self.args, self.run_dir
        plan = make_plan(args, run_dir, self.overrides, world)
        if not args.resume:
            from zerollm.training.checkpoint import latest_checkpoint
            if latest_checkpoint(run_dir):
                raise ZeroLLMError(f"{run_dir} already holds a training run; continue it with --resume, "
                                   "or choose another --out")
            check_fresh_out(run_dir, force=args.force, data=plan.data)
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
        objective = lm_objective(model_cfg, train_cfg, train, val, tokenizer=tok, lora=plan.lora)
        if args.resume:
            _check_base(objective, plan.ckpt)
        return Setup(objective, train_cfg, tok_path, plan.ckpt)

    resume = fresh          # on --resume the plan is the checkpoint's (zerollm.training.plan.make_plan)

    def ready(self, trainer):
        cfg = trainer.model_cfg
        say(f"model: {trainer.model.num_params():,} parameters ({cfg.n_layer} layers, {cfg.n_head} heads, "
            f"{cfg.n_embd} dims, block {cfg.block_size}, vocab {cfg.vocab_size})" + _moe_line(trainer.model))


def _check_base(objective, ckpt):
    """A LoRA run's base is the seeded initial model; its digest must be the one the run began from."""
    saved = (ckpt.objective or {}).get("base_digest")
    if saved is not None and saved != objective.saved.get("base_digest"):
        raise ZeroLLMError(f"{ckpt.path}: the base model rebuilt from the seed has another digest than the one "
                           "these adapters were trained on; resume with the zerollm version that started the run")
