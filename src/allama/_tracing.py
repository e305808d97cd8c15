"""OpenTelemetry spans for provider calls and extractions, following the GenAI conventions.

Every provider call over HTTP is a CLIENT span named `chat {model}` (`generate_content
{model}` on Gemini's API) with the conventions' `gen_ai.*` attributes; every extraction is an
INTERNAL span named `extract {Type}` (`decide {Type}` for a decision) that holds its calls
as children and carries allama's record (`allama.extract.*`, `allama.cost.*`). Streams are
spanned until they end: finished, failed, closed early or dropped. A retry's or a
failover's call outside an extraction is an INTERNAL span (`retry {model}`,
`failover {model}`) holding its attempts' spans; inside one, its attempts are the
extraction's calls; either way each attempt's span says which it is. The providers a
failover passed over are on its span, or, inside an extraction, on the span of the first
call it sent after.

Only `opentelemetry-api` is used (the `otel` extra), and only once something asks for it:
with no tracer provider configured, a call costs one dictionary look-up here, and
`opentelemetry` is never imported by allama itself. A tracer provider comes from
`tracer_provider=` (on `allama.provider(...)` or `Extractor(...)`) or else from
`opentelemetry.trace.set_tracer_provider`, re-read on every call (so one set later is
used), and an extraction's calls use the extraction's.

Prompts and outputs (`gen_ai.input.messages`, `gen_ai.output.messages`) are recorded only
on opt-in: `capture_content=True`, or `OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT`
set to `SPAN_ONLY`, `SPAN_AND_EVENT` or `true`. Keys, tokens and headers never are; error
messages only where allama wrote them.
"""

from __future__ import annotations

import contextlib
import functools
import json
import os
import sys
import time
import types
import typing
import weakref
from collections.abc import AsyncIterator, Callable, Generator, Iterator, Mapping, Sequence
from contextvars import ContextVar, Token
from typing import TYPE_CHECKING, Any, Generic, TypeVar

if TYPE_CHECKING:
    from opentelemetry.trace import Span, Tracer

    from allama.extract._metadata import ExtractionMetadata
    from allama.providers._http import HttpProvider
    from allama.stream import StreamCollector
    from allama.types import ChatRequest, ChatResponse, Message, Usage, Warning

__all__ = ["CAPTURE_CONTENT_ENV", "Tracing"]

CAPTURE_CONTENT_ENV = "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT"
"""The conventions' switch for recording prompts and outputs on spans."""

_CAPTURING = frozenset({"span_only", "span_and_event", "true"})
_TRACE_MODULE = "opentelemetry.trace"
_PROVIDER_ENV = "OTEL_PYTHON_TRACER_PROVIDER"
_SCOPE = "allama"

GENAI_PROVIDER_NAMES = {
    "openai": "openai",
    "azure-openai": "azure.ai.openai",
    "azure-foundry": "azure.ai.inference",
    "anthropic": "anthropic",
    "gemini": "gcp.gemini",
    "vertex-gemini": "gcp.vertex_ai",
    "groq": "groq",
    "xai": "x_ai",
    "mistral": "mistral_ai",
    "deepseek": "deepseek",
}
"""`gen_ai.provider.name` of the presets the conventions name; any other is its own name."""

_OPERATIONS = {"gemini": "generate_content"}
"""`gen_ai.operation.name` by dialect, where the conventions name one; else `chat`."""

_FINISH_REASONS = {"tool_calls": "tool_call"}
"""allama's finish reasons in the conventions' words, where they differ."""


def genai_provider_name(name: str) -> str:
    return GENAI_PROVIDER_NAMES.get(name, name)


# Configuration


class Tracing:
    """Where an owner (a provider, an extractor) sends its spans, and whether with content.

    `tracer_provider`: an OpenTelemetry `TracerProvider` to use instead of the global one.
    `capture_content`: record prompts and outputs (`None`: as the environment variable says).
    """

    __slots__ = ("_cached", "capture_content", "tracer_provider")

    def __init__(self, tracer_provider: Any = None, capture_content: bool | None = None) -> None:
        if tracer_provider is not None and not callable(
            getattr(tracer_provider, "get_tracer", None)
        ):
            raise TypeError(
                "tracer_provider must be an OpenTelemetry TracerProvider, not "
                f"{type(tracer_provider).__name__}"
            )
        if capture_content is not None and not isinstance(capture_content, bool):
            raise TypeError(f"capture_content must be True, False or None, not {capture_content!r}")
        self.tracer_provider = tracer_provider
        self.capture_content = capture_content
        self._cached: Tracer | None = None

    def tracer(self) -> Tracer | None:
        provider = self.tracer_provider
        if provider is None:
            return None
        tracer = self._cached
        if tracer is None:
            tracer = self._cached = _tracer_of(provider)
        return tracer

    def __repr__(self) -> str:
        return (
            f"Tracing(tracer_provider={self.tracer_provider!r}, "
            f"capture_content={self.capture_content!r})"
        )


class _Active:
    """A tracer found for a span, and whether the span records content; as an extraction's
    (`_ENCLOSING`), the provider of the last call made under it too (`called`)."""

    __slots__ = ("called", "capture", "tracer")

    def __init__(self, tracer: Tracer, capture: bool) -> None:
        self.tracer = tracer
        self.capture = capture
        self.called: str | None = None


_ENCLOSING: ContextVar[_Active | None] = ContextVar("allama_tracing", default=None)
"""The tracer of the extraction being run, for the provider calls it makes."""

_global: tuple[object, Tracer | None] = (None, None)
"""The global tracer provider last seen and allama's tracer from it (`None`: a no-op one)."""
_provider_env: bool | None = None


def _tracer_of(provider: Any) -> Tracer:
    from allama import __version__

    tracer: Tracer = provider.get_tracer(_SCOPE, __version__)
    return tracer


def _global_tracer() -> Tracer | None:
    """allama's tracer from the global tracer provider; `None` while that is a no-op one.

    Without `opentelemetry.trace` imported no provider can have been set (unless the
    environment names one), so that case is one look-up. Otherwise the global provider is
    read again each time, so one set after the first call is used from then on.
    """
    global _global, _provider_env
    module = sys.modules.get(_TRACE_MODULE)
    if module is None:
        if _provider_env is None:
            _provider_env = _PROVIDER_ENV in os.environ
        if not _provider_env:
            return None
        try:
            import opentelemetry.trace as module
        except ImportError:
            return None
    trace: Any = module
    provider = trace.get_tracer_provider()
    seen, tracer = _global
    if provider is seen:
        return tracer
    tracer = (
        None
        if isinstance(provider, trace.ProxyTracerProvider | trace.NoOpTracerProvider)
        else _tracer_of(provider)
    )
    _global = (provider, tracer)
    return tracer


