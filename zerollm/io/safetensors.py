"""The safetensors file format, read and written with NumPy alone.

A ``.safetensors`` file (Hugging Face, https://github.com/huggingface/safetensors) is:

    [8 bytes]  N, the header length, unsigned 64-bit little-endian
    [N bytes]  JSON header, padded with spaces to a multiple of 8:
               {"wte.weight": {"dtype": "F32", "shape": [V, C], "data_offsets": [0, 4*V*C]},
                ...,
                "__metadata__": {"format": "np"}}           # optional, str -> str only
    [rest]     the raw little-endian bytes of every tensor, back to back;
               data_offsets are relative to the start of this section

Unlike pickle (PyTorch's ``.bin``/``.pt``), loading it only copies numbers: it can never run
code. That is why zerollm reads and writes nothing else for weights.

NumPy has no bfloat16, so BF16 tensors are read as float32 (exactly: a bfloat16 is the top
16 bits of a float32) and written from float32 by rounding to the nearest even bfloat16.
"""

import json
import math
import mmap as _mmap
import os
from typing import NamedTuple

import numpy as np

from zerollm.io.errors import ZeroLLMError
from zerollm.io.fileio import atomic_write, open_regular, require_regular

# safetensors dtype name -> little-endian NumPy dtype (BF16 is stored as its raw uint16 bits)
DTYPES = {
    "F64": np.dtype("<f8"), "F32": np.dtype("<f4"), "F16": np.dtype("<f2"), "BF16": np.dtype("<u2"),
    "I64": np.dtype("<i8"), "I32": np.dtype("<i4"), "I16": np.dtype("<i2"), "I8": np.dtype("i1"),
    "U64": np.dtype("<u8"), "U32": np.dtype("<u4"), "U16": np.dtype("<u2"), "U8": np.dtype("u1"),
    "BOOL": np.dtype("?"),
}
# NumPy dtype -> safetensors name, for writing (uint16 means U16; BF16 is asked for explicitly)
_NAMES = {dt.newbyteorder("="): name for name, dt in DTYPES.items() if name != "BF16"}

MAX_HEADER = 100_000_000    # the reference implementation refuses headers over 100 MB too
_CONVERT = ("convert it once with: python -c \"import torch; from safetensors.torch import save_file; "
            "sd = torch.load('FILE', map_location='cpu', weights_only=True); "
            "save_file({k: v.clone().contiguous() for k, v in sd.items()}, 'model.safetensors')\"")


# ----------------------------------------------------------------------------
# bfloat16 <-> float32

def bf16_to_f32(bits):
    """uint16 bfloat16 bit patterns -> float32: put the 16 bits on top, zeros below (exact).

    >>> bf16_to_f32(np.array([0x3F80, 0xC000], dtype=np.uint16))
    array([ 1., -2.], dtype=float32)
    """
    return (np.asarray(bits, dtype=np.uint16).astype(np.uint32) << 16).view(np.float32)


def f32_to_bf16(x):
    """float32 -> uint16 bfloat16 bits, rounding to nearest, ties to even (like torch).

    Adding 0x7FFF plus the lowest kept bit, then dropping 16 bits, rounds up exactly when the
    dropped half is > 0x8000, or == 0x8000 with an odd kept part. NaN stays a (quiet) NaN.

    >>> f32_to_bf16(np.array([1.0, 1.00390625], dtype=np.float32))   # 1 + 2**-8 is a tie -> even
    array([16256, 16256], dtype=uint16)
    """
    x = np.asarray(x, dtype=np.float32)
    bits = x.view(np.uint32).astype(np.uint64)   # u64: the +0x7FFF must not wrap around
    rounded = ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16).astype(np.uint16)
    return np.where(np.isnan(x), np.uint16(0x7FC0), rounded)


# ----------------------------------------------------------------------------
# writing

