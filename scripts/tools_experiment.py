"""Where do tool use and thinking come from? A measured answer at a size a CPU trains in minutes (#58).

    python scripts/tools_experiment.py --out runs/tools-exp                  # the sizes of docs/alignment.md
    python scripts/tools_experiment.py --out runs/tools-exp --plot docs/tools_experiment.png

Two tracks, every step a documented zerollm command in its own process:

- calc (3-digit products, zerollm.align.tasks.calc): a model with random weights and a BPE vocabulary
  learnt from the traces (calc_base); SFT on the plain problems (no tools); SFT on a mix of calculator
  traces and plain problems (tasks make calc --tools), measured with the tools offered and without them
  (the same model); GRPO from that SFT model with --tools calculator, the verifier's reward and a small
  format reward.
- addition with thinking (tasks make addition --think: the column sums inside <think>): a base model
  pre-trained on "a+b=c" lines; SFT on the plain sums; SFT on the thinking traces; GRPO from the
  thinking model, watching the think length and the answer length over the steps (does length grow
  as in DeepSeek-R1?).

Every model is measured on the same heldout problems with `zerollm tasks eval` (greedy; success with its
95% Wilson interval; tool-call validity and think length for a chat model that knows those tokens).
results.json in --out holds every number; --plot draws success with intervals and the GRPO curves.
Sizes are flags. With ZEROLLM_DOCS_TEST=1 (the docs test, zerollm.io.docsmode) each track runs one small
case in seconds: its last model only (GRPO with tools, GRPO with thinking, SFT with thinking), built by the
same commands at the tiniest size, and measured on a few heldout problems.
"""

import argparse
import contextlib
import io
import json
import os
import subprocess
import sys
import time

from zerollm.io import docsmode


def zerollm(*argv):
    """One zerollm command in its own process -> (stdout, seconds); a failure stops the script."""
    t0 = time.perf_counter()
    argv = [str(a) for a in argv]
    if docsmode.active():
        # the docs test: the same command line through the CLI's own entry, in this process (a new process
        # would spend most of a tiny command's time importing NumPy and zerollm again)
        from zerollm.cli.entry import main
        out, err = io.StringIO(), io.StringIO()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            code = main(argv)
        stdout, stderr = out.getvalue(), err.getvalue()
    else:
        proc = subprocess.run([sys.executable, "-m", "zerollm", *argv], text=True, capture_output=True)
        code, stdout, stderr = proc.returncode, proc.stdout, proc.stderr
    if code != 0:
        raise SystemExit(f"zerollm {' '.join(argv)} failed:\n{stderr[-2000:]}")
    return stdout, time.perf_counter() - t0


def batch(size):
    """A batch size: ``size``, or at most 8 in the docs test (its few steps only have to run)."""
    return min(size, 8) if docsmode.active() else size


def rl_prompts():
    """The prompts GRPO draws from: 2,000, or a few in the docs test (it runs two rollout steps)."""
    return 32 if docsmode.active() else 2000


def evaluate(task, ckpt, data, args, fmt="auto"):
    out, _ = zerollm("tasks", "eval", task, "--ckpt", ckpt, "--data", data, "--n", args.heldout, "--temperature", 0,
                     "--json", "--format", fmt, "--threads", 1)
    summary = json.loads(out)["summary"]
    return {k: summary[k] for k in ("n", "successes", "success_rate", "ci95", "mean_reward", "format",
                                    "tool_calls", "tool_call_valid", "format_ok", "think_tokens",
                                    "response_tokens") if k in summary}


def make(out, task, name, n, split, seed, *flags):
    path = os.path.join(out, name)
    if not os.path.exists(path):
        zerollm("tasks", "make", task, "--out", path, "--n", n, "--split", split, "--seed", seed, *flags)
    return path


def train_once(out_dir, *argv):
    """A run that is already there (latest.json) is reused: the script can be stopped and started again."""
    if not os.path.exists(os.path.join(out_dir, "latest.json")):
        _, seconds = zerollm(*argv, "--out", out_dir, "--threads", 1, "--no-progress", "--force")
        return seconds
    return 0.0


def model_flags(args):
    return ["--tokenizer", "char", "--pos", "rope", "--n-layer", args.n_layer, "--n-head", 4, "--n-embd", args.n_embd]


