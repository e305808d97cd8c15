"""The extractor: one extraction, with opt-in recovery, sync and async, whole or streamed."""

from __future__ import annotations

from collections.abc import Coroutine, Generator, Mapping
from dataclasses import is_dataclass
from types import TracebackType
from typing import TYPE_CHECKING, Any, Generic, Literal, TypedDict, TypeVar, Unpack, overload

from pydantic import BaseModel

# `TypeForm[T]` (PEP 747) types a special form (`A | B`, `Literal[...]`): `type[T]` takes none.
from typing_extensions import TypeForm

from allama._lazy import deferred_module
from allama._not_a_request import not_a_request
from allama.extract._engine import (
    Extracted,
    ExtractionPlan,
    Settings,
    adrive,
    adrive_open,
    drive,
    drive_open,
    extract_steps,
    finish,
    open_steps,
    plan,
)
from allama.extract._errors import ModeUnsupportedError
from allama.extract._metadata import ExtractionMetadata
from allama.extract._mode import ExtractionMode, SchemaEnforcement
from allama.extract._target import Target
from allama.provider import ChatProvider
from allama.types import ChatRequest, ChatResponse

# Streamed extraction (and its partial values) is loaded by the first stream, so that a
# program that never streams never loads it.
if TYPE_CHECKING:
    from allama import _tracing
    from allama.extract import _decide as deciding
    from allama.extract import _stream as streaming
    from allama.extract._decide import Decision
    from allama.extract._stream import AsyncExtractionStream, ExtractionStream
else:
    streaming = deferred_module("allama.extract._stream", globals(), "streaming")
    # Decisions likewise, by the first decision.
    deciding = deferred_module("allama.extract._decide", globals(), "deciding")
    # Spans load with the first extraction (`opentelemetry` itself only if a tracer is set).
    _tracing = deferred_module("allama._tracing", globals(), "_tracing")

T = TypeVar("T")
C = TypeVar("C")


def _setting(name: str, value: Any, kind: type, expected: str) -> None:
    # `bool` is an `int`: a flag passed as a count (or the reverse) is a mistake too.
    if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
        raise TypeError(f"{name} must be {expected}, not {type(value).__name__} {value!r}")


def _mode(value: Any) -> ExtractionMode:
    if isinstance(value, ExtractionMode):
        return value
    if isinstance(value, str):
        try:
            return ExtractionMode(value)
        except ValueError:
            pass
    names = ", ".join(f"`{mode.value}`" for mode in ExtractionMode)
    raise ValueError(f"mode must be an ExtractionMode or one of {names}, not {value!r}")


def _floor(value: Any) -> SchemaEnforcement | None:
    if value is None or isinstance(value, SchemaEnforcement):
        return value
    if isinstance(value, str):
        try:
            return SchemaEnforcement(value)
        except ValueError:
            pass
    names = ", ".join(f"`{level.value}`" for level in SchemaEnforcement)
    raise ValueError(
        f"min_enforcement must be a SchemaEnforcement or one of {names}, not {value!r}"
    )


def check_call(provider: Any, tp: Any, request: Any) -> None:
    """Fail at the call, naming the argument, when the arguments are not a provider, a type
    and a `ChatRequest` (in that order), rather than at the first use of one of them."""
    if isinstance(request, ChatRequest) and hasattr(provider, "chat_capability"):
        if isinstance(tp, BaseModel) or (is_dataclass(tp) and not isinstance(tp, type)):
            # Named by its class alone: the instance's fields may be a document's data.
            raise TypeError(
                f"pass the class `{type(tp).__name__}`, not an instance of it: the type to "
                "extract is the class itself"
            )
        return
    if not isinstance(request, ChatRequest):
        raise not_a_request(request)
    if isinstance(provider, type) and hasattr(tp, "chat_capability"):
        raise TypeError(
            "the provider and the type are swapped: the arguments are (provider, type, "
            f"request), and the provider came second ({type(tp).__name__})"
        )
    given = repr(provider) if isinstance(provider, type) else type(provider).__name__
    raise TypeError(
        f"provider must be a chat provider (such as `allama.provider('openai')`), not {given}"
    )


