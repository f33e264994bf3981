"""Crash-safe checkpoints of a training run, and exact resume.

A run directory holds one sub-directory per saved step, plus a pointer to the newest:

    RUN/
      latest.json               {"step": 1000, "dir": "step-0001000"}
      step-0000500/             an older checkpoint (the newest ``keep`` are kept)
      step-0001000/
        config.json             model config, training config, tokenizer kind
        model.safetensors       the parameters
        optimizer.safetensors   AdamW moments "m.<name>", "v.<name>"; step + hyperparams in metadata
        rng.json                np.random.Generator.bit_generator.state (batches continue identically)
        tokenizer.json          a copy of the tokenizer, so the checkpoint stands alone
        state.json              step, best_val_loss, any other JSON-able training state
        objective.safetensors   arrays of the objective's state (a rollout buffer), when it has any

Why a kill at ANY moment leaves a loadable checkpoint: every file goes into RUN/.tmp-step-N/
first (each fsync'ed), then one rename makes the whole directory appear as step-N; only then is
latest.json rewritten (atomically) and only then are old checkpoints deleted. Loading ignores
``.tmp-*`` directories and, when latest.json is missing or stale, falls back to the newest
complete step directory. Saving a step that already exists first renames the old one to
.old-step-N, which still counts until the new step-N is in place. The next save removes
whatever an interrupted one left. A run directory is written by one training process at a time.
"""

import hashlib
import json
import os
import re
import shutil
import sys
from dataclasses import dataclass, replace

import numpy as np

from zerollm.io.errors import ZeroLLMError
from zerollm.io.fileio import (atomic_write, folder_not_found, fsync_dir, open_regular, read_json, require_regular,
                               write_json)
from zerollm.io.safetensors import load_file, load_metadata, save_file
from zerollm.io.validate import checkpoint_state, optimizer_metadata, require_finite, rng_states
from zerollm.tokenizers import tokenizer_file

FORMAT, VERSION = "zerollm-checkpoint", 1
REQUIRED = ("config.json", "model.safetensors", "optimizer.safetensors", "rng.json", "state.json")
_STEP_DIR = re.compile(r"step-(\d+)")
_ANY_STEP_DIR = re.compile(r"(\.old-)?step-(\d+)")   # .old-step-N: step-N while it is being replaced
_TRAIN_FIRST = "train first with `zerollm train` (it saves checkpoints there)"
_DAMAGED = "the checkpoint is damaged: load the run directory to use the one before it, or train again"


@dataclass
class Checkpoint:
    """Everything one checkpoint holds; ``path`` is its step directory."""
    step: int
    model_config: dict
    train_config: dict
    params: dict                  # name -> np.ndarray, exactly as saved
    optimizer_state: dict | None  # AdamW.state_dict() layout; None when loaded with optimizer=False
    rng_state: dict               # give it to rng.bit_generator.state
    tokenizer_path: str | None
    extra: dict                   # state.json without "step" (best_val_loss, ...)
    path: str
    tokenizer_kind: str | None = None
    objective: dict | None = None          # the objective's settings; {"kind": "lm"} for pre-training
    objective_arrays: dict | None = None   # objective.safetensors, {} when absent

    @property
    def config_path(self):
        return os.path.join(self.path, "config.json")


@dataclass(frozen=True)
class Snapshot:
    """What ``save_checkpoint`` writes: a run at one step (``Checkpoint`` is what loading gives back)."""
    step: int
    model_config: dict
    train_config: dict
    params: dict                  # name -> np.ndarray
    optimizer_state: dict         # AdamW.state_dict() layout
    rng_state: object             # rng.bit_generator.state, or the np.random.Generator itself
    tokenizer_path: str | None    # the tokenizer file to copy in, or None
    extra: dict | None = None     # state.json without "step" (best_val_loss, ...)
    objective: dict | None = None          # the objective's settings; None = pre-training ({"kind": "lm"})
    objective_arrays: dict | None = None   # the objective's arrays (objective.safetensors)


def step_dir_name(step):
    """Zero-padded, so names sort like numbers in a file browser.

    >>> step_dir_name(500)
    'step-0000500'
    """
    return f"step-{step:07d}"


# ----------------------------------------------------------------------------
# saving

