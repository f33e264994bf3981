"""LoRA through the command line: SFT and DPO train adapters only, checkpoints hold adapters + the base's
digest, resume is bit-identical (also after SIGKILL), merge / convert / --adapter, and one-line errors."""

import json
import os
import signal
import subprocess
import sys
import time

import numpy as np
import pytest

from zerollm.interop import hf
from zerollm.training.checkpoint import load_checkpoint
from zerollm.cli.entry import main
from zerollm.data.formats import write_jsonl
from zerollm.training.runlog import read_log

from tiny_runs import acrostic_base, run_main
from zerollm.interop.opening import Source, open_model, save_zerollm


def opened(path):
    """(model, tokenizer, checkpoint) of a zerollm run, step or model directory."""
    o = open_model(Source(ckpt=str(path)), tokenizer="may")
    return o.model, o.tokenizer, o.checkpoint

pytestmark = pytest.mark.slow   # LoRA trainings of every stage through the CLI: not in the fast loop

LORA = ["--lora-r", "4", "--lora-alpha", "8", "--lora-targets", "c_attn,c_proj,c_fc"]


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    """A random base model with a char tokenizer of the poems, acrostic SFT data and preference pairs."""
    folder = tmp_path_factory.mktemp("lora")
    train = acrostic_base(folder, 40, 8)
    write_jsonl(folder / "prefs.jsonl", [{"prompt": a["prompt"], "chosen": a["completion"],
                                          "rejected": b["completion"]} for a, b in zip(train, train[1:])])
    return folder


def sft(setup, out, *extra):
    return main(["sft", "--init", str(setup / "base"), "--data", str(setup / "train.jsonl"), "--out", str(out),
                 "--batch-size", "4", "--lr", "1e-2", "--lr-decay-iters", "8", "--warmup-iters", "2",
                 "--eval-interval", "100", "--checkpoint-interval", "2", "--no-progress", *LORA, *extra])


def losses(run):
    return [(r["step"], r["loss"]) for r in read_log(run / "log.jsonl") if "loss" in r]


@pytest.fixture(scope="module")
def lora_run(setup):
    out = setup / "sft-lora"
    assert sft(setup, out, "--max-iters", "8") == 0
    return out


def test_checkpoint_holds_adapters_and_new_rows_only_and_the_base_stays_frozen(lora_run, setup):
    ckpt = load_checkpoint(lora_run)
    names = set(ckpt.params)
    assert names and all(n.endswith((".lora_A", ".lora_B")) or n == "wte.new_rows" for n in names)
    assert "wte.new_rows" in names                                 # the chat template's rows train
    assert set(ckpt.optimizer_state["m"]) == names                 # no AdamW state for the base
    assert ckpt.objective["lora"]["r"] == 4 and ckpt.objective["start"]["digest"]
    model, _, _ = opened(lora_run)
    base = open_model(Source(ckpt=setup / "base"), tokenizer="skip").model
    V0 = base.config.vocab_size
    for name, value in base.params.items():                        # bit-identical base after training
        assert np.array_equal(model.params[name][:V0] if name == "wte.weight" else model.params[name], value), name
    assert any(np.abs(a).max() > 0 for n, a in model.lora.adapters.items() if n.endswith("lora_B"))


def test_resume_is_bit_identical(lora_run, setup, tmp_path):
    out = tmp_path / "half"
    assert sft(setup, out, "--max-iters", "4") == 0
    assert main(["sft", "--out", str(out), "--resume", "--max-iters", "8", "--no-progress"]) == 0
    assert losses(out) == losses(lora_run)
    a, b = load_checkpoint(out).params, load_checkpoint(lora_run).params
    assert all(np.array_equal(a[k], b[k]) for k in b)


def test_resume_after_sigkill_is_bit_identical(lora_run, setup, tmp_path):
    out = tmp_path / "killed"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    cmd = [sys.executable, "-m", "zerollm", "sft", "--init", str(setup / "base"), "--data", str(setup / "train.jsonl"),
           "--out", str(out), "--batch-size", "4", "--lr", "1e-2", "--lr-decay-iters", "8", "--warmup-iters", "2",
           "--eval-interval", "100", "--checkpoint-interval", "2", "--no-progress", "--max-iters", "100000", *LORA]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
    deadline = time.time() + 300            # generous: a loaded CI machine starts Python slowly, and a kill
    while proc.poll() is None and time.time() < deadline:        # before the first checkpoint proves nothing
        if (out / "log.jsonl").exists() and len(losses(out)) >= 5 and (out / "latest.json").exists():
            break
        time.sleep(0.05)
    assert proc.poll() is None, "the run ended before it could be killed"
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=30)
    saved = json.loads((out / "latest.json").read_text())["step"]
    assert 2 <= saved
    # a fast machine may have checkpointed past step 8 before the kill: resume at least one step beyond it
    assert main(["sft", "--out", str(out), "--resume", "--max-iters", str(max(8, saved + 1)), "--no-progress"]) == 0
    assert losses(out)[:8] == losses(lora_run)


