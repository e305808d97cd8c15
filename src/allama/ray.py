"""Extraction as a Ray Data step: `extract_dataset(ds, Type, provider=...)`.

An optional integration (`pip install 'allama[ray]'`), loaded only by `import allama.ray`.
Each actor of a pool builds one provider from picklable settings (a preset name and its
options, or a zero-argument factory) and runs the rows of each batch concurrently with
`Extractor.aextract`, at most `row_concurrency` at a time. Every input row comes back with
three more columns, and a bad row never fails the job:

- `value`: the validated value as JSON text, or null; the JSON is pydantic's round-trip
  form keyed by field name, which `TypeAdapter(tp).validate_json(value, by_alias=False,
  by_name=True)` reads back (by field name only, so that an alias that is another
  field's name is not read as that field). Reading it back runs the type's validators
  again: a type whose validators change what they read, or that writes its own JSON (a
  serializer, `ser_json_bytes`), may read back as another value;
- `error`: null, or a short log-safe line: the error's kind and allama's own words (a
  provider's message, which may quote the input, is withheld, as in `Error.as_log()`);
- `record`: the extraction record as JSON text (`ExtractionMetadata.to_json_dict()`), for a
  failure the record the error carries; null when no extraction started (a row without
  text, a request function that raised). A row sent again after tries it paid for (a pass
  that failed, then a server error) has their records in its `earlier_attempts`, as a
  batch run's output does: what the row cost is its `cost` plus theirs. The warnings of a
  request the provider did not take as asked (a temperature past its range, left out) are
  in its `request_warnings`, as a batch run's ledger keeps them.

A call the provider may answer later (a rate limit, an overloaded or failing server, the
network) is sent again, up to `max_attempts` tries, as in a batch run: a 429 pauses the
actor's requests for as long as the provider asked (`retry_after`, the rate-limit headers)
and halves its rate, recovering after, and `rpm` / `tpm` limit each actor's requests and
tokens per minute from the start. A refused key or account ends the actor's sending: its
later rows come back `not_started`, since the provider would refuse each of them too.

An actor whose process dies (out of memory, its node lost) has its task run again on a
new actor by Ray Data: the task is a block of the dataset, not a batch, and every row of it
the actor had sent is sent, and paid for, again (smaller blocks bound that), and their
records count only the run that finished.

Batches travel as pyarrow tables (part of `ray[data]`). The work is waiting on HTTP, so
actors ask for a quarter of a CPU by default: at a whole CPU each, a small machine has none
left to read the data and the job stalls.

>>> import allama.ray  # doctest: +SKIP
>>> out = allama.ray.extract_dataset(  # doctest: +SKIP
...     ray.data.from_items([{"text": "Ada published the first program in 1843."}]),
...     Program,
...     provider="openai",
...     text_column="text",
...     model="gpt-5-mini",
... )
>>> out.take_all()[0]["value"]  # doctest: +SKIP
'{"author":"Ada","year":1843}'
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import inspect
import json
import numbers
import operator
import random
import re
import time
from collections.abc import AsyncIterator, Callable, Mapping
from typing import TYPE_CHECKING, Any

try:
    import pyarrow as pa
    import ray.data
    from ray import cloudpickle
except ImportError as missing:  # pragma: no cover - depends on the install
    raise ImportError("allama.ray needs Ray Data: pip install 'allama[ray]'") from missing

import allama
from allama.batch._limits import RateLimiter
from allama.batch._run import (
    TURN,
    CallCancelled,
    Turn,
    Turns,
    _cancelling,
    _check_retries,
    _retry_pause,
    _retry_step,
    _slow_down_unretried,
    _stops,
    _stored_or_spent,
    _Tries,
    allamas_words,
    check_template,
    error_warnings,
    missing_key,
    missing_url,
    request_warnings,
    schema_tokens,
    stored_value,
    turn_for,
)
from allama.errors import (
    ACCOUNT_REFUSALS,
    Error,
    NetworkError,
    RateLimitedError,
    RequestTimeoutError,
    text_of,
)
from allama.extract import ExtractionMetadata, Extractor, SchemaEnforcement
from allama.schema import type_schema
from allama.types import ChatRequest

if TYPE_CHECKING:
    from allama.provider import ChatProvider
    from allama.providers import ProviderOptions
    from allama.types import Warning

__all__ = ["COLUMNS", "ExtractBatch", "error_text", "extract_dataset"]

COLUMNS = ("value", "error", "record")
"""The columns each row gains: the value as JSON, the error line, the record as JSON."""

ProviderSpec = str | Callable[[], "ChatProvider"]
RequestBuilder = Callable[[dict[str, Any]], ChatRequest]


def error_text(error: BaseException) -> str:
    """A short, log-safe line for a failed row: the error's kind and allama's own words.

    A provider's message may quote the input, so it is withheld (its length is given), as
    in `Error.as_log()`. An exception that is not an `allama.Error` is named by its class,
    its message withheld unless allama raised it (as a batch run's failures are).

    >>> from allama import ServerError
    >>> error_text(ServerError("upstream said: <the document>").with_status(500))
    'server: status=500; message withheld (29 chars)'
    """
    if not isinstance(error, Error):
        text = text_of(error)
        if allamas_words(error, text):
            return f"{type(error).__name__}: {text}"
        return f"{type(error).__name__}: message withheld ({len(text)} chars)"
    log = error.as_log().to_dict()
    message = log.get("message")
    parts = [f"status={log['status']}"] if "status" in log else []
    parts.append(
        message if isinstance(message, str) else f"message withheld ({len(error.message)} chars)"
    )
    return f"{error.kind}: {'; '.join(parts)}"


def _taken(names: list[str]) -> str:
    return (
        f"the dataset already has the column(s) {names}, which extraction adds; "
        "rename them first (Dataset.rename_columns)"
    )


def _record_json(
    metadata: ExtractionMetadata | None,
    spent: list[ExtractionMetadata],
    warned: tuple[Warning, ...] = (),
) -> str | None:
    """The record as JSON, with the earlier tries that were paid for (`earlier_attempts`)
    and the request's warnings (`request_warnings`: a temperature past the provider's range
    left out), as a batch run's ledger keeps them; for an error without a record, the last
    paid try."""
    stored = _stored_or_spent(metadata, spent, warned)
    return None if stored is None else json.dumps(stored)


class _Unreadable:
    """A value pyarrow cannot give as Python (a timestamp past the year 9999: an
    `OverflowError`), in place of its row: the row's `invalid_row` error, by the column and
    the exception's type (its message may quote the value)."""

    __slots__ = ("column", "kind")

    def __init__(self, column: str, error: Exception) -> None:
        self.column = column
        self.kind = type(error).__name__