def grpo_curve(run):
    """Per rollout step: mean reward, success, tool calls, think tokens and the tokens the model wrote."""
    rows = [json.loads(line) for line in open(os.path.join(run, "log.jsonl"), encoding="utf-8")]
    keys = ("reward", "success", "answers", "tool_calls", "tool_call_valid", "think_tokens", "response_tokens")
    return [{"step": r["step"], **{k: r[k] for k in keys if k in r}} for r in rows if "reward" in r]


def calc_base(out, rows, args):
    """The calc track's starting model: random weights (no pre-training) with a BPE vocabulary learnt from
    the training traces, so the JSON of the tool spec and of a call is a few tokens and the model's context
    stays short (a char model needs ~350 tokens a trace and learnt nothing in 500 steps here)."""
    from zerollm.data import chat
    from zerollm.interop.opening import save_zerollm
    from zerollm.model.gpt import GPT, GPTConfig
    from zerollm.tokenizers import ENDOFTEXT, BPETokenizer
    from zerollm.tokenizers.patterns import QWEN2_PATTERN
    text = "".join(chat.render(chat.as_messages(r), r.get("tools")) for r in rows[:400])
    # the split decides how numbers are cut: GPT-4's keeps up to 3 digits together, Qwen2's makes every
    # digit a token (docs/alignment.md section 9 reports both)
    pattern = QWEN2_PATTERN if args.bpe_split == "qwen2" else "gpt4"
    tok = BPETokenizer.train(text, args.bpe_vocab, pattern=pattern, special_tokens=(ENDOFTEXT,))
    tok = chat.prepare_tokenizer(tok, needs=("tools",))
    longest = max(len(chat.encode_example(tok, r)[0]) for r in rows)
    model = GPT(GPTConfig(vocab_size=tok.vocab_size, block_size=longest + 16, n_layer=args.n_layer, n_head=4,
                          n_embd=args.n_embd, pos="rope"))
    save_zerollm(model, out, tokenizer=tok)


def calc_track(args, results):
    out = os.path.join(args.out, "calc")
    os.makedirs(out, exist_ok=True)
    tools_rows = make(out, "calc", "tools.jsonl", args.sft_examples, "train", 2, "--tools")
    plain_rows = make(out, "calc", "plain.jsonl", args.sft_examples, "train", 3)
    held_tools = make(out, "calc", "held-tools.jsonl", args.heldout, "heldout", 4, "--tools")
    held_plain = make(out, "calc", "held-plain.jsonl", args.heldout, "heldout", 4)
    prompts = make(out, "calc", "prompts.jsonl", rl_prompts(), "train", 5)
    mix = os.path.join(out, "mix.jsonl")
    rows = [json.loads(line) for path in (tools_rows, plain_rows) for line in open(path, encoding="utf-8")]
    if not os.path.exists(mix):
        with open(mix, "w", encoding="utf-8") as f:
            f.writelines(json.dumps(r, ensure_ascii=False) + "\n" for r in rows)
    base, sft_plain, sft_tools, grpo = (os.path.join(out, n) for n in ("base", "sft-plain", "sft-tools", "grpo-tools"))
    if not os.path.exists(base):
        calc_base(base, rows, args)
    sft = ["--max-iters", args.sft_steps, "--batch-size", batch(32), "--lr", args.sft_lr, "--eval-interval", args.sft_steps]
    times = {"sft-tools": train_once(sft_tools, "sft", "--init", base, "--data", mix, *sft)}
    if not docsmode.active():                   # the docs test: the track's last model only
        times["sft-plain"] = train_once(sft_plain, "sft", "--init", base, "--data", plain_rows, *sft)
    times["grpo-tools"] = train_once(grpo, "grpo", "--init", sft_tools, "--data", prompts, "--eval-data", held_plain,
                                     "--reward", "calc", "--tools", "calculator", "--format-reward", 0.1,
                                     "--group-size", 8, "--prompts-per-step", 4, "--max-new-tokens", 48,
                                     "--max-iters", args.grpo_steps, "--lr", args.grpo_lr, "--eval-interval",
                                     args.grpo_steps, "--eval-prompts", 32)
    rows = {"random init (no training)": (base, held_plain), "SFT without tools": (sft_plain, held_plain),
            "SFT with tools, tools offered": (sft_tools, held_tools),
            "SFT with tools, no tools offered": (sft_tools, held_plain),
            "GRPO with tools, tools offered": (grpo, held_tools)}
    results["calc"] = {name: evaluate("calc", ckpt, data, args) for name, (ckpt, data) in measured(rows).items()}
    results["calc_grpo_curve"] = grpo_curve(grpo)
    results["calc_seconds"] = times


