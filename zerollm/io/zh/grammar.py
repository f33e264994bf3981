"""中文 of grammar-constrained decoding's error messages and --help strings: zerollm.generation.grammar,
`zerollm grammar` (zerollm/teach/grammar.py) and `zerollm sample --regex/--json-schema` (see
zerollm/io/zh/__init__.py)."""

ZH = {
    # zerollm/generation/grammar/__init__.py
    "the pattern matches only the empty text, so there is nothing to generate":
        "这个模式只匹配空文本，没有什么可以生成的",
    "the JSON Schema is not plain JSON: {0}":
        "这个 JSON Schema 不是普通的 JSON：{0}",
    # automaton.py
    "the pattern's automaton would need more than {0} states (its counts multiply out too far); use smaller "
    "{{n,m}} counts or fewer nested repeats":
        "这个模式的自动机需要超过 {0} 个状态（几层计数相乘后太大了）；请把 {{n,m}} 的次数改小，或少套几层重复",
    "the pattern's automaton grows past {0} states (or {1} steps of work to build): it is too big to constrain "
    "decoding with; simplify it (fewer counted repeats after a '*', smaller {{n,m}})":
        "这个模式的自动机超过了 {0} 个状态（或构建要超过 {1} 步）：太大了，没法用来约束解码；请简化它"
        "（'*' 后面少跟计数重复，{{n,m}} 改小）",
    "the pattern matches no text at all, so nothing could be generated under it":
        "这个模式不匹配任何文本，所以在它的约束下什么也生成不了",
    # index.py
    "this tokenizer's vocabulary cannot write any text the pattern accepts (it lacks characters the pattern "
    "needs); pick a pattern within the tokenizer's characters":
        "这个分词器的词表写不出任何符合模式的文本（缺少模式需要的字符）；请换一个只用到分词器里已有字符的模式",
    "this tokenizer's vocabulary can write only the empty text under the pattern":
        "在这个模式下，这个分词器的词表只能写出空文本",
    # regex.py
    "the pattern uses {0} (at character {1}), which constrained decoding does not support; supported: literals, "
    "., [classes], \\d \\w \\s, ( ), (?: ), |, * + ? {{n,m}} (pattern: {2})":
        "模式用到了{0}（在第 {1} 个字符处），约束解码不支持它；支持的有：普通字符、.、[字符类]、\\d \\w \\s、"
        "( )、(?: )、|、* + ? {{n,m}}（模式：{2}）",
    "a pattern must be text, got {0}":
        "模式必须是文本，收到的是 {0}",
    "the pattern is {0} characters long; the limit is {1}":
        "模式有 {0} 个字符长；上限是 {1}",
    "the pattern has a ')' with no '(' (at character {0}): {1}":
        "模式里有一个没有对应 '(' 的 ')'（在第 {0} 个字符处）：{1}",
    "the pattern nests groups more than {0} deep: {1}":
        "模式里的分组嵌套超过了 {0} 层：{1}",
    "the pattern repeats something {0} times; counts in {{n,m}} are limited to {1}: {2}":
        "模式把某个部分重复了 {0} 次；{{n,m}} 里的次数最多是 {1}：{2}",
    "{{{0},{1}}} in the pattern has its larger number first: {2}":
        "模式里的 {{{0},{1}}} 把大的数写在了前面：{2}",
    "'{0}' at character {1} has nothing before it to repeat: {2}":
        "第 {1} 个字符处的 '{0}' 前面没有可以重复的东西：{2}",
    "the group opened at character {0} is never closed: {1}":
        "第 {0} 个字符处开始的分组没有闭合：{1}",
    "the class [ opened at character {0} is never closed: {1}":
        "第 {0} 个字符处开始的字符类 [ 没有闭合：{1}",
    "the range ending at character {0} runs backwards: {1}":
        "在第 {0} 个字符处结束的范围是倒着写的：{1}",
    "the pattern ends with a lone backslash: {0}":
        "模式以一个单独的反斜杠结尾：{0}",
    "\\{0} at character {1} needs {2} hex digits: {3}":
        "第 {1} 个字符处的 \\{0} 后面需要 {2} 位十六进制数字：{3}",
    # schema.py
    "the schema at {0} must be an object (or true), got {1}":
        "{0} 处的 schema 必须是一个对象（或 true），收到的是 {1}",
    "the JSON Schema keyword(s) {0} at {1} are not supported by constrained decoding; supported: {2}":
        "{1} 处的 JSON Schema 关键字 {0} 约束解码不支持；支持的有：{2}",
    "enum at {0} must be a non-empty list":
        "{0} 处的 enum 必须是非空列表",
    "anyOf at {0} must be a non-empty list of schemas":
        "{0} 处的 anyOf 必须是非空的 schema 列表",
    "the schema at {0} uses {1} without a \"type\"; give its type":
        "{0} 处的 schema 用了 {1} 却没有 \"type\"；请写明它的类型",
    "$ref at {0} must point inside the same document (#/...), got {1}":
        "{0} 处的 $ref 必须指向同一个文档内部（#/...），收到的是 {1}",
    "$ref {0} at {1} refers back to itself (a recursive schema), which constrained decoding does not support":
        "{1} 处的 $ref {0} 又指回了自己（递归的 schema），约束解码不支持",
    "$refs nest more than {0} deep at {1}":
        "{1} 处的 $ref 嵌套超过了 {0} 层",
    "$ref {0} at {1} points at nothing in the schema":
        "{1} 处的 $ref {0} 在 schema 里指向的东西不存在",
    "\"type\": {0} at {1} is not a JSON Schema type; use object, array, string, integer, number, boolean or null":
        "{1} 处的 \"type\": {0} 不是 JSON Schema 的类型；请用 object、array、string、integer、number、boolean 或 null",
    "additionalProperties as a schema at {0} is not supported; leave it out or set it to false (only the listed "
    "properties are written)":
        "{0} 处把 additionalProperties 写成 schema 是不支持的；请去掉它或设为 false（只会写出列出的属性）",
    "required at {0} names properties that \"properties\" does not give":
        "{0} 处的 required 列出了 \"properties\" 里没有的属性",
    "required at {0} names {1}, which \"properties\" does not give":
        "{0} 处的 required 列出了 {1}，但 \"properties\" 里没有它",
    "{0} at {1} must be a whole number from 0 to {2}, got {3}":
        "{1} 处的 {0} 必须是 0 到 {2} 之间的整数，收到的是 {3}",
    "maxItems ({0}) at {1} is below minItems ({2})":
        "{1} 处的 maxItems（{0}）比 minItems（{2}）还小",
    "items as a list (tuple validation) at {0} is not supported; give one schema":
        "{0} 处把 items 写成列表（元组校验）是不支持的；请只给一个 schema",
    "format {0} at {1} is not supported; supported: {2}":
        "{1} 处的 format {0} 不支持；支持的有：{2}",
    "the pattern at {0} could write \", \\ or a control character inside the string, which would need JSON escapes; "
    "leave those out of the pattern":
        "{0} 处的 pattern 可能在字符串里写出 \"、\\ 或控制字符，这些在 JSON 里需要转义；请把它们排除在模式之外",
    "the schema nests more than {0} schemas deep at {1}; flatten it":
        "schema 在 {1} 处嵌套超过了 {0} 层；请把它改得扁平一些",
    "maxLength ({0}) at {1} is below minLength ({2})":
        "{1} 处的 maxLength（{0}）比 minLength（{2}）还小",
    "the request's grammar is indexed over {0} ids but the model has {1}; index it with "
    "grammar.index(tokenizer, model.config.vocab_size)":
        "请求的语法是按 {0} 个 id 建的索引，但模型有 {1} 个 id；请用 grammar.index(tokenizer, model.config.vocab_size) "
        "建索引",
    # zerollm/teach/grammar.py and zerollm/cli/commands/sample.py
    "zerollm grammar explains constrained decoding: add --explain. To generate under a pattern, use zerollm sample "
    "--regex PATTERN (or --json-schema FILE)":
        "zerollm grammar 用来讲解约束解码：请加上 --explain。要在模式约束下生成文本，请用 zerollm sample --regex "
        "PATTERN（或 --json-schema FILE）",
    "max_new_tokens was reached before the text matched its grammar: the output is incomplete":
        "文本还没符合语法就到了 max_new_tokens：输出不完整",
    "constrained decoding by hand: a regex as an automaton, and the token ids each state allows (--explain)":
        "手算约束解码：正则表达式变成自动机，以及每个状态允许哪些 token id（--explain）",
    "the regular expression (docs/structured.md: its syntax)":
        "正则表达式（语法见 docs/structured.md）",
    "a JSON Schema file, made into a pattern first":
        "一个 JSON Schema 文件，先把它变成模式",
    "a text to walk through the automaton token by token":
        "一段文本，逐个 token 地在自动机里走一遍",
    "print the step-by-step walkthrough":
        "打印逐步讲解",
    "bpe: a byte-level BPE of --vocab ids learnt on tiny Shakespeare (default); byte: one id per byte":
        "bpe：在 tiny Shakespeare 上学出的字节级 BPE，共 --vocab 个 id（默认）；byte：每个字节一个 id",
    "use the tokenizer of this run or model directory instead of --tokenizer":
        "改用这个训练目录或模型目录里的分词器，而不是 --tokenizer",
    "ids of the default BPE (default 512)":
        "默认 BPE 的 id 个数（默认 512）",
    "generate only text that this regular expression matches whole (docs/structured.md)":
        "只生成能被这个正则表达式整体匹配的文本（见 docs/structured.md）",
    "generate only JSON that this JSON Schema file accepts (docs/structured.md)":
        "只生成这个 JSON Schema 文件接受的 JSON（见 docs/structured.md）",
}
