"""Providers that answer from a script, for testing code that calls a provider."""

from __future__ import annotations

import contextvars
import copy
import inspect
import reprlib
import threading
import typing
from collections import deque
from collections.abc import Callable, Collection, Iterable, Iterator, Sequence
from typing import Any, Self, TypeVar

from pydantic import JsonValue

from allama._degradations import Degradations
from allama._not_a_request import not_a_request
from allama.adapters._answered import extra_result, extra_words, unanswered_calls, unanswered_words
from allama.adapters._http import HttpRequest
from allama.adapters._tool_ids import repeated_tool_names
from allama.errors import Error, ErrorContext, InvalidRequestError
from allama.mock._builder import ChatResponseBuilder
from allama.mock._enforcement import beyond_dialects, marked, schema_key
from allama.mock._events import response_events
from allama.mock._structured import MockScriptError, Structured, unoffered_tool
from allama.schema._errors import SchemaError
from allama.schema._walk import check_json, preflight
from allama.stream import AsyncChatStream, ChatStream, aiter_events, with_paid
from allama.types import (
    CapabilitySupport,
    ChatCapability,
    ChatRequest,
    ChatResponse,
    ChatValidation,
    DocumentPart,
    ImagePart,
    RequestField,
    StreamEvent,
    ToolDefinition,
    Usage,
    UserMessage,
    ValidationCoverage,
    Warning,
    WarningEvent,
)
from allama.types._data_urls import data_url, inline_data, inline_document

__all__ = [
    "FunctionProvider",
    "MockProvider",
    "MockScriptError",
    "MockScriptExhausted",
    "MockStreamingProvider",
    "SetupError",
    "Structured",
]


class MockScriptExhausted(MockScriptError):
    """A scripted provider was called more often than its script has answers for."""


_K = TypeVar("_K")
_V = TypeVar("_V")

_KEPT = 8
"""Answers a mock keeps by their schema (a plan and its call ask for the same one)."""

_BODY_OPTION = "mock"
"""The namespace of a body option giving tools of its own, as a real adapter reads its own
(`Degradations.choice_without_tools`): a mock sends no body, so none gives any."""

_REFUSED: tuple[tuple[ChatCapability, RequestField, str, str], ...] = (
    (
        ChatCapability.STRUCTURED_OUTPUT,
        RequestField.RESPONSE_FORMAT,
        "has no JSON Schema output",
        "the answer is held to no schema",
    ),
    (
        ChatCapability.CHOICE_OUTPUT,
        RequestField.RESPONSE_FORMAT,
        "has no plain-text choice output",
        "the answer was not constrained to the options",
    ),
    (
        ChatCapability.TOOL_CALLS,
        RequestField.TOOLS,
        "has no function calling",
        "no tool's arguments are held to its schema",
    ),
    (
        ChatCapability.FORCED_TOOL_CHOICE,
        RequestField.TOOL_CHOICE,
        "cannot be forced to call a tool",
        "the choice is taken as `auto`",
    ),
)
"""What a capability answered `UNSUPPORTED` refuses, as a real adapter refuses the field
its model lacks: the capability, the field, why, and what stands in for it."""


_DRY_RUN: contextvars.ContextVar[bool] = contextvars.ContextVar(
    "allama_mock_dry_run", default=False
)
"""Set while a mock dry-runs a request (`validate_chat_request`): what a real provider
refuses only as it writes the body (`_Recorder._refuse_unwritable`) is not refused there,
as a real adapter's dry run, which writes none, does not refuse it."""


