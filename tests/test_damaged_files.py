"""Damaged run directories and model files: every file read back is checked, every error names the
file and the field, and nothing ends in a traceback. Weights that are not finite are refused at load."""

import json
import math
import os
import shutil

import numpy as np
import pytest

from tiny_runs import TINY_MODEL, copy_run, run_main, step_dir, tiny_run, tiny_text
from zerollm.cli import main
from zerollm.io.safetensors import load_file, load_metadata, save_file


@pytest.fixture(scope="module")
def pristine(tmp_path_factory):
    return tiny_run(tmp_path_factory, "char")


def edit_json(path, change):
    data = json.loads(path.read_text())
    change(data)
    path.write_text(json.dumps(data))


def set_in(*keys_and_value):
    """A change that sets data[k1][k2]... = value (or deletes it, with value DELETE)."""
    *keys, value = keys_and_value

    def change(data):
        for k in keys[:-1]:
            data = data[k]
        if value is DELETE:
            del data[keys[-1]]
        else:
            data[keys[-1]] = value
    return change


DELETE = object()
DEEP = "[" * 100_000 + "]" * 100_000     # valid JSON that json's decoder cannot follow: RecursionError


def nan_weights(path, name=None):
    tensors = load_file(path)
    meta = load_metadata(path)
    name = name or sorted(tensors)[0]
    tensors[name] = tensors[name].copy()
    tensors[name].flat[0] = np.nan
    save_file(tensors, path, meta)


def opposite_infinities(path):
    """+inf and -inf in one tensor: their sum is NaN (NumPy warned "invalid value" before the error line)."""
    tensors = load_file(path)
    name = sorted(tensors)[0]
    tensors[name] = tensors[name].copy()
    tensors[name].flat[:2] = [np.inf, -np.inf]
    save_file(tensors, path, load_metadata(path))


def optimizer_meta(change):
    def damage(step):
        path = step / "optimizer.safetensors"
        meta = load_metadata(path)
        state = json.loads(meta["zerollm.optimizer"])
        change(state)
        save_file(load_file(path), path, {"zerollm.optimizer": json.dumps(state)})
    return damage


