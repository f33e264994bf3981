"""Qwen2 / Qwen3 in and out (#64): small random Qwen2ForCausalLM and Qwen3ForCausalLM models built offline
in transformers (odd sizes, GQA, tied and untied, a head size other than C // nh), their byte-level BPE
tokenizer with the Qwen2 split regex and NFC, and Qwen3's chat template, each against transformers."""

import json
from dataclasses import replace

import numpy as np
import pytest
import torch
from tokenizers import Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers, trainers
from transformers import (AutoModelForCausalLM, PreTrainedTokenizerFast, Qwen2Config, Qwen2ForCausalLM, Qwen3Config,
                          Qwen3ForCausalLM)

from zerollm.data import chat
from zerollm.interop import hf
from zerollm.io.errors import ZeroLLMError
from zerollm.model.gpt import GPTConfig
from zerollm.tokenizers.patterns import QWEN2_PATTERN

from test_hf import NO_SPECIAL, TOL, gap, hf_logits, ids, jitter

QWEN2_CASES = {
    "gqa5to1-untied": dict(vocab_size=37, hidden_size=20, intermediate_size=14, num_hidden_layers=2,
                           num_attention_heads=5, num_key_value_heads=1, max_position_embeddings=16),
    "mha-tied-theta1e6": dict(vocab_size=41, hidden_size=12, intermediate_size=18, num_hidden_layers=1,
                              num_attention_heads=3, num_key_value_heads=3, max_position_embeddings=16,
                              tie_word_embeddings=True, rope_theta=1e6),
}
QWEN3_CASES = {
    "gqa-headdim6-tied": dict(vocab_size=37, hidden_size=20, intermediate_size=14, num_hidden_layers=2,
                              num_attention_heads=4, num_key_value_heads=2, head_dim=6, max_position_embeddings=16,
                              tie_word_embeddings=True),
    "mqa-untied-odd": dict(vocab_size=29, hidden_size=18, intermediate_size=10, num_hidden_layers=2,
                           num_attention_heads=3, num_key_value_heads=1, max_position_embeddings=16,
                           rms_norm_eps=1e-5),
}


def qwen(family, seed=0, **kw):
    cls, config = (Qwen2ForCausalLM, Qwen2Config) if family == "qwen2" else (Qwen3ForCausalLM, Qwen3Config)
    return jitter(cls(config(**kw, **NO_SPECIAL)), seed)


CASES = [("qwen2", name) for name in QWEN2_CASES] + [("qwen3", name) for name in QWEN3_CASES]


def _kw(family, name):
    return (QWEN2_CASES if family == "qwen2" else QWEN3_CASES)[name]


# ----------------------------------------------------------------------------
# models

@pytest.mark.parametrize("family, name", CASES)
def test_load_and_export_match_transformers(tmp_path, family, name):
    theirs = qwen(family, **_kw(family, name))
    theirs.save_pretrained(tmp_path / "hf")
    ours = hf.load(tmp_path / "hf")
    cfg = ours.config
    assert (cfg.qkv_bias, cfg.qk_norm, cfg.bias) == (family == "qwen2", family == "qwen3", False)
    idx = ids(cfg.vocab_size)
    assert gap(ours, theirs, idx) <= TOL
    hf.export(ours, tmp_path / "out")
    saved = json.loads((tmp_path / "out" / "config.json").read_text())
    assert saved["model_type"] == family
    back = AutoModelForCausalLM.from_pretrained(tmp_path / "out").eval()
    assert type(back) is type(theirs)
    assert np.abs(hf_logits(back, idx) - hf_logits(theirs, idx)).max() <= TOL


@pytest.mark.parametrize("family, name", [("qwen2", "gqa5to1-untied"), ("qwen3", "gqa-headdim6-tied")])
def test_gradient_float64_matches_finite_differences(tmp_path, family, name):
    """d loss / d params . u for a random direction u, against (L(p + eps u) - L(p - eps u)) / 2 eps."""
    qwen(family, **_kw(family, name)).save_pretrained(tmp_path)
    model = hf.load(tmp_path, dtype="float64").train()
    idx, targets = ids(model.config.vocab_size, T=6), ids(model.config.vocab_size, T=6, seed=1)
    model.forward(idx, targets)
    grads = model.backward()
    rng = np.random.default_rng(0)
    u = {n: rng.standard_normal(p.shape) for n, p in model.params.items()}
    assert {"h.0.attn.q_norm.weight", "h.0.attn.c_attn.bias"} & set(grads)
    exact = sum(float(np.sum(grads[n] * u[n])) for n in grads)
    base = {n: p.copy() for n, p in model.params.items()}

    def loss_at(step):
        for n, p in model.params.items():
            p[...] = base[n] + step * u[n]
        return float(model.forward(idx, targets)[1])
    eps = 1e-6
    numeric = (loss_at(eps) - loss_at(-eps)) / (2 * eps)
    assert abs(exact - numeric) <= 1e-6 * max(1.0, abs(numeric))


