"""The record of a training run: log.jsonl (one JSON object per step and per evaluation) and loss.png.

    {"step": 12, "loss": 2.41, "lr": 0.00013, "grad_norm": 0.9, "dt_ms": 61.2, "tokens_per_s": 12550}
    {"step": 250, "train_loss": 2.42, "val_loss": 2.43}
"""

import json
import os

from zerollm.fileio import atomic_write


class JsonlLog:
    """log.jsonl, appended and flushed line by line, so a crash loses at most the line being written."""

    def __init__(self, path, keep_before=None):
        """Open for appending; with keep_before=N, first drop records of steps >= N (a resume)."""
        self.path = path
        if keep_before is not None and os.path.exists(path):
            with open(path, encoding="utf-8") as f:
                kept = [line for line in f if line.strip() and json.loads(line).get("step", 0) < keep_before]
            with atomic_write(path, "w") as f:
                f.writelines(kept)
        elif keep_before is None and os.path.exists(path):
            os.remove(path)                          # a fresh run starts a fresh log
        self.f = open(path, "a", encoding="utf-8")

    def write(self, **record):
        self.f.write(json.dumps(record) + "\n")
        self.f.flush()

    def close(self):
        self.f.close()


def read_log(path):
    """Every record of a log.jsonl, in order."""
    with open(path, encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def plot_losses(log_path, png_path):
    """loss.png from log.jsonl: the per-step training loss and the eval losses. Needs matplotlib."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    records = read_log(log_path)
    steps = [r for r in records if "loss" in r]
    evals = [r for r in records if "val_loss" in r]
    fig, ax = plt.subplots(figsize=(8, 4.5))
    ax.plot([r["step"] for r in steps], [r["loss"] for r in steps], lw=0.8, alpha=0.6, label="train (per step)")
    ax.plot([r["step"] for r in evals], [r["train_loss"] for r in evals], "o-", label="train (eval)")
    ax.plot([r["step"] for r in evals], [r["val_loss"] for r in evals], "o-", label="val (eval)")
    ax.set_xlabel("step")
    ax.set_ylabel("cross-entropy loss")
    ax.grid(alpha=0.3)
    ax.legend()
    fig.tight_layout()
    with atomic_write(png_path, "wb") as f:
        fig.savefig(f, format="png", dpi=110)
    plt.close(fig)
