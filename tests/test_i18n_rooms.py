"""中文 of the messages of the rooms align, engine, evaluate, generation, interop, model, nn, teach and
tokenizers (issue 57 item 7), made by the code that raises them: a derived template of each room, and the
messages built elsewhere whose pieces zerollm/io/zh/<room>.py registers (tests/test_i18n_messages.py checks
that every template has an entry; these check that real messages come out whole in 中文)."""

import warnings

import pytest

from zerollm.io.errors import ZeroLLMError
from zerollm.io.zh import translate
from zerollm.model.config import GPTConfig


def _tiny(**kw):
    return GPTConfig(**{"n_layer": 1, "n_head": 2, "n_embd": 8, "block_size": 16, "vocab_size": 32, **kw})


def _error(fn):
    with pytest.raises(ZeroLLMError) as err:
        fn()
    return str(err.value)


def _warning(fn):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        fn()
    return str(caught[0].message)


# ----------------------------------------------------------------------------
# one message of each room, raised by its own code

def test_a_message_of_each_room_comes_out_in_chinese():
    from zerollm.align.tasks import get_task
    from zerollm.engine.amp import check_format
    from zerollm.evaluate.loglik import _packed
    from zerollm.generation.sample import check_sampling_args
    from zerollm.interop.quant import check_kind
    from zerollm.nn.lora import LoRAConfig
    from zerollm.nn.self_attention import causal_mask
    from zerollm.tokenizers import CharTokenizer
    cases = [
        (lambda: get_task("poetry"), "未知的任务 'poetry'；可用的任务有 "),
        (lambda: check_format("fp8"), "--amp 必须是 "),
        (lambda: _packed([1], [], 4), "要打分的续写（continuation）至少需要一个 token"),
        (lambda: check_sampling_args(1.0, None, 0.0), "top_p 必须在 (0, 1] 之内，收到的是 0.0"),
        (lambda: check_kind("q3_k"), "未知的量化方式 'q3_k'；zerollm 能写也能读的是 "),
        (lambda: _tiny(n_embd=30, n_head=4), "n_embd=30 不能被 n_head=4 整除；请取 n_embd = n_head * head_size"),
        (lambda: LoRAConfig(r=0), "--lora-r 必须是 >= 1 的整数，收到的是 0"),
        (lambda: causal_mask(0), "causal_mask 需要正的尺寸，收到的是 T=0、Tk=0"),
        (lambda: CharTokenizer.train(""), "无法从空文本构建 char 分词器；请给它你的语料"),
    ]
    for fn, chinese in cases:
        assert translate(_error(fn)).startswith(chinese), (_error(fn), translate(_error(fn)))


# ----------------------------------------------------------------------------
# messages built elsewhere: their pieces are registered, so the whole line is 中文

@pytest.mark.parametrize("pos, how", [("learned", "这个模型的位置编码是学出来的，所以它的上下文不能滚动"),
                                      ("rope", "可以用 --window 改用滚动缓存")], ids=["learned", "rope"])
def test_the_context_notes_are_chinese_to_the_last_clause(pos, how):
    from zerollm.generation.batching import context_notes
    layout = {} if pos == "learned" else {"norm": "rmsnorm", "mlp": "swiglu"}
    cfg = _tiny(pos=pos, **layout)
    recompute = "之后每个 token 都要重新计算最后 block_size 个 token（更慢）；" + how
    cropped = "提示词有 20 个 token，比上下文（16）还长；只保留它最后的 16 个 token"
    assert [translate(n) for n in context_notes(cfg, 20, 5)] == [cropped + "，所以" + recompute]
    assert [translate(n) for n in context_notes(cfg, 20, 1)] == [cropped]
    assert [translate(n) for n in context_notes(cfg, 10, 10)] == \
        ["在最后一个新 token 之前上下文就满了（16 个 token）：" + recompute]
    assert context_notes(cfg, 10, 7) == []


