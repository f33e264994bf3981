"""中文 of QLoRA's messages and flags (issue 62: a base in quantized blocks, its GGUF base, merge --quant; see
zerollm/io/zh/__init__.py)."""

ZH = {
    # errors
    "--gguf FILE trains adapters over the file's quantized blocks: give --lora-r R too (to train every weight, "
    "start from the model it was converted from with --init or --hf)":
        "--gguf FILE 是在文件里的量化块之上训练适配器：请同时给 --lora-r R（要训练全部权重，请用 --init 或 --hf "
        "从转换出这个文件的原模型开始）",
    "--quant {0} writes a GGUF file: give --to FILE.gguf (a merged run directory is always float32; leave out "
    "--quant for one)":
        "--quant {0} 写出的是 GGUF 文件：请给 --to 文件.gguf（合并成的运行目录总是 float32 的；要它就去掉 --quant）",
    "{0}: the weights do not fit the model's config (missing {1}, unexpected {2}, other shapes {3}); the model "
    "directory is damaged":
        "{0}：权重和模型配置对不上（缺少 {1}，多出 {2}，形状不同的有 {3}）；这个模型目录已损坏",
    # flags
    "QLoRA on a GGUF file (with --lora-r): its Q8_0 / Q4_0 linear layers stay the blocks it stores; the token "
    "table and head are float32":
        "在 GGUF 文件上做 QLoRA（需配合 --lora-r）：文件里 Q8_0 / Q4_0 的线性层保持原样的量化块；词表和输出头用 float32",
    "the run directory to create (float32), or with --quant a GGUF file":
        "要新建的运行目录（float32）；配合 --quant 时是一个 GGUF 文件",
    "re-quantize the merged weights (a QLoRA run's dequantized base + its adapters) into a GGUF file of these "
    "blocks: --to FILE.gguf":
        "把合并后的权重（QLoRA 运行反量化后的基座加上适配器）重新量化成这种块，写成 GGUF 文件：--to 文件.gguf",
    "open the model's linear layers in Q8_0 / Q4_0 blocks, each matrix quantized as it is read (a GGUF file's own "
    "blocks are kept), and put --adapter on top unmerged: a QLoRA adapter on the base it was trained on "
    "(docs/lora.md)":
        "以 Q8_0 / Q4_0 量化块打开模型的线性层，每个矩阵读入时就量化（GGUF 文件自带的块原样保留），再把 --adapter "
        "不合并地放在上面：让 QLoRA 适配器回到它训练时的那个基座上（docs/lora.md）",
}
