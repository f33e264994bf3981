"""中文 of the align room's error messages (see zerollm/io/zh/__init__.py)."""

ZH = {
    "DPO loss_type must be one of {0}; got {1}":
        "DPO 的 loss_type 必须是 {0} 之一；收到的是 {1}",
    "--beta must be > 0, got {0}":
        "--beta 必须 > 0，收到的是 {0}",
    "the preference file has no pairs":
        "偏好文件里一对样本也没有",
    "{0} longer than the {1} tokens {2} (a side counts the prompt and the answer with their chat markers; the longest has {3}); shorten them or drop them":
        "{0} 超过了 {1} 个 token 的上限（{2}）；每一边都要算上提示词和回答，连同它们的对话标记，最长的有 {3}：请把它们改短，或者删掉",
    "reward loss must be one of {0}; got {1}":
        "奖励模型的损失必须是 {0} 之一；收到的是 {1}",
    "--margin must be >= 0, got {0}":
        "--margin 必须 >= 0，收到的是 {0}",
    "{0} is not a reward model (it has no score head); train one with 'zerollm reward'":
        "{0} 不是奖励模型（它没有打分头）；先用 'zerollm reward' 训练一个",
    "--eval-examples must be >= 1, got {0}":
        "--eval-examples 必须 >= 1，收到的是 {0}",
    "--eval-temperature must be >= 0, got {0}":
        "--eval-temperature 必须 >= 0，收到的是 {0}",
    "--eval-max-new-tokens must be >= 1, got {0}":
        "--eval-max-new-tokens 必须 >= 1，收到的是 {0}",
    "no training examples":
        "没有训练样本",
    "the group size must be a whole number >= 2 (GRPO compares answers within a group); got {0}":
        "组大小必须是 >= 2 的整数（GRPO 在一组回答之间互相比较）；收到的是 {0}",
    "rewards must be (N*G,) with G = {0} answers per prompt; got shape {1}":
        "rewards 的形状必须是 (N*G,)，其中 G = {0} 是每个提示词的回答数；收到的形状是 {1}",
    "--reward-weights must be comma-separated numbers, got {0}":
        "--reward-weights 必须是用逗号分隔的数，收到的是 {0}",
    "--reward-weights must be finite numbers, got {0}: a nan or inf weight makes every reward nan and the run diverges at its first step":
        "--reward-weights 必须是有限的数，收到的是 {0}：只要有一个权重是 nan 或 inf，每个奖励都会变成 nan，训练在第一步就发散",
    "--group-size must be >= 2: GRPO compares answers within a group; got {0}":
        "--group-size 必须 >= 2：GRPO 在一组回答之间互相比较；收到的是 {0}",
    "--beta must be >= 0, got {0}":
        "--beta 必须 >= 0，收到的是 {0}",
    "--loss-type must be one of {0}; got {1}":
        "--loss-type 必须是 {0} 之一；收到的是 {1}",
    "loss_type must be one of {0}; got {1}":
        "loss_type 必须是 {0} 之一；收到的是 {1}",
    "--{0} must be >= 1, got {1}":
        "--{0} 必须 >= 1，收到的是 {1}",
    "--epsilon must be in (0, 1), got {0}":
        "--epsilon 必须在 (0, 1) 之内，收到的是 {0}",
    "--temperature must be > 0 (rollouts sample) and --eval-temperature >= 0":
        "--temperature 必须 > 0（rollout 要采样），--eval-temperature 必须 >= 0",
    "a prompt is {0} tokens long, which leaves no room for an answer in the model's context of {1} tokens; shorten the prompts":
        "有一个提示词长 {0} 个 token，在模型 {1} 个 token 的上下文里已经没有留给回答的位置；请缩短提示词",
    "--minibatches {0} is more than the {1} answers of a rollout batch":
        "--minibatches {0} 比一批 rollout 的 {1} 个回答还多",
    "--gamma and --lam must be in [0, 1]":
        "--gamma 和 --lam 必须在 [0, 1] 之内",
    "--vf-coef, --epsilon-value, --ent-coef and --kl-coef must be >= 0":
        "--vf-coef、--epsilon-value、--ent-coef 和 --kl-coef 必须 >= 0",
    "--target-kl must be > 0 and --kl-horizon >= 1":
        "--target-kl 必须 > 0，--kl-horizon 必须 >= 1",
    "{0} called sys.exit({1}); a reward function must return its rewards (raise an exception to report a problem)":
        "{0} 调用了 sys.exit({1})；奖励函数必须返回奖励值（要报告问题，请抛出异常）",
    "{0}: {1}":
        "{0}: {1}",
    "{0} raised {1}: {2}":
        "{0} 抛出了 {1}: {2}",
    "--reward: {0}; the reward tasks are {1} (or write module:function, or give --rm DIR)":
        "--reward: {0}；可用的奖励任务有 {1}（也可以写 module:function，或者给 --rm DIR）",
    "--reward {0}: write a task name ({1}) or module:function (e.g. my_rewards:length)":
        "--reward {0}: 请写一个任务名（{1}）或 module:function（例如 my_rewards:length）",
    "{0}; fix the module (or the name) and start again":
        "{0}；修好这个模块（或名字）后重新开始",
    "--reward {0}: the module {1} has no {2}":
        "--reward {0}: 模块 {1} 里没有 {2}",
    "--reward {0} is not a function":
        "--reward {0} 不是一个函数",
    "the reward model {0} uses another tokenizer than the policy (different vocabulary or special tokens); train the reward model from the same SFT checkpoint":
        "奖励模型 {0} 用的分词器和策略模型的不一样（词表或特殊 token 不同）；请从同一个 SFT 检查点训练奖励模型",
    "--reward-weights gives {0} weights for {1} reward sources":
        "--reward-weights 给了 {0} 个权重，但奖励来源有 {1} 个",
    "reward {0} raised {1}: {2}":
        "奖励 {0} 抛出了 {1}: {2}",
    "reward {0} must return a list of numbers, one per answer; got {1}":
        "奖励 {0} 必须返回一个数的列表，每个回答一个；收到的是 {1}",
    "reward {0} returned {1} values for {2} answers; return one per answer":
        "奖励 {0} 返回了 {1} 个值，但回答有 {2} 个；每个回答返回一个值",
    "reward {0} returned {1} for answer {2} ({3} non-finite values); rewards must be finite numbers":
        "奖励 {0} 给回答 {2} 返回了 {1}（共有 {3} 个不是有限数的值）；奖励必须是有限的数",
    "reward {0} returned {1} for answer {2}; rewards must be numbers up to {3} in size (scale them down)":
        "奖励 {0} 给回答 {2} 返回了 {1}；奖励的绝对值最多为 {3}（请把它们缩小）",
    "give --init DIR (a zerollm run) or --hf DIR (a Hugging Face model) to start from":
        "请用 --init DIR（zerollm 运行目录）或 --hf DIR（Hugging Face 模型）指定起始模型",
    "the starting model {0} has changed since this run began (its weights' digest differs), so the frozen reference cannot be restored; put the original back":
        "起始模型 {0} 在这次运行开始之后被改动过（权重的摘要不一样了），冻结的参考模型无法恢复；请把原来的模型放回去",
    "--{0}: no such file: {1}":
        "--{0}: 没有这个文件：{1}",
    "{0} (the copy of --{1} this run trains on) is missing; put the file the run began with back there, or start a new run with another --out":
        "{0}（这次运行训练所用的 --{1} 的副本）不见了；把运行开始时的那个文件放回原处，或者换一个 --out 开始新的运行",
    "{0} (the copy of --{1} this run trains on) has changed since the run began (cut short or edited); put the original back, or start a new run":
        "{0}（这次运行训练所用的 --{1} 的副本）在运行开始后被改动过（被截短或编辑）；请放回原来的文件，或者开始新的运行",
    "{0}: no such file: {1}":
        "{0}: 没有这个文件：{1}",
    "--resume trains on the run's own copy of its data; {0} {1} is not the file the run began with: leave out {2}, or start a new run with another --out":
        "--resume 训练的是运行目录里自己保存的数据副本；{0} {1} 不是运行开始时的那个文件：去掉 {2}，或者换一个 --out 开始新的运行",
    "--resume continues from the run's own start ({0}); --{1} {2} is another model: leave out --{3}, or start a new run with another --out":
        "--resume 从这次运行自己的起点（{0}）继续；--{1} {2} 是另一个模型：去掉 --{3}，或者换一个 --out 开始新的运行",
    "{0} already holds a run; continue it with --resume, or choose another --out":
        "{0} 里已经有一次运行；用 --resume 接着训练，或者换一个 --out",
    "give --data FILE: the JSONL file to train on (see 'zerollm {0} --help')":
        "请给出 --data FILE：要训练的 JSONL 文件（见 'zerollm {0} --help'）",
    "{0} was not written by 'zerollm {1}' (its objective is {2}); resume it with the command that wrote it":
        "{0} 不是由 'zerollm {1}' 写出的（它的目标是 {2}）；请用写出它的那个命令续训",
    "{0}: objective.start must name the starting model (path, hf, digest); the checkpoint is damaged":
        "{0}: objective.start 必须指明起始模型（path、hf、digest）；检查点已损坏",
    "{0}: objective.inputs must map each input to its SHA-256; the checkpoint is damaged":
        "{0}: objective.inputs 必须把每个输入对应到它的 SHA-256；检查点已损坏",
    "unknown task {0}; the tasks are {1}":
        "未知的任务 {0}；可用的任务有 {1}",
    "heads must be four characters, got {0}":
        "heads 必须是四个字符，收到的是 {0}",
    "cannot find four head characters in the prompt {0}; an acrostic prompt reads {1}":
        "在提示词 {0} 里找不到四个藏头字；藏头诗的提示词是这样的：{1}",
    "--n {0}: the addition {1} split has only {2} distinct problems (a+b with a, b up to 999); ask for at most {3}":
        "--n {0}: 加法的 {1} 划分只有 {2} 道不同的题（a+b，a、b 最大 999）；最多只能要 {3} 道",
    "could only draw {0} distinct {1} pairs; ask for fewer than {2}":
        "只抽到了 {0} 对不同的 {1} 题目；请要少于 {2} 对",
    "an addition row's \"answer\" must be a whole number like 357, got {0}":
        "加法样本的 \"answer\" 必须是像 357 这样的整数，收到的是 {0}",
    "an addition prompt reads like '12+345=', got {0}":
        "加法的提示词形如 '12+345='，收到的是 {0}",
    "n must be a whole number >= 1, got {0}":
        "n 必须是 >= 1 的整数，收到的是 {0}",
    "split must be 'train' or 'heldout', got {0}":
        "split 必须是 'train' 或 'heldout'，收到的是 {0}",
    "seed must be an integer, got {0}":
        "seed 必须是整数，收到的是 {0}",
    "asked for {0} examples but the {1} has only {2}; ask for fewer":
        "要了 {0} 个样本，但 {1} 只有 {2} 个；请少要一些",
    "format must be one of {0}, got {1}":
        "format 必须是 {0} 之一，收到的是 {1}",
    "{0} {1}: {2}":
        "{0} {1}: {2}",
    "{0} did not finish within {1} {2} s; make it faster, or raise {3} (0 = no limit)":
        "{0} 没有在 {1} 规定的 {2} 秒内完成；让它更快一些，或者调大 {3}（0 表示不限）",
    "give --reward NAME (a task: {0}; or module:function) and/or --rm DIR (a reward model)":
        "请给出 --reward NAME（一个任务：{0}；或者 module:function），或者 --rm DIR（一个奖励模型），也可以两者都给",

    # Pieces of messages built elsewhere: objectives/sft.py's fitting() words its warning and its error from one
    # f-string (both forms are here), and names its examples with the words below.
    "{0} of {1} {2} are longer than the context ({3} tokens with block_size {4}; the longest has {5}) and were left out, not truncated: a cut completion would lose its end token":
        "{1} 个{2}中有 {0} 个比上下文还长（block_size 为 {4} 时是 {3} 个 token；最长的有 {5} 个），它们被略过了，而不是截断：截断的回答会丢掉它的结束 token",
    "{0} of {1} {2} are longer than the context ({3} tokens with block_size {4}; the longest has {5}), so none is left, not truncated: a cut completion would lose its end token; fine-tune a model with a longer context or use shorter examples":
        "{1} 个{2}中有 {0} 个比上下文还长（block_size 为 {4} 时是 {3} 个 token；最长的有 {5} 个），所以一个也不剩（不截断，是因为截断的回答会丢掉它的结束 token）；请微调一个上下文更长的模型，或者用更短的样本",
    "training examples":
        "训练样本",
    "heldout examples":
        "留出样本",
    # issue 57 item 7: the pieces check_lengths (align/objectives/pairs.py) puts into its message, and what
    # each objective says its limit counts
    "the pair on line {0} is":
        "第 {0} 行的偏好对",
    "{0} pairs (the first on line {1}) are":
        "有 {0} 个偏好对（第一个在第 {1} 行）",
    "the model can read":
        "模型能读入的长度",
    "dpo takes per side (the model reads block_size {0} of them and predicts the last one, which it never reads)":
        "dpo 每一边取的长度：模型读入其中 block_size {0} 个，并预测最后一个，最后那个它从不读入",
    "the reward model reads per side (its block_size: the reward is read at the last one)":
        "奖励模型每一边读入的长度，即它的 block_size：奖励在最后一个 token 上读出",
}
