"""Many rows of x times one quantized matrix, a prompt's prefill: the fast engine's integer GEMM on the blocks as
stored (engine/fast/qgemm.py) against W decoded in slabs for BLAS (the path before it, and the float path still)
and against BLAS's sgemm on the float matrix, per kind and number of rows N (issue #61).

    python benchmarks/qgemm.py                         # 64 x 768 @ 3072 x 768 (GPT-2-124M's MLP), 1 thread
    python benchmarks/qgemm.py --rows 4 8 16 32 64 128 --threads 2

For N below quant.SLAB_FROM the decode kernels (one row of W at a time) are timed too: the crossover, which
sets qgemm.ROWS_FROM. The ways take turns for --repeats rounds of --calls calls each (a burst of load from other
jobs hits them all); the best round of each is printed, in microseconds a call, with sgemm's time divided by each (above 1: faster than float32
BLAS) and sgemm's GFLOP/s. Beside the table: the host (lscpu), NumPy's BLAS, the load average before and after,
and one thread's memory bandwidth. The whole-model prefill table is benchmarks/decode.py's.
"""

import argparse
import os
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from kquant_matvec import bandwidth, blas, host  # noqa: E402

KINDS = ("q8_0", "q4_0", "q4_K", "q5_K", "q6_K")


def _timed(fn):
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def ways(kind, w, few):
    """name -> f(x) for one quantized matrix w."""
    from zerollm.engine.fast import kquant, quant
    from zerollm.engine.fast.blas import thread_cap
    if kind.endswith("K"):
        blocks = np.ascontiguousarray(w.blocks)

        def slabs(x):
            return kquant._by_slabs(x, blocks, kind, np.empty((x.shape[0], w.shape[0]), np.float32))

        def integer(x):                                   # Q4_K / Q5_K: scales unpacked at the first call
            return kquant._many_rows(x, w, blocks)
    else:
        def slabs(x):
            return quant._by_slabs(x, w)

        def integer(x):
            return quant._many_rows(x, w)
    out = {"qgemm": integer, "BLAS slabs": slabs}
    if few:                                               # the decode step's kernels, one row of W at a time
        out["decode kernels"] = lambda x: quant.integer_product(x, w, thread_cap())
    return out


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rows", type=int, nargs="+", default=[64], help="rows of x (N)")
    p.add_argument("--out", type=int, default=3072, help="rows of W")
    p.add_argument("--cols", type=int, default=768, help="a multiple of 256")
    p.add_argument("--kinds", nargs="+", default=list(KINDS), choices=KINDS)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--calls", type=int, default=10)
    args = p.parse_args(argv)
    from zerollm.engine.fast import quant as fast_quant
    from zerollm.engine.threads import limit_threads
    from zerollm.interop import quant
    rng = np.random.default_rng(0)
    wf = (rng.standard_normal((args.out, args.cols)) * 0.02).astype(np.float32)
    mats = {kind: quant.blocks_matrix(quant.quantize(wf, kind), kind, wf.shape) for kind in args.kinds}
    load_before = os.getloadavg()[0]
    rows = []
    with limit_threads(args.threads):
        for n in args.rows:
            x = rng.standard_normal((n, args.cols)).astype(np.float32)
            fns = {("f32", "sgemm"): lambda x: x @ wf.T}
            for kind, w in mats.items():
                for name, fn in ways(kind, w, n < fast_quant.SLAB_FROM).items():
                    fns[(kind, name)] = fn
            for fn in fns.values():
                fn(x)                                     # compiled (or loaded from numba's cache) first
            best = {key: float("inf") for key in fns}
            for _ in range(args.repeats):
                for key, fn in fns.items():
                    best[key] = min(best[key], _timed(lambda: [fn(x) for _ in range(args.calls)]) / args.calls)
            rows.append((n, best))
        gbs = bandwidth()
    print(f"host: {host()}; BLAS: {blas()}; threads {args.threads}; load average {load_before:.1f} before, "
          f"{os.getloadavg()[0]:.1f} after")
    print(f"memory bandwidth (one thread, 256 MiB copy): {gbs:.1f} GB/s\n")
    print(f"| N x {args.cols} @ ({args.out} x {args.cols})^T | kind | way | us a call | sgemm's time / this |")
    print("|---|---|---|---:|---:|")
    for n, best in rows:
        sgemm = best[("f32", "sgemm")]
        gflops = 2 * n * args.out * args.cols / sgemm / 1e9
        print(f"| {n} | f32 | sgemm ({gflops:.0f} GFLOP/s) | {sgemm * 1e6:.0f} | 1.00 |")
        for (kind, name), t in best.items():
            if kind != "f32":
                print(f"| {n} | {kind} | {name} | {t * 1e6:.0f} | {sgemm / t:.2f} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
