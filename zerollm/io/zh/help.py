"""中文 of every command's --help: descriptions, flag helps, group titles (zerollm.cli.lang.translate_parser).

Keys are the English as the parsers hold it (templates: {0}, {1}, ... for what is filled in, literal
braces doubled); tests/test_i18n_messages.py checks that every help string of every command has one.
"""

ZH = {
    '(default {0})':
        '（默认 {0}）',
    '(default {0}; {1})':
        '（默认 {0}；{1}）',
    '{0} (default {1}; {2})':
        '{0}（默认 {1}；{2}）',
    '{0} fields':
        '{0} 的字段',
    'Defaults of this stage that differ from pre-training: {0}.':
        '这一阶段与预训练不同的默认值：{0}。',
    "preset values{0}\n(no --preset: {1}'s values; '-' = the default shown above. zerollm train --preset NAME --show-config prints one in full.)":
        "预设的取值   {0}\n（不加 --preset：用 {1} 的取值；'-' 表示上面列出的默认值。zerollm train --preset NAME --show-config 会完整打印一个预设。）",
    'check only this layer (repeatable); names: {0}':
        '只检查这一层（可重复给出）；可选的名字：{0}',
    'random example (any of these implies --random)':
        '随机示例（给出其中任何一个就等于 --random）',
    'your own numbers (.npy or .json nested lists; give all four)':
        '你自己的数字（.npy 或 .json 嵌套列表；四个都要给）',
    'mixture of experts (a section of its own when --n-expert > 0)':
        '混合专家（--n-expert > 0 时单独成一节）',
    'LoRA (low-rank adapters; the base weights stay frozen, see docs/lora.md)':
        'LoRA（低秩适配器；基础权重保持冻结，见 docs/lora.md）',
    'zerollm: an LLM built from zero in NumPy.':
        'zerollm：用 NumPy 从零搭建的大语言模型。',
    'show this help message and exit':
        '显示这条帮助信息并退出',
    "show program's version number and exit":
        '显示程序的版本号并退出',
    'language of help, errors and explanations: zh (中文) or en; default: ZEROLLM_LANG, else the locale':
        '帮助、错误信息和讲解所用的语言：zh（中文）或 en；默认先看 ZEROLLM_LANG，再看系统的 locale',
    "self-attention by hand, every step printed (the course's seed example)":
        '手算自注意力，每一步都打印出来（课程的起点示例）',
    'multi-head attention (and with --n-expert a MoE layer) shape by shape: shapes, FLOPs, memory':
        '多头注意力（加上 --n-expert 则是 MoE 层）逐个形状地讲：形状、FLOPs、内存',
    "draw every layer's and head's attention weights as a grid of heat maps (PNG)":
        '把每一层、每个头的注意力权重画成热力图网格（PNG）',
    "one offline, interactive HTML page: the walkthrough you can edit, and a model's attention":
        '一个离线的交互式 HTML 页面：可以动手改的讲解，以及模型的注意力',
    'Q8_0 / Q4_0 quantization by hand on a small matrix: blocks, scales, rounding, error (--explain)':
        '在小矩阵上手算 Q8_0 / Q4_0 量化：分块、缩放因子、取整、误差（--explain）',
    "check every layer's hand-written backward against finite differences":
        '用有限差分检查每一层手写的反向传播',
    'fetch a public corpus (tiny Shakespeare) into the cache, verified; prints its path':
        '把公开语料（tiny Shakespeare）下载到缓存并校验；打印它的路径',
    'tokenize a text file (byte, char or BPE) into train.bin/val.bin + tokenizer.json':
        '把文本文件分词（byte、char 或 BPE），写成 train.bin/val.bin + tokenizer.json',
    'train a GPT on a text file, with crash-safe checkpoints':
        '在文本文件上训练一个 GPT，检查点在崩溃时也安全',
    'generate text from a trained checkpoint or a Hugging Face model':
        '用训练好的检查点或 Hugging Face 模型生成文本',
    'talk to a model in the terminal: multi-turn, streamed, in the chat template':
        '在终端里和模型对话：多轮、流式输出、使用聊天模板',
    'an OpenAI-compatible HTTP server with continuous batching, and a chat page':
        '兼容 OpenAI 的 HTTP 服务器，带连续批处理和一个聊天网页',
    'the loss and bits per byte of a checkpoint on a text file':
        '检查点在一个文本文件上的损失和每字节比特数（bits per byte）',
    'tasks a program can check (藏头诗, addition, preference pairs): make data, measure success':
        '程序能判对错的任务（藏头诗、加法、偏好对）：生成数据、测成功率',
    'supervised fine-tuning on prompt/completion or chat data (chat template)':
        '在 prompt/completion 或聊天数据上做监督微调（使用聊天模板）',
    'Hugging Face GPT-2/Llama directory <-> zerollm model directory (safetensors only), or a GGUF file':
        'Hugging Face GPT-2/Llama 目录 <-> zerollm 模型目录（只用 safetensors），或 GGUF 文件',
    "fold a LoRA run's adapters into the weights (an ordinary run directory)":
        '把 LoRA 运行的适配器合并进权重（得到一个普通的运行目录）',
    'train a reward model on preference pairs (Bradley-Terry or margin)':
        '在偏好对上训练奖励模型（Bradley-Terry 或 margin）',
    "a reward model's verdict on a file: pairwise accuracy, or each answer's reward":
        '奖励模型对一个文件的评判：成对准确率，或每个回答的奖励',
    'Direct Preference Optimization (or IPO) against a frozen reference':
        '直接偏好优化 DPO（或 IPO），对照一个冻结的参考模型',
    'reinforcement learning with PPO: a value head, GAE, a KL penalty to a reference':
        '用 PPO 做强化学习：价值头、GAE、对参考模型的 KL 惩罚',
    'reinforcement learning with GRPO: group-relative advantages, no critic':
        '用 GRPO 做强化学习：组内相对优势，不需要评论家（critic）',
    'training runs and their lm-eval scores side by side: one offline HTML page (中文/English)':
        '把各次训练运行和它们的 lm-eval 分数并排放在一起：一个离线 HTML 页面（中文/English）',
    'language of the explanations, help and errors: zh (中文) or en; default follows the locale':
        '讲解、帮助和错误信息所用的语言：zh（中文）或 en；默认跟随系统的 locale',
    'no causal mask (a BERT-style encoder); also shows how the weights changed':
        '不加因果掩码（BERT 式的编码器）；同时展示权重如何变化',
    "use random X and weights instead of the seed's":
        '用随机的 X 和权重，而不是课程示例里的',
    'B, number of sequences (default 1)':
        'B，序列个数（默认 1）',
    'T, tokens per sequence (default 4)':
        'T，每个序列的 token 数（默认 4）',
    'C, numbers per token (default 8)':
        'C，每个 token 的数字个数（默认 8）',
    'd_k, width of queries/keys/values (default 4)':
        'd_k，查询/键/值的宽度（默认 4）',
    'random seed (default 0)':
        '随机种子（默认 0）',
    'X, shape (T, d_model) or (B, T, d_model)':
        'X，形状为 (T, d_model) 或 (B, T, d_model)',
    'Wq, shape (d_model, d_k)':
        'Wq，形状为 (d_model, d_k)',
    'Wk, shape (d_model, d_k)':
        'Wk，形状为 (d_model, d_k)',
    'Wv, shape (d_model, d_v)':
        'Wv，形状为 (d_model, d_v)',
    'precision of the computation (default float32, as in the course)':
        '计算精度（默认 float32，和课程一致）',
    'print every intermediate as one JSON object (at most 1,048,576 numbers: T up to 510 for B=1, d_k=4)':
        '把每个中间结果打印成一个 JSON 对象（最多 1,048,576 个数：B=1、d_k=4 时 T 最多 510）',
    'decimals to print (default 4)':
        '打印的小数位数（默认 4）',
    'B, sequences in the batch (default 2)':
        'B，一批里的序列数（默认 2）',
    'T, tokens per sequence (default 8)':
        'T，每个序列的 token 数（默认 8）',
    'C, numbers per token (default 64)':
        'C，每个 token 的数字个数（默认 64）',
    'nh, query heads (default 4)':
        'nh，查询头的个数（默认 4）',
    'nkv, key/value heads; must divide n_head (default: = n_head)':
        'nkv，键/值头的个数；必须整除 n_head（默认与 n_head 相同）',
    'E, routed experts per MoE layer (default 0: none)':
        'E，每个 MoE 层的路由专家数（默认 0：不用）',
    'k, experts per token (default 2)':
        'k，每个 token 选几个专家（默认 2）',
    'S, experts every token goes through (default 0)':
        'S，每个 token 都要经过的共享专家数（默认 0）',
    "H, each expert's width (default: as the dense MLP)":
        'H，每个专家的宽度（默认与稠密 MLP 相同）',
    'expert kind (default gelu)':
        '专家的类型（默认 gelu）',
    'renormalise the k gates (Mixtral)':
        '对 k 个门控值重新归一化（Mixtral 的做法）',
    'blocks, for the whole-model count (default 4)':
        '块数，用来算整个模型（默认 4）',
    'every m-th block is MoE (default 1: all)':
        '每隔 m 个块有一个 MoE 块（默认 1：全部都是）',
    'V, for the whole-model count (default 65)':
        'V，用来算整个模型（默认 65）',
    'the input text; each UTF-8 byte is one token':
        '输入的文本；每个 UTF-8 字节是一个 token',
    'random token ids instead of a text':
        '用随机的 token id 代替文本',
    'T, number of random tokens (with --random; default 16)':
        'T，随机 token 的个数（配合 --random；默认 16）',
    'where to write the picture':
        '图片写到哪里',
    "a model trained with 'zerollm train' instead of a random one (with --text, tokenized by the checkpoint's own tokenizer)":
        "用 'zerollm train' 训练出的模型代替随机模型（配合 --text 时，用检查点自己的分词器分词）",
    'layers of the random GPT (default 2)':
        '随机 GPT 的层数（默认 2）',
    'heads per layer of the random GPT (default 4)':
        '随机 GPT 每层的头数（默认 4）',
    "C, the random GPT's width (default 64)":
        'C，随机 GPT 的宽度（默认 64）',
    'seed of the random weights and random ids (default 0)':
        '随机权重和随机 id 的种子（默认 0）',
    'no causal mask (a BERT-style encoder); a checkpoint has its own mask':
        '不加因果掩码（BERT 式的编码器）；检查点有自己的掩码',
    'go on even when the memory estimate is more than the memory available, and replace an existing --out file':
        '内存估计超过可用内存时也继续运行，并替换已存在的 --out 文件',
    'a training run directory (its latest checkpoint) or a step directory; with --text the page shows what this model does with it':
        '一个训练运行目录（用它最新的检查点）或某一步的目录；配合 --text，页面会展示这个模型怎样处理这段文本',
    'a Hugging Face GPT-2/Llama directory instead of --ckpt':
        '一个 Hugging Face GPT-2/Llama 目录，代替 --ckpt',
    'the text the model reads (with --ckpt or --hf)':
        '模型要读的文本（配合 --ckpt 或 --hf）',
    'where to write the page':
        '页面写到哪里',
    'replace --out if it already exists':
        '如果 --out 已存在就替换它',
    'print the step-by-step walkthrough':
        '打印逐步的讲解',
    'q8_0, q4_0 or both (default)':
        'q8_0、q4_0 或两者都要（默认）',
    'rows of the example matrix (default 2)':
        '示例矩阵的行数（默认 2）',
    'columns, a multiple of 32 (default 64: two blocks a row)':
        '列数，必须是 32 的倍数（默认 64：每行两个块）',
    'random seed of the example (default 0)':
        '示例的随机种子（默认 0）',
    'random inputs seed (default 0)':
        '随机输入的种子（默认 0）',
    "Download a public corpus into the cache and print its path. Available: shakespeare: tiny Shakespeare, 1.1 MB of plays (Karpathy's char-rnn; public domain text). (The Tang poems corpus has no single public file, so it is not offered.)":
        '把公开语料下载到缓存并打印它的路径。可选：shakespeare：tiny Shakespeare，1.1 MB 的剧本（Karpathy 的 char-rnn；文本属于公有领域）。（唐诗语料没有单独一个公开文件，所以不提供下载。）',
    'the dataset':
        '数据集',
    'folder to save into (default $ZEROLLM_CACHE, else $XDG_CACHE_HOME/zerollm, else ~/.cache/zerollm)':
        '保存到哪个文件夹（默认 $ZEROLLM_CACHE，其次 $XDG_CACHE_HOME/zerollm，再次 ~/.cache/zerollm）',
    'download from this http(s) URL instead (e.g. a mirror); $ZEROLLM_MIRROR=BASE fetches the same file name from BASE, still checked':
        '改从这个 http(s) 地址下载（比如镜像）；设置 $ZEROLLM_MIRROR=BASE 会从 BASE 下载同名文件，照样校验',
    'expected sha256 of the file, 64 hex digits (checked automatically for the default URL)':
        '文件应有的 sha256，64 位十六进制数（默认地址会自动校验）',
    'download again even if a valid file is present, and replace a file of the same name in --dir that is not the expected download':
        '即使已有有效的文件也重新下载，并替换 --dir 里同名但不是预期下载内容的文件',
    'language of help and errors: zh (中文) or en; default: the locale':
        '帮助和错误信息所用的语言：zh（中文）或 en；默认跟随系统的 locale',
    'a UTF-8 text file':
        '一个 UTF-8 文本文件',
    'byte: 256 ids, no training; char: one id per distinct character; bpe: byte-level BPE, needs --vocab-size (default byte)':
        'byte：256 个 id，不用训练；char：每个不同的字符一个 id；bpe：字节级 BPE，需要 --vocab-size（默认 byte）',
    'BPE vocabulary size, e.g. 1024: from 257 (the 256 bytes and at least one merge) to 16777216':
        'BPE 词表大小，例如 1024：从 257（256 个字节再加至少一次合并）到 16777216',
    'BPE pre-split regex (default gpt4)':
        'BPE 预切分用的正则（默认 gpt4）',
    'output folder (default ./data/<FILE stem>-<tokenizer>, e.g. data/input-char)':
        '输出文件夹（默认 ./data/<FILE 的文件名>-<分词器>，例如 data/input-char）',
    'context length you will train with; each split needs N+1 tokens (default 64)':
        '训练时要用的上下文长度；每份数据至少需要 N+1 个 token（默认 64）',
    'the last F of the tokens become validation data (default 0.1)':
        '最后 F 比例的 token 作为验证数据（默认 0.1）',
    'go on even when the memory estimate is more than the memory available':
        '内存估计超过可用内存时也继续运行',
    "a UTF-8 text file (prepared on the fly into OUT/data), a folder from 'zerollm prepare', or a corpus that ships with zerollm: shakespeare, tang (default: the preset's corpus)":
        "一个 UTF-8 文本文件（临时分词到 OUT/data 里）、'zerollm prepare' 生成的文件夹，或 zerollm 自带的语料：shakespeare、tang（默认：预设对应的语料）",
    "run directory: log.jsonl, checkpoints, loss.png (default: runs/<preset or 'run'>)":
        "运行目录：log.jsonl、检查点、loss.png（默认：runs/<预设名或 'run'>）",
    "a named configuration; flags override it (default: shakespeare-cpu's values; each preset's values are listed at the end)":
        '一组有名字的配置；命令行参数会覆盖它（默认：shakespeare-cpu 的取值；每个预设的取值列在最后）',
    'continue from the last checkpoint in --out':
        '从 --out 里最后一个检查点继续训练',
    'print the model, the data and the memory estimate of a training step, then stop (nothing is written)':
        '打印模型、数据和一步训练的内存估计，然后停下（什么都不写）',
    "print every setting of the run (preset + flags, or the checkpoint's on --resume) and where each comes from, then stop (nothing is written)":
        '打印这次运行的每一项设置（预设 + 参数，--resume 时是检查点里的）以及各自的来源，然后停下（什么都不写）',
    'go on even when the memory estimate is more than the memory available, and replace files in --out (log.jsonl, loss.png, latest.json) that this command did not create':
        '内存估计超过可用内存时也继续运行，并替换 --out 里不是本命令创建的文件（log.jsonl、loss.png、latest.json）',
    'no progress bar (e.g. in logs)':
        '不显示进度条（比如写日志时）',
    "CPU threads for the matrix products (default: the library's own choice, usually one per core). For training, N > 1 splits every batch into N shards computed in parallel threads (faster than BLAS threads alone); resume with the same N for bit-identical losses.":
        '矩阵乘法用的 CPU 线程数（默认由数学库自己决定，通常每个核一个）。训练时 N > 1 会把每一批切成 N 份，在并行的线程里计算（比只靠 BLAS 的线程更快）；用同样的 N 续训，损失才会逐位相同。',
    '\'numpy\' (the readable reference) or \'fast\' (fused numba kernels, pip install "zerollm[fast]"); default: $ZEROLLM_ENGINE or numpy. Resume with the engine a run was trained with for bit-identical losses (the two engines round exp and long sums differently).':
        '\'numpy\'（可读的参考实现）或 \'fast\'（融合的 numba 内核，pip install "zerollm[fast]"）；默认：$ZEROLLM_ENGINE，否则 numpy。续训时用训练时的那个引擎，损失才会逐位相同（两个引擎对 exp 和长求和的舍入不同）。',
    'rank of the adapters; giving it turns LoRA on. LoRA wants a higher --lr than a full fine-tune (about 3x)':
        '适配器的秩；给出它就打开 LoRA。LoRA 需要比全量微调更高的 --lr（约 3 倍）',
    'scale alpha: the update is A B * alpha / r (default 2 r)':
        '缩放系数 alpha：更新量是 A B * alpha / r（默认 2 r）',
    "dropout on the adapters' input (default 0)":
        '适配器输入上的 dropout（默认 0）',
    "comma-separated modules to adapt, PEFT's names: all-linear, c_attn, c_proj, c_fc, q_proj, k_proj, v_proj, o_proj, gate_proj, up_proj, down_proj (default all-linear: every linear layer of attention and MLP)":
        '要加适配器的模块，用逗号分隔，名字同 PEFT：all-linear, c_attn, c_proj, c_fc, q_proj, k_proj, v_proj, o_proj, gate_proj, up_proj, down_proj（默认 all-linear：注意力和 MLP 里的每个线性层）',
    "comma-separated modules that train whole beside the adapters, as PEFT's modules_to_save: wte (the token table; tied, also the head), lm_head (an untied head) (default none)":
        '在适配器之外整体训练的模块，用逗号分隔，相当于 PEFT 的 modules_to_save：wte（词嵌入表；绑定时也就是输出头）、lm_head（未绑定的输出头）（默认不训练）',
    'emulated mixed precision: 16-bit matmul inputs (zerollm.engine.amp) (default off)':
        '模拟混合精度：矩阵乘法的输入用 16 位（zerollm.engine.amp）（默认关闭）',
    'a training run directory (its latest checkpoint) or a step directory':
        '一个训练运行目录（用它最新的检查点）或某一步的目录',
    'a Hugging Face model directory (config.json + *.safetensors)':
        '一个 Hugging Face 模型目录（config.json + *.safetensors）',
    'a GGUF file (GPT-2 or Llama; f32, f16, q8_0, q4_0, or llama.cpp\'s k-quant files such as Q4_K_M): quantized weights run as such with --engine fast':
        '一个 GGUF 文件（GPT-2 或 Llama；f32、f16、q8_0、q4_0，或 llama.cpp 的 k-quant 文件，如 Q4_K_M）：加 --engine fast 时量化权重直接参与计算',
    'a PEFT LoRA adapter directory to put on the model (zerollm.interop.peft)':
        '要加到模型上的 PEFT LoRA 适配器目录（zerollm.interop.peft）',
    "text to continue, or the user's turn of a chat model; '-' reads it from stdin (default: a newline)":
        "要续写的文本，或聊天模型里用户说的话；'-' 表示从标准输入读取（默认：一个换行）",
    "a chat model's system turn before the prompt (default: none)":
        '聊天模型在提示之前的系统消息（默认：没有）',
    "the most tokens generated per sample; a chat model's reply may end sooner, at its end-of-turn token (default 200)":
        '每个样本最多生成的 token 数；聊天模型的回复可能更早结束，停在它的回合结束 token 上（默认 200）',
    '0 = greedy (default 0.8)':
        '0 = 贪心（默认 0.8）',
    'sample only from the k most likely tokens (default: all)':
        '只从概率最高的 k 个 token 里采样（默认：全部）',
    'nucleus sampling: the smallest set with probability >= p (default: off)':
        '核采样：取概率之和 >= p 的最小集合（默认：关闭）',
    'keep only tokens at least this fraction as likely as the most likely one':
        '只保留概率至少是最大概率这么多倍的 token',
    'divide the logit of every id already in the text by this (1 = off; as transformers)':
        '已经出现在文本里的 id，其 logit 除以这个数（1 = 关闭；和 transformers 一样）',
    "subtract this from the logit of every id already generated (as OpenAI's)":
        '已经生成过的 id，其 logit 减去这个数（和 OpenAI 一样）',
    "subtract this times its count from the logit of every id generated (as OpenAI's)":
        '已经生成过的 id，其 logit 减去这个数乘以出现次数（和 OpenAI 一样）',
    'random seed (default: different every run)':
        '随机种子（默认：每次运行都不同）',
    'how many samples of the same prompt, one after another (default 1)':
        '同一个提示依次生成多少个样本（默认 1）',
    'sliding-window attention with a rolling KV cache of this many recent tokens (RoPE or sinusoidal positions only)':
        '滑动窗口注意力，滚动的 KV 缓存只保留最近这么多个 token（只适用于 RoPE 或正弦位置编码）',
    'with --window: the first N tokens stay visible (attention sinks) (default 0)':
        '配合 --window：最前面的 N 个 token 始终可见（注意力汇聚点）（默认 0）',
    "wrap the prompt in the chat template (a user turn, then the assistant's) and stop at the end of the assistant's turn (default: on when the tokenizer has the template, e.g. after 'zerollm sft')":
        "把提示套进聊天模板（用户一轮，然后是助手一轮），并在助手这一轮结束时停下（默认：分词器带模板时打开，例如 'zerollm sft' 之后）",
    "CPU threads for the matrix products (default: the library's own choice, usually one per core).":
        '矩阵乘法用的 CPU 线程数（默认由数学库自己决定，通常每个核一个）。',
    '\'numpy\' (the readable reference) or \'fast\' (fused numba kernels, pip install "zerollm[fast]"); default: $ZEROLLM_ENGINE or numpy.':
        '\'numpy\'（可读的参考实现）或 \'fast\'（融合的 numba 内核，pip install "zerollm[fast]"）；默认：$ZEROLLM_ENGINE，否则 numpy。',
    'the system message the conversation starts with':
        '对话开始时的系统消息',
    'no chat template: the turns are plain text the model continues (for a base model)':
        '不用聊天模板：各轮只是模型续写的纯文本（用于基础模型）',
    'longest answer (default 200; at most half the context)':
        '回答的最大长度（默认 200；最多为上下文的一半）',
    'address to bind (default 127.0.0.1: this machine only)':
        '绑定的地址（默认 127.0.0.1：只有本机能访问）',
    'port (default 8000; 0 = any free one)':
        '端口（默认 8000；0 = 任选一个空闲端口）',
    "require 'Authorization: Bearer KEY' on /v1 (default: $ZEROLLM_API_KEY, else none)":
        "访问 /v1 需要 'Authorization: Bearer KEY'（默认：$ZEROLLM_API_KEY，没有则不需要）",
    "the model's id in the API (default: the directory's name)":
        '模型在 API 里的 id（默认：目录名）',
    'rows in one forward pass (default 16)':
        '一次前向计算的行数（默认 16）',
    'requests that may wait while all --max-batch rows are busy; more get 429 (default 64; 0: none wait)':
        '所有 --max-batch 行都在忙时，最多可以排队等待的请求数；再多的会得到 429（默认 64；0：不排队）',
    'largest request body in bytes (default 1 MiB); larger ones get 413':
        '请求体的最大字节数（默认 1 MiB）；更大的会得到 413',
    'seconds a shutdown waits for running requests (default 5)':
        '关闭服务器时等待正在处理的请求的秒数（默认 5）',
    "seconds a client has to send a request's line and headers, from connecting or from its previous answer; later: 408 and the connection is closed (default 10)":
        '客户端从连接起（或从上一个回答起）发送请求行和请求头的时限，单位秒；超时：回 408 并关闭连接（默认 10）',
    "seconds a client has to send a request's whole body after its headers; later: 408 and the connection is closed (default 30)":
        '客户端在请求头之后发送整个请求体的时限，单位秒；超时：回 408 并关闭连接（默认 30）',
    'MiB of prompt keys and values kept so that later prompts beginning alike skip that part of their prefill (default 256; 0: off)':
        '保留多少 MiB 的提示键和值，让开头相同的后续提示跳过这部分预填充（默认 256；0：关闭）',
    'guess tokens by prompt lookup and check them in one forward: the same tokens at greedy, the same distribution when sampling (default off: it pays on repetitive text)':
        '用提示查找来猜 token，并在一次前向计算里检验：贪心时得到同样的 token，采样时得到同样的分布（默认关闭：它在重复性强的文本上才划算）',
    'tokens guessed per step with --speculate ngram (default 4)':
        '用 --speculate ngram 时每步猜的 token 数（默认 4）',
    'serve GET /metrics without the API key (default: it needs the key as /v1 does)':
        'GET /metrics 不需要 API 密钥（默认：和 /v1 一样需要密钥）',
    'a training run directory, a step directory or a zerollm model directory':
        '一个训练运行目录、某一步的目录或 zerollm 模型目录',
    'a GGUF file (GPT-2 or Llama; f32, f16, q8_0, q4_0, or llama.cpp\'s k-quant files such as Q4_K_M)':
        '一个 GGUF 文件（GPT-2 或 Llama；f32、f16、q8_0、q4_0，或 llama.cpp 的 k-quant 文件，如 Q4_K_M）',
    'evaluate only the first N tokens':
        '只评估前 N 个 token',
    'windows per forward pass (default 16)':
        '每次前向计算的窗口数（默认 16）',
    'a PEFT LoRA adapter directory to put on the model':
        '要加到模型上的 PEFT LoRA 适配器目录',
    'the tasks and what they are':
        '有哪些任务，各是什么',
    "write a task's examples as JSONL (or plain text)":
        '把一个任务的样例写成 JSONL（或纯文本）',
    'sample one completion per prompt and print the success rate':
        '每个提示采样一个补全，打印成功率',
    'start from a zerollm run or checkpoint directory':
        '从一个 zerollm 运行或检查点目录开始',
    'start from a Hugging Face model directory':
        '从一个 Hugging Face 模型目录开始',
    'a PEFT LoRA adapter directory to fold into the starting model first (zerollm.interop.peft)':
        '先把这个 PEFT LoRA 适配器目录合并进起始模型（zerollm.interop.peft）',
    'the JSONL file to train on':
        '用来训练的 JSONL 文件',
    'a heldout JSONL file evaluated every --eval-interval steps':
        '一个留出的 JSONL 文件，每隔 --eval-interval 步评估一次',
    'run directory (default runs/sft)':
        '运行目录（默认 runs/sft）',
    'load the starting model, print the memory estimate of a training step (counting LoRA and the frozen reference), then stop (nothing is written)':
        '加载起始模型，打印一步训练的内存估计（算上 LoRA 和冻结的参考模型），然后停下（什么都不写）',
    'go on even when the memory estimate is more than the memory available, and replace files in --out (tokenizer.json, log.jsonl, ...) that this command did not create':
        '内存估计超过可用内存时也继续运行，并替换 --out 里不是本命令创建的文件（tokenizer.json、log.jsonl 等）',
    "a task of 'zerollm tasks list': its success rate on --eval-data at each eval (default None)":
        "'zerollm tasks list' 里的一个任务：每次评估时在 --eval-data 上的成功率（默认 None）",
    'the first epoch from the shortest example to the longest (default False)':
        '第一个 epoch 从最短的样例排到最长的（默认 False）',
    'examples (and prompts) used at each eval':
        '每次评估用的样例（和提示）个数',
    'sampling temperature of the success rate (0 = greedy)':
        '成功率的采样温度（0 = 贪心）',
    'longest sampled completion (None: twice a typical one)':
        '采样补全的最大长度（None：典型补全长度的两倍）',
    'a Hugging Face model directory, or a zerollm model/run/checkpoint directory':
        '一个 Hugging Face 模型目录，或 zerollm 的模型/运行/检查点目录',
    'the directory to create (it must not exist, or be empty), or a .gguf file':
        '要创建的目录（必须不存在或为空），或一个 .gguf 文件',
    'with --to FILE.gguf: how the matrices are stored (default f32); norms and biases stay f32':
        '配合 --to FILE.gguf：矩阵的存储方式（默认 f32）；归一化层和偏置保持 f32',
    'replace the model in --to if it already holds one (its config.json, weights, tokenizer and adapter files; other files such as .git or README.md stay); a GGUF file only if it is a GGUF file':
        '如果 --to 里已有模型就替换它（它的 config.json、权重、分词器和适配器文件；.git、README.md 等其他文件保留）；GGUF 文件只在它确实是 GGUF 文件时替换',
    'convert the weights only, without the tokenizer':
        '只转换权重，不带分词器',
    'a LoRA training run (or step directory)':
        '一个 LoRA 训练运行（或某一步的目录）',
    'the run directory to create':
        '要创建的运行目录',
    'load even when the memory estimate says it will not fit':
        '即使内存估计说放不下也加载',
    'run directory (default runs/reward)':
        '运行目录（默认 runs/reward）',
    'bt = Bradley-Terry; margin = hinge (default bt)':
        'bt = Bradley-Terry；margin = 铰链损失（默认 bt）',
    "the hinge's margin (with bt, each pair's own 'margin' field is used)":
        "铰链损失的间隔（用 bt 时，每个偏好对用它自己的 'margin' 字段）",
    "a run or checkpoint of 'zerollm reward'":
        "'zerollm reward' 的一个运行或检查点",
    'preference pairs or prompt/completion lines (JSONL)':
        '偏好对，或 prompt/completion 行（JSONL）',
    'print the results as JSON':
        '把结果打印成 JSON',
    'run directory (default runs/dpo)':
        '运行目录（默认 runs/dpo）',
    'how far from the reference the policy may move: larger = closer':
        '策略可以离参考模型多远：越大越近',
    'sigmoid = DPO; ipo = IPO (default sigmoid)':
        'sigmoid = DPO；ipo = IPO（默认 sigmoid）',
    'run directory (default runs/ppo)':
        '运行目录（默认 runs/ppo）',
    'comma-separated reward sources: a task (acrostic, addition, calc, prefs) or module:function (default None)':
        '奖励来源，用逗号分隔：一个任务（acrostic、addition、calc、prefs）或 module:function（默认 None）',
    'comma-separated weights, one per source (--reward first, then --rm) (default None)':
        '权重，用逗号分隔，每个来源一个（先 --reward，再 --rm）（默认 None）',
    'a reward model directory (zerollm reward) (default None)':
        '一个奖励模型目录（zerollm reward）（默认 None）',
    'seconds a module:function reward may take per call (and to import); 0 = no limit':
        'module:function 奖励每次调用（以及导入）最多可用的秒数；0 = 不限',
    'prompts sampled for each rollout batch':
        '每个 rollout 批次采样的提示数',
    'longest answer, in tokens':
        '回答的最大长度，单位 token',
    'sampling temperature of the rollouts':
        'rollout 的采样温度',
    'sample rollouts from the k likeliest tokens only':
        'rollout 只从最可能的 k 个 token 里采样',
    'nucleus sampling for the rollouts':
        'rollout 的核采样',
    'passes over each rollout batch':
        '每个 rollout 批次要过几遍',
    'optimizer steps per pass':
        '每一遍的优化器步数',
    'clip range of the probability ratio':
        '概率比的裁剪范围',
    'a task whose verifier success is logged and evaluated (default: the --reward task, if any)':
        '记录并评估其验证器成功率的任务（默认：--reward 里的任务，如果有的话）',
    'heldout prompts answered at each evaluation':
        '每次评估时回答的留出提示数',
    '0 = greedy answers at evaluation':
        '0 = 评估时用贪心回答',
    'discount of future rewards':
        '未来奖励的折扣',
    "GAE's lambda":
        'GAE 的 lambda',
    'weight of the value loss':
        '价值损失的权重',
    'clip range of the value update':
        '价值更新的裁剪范围',
    'weight of the entropy bonus':
        '熵奖励的权重',
    'KL penalty to the reference inside the reward':
        '奖励里对参考模型的 KL 惩罚',
    'adapt kl_coef to keep the KL near this (None = fixed coefficient)':
        '自动调整 kl_coef，使 KL 保持在这个值附近（None = 固定系数）',
    "the adaptive controller's horizon, in answers":
        '自适应控制器的视野，单位是回答数',
    'run directory (default runs/grpo)':
        '运行目录（默认 runs/grpo）',
    "passes over each rollout batch (PPO epochs; GRPO's mu)":
        '每个 rollout 批次要过几遍（PPO 的 epochs；GRPO 的 mu）',
    'optimizer steps per pass over a rollout batch':
        '每过一遍 rollout 批次的优化器步数',
    'answers sampled per prompt (G)':
        '每个提示采样的回答数（G）',
    'weight of the k3 KL term to the reference (0 = none)':
        '对参考模型的 k3 KL 项的权重（0 = 不用）',
    'how token losses are averaged (as in TRL) (default grpo)':
        'token 损失怎样求平均（和 TRL 一样）（默认 grpo）',
    "divide advantages by the group's std (--no-scale-rewards: Dr. GRPO) (default True)":
        '用组内标准差去除优势（--no-scale-rewards：Dr. GRPO）（默认 True）',
    'training run directories, in pipeline order':
        '训练运行目录，按流水线的顺序',
    'lm-eval results_*.json files, or folders searched for them (lm_eval --output_path)':
        'lm-eval 的 results_*.json 文件，或在其中查找它们的文件夹（lm_eval --output_path）',
    'the .html file to write':
        '要写的 .html 文件',
    "the language it opens in (default en), and of this command's help and errors":
        '页面打开时的语言（默认 en），以及本命令的帮助和错误信息的语言',
    'replace --out if it exists':
        '如果 --out 已存在就替换它',
    'acrostic, addition, calc or prefs; or lm-eval: a folder of offline lm-evaluation-harness tasks (YAML + JSONL, heldout data only; zerollm.evaluate.taskfiles)':
        'acrostic、addition、calc 或 prefs；或者 lm-eval：一个离线的 lm-evaluation-harness 任务文件夹（YAML + JSONL，只用留出数据；zerollm.evaluate.taskfiles）',
    'the file to write (lm-eval: a folder)':
        '要写的文件（lm-eval：一个文件夹）',
    'number of examples':
        '样例的个数',
    'which examples (default train; lm-eval: heldout only)':
        '用哪部分样例（默认 train；lm-eval：只能用留出数据）',
    'jsonl: one example a line (SFT / prefs / prompts); text: one plain line per example, for pre-training a base model (default jsonl; lm-eval: YAML and JSONL, no choice)':
        'jsonl：每行一个样例（SFT / 偏好 / 提示）；text：每个样例一行纯文本，用于预训练基础模型（默认 jsonl；lm-eval：YAML 和 JSONL，不能选）',
    'calc: each example as a trace that calls the calculator tool and uses its result':
        'calc：每个样例写成一段调用计算器工具并使用其结果的过程',
    "addition, acrostic: a program's steps (carries, the heads) inside <think> before the answer":
        'addition、acrostic：在答案之前，把程序的步骤（进位、各句的首字）放在 <think> 里',
    'acrostic, addition or prefs':
        'acrostic、addition 或 prefs',
    'a training run, checkpoint step or zerollm model directory':
        '一个训练运行、检查点步目录或 zerollm 模型目录',
    "JSONL with a 'prompt' per line (e.g. from 'tasks make')":
        "每行有一个 'prompt' 的 JSONL（例如来自 'tasks make'）",
    'only the first N prompts':
        '只用前 N 个提示',
    'print a JSON object with the summary and every example':
        '打印一个 JSON 对象，含汇总和每个样例',
    'also write each prompt and its sampled answer as JSONL ({{"prompt", "completion"}}), e.g. for \'zerollm score --rm DIR --data FILE\'':
        '同时把每个提示和采样出的回答写成 JSONL（{{"prompt", "completion"}}），例如给 \'zerollm score --rm DIR --data FILE\' 用',
    'replace --answers if it already exists':
        '如果 --answers 已存在就替换它',
    "0 = greedy (default 1.0: the model's own distribution)":
        '0 = 贪心（默认 1.0：模型本身的分布）',
    'default: twice the tokens of a typical completion, plus one':
        '默认：典型补全 token 数的两倍，再加一',
    'chat template or a plain prompt for a base model (default: chat when the tokenizer has it)':
        '聊天模板，或给基础模型用的纯提示（默认：分词器带模板时用聊天模板）',
    "let answers call tools: 'calculator' (built in) or a .py module of your own TOOLS (the calculator comes too); tool responses are never learned (default None)":
        "让回答调用工具：'calculator'（内置），或你自己写了 TOOLS 的 .py 模块（计算器也会一起提供）；工具的返回内容从不参与学习（默认 None）",
    'tool calls run per answer, for prompts that list tools (a model trained with tools)':
        '每个回答最多运行的工具调用次数，用于列出了工具的提示（用工具训练过的模型）',
    'a .py module of your own TOOLS beside the built-in calculator (zerollm.align.tools)':
        '内置计算器之外，你自己写了 TOOLS 的 .py 模块（zerollm.align.tools）',
    'seconds one call of your tools (and their import) may take; 0 = no limit':
        '你的工具每次调用（以及导入）最多可用的秒数；0 = 不限',
}
