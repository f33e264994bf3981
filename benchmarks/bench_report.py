"""Turning results.json into markdown tables and a chart of the zerollm/torch speed ratios.

A ratio is speed(zerollm) / speed(torch) = time(torch) / time(zerollm), the median of the per-round
pairs: 1.0 = as fast as PyTorch, 0.5 = twice as slow. Every file is written atomically.
"""

import re
import shutil
from pathlib import Path

from zerollm.io.fileio import atomic_write, write_json

DOCS_START, DOCS_END = "<!-- results:start -->", "<!-- results:end -->"


def _f(x, spec=".3g", scale=1.0, suffix=""):
    return "—" if x is None else f"{x * scale:{spec}}{suffix}"


def _table(header, rows):
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    return "\n".join(lines + ["| " + " | ".join(str(c) for c in row) + " |" for row in rows])


def _c(rec, contender, key):
    return rec["contenders"].get(contender, {}).get(key)


def _ratio(rec, contender, key="median"):
    return _f(rec["ratios"].get(contender, {}).get(key), ".2f", suffix="x")


def _cpu_ratio(rec, contender):
    """The paired ratio of CPU times: only for 1 thread, where it is not inflated by waiting for a CPU."""
    return _ratio(rec, contender, "cpu_median") if rec["threads"] == 1 else "—"


# ----------------------------------------------------------------------------
# the sections

def machine(results):
    """Which CPU, libraries, BLAS kernels and threads the numbers come from."""
    m = results["meta"]
    lines = [f"- CPU: {m['cpu']} ({', '.join(m['cpu_flags']) or 'no AVX2'}); Python {m['python']}, "
             f"NumPy {m['numpy']}, torch {m['torch']}, transformers {m['transformers']}",
             f"- threads {m['threads']}, zerollm engines {m.get('engines', ['numpy'])}, "
             f"{m['rounds']} round(s) per measurement, mode `{m['mode']}`, "
             f"{m['date']}, took {m.get('duration_s', '?')} s"]
    for key, info in sorted(m["libraries"].items()):
        if not info:
            continue
        pools = info.get("threadpools")
        if isinstance(pools, list):
            pools = "; ".join(" ".join(str(p[k]) for k in ("internal_api", "version", "architecture") if p.get(k))
                              + f" x{p['num_threads']}" for p in pools)
        torch_build = info.get("torch", {}).get("build")
        extra = f"; torch: {_short_build(torch_build)}" if torch_build else ""
        lines.append(f"- `{key}` CPUs {info['affinity']}: {pools}{extra}")
    return "\n".join(lines)


def _short_build(lines):
    """'Intel(R) oneAPI Math Kernel Library Version 2024.2-Product ...' -> 'MKL 2024.2', and so on."""
    text = " ".join(lines)
    found = [(name, re.search(pattern, text)) for name, pattern in
             (("MKL", r"Math Kernel Library Version ([\w.]+)"), ("oneDNN", r"MKL-DNN (v[\w.]+)"),
              ("OpenMP", r"OpenMP (\d+)"), ("CPU capability", r"CPU capability usage: (\w+)"))]
    return ", ".join(f"{name} {m.group(1)}" for name, m in found if m)


def check_table(results):
    tol = results["check"][0]["tolerance"] if results["check"] else 0
    rows = [[r["name"], r.get("engine", "numpy"), _losses(r, "zerollm"), _losses(r, "torch"),
             _f(r.get("max_diff"), ".1e"), "yes" if r["passed"] else "**FAILED**"] for r in results["check"]]
    return _table(["config", "engine", "zerollm losses", "torch losses", "max abs diff", f"passed (< {tol:g})"], rows)


def _losses(rec, c):
    return ", ".join(f"{x:.6f}" for x in rec.get("losses", {}).get(c, [])) or "; ".join(rec["errors"])


def gemm_table(results):
    rows = [[r["threads"], r["params"]["n"], _f(_flops(r, "numpy"), ".1f", 1e-9),
             _f(_flops(r, "torch"), ".1f", 1e-9), _ratio(r, "numpy")] for r in results["gemm"]]
    return _table(["threads", "n", "NumPy GFLOP/s", "torch.mm GFLOP/s", "NumPy/torch"], rows)


def gemm_model_table(results):
    rows = [[r["name"], r["threads"], _f(_flops(r, "numpy"), ".1f", 1e-9), _f(_flops(r, "torch"), ".1f", 1e-9),
             _ratio(r, "numpy")] for r in results.get("gemm_model", [])]
    return _table(["config", "threads", "NumPy GFLOP/s", "torch.mm GFLOP/s", "NumPy/torch"], rows)


