"""Offline lm-evaluation-harness tasks from the corpora zerollm ships: YAML files plus local JSONL data.

    zerollm_tang_next    multiple choice: three lines of a Tang poem, which of four lines comes next
                         (the real fourth line and the fourth lines of three other poems)
    zerollm_shakespeare  multiple choice cloze: a line of Shakespeare without its last word, which of
                         four words ends it (the real one and the last words of three other lines)
    zerollm_acrostic     generate_until: 「藏头诗：春夏秋冬」, scored by zerollm.align.tasks.acrostic's verifier
    zerollm_addition     generate_until: "12+345=", scored by zerollm.align.tasks.addition's verifier

The multiple-choice questions come from the last tenth of each corpus, the part ``zerollm train`` keeps
for validation (pre-training never steps on it); acrostic and addition use their heldout splits
(zerollm.align.tasks: no head set and no pair of them is in a train split). Questions are drawn by
default_rng(seed). lm-eval loads the data with ``dataset_path: json`` and the absolute path of the file,
so run ``zerollm tasks make lm-eval`` again after moving the folder.

The YAML files name functions of zerollm.evaluate.lmeval_tasks (``!function ...``): the verifiers, and
the import that registers ``--model zerollm`` (see there). Writing the files needs no lm-eval.
"""

import json
import os

import numpy as np

from zerollm.data import corpora
from zerollm.io.errors import ZeroLLMError
from zerollm.io.fileio import NotRegularFile, open_regular
from zerollm.align.tasks.poems import POEM, couplets
from zerollm.align.tasks import acrostic, addition

VAL_FRACTION = 0.1
MARKER = "zerollm-tasks.json"       # a folder holding it was written here and may be rewritten
TASK_NAMES = ("zerollm_tang_next", "zerollm_shakespeare", "zerollm_acrostic", "zerollm_addition")


def _val_lines(name):
    lines = corpora.read_text(name).splitlines()
    return lines[int(len(lines) * (1 - VAL_FRACTION)):]


# ----------------------------------------------------------------------------
# the questions

def tang_next(n, seed):
    """[{"context", "choices", "label"}]: a poem's first three lines; its fourth line among three others."""
    poems = [couplets(line)[:2] for line in _val_lines("tang") if POEM.fullmatch(line) and len(couplets(line)) in (2, 4)]
    poems = list(dict.fromkeys(tuple(p) for p in poems))                # each poem once, in corpus order
    rng = np.random.default_rng(seed)
    rows = []
    for k in rng.permutation(len(poems))[:n]:
        first, second = poems[k]
        head, real = second.split("，")[0] + "，", second.split("，")[1]   # 「L3，」 and 「L4。」
        others = [poems[j][1].split("，")[1] for j in rng.permutation(len(poems))[:8] if j != k]
        choices = [real] + [o for o in dict.fromkeys(others) if o != real][:3]
        order = rng.permutation(len(choices))
        rows.append({"context": "\n" + first + head, "choices": [choices[i] for i in order],
                     "label": int(np.argmax(order == 0))})
    return rows


def shakespeare_cloze(n, seed):
    """[{"context", "choices", "label"}]: a line without its last word; which of four words ends it."""
    lines = [line for line in _val_lines("shakespeare") if len(line.split()) >= 6 and line[-1].isalpha()]
    rng = np.random.default_rng(seed)
    rows = []
    for k in rng.permutation(len(lines))[:n]:
        words = lines[k].split()
        real = words[-1]
        others = [lines[j].split()[-1] for j in rng.permutation(len(lines))[:8] if j != k]
        choices = [real] + [o for o in dict.fromkeys(others) if o != real][:3]
        order = rng.permutation(len(choices))
        rows.append({"context": "\n" + " ".join(words[:-1]), "choices": [choices[i] for i in order],
                     "label": int(np.argmax(order == 0))})
    return rows


def generation_rows(task, n, seed):
    """The heldout examples of a zerollm task, as many as it has up to n."""
    pool = len(acrostic.pool("heldout")) if task is acrostic else n
    return task.make(min(n, pool), "heldout", seed)


# ----------------------------------------------------------------------------
# writing the folder

MC_YAML = """task: {name}
dataset_path: json
dataset_kwargs:
  data_files:
    test: {data}
test_split: test
output_type: multiple_choice
doc_to_text: "{{{{context}}}}"
doc_to_choice: !function zerollm.evaluate.lmeval_tasks.choices
doc_to_target: label
target_delimiter: {delimiter}
metric_list:
  - metric: acc
    aggregation: mean
    higher_is_better: true
  - metric: acc_norm
    aggregation: mean
    higher_is_better: true
metadata:
  version: 1.0
"""

GEN_YAML = """task: {name}
dataset_path: json
dataset_kwargs:
  data_files:
    test: {data}
test_split: test
output_type: generate_until
doc_to_text: "{{{{prompt}}}}"
doc_to_target: completion
target_delimiter: ""
generation_kwargs:
  until: ["\\n"]
  max_gen_toks: {max_gen_toks}
  do_sample: false
process_results: !function zerollm.evaluate.lmeval_tasks.{results}
metric_list:
  - metric: success
    aggregation: mean
    higher_is_better: true
  - metric: reward
    aggregation: mean
    higher_is_better: true
metadata:
  version: 1.0
"""


def _holds_file(folder, name, text):
    try:
        with open_regular(os.path.join(folder, name), "rb") as f:
            return f.read() == text.encode("utf-8")
    except (OSError, NotRegularFile):         # a pipe of that name holds nothing this command wrote
        return False


