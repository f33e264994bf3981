"""``zerollm eval``: the loss of a trained checkpoint on a text file.

The text is encoded with the checkpoint's tokenizer and cut into consecutive windows of block_size
tokens; every token after the first is predicted once, and the mean cross-entropy is reported
(with perplexity = exp(loss)), and the same sum in bits per UTF-8 byte of the text, which compares
models with different tokenizers (zerollm.evaluate.bpb).
"""

import os
import sys

import numpy as np

from zerollm.model import budget
from zerollm.io.argtypes import FIELD_RANGES, Range
from zerollm.model.budget import add_force_argument
from zerollm.engine import add_engine_argument, apply_engine_argument
from zerollm.io.errors import ZeroLLMError
from zerollm.tokenizers.char import UnknownCharacters
from zerollm.engine.memory import keep_freed_memory
from zerollm.engine.threads import add_threads_argument, limit_threads


def add_arguments(p):
    src = p.add_mutually_exclusive_group(required=True)
    src.add_argument("--ckpt", metavar="DIR", help="a training run directory, a step directory or a zerollm model "
                     "directory")
    src.add_argument("--hf", metavar="DIR", help="a Hugging Face model directory (config.json + *.safetensors)")
    src.add_argument("--gguf", metavar="FILE", help="a GGUF file (GPT-2 or Llama; f32, f16, q8_0, q4_0, or "
                                                    "llama.cpp's k-quant files such as Q4_K_M)")
    p.add_argument("--data", metavar="FILE", required=True, help="a UTF-8 text file")
    p.add_argument("--max-tokens", type=Range(int, 2, 2 ** 40), default=None, help="evaluate only the first N tokens")
    p.add_argument("--batch-size", type=FIELD_RANGES["batch_size"], default=16,
                   help="windows per forward pass (default 16)")
    add_force_argument(p)
    p.add_argument("--adapter", metavar="DIR", help="a PEFT LoRA adapter directory to put on the model")
    from zerollm.cli.source import add_quantize_base_argument
    add_quantize_base_argument(p)
    add_threads_argument(p)
    add_engine_argument(p)


def evaluate_loss(model, ids, batch_size=16):
    """Mean next-token loss over non-overlapping windows of (up to) block_size predictions."""
    from zerollm.evaluate.bpb import score_text
    loss, count, _ = score_text(model, ids, batch_size=batch_size)
    return loss, count


def _file_size(path):
    try:
        return os.path.getsize(path)
    except OSError:
        return 0            # read_corpus says what is wrong with it


def run(args):
    keep_freed_memory()             # reuse freed activation memory step after step (zerollm.engine.memory)
    apply_engine_argument(args)     # --engine numpy|fast (zerollm.engine)
    from zerollm.data.tokens import read_corpus
    from zerollm.interop.opening import Source, open_model
    opened = open_model(Source.of(args), prog="zerollm eval")
    for note in opened.notes:
        print(note, file=sys.stderr)
    model, tok, ckpt = opened.model, opened.tokenizer, opened.checkpoint
    source = (args.gguf or args.hf if args.gguf or args.hf else f"checkpoint step {ckpt.step}" if ckpt is not None
              else "a model directory")
    cfg = model.config
    budget.require(budget.tokenizing(_file_size(args.data), hint="--data (a shorter file)"), force=args.force)
    text, _ = read_corpus(args.data)
    try:
        ids = tok.encode(text)[:args.max_tokens]
    except UnknownCharacters as err:
        raise ZeroLLMError(err.command_line(f"--data {args.data}")) from None
    windows = min(args.batch_size, max(1, len(ids) // cfg.block_size))
    budget.require(budget.inference(cfg, windows, cfg.block_size, budget.Purpose("evaluation", "--batch-size"),
                                    loss=True), force=args.force)
    from zerollm.evaluate.bpb import bpb, score_text, token_byte_lengths
    with limit_threads(args.threads):
        loss, count, bits = score_text(model, ids, token_byte_lengths(tok), args.batch_size)
    shown = f", {bpb(*bits):.4f} bits per byte" if bits is not None else ""
    print(f"{args.data}: loss {loss:.4f} (perplexity {np.exp(loss):.2f}){shown} over {count:,} predicted tokens, "
          f"{source}")
    return 0
