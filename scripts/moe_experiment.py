"""Dense vs mixture of experts on tiny Shakespeare, at equal active parameters and equal steps.

    python scripts/moe_experiment.py --out runs/moe-experiment            # the runs of docs/moe.md
    python scripts/moe_experiment.py --out runs/moe-experiment --steps 300 --only dense moe-8x2

Every run is ``zerollm train --preset shakespeare-cpu`` (nanoGPT's CPU recipe: 4 blocks, C = 128,
batch 12 x 64 characters, same seed, same batches) with MoE flags on top:

    dense            the preset: one GELU MLP of width 512 per block
    moe-8x2          8 experts of width 256 per block, top-2: each token uses 2 x 256 = 512 hidden
                     units, as the dense MLP; 4x the MLP parameters in total
    moe-8x2-noaux    the same without the load-balancing loss (aux_loss_coef 0): the collapse
    moe-4x1-cap      Switch-style: 4 experts of width 512, top-1, capacity factor 1.25
    moe-4x1-cap-noaux   the same without the load-balancing loss: collapse now costs dropped tokens

It prints a table (best and last val loss, tokens/s, wall time, the machine's load average, expert
load: the busiest expert's share, starved experts, the effective number of experts exp(entropy) of
the worst block early and late, dropped pairs) and writes OUT/moe_experiment.png: the validation
curves, dropped pairs, and the expert load of the last MoE block with and without the balance loss. Runs that already finished in OUT are reused.

Tokens/s of whole runs depend on whatever else the machine does meanwhile, so the script also times
one training step (forward + backward, one thread) of every configuration in alternating rounds,
A B C D A B C D ..., and reports each one's median and its median paired ratio to dense.
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from zerollm.io import docsmode  # noqa: E402
from zerollm.training.runlog import read_log, running_mean  # noqa: E402

MOE = ["--n-inner", "256", "--n-expert", "8", "--n-expert-active", "2"]
RUNS = {
    "dense": [],
    "moe-8x2": MOE,
    "moe-8x2-noaux": MOE + ["--aux-loss-coef", "0"],
    "moe-4x1-cap": ["--n-expert", "4", "--n-expert-active", "1", "--capacity-factor", "1.25"],
    "moe-4x1-cap-noaux": ["--n-expert", "4", "--n-expert-active", "1", "--capacity-factor", "1.25",
                          "--aux-loss-coef", "0"],
}


def train(name, out, steps, threads):
    """One run (skipped if OUT/name already finished); returns its wall time and load averages."""
    run_dir = out / name
    meta_file = run_dir / "experiment.json"
    if meta_file.is_file():
        return json.loads(meta_file.read_text())
    cmd = [sys.executable, "-m", "zerollm", "train", "--preset", "shakespeare-cpu", "--out", str(run_dir),
           "--max-iters", str(steps), "--lr-decay-iters", str(steps),
           "--warmup-iters", str(min(100, steps)),            # the preset's 100, within a short run's decay
           "--eval-interval", str(max(steps // 8, 1)),
           "--checkpoint-interval", str(steps), "--sample-tokens", "0", "--no-progress",
           "--threads", str(threads), *RUNS[name]]
    print("$ " + " ".join(cmd[1:]), flush=True)
    load_before = os.getloadavg()[0]
    t0 = time.perf_counter()
    subprocess.run(cmd, check=True, cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)})
    meta = {"wall_s": time.perf_counter() - t0, "load_before": load_before, "load_after": os.getloadavg()[0],
            "cmd": " ".join(["zerollm", *cmd[3:]])}
    meta_file.write_text(json.dumps(meta))
    return meta


def summarise(name, run_dir, meta):
    records = read_log(run_dir / "log.jsonl")
    steps = [r for r in records if "loss" in r]
    evals = [r for r in records if "val_loss" in r]
    row = {"run": name, "best_val": min(r["val_loss"] for r in evals), "last_val": evals[-1]["val_loss"],
           "tokens_per_s": statistics.median(r["tokens_per_s"] for r in steps), **meta}
    if "expert_frac" in steps[-1]:
        frac = np.array([r["expert_frac"] for r in steps])                 # (steps, blocks, E)
        load = frac[-100:].mean(axis=0)                                     # (blocks, E), the last 100 steps
        row["busiest"] = float(load.max())                                  # 1/E when balanced
        row["idle"] = int((load < 0.01).sum())                              # experts that get < 1%
        row["effective_first"] = effective_experts(frac[:100].mean(axis=0))
        row["effective_last"] = effective_experts(load)
        row["load_last_block"] = [round(float(v), 3) for v in load[-1]]
        row["dropped_frac"] = float(np.mean([r["dropped_frac"] for r in steps[-100:]]))
        row["dropped_all"] = float(np.mean([r["dropped_frac"] for r in steps]))
    return row, evals


def effective_experts(load):
    """exp(entropy) of each block's load, the worst block: E when balanced, 1 when one expert takes all."""
    p = np.maximum(load, 1e-12)
    return float(np.exp(-(p * np.log(p)).sum(axis=1)).min())


