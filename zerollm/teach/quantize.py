"""``zerollm quantize --explain``: Q8_0 and Q4_0 worked through by hand on a small matrix.

Each row is cut into blocks of 32 numbers; each block gets one scale d, stored as float16, and 32
small integers q with x ~ d * q. The walkthrough prints, block by block: the numbers, how d is
chosen, x / d before and after rounding, the bytes GGUF stores, the numbers read back and the error;
then what the error does to a matrix product. The numbers come from zerollm.interop.quant, the same
code ``zerollm convert --quant`` writes files with.

    zerollm quantize --explain                         # Q8_0 and Q4_0 on a 2 x 64 random matrix
    zerollm quantize --explain --kind q4_0 --rows 1 --cols 32 --lang zh
    zerollm quantize --explain --kind q4_K              # a super-block of 256: zerollm.teach.quantize_k
"""

import numpy as np

from zerollm.io.argtypes import SEED, Range
from zerollm.io.errors import ZeroLLMError
from zerollm.io.i18n import add_lang_argument, resolve_lang, translator
from zerollm.interop import kquant, quant
from zerollm.teach.fmt import heading, matrix, number
from zerollm.teach.quantize_k import explain_q4_k

TEXT = {
    "title": {"zh": "手算 {kind} 量化：{R} x {K} 的矩阵（seed={seed}），每块 32 个数，一个 float16 缩放因子",
              "en": "{kind} quantization by hand: a {R} x {K} matrix (seed={seed}), blocks of 32 numbers, "
                    "one float16 scale each"},
    "layout": {"zh": "{kind} 每块 {n} 字节：2 字节 d（float16）+ {body}。每个权重 {bits} 位，float32 是 32 位（{ratio:.1f} 倍小）。",
               "en": "{kind} stores {n} bytes a block: 2 bytes of d (float16) + {body}. That is {bits} bits a "
                     "weight against float32's 32 ({ratio:.1f}x smaller)."},
    "body_q8_0": {"zh": "32 个 int8（-127..127）", "en": "32 int8 values (-127..127)"},
    "body_q4_0": {"zh": "16 字节，每字节两个 4 位码（0..15）", "en": "16 bytes, two 4-bit codes (0..15) in each"},
    "block": {"zh": "—— 第 {r} 行，第 {b} 块（第 {lo}..{hi} 列）——", "en": "--- row {r}, block {b} (columns {lo}..{hi}) ---"},
    "x": {"zh": "1. 这一块的 32 个数 x：", "en": "1. The block's 32 numbers x:"},
    "scale_q8_0": {"zh": "2. 缩放因子 d = max|x| / 127 = {amax} / 127 = {d}；存成 float16 后是 {d16}。\n"
                         "   这样最大的 |x| 正好变成 ±127，用满 int8 的范围。",
                   "en": "2. The scale d = max|x| / 127 = {amax} / 127 = {d}; stored as float16 it is {d16}.\n"
                         "   The largest |x| then becomes exactly ±127, using int8's whole range."},
    "scale_q4_0": {"zh": "2. m = 绝对值最大的那个数（带符号）= {m}；d = m / -8 = {d}；存成 float16 后是 {d16}。\n"
                         "   4 位码减 8 后范围是 -8..7，不对称：让 m 落在 -8 上，多出来的那一格给了最大的数。",
                   "en": "2. m = the number of largest magnitude, with its sign = {m}; d = m / -8 = {d}; as float16 {d16}.\n"
                         "   Codes minus 8 run -8..7, one more on the negative side: m lands on -8 and gets that extra step."},
    "ratio": {"zh": "3. x / d（用 float32 的 d 计算，和 ggml 一样）：", "en": "3. x / d (with d in float32, as ggml computes it):"},
    "round_q8_0": {"zh": "4. 四舍五入（0.5 远离 0，C 的 roundf）得到 q（int8）：",
                   "en": "4. Rounded to the nearest integer (halves away from zero, C's roundf): q (int8):"},
    "round_q4_0": {"zh": "4. 码 c = min(15, 截断(x/d + 8.5))，也就是四舍五入后加 8：",
                   "en": "4. Codes c = min(15, trunc(x/d + 8.5)), i.e. rounded, plus 8:"},
    "bytes": {"zh": "5. 存进文件的字节（十六进制，前 2 个是 d）：", "en": "5. The bytes in the file (hex; the first 2 are d):"},
    "nibbles": {"zh": "   第 j 个字节 = c[j] | c[j+16] << 4：低 4 位是第 j 个码，高 4 位是第 j+16 个。",
                "en": "   Byte j = c[j] | c[j+16] << 4: code j in the low nibble, code j + 16 in the high one."},
    "back": {"zh": "6. 读回来：x' = d16 * {code}：", "en": "6. Read back: x' = d16 * {code}:"},
    "error": {"zh": "7. 误差 x' - x：最大 |误差| {emax}（≈ d 的 {frac} 倍；四舍五入最多差 d/2{extra}），均方根 {rms}。",
              "en": "7. Error x' - x: largest |error| {emax} ({frac} of d; rounding misses by at most d/2{extra}), "
                    "RMS {rms}."},
    "extra_q4_0": {"zh": "；与 m 符号相反的一端只到 7d，那里最多差 d", "en": "; up to d at the end opposite m, which stops at 7 d"},
    "matrix_title": {"zh": "整个矩阵", "en": "The whole matrix"},
    "matrix_error": {"zh": "相对误差 ‖W' - W‖ / ‖W‖ = {rel}；{n} 块，{bytes} 字节（float32 要 {f32} 字节）。",
                     "en": "Relative error |W' - W| / |W| = {rel}; {n} blocks, {bytes} bytes (float32: {f32} bytes)."},
    "matmul": {"zh": "矩阵乘法 y = W x（x 是随机向量）：‖y' - y‖ / ‖y‖ = {rel}。快速引擎直接用块算 y'，一次解码一块，不还原整个矩阵。",
               "en": "Matrix product y = W x (x a random vector): |y' - y| / |y| = {rel}. The fast engine computes y' "
                     "from the blocks, one block decoded at a time, never the whole matrix."},
    "reference": {"zh": "和 gguf 包（llama.cpp 的参考实现）的量化结果逐字节比较：{same}。",
                  "en": "Byte-for-byte against the gguf package's quantizer (llama.cpp's reference): {same}."},
    "same": {"zh": "完全相同", "en": "identical"},
    "differ": {"zh": "不同！请报告这个问题", "en": "DIFFERENT - please report this"},
    "no_reference": {"zh": "没有安装 gguf 包，跳过逐字节比较（pip install gguf）。",
                     "en": "the gguf package is not installed, so the byte comparison is skipped (pip install gguf)."},
    "shown": {"zh": "（只逐步展示前 {n} 块。）", "en": "(Only the first {n} blocks are shown step by step.)"},
}
say = translator(TEXT)
SHOWN_BLOCKS = 2