def test_sft_fitting_warns_and_refuses_in_chinese():
    from zerollm.align.objectives.sft import fitting
    said = _warning(lambda: fitting([([1] * 5, None), ([1] * 50, None)], 8, "training examples"))
    assert translate(said) == ("2 个训练样本中有 1 个比上下文还长（block_size 为 8 时是 9 个 token；最长的有 50 个），"
                               "它们被略过了，而不是截断：截断的回答会丢掉它的结束 token")
    refused = _error(lambda: fitting([([1] * 50, None)], 8, "heldout examples"))
    assert translate(refused).startswith("1 个留出样本中有 1 个比上下文还长") and \
        translate(refused).endswith("请微调一个上下文更长的模型，或者用更短的样本")


def test_the_memory_budget_line_in_each_of_its_three_forms(monkeypatch):
    from zerollm.model import budget
    monkeypatch.setenv("ZEROLLM_MEMORY_LIMIT", "1KiB")
    estimate = budget.Estimate("training", (("weights", 10 ** 6),), "--batch-size")
    head = ("training 大约需要 976.6 KiB 内存，但可用的只有 1.0 KiB（$ZEROLLM_MEMORY_LIMIT）；"
            "请调小 --batch-size")
    assert translate(_error(lambda: budget.require(estimate, force=False))) == head + "（或者加上 --force 强行一试）"
    assert translate(_error(lambda: budget.require(estimate))) == head
    assert translate(_warning(lambda: budget.require(estimate, force=True))) == \
        head + "；因为给了 --force，仍然继续尝试"


def test_a_gguf_problem_alone_is_chinese():
    from zerollm.interop.gguf import check_gguf
    assert translate(_error(lambda: check_gguf(_tiny(gelu="erf")))) == \
        ("GGUF 的 gpt2 架构计算的是 tanh 形式的 GELU，而这个模型用的是 gelu='erf'；"
         "要导出成 GGUF，请用 --gelu tanh 训练")


def test_a_char_tokenizers_unknown_characters_with_their_python_advice():
    from zerollm.tokenizers import CharTokenizer
    said = translate(_error(lambda: CharTokenizer.train("abc").encode("abz")))
    assert said.startswith("有 1 个字符不在这个字符级分词器的词表里：'z'；可以用包含这些字符的文本训练分词器"), said


# ----------------------------------------------------------------------------
# messages that put English phrases or grammar words into a field: each variant is its own template, or the
# phrase is registered, so no English word is left in the 中文 line but code, flags, file names and values

def _only_values_left(chinese, *values):
    rest = chinese
    for v in sorted(values, key=len, reverse=True):
        rest = rest.replace(v, "")
    return not any(c.isascii() and c.isalpha() for c in rest)


def _random_gpt_args(**given):
    import argparse
    return argparse.Namespace(**{"n_layer": None, "n_head": None, "n_embd": None, "seed": None,
                                 "bidirectional": False, "ckpt": "run", **given})


def _moe_args(n):
    import argparse
    from zerollm.teach.moe_shapes import MOE_ONLY
    args = argparse.Namespace(n_expert=None, **MOE_ONLY)
    for key in list(MOE_ONLY)[:n]:
        setattr(args, key, "other")
    return args


def _heads(**given):
    from zerollm.teach.heads import check_random_only
    return check_random_only(_random_gpt_args(**given))


def _moe(n):
    from zerollm.teach.moe_shapes import make_moe_config
    return make_moe_config(_moe_args(n))


def _pairs(n, *counted):
    from zerollm.align.objectives.pairs import check_lengths
    return check_lengths([{"chosen": ([1] * 9,), "rejected": ([1] * 3,)}] * n, 4, *counted)


def _json_size(B, T, fix_T, fix_small):
    from zerollm.teach.attention_walkthrough import check_json_size
    return check_json_size(B, T, 64, 64, fix_T, fix_small)


def _numba(monkeypatch, key, value):
    from zerollm.engine import _import_fast_kernels
    monkeypatch.setenv(key, value)
    return _import_fast_kernels()


def _peft(config):
    from zerollm.interop.peft import lora_settings
    return lora_settings(config, "a/adapter_config.json")


def _meta(key, v):
    from zerollm.interop.gguf_meta import value
    return value({key: v}, key, "m.gguf")


