"""``zerollm score``: what a trained reward model thinks of a file.

    zerollm score --rm runs/rm --data prefs_heldout.jsonl          # pairs: accuracy and margin, per corruption
    zerollm score --rm runs/rm --data answers.jsonl --json          # prompt/completion lines: one reward each

A preference file ({"prompt", "chosen", "rejected"}) gives the share of pairs whose chosen answer scores
higher and the mean margin r_chosen - r_rejected, overall and per "corruption" type when the lines have
one. A prompt/completion file gives each answer's reward.
"""

import json
import sys

from zerollm.io import docsmode
from zerollm.align.objectives.reward import load_reward_model
from zerollm.engine.threads import add_threads_argument, limit_threads


def add_arguments(p):
    p.add_argument("--rm", required=True, metavar="DIR", help="a run or checkpoint of 'zerollm reward'")
    p.add_argument("--data", required=True, metavar="FILE", help="preference pairs or prompt/completion lines (JSONL)")
    p.add_argument("--json", action="store_true", help="print the results as JSON")
    add_threads_argument(p, data_parallel=True)



def run(args):
    with limit_threads(1 if (args.threads or 1) > 1 else args.threads):
        return _run(args)


def _run(args):
    from zerollm.data.chat import encode_example
    from zerollm.align.objectives.pairs import encode_pairs
    from zerollm.data.formats import read_prefs, read_sft
    from zerollm.align.objectives.reward import RewardObjective, format_pair_report, sequence_rewards
    from zerollm.training.parallel import ShardedModel
    model, head, tok = load_reward_model(args.rm)
    engine = ShardedModel(model, args.threads or 1)
    if _is_prefs(args.data):
        pairs = encode_pairs(tok, read_prefs(args.data))
        pairs = pairs[:docsmode.limit("examples evaluated", len(pairs))]     # tests/test_docs_run.py: seconds
        report = RewardObjective(model, pairs, batch_size=1, seed=0, head=head).score_pairs(engine, pairs)
        print(json.dumps(report, ensure_ascii=False) if args.json else format_pair_report(report))
        return 0
    # answers a model wrote (zerollm tasks eval --answers) may hold special tokens it emitted: scored as ids
    rows = read_sft(args.data)
    rewards = sequence_rewards(engine, head, [encode_example(tok, row, allowed_special="all")[0] for row in rows])
    if args.json:
        print(json.dumps({"rewards": rewards.tolist(), "mean": float(rewards.mean())}))
    else:
        for i, r in enumerate(rewards, 1):
            sys.stdout.write(f"{i:>6}  {r:+.4f}\n")
        print(f"mean reward {rewards.mean():+.4f} over {len(rewards)} answers")
    return 0


def _is_prefs(path):
    """Does the file's first line hold a preference pair (chosen/rejected), rather than prompt/completion?"""
    try:
        with open(path, encoding="utf-8") as f:
            first = next((line for line in f if line.strip()), "{}")
        keys = json.loads(first)
    except (OSError, UnicodeDecodeError, ValueError, RecursionError):
        return False          # let the reader say precisely what is wrong with the file
    return isinstance(keys, dict) and {"chosen", "rejected"} <= set(keys)
