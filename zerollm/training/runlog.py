"""The record of a training run: log.jsonl (one JSON object per step and per evaluation), loss.png,
and for a mixture of experts expert_load.png.

    {"step": 12, "loss": 2.41, "lr": 0.00013, "grad_norm": 0.9, "dt_ms": 61.2, "cpu_ms": 118.0, "tokens_per_s": 12550}
    {"step": 250, "train_loss": 2.42, "val_loss": 2.43, "val_bpb": 1.71}

A mixture of experts adds ce_loss, aux_loss, z_loss, dropped_frac and expert_frac (a list per MoE
block of the share of its routed pairs each expert got) to the step records (docs/moe.md).
"""

import json
import os

import numpy as np

from zerollm.io.fileio import atomic_write, dumps_strict, open_regular, refuse_non_regular


class JsonlLog:
    """log.jsonl, appended and flushed line by line, so a crash loses at most the line being written.

    Every line is strict JSON: a NaN or infinite value (a grad_norm without clipping, a diverged
    loss) is written as null, which every JSON reader accepts.
    """

    def __init__(self, path, keep_before=None):
        """Open for appending; with keep_before=N, first drop records of steps >= N (a resume),
        and any line that a crash cut short. A log.jsonl that is not a regular file (a pipe, a link, a
        folder) is refused, not removed nor written into."""
        self.path = path
        if keep_before is not None and os.path.exists(path):
            kept = [json.dumps(r) + "\n" for r in read_log(path) if _step(r) < keep_before]
            with atomic_write(path, "w") as f:
                f.writelines(kept)
        elif keep_before is None and os.path.lexists(path):
            refuse_non_regular(path)                 # a pipe or folder named log.jsonl is not the run's to delete
            os.remove(path)                          # a fresh run starts a fresh log
        self.f = open_regular(path, "a", encoding="utf-8")

    def write(self, **record):
        self.f.write(dumps_strict(_plain(record)) + "\n")
        self.f.flush()

    def close(self):
        self.f.close()


def _plain(obj):
    """NumPy values (an MoE's per-expert shares) as JSON-able lists and numbers, recursively."""
    if isinstance(obj, (np.ndarray, np.generic)):
        return obj.tolist()
    if isinstance(obj, dict):
        return {k: _plain(v) for k, v in obj.items()}
    return obj


def _step(record):
    step = record.get("step")
    return step if isinstance(step, int) and not isinstance(step, bool) else 0


def read_log(path, count_skipped=False):
    """Every record of a log.jsonl, in order. A line that is not a JSON object (the last line of a
    run killed while writing it, or a hand edit) is skipped: the log is a record, not a checkpoint.
    count_skipped=True: (records, how many non-blank lines were skipped)."""
    records, skipped = [], 0
    with open_regular(path, "r", what="run log", encoding="utf-8", errors="replace") as f:
        for line in filter(str.strip, f):
            try:
                record = json.loads(line)
            except (ValueError, RecursionError):
                record = None
            if isinstance(record, dict):
                records.append(record)
            else:
                skipped += 1
    return (records, skipped) if count_skipped else records


def _column(records, key):
    """One field of every record as floats; null (a non-finite value) or junk becomes NaN, a gap."""
    values = [r.get(key) for r in records]
    return [float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else float("nan") for v in values]


