"""Keep freed memory in the process, so each training step does not page-fault its activations again.

NumPy allocates every activation and gradient with malloc. glibc's malloc serves big blocks
(more than ~128 KiB to start with) with fresh mmap'd pages and hands freed memory at the top of
the heap back to the kernel. A training step frees megabytes of activations and then allocates
the same sizes again at the next step, so the kernel has to zero-fill and map those pages anew
every time: on nanoGPT's CPU model that cost about a third of a forward pass.

``keep_freed_memory()`` raises both thresholds (mallopt M_MMAP_THRESHOLD and M_TRIM_THRESHOLD):
freed blocks stay in malloc's free lists and the next step reuses them. It changes nothing but
speed, affects the whole process, and does nothing where the C library is not glibc.

``empty_apart`` places a new array so that a loop streaming it beside other arrays of the same size
does not stall on "4K aliasing" (below).

``cache_blocks`` cuts a long chain of elementwise NumPy steps into blocks that stay in the CPU's cache.

``move_into_huge_pages`` lays the weights a decode step streams side by side in memory backed by 2 MiB pages.

``status_kib`` and ``reset_peak_rss`` read the process's own memory (Linux /proc): what the benchmarks
report as peak memory, for the main process and for the shard workers (zerollm.training.processes).
"""

import ctypes
import ctypes.util
import functools
import mmap

import numpy as np

_M_TRIM_THRESHOLD = -1
_M_MMAP_THRESHOLD = -3
MMAP_THRESHOLD = 32 << 20      # glibc's maximum: blocks up to 32 MiB come from the heap
TRIM_THRESHOLD = 1 << 30       # give memory back only when 1 GiB lies free at the top of the heap

_done = False

# Bytes of one array's block in a chain of elementwise steps (GELU's seven, softmax's five). A chain
# over a whole 12 MiB activation runs each step from main memory; cut into blocks of 256 KiB, the
# three or four arrays of a block (input, buffer, output, a temporary) stay in a 1-2 MiB L2 cache
# from its first step to its last. NumPy's per-call cost is ~1 us, a 256 KiB step ~20-60 us, so smaller
# blocks start to pay for their calls: blocks of about 256 KiB beat both whole arrays and smaller blocks
# (docs/profiles/design-decisions.md#elementwise-chains-in-blocks-cache_block).
CACHE_BLOCK = 256 << 10


def keep_freed_memory():
    """Tune glibc malloc once per process; returns True when the settings took effect."""
    global _done
    if _done:
        return True
    mallopt = getattr(_libc(), "mallopt", None)
    if mallopt is None:                     # not glibc (macOS, Windows, musl without mallopt)
        return False
    _done = bool(mallopt(_M_MMAP_THRESHOLD, MMAP_THRESHOLD)) and bool(mallopt(_M_TRIM_THRESHOLD, TRIM_THRESHOLD))
    return _done


@functools.lru_cache(maxsize=1)
def _libc():
    """The C library's functions (glibc's mallopt and malloc_trim on Linux), or None where it cannot be loaded."""
    try:
        return ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
    except OSError:
        return None


# ----------------------------------------------------------------------------
# 2 MiB pages for the weights. A decode step streams every weight matrix once; a quantized llama of 45 MB is
# about 11,000 pages of 4 KiB, each a TLB miss and a page-table walk, and the four-stream kernels
# (engine/fast/kquant.py) walk four at a time. The same bytes on 2 MiB pages take 23 walks. Linux gives
# anonymous memory 2 MiB pages ("transparent huge pages") where a program asks for them with
# madvise(MADV_HUGEPAGE), the usual setting of /sys/kernel/mm/transparent_hugepage/enabled; a matrix of a
# quantized file is smaller than one such page, so the matrices are copied side by side into one stretch.
# Decode tokens/s, the same model on 4 KiB and on 2 MiB pages alternated in one process, 10 runs each, AMD EPYC
# Zen 4 VM: llama Q4_K_M 1 thread 239 -> 259 (8 of 10 runs faster), 2 threads 269 -> 284; GPT-2 Q8_0 153 -> 184,
# Q4_0 202 -> 247; float32 GGUF files, read by BLAS and engine/fast/rows.py, gained less: GPT-2 1 thread 60 -> 60,
# 2 threads 68 -> 70, llama 1 thread 74 -> 77, 2 threads 64 -> 71.

HUGE_PAGE = 2 << 20


def huge_page_arena(nbytes):
    """``nbytes`` of fresh zeroed writable memory (uint8), starting on a 2 MiB boundary, that Linux is asked to back
    with 2 MiB pages; None where it cannot be asked (no madvise or no anonymous mmap here, or the call failed)."""
    advice, private, anonymous = (getattr(mmap, name, None) for name in ("MADV_HUGEPAGE", "MAP_PRIVATE",
                                                                         "MAP_ANONYMOUS"))
    if advice is None or private is None or anonymous is None or nbytes <= 0:
        return None
    try:
        region = mmap.mmap(-1, nbytes + HUGE_PAGE, flags=private | anonymous)   # private: shared memory has its own
        region.madvise(advice)                                                  # setting, usually "never"
    except (OSError, ValueError):
        return None
    whole = np.frombuffer(region, np.uint8)                  # keeps the region alive as long as any view of it
    start = (-whole.ctypes.data) % HUGE_PAGE
    return whole[start:start + nbytes]


