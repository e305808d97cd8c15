"""What the ports of seed 000's tests share: the seed's fixtures, and one runner for both APIs.

A test of the seed that is `async` runs twice, through `Run`: once with the sync API and once
with the async one (on one event loop per test, so a stream opened by one call can be read by
the next).
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Annotated, Any

import pytest
from pydantic import BaseModel, Field

import allama
from allama import (
    AutoFallback,
    ChatCapability,
    ChatRequest,
    ChatResponse,
    Degradations,
    Error,
    ExtractionError,
    ExtractionMode,
    Extractor,
    RateLimitedError,
    RequestField,
    UnsupportedError,
    UnsupportedPolicy,
    Warning,
)
from allama.mock import ChatResponseBuilder, MockProvider
from allama.provider import ChatProvider
from allama.types import UserMessage


class Person(BaseModel):
    name: str
    age: Annotated[int, Field(ge=0, le=255)]


def request() -> ChatRequest:
    return ChatRequest("m").user("Alice is 31")


def alice() -> Person:
    return Person(name="Alice", age=31)


def alice_call() -> dict[str, Any]:
    return {"name": "Alice", "age": 31}


NATIVE_AND_TOOLS = (ChatCapability.STRUCTURED_OUTPUT, ChatCapability.TOOL_CALLS)


def refused(field: RequestField) -> UnsupportedError:
    """The refusal an adapter returns, through `Degradations`, for a field it cannot send."""
    return Degradations("demo", UnsupportedPolicy.WARN).unsupported(
        field, "map-typed properties cannot be expressed"
    )


def refusal_record() -> AutoFallback:
    return AutoFallback(
        field=RequestField.RESPONSE_FORMAT,
        message="cannot send `response_format`: map-typed properties cannot be expressed",
    )


def rate_limited() -> RateLimitedError:
    return (
        RateLimitedError("HTTP 429", retry_after=7.0)
        .mark_authored()
        .with_provider("mock")
        .with_status(429)
    )


def text_with_usage(text: str, input_tokens: int, output_tokens: int) -> ChatResponse:
    return ChatResponseBuilder().text(text).usage(input_tokens, output_tokens).build()


def strict_dropped(field: RequestField) -> Warning:
    return Warning.unsupported(field, "strict is not supported; sent without strict").with_provider(
        "mock"
    )


def approximated(field: RequestField) -> Warning:
    return Warning.approximated(field, "`pattern` was removed").with_provider("mock")


def unsupported_field(error: BaseException) -> RequestField | None:
    return error.field if isinstance(error, UnsupportedError) else None


def failure(error: BaseException) -> ExtractionError:
    assert isinstance(error, ExtractionError), f"expected an extraction failure, got {error!r}"
    return error


def retry_feedback(provider: MockProvider) -> str:
    """The retry feedback the model received: the last user message."""
    retry = provider.last_request
    assert retry is not None
    last = retry.messages[-1]
    assert isinstance(last, UserMessage), last
    text = last.text()
    assert text is not None
    return text


class Stream:
    """One streamed extraction, read the same way whichever API opened it."""

    def __init__(self, run: Run, stream: Any) -> None:
        self._run = run
        self._stream = stream

    def next(self) -> Any:
        """The next event; the error the stream yielded, as a value; `None` at the end."""
        try:
            if self._run.is_async:
                return self._run.wait(anext(self._stream))
            return next(self._stream)
        except (StopIteration, StopAsyncIteration):
            return None
        except Error as error:
            return error

    def drain(self) -> int:
        """Read to the end, failing on an error item; the number of events."""
        count = 0
        while (item := self.next()) is not None:
            assert not isinstance(item, Error), f"unexpected stream error {item!r}"
            count += 1
        return count

    def read_all(self) -> list[Any]:
        """Every item to the end, errors included."""
        items = []
        while (item := self.next()) is not None:
            items.append(item)
        return items

    def finish(self) -> allama.Extracted[Any]:
        if self._run.is_async:
            result: allama.Extracted[Any] = self._run.wait(self._stream.finish())
            return result
        done: allama.Extracted[Any] = self._stream.finish()
        return done

    def close(self) -> None:
        if self._run.is_async:
            self._run.wait(self._stream.aclose())
        else:
            self._stream.close()

    @property
    def mode(self) -> Any:
        return self._stream.mode

    @property
    def partial_output(self) -> str:
        text: str = self._stream.partial_output
        return text

    @property
    def partial(self) -> Any:
        return self._stream.partial


class Run:
    """Calls the sync API, or the async one on a loop kept for the whole test."""

    def __init__(self, is_async: bool) -> None:
        self.is_async = is_async
        self._runner = asyncio.Runner() if is_async else None

    def __repr__(self) -> str:
        return "async" if self.is_async else "sync"

    def wait(self, coroutine: Any) -> Any:
        assert self._runner is not None
        return self._runner.run(_awaited(coroutine))

    def close(self) -> None:
        if self._runner is not None:
            self._runner.close()

    def extract(
        self,
        provider: ChatProvider,
        tp: Any,
        req: ChatRequest,
        extractor: Extractor | None = None,
    ) -> allama.Extracted[Any]:
        if self.is_async:
            coroutine = (
                allama.aextract(provider, tp, req)
                if extractor is None
                else extractor.aextract(provider, tp, req)
            )
            result: allama.Extracted[Any] = self.wait(coroutine)
            return result
        if extractor is None:
            return allama.extract(provider, tp, req)
        return extractor.extract(provider, tp, req)

    def fails(
        self,
        provider: ChatProvider,
        tp: Any,
        req: ChatRequest,
        extractor: Extractor | None = None,
    ) -> Error:
        """The error the extraction raises (it must raise one)."""
        try:
            extracted = self.extract(provider, tp, req, extractor)
        except Error as error:
            return error
        raise AssertionError(f"expected an error, got {extracted!r}")

    def stream(
        self,
        provider: ChatProvider,
        tp: Any,
        req: ChatRequest,
        extractor: Extractor | None = None,
    ) -> Stream:
        chosen = extractor if extractor is not None else Extractor()
        if self.is_async:
            return Stream(self, self.wait(chosen.aextract_stream(provider, tp, req)))
        return Stream(self, chosen.extract_stream(provider, tp, req))

    def stream_fails(
        self,
        provider: ChatProvider,
        tp: Any,
        req: ChatRequest,
        extractor: Extractor | None = None,
    ) -> Error:
        try:
            opened = self.stream(provider, tp, req, extractor)
        except Error as error:
            return error
        raise AssertionError(f"expected a setup error, got {opened!r}")

    def finish_fails(self, stream: Stream) -> Error:
        try:
            extracted = stream.finish()
        except Error as error:
            return error
        raise AssertionError(f"expected finish() to fail, got {extracted!r}")


async def _awaited(awaitable: Any) -> Any:
    return await awaitable


@pytest.fixture(params=["sync", "async"])
def run(request: pytest.FixtureRequest) -> Iterator[Run]:
    runner = Run(request.param == "async")
    yield runner
    runner.close()


NATIVE = ExtractionMode.NATIVE
FORCED = ExtractionMode.FORCED_TOOL


def native_request() -> ChatRequest:
    return request().with_option(NATIVE)


def forced_request() -> ChatRequest:
    return request().with_option(FORCED)
