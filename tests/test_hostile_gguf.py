"""Hostile GGUF files (and tokenizer files): what a file says is data, never a hang or a traceback.

Three kinds of hostile content, each tried through the real command line on many files made from one
good file by changing one thing:
- a split regex read from a file that backtracks for ever on some prompts (or explodes when compiled):
  refused at load, in a subprocess bounded by a timeout so that a hang fails the test;
- metadata of the wrong type or range (a head count of 0 or "x", a width of 2^63, tokens that are numbers);
- tensor offsets off the file's alignment, and alignments that are no power of two.
The other side of each: the good file, and files that differ only in harmless ways (a known split regex, an
alignment of 64 or 8, a RoPE base stored as an integer), still load and sample the same tokens.
"""

import json
import subprocess
import sys

import gguf
import numpy as np
import pytest

from tests.tiny_runs import run_main
from zerollm.data import corpora
from zerollm.interop.gguf import export_gguf
from zerollm.interop.hf import export
from zerollm.model.gpt import GPT, GPTConfig
from zerollm.tokenizers import BPETokenizer
from zerollm.tokenizers.patterns import GPT2_PATTERN, GPT4_PATTERN
from zerollm.interop.opening import Source, open_model, save_zerollm

T, V = gguf.GGUFValueType, gguf.GGUFValue
LAYOUTS = {"gpt2": dict(gelu="tanh"),
           "llama": dict(norm="rmsnorm", pos="rope", mlp="swiglu", bias=False, n_kv_head=1, tie_embeddings=False,
                         n_inner=64)}
SAMPLE = ["--max-new-tokens", "4", "--temperature", "0", "--prompt", "To be, or not"]


@pytest.fixture(scope="module")
def tok():
    return BPETokenizer.train(corpora.path("shakespeare").read_text()[:20000], 300)     # the gpt4 split regex


@pytest.fixture(scope="module")
def good(tmp_path_factory, tok):
    """{arch: a good GGUF file} of a 1-layer model with a BPE tokenizer."""
    folder, files = tmp_path_factory.mktemp("good-gguf"), {}
    for arch, layout in LAYOUTS.items():
        cfg = GPTConfig(vocab_size=300, block_size=32, n_layer=1, n_head=2, n_embd=32, **layout)
        files[arch] = folder / f"{arch}.gguf"
        export_gguf(GPT(cfg, seed=0).eval(), files[arch], tokenizer=tok)
    return files


def rewritten(good_file, path, changes=None, alignment=None):
    """A copy of ``good_file`` with metadata ``changes`` ({key: GGUFValue, or None to leave the key out}), written
    by the gguf package's writer; ``alignment``: the data alignment it writes (and says in general.alignment)."""
    r = gguf.GGUFReader(good_file)
    w = gguf.GGUFWriter(path, r.fields["general.architecture"].contents())
    for key, field in r.fields.items():
        if not key.startswith("GGUF."):
            sub = field.types[-1] if field.types[0] == T.ARRAY else None
            w.kv_data[0][key] = V(field.contents(), field.types[0], sub)
    for key, v in (changes or {}).items():
        w.kv_data[0].pop(key, None) if v is None else w.kv_data[0].update({key: v})
    if alignment is not None:
        w.data_alignment = alignment
        w.kv_data[0]["general.alignment"] = V(alignment, T.UINT32)
    for t in r.tensors:
        w.add_tensor(t.name, np.array(t.data))
    w.write_header_to_file(), w.write_kv_data_to_file(), w.write_tensors_to_file(), w.close()
    return path


def zerollm(*args, timeout=90):
    """(exit code, stdout, stderr) of ``python -m zerollm ARGS``; a run past ``timeout`` fails the test."""
    proc = subprocess.run([sys.executable, "-m", "zerollm", *map(str, args)], capture_output=True, text=True,
                          timeout=timeout)
    return proc.returncode, proc.stdout, proc.stderr


def one_line(code, err):
    assert code == 1 and len(err.strip().splitlines()) == 1 and "Traceback" not in err, err
    return err


# ----------------------------------------------------------------------------
# split regexes: a file's regex is never compiled unless it is one zerollm ships

# (regex, a prompt on which it backtracks for ever, or None when compiling it is what explodes)
BACKTRACKING = [
    (r"^(a|a)*$", "a" * 40 + "!"),
    (r"(a|aa)+$", "a" * 60 + "!"),
    (r"(\w|\w\w)+$", "abcdefghij" * 5 + "!"),
    (r"(?:x|xx)+y", "x" * 60),
    (r"( |  )+!", " " * 60 + "?"),
    (r"(?:\s|\s\s)*\S$", " " * 60),
    (r"(a+)+$", "a" * 40 + "!"),
    (r"(\w+\s?)*$", "word " * 15 + "!"),
    (r"((((a{100}){100}){100}){100})", "a"),
]


