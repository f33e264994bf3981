"""Emulated mixed precision (zerollm.engine.amp): 16-bit rounding against ml_dtypes and torch, autocast, the loss
scaler step for step against torch.amp.GradScaler, why fp16 needs loss scaling, and --amp in training."""

import dataclasses
import threading

import ml_dtypes
import numpy as np
import pytest
import torch

from zerollm.engine.amp import GradScaler, autocast, cast, round_to
from zerollm.model.config import GPTConfig
from zerollm.io.errors import ZeroLLMError
from zerollm.model.gpt import GPT
from zerollm.nn.linear import linear_backward, linear_forward
from zerollm.training.trainer import TrainConfig, lm_trainer

TORCH_DTYPE = {"bf16": torch.bfloat16, "fp16": torch.float16}


# ----------------------------------------------------------------------------
# rounding

def _awkward_floats():
    """Values across float32's whole range, both 16-bit formats' edges, and the special values."""
    rng = np.random.default_rng(0)
    spread = rng.standard_normal(20_000) * np.exp2(rng.integers(-140, 128, 20_000))
    special = [0.0, -0.0, np.inf, -np.inf, np.nan, 65504.0, 65519.99, 65520.0, 2.0**-24, 2.0**-25, 3 * 2.0**-25,
               2.0**-14, np.finfo(np.float32).max, np.finfo(np.float32).tiny, 1e-45]
    # exact ties of each format next to 1, i.e. halfway between two neighbours: bf16 steps 2^-7, fp16 2^-10
    ties = [1 + k * 2.0**-8 for k in range(1, 8, 2)] + [1 + k * 2.0**-11 for k in range(1, 8, 2)]
    with np.errstate(over="ignore"):
        return np.concatenate([spread, special, ties, -np.array(ties)]).astype(np.float32)


@pytest.mark.parametrize("fmt", ["bf16", "fp16"])
def test_rounding_matches_torch_bit_for_bit(fmt):
    x = _awkward_floats()
    ours = round_to(x, fmt)
    theirs = torch.from_numpy(x).to(TORCH_DTYPE[fmt]).float().numpy()
    assert ours.dtype == np.float32 and ours is not x
    np.testing.assert_array_equal(np.isnan(ours), np.isnan(x))
    keep = ~np.isnan(x)
    np.testing.assert_array_equal(ours[keep].view(np.uint32), theirs[keep].view(np.uint32))


def test_rounding_matches_ml_dtypes_and_numpy_half():
    x = _awkward_floats()
    keep = ~np.isnan(x)
    for fmt, dtype in (("bf16", ml_dtypes.bfloat16), ("fp16", np.float16)):
        with np.errstate(over="ignore"):
            ref = x.astype(dtype).astype(np.float32)
        np.testing.assert_array_equal(round_to(x, fmt)[keep].view(np.uint32), ref[keep].view(np.uint32))


@pytest.mark.parametrize("fmt, value, expected", [
    ("bf16", 1 + 2**-8, 1.0),                  # halfway between 1 and 1 + 2^-7: ties go to the even mantissa
    ("bf16", 1 + 3 * 2**-8, 1 + 2**-6),        # halfway between 1 + 2^-7 (odd) and 1 + 2^-6 (even): up
    ("bf16", 1 + 2**-8 + 2**-20, 1 + 2**-7),   # just past halfway: up
    ("bf16", 2.0**-100 * (1 + 2**-9), 2.0**-100),  # bf16 keeps float32's range ...
    ("fp16", 2.0**-100, 0.0),                  # ... fp16 does not
    ("fp16", 1 + 2**-11, 1.0),
    ("fp16", 1 + 3 * 2**-11, 1 + 2**-9),
    ("fp16", 65519.0, 65504.0),                # the largest fp16 number
    ("fp16", 65520.0, np.inf),                 # halfway to the next power of two: overflow
    ("fp16", 2**-25, 0.0),                     # halfway between 0 and the smallest subnormal 2^-24: to 0 (even)
    ("fp16", 3 * 2**-25, 2**-23),
])
def test_round_to_nearest_even_by_hand(fmt, value, expected):
    got = round_to(np.array([value, -value], np.float32), fmt)
    assert got[0] == np.float32(expected) and got[1] == -np.float32(expected)