def test_config_defaults_leave_existing_files_unchanged():
    plain = GPTConfig(n_layer=1, n_head=2, n_embd=8).to_dict()
    assert not {"qkv_bias", "qk_norm", "head_dim"} & set(plain)
    qwen3 = GPTConfig(n_layer=1, n_head=2, n_embd=8, head_dim=6, qk_norm=True, norm="rmsnorm", pos="rope")
    assert GPTConfig.from_dict(qwen3.to_dict()) == qwen3
    with pytest.raises(ZeroLLMError, match="head_dim must be a positive integer"):
        GPTConfig(n_layer=1, n_head=2, n_embd=8, head_dim=0)


# ----------------------------------------------------------------------------
# the tokenizer: byte-level BPE, Qwen2's split regex, NFC

TEXT = ("Hello, world! It's 2024: I'LL pay $3.50 (or 12345 yen)...\n\n  \t indented\r\n"
        "你好，世界。秦川雄帝宅，函谷壮皇居。春眠不觉晓，处处闻啼鸟。 naïve café 😀\n") * 3
QWEN_SPECIALS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>", "<think>", "</think>", "<tool_call>",
                 "</tool_call>", "<tool_response>", "</tool_response>"]


@pytest.fixture(scope="module")
def qwen_tokenizer_dir(tmp_path_factory):
    """A small Qwen2-style tokenizer.json made with `tokenizers` (the layout of Qwen's own file)."""
    folder = tmp_path_factory.mktemp("qwen_tok")
    tok = Tokenizer(models.BPE())
    tok.normalizer = normalizers.NFC()
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(QWEN2_PATTERN), behavior="isolated", invert=False),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)])
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=420, initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
                                  show_progress=False)
    tok.train_from_iterator([TEXT] * 4, trainer)
    tok.add_special_tokens(QWEN_SPECIALS)
    tok.save(str(folder / "tokenizer.json"))
    return folder


@pytest.mark.parametrize("text", ["", "a", TEXT, "数字 3.14159 和 2024年", "e\u0301 café = cafe\u0301",
                                  "  spaces   and\n\n\nnewlines \r\n", "<|im_start|> typed as text"])
def test_tokenizer_encodes_like_tokenizers(qwen_tokenizer_dir, text):
    theirs = Tokenizer.from_file(str(qwen_tokenizer_dir / "tokenizer.json"))
    ours = hf.load_tokenizer_dir(qwen_tokenizer_dir)
    assert ours.normalizer == "NFC"
    expected = [i for i in theirs.encode(text, add_special_tokens=False).ids]
    if "<|im_start|>" in text:             # zerollm encodes typed markers as text, tokenizers as the token
        expected = ours.encode(text)
        assert ours.special_tokens["<|im_start|>"] not in expected
        return
    assert ours.encode(text) == expected
    assert ours.decode(ours.encode(text)) == theirs.decode(expected, skip_special_tokens=False)


def test_long_runs_split_in_one_pass():
    """Long runs of spaces, newlines and marks: each is a chunk or two, found without backtracking over
    every start (the split would take minutes otherwise; here it is a fraction of a second)."""
    from zerollm.tokenizers.patterns import compile_pattern, split_text
    regex = compile_pattern(QWEN2_PATTERN)
    for text in (" " * 100_000 + "x", "\n" * 100_000, " \n" * 50_000, "!" * 100_000, " " * 50_000 + "\n" + " " * 5):
        chunks = split_text(text, regex, covers_all=False)
        assert "".join(chunks) == text and len(chunks) <= 3


# ----------------------------------------------------------------------------
# the chat template: Qwen3's public template (typed here as a fixture; transformers runs it, zerollm never)