def gemm_model_ratios(results):
    """(config, threads) -> NumPy/torch speed of that config's own linear-layer GEMMs (gemm_model)."""
    return {(r["name"], r["threads"]): r["ratios"].get("numpy", {}).get("median") for r in results.get("gemm_model", [])}


def _flops(rec, c):
    best = _c(rec, c, "best_s")
    return rec["units"] / best if best else None


def engine_of(contender):
    """'zerollm-fast' -> 'fast', 'flash' -> 'numpy'."""
    return contender.partition("-")[2] or "numpy"


def gemm_ratios(results):
    """threads -> the GEMM row's NumPy/torch speed ratio, shown beside every model ratio: a host whose
    BLAS libraries differ moves every ratio by about that much."""
    return {r["threads"]: r["ratios"].get("numpy", {}).get("median") for r in results["gemm"]}


def model_table(records, unit="tokens/s", gemm=None, shapes=None):
    """One row per (config, threads, engine): speeds, the paired ratio, the GEMM row's ratio at the same
    threads and that of the config's own GEMM shapes (``shapes``, when measured), peak memory (and token
    agreement)."""
    agree = any("tokens_agree" in r for r in records)
    gemm, shapes = gemm or {}, shapes or {}
    rows = []
    for r in records:
        for c in r["ratios"]:                              # every zerollm contender, one per engine
            row = [r["name"], r["threads"], engine_of(c), _f(_c(r, c, "per_s"), ".0f"),
                   _f(_c(r, "torch", "per_s"), ".0f"), _ratio(r, c), _cpu_ratio(r, c),
                   _f(gemm.get(r["threads"]), ".2f", suffix="x"),
                   _f(shapes.get((r["name"], r["threads"])), ".2f", suffix="x"),
                   _f(_c(r, c, "peak_mib"), ".1f"), _f(_c(r, "torch", "peak_mib"), ".1f")]
            rows.append(row + ([_f(r.get("tokens_agree", {}).get(c), ".0%")] if agree else []))
    header = ["config", "threads", "engine", f"zerollm {unit}", f"torch {unit}", "zerollm/torch",
              "same, by CPU time", "GEMM NumPy/torch", "its GEMMs NumPy/torch", "zerollm peak MiB", "torch peak MiB"]
    return _table(header + (["same tokens"] if agree else []), rows)


def attention_table(results):
    """One row per (T, threads); a time, a ratio and a peak memory column per contender."""
    records = results["attention"]
    ours = list(dict.fromkeys(c for r in records for c in r["ratios"]))      # naive, flash, naive-fast, ...
    rows = []
    for r in records:
        ms = [_f(_c(r, c, "median_s"), ".2f", 1e3) for c in ours + ["torch"]]
        mib = [_f(_c(r, c, "peak_mib"), ".1f") for c in ours + ["torch"]]
        rows.append([r["params"]["T"], r["threads"], *ms, *(_ratio(r, c) for c in ours),
                     *(_cpu_ratio(r, c) for c in ours), *mib])
    return _table(["T", "threads", *(f"{c} ms" for c in ours + ["torch"]), *(f"{c}/torch" for c in ours),
                   *(f"{c}/torch by CPU time" for c in ours), *(f"{c} MiB" for c in ours + ["torch"])], rows)


def mfu_table(results):
    giga = dict(spec=".1f", scale=1e-9)
    rows = [[r["name"], r["threads"], r.get("engine", "numpy"), _f(r["flops_per_step"], ".3g", 1e-9),
             _f(r["zerollm_flops"], **giga), _f(r["zerollm_mfu"], ".1%"), _f(r.get("zerollm_mfu_cpu"), ".1%"),
             _f(r["torch_flops"], **giga), _f(r["torch_mfu"], ".1%"), _f(r["numpy_peak_flops"], **giga),
             _f(r.get("numpy_peak_flops_cpu") if r["threads"] == 1 else None, **giga),
             _f(r["torch_peak_flops"], **giga)] for r in results["mfu"]]
    return _table(["config", "threads", "engine", "GFLOP/step", "zerollm GFLOP/s", "zerollm MFU",
                   "zerollm MFU by CPU time", "torch GFLOP/s", "torch MFU", "NumPy GEMM peak GFLOP/s",
                   "the same by CPU time", "torch.mm peak GFLOP/s"], rows)