# (damage applied to the latest step directory, the words the one-line error must hold)
CHECKPOINT_DAMAGE = {
    "train: unknown key": (lambda s: edit_json(s / "config.json", set_in("train", "lrr", 0.1)),
                           ["config.json", "unknown field(s) 'lrr'"]),
    "train: wrong type": (lambda s: edit_json(s / "config.json", set_in("train", "lr", "fast")),
                          ["config.json", "train.lr must be a finite number"]),
    "train: out of range": (lambda s: edit_json(s / "config.json", set_in("train", "batch_size", -3)),
                            ["config.json", "train.batch_size must be a whole number from 1"]),
    "train: NaN": (lambda s: (s / "config.json").write_text(
        (s / "config.json").read_text().replace('"lr": 0.001', '"lr": NaN')), ["train.lr"]),
    "train: not an object": (lambda s: edit_json(s / "config.json", set_in("train", [1, 2])),
                             ["config.json", '"train" must be a JSON object']),
    "model: unknown key": (lambda s: edit_json(s / "config.json", set_in("model", "n_experts", 8)),   # a typo
                           ["config.json", "model: unknown field(s) 'n_experts'"]),
    "model: wrong type": (lambda s: edit_json(s / "config.json", set_in("model", "n_layer", "1")),
                          ["config.json", "model.n_layer must be a whole number"]),
    "model: float size": (lambda s: edit_json(s / "config.json", set_in("model", "n_embd", 8.0)),
                          ["config.json", "model.n_embd must be a whole number"]),
    "model: impossible": (lambda s: edit_json(s / "config.json", set_in("model", "n_head", 3)),
                          ["config.json", "not divisible by n_head=3"]),
    "model: missing": (lambda s: edit_json(s / "config.json", set_in("model", DELETE)),
                       ["config.json", "is damaged: it is not a zerollm checkpoint config (it has no 'model' "
                                        "settings)"]),
    "config: version": (lambda s: edit_json(s / "config.json", set_in("version", 99)), ["version 99"]),
    "config: not JSON": (lambda s: (s / "config.json").write_text("{\"format\": "), ["config.json", "not valid JSON"]),
    "config: nested too deeply": (lambda s: (s / "config.json").write_text(DEEP), ["config.json", "nested too deeply"]),
    "config: tokenizer": (lambda s: edit_json(s / "config.json", set_in("tokenizer", 5)),
                          ["config.json", '"tokenizer" must be a name or null']),
    "rng: a list": (lambda s: (s / "rng.json").write_text("[]"), ["rng.json", "JSON object"]),
    "rng: junk state": (lambda s: edit_json(s / "rng.json", set_in("data", "state", "state", "x")),
                        ["rng.json", '"data"', "damaged PCG64 state"]),
    "rng: unknown generator": (lambda s: edit_json(s / "rng.json", set_in("data", "bit_generator", "system")),
                               ["rng.json", "not a saved random generator state"]),
    "rng: not JSON": (lambda s: (s / "rng.json").write_bytes(b"\xff\xfe"), ["rng.json", "not UTF-8"]),
    "state: step as text": (lambda s: edit_json(s / "state.json", set_in("step", "2")),
                            ["state.json", "step must be a whole number"]),
    "state: negative step": (lambda s: edit_json(s / "state.json", set_in("step", -2)),
                             ["state.json", "step must be a whole number >= 0"]),
    "state: nested too deeply": (lambda s: (s / "state.json").write_text(DEEP), ["state.json", "nested too deeply"]),
    "state: no step": (lambda s: edit_json(s / "state.json", set_in("step", DELETE)), ["state.json", "step"]),
    "state: threads": (lambda s: edit_json(s / "state.json", set_in("threads", 0)), ["state.json", "threads"]),
    "state: loss": (lambda s: edit_json(s / "state.json", set_in("best_val_loss", "low")),
                    ["state.json", "best_val_loss must be a number or null"]),
    "state: objective state": (lambda s: edit_json(s / "state.json", set_in("objective_state", [])),
                               ["state.json", "objective_state must be a JSON object"]),
    "optimizer: lr": (optimizer_meta(set_in("lr", "x")), ["optimizer.safetensors", "lr must be a number"]),
    "optimizer: betas": (optimizer_meta(set_in("betas", [2, 3])), ["optimizer.safetensors", "betas"]),
    "optimizer: betas not a list": (optimizer_meta(set_in("betas", 5)), ["optimizer.safetensors", "betas"]),
    "optimizer: decay": (optimizer_meta(set_in("decay", 5)), ["optimizer.safetensors", "decay"]),
    "optimizer: step": (optimizer_meta(set_in("step", -1)), ["optimizer.safetensors", "step"]),
    "optimizer: NaN moment": (lambda s: nan_weights(s / "optimizer.safetensors"),
                              ["optimizer.safetensors", "NaN or infinity"]),
    "weights: NaN": (lambda s: nan_weights(s / "model.safetensors"), ["model.safetensors", "NaN or infinity"]),
    "weights: inf and -inf": (lambda s: opposite_infinities(s / "model.safetensors"),
                              ["model.safetensors", "NaN or infinity"]),
    "weights: cut short": (lambda s: (s / "model.safetensors").write_bytes(
        (s / "model.safetensors").read_bytes()[:-7]), ["model.safetensors"]),
    "tokenizer: junk": (lambda s: (s / "tokenizer.json").write_text('{"format": "zerollm-tokenizer", "version": 1, '
                                                                    '"type": "char", "chars": 5}'),
                        ["tokenizer.json"]),
    "tokenizer: another kind": (lambda s: (s / "tokenizer.json").write_text(
        '{"format": "zerollm-tokenizer", "version": 1, "type": "byte"}'),
        ["tokenizer.json is a byte tokenizer", "trained with a char tokenizer"]),
    "tokenizer: more tokens": (lambda s: edit_json(s / "tokenizer.json",
                                                   lambda d: d["chars"].extend(["\u00e4", "\u00f6"])),
                               ["tokenizer.json has", "but the model has only"]),
}
# which commands read what: a damage only matters to the commands that read that file
READERS = {"train": ["train", "--resume", "--max-iters", "3", "--no-progress", "--out", "{run}"],
           "sample": ["sample", "--ckpt", "{run}", "--max-new-tokens", "2", "--seed", "0"],
           "eval": ["eval", "--ckpt", "{run}", "--data", "{text}"]}
RESUME_ONLY = ("train:", "rng:", "optimizer:", "state: objective")      # sample and eval never read these
NOT_ON_RESUME = ("tokenizer:",)         # a resume reads the run's prepared data/tokenizer.json instead
PAIRS = [(case, reader) for case in sorted(CHECKPOINT_DAMAGE) for reader in sorted(READERS)
         if (reader == "train" and not case.startswith(NOT_ON_RESUME))
         or (reader != "train" and not case.startswith(RESUME_ONLY))]


