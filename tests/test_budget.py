"""Sizes that cannot fit: zerollm.model.budget's estimates, and every command refusing before it allocates."""

import json
import tracemalloc

import numpy as np
import pytest

from tiny_runs import copy_run, run_main, step_dir, tiny_run, tiny_text
from zerollm.model import budget
from zerollm.model.config import GPTConfig
from zerollm.model.gpt import GPT
from zerollm.generation.decode import generate
from zerollm.training.trainer import TrainConfig, lm_trainer



def peak_bytes(fn):
    """The peak of NumPy's (and Python's) allocations while ``fn`` runs, after one warm-up run, so
    that modules imported or caches filled on first use are not counted."""
    fn()
    tracemalloc.start()
    try:
        fn()
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


# ----------------------------------------------------------------------------
# the estimates against what NumPy really allocates

CONFIGS = {     # small, because tracemalloc slows every allocation down
    "gpt2-like": dict(n_layer=2, n_head=4, n_embd=32, block_size=32),
    "long-context": dict(n_layer=1, n_head=2, n_embd=16, block_size=128),
    "llama-like": dict(n_layer=2, n_head=4, n_embd=32, block_size=64, norm="rmsnorm", pos="rope", mlp="swiglu"),
    "dropout": dict(n_layer=2, n_head=4, n_embd=32, block_size=64, dropout=0.1),
    "flash": dict(n_layer=1, n_head=2, n_embd=32, block_size=64, attn_impl="flash"),
    "wide": dict(n_layer=1, n_head=1, n_embd=256, block_size=16),
    "moe": dict(n_layer=2, n_head=4, n_embd=32, block_size=32, n_expert=4, n_expert_active=2, n_shared_expert=1,
                capacity_factor=1.25),
    "moe-hybrid-swiglu": dict(n_layer=2, n_head=4, n_embd=32, block_size=64, n_expert=8, n_expert_active=1,
                              moe_every=2, mlp="swiglu", n_inner=32),
}


@pytest.mark.parametrize("name", sorted(CONFIGS))
def test_training_estimate_is_a_modest_upper_bound(name):
    cfg = GPTConfig(vocab_size=65, **CONFIGS[name])
    train_cfg = TrainConfig(batch_size=4, max_iters=10)
    data = np.random.default_rng(0).integers(0, 65, 2000).astype(np.uint16)

    def one_step():
        lm_trainer(cfg, train_cfg, data, data).step()
    measured, estimate = peak_bytes(one_step), budget.training(cfg, 4).total
    assert measured <= estimate <= 2 * measured, (budget.fmt_bytes(measured), budget.fmt_bytes(estimate))


@pytest.mark.parametrize("name", sorted(CONFIGS))
def test_generation_estimate_is_a_modest_upper_bound(name):
    cfg = GPTConfig(vocab_size=65, **CONFIGS[name])
    T = cfg.block_size // 2

    def generation():
        model = GPT(cfg).eval()
        list(generate(model, np.zeros((1, T), np.int64), T, rng=np.random.default_rng(0)))
    measured = peak_bytes(generation)
    estimate = budget.inference(cfg, 1, T, cache_slots=cfg.block_size, fresh=True).total
    # the prompt's scores are counted against every cache slot, not only the T filled ones: up to 2.5x
    assert measured <= estimate <= 2.5 * measured, (budget.fmt_bytes(measured), budget.fmt_bytes(estimate))


@pytest.mark.parametrize("name", ["gpt2-like", "llama-like", "flash"])
def test_evaluation_estimate_is_a_modest_upper_bound(name):
    from zerollm.cli.commands.evaluate import evaluate_loss
    cfg = GPTConfig(vocab_size=65, **CONFIGS[name])
    model = GPT(cfg).eval()
    ids = np.random.default_rng(0).integers(0, 65, 4 * cfg.block_size + 1)
    measured = peak_bytes(lambda: evaluate_loss(model, ids, batch_size=4))
    estimate = budget.inference(cfg, 4, cfg.block_size, loss=True).total - budget.param_count(cfg) * 4
    assert measured <= estimate <= 2.5 * measured, (budget.fmt_bytes(measured), budget.fmt_bytes(estimate))


@pytest.mark.parametrize("moe", [dict(n_expert=4, n_expert_active=2),
                                 dict(n_expert=3, n_expert_active=1, moe_every=2, n_shared_expert=2, mlp="swiglu")])