class _ExtractorSettings(TypedDict, total=False):
    """`Extractor`'s settings as `with_options` takes them (a misspelt one is a type error)."""

    repair: bool
    retries: int
    allow_undeclared_keys: bool
    min_enforcement: SchemaEnforcement | str | None
    tracer_provider: object | None
    capture_content: bool | None


class Extractor:
    """Runs extractions with explicit, opt-in recovery. The default makes one call, strictly.

    - `repair`: strip markdown fences and prose around the JSON locally (no extra call).
    - `retries`: when the output cannot be used, send the failure back and ask again. Each
      retry is another billed call, counted in `metadata.passes`. Truncation, refusals,
      provider errors and a floor failure are never retried.
    - `allow_undeclared_keys`: accept keys the type does not declare, as pydantic does.
    - `min_enforcement`: fail unless the provider enforces the schema at least this far;
      checked before sending when the provider can dry-run the call.
    - `tracer_provider`: an OpenTelemetry tracer provider for the spans of its extractions
      (and of their calls) instead of the global one; `capture_content`: record prompts
      and outputs on them (by default as `OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT`
      says). Without a tracer provider, nothing is traced.

    >>> from pydantic import BaseModel
    >>> from allama.mock import MockProvider
    >>> class Person(BaseModel):
    ...     name: str
    >>> provider = MockProvider.with_text('```json\\n{"name": "Ada"}\\n```')
    >>> request = ChatRequest("m").user("Ada wrote the first program.")
    >>> extracted = Extractor(repair=True).extract(provider, Person, request)
    >>> extracted.value.name, extracted.metadata.repaired
    ('Ada', True)
    """

    __slots__ = ("_settings", "_tracing")

    def __init__(
        self,
        *,
        repair: bool = False,
        retries: int = 0,
        allow_undeclared_keys: bool = False,
        min_enforcement: SchemaEnforcement | str | None = None,
        tracer_provider: object | None = None,
        capture_content: bool | None = None,
    ) -> None:
        _setting("repair", repair, bool, "True or False")
        _setting("retries", retries, int, "a whole number")
        _setting("allow_undeclared_keys", allow_undeclared_keys, bool, "True or False")
        if retries < 0:
            raise ValueError(f"retries must be 0 or more, not {retries}")
        self._settings = Settings(repair, retries, allow_undeclared_keys, _floor(min_enforcement))
        self._tracing = (
            None
            if tracer_provider is None and capture_content is None
            else _tracing.Tracing(tracer_provider, capture_content)
        )

    @property
    def repair(self) -> bool:
        return self._settings.repair

    @property
    def retries(self) -> int:
        return self._settings.retries

    @property
    def allow_undeclared_keys(self) -> bool:
        return self._settings.allow_undeclared_keys

    @property
    def min_enforcement(self) -> SchemaEnforcement | None:
        return self._settings.min_enforcement

    def with_options(self, **changes: Unpack[_ExtractorSettings]) -> Extractor:
        """A copy with some settings changed, checked as the constructor checks them."""
        s = self._settings
        traced = self._tracing
        current = {
            "repair": s.repair,
            "retries": s.retries,
            "allow_undeclared_keys": s.allow_undeclared_keys,
            "min_enforcement": s.min_enforcement,
            "tracer_provider": None if traced is None else traced.tracer_provider,
            "capture_content": None if traced is None else traced.capture_content,
        }
        unknown = sorted(set(changes) - set(current))
        if unknown:
            raise TypeError(f"Extractor has no setting {', '.join(map(repr, unknown))}")
        settings: dict[str, Any] = {**current, **changes}
        return Extractor(**settings)

    def __repr__(self) -> str:
        s = self._settings
        return (
            f"Extractor(repair={s.repair}, retries={s.retries}, "
            f"allow_undeclared_keys={s.allow_undeclared_keys}, "
            f"min_enforcement={None if s.min_enforcement is None else s.min_enforcement.value!r})"
        )

    @overload
    def extract(
        self, provider: ChatProvider, tp: type[T], request: ChatRequest
    ) -> Extracted[T]: ...
    @overload
    def extract(
        self, provider: ChatProvider, tp: TypeForm[T], request: ChatRequest
    ) -> Extracted[T]: ...
    @overload
    def extract(self, provider: ChatProvider, tp: Any, request: ChatRequest) -> Extracted[Any]: ...
    def extract(self, provider: ChatProvider, tp: Any, request: ChatRequest) -> Extracted[Any]:
        """Extract a value of type `tp` from the answer to `request`.

        Provider errors are raised as themselves, with the record of the passes attached
        (`ExtractionMetadata.from_error`); unusable output raises an `ExtractionError`
        carrying the last response and the record.
        """
        check_call(provider, tp, request)
        steps = extract_steps(self._settings, provider, tp, request)
        span = _tracing.start_extraction(self._tracing, "extract", provider.name, tp, request)
        if span is None:
            with _tracing.content_scope(self._tracing):
                return drive(steps, provider)
        with span:
            extracted = drive(span.steps(steps), provider)
            span.succeed(extracted.metadata)
        return extracted

    @overload
    async def aextract(
        self, provider: ChatProvider, tp: type[T], request: ChatRequest
    ) -> Extracted[T]: ...
    @overload
    async def aextract(
        self, provider: ChatProvider, tp: TypeForm[T], request: ChatRequest
    ) -> Extracted[T]: ...
    @overload
    async def aextract(
        self, provider: ChatProvider, tp: Any, request: ChatRequest
    ) -> Extracted[Any]: ...
    async def aextract(
        self, provider: ChatProvider, tp: Any, request: ChatRequest
    ) -> Extracted[Any]:
        """The async twin of `extract`."""
        check_call(provider, tp, request)
        steps = extract_steps(self._settings, provider, tp, request)
        span = _tracing.start_extraction(self._tracing, "extract", provider.name, tp, request)
        if span is None:
            with _tracing.content_scope(self._tracing):
                return await adrive(steps, provider)
        with span:
            extracted = await adrive(span.steps(steps), provider)
            span.succeed(extracted.metadata)
        return extracted

    @overload
    def extract_stream(
        self, provider: ChatProvider, tp: type[T], request: ChatRequest
    ) -> ExtractionStream[T]: ...
    @overload
    def extract_stream(
        self, provider: ChatProvider, tp: TypeForm[T], request: ChatRequest
    ) -> ExtractionStream[T]: ...
    @overload
    def extract_stream(
        self, provider: ChatProvider, tp: Any, request: ChatRequest
    ) -> ExtractionStream[Any]: ...
    def extract_stream(
        self, provider: ChatProvider, tp: Any, request: ChatRequest
    ) -> ExtractionStream[Any]:
        """Stream the extraction: events as they come, `partial` values, then `finish()`.

        Repair applies at `finish()`; retries do not (a retry would be a new stream).
        """
        check_call(provider, tp, request)
        steps = open_steps(self._settings, provider, tp, request)
        span = _tracing.start_extraction(self._tracing, "extract", provider.name, tp, request)
        if span is None:
            with _tracing.content_scope(self._tracing):
                opened = drive_open(steps, provider)
            return streaming.ExtractionStream(opened, self._settings, tp)
        with span:
            opened = drive_open(span.steps(steps), provider)
        return streaming.ExtractionStream(opened, self._settings, tp, span)

    @overload
    def aextract_stream(
        self, provider: ChatProvider, tp: type[T], request: ChatRequest
    ) -> OpeningStream[T]: ...
    @overload
    def aextract_stream(
        self, provider: ChatProvider, tp: TypeForm[T], request: ChatRequest
    ) -> OpeningStream[T]: ...
    @overload
    def aextract_stream(
        self, provider: ChatProvider, tp: Any, request: ChatRequest
    ) -> OpeningStream[Any]: ...
    def aextract_stream(
        self, provider: ChatProvider, tp: Any, request: ChatRequest
    ) -> OpeningStream[Any]:
        """The async twin of `extract_stream`: `async with extractor.aextract_stream(...) as
        stream:` opens it and closes it; `await` it for the stream alone."""
        check_call(provider, tp, request)
        return OpeningStream(self._aopen(provider, tp, request))

    async def _aopen(
        self, provider: ChatProvider, tp: Any, request: ChatRequest
    ) -> AsyncExtractionStream[Any]:
        steps = open_steps(self._settings, provider, tp, request)
        span = _tracing.start_extraction(self._tracing, "extract", provider.name, tp, request)
        if span is None:
            with _tracing.content_scope(self._tracing):
                opened = await adrive_open(steps, provider)
            return streaming.AsyncExtractionStream(opened, self._settings, tp)
        with span:
            opened = await adrive_open(span.steps(steps), provider)
        return streaming.AsyncExtractionStream(opened, self._settings, tp, span)

    @overload
    def decide(
        self,
        provider: ChatProvider,
        tp: type[C],
        request: ChatRequest,
        *,
        descriptions: Mapping[Any, str] | None = None,
        allow_abstain: Literal[False] = False,
        probabilities: bool | None = None,
    ) -> Decision[C]: ...
    @overload
    def decide(
        self,
        provider: ChatProvider,
        tp: type[C],
        request: ChatRequest,
        *,
        descriptions: Mapping[Any, str] | None = None,
        allow_abstain: Literal[True],
        probabilities: bool | None = None,
    ) -> Decision[C | None]: ...
    # A flag passed on as a bool (a setting, not a literal): the value may be None.
    @overload
    def decide(
        self,
        provider: ChatProvider,
        tp: type[C],
        request: ChatRequest,
        *,
        descriptions: Mapping[Any, str] | None = None,
        allow_abstain: bool,
        probabilities: bool | None = None,
    ) -> Decision[C | None]: ...
    @overload
    def decide(
        self,
        provider: ChatProvider,
        tp: TypeForm[C],
        request: ChatRequest,
        *,
        descriptions: Mapping[Any, str] | None = None,
        allow_abstain: Literal[False] = False,
        probabilities: bool | None = None,
    ) -> Decision[C]: ...
    @overload
    def decide(
        self,
        provider: ChatProvider,
        tp: TypeForm[C],
        request: ChatRequest,
        *,
        descriptions: Mapping[Any, str] | None = None,
        allow_abstain: Literal[True],
        probabilities: bool | None = None,
    ) -> Decision[C | None]: ...
    @overload
    def decide(
        self,
        provider: ChatProvider,
        tp: TypeForm[C],
        request: ChatRequest,
        *,
        descriptions: Mapping[Any, str] | None = None,
        allow_abstain: bool,
        probabilities: bool | None = None,
    ) -> Decision[C | None]: ...
    @overload
    def decide(
        self,
        provider: ChatProvider,
        tp: Any,
        request: ChatRequest,
        *,
        descriptions: Mapping[Any, str] | None = None,
        allow_abstain: bool = False,
        probabilities: bool | None = None,
    ) -> Decision[Any]: ...
    def decide(
        self,
        provider: ChatProvider,
        tp: Any,
        request: ChatRequest,
        *,
        descriptions: Mapping[Any, str] | None = None,
        allow_abstain: bool = False,
        probabilities: bool | None = None,
    ) -> Decision[Any]:
        """Answer a choice question: `tp` is an `Enum`, a `Literal[...]` or `bool`.

        The provider's most native constraint holds the answer to the options, and the
        answer is checked against them (retried under `retries`, matched loosely under
        `repair`). `descriptions` says what options mean (by option or by its label; an
        Enum member's docstring is read too); `allow_abstain` adds a "none of these"
        option, returned as `None`. `probabilities`: `None` asks for token
        log-probabilities where the model may report them, `True` insists (refused before
        sending where it cannot), `False` never asks.
        """
        check_call(provider, tp, request)
        steps = self._decide_steps(
            provider, tp, request, descriptions, allow_abstain, probabilities
        )
        span = _tracing.start_extraction(self._tracing, "decide", provider.name, tp, request)
        if span is None:
            with _tracing.content_scope(self._tracing):
                return drive(steps, provider)
        with span:
            decision = drive(span.steps(steps), provider)
            span.succeed(decision.metadata)
        return decision

    @overload
    async def adecide(
        self,
        provider: ChatProvider,
        tp: type[C],
        request: ChatRequest,
        *,
        descriptions: Mapping[Any, str] | None = None,
        allow_abstain: Literal[False] = False,
        probabilities: bool | None = None,
    ) -> Decision[C]: ...
    @overload
    async def adecide(
        self,
        provider: ChatProvider,
        tp: type[C],
        request: ChatRequest,
        *,
        descriptions: Mapping[Any, str] | None = None,
        allow_abstain: Literal[True],
        probabilities: bool | None = None,
    ) -> Decision[C | None]: ...
    @overload
    async def adecide(
        self,
        provider: ChatProvider,
        tp: type[C],
        request: ChatRequest,
        *,
        descriptions: Mapping[Any, str] | None = None,
        allow_abstain: bool,
        probabilities: bool | None = None,
    ) -> Decision[C | None]: ...
    @overload
    async def adecide(
        self,
        provider: ChatProvider,
        tp: TypeForm[C],
        request: ChatRequest,
        *,
        descriptions: Mapping[Any, str] | None = None,
        allow_abstain: Literal[False] = False,
        probabilities: bool | None = None,
    ) -> Decision[C]: ...
    @overload
    async def adecide(
        self,
        provider: ChatProvider,
        tp: TypeForm[C],
        request: ChatRequest,
        *,
        descriptions: Mapping[Any, str] | None = None,
        allow_abstain: Literal[True],
        probabilities: bool | None = None,
    ) -> Decision[C | None]: ...
    @overload
    async def adecide(
        self,
        provider: ChatProvider,
        tp: TypeForm[C],
        request: ChatRequest,
        *,
        descriptions: Mapping[Any, str] | None = None,
        allow_abstain: bool,
        probabilities: bool | None = None,
    ) -> Decision[C | None]: ...
    @overload
    async def adecide(
        self,
        provider: ChatProvider,
        tp: Any,
        request: ChatRequest,
        *,
        descriptions: Mapping[Any, str] | None = None,
        allow_abstain: bool = False,
        probabilities: bool | None = None,
    ) -> Decision[Any]: ...
    async def adecide(
        self,
        provider: ChatProvider,
        tp: Any,
        request: ChatRequest,
        *,
        descriptions: Mapping[Any, str] | None = None,
        allow_abstain: bool = False,
        probabilities: bool | None = None,
    ) -> Decision[Any]:
        """The async twin of `decide`."""
        check_call(provider, tp, request)
        steps = self._decide_steps(
            provider, tp, request, descriptions, allow_abstain, probabilities
        )
        span = _tracing.start_extraction(self._tracing, "decide", provider.name, tp, request)
        if span is None:
            with _tracing.content_scope(self._tracing):
                return await adrive(steps, provider)
        with span:
            decision = await adrive(span.steps(steps), provider)
            span.succeed(decision.metadata)
        return decision

    def _decide_steps(
        self,
        provider: ChatProvider,
        tp: Any,
        request: ChatRequest,
        descriptions: Mapping[Any, str] | None,
        allow_abstain: Any,
        probabilities: Any,
    ) -> Generator[ChatRequest, Any, Decision[Any]]:
        _setting("allow_abstain", allow_abstain, bool, "True or False")
        if probabilities is not None:
            _setting("probabilities", probabilities, bool, "True, False or None")
        options = deciding.options_of(tp, descriptions, allow_abstain=allow_abstain)
        return deciding.decide_steps(
            self._settings, provider, options, request, probabilities=probabilities
        )

    def plan(
        self, provider: ChatProvider, tp: Any, request: ChatRequest, *, stream: bool = False
    ) -> ExtractionPlan:
        """What an extraction would do, without sending anything; with `stream=True`, what
        a streamed extraction would (some endpoints drop the schema on streams). What the
        call would refuse before sending (the request's own fields, its messages too) is
        raised here, the same error."""
        check_call(provider, tp, request)
        return plan(provider, tp, request, stream=stream)

    @overload
    def parse(
        self,
        tp: type[T],
        response: ChatResponse,
        mode: ExtractionMode | str,
        *,
        root_wrapped: bool = False,
    ) -> Extracted[T]: ...
    @overload
    def parse(
        self,
        tp: TypeForm[T],
        response: ChatResponse,
        mode: ExtractionMode | str,
        *,
        root_wrapped: bool = False,
    ) -> Extracted[T]: ...
    @overload
    def parse(
        self,
        tp: Any,
        response: ChatResponse,
        mode: ExtractionMode | str,
        *,
        root_wrapped: bool = False,
    ) -> Extracted[Any]: ...
    def parse(
        self,
        tp: Any,
        response: ChatResponse,
        mode: ExtractionMode | str,
        *,
        root_wrapped: bool = False,
    ) -> Extracted[Any]:
        """Parse a response you already have (no provider call), with this extractor's repair.

        `mode` says where the output is: the text (`native`) or the arguments of the single
        `submit_structured_output` call (`forced_tool`). `root_wrapped=True` reads a response
        to a request that sent the type wrapped in `{"value": ...}` (its record says
        `root_wrapped`). The record shows no passes and `NOT_ENFORCED`: whether the request
        asked for strict mode is unknown here.
        """
        if not isinstance(response, ChatResponse):
            raise TypeError(f"response must be a ChatResponse, not {type(response).__name__}")
        mode = _mode(mode)
        provider = response.provider or "unknown"
        metadata = ExtractionMetadata.new(mode)
        metadata.root_wrapped = root_wrapped
        if mode is ExtractionMode.AUTO:
            raise ModeUnsupportedError(
                provider=provider, metadata=metadata, mode=mode
            ).with_response(response)
        target = Target.of(tp, provider, response.model or "")
        if root_wrapped:
            target = target.wrapping(tp)
        return finish(response, metadata, target, self._settings)


