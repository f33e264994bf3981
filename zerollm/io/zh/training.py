"""中文 of the training room's messages: its error templates (scripts/zh_catalog.py --room training); the pieces flags.saved_lora puts into its message.

Keys are templates: {0}, {1}, ... stand for the values filled in, in the order of the English.
"""

ZH = {
    '{0} is a file, not a run directory; choose another --out':
        '{0} 是一个文件，不是运行目录；请换一个 --out',
    'checkpoint {0} must be an int >= {1}, got {2}':
        '检查点 {0} 必须是 >= {1} 的整数，实际是 {2}',
    "extra state must not contain 'step'; the checkpoint stores the step itself":
        "额外状态里不能有 'step'；检查点自己会保存步数",
    "optimizer_state must be a dict with 'm' and 'v' (use AdamW.state_dict())":
        "optimizer_state 必须是带 'm' 和 'v' 的字典（用 AdamW.state_dict()）",
    'optimizer state holds a value JSON cannot store ({0})':
        '优化器状态里有一个 JSON 存不了的值（{0}）',
    'tokenizer file not found: {0}; pass the tokenizer.json that `zerollm prepare` wrote next to the data':
        '找不到分词器文件：{0}；请传入 `zerollm prepare` 在数据旁边写的 tokenizer.json',
    'no checkpoint in {0}; {1}':
        '{0} 里没有检查点；{1}',
    '{0} is a Hugging Face model directory, not a zerollm run or checkpoint: load it with --hf {1} (sample, chat, serve, sft and the other stages have it), or make a zerollm model directory of it with `zerollm convert --from {2} --to DIR`':
        '{0} 是 Hugging Face 模型目录，不是 zerollm 的运行或检查点：请用 --hf {1} 加载它（sample、chat、serve、sft 和其他训练阶段都有这个参数），或用 `zerollm convert --from {2} --to DIR` 把它转成 zerollm 模型目录',
    'checkpoint {0} is incomplete (missing {1}); load the run directory instead to use its last complete checkpoint':
        '检查点 {0} 不完整（缺少 {1}）；请改为加载运行目录，使用其中最后一个完整的检查点',
    "{0} is damaged: {1}; restore the file from a copy, or remove {2} and load its run directory to use the run's previous checkpoint":
        '{0} 已损坏：{1}；请从备份恢复这个文件，或删掉 {2} 再加载它的运行目录，使用这次运行的上一个检查点',
    '{0} is not a zerollm checkpoint config (it has no "format": "{1}"); point at a run directory, checkpoint or model directory that zerollm wrote':
        '{0} 不是 zerollm 的检查点配置（里面没有 "format": "{1}"）；请指向 zerollm 写的运行目录、检查点或模型目录',
    '{0}: checkpoint version {1} is not supported (this zerollm reads version {2}); upgrade zerollm':
        '{0}：不支持检查点版本 {1}（这个 zerollm 读的是版本 {2}）；请升级 zerollm',
    '{0}: "{1}" must be a JSON object, got {2}; {3}':
        '{0}："{1}" 必须是 JSON 对象，实际是 {2}；{3}',
    '{0}: "tokenizer" must be a name or null, got {1}; {2}':
        '{0}："tokenizer" 必须是一个名字或 null，实际是 {1}；{2}',
    '{0}: "objective" must be a JSON object, got {1}; {2}':
        '{0}："objective" 必须是 JSON 对象，实际是 {1}；{2}',
    '{0} has no zerollm optimizer metadata; it was not written by save_checkpoint':
        '{0} 没有 zerollm 优化器的元数据；它不是 save_checkpoint 写的',
    '{0}: unexpected tensor {1}; optimizer tensors are m.* and v.*':
        '{0}：意外的张量 {1}；优化器的张量是 m.* 和 v.*',
    '{0}: the second moments of {1} are negative (a mean of squares never is); {2}':
        '{0}：{1} 的二阶矩是负的（平方的均值不可能为负）；{2}',
    'ZEROLLM_MPI_WAIT={0} is not a way to wait; use one of: {1}':
        'ZEROLLM_MPI_WAIT={0} 不是一种等待方式；请用其中之一：{1}',
    'ranks {0} started with other {1} than rank 0; start every rank with the same command, data and files (mpirun -n N zerollm ...)':
        '第 {0} 号进程（rank）启动时的 {1} 与 0 号不同；请让每个进程用同样的命令、数据和文件启动（mpirun -n N zerollm ...）',
    'started by mpirun, but mpi4py is not installed: pip install "zerollm[mpi]" (mpi4py and the mpich wheel, which also brings mpirun)':
        '由 mpirun 启动，但没有安装 mpi4py：pip install "zerollm[mpi]"（mpi4py 和 mpich 的 wheel，它也带来 mpirun）',
    'ranks {0} have another {1} than rank 0 ({2}); start every rank with the same command and run directory':
        '第 {0} 号进程（rank）的 {1} 与 0 号不同（{2}）；请让每个进程用同样的命令和运行目录启动',
    '{0} {1} does not split over {2} ranks; use a multiple of {3} (e.g. {4} or {5}) or mpirun -n with a divisor of {6}':
        '{0} {1} 不能平均分给 {2} 个进程；请用 {3} 的倍数（例如 {4} 或 {5}），或用能整除 {6} 的 mpirun -n',
    '{0} needs --lora-r R (the rank) to turn LoRA on':
        '{0} 需要 --lora-r R（秩）才能打开 LoRA',
    '{0} need --lora-r R (the rank) to turn LoRA on':
        '{0} 需要 --lora-r R（秩）才能打开 LoRA',
    '{0} was trained {1}; resume it without --lora-* flags':
        '{0} 训练时{1}；续训时不要加 --lora-* 参数',
    '{0}: model format version {1} is not supported (this zerollm reads version {2}); upgrade zerollm':
        '{0}：不支持模型格式版本 {1}（这个 zerollm 读的是版本 {2}）；请升级 zerollm',
    '{0} has no "model" config; the directory is damaged, convert it again':
        '{0} 里没有 "model" 配置；目录已损坏，请重新转换',
    '{0} holds LoRA adapters, not the base model; open it with zerollm.interop.opening.open_model (it finds the base), or fold them in with `zerollm merge`':
        '{0} 里是 LoRA 适配器，不是基础模型；请用 zerollm.interop.opening.open_model 打开它（它会找到基础模型），或用 `zerollm merge` 把适配器合并进去',
    '{0} is a {1} tokenizer, but {2} says this model was trained with a {3} tokenizer; {4}':
        '{0} 是 {1} 分词器，但 {2} 说这个模型是用 {3} 分词器训练的；{4}',
    '{0} has {1} tokens, but the model has only {2} (vocab_size in {3}); {4}':
        '{0} 有 {1} 个 token，但模型只有 {2} 个（{3} 里的 vocab_size）；{4}',
    "{0}: its adapters were trained on another base model (the base's weights digest differs); put back the model the run started from":
        '{0}：它的适配器是在另一个基础模型上训练的（基础模型的权重摘要不同）；请放回这次运行开始时的那个模型',
    '{0}: model.safetensors lacks {1}; the checkpoint is damaged: load the run directory to use the one before it, or train again':
        '{0}：model.safetensors 缺少 {1}；检查点已损坏：请加载运行目录以使用前一个检查点，或重新训练',
    'AdamW {0} must be a number >= 0, got {1}':
        'AdamW 的 {0} 必须是 >= 0 的数，实际是 {1}',
    "optimizer state lacks {0}; it was not saved by zerollm's AdamW":
        '优化器状态缺少 {0}；它不是 zerollm 的 AdamW 保存的',
    'optimizer state step must be an int >= 0, got {0}':
        '优化器状态的 step 必须是 >= 0 的整数，实际是 {0}',
    'optimizer state decays unknown parameters {0}':
        '优化器状态要对未知的参数 {0} 做权重衰减',
    'AdamW needs a non-empty dict of name -> parameter array':
        'AdamW 需要一个非空的 名字 -> 参数数组 字典',
    'parameter {0} must be a float NumPy array, got {1}':
        '参数 {0} 必须是浮点型 NumPy 数组，实际是 {1}',
    'parameter {0} is read-only (e.g. loaded with mmap=True); load the weights with mmap=False to train them':
        '参数 {0} 是只读的（例如用 mmap=True 加载的）；要训练它，请用 mmap=False 加载权重',
    'AdamW betas must be two numbers, got {0}':
        'AdamW 的 betas 必须是两个数，实际是 {0}',
    'AdamW betas must be in [0, 1), got {0} (typical: 0.9, 0.95)':
        'AdamW 的 betas 必须在 [0, 1) 之内，实际是 {0}（常用：0.9、0.95）',
    "decay names {0} are not parameters; check the spelling against the model's names, e.g. {1}":
        'decay 里的名字 {0} 不是参数；请对照模型的参数名检查拼写，例如 {1}',
    '{0} must be a dict of name -> array, got {1}':
        '{0} 必须是 名字 -> 数组 的字典，实际是 {1}',
    '{0} does not match the parameters: missing {1}, unexpected {2}; it belongs to a different model':
        '{0} 和参数对不上：缺少 {1}，多出 {2}；它属于另一个模型',
    '{0}: {1} has shape {2}, the parameter has {3}':
        '{0}：{1} 的形状是 {2}，而参数的形状是 {3}',
    'max_norm must be a number > 0, got {0} (typical: 1.0)':
        'max_norm 必须是 > 0 的数，实际是 {0}（常用：1.0）',
    'step must be an int >= 0, got {0}':
        'step 必须是 >= 0 的整数，实际是 {0}',
    'need 0 <= min_lr <= lr, got min_lr={0}, lr={1}':
        '需要 0 <= min_lr <= lr，实际是 min_lr={0}，lr={1}',
    'need 0 <= warmup_iters <= decay_iters, got warmup_iters={0}, decay_iters={1} (decay_iters is usually max_iters)':
        '需要 0 <= warmup_iters <= decay_iters，实际是 warmup_iters={0}，decay_iters={1}（decay_iters 通常就是 max_iters）',
    'the number of threads must be a whole number >= 1, got {0}':
        '线程数必须是 >= 1 的整数，实际是 {0}',
    "give --data FILE (a text file), --data DIR (from 'zerollm prepare') or the name of a shipped corpus ({0})":
        "请给 --data FILE（一个文本文件）、--data DIR（来自 'zerollm prepare'）或一个自带语料的名字（{0}）",
    '--data: no such file or folder: {0} (shipped corpora: {1})':
        '--data：没有这个文件或文件夹：{0}（自带的语料：{1}）',
    "{0} holds data prepared from another text than --preset {1}'s corpus ({2}); {3}":
        '{0} 里的数据不是用 --preset {1} 的语料（{2}）准备的；{3}',
    '{0} was prepared with the {1} tokenizer, but this run uses the {2} tokenizer; pass --data {3} (or --tokenizer {4}) to train on it, or choose another --out':
        '{0} 是用 {1} 分词器准备的，但这次运行用的是 {2} 分词器；要在它上面训练，请传 --data {3}（或 --tokenizer {4}），或换一个 --out',
    "{0} was not written by 'zerollm train' (its objective is {1}); resume it with the command that wrote it":
        "{0} 不是 'zerollm train' 写的（它的目标是 {1}）；请用写它的那个命令续训",
    "--resume trains on the run's own prepared data ({0}); --data {1} is not the data the run began with: leave out --data, or start a new run with another --out":
        '--resume 会用这次运行自己准备好的数据（{0}）训练；--data {1} 不是这次运行开始时的数据：请去掉 --data，或用另一个 --out 开始新的运行',
    "{0}/meta.json names no tokenizer (byte, char or bpe); run 'zerollm prepare' again":
        "{0}/meta.json 没有写明分词器（byte、char 或 bpe）；请重新运行 'zerollm prepare'",
    "--tokenizer {0} conflicts with {1}, which was prepared with the {2} tokenizer; leave --tokenizer out to use the folder's, or prepare it again with --tokenizer {3}":
        '--tokenizer {0} 和 {1} 冲突，后者是用 {2} 分词器准备的；去掉 --tokenizer 就用该文件夹的分词器，或者用 --tokenizer {3} 重新准备',
    'unknown settings {0}':
        '未知的设置 {0}',
    'unknown preset {0}; choose one of {1}':
        '未知的预设 {0}；请从 {1} 中选一个',
    "${0} must be 'processes' or 'threads', got {1} (or unset it)":
        "${0} 必须是 'processes' 或 'threads'，实际是 {1}（或者取消这个变量）",
    'warmup_iters, grad_clip, weight_decay and sample_tokens must be >= 0':
        'warmup_iters、grad_clip、weight_decay 和 sample_tokens 都必须 >= 0',
    'tokenizer must be byte, char or bpe; got {0}':
        '分词器必须是 byte、char 或 bpe；实际是 {0}',
    '--warmup-iters {0} is longer than the learning-rate decay, which ends at step {1} ({2}); give --warmup-iters {3} or less, or a larger {4}':
        '--warmup-iters {0} 比学习率衰减还长，衰减在第 {1} 步结束（{2}）；请给 --warmup-iters {3} 或更小，或者更大的 {4}',
    'training diverged at step {0} (loss {1}, gradient norm {2}); lower --lr or resume from the last checkpoint with a smaller one':
        '训练在第 {0} 步发散了（损失 {1}，梯度范数 {2}）；请降低 --lr，或从最后一个检查点用更小的学习率续训',
    'checkpoint {0} does not fit this run (missing {1}, unexpected {2}); resume with the command that wrote it':
        '检查点 {0} 和这次运行对不上（缺少 {1}，多出 {2}）；请用写它的那个命令续训',
    "{0}: the {1} objective's saved state (state.json objective_state, objective.safetensors) is damaged at {2}; resume from the run directory to use the checkpoint before it":
        '{0}：{1} 目标保存的状态（state.json 的 objective_state、objective.safetensors）在 {2} 处已损坏；请从运行目录续训，以使用它之前的检查点',
    'checkpoint {0} has no loss-scaler state, so it was not trained with --amp fp16; resume it without changing --amp':
        '检查点 {0} 没有损失缩放器的状态，所以它不是用 --amp fp16 训练的；续训时不要改 --amp',
    'this run was saved with --threads {0} and resumes with {1}: the batch is split differently, so losses may differ in the last digits from an uninterrupted run':
        '这次运行保存时用的是 --threads {0}，续训用的是 {1}：每一批的切分方式不同，所以损失的最后几位可能与不中断的运行不同',
    '--resume: no checkpoint in {0}; run without --resume to start training':
        '--resume：{0} 里没有检查点；去掉 --resume 从头开始训练',
    '{0} is already at step {1}; --max-iters {2} would end the run before where it stands: give {3} or more, or leave it out':
        '{0} 已经到了第 {1} 步；--max-iters {2} 会让运行在当前位置之前就结束：请给 {3} 或更大，或者不加这个参数',
    'stopped at step {0}; checkpoint saved in {1}; continue with --resume':
        '在第 {0} 步停下；检查点保存在 {1}；用 --resume 继续',
    'with LoRA {0}':
        '用了 LoRA {0}',
    'without LoRA':
        '没有用 LoRA',
    'train first with `zerollm train` (it saves checkpoints there)':
        '请先用 `zerollm train` 训练（它会把检查点存在那里）',
    'the checkpoint is damaged: load the run directory to use the one before it, or train again':
        '检查点已损坏：请加载运行目录以使用前一个检查点，或重新训练',
}
