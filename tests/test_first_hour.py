"""What a new user meets in their first hour (issue 16): safe defaults for `zerollm train`, a prepared
folder that says its own tokenizer, the help and --show-config that show what will run."""

import json
import re

import pytest

from zerollm.cli import main
from zerollm.training import presets
from zerollm.training.presets import PRESETS

pytestmark = pytest.mark.slow   # trainings through the CLI, as in a reader's first hour: not in the fast loop


def run_cli(capsys, *argv):
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture
def shakespeare_slice(tmp_path, shakespeare_path):
    path = tmp_path / "slice.txt"
    path.write_text(shakespeare_path.read_text(encoding="utf-8")[:30_000], encoding="utf-8")
    return path


# ----------------------------------------------------------------------------
# no preset: a small model, never GPT-2 small on a laptop

def test_without_a_preset_train_builds_a_small_model(capsys, tmp_path, shakespeare_slice):
    code, out, _ = run_cli(capsys, "train", "--data", str(shakespeare_slice), "--out", str(tmp_path / "run"),
                           "--dry-run")
    params = int(re.search(r"model: ([\d,]+) parameters", out).group(1).replace(",", ""))
    assert code == 0 and params < 2_000_000, out            # GPTConfig's defaults would be 85,892,352
    assert "block 64" in out and not (tmp_path / "run").exists()


@pytest.mark.parametrize("preset", sorted(PRESETS))
def test_help_lists_every_preset_value(capsys, preset):
    with pytest.raises(SystemExit):
        main(["train", "--help"])
    out = capsys.readouterr().out
    table = out[out.index("preset values"):]
    header = table.splitlines()[0].split()
    column = header.index(preset) - 2                       # "preset values" are two words
    for field, value in PRESETS[preset].items():
        row = next(line.split() for line in table.splitlines() if line.split()[:1] == [field])
        assert row[1 + column] == str(value), (field, row)
    defaults = PRESETS[presets.DEFAULT_PRESET]
    assert re.search(rf"--n-embd INT +\(default {defaults['n_embd']};", out)      # the help's defaults are the real ones


def test_show_config_says_where_each_value_comes_from(capsys, tmp_path):
    code, out, _ = run_cli(capsys, "train", "--preset", "tang", "--n-layer", "6", "--out", str(tmp_path / "run"),
                           "--show-config")
    rows = {line.split()[0]: line.split()[1:] for line in out.splitlines() if line.startswith("  ")}
    assert code == 0 and not (tmp_path / "run").exists()
    assert rows["n_layer"] == ["6", "--n-layer"] and rows["n_embd"] == ["192", "preset", "tang"]
    assert rows["max_iters"] == ["3000", "preset", "tang"] and rows["n_kv_head"] == ["4", "default"]


# ----------------------------------------------------------------------------
# a prepared folder knows its tokenizer

@pytest.fixture
def bpe_folder(capsys, tmp_path, shakespeare_slice):
    folder = tmp_path / "bpe"
    code, _, _ = run_cli(capsys, "prepare", "--data", str(shakespeare_slice), "--tokenizer", "bpe",
                         "--vocab-size", "300", "--out", str(folder))
    assert code == 0
    return folder


@pytest.mark.parametrize("preset", [None, "tang"])         # tang's own tokenizer is char: the folder still wins
def test_a_bpe_folder_trains_without_repeating_the_tokenizer(capsys, tmp_path, bpe_folder, preset):
    run = tmp_path / "run"
    code, _, err = run_cli(capsys, "train", "--data", str(bpe_folder), "--out", str(run), "--max-iters", "2",
                           "--n-layer", "1", "--n-embd", "32", "--no-progress", "--sample-tokens", "0",
                           *(["--preset", preset] if preset else []))
    assert code == 0, err
    latest = json.loads((run / "latest.json").read_text())
    config = json.loads((run / latest["dir"] / "config.json").read_text())
    assert config["train"]["tokenizer"] == "bpe" and config["model"]["vocab_size"] == 300


