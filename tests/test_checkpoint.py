"""zerollm.training.checkpoint: exact round trip and resume, pruning, recovery after interrupted saves."""

import hashlib
import json
import os
import shutil
import tracemalloc

import numpy as np
import pytest

from zerollm.training import checkpoint as ckpt
from zerollm.training.checkpoint import Snapshot, latest_checkpoint, load_checkpoint, save_checkpoint
from zerollm.io.errors import ZeroLLMError
from zerollm.training.optim import AdamW

MODEL_CONFIG = {"vocab_size": 256, "n_layer": 1, "n_embd": 8, "norm": "layernorm"}
TRAIN_CONFIG = {"lr": 1e-3, "batch_size": 4, "out": "运行"}


class Run:
    """A stand-in for a training loop: parameters, AdamW, a data RNG and a tokenizer file."""

    def __init__(self, tmp_path, dtype=np.float32, seed=0):
        rng = np.random.default_rng(seed)
        self.params = {"wte.weight": rng.standard_normal((16, 8)).astype(dtype),
                       "h.0.mlp.c_fc.bias": rng.standard_normal(32).astype(dtype),
                       "scale": np.array(1.5, dtype)}
        self.opt = AdamW(self.params, lr=1e-2, weight_decay=0.1)
        self.rng = np.random.default_rng(seed + 1)
        self.tokenizer = tmp_path / "tokenizer.json"
        self.tokenizer.write_text(json.dumps({"format": "zerollm-tokenizer", "version": 1, "type": "byte"}))
        self.dir = tmp_path / "run"

    def train(self, n):
        for _ in range(n):   # the gradients come from the data RNG, like batches would
            self.opt.step({k: self.rng.standard_normal(p.shape).astype(p.dtype)
                           for k, p in self.params.items()})

    def save(self, step=None, keep=2, **fields):
        """save_checkpoint of this run; ``fields``: the Snapshot's extra, tokenizer_path, objective..."""
        step = self.opt.step_count if step is None else step
        fields.setdefault("extra", {"best_val_loss": 2.5, "history": [3.0, 2.5]})
        fields.setdefault("tokenizer_path", self.tokenizer)
        return save_checkpoint(self.dir, Snapshot(step=step, model_config=MODEL_CONFIG, train_config=TRAIN_CONFIG,
                                                  params=self.params, optimizer_state=self.opt.state_dict(),
                                                  rng_state=self.rng.bit_generator.state, **fields), keep=keep)

    def snapshot(self):
        return {k: p.copy() for k, p in self.params.items()}


def assert_same_arrays(a, b):
    assert a.keys() == b.keys()
    for k in a:
        assert a[k].dtype == b[k].dtype and a[k].shape == b[k].shape, k
        np.testing.assert_array_equal(a[k], b[k], err_msg=k)


def entries(path):
    return sorted(os.listdir(path))


# ----------------------------------------------------------------------------
# round trip and exact resume

@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_round_trip_and_identical_continuation(tmp_path, dtype):
    run = Run(tmp_path, dtype)
    run.train(3)
    path = run.save()
    assert path == os.path.join(run.dir, "step-0000003")
    assert entries(path) == ["config.json", "model.safetensors", "optimizer.safetensors",
                             "rng.json", "state.json", "tokenizer.json"]
    ck = load_checkpoint(run.dir)
    assert (ck.step, ck.path, ck.extra) == (3, path, {"best_val_loss": 2.5, "history": [3.0, 2.5]})
    assert ck.model_config == MODEL_CONFIG and ck.train_config == TRAIN_CONFIG
    assert ck.tokenizer_kind == "byte"
    assert open(ck.tokenizer_path).read() == run.tokenizer.read_text()
    assert_same_arrays(ck.params, run.params)
    assert_same_arrays(ck.optimizer_state["m"], run.opt.m)
    assert_same_arrays(ck.optimizer_state["v"], run.opt.v)

    # resume: new arrays, new optimizer, new RNG, all from the checkpoint
    resumed = Run(tmp_path, dtype, seed=99)
    resumed.params.update(ck.params)
    resumed.opt = AdamW(resumed.params)
    resumed.opt.load_state_dict(ck.optimizer_state)
    resumed.rng = np.random.default_rng()
    resumed.rng.bit_generator.state = ck.rng_state
    run.train(4)
    resumed.train(4)
    assert_same_arrays(resumed.params, run.params)            # bit-identical after resuming
    assert resumed.rng.random() == run.rng.random()