def test_merge_equals_unmerged_and_sample_works(lora_run, setup, tmp_path, capsys):
    merged_dir = tmp_path / "merged"
    code, out, err = run_main(["merge", "--from", lora_run, "--to", merged_dir], capsys)
    assert code == 0, err
    model, _, _ = opened(lora_run)
    merged, _, _ = opened(merged_dir)
    assert merged.lora is None and model.lora is not None
    idx = np.arange(1, 20)[None] % model.config.vocab_size
    a, b = model.forward(idx)[0], merged.forward(idx)[0]
    base = open_model(Source(ckpt=setup / "base"), tokenizer="skip").model
    assert np.abs(a - b).max() < 1e-5                               # merged == unmerged after training
    assert np.abs(a[..., :base.config.vocab_size] - base.forward(idx)[0]).max() > 1e-3   # and training changed it
    texts = []
    for ckpt in (lora_run, merged_dir):
        code, out, err = run_main(["sample", "--ckpt", ckpt, "--prompt", "春", "--max-new-tokens", "6",
                                   "--temperature", "0"], capsys)
        assert code == 0, err
        texts.append(out)
    assert texts[0] == texts[1]


def test_convert_writes_a_peft_adapter_that_sample_and_eval_read_back(lora_run, setup, tmp_path, capsys):
    dst = tmp_path / "hf"
    code, out, err = run_main(["convert", "--from", lora_run, "--to", dst], capsys)
    assert code == 0, err
    config = json.loads((dst / "adapter" / "adapter_config.json").read_text())
    assert config["r"] == 4 and config["lora_alpha"] == 8 and config["fan_in_fan_out"] is True
    assert "transformer.h.0.attn.c_attn" in config["target_modules"]
    outs = []
    for argv in (["--ckpt", lora_run], ["--hf", dst, "--adapter", dst / "adapter"]):
        code, out, err = run_main(["sample", *argv, "--prompt", "春", "--max-new-tokens", "6", "--temperature", "0",
                                   "--no-chat"], capsys)
        assert code == 0, err
        outs.append(out)
    assert outs[0] == outs[1]
    # chat and serve load their model through the same zerollm.cli.source, --adapter included
    import argparse
    from zerollm.cli.source import load_source
    model, _ = load_source(argparse.Namespace(ckpt=None, hf=str(dst), gguf=None, adapter=str(dst / "adapter"),
                                              force=None), "zerollm chat")
    assert model.lora is not None and model.lora.config.r == 4
    # a stage can start from base + adapter (folded in), and the start records the adapter
    out_dir = tmp_path / "sft2"
    assert main(["sft", "--hf", str(dst), "--adapter", str(dst / "adapter"), "--data", str(setup / "train.jsonl"),
                 "--out", str(out_dir), "--max-iters", "1", "--batch-size", "2", "--no-progress",
                 "--eval-interval", "100", "--lora-r", "2"]) == 0
    assert load_checkpoint(out_dir).objective["start"]["adapter"] == str(dst / "adapter")


def test_dpo_with_lora_uses_the_base_as_reference(lora_run, setup, tmp_path):
    from zerollm.align.stage import frozen_reference
    model, _, _ = opened(lora_run)
    ref = frozen_reference(model, None, None, 0)
    assert ref.lora is None and ref.params["h.0.attn.c_attn.weight"] is model.params["h.0.attn.c_attn.weight"]
    out = tmp_path / "dpo"
    assert main(["dpo", "--init", str(lora_run), "--data", str(setup / "prefs.jsonl"), "--out", str(out),
                 "--max-iters", "2", "--batch-size", "2", "--no-progress", "--lora-r", "2"]) == 0
    assert all(n.endswith((".lora_A", ".lora_B")) for n in load_checkpoint(out).params)


