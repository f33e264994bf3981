"""Train two presets side by side on this machine and print their losses and wall times.

    python scripts/compare_presets.py                          # shakespeare-cpu vs shakespeare-modern
    python scripts/compare_presets.py --rounds 2 --threads 2   # A B, then B A: both see the same load

Each run is exactly what a user types, ``zerollm train --preset NAME --threads N --no-progress``, in a
fresh temporary folder (kept with --keep), so the wall time covers everything: preparing the corpus,
every step, every evaluation, every checkpoint. The runs alternate (round 1: A then B, round 2: B then
A, ...), because on a shared machine the load drifts; the 1-minute load average (what ``uptime``
prints) is shown before and after each run. CPU time (user + system, all threads) is printed too: it
is less sensitive to other processes than wall time, though not immune (caches, memory bandwidth).

"best val" is the run's own estimate (the lowest val_loss in log.jsonl: eval_iters random batches);
with --full-val the final checkpoint is also scored on the whole validation split (``zerollm eval``),
which takes a few seconds and is not counted in the wall time.
"""

import argparse
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time

from zerollm.io import docsmode
from zerollm.training.runlog import read_log
from zerollm.interop.opening import Source, open_model, save_zerollm


def train(preset, out, threads):
    """One ``zerollm train`` in a child process -> dict(wall, cpu, best val loss, steps)."""
    cmd = [sys.executable, "-m", "zerollm", "train", "--preset", preset, "--out", out, "--threads", str(threads),
           "--no-progress"]
    load = os.getloadavg()[0]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    done = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != 0:
        sys.exit(f"compare_presets: {' '.join(cmd)} failed: {done.stderr.strip().splitlines()[-1:]}")
    records = read_log(os.path.join(out, "log.jsonl"))
    vals = [r["val_loss"] for r in records if "val_loss" in r]
    return dict(preset=preset, wall=wall, best=min(vals), last=vals[-1],
                cpu=(after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime),
                steps=sum("loss" in r for r in records), load=(load, os.getloadavg()[0]))


def full_val_loss(out):
    """The final checkpoint's mean loss over the whole validation split (windows of block_size)."""
    import numpy as np
    from zerollm.cli.commands.evaluate import evaluate_loss
    from zerollm.data.tokens import load_prepared
    val = np.asarray(load_prepared(os.path.join(out, "data"))[1], dtype=np.int64)
    if docsmode.active():                        # tests/test_docs_run.py: a slice, in a second
        val = val[:docsmode.limit("evaluation batches", len(val) // 64) * 64 + 1]
    return float(evaluate_loss(open_model(Source(ckpt=out), tokenizer="skip").model, val)[0])


def fmt_time(seconds):
    return f"{int(seconds // 60)} min {seconds % 60:04.1f} s"


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--presets", nargs=2, default=["shakespeare-cpu", "shakespeare-modern"], metavar=("A", "B"))
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--rounds", type=int, default=1, help="round r runs A then B when r is odd, B then A when even")
    p.add_argument("--full-val", action="store_true", help="also score each final checkpoint on the whole val split")
    p.add_argument("--keep", metavar="DIR", help="keep the run folders in DIR (default: a temporary folder, removed at the end)")
    args = p.parse_args(argv)
    if docsmode.active() and args.rounds > 1:     # tests/test_docs_run.py runs every documented command line
        print(f"{docsmode.ENV} is set: 1 round (asked for {args.rounds})", file=sys.stderr)
        args.rounds = 1
    root = args.keep or tempfile.mkdtemp(prefix="compare-presets-")
    results = []
    print(f"{'preset':20s} {'round':>5s} {'best val':>9s} {'last val':>9s} {'wall':>13s} {'cpu':>13s} "
          f"{'load 1m before/after':>21s}" + ("  full val" if args.full_val else ""), flush=True)
    for r in range(1, args.rounds + 1):
        for which in ((0, 1) if r % 2 else (1, 0)):
            preset = args.presets[which]
            out = os.path.join(root, f"round{r}-{'AB'[which]}-{preset}")
            res = dict(train(preset, out, args.threads), which=which)
            line = (f"{preset:20s} {r:5d} {res['best']:9.4f} {res['last']:9.4f} {fmt_time(res['wall']):>13s} "
                    f"{fmt_time(res['cpu']):>13s} {res['load'][0]:10.2f} / {res['load'][1]:.2f}")
            if args.full_val:
                res["full_val"] = full_val_loss(out)
                line += f"  {res['full_val']:.4f}"
            print(line, flush=True)
            results.append(res)
    summarise(results, args.presets, args.rounds)
    if not args.keep:
        shutil.rmtree(root, ignore_errors=True)


def summarise(results, presets, rounds):
    """The mean over the rounds of each preset's best val loss and times, and B's times as a share of A's."""
    def mean(which, key):
        rows = [r[key] for r in results if r["which"] == which]
        return sum(rows) / len(rows)
    print(f"\nmean over {rounds} round(s): {presets[0]} best val {mean(0, 'best'):.4f} in "
          f"{fmt_time(mean(0, 'wall'))}; {presets[1]} best val {mean(1, 'best'):.4f} in {fmt_time(mean(1, 'wall'))} "
          f"({mean(1, 'wall') / mean(0, 'wall'):.0%} of the wall time, {mean(1, 'cpu') / mean(0, 'cpu'):.0%} of the "
          "CPU time)")


if __name__ == "__main__":
    main()