# What each panel of loss.png draws: its y label, then (series, where, label) with where = "step" (every
# step record, a thin line) or "eval" (the evaluation records, points with their 95% interval when the
# record has NAME_low / NAME_high). A panel is drawn only when the log has some of its series.
PANELS = {
    "loss": ({"en": "{loss}", "zh": "{loss}"},
             [("loss", "step", {"en": "train (per step)", "zh": "训练（每步）"}),
              ("train_loss", "eval", {"en": "train (eval)", "zh": "训练（评估）"}),
              ("val_loss", "eval", {"en": "heldout (eval)", "zh": "留出集（评估）"})]),
    "reward": ({"en": "reward", "zh": "奖励"},
               [("reward", "step", {"en": "rollouts (per step)", "zh": "采样（每步）"}),
                ("reward", "eval", {"en": "heldout (eval)", "zh": "留出集（评估）"}),
                ("eval_reward", "eval", {"en": "heldout (eval)", "zh": "留出集（评估）"})]),
    "success": ({"en": "success rate", "zh": "成功率"},
                [("success", "step", {"en": "rollouts (per step)", "zh": "采样（每步）"}),
                 ("success", "eval", {"en": "heldout (eval, 95% interval)", "zh": "留出集（评估，95% 区间）"}),
                 ("eval_success", "eval", {"en": "heldout (eval, 95% interval)", "zh": "留出集（评估，95% 区间）"})]),
    "accuracy": ({"en": "pairwise accuracy", "zh": "成对准确率"},
                 [("accuracy", "step", {"en": "train batch (per step)", "zh": "训练批（每步）"}),
                  ("val_accuracy", "eval", {"en": "heldout (eval, 95% interval)", "zh": "留出集（评估，95% 区间）"})]),
    "kl": ({"en": "KL to the reference", "zh": "与参考模型的 KL"},
           [("kl", "step", {"en": "per step", "zh": "每步"})]),
}
LOSS_NAMES = {"lm": {"en": "cross-entropy loss", "zh": "交叉熵损失"},
              "sft": {"en": "cross-entropy loss (answer tokens)", "zh": "交叉熵损失（回答部分）"},
              "reward": {"en": "Bradley-Terry loss", "zh": "Bradley-Terry 损失"},
              "dpo": {"en": "DPO loss", "zh": "DPO 损失"},
              "ppo": {"en": "PPO loss (policy + value)", "zh": "PPO 损失（策略 + 价值）"},
              "grpo": {"en": "GRPO loss (about 0 on policy: a group's advantages sum to 0)",
                       "zh": "GRPO 损失（同策略时约为 0：一组的优势之和为 0）"}}
STEP_WORD = {"en": "step", "zh": "步数"}


def _series(records, key, where):
    """(steps, values, (low, high) or None) of one series; records with a non-number there are left out."""
    rows = [r for r in records if isinstance(r.get(key), (int, float)) and not isinstance(r.get(key), bool)
            and (where == "step") == ("loss" in r)]
    steps, values = _column(rows, "step"), _column(rows, key)
    if where == "eval" and rows and all(f"{key}_low" in r and f"{key}_high" in r for r in rows):
        return steps, values, (_column(rows, f"{key}_low"), _column(rows, f"{key}_high"))
    return steps, values, None


