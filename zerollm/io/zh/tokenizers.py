"""中文 of the tokenizers room's error messages (see zerollm/io/zh/__init__.py)."""

ZH = {
    "unknown tokenizer {0}; choose one of {1}":
        "未知的分词器 {0}；请从 {1} 中选一个",
    "the byte tokenizer always has vocab_size 256 and no options; drop --vocab-size, or use the bpe tokenizer for another size":
        "byte 分词器的 vocab_size 永远是 256，也没有其他选项；请去掉 --vocab-size，或者改用 bpe 分词器来得到别的大小",
    "text must be a str, got {0}":
        "text 必须是 str，收到的是 {0}",
    "the char tokenizer's vocab_size is the number of distinct characters in the text; drop --vocab-size, or use the bpe tokenizer":
        "char 分词器的 vocab_size 就是文本里不同字符的个数；请去掉 --vocab-size，或者改用 bpe 分词器",
    "the bpe tokenizer needs a vocab_size (e.g. --vocab-size 1024)":
        "bpe 分词器需要一个 vocab_size（例如 --vocab-size 1024）",
    "{0}: unknown tokenizer type {1}; this zerollm knows {2}":
        "{0}: 未知的分词器类型 {1}；这个版本的 zerollm 认识 {2}",
    "{0} is a damaged {1} tokenizer file: {2}":
        "{0} 是一个损坏的 {1} 分词器文件：{2}",
    "{0} is a damaged {1} tokenizer file ({2}: {3}); re-create it, e.g. with 'zerollm prepare'":
        "{0} 是一个损坏的 {1} 分词器文件（{2}: {3}）；请重新生成它，例如用 'zerollm prepare'",
    "{0} is not a valid {1}: expected a JSON object at the top":
        "{0} 不是有效的 {1}：最外层应该是一个 JSON 对象",
    "encode takes a str, got {0}; decode bytes first, e.g. data.decode('utf-8')":
        "encode 接受的是 str，收到的是 {0}；请先把字节解码，例如 data.decode('utf-8')",
    "the text holds {0} at character {1}, half of a UTF-16 surrogate pair, which is not a character; give valid Unicode text":
        "文本在下标 {1} 处有 {0}，它是 UTF-16 代理对的一半，不是一个字符；请给出合法的 Unicode 文本",
    "decode takes a 1-D sequence of ids, got shape {0}; decode one row at a time, e.g. [tok.decode(row) for row in ids]":
        "decode 接受一维的 id 序列，收到的形状是 {0}；请一次解码一行，例如 [tok.decode(row) for row in ids]",
    "decode takes integer ids, got {0} values such as {1}":
        "decode 接受整数 id，收到的是 {0} 类型的值，例如 {1}",
    "id {0} is outside this tokenizer's vocabulary (0..{1}); were these ids made with a different tokenizer?":
        "id {0} 超出了这个分词器的词表（0..{1}）；这些 id 是不是用另一个分词器生成的？",
    "special tokens must be non-empty strings, got {0}":
        "特殊 token 必须是非空字符串，收到的是 {0}",
    "{0} are not special tokens of this tokenizer; it has {1}":
        "{0} 不是这个分词器的特殊 token；它有的是 {1}",
    "allowed_special must be 'none', 'all' or a set of special tokens, got {0}":
        "allowed_special 必须是 'none'、'all' 或一组特殊 token，收到的是 {0}",
    "no Hugging Face form for a {0} tokenizer":
        "{0} 分词器没有 Hugging Face 形式",
    "{0} is not a zerollm tokenizer (format is {1}, expected {2}); save one with tokenizer.save(path)":
        "{0} 不是 zerollm 的分词器（format 是 {1}，应该是 {2}）；请用 tokenizer.save(path) 保存一个",
    "{0} has tokenizer format version {1}, but this zerollm reads versions {2} to {3}; re-create the tokenizer or upgrade zerollm":
        "{0} 的分词器格式版本是 {1}，但这个 zerollm 只能读版本 {2} 到 {3}；请重新生成分词器，或者升级 zerollm",
    "'{0}' must be an object {{text: id}}":
        "'{0}' 必须是 {{text: id}} 形式的对象",
    "'{0}' must map non-empty texts to the ids {1}, {2}, ... that follow the vocabulary, got {3}":
        "'{0}' 必须把非空文本映射到词表之后的 id：{1}、{2}、……，收到的是 {3}",
    "bad token {0}: expected a string or a list of byte values 0..255":
        "错误的 token {0}：应该是一个字符串，或由 0..255 的字节值组成的列表",
    "special tokens must be distinct, got {0}":
        "特殊 token 不能重复，收到的是 {0}",
    "BPE vocab_size must be an integer >= {0} (256 bytes + {1} special token(s)), got {2}; try 512, 1024 or 4096":
        "BPE 的 vocab_size 必须是 >= {0} 的整数（256 个字节 + {1} 个特殊 token），收到的是 {2}；可以试试 512、1024 或 4096",
    "BPE trains on a str, got {0}":
        "BPE 训练需要的是 str，收到的是 {0}",
    "id {0} is not used by this tokenizer's vocabulary":
        "这个分词器的词表没有用到 id {0}",
    "no token with id {0} (vocab_size {1})":
        "没有 id 为 {0} 的 token（vocab_size {1}）",
    "merge {0} uses tokens missing from 'vocab'":
        "合并规则 {0} 用到了 'vocab' 里没有的 token",
    "'special_tokens' must be an object {{text: id}}":
        "'special_tokens' 必须是 {{text: id}} 形式的对象",
    "merge ({0}, {1}) uses an id that no earlier token has":
        "合并规则 ({0}, {1}) 用到了一个前面的 token 都没有的 id",
    "token ids must be integers >= 0":
        "token id 必须是 >= 0 的整数",
    "tokens {0} and {1} have the same bytes {2}; each must be unique":
        "token {0} 和 {1} 的字节相同，都是 {2}；每个 token 的字节必须唯一",
    "a byte-level BPE vocabulary needs all 256 single bytes; {0} of them missing (the first: byte {1}): train with the full byte alphabet":
        "字节级 BPE 的词表需要全部 256 个单字节；缺了 {0} 个（第一个是字节 {1}）：请用完整的字节表训练",
    "merge ({0}, {1}) -> {2} does not match the vocabulary":
        "合并规则 ({0}, {1}) -> {2} 和词表对不上",
    "special token {0} -> {1}: needs non-empty text and a free id >= 0":
        "特殊 token {0} -> {1}：需要非空的文本和一个 >= 0 的空闲 id",
    "two special tokens share an id":
        "有两个特殊 token 用了同一个 id",
    "special tokens must be distinct non-empty strings, got {0}":
        "特殊 token 必须是互不相同的非空字符串，收到的是 {0}",
    "a byte tokenizer has no settings but its special tokens, yet the file has {0}":
        "byte 分词器除了特殊 token 没有别的设置，文件里却有 {0}",
    "a char tokenizer needs at least one character; train it on non-empty text":
        "char 分词器至少需要一个字符；请用非空的文本训练它",
    "chars must be distinct single characters":
        "chars 必须是互不相同的单个字符",
    "unk must be None or a non-empty string such as '<unk>', got {0}":
        "unk 必须是 None 或非空字符串（例如 '<unk>'），收到的是 {0}",
    "added plain characters must be single characters; add longer strings as special tokens":
        "新加的普通字符必须是单个字符；更长的字符串请作为特殊 token 加入",
    "every token of a char tokenizer (characters, unk, added tokens) must be a distinct non-empty string":
        "char 分词器的每个 token（字符、unk、新加的 token）都必须是互不相同的非空字符串",
    "a char tokenizer trains on a str, got {0}":
        "char 分词器训练需要的是 str，收到的是 {0}",
    "cannot build a char tokenizer from empty text; give it your corpus":
        "无法从空文本构建 char 分词器；请给它你的语料",
    "with_chars takes single characters, got {0}":
        "with_chars 只接受单个字符，收到的是 {0}",
    "{0} are already special tokens of this tokenizer":
        "{0} 已经是这个分词器的特殊 token 了",
    "{0} are already ordinary tokens of this tokenizer, so they cannot become special tokens":
        "{0} 已经是这个分词器的普通 token，不能再变成特殊 token",
    "{0} character(s) are not in this char tokenizer's vocabulary: {1}{2}{3}":
        "有 {0} 个字符不在这个字符级分词器的词表里：{1}{2}{3}",
    "'chars' must be a list of single characters":
        "'chars' 必须是单个字符组成的列表",
    "'added' must be a list of [text, is_special] pairs":
        "'added' 必须是 [text, is_special] 对组成的列表",
    "Hugging Face tokenizers cannot use this tokenizer ({0}); the split regex {1} may use a feature its regex engine (Oniguruma) lacks: use pattern 'gpt2' or 'gpt4'":
        "Hugging Face tokenizers 用不了这个分词器（{0}）；预切分正则 {1} 可能用了它的正则引擎（Oniguruma）不支持的特性：请用 pattern 'gpt2' 或 'gpt4'",
    "Hugging Face's regex engine (Oniguruma) splits text differently with the pattern {0}, so tokenizer.json would give other ids; use pattern 'gpt2' or 'gpt4'":
        "Hugging Face 的正则引擎（Oniguruma）用 {0} 这个模式切分文本的结果不同，tokenizer.json 会给出别的 id；请用 pattern 'gpt2' 或 'gpt4'",
    "{0}: token {1} is not a byte-level token; only byte-level BPE (GPT-2 style) tokenizers can be imported":
        "{0}: token {1} 不是字节级 token；只能导入字节级 BPE（GPT-2 风格）的分词器",
    "{0}: the vocabulary lacks {1} of the 256 single-byte tokens (the first: byte {2}, written {3}); a byte-level BPE tokenizer needs every one: the file is incomplete, or its tokenizer is not GPT-2 style":
        "{0}: 词表缺少 256 个单字节 token 中的 {1} 个（第一个是字节 {2}，写作 {3}）；字节级 BPE 分词器每一个都需要：文件不完整，或者它的分词器不是 GPT-2 风格的",
    "{0}: merge '{1} {2}' needs token {3}, which is not in the vocabulary; do these files belong together?":
        "{0}: 合并规则 '{1} {2}' 需要 token {3}，但它不在词表里；这些文件是一套的吗？",
    "merges file not found: {0}":
        "找不到 merges 文件：{0}",
    "{0} line {1}: expected two tokens separated by one space, got {2}":
        "{0} 第 {1} 行：应该是用一个空格隔开的两个 token，收到的是 {2}",
    "{0}: expected {{token: integer id}}":
        "{0}: 应该是 {{token: 整数 id}} 形式",
    "{0}: unsupported pre_tokenizer; zerollm imports ByteLevel (add_prefix_space false) or Split(regex, isolated) + ByteLevel(use_regex false)":
        "{0}: 不支持的 pre_tokenizer；zerollm 能导入 ByteLevel（add_prefix_space false），或 Split(regex, isolated) + ByteLevel(use_regex false)",
    "{0}: {1} must be {2}; the file is damaged or not a Hugging Face tokenizer.json":
        "{0}: {1} 必须是 {2}；文件已损坏，或者不是 Hugging Face 的 tokenizer.json",
    "{0}: model type is {1}; only BPE can be imported":
        "{0}: 模型类型是 {1}；只能导入 BPE",
    "{0}: BPE option {1}={2} is not supported":
        "{0}: 不支持 BPE 选项 {1}={2}",
    "{0} has neither tokenizer.json nor vocab.json + merges.txt; point at a Hugging Face model folder such as a saved 'gpt2'":
        "{0} 里既没有 tokenizer.json，也没有 vocab.json + merges.txt；请指向一个 Hugging Face 模型目录，例如保存下来的 'gpt2'",
    "Hugging Face tokenizers cannot use this {0} tokenizer ({1})":
        "Hugging Face tokenizers 用不了这个 {0} 分词器（{1}）",
    "Hugging Face tokenizers would give other ids for this {0} tokenizer; please report this as a zerollm bug":
        "Hugging Face tokenizers 对这个 {0} 分词器会给出不同的 id；请把这个问题作为 zerollm 的 bug 报告",
    "{0}: a character vocabulary must use the ids 0, 1, 2, ... without gaps":
        "{0}: 字符词表必须连续使用 id 0, 1, 2, ...，中间不能有空缺",
    "pattern must be 'gpt2', 'gpt4' or a regex string, got {0}":
        "pattern 必须是 'gpt2'、'gpt4' 或一个正则字符串，收到的是 {0}",
    "the split pattern {0} is not a valid regex ({1}); use 'gpt2', 'gpt4' or fix the regex":
        "预切分模式 {0} 不是合法的正则（{1}）；请用 'gpt2'、'gpt4'，或者改正这个正则",
    "normalizer must be None or one of {0}, got {1}":
        "normalizer 必须是 None 或 {0} 之一，收到的是 {1}",
    "'normalizer' must be one of {0} or absent, got {1}":
        "'normalizer' 必须是 {0} 之一，或者不写，收到的是 {1}",
    "'chat_family' must be one of {0} or absent, got {1}":
        "'chat_family' 只能是 {0} 之一或不写，实际是 {1}",
    "{0}: has a normalizer zerollm does not implement ({1}); only NFC (Qwen2's and Qwen3's) is":
        "{0}: 带有 zerollm 没有实现的 normalizer（{1}）；只支持 NFC（Qwen2 和 Qwen3 用的就是它）",
    "{0}{1} is a split regex zerollm does not run ({2}): a tokenizer read from a file may only use GPT-2's, GPT-4's, Llama 3's or Qwen2's split regex; retrain the tokenizer with --pattern gpt2 or gpt4":
        "{0}{1} 是 zerollm 不运行的预切分正则（{2}）：从文件读入的分词器只能用 GPT-2、GPT-4、Llama 3 或 Qwen2 的预切分正则；请用 --pattern gpt2 或 gpt4 重新训练分词器",

    # A piece of a message built elsewhere: UnknownCharacters joins what it found (the template above) and what a
    # Python caller can do, so the whole line is here too (command_line()'s form is in zerollm/io/zh/cli.py).
    "{0} character(s) are not in this char tokenizer's vocabulary: {1}; train the tokenizer on text that contains them, add them with tokenizer.with_chars(...), use the byte or bpe tokenizer, or create it with unk='<unk>' to map unknown characters to one id":
        "有 {0} 个字符不在这个字符级分词器的词表里：{1}；可以用包含这些字符的文本训练分词器，用 tokenizer.with_chars(...) 把它们加进去，改用 byte 或 bpe 分词器，或者创建分词器时加上 unk='<unk>'，把未知字符都映射到同一个 id",
    # issue 57 item 7: what check_tokenizer_json (tokenizers/hf.py) says each part must be
    "a JSON object":
        "JSON 对象",
    "an object of token: id (a whole number >= 0)":
        "由 token: id（>= 0 的整数）组成的对象",
    'a list of "left right" strings or [left, right] pairs':
        '由 "left right" 字符串或 [left, right] 对组成的列表',
    'a list of {{"id": whole number, "content": text}} objects':
        '由 {{"id": 整数, "content": 文本}} 对象组成的列表',
    "a JSON object or null":
        "JSON 对象或 null",
    "a list of JSON objects":
        "JSON 对象的列表",
}
