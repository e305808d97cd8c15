"""An HTTP provider's batch jobs: its job dialect joined to its transport, keys and adapter.

The requests of a job are encoded by the provider exactly as its live calls are (the same
adapter, schema dialect and warnings), and each row's answer is decoded as the live call's
would be, so an extraction records the same enforcement either way. The job API's own
calls (upload, create, read, list, cancel, download, delete) go through the provider's
transport, and an error status becomes the provider's error, with the key scrubbed."""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from allama.adapters._http import HttpRequest, HttpResponse, wire_json
from allama.adapters._jobs import (
    Entry,
    JobDialect,
    JobState,
    JobTarget,
    MayBeGone,
    Row,
    RowKind,
    Steps,
    load_job_dialect,
)
from allama.batch._threads import settle
from allama.errors import Error, InvalidRequestError, ServerError
from allama.transport import no_deadline

if TYPE_CHECKING:
    from allama.providers._http import HttpProvider
    from allama.types import ChatRequest, ChatResponse, Warning

__all__ = ["JobFile", "ProviderJobs", "job_files", "provider_jobs"]

JOB_PRESETS = ("openai", "anthropic", "gemini")


def provider_jobs(provider: Any) -> ProviderJobs:
    """The batch jobs of `provider`, or a clear error when it has no batch API allama speaks."""
    from allama.providers._http import HttpProvider

    name = getattr(provider, "name", type(provider).__name__)
    if not isinstance(provider, HttpProvider):
        raise InvalidRequestError(
            f"provider batch jobs need an HTTP provider of {', '.join(JOB_PRESETS)}; "
            f"{name!r} is a {type(provider).__name__}"
        ).mark_authored()
    dialect = provider.preset.batch_jobs
    if dialect is None:
        raise (
            InvalidRequestError(
                f"{provider.name} has no batch API allama speaks (it does for "
                f"{', '.join(JOB_PRESETS)}); run without provider batch jobs"
            )
            .mark_authored()
            .with_provider(provider.name)
        )
    return ProviderJobs(provider, load_job_dialect(dialect))


class ProviderJobs:
    def __init__(self, provider: HttpProvider, dialect: JobDialect) -> None:
        self.provider = provider
        self.dialect = dialect

    @property
    def name(self) -> str:
        return self.dialect.name

    def target(self, model: str) -> JobTarget:
        provider = self.provider
        _, params = provider._endpoint(model)
        endpoint, _ = provider.adapter.path(model, stream=False)
        base = provider.base_url or ""
        return JobTarget(
            base_url=base,
            headers=provider._headers(stream=False),
            model=model,
            endpoint=endpoint,
            params=dict(params),
            own_host_headers=frozenset({"Authorization"} if provider._url_auth else ()),
            own_host_params=frozenset(provider._url_query),
        )

    def entry(self, key: str, request: ChatRequest) -> tuple[Entry, list[Warning]]:
        """The call `request` would be, as a job's entry, and the warnings it carries."""
        http, warnings = self.provider._prepare(request, stream=False)
        return Entry(key, http), warnings

    def answer(self, request: ChatRequest, row: Row, warnings: list[Warning]) -> ChatResponse:
        """The response a row holds, decoded as the live call's; raises the error it holds."""
        provider = self.provider
        if row.kind == RowKind.RESPONSE:
            http = HttpResponse(row.status or 200, {}, row.body or b"{}")
            return provider._response(request, http, warnings)
        if row.kind == RowKind.ERROR and row.body is not None:
            raise provider._stream_error(request, row.status or 500, {}, row.body)
        raise RowUnanswered(row)

    # Driving the dialect's steps

    def _error(self, response: HttpResponse, model: str, sent: HttpRequest) -> Error:
        """The provider's error for `response`, with the credentials of `sent` (the request
        it answers, whose token other calls may have long replaced) cut out."""
        error = self.provider.adapter.error(
            response.status,
            response.headers,
            response.content,
            provider=self.provider.name,
            model=model,
        )
        return self.provider._scrub(error, sent)

    async def run(self, steps: Steps, model: str, *, sync: bool = False) -> Any:
        """Drive `steps` over the provider's transport (its sync side in a worker thread
        when `sync`: a provider used from a `batch` run keeps to one side), with no
        `deadline=`: one sized for model calls would cut a job's file uploads and downloads
        (the same ones, every time), and a slow job step is bounded by `timeout=` still."""
        with no_deadline():
            return await self._run(steps, model, sync=sync)

    async def _run(self, steps: Steps, model: str, *, sync: bool) -> Any:
        transport = self.provider._transport
        send: Callable[[HttpRequest], Any] = (
            (lambda http: _in_daemon(transport.send, http)) if sync else transport.asend
        )
        http: HttpRequest | None = None  # (the last sent: its token is cut out of what ends)
        try:
            http = next(steps)
            while True:
                try:
                    response: HttpResponse = await send(http)
                except Error as error:
                    named = error.with_provider(self.provider.name).with_model(model)
                    self.provider._scrub(named, http)
                    raise
                if response.status >= 400 and not (
                    response.status == 404 and isinstance(http, MayBeGone)
                ):
                    raise self._error(response, model, http)
                try:
                    http = steps.send(response)
                except (KeyError, TypeError, IndexError, ValueError, AttributeError) as why:
                    raise self._unreadable(http, response, why) from None
        except StopIteration as done:
            return self._scrubbed(done.value, http)

    def _scrubbed(self, found: Any, sent: HttpRequest | None) -> Any:
        """A job's state or rows with the credentials the provider echoed in its words (a
        job refused whole, a row's reason) removed, as from a live call's error; `sent`:
        the request they answered, whose token is looked for whatever was sent since."""
        from allama.providers._http import redacted

        secrets = self.provider._secrets(sent)  # (once for a job's rows)

        def scrub(text: str | None) -> str | None:
            return redacted(text, secrets)

        if isinstance(found, JobState) and (found.error or found.error_words):
            return replace(found, error=scrub(found.error), error_words=scrub(found.error_words))
        if isinstance(found, dict):
            return {
                key: replace(row, words=scrub(row.words), note=scrub(row.note))
                if isinstance(row, Row) and (row.words or row.note)
                else row
                for key, row in found.items()
            }
        return found

    def _unreadable(self, http: HttpRequest, response: HttpResponse, why: Exception) -> Error:
        """An answer of the job API in a shape allama does not read (a field missing, not
        JSON): said with the request it answered, and the body kept for the log's owner."""
        from urllib.parse import urlsplit

        where = f"{http.method} {urlsplit(http.url).path}"
        # The exception's own text may quote the body (a value that is no number), which
        # is the provider's and kept apart: its class says what went wrong.
        return (
            ServerError(
                f"{self.dialect.name} answered {where} with a body allama cannot read "
                f"({type(why).__name__})"
            )
            .mark_authored()
            .with_provider(self.provider.name)
            .with_body(response.content.decode("utf-8", "replace"))
        )

    def submit(
        self,
        target: JobTarget,
        entries: Sequence[Entry],
        tag: str,
        uploaded: dict[str, str] | None = None,
    ) -> Steps:
        return self.dialect.submit(target, entries, tag, uploaded)

    def state(self, target: JobTarget, job_id: str, files: list[JobFile]) -> Steps:
        """The dialect's read of a job (its `JobState`), with the files the provider keeps
        for it put in `files` (`job_files`): what the job reads and writes is named only
        in the provider's own view of it, which the state leaves out."""
        steps = self.dialect.state(target, job_id)
        http = next(steps)
        while True:
            response = yield http
            try:
                http = steps.send(response)
            except StopIteration as done:
                state: JobState = done.value
                files[:] = job_files(self.provider.preset.batch_jobs, response, state)
                return state

    def delete_file(self, target: JobTarget, name: str) -> Steps:
        """Delete a file of a job at the provider (its id, or Gemini's `files/...` name):
        the request the dialect makes to delete an uploaded file serves any of its files."""
        return self.dialect.discard(target, {"file": name})


