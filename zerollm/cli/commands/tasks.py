"""``zerollm tasks``: make task data, and measure a checkpoint on a task.

    zerollm tasks list
    zerollm tasks make acrostic --out acrostic-train.jsonl --n 5000 --split train --seed 0
    zerollm tasks make addition --out sums.txt --n 50000 --split train --seed 0 --format text
    zerollm tasks make calc --out calc-tools.jsonl --n 2000 --tools       # traces that call the calculator
    zerollm tasks make addition --out sums-think.jsonl --n 2000 --think   # the steps inside <think>
    zerollm tasks make lm-eval --out lm-eval-tasks --n 200 --seed 0      # a folder of lm-eval task YAML + data
    zerollm tasks eval acrostic --ckpt runs/sft --data acrostic-heldout.jsonl [--json] [--n 500] [--answers FILE]

``eval`` samples one completion per prompt (row i with the seed (--seed, i)), scores it with the task's
verifier and prints the success rate with its 95% Wilson interval; ``--json`` prints every example too.
"""

import json
import sys

from zerollm.io import docsmode
from zerollm.io.argtypes import COUNT, PROBABILITY, SEED, Range
from zerollm.io.errors import ZeroLLMError
from zerollm.engine.memory import keep_freed_memory
from zerollm.engine.threads import add_threads_argument, limit_threads


def add_arguments(p):
    sub = p.add_subparsers(dest="action", metavar="ACTION", required=True, parser_class=type(p))
    sub.add_parser("list", help="the tasks and what they are")
    make = sub.add_parser("make", help="write a task's examples as JSONL (or plain text)")
    make.add_argument("name", metavar="NAME",
                      help="acrostic, addition, calc or prefs; or lm-eval: a folder of offline lm-evaluation-harness "
                           "tasks (YAML + JSONL, heldout data only; zerollm.evaluate.taskfiles)")
    make.add_argument("--out", required=True, metavar="FILE", help="the file to write (lm-eval: a folder)")
    make.add_argument("--n", type=Range(int, 1, 10 ** 7), required=True, help="number of examples")
    make.add_argument("--split", choices=("train", "heldout"), default=None,
                      help="which examples (default train; lm-eval: heldout only)")
    make.add_argument("--seed", type=SEED, default=0)
    make.add_argument("--format", choices=("jsonl", "text"), default=None,
                      help="jsonl: one example a line (SFT / prefs / prompts); text: one plain line per example, "
                           "for pre-training a base model (with --tools or --think: each trace as the chat template "
                           "renders it, to learn a BPE vocabulary from) (default jsonl; lm-eval: YAML and JSONL, "
                           "no choice)")
    make.add_argument("--force", action="store_true", help="replace --out if it already exists")
    make.add_argument("--tools", action="store_true",
                      help="calc: each example as a trace that calls the calculator tool and uses its result")
    make.add_argument("--think", action="store_true",
                      help="addition, acrostic: a program's steps (carries, the heads) inside <think> before the answer")
    ev = sub.add_parser("eval", help="sample one completion per prompt and print the success rate")
    ev.add_argument("name", metavar="NAME", help="acrostic, addition or prefs")
    ev.add_argument("--ckpt", required=True, metavar="DIR", help="a training run, checkpoint step or zerollm model directory")
    ev.add_argument("--data", required=True, metavar="FILE", help="JSONL with a 'prompt' per line (e.g. from 'tasks make')")
    ev.add_argument("--n", type=COUNT, default=None, help="only the first N prompts")
    ev.add_argument("--json", action="store_true", help="print a JSON object with the summary and every example")
    ev.add_argument("--answers", metavar="FILE", default=None,
                    help="also write each prompt and its sampled answer as JSONL ({\"prompt\", \"completion\"}), "
                         "e.g. for 'zerollm score --rm DIR --data FILE'")
    ev.add_argument("--force", action="store_true", help="replace --answers if it already exists")
    ev.add_argument("--temperature", type=Range(float, 0, 100), default=1.0,
                    help="0 = greedy (default 1.0: the model's own distribution)")
    ev.add_argument("--top-k", type=Range(int, 1, 2 ** 24), default=None)
    ev.add_argument("--top-p", type=PROBABILITY, default=None)
    ev.add_argument("--max-new-tokens", type=Range(int, 1, 10 ** 7), default=None,
                    help="default: twice the tokens of a typical completion, plus one")
    ev.add_argument("--seed", type=SEED, default=0)
    ev.add_argument("--format", choices=("auto", "chat", "plain"), default="auto",
                    help="chat template or a plain prompt for a base model (default: chat when the tokenizer has it)")
    ev.add_argument("--max-tool-calls", type=Range(int, 0, 64), default=3,
                    help="tool calls run per answer, for prompts that list tools (a model trained with tools)")
    ev.add_argument("--tools", metavar="FILE", default=None,
                    help="a .py module of your own TOOLS beside the built-in calculator (zerollm.align.tools)")
    ev.add_argument("--tool-timeout", type=Range(float, 0, 10 ** 6), default=60.0,
                    help="seconds one call of your tools (and their import) may take; 0 = no limit")
    add_threads_argument(ev)