def test_rounding_keeps_float64_and_rejects_unknown_formats():
    x = np.array([1 + 2**-9, np.pi])
    assert round_to(x, "bf16").dtype == np.float64 and round_to(x, "bf16")[0] == 1.0
    with pytest.raises(ZeroLLMError, match="bf16, fp16"):
        round_to(x, "fp8")


def test_cast_is_free_outside_autocast_and_local_to_its_thread():
    x = np.array([1 + 2**-9], np.float32)
    assert cast(x) is x                                            # float32 mode: the same array, no copy
    seen = {}
    with autocast("bf16"):
        assert cast(x)[0] == 1.0
        with autocast("fp16"):
            assert cast(x)[0] == np.float32(1 + 2**-9)             # fp16 has the bits for it
        assert cast(x)[0] == 1.0                                   # the outer format is back
        worker = threading.Thread(target=lambda: seen.update(other=cast(x)))
        worker.start()
        worker.join()
    assert seen["other"] is x and cast(x) is x                     # another thread and afterwards: float32


# ----------------------------------------------------------------------------
# the model under autocast

def _model(amp=None, **kw):
    cfg = GPTConfig(vocab_size=23, block_size=16, n_layer=2, n_head=2, n_embd=16, **kw)
    model = GPT(cfg, seed=3)
    model.amp = amp
    return model


def _batch(B=3, T=16, V=23):
    rng = np.random.default_rng(1)
    return rng.integers(0, V, (B, T)), rng.integers(0, V, (B, T))


@pytest.mark.parametrize("amp", ["bf16", "fp16"])
@pytest.mark.parametrize("kw", [{}, dict(norm="rmsnorm", pos="rope", mlp="swiglu", attn_impl="flash"),
                                dict(n_expert=4, n_expert_active=2, mlp="swiglu")])
def test_autocast_model_stays_close_to_float32_and_stores_16_bit_activations(amp, kw):
    x, y = _batch()
    ref = _model(None, **kw)
    logits32, loss32 = ref.forward(x, y)
    grads32 = ref.backward()
    model = _model(amp, **kw)
    logits, loss = model.forward(x, y)
    blocks = model._cache["blocks"]
    mlp = blocks[1].mlp
    stored = [blocks[0].attn.attn.x, blocks[0].attn.proj.x, blocks[1].attn.sdpa.q,
              next(e for e in mlp.experts if e is not None).proj.x if blocks[1].moe else mlp.proj.x]
    for a in stored:                                   # what the backward keeps is 16-bit (in float32 arrays)
        np.testing.assert_array_equal(round_to(a, amp), a)
    grads = model.backward()
    assert not np.array_equal(logits, logits32)        # the rounding really happened ...
    tol = 3e-2 if amp == "bf16" else 5e-3              # ... and costs about the format's precision
    assert abs(loss - loss32) < tol * loss32
    for name, g in grads.items():
        err = np.linalg.norm(g - grads32[name]) / np.linalg.norm(grads32[name])
        assert err < 10 * tol, (name, err)
    assert _model(None, **kw).forward(x, y)[1] == loss32             # float32 mode is untouched


# ----------------------------------------------------------------------------
# why fp16 needs loss scaling

def test_fp16_flushes_small_gradients_to_zero_and_loss_scaling_saves_them():
    """A linear layer whose upstream gradient is ~1e-9 (a small loss weight, deep in a big batch): in fp16 it
    rounds to 0 (the smallest subnormal is 6e-8), so every weight gradient becomes exactly 0. Multiplying it by
    S = 2^16 before the backward and dividing the weight gradient by S afterwards recovers it."""
    rng = np.random.default_rng(0)
    x, w = rng.standard_normal((64, 32)).astype(np.float32), rng.standard_normal((32, 8)).astype(np.float32)
    dy = (rng.standard_normal((64, 8)) * 2e-9).astype(np.float32)
    _, cache = linear_forward(x, w)
    _, dw32, _ = linear_backward(dy, cache)
    assert np.all(dw32 != 0)
    with autocast("fp16"):
        _, cache = linear_forward(x, w)
        _, dw_plain, _ = linear_backward(dy, cache)
        S = GradScaler().scale                                        # 2^16, torch's default
        _, dw_scaled, _ = linear_backward(dy * S, cache)
    assert np.all(dw_plain == 0)                                      # flushed: nothing left to learn from
    grads = {"w": dw_scaled}
    assert GradScaler().unscale(grads) is False                       # no overflow
    assert np.all(grads["w"] != 0)
    assert np.linalg.norm(grads["w"] - dw32) / np.linalg.norm(dw32) < 5e-3


