"""中文 of the generation room's error messages (see zerollm/io/zh/__init__.py)."""

ZH = {
    "max_batch must be >= 1 and max_queue >= 0; got {0}, {1}":
        "max_batch 必须 >= 1，max_queue 必须 >= 0；收到的是 {0}、{1}",
    "the prompt is empty: give at least one token":
        "提示词是空的：至少给一个 token",
    "max_new_tokens must be >= 1, got {0}":
        "max_new_tokens 必须 >= 1，收到的是 {0}",
    "the prompt ({0} tokens) + max_new_tokens ({1}) is more than the model's context of {2} tokens; {3}":
        "提示词（{0} 个 token）加上 max_new_tokens（{1}）超过了模型 {2} 个 token 的上下文；{3}",
    "a request with a Context runs in a group: give it to stream()":
        "带 Context 的请求要成组运行：请把它交给 stream()",
    "{0} requests at once can never fit: at most {1} are held (--max-batch {2} + --max-queue {3})":
        "一次 {0} 个请求永远放不下：最多只能容纳 {1} 个（--max-batch {2} + --max-queue {3}）",
    "all {0} rows are busy and {1} requests wait beyond them (--max-batch {2}, --max-queue {3}); try again shortly":
        "全部 {0} 行都在忙，另外还有 {1} 个请求在排队（--max-batch {2}，--max-queue {3}）；请稍后再试",
    "the requests of one group need prompts of one length and one Context":
        "同一组的请求必须有同样长度的提示词和同一个 Context",
    "give one seed per prompt: {0} prompts but {1} seeds":
        "每个提示词要一个种子：有 {0} 个提示词，却有 {1} 个种子",
    "max_new_tokens must be a whole number >= 1, got {0}":
        "max_new_tokens 必须是 >= 1 的整数，收到的是 {0}",
    "prompt {0} is empty: give at least one token":
        "提示词 {0} 是空的：至少给一个 token",
    "prompt {0} is {1} tokens long but the model's context is {2} tokens, which leaves no room for a completion; shorten the prompt":
        "提示词 {0} 长 {1} 个 token，而模型的上下文只有 {2} 个 token，没有留给续写的位置；请缩短这个提示词",
    "temperature must be >= 0 (0 = greedy), got {0}":
        "temperature 必须 >= 0（0 表示贪心解码），收到的是 {0}",
    "top_k must be >= 1, got {0}":
        "top_k 必须 >= 1，收到的是 {0}",
    "top_p must be in (0, 1], got {0}":
        "top_p 必须在 (0, 1] 之内，收到的是 {0}",
    "min_p must be in [0, 1], got {0}":
        "min_p 必须在 [0, 1] 之内，收到的是 {0}",
    "repetition_penalty must be in [{0}, {1}] (1 = none, > 1 discourages repeats), got {2}":
        "repetition_penalty 必须在 [{0}, {1}] 之内（1 表示不惩罚，> 1 会抑制重复），收到的是 {2}",
    "{0} must be in [-2, 2] (0 = none), got {1}":
        "{0} 必须在 [-2, 2] 之内（0 表示不惩罚），收到的是 {1}",
    "prompts of up to {0} tokens leave room for only {1} new tokens in the context of {2}; those completions are cut there":
        "最长的提示词有 {0} 个 token，在 {2} 个 token 的上下文里只能再生成 {1} 个新 token；这些续写会在那里被截断",
    "speculation must be 'off', 'ngram' or 'draft' with >= 1 token; got {0}, {1}":
        "speculation 必须是 'off'、'ngram' 或 'draft'，且至少 1 个 token；收到的是 {0}、{1}",
    "speculation 'draft' needs a draft model, and a draft model needs speculation 'draft'":
        "speculation 'draft' 需要一个草稿模型，而给了草稿模型就必须用 speculation 'draft'",

    # Pieces of messages made by functions rather than written in place (scripts/zh_catalog.py lists them as
    # built elsewhere): context_notes and the Scheduler's "context is full" warning, and BeyondContext's fix.
    # translate() puts a captured value that is itself one of these sentences into 中文 too.
    "the context is full ({0} tokens) before the last new token: {1}":
        "在最后一个新 token 之前上下文就满了（{0} 个 token）：{1}",
    "each further token recomputes the last block_size tokens (slower); {0}":
        "之后每个 token 都要重新计算最后 block_size 个 token（更慢）；{0}",
    "use --window for a rolling cache":
        "可以用 --window 改用滚动缓存",
    "this model's positions are learned, so its context cannot roll":
        "这个模型的位置编码是学出来的，所以它的上下文不能滚动",
    "prompt of {0} tokens is longer than the context ({1}); keeping its last {2} tokens":
        "提示词有 {0} 个 token，比上下文（{1}）还长；只保留它最后的 {2} 个 token",
    "prompt of {0} tokens is longer than the context ({1}); keeping its last {2} tokens, so {3}":
        "提示词有 {0} 个 token，比上下文（{1}）还长；只保留它最后的 {2} 个 token，所以{3}",
    "ask for at most {0} new tokens or shorten the prompt":
        "最多只要 {0} 个新 token，或者缩短提示词",
    "shorten the prompt":
        "请缩短提示词",
}
