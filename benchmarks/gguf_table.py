"""The table of docs/gguf.md: GGUF file size, load time, validation loss / bits per byte and B=1
KV-cache decoding speed, at f32 / f16 / q8_0 / q4_0, for three model shapes.

    python benchmarks/gguf_table.py --out /tmp/gguf-bench --train-iters 200          # the docs' table
    python benchmarks/gguf_table.py --out /tmp/gguf-bench --only shakespeare-modern --train-iters 0 --new-tokens 8

Models: the shakespeare-modern (Llama layout) and tang (GPT-2 layout) presets' shapes with a byte
tokenizer, trained for --train-iters steps (0: random weights); and a GPT-2-124M-shaped model with
random weights (V = 50257, byte tokenizer, padded).
Loss and bits per byte are on the last 10% of the preset's corpus (up to --eval-tokens tokens; 256
for the 124M shape, whose random weights make every loss about ln 50257).
Decoding: the fast engine, one thread; q8_0 / q4_0 run through the quantized matmul kernel,
f32 / f16 (f16 is widened to float32 at load) through BLAS. Prints a Markdown table.
"""

import argparse
import math
import os
import sys
import time

import numpy as np
from zerollm.interop.opening import Source, open_model, save_zerollm

SHAPES = {"shakespeare-modern": dict(preset="shakespeare-modern", corpus="shakespeare"),
          "tang": dict(preset="tang", corpus="tang"),
          "gpt2-124M": dict(corpus="shakespeare")}
KINDS = ("f32", "f16", "q8_0", "q4_0")


def make_model(name, out, train_iters):
    """(model, tokenizer, note) for one shape."""
    from zerollm.interop import hf
    from zerollm.cli.entry import main
    from zerollm.model.gpt import GPT, GPTConfig
    from zerollm.tokenizers import ByteTokenizer
    if name == "gpt2-124M":
        cfg = GPTConfig(vocab_size=50257, block_size=1024, n_layer=12, n_head=12, n_embd=768, gelu="tanh")
        return GPT(cfg).eval(), ByteTokenizer(), "random weights"
    run = os.path.join(out, f"run-{name}")
    argv = ["train", "--preset", SHAPES[name]["preset"], "--tokenizer", "byte", "--out", run, "--no-progress",
            "--threads", "1", "--engine", "fast", "--sample-tokens", "0", "--max-iters", str(max(train_iters, 1)),
            "--eval-interval", str(max(train_iters, 1)), "--eval-iters", "2", "--gelu", "tanh"]
    if not os.path.isdir(run) and main(argv) != 0:
        sys.exit(f"training {name} failed")
    model = open_model(Source(ckpt=run), tokenizer="skip").model
    note = f"trained {train_iters} steps" if train_iters else "random weights (1 step)"
    return model, open_model(Source(ckpt=run), tokenizer="may").tokenizer, note


def validation_ids(tok, corpus, n_tokens):
    from zerollm.data import corpora
    text = corpora.path(corpus).read_text(encoding="utf-8")
    val = text[int(len(text) * 0.9):]
    ids = tok.encode(val)[:n_tokens]
    return ids, len(tok.decode(ids).encode("utf-8"))


def decode_speed(model, new_tokens):
    """Tokens per second of KV-cache generation at B = 1 after a 16-token prompt (one warm-up run first)."""
    from zerollm.generation.decode import generate
    from zerollm.generation.sample import Sampling
    prompt = np.arange(16)[None] % model.config.vocab_size
    for _ in generate(model, prompt, 2, Sampling(0.0)):
        pass
    start = time.perf_counter()
    for _ in generate(model, prompt, new_tokens, Sampling(0.0)):
        pass
    return new_tokens / (time.perf_counter() - start)


def measure(name, args):
    from zerollm.cli.commands.evaluate import evaluate_loss
    from zerollm.engine import use_engine
    from zerollm.interop.gguf import export_gguf
    from zerollm.interop.gguf_load import load_gguf
    model, tok, note = make_model(name, args.out, 0 if name == "gpt2-124M" else args.train_iters)
    big = name == "gpt2-124M"            # its loss is that of random weights: a short slice says as much
    ids, n_bytes = validation_ids(tok, SHAPES[name]["corpus"], min(args.eval_tokens, 256) if big else args.eval_tokens)
    rows = []
    for kind in KINDS:
        path = os.path.join(args.out, f"{name}-{kind}.gguf")
        export_gguf(model, path, tokenizer=tok, quant_kind=kind, overwrite=True)
        with use_engine("fast"):
            start = time.perf_counter()
            loaded, _, info = load_gguf(path)
            load_s = time.perf_counter() - start
            loss, count = evaluate_loss(loaded, ids, batch_size=4)
            speed = decode_speed(loaded, args.new_tokens)
        bpb = loss * count / math.log(2) / n_bytes
        rows.append((name, note, kind, os.path.getsize(path) / 2 ** 20, load_s, loss, bpb, speed, info["quantized"]))
        print(f"  {name} {kind}: done", file=sys.stderr, flush=True)
        del loaded
    return rows


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", required=True, help="a scratch folder for the runs and the .gguf files")
    p.add_argument("--only", choices=tuple(SHAPES), action="append", help="measure only these shapes")
    p.add_argument("--train-iters", type=int, default=200)
    p.add_argument("--eval-tokens", type=int, default=2048)
    p.add_argument("--new-tokens", type=int, default=32)
    args = p.parse_args(argv)
    os.makedirs(args.out, exist_ok=True)
    from zerollm.engine.threads import limit_threads
    rows = []
    with limit_threads(1):
        for name in args.only or SHAPES:
            rows += measure(name, args)
    print("| model | weights | file | size (MiB) | load (s) | val loss | bits/byte | decode tok/s (B=1) |")
    print("|---|---|---|---:|---:|---:|---:|---:|")
    for name, note, kind, mib, load_s, loss, bpb, speed, n_q in rows:
        how = f"quantized kernel ({n_q} matrices)" if n_q else "float32 BLAS"
        print(f"| {name} | {note} | {kind} | {mib:.2f} | {load_s:.2f} | {loss:.4f} | {bpb:.4f} | {speed:.1f} ({how}) |")


if __name__ == "__main__":
    main()
