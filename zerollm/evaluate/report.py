"""``zerollm report``: one self-contained HTML page that puts training runs side by side (a report card).

For each run (a pipeline base -> SFT -> DPO / GRPO / PPO, or any runs): what it is (the objective and
where it started), its parameters, its data, its steps, the wall and CPU time of those steps (the sums
of log.jsonl's dt_ms and cpu_ms), its loss curves, its last validation loss and bits per byte, and
every score lm-eval gave it (``lm_eval ... --output_path DIR``: the results_*.json files), each with
its 95% interval: Wilson's for a rate (acc, acc_norm, success), mean ± 1.96 standard errors otherwise;
none where no example was counted (n=0). A metric whose value cannot be shown (not a finite number, or
a rate outside 0..1) is left out with one warning line naming the file, the task and the metric.
A results file belongs to the run its model_args ``ckpt=`` names. A relative ``ckpt=`` (lm_eval ran in
another folder) that is none of the runs as given, from the current folder, goes to the one run whose
path ends with it (``ckpt=runs/base`` is ``lm/runs/base``); none or several such runs is an error.

The page has no script or style from elsewhere, no request at all: the curves are inline SVG, the
Chinese interface is drawn with the explainer's font subset (zerollm.teach.explain.fontsubset), whose
characters are the only ones the interface uses. 中文 / English switch in place.
"""

import base64
import glob
import html
import json
import math
import os
import sys
import warnings

import numpy as np

from zerollm.io.errors import ZeroLLMError
from zerollm.io.fileio import NotRegularFile, folder_not_found, open_regular
from zerollm.align.tasks.evaluate import wilson

RATES = ("acc", "acc_norm", "success")
LABELS = {       # key: (English, 中文); the Chinese uses only characters of the explainer's font subset
    "title": ("Training report", "训练和评测"),
    "run": ("run", "模型"),
    "kind": ("objective", "训练方法"),
    "start": ("started from", "上一个模型"),
    "params": ("parameters", "参数"),
    "data": ("data", "训练文件"),
    "steps": ("steps", "步数"),
    "wall": ("wall time of the steps", "用时"),
    "cpu": ("CPU time of the steps", "CPU 用时"),
    "val_loss": ("validation loss", "验证损失"),
    "val_bpb": ("validation bits per byte", "验证 bpb"),
    "curves": ("loss curves (training steps; dots: validation)", "损失曲线（训练每一步；点：验证）"),
    "axis_loss": ("loss", "损失"),
    "axis_step": ("training step", "训练步"),
    "scores": ("lm-eval scores, 95% interval", "lm-eval 评测结果，95% CI"),
    "task": ("task", "评测"),
    "metric": ("metric", "度量"),
    "n": ("examples", "例子数"),
    "none": ("—", "—"),
    "metric_acc": ("accuracy", "答对率"),
    "metric_acc_norm": ("accuracy, per character", "答对率（按长度）"),
    "metric_success": ("success", "答对率"),
    "metric_reward": ("mean reward", "平均分"),
}


# ----------------------------------------------------------------------------
# reading the runs

def read_jsonl(path):
    """The records of a run's log.jsonl ([] without one). More than one line that is not a record (one is
    the last line of a run killed while writing it) gets a warning: the page leaves them out."""
    from zerollm.training.runlog import read_log
    if not os.path.lexists(path):
        return []
    records, skipped = read_log(path, count_skipped=True)
    if skipped > 1:
        warnings.warn(f"{path}: {skipped} lines are not JSON records of a run (edited by hand, or another "
                      "file?); the report leaves them out")
    return records


def run_summary(run_dir):
    """What the page shows of one run directory, read from its files."""
    from zerollm.training.checkpoint import load_checkpoint
    if not os.path.isdir(run_dir):
        raise folder_not_found(run_dir, "run directory", "give the --out of a zerollm training command")
    ckpt = load_checkpoint(run_dir, optimizer=False)
    records = read_jsonl(os.path.join(run_dir, "log.jsonl"))
    # rows whose fields are not numbers (a log edited by hand, or another tool's) are left out
    steps = [r for r in records if _numbers(r, "step", "loss", "dt_ms")]
    evals = [r for r in records if _numbers(r, "step", "val_loss")]
    objective = ckpt.objective or {"kind": "lm"}
    cpu = [r.get("cpu_ms") if _numbers(r, "cpu_ms") else None for r in steps]
    return {
        "name": os.path.basename(os.path.normpath(run_dir)), "path": os.path.realpath(run_dir),
        "kind": objective.get("kind", "lm"), "start": _start(objective),
        "params": int(sum(a.size for a in ckpt.params.values())), "data": _data(run_dir),
        "steps": int(ckpt.step),
        "wall_s": sum(r["dt_ms"] for r in steps) / 1000,
        "cpu_s": sum(cpu) / 1000 if cpu and all(c is not None for c in cpu) else None,
        "curve": [[r["step"], r["loss"]] for r in steps],
        "val_curve": [[r["step"], r["val_loss"]] for r in evals],
        "val_loss": evals[-1]["val_loss"] if evals else None,
        "val_bpb": evals[-1].get("val_bpb") if evals and _numbers(evals[-1], "val_bpb") else None,
    }


