"""GGUF files zerollm writes, read by llama.cpp itself (llama-cpp-python, pinned in the test extras).

tests/test_gguf.py checks the files with the `gguf` package and transformers; here the reader is the
program people run them with: the same token ids for the same text (a char vocabulary of Tang poems and
Shakespeare, a byte one, a chat model's special tokens), the same next-token logits and the same greedy
tokens as zerollm's NumPy engine, for a model of every preset the README trains.
"""

import numpy as np
import pytest

from tests.test_gguf import GPT2, LLAMA, tiny, written
from zerollm.data import chat, corpora
from zerollm.engine import use_engine
from zerollm.interop.gguf_load import load_gguf
from zerollm.model.gpt import GPT
from zerollm.tokenizers import ByteTokenizer, CharTokenizer
from zerollm.training.presets import build_configs

llama_cpp = pytest.importorskip("llama_cpp", reason='llama.cpp\'s Python binding: pip install -e ".[test]"')

POEM = "春眠不觉晓，处处闻啼鸟。\n夜来风雨声，花落知多少。"


def llama(path, **kw):
    """The file in llama.cpp, one thread, no log lines."""
    return llama_cpp.Llama(model_path=str(path), n_threads=1, verbose=False, **kw)


def their_ids(llm, text):
    return llm.tokenize(text.encode("utf-8"), add_bos=False, special=True)


def logits_and_greedy(model, llm, prompt, n_new):
    """zerollm's NumPy logits at every position of prompt + its greedy continuation, llama.cpp's logits at
    the same positions, and both greedy continuations (llama.cpp's from its own logits, through its KV cache)."""
    ours = list(prompt)
    with use_engine("numpy"):
        for _ in range(n_new):
            ours.append(int(np.argmax(model.forward(np.array([ours]))[0][0, -1])))
        want = model.forward(np.array([ours]))[0][0]                         # (T, V)
    llm.eval(prompt)
    theirs = list(prompt)
    for _ in range(n_new):
        theirs.append(int(np.argmax(llm.scores[llm.n_tokens - 1])))
        llm.eval(theirs[-1:])
    return want, np.array(llm.scores[:len(theirs)]), ours[len(prompt):], theirs[len(prompt):]


# ----------------------------------------------------------------------------
# token ids

def test_a_char_vocabulary_tokenizes_to_zerollm_s_ids(tmp_path, tang_path, shakespeare_path):
    """Tang poems (thousands of 3-byte characters) and Shakespeare (ASCII, so no merges at all), encoded by
    llama.cpp as zerollm encodes them, and decoded back to the same text."""
    for name, text in (("tang", tang_path.read_text()[:20000]), ("shakespeare", shakespeare_path.read_text()[:20000])):
        tok = CharTokenizer.train(text)
        llm = llama(written(tmp_path, tiny(GPT2, vocab=tok.vocab_size), "f32", tok, name), vocab_only=True)
        ids = their_ids(llm, text)
        assert ids == tok.encode(text), name
        assert llm.detokenize(ids).decode("utf-8") == text


def test_a_character_outside_the_vocabulary_is_left_out_by_llama_cpp(tmp_path):
    """zerollm refuses such a character; llama.cpp, whose byte-level BPE finds no token for its bytes,
    leaves it out and keeps every id around it: '晚' shares its first two bytes with '晓', '🙂' none."""
    tok = CharTokenizer.train(POEM + "ROMEO: what light")
    llm = llama(written(tmp_path, tiny(GPT2, vocab=tok.vocab_size), "f32", tok), vocab_only=True)
    assert their_ids(llm, "春晚🙂晓 ROMEO~!") == tok.encode("春晓 ROMEO")


def test_special_tokens_and_added_characters_keep_their_ids(tmp_path):
    """A chat model's tokenizer (specials, then the characters its SFT data added) in llama.cpp: the prompt of
    encode_prompt, written out as text, gets the same ids; the end of a turn is where llama.cpp stops."""
    tok = chat.prepare_tokenizer(CharTokenizer.train(POEM), ["藏头诗：春夏秋冬"])
    path = written(tmp_path, tiny(GPT2, vocab=tok.vocab_size), "f32", tok)
    llm = llama(path, vocab_only=True)
    text = f"{chat.USER}藏头诗：春夏秋冬{chat.END}{chat.ASSISTANT}"
    assert their_ids(llm, text) == chat.encode_prompt(tok, "藏头诗：春夏秋冬")
    assert llm.token_eos() == chat.end_id(tok)
    _, back, _ = load_gguf(path)                                   # and zerollm reads back the same tokenizer
    assert back.name == "char" and chat.encode_prompt(back, "藏头诗：春夏秋冬") == their_ids(llm, text)