def test_whole_model_small_loss_needs_scaling_in_fp16():
    """The same at model level, with the loss weighted by 1e-6 (standing in for the far smaller gradients of
    a big model and a big batch): in fp16 every gradient of the model is 0; with S = 2^16 none of the weight
    matrices' entries is, and all are close to float32's."""
    from zerollm.nn.loss import cross_entropy_backward
    x, y = _batch()
    grads = {}
    for amp, scale in ((None, 1.0), ("fp16", 1.0), ("fp16", 2.0**16)):
        model = _model(amp)
        model.grad_scale = scale
        model.forward(x, y)
        dlogits = cross_entropy_backward(model._cache["ce"]) * np.float32(1e-6)
        g = {k: v.copy() for k, v in model.backward(dlogits).items()}
        assert GradScaler(init_scale=scale).unscale(g) is False
        grads[amp, scale] = g
    ref, lost, saved = grads[None, 1.0], grads["fp16", 1.0], grads["fp16", 2.0**16]
    assert all(np.all(g == 0) for g in lost.values())                # nothing left to learn from
    for name, g in saved.items():
        assert np.linalg.norm(g - ref[name]) / np.linalg.norm(ref[name]) < 1e-2, name
        if g.ndim == 2:
            assert np.all(g != 0) and np.all(ref[name] != 0), name


@pytest.mark.parametrize("kw", [{}, dict(n_expert=4, n_expert_active=2, aux_loss_coef=0.1, z_loss_coef=0.01),
                                dict(n_expert=3, n_expert_active=1, moe_every=2, n_shared_expert=1)])
def test_loss_scale_multiplies_every_gradient_exactly(kw):
    """backward with grad_scale = 2^10 is exactly 2^10 times the plain backward (a power of two scales every
    float without rounding), also for the mixture of experts' aux and z losses, whose gradients join inside
    the blocks."""
    x, y = _batch()
    plain = _model(None, **kw)
    plain.forward(x, y)
    ref = plain.backward()
    scaled = _model(None, **kw)
    scaled.grad_scale = 2.0**10
    scaled.forward(x, y)
    for name, g in scaled.backward().items():
        np.testing.assert_array_equal(g, ref[name] * np.float32(2.0**10), err_msg=name)


# ----------------------------------------------------------------------------
# the loss scaler against torch.amp.GradScaler

def _grad(i, inf):
    """Step i's gradient before scaling: small enough that even a scale of 2^127 leaves it finite."""
    return np.array([0.5 + i, -1.25, np.inf if inf else 3.0], np.float32) / np.float32(1024)


def _torch_run(flags, **kw):
    """torch's GradScaler on CPU over a sequence of steps whose gradient is finite (False) or inf (True):
    per step the unscaled gradient, whether the optimizer stepped, then the scale and growth tracker."""
    p = torch.nn.Parameter(torch.zeros(3))
    opt = torch.optim.SGD([p], lr=1.0)
    scaler = torch.amp.GradScaler("cpu", **kw)
    out = []
    for i, inf in enumerate(flags):
        scaler.scale(torch.ones(()))                 # what a loop does with its loss (torch sets up its scale here)
        scale = scaler.get_scale()
        p.grad = torch.tensor(_grad(i, inf)) * scale
        before = p.detach().clone()
        scaler.unscale_(opt)
        grad = p.grad.detach().numpy().copy()
        scaler.step(opt)
        stepped = not torch.equal(before, p.detach())
        scaler.update()
        out.append((grad, stepped, scaler.get_scale(), scaler.state_dict()["_growth_tracker"]))
    return out


