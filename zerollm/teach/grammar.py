"""``zerollm grammar --explain``: how a regex (or a JSON Schema) decides, token by token, what a model may write.

The pattern becomes an automaton over bytes (zerollm.generation.grammar: the same code the sampler masks
with); the walkthrough prints its states and edges, then walks ``--text`` token by token through it: the
state, how many of the vocabulary's ids are allowed there, which, and where the text's own token leads.

    zerollm grammar --regex "(yes|no)" --text "yes" --explain
    zerollm grammar --regex "-?[0-9]+" --text "-42" --explain --lang zh
    zerollm grammar --json-schema person.json --text '{"name": "Ada", "age": 36}' --explain --ckpt runs/json-base
"""

from zerollm.data import corpora
from zerollm.generation.grammar import DEAD, grammar_for_regex, grammar_for_schema
from zerollm.io.argtypes import Range
from zerollm.io.errors import ZeroLLMError
from zerollm.io.fileio import read_json
from zerollm.io.i18n import add_lang_argument, resolve_lang, translator
from zerollm.interop.opening import Source, open_model
from zerollm.tokenizers import ByteTokenizer
from zerollm.tokenizers.bpe import BPETokenizer

TEXT = {
    "title": {"zh": "约束解码：模式 {pattern}", "en": "Constrained decoding: the pattern {pattern}"},
    "automaton": {"zh": "1. 模式变成按字节走的自动机：{n} 个状态，从状态 0 出发；带 * 的是接受状态（文本可以在这里结束）。\n"
                        "   每条边：哪些字节 -> 下一个状态。多字节的汉字是几个字节连着走。",
                  "en": "1. The pattern as an automaton over bytes: {n} states, starting at state 0; * marks an accepting "
                        "state (the text may end there).\n   Each edge: which bytes -> the next state. A character of "
                        "several bytes (UTF-8) walks several edges."},
    "more_states": {"zh": "   ……还有 {n} 个状态没有列出。", "en": "   ... and {n} more states not listed."},
    "vocab": {"zh": "2. 词表有 {V} 个 id（分词器：{tok}）。一个 token 在某状态下被允许，当且仅当它的字节从该状态一路走下去"
                    "都不掉进死状态；它走完停在哪里，下一步就从哪里开始。",
              "en": "2. The vocabulary has {V} ids (tokenizer: {tok}). A token is allowed in a state when walking its "
                    "bytes from there never falls off the automaton; where the walk ends is the next state."},
    "text": {"zh": "3. 把 --text 切成 {n} 个 token，一步一步走：", "en": "3. --text cut into {n} tokens, walked step by step:"},
    "step": {"zh": "   第 {k} 步：状态 {state}{acc}，允许 {count}/{V} 个 id，例如 {some}\n"
                   "          文本的 token {tok} -> {verdict}",
             "en": "   step {k}: state {state}{acc}, {count}/{V} ids allowed, e.g. {some}\n"
                   "          the text's token {tok} -> {verdict}"},
    "goes": {"zh": "允许，到状态 {to}", "en": "allowed, on to state {to}"},
    "refused": {"zh": "不允许：这段文本不符合模式，约束解码不会写出它", "en": "NOT allowed: the text does not match; "
                                                                   "constrained decoding would never write it"},
    "end_ok": {"zh": "结束：状态 {state} 是接受状态，此时才允许结束符（end of text）。{more}",
               "en": "The end: state {state} accepts, so only here is the end-of-text id allowed. {more}"},
    "end_more": {"zh": "还可以接着写 {count} 种 token。", "en": "{count} kinds of token could still follow."},
    "end_done": {"zh": "后面什么都不能再写：文本完整了，这一行到此结束。", "en": "Nothing may follow: the text is complete "
                                                                   "and the row ends here."},
    "end_open": {"zh": "结束：状态 {state} 不是接受状态：文本还没写完，结束符在这里不允许（max_tokens 先到就是 "
                       "finish_reason \"length\"）。",
                 "en": "The end: state {state} does not accept: the text is unfinished and the end-of-text id is not "
                       "allowed here (max_tokens reached first gives finish_reason \"length\")."},
    "state": {"zh": "状态", "en": "state"},
    "acc": {"zh": "（接受）", "en": " (accepting)"},
}
say = translator(TEXT)
SHOWN_STATES = 24
SHOWN_IDS = 6


