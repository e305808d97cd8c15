"""The extractor: one extraction, with opt-in recovery, sync and async, whole or streamed."""

from __future__ import annotations

from dataclasses import replace
from typing import Any, TypeVar, overload

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
from allama.extract._stream import AsyncExtractionStream, ExtractionStream
from allama.extract._target import Target
from allama.provider import ChatProvider
from allama.types import ChatRequest, ChatResponse

T = TypeVar("T")


class Extractor:
    """Runs extractions with explicit, opt-in recovery. The default makes one call, strictly.

    - `repair`: strip markdown fences and prose around the JSON locally (no extra call).
    - `retries`: when the output cannot be used, send the failure back and ask again. Each
      retry is another billed call, counted in `metadata.passes`. Truncation, refusals,
      provider errors and a floor failure are never retried.
    - `allow_undeclared_keys`: accept keys the type does not declare, as pydantic does.
    - `min_enforcement`: fail unless the provider enforces the schema at least this far;
      checked before sending when the provider can dry-run the call.

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

    __slots__ = ("_settings",)

    def __init__(
        self,
        *,
        repair: bool = False,
        retries: int = 0,
        allow_undeclared_keys: bool = False,
        min_enforcement: SchemaEnforcement | None = None,
    ) -> None:
        if retries < 0:
            raise ValueError(f"retries must be 0 or more, not {retries}")
        self._settings = Settings(repair, retries, allow_undeclared_keys, min_enforcement)

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

    def with_options(self, **changes: Any) -> Extractor:
        """A copy with some settings changed."""
        settings = replace(self._settings, **changes)
        copy = Extractor.__new__(Extractor)
        copy._settings = settings
        return copy

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
    def extract(self, provider: ChatProvider, tp: Any, request: ChatRequest) -> Extracted[Any]: ...
    def extract(self, provider: ChatProvider, tp: Any, request: ChatRequest) -> Extracted[Any]:
        """Extract a value of type `tp` from the answer to `request`.

        Provider errors are raised as themselves, with the record of the passes attached
        (`ExtractionMetadata.from_error`); unusable output raises an `ExtractionError`
        carrying the last response and the record.
        """
        return drive(extract_steps(self._settings, provider, tp, request), provider)

    @overload
    async def aextract(
        self, provider: ChatProvider, tp: type[T], request: ChatRequest
    ) -> Extracted[T]: ...
    @overload
    async def aextract(
        self, provider: ChatProvider, tp: Any, request: ChatRequest
    ) -> Extracted[Any]: ...
    async def aextract(
        self, provider: ChatProvider, tp: Any, request: ChatRequest
    ) -> Extracted[Any]:
        """The async twin of `extract`."""
        return await adrive(extract_steps(self._settings, provider, tp, request), provider)

    @overload
    def extract_stream(
        self, provider: ChatProvider, tp: type[T], request: ChatRequest
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
        opened = drive_open(open_steps(self._settings, provider, tp, request), provider)
        return ExtractionStream(opened, self._settings, tp)

    @overload
    async def aextract_stream(
        self, provider: ChatProvider, tp: type[T], request: ChatRequest
    ) -> AsyncExtractionStream[T]: ...
    @overload
    async def aextract_stream(
        self, provider: ChatProvider, tp: Any, request: ChatRequest
    ) -> AsyncExtractionStream[Any]: ...
    async def aextract_stream(
        self, provider: ChatProvider, tp: Any, request: ChatRequest
    ) -> AsyncExtractionStream[Any]:
        opened = await adrive_open(open_steps(self._settings, provider, tp, request), provider)
        return AsyncExtractionStream(opened, self._settings, tp)

    def plan(self, provider: ChatProvider, tp: Any, request: ChatRequest) -> ExtractionPlan:
        """What an extraction would do, without sending anything."""
        return plan(provider, tp, request)

    @overload
    def parse(self, tp: type[T], response: ChatResponse, mode: ExtractionMode) -> Extracted[T]: ...
    @overload
    def parse(self, tp: Any, response: ChatResponse, mode: ExtractionMode) -> Extracted[Any]: ...
    def parse(self, tp: Any, response: ChatResponse, mode: ExtractionMode) -> Extracted[Any]:
        """Parse a response you already have (no provider call), with this extractor's repair.

        `mode` says where the output is: the text (`NATIVE`) or the arguments of the single
        `submit_structured_output` call (`FORCED_TOOL`). The record shows no passes and
        `NOT_ENFORCED`: whether the request asked for strict mode is unknown here.
        """
        provider = response.provider or "unknown"
        metadata = ExtractionMetadata.new(mode)
        if mode is ExtractionMode.AUTO:
            raise ModeUnsupportedError(
                provider=provider, metadata=metadata, mode=mode
            ).with_response(response)
        target = Target.of(tp, provider, response.model or "")
        return finish(response, metadata, target, self._settings)


_DEFAULT = Extractor()


@overload
def extract(provider: ChatProvider, tp: type[T], request: ChatRequest) -> Extracted[T]: ...
@overload
def extract(provider: ChatProvider, tp: Any, request: ChatRequest) -> Extracted[Any]: ...
def extract(provider: ChatProvider, tp: Any, request: ChatRequest) -> Extracted[Any]:
    """Extract a `tp` from the answer to `request` in exactly one provider call.

    The mode comes from the request (`request.with_option(ExtractionMode.NATIVE)`), AUTO by
    default. For repair, retries or a floor, use an `Extractor`.
    """
    return _DEFAULT.extract(provider, tp, request)


@overload
async def aextract(provider: ChatProvider, tp: type[T], request: ChatRequest) -> Extracted[T]: ...
@overload
async def aextract(provider: ChatProvider, tp: Any, request: ChatRequest) -> Extracted[Any]: ...
async def aextract(provider: ChatProvider, tp: Any, request: ChatRequest) -> Extracted[Any]:
    return await _DEFAULT.aextract(provider, tp, request)


@overload
def extract_stream(
    provider: ChatProvider, tp: type[T], request: ChatRequest
) -> ExtractionStream[T]: ...
@overload
def extract_stream(
    provider: ChatProvider, tp: Any, request: ChatRequest
) -> ExtractionStream[Any]: ...
def extract_stream(provider: ChatProvider, tp: Any, request: ChatRequest) -> ExtractionStream[Any]:
    return _DEFAULT.extract_stream(provider, tp, request)


@overload
async def aextract_stream(
    provider: ChatProvider, tp: type[T], request: ChatRequest
) -> AsyncExtractionStream[T]: ...
@overload
async def aextract_stream(
    provider: ChatProvider, tp: Any, request: ChatRequest
) -> AsyncExtractionStream[Any]: ...
async def aextract_stream(
    provider: ChatProvider, tp: Any, request: ChatRequest
) -> AsyncExtractionStream[Any]:
    return await _DEFAULT.aextract_stream(provider, tp, request)
