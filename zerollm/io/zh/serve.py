"""中文 of the serve room's messages: its error templates (scripts/zh_catalog.py --room serve); the advice the REPL puts into its context message.

Keys are templates: {0}, {1}, ... stand for the values filled in, in the order of the English.
"""

ZH = {
    'the model {0} has no chat template (it is a base model): use /v1/completions, or fine-tune it first with `zerollm sft`':
        '模型 {0} 没有聊天模板（它是基础模型）：请用 /v1/completions，或先用 `zerollm sft` 微调它',
    '{0}; this model knows only the characters of the text it was trained on: leave these out':
        '{0}；这个模型只认识它训练文本里的字符：请去掉这些字符',
    'this model has no chat template (it is a base model): fine-tune it with `zerollm sft --init RUN --data chat.jsonl --out RUN-sft`, or add --raw to continue plain text':
        '这个模型没有聊天模板（它是基础模型）：请用 `zerollm sft --init RUN --data chat.jsonl --out RUN-sft` 微调它，或加上 --raw 续写纯文本',
    'this message alone ({0} tokens) leaves no room for a {1}-token answer in the context of {2} tokens; write a shorter one (or lower --max-new-tokens)':
        '光这一条消息（{0} 个 token）就让 {2} 个 token 的上下文放不下 {1} 个 token 的回答；请写短一点（或降低 --max-new-tokens）',
    'the system message alone takes {0} tokens and leaves no room for a {1}-token answer in the context of {2} tokens: {3}, or lower --max-new-tokens':
        '光系统消息就占了 {0} 个 token，{2} 个 token 的上下文放不下 {1} 个 token 的回答：{3}，或降低 --max-new-tokens',
    'a file name cannot hold a NUL character; give another name':
        '文件名里不能有 NUL 字符；请换一个名字',
    '{0} exists already; /save writes a new file, give another name':
        '{0} 已经存在；/save 只写新文件，请换一个名字',
    'cannot write {0}: {1}; give another name':
        '无法写入 {0}：{1}；请换一个名字',
    'give a shorter --system':
        '请把 --system 写短一点',
    'give a shorter one':
        '请写短一点',
    'commands: /reset  /system TEXT  /save FILE  /help  /exit   (Ctrl-C stops an answer)':
        '命令：/reset  /system TEXT  /save FILE  /help  /exit   （Ctrl-C 停止当前回答）',
    '/save needs a file name, e.g. /save talk.jsonl':
        '/save 需要一个文件名，例如 /save talk.jsonl',
    '{0}; the system message is unchanged':
        '{0}；系统消息保持不变',
    'unknown command {0}; {1}':
        '未知的命令 {0}；{1}',
}
