"""The exercises, in the order of the course, with their tasks and hints in English and 中文.

Each entry says what to write (``signature`` and ``doc``: the task, the shapes and the formula to start
from, never the answer), three hints from gentle to nearly there, the functions of zerollm whose source
``zerollm exercise solution`` prints, and the grader (backprop, attention, pipeline).
"""

from zerollm.teach.exercises import attention, backprop, pipeline
from zerollm.teach.exercises.grading import Exercise


def _ex(name, part, title, signature, doc, hints, solution, grade):
    return Exercise(name, part, dict(zip(("en", "zh"), title)), signature, dict(zip(("en", "zh"), doc)),
                    dict(zip(("en", "zh"), hints)), solution, grade)


EXERCISES = [
    _ex("attention", 1, ("the seed's self-attention, step by step", "种子例子的自注意力，一步一步"),
        "attention(x, wq, wk, wv)",
        ("""Causal self-attention of one head, as in the course's seed example.

    x: (B, T, C) tokens; wq, wk: (C, d_k); wv: (C, d_v).
    Return (out, weights): out (B, T, d_v), weights (B, T, T).

    Steps: q = x wq, k = x wk, v = x wv; scores = q k^T / sqrt(d_k); hide every key after its query
    (position j > i) with -inf; weights = softmax over the keys; out = weights v.
    Keep the dtype of x (float32 in, float32 out).""",
         """单个注意力头的因果自注意力，与课程的种子例子相同。

    x: (B, T, C) 词元；wq, wk: (C, d_k)；wv: (C, d_v)。
    返回 (out, weights)：out (B, T, d_v)，weights (B, T, T)。

    步骤：q = x wq，k = x wk，v = x wv；scores = q k^T / sqrt(d_k)；把每个查询之后的键
    （位置 j > i）置为 -inf；weights = 对键做 softmax；out = weights v。
    保持 x 的 dtype（float32 进，float32 出）。"""),
        (("Batch matrix products: q @ np.swapaxes(k, -1, -2) gives (B, T, T).",
          "np.triu(np.ones((T, T), bool), k=1) is True exactly where a key comes after its query.",
          "Subtract each row's max before exp, and divide by the sum over the LAST axis."),
         ("批量矩阵乘法：q @ np.swapaxes(k, -1, -2) 得到 (B, T, T)。",
          "np.triu(np.ones((T, T), bool), k=1) 恰好在键位于查询之后的地方为 True。",
          "取 exp 之前先减去每行的最大值，再除以沿最后一个轴的和。")),
        ("zerollm.nn.self_attention.attention_steps", "zerollm.nn.self_attention.softmax"), attention.grade_attention),
    _ex("softmax", 1, ("a numerically stable softmax", "数值稳定的 softmax"), "softmax(x)",
        ("""softmax along the last axis: y_i = exp(x_i) / sum_j exp(x_j).

    x: (..., V) -> y: (..., V), same dtype. It must work for logits of 1000 (exp(1000) overflows) and
    give weight 0 to entries equal to -inf.""",
         """沿最后一个轴的 softmax：y_i = exp(x_i) / sum_j exp(x_j)。

    x: (..., V) -> y: (..., V)，dtype 不变。logit 为 1000 时也要正确（exp(1000) 会溢出），
    等于 -inf 的元素权重为 0。"""),
        (("softmax(x) = softmax(x - c) for any constant c of the row: which c keeps exp() small?",
          "np.max(x, axis=-1, keepdims=True) keeps the axis so that it broadcasts against x.",
          "Subtract the row max, exp, then divide by the row sum (keepdims=True again)."),
         ("对同一行减去任意常数 c，softmax 不变：取哪个 c 能让 exp() 不溢出？",
          "np.max(x, axis=-1, keepdims=True) 保留了这个轴，便于和 x 广播。",
          "减去行最大值，取 exp，再除以行和（同样 keepdims=True）。")),
        ("zerollm.nn.self_attention.softmax",), backprop.grade_softmax),
    _ex("softmax_backward", 1, ("softmax's backward", "softmax 的反向传播"), "softmax_backward(dy, y)",
        ("""The gradient of y = softmax(x) (last axis), given y and the upstream gradient dy.

    dy, y: (..., V) -> dx: (..., V). Start from the Jacobian dy_i/dx_j = y_i (delta_ij - y_j) and apply it
    to dy without building the (V, V) matrix.""",
         """已知 y = softmax(x)（最后一个轴）和上游梯度 dy，求 dx。

    dy, y: (..., V) -> dx: (..., V)。从雅可比矩阵 dy_i/dx_j = y_i (delta_ij - y_j) 出发，
    把它作用到 dy 上，但不要真的构造 (V, V) 的矩阵。"""),
        (("dx_j = sum_i dy_i y_i (delta_ij - y_j): split the sum into its delta part and the rest.",
          "The rest has the same factor y_j times one number per row.",
          "That number is sum_i dy_i y_i over the last axis (keepdims=True)."),
         ("dx_j = sum_i dy_i y_i (delta_ij - y_j)：把求和拆成 delta 部分和其余部分。",
          "其余部分是 y_j 乘以每行一个数。",
          "那个数是沿最后一个轴的 sum_i dy_i y_i（keepdims=True）。")),
        ("zerollm.nn.self_attention.softmax_backward",), backprop.grade_softmax_backward),
    _ex("cross_entropy_backward", 2, ("cross-entropy's backward", "交叉熵的反向传播"),
        "cross_entropy_backward(logits, targets)",
        ("""The gradient of the mean cross-entropy with respect to the logits.

    logits: (..., V); targets: (...) ints, where -100 means "no target here" (the position counts for
    nothing, not even in the mean). Return dlogits: (..., V), same dtype as logits.
    loss = mean over counted positions of  logsumexp(z) - z[target]. Derive d loss / d z.""",
         """平均交叉熵对 logits 的梯度。

    logits: (..., V)；targets: (...) 整数，-100 表示“此处没有目标”（该位置完全不计，平均数里也不算）。
    返回 dlogits: (..., V)，dtype 与 logits 相同。
    loss = 对计入位置取平均的 logsumexp(z) - z[target]。推导 d loss / d z。"""),
        (("The derivative of logsumexp(z) with respect to z is a familiar function of z.",
          "The derivative of -z[target] is -1 at the target and 0 elsewhere (a one-hot row).",
          "Divide by the number of counted positions, and zero the rows whose target is -100."),
         ("logsumexp(z) 对 z 的导数是一个你熟悉的函数。",
          "-z[target] 的导数在目标处为 -1，其余为 0（one-hot 的一行）。",
          "除以计入的位置数，并把目标为 -100 的行清零。")),
        ("zerollm.nn.loss.cross_entropy_forward", "zerollm.nn.loss.cross_entropy_backward"),
        backprop.grade_cross_entropy_backward),
    _ex("layernorm_backward", 1, ("LayerNorm's backward", "LayerNorm 的反向传播"), "layernorm_backward(dy, x, w, b)",
        ("""LayerNorm over the last axis, eps = 1e-5: mean = mean(x), var = mean((x - mean)^2) (biased),
    xhat = (x - mean) / sqrt(var + eps), y = xhat * w + b.

    dy, x: (..., C); w, b: (C,). Return (dx (..., C), dw (C,), db (C,)). Both mean and var depend on x.""",
         """沿最后一个轴的 LayerNorm，eps = 1e-5：mean = mean(x)，var = mean((x - mean)^2)（有偏），
    xhat = (x - mean) / sqrt(var + eps)，y = xhat * w + b。

    dy, x: (..., C)；w, b: (C,)。返回 (dx (..., C), dw (C,), db (C,))。mean 和 var 都依赖 x。"""),
        (("dw and db add up over every token (every axis but the last).",
          "Write dxhat = dy * w, then follow xhat back through rstd = 1/sqrt(var + eps) and through the mean.",
          "The result has three terms inside rstd * (...): dxhat, one involving mean(dxhat), one involving "
          "xhat * mean(dxhat * xhat)."),
         ("dw 和 db 对所有词元求和（除最后一个轴外的所有轴）。",
          "令 dxhat = dy * w，再沿 rstd = 1/sqrt(var + eps) 和均值这两条路把 xhat 往回推。",
          "结果是 rstd * (...) 里的三项：dxhat、一项含 mean(dxhat)、一项含 xhat * mean(dxhat * xhat)。")),
        ("zerollm.nn.norm.layernorm_forward", "zerollm.nn.norm.layernorm_backward"), backprop.grade_layernorm_backward),
    _ex("rmsnorm_backward", 3, ("RMSNorm's backward", "RMSNorm 的反向传播"), "rmsnorm_backward(dy, x, w)",
        ("""RMSNorm over the last axis, eps = 1e-5: rstd = 1 / sqrt(mean(x^2) + eps), y = x * rstd * w.

    dy, x: (..., C); w: (C,). Return (dx (..., C), dw (C,)). rstd depends on x.""",
         """沿最后一个轴的 RMSNorm，eps = 1e-5：rstd = 1 / sqrt(mean(x^2) + eps)，y = x * rstd * w。

    dy, x: (..., C)；w: (C,)。返回 (dx (..., C), dw (C,))。rstd 依赖 x。"""),
        (("dw = sum over every token of dy * xhat, with xhat = x * rstd.",
          "d rstd / d x_j = -rstd^3 x_j / C.",
          "LayerNorm's formula without the mean term: rstd * (dxhat - xhat * mean(dxhat * xhat))? Derive it to be sure."),
         ("dw = 对所有词元求和 dy * xhat，其中 xhat = x * rstd。",
          "d rstd / d x_j = -rstd^3 x_j / C。",
          "像 LayerNorm 去掉均值那一项：rstd * (dxhat - xhat * mean(dxhat * xhat))？自己推一遍确认。")),
        ("zerollm.nn.norm.rmsnorm_forward", "zerollm.nn.norm.rmsnorm_backward"), backprop.grade_rmsnorm_backward),
    _ex("gelu_backward", 1, ("GELU's backward (tanh form)", "GELU 的反向传播（tanh 形式）"), "gelu_backward(dy, x)",
        ("""GPT-2's GELU: y = 0.5 x (1 + tanh(u)), u = sqrt(2/pi) (x + 0.044715 x^3).

    dy, x: (...) -> dx: (...), same dtype. Derive dy/dx (the product rule, then the chain rule through tanh).""",
         """GPT-2 的 GELU：y = 0.5 x (1 + tanh(u))，u = sqrt(2/pi) (x + 0.044715 x^3)。

    dy, x: (...) -> dx: (...)，dtype 不变。推导 dy/dx（先乘积法则，再经 tanh 的链式法则）。"""),
        (("Two factors: x and 0.5 (1 + tanh u). The product rule gives two terms.",
          "d tanh(u)/du = 1 - tanh(u)^2.",
          "du/dx = sqrt(2/pi) (1 + 3 * 0.044715 x^2); multiply the whole derivative by dy."),
         ("两个因子：x 和 0.5 (1 + tanh u)。乘积法则给出两项。",
          "d tanh(u)/du = 1 - tanh(u)^2。",
          "du/dx = sqrt(2/pi) (1 + 3 * 0.044715 x^2)；最后整体乘以 dy。")),
        ("zerollm.nn.activation.gelu_tanh_forward", "zerollm.nn.activation.gelu_tanh_backward"),
        backprop.grade_gelu_backward),
    _ex("linear_backward", 2, ("a linear layer's backward", "线性层的反向传播"), "linear_backward(dy, x, w)",
        ("""y = x @ w + b with x: (..., i), w: (i, o), b: (o,), dy: (..., o).

    Return (dx (..., i), dw (i, o), db (o,)). Every row of x (all leading axes) uses the same w and b.""",
         """y = x @ w + b，x: (..., i)，w: (i, o)，b: (o,)，dy: (..., o)。

    返回 (dx (..., i), dw (i, o), db (o,))。x 的每一行（所有前导轴）都共用同一个 w 和 b。"""),
        (("Check the shapes: which product of dy and w has the shape of x?",
          "Flatten the leading axes: x.reshape(-1, i), dy.reshape(-1, o).",
          "A weight used by N rows collects N contributions: dw and db are sums over the rows."),
         ("先对形状：dy 和 w 的哪种乘积与 x 形状相同？",
          "把前导轴展平：x.reshape(-1, i)，dy.reshape(-1, o)。",
          "被 N 行共用的权重收集 N 份贡献：dw 和 db 都是对各行求和。")),
        ("zerollm.nn.linear.linear_forward", "zerollm.nn.linear.linear_backward"), backprop.grade_linear_backward),
    _ex("attention_backward", 1, ("causal attention's backward", "因果注意力的反向传播"),
        "attention_backward(dout, q, k, v)",
        ("""Causal attention: S = q k^T / sqrt(hs), keys after each query hidden, A = softmax(S), out = A v.

    dout, q, k, v: (B, T, hs). Return (dq, dk, dv), each (B, T, hs). Recompute A first; walk the four steps
    back in reverse order.""",
         """因果注意力：S = q k^T / sqrt(hs)，每个查询之后的键被遮住，A = softmax(S)，out = A v。

    dout, q, k, v: (B, T, hs)。返回 (dq, dk, dv)，都是 (B, T, hs)。先重新算出 A，再把四步倒着走一遍。"""),
        (("out = A v is a matrix product: dA and dv come like a linear layer's dx and dw.",
          "The softmax's backward (the softmax_backward exercise) turns dA into dS; hidden entries have A = 0.",
          "S = q k^T * scale: dq = dS k * scale, and dk from the transpose of dS."),
         ("out = A v 是矩阵乘法：dA 和 dv 就像线性层的 dx 和 dw。",
          "softmax 的反向（softmax_backward 那道题）把 dA 变成 dS；被遮住的元素 A = 0。",
          "S = q k^T * scale：dq = dS k * scale，dk 来自 dS 的转置。")),
        ("zerollm.nn.attention.sdpa_forward", "zerollm.nn.attention.sdpa_backward",
         "zerollm.nn.attention.masked_softmax_backward"), attention.grade_attention_backward),
    _ex("rope", 3, ("rotary position embeddings (RoPE)", "旋转位置编码（RoPE）"), "rope(x, theta)",
        ("""Rotate queries or keys by their position (Su et al. 2021), in the rotate-half layout of Llama.

    x: (..., T, hs) with hs even; position p = 0 .. T-1 is the second-to-last axis. Channel i is paired with
    channel i + hs/2 (i < hs/2); the pair turns by the angle p * theta^(-2i/hs). Return y, same shape and dtype.""",
         """按位置旋转查询或键（Su 等，2021），采用 Llama 的 rotate-half 布局。

    x: (..., T, hs)，hs 为偶数；倒数第二个轴是位置 p = 0 .. T-1。第 i 个通道与第 i + hs/2 个配对
    （i < hs/2），这一对旋转 p * theta^(-2i/hs) 的角度。返回形状和 dtype 都不变的 y。"""),
        (("A 2-D rotation by a: (a1, a2) -> (a1 cos a - a2 sin a, a1 sin a + a2 cos a).",
          "Build the angles as np.outer(positions, inverse frequencies): (T, hs/2).",
          "Work on the two halves x[..., :hs//2] and x[..., hs//2:], then concatenate."),
         ("角度 a 的二维旋转：(a1, a2) -> (a1 cos a - a2 sin a, a1 sin a + a2 cos a)。",
          "角度用 np.outer(位置, 逆频率) 得到：(T, hs/2)。",
          "分别处理两半 x[..., :hs//2] 和 x[..., hs//2:]，再拼起来。")),
        ("zerollm.nn.position.rope_tables", "zerollm.nn.position.rotate_half", "zerollm.nn.position.rope_forward"),
        attention.grade_rope),
    _ex("kv_cache", 3, ("attending with a KV cache", "用 KV 缓存做注意力"),
        "attend_with_cache(k_cache, v_cache, q_new, k_new, v_new)",
        ("""One decoding step with a KV cache: P tokens were seen before, T new ones arrive.

    k_cache, v_cache: (B, P, hs) (P may be 0); q_new, k_new, v_new: (B, T, hs).
    Return (out (B, T, hs), k (B, P+T, hs), v (B, P+T, hs)): k and v are what the cache holds after this
    step, out is causal attention of the new queries over them. It must equal the last T rows of attention
    over all P+T tokens computed in one go.""",
         """带 KV 缓存的一步解码：之前已经见过 P 个词元，现在来了 T 个新的。

    k_cache, v_cache: (B, P, hs)（P 可以是 0）；q_new, k_new, v_new: (B, T, hs)。
    返回 (out (B, T, hs), k (B, P+T, hs), v (B, P+T, hs))：k 和 v 是这一步之后缓存里的内容，out 是
    新查询在其上的因果注意力。它必须等于一次性对全部 P+T 个词元做注意力的最后 T 行。"""),
        (("np.concatenate along the time axis (-2) keeps the positions in order.",
          "New query t sits at absolute position P + t.",
          "It may see key j when j <= P + t: every cached key, and the new ones up to itself."),
         ("沿时间轴（-2）用 np.concatenate，位置顺序保持不变。",
          "第 t 个新查询的绝对位置是 P + t。",
          "当 j <= P + t 时它能看到键 j：缓存里的全部键，以及新键中到它自己为止的那些。")),
        ("zerollm.model.kvcache.KVCache.update", "zerollm.nn.self_attention.causal_mask"), attention.grade_kv_cache),
    _ex("bpe_step", 4, ("one BPE merge", "一步 BPE 合并"), "bpe_step(ids, new_id)",
        ("""One step of byte-pair encoding's training (Sennrich et al. 2016).

    ids: a list of ints; new_id: the id of the new token. Count every adjacent pair, pick the most frequent
    (ties: the smallest (left, right) pair), and replace each of its occurrences, left to right, by new_id.
    Return (pair, new_ids): the pair as a tuple of two ints, new_ids a list.
    Example: [1, 2, 3, 1, 2] -> ((1, 2), [X, 3, X]).""",
         """字节对编码训练中的一步（Sennrich 等，2016）。

    ids：整数列表；new_id：新词元的 id。统计每个相邻词对，选出现最多的那一对（次数相同时取
    (左, 右) 最小的），从左到右把它的每次出现换成 new_id。
    返回 (pair, new_ids)：pair 是两个整数的元组，new_ids 是列表。
    例：[1, 2, 3, 1, 2] -> ((1, 2), [X, 3, X])。"""),
        (("collections.Counter(zip(ids, ids[1:])) counts the pairs.",
          "min(counts, key=lambda p: (-counts[p], p)) picks the most frequent, smallest first on ties.",
          "Walk with an index i: on a match append new_id and jump by 2, else append ids[i] and step by 1."),
         ("collections.Counter(zip(ids, ids[1:])) 统计词对。",
          "min(counts, key=lambda p: (-counts[p], p)) 取出现最多的，次数相同取最小的。",
          "用下标 i 往前走：匹配时追加 new_id 并跳过 2 个，否则追加 ids[i] 并前进 1 个。")),
        ("zerollm.tokenizers.bpe_train.count_pairs", "zerollm.tokenizers.bpe_train.merge_word"),
        pipeline.grade_bpe_step),
    _ex("top_k_top_p", 2, ("top-k and top-p filtering", "top-k 与 top-p 过滤"), "top_k_top_p(logits, top_k, top_p)",
        ("""Hide (set to -inf) the tokens a sampler must not draw.

    logits: (B, V) float64; top_k: an int or None; top_p: a float in (0, 1] or None.
    top-k keeps the k largest logits of each row; top-p (nucleus) then keeps the smallest set of the most
    likely tokens whose probabilities add up to at least top_p. Kept logits keep their values.
    Return the filtered logits, (B, V).""",
         """把采样时不能抽到的词元藏起来（设为 -inf）。

    logits: (B, V) float64；top_k：整数或 None；top_p：(0, 1] 之间的浮点数或 None。
    top-k 保留每行最大的 k 个 logit；top-p（核采样）再保留概率最大、累计概率至少达到 top_p 的
    最小词元集合。保留的 logit 值不变。返回过滤后的 logits，(B, V)。"""),
        (("np.partition or np.sort gives each row's k-th largest value.",
          "For top-p, sort the probabilities from largest to smallest (softmax of the logits left after top-k).",
          "A token is dropped when the tokens BEFORE it already reach top_p: compare cumsum - p with top_p."),
         ("np.partition 或 np.sort 可以得到每行第 k 大的值。",
          "做 top-p 时，把（top-k 之后剩下的 logit 的）softmax 概率从大到小排序。",
          "排在某词元之前的词元已经达到 top_p 时，它才被去掉：用 cumsum - p 和 top_p 比较。")),
        ("zerollm.generation.sample.filter_logits",), pipeline.grade_top_k_top_p),
    _ex("adamw_step", 2, ("one step of AdamW", "AdamW 的一步"), "adamw_step(p, g, m, v, t, hp)",
        ("""One AdamW update (Loshchilov & Hutter 2019) of one parameter.

    p, g, m, v: arrays of one shape (parameter, gradient, first and second moments); t: the step number,
    starting at 1; hp: {"lr", "betas": (b1, b2), "eps", "weight_decay"}. Return the new (p, m, v), same dtype.
    m and v are running averages of g and g*g that start at zero (so they need a bias correction),
    and the weight decay is decoupled: it shrinks p directly instead of being added to g.""",
         """对一个参数做一次 AdamW 更新（Loshchilov 与 Hutter，2019）。

    p, g, m, v：形状相同的数组（参数、梯度、一阶和二阶矩）；t：步数，从 1 开始；
    hp：{"lr", "betas": (b1, b2), "eps", "weight_decay"}。返回新的 (p, m, v)，dtype 不变。
    m 和 v 是 g 与 g*g 的滑动平均，从零开始（所以需要偏差修正）；权重衰减是解耦的：
    它直接缩小 p，而不是加到 g 上。"""),
        (("m = b1 m + (1 - b1) g; v = b2 v + (1 - b2) g^2.",
          "Bias correction: mhat = m / (1 - b1^t), vhat = v / (1 - b2^t).",
          "p shrinks by lr * weight_decay * p first; then p -= lr * mhat / (sqrt(vhat) + eps)."),
         ("m = b1 m + (1 - b1) g；v = b2 v + (1 - b2) g^2。",
          "偏差修正：mhat = m / (1 - b1^t)，vhat = v / (1 - b2^t)。",
          "先让 p 缩小 lr * weight_decay * p；再 p -= lr * mhat / (sqrt(vhat) + eps)。")),
        ("zerollm.training.optim.adamw_update", "zerollm.training.optim._adamw_steps"), pipeline.grade_adamw_step),
    _ex("lora_backward", 6, ("a LoRA layer's backward", "LoRA 层的反向传播"), "lora_backward(dd, x, A, B, scale)",
        ("""LoRA's side path (Hu et al. 2021): d = scale * (x @ A) @ B, the base weight frozen.

    x: (..., i); A: (i, r); B: (r, o); dd: (..., o); scale a float. Return (dx (..., i), dA (i, r), dB (r, o)).""",
         """LoRA 的旁路（Hu 等，2021）：d = scale * (x @ A) @ B，基座权重冻结。

    x: (..., i)；A: (i, r)；B: (r, o)；dd: (..., o)；scale 为浮点数。返回 (dx (..., i), dA (i, r), dB (r, o))。"""),
        (("Name the middle: h = x @ A, (..., r). Then d = scale * h @ B is a linear layer without bias.",
          "Flatten the leading axes first; dA and dB sum over every row.",
          "scale multiplies every path: dB, dh (and so dA and dx)."),
         ("给中间量起个名字：h = x @ A，(..., r)。于是 d = scale * h @ B 就是没有偏置的线性层。",
          "先把前导轴展平；dA 和 dB 都对所有行求和。",
          "scale 乘在每条路径上：dB、dh（因而 dA 和 dx 也有）。")),
        ("zerollm.nn.lora.lora_forward", "zerollm.nn.lora.lora_backward"), backprop.grade_lora_backward),
    _ex("dpo_gradient", 7, ("the DPO loss and its gradient", "DPO 损失及其梯度"),
        "dpo_gradient(pi_c, pi_r, ref_c, ref_r, beta)",
        ("""Direct Preference Optimization (Rafailov et al. 2023) over B preference pairs.

    pi_c, pi_r: (B,) log-probabilities of the chosen and rejected answers under the policy; ref_c, ref_r
    the same under the frozen reference. z = (pi_c - pi_r) - (ref_c - ref_r);
    loss = mean over pairs of -log sigmoid(beta z). Return (loss (a float), d_pi_c (B,), d_pi_r (B,)).""",
         """B 个偏好对上的直接偏好优化（Rafailov 等，2023）。

    pi_c, pi_r: (B,) 策略下被选中与被拒回答的对数概率；ref_c, ref_r 是冻结参考模型下的同样的量。
    z = (pi_c - pi_r) - (ref_c - ref_r)；loss = 对各对取平均的 -log sigmoid(beta z)。
    返回 (loss（浮点数）, d_pi_c (B,), d_pi_r (B,))。"""),
        (("-log sigmoid(a) = log(1 + exp(-a)); np.logaddexp(0, -a) computes it without overflow.",
          "d/da [-log sigmoid(a)] = -sigmoid(-a), and a = beta z.",
          "z grows with pi_c and falls with pi_r; the mean divides by B."),
         ("-log sigmoid(a) = log(1 + exp(-a))；np.logaddexp(0, -a) 计算它而不溢出。",
          "d/da [-log sigmoid(a)] = -sigmoid(-a)，其中 a = beta z。",
          "z 随 pi_c 增大、随 pi_r 减小；平均要除以 B。")),
        ("zerollm.align.objectives.dpo.dpo_loss",), pipeline.grade_dpo_gradient),
    _ex("grpo_advantages", 9, ("GRPO's group advantages", "GRPO 的组内优势"), "grpo_advantages(rewards, group_size)",
        ("""Group-relative advantages (Shao et al. 2024): each prompt was answered group_size times.

    rewards: (N * G,) float64, rows i*G .. i*G+G-1 answer prompt i. Return advantages (N * G,):
    each reward minus its group's mean, divided by (its group's std + 1e-4), the std with Bessel's
    correction (divide by G - 1).""",
         """组相对优势（Shao 等，2024）：每个提示被回答了 group_size 次。

    rewards: (N * G,) float64，第 i*G .. i*G+G-1 行回答第 i 个提示。返回 advantages (N * G,)：
    每个奖励减去所在组的均值，再除以（所在组的标准差 + 1e-4），标准差用贝塞尔校正（除以 G - 1）。"""),
        (("reshape(-1, G) puts each group on a row.",
          "mean and std along axis=1 with keepdims=True; np.std(..., ddof=1) is Bessel's.",
          "A group whose rewards are all equal must give 0, not NaN."),
         ("reshape(-1, G) 让每组占一行。",
          "沿 axis=1 求均值和标准差，keepdims=True；np.std(..., ddof=1) 就是贝塞尔校正。",
          "奖励全相同的组应得到 0，而不是 NaN。")),
        ("zerollm.align.rl.advantages.group_advantages",), pipeline.grade_grpo_advantages),
    _ex("grpo_loss", 9, ("GRPO's loss and its gradient", "GRPO 的损失及其梯度"),
        "grpo_loss(logp, old_logp, ref_logp, advantages, mask, epsilon=0.2, beta=0.04)",
        ("""GRPO's clipped objective with a KL penalty, per token, and its gradient with respect to logp.

    logp, old_logp, ref_logp: (B, T) log-probabilities of the sampled tokens now, at sampling time and under
    the reference; advantages: (B,); mask: (B, T) bool, the answer's tokens. Per token:
        rho = exp(logp - old_logp);  surrogate = -min(rho A, clip(rho, 1-eps, 1+eps) A)
        k3 = exp(ref - logp) - (ref - logp) - 1;  per_token = surrogate + beta k3
    loss = mean over each answer's masked tokens, then mean over the B answers.
    Return (loss (a float), dlogp (B, T), 0 outside the mask).""",
         """GRPO 带 KL 惩罚的裁剪目标（逐词元）及其对 logp 的梯度。

    logp, old_logp, ref_logp: (B, T) 采样词元现在、采样时和参考模型下的对数概率；advantages: (B,)；
    mask: (B, T) 布尔，回答的词元。逐词元：
        rho = exp(logp - old_logp)；surrogate = -min(rho A, clip(rho, 1-eps, 1+eps) A)
        k3 = exp(ref - logp) - (ref - logp) - 1；per_token = surrogate + beta k3
    loss = 先在每个回答的掩码词元上平均，再对 B 个回答平均。
    返回 (loss（浮点数）, dlogp (B, T)，掩码外为 0)。"""),
        (("d rho / d logp = rho. Where the clipped term is the smaller one, it is flat: gradient 0.",
          "d k3 / d logp = 1 - exp(ref - logp).",
          "Each token's weight is mask / (B * number of masked tokens in its row)."),
         ("d rho / d logp = rho。裁剪项更小的地方它是平的：梯度为 0。",
          "d k3 / d logp = 1 - exp(ref - logp)。",
          "每个词元的权重是 mask / (B * 该行掩码词元数)。")),
        ("zerollm.align.rl.losses._clipped_surrogate", "zerollm.align.rl.losses._masked_normaliser",
         "zerollm.align.rl.losses.grpo_loss"), pipeline.grade_grpo_loss),
]
EXERCISES.sort(key=lambda e: e.part)       # the course's order (stable: within a part, as listed above)
BY_NAME = {e.name: e for e in EXERCISES}
