"""engine: how the numbers are computed. This module is the engine switch (the plain NumPy reference,
or the fused kernels of engine/fast/); beside it the caches both engines fill, BLAS threads, kept freed
memory and emulated mixed precision (amp). May import io only.

    zerollm train --engine fast ...                 # or: ZEROLLM_ENGINE=fast zerollm train ...
    from zerollm.engine import use_engine
    with use_engine("fast"):
        logits, loss = model.forward(idx, targets)

'numpy' is the reference: the layer functions in zerollm/nn read top to bottom, and the docs and
``zerollm gradcheck`` teach from them. 'fast' (``pip install "zerollm[fast]"``, which brings numba)
replaces a few of them, the ones where benchmarks/profile.py shows time spent outside the matrix
products, by compiled kernels that make one pass over memory where NumPy makes several. Matrix
products stay NumPy's (BLAS) in both engines. Every kernel is checked against its NumPy reference
in tests/test_engine.py.

How the switch works: a reference function marked ``@accelerated`` looks up a kernel of the same
name in the selected engine and calls it; a kernel may answer NotImplemented (float64 input, say),
and then the reference runs. The engine is one setting for the whole process.
"""

import contextlib
import functools
import importlib.util
import os
import re
import warnings

from zerollm.io.errors import ZeroLLMError

ENGINES = ("numpy", "fast")
ENV = "ZEROLLM_ENGINE"

_selected = {"name": None, "kernels": None,     # resolved on first use: no work at import time
             "fast": None}                      # the fast engine's kernels, once imported


def set_engine(name):
    """Select 'numpy' or 'fast' for the whole process; returns the name. 'fast' compiles nothing yet:
    each kernel is compiled the first time it runs."""
    if name not in ENGINES:
        raise ZeroLLMError(f"engine must be one of {', '.join(ENGINES)}; got {name!r}")
    kernels = {}
    if name == "fast":
        kernels = _fast_kernels()
    _selected.update(name=name, kernels=kernels)
    return name


def _fast_kernels():
    """Import the fast engine's kernels (once), with numba's settings from the environment checked first:
    a setting numba cannot use is one line naming it, not numba's traceback or warning."""
    if _selected["fast"] is None:
        _selected["fast"] = _import_fast_kernels()
    return _selected["fast"]


def _import_fast_kernels():
    problem = _numba_environment_problem()
    if problem:
        raise ZeroLLMError(f"{problem}; or use --engine numpy")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            from zerollm.engine.fast import KERNELS
        except ImportError as err:
            raise ZeroLLMError(f"the fast engine needs numba ({err}); install it with "
                               "pip install \"zerollm[fast]\", or use --engine numpy") from None
    for w in caught:
        unread = NUMBA_UNREAD.search(str(w.message))
        if unread:                          # numba ignores such a value with a warning holding a traceback
            reason = str(w.message).strip().splitlines()[-1].strip()
            raise ZeroLLMError(f"${unread[1]}={unread[2]!r} cannot be read by numba ({reason[-160:]}); "
                               "fix it or unset it, or use --engine numpy")
        warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)
    return KERNELS


NUMBA_UNREAD = re.compile(r"Environment variable '(\w+)' is defined but its associated value '(.*?)' could not")


def _numba_environment_problem():
    """What is wrong with NUMBA_DISABLE_JIT or NUMBA_NUM_THREADS for the fast engine, or None (numba
    itself would stop with a ValueError deep in its import, or run the kernels uncompiled and fail)."""
    off = os.environ.get("NUMBA_DISABLE_JIT", "").strip()
    if off.lstrip("+-").isdigit() and int(off) != 0:
        return (f"$NUMBA_DISABLE_JIT={off} turns numba's compiler off, and the fast engine's kernels run only "
                "compiled: unset it")
    threads = os.environ.get("NUMBA_NUM_THREADS")
    if threads is not None and threads.strip() and not (threads.strip().isdigit() and int(threads) > 0):
        return f"$NUMBA_NUM_THREADS={threads!r} must be a whole number above 0: set it to one (e.g. 2) or unset it"
    return None


def get_engine():
    """The selected engine's name; the first call reads $ZEROLLM_ENGINE (default 'numpy')."""
    if _selected["name"] is None:
        name = os.environ.get(ENV) or "numpy"
        if name not in ENGINES:
            raise ZeroLLMError(f"$ZEROLLM_ENGINE must be one of {', '.join(ENGINES)}; got {name!r} "
                               f"(set it to one of them, or unset it for numpy)")
        set_engine(name)
    return _selected["name"]


@contextlib.contextmanager
def use_engine(name):
    """Run a block with another engine, then restore the previous one."""
    before = get_engine()
    set_engine(name)
    try:
        yield name
    finally:
        set_engine(before)


def accelerated(reference):
    """Mark a NumPy reference function that the fast engine may replace by a kernel of the same name.

    The reference stays reachable as ``fn.reference`` (the tests compare the two).
    """
    name = reference.__name__

    @functools.wraps(reference)
    def dispatch(*args, **kwargs):
        kernels = _selected["kernels"]
        if kernels is None:
            get_engine()
            kernels = _selected["kernels"]
        kernel = kernels.get(name)
        if kernel is not None:
            out = kernel(*args, **kwargs)
            if out is not NotImplemented:
                return out
        return reference(*args, **kwargs)

    dispatch.reference = reference
    return dispatch


def add_engine_argument(parser, training=False, prefer_fast=False):
    """--engine. ``prefer_fast``: a command whose default is the fast engine where numba is installed
    (zerollm serve: engine_for)."""
    if prefer_fast:
        parser.add_argument("--engine", choices=ENGINES, default=None,
                            help="'numpy' (the readable reference) or 'fast' (fused numba kernels, pip install "
                                 "\"zerollm[fast]\"); default: $ZEROLLM_ENGINE, else fast where numba is installed "
                                 "(it serves more tokens/s), else numpy")
        return
    more = (" Resume with the engine a run was trained with for bit-identical losses (the two engines "
            "round exp and long sums differently).") if training else ""
    parser.add_argument("--engine", choices=ENGINES, default=None,
                        help=f"'numpy' (the readable reference) or 'fast' (fused numba kernels, "
                             f"pip install \"zerollm[fast]\"); default: ${ENV} or numpy." + more)


def engine_for(args, prefer_fast=False):
    """The engine a command runs on: --engine, else $ZEROLLM_ENGINE, else (``prefer_fast``) 'fast' where numba
    is installed, else 'numpy'. Selects nothing (use_engine(engine_for(args)) does, for the command only)."""
    if getattr(args, "engine", None):
        return args.engine
    if os.environ.get(ENV):
        return os.environ[ENV]                 # use_engine checks it, with get_engine's message
    return "fast" if prefer_fast and importlib.util.find_spec("numba") is not None else "numpy"


def apply_engine_argument(args):
    """Select the engine a command was given (--engine, else $ZEROLLM_ENGINE); returns its name."""
    return set_engine(args.engine) if getattr(args, "engine", None) else get_engine()