def _capture_from_env() -> bool:
    return os.environ.get(CAPTURE_CONTENT_ENV, "").strip().lower() in _CAPTURING


def resolve(own: Tracing | None, *, inherit: bool = True) -> _Active | None:
    """The tracer for an owner's span and whether it records content; `None`: no span.

    The owner's own tracer provider first, then (for a provider call, `inherit`) the one of
    the extraction it runs in, then the global one. Content: the owner's own setting, then
    (for a provider call) the extraction's, traced or not, then the environment. A tracer
    provider that raises as its tracer is asked for (or a name in the environment
    OpenTelemetry cannot load) means no span: tracing never fails a call.
    """
    try:
        return _resolve(own, inherit)
    except Exception:
        return None


def _resolve(own: Tracing | None, inherit: bool) -> _Active | None:
    enclosing = _ENCLOSING.get() if inherit else None
    if own is not None:
        tracer = own.tracer()
        if tracer is not None:
            capture = own.capture_content
            return _Active(tracer, _inherited(enclosing, inherit) if capture is None else capture)
    if enclosing is not None:
        if own is None or own.capture_content is None:
            return enclosing
        return _Active(enclosing.tracer, own.capture_content)
    tracer = _global_tracer()
    if tracer is None:
        return None
    capture = None if own is None else own.capture_content
    return _Active(tracer, _inherited(None, inherit) if capture is None else capture)


def _inherited(enclosing: _Active | None, inherit: bool) -> bool:
    """Whether a span records content when its owner does not say: as the extraction it
    runs in says (traced, or with no tracer of its own: `content_scope`), else as the
    environment does."""
    if enclosing is not None:
        return enclosing.capture
    said = _CONTENT.get() if inherit else None
    return _capture_from_env() if said is None else said


_CONTENT: ContextVar[bool | None] = ContextVar("allama_capture_content", default=None)
"""The content setting of the extraction being run where it has no span (no tracer of its
own): the spans of its calls, traced by their provider's tracer, follow it."""


V = TypeVar("V")


class _Scope(Generic[V]):
    """Sets a context variable while what runs in it runs: the content setting of an
    untraced extraction, or the tracer of the extraction a call is made for."""

    __slots__ = ("_token", "_value", "_var")

    def __init__(self, var: ContextVar[V], value: V) -> None:
        self._var = var
        self._value = value
        self._token: Token[V] | None = None

    def __enter__(self) -> None:
        self._token = self._var.set(self._value)

    def __exit__(self, *exc: object) -> None:
        if self._token is not None:
            self._var.reset(self._token)


_NO_SCOPE = contextlib.nullcontext()


def content_scope(own: Tracing | None) -> contextlib.AbstractContextManager[Any]:
    """What an extraction with no span of its own runs in: its content setting, where it
    has one, for the spans of its calls."""
    if own is None or own.capture_content is None:
        return _NO_SCOPE
    return _Scope(_CONTENT, own.capture_content)


def calls_scope(own: Tracing | None) -> contextlib.AbstractContextManager[Any]:
    """What a call made for an extraction outside its span (a batch job's follow-up, sent
    live) runs in: the extraction's tracer, where it has one, and its content setting."""
    active = None if own is None else resolve(own, inherit=False)
    if active is None:
        return content_scope(own)
    return _Scope(_ENCLOSING, active)


# Attributes shared by spans


def _otel() -> types.ModuleType:
    """`opentelemetry.trace`, imported by whoever made a tracer available."""
    import opentelemetry.trace as trace

    return trace


def _set_error(span: Span, error: BaseException) -> None:
    """`error.type` (allama's kind, or the exception's class) and an ERROR status whose
    description is allama's own words, never text the provider or the model wrote."""
    trace = _otel()
    kind = getattr(error, "kind", None)
    if isinstance(kind, str):
        as_log = getattr(error, "as_log", None)
        message = as_log().get("message") if callable(as_log) else None
        description = message if isinstance(message, str) and message else kind
        error_type = kind
    else:
        error_type = type(error).__qualname__
        description = error_type
    span.set_attribute("error.type", error_type)
    span.set_status(trace.Status(trace.StatusCode.ERROR, description))


_USAGE_ATTRIBUTES = (
    ("input_tokens", "input_tokens"),
    ("output_tokens", "output_tokens"),
    ("cache_read.input_tokens", "cache_read_tokens"),
    ("cache_creation.input_tokens", "cache_write_tokens"),
    ("reasoning.output_tokens", "reasoning_tokens"),
)
"""The token counts by the conventions' names (`gen_ai.usage.*`), each with its `Usage`
field: a cache write is the conventions' `cache_creation`."""


def _usage(
    found: dict[str, Any],
    usage: Usage | Mapping[str, Any] | None,
    prefix: str = "gen_ai.usage.",
) -> None:
    """Add the token counts reported (a count not reported stays out): a `Usage`, or its
    JSON as an error keeps what the failed call reported."""
    if usage is None:
        return
    for key, name in _USAGE_ATTRIBUTES:
        value = usage.get(name) if isinstance(usage, Mapping) else getattr(usage, name)
        if isinstance(value, int) and not isinstance(value, bool) and _int64(value):
            found[prefix + key] = value


def _int64(value: object) -> bool:
    """Whether a value can go on a span as it is: OTLP carries integers as int64 alone, and
    an exporter refuses a span with one outside (a seed of 64 random bits, say)."""
    return not isinstance(value, int) or -(2**63) <= value < 2**63


def _not_as_sent(warnings: Sequence[Warning]) -> set[str]:
    """The request fields a warning names (left out, or sent as something else), which the
    span does not show; but not a response format only widened, which still asked for the
    same type of output."""
    fields: set[str] = set()
    for warning in warnings:
        field = getattr(warning.subject, "field", None)
        if field is None:
            continue
        if str(field) == "response_format" and str(warning.kind) == "approximated":
            continue
        fields.add(str(field))
    return fields


_OUTPUT_TYPES = {"text": "text", "json": "json", "json_schema": "json", "choice": "text"}
"""`gen_ai.output.type` by response format: a choice is answered as plain text."""


def output_type(request: ChatRequest) -> str | None:
    """`gen_ai.output.type`, the type of output `request` asks for: its response format's,
    or JSON for a forced tool's arguments; `None` where it asks for none."""
    fmt = request.response_format
    if fmt is not None:
        return _OUTPUT_TYPES.get(str(fmt.type))
    choice = request.tool_choice
    if request.tools and choice is not None and choice.mode in ("tool", "required"):
        return "json"
    return None


