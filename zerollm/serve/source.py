"""Where a served model comes from: ``--ckpt DIR`` (a zerollm run) or ``--hf DIR`` (a Hugging Face
directory), the same two flags and the same loading for `zerollm sample`, `zerollm chat`, `zerollm serve`."""

from zerollm.io.errors import ZeroLLMError


def add_source_arguments(p):
    src = p.add_mutually_exclusive_group()
    src.add_argument("--ckpt", metavar="DIR", help="a training run directory (its latest checkpoint) or a step directory")
    src.add_argument("--hf", metavar="DIR", help="a Hugging Face model directory (config.json + *.safetensors)")


def load_source(args):
    """(model in eval mode, tokenizer) from args.ckpt or args.hf (args.force: the memory check)."""
    if args.hf:
        from zerollm.interop.hf import load, load_tokenizer_dir
        return load(args.hf, force=args.force).eval(), load_tokenizer_dir(args.hf)
    if not args.ckpt:
        raise ZeroLLMError("give --ckpt DIR (a zerollm training run) or --hf DIR (a Hugging Face model)")
    from zerollm.training.checkpoint import load_model
    model, tok, _ = load_model(args.ckpt, force=args.force)
    if tok is None:
        raise ZeroLLMError(f"{args.ckpt} has no tokenizer.json, so text cannot be encoded")
    return model, tok
