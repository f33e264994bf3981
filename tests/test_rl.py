"""PPO and GRPO as objectives on the one training loop: a bandit each must solve, thread shards that
agree, bit-exact resume through the CLI (rollout buffer and sampling generators included), and bad input
as one-line errors with the last good checkpoint kept."""

import copy
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from zerollm.data.chat import encode_prompt, prepare_tokenizer
from zerollm.cli import main
from zerollm.model.config import GPTConfig
from zerollm.io.errors import ZeroLLMError
from zerollm.model.gpt import GPT
from zerollm.align.rl.grpo import GRPOConfig, GRPOObjective
from zerollm.align.rl.objective import Prompts
from zerollm.align.rl.ppo import PPOConfig, PPOObjective
from zerollm.align.rl.rewards import RewardSource, check_rewards, score_all
from zerollm.training.runlog import read_log
from zerollm.io.safetensors import load_file
from zerollm.tokenizers import train_tokenizer
from zerollm.training.trainer import TrainConfig, Trainer

pytestmark = pytest.mark.slow   # PPO, GRPO and preference trainings through the CLI: not in the fast loop

# ----------------------------------------------------------------------------
# a bandit: one prompt, one-token answers, reward 1 for the letter "a" only


def bandit(kind, threads=1, seed=0):
    tok = prepare_tokenizer(train_tokenizer("char", "abcd"))        # 4 letters + the template's 4 tokens
    model = GPT(GPTConfig(vocab_size=tok.vocab_size, block_size=16, n_layer=1, n_head=2, n_embd=16), seed=seed)
    source = RewardSource("bandit", lambda prompts, answers, fields, seqs: [float(a == "a") for a in answers])
    prompts = Prompts(({"prompt": "d"},), (encode_prompt(tok, "d"),))       # answers end at the template's end id
    common = dict(sources=[source], seed=seed)
    if kind == "grpo":
        cfg = GRPOConfig(group_size=8, prompts_per_step=2, max_new_tokens=1, beta=0.0)
        objective = GRPOObjective(model, copy.deepcopy(model), tok, prompts, config=cfg, **common)
    else:
        cfg = PPOConfig(prompts_per_step=16, max_new_tokens=1, epochs=2, minibatches=2, kl_coef=0.0)
        objective = PPOObjective(model, copy.deepcopy(model), tok, prompts, config=cfg, **common)
    train_cfg = TrainConfig(lr=3e-2, min_lr=3e-2, warmup_iters=0, max_iters=60, weight_decay=0.0, seed=seed)
    return Trainer(objective, train_cfg, threads=threads), tok


def prob_of(trainer, tok, letter):
    ids = np.array([encode_prompt(tok, "d")])
    logits, _ = trainer.model.eval().forward(ids)
    p = np.exp(logits[0, -1] - logits[0, -1].max())
    return float(p[tok.encode(letter)[0]] / p.sum())


@pytest.mark.parametrize("kind", ["grpo", "ppo"])
def test_the_policy_learns_the_rewarded_token(kind):
    trainer, tok = bandit(kind)
    start = prob_of(trainer, tok, "a")
    rewards = []
    for _ in range(40):
        rewards.append(trainer.step()["reward"])
    assert start < 0.3 and prob_of(trainer, tok, "a") > 0.9, (start, prob_of(trainer, tok, "a"))
    assert np.mean(rewards[-5:]) > np.mean(rewards[:5])


@pytest.mark.parametrize("kind", ["grpo", "ppo"])
def test_thread_shards_sample_and_differentiate_the_same(kind):
    """Rows sample from their own generators: 1 or 2 threads give the very same rollouts, and the same
    loss and gradients up to the order of float additions."""
    results = []
    for threads in (1, 2):
        trainer, _ = bandit(kind, threads=threads)
        batch = trainer.objective.next_batch()
        trainer.model.train()
        results.append((batch, trainer.sharded.run(trainer.objective.shard_loss, batch)))
    (b1, r1), (b2, r2) = results
    assert np.array_equal(b1["ids"], b2["ids"]) and np.array_equal(b1["reward"], b2["reward"])
    assert r1.loss == pytest.approx(r2.loss, rel=1e-5, abs=1e-9)
    for name, g in r1.grads.items():
        np.testing.assert_allclose(r2.grads[name], g, rtol=1e-4, atol=1e-6 * max(np.abs(g).max(), 1e-3))


def test_ppo_logs_its_quantities():
    trainer, _ = bandit("ppo")
    record = trainer.step()
    for key in ("reward", "completion_len", "clip_frac", "kl", "approx_kl", "entropy",
                "value_loss", "kl_coef"):
        assert key in record and np.isfinite(record[key]), key
    assert record["answers"] == 16                                # the rollout batch's own count
    assert set(trainer.params) - set(trainer.model.params) == {"v_head.weight", "v_head.bias"}


