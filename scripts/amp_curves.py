"""The same run in float32, emulated bf16 and emulated fp16 (``zerollm train --amp``): loss curves in one PNG.

    python scripts/amp_curves.py --out runs/amp --png docs/amp_curves.png      # shakespeare-cpu, --threads 2
    python scripts/amp_curves.py --out runs/amp --png docs/amp_curves.png --plot-only   # redraw from the logs

Every run starts from the same seed (same initial weights, same batches), so the curves differ only by
the precision of the matrix products. Prints a table: best and final val loss, fp16's skipped steps and
final loss scale, and the wall time (which measures the emulation's rounding, not real 16-bit speed).
"""

import argparse
import os
import subprocess
import sys
import time

from zerollm.io.fileio import read_json, write_json
from zerollm.training.runlog import read_log

MODES = ("off", "bf16", "fp16")
LABEL = {"off": "float32", "bf16": "bf16 (emulated)", "fp16": "fp16 + loss scaling (emulated)"}


def train(preset, amp, out, threads, extra):
    cmd = [sys.executable, "-m", "zerollm", "train", "--preset", preset, "--amp", amp, "--out", out,
           "--threads", str(threads), "--no-progress", "--sample-tokens", "0", *extra]
    t0 = time.perf_counter()
    done = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    if done.returncode != 0:
        sys.exit(f"amp_curves: {' '.join(cmd)} failed: {done.stderr.strip().splitlines()[-1:]}")
    wall = time.perf_counter() - t0
    write_json(os.path.join(out, "wall.json"), {"wall_s": wall, "load_1m_after": os.getloadavg()[0]})


def summary(out):
    records = read_log(os.path.join(out, "log.jsonl"))
    steps = [r for r in records if "loss" in r]
    vals = [r for r in records if "val_loss" in r]
    wall_path = os.path.join(out, "wall.json")
    wall = read_json(wall_path)["wall_s"] if os.path.exists(wall_path) else float("nan")
    return dict(steps=steps, vals=vals, best=min(r["val_loss"] for r in vals), last=vals[-1]["val_loss"],
                skipped=sum(bool(r.get("skipped")) for r in steps),
                scale=steps[-1].get("loss_scale"), wall=wall)


def smooth(values, k=50):
    """Running mean over the last k values (the per-step loss is noisy)."""
    out, total = [], 0.0
    for i, v in enumerate(values):
        total += v - (values[i - k] if i >= k else 0.0)
        out.append(total / min(i + 1, k))
    return out


def plot(results, png):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from zerollm.io.fileio import atomic_write
    fig, (left, right, diff) = plt.subplots(1, 3, figsize=(15, 4.2))
    base = smooth([r["loss"] for r in results["off"]["steps"]])
    for mode, res in results.items():
        steps, losses = [r["step"] for r in res["steps"]], smooth([r["loss"] for r in res["steps"]])
        left.plot(steps, losses, lw=1.2, label=LABEL[mode])
        right.plot([r["step"] for r in res["vals"]], [r["val_loss"] for r in res["vals"]], "o-", ms=3,
                   label=f"{LABEL[mode]}: best {res['best']:.3f}")
        diff.plot(steps, [a - b for a, b in zip(losses, base)], lw=1.0, label=LABEL[mode])
    left.set_title("training loss (running mean of 50 steps)")
    right.set_title("validation loss")
    diff.set_title("training loss minus float32's (same running mean)")
    for ax in (left, right, diff):
        ax.set_xlabel("step")
        ax.grid(alpha=0.3)
        ax.legend()
    left.set_ylim(top=3.0)
    right.set_ylim(top=3.0)
    fig.tight_layout()
    with atomic_write(png, "wb") as f:
        fig.savefig(f, format="png", dpi=100)
    plt.close(fig)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--preset", default="shakespeare-cpu")
    p.add_argument("--out", required=True, metavar="DIR", help="one run folder per mode: DIR/off, DIR/bf16, DIR/fp16")
    p.add_argument("--png", required=True)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--plot-only", action="store_true", help="do not train; redraw from the runs in --out")
    p.add_argument("extra", nargs="*", help="more zerollm train flags, after --, e.g. -- --max-iters 500")
    args = p.parse_args(argv)
    results = {}
    for mode in MODES:
        out = os.path.join(args.out, mode)
        if not args.plot_only:
            train(args.preset, mode, out, args.threads, args.extra)
        results[mode] = summary(out)
        res = results[mode]
        scaler = f", {res['skipped']} steps skipped, final loss scale {res['scale']:g}" if mode == "fp16" else ""
        print(f"{LABEL[mode]:32s} best val {res['best']:.4f}, last val {res['last']:.4f}, "
              f"wall {res['wall']:.0f} s{scaler}", flush=True)
    plot(results, args.png)
    print(f"wrote {args.png}")


if __name__ == "__main__":
    main()