def _tokenizer_json(data):
    from zerollm.tokenizers.hf import check_tokenizer_json
    return check_tokenizer_json(data, "t.json")


def _replaceable(tmp_path, header):
    import json
    from zerollm.interop.hf.exporting import _check_replaceable
    (tmp_path / "config.json").write_text(json.dumps(header))
    return _check_replaceable(str(tmp_path))


def _gguf_two_problems():
    from types import SimpleNamespace
    from zerollm.interop.gguf import check_gguf
    return check_gguf(_tiny(gelu="erf"), SimpleNamespace(name="bpe", pattern_name="custom", pattern="x"))


def _tasks_rewritten(tmp_path, edited, n):
    from zerollm.evaluate.taskfiles import write_tasks
    folder = tmp_path / "tasks"
    if not folder.exists():
        write_tasks(str(folder), 5, 0)
        for name in sorted(p.name for p in folder.iterdir() if p.name != "zerollm-tasks.json")[:edited]:
            with open(folder / name, "a") as f:
                f.write("x")
    return write_tasks(str(folder), n, 0)


def _several_runs():
    from zerollm.evaluate.report import _run_ending_with
    return _run_ending_with("r.json", "runs/b", "/x/runs/b", ["/a/runs/b", "/c/runs/b"])


_DPO = "dpo takes per side (the model reads block_size 8 of them and predicts the last one, which it never reads)"
_REWARD = "the reward model reads per side (its block_size: the reward is read at the last one)"
_ENGLISH_FIELDS = {
    "heads-one": (lambda mp, tmp: _heads(n_layer=2), ["--n-layer", "GPT", "--ckpt"]),
    "heads-three": (lambda mp, tmp: _heads(n_layer=2, n_head=2, seed=1),
                    ["--n-layer", "--n-head", "--seed", "GPT", "--ckpt"]),
    "moe-one": (lambda mp, tmp: _moe(1), ["--n-expert-active", "--n-expert E", "--n-expert"]),
    "moe-two": (lambda mp, tmp: _moe(2), ["--n-expert-active", "--n-shared-expert", "--n-expert E", "--n-expert"]),
    "pairs-one": (lambda mp, tmp: _pairs(1), ["token"]),
    "pairs-dpo": (lambda mp, tmp: _pairs(2, _DPO), ["token", "dpo", "block_size"]),
    "pairs-reward": (lambda mp, tmp: _pairs(2, _REWARD), ["token", "block_size"]),
    "json-seq": (lambda mp, tmp: _json_size(1, 4000, "--seq {most} or less", "a smaller --batch or --d-k"),
                 ["--json", "B=", "T=", "d_k=", "(B, T, T)", "T^2", "--seq", " T "]),
    "json-x": (lambda mp, tmp: _json_size(1, 4000, "an --x of at most {most} tokens", "fewer sequences in --x"),
               ["--json", "B=", "T=", "d_k=", "(B, T, T)", "T^2", "--x", " T ", "token"]),
    "json-small": (lambda mp, tmp: _json_size(10 ** 5, 4, "--seq {most} or less", "a smaller --batch or --d-k"),
                   ["--json", "B=", "T=", "d_k=", "(B, T, T)", "T^2", "--batch", "--d-k"]),
    "numba-threads": (lambda mp, tmp: _numba(mp, "NUMBA_NUM_THREADS", "x"),
                      ["$NUMBA_NUM_THREADS='x'", "--engine numpy"]),
    "numba-jit": (lambda mp, tmp: _numba(mp, "NUMBA_DISABLE_JIT", "1"),
                  ["$NUMBA_DISABLE_JIT", "numba", "fast", "--engine numpy"]),
    "peft-r": (lambda mp, tmp: _peft({"r": "x"}), ["a/adapter_config.json", ": r ", "'x'", "PeftModel.save_pretrained"]),
    "peft-alpha": (lambda mp, tmp: _peft({"lora_alpha": "x"}),
                   ["a/adapter_config.json", "lora_alpha", "'x'", "PeftModel.save_pretrained"]),
    "gguf-text": (lambda mp, tmp: _meta("general.architecture", 3), ["m.gguf", "general.architecture"]),
    "gguf-texts": (lambda mp, tmp: _meta("tokenizer.ggml.tokens", [1]), ["m.gguf", "tokenizer.ggml.tokens"]),
    "gguf-types": (lambda mp, tmp: _meta("tokenizer.ggml.token_type", [9]),
                   ["m.gguf", "tokenizer.ggml.token_type", "token"]),
    "gguf-alignment": (lambda mp, tmp: _meta("general.alignment", 3), ["m.gguf", "general.alignment"]),
    "tokenizer-model": (lambda mp, tmp: _tokenizer_json({"model": 1}),
                        ['t.json', '"model"', "JSON", "Hugging Face", "tokenizer.json"]),
    "tokenizer-vocab": (lambda mp, tmp: _tokenizer_json({"model": {"type": "BPE", "vocab": 1}}),
                        ['t.json', '"model.vocab"', "token: id", "Hugging Face", "tokenizer.json"]),
    "tokenizer-merges": (lambda mp, tmp: _tokenizer_json({"model": {"type": "BPE", "merges": 1}}),
                         ['t.json', '"model.merges"', '"left right"', "[left, right]", "Hugging Face",
                          "tokenizer.json"]),
    "tokenizer-added": (lambda mp, tmp: _tokenizer_json({"added_tokens": 1}),
                        ['t.json', '"added_tokens"', '"id"', '"content"', "Hugging Face", "tokenizer.json"]),
    "tokenizer-null": (lambda mp, tmp: _tokenizer_json({"decoder": 1}),
                       ['t.json', '"decoder"', "JSON", "null", "Hugging Face", "tokenizer.json"]),
    "tokenizer-list": (lambda mp, tmp: _tokenizer_json({"pre_tokenizer": {"pretokenizers": 1}}),
                       ['t.json', '"pre_tokenizer.pretokenizers"', "JSON", "Hugging Face", "tokenizer.json"]),
    "gguf-two-problems": (lambda mp, tmp: _gguf_two_problems(),
                          ["GGUF", "gpt2", "tanh", "GELU", "gelu='erf'", "--gelu tanh", "BPE", "--pattern gpt2", "gpt4"]),
    "tasks-settings": (lambda mp, tmp: _tasks_rewritten(tmp, 0, 6),
                       ["{tmp}/tasks", "lm-eval", "--n 5 --seed 0", "--force", "--n 6 --seed 0", "--out"]),
    "tasks-settings-and-one": (lambda mp, tmp: _tasks_rewritten(tmp, 1, 6),
                               ["{tmp}/tasks", "lm-eval", "--n 5 --seed 0", "zerollm_acrostic.jsonl", "--force",
                                "--n 6 --seed 0", "--out"]),
    "tasks-four-edited": (lambda mp, tmp: _tasks_rewritten(tmp, 4, 5),
                          ["{tmp}/tasks", "lm-eval", "zerollm_acrostic.jsonl", "zerollm_acrostic.yaml",
                           "zerollm_addition.jsonl", "--force", "--n 5 --seed 0", "--out"]),
    "report-several": (lambda mp, tmp: _several_runs(),
                       ["r.json", "model_args", "ckpt=runs/b", "/x/runs/b", "runs/b", "/a/runs/b, /c/runs/b",
                        "lm_eval", "zerollm report"]),
    "hf-checkpoint": (lambda mp, tmp: _replaceable(tmp, {"format": "zerollm-checkpoint"}), ["{tmp}", "/config.json"]),
    "hf-not-a-model": (lambda mp, tmp: _replaceable(tmp, {"x": 1}), ["{tmp}", "/config.json"]),
}


@pytest.mark.parametrize("case", list(_ENGLISH_FIELDS))
def test_messages_with_english_fields_come_out_without_english_words(case, monkeypatch, tmp_path):
    make, values = _ENGLISH_FIELDS[case]
    english = _error(lambda: make(monkeypatch, tmp_path))
    chinese = translate(english)
    values = [v.replace("{tmp}", str(tmp_path)) for v in values]
    assert all(v in chinese for v in values), (english, chinese)     # the values are kept as they are
    assert _only_values_left(chinese, *values), (english, chinese)
