"""How two MPI ranks wait for each other: sleeping (zerollm's default) or MPICH's busy loop.

    python benchmarks/mpi_wait.py                        # quiet, then with 9 busy processes; 3 rounds
    python benchmarks/mpi_wait.py --busy 0 4 9 --rounds 5 --steps 200

`mpirun -n 2 zerollm train` on nanogpt-4x128 (benchmarks/mpi_scaling.py's config) with
ZEROLLM_MPI_WAIT=sleep and =spin (an evaluation and a checkpoint every 25 steps, as in a real run),
alternating within each round, first on the machine as it is and then
with N extra busy processes (plain Python loops, started and stopped here) competing for the cores. A
rank that finishes its shard first waits in the gradient gather for the other: MPICH spins there, which
is free while each rank has a core of its own and costs the late rank CPU time once the cores are shared.
The table gives, for each case, the median over rounds of the job's wall time, its CPU time (both ranks,
user + system, from getrusage of the children) and tokens/s, and the ratio of sleep to spin.
"""

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE)]

from mpi_scaling import SKIP, one_run  # noqa: E402

from zerollm.io import docsmode  # noqa: E402

CONFIG = "nanogpt-4x128"
WAITS = ("sleep", "spin")
# as a real run: an evaluation and a checkpoint (written by rank 0 alone, while the other rank waits)
# every EVERY steps
EVERY = 25


def _children_cpu():
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def measured(wait, steps, folder):
    """(wall seconds, CPU seconds, tokens/s) of one two-rank run."""
    cpu, start = _children_cpu(), time.perf_counter()
    rate = one_run(CONFIG, 2, 1, steps, folder, env={"ZEROLLM_MPI_WAIT": wait},
                   flags=["--eval-interval", str(EVERY), "--checkpoint-interval", str(EVERY), "--eval-iters", "5"])
    return time.perf_counter() - start, _children_cpu() - cpu, rate


def busy_processes(n, seconds):
    """``n`` processes that only burn CPU, each ending by itself after ``seconds`` at the latest."""
    loop = f"import time\nend = time.monotonic() + {seconds}\nwhile time.monotonic() < end: pass"
    return [subprocess.Popen([sys.executable, "-c", loop]) for _ in range(n)]


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--busy", type=int, nargs="+", default=[0, 9], help="extra busy processes for each case")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--steps", type=int, default=150)
    args = p.parse_args(argv)
    if docsmode.active():     # tests/test_docs_run.py runs every documented command line, in seconds
        print(f"{docsmode.ENV} is set: 1 round of {SKIP + 2} steps, with 0 and 1 busy processes", file=sys.stderr)
        args.busy, args.rounds, args.steps = [0, 1], 1, SKIP + 2
    print(f"{os.cpu_count()} CPUs; load average before: {os.getloadavg()[0]:.2f}")
    rows = []
    with tempfile.TemporaryDirectory() as folder:
        for busy in args.busy:
            burners = busy_processes(busy, seconds=3600)
            try:
                runs = {wait: [] for wait in WAITS}
                for _ in range(args.rounds):
                    for wait in WAITS:
                        runs[wait].append(measured(wait, args.steps, folder))
            finally:
                for proc in burners:
                    proc.kill()
                    proc.wait()
            med = {wait: [statistics.median(column) for column in zip(*runs[wait])] for wait in WAITS}
            rows.append((busy, med))
    print(f"load average after: {os.getloadavg()[0]:.2f}")
    print("| busy processes | wait | wall s | CPU s (2 ranks) | tokens/s |\n|---|---|---|---|---|")
    for busy, med in rows:
        for wait in WAITS:
            wall, cpu, rate = med[wait]
            print(f"| {busy} | {wait} | {wall:.1f} | {cpu:.1f} | {rate:,.0f} |")
        ratio = [a / b for a, b in zip(med["sleep"], med["spin"])]
        print(f"| {busy} | sleep / spin | {ratio[0]:.2f}x | {ratio[1]:.2f}x | {ratio[2]:.2f}x |")


if __name__ == "__main__":
    main()