def run(args):
    if args.action == "list":
        return _list()
    if args.action == "make":
        return _make(args)
    keep_freed_memory()
    with limit_threads(args.threads):
        return _eval(args)


LM_EVAL_ABOUT = ("(tasks make only) a folder of offline lm-evaluation-harness tasks from the heldout data: "
                 "Tang next line, Shakespeare cloze, acrostic and addition; run them with "
                 "lm_eval --model zerollm --model_args ckpt=RUN --tasks FOLDER.")


def _list():
    """Each task's name and the first paragraph of its docstring, wrapped at word boundaries; then lm-eval."""
    import textwrap
    from zerollm.align.tasks import TASKS
    abouts = {name: " ".join(module.__doc__.strip().split("\n\n")[0].split()) for name, module in TASKS.items()}
    for name, about in {**abouts, "lm-eval": LM_EVAL_ABOUT}.items():
        print(textwrap.fill(about, width=100, initial_indent=f"{name:10s} ", subsequent_indent=" " * 11))
    return 0


def _make(args):
    if args.name == "lm-eval":
        return _make_lm_eval(args)
    from zerollm.io.fileio import atomic_write
    from zerollm.data.formats import write_jsonl
    from zerollm.align.tasks import get_task
    from zerollm.io.outdir import check_output_file
    task = get_task(args.name)
    split, fmt = args.split or "train", args.format or "jsonl"
    variants = [(flag, attr) for flag, attr, on in (("--tools", "with_tools", args.tools),
                                                    ("--think", "with_thinking", args.think)) if on]
    for flag, attr in variants:
        if not hasattr(task, attr):
            from zerollm.align.tasks import TASKS
            have = [name for name, module in TASKS.items() if hasattr(module, attr)]
            raise ZeroLLMError(f"tasks make {args.name} has no {flag} variant; {flag} is for {', '.join(have)}")
    check_output_file(args.out, force=args.force)      # before minutes of drawing examples
    rows = task.make(docsmode.limit("examples made", args.n), split, args.seed)
    for _, attr in variants:
        rows = [getattr(task, attr)(row) for row in rows]
    if fmt == "jsonl":
        write_jsonl(args.out, rows)
    else:
        # a trace (--tools / --think) as the chat template renders it, one a line: text to learn a BPE
        # vocabulary from and pre-train a base on, so the tool spec and a call are a few tokens each
        line = _rendered if variants else task.text_line
        with atomic_write(args.out, "w") as f:
            f.writelines(line(row) + "\n" for row in rows)
    print(f"wrote {len(rows)} {args.name} examples ({split} split, seed {args.seed}) to {args.out}")
    return 0


