"""Tiny training runs for the robustness tests: made once per session in a second, copied per test.

    run = tiny_run(tmp_path_factory, "char")        # a pristine run directory; never damage it
    mine = copy_run(run, tmp_path)                  # a copy to damage
"""

import shutil

from zerollm.data import corpora
from zerollm.training.checkpoint import latest_checkpoint
from zerollm.cli.entry import main
from zerollm.interop.opening import Source, open_model, save_zerollm

TINY_MODEL = ["--n-layer", "1", "--n-head", "2", "--n-embd", "8", "--block-size", "16", "--batch-size", "2",
              "--max-iters", "2", "--eval-interval", "1", "--eval-iters", "1", "--checkpoint-interval", "1",
              "--sample-tokens", "0", "--no-progress"]
_MADE = {}


def run_main(argv, capture):
    """(exit code, stdout, stderr) of one ``zerollm`` command run in this process; ``capture`` is pytest's
    capsys or capfd. Output printed before it (e.g. while a tiny run was made) is dropped first."""
    capture.readouterr()
    try:
        code = main([str(a) for a in argv])
    except SystemExit as exc:
        code = exc.code
    out, err = capture.readouterr()
    return code, out, err


def tiny_text(folder, n_chars=3000):
    """The first characters of tiny Shakespeare, as a text file in ``folder``."""
    path = folder / "tiny.txt"
    if not path.exists():
        path.write_text(corpora.path("shakespeare").read_text()[:n_chars], encoding="utf-8")
    return path


def tiny_run(tmp_path_factory, tokenizer="char", pos="learned"):
    """A finished 2-step run trained with ``tokenizer`` (char, byte or bpe) and positions ``pos``."""
    key = tokenizer if pos == "learned" else f"{tokenizer}-{pos}"
    if key not in _MADE:
        folder = tmp_path_factory.mktemp(f"tiny-{key}")
        extra = ["--vocab-size", "300"] if tokenizer == "bpe" else []
        if pos != "learned":
            extra += ["--pos", pos]
        code = main(["train", "--data", str(tiny_text(folder)), "--out", str(folder / "run"),
                     "--tokenizer", tokenizer, *extra, *TINY_MODEL])
        assert code == 0
        _MADE[key] = folder / "run"
    return _MADE[key]


def random_base(folder, chars, block_size):
    """FOLDER/base: a random 1-layer model directory with a char tokenizer of ``chars``."""
    from zerollm.interop import hf
    from zerollm.model.gpt import GPT, GPTConfig
    from zerollm.tokenizers import CharTokenizer
    tok = CharTokenizer.train(chars)
    model = GPT(GPTConfig(vocab_size=tok.vocab_size, block_size=block_size, n_layer=1, n_head=2, n_embd=16), seed=0)
    save_zerollm(model, folder / "base", tokenizer=tok)


def tiny_stage_base(folder):
    """``folder``/base: a random 1-layer model directory with a char tokenizer of sums, and sft.jsonl,
    prompts.jsonl (addition) and prefs.jsonl beside it: enough for every post-training command."""
    from zerollm.align.tasks import addition
    from zerollm.data.formats import write_jsonl
    random_base(folder, "0123456789+=\n", block_size=32)
    rows = addition.make(12, "train", 0)
    write_jsonl(folder / "sft.jsonl", rows)
    write_jsonl(folder / "prompts.jsonl", rows)
    write_jsonl(folder / "prefs.jsonl", TINY_PREFS)
    return folder


TINY_PREFS = [{"prompt": f"{a}+{a}=", "chosen": str(2 * a), "rejected": str(2 * a + 1)} for a in range(8)]


def acrostic_base(folder, n_train, n_heldout):
    """FOLDER/train.jsonl and heldout.jsonl of acrostic examples, and FOLDER/base: a random 1-layer model
    with a char tokenizer of their poems (what SFT tests start from). Returns the train rows."""
    from zerollm.align.tasks import acrostic
    from zerollm.data.formats import write_jsonl
    train, heldout = acrostic.make(n_train, "train", 0), acrostic.make(n_heldout, "heldout", 0)
    write_jsonl(folder / "train.jsonl", train)
    write_jsonl(folder / "heldout.jsonl", heldout)
    random_base(folder, "\n" + "".join(r["completion"] for r in train + heldout), block_size=40)
    return train


def copy_run(run, tmp_path, name="run"):
    target = tmp_path / name
    shutil.copytree(run, target)
    return target


def step_dir(run):
    from pathlib import Path
    return Path(latest_checkpoint(run))
