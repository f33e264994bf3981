"""cli: the ``zerollm`` command line. The entry point (cli.entry) and one thin module per command
(cli.commands): a command parses flags, calls the library and prints (cli.lang puts its help and errors
in 中文 when asked). No command imports another;
what several share lives beside them (cli.source: --ckpt / --hf / --gguf for sample, chat and serve).

The top room: it may import every room, and none imports it."""

from zerollm.cli.entry import main

__all__ = ["main"]
