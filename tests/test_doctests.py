"""The worked examples in zerollm's docstrings are run, so they cannot drift from the code."""

import doctest
import importlib
import pkgutil

import zerollm


def test_every_docstring_example_in_the_package():
    failed, attempted = [], 0
    for info in pkgutil.walk_packages(zerollm.__path__, "zerollm."):
        module = importlib.import_module(info.name)
        result = doctest.testmod(module, optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
        attempted += result.attempted
        if result.failed:
            failed.append(f"{info.name}: {result.failed} of {result.attempted}")
    assert not failed, failed
    assert attempted >= 50          # the examples are really collected (there are over 50 today)