QWEN3_TEMPLATE = r"""{%- if tools %}
    {{- '<|im_start|>system\n' }}
    {%- if messages[0].role == 'system' %}
        {{- messages[0].content + '\n\n' }}
    {%- endif %}
    {{- "# Tools\n\nYou may call one or more functions to assist with the user query.\n\nYou are provided with function signatures within <tools></tools> XML tags:\n<tools>" }}
    {%- for tool in tools %}
        {{- "\n" }}
        {{- tool | tojson }}
    {%- endfor %}
    {{- "\n</tools>\n\nFor each function call, return a json object with function name and arguments within <tool_call></tool_call> XML tags:\n<tool_call>\n{\"name\": <function-name>, \"arguments\": <args-json-object>}\n</tool_call><|im_end|>\n" }}
{%- else %}
    {%- if messages[0].role == 'system' %}
        {{- '<|im_start|>system\n' + messages[0].content + '<|im_end|>\n' }}
    {%- endif %}
{%- endif %}
{%- set ns = namespace(multi_step_tool=true, last_query_index=messages|length - 1) %}
{%- for message in messages[::-1] %}
    {%- set index = (messages|length - 1) - loop.index0 %}
    {%- if ns.multi_step_tool and message.role == "user" and message.content is string and not(message.content.startswith('<tool_response>') and message.content.endswith('</tool_response>')) %}
        {%- set ns.multi_step_tool = false %}
        {%- set ns.last_query_index = index %}
    {%- endif %}
{%- endfor %}
{%- for message in messages %}
    {%- if message.content is string %}
        {%- set content = message.content %}
    {%- else %}
        {%- set content = '' %}
    {%- endif %}
    {%- if (message.role == "user") or (message.role == "system" and not loop.first) %}
        {{- '<|im_start|>' + message.role + '\n' + content + '<|im_end|>' + '\n' }}
    {%- elif message.role == "assistant" %}
        {%- set reasoning_content = '' %}
        {%- if message.reasoning_content is string %}
            {%- set reasoning_content = message.reasoning_content %}
        {%- else %}
            {%- if '</think>' in content %}
                {%- set reasoning_content = content.split('</think>')[0].rstrip('\n').split('<think>')[-1].lstrip('\n') %}
                {%- set content = content.split('</think>')[-1].lstrip('\n') %}
            {%- endif %}
        {%- endif %}
        {%- if loop.index0 > ns.last_query_index %}
            {%- if loop.last or (not loop.last and reasoning_content) %}
                {{- '<|im_start|>' + message.role + '\n<think>\n' + reasoning_content.strip('\n') + '\n</think>\n\n' + content.lstrip('\n') }}
            {%- else %}
                {{- '<|im_start|>' + message.role + '\n' + content }}
            {%- endif %}
        {%- else %}
            {{- '<|im_start|>' + message.role + '\n' + content }}
        {%- endif %}
        {%- if message.tool_calls %}
            {%- for tool_call in message.tool_calls %}
                {%- if (loop.first and content) or (not loop.first) %}
                    {{- '\n' }}
                {%- endif %}
                {%- if tool_call.function %}
                    {%- set tool_call = tool_call.function %}
                {%- endif %}
                {{- '<tool_call>\n{"name": "' }}
                {{- tool_call.name }}
                {{- '", "arguments": ' }}
                {%- if tool_call.arguments is string %}
                    {{- tool_call.arguments }}
                {%- else %}
                    {{- tool_call.arguments | tojson }}
                {%- endif %}
                {{- '}\n</tool_call>' }}
            {%- endfor %}
        {%- endif %}
        {{- '<|im_end|>\n' }}
    {%- elif message.role == "tool" %}
        {%- if loop.first or (messages[loop.index0 - 1].role != "tool") %}
            {{- '<|im_start|>user' }}
        {%- endif %}
        {{- '\n<tool_response>\n' }}
        {{- content }}
        {{- '\n</tool_response>' }}
        {%- if loop.last or (messages[loop.index0 + 1].role != "tool") %}
            {{- '<|im_end|>\n' }}
        {%- endif %}
    {%- endif %}
{%- endfor %}
{%- if add_generation_prompt %}
    {{- '<|im_start|>assistant\n' }}
    {%- if enable_thinking is defined and enable_thinking is false %}
        {{- '<think>\n\n</think>\n\n' }}
    {%- endif %}
{%- endif %}"""

CALC = {"type": "function", "function": {"name": "calculator", "description": "算术",
                                         "parameters": {"type": "object", "properties": {"expr": {"type": "string"}}}}}
CONVERSATIONS = {
    "one-turn": [{"role": "user", "content": "你好"}],
    "system": [{"role": "system", "content": "You write poems."}, {"role": "user", "content": "藏头诗：春夏秋冬"}],
    "history-with-thinking": [
        {"role": "user", "content": "1+1?"}, {"role": "assistant", "content": "2", "reasoning_content": "one and one"},
        {"role": "user", "content": "2+2?"}, {"role": "assistant", "content": "<think>\ntwo twos\n</think>\n\n4"}],
    "tools": [{"role": "system", "content": "Be exact."}, {"role": "user", "content": "12*34="},
              {"role": "assistant", "content": "",
               "tool_calls": [{"id": "c1", "type": "function",
                               "function": {"name": "calculator", "arguments": {"expr": "12*34"}}}]},
              {"role": "tool", "content": "408"}, {"role": "tool", "content": "ok"}],
}