# ----------------------------------------------------------------------------
# issue 25's "done when", checked against one run

EVEN_GEMM = 0.10                           # GEMM peaks within 10%: the as-run ratios count as they are
TRAIN_GOALS = {"numpy": 1.0, "fast": 1.2}  # training step, zerollm / torch speed, every config and thread count
MFU_GOALS = {"numpy": 0.70, "fast": 0.80}  # at MFU_AT (config, threads)
MFU_AT = ("6x384-T256", 1)
ATTENTION_GOAL = 1.0                       # forward + backward vs SDPA, an O(T)-memory contender (flash)
BPE_GOAL = 1.0                             # BPE training time, zerollm / tokenizers, at most
NON_GEMM_GOAL = 0.05                       # the fast engine's time outside GEMMs and attention kernels, at most


def _verdict(value, goal, at_least=True):
    if value is None:
        return "not measured"
    return "yes" if (value >= goal if at_least else value <= goal) else "**no**"


def _training_goals(results, gemm):
    """One row per (config, threads, engine): judged on the same-GEMM ratio (the BLAS difference taken out),
    or, where that was not measured, on the as-run ratio of a host whose GEMM peaks are within 10%."""
    same = {(r["name"], r["threads"], engine_of(c)): ratio["median"]
            for r in results.get("same_gemm", []) for c, ratio in r["ratios"].items()}
    rows = []
    for r in results.get("train", []):
        for c, ratio in r["ratios"].items():
            engine, g = engine_of(c), gemm.get(r["threads"])
            goal = TRAIN_GOALS.get(engine)
            if goal is None:
                continue
            as_run, fair = ratio["median"], same.get((r["name"], r["threads"], engine))
            even = g is not None and abs(g - 1.0) <= EVEN_GEMM
            judged = fair if fair is not None else as_run if even else None
            measured = (f"{_f(as_run, '.2f', suffix='x')} as run (GEMM row {_f(g, '.2f', suffix='x')}), "
                        f"{_f(fair, '.2f', suffix='x')} with the same GEMMs")
            rows.append([f"training, {engine} engine", f"{r['name']}, {r['threads']} thr", measured,
                         f">= {goal:.1f}x", _verdict(judged, goal)])
    return rows


def goals_table(results):
    """Issue 25's measurable goals against this run: [(goal, where, measured, target, holds)] as a table and
    a count. The fast engine's non-GEMM share comes from the run's profiles (benchmarks/profile.py)."""
    gemm = gemm_ratios(results)
    rows = _training_goals(results, gemm)
    for r in results.get("mfu", []):
        engine = r.get("engine", "numpy")
        if (r["name"], r["threads"]) == MFU_AT and engine in MFU_GOALS:
            rows.append([f"MFU, {engine} engine", f"{r['name']}, {r['threads']} thr",
                         f"{_f(r['zerollm_mfu'], '.1%')} (torch {_f(r['torch_mfu'], '.1%')})",
                         f">= {MFU_GOALS[engine]:.0%}", _verdict(r["zerollm_mfu"], MFU_GOALS[engine])])
    for r in results.get("attention", []):
        flash = {c: ratio["median"] for c, ratio in r["ratios"].items() if c.startswith("flash")
                 and ratio["median"] is not None}
        best = max(flash, key=flash.get) if flash else None
        rows.append(["attention fwd + bwd vs SDPA, O(T) memory", f"T = {r['params']['T']}, {r['threads']} thr",
                     f"{_f(flash.get(best), '.2f', suffix='x')} ({best or 'no flash contender'})",
                     f">= {ATTENTION_GOAL:.1f}x", _verdict(flash.get(best), ATTENTION_GOAL)])
    bpe = results.get("bpe") or {}
    for r in bpe.get("rows", []):
        times = {c: ratio["train"] for c, ratio in r["ratios"].items()}
        best = min(times, key=times.get)
        rows.append(["BPE training time vs tokenizers", f"{r['corpus']}, vocab {r['vocab']}",
                     f"{times[best]:.2f}x ({best})", f"<= {BPE_GOAL:.1f}x",
                     _verdict(times[best], BPE_GOAL, at_least=False)])
    for r in results.get("profile", []):
        if "error" not in r:
            rows.append([f"non-GEMM time, {r['engine']} engine (profile)", f"{r['name']}, {r['threads']} thr",
                         f"{r['non_gemm_share']:.1%} ({r['non_gemm_ms']:.1f} of {r['profiled_step_ms']:.1f} ms)",
                         f"<= {NON_GEMM_GOAL:.0%}", _verdict(r["non_gemm_share"], NON_GEMM_GOAL, at_least=False)])
    held = sum(row[-1] == "yes" for row in rows)
    profiled = any("error" not in r for r in results.get("profile", []))
    note = (f"{held} of {len(rows)} hold. GEMM row (NumPy/torch.mm): "
            + ", ".join(f"{_f(g, '.2f', suffix='x')} at {t} thr" for t, g in sorted(gemm.items()))
            + f"; training is judged with the same GEMMs where measured, else as run only on a host whose GEMM "
              f"peaks are within {EVEN_GEMM:.0%}. "
            + ("The non-GEMM share is the fast engine's per-op profile (benchmarks/profile.py, the table above)."
               if profiled else "The fast engine's non-GEMM share (<= 5%) was not measured in this run "
                                "(benchmarks/profile.py measures it)."))
    return _table(["goal", "where", "measured", "target", "holds"], rows) + "\n\n" + note


