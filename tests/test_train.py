"""Training end to end: the CLI, log.jsonl, checkpoints, exact resume after a clean stop and after
SIGKILL, gradient accumulation, presets and flags, sample and eval."""

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from zerollm.cli import main
from zerollm.cli.commands.train import add_config_flags
from zerollm.model.config import GPTConfig
from zerollm.training.runlog import read_log
from zerollm.training.presets import PRESETS, build_configs
from zerollm.training.trainer import TrainConfig, lm_trainer

# a small, fast model: about 4 ms per step here
SMALL = ["--tokenizer", "char", "--n-layer", "2", "--n-head", "2", "--n-embd", "32", "--block-size", "32",
         "--batch-size", "8", "--eval-interval", "20", "--eval-iters", "4", "--sample-tokens", "20",
         "--no-progress", "--seed", "7", "--dropout", "0.1"]


@pytest.fixture(scope="module")
def corpus(tmp_path_factory, shakespeare_path):
    path = tmp_path_factory.mktemp("data") / "shakespeare_head.txt"
    path.write_text(shakespeare_path.read_text()[:60_000])
    return path


def train_cli(*argv, cwd=None, plots=False):
    env = {**os.environ, "ZEROLLM_PLOTS": "1"} if plots else None     # the suite turns the plots off (conftest)
    return subprocess.run([sys.executable, "-m", "zerollm", "train", *argv], capture_output=True, text=True,
                          cwd=cwd, env=env)


def step_losses(run_dir):
    return {r["step"]: r["loss"] for r in read_log(Path(run_dir) / "log.jsonl") if "loss" in r}


@pytest.fixture(scope="module")
def reference_run(tmp_path_factory, corpus):
    """60 steps without interruption: the losses every resumed run must reproduce bit for bit."""
    out = tmp_path_factory.mktemp("runs") / "ref"
    res = train_cli("--data", str(corpus), "--out", str(out), "--max-iters", "60",
                    "--checkpoint-interval", "10", *SMALL, plots=True)
    assert res.returncode == 0, res.stderr
    return out