def test_param_count_and_estimate_of_a_mixture_of_experts(moe):
    cfg = GPTConfig(vocab_size=50, block_size=16, n_layer=4, n_head=2, n_embd=16, **moe)
    assert budget.param_count(cfg) == GPT(cfg, init=False).num_params()
    dense = GPTConfig(vocab_size=50, block_size=16, n_layer=4, n_head=2, n_embd=16, mlp=cfg.mlp)
    assert budget.layer_numbers(cfg, 2, 16) > budget.layer_numbers(dense, 2, 16)   # k pairs per token, and more
    assert budget.training(cfg, 4).total > budget.training(dense, 4).total


def test_param_count_matches_the_model_without_building_it():
    for kw in CONFIGS.values():
        cfg = GPTConfig(vocab_size=65, **kw)
        assert budget.param_count(cfg) == GPT(cfg, init=False).num_params()
    assert budget.param_count(GPTConfig(n_layer=10_000)) == 12 * 768 ** 2 * 10_000 + 10_000 * 13 * 768 \
        + 50257 * 768 + 1024 * 768 + 2 * 768          # a 10,000-layer GPT-2, counted without allocating


# ----------------------------------------------------------------------------
# what is available

@pytest.mark.parametrize("text, expected", [("2GiB", 2 << 30), ("512M", 512 << 20), ("1.5 GB", 1_500_000_000),
                                            ("1000", 1000), ("3 kib", 3072)])
def test_memory_limit_variable(text, expected):
    assert budget.available_memory({budget.ENV: text}) == (expected, f"${budget.ENV}") or \
        budget.available_memory({budget.ENV: text})[0] < expected     # the machine may have even less


@pytest.mark.parametrize("text", ["lots", "-1G", "1 parsec", "1e9"])
def test_a_bad_memory_limit_is_a_clear_error(text):
    with pytest.raises(budget.ZeroLLMError, match=budget.ENV):
        budget.parse_bytes(text)


def test_available_memory_is_known_on_linux():
    have, source = budget.available_memory({})
    assert have is not None and have > 0 and source in ("MemAvailable", "cgroup limit", "ulimit -v", "free memory")


# ----------------------------------------------------------------------------
# every command refuses, in one line, before it allocates

@pytest.fixture(scope="module")
def char_run(tmp_path_factory):
    return tiny_run(tmp_path_factory, "char")


def huge_checkpoint(run, tmp_path):
    """A copy of a run whose config.json claims a 10,000-layer, 65,536-wide model."""
    mine = copy_run(run, tmp_path)
    config = step_dir(mine) / "config.json"
    data = json.loads(config.read_text())
    data["model"].update(n_layer=10_000, n_embd=65_536, n_head=64, n_kv_head=64, n_inner=None)
    config.write_text(json.dumps(data))
    return mine


def huge_hf_dir(tmp_path):
    folder = tmp_path / "hf-huge"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps({
        "architectures": ["LlamaForCausalLM"], "model_type": "llama", "vocab_size": 128256,
        "hidden_size": 65536, "intermediate_size": 262144, "num_hidden_layers": 1000,
        "num_attention_heads": 64, "num_key_value_heads": 8, "max_position_embeddings": 8192}))
    (folder / "model.safetensors").write_bytes(b"\x00" * 16)     # never read: refused before
    return folder