_DEFAULT = Extractor()


@overload
def extract(provider: ChatProvider, tp: type[T], request: ChatRequest) -> Extracted[T]: ...
@overload
def extract(provider: ChatProvider, tp: TypeForm[T], request: ChatRequest) -> Extracted[T]: ...
@overload
def extract(provider: ChatProvider, tp: Any, request: ChatRequest) -> Extracted[Any]: ...
def extract(provider: ChatProvider, tp: Any, request: ChatRequest) -> Extracted[Any]:
    """Extract a `tp` from the answer to `request` in one provider call (two where native
    output, only guessed, is refused by the provider and a forced tool is asked instead).

    The mode comes from the request (`request.with_option(ExtractionMode.NATIVE)`), AUTO by
    default. For repair, retries or a floor, use an `Extractor`.
    """
    return _DEFAULT.extract(provider, tp, request)


@overload
async def aextract(provider: ChatProvider, tp: type[T], request: ChatRequest) -> Extracted[T]: ...
@overload
async def aextract(
    provider: ChatProvider, tp: TypeForm[T], request: ChatRequest
) -> Extracted[T]: ...
@overload
async def aextract(provider: ChatProvider, tp: Any, request: ChatRequest) -> Extracted[Any]: ...
async def aextract(provider: ChatProvider, tp: Any, request: ChatRequest) -> Extracted[Any]:
    return await _DEFAULT.aextract(provider, tp, request)


