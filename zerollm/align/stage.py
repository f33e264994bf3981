"""What every post-training command shares (reward, dpo, ppo, grpo, ...): the flags, loading the starting
model, copying the inputs into the run, resuming. ``StageRun`` hands all that to the one run recipe
(zerollm.training.run.run_recipe), which plans, locks, builds the Trainer, fits and reports as it does for
``zerollm train``; a stage supplies only its Stage (zerollm.align.stages): settings, defaults, inputs and
objective builder.

    zerollm dpo --init runs/sft --data prefs.jsonl --out runs/dpo
    zerollm dpo --out runs/dpo --resume

A stage run directory is self-contained: the JSONL files it trains on are copied into RUN/inputs/, the
tokenizer (with the chat template's special tokens) is saved as RUN/tokenizer.json, and the starting
model is recorded by path and by a digest of its weights, so a resume can check that the frozen
reference it reloads is the same one. The copies' SHA-256 digests are recorded too: a resume whose
RUN/inputs/ files were deleted, cut short or edited stops with one line, and so does ``--resume`` with
a ``--data`` (or ``--eval-data``) other than the file the run began with.

``--out`` follows zerollm.io.outdir's rule: never inside the starting run or any other run, checkpoint or
model directory, and never over files (tokenizer.json, log.jsonl, ...) this command did not create
unless ``--force``.
"""

import dataclasses
import os
import shutil
import sys

from zerollm.data.chat import chat_model
from zerollm.training.checkpoint import weights_digest
from zerollm.model import budget
from zerollm.training.flags import add_config_flags, add_lora_arguments, lora_config, saved_lora
from zerollm.training.run import RunCommand, Setup, run_recipe
from zerollm.io.errors import ZeroLLMError
from zerollm.io.fileio import atomic_write, open_regular, require_regular
from zerollm.io.fileio import sha256_file as file_digest
from zerollm.io.outdir import STAGE_FILES, check_inputs_apart, check_stage_out
from zerollm.engine.threads import add_threads_argument
from zerollm.training.trainer import (CHANGEABLE_ON_RESUME, TrainConfig, check_max_iters, check_schedule, lora_rng,
                                     resume_point)
from zerollm.io.validate import dataclass_from_dict
from zerollm.tokenizers import tokenizer_file

LM_ONLY = {"tokenizer", "vocab_size"}          # TrainConfig fields that only pre-training uses


@dataclasses.dataclass(frozen=True)
class Stage:
    """One post-training command: its name, its defaults and how it builds its objective.

    build(model, tokenizer, inputs, train_cfg, stage_cfg, start) -> Objective, where inputs maps each
    input flag ("data", "eval_data", ...) to its copied path (or None) and start describes the
    starting model: {"path", "digest", "hf"}; build may load more (a reference, a reward model)."""
    name: str
    config_cls: type                 # the stage's own settings (a frozen dataclass)
    defaults: dict                   # TrainConfig values that suit this stage (e.g. a smaller lr)
    build: object
    inputs: tuple = ("data", "eval_data")
    skip: tuple = ()                 # TrainConfig fields that mean nothing to this stage (no flag for them)
    reference: bool = False          # does it keep a frozen copy of the starting model (memory estimate)?
    rows_per_example: int = 1        # sequences one example puts through the model (a pair: 2)
    # the starting model from other flags than --init/--hf (distill: a student beside its teacher):
    # open_start(args, train_cfg) -> (model, tokenizer, start record); reopen_start(start) -> (model, tokenizer)
    open_start: object = None
    reopen_start: object = None
    # more memory than the model's own (distill: the teacher at its size): more_memory(estimate, plan, rows)
    more_memory: object = None
    input_ext: str = "jsonl"         # what the inputs are: "jsonl" files, or "txt" (UTF-8 text)


# ----------------------------------------------------------------------------
# flags

