"""Causal attention forward + backward: zerollm's tiled ("flash") attention vs torch's
``scaled_dot_product_attention(is_causal=True)``, side by side in ONE process, with the GEMM row.

    env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE python benchmarks/attention_speed.py
    env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE python benchmarks/attention_speed.py --T 256 1024 --threads 1

Contenders, interleaved round by round (A B C A B C ...) so that a busy phase of a shared machine
hits all of them: 'numpy' (the NumPy reference of zerollm.nn.flash), 'fast' (the same functions with
the fast engine selected: zerollm/engine/fast/flash.py) and 'torch'. Each round times one forward +
backward per contender; the table shows the median over rounds and the median of the paired ratios
torch_time / our_time (> 1: zerollm is faster). The GEMM row is (n, n) @ (n, n) float32 with
NumPy (np.matmul) and torch (torch.mm) in the same process at the same thread count, so that a
reader sees whether one BLAS is faster on this host.

Threads: threadpoolctl limits NumPy's BLAS and the OpenMP pools, torch.set_num_threads and
numba.set_num_threads set the others: the same count for every contender. Shapes: q, k, v
(B, nh, T, hs) float32, standard normal; B=1, nh=4, hs=64 (the benchmark's attention shape).
"""

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from zerollm.engine import set_engine  # noqa: E402
from zerollm.io import docsmode  # noqa: E402
from zerollm.nn.flash import flash_sdpa_backward, flash_sdpa_forward  # noqa: E402


def inputs(T, B, nh, hs, seed=0):
    """q, k, v, dout (B, nh, T, hs) float32."""
    rng = np.random.default_rng(seed)
    return [rng.standard_normal((B, nh, T, hs), dtype=np.float32) for _ in range(4)]


def ours(engine, q, k, v, dout):
    """One forward + backward of zerollm's flash attention with ``engine`` ('numpy' or 'fast')."""
    q5, k5, v5, d5 = (a[:, :, None] for a in (q, k, v, dout))     # (B, nh, 1, T, hs): g = 1

    def step():
        set_engine(engine)
        out, cache = flash_sdpa_forward(q5, k5, v5, causal=True)
        return out, *flash_sdpa_backward(d5, cache)
    return step


def theirs(q, k, v, dout):
    import torch
    import torch.nn.functional as F
    q, k, v, dout = (torch.from_numpy(a) for a in (q, k, v, dout))
    for t in (q, k, v):
        t.requires_grad_(True)

    def step():
        for t in (q, k, v):
            t.grad = None
        out = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        out.backward(dout)
    return step


def gemm(n):
    import torch
    rng = np.random.default_rng(0)
    a, b = (rng.standard_normal((n, n), dtype=np.float32) for _ in range(2))
    c = np.empty((n, n), np.float32)
    ta, tb, tc = torch.from_numpy(a), torch.from_numpy(b), torch.empty(n, n)
    return {"numpy": lambda: np.matmul(a, b, out=c), "torch": lambda: torch.mm(ta, tb, out=tc)}


def timed(fn):
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def rounds(steps, n):
    """{name: [seconds]} of n interleaved rounds, after one untimed warm-up round."""
    for fn in steps.values():
        fn()
    times = {name: [] for name in steps}
    for _ in range(n):
        for name, fn in steps.items():
            times[name].append(timed(fn))
    return times


def causal_flops(T, B, nh, hs):
    """FLOPs of causal attention forward + backward counted as torch's and our tiled kernels do the
    work: 7 products of T x T x hs (2 forward, 5 backward with the recomputed scores), each half
    done under the causal mask: 7 * 2 * (T^2 / 2) * hs per head."""
    return 7 * T * T * hs * B * nh


def measure(args, threads):
    import numba
    import torch
    from threadpoolctl import threadpool_limits
    torch.set_num_threads(threads)
    numba.set_num_threads(min(threads, numba.config.NUMBA_NUM_THREADS))
    rows = []
    with threadpool_limits(limits=threads):
        g = rounds(gemm(args.gemm_n), args.rounds)
        flops = 2 * args.gemm_n ** 3
        rows.append({"what": f"GEMM {args.gemm_n}^3", "threads": threads,
                     "gemm_numpy": flops / statistics.median(g["numpy"]) * 1e-9,
                     "gemm_torch": flops / statistics.median(g["torch"]) * 1e-9})
        print(format_row(rows[-1], args.engines), flush=True)
        for T in args.T:
            B, nh = (1, 1) if T >= args.reduce_from else (args.B, args.nh)
            q, k, v, dout = inputs(T, B, nh, args.hs)
            steps = {e: ours(e, q, k, v, dout) for e in args.engines}
            steps["torch"] = theirs(q, k, v, dout)
            n = max(args.rounds // (4 if T >= 4096 else 1), 3)
            t = rounds(steps, n)
            row = {"what": f"T={T}", "threads": threads, "B": B, "nh": nh, "hs": args.hs, "rounds": n,
                   "torch_ms": 1e3 * statistics.median(t["torch"])}
            for e in args.engines:
                row[f"{e}_ms"] = 1e3 * statistics.median(t[e])
                row[f"{e}_ratio"] = statistics.median(a / b for a, b in zip(t["torch"], t[e]))
                row[f"{e}_gflops"] = causal_flops(T, B, nh, args.hs) / statistics.median(t[e]) * 1e-9
            row["torch_gflops"] = causal_flops(T, B, nh, args.hs) / statistics.median(t["torch"]) * 1e-9
            rows.append(row)
            print(format_row(row, args.engines), flush=True)
    set_engine("numpy")
    return rows


def format_row(r, engines):
    if "gemm_numpy" in r:
        return (f"{r['what']:>10} thr={r['threads']}  GEMM GFLOP/s: numpy {r['gemm_numpy']:.0f}, "
                f"torch {r['gemm_torch']:.0f} (numpy/torch {r['gemm_numpy'] / r['gemm_torch']:.2f})")
    ours_txt = "  ".join(f"{e} {r[f'{e}_ms']:8.1f} ms ({r[f'{e}_ratio']:.2f}x, {r[f'{e}_gflops']:.0f} GF/s)"
                         for e in engines)
    return (f"{r['what']:>10} thr={r['threads']} B={r['B']} nh={r['nh']}  torch {r['torch_ms']:8.1f} ms "
            f"({r['torch_gflops']:.0f} GF/s)  {ours_txt}")


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--T", type=int, nargs="+", default=[256, 512, 1024, 2048, 4096, 8192])
    p.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    p.add_argument("--engines", default="numpy,fast", help="zerollm engines to time (default %(default)s)")
    p.add_argument("--B", type=int, default=1)
    p.add_argument("--nh", type=int, default=4)
    p.add_argument("--hs", type=int, default=64)
    p.add_argument("--reduce-from", type=int, default=10 ** 9,
                   help="from this T on, B = nh = 1 (to fit a time budget); default: never")
    p.add_argument("--rounds", type=int, default=7, help="interleaved rounds (a quarter from T=4096)")
    p.add_argument("--gemm-n", type=int, default=1024)
    p.add_argument("--json", type=Path, help="also write the rows here")
    args = p.parse_args(argv)
    args.engines = args.engines.split(",")
    if docsmode.active():
        args.T, args.threads, args.rounds, args.gemm_n = [64], [1], 1, 128
    from threadpoolctl import threadpool_info
    print("BLAS:", ", ".join(f"{i['internal_api']} {i.get('version')} {i.get('architecture')}"
                             for i in threadpool_info() if i["user_api"] == "blas"))
    rows = [r for threads in args.threads for r in measure(args, threads)]
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
