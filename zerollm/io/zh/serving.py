"""中文 of the serving engine's messages and flags (issue 60: --draft; see zerollm/io/zh/__init__.py)."""

ZH = {
    "prefix_cache must be >= 0 bytes and step_tokens >= 1 token; got {0}, {1}":
        "prefix_cache 必须 >= 0 字节，step_tokens 必须 >= 1 个 token；收到的是 {0}、{1}",
    "tokens one step puts through the model: the running streams' next tokens first, then chunks of waiting "
    "prompts, so a long prompt does not stall them (vLLM's name; default {0}; 0: each prompt whole at once)":
        "每一步送进模型的 token 数：先给正在生成的各条流各自的下一个 token，剩下的留给等待中的提示词分块预填充，"
        "这样长提示词不会卡住它们（沿用 vLLM 的名字；默认 {0}；0：每个提示词一次整段预填充）",
    "--draft and --speculate {0} are two ways to guess: give one of them":
        "--draft 和 --speculate {0} 是两种猜测方式：只给其中一个",
    "{0} has {1} token ids ({2} logits), the served model {3} ({4}): speculative decoding needs a draft with the "
    "same tokenizer; train it with the served model's tokenizer":
        "{0} 有 {1} 个 token id（{2} 个 logits），而提供服务的模型有 {3} 个（{4}）：投机解码需要分词器相同的草稿模型；"
        "请用提供服务的模型的分词器来训练它",
    "{0} has another tokenizer: id {1} is {2} there and {3} here; speculative decoding needs a draft with the same "
    "tokenizer":
        "{0} 的分词器不一样：id {1} 在那边是 {2}，在这边是 {3}；投机解码需要分词器相同的草稿模型",
    "{0} has a context of {1} tokens, shorter than the served model's {2}; use a draft with at least that context":
        "{0} 的上下文只有 {1} 个 token，比提供服务的模型的 {2} 短；请换一个上下文至少这么长的草稿模型",
    "a smaller model with the same tokenizer (a zerollm run, step or model directory) whose greedy guesses the "
    "served model checks, --speculate-tokens at a time":
        "一个分词器相同的较小模型（zerollm 的训练运行目录、某一步的检查点或模型目录）：它贪心地猜，"
        "提供服务的模型每次检验 --speculate-tokens 个",
    "tokens guessed per step with --speculate ngram or --draft (default 4)":
        "用 --speculate ngram 或 --draft 时每一步猜几个 token（默认 4）",
}
