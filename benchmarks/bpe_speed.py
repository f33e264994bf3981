"""How fast is zerollm's BPE? Training time per vocabulary size and encoding time, as a table.

    python benchmarks/bpe_speed.py                      # the shipped tinyshakespeare
    python benchmarks/bpe_speed.py --corpus tang --sizes 512 1024
    python benchmarks/bpe_speed.py --corpus my_text.txt

--corpus is a corpus that ships with zerollm (shakespeare, tang) or a path to a text file.
"""

import argparse
import time
from pathlib import Path

from zerollm.data import corpora
from zerollm.tokenizers import BPETokenizer


def timed(fn, *args, **kwargs):
    start = time.perf_counter()
    result = fn(*args, **kwargs)
    return result, time.perf_counter() - start


def bench(text, vocab_size, pattern):
    """One row: train, encode with an empty chunk cache ('cold'), encode again ('warm'), decode."""
    tok, t_train = timed(BPETokenizer.train, text, vocab_size, pattern=pattern)
    ids, t_cold = timed(tok.encode, text)
    _, t_warm = timed(tok.encode, text)
    back, t_decode = timed(tok.decode, ids)
    assert back == text, "round trip failed"
    return {"vocab": tok.vocab_size, "train_s": t_train, "encode_s": t_cold, "encode_warm_s": t_warm,
            "decode_s": t_decode, "tokens": len(ids), "bytes_per_token": len(text.encode()) / len(ids)}


def main(argv=None):
    p = argparse.ArgumentParser(description="BPE training and encoding speed")
    p.add_argument("--corpus", default="shakespeare", help="shakespeare, tang, or a text file's path")
    p.add_argument("--sizes", type=int, nargs="+", default=[512, 1024, 4096])
    p.add_argument("--pattern", choices=("gpt2", "gpt4"), default="gpt4")
    args = p.parse_args(argv)
    path = corpora.path(args.corpus) if args.corpus in corpora.CORPORA else Path(args.corpus)
    text = path.read_text(encoding="utf-8")
    print(f"{path.name}: {len(text):,} characters, {len(text.encode()):,} bytes; pattern {args.pattern}")
    header = (f"{'vocab':>6} {'train s':>8} {'encode s':>9} {'warm s':>7} {'decode s':>9} "
              f"{'tokens':>10} {'bytes/tok':>9}")
    print(header)
    print("-" * len(header))
    for size in args.sizes:
        r = bench(text, size, args.pattern)
        print(f"{r['vocab']:>6} {r['train_s']:>8.2f} {r['encode_s']:>9.2f} {r['encode_warm_s']:>7.2f} "
              f"{r['decode_s']:>9.2f} {r['tokens']:>10,} {r['bytes_per_token']:>9.2f}")


if __name__ == "__main__":
    main()
