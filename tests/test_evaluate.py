"""Bits per byte, continuation and rolling log-likelihoods, multiple choice (zerollm.evaluate)."""

import json
import math

import numpy as np
import pytest

from zerollm.model.config import GPTConfig
from zerollm.evaluate.bpb import score_text, token_byte_lengths
from zerollm.evaluate.loglik import loglikelihoods, multiple_choice, rolling_loglikelihood, rolling_windows
from zerollm.model.gpt import GPT
from zerollm.tokenizers import train_tokenizer

from tiny_runs import tiny_run

TEXT = "To be, or not to be: 春眠不觉晓，处处闻啼鸟。café — naïve 🙂 and so on, to the end."


def tiny_model(vocab_size, block_size=8, seed=0):
    return GPT(GPTConfig(vocab_size=vocab_size, block_size=block_size, n_layer=1, n_head=2, n_embd=16), seed=seed).eval()


def logp_last(model, ids):
    """log p(ids[-1] | ids[:-1]) from one forward pass over ids[:-1], by hand in float64."""
    logits = model.forward(np.array([ids[:-1]]))[0][0, -1].astype(np.float64)
    return logits[ids[-1]] - logits.max() - math.log(np.exp(logits - logits.max()).sum())


def tokenizer(kind):
    return train_tokenizer(kind, TEXT, vocab_size=300) if kind == "bpe" else train_tokenizer(kind, TEXT)


