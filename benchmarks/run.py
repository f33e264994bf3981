"""zerollm vs PyTorch on the same CPU: training step, forward, generation, attention, GEMM peak, MFU;
zerollm's BPE vs Hugging Face tokenizers (benchmarks/bpe_speed.py); and the fast engine's time outside the
GEMMs (benchmarks/profile.py), so that the last table checks every goal of issue 25.

    python benchmarks/run.py                 # full: 5 rounds, 1 and 2 threads, attention up to T=8192
    python benchmarks/run.py --quick         # 2 rounds, attention up to T=1024
    python benchmarks/run.py --smoke         # seconds: tiny configs, 1 round, 1 thread (the test's mode)
    python benchmarks/run.py --quick --update-docs   # also refresh docs/benchmarks.md and .png
    python benchmarks/run.py --from-json benchmarks/results/results.json --update-docs   # redraw only
    python benchmarks/run.py --engine numpy      # zerollm's NumPy engine only (default: numpy,fast
                                                 #   when numba is installed, see zerollm.engine)

Every contender runs in its own process (benchmarks/worker.py; --smoke: one process takes every job),
alternating A B A B ... for several rounds, with the same thread count, CPUs, weights and batches. Per
measurement we report each contender's median over rounds and the median of the PAIRED speed ratios
zerollm/torch (one ratio per round, so slow phases of a shared machine hit both sides of a pair). Training is
timed only after one step from identical weights gave the same loss on both sides. See docs/benchmarks.md.
"""

import argparse
import datetime
import json
import os
import select
import statistics
import subprocess
import sys
import tempfile
import time
from importlib.metadata import version
from pathlib import Path
from typing import NamedTuple

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
# the zerollm of this checkout first; benchmarks/ (the bench_* modules) LAST, so that
# benchmarks/profile.py never hides the standard library's profile module (torch imports it)
sys.path[:] = [str(HERE.parent)] + [p for p in sys.path if Path(p or ".").resolve() != HERE] + [str(HERE)]

import bench_report  # noqa: E402
import bpe_speed  # noqa: E402
import profile_report  # noqa: E402
import bench_workloads as W  # noqa: E402
from bench_measure import worker_env  # noqa: E402

from zerollm.io import docsmode  # noqa: E402
from zerollm.model.config import GPTConfig  # noqa: E402
from zerollm.engine import ENGINES  # noqa: E402


# the results' sections of measured records, in the order the plan runs them
SECTIONS = ("gemm", "gemm_model", "train", "same_gemm", "forward", "generate", "attention")
WORKER_TIMEOUT_S = 1800      # a worker that hangs (swapping, a deadlock) fails instead of blocking the run
PROFILE_STEPS = {"full": (10, 3), "quick": (6, 2), "smoke": (2, 1)}   # the fast profile: (profiled steps, warm-up)


class Measurement(NamedTuple):
    task: str               # worker task
    name: str               # what the table calls it
    params: dict            # the worker's params, without threads
    contenders: tuple       # run in this order every round
    reference: str          # the contender every ratio divides by (torch)
    units: float            # work per step: tokens (train, forward, generate), FLOPs (gemm, gemm_model), 1
    section: str = ""       # the results' section, when not the task's own (same_gemm: a train task)


# ----------------------------------------------------------------------------
# the plan

