"""The working commands of the ``zerollm`` CLI (train, sample, eval, convert, ...).

Teaching walkthroughs live in zerollm.teach; each module here has ``add_arguments`` and ``run``.
"""
