"""中文 of the decode-speed work (issue #61): a GGUF matrix whose stacked pieces are blocks of several kinds
(zerollm.interop.quant.StackedBlocks)."""

ZH = {
    "stacked blocks need parts of one width, got {0}":
        "拼接的量化块要求各部分的宽度相同，收到的形状是 {0}",
}