def _check_tensors(tensors, bf16):
    out = {}
    for name, value in tensors.items():
        if not isinstance(name, str) or name == "__metadata__":
            raise ZeroLLMError(f"tensor name {name!r} is not allowed; use a str other than '__metadata__'")
        a = np.asarray(value)
        if name in bf16:
            if not np.issubdtype(a.dtype, np.floating):
                raise ZeroLLMError(f"{name}: only float tensors can be stored as BF16, got {a.dtype}")
            out[name] = ("BF16", f32_to_bf16(a.astype(np.float32)))
            continue
        st = _NAMES.get(a.dtype.newbyteorder("="))
        if st is None:
            raise ZeroLLMError(f"{name}: dtype {a.dtype} cannot be stored in safetensors; convert it, "
                               f"e.g. .astype(np.float32) (supported: {', '.join(DTYPES)})")
        out[name] = (st, a)
    return out


def _bf16_names(tensors, bf16):
    if bf16 is True:
        return {n for n, a in tensors.items() if np.issubdtype(np.asarray(a).dtype, np.floating)}
    names = {bf16} if isinstance(bf16, str) else set(bf16 or ())
    unknown = sorted(names - set(tensors))
    if unknown:
        raise ZeroLLMError(f"bf16 names {unknown} are not among the tensors being saved; check the spelling")
    return names


def _check_metadata(metadata):
    metadata = {} if metadata is None else metadata
    if not isinstance(metadata, dict) or not all(
            isinstance(k, str) and isinstance(v, str) for k, v in metadata.items()):
        raise ZeroLLMError("safetensors metadata must be a dict of str -> str; "
                           "encode other values with str() or json.dumps()")
    return metadata


def _header_bytes(entries, metadata):
    header = {"__metadata__": metadata} if metadata else {}
    offset = 0
    for name in sorted(entries):
        st, a = entries[name]
        header[name] = {"dtype": st, "shape": list(a.shape), "data_offsets": [offset, offset + a.nbytes]}
        offset += a.nbytes
    raw = json.dumps(header, ensure_ascii=False, separators=(",", ":")).encode("utf-8")
    return raw + b" " * (-len(raw) % 8)    # pad so the data starts 8-byte aligned


def save_file(tensors, path, metadata=None, *, bf16=()):
    """Write ``{name: array}`` to ``path`` as safetensors, atomically, in sorted-name order.

    ``bf16``: names of float tensors to store as bfloat16 (True = every float tensor); float64
    is rounded to float32 first, then to bfloat16 (as torch's ``.to(torch.bfloat16)`` does).

    >>> save_file({"w": np.ones((2, 3), np.float32)}, "tiny.safetensors", {"step": "7"})  # doctest: +SKIP
    """
    if not isinstance(tensors, dict):
        raise ZeroLLMError(f"save_file needs a dict of name -> array, got {type(tensors).__name__}")
    entries = _check_tensors(tensors, _bf16_names(tensors, bf16))
    header = _header_bytes(entries, _check_metadata(metadata))
    with atomic_write(path, "wb") as f:
        f.write(len(header).to_bytes(8, "little"))
        f.write(header)
        for name in sorted(entries):
            a = entries[name][1]
            a = np.ascontiguousarray(a, dtype=a.dtype.newbyteorder("<"))
            f.write(a.reshape(-1).view(np.uint8))   # no extra copy of big weights


# ----------------------------------------------------------------------------
# reading the header

def _looks_like_pickle(head):
    # torch.save writes a zip archive (magic "PK\x03\x04") since PyTorch 1.6, and a bare pickle
    # (opcode PROTO 0x80 then protocol 2..5) before that.
    return head[:4] == b"PK\x03\x04" or (head[:1] == b"\x80" and 2 <= head[1] <= 5)