@overload
def decide(
    provider: ChatProvider,
    tp: type[C],
    request: ChatRequest,
    *,
    descriptions: Mapping[Any, str] | None = None,
    allow_abstain: Literal[False] = False,
    probabilities: bool | None = None,
) -> Decision[C]: ...
@overload
def decide(
    provider: ChatProvider,
    tp: type[C],
    request: ChatRequest,
    *,
    descriptions: Mapping[Any, str] | None = None,
    allow_abstain: Literal[True],
    probabilities: bool | None = None,
) -> Decision[C | None]: ...
# A flag passed on as a bool (a setting, not a literal): the value may be None.
@overload
def decide(
    provider: ChatProvider,
    tp: type[C],
    request: ChatRequest,
    *,
    descriptions: Mapping[Any, str] | None = None,
    allow_abstain: bool,
    probabilities: bool | None = None,
) -> Decision[C | None]: ...
@overload
def decide(
    provider: ChatProvider,
    tp: TypeForm[C],
    request: ChatRequest,
    *,
    descriptions: Mapping[Any, str] | None = None,
    allow_abstain: Literal[False] = False,
    probabilities: bool | None = None,
) -> Decision[C]: ...
@overload
def decide(
    provider: ChatProvider,
    tp: TypeForm[C],
    request: ChatRequest,
    *,
    descriptions: Mapping[Any, str] | None = None,
    allow_abstain: Literal[True],
    probabilities: bool | None = None,
) -> Decision[C | None]: ...
@overload
def decide(
    provider: ChatProvider,
    tp: TypeForm[C],
    request: ChatRequest,
    *,
    descriptions: Mapping[Any, str] | None = None,
    allow_abstain: bool,
    probabilities: bool | None = None,
) -> Decision[C | None]: ...
@overload
def decide(
    provider: ChatProvider,
    tp: Any,
    request: ChatRequest,
    *,
    descriptions: Mapping[Any, str] | None = None,
    allow_abstain: bool = False,
    probabilities: bool | None = None,
) -> Decision[Any]: ...
def decide(
    provider: ChatProvider,
    tp: Any,
    request: ChatRequest,
    *,
    descriptions: Mapping[Any, str] | None = None,
    allow_abstain: bool = False,
    probabilities: bool | None = None,
) -> Decision[Any]:
    """Answer a choice question (`tp`: an `Enum`, a `Literal[...]` or `bool`) with the
    provider's most native constraint, and each option's probability where the provider
    reports token log-probabilities. For repair, retries or a floor, use an `Extractor`.
    """
    return _DEFAULT.decide(
        provider,
        tp,
        request,
        descriptions=descriptions,
        allow_abstain=allow_abstain,
        probabilities=probabilities,
    )