def test_load_step_dir_directly_and_without_optimizer(tmp_path):
    run = Run(tmp_path)
    run.train(1)
    first = run.save()
    run.train(1)
    run.save(tokenizer_path=None)
    ck = load_checkpoint(first, optimizer=False)
    assert ck.step == 1 and ck.optimizer_state is None and ck.tokenizer_kind == "byte"
    latest = load_checkpoint(run.dir)
    assert latest.step == 2 and latest.tokenizer_path is None and latest.tokenizer_kind is None
    assert latest.optimizer_state["step"] == 2 and latest.optimizer_state["betas"] == [0.9, 0.999]


@pytest.mark.parametrize("content, kind", [
    ('{"format": "zerollm-tokenizer", "version": 1, "type": "char", "chars": ["a"]}', "char"),
    ('{"format": "something-else", "version": 1, "type": "byte"}', None),     # not zerollm's format
    ('{"model": {"type": "BPE", "vocab": {}, "merges": []}, "type": "byte"}', None),  # Hugging Face's form
    ('{"type": "byte", ', None),                                               # damaged: still copied
])
def test_the_recorded_tokenizer_kind_is_the_readers(tmp_path, content, kind):
    """config.json's "tokenizer" is what zerollm.tokenizers' one reader makes of the copied file, not any
    "type" key: opening the step checks the tokenizer against it."""
    run = Run(tmp_path)
    run.tokenizer.write_text(content, encoding="utf-8")
    ck = load_checkpoint(run.save(step=1))
    assert ck.tokenizer_kind == kind
    assert open(ck.tokenizer_path, encoding="utf-8").read() == content


def test_generator_accepted_as_rng_state(tmp_path):
    run = Run(tmp_path)
    path = save_checkpoint(run.dir, Snapshot(step=0, model_config={}, train_config={}, params=run.params,
                                             optimizer_state=run.opt.state_dict(), rng_state=run.rng,
                                             tokenizer_path=None))
    assert load_checkpoint(path).rng_state == run.rng.bit_generator.state


# ----------------------------------------------------------------------------
# pruning and the latest pointer

@pytest.mark.parametrize("keep", [1, 2, 3])
def test_keep_newest(tmp_path, keep):
    run = Run(tmp_path)
    for step in (100, 200, 300, 400, 500):
        run.save(step, keep=keep)
    expected = [f"step-{s:07d}" for s in (100, 200, 300, 400, 500)][-keep:]
    assert entries(run.dir) == ["latest.json"] + expected
    assert json.loads((run.dir / "latest.json").read_text()) == {"step": 500, "dir": "step-0000500"}


def test_saving_same_step_again_replaces_it(tmp_path):
    run = Run(tmp_path)
    run.save(10)
    run.params["scale"][...] = 42.0
    run.save(10)
    assert entries(run.dir) == ["latest.json", "step-0000010"]
    assert load_checkpoint(run.dir).params["scale"] == 42.0


def test_prune_leaves_newer_dirs_of_an_abandoned_branch(tmp_path):
    run = Run(tmp_path)
    for step in (100, 200, 300):
        run.save(step, keep=5)
    run.save(250, keep=2)   # resumed from step 200: 300 is not ours to delete, 100 is too old
    assert entries(run.dir) == ["latest.json", "step-0000200", "step-0000250", "step-0000300"]
    assert load_checkpoint(run.dir).step == 250