def think_track(args, results):
    out = os.path.join(args.out, "think")
    os.makedirs(out, exist_ok=True)
    text = make(out, "addition", "text.txt", args.base_lines, "train", 1, "--format", "text")
    think_rows = make(out, "addition", "think.jsonl", args.sft_examples, "train", 2, "--think")
    plain_rows = make(out, "addition", "plain.jsonl", args.sft_examples, "train", 2)
    held = make(out, "addition", "held.jsonl", args.heldout, "heldout", 4)
    prompts = make(out, "addition", "prompts.jsonl", rl_prompts(), "train", 5)
    base, sft_plain, sft_think, grpo = (os.path.join(out, n) for n in ("base", "sft-plain", "sft-think", "grpo-think"))
    sft = ["--max-iters", args.think_sft_steps, "--batch-size", batch(16), "--lr", args.sft_lr, "--eval-interval",
           args.think_sft_steps]
    times = {"base": train_once(base, "train", "--data", text, *model_flags(args), "--block-size", 128,
                                "--max-iters", args.base_steps, "--batch-size", batch(8), "--eval-interval", args.base_steps,
                                "--eval-iters", 2, "--sample-tokens", 0),
             "sft-think": train_once(sft_think, "sft", "--init", base, "--data", think_rows, *sft)}
    if not docsmode.active():
        times["sft-plain"] = train_once(sft_plain, "sft", "--init", base, "--data", plain_rows, *sft)
    times["grpo-think"] = train_once(grpo, "grpo", "--init", sft_think, "--data", prompts, "--eval-data", held,
                                     "--reward", "addition", "--format-reward", 0.1, "--group-size", 8,
                                     "--prompts-per-step", 4, "--max-new-tokens", 64, "--max-iters", args.grpo_steps,
                                     "--lr", args.grpo_lr, "--eval-interval", args.grpo_steps, "--eval-prompts", 32,
                                     "--temperature", args.grpo_temperature)
    rows = {"base (plain prompt)": (base, "plain"), "SFT without thinking": (sft_plain, "auto"),
            "SFT with thinking": (sft_think, "auto"), "GRPO with thinking": (grpo, "auto")}
    results["think"] = {name: evaluate("addition", ckpt, held, args, fmt) for name, (ckpt, fmt) in measured(rows).items()}
    results["think_grpo_curve"] = grpo_curve(grpo)
    results["think_seconds"] = times


def acrostic_track(args, results):
    """藏头诗 with and without thinking: the tang preset (2 layers x 128 here) pre-trained on the shipped poems, then SFT on
    the plain acrostic rows or on the same rows with the four heads listed inside <think> (tasks make
    acrostic --think), the same steps; both measured on the same heldout head sets."""
    out = os.path.join(args.out, "acrostic")
    os.makedirs(out, exist_ok=True)
    think_rows = make(out, "acrostic", "think.jsonl", args.acrostic_examples, "train", 2, "--think")
    plain_rows = make(out, "acrostic", "plain.jsonl", args.acrostic_examples, "train", 2)
    held = make(out, "acrostic", "held.jsonl", args.heldout, "heldout", 4)
    base, sft_plain, sft_think = (os.path.join(out, n) for n in ("base", "sft-plain", "sft-think"))
    sft = ["--max-iters", args.acrostic_sft_steps, "--batch-size", batch(16), "--lr", 2e-3, "--min-lr", 2e-4,
           "--eval-interval", args.acrostic_sft_steps]
    times = {"base": train_once(base, "train", "--preset", "tang", "--n-layer", args.acrostic_layers, "--n-embd",
                                args.acrostic_embd, "--block-size", 96, "--max-iters",
                                args.acrostic_base_steps, "--eval-interval", args.acrostic_base_steps,
                                "--eval-iters", 4, "--sample-tokens", 0,
                                *(["--batch-size", 8, "--eval-iters", 1] if docsmode.active() else [])),
             "sft-think": train_once(sft_think, "sft", "--init", base, "--data", think_rows, *sft)}
    if not docsmode.active():
        times["sft-plain"] = train_once(sft_plain, "sft", "--init", base, "--data", plain_rows, *sft)
    rows = {"base (plain prompt)": (base, "plain"), "SFT without thinking": (sft_plain, "auto"),
            "SFT with thinking": (sft_think, "auto")}
    results["acrostic"] = {name: evaluate("acrostic", ckpt, held, args, fmt) for name, (ckpt, fmt) in measured(rows).items()}
    results["acrostic_seconds"] = times