@pytest.fixture(scope="module")
def hf_chat_tokenizer(qwen_tokenizer_dir):
    return PreTrainedTokenizerFast(tokenizer_file=str(qwen_tokenizer_dir / "tokenizer.json"),
                                   chat_template=QWEN3_TEMPLATE)


def _their_ids(tok, messages, **kw):
    text = tok.apply_chat_template(messages, tokenize=False, **kw)
    return tok(text, add_special_tokens=False)["input_ids"]


@pytest.mark.parametrize("name", sorted(CONVERSATIONS))
@pytest.mark.parametrize("thinking", [True, False])
def test_prompt_ids_match_apply_chat_template(qwen_tokenizer_dir, hf_chat_tokenizer, name, thinking):
    ours = hf.load_tokenizer_dir(qwen_tokenizer_dir)
    messages = CONVERSATIONS[name]
    tools = [CALC] if name == "tools" else None
    kw = dict(tools=tools, add_generation_prompt=True, enable_thinking=thinking)
    assert chat.encode_prompt(ours, messages, tools=tools, enable_thinking=thinking) == \
        _their_ids(hf_chat_tokenizer, messages, **kw)
    assert chat.end_id(ours) == ours.special_tokens["<|im_end|>"]


@pytest.mark.parametrize("name", ["system", "history-with-thinking"])
def test_training_ids_and_mask_match_the_template(qwen_tokenizer_dir, hf_chat_tokenizer, name):
    ours = hf.load_tokenizer_dir(qwen_tokenizer_dir)
    messages = CONVERSATIONS[name] + ([{"role": "assistant", "content": "春风"}] if name == "system" else [])
    ids_, mask = chat.encode_example(ours, {"messages": messages})
    assert ids_ == _their_ids(hf_chat_tokenizer, messages)
    learned = ours.decode([i for i, m in zip(ids_, mask) if m])
    assert learned.endswith("<|im_end|>") and "user" not in learned


# Qwen2-Instruct's and Qwen2.5-Instruct's public templates (typed here as fixtures, run by transformers only):
# a default system turn when there is none, no thinking; Qwen2's has no tools at all

QWEN2_TEMPLATE = r"""{% for message in messages %}{% if loop.first and messages[0]['role'] != 'system' %}
{{- '<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n' }}{% endif %}
{{- '<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n' }}{% endfor %}
{%- if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}"""

QWEN25_TEMPLATE = r"""{%- if tools %}
    {{- '<|im_start|>system\n' }}
    {%- if messages[0]['role'] == 'system' %}
        {{- messages[0]['content'] }}
    {%- else %}
        {{- 'You are Qwen, created by Alibaba Cloud. You are a helpful assistant.' }}
    {%- endif %}
    {{- "\n\n# Tools\n\nYou may call one or more functions to assist with the user query.\n\nYou are provided with function signatures within <tools></tools> XML tags:\n<tools>" }}
    {%- for tool in tools %}
        {{- "\n" }}
        {{- tool | tojson }}
    {%- endfor %}
    {{- "\n</tools>\n\nFor each function call, return a json object with function name and arguments within <tool_call></tool_call> XML tags:\n<tool_call>\n{\"name\": <function-name>, \"arguments\": <args-json-object>}\n</tool_call><|im_end|>\n" }}
{%- else %}
    {%- if messages[0]['role'] == 'system' %}
        {{- '<|im_start|>system\n' + messages[0]['content'] + '<|im_end|>\n' }}
    {%- else %}
        {{- '<|im_start|>system\nYou are Qwen, created by Alibaba Cloud. You are a helpful assistant.<|im_end|>\n' }}
    {%- endif %}
{%- endif %}
{%- for message in messages %}
    {%- if (message.role == "user") or (message.role == "system" and not loop.first) or (message.role == "assistant" and not message.tool_calls) %}
        {{- '<|im_start|>' + message.role + '\n' + message.content + '<|im_end|>' + '\n' }}
    {%- elif message.role == "assistant" %}
        {{- '<|im_start|>' + message.role }}
        {%- if message.content %}
            {{- '\n' + message.content }}
        {%- endif %}
        {%- for tool_call in message.tool_calls %}
            {%- if tool_call.function is defined %}
                {%- set tool_call = tool_call.function %}
            {%- endif %}
            {{- '\n<tool_call>\n{"name": "' }}
            {{- tool_call.name }}
            {{- '", "arguments": ' }}
            {{- tool_call.arguments | tojson }}
            {{- '}\n</tool_call>' }}
        {%- endfor %}
        {{- '<|im_end|>\n' }}
    {%- elif message.role == "tool" %}
        {%- if (loop.index0 == 0) or (messages[loop.index0 - 1].role != "tool") %}
            {{- '<|im_start|>user' }}
        {%- endif %}
        {{- '\n<tool_response>\n' }}
        {{- message.content }}
        {{- '\n</tool_response>' }}
        {%- if loop.last or (messages[loop.index0 + 1].role != "tool") %}
            {{- '<|im_end|>\n' }}
        {%- endif %}
    {%- endif %}
{%- endfor %}
{%- if add_generation_prompt %}
    {{- '<|im_start|>assistant\n' }}
{%- endif %}"""

