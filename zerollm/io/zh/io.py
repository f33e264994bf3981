"""中文 of the io room's messages: its error templates (scripts/zh_catalog.py --room io); the words argtypes.Range.describe and the file checks put into them.

Keys are templates: {0}, {1}, ... stand for the values filled in, in the order of the English.
"""

ZH = {
    'a Range is of int or float, got {0}':
        'Range 只能是 int 或 float 类型，实际是 {0}',
    'must be {0}, got {1}':
        '必须是 {0}，实际是 {1}',
    '{0} must be {1}, got {2}':
        '{0} 必须是 {1}，实际是 {2}',
    '{0}: not a readable .npy file (no NumPy header); save it with np.save, or write JSON instead':
        '{0}：不是可读的 .npy 文件（没有 NumPy 文件头）；请用 np.save 保存，或改写成 JSON',
    '{0}: cannot read this .npy ({1}); save a plain numeric array with np.save(path, np.asarray(a, dtype=np.float32))':
        '{0}：无法读取这个 .npy（{1}）；请用 np.save(path, np.asarray(a, dtype=np.float32)) 保存一个普通的数值数组',
    '{0}: not a readable .npy file ({1})':
        '{0}：不是可读的 .npy 文件（{1}）',
    '{0}: not valid JSON ({1}); write a nested list such as [[0.1, 0.2], [0.3, 0.4]]':
        '{0}：不是有效的 JSON（{1}）；请写成嵌套列表，例如 [[0.1, 0.2], [0.3, 0.4]]',
    '{0}: expected a rectangular nested list of numbers; rows of different lengths or non-numbers were found (every row needs the same number of entries)':
        '{0}：应为由数字组成的矩形嵌套列表；但发现了长度不同的行或不是数字的项（每一行的项数必须相同）',
    '{0}: {1} must end in .npy or .json':
        '{0}：{1} 必须以 .npy 或 .json 结尾',
    '{0}: file not found: {1}':
        '{0}：找不到文件：{1}',
    '{0}: {1} holds {2} data; it must be real numbers':
        '{0}：{1} 里是 {2} 数据；必须是实数',
    '{0}: {1} is empty (shape {2}); every size must be >= 1':
        '{0}：{1} 是空的（形状 {2}）；每一维的大小都必须 >= 1',
    '{0}: {1} contains NaN or infinity; use finite numbers only':
        '{0}：{1} 里有 NaN 或无穷大；只能用有限的数',
    '{0}: {1} holds {2}; use numbers up to {3} in size (the scores multiply them twice and would overflow)':
        '{0}：{1} 里有 {2}；数的大小不要超过 {3}（计算分数时要乘两次，会溢出）',
    'cannot write {0}: the directory {1} does not exist; create it first (mkdir -p) or choose another output path':
        '无法写入 {0}：目录 {1} 不存在；请先创建它（mkdir -p），或换一个输出路径',
    '{0} is {1}, not a {2}: it must be a regular file{3}; give the path of a regular file, or put one in its place':
        '{0} 是 {1}，不是 {2}：它必须是普通文件{3}；请给一个普通文件的路径，或在那里放一个普通文件',
    '{0} is a GGUF file, not a {1}; zerollm sample, chat, eval and serve read it with --gguf FILE':
        '{0} 是 GGUF 文件，不是 {1}；zerollm sample、chat、eval 和 serve 用 --gguf FILE 读取它',
    '{0} is a file, not a {1}; {2}':
        '{0} 是一个文件，不是 {1}；{2}',
    '{0} is {1}, not a {2}; {3}':
        '{0} 是 {1}，不是 {2}；{3}',
    '{0} not found: {1}; {2}':
        '找不到 {0}：{1}；{2}',
    '{0} exists and is not a regular file (a folder, a link, a device or a pipe); zerollm writes a file whole and renames it into place, which would replace it: choose a new file name':
        '{0} 已存在，而且不是普通文件（是文件夹、链接、设备或管道）；zerollm 会先完整写好文件再改名放到那里，那样会替换掉它：请换一个新文件名',
    "atomic_write mode must be 'w' or 'wb', got {0}":
        "atomic_write 的 mode 必须是 'w' 或 'wb'，实际是 {0}",
    'cannot save {0} as JSON: {1}; keep only dicts, lists, str, int, float, bool and None in it (convert arrays with .tolist())':
        '无法把 {0} 保存成 JSON：{1}；里面只能有 dict、list、str、int、float、bool 和 None（数组请用 .tolist() 转换）',
    '{0} not found: {1}; check the path':
        '找不到 {0}：{1}；请检查路径',
    '{0} {1} is not UTF-8 text ({2}); it is not a JSON file, point at the right file':
        '{0} {1} 不是 UTF-8 文本（{2}）；它不是 JSON 文件，请指向正确的文件',
    '{0} {1} is not valid JSON ({2}); the file is damaged, restore or re-create it':
        '{0} {1} 不是有效的 JSON（{2}）；文件已损坏，请恢复或重新生成它',
    '{0} {1} is nested too deeply to be a {2}; the file is damaged, restore or re-create it':
        '{0} {1} 嵌套太深，不可能是 {2}；文件已损坏，请恢复或重新生成它',
    '{0} is being written by pid {1}{2}{3}{4}; wait for it to finish (or stop it), or choose another output directory':
        '{0} 正在被进程 {1}{2}{3}{4} 写入；请等它结束（或停掉它），或换一个输出目录',
    '{0} {1} and {2} {3} overlap (one is, or is inside, the other): writing {4} would destroy what is read; choose an output directory outside {5}':
        '{0} {1} 和 {2} {3} 有重叠（一个就是另一个，或在另一个里面）：写 {4} 会毁掉要读取的内容；请选一个在 {5} 之外的输出目录',
    '--out {0} is a folder that already holds files a run does not write ({1}); a run directory holds only the run: choose a new or empty directory':
        '--out {0} 是一个已经有文件的文件夹，而这些文件不是训练运行写的（{1}）；运行目录里只放这次运行：请选一个新的或空的目录',
    '{0} {1} lies inside {2}, which is {3}: writing there would change what that run resumes or samples from; choose a path outside it':
        '{0} {1} 位于 {2} 里面，而那是 {3}：写到那里会改变那次运行续训或采样所用的内容；请选一个在它之外的路径',
    '{0} {1} is a directory: it is not a regular file, and {2} names the file to write; give a file name such as {3}':
        '{0} {1} 是一个目录：它不是普通文件，而 {2} 指定的是要写的文件；请给一个文件名，例如 {3}',
    '{0} {1} is, or lies inside, {2} {3}, which this command reads; writing it would destroy the input: choose another output file':
        '{0} {1} 就是（或位于）本命令要读取的 {2} {3}；写它会毁掉输入：请换一个输出文件',
    'cannot write {0}: the directory {1} does not exist; create it first (mkdir -p) or choose another {2}':
        '无法写入 {0}：目录 {1} 不存在；请先创建它（mkdir -p），或换一个 {2}',
    '{0} {1} already exists; pass --force to replace it, or choose another file name':
        '{0} {1} 已经存在；加 --force 替换它，或换一个文件名',
    '{0} {1} is where this run writes ({2}); move the file out of --out first':
        '{0} {1} 正是这次运行要写的位置（{2}）；请先把这个文件移出 --out',
    '--out {0} is a file, not a folder; a stage writes a run directory there: choose a new directory name':
        '--out {0} 是一个文件，不是文件夹；训练阶段要在那里写一个运行目录：请换一个新的目录名',
    '--out {0} is {1}; a stage writes a run directory: choose a new directory':
        '--out {0} 是 {1}；训练阶段要写一个运行目录：请换一个新目录',
    '{0} is a file or a link; choose a directory path':
        '{0} 是文件或链接；请给一个目录路径',
    "tensor name {0} is not allowed; use a str other than '__metadata__'":
        "不允许用 {0} 作张量名；请用 '__metadata__' 以外的字符串",
    '{0}: only float tensors can be stored as BF16, got {1}':
        '{0}：只有浮点张量能存成 BF16，实际是 {1}',
    '{0}: dtype {1} cannot be stored in safetensors; convert it, e.g. .astype(np.float32) (supported: {2})':
        '{0}：dtype {1} 不能存进 safetensors；请先转换，例如 .astype(np.float32)（支持的有：{2}）',
    'bf16 names {0} are not among the tensors being saved; check the spelling':
        'bf16 指定的名字 {0} 不在要保存的张量里；请检查拼写',
    'safetensors metadata must be a dict of str -> str; encode other values with str() or json.dumps()':
        'safetensors 的元数据必须是 str -> str 的字典；其他值请用 str() 或 json.dumps() 编码',
    'save_file needs a dict of name -> array, got {0}':
        'save_file 需要一个 名字 -> 数组 的字典，实际是 {0}',
    '{0} is too short ({1} bytes) to be a safetensors file; it is empty or truncated: save or download it again':
        '{0} 太短（{1} 字节），不可能是 safetensors 文件；它是空的或被截断了：请重新保存或下载',
    '{0}: this is a PyTorch pickle file; zerollm only reads safetensors because loading pickle can run code; {1}':
        '{0}：这是 PyTorch 的 pickle 文件；zerollm 只读 safetensors，因为加载 pickle 可能会执行代码；{1}',
    '{0}: header length {1} is impossible for a {2}-byte file (limit 100 MB); this is not a safetensors file or it is truncated':
        '{0}：对一个 {2} 字节的文件来说，文件头长度 {1} 不可能（上限 100 MB）；这不是 safetensors 文件，或者被截断了',
    '{0}: the safetensors header is not valid JSON ({1}); the file is damaged or not safetensors: save or download it again':
        '{0}：safetensors 文件头不是有效的 JSON（{1}）；文件已损坏，或者不是 safetensors：请重新保存或下载',
    '{0}: the safetensors header must be a JSON object':
        '{0}：safetensors 文件头必须是一个 JSON 对象',
    '{0}: tensor {1} needs exactly dtype, shape and data_offsets':
        '{0}：张量 {1} 必须正好有 dtype、shape 和 data_offsets',
    '{0}: tensor {1} has unknown dtype {2}; zerollm reads {3}: convert the file to one of them':
        '{0}：张量 {1} 的 dtype {2} 未知；zerollm 能读 {3}：请把文件转换成其中一种',
    '{0}: tensor {1}: shape and data_offsets must be lists of non-negative ints, got {2} and {3}':
        '{0}：张量 {1}：shape 和 data_offsets 必须是非负整数的列表，实际是 {2} 和 {3}',
    '{0}: tensor {1} has data_offsets {2} outside the {3}-byte data section; the file is truncated or damaged':
        '{0}：张量 {1} 的 data_offsets {2} 超出了 {3} 字节的数据区；文件被截断或已损坏',
    '{0}: tensor {1} of shape {2} and dtype {3} needs {4} bytes but data_offsets {5} give {6}; the file is damaged':
        '{0}：形状为 {2}、dtype 为 {3} 的张量 {1} 需要 {4} 字节，但 data_offsets {5} 给出的是 {6}；文件已损坏',
    '{0}: tensor {1} overlaps the previous tensor (starts at byte {2} < {3}); the file is damaged':
        '{0}：张量 {1} 和前一个张量重叠（从第 {2} 字节开始，< {3}）；文件已损坏',
    '{0}: bytes {1}..{2} of the data belong to no tensor; the file is damaged':
        '{0}：数据的第 {1}..{2} 字节不属于任何张量；文件已损坏',
    '{0}: the header describes {1} bytes of data but the file holds {2}; the file is truncated or has trailing bytes':
        '{0}：文件头描述了 {1} 字节的数据，但文件里有 {2} 字节；文件被截断，或末尾有多余的字节',
    'safetensors file not found: {0}; check the path':
        '找不到 safetensors 文件：{0}；请检查路径',
    '{0}: __metadata__ must map str -> str; the file is damaged':
        '{0}：__metadata__ 必须是 str -> str 的映射；文件已损坏',
    '{0}: could not read tensor {1}; the file changed while reading, try again':
        '{0}：无法读取张量 {1}；读取时文件被改动了，请再试一次',
    '{0}: could not read a tensor; the file changed while reading, try again':
        '{0}：无法读取一个张量；读取过程中文件被改动了，请重试',
    '{0}: {1} must be {2}{3}, got {4}; {5}':
        '{0}：{1} 必须是 {2}{3}，实际是 {4}；{5}',
    '{0} must be a JSON object of {1} fields, got {2}; {3}':
        '{0} 必须是有 {1} 字段的 JSON 对象，实际是 {2}；{3}',
    '{0}: unknown field(s) {1}; {2} has {3}. Remove them (a typo, or a file from a newer zerollm?)':
        '{0}：未知的字段 {1}；{2} 有的是 {3}。请删掉它们（是拼写错误，还是更新版本的 zerollm 写的文件？）',
    '{0} is not a saved random generator state (its "bit_generator" is {1}, expected one of {2}); {3}':
        '{0} 不是保存下来的随机数生成器状态（它的 "bit_generator" 是 {1}，应为 {2} 之一）；{3}',
    '{0} is a damaged {1} state ({2}: {3}); {4}':
        '{0} 是损坏的 {1} 状态（{2}：{3}）；{4}',
    '{0}: {1} tensor(s) hold NaN or infinity ({2}); these weights are broken (training diverged, or the file is damaged): use an earlier checkpoint or train again with a lower --lr':
        '{0}：{1} 个张量里有 NaN 或无穷大（{2}）；这些权重坏了（训练发散了，或文件已损坏）：请用更早的检查点，或用更低的 --lr 重新训练',
    '{0}: {1}; {2}':
        '{0}：{1}；{2}',
    '{0} must hold a JSON object; {1}':
        '{0} 里必须是一个 JSON 对象；{1}',
    '{0}: best_val_loss must be a number or null, got {1}; {2}':
        '{0}：best_val_loss 必须是数字或 null，实际是 {1}；{2}',
    '{0}: objective_state must be a JSON object, got {1}; {2}':
        '{0}：objective_state 必须是 JSON 对象，实际是 {1}；{2}',
    '{0} must hold a JSON object of random generator states; {1}':
        '{0} 里必须是由随机数生成器状态组成的 JSON 对象；{1}',
    '{0}: betas must be a list of two numbers, got {1}; {2}':
        '{0}：betas 必须是两个数组成的列表，实际是 {1}；{2}',
    '{0}: decay must be a list of parameter names, got {1}; {2}':
        '{0}：decay 必须是参数名的列表，实际是 {1}；{2}',
    'a whole number from {0} to {1}':
        '{0} 到 {1} 之间的整数',
    'a number from {0} to {1}':
        '{0} 到 {1} 之间的数',
    'a whole number in {0}':
        '{0} 区间内的整数',
    'a number in {0}':
        '{0} 区间内的数',
    'a whole number >= {0}':
        '>= {0} 的整数',
    'a whole number > {0}':
        '> {0} 的整数',
    'a whole number <= {0}':
        '<= {0} 的整数',
    'a whole number < {0}':
        '< {0} 的整数',
    'a number >= {0}':
        '>= {0} 的数',
    'a number > {0}':
        '> {0} 的数',
    'a number <= {0}':
        '<= {0} 的数',
    'a number < {0}':
        '< {0} 的数',
    'a finite number':
        '一个有限的数',
    'a whole number':
        '一个整数',
    'a number':
        '一个数',
    'a directory':
        '目录',
    'a named pipe (FIFO)':
        '命名管道（FIFO）',
    'a socket':
        '套接字',
    'a character device':
        '字符设备',
    'a block device':
        '块设备',
    'not a regular file':
        '非普通文件',
    ' (a pipe or a device can wait forever or never end)':
        '（管道或设备可能一直等下去，或永远读不完）',
    'text file':
        '文本文件',
    'tokenizer file':
        '分词器文件',
    'safetensors file':
        'safetensors 文件',
    'run directory':
        '运行目录',
    'checkpoint directory':
        '检查点目录',
    'token file':
        'token 文件',
    'model directory':
        '模型目录',
    'lock file':
        '锁文件',
    'the file was edited or damaged; restore it, or re-create it with zerollm':
        '文件被改动过或已损坏；请恢复它，或用 zerollm 重新生成',
    'convert it once with: python -c "import torch; from safetensors.torch import save_file; sd = torch.load(\'FILE\', map_location=\'cpu\', weights_only=True); save_file({{k: v.clone().contiguous() for k, v in sd.items()}}, \'model.safetensors\')"':
        '用下面的命令转换一次：python -c "import torch; from safetensors.torch import save_file; sd = torch.load(\'FILE\', map_location=\'cpu\', weights_only=True); save_file({{k: v.clone().contiguous() for k, v in sd.items()}}, \'model.safetensors\')"',
}