@overload
async def adecide(
    provider: ChatProvider,
    tp: type[C],
    request: ChatRequest,
    *,
    descriptions: Mapping[Any, str] | None = None,
    allow_abstain: Literal[False] = False,
    probabilities: bool | None = None,
) -> Decision[C]: ...
@overload
async def adecide(
    provider: ChatProvider,
    tp: type[C],
    request: ChatRequest,
    *,
    descriptions: Mapping[Any, str] | None = None,
    allow_abstain: Literal[True],
    probabilities: bool | None = None,
) -> Decision[C | None]: ...
@overload
async def adecide(
    provider: ChatProvider,
    tp: type[C],
    request: ChatRequest,
    *,
    descriptions: Mapping[Any, str] | None = None,
    allow_abstain: bool,
    probabilities: bool | None = None,
) -> Decision[C | None]: ...
@overload
async def adecide(
    provider: ChatProvider,
    tp: TypeForm[C],
    request: ChatRequest,
    *,
    descriptions: Mapping[Any, str] | None = None,
    allow_abstain: Literal[False] = False,
    probabilities: bool | None = None,
) -> Decision[C]: ...
@overload
async def adecide(
    provider: ChatProvider,
    tp: TypeForm[C],
    request: ChatRequest,
    *,
    descriptions: Mapping[Any, str] | None = None,
    allow_abstain: Literal[True],
    probabilities: bool | None = None,
) -> Decision[C | None]: ...
@overload
async def adecide(
    provider: ChatProvider,
    tp: TypeForm[C],
    request: ChatRequest,
    *,
    descriptions: Mapping[Any, str] | None = None,
    allow_abstain: bool,
    probabilities: bool | None = None,
) -> Decision[C | None]: ...
@overload
async def adecide(
    provider: ChatProvider,
    tp: Any,
    request: ChatRequest,
    *,
    descriptions: Mapping[Any, str] | None = None,
    allow_abstain: bool = False,
    probabilities: bool | None = None,
) -> Decision[Any]: ...
async def adecide(
    provider: ChatProvider,
    tp: Any,
    request: ChatRequest,
    *,
    descriptions: Mapping[Any, str] | None = None,
    allow_abstain: bool = False,
    probabilities: bool | None = None,
) -> Decision[Any]:
    """The async twin of `decide`."""
    # `tp: Any` with a bool flag matches more than one overload, which mypy answers as Any.
    decision: Decision[Any] = await _DEFAULT.adecide(
        provider,
        tp,
        request,
        descriptions=descriptions,
        allow_abstain=allow_abstain,
        probabilities=probabilities,
    )
    return decision