def _read_raw_header(f, path, size):
    head = f.read(8)
    if len(head) < 8:
        raise ZeroLLMError(f"{path} is too short ({size} bytes) to be a safetensors file; "
                           "it is empty or truncated: save or download it again")
    n = int.from_bytes(head[:8], "little")
    pickled = ZeroLLMError(f"{path}: this is a PyTorch pickle file; zerollm only reads safetensors "
                           f"because loading pickle can run code; {_CONVERT.replace('FILE', path)}")
    if n > size - 8 or n > MAX_HEADER:
        if _looks_like_pickle(head):
            raise pickled
        raise ZeroLLMError(f"{path}: header length {n} is impossible for a {size}-byte file "
                           "(limit 100 MB); this is not a safetensors file or it is truncated")
    f.seek(8)
    try:
        header = json.loads(f.read(n).decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError, RecursionError) as err:
        if _looks_like_pickle(head):
            raise pickled from None
        raise ZeroLLMError(f"{path}: the safetensors header is not valid JSON ({err}); "
                           "the file is damaged or not safetensors: save or download it again") from None
    if not isinstance(header, dict):
        raise ZeroLLMError(f"{path}: the safetensors header must be a JSON object")
    return header, 8 + n


def _counts(xs):
    """A JSON list of non-negative ints (bool is an int in Python, so it is excluded by type)."""
    return isinstance(xs, list) and all(type(x) is int and x >= 0 for x in xs)


def _check_entry(path, name, info, data_len):
    if not isinstance(info, dict) or set(info) != {"dtype", "shape", "data_offsets"}:
        raise ZeroLLMError(f"{path}: tensor {name!r} needs exactly dtype, shape and data_offsets")
    dtype, shape, offsets = info["dtype"], info["shape"], info["data_offsets"]
    if dtype not in DTYPES:
        raise ZeroLLMError(f"{path}: tensor {name!r} has unknown dtype {dtype!r}; zerollm reads "
                           f"{', '.join(DTYPES)}: convert the file to one of them")
    if not _counts(shape) or not _counts(offsets) or len(offsets) != 2:
        raise ZeroLLMError(f"{path}: tensor {name!r}: shape and data_offsets must be lists of "
                           f"non-negative ints, got {shape!r} and {offsets!r}")
    begin, end = offsets
    if not begin <= end <= data_len:
        raise ZeroLLMError(f"{path}: tensor {name!r} has data_offsets {offsets} outside the "
                           f"{data_len}-byte data section; the file is truncated or damaged")
    nbytes = math.prod(shape) * DTYPES[dtype].itemsize   # Python ints: no overflow on absurd shapes
    if nbytes != end - begin:
        raise ZeroLLMError(f"{path}: tensor {name!r} of shape {shape} and dtype {dtype} needs "
                           f"{nbytes} bytes but data_offsets "
                           f"{offsets} give {end - begin}; the file is damaged")


def _check_layout(path, tensors, data_len):
    """The tensors must tile the data section exactly: no overlaps, no gaps, nothing extra."""
    pos = 0
    for name, info in sorted(tensors.items(), key=lambda kv: kv[1]["data_offsets"]):
        begin, end = info["data_offsets"]
        if begin < pos:
            raise ZeroLLMError(f"{path}: tensor {name!r} overlaps the previous tensor "
                               f"(starts at byte {begin} < {pos}); the file is damaged")
        if begin > pos:
            raise ZeroLLMError(f"{path}: bytes {pos}..{begin} of the data belong to no tensor; "
                               "the file is damaged")
        pos = end
    if pos != data_len:
        raise ZeroLLMError(f"{path}: the header describes {pos} bytes of data but the file holds "
                           f"{data_len}; the file is truncated or has trailing bytes")


def _open_checked(path):
    """Return (open file, header, byte offset of the data) after validating everything."""
    path = os.fspath(path)
    require_regular(path, "safetensors file")
    if not os.path.isfile(path):
        raise ZeroLLMError(f"safetensors file not found: {path}; check the path")
    f = open_regular(path, "rb", what="safetensors file")
    try:
        size = os.fstat(f.fileno()).st_size         # of the file opened, not of what the name meant before
        header, start = _read_raw_header(f, path, size)
        metadata = header.get("__metadata__", {})
        if not isinstance(metadata, dict) or not all(isinstance(v, str) for v in metadata.values()):
            raise ZeroLLMError(f"{path}: __metadata__ must map str -> str; the file is damaged")
        tensors = {k: v for k, v in header.items() if k != "__metadata__"}
        for name, info in tensors.items():
            _check_entry(path, name, info, size - start)
        _check_layout(path, tensors, size - start)
    except BaseException:
        f.close()
        raise
    return f, header, start


