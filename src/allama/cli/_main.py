"""Entry point of the `allama` command."""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import signal
import sys
from collections.abc import Sequence
from typing import IO

from allama._printable import printable
from allama.cli._batch import EXIT_FAILED, add_batch_parser, batch_command, to_devnull
from allama.cli._load import TypeNotFound, load_type
from allama.cli._plan import plan_rows, render_table
from allama.cli._providers import planning_providers
from allama.schema._errors import SchemaError
from allama.schema._types import type_label, type_schema

EXIT_USAGE = 2
"""A bad argument, a reference that names no type, or a type that cannot be extracted
(argparse's own status for usage)."""

EXIT_BROKEN_PIPE = 128 + signal.SIGPIPE
"""Status when the reader went away (`allama plan ... | head`): what a shell reports for a
tool killed by SIGPIPE, so that `set -o pipefail` scripts see `allama` as they see `cat`."""


def _version() -> str:
    from allama import __version__  # the package is loaded by now: this module is in it

    return f"allama {__version__}"


class _Parser(argparse.ArgumentParser):
    """A parser that says an argument it does not know with its own usage. Argparse leaves
    that to the top-level parser, whose usage names no command's options (`allama plan T
    --bogus` printed `usage: allama [-h] [--version] command ...`). Its commands' parsers
    are of its class (argparse makes them so)."""

    def parse_known_args(  # type: ignore[override]
        self, args: Sequence[str] | None = None, namespace: argparse.Namespace | None = None
    ) -> tuple[argparse.Namespace, list[str]]:
        parsed, extras = super().parse_known_args(args, namespace)
        if extras:
            self.error(f"unrecognized arguments: {' '.join(extras)}")
        return parsed, extras