def print_table(rows):
    print("\n| run | best val loss | last val loss | tokens/s (median step) | wall | load avg before/after |"
          " busiest expert share | experts < 1% | effective experts, steps 0-99 / last 100 |"
          " dropped, whole run / last 100 |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        moe = ["-"] * 4
        if "busiest" in r:
            moe = [f"{r['busiest']:.3f}", str(r["idle"]), f"{r['effective_first']:.2f} / {r['effective_last']:.2f}",
                   f"{r['dropped_all']:.3f} / {r['dropped_frac']:.3f}"]
        print(f"| {r['run']} | {r['best_val']:.4f} | {r['last_val']:.4f} | {r['tokens_per_s']:,.0f} | "
              f"{r['wall_s'] / 60:.1f} min | {r['load_before']:.1f} / {r['load_after']:.1f} | "
              + " | ".join(moe) + " |")
    for r in rows:
        if "load_last_block" in r:
            print(f"{r['run']}: expert shares of the last MoE block over the last 100 steps {r['load_last_block']}")


def paired_speed(rounds, steps_per_round=5):
    """Median step time of each configuration, timed in alternating rounds on the same batch."""
    from zerollm.cli.commands.train import _overrides, add_arguments
    from zerollm.model.gpt import GPT
    from zerollm.training.presets import build_configs
    from zerollm.engine.threads import limit_threads
    models = {}
    for name, flags in RUNS.items():
        parser = argparse.ArgumentParser()
        add_arguments(parser)
        model_cfg, train_cfg = build_configs("shakespeare-cpu", _overrides(parser.parse_args(flags)), vocab_size=65)
        models[name] = GPT(model_cfg, seed=0)
    rng = np.random.default_rng(0)
    x, y = (rng.integers(0, 65, (train_cfg.batch_size, model_cfg.block_size)) for _ in range(2))
    times = {name: [] for name in models}
    with limit_threads(1):
        for _ in range(rounds + 1):                      # the first round warms up and is not kept
            for name, model in models.items():
                t0 = time.perf_counter()
                for _ in range(steps_per_round):
                    model.forward(x, y)
                    model.backward()
                times[name].append((time.perf_counter() - t0) / steps_per_round)
    print(f"\none training step (forward + backward, 1 thread, batch {x.shape}), {rounds} alternating rounds:")
    print("| run | median step | tokens/s | step time / dense's (median of paired rounds) |\n|---|---|---|---|")
    for name, t in times.items():
        ratio = statistics.median(a / b for a, b in zip(t[1:], times["dense"][1:]))
        print(f"| {name} | {statistics.median(t[1:]) * 1000:.1f} ms | {x.size / statistics.median(t[1:]):,.0f} | "
              f"{ratio:.2f}x |")


def _load_panel(ax, path):
    steps = [r for r in read_log(path) if "expert_frac" in r]
    frac = np.array([r["expert_frac"][-1] for r in steps])                # the last MoE block
    window = max(1, len(steps) // 100)
    smooth = [running_mean(frac[:, e], window) for e in range(frac.shape[1])]
    ax.stackplot([r["step"] for r in steps], smooth)
    ax.set(xlabel="step", ylim=(0, 1), title=f"{path.parent.name}: expert load, last block")


def plot(out, curves):
    """Validation curves, dropped pairs, and the expert load of each MoE run with / without the aux loss."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, axes = plt.subplots(2, 3, figsize=(15, 7.6))
    for name, evals in curves.items():
        axes[0, 0].plot([r["step"] for r in evals], [r["val_loss"] for r in evals], "o-", ms=3, label=name)
    axes[0, 0].set(xlabel="step", ylabel="val loss", title="validation loss", ylim=(1.8, 2.5))
    axes[0, 0].legend(fontsize="small")
    for name in curves:
        steps = [r for r in read_log(out / name / "log.jsonl") if "dropped_frac" in r]
        if steps and any(r["dropped_frac"] for r in steps):
            window = max(1, len(steps) // 50)
            drop = running_mean([r["dropped_frac"] for r in steps], window)
            axes[1, 0].plot([r["step"] for r in steps], drop, label=name)
    axes[1, 0].set(xlabel="step", ylabel="share of pairs dropped", title="dropped over capacity")
    axes[1, 0].legend(fontsize="small")
    for ax in axes[:, 0]:
        ax.grid(alpha=0.3)
    for ax, name in zip(axes[:, 1:].ravel(), ("moe-8x2", "moe-8x2-noaux", "moe-4x1-cap", "moe-4x1-cap-noaux")):
        if (out / name / "log.jsonl").is_file():
            _load_panel(ax, out / name / "log.jsonl")
        else:
            ax.set_axis_off()
    fig.tight_layout()
    fig.savefig(out / "moe_experiment.png", dpi=100)
    print(f"\nfigure: {out / 'moe_experiment.png'}")


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", default="runs/moe-experiment", help="folder of the runs (default runs/moe-experiment)")
    p.add_argument("--steps", type=int, default=2000, help="optimizer steps per run (default 2000, as the preset)")
    p.add_argument("--threads", type=int, default=2, help="--threads of every run (default 2)")
    p.add_argument("--only", nargs="+", choices=list(RUNS), help="run only these")
    p.add_argument("--speed-rounds", type=int, default=10, help="rounds of the paired step timing (0 = skip)")
    args = p.parse_args()
    out = Path(args.out).resolve()
    out.mkdir(parents=True, exist_ok=True)
    rows, curves = [], {}
    for name in args.only or RUNS:
        meta = train(name, out, args.steps, args.threads)
        row, curves[name] = summarise(name, out / name, meta)
        rows.append(row)
    print_table(rows)
    (out / "results.json").write_text(json.dumps(rows, indent=1))
    plot(out, curves)
    if args.speed_rounds and docsmode.active():     # tests/test_docs_run.py runs every documented command line
        print(f"{docsmode.ENV} is set: 1 round of 1 step of the paired timing", file=sys.stderr)
        paired_speed(1, steps_per_round=1)
    elif args.speed_rounds:
        paired_speed(args.speed_rounds)


if __name__ == "__main__":
    main()
