"""Where the model of `zerollm sample`, `chat` and `serve` comes from: ``--ckpt DIR`` (a zerollm run),
``--hf DIR`` (a Hugging Face directory) or ``--gguf FILE``, with an optional ``--adapter``; the same
flags and the same loading for all three."""

from zerollm.io.errors import ZeroLLMError


def add_source_arguments(p):
    src = p.add_mutually_exclusive_group()
    src.add_argument("--ckpt", metavar="DIR", help="a training run directory (its latest checkpoint) or a step directory")
    src.add_argument("--hf", metavar="DIR", help="a Hugging Face model directory (config.json + *.safetensors)")
    src.add_argument("--gguf", metavar="FILE", help="a GGUF file (GPT-2 or Llama; f32, f16, q8_0 or q4_0): "
                                                    "quantized weights run as such with --engine fast")
    p.add_argument("--adapter", metavar="DIR", help="a PEFT LoRA adapter directory to put on the model "
                   "(zerollm.interop.peft)")


def load_source(args, prog="zerollm sample"):
    """(model in eval mode, tokenizer) from args.ckpt, args.hf or args.gguf (args.force: the memory check);
    ``prog`` names the command in what a GGUF load says on stderr."""
    from zerollm.interop.hf.native import load_run, with_adapter
    adapter = getattr(args, "adapter", None)
    if args.gguf:
        if adapter:
            raise ZeroLLMError("--adapter goes on --ckpt or --hf models, not on a GGUF file; convert the model "
                               "with its adapters merged (zerollm merge) instead")
        from zerollm.interop.gguf_load import load_gguf_for
        return load_gguf_for(args.gguf, prog, force=args.force)
    if args.hf:
        from zerollm.interop.hf import load, load_tokenizer_dir
        return with_adapter(load(args.hf, force=args.force), adapter).eval(), load_tokenizer_dir(args.hf)
    if not args.ckpt:
        raise ZeroLLMError("give --ckpt DIR (a zerollm training run), --hf DIR (a Hugging Face model) "
                           "or --gguf FILE (a GGUF file)")
    model, tok, _ = load_run(args.ckpt, force=args.force)      # a LoRA run comes with its base
    if tok is None:
        raise ZeroLLMError(f"{args.ckpt} has no tokenizer.json, so text cannot be encoded")
    return with_adapter(model, adapter).eval(), tok
