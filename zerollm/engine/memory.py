"""Keep freed memory in the process, so each training step does not page-fault its activations again.

NumPy allocates every activation and gradient with malloc. glibc's malloc serves big blocks
(more than ~128 KiB to start with) with fresh mmap'd pages and hands freed memory at the top of
the heap back to the kernel. A training step frees megabytes of activations and then allocates
the same sizes again at the next step, so the kernel has to zero-fill and map those pages anew
every time: on nanoGPT's CPU model that cost about a third of a forward pass.

``keep_freed_memory()`` raises both thresholds (mallopt M_MMAP_THRESHOLD and M_TRIM_THRESHOLD):
freed blocks stay in malloc's free lists and the next step reuses them. It changes nothing but
speed, affects the whole process, and does nothing where the C library is not glibc.

``status_kib`` and ``reset_peak_rss`` read the process's own memory (Linux /proc): what the benchmarks
report as peak memory, for the main process and for the shard workers (zerollm.training.processes).
"""

import ctypes
import ctypes.util

_M_TRIM_THRESHOLD = -1
_M_MMAP_THRESHOLD = -3
MMAP_THRESHOLD = 32 << 20      # glibc's maximum: blocks up to 32 MiB come from the heap
TRIM_THRESHOLD = 1 << 30       # give memory back only when 1 GiB lies free at the top of the heap

_done = False


def keep_freed_memory():
    """Tune glibc malloc once per process; returns True when the settings took effect."""
    global _done
    if _done:
        return True
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        mallopt = libc.mallopt
    except (OSError, AttributeError):       # not glibc (macOS, Windows, musl without mallopt)
        return False
    _done = bool(mallopt(_M_MMAP_THRESHOLD, MMAP_THRESHOLD)) and bool(mallopt(_M_TRIM_THRESHOLD, TRIM_THRESHOLD))
    return _done


def status_kib(field):
    """A line of /proc/self/status in KiB (Linux): VmRSS (resident now), VmHWM (peak resident),
    RssShmem (resident shared memory). OSError where the file or the line is missing."""
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    raise OSError(f"/proc/self/status has no {field}")


def reset_peak_rss():
    """Start the peak RSS (VmHWM) afresh from the RSS now (writing 5 to /proc/self/clear_refs, Linux 4.0
    and later); returns that RSS in KiB, or None where the reset is refused or /proc is missing."""
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        return status_kib("VmRSS")
    except OSError:
        return None
