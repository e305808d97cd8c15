"""The `allama` command line."""

from __future__ import annotations

from collections.abc import Sequence

EXIT_INTERRUPTED = 130


def main(argv: Sequence[str] | None = None) -> int:
    """Run `allama` (see `allama.cli._main.main`). Its modules are imported here, so that a
    Ctrl-C while they load ends the command quietly, as one before a run began does."""
    try:
        from allama.cli._main import main as command
    except KeyboardInterrupt:
        return EXIT_INTERRUPTED
    return command(argv)


__all__ = ["main"]
