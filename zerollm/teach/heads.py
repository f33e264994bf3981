"""``zerollm heads``: every layer's and every head's attention weights as one grid of heat maps.

    zerollm heads --text "To be, or not to be" --out heads.png
    zerollm heads --random --seq 24 --n-layer 3 --n-head 6 --out heads.png

Rows of the grid are layers, columns are heads; inside each square, row i is a query position
and column j a key position, brightness the weight softmax gave it. The model is a randomly
initialised GPT over bytes (vocab 256: each UTF-8 byte is one token), so its heads are nearly
uniform over what they may see; the picture shows the masking, and how to read such plots.
Weights come from ``GPT.attention_weights()`` after ``model.eval(); model.forward(idx, keep=True)``.

matplotlib is optional (``pip install "zerollm[viz]"``) and imported only when drawing.
"""

import unicodedata

import numpy as np

from zerollm.model import budget
from zerollm.io.argtypes import FIELD_RANGES, SEED, Range
from zerollm.model.config import GPTConfig
from zerollm.io.errors import ZeroLLMError
from zerollm.tokenizers.char import UnknownCharacters
from zerollm.io.fileio import atomic_write
from zerollm.io.outdir import check_output_file
from zerollm.io.i18n import add_lang_argument, resolve_lang, translator
from zerollm.model.gpt import GPT
from zerollm.training.runlog import find_fonts

MAX_TOKENS = 256       # longer inputs make panels whose cells are below one pixel
MAX_PANELS = 144       # layers x heads; beyond that the grid is unreadable
MAX_LABELLED = 40      # tokens: up to this many, every tick gets its character
DEFAULT_RANDOM_T = 16
MIDDLE_DOT = "·"       # label of the 2nd, 3rd, ... byte of a multi-byte character
# substrings of font names that usually cover Chinese (verified against the font's charmap)
TEXT = {
    "wrote": {"zh": "已写入 {path}：{nl} 层 x {nh} 个头，{T} 个 token（{kind}）。",
              "en": "Wrote {path}: {nl} layers x {nh} heads, {T} tokens ({kind})."},
    "causal": {"zh": "因果", "en": "causal"},
    "bidirectional": {"zh": "双向", "en": "bidirectional"},
    "read": {
        "zh": "怎么看这张图：行 = 层，列 = 头。每个小方块里，第 i 行是查询（正在看的位置），第 j 列是键\n"
              "（被看的位置），越亮权重越大，每一行加起来等于 1。",
        "en": "How to read it: rows of the grid = layers, columns = heads. Inside each square, row i is the query\n"
              "(the position looking), column j the key (the position looked at); brighter = more weight, and\n"
              "every row sums to 1.",
    },
    "read_causal": {
        "zh": "因果模型只能看自己和前面的位置，所以只有下三角（含对角线）是亮的，对角线以上全是 0。",
        "en": "A causal model sees only itself and earlier positions, so only the lower triangle (with the\n"
              "diagonal) is lit; everything above the diagonal is 0.",
    },
    "read_bidirectional": {
        "zh": "双向（BERT 式）模型没有掩码：每个位置都能看到所有位置，整个方块都有权重。",
        "en": "A bidirectional (BERT-style) model has no mask: every position sees every position, so the whole\n"
              "square carries weight.",
    },
    "read_trained": {
        "zh": "这是训练过的模型（{ckpt}，第 {step} 步）：看看有没有总盯着前一个 token、行首或标点的头。",
        "en": "This is a trained model ({ckpt}, step {step}): look for heads that always watch the previous token,\n"
              "the start of the line, or punctuation.",
    },
    "read_model": {
        "zh": "这是训练过的模型（{ckpt}）：看看有没有总盯着前一个 token、行首或标点的头。",
        "en": "This is a trained model ({ckpt}): look for heads that always watch the previous token,\n"
              "the start of the line, or punctuation.",
    },
    "read_random": {
        "zh": "这是随机初始化的模型：分数都接近 0，所以权重几乎均匀（因果时第 i 行约为 1/(i+1)）。\n"
              "训练之后会出现更尖锐的模式，比如总看前一个 token 的头。",
        "en": "This model is randomly initialised: its scores are all near 0, so the weights are almost uniform\n"
              "(causal row i is about 1/(i+1) each). Training brings sharper patterns, e.g. heads that always\n"
              "look at the previous token.",
    },
    "no_labels": {"zh": "（{T} 个 token 太多，刻度上不标字符。）",
                  "en": "({T} tokens are too many to label every tick.)"},
    "no_glyph": {"zh": "没有找到能显示这些字符的字体，刻度上用码位标出：{chars}",
                 "en": "No installed font has these characters, so their ticks show code points: {chars}"},
}