RELEASE_EVERY = 8 << 20        # bytes copied between two release_freed_memory calls of move_into_huge_pages


def move_into_huge_pages(slots):
    """For each (object, attribute) of ``slots`` (or (dict, key)) whose value is an array: a copy of it in place of
    it, the copies side by side in one huge_page_arena (each at a 64-byte boundary, C-contiguous, writable). The
    originals' memory is given back as the copying goes (release_freed_memory every RELEASE_EVERY bytes and at the
    end), so the process holds at most that much more than before. Nothing moves where there is no arena, or where
    the arrays all together fill less than one 2 MiB page. Returns the bytes moved."""
    slots = [(obj, attr) for obj, attr in slots if isinstance(_slot(obj, attr), np.ndarray)]
    sizes = {id(a): (a.nbytes + LINE - 1) // LINE * LINE for a in (_slot(obj, attr) for obj, attr in slots)}
    arena = huge_page_arena(sum(sizes.values())) if sum(sizes.values()) >= HUGE_PAGE else None
    if arena is None:
        return 0
    at = since = 0
    copies = {}                      # id of an original -> its copy: an array held in two places stays one array
    for obj, attr in slots:
        a = _slot(obj, attr)
        copy = copies.get(id(a))
        if copy is None:
            copy = copies[id(a)] = arena[at:at + a.nbytes].view(a.dtype).reshape(a.shape)
            copy[...] = a
            at, since = at + sizes[id(a)], since + sizes[id(a)]
        if isinstance(obj, dict):
            obj[attr] = copy
        else:
            setattr(obj, attr, copy)
        del a
        if since >= RELEASE_EVERY:
            release_freed_memory()
            since = 0
    release_freed_memory()
    return at


def _slot(obj, key):
    return obj.get(key) if isinstance(obj, dict) else getattr(obj, key, None)


def release_freed_memory():
    """Give the memory malloc holds free back to the system (glibc's malloc_trim): after a model's arrays were
    replaced by their copies, the originals' memory would otherwise stay in the process (keep_freed_memory keeps
    up to 1 GiB). True when some memory was given back."""
    trim = getattr(_libc(), "malloc_trim", None)
    return bool(trim(0)) if trim is not None else False


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


def cache_blocks(n, unit_bytes, budget=None):
    """Slices that cut range(n) into runs of about ``budget`` bytes (default CACHE_BLOCK), ``unit_bytes``
    per index, at least one index per run. Elementwise steps give the same numbers block by block as on
    the whole array."""
    step = max(1, (CACHE_BLOCK if budget is None else budget) // max(int(unit_bytes), 1))
    return [slice(i, min(i + step, n)) for i in range(0, n, step)]


# ----------------------------------------------------------------------------
# 4K aliasing. A CPU core lets a load run ahead of the stores before it, checking only the low 12 bits
# of the addresses (the offset in a 4 KiB page) until the full address is known. When a loop reads one
# array and writes another whose offsets in the page are within a vector of each other, every load
# looks as if it might need the store just before it, and waits for it. Big arrays of the same size
# easily land like that: malloc puts blocks one after another with a 16-byte header between them, and
# an activation of (2048, 1536) float32 is exactly 12 MiB, so the next block starts 16 bytes further
# in the page; mmap'd blocks all start 16 bytes into a page. A kernel whose arrays land like that runs
# several times slower than the same kernel on arrays a kilobyte or more apart in the page, which runs
# close to the speed of a plain copy (docs/profiles/design-decisions.md#arrays-apart-in-the-page).

PAGE = 4096
LINE = 64
APART_MIN_BYTES = 1 << 18       # smaller arrays are read from the caches; the extra page is not worth it


def empty_apart(shape, *others, dtype=np.float32):
    """np.empty(shape, dtype), its first byte at the cache-line offset in the 4 KiB page farthest from
    the offsets of ``others`` (the arrays a loop will stream beside it). A view of a block one page
    larger; arrays under APART_MIN_BYTES come from np.empty as they are. Plain Python arithmetic: the
    kernels call it for every output, and small NumPy arrays for the choice cost ~12 us a call."""
    dtype = np.dtype(dtype)
    nbytes = dtype.itemsize
    for n in shape:
        nbytes *= int(n)
    if nbytes < APART_MIN_BYTES:
        return np.empty(shape, dtype)
    offset = _farthest_line([a.ctypes.data % PAGE for a in others if isinstance(a, np.ndarray)])
    block = np.empty(nbytes + PAGE, np.uint8)
    start = (offset - block.ctypes.data) % PAGE
    return block[start:start + nbytes].view(dtype).reshape(shape)


def _farthest_line(taken):
    """The cache-line offset in the page whose circular distance to the nearest offset of ``taken`` is
    largest (the smallest such offset on a tie); 0 for none. The best point of each gap between
    neighbouring offsets is its middle: the lines on either side of each middle are the candidates."""
    points = sorted(taken)
    best, best_distance = 0, -1
    for a, b in zip(points, points[1:] + points[:1]):
        middle = (a + b + (PAGE if b <= a else 0)) // 2 // LINE * LINE
        for line in (middle % PAGE, (middle + LINE) % PAGE):
            distance = PAGE
            for p in points:
                d = abs(line - p)
                distance = min(distance, d, PAGE - d)
            if distance > best_distance or (distance == best_distance and line < best):
                best, best_distance = line, distance
    return best