def _python_values(column: pa.ChunkedArray, name: str) -> list[Any]:
    """The column's values as Python, an `_Unreadable` in place of each that cannot be:
    one such value fails pyarrow's conversion of the whole column, which would fail the
    job and lose the rows of it already paid for."""
    try:
        return column.to_pylist()  # type: ignore[no-any-return]
    except Exception:
        pass
    values: list[Any] = []
    for chunk in column.chunks:
        try:
            values.extend(chunk.to_pylist())
            continue
        except Exception:
            pass
        for index in range(len(chunk)):
            try:
                values.append(chunk[index].as_py())
            except Exception as error:
                values.append(_Unreadable(name, error))
    return values


def _python_rows(batch: pa.Table) -> list[dict[str, Any] | _Unreadable]:
    """Each row as a dict of its columns (what `request=` is given), or an `_Unreadable`
    for a row one of whose values Python cannot hold (the first such column's)."""
    try:
        return batch.to_pylist()  # type: ignore[no-any-return]
    except Exception:
        pass
    names = batch.column_names
    columns = [_python_values(batch.column(index), name) for index, name in enumerate(names)]
    rows: list[dict[str, Any] | _Unreadable] = []
    for index in range(batch.num_rows):
        values = [column[index] for column in columns]
        unread = next((value for value in values if isinstance(value, _Unreadable)), None)
        rows.append(unread if unread is not None else dict(zip(names, values, strict=True)))
    return rows