def _numbers(record, *fields):
    """Does log.jsonl row ``record`` hold a finite number (not a bool) in each of ``fields``?"""
    return isinstance(record, dict) and all(
        isinstance(record.get(f), (int, float)) and not isinstance(record.get(f), bool)
        and math.isfinite(record.get(f)) for f in fields)


def _start(objective):
    start = objective.get("start") or {}
    path = start.get("path") if isinstance(start, dict) else None
    return os.path.basename(os.path.normpath(path)) if path else None


def _data(run_dir):
    """Pre-training: the corpus and its token counts (data/meta.json); a later stage: its input files."""
    meta = os.path.join(run_dir, "data", "meta.json")
    if os.path.lexists(meta):
        try:
            with open_regular(meta, "r", what="meta.json", encoding="utf-8") as f:
                m = json.load(f)
            source = (m.get("source") or {}).get("file", "?")
            return f"{source}: {m['train_tokens']:,} + {m['val_tokens']:,} {m['tokenizer']} tokens"
        except NotRegularFile:
            raise
        except (OSError, ValueError, RecursionError, AttributeError, KeyError, TypeError):
            return "data/meta.json is unreadable (damaged or not written by zerollm prepare)"   # the report goes on
    inputs = sorted(glob.glob(os.path.join(run_dir, "inputs", "*")))
    return ", ".join(f"{os.path.basename(p)} ({_lines(p):,})" for p in inputs) or None


def _lines(path):
    with open_regular(path, "r", what="copy of a run's input", encoding="utf-8") as f:
        return sum(1 for line in f if line.strip())


# ----------------------------------------------------------------------------
# reading lm-eval's results

def _warn(message):
    print(f"zerollm report: warning: {' '.join(message.split())}", file=sys.stderr)    # one line, always


def read_result_files(paths, warn=_warn):
    """[(file, ckpt as model_args give it, its real path, {task: [score, ...]})], one per lm-eval
    results_*.json file; ``warn`` gets one line per metric left out."""
    out = []
    for path in paths:
        try:
            with open_regular(path, "r", what="results_*.json file", encoding="utf-8") as f:
                data = json.load(f)
            ckpt = _model_arg(data["config"]["model_args"], "ckpt")
            real = os.path.realpath(ckpt) if ckpt is not None else None
            tasks = _task_scores(data["results"], data.get("n-samples", {}), path, warn)
        except NotRegularFile:
            raise                          # its own message says what it is (a pipe, a folder, ...)
        except (OSError, ValueError, KeyError, TypeError, AttributeError, OverflowError, RecursionError) as err:
            raise ZeroLLMError(f"{path} is not an lm-eval results file ({type(err).__name__}: {err}); give the "
                               "results_*.json that lm_eval --output_path wrote") from None
        if ckpt is None:
            raise ZeroLLMError(f"{path}: its model_args name no ckpt=DIR, so it belongs to no zerollm run")
        out.append((path, str(ckpt), real, tasks))
    return out


def read_results(paths, warn=_warn):
    """{real path of the run: {task: [(metric, value, n, low, high)]}} from lm-eval results_*.json files."""
    out = {}
    for _, _, real, tasks in read_result_files(paths, warn):
        out.setdefault(real, {}).update(tasks)
    return out


def match_results(files, runs):
    """{run path: {task: [score, ...]}}: each of read_result_files()'s files goes to the run (a
    run_summary()) its ckpt= names, as given from the current folder, else for a relative ckpt= the one
    run whose path ends with it (lm_eval ran in another folder); a ZeroLLMError if there is none."""
    paths = sorted({r["path"] for r in runs})
    out = {}
    for path, ckpt, real, tasks in files:
        run = real if real in paths else _run_ending_with(path, ckpt, real, paths)
        out.setdefault(run, {}).update(tasks)
    return out


