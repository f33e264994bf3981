"""Where a served model comes from: ``--ckpt DIR`` (a zerollm run), ``--hf DIR`` (a Hugging Face
directory) or ``--gguf FILE``; the same flags and the same loading for `zerollm sample`, `chat`, `serve`."""

from zerollm.io.errors import ZeroLLMError


def add_source_arguments(p):
    src = p.add_mutually_exclusive_group()
    src.add_argument("--ckpt", metavar="DIR", help="a training run directory (its latest checkpoint) or a step directory")
    src.add_argument("--hf", metavar="DIR", help="a Hugging Face model directory (config.json + *.safetensors)")
    src.add_argument("--gguf", metavar="FILE", help="a GGUF file (GPT-2 or Llama; f32, f16, q8_0 or q4_0): "
                                                    "quantized weights run as such with --engine fast")


def load_source(args, prog="zerollm sample"):
    """(model in eval mode, tokenizer) from args.ckpt, args.hf or args.gguf (args.force: the memory check);
    ``prog`` names the command in what a GGUF load says on stderr."""
    if args.gguf:
        from zerollm.interop.gguf_load import load_gguf_for
        return load_gguf_for(args.gguf, prog, force=args.force)
    if args.hf:
        from zerollm.interop.hf import load, load_tokenizer_dir
        return load(args.hf, force=args.force).eval(), load_tokenizer_dir(args.hf)
    if not args.ckpt:
        raise ZeroLLMError("give --ckpt DIR (a zerollm training run), --hf DIR (a Hugging Face model) "
                           "or --gguf FILE (a GGUF file)")
    from zerollm.training.checkpoint import load_model
    model, tok, _ = load_model(args.ckpt, force=args.force)
    if tok is None:
        raise ZeroLLMError(f"{args.ckpt} has no tokenizer.json, so text cannot be encoded")
    return model, tok
