"""One quantized matrix times one row, the step decoding repeats: the fast engine's k-quant kernels (Q4_K, Q5_K,
Q6_K) next to its Q8_0 / Q4_0 kernels and NumPy's float32 product, on the same matrix (issue #61).

    python benchmarks/kquant_matvec.py                     # GPT-2-124M's MLP matrix, 3072 x 768, 1 thread
    python benchmarks/kquant_matvec.py --rows 768 --cols 3072 --threads 2

The kinds take turns (f32, q8_0, ..., f32, ...) for --repeats rounds of --calls calls each, so a burst of load
from other jobs hits them all; the best round of each is printed, as microseconds a call, the bytes of the
matrix as stored, the GB/s that makes, and the time against Q8_0's. Beside the table: the host (lscpu), NumPy's
BLAS (threadpoolctl), the load average and one thread's memory bandwidth (a 256 MiB copy: bytes read +
written per second), the most any kind can reach. The whole-model decode table is benchmarks/decode.py's.
"""

import argparse
import os
import subprocess
import time

import numpy as np

KINDS = ("f32", "q8_0", "q4_0", "q4_K", "q5_K", "q6_K")


def host():
    out = subprocess.run(["lscpu"], capture_output=True, text=True).stdout
    return next((line.split(":", 1)[1].strip() for line in out.splitlines() if line.startswith("Model name")), "?")


def blas():
    from threadpoolctl import threadpool_info
    pools = [p for p in threadpool_info() if p.get("user_api") == "blas"]
    return ", ".join(f"{p['internal_api']} {p.get('version')} ({p.get('architecture')})" for p in pools) or "?"


def bandwidth():
    """One thread's GB/s for a 256 MiB copy (read + write), the best of 3."""
    src = np.ones(64 * 2 ** 20, np.float32)
    dst = np.empty_like(src)
    np.copyto(dst, src)                                   # the pages exist before the clock starts
    best = min(_timed(lambda: np.copyto(dst, src)) for _ in range(3))
    return 2 * src.nbytes / best / 1e9


def _timed(fn):
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def matrices(rows, cols, seed):
    from zerollm.interop import quant
    w = (np.random.default_rng(seed).standard_normal((rows, cols)) * 0.02).astype(np.float32)
    return {kind: w if kind == "f32" else quant.blocks_matrix(quant.quantize(w, kind), kind, w.shape)
            for kind in KINDS}


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rows", type=int, default=3072)
    p.add_argument("--cols", type=int, default=768, help="a multiple of 256")
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--repeats", type=int, default=7)
    p.add_argument("--calls", type=int, default=20)
    args = p.parse_args(argv)
    from zerollm.engine.fast.quant import quantized_matmul
    from zerollm.engine.threads import limit_threads
    mats = matrices(args.rows, args.cols, 0)
    x = np.random.default_rng(1).standard_normal((1, args.cols)).astype(np.float32)

    def call(m):
        return x @ m.T if isinstance(m, np.ndarray) else quantized_matmul(x, m)

    best = {kind: float("inf") for kind in KINDS}
    with limit_threads(args.threads):
        for m in mats.values():
            call(m)                                       # compiled (or loaded from numba's cache) first
        for _ in range(args.repeats):
            for kind, m in mats.items():
                t = _timed(lambda: [call(m) for _ in range(args.calls)]) / args.calls
                best[kind] = min(best[kind], t)
        gbs = bandwidth()
    print(f"host: {host()}; BLAS: {blas()}; load average {os.getloadavg()[0]:.1f}; threads {args.threads}")
    print(f"memory bandwidth (one thread, 256 MiB copy): {gbs:.1f} GB/s\n")
    print(f"| {args.rows} x {args.cols} times one row | bytes | us a call | GB/s | time / Q8_0's |")
    print("|---|---:|---:|---:|---:|")
    for kind, m in mats.items():
        t = best[kind]
        print(f"| {kind} | {m.nbytes:,} | {t * 1e6:.0f} | {m.nbytes / t / 1e9:.1f} | {t / best['q8_0']:.2f} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