class _Recorder:
    """Capability answers and the record of requests, shared by the mock providers; and what
    a real adapter says of a request before sending it, said here as it is said there."""

    _WHO = "a scripted provider"
    """How the warnings on what the answer is not held to name the provider."""

    def __init__(self, name: str) -> None:
        self._name = name
        # A script answers in whatever shape it was given, so any schema root is taken.
        self._capabilities: dict[ChatCapability, CapabilitySupport] = {
            ChatCapability.RESPONSE_SCHEMA_ANY_ROOT: CapabilitySupport.SUPPORTED,
            ChatCapability.TOOL_SCHEMA_ANY_ROOT: CapabilitySupport.SUPPORTED,
        }
        self._requests: list[ChatRequest] = []
        self._lock = threading.Lock()
        self._beyond: dict[tuple[str, RequestField], tuple[Warning, ...]] = {}
        self._cache_lock = threading.Lock()

    @property
    def name(self) -> str:
        return self._name

    def with_provider_name(self, name: str) -> Self:
        self._name = name
        self._beyond.clear()  # its warnings name the provider
        return self

    def with_chat_capability(self, capability: ChatCapability, support: CapabilitySupport) -> Self:
        """Answer `support` for `capability` (`UNKNOWN` until set, but for the two schema
        root questions, `SUPPORTED`: a script answers in whatever shape it was given). One
        answered `UNSUPPORTED` refuses what a real adapter refuses for a model without it
        (a response format's schema, a choice format, tools, a forced tool choice): said
        in a warning on its field, or raised under `UnsupportedPolicy.ERROR`, as there."""
        self._capabilities[capability] = support
        return self

    def with_supported_chat_capabilities(self, capabilities: Iterable[ChatCapability]) -> Self:
        for capability in capabilities:
            self._capabilities[capability] = CapabilitySupport.SUPPORTED
        return self

    def chat_capability(self, model: str, capability: ChatCapability) -> CapabilitySupport:
        return self._capabilities.get(capability, CapabilitySupport.UNKNOWN)

    def validate_chat_request(
        self, request: ChatRequest, *, stream: bool = False
    ) -> ChatValidation:
        """What the call would report (`_degradations`); what it refuses before answering
        (`_refuse_unsendable`) is refused here too, as a provider's dry run refuses what
        its encoding does. The warnings are all the call's own (those of the request, worked
        out here as there), so the coverage is `ENCODING`, as a real adapter's dry run is:
        a floor (`min_enforcement`) is then checked before anything is answered, as a real
        provider checks it before sending."""
        if not isinstance(request, ChatRequest):
            raise not_a_request(request)
        dry_run = _DRY_RUN.set(True)
        try:
            self._refuse_unsendable(request)
        finally:
            _DRY_RUN.reset(dry_run)
        validation = ChatValidation(coverage=ValidationCoverage.ENCODING)
        for warning in self._degradations(request):
            validation = validation.with_warning(warning)
        return validation

    def _invalid(self, message: str) -> InvalidRequestError:
        return InvalidRequestError(message).mark_authored().with_provider(self.name)

    def _refuse_unsendable(self, request: ChatRequest) -> None:
        """Refuse what the provider refuses before sending (`_refuse_unsendable_anywhere`)."""
        self._refuse_unsendable_anywhere(request)

    def _refuse_unsendable_anywhere(self, request: ChatRequest) -> None:
        """Refuse what every provider refuses before sending (a bug in the code that builds
        the request, which a test should see): no messages, a response format's schema no
        adapter can read (a keyword of the wrong kind, a `$ref` to nothing, or a value no
        JSON holds: a `datetime` a model's `json_schema_extra` keeps), a tool's no JSON
        holds, a tool choice naming a tool the request does not offer, tools that repeat a
        name, an image or a document whose data URL holds no base64 its encoders read, and
        text UTF-8 cannot carry (half of a character), each refused as a provider's encoding
        refuses it, in its words (text UTF-8 cannot carry by the call alone: a real adapter's
        dry run writes no body). And what the Chat Completions adapters refuse of a
        conversation, the strictest reading of the major providers' (`_refuse_unanswered`)."""
        if not request.messages:
            raise self._invalid(
                f"`{self.name}` needs at least one message, as every provider does, and the "
                "request has none to send"
            )
        self._refuse_unanswered(request)
        fmt = request.response_format
        if fmt is not None and fmt.json_schema is not None:
            # Every adapter reads a response format's schema (its dialect's rewrite); a
            # tool's goes as it is where it is not strict.
            subject = f"the response format `{fmt.name or 'response'}`"
            self._refuse_unreadable(fmt.json_schema, subject, preflight)
        for tool in request.tools:
            self._refuse_unreadable(tool.parameters, f"tool `{tool.name}`", check_json)
        unoffered = unoffered_tool(request)
        if unoffered is not None:
            raise self._invalid(unoffered)
        repeated = repeated_tool_names(request.tools, f"`{self.name}`")
        if repeated is not None:  # a call names its tool: which of two was called?
            raise self._invalid(repeated)
        self._refuse_undecodable(request)
        if not _DRY_RUN.get():
            self._refuse_unwritable(request)

    def _refuse_undecodable(self, request: ChatRequest) -> None:
        """Refuse an image or a document given in a data URL its encoders cannot read (what
        is marked base64 is not; an image's that is not marked base64), as every adapter
        that sends the part refuses it (`inline_data`), in their words."""
        for message in request.messages:
            if not isinstance(message, UserMessage):
                continue
            for part in message.content:
                if not isinstance(part, ImagePart | DocumentPart) or part.url is None:
                    continue
                inline = data_url(part.url)
                if inline is None:  # a URL, not its bytes: nothing to read here
                    continue
                found = (
                    inline_data(inline, "image")
                    if isinstance(part, ImagePart)
                    else inline_document(inline, part.media_type)
                )
                if isinstance(found, str):
                    raise self._invalid(found)

    def _refuse_unwritable(self, request: ChatRequest) -> None:
        """Refuse a request whose body could not be written as JSON (text holding half of a
        character, which UTF-8 cannot carry), as every HTTP provider refuses it as it writes
        the body, before sending, in its words (`HttpRequest.content`): the request as JSON
        holds the body's text, every string of it."""
        try:
            _ = HttpRequest("POST", "", {}, request.model_dump(mode="json")).content
        except InvalidRequestError as error:
            raise error.with_provider(self.name) from None

    def _refuse_unanswered(self, request: ChatRequest) -> None:
        """Refuse a tool call left without its result in the tool messages right after its
        turn, and a result beyond its turn's calls (a second one for a call, or one for an
        earlier turn's), in the words of the OpenAI family's encoder: OpenAI, Azure OpenAI,
        DeepSeek and Mistral refuse both before sending, Anthropic and Gemini a second
        result and a call their next user turn leaves unanswered, so that code a mock takes
        is not refused by the provider it is written for."""
        display = f"`{self.name}`"
        found = unanswered_calls(request.messages)
        if found is not None:
            raise self._invalid(unanswered_words(found, display))
        extra = extra_result(request.messages)
        if extra is not None:
            raise self._invalid(extra_words(extra, display))

    def _refuse_unreadable(self, schema: Any, subject: str, check: Callable[[Any], Any]) -> None:
        try:
            check(schema)
        except SchemaError as error:
            raise self._invalid(f"{subject} has a schema allama cannot read: {error}") from error

    def _degradations(self, request: ChatRequest) -> tuple[Warning, ...]:
        """What a real adapter would warn of, as it warns: a field a capability answered
        `UNSUPPORTED` refuses (raised under `UnsupportedPolicy.ERROR`), a tool choice among
        no tools (not sent), and what the answered schema is not held to (`_schema_warnings`).
        Asked after `_refuse_unsendable`."""
        degradations = Degradations.for_request(self.name, request)
        for capability, field, why, instead in _REFUSED:
            if self._refuses(request, capability):
                degradations.refuse(
                    field,
                    f"`{request.model}` on {self.name} {why} (`{capability}` is answered "
                    "unsupported)",
                    instead=instead,
                )
        degradations.choice_without_tools(request, _BODY_OPTION)
        answered = self._answered_schema(request)
        if answered is None:
            return tuple(degradations.warnings)
        return (*degradations.warnings, *self._schema_warnings(*answered))

    def _refuses(self, request: ChatRequest, capability: ChatCapability) -> bool:
        """Whether the request asks for what `capability`, answered `UNSUPPORTED`, refuses."""
        if self.chat_capability(request.model, capability) is not CapabilitySupport.UNSUPPORTED:
            return False
        fmt = request.response_format
        if capability is ChatCapability.STRUCTURED_OUTPUT:
            return fmt is not None and fmt.json_schema is not None
        if capability is ChatCapability.CHOICE_OUTPUT:
            return fmt is not None and fmt.options is not None
        if capability is ChatCapability.TOOL_CALLS:
            return bool(request.tools)
        # A choice among tools the model cannot call at all is the tools' refusal.
        choice = request.tool_choice
        return (
            bool(request.tools)
            and choice is not None
            and choice.mode in ("required", "tool")
            and not self._refuses(request, ChatCapability.TOOL_CALLS)
        )

    def _answered_schema(self, request: ChatRequest) -> tuple[object, RequestField] | None:
        """The schema the answer is held to and the field holding it: the forced tool's
        parameters, or the response format's schema; `None` where there is none."""
        tool = self._forced_tool(request)
        if tool is not None:
            return self._tool_schema(request, tool), RequestField.TOOLS
        fmt = request.response_format
        if fmt is None or fmt.options is not None or fmt.json_schema is None:
            return None
        return fmt.json_schema, RequestField.RESPONSE_FORMAT

    def _forced_tool(self, request: ChatRequest) -> ToolDefinition | None:
        """The tool the request forces a call to (the first under `required`), if it
        offers tools; a choice among none is not sent (`_degradations`)."""
        unoffered = unoffered_tool(request)
        if unoffered is not None:
            raise self._invalid(unoffered)
        choice = request.tool_choice
        if choice is None or not request.tools:
            return None
        if choice.mode == "required":
            return request.tools[0]
        if choice.mode == "tool":
            return next(tool for tool in request.tools if tool.name == choice.name)
        return None

    def _tool_schema(self, request: ChatRequest, tool: ToolDefinition) -> object:
        """The schema a call to `tool` is held to: its parameters."""
        return tool.parameters

    def _schema_warnings(self, schema: object, field: RequestField) -> tuple[Warning, ...]:
        """What the answer to `schema` is not held to, as `approximated` warnings: each mark
        in it of a check no provider enforces, and elsewhere what no provider's dialect
        enforces exactly (`allama.mock._enforcement`)."""
        warnings, said = marked(schema, field, self.name, self._WHO)
        return warnings + self._beyond_dialects(schema, field, said)

    def _beyond_dialects(
        self, schema: object, field: RequestField, said: list[str]
    ) -> tuple[Warning, ...]:
        return self._kept(
            self._beyond,
            schema_key(schema, field),
            lambda: beyond_dialects(schema, field, said, self.name, self._WHO),
        )

    def _kept(self, store: dict[_K, _V], key: _K | None, make: Callable[[], _V]) -> _V:
        """`make()`, kept in `store` under `key` (the last few: a plan and its call ask for
        the same), or not kept where the schema has no key."""
        if key is not None:
            try:
                return store[key]
            except KeyError:
                pass
        made = make()
        if key is not None:
            with self._cache_lock:
                while len(store) >= _KEPT:
                    del store[next(iter(store))]
                store[key] = made
        return made

    def _warned(self, response: ChatResponse, warnings: tuple[Warning, ...]) -> ChatResponse:
        """`response` with `warnings` before its own, as a provider's response carries its
        encoding's warnings; as it is where there are none."""
        if not warnings:
            return response
        own = tuple(warning for warning in response.warnings if warning not in warnings)
        return response._replaced({"warnings": (*warnings, *own)})

    def _record(self, request: ChatRequest) -> int:
        """Record `request`; its number among the calls (from 1), taken under the same lock,
        so that calls from many threads each get their own. What is no `ChatRequest` is
        refused as a provider refuses it, and not recorded (every call comes here first)."""
        if not isinstance(request, ChatRequest):
            raise not_a_request(request)
        with self._lock:
            self._requests.append(request)
            return len(self._requests)

    @property
    def requests(self) -> list[ChatRequest]:
        """Every request received, in order."""
        with self._lock:
            return list(self._requests)

    @property
    def last_request(self) -> ChatRequest | None:
        with self._lock:
            return self._requests[-1] if self._requests else None

    @property
    def call_count(self) -> int:
        """Calls made: `chat` and `chat_stream`, sync and async, including failed ones."""
        with self._lock:
            return len(self._requests)