def save_checkpoint(run_dir, snapshot, *, keep=2):
    """Save ``snapshot`` (a Snapshot) as RUN/step-NNNNNNN/, point latest.json at it, keep the newest ``keep``.

    Returns the new step directory.
    """
    extra = _check_save_args(run_dir, snapshot.step, keep, snapshot.extra, snapshot.optimizer_state)
    snapshot = replace(snapshot, step=int(snapshot.step), extra=extra, objective=snapshot.objective or {"kind": "lm"})
    run_dir, step = os.fspath(run_dir), snapshot.step
    os.makedirs(run_dir, exist_ok=True)
    _remove_leftovers(run_dir)
    name = step_dir_name(step)
    tmp = os.path.join(run_dir, ".tmp-" + name)
    os.mkdir(tmp)
    try:
        _write_step_files(tmp, snapshot)
        fsync_dir(tmp)
        _move_into_place(run_dir, tmp, name)
    except BaseException:      # incl. Ctrl-C: the previous checkpoint stays the latest
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    write_json(os.path.join(run_dir, "latest.json"), {"step": step, "dir": name})
    _prune(run_dir, step, keep)
    return os.path.join(run_dir, name)


def _check_save_args(run_dir, step, keep, extra, optimizer_state):
    if os.path.exists(run_dir) and not os.path.isdir(run_dir):
        raise ZeroLLMError(f"{os.fspath(run_dir)} is a file, not a run directory; choose another --out")
    for name, value, least in (("step", step, 0), ("keep", keep, 1)):
        if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < least:
            raise ZeroLLMError(f"checkpoint {name} must be an int >= {least}, got {value!r}")
    extra = {} if extra is None else dict(extra)
    if "step" in extra:
        raise ZeroLLMError("extra state must not contain 'step'; the checkpoint stores the step itself")
    if not isinstance(optimizer_state, dict) or not {"m", "v"} <= set(optimizer_state):
        raise ZeroLLMError("optimizer_state must be a dict with 'm' and 'v' (use AdamW.state_dict())")
    return extra


def _write_step_files(d, s):
    """The files of Snapshot ``s`` (its step an int, its extra checked) into the directory ``d``."""
    kind = None
    if s.tokenizer_path is not None:
        kind = _copy_tokenizer(s.tokenizer_path, tokenizer_file(d))
    write_json(os.path.join(d, "config.json"), {"format": FORMAT, "version": VERSION,
                                                "model": s.model_config, "train": s.train_config,
                                                "tokenizer": kind, "objective": s.objective})
    save_file(s.params, os.path.join(d, "model.safetensors"), {"format": "np", "step": str(s.step)})
    if s.objective_arrays:
        save_file(s.objective_arrays, os.path.join(d, "objective.safetensors"), {"format": "np"})
    _save_optimizer(s.optimizer_state, os.path.join(d, "optimizer.safetensors"))
    rng_state = s.rng_state
    if isinstance(rng_state, np.random.Generator):
        rng_state = rng_state.bit_generator.state
    write_json(os.path.join(d, "rng.json"), rng_state)
    write_json(os.path.join(d, "state.json"), {"step": s.step, **s.extra})   # written last


def _save_optimizer(state, path):
    """m and v become tensors "m.<name>" / "v.<name>"; the scalars go to the metadata as JSON."""
    tensors = {f"{key}.{name}": a for key in ("m", "v") for name, a in state[key].items()}
    scalars = {k: v for k, v in state.items() if k not in ("m", "v")}
    try:
        meta = json.dumps(scalars)
    except (TypeError, ValueError) as err:
        raise ZeroLLMError(f"optimizer state holds a value JSON cannot store ({err})") from None
    save_file(tensors, path, {"zerollm.optimizer": meta})


def _copy_tokenizer(src, dst):
    """Copy the tokenizer file (durably) and return its kind (byte/char/bpe) if it is in zerollm's format."""
    src = os.fspath(src)
    require_regular(src, "tokenizer file")
    if not os.path.isfile(src):
        raise ZeroLLMError(f"tokenizer file not found: {src}; pass the tokenizer.json that "
                           "`zerollm prepare` wrote next to the data")
    with open_regular(src, "rb", what="tokenizer file") as fin, atomic_write(dst, "wb") as fout:
        shutil.copyfileobj(fin, fout)
    from zerollm.tokenizers import KINDS
    from zerollm.tokenizers.base import read_tokenizer_file
    try:
        kind, _ = read_tokenizer_file(dst)            # the copy itself: the kind recorded is the file kept
    except ZeroLLMError:      # damaged or not a tokenizer: the copy still travels, and opening it says what is wrong
        return None
    return kind if kind in KINDS else None            # a Hugging Face tokenizer.json has no zerollm kind


