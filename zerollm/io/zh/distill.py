"""中文 of distillation's messages and flags (issue 62: zerollm distill; see zerollm/io/zh/__init__.py)."""

ZH = {
    # errors
    "give the teacher with exactly one of --teacher RUN, --hf DIR or --gguf FILE":
        "请用 --teacher RUN、--hf DIR、--gguf FILE 三者之一指定教师模型，且只给一个",
    "{0} has {1} token ids ({2} logits), the student {3} ({4}): distillation needs one tokenizer; train the "
    "student with the teacher's tokenizer":
        "{0} 有 {1} 个 token id（{2} 个 logits），学生模型有 {3} 个（{4}）：蒸馏要求两者用同一个分词器；"
        "请用教师的分词器训练学生",
    "{0} has another tokenizer: id {1} is {2} there and {3} in the student; distillation needs one tokenizer":
        "{0} 的分词器不一样：id {1} 在教师那里是 {2}，在学生这里是 {3}；蒸馏要求两者用同一个分词器",
    "{0} reads {1} tokens, less than the student's context of {2}; give the student a --block-size of at most {3}":
        "{0} 只读 {1} 个 token，比学生的上下文 {2} 短；请给学生一个不超过 {3} 的 --block-size",
    "give the student with one of --init RUN or --preset NAME, not both":
        "学生模型请用 --init RUN 或 --preset NAME 之一指定，不要两个都给",
    "give the student: --init RUN (a trained zerollm model) or --preset NAME (a new one)":
        "请指定学生模型：--init RUN（一个训练好的 zerollm 模型）或 --preset NAME（新建一个）",
    "the {0} student rebuilt from its seed has another digest than the run's; resume with the zerollm version "
    "that started the run":
        "用种子重建的 {0} 学生模型摘要与这次运行记录的不同；请用开始这次运行的那个 zerollm 版本来续训",
    "the teacher {0} has changed since this run began (its weights' digest differs); put the original back":
        "教师模型 {0} 在这次运行开始后被改动过（权重摘要不同）；请把原来的放回去",
    "--divergence must be one of {0}; got {1}": "--divergence 必须是 {0} 之一；收到的是 {1}",
    "--{0} must lie in [0, 1]; got {1}": "--{0} 必须在 [0, 1] 之间；收到的是 {1}",
    "--{0} must be > 0; got {1}": "--{0} 必须大于 0；收到的是 {1}",
    # --help
    "train a small student on a bigger teacher's distributions (KL, reverse KL, GKD's JSD, on-policy)":
        "让小的学生模型学习大的教师模型的分布（KL、反向 KL、GKD 的 JSD、on-policy）",
    "the teacher: a zerollm run, checkpoint or model directory": "教师模型：zerollm 的训练运行目录、检查点或模型目录",
    "the teacher: a Hugging Face model directory": "教师模型：Hugging Face 模型目录",
    "the teacher: a GGUF file": "教师模型：一个 GGUF 文件",
    "the student: a zerollm run or checkpoint directory": "学生模型：zerollm 的训练运行目录或检查点目录",
    "the student: a new model of this preset's size (the model flags below change it), on the teacher's tokenizer":
        "学生模型：按这个预设的大小新建一个（下面的模型参数可以改它），用教师的分词器",
    "the UTF-8 text file to train on, or a corpus that ships with zerollm: shakespeare, tang":
        "用来训练的 UTF-8 文本文件，或 zerollm 自带的语料：shakespeare、tang",
    "run directory (default runs/distill)": "运行目录（默认 runs/distill）",
    "forward_kl = KL(teacher||student); reverse_kl = KL(student||teacher); jsd = generalized Jensen-Shannon with "
    "--beta (GKD) (default forward_kl)":
        "forward_kl = KL(教师||学生)；reverse_kl = KL(学生||教师)；jsd = 带 --beta 的广义 Jensen-Shannon 散度"
        "（GKD）（默认 forward_kl）",
    "the JSD's beta in [0, 1]: 0 is the forward KL, 1 the reverse KL (as TRL's generalized_jsd_loss)":
        "JSD 的 beta，取值 [0, 1]：0 是正向 KL，1 是反向 KL（与 TRL 的 generalized_jsd_loss 一致）",
    "both sets of logits are divided by it before the softmax": "两组 logits 在 softmax 之前都除以它",
    "the share of the data's cross-entropy in the loss: (1 - w) divergence + w cross-entropy":
        "数据交叉熵在损失里占的份额：(1 - w) 散度 + w 交叉熵",
    "GKD's lambda: the probability that a batch is sampled by the student after a prompt cut from the data":
        "GKD 的 lambda：一个批次由学生自己续写的概率（提示取自数据）",
    "the temperature of the student's on-policy samples": "学生 on-policy 采样时的温度",
    # QLoRA (--quantize-base)
    "--quantize-base freezes the base in blocks: give --lora-r R too, so the adapters train":
        "--quantize-base 会把基座冻结成量化块：请同时给出 --lora-r R，让适配器来训练",
    "{0} has {1} inputs, not a multiple of {2}: {3} blocks cannot hold it; quantize a model whose widths are "
    "multiples of 32, or leave out --quantize-base":
        "{0} 有 {1} 个输入，不是 {2} 的倍数：{3} 的块装不下它；请量化宽度都是 32 的倍数的模型，或者去掉 --quantize-base",
    "QLoRA: keep the frozen base's linear layers in Q8_0 / Q4_0 blocks (with --lora-r; "
    "zerollm.interop.quant.quantize_linears)":
        "QLoRA：把冻结的基座的线性层保存在 Q8_0 / Q4_0 块里（需配合 --lora-r；zerollm.interop.quant.quantize_linears）",
}