MockItem = ChatResponse | Error | str | Structured

_EVENTS: tuple[type, ...] = typing.get_args(typing.get_args(StreamEvent)[0])
"""The event classes a scripted stream may hold."""


def _raised(error: Error, provider: str | None = None, model: str | None = None) -> Error:
    """A fresh raise of the scripted `error`: its class, message, fields and the context the
    script gave it, none of what allama wrote on an earlier raise (the usage paid, a retry's
    attempts, an extraction's record), so that an error scripted twice, or kept as a test
    module's constant, starts each call afresh. `provider` and `model` name it where it
    names none, as an HTTP provider's error names the request's model."""
    fresh = type(error).__new__(type(error), *error.args)
    fresh.__dict__.update(error.__dict__)
    if "__notes__" in error.__dict__:
        fresh.__notes__ = list(error.__notes__)
    context = error.context
    fresh.context = ErrorContext(
        provider=context.provider if context.provider is not None else provider,
        model=context.model if context.model is not None else model,
        request_id=context.request_id,
        status=context.status,
        body=context.body,
        metadata=copy.deepcopy(context.metadata),
    )
    if error.fallback_from is not None:
        fresh.fallback_from = _raised(error.fallback_from)
    fresh.__cause__ = error.__cause__
    fresh.__suppress_context__ = error.__suppress_context__
    return fresh