def _move_into_place(run_dir, tmp, name):
    final = os.path.join(run_dir, name)
    if os.path.exists(final):   # the same step saved again: move the old one aside first
        old = os.path.join(run_dir, ".old-" + name)     # still loadable if we die right here
        os.rename(final, old)
        os.rename(tmp, final)
        shutil.rmtree(old, ignore_errors=True)
    else:
        os.rename(tmp, final)   # atomic: the directory appears complete or not at all
    fsync_dir(run_dir)


def _remove_leftovers(run_dir):
    """Clean up after an interrupted save: delete .tmp-* dirs and temp files of latest.json;
    put back a .old-step-N whose replacement never arrived."""
    for entry in os.listdir(run_dir):
        path = os.path.join(run_dir, entry)
        if entry.startswith(".tmp-") and os.path.isdir(path):
            shutil.rmtree(path, ignore_errors=True)
        elif entry.startswith(".latest.json.") and entry.endswith(".tmp"):
            os.remove(path)
        elif entry.startswith(".old-step-") and os.path.isdir(path):
            original = os.path.join(run_dir, entry[len(".old-"):])
            if os.path.exists(original):
                shutil.rmtree(path, ignore_errors=True)
            else:
                os.rename(path, original)


def _prune(run_dir, current, keep):
    """Keep the checkpoint just saved and the newest keep-1 older ones. Newer step dirs (left by
    a run that was resumed from an earlier checkpoint) are not touched."""
    older = [name for step, name in _step_dirs(run_dir) if step < current]
    for name in older[:max(0, len(older) - (keep - 1))]:
        trash = os.path.join(run_dir, ".tmp-delete-" + name)   # rename first: never half a step dir
        os.rename(os.path.join(run_dir, name), trash)
        shutil.rmtree(trash, ignore_errors=True)


# ----------------------------------------------------------------------------
# finding the latest checkpoint

def _step_dirs(run_dir):
    """[(step, dir name)] of every step-N directory (or .old-step-N without a step-N), oldest first."""
    entries = set(os.listdir(run_dir))
    found = []
    for entry in entries:
        match = _ANY_STEP_DIR.fullmatch(entry)
        if not match or not os.path.isdir(os.path.join(run_dir, entry)):
            continue
        if match.group(1) and entry[len(".old-"):] in entries:
            continue   # the replacement is in place; the old copy is garbage
        found.append((int(match.group(2)), entry))
    return sorted(found)


def _is_complete(step_dir):
    return all(os.path.isfile(os.path.join(step_dir, f)) for f in REQUIRED)


def _pointer(run_dir):
    """(the directory latest.json names, or None; why it was not used: None when it is fine or absent)."""
    try:
        with open_regular(os.path.join(run_dir, "latest.json"), "r", encoding="utf-8") as f:
            name = json.load(f)["dir"]
    except FileNotFoundError:
        return None, None                   # a run saved before latest.json existed: the newest step counts
    except (OSError, ValueError, KeyError, TypeError, RecursionError):   # a pipe there too (NotRegularFile)
        return None, "latest.json is unreadable"
    if not isinstance(name, str) or not _STEP_DIR.fullmatch(name):   # no "../" tricks
        return None, "latest.json names no step-* folder"
    path = os.path.join(run_dir, name)
    if _is_complete(path):
        return path, None
    return None, f"latest.json names {name}, which is {'incomplete' if os.path.isdir(path) else 'missing'}"


_NOTED = set()          # (run folder, why): each fallback is told once per process


def latest_checkpoint(run_dir):
    """Path of the checkpoint to resume from, or None when ``run_dir`` has none.

    latest.json decides; if it is missing or names a deleted/incomplete directory, the newest
    complete step directory is used, and a stale latest.json is told in one note line on stderr (once).
    ``.tmp-*`` directories (interrupted saves) never count.
    """
    run_dir = os.fspath(run_dir)
    if not os.path.isdir(run_dir):
        return None
    pointed, why = _pointer(run_dir)
    if pointed is not None:
        return pointed
    complete = [name for _, name in _step_dirs(run_dir) if _is_complete(os.path.join(run_dir, name))]
    if complete and why and (run_dir, why) not in _NOTED:
        _NOTED.add((run_dir, why))
        print(f"note: {os.path.join(run_dir, '')}{why}; using {complete[-1]}, the newest complete checkpoint "
              "there", file=sys.stderr)
    return os.path.join(run_dir, complete[-1]) if complete else None


# ----------------------------------------------------------------------------
# loading

