"""Providers that answer from a script, for testing code that calls a provider."""

from __future__ import annotations

import copy
import inspect
import reprlib
import threading
import typing
from collections import deque
from collections.abc import AsyncIterator, Callable, Iterable, Iterator, Sequence
from typing import Any, Self

from pydantic import JsonValue

from allama._not_a_request import not_a_request
from allama.errors import Error, ErrorContext, InvalidRequestError
from allama.mock._builder import ChatResponseBuilder
from allama.mock._events import response_events
from allama.mock._structured import MockScriptError, Structured
from allama.provider import capabilities_only
from allama.schema._errors import SchemaError
from allama.schema._walk import check_json
from allama.stream import AsyncChatStream, ChatStream, aiter_events, with_paid
from allama.types import (
    CapabilitySupport,
    ChatCapability,
    ChatRequest,
    ChatResponse,
    ChatValidation,
    StreamEvent,
    Usage,
)

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


class _Recorder:
    """Capability answers and the record of requests, shared by the scripted providers."""

    def __init__(self, name: str) -> None:
        self._name = name
        # A script answers in whatever shape it was given, so any schema root is taken.
        self._capabilities: dict[ChatCapability, CapabilitySupport] = {
            ChatCapability.RESPONSE_SCHEMA_ANY_ROOT: CapabilitySupport.SUPPORTED,
            ChatCapability.TOOL_SCHEMA_ANY_ROOT: CapabilitySupport.SUPPORTED,
        }
        self._requests: list[ChatRequest] = []
        self._lock = threading.Lock()

    @property
    def name(self) -> str:
        return self._name

    def with_provider_name(self, name: str) -> Self:
        self._name = name
        return self

    def with_chat_capability(self, capability: ChatCapability, support: CapabilitySupport) -> Self:
        """Answer `support` for `capability` (`UNKNOWN` until set, but for the two schema
        root questions, `SUPPORTED`: a script answers in whatever shape it was given)."""
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
        if not isinstance(request, ChatRequest):
            raise not_a_request(request)
        self._refuse_unsendable_anywhere(request)
        return capabilities_only()

    def _invalid(self, message: str) -> InvalidRequestError:
        return InvalidRequestError(message).mark_authored().with_provider(self.name)

    def _refuse_unsendable_anywhere(self, request: ChatRequest) -> None:
        """Refuse what every provider refuses before sending (a bug in the code that builds
        the request, which a test should see): no messages, or a schema no JSON holds (a
        `datetime` a model's `json_schema_extra` keeps), refused as a provider's encoding
        refuses it."""
        if not request.messages:
            raise self._invalid(
                f"`{self.name}` needs at least one message, as every provider does, and the "
                "request has none to send"
            )
        fmt = request.response_format
        if fmt is not None and fmt.json_schema is not None:
            self._refuse_not_json(
                fmt.json_schema, f"the response format `{fmt.name or 'response'}`"
            )
        for tool in request.tools:
            self._refuse_not_json(tool.parameters, f"tool `{tool.name}`")

    def _refuse_not_json(self, schema: Any, subject: str) -> None:
        try:
            check_json(schema)
        except SchemaError as error:
            raise self._invalid(f"{subject} has a schema allama cannot read: {error}") from error

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
        self._refuse_unsendable_anywhere(request)  # before the script: nothing was sent
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
        if response.provider is None:
            response = response.model_copy(update={"provider": self.name})
        return response

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


class _ResponseEvents(list[StreamItem]):
    """A scripted response's events, with the provider it names: its stream reports that
    provider, as `chat` does the response (a response of `openai`'s is priced as one)."""

    def __init__(self, response: ChatResponse) -> None:
        super().__init__(_streamed(response))
        self.provider = response.provider


