"""One measurement of one contender, in a process of its own:

    python benchmarks/worker.py <task> <contender> '<json params>'

prints ONE line of JSON on stdout: per-step times, the peak memory of the first step, what the
task returns (losses, tokens) and which BLAS/threads the process really used.

tasks: train, forward, generate, attention, gemm (the square GEMM peak), gemm_model (the products of a
model config's linear layers), check (the losses of the first training steps).
contenders: zerollm | torch (models), naive | flash | torch (attention), numpy | torch (gemm, gemm_model);
"zerollm-fast", "naive-fast", "flash-fast" run zerollm's fast engine (zerollm.engine) instead of NumPy's.
params: the task's own (config, batch, T, n, ...) plus "threads", "seed" and "budget"; train with
"gemm": "torch" has zerollm's linear layers multiply with torch.mm (bench_zerollm.use_torch_gemms)
(warmup, min_steps, min_seconds, max_steps; see bench_measure.time_steps).

The harness (run.py) sets the thread variables in this process's environment; here we pin the
CPUs, apply torch.set_num_threads and threadpoolctl, and only then build and time.

    python benchmarks/worker.py --serve

(run.py --smoke only, where the numbers mean nothing and the run checks the harness): one process takes
one job a line on stdin, the JSON list [task, contender, params], and answers each with its one line of
JSON, so that torch and numba are imported once, not once a job. A job that raises answers
{"error": ...} and the process takes the next.
"""

import contextlib
import json
import sys
import traceback
from pathlib import Path

HERE = Path(__file__).resolve().parent
# the zerollm of this checkout first; benchmarks/ (the bench_* modules) LAST, so that
# benchmarks/profile.py never hides the standard library's profile module (torch imports it)
sys.path[:] = [str(HERE.parent)] + [p for p in sys.path if Path(p or ".").resolve() != HERE] + [str(HERE)]

import bench_measure  # noqa: E402  (needs the path above; imports nothing heavy)
from zerollm.engine.memory import keep_freed_memory  # noqa: E402

TASKS = ("train", "forward", "generate", "attention", "gemm", "gemm_model", "check")
CONTENDERS = ("zerollm", "torch", "naive", "flash", "numpy", "zerollm-fast", "naive-fast", "flash-fast")


def split_engine(contender):
    """'flash-fast' -> ('flash', 'fast'); 'flash' -> ('flash', 'numpy')."""
    base, _, engine = contender.partition("-")
    return base, engine or "numpy"


def tiny(task, params):
    """The same task on tiny inputs: run once first, so that one-time library set-up (torch loads
    kernels and autograd state lazily: ~40 MiB) is not counted as the first real step's memory."""
    if task == "attention":
        return dict(params, T=16)
    if task == "gemm":
        return dict(params, n=32)
    if task == "generate":
        return dict(params, new_tokens=2)
    return dict(params, config=dict(params["config"], block_size=8), batch=1)


def measure(side, task, contender, params):
    """A primer on tiny inputs; the peak memory of the first real step; the rest of the warm-up;
    then the timed steps."""
    budget = params["budget"]
    side.build(task, contender, tiny(task, params))()
    step = side.build(task, contender, params)
    _, peak_mib, method = bench_measure.peak_memory(step)               # warm-up step 1
    if hasattr(step, "worker_memory_mib"):                              # shards in worker processes
        peak_mib += step.worker_memory_mib()
    times, last, cpu = bench_measure.time_steps(step, warmup=budget["warmup"] - 1, min_steps=budget["min_steps"],
                                                min_seconds=budget["min_seconds"], max_steps=budget["max_steps"])
    out = {"times": times, "cpu_times": cpu, "peak_mib": peak_mib, "peak_method": method}
    if task == "generate":
        out["tokens"] = last                               # the new token ids of the last timed step
    return out


def run(task, contender, params):
    """One measurement of ``contender`` (a name of CONTENDERS) at ``task`` -> the dict main prints."""
    contender, engine = split_engine(contender)
    params = dict(params, engine=engine)
    threads = params["threads"]
    cpus = bench_measure.pin_cpus(threads)                # before any thread pool exists
    # zerollm's CLI keeps freed memory in the process (zerollm.engine.memory); both contenders get the same
    # malloc settings so the comparison stays about the engines
    keep_freed_memory()
    use_torch = contender == "torch"
    if use_torch:
        import bench_torch as side
    else:
        import bench_zerollm as side
    # zerollm trains with N threads as N batch shards in N Python threads, each with single-threaded
    # BLAS (zerollm.training.parallel, what `zerollm train --threads N` does); everything else uses N BLAS threads
    sharded = contender == "zerollm" and task in ("train", "forward", "check") and threads > 1
    # the limits stay after run returns: threadpoolctl restores them only when a with block ends
    limiter = bench_measure.limit_threads(1 if sharded else threads, use_torch)
    if task == "check":
        out = {"losses": side.check_losses(params, params["steps"])}
    else:
        out = measure(side, task, contender, params)
    out.update(task=task, contender=contender, engine=engine, threads=threads, cpus=cpus,
               threadpool_limits=limiter is not None, info=bench_measure.library_info(use_torch))
    return out


def usage_error(task, contender):
    """None for a known task and contender, else the usage line."""
    if task in TASKS and contender in CONTENDERS:
        return None
    return f"usage: worker.py {{{','.join(TASKS)}}} {{{','.join(CONTENDERS)}}} '<json params>'"


def serve():
    """--serve: a job a line -> an answer a line; what a job prints goes to stderr, so stdout holds answers only."""
    answers = sys.stdout
    for line in sys.stdin:
        task, contender, params = json.loads(line)
        wrong = usage_error(task, contender)
        try:
            if wrong:
                raise ValueError(wrong)
            with contextlib.redirect_stdout(sys.stderr):
                out = run(task, contender, params)
        except Exception as e:                                          # noqa: BLE001 (one job's failure)
            traceback.print_exc()
            out = {"error": f"{task}/{contender} failed: {type(e).__name__}: {e}"}
        answers.write(json.dumps(out) + "\n")
        answers.flush()
    return 0


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    if argv == ["--serve"]:
        return serve()
    if len(argv) != 3 or usage_error(argv[0], argv[1]):
        sys.exit(usage_error("", ""))
    print(json.dumps(run(argv[0], argv[1], json.loads(argv[2]))))
    return 0


if __name__ == "__main__":
    sys.exit(main())
