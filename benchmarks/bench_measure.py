"""How a worker measures: thread limits, CPU pinning, the timing loop, peak memory, library info.

Fairness rules (docs/benchmarks.md): both contenders get the same thread count through the same
knobs (environment variables set by the harness, torch.set_num_threads, threadpoolctl), are pinned
to the same CPUs, warm up before timing, and report the median time of their timed steps.
"""

import ctypes
import gc
import os
import time

# the variables every BLAS / OpenMP runtime reads at load time; set by the harness in each worker's env
THREAD_VARS = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")
# OpenBLAS overrides that would make NumPy's BLAS differ from its own CPU detection: removed for workers
UNSET_VARS = ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE")


# ----------------------------------------------------------------------------
# threads and CPUs

def worker_env(threads, base=None, coretype=None):
    """The environment of one worker: thread counts set, OpenBLAS overrides removed (only here).

    ``coretype`` (e.g. 'Haswell'): a supplementary experiment, not the benchmark's rule: every worker's
    OpenBLAS is told to use that kernel family instead of the one it would pick for this CPU."""
    env = dict(os.environ if base is None else base)
    for name in THREAD_VARS:
        env[name] = str(threads)
    for name in UNSET_VARS:
        env.pop(name, None)
    if coretype:
        env["OPENBLAS_CORETYPE"] = coretype
    return env


def pin_cpus(threads):
    """Pin this process to its first ``threads`` allowed CPUs (the same CPUs for every contender)."""
    allowed = sorted(os.sched_getaffinity(0))
    chosen = allowed[:threads]
    os.sched_setaffinity(0, chosen)
    return chosen


def limit_threads(threads, use_torch):
    """threadpoolctl limits for every BLAS/OpenMP pool in the process (and torch's intra-op pool).

    Returns the threadpoolctl limiter (keep it alive) or None when threadpoolctl is missing; the
    environment variables set by the harness already bound the pools then.
    """
    if use_torch:
        import torch
        torch.set_num_threads(threads)
    try:
        from threadpoolctl import threadpool_limits
    except ImportError:
        return None
    return threadpool_limits(limits=threads)


def library_info(use_torch):
    """Which BLAS (and kernel architecture) this process uses, with its thread counts."""
    import numpy as np
    info = {"numpy": np.__version__, "affinity": sorted(os.sched_getaffinity(0)),
            "env": {name: os.environ.get(name) for name in THREAD_VARS + UNSET_VARS}}
    try:
        from threadpoolctl import threadpool_info
        info["threadpools"] = [{k: pool.get(k) for k in ("internal_api", "prefix", "version",
                                                          "architecture", "num_threads", "threading_layer")}
                               for pool in threadpool_info()]
    except ImportError:
        info["threadpools"] = "threadpoolctl not installed"
    if use_torch:
        import torch
        info["torch"] = {"version": torch.__version__, "num_threads": torch.get_num_threads(),
                         "cpu_capability": torch.backends.cpu.get_cpu_capability(),
                         "mkl": torch.backends.mkl.is_available(),
                         "mkldnn (oneDNN)": torch.backends.mkldnn.is_available(),
                         "build": _torch_math_libraries(torch.__config__.show())}
    return info


def _torch_math_libraries(config_text):
    """The MKL and oneDNN (MKL-DNN) lines of torch.__config__.show(), e.g. 'Intel(R) MKL-DNN v3.12.0'."""
    keep = ("Math Kernel Library", "MKL-DNN", "OpenMP", "CPU capability")
    return [line.strip(" -") for line in config_text.splitlines() if any(k in line for k in keep)]


# ----------------------------------------------------------------------------
# timing and memory

def time_steps(step, *, warmup, min_steps, min_seconds, max_steps):
    """Run ``step()`` warmup times untimed, then time it until min_steps AND min_seconds are reached
    (or max_steps). Returns (per-step seconds, the last step's result, per-step CPU seconds).

    The CPU seconds (time.process_time: every thread of the process, user + system) leave out the time
    the process waited for a CPU, so on a busy shared machine they stay near what a quiet machine's
    wall time would be -- for one thread. With more threads they add up the threads (and whatever a
    thread pool burns spinning), so only the 1-thread CPU times are compared."""
    result = None
    for _ in range(warmup):
        result = step()
    times, cpu = [], []
    start = time.perf_counter()
    while len(times) < max_steps and (len(times) < min_steps or time.perf_counter() - start < min_seconds):
        t0, c0 = time.perf_counter(), time.process_time()
        result = step()
        times.append(time.perf_counter() - t0)
        cpu.append(time.process_time() - c0)
    return times, result, cpu


def release_free_memory():
    """Hand memory that was freed but kept by the allocator back to the OS (glibc malloc_trim).

    Without it, memory freed while building the model (e.g. float64 weights before the float32
    copy) stays in the process and a later step can reuse it without raising the RSS: that step
    would look free. Returns whether the trim was possible (glibc only).
    """
    gc.collect()
    try:
        libc = ctypes.CDLL("libc.so.6")
        libc.malloc_trim(0)                                # 0: keep no free memory at the heap top
    except (OSError, AttributeError):                      # not glibc
        return False
    return True


def peak_memory(step):
    """Run ``step()`` once; return (its result, peak RSS increase in MiB, the method used).

    The same method for every contender: give freed memory back to the OS, reset the process's
    peak RSS (writing 5 to /proc/self/clear_refs, Linux >= 4.0), note the RSS, run, read the
    peak (VmHWM). Where the reset is refused the old peak is the baseline, which can only
    under-count.
    """
    from zerollm.engine.memory import reset_peak_rss, status_kib      # /proc/self readers, shared with the workers
    trimmed = release_free_memory()
    base, method = reset_peak_rss(), "VmHWM - VmRSS after clear_refs"
    if base is None:
        base, method = status_kib("VmHWM"), "VmHWM - previous VmHWM"
    result = step()
    method += ", after malloc_trim" if trimmed else ""
    return result, max(status_kib("VmHWM") - base, 0) / 1024, method