def add_stage_arguments(p, stage):
    if stage.open_start is None:     # a stage with its own start flags adds them itself
        src = p.add_mutually_exclusive_group()
        src.add_argument("--init", metavar="DIR", help="start from a zerollm run or checkpoint directory")
        src.add_argument("--hf", metavar="DIR", help="start from a Hugging Face model directory")
        src.add_argument("--gguf", metavar="FILE", help="QLoRA on a GGUF file (with --lora-r): its Q8_0 / Q4_0 linear "
                         "layers stay the blocks it stores; the token table and head are float32")
    p.add_argument("--adapter", metavar="DIR", help="a PEFT LoRA adapter directory to fold into the starting model "
                   "first (zerollm.interop.peft)")
    if "data" in stage.inputs:
        p.add_argument("--data", metavar="FILE", help="the JSONL file to train on" if stage.input_ext == "jsonl"
                       else "the UTF-8 text file to train on, or a corpus that ships with zerollm: shakespeare, tang")
    if "eval_data" in stage.inputs:
        p.add_argument("--eval-data", metavar="FILE", help="a heldout JSONL file evaluated every --eval-interval "
                       "steps")
    p.add_argument("--out", metavar="DIR", help=f"run directory (default runs/{stage.name})")
    p.add_argument("--resume", action="store_true", help="continue from the last checkpoint in --out")
    p.add_argument("--no-progress", action="store_true", help="no progress bar (e.g. in logs)")
    p.add_argument("--dry-run", action="store_true", help="load the starting model, print the memory estimate of "
                   "a training step (counting LoRA and the frozen reference), then stop (nothing is written)")
    p.add_argument("--force", action="store_true",
                   help="go on even when the memory estimate is more than the memory available, and replace "
                        "files in --out (tokenizer.json, log.jsonl, ...) that this command did not create")
    add_threads_argument(p, data_parallel=True)
    add_lora_arguments(p)
    p.add_argument("--quantize-base", choices=("q8_0", "q4_0"), help="QLoRA: keep the frozen base's linear layers in "
                   "Q8_0 / Q4_0 blocks (with --lora-r; zerollm.interop.quant.quantize_linears)")
    add_config_flags(p, stage.config_cls)
    add_config_flags(p, TrainConfig, skip=LM_ONLY | set(stage.skip), defaults=stage.defaults)
    defaults = ", ".join(f"--{k.replace('_', '-')} {v}" for k, v in stage.defaults.items()
                         if k not in LM_ONLY | set(stage.skip))       # only the flags this stage has
    p.epilog = f"Defaults of this stage that differ from pre-training: {defaults}." if defaults else None


def _given(args, cls, skip=()):
    return {f.name: getattr(args, f.name) for f in dataclasses.fields(cls)
            if f.name not in skip and getattr(args, f.name, None) is not None}


# ----------------------------------------------------------------------------
# the starting model

def load_start(path=None, hf=None, force=None, adapter=None, quantize=None, gguf=None):
    """(model, tokenizer, {"path", "hf", "digest"[, "adapter", "quantize", "gguf"]}) from --init DIR, --hf DIR or
    --gguf FILE, in eval mode (zerollm.interop.opening), every adapter folded in: a LoRA run's own, and
    ``adapter``, a PEFT adapter directory. quantize: QLoRA's base, its linear layers put in blocks as they are read
    ("q8_0", "q4_0"; "stored": a GGUF file's own blocks); the digest is then the blocks'."""
    from zerollm.interop.opening import Source, open_model
    if not (hf or path or gguf):
        raise ZeroLLMError("give --init DIR (a zerollm run) or --hf DIR (a Hugging Face model) to start from")
    where = dict(gguf=gguf) if gguf else dict(hf=hf) if hf else dict(ckpt=path)
    opened = open_model(Source(**where, adapter=adapter, force=force, quantize=quantize), merged=True)
    model = opened.model
    extra = {"adapter": os.path.abspath(adapter)} if adapter else {}
    extra.update({"quantize": quantize} if quantize else {}, **({"gguf": True} if gguf else {}))
    return model, opened.tokenizer, {"path": os.path.abspath(gguf or hf or path), "hf": bool(hf),
                                     "digest": weights_digest(model.params), **extra}


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


def reload_start(start):
    """The starting model again (a frozen reference on resume), checked against the digest saved with the run."""
    gguf = start["path"] if start.get("gguf") else None
    model, tok, again = load_start(None if start["hf"] or gguf else start["path"],
                                   start["path"] if start["hf"] else None, adapter=start.get("adapter"),
                                   quantize=start.get("quantize"), gguf=gguf)
    if again["digest"] != start["digest"]:
        raise ZeroLLMError(f"the starting model {start['path']} has changed since this run began (its weights' "
                           "digest differs), so the frozen reference cannot be restored; put the original back")
    return model, tok


# ----------------------------------------------------------------------------
# inputs

