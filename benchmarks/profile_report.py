"""Tables of benchmarks/profile.py: one profile in the terminal, and before/after tables for the docs.

A profile (JSON) holds the step time and one row per (op, direction) with milliseconds per step,
the share of the step and, for matrix products, the FLOP rate. The docs table puts side by side
the committed baseline (docs/profiles/before-<config>.json, measured before the engine work) and
the newest profiles of each engine.
"""

import json
from pathlib import Path

from zerollm.io.fileio import write_json

DOCS_START, DOCS_END = "<!-- profile:start -->", "<!-- profile:end -->"
ELSE = "everything else"
# architecture order: what the forward meets first comes first
# torch's profile (--engine torch) has rows of its own where its ops do not tell the layers apart
TORCH_LINEAR, TORCH_BMM, TORCH_NORMS = "linear GEMMs (torch: mm, addmm)", "attention products (torch: bmm)", \
    "layer norms (torch: all)"
ORDER = ["embedding", TORCH_NORMS, "ln_1", TORCH_LINEAR, "qkv GEMM", "split/merge heads", "rope", TORCH_BMM,
         "scores q k^T", "mask + softmax",
         "weights @ V", "attention, fused (q k^T, softmax, weights @ V)", "flash attention (all of it)",
         "attention projection GEMM", "residual adds + block glue",
         "ln_2", "MLP fc GEMM", "activation", "MLP proj GEMM", "ln_f", "head GEMM + model glue", "cross-entropy",
         "clip grad norm", "AdamW", "other linear", ELSE]
GEMMS = {"qkv GEMM", "scores q k^T", "weights @ V", "attention projection GEMM", "MLP fc GEMM", "MLP proj GEMM",
         "head GEMM + model glue", "other linear", TORCH_LINEAR, TORCH_BMM}
FLASH = "flash attention (all of it)"   # products and softmax in one kernel: a FLOP rate, but not a GEMM row
FUSED = "attention, fused (q k^T, softmax, weights @ V)"   # the fast engine's full-score attention: likewise
KERNELS = {FLASH, FUSED}
DIRECTIONS = ("fwd", "bwd", "update", "")


