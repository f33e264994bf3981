"""Files that are never half-written: atomic writes and careful JSON.

A crash (or Ctrl-C, or a full disk) in the middle of ``open(path, "w").write(...)`` leaves a
truncated file where a good one used to be. Every file zerollm writes for users goes through
``atomic_write`` instead:

    1. write everything to a temporary file in the SAME directory,
    2. flush Python's buffer and ``fsync`` so the bytes are on disk, not only in the OS cache,
    3. ``os.replace(tmp, path)``: a rename inside one file system is atomic (POSIX rename(2)),
       so readers see either the whole old file or the whole new one, never a mix.

On any exception the temporary file is deleted and the old file is left untouched. A path that
exists and is not a regular file (a device such as /dev/sda, a pipe, a link, a folder) is refused:
the rename would replace the thing itself, not write into it.

Reading has the mirror rule: every file zerollm reads is opened with ``open_regular``, which refuses
anything that is not a regular file (a named pipe, a socket, a device, a folder) before a byte is read.
Opening a FIFO for reading waits for a writer that may never come, and /dev/zero or /dev/urandom never
end: either would hang the command instead of ending it with an error.
"""

import fcntl
import hashlib
import json
import math
import os
import stat
import tempfile
from contextlib import contextmanager

from zerollm.io.errors import ZeroLLMError

_MODES = {"w": "w", "wt": "w", "wb": "wb"}


# ----------------------------------------------------------------------------
# atomic writes