def copy_inputs(args, stage, run_dir):
    """Copy each given input file into RUN/inputs/ (atomically); -> {flag: copied path or None}."""
    folder = os.path.join(run_dir, "inputs")
    os.makedirs(folder, exist_ok=True)
    copied = {}
    for flag in stage.inputs:
        src = getattr(args, flag, None)
        if src is None:
            copied[flag] = None
            continue
        what = _input_kind(stage)
        require_regular(src, what)
        if not os.path.isfile(src):
            raise ZeroLLMError(f"--{flag.replace('_', '-')}: no such file: {src}")
        dst = os.path.join(folder, f"{flag}.{stage.input_ext}")
        with open_regular(src, "rb", what=what) as fin, atomic_write(dst, "wb") as fout:
            shutil.copyfileobj(fin, fout)
        copied[flag] = dst
    return copied


def saved_inputs(run_dir, stage, digests=None):
    """{flag: path of its copy in RUN/inputs/ or None}, each copy checked against the digest recorded when
    the run began (``digests``; runs written before digests were kept: --data must at least exist)."""
    folder = os.path.join(run_dir, "inputs")
    found = {}
    for flag in stage.inputs:
        path = os.path.join(folder, f"{flag}.{stage.input_ext}")
        expected = (digests or {}).get(flag)
        needed = expected is not None or (digests is None and flag == "data")
        require_regular(path, "copy of an input")
        if not os.path.isfile(path):
            if needed:
                raise ZeroLLMError(f"{path} (the copy of --{flag.replace('_', '-')} this run trains on) is missing; "
                                   "put the file the run began with back there, or start a new run with another --out")
            found[flag] = None
            continue
        if expected is not None and file_digest(path) != expected:
            raise ZeroLLMError(f"{path} (the copy of --{flag.replace('_', '-')} "
                               "this run trains on) has changed since the run began (cut short or edited); "
                               "put the original back, or start a new run")
        found[flag] = path
    return found


def check_resume_flags(args, stage, inputs, start):
    """--resume trains on the run's own copies and its own start: a different --data/--eval-data/--init/--hf
    given with it is refused (the same file is fine)."""
    for flag in stage.inputs:
        given = getattr(args, flag, None)
        if given is None:
            continue
        name = f"--{flag.replace('_', '-')}"
        require_regular(given, _input_kind(stage))
        if not os.path.isfile(given):
            raise ZeroLLMError(f"{name}: no such file: {given}")
        if inputs.get(flag) is None or file_digest(given) != file_digest(inputs[flag]):
            raise ZeroLLMError(f"--resume trains on the run's own copy of its data; {name} {given} "
                               f"is not the file the run began with: leave out {name}, or start a new run with "
                               "another --out")
    for flag, hf in (("init", False), ("hf", True)):
        given = getattr(args, flag, None)
        if given is not None and (os.path.abspath(given) != start["path"] or hf != start["hf"]):
            raise ZeroLLMError(f"--resume continues from the run's own start ({start['path']}); --{flag} {given} "
                               f"is another model: leave out --{flag}, or start a new run with another --out")


def _input_kind(stage):
    return "JSONL file" if stage.input_ext == "jsonl" else "text file"


# ----------------------------------------------------------------------------
# the run

def run_stage(args, stage):
    """Run a post-training command: the one run recipe (zerollm.training.run) with this stage's steps."""
    return run_recipe(StageRun(args, stage))


@dataclasses.dataclass(frozen=True)
class StagePlan:
    """What a stage run is built from: its settings and its starting model (with LoRA, its adapters on)."""
    train_cfg: TrainConfig
    stage_cfg: object              # an instance of the stage's config_cls
    model: object                  # zerollm.model.gpt.GPT
    tok: object                    # its tokenizer
    start: dict                    # the starting model's record: {"path", "hf", "digest"[, "adapter"]}
    quantize: str | None = None    # QLoRA: the blocks the base's linear layers are kept in (q8_0, q4_0)


