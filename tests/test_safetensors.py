"""zerollm.io.safetensors: round trips, interop with the reference package and torch, bad files."""

import json

import numpy as np
import pytest
import safetensors.numpy
import safetensors.torch
import torch
from safetensors import safe_open

from zerollm.io import safetensors as st
from zerollm.io.errors import ZeroLLMError

DTYPES = [np.float64, np.float32, np.float16, np.int64, np.int32, np.int16, np.int8,
          np.uint64, np.uint32, np.uint16, np.uint8, np.bool_]
SHAPES = [(), (0,), (3, 0, 2), (5,), (2, 3, 4)]


def make(dtype, shape, seed=0):
    rng = np.random.default_rng(seed)
    if dtype == np.bool_:
        return rng.random(shape) < 0.5
    if np.issubdtype(dtype, np.integer):
        info = np.iinfo(dtype)
        return rng.integers(info.min, info.max, size=shape, dtype=dtype, endpoint=True)
    return rng.standard_normal(shape).astype(dtype)


def raw_file(path, header, data=b"", pad=True):
    """Write a safetensors file byte by byte, so tests can corrupt any part of it."""
    h = json.dumps(header).encode()
    h += b" " * (-len(h) % 8) if pad else b""
    path.write_bytes(len(h).to_bytes(8, "little") + h + data)
    return path


# ----------------------------------------------------------------------------
# round trips

@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("shape", SHAPES, ids=str)
@pytest.mark.parametrize("mmap", [False, True])
def test_round_trip_every_dtype_and_shape(tmp_path, dtype, shape, mmap):
    a = make(dtype, shape)
    st.save_file({"x": a, "y": a[..., ::-1] if a.ndim else a}, tmp_path / "t.safetensors")
    got = st.load_file(tmp_path / "t.safetensors", mmap=mmap)
    assert list(got) == ["x", "y"]
    assert got["x"].dtype == a.dtype and got["x"].shape == a.shape
    np.testing.assert_array_equal(got["x"], a)
    np.testing.assert_array_equal(got["y"], a[..., ::-1] if a.ndim else a)   # non-contiguous input
    assert got["x"].flags.writeable != mmap


def test_layout_is_sorted_contiguous_and_aligned(tmp_path):
    path = tmp_path / "t.safetensors"
    st.save_file({"b": np.zeros(3, np.float32), "a": np.zeros(2, np.int8), "c": np.zeros((), np.float64)},
                 path, metadata={"名字": "小模型"})
    raw = path.read_bytes()
    n = int.from_bytes(raw[:8], "little")
    assert n % 8 == 0 and raw[8 + n - 1:8 + n] in (b" ", b"}")
    header = st.read_header(path)
    assert [(k, v["data_offsets"]) for k, v in header.items() if k != "__metadata__"] == [
        ("a", [0, 2]), ("b", [2, 14]), ("c", [14, 22])]
    assert len(raw) == 8 + n + 22
    assert st.load_metadata(path) == {"名字": "小模型"}


def test_big_endian_input_is_written_little_endian(tmp_path):
    a = np.arange(4, dtype=">i4")
    st.save_file({"a": a}, tmp_path / "t.safetensors")
    assert (tmp_path / "t.safetensors").read_bytes()[-16:] == np.arange(4, dtype="<i4").tobytes()
    np.testing.assert_array_equal(st.load_file(tmp_path / "t.safetensors")["a"], a)


# ----------------------------------------------------------------------------
# interop with the reference implementation (safetensors package) and torch

def test_reference_reads_our_files(tmp_path):
    tensors = {f"t{i}": make(d, (2, 3), seed=i) for i, d in enumerate(DTYPES)}
    tensors["empty"], tensors["scalar"] = np.zeros((0, 5), np.float32), np.array(2.5, np.float32)
    st.save_file(tensors, tmp_path / "ours.safetensors", metadata={"format": "np", "step": "12"})
    theirs = safetensors.numpy.load_file(tmp_path / "ours.safetensors")
    assert set(theirs) == set(tensors)
    for name, a in tensors.items():
        assert theirs[name].dtype == a.dtype and theirs[name].shape == a.shape, name
        np.testing.assert_array_equal(theirs[name], a, err_msg=name)
    with safe_open(tmp_path / "ours.safetensors", "np") as f:
        assert f.metadata() == {"format": "np", "step": "12"}