OLDER = {"qwen2": QWEN2_TEMPLATE, "qwen2.5": QWEN25_TEMPLATE}
# (a literal <think> in a message is text to zerollm but a token to transformers, which matches added tokens
# inside the text: Qwen3's template splits it off, these two do not, so no conversation here writes one)
OLDER_CONVERSATIONS = {
    **{k: v for k, v in CONVERSATIONS.items() if k != "history-with-thinking"},
    "multi-turn-reasoning-dropped": [
        {"role": "user", "content": "1+1?"}, {"role": "assistant", "content": "2", "reasoning_content": "one and one"},
        {"role": "user", "content": "2+2?"}, {"role": "assistant", "content": "4"}, {"role": "user", "content": "3+3?"},
        {"role": "assistant", "content": "6"}],
    "tools-string-arguments-with-content": [
        {"role": "user", "content": "12*34="},
        {"role": "assistant", "content": "Let me compute.",
         "tool_calls": [{"type": "function", "function": {"name": "calculator", "arguments": '{"expr": "12*34"}'}},
                        {"type": "function", "function": {"name": "calculator", "arguments": {"expr": "1"}}}]},
        {"role": "tool", "content": "408"}, {"role": "assistant", "content": "408"}],
}


def _older_dir(tmp_path, qwen_tokenizer_dir, template):
    folder = tmp_path / "tok"
    folder.mkdir()
    (folder / "tokenizer.json").write_bytes((qwen_tokenizer_dir / "tokenizer.json").read_bytes())
    (folder / "tokenizer_config.json").write_text(json.dumps({"chat_template": template}))
    return folder


@pytest.mark.parametrize("name", sorted(OLDER_CONVERSATIONS))
@pytest.mark.parametrize("family", sorted(OLDER))
def test_qwen2_and_qwen25_templates_render_like_apply_chat_template(tmp_path, qwen_tokenizer_dir, family, name):
    """The family is read from the directory's template (as data); prompts and training ids then match
    transformers running that template, with and without a system message, tools, several turns."""
    from zerollm.data import chatml
    ours = hf.load_tokenizer_dir(_older_dir(tmp_path, qwen_tokenizer_dir, OLDER[family]))
    assert chatml.family(ours) == family
    theirs = PreTrainedTokenizerFast(tokenizer_file=str(qwen_tokenizer_dir / "tokenizer.json"),
                                     chat_template=OLDER[family])
    messages = OLDER_CONVERSATIONS[name]
    tools = [CALC] if name.startswith("tools") else None
    for thinking in (True, False):          # neither template has the switch: it changes nothing
        assert chat.encode_prompt(ours, messages, tools=tools, enable_thinking=thinking) == \
            _their_ids(theirs, messages, tools=tools, add_generation_prompt=True)
    if messages[-1]["role"] == "assistant":
        ids_, mask = chat.encode_example(ours, {"messages": messages, **({"tools": tools} if tools else {})})
        assert ids_ == _their_ids(theirs, messages, tools=tools)
        learned = ours.decode([i for i, m in zip(ids_, mask) if m])
        assert learned.endswith("<|im_end|>") and "You are" not in learned
    if messages[0]["role"] != "system":     # the default system sentence of the family
        assert chatml.DEFAULT_SYSTEM[family] in ours.decode(chat.encode_prompt(ours, messages, tools=tools))


def test_the_template_is_recognised_by_its_sentences_and_an_unknown_one_keeps_qwen3_rules(
        tmp_path, qwen_tokenizer_dir, hf_chat_tokenizer):
    from zerollm.data import chatml
    from zerollm.interop.hf.loading import template_note
    assert [chatml.family_of(t) for t in (QWEN2_TEMPLATE, QWEN25_TEMPLATE, QWEN3_TEMPLATE, chatml.CHATML_JINJA)] \
        == ["qwen2", "qwen2.5", "qwen3", "qwen3"]
    assert chatml.family_of("You are a helpful assistant.") is None      # no ChatML tokens: not Qwen's
    # a ChatML template that raises if it is ever run, naming none of the families
    folder = _older_dir(tmp_path, qwen_tokenizer_dir, "<|im_start|>{{ raise_exception('ran') }}")
    ours = hf.load_tokenizer_dir(folder)
    assert chatml.family(ours) == "qwen3"
    messages = CONVERSATIONS["one-turn"]
    assert chat.encode_prompt(ours, messages) == _their_ids(hf_chat_tokenizer, messages, add_generation_prompt=True)
    note = template_note(folder, ours, "zerollm chat")
    assert note.startswith("zerollm chat: note: ") and "Qwen3's rules" in note and "\n" not in note
    for k, template in enumerate((QWEN2_TEMPLATE, QWEN25_TEMPLATE)):      # known ones: rendered, no note
        (tmp_path / str(k)).mkdir()
        known = _older_dir(tmp_path / str(k), qwen_tokenizer_dir, template)
        assert template_note(known, hf.load_tokenizer_dir(known), "zerollm chat") is None


