"""中文 for `zerollm serve`'s speed: its event loop, its engine and its stream interval (issue #60)."""

ZH = {
    '\'numpy\' (the readable reference) or \'fast\' (fused numba kernels, pip install "zerollm[fast]"); default: '
    '$ZEROLLM_ENGINE, else fast where numba is installed (it serves more tokens/s), else numpy':
        '\'numpy\'（易读的参考实现）或 \'fast\'（融合的 numba 内核，pip install "zerollm[fast]"）；默认：'
        '$ZEROLLM_ENGINE，没有时装了 numba 就用 fast（服务时每秒的 token 更多），否则用 numpy',
    "milliseconds between a streamed answer's chunks at least: tokens that come sooner go together into the next "
    "chunk; the first token and the end go at once (default {0}: a 60 Hz screen's frame; 0: a chunk per token)":
        "一条流式回答相邻两个分块至少相隔的毫秒数：在这之前来的 token 一起放进下一个分块；首 token 和结尾立即发出"
        "（默认 {0}：60 Hz 屏幕的一帧；0：每个 token 一个分块）",
}
