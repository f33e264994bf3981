"""Time and peak memory of attention forward + backward: naive (full T x T scores) vs tiled "flash".

    python benchmarks/attention_memory.py                        # T = 256, 1024, 4096, 8192
    python benchmarks/attention_memory.py --T 2048 --tile 128 256 512 --nh 4

Peak memory is what NumPy allocates during one forward + backward (inputs excluded), measured with
tracemalloc (NumPy reports its array buffers to it). Time is the best of ``--repeat`` runs made
without tracemalloc, which would slow the Python loop of the tiled version. B = 1, causal, float32.
Other scripts can import ``measure`` and ``attention_inputs``.

On a busy machine, multi-threaded OpenBLAS wastes most of its time synchronising threads on the
tiled version's small matrix products; ``--blas-threads 1`` (or OPENBLAS_NUM_THREADS=1) gives
steadier numbers.
"""

import argparse
import contextlib
import time
import tracemalloc

import numpy as np

from zerollm.nn.attention import sdpa_backward, sdpa_forward
from zerollm.nn.flash import DEFAULT_TILE, flash_sdpa_backward, flash_sdpa_forward


# ----------------------------------------------------------------------------
# one measured run

def attention_inputs(T, nh=1, hs=64, B=1, seed=0, dtype=np.float32):
    """q (B, nh, 1, T, hs), k and v (B, nh, 1, T, hs), dout like q: plain multi-head layout."""
    rng = np.random.default_rng(seed)
    shape = (B, nh, 1, T, hs)
    return [rng.standard_normal(shape).astype(dtype) for _ in range(4)]


def forward_backward(impl, q, k, v, dout, tile=DEFAULT_TILE):
    """One causal forward + backward with ``impl`` ('naive' or 'flash'); returns (out, dq, dk, dv)."""
    if impl == "flash":
        out, cache = flash_sdpa_forward(q, k, v, causal=True, tile=tile)
        return (out, *flash_sdpa_backward(dout, cache))
    out, cache = sdpa_forward(q, k, v, causal=True)
    return (out, *sdpa_backward(dout, cache))


def measure(impl, T, *, nh=1, hs=64, tile=DEFAULT_TILE, repeat=1):
    """{'seconds': best wall time, 'peak_bytes': peak allocation} of one forward + backward."""
    q, k, v, dout = attention_inputs(T, nh, hs)
    best = float("inf")
    for _ in range(repeat):
        start = time.perf_counter()
        forward_backward(impl, q, k, v, dout, tile)
        best = min(best, time.perf_counter() - start)
    tracemalloc.start()
    try:
        tracemalloc.reset_peak()
        results = forward_backward(impl, q, k, v, dout, tile)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    del results
    return {"seconds": best, "peak_bytes": peak}


# ----------------------------------------------------------------------------
# the table

def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--T", type=int, nargs="+", default=[256, 1024, 4096, 8192], help="sequence lengths")
    p.add_argument("--tile", type=int, nargs="+", default=[DEFAULT_TILE], help="flash tile sizes to try")
    p.add_argument("--nh", type=int, default=1, help="heads")
    p.add_argument("--hs", type=int, default=64, help="head size")
    p.add_argument("--repeat", type=int, default=1, help="timed runs per setting (best is kept)")
    p.add_argument("--no-naive", action="store_true", help="skip the naive version (e.g. for huge T)")
    p.add_argument("--blas-threads", type=int, default=None, help="cap BLAS threads (needs threadpoolctl)")
    args = p.parse_args(argv)
    with contextlib.ExitStack() as stack:
        if args.blas_threads:
            from threadpoolctl import threadpool_limits
            stack.enter_context(threadpool_limits(args.blas_threads, user_api="blas"))
        table(args)
    return 0


def table(args):
    """Print one row per (T, implementation): time, peak memory, and flash's ratios to naive."""
    threads = f", BLAS threads={args.blas_threads}" if args.blas_threads else ""
    print(f"causal attention forward+backward, B=1, nh={args.nh}, hs={args.hs}, float32{threads}")
    print(f"{'T':>6} {'impl':>12} {'seconds':>9} {'peak MB':>9} {'mem ratio':>10} {'speedup':>8}")
    for T in args.T:
        naive = None if args.no_naive else measure("naive", T, nh=args.nh, hs=args.hs, repeat=args.repeat)
        if naive:
            print(f"{T:>6} {'naive':>12} {naive['seconds']:>9.3f} {naive['peak_bytes'] / 2**20:>9.1f}")
        for tile in args.tile:
            r = measure("flash", T, nh=args.nh, hs=args.hs, tile=tile, repeat=args.repeat)
            ratio = f"1/{naive['peak_bytes'] / r['peak_bytes']:.0f}" if naive else "-"
            speed = f"{naive['seconds'] / r['seconds']:.2f}x" if naive else "-"
            print(f"{T:>6} {f'flash/{tile}':>12} {r['seconds']:>9.3f} {r['peak_bytes'] / 2**20:>9.1f} "
                  f"{ratio:>10} {speed:>8}")


if __name__ == "__main__":
    raise SystemExit(main())
