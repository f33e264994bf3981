"""Checks for everything read back from disk: config sections, RNG states, arrays of weights.

A file on disk may have been edited by hand, cut short by a full disk, written by another version,
or damaged. Whatever is wrong, the user gets one ZeroLLMError that names the file and the field,
never a TypeError from deep inside a constructor:

    >>> from zerollm.model.config import GPTConfig
    >>> dataclass_from_dict(GPTConfig, {"n_layer": "4"}, "run/step-0000100/config.json", "model")
    ... # doctest: +ELLIPSIS
    Traceback (most recent call last):
    zerollm.io.errors.ZeroLLMError: run/step-0000100/config.json: model.n_layer must be a whole number, got '4'; ...
"""

import dataclasses
import math

import numpy as np

from zerollm.io.argtypes import THREADS, Range, field_kind, field_range
from zerollm.io.errors import ZeroLLMError

_DAMAGED = "the file was edited or damaged; restore it, or re-create it with zerollm"
# the bit generators numpy can restore a state into (rng.json names one of them)
BIT_GENERATORS = ("PCG64", "PCG64DXSM", "MT19937", "Philox", "SFC64")


# ----------------------------------------------------------------------------
# dataclass configs

def _type_ok(kind, value):
    if kind is bool:
        return isinstance(value, bool)
    if kind is int:
        return isinstance(value, int) and not isinstance(value, bool)
    if kind is float:
        return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
    return isinstance(value, kind) if isinstance(kind, type) else True


def _kind_name(kind):
    return {bool: "true or false", int: "a whole number", float: "a finite number",
            str: "a string"}.get(kind, getattr(kind, "__name__", str(kind)))


def check_field(cls, field, value, where, section=""):
    """One field's value against its annotation and its declared range (zerollm.io.argtypes)."""
    optional = type(None) in getattr(field.type, "__args__", ())
    if value is None and optional:
        return value
    name = f"{section}.{field.name}" if section else field.name
    kind = field_kind(field)
    if not _type_ok(kind, value):
        raise ZeroLLMError(f"{where}: {name} must be {_kind_name(kind)}{' or null' if optional else ''}, "
                           f"got {value!r}; {_DAMAGED}")
    declared = field_range(cls, field)
    if declared is not None:
        try:
            declared.check(value, name)
        except ZeroLLMError as err:
            raise ZeroLLMError(f"{where}: {err}; {_DAMAGED}") from None
    return value


def dataclass_from_dict(cls, data, where, section=""):
    """``cls(**data)`` for a dict read from file ``where`` (its ``section``), every key and value checked.

    Unknown keys, values of the wrong type and values outside their declared range are errors that
    name the file and the field. Missing keys take the dataclass default (files written before a
    field existed stay readable).
    """
    label = f"{where}: {section}" if section else where
    if not isinstance(data, dict):
        raise ZeroLLMError(f"{label} must be a JSON object of {cls.__name__} fields, got "
                           f"{type(data).__name__}; {_DAMAGED}")
    known = {f.name: f for f in dataclasses.fields(cls)}
    unknown = sorted(set(data) - set(known))
    if unknown:
        raise ZeroLLMError(f"{label}: unknown field(s) {', '.join(map(repr, unknown))}; {cls.__name__} has "
                           f"{', '.join(known)}. Remove them (a typo, or a file from a newer zerollm?)")
    for name, value in data.items():
        check_field(cls, known[name], value, where, section)
    try:
        return cls(**data)
    except ZeroLLMError as err:
        raise ZeroLLMError(f"{label}: {err}") from None


# ----------------------------------------------------------------------------
# random number generator states

def generator_from_state(state, where):
    """A np.random.Generator restored from a saved ``bit_generator.state`` dict, checked."""
    name = state.get("bit_generator") if isinstance(state, dict) else None
    if name not in BIT_GENERATORS:
        raise ZeroLLMError(f"{where} is not a saved random generator state (its \"bit_generator\" is "
                           f"{name!r}, expected one of {', '.join(BIT_GENERATORS)}); {_DAMAGED}")
    bit_generator = getattr(np.random, name)()
    try:
        bit_generator.state = state
    except (TypeError, ValueError, KeyError, OverflowError) as err:
        raise ZeroLLMError(f"{where} is a damaged {name} state ({type(err).__name__}: {err}); "
                           f"{_DAMAGED}") from None
    return np.random.Generator(bit_generator)


def restore_generator(rng, state, where):
    """Set ``rng`` (a Generator) to a saved state, after checking it."""
    rng.bit_generator.state = generator_from_state(state, where).bit_generator.state


# ----------------------------------------------------------------------------
# arrays

def _all_finite(a):
    """True when no entry is NaN or infinite. A float64 sum (no temporary array) finds any of them;
    only if the sum itself overflows do we look entry by entry."""
    if not np.issubdtype(a.dtype, np.floating):
        return True
    with np.errstate(invalid="ignore", over="ignore"):     # inf + -inf: the sum is NaN, no warning wanted
        if np.isfinite(np.add.reduce(a, axis=None, dtype=np.float64)):
            return True
    return bool(np.isfinite(a).all())


