"""lm-evaluation-harness: ``lm_eval --model zerollm`` on the offline tasks agrees with lm-eval's own ``hf``
model running the zerollm-exported copy (zerollm convert): per-request log-likelihoods within 1e-4,
the same generations, the same scores."""

import glob
import json
import os
import subprocess
import sys

import numpy as np
import pytest

from zerollm.cli.entry import main

from tiny_runs import tiny_text

pytestmark = pytest.mark.slow   # lm-eval's own CLI against its hf backend: not in the fast loop

# the Hub cannot be reached: lm-eval's datasets read the local JSONL files only, with a cache in /tmp
OFFLINE = {"HF_DATASETS_OFFLINE": "1", "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}


@pytest.fixture(autouse=True, scope="module")
def offline(tmp_path_factory):
    """The Hub switched off, and the datasets cache in pytest's temporary folder (a clone in /tmp must not
    open files beside itself), for this module's tests only: set at import, it leaked into every later test,
    and the docs test's [online] commands could no longer reach their local stand-in."""
    OFFLINE["HF_HOME"] = str(tmp_path_factory.mktemp("hf-home"))
    saved = {k: os.environ.get(k) for k in OFFLINE}
    os.environ.update(OFFLINE)
    yield
    for k, v in saved.items():
        if v is None:
            os.environ.pop(k, None)
        else:
            os.environ[k] = v

LIMIT = 2
GEN = "max_gen_toks=6"               # short generations: the test is about agreement, not about poems


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    """A tiny BPE run (block 64: a Tang line is 18 byte tokens), its Hugging Face export, the tasks."""
    folder = tmp_path_factory.mktemp("lm-eval")
    run, hf, tasks = folder / "run", folder / "hf", folder / "tasks"
    assert main(["train", "--data", str(tiny_text(folder)), "--out", str(run), "--tokenizer", "bpe", "--vocab-size",
                 "300", "--n-layer", "1", "--n-head", "2", "--n-embd", "16", "--block-size", "64", "--batch-size", "2",
                 "--max-iters", "3", "--eval-interval", "3", "--eval-iters", "1", "--sample-tokens", "0",
                 "--no-progress"]) == 0
    assert main(["convert", "--from", str(run), "--to", str(hf)]) == 0
    assert main(["tasks", "make", "lm-eval", "--out", str(tasks), "--n", "6", "--seed", "0"]) == 0
    return run, hf, tasks


def samples_of(folder):
    """{task: [(doc_id, responses, metrics)]} from lm-eval's --log_samples files."""
    out = {}
    for path in glob.glob(str(folder / "**" / "samples_*.jsonl"), recursive=True):
        for line in open(path, encoding="utf-8"):
            s = json.loads(line)
            task = os.path.basename(path)[len("samples_"):].rsplit("_", 1)[0]
            out.setdefault(task, []).append((s["doc_id"], s["resps"], {m: s[m] for m in s["metrics"]}))
    return {t: sorted(v, key=lambda x: x[0]) for t, v in out.items()}


def our_tasks(folder):
    """lm-eval's task index of ``folder`` alone: its ~14,000 built-in task files are parsed (~12 s of CPU) only
    where the CLI itself runs, which has no switch to leave them out."""
    from lm_eval.tasks import TaskManager
    return TaskManager(include_path=str(folder), include_defaults=False)


def test_lm_eval_cli_with_model_zerollm_agrees_with_the_hf_backend(setup, tmp_path):
    run, hf, tasks = setup
    # 1. the documented command, in a fresh interpreter: the task YAML files register --model zerollm
    env = {**os.environ, **OFFLINE, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)}
    proc = subprocess.run([sys.executable, "-m", "lm_eval", "--model", "zerollm", "--model_args", f"ckpt={run}",
                           "--tasks", str(tasks), "--limit", str(LIMIT), "--gen_kwargs", GEN, "--log_samples", "--output_path",
                           str(tmp_path / "zerollm")], capture_output=True, text=True, env=env, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    ours = samples_of(tmp_path / "zerollm")
    # 2. lm-eval's own transformers model on the exported directory, in this process
    import lm_eval
    results = lm_eval.simple_evaluate(model="hf", model_args=f"pretrained={hf},device=cpu,dtype=float32",
                                      tasks=sorted(ours), task_manager=our_tasks(tasks),
                                      limit=LIMIT, log_samples=True, gen_kwargs=GEN)
    theirs = {t: sorted([(s["doc_id"], s["resps"], {m: s[m] for m in s["metrics"]}) for s in v], key=lambda x: x[0])
              for t, v in results["samples"].items()}
    assert sorted(ours) == sorted(theirs) == ["zerollm_acrostic", "zerollm_addition", "zerollm_shakespeare",
                                              "zerollm_tang_next"]
    for task in ours:
        assert len(ours[task]) == len(theirs[task]) == LIMIT
        for (doc, r1, m1), (_, r2, m2) in zip(ours[task], theirs[task]):
            assert m1 == m2, (task, doc)                     # the same accuracy, success and reward
            if task in ("zerollm_tang_next", "zerollm_shakespeare"):
                lp1 = [float(r[0][0]) for r in r1]
                lp2 = [float(r[0][0]) for r in r2]
                assert max(abs(a - b) for a, b in zip(lp1, lp2)) < 1e-4, (task, doc, lp1, lp2)
                assert [r[0][1] in (True, "True") for r in r1] == [r[0][1] in (True, "True") for r in r2]
            else:
                assert r1 == r2, (task, doc)                 # the same greedy generation


def test_model_args_hf_dir_scores_as_the_zerollm_run(setup):
    """model_args hf=DIR (a Hugging Face directory) gives the same numbers as ckpt=RUN it was exported from."""
    from types import SimpleNamespace
    from zerollm.evaluate.harness import ZeroLLMLM
    run, hf, _ = setup
    ours, theirs = ZeroLLMLM(ckpt=str(run)), ZeroLLMLM(hf=str(hf))
    pairs = [SimpleNamespace(args=("To be, or not", " to be")), SimpleNamespace(args=("春眠不觉晓，", "处处闻啼鸟。"))]
    rolling = [SimpleNamespace(args=("To be, or not to be, that is the question. " * 8,))]
    assert ours.loglikelihood(pairs) == theirs.loglikelihood(pairs)
    assert ours.loglikelihood_rolling(rolling) == theirs.loglikelihood_rolling(rolling)
    assert len(ours.encode(rolling[0].args[0])) > 64            # longer than the context: several windows


# ----------------------------------------------------------------------------
# model_args are checked, by name, before the model is loaded

@pytest.mark.parametrize("args, fragment", [
    ("seed=-1", "model_args seed must be a whole number from 0 to 9223372036854775807, got -1"),
    ("seed=1.5", "model_args seed must be a whole number from 0 to 9223372036854775807, got 1.5"),
    ("seed=abc", "model_args seed must be a whole number"),
    ("seed=true", "model_args seed must be a whole number"),
    ("seed=9223372036854775808", "model_args seed must be a whole number"),
    ("threads=0", "model_args threads must be a whole number from 1 to 1024, got 0"),
    ("bogus=1", "model_args bogus: not known to --model zerollm; the known ones are ckpt, hf, threads, chat, seed"),
    ("sed=1,temprature=0", "model_args sed, temprature: not known"),
])
def test_bad_model_args_are_refused_by_name(tmp_path, args, fragment):
    """As lm_eval builds the model: its own parser turns "-1" into -1 and "1.5" into 1.5, and it adds its
    --batch_size, --max_batch_size and --device. The checks come before the load (no run is needed)."""
    from zerollm.evaluate.harness import ZeroLLMLM
    from zerollm.io.errors import ZeroLLMError
    with pytest.raises(ZeroLLMError) as err:
        ZeroLLMLM.create_from_arg_string(f"ckpt={tmp_path / 'no-run'},{args}",
                                         {"batch_size": "1", "max_batch_size": None, "device": "cpu"})
    assert fragment in str(err.value) and "\n" not in str(err.value)


def test_good_model_args_and_lm_evals_own_are_accepted(setup):
    from zerollm.evaluate.harness import ZeroLLMLM
    run, _, _ = setup
    lm = ZeroLLMLM.create_from_arg_string(f"ckpt={run},seed=9223372036854775807,threads=2",
                                          {"batch_size": "4", "max_batch_size": 64, "device": "cpu"})
    assert (lm.seed, lm.threads, lm.batch_size) == (2 ** 63 - 1, 2, 4)
    from types import SimpleNamespace                           # the largest seed samples
    sampled = SimpleNamespace(args=("To be", {"until": ["\n"], "max_gen_toks": 3, "do_sample": True}))
    assert isinstance(lm.generate_until([sampled])[0], str)
    assert ZeroLLMLM(ckpt=str(run), seed="5").seed == 5          # a dict of model_args from Python: text


# ----------------------------------------------------------------------------
# a character tokenizer meets characters it has no id for

def test_a_char_model_scores_texts_with_characters_it_lacks(tmp_path_factory, capsys):
    """`lm_eval --model zerollm` on a char model (README Part 6) ended in a traceback (UnknownCharacters) on the
    shipped English tasks and on zerollm_acrostic's '：'. The characters it has no id for are left out, said
    once on stderr, and what is left is scored as that text."""
    from types import SimpleNamespace
    from tiny_runs import tiny_run
    from zerollm.evaluate.harness import ZeroLLMLM
    lm = ZeroLLMLM(ckpt=str(tiny_run(tmp_path_factory, "char")))
    capsys.readouterr()
    known = "".join(lm.tok.decode([i]) for i in range(lm.tok.vocab_size) if lm.tok.decode([i]).isalpha())[:6]
    a, b = known[:3], known[3:6]
    pairs = [SimpleNamespace(args=(f"{a}：é", f" {b}€")), SimpleNamespace(args=(f"{a}", f" {b}"))]
    (ll_odd, _), (ll_plain, _) = lm.loglikelihood(pairs)
    assert ll_odd == pytest.approx(ll_plain, abs=1e-6)          # scored as the text without them (one batch:
                                                                # rows of other lengths round a little apart)
    err = capsys.readouterr().err
    assert all(err.count(c) == 1 for c in "é€：") and "Traceback" not in err, err   # each said once
    lm.loglikelihood(pairs)
    assert capsys.readouterr().err == ""                        # said once
    assert lm.prefix is None                                    # no <|endoftext|>: first token is context only
    nothing, all_odd, plain = lm.loglikelihood([SimpleNamespace(args=("：：", f" {b}")),
                                                SimpleNamespace(args=(a, "：：")), SimpleNamespace(args=("", f" {b}"))])
    assert nothing[0] == pytest.approx(plain[0], abs=1e-6) and np.isfinite(plain[0])   # no context left: as ""
    assert all_odd == (float("-inf"), False)                    # an answer it can never write
    rolling = lm.loglikelihood_rolling([SimpleNamespace(args=(f"{a}：{b}",))])
    assert rolling == pytest.approx(lm.loglikelihood_rolling([SimpleNamespace(args=(f"{a}{b}",))]), abs=1e-6)



def test_lm_eval_runs_the_shipped_tasks_on_a_char_model(tmp_path_factory, tmp_path):
    import lm_eval
    import zerollm.evaluate.harness  # noqa: F401  (registers --model zerollm)
    from tiny_runs import tiny_run
    run = tiny_run(tmp_path_factory, "char")
    tasks = tmp_path / "tasks"
    assert main(["tasks", "make", "lm-eval", "--out", str(tasks), "--n", "4", "--seed", "0"]) == 0
    manager = our_tasks(tasks)
    names = sorted(n for n in manager.all_tasks if n.startswith("zerollm_"))
    results = lm_eval.simple_evaluate(model="zerollm", model_args=f"ckpt={run}", tasks=names, limit=2,
                                      task_manager=manager, gen_kwargs=GEN)
    assert set(results["results"]) >= {"zerollm_acrostic"}, results["results"].keys()
