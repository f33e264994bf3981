"""The k-quant part of ``zerollm quantize --explain --kind q4_K``: one super-block of 256 numbers worked through.

Q4_K (what most of a Q4_K_M file is) spends the same 4.5 bits a weight as Q4_0, but spends them otherwise:
one float16 pair (d, dmin) for 256 numbers, and for each of the 8 sub-blocks of 32 a six-bit scale and a
six-bit min, so a sub-block is x ~ d * sc * q - dmin * m with codes q in 0..15. The walkthrough prints the
sub-blocks' fitted scales and mins, how they become six-bit integers, the 12 bytes that pack them, the codes
of one sub-block, the numbers read back, and the error next to Q4_0's on the same numbers. The numbers come
from zerollm.interop.kquant, the code ``zerollm convert --quant q4_K`` writes files with.
"""

import numpy as np

from zerollm.io.i18n import translator
from zerollm.interop import kquant, quant
from zerollm.teach.fmt import heading, matrix, number, pad

TEXT = {
    "title": {"zh": "手算 Q4_K 量化：{R} x {K} 的矩阵（seed={seed}），256 个数一个超级块，分成 8 个 32 数的子块",
              "en": "Q4_K quantization by hand: a {R} x {K} matrix (seed={seed}), super-blocks of 256 numbers, "
                    "8 sub-blocks of 32 each"},
    "layout": {"zh": "Q4_K 每个超级块 144 字节：d 和 dmin（两个 float16，4 字节）+ 12 字节（8 个 6 位缩放 sc 和 8 个 6 位最小值 m）"
                     "+ 128 字节 4 位码。每个权重 4.5 位，和 Q4_0 一样大。\n"
                     "子块 j 的数读回为 x' = d*sc[j] * q - dmin*m[j]，q 在 0..15：每个子块有自己的缩放和偏移，只花 12 位。",
               "en": "Q4_K stores 144 bytes a super-block: d and dmin (two float16, 4 bytes) + 12 bytes (8 six-bit "
                     "scales sc and 8 six-bit mins m) + 128 bytes of 4-bit codes. 4.5 bits a weight, as Q4_0.\n"
                     "Sub-block j reads back as x' = d*sc[j] * q - dmin*m[j], q in 0..15: each sub-block has its own "
                     "scale and offset, for 12 bits."},
    "super": {"zh": "—— 第 0 行，第 0 个超级块（第 0..255 列）——", "en": "--- row 0, super-block 0 (columns 0..255) ---"},
    "fit": {"zh": "1. 每个子块先找最好的浮点缩放 s 和最小值 -min（x ≈ s*q + min，q 在 0..15）：在 21 个候选步长里各做一次\n"
                  "   加权最小二乘（权重 w = 子块均方根 + |x|，大数更要紧），留误差最小的一个（llama.cpp 的 make_qkx2_quants）。",
            "en": "1. Each sub-block first gets its best float scale s and min (x ~ s*q + min, q in 0..15): a weighted\n"
                  "   least-squares fit at each of 21 trial steps (weights w = the sub-block's RMS + |x|: big numbers\n"
                  "   matter more), keeping the one of least error (llama.cpp's make_qkx2_quants)."},
    "table": {"zh": "子块|最小 x|最大 x|s|-min|sc|m", "en": "sub|min x|max x|s|-min|sc|m"},
    "six": {"zh": "2. 超级块的 d = max(s) / 63 = {d}，dmin = max(-min) / 63 = {dmin}（都存成 float16）；\n"
                  "   每个子块 sc = round(63 s / max s)，m = round(63 (-min) / max(-min))：上表最后两列，都在 0..63。",
            "en": "2. The super-block's d = max(s) / 63 = {d}, dmin = max(-min) / 63 = {dmin} (both stored as float16);\n"
                  "   each sub-block's sc = round(63 s / max s), m = round(63 (-min) / max(-min)): the table's last two\n"
                  "   columns, each in 0..63."},
    "packed": {"zh": "3. 16 个 6 位数装进 12 个字节（十六进制）：字节 0..3 是 sc[0..3]，4..7 是 m[0..3]，各占低 6 位，\n"
                     "   高 2 位放 sc[4..7] / m[4..7] 的第 4、5 位；字节 8..11 低 4 位是 sc[4..7] 的低 4 位，高 4 位是 m[4..7] 的：",
               "en": "3. The 16 six-bit numbers packed into 12 bytes (hex): bytes 0..3 hold sc[0..3], 4..7 hold m[0..3] in\n"
                     "   their low 6 bits, and bits 4-5 of sc[4..7] / m[4..7] in their top 2; bytes 8..11 hold the low 4\n"
                     "   bits of sc[4..7] (low nibble) and of m[4..7] (high nibble):"},
    "codes": {"zh": "4. 用存下的缩放重新取码：q = round((x + dmin*m[0]) / (d*sc[0]))，截到 0..15。子块 0 的 32 个数和它们的码：",
              "en": "4. The codes, taken again with the stored scales: q = round((x + dmin*m[0]) / (d*sc[0])), clipped\n"
                    "   to 0..15. Sub-block 0's 32 numbers and their codes:"},
    "nibbles": {"zh": "   每 64 个数占 32 个字节：第 l 个字节的低 4 位是第 l 个数的码，高 4 位是第 l+32 个数的码。",
                "en": "   Each 64 numbers take 32 bytes: byte l holds the code of number l (low nibble) and of number l+32 (high)."},
    "back": {"zh": "5. 读回来：x' = {dsc} * q - {dm}：", "en": "5. Read back: x' = {dsc} * q - {dm}:"},
    "compare": {"zh": "6. 整个超级块（256 个数，同样 144 字节）的误差：", "en": "6. The error on the whole super-block (256 numbers, 144 bytes both):"},
    "row": {"zh": "   {kind}  最大 |误差| {emax}，均方根 {rms}", "en": "   {kind}  largest |error| {emax}, RMS {rms}"},
    "why": {"zh": "   Q4_0 每 32 个数一个对称的缩放（0 永远在中间）；Q4_K 的子块还有偏移，码用满 x 的实际范围，缩放也是拟合出来的。",
            "en": "   Q4_0 has one symmetric scale per 32 numbers (zero always mid-range); a Q4_K sub-block also has an\n"
                  "   offset, so its codes span the numbers' actual range, and its scale is fitted."},
    "reference": {"zh": "和 gguf 包（llama.cpp 的参考实现）反量化同样的字节：{same}。tests/test_kquant.py 还把这些字节和 llama.cpp 自己的量化器逐字节比较。",
                  "en": "Dequantized by the gguf package (llama.cpp's reference) from the same bytes: {same}. "
                        "tests/test_kquant.py also compares these bytes with llama.cpp's own quantizer."},
    "same": {"zh": "完全相同", "en": "identical"},
    "differ": {"zh": "不同！请报告这个问题", "en": "DIFFERENT - please report this"},
    "no_reference": {"zh": "没有安装 gguf 包，跳过比较（pip install gguf）。",
                     "en": "the gguf package is not installed, so the comparison is skipped (pip install gguf)."},
}
say = translator(TEXT)


