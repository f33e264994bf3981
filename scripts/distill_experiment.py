"""Distillation against training on the data alone: a small student, the same steps, the same schedule.

    python scripts/distill_experiment.py --out runs/distill-exp
    python scripts/distill_experiment.py --out runs/distill-exp --teacher-iters 1500 --student-iters 600

1. A teacher (--teacher-layers x --teacher-embd, char tokenizer) is pre-trained on --corpus (tiny
   Shakespeare, or the Tang poems) with `zerollm train`.
2. The student (--student-layers x --student-embd) is trained from the same seed three ways, each for
   --student-iters steps with the same learning rate, batch and schedule: on the data alone
   (`zerollm train`), distilled with the forward KL mixed half and half with the data's cross-entropy, and
   distilled with GKD's JSD(0.5) and half of its batches sampled by the student (on-policy).
3. Each model is measured on the last tenth of the corpus, the part none of them trained on: bits per UTF-8
   byte over the whole text (zerollm.evaluate.bpb.score_text), and on --samples samples of --sample-tokens
   characters at temperature 1 from fixed seeds: distinct-n (the share of distinct n-grams among all
   n-grams of a sample, averaged; 1 = no n-gram repeats) for n = 2, 3, 4.

Every run is its own process; wall time is printed beside each. The machine the numbers in
docs/distillation.md came from was shared with other jobs: times are rough, the quality numbers are not.
"""

import argparse
import json
import os
import subprocess
import sys
import time

import numpy as np

from zerollm.data import corpora
from zerollm.evaluate.bpb import score_text
from zerollm.generation.decode import Completions, sample_completions
from zerollm.generation.sample import Sampling
from zerollm.interop.opening import Source, open_model
from zerollm.tokenizers.bytecount import token_byte_lengths

PRESET = {"shakespeare": "shakespeare-cpu", "tang": "tang"}     # each corpus with its char-tokenizer preset


def zerollm(*argv):
    """Run one zerollm command in its own process -> seconds."""
    t0 = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "zerollm", *map(str, argv)], capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"zerollm {' '.join(map(str, argv))} failed:\n{done.stderr[-2000:]}")
    return time.perf_counter() - t0


def distinct_n(ids, n):
    """Distinct n-grams over all n-grams of one sample: [1, 2, 1, 2, 1] has 2 distinct of 4 bigrams -> 0.5."""
    grams = [tuple(ids[i:i + n]) for i in range(len(ids) - n + 1)]
    return len(set(grams)) / max(len(grams), 1)


def measure(run, val_text, args):
    """(val bits per byte, {n: mean distinct-n of the samples}) of a run's latest checkpoint."""
    opened = open_model(Source(ckpt=run))
    model, tok = opened.model, opened.tokenizer
    ids = np.asarray(tok.encode(val_text), dtype=np.int64)
    _, _, (bits, nbytes) = score_text(model, ids, token_byte_lengths(tok))
    prompts = [ids[k * 997 % (len(ids) - 8):][:4].tolist() for k in range(args.samples)]   # 4 characters of text
    how = Completions(min(args.sample_tokens, model.config.block_size - 3), Sampling(temperature=1.0))
    rows = sample_completions(model, prompts, how, seeds=[(7, k) for k in range(args.samples)])
    distinct = {n: float(np.mean([distinct_n(r, n) for r in rows])) for n in (2, 3, 4)}
    return bits / nbytes, distinct, tok.decode(prompts[0] + rows[0])


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", default="runs/distill-exp")
    p.add_argument("--corpus", choices=sorted(PRESET), default="shakespeare")
    p.add_argument("--teacher-layers", type=int, default=4)
    p.add_argument("--teacher-embd", type=int, default=256)
    p.add_argument("--teacher-iters", type=int, default=1200)
    p.add_argument("--student-layers", type=int, default=2)
    p.add_argument("--student-embd", type=int, default=128)
    p.add_argument("--student-iters", type=int, default=600)
    p.add_argument("--block-size", type=int, default=64)
    p.add_argument("--batch-size", type=int, default=16)
    p.add_argument("--samples", type=int, default=16)
    p.add_argument("--sample-tokens", type=int, default=60)
    args = p.parse_args()
    os.makedirs(args.out, exist_ok=True)
    text = corpora.read_text(args.corpus)
    val_text = text[int(len(text) * 0.9) + 1:]            # the tenth no run trains on (zerollm prepare's split)
    common = ["--block-size", args.block_size, "--batch-size", args.batch_size, "--no-progress", "--seed", 1]
    schedule = ["--max-iters", args.student_iters, "--lr", "2e-3", "--min-lr", "2e-4", "--warmup-iters", max(args.student_iters // 12, 1),
                "--lr-decay-iters", args.student_iters, "--eval-interval", args.student_iters,
                "--checkpoint-interval", args.student_iters, "--eval-iters", 4]
    student = ["--preset", PRESET[args.corpus], "--n-layer", args.student_layers, "--n-embd", args.student_embd, "--n-head", 4]
    teacher = os.path.join(args.out, "teacher")
    runs = {}
    if not os.path.exists(os.path.join(teacher, "latest.json")):
        runs["teacher"] = zerollm("train", "--preset", PRESET[args.corpus], "--data", args.corpus, "--out", teacher, *common,
                                  "--n-layer", args.teacher_layers, "--n-embd", args.teacher_embd, "--n-head", 4,
                                  "--max-iters", args.teacher_iters, "--eval-interval", args.teacher_iters,
                                  "--checkpoint-interval", args.teacher_iters, "--sample-tokens", 0)
    variants = {
        "data alone": ("train", "--data", args.corpus, "--sample-tokens", 0),
        "forward KL + 0.5 CE": ("distill", "--teacher", teacher, "--data", args.corpus, "--ce-weight", 0.5),
        "JSD(0.5), on-policy 0.5": ("distill", "--teacher", teacher, "--data", args.corpus, "--divergence", "jsd",
                                    "--beta", 0.5, "--on-policy", 0.5),
    }
    for name, argv in variants.items():
        out = os.path.join(args.out, {"data alone": "data", "forward KL + 0.5 CE": "forward"}.get(name, "jsd"))
        if not os.path.exists(os.path.join(out, "latest.json")):
            runs[name] = zerollm(*argv, "--out", out, *student, *common, *schedule)
        variants[name] = out
    rows = [("teacher", teacher)] + list(variants.items())
    print(f"{'model':<26}{'val bpb':>9}{'distinct-2':>12}{'distinct-3':>12}{'distinct-4':>12}{'wall s':>9}")
    report = {}
    for name, run in rows:
        bpb, distinct, sample = measure(run, val_text, args)
        report[name] = {"val_bpb": bpb, "distinct": distinct, "sample": sample, "wall_s": runs.get(name)}
        wall = f"{runs[name]:9.0f}" if name in runs else f"{'-':>9}"
        print(f"{name:<26}{bpb:9.3f}" + "".join(f"{distinct[n]:12.3f}" for n in (2, 3, 4)) + wall)
    for name, r in report.items():
        print(f"--- {name}: {r['sample']!r}")
    with open(os.path.join(args.out, "report.json"), "w", encoding="utf-8") as f:
        json.dump(report, f, ensure_ascii=False, indent=1)


if __name__ == "__main__":
    main()
