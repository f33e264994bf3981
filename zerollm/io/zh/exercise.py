"""中文 of ``zerollm exercise``'s error messages and --help strings (see zerollm/io/zh/__init__.py).

The verdicts of ``check``, the hints and the tasks are written in both languages where they are made
(zerollm/teach/exercises/), since they are chosen by --lang before any message is built.
"""

ZH = {
    # errors (zerollm/teach/exercises/command.py)
    "zerollm exercise {0} needs the exercise's name; one of: {1}":
        "zerollm exercise {0} 需要练习的名字，可选：{1}",
    "there is no exercise {0}; one of: {1}":
        "没有叫 {0} 的练习；可选：{1}",
    "{0} does not exist: write it first with `zerollm exercise start {1}{2}`":
        "{0} 不存在：先用 `zerollm exercise start {1}{2}` 生成它",
    "--dir {0} is a file, not a folder: give a folder for the exercise files":
        "--dir {0} 是一个文件而不是文件夹：请给一个放练习文件的文件夹",
    # --help
    "exercises along the course that grade themselves: list, start, check, hint, solution":
        "贯穿课程、自动判分的练习：list、start、check、hint、solution",
    "list the exercises, start one, check it, get a hint, or see zerollm's own code":
        "列出练习、开始一道、检查答案、要一条提示，或查看 zerollm 自己的实现",
    "the exercise (see: zerollm exercise list)":
        "练习的名字（见 zerollm exercise list）",
    "the folder of your exercise files (default: exercises)":
        "存放你的练习文件的文件夹（默认 exercises）",
    "check: stop your function after this many seconds (default 60)":
        "check：你的函数运行超过这么多秒就停下（默认 60）",
}
