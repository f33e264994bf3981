"""LoRA against full fine-tuning: 藏头诗 SFT at equal steps, and the cost of a GPT-2-124M-shaped step.

    python scripts/lora_experiment.py acrostic --out runs/lora-exp          # part 1
    python scripts/lora_experiment.py gpt2 --out runs/lora-exp-124m         # part 2
    python scripts/lora_experiment.py recipe --out runs/lora-recipe         # part 3
    python scripts/lora_experiment.py qlora --out runs/qlora-recipe         # part 4

Part 1 pre-trains one small base on the Tang poems, then fine-tunes it on acrostic poems with the same
steps and seed: full fine-tuning, LoRA r = 4, 8, 16 on every linear, and r = 8 on attention only. Each
run is evaluated on heldout prompts (`zerollm tasks eval acrostic`: success with its 95% interval, and
the mean reward, which gives partial credit). Part 2 runs a few SFT and DPO steps of a random model with
GPT-2-124M's shape, full vs LoRA r = 8 vs QLoRA r = 8 on a q8_0 / q4_0 base, and reports each run's step time and peak RSS beside the
`--dry-run` estimate. Part 3 checks the recipe docs/lora.md prints, on the `tang` preset at the docs
test's small size (2 layers x 64 dims): full fine-tuning at --full-lr against LoRA r = 8 on c_attn only
at that same rate (what the docs once taught), on every linear at --lora-lr, and on every linear with
the token table trained whole (--lora-modules-to-save wte). Part 4 trains part 3's best LoRA on a q8_0 and a
q4_0 base (QLoRA) beside the float one, for task success. Every run is its own process, so its peak
RSS is its own (os.wait4).
Sizes are flags: the numbers in docs/lora.md were made at the reduced sizes it states.
"""

import argparse
import json
import os
import re
import subprocess
import sys
import time
from zerollm.interop.opening import Source, open_model, save_zerollm

VARIANTS = {"full": [], "lora r=4": ["--lora-r", "4"], "lora r=8": ["--lora-r", "8"],
            "lora r=16": ["--lora-r", "16"]}
ALL_LINEARS = ["--lora-targets", "c_attn,c_proj,c_fc"]


def zerollm(*argv, capture=False):
    """Run one zerollm command in its own process -> (stdout, seconds, peak RSS in MiB)."""
    t0 = time.perf_counter()
    proc = subprocess.Popen([sys.executable, "-m", "zerollm", *map(str, argv)], text=True,
                            stdout=subprocess.PIPE if capture else subprocess.DEVNULL, stderr=subprocess.PIPE)
    out = proc.stdout.read() if capture else ""
    err = proc.stderr.read()
    _, status, usage = os.wait4(proc.pid, 0)
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"zerollm {' '.join(map(str, argv))} failed:\n{err[-2000:]}")
    return out, time.perf_counter() - t0, usage.ru_maxrss / 1024