@pytest.mark.parametrize("damage", ["missing", "deleted_dir", "garbage", "traversal", "incomplete_dir"])
def test_recovery_when_latest_json_is_wrong(tmp_path, damage):
    run = Run(tmp_path)
    for step in (1, 2, 3):
        run.params["scale"][...] = step
        run.save(step, keep=3)
    latest = run.dir / "latest.json"
    if damage == "missing":
        latest.unlink()
    elif damage == "deleted_dir":
        shutil.rmtree(run.dir / "step-0000003")
    elif damage == "garbage":
        latest.write_text("{not json")
    elif damage == "traversal":
        latest.write_text(json.dumps({"step": 1, "dir": "../../etc"}))
    else:
        (run.dir / "step-0000003" / "model.safetensors").unlink()
    expected = 3 if damage in ("missing", "garbage", "traversal") else 2
    assert latest_checkpoint(run.dir) == os.path.join(run.dir, f"step-{expected:07d}")
    ck = load_checkpoint(run.dir)
    assert ck.step == expected and ck.params["scale"] == expected


def test_tmp_dirs_are_ignored_then_removed(tmp_path):
    run = Run(tmp_path)
    run.save(1)
    shutil.copytree(run.dir / "step-0000001", run.dir / ".tmp-step-0000009")   # even a complete one
    (run.dir / ".tmp-delete-step-0000000").mkdir()
    (run.dir / ".latest.json.abc123.tmp").write_text("{")
    (run.dir / "latest.json").unlink()
    assert load_checkpoint(run.dir).step == 1
    run.save(2)
    assert entries(run.dir) == ["latest.json", "step-0000001", "step-0000002"]


# ----------------------------------------------------------------------------
# interrupted saves

@pytest.mark.parametrize("error", [RuntimeError("disk full"), KeyboardInterrupt()])
def test_exception_during_save_keeps_previous_checkpoint(tmp_path, monkeypatch, error):
    run = Run(tmp_path)
    run.train(1)
    run.save()
    before = run.snapshot()
    latest_before = (run.dir / "latest.json").read_bytes()
    real_save_file = ckpt.save_file

    def fail_on_optimizer(tensors, path, metadata=None):
        if path.endswith("optimizer.safetensors"):
            raise error
        real_save_file(tensors, path, metadata)
    monkeypatch.setattr(ckpt, "save_file", fail_on_optimizer)
    run.train(1)
    with pytest.raises(type(error)):
        run.save()
    assert entries(run.dir) == ["latest.json", "step-0000001"]        # no tmp dir left either
    assert (run.dir / "latest.json").read_bytes() == latest_before
    ck = load_checkpoint(run.dir)
    assert ck.step == 1
    assert_same_arrays(ck.params, before)


class Killed(BaseException):
    """Stands for SIGKILL: raised at one disk operation, and no cleanup code runs after it."""


def killed_at(k, monkeypatch):
    """Patch os so that the (k+1)-th rename/replace/fsync/mkdir raises Killed and deleting is a no-op."""
    calls = [0]

    def counted(fn):
        def wrapper(*args, **kwargs):
            calls[0] += 1
            if calls[0] > k:
                raise Killed
            return fn(*args, **kwargs)
        return wrapper
    for name in ("rename", "replace", "fsync", "mkdir"):
        monkeypatch.setattr(os, name, counted(getattr(os, name)))
    monkeypatch.setattr(shutil, "rmtree", lambda *a, **kw: None)
    monkeypatch.setattr(os, "remove", lambda *a, **kw: None)


@pytest.mark.slow
@pytest.mark.parametrize("same_step, keep", [(False, 2), (False, 1), (True, 1)])
def test_kill_at_every_disk_operation_leaves_a_loadable_checkpoint(tmp_path, monkeypatch, same_step, keep):
    """Cut a save at its k-th disk operation, for every k: what is on disk must load as the old
    or the new checkpoint, never a mix, and the next save must clean up the debris."""
    k, finished = 0, False
    while not finished:
        (tmp_path / f"k{k}").mkdir()
        run = Run(tmp_path / f"k{k}")
        run.train(1)
        run.save(keep=keep)
        old = run.snapshot()
        run.train(1)
        step = 1 if same_step else 2
        with monkeypatch.context() as m:
            killed_at(k, m)
            try:
                run.save(step, keep=keep)
                finished = True
            except Killed:
                pass
        ck = load_checkpoint(run.dir)
        assert ck.step in (1, step), k
        is_new = ck.step == step and not np.array_equal(ck.params["wte.weight"], old["wte.weight"])
        assert_same_arrays(ck.params, run.params if is_new else old)
        run.save(step, keep=keep)     # the next save cleans up whatever the killed one left
        assert [e for e in entries(run.dir) if e.startswith(".")] == [], k
        assert_same_arrays(load_checkpoint(run.dir).params, run.params)
        k += 1
    assert k > 20, k    # the save really was cut at many different points


