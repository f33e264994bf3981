"""How much time zerollm may spend outside its linear layers' products and still be N times faster than torch.

    env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE taskset -c 0 python benchmarks/same_gemm_budget.py
    env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE taskset -c 0 python benchmarks/same_gemm_budget.py --config 6x384-T256 --engine fast --steps 6

The benchmark's "same GEMMs" training step (benchmarks/run.py) has zerollm's linear layers multiply
with torch.mm, so both sides spend the same time G in those products; what separates them is the
rest: R_torch (its attention, softmax, GELU, norms, AdamW, autograd, Python) against R_zerollm. Then

    torch / zerollm  =  (G + R_torch) / (G + R_zerollm),

and zerollm is N times faster only while R_zerollm <= T_torch / N - G. This script measures the
three numbers in ONE process, one thread, the two steps interleaved (torch, zerollm, torch, ...), each
torch.mm call of zerollm's step timed, and prints per config and engine: torch's step, zerollm's
step split into G and R, the median of the paired ratios, and the R that 1.0x and 1.2x allow (the
issue's goals for the numpy and the fast engine). The GEMM row (2048^2, NumPy vs torch.mm) is printed
first, as in every table of docs/benchmarks.md.
"""

import argparse
import statistics
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
# the zerollm of this checkout first; benchmarks/ (the bench_* modules) LAST, so that benchmarks/profile.py
# never hides the standard library's profile module (torch imports it)
sys.path[:] = [str(HERE.parent)] + [p for p in sys.path if Path(p or ".").resolve() != HERE] + [str(HERE)]

import bench_workloads as W  # noqa: E402
from zerollm.io import docsmode  # noqa: E402

CONFIGS = {name: (cfg, B) for mode in ("full", "smoke") for name, cfg, B in W.MODELS[mode]}
GOALS = (1.0, 1.2)


def gemm_row(n=2048, repeat=5):
    """(NumPy GFLOP/s, torch.mm GFLOP/s) of an (n, n) @ (n, n) float32 product, best of ``repeat``: the
    benchmark's own GEMM steps (bench_zerollm.gemm_step, bench_torch.gemm_step)."""
    import bench_torch
    import bench_zerollm
    rates = []
    for side in (bench_zerollm, bench_torch):
        step = side.gemm_step(dict(n=n, seed=0))
        step()
        rates.append(2.0 * n ** 3 / min(_timed(step) for _ in range(repeat)) * 1e-9)
    return rates


def _timed(fn):
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def measure(name, engine, steps):
    """{torch_ms, zerollm_ms, gemm_ms, rest_ms, ratio}: medians over ``steps`` interleaved pairs."""
    import torch

    import bench_torch
    import bench_zerollm
    cfg, B = CONFIGS[name]
    torch_step = bench_torch.train_step(dict(config=cfg, batch=B, seed=0))
    ours = bench_zerollm.train_step(dict(config=cfg, batch=B, seed=0, engine=engine, gemm="torch"))
    spent = [0.0]
    mm, addmm = torch.mm, torch.addmm

    def timed(product):                    # bench_zerollm's products look torch.mm / addmm up at each call
        def run(*args):
            t0 = time.perf_counter()
            try:
                return product(*args)
            finally:
                spent[0] += time.perf_counter() - t0
        return run
    torch.mm, torch.addmm = timed(mm), timed(addmm)     # addmm: the fast engine's forward with its bias
    try:
        for _ in range(2):                 # warm-up
            torch_step()
            ours()
        t_torch, t_ours, t_gemm = [], [], []
        for _ in range(steps):
            t_torch.append(_timed(torch_step))
            spent[0] = 0.0
            t_ours.append(_timed(ours))
            t_gemm.append(spent[0])
    finally:
        torch.mm, torch.addmm = mm, addmm
    med = statistics.median
    return {"torch_ms": 1e3 * med(t_torch), "zerollm_ms": 1e3 * med(t_ours), "gemm_ms": 1e3 * med(t_gemm),
            "rest_ms": 1e3 * med(o - g for o, g in zip(t_ours, t_gemm)),
            "ratio": med(t / o for t, o in zip(t_torch, t_ours))}


def table(rows):
    head = ["config", "engine", "torch step ms", "zerollm step ms", "its torch.mm ms (G)", "rest ms (R)",
            "torch/zerollm (paired)"] + [f"R allowed for {g:.1f}x" for g in GOALS]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for (name, engine), r in rows:
        allowed = [f"{r['torch_ms'] / g - r['gemm_ms']:.1f}" for g in GOALS]
        lines.append(f"| {name} | {engine} | {r['torch_ms']:.1f} | {r['zerollm_ms']:.1f} | {r['gemm_ms']:.1f} | "
                     f"{r['rest_ms']:.1f} | {r['ratio']:.3f}x | " + " | ".join(allowed) + " |")
    return "\n".join(lines)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--config", default="nanogpt-4x128",
                   help=f"{', '.join(CONFIGS)}, several with commas (default %(default)s)")
    p.add_argument("--engine", default="numpy,fast", help="numpy, fast, or both (default %(default)s)")
    p.add_argument("--steps", type=int, default=20, help="timed pairs of steps per row (default %(default)s)")
    args = p.parse_args(argv)
    names, engines = args.config.split(","), args.engine.split(",")
    unknown = [n for n in names if n not in CONFIGS]
    if unknown:
        p.error(f"unknown config {unknown}; choose from {', '.join(CONFIGS)}")
    if not set(engines) <= {"numpy", "fast"}:
        p.error(f"unknown engine in {args.engine!r}; choose from numpy, fast")
    if args.steps < 1:
        p.error("--steps must be >= 1")
    if docsmode.active():         # tests/test_docs_run.py runs every documented command line, in seconds
        print(f"{docsmode.ENV} is set: the smoke config only, 2 pairs of steps", file=sys.stderr)
        names, args.steps = [W.MODELS["smoke"][0][0]], 2
    import torch
    from threadpoolctl import threadpool_limits

    from zerollm.engine.memory import keep_freed_memory
    keep_freed_memory()                    # as the benchmark's workers, for both sides
    torch.set_num_threads(1)
    limiter = threadpool_limits(1)         # noqa: F841 (held until exit)
    numpy_rate, torch_rate = gemm_row(256 if docsmode.active() else 2048)
    print(f"GEMM row (float32 square product, 1 thread): NumPy {numpy_rate:.1f} GFLOP/s, torch.mm {torch_rate:.1f} "
          f"GFLOP/s, NumPy/torch {numpy_rate / torch_rate:.2f}x")
    rows = [((n, e), measure(n, e, args.steps)) for n in names for e in engines]
    print(table(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
