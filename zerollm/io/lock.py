"""One writer per output directory: a lock file that names its owner.

Two ``zerollm train`` runs on one ``--out`` would delete each other's temporary files and could
leave no loadable checkpoint; two ``convert`` runs to one target would both "succeed". Every
command that writes a directory therefore holds its lock while it writes:

    with writing("runs/shakespeare"):          # RUN/.zerollm-lock
        ...                                     # train, save checkpoints
    with writing("data/input-char", beside=True):   # data/.input-char.zerollm-lock: the directory
        ...                                     # itself is replaced whole (zerollm.io.fileio.atomic_dir)

A second writer stops at once with "runs/shakespeare is being written by pid 4242 (host h, since
...)". Readers (``sample``, ``eval``) never look at the lock: a checkpoint appears whole or not at
all (zerollm.training.checkpoint), so reading while a run writes is safe.

How: the lock file holds the owner's pid, host and command as JSON, and the owner holds an
exclusive ``flock`` on it. The kernel releases a flock when its process dies, however it dies
(even SIGKILL), so a lock file left behind by a dead process is stale by construction and the next
writer simply takes it over. Where flock does not exist (Windows), the pid is checked instead.
"""

import json
import os
import shutil
import socket
import sys
import time
from contextlib import contextmanager

from zerollm.io.errors import ZeroLLMError
from zerollm.io.fileio import open_regular, require_regular

try:
    import fcntl
except ImportError:          # Windows: fall back to "is the pid in the file alive?"
    fcntl = None

LOCK_NAME = ".zerollm-lock"
_HELD = {}                   # lock path -> how many nested writing() blocks of this process hold it


class DirectoryBusy(ZeroLLMError):
    """Another process is writing this directory."""


def lock_path(directory, beside=False):
    """Inside the directory (RUN/.zerollm-lock), or beside it (PARENT/.NAME.zerollm-lock) for a
    directory that is replaced whole, so the lock does not go away with the old copy."""
    directory = os.path.abspath(os.fspath(directory))
    if not beside:
        return os.path.join(directory, LOCK_NAME)
    parent, name = os.path.split(directory)
    return os.path.join(parent, f".{name}{LOCK_NAME}")


def read_owner(path):
    """{"pid", "host", "command", "since"} from a lock file, or {} if it cannot be read."""
    try:
        with open_regular(path, "r", encoding="utf-8") as f:      # a pipe put there must not hang us
            owner = json.load(f)
    except (OSError, ValueError, RecursionError):             # NotRegularFile is a ValueError
        return {}
    return owner if isinstance(owner, dict) else {}


def _busy(directory, owner):
    pid = owner.get("pid", "?")
    where = f" on host {owner['host']}" if owner.get("host") not in (None, socket.gethostname()) else ""
    since = f", since {owner['since']}" if owner.get("since") else ""
    command = f": {owner['command']}" if owner.get("command") else ""
    return DirectoryBusy(f"{directory} is being written by pid {pid}{where}{since}{command}; wait for it to "
                         "finish (or stop it), or choose another output directory")


def _pid_alive(pid):
    if not isinstance(pid, int) or pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OSError):
        return True              # it exists, but belongs to someone else
    return True


def _me():
    return {"pid": os.getpid(), "host": socket.gethostname(), "since": time.strftime("%Y-%m-%d %H:%M:%S"),
            "command": " ".join(["zerollm"] + sys.argv[1:])[:200]}


def _acquire_flock(path, directory):
    """Open and flock ``path``; returns the open fd. The inode check makes sure we did not lock a
    file that its previous owner unlinked between our open() and our flock()."""
    while True:
        require_regular(path, "lock file")     # a pipe or folder put there cannot hold the owner's line
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NONBLOCK, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            os.close(fd)
            raise _busy(directory, read_owner(path)) from None
        try:
            same = os.stat(path).st_ino == os.fstat(fd).st_ino
        except FileNotFoundError:
            same = False
        if same:
            return fd
        os.close(fd)             # the file was replaced or removed meanwhile: try again


def _acquire_pidfile(path, directory):
    """Without flock: create the file exclusively; a file whose pid is dead on this host is stale."""
    for _ in range(2):
        try:
            return os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o644)
        except FileExistsError:
            owner = read_owner(path)
            if owner.get("host") == socket.gethostname() and not _pid_alive(owner.get("pid")):
                os.remove(path)  # stale: its writer is gone
                continue
            raise _busy(directory, owner) from None
    raise _busy(directory, read_owner(path))


def _write_owner(fd):
    os.ftruncate(fd, 0)
    os.lseek(fd, 0, os.SEEK_SET)
    os.write(fd, (json.dumps(_me()) + "\n").encode("utf-8"))


def _missing(folder):
    """``folder`` and its ancestors that do not exist yet, deepest first."""
    missing = []
    folder = os.path.abspath(folder)
    while not os.path.exists(folder):
        missing.append(folder)
        parent = os.path.dirname(folder)
        if parent == folder:
            break
        folder = parent
    return missing


def _remove_empty(folders):
    for folder in folders:                 # deepest first: a parent empties once its child is gone
        try:
            os.rmdir(folder)
        except OSError:                    # not empty (the output is in it), or already gone
            return


@contextmanager
def writing(directory, *, beside=False):
    """Hold the write lock of ``directory`` for the body; DirectoryBusy if another process holds it.

    Creates the directory (or, with beside=True, its parent) if needed; on exit the lock file is
    removed, and so is every directory this call created that is still empty (a command that failed
    leaves no trace). A lock left by a process that died is taken over silently. Re-entrant within a
    process: a command may take the lock early (to fail at once) and its writer take it again.
    """
    directory = os.fspath(directory)
    path = lock_path(directory, beside)
    if _HELD.get(path):                  # this process holds it already (a command, then its writer)
        _HELD[path] += 1
        try:
            yield path
        finally:
            _HELD[path] -= 1
        return
    created = _missing(os.path.dirname(path))
    os.makedirs(os.path.dirname(path), exist_ok=True)
    try:
        fd = _acquire_flock(path, directory) if fcntl is not None else _acquire_pidfile(path, directory)
    except BaseException:
        _remove_empty(created)
        raise
    _HELD[path] = 1
    try:
        _write_owner(fd)
        yield path
    finally:
        del _HELD[path]
        try:
            os.remove(path)      # before releasing, so nobody locks a file about to disappear
        except OSError:
            pass
        os.close(fd)             # closing releases the flock
        _remove_empty(created)


@contextmanager
def run_directory(directory):
    """``writing(directory)`` for a training run, yielding ``started()``: call it once the run really
    begins. If this call created the directory and the body fails before ``started()`` (a bad flag
    value, a missing file, a memory refusal), the directory is removed again: nothing is left behind.

        with run_directory("runs/x") as started:
            trainer = build(...)       # may fail: runs/x disappears
            started()
            fit(trainer, ...)          # from here on, checkpoints and logs are kept
    """
    directory = os.fspath(directory)
    created = not os.path.exists(directory)
    began = []
    with writing(directory) as lock:       # removes the directories it created once they are empty
        try:
            yield lambda: began.append(True)
        except BaseException:
            if created and not began:
                _empty(directory, keep=lock)
            raise


def _empty(directory, keep):
    """Delete everything in ``directory`` except the file ``keep`` (the lock, still held)."""
    for entry in os.listdir(directory):
        path = os.path.join(directory, entry)
        if os.path.abspath(path) == os.path.abspath(keep):
            continue
        if os.path.isdir(path) and not os.path.islink(path):
            shutil.rmtree(path, ignore_errors=True)
        else:
            os.remove(path)