def _answered_as(response: ChatResponse, provider: str, model: str) -> ChatResponse:
    """`response` naming `provider` and the request's `model` where it names none, as a
    provider's adapter names a body that names no model after the request's (its usage is
    then priced, as a real answer's is)."""
    update: dict[str, str] = {}
    if response.provider is None:
        update["provider"] = provider
    if response.model is None:
        update["model"] = model
    return response.model_copy(update=update) if update else response


def _named(item: object) -> str:
    """A script item as an error names it: its type and a short repr."""
    return f"{type(item).__name__} {reprlib.repr(item)}"


def _not_allama(item: object) -> str:
    """Advice for a script holding an exception none of allama's (a provider raises only
    allama's: `RequestTimeoutError` for a timeout)."""
    if isinstance(item, BaseException):
        return " (a provider raises allama's errors only: script one of `allama.errors`)"
    return ""


class MockProvider(_Recorder):
    """Answers each call with the next item of its script: a response, text, an error, or
    a `Structured` value (answered in the form the request asks for). An error is raised
    as a fresh copy each call, as a provider raises a new one. An item of another kind (an
    exception none of allama's, say) raises `MockScriptError` naming it.

    Each answer carries before its own warnings what a provider's adapter would warn of
    (`_Recorder._degradations`), so that an extraction records the enforcement a provider's
    would: `approximate` for a schema no provider's dialect holds exactly (a `FutureDate`,
    a `set`), `not_enforced` where a capability set unsupported refuses the schema's field.

    >>> provider = MockProvider(["Hello", ChatResponseBuilder().text("again").build()])
    >>> provider.chat(ChatRequest("m").user("hi")).text()
    'Hello'
    >>> provider.call_count
    1
    """

    def __init__(self, script: Iterable[MockItem] = (), *, name: str = "mock") -> None:
        super().__init__(name)
        self._script: deque[MockItem] = deque(script)

    @classmethod
    def with_text(cls, text: str) -> MockProvider:
        return cls([text])

    @classmethod
    def with_response(cls, response: ChatResponse) -> MockProvider:
        return cls([response])

    @classmethod
    def with_error(cls, error: Error) -> MockProvider:
        return cls([error])

    @classmethod
    def with_structured(cls, value: Any, *, usage: Usage | None = None) -> MockProvider:
        """Answers with `value` in whichever form the extraction asks for (`Structured`)."""
        return cls([Structured(value, usage=usage)])

    @classmethod
    def with_tool_call(cls, id: str, name: str, arguments: JsonValue) -> MockProvider:
        return cls([ChatResponseBuilder().tool_call(id, name, arguments).build()])

    @classmethod
    def empty(cls) -> MockProvider:
        return cls()

    def then(self, item: MockItem) -> Self:
        """Add an answer at the end of the script."""
        self._script.append(item)
        return self

    def _next(self, request: ChatRequest) -> ChatResponse:
        number = self._record(request)
        self._refuse_unsendable(request)  # before the script: nothing was sent
        warnings = self._degradations(request)
        with self._lock:
            if not self._script:
                raise MockScriptExhausted(f"{self.name}: call {number} has no scripted answer")
            item = self._script.popleft()
        if not isinstance(item, ChatResponse | Error | str | Structured):
            raise MockScriptError(
                f"{self.name}: the answer to call {number} is a {_named(item)}, which no "
                f"script answers with: a ChatResponse, text, an allama Error or a Structured "
                f"value{_not_allama(item)}"
            )
        if isinstance(item, Error):
            raise _raised(item, self.name, request.model)
        if isinstance(item, Structured):
            response = _structured_answer(item, request, number, self.name)
        elif isinstance(item, str):
            response = ChatResponseBuilder().text(item).build()
        else:
            response = item
        return self._warned(_answered_as(response, self.name, request.model), warnings)

    def chat(self, request: ChatRequest) -> ChatResponse:
        return self._next(request)

    async def achat(self, request: ChatRequest) -> ChatResponse:
        return self._next(request)

    def chat_stream(self, request: ChatRequest) -> ChatStream:
        """The next answer as a stream of events (an error is raised as a setup error), as
        `chat` answers it: of the provider the response names."""
        response = self._next(request)
        return ChatStream(iter(_streamed(response)), provider=response.provider or self.name)

    async def achat_stream(self, request: ChatRequest) -> AsyncChatStream:
        response = self._next(request)
        events = _streamed(response)
        return AsyncChatStream(aiter_events(events), provider=response.provider or self.name)

    def __repr__(self) -> str:
        return f"MockProvider(name={self.name!r}, remaining={len(self._script)})"


