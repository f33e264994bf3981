"""Training throughput over MPI ranks vs threads in one process: a table of tokens/s.

    python benchmarks/mpi_scaling.py                    # both configs, 3 rounds of 30 steps each
    python benchmarks/mpi_scaling.py --rounds 1 --steps 10 --configs nanogpt-4x128

Each layout runs `zerollm train` on the shipped tiny Shakespeare with the same global batch and seed:
1 process x 1 thread (the baseline), 1 process x 2 threads, 2 ranks x 1 thread (mpirun -n 2). The
layouts alternate within each round (A B C, A B C, ...), so a slow phase of the machine hits them all.
tokens/s is the median over a run's steps after the first few; the table shows the median over rounds
and the scaling efficiency tokens/s / (shards x baseline). OpenBLAS's overrides are unset for the runs,
as in benchmarks/run.py, and every process runs single-threaded BLAS per shard.
"""

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE)]

from bench_measure import worker_env  # noqa: E402

from zerollm.io import docsmode  # noqa: E402

CONFIGS = {   # name -> zerollm train flags (the same models as benchmarks/bench_workloads.py)
    "nanogpt-4x128": ["--n-layer", "4", "--n-head", "4", "--n-embd", "128", "--block-size", "64",
                      "--batch-size", "12", "--no-bias", "--gelu", "erf"],
    "6x384-T256": ["--n-layer", "6", "--n-head", "6", "--n-embd", "384", "--block-size", "256",
                   "--batch-size", "8", "--no-bias"],
}
LAYOUTS = {   # name -> (ranks, threads per rank)
    "1 process x 1 thread": (1, 1),
    "1 process x 2 threads": (1, 2),
    "2 ranks x 1 thread": (2, 1),
}
SKIP = 3      # steps left out of the median (allocation, caches)


def one_run(config, ranks, threads, steps, folder, env=None, flags=()):
    """Median tokens/s of one training run of ``config`` in this layout (``env``: extra variables;
    ``flags``: more `zerollm train` flags, which override the ones here)."""
    out = Path(folder) / f"run-{ranks}-{threads}"
    shutil.rmtree(out, ignore_errors=True)
    argv = [sys.executable, "-m", "zerollm", "train", "--data", "shakespeare", "--tokenizer", "char",
            "--out", str(out), "--max-iters", str(steps), "--eval-interval", str(steps + 1), "--eval-iters", "1",
            "--sample-tokens", "0", "--checkpoint-interval", str(steps + 1), "--no-progress", "--dropout", "0",
            "--threads", str(threads), *CONFIGS[config], *flags]
    if ranks > 1:
        mpirun = shutil.which("mpirun") or os.path.join(sys.prefix, "bin", "mpirun")
        argv = [mpirun, "-n", str(ranks), *argv]
    res = subprocess.run(argv, capture_output=True, text=True, env={**worker_env(1), **(env or {})}, cwd=folder)
    if res.returncode:
        raise SystemExit(f"{' '.join(argv)} failed:\n{res.stderr[-2000:]}")
    with open(out / "log.jsonl", encoding="utf-8") as f:
        rates = [r["tokens_per_s"] for r in map(json.loads, f) if "tokens_per_s" in r]
    return statistics.median(rates[SKIP:])


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--configs", nargs="+", default=list(CONFIGS), choices=list(CONFIGS))
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--steps", type=int, default=30)
    args = p.parse_args(argv)
    if docsmode.active():     # tests/test_docs_run.py runs every documented command line, in seconds
        print(f"{docsmode.ENV} is set: nanogpt-4x128 only, 1 round of {SKIP + 2} steps", file=sys.stderr)
        args.configs, args.rounds, args.steps = ["nanogpt-4x128"], 1, SKIP + 2
    print(f"load average before: {os.getloadavg()[0]:.2f}; {os.cpu_count()} CPUs")
    rows = []
    with tempfile.TemporaryDirectory() as folder:
        for config in args.configs:
            rates = {name: [] for name in LAYOUTS}
            for _ in range(args.rounds):
                for name, (ranks, threads) in LAYOUTS.items():
                    rates[name].append(one_run(config, ranks, threads, args.steps, folder))
            base = statistics.median(rates["1 process x 1 thread"])
            for name, (ranks, threads) in LAYOUTS.items():
                med = statistics.median(rates[name])
                rows.append((config, name, med, med / base, med / (base * ranks * threads)))
    print(f"load average after: {os.getloadavg()[0]:.2f}")
    print(f"| config | layout | tokens/s | speed-up | scaling efficiency |\n|---|---|---|---|---|")
    for config, name, med, up, eff in rows:
        print(f"| {config} | {name} | {med:,.0f} | {up:.2f}x | {eff:.0%} |")


if __name__ == "__main__":
    main()
