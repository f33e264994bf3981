"""中文 of the k-quants (Q4_K, Q5_K, Q6_K): zerollm.interop.kquant, the GGUF types read, convert --quant."""

ZH = {
    "a row must hold a multiple of {0} numbers for k-quants, got shape {1}":
        "k-quants 要求每行的数字个数是 {0} 的倍数，收到的形状是 {1}",
    "{0} data must be whole {1}-byte blocks a row, got {2} bytes; the file is truncated or damaged":
        "{0} 数据每行必须由完整的 {1} 字节块组成，收到的是 {2} 字节；文件被截断或已损坏",
    "{0} data holds {1} numbers, not the {2} of shape {3}; the file is damaged":
        "{0} 数据里有 {1} 个数，而不是形状 {3} 应有的 {2} 个；文件已损坏",
    "{0}: tensor {1} is of type {2}; zerollm reads F32, F16, Q8_0, Q4_0, Q5_0, Q5_1, Q4_K, Q5_K and Q6_K (requantize the file, e.g. llama.cpp's llama-quantize ... Q4_K_M)":
        "{0}：张量 {1} 的类型是 {2}；zerollm 能读 F32、F16、Q8_0、Q4_0、Q5_0、Q5_1、Q4_K、Q5_K 和 Q6_K"
        "（请重新量化这个文件，例如用 llama.cpp 的 llama-quantize ... Q4_K_M）",
    "with --to FILE.gguf: how the matrices are stored (default f32; q4_K_M and q5_K_M are llama.cpp's mixes, with Q6_K where it puts them); norms and biases stay f32":
        "配合 --to FILE.gguf：矩阵用什么格式存储（默认 f32；q4_K_M 和 q5_K_M 是 llama.cpp 的混合方案，"
        "在它放 Q6_K 的地方同样用 Q6_K）；归一化层和偏置保持 f32",
    "q8_0, q4_0 or both (default); q4_K: a k-quant super-block of 256, next to Q4_0":
        "q8_0、q4_0 或 both（默认，两种都讲）；q4_K：一个 256 个数的 k-quant 超级块，并和 Q4_0 对比",
    "columns, a multiple of 32 (default 64: two blocks a row); for q4_K a multiple of 256 (default 256)":
        "列数，32 的倍数（默认 64：每行两块）；q4_K 要 256 的倍数（默认 256）",
}
