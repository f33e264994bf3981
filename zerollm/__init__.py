"""zerollm: a large language model built from zero in NumPy.

Every layer has a forward pass and a hand-written backward pass, checked against
PyTorch. Start with ``zerollm attention`` on the command line, or::

    from zerollm.nn.self_attention import self_attention

The package is a stack of rooms, each importing only the rooms below it (docs/architecture.md)::

    cli > serve > evaluate > teach > interop > align > training > generation > data > model > nn
        > tokenizers > engine > io
"""

import importlib
import importlib.abc
import os
import sys

__version__ = "0.1.0"

# Every module that moved when the rooms were made: old path -> new path. Importing an old path fails
# with a message naming the new one (no silent aliases); scripts/update_imports.py rewrites old code.
MOVED = {
    "zerollm.errors": "zerollm.io.errors",
    "zerollm.fileio": "zerollm.io.fileio",
    "zerollm.outdir": "zerollm.io.outdir",
    "zerollm.lock": "zerollm.io.lock",
    "zerollm.validate": "zerollm.io.validate",
    "zerollm.argtypes": "zerollm.io.argtypes",
    "zerollm.arrayio": "zerollm.io.arrayio",
    "zerollm.docsmode": "zerollm.io.docsmode",
    "zerollm.safetensors": "zerollm.io.safetensors",
    "zerollm.fast": "zerollm.engine.fast",
    "zerollm.threads": "zerollm.engine.threads",
    "zerollm.memory": "zerollm.engine.memory",
    "zerollm.amp": "zerollm.engine.amp",
    "zerollm.attention": "zerollm.nn.self_attention",
    "zerollm.config": "zerollm.model.config",
    "zerollm.heads": "zerollm.model.heads",
    "zerollm.policy": "zerollm.model.policy",
    "zerollm.kvcache": "zerollm.model.kvcache",
    "zerollm.budget": "zerollm.model.budget",
    "zerollm.formats": "zerollm.data.formats",
    "zerollm.download": "zerollm.data.download",
    "zerollm.corpora": "zerollm.data.corpora",
    "zerollm.sample": "zerollm.generation.sample",
    "zerollm.display": "zerollm.generation.display",
    "zerollm.train": "zerollm.training.trainer",
    "zerollm.optim": "zerollm.training.optim",
    "zerollm.checkpoint": "zerollm.training.checkpoint",
    "zerollm.parallel": "zerollm.training.parallel",
    "zerollm.dist": "zerollm.training.dist",
    "zerollm.runlog": "zerollm.training.runlog",
    "zerollm.presets": "zerollm.training.presets",
    "zerollm.objectives.base": "zerollm.training.objective",
    "zerollm.objectives.lm": "zerollm.training.lm",
    "zerollm.objectives": "zerollm.align.objectives",
    "zerollm.rl": "zerollm.align.rl",
    "zerollm.tasks": "zerollm.align.tasks",
    "zerollm.chat": "zerollm.data.chat",
    "zerollm.poems": "zerollm.align.tasks.poems",
    "zerollm.hf": "zerollm.interop.hf",
    "zerollm.gradcheck": "zerollm.teach.gradcheck",
    "zerollm.torch_ref": "zerollm.teach.torch_ref",
    "zerollm.explain": "zerollm.teach.explain",
    "zerollm.i18n": "zerollm.io.i18n",
    "zerollm.commands.train_plan": "zerollm.training.plan",
    "zerollm.commands": "zerollm.cli.commands",
}

# Modules whose name is now a room: their old contents live in one module of that room.
REHOMED = {
    "zerollm.model": "zerollm.model.gpt",
    "zerollm.data": "zerollm.data.tokens",
    "zerollm.cli": "zerollm.cli.entry",
}


def moved_names(room):
    """A module ``__getattr__`` for a room that was a module: ``from zerollm.data import get_batch`` fails
    with an ImportError naming ``zerollm.data.tokens``, where the old module's names now live."""
    new = REHOMED[room]

    def __getattr__(name):
        folder = sys.modules[room].__path__[0]
        if name.startswith("__") or os.path.exists(os.path.join(folder, name + ".py")) or \
                os.path.isdir(os.path.join(folder, name)):
            raise AttributeError(name)          # a module of the room: the import system loads it
        if not hasattr(importlib.import_module(new), name):
            raise AttributeError(f"module {room!r} has no attribute {name!r}")
        raise ImportError(f"{room}.{name} moved to {new}.{name} (docs/architecture.md; "
                          f"'python scripts/update_imports.py FILE' rewrites old imports)", name=room)
    return __getattr__


class _MovedFinder(importlib.abc.MetaPathFinder):
    """Turns ``import zerollm.sample`` into an ImportError that names ``zerollm.generation.sample``."""

    def find_spec(self, fullname, path=None, target=None):
        for old in sorted(MOVED, key=len, reverse=True):
            if fullname == old or fullname.startswith(old + "."):
                new = MOVED[old] + fullname[len(old):]
                apart = [f"{k} to {v}" for k, v in MOVED.items() if k.startswith(fullname + ".")]
                also = f"; of its modules, {', '.join(apart)}" if apart else ""
                raise ModuleNotFoundError(
                    f"{fullname} moved to {new}{also} (docs/architecture.md lists every room; "
                    f"'python scripts/update_imports.py FILE' rewrites old imports)", name=fullname)
        return None


if not any(isinstance(f, _MovedFinder) for f in sys.meta_path):
    sys.meta_path.insert(0, _MovedFinder())