say = translator(TEXT)


# ----------------------------------------------------------------------------
# arguments

def add_arguments(p):
    add_lang_argument(p)
    src = p.add_mutually_exclusive_group(required=True)
    src.add_argument("--text", help="the input text; each UTF-8 byte is one token")
    src.add_argument("--random", action="store_true", help="random token ids instead of a text")
    p.add_argument("--seq", type=Range(int, 1, MAX_TOKENS), default=None,
                   help=f"T, number of random tokens (with --random; default {DEFAULT_RANDOM_T})")
    p.add_argument("--out", required=True, metavar="FILE.png", help="where to write the picture")
    p.add_argument("--ckpt", metavar="DIR", help="a model trained with 'zerollm train' instead of a random one "
                   "(with --text, tokenized by the checkpoint's own tokenizer)")
    # the random GPT's; a checkpoint has its own (RANDOM_GPT holds the defaults, applied without --ckpt)
    p.add_argument("--n-layer", type=Range(int, 1, MAX_PANELS), default=None, help="layers of the random GPT (default 2)")
    p.add_argument("--n-head", type=Range(int, 1, MAX_PANELS), default=None,
                   help="heads per layer of the random GPT (default 4)")
    p.add_argument("--n-embd", type=FIELD_RANGES["n_embd"], default=None, help="C, the random GPT's width (default 64)")
    p.add_argument("--seed", type=SEED, default=None, help="seed of the random weights and random ids (default 0)")
    p.add_argument("--bidirectional", action="store_true",
                   help="no causal mask (a BERT-style encoder); a checkpoint has its own mask")
    budget.add_force_argument(p, replaces="an existing --out file", anyones=True)


# ----------------------------------------------------------------------------
# tokens and their tick labels

def byte_tokens(text):
    """Each UTF-8 byte is a token; a multi-byte character labels its first byte, the rest get '·'.

    >>> byte_tokens("a中")
    ([97, 228, 184, 173], ['a', '中', '·', '·'])
    """
    ids, labels = [], []
    for ch in text:
        data = ch.encode("utf-8", "surrogateescape")   # undecodable argv bytes come back as themselves
        ids.extend(data)
        labels.extend([ch] + [MIDDLE_DOT] * (len(data) - 1))
    return ids, labels


def tick_label(ch, glyphs):
    """What to print for one character: itself when a font can draw it, else a readable stand-in.

    >>> tick_label("\\n", set()), tick_label("中", set()), tick_label("$", {ord("$")})
    ('\\\\n', 'U+4E2D', '\\\\$')
    """
    special = {"\n": "\\n", "\t": "\\t", "\r": "\\r", " ": "␣" if ord("␣") in glyphs else "sp"}
    if ch in special:
        return special[ch]
    if unicodedata.category(ch).startswith("C") or ord(ch) not in glyphs:   # control, surrogate, no glyph
        return f"U+{ord(ch):04X}"
    return "\\$" if ch == "$" else ch      # a lone '$' is fine, but escaping keeps mathtext out of it


# ----------------------------------------------------------------------------
# matplotlib and fonts (imported only here: it is an optional dependency)

def import_matplotlib():
    """Return (font_manager, Figure, FigureCanvasAgg) or a ZeroLLMError that says how to install it."""
    try:
        import matplotlib.figure            # a missing (or, in the tests, blocked) package fails here
        from matplotlib import font_manager
        from matplotlib.backends.backend_agg import FigureCanvasAgg
    except ImportError:
        raise ZeroLLMError('matplotlib is not installed: pip install "zerollm[viz]"') from None
    return font_manager, matplotlib.figure.Figure, FigureCanvasAgg


# ----------------------------------------------------------------------------
# the figure

