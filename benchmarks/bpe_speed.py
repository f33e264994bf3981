"""zerollm's BPE training vs Hugging Face `tokenizers`, each run in a fresh process, as a user meets it.

    python benchmarks/bpe_speed.py                                  # both shipped corpora, vocab 1024 and 4096
    python benchmarks/bpe_speed.py --corpus tang --sizes 1024 --rounds 3
    python benchmarks/bpe_speed.py --corpus my_text.txt --engines numpy

Every run is a new Python process (benchmarks/bpe_process.py) that imports its library, reads the text,
splits it and trains: the time from starting the process to a trained tokenizer is what a user waits for
in `zerollm prepare --tokenizer bpe` (the interpreter's start, the imports and, for the fast engine,
numba's compilation or cache load all count). Both sides split with the same regex (GPT-4's by default:
`tokenizers` gets Split(regex) + ByteLevel without its own regex, so the chunks are identical), start from
the 256 bytes, add <|endoftext|> and stop at the same vocabulary size. Each round runs every contender once
(tokenizers, zerollm with each engine), in a turning order, so a busy moment of a shared machine hits all of
them; the table shows medians over rounds and the median of the paired time ratios zerollm / tokenizers
(below 1.0: zerollm is faster). One thread: RAYON_NUM_THREADS=1 and one pinned CPU.
numpy is the engine `zerollm prepare` uses unless told otherwise. The fast engine is timed twice: "warm",
with numba's cache of compiled kernels filled by an untimed run before the rounds, and "first call", once
per row in a process with an empty cache (NUMBA_CACHE_DIR set to a new folder), so its compilation counts.
Each process also encodes the whole text after training; that time is reported apart.
"""

import os

os.environ.setdefault("RAYON_NUM_THREADS", "1")      # inherited by every process started here

import argparse  # noqa: E402
import json  # noqa: E402
import shutil  # noqa: E402
import statistics  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))     # this checkout's zerollm

from zerollm.data import corpora  # noqa: E402
from zerollm.io import docsmode  # noqa: E402
from zerollm.tokenizers.patterns import PATTERNS  # noqa: E402

SIZES = {"full": [1024, 4096], "quick": [1024, 4096], "smoke": [300]}
ROUNDS = {"full": 3, "quick": 1, "smoke": 1}
SLICE = {"full": None, "quick": None, "smoke": 20_000}       # characters of each corpus (None: all)
FIRST_CALL = {"full": True, "quick": True, "smoke": False}    # the fast engine with an empty numba cache
ONE_RUN = Path(__file__).resolve().parent / "bpe_process.py"


# ----------------------------------------------------------------------------
# one run, in a fresh process