@pytest.mark.parametrize("flags, fragment, exit_code", [
    (["--lora-r", "0"], "argument --lora-r", 2),
    (["--lora-dropout", "1", "--lora-r", "2"], "argument --lora-dropout", 2),
    (["--lora-r", "2", "--lora-targets", "nope"], "matches no linear layer", 1),
    # the choices are named as --help names them (c_attn, not attn.c_attn)
    (["--lora-r", "2", "--lora-targets", "nope"], "choose from c_attn, c_fc, c_proj, down_proj", 1),
    (["--lora-r", "2", "--lora-targets", ""], "must name at least one module", 1),
    (["--lora-alpha", "4"], "needs --lora-r", 1),
])
def test_bad_lora_flags_are_one_line_errors(setup, tmp_path, capsys, flags, fragment, exit_code):
    code, out, err = run_main(["sft", "--init", setup / "base", "--data", setup / "train.jsonl",
                               "--out", tmp_path / "bad", "--no-progress", *flags], capsys)
    assert code == exit_code and fragment in err and len(err.strip().splitlines()) == 1, err
    assert not (tmp_path / "bad").exists()


def test_a_changed_base_and_merging_into_its_own_run_are_refused(lora_run, setup, tmp_path, capsys):
    import shutil
    base, run = tmp_path / "base", tmp_path / "run"
    shutil.copytree(setup / "base", base)
    assert main(["sft", "--init", str(base), "--data", str(setup / "train.jsonl"), "--out", str(run),
                 "--max-iters", "1", "--batch-size", "2", "--no-progress", "--lora-r", "2"]) == 0
    model = open_model(Source(ckpt=base), tokenizer="skip").model
    model.params["ln_f.weight"] += 1
    save_zerollm(model, base, tokenizer=open_model(Source(ckpt=base), tokenizer="may").tokenizer, overwrite=True)
    for argv in (["sft", "--out", run, "--resume", "--max-iters", "2", "--no-progress"],
                 ["sample", "--ckpt", run, "--max-new-tokens", "2"]):
        code, out, err = run_main(argv, capsys)
        assert code == 1 and "digest" in err and len(err.strip().splitlines()) == 1, err
    code, out, err = run_main(["merge", "--from", lora_run, "--to", lora_run / "merged"], capsys)
    assert code == 1 and "overlap" in err and len(err.strip().splitlines()) == 1, err



def test_merge_never_writes_over_a_folder_someone_filled(lora_run, tmp_path, capsys):
    """--to must be new or empty: a folder holding the user's own latest.json (not a run: it names no
    checkpoint) kept it; a --to inside another run or a file are refused too; nothing is written."""
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "latest.json").write_text("my notes")
    code, _, err = run_main(["merge", "--from", lora_run, "--to", mine], capsys)
    assert code == 1 and "already holds files (latest.json)" in err and len(err.strip().splitlines()) == 1, err
    assert os.listdir(mine) == ["latest.json"] and (mine / "latest.json").read_text() == "my notes"
    (tmp_path / "file").write_text("x")
    code, _, err = run_main(["merge", "--from", lora_run, "--to", tmp_path / "file"], capsys)
    assert code == 1 and "is a file" in err
    step = sorted(p for p in lora_run.iterdir() if p.name.startswith("step-"))[-1]
    code, _, err = run_main(["merge", "--from", lora_run, "--to", step / "merged"], capsys)
    assert code == 1 and "overlap" in err, err
    (tmp_path / "empty").mkdir()
    assert run_main(["merge", "--from", lora_run, "--to", tmp_path / "empty"], capsys)[0] == 0


@pytest.mark.parametrize("stage, extra", [
    ("reward", ["--data", "prefs.jsonl", "--batch-size", "2"]),
    ("ppo", ["--data", "train.jsonl", "--reward", "acrostic", "--prompts-per-step", "2", "--max-new-tokens", "4",
             "--epochs", "1", "--minibatches", "1"]),
    ("grpo", ["--data", "train.jsonl", "--reward", "acrostic", "--prompts-per-step", "1", "--group-size", "2",
              "--max-new-tokens", "4"]),
])
def test_reward_ppo_and_grpo_train_adapters_and_their_heads_and_resume(lora_run, setup, tmp_path, stage, extra):
    """The reward / value head trains beside the adapters; a resumed run equals an uninterrupted one."""
    extra = [str(setup / a) if a.endswith(".jsonl") else a for a in extra]
    common = [stage, "--init", str(lora_run), *extra, "--no-progress", "--lora-r", "2", "--checkpoint-interval", "1",
              "--eval-interval", "100", "--warmup-iters", "0", "--lr-decay-iters", "2"]
    whole, half = tmp_path / "whole", tmp_path / "half"
    assert main([*common, "--out", str(whole), "--max-iters", "2"]) == 0
    assert main([*common, "--out", str(half), "--max-iters", "1"]) == 0
    assert main([stage, "--out", str(half), "--resume", "--max-iters", "2", "--no-progress"]) == 0
    assert losses(half) == losses(whole)
    names = set(load_checkpoint(whole).params)
    head = {"reward": "score.", "ppo": "v_head."}.get(stage)
    assert all(n.endswith((".lora_A", ".lora_B")) or (head and n.startswith(head)) for n in names), names
    assert head is None or any(n.startswith(head) for n in names)


