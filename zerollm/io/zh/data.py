"""中文 of the data room's messages: its error templates (scripts/zh_catalog.py --room data).

Keys are templates: {0}, {1}, ... stand for the values filled in, in the order of the English.
"""

ZH = {
    'unknown template needs {0}; they are {1}':
        '未知的模板需要 {0}；它们是 {1}',
    'resize_model grows the vocabulary; got vocab_size={0} for a model with {1} tokens':
        'resize_model 只能扩大词表；但给的是 vocab_size={0}，而模型有 {1} 个 token',
    'the tokenizer has no {0} token: this model was not trained on {1}; fine-tune it with zerollm sft on data that has them (e.g. zerollm tasks make calc --tools)':
        '分词器里没有 {0} 这个 token：这个模型没在 {1} 上训练过；请用含有它们的数据做 zerollm sft 微调（例如 zerollm tasks make calc --tools）',
    'the tokenizer has no {0} token, so it cannot use the chat template; extend it first with zerollm.data.chat.prepare_tokenizer (zerollm sft does this)':
        '分词器里没有 {0} 这个 token，所以不能使用聊天模板；请先用 zerollm.data.chat.prepare_tokenizer 扩展它（zerollm sft 会这样做）',
    "{0}: an example is a dict with 'prompt' and 'completion', or 'messages'":
        "{0}：一个样例是带 'prompt' 和 'completion'，或带 'messages' 的字典",
    '{0}: the arguments of {1} must be a JSON object (or a string holding one), got {2}':
        '{0}：{1} 的参数必须是一个 JSON 对象（或装着这样一个对象的字符串），实际是 {2}',
    'unknown corpus {0}; the package ships {1}':
        '未知的语料 {0}；安装包自带的是 {1}',
    'the corpus file {0} is missing from this installation; reinstall zerollm (pip install -e .) from a complete checkout':
        '这份安装里缺少语料文件 {0}；请从完整的代码仓库重新安装 zerollm（pip install -e .）',
    '{0} must start with http:// or https://; {1}':
        '{0} 必须以 http:// 或 https:// 开头；{1}',
    '{0} is not a valid URL ({1}); {2}':
        '{0} 不是有效的 URL（{1}）；{2}',
    '{0} names no host; {1}':
        '{0} 里没有主机名；{1}',
    'checksum mismatch for {0}: got sha256 {1}, expected {2}; the download is damaged or the URL serves another file (nothing was saved)':
        '{0} 的校验和不符：得到的 sha256 是 {1}，应为 {2}；下载的文件已损坏，或这个地址给的是另一个文件（什么都没有保存）',
    'download failed: HTTP {0} {1} for {2}; {3}':
        '下载失败：HTTP {0} {1}，地址 {2}；{3}',
    "could not download {0} ({1}); check your internet connection{2}, or fetch the file another way and use 'zerollm prepare --data FILE'; tiny Shakespeare also ships with zerollm: 'zerollm train --data shakespeare' needs no download":
        "无法下载 {0}（{1}）；请检查网络连接{2}，或者用别的方法取得文件，再用 'zerollm prepare --data FILE'；tiny Shakespeare 也随 zerollm 一起提供：'zerollm train --data shakespeare' 不需要下载",
    'unknown dataset {0}; available: {1}':
        '未知的数据集 {0}；可选的有：{1}',
    '--sha256 {0}':
        '--sha256 {0}',
    '{0} already exists and is not the expected download (sha256 {1}, expected {2}); replace it with --force, or choose another --dir':
        '{0} 已经存在，但不是预期的下载内容（sha256 {1}，应为 {2}）；用 --force 替换它，或换一个 --dir',
    "data file not found: {0}; make one with 'zerollm tasks make' or check the path":
        "找不到数据文件：{0}；用 'zerollm tasks make' 生成一个，或检查路径",
    '{0}: longer than {1} MiB; one example a line, each shorter than that (is this really a JSONL file?)':
        '{0}：超过 {1} MiB；每行一个样例，每行都要比这短（这真的是 JSONL 文件吗？）',
    '{0}: not UTF-8 text; {1}':
        '{0}：不是 UTF-8 文本；{1}',
    '{0}: expected a JSON object {{...}}, got {1}':
        '{0}：应为一个 JSON 对象 {{...}}，实际是 {1}',
    '{0} has no examples (it is empty or only blank lines)':
        '{0} 里没有样例（文件是空的，或只有空行）',
    '{0}: not valid JSON ({1} at column {2}); each line must be one JSON object':
        '{0}：不是有效的 JSON（{1}，在第 {2} 列）；每行必须是一个 JSON 对象',
    '{0}: nested deeper than {1} levels; an example is a flat object of texts and numbers':
        '{0}：嵌套超过 {1} 层；一个样例是由文本和数字组成的扁平对象',
    '{0}: the text holds a lone surrogate {1} (half of a UTF-16 pair, e.g. from an emoji cut in two); remove it or write the whole character':
        '{0}：文本里有一个孤立的代理项 {1}（UTF-16 代理对的一半，比如被截成两半的 emoji）；删掉它，或写出完整的字符',
    "{0}: '{1}' must be {2}, got {3} {4}":
        "{0}：'{1}' 必须是 {2}，实际是 {3} {4}",
    "{0}: 'margin' must be from {1} to {2} (a difference of rewards, in the reward model's units), got {3}":
        "{0}：'margin' 必须在 {1} 到 {2} 之间（奖励之差，单位同奖励模型），实际是 {3}",
    '{0}: \'{1}\' must be a non-empty list of {{"role": ..., "content": ...}}':
        '{0}：\'{1}\' 必须是由 {{"role": ..., "content": ...}} 组成的非空列表',
    '{0}: {1}[{2}] ({3}) may have only the keys {4}, got {5}':
        '{0}：{1}[{2}]（{3}）只能有这些键 {4}，实际是 {5}',
    '{0}: {1}[{2}] has the unknown role {3}; roles are {4}':
        '{0}：{1}[{2}] 的角色 {3} 未知；可用的角色是 {4}',
    "{0}: {1}[{2}] must have exactly the keys 'role' and 'content', got {3}":
        "{0}：{1}[{2}] 必须正好有 'role' 和 'content' 两个键，实际是 {3}",
    "{0}: {1}[{2}] has no 'content'":
        "{0}：{1}[{2}] 没有 'content'",
    '{0}: {1}[{2}] content must be a string':
        '{0}：{1}[{2}] 的 content 必须是字符串',
    '{0}: {1}[{2}] is a system message; it may only come first':
        '{0}：{1}[{2}] 是系统消息；它只能放在最前面',
    "{0}: {1}[{2}] '{3}' must be a string, got {4}":
        "{0}：{1}[{2}] 的 '{3}' 必须是字符串，实际是 {4}",
    "{0}: 'tool_calls' must be a list like {1}":
        "{0}：'tool_calls' 必须是形如 {1} 的列表",
    '{0}: tool_calls[{1}] must be like {2} (arguments an object or a JSON string of one)':
        '{0}：tool_calls[{1}] 必须形如 {2}（arguments 是一个对象，或装着对象的 JSON 字符串）',
    "{0}: 'tools' must be a list like {1}":
        "{0}：'tools' 必须是形如 {1} 的列表",
    '{0}: tools[{1}] must be like {2}':
        '{0}：tools[{1}] 必须形如 {2}',
    '{0}: missing key(s) {1}; the row has {2}':
        '{0}：缺少键 {1}；这一行有 {2}',
    "{0}: '{1}' must be a string, got {2}":
        "{0}：'{1}' 必须是字符串，实际是 {2}",
    "{0}: '{1}' is empty; an example needs some text there":
        "{0}：'{1}' 是空的；一个样例在这里需要一些文本",
    "{0}: has 'messages' and {1}; give either messages or prompt + completion":
        "{0}：同时有 'messages' 和 {1}；只能给 messages，或给 prompt + completion",
    '{0}: no assistant message, so nothing would be learned from it':
        '{0}：没有助手消息，所以从它学不到任何东西',
    '{0}: an assistant message is empty (an empty completion teaches nothing)':
        '{0}：有一条助手消息是空的（空的补全什么也教不了）',
    "{0}: an SFT row needs 'prompt' and 'completion', or 'messages'; the row has {1}":
        "{0}：SFT 的一行需要 'prompt' 和 'completion'，或者 'messages'；这一行有 {1}",
    '{0}: missing key(s) {1}; the row has {2}, a preference pair is {3}':
        '{0}：缺少键 {1}；这一行有 {2}，一个偏好对是 {3}',
    "{0}: 'chosen' and 'rejected' are the same text; a pair must differ":
        "{0}：'chosen' 和 'rejected' 是同一段文本；偏好对的两边必须不同",
    '{0}: missing key {1}; a preference pair is {2}':
        '{0}：缺少键 {1}；一个偏好对是 {2}',
    "{0}: 'chosen' and 'rejected' must both be texts or both lists of messages, got {1} and {2}":
        "{0}：'chosen' 和 'rejected' 必须都是文本，或都是消息列表，实际是 {1} 和 {2}",
    "{0}: {1} must end with the assistant's answer, its last message is {2}; a preference pair is {3}":
        '{0}：{1} 必须以助手的回答结尾，但它的最后一条消息是 {2}；一个偏好对是 {3}',
    "{0}: with a 'prompt', 'chosen' and 'rejected' are one assistant message each (the answers); put the conversation before them in 'prompt'":
        "{0}：有 'prompt' 时，'chosen' 和 'rejected' 各是一条助手消息（两个回答）；把之前的对话放进 'prompt'",
    "{0}: without a 'prompt', 'chosen' and 'rejected' must hold the same conversation before their last (assistant) message; give the prompt as 'prompt' and one assistant message in each, or make the conversations agree":
        "{0}：没有 'prompt' 时，'chosen' 和 'rejected' 在最后一条（助手）消息之前必须是同一段对话；把提示放进 'prompt'，两边各放一条助手消息，或者让两段对话一致",
    'row {0} is a {1}; write_jsonl writes dicts':
        '第 {0} 行是 {1}；write_jsonl 只写字典',
    'row {0} cannot be written as JSON ({1})':
        '第 {0} 行无法写成 JSON（{1}）',
    'data file not found: {0}; check the path (the corpora that ship with zerollm lie in {1}: {2})':
        '找不到数据文件：{0}；请检查路径（zerollm 自带的语料在 {1}：{2}）',
    '{0} is not UTF-8 text: byte {1} at byte offset {2} cannot be decoded; {3}':
        '{0} 不是 UTF-8 文本：第 {2} 个字节处的字节 {1} 无法解码；{3}',
    '{0} is empty; give a file with some text in it':
        '{0} 是空的；请给一个有文本的文件',
    'corpus too small: {0} tokens split into {1} train and {2} validation tokens, but each part needs at least block_size+1 = {3}; use a longer text, a smaller --block-size, or a larger --val-fraction':
        '语料太少：{0} 个 token 分成 {1} 个训练 token 和 {2} 个验证 token，但每部分至少需要 block_size+1 = {3} 个；请用更长的文本、更小的 --block-size 或更大的 --val-fraction',
    'block_size must be a whole number >= 1, got {0}':
        'block_size 必须是 >= 1 的整数，实际是 {0}',
    'val_fraction must be between 0 and 1 (e.g. 0.1), got {0}':
        'val_fraction 必须在 0 和 1 之间（例如 0.1），实际是 {0}',
    '--out {0} is a file; choose a folder path':
        '--out {0} 是一个文件；请给一个文件夹路径',
    '--out {0} holds other files ({1}); prepare replaces the whole folder, so it only writes to a new folder or an earlier prepared one: choose another --out':
        '--out {0} 里有别的文件（{1}）；prepare 会替换整个文件夹，所以只写到新文件夹或以前 prepare 过的文件夹：请换一个 --out',
    '--out {0} holds {1} but no meta.json that prepare wrote, so they are not an earlier prepared folder; prepare replaces the whole folder: choose another --out':
        '--out {0} 里有 {1}，但没有 prepare 写的 meta.json，所以它不是以前 prepare 过的文件夹；prepare 会替换整个文件夹：请换一个 --out',
    "prepared data folder not found: {0}; create it with 'zerollm prepare --data FILE'":
        "找不到准备好的数据文件夹：{0}；用 'zerollm prepare --data FILE' 创建它",
    "{0} has no meta.json, so it is not (completely) prepared; run 'zerollm prepare --data FILE --out DIR' again":
        "{0} 没有 meta.json，所以它没有（完整地）准备好；请重新运行 'zerollm prepare --data FILE --out DIR'",
    '{0} is not zerollm data format {1} version {2}; prepare the data again with this zerollm':
        '{0} 不是 zerollm 数据格式 {1} 的版本 {2}；请用这个版本的 zerollm 重新准备数据',
    "{0}: unknown dtype {1}; run 'zerollm prepare' again":
        "{0}：未知的 dtype {1}；请重新运行 'zerollm prepare'",
    "{0}: tokenizer must be byte, char or bpe, got {1}; run 'zerollm prepare' again":
        "{0}：分词器必须是 byte、char 或 bpe，实际是 {1}；请重新运行 'zerollm prepare'",
    "{0}: {1} must be a whole number >= 1, got {2}; run 'zerollm prepare' again":
        "{0}：{1} 必须是 >= 1 的整数，实际是 {2}；请重新运行 'zerollm prepare'",
    "{0} is missing; run 'zerollm prepare' again":
        "缺少 {0}；请重新运行 'zerollm prepare'",
    "meta.json next to {0} has a bad token count {1}; run 'zerollm prepare' again":
        "{0} 旁边的 meta.json 里的 token 数 {1} 不对；请重新运行 'zerollm prepare'",
    "{0} has {1} bytes but meta.json says {2} {3} tokens ({4} bytes); the data is damaged, run 'zerollm prepare' again":
        "{0} 有 {1} 字节，但 meta.json 说它是 {2} 个 {3} 类型的 token（{4} 字节）；数据已损坏，请重新运行 'zerollm prepare'",
    "{0}: tokenizer.json has vocab_size {1} but meta.json says {2}; run 'zerollm prepare' again":
        "{0}：tokenizer.json 的 vocab_size 是 {1}，但 meta.json 说是 {2}；请重新运行 'zerollm prepare'",
    '{0} must be a whole number >= 1, got {1}':
        '{0} 必须是 >= 1 的整数，实际是 {1}',
    'only {0} tokens, but a window of block_size={1} needs {2}; use a smaller block_size or more data':
        '只有 {0} 个 token，但 block_size={1} 的窗口需要 {2} 个；请用更小的 block_size 或更多数据',
    '--pattern only applies to --tokenizer bpe':
        '--pattern 只适用于 --tokenizer bpe',
}