def test_only_a_real_conflict_is_refused(capsys, tmp_path, bpe_folder):
    code, _, err = run_cli(capsys, "train", "--data", str(bpe_folder), "--out", str(tmp_path / "run"),
                           "--tokenizer", "char", "--dry-run")
    assert code == 1 and err.count("\n") == 1 and "--tokenizer char conflicts" in err and "bpe" in err
    code, _, err = run_cli(capsys, "train", "--data", str(bpe_folder), "--out", str(tmp_path / "run"),
                           "--tokenizer", "bpe", "--dry-run")
    assert code == 0, err


# ----------------------------------------------------------------------------
# zerollm sample: warnings on their own line, --window refused where it cannot work, padded
# vocabularies, control bytes

def favouring_model(folder, tok, vocab_size, favourite):
    """A GPT-2-layout model exported to ``folder`` whose every next token is most likely ``favourite``:
    ln_f outputs its bias b at every position, and wte[favourite] = 10 b makes that logit the largest."""
    import numpy as np
    from zerollm.interop import hf
    from zerollm.model.gpt import GPT, GPTConfig
    model = GPT(GPTConfig(vocab_size=vocab_size, block_size=16, n_layer=1, n_head=2, n_embd=16), seed=0)
    b = np.random.default_rng(0).normal(size=16).astype(np.float32)
    model.params["ln_f.weight"][:] = 0.0
    model.params["ln_f.bias"][:] = b
    model.params["wte.weight"][favourite] = 10 * b
    hf.export(model, folder, tokenizer=tok)
    return folder


@pytest.fixture(scope="module")
def bpe300(shakespeare_path):
    from zerollm.tokenizers.bpe import BPETokenizer
    return BPETokenizer.train(shakespeare_path.read_text(encoding="utf-8")[:20_000], 300)


def sample_cli(*argv):
    """`zerollm sample` in its own process, stdout and stderr in one stream as a terminal shows them."""
    import subprocess
    import sys
    return subprocess.run([sys.executable, "-m", "zerollm", "sample", *argv], stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, text=True, errors="replace", timeout=120)


def test_padded_vocabulary_never_samples_an_id_the_tokenizer_cannot_decode(tmp_path, bpe300):
    padded = bpe300.vocab_size + 20                  # as real checkpoints pad 50257 to 50304
    folder = favouring_model(tmp_path / "m", bpe300, padded, favourite=padded - 1)
    for argv in (["--temperature", "0"], ["--temperature", "1", "--seed", "0"]):
        res = sample_cli("--hf", str(folder), "--prompt", "To be", "--max-new-tokens", "12", *argv)
        assert res.returncode == 0, res.stdout
        assert res.stdout.count("never sampled") == 1 and "the other 20" in res.stdout


@pytest.mark.parametrize("favourite", [27, 0x9b, 0xff])   # ESC, a C1 control byte, a byte that is never UTF-8
def test_control_and_undecodable_bytes_are_shown_escaped(tmp_path, bpe300, favourite):
    folder = favouring_model(tmp_path / "m", bpe300, bpe300.vocab_size, favourite=favourite)
    res = sample_cli("--hf", str(folder), "--prompt", "a", "--max-new-tokens", "3", "--temperature", "0")
    assert res.returncode == 0, res.stdout
    assert res.stdout.startswith("a" + f"\\x{favourite:02x}" * 3)
    assert not any(ord(c) < 32 and c not in "\t\n" or 0x7f <= ord(c) <= 0x9f or c == "\ufffd" for c in res.stdout)


def test_the_context_full_warning_is_a_line_of_its_own_before_the_text(tmp_path, bpe300):
    folder = favouring_model(tmp_path / "m", bpe300, bpe300.vocab_size, favourite=ord("x"))
    res = sample_cli("--hf", str(folder), "--prompt", "a", "--max-new-tokens", "30", "--temperature", "0")
    lines = res.stdout.splitlines()
    assert res.returncode == 0 and lines[0].startswith("zerollm sample: warning: the context is full (16 tokens)")
    assert lines[1] == "a" + "x" * 30 and "--window" not in lines[0]    # learned positions: no window advice


def test_window_on_learned_positions_is_refused(tmp_path, bpe300):
    folder = favouring_model(tmp_path / "m", bpe300, bpe300.vocab_size, favourite=ord("x"))
    res = sample_cli("--hf", str(folder), "--prompt", "a", "--window", "8")
    assert res.returncode == 1 and res.stdout.count("\n") == 1
    assert "--window needs RoPE or sinusoidal positions" in res.stdout
