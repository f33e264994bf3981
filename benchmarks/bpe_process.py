"""One BPE training in a fresh process, the way a user meets it (benchmarks/bpe_speed.py starts it).

    python benchmarks/bpe_process.py SIDE CORPUS VOCAB REGEX SPAWNED_AT

SIDE is tokenizers, numpy or fast (zerollm's engine); CORPUS a text file; REGEX the split regex (given
as text, so the tokenizers side imports nothing of zerollm's before it has trained); SPAWNED_AT the
parent's time.time() just before it started this process. Prints one JSON line: the time from the spawn
to a trained tokenizer (the interpreter's start, the imports, numba's compilation or cache load, reading
the text, the split and the training: what a user waits for), the parts, the CPU time spent until then,
then the encoding of the whole text, timed apart, and the learned merges.
"""

import time

STARTED = time.perf_counter()

import json  # noqa: E402
import os  # noqa: E402
import sys  # noqa: E402
from pathlib import Path  # noqa: E402


def train_tokenizers(text, vocab, regex):
    """Hugging Face `tokenizers` with zerollm's split: Split(regex, isolated), then ByteLevel without its
    own regex; the 256 bytes to start from and <|endoftext|>, as zerollm has."""
    from tokenizers import Regex, Tokenizer, models, pre_tokenizers, trainers
    imported = time.perf_counter()
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(regex), behavior="isolated"),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)])
    trainer = trainers.BpeTrainer(vocab_size=vocab, special_tokens=["<|endoftext|>"], show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator([text], trainer)
    return tok, imported


def train_zerollm(text, vocab, regex, engine):
    """What `zerollm prepare --tokenizer bpe` calls, under the engine named."""
    from zerollm.engine import set_engine
    from zerollm.tokenizers import train_tokenizer
    set_engine(engine)
    imported = time.perf_counter()
    return train_tokenizer("bpe", text, vocab, pattern=regex), imported


def merges_of(side, tok):
    """The learned merges as [left bytes hex, right bytes hex], in order (zerollm imported only now)."""
    if side != "tokenizers":
        return [[tok.vocab[a].hex(), tok.vocab[b].hex()] for a, b, _ in tok.merges]
    from zerollm.tokenizers.hf import bytes_to_unicode
    u2b = {c: b for b, c in bytes_to_unicode().items()}
    merges = json.loads(tok.to_str())["model"]["merges"]
    pairs = [m.split(" ") if isinstance(m, str) else m for m in merges]
    return [[bytes(u2b[c] for c in part).hex() for part in pair] for pair in pairs]


def main(argv):
    side, corpus, vocab, regex, spawned = argv
    if side == "tokenizers":
        os.environ.setdefault("RAYON_NUM_THREADS", "1")     # before tokenizers loads: its pool reads it once
    if side != "tokenizers":
        sys.path.insert(0, str(Path(__file__).resolve().parents[1]))     # this checkout's zerollm
    began = time.perf_counter()
    if side == "tokenizers":
        tok, imported = train_tokenizers(Path(corpus).read_text(encoding="utf-8"), int(vocab), regex)
    else:
        tok, imported = train_zerollm(Path(corpus).read_text(encoding="utf-8"), int(vocab), regex, side)
    trained = time.perf_counter()
    user_s = time.time() - float(spawned)
    # the CPU time of every thread of this process since it started: unlike the times above, it hardly
    # grows when other programs share the CPU
    cpu_s = time.process_time()
    text = Path(corpus).read_text(encoding="utf-8")
    ids = tok.encode(text).ids if side == "tokenizers" else tok.encode(text)
    encoded = time.perf_counter()
    vocab_size = tok.get_vocab_size() if side == "tokenizers" else tok.vocab_size
    print(json.dumps({"user_s": user_s, "cpu_s": cpu_s, "start_s": user_s - (trained - STARTED), "import_s": imported - began,
                      "train_s": trained - imported, "encode_s": encoded - trained, "tokens": len(ids),
                      "vocab_size": vocab_size, "merges": merges_of(side, tok)}))


if __name__ == "__main__":
    main(sys.argv[1:])
