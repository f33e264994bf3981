"""中文 of the cli room's messages: its error templates (scripts/zh_catalog.py --room cli); argparse's messages, entry.py's own lines and the pieces of the messages built elsewhere that the command line prints.

Keys are templates: {0}, {1}, ... stand for the values filled in, in the order of the English.
"""

ZH = {
    '--to {0} ends in .gguf and a slash: for a GGUF file give --to {1}; for a Hugging Face folder give a name that does not end in .gguf':
        '--to {0} 以 .gguf 加斜杠结尾：要写 GGUF 文件请给 --to {1}；要写 Hugging Face 文件夹请给一个不以 .gguf 结尾的名字',
    '--quant is for GGUF files: give --to FILE.gguf (a directory is always float32)':
        '--quant 只用于 GGUF 文件：请给 --to FILE.gguf（目录里总是 float32）',
    '{0} needs --text: the page shows what the model does with your text':
        '{0} 需要 --text：页面展示的是模型怎样处理你的文本',
    '--text is empty; give at least one character for the model to read':
        '--text 是空的；请至少给一个字符让模型读',
    '--text is read by a model: add --ckpt DIR (a zerollm run) or --hf DIR (a Hugging Face model)':
        '--text 是给模型读的：请加上 --ckpt DIR（一个 zerollm 运行）或 --hf DIR（一个 Hugging Face 模型）',
    '--to {0} already holds a run; choose another directory':
        '--to {0} 里已经有一个运行；请换一个目录',
    '--to {0} is a file; merge writes a run directory: choose a new directory name':
        '--to {0} 是一个文件；merge 要写一个运行目录：请换一个新的目录名',
    '--to {0} is a folder that already holds files ({1}{2}); merge writes a new run directory: choose a new or empty one':
        '--to {0} 是一个已经有文件的文件夹（{1}{2}）；merge 要写一个新的运行目录：请选一个新的或空的目录',
    '{0} was not trained with LoRA (no --lora-r): there are no adapters to merge':
        '{0} 没有用 LoRA 训练（没有 --lora-r）：没有可以合并的适配器',
    "{0} holds no lm-eval results_*.json; give lm_eval's --output_path folder":
        '{0} 里没有 lm-eval 的 results_*.json；请给 lm_eval 的 --output_path 文件夹',
    '--results {0}: no such file or folder':
        '--results {0}：没有这个文件或文件夹',
    'RUN {0} is given {1}; each run appears once in the report: drop the repeat':
        'RUN {0} 给了 {1}；每次运行在报告里只出现一次：请去掉重复的',
    '--sinks needs --window and must be >= 0':
        '--sinks 需要 --window，并且必须 >= 0',
    '--window needs RoPE or sinusoidal positions, but this model learned one embedding per position up to {0}, so its context cannot roll; leave --window out':
        '--window 需要 RoPE 或正弦位置编码，但这个模型为最多 {0} 个位置各学了一个嵌入，所以它的上下文不能滚动；请去掉 --window',
    'the prompt encodes to no tokens; give a non-empty --prompt':
        '提示编码后一个 token 都没有；请给一个非空的 --prompt',
    "--system needs a chat model (a tokenizer with the chat template, e.g. after 'zerollm sft'); leave --system out, or put the text in --prompt":
        "--system 需要聊天模型（分词器带聊天模板，例如 'zerollm sft' 之后）；请去掉 --system，或把这段文字放进 --prompt",
    '{0} (score reads a file of preference pairs {{"prompt", "chosen", "rejected"}} or one of answers {{"prompt", "completion"}} or {{"messages"}}; line {1} made it read this file as {2}, so every line must be one)':
        '{0}（score 读取的文件，要么是偏好对 {{"prompt", "chosen", "rejected"}}，要么是回答 {{"prompt", "completion"}} 或 {{"messages"}}；第 {1} 行让它把这个文件当作 {2} 来读，所以每一行都必须是这种）',
    "{0} is empty: give the key clients will send as 'Authorization: Bearer KEY'{1}":
        "{0} 是空的：请给出客户端会以 'Authorization: Bearer KEY' 发送的密钥{1}",
    '{0} begins or ends with whitespace, which HTTP drops from headers: remove it':
        '{0} 的开头或结尾有空白，HTTP 会从请求头里去掉它们：请删掉',
    '{0} holds {1}, which is not printable ASCII, so HTTP clients cannot send it in a header; use letters, digits and punctuation':
        '{0} 里有 {1}，它不是可打印的 ASCII 字符，HTTP 客户端无法把它放进请求头发送；请用字母、数字和标点',
    '--host {0} makes the server reachable from other machines, so it needs --api-key KEY (or ${1}); or keep the default --host 127.0.0.1':
        '--host {0} 会让其他机器也能访问这个服务器，所以需要 --api-key KEY（或 ${1}）；或者保持默认的 --host 127.0.0.1',
    '--model-name {0}: give the id clients send as "model" (no spaces around it), or leave the flag out to use the folder\'s name':
        '--model-name {0}：请给客户端作为 "model" 发送的 id（前后不要有空格），或去掉这个参数，使用文件夹的名字',
    'zerollm serve needs FastAPI, uvicorn and prometheus-client ({0}); install them with pip install "zerollm[serve]"':
        'zerollm serve 需要 FastAPI、uvicorn 和 prometheus-client（{0}）；请用 pip install "zerollm[serve]" 安装',
    'lm-eval tasks are made from heldout data only (a score on training examples says what a model memorised): leave out --split train':
        'lm-eval 任务只用留出数据生成（在训练样例上的分数说明的是模型记住了什么）：请去掉 --split train',
    'lm-eval tasks are YAML and JSONL files that lm_eval reads, not plain text: leave out --format text (plain lines are for the other tasks, e.g. tasks make addition)':
        'lm-eval 任务是 lm_eval 读取的 YAML 和 JSONL 文件，不是纯文本：请去掉 --format text（纯文本行是给其他任务用的，例如 tasks make addition）',
    'lm-eval tasks are run by lm_eval, not by tasks eval: zerollm tasks make lm-eval --out FOLDER --n 200, then lm_eval --model zerollm --model_args ckpt=RUN --tasks FOLDER':
        'lm-eval 任务由 lm_eval 运行，而不是 tasks eval：先 zerollm tasks make lm-eval --out FOLDER --n 200，再 lm_eval --model zerollm --model_args ckpt=RUN --tasks FOLDER',
    '--out {0} already holds {1}, which this command did not create and would replace; pass --force to replace them, or choose another --out':
        '--out {0} 里已经有 {1}，它们不是本命令创建的，会被替换；加 --force 替换它们，或换一个 --out',
    '{0} was prepared with the {1} tokenizer but this run asks for {2}; pass --tokenizer {3} or prepare again':
        '{0} 是用 {1} 分词器准备的，但这次运行要用 {2}；请传 --tokenizer {3}，或重新准备数据',
    '--out {0} is a file, not a folder; training writes a run directory there: choose a new directory name':
        '--out {0} 是一个文件，不是文件夹；训练要在那里写一个运行目录：换一个新的目录名',
    '{0} already holds a training run; continue it with --resume, or choose another --out':
        '{0} 里已经有一次训练运行；用 --resume 继续它，或换一个 --out',
    '{0}: the base model rebuilt from the seed has another digest than the one these adapters were trained on; resume with the zerollm version that started the run':
        '{0}：用种子重建的基础模型，其摘要与这些适配器训练时的不同；请用开始这次运行时的 zerollm 版本续训',
    'unrecognized arguments: {0}{1}':
        '无法识别的参数：{0}{1}',
    '{0} is empty: give a file or folder name (is a shell variable unset?)':
        '{0} 是空的：请给一个文件或文件夹名（是不是有个 shell 变量没有设置？）',
    "{0} -: zerollm writes its outputs to files, not to standard output, and will not make a file named '-': give a file name":
        "{0} -：zerollm 把输出写到文件里，而不是标准输出，也不会创建名为 '-' 的文件：请给一个文件名",
    'argument {0}: {1}':
        '参数 {0}：{1}',
    'invalid choice: {0} (choose from {1})':
        '无效的选择：{0}（可选：{1}）',
    'the following arguments are required: {0}':
        '缺少必需的参数：{0}',
    'one of the arguments {0} is required':
        '参数 {0} 中必须给出一个',
    'expected one argument':
        '后面需要跟一个值',
    'expected at most one argument':
        '后面最多只能跟一个值',
    'expected at least one argument':
        '后面至少需要跟一个值',
    'expected {0} argument':
        '后面需要跟 {0} 个值',
    'expected {0} arguments':
        '后面需要跟 {0} 个值',
    'ambiguous option: {0} could match {1}':
        '有歧义的选项：{0} 可能是 {1}',
    'invalid {0} value: {1}':
        '无效的 {0} 值：{1}',
    'not allowed with argument {0}':
        '不能和参数 {0} 一起使用',
    'ignored explicit argument {0}':
        '忽略了显式给出的值 {0}',
    'unrecognized arguments: {0}':
        '无法识别的参数：{0}',
    'unrecognized arguments: {0} (did you mean {1}?)':
        '无法识别的参数：{0}（你是不是想输入 {1}？）',
    'unrecognized arguments: {0}; {1}':
        '无法识别的参数：{0}；{1}',
    'did you mean {0}?':
        '你是不是想输入 {0}？',
    'zerollm train starts from random weights: fine-tune a trained model with `zerollm sft --init RUN`, or continue a run with `zerollm train --out RUN --resume`':
        'zerollm train 从随机权重开始：要微调训练好的模型请用 `zerollm sft --init RUN`，要继续一次运行请用 `zerollm train --out RUN --resume`',
    'the task is the word after eval: zerollm tasks eval acrostic --ckpt RUN --data FILE':
        '任务名是 eval 后面的那个词：zerollm tasks eval acrostic --ckpt RUN --data FILE',
    'the task is the word after make: zerollm tasks make acrostic --out FILE':
        '任务名是 make 后面的那个词：zerollm tasks make acrostic --out FILE',
    'interrupted':
        '已中断',
    "the pipe that reads this command's output was closed before the work was done; nothing was finished: run it again with its output going to a reader that stays (or to a file)":
        '读取本命令输出的管道在工作完成之前就关闭了；什么都没有完成：请重新运行，让输出交给一个一直在读的程序（或写到文件里）',
    'out of memory{0}; the estimate said it would fit, but it did not: {1}':
        '内存不足{0}；估计说放得下，实际却放不下：{1}',
    'use smaller sizes (--batch-size, --block-size, --n-embd, --window, ...) or close other programs':
        '请用更小的尺寸（--batch-size、--block-size、--n-embd、--window 等），或关掉其他程序',
    'close other programs, or use a smaller model':
        '请关掉其他程序，或用更小的模型',
    '{0}; the disk (or your quota, or ulimit -f) is full: free some space and run the command again (what was there before is untouched)':
        '{0}；磁盘（或你的配额，或 ulimit -f）满了：请腾出一些空间再运行一次（原有的内容没有被改动）',
    'standard input is closed (the command was started with 0<&-): there is nothing to read; give it < FILE or < /dev/null instead':
        '标准输入已关闭（命令是用 0<&- 启动的）：没有东西可读；请改为给它 < FILE 或 < /dev/null',
    'standard output is closed (the command was started with >&-): there is nowhere to print; give it > FILE or > /dev/null instead':
        '标准输出已关闭（命令是用 >&- 启动的）：没有地方可以打印；请改为给它 > FILE 或 > /dev/null',
    '{0}: No such file or directory':
        '{0}：没有这个文件或目录',
    '{0}: Permission denied':
        '{0}：权限不够',
    '{0}: Is a directory':
        '{0}：是一个目录',
    '{0}: Not a directory':
        '{0}：不是目录',
    '{0}: File exists':
        '{0}：文件已存在',
    '{0}: Directory not empty':
        '{0}：目录不是空的',
    '{0}: No space left on device':
        '{0}：设备上没有剩余空间',
    '{0}: Disk quota exceeded':
        '{0}：超出了磁盘配额',
    '{0}: File too large':
        '{0}：文件太大',
    '{0}: Read-only file system':
        '{0}：文件系统是只读的',
    '{0}: File name too long':
        '{0}：文件名太长',
    '{0}: Too many open files':
        '{0}：打开的文件太多',
    '{0}: Input/output error':
        '{0}：输入/输出错误',
    '{0} holds {1} character{2} this model does not know: {3}{4}{5}; a char tokenizer knows only the characters of the text the model was trained on: use text written in those characters, or train a model with --tokenizer byte or bpe, which read any text':
        '{0} 里有 {1} 个这个模型不认识的字符：{3}{4}{5}；字符级分词器只认识模型训练文本里的字符：请用这些字符写的文本，或用 --tokenizer byte 或 bpe 训练一个能读任何文本的模型',
    ' and {0} more':
        '，还有 {0} 个',
    '; it also holds the special token(s) {0}, which are read here as plain characters: leave them out':
        '；其中还有特殊 token {0}，在这里会被当作普通字符读取：请去掉它们',
    'your message':
        '你的消息',
    'the system message':
        '系统消息',
    'the text':
        '这段文本',
    'a prompt of --data {0}':
        '--data {0} 里的一个提示',
    'could not listen on {0}:{1} ({2}): --host {3} is not a name or address this machine can resolve; try another --host':
        '无法在 {0}:{1} 上监听（{2}）：--host {3} 不是本机能解析的名字或地址；请换一个 --host',
    'could not listen on {0}:{1} ({2}): --host {3} is not an address of this machine; try another --host':
        '无法在 {0}:{1} 上监听（{2}）：--host {3} 不是本机的地址；请换一个 --host',
    'could not listen on {0}:{1} ({2}); try another --port':
        '无法在 {0}:{1} 上监听（{2}）；请换一个 --port',
    'could not listen on {0}:{1} ({2}): ports below 1024 need privileges; try a --port above 1023':
        '无法在 {0}:{1} 上监听（{2}）：1024 以下的端口需要特权；请用大于 1023 的 --port',
    'could not listen on {0}:{1} ({2}); check --host and --port':
        '无法在 {0}:{1} 上监听（{2}）；请检查 --host 和 --port',
    'must be 64 hex digits (as sha256sum prints them), got {0} ({1} characters)':
        '必须是 64 位十六进制数（和 sha256sum 打印的一样），实际是 {0}（{1} 个字符）',
    'must be 64 hex digits (as sha256sum prints them), got {0}':
        '必须是 64 位十六进制数（和 sha256sum 打印的一样），实际是 {0}',
    'argument {0}: must be {1}, got {2}':
        '参数 {0}：必须是 {1}，实际是 {2}',
}
