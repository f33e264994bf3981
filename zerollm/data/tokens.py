"""Data: tokenize a text file once, store the ids as flat binary files, sample training batches.

``zerollm prepare --data input.txt --tokenizer char`` writes a folder::

    train.bin        the first 90% of the token ids, raw little-endian uint16 (uint32 if V > 65536)
    val.bin          the last 10%
    tokenizer.json   the tokenizer, so ids can be turned back into text
    meta.json        what was done: tokenizer, vocab size, dtype, token counts, source sha256

Raw ``.bin`` files (as in nanoGPT) can be memory-mapped: training reads random windows without
loading the whole corpus. Shapes below: B batch size, T block size (context length).
"""

import hashlib
import json
import os
from pathlib import Path

import numpy as np

from zerollm.model import budget
from zerollm.io import docsmode
from zerollm.io.argtypes import FIELD_RANGES, FRACTION, Range
from zerollm.io.errors import ZeroLLMError
from zerollm.io.fileio import atomic_write, not_utf8_advice, open_regular, require_regular, utf8_json
from zerollm.io.outdir import atomic_dir, check_outside_runs, check_separate
from zerollm.tokenizers import load_tokenizer, tokenizer_file, train_tokenizer
from zerollm.tokenizers.base import dumps_readable, read_json_file

META_FORMAT = "zerollm-data"
META_VERSION = 1
DTYPES = {"uint16": np.dtype("<u2"), "uint32": np.dtype("<u4")}   # explicit little-endian


# ----------------------------------------------------------------------------
# reading the corpus

def token_dtype(vocab_size):
    """uint16 holds ids 0..65535, so it fits vocabularies of up to 65536 tokens (GPT-2: 50257).

    >>> token_dtype(50257), token_dtype(100277)
    ('uint16', 'uint32')
    """
    return "uint16" if vocab_size <= 2 ** 16 else "uint32"


def read_corpus(path):
    """UTF-8 text of ``path`` (a leading byte-order mark is dropped) and the file's sha256."""
    path = Path(path)
    require_regular(path, "text file")            # /dev/zero, /dev/stdin from a pipe, a FIFO: never read
    if not path.is_file():
        from zerollm.data import corpora
        shipped = ", ".join(name for name, _ in corpora.CORPORA.values())
        raise ZeroLLMError(f"data file not found: {path}; check the path (the corpora that ship with zerollm "
                           f"lie in {corpora.HERE}: {shipped})")
    with open_regular(path, "rb", what="text file") as f:
        raw = f.read()
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as err:
        raise ZeroLLMError(f"{path} is not UTF-8 text: byte {raw[err.start]:#04x} at byte offset "
                           f"{err.start} cannot be decoded; {not_utf8_advice(raw[:4])}") from None
    if not text:
        raise ZeroLLMError(f"{path} is empty; give a file with some text in it")
    return text, hashlib.sha256(raw).hexdigest()


def split_counts(n_tokens, val_fraction, block_size):
    """(n_train, n_val): the first part trains, the last ``val_fraction`` validates; each part
    needs at least ``block_size + 1`` tokens (one input window plus its shifted target).

    >>> split_counts(1000, 0.1, 64)
    (900, 100)
    """
    n_val = int(round(n_tokens * val_fraction))
    n_train = n_tokens - n_val
    need = block_size + 1
    if n_train < need or n_val < need:
        raise ZeroLLMError(f"corpus too small: {n_tokens} tokens split into {n_train} train and {n_val} "
                           f"validation tokens, but each part needs at least block_size+1 = {need}; "
                           "use a longer text, a smaller --block-size, or a larger --val-fraction")
    return n_train, n_val


# ----------------------------------------------------------------------------
# prepare / load

def _check_options(val_fraction, block_size):
    if isinstance(block_size, bool) or not isinstance(block_size, int) or block_size < 1:
        raise ZeroLLMError(f"block_size must be a whole number >= 1, got {block_size!r}")
    if not 0 < val_fraction < 1:
        raise ZeroLLMError(f"val_fraction must be between 0 and 1 (e.g. 0.1), got {val_fraction!r}")


