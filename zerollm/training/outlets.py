"""stdout and stderr that may close under a running job: ``zerollm train ... 2>&1 | tee log``, then Ctrl-C.

A terminal's Ctrl-C goes to the whole foreground process group: tee ends at once, and the next write of
the progress bar hits a pipe nobody reads (BrokenPipeError: Python ignores SIGPIPE). That write must
never stand between the stop request and the checkpoint. So while a run trains, stdout and stderr are
wrapped: a write to a closed pipe points that file descriptor at /dev/null (later writes, Python's final
flush included, then succeed unseen) and tells the listeners (zerollm.training.trainer.StopRequests: the run stops
at the next step boundary, saves, and exits 130, as for Ctrl-C). An output that fails because its disk is full
(``train > /dev/full``, a log on a full disk) is handled the same way, with a line on the other stream.

Under ``mpirun`` a closed pipe is worse: the ranks write to mpiexec, and mpiexec itself writes to the pipe.
When tee is gone, mpiexec's next write kills it (SIGPIPE), and Hydra then kills every rank (SIGKILL, which
nothing can catch) before the step in progress ends. So once a stop is asked for under MPI, the ranks
*hold* what they would print (``Outlet.hold``) until the checkpoint is saved, and only then let it out.
mpiexec also prints a line of its own on Ctrl-C; it survives that write only if it was started with
SIGPIPE ignored (docs/distributed.md gives the shell line).
"""

import contextlib
import errno
import os
import sys


# a stream that fails with one of these will not take more text: a full disk or quota, ulimit -f, an I/O error
_CANNOT_WRITE = {errno.ENOSPC, errno.EDQUOT, errno.EFBIG, errno.EIO}


class Outlet:
    """A text stream whose writes survive the reader going away; ``closed_pipe`` tells whether it did."""

    def __init__(self, stream):
        self._stream, self.listeners, self.closed_pipe = stream, [], False
        self._held = None                      # a list of texts while holding, else None

    def write(self, text):
        if self._held is not None:
            self._held.append(text)
        else:
            self._guard(self._stream.write, text)
        return len(text)

    def flush(self):
        if self._held is None:
            self._guard(self._stream.flush)

    def hold(self):
        """Keep every write in memory from now on, until ``release``."""
        if self._held is None:
            self._held = []

    def release(self):
        """Write out what was held, and write straight through again."""
        held, self._held = self._held, None
        if held:
            self.write("".join(held))
        self.flush()

    def _guard(self, fn, *args):
        try:
            fn(*args)
        except BrokenPipeError:
            self._lost()
        except OSError as err:
            if err.errno not in _CANNOT_WRITE:
                raise
            # `train > /dev/full`, or a log file on a disk that filled up: the run cannot report any more, so it
            # stops as for a closed pipe, and says why on the other stream (a raw write: never raises)
            self._lost()
            write_fd(2, f"zerollm: warning: the output cannot be written ({err.strerror}): stopping after this "
                        "step, with a checkpoint\n".encode())

    def _lost(self):
        self._to_devnull()
        for listener in list(self.listeners):
            listener()

    def _to_devnull(self):
        self.closed_pipe = True
        with contextlib.suppress(OSError, ValueError):      # a stream without a descriptor (pytest's capture)
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, self._stream.fileno())
            os.close(devnull)
        with contextlib.suppress(BrokenPipeError, ValueError):  # what was buffered goes to /dev/null now
            self._stream.flush()

    def __getattr__(self, name):               # fileno, isatty, encoding, ...: the stream's own
        return getattr(self._stream, name)


@contextlib.contextmanager
def closed_pipes_tolerated(on_close=None):
    """While active, sys.stdout and sys.stderr are Outlets (yielded as a list); ``on_close()`` runs when one
    of them finds its pipe closed. Nested uses share the same Outlets (each adds its listener)."""
    old = sys.stdout, sys.stderr
    outlets = [s if isinstance(s, Outlet) or s is None else Outlet(s) for s in old]
    for outlet in outlets:
        if outlet is not None and on_close is not None:
            outlet.listeners.append(on_close)
    sys.stdout, sys.stderr = outlets
    try:
        yield [outlet for outlet in outlets if outlet is not None]
    finally:
        for outlet in outlets:
            if outlet is not None:
                outlet.release()
                if on_close is not None:
                    outlet.listeners.remove(on_close)
        sys.stdout, sys.stderr = old


def write_fd(fd, data):
    """os.write that ignores a closed pipe (a signal handler's message; it may run at any moment)."""
    with contextlib.suppress(OSError):
        os.write(fd, data)
