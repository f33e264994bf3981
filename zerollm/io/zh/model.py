"""中文 of the model room's error messages (see zerollm/io/zh/__init__.py)."""

ZH = {
    "{0}={1} is not a size; write e.g. 4GiB, 512MiB or 1000000000":
        "{0}={1} 不是一个大小；请写成 4GiB、512MiB 或 1000000000 这样",
    "GPTConfig.{0} must be a positive integer, got {1}":
        "GPTConfig.{0} 必须是正整数，收到的是 {1}",
    "GPTConfig.{0} must be one of {1}; got {2}":
        "GPTConfig.{0} 必须是 {1} 之一；收到的是 {2}",
    "GPTConfig.{0} must be True or False, got {1}":
        "GPTConfig.{0} 必须是 True 或 False，收到的是 {1}",
    "GPTConfig.head_dim must be a positive integer or None, got {0}":
        "GPTConfig.head_dim 必须是正整数或 None，收到的是 {0}",
    "n_embd={0} is not divisible by n_head={1}; pick n_embd = n_head * head_size":
        "n_embd={0} 不能被 n_head={1} 整除；请取 n_embd = n_head * head_size",
    "n_kv_head={0} must divide n_head={1} (each group of query heads shares one key/value head)":
        "n_kv_head={0} 必须能整除 n_head={1}（每组查询头共用一个键/值头）",
    "RoPE rotates pairs of dimensions, so the head size must be even; got a head size of {0}":
        "RoPE 把维度两两配对旋转，所以头的大小必须是偶数；现在头的大小是 {0}",
    "dropout must be in [0, 1), got {0}":
        "dropout 必须在 [0, 1) 之内，收到的是 {0}",
    "norm_eps, init_std and rope_theta must be positive":
        "norm_eps、init_std 和 rope_theta 必须是正数",
    "GPTConfig.moe_norm_topk must be True or False, got {0}":
        "GPTConfig.moe_norm_topk 必须是 True 或 False，收到的是 {0}",
    "n_shared_expert={0} needs routed experts beside it; set n_expert >= 2 (or n_shared_expert=0 for a dense model)":
        "n_shared_expert={0} 旁边需要有路由专家；请设 n_expert >= 2（稠密模型则设 n_shared_expert=0）",
    "n_expert=1 is a dense MLP with a useless router; use n_expert=0 (dense) or n_expert >= 2":
        "n_expert=1 就是一个带着无用路由器的稠密 MLP；请用 n_expert=0（稠密）或 n_expert >= 2",
    "n_expert_active={0} must be between 1 and n_expert={1} (each token picks k of the E experts)":
        "n_expert_active={0} 必须在 1 到 n_expert={1} 之间（每个 token 从 E 个专家里选 k 个）",
    "moe_every={0} must be between 1 and n_layer={1}: MoE blocks are moe_every-1, 2*moe_every-1, ... and there must be one":
        "moe_every={0} 必须在 1 到 n_layer={1} 之间：MoE 块是第 moe_every-1、2*moe_every-1、…… 层，而且至少要有一个",
    "GPT needs a GPTConfig, got {0}":
        "GPT 需要一个 GPTConfig，收到的是 {0}",
    "this model already has LoRA adapters; merge them first (zerollm merge)":
        "这个模型已经有 LoRA 适配器了；请先合并它们（zerollm merge）",
    "idx must be integer token ids of shape (B, T) with T >= 1; got {0} {1}":
        "idx 必须是形状为 (B, T)、T >= 1 的整数 token id；收到的是 {0} {1}",
    "the KV cache has {0} rows but idx has {1}":
        "KV cache 有 {0} 行，但 idx 有 {1} 行",
    "positions {0}..{1} go past block_size={2}; crop the input to the last block_size tokens":
        "位置 {0}..{1} 超出了 block_size={2}；请把输入裁成最后 block_size 个 token",
    "token ids must be in [0, {0}); got min {1}, max {2}":
        "token id 必须在 [0, {0}) 之内；收到的最小值是 {1}，最大值是 {2}",
    "targets must have the shape of idx {0}; got {1}":
        "targets 的形状必须和 idx 一样，即 {0}；收到的是 {1}",
    "call forward() before backward(), in train mode (model.train()) or with keep=True so the activations are kept; backward frees them, so call it once":
        "请先调用 forward() 再调用 backward()，而且要在训练模式下（model.train()）或加上 keep=True，这样激活值才会保留；backward 会释放它们，所以只能调用一次",
    "no kept activations: run forward(..., keep=True) (or in train mode) first":
        "没有保留的激活值：请先运行 forward(..., keep=True)（或在训练模式下运行）",
    "backward(dlogits=...) needs logits: the last call was forward_hidden(); call forward() instead":
        "backward(dlogits=...) 需要 logits：上一次调用的是 forward_hidden()；请改为调用 forward()",
    "backward() with no arguments differentiates the built-in cross-entropy: call forward(idx, targets) with targets first, or pass dlogits= / dhidden=":
        "不带参数的 backward() 求的是内置交叉熵的导数：请先带上 targets 调用 forward(idx, targets)，或者传入 dlogits= / dhidden=",
    "{0} must have shape {1} (that of the last forward), got {2}":
        "{0} 的形状必须是 {1}（即上一次 forward 的形状），收到的是 {2}",
    "run forward() first (in eval mode: forward(idx, keep=True)); attention weights come from the last forward pass":
        "请先运行 forward()（评估模式下用 forward(idx, keep=True)）；注意力权重来自上一次前向计算",
    "attn_impl='flash' never stores the attention weights (that is how it saves memory); to look at them, load these weights into a model whose config has attn_impl='naive' (dataclasses.replace(config, attn_impl='naive'))":
        "attn_impl='flash' 从不保存注意力权重（它正是这样省内存的）；想看注意力权重，请把这些权重加载到 config 为 attn_impl='naive' 的模型里（dataclasses.replace(config, attn_impl='naive')）",
    "the head's read positions must be (B,) = ({0},) ints in [0, {1}); got {2}":
        "输出头读取的位置必须是形状 (B,) = ({0},)、取值在 [0, {1}) 之内的整数；收到的是 {2}",
    "every sequence needs at least one real token at position 0 (right padding)":
        "每个序列在位置 0 上至少要有一个真实 token（填充放在右边）",
    "a KV cache only makes sense for a causal model (config.causal=True)":
        "KV cache 只对因果模型有意义（config.causal=True）",
    "window must be >= 1 and sinks >= 0; got window={0}, sinks={1}":
        "window 必须 >= 1，sinks 必须 >= 0；收到的是 window={0}，sinks={1}",
    "a full KV cache needs max_len >= 1 (or give a window for a rolling buffer)":
        "完整的 KV cache 需要 max_len >= 1（或者给一个 window，使用滚动缓冲区）",
    "a per-row KV cache is a full cache; leave out window":
        "逐行的 KV cache 是完整缓存；请去掉 window",
    "KV cache is full ({0} tokens); start a new cache or use a window":
        "KV cache 已满（{0} 个 token）；请新建一个缓存，或者使用 window",
    "KV cache is full ({0} tokens); give it a larger max_len":
        "KV cache 已满（{0} 个 token）；请给它更大的 max_len",
    "add_rows joins per-row caches (KVCache(..., per_row=True))":
        "add_rows 只能拼接逐行的缓存（KVCache(..., per_row=True)）",
    "ids must be (B, T) integer token ids with T >= 2; got {0} {1}":
        "ids 必须是形状为 (B, T)、T >= 2 的整数 token id；收到的是 {0} {1}",
    "mask must have the shape of ids {0}; got {1}":
        "mask 的形状必须和 ids 一样，即 {0}；收到的是 {1}",
    "mask[:, 0] must be False: the first token has no prediction to score":
        "mask[:, 0] 必须是 False：第一个 token 没有可以打分的预测",
    "token_logprobs ran without keeping activations; call it in train mode or with keep=True before backward":
        "token_logprobs 运行时没有保留激活值；在 backward 之前，请在训练模式下或加上 keep=True 调用它",
    "state dict does not fit this model's config: {0}; build the model with the config the weights were saved with":
        "state dict 和这个模型的配置对不上：{0}；请用保存这些权重时的那个配置构建模型",

    # Pieces of messages built elsewhere: budget.require() words one message and adds the warning's or the
    # error's tail to it; the three forms are here.
    "{0} needs about {1} of memory but {2} is available ({3}); lower {4}":
        "{0} 大约需要 {1} 内存，但可用的只有 {2}（{3}）；请调小 {4}",
    "{0} needs about {1} of memory but {2} is available ({3}); lower {4} (or pass {5} to try anyway)":
        "{0} 大约需要 {1} 内存，但可用的只有 {2}（{3}）；请调小 {4}（或者加上 {5} 强行一试）",
    "{0} needs about {1} of memory but {2} is available ({3}); lower {4}; trying anyway because of {5}":
        "{0} 大约需要 {1} 内存，但可用的只有 {2}（{3}）；请调小 {4}；因为给了 {5}，仍然继续尝试",
}