def _structured_answer(
    item: Structured, request: ChatRequest, number: int, provider: str
) -> ChatResponse:
    """`item` answering call `number`; a request it cannot answer (a tool choice naming no
    tool offered) is refused as the provider `provider`."""
    try:
        return item.response_for(request, call_id=f"call_mock_{number}")
    except InvalidRequestError as error:
        raise error.with_provider(provider) from None


def _events_then_error(items: Sequence[StreamItem]) -> Iterator[StreamEvent]:
    for item in items:
        if isinstance(item, Error):
            raise _raised(item)
        yield item


async def _aiter_items(items: Sequence[StreamItem]) -> AsyncIterator[StreamEvent]:
    for item in items:
        if isinstance(item, Error):
            raise _raised(item)
        yield item


def _check_stream(
    name: str, number: int, item: object
) -> list[StreamItem] | SetupError | Structured:
    """The scripted stream, an iterable of items read into a list (a generator streams
    as a list does: an allama error it raises is an item where it stood, ending the
    stream there); refuse one that is none of the three kinds, that raises another
    exception, or that holds an item that is neither an event nor an allama error,
    naming it (rather than failing inside the stream as it is read)."""
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
    items: list[StreamItem] = []
    try:
        for part in item:
            items.append(part)
    except Error as error:
        items.append(error)
    except Exception as error:
        raise MockScriptError(
            f"{name}: stream {number} raised a {_named(error)} as it was read, after "
            f"{len(items)} items: a scripted stream raises only an allama Error, which ends "
            f"it there{_not_allama(error)}"
        ) from error
    for index, part in enumerate(items):
        if not isinstance(part, (*_EVENTS, Error)):
            raise MockScriptError(
                f"{name}: item {index} of stream {number} is a {_named(part)}, neither a "
                f"stream event nor an allama Error{_not_allama(part)}"
            )
    return items


class MockStreamingProvider(_Recorder):
    """Answers each call with the next scripted stream: events, errors inside, setup errors.

    A stream is a list of events and errors (an error ends it where it stands), a
    `SetupError` raised by `chat_stream` itself, or a `Structured` value streamed in the form
    the request asks for. An error is raised as a fresh copy each call, as a provider raises
    a new one. `chat` collects the next stream. A stream of another kind, or one
    holding an item that is neither an event nor an allama error, raises `MockScriptError`
    naming it when its call comes.
    """

    def __init__(self, streams: Iterable[StreamScript] = (), *, name: str = "mock") -> None:
        super().__init__(name)
        self._streams: deque[StreamScript] = deque(streams)

    @classmethod
    def from_responses(cls, responses: Iterable[ChatResponse]) -> MockStreamingProvider:
        """Streams each response in turn, of the provider it names (this one's if none)."""
        return cls([_ResponseEvents(response) for response in responses])

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

    def _next(self, request: ChatRequest) -> tuple[Sequence[StreamItem], str]:
        """The next stream's items, and the provider it reports (a scripted response's)."""
        number = self._record(request)
        self._refuse_unsendable_anywhere(request)  # before the script: nothing was sent
        with self._lock:
            if not self._streams:
                raise MockScriptExhausted(f"{self.name}: call {number} has no scripted stream")
            item = self._streams.popleft()
        item = _check_stream(self.name, number, item)
        if isinstance(item, SetupError):
            raise _raised(item.error, self.name, request.model)
        if isinstance(item, Structured):
            answer = _structured_answer(item, request, number, self.name)
            return response_events(answer), self.name
        if isinstance(item, _ResponseEvents):
            return item, item.provider or self.name
        return item, self.name

    def chat_stream(self, request: ChatRequest) -> ChatStream:
        items, provider = self._next(request)
        return ChatStream(_events_then_error(items), provider=provider)

    async def achat_stream(self, request: ChatRequest) -> AsyncChatStream:
        items, provider = self._next(request)
        return AsyncChatStream(_aiter_items(items), provider=provider)

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
        self._refuse_unsendable_anywhere(request)
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
        if response.provider is None:
            response = response.model_copy(update={"provider": self.name})
        return response

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
