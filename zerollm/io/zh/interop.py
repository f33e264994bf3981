"""中文 of the interop room's error messages (see zerollm/io/zh/__init__.py)."""

ZH = {
    "GGUF files need the gguf package: pip install \"zerollm[gguf]\"":
        "读写 GGUF 文件需要 gguf 包：pip install \"zerollm[gguf]\"",
    "this model cannot be written as GGUF, for {0} reasons: {1}":
        "这个模型不能写成 GGUF，原因有 {0} 个：{1}",
    "{0}: a GGUF file's name ends in .gguf; give --to FILE.gguf":
        "{0}: GGUF 文件名以 .gguf 结尾；请给 --to FILE.gguf",
    "{0} is a directory; give a file path ending in .gguf":
        "{0} 是一个目录；请给一个以 .gguf 结尾的文件路径",
    "{0} exists; choose a new file name, or replace it with --overwrite":
        "{0} 已经存在；换一个新文件名，或者用 --overwrite 替换它",
    "{0} exists and is not a GGUF file, so it is never overwritten; choose a new file name":
        "{0} 已经存在，而且不是 GGUF 文件，所以绝不会被覆盖；请换一个新文件名",
    "--quant must be one of {0}, got {1}":
        "--quant 必须是 {0} 之一，收到的是 {1}",
    "GGUF file not found: {0}":
        "找不到 GGUF 文件：{0}",
    "{0} is not a GGUF file but a {1}; give the path of a .gguf file":
        "{0} 不是 GGUF 文件，而是 {1}；请给出一个 .gguf 文件的路径",
    "{0} is not a readable GGUF file ({1}: {2}); it may be truncated or damaged: write or download it again":
        "{0} 不是可读的 GGUF 文件（{1}: {2}）；它可能被截断或损坏了：请重新写出或重新下载",
    "{0}: tensor {1} is of type {2}; zerollm reads F32, F16, Q8_0 and Q4_0 (requantize the file, e.g. llama.cpp's llama-quantize ... Q8_0)":
        "{0}: 张量 {1} 的类型是 {2}；zerollm 只读 F32、F16、Q8_0 和 Q4_0（请重新量化这个文件，例如用 llama.cpp 的 llama-quantize ... Q8_0）",
    "{0} is not a readable GGUF file ({1}); it may be truncated or damaged: write or download it again":
        "{0} 不是可读的 GGUF 文件（{1}）；它可能被截断或损坏了：请重新写出或重新下载",
    "{0}: metadata key general.alignment must be stored as a uint32 (GGUF value type {1}), not as type {2}; the file is damaged":
        "{0}: 元数据键 general.alignment 必须以 uint32（GGUF 值类型 {1}）存储，而不是类型 {2}；文件已损坏",
    "{0}: tensor {1} starts at offset {2}, not a multiple of the file's alignment {3} (general.alignment); the file is damaged":
        "{0}: 张量 {1} 的起点在偏移 {2}，不是文件对齐值 {3}（general.alignment）的倍数；文件已损坏",
    "{0}: tensor {1} starts at byte {2}, past the end of the file ({3} bytes); it may be truncated: write or download it again":
        "{0}: 张量 {1} 从第 {2} 字节开始，超出了文件末尾（文件只有 {3} 字节）；它可能被截断了：请重新写出或重新下载",
    "{0} has no token_embd.weight tensor; the file is incomplete":
        "{0} 里没有 token_embd.weight 张量；文件不完整",
    "{0}: the metadata says {1}.vocab_size={2} but token_embd.weight has {3} rows; the metadata disagrees with the tensors":
        "{0}: 元数据说 {1}.vocab_size={2}，但 token_embd.weight 有 {3} 行；元数据和张量对不上",
    "{0}: metadata key llama.expert_used_count ({1}) is more than llama.expert_count ({2}); the file is damaged":
        "{0}: 元数据键 llama.expert_used_count（{1}）比 llama.expert_count（{2}）还大；文件已损坏",
    "{0}: metadata key {1} ({2}) must be a multiple of {3} ({4}); the file is damaged":
        "{0}: 元数据键 {1}（{2}）必须是 {3}（{4}）的倍数；文件已损坏",
    "{0}: tensor {1} has no place in the {2} models zerollm runs (the file is of another architecture, or uses a feature such as RoPE scaling)":
        "{0}: 张量 {1} 在 zerollm 运行的 {2} 模型里没有对应的位置（这个文件属于另一种架构，或者用了 RoPE 缩放之类的特性）",
    "{0}: the tensors do not fit the file's metadata ({1}): missing {2}, unexpected {3}; the file is damaged, or was written for another model":
        "{0}: 张量和文件的元数据（{1}）对不上：缺少 {2}，多出 {3}；文件已损坏，或者是为另一个模型写的",
    "{0}: the tensors do not fit the file's metadata ({1}): {2} (NumPy order); the file is damaged or inconsistent":
        "{0}: 张量和文件的元数据（{1}）对不上：{2}（NumPy 顺序）；文件已损坏或前后矛盾",
    "{0}: the tensors do not fit the metadata ({1}); the file is damaged or inconsistent":
        "{0}: 张量和元数据（{1}）对不上；文件已损坏或前后矛盾",
    "{0} has no tokenizer (it was written with --no-tokenizer), so text cannot be encoded; convert the model again with its tokenizer":
        "{0} 里没有分词器（它是用 --no-tokenizer 写出的），所以无法编码文本；请连同分词器重新转换这个模型",
    "{0}: the metadata lacks {1}, which a {2} model needs; the file is incomplete":
        "{0}: 元数据里缺少 {1}，而 {2} 模型需要它；文件不完整",
    "{0}: metadata key {1} must be {2}, but item {3} is {4}; the file is damaged":
        "{0}: 元数据键 {1} 必须是 {2}，但其中下标为 {3} 的一项是 {4}；文件已损坏",
    "{0}: metadata key {1} must be {2}, got {3}; the file is damaged":
        "{0}: 元数据键 {1} 必须是 {2}，收到的是 {3}；文件已损坏",
    "{0}: tokenizer.ggml.model is {1}; zerollm reads only byte-level BPE ('gpt2', as GPT-2 and Llama 3 files have), not SentencePiece or other kinds":
        "{0}: tokenizer.ggml.model 是 {1}；zerollm 只读字节级 BPE（'gpt2'，GPT-2 和 Llama 3 的文件就是这种），不读 SentencePiece 或其他类型",
    "{0}: tokenizer.ggml.tokens / token_type are missing or of different lengths":
        "{0}: tokenizer.ggml.tokens / token_type 缺失，或者两者长度不同",
    "{0}: metadata key tokenizer.ggml.tokens lists {1} tokens but the model has {2} token rows (token_embd.weight); the file is damaged":
        "{0}: 元数据键 tokenizer.ggml.tokens 列出了 {1} 个 token，但模型只有 {2} 行 token（token_embd.weight）；文件已损坏",
    "{0}: metadata key {1} is {2}, past the {3} tokens of tokenizer.ggml.tokens; the file is damaged":
        "{0}: 元数据键 {1} 是 {2}，超出了 tokenizer.ggml.tokens 的 {3} 个 token；文件已损坏",
    "{0}: a merge in tokenizer.ggml.merges is not two tokens separated by one space":
        "{0}: tokenizer.ggml.merges 里有一条合并规则不是用一个空格隔开的两个 token",
    "{0}: tokenizer.ggml.pre {1} is a split regex zerollm does not know; it reads {2}":
        "{0}: tokenizer.ggml.pre {1} 是 zerollm 不认识的预切分正则；它认识 {2}",
    "{0}: \"architectures\" must be a list of class names, got {1}":
        "{0}: \"architectures\" 必须是类名的列表，收到的是 {1}",
    "{0}: architecture {1} is not supported; zerollm loads {2}":
        "{0}: 不支持架构 {1}；zerollm 能加载 {2}",
    "{0} must hold a JSON object":
        "{0} 里必须是一个 JSON 对象",
    "{0} lacks {1}, which a {2} config needs; the file is incomplete":
        "{0} 缺少 {1}，而 {2} 的配置需要它；文件不完整",
    "{0} has a value of the wrong type or size ({1}); the file is damaged":
        "{0} 里有一个值的类型或大小不对（{1}）；文件已损坏",
    "{0} has a value of the wrong type ({1}); the file is damaged":
        "{0} 里有一个值的类型不对（{1}）；文件已损坏",
    "transformers has no model that computes this config: {0}. Train with one of those layouts to export it":
        "transformers 里没有能计算这个配置的模型：{0}。请用其中一种布局训练，才能导出它",
    "{0} is a file; choose a directory path for the model":
        "{0} 是一个文件；请给模型选一个目录路径",
    "{0} exists and is not empty; choose a new directory, or replace the model in it with {1}":
        "{0} 已经存在且不是空的；换一个新目录，或者用 {1} 替换里面的模型",
    "{0} is not a model directory (no config.json), so it is not overwritten; choose a new directory":
        "{0} 不是模型目录（没有 config.json），所以不会覆盖它；请换一个新目录",
    "{0} is {1} ({2}), so it is never overwritten; choose a new directory":
        "{0} 是 {1}（{2}），所以绝不会被覆盖；请换一个新目录",
    "the tokenizer has {0} tokens but the model only {1}; export with the tokenizer the model was trained with":
        "分词器有 {0} 个 token，而模型只有 {1} 个；请用训练这个模型时的分词器导出",
    "export needs a zerollm GPT, got {0}":
        "导出需要一个 zerollm 的 GPT，收到的是 {0}",
    "dtype must be one of {0}, got {1}":
        "dtype 必须是 {0} 之一，收到的是 {1}",
    "{0} is a zerollm directory ({1}), not a Hugging Face one; give it as --ckpt DIR on the command line (in Python: zerollm.interop.opening.open_model(Source(ckpt=DIR)))":
        "{0} 是 zerollm 的目录（{1}），不是 Hugging Face 的目录；在命令行上请用 --ckpt DIR 给出它（在 Python 里：zerollm.interop.opening.open_model(Source(ckpt=DIR))）",
    "{0}: the weights do not fit config.json: missing {1}, unexpected {2}; are config.json and the weights from one model?":
        "{0}: 权重和 config.json 对不上：缺少 {1}，多出 {2}；config.json 和权重来自同一个模型吗？",
    "{0} has no 'weight_map'; the download is damaged, fetch it again":
        "{0} 里没有 'weight_map'；下载的文件已损坏，请重新获取",
    "{0} names shard files outside its directory: {1}; refusing":
        "{0} 指向了它所在目录之外的分片文件：{1}；拒绝读取",
    "{0} lacks the shard files {1}; download all of them":
        "{0} 缺少分片文件 {1}；请把它们全部下载下来",
    "{0} has only PyTorch pickle weights ({1}); zerollm reads safetensors only, because loading a pickle can run arbitrary code. If you trust the file, convert it once in Python with transformers (d = the directory): {2}; or download the repository's *.safetensors files instead":
        "{0} 里只有 PyTorch pickle 格式的权重（{1}）；zerollm 只读 safetensors，因为加载 pickle 可能执行任意代码。如果你信任这个文件，可以在 Python 里用 transformers 转换一次（d 是这个目录）：{2}；或者改为下载仓库里的 *.safetensors 文件",
    "{0} has no model.safetensors or model.safetensors.index.json; download the model's *.json and *.safetensors files into it":
        "{0} 里既没有 model.safetensors，也没有 model.safetensors.index.json；请把模型的 *.json 和 *.safetensors 文件下载到这里",
    "{0}: tensor {1} is {2}; quantized checkpoints are not supported, use an F32, F16 or BF16 one":
        "{0}: 张量 {1} 的类型是 {2}；不支持量化过的检查点，请用 F32、F16 或 BF16 的",
    "{0}: tensor {1} is stored twice; the shards are inconsistent":
        "{0}: 张量 {1} 存了两次；各个分片互相矛盾",
    "give --ckpt DIR (a zerollm training run), --hf DIR (a Hugging Face model) or --gguf FILE (a GGUF file)":
        "请给出 --ckpt DIR（zerollm 训练运行目录）、--hf DIR（Hugging Face 模型）或 --gguf FILE（GGUF 文件）",
    "give one model, not {0}":
        "只能给一个模型，不能同时给 {0}",
    "--adapter goes on --ckpt or --hf models, not on a GGUF file; convert the model with its adapters merged (zerollm merge) instead":
        "--adapter 只能加在 --ckpt 或 --hf 模型上，不能加在 GGUF 文件上；请改为转换已合并适配器的模型（zerollm merge）",
    "{0} holds LoRA adapters for the base {1}, which is gone; put it back (or merge the adapters with `zerollm merge` while it is there)":
        "{0} 里是基座 {1} 的 LoRA 适配器，而这个基座已经不在了；请把它放回去（或者趁它还在时用 `zerollm merge` 合并适配器）",
    "save_zerollm needs a zerollm GPT, got {0}":
        "save_zerollm 需要一个 zerollm 的 GPT，收到的是 {0}",
    "the {0} layout has no PEFT module for the adapter on {1}; train the GPT-2 layout with --lora-targets c_attn,c_proj,c_fc":
        "{0} 布局里没有可以放 {1} 上那个适配器的 PEFT 模块；请用 GPT-2 布局加 --lora-targets c_attn,c_proj,c_fc 训练",
    "--adapter {0}: no {1}; give a PEFT LoRA adapter directory (what PeftModel.save_pretrained writes)":
        "--adapter {0}: 没有 {1}；请给出一个 PEFT LoRA 适配器目录（PeftModel.save_pretrained 写出的那种）",
    "{0}: peft_type is {1}; zerollm reads LoRA adapters only":
        "{0}: peft_type 是 {1}；zerollm 只读 LoRA 适配器",
    "{0}: PEFT options zerollm does not implement: {1}; train the adapter without them":
        "{0}: 用了 zerollm 没有实现的 PEFT 选项：{1}；训练适配器时请不要用它们",
    "{0}: {1} must be {2}, got {3}; {4}":
        "{0}: {1} 必须是 {2}，收到的是 {3}；{4}",
    "{0}: r must be {1}, got {2}; {3}":
        "{0}: r 必须是 {1}，收到的是 {2}；{3}",
    "{0}: lora_alpha must be a number > 0, got {1}; {2}":
        "{0}: lora_alpha 必须是 > 0 的数，收到的是 {1}；{2}",
    "{0}: lora_dropout must be in [0, 1), got {1}; {2}":
        "{0}: lora_dropout 必须在 [0, 1) 之内，收到的是 {1}；{2}",
    "--adapter {0}: no {1} (zerollm reads safetensors adapters only)":
        "--adapter {0}: 没有 {1}（zerollm 只读 safetensors 格式的适配器）",
    "--adapter {0} was made for another base model (its base digest differs); use the model it was trained on":
        "--adapter {0} 是为另一个基座模型做的（它记录的基座摘要不同）；请用训练它时的那个模型",
    "--adapter {0} adapts modules this model does not have ({1}); it was made for another base model":
        "--adapter {0} 要改的模块这个模型里没有（{1}）；它是为另一个基座模型做的",
    "--adapter {0}: {1} has shapes {2}, {3} but this model needs {4}, {5} (r={6} in {7}); it was made for another base model, or {8} does not belong to {9}":
        "--adapter {0}: {1} 的形状是 {2}、{3}，但这个模型需要 {4}、{5}（{7} 里 r={6}）；它是为另一个基座模型做的，或者 {8} 和 {9} 不是一套的",
    "{0}: modules_to_save must be a list of module names, got {1}; {2}":
        "{0}: modules_to_save 必须是模块名的列表，收到的是 {1}；{2}",
    "{0}: modules_to_save names {1}; zerollm trains only the token table (wte, embed_tokens) and lm_head whole: train the adapter without the others":
        "{0}: modules_to_save 里有 {1}；zerollm 只能整张训练词表（wte、embed_tokens）和 lm_head：训练适配器时请不要加其他模块",
    "{0}: modules_to_save lists {1} but the adapter holds no weights for it; the adapter is damaged":
        "{0}: modules_to_save 列出了 {1}，但适配器里没有它的权重；适配器已损坏",
    "{0}: this model ties lm_head to the token table (one array), but the adapter trains them apart; use a base with an untied head, or train the adapter with modules_to_save holding the same table as the token table and lm_head":
        "{0}: 这个模型的 lm_head 与词表共享权重（同一个数组），而适配器把两者分开训练了；请换一个输出头不共享权重的基座，或者训练适配器时让 modules_to_save 为词表和 lm_head 存同一张表",
    "{0}: its {1} is {2}, but this model's is {3} (one table); it was made for another base model":
        "{0}: 它的 {1} 形状是 {2}，而这个模型的是 {3}（同一张表）；它是为另一个基座模型做的",
    "{0}: unexpected tensor {1} (only lora_A / lora_B weights are supported)":
        "{0}: 意外的张量 {1}（只支持 lora_A / lora_B 权重）",
    "{0} holds no lora_A / lora_B weights; the adapter is damaged":
        "{0} 里没有 lora_A / lora_B 权重；适配器已损坏",
    "{0}: {1} has only one of lora_A / lora_B; the adapter is damaged":
        "{0}: {1} 只有 lora_A / lora_B 中的一个；适配器已损坏",
    "a row must hold a multiple of {0} numbers to be quantized, got shape {1}":
        "每一行的数的个数必须是 {0} 的倍数才能量化，收到的形状是 {1}",
    "{0} data must be whole {1}-byte blocks a row, got {2} bytes":
        "{0} 数据每一行必须由完整的 {1} 字节块组成，收到的是 {2} 字节",
    "{0} data holds {1} numbers, not the {2} of shape {3}":
        "{0} 数据里有 {1} 个数，而不是形状 {3} 需要的 {2} 个",
    "unknown quantization {0}; zerollm writes and reads {1}":
        "未知的量化方式 {0}；zerollm 能写也能读的是 {1}",
    "{0}: model_type {1} is not supported; zerollm loads model types {2} (GPT-2, Llama, Qwen and Mixtral-style models)":
        "{0}: 不支持 model_type {1}；zerollm 能加载的模型类型是 {2}（GPT-2、Llama、Qwen 和 Mixtral 式的模型）",
    "{0}: zerollm cannot run this model because of {1}; only plain GPT-2, Llama, Qwen2, Qwen3 and Mixtral architectures are implemented":
        "{0}: zerollm 无法运行这个模型，原因是 {1}；zerollm 只实现了普通的 GPT-2、Llama、Qwen2、Qwen3 和 Mixtral 架构",
    "{0}: tensor {1} has shape {2} but config.json makes it {3}; are config.json and the weights from one model?":
        "{0}: 张量 {1} 的形状是 {2}，但按 config.json 应该是 {3}；config.json 和权重来自同一个模型吗？",

    # Pieces of messages built elsewhere: each reason gguf_problems() gives (check_gguf raises the only one as it
    # is), and Opened.need_tokenizer's default line (its other form is a reader's own message).
    "GGUF's gpt2 architecture computes the tanh GELU, but this model uses gelu='erf'; train with --gelu tanh to export it as GGUF":
        "GGUF 的 gpt2 架构计算的是 tanh 形式的 GELU，而这个模型用的是 gelu='erf'；要导出成 GGUF，请用 --gelu tanh 训练",
    "GGUF's llama architecture has no biases, but this model has bias=True; train the Llama layout with bias off (--no-bias) to export it as GGUF":
        "GGUF 的 llama 架构没有偏置，而这个模型是 bias=True；要导出成 GGUF，请关掉偏置（--no-bias）训练 Llama 布局",
    "the BPE tokenizer splits text with a custom regex that GGUF readers do not know; train it with --pattern gpt2 or gpt4":
        "这个 BPE 分词器用自定义的正则切分文本，读 GGUF 的程序不认识它；请用 --pattern gpt2 或 gpt4 训练分词器",
    "{0} has no tokenizer.json, so text cannot be encoded; open the run or model directory that was saved with its tokenizer":
        "{0} 里没有 tokenizer.json，所以无法编码文本；请打开保存时带着分词器的运行目录或模型目录",
    # issue 57 item 7: each thing _check_replaceable (interop/hf/exporting.py) finds, as a whole message, so
    # that it wins over "{0} is {1} ({2}), ..."; the fix interop/peft.py adds; the Want.what of
    # interop/gguf_meta.py
    "{0} is a training checkpoint ({1}), so it is never overwritten; choose a new directory":
        "{0} 是一个训练检查点（{1}），所以绝不会被覆盖；请换一个新目录",
    "{0} is not a model directory ({1}), so it is never overwritten; choose a new directory":
        "{0} 不是模型目录（{1}），所以绝不会被覆盖；请换一个新目录",
    "write the value PeftModel.save_pretrained wrote, or save the adapter again":
        "请写上 PeftModel.save_pretrained 写出的值，或者重新保存适配器",
    "a text":
        "文本",
    "a list of texts":
        "文本列表",
    "a list of token types (whole numbers from 0 to 6)":
        "token 类型的列表（0 到 6 之间的整数）",
    "a power of two from 1 to 2097152":
        "1 到 2097152 之间的 2 的幂",
    # the two of lora_settings (interop/peft.py) that a shorter template without the fix would otherwise take
    "{0}: r must be a whole number >= 1, got {1}; {2}":
        "{0}: r 必须是 >= 1 的整数，收到的是 {1}；{2}",
    "{0}: {1} must be a number, got {2}; {3}":
        "{0}: {1} 必须是一个数，收到的是 {2}；{3}",
    # check_gguf (interop/gguf.py) with 2 to 4 problems: each count written out, so that each numbered problem
    # is a value of its own and comes out in 中文 (a problem whose template is known) rather than one English list
    "this model cannot be written as GGUF, for 2 reasons: (1) {0}; (2) {1}":
        "这个模型不能写成 GGUF，原因有 2 个：（1）{0}；（2）{1}",
    "this model cannot be written as GGUF, for 3 reasons: (1) {0}; (2) {1}; (3) {2}":
        "这个模型不能写成 GGUF，原因有 3 个：（1）{0}；（2）{1}；（3）{2}",
    "this model cannot be written as GGUF, for 4 reasons: (1) {0}; (2) {1}; (3) {2}; (4) {3}":
        "这个模型不能写成 GGUF，原因有 4 个：（1）{0}；（2）{1}；（3）{2}；（4）{3}",
}