class SetupError:
    """A scripted stream that fails when it is opened, before any event."""

    __slots__ = ("error",)

    def __init__(self, error: Error) -> None:
        self.error = error


StreamItem = StreamEvent | Error
StreamScript = Iterable[StreamItem] | SetupError | Structured


def _streamed(response: ChatResponse) -> list[StreamEvent]:
    """The events of a scripted response, which must hold nothing a stream cannot carry: its
    log-probabilities would be lost without a word (no stream event holds them)."""
    if response.logprobs is not None:
        raise MockScriptError(
            "a scripted response with log-probabilities cannot be streamed (no stream event "
            "carries them, as no provider's stream does here): script it on MockProvider "
            "and call `chat`"
        )
    return response_events(response)


class _ResponseEvents:
    """A scripted response to stream, checked when scripted (`_streamed`): streamed of the
    provider it names, as `chat` answers it (a response of `openai`'s is priced as one),
    and of the request's model where it names none (`_answered_as`)."""

    __slots__ = ("response",)

    def __init__(self, response: ChatResponse) -> None:
        _streamed(response)
        self.response = response


def _structured_answer(
    item: Structured, request: ChatRequest, number: int, provider: str
) -> ChatResponse:
    """`item` answering call `number`; a request it cannot answer (a tool choice naming no
    tool offered) is refused as the provider `provider`."""
    try:
        return item.response_for(request, call_id=f"call_mock_{number}")
    except InvalidRequestError as error:
        raise error.with_provider(provider) from None