class StageRun(RunCommand):
    """A post-training stage in the one run recipe: its checks before the lock, its plan and dry run, its
    inputs copied into RUN/inputs/, its starting model, its objective (Stage.build)."""

    def __init__(self, args, stage):
        super().__init__(stage.name, args, args.out or os.path.join("runs", stage.name))
        self.stage = stage

    def check_out(self):
        args, stage = self.args, self.stage
        if not args.resume:            # before anything is created (zerollm.io.outdir's rule)
            _check_data_outside(args, stage, self.run_dir)      # first: the input named, --force or not
            check_stage_out(self.run_dir, force=args.force, sources=[("--init", args.init), ("--hf", args.hf),
                                                                     ("--gguf", getattr(args, "gguf", None))])

    def dry_run(self):
        """--dry-run: the starting model, what trains, and the memory estimate of a step; nothing is written."""
        plan = _plan(self.args, self.stage)
        model = plan.model
        estimate = _estimate(self.stage, plan, self.args.threads or 1, 1)
        trains = (f"LoRA r={model.lora.config.r} on {len(model.lora.sites)} modules: {model.lora.num_params():,} of "
                  f"{model.num_params():,} parameters train" if model.lora is not None else
                  f"all {model.num_params():,} parameters train")
        print(f"dry run: nothing is written. {self.stage.name} from {plan.start['path']}; {trains}")
        print("memory of one training step (estimate):")
        print(estimate.table(budget.available_memory()))

    def fresh(self, world):
        args, stage, run_dir = self.args, self.stage, self.run_dir
        from zerollm.training.checkpoint import latest_checkpoint
        if os.path.isdir(run_dir) and latest_checkpoint(run_dir):
            raise ZeroLLMError(f"{run_dir} already holds a run; continue it with --resume, or choose another --out")
        if args.data is None:
            raise ZeroLLMError(f"give --data FILE: the JSONL file to train on (see 'zerollm {stage.name} --help')")
        plan = _plan(args, stage)                        # the starting model checked before anything is written
        budget.require(_estimate(stage, plan, (args.threads or 1) * world.size, world.size), force=args.force)
        inputs = None
        try:
            if world.is_main:         # one process copies the inputs; the others wait and read the copies
                os.makedirs(run_dir, exist_ok=True)
                inputs = copy_inputs(args, stage, run_dir)
            inputs = world.allgather(inputs)[0]
            digests = {flag: file_digest(p) for flag, p in inputs.items() if p is not None}
            return self._setup(plan, inputs, digests, world)
        except ZeroLLMError as err:   # bad data: name the user's file, not its copy in RUN/inputs/
            message = str(err)
            for flag, copy in (inputs or {}).items():
                if copy is not None:
                    message = message.replace(copy, getattr(args, flag))
            raise ZeroLLMError(message) from None

    def resume(self, world):
        args, stage, run_dir = self.args, self.stage, self.run_dir
        ckpt = resume_point(run_dir, force=args.force)
        saved = ckpt.objective or {}
        if saved.get("stage") != stage.name:
            raise ZeroLLMError(f"{run_dir} was not written by 'zerollm {stage.name}' (its objective is "
                               f"{saved.get('stage') or saved.get('kind')!r}); resume it with the command that "
                               "wrote it")
        where = ckpt.config_path
        given = _given(args, TrainConfig, LM_ONLY)
        changeable = CHANGEABLE_ON_RESUME
        train_cfg = dataclasses.replace(dataclass_from_dict(TrainConfig, ckpt.train_config, where, "train"),
                                        **{k: v for k, v in given.items() if k in changeable})
        check_max_iters(ckpt, train_cfg)
        lora = saved_lora(ckpt, lora_config(args))           # --lora-* may only repeat the run's own
        ignored = sorted({*given, *_given(args, stage.config_cls)} - set(changeable))
        if ignored and world.is_main:
            print("note: on --resume the saved configuration is used; ignoring "
                  + ", ".join("--" + k.replace("_", "-") for k in ignored), file=sys.stderr)
        if not isinstance(saved.get("start"), dict) or not {"path", "hf", "digest"} <= set(saved["start"]):
            raise ZeroLLMError(f"{where}: objective.start must name the starting model (path, hf, digest); "
                               "the checkpoint is damaged")
        stage_cfg = dataclass_from_dict(stage.config_cls, saved.get("settings"), where, "objective.settings")
        digests = saved.get("inputs")
        if digests is not None and not (isinstance(digests, dict)
                                        and all(isinstance(v, str) for v in digests.values())):
            raise ZeroLLMError(f"{where}: objective.inputs must map each input to its SHA-256; the checkpoint is "
                               "damaged")
        inputs = saved_inputs(run_dir, stage, digests)
        check_resume_flags(args, stage, inputs, saved["start"])
        model, tok = (stage.reopen_start or reload_start)(saved["start"])
        if lora is not None:
            model.add_lora(lora, lora_rng(train_cfg.seed))
        plan = StagePlan(train_cfg, stage_cfg, model, tok, saved["start"], saved.get("quantize_base"))
        setup = self._setup(plan, inputs, digests if digests is not None else
                            {f: file_digest(p) for f, p in inputs.items() if p}, world)
        return dataclasses.replace(setup, ckpt=ckpt)

    def _setup(self, plan, inputs, digests, world):
        """The stage's objective, recorded to be rebuilt on resume, and its tokenizer saved as RUN/tokenizer.json."""
        stage = self.stage
        objective, tok = stage.build(plan.model, plan.tok, inputs, plan.train_cfg, plan.stage_cfg, plan.start)
        if plan.quantize is not None:            # after build: the model as it trains (new rows), its reference
            from zerollm.interop.quant import quantize_linears
            quantize_linears(objective.model, plan.quantize, also=[m for m in vars(objective).values()
                                                                   if hasattr(m, "params") and m is not objective.model])
        objective.saved = {"stage": stage.name, "settings": dataclasses.asdict(plan.stage_cfg), "start": plan.start,
                           "inputs": digests}
        if objective.model.lora is not None:     # the checkpoint holds the adapters; the base is "start", by digest
            objective.saved["lora"] = objective.model.lora.config.to_dict()
        if plan.quantize is not None:            # QLoRA: resume quantizes the same base the same way
            objective.saved["quantize_base"] = plan.quantize
        tokenizer_path = tokenizer_file(self.run_dir)
        if world.is_main:
            tok.save(tokenizer_path)
        world.barrier()
        return Setup(objective, plan.train_cfg, tokenizer_path)


