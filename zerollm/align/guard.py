"""The guard of user code: a reward function of yours (zerollm.align.rl.rewards) or a tool of yours
(zerollm.align.tools), its import and every call, run by ``call_user``.

Any failure becomes one ZeroLLMError line; a call that takes longer than its time limit is stopped by a
SIGALRM timer (setitimer), which Python delivers between two bytecodes, also inside time.sleep or a
blocking read; SIGTERM (and a second Ctrl-C) stop the run at once, keeping the last checkpoint. The code
runs in the main thread exactly as it would without the guard. What no guard in the same process can
stop: a single C call that never returns to Python and os._exit().

It lives below both of its users so that neither imports the other.
"""

import contextlib
import signal
import threading

from zerollm.io.errors import ZeroLLMError


DEFAULT_TIMEOUT = 60.0       # seconds a reward call (or the import of its module) may take


class _TimeUp(BaseException):
    """Raised inside user code by the timer; a BaseException, so a user's `except Exception` cannot eat it."""


class _Terminated(BaseException):
    """Raised inside user code by SIGTERM."""


@contextlib.contextmanager
def _signals(timeout):
    """While user code runs in the main thread: SIGALRM after ``timeout`` s, and SIGTERM raising at once
    (after telling the training loop's handler, so the run is marked as stopping)."""
    if threading.current_thread() is not threading.main_thread():
        yield                                   # signals reach only the main thread: no limit here
        return
    old_term = signal.getsignal(signal.SIGTERM)

    def on_term(signum, frame):
        if callable(old_term):
            old_term(signum, frame)
        raise _Terminated

    def on_alarm(signum, frame):
        raise _TimeUp

    old_alarm = signal.signal(signal.SIGALRM, on_alarm)
    signal.signal(signal.SIGTERM, on_term)
    if timeout:
        signal.setitimer(signal.ITIMER_REAL, timeout)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old_alarm)
        signal.signal(signal.SIGTERM, old_term)


def call_user(what, fn, timeout=DEFAULT_TIMEOUT, flag="--reward-timeout"):
    """fn() for user code described by ``what`` ("reward my_mod:fn"): any failure -> one ZeroLLMError line;
    SIGTERM -> KeyboardInterrupt (the run stops at once, the last checkpoint kept). ``flag``: the option
    that sets ``timeout``, named in the message (user tools, zerollm.align.tools, have their own)."""
    try:
        with _signals(timeout):
            return fn()
    except _TimeUp:
        raise ZeroLLMError(f"{what} did not finish within {flag} {timeout:g} s; make it faster, or "
                           f"raise {flag} (0 = no limit)") from None
    except _Terminated:
        raise KeyboardInterrupt from None
    except SystemExit as err:
        raise ZeroLLMError(f"{what} called sys.exit({err.code!r}); a reward function must return its rewards "
                           "(raise an exception to report a problem)") from None
    except ZeroLLMError as err:
        raise ZeroLLMError(f"{what}: {err}") from None
    except Exception as err:                     # noqa: BLE001 - user code may raise anything
        detail = " ".join(str(err).split())[:300]
        raise ZeroLLMError(f"{what} raised {type(err).__name__}: {detail}") from None