def test_run_writes_log_checkpoints_and_plot(reference_run):
    records = read_log(reference_run / "log.jsonl")
    steps = [r for r in records if "loss" in r]
    evals = [r for r in records if "val_loss" in r]
    assert [r["step"] for r in steps] == list(range(60))
    for r in steps:
        assert {"step", "loss", "lr", "dt_ms", "tokens_per_s"} <= set(r) and r["tokens_per_s"] > 0
    assert [r["step"] for r in evals] == [0, 20, 40, 60]
    assert evals[-1]["val_loss"] < evals[0]["val_loss"] - 0.5          # it learned
    latest = json.loads((reference_run / "latest.json").read_text())
    assert latest["step"] == 60
    step_dir = reference_run / latest["dir"]
    for name in ("config.json", "model.safetensors", "optimizer.safetensors", "rng.json", "tokenizer.json",
                 "state.json"):
        assert (step_dir / name).is_file(), name
    assert (reference_run / "loss.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert len([d for d in os.listdir(reference_run) if d.startswith("step-")]) == 2    # keep=2


@pytest.mark.slow
def test_resume_after_a_clean_stop_is_bit_identical(tmp_path, corpus, reference_run):
    out = tmp_path / "stopped"
    proc = subprocess.Popen([sys.executable, "-m", "zerollm", "train", "--data", str(corpus), "--out", str(out),
                             "--max-iters", "60", "--checkpoint-interval", "1000", *SMALL],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    _wait_for_steps(out, 25, proc)
    proc.send_signal(signal.SIGINT)                       # Ctrl-C: finish the step, save, exit 130
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130 and "continue with --resume" in err
    stopped_at = json.loads((out / "latest.json").read_text())["step"]
    assert 25 <= stopped_at < 60
    res = train_cli("--out", str(out), "--resume", "--no-progress")
    assert res.returncode == 0, res.stderr
    assert step_losses(out) == step_losses(reference_run)   # exact float equality, every step


@pytest.mark.slow
def test_resume_after_sigkill_is_bit_identical(tmp_path, corpus, reference_run):
    out = tmp_path / "killed"
    proc = subprocess.Popen([sys.executable, "-m", "zerollm", "train", "--data", str(corpus), "--out", str(out),
                             "--max-iters", "60", "--checkpoint-interval", "10", *SMALL],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    _wait_for_steps(out, 33, proc)
    proc.send_signal(signal.SIGKILL)                      # no chance to clean up
    proc.wait(timeout=30)
    saved = json.loads((out / "latest.json").read_text())["step"]
    assert 30 <= saved < 60 and len(step_losses(out)) < 60      # killed in the middle of the run
    res = train_cli("--out", str(out), "--resume", "--no-progress")
    assert res.returncode == 0, res.stderr
    # the log was cut back to the checkpoint and continued: identical to the uninterrupted run
    assert step_losses(out) == step_losses(reference_run)
    assert [r["step"] for r in read_log(out / "log.jsonl") if "loss" in r] == list(range(60))


def _wait_for_steps(out, n, proc, timeout=60):
    deadline = time.time() + timeout
    log = out / "log.jsonl"
    while time.time() < deadline:
        if log.exists() and len(step_losses(out)) >= n:
            return
        if proc.poll() is not None:
            raise AssertionError(f"training exited early with {proc.returncode}")
        time.sleep(0.05)
    raise AssertionError("training did not reach the step in time")


# ----------------------------------------------------------------------------
# the loop's parts

def _toy_trainer(**overrides):
    data = np.random.default_rng(0).integers(0, 20, 5000)
    model_cfg = GPTConfig(vocab_size=20, block_size=8, n_layer=1, n_head=2, n_embd=8, dtype="float64")
    return lm_trainer(model_cfg, TrainConfig(batch_size=4, max_iters=10, **overrides), data, data)


def test_gradient_accumulation_averages_the_micro_batches():
    acc = _toy_trainer(grad_accum=3, grad_clip=0.0, weight_decay=0.0, warmup_iters=0)
    one = _toy_trainer(grad_accum=1, grad_clip=0.0, weight_decay=0.0, warmup_iters=0)
    # the same three batches by hand, with the grad_accum=1 trainer's model (same init)
    rng = np.random.default_rng([one.cfg.seed, 1])
    grads = None
    for _ in range(3):
        x, y = one.objective._batch(one.objective.train_data, rng)
        one.model.forward(x, y)
        g = one.model.backward()
        grads = {k: v.copy() for k, v in g.items()} if grads is None else {k: grads[k] + g[k] for k in g}
    before = {k: v.copy() for k, v in acc.model.params.items()}
    acc.step()
    # AdamW's first step moves each weight by lr * g / (|g| + eps): compare the update directions
    for k in grads:
        moved = acc.model.params[k] - before[k]
        expected = -acc.cfg.lr * (grads[k] / 3) / (np.abs(grads[k] / 3) + 1e-8)
        np.testing.assert_allclose(moved, expected, atol=1e-9)


@pytest.mark.parametrize("grad_clip", [1.0, 0.0])
def test_a_diverged_step_stops_with_one_line_and_changes_nothing(grad_clip):
    """A NaN in the weights makes the loss NaN: the step raises the 'training diverged' error (which the
    CLI prints as one line) before the optimizer touches anything."""
    from zerollm.io.errors import ZeroLLMError
    trainer = _toy_trainer(grad_clip=grad_clip)
    trainer.model.params["wte.weight"][0, 0] = np.nan
    before = {k: v.copy() for k, v in trainer.model.params.items()}
    with pytest.raises(ZeroLLMError, match=r"training diverged at step 0 \(loss nan.*lower --lr or resume"):
        trainer.step()
    assert trainer.iter == 0
    assert all(np.array_equal(before[k], v, equal_nan=True) for k, v in trainer.model.params.items())


def test_every_config_field_is_a_flag():
    import argparse
    p = argparse.ArgumentParser()
    add_config_flags(p, GPTConfig, skip={"vocab_size"})
    add_config_flags(p, TrainConfig)
    args = p.parse_args(["--no-bias", "--n-kv-head", "2", "--norm", "rmsnorm", "--lr", "0.01", "--no-tie-embeddings"])
    assert args.bias is False and args.n_kv_head == 2 and args.norm == "rmsnorm" and args.lr == 0.01
    assert args.tie_embeddings is False and args.causal is None            # not given = no override
    flags = {a.dest for a in p._actions}
    from dataclasses import fields
    assert {f.name for f in fields(GPTConfig)} - {"vocab_size"} <= flags
    assert {f.name for f in fields(TrainConfig)} <= flags


def test_presets_and_precedence():
    m, t = build_configs("shakespeare-cpu", {"n_layer": 2}, vocab_size=65)
    assert (m.n_layer, m.n_head, m.n_embd, m.block_size, m.bias, m.vocab_size) == (2, 4, 128, 64, False, 65)
    assert (t.batch_size, t.max_iters, t.lr, t.min_lr, t.warmup_iters, t.beta2, t.weight_decay, t.grad_clip) == \
        (12, 2000, 1e-3, 1e-4, 100, 0.99, 0.1, 1.0)
    assert t.tokenizer == "char" and m.dropout == 0.0
    assert {"tiny", "shakespeare-cpu", "tang"} <= set(PRESETS)


def test_modern_preset_builds_and_trains(shakespeare_path):
    """shakespeare-modern: nanoGPT's sizes with RMSNorm, RoPE and SwiGLU, on the shipped tiny Shakespeare."""
    from zerollm.training.presets import PRESET_CORPUS
    from zerollm.tokenizers import train_tokenizer
    text = shakespeare_path.read_text()
    tok = train_tokenizer("char", text)
    m, t = build_configs("shakespeare-modern", {"max_iters": 2}, vocab_size=tok.vocab_size)
    assert (m.norm, m.pos, m.mlp, m.n_layer, m.n_embd, m.vocab_size) == ("rmsnorm", "rope", "swiglu", 4, 128, 65)
    assert t.tokenizer == "char" and PRESET_CORPUS["shakespeare-modern"] == "shakespeare"
    ids = np.array(tok.encode(text[:20_000]))
    trainer = lm_trainer(m, t, ids, ids)
    losses = [trainer.step()["loss"] for _ in range(2)]
    assert trainer.iter == 2 and all(np.isfinite(losses)) and abs(losses[0] - np.log(65)) < 0.3


@pytest.mark.parametrize("argv, code, fragment", [
    (["--n-expert", "1"], 1, "n_expert=1"),
    (["--n-expert", "4", "--n-expert-active", "5"], 1, "n_expert_active=5 must be between 1 and n_expert=4"),
    (["--n-expert", "4", "--aux-loss-coef", "-1"], 2, "--aux-loss-coef: must be a number from 0"),
    (["--n-expert", "4", "--z-loss-coef", "-0.1"], 2, "--z-loss-coef: must be a number from 0"),
    (["--n-expert", "4", "--capacity-factor", "-0.5"], 2, "--capacity-factor: must be a number from 0"),
    (["--preset", "nope"], 2, "invalid choice"),
    (["--lr", "fast"], 2, "must be a number from 0 to 10"),
    (["--norm", "batchnorm"], 2, "invalid choice"),
    (["--n-embd", "30", "--n-head", "4"], 1, "not divisible"),
    (["--resume"], 1, "no checkpoint"),
    (["--data", "/nonexistent/file.txt"], 1, "no such file"),
    (["--warmup-iters", "50", "--lr-decay-iters", "20"], 1,
     "--warmup-iters 50 is longer than the learning-rate decay, which ends at step 20 (--lr-decay-iters 20); give "
     "--warmup-iters 20 or less"),
    (["--lr-decay-iters", "8"], 1, "is longer than the learning-rate decay, which ends at step 8 (--lr-decay-iters 8)"),
    (["--warmup-iters", "500", "--max-iters", "100"], 1,
     "ends at step 100 (--max-iters 100, as no --lr-decay-iters is given); give --warmup-iters 100 or less, or a "
     "larger --max-iters"),
])
def test_bad_training_arguments(tmp_path, capsys, argv, code, fragment):
    try:
        rc = main(["train", "--out", str(tmp_path / "run"), "--no-progress", *argv])
    except SystemExit as exc:
        rc = exc.code
    err = capsys.readouterr().err
    assert rc == code and fragment in err and err.count("\n") == 1, err


@pytest.mark.parametrize("tokenizer", ["byte", "bpe"])
@pytest.mark.parametrize("content, fragment", [(b"", "is empty"), (b"ok \xc4\xe3\xba\xc3", "not UTF-8 text")])
def test_bad_text_data_gets_the_error_line_alone(tmp_path, capsys, tokenizer, content, fragment):
    """The 'preparing FILE ...' progress line comes only once the text is usable: bad data is one line."""
    data = tmp_path / "bad.txt"
    data.write_bytes(content)
    extra = ["--vocab-size", "300"] if tokenizer == "bpe" else []
    rc = main(["train", "--data", str(data), "--out", str(tmp_path / "run"), "--tokenizer", tokenizer, *extra,
               "--no-progress"])
    err = capsys.readouterr().err
    assert rc == 1 and err.startswith("zerollm train: error: ") and fragment in err and err.count("\n") == 1, err


def test_good_text_data_announces_its_preparation(tmp_path, capsys, corpus):
    rc = main(["train", "--data", str(corpus), "--out", str(tmp_path / "run"), "--tokenizer", "byte",
               "--n-layer", "1", "--n-head", "2", "--n-embd", "8", "--block-size", "16", "--batch-size", "2",
               "--max-iters", "1", "--eval-iters", "1", "--sample-tokens", "0", "--no-progress"])
    assert rc == 0 and "preparing " in capsys.readouterr().err


def test_existing_run_is_never_overwritten(reference_run, capsys):
    before = (reference_run / "latest.json").read_text()
    rc = main(["train", "--out", str(reference_run), "--no-progress", "--max-iters", "5"])
    assert rc == 1 and "--resume" in capsys.readouterr().err
    assert (reference_run / "latest.json").read_text() == before


def test_sample_streams_reproducibly_and_eval_prints_the_loss(reference_run, corpus, capsys):
    argv = ["sample", "--ckpt", str(reference_run), "--prompt", "ROMEO:", "--max-new-tokens", "40", "--seed", "3"]
    assert main(argv) == 0
    first = capsys.readouterr().out
    assert main(argv) == 0
    assert capsys.readouterr().out == first and first.startswith("ROMEO:") and len(first) > 40
    assert main(["sample", "--ckpt", str(reference_run), "--prompt", "\u4e2d", "--max-new-tokens", "5"]) == 1
    err = capsys.readouterr().err
    assert err.startswith("zerollm sample: error:") and "does not know: '\u4e2d'" in err and "--tokenizer byte" in err
    assert main(["eval", "--ckpt", str(reference_run), "--data", str(corpus), "--max-tokens", "5000"]) == 0
    out = capsys.readouterr().out
    loss = float(out.split("loss ")[1].split()[0])
    assert 1.0 < loss < 4.0 and "perplexity" in out


def test_heads_draws_a_trained_checkpoint(reference_run, tmp_path, capsys):
    out = tmp_path / "heads.png"
    assert main(["heads", "--ckpt", str(reference_run), "--text", "ROMEO: hi", "--out", str(out), "--lang", "en"]) == 0
    assert out.read_bytes()[:4] == b"\x89PNG" and "trained model" in capsys.readouterr().out
    assert main(["heads", "--ckpt", str(reference_run), "--random", "--out", str(tmp_path / "again.png")]) == 1
    assert "--ckpt needs --text" in capsys.readouterr().err


@pytest.mark.slow
@pytest.mark.parametrize("engine", ["numpy", "fast"])
def test_two_threads_learn_and_resume_bit_identically(tmp_path, corpus, engine):
    """--threads 2 splits each batch over two threads (zerollm.training.parallel); resuming with the same
    --threads (and --engine) after SIGKILL reproduces every loss exactly."""
    common = ["--data", str(corpus), "--max-iters", "40", "--checkpoint-interval", "10", "--threads", "2",
              "--engine", engine, *SMALL]
    ref = tmp_path / "ref2"
    assert train_cli("--out", str(ref), *common).returncode == 0
    evals = [r["val_loss"] for r in read_log(ref / "log.jsonl") if "val_loss" in r]
    assert evals[-1] < evals[0] - 0.5
    out = tmp_path / "killed2"
    proc = subprocess.Popen([sys.executable, "-m", "zerollm", "train", "--out", str(out), *common],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    _wait_for_steps(out, 22, proc)
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=30)
    assert len(step_losses(out)) < 40
    res = train_cli("--out", str(out), "--resume", "--no-progress", "--threads", "2", "--engine", engine)
    assert res.returncode == 0 and "warning" not in res.stderr, res.stderr
    assert step_losses(out) == step_losses(ref)


def test_stream_decoder_holds_back_half_characters():
    from zerollm.generation.display import StreamDecoder
    from zerollm.tokenizers import train_tokenizer
    tok = train_tokenizer("byte", "")
    text = "春眠 a😀b"
    stream = StreamDecoder(tok)
    pieces = [stream.push(i) for i in tok.encode(text)]
    assert "".join(pieces) + stream.flush() == text
    assert "\ufffd" not in "".join(pieces) and pieces[:3] == ["", "", "春"]    # 3 bytes, one character


@pytest.mark.parametrize("preset, data, meta_chars", [("tiny", None, 1_115_394), ("tiny", "tang", 784_866)])
def test_a_preset_trains_on_a_shipped_corpus_without_data_or_download(tmp_path, preset, data, meta_chars):
    """A fresh clone trains with no --data (the preset's corpus) or with --data naming a shipped corpus."""
    out = tmp_path / "run"
    argv = ["--preset", preset, "--out", str(out), "--max-iters", "2", "--eval-interval", "2", "--eval-iters", "1",
            "--sample-tokens", "0", "--no-progress", "--batch-size", "2", "--block-size", "16"]
    res = train_cli(*argv, *(["--data", data] if data else []), cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    meta = json.loads((out / "data" / "meta.json").read_text())
    assert meta["source"]["characters"] == meta_chars


@pytest.mark.parametrize("data", [None, "tang"])
def test_a_folder_named_like_the_corpus_is_not_taken_for_prepared_data(tmp_path, data):
    """`cd runs && zerollm train --preset tang --out tang` made the folder tang/ first and then read it as a
    prepared folder ("meta.json not found"); a folder of a corpus's name without meta.json is not one."""
    argv = ["--preset", "tang", "--out", "tang", "--max-iters", "1", "--eval-interval", "1", "--eval-iters", "1",
            "--sample-tokens", "0", "--no-progress", "--batch-size", "2", "--block-size", "16", "--n-layer", "1",
            "--n-embd", "16", "--n-head", "2"]
    if data:
        (tmp_path / "tang").mkdir()                      # an unrelated empty folder of the corpus's name
        argv[3] = "run"
    res = train_cli(*argv, *(["--data", data] if data else []), cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    out = tmp_path / argv[3]
    assert json.loads((out / "data" / "meta.json").read_text())["source"]["characters"] == 784_866


# ----------------------------------------------------------------------------
# a mixture of experts: the log, the expert-load plot, exact resume

MOE = ["--n-expert", "4", "--n-expert-active", "2", "--moe-every", "2", "--capacity-factor", "1.0",
       "--n-shared-expert", "1", "--moe-norm-topk", "--aux-loss-coef", "0.05"]


@pytest.fixture(scope="module")
def moe_run(tmp_path_factory, corpus):
    out = tmp_path_factory.mktemp("runs") / "moe"
    res = train_cli("--data", str(corpus), "--out", str(out), "--max-iters", "40", "--checkpoint-interval", "10",
                    "--threads", "2", *SMALL, *MOE, plots=True)
    assert res.returncode == 0, res.stderr
    assert "mixture of experts in blocks [1]: top-2 of 4 experts + 1 shared" in res.stderr
    return out


def test_moe_run_logs_routing_and_draws_expert_load(moe_run):
    steps = [r for r in read_log(moe_run / "log.jsonl") if "loss" in r]
    evals = [r for r in read_log(moe_run / "log.jsonl") if "val_loss" in r]
    assert evals[-1]["val_loss"] < evals[0]["val_loss"] - 0.5          # it learned
    for r in steps:
        assert len(r["expert_frac"]) == 1 and len(r["expert_frac"][0]) == 4       # one MoE block, 4 experts
        assert sum(r["expert_frac"][0]) == pytest.approx(1.0) and 0 <= r["dropped_frac"] < 1
        assert r["loss"] == pytest.approx(r["ce_loss"] + 0.05 * r["aux_loss"] + 0.001 * r["z_loss"], rel=1e-9)
        assert 0 < r["aux_loss"] <= 4 and r["z_loss"] > 0                # aux = E sum f P <= E max P <= E
    assert any(r["dropped_frac"] > 0 for r in steps)                    # capacity 1.0 drops some pairs
    assert (moe_run / "expert_load.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


@pytest.mark.slow
def test_moe_resume_after_sigkill_is_bit_identical(tmp_path, corpus, moe_run):
    out = tmp_path / "moe-killed"
    argv = ["--data", str(corpus), "--out", str(out), "--max-iters", "40", "--checkpoint-interval", "10",
            "--threads", "2", *SMALL, *MOE]
    proc = subprocess.Popen([sys.executable, "-m", "zerollm", "train", *argv],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    _wait_for_steps(out, 22, proc)
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=30)
    assert len(step_losses(out)) < 40
    res = train_cli("--out", str(out), "--resume", "--no-progress", "--threads", "2")
    assert res.returncode == 0 and "warning" not in res.stderr, res.stderr

    def routing(run):
        return [(r["step"], r["loss"], r["aux_loss"], r["z_loss"], r["expert_frac"], r["dropped_frac"])
                for r in read_log(run / "log.jsonl") if "loss" in r]
    assert routing(out) == routing(moe_run)                             # exact equality, every step