def _write_ids(path, ids):
    with atomic_write(path, "wb") as f:
        f.write(np.ascontiguousarray(ids).view(np.uint8))   # a full disk raises ENOSPC/EFBIG, not a short count


def prepare(data_file, out_dir, tokenizer="byte", vocab_size=None, val_fraction=0.1, block_size=64,
            force=None, announce=None, **tokenizer_options):
    """Tokenize ``data_file`` and write train.bin, val.bin, tokenizer.json, meta.json to ``out_dir``.

    The tokenizer is built from the whole text (so the char vocabulary covers the validation part
    too; in the docs mode, zerollm.io.docsmode, a BPE learns its merges from the text's start only).
    BPE recognises "<|endoftext|>" in the text as its special token (a document separator).
    The folder is built beside ``out_dir`` and swapped in when complete (zerollm.io.outdir), so a
    failure half-way (a full disk, Ctrl-C) leaves the previous ``out_dir`` untouched. ``announce`` (a
    callable, e.g. printing a progress line) is called once the text is known to be usable, before the
    slow part, so a file that is empty, not UTF-8 or too short is refused with the error alone. An existing
    ``out_dir`` is replaced only when it is empty or an earlier prepared folder. A text too large for
    the memory available is refused before it is read (zerollm.model.budget; force=True only warns).
    Returns the meta dict.
    """
    _check_options(val_fraction, block_size)
    check_separate(out_dir, [data_file], "--out", "--data")
    _check_replaceable(Path(out_dir))
    if os.path.isfile(data_file):
        budget.require(budget.tokenizing(os.path.getsize(data_file), hint="the size of --data (split the file)"),
                       force=force)
    text, sha = read_corpus(data_file)
    if announce is not None and tokenizer == "bpe":
        announce()                                   # learning merges is the slow part; it comes next
    learn_from = text[:docsmode.limit("BPE training characters", len(text))] if tokenizer == "bpe" else text
    tok = train_tokenizer(tokenizer, learn_from, vocab_size, **tokenizer_options)
    ids = tok.encode(text, allowed_special="all") if tok.name == "bpe" else tok.encode(text)
    dtype = token_dtype(tok.vocab_size)
    ids = np.asarray(ids, dtype=DTYPES[dtype])                       # (N,)
    n_train, n_val = split_counts(len(ids), val_fraction, block_size)
    if announce is not None and tokenizer != "bpe":
        announce()                                   # byte and char ids come at once; writing is next
    meta = {"format": META_FORMAT, "version": META_VERSION, "tokenizer": tok.name,
            "vocab_size": tok.vocab_size, "dtype": dtype, "train_tokens": n_train, "val_tokens": n_val,
            "block_size": block_size, "val_fraction": val_fraction,
            "source": {"file": Path(data_file).name, "sha256": sha, "characters": len(text)}}
    with atomic_dir(out_dir) as tmp:
        _check_replaceable(Path(out_dir))            # again, under the lock
        tmp = Path(tmp)
        _write_ids(tmp / "train.bin", ids[:n_train])
        _write_ids(tmp / "val.bin", ids[n_train:])
        tok.save(tokenizer_file(tmp))
        with atomic_write(tmp / "meta.json", "w") as f:
            f.write(utf8_json(lambda ascii_only: dumps_readable(meta, ascii_only)))
    return meta


PREPARED_FILES = {"train.bin", "val.bin", "tokenizer.json", "meta.json"}