def _parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="allama",
        description="One typed interface to every chat model provider, "
        "with honest structured extraction.",
    )
    parser.add_argument("--version", action="version", version=_version())
    # (`metavar`: how a missing one is named, as `batch` names its own.)
    commands = parser.add_subparsers(dest="command", metavar="command", required=True)
    plan = commands.add_parser(
        "plan",
        help="what each provider and mode would enforce for a type, without sending anything",
    )
    plan.add_argument("type", help="path/to/file.py:Name or package.module:Name")
    plan.add_argument("--json", action="store_true", help="one JSON document for machines")
    plan.add_argument(
        "--stream",
        action="store_true",
        help="plan streamed calls (some endpoints drop the schema on streams)",
    )
    plan.add_argument(
        "--provider",
        action="append",
        default=None,
        help="only this preset (repeatable), or PRESET:API for another API of it "
        "(openai:responses); default: every preset and API",
    )
    plan.add_argument(
        "--model",
        metavar="M",
        help="the model to plan, on every --provider given (default: a typical model of "
        "each preset; what is enforced can depend on the model)",
    )
    add_batch_parser(commands)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run `allama` with `argv` (default: the process's arguments); returns the exit status.

    >>> main(["--version"])  # doctest: +ELLIPSIS
    allama ...
    0
    """
    real = sys.stdout
    sys.stdout = _Output(real)
    lost = sys.stderr is None  # started with stderr closed: Python gives None
    if lost:
        # What it would say is dropped, not written into stdout's data (`print(...,
        # file=None)` writes to stdout).
        sys.stderr = open(os.devnull, "w", encoding="utf-8")  # noqa: SIM115
    command = "allama"
    try:
        try:
            try:
                args = _parser().parse_args(argv)
            except SystemExit as done:  # --help, --version, or a usage error argparse reported
                code = done.code
                status = code if isinstance(code, int) else 0 if code is None else EXIT_USAGE
            else:
                if args.command == "batch":
                    command = f"allama batch {args.batch_command}"
                    status = batch_command(args)
                else:
                    command = f"allama {args.command}"
                    status = _plan(args)
            # Flushed here, so that an output that cannot be written is said while it can
            # be, not by the interpreter's last flush (which would print a traceback).
            sys.stdout.flush()
        finally:
            sys.stdout = real
            if lost:
                sys.stderr.close()
                sys.stderr = None
    except BrokenPipeError:
        return _reader_gone()
    except _OutputLost as lost:
        with contextlib.suppress(OSError, ValueError):  # stderr may be lost too
            print(f"{command}: cannot write to stdout: {lost}", file=sys.stderr)
        _discard_output()
        return EXIT_FAILED
    return status


class _OutputLost(Exception):
    """Standard output cannot be written (a full disk, `> /dev/full`; a closed one, `>&-`):
    the message says why."""


_PIECE = 4096
"""The most written to standard output at once (`_Output.write`)."""


class _Output(io.TextIOBase):
    """Standard output for a command: a failure to write it is raised as `_OutputLost`, which
    `main` says on one line (exit status 1), for every command in one place; a reader that
    went away (`BrokenPipeError`) is raised as it is, and ends the command as SIGPIPE would."""

    def __init__(self, stream: IO[str] | None) -> None:
        self._stream = stream

    def write(self, text: str) -> int:
        if self._stream is None:  # started with stdout closed: Python gives None
            if text:
                raise _OutputLost("it is closed")
            return 0
        if len(text) > _PIECE:
            # In pieces: a large write that a reader going away cuts short is reported by
            # the buffered layer as a short write, which the text layer does not check.
            for start in range(0, len(text), _PIECE):
                self.write(text[start : start + _PIECE])
            return len(text)
        try:
            try:
                return self._stream.write(text)
            except UnicodeEncodeError:
                # A character the stream's encoding has not (`PYTHONIOENCODING=ascii`), in a
                # label or a path: written as an escape, as Python writes it to stderr.
                encoding = self.encoding or "ascii"
                return self._stream.write(
                    text.encode(encoding, "backslashreplace").decode(encoding)
                )
        except BrokenPipeError:
            raise
        except OSError as error:
            raise _OutputLost(error.strerror or str(error)) from None
        except ValueError:
            if not self._stream.closed:
                raise
            raise _OutputLost("it is closed") from None

    @property
    def encoding(self) -> str | None:  # type: ignore[override]
        return getattr(self._stream, "encoding", None)

    def flush(self) -> None:
        if self._stream is None:
            return
        try:
            self._stream.flush()
        except BrokenPipeError:
            raise
        except OSError as error:
            raise _OutputLost(error.strerror or str(error)) from None
        except ValueError:
            if not self._stream.closed:
                raise
            raise _OutputLost("it is closed") from None

    def isatty(self) -> bool:
        return self._stream is not None and self._stream.isatty()

    def fileno(self) -> int:
        if self._stream is None:
            raise OSError("standard output is closed")
        return self._stream.fileno()


def _plan(args: argparse.Namespace) -> int:
    try:
        tp = load_type(args.type)
    except TypeNotFound as error:
        print(f"allama plan: {error}", file=sys.stderr)
        return EXIT_USAGE
    try:
        type_schema(tp)  # a type no extraction takes is said once, as `batch run` says it
    except (TypeError, ValueError, SchemaError) as error:  # (pydantic's serializing too)
        # The message may quote the type's own code's error: its control characters escaped.
        print(f"allama plan: {printable(str(error))}", file=sys.stderr)
        return EXIT_USAGE
    if args.model is not None and not args.provider:
        print(
            "allama plan: --model goes with --provider: a model is one provider's (name it: "
            "`--provider openai`, say)",
            file=sys.stderr,
        )
        return EXIT_USAGE
    if args.model is not None and not args.model.strip():
        print("allama plan: --model is empty; name the model to plan", file=sys.stderr)
        return EXIT_USAGE
    try:
        providers = planning_providers(args.provider, args.model)
    except KeyError as error:
        print(f"allama plan: {error.args[0]}", file=sys.stderr)
        return EXIT_USAGE
    rows = plan_rows(tp, providers, stream=args.stream)
    label = type_label(tp)
    if args.json:
        plans = [row.to_json() for row in rows]
        print(json.dumps({"type": label, "stream": args.stream, "plans": plans}, indent=2))
    else:
        print(render_table(label, rows, stream=args.stream))
    # Flushed here, so that a reader that went away is noticed while it can be handled, not
    # by the interpreter's last flush (which would print a traceback).
    sys.stdout.flush()
    return 0


def _reader_gone() -> int:
    """The output's reader closed it: end quietly, as a Unix tool does on SIGPIPE."""
    _discard_output()
    return EXIT_BROKEN_PIPE


def _discard_output() -> None:
    """Whatever is still buffered for stdout cannot be written: point stdout at /dev/null,
    so that the interpreter's final flush finds nothing to complain about."""
    if sys.stdout is not None:  # (closed: nothing is buffered, nothing is flushed)
        to_devnull(sys.stdout)
