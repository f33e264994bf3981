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
from zerollm.io.errors import ZeroLLMError
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
    from zerollm.align.objectives.reward import RewardObjective, format_pair_report, sequence_rewards
    from zerollm.training.parallel import ShardedModel
    is_prefs, rows = read_rows(args.data)             # before the model: a wrong file is told at once
    model, head, tok = load_reward_model(args.rm)
    engine = ShardedModel(model, args.threads or 1)
    if is_prefs:
        pairs = encode_pairs(tok, rows)
        pairs = pairs[:docsmode.limit("examples evaluated", len(pairs))]     # tests/test_docs_run.py: seconds
        report = RewardObjective(model, pairs, batch_size=1, seed=0, head=head).score_pairs(engine, pairs)
        print(json.dumps(report, ensure_ascii=False) if args.json else format_pair_report(report))
        return 0
    # answers a model wrote (zerollm tasks eval --answers) may hold special tokens it emitted: scored as ids
    rewards = sequence_rewards(engine, head, [encode_example(tok, row, allowed_special="all")[0] for row in rows])
    if args.json:
        print(json.dumps({"rewards": rewards.tolist(), "mean": float(rewards.mean())}))
    else:
        for i, r in enumerate(rewards, 1):
            sys.stdout.write(f"{i:>6}  {r:+.4f}\n")
        print(f"mean reward {rewards.mean():+.4f} over {len(rewards)} answers")
    return 0


def read_rows(path):
    """(is_prefs, rows): the file's first example decides what it is, preference pairs (it has "chosen" or
    "rejected") or answers (prompt + completion, or messages); every row is then checked as one, and an error
    says what was expected and why."""
    from zerollm.data.formats import check_pref_row, check_sft_row, read_jsonl
    rows = read_jsonl(path)
    first, row = rows[0]
    is_prefs = isinstance(row, dict) and bool({"chosen", "rejected"} & set(row))
    kind = ("preference pairs (it has 'chosen'/'rejected')" if is_prefs else
            "answers (it has no 'chosen' or 'rejected')")
    check = check_pref_row if is_prefs else check_sft_row
    checked = []
    for n, row in rows:
        try:
            checked.append(check(row, f"{path} line {n}"))
        except ZeroLLMError as err:
            raise ZeroLLMError(f"{err} (score reads a file of preference pairs {{\"prompt\", \"chosen\", "
                               f"\"rejected\"}} or one of answers {{\"prompt\", \"completion\"}} or {{\"messages\"}}; "
                               f"line {first} made it read this file as {kind}, so every line must be one)") from None
    return is_prefs, checked
