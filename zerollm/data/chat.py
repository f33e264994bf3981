"""The chat template: how a conversation becomes one sequence of token ids, and which of them are learned.

Each message is its role marker, its text, and the end-of-turn token; nothing else (no newlines, no
spaces), so the template means the same for byte, char and BPE tokenizers:

    <|system|>You write poems.<|end|><|user|>藏头诗：春夏秋冬<|end|><|assistant|>春眠不觉晓，...<|end|>

A plain {"prompt", "completion"} example is one user turn (the prompt) and one assistant turn (the
completion). The four markers are special tokens appended to the tokenizer (``prepare_tokenizer``), so
existing ids never move; a model gets matching new embedding rows with ``resize_model``.

What is learned (``encode_example``'s loss mask): every token of every assistant turn's text AND its
end-of-turn token, which is how the model learns to stop. The markers that open a turn and everything
the user or system wrote are context only. Generation starts after ``encode_prompt``: the conversation
so far followed by the assistant marker, and stops at ``END``.

The same template as Jinja (``chat_template_jinja``) goes into an exported tokenizer_config.json, so
transformers' ``apply_chat_template`` gives exactly these ids (tests/test_chat.py checks it); its
``{% generation %}`` block marks the same tokens as our loss mask (return_assistant_tokens_mask).

One difference by design: message text is encoded as plain text, so a user who types "<|end|>" gets
the characters, never the end-of-turn token (Hugging Face would turn that text into the token).
"""

from dataclasses import replace

import numpy as np

from zerollm.io.errors import ZeroLLMError
from zerollm.data.formats import check_messages, check_sft_row

SYSTEM, USER, ASSISTANT, END = "<|system|>", "<|user|>", "<|assistant|>", "<|end|>"
MARKERS = {"system": SYSTEM, "user": USER, "assistant": ASSISTANT}
SPECIALS = (SYSTEM, USER, ASSISTANT, END)
NEW_ROW_NOISE = 0.01      # new embedding rows: the mean row plus this much of the rows' spread (see resize_model)


# ----------------------------------------------------------------------------
# the tokenizer and the model

def has_template(tokenizer):
    """True when ``tokenizer`` has the template's four special tokens."""
    specials = getattr(tokenizer, "special_tokens", {}) or {}
    return all(s in specials for s in SPECIALS)


def prepare_tokenizer(tokenizer, texts=()):
    """The tokenizer with the template's special tokens (and, for a char tokenizer, every character
    of ``texts`` it lacks) appended; existing ids unchanged. Idempotent: a tokenizer that has them
    all comes back as it is.

    >>> from zerollm.tokenizers import CharTokenizer
    >>> tok = prepare_tokenizer(CharTokenizer.train("春夏秋冬"), ["藏头诗：春夏秋冬"])
    >>> tok.vocab_size, tok.encode("春"), prepare_tokenizer(tok) is tok
    (12, [2], True)
    """
    tok = tokenizer.with_special_tokens(SPECIALS)
    if tok.name == "char":
        chars = set()
        for text in texts:
            chars.update(text)
        tok = tok.with_chars(chars)
    return tokenizer if tok.to_dict() == tokenizer.to_dict() else tok


def resize_model(model, vocab_size, rng):
    """A new GPT with ``vocab_size`` rows in its token embedding (and untied head); every existing
    parameter is copied unchanged, so the old tokens' logits are exactly what they were.

    Each new row is the mean of the existing rows plus a little noise (NEW_ROW_NOISE times the rows'
    per-dimension standard deviation, drawn from ``rng``). Why the mean (Hewitt 2021, "Initializing
    New Word Embeddings for Pretrained Language Models"): a new token's logit h·mean is the average of
    the old logits, which is below their log-sum-exp, so each new token starts with a probability of
    at most about 1/V and the model's predictions barely move; a random row could instead take a
    large share of the probability before it has learned anything. The noise makes the new tokens
    differ from each other, so they can be told apart from the first step.
    """
    from zerollm.model.gpt import GPT
    cfg = model.config
    if isinstance(vocab_size, bool) or not isinstance(vocab_size, int) or vocab_size < cfg.vocab_size:
        raise ZeroLLMError(f"resize_model grows the vocabulary; got vocab_size={vocab_size!r} for a model "
                           f"with {cfg.vocab_size} tokens")
    bigger = GPT(replace(cfg, vocab_size=vocab_size), init=False)
    extra = vocab_size - cfg.vocab_size
    for name, value in model.params.items():
        if name in ("wte.weight", "lm_head.weight") and extra:
            mean, std = value.mean(axis=0), value.std(axis=0)                            # (C,), (C,)
            rows = mean + NEW_ROW_NOISE * std * rng.standard_normal((extra, value.shape[1]))   # (extra, C)
            value = np.concatenate([value, rows.astype(value.dtype)], axis=0)           # (V', C)
        np.copyto(bigger.params[name], value)
    bigger.rng.bit_generator.state = model.rng.bit_generator.state
    bigger.lora = model.lora         # adapters do not depend on the vocabulary; the new rows will train
    bigger.training = model.training
    return bigger


def special_id(tokenizer, token):
    """The id of one of the template's special tokens, or an error that says how to add them."""
    specials = getattr(tokenizer, "special_tokens", {}) or {}
    if token not in specials:
        raise ZeroLLMError(f"the tokenizer has no {token} token, so it cannot use the chat template; "
                           "extend it first with zerollm.data.chat.prepare_tokenizer (zerollm sft does this)")
    return specials[token]