def test_export_with_its_tokenizer_keeps_qwens_end_of_turn(tmp_path, qwen_tokenizer_dir, hf_chat_tokenizer):
    from transformers import AutoTokenizer
    qwen("qwen3", **dict(QWEN3_CASES["gqa-headdim6-tied"], vocab_size=430)).save_pretrained(tmp_path / "hf")
    model, tok = hf.load(tmp_path / "hf"), hf.load_tokenizer_dir(qwen_tokenizer_dir)
    hf.export(model, tmp_path / "out", tokenizer=tok)
    config = json.loads((tmp_path / "out" / "config.json").read_text())
    assert config["eos_token_id"] == tok.special_tokens["<|im_end|>"]
    theirs = AutoTokenizer.from_pretrained(tmp_path / "out")
    messages = CONVERSATIONS["system"]
    for thinking in (True, False):
        assert chat.encode_prompt(tok, messages, enable_thinking=thinking) == _their_ids(
            theirs, messages, add_generation_prompt=True, enable_thinking=thinking)


# ----------------------------------------------------------------------------
# GGUF: zerollm's export read back by zerollm and by llama.cpp

GGUF_CASES = {"qwen2": dict(vocab_size=432, hidden_size=64, intermediate_size=96, num_hidden_layers=2,
                            num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64,
                            tie_word_embeddings=True, rope_theta=1e6),
              "qwen3": dict(vocab_size=432, hidden_size=64, intermediate_size=96, num_hidden_layers=2,
                            num_attention_heads=4, num_key_value_heads=1, head_dim=24, max_position_embeddings=64)}


@pytest.mark.parametrize("family", ["qwen2", "qwen3"])
def test_gguf_round_trip_and_llama_cpp_greedy_tokens(tmp_path, qwen_tokenizer_dir, family):
    llama_cpp = pytest.importorskip("llama_cpp", reason='llama.cpp\'s Python binding: pip install -e ".[test]"')
    from zerollm.interop.gguf import export_gguf
    from zerollm.interop.gguf_load import load_gguf
    qwen(family, **GGUF_CASES[family]).save_pretrained(tmp_path / "hf")
    model, tok = hf.load(tmp_path / "hf"), hf.load_tokenizer_dir(qwen_tokenizer_dir)
    path = tmp_path / "m.gguf"
    assert export_gguf(model, path, tokenizer=tok, quant_kind="f32")["arch"] == family
    back, back_tok, _ = load_gguf(path)
    assert replace(back.config, norm_eps=model.config.norm_eps) == model.config      # GGUF keeps eps as float32
    prompt = tok.encode("春眠不觉晓, Hello 2024")
    idx = np.array([prompt])
    assert np.abs(back.forward(idx)[0] - model.forward(idx)[0]).max() <= TOL
    assert back_tok.encode(TEXT) == tok.encode(TEXT)
    llm = llama_cpp.Llama(model_path=str(path), n_threads=1, verbose=False, logits_all=True, n_ctx=64)
    assert llm.tokenize("春眠不觉晓, Hello 2024".encode(), add_bos=False, special=True) == prompt
    ours = list(prompt)
    for _ in range(8):
        ours.append(int(np.argmax(model.forward(np.array([ours]))[0][0, -1])))
    llm.eval(prompt)
    theirs = list(prompt)
    for _ in range(8):
        theirs.append(int(np.argmax(llm.scores[llm.n_tokens - 1])))
        llm.eval(theirs[-1:])
    assert theirs == ours


# ----------------------------------------------------------------------------
# the commands

@pytest.fixture(scope="module")
def qwen3_dir(tmp_path_factory, qwen_tokenizer_dir):
    """A Qwen3 directory as the hub has one: config.json, model.safetensors, tokenizer.json and
    tokenizer_config.json with Qwen3's Jinja template (which zerollm must not run)."""
    folder = tmp_path_factory.mktemp("qwen3")
    qwen("qwen3", **GGUF_CASES["qwen3"]).save_pretrained(folder)
    (folder / "tokenizer.json").write_bytes((qwen_tokenizer_dir / "tokenizer.json").read_bytes())
    (folder / "tokenizer_config.json").write_text(json.dumps({"chat_template": QWEN3_TEMPLATE, "eos_token": "<|im_end|>"}))
    return folder