def rows(prof, steps, step_s):
    """The Profiler's totals -> rows per step, in architecture order, plus 'everything else'."""
    out = []
    for (op, direction), seconds in prof.seconds.items():
        out.append({"op": op, "direction": direction, "ms": 1e3 * seconds / steps,
                    "gflops": prof.flops[(op, direction)] / seconds * 1e-9 if op in GEMMS | KERNELS and seconds else None,
                    "calls": prof.calls[(op, direction)] // steps})
    covered = sum(r["ms"] for r in out)
    out.append({"op": ELSE, "direction": "", "ms": max(1e3 * step_s - covered, 0.0), "gflops": None, "calls": 0})
    for r in out:
        r["share"] = r["ms"] / (1e3 * step_s)
    return sorted(out, key=_position)


def _position(row):
    op = row["op"]
    return (ORDER.index(op) if op in ORDER else len(ORDER), DIRECTIONS.index(row["direction"]))


def gemm_share(profile):
    return sum(r["share"] for r in profile["rows"] if r["op"] in GEMMS)


def _non_gemm_rows(profile):
    """The rows that are neither a GEMM nor an attention kernel (products and softmax together, shown apart):
    the elementwise work, the norms, AdamW, glue."""
    return [r for r in profile["rows"] if r["op"] not in GEMMS | KERNELS]


def non_gemm(profile):
    """(ms, share of the step) of the non-GEMM rows. Issue 25's goal is a share of at most 5% with the fast engine."""
    other = _non_gemm_rows(profile)
    return sum(r["ms"] for r in other), sum(r["share"] for r in other)


def largest_non_gemm(profile, n=3):
    """The n largest non-GEMM rows, "op direction" -> ms, largest first."""
    top = sorted(_non_gemm_rows(profile), key=lambda r: -r["ms"])[:n]
    return {f"{r['op']} {r['direction']}".strip(): r["ms"] for r in top}


def summary(profile):
    """One line: step time, tokens/s, GEMM share, MFU (when the NumPy GEMM peak was measured)."""
    step = profile["profiled_step_s"]
    parts = [f"step {1e3 * profile['step_s']:.1f} ms (profiled {1e3 * step:.1f} ms)",
             f"{profile['tokens'] / profile['step_s']:.0f} tokens/s",
             f"GEMM share {gemm_share(profile):.1%}"]
    for op, name in ((FLASH, "flash attention"), (FUSED, "fused attention")):
        rows_of = [r for r in profile["rows"] if r["op"] == op]
        if rows_of:     # its time is products and softmax together: shown apart, in neither share
            ms = sum(r["ms"] for r in rows_of)
            parts.append(f"{name} {ms:.1f} ms ({sum(r['share'] for r in rows_of):.1%})")
    ms, share = non_gemm(profile)
    parts.append(f"non-GEMM {ms:.1f} ms ({share:.1%})")
    if profile.get("numpy_peak_flops"):
        mfu = profile["flops_per_step"] / profile["step_s"] / profile["numpy_peak_flops"]
        parts.append(f"MFU {mfu:.1%} of NumPy's GEMM peak {profile['numpy_peak_flops'] * 1e-9:.0f} GFLOP/s")
    return "; ".join(parts)


def _md(header, body):
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    return "\n".join(lines + ["| " + " | ".join(str(c) for c in row) + " |" for row in body])


def table(profile):
    """The terminal/markdown table of one profile."""
    body = [[r["op"], r["direction"], f"{r['ms']:.2f}", f"{r['share']:.1%}",
             "" if r["gflops"] is None else f"{r['gflops']:.0f}"] for r in profile["rows"]]
    attn = profile.get("attn_impl", "naive")
    title = (f"### {profile['config']}, engine {profile['engine']}{', flash attention' if attn == 'flash' else ''}, "
             f"1 thread\n\n{summary(profile)}\n")
    return title + "\n" + _md(["op", "direction", "ms / step", "share", "GFLOP/s"], body)


# ----------------------------------------------------------------------------
# before / after for the docs

def _by_op(profile):
    return {(r["op"], r["direction"]): r for r in profile["rows"]} if profile else {}


def compare(config, columns):
    """One table for ``config``: per (op, direction) ms and share in each of ``columns`` [(title, profile)]."""
    keys = []
    for _, prof in columns:
        for r in (prof or {}).get("rows", []):
            if (r["op"], r["direction"]) not in keys:
                keys.append((r["op"], r["direction"]))
    keys.sort(key=lambda k: _position({"op": k[0], "direction": k[1]}))
    maps = [_by_op(prof) for _, prof in columns]
    body = []
    for key in keys:
        cells = []
        for m in maps:
            r = m.get(key)
            cells.append("—" if r is None else f"{r['ms']:.1f} ({r['share']:.0%})")
        body.append([key[0], key[1], *cells])
    total = ["**step**", "", *[f"**{1e3 * p['step_s']:.0f}**" if p else "—" for _, p in columns]]
    share = ["GEMM share", "", *[f"{gemm_share(p):.0%}" if p else "—" for _, p in columns]]
    header = ["op", "dir", *[f"{title} ms (share)" for title, _ in columns]]
    return f"#### {config}\n\n" + _md(header, body + [share, total])


def docs_block(profiles, before):
    """Markdown for every config: before, numpy now, fast now; plus one summary line per profile."""
    parts = []
    for config in sorted({p["config"] for p in profiles} | set(before)):
        now = {p["engine"]: p for p in profiles if p["config"] == config}
        columns = [("before", before.get(config)), ("numpy", now.get("numpy")), ("fast", now.get("fast"))]
        if now.get("torch"):
            columns.append(("torch", now["torch"]))
        parts.append(compare(config, columns))
        parts.append("\n".join(f"- {title}: {summary(p)}" for title, p in columns if p))
    return "\n\n".join(parts)


def load_before(docs_dir):
    found = {}
    for f in sorted((Path(docs_dir) / "profiles").glob("before-*.json")):
        prof = json.loads(f.read_text(encoding="utf-8"))
        found[prof["config"]] = prof
    return found


def write(profiles, out_dir):
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    for prof in profiles:
        flash = "-flash" if prof.get("attn_impl") == "flash" else ""
        write_json(out_dir / f"profile-{prof['config']}-{prof['engine']}{flash}.json", prof)


def update_docs(profiles, docs_dir):
    """Paste the before/after tables between the profile markers of docs/benchmarks.md."""
    from bench_report import paste_between          # benchmarks/ is on sys.path, as for every script here
    paste_between(Path(docs_dir) / "benchmarks.md", DOCS_START, DOCS_END, docs_block(profiles, load_before(docs_dir)))