def end_id(tokenizer):
    """The id of the end-of-turn token: where generation stops."""
    return special_id(tokenizer, END)


# ----------------------------------------------------------------------------
# conversations -> ids

def as_messages(example, where="example"):
    """{"prompt", "completion"} or {"messages"} -> the list of messages (checked)."""
    if not isinstance(example, dict):
        raise ZeroLLMError(f"{where}: an example is a dict with 'prompt' and 'completion', or 'messages'")
    check_sft_row(example, where)
    if "messages" in example:
        return example["messages"]
    return [{"role": "user", "content": example["prompt"]},
            {"role": "assistant", "content": example["completion"]}]


def _turn(tokenizer, message, allowed_special="none"):
    """One message -> (ids, learned): marker, text, end; the text and end are learned for the assistant."""
    text = tokenizer.encode(message["content"], allowed_special=allowed_special)
    learned = message["role"] == "assistant"
    ids = [special_id(tokenizer, MARKERS[message["role"]]), *text, special_id(tokenizer, END)]
    return ids, [False] + [learned] * (len(text) + 1)


def encode_example(tokenizer, example, allowed_special="none"):
    """-> (ids, loss_mask): the whole conversation, and True exactly on the assistant turns' text and
    their end-of-turn tokens. Special tokens written as text (e.g. "<|end|>") are an error unless
    ``allowed_special="all"`` (then they become their ids: for answers a model wrote itself).

    >>> from zerollm.tokenizers import ByteTokenizer
    >>> tok = prepare_tokenizer(ByteTokenizer())
    >>> encode_example(tok, {"prompt": "1+2=", "completion": "3"})[1]
    [False, False, False, False, False, False, False, True, True]
    """
    ids, mask = [], []
    for message in as_messages(example):
        turn_ids, turn_mask = _turn(tokenizer, message, allowed_special)
        ids += turn_ids
        mask += turn_mask
    return ids, mask


def encode_prompt(tokenizer, prompt_or_messages):
    """The generation prompt: a text (one user turn) or a list of messages, then the assistant marker."""
    if isinstance(prompt_or_messages, str):
        messages = [{"role": "user", "content": prompt_or_messages}]
    else:
        messages = check_messages(prompt_or_messages, "prompt")
    ids = []
    for message in messages:
        ids += _turn(tokenizer, message)[0]
    return ids + [special_id(tokenizer, ASSISTANT)]


def fit_turns(ids_of, n_turns, room, block_size):
    """Drop the oldest turns until a prompt leaves ``room`` new tokens in the context.

    ids_of(k) -> the prompt's ids without its first k turns (a turn: a user message and the answer after
    it; the system message and the message being answered always stay). -> (ids, k) for the smallest k
    with len(ids) + room <= block_size, or (ids with every droppable turn gone, n_turns) when even that
    does not fit: the caller says what leaves no room. `zerollm chat` and the server's fit_context (the
    chat page) both fit this way, so both forget the same turns.
    """
    for k in range(n_turns + 1):
        ids = ids_of(k)
        if len(ids) + room <= block_size:
            return ids, k
    return ids, n_turns


def turn_starts(messages):
    """Where each turn begins among ``messages`` (after any leading system messages): the index of each
    user message. The last turn is the one being answered."""
    return [i for i, m in enumerate(messages) if m["role"] == "user"]


def decode_completion(tokenizer, ids):
    """The text of a generated completion: everything before its first end-of-turn token."""
    ids = [int(i) for i in ids]
    end = end_id(tokenizer)
    if end in ids:
        ids = ids[:ids.index(end)]
    return tokenizer.decode(ids)


def example_texts(example):
    """Every text of an SFT example (what a char tokenizer must be able to encode)."""
    return [m["content"] for m in as_messages(example)]


# ----------------------------------------------------------------------------
# the same template for Hugging Face

def chat_template_jinja():
    """The template as Jinja, for tokenizer_config.json's "chat_template" (transformers'
    apply_chat_template renders it, then tokenizes the text; the markers are added tokens there)."""
    markers = "{" + ", ".join(f"'{role}': '{marker}'" for role, marker in MARKERS.items()) + "}"
    return (
        "{%- set markers = " + markers + " -%}"
        "{%- for message in messages -%}"
        "{%- if message['role'] not in markers -%}"
        "{{- raise_exception('unknown role ' + message['role'] + '; roles are system, user, assistant') -}}"
        "{%- endif -%}"
        "{{- markers[message['role']] -}}"
        "{%- if message['role'] == 'assistant' -%}"
        "{%- generation -%}{{- message['content'] + '" + END + "' -}}{%- endgeneration -%}"
        "{%- else -%}"
        "{{- message['content'] + '" + END + "' -}}"
        "{%- endif -%}"
        "{%- endfor -%}"
        "{%- if add_generation_prompt -%}{{- '" + ASSISTANT + "' -}}{%- endif -%}"
    )


def chat_model(model, tok, rows, seed):
    """The tokenizer with the chat template's tokens (and any characters the rows need), and the model
    resized to it; both unchanged when they already fit."""
    texts = [str(v) for row in rows for k, v in row.items() if k in ("prompt", "chosen", "rejected", "completion")]
    tok = prepare_tokenizer(tok, texts)
    if tok.vocab_size > model.config.vocab_size:      # a model may have more rows than its tokenizer (GPT-2 shapes)
        model = resize_model(model, tok.vocab_size, np.random.default_rng([seed, 9]))
    return model, tok