def test_train_with_lora_freezes_the_seeded_model_and_resumes(tmp_path, capsys):
    from tiny_runs import TINY_MODEL, tiny_text
    text = tiny_text(tmp_path)
    argv = ["train", "--data", text, *TINY_MODEL, "--lora-r", "2", "--lora-targets", "c_attn,c_fc", "--lr-decay-iters", "4",
            "--warmup-iters", "0"]
    whole, half = tmp_path / "whole", tmp_path / "half"
    assert run_main([*argv, "--out", whole, "--max-iters", "4"], capsys)[0] == 0
    assert run_main([*argv, "--out", half], capsys)[0] == 0                       # 2 steps
    assert run_main(["train", "--out", half, "--resume", "--max-iters", "4", "--no-progress"], capsys)[0] == 0
    assert losses(half) == losses(whole)
    assert all(n.endswith((".lora_A", ".lora_B")) for n in load_checkpoint(whole).params)
    code, out, err = run_main(["sample", "--ckpt", whole, "--max-new-tokens", "5", "--seed", "0"], capsys)
    assert code == 0, err


def test_dry_run_counts_lora_and_the_reference(lora_run, setup, capsys):
    totals = {}
    for name, flags in (("full", []), ("lora", ["--lora-r", "2"])):
        code, out, err = run_main(["dpo", "--init", lora_run, "--data", setup / "prefs.jsonl", "--dry-run", *flags],
                                  capsys)
        assert code == 0, err
        totals[name] = out
    assert "frozen reference" in totals["full"] and "adapters only" not in totals["full"]
    assert "frozen reference" not in totals["lora"] and "adapters only" in totals["lora"]
    assert "LoRA r=2" in totals["lora"]


def test_eval_reads_an_adapter(lora_run, setup, tmp_path, capsys):
    dst = tmp_path / "hf"
    assert run_main(["convert", "--from", lora_run, "--to", dst], capsys)[0] == 0
    text = tmp_path / "poems.txt"
    text.write_text("".join(json.loads(l)["completion"] for l in open(setup / "heldout.jsonl", encoding="utf-8")))
    merged = tmp_path / "merged"
    assert run_main(["merge", "--from", lora_run, "--to", merged], capsys)[0] == 0
    code, plain, err = run_main(["eval", "--ckpt", merged, "--data", text], capsys)
    assert code == 0, err
    code, out, err = run_main(["eval", "--ckpt", lora_run, "--data", text], capsys)
    assert code == 0, err
    assert out.split("loss ")[1].split()[0] == plain.split("loss ")[1].split()[0]
    base = tmp_path / "base-z"                         # the exported base, back as a zerollm model directory
    assert run_main(["convert", "--from", dst, "--to", base], capsys)[0] == 0
    code, adapted, err = run_main(["eval", "--ckpt", base, "--adapter", dst / "adapter", "--data", text], capsys)
    assert code == 0, err
    assert abs(float(adapted.split("loss ")[1].split()[0]) - float(plain.split("loss ")[1].split()[0])) < 2e-4


@pytest.fixture(scope="module")
def converted(lora_run, tmp_path_factory):
    dst = tmp_path_factory.mktemp("converted") / "hf"
    assert main(["convert", "--from", str(lora_run), "--to", str(dst)]) == 0
    return dst


@pytest.mark.parametrize("field, value, words", [("lora_alpha", "x", "lora_alpha must be a number, got 'x'"),
                                                 ("r", [4], "r must be a whole number >= 1, got [4]"),
                                                 ("lora_dropout", [8], "lora_dropout must be a number, got [8]"),
                                                 ("r", 10**9, "but this model needs (1000000000, ")])
