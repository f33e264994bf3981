"""The work between two training steps, in one thread and shared by the shard threads: a table.

    env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE python benchmarks/between_steps.py
    env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE python benchmarks/between_steps.py --config 6x384-T256 --engine fast

With ``--threads N`` the Trainer (zerollm.training.trainer) does four things per step outside the shards'
forward and backward: the shards' gradients are added (zerollm.training.objective.reduce_shards), their
norm is taken for clipping (clip_grad_norm), AdamW updates the weights, and, where the shards run in
worker processes, the weights are copied into the memory the workers read (ProcessShards._send_weights).
Each goes parameter by parameter through zerollm.engine.threads.by_name_in_parts, in the calling thread
or shared by a pool of N threads. This script times each of them both ways, on a model of the benchmark's
configs with random gradients, alternating serial and shared in every round, and prints the median ms.
Below SHARE_FROM numbers the shared column is the serial one (the split is not made); ``--force`` sets
SHARE_FROM to 0 to see what the split would cost there. The GEMM row (1024^2, NumPy, one thread) is
printed first: it says how fast the host is right now.
"""

import argparse
import statistics
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
# the zerollm of this checkout first; benchmarks/ (the bench_* modules) last (see benchmarks/profile.py)
sys.path[:] = [str(HERE.parent)] + [p for p in sys.path if Path(p or ".").resolve() != HERE] + [str(HERE)]

import numpy as np  # noqa: E402

import bench_workloads as W  # noqa: E402
from zerollm.engine import set_engine, threads  # noqa: E402
from zerollm.engine.memory import keep_freed_memory  # noqa: E402
from zerollm.engine.threads import ThreadPool  # noqa: E402
from zerollm.io import docsmode  # noqa: E402
from zerollm.model.config import GPTConfig  # noqa: E402
from zerollm.model.gpt import GPT  # noqa: E402
from zerollm.training.objective import ShardResult, reduce_shards  # noqa: E402
from zerollm.training.optim import AdamW, clip_grad_norm  # noqa: E402
from zerollm.training.processes import ProcessShards  # noqa: E402

CONFIGS = {name: (cfg, B) for mode in ("full", "smoke") for name, cfg, B in W.MODELS[mode]}


def gemm_row(n=1024, repeat=5):
    a = np.random.default_rng(0).standard_normal((n, n), dtype=np.float32)
    best = min(_seconds(lambda: a @ a) for _ in range(repeat))
    return 2 * n ** 3 / best / 1e9


def _seconds(fn):
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def measure(config, engine, n_threads, rounds):
    """{what: (serial ms, shared ms)}, medians over ``rounds`` alternating rounds."""
    set_engine(engine)
    cfg, _ = CONFIGS[config]
    model = GPT(GPTConfig(**cfg), seed=0)
    rng = np.random.default_rng(0)

    def gradients():
        return {k: rng.standard_normal(p.shape, dtype=np.float32) for k, p in model.params.items()}
    shards = [gradients() for _ in range(n_threads)]
    opt = AdamW(model.params, lr=1e-4, weight_decay=0.1)
    pool = ThreadPool(n_threads, "between-steps")
    procs = ProcessShards(model, 1, None)
    work = {
        "gradient sum": lambda: reduce_shards([ShardResult(1.0, g, 1.0, {}) for g in shards], procs.pool),
        "clipping norm": lambda: clip_grad_norm(shards[0], 1e30, procs.pool),
        "AdamW": lambda: opt.step(shards[0], pool=procs.pool),
        "weights to the workers": procs._send_weights,
    }
    times = {(what, way): [] for what in work for way in ("serial", "shared")}
    try:
        for fn in work.values():          # compiles the fast engine's kernels, touches every page once
            fn()
        for r in range(rounds):
            for way in ("serial", "shared") if r % 2 == 0 else ("shared", "serial"):
                procs.pool = pool if way == "shared" else None
                for what, fn in work.items():
                    times[what, way].append(_seconds(fn))
    finally:
        procs.close()
        pool.shutdown()
    return {what: tuple(1e3 * statistics.median(times[what, way]) for way in ("serial", "shared")) for what in work}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--config", default="all", help=f"one of {', '.join(CONFIGS)}, or all (default)")
    ap.add_argument("--engine", default="numpy,fast", help="engines, comma-separated (default numpy,fast)")
    ap.add_argument("--threads", type=int, default=2, help="threads of the shared column (default 2)")
    ap.add_argument("--rounds", type=int, default=15)
    ap.add_argument("--force", action="store_true", help="share even below SHARE_FROM numbers")
    args = ap.parse_args(argv)
    names = [n for n, _, _ in W.MODELS["full"]] if args.config == "all" else [args.config]
    if docsmode.active():     # tests/test_docs_run.py runs every documented command line, in seconds
        print(f"{docsmode.ENV} is set: tiny-1x32 only, 1 round", file=sys.stderr)
        names, args.rounds = ["tiny-1x32"], 1
    unknown = [n for n in names if n not in CONFIGS]
    if unknown or args.threads < 2 or args.rounds < 1:
        ap.error(f"--config must be one of {', '.join(CONFIGS)} or all, --threads >= 2, --rounds >= 1")
    if args.force:
        threads.SHARE_FROM = 0
    keep_freed_memory()
    print(f"GEMM row: NumPy 1024^2, 1 thread: {gemm_row():.0f} GFLOP/s; sharing from {threads.SHARE_FROM} numbers\n")
    print(f"| config | parameters | engine | work between steps | 1 thread, ms | {args.threads} threads, ms | ratio |")
    print("|---|---|---|---|---|---|---|")
    for name in names:
        n_params = sum(p.size for p in GPT(GPTConfig(**CONFIGS[name][0]), seed=0).params.values())
        for engine in args.engine.split(","):
            for what, (serial, shared) in measure(name, engine, args.threads, args.rounds).items():
                print(f"| {name} | {n_params / 1e6:.1f}M | {engine} | {what} | {serial:.2f} | {shared:.2f} | "
                      f"{serial / shared:.2f}x |", flush=True)


if __name__ == "__main__":
    main()