@pytest.mark.slow           # a zerollm process per pattern, each with a timeout
@pytest.mark.parametrize("pattern, prompt", BACKTRACKING, ids=[p for p, _ in BACKTRACKING])
def test_a_backtracking_split_regex_in_a_gguf_file_is_refused_at_load(good, tmp_path, pattern, prompt):
    bad = rewritten(good["gpt2"], tmp_path / "regex.gguf", {"zerollm.split_regex": V(pattern, T.STRING)})
    code, _, err = zerollm("sample", "--gguf", bad, "--max-new-tokens", "2", "--prompt", prompt, timeout=60)
    assert f"{bad}: metadata key zerollm.split_regex is a split regex zerollm does not run" in one_line(code, err)
    assert "--pattern gpt2 or gpt4" in err


@pytest.mark.slow
@pytest.mark.parametrize("pattern", BACKTRACKING[:4] + BACKTRACKING[-1:], ids=lambda p: p[0])
def test_a_backtracking_split_regex_in_a_tokenizer_json_is_refused_at_load(tok, tmp_path, pattern):
    """zerollm's own tokenizer.json (its "regex") and a Hugging Face one (the pre_tokenizer's Split regex)."""
    regex, prompt = pattern
    cfg = GPTConfig(vocab_size=300, block_size=32, n_layer=1, n_head=2, n_embd=32, gelu="tanh")
    ours, theirs = save_zerollm(GPT(cfg, seed=0), tmp_path / "ours", tokenizer=tok), tmp_path / "theirs"
    export(GPT(cfg, seed=0), theirs, tokenizer=tok)
    edit = {(ours, "--ckpt"): lambda d: d.update(regex=regex),
            (theirs, "--hf"): lambda d: d["pre_tokenizer"]["pretokenizers"][0]["pattern"].update(Regex=regex)}
    for (folder, flag), change in edit.items():
        file = tmp_path / folder / "tokenizer.json"
        data = json.loads(file.read_text())
        change(data)
        file.write_text(json.dumps(data))
        code, _, err = zerollm("sample", flag, folder, "--max-new-tokens", "2", "--prompt", prompt, timeout=60)
        assert "is a split regex zerollm does not run" in one_line(code, err) and str(file) in err, err


def test_a_known_split_regex_in_a_file_still_gives_the_same_tokens(good, tmp_path, capsys):
    expected = run_main(["sample", "--gguf", good["gpt2"], *SAMPLE], capsys)
    assert expected[0] == 0
    for i, same in enumerate((GPT4_PATTERN, "gpt4")):
        file = rewritten(good["gpt2"], tmp_path / f"same{i}.gguf", {"zerollm.split_regex": V(same, T.STRING)})
        assert run_main(["sample", "--gguf", file, *SAMPLE], capsys)[:2] == expected[:2]
    for i, changes in enumerate(({"zerollm.split_regex": V(GPT2_PATTERN, T.STRING)},
                                 {"zerollm.split_regex": None,        # llama.cpp's name, for Llama 3's regex
                                  "tokenizer.ggml.pre": V("llama-bpe", T.STRING)})):
        file = rewritten(good["gpt2"], tmp_path / f"other{i}.gguf", changes)
        code, said, _ = run_main(["sample", "--gguf", file, *SAMPLE], capsys)
        assert code == 0 and said.startswith("To be, or not"), said


# ----------------------------------------------------------------------------
# metadata of the wrong type or range: one line naming the file and the key

def _ints(n, k=T.INT32):
    return V(list(range(n)), T.ARRAY, k)