def _check_pool(ds: object, concurrency: object, batch_size: object, num_cpus: object) -> None:
    """Settings Ray would take and misread (a `True` actor, a pool of 2.5), or fail on
    with its own words after the job was built, said here by name. Whatever Ray takes
    (NumPy integers, `(1, None)` for no upper bound, `batch_size=None` for whole blocks,
    actors of no CPU) is left to it. A value of the wrong type is a `TypeError`, one out of
    range a `ValueError`."""

    def count(value: object, *, none: bool = False) -> int | None:
        """The whole number `value` is, `None` for Ray's no bound (where `none`); a value
        of another type is refused (`TypeError`)."""
        if value is None and none:
            return None
        if isinstance(value, bool):
            raise TypeError
        return operator.index(value)  # type: ignore[arg-type]

    if not callable(getattr(ds, "map_batches", None)):
        raise TypeError(f"ds must be a ray.data.Dataset, not {type(ds).__name__}")
    actors = (
        "concurrency must be a number of actors (1 or more) or a (min, max) pair of them "
        f"(max None: no bound), not {concurrency!r}"
    )
    sizes = concurrency if isinstance(concurrency, tuple) else (concurrency,)
    if isinstance(concurrency, tuple) and len(concurrency) != 2:  # (a 1-tuple: no max)
        raise TypeError(actors)
    try:
        counted = [count(size, none=place == 1) for place, size in enumerate(sizes)]
    except TypeError:
        raise TypeError(actors) from None
    if any(size is not None and size < 1 for size in counted):
        raise ValueError(actors)
    low, high = counted[0], counted[-1] if len(counted) == 2 else None
    if low is not None and high is not None and low > high:
        raise ValueError(f"concurrency's (min, max) has its min above its max: {concurrency}")
    rows = f"batch_size must be a number of rows (1 or more) or None, not {batch_size!r}"
    try:
        size = count(batch_size, none=True)
    except TypeError:
        raise TypeError(rows) from None
    if size is not None and size < 1:
        raise ValueError(rows)
    cpus = f"num_cpus must be a number of CPUs, 0 or more, not {num_cpus!r}"
    if isinstance(num_cpus, bool) or not isinstance(num_cpus, int | float):
        raise TypeError(cpus)  # (Ray takes Python's numbers only, not NumPy's)
    if not 0 <= num_cpus < float("inf"):
        raise ValueError(cpus)


class _Withheld:
    """A setting handed to each actor whose text is not written anywhere: Ray writes the
    arguments of a step as text (`str`) where it describes the dataset, and a provider's
    options (a key, a password in a URL) or a function's arguments may hold secrets."""

    __slots__ = ("value",)

    def __init__(self, value: object) -> None:
        self.value = value

    def __repr__(self) -> str:
        return f"<{type(self.value).__name__}, not shown>"

    __str__ = __repr__


def _shown(setting: Any) -> Any:
    return setting.value if isinstance(setting, _Withheld) else setting


_ASYNC_PROVIDER = (
    "the provider function is an async function, which the step does not await: "
    "return the provider from a plain one"
)


def _is_async(function: object) -> bool:
    """Whether calling `function` makes a coroutine: an async function, or a callable
    object whose `__call__` is one, or a `functools.partial` of either (a class, which
    calling constructs, is not)."""
    while isinstance(function, functools.partial):
        function = function.func
    if not callable(function):
        return False
    return inspect.iscoroutinefunction(function) or inspect.iscoroutinefunction(
        type(function).__call__
    )


def _check_settings(
    provider: object,
    provider_options: object,
    text_column: object,
    request: object,
    model: object,
    row_concurrency: object,
) -> None:
    if not isinstance(provider, str) and not callable(provider):
        raise TypeError(
            "provider must be a preset name such as 'openai' or a zero-argument function "
            f"returning a provider, not {type(provider).__name__}"
        )
    if _is_async(provider):
        raise TypeError(_ASYNC_PROVIDER)
    if provider_options is not None and not isinstance(provider_options, Mapping):
        raise TypeError(
            f"provider_options must be a mapping, not {type(provider_options).__name__}"
        )
    if not isinstance(provider, str) and provider_options:
        raise TypeError("provider_options go with a preset name; a factory takes none")
    if (text_column is None) == (request is None):
        raise TypeError("give either text_column= (with model=) or request=, not both or neither")
    if text_column is not None:
        if not isinstance(text_column, str):
            raise TypeError(f"text_column must be a str, not {type(text_column).__name__}")
        if not isinstance(model, str) or not model:
            raise TypeError("text_column= needs model=, the model name each request names")
    elif not callable(request):
        raise TypeError(
            "request must be a function from a row (a dict) to a ChatRequest, "
            f"not {type(request).__name__}"
        )
    elif _is_async(request):
        raise TypeError(
            "the request function is an async function, which the step does not await: "
            "build each ChatRequest in a plain one"
        )
    if isinstance(row_concurrency, bool) or not isinstance(row_concurrency, numbers.Integral):
        raise TypeError(f"row_concurrency must be a whole number, not {row_concurrency!r}")
    if row_concurrency < 1:
        raise ValueError(f"row_concurrency must be at least 1, not {row_concurrency}")


_UNPICKLED_ONE = re.compile(r"cannot pickle '[\w.]+' object|\w+ '[\w.-]+' cannot be pickled")
"""Python's words for an object that cannot be pickled, and a provider's own (up to its
reasons), which name only a type and a preset."""


