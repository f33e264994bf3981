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