CASES = {
    "attention --seq": (["attention", "--seq", "100000"], "--seq"),
    "attention --batch": (["attention", "--batch", "100000", "--seq", "1000"], "--batch"),
    # attention --json is refused before any estimate: its text is capped (tests/test_cli_attention.py)
    "train --n-embd": (["train", "--data", "{text}", "--tokenizer", "byte", "--n-embd", "1048576", "--n-head", "1"],
                       "--n-embd"),
    "train --batch-size": (["train", "--data", "{text}", "--tokenizer", "byte", "--batch-size", "16777216",
                            "--block-size", "4096"], "--batch-size"),
    "train --n-layer": (["train", "--data", "{text}", "--tokenizer", "byte", "--n-layer", "10000", "--n-embd", "8192",
                         "--n-head", "64"], "--n-layer"),
    "train --resume of a huge checkpoint": (["train", "--resume", "--out", "{huge}"], "training needs"),
    "sample --window": (["sample", "--ckpt", "{rope}", "--window", "2147483647"], "--window"),
    "sample --sinks": (["sample", "--ckpt", "{rope}", "--window", "4", "--sinks", "2147483647"], "--sinks"),
    "sample a huge checkpoint": (["sample", "--ckpt", "{huge}"], "the model of"),
    "eval a huge checkpoint": (["eval", "--ckpt", "{huge}", "--data", "{text}"], "the model of"),
    "heads --n-embd": (["heads", "--random", "--n-embd", "1048576", "--n-head", "1", "--out", "{tmp}/x.png"],
                       "--n-embd"),
    "heads a huge checkpoint": (["heads", "--ckpt", "{huge}", "--text", "hi", "--out", "{tmp}/x.png"], "the model of"),
    "sample --hf huge": (["sample", "--hf", "{hf}"], "loading"),
    "convert --from huge HF": (["convert", "--from", "{hf}", "--to", "{tmp}/out"], "loading"),
    "convert --from huge checkpoint": (["convert", "--from", "{huge}", "--to", "{tmp}/out"], "the model of"),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_sizes_that_cannot_fit_are_refused_in_one_line(case, char_run, tmp_path, tmp_path_factory, capsys,
                                                      monkeypatch):
    monkeypatch.delenv(budget.ENV, raising=False)
    monkeypatch.chdir(tmp_path)
    argv, words = CASES[case]
    names = {"run": char_run, "tmp": tmp_path, "text": tiny_text(tmp_path)}
    if any("{rope}" in a for a in argv):               # --window rolls the context: RoPE positions only
        names["rope"] = tiny_run(tmp_path_factory, "char", pos="rope")
    if any("{huge}" in a for a in argv):
        names["huge"] = huge_checkpoint(char_run, tmp_path)
    if any("{hf}" in a for a in argv):
        names["hf"] = huge_hf_dir(tmp_path)
    before = sorted(p.name for p in tmp_path.iterdir())
    code, out, err = run_main([a.format(**names) for a in argv], capsys)
    assert code == 1 and len(err.splitlines()) == 1 and "Traceback" not in err, err
    assert "needs about" in err and "is available" in err and words in err, err
    assert sorted(p.name for p in tmp_path.iterdir()) == before          # nothing written


def test_force_goes_on_with_a_warning(char_run, capsys, monkeypatch):
    monkeypatch.setenv(budget.ENV, "1KiB")
    code, out, err = run_main(["sample", "--ckpt", str(char_run), "--max-new-tokens", "3", "--seed", "1",
                               "--force"], capsys)
    assert code == 0 and out.strip()
    assert "warning:" in err and "trying anyway because of --force" in err and "Traceback" not in err


def test_without_force_the_same_limit_refuses(char_run, capsys, monkeypatch):
    monkeypatch.setenv(budget.ENV, "1KiB")
    code, out, err = run_main(["sample", "--ckpt", str(char_run), "--max-new-tokens", "3"], capsys)
    assert code == 1 and "1.0 KiB is available ($ZEROLLM_MEMORY_LIMIT)" in err and "--force" in err


@pytest.mark.parametrize("argv", [["prepare", "--data", "{text}", "--out", "{tmp}/p"],
                                  ["eval", "--ckpt", "{run}", "--data", "{text}"]])
def test_text_too_large_to_tokenize(argv, char_run, tmp_path, capsys, monkeypatch):
    monkeypatch.setenv(budget.ENV, "10KiB")
    names = {"run": char_run, "tmp": tmp_path, "text": tiny_text(tmp_path)}
    if any("{rope}" in a for a in argv):               # --window rolls the context: RoPE positions only
        names["rope"] = tiny_run(tmp_path_factory, "char", pos="rope")
    code, out, err = run_main([a.format(**names) for a in argv], capsys)
    assert code == 1 and "tokenizing" in err and len(err.splitlines()) == 1
    assert not (tmp_path / "p").exists()


# ----------------------------------------------------------------------------
# printing the estimate

def test_train_dry_run_prints_the_estimate_and_writes_nothing(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    code, out, err = run_main(["train", "--preset", "tiny", "--out", "r", "--dry-run"], capsys)
    assert code == 0 and err == ""
    cfg = GPTConfig(vocab_size=256, n_layer=2, n_head=4, n_embd=64, block_size=64, bias=False)
    expected = budget.training(cfg, 16)
    assert f"{budget.param_count(cfg):,} parameters" in out
    assert any(line.split() == ["total", *budget.fmt_bytes(expected.total).split()] for line in out.splitlines())
    assert "available" in out and "fits: yes" in out and "nothing is written" in out
    assert list(tmp_path.iterdir()) == []


def test_train_dry_run_with_lora_counts_only_the_adapters_as_training(tmp_path, capsys, monkeypatch):
    from zerollm.nn.lora import LoRAConfig, adapter_count
    monkeypatch.chdir(tmp_path)
    code, out, err = run_main(["train", "--preset", "tiny", "--out", "r", "--dry-run", "--lora-r", "4",
                               "--lora-targets", "c_attn,c_fc"], capsys)
    assert code == 0 and err == ""
    cfg = GPTConfig(vocab_size=256, n_layer=2, n_head=4, n_embd=64, block_size=64, bias=False)
    n = adapter_count(cfg, LoRAConfig(r=4, alpha=8.0, targets=("c_attn", "c_fc")))
    assert n == 2 * 4 * ((64 + 192) + (64 + 256))                  # r (in + out) per site, two layers
    expected = budget.training(cfg, 16, trainable=n)
    assert expected.total < budget.training(cfg, 16).total
    assert f"LoRA r=4 on c_attn, c_fc: {n:,} adapter numbers" in out and "adapters only" in out
    assert any(line.split() == ["total", *budget.fmt_bytes(expected.total).split()] for line in out.splitlines())
    code, out, err = run_main(["train", "--preset", "tiny", "--out", "r", "--dry-run", "--lora-r", "4",
                               "--lora-targets", "gate_proj"], capsys)      # not in a GELU MLP
    assert code == 1 and "gate_proj" in err and len(err.splitlines()) == 1
    assert list(tmp_path.iterdir()) == []


def test_train_dry_run_of_a_model_too_big_prints_then_refuses(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    code, out, err = run_main(["train", "--preset", "tiny", "--n-layer", "10000", "--n-embd", "8192",
                               "--n-head", "64", "--dry-run"], capsys)
    assert code == 1 and "fits: no" in out and len(err.splitlines()) == 1 and "needs about" in err
    assert list(tmp_path.iterdir()) == []


def test_shapes_prints_the_same_estimate(capsys):
    code, out, _ = run_main(["shapes", "--lang", "en", "--batch", "3", "--seq", "16", "--n-embd", "32",
                             "--n-head", "4"], capsys)
    cfg = GPTConfig(vocab_size=1, block_size=16, n_layer=1, n_head=4, n_embd=32)
    assert code == 0
    assert budget.fmt_bytes(4 * budget.layer_numbers(cfg, 3, 16)) in out.split("Memory (")[1]
    assert budget.fmt_bytes(4 * 3 * 4 * 16 * 16) in out.split("Memory (")[1]


# ----------------------------------------------------------------------------
# the estimate is never perfect: a MemoryError that still happens is one line too

def test_a_memory_error_is_one_line(capsys, monkeypatch):
    import zerollm.teach.shapes as shapes

    def out_of_memory(*args, **kwargs):
        np.empty(2 ** 40, dtype=np.float64)           # 8 TiB: malloc refuses at once, _ArrayMemoryError
    monkeypatch.setattr(shapes, "measure", out_of_memory)
    code, out, err = run_main(["shapes"], capsys)
    assert code == 1 and len(err.splitlines()) == 1 and "Traceback" not in err
    assert err.startswith("zerollm shapes: error: out of memory") and "Unable to allocate" in err
    assert "--batch-size" in err                      # shapes takes sizes on its command line


def test_a_memory_error_while_sampling_names_no_training_flags(tmp_path_factory, capsys, monkeypatch):
    """sample has no --batch-size or --n-embd: its hint must not send the user looking for them."""
    from tiny_runs import tiny_run
    import zerollm.cli.commands.sample as sample

    def out_of_memory(*args, **kwargs):
        np.empty(2 ** 40, dtype=np.float64)
    monkeypatch.setattr(sample, "run", out_of_memory)
    code, _, err = run_main(["sample", "--ckpt", tiny_run(tmp_path_factory, "char")], capsys)
    assert code == 1 and len(err.splitlines()) == 1 and err.startswith("zerollm sample: error: out of memory")
    assert "--batch-size" not in err and "close other programs, or use a smaller model" in err


def test_attention_with_a_long_x_file_is_refused(tmp_path, capsys):
    x = np.zeros((60_000, 2), dtype=np.float32)              # 480 KB on disk, 115 GB of scores
    np.save(tmp_path / "x.npy", x)
    for name in ("wq", "wk", "wv"):
        np.save(tmp_path / f"{name}.npy", np.ones((2, 2), dtype=np.float32))
    code, out, err = run_main(["attention", *[a for n in ("x", "wq", "wk", "wv")
                                             for a in (f"--{n}", str(tmp_path / f"{n}.npy"))]], capsys)
    assert code == 1 and "needs about" in err and "--x" in err and len(err.splitlines()) == 1