# (arch, {key: value}, what the one line says after "FILE: ")
BAD_METADATA = [
    ("gpt2", {"gpt2.attention.head_count": V(0, T.UINT32)},
     "metadata key gpt2.attention.head_count must be a whole number from 1 to 65536, got 0"),
    ("gpt2", {"gpt2.attention.head_count": V("x", T.STRING)},
     "metadata key gpt2.attention.head_count must be a whole number from 1 to 65536, got 'x'"),
    ("gpt2", {"gpt2.attention.head_count": V(3, T.UINT32)},
     "metadata key gpt2.embedding_length (32) must be a multiple of gpt2.attention.head_count (3)"),
    ("gpt2", {"gpt2.block_count": V(2 ** 63, T.UINT64)},
     "metadata key gpt2.block_count must be a whole number from 1 to 10000, got 9223372036854775808"),
    ("gpt2", {"gpt2.embedding_length": V(-32, T.INT32)}, "metadata key gpt2.embedding_length must be"),
    ("gpt2", {"gpt2.context_length": V(32.0, T.FLOAT32)},
     "metadata key gpt2.context_length must be a whole number from 1 to 1048576, got 32.0"),
    ("gpt2", {"gpt2.feed_forward_length": V(True, T.BOOL)},
     "metadata key gpt2.feed_forward_length must be a whole number from 1 to 4194304, got True"),
    ("gpt2", {"gpt2.attention.layer_norm_epsilon": V("1e-5", T.STRING)},
     "metadata key gpt2.attention.layer_norm_epsilon must be a number in (0, 1], got '1e-5'"),
    ("gpt2", {"gpt2.attention.layer_norm_epsilon": V(float("nan"), T.FLOAT32)},
     "metadata key gpt2.attention.layer_norm_epsilon must be a number in (0, 1], got nan"),
    ("gpt2", {"general.architecture": V(7, T.UINT32)}, "metadata key general.architecture must be a text"),
    ("gpt2", {"gpt2.vocab_size": V("300", T.STRING)}, "metadata key gpt2.vocab_size must be a whole number"),
    ("llama", {"llama.rope.freq_base": V("10000", T.STRING)},
     "metadata key llama.rope.freq_base must be a number in (0, 1e+12], got '10000'"),
    ("llama", {"llama.rope.freq_base": V(-1.0, T.FLOAT32)}, "metadata key llama.rope.freq_base must be"),
    ("llama", {"llama.attention.head_count_kv": V(0, T.UINT32)},
     "metadata key llama.attention.head_count_kv must be a whole number from 1 to 65536, got 0"),
    ("llama", {"llama.attention.head_count_kv": V(3, T.UINT32)},
     "metadata key llama.attention.head_count (2) must be a multiple of llama.attention.head_count_kv (3)"),
    ("llama", {"llama.attention.layer_norm_rms_epsilon": V([1.0], T.ARRAY, T.FLOAT32)},
     "metadata key llama.attention.layer_norm_rms_epsilon must be a number in (0, 1], got [1.0]"),
    ("llama", {"llama.expert_count": V("4", T.STRING)}, "metadata key llama.expert_count must be"),
    ("llama", {"llama.expert_count": V(4, T.UINT32), "llama.expert_used_count": V(9, T.UINT32)},
     "metadata key llama.expert_used_count (9) is more than llama.expert_count (4)"),
    ("gpt2", {"tokenizer.ggml.tokens": _ints(300)},
     "metadata key tokenizer.ggml.tokens must be a list of texts, but item 0 is 0"),
    ("gpt2", {"tokenizer.ggml.tokens": V("abc", T.STRING)},
     "metadata key tokenizer.ggml.tokens must be a list of texts, got 'abc'"),
    ("gpt2", {"tokenizer.ggml.token_type": V([1] * 299 + [99], T.ARRAY, T.INT32)},
     "metadata key tokenizer.ggml.token_type must be a list of token types (whole numbers from 0 to 6), "
     "but item 299 is 99"),
    ("gpt2", {"tokenizer.ggml.merges": _ints(3)}, "metadata key tokenizer.ggml.merges must be a list of texts"),
    ("gpt2", {"tokenizer.ggml.model": V(["gpt2"], T.ARRAY, T.STRING)},
     "metadata key tokenizer.ggml.model must be a text, got ['gpt2']"),
    ("gpt2", {"tokenizer.ggml.bos_token_id": V(5000, T.UINT32)},
     "metadata key tokenizer.ggml.bos_token_id is 5000, past the 300 tokens"),
    ("gpt2", {"tokenizer.ggml.eos_token_id": V(-1, T.INT32)}, "metadata key tokenizer.ggml.eos_token_id must be"),
    ("gpt2", {"zerollm.split_regex": V(5, T.UINT32)}, "metadata key zerollm.split_regex must be a text, got 5"),
]


def _more_tokens(good_file):
    """tokens / token_type with 10 more entries than the model has rows: ids with no embedding."""
    r = gguf.GGUFReader(good_file)
    tokens = r.fields["tokenizer.ggml.tokens"].contents() + [f"extra{i}" for i in range(10)]
    return {"tokenizer.ggml.tokens": V(tokens, T.ARRAY, T.STRING),
            "tokenizer.ggml.token_type": V([1] * len(tokens), T.ARRAY, T.INT32)}


@pytest.mark.parametrize("arch, changes, said", BAD_METADATA, ids=[f"{next(iter(c))}-{i}" for i, (_, c, _) in
                                                                    enumerate(BAD_METADATA)])