def _holds(folder, files):
    """Does ``folder`` hold exactly ``files`` ({name: text}), byte for byte?"""
    return set(os.listdir(folder)) == set(files) and all(_holds_file(folder, n, t) for n, t in files.items())


def task_files(folder, n, seed):
    """{file name: text} of the task folder (its data paths point into ``folder``)."""
    folder = os.path.abspath(folder)
    data = {"zerollm_tang_next": tang_next(n, seed), "zerollm_shakespeare": shakespeare_cloze(n, seed),
            "zerollm_acrostic": generation_rows(acrostic, n, seed),
            "zerollm_addition": generation_rows(addition, n, seed)}
    files = {}
    for name, rows in data.items():
        files[f"{name}.jsonl"] = "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows)
        path = json.dumps(os.path.join(folder, f"{name}.jsonl"))
        if name in ("zerollm_tang_next", "zerollm_shakespeare"):
            delimiter = '""' if name == "zerollm_tang_next" else '" "'
            files[f"{name}.yaml"] = MC_YAML.format(name=name, data=path, delimiter=delimiter)
        else:
            results = "acrostic_results" if name == "zerollm_acrostic" else "addition_results"
            files[f"{name}.yaml"] = GEN_YAML.format(name=name, data=path, max_gen_toks=48, results=results)
    files[MARKER] = json.dumps({"tasks": {k: len(v) for k, v in data.items()}, "n": n, "seed": seed},
                               ensure_ascii=False, indent=1) + "\n"
    return files


def _earlier(folder):
    """(n, seed) the folder's marker records, or None when it cannot be read as one this command writes."""
    try:
        with open_regular(os.path.join(folder, MARKER), "r", encoding="utf-8") as f:
            marker = json.load(f)
        n, seed = marker["n"], marker["seed"]
    except (OSError, ValueError, TypeError, KeyError):
        return None
    ok = all(type(v) is int for v in (n, seed)) and 1 <= n <= 10 ** 7 and 0 <= seed < 2 ** 32   # tasks make's ranges
    return (n, seed) if ok else None


def _written_for(folder):
    """The folder the YAML files point their data at (the folder was moved when that is not ``folder``);
    None when they name none this command would write."""
    try:
        with open_regular(os.path.join(folder, f"{TASK_NAMES[0]}.yaml"), "r", encoding="utf-8") as f:
            lines = [line.strip() for line in f if line.strip().startswith("test: ")]
        path = json.loads(lines[0][len("test: "):])
    except (OSError, ValueError, IndexError):
        return None
    return os.path.dirname(path) if isinstance(path, str) and os.path.isabs(path) else None


def _why_not_rewritten(folder, files, n, seed):
    """None when ``folder`` holds what this command writes for (n, seed), there or where it was written
    before the folder was moved (rewriting it then only points the YAML at the new place), or some of
    those files (one deleted is written again: nothing is lost); else what differs, for the one line that
    asks for --force: the settings it was written with, and the files changed since."""
    if _holds(folder, files):
        return None
    earlier = _earlier(folder)
    if earlier is None:
        return f"but its {MARKER} is not as this command writes it (damaged or edited)"
    written_for = _written_for(folder) or os.path.abspath(folder)
    expected = files if earlier == (n, seed) and written_for == os.path.abspath(folder) else \
        task_files(written_for, *earlier)
    present = set(os.listdir(folder))
    changed = [name for name in sorted(expected) if name in present and not _holds_file(folder, name, expected[name])]
    said = [f"written with --n {earlier[0]} --seed {earlier[1]}"] if earlier != (n, seed) else []
    if changed:
        said.append(f"{'and' if said else 'but'} {', '.join(changed[:3])}{' and more' if len(changed) > 3 else ''} "
                    f"changed since this command wrote {'them' if len(changed) > 1 else 'it'} (edited by hand?), "
                    "and the changes would be lost")
    return " ".join(said) or None


def write_tasks(folder, n, seed, force=False):
    """Write the four tasks into ``folder`` whole or not at all -> {task: number of documents}. A folder
    this command wrote earlier with other settings, or whose files were edited since, is replaced only
    with ``force``; one that holds these very files (or some of them, or did before it was moved) is
    written again, the same; and never while it holds other files (replacing the folder would delete them)."""
    from zerollm.io.outdir import atomic_dir
    present = set(os.listdir(folder)) if os.path.isdir(folder) else set()
    if present and MARKER not in present:
        raise ZeroLLMError(f"{folder} holds files that 'zerollm tasks make lm-eval' did not write; "
                           "choose a new or empty folder for --out")
    others = sorted(present - {MARKER} - {f"{name}.{ext}" for name in TASK_NAMES for ext in ("yaml", "jsonl")})
    if others:
        shown = ", ".join(others[:3]) + (f" and {len(others) - 3} more" if len(others) > 3 else "")
        raise ZeroLLMError(f"{folder} holds files that 'zerollm tasks make lm-eval' did not write ({shown}), which "
                           "replacing the folder would delete; move them out, or choose a new or empty folder for --out")
    files = task_files(folder, n, seed)
    why = _why_not_rewritten(folder, files, n, seed) if present and not force else None
    if why:
        raise ZeroLLMError(f"{folder} already holds lm-eval tasks {why}; pass --force to replace them "
                           f"with --n {n} --seed {seed}, or choose another --out")
    with atomic_dir(folder) as tmp:
        for name, text in files.items():
            with open(os.path.join(tmp, name), "w", encoding="utf-8") as f:
                f.write(text)
    return json.loads(files[MARKER])["tasks"]