def plan(mode, flash, engines=("numpy",)):
    """Every measurement of one thread count, in the order they run. Each zerollm contender runs
    once per engine ('zerollm', 'zerollm-fast', ...), in the same rounds as torch."""
    budget, attn_budget = W.BUDGET[mode], W.ATTENTION_BUDGET[mode]
    n = W.GEMM_N[mode]
    yield Measurement("gemm", f"{n}x{n}", dict(n=n, seed=0, budget=budget), ("numpy", "torch"),
                      "torch", W.gemm_flops(n))
    for name, cfg, B in W.MODELS[mode]:                  # the GEMMs of each model's own linear layers
        yield Measurement("gemm_model", name, dict(config=cfg, batch=B, seed=0, budget=budget), ("numpy", "torch"),
                          "torch", W.model_gemm_flops(GPTConfig(**cfg), B))
    models = (*with_engines("zerollm", engines), "torch")
    for name, cfg, B in W.MODELS[mode]:
        params = dict(config=cfg, batch=B, seed=0, budget=budget)
        tokens = B * cfg["block_size"]
        yield Measurement("train", name, params, models, "torch", tokens)
        # the same step with zerollm's linear layers multiplied by torch.mm: the BLAS difference taken out
        yield Measurement("train", name, dict(params, gemm="torch"), models, "torch", tokens, "same_gemm")
        yield Measurement("forward", name, params, models, "torch", tokens)
    name, cfg, n_prompt, n_new = W.GENERATION[mode]
    params = dict(config=cfg, prompt_tokens=n_prompt, new_tokens=n_new, seed=0, budget=budget)
    yield Measurement("generate", name, params, models, "torch", n_new)
    kinds = ("naive", "flash") if flash else ("naive",)
    attention = (*(c for kind in kinds for c in with_engines(kind, engines)), "torch")
    for T in W.ATTENTION_T[mode]:
        params = dict(W.ATTENTION_SHAPE, T=T, seed=0, budget=attn_budget)
        yield Measurement("attention", f"T={T}", params, attention, "torch", 1)


def with_engines(contender, engines):
    """('zerollm', ('numpy', 'fast')) -> ('zerollm', 'zerollm-fast'): the worker's contender names."""
    return tuple(contender if e == "numpy" else f"{contender}-{e}" for e in engines)


def default_engines():
    """numpy and fast when the fast engine can run here (numba installed), else numpy alone."""
    import importlib.util
    if importlib.util.find_spec("numba") is None:
        print('note: numba is not installed (pip install "zerollm[fast]"): only the NumPy engine is measured')
        return ["numpy"]
    return ["numpy", "fast"]


def flash_available():
    import importlib.util
    if importlib.util.find_spec("zerollm.nn.flash") is None:
        print("note: zerollm/nn/flash.py is not there yet: the tiled attention contender is skipped")
        return False
    return True


# ----------------------------------------------------------------------------
# running workers

class SharedWorker:
    """--smoke: one worker process (worker.py --serve) per thread count and kernel choice takes every job in turn.
    The smoke run's numbers mean nothing (tiny configs, 2 steps); it checks that the harness runs end to end,
    and a fresh process a job spent nearly all its time importing torch and numba (25 processes, 40-90 s)."""

    def __init__(self):
        self.procs = {}                                      # (threads, coretype) -> (Popen, its stderr file)

    def ask(self, task, contender, params, threads, coretype):
        key = (threads, coretype)
        if key not in self.procs:
            log = tempfile.TemporaryFile(mode="w+")          # a file: a pipe nobody reads would fill and block
            proc = subprocess.Popen([sys.executable, str(HERE / "worker.py"), "--serve"], stdin=subprocess.PIPE,
                                    stdout=subprocess.PIPE, stderr=log, text=True, cwd=ROOT,
                                    env=worker_env(threads, coretype=coretype))
            self.procs[key] = (proc, log)
        proc, log = self.procs[key]
        proc.stdin.write(json.dumps([task, contender, dict(params, threads=threads)]) + "\n")
        proc.stdin.flush()
        ready, _, _ = select.select([proc.stdout], [], [], WORKER_TIMEOUT_S)
        line = proc.stdout.readline() if ready else ""
        if line:
            return json.loads(line)
        proc.kill()
        proc.wait()
        del self.procs[key]
        log.seek(0)
        tail = " | ".join(log.read().strip().splitlines()[-3:])
        why = f"exited with {proc.returncode}: {tail}" if ready else f"took over {WORKER_TIMEOUT_S} s and was stopped"
        return {"error": f"{task}/{contender}: the shared worker {why}"}

    def close(self):
        for proc, log in self.procs.values():
            proc.stdin.close()
            proc.wait(timeout=60)
            log.close()
        self.procs.clear()


SHARED = None        # a SharedWorker while a --smoke run goes on (run_all), else None: a process a job