def add_arguments(p):
    add_lang_argument(p)
    p.add_argument("--explain", action="store_true", help="print the step-by-step walkthrough")
    p.add_argument("--kind", choices=quant.KINDS + ("both", "q4_K"), default="both",
                   help="q8_0, q4_0 or both (default); q4_K: a k-quant super-block of 256, next to Q4_0")
    p.add_argument("--rows", type=Range(int, 1, 64), default=2, help="rows of the example matrix (default 2)")
    p.add_argument("--cols", type=Range(int, 32, 4096), default=None,
                   help="columns, a multiple of 32 (default 64: two blocks a row); for q4_K a multiple of 256 "
                        "(default 256)")
    p.add_argument("--seed", type=SEED, default=0, help="random seed of the example (default 0)")


def run(args):
    if not args.explain:
        raise ZeroLLMError("zerollm quantize explains Q8_0 / Q4_0 on a small matrix: add --explain. To quantize "
                           "a model, write a GGUF file: zerollm convert --from RUN --to FILE.gguf --quant q8_0")
    whole = kquant.QK if args.kind == "q4_K" else quant.BLOCK
    cols = args.cols if args.cols is not None else (kquant.QK if args.kind == "q4_K" else 64)
    if cols % whole:
        raise ZeroLLMError(f"--cols must be a multiple of {whole} (whole blocks), got {cols}")
    lang = resolve_lang(args.lang)
    rng = np.random.default_rng(args.seed)
    w = (rng.standard_normal((args.rows, cols)) * 0.5).astype(np.float32)
    if args.kind == "q4_K":
        explain_q4_k(w, lang, args.seed)
        return 0
    for kind in (quant.KINDS if args.kind == "both" else (args.kind,)):
        explain(w, kind, lang, args.seed, rng)
    return 0


