"""The `allama` command line."""

from allama.cli._main import main

__all__ = ["main"]