def run_worker(task, contender, params, threads, coretype=None):
    """One worker process -> its JSON result, or {"error": ...} with the tail of its stderr."""
    if SHARED is not None:
        return SHARED.ask(task, contender, params, threads, coretype)
    cmd = [sys.executable, str(HERE / "worker.py"), task, contender, json.dumps(dict(params, threads=threads))]
    try:
        proc = subprocess.run(cmd, env=worker_env(threads, coretype=coretype), capture_output=True, text=True,
                              cwd=ROOT, timeout=WORKER_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        return {"error": f"{task}/{contender} took over {WORKER_TIMEOUT_S} s and was stopped"}
    lines = proc.stdout.strip().splitlines()
    if proc.returncode != 0 or not lines:
        tail = " | ".join(proc.stderr.strip().splitlines()[-3:])
        return {"error": f"{task}/{contender} exited with {proc.returncode}: {tail}"}
    return json.loads(lines[-1])


def run_rounds(m, threads, rounds, libraries, coretype=None):
    """A B A B ...: every contender once per round, in a fresh process each time."""
    runs = {c: [] for c in m.contenders}
    for r in range(rounds):
        for c in m.contenders:
            res = run_worker(m.task, c, m.params, threads, coretype)
            runs[c].append(res)
            if "info" in res:
                libraries.setdefault(f"{c}@{threads}", res["info"])
            if "error" in res:
                print(f"  FAILED {res['error']}", flush=True)
            else:
                ms = 1e3 * statistics.median(res["times"])
                print(f"  [{threads} thr] {m.section or m.task} {m.name} round {r + 1}/{rounds} {c}: {ms:.2f} ms/step, "
                      f"peak +{res['peak_mib']:.1f} MiB", flush=True)
    return summarize(m, threads, runs)


def summarize(m, threads, runs):
    """Medians over rounds and the paired ratios  speed(c) / speed(reference) = t_ref / t_c  per round."""
    rec = {"task": m.task, "name": m.name, "threads": threads, "reference": m.reference, "units": m.units,
           "params": {k: v for k, v in m.params.items() if k != "budget"}, "contenders": {}, "ratios": {}}
    # each round's median step time, None for a round whose worker failed
    medians = {c: [None if "error" in r else statistics.median(r["times"]) for r in rs] for c, rs in runs.items()}
    for c, rs in runs.items():
        rec["contenders"][c] = contender_summary(rs, medians[c], m.units)
    cpu = {c: [None if "error" in r or not r.get("cpu_times") else statistics.median(r["cpu_times"]) for r in rs]
           for c, rs in runs.items()}
    for c in m.contenders:
        if c != m.reference:
            paired = [ref / t for ref, t in zip(medians[m.reference], medians[c]) if ref and t]
            rec["ratios"][c] = {"paired": paired, "median": statistics.median(paired) if paired else None}
            paired_cpu = [ref / t for ref, t in zip(cpu[m.reference], cpu[c]) if ref and t]
            rec["ratios"][c]["cpu_median"] = statistics.median(paired_cpu) if paired_cpu else None
    if m.task == "generate":
        rec["tokens_agree"] = {c: tokens_agree(runs[c], runs[m.reference]) for c in rec["ratios"]}
    return rec


def contender_summary(results, medians, units):
    """round_s (per-round medians), median_s over rounds, best_s (fastest step), per_s, peak_mib, errors."""
    good = [r for r in results if "error" not in r]
    entry = {"round_s": medians, "errors": [r["error"] for r in results if "error" in r]}
    if good:
        median = statistics.median(t for t in medians if t is not None)
        entry.update(median_s=median, best_s=min(min(r["times"]) for r in good), per_s=units / median,
                     peak_mib=statistics.median(r["peak_mib"] for r in good))
        cpu = [r["cpu_times"] for r in good if r.get("cpu_times")]
        entry["cpu_median_s"] = statistics.median(statistics.median(c) for c in cpu) if cpu else None
        entry["best_cpu_s"] = min(min(c) for c in cpu) if cpu else None
    return entry


def tokens_agree(ours, theirs):
    """Fraction of greedy tokens that zerollm and GPT-2 chose alike (float32 ties may differ)."""
    a, b = (next((r["tokens"] for r in runs if "tokens" in r), None) for runs in (ours, theirs))
    if not a or not b:
        return None
    return sum(x == y for x, y in zip(a, b)) / max(len(a), len(b))


# ----------------------------------------------------------------------------
# correctness before timing

def check_training(name, cfg, B, engine="numpy", coretype=None, torch_runs=None):
    """One step from identical weights and batch must give the same loss (to CHECK_TOL) on both sides.
    ``torch_runs`` ({config name: torch's result}) keeps torch's side for the next engine: the same
    weights and batches give torch the same losses, so it runs once per config."""
    params = dict(config=cfg, batch=B, seed=0, steps=W.CHECK_STEPS)
    ours = with_engines("zerollm", [engine])[0]
    torch_runs = {} if torch_runs is None else torch_runs
    if name not in torch_runs or "error" in torch_runs[name]:
        torch_runs[name] = run_worker("check", "torch", params, threads=1, coretype=coretype)
    res = {"zerollm": run_worker("check", ours, params, threads=1, coretype=coretype), "torch": torch_runs[name]}
    errors = [r["error"] for r in res.values() if "error" in r]
    rec = {"name": name, "engine": engine, "tolerance": W.CHECK_TOL, "errors": errors}
    if not errors:
        diffs = [abs(a - b) for a, b in zip(res["zerollm"]["losses"], res["torch"]["losses"])]
        rec.update(losses={c: r["losses"] for c, r in res.items()}, max_diff=max(diffs))
    rec["passed"] = not errors and rec["max_diff"] < W.CHECK_TOL
    if rec["passed"]:
        print(f"check {name} ({engine} engine): losses agree (max |diff| {rec['max_diff']:.1e})", flush=True)
    else:
        print(f"!!! CORRECTNESS CHECK FAILED for {name} ({engine} engine): {rec.get('losses', errors)} -- "
              "its training measurement is ABORTED", file=sys.stderr, flush=True)
    return rec


# ----------------------------------------------------------------------------
# putting it together

def add_mfu(results):
    """Achieved FLOP/s of each training step / the NumPy GEMM peak at the same thread count, one row
    per zerollm engine (the torch columns repeat)."""
    peaks = {}                                             # threads -> {numpy, torch, numpy_cpu} -> FLOP/s
    for g in results["gemm"]:
        peaks[g["threads"]] = {c: g["units"] / e["best_s"]
                               for c, e in g["contenders"].items() if "best_s" in e}
        best_cpu = g["contenders"].get("numpy", {}).get("best_cpu_s")
        peaks[g["threads"]]["numpy_cpu"] = g["units"] / best_cpu if best_cpu else None
    configs = {name: (cfg, B) for name, cfg, B in W.MODELS[results["meta"]["mode"]]}
    for rec in results["train"]:
        cfg, B = configs[rec["name"]]
        flops = W.train_flops(GPTConfig(**cfg), B, cfg["block_size"])
        peak = peaks.get(rec["threads"], {})
        t_torch = rec["contenders"]["torch"].get("median_s")
        for c in rec["ratios"]:                            # every zerollm contender
            row = {"name": rec["name"], "threads": rec["threads"], "engine": engine_of(c), "flops_per_step": flops,
                   "numpy_peak_flops": peak.get("numpy"), "torch_peak_flops": peak.get("torch")}
            for side, t in (("zerollm", rec["contenders"][c].get("median_s")), ("torch", t_torch)):
                row[f"{side}_flops"] = flops / t if t else None
                row[f"{side}_mfu"] = flops / t / peak["numpy"] if t and peak.get("numpy") else None
            # 1 thread: CPU time over CPU time, robust to a busy machine
            t_cpu, peak_cpu = rec["contenders"][c].get("cpu_median_s"), peak.get("numpy_cpu")
            row["numpy_peak_flops_cpu"] = peak_cpu
            row["zerollm_mfu_cpu"] = flops / t_cpu / peak_cpu if t_cpu and peak_cpu and rec["threads"] == 1 else None
            results["mfu"].append(row)


def engine_of(contender):
    """'zerollm-fast' -> 'fast', 'flash' -> 'numpy'."""
    return contender.partition("-")[2] or "numpy"


def cpu_info():
    """The first processor's fields of /proc/cpuinfo: {"model name": ..., "flags": ...}."""
    info = {}
    with open("/proc/cpuinfo") as f:
        for line in f:
            if not line.strip():
                break                                      # the end of the first processor
            key, _, value = line.partition(":")
            info[key.strip()] = value.strip()
    return info


def meta(mode, threads, rounds, engines=("numpy",)):
    cpu = cpu_info()
    flags = cpu.get("flags", "").split()
    return {"mode": mode, "date": datetime.datetime.now().isoformat(timespec="seconds"),
            "cpu": cpu.get("model name", "?"), "logical_cpus": os.cpu_count(),
            "cpu_flags": [f for f in ("avx2", "fma", "avx512f", "avx512_bf16", "amx_tile") if f in flags],
            "python": sys.version.split()[0], "numpy": version("numpy"), "torch": version("torch"),
            "transformers": version("transformers"), "threads": threads, "rounds": rounds, "engines": list(engines),
            "command": " ".join(sys.argv), "libraries": {}}


def run_bpe(mode, engines):
    """BPE training and encoding, zerollm vs Hugging Face tokenizers (benchmarks/bpe_speed.py, each run a fresh
    process), with one thread: its CPU pinning must not reach the other workers."""
    out = Path(tempfile.mkdtemp()) / "bpe.json"
    cmd = [sys.executable, str(HERE / "bpe_speed.py"), "--json", str(out), "--rounds", str(bpe_speed.ROUNDS[mode]),
           "--engines", ",".join(engines), "--sizes", *map(str, bpe_speed.SIZES[mode])]
    if bpe_speed.SLICE[mode]:
        cmd += ["--chars", str(bpe_speed.SLICE[mode])]
    if not bpe_speed.FIRST_CALL[mode]:
        cmd.append("--no-first-call")
    proc = subprocess.run(cmd, env=worker_env(1), capture_output=True, text=True, cwd=ROOT, timeout=WORKER_TIMEOUT_S)
    print(proc.stdout, end="", flush=True)
    if proc.returncode != 0:
        tail = " | ".join(proc.stderr.strip().splitlines()[-3:])
        print(f"  FAILED bpe_speed.py exited with {proc.returncode}: {tail}", flush=True)
        return {"error": f"bpe_speed.py exited with {proc.returncode}: {tail}"}
    return json.loads(out.read_text(encoding="utf-8"))


def run_profiles(mode, engines):
    """The fast engine's per-op profile of every config (benchmarks/profile.py: its own worker processes, one
    pinned thread): the issue's non-GEMM share, one record per config. [] without the fast engine."""
    if "fast" not in engines:
        return []
    steps, warmup = PROFILE_STEPS[mode]
    names = [name for name, _, _ in W.MODELS[mode]]
    with tempfile.TemporaryDirectory() as out:
        cmd = [sys.executable, str(HERE / "profile.py"), "--config", ",".join(names), "--engine", "fast",
               "--steps", str(steps), "--warmup", str(warmup), "--out", out]
        proc = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT, timeout=WORKER_TIMEOUT_S)
        if proc.returncode != 0:
            tail = " | ".join(proc.stderr.strip().splitlines()[-3:])
            print(f"  FAILED profile.py exited with {proc.returncode}: {tail}", flush=True)
            return [{"error": f"profile.py exited with {proc.returncode}: {tail}"}]
        profiles = [json.loads((Path(out) / f"profile-{name}-fast.json").read_text(encoding="utf-8")) for name in names]
    records = []
    for name, prof in zip(names, profiles):
        ms, share = profile_report.non_gemm(prof)
        records.append({"name": name, "engine": "fast", "threads": 1, "step_ms": 1e3 * prof["step_s"],
                        "profiled_step_ms": 1e3 * prof["profiled_step_s"], "gemm_share": profile_report.gemm_share(prof),
                        "non_gemm_ms": ms, "non_gemm_share": share, "largest": profile_report.largest_non_gemm(prof)})
        print(f"  profile {name} (fast, 1 thr): non-GEMM {ms:.1f} ms of {records[-1]['profiled_step_ms']:.1f} "
              f"({share:.1%})", flush=True)
    return records