def read_header(path):
    """The validated JSON header: {name: {"dtype", "shape", "data_offsets"}, "__metadata__": ...}.

    Reads only the header, so it is instant even for multi-GB files.
    """
    f, header, _ = _open_checked(path)
    f.close()
    return header


def load_metadata(path):
    """The ``__metadata__`` dict (str -> str) of a safetensors file; {} when it has none."""
    return dict(read_header(path).get("__metadata__", {}))


# ----------------------------------------------------------------------------
# reading the tensors

def _to_native(dtype, raw):
    if dtype == "BF16":
        return bf16_to_f32(raw)
    return raw.astype(raw.dtype.newbyteorder("="), copy=False)   # no-op on little-endian CPUs


def load_file(path, mmap=False):
    """Read every tensor of a safetensors file into ``{name: np.ndarray}`` (BF16 -> float32).

    mmap=False copies each tensor into its own writable array. mmap=True maps the file instead:
    nothing is read until used and the arrays are read-only views (BF16 is still converted).

    >>> load_file("tiny.safetensors")["w"].shape   # doctest: +SKIP
    (2, 3)
    """
    f, header, start = _open_checked(path)
    tensors = {k: v for k, v in header.items() if k != "__metadata__"}
    out = {}
    with f:
        mm = _mmap.mmap(f.fileno(), 0, access=_mmap.ACCESS_READ) if mmap else None
        for name in sorted(tensors, key=lambda k: tensors[k]["data_offsets"]):
            info = tensors[name]
            dt, (begin, end) = DTYPES[info["dtype"]], info["data_offsets"]
            if mm is not None:
                raw = np.frombuffer(mm, dtype=dt, count=(end - begin) // dt.itemsize, offset=start + begin)
            else:
                raw = np.empty((end - begin) // dt.itemsize, dtype=dt)
                f.seek(start + begin)
                if f.readinto(raw.view(np.uint8)) != end - begin:
                    raise ZeroLLMError(f"{path}: could not read tensor {name!r}; the file changed "
                                       "while reading, try again")
            out[name] = _to_native(info["dtype"], raw).reshape(info["shape"])
    return {name: out[name] for name in sorted(out)}


# ----------------------------------------------------------------------------
# reading a big file a block of rows at a time

class StoredTensor(NamedTuple):
    """One tensor of a checked safetensors file, not read yet (``tensor_index``). ``rows`` reads a block of
    it, so that a caller can copy a checkpoint into its own arrays without ever holding the whole file
    in memory as well (nor its BF16 tensors converted to float32 all at once)."""
    path: str
    name: str           # its name in the file ("model.layers.0.self_attn.q_proj.weight")
    dtype: str          # the safetensors name: "BF16", "F32", ...
    shape: tuple
    offset: int         # byte offset of its data in the file

    @property
    def ndim(self):
        return len(self.shape)

    def rows(self, r0, r1):
        """Rows r0..r1-1 along the first axis as a native array (BF16 -> float32); one read of the file."""
        dt = DTYPES[self.dtype]
        per_row = math.prod(self.shape[1:])
        raw = np.empty((r1 - r0) * per_row, dtype=dt)
        with open_regular(self.path, "rb", what="safetensors file") as f:
            f.seek(self.offset + r0 * per_row * dt.itemsize)
            if f.readinto(raw.view(np.uint8)) != raw.nbytes:
                raise ZeroLLMError(f"{self.path}: could not read a tensor; the file changed while reading, "
                                   "try again")
        return _to_native(self.dtype, raw).reshape((r1 - r0,) + tuple(self.shape[1:]))


def tensor_index(path):
    """{name: StoredTensor} of every tensor of a safetensors file (header checked as load_file checks it)."""
    f, header, start = _open_checked(path)
    f.close()
    return {name: StoredTensor(os.fspath(path), name, info["dtype"], tuple(info["shape"]), start + info["data_offsets"][0])
            for name, info in sorted(header.items()) if name != "__metadata__"}