def test_a_damaged_adapter_config_is_one_line_for_sample(converted, tmp_path, capsys, field, value, words):
    import shutil
    adapter = tmp_path / "ad"
    shutil.copytree(converted / "adapter", adapter)
    config = json.loads((adapter / "adapter_config.json").read_text())
    (adapter / "adapter_config.json").write_text(json.dumps({**config, field: value}))
    code, out, err = run_main(["sample", "--hf", converted, "--adapter", adapter, "--prompt", "春",
                               "--max-new-tokens", "2"], capsys)
    assert code == 1 and len(err.strip().splitlines()) == 1 and "Traceback" not in err, err
    assert err.startswith("zerollm sample: error: ") and words in err, err
    if field != "r" or value != 10**9:
        assert f"{adapter}/adapter_config.json: {field}" in err


def test_merge_on_a_full_disk_leaves_no_empty_folder(lora_run, tmp_path):
    """A write that fails (here ulimit -f, as a full disk) used to leave an empty --to behind."""
    import resource
    import subprocess
    import sys

    def small_files():
        resource.setrlimit(resource.RLIMIT_FSIZE, (2048, 2048))
    dst = tmp_path / "merged"
    res = subprocess.run([sys.executable, "-m", "zerollm", "merge", "--from", str(lora_run), "--to", str(dst)],
                         capture_output=True, text=True, timeout=120, preexec_fn=small_files)
    assert res.returncode == 1 and "the disk (or your quota, or ulimit -f) is full" in res.stderr, res.stderr
    assert len(res.stderr.strip().splitlines()) == 1 and not dst.exists()
    assert [p.name for p in tmp_path.iterdir()] == []


def test_modules_to_save_train_whole_resume_merge_and_go_to_peft_and_back(lora_run, setup, tmp_path, capsys):
    """--lora-modules-to-save wte: the checkpoint holds the whole table (the chat template's rows in it) beside
    the adapters; resume is bit-identical; merge = unmerged; convert writes a PEFT adapter with the table under
    peft's name, peft gives zerollm's logits on the exported base, and --adapter reads it back."""
    save = ["--lora-modules-to-save", "wte"]
    whole, half = tmp_path / "whole", tmp_path / "half"
    assert sft(setup, whole, "--max-iters", "4", *save) == 0
    assert sft(setup, half, "--max-iters", "2", *save) == 0
    assert main(["sft", "--out", str(half), "--resume", "--max-iters", "4", "--no-progress"]) == 0
    assert losses(half) == losses(whole)
    ckpt = load_checkpoint(whole)
    assert {n for n in ckpt.params if not n.endswith((".lora_A", ".lora_B"))} == {"wte.weight"}
    assert ckpt.objective["lora"]["modules_to_save"] == ["wte"]
    assert all(np.array_equal(load_checkpoint(half).params[k], v) for k, v in ckpt.params.items())
    model, _, _ = opened(whole)
    base = open_model(Source(ckpt=setup / "base"), tokenizer="skip").model
    V0 = base.config.vocab_size
    assert np.array_equal(model.params["wte.weight"], ckpt.params["wte.weight"])
    assert not np.array_equal(model.params["wte.weight"][:V0], base.params["wte.weight"])   # the base rows trained
    code, _, err = run_main(["merge", "--from", whole, "--to", tmp_path / "merged"], capsys)
    assert code == 0, err
    idx = np.arange(1, 20)[None] % model.config.vocab_size
    logits = model.forward(idx)[0]
    assert np.abs(opened(tmp_path / "merged")[0].forward(idx)[0] - logits).max() < 1e-5
    code, _, err = run_main(["convert", "--from", whole, "--to", tmp_path / "hf"], capsys)
    assert code == 0, err
    config = json.loads((tmp_path / "hf" / "adapter" / "adapter_config.json").read_text())
    assert config["modules_to_save"] == ["wte", "lm_head"]
    back = open_model(Source(hf=tmp_path / "hf", adapter=tmp_path / "hf" / "adapter"), tokenizer="skip").model
    assert back.lora.config.modules_to_save == ("wte",) and np.abs(back.forward(idx)[0] - logits).max() < 1e-5
    torch = pytest.importorskip("torch")
    pytest.importorskip("peft")
    from peft import PeftModel
    from transformers import AutoModelForCausalLM
    twin = PeftModel.from_pretrained(AutoModelForCausalLM.from_pretrained(tmp_path / "hf"),
                                     tmp_path / "hf" / "adapter").eval()
    theirs = twin(input_ids=torch.from_numpy(idx)).logits.detach().numpy()
    assert np.abs(theirs - logits).max() < 1e-5
