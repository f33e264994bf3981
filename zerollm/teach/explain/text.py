"""Every sentence of the explainer page, in 中文 and English.

The page carries this whole table and switches language in place; ``{name}`` fields are filled in
by the page's script (numbers, token labels), the same way ``zerollm.io.i18n.translator`` fills them
in the terminal walkthroughs. Keys starting with ``how_`` explain one number when it is hovered,
tapped or focused.
"""

PAGE_TEXT = {
    # --- the page around the sections ------------------------------------------------------------
    "page_title": {"zh": "zerollm explain：看得见、摸得着的注意力",
                   "en": "zerollm explain: attention you can look at and touch"},
    "subtitle": {
        "zh": "这一页的每个数都来自 zerollm 的 NumPy 代码；手算部分在页面里重新计算，改一个输入，后面每一步都会跟着变。"
              "把鼠标移到（或点一下、用 Tab 键走到）任何一个数上，就能看到它是怎么算出来的。",
        "en": "Every number on this page comes from zerollm's NumPy code; the walkthrough is recomputed in the "
              "page, so changing an input changes every later step. Hover, tap or Tab to any number to see "
              "how it was made.",
    },
    "lang_label": {"zh": "语言", "en": "Language"},
    "nav_seed": {"zh": "手算自注意力", "en": "Self-attention by hand"},
    "nav_model": {"zh": "模型内部", "en": "Inside a model"},
    "footer": {"zh": "由 zerollm {version} 生成。整页就是一个文件，不联网也能打开，可以直接发给别人。",
               "en": "Made by zerollm {version}. The whole page is one file that works offline: share it as it is."},
    "no_script": {"zh": "这一页需要 JavaScript 才能计算和显示数字。",
                  "en": "This page needs JavaScript to compute and show its numbers."},

    # --- section 1: the seed's walkthrough -------------------------------------------------------
    "seed_h": {"zh": "1. 手算自注意力：课程里的例子", "en": "1. Self-attention by hand: the course's example"},
    "seed_intro": {
        "zh": "B = 1 个序列，T = {T} 个 token，d_model = {C}，d_k = {K}。改动下面 X 里的数，每一步都会重新计算。",
        "en": "B = 1 sequence, T = {T} tokens, d_model = {C}, d_k = {K}. Change a number of X below and every "
              "step is computed again.",
    },
    "mask_legend": {"zh": "掩码", "en": "Mask"},
    "causal_opt": {"zh": "因果（GPT：每个 token 只看自己和前面的 token）",
                   "en": "causal (GPT: each token sees itself and earlier tokens)"},
    "bidir_opt": {"zh": "双向（BERT：每个 token 看所有 token）",
                  "en": "bidirectional (BERT: every token sees every token)"},
    "reset": {"zh": "恢复原来的 X", "en": "Reset X"},
    "x_invalid": {"zh": "“{value}” 不是一个数；页面保留上一次有效的 X。",
                  "en": "\u201c{value}\u201d is not a number; the page keeps the last valid X."},
    "step0": {"zh": "第 0 步：输入 X 和三个学出来的矩阵", "en": "Step 0: the input X and three learned matrices"},
    "step0_text": {
        "zh": "X 的每一行是一个 token 的向量；真实模型里它来自词嵌入加位置编码。Wq、Wk、Wv 是模型学出来的参数，这里写死，方便手算。",
        "en": "Each row of X is one token's vector; in a real model it is a token embedding plus a position. "
              "Wq, Wk, Wv are learned; here they are fixed so you can check every step by hand.",
    },
    "step1": {"zh": "第 1 步：线性投影 Q = X·Wq，K = X·Wk，V = X·Wv",
              "en": "Step 1: projections Q = X·Wq, K = X·Wk, V = X·Wv"},
    "step1_text": {
        "zh": "查询 Q：这个 token 想找什么；键 K：这个 token 能被什么找到；值 V：被关注时交出去的内容。",
        "en": "Query Q: what this token looks for; key K: what it can be found by; value V: what it hands over "
              "when attended to.",
    },
    "step2": {"zh": "第 2 步：缩放点积 scores = Q·Kᵀ × scale", "en": "Step 2: scaled dot product scores = Q·Kᵀ × scale"},
    "step2_text": {
        "zh": "d_k 个乘积相加，点积的大小随 d_k 增长；乘以 1/√d_k，分数的尺度就与 d_k 无关，softmax 不会变成 one-hot。",
        "en": "A dot product adds d_k products, so it grows with d_k; multiplying by 1/√d_k keeps the scores' "
              "size steady, so softmax does not turn one-hot.",
    },
    "scale_label": {"zh": "缩放因子 scale = 1/√d_k =", "en": "scale = 1/√d_k ="},
    "step3_causal": {"zh": "第 3 步：因果掩码 —— 遮住未来", "en": "Step 3: the causal mask hides the future"},
    "step3_causal_text": {
        "zh": "解码器要预测下一个 token，如果位置 i 能看到后面的 token，就等于偷看答案。对角线以上被遮住，分数变成 −∞。",
        "en": "A decoder predicts the next token; if position i could read later tokens it would read the "
              "answer. Everything above the diagonal is hidden and its score becomes −∞.",
    },
    "step3_bidir": {"zh": "第 3 步：不加掩码（双向）", "en": "Step 3: no mask (bidirectional)"},
    "step3_bidir_text": {
        "zh": "编码器一次读入整句话，不预测下一个 token，所以什么都不遮：分数原样进入 softmax。",
        "en": "An encoder reads the whole sentence at once and predicts no next token, so nothing is hidden: "
              "the scores go into softmax unchanged.",
    },
    "step4": {"zh": "第 4 步：softmax 把每一行分数变成权重", "en": "Step 4: softmax turns each row of scores into weights"},
    "step4_text": {
        "zh": "weights = exp(s − max) / Σ exp(s − max)，逐行计算。每一行非负、和为 1；被遮住的位置权重正好是 0。",
        "en": "weights = exp(s − max) / Σ exp(s − max), row by row. Every row is non-negative and sums to 1; "
              "hidden positions get exactly 0.",
    },
    "step5": {"zh": "第 5 步：按权重混合值向量 out = weights·V", "en": "Step 5: mix the values: out = weights·V"},
    "step5_text": {
        "zh": "每个输出向量都是它能看见的值向量的加权平均。Wq、Wk、Wv 是学出来的，所以“谁关注谁”也是学出来的。",
        "en": "Every output vector is a weighted average of the value vectors its token can see. Wq, Wk, Wv "
              "are learned, so who attends to whom is learned too.",
    },
    "cap_x": {"zh": "X：每行一个 token（可以改）", "en": "X: one row per token (editable)"},
    "cap_wq": {"zh": "Wq（查询投影）", "en": "Wq (query projection)"},
    "cap_wk": {"zh": "Wk（键投影）", "en": "Wk (key projection)"},
    "cap_wv": {"zh": "Wv（值投影）", "en": "Wv (value projection)"},
    "cap_q": {"zh": "Q（查询）", "en": "Q (queries)"},
    "cap_k": {"zh": "K（键）", "en": "K (keys)"},
    "cap_v": {"zh": "V（值）", "en": "V (values)"},
    "cap_scores": {"zh": "分数：行 = 查询，列 = 键", "en": "scores: row = query, column = key"},
    "cap_mask": {"zh": "掩码：✕ = 遮住，✓ = 可见", "en": "mask: ✕ = hidden, ✓ = visible"},
    "cap_masked": {"zh": "遮住后的分数：被遮住的变成 −∞", "en": "masked scores: hidden ones become −∞"},
    "cap_weights": {"zh": "注意力权重：每行和为 1", "en": "attention weights: each row sums to 1"},
    "cap_out": {"zh": "输出：每个 token 一个新向量", "en": "output: a new vector per token"},
    "hdr_token": {"zh": "token {i}", "en": "token {i}"},
    "hdr_dim": {"zh": "维 {i}", "en": "dim {i}"},
    "hdr_col": {"zh": "列 {i}", "en": "col {i}"},
    "hdr_query": {"zh": "查询 {i}", "en": "query {i}"},
    "hdr_key": {"zh": "键 {i}", "en": "key {i}"},
    "edit_x": {"zh": "X 第 {i} 行第 {j} 列", "en": "X row {i} column {j}"},
    "hidden": {"zh": "遮住", "en": "hidden"},
    "visible": {"zh": "可见", "en": "visible"},

    # --- how each number was made (shown on hover, tap or focus) -----------------------------------
    "how_x": {"zh": "X[{i}][{j}] = {value}：输入的数（可以改）。真实模型里是词嵌入加位置编码。",
              "en": "X[{i}][{j}] = {value}: an input number (you can change it). In a real model it is a "
                    "token embedding plus a position."},
    "how_w": {"zh": "{name}[{i}][{j}] = {value}：学出来的权重，这里写死，方便手算。",
              "en": "{name}[{i}][{j}] = {value}: a learned weight, fixed here so you can check by hand."},
    "how_proj": {"zh": "{name}[{i}][{j}] = X 第 {i} 行 · {w} 第 {j} 列 = {terms} = {value}",
                 "en": "{name}[{i}][{j}] = row {i} of X · column {j} of {w} = {terms} = {value}"},
    "how_scale": {"zh": "scale = 1/√d_k = 1/√{K} = {value}", "en": "scale = 1/√d_k = 1/√{K} = {value}"},
    "how_score": {"zh": "scores[{i}][{j}] = (Q[{i}] · K[{j}]) × scale = ({terms}) × {scale} = {value}",
                  "en": "scores[{i}][{j}] = (Q[{i}] · K[{j}]) × scale = ({terms}) × {scale} = {value}"},
    "how_mask_hidden": {"zh": "键 {j} 在查询 {i} 之后：遮住（不能偷看未来）",
                        "en": "key {j} comes after query {i}: hidden (no reading the future)"},
    "how_mask_visible": {"zh": "键 {j} 不在查询 {i} 之后：可见", "en": "key {j} is not after query {i}: visible"},
    "how_mask_bidir": {"zh": "双向：什么都不遮，键 {j} 对查询 {i} 可见",
                       "en": "bidirectional: nothing is hidden, key {j} is visible to query {i}"},
    "how_masked_hidden": {"zh": "遮住 → −∞；exp(−∞) = 0，所以这个权重正好是 0",
                          "en": "hidden → −∞; exp(−∞) = 0, so this weight is exactly 0"},
    "how_masked_visible": {"zh": "可见 → 分数不变：{value}", "en": "visible → the score itself: {value}"},
    "how_weight": {
        "zh": "weights[{i}][{j}] = exp(s − max) / Σ exp(s − max) = exp({s} − {max}) / {sum} = {e} / {sum} = {value}"
              "（max 和 Σ 取第 {i} 行）",
        "en": "weights[{i}][{j}] = exp(s − max) / Σ exp(s − max) = exp({s} − {max}) / {sum} = {e} / {sum} = {value} "
              "(max and Σ over row {i})",
    },
    "how_weight_hidden": {"zh": "weights[{i}][{j}] = exp(−∞) / {sum} = 0（被遮住）",
                          "en": "weights[{i}][{j}] = exp(−∞) / {sum} = 0 (hidden)"},
    "how_out": {"zh": "out[{i}][{j}] = Σ_k weights[{i}][k] · V[k][{j}] = {terms} = {value}",
                "en": "out[{i}][{j}] = Σ_k weights[{i}][k] · V[k][{j}] = {terms} = {value}"},

    # --- section 2: a model ----------------------------------------------------------------------
    "model_h": {"zh": "2. 模型内部：{name}", "en": "2. Inside a model: {name}"},
    "model_h_none": {"zh": "2. 模型内部", "en": "2. Inside a model"},
    "model_none": {
        "zh": "这一页没有模型。想看自己训练的模型，就加上 --ckpt 和 --text（Hugging Face 模型用 --hf）：",
        "en": "There is no model on this page. To look inside one you trained, add --ckpt and --text "
              "(--hf for a Hugging Face model):",
    },
    "model_facts": {
        "zh": "{n_layer} 层 × {n_head} 个头，d_model = {n_embd}，上下文 {block_size} 个 token，分词器：{tokenizer}；你的文字是 {T} 个 token。",
        "en": "{n_layer} layers × {n_head} heads, d_model = {n_embd}, context {block_size} tokens, tokenizer: "
              "{tokenizer}; your text is {T} tokens.",
    },
    "tokens_h": {"zh": "你的文字，逐个 token：点一个 token（或按回车）看它在看哪里",
                 "en": "Your text, token by token: click a token (or press Enter on it) to see where it looks"},
    "layer_label": {"zh": "层", "en": "layer"},
    "head_label": {"zh": "头", "en": "head"},
    "looks": {
        "zh": "第 {l} 层第 {h} 个头里，token {i}（{tok}）的注意力：每个 token 下面的数就是它得到的权重。",
        "en": "Layer {l}, head {h}: where token {i} ({tok}) looks. The number under each token is the weight "
              "it gets.",
    },
    "grid_h": {"zh": "所有层和头（行 = 层，列 = 头）：点一个小图选中它",
               "en": "Every layer and head (row = layer, column = head): click a picture to choose it"},
    "grid_item": {"zh": "第 {l} 层，第 {h} 个头", "en": "layer {l}, head {h}"},
    "heat_cap": {"zh": "第 {l} 层第 {h} 个头的注意力权重（行 = 查询，列 = 键，· = 被遮住）",
                 "en": "Attention weights of layer {l}, head {h} (row = query, column = key, · = hidden)"},
    "top5_h": {"zh": "下一个 token 的猜测：每个位置概率最高的 5 个",
               "en": "Next-token guesses: the 5 most likely tokens at every position"},
    "col_pos": {"zh": "位置", "en": "position"},
    "col_tok": {"zh": "token", "en": "token"},
    "col_next": {"zh": "文中的下一个", "en": "next in your text"},
    "col_rank": {"zh": "第 {r} 名", "en": "guess {r}"},
    "next_none": {"zh": "（文字结束）", "en": "(end of text)"},
    "in_top5": {"zh": "在前 5 名里", "en": "among the top 5"},
    "loss_h": {"zh": "训练损失（log.jsonl）", "en": "Training loss (log.jsonl)"},
    "loss_none": {"zh": "这个模型没有 log.jsonl，所以没有损失曲线。", "en": "This model has no log.jsonl, so there is no loss curve."},
    "loss_step": {"zh": "步数", "en": "step"},
    "loss_axis": {"zh": "交叉熵损失", "en": "cross-entropy loss"},
    "loss_train": {"zh": "训练（每一步）", "en": "train (every step)"},
    "loss_eval_train": {"zh": "训练（评估）", "en": "train (eval)"},
    "loss_val": {"zh": "验证（评估）", "en": "validation (eval)"},
    "loss_summary": {"zh": "第 {first} 步损失 {a}，第 {last} 步 {b}。", "en": "Loss {a} at step {first}, {b} at step {last}."},

    # --- notes about how the model's numbers were obtained --------------------------------------
    "note_truncated": {
        "zh": "你的文字有 {n} 个 token，这里只显示前 {T} 个（模型的上下文是 {ctx} 个，这一页最多放 {max} 个）。",
        "en": "Your text is {n} tokens; the page shows the first {T} (the model's context is {ctx}, the page "
              "keeps at most {max}).",
    },
    "note_flash": {
        "zh": "这个模型用 attn_impl=flash 训练，flash 从不保存注意力权重；这一页把同一组权重装进 attn_impl=naive 的模型"
              "（数值相同，只是按普通方法计算）来显示它们。",
        "en": "This model was trained with attn_impl=flash, which never stores attention weights; the page loaded "
              "the same weights into a model with attn_impl=naive (the same numbers, computed the plain way) to "
              "show them.",
    },
    "note_bidirectional": {
        "zh": "这是双向模型（causal=false）：每个位置都看得见后面的 token，所以它的“下一个 token”猜测是在偷看答案。",
        "en": "This model is bidirectional (causal=false): every position sees the tokens after it, so its "
              "next-token guesses read the answer.",
    },
    "note_log_broken": {"zh": "log.jsonl 有 {n} 行读不出来，已跳过（可能是训练中断时写了一半）。",
                        "en": "{n} line(s) of log.jsonl could not be read and were skipped (perhaps cut off "
                              "when training stopped)."},
}