def test_we_read_reference_files(tmp_path):
    tensors = {f"t{i}": make(d, (3, 2), seed=i) for i, d in enumerate(DTYPES)}
    tensors["scalar"] = np.array(7, np.int64)
    safetensors.numpy.save_file(tensors, tmp_path / "ref.safetensors", metadata={"k": "v"})
    ours = st.load_file(tmp_path / "ref.safetensors")
    assert set(ours) == set(tensors)
    for name, a in tensors.items():
        assert ours[name].dtype == a.dtype, name
        np.testing.assert_array_equal(ours[name], a, err_msg=name)
    assert st.load_metadata(tmp_path / "ref.safetensors") == {"k": "v"}


def test_bf16_matches_torch_both_ways(tmp_path):
    x = np.random.default_rng(1).standard_normal(20_000).astype(np.float32) * 10.0 ** np.arange(-10, 10).repeat(1000)
    # ties (exactly half-way between two bfloat16 values) must round to even, like torch
    x[:4] = [1 + 2 ** -8, 1 + 3 * 2 ** -8, -(1 + 2 ** -8), 3.4e38]
    t = torch.from_numpy(x).to(torch.bfloat16)
    st.save_file({"w": x}, tmp_path / "ours.safetensors", bf16=True)
    assert st.read_header(tmp_path / "ours.safetensors")["w"]["dtype"] == "BF16"
    theirs = safetensors.torch.load_file(tmp_path / "ours.safetensors")["w"]
    assert theirs.dtype == torch.bfloat16
    assert torch.equal(theirs, t)
    # the other way: torch writes bfloat16, we read float32 holding exactly those values
    safetensors.torch.save_file({"w": t}, tmp_path / "torch.safetensors")
    got = st.load_file(tmp_path / "torch.safetensors")["w"]
    assert got.dtype == np.float32
    np.testing.assert_array_equal(got, t.float().numpy())
    assert got[0] == 1.0 and got[1] == 1 + 2 ** -6 and got[3] == np.inf


def test_bf16_special_values():
    x = np.array([np.nan, np.inf, -np.inf, -0.0, 0.0], np.float32)
    back = st.bf16_to_f32(st.f32_to_bf16(x))
    assert np.isnan(back[0])
    np.testing.assert_array_equal(back[1:], x[1:])
    assert np.signbit(back[3]) and not np.signbit(back[4])


# ----------------------------------------------------------------------------
# bad files and bad inputs -> ZeroLLMError that says what happened