def run_once(side, corpus, vocab_size, pattern, cache_dir=None):
    """Train with ``side`` (tokenizers, numpy or fast) in a new process; its JSON record."""
    env = dict(os.environ)
    if cache_dir is not None:
        env["NUMBA_CACHE_DIR"] = str(cache_dir)
    cmd = [sys.executable, str(ONE_RUN), side, str(corpus), str(vocab_size), PATTERNS[pattern], repr(time.time())]
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        raise SystemExit(f"{side} on {corpus} failed: {proc.stderr.strip()[-400:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def first_call(corpus, vocab_size, pattern):
    """The fast engine in a process whose numba cache is empty: it compiles what it runs."""
    cache = Path(tempfile.mkdtemp(prefix="zerollm-numba-"))
    try:
        return run_once("fast", corpus, vocab_size, pattern, cache_dir=cache)
    finally:
        shutil.rmtree(cache, ignore_errors=True)


def memory_bandwidth_gbs():
    """GB/s of a 256 MB copy (read + write), the best of 3: the host's memory row beside the ratios."""
    import numpy as np
    src = np.ones(32 * 2 ** 20)
    dst = np.empty_like(src)
    best = float("inf")
    for _ in range(3):
        start = time.perf_counter()
        np.copyto(dst, src)
        best = min(best, time.perf_counter() - start)
    return 2 * src.nbytes / best / 1e9


def blas():
    """The BLAS libraries threadpoolctl sees (BPE does no matrix products; stated as on every table)."""
    try:
        from threadpoolctl import threadpool_info
    except ImportError:
        return "threadpoolctl not installed"
    import numpy  # noqa: F401  (loads its BLAS)
    return "; ".join(f"{p.get('internal_api')} {p.get('version')} {p.get('architecture')}" for p in threadpool_info())


def host():
    """lscpu's model name, CPUs and hypervisor, in one line."""
    try:
        out = subprocess.run(["lscpu"], capture_output=True, text=True, check=False).stdout
    except OSError:
        out = ""
    fields = dict(line.split(":", 1) for line in out.splitlines() if ":" in line)
    wanted = ("Model name", "CPU(s)", "Hypervisor vendor", "L3 cache")
    return ", ".join(f"{k}: {fields[k].strip()}" for k in wanted if k in fields) or "lscpu not available"


# ----------------------------------------------------------------------------
# one corpus and vocabulary: every contender once per round

def compare(corpus, vocab_size, pattern, engines, rounds, cold=True):
    contenders = ["tokenizers", *(f"zerollm-{e}" for e in engines)]
    runs = {c: [] for c in contenders}
    for r in range(rounds):
        turn = r % len(contenders)
        for c in contenders[turn:] + contenders[:turn]:
            runs[c].append(run_once(c.rpartition("-")[2], corpus, vocab_size, pattern))
    first = first_call(corpus, vocab_size, pattern) if cold and "fast" in engines else None
    return summarize(runs, first)


def summarize(runs, first):
    """Medians per contender; paired ratios time(zerollm) / time(tokenizers) per round, their median."""
    ref = runs["tokenizers"]
    rec = {"contenders": {}, "ratios": {}}
    for c, rs in runs.items():
        rec["contenders"][c] = {
            "user_s": statistics.median(r["user_s"] for r in rs),
            "train_s": statistics.median(r["train_s"] for r in rs),      # in the process: split + training
            "import_s": statistics.median(r["import_s"] for r in rs),
            "start_s": statistics.median(r["start_s"] for r in rs),
            "encode_s": statistics.median(r["encode_s"] for r in rs),
            "cpu_s": statistics.median(r["cpu_s"] for r in rs),
            "round_user_s": [r["user_s"] for r in rs], "vocab_size": rs[-1]["vocab_size"],
            "merges": len(rs[-1]["merges"]), "tokens": rs[-1]["tokens"]}
        if c == "tokenizers":
            continue
        ratio = {what: statistics.median(ours[f"{what}_s"] / theirs[f"{what}_s"] for ours, theirs in zip(rs, ref))
                 for what in ("user", "train", "encode", "cpu")}
        ratio["in_process"] = ratio.pop("train")
        ratio["train"] = ratio.pop("user")             # what a user waits for: the goal's measure
        theirs, ours = [tuple(m) for m in ref[-1]["merges"]], [tuple(m) for m in rs[-1]["merges"]]
        ratio["same_merges"] = sum(x == y for x, y in zip(ours, theirs)) / max(len(theirs), 1)
        ratio["same_merge_set"] = len(set(ours) & set(theirs)) / max(len(theirs), 1)
        if c == "zerollm-fast" and first is not None:
            rec["contenders"][c].update(first_user_s=first["user_s"], first_train_s=first["train_s"])
            ratio["first_call"] = first["user_s"] / rec["contenders"]["tokenizers"]["user_s"]
        rec["ratios"][c] = ratio
    return rec


def run(corpus_names, sizes, pattern="gpt4", engines=("numpy", "fast"), rounds=1, chars=None, cold=True):
    """Every (corpus, vocabulary) of the plan -> {"meta": ..., "rows": [...]}."""
    from bench_measure import pin_cpus
    from importlib.metadata import version
    cpus = pin_cpus(1)                                  # the processes started here inherit the CPU
    meta = {"pattern": pattern, "rounds": rounds, "engines": list(engines), "cpus": cpus, "chars": chars,
            "tokenizers": version("tokenizers"), "numba": version("numba"), "load": os.getloadavg(),
            "RAYON_NUM_THREADS": os.environ.get("RAYON_NUM_THREADS"), "blas": blas(), "host": host(),
            "memory_gbs": memory_bandwidth_gbs(), "cpu": _cpu_model()}
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for name in corpus_names:
            path = corpora.path(name) if name in corpora.CORPORA else Path(name)
            text = path.read_text(encoding="utf-8")[:chars]
            if chars:                                   # each process reads a file: the slice gets one
                path = Path(tmp) / path.name
                path.write_text(text, encoding="utf-8")
            if "fast" in engines and not rows:
                run_once("fast", path, min(sizes), pattern)     # untimed: numba's cache is filled ("warm")
            for size in sizes:
                rec = compare(path, size, pattern, engines, rounds, cold)
                rec.update(corpus=path.name, chars=len(text), bytes=len(text.encode("utf-8")), vocab=size)
                rows.append(rec)
                print(f"  bpe {path.name} vocab {size}: " + ", ".join(
                    f"{c} {e['user_s']:.2f} s" for c, e in rec["contenders"].items()), flush=True)
    meta["load_after"] = os.getloadavg()
    return {"meta": meta, "rows": rows}


def _cpu_model():
    with open("/proc/cpuinfo") as f:
        return next((line.partition(":")[2].strip() for line in f if line.startswith("model name")), "?")


# ----------------------------------------------------------------------------
# the table

def table(results):
    """Markdown: one row per (corpus, vocabulary, zerollm engine)."""
    m = results["meta"]
    part = f"the first {m['chars']:,} characters of each corpus" if m.get("chars") else "whole corpora"
    lines = [f"Host: {m.get('host', m.get('cpu', '?'))}; memory: {m.get('memory_gbs', float('nan')):.1f} GB/s "
             f"(a 256 MB copy); BLAS: {m.get('blas', '?')} (BPE multiplies no matrices). Pattern {m['pattern']}, "
             f"{part}, {m['rounds']} round(s), each run a fresh process, 1 thread (CPU {m['cpus']}), tokenizers "
             f"{m['tokenizers']}, numba {m['numba']}, load average {m['load'][0]:.2f} before, "
             f"{m['load_after'][0]:.2f} after.", ""]
    header = ["corpus", "vocab", "engine", "zerollm s (process start to trained)", "tokenizers s", "time ratio",
              "first call s (empty numba cache)", "first call ratio", "zerollm imports s", "zerollm split + train s",
              "tokenizers split + train s", "zerollm encode s", "tokenizers encode s", "encode time ratio",
              "CPU s to trained, zerollm / tokenizers", "CPU time ratio",
              "vocab sizes", "same merges (order / set)"]
    lines += ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for r in results["rows"]:
        theirs = r["contenders"]["tokenizers"]
        for c, ratio in r["ratios"].items():
            ours = r["contenders"][c]
            first = ("—", "—")
            if "first_call" in ratio:
                first = (f"{ours['first_user_s']:.3g}", f"{ratio['first_call']:.2f}x")
            cells = [r["corpus"], r["vocab"], c.partition("-")[2], f"{ours['user_s']:.3g}", f"{theirs['user_s']:.3g}",
                     f"**{ratio['train']:.2f}x**", *first, f"{ours['import_s']:.3g}", f"{ours['train_s']:.3g}",
                     f"{theirs['train_s']:.3g}", f"{ours['encode_s']:.3g}", f"{theirs['encode_s']:.3g}",
                     f"{ratio['encode']:.2f}x", f"{ours['cpu_s']:.3g} / {theirs['cpu_s']:.3g}", f"{ratio['cpu']:.2f}x",
                     f"{ours['vocab_size']} / {theirs['vocab_size']}",
                     f"{ratio['same_merges']:.0%} / {ratio['same_merge_set']:.0%}"]
            lines.append("| " + " | ".join(str(x) for x in cells) + " |")
    return "\n".join(lines)


def main(argv=None):
    p = argparse.ArgumentParser(description="BPE training, each run in a fresh process: zerollm vs Hugging Face "
                                            "tokenizers")
    p.add_argument("--corpus", nargs="+", default=["shakespeare", "tang"],
                   help="shipped corpora (shakespeare, tang) or text files")
    p.add_argument("--sizes", type=int, nargs="+", default=SIZES["full"], help="vocabulary sizes")
    p.add_argument("--pattern", choices=sorted(PATTERNS), default="gpt4")
    p.add_argument("--engines", default="numpy,fast", help="zerollm engines, e.g. numpy or numpy,fast")
    p.add_argument("--rounds", type=int, default=ROUNDS["full"])
    p.add_argument("--chars", type=int, help="use only the first CHARS characters of each corpus")
    p.add_argument("--no-first-call", action="store_true",
                   help="skip the fast engine's run with an empty numba cache (it compiles: seconds per row)")
    p.add_argument("--json", type=Path, help="also write the results here")
    args = p.parse_args(argv)
    if docsmode.active():       # tests/test_docs_run.py runs every documented command line, in seconds
        print(f"{docsmode.ENV} is set: the smoke size ({SLICE['smoke']:,} characters, vocabulary "
              f"{SIZES['smoke'][0]}, 1 round), numpy engine only (a fresh clone would compile the fast "
              "kernels first: ~10 s; tests/test_benchmarks.py runs them)", file=sys.stderr)
        args.sizes, args.rounds, args.chars, args.engines = SIZES["smoke"], 1, SLICE["smoke"], "numpy"
    results = run(args.corpus, args.sizes, args.pattern, args.engines.split(","), args.rounds, args.chars,
                  cold=not args.no_first_call)
    print(table(results))
    if args.json:
        args.json.write_text(json.dumps(results, indent=1), encoding="utf-8")


if __name__ == "__main__":
    sys.path.append(str(Path(__file__).resolve().parent))          # bench_measure
    main()