class _ScriptRead:
    """A scripted stream's events, read from its script as the stream reads them: a
    generator is read no further than the stream (one that never ends streams as a long
    answer does, and its sleeps come between events), each item checked as it comes (an
    event, or an allama error, raised where it stands, naming the stream's provider and
    the request's model where it names none, as an error at setup does: `_raised`).
    The warnings `said` come first. Closed (the stream closed early), it closes the
    script's generator, as a provider's stream closes its connection."""

    def __init__(
        self,
        said: Sequence[StreamEvent],
        script: Iterable[object],
        *,
        name: str,
        number: int,
        provider: str,
        model: str,
    ) -> None:
        self._said = deque(said)
        self._script = iter(script)
        self._name = name
        self._number = number
        self._provider = provider
        self._model = model
        self._read = 0
        self._ended = False

    @property
    def provider(self) -> str:
        """The provider the stream reports."""
        return self._provider

    def __iter__(self) -> Iterator[StreamEvent]:
        return self

    def __next__(self) -> StreamEvent:
        if self._said:
            return self._said.popleft()
        if self._ended:
            raise StopIteration
        failed: Error
        try:
            part = next(self._script)
        except StopIteration:
            self._ended = True
            raise
        except Error as error:
            failed = error
        except Exception as error:
            self._ended = True
            raise MockScriptError(
                f"{self._name}: stream {self._number} raised a {_named(error)} as it was "
                f"read, after {self._read} items: a scripted stream raises only an allama "
                f"Error, which ends it there{_not_allama(error)}"
            ) from error
        else:
            if isinstance(part, _EVENTS):
                self._read += 1
                return typing.cast("StreamEvent", part)
            if not isinstance(part, Error):
                self._ended = True
                raise MockScriptError(
                    f"{self._name}: item {self._read} of stream {self._number} is a "
                    f"{_named(part)}, neither a stream event nor an allama Error"
                    f"{_not_allama(part)}"
                )
            failed = part
        self._ended = True
        raise _raised(failed, self._provider, self._model)

    def close(self) -> None:
        """Close the script's generator (a `finally` of its runs), as a stream closed early
        closes its source; the script is read no further."""
        self._ended = True
        close = getattr(self._script, "close", None)
        if callable(close):
            close()