def test_grpo_logs_its_quantities():
    trainer, _ = bandit("grpo")
    record = trainer.step()
    for key in ("reward", "completion_len", "clip_frac", "kl", "approx_kl", "entropy"):
        assert key in record and np.isfinite(record[key]), key
    assert record["answers"] == 2 * 8                             # prompts per step x group size
    vocab = trainer.model.config.vocab_size
    assert 0 < record["entropy"] <= np.log(vocab) + 1e-9          # exact entropy of a softmax over the vocabulary


# ----------------------------------------------------------------------------
# rewards: checked on every call


def test_reward_outputs_are_checked():
    good = RewardSource("ok", lambda p, c, f, s: [1.0] * len(c))
    assert score_all([good, good._replace(weight=0.5)], ["p"] * 2, ["c"] * 2, [{}] * 2, [[1]] * 2)[0].tolist() == [1.5, 1.5]
    for values, fragment in (([1.0], "returned 1 values for 2"), ([1.0, float("nan")], "non-finite"),
                             (["x", 1], "list of numbers"), (["1", "0"], "list of numbers"),
                             ([b"1", 0], "list of numbers")):
        with pytest.raises(ZeroLLMError, match=fragment):
            check_rewards("mine", values, 2)
    boom = RewardSource("boom", lambda *a: 1 / 0)
    with pytest.raises(ZeroLLMError, match="reward boom raised ZeroDivisionError"):
        score_all([boom], ["p"], ["c"], [{}], [[1]])


# ----------------------------------------------------------------------------
# the CLI: a tiny base model, addition prompts


@pytest.fixture(scope="module")
def base(tmp_path_factory):
    root = tmp_path_factory.mktemp("rl")
    assert main(["train", "--preset", "tiny", "--out", str(root / "base"), "--max-iters", "2", "--eval-iters", "1",
                 "--sample-tokens", "0", "--no-progress", "--batch-size", "2", "--block-size", "160"]) == 0
    assert main(["tasks", "make", "addition", "--out", str(root / "prompts.jsonl"), "--n", "40",
                 "--split", "train", "--seed", "0"]) == 0
    return root


def rl_cli(kind, base, out, *more, cwd=None):
    argv = [sys.executable, "-m", "zerollm", kind, "--init", str(base / "base"), "--data",
            str(base / "prompts.jsonl"), "--out", str(out), "--reward", "addition", "--max-new-tokens", "6",
            "--prompts-per-step", "2", "--no-progress", "--checkpoint-interval", "2", "--lr-decay-iters", "6",
            "--eval-interval", "100"]
    if kind == "grpo":
        argv += ["--group-size", "4", "--epochs", "2", "--minibatches", "2"]
    argv += more                                           # the test's own flags win (argparse: last one)
    return subprocess.run(argv, capture_output=True, text=True, timeout=300, cwd=cwd or base)


def step_losses(run):
    return [(r["step"], r["loss"], r["reward"]) for r in read_log(Path(run) / "log.jsonl") if "loss" in r]


@pytest.mark.parametrize("kind", ["grpo", "ppo"])
def test_resume_is_bit_identical_mid_rollout(base, tmp_path, kind):
    """Stopped at step 3 (inside a rollout batch's 4 minibatch steps), resumed to 6: the same numbers."""
    whole = rl_cli(kind, base, tmp_path / "whole", "--max-iters", "6")
    assert whole.returncode == 0, whole.stderr
    part = rl_cli(kind, base, tmp_path / "part", "--max-iters", "3")
    assert part.returncode == 0, part.stderr
    again = subprocess.run([sys.executable, "-m", "zerollm", kind, "--out", str(tmp_path / "part"), "--resume",
                            "--max-iters", "6", "--no-progress"], capture_output=True, text=True, timeout=300)
    assert again.returncode == 0, again.stderr
    assert step_losses(tmp_path / "part") == step_losses(tmp_path / "whole") and len(step_losses(tmp_path / "whole")) == 6


