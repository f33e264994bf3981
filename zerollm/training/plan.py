"""What a ``zerollm train`` run will do, worked out before anything is written or allocated.

A plan holds the two configs, where the data comes from, the vocabulary size that data will give,
and the memory estimate of one optimizer step (zerollm.model.budget). ``zerollm train`` checks the plan
against the memory available before it prepares data or builds the model; ``--dry-run`` prints it
and stops; ``--show-config`` prints every setting and where it came from, and stops:

    zerollm train --preset shakespeare-cpu --dry-run
    zerollm train --preset tang --n-layer 6 --show-config
"""

import os
import sys
from dataclasses import asdict, dataclass, field, replace

from zerollm.model import budget

from zerollm.data import corpora
from zerollm.io.errors import ZeroLLMError
from zerollm.io.fileio import read_json, require_regular
from zerollm.training.flags import lora_config, saved_lora
from zerollm.training.presets import DEFAULT_PRESET, PRESET_CORPUS, build_configs, sources
from zerollm.training.trainer import configs_from_checkpoint, resume_point


@dataclass
class Plan:
    model_cfg: object              # GPTConfig (vocab_size as the data will give it)
    train_cfg: object              # TrainConfig
    data: str                      # a prepared folder, or a text file to prepare into RUN/data
    prepared: bool
    estimate: budget.Estimate
    ckpt: object = None            # the Checkpoint to resume from
    overrides: dict = field(default_factory=dict)    # the flags, plus what a prepared folder decides
    sources: dict = field(default_factory=dict)      # {field: where its value comes from}
    lora: object = None            # the LoRAConfig of the run (--lora-*, or the checkpoint's on --resume)


def data_source(args, run_dir):
    """(path, prepared?) of the data to train on: a folder from ``zerollm prepare`` (or RUN/data), or a
    text file (a shipped corpus's by name)."""
    data = args.data
    if data is None and os.path.isfile(os.path.join(run_dir, "data", "meta.json")):
        return os.path.join(run_dir, "data"), True
    if data is None and args.preset in PRESET_CORPUS:
        # the preset's own corpus, by its path: a folder of that name in the working directory (the run's
        # own, as in `cd runs && zerollm train --preset tang --out tang`) is not what the preset means
        return str(corpora.path(PRESET_CORPUS[args.preset])), False
    if data is None:
        raise ZeroLLMError("give --data FILE (a text file), --data DIR (from 'zerollm prepare') or the name of "
                           f"a shipped corpus ({', '.join(corpora.CORPORA)})")
    if os.path.isdir(data) and (data not in corpora.CORPORA or os.path.isfile(os.path.join(data, "meta.json"))):
        return data, True                               # a prepared folder (a corpus's name without meta.json is the corpus)
    if not os.path.isfile(data) and data in corpora.CORPORA:
        data = str(corpora.path(data))                  # a corpus that ships with zerollm
    require_regular(data, "text file")                  # a pipe or a device is no corpus: say so, not "no such file"
    if not os.path.isfile(data):
        raise ZeroLLMError(f"--data: no such file or folder: {data} (shipped corpora: "
                           f"{', '.join(corpora.CORPORA)})")
    return data, False


def _check_left_data(args, run_dir, own, tokenizer):
    """A new run without --data finds RUN/data (an earlier attempt that stopped before its first checkpoint,
    or a `zerollm prepare --out RUN/data`): it trains on it only if it is what the command asks for, the
    preset's corpus with the preset's (or --tokenizer's) tokenizer. Otherwise it would train on other data
    with another tokenizer, without a word."""
    corpus = PRESET_CORPUS.get(args.preset)
    meta = read_json(os.path.join(own, "meta.json"), what="prepared data description (meta.json)")
    kind = meta.get("tokenizer") if isinstance(meta, dict) else None
    use = f"pass --data {own} to train on it, or choose another --out"
    if corpus is not None and not _same_data(str(corpora.path(corpus)), own):
        raise ZeroLLMError(f"{own} holds data prepared from another text than --preset {args.preset}'s corpus "
                           f"({corpus}); {use}")
    if kind != tokenizer:
        raise ZeroLLMError(f"{own} was prepared with the {kind} tokenizer, but this run uses the {tokenizer} "
                           f"tokenizer; pass --data {own} (or --tokenizer {kind}) to train on it, or choose "
                           "another --out")


