"""Where the model of `zerollm sample`, `chat` and `serve` comes from: ``--ckpt DIR`` (a zerollm run),
``--hf DIR`` (a Hugging Face directory) or ``--gguf FILE``, with an optional ``--adapter`` (unmerged over a base in
blocks with ``--quantize-base``); the same flags for all three (and `zerollm eval`), and the one opener of
zerollm.interop.opening."""

import sys

from zerollm.interop.opening import Source, open_model


def add_source_arguments(p):
    src = p.add_mutually_exclusive_group()
    src.add_argument("--ckpt", metavar="DIR", help="a training run directory (its latest checkpoint) or a step directory")
    src.add_argument("--hf", metavar="DIR", help="a Hugging Face model directory (config.json + *.safetensors)")
    src.add_argument("--gguf", metavar="FILE", help="a GGUF file (GPT-2 or Llama; f32, f16, q8_0, q4_0, or llama.cpp's "
                                                    "k-quant files such as Q4_K_M): quantized weights run as such with "
                                                    "--engine fast")
    p.add_argument("--adapter", metavar="DIR", help="a PEFT LoRA adapter directory to put on the model "
                   "(zerollm.interop.peft)")
    add_quantize_base_argument(p)


def add_quantize_base_argument(p):
    """--quantize-base of sample, chat, serve and eval."""
    p.add_argument("--quantize-base", choices=("q8_0", "q4_0"), default=None,
                   help="open the model's linear layers in Q8_0 / Q4_0 blocks, each matrix quantized as it is read "
                        "(a GGUF file's own blocks are kept), and put --adapter on top unmerged: a QLoRA adapter on "
                        "the base it was trained on (docs/lora.md)")


def load_source(args, prog="zerollm sample"):
    """(model in eval mode, tokenizer) from args.ckpt, args.hf or args.gguf, with args.adapter on it
    (zerollm.interop.opening.open_model); ``prog`` names the command in the notes it prints on stderr."""
    opened = open_model(Source.of(args), prog=prog)
    for note in opened.notes:
        print(note, file=sys.stderr)
    return opened.model, opened.tokenizer
