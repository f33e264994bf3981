"""Distillation (issue #62): each loss and its hand-written backward against torch in float64 and against TRL's
generalized_jsd_loss; the objective on the one trainer (resume bit-identical, on-policy sampling through the
one decode loop); the command's refusals in one line."""

import json
import os

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from zerollm.cli.entry import main
from zerollm.interop.opening import save_zerollm
from zerollm.io.safetensors import load_file
from zerollm.model.config import GPTConfig
from zerollm.model.gpt import GPT
from zerollm.nn.distill import distill_backward, distill_forward
from zerollm.tokenizers import ByteTokenizer, CharTokenizer

CASES = [("forward_kl", 0.5, 1.0), ("reverse_kl", 0.5, 2.0), ("jsd", 0.3, 1.0), ("jsd", 0.9, 0.5),
         ("jsd", 0.0, 2.0), ("jsd", 1.0, 1.0)]


def _logits(seed, B=2, T=5, V=7):
    rng = np.random.default_rng(seed)
    return rng.normal(0, 2, (B, T, V)), rng.normal(0, 2, (B, T, V)), rng.random((B, T)) < 0.7


def _torch_divergence(s, t, mask, divergence, beta, tau):
    """The definitions written plainly in torch (module docstring of zerollm.nn.distill)."""
    logq, logp = F.log_softmax(s / tau, -1), F.log_softmax(t / tau, -1)
    q, p = logq.exp(), logp.exp()
    if divergence == "forward_kl" or (divergence == "jsd" and beta == 0):
        D = (p * (logp - logq)).sum(-1)
    elif divergence == "reverse_kl" or (divergence == "jsd" and beta == 1):
        D = (q * (logq - logp)).sum(-1)
    else:
        logm = (beta * p + (1 - beta) * q).log()
        D = beta * (p * (logp - logm)).sum(-1) + (1 - beta) * (q * (logq - logm)).sum(-1)
    m = torch.as_tensor(mask, dtype=torch.float64)
    return (D * m).sum() / m.sum()