GOOD = {"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]}}


@pytest.mark.parametrize("header, data, words", [
    ({"a": {"dtype": "Q8", "shape": [2], "data_offsets": [0, 8]}}, bytes(8), "unknown dtype"),
    ({"a": {"dtype": "F32", "shape": [3], "data_offsets": [0, 8]}}, bytes(8), "needs 12 bytes"),
    ({"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 16]}}, bytes(8), "outside"),
    ({"a": {"dtype": "F32", "shape": [2], "data_offsets": [4, 12]}}, bytes(12), "belong to no tensor"),
    ({**GOOD, "b": {"dtype": "F32", "shape": [1], "data_offsets": [4, 8]}}, bytes(8), "overlaps"),
    (GOOD, bytes(12), "trailing"),
    ({"a": {"dtype": "F32", "shape": [-2], "data_offsets": [0, 8]}}, bytes(8), "non-negative"),
    ({"a": {"dtype": "F32", "shape": [2]}}, bytes(8), "data_offsets"),
    ({**GOOD, "__metadata__": {"n": 3}}, bytes(8), "str -> str"),
    ([1, 2], b"", "JSON object"),
])
def test_corrupt_headers(tmp_path, header, data, words):
    path = raw_file(tmp_path / "bad.safetensors", header, data)
    with pytest.raises(ZeroLLMError, match=words) as err:
        st.load_file(path)
    assert "bad.safetensors" in str(err.value)


@pytest.mark.parametrize("content, words", [
    (b"", "too short"),
    (b"\x10\x00", "too short"),
    ((10 ** 9).to_bytes(8, "little") + b"{}", "impossible"),
    ((200 * 10 ** 6).to_bytes(8, "little") + b"{" + bytes(20), "impossible"),
    ((7).to_bytes(8, "little") + b'{"a":1,', "not valid JSON"),
    ((2).to_bytes(8, "little") + b"\xff\xfe", "not valid JSON"),
    ((200_000).to_bytes(8, "little") + b"[" * 100_000 + b"]" * 100_000, "not valid JSON"),   # RecursionError
    (b"PK\x03\x04" + bytes(100), "PyTorch pickle"),
    (b"\x80\x02\x8a\x0alz\xfc\x9cF\xf9 j\xa8" + bytes(50), "PyTorch pickle"),
])
def test_not_safetensors_at_all(tmp_path, content, words):
    (tmp_path / "f.bin").write_bytes(content)
    with pytest.raises(ZeroLLMError, match=words):
        st.load_file(tmp_path / "f.bin")


def test_real_torch_save_file_is_recognised(tmp_path):
    torch.save({"w": torch.zeros(3)}, tmp_path / "pytorch_model.bin")
    with pytest.raises(ZeroLLMError, match="can run code; convert it once with") as err:
        st.read_header(tmp_path / "pytorch_model.bin")
    assert "weights_only=True" in str(err.value)


def test_truncated_file(tmp_path):
    st.save_file({"w": np.ones((4, 4), np.float32)}, tmp_path / "t.safetensors")
    raw = (tmp_path / "t.safetensors").read_bytes()
    (tmp_path / "t.safetensors").write_bytes(raw[:-5])
    with pytest.raises(ZeroLLMError, match="truncated"):
        st.load_file(tmp_path / "t.safetensors")


def test_missing_file(tmp_path):
    with pytest.raises(ZeroLLMError, match="not found"):
        st.load_file(tmp_path / "nope.safetensors")


@pytest.mark.parametrize("tensors, kwargs, words", [
    ({"a": np.array(["x"])}, {}, "cannot be stored"),
    ({"a": np.zeros(2, np.complex64)}, {}, "cannot be stored"),
    ({"__metadata__": np.zeros(2)}, {}, "not allowed"),
    ({3: np.zeros(2)}, {}, "not allowed"),
    ({"a": np.zeros(2)}, {"metadata": {"step": 3}}, "str -> str"),
    ({"a": np.zeros(2, np.int32)}, {"bf16": ["a"]}, "only float"),
    ({"a": np.zeros(2)}, {"bf16": ["b"]}, "not among"),
    ([np.zeros(2)], {}, "dict"),
])
def test_bad_inputs_to_save(tmp_path, tensors, kwargs, words):
    with pytest.raises(ZeroLLMError, match=words):
        st.save_file(tensors, tmp_path / "t.safetensors", **kwargs)
    assert list(tmp_path.iterdir()) == []   # nothing half-written


# ----------------------------------------------------------------------------
# atomicity

def test_failed_save_leaves_old_file_intact(tmp_path, monkeypatch):
    path = tmp_path / "model.safetensors"
    st.save_file({"w": np.ones(3, np.float32)}, path)
    before = path.read_bytes()

    def explode(a, *args, **kwargs):      # fail after the header was written, mid-data
        raise OSError("disk full")
    monkeypatch.setattr(st.np, "ascontiguousarray", explode)
    with pytest.raises(OSError, match="disk full"):
        st.save_file({"w": np.zeros(1000, np.float32)}, path)
    assert path.read_bytes() == before
    assert [p.name for p in tmp_path.iterdir()] == ["model.safetensors"]   # no temp file left