def _check_picklable(settings: Mapping[str, Any]) -> None:
    """Each setting the actors are built from, pickled as Ray sends it: one that cannot
    be (a function holding a provider, whose client holds a lock) fails here by name,
    rather than as the job starts in Ray's account of its own step. Pickling's message
    is kept only where it names a type alone: others may quote a value (a key)."""
    for name, setting in settings.items():
        try:
            cloudpickle.dumps(_shown(setting))  # type: ignore[no-untyped-call]
        except Exception as error:
            text = text_of(error)
            named = _UNPICKLED_ONE.match(text)
            whole = named is not None and text[named.end() : named.end() + 1] in ("", ":")
            if named is not None and whole:
                said = named.group(0)
            elif allamas_words(error, text):  # (a `Transport`'s own refusal, which advises)
                said = text
            else:
                said = f"{type(error).__name__}: message withheld"
            if name == "tp":
                raise TypeError(
                    f"the type cannot be pickled to send to Ray's workers ({said}): define "
                    "it at a module's top level, importable on the workers"
                ) from None
            if name == "provider_options":
                advice = (
                    "give options Ray can send (text, numbers), or a provider= function "
                    "that builds the provider"
                )
            elif name in ("provider", "request"):
                made = "the provider" if name == "provider" else "each ChatRequest"
                advice = (
                    f"give a function defined at a module's top level that builds {made} "
                    "when called, rather than one holding an object made here (a provider, "
                    "a client, a lock)"
                )
            else:
                advice = "give a value Ray can send"
            raise TypeError(
                f"{name}= cannot be pickled to send to Ray's workers ({said}): {advice}"
            ) from None


def _check_template_settings(request: object, **given: object) -> None:
    """With `request=`, each request is the function's: the settings that make the request
    of `text_column=` would be dropped without a word, so they are refused."""
    if request is None:
        return
    named = [name for name, value in given.items() if value is not None]
    if named:
        listed = ", ".join(f"{name}=" for name in named)
        raise TypeError(
            f"{listed} make the request of text_column=; with request=, the function builds "
            "each request whole (set them on the ChatRequest it returns)"
        )


def _template(
    model: object, system: object, prompt: object, max_output_tokens: object, temperature: object
) -> ChatRequest:
    """The request of `text_column=` each row's text is added to: made once, so that a
    wrong setting fails where it is given, not in every batch of the job."""
    if prompt is not None and not isinstance(prompt, str):
        raise TypeError(f"prompt must be a str, not {type(prompt).__name__}")
    if prompt is not None and not prompt.strip():  # would send a blank line before each text
        raise ValueError(
            "prompt is empty; give the text to put before each row's, or leave prompt= out"
        )
    request = ChatRequest(str(model or ""))
    if system is not None:
        request = request.system(system)  # type: ignore[arg-type]
    if max_output_tokens is not None:
        request = request.with_max_output_tokens(max_output_tokens)  # type: ignore[arg-type]
    if temperature is not None:
        request = request.with_temperature(temperature)  # type: ignore[arg-type]
    return request