def _our_run(flags, **kw):
    scaler = GradScaler(**kw)
    out = []
    for i, inf in enumerate(flags):
        scale = scaler.scale
        grads = {"p": _grad(i, inf) * scale}
        found_inf = scaler.unscale(grads)
        scaler.update(found_inf)
        out.append((grads["p"], not found_inf, float(scaler.scale), scaler.growth_tracker))
    return out


def _flags(n, at):
    return [i in at for i in range(n)]


@pytest.mark.parametrize("flags, kw", [
    # torch's defaults over 4,100 steps: infs early, one just before a growth would happen, then two growths
    (_flags(4100, {0, 1, 5, 1999, 2006}), {}),
    # odd factors (not powers of two), a short interval, a random pattern of overflows
    (list(np.random.default_rng(0).random(60) < 0.3), dict(init_scale=1000.3, growth_factor=3.0,
                                                           backoff_factor=0.3, growth_interval=3)),
    # growth would overflow float32: the scale stays where it is
    (_flags(6, {3}), dict(init_scale=2.0**127, growth_interval=1)),
])
def test_grad_scaler_matches_torch_step_for_step(flags, kw):
    ours, theirs = _our_run(flags, **kw), _torch_run(flags, **kw)
    for i, ((g, stepped, scale, tracker), (tg, tstepped, tscale, ttracker)) in enumerate(zip(ours, theirs)):
        assert stepped == tstepped and scale == tscale and tracker == ttracker, i
        np.testing.assert_array_equal(g, tg)


def test_grad_scaler_state_round_trips_and_bad_settings_are_refused():
    scaler = GradScaler(init_scale=1000.3, growth_interval=3)
    for inf in (False, True, False, False):
        scaler.update(inf)
    other = GradScaler()
    other.load_state_dict(scaler.state_dict())
    assert other.state_dict() == scaler.state_dict() and other.scale == scaler.scale and other.skipped == 1
    for bad in (dict(init_scale=0), dict(growth_factor=1.0), dict(backoff_factor=1.5), dict(growth_interval=0)):
        with pytest.raises(ZeroLLMError):
            GradScaler(**bad)
    with pytest.raises(ZeroLLMError, match="loss-scaler"):
        other.load_state_dict({"scale": 2.0})


# ----------------------------------------------------------------------------
# training with --amp

def _trainer(amp, scaler=None, threads=1, **train):
    data = np.random.default_rng(0).integers(0, 23, 4000)
    cfg = TrainConfig(batch_size=4, max_iters=12, amp=amp, checkpoint_interval=6, eval_interval=100,
                      eval_iters=1, sample_tokens=0, warmup_iters=2, **train)
    trainer = lm_trainer(GPTConfig(vocab_size=23, block_size=8, n_layer=1, n_head=2, n_embd=16), cfg, data, data,
                         threads=threads)
    if scaler is not None:
        trainer.scaler = scaler
    return trainer


def test_fp16_overflow_skips_the_step_and_backs_off():
    trainer = _trainer("fp16", GradScaler(init_scale=2.0**40))      # far too large: the gradients overflow
    before = {k: v.copy() for k, v in trainer.params.items()}
    records = [trainer.step() for _ in range(30)]
    first = records[0]
    assert first["skipped"] is True and first["loss_scale"] == 2.0**40 and np.isnan(first["grad_norm"])
    skipped = [r["skipped"] for r in records]
    n = skipped.index(False)                     # halved on every overflow until the gradients fit
    assert n > 3 and all(skipped[:n]) and records[n]["loss_scale"] == 2.0**(40 - n)
    assert trainer.optimizer.step_count == 30 - sum(skipped) and trainer.scaler.skipped == sum(skipped)
    assert trainer.iter == 30
    assert any(not np.array_equal(before[k], v) for k, v in trainer.params.items())


