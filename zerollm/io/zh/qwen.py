"""中文 of the messages of Qwen2 / Qwen3 in and out (#64): GGUF's qwen2 and qwen3 architectures
(see zerollm/io/zh/__init__.py)."""

ZH = {
    "{0}: architecture {1} is not supported; zerollm runs GGUF files of architecture {2} "
    "(GPT-2, Llama, Mixtral-style Llama, Qwen2, Qwen3)":
        "{0}: 不支持架构 {1}；zerollm 能运行的 GGUF 架构是 {2}（GPT-2、Llama、Mixtral 式的 Llama、Qwen2、Qwen3）",
    "{0}: {1}.attention.value_length differs from {2}.attention.key_length ({3} vs {4}); zerollm's heads have one size":
        "{0}: {1}.attention.value_length 与 {2}.attention.key_length 不同（{3} 对 {4}）；zerollm 的注意力头只有一种大小",
    "{0}: {1}.rope.dimension_count={2} rotates part of each head; zerollm's RoPE rotates the whole head ({3} dims)":
        "{0}: {1}.rope.dimension_count={2} 只旋转每个头的一部分；zerollm 的 RoPE 旋转整个头（{3} 维）",
    # the note for a ChatML template that is none of Qwen2's, Qwen2.5's and Qwen3's
    "{0}: note: the chat template of {1} is not one of Qwen2's, Qwen2.5's or Qwen3's that zerollm knows (it never "
    "runs a template from a file); conversations are rendered by Qwen3's rules":
        "{0}: 提示：{1} 里的聊天模板不是 zerollm 认得的 Qwen2、Qwen2.5 或 Qwen3 模板（zerollm 从不运行文件里的模板）；"
        "对话按 Qwen3 的规则排版",
    # --help of zerollm sample
    "Qwen3's thinking switch (enable_thinking): --no-thinking puts an empty think block after the prompt, so the "
    "model answers at once (default: on)":
        "Qwen3 的思考开关（enable_thinking）：--no-thinking 在提示后面放一个空的思考块，模型就直接回答（默认：开）",
}