def plot_losses(log_path, png_path, kind="lm", lang="en", families=None):
    """loss.png from log.jsonl: one panel per kind of number the run logged (its loss, reward, success,
    accuracy, KL), per-step lines and evaluation points with their intervals, labelled in ``lang`` (zh
    needs ``families`` with a CJK font, else the labels fall back to English). Needs matplotlib.
    Returns what it drew: [(y label, [legend labels])], one per panel."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    lang = lang if lang == "en" or families else "en"
    records = read_log(log_path)
    loss_name = LOSS_NAMES.get(kind, {"en": f"{kind} loss", "zh": f"{kind} 损失"})[lang]
    panels = []
    for name, (ylabel, series) in PANELS.items():
        drawn = [(key, where, label[lang], _series(records, key, where)) for key, where, label in series]
        drawn = [d for d in drawn if d[3][0]]                    # only what the log holds: no empty legend entries
        if drawn:
            panels.append((ylabel[lang].format(loss=loss_name), drawn))
    with matplotlib.rc_context({"font.family": families} if families else {}):
        fig, axes = plt.subplots(len(panels) or 1, 1, figsize=(8, 1.2 + 2.6 * max(len(panels), 1)),
                                 sharex=True, squeeze=False)
        for ax, (ylabel, drawn) in zip(axes[:, 0], panels):
            for key, where, label, (steps, values, interval) in drawn:
                if where == "step":
                    ax.plot(steps, values, lw=0.8, alpha=0.6, label=label)
                elif interval is None:
                    ax.plot(steps, values, "o-", label=label)
                else:
                    low, high = np.asarray(interval[0]), np.asarray(interval[1])
                    ax.errorbar(steps, values, yerr=[np.asarray(values) - low, high - np.asarray(values)],
                                fmt="o-", capsize=3, label=label)
            ax.set_ylabel(ylabel)
            ax.grid(alpha=0.3)
            ax.legend(fontsize="small")
        axes[-1, 0].set_xlabel(STEP_WORD[lang])
        fig.tight_layout()
        with atomic_write(png_path, "wb") as f:
            fig.savefig(f, format="png", dpi=110)
        plt.close(fig)
    return [(ylabel, [label for _, _, label, _ in drawn]) for ylabel, drawn in panels]


def running_mean(values, window):
    """Mean over a centred window of ``window`` points; the ends repeat the first and last value, so
    the curve does not sag toward 0 at the edges.

    >>> running_mean([1.0, 2.0, 6.0], 3).round(3).tolist()      # (1+1+2)/3, (1+2+6)/3, (2+6+6)/3
    [1.333, 3.0, 4.667]
    """
    v = np.asarray(values, dtype=np.float64)
    padded = np.pad(v, (window // 2, window - 1 - window // 2), mode="edge")
    return np.convolve(padded, np.ones(window) / window, mode="valid")


def _shares(value, shape):
    """True for a (blocks, E) table of finite numbers: a hand-edited or cut line is left out, not drawn."""
    try:
        table = np.asarray(value, dtype=np.float64)
    except (TypeError, ValueError):
        return False
    return table.shape == shape and bool(np.all(np.isfinite(table)))


def plot_expert_load(log_path, png_path, layers=None):
    """expert_load.png from log.jsonl: for each MoE block, the share of routed pairs each expert took,
    step by step (stacked, smoothed over ~1% of the run). Even bands are a balanced router; one band
    swallowing the others is the collapse the load-balancing loss prevents. Needs matplotlib.
    ``layers``: the blocks' indices for the titles (config.moe_layers)."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    records = [r for r in read_log(log_path) if "expert_frac" in r]
    if not records:
        return False
    shape = np.shape(records[-1]["expert_frac"])
    records = [r for r in records if _shares(r.get("expert_frac"), shape) and isinstance(r.get("step"), int)]
    if len(shape) != 2 or not records:
        return False
    steps = np.array([r["step"] for r in records])
    frac = np.array([r["expert_frac"] for r in records], dtype=np.float64)   # (steps, blocks, E)
    window = max(1, len(steps) // 100)
    n_blocks, E = frac.shape[1:]
    layers = layers if layers is not None else list(range(n_blocks))
    fig, axes = plt.subplots(n_blocks, 1, figsize=(8, 1.2 + 1.6 * n_blocks), sharex=True, squeeze=False)
    for b, ax in enumerate(axes[:, 0]):
        smooth = [running_mean(frac[:, b, e], window) for e in range(E)]
        ax.stackplot(steps, smooth, labels=[f"expert {e}" for e in range(E)])
        for level in np.arange(1, E) / E:                             # where the bands sit when balanced
            ax.axhline(level, color="k", lw=0.5, ls=":", alpha=0.5)
        ax.set_ylim(0, 1)
        ax.set_ylabel(f"block {layers[b]}")
    axes[0, 0].set_title("share of routed tokens per expert")
    axes[0, 0].legend(loc="upper left", bbox_to_anchor=(1.0, 1.0), fontsize="small")
    axes[-1, 0].set_xlabel("step")
    fig.tight_layout()
    with atomic_write(png_path, "wb") as f:
        fig.savefig(f, format="png", dpi=110)
    plt.close(fig)
    return True


# ----------------------------------------------------------------------------
# fonts: a CJK font for Chinese labels, when the machine has one (zerollm.teach.heads uses it too)

CJK_FONT_HINTS = ("cjk", "han sans", "han serif", "wenquanyi", "simhei", "simsun", "yahei", "pingfang",
                  "heiti", "songti", "hiragino sans gb", "droid sans fallback", "ar pl", "noto sans sc")


def _charmap(path):
    from matplotlib.ft2font import FT2Font
    try:
        return set(FT2Font(path).get_charmap())
    except (OSError, RuntimeError, ValueError):     # an unreadable font file: just not a candidate
        return set()


def import_font_manager():
    """matplotlib's font manager (ImportError without matplotlib, as for every plot)."""
    from matplotlib import font_manager
    return font_manager


def find_fonts(font_manager):
    """(families, glyphs): DejaVu Sans (always shipped with matplotlib) plus a CJK font if one is
    installed, and the set of code points they can draw. Asking for a glyph outside that set is
    what makes matplotlib warn "Glyph ... missing from font(s)"."""
    base = font_manager.findfont(font_manager.FontProperties(family="DejaVu Sans"), fallback_to_default=True)
    families, glyphs = ["DejaVu Sans"], _charmap(base)
    for entry in font_manager.fontManager.ttflist:
        if any(h in entry.name.lower() for h in CJK_FONT_HINTS):
            cmap = _charmap(entry.fname)
            if ord("中") in cmap:
                return families + [entry.name], glyphs | cmap
    return families, glyphs