def build_figure(maps, labels, *, causal, families, cjk=False):
    """maps: one (nh, T, T) array per layer -> (fig, axes), axes an (n_layer, n_head) array.

    Every panel shares one colour scale, 0 to 1, so panels can be compared with each other.
    """
    _, Figure, FigureCanvasAgg = import_matplotlib()
    nl, (nh, T, _) = len(maps), maps[0].shape
    labelled = T <= MAX_LABELLED
    cell = min(max(0.15 * T + 0.6, 2.0), 6.5) if labelled else 2.2          # inches per panel
    fig = Figure(figsize=(cell * nh + 1.2, cell * nl + 0.9), dpi=100, layout="constrained")
    FigureCanvasAgg(fig)                                                     # the Agg backend, explicitly
    axes = fig.subplots(nl, nh, squeeze=False)
    size = min(8.0, max(4.0, 200.0 / T))
    for layer in range(nl):
        for head in range(nh):
            ax = axes[layer, head]
            image = ax.imshow(maps[layer][head], vmin=0.0, vmax=1.0, cmap="viridis", interpolation="nearest")
            ax.set_title(f"layer {layer}, head {head}", fontsize=9, fontfamily=families)
            if labelled:
                ax.set_xticks(range(T), labels, rotation=90, fontsize=size, fontfamily=families)
                ax.set_yticks(range(T), labels, fontsize=size, fontfamily=families)
            else:
                ax.set_xticks([])
                ax.set_yticks([])
    fig.colorbar(image, ax=axes, shrink=0.8, label="attention weight")
    title = f"Attention weights ({'causal' if causal else 'bidirectional'}): row = query, column = key"
    if cjk:
        title += "\n注意力权重：行 = 查询，列 = 键"
    fig.suptitle(title, fontfamily=families)
    return fig, axes


def check_out(path, force=False, ckpt=None):
    """Refuse an --out that cannot work, or that would replace a file someone saved (unless ``force``),
    before spending time on the model and the drawing: a .png name and the one output rule
    (zerollm.io.outdir.check_output_file), with the checkpoint it reads (``ckpt``) as its input."""
    if not str(path).lower().endswith(".png"):
        raise ZeroLLMError(f"--out must name a .png file, got {path!r}; e.g. --out heads.png")
    check_output_file(path, force=force, inputs=[("--ckpt", ckpt)], example="heads.png")


def save_png(fig, path, force=False):
    """Write the figure to ``path`` atomically (a temp file in the same directory, then os.replace)."""
    check_out(path, force)
    try:
        with atomic_write(path, "wb") as f:
            fig.savefig(f, format="png")
    except PermissionError:
        raise ZeroLLMError(f"cannot write {path!r}: permission denied; choose a writable --out") from None


# ----------------------------------------------------------------------------
# the command

def choose_tokens(args, rng):
    """(ids, one label or character per id) from --text or --random."""
    if args.text is not None:
        if args.seq is not None:
            raise ZeroLLMError("--seq is for --random; with --text the length is the text's byte count")
        ids, chars = byte_tokens(args.text)
        if not ids:
            raise ZeroLLMError("--text is empty; give at least one character")
        return ids, chars
    T = DEFAULT_RANDOM_T if args.seq is None else args.seq
    if not 1 <= T <= MAX_TOKENS:      # checked before drawing T random numbers
        raise ZeroLLMError(f"--seq must be a whole number from 1 to {MAX_TOKENS}, got {T}")
    ids = rng.integers(0, 256, T).tolist()
    return ids, [str(i) for i in ids]


def check_sizes(args, T):
    for flag, value in (("--n-layer", args.n_layer), ("--n-head", args.n_head), ("--n-embd", args.n_embd)):
        if value < 1:
            raise ZeroLLMError(f"{flag} must be a positive whole number, got {value}")
    if T > MAX_TOKENS:
        raise ZeroLLMError(f"{T} tokens is more than this picture can show ({MAX_TOKENS}); use a shorter "
                           "--text or a smaller --seq")
    panels = args.n_layer * args.n_head
    if panels > MAX_PANELS:
        raise ZeroLLMError(f"{args.n_layer} layers x {args.n_head} heads = {panels} panels, "
                           f"more than {MAX_PANELS} can be read; use a smaller --n-layer or --n-head")


def attention_maps(ids, args):
    """A random-init byte-level GPT reads ``ids``; returns one (nh, T, T) weights array per layer."""
    T = len(ids)
    cfg = GPTConfig(vocab_size=256, block_size=max(T, 64), n_layer=args.n_layer, n_head=args.n_head,
                    n_embd=args.n_embd, causal=not args.bidirectional)
    budget.require(budget.inference(cfg, 1, T, budget.Purpose("this random model", "--n-embd or --n-layer"),
                                    keep=True, fresh=True), force=args.force)
    model = GPT(cfg, seed=args.seed).eval()
    model.forward(np.array([ids]), keep=True)            # (1, T); keep the weights
    return [w[0] for w in model.attention_weights()]     # (B=1, nh, T, T) -> (nh, T, T) per layer