@pytest.mark.parametrize("kind", ["byte", "char", "bpe"])
def test_bpb_is_the_summed_nll_in_bits_over_the_utf8_bytes(kind):
    tok = tokenizer(kind)
    ids = tok.encode(TEXT)
    model = tiny_model(tok.vocab_size)
    T = model.config.block_size
    # by hand: token j is predicted from the window that starts at the last multiple of T before it
    bits = sum(-logp_last(model, ids[(j - 1) // T * T:j + 1]) for j in range(1, len(ids))) / math.log(2)
    nbytes = len(TEXT.encode("utf-8")) - len(tok.decode(ids[:1]).encode("utf-8"))    # the first token is not predicted
    loss, count, (got_bits, got_bytes) = score_text(model, ids, token_byte_lengths(tok), batch_size=3)
    assert got_bytes == nbytes and count == len(ids) - 1
    assert got_bits / got_bytes == pytest.approx(bits / nbytes, rel=1e-6)
    assert loss == pytest.approx(bits * math.log(2) / count, rel=1e-6)


def test_byte_lengths_count_multibyte_characters_and_skip_special_tokens():
    tok = train_tokenizer("char", "a春🙂").with_special_tokens(["<|end|>"])
    assert token_byte_lengths(tok).tolist() == [1, 3, 4, 0]
    assert token_byte_lengths(train_tokenizer("char", "ab", unk="<unk>")) is None      # unk: size unknown
    bpe = tokenizer("bpe")
    assert sum(token_byte_lengths(bpe)[i] for i in bpe.encode(TEXT)) == len(TEXT.encode("utf-8"))


def test_training_log_has_val_bpb(tmp_path_factory):
    """A byte model: one byte per token, so val_bpb is val_loss in bits."""
    rows = [json.loads(line) for line in (tiny_run(tmp_path_factory, "byte") / "log.jsonl").read_text().splitlines()]
    evals = [r for r in rows if "val_loss" in r]
    assert evals and all(r["val_bpb"] == pytest.approx(r["val_loss"] / math.log(2), rel=1e-5) for r in evals)


def test_continuations_match_one_forward_each_in_any_batch():
    model = tiny_model(40)
    rng = np.random.default_rng(0)
    requests = [(rng.integers(0, 40, int(n)).tolist(), rng.integers(0, 40, int(m)).tolist())
                for n, m in [(3, 2), (12, 4), (1, 1), (6, 8), (20, 3)]]
    want = []
    for ctx, cont in requests:       # the context is cut from the left to fit block_size + 1 tokens
        full = (ctx + cont)[-9:]
        want.append(sum(logp_last(model, full[:len(full) - len(cont) + k + 1]) for k in range(len(cont))))
    for batch_size, threads in [(1, 1), (4, 2)]:
        got = loglikelihoods(model, requests, batch_size=batch_size, threads=threads)
        np.testing.assert_allclose([lp for lp, _ in got], want, rtol=1e-6, atol=1e-6)


def test_greedy_flag_says_whether_argmax_decoding_gives_the_continuation():
    model = tiny_model(40)
    ctx = [1, 2, 3]
    best = int(np.argmax(model.forward(np.array([ctx]))[0][0, -1]))
    (_, greedy), (_, other) = loglikelihoods(model, [(ctx, [best]), (ctx, [(best + 1) % 40])])
    assert greedy and not other


def test_rolling_windows_are_lm_evals():
    from lm_eval.utils import get_rolling_token_windows, make_disjoint_window
    for n, T in [(1, 4), (4, 4), (9, 4), (10, 4), (23, 8)]:
        s = [-1] + list(range(n))        # the prefix token in front
        ours = [(s[a:j0], s[j0:j1]) for a, j0, j1 in rolling_windows(len(s), T)]
        theirs = [make_disjoint_window(w) for w in get_rolling_token_windows(list(range(n)), -1, T, 1)]
        assert ours == [(list(c), list(p)) for c, p in theirs]


def test_rolling_loglikelihood_of_a_text_longer_than_the_context():
    model = tiny_model(40, block_size=8)
    ids = np.random.default_rng(1).integers(0, 40, 29).tolist()
    s = [39] + ids
    T = 8
    want = 0.0
    for j in range(1, len(s)):       # target j: the group of T targets it is in, read from T tokens before its end
        j1 = min((j - 1) // T * T + 1 + T, len(s))
        want += logp_last(model, s[max(0, j1 - 1 - T):j + 1])
    assert rolling_loglikelihood(model, ids, prefix=39, batch_size=2) == pytest.approx(want, rel=1e-6)
    # without a prefix the first token is only context
    no_prefix = sum(logp_last(model, ids[max(0, min((j - 1) // T * T + 1 + T, len(ids)) - 1 - T):j + 1])
                    for j in range(1, len(ids)))
    assert rolling_loglikelihood(model, ids) == pytest.approx(no_prefix, rel=1e-6)


def test_multiple_choice_acc_and_acc_norm():
    assert multiple_choice([-1.0, -2.0, -3.0], ["a", "b", "c"], 0) == {"acc": 1.0, "acc_norm": 1.0}
    assert multiple_choice([-7.0, -2.0], ["abc", "b"], 0) == {"acc": 0.0, "acc_norm": 0.0}
    assert multiple_choice([-6.0, -2.0], ["abcdefgh", "b"], 0) == {"acc": 0.0, "acc_norm": 1.0}


def test_tasks_make_lm_eval_writes_the_four_tasks_and_never_replaces_a_foreign_folder_or_file(tmp_path, capsys):
    from zerollm.data import corpora
    from tiny_runs import run_main
    out = tmp_path / "tasks"
    assert run_main(["tasks", "make", "lm-eval", "--out", out, "--n", "5"], capsys)[0] == 0
    assert run_main(["tasks", "make", "lm-eval", "--out", out, "--n", "5"], capsys)[0] == 0     # the same again
    code, _, err = run_main(["tasks", "make", "lm-eval", "--out", out, "--n", "4"], capsys)
    assert code == 1 and "pass --force to replace them" in err                       # its own, but not unasked
    assert run_main(["tasks", "make", "lm-eval", "--out", out, "--n", "4", "--force"], capsys)[0] == 0
    assert json.loads((out / "zerollm-tasks.json").read_text())["n"] == 4
    (out / "my-notes.txt").write_text("keep me")                  # a file the user put there
    code, _, err = run_main(["tasks", "make", "lm-eval", "--out", out, "--n", "3", "--force"], capsys)
    assert code == 1 and "(my-notes.txt)" in err and (out / "my-notes.txt").read_text() == "keep me"
    (out / "my-notes.txt").unlink()
    names = {"zerollm_tang_next", "zerollm_shakespeare", "zerollm_acrostic", "zerollm_addition"}
    assert {p.name for p in out.iterdir()} == {f"{n}.{e}" for n in names for e in ("yaml", "jsonl")} | {"zerollm-tasks.json"}
    tang = corpora.read_text("tang").splitlines()
    val = "\n".join(tang[int(len(tang) * 0.9):])
    for row in map(json.loads, (out / "zerollm_tang_next.jsonl").read_text().splitlines()):
        assert len(row["choices"]) == 4 and row["context"][1:] + row["choices"][row["label"]] in val
    foreign = tmp_path / "mine"
    foreign.mkdir()
    (foreign / "notes.txt").write_text("keep me")
    code, _, err = run_main(["tasks", "make", "lm-eval", "--out", foreign, "--n", "4"], capsys)
    assert code == 1 and "did not write" in err and (foreign / "notes.txt").read_text() == "keep me"