def explain(w, kind, lang, seed, rng):
    R, K = w.shape
    per = quant.BLOCK_BYTES[kind]
    heading(say("title", lang, kind=kind.upper(), R=R, K=K, seed=seed))
    print(say("layout", lang, kind=kind.upper(), n=per, body=say(f"body_{kind}", lang), bits=per * 8 / 32,
              ratio=32 / (per * 8 / 32)))
    data = quant.quantize(w, kind)                                     # (R, nb * per)
    back = quant.dequantize(data, kind, w.shape)
    nb = K // quant.BLOCK
    for n in range(min(R * nb, SHOWN_BLOCKS)):
        r, b = divmod(n, nb)
        _explain_block(w[r, b * 32:(b + 1) * 32], data[r, b * per:(b + 1) * per], back[r, b * 32:(b + 1) * 32],
                       kind, lang, r, b)
    if R * nb > SHOWN_BLOCKS:
        print(say("shown", lang, n=SHOWN_BLOCKS))
    _explain_matrix(w, data, back, kind, lang, rng)


def _explain_block(x, raw, back, kind, lang, r, b):
    print("\n" + say("block", lang, r=r, b=b, lo=b * 32, hi=b * 32 + 31))
    print(say("x", lang))
    print(matrix(x.reshape(4, 8), 4))
    d16 = float(raw[:2].view(np.float16)[0])
    if kind == "q8_0":
        amax = float(np.abs(x).max())
        d = np.float32(amax) / np.float32(127)
        print(say("scale_q8_0", lang, amax=number(amax, 6), d=number(d, 8), d16=number(d16, 8)))
    else:
        m = float(x[np.abs(x).argmax()])
        d = np.float32(m) / np.float32(-8)
        print(say("scale_q4_0", lang, m=number(m, 6), d=number(d, 8), d16=number(d16, 8)))
    print(say("ratio", lang))
    print(matrix((x / d).reshape(4, 8), 3))
    print(say(f"round_{kind}", lang))
    codes = raw[2:].view(np.int8) if kind == "q8_0" else np.concatenate([raw[2:] & 15, raw[2:] >> 4])
    print(matrix(codes.reshape(4, 8).astype(int), 0))
    print(say("bytes", lang))
    print("  " + " ".join(f"{v:02x}" for v in raw))
    if kind == "q4_0":
        print(say("nibbles", lang))
    print(say("back", lang, code="q" if kind == "q8_0" else "(c - 8)"))
    print(matrix(back.reshape(4, 8), 4))
    err = back - x
    emax = float(np.abs(err).max())
    print(say("error", lang, emax=number(emax, 6), frac=number(emax / abs(d16) if d16 else 0, 2),
              rms=number(np.sqrt(np.mean(err ** 2)), 6), extra=say("extra_q4_0", lang) if kind == "q4_0" else ""))


def _explain_matrix(w, data, back, kind, lang, rng):
    print("\n" + say("matrix_title", lang))
    rel = np.linalg.norm(back - w) / np.linalg.norm(w)
    print(say("matrix_error", lang, rel=number(rel, 5), n=w.size // 32, bytes=data.nbytes, f32=w.nbytes))
    x = rng.standard_normal(w.shape[1]).astype(np.float32)
    y, y_q = w @ x, back @ x
    print(say("matmul", lang, rel=number(np.linalg.norm(y_q - y) / np.linalg.norm(y), 5)))
    try:
        import gguf
    except ImportError:
        print(say("no_reference", lang))
        return
    theirs = gguf.quants.quantize(w, getattr(gguf.GGMLQuantizationType, kind.upper()))
    print(say("reference", lang, same=say("same" if np.array_equal(theirs, data) else "differ", lang)))