def test_a_bad_reward_function_stops_with_one_line_and_keeps_the_checkpoint(base, tmp_path):
    (tmp_path / "my_rewards.py").write_text(
        "import os\n"
        "def flaky(prompts, completions, **fields):   # fine twice, then NaN\n"
        "    n = len(open('calls.txt').read()) if os.path.exists('calls.txt') else 0\n"
        "    open('calls.txt', 'a').write('x')\n"
        "    return [0.5] * len(completions) if n < 2 else [float('nan')] * len(completions)\n"
        "def short(prompts, completions, **fields):\n"
        "    return [1.0]\n")
    one_step_per_rollout = ["--epochs", "1", "--minibatches", "1"]
    res = rl_cli("grpo", base, tmp_path / "flaky", "--max-iters", "6", "--reward", "my_rewards:flaky",
                 *one_step_per_rollout, cwd=tmp_path)
    errors = [line for line in res.stderr.splitlines() if "error" in line]
    assert res.returncode == 1 and len(errors) == 1 and "Traceback" not in res.stderr
    assert "reward my_rewards:flaky returned nan" in errors[0]
    assert json.loads((tmp_path / "flaky" / "latest.json").read_text())["step"] == 2      # the last good one
    res = rl_cli("grpo", base, tmp_path / "short", "--max-iters", "2", "--reward", "my_rewards:short", cwd=tmp_path)
    assert res.returncode == 1 and "returned 1 values for 8 answers" in res.stderr


@pytest.mark.parametrize("extra, fragment", [
    (["--group-size", "1"], "group-size"),
    (["--reward", "nope"], "unknown task"),
    (["--reward", "no_such_module:fn"], "cannot import"),
])
def test_bad_settings_are_one_line(base, tmp_path, extra, fragment):
    res = rl_cli("grpo", base, tmp_path / "bad", "--max-iters", "2", *extra)
    errors = [line for line in res.stderr.splitlines() if "error" in line]
    assert res.returncode in (1, 2) and len(errors) == 1 and fragment in errors[0] and "Traceback" not in res.stderr


def test_prompts_that_leave_no_room_are_refused(base, tmp_path):
    long = tmp_path / "long.jsonl"
    long.write_text(json.dumps({"prompt": "1" * 200 + "+1=", "answer": 2}) + "\n")     # the verifier reads "answer"
    res = subprocess.run([sys.executable, "-m", "zerollm", "grpo", "--init", str(base / "base"), "--data", str(long),
                          "--out", str(tmp_path / "x"), "--reward", "addition", "--no-progress"],
                         capture_output=True, text=True, timeout=300)
    assert res.returncode == 1 and "leaves no room for an answer" in res.stderr


def test_a_reward_model_with_another_tokenizer_is_refused(base, tmp_path):
    other = tmp_path / "charbase"
    assert main(["train", "--data", "shakespeare", "--tokenizer", "char", "--out", str(other), "--max-iters", "1",
                 "--n-layer", "1", "--n-embd", "16", "--n-head", "2", "--block-size", "32", "--batch-size", "2",
                 "--eval-iters", "1", "--sample-tokens", "0", "--no-progress"]) == 0
    assert main(["tasks", "make", "prefs", "--out", str(tmp_path / "prefs.jsonl"), "--n", "8", "--split", "train",
                 "--seed", "0"]) == 0
    rm = tmp_path / "rm"
    assert main(["reward", "--init", str(base / "base"), "--data", str(tmp_path / "prefs.jsonl"), "--out", str(rm),
                 "--max-iters", "1", "--batch-size", "2", "--no-progress"]) == 0
    res = subprocess.run([sys.executable, "-m", "zerollm", "ppo", "--init", str(other), "--data",
                          str(base / "prompts.jsonl"), "--rm", str(rm), "--out", str(tmp_path / "p"), "--no-progress"],
                         capture_output=True, text=True, timeout=300)
    assert res.returncode == 1 and "another tokenizer" in res.stderr