def _run_ending_with(path, ckpt, real, paths):
    """The one run path whose last parts are those of the relative ``ckpt``: runs/base -> /x/lm/runs/base."""
    parts = [p for p in os.path.normpath(ckpt).split(os.sep) if p not in ("", ".")]
    if os.path.isabs(ckpt) or not parts or ".." in parts:
        raise ZeroLLMError(f"{path}: lm-eval results for {real}, which is none of the runs given; add it as a RUN "
                           "or leave its results out")
    found = [p for p in paths if p.split(os.sep)[-len(parts):] == parts]
    if len(found) == 1:
        return found[0]
    several = f", and {len(found)} runs given end with {ckpt} ({', '.join(found)})" if found else ""
    raise ZeroLLMError(f"{path}: its model_args ckpt={ckpt} is relative, and resolved against the current folder "
                       f"it is {real}, which is none of the runs given{several}; run zerollm report from the "
                       f"folder where lm_eval ran, or give the run as model_args names it ({ckpt})")


def _task_scores(results, samples, where="results", warn=_warn):
    """{task: [score, ...]} of one file's "results" and "n-samples" objects; a TypeError or ValueError
    where they are not what lm-eval writes. A metric whose value cannot be shown is left out, with one
    ``warn`` line naming ``where`` (the file), the task and the metric."""
    if not isinstance(results, dict) or not isinstance(samples, dict):
        raise TypeError('"results" and "n-samples" must be objects')
    scores = {}
    for task, metrics in results.items():
        if not isinstance(metrics, dict):
            raise TypeError(f'"results"."{task}" must be an object of metrics, got {type(metrics).__name__}')
        n = int((samples.get(task) or {}).get("effective", 0))
        if n < 0:
            raise ValueError(f'"n-samples"."{task}"."effective" must be a whole number >= 0, got {n}')
        scores[task] = []
        for key, value in metrics.items():
            if "," not in key or "_stderr" in key:
                continue
            metric = key.split(",")[0]
            problem = _unshowable(metric, value)
            if problem:
                warn(f"{where}: task {task}, metric {key} {problem}; it is left out of the report")
                continue
            scores[task].append(score(metric, value, metrics.get(key.replace(",", "_stderr,", 1)), n))
    return scores


def _unshowable(metric, value):
    """Why ``value`` cannot be shown as a score (None if it can).

    >>> _unshowable("acc", 0.5), _unshowable("acc", "0.5"), _unshowable("acc", 5.0)
    (None, "is '0.5' (text), not a number", 'is 5.0, but a rate (acc) lies between 0 and 1')
    """
    if isinstance(value, str):
        return f"is {value[:40]!r} (text), not a number"
    if not _is_number(value):
        kinds = {type(None): "null", bool: "true or false", list: "a list", dict: "an object"}
        return f"is {kinds.get(type(value), type(value).__name__)}, not a number"
    if not math.isfinite(value):
        return f"is {value}, not a finite number"
    if metric in RATES and not 0 <= value <= 1:
        return f"is {value}, but a rate ({metric}) lies between 0 and 1"
    return None


def _is_number(value):
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _model_arg(model_args, key):
    if isinstance(model_args, dict):
        return model_args.get(key)
    for part in str(model_args).split(","):
        k, _, v = part.partition("=")
        if k.strip() == key:
            return v.strip()
    return None


def score(metric, value, stderr, n):
    """(metric, value, n, low, high): Wilson for a rate over n examples, else value ± 1.96 stderr; no
    interval (None, None) when n is 0: nothing was counted.

    >>> score("acc", 1 / 3, 0.33, 0)
    ('acc', 0.3333333333333333, 0, None, None)
    """
    if not n:
        low = high = None
    elif metric in RATES:
        low, high = wilson(min(max(int(round(value * n)), 0), n), n)     # k in 0..n: inside [0, 1]
    elif _is_number(stderr) and math.isfinite(stderr) and stderr >= 0:
        low, high = value - 1.96 * stderr, value + 1.96 * stderr
    else:
        low = high = None
    return (metric, float(value), n, low, high)


# ----------------------------------------------------------------------------
# the page

def fmt(field, value):
    """How a number is shown (the tests read the page back with these rules)."""
    if value is None:
        return "—"
    return {"params": "{:,}", "steps": "{:,}", "wall_s": "{:.1f} s", "cpu_s": "{:.1f} s", "val_loss": "{:.4f}",
            "val_bpb": "{:.4f}", "score": "{:.4f}", "n": "{:,}"}[field].format(value)


