"""The examples in the docstrings of the vocabulary, the testing aids and the CLI run as shown."""

from __future__ import annotations

import doctest
import importlib
import pkgutil

import pytest

import allama.cli
import allama.mock
import allama.types

PACKAGES = (allama.types, allama.mock, allama.cli)
MODULES = [
    *(package.__name__ for package in PACKAGES),
    *sorted(
        info.name
        for package in PACKAGES
        for info in pkgutil.iter_modules(package.__path__, f"{package.__name__}.")
        if info.name != "allama.cli.__main__"  # running it is the command itself
    ),
]


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples(name: str) -> None:
    module = importlib.import_module(name)
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS)
    assert result.failed == 0, f"{result.failed} of {result.attempted} examples failed in {name}"


def test_the_examples_that_matter_are_there() -> None:
    attempted = {
        name: doctest.testmod(importlib.import_module(name), report=False).attempted
        for name in ("allama.types._request", "allama.mock._structured", "allama.cli._main")
    }
    assert all(count > 0 for count in attempted.values()), attempted