def trained_maps(args):
    """(maps, ids, labels, checkpoint or None, causal) for --ckpt: the model of a run, a step or a model
    directory (``zerollm convert`` or ``merge``; a LoRA run comes with its base) reads --text."""
    from dataclasses import replace

    from zerollm.interop.opening import Source, open_model
    if args.text is None:
        raise ZeroLLMError("--ckpt needs --text: the trained model reads your text")
    opened = open_model(Source(ckpt=args.ckpt, force=args.force))
    model, tok, ckpt = opened.model, opened.tokenizer, opened.checkpoint
    try:
        ids = tok.encode(args.text)
    except UnknownCharacters as err:
        raise ZeroLLMError(err.command_line("--text")) from None
    if not 1 <= len(ids) <= min(MAX_TOKENS, model.config.block_size):
        raise ZeroLLMError(f"--text is {len(ids)} tokens; give 1 to {min(MAX_TOKENS, model.config.block_size)}")
    if model.config.attn_impl == "flash":                # flash keeps no weights to draw: use naive
        naive = type(model)(replace(model.config, attn_impl="naive"), init=False)
        model = naive.load_state_dict(model.params).eval()
    model.forward(np.array([ids]), keep=True)
    return [w[0] for w in model.attention_weights()], ids, [tok.decode([i]) for i in ids], ckpt, model.config.causal


RANDOM_GPT = {"n_layer": 2, "n_head": 4, "n_embd": 64, "seed": 0}


def check_random_only(args):
    """--n-layer, --n-head, --n-embd, --seed and --bidirectional build the random GPT: with --ckpt the
    checkpoint's model is drawn as it was trained, so they would do nothing. Refused rather than ignored;
    without --ckpt the unset ones take their defaults (RANDOM_GPT)."""
    given = [f"--{k.replace('_', '-')}" for k in RANDOM_GPT if getattr(args, k) is not None]
    given += ["--bidirectional"] if args.bidirectional else []
    if args.ckpt and given:
        named = " and ".join([", ".join(given[:-1])] * (len(given) > 1) + given[-1:])
        # one whole message per number of flags, so that each has its own 中文 template
        if len(given) > 1:
            raise ZeroLLMError(f"{named} are for the random GPT; with --ckpt the checkpoint's model is drawn as "
                               "trained, with its own weights, layers, heads, width and mask: leave them out")
        raise ZeroLLMError(f"{named} is for the random GPT; with --ckpt the checkpoint's model is drawn as trained, "
                           "with its own weights, layers, heads, width and mask: leave it out")
    for key, default in RANDOM_GPT.items():
        if getattr(args, key) is None:
            setattr(args, key, default)


def run(args):
    check_random_only(args)
    lang = resolve_lang(args.lang)
    font_manager, _, _ = import_matplotlib()             # fail before any work if it is missing
    check_out(args.out, args.force, args.ckpt)
    ckpt = None
    if args.ckpt:
        maps, ids, chars, ckpt, causal = trained_maps(args)
        args.bidirectional = not causal
    else:
        ids, chars = choose_tokens(args, np.random.default_rng(args.seed))
        check_sizes(args, len(ids))
        maps = attention_maps(ids, args)
    families, glyphs = find_fonts(font_manager)
    # a token may be several characters (BPE) or part of one (a byte): label it character by character
    labels = ["".join(tick_label(c, glyphs) for c in tok) or "\u00b7" if args.text is not None else tok
              for tok in chars]
    fig, _ = build_figure(maps, labels, causal=not args.bidirectional, families=families,
                          cjk=len(families) > 1)
    save_png(fig, args.out, args.force)

    T, kind = len(ids), say("bidirectional" if args.bidirectional else "causal", lang)
    print(say("wrote", lang, path=args.out, nl=len(maps), nh=maps[0].shape[0], T=T, kind=kind))
    print(say("read", lang))
    print(say("read_bidirectional" if args.bidirectional else "read_causal", lang))
    print(say("read_trained", lang, ckpt=args.ckpt, step=ckpt.step) if ckpt else
          say("read_model", lang, ckpt=args.ckpt) if args.ckpt else say("read_random", lang))
    if T > MAX_LABELLED:
        print(say("no_labels", lang, T=T))
    missing = sorted({ch for tok in chars for ch in tok if args.text is not None and ord(ch) not in glyphs
                      and not unicodedata.category(ch).startswith("C") and ch != " "})
    if missing and T <= MAX_LABELLED:
        print(say("no_glyph", lang, chars=" ".join(f"{c}=U+{ord(c):04X}" for c in missing)))
    return 0