def _label(key, tag="span", attrs=""):
    en, zh = LABELS[key]
    return f'<{tag} {attrs}data-en="{html.escape(en)}" data-zh="{html.escape(zh)}">{html.escape(en)}</{tag}>'


def _cell(run, field, value, cls="num"):
    return f'<td class="{cls}" data-run="{html.escape(run)}" data-field="{field}">{html.escape(fmt(field, value))}</td>'


def _text_cell(value):
    return f"<td>{html.escape(str(value)) if value is not None else '—'}</td>"


def _run_table(runs):
    head = "".join(f"<th>{html.escape(r['name'])}</th>" for r in runs)
    rows = [f"<tr><th>{_label('kind')}</th>{''.join(_text_cell(r['kind']) for r in runs)}</tr>",
            f"<tr><th>{_label('start')}</th>{''.join(_text_cell(r['start']) for r in runs)}</tr>",
            f"<tr><th>{_label('data')}</th>{''.join(_text_cell(r['data']) for r in runs)}</tr>"]
    for field in ("params", "steps", "wall_s", "cpu_s", "val_loss", "val_bpb"):
        key = {"wall_s": "wall", "cpu_s": "cpu"}.get(field, field)
        rows.append(f"<tr><th>{_label(key)}</th>{''.join(_cell(r['name'], field, r[field]) for r in runs)}</tr>")
    return f"<table><tr><th>{_label('run')}</th>{head}</tr>{''.join(rows)}</table>"


def _score_table(runs, results):
    keys = []
    for r in runs:
        for task, metrics in results.get(r["path"], {}).items():
            keys += [(task, m[0]) for m in metrics if (task, m[0]) not in keys]
    if not keys:
        return ""
    head = "".join(f"<th>{html.escape(r['name'])}</th>" for r in runs)
    rows = []
    for task, metric in sorted(keys):
        cells = []
        for r in runs:
            found = [m for m in results.get(r["path"], {}).get(task, []) if m[0] == metric]
            cells.append(_score_cell(r["name"], task, found[0]) if found else "<td>—</td>")
        label = _label(f"metric_{metric}") if f"metric_{metric}" in LABELS else html.escape(metric)
        rows.append(f"<tr><th>{html.escape(task)}</th><th>{label}</th>{''.join(cells)}</tr>")
    return (f"<h2>{_label('scores')}</h2><table><tr><th>{_label('task')}</th><th>{_label('metric')}</th>{head}</tr>"
            f"{''.join(rows)}</table>")


def _score_cell(run, task, m):
    metric, value, n, low, high = m
    interval = f" [{fmt('score', low)}, {fmt('score', high)}]" if low is not None else ""
    return (f'<td class="num" data-run="{html.escape(run)}" data-field="score" data-task="{html.escape(task)}" '
            f'data-metric="{metric}"><b>{fmt("score", value)}</b>{interval} <small>n={fmt("n", n)}</small></td>')


COLOURS = ("#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b")


def _curves(runs, width=720, height=300, pad=40):
    """One SVG: every run's step losses as a line, its validation losses as dots, on shared axes."""
    points = [p for r in runs for p in r["curve"] + r["val_curve"] if p[1] is not None and np.isfinite(p[1])]
    if not points:
        return ""
    xs, ys = [p[0] for p in points], [p[1] for p in points]
    x0, x1, y0, y1 = min(xs), max(max(xs), min(xs) + 1), min(ys), max(ys)
    span = y1 - y0 if 0 < y1 - y0 < np.inf else max(abs(y0), 1.0)   # one value only, or near float64's limit
    X = lambda x: pad + (x - x0) / (x1 - x0) * (width - 2 * pad)
    Y = lambda y: height - pad - (y - y0) / span * (height - 2 * pad)
    parts = [f'<line x1="{pad}" y1="{height - pad}" x2="{width - pad}" y2="{height - pad}" stroke="#999"/>',
             f'<line x1="{pad}" y1="{pad}" x2="{pad}" y2="{height - pad}" stroke="#999"/>',
             # the loss axis: its two ends, and its name turned along it
             f'<text x="{pad - 4}" y="{pad + 4}" font-size="11" text-anchor="end">{y1:.2f}</text>',
             f'<text x="{pad - 4}" y="{height - pad}" font-size="11" text-anchor="end">{y0:.2f}</text>',
             _label("axis_loss", "text", f'x="12" y="{height / 2:.0f}" font-size="11" text-anchor="middle" '
                                         f'transform="rotate(-90 12 {height / 2:.0f})" '),
             # the step axis: its two ends, and its name under it
             f'<text x="{pad}" y="{height - pad + 14}" font-size="11" text-anchor="middle">{x0}</text>',
             f'<text x="{width - pad}" y="{height - pad + 14}" font-size="11" text-anchor="middle">{x1}</text>',
             _label("axis_step", "text", f'x="{width / 2:.0f}" y="{height - pad + 28}" font-size="11" '
                                         'text-anchor="middle" ')]
    for k, r in enumerate(runs):
        colour = COLOURS[k % len(COLOURS)]
        line = " ".join(f"{X(s):.1f},{Y(v):.1f}" for s, v in r["curve"] if v is not None)
        if line:
            parts.append(f'<polyline fill="none" stroke="{colour}" stroke-width="1" points="{line}"/>')
        parts += [f'<circle cx="{X(s):.1f}" cy="{Y(v):.1f}" r="3" fill="{colour}"/>' for s, v in r["val_curve"]]
        parts.append(f'<text x="{width - pad}" y="{pad + 14 * k}" font-size="12" fill="{colour}" '
                     f'text-anchor="end">{html.escape(r["name"])}</text>')
    return (f'<h2>{_label("curves")}</h2><svg id="curves" width="{width}" height="{height}" '
            f'xmlns="http://www.w3.org/2000/svg">{"".join(parts)}</svg>')