def markdown(results):
    mode = results["meta"]["mode"]
    notes = [results["meta"].get("note", "")]
    if mode != "full":
        notes.append(f"From a `--{mode}` run: fewer rounds (and shorter attention) than the full benchmark.")
    if results["meta"].get("openblas_coretype"):
        notes.append(f"Supplementary run: every worker's OpenBLAS was forced to its "
                     f"`{results['meta']['openblas_coretype']}` kernels (`--openblas-coretype`).")
    note = "".join(f"\n> {n}\n" for n in notes if n)
    gen = results["generate"][0]["params"] if results["generate"] else {}
    gemm, shapes = gemm_ratios(results), gemm_model_ratios(results)
    attn = results["attention"][0]["params"] if results["attention"] else {}
    return "\n\n".join([
        f"## Latest results ({mode} run, {results['meta']['date'][:10]})\n{note}", machine(results),
        "### Correctness before timing (training losses, identical weights and batches)", check_table(results),
        "### GEMM peak (float32 square matmul, best step)", gemm_table(results),
        *gemm_model_section(results),
        "### Training step: forward + backward + clip + AdamW", model_table(results["train"], gemm=gemm, shapes=shapes),
        *same_gemm_section(results, gemm, shapes),
        "### Forward only", model_table(results["forward"], gemm=gemm, shapes=shapes),
        f"### Generation: greedy, KV cache, B=1, prompt {gen.get('prompt_tokens')}, "
        f"{gen.get('new_tokens')} new tokens", model_table(results["generate"], gemm=gemm),
        f"### Attention alone: forward + backward, B={attn.get('B')}, nh={attn.get('nh')}, "
        f"hs={attn.get('hs')}, causal, float32", attention_table(results),
        "### MFU: achieved FLOP/s of the training step / NumPy's GEMM peak (same threads)", mfu_table(results),
        *bpe_section(results),
        *profile_section(results),
        "### Issue 25's goals, checked against this run", goals_table(results),
    ]) + "\n"


def gemm_model_section(results):
    if not results.get("gemm_model"):
        return []
    return ["### GEMM at the models' own shapes (the linear layers' 12 products of one block's training step, "
            "best step)", gemm_model_table(results)]


def same_gemm_section(results, gemm, shapes):
    """The training step again, zerollm's linear layers multiplied by torch.mm: the BLAS difference out."""
    if not results.get("same_gemm"):
        return []
    return ["### Training step with the same GEMMs: zerollm's linear layers multiplied by torch.mm (MKL), "
            "the rest zerollm's", model_table(results["same_gemm"], gemm=gemm, shapes=shapes)]


def profile_section(results):
    """[title, table] of the fast engine's step outside the GEMMs (benchmarks/profile.py), or nothing."""
    recs = results.get("profile")
    if not recs:
        return []
    title = ("### The fast engine's step outside the GEMMs (per-op profile, benchmarks/profile.py, 1 thread; "
             "the attention kernels, products and softmax together, in neither share)")
    rows = []
    for r in recs:
        if "error" in r:
            rows.append(["**FAILED**", r["error"], "", "", "", ""])
            continue
        largest = ", ".join(f"{op} {ms:.3g}" for op, ms in r["largest"].items())
        rows.append([r["name"], f"{r['profiled_step_ms']:.1f}", f"{r['gemm_share']:.1%}", f"{r['non_gemm_ms']:.1f}",
                     f"{r['non_gemm_share']:.1%}", largest])
    return [title, _table(["config", "profiled step ms", "GEMM share", "non-GEMM ms", "non-GEMM share",
                           "largest non-GEMM rows (ms)"], rows)]