class ExtractBatch:
    """The callable class for `Dataset.map_batches` (`batch_format="pyarrow"`, an actor pool).

    One instance per actor: it builds one provider, and extracts the rows of each batch
    concurrently (at most `row_concurrency` at a time in this actor). Requests are built
    from `text_column` (a user message holding the text, after `prompt` when given, with
    `system` as the system message, for `model`) or by `request(row)`, where `row` is a
    dict of the row's columns. `extract_dataset` applies it with sensible defaults.
    """

    def __init__(
        self,
        tp: Any,
        *,
        provider: ProviderSpec,
        provider_options: ProviderOptions | None = None,
        text_column: str | None = None,
        request: RequestBuilder | None = None,
        model: str | None = None,
        system: str | None = None,
        prompt: str | None = None,
        max_output_tokens: int | None = None,
        temperature: float | None = None,
        repair: bool = False,
        retries: int = 0,
        allow_undeclared_keys: bool = False,
        min_enforcement: SchemaEnforcement | str | None = None,
        row_concurrency: int = 8,
        max_attempts: int = 5,
        backoff: float = 0.5,
        rpm: float | None = None,
        tpm: float | None = None,
    ) -> None:
        provider, provider_options, request = (
            _shown(provider),
            _shown(provider_options),
            _shown(request),
        )
        _check_settings(provider, provider_options, text_column, request, model, row_concurrency)
        _check_template_settings(
            request,
            model=model,
            system=system,
            prompt=prompt,
            max_output_tokens=max_output_tokens,
            temperature=temperature,
        )
        max_attempts = _check_retries(max_attempts, backoff)
        self._limiter_settings = (rpm, tpm, backoff)
        RateLimiter(rpm, tpm)  # a wrong rate fails here
        self._limiter: RateLimiter | None = None
        self._turns: Turns | None = None
        self._answered_at = float("-inf")
        """When a call last reached the provider: a broken connection on one row while
        others are answered is that row's, not a provider out of reach."""
        self._max_attempts = max_attempts
        self._backoff = backoff
        self._random = random.Random()
        self._stopped: str | None = None
        """Why this actor sends no more rows: the provider refused its key or account, or
        asked for a wait longer than a run makes."""
        self._template = (
            None
            if text_column is None
            else _template(model, system, prompt, max_output_tokens, temperature)
        )
        self._schema = type_schema(tp)
        self._tp = tp
        self._extractor = Extractor(
            repair=repair,
            retries=retries,
            allow_undeclared_keys=allow_undeclared_keys,
            min_enforcement=min_enforcement,
        )
        self._text_column = text_column
        self._build = request
        self._prompt = prompt
        self._row_concurrency = int(row_concurrency)  # (numpy's, read from a config's array)
        self._limit: asyncio.Semaphore | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        """The event loop the batches run on, where the provider's connections live."""
        self._closed = False
        if isinstance(provider, str):
            self._provider: ChatProvider = allama.provider(provider, **(provider_options or {}))
        else:
            from allama.provider import ChatProvider

            made = provider()
            if inspect.iscoroutine(made):  # a lambda around an async function
                made.close()  # never awaited: said here, not in a warning as the actor ends
                raise TypeError(
                    "provider's function returned a coroutine: it is an async function, "
                    "which the step does not await; return the provider from a plain one"
                )
            if not isinstance(made, ChatProvider):  # said once, not as every row's failure
                raise TypeError(
                    "provider's function must return a provider (allama.provider(...)), not "
                    f"{type(made).__name__}"
                )
            self._provider = made
        # On the worker: its environment's URL and key.
        unsendable = missing_url(self._provider) or missing_key(self._provider)
        if unsendable is not None:
            raise ValueError(unsendable)
        if self._template is not None:
            check_template(self._provider, tp, self._template, self._extractor)

    @property
    def provider(self) -> ChatProvider:
        """The actor's provider."""
        return self._provider

    async def __call__(self, batch: pa.Table) -> AsyncIterator[pa.Table]:
        """The batch with `value`, `error` and `record` appended; never raises for a row."""
        if not isinstance(batch, pa.Table):
            raise TypeError(
                "ExtractBatch takes each batch as a pyarrow table, not "
                f'{type(batch).__name__}: map_batches(ExtractBatch, batch_format="pyarrow", ...)'
            )
        taken = [name for name in COLUMNS if name in batch.column_names]
        if taken:
            raise ValueError(_taken(taken))
        self._closed = False  # its connections open again: closed again as it ends
        loop = asyncio.get_running_loop()
        if self._limit is None or self._loop is not loop:
            # Made on the actor's event loop, where they are used (again on another: a step
            # driven by hand, one `asyncio.run` after another, whose limits go on counting).
            self._loop = loop
            self._limit = asyncio.Semaphore(self._row_concurrency)
            if self._limiter is None:
                rpm, tpm, backoff = self._limiter_settings
                self._limiter = RateLimiter(rpm, tpm, backoff=max(backoff, 0.001))
                # Each call of an extraction (a retry, a repair) takes a turn of the limits.
                tokens = schema_tokens(self._tp) if tpm else 0
                self._turns = Turns(self.provider, self._limiter, tokens)
            else:
                self._limiter.moved()
        if self._text_column is not None and self._text_column not in batch.column_names:
            # A block without the column: rows built from dicts that lack it, or a name
            # that no row has (a typo, when the schema was not known before the job).
            names = ", ".join(repr(name) for name in batch.column_names)
            missing = f"invalid_row: no column {self._text_column!r} (the row's: {names})"
            results: list[tuple[str | None, str | None, str | None]] = [
                (None, missing, None)
            ] * batch.num_rows
        else:
            rows: list[Any] = (
                _python_rows(batch)
                if self._text_column is None
                else _python_values(batch.column(self._text_column), self._text_column)
            )
            results = await asyncio.gather(*(self._row(row, self._limit) for row in rows))
        for index, name in enumerate(COLUMNS):
            column = pa.array([result[index] for result in results], type=pa.string())
            batch = batch.append_column(name, column)
        yield batch

    def _request(self, row: Any) -> ChatRequest | str:
        """The row's request, or why there is none (a log-safe line)."""
        if isinstance(row, _Unreadable):
            return (
                f"invalid_row: column {row.column!r} holds a value that cannot be read as Python "
                f"({row.kind})"
            )
        if self._text_column is not None:
            if not isinstance(row, str):
                shown = "null" if row is None else type(row).__name__
                return f"invalid_row: column {self._text_column!r} holds {shown}, not text"
            if not row.strip():  # a paid call that reads nothing (the command refuses it)
                return f"invalid_row: column {self._text_column!r} is empty"
            try:
                row.encode("utf-8")
            except UnicodeEncodeError:
                return (
                    f"invalid_row: column {self._text_column!r} holds half of a character "
                    "(a lone surrogate), not text"
                )
            assert self._template is not None
            text = row if self._prompt is None else f"{self._prompt}\n\n{row}"
            return self._template.user(text)
        assert self._build is not None
        try:
            built = self._build(row)
        except Exception as error:
            return f"invalid_row: the request function raised {error_text(error)}"
        if not isinstance(built, ChatRequest):
            said = f"invalid_row: the request function returned {type(built).__name__}"
            if inspect.iscoroutine(built):
                built.close()  # never awaited: said here, not in a warning per row
                return f"{said}: it is an async function, which the step does not await"
            return f"{said}, not a ChatRequest"
        return built

    async def _row(
        self, row: Any, limit: asyncio.Semaphore
    ) -> tuple[str | None, str | None, str | None]:
        request = self._request(row)
        if isinstance(request, str):
            return None, request, None
        limiter, turns = self._limiter, self._turns
        assert limiter is not None and turns is not None
        tries = _Tries(1)
        last: tuple[Error, ExtractionMetadata | None] | None = None
        first_sent: float | None = None
        while True:
            async with limit:
                if self._stopped is None:
                    sent_at, tries.estimate = await turn_for(limiter, request, turns)
                if self._stopped is not None:  # before, or while it waited for its turn
                    if last is None:
                        return None, f"not_started: {self._stopped}", None
                    # Sent before: it ends with what it met then, and what it paid for.
                    met, kept = last
                    return (
                        None,
                        error_text(met),
                        _record_json(kept, tries.spent, error_warnings(met)),
                    )
                tries.tried += 1
                if first_sent is None:
                    first_sent = time.monotonic()
                turn = Turn(sent_at, tries.estimate)
                entered = TURN.set(turn)
                try:
                    calls: Any = turns  # the provider as the extraction calls it
                    extracted = await self._extractor.aextract(calls, self._tp, request)
                    self._answered_at = time.monotonic()
                    break
                except Exception as failed:  # a bad row never fails the job
                    error = failed
                except asyncio.CancelledError:
                    if _cancelling():
                        raise
                    error = CallCancelled()  # the call's own, not the job's: the row's failure
                finally:
                    TURN.reset(entered)
                    sent_at = turn.sent_at
            if not isinstance(error, NetworkError | RequestTimeoutError):
                self._answered_at = time.monotonic()  # the provider is there
            if not isinstance(error, Error):  # the type's own code: the passes it paid for
                kept = ExtractionMetadata.from_error(error)
                return None, error_text(error), _record_json(kept, tries.spent)
            metadata = ExtractionMetadata.from_error(error)
            step = _retry_step(error, tries, self._max_attempts)
            if step is True:
                last = (error, metadata)
                await limiter.sleep(
                    _retry_pause(limiter, error, tries.tried, sent_at, self._backoff, self._random)
                )
                if metadata is not None and (metadata.passes or metadata.usage is not None):
                    tries.spent.append(metadata)  # paid for: a pass, or reported usage
                    last = (error, None)
                continue
            if step is False and isinstance(error, RateLimitedError) and error.retry_after:
                step = _slow_down_unretried(limiter, error.retry_after, sent_at) or False
            if isinstance(step, str):  # a wait longer than a run makes (a limit per day)
                self._stopped = step
                limiter.halt()  # rows waiting for their turn come back at once
                record = _record_json(metadata, tries.spent, error_warnings(error))
                return None, f"{error_text(error)} ({step})", record
            # As a batch run: a refused key or account (every provider of a failover's:
            # one that may pass does not stop it), a provider out of reach after every try,
            # or (every row sent to one model) an endpoint or model that does not exist.
            unanswered = first_sent is None or self._answered_at < first_sent
            stops = _stops(error, tries.tried, self._text_column is not None, unanswered)
            if stops is not None:
                if isinstance(error, ACCOUNT_REFUSALS):
                    stops = "the provider refused the actor's key or account"
                self._stopped = stops
                limiter.halt()
            return (
                None,
                error_text(error),
                _record_json(metadata, tries.spent, error_warnings(error)),
            )
        # The request's warnings, on the record as a batch run's ledger keeps them: a value
        # that cannot be stored keeps them too.
        warned = request_warnings(extracted.response, extracted.metadata)
        record = _record_json(extracted.metadata, tries.spent, warned)
        try:
            value = stored_value(self._schema.adapter, extracted.value)
        except Exception as error:  # validated, and paid for: its record stays
            return None, f"value_unstorable: {error_text(error)}", record
        return value, None, record

    def close(self) -> None:
        """Close the provider's connections: on the event loop the batches ran on, where it
        still runs in another thread (Ray Data's actors run it so, and delete the callable
        as the actor ends, which closes it); else those it can close from here. A provider
        without `close` and `aclose` (one of the caller's own) is left as it is."""
        if self._closed:
            return
        self._closed = True
        loop = self._loop
        if loop is not None and loop.is_running():
            if not _runs_here(loop):
                closing = asyncio.run_coroutine_threadsafe(self._close_all(), loop)
                with contextlib.suppress(Exception):  # a loop that stops meanwhile
                    closing.result(timeout=_CLOSE_SECONDS)
                return
            # Called on that loop, which cannot wait here: closed as it runs on.
            task = loop.create_task(self._close_all())
            _CLOSING.add(task)
            task.add_done_callback(_CLOSING.discard)
            return
        sync = getattr(self._provider, "close", None)
        if callable(sync):  # a wrapper's closes each provider inside it
            sync()

    async def aclose(self) -> None:
        """Close the provider's connections, on the running loop (the one the batches ran on,
        when driven without Ray)."""
        self._closed = True
        await self._close_all()

    async def _close_all(self) -> None:
        """Close each provider the step's sends through (a failover's, a retry's inner:
        the wrapper's `aclose` closes each, one that fails leaving the others)."""
        closer = getattr(self._provider, "aclose", None)
        if callable(closer):
            with contextlib.suppress(Exception):  # the first that failed, the rest closed
                await closer()

    def __del__(self) -> None:
        if getattr(self, "_provider", None) is not None:
            with contextlib.suppress(Exception):  # an interpreter shutting down
                self.close()

    def __repr__(self) -> str:
        return f"ExtractBatch(type={self._schema.label}, provider={self._provider!r})"