def _rendered(row):
    from zerollm.data import chat
    return chat.render(chat.as_messages(row), row.get("tools"))      # the template writes no newlines


def _make_lm_eval(args):
    from zerollm.evaluate.taskfiles import write_tasks
    from zerollm.io.outdir import check_outside_runs
    check_outside_runs(args.out)       # the folder is replaced whole: never inside a run, checkpoint or model
    if args.split == "train":
        raise ZeroLLMError("lm-eval tasks are made from heldout data only (a score on training examples says "
                           "what a model memorised): leave out --split train")
    if args.format == "text":
        raise ZeroLLMError("lm-eval tasks are YAML and JSONL files that lm_eval reads, not plain text: leave out "
                           "--format text (plain lines are for the other tasks, e.g. tasks make addition)")
    counts = write_tasks(args.out, args.n, args.seed, force=args.force)
    shown = ", ".join(f"{name} {n}" for name, n in counts.items())
    print(f"wrote lm-eval tasks to {args.out} (heldout data, seed {args.seed}): {shown} documents; "
          f"run: lm_eval --model zerollm --model_args ckpt=RUN --tasks {args.out}")
    return 0


def _load(path):
    from zerollm.interop.opening import Source, open_model
    opened = open_model(Source(ckpt=path))
    return opened.model, opened.tokenizer


def _eval(args):
    from zerollm.data.formats import read_prompts
    from zerollm.generation.sample import Sampling, check_sampling_args
    from zerollm.align.tasks import get_task
    from zerollm.align.tasks.evaluate import TaskSampling, evaluate
    from zerollm.tokenizers.char import UnknownCharacters
    if args.name == "lm-eval":
        raise ZeroLLMError("lm-eval tasks are run by lm_eval, not by tasks eval: zerollm tasks make lm-eval --out "
                           "FOLDER --n 200, then lm_eval --model zerollm --model_args ckpt=RUN --tasks FOLDER")
    task = get_task(args.name)
    check_sampling_args(args.temperature, args.top_k, args.top_p)
    if args.answers:
        from zerollm.io.outdir import check_output_file
        check_output_file(args.answers, force=args.force, inputs=[("--data", args.data), ("--ckpt", args.ckpt)],
                          flag="--answers")
    rows = read_prompts(args.data)[:args.n]
    rows = rows[:docsmode.limit("examples evaluated", len(rows))]
    model, tok = _load(args.ckpt)
    try:
        from zerollm.align.tools import load_tools
        how = TaskSampling(args.format, args.max_new_tokens, Sampling(args.temperature, args.top_k, args.top_p),
                           args.seed, args.max_tool_calls, load_tools(args.tools, args.tool_timeout))
        summary, results = evaluate(model, tok, task, rows, how)
    except UnknownCharacters as err:
        raise ZeroLLMError(err.command_line(f"a prompt of --data {args.data}")) from None
    summary = {"task": args.name, "ckpt": args.ckpt, "data": args.data, "temperature": args.temperature,
               "seed": args.seed, **summary}
    if args.answers:
        from zerollm.data.formats import write_jsonl
        write_jsonl(args.answers, [{"prompt": r["prompt"], "completion": r["completion"]} for r in results])
    if args.json:
        json.dump({"summary": summary, "results": results}, sys.stdout, ensure_ascii=False, indent=1)
        sys.stdout.write("\n")
    else:
        low, high = summary["ci95"]
        print(f"{args.name}: {summary['successes']}/{summary['n']} = {summary['success_rate']:.1%} success "
              f"(95% CI {low:.1%}-{high:.1%}), mean reward {summary['mean_reward']:.3f} "
              f"[{summary['format']} prompts, temperature {args.temperature}]")
        if "tool_calls" in summary:
            print(f"  tool calls {summary['tool_calls']:.2f} per answer, {summary['tool_call_valid']:.1%} of them valid; "
                  f"{summary['format_ok']:.1%} in the template's form; {summary['think_tokens']:.1f} think tokens")
    return 0
