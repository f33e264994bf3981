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

One rule for every output a user names (``tasks make --out``, ``tasks eval --answers``, a stage's
``--out``, ``convert --to``), checked before anything is read or computed:

    - an existing file is replaced only with ``--force`` (even one the same command wrote earlier: a JSONL
      file does not say who wrote it, and a user's own file must never be lost to a rerun);
    - an output is never one of the command's inputs, nor inside one;
    - an output never lies inside another run's directory, a checkpoint, prepared data or a model
      directory (writing there would change what that run resumes or samples from);
    - a new run goes into a new or empty folder, or one holding only what a run writes (check_run_folder);
    - nothing that is not a regular file (a device, a pipe, a link, a folder) is ever renamed over,
      not even with ``--force`` (zerollm.io.fileio.atomic_write refuses it too).
"""

import ctypes
import ctypes.util
import os
import re
import shutil
import tempfile
from contextlib import contextmanager

from zerollm.io.errors import ZeroLLMError
from zerollm.io.fileio import NotRegularFile, fsync_dir, open_regular, refuse_non_regular
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
# the one output rule

_STEP_DIR = re.compile(r"step-\d+")


def _config_head(folder):
    """The first 4 KB of ``folder``/config.json ("" when it cannot be read, or is no regular file: a pipe
    named config.json makes no checkpoint, and must not stop the check of an output's folders)."""
    try:
        with open_regular(os.path.join(folder, "config.json"), "r", encoding="utf-8") as f:
            return f.read(4096)
    except (OSError, UnicodeDecodeError, NotRegularFile):
        return ""


def _is_checkpoint(folder):
    """A zerollm checkpoint: its config.json carries the checkpoint marker, and state.json is beside it."""
    return os.path.isfile(os.path.join(folder, "state.json")) and '"zerollm-checkpoint"' in _config_head(folder)


def zerollm_dir_kind(path):
    """What zerollm wrote (or reads) in directory ``path``: "a training run" (a folder with a step-N checkpoint
    in it), "a checkpoint", "prepared data", "a model directory" (its weights in one file or in shards named by
    an index), "a LoRA adapter directory"; None for any other folder. A stray file named latest.json, or an
    empty step-1 folder, does not make a run."""
    try:
        names = set(os.listdir(path))
    except OSError:                # not a folder, or one we may not read: nothing of ours
        return None
    if any(_STEP_DIR.fullmatch(n) and _is_checkpoint(os.path.join(path, n)) for n in names):
        return "a training run"
    if {"meta.json", "train.bin"} <= names:
        return "prepared data"
    if "config.json" in names and names & {"model.safetensors", "model.safetensors.index.json"}:
        return "a checkpoint" if '"zerollm-checkpoint"' in _config_head(path) else "a model directory"
    if {"adapter_config.json", "adapter_model.safetensors"} <= names:
        return "a LoRA adapter directory"
    return None


def foreign_entries(run_dir, ours):
    """What a fresh run directory holds that a run does not write: names outside ``ours`` and hidden names
    (.zerollm-lock, temp files, .DS_Store); [] for a new or empty folder. A step-N folder is foreign too:
    one holding a checkpoint makes the folder a run (refused before this), and any other one would be
    replaced by the run's checkpoint of that step, or deleted as an old one."""
    try:
        names = sorted(os.listdir(run_dir))
    except OSError:
        return []
    return [n for n in names if n not in ours and not n.startswith(".")]


def check_run_folder(run_dir, ours):
    """A new run goes into a new or empty folder, or one holding only what a run writes: never into a
    folder of other files (``--out ~`` or ``--out /`` scattered a run among them, and every later output
    under that folder was refused as lying inside a run). --force does not change this."""
    foreign = foreign_entries(run_dir, ours)
    if foreign:
        shown = ", ".join(foreign[:3]) + (" ..." if len(foreign) > 3 else "")
        raise ZeroLLMError(f"--out {run_dir} is a folder that already holds files a run does not write ({shown}); "
                           "a run directory holds only the run: choose a new or empty directory")


def check_outside_runs(target, flag="--out"):
    """Refuse an output that lies inside a run, a checkpoint, prepared data or a model directory
    (``target`` itself being a run is the caller's business: a stage's --out may be its own run)."""
    here = os.path.dirname(os.path.abspath(os.fspath(target)))
    while True:
        kind = zerollm_dir_kind(here)
        if kind is not None:
            raise ZeroLLMError(f"{flag} {target} lies inside {here}, which is {kind}: writing there would change "
                               "what that run resumes or samples from; choose a path outside it")
        parent = os.path.dirname(here)
        if parent == here:
            return
        here = parent


def check_output_file(path, *, force=False, inputs=(), flag="--out", example="out"):
    """The one rule for an output file (see the module docstring); ``inputs``: (flag, path) pairs read
    by the same command (a folder: the output may not lie inside it either); ``example``: the file name
    the error for a folder suggests inside it. Checked before anything is read or computed."""
    path = os.fspath(path)
    if os.path.isdir(path):
        raise ZeroLLMError(f"{flag} {path} is a directory: it is not a regular file, and {flag} names the file to "
                           f"write; give a file name such as {os.path.join(path, example)}")
    refuse_non_regular(path, flag)            # never allowed, --force or not
    for input_flag, source in inputs:
        if source is not None and os.path.exists(source) and _same_or_inside(path, source):
            raise ZeroLLMError(f"{flag} {path} is, or lies inside, {input_flag} {source}, which this command reads; "
                               "writing it would destroy the input: choose another output file")
    check_outside_runs(path, flag)
    parent = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(parent):
        raise ZeroLLMError(f"cannot write {path!r}: the directory {parent!r} does not exist; create it first "
                           f"(mkdir -p) or choose another {flag}")
    if os.path.exists(path) and not force:
        raise ZeroLLMError(f"{flag} {path} already exists; pass --force to replace it, or choose "
                           "another file name")


def check_inputs_apart(run_dir, names, inputs):
    """An input may lie in a new run's --out, but not where the run writes: RUN/NAME for each of ``names``
    (its log.jsonl, tokenizer.json, inputs/ ...), which the run replaces or deletes, --force or not.
    ``inputs``: (flag, path) pairs the command reads."""
    for flag, given in inputs:
        for name in names:
            where = os.path.join(run_dir, name)
            if given is not None and os.path.exists(given) and _same_or_inside(given, where):
                raise ZeroLLMError(f"{flag} {given} is where this run writes ({where}); move the file out of --out "
                                   "first")


# files a stage run writes into its --out besides checkpoints (zerollm.cli.commands.stage)
STAGE_FILES = ("tokenizer.json", "log.jsonl", "loss.png", "inputs")


def check_stage_out(run_dir, *, force=False, sources=()):
    """A fresh stage run's --out: not inside its start (--init/--hf) nor around it, not inside another run,
    and not a folder whose files (tokenizer.json, log.jsonl, ...) someone else made, unless --force.
    An earlier unfinished attempt of a stage (inputs/ and log.jsonl, no checkpoint) is started over."""
    for flag, source in sources:               # a start that is a model (not a typo's empty folder)
        if source is not None and (zerollm_dir_kind(source) or os.path.isfile(os.path.join(source, "config.json"))):
            check_separate(run_dir, [source], "--out", flag)
    check_outside_runs(run_dir)
    if os.path.lexists(run_dir) and not os.path.isdir(run_dir):
        raise ZeroLLMError(f"--out {run_dir} is a file, not a folder; a stage writes a run directory there: "
                           "choose a new directory name")
    kind = zerollm_dir_kind(run_dir)
    if kind == "a training run":
        return                     # the stage says: continue it with --resume, or choose another --out
    if kind is not None:
        raise ZeroLLMError(f"--out {run_dir} is {kind}; a stage writes a run directory: choose a new directory")
    check_run_folder(run_dir, STAGE_FILES)
    if not os.path.isdir(run_dir) or force:
        return
    present = [n for n in STAGE_FILES if os.path.lexists(os.path.join(run_dir, n))]
    unfinished = {"inputs", "log.jsonl"} <= set(present)
    if present and not unfinished:
        raise ZeroLLMError(f"--out {run_dir} already holds {', '.join(present)}, "
                           "which this command did not create and would replace; pass --force to replace them, "
                           "or choose another --out")


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
    if os.path.islink(path) or (os.path.exists(path) and not os.path.isdir(path)):
        raise ZeroLLMError(f"{path} is a file or a link; choose a directory path")
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