@pytest.mark.parametrize("case, reader", PAIRS)
def test_damaged_checkpoint_is_one_clear_line(case, reader, pristine, tmp_path, capsys):
    run = copy_run(pristine, tmp_path)
    damage, words = CHECKPOINT_DAMAGE[case]
    damage(step_dir(run))
    argv = [a.format(run=run, text=tiny_text(tmp_path)) for a in READERS[reader]]
    code, out, err = run_main(argv, capsys)
    assert code == 1 and len(err.splitlines()) == 1 and "Traceback" not in err, err
    for word in words:
        assert word in err, (word, err)


def test_the_checkpoint_before_a_damaged_one_is_named_in_the_error(pristine, tmp_path, capsys):
    run = copy_run(pristine, tmp_path)
    nan_weights(step_dir(run) / "model.safetensors")
    code, _, err = run_main(["sample", "--ckpt", str(run), "--max-new-tokens", "2"], capsys)
    assert code == 1 and "use an earlier checkpoint" in err
    code, out, _ = run_main(["sample", "--ckpt", str(run / "step-0000001"), "--max-new-tokens", "2"], capsys)
    assert code == 0 and out


# ----------------------------------------------------------------------------
# prepared data, Hugging Face and zerollm model directories

META_DAMAGE = {
    "no tokenizer": (set_in("tokenizer", DELETE), "names no tokenizer (byte, char or bpe)"),
    "vocab as text": (set_in("vocab_size", "58"), "vocab_size must be a whole number"),
    "no token count": (set_in("train_tokens", DELETE), "train_tokens must be a whole number"),
    "dtype": (set_in("dtype", "float16"), "unknown dtype"),
    "nested too deeply": (DEEP, "nested too deeply"),
}


@pytest.mark.parametrize("case", sorted(META_DAMAGE))
def test_damaged_prepared_data(case, pristine, tmp_path, capsys):
    run = copy_run(pristine, tmp_path)
    change, words = META_DAMAGE[case]
    if isinstance(change, str):
        (run / "data" / "meta.json").write_text(change)
    else:
        edit_json(run / "data" / "meta.json", change)
    code, _, err = run_main(["train", "--data", str(run / "data"), "--tokenizer", "char", "--out",
                             str(tmp_path / "new"), "--no-progress"], capsys)
    assert code == 1 and "meta.json" in err and words in err and len(err.splitlines()) == 1, err
    assert not (tmp_path / "new").exists()


@pytest.fixture
def hf_dir(pristine, tmp_path, capsys):
    code = main(["convert", "--from", str(pristine), "--to", str(tmp_path / "hf")])
    capsys.readouterr()
    assert code == 0
    return tmp_path / "hf"


@pytest.fixture
def zerollm_dir(hf_dir, tmp_path, capsys):
    code = main(["convert", "--from", str(hf_dir), "--to", str(tmp_path / "z")])
    capsys.readouterr()
    assert code == 0
    return tmp_path / "z"


def test_hf_weights_with_nan_are_refused(hf_dir, capsys):
    nan_weights(hf_dir / "model.safetensors", "transformer.h.0.mlp.c_fc.weight")
    code, _, err = run_main(["sample", "--hf", str(hf_dir), "--max-new-tokens", "2"], capsys)
    assert code == 1 and "NaN or infinity" in err and "h.0.mlp.c_fc.weight" in err


def test_hf_config_of_the_wrong_type(hf_dir, capsys):
    edit_json(hf_dir / "config.json", set_in("n_layer", "1"))
    code, _, err = run_main(["sample", "--hf", str(hf_dir), "--max-new-tokens", "2"], capsys)
    assert code == 1 and "config.json" in err and len(err.splitlines()) == 1 and "Traceback" not in err


@pytest.mark.parametrize("damage, words", [
    (lambda d: nan_weights(d / "model.safetensors"), "NaN or infinity"),
    (lambda d: edit_json(d / "config.json", set_in("model", "n_layers", 2)), "unknown field(s) 'n_layers'"),
    (lambda d: edit_json(d / "config.json", set_in("model", "dropout", 2.0)), "model.dropout must be"),
])
def test_damaged_zerollm_model_directory(zerollm_dir, tmp_path, capsys, damage, words):
    damage(zerollm_dir)
    code, _, err = run_main(["convert", "--from", str(zerollm_dir), "--to", str(tmp_path / "again")], capsys)
    assert code == 1 and words in err and len(err.splitlines()) == 1, err
    assert not (tmp_path / "again").exists()


# ----------------------------------------------------------------------------
# the log: strict JSON, and a line cut short by a crash does not stop a resume

def strict_records(path):
    def refuse(constant):
        raise ValueError(f"not JSON: {constant}")
    return [json.loads(line, parse_constant=refuse) for line in path.read_text().splitlines()]


