"""Supervised fine-tuning: the masks (no loss on prompt tokens; padding changes nothing), the command end to
end (log, checkpoints, the extended tokenizer, task success at each eval), bit-identical resume, and bad
input (one-line errors, nothing written)."""

import json
import os

import numpy as np
import pytest

from zerollm.data import chat

from zerollm.training.checkpoint import load_checkpoint
from zerollm.cli import main
from zerollm.data.formats import write_jsonl
from zerollm.model.gpt import GPT, GPTConfig
from zerollm.nn.loss import IGNORE_INDEX
from zerollm.training.lm import lm_shard_loss
from zerollm.align.objectives.sft import collate
from zerollm.training.runlog import read_log
from zerollm.align.tasks import acrostic
from zerollm.tokenizers import CharTokenizer, load_tokenizer

from tiny_runs import acrostic_base

EXAMPLES = [{"prompt": "1+2=", "completion": "3"}, {"prompt": "12+345=", "completion": "357"},
            {"messages": [{"role": "user", "content": "9+9="}, {"role": "assistant", "content": "18"},
                          {"role": "user", "content": "1+1="}, {"role": "assistant", "content": "2"}]}]


@pytest.fixture(scope="module")
def tok():
    return chat.prepare_tokenizer(CharTokenizer.train("0123456789+=\n"))


def _model(vocab_size, **kw):
    cfg = GPTConfig(vocab_size=vocab_size, block_size=32, n_layer=2, n_head=2, n_embd=16, dtype="float64", **kw)
    return GPT(cfg, seed=0).train()


def test_targets_are_the_completion_and_its_end_only(tok):
    encoded = [chat.encode_example(tok, e) for e in EXAMPLES]
    batch = collate(encoded)
    for (ids, mask), y, x in zip(encoded, batch["y"], batch["x"]):
        targets = [t for t in y.tolist() if t != IGNORE_INDEX]
        assert targets == [t for t, m in zip(ids, mask) if m]                # nothing from the prompt or padding
        assert x[:len(ids) - 1].tolist() == ids[:-1]
    assert tok.decode([t for t in batch["y"][0] if t != IGNORE_INDEX]) == "3<|end|>"
    assert batch["lengths"].tolist() == [len(ids) for ids, _ in encoded]


@pytest.mark.parametrize("kw", [{}, {"pos": "rope", "norm": "rmsnorm"}])
def test_padding_changes_nothing(tok, kw):
    """A batch of padded rows = each example alone: the same logits at the real positions, and the loss and
    gradients are the token-weighted mean of the examples' own (causal attention never looks ahead)."""
    model = _model(tok.vocab_size, **kw)
    encoded = [chat.encode_example(tok, e) for e in EXAMPLES]
    batch = collate(encoded)
    together = lm_shard_loss(model, batch)
    logits = model.eval().forward(batch["x"])[0]
    model.train()
    alone = [lm_shard_loss(model, collate([e])) for e in encoded]
    weights = np.array([r.weight for r in alone], dtype=float)
    assert together.weight == weights.sum()
    np.testing.assert_allclose(together.loss, sum(r.loss * w for r, w in zip(alone, weights)) / weights.sum(),
                               rtol=1e-12)
    for name, g in together.grads.items():
        expected = sum(r.grads[name] * w for r, w in zip(alone, weights)) / weights.sum()
        np.testing.assert_allclose(g, expected, rtol=1e-9, atol=1e-13, err_msg=name)
    for (ids, _), row in zip(encoded, logits):
        single = model.eval().forward(np.array([ids[:-1]]))[0][0]
        np.testing.assert_allclose(row[:len(ids) - 1], single, rtol=1e-12, atol=1e-12)


def test_the_loss_is_the_mean_negative_log_likelihood_of_the_learned_tokens(tok):
    """An independent route: token_logprobs over the whole conversation, averaged where loss_mask is True."""
    from zerollm.model.policy import token_logprobs
    model = _model(tok.vocab_size).eval()
    encoded = [chat.encode_example(tok, e) for e in EXAMPLES]
    L = max(len(ids) for ids, _ in encoded)
    ids = np.array([i + [0] * (L - len(i)) for i, _ in encoded])
    mask = np.array([m + [False] * (L - len(m)) for _, m in encoded])
    logp = token_logprobs(model, ids, mask)[0]
    model.train()
    np.testing.assert_allclose(lm_shard_loss(model, collate(encoded)).loss, -logp[mask].mean(), rtol=1e-12)


def test_curriculum_goes_from_short_to_long_in_the_first_epoch(tok):
    from zerollm.align.objectives.sft import SFTConfig, SFTObjective
    examples = [([1] * n + [2], [False] * n + [True]) for n in (9, 3, 7, 5, 3, 8, 4, 6)]
    for curriculum in (True, False):
        objective = SFTObjective(_model(tok.vocab_size), tok, examples, batch_size=2, seed=0,
                                 cfg=SFTConfig(curriculum=curriculum))
        lengths = [n for _ in range(4) for n in objective.next_batch()["lengths"].tolist()]
        assert sorted(lengths) == sorted(len(e[0]) for e in examples)          # one epoch: every example once
        assert (lengths == sorted(lengths)) == curriculum


# ----------------------------------------------------------------------------
# the command

@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    """A random base model with a char tokenizer of the poems, and acrostic train / heldout files."""
    folder = tmp_path_factory.mktemp("sft")
    acrostic_base(folder, 120, 16)
    return folder