class _AsyncScriptRead:
    """`_ScriptRead` as the source an `AsyncChatStream` reads (the script is a plain
    iterable, read in turn as the stream is); `aclose` closes the script's generator."""

    def __init__(self, read: _ScriptRead) -> None:
        self._read = read

    def __aiter__(self) -> _AsyncScriptRead:
        return self

    async def __anext__(self) -> StreamEvent:
        try:
            return next(self._read)
        except StopIteration:
            raise StopAsyncIteration from None

    async def aclose(self) -> None:
        self._read.close()


def _check_stream(
    name: str, number: int, item: object
) -> Iterable[object] | SetupError | Structured | _ResponseEvents:
    """The scripted stream; refuse one that is none of the kinds a script streams, naming
    it. A collection of items (a list) is in hand: an item in it that is neither an event
    nor an allama error is refused here, before the stream opens. Another iterable (a
    generator) is read as the stream is read (`_ScriptRead`), each item checked as it
    comes, rather than all of it first (an endless one would never open)."""
    if isinstance(item, SetupError):
        if not isinstance(item.error, Error):
            raise MockScriptError(
                f"{name}: the setup error of stream {number} is a {_named(item.error)}, not "
                f"an allama Error{_not_allama(item.error)}"
            )
        return item
    if isinstance(item, Structured | _ResponseEvents):
        return item
    if not isinstance(item, Iterable) or isinstance(item, str | bytes | bytearray | dict):
        raise MockScriptError(
            f"{name}: stream {number} is a {_named(item)}, which no script streams: a list "
            "of events and errors, a SetupError or a Structured value"
        )
    if isinstance(item, Collection):
        for index, part in enumerate(item):
            if not isinstance(part, (*_EVENTS, Error)):
                raise MockScriptError(
                    f"{name}: item {index} of stream {number} is a {_named(part)}, neither a "
                    f"stream event nor an allama Error{_not_allama(part)}"
                )
    return item


