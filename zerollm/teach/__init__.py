"""Teaching commands: step-by-step walkthroughs in 中文 and English.

Each module here is one ``zerollm`` subcommand (``add_arguments`` + ``run``). The maths lives
in the library modules; these modules only choose examples, print, and explain.
"""