STYLE = """
@font-face { font-family: "zerollm-han"; src: url(data:font/woff2;base64,@FONT@) format("woff2");
  unicode-range: U+2E80-9FFF, U+F900-FAFF, U+FE30-FE4F, U+FF00-FFEF; }
body { font-family: system-ui, -apple-system, "Segoe UI", Roboto, "PingFang SC", "Microsoft YaHei",
  "Noto Sans CJK SC", "zerollm-han", sans-serif; margin: 2em; color: #222; }
table { border-collapse: collapse; margin: 1em 0; } th, td { border: 1px solid #ccc; padding: 4px 8px; }
th { background: #f4f4f4; text-align: left; } td.num { text-align: right; font-variant-numeric: tabular-nums; }
small { color: #666; } button { float: right; font: inherit; }
"""

SCRIPT = """
function setLang(lang) {
  document.documentElement.lang = lang === "zh" ? "zh-Hans" : "en";
  document.querySelectorAll("[data-en]").forEach(function (el) { el.textContent = el.dataset[lang]; });
  document.getElementById("lang").textContent = lang === "zh" ? "English" : "中文";
  document.getElementById("lang").dataset.next = lang === "zh" ? "en" : "zh";
}
document.getElementById("lang").addEventListener("click", function (e) { setLang(e.target.dataset.next); });
var lang0 = document.body.dataset.lang;
setLang(lang0);
// text laid out before the fallback font arrived may keep empty boxes: load it, then set the texts again
var ready = function () { setLang(document.getElementById("lang").dataset.next === "zh" ? "en" : "zh");
                          document.body.dataset.ready = "true"; };
(document.fonts ? document.fonts.load('16px "zerollm-han"', "中文") : Promise.resolve()).then(ready, ready);
"""


def unique_names(runs):
    """Runs called alike (a/run, b/run) are named by their last two path parts instead."""
    names = [r["name"] for r in runs]
    for r in runs:
        if names.count(r["name"]) > 1:
            r["name"] = os.path.join(os.path.basename(os.path.dirname(r["path"])), r["name"])
    return runs


def build_report(runs, results, lang="en"):
    """The page as one string: runs are run_summary()s, results read_results()'s."""
    runs = unique_names([dict(r) for r in runs])
    from zerollm.teach.explain.page import FONT, _package_file
    font = base64.b64encode(_package_file(FONT).read_bytes()).decode("ascii")
    body = (f'<button id="lang" data-next="zh">中文</button><h1>{_label("title", "span")}</h1>'
            f"{_run_table(runs)}{_curves(runs)}{_score_table(runs, results)}")
    return (f'<!DOCTYPE html><html lang="en"><head><meta charset="utf-8"><title>zerollm report</title>'
            f'<meta http-equiv="Content-Security-Policy" content="default-src \'none\'; style-src \'unsafe-inline\'; '
            f'script-src \'unsafe-inline\'; font-src data:; img-src data:">'
            f"<style>{STYLE.replace('@FONT@', font)}</style></head>"
            f'<body data-lang="{lang}">{body}<script>{SCRIPT}</script></body></html>')
