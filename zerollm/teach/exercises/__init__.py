"""teach.exercises: ``zerollm exercise``, exercises along the course that grade themselves.

``catalog`` lists them (task, hints, zerollm's functions that solve them); ``backprop``, ``attention`` and
``pipeline`` grade them against zerollm's own layers and finite differences (``grading``); ``check`` runs a
learner's file in a child process with a time limit; ``command`` is the subcommand. The references are
the package's own functions, never a second copy. May import every room up to align, as teach does.
"""