def vocab_size_of(data, prepared, train_cfg):
    """The vocabulary the data will give, without preparing it: meta.json of a prepared folder; else
    256 (byte), the asked-for size (bpe: an upper bound), or the distinct characters (char)."""
    if prepared:
        meta = read_json(os.path.join(data, "meta.json"), what="prepared data description (meta.json)")
        size = meta.get("vocab_size") if isinstance(meta, dict) else None
        return size if isinstance(size, int) and not isinstance(size, bool) and size > 0 else 256
    if train_cfg.tokenizer == "byte":
        return 256
    if train_cfg.tokenizer == "bpe":
        return train_cfg.vocab_size or 256
    from zerollm.data.tokens import read_corpus
    return max(len(set(read_corpus(data)[0])), 1)


def make_plan(args, run_dir, overrides, world=None):
    """The run's plan; on --resume from the last checkpoint's saved configuration. Under MPI
    (zerollm.training.dist) every rank makes the same plan; its memory is that of one rank's share of the batch."""
    ckpt, ranks = None, 1 if world is None else world.size
    if args.resume:
        ckpt = resume_point(run_dir, force=args.force)
        check_pretraining(ckpt, run_dir)
        model_cfg, train_cfg, ignored = configs_from_checkpoint(ckpt, overrides)
        # --preset too: the run's own settings (the preset it began with, and its flags) are in the checkpoint
        flags = ([f"--preset {args.preset}"] if getattr(args, "preset", None) else []) + \
            ["--" + k.replace("_", "-") for k in ignored]
        if flags and (world is None or world.is_main):
            print(f"note: on --resume the saved configuration is used; ignoring {', '.join(flags)}",
                  file=sys.stderr)
        where = {**{f: "checkpoint" for f in {*asdict(model_cfg), *asdict(train_cfg)}},
                 **{f: "--" + f.replace("_", "-") for f in set(overrides) - set(ignored)}}
    else:
        model_cfg, train_cfg = build_configs(args.preset, overrides)     # validates before any work
        where = sources(args.preset, overrides)
    data, prepared = resumed_data(args, run_dir) if args.resume else data_source(args, run_dir)
    if not args.resume:
        if args.data is None and prepared:
            _check_left_data(args, run_dir, data, train_cfg.tokenizer)
        if prepared:
            overrides = {**overrides, "tokenizer": prepared_tokenizer(data, overrides.get("tokenizer"))}
            where["tokenizer"] = where["tokenizer"] if where["tokenizer"].startswith("--") else "the prepared data"
        vocab = vocab_size_of(data, prepared, train_cfg)
        model_cfg, train_cfg = build_configs(args.preset, overrides, vocab_size=vocab)
    lora = lora_config(args)
    if ckpt is not None:
        lora = saved_lora(ckpt, lora)
    trainable = None
    if lora is not None:
        from zerollm.nn.lora import adapter_count
        trainable = adapter_count(model_cfg, lora)                    # an error for targets this model lacks
    estimate = budget.training(model_cfg, max(train_cfg.batch_size // ranks, 1), grad_accum=train_cfg.grad_accum,
                               threads=(args.threads or 1) * ranks,      # every rank gathers every shard's gradients
                               trainable=trainable)
    estimate = replace(estimate, hint=memory_hint(estimate, model_cfg, train_cfg, resumed=ckpt is not None,
                                                  threads=args.threads or 1))
    return Plan(model_cfg, train_cfg, data, prepared, estimate, ckpt, overrides, where, lora)


_WEIGHT_PARTS = ("parameters", "initialisation", "frozen reference", "gradients", "AdamW")


def memory_hint(estimate, model_cfg, train_cfg, *, resumed=False, threads=1):
    """The flags of ``zerollm train`` that would make ``estimate`` smaller, the biggest part's first: the
    logits (B, T, V) shrink with --batch-size and --block-size (and --vocab-size, a BPE's only: byte is 256,
    char the text's), the activations with those and --n-embd, --n-layer, the weights and their optimizer
    state with --n-embd, --n-layer (--n-expert). On --resume none of these can change: the checkpoint's are
    used, so the advice is a smaller new run."""
    if resumed:
        fewer = "; or fewer --threads, each keeps its own gradients" if threads > 1 else ""
        return ("them in a new run instead: on --resume the checkpoint's --batch-size, --block-size, --n-embd "
                f"and --n-layer are kept{fewer}")
    bpe = train_cfg.tokenizer == "bpe"
    groups = {"logits": 0, "activations": 0, "weights": 0}
    for label, n in estimate.parts:
        if label.startswith("logits"):
            groups["logits"] += n
        elif label.startswith("activations"):
            groups["activations"] += n
        elif label.startswith(_WEIGHT_PARTS):
            groups["weights"] += n
    biggest = max(groups, key=groups.get)
    if biggest == "logits":
        flags = (["--vocab-size"] if bpe else []) + ["--batch-size", "--block-size"]
    elif biggest == "weights":
        embedding = model_cfg.vocab_size * model_cfg.n_embd
        big_vocab = bpe and embedding * 2 >= budget.param_count(model_cfg)
        flags = (["--vocab-size"] if big_vocab else []) + ["--n-embd", "--n-layer"] + \
            (["--n-expert"] if model_cfg.n_expert else [])
    else:
        flags = ["--batch-size", "--block-size", "--n-embd", "--n-layer"]
    return ", ".join(flags[:-1]) + " or " + flags[-1]


def check_pretraining(ckpt, run_dir):
    """``zerollm train --resume`` continues a pre-training run only: a run another command wrote (its
    objective names a stage, or a kind other than "lm") is refused before anything is written."""
    objective = ckpt.objective or {}
    if objective.get("stage") or objective.get("kind", "lm") != "lm":
        raise ZeroLLMError(f"{run_dir} was not written by 'zerollm train' (its objective is "
                           f"{objective.get('stage') or objective.get('kind')!r}); resume it with the command "
                           "that wrote it")


def resumed_data(args, run_dir):
    """On --resume a run that prepared its own data (RUN/data) trains on it again, never on a new
    preparation: a --data given with it must be that folder, or the text file it was prepared from
    (same sha256); another file or folder is refused, before RUN/data could be replaced."""
    own = os.path.join(run_dir, "data")
    if not os.path.isfile(os.path.join(own, "meta.json")):
        return data_source(args, run_dir)               # the run trained on a prepared folder elsewhere
    if args.data is not None and not _same_data(args.data, own):
        raise ZeroLLMError(f"--resume trains on the run's own prepared data ({own}); --data {args.data} "
                           "is not the data the run began with: leave out --data, or start a new run with "
                           "another --out")
    return own, True


def _same_data(given, own):
    """Is ``given`` (a folder, a text file or a shipped corpus's name) the data prepared into ``own``?"""
    from zerollm.data.download import sha256_of
    meta = read_json(os.path.join(own, "meta.json"), what="prepared data description (meta.json)")
    source = meta.get("source") if isinstance(meta, dict) else None
    digest = source.get("sha256") if isinstance(source, dict) else None
    if os.path.isdir(given):
        if os.path.realpath(given) == os.path.realpath(own):
            return True
        if given in corpora.CORPORA and not os.path.isfile(os.path.join(given, "meta.json")):
            given = str(corpora.path(given))
        else:
            return False                                # another prepared folder: another tokenization
    if not os.path.isfile(given) and given in corpora.CORPORA:
        given = str(corpora.path(given))
    return os.path.isfile(given) and digest is not None and sha256_of(given) == digest


def prepared_tokenizer(folder, asked=None):
    """The tokenizer a prepared folder was made with (its meta.json says): the run uses it. Only a
    --tokenizer that names another one is a conflict."""
    meta = read_json(os.path.join(folder, "meta.json"), what="prepared data description (meta.json)")
    kind = meta.get("tokenizer") if isinstance(meta, dict) else None
    if kind not in ("byte", "char", "bpe"):
        raise ZeroLLMError(f"{folder}/meta.json names no tokenizer (byte, char or bpe); run 'zerollm prepare' again")
    if asked is not None and asked != kind:
        raise ZeroLLMError(f"--tokenizer {asked} conflicts with {folder}, which was prepared with the {kind} "
                           f"tokenizer; leave --tokenizer out to use the folder's, or prepare it again with "
                           f"--tokenizer {asked}")
    return kind


def print_config(plan, run_dir, preset):
    """The --show-config report: every setting of the run, and where its value comes from."""
    print(f"configuration of {run_dir}: " + ("resumed from " + plan.ckpt.path if plan.ckpt else
          f"preset {preset}" if preset else f"no --preset, so {DEFAULT_PRESET}'s values"))
    print(f"data: {plan.data}" + ("" if plan.prepared else " (a text file, prepared into the run directory)"))
    vocab = {"vocab_size": "checkpoint" if plan.ckpt else "the data"}      # GPTConfig's; TrainConfig's is BPE's
    for title, cfg, where in (("model (GPTConfig)", plan.model_cfg, {**plan.sources, **vocab}),
                              ("training (TrainConfig)", plan.train_cfg, plan.sources)):
        print(f"{title}:")
        for name, value in asdict(cfg).items():
            print(f"  {name:<20} {value!s:<12} {where.get(name, 'default')}")


def print_plan(plan, run_dir):
    """The --dry-run report: model, data, and the memory of one training step against what is available."""
    from zerollm.model.budget import available_memory, fmt_bytes, param_count
    m, t = plan.model_cfg, plan.train_cfg
    source = plan.data if plan.prepared else f"{plan.data} (prepared into {run_dir}/data with the " \
                                             f"{t.tokenizer} tokenizer)"
    print(f"dry run: nothing is written. Run directory: {run_dir}"
          + (f", resuming at step {plan.ckpt.step}" if plan.ckpt else ""))
    print(f"model: {param_count(m):,} parameters ({m.n_layer} layers, {m.n_head} heads, {m.n_embd} dims, "
          f"block {m.block_size}, vocab {m.vocab_size}, {m.dtype}, {m.attn_impl} attention)")
    if plan.lora is not None:
        from zerollm.nn.lora import adapter_count
        whole = getattr(plan.lora, "modules_to_save", ())
        n = adapter_count(m, plan.lora)
        print(f"trains: LoRA r={plan.lora.r} on {', '.join(plan.lora.targets)}: "
              + (f"{n:,} numbers, the adapters and all of {', '.join(whole)}; the other base parameters stay frozen"
                 if whole else f"{n:,} adapter numbers; the {param_count(m):,} base parameters stay frozen"))
    print(f"data: {source}")
    print(f"steps: {t.max_iters} of batch {t.batch_size} x {m.block_size} tokens"
          + (f" x {t.grad_accum} micro-batches" if t.grad_accum > 1 else ""))
    have = available_memory()
    print("memory of one training step (estimate):")
    print(plan.estimate.table(have))
    fits = have[0] is None or plan.estimate.total <= have[0]
    print("fits: " + ("yes" if fits else f"no, {fmt_bytes(plan.estimate.total - have[0])} too much"))