def _request_attributes(
    request: ChatRequest,
    warnings: Sequence[Warning] = (),
    as_sent: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """The request's settings as they were sent: one the encoding says it sent otherwise
    (`as_sent`, `HttpRequest.as_sent`: a default it filled in) as it was sent; a field a
    warning names (left out, or sent as another value: a level for another, a floor, the
    first few stop sequences) is not shown, rather than read back out of the warning's
    words; nor is an integer OTLP cannot carry."""
    effort = request.reasoning_effort
    not_sent = _not_as_sent(warnings) if warnings else set()
    as_sent = as_sent or {}
    attributes: dict[str, Any] = {}
    for key, field, value in (
        ("gen_ai.request.temperature", "temperature", request.temperature),
        ("gen_ai.request.top_p", "top_p", request.top_p),
        ("gen_ai.request.max_tokens", "max_output_tokens", request.max_output_tokens),
        ("gen_ai.request.seed", "seed", request.seed),
        ("gen_ai.request.stop_sequences", "stop", list(request.stop) or None),
        (
            "gen_ai.request.reasoning.level",
            "reasoning_effort",
            None if effort is None else str(effort.value),
        ),
        (
            "gen_ai.output.type",
            "response_format",
            None if request.response_format is None else output_type(request),
        ),
    ):
        if field in as_sent:
            value = as_sent[field]
        elif field in not_sent:
            continue
        if value is not None and _int64(value):
            attributes[key] = value
    return attributes


def _finish_reason(reason: str | None) -> str:
    if reason is None:
        return "error"
    return _FINISH_REASONS.get(str(reason), str(reason))


# Content (opt-in), in the conventions' JSON message shapes


def _arguments(text: str) -> Any:
    try:
        return json.loads(text)
    except ValueError:
        return text


def _block_part(block: Any) -> dict[str, Any]:
    kind = block.type
    if kind == "text":
        return {"type": "text", "content": block.text}
    if kind == "tool_call":
        return {
            "type": "tool_call",
            "id": block.id,
            "name": block.name,
            "arguments": _arguments(block.arguments),
        }
    if kind == "reasoning":
        return {"type": "reasoning", "content": block.text}
    if kind == "refusal":
        return {"type": "refusal", "content": block.text}
    return {"type": str(kind)}


def _user_part(part: Any) -> dict[str, Any]:
    if part.type == "text":
        return {"type": "text", "content": part.text}
    modality = "image" if part.type == "image" else "document"
    media_type = part.media_type
    inline = None if part.url is None else _inline(part.url)
    if inline is not None:
        # The conventions' `uri` part is no place for a data URL: its bytes are a `blob`.
        media_type = media_type or inline[0]
        found: dict[str, Any] = {"type": "blob", "modality": modality, "content": inline[1]}
    elif part.url is not None:
        found = {"type": "uri", "modality": modality, "uri": part.url}
    else:
        import base64

        data = part.data or b""
        found = {
            "type": "blob",
            "modality": modality,
            "content": base64.b64encode(data).decode("ascii"),
        }
    if media_type:
        found["mime_type"] = media_type
    return found


def _inline(url: str) -> tuple[str, str] | None:
    """A data URL's media type (empty where it names none) and its bytes in base64: as
    given where it says base64, else its percent-encoded text encoded; `None` for any
    other URL."""
    from allama.types._data_urls import data_url

    found = data_url(url)
    if found is None:
        return None
    if found.base64:
        return found.media_type, found.data
    import base64
    import urllib.parse

    data = urllib.parse.unquote_to_bytes(found.data)
    return found.media_type, base64.b64encode(data).decode("ascii")


def input_messages(request: ChatRequest, history: Sequence[Message] | None = None) -> str:
    """`gen_ai.input.messages`: the conversation as sent, system turns included, but for
    those sent apart from it (`history`: the rest, `_apart`)."""
    from allama.types import AssistantMessage, ToolMessage, UserMessage

    messages: list[dict[str, Any]] = []
    for message in request.messages if history is None else history:
        parts: list[dict[str, Any]]
        if isinstance(message, UserMessage):
            parts = [_user_part(part) for part in message.content]
        elif isinstance(message, AssistantMessage):
            parts = [_block_part(block) for block in message.content]
        elif isinstance(message, ToolMessage):
            parts = [
                {
                    "type": "tool_call_response",
                    "id": message.tool_call_id,
                    "response": message.content,
                }
            ]
        else:  # system, developer
            parts = [{"type": "text", "content": message.content}]
        messages.append({"role": message.role, "parts": parts})
    return json.dumps(messages, ensure_ascii=False)


def system_instructions(texts: Sequence[str]) -> str:
    """`gen_ai.system_instructions`: the system messages an API takes apart from the
    conversation, a text part each."""
    return json.dumps([{"type": "text", "content": text} for text in texts], ensure_ascii=False)


_RESPONSES_OPTION = "openai_responses"
"""The Responses API's body option (`openai_responses._encode.BODY_OPTION`)."""


def _apart(provider: HttpProvider, request: ChatRequest) -> tuple[list[str], list[Message]] | None:
    """The system messages `provider`'s API takes apart from the conversation (Anthropic's
    `system`, Gemini's `systemInstruction`, the Responses API's `instructions`) as its
    encoder sends them, and the rest; `None` where they are part of the conversation
    (Chat Completions, Ollama), which the conventions record in `gen_ai.input.messages`.
    One its encoder leaves out (blank) is in neither."""
    from allama.types import DeveloperMessage, SystemMessage

    dialect = provider.preset.dialect
    if dialect not in ("anthropic", "gemini", "openai_responses"):
        return None
    adapter = getattr(provider, "_adapter", None)
    instructions: list[str] = []
    history: list[Message] = []
    if dialect == "openai_responses":
        # The system messages that open the request; a later one is an input item, as is
        # a developer message where the endpoint has that role.
        profile = getattr(adapter, "profile", None)
        developer_role = getattr(profile, "developer_role", True)
        if getattr(profile, "name", None) == "xai":
            extra = request.option_json(_RESPONSES_OPTION)
            previous = extra.get("previous_response_id") if isinstance(extra, dict) else None
            if isinstance(previous, str) and previous:
                return None  # xAI takes no `instructions` beside it: sent as an item
        for message in request.messages:
            if not history and (
                isinstance(message, SystemMessage)
                or (isinstance(message, DeveloperMessage) and not developer_role)
            ):
                instructions.append(message.content)
            else:
                history.append(message)
        return instructions, history
    if dialect == "gemini":
        table = getattr(adapter, "table", None)
        family = table.family(request.model) if table is not None else None
        if family is not None and not getattr(family, "system", True):
            return None  # no system instruction on this model: they open the first turn
    for message in request.messages:
        if isinstance(message, SystemMessage | DeveloperMessage):
            # Anthropic refuses whitespace alone, Gemini an empty text: left out.
            said = message.content.strip() if dialect == "anthropic" else message.content
            if said:
                instructions.append(message.content)
        else:
            history.append(message)
    return instructions, history


def output_messages(response: ChatResponse) -> str:
    """`gen_ai.output.messages`: the one answer, as far as it came; with no finish reason
    (a stream cut, or closed by the caller before its end), `error`, as the conventions
    say for an answer that did not finish."""
    message: dict[str, Any] = {
        "role": "assistant",
        "parts": [_block_part(block) for block in response.content],
        "finish_reason": _finish_reason(response.finish_reason),
    }
    return json.dumps([message], ensure_ascii=False)


# Provider calls


@functools.lru_cache(maxsize=64)
def _server(url: str | None) -> tuple[str | None, int | None]:
    """`server.address` and `server.port` of a base URL (its host and port, nothing else)."""
    if not url:
        return None, None
    import httpx2

    try:
        parsed = httpx2.URL(url)
    except httpx2.InvalidURL:
        return None, None
    port = parsed.port or {"https": 443, "http": 80}.get(parsed.scheme)
    return parsed.host or None, port


class CallSpan:
    """The span of one provider call: ended by `succeed`, `fail`, or the stream's end."""

    __slots__ = ("__weakref__", "_finalizer", "capture", "ended", "span", "started")

    def __init__(self, span: Span, capture: bool) -> None:
        self.span = span
        self.capture = capture
        self.started = time.monotonic()
        self.ended = False
        self._finalizer: weakref.finalize[Any, Any] | None = None

    # The call's context: an HTTP client's own spans nest under this one.

    def attach(self) -> object:
        trace = _otel()
        from opentelemetry import context

        return context.attach(trace.set_span_in_context(self.span))

    @staticmethod
    def detach(token: object) -> None:
        from opentelemetry import context

        context.detach(token)  # type: ignore[arg-type]

    def _response(self, response: ChatResponse, found: dict[str, Any] | None = None) -> None:
        found = {} if found is None else found
        if response.model:
            found["gen_ai.response.model"] = response.model
        if response.id:
            found["gen_ai.response.id"] = response.id
        if response.finish_reason is not None:
            found["gen_ai.response.finish_reasons"] = [_finish_reason(response.finish_reason)]
        _usage(found, response.usage)
        if self.capture and self.span.is_recording():
            found["gen_ai.output.messages"] = output_messages(response)
        self.span.set_attributes(found)

    def _end(self) -> None:
        self.ended = True
        if self._finalizer is not None:
            self._finalizer.detach()
            self._finalizer = None
        end_span(self.span)

    def succeed(self, response: ChatResponse) -> None:
        if self.ended:
            return
        try:
            self._response(response)
        except Exception:  # tracing never fails a call
            pass
        finally:
            self._end()

    def fail(self, error: BaseException) -> None:
        if self.ended:
            return
        try:
            # A call that failed after it was billed (an error in a 200 body, with usage):
            # its tokens, as its error keeps them.
            from allama.errors import REPORTED_MODEL_KEY, REPORTED_USAGE_KEY

            context = getattr(error, "context", None)
            metadata = getattr(context, "metadata", None)
            if isinstance(metadata, Mapping):
                found: dict[str, Any] = {}
                usage = metadata.get(REPORTED_USAGE_KEY)
                if isinstance(usage, Mapping):
                    _usage(found, usage)
                model = metadata.get(REPORTED_MODEL_KEY)
                if isinstance(model, str) and model:
                    found["gen_ai.response.model"] = model
                self.span.set_attributes(found)
            _set_error(self.span, error)
        except Exception:
            pass
        finally:
            self._end()

    # Streams

    def first_chunk(self) -> None:
        with contextlib.suppress(Exception):  # a span that raises fails no stream
            self.span.set_attribute(
                "gen_ai.response.time_to_first_chunk", time.monotonic() - self.started
            )

    def timed(self, chunks: Iterator[bytes]) -> Iterator[bytes]:
        """The chunks, noting when the first one came."""
        for chunk in chunks:
            self.first_chunk()
            yield chunk
            yield from chunks
            return

    async def atimed(self, chunks: AsyncIterator[bytes]) -> AsyncIterator[bytes]:
        async for chunk in chunks:
            self.first_chunk()
            yield chunk
            async for rest in chunks:
                yield rest
            return

    def stream_ended(self, collector: StreamCollector, failure: BaseException | None) -> None:
        """The stream ended: finished, failed, or closed before its end (kept, not failed;
        its finish reason `error`, the conventions' word for an answer that did not finish,
        unless the model's own came first)."""
        if self.ended:
            return
        try:
            error = collector.error or failure
            found: dict[str, Any] = {}
            if not collector.finished:
                found["gen_ai.response.finish_reasons"] = ["error"]
                if error is None:  # closed by the caller
                    found["allama.stream.closed_early"] = True
            self._response(collector.partial_response(), found)
            if error is not None:
                _set_error(self.span, error)
        except Exception:
            pass
        finally:
            self._end()

    def watch(self, stream: object, collector: StreamCollector) -> None:
        """End the span when `stream` is dropped without being closed."""
        self._finalizer = weakref.finalize(stream, _dropped, self, collector)


def _dropped(span: CallSpan, collector: StreamCollector) -> None:
    span.stream_ended(collector, None)


def start_call(
    own: Tracing | None,
    provider: HttpProvider,
    request: ChatRequest,
    stream: bool,
    warnings: Sequence[Warning] = (),
    as_sent: Mapping[str, Any] | None = None,
) -> CallSpan | None:
    """The span of a call `provider` is about to send, started; `None` when tracing is off.
    `warnings`: the encoding's, which say what of `request` was not sent as it is;
    `as_sent`: the settings it sent otherwise than `request` gives them
    (`HttpRequest.as_sent`)."""
    if (
        own is None
        and _provider_env is False
        and _TRACE_MODULE not in sys.modules
        and _ENCLOSING.get() is None
    ):
        return None  # the common case, decided without a call
    enclosing = _ENCLOSING.get()
    if enclosing is not None:
        # The provider the extraction's error ended at, where the error names none (a
        # cancellation): a failover's, not the failover.
        enclosing.called = provider.name
    active = resolve(own)
    if active is None:
        return None
    try:
        trace = _otel()
        operation = _OPERATIONS.get(provider.preset.dialect, "chat")
        attributes: dict[str, Any] = {
            "gen_ai.operation.name": operation,
            "gen_ai.provider.name": genai_provider_name(provider.name),
            "gen_ai.request.model": request.model,
        }
        host, port = _server(provider.base_url)
        if host is not None:
            attributes["server.address"] = host
            if port is not None:
                attributes["server.port"] = port
        attributes.update(_request_attributes(request, warnings, as_sent))
        if stream:
            attributes["gen_ai.request.stream"] = True
        numbers = _ATTEMPT.get()
        if numbers:  # which attempt of the wrappers it is sent through
            attributes.update(numbers)
        pending = _PASSED_OVER.get()
        if pending is not None:  # the first call a failover sent after passing some over
            attributes.update(pending.take())
        span = active.tracer.start_span(
            f"{operation} {request.model}", kind=trace.SpanKind.CLIENT, attributes=attributes
        )
    except Exception:  # tracing never fails a call
        return None
    if active.capture:
        _record_input_messages(span, provider, request)
    return CallSpan(span, active.capture)


def _record_input_messages(span: Span, provider: HttpProvider, request: ChatRequest) -> None:
    """The prompt, with content capture on, where the span records (not dropped by a
    sampler): the system instructions apart where the API takes them apart."""
    try:
        if not span.is_recording():
            return
        try:
            apart = _apart(provider, request)
        except Exception:  # (a table that cannot answer): as the conversation says
            apart = None
        if apart is None:
            span.set_attribute("gen_ai.input.messages", input_messages(request))
            return
        instructions, history = apart
        if instructions:
            span.set_attribute("gen_ai.system_instructions", system_instructions(instructions))
        span.set_attribute("gen_ai.input.messages", input_messages(request, history))
    except Exception:
        pass


# Wrappers

_ATTEMPT: ContextVar[Mapping[str, int] | None] = ContextVar("allama_attempt", default=None)
"""Which attempt of each wrapper around it a span started here is (`allama.retry.attempt`,
`allama.failover.attempt`): of the wrappers inside the nearest wrapper span, which says
the rest."""


def _skipped_attributes(kind: str, skipped: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """`allama.failover.skipped` (how many) and, in the same order, the providers (as the
    record names them) and why each was waiting (an error's kind, or `rate_limit_reset`);
    nothing where none was left out."""
    if not skipped:
        return {}
    providers = [str(each.get("provider")) for each in skipped]
    reasons = [str(each.get("why")) for each in skipped]
    return {
        f"allama.{kind}.skipped": len(providers),
        f"allama.{kind}.skipped_providers": providers,
        f"allama.{kind}.skipped_reasons": reasons,
    }


class _PassedOver:
    """The providers a failover inside an extraction passed over, which it has no span to
    say: the first call span started in its call says so instead, as its attempts' spans
    say which attempt each is; one only, so that the extraction's call spans count each
    provider passed over once. A failover inside another's attempt hands on the outer's,
    where no call took them yet, with its own after them."""

    __slots__ = ("_kind", "_outer", "_skipped")

    def __init__(
        self, kind: str, skipped: Sequence[Mapping[str, Any]], outer: _PassedOver | None
    ) -> None:
        self._kind = kind
        self._skipped: Sequence[Mapping[str, Any]] = skipped
        self._outer = outer

    def _taken(self) -> list[Mapping[str, Any]]:
        skipped, self._skipped = self._skipped, ()
        outer = [] if self._outer is None else self._outer._taken()
        return [*outer, *skipped]

    def take(self) -> dict[str, Any]:
        """The attributes, the first time; nothing after."""
        return _skipped_attributes(self._kind, self._taken())


_PASSED_OVER: ContextVar[_PassedOver | None] = ContextVar("allama_passed_over", default=None)
"""What a failover inside an extraction passed over, for the first call span started in
its call (`_PassedOver`)."""


class _Scopes:
    """Both scopes, entered in order and left in reverse."""

    __slots__ = ("_first", "_second")

    def __init__(self, first: _Scope[Any], second: _Scope[Any]) -> None:
        self._first = first
        self._second = second

    def __enter__(self) -> None:
        self._first.__enter__()
        self._second.__enter__()

    def __exit__(self, *exc: object) -> None:
        try:
            self._second.__exit__(*exc)
        finally:
            self._first.__exit__(*exc)


class WrapperSpan:
    """A wrapper's call (a retry's, a failover's) as its spans show it. Outside an
    extraction, a span of its own (`span`) holds its attempts' spans, one trace for the
    call, and says how many were made and, for a retry that gave up, why; inside one, its
    attempts are the extraction's calls, as before, with no span between. Either way the
    span of each attempt says which it is. A failover's span says, too, which providers it
    passed over, waiting out a wait they asked for; inside an extraction, the span of the
    first call it sent after does (`_PassedOver`).

    A stream's ends as the stream opens: the attempts are over then, and the span of the
    call that answered lasts until the stream ends."""

    __slots__ = ("_context", "_key", "_outer", "_pending", "_skipped", "attempts", "kind", "span")

    def __init__(self, kind: str, span: Span | None, outer: Mapping[str, int] | None) -> None:
        self.kind = kind
        self.span = span
        self._key = f"allama.{kind}.attempt"
        # Without a span of its own, its attempts' spans say the outer wrappers' numbers too.
        self._outer = outer if span is None else None
        self._context: object | None = None
        self.attempts = 0
        self._skipped: Sequence[Mapping[str, Any]] = ()
        self._pending: _PassedOver | None = None

    def __enter__(self) -> WrapperSpan:
        if self.span is not None:
            with contextlib.suppress(Exception):
                from opentelemetry import context

                self._context = context.attach(_otel().set_span_in_context(self.span))
        return self

    def __exit__(self, exc_type: Any, exc: BaseException | None, tb: Any) -> None:
        if self._context is not None:
            from opentelemetry import context

            with contextlib.suppress(Exception):
                context.detach(self._context)  # type: ignore[arg-type]
            self._context = None
        if self.span is not None:
            self._end(exc)

    def attempt(self, number: int) -> contextlib.AbstractContextManager[Any]:
        """What attempt `number` runs in: its span says which it is."""
        self.attempts = number
        outer = self._outer
        numbers = {self._key: number} if outer is None else {**outer, self._key: number}
        scope = _Scope(_ATTEMPT, numbers)
        if self._pending is None:
            return scope
        return _Scopes(scope, _Scope(_PASSED_OVER, self._pending))

    def passed_over(self, skipped: Sequence[Mapping[str, Any]]) -> None:
        """The providers a failover left out, each waiting out a wait it asked for (its
        record's `skipped`): not attempts, so no span of theirs says so; this one does,
        or, with no span of its own (inside an extraction), the first call span started
        in its attempts. Called before the first attempt, in the call's context."""
        if self.span is not None:
            self._skipped = skipped
        elif skipped:
            self._pending = _PassedOver(self.kind, skipped, _PASSED_OVER.get())

    def _end(self, error: BaseException | None) -> None:
        assert self.span is not None
        try:
            found: dict[str, Any] = {f"allama.{self.kind}.attempts": self.attempts}
            found.update(_skipped_attributes(self.kind, self._skipped))
            if error is not None:
                # The record the wrapper put on the error it raised: why no further attempt.
                context = getattr(error, "context", None)
                metadata = getattr(context, "metadata", None)
                record = (
                    metadata.get(f"allama.{self.kind}") if isinstance(metadata, Mapping) else None
                )
                why = record.get("gave_up") if isinstance(record, Mapping) else None
                if isinstance(why, str):
                    found[f"allama.{self.kind}.gave_up"] = why
                _set_error(self.span, error)
            self.span.set_attributes(found)
        except Exception:
            pass
        finally:
            end_span(self.span)


def attempt(wrapping: WrapperSpan | None, number: int) -> contextlib.AbstractContextManager[Any]:
    """What a wrapper's attempt `number` runs in (nothing where it is not traced)."""
    return _NO_SCOPE if wrapping is None else wrapping.attempt(number)


def start_wrapper(kind: str, wrapper: object, request: ChatRequest) -> WrapperSpan | None:
    """How a wrapper's call (`kind`: `retry`, `failover`) is traced: inside an extraction,
    by numbering its attempts; outside, by a span of its own, from the tracer of the first
    provider it sends through that has one, else the global one; `None` when tracing is
    off."""
    if _ENCLOSING.get() is not None:
        return WrapperSpan(kind, None, _ATTEMPT.get())
    if _provider_env is False and _TRACE_MODULE not in sys.modules:
        return None  # no tracer provider can have been made: the common case, at once
    try:
        active = resolve(_tracing_of(wrapper))
        if active is None:
            return None
        trace = _otel()
        attributes: dict[str, Any] = {"gen_ai.request.model": request.model}
        numbers = _ATTEMPT.get()
        if numbers:  # an attempt of a wrapper around this one
            attributes.update(numbers)
        span = active.tracer.start_span(
            f"{kind} {request.model}", kind=trace.SpanKind.INTERNAL, attributes=attributes
        )
    except Exception:  # tracing never fails a call
        return None
    return WrapperSpan(kind, span, None)


def _tracing_of(wrapper: object) -> Tracing | None:
    """The tracing of the first provider `wrapper` sends through that has a tracer provider
    of its own (`tracer_provider=` on `allama.provider(...)`)."""
    from allama.wrappers._lifetime import sent_through

    for provider in sent_through(wrapper):
        own = getattr(provider, "_tracing", None)
        if isinstance(own, Tracing) and own.tracer_provider is not None:
            return own
    return None


# Extractions


def type_name(tp: Any) -> str:
    """A short, stable name for a type: `Person`, `list[Person]`, `Literal`, `A | None`."""
    if isinstance(tp, type) and not typing.get_args(tp):
        return tp.__name__
    origin = typing.get_origin(tp)
    if origin is typing.Literal:
        return "Literal"
    args = typing.get_args(tp)
    if origin is typing.Annotated:
        return type_name(args[0])
    if origin is typing.Union or origin is types.UnionType:
        return " | ".join("None" if arg is type(None) else type_name(arg) for arg in args)
    if origin is not None:
        name = getattr(origin, "__name__", None) or str(origin)
        return f"{name}[{', '.join(type_name(arg) for arg in args)}]" if args else name
    return getattr(tp, "__name__", None) or type(tp).__name__


Step = TypeVar("Step")
Outcome = TypeVar("Outcome")
Result = TypeVar("Result")


class ExtractionSpan:
    """The span of one extraction (or decision), parent of the calls it makes."""

    __slots__ = (
        "__weakref__",
        "_context",
        "_enclosing",
        "_finalizer",
        "active",
        "asked",
        "ended",
        "reads_asked",
        "retries",
        "span",
    )

    def __init__(self, span: Span, active: _Active, reads_asked: bool = False) -> None:
        self.span = span
        self.active = active
        self.retries = 0
        self.ended = False
        # A decision's `gen_ai.output.type` is what its last request asked for (text for a
        # choice, JSON for an enum), read from its requests; an extraction's is JSON from
        # its start.
        self.reads_asked = reads_asked
        self.asked: str | None = None
        self._context: object | None = None
        self._enclosing: Token[_Active | None] | None = None
        self._finalizer: weakref.finalize[Any, Any] | None = None

    # While the calls are made

    def __enter__(self) -> ExtractionSpan:
        from opentelemetry import context

        self._context = context.attach(_otel().set_span_in_context(self.span))
        self._enclosing = _ENCLOSING.set(self.active)
        return self

    def __exit__(self, exc_type: Any, exc: BaseException | None, tb: Any) -> None:
        from opentelemetry import context

        if self._enclosing is not None:
            _ENCLOSING.reset(self._enclosing)
            self._enclosing = None
        if self._context is not None:
            context.detach(self._context)  # type: ignore[arg-type]
            self._context = None
        if exc is not None:
            self.fail(exc)

    def steps(self, steps: Generator[Step, Outcome, Result]) -> Generator[Step, Outcome, Result]:
        """The engine's steps, counting the retries: a request sent after a response, or
        after an answer the provider refused itself (`RejectedOutputError`), which the
        extraction asks again as it would a response."""
        from allama.errors import RejectedOutputError
        from allama.types import ChatResponse

        try:
            step = next(steps)
            while True:
                self._asking(step)
                try:
                    outcome = yield step
                except BaseException as raised:  # passed in, for the steps to keep their record on
                    step = steps.throw(raised)
                    continue
                answered = _answered_by(outcome)
                if answered:
                    # The provider that answered (a response, or a stream opened): a
                    # failover's, not the failover. (A span that raises loses its
                    # attribute, not the paid response.)
                    with contextlib.suppress(Exception):
                        name = genai_provider_name(answered)
                        self.span.set_attribute("gen_ai.provider.name", name)
                step = steps.send(outcome)
                if isinstance(outcome, ChatResponse) or (
                    isinstance(outcome, RejectedOutputError) and outcome.failed_output is not None
                ):
                    self.retries += 1
        except StopIteration as done:
            result: Result = done.value
            return result

    def _asking(self, step: object) -> None:
        from allama.types import ChatRequest

        if self.reads_asked and isinstance(step, ChatRequest):
            self.asked = output_type(step)

    # Its end

    def _record(
        self, metadata: ExtractionMetadata | None, found: dict[str, Any] | None = None
    ) -> None:
        found = {} if found is None else found
        found["allama.extract.retries"] = self.retries
        if self.asked is not None:
            found["gen_ai.output.type"] = self.asked
        if metadata is not None:
            found["allama.extract.mode"] = metadata.mode.value
            found["allama.extract.passes"] = metadata.passes
            if metadata.passes:  # what a pass measured; before any, nothing was
                found["allama.extract.enforcement"] = metadata.enforcement.value
            found["allama.extract.auto_fallback"] = metadata.auto_fallback is not None
            found["allama.extract.degradations"] = len(metadata.degradations)
            found["allama.extract.repaired"] = metadata.repaired
            if metadata.root_wrapped:
                found["allama.extract.root_wrapped"] = True
            _usage(found, metadata.usage, "allama.extract.usage.")
            if metadata.usage is not None or metadata.passes:
                priced = metadata.priced()
                if isinstance(priced, str):
                    found["allama.cost.missing"] = priced
                else:
                    found["allama.cost.total"] = float(priced.total)
                    found["allama.cost.currency"] = priced.currency
        self.span.set_attributes(found)

    def _end(self) -> None:
        self.ended = True
        if self._finalizer is not None:
            self._finalizer.detach()
            self._finalizer = None
        end_span(self.span)

    def succeed(self, metadata: ExtractionMetadata) -> None:
        if self.ended:
            return
        try:
            self._record(metadata)
        except Exception:
            pass
        finally:
            self._end()

    def fail(self, error: BaseException, metadata: ExtractionMetadata | None = None) -> None:
        if self.ended:
            return
        try:
            if metadata is None:
                metadata = _record_of(error)
            self._record(metadata)
            failed_at = _failed_at(error) or self.active.called
            if failed_at is not None:
                # The one whose error ended it (a failover's last), as the error and its
                # call's span say, not the failover; where the error names none (a
                # cancellation, an exception not allama's), the one last called.
                with contextlib.suppress(Exception):
                    self.span.set_attribute("gen_ai.provider.name", genai_provider_name(failed_at))
            _set_error(self.span, error)
        except Exception:
            pass
        finally:
            self._end()

    def closed(self, metadata: ExtractionMetadata, early: bool) -> None:
        """A stream closed (or dropped) without its value read: `closed_early` where its
        response had not ended, else ended with the pass it made (`succeed`)."""
        if early:
            self.closed_early(metadata)
        else:
            self.succeed(metadata)

    def closed_early(self, metadata: ExtractionMetadata | None) -> None:
        """A stream closed (or dropped) before its response ended: ended, not failed. One
        closed after that end, its value not read, is not early: it ends with the pass it
        made (`succeed`)."""
        if self.ended:
            return
        try:
            self._record(metadata, {"allama.stream.closed_early": True})
        except Exception:
            pass
        finally:
            self._end()

    def watch(
        self, stream: object, metadata: Callable[[], tuple[ExtractionMetadata, bool]]
    ) -> None:
        """End the span when the extraction stream is dropped without being closed:
        `metadata` gives its record then, and whether it was dropped before its end."""
        self._finalizer = weakref.finalize(stream, _dropped_extraction, self, metadata)


def _dropped_extraction(
    span: ExtractionSpan, metadata: Callable[[], tuple[ExtractionMetadata, bool]]
) -> None:
    span.closed(*metadata())


def _answered_by(outcome: object) -> str | None:
    """The provider a step's outcome came from: a response's, or a stream's as it opened."""
    if isinstance(outcome, BaseException):
        return None
    collector = getattr(outcome, "collector", None)
    name = getattr(outcome if collector is None else collector, "provider", None)
    return name if isinstance(name, str) else None


def _failed_at(error: BaseException) -> str | None:
    """The provider an error of allama's names, where it names one."""
    from allama.errors import Error

    provider = error.provider if isinstance(error, Error) else None
    return provider if isinstance(provider, str) and provider else None


def _record_of(error: BaseException) -> ExtractionMetadata | None:
    from allama.extract._metadata import ExtractionMetadata

    return ExtractionMetadata.from_error(error)


def start_extraction(
    own: Tracing | None, operation: str, provider: str, tp: Any, request: ChatRequest
) -> ExtractionSpan | None:
    """The span of an extraction (`operation`: `extract` or `decide`), started; `None` when
    tracing is off."""
    if own is None and _provider_env is False and _TRACE_MODULE not in sys.modules:
        return None
    active = resolve(own, inherit=False)
    if active is None:
        return None
    try:
        trace = _otel()
        name = type_name(tp)
        attributes: dict[str, Any] = {
            "gen_ai.operation.name": operation,
            "gen_ai.provider.name": genai_provider_name(provider),
            "gen_ai.request.model": request.model,
            "allama.extract.type": name,
        }
        reads_asked = operation == "decide"
        if not reads_asked:  # an extraction asks for JSON, in whichever mode
            attributes["gen_ai.output.type"] = "json"
        span = active.tracer.start_span(
            f"{operation} {name}", kind=trace.SpanKind.INTERNAL, attributes=attributes
        )
    except Exception:  # tracing never fails an extraction
        return None
    if active.capture:
        with contextlib.suppress(Exception):  # (a span that raises loses its attribute)
            if span.is_recording():
                span.set_attribute("gen_ai.input.messages", input_messages(request))
    return ExtractionSpan(span, active, reads_asked)


# Batch runs

_BATCH_COUNTS = (
    "total",
    "done",
    "failed",
    "resumed",
    "duplicates",
    "not_started",
    "pending",
    "abandoned",
    "unkept",
    "elsewhere",
    "in_jobs",
    "abandoned_calls",
)
"""The summary's counts on the run's span: each input is in one of them but the last, of
`abandoned` those with a call under way (those after `duplicates` only when not 0)."""
_ALWAYS_COUNTED = frozenset(("total", "done", "failed", "resumed", "duplicates"))


def _left(error: BaseException) -> bool:
    """How a run the caller left ends (`close()`, leaving the loop, its task cancelled): no
    error of the run's; `allama.batch.stopped` says it was left, `abandoned` what it left."""
    import asyncio  # (loaded: a batch run's)

    return isinstance(error, (GeneratorExit, asyncio.CancelledError))


def end_span(span: Span) -> None:
    """End `span`; a span processor that fails at it fails neither the call nor the run."""
    with contextlib.suppress(Exception):
        span.end()


class BatchSpans:
    """The run span of a batch, and one span per input under it."""

    __slots__ = ("active", "span", "type")

    def __init__(self, span: Span, active: _Active, type: str) -> None:
        self.span = span
        self.active = active
        self.type = type

    def end(self, summary: Any, error: BaseException | None) -> None:
        span = self.span
        try:
            for key in _BATCH_COUNTS:
                value = getattr(summary, key, None)
                if isinstance(value, int) and (value or key in _ALWAYS_COUNTED):
                    span.set_attribute(f"allama.batch.{key}", value)
            for name, value in _batch_cost(summary).items():
                span.set_attribute(name, value)
            for key in ("stopped", "budget_reached", "schema_changed"):
                said = getattr(summary, key, None)
                if said:
                    span.set_attribute(f"allama.batch.{key}", str(said))
            if error is not None and not _left(error):
                _set_error(span, error)
        except Exception:
            pass
        finally:
            end_span(span)

    def start_input(self, index: int) -> Span | None:
        try:
            trace = _otel()
            return self.active.tracer.start_span(
                f"batch.input {self.type}",
                # The run's child, wherever its result is made (a copy's, in the task of
                # the input it repeats).
                context=trace.set_span_in_context(self.span),
                kind=trace.SpanKind.INTERNAL,
                attributes={"allama.batch.index": index},
            )
        except Exception:
            return None


def _batch_cost(summary: Any) -> dict[str, Any]:
    """The run's cost as its summary knows it: a total only where some inputs' costs are
    known, and, where some are not, how many and why (a sum that leaves them out is no
    total of the run, and none known is no cost of 0)."""
    attributes: dict[str, Any] = {}
    unknown = getattr(summary, "cost_unknown", 0)
    priced = getattr(summary, "priced", 0)
    cost = getattr(summary, "cost", None)
    if cost is not None and (priced or not unknown):
        attributes["allama.cost.total"] = float(cost)
        attributes["allama.cost.currency"] = "USD"
        earlier = getattr(summary, "cost_earlier", None)
        if earlier:  # (of the total: what earlier runs of the ledger paid)
            attributes["allama.cost.earlier_runs"] = float(earlier)
    if unknown:
        attributes["allama.cost.unknown_inputs"] = unknown
        missing = getattr(summary, "cost_missing", None)
        if missing:
            attributes["allama.cost.missing"] = str(missing)
    return attributes


def start_batch(
    own: Tracing | None, provider: str, tp: Any, model: str | None
) -> BatchSpans | None:
    active = resolve(own, inherit=False)
    if active is None:
        return None
    try:
        name = type_name(tp)
        attributes: dict[str, Any] = {
            "gen_ai.provider.name": genai_provider_name(provider),
            "allama.extract.type": name,
        }
        if model:
            attributes["gen_ai.request.model"] = model
        span = active.tracer.start_span(
            f"batch {name}", kind=_otel().SpanKind.INTERNAL, attributes=attributes
        )
    except Exception:
        return None
    return BatchSpans(span, active, name)


_INPUT: ContextVar[tuple[Span, int] | None] = ContextVar("allama_batch_input", default=None)
"""The span of the input whose work goes on here, and the input's index."""


def in_span(span: Span, index: int | None = None) -> tuple[object, Token[Any]]:
    """Make `span` the current one (for the work started under it); an input's span
    (`index`: the input's) is the one that input's result is recorded on."""
    from opentelemetry import context

    return context.attach(_otel().set_span_in_context(span)), _INPUT.set(
        None if index is None else (span, index)
    )


def out_of_span(tokens: tuple[object, Token[Any]]) -> None:
    from opentelemetry import context

    _INPUT.reset(tokens[1])
    context.detach(tokens[0])  # type: ignore[arg-type]


def input_result(result: Any, spans: BatchSpans | None) -> None:
    """Record an input's outcome on its span; one the run ends outside a span of its own
    (read ahead and not started, answered by a provider batch job, a copy of one that
    was) gets one now."""
    current = _INPUT.get()
    if current is None or current[1] != result.index:
        if spans is None:
            return
        span = spans.start_input(result.index)
        if span is None:
            return
        try:
            _record_input(span, result, spans.active.capture)
        finally:
            end_span(span)
        return
    _record_input(current[0], result, spans is not None and spans.active.capture)


def abandoned(span: Span) -> None:
    """An input left without a result by a run closed before its end."""
    with contextlib.suppress(Exception):
        span.set_attribute("allama.batch.abandoned", True)


_NOT_ENDED_HERE = frozenset({"not_started", "in_flight_elsewhere", "in_provider_job"})
"""The outcomes of inputs a batch run left for later (its `_NOT_ENDED_HERE`): no failure."""


def _record_input(span: Span, result: Any, capture: bool) -> None:
    try:
        span.set_attribute("allama.batch.label", str(result.label))
        if capture:  # a hash of the request: whoever knows the template can test guesses
            span.set_attribute("allama.batch.key", str(result.key))
        span.set_attribute("allama.batch.attempts", int(result.attempts))
        span.set_attribute("allama.batch.resumed", bool(result.resumed))
        if result.duplicate:
            span.set_attribute("allama.batch.duplicate", True)
        failure = result.failure
        if failure is not None and failure.kind in _NOT_ENDED_HERE:
            # Not ended by this run (left for a later one, or to its provider's job): the
            # run counts it apart from its failures, and so does its span.
            span.set_attribute("allama.batch.outcome", str(failure.kind))
        elif failure is not None:
            trace = _otel()
            span.set_attribute("error.type", str(failure.kind))
            span.set_status(trace.Status(trace.StatusCode.ERROR, str(failure.kind)))
        metadata = result.metadata
        if metadata is not None:
            span.set_attribute("allama.extract.passes", metadata.passes)
            if metadata.passes:
                span.set_attribute("allama.extract.enforcement", metadata.enforcement.value)
        span.set_attributes(_input_paid(result))
    except Exception:
        pass


def _input_paid(result: Any) -> dict[str, Any]:
    """What an input's attempts paid (`spent` and its record), as the run's summary counts
    it: the tokens, under the extraction span's names, and the cost, or why it is not
    known; so the inputs' costs add up to the run's. Nothing for a copy (counted with the
    first) or one in a provider job (counted when a run collects it)."""
    from allama.batch._run import IN_PROVIDER_JOB, _cost_of, _paid_any

    failure = result.failure
    if result.duplicate or (failure is not None and failure.kind == IN_PROVIDER_JOB):
        return {}
    records = [*result.spent, *([result.metadata] if result.metadata is not None else [])]
    if not records:
        return {}
    found: dict[str, Any] = {}
    usage = None
    for record in records:
        if record.usage is not None:
            usage = record.usage if usage is None else usage.of_calls(record.usage)
    _usage(found, usage, "allama.extract.usage.")
    cost, missing = _cost_of(records)
    if cost is not None:
        found["allama.cost.total"] = float(cost)
        found["allama.cost.currency"] = "USD"
    elif missing is not None and _paid_any(records):
        found["allama.cost.missing"] = missing
    return found
