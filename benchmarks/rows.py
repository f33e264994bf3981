"""A decode step's float32 products at 1-16 rows of x: NumPy's BLAS against the fast engine's few-row kernels
(engine/fast/rows.py, issue #60), on GPT-2-124M's shapes.

    python benchmarks/rows.py                          # the head (50257 x 768 as x @ W.T) and c_fc (768 x 3072)
    python benchmarks/rows.py --rows 2 4 8 16 32 --threads 2

For each N, BLAS and the kernel take turns for --repeats rounds of --calls calls (a burst of load from other jobs
hits both); the best round of each is printed in ms a call, with the weight's GB/s (its bytes / the time: the
weight is read once a call at best) and BLAS's time divided by the kernel's (above 1: the kernel is faster).
At N = 1 the kernel is not used (BLAS's matrix-vector product reads W once); its time is printed for reference.
Beside the table: the host (lscpu), NumPy's BLAS, the load average before and after, and one thread's copy
bandwidth. rows.ROWS_UP_TO is set from this table.
"""

import argparse
import os
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from kquant_matvec import bandwidth, blas, host  # noqa: E402


def _timed(fn, calls):
    start = time.perf_counter()
    for _ in range(calls):
        fn()
    return (time.perf_counter() - start) / calls


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rows", type=int, nargs="+", default=[1, 2, 4, 8, 16], help="rows of x (N)")
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--calls", type=int, default=3)
    args = p.parse_args(argv)
    from zerollm.engine.fast import rows
    from zerollm.engine.threads import limit_threads
    rng = np.random.default_rng(0)
    head = (rng.standard_normal((50257, 768)) * 0.02).astype(np.float32)      # (V, C): x @ head.T
    c_fc = (rng.standard_normal((768, 3072)) * 0.02).astype(np.float32)       # (i, o): x @ c_fc
    shapes = [("head 50257 x 768, x @ W.T", head, lambda x: x @ head.T, lambda x: rows._run(
                  rows._HEAD, x, head, np.empty((x.shape[0], head.shape[0]), np.float32), head.shape[0],
                  args.threads), 1),
              ("c_fc 768 x 3072, x @ W", c_fc, lambda x: x @ c_fc,
               lambda x: rows.rows_product(x, c_fc, args.threads), 20)]
    load_before = os.getloadavg()[0]
    table = []
    with limit_threads(args.threads):
        for name, w, by_blas, by_rows, more in shapes:
            for n in args.rows:
                x = rng.standard_normal((n, 768)).astype(np.float32)
                np.testing.assert_allclose(by_rows(x), by_blas(x), rtol=1e-4, atol=1e-4)   # compiled, and right
                best = [float("inf")] * 2
                for _ in range(args.repeats):
                    for i, fn in enumerate((by_blas, by_rows)):
                        best[i] = min(best[i], _timed(lambda: fn(x), args.calls * more))
                table.append((name, n, w.nbytes, best))
        gbs = bandwidth()
    print(f"host: {host()}; BLAS: {blas()}; threads {args.threads}; load average {load_before:.1f} before, "
          f"{os.getloadavg()[0]:.1f} after")
    print(f"memory bandwidth (one thread, 256 MiB copy): {gbs:.1f} GB/s\n")
    print("| product | N | BLAS ms (GB/s) | rows.py ms (GB/s) | BLAS / rows.py |")
    print("|---|---:|---:|---:|---:|")
    for name, n, nbytes, (t_blas, t_rows) in table:
        print(f"| {name} | {n} | {t_blas * 1e3:.2f} ({nbytes / t_blas / 1e9:.1f}) | "
              f"{t_rows * 1e3:.2f} ({nbytes / t_rows / 1e9:.1f}) | {t_blas / t_rows:.2f} |")


if __name__ == "__main__":
    main()