def add_arguments(p):
    add_lang_argument(p)
    shape = p.add_mutually_exclusive_group(required=True)
    shape.add_argument("--regex", metavar="PATTERN", help="the regular expression (docs/structured.md: its syntax)")
    shape.add_argument("--json-schema", metavar="FILE", help="a JSON Schema file, made into a pattern first")
    p.add_argument("--text", default="", help="a text to walk through the automaton token by token")
    p.add_argument("--explain", action="store_true", help="print the step-by-step walkthrough")
    p.add_argument("--tokenizer", default="bpe", choices=("bpe", "byte"),
                   help="bpe: a byte-level BPE of --vocab ids learnt on tiny Shakespeare (default); byte: one id per byte")
    p.add_argument("--ckpt", metavar="RUN", default=None,
                   help="use the tokenizer of this run or model directory instead of --tokenizer")
    p.add_argument("--vocab", type=Range(int, 257, 4096), default=512, help="ids of the default BPE (default 512)")


def run(args):
    if not args.explain:
        raise ZeroLLMError("zerollm grammar explains constrained decoding: add --explain. To generate under a "
                           "pattern, use zerollm sample --regex PATTERN (or --json-schema FILE)")
    lang = resolve_lang(args.lang)
    grammar = (grammar_for_regex(args.regex) if args.regex is not None
               else grammar_for_schema(read_json(args.json_schema, "--json-schema file")))
    tok, name = _tokenizer(args)
    index = grammar.index(tok)
    print(say("title", lang, pattern=grammar.pattern if len(grammar.pattern) < 200 else grammar.pattern[:200] + "..."))
    print()
    print(say("automaton", lang, n=grammar.dfa.n_states))
    for line in automaton_lines(grammar.dfa, say("state", lang)):
        print(line)
    print()
    print(say("vocab", lang, V=tok.vocab_size, tok=name))
    walk(index, tok, tok.encode(args.text), lang)
    return 0


def _tokenizer(args):
    if args.ckpt is not None:                  # a model's own tokenizer, opened the one way models are opened
        return open_model(Source(ckpt=args.ckpt)).tokenizer, args.ckpt
    if args.tokenizer == "byte":
        return ByteTokenizer(), "byte"
    return BPETokenizer.train(corpora.read_text("shakespeare")[:100_000], args.vocab), f"BPE {args.vocab}"   # bpe


def automaton_lines(dfa, word="state", shown=SHOWN_STATES):
    """One line per state: 'state 3*: [0-9] -> 3 | . -> 4'."""
    lines = []
    for s in range(min(dfa.n_states, shown)):
        edges = {}
        for b in range(256):
            to = int(dfa.delta[s, b])
            if to != DEAD:
                edges.setdefault(to, []).append(b)
        parts = [f"{_bytes_label(bs)} -> {to}" for to, bs in edges.items()]
        lines.append(f"   {word} {s}{'*' if dfa.accepting[s] else ''}: " + (" | ".join(parts) or "(end)"))
    if dfa.n_states > shown:
        lines.append(f"   ... +{dfa.n_states - shown}")
    return lines


def _byte(b):
    c = chr(b)
    return c if 0x21 <= b < 0x7F else f"\\x{b:02x}"


def _bytes_label(bs):
    """Sorted bytes -> '[0-9a-f]' style ranges."""
    runs, start = [], bs[0]
    for prev, b in zip(bs, bs[1:] + [None]):
        if b != prev + 1 if b is not None else True:
            runs.append(_byte(start) if start == prev else f"{_byte(start)}-{_byte(prev)}")
            start = b
    return runs[0] if len(runs) == 1 and "-" not in runs[0][1:] else "[" + "".join(runs) + "]"


def _show(index, ids):
    """Each token's text, or its bytes in hex when it holds part of a character (<e5 a4>)."""
    pieces = []
    for i in ids:
        raw = index.vocab.piece(int(i))
        try:
            pieces.append(repr(raw.decode("utf-8")))
        except UnicodeDecodeError:
            pieces.append("<" + " ".join(f"{b:02x}" for b in raw) + ">")
    return " ".join(pieces)


def walk(index, tok, ids, lang):
    print(say("text", lang, n=len(ids)))
    state, V = index.start, index.vocab.size
    for k, t in enumerate(ids, 1):
        allowed = index.row(state).ids
        nxt = index.next_state(state, t)
        verdict = say("goes", lang, to=nxt) if nxt != DEAD else say("refused", lang)
        print(say("step", lang, k=k, state=state, acc=say("acc", lang) if index.accepting(state) else "",
                  count=len(allowed), V=V, some=_show(index, allowed[:SHOWN_IDS]) + (" ..." if len(allowed) > SHOWN_IDS
                                                                                   else ""),
                  tok=_show(index, [t]), verdict=verdict))
        if nxt == DEAD:
            return
        state = nxt
    if index.accepting(state):
        more = say("end_done", lang) if index.finished(state) else say("end_more", lang, count=index.count(state))
        print(say("end_ok", lang, state=state, more=more))
    else:
        print(say("end_open", lang, state=state))