def _check_replaceable(out):
    """A new or empty folder, or one that ``prepare`` wrote (only its four files, with its meta.json): never
    anything else. A tokenizer.json or meta.json of the user's own, alone in a folder, has the right name
    but was not written here, and replacing the folder would lose it."""
    if not out.exists():
        return
    if not out.is_dir():
        raise ZeroLLMError(f"--out {out} is a file; choose a folder path")
    names = set(os.listdir(out))
    others = sorted(names - PREPARED_FILES)
    if others:
        shown = ", ".join(others[:5]) + (" ..." if len(others) > 5 else "")
        raise ZeroLLMError(f"--out {out} holds other files ({shown}); prepare replaces the whole folder, so it "
                           "only writes to a new folder or an earlier prepared one: choose another --out")
    if names and not _written_by_prepare(out / "meta.json"):
        raise ZeroLLMError(f"--out {out} holds {', '.join(sorted(names))} but no meta.json that prepare wrote, so "
                           "they are not an earlier prepared folder; prepare replaces the whole folder: choose "
                           "another --out")


def _written_by_prepare(meta_path):
    try:
        with open_regular(meta_path, "r", encoding="utf-8") as f:
            meta = json.load(f)
    except (OSError, UnicodeDecodeError, ValueError):         # NotRegularFile is a ValueError
        return False
    return isinstance(meta, dict) and meta.get("format") == META_FORMAT


def _read_meta(folder):
    if not folder.is_dir():
        raise ZeroLLMError(f"prepared data folder not found: {folder}; create it with "
                           "'zerollm prepare --data FILE'")
    if not (folder / "meta.json").is_file():
        raise ZeroLLMError(f"{folder} has no meta.json, so it is not (completely) prepared; "
                           "run 'zerollm prepare --data FILE --out DIR' again")
    meta = read_json_file(folder / "meta.json", "meta.json")
    if meta.get("format") != META_FORMAT or meta.get("version") != META_VERSION:
        raise ZeroLLMError(f"{folder / 'meta.json'} is not zerollm data format {META_FORMAT} "
                           f"version {META_VERSION}; prepare the data again with this zerollm")
    where = folder / "meta.json"
    if meta.get("dtype") not in DTYPES:
        raise ZeroLLMError(f"{where}: unknown dtype {meta.get('dtype')!r}; run 'zerollm prepare' again")
    if meta.get("tokenizer") not in ("byte", "char", "bpe"):
        raise ZeroLLMError(f"{where}: tokenizer must be byte, char or bpe, got {meta.get('tokenizer')!r}; "
                           "run 'zerollm prepare' again")
    for key in ("vocab_size", "train_tokens", "val_tokens"):
        value = meta.get(key)
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ZeroLLMError(f"{where}: {key} must be a whole number >= 1, got {value!r}; "
                               "run 'zerollm prepare' again")
    return meta


def _open_ids(path, dtype, n):
    """Memory-map ``n`` ids of ``dtype``; a file of the wrong size is damaged (e.g. cut short)."""
    require_regular(path, "token file")
    if not path.is_file():
        raise ZeroLLMError(f"{path} is missing; run 'zerollm prepare' again")
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise ZeroLLMError(f"meta.json next to {path} has a bad token count {n!r}; run 'zerollm prepare' again")
    expected = n * DTYPES[dtype].itemsize
    if path.stat().st_size != expected:
        raise ZeroLLMError(f"{path} has {path.stat().st_size} bytes but meta.json says {n} {dtype} "
                           f"tokens ({expected} bytes); the data is damaged, run 'zerollm prepare' again")
    return np.memmap(path, dtype=DTYPES[dtype], mode="r", shape=(n,))


def load_prepared(folder):
    """(train, val, meta, tokenizer) of a folder written by ``prepare``; train/val are read-only
    memory maps of shape (N,)."""
    folder = Path(folder)
    meta = _read_meta(folder)
    train = _open_ids(folder / "train.bin", meta["dtype"], meta.get("train_tokens"))
    val = _open_ids(folder / "val.bin", meta["dtype"], meta.get("val_tokens"))
    tok = load_tokenizer(tokenizer_file(folder))
    if tok.vocab_size != meta.get("vocab_size"):
        raise ZeroLLMError(f"{folder}: tokenizer.json has vocab_size {tok.vocab_size} but meta.json "
                           f"says {meta.get('vocab_size')}; run 'zerollm prepare' again")
    return train, val, meta, tok


# ----------------------------------------------------------------------------
# batches