def test_log_is_strict_json_without_clipping(tmp_path, capsys):
    code = main(["train", "--data", str(tiny_text(tmp_path)), "--out", str(tmp_path / "r"), "--tokenizer", "char",
                 "--n-layer", "1", "--n-head", "2", "--n-embd", "8", "--block-size", "16", "--batch-size", "2",
                 "--max-iters", "2", "--eval-interval", "1", "--eval-iters", "1", "--sample-tokens", "0",
                 "--grad-clip", "0", "--no-progress"])
    capsys.readouterr()
    records = strict_records(tmp_path / "r" / "log.jsonl")
    steps = [r for r in records if "loss" in r]
    assert code == 0 and len(steps) == 2 and all(r["grad_norm"] is None for r in steps)   # was a bare NaN
    assert all(math.isfinite(r["loss"]) for r in steps)


def test_resume_after_a_log_line_cut_short(pristine, tmp_path, capsys):
    run = copy_run(pristine, tmp_path)
    with open(run / "log.jsonl", "a", encoding="utf-8") as f:
        f.write('{"step": 2, "loss": 4.0, "lr"')          # SIGKILL in the middle of a line
    code, _, err = run_main(["train", "--resume", "--out", str(run), "--max-iters", "3", "--no-progress"], capsys)
    assert code == 0, err
    steps = [r["step"] for r in strict_records(run / "log.jsonl") if "loss" in r]
    assert steps == [0, 1, 2]


def test_a_pointer_or_log_line_nested_too_deeply_is_passed_over(pristine, tmp_path, capsys):
    """latest.json and log.jsonl lines are read leniently (a run killed mid-write leaves them broken): one
    that json cannot even follow (100,000 levels: RecursionError) is passed over like any broken one."""
    run = copy_run(pristine, tmp_path)
    (run / "latest.json").write_text(DEEP)
    with open(run / "log.jsonl", "a", encoding="utf-8") as f:
        f.write(DEEP + "\n")
    code, _, err = run_main(["sample", "--ckpt", str(run), "--max-new-tokens", "2", "--seed", "0"], capsys)
    assert code == 0, err
    code, _, err = run_main(["report", str(run), "--out", str(tmp_path / "r.html")], capsys)
    assert code == 0 and (tmp_path / "r.html").exists(), err
    code, _, err = run_main(["train", "--resume", "--out", str(run), "--max-iters", "3", "--no-progress"], capsys)
    assert code == 0, err
    assert [r["step"] for r in strict_records(run / "log.jsonl") if "loss" in r] == [0, 1, 2]


# ----------------------------------------------------------------------------
# a fresh run's --out: what it would replace

def test_a_fresh_run_never_replaces_files_someone_else_made(pristine, tmp_path, capsys):
    """train --out FOLDER where the user keeps a log.jsonl, loss.png, latest.json of their own: refused, the
    files untouched; --force replaces them. A folder left by a run killed before its first checkpoint (its
    log.jsonl is zerollm's) is started over without --force; an --out inside a checkpoint is refused."""
    text = tiny_text(tmp_path)
    fresh = ["train", "--data", text, "--tokenizer", "char", *TINY_MODEL]
    mine = tmp_path / "mine"
    mine.mkdir()
    for name in ("log.jsonl", "loss.png", "latest.json"):
        (mine / name).write_text(f"my {name}")
    code, _, err = run_main([*fresh, "--out", mine], capsys)
    assert code == 1 and len(err.splitlines()) == 1, err
    assert "already holds log.jsonl, loss.png, latest.json, which this command did not create" in err
    assert sorted(os.listdir(mine)) == ["latest.json", "log.jsonl", "loss.png"]
    assert all((mine / n).read_text() == f"my {n}" for n in os.listdir(mine))
    assert run_main([*fresh, "--out", mine, "--force"], capsys)[0] == 0
    assert (mine / "log.jsonl").read_text().startswith('{"step": 0')

    killed = copy_run(pristine, tmp_path, "killed")     # a run that died before its first checkpoint
    for step in killed.glob("step-*"):
        shutil.rmtree(step)
    (killed / "latest.json").unlink()
    with open(killed / "log.jsonl", "a", encoding="utf-8") as f:
        f.write('{"step": 1, "lo')
    assert run_main([*fresh, "--out", killed], capsys)[0] == 0

    code, _, err = run_main([*fresh, "--out", step_dir(pristine) / "inside"], capsys)
    assert code == 1 and "which is a checkpoint" in err and not (step_dir(pristine) / "inside").exists()
    (tmp_path / "a-file").write_text("x")
    code, _, err = run_main([*fresh, "--out", tmp_path / "a-file"], capsys)
    assert code == 1 and "is a file, not a folder" in err and (tmp_path / "a-file").read_text() == "x"
