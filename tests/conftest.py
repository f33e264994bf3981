"""Shared fixtures, and a guard that keeps the test suite inside the repository.

The corpora ship inside the package (zerollm/data/corpora), so a fresh clone of the repository is all the
tests need. To keep it so, an audit hook watches every file the test process opens: a path beside
the repository (a sibling data folder, say) that is neither the Python installation nor a temporary folder
fails the whole run at the end, with the list of such paths.
"""

import getpass
import hashlib
import os
import platform
import sys
import tempfile
from pathlib import Path


def _openblas_kernels_of_one_family():
    """OpenBLAS picks its kernels by the CPU when it loads: Haswell's on a Zen 3, SkylakeX's on a Zen 4 or a Xeon
    with AVX-512. They add in other orders, so a product can differ in its last bit, and a seeded sample drawn
    near a tie can then pick another id: tests/test_decode_golden.py's recorded server answers (taken with the
    Haswell kernels) moved on a Zen 4. The suite therefore runs Haswell's kernels on every x86-64 CPU that has
    AVX2 and FMA (what they need), unless OPENBLAS_CORETYPE is already set. Set before NumPy is imported, here and
    in every process the tests start (they inherit the environment). The benchmarks unset it for their runs."""
    if platform.system() != "Linux" or platform.machine() not in ("x86_64", "AMD64") or "numpy" in sys.modules:
        return
    try:
        with open("/proc/cpuinfo", encoding="ascii", errors="replace") as f:
            flags = next((line.split(":", 1)[1].split() for line in f if line.startswith("flags")), [])
    except OSError:
        return
    if {"avx2", "fma"} <= set(flags):
        os.environ.setdefault("OPENBLAS_CORETYPE", "Haswell")


_openblas_kernels_of_one_family()

import pytest  # noqa: E402

from zerollm.data import corpora

REPO = Path(__file__).resolve().parents[1]

# numba (the fast engine, zerollm.engine.fast) caches compiled kernels next to their source by default:
# in the tests they go to a temporary folder instead, shared by later runs on this machine. numba checks
# only the file of the function it compiled, not what that function inlined from another file (exp32 in
# engine/fast/jit.py, say): one folder per version of the engine's sources, so no stale kernel is loaded (the
# package keys its own folder the same way where NUMBA_CACHE_DIR is not set: jit.kernel_cache_folder)
_FAST_SOURCES = hashlib.sha1(b"".join(p.read_bytes() for p in sorted((REPO / "zerollm/engine/fast").glob("*.py"))))
os.environ.setdefault("NUMBA_CACHE_DIR", os.path.join(tempfile.gettempdir(), "zerollm-numba-cache",
                                                      _FAST_SOURCES.hexdigest()[:12]))

# The tests read zerollm's English (its 中文 is tested with --lang zh, or with a locale a test sets itself):
# a learner whose machine speaks Chinese runs the same suite.
for _var in ("ZEROLLM_LANG", "LANGUAGE", "LC_ALL", "LC_MESSAGES"):
    os.environ.pop(_var, None)
os.environ["LANG"] = "C.UTF-8"

# Every training command ends by drawing loss.png with matplotlib: about 0.8 s of CPU (most of it the import)
# in each of the suite's hundreds of runs. Off here (zerollm.training.run.PLOTS_ENV); the tests of the plots
# turn it back on with the `plots` fixture or their own environment.
os.environ["ZEROLLM_PLOTS"] = "0"


@pytest.fixture
def plots(monkeypatch):
    """loss.png and expert_load.png drawn at the end of a run, as for a user."""
    monkeypatch.setenv("ZEROLLM_PLOTS", "1")


# torch (the parity tests' reference, in this process) starts a pool of one thread per core: on the suite's
# 2 cores, each of the 2 pytest-xdist workers ran its torch ops on 2 threads that waited for the other
# worker's, and the torch-heavy files took twice the CPU (tests/test_torch_ref.py + tests/test_hf.py: 20-26 s
# against 10). One thread gives the same values (the tests compare with tolerances), for half the CPU.
# zerollm's own threads are left as they are: BLAS's are what --threads sets, and the fast engine's kernels
# take their count from BLAS's (zerollm/engine/fast/blas.py), numba's pool is its own.
def _torch_on_one_thread():
    torch = sys.modules.get("torch")
    if torch is not None and torch.get_num_threads() != 1:
        torch.set_num_threads(1)


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item):
    _torch_on_one_thread()        # before each test: a test module may import torch when it runs


# ----------------------------------------------------------------------------
# the guard: nothing outside the repository

def _allowed_roots():
    """The repository, the Python installation and the temporary folders, but never a folder that holds
    the repository's own parent (cloned into /tmp, the temp folder must not whitelist its neighbours)."""
    tmp = Path(tempfile.gettempdir()).resolve()
    roots = {REPO, tmp, tmp / f"pytest-of-{getpass.getuser()}", Path(sys.prefix).resolve(),
             Path(sys.base_prefix).resolve()}
    roots.update(Path(p).resolve() for p in sys.path if p and os.path.isabs(p))
    roots.add(Path(os.environ["NUMBA_CACHE_DIR"]).resolve())   # the compiled kernels' cache (set above)
    return tuple(str(r) + os.sep for r in roots if r == REPO or r not in (REPO.parent, *REPO.parent.parents))


_OUTSIDE = []
_ALLOWED = _allowed_roots()
_NEIGHBOURS = str(REPO.parent) + os.sep      # the folder the clone sits in, where sibling data folders live


def _audit(event, args):
    if event != "open" or not args or not isinstance(args[0], (str, bytes, os.PathLike)):
        return
    path = os.fsdecode(args[0])
    if not os.path.isabs(path):
        path = os.path.join(os.getcwd(), path)
    path = os.path.normpath(path)
    if path.startswith(_NEIGHBOURS) and not path.startswith(_ALLOWED):
        _OUTSIDE.append(path)


sys.addaudithook(_audit)


def outside_paths():
    """The paths beside the repository that this test process has opened so far."""
    return sorted(set(_OUTSIDE))


def pytest_sessionfinish(session, exitstatus):
    if outside_paths():
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


def pytest_terminal_summary(terminalreporter):
    if outside_paths():
        terminalreporter.write_line("FAILED: tests opened files outside the repository (a fresh clone has "
                                    "no such files; ship them in the package): " + ", ".join(outside_paths()),
                                    red=True)


# ----------------------------------------------------------------------------
# the corpora

@pytest.fixture(scope="session")
def shakespeare_path():
    """tinyshakespeare.txt: 1,115,394 ASCII characters."""
    return corpora.path("shakespeare")


@pytest.fixture(scope="session")
def tang_path():
    """tang_poems.txt: 17,826 five-character Tang poems, one per line."""
    return corpora.path("tang")