@pytest.mark.parametrize("divergence,beta,tau", CASES)
def test_each_divergence_and_its_backward_match_torch_in_float64(divergence, beta, tau):
    s, t, mask = _logits(1)
    loss, cache = distill_forward(s, t, mask, divergence, beta, tau)
    dz = distill_backward(cache, 0.7)
    ts = torch.tensor(s, requires_grad=True)
    want = _torch_divergence(ts, torch.tensor(t), mask, divergence, beta, tau)
    (0.7 * want).backward()
    np.testing.assert_allclose(loss, want.item(), rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(dz, ts.grad.numpy(), rtol=1e-10, atol=1e-14)
    assert not dz[~mask].any() and dz[mask].any()


@pytest.mark.parametrize("beta,tau", [(0.0, 1.0), (0.3, 2.0), (0.5, 1.0), (0.8, 0.7), (1.0, 3.0)])
def test_jsd_with_beta_and_temperature_is_trls_generalized_jsd_loss(beta, tau):
    """The same logits through TRL's GKDTrainer.generalized_jsd_loss (labels -100 where the mask is off)."""
    os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")
    from trl.experimental.gkd.gkd_trainer import GKDTrainer
    s, t, mask = _logits(2, V=11)
    labels = torch.where(torch.as_tensor(mask), torch.zeros(mask.shape, dtype=torch.long), torch.tensor(-100))
    ts = torch.tensor(s, requires_grad=True)
    want = GKDTrainer.generalized_jsd_loss(ts, torch.tensor(t), labels=labels, beta=beta, temperature=tau)
    want.backward()
    loss, cache = distill_forward(s, t, mask, "jsd", beta, tau)
    np.testing.assert_allclose(loss, want.item(), rtol=1e-10)
    np.testing.assert_allclose(distill_backward(cache), ts.grad.numpy(), rtol=1e-8, atol=1e-13)


def test_the_teacher_gets_no_say_where_the_mask_is_off_and_equal_models_give_zero():
    s, _, mask = _logits(3)
    for divergence in ("forward_kl", "reverse_kl", "jsd"):
        loss, cache = distill_forward(s, s.copy(), mask, divergence, 0.5, 1.5)
        assert abs(loss) < 1e-12 and np.abs(distill_backward(cache)).max() < 1e-12


def test_gradcheck_has_a_row_for_each_distillation_loss():
    from zerollm.teach.gradcheck import run_all
    rows = run_all(["distill_forward_kl", "distill_reverse_kl", "distill_jsd"])
    assert [r.name for r in rows] == ["distill forward KL", "distill reverse KL", "distill JSD(0.4)"]
    assert all(r.ok for r in rows), rows


# ----------------------------------------------------------------------------
# the command

TEXT = "床前明月光，疑是地上霜。举头望明月，低头思故乡。" * 40


def _pair(tmp_path, teacher_block=32, student_tok=None):
    tok = CharTokenizer.train(TEXT)
    cfg = dict(vocab_size=tok.vocab_size, n_head=2, dropout=0.0)
    teacher = save_zerollm(GPT(GPTConfig(block_size=teacher_block, n_layer=2, n_embd=32, **cfg), seed=1),
                           tmp_path / "teacher", tokenizer=tok)
    student = save_zerollm(GPT(GPTConfig(block_size=16, n_layer=1, n_embd=16, **cfg), seed=2),
                           tmp_path / "student", tokenizer=student_tok or tok)
    data = tmp_path / "poems.txt"
    data.write_text(TEXT, encoding="utf-8")
    return str(teacher), str(student), str(data)


def _run(teacher, student, data, out, *extra):
    return main(["distill", "--teacher", teacher, "--init", student, "--data", data, "--out", str(out),
                 "--batch-size", "4", "--eval-interval", "2", "--eval-iters", "1", "--checkpoint-interval", "2",
                 "--no-progress", *extra])


def _one_line_error(capsys, code, *words):
    err = capsys.readouterr().err.strip()
    assert code != 0 and len(err.splitlines()) == 1 and "Traceback" not in err, err
    for w in words:
        assert w in err, err


def test_distill_refuses_another_tokenizer_a_shorter_teacher_and_beta_outside_0_1_in_one_line(tmp_path, capsys):
    teacher, student, data = _pair(tmp_path)
    _, other, _ = _pair(tmp_path / "b", student_tok=CharTokenizer.train(TEXT.replace("床", "窗")))  # same size
    _one_line_error(capsys, _run(teacher, other, data, tmp_path / "o1", "--max-iters", "2"), "another tokenizer")
    _, byte, _ = _pair(tmp_path / "d", student_tok=ByteTokenizer())                                 # 256 ids
    _one_line_error(capsys, _run(teacher, byte, data, tmp_path / "o4", "--max-iters", "2"), "the student 256")
    short, _, _ = _pair(tmp_path / "c", teacher_block=8)
    _one_line_error(capsys, _run(short, student, data, tmp_path / "o2", "--max-iters", "2"), "8 tokens", "16")
    with pytest.raises(SystemExit) as exit_:
        _run(teacher, student, data, tmp_path / "o3", "--divergence", "jsd", "--beta", "1.5")
    _one_line_error(capsys, exit_.value.code, "--beta")
    # accepted: the same pair and an in-range beta trains and logs the divergence
    assert _run(teacher, student, data, tmp_path / "ok", "--max-iters", "2", "--divergence", "jsd",
                "--beta", "1") == 0
    steps = [json.loads(line) for line in open(tmp_path / "ok" / "log.jsonl") if '"kd"' in line]
    assert steps and all(np.isfinite(r["kd"]) and r["kd"] > 0 for r in steps)


def _weights(run):
    latest = json.load(open(os.path.join(run, "latest.json")))
    step = latest.get("path") or latest.get("step") or latest.get("latest")
    return load_file(os.path.join(run, step, "model.safetensors") if isinstance(step, str)
                     else os.path.join(run, f"step-{step:07d}", "model.safetensors"))


@pytest.mark.slow
def test_distill_resumes_bit_identical_with_on_policy_batches_and_the_ce_mix(tmp_path):
    teacher, student, data = _pair(tmp_path)
    flags = ("--divergence", "reverse_kl", "--temperature", "2", "--ce-weight", "0.3", "--on-policy", "0.5",
             "--lr-decay-iters", "4", "--warmup-iters", "1", "--threads", "2")
    assert _run(teacher, student, data, tmp_path / "whole", "--max-iters", "4", *flags) == 0
    assert _run(teacher, student, data, tmp_path / "cut", "--max-iters", "2", *flags) == 0
    assert main(["distill", "--out", str(tmp_path / "cut"), "--resume", "--max-iters", "4", "--no-progress",
                 "--threads", "2"]) == 0
    whole, cut = _weights(tmp_path / "whole"), _weights(tmp_path / "cut")
    assert set(whole) == set(cut)
    for k in whole:
        assert np.array_equal(whole[k], cut[k]), k
    log = [json.loads(line) for line in open(tmp_path / "whole" / "log.jsonl")]
    assert any(r.get("ce") == 0.0 for r in log if "kd" in r)        # an on-policy batch: no cross-entropy
    assert any(r.get("ce", 0) > 0 for r in log if "kd" in r)        # a data batch: the mix


def test_the_dry_run_counts_the_teacher_at_its_own_size(tmp_path, capsys):
    from zerollm.model.budget import param_count
    teacher, student, data = _pair(tmp_path)
    lines = {}
    for name, extra in (("plain", ()), ("lora", ("--lora-r", "2"))):
        assert _run(teacher, student, data, tmp_path / name, "--dry-run", *extra) == 0
        out = capsys.readouterr().out
        lines[name] = {line.strip().rsplit("  ", 1)[0].strip(): line.split()[-2:] for line in out.splitlines()}
        assert "frozen reference (a second copy)" not in out          # the student's size counted as the teacher
    tcfg = GPTConfig(block_size=32, n_layer=2, n_embd=32, n_head=2, vocab_size=CharTokenizer.train(TEXT).vocab_size)
    for name in lines:                                                  # with LoRA on the student too
        label = "teacher (its own weights)"
        assert label in lines[name], lines[name]
        number, unit = lines[name][label]
        assert unit == "KiB" and abs(float(number) - param_count(tcfg) * 4 / 1024) < 0.1
        assert "teacher's forward (no backward)" in lines[name]