def run_all(mode, threads_list, rounds, engines=("numpy",), coretype=None, only=None):
    """Every measurement of the plan (or only the tasks in ``only``: no training check then)."""
    results = {"meta": meta(mode, threads_list, rounds, engines), "check": [], **{sec: [] for sec in SECTIONS},
               "mfu": []}
    results["meta"]["openblas_coretype"] = coretype
    global SHARED
    SHARED = SharedWorker() if mode == "smoke" else None
    try:
        return measure_all(results, mode, threads_list, rounds, engines, coretype, only)
    finally:
        if SHARED is not None:
            SHARED.close()
        SHARED = None


def measure_all(results, mode, threads_list, rounds, engines, coretype, only):
    """run_all's measurements, added into ``results``."""
    start, flash = time.perf_counter(), flash_available()
    if only is None or "train" in only:
        torch_runs = {}
        results["check"] = [check_training(name, cfg, B, e, coretype, torch_runs)
                            for name, cfg, B in W.MODELS[mode] for e in engines]
    passed = {name: all(r["passed"] for r in results["check"] if r["name"] == name) for name, _, _ in W.MODELS[mode]}
    for threads in threads_list:
        for m in plan(mode, flash, engines):
            if (only is not None and m.task not in only) or (m.task == "train" and not passed[m.name]):
                continue
            results[m.section or m.task].append(run_rounds(m, threads, rounds, results["meta"]["libraries"], coretype))
    add_mfu(results)
    if only is None or "profile" in only:
        results["profile"] = run_profiles(mode, engines)
    if only is None or "bpe" in only:
        results["bpe"] = run_bpe(mode, engines)
    results["meta"]["duration_s"] = round(time.perf_counter() - start, 1)
    return results


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    size = parser.add_mutually_exclusive_group()
    size.add_argument("--quick", action="store_true", help="2 rounds, attention up to T=1024")
    size.add_argument("--smoke", action="store_true", help="tiny configs, 1 round, 1 thread (for the tests)")
    parser.add_argument("--out", type=Path, default=HERE / "results",
                        help="output folder (default %(default)s)")
    parser.add_argument("--rounds", type=int, help="override the number of rounds")
    parser.add_argument("--threads", help="override the thread counts, e.g. 1,2")
    parser.add_argument("--engine", help="zerollm engines to measure, e.g. numpy or numpy,fast "
                        "(default: numpy,fast when numba is installed)")
    parser.add_argument("--openblas-coretype", metavar="KERNELS",
                        help="a supplementary experiment, not the benchmark's rule: force every worker's OpenBLAS "
                             "to these kernels (e.g. Haswell, to give NumPy the AVX2 GEMM torch's MKL has on AMD)")
    parser.add_argument("--note", default="", help="a line shown above the tables: which machine, how quiet")
    parser.add_argument("--update-docs", action="store_true",
                        help="also paste the results into docs/benchmarks.md and copy the chart to docs/")
    parser.add_argument("--from-json", type=Path, metavar="RESULTS_JSON",
                        help="measure nothing: redraw the tables and chart of an earlier results.json")
    args = parser.parse_args(argv)
    if args.from_json:
        results = json.loads(args.from_json.read_text(encoding="utf-8"))
    else:
        mode = "smoke" if args.smoke else "quick" if args.quick else "full"
        threads = [int(t) for t in args.threads.split(",")] if args.threads else W.THREADS[mode]
        rounds, only = args.rounds or W.ROUNDS[mode], None
        engines = args.engine.split(",") if args.engine else default_engines()
        unknown = sorted(set(engines) - set(ENGINES))
        if unknown:
            parser.error(f"unknown engine {unknown}; choose from {', '.join(ENGINES)}")
        if docsmode.active():       # tests/test_docs_run.py runs every documented command line, in seconds
            print(f"{docsmode.ENV} is set: only the smoke run's GEMM, 1 round, 1 thread", file=sys.stderr)
            mode, threads, rounds, only = "smoke", [1], 1, {"gemm"}
        results = run_all(mode, threads, rounds, engines, args.openblas_coretype, only)
    if args.note:
        results["meta"]["note"] = args.note
    print("\n" + bench_report.markdown(results))
    bench_report.write_outputs(results, args.out)
    if args.update_docs:
        bench_report.update_docs(results, args.out, ROOT / "docs")
    print(f"wrote {args.out}/results.json, results.md, ratios.png")
    failed = [r["name"] for r in results["check"] if not r["passed"]] + [
        e for sec in SECTIONS for rec in results.get(sec, []) for c in rec["contenders"].values() for e in c["errors"]]
    if "error" in results.get("bpe", {}):
        failed.append(results["bpe"]["error"])
    failed += [r["error"] for r in results.get("profile", []) if "error" in r]
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