class MockStreamingProvider(_Recorder):
    """Answers each call with the next scripted stream: events, errors inside, setup errors.

    A stream is a list of events and errors (an error ends it where it stands), a
    `SetupError` raised by `chat_stream` itself, or a `Structured` value streamed in the form
    the request asks for. An error is raised as a fresh copy each call, as a provider raises
    a new one. `chat` collects the next stream. A stream of another kind, or a list
    holding an item that is neither an event nor an allama error, raises `MockScriptError`
    naming it when its call comes. A generator is read as its stream is (an endless one
    streams until the stream is closed, which closes it), each item checked as it comes.
    """

    def __init__(self, streams: Iterable[StreamScript] = (), *, name: str = "mock") -> None:
        super().__init__(name)
        self._streams: deque[StreamScript | _ResponseEvents] = deque(streams)

    @classmethod
    def from_responses(cls, responses: Iterable[ChatResponse]) -> MockStreamingProvider:
        """Streams each response in turn, of the provider it names (this one's if none)."""
        provider = cls()
        provider._streams.extend(_ResponseEvents(response) for response in responses)
        return provider

    @classmethod
    def with_text(cls, text: str) -> MockStreamingProvider:
        return cls.from_responses([ChatResponseBuilder().text(text).build()])

    @classmethod
    def with_stream(cls, items: Iterable[StreamItem]) -> MockStreamingProvider:
        return cls([items])

    @classmethod
    def with_tool_call(cls, id: str, name: str, arguments: JsonValue) -> MockStreamingProvider:
        return cls.from_responses([ChatResponseBuilder().tool_call(id, name, arguments).build()])

    @classmethod
    def with_structured(cls, value: Any, *, usage: Usage | None = None) -> MockStreamingProvider:
        """Streams `value` in whichever form the extraction asks for (`Structured`)."""
        return cls([Structured(value, usage=usage)])

    def then_structured(self, value: Any, *, usage: Usage | None = None) -> Self:
        self._streams.append(Structured(value, usage=usage))
        return self

    def then_stream(self, items: Iterable[StreamItem]) -> Self:
        self._streams.append(items)
        return self

    def then_response(self, response: ChatResponse) -> Self:
        self._streams.append(_ResponseEvents(response))
        return self

    def then_setup_error(self, error: Error) -> Self:
        self._streams.append(SetupError(error))
        return self

    def _next(self, request: ChatRequest) -> _ScriptRead:
        """The next stream's events as the stream reads them, of the provider it reports (a
        scripted response's): the warnings of the request first, as a provider's stream
        gives its encoding's."""
        number = self._record(request)
        self._refuse_unsendable(request)  # before the script: nothing was sent
        warnings = self._degradations(request)
        with self._lock:
            if not self._streams:
                raise MockScriptExhausted(f"{self.name}: call {number} has no scripted stream")
            item = self._streams.popleft()
        checked = _check_stream(self.name, number, item)
        if isinstance(checked, SetupError):
            raise _raised(checked.error, self.name, request.model)
        said: list[StreamEvent] = [WarningEvent(warning=warning) for warning in warnings]
        script: Iterable[object]
        provider = self.name
        if isinstance(checked, Structured):
            answer = _structured_answer(checked, request, number, self.name)
            said, script = [], response_events(self._warned(answer, warnings))
        elif isinstance(checked, _ResponseEvents):
            answer = _answered_as(checked.response, self.name, request.model)
            script, provider = _streamed(answer), answer.provider or self.name
        else:
            script = checked
        return _ScriptRead(
            said, script, name=self.name, number=number, provider=provider, model=request.model
        )

    def chat_stream(self, request: ChatRequest) -> ChatStream:
        read = self._next(request)
        return ChatStream(read, provider=read.provider)

    async def achat_stream(self, request: ChatRequest) -> AsyncChatStream:
        read = self._next(request)
        return AsyncChatStream(_AsyncScriptRead(read), provider=read.provider)

    def chat(self, request: ChatRequest) -> ChatResponse:
        """The next stream, collected; a stream that fails says on its error the usage it
        reported before, as a provider's failed body does."""
        stream = self.chat_stream(request)
        try:
            return stream.response()
        except Error as error:
            with_paid(error, stream)
            raise

    async def achat(self, request: ChatRequest) -> ChatResponse:
        stream = await self.achat_stream(request)
        try:
            return await stream.response()
        except Error as error:
            with_paid(error, stream)
            raise

    def __repr__(self) -> str:
        return f"MockStreamingProvider(name={self.name!r}, remaining={len(self._streams)})"


class FunctionProvider(_Recorder):
    """Answers with a function of the request (raise an `allama.Error` to fail)."""

    def __init__(
        self, answer: Callable[[ChatRequest], ChatResponse], *, name: str = "mock"
    ) -> None:
        super().__init__(name)
        self._answer = answer

    def chat(self, request: ChatRequest) -> ChatResponse:
        number = self._record(request)
        self._refuse_unsendable(request)
        warnings = self._degradations(request)
        response: object = self._answer(request)
        if inspect.isawaitable(response):
            close = getattr(response, "close", None)
            if callable(close):
                close()  # never awaited: closed, so that no warning says so later
            raise MockScriptError(
                f"{self.name}: the function answering call {number} returned a "
                f"{type(response).__name__}, which FunctionProvider does not await (from "
                "`achat` neither): give it a plain function, not an `async def`"
            )
        if not isinstance(response, ChatResponse):
            raise MockScriptError(
                f"{self.name}: the function answering call {number} returned a "
                f"{_named(response)}, not a ChatResponse (build one with "
                "ChatResponseBuilder; raise an allama Error to fail)"
            )
        return self._warned(_answered_as(response, self.name, request.model), warnings)

    async def achat(self, request: ChatRequest) -> ChatResponse:
        return self.chat(request)

    def chat_stream(self, request: ChatRequest) -> ChatStream:
        """The function's answer as a stream of events, of the provider it names."""
        response = self.chat(request)
        return ChatStream(iter(_streamed(response)), provider=response.provider or self.name)

    async def achat_stream(self, request: ChatRequest) -> AsyncChatStream:
        response = self.chat(request)
        events = _streamed(response)
        return AsyncChatStream(aiter_events(events), provider=response.provider or self.name)