_CLOSE_SECONDS = 10.0
"""The longest an actor's end waits for its provider's connections to close."""

_CLOSING: set[asyncio.Task[Any]] = set()
"""Closings under way on a loop that could not wait for them, held until they end."""


def _runs_here(loop: asyncio.AbstractEventLoop) -> bool:
    """Whether `loop` is the one running in this thread."""
    try:
        return asyncio.get_running_loop() is loop
    except RuntimeError:
        return False


def extract_dataset(
    ds: ray.data.Dataset,
    tp: Any,
    *,
    provider: ProviderSpec,
    provider_options: ProviderOptions | None = None,
    text_column: str | None = None,
    request: RequestBuilder | None = None,
    model: str | None = None,
    system: str | None = None,
    prompt: str | None = None,
    max_output_tokens: int | None = None,
    temperature: float | None = None,
    repair: bool = False,
    retries: int = 0,
    allow_undeclared_keys: bool = False,
    min_enforcement: SchemaEnforcement | str | None = None,
    concurrency: int | tuple[int, int | None] = 1,
    row_concurrency: int = 8,
    max_attempts: int = 5,
    backoff: float = 0.5,
    rpm: float | None = None,
    tpm: float | None = None,
    batch_size: int | None = 16,
    num_cpus: float = 0.25,
) -> ray.data.Dataset:
    """`ds` with `value`, `error` and `record` columns added by extracting `tp` from each row.

    `provider` is a preset name (options in `provider_options`; a key is best left to the
    preset's environment variable, which the workers must have) or a zero-argument function
    returning a provider; each actor builds its own. Requests come from `text_column` (with
    `model`, and optionally `system`, `prompt`, `max_output_tokens`, `temperature`) or from
    `request(row)`. `repair`, `retries`, `allow_undeclared_keys` and `min_enforcement` are
    the `Extractor`'s. `concurrency` actors (or a `(min, max)` autoscaling range), each
    running up to `row_concurrency` rows at once and asking for `num_cpus` CPUs. A call
    that may pass (a rate limit, a server error, the network) is tried up to `max_attempts`
    times, waiting as the provider asked or `backoff` seconds doubling; `rpm` and `tpm`
    limit each actor's requests and tokens per minute (an account's limit divided by the
    actors). The
    settings, the type and any function given must pickle (checked here, by name), and the
    modules they come from must be importable on the workers.

    Lazy, like every Ray Data transform: nothing runs until the result is consumed, and
    each consumption runs it again (`count()` then `write_parquet()` send, and pay for,
    every row twice; `schema()`, `take()` or `show()` pay for the blocks they start, more
    rows than they read): `materialize()` the result to read it twice.
    """
    _check_settings(provider, provider_options, text_column, request, model, row_concurrency)
    _check_template_settings(
        request,
        model=model,
        system=system,
        prompt=prompt,
        max_output_tokens=max_output_tokens,
        temperature=temperature,
    )
    max_attempts = _check_retries(max_attempts, backoff)
    RateLimiter(rpm, tpm)
    template = (
        None
        if text_column is None
        else _template(model, system, prompt, max_output_tokens, temperature)
    )
    type_schema(tp)  # a type pydantic cannot handle fails here, not in every row
    extractor = Extractor(  # wrong settings fail here, named, rather than in each actor
        repair=repair,
        retries=retries,
        allow_undeclared_keys=allow_undeclared_keys,
        min_enforcement=min_enforcement,
    )
    if isinstance(provider, str):
        made = allama.provider(provider, **(provider_options or {}))  # a bad name fails here
        try:
            if template is not None:  # (a factory's provider is built by each actor alone)
                check_template(made, tp, template, extractor)
        finally:
            made.close()
    settings: dict[str, Any] = {
        "tp": tp,
        # Ray writes the step's arguments out as text (its export events, the plan): a key
        # in the options, or in a function's arguments, would be written with them.
        "provider": _Withheld(provider),
        "provider_options": _Withheld(dict(provider_options or {})),
        "text_column": text_column,
        "request": _Withheld(request),
        "model": model,
        "system": system,
        "prompt": prompt,
        "max_output_tokens": max_output_tokens,
        "temperature": temperature,
        "repair": repair,
        "retries": retries,
        "allow_undeclared_keys": allow_undeclared_keys,
        "min_enforcement": min_enforcement,
        "row_concurrency": row_concurrency,
        "max_attempts": max_attempts,
        "backoff": backoff,
        "rpm": rpm,
        "tpm": tpm,
    }
    _check_picklable(settings)
    _check_pool(ds, concurrency, batch_size, num_cpus)
    # A column extraction adds, or a text column no row has, when the schema is known
    # without reading the data, fails here rather than at the first batch, after others
    # were paid for.
    try:
        known = ds.schema(fetch_if_missing=False)
    except Exception as unmerged:  # blocks whose types differ (an `id` int in one, text in another)
        import pyarrow

        if isinstance(unmerged, pyarrow.ArrowException) and batch_size not in (1, None):
            # Ray joins blocks into batches before the step sees them: one of another type
            # would fail the job at that batch, after others were paid for.
            raise ValueError(
                "the dataset's blocks hold a column in types that cannot be joined into one "
                f"batch ({type(unmerged).__name__}: {unmerged}); pass batch_size=1 to check "
                "each row alone (a row whose text is not text gets its `invalid_row` error), "
                "batch_size=None for whole blocks, or cast the column first"
            ) from None
        known = None  # do not merge: each batch is checked as it comes, as Ray reads them
    names = [] if known is None else list(known.names)
    taken = [name for name in COLUMNS if name in names]
    if taken:
        raise ValueError(_taken(taken))
    if known is not None and text_column is not None and text_column not in names:
        raise ValueError(
            f"the dataset has no column `{text_column}` (its columns: "
            f"{', '.join(f'`{name}`' for name in names)}); name the text's with text_column"
        )
    if isinstance(concurrency, tuple):
        pool = ray.data.ActorPoolStrategy(min_size=concurrency[0], max_size=concurrency[1])
    else:
        pool = ray.data.ActorPoolStrategy(size=concurrency)
    return ds.map_batches(
        ExtractBatch,
        fn_constructor_kwargs=settings,
        batch_format="pyarrow",
        batch_size=batch_size,
        compute=pool,
        num_cpus=num_cpus,
    )