def step_ms(run):
    """Median step time of a run's log.jsonl (the first step, which warms caches, left out)."""
    rows = [json.loads(line) for line in open(os.path.join(run, "log.jsonl"), encoding="utf-8")]
    dts = sorted(r["dt_ms"] for r in rows if "dt_ms" in r and r["step"] > 0)
    return dts[len(dts) // 2] if dts else float("nan")


def val_loss(run):
    """The heldout loss of the last evaluation in a run's log.jsonl."""
    rows = [json.loads(line) for line in open(os.path.join(run, "log.jsonl"), encoding="utf-8")]
    return [r["val_loss"] for r in rows if "val_loss" in r][-1]


def trainable(run):
    from zerollm.training.checkpoint import load_checkpoint
    return sum(a.size for name, a in load_checkpoint(run, optimizer=False).params.items())


def acrostic(args):
    out = args.out
    os.makedirs(out, exist_ok=True)
    base = os.path.join(out, "base")
    if not os.path.isdir(base):
        zerollm("train", "--data", "tang", "--out", base, "--n-layer", args.n_layer, "--n-head", 4, "--n-embd",
                args.n_embd, "--block-size", 64, "--batch-size", 16, "--max-iters", args.base_steps,
                "--eval-interval", args.base_steps, "--sample-tokens", 0, "--threads", 1, "--no-progress")
    for split, n in (("train", 600), ("heldout", args.heldout)):
        zerollm("tasks", "make", "acrostic", "--out", os.path.join(out, f"{split}.jsonl"), "--n", n, "--split", split)
    runs = {**VARIANTS, "lora r=8 attention only": ["--lora-r", "8", "--lora-targets", "c_attn,attn.c_proj"]}
    runs = {name: flags + (ALL_LINEARS if flags and "--lora-targets" not in flags else []) +
            (["--lr", args.lora_lr] if flags else []) for name, flags in runs.items()}
    return sft_rows(out, base, runs, ["--max-iters", args.steps, "--eval-interval", args.steps, "--batch-size", 16])


def sft_rows(out, base, runs, common):
    """{name: flags} of SFT runs from ``base`` on OUT/train.jsonl, each scored on OUT/heldout.jsonl, greedy."""
    rows = []
    for name, flags in runs.items():
        run = os.path.join(out, re.sub(r"\W+", "-", name))
        _, seconds, rss = zerollm("sft", "--init", base, "--data", os.path.join(out, "train.jsonl"), "--out", run,
                                  "--eval-data", os.path.join(out, "heldout.jsonl"), "--eval-examples", 16,
                                  *common, "--threads", 1, "--no-progress", *flags)
        text, _, _ = zerollm("tasks", "eval", "acrostic", "--ckpt", run, "--data",
                             os.path.join(out, "heldout.jsonl"), "--temperature", 0, "--json", capture=True)
        summary = json.loads(text)["summary"]
        rows.append(dict(run=name, trainable=trainable(run), step_ms=step_ms(run), peak_rss_mib=rss,
                         val_loss=val_loss(run),
                         success=summary["success_rate"], ci95=summary["ci95"], mean_reward=summary["mean_reward"],
                         seconds=seconds))
        print(json.dumps(rows[-1], ensure_ascii=False), flush=True)
    return rows


def base_and_tasks(args):
    """Part 3's base (the `tang` preset at the docs test's small size, trained once into OUT/base) and the
    acrostic train / heldout files beside it; returns the base's folder."""
    out = args.out
    os.makedirs(out, exist_ok=True)
    base = os.path.join(out, "base")
    if not os.path.isdir(base):
        zerollm("train", "--preset", "tang", "--out", base, "--n-layer", 2, "--n-embd", 64, "--max-iters",
                args.base_steps, "--eval-interval", args.base_steps, "--sample-tokens", 0, "--threads", 1,
                "--no-progress")
    for split, n in (("train", 15000), ("heldout", args.heldout)):       # docs/alignment.md's 15,000: 800 steps
        zerollm("tasks", "make", "acrostic", "--out", os.path.join(out, f"{split}.jsonl"), "--n", n, "--split", split,
                "--seed", 0)                                              # of 16 see each example about once
    return base


def recipe(args):
    """docs/lora.md's recipe against what it replaced, from the `tang` preset at the docs test's small size
    (2 layers x 64 dims, zerollm.io.docsmode.SMALL_MODEL), as issue #57 measured it."""
    out = args.out
    base = base_and_tasks(args)
    full, lora = ["--lr", args.full_lr], ["--lr", args.lora_lr]
    runs = {f"full lr {args.full_lr}": full,
            f"lora r=8 c_attn lr {args.full_lr}": ["--lora-r", "8", "--lora-targets", "c_attn", *full],
            f"lora r=8 all-linear lr {args.lora_lr}": ["--lora-r", "8", *lora],
            f"lora r=8 all-linear + wte lr {args.lora_lr}": ["--lora-r", "8", "--lora-modules-to-save", "wte", *lora]}
    return sft_rows(out, base, runs, ["--max-iters", args.steps, "--eval-interval", args.steps, "--seed", args.seed])


def qlora(args):
    """QLoRA against LoRA on the float base, on part 3's base and data (the `tang` preset at the docs test's small
    size, acrostic SFT): the recipe's LoRA r=8 on every linear + the token table, then the same on a q8_0 and a
    q4_0 base (--quantize-base), same steps, rate and seed."""
    out = args.out
    base = base_and_tasks(args)
    lora = ["--lora-r", "8", "--lora-modules-to-save", "wte", "--lr", args.lora_lr]
    runs = {"lora r=8 + wte, float base": lora, "qlora q8_0 r=8 + wte": [*lora, "--quantize-base", "q8_0"],
            "qlora q4_0 r=8 + wte": [*lora, "--quantize-base", "q4_0"]}
    return sft_rows(out, base, runs, ["--max-iters", args.steps, "--eval-interval", args.steps, "--seed", args.seed])


def gpt2(args):
    """SFT and DPO steps of a random GPT-2-124M-shaped model: full vs LoRA r=8, estimate and measurement."""
    from zerollm.interop import hf
    from zerollm.model.gpt import GPT, GPTConfig
    from zerollm.tokenizers import ByteTokenizer
    out = args.out
    os.makedirs(out, exist_ok=True)
    base = os.path.join(out, "base")
    if not os.path.isdir(base):
        cfg = GPTConfig(vocab_size=50257, block_size=args.block, n_layer=args.n_layer, n_head=12, n_embd=768)
        save_zerollm(GPT(cfg, seed=0), base, tokenizer=ByteTokenizer())
    zerollm("tasks", "make", "acrostic", "--out", os.path.join(out, "sft.jsonl"), "--n", 64, "--split", "train")
    zerollm("tasks", "make", "prefs", "--out", os.path.join(out, "prefs.jsonl"), "--n", 64, "--split", "train")
    rows = []
    os.environ["ZEROLLM_ENGINE"] = args.engine          # the stages' engine (they have no --engine flag)
    lora = ["--lora-r", "8", *ALL_LINEARS]
    for stage, data in (("sft", "sft.jsonl"), ("dpo", "prefs.jsonl"))[:args.gpt2_stages]:
        for name, flags in (("full", []), ("lora r=8", lora), ("qlora q8_0 r=8", [*lora, "--quantize-base", "q8_0"]),
                            ("qlora q4_0 r=8", [*lora, "--quantize-base", "q4_0"])):
            if args.gpt2_runs and name.split()[0] not in args.gpt2_runs.split(","):
                continue
            common = ["--init", base, "--data", os.path.join(out, data), "--batch-size", args.batch,
                      "--max-iters", args.gpt2_steps, "--threads", 1, *flags]
            text, _, _ = zerollm(stage, *common, "--dry-run", capture=True)
            estimate = re.search(r"total\s+([\d.]+ \w+)", text)
            run = os.path.join(out, f"{stage}-{re.sub(r'[^a-z0-9]+', '-', name)}")
            _, seconds, rss = zerollm(stage, *common, "--out", run, "--no-progress", "--eval-interval", 1000,
                                      "--checkpoint-interval", 1000)
            rows.append(dict(stage=stage, run=name, engine=args.engine, estimate=estimate.group(1) if estimate else None,
                             peak_rss_mib=rss, step_ms=step_ms(run), seconds=seconds))
            print(json.dumps(rows[-1]), flush=True)
    return rows


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("part", choices=("acrostic", "gpt2", "recipe", "qlora"))
    p.add_argument("--out", required=True)
    p.add_argument("--n-layer", type=int, default=None, help="acrostic base: 2; gpt2: 12")
    p.add_argument("--n-embd", type=int, default=96)
    p.add_argument("--base-steps", type=int, default=600)
    p.add_argument("--steps", type=int, default=150)
    p.add_argument("--lora-lr", default=None, help="LoRA's learning rate (default 2e-3; recipe: 6e-3)")
    p.add_argument("--full-lr", default="2e-3", help="recipe: full fine-tuning's learning rate (acrostic keeps "
                   "SFT's 5e-4)")
    p.add_argument("--seed", type=int, default=1337, help="recipe: the SFT runs' seed")
    p.add_argument("--heldout", type=int, default=64)
    p.add_argument("--block", type=int, default=128)
    p.add_argument("--batch", type=int, default=2)
    p.add_argument("--gpt2-steps", type=int, default=4)
    p.add_argument("--gpt2-stages", type=int, default=2, help="gpt2: 1 = SFT only, 2 = SFT and DPO")
    p.add_argument("--gpt2-runs", default="", help="gpt2: only these runs, e.g. lora,qlora (default: full,lora,qlora)")
    p.add_argument("--engine", default="numpy", choices=("numpy", "fast"), help="gpt2: the engine of every run")
    args = p.parse_args(argv)
    if args.n_layer is None:
        args.n_layer = 2 if args.part == "acrostic" else 12
    if args.lora_lr is None:
        args.lora_lr = "6e-3" if args.part in ("recipe", "qlora") else "2e-3"
    rows = {"acrostic": acrostic, "gpt2": gpt2, "recipe": recipe, "qlora": qlora}[args.part](args)
    with open(os.path.join(args.out, "results.json"), "w", encoding="utf-8") as f:
        json.dump(rows, f, ensure_ascii=False, indent=1)


if __name__ == "__main__":
    main()