def measured(rows):
    """The rows of a track's table to measure: all of them, or in the docs test its last model's only."""
    return dict([list(rows.items())[-1]]) if docsmode.active() else rows


def curve_rows(run, per_step, window, every=1):
    """A GRPO/PPO run's rollouts in windows of ``window`` steps: (first step, last step, successes, answers,
    95% Wilson interval, mean tokens the model wrote, mean tool calls, share of valid calls), from log.jsonl.
    The answers of each rollout batch are the run's own ("answers" in its log, smaller in the docs mode than
    the flags asked); ``per_step`` (prompts per step x group size) stands in for a log written before zerollm
    recorded them. ``every``: the optimizer steps of one rollout batch (PPO: epochs x minibatches, each
    logging the same batch's measures)."""
    from zerollm.align.tasks.evaluate import wilson
    rows = [r for r in grpo_curve(run) if "success" in r][::every]
    out = []
    for k in range(0, len(rows), window):
        part = rows[k:k + window]
        answers = [r.get("answers", per_step) for r in part]
        wins = round(sum(r["success"] * a for r, a in zip(part, answers)))
        n = round(sum(answers))
        mean = lambda key: sum(r.get(key, 0.0) for r in part) / len(part)
        out.append((part[0]["step"], part[-1]["step"], wins, n, wilson(wins, n), mean("response_tokens"),
                    mean("tool_calls"), mean("tool_call_valid")))
    return out


def print_curve(run, per_step, window, every=1):
    print("| steps | rollout success (95% CI) | tokens written | tool calls | valid calls |")
    print("|---|---|---|---|---|")
    for first, last, wins, n, (low, high), tokens, calls, valid in curve_rows(run, per_step, window, every):
        print(f"| {first}–{last} | {wins}/{n} = {wins / n:.1%} ({low:.1%}–{high:.1%}) | {tokens:.1f} | {calls:.2f} | "
              f"{valid:.0%} |")