@overload
def extract_stream(
    provider: ChatProvider, tp: type[T], request: ChatRequest
) -> ExtractionStream[T]: ...
@overload
def extract_stream(
    provider: ChatProvider, tp: TypeForm[T], request: ChatRequest
) -> ExtractionStream[T]: ...
@overload
def extract_stream(
    provider: ChatProvider, tp: Any, request: ChatRequest
) -> ExtractionStream[Any]: ...
def extract_stream(provider: ChatProvider, tp: Any, request: ChatRequest) -> ExtractionStream[Any]:
    return _DEFAULT.extract_stream(provider, tp, request)


@overload
def aextract_stream(
    provider: ChatProvider, tp: type[T], request: ChatRequest
) -> OpeningStream[T]: ...
@overload
def aextract_stream(
    provider: ChatProvider, tp: TypeForm[T], request: ChatRequest
) -> OpeningStream[T]: ...
@overload
def aextract_stream(
    provider: ChatProvider, tp: Any, request: ChatRequest
) -> OpeningStream[Any]: ...
def aextract_stream(provider: ChatProvider, tp: Any, request: ChatRequest) -> OpeningStream[Any]:
    """Stream an extraction, async: `async with allama.aextract_stream(...) as stream:`."""
    return _DEFAULT.aextract_stream(provider, tp, request)


class OpeningStream(Generic[T]):
    """An async extraction stream being opened: use it in `async with` (which closes the
    stream at the end), or `await` it for the stream."""

    __slots__ = ("_opening", "_stream")

    def __init__(self, opening: Coroutine[Any, Any, AsyncExtractionStream[T]]) -> None:
        self._opening = opening
        self._stream: AsyncExtractionStream[T] | None = None

    def __await__(self) -> Generator[Any, None, AsyncExtractionStream[T]]:
        return self._opening.__await__()

    async def __aenter__(self) -> AsyncExtractionStream[T]:
        self._stream = await self._opening
        return self._stream

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self._stream is not None:
            await self._stream.aclose()

    def __repr__(self) -> str:
        return (
            "OpeningStream(<opening>)"
            if self._stream is None
            else f"OpeningStream({self._stream!r})"
        )