def test_a_char_model_without_an_end_token_ends_at_its_newline(tmp_path):
    """llama.cpp takes id 11 as the end of text when a file names none: in this vocabulary the letter 'U'."""
    tok = CharTokenizer.train("ROMEO: what light\nJULIET: O Romeo")
    assert tok.decode([11]) == "U"
    llm = llama(written(tmp_path, tiny(GPT2, vocab=tok.vocab_size), "f32", tok), vocab_only=True)
    assert llm.token_eos() == tok.encode("\n")[0]


def test_a_byte_vocabulary_loads_and_tokenizes(tmp_path):
    """llama.cpp refuses a "gpt2" tokenizer without merges, and GGUF has no empty lists: the byte tokenizer's
    file carries one merge that no text reaches."""
    tok = ByteTokenizer(["<|endoftext|>"])
    llm = llama(written(tmp_path, tiny(GPT2, vocab=257), "f32", tok), vocab_only=True)
    text = "naïve 你好<|endoftext|>"
    assert their_ids(llm, text) == tok.encode(text, allowed_special="all")


# ----------------------------------------------------------------------------
# the model

@pytest.mark.parametrize("layout", [GPT2, LLAMA], ids=["gpt2", "llama"])
def test_llama_cpp_computes_the_same_logits_and_greedy_tokens(tmp_path, layout):
    """A char model in both GGUF architectures. llama.cpp's GELU reads a float16 table, so its numbers are
    not ours bit for bit (1e-4 of their spread here); the greedy tokens are the same."""
    tok = CharTokenizer.train(POEM)
    model = tiny(dict(layout, block_size=32, tie_embeddings=False), vocab=tok.vocab_size, seed=2)
    # logits far enough apart to have one argmax; untied, or a random model repeats its last input token
    model.params["lm_head.weight"] *= 40.0
    path = written(tmp_path, model, "f32", tok)
    llm = llama(path, n_ctx=32, logits_all=True)
    want, got, ours, theirs = logits_and_greedy(model, llm, tok.encode("春眠不觉"), 16)
    assert np.abs(got - want).max() <= 1e-3 * (want.max() - want.min())
    assert theirs == ours and len(set(ours)) > 5                      # not one token repeated
    assert llm.detokenize(theirs).decode("utf-8") == tok.decode(ours)


def preset_model(preset, tokenizer, **overrides):
    cfg = build_configs(preset, overrides, vocab_size=tokenizer.vocab_size)[0]
    return GPT(cfg, seed=0).eval()


@pytest.mark.parametrize("preset,tokenizer,overrides", [
    ("tiny", "byte", {}),
    ("shakespeare-cpu", "char", {"gelu": "tanh"}),               # README: --gelu tanh for a run meant for GGUF
    ("shakespeare-modern", "char", {}),
    ("tang", "char", {}),
    ("tang", "chat", {}),                                          # the SFT model's tokenizer and template
    ("shakespeare-cpu", "char", {"gelu": "tanh", "n_expert": 4, "n_expert_active": 2, "n_inner": 256, "norm": "rmsnorm",
                                 "pos": "rope", "mlp": "swiglu", "moe_norm_topk": True}),
], ids=["tiny", "shakespeare-cpu-tanh", "shakespeare-modern", "tang", "tang-sft", "moe-mixtral"])
def test_every_model_the_readme_trains_runs_in_llama_cpp(tmp_path, preset, tokenizer, overrides):
    """Each README preset's shapes and tokenizer, at q8_0: llama.cpp loads the file, tokenizes the corpus as
    zerollm does, and its next-token logits match zerollm's own reading of the same file."""
    from zerollm.training.presets import PRESET_CORPUS
    text = corpora.path(PRESET_CORPUS[preset]).read_text()[:30000]
    tok = ByteTokenizer() if tokenizer == "byte" else CharTokenizer.train(text)
    tok = chat.prepare_tokenizer(tok, ["藏头诗：春夏秋冬"]) if tokenizer == "chat" else tok
    path = written(tmp_path, preset_model(preset, tok, **overrides), "q8_0", tok)
    back, _, _ = load_gguf(path, quantized=False)
    llm = llama(path, n_ctx=back.config.block_size, logits_all=True)
    assert their_ids(llm, text[:3000]) == tok.encode(text[:3000])
    prompt = tok.encode(text[:20])
    llm.eval(prompt)
    with use_engine("numpy"):
        want = back.forward(np.array([prompt]))[0][0]
    got = np.array(llm.scores[:len(prompt)])
    # llama.cpp rounds the activations to 8 bits too before a q8_0 matmul (its vec_dot_q8_0_q8_0), where
    # zerollm multiplies float32 activations by the dequantized weights: 0.2-0.6% of the spread measured
    assert np.abs(got - want).max() <= 1e-2 * (want.max() - want.min())
