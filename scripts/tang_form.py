"""Sample poems from a checkpoint trained on tang_poems.txt and report how many keep the form.

    python scripts/tang_form.py --ckpt runs/tang --poems 200 --seed 0

Each sample starts after a newline (the start of a poem) and stops at the next newline.
"""

import argparse

import numpy as np

from zerollm.io import docsmode
from zerollm.align.tasks.poems import form_report
from zerollm.generation.decode import generate
from zerollm.generation.sample import Sampling
from zerollm.interop.opening import Source, open_model, save_zerollm


def opened(path):
    """(model, tokenizer, checkpoint) of a zerollm run, step or model directory."""
    o = open_model(Source(ckpt=str(path)), tokenizer="may")
    return o.model, o.tokenizer, o.checkpoint


def sample_poems(model, tok, n, seed, temperature=0.8, top_k=None, batch=50, max_len=60):
    rng = np.random.default_rng(seed)
    newline = tok.encode("\n")
    poems = []
    while len(poems) < n:
        b = min(batch, n - len(poems))
        rows = np.array([newline] * b)
        out = [[] for _ in range(b)]
        for ids in generate(model, rows, max_len, Sampling(temperature, top_k), rng=rng):
            for row, t in zip(out, ids):
                row.append(int(t))
        for row in out:
            text = tok.decode(row)
            poems.append(text.split("\n")[0] if "\n" in text else text + " (unfinished)")
    return poems


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--ckpt", required=True)
    p.add_argument("--poems", type=int, default=200)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--temperature", type=float, default=0.8)
    p.add_argument("--show", type=int, default=10, help="print this many samples")
    args = p.parse_args()
    model, tok, ckpt = opened(args.ckpt)
    poems = sample_poems(model, tok, docsmode.limit("poems", args.poems), args.seed, args.temperature)
    for poem in poems[:args.show]:
        print(poem)
    r = form_report(poems)
    print(f"\ncheckpoint step {ckpt.step}, temperature {args.temperature}: {r['poems']} poems")
    print(f"  all couplets five-character:         {r['poems_ok']:.1%}")
    print(f"  ... and 2 or 4 couplets (绝句/律诗):  {r['poems_ok_2_or_4']:.1%}")
    print(f"  well-formed couplets among all:      {r['couplets_ok']:.1%}")


if __name__ == "__main__":
    main()
