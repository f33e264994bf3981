"""Reading small arrays that users write by hand: .npy files or JSON nested lists.

Only data is read: ``np.load(..., allow_pickle=False)`` and ``json.load`` never run code.
Every problem becomes a ``ZeroLLMError`` that names the file and says how to fix it.
"""

import json
import os

import numpy as np

from zerollm.io.errors import ZeroLLMError
from zerollm.io.fileio import open_regular, require_regular

SUFFIXES = (".npy", ".json")


def _read_npy(path):
    with open_regular(path, "rb") as f:
        if f.read(6) != b"\x93NUMPY":   # every .npy file starts with this magic string
            raise ZeroLLMError(f"{path}: not a readable .npy file (no NumPy header); "
                               "save it with np.save, or write JSON instead")
        f.seek(0)
        try:
            return np.load(f, allow_pickle=False)
        except ValueError as err:   # object arrays need pickle, which we refuse
            raise ZeroLLMError(f"{path}: cannot read this .npy ({err}); save a plain numeric array "
                               "with np.save(path, np.asarray(a, dtype=np.float32))") from None
        except (OSError, EOFError) as err:
            raise ZeroLLMError(f"{path}: not a readable .npy file ({err})") from None


def _read_json(path):
    try:
        with open_regular(path, "r", encoding="utf-8") as f:
            data = json.load(f)
    except (UnicodeDecodeError, json.JSONDecodeError, RecursionError) as err:
        raise ZeroLLMError(f"{path}: not valid JSON ({err}); write a nested list such as "
                           "[[0.1, 0.2], [0.3, 0.4]]") from None
    try:
        return np.array(data, dtype=np.float64)
    except (ValueError, TypeError):
        raise ZeroLLMError(f"{path}: expected a rectangular nested list of numbers; rows of "
                           "different lengths or non-numbers were found (every row needs the "
                           "same number of entries)") from None


MAX_ABS = 1e6          # the largest number the walkthrough takes: its products square it


def load_array(path, name="array"):
    """Load a numeric array from ``.npy`` or ``.json``; reject non-finite values.

    ``name`` is how the error messages refer to it (e.g. "--wq").
    """
    path = os.fspath(path)
    suffix = os.path.splitext(path)[1].lower()
    if suffix not in SUFFIXES:
        raise ZeroLLMError(f"{name}: {path!r} must end in .npy or .json")
    require_regular(path, f"{suffix} file")
    if not os.path.isfile(path):
        raise ZeroLLMError(f"{name}: file not found: {path}")
    a = _read_npy(path) if suffix == ".npy" else _read_json(path)
    if not (np.issubdtype(a.dtype, np.number) or a.dtype == np.bool_) or np.iscomplexobj(a):
        raise ZeroLLMError(f"{name}: {path} holds {a.dtype} data; it must be real numbers")
    if a.size == 0:
        raise ZeroLLMError(f"{name}: {path} is empty (shape {a.shape}); every size must be >= 1")
    a = a.astype(np.float64)
    if not np.all(np.isfinite(a)):
        raise ZeroLLMError(f"{name}: {path} contains NaN or infinity; use finite numbers only")
    largest = np.abs(a).max()
    if largest > MAX_ABS:             # x @ W and then q . k square the size: 1e308 became inf, then NaN
        raise ZeroLLMError(f"{name}: {path} holds {largest:.3g}; use numbers up to {MAX_ABS:g} in size "
                           "(the scores multiply them twice and would overflow)")
    return a
