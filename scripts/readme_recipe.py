"""Run the README's assistant path (Part 6) exactly as printed, then score the base and the SFT model on
the same heldout prompts: does the recipe a reader copies really teach the task?

    python scripts/readme_recipe.py --workdir /tmp/recipe          # about 10 minutes on 2 quiet cores
    python scripts/readme_recipe.py --workdir /tmp/recipe --n 200  # fewer prompts for the score
    python scripts/readme_recipe.py --workdir /tmp/recipe-small --small --n 64   # the test's size, < 1 min

The commands are read from README.md's Part 6 block (one per line, ``\\`` continues a line), so the
script follows the README when it changes. It runs them in --workdir (which must be empty or absent),
then ``zerollm tasks eval acrostic`` on the base (``runs/tang``) and the SFT run (``runs/tang-sft``),
greedy and sampled, and prints one row per model with success and its 95% interval. The exit status
is 1 when the SFT model's sampled success is not clearly above the base's (its interval's low end at
or below the base's high end). As printed it takes too long for the test suite; its measured table is in
docs/alignment.md §5. ``--small`` runs the same lines under ``ZEROLLM_DOCS_TEST=small`` (a 2-layer model,
150 base and 800 SFT steps: zerollm/io/docsmode.py) in under a minute and judges greedy success: that is
what tests/test_readme_recipe.py runs.
"""

import argparse
import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
PART = "**Part 6"


def part6_commands(readme):
    """The shell lines of the first ```bash block after the Part 6 heading, cut into commands as the docs
    test cuts them (tests/docs_blocks.py: continuations joined), without their comments."""
    sys.path.insert(0, str(REPO / "tests"))
    from docs_blocks import commands_of, without_comment
    text = readme.read_text(encoding="utf-8")
    start = text.index(PART)
    block = re.search(r"```bash\n(.*?)```", text[start:], re.S).group(1)
    return [without_comment(c.text).strip() for c in commands_of("bash", block)]


def run(command, cwd, env=None):
    """Run one README line with bash (pipefail), as the docs test does; returns (seconds, output)."""
    t0 = time.perf_counter()
    print(f"$ {command}", flush=True)
    env = dict(os.environ if env is None else env)
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"   # this Python's zerollm
    proc = subprocess.run(["bash", "-o", "pipefail", "-c", command], cwd=cwd, env=env, capture_output=True,
                          text=True, errors="replace")
    if proc.returncode != 0:
        raise RuntimeError(f"exit code {proc.returncode}: {command}\n{(proc.stdout + proc.stderr)[-3000:]}")
    return time.perf_counter() - t0, proc.stdout + proc.stderr


def score(ckpt, data, n, temperature, cwd, env=None):
    out = subprocess.run([sys.executable, "-m", "zerollm", "tasks", "eval", "acrostic", "--ckpt", ckpt,
                          "--data", data, "--n", str(n), "--temperature", str(temperature), "--json"],
                         cwd=cwd, check=True, capture_output=True, text=True, env=env).stdout
    return json.loads(out)["summary"]


def recipe(work, n, env=None, skip=("zerollm sample", "zerollm tasks eval")):
    """Run the Part 6 lines in ``work`` (those starting with ``skip`` left out), then score both models on
    the first ``n`` heldout prompts, sampled (T=1.0) and greedy. Returns ({(model, temperature): summary},
    {command name: seconds}, {command: output})."""
    times, outputs = {}, {}
    for command in part6_commands(REPO / "README.md"):
        if command.startswith(skip):
            continue
        seconds, outputs[command] = run(command, work, env)
        times[command.split()[1]] = times.get(command.split()[1], 0.0) + seconds
    scores = {(name, temperature): score(ckpt, "acrostic-heldout.jsonl", n, temperature, work, env)
              for name, ckpt in (("base", "runs/tang"), ("sft", "runs/tang-sft")) for temperature in (1.0, 0.0)}
    return scores, times, outputs


def clearly_above(scores, temperature):
    """Is the SFT model's success interval wholly above the base's?"""
    return scores["sft", temperature]["ci95"][0] > scores["base", temperature]["ci95"][1]


def main(argv=None):
    p = argparse.ArgumentParser(description="run the README's assistant recipe and score it")
    p.add_argument("--workdir", required=True, help="an empty or new folder for the runs")
    p.add_argument("--n", type=int, default=500, help="heldout prompts scored per model (default 500)")
    p.add_argument("--small", action="store_true",
                   help="the size tests/test_readme_recipe.py runs: ZEROLLM_DOCS_TEST=small (zerollm/io/docsmode.py), "
                        "under a minute; success is then judged greedy")
    args = p.parse_args(argv)
    work = Path(args.workdir)
    if work.exists() and any(work.iterdir()):
        sys.exit(f"--workdir {work} is not empty; give a new folder")
    work.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "ZEROLLM_DOCS_TEST": "small"} if args.small else None
    scores, times, _ = recipe(work, args.n, env)
    print(f"\n{'model':<6} {'sampling':<10} {'success':>8} {'95% interval':>16} {'mean reward':>12}")
    for (name, temperature), s in scores.items():
        mode = "greedy" if temperature == 0 else "T=1.0"
        low, high = s["ci95"]
        print(f"{name:<6} {mode:<10} {s['success_rate']:>8.1%} {low:>7.1%}-{high:<7.1%} "
              f"{s['mean_reward']:>12.3f}")
    print("time: " + ", ".join(f"{k} {v / 60:.1f} min" for k, v in times.items()))
    judged = 0.0 if args.small else 1.0
    if not clearly_above(scores, judged):
        print(f"the SFT model is not clearly above the base ({'greedy' if args.small else 'sampled'} success "
              "intervals overlap)")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
