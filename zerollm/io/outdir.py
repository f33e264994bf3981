"""Directories that appear whole or not at all, and outputs that can never eat their inputs.

``prepare --out DIR`` and ``convert --to DIR`` write several files. Writing them one by one into
DIR means a full disk (or Ctrl-C, or a crash) half-way leaves a DIR that is neither the old one nor
the new one. Instead the new directory is built beside the target and swapped in when complete:

    with atomic_dir("data/input-char") as tmp:      # data/.input-char.k3j2.tmp
        write files into tmp
    # here: data/input-char is the new directory; on any error it is still the old one

The swap is one ``renameat2(RENAME_EXCHANGE)`` on Linux (atomic: the old and new directories
trade names), else two renames with the old copy kept until the new one is in place. The whole
block holds the directory's write lock (zerollm.io.lock), so two writers cannot interleave.
"""

import ctypes
import ctypes.util
import os
import shutil
import tempfile
from contextlib import contextmanager

from zerollm.io.errors import ZeroLLMError
from zerollm.io.fileio import fsync_dir
from zerollm.io.lock import writing

_RENAME_EXCHANGE = 2          # linux/fs.h
_AT_FDCWD = -100


def _same_or_inside(inner, outer):
    """True when path ``inner`` is ``outer`` or lies somewhere below it (after resolving links)."""
    inner, outer = os.path.realpath(inner), os.path.realpath(outer)
    return inner == outer or inner.startswith(outer.rstrip(os.sep) + os.sep)


def check_separate(target, sources, target_flag="--out", source_flag="--data"):
    """Refuse an output directory that is, contains, or lies inside one of its inputs.

    Replacing ``target`` would otherwise delete an input (``--to RUN`` from ``--from RUN/step-…``)
    or write into it (``--to RUN/step-…`` from ``--from RUN``).
    """
    for source in sources:
        if source is None:
            continue
        if _same_or_inside(target, source) or _same_or_inside(source, target):
            raise ZeroLLMError(f"{target_flag} {target} and {source_flag} {source} overlap (one is, or is "
                               f"inside, the other): writing {target_flag} would destroy what is read; "
                               f"choose an output directory outside {source}")


# ----------------------------------------------------------------------------
# swapping a finished directory into place

def _exchange(a, b):
    """Atomically swap the names of two directories (Linux renameat2); False where unsupported."""
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
        renameat2 = libc.renameat2
    except (OSError, AttributeError):
        return False
    renameat2.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p, ctypes.c_uint]
    done = renameat2(_AT_FDCWD, os.fsencode(a), _AT_FDCWD, os.fsencode(b), _RENAME_EXCHANGE) == 0
    return done      # EINVAL/ENOSYS (a file system or kernel without it): use the fallback


def swap_in(tmp, path):
    """Make the complete directory ``tmp`` be ``path``; the old ``path`` (if any) is deleted after."""
    if not os.path.isdir(path):
        os.rename(tmp, path)
        return
    if _exchange(tmp, path):
        shutil.rmtree(tmp, ignore_errors=True)          # tmp now holds the old directory
        return
    old = tmp[:-len(".tmp")] + ".old"
    os.rename(path, old)          # the old directory stays whole until the new one is in
    os.rename(tmp, path)
    shutil.rmtree(old, ignore_errors=True)


def _remove_leftovers(parent, name):
    """Temporary siblings of an earlier, interrupted build of ``name`` (safe: we hold its lock)."""
    for entry in os.listdir(parent):
        if entry.startswith(f".{name}.") and entry.endswith((".tmp", ".old")):
            full = os.path.join(parent, entry)
            if os.path.isdir(full):
                shutil.rmtree(full, ignore_errors=True)


@contextmanager
def atomic_dir(path):
    """Build a directory beside ``path``; on success swap it in, on any error leave ``path`` as it was.

    The caller decides beforehand whether an existing ``path`` may be replaced. Yields the
    temporary directory to fill. Holds ``path``'s write lock throughout (zerollm.io.lock).
    """
    path = os.path.abspath(os.fspath(path))
    parent, name = os.path.split(path)
    if os.path.exists(path) and not os.path.isdir(path):
        raise ZeroLLMError(f"{path} is a file; choose a directory path")
    with writing(path, beside=True):
        _remove_leftovers(parent, name)
        tmp = tempfile.mkdtemp(prefix=f".{name}.", suffix=".tmp", dir=parent)
        try:
            yield tmp
            mask = os.umask(0)
            os.umask(mask)
            os.chmod(tmp, 0o777 & ~mask)               # mkdtemp makes it private (0700)
            fsync_dir(tmp)
            swap_in(tmp, path)
        except BaseException:                          # also Ctrl-C: nothing half-written stays behind
            shutil.rmtree(tmp, ignore_errors=True)
            raise
        fsync_dir(parent)