def load_checkpoint(path, *, optimizer=True, force=None, weights=True):
    """Load a checkpoint from a run directory (its latest) or from one step directory.

    optimizer=False skips the AdamW moments (twice the model's size) when only sampling; weights=False leaves
    params empty for a caller that reads model.safetensors itself, tensor by tensor (a base opened in
    quantized blocks, zerollm.interop.opening). Every
    file is checked before use (zerollm.io.validate): config.json, state.json, rng.json, the optimizer's
    metadata; the arrays must be finite; arrays larger than the memory available are refused before
    they are read (zerollm.model.budget; force=True only warns). The model and train sections are returned
    as dicts: zerollm.training.trainer and ``load_model`` check them against their dataclasses.
    """
    step_dir = _step_dir(os.fspath(path))
    config = _read_config(step_dir)
    state_file, rng_file = os.path.join(step_dir, "state.json"), os.path.join(step_dir, "rng.json")
    state = checkpoint_state(read_json(state_file, what="checkpoint state"), state_file)
    rng_state = rng_states(read_json(rng_file, what="checkpoint RNG state"), rng_file)
    model_file = os.path.join(step_dir, "model.safetensors")
    arrays = [model_file] * weights + ([os.path.join(step_dir, "optimizer.safetensors")] if optimizer else [])
    from zerollm.model import budget
    budget.require(budget.reading(arrays, what=f"loading {step_dir}"), force=force)
    dtype = _model_dtype(config)
    params = load_file(model_file) if weights else {}
    require_finite(params, model_file, dtype)
    opt_state = _load_optimizer(os.path.join(step_dir, "optimizer.safetensors"), dtype) if optimizer else None
    tokenizer = tokenizer_file(step_dir)
    objective_file = os.path.join(step_dir, "objective.safetensors")
    objective_arrays = load_file(objective_file) if os.path.isfile(objective_file) else {}
    require_finite(objective_arrays, objective_file)       # a rollout's advantages feed the next step's weights
    return Checkpoint(
        step=state.pop("step"), model_config=config["model"], train_config=config["train"],
        params=params, optimizer_state=opt_state, rng_state=rng_state,
        tokenizer_path=tokenizer if os.path.isfile(tokenizer) else None,
        extra=state, path=step_dir, tokenizer_kind=config.get("tokenizer"),
        objective=config.get("objective") or {"kind": "lm"}, objective_arrays=objective_arrays)


def _step_dir(path):
    """The complete step directory that ``path`` (a run or a step directory) stands for."""
    if not os.path.isdir(path):
        raise folder_not_found(path, "checkpoint directory", _TRAIN_FIRST)
    is_step_dir = any(os.path.exists(os.path.join(path, f)) for f in REQUIRED)
    step_dir = path if is_step_dir else latest_checkpoint(path)
    if step_dir is None:
        raise ZeroLLMError(f"no checkpoint in {path}; {_TRAIN_FIRST}")
    for name in REQUIRED:               # a pipe or folder of one of these names is not "missing": say what it is
        require_regular(os.path.join(step_dir, name), "checkpoint file")
    missing = [f for f in REQUIRED if not os.path.isfile(os.path.join(step_dir, f))]
    if missing and _hugging_face_dir(step_dir):
        raise ZeroLLMError(f"{step_dir} is a Hugging Face model directory, not a zerollm run or checkpoint: load it "
                           f"with --hf {step_dir} (sample, chat, serve, sft and the other stages have it), or make a "
                           f"zerollm model directory of it with `zerollm convert --from {step_dir} --to DIR`")
    if missing:
        raise ZeroLLMError(f"checkpoint {step_dir} is incomplete (missing {', '.join(missing)}); "
                           "load the run directory instead to use its last complete checkpoint")
    return step_dir


def _hugging_face_dir(folder):
    """A Hugging Face model folder: model.safetensors, and a config.json naming its model_type."""
    if not os.path.isfile(os.path.join(folder, "model.safetensors")):
        return False
    try:
        with open_regular(os.path.join(folder, "config.json"), "r", encoding="utf-8") as f:
            config = json.load(f)
    except (OSError, ValueError, RecursionError):        # NotRegularFile is a ValueError
        return False
    return isinstance(config, dict) and isinstance(config.get("model_type"), str)


def _written_by_training(step_dir):
    """Does ``step_dir`` hold the files only a training checkpoint has (state.json and rng.json)?"""
    return all(os.path.isfile(os.path.join(step_dir, name)) for name in ("state.json", "rng.json"))