def _in_daemon(send: Callable[[HttpRequest], HttpResponse], http: HttpRequest) -> Any:
    """`send(http)` in a daemon thread of its own, as a sync run's live calls are made: a
    program that ends, or a run closed, during a job's upload is not held for as long as
    it takes (the default executor's threads are joined at exit), and a call abandoned so
    holds up no other (job calls are few: an upload, a poll, a download). The ledger keeps
    the job to look for."""
    loop = asyncio.get_running_loop()
    done: asyncio.Future[Any] = loop.create_future()
    context = contextvars.copy_context()

    def call() -> None:
        try:
            outcome: tuple[Any, BaseException | None] = (context.run(send, http), None)
        except BaseException as error:  # handed to the run, which waits on it
            outcome = (None, error)
        with contextlib.suppress(RuntimeError):  # the run's loop has ended: abandoned
            loop.call_soon_threadsafe(settle, done, *outcome)

    threading.Thread(target=call, name="allama-job-call", daemon=True).start()
    return done


@dataclass(frozen=True, slots=True)
class JobFile:
    """A file the provider keeps for a job: `name` its id (Gemini: `files/...`), `what`
    it is, as a warning names it ("input file", "output file", ...)."""

    name: str
    what: str

    @property
    def holds(self) -> str:
        """What of the run it holds, for the warning of a file not deleted."""
        return "the requests' text" if self.what == "input file" else "the answers"


def job_files(kind: str | None, response: HttpResponse, state: JobState) -> list[JobFile]:
    """The files a job's read (`response`, whose parsed state is `state`) names at the
    provider: OpenAI's input, output and error files; Gemini's input file and responses
    file (a job sent inline, answered inline, has none); Anthropic keeps none. An answer
    that does not read names none."""
    try:
        job = wire_json(response.content) if response.content.strip() else {}
    except ValueError:
        return []
    if not isinstance(job, dict):
        return []
    named: list[tuple[object, str]] = []
    if kind == "openai":
        named = [
            (job.get("input_file_id"), "input file"),
            (job.get("output_file_id"), "output file"),
            (job.get("error_file_id"), "error file"),
        ]
    elif kind == "gemini":
        metadata = job.get("metadata")
        source = metadata.get("inputConfig") if isinstance(metadata, dict) else None
        output = state.results if isinstance(state.results, dict) else {}
        named = [
            (source.get("fileName") if isinstance(source, dict) else None, "input file"),
            (output.get("responsesFile"), "responses file"),
        ]
        # Deleted by its name under the base URL: only a file's (never a batch's).
        named = [(name, what) for name, what in named if str(name).startswith("files/")]
    return [JobFile(name, what) for name, what in named if isinstance(name, str) and name]


class RowUnanswered(Exception):
    """A row the job did not run (expired, cancelled, missing): not the model's doing."""

    def __init__(self, row: Row) -> None:
        super().__init__(row.note or row.kind)
        self.row = row