def test_commands_read_a_qwen3_directory(tmp_path, qwen3_dir, capsys):
    from zerollm.cli import main
    text = tmp_path / "t.txt"
    text.write_text(TEXT, encoding="utf-8")
    assert main(["eval", "--hf", str(qwen3_dir), "--data", str(text)]) == 0
    hf_loss = capsys.readouterr().out.split("loss ")[1].split()[0]
    assert main(["convert", "--from", str(qwen3_dir), "--to", str(tmp_path / "m.gguf")]) == 0
    assert "arch qwen3" in capsys.readouterr().out
    assert main(["eval", "--gguf", str(tmp_path / "m.gguf"), "--data", str(text)]) == 0
    assert capsys.readouterr().out.split("loss ")[1].split()[0] == hf_loss
    assert main(["convert", "--from", str(qwen3_dir), "--to", str(tmp_path / "z")]) == 0
    assert "Qwen3 layout" in capsys.readouterr().out
    assert main(["convert", "--from", str(tmp_path / "z"), "--to", str(tmp_path / "back")]) == 0
    assert json.loads((tmp_path / "back" / "config.json").read_text())["architectures"] == ["Qwen3ForCausalLM"]
    assert main(["explain", "--hf", str(qwen3_dir), "--text", "你好 world", "--out", str(tmp_path / "e.html")]) == 0
    assert main(["sample", "--hf", str(qwen3_dir), "--prompt", "你好", "--max-new-tokens", "4"]) == 0


@pytest.mark.parametrize("family", ["qwen2", "qwen3"])
def test_greedy_generation_with_the_kv_cache_matches_transformers(tmp_path, family):
    from zerollm.generation.decode import generate
    from zerollm.generation.sample import Sampling
    # (a case and seed whose greedy continuation is not one token repeated)
    case, seed = {"qwen2": ("gqa5to1-untied", 0), "qwen3": ("mqa-untied-odd", 1)}[family]
    theirs = qwen(family, seed, **dict(_kw(family, case), vocab_size=50, max_position_embeddings=32))
    theirs.save_pretrained(tmp_path)
    prompt = ids(50, T=5, B=1, seed=1)
    with torch.no_grad():
        expected = theirs.generate(torch.tensor(prompt), do_sample=False, max_new_tokens=20)[0, 5:].tolist()
    ours = [int(t[0]) for t in generate(hf.load(tmp_path), prompt, 20, Sampling(temperature=0))]
    assert len(set(expected)) > 3, "a degenerate model would test nothing"
    assert ours == expected


def test_a_bf16_file_is_read_block_by_block_into_the_model(tmp_path, monkeypatch):
    """BF16 weights are converted a few rows at a time, straight into the model (never the whole file as
    float32 beside it): with blocks of 5 rows, every tensor crosses block edges, and the logits are those
    of transformers on the same bf16 numbers."""
    from zerollm.interop.hf import weights
    theirs = qwen("qwen3", **QWEN3_CASES["gqa-headdim6-tied"]).to(torch.bfloat16)
    theirs.save_pretrained(tmp_path)
    monkeypatch.setattr(weights, "ROWS", 5)
    assert gap(hf.load(tmp_path), theirs.float(), ids(37)) <= TOL


def test_sample_no_thinking_ends_the_prompt_with_an_empty_think_block(qwen_tokenizer_dir, hf_chat_tokenizer):
    import argparse
    from zerollm.cli.commands import sample
    parser = argparse.ArgumentParser()
    sample.add_arguments(parser)
    tok = hf.load_tokenizer_dir(qwen_tokenizer_dir)
    for flag, thinking in (("--thinking", True), ("--no-thinking", False)):
        args = parser.parse_args(["--prompt", "你好", flag])
        ids_, end = sample._encode(tok, args)
        assert ids_ == _their_ids(hf_chat_tokenizer, CONVERSATIONS["one-turn"], add_generation_prompt=True,
                                  enable_thinking=thinking)
        assert end == tok.special_tokens["<|im_end|>"]


