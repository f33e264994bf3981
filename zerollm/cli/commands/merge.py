"""``zerollm merge``: fold a LoRA run's adapters into the weights, as an ordinary zerollm run directory.

    zerollm sft --init runs/tang --data acrostic.jsonl --lora-r 8 --out runs/tang-lora
    zerollm merge --from runs/tang-lora --to runs/tang-merged
    zerollm sample --ckpt runs/tang-merged --prompt ...

W' = W + (alpha / r) A B for every adapted linear (zerollm.nn.lora): the merged model computes the same
logits without the side path, and needs neither the adapters nor the base it was trained on.
The result holds the weights, the tokenizer and the run's settings; it has no optimizer state
(training continues from it with --init, not --resume).
"""

import os
import shutil

from zerollm.io.errors import ZeroLLMError


def add_arguments(p):
    p.add_argument("--from", dest="src", required=True, metavar="RUN", help="a LoRA training run (or step directory)")
    p.add_argument("--to", dest="dst", required=True, metavar="DIR|FILE.gguf",
                   help="the run directory to create (float32), or with --quant a GGUF file")
    p.add_argument("--quant", choices=("q8_0", "q4_0"), default=None,
                   help="re-quantize the merged weights (a QLoRA run's dequantized base + its adapters) into a GGUF "
                        "file of these blocks: --to FILE.gguf")
    p.add_argument("--force", action="store_true", help="load even when the memory estimate says it will not fit")


def merged_run(src, dst, force=None):
    """Load the LoRA run ``src`` (from its base), fold the adapters in, save a checkpoint at ``dst``. A QLoRA run's
    base in blocks comes out dequantized: float32 base + adapters (zerollm.interop.quant.float_param)."""
    from zerollm.interop.quant import float_param
    from zerollm.training.checkpoint import Snapshot, latest_checkpoint, save_checkpoint
    from zerollm.interop.opening import Source, open_model
    from zerollm.io.outdir import check_outside_runs, check_separate
    check_separate(dst, [src], "--to", "--from")              # merging into its own run would destroy it
    check_outside_runs(dst, "--to")                           # nor into another run, checkpoint or model
    if os.path.isdir(dst) and latest_checkpoint(dst):
        raise ZeroLLMError(f"--to {dst} already holds a run; choose another directory")
    if os.path.lexists(dst) and not os.path.isdir(dst):
        raise ZeroLLMError(f"--to {dst} is a file; merge writes a run directory: choose a new directory name")
    held = sorted(os.listdir(dst)) if os.path.isdir(dst) else []
    if held:                                                  # its latest.json, tokenizer.json ... would be replaced
        raise ZeroLLMError(f"--to {dst} is a folder that already holds files ({', '.join(held[:3])}"
                           f"{' ...' if len(held) > 3 else ''}); merge writes a new run directory: choose a new or "
                           "empty one")
    opened = open_model(Source(ckpt=src, force=force), tokenizer="may")    # read to check it; its file is copied
    model, ckpt = opened.model, opened.checkpoint
    if model.lora is None:
        raise ZeroLLMError(f"{src} was not trained with LoRA (no --lora-r): there are no adapters to merge")
    merged = model.merged()
    merged.params = {name: float_param(name, w) for name, w in merged.params.items()}
    objective = {k: v for k, v in ckpt.objective.items() if k not in ("lora", "base_digest")}
    objective["merged_from"] = os.path.abspath(src)
    no_moments = {"step": 0, "lr": 0.0, "betas": [0.9, 0.99], "eps": 1e-8, "weight_decay": 0.0, "decay": [],
                  "m": {}, "v": {}}
    created = not os.path.exists(dst)
    try:
        save_checkpoint(dst, Snapshot(step=ckpt.step, model_config=merged.config.to_dict(),
                                      train_config=ckpt.train_config, params=merged.params,
                                      optimizer_state=no_moments, rng_state=merged.rng,
                                      tokenizer_path=ckpt.tokenizer_path, objective=objective, extra={"merged": True}))
    except BaseException:          # a full disk, Ctrl-C: no empty or half-made --to is left behind
        if created:
            shutil.rmtree(dst, ignore_errors=True)
        raise


def merged_gguf(src, dst, kind, force=None):
    """The LoRA (or QLoRA) run ``src`` merged (float32 base + adapters) and written as a GGUF file of ``kind`` blocks
    (zerollm.interop.gguf.export_gguf, as `zerollm convert --quant` writes)."""
    from zerollm.interop.gguf import check_gguf_target, export_gguf
    from zerollm.interop.opening import Source, open_model
    from zerollm.interop.quant import float_param
    from zerollm.io.lock import writing
    if not dst.lower().endswith(".gguf"):
        raise ZeroLLMError(f"--quant {kind} writes a GGUF file: give --to FILE.gguf (a merged run directory is always "
                           "float32; leave out --quant for one)")
    check_gguf_target(dst, False)
    with writing(dst, beside=True):
        opened = open_model(Source(ckpt=src, force=force), tokenizer="may")
        if opened.model.lora is None:
            raise ZeroLLMError(f"{src} was not trained with LoRA (no --lora-r): there are no adapters to merge")
        merged = opened.model.merged()
        merged.params = {name: float_param(name, w) for name, w in merged.params.items()}
        return export_gguf(merged, dst, tokenizer=opened.tokenizer, quant_kind=kind, overwrite=False)


def run(args):
    if args.quant is not None:
        done = merged_gguf(args.src, args.dst, args.quant, force=args.force or None)
        print(f"wrote {done['path']}: the adapters of {args.src} folded into the weights, re-quantized to {args.quant}")
        return 0
    merged_run(args.src, args.dst, force=args.force or None)
    print(f"wrote {os.path.abspath(args.dst)}: the adapters of {args.src} folded into the weights")
    return 0