def explain_q4_k(w, lang, seed):
    """Print the walkthrough for the first super-block of ``w`` (R, K), K a multiple of 256."""
    R, K = w.shape
    heading(say("title", lang, R=R, K=K, seed=seed))
    print(say("layout", lang))
    x = w[0, :kquant.QK]
    raw = kquant.quantize(x[None], "q4_K")[0]                           # (144,)
    back = kquant.dequantize(raw[None], "q4_K")[0]
    print("\n" + say("super", lang))
    print(say("fit", lang))
    xs = x.reshape(8, 32)
    s, lo, _ = kquant.fit_sub_blocks(xs, "q4_K")
    sc, m = kquant.unpack_scales(raw[4:16])
    widths = (5, 9, 9, 9, 9, 3, 3)
    print("   " + "  ".join(pad(h, w, ">" if i else "<") for i, (h, w) in enumerate(zip(say("table", lang).split("|"), widths))))
    for j in range(8):
        print(f"   {j:<5}  {xs[j].min():>9.4f}  {xs[j].max():>9.4f}  {s[j]:>9.5f}  {-lo[j]:>9.5f}  {sc[j]:>3}  {m[j]:>3}")
    d, dmin = (float(raw[a:a + 2].view(np.float16)[0]) for a in (0, 2))
    print(say("six", lang, d=number(d, 6), dmin=number(dmin, 6)))
    print(say("packed", lang))
    print("  " + " ".join(f"{v:02x}" for v in raw[4:16]))
    print(say("codes", lang))
    print(matrix(xs[0].reshape(4, 8), 4))
    print(matrix((raw[16:48] & 15).reshape(4, 8).astype(int), 0))
    print(say("nibbles", lang))
    print(say("back", lang, dsc=number(np.float32(d) * np.float32(sc[0]), 6), dm=number(np.float32(dmin) * np.float32(m[0]), 6)))
    print(matrix(back[:32].reshape(4, 8), 4))
    print("\n" + say("compare", lang))
    for kind, got in (("Q4_K", back), ("Q4_0", quant.dequantize(quant.quantize(x[None], "q4_0"), "q4_0", (1, 256))[0])):
        err = got - x
        print(say("row", lang, kind=kind, emax=number(np.abs(err).max(), 5), rms=number(np.sqrt(np.mean(err ** 2)), 5)))
    print(say("why", lang))
    try:
        import gguf
    except ImportError:
        print(say("no_reference", lang))
        return
    theirs = gguf.quants.dequantize(raw[None], gguf.GGMLQuantizationType.Q4_K)[0]
    print(say("reference", lang, same=say("same" if np.array_equal(theirs, back) else "differ", lang)))
