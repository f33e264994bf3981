"""中文 of the nn room's error messages (see zerollm/io/zh/__init__.py)."""

ZH = {
    "attn_impl must be 'naive' or 'flash', got {0}":
        "attn_impl 必须是 'naive' 或 'flash'，收到的是 {0}",
    "flash attention needs q (B, nkv, g, T, hs) and k, v (B, nkv, 1, Tk, hs); got q {0}, k {1}, v {2}":
        "flash attention 需要形状为 (B, nkv, g, T, hs) 的 q 和形状为 (B, nkv, 1, Tk, hs) 的 k、v；收到的是 q {0}、k {1}、v {2}",
    "tile must be a positive integer (e.g. {0}), got {1}":
        "tile 必须是正整数（例如 {0}），收到的是 {1}",
    "attention dropout in training needs rng=np.random.default_rng(seed)":
        "训练时的注意力 dropout 需要 rng=np.random.default_rng(seed)",
    "mask must be boolean (True = hidden), got {0}; use mask.astype(bool)":
        "mask 必须是布尔型（True 表示遮住），收到的是 {0}；请用 mask.astype(bool)",
    "mask of shape {0} does not broadcast to (B, 1, 1, T, Tk) = (B, 1, 1, {1}, {2})":
        "形状为 {0} 的 mask 无法广播到 (B, 1, 1, T, Tk) = (B, 1, 1, {1}, {2})",
    "--lora-r must be a whole number >= 1, got {0}":
        "--lora-r 必须是 >= 1 的整数，收到的是 {0}",
    "--lora-alpha must be a number > 0, got {0}":
        "--lora-alpha 必须是 > 0 的数，收到的是 {0}",
    "--lora-dropout must be in [0, 1), got {0}":
        "--lora-dropout 必须在 [0, 1) 之内，收到的是 {0}",
    "--lora-targets must name at least one module, got {0}":
        "--lora-targets 至少要指定一个模块，收到的是 {0}",
    "--lora-modules-to-save: {0} is not a module that can train beside the adapters; choose from {1}":
        "--lora-modules-to-save: {0} 不是能和适配器一起训练的模块；请从 {1} 中选择",
    "--lora-targets: {0} matches no linear layer of this model; choose from {1}, or {2} (every one)":
        "--lora-targets: {0} 匹配不到这个模型的任何线性层；请从 {1} 中选择，或者写 {2}（全部线性层）",
    "--lora-targets: {0} and {1} would both adapt the same columns; name one of them (c_attn covers q_proj, k_proj and v_proj)":
        "--lora-targets: {0} 和 {1} 会适配同样的列；请只写其中一个（c_attn 已经包括 q_proj、k_proj 和 v_proj）",
    "--lora-modules-to-save lm_head: this model ties its head to the token table (one array); name wte, which trains both":
        "--lora-modules-to-save lm_head: 这个模型的输出头与词表共享权重（同一个数组）；请写 wte，它会同时训练两者",
    "{0}: the adapter {1} overflows {2} when folded into its weight (W + alpha/r A B has numbers beyond {3}); the adapter is damaged or came from a diverged run: use an earlier save of it, or train it again with a lower --lr":
        "{0}: 适配器 {1} 合并进它的权重后会让 {2} 溢出（W + alpha/r A B 里有超过 {3} 的数）；适配器已损坏，或者来自一次发散的训练：请用它更早的存档，或者用更小的 --lr 重新训练",
    "causal_mask needs positive sizes, got T={0}, Tk={1}":
        "causal_mask 需要正的尺寸，收到的是 T={0}、Tk={1}",
    "q, k, v must be at least 2-D (..., T, hs); got shapes {0}, {1}, {2}":
        "q、k、v 至少要是二维的 (..., T, hs)；收到的形状是 {0}、{1}、{2}",
    "q and k must have the same last dim (head size) to be dotted; got q {0} and k {1}: project both with weights of the same output width":
        "q 和 k 的最后一维（头的大小）必须相同才能做点积；收到的是 q {0} 和 k {1}：请用输出宽度相同的权重投影它们",
    "k and v must have one row per key (same T); got k {0} and v {1}":
        "k 和 v 必须每个键一行（T 相同）；收到的是 k {0} 和 v {1}",
    "the leading (batch/head) dims of q {0}, k {1}, v {2} do not broadcast; give them the same batch size":
        "q {0}、k {1}、v {2} 前面的（批次/头）维度无法广播；请让它们的批大小相同",
    "mask must be boolean (True = hidden), got dtype {0}; use mask.astype(bool)":
        "mask 必须是布尔型（True 表示遮住），收到的 dtype 是 {0}；请用 mask.astype(bool)",
    "mask of shape {0} does not broadcast to (..., Tq, Tk) = (..., {1}, {2})":
        "形状为 {0} 的 mask 无法广播到 (..., Tq, Tk) = (..., {1}, {2})",
    "{0} must be a 2-D matrix (d_model, d_k); got shape {1}":
        "{0} 必须是二维矩阵 (d_model, d_k)；收到的形状是 {1}",
    "{0} has {1} rows but x has d_model={2} columns; {3} must be ({4}, d_k) so that x @ {5} works":
        "{0} 有 {1} 行，但 x 的 d_model={2} 列；{3} 的形状必须是 ({4}, d_k)，x @ {5} 才能算",
    "x must be (T, d_model) or (B, T, d_model); got shape {0}":
        "x 的形状必须是 (T, d_model) 或 (B, T, d_model)；收到的形状是 {0}",
    "wq {0} and wk {1} must have the same number of columns (d_k), because every query is dotted with every key":
        "wq {0} 和 wk {1} 的列数（d_k）必须相同，因为每个查询都要和每个键做点积",
}