def test_metadata_of_the_wrong_type_or_range_is_one_line_naming_the_key(good, tmp_path, capsys, arch, changes, said):
    bad = rewritten(good[arch], tmp_path / "bad.gguf", changes)
    code, _, err = run_main(["sample", "--gguf", bad, *SAMPLE], capsys)
    assert f"{bad}: {said}" in one_line(code, err), err


def test_more_tokens_than_the_model_has_rows_is_refused(good, tmp_path, capsys):
    bad = rewritten(good["gpt2"], tmp_path / "more.gguf", _more_tokens(good["gpt2"]))
    code, _, err = run_main(["sample", "--gguf", bad, *SAMPLE], capsys)
    assert f"{bad}: metadata key tokenizer.ggml.tokens lists 310 tokens but the model has 300" in one_line(code, err)


@pytest.mark.parametrize("arch, changes", [
    ("gpt2", {}),                                                         # the writer's copy of the good file
    ("llama", {"llama.rope.freq_base": V(10000, T.UINT32)}),        # a whole number is a number
    ("gpt2", {"gpt2.vocab_size": None}),                                # absent: token_embd.weight's rows
    ("gpt2", {"tokenizer.ggml.bos_token_id": V(299, T.UINT32)}),
], ids=["copy", "integer-rope-base", "no-vocab-size", "bos"])
def test_good_metadata_still_loads_and_samples(good, tmp_path, capsys, arch, changes):
    file = rewritten(good[arch], tmp_path / "ok.gguf", changes)
    code, said, _ = run_main(["sample", "--gguf", file, *SAMPLE], capsys)
    assert code == 0 and said.startswith("To be, or not"), said
    assert (code, said) == run_main(["sample", "--gguf", good[arch], *SAMPLE], capsys)[:2]


# ----------------------------------------------------------------------------
# alignment: every tensor's data at a multiple of general.alignment, itself a power of two

def _offset_at(path, name):
    """Where tensor ``name``'s 8-byte data offset sits in the file (the last part of its tensor-info record)."""
    t = next(t for t in gguf.GGUFReader(path).tensors if t.name == name)
    return t.field.offset + sum(p.nbytes for p in t.field.parts[:5])


@pytest.mark.parametrize("shift", [4, 1, 16, 31])
def test_a_tensor_offset_off_the_alignment_is_refused(good, tmp_path, capsys, shift):
    """Moved by less than the alignment, the tensor would be read a few bytes off: every number garbage."""
    data = bytearray(good["gpt2"].read_bytes())
    at = _offset_at(good["gpt2"], "blk.0.attn_norm.weight")
    offset = int.from_bytes(data[at:at + 8], "little")
    data[at:at + 8] = (offset + shift).to_bytes(8, "little")
    bad = tmp_path / "misaligned.gguf"
    bad.write_bytes(bytes(data))
    code, _, err = run_main(["sample", "--gguf", bad, *SAMPLE], capsys)
    assert (f"{bad}: tensor blk.0.attn_norm.weight starts at offset {offset + shift}, not a multiple of the file's "
            "alignment 32 (general.alignment)") in one_line(code, err)


@pytest.mark.parametrize("alignment, said", [
    (V(3, T.UINT32), "must be a power of two from 1 to 2097152, got 3"),
    (V(0, T.UINT32), "must be a power of two from 1 to 2097152, got 0"),
    (V(48, T.UINT32), "must be a power of two from 1 to 2097152, got 48"),
    (V(2 ** 31, T.UINT32), "must be a power of two from 1 to 2097152, got 2147483648"),
    (V(32, T.UINT64), "must be stored as a uint32"),
    (V("32", T.STRING), "must be stored as a uint32"),
], ids=["3", "0", "48", "2^31", "uint64", "text"])
def test_a_bad_alignment_is_refused(good, tmp_path, capsys, alignment, said):
    bad = rewritten(good["gpt2"], tmp_path / "align.gguf", {"general.alignment": alignment})
    code, _, err = run_main(["sample", "--gguf", bad, *SAMPLE], capsys)
    assert f"{bad}: metadata key general.alignment {said}" in one_line(code, err), err


@pytest.mark.parametrize("alignment", [8, 64, 4096])
def test_another_power_of_two_alignment_samples_the_same_tokens(good, tmp_path, capsys, alignment):
    file = rewritten(good["llama"], tmp_path / "aligned.gguf", alignment=alignment)
    assert gguf.GGUFReader(file).alignment == alignment
    expected = run_main(["sample", "--gguf", good["llama"], *SAMPLE], capsys)
    assert expected[0] == 0 and run_main(["sample", "--gguf", file, *SAMPLE], capsys)[:2] == expected[:2]
