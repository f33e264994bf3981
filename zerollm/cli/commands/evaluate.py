"""``zerollm eval``: the loss of a trained checkpoint on a text file.

The text is encoded with the checkpoint's tokenizer and cut into consecutive windows of block_size
tokens; every token after the first is predicted once, and the mean cross-entropy is reported
(with perplexity = exp(loss)).
"""

import os

import numpy as np

from zerollm.model import budget
from zerollm.io.argtypes import FIELD_RANGES, Range
from zerollm.model.budget import add_force_argument
from zerollm.engine import add_engine_argument, apply_engine_argument
from zerollm.io.errors import ZeroLLMError
from zerollm.engine.memory import keep_freed_memory
from zerollm.engine.threads import add_threads_argument, limit_threads


def add_arguments(p):
    src = p.add_mutually_exclusive_group(required=True)
    src.add_argument("--ckpt", metavar="DIR", help="a training run directory or a step directory")
    src.add_argument("--gguf", metavar="FILE", help="a GGUF file (GPT-2 or Llama; f32, f16, q8_0 or q4_0)")
    p.add_argument("--data", metavar="FILE", required=True, help="a UTF-8 text file")
    p.add_argument("--max-tokens", type=Range(int, 2, 2 ** 40), default=None, help="evaluate only the first N tokens")
    p.add_argument("--batch-size", type=FIELD_RANGES["batch_size"], default=16,
                   help="windows per forward pass (default 16)")
    add_force_argument(p)
    add_threads_argument(p)
    add_engine_argument(p)


def evaluate_loss(model, ids, batch_size=16):
    """Mean next-token loss over non-overlapping windows of (up to) block_size predictions."""
    T = model.config.block_size
    ids = np.asarray(ids, dtype=np.int64)
    if len(ids) < 2:
        raise ZeroLLMError("the text has fewer than 2 tokens: nothing to predict")
    starts = list(range(0, len(ids) - 1, T))
    total, count = 0.0, 0
    model.eval()
    full = [s for s in starts if s + T + 1 <= len(ids)]
    for i in range(0, len(full), batch_size):                         # full windows, batched
        rows = np.stack([ids[s:s + T + 1] for s in full[i:i + batch_size]])
        _, loss = model.forward(rows[:, :-1], rows[:, 1:])
        total, count = total + loss * rows[:, 1:].size, count + rows[:, 1:].size
    for s in starts[len(full):]:                                      # the short tail, if any
        row = ids[s:][None]
        _, loss = model.forward(row[:, :-1], row[:, 1:])
        total, count = total + loss * (row.shape[1] - 1), count + row.shape[1] - 1
    return total / count, count


def _file_size(path):
    try:
        return os.path.getsize(path)
    except OSError:
        return 0            # read_corpus says what is wrong with it


def run(args):
    keep_freed_memory()             # reuse freed activation memory step after step (zerollm.engine.memory)
    apply_engine_argument(args)     # --engine numpy|fast (zerollm.engine)
    from zerollm.training.checkpoint import load_model
    from zerollm.data.tokens import read_corpus
    if args.gguf:
        from zerollm.interop.gguf_load import load_gguf_for
        (model, tok), source = load_gguf_for(args.gguf, "zerollm eval", force=args.force), args.gguf
    else:
        model, tok, ckpt = load_model(args.ckpt, force=args.force)
        source = f"checkpoint step {ckpt.step}"
    if tok is None:
        raise ZeroLLMError(f"{args.ckpt} has no tokenizer.json, so the text cannot be encoded")
    cfg = model.config
    budget.require(budget.tokenizing(_file_size(args.data), hint="--data (a shorter file)"), force=args.force)
    text, _ = read_corpus(args.data)
    ids = tok.encode(text)[:args.max_tokens]
    windows = min(args.batch_size, max(1, len(ids) // cfg.block_size))
    budget.require(budget.inference(cfg, windows, cfg.block_size, loss=True, what="evaluation", hint="--batch-size"),
                   force=args.force)
    with limit_threads(args.threads):
        loss, count = evaluate_loss(model, ids, args.batch_size)
    print(f"{args.data}: loss {loss:.4f} (perplexity {np.exp(loss):.2f}) over {count:,} predicted tokens, "
          f"{source}")
    return 0