def _check_data_outside(args, stage, run_dir):
    """An input may lie in --out, but not where the run writes (RUN/inputs/, tokenizer.json, log.jsonl)."""
    check_inputs_apart(run_dir, STAGE_FILES,
                       [(f"--{flag.replace('_', '-')}", getattr(args, flag, None)) for flag in stage.inputs])


def _plan(args, stage):
    """A new run's StagePlan from the flags and the stage's defaults: its settings checked, then the starting
    model loaded (and given adapters with --lora-r)."""
    given = _given(args, TrainConfig, LM_ONLY)
    train_cfg = TrainConfig(**{**stage.defaults, **given})
    check_schedule(train_cfg, given=given)
    stage_cfg = stage.config_cls(**_given(args, stage.config_cls))
    lora = lora_config(args)
    gguf = getattr(args, "gguf", None) if stage.open_start is None else None
    if args.quantize_base is not None and lora is None:
        raise ZeroLLMError("--quantize-base freezes the base in blocks: give --lora-r R too, so the adapters train")
    if gguf and lora is None:
        raise ZeroLLMError("--gguf FILE trains adapters over the file's quantized blocks: give --lora-r R too (to "
                           "train every weight, start from the model it was converted from with --init or --hf)")
    if stage.open_start is not None:
        model, tok, start = stage.open_start(args, train_cfg)
    else:                                # QLoRA's base goes into blocks as it is read, never whole in float32
        model, tok, start = load_start(args.init, args.hf, args.force, args.adapter,
                                       args.quantize_base or ("stored" if gguf else None), gguf)
    if lora is not None:
        model.add_lora(lora, lora_rng(train_cfg.seed))
    return StagePlan(train_cfg, stage_cfg, model, tok, start, args.quantize_base)


def _estimate(stage, plan, threads, ranks):
    """The memory of one step (zerollm.model.budget.post_training): with LoRA only the adapters have gradients
    and moments; DPO, PPO and GRPO hold a second copy of the weights as their reference unless LoRA's base
    serves as one; a pair is two sequences; PPO and GRPO also hold a rollout batch of prompts_per_step x
    group_size answers (split over the ranks), trained on in --minibatches parts."""
    model, train_cfg, stage_cfg = plan.model, plan.train_cfg, plan.stage_cfg
    trainable = model.lora.num_params() if model.lora is not None else None
    rows = getattr(stage_cfg, "prompts_per_step", 0) * getattr(stage_cfg, "group_size", 1)
    batch = -(-rows // stage_cfg.minibatches) if rows else train_cfg.batch_size * stage.rows_per_example
    estimate = budget.post_training(model.config, max(-(-batch // ranks), 1), grad_accum=train_cfg.grad_accum,
                                    threads=threads, trainable=trainable,
                                    reference=stage.reference and model.lora is None,
                                    rollout_rows=-(-rows // ranks), value_head=stage.name == "ppo")
    if plan.quantize is not None:          # QLoRA: the linear layers in blocks (zerollm.interop.quant)
        from zerollm.interop.quant import quantized_bytes
        estimate = budget.in_blocks(estimate, quantized_bytes(model.params, plan.quantize))
    if stage.more_memory is not None:
        estimate = stage.more_memory(estimate, plan, max(-(-batch // ranks), 1))
    return estimate