@pytest.mark.parametrize("amp, threads", [("bf16", 1), ("fp16", 1), ("fp16", 2)])
def test_amp_resume_is_bit_identical(tmp_path, amp, threads):
    """A run stopped at a checkpoint and resumed reproduces every loss, loss scale and skipped step (with
    --threads 2 too: each shard's thread sets its own autocast)."""
    from zerollm.training.checkpoint import load_checkpoint
    from zerollm.training.runlog import JsonlLog, read_log
    from zerollm.training.trainer import fit

    def scaler():   # starts too high and grows every 3 clean steps, so the state moves both ways
        return GradScaler(init_scale=2.0**26, growth_interval=3) if amp == "fp16" else None

    def run(trainer, out, keep_before=None):
        out.mkdir(exist_ok=True)
        log = JsonlLog(out / "log.jsonl", keep_before=keep_before)
        fit(trainer, out, log=log, progress=False, echo=lambda *a: None)
        log.close()
        return [{k: v for k, v in r.items() if k not in ("dt_ms", "cpu_ms", "tokens_per_s")} for r in read_log(out / "log.jsonl")
                if "loss" in r]

    whole = run(_trainer(amp, scaler(), threads), tmp_path / "whole")
    half = _trainer(amp, scaler(), threads, lr_decay_iters=12)
    half.cfg = dataclasses.replace(half.cfg, max_iters=6)
    run(half, tmp_path / "stopped")
    resumed = _trainer(amp, scaler(), threads)
    resumed.restore(load_checkpoint(tmp_path / "stopped" / "step-0000006"))
    if amp == "fp16":
        assert resumed.scaler.state_dict() == half.scaler.state_dict()
    again = run(resumed, tmp_path / "stopped", keep_before=6)
    assert again == whole
    if amp == "fp16":
        assert any(r["skipped"] for r in whole) and len({r["loss_scale"] for r in whole}) >= 3


def test_bad_amp_format_is_one_line(tmp_path, capsys):
    from zerollm.cli import main
    with pytest.raises(SystemExit) as exc:
        main(["train", "--amp", "fp8", "--out", str(tmp_path / "run")])
    err = capsys.readouterr().err
    assert exc.value.code == 2 and "fp8" in err and err.count("\n") == 1, err
    with pytest.raises(ZeroLLMError, match="--amp must be one of off, bf16, fp16"):
        TrainConfig(amp="fp8")


@pytest.mark.slow
def test_cli_amp_run_resumes_bit_identically_and_logs_the_scale(tmp_path, shakespeare_path, capsys):
    """`zerollm train --amp fp16`, stopped at step 4 and resumed: the same log as one run of 8 steps; the
    loss scaler's state is in the checkpoint's state.json."""
    import json

    from zerollm.cli import main
    from zerollm.training.runlog import read_log
    text = tmp_path / "text.txt"
    text.write_text(shakespeare_path.read_text()[:20_000])
    common = ["--data", str(text), "--amp", "fp16", "--tokenizer", "char", "--n-layer", "1", "--n-head", "2",
              "--n-embd", "16", "--block-size", "16", "--batch-size", "4", "--eval-interval", "4", "--eval-iters", "1",
              "--sample-tokens", "0", "--checkpoint-interval", "4", "--lr-decay-iters", "8", "--warmup-iters", "2",
              "--no-progress"]
    assert main(["train", "--out", str(tmp_path / "whole"), "--max-iters", "8", *common]) == 0
    assert "0 steps skipped" in capsys.readouterr().out
    assert main(["train", "--out", str(tmp_path / "split"), "--max-iters", "4", *common]) == 0
    state = json.loads((tmp_path / "split" / "step-0000004" / "state.json").read_text())
    assert state["grad_scaler"]["scale"] == 2.0**16 and state["grad_scaler"]["growth_tracker"] == 4
    assert main(["train", "--out", str(tmp_path / "split"), "--resume", "--max-iters", "8", "--no-progress"]) == 0

    def steps(run):
        return [(r["step"], r["loss"], r["loss_scale"], r["skipped"]) for r in read_log(tmp_path / run / "log.jsonl")
                if "loss" in r]
    assert steps("split") == steps("whole") and len(steps("whole")) == 8