def bpe_section(results):
    """[title, table] of the BPE comparison (benchmarks/bpe_speed.py), or nothing when it was not run."""
    bpe = results.get("bpe")
    if not bpe:
        return []
    title = "### BPE: zerollm vs Hugging Face tokenizers (training and encoding time, 1 thread)"
    if "error" in bpe:
        return [title, f"**FAILED**: {bpe['error']}"]
    from bpe_speed import table
    return [title, table(bpe)]


# ----------------------------------------------------------------------------
# the chart and the files

def ratio_bars(results):
    """[(label, threads, ratio)] for every ratio of every measurement."""
    bars = []
    for section in ("train", "same_gemm", "forward", "generate", "attention", "gemm", "gemm_model"):
        for r in results.get(section, []):
            for c, ratio in r["ratios"].items():
                who = "" if c == "zerollm" else f" {c}"
                if ratio["median"] is not None:
                    bars.append((f"{section}{who} {r['name']}", r["threads"], ratio["median"]))
    return bars


def chart(results, f):
    """Grouped bars (one colour per thread count) of zerollm/torch speed, log scale; each bar starts at
    1.0, so bars above the line are faster than PyTorch and bars below are slower."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import FixedLocator, FuncFormatter
    bars = ratio_bars(results)
    labels = list(dict.fromkeys(label for label, _, _ in bars))
    threads = sorted({t for _, t, _ in bars})
    width = 0.8 / max(len(threads), 1)
    fig, ax = plt.subplots(figsize=(max(6, 0.55 * len(labels) + 2), 4.8))
    for i, t in enumerate(threads):
        xs = [labels.index(label) + (i - (len(threads) - 1) / 2) * width for label, tt, _ in bars if tt == t]
        ratios = [r for _, tt, r in bars if tt == t]
        drawn = ax.bar(xs, [r - 1 for r in ratios], width, bottom=1.0, label=f"{t} thread{'s' * (t > 1)}")
        ax.bar_label(drawn, labels=[f"{r:.2g}" for r in ratios], fontsize=7)
    ax.axhline(1.0, color="black", linewidth=1)
    ax.set_yscale("log")                                   # 0.5x and 2x sit equally far from 1.0
    ax.yaxis.set_major_locator(FixedLocator([0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1, 2, 5, 10, 20, 50]))
    ax.yaxis.set_major_formatter(FuncFormatter(lambda y, _: f"{y:g}x"))
    ax.yaxis.set_minor_formatter(FuncFormatter(lambda y, _: ""))
    ax.set_xticks(range(len(labels)), labels, rotation=60, ha="right", fontsize=8)
    ax.set_ylabel("speed ratio vs PyTorch (log)")
    ax.set_title(f"zerollm / PyTorch speed ({results['meta']['mode']} run; 1.0 = as fast as PyTorch)")
    ax.legend()
    fig.tight_layout()
    fig.savefig(f, format="png", dpi=110)
    plt.close(fig)


def write_outputs(results, out_dir):
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    write_json(out_dir / "results.json", results)
    with atomic_write(out_dir / "results.md", "w") as f:
        f.write(markdown(results))
    with atomic_write(out_dir / "ratios.png", "wb") as f:
        chart(results, f)


def paste_between(page, start, end, body):
    """Replace what lies between the markers ``start`` and ``end`` of a page by ``body`` (atomically)."""
    page = Path(page)
    block = f"{start}\n\n{body}\n\n{end}"
    new, n = re.subn(re.escape(start) + ".*?" + re.escape(end), lambda _: block, page.read_text(encoding="utf-8"),
                     flags=re.S)
    if n != 1:
        raise SystemExit(f"{page} needs exactly one {start} ... {end} block")
    with atomic_write(page, "w") as f:
        f.write(new)


def update_docs(results, out_dir, docs_dir):
    """Paste results.md between the markers of docs/benchmarks.md; copy the chart to docs/benchmarks.png."""
    paste_between(Path(docs_dir) / "benchmarks.md", DOCS_START, DOCS_END,
                  f"{markdown(results)}\n![zerollm/torch speed ratios](benchmarks.png)")
    with open(Path(out_dir) / "ratios.png", "rb") as src, atomic_write(Path(docs_dir) / "benchmarks.png", "wb") as f:
        shutil.copyfileobj(src, f)
