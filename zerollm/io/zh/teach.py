"""中文 of the teach room's error messages (see zerollm/io/zh/__init__.py)."""

ZH = {
    "{0}; {1}, or leave out --json for the printed walkthrough":
        "{0}；{1}，或者去掉 --json，改看逐步打印的讲解",
    "give all four of --x --wq --wk --wv; missing {0}":
        "--x --wq --wk --wv 四个都要给；缺少 {0}",
    "--x must be (T, d_model) or (B, T, d_model); got shape {0}":
        "--x 的形状必须是 (T, d_model) 或 (B, T, d_model)；收到的形状是 {0}",
    "choose one example: --random (with sizes) OR your files --x --wq --wk --wv":
        "只能选一种例子：--random（加上尺寸），或者你自己的文件 --x --wq --wk --wv",
    "--text holds bytes that are not UTF-8 text; give the text in UTF-8":
        "--text 里有不是 UTF-8 文本的字节；请用 UTF-8 给出文本",
    "--text cannot be read by this checkpoint's tokenizer: {0}":
        "这个检查点的分词器读不了 --text：{0}",
    "--text encodes to no tokens; give some text the tokenizer can read":
        "--text 编码后一个 token 都没有；请给一些分词器能读的文本",
    "lang must be one of {0}, got {1}":
        "lang 必须是 {0} 之一，收到的是 {1}",
    "--out must name an .html file, got {0}; e.g. --out {1}":
        "--out 必须是一个 .html 文件名，收到的是 {0}；例如 --out {1}",
    "cannot write {0}: permission denied; choose a writable --out":
        "无法写入 {0}：没有权限；请换一个可写的 --out",
    "matplotlib is not installed: pip install \"zerollm[viz]\"":
        "没有安装 matplotlib：pip install \"zerollm[viz]\"",
    "--out must name a .png file, got {0}; e.g. --out heads.png":
        "--out 必须是一个 .png 文件名，收到的是 {0}；例如 --out heads.png",
    "--seq is for --random; with --text the length is the text's byte count":
        "--seq 只用于 --random；用 --text 时，长度就是文本的字节数",
    "--text is empty; give at least one character":
        "--text 是空的；至少给一个字符",
    "--seq must be a whole number from 1 to {0}, got {1}":
        "--seq 必须是 1 到 {0} 之间的整数，收到的是 {1}",
    "{0} must be a positive whole number, got {1}":
        "{0} 必须是正整数，收到的是 {1}",
    "{0} tokens is more than this picture can show ({1}); use a shorter --text or a smaller --seq":
        "{0} 个 token 超过了这张图能画的数量（{1}）；请用更短的 --text 或更小的 --seq",
    "{0} layers x {1} heads = {2} panels, more than {3} can be read; use a smaller --n-layer or --n-head":
        "{0} 层 x {1} 个头 = {2} 张小图，超过了能看清的 {3} 张；请用更小的 --n-layer 或 --n-head",
    "--ckpt needs --text: the trained model reads your text":
        "--ckpt 需要 --text：训练好的模型要读你给的文本",
    "--text is {0} tokens; give 1 to {1}":
        "--text 有 {0} 个 token；请给 1 到 {1} 个",
    # the template made from the code; the one below it, with more literal text, is what a real message of
    # two or more flags matches, so that its "and" is 中文 too
    "{0} are for the random GPT; with --ckpt the checkpoint's model is drawn as trained, with its own weights, layers, heads, width and mask: leave them out":
        "{0} 只用于随机 GPT；用了 --ckpt 时，画出的是检查点里训练好的模型，用的是它自己的权重、层数、头数、宽度和掩码：请去掉这些参数",
    "{0} and {1} are for the random GPT; with --ckpt the checkpoint's model is drawn as trained, with its own weights, layers, heads, width and mask: leave them out":
        "{0} 和 {1} 只用于随机 GPT；用了 --ckpt 时，画出的是检查点里训练好的模型，用的是它自己的权重、层数、头数、宽度和掩码：请去掉这些参数",
    "{0} is for the random GPT; with --ckpt the checkpoint's model is drawn as trained, with its own weights, layers, heads, width and mask: leave it out":
        "{0} 只用于随机 GPT；用了 --ckpt 时，画出的是检查点里训练好的模型，用的是它自己的权重、层数、头数、宽度和掩码：请去掉这个参数",
    "{0} shapes the mixture-of-experts section, which only --n-expert E (2 or more) turns on: add --n-expert, or leave it out":
        "{0} 决定的是混合专家部分的形状，而这一部分只有 --n-expert E（2 或更大）才会打开：请加上 --n-expert，或者去掉这个参数",
    "{0} shape the mixture-of-experts section, which only --n-expert E (2 or more) turns on: add --n-expert, or leave them out":
        "{0} 决定的是混合专家部分的形状，而这一部分只有 --n-expert E（2 或更大）才会打开：请加上 --n-expert，或者去掉这些参数",
    "the stacked experts would hold {0} numbers, too many for this demo; the shapes follow the same rules at any size, so pick a smaller --n-expert or --n-inner":
        "堆叠起来的专家会有 {0} 个数，这个演示放不下；形状在任何尺寸下都遵循同样的规则，所以请选更小的 --n-expert 或 --n-inner",
    "zerollm quantize explains Q8_0 / Q4_0 on a small matrix: add --explain. To quantize a model, write a GGUF file: zerollm convert --from RUN --to FILE.gguf --quant q8_0":
        "zerollm quantize 用一个小矩阵讲解 Q8_0 / Q4_0：请加上 --explain。要量化一个模型，请写出 GGUF 文件：zerollm convert --from RUN --to FILE.gguf --quant q8_0",
    "--cols must be a multiple of {0} (whole blocks), got {1}":
        "--cols 必须是 {0} 的倍数（完整的块），收到的是 {1}",
    "{0} would hold {1} numbers ({2}), too many for this demo; the shapes follow the same rules at any size, so pick a smaller --batch, --seq, --n-head or --n-embd":
        "{0} 会有 {1} 个数（{2}），这个演示放不下；形状在任何尺寸下都遵循同样的规则，所以请选更小的 --batch、--seq、--n-head 或 --n-embd",
    "sequence length {0} exceeds block_size={1}; feed at most block_size tokens":
        "序列长度 {0} 超过了 block_size={1}；最多输入 block_size 个 token",
    "state does not fit this config: missing {0}, unexpected {1}; build it with param_shapes(config) / random_state(config)":
        "state 和这个配置对不上：缺少 {0}，多出 {1}；请用 param_shapes(config) / random_state(config) 构造它",
    "{0} has shape {1}, the config needs {2}":
        "{0} 的形状是 {1}，而配置需要 {2}",
    "{0} has no gradient yet; call loss.backward() first":
        "{0} 还没有梯度；请先调用 loss.backward()",
    "{0} Chinese character(s) of the page are beyond its embedded fonts (not in the shipped corpus, or over the {1} KB font budget) and need a CJK font on the reader's machine: {2}{3}":
        "页面上有 {0} 个汉字超出了内嵌字体的范围（不在随包附带的语料里，或者超出了 {1} KB 的字体预算），读者的电脑上需要有 CJK 字体才能显示：{2}{3}",
    # issue 57 item 7: the head and the fix check_json_size (teach/attention_walkthrough.py) puts into
    # "{0}; {1}, or leave out --json for the printed walkthrough", each fix as the walkthroughs give it
    "--json prints every intermediate as text: B={0}, T={1}, d_k={2} make {3} numbers (four (B, T, T) matrices grow as T^2), more than the {4} it allows":
        "--json 会把每个中间结果都打印成文本：B={0}、T={1}、d_k={2} 一共有 {3} 个数（四个 (B, T, T) 矩阵按 T^2 增长），超过了允许的 {4} 个",
    "T can be at most {0} here: use --seq {1} or less":
        "这里 T 最多是 {0}：请用 --seq {1} 或更小",
    "T can be at most {0} here: use an --x of at most {1} tokens":
        "这里 T 最多是 {0}：请让 --x 最多有 {1} 个 token",
    "too many even at T=1: use a smaller --batch or --d-k":
        "即使 T=1 也太多了：请用更小的 --batch 或 --d-k",
    "too many even at T=1: use fewer sequences in --x, or narrower --wq/--wk/--wv":
        "即使 T=1 也太多了：请在 --x 里放更少的序列，或者用更窄的 --wq/--wk/--wv",
}
