"""中文 of the messages of thinking, tools and their tasks (#58): zerollm.align.tools, the calc task, the
tool flags of tasks/grpo/ppo, and the template's tool messages (see zerollm/io/zh/__init__.py)."""

ZH = {
    "--tools {0}: no such file; give 'calculator' or a .py module of your tools (TOOLS and a function for each, see zerollm.align.tools)":
        "--tools {0}：没有这个文件；请写 'calculator'，或者一个放着你自己工具的 .py 模块（里面有 TOOLS，且每个工具都有同名函数，见 zerollm.align.tools）",
    "could only draw {0} distinct {1} products; ask for fewer than {2}":
        "只抽到了 {0} 道互不相同的 {1} 乘法题；请要少于 {2} 道",
    "a calc row's \"answer\" must be a whole number like 56088, got {0}":
        "calc 样本的 \"answer\" 必须是整数，比如 56088；收到的是 {0}",
    "a calc prompt reads like '123*456=', got {0}":
        "calc 的提示词应该形如 '123*456='，收到的是 {0}",
    "calculator: nested more than {0} deep; write a simpler expression":
        "计算器：嵌套超过了 {0} 层；请把算式写简单些",
    "calculator: division by zero":
        "计算器：除数为零",
    "calculator: a '(' is not closed (at character {0})":
        "计算器：第 {0} 个字符处的 '(' 没有配对的 ')'",
    "calculator: expected a number or '(' at character {0}, found {1}; write whole numbers with the digits 0-9 and + - * / ( ) **":
        "计算器：第 {0} 个字符处应该是数字或 '('，却是 {1}；只能用 0-9 写整数，以及 + - * / ( ) **",
    "calculator: a number past 2**{0} (about {1} digits); the calculator keeps to smaller numbers":
        "计算器：出现了超过 2**{0} 的数（约 {1} 位）；计算器只算比这小的数",
    "calculator: a power needs a whole exponent from 0 to {0}, got {1}":
        "计算器：乘方的指数必须是 0 到 {0} 的整数，收到的是 {1}",
    "calculator: {0}**{1} is past 2**{2}; the calculator keeps to smaller numbers":
        "计算器：{0}**{1} 超过了 2**{2}；计算器只算比这小的数",
    "calculator: the expression must be a string, e.g. \"12*34\"":
        "计算器：算式必须是字符串，例如 \"12*34\"",
    "calculator: the expression is longer than {0} characters":
        "计算器：算式超过了 {0} 个字符",
    "calculator: {0} is not allowed; write whole numbers with the digits 0-9 and + - * / ( ) **":
        "计算器：不能用 {0}；只能用 0-9 写整数，以及 + - * / ( ) **",
    "calculator: the expression is empty":
        "计算器：算式是空的",
    "calculator: unexpected {0} at character {1}":
        "计算器：第 {1} 个字符处多出了 {0}",
    "called sys.exit({0}); a tool returns its response (raise ValueError to tell the model its arguments were wrong)":
        "调用了 sys.exit({0})；工具应当返回它的结果（要告诉模型参数不对，请抛出 ValueError）",
    "the tool {0} returned {1}; a tool returns a string (or a whole number or a finite float)":
        "工具 {0} 返回了 {1}；工具应当返回字符串（或者整数、有限的浮点数）",
    "--tools {0}: the tool name(s) {1} are given twice (calculator is built in); rename yours":
        "--tools {0}：工具名 {1} 重复了（calculator 是内置的）；请给你的工具换个名字",
    "no such file {0}":
        "没有这个文件：{0}",
    "{0}; fix the module (or the path) and start again":
        "{0}；请修好这个模块（或路径）后重新开始",
    "--tools {0}: the module needs a list TOOLS of tool specs like {1}":
        "--tools {0}：模块里需要一个列表 TOOLS，列出各个工具的说明，形如 {1}",
    "--tools {0}: TOOLS lists {1} but the module has no function of that name":
        "--tools {0}：TOOLS 里列了 {1}，但模块里没有同名的函数",
    "tasks make {0} has no {1} variant; {2} is for {3}":
        "tasks make {0} 没有 {1} 这种变体；{2} 只适用于 {3}",
    "jsonl: one example a line (SFT / prefs / prompts); text: one plain line per example, for pre-training a base model (with --tools or --think: each trace as the chat template renders it, to learn a BPE vocabulary from) (default jsonl; lm-eval: YAML and JSONL, no choice)":
        "jsonl：每行一个样例（SFT / 偏好 / 提示）；text：每个样例一行纯文本，用于预训练基础模型（加 --tools 或 --think 时：每段轨迹按对话模板渲染成一行，可以从中学出 BPE 词表）（默认 jsonl；lm-eval：YAML 和 JSONL，不能选）",
    "a tool's response holds characters the model's vocabulary does not have ({0}); they are left out of what the model reads (a char tokenizer knows only the characters of its training text)":
        "工具返回的内容里有模型词表中没有的字符（{0}）；模型读到的内容里会略去它们（字符级分词器只认识训练文本里出现过的字符）",
    "{0}: a 'completion' list holds the assistant's messages (and tool results between them), beginning with an assistant message":
        "{0}：列表形式的 'completion' 只能放助手的消息（中间可以夹着工具结果），并且要以一条助手消息开头",
    "{0} did not finish within {1} {2} s; make it faster, or raise {3} (0 = no limit)":
        "{0} 没有在 {1} 规定的 {2} 秒内完成；让它更快一些，或者调大 {3}（0 表示不限）",
}