# ----------------------------------------------------------------------------
# errors

def test_nothing_to_load(tmp_path):
    (tmp_path / "empty").mkdir()
    assert latest_checkpoint(tmp_path / "empty") is None
    assert latest_checkpoint(tmp_path / "absent") is None
    with pytest.raises(ZeroLLMError, match="no checkpoint in .*zerollm train"):
        load_checkpoint(tmp_path / "empty")
    with pytest.raises(ZeroLLMError, match="not found"):
        load_checkpoint(tmp_path / "absent")


def test_incomplete_step_dir_named_directly(tmp_path):
    run = Run(tmp_path)
    path = run.save(5)
    os.remove(os.path.join(path, "rng.json"))
    with pytest.raises(ZeroLLMError, match="incomplete .*rng.json"):
        load_checkpoint(path)


@pytest.mark.parametrize("kwargs, words", [
    ({"step": -1}, "step"), ({"keep": 0}, "keep"), ({"extra": {"step": 3}}, "extra"),
    ({"extra": {"f": {1, 2}}}, "JSON"), ({"tokenizer_path": "/no/such/tok.json"}, "tokenizer file"),
])
def test_bad_save_arguments(tmp_path, kwargs, words):
    run = Run(tmp_path)
    with pytest.raises(ZeroLLMError, match=words):
        run.save(**kwargs)
    assert not run.dir.exists() or entries(run.dir) == []


def test_bad_optimizer_state_and_foreign_config(tmp_path):
    run = Run(tmp_path)
    with pytest.raises(ZeroLLMError, match="optimizer_state"):
        save_checkpoint(run.dir, Snapshot(step=1, model_config={}, train_config={}, params=run.params,
                                          optimizer_state={"step": 1}, rng_state={}, tokenizer_path=None))
    path = run.save(1)
    with open(os.path.join(path, "config.json"), "w") as f:
        json.dump({"architectures": ["GPT2LMHeadModel"]}, f)     # a Hugging Face config
    with pytest.raises(ZeroLLMError, match="not a zerollm checkpoint"):
        load_checkpoint(path)


# ----------------------------------------------------------------------------
# weights_digest

def tobytes_digest(params):
    """The digest as weights_digest has always defined it, through a copy of each array's bytes."""
    h = hashlib.sha256()
    for name in sorted(params):
        a = np.ascontiguousarray(params[name])
        h.update(f"{name}:{a.dtype.str}:{a.shape};".encode())
        h.update(a.tobytes())
    return h.hexdigest()


def test_weights_digest_is_unchanged_and_copies_no_array():
    rng = np.random.default_rng(0)
    big = rng.standard_normal((512, 1024)).astype(np.float32)                # 2 MiB
    params = {"wte.weight": big, "h.0.attn.c_attn.weight": big[:, ::3],       # strided: not C-contiguous
              "lm_head.weight": big[:64].T, "scale": np.array(1.5),           # transposed; 0-d
              "h.0.ln_1.weight": rng.standard_normal(7).astype(np.float16),
              "mask": np.zeros((3, 0), np.int64), "on": np.array([True, False])}
    assert ckpt.weights_digest(params) == tobytes_digest(params)
    assert ckpt.weights_digest({"wte.weight": big}) != ckpt.weights_digest({"wte.weight": big[::-1]})
    tracemalloc.start()
    try:
        ckpt.weights_digest({"wte.weight": big})
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < big.nbytes // 8, f"hashing {big.nbytes:,} bytes allocated {peak:,}"