def _read_config(step_dir):
    config = read_json(os.path.join(step_dir, "config.json"), what="checkpoint config")
    ours = isinstance(config, dict) and config.get("format") == FORMAT
    if not ours or not {"model", "train"} <= set(config):
        path = os.path.join(step_dir, "config.json")
        lacks = [k for k in ("model", "train") if not isinstance(config, dict) or k not in config]
        if ours or _written_by_training(step_dir):
            # the folder is zerollm's (its config says so, or its state.json and rng.json are there): damaged
            what = (f"it is not a zerollm checkpoint config (it has no {' or '.join(repr(k) for k in lacks)} "
                    "settings)" if isinstance(config, dict) else
                    f"it is not a zerollm checkpoint config (a JSON {type(config).__name__}, not an object)")
            raise ZeroLLMError(f"{path} is damaged: {what}; restore the file from a copy, or remove {step_dir} "
                               "and load its run directory to use the run's previous checkpoint")
        raise ZeroLLMError(f"{path} is not a zerollm checkpoint config (it has no \"format\": \"{FORMAT}\"); "
                           "point at a run directory, checkpoint or model directory that zerollm wrote")
    if config.get("version") != VERSION:
        raise ZeroLLMError(f"{step_dir}: checkpoint version {config.get('version')!r} is not supported "
                           f"(this zerollm reads version {VERSION}); upgrade zerollm")
    where = os.path.join(step_dir, "config.json")
    for key in ("model", "train"):
        if not isinstance(config[key], dict):
            raise ZeroLLMError(f"{where}: \"{key}\" must be a JSON object, got {config[key]!r}; {_DAMAGED}")
    if not isinstance(config.get("tokenizer"), (str, type(None))):
        raise ZeroLLMError(f"{where}: \"tokenizer\" must be a name or null, got {config['tokenizer']!r}; "
                           f"{_DAMAGED}")
    if not isinstance(config.get("objective"), (dict, type(None))):
        raise ZeroLLMError(f"{where}: \"objective\" must be a JSON object, got {config['objective']!r}; "
                           f"{_DAMAGED}")
    return config


def _model_dtype(config):
    """The dtype the checkpoint's arrays are cast to (the model's), or None while config.json's is not one
    (GPTConfig then says what is wrong with it)."""
    from zerollm.model.config import DTYPES
    dtype = config["model"].get("dtype", "float32")
    return dtype if dtype in DTYPES else None


def _load_optimizer(path, dtype=None):
    meta = load_metadata(path)
    try:
        state = json.loads(meta["zerollm.optimizer"])
    except (KeyError, json.JSONDecodeError, RecursionError):
        state = None
    if not isinstance(state, dict):
        raise ZeroLLMError(f"{path} has no zerollm optimizer metadata; it was not written by "
                           "save_checkpoint")
    optimizer_metadata(state, path)
    state["m"], state["v"] = {}, {}
    for key, a in load_file(path).items():
        which, _, name = key.partition(".")
        if which not in ("m", "v"):
            raise ZeroLLMError(f"{path}: unexpected tensor {key!r}; optimizer tensors are m.* and v.*")
        state[which][name] = a
    require_finite(state["m"], f"{path} (first moments)", dtype)
    require_finite(state["v"], f"{path} (second moments)", dtype)
    negative = sorted(name for name, v in state["v"].items() if v.size and v.min() < 0)
    if negative:       # AdamW divides by sqrt(v): a negative moment makes the next step's weights NaN
        raise ZeroLLMError(f"{path}: the second moments of {', '.join(negative[:4])} are negative (a mean of "
                           f"squares never is); {_DAMAGED}")
    return state


def weights_digest(params):
    """sha256 over every parameter's name, dtype, shape and bytes, in name order: the model's identity."""
    h = hashlib.sha256()
    for name in sorted(params):
        if not isinstance(params[name], np.ndarray):     # a matrix in quantized blocks (a QLoRA base): its bytes
            m = params[name]
            h.update(f"{name}:{m.kind}:{m.shape};".encode())
            for piece in getattr(m, "parts", None) or (m,):  # StackedBlocks: each part in its own kind
                if piece is not m:
                    h.update(f"{piece.kind}:{piece.shape};".encode())
                for part in (getattr(piece, "scales", None), getattr(piece, "codes", None), getattr(piece, "blocks", None)):
                    if part is not None:
                        h.update(_memory(np.ascontiguousarray(part)))
            continue
        a = np.ascontiguousarray(params[name])
        h.update(f"{name}:{a.dtype.str}:{a.shape};".encode())
        h.update(_memory(a))
    return h.hexdigest()


def _memory(a):
    """The bytes of the C-contiguous array ``a`` as hashlib reads them, without a copy (``a.tobytes()`` would
    make one as large as the array: a whole GPT-2 embedding table). Byte for byte what tobytes() gives."""
    return memoryview(a.reshape(-1).view(np.uint8))