def _sft(setup, out, *extra):
    return main(["sft", "--init", str(setup / "base"), "--data", str(setup / "train.jsonl"),
                 "--eval-data", str(setup / "heldout.jsonl"), "--task", "acrostic", "--out", str(out),
                 "--batch-size", "8", "--lr", "3e-3", "--lr-decay-iters", "30", "--warmup-iters", "5",
                 "--eval-interval", "10", "--eval-examples", "8", "--checkpoint-interval", "10",
                 "--curriculum", "--no-progress", *extra])


def _losses(run):
    return [(r["step"], r["loss"]) for r in read_log(run / "log.jsonl") if "loss" in r]


def _evals(run):
    return [r for r in read_log(run / "log.jsonl") if "val_loss" in r]


@pytest.fixture(scope="module")
def reference(setup):
    out = setup / "ref"
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("ZEROLLM_PLOTS", "1")                 # the suite turns the plots off (conftest)
        assert _sft(setup, out, "--max-iters", "30", "--threads", "2") == 0
    return out


def test_sft_run_learns_and_logs_the_task(reference, setup):
    losses, evals = _losses(reference), _evals(reference)
    assert [s for s, _ in losses] == list(range(30)) and [r["step"] for r in evals] == [0, 10, 20, 30]
    assert evals[-1]["val_loss"] < evals[0]["val_loss"] - 0.1 and evals[-1]["train_loss"] < evals[0]["train_loss"]
    assert all({"success", "success_low", "success_high", "reward"} <= set(r) for r in evals)
    ckpt = load_checkpoint(reference)
    tok = load_tokenizer(ckpt.tokenizer_path)
    assert chat.has_template(tok) and "：" in tok.decode(tok.encode("藏头诗："))
    assert ckpt.model_config["vocab_size"] == tok.vocab_size == load_tokenizer(setup / "base" / "tokenizer.json").vocab_size + 5
    assert ckpt.objective["kind"] == "sft" and ckpt.objective["settings"]["curriculum"] is True
    assert (reference / "loss.png").exists()


@pytest.mark.slow
def test_resume_is_bit_identical(setup, reference):
    out = setup / "resumed"
    assert _sft(setup, out, "--max-iters", "13", "--threads", "2") == 0
    assert main(["sft", "--out", str(out), "--resume", "--max-iters", "30", "--no-progress", "--threads", "2"]) == 0
    assert _losses(out) == _losses(reference)                                   # exact floats, every step
    assert [(r["step"], r["val_loss"], r["success"]) for r in _evals(out) if r["step"] >= 20] == \
        [(r["step"], r["val_loss"], r["success"]) for r in _evals(reference) if r["step"] >= 20]


def test_sample_and_tasks_eval_work_on_an_sft_checkpoint(reference, setup, capsys):
    prompt = acrostic.make(1, "heldout", 0)[0]["prompt"]
    assert main(["sample", "--ckpt", str(reference), "--prompt", prompt, "--max-new-tokens", "8", "--seed", "0"]) == 0
    text = capsys.readouterr().out
    assert "<|" not in text and "藏头诗" not in text                   # the reply only, without markers
    assert main(["tasks", "eval", "acrostic", "--ckpt", str(reference), "--data", str(setup / "heldout.jsonl"),
                 "--json"]) == 0
    summary = json.loads(capsys.readouterr().out)["summary"]
    assert summary["format"] == "chat" and summary["n"] == 16


@pytest.mark.parametrize("argv, fragment", [
    (["--init", "{tmp}/nothing"], "directory not found"),
    (["--init", "{tmp}"], "no checkpoint in"),
    (["--init", "{base}", "--task", "poetry"], "unknown task 'poetry'"),
    (["--init", "{base}", "--data", "{tmp}/bad.jsonl"], "bad.jsonl line 2: 'completion' is empty"),
    (["--init", "{base}", "--data", "{tmp}/long.jsonl"], "longer than the context"),
    ([], "give --init DIR"),
])
def test_bad_input_is_one_line_and_writes_nothing(setup, tmp_path, capsys, argv, fragment):
    write_jsonl(tmp_path / "bad.jsonl", [{"prompt": "a", "completion": "b"}, {"prompt": "a", "completion": ""}])
    write_jsonl(tmp_path / "long.jsonl", [{"prompt": "春" * 50, "completion": "夏"}])
    argv = [a.format(tmp=tmp_path, base=setup / "base") for a in argv]
    data = [] if "--data" in argv else ["--data", str(setup / "train.jsonl")]
    assert main(["sft", *argv, *data, "--out", str(tmp_path / "run"), "--no-progress"]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and fragment in err, err
    assert not os.path.exists(tmp_path / "run")


def test_an_existing_run_is_not_overwritten(reference, setup, capsys):
    assert _sft(setup, reference, "--max-iters", "5") == 1
    assert "already holds a run" in capsys.readouterr().err


def test_a_warmup_longer_than_the_decay_is_refused(tmp_path, capsys):
    from zerollm.cli import main
    code = main(["sft", "--init", str(tmp_path / "none"), "--data", str(tmp_path / "none.jsonl"), "--out",
                 str(tmp_path / "run"), "--warmup-iters", "50", "--max-iters", "5", "--no-progress"])
    err = capsys.readouterr().err
    assert code == 1 and err.count("\n") == 1 and "--warmup-iters 50 is longer than the learning-rate decay" in err
    assert not (tmp_path / "run").exists()