def table(results):
    lines = ["| track | model | success (95% CI) | tool calls / answer | valid calls | think tokens |",
             "|---|---|---|---|---|---|"]
    for track in ("calc", "think", "acrostic"):
        for name, r in results.get(track, {}).items():
            low, high = r["ci95"]
            cells = [f"{r['successes']}/{r['n']} = {r['success_rate']:.1%} ({low:.1%}–{high:.1%})",
                     f"{r['tool_calls']:.2f}" if "tool_calls" in r else "–",
                     f"{r['tool_call_valid']:.0%}" if "tool_call_valid" in r and r.get("tool_calls") else "–",
                     f"{r['think_tokens']:.1f}" if "think_tokens" in r else "–"]
            lines.append(f"| {track} | {name} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def rollout_success(run, every=1, window=5):
    """(middle rollout batch, mean rollout success) over windows of ``window`` rollout batches of a GRPO/PPO run
    (``every``: optimizer steps per rollout batch, as for --curve)."""
    rows = [r for r in grpo_curve(run) if "success" in r][::every]
    return [(k + len(rows[k:k + window]) / 2, sum(r["success"] for r in rows[k:k + window]) / len(rows[k:k + window]))
            for k in range(0, len(rows), window)]


def plot(results, path, rl_runs=()):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, axes = plt.subplots(1, 4 if rl_runs else 3, figsize=(20 if rl_runs else 15, 4.2))
    names, rates, errs = [], [], [[], []]
    for track in ("calc", "think", "acrostic"):
        for name, r in results.get(track, {}).items():
            names.append(f"{track}: {name}")
            rates.append(r["success_rate"])
            errs[0].append(r["success_rate"] - r["ci95"][0])
            errs[1].append(r["ci95"][1] - r["success_rate"])
    axes[0].barh(range(len(names)), rates, xerr=errs, color="#4c72b0", capsize=3)
    axes[0].set_yticks(range(len(names)), names, fontsize=7)
    axes[0].invert_yaxis()
    axes[0].set_xlabel("heldout success (95% Wilson interval)")
    axes[0].set_xlim(0, 1)
    for ax, key, title in ((axes[1], "calc_grpo_curve", "GRPO with tools (calc)"),
                           (axes[2], "think_grpo_curve", "GRPO with thinking (addition)")):
        curve = results.get(key, [])
        steps = [c["step"] for c in curve]
        ax.plot(steps, [c.get("response_tokens", float("nan")) for c in curve], label="tokens written per answer")
        ax.plot(steps, [c.get("think_tokens", float("nan")) for c in curve], label="think tokens per answer")
        ax.set_xlabel("GRPO step")
        ax.set_title(title, fontsize=9)
        twin = ax.twinx()
        twin.plot(steps, [c.get("success", float("nan")) for c in curve], color="#55a868", alpha=0.6,
                  label="rollout success")
        twin.set_ylim(0, 1)
        ax.legend(loc="upper left", fontsize=7)
        twin.legend(loc="upper right", fontsize=7)
    if rl_runs:
        for spec in rl_runs:                    # RUN, or RUN:EVERY for PPO
            run, _, every = spec.partition(":")
            points = rollout_success(run, int(every or 1))
            axes[3].plot([x for x, _ in points], [y for _, y in points], marker="o", label=os.path.basename(run))
        axes[3].set_xlabel("rollout batch (mean of 5)")
        axes[3].set_ylabel("rollout success")
        axes[3].set_title("GRPO / PPO with tools from the 80% calc model", fontsize=9)
        axes[3].legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--out", default=None)
    p.add_argument("--plot", default=None, help="write the figure there (PNG)")
    p.add_argument("--rl-runs", nargs="*", default=(), metavar="RUN[:EVERY]",
                   help="--plot: GRPO/PPO runs whose rollout success is drawn too (RUN:EVERY as --every for PPO)")
    p.add_argument("--tracks", default="calc,think")
    p.add_argument("--n-layer", type=int, default=2)
    p.add_argument("--n-embd", type=int, default=64)
    p.add_argument("--bpe-vocab", type=int, default=400)
    p.add_argument("--bpe-split", choices=("gpt4", "qwen2"), default="gpt4")
    p.add_argument("--base-lines", type=int, default=20000)
    p.add_argument("--base-steps", type=int, default=200)
    p.add_argument("--sft-examples", type=int, default=400)
    p.add_argument("--sft-steps", type=int, default=400)
    p.add_argument("--think-sft-steps", type=int, default=600)
    p.add_argument("--sft-lr", type=float, default=4e-3)
    p.add_argument("--grpo-steps", type=int, default=60)
    p.add_argument("--grpo-lr", type=float, default=2e-5)
    p.add_argument("--grpo-temperature", type=float, default=1.0, help="the think track's rollouts")
    p.add_argument("--heldout", type=int, default=200)
    p.add_argument("--acrostic-examples", type=int, default=3000)
    p.add_argument("--acrostic-base-steps", type=int, default=300)
    p.add_argument("--acrostic-sft-steps", type=int, default=400)
    p.add_argument("--acrostic-layers", type=int, default=2)
    p.add_argument("--acrostic-embd", type=int, default=128)
    p.add_argument("--curve", default=None, metavar="RUN", help="only print RUN's rollout curve (a GRPO/PPO run)")
    p.add_argument("--per-step", type=int, default=32, help="--curve: answers per rollout batch, for a log.jsonl "
                   "that does not record them (\"answers\", written since zerollm logs it)")
    p.add_argument("--window", type=int, default=10, help="--curve: rollout batches per row")
    p.add_argument("--every", type=int, default=1, help="--curve: optimizer steps per rollout batch (PPO: "
                                                         "epochs x minibatches)")
    args = p.parse_args()
    if args.curve:
        print_curve(args.curve, args.per_step, args.window, args.every)
        return
    if not args.out:
        p.error("--out is required (or --curve RUN)")
    if docsmode.active():                       # the docs test: one small case per track, seconds each
        args.base_lines, args.sft_examples, args.heldout, args.bpe_vocab = 500, 32, 8, 300
        args.acrostic_examples, args.grpo_steps = 32, 2
        args.base_steps = args.sft_steps = args.think_sft_steps = 4
        args.acrostic_base_steps = args.acrostic_sft_steps = 4
    os.makedirs(args.out, exist_ok=True)
    path = os.path.join(args.out, "results.json")
    for track in [t for t in args.tracks.split(",") if t]:     # --tracks calc and --tracks think may run at once
        mine = {}
        {"calc": calc_track, "think": think_track, "acrostic": acrostic_track}[track](args, mine)
        results = json.load(open(path, encoding="utf-8")) if os.path.exists(path) else {}
        results.update(mine)
        with open(path, "w", encoding="utf-8") as f:
            json.dump(results, f, indent=1, ensure_ascii=False)
    results = json.load(open(path, encoding="utf-8")) if os.path.exists(path) else {}
    print(table(results))
    if args.plot:
        plot(results, args.plot, args.rl_runs)
        print(f"figure: {args.plot}")


if __name__ == "__main__":
    main()