@pytest.mark.parametrize("family", sorted(OLDER))
def test_a_saved_qwen_tokenizer_keeps_its_templates_rules(tmp_path, qwen_tokenizer_dir, family):
    """zerollm's tokenizer.json of a run or model directory keeps the family its Hugging Face directory's
    template named: a model fine-tuned from Qwen2.5 renders by Qwen2.5's rules when it is opened again
    (it used to fall back to Qwen3's: no default system turn, another tool text)."""
    from zerollm.data import chatml
    from zerollm.io.errors import ZeroLLMError
    from zerollm.tokenizers import load_tokenizer
    ours = hf.load_tokenizer_dir(_older_dir(tmp_path, qwen_tokenizer_dir, OLDER[family]))
    grown = ours.with_special_tokens(["<|extra|>"])               # what a stage's prepare_tokenizer may do
    for tok in (ours, grown):
        tok.save(tmp_path / "tokenizer.json")
        again = load_tokenizer(str(tmp_path / "tokenizer.json"))
        assert chatml.family(again) == family and again.to_dict() == tok.to_dict()
        messages = OLDER_CONVERSATIONS[sorted(OLDER_CONVERSATIONS)[0]]
        assert chat.encode_prompt(again, messages) == chat.encode_prompt(ours, messages)
    plain = hf.load_tokenizer_dir(qwen_tokenizer_dir)            # no template: nothing extra in the file
    assert "chat_family" not in plain.to_dict()
    bad = {**ours.to_dict(), "chat_family": "qwen9"}
    (tmp_path / "bad.json").write_text(json.dumps(bad))
    with pytest.raises(ZeroLLMError, match="'chat_family' must be one of qwen2, qwen2.5, qwen3 or absent"):
        load_tokenizer(str(tmp_path / "bad.json"))


def test_sft_on_a_qwen_tokenizer_adds_no_tokens_of_zerollms_template(qwen_tokenizer_dir):
    tok = hf.load_tokenizer_dir(qwen_tokenizer_dir)
    assert chat.prepare_tokenizer(tok, needs=("think", "tools")) is tok       # Qwen's own tokens are enough


def test_an_unknown_chat_template_is_named_in_one_note_and_never_run(tmp_path, qwen3_dir):
    from zerollm.interop.opening import Source, open_model
    from zerollm.tokenizers import ByteTokenizer
    assert not open_model(Source(hf=str(qwen3_dir)), prog="zerollm chat").notes      # Qwen's: rendered natively
    other = tmp_path / "other"
    other.mkdir()
    for name in ("config.json", "model.safetensors"):
        (other / name).write_bytes((qwen3_dir / name).read_bytes())
    ByteTokenizer().to_hf_tokenizer_json(other / "tokenizer.json")
    # a template that would raise if it were ever run
    (other / "tokenizer_config.json").write_text(json.dumps({"chat_template": "{{ raise_exception('ran') }}"}))
    opened = open_model(Source(hf=str(other)), prog="zerollm chat")
    assert len(opened.notes) == 1 and "is not one zerollm knows" in opened.notes[0]
    assert not chat.has_template(opened.tokenizer)


def test_chat_no_thinking_reaches_the_conversation(qwen_tokenizer_dir, hf_chat_tokenizer):
    from zerollm.serve.repl import Conversation
    tok = hf.load_tokenizer_dir(qwen_tokenizer_dir)
    conv = Conversation(tok, block_size=400)
    conv.thinking = False                       # what zerollm chat --no-thinking sets
    assert conv._ids([], "你好") == _their_ids(hf_chat_tokenizer, CONVERSATIONS["one-turn"],
                                               add_generation_prompt=True, enable_thinking=False)


def test_the_server_takes_enable_thinking_in_chat_template_kwargs(qwen_tokenizer_dir, hf_chat_tokenizer):
    from fastapi.testclient import TestClient
    from zerollm.model.gpt import GPT
    from zerollm.serve.api import build_app
    from zerollm.serve.backend import Backend
    tok = hf.load_tokenizer_dir(qwen_tokenizer_dir)
    cfg = GPTConfig(vocab_size=tok.vocab_size, block_size=128, n_layer=1, n_head=2, n_embd=16, head_dim=6,
                    qk_norm=True, norm="rmsnorm", pos="rope", mlp="swiglu", bias=False)
    backend = Backend(GPT(cfg, seed=0), tok, name="q")
    backend.start()
    try:
        client = TestClient(build_app(backend))
        ask = dict(model="q", messages=CONVERSATIONS["one-turn"], max_tokens=1, temperature=0)
        for kwargs, thinking in (({}, True), ({"chat_template_kwargs": {"enable_thinking": False}}, False)):
            r = client.post("/v1/chat/completions", json={**ask, **kwargs})
            assert r.status_code == 200, r.text
            assert r.json()["usage"]["prompt_tokens"] == len(_their_ids(
                hf_chat_tokenizer, CONVERSATIONS["one-turn"], add_generation_prompt=True, enable_thinking=thinking))
        for bad, field in (({"enable_thinking": "no"}, "enable_thinking"), ({"template": "x"}, "template")):
            r = client.post("/v1/chat/completions", json={**ask, "chat_template_kwargs": bad})
            assert r.status_code == 400 and field in r.json()["error"]["param"], r.text
    finally:
        backend.close()