def test_score_reads_pairs_and_answers_a_model_wrote(base, tmp_path, capsys):
    """zerollm score: the pairwise accuracy of a preference file; each answer's reward for a prompt /
    completion file, special tokens a model emitted included (scored as their ids, not refused)."""
    assert main(["tasks", "make", "prefs", "--out", str(tmp_path / "prefs.jsonl"), "--n", "6", "--split", "train",
                 "--seed", "0"]) == 0
    rm = tmp_path / "rm"
    assert main(["reward", "--init", str(base / "base"), "--data", str(tmp_path / "prefs.jsonl"), "--out", str(rm),
                 "--max-iters", "1", "--batch-size", "2", "--no-progress"]) == 0
    capsys.readouterr()
    assert main(["score", "--rm", str(rm), "--data", str(tmp_path / "prefs.jsonl"), "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["pairs"] == 6 and 0 <= report["val_accuracy"] <= 1
    answers = tmp_path / "answers.jsonl"
    answers.write_text('{"prompt": "1+2=", "completion": "3"}\n{"prompt": "1+2=", "completion": "3<|end|>4"}\n')
    assert main(["score", "--rm", str(rm), "--data", str(answers), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert len(out["rewards"]) == 2 and all(np.isfinite(out["rewards"]))
    assert out["mean"] == pytest.approx(np.mean(out["rewards"]))
    deep = tmp_path / "deep.jsonl"            # json's decoder recursing 100,000 levels: RecursionError
    deep.write_text('{"prompt": ' + "[" * 100_000 + "]" * 100_000 + ', "completion": "3"}\n')
    assert main(["score", "--rm", str(rm), "--data", str(deep), "--json"]) == 1
    err = capsys.readouterr().err
    assert "nested deeper than" in err and len(err.strip().splitlines()) == 1, err


@pytest.mark.parametrize("rows, fragment", [
    (['{"prompt": "1+2=", "chosen": "3", "rejected": "4"}', '{"prompt": "1+2=", "completion": "3"}'],
     "line 1 made it read this file as preference pairs (it has 'chosen'/'rejected'), so every line must be one"),
    (['{"prompt": "1+2=", "completion": "3"}', '{"prompt": "1+2=", "chosen": "3", "rejected": "4"}'],
     "line 1 made it read this file as answers (it has no 'chosen' or 'rejected'), so every line must be one"),
    (['{"prompt": "1+2=", "answer": 3}'], "score reads a file of preference pairs {\"prompt\", \"chosen\", "
                                          "\"rejected\"} or one of answers"),
])
def test_score_says_what_it_took_the_file_for(tmp_path, capsys, rows, fragment):
    """score decides from the first example whether the file holds pairs or answers; a line of the other
    kind (or of neither) is refused with what was expected and why, before the reward model is loaded."""
    data = tmp_path / "mixed.jsonl"
    data.write_text("\n".join(rows) + "\n", encoding="utf-8")
    assert main(["score", "--rm", str(tmp_path / "no-such-rm"), "--data", str(data)]) == 1
    err = capsys.readouterr().err
    assert err.startswith("zerollm score: error: ") and err.count("\n") == 1 and fragment in err, err
    assert f"mixed.jsonl line {len(rows)}" in err


@pytest.mark.parametrize("kind", ["reward", "dpo"])
def test_preference_training_resumes_bit_identically(base, tmp_path, kind):
    """zerollm reward / dpo: 3 steps, then --resume to 6, equals 6 steps in one go (losses, accuracies and
    every saved weight, the reward head included)."""
    assert main(["tasks", "make", "prefs", "--out", str(tmp_path / "prefs.jsonl"), "--n", "12", "--split", "train",
                 "--seed", "0"]) == 0
    common = ["--init", str(base / "base"), "--data", str(tmp_path / "prefs.jsonl"), "--batch-size", "2",
              "--no-progress", "--checkpoint-interval", "3", "--lr-decay-iters", "6", "--warmup-iters", "2",
              "--threads", "2"]
    assert main([kind, *common, "--out", str(tmp_path / "whole"), "--max-iters", "6"]) == 0
    assert main([kind, *common, "--out", str(tmp_path / "part"), "--max-iters", "3"]) == 0
    assert main([kind, "--out", str(tmp_path / "part"), "--resume", "--max-iters", "6", "--no-progress",
                 "--threads", "2"]) == 0
    steps = lambda run: [(r["step"], r["loss"], r["accuracy"]) for r in read_log(run / "log.jsonl") if "loss" in r]
    assert len(steps(tmp_path / "whole")) == 6 and steps(tmp_path / "part") == steps(tmp_path / "whole")
    weights = []
    for run in ("whole", "part"):
        latest = json.loads((tmp_path / run / "latest.json").read_text())["dir"]
        weights.append({f.name: load_file(f) for f in sorted((tmp_path / run / latest).glob("*.safetensors"))})
    assert weights[0].keys() == weights[1].keys()
    for name in weights[0]:
        assert all(np.array_equal(weights[0][name][k], weights[1][name][k]) for k in weights[0][name])


def test_converting_a_ppo_run_says_its_value_head_stays_behind(base, tmp_path):
    run = rl_cli("ppo", base, tmp_path / "ppo", "--max-iters", "2")
    assert run.returncode == 0, run.stderr
    for to in ("hf", "policy.gguf"):
        res = subprocess.run([sys.executable, "-m", "zerollm", "convert", "--from", str(tmp_path / "ppo"), "--to",
                              str(tmp_path / to)], capture_output=True, text=True, timeout=120)
        assert res.returncode == 0, res.stderr
        assert "the PPO run's value head (the critic it trained with) is not exported" in res.stderr
        assert "score head" not in res.stderr