def fsync_dir(path):
    """fsync a directory, so a rename or new entry inside it survives a power cut.

    Renaming makes the new name visible at once, but it is durable only once the directory
    itself is flushed (see the fsync(2) man page). Platforms that cannot open a directory
    (Windows) skip this silently.
    """
    try:
        fd = os.open(os.fspath(path), os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass   # some file systems refuse fsync on directories; the rename is still atomic
    finally:
        os.close(fd)


def _tmp_path_in(directory, name):
    if not os.path.isdir(directory):
        raise ZeroLLMError(f"cannot write {name!r}: the directory {directory!r} does not exist; "
                           "create it first (mkdir -p) or choose another output path")
    fd, tmp = tempfile.mkstemp(prefix=f".{name}.", suffix=".tmp", dir=directory)
    os.close(fd)
    return tmp


def _umask_mode():
    """Permissions a plain open() would give (mkstemp makes files private, 0o600)."""
    mask = os.umask(0)
    os.umask(mask)
    return 0o666 & ~mask


# ----------------------------------------------------------------------------
# reading: regular files only

# what a path that is not a regular file is, in the words of the error (the tests of stat, in that order)
_KINDS = ((stat.S_ISDIR, "a directory"), (stat.S_ISFIFO, "a named pipe (FIFO)"), (stat.S_ISSOCK, "a socket"),
          (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"))


class NotRegularFile(ZeroLLMError):
    """A path that had to be a regular file to be read is a pipe, a socket, a device or a folder."""


def _kind(mode):
    return next((name for test, name in _KINDS if test(mode)), "not a regular file")


def not_regular(path, kind, what="file"):
    """The one error for an input that is ``kind`` ("a named pipe (FIFO)", ...), not a regular file.

    >>> str(not_regular("/dev/zero", "a character device", "text file"))   # doctest: +ELLIPSIS
    '/dev/zero is a character device, not a text file: it must be a regular file (a pipe or a device can...'
    """
    why = "" if kind == "a directory" else " (a pipe or a device can wait forever or never end)"
    return NotRegularFile(f"{os.fspath(path)} is {kind}, not a {what}: it must be a regular file{why}; "
                          "give the path of a regular file, or put one in its place")


def require_regular(path, what="file"):
    """Refuse ``path`` if it exists and is not a regular file (a link to one is fine: it is followed);
    a path that does not exist is left to the caller, who knows what to say. Returns ``path``.
    Nothing is opened, so nothing can block."""
    try:
        mode = os.stat(path).st_mode
    except (FileNotFoundError, NotADirectoryError):
        return path
    except OSError:              # a link loop, no permission: open() will say so in its own words
        return path
    if not stat.S_ISREG(mode):
        raise not_regular(path, _kind(mode), what)
    return path


def open_regular(path, mode="rb", what="file", encoding=None, errors=None):
    """``open(path, mode)`` for reading ("r" or "rb") or appending ("a"), for regular files only.

    The path is checked before it is opened, then opened without blocking (O_NONBLOCK: a FIFO that
    appeared meanwhile opens at once instead of waiting for a writer) and checked again on the open
    descriptor (fstat), so what is read is the file that was checked. Appending never follows a link
    nor writes into anything but a regular file (the rule of atomic_write). A missing file raises
    FileNotFoundError, as open() does. ``what`` names the file in the error ("text file", "run log").

    >>> with open_regular("run/log.jsonl", "r", what="run log", encoding="utf-8") as f:   # doctest: +SKIP
    ...     first = f.readline()
    """
    path = os.fspath(path)
    if mode in ("r", "rb"):
        require_regular(path, what)
        flags = os.O_RDONLY
    elif mode == "a":
        refuse_non_regular(path)
        flags = os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW
    else:
        raise ValueError(f"open_regular reads ('r', 'rb') or appends ('a'), not {mode!r}")
    fd = os.open(path, flags | os.O_NONBLOCK | os.O_CLOEXEC, 0o666)
    try:
        st_mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(st_mode):
            raise not_regular(path, _kind(st_mode), what)
        fcntl.fcntl(fd, fcntl.F_SETFL, fcntl.fcntl(fd, fcntl.F_GETFL) & ~os.O_NONBLOCK)
        return os.fdopen(fd, mode, encoding=None if "b" in mode else encoding or "utf-8", errors=errors)
    except BaseException:
        os.close(fd)
        raise


def sha256_file(path, what="file"):
    """SHA-256 (hex) of a regular file's bytes, read 1 MiB at a time (a pipe or a device is refused)."""
    h = hashlib.sha256()
    with open_regular(path, "rb", what=what) as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def non_file_kind(path):
    """What an input path that exists but is no file is ('directory', 'device or pipe'), else None:
    so that a reader names it instead of saying 'not found'. (The older, coarser check that
    zerollm.interop.gguf.read_gguf still makes; a new reader calls require_regular or open_regular.)"""
    if os.path.exists(path) and not os.path.isfile(path):
        return "directory" if os.path.isdir(path) else "device or pipe"
    return None


# byte-order marks of the encodings a text editor saves as "Unicode" (the UTF-32 ones first: they start like
# UTF-16's); iconv reads the mark, so "-f UTF-16" converts either byte order
_BOMS = ((b"\xff\xfe\x00\x00", "UTF-32"), (b"\x00\x00\xfe\xff", "UTF-32"),
         (b"\xff\xfe", "UTF-16"), (b"\xfe\xff", "UTF-16"))


def not_utf8_advice(start):
    r"""How to make UTF-8 of a file whose first bytes are ``start``: a UTF-16/32 byte-order mark names
    that encoding, anything else is most often a Chinese text saved as GBK.

    >>> not_utf8_advice(b"\xff\xfeh\x00")
    'it is UTF-16 text (it starts with a UTF-16 byte-order mark); save it as UTF-8 (e.g. iconv -f UTF-16 -t UTF-8 in.txt > out.txt)'
    """
    for bom, name in _BOMS:
        if start.startswith(bom):
            return (f"it is {name} text (it starts with a {name} byte-order mark); save it as UTF-8 "
                    f"(e.g. iconv -f {name} -t UTF-8 in.txt > out.txt)")
    return "save the file as UTF-8 (e.g. iconv -f GBK -t UTF-8 in.txt > out.txt)"


def folder_not_found(path, what, hint):
    """The error for a folder argument (a run, a checkpoint, a model directory) that names no folder. It
    says what is there instead: a GGUF file (which the --gguf flag reads), another file, or nothing.

    >>> str(folder_not_found("/nonexistent", "run directory", "give the --out of a training command"))
    'run directory not found: /nonexistent; give the --out of a training command'
    """
    if os.path.isfile(path):
        try:
            with open_regular(path, "rb") as f:
                gguf = f.read(4) == b"GGUF"
        except (OSError, NotRegularFile):
            gguf = False
        if gguf:
            return ZeroLLMError(f"{path} is a GGUF file, not a {what}; zerollm sample, chat, eval and serve read it "
                                "with --gguf FILE")
        return ZeroLLMError(f"{path} is a file, not a {what}; {hint}")
    if os.path.exists(path):
        return ZeroLLMError(f"{path} is {_kind(os.stat(path).st_mode)}, not a {what}; {hint}")
    return ZeroLLMError(f"{what} not found: {path}; {hint}")


def refuse_non_regular(path, flag=None):
    """Refuse an output ``path`` that exists and is not a regular file: renaming over it (or appending to
    it) would replace, or write into, the device, pipe, link or folder itself. ``flag``: the option that
    named it ("--out"), said first in the error."""
    if os.path.lexists(path) and not stat.S_ISREG(os.lstat(path).st_mode):
        named = f"{flag} {path}" if flag else path
        raise ZeroLLMError(f"{named} exists and is not a regular file (a folder, a link, a device or a pipe); "
                           "zerollm writes a file whole and renames it into place, which would replace it: "
                           "choose a new file name")


@contextmanager
def atomic_write(path, mode="wb"):
    """Open a temporary file for writing; on success it replaces ``path`` in one step.

    ``mode`` is "wb" (bytes) or "w" (text, UTF-8).

    >>> with atomic_write("out.txt", "w") as f:     # doctest: +SKIP
    ...     f.write("all or nothing")
    """
    if mode not in _MODES:
        raise ZeroLLMError(f"atomic_write mode must be 'w' or 'wb', got {mode!r}")
    path = os.fspath(path)
    refuse_non_regular(path)
    directory, name = os.path.split(os.path.abspath(path))
    tmp = _tmp_path_in(directory, name)
    try:
        encoding = None if mode == "wb" else "utf-8"
        with open(tmp, _MODES[mode], encoding=encoding) as f:
            yield f
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, _umask_mode())
        refuse_non_regular(path)          # again: something may have appeared there meanwhile
        os.replace(tmp, path)
    except BaseException:   # also KeyboardInterrupt: never leave the temp file behind
        try:
            os.remove(tmp)
        except OSError:
            pass
        raise
    fsync_dir(directory)


# ----------------------------------------------------------------------------
# JSON

def finite_or_null(obj):
    """``obj`` with every NaN or infinite float replaced by None, so it can be written as strict JSON.

    Python's json writes NaN and Infinity, which are not JSON: jq, JavaScript and most JSON
    libraries reject the whole file. A number that is not finite has no value worth keeping.

    >>> finite_or_null({"loss": float("nan"), "steps": [1, float("inf")]})
    {'loss': None, 'steps': [1, None]}
    """
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else None
    if isinstance(obj, dict):
        return {k: finite_or_null(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [finite_or_null(v) for v in obj]
    return obj


def dumps_strict(obj, **kw):
    """json.dumps that never writes NaN or Infinity (they become null)."""
    return json.dumps(finite_or_null(obj), allow_nan=False, **kw)


def utf8_json(dumps):
    """``dumps(ascii_only=False)``: readable UTF-8 JSON; but a str that cannot be UTF-8 (a file name with
    bytes that are not UTF-8 arrives as lone surrogates, PEP 383) is written escaped (\\udcff) instead,
    which json.load turns back into the very same str."""
    text = dumps(False)
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        text = dumps(True)
    return text


def write_json(path, obj):
    """Write ``obj`` as pretty UTF-8 JSON (Chinese stays readable, not \\uXXXX), atomically.
    Strict JSON: a NaN or infinite float is written as null.

    >>> write_json("meta.json", {"名字": "唐诗", "n": 3})   # doctest: +SKIP
    """
    try:
        text = utf8_json(lambda ascii_only: dumps_strict(obj, ensure_ascii=ascii_only, indent=2))
    except (TypeError, ValueError) as err:
        raise ZeroLLMError(f"cannot save {os.fspath(path)} as JSON: {err}; keep only dicts, lists, "
                           "str, int, float, bool and None in it (convert arrays with .tolist())"
                           ) from None
    with atomic_write(path, "w") as f:
        f.write(text + "\n")


def read_json(path, what="JSON file"):
    """Read a JSON file; a missing or broken file is a ZeroLLMError naming ``what`` it was.

    >>> read_json("run/latest.json", what="checkpoint pointer")   # doctest: +SKIP
    {'step': 500, 'dir': 'step-0000500'}
    """
    path = os.fspath(path)
    require_regular(path, what)
    if not os.path.isfile(path):
        raise ZeroLLMError(f"{what} not found: {path}; check the path")
    try:
        with open_regular(path, "r", what=what, encoding="utf-8") as f:
            return json.load(f)
    except UnicodeDecodeError as err:
        raise ZeroLLMError(f"{what} {path} is not UTF-8 text ({err}); it is not a JSON file, "
                           "point at the right file") from None
    except json.JSONDecodeError as err:
        raise ZeroLLMError(f"{what} {path} is not valid JSON ({err}); the file is damaged, "
                           "restore or re-create it") from None
    except RecursionError:                 # [[[[...: json's decoder recurses once per level
        raise ZeroLLMError(f"{what} {path} is nested too deeply to be a {what}; the file is damaged, "
                           "restore or re-create it") from None