def _fits(a, dtype):
    """True when casting ``a`` (finite) to ``dtype`` makes no infinity: 1e300 in an F64 file becomes inf
    as float32. Only a wider float type pays for the two passes of max and min."""
    if dtype is None or not np.issubdtype(a.dtype, np.floating) or a.size == 0:
        return True
    top = np.finfo(dtype).max
    return np.finfo(a.dtype).max <= top or bool(a.max() <= top and a.min() >= -top)


def require_finite(arrays, where, dtype=None):
    """ZeroLLMError naming ``where`` and the tensors that hold NaN or infinity, if any do.

    ``dtype``: the float type the arrays are about to be cast to (a model's "float32"); a number beyond its
    range would turn into infinity there, so it counts as one, and the check runs before that cast. Every
    array of weights that enters a model goes through here, whatever file it came from (checkpoints, model
    directories, Hugging Face folders, GGUF tensors, PEFT adapters)."""
    dtype = None if dtype is None else np.dtype(dtype)
    bad = []
    for name, a in arrays.items():
        a = np.asarray(a)
        if not _all_finite(a):
            bad.append(name)
        elif not _fits(a, dtype):
            bad.append(f"{name}: numbers beyond {dtype.name}'s range")
    if bad:
        shown = ", ".join(bad[:4]) + (f" and {len(bad) - 4} more" if len(bad) > 4 else "")
        raise ZeroLLMError(f"{where}: {len(bad)} tensor(s) hold NaN or infinity ({shown}); these weights are "
                           "broken (training diverged, or the file is damaged): use an earlier checkpoint "
                           "or train again with a lower --lr")


# ----------------------------------------------------------------------------
# the small JSON files of a checkpoint (zerollm.training.checkpoint)

_CHECKPOINT_DAMAGED = "the checkpoint is damaged: load the run directory to use the one before it, or train again"
STEP = Range(int, 0, None)
BETA = Range(float, 0, 1, high_open=True)
# the scalars AdamW.state_dict() saves next to its moments, and what each must be
OPTIMIZER_SCALARS = {"step": STEP, "lr": Range(float, 0, None), "eps": Range(float, 0, None),
                     "weight_decay": Range(float, 0, None)}


def _checked(path, declared, value, key):
    try:
        declared.check(value, key)
    except ZeroLLMError as err:
        raise ZeroLLMError(f"{path}: {err}; {_CHECKPOINT_DAMAGED}") from None


def checkpoint_state(state, path):
    """state.json: {"step": int >= 0, "best_val_loss": number or null, "threads": int >= 1,
    "objective_state": {...}, anything else JSON}. A null best_val_loss (strict JSON has no Infinity,
    zerollm.io.fileio) comes back as inf."""
    if not isinstance(state, dict):
        raise ZeroLLMError(f"{path} must hold a JSON object; {_CHECKPOINT_DAMAGED}")
    _checked(path, STEP, state.get("step"), "step")
    if state.get("threads") is not None:
        _checked(path, THREADS, state["threads"], "threads")
    loss = state.get("best_val_loss")
    if loss is not None and (isinstance(loss, bool) or not isinstance(loss, (int, float)) or math.isnan(loss)):
        raise ZeroLLMError(f"{path}: best_val_loss must be a number or null, got {loss!r}; {_CHECKPOINT_DAMAGED}")
    if not isinstance(state.get("objective_state", {}), dict):
        raise ZeroLLMError(f"{path}: objective_state must be a JSON object, got {state['objective_state']!r}; "
                           f"{_CHECKPOINT_DAMAGED}")
    if "best_val_loss" in state and loss is None:
        state["best_val_loss"] = float("inf")
    return state


def rng_states(state, path):
    """rng.json: one bit generator state, or named ones ({"data": ..., "model": ...}); every state in it
    must restore (the trainer then checks that the ones it needs are there)."""
    if not isinstance(state, dict):
        raise ZeroLLMError(f"{path} must hold a JSON object of random generator states; {_CHECKPOINT_DAMAGED}")
    if "bit_generator" in state:
        generator_from_state(state, path)
        return state
    for key, value in state.items():
        if isinstance(value, dict) and "bit_generator" in value:
            generator_from_state(value, f"{path} (\"{key}\")")
    return state


def optimizer_metadata(state, path):
    """The scalars of AdamW.state_dict() kept in optimizer.safetensors' metadata."""
    where = f"{path} (metadata \"zerollm.optimizer\")"
    for key, declared in OPTIMIZER_SCALARS.items():
        if key in state:
            _checked(where, declared, state[key], key)
    betas = state.get("betas", [0.9, 0.999])
    if not isinstance(betas, list) or len(betas) != 2:
        raise ZeroLLMError(f"{where}: betas must be a list of two numbers, got {betas!r}; {_CHECKPOINT_DAMAGED}")
    for b in betas:
        _checked(where, BETA, b, "betas")
    decay = state.get("decay", [])
    if not isinstance(decay, list) or not all(isinstance(n, str) for n in decay):
        raise ZeroLLMError(f"{where}: decay must be a list of parameter names, got {decay!r}; "
                           f"{_CHECKPOINT_DAMAGED}")
    return state