def get_batch(data, batch_size, block_size, rng):
    """B random windows of T+1 consecutive ids: x = window[:T], y = window[1:] (next tokens).

    Only ``rng`` (a np.random.Generator) decides the windows, so a saved generator state
    resumes training on exactly the same batches.

    >>> x, y = get_batch(np.arange(10), 2, 3, np.random.default_rng(0))
    >>> x.shape, bool((y == x + 1).all())
    ((2, 3), True)
    """
    for name, value in (("batch_size", batch_size), ("block_size", block_size)):
        if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
            raise ZeroLLMError(f"{name} must be a whole number >= 1, got {value!r}")
    if len(data) < block_size + 1:
        raise ZeroLLMError(f"only {len(data)} tokens, but a window of block_size={block_size} needs "
                           f"{block_size + 1}; use a smaller block_size or more data")
    starts = rng.integers(0, len(data) - block_size, size=batch_size)   # (B,)
    idx = starts[:, None] + np.arange(block_size + 1)                    # (B, T+1)
    window = np.asarray(data[idx]).astype(np.int64)                      # (B, T+1)
    return window[:, :-1].copy(), window[:, 1:].copy()                   # (B, T), (B, T)


# ----------------------------------------------------------------------------
# the `zerollm prepare` command

# --vocab-size is BPE's: its 256 byte tokens and at least one merge (byte is always 256, char the text's)
BPE_VOCAB = Range(int, 257, FIELD_RANGES["TrainConfig.vocab_size"].high)

def add_arguments(p):
    p.add_argument("--data", required=True, metavar="FILE", help="a UTF-8 text file")
    p.add_argument("--tokenizer", choices=("byte", "char", "bpe"), default="byte",
                   help="byte: 256 ids, no training; char: one id per distinct character; "
                        "bpe: byte-level BPE, needs --vocab-size (default byte)")
    p.add_argument("--vocab-size", type=BPE_VOCAB, metavar="N",
                   help=f"BPE vocabulary size, e.g. 1024: from {BPE_VOCAB.low} (the 256 bytes and at least one "
                        f"merge) to {BPE_VOCAB.high}")
    p.add_argument("--pattern", choices=("gpt2", "gpt4"), help="BPE pre-split regex (default gpt4)")
    p.add_argument("--out", metavar="DIR",
                   help="output folder (default ./data/<FILE stem>-<tokenizer>, e.g. data/input-char)")
    p.add_argument("--block-size", type=FIELD_RANGES["block_size"], default=64, metavar="N",
                   help="context length you will train with; each split needs N+1 tokens (default 64)")
    p.add_argument("--val-fraction", type=FRACTION, default=0.1, metavar="F",
                   help="the last F of the tokens become validation data (default 0.1)")
    budget.add_force_argument(p)


def run(args):
    options = {}
    if args.pattern is not None:
        if args.tokenizer != "bpe":
            raise ZeroLLMError("--pattern only applies to --tokenizer bpe")
        options["pattern"] = args.pattern
    out = args.out or os.path.join("data", f"{Path(args.data).stem}-{args.tokenizer}")
    # a run's own data/ (or anything inside a run, checkpoint or model) is that run's: replacing it would
    # change what --resume trains on, silently with the same tokenizer (train prepares RUN/data itself)
    check_outside_runs(out)
    meta = prepare(args.data, out, args.tokenizer, args.vocab_size, args.val_fraction,
                   args.block_size, force=args.force, **options)
    total = meta["train_tokens"] + meta["val_tokens"]
    print(f"read {args.data}: {meta['source']['characters']:,} characters")
    print(f"tokenizer {meta['tokenizer']}: vocab_size {meta['vocab_size']:,}")
    print(f"tokens {total:,} = train {meta['train_tokens']:,} + val {meta['val_tokens']:,} "
          f"({meta['dtype']}, {total / meta['source']['characters']:.3f} tokens per character)")
    print(f"wrote {out}/: train.bin val.bin tokenizer.json meta.json")
    return 0
