"""中文 of tools and thinking in `zerollm serve`, `zerollm chat` and the chat page (#58): the --help of chat's
tool flags and the messages of zerollm/serve/tools.py and zerollm/cli/commands/chat.py (see
zerollm/io/zh/__init__.py for the form of a template)."""

ZH = {
    # zerollm chat --help
    "a Python module (FILE.py or a module name) whose TOOLS the model may call, beside the built-in calculator "
    "(for a model trained with tools)":
        "一个 Python 模块（FILE.py 或模块名），模型除了内置的计算器之外，还可以调用它 TOOLS 里的工具（适用于用工具训练过的模型）",
    "seconds one call of a --tools tool (or its import) may take; 0 = no limit (default %(default)g)":
        "--tools 里的工具每次调用（以及导入它）最多可用的秒数；0 = 不限（默认 %(default)g）",
    "tool calls run in one turn at most; 0 shows the calls without running them (default %(default)s)":
        "一轮对话里最多执行多少次工具调用；0 表示只显示调用、不执行（默认 %(default)s）",
    # zerollm chat's errors
    "--tools: this model was not trained with tools (its tokenizer has no <tool_call> token); leave --tools out, "
    "or fine-tune it on tool calls first (zerollm tasks make calc --tools, then zerollm sft)":
        "--tools：这个模型没有用工具训练过（它的分词器里没有 <tool_call> 词元）；请去掉 --tools，"
        "或者先用工具调用的数据微调它（先 zerollm tasks make calc --tools，再 zerollm sft）",
    # zerollm/generation/grammar/automaton.py: special tokens in a forced call's grammar
    "a grammar takes at most {0} special tokens":
        "一个语法最多只能用 {0} 个特殊词元",
}
