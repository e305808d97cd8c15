"""The scripted providers and the response builder, sync and async."""

from __future__ import annotations

import asyncio
import re
from collections.abc import Coroutine
from typing import Any, TypeVar

import pytest
from pydantic import BaseModel

import allama
from allama import (
    BlockStart,
    BlockStop,
    CapabilitySupport,
    ChatCapability,
    ChatRequest,
    ChatResponse,
    ExtractionMetadata,
    Finish,
    FinishReason,
    IncompleteStreamError,
    NetworkError,
    OverloadedError,
    ProviderDataEvent,
    RateLimitedError,
    Reasoning,
    ReasoningDelta,
    Refusal,
    RefusalDelta,
    RequestField,
    ResponseStart,
    RetryingProvider,
    RetryPolicy,
    ServerError,
    StreamBlockType,
    StreamEvent,
    TextDelta,
    TextPart,
    ToolCall,
    ToolCallDelta,
    Usage,
    UsageEvent,
    ValidationCoverage,
    Warning,
    WarningEvent,
)
from allama.errors import ErrorContext
from allama.mock import (
    ChatResponseBuilder,
    FunctionProvider,
    MockProvider,
    MockScriptExhausted,
    MockStreamingProvider,
    response_events,
)
from allama.stream import response_events as stream_response_events

T = TypeVar("T")
REQUEST = ChatRequest("m").user("first")
OTHER = ChatRequest("m").user("second")


def run(coroutine: Coroutine[Any, Any, T]) -> T:
    return asyncio.run(coroutine)


# ChatResponseBuilder


def test_builder_sets_everything() -> None:
    warning = Warning.unsupported(RequestField.SEED, "x")
    response = (
        ChatResponseBuilder()
        .reasoning("think", signature="sig")
        .text("hi")
        .tool_call("c1", "f", {"a": 1})
        .tool_call("c2", "g", '{"raw" : 1}')
        .tool_call("c3", "h")
        .refusal("no")
        .block(TextPart(text="end"))
        .usage(10, 4)
        .finish_reason("length")
        .warning(warning)
        .provider_data("openai", "fp", "x")
        .model("gpt")
        .provider("openai")
        .id("r1")
        .build()
    )
    assert response == ChatResponse(
        (
            Reasoning(text="think", signature="sig"),
            TextPart(text="hi"),
            ToolCall(id="c1", name="f", arguments='{"a":1}'),
            ToolCall(id="c2", name="g", arguments='{"raw" : 1}'),
            ToolCall(id="c3", name="h", arguments="{}"),
            Refusal(text="no"),
            TextPart(text="end"),
        ),
        finish_reason=FinishReason.LENGTH,
        usage=Usage(input_tokens=10, output_tokens=4),
        warnings=(warning,),
        provider_data={"openai": {"fp": "x"}},
        model="gpt",
        provider="openai",
        id="r1",
    )


def test_builder_finish_reason_defaults() -> None:
    assert ChatResponseBuilder().text("x").build().finish_reason == FinishReason.STOP
    assert ChatResponseBuilder().build().finish_reason == FinishReason.STOP
    assert ChatResponseBuilder().tool_call("c", "f").build().finish_reason == "tool_calls"
    assert ChatResponseBuilder().text("x").finish_reason(None).build().finish_reason is None
    usage = Usage(input_tokens=1, cache_read_tokens=1)
    assert ChatResponseBuilder().usage_value(usage).build().usage == usage
    assert ChatResponseBuilder().build().usage is None


# response_events


def test_response_events_lists_the_whole_response_in_pieces() -> None:
    warning = Warning.unsupported(RequestField.SEED, "x")
    response = (
        ChatResponseBuilder()
        .reasoning("ponder", signature="sig")
        .text("Hello world")
        .tool_call("c1", "f", {"a": 1})
        .refusal("")
        .usage(3, 2)
        .warning(warning)
        .provider_data("ns", "k", 1)
        .id("r")
        .model("m")
        .build()
    )
    assert response_events(response, chunk=5) == [
        ResponseStart(id="r", model="m"),
        WarningEvent(warning=warning),
        BlockStart(index=0, block_type=StreamBlockType.REASONING),
        ReasoningDelta(index=0, text="ponde"),
        ReasoningDelta(index=0, text="r"),
        ReasoningDelta(index=0, signature="sig"),
        BlockStop(index=0),
        BlockStart(index=1, block_type=StreamBlockType.TEXT),
        TextDelta(index=1, text="Hello"),
        TextDelta(index=1, text=" worl"),
        TextDelta(index=1, text="d"),
        BlockStop(index=1),
        BlockStart(index=2, block_type=StreamBlockType.TOOL_CALL, id="c1", name="f"),
        ToolCallDelta(index=2, arguments='{"a":'),
        ToolCallDelta(index=2, arguments="1}"),
        BlockStop(index=2),
        BlockStart(index=3, block_type=StreamBlockType.REFUSAL),
        RefusalDelta(index=3, text=""),
        BlockStop(index=3),
        ProviderDataEvent(namespace="ns", key="k", value=1),
        UsageEvent(usage=Usage(input_tokens=3, output_tokens=2)),
        Finish(finish_reason=FinishReason.TOOL_CALLS),
    ]


@pytest.mark.parametrize(
    ("chunk", "error", "message"),
    [
        (0, ValueError, "chunk must be at least 1 character, not 0"),
        (-1, ValueError, "chunk must be at least 1 character, not -1"),
        (1.5, TypeError, "chunk must be a whole number of characters, not 1.5"),
        (True, TypeError, "chunk must be a whole number of characters, not True"),
    ],
)
def test_response_events_refuses_a_chunk_that_is_not_a_positive_whole_number(
    chunk: Any, error: type[Exception], message: str
) -> None:
    """A chunk below 1 gave no deltas at all (every text and argument lost) or failed in
    `range`; the check is made at the call, before any event."""
    response = ChatResponseBuilder().text("hello").tool_call("c", "f", {"a": 1}).build()
    with pytest.raises(error) as refused:
        response_events(response, chunk=chunk)
    assert str(refused.value) == message
    with pytest.raises(error, match=f"^{re.escape(message)}$"):
        stream_response_events(response, chunk=chunk)


# MockProvider


def test_mock_provider_answers_its_script_in_order_and_records_requests() -> None:
    error = RateLimitedError("slow down", retry_after=2.0)
    built = ChatResponseBuilder().text("built").provider("elsewhere").build()
    provider = MockProvider(["plain", built, error], name="scripted")
    first = provider.chat(REQUEST)
    # Of the request's model where the script names none, as an adapter reads a body.
    assert first == ChatResponse(
        (TextPart(text="plain"),), finish_reason=FinishReason.STOP, provider="scripted", model="m"
    )
    assert provider.chat(OTHER) == built.model_copy(update={"model": "m"})
    with pytest.raises(RateLimitedError) as caught:
        provider.chat(REQUEST)
    # A fresh raise of the scripted error, named by the provider; the script's left as given.
    assert (type(caught.value), caught.value.message, caught.value.retry_after) == (
        RateLimitedError,
        "slow down",
        2.0,
    )
    assert (caught.value.provider, error.provider) == ("scripted", None)
    assert provider.requests == [REQUEST, OTHER, REQUEST]
    assert provider.last_request == REQUEST
    assert provider.call_count == 3
    with pytest.raises(MockScriptExhausted, match="scripted: call 4 has no scripted answer"):
        provider.chat(REQUEST)
    assert provider.call_count == 4


def test_mock_provider_constructors() -> None:
    assert MockProvider.with_text("t").chat(REQUEST).text() == "t"
    response = ChatResponseBuilder().refusal("no").build()
    assert MockProvider.with_response(response).chat(REQUEST).first_refusal() == "no"
    with pytest.raises(ServerError):
        MockProvider.with_error(ServerError("x")).chat(REQUEST)
    call = MockProvider.with_tool_call("c", "lookup", {"q": "x"}).chat(REQUEST)
    assert call.tool_calls() == (ToolCall(id="c", name="lookup", arguments='{"q":"x"}'),)
    assert call.finish_reason == FinishReason.TOOL_CALLS
    empty = MockProvider.empty()
    assert empty.last_request is None
    assert empty.call_count == 0
    assert empty.then("later").chat(REQUEST).text() == "later"
    assert repr(MockProvider(["a", "b"])) == "MockProvider(name='mock', remaining=2)"


def test_mock_provider_keeps_an_error_s_own_provider() -> None:
    error = ServerError("x").with_provider("upstream")
    with pytest.raises(ServerError):
        MockProvider([error]).chat(REQUEST)
    assert error.provider == "upstream"


def test_mock_provider_capabilities_and_validation() -> None:
    provider = (
        MockProvider()
        .with_provider_name("renamed")
        .with_chat_capability(ChatCapability.STREAMING, CapabilitySupport.UNSUPPORTED)
        .with_supported_chat_capabilities(
            [ChatCapability.STRUCTURED_OUTPUT, ChatCapability.TOOL_CALLS]
        )
    )
    assert provider.name == "renamed"
    answers = {c: provider.chat_capability("any", c) for c in ChatCapability}
    assert answers == {
        ChatCapability.STRUCTURED_OUTPUT: CapabilitySupport.SUPPORTED,
        ChatCapability.TOOL_CALLS: CapabilitySupport.SUPPORTED,
        ChatCapability.FORCED_TOOL_CHOICE: CapabilitySupport.UNKNOWN,
        ChatCapability.STREAMING: CapabilitySupport.UNSUPPORTED,
        ChatCapability.REASONING: CapabilitySupport.UNKNOWN,
        ChatCapability.IMAGE_INPUT: CapabilitySupport.UNKNOWN,
        ChatCapability.PARALLEL_TOOL_CALLS: CapabilitySupport.UNKNOWN,
        ChatCapability.RESPONSE_SCHEMA_ANY_ROOT: CapabilitySupport.SUPPORTED,
        ChatCapability.TOOL_SCHEMA_ANY_ROOT: CapabilitySupport.SUPPORTED,
        ChatCapability.LOGPROBS: CapabilitySupport.UNKNOWN,
        ChatCapability.CHOICE_OUTPUT: CapabilitySupport.UNKNOWN,
    }
    # Its warnings are the call's own: a dry run of the call, as a real adapter's is.
    assert provider.validate_chat_request(REQUEST).coverage is ValidationCoverage.ENCODING
    assert provider.call_count == 0


def test_mock_provider_streams_its_script() -> None:
    provider = MockProvider(["streamed text", NetworkError("no connection")])
    stream = provider.chat_stream(REQUEST)
    events = list(stream)
    assert [e.type for e in events] == [
        "response_start",
        "block_start",
        "text_delta",
        "text_delta",
        "block_stop",
        "finish",
    ]
    assert stream.response().text() == "streamed text"
    assert stream.response().provider == "mock"
    with pytest.raises(NetworkError):
        provider.chat_stream(REQUEST)
    assert provider.call_count == 2


def test_mock_provider_async() -> None:
    provider = MockProvider(["one", "two", ServerError("x")])

    async def main() -> list[str | None]:
        first = await provider.achat(REQUEST)
        stream = await provider.achat_stream(OTHER)
        second = await stream.response()
        with pytest.raises(ServerError):
            await provider.achat(REQUEST)
        return [first.text(), second.text()]

    assert run(main()) == ["one", "two"]
    assert provider.requests == [REQUEST, OTHER, REQUEST]


# MockStreamingProvider


def test_streaming_mock_plays_scripted_streams() -> None:
    events: list[StreamEvent] = [
        ResponseStart(id="r"),
        TextDelta(index=0, text="a"),
        TextDelta(index=0, text="b"),
        Finish(finish_reason=FinishReason.STOP),
    ]
    provider = MockStreamingProvider.with_stream(events)
    stream = provider.chat_stream(REQUEST)
    assert list(stream) == events
    assert stream.response() == ChatResponse(
        (TextPart(text="ab"),), finish_reason="stop", id="r", provider="mock"
    )
    assert provider.last_request == REQUEST
    with pytest.raises(MockScriptExhausted, match="mock: call 2 has no scripted stream"):
        provider.chat_stream(REQUEST)


def test_a_scripted_stream_that_fails_after_its_answer_began_is_a_call_made() -> None:
    # As an HTTP provider's stream: made, and maybe billed, at a cost nothing says; the
    # mock's said nothing was paid.
    from allama.errors import paid_for

    began: list[Any] = [ResponseStart(id="r"), TextDelta(index=0, text="hel")]
    provider = MockStreamingProvider([[*began, ServerError("died")], began])
    for _ in range(2):  # failed by an error, then ended early
        with pytest.raises((ServerError, IncompleteStreamError)) as failed:
            list(provider.chat_stream(REQUEST))
        assert [entry["usage"] for entry in paid_for(failed.value)] == [{}]
    # Before any of its answer, nothing says it was billed.
    provider = MockStreamingProvider([[ResponseStart(id="r"), ServerError("died")]])
    with pytest.raises(ServerError) as failed:
        list(provider.chat_stream(REQUEST))
    assert paid_for(failed.value) == []


def test_streaming_mock_errors_inside_a_stream_end_it() -> None:
    error = NetworkError("reset")
    provider = MockStreamingProvider(
        [[UsageEvent(usage=Usage(input_tokens=4)), TextDelta(index=0, text="x"), error]],
        name="s",
    )
    stream = provider.chat_stream(REQUEST)
    seen: list[StreamEvent] = []
    with pytest.raises(NetworkError) as caught:
        seen.extend(stream)
    assert (type(caught.value), caught.value.message) == (NetworkError, "reset")
    assert (caught.value.provider, error.provider) == ("s", None)
    assert len(seen) == 2
    assert stream.collector.response_metadata().usage == Usage(input_tokens=4)


def test_streaming_mock_setup_errors_and_chat() -> None:
    setup = ServerError("refused")
    response = ChatResponseBuilder().tool_call("c", "f", {"x": 1}).usage(1, 2).build()
    provider = (
        MockStreamingProvider(name="s")
        .then_setup_error(setup)
        .then_response(response)
        .then_stream([TextDelta(index=0, text="unfinished")])
    )
    with pytest.raises(ServerError) as caught:
        provider.chat_stream(REQUEST)
    assert (type(caught.value), caught.value.message) == (ServerError, "refused")
    assert (caught.value.provider, setup.provider) == ("s", None)
    assert provider.chat(REQUEST) == response.model_copy(update={"provider": "s", "model": "m"})
    with pytest.raises(IncompleteStreamError):
        provider.chat(REQUEST)
    assert provider.call_count == 3
    assert repr(provider) == "MockStreamingProvider(name='s', remaining=0)"


def test_streaming_mock_constructors() -> None:
    assert MockStreamingProvider.with_text("hello").chat(REQUEST).text() == "hello"
    call = MockStreamingProvider.with_tool_call("c", "f", [1]).chat(REQUEST)
    assert call.tool_calls() == (ToolCall(id="c", name="f", arguments="[1]"),)
    two = MockStreamingProvider.from_responses(
        [ChatResponseBuilder().text("1").build(), ChatResponseBuilder().text("2").build()]
    )
    assert [two.chat(REQUEST).text(), two.chat(REQUEST).text()] == ["1", "2"]


def test_streaming_mock_async() -> None:
    error = NetworkError("reset")
    provider = (
        MockStreamingProvider.with_text("one")
        .then_stream([TextDelta(index=0, text="x"), error])
        .then_setup_error(ServerError("setup"))
        .then_response(ChatResponseBuilder().text("four").build())
    )

    async def main() -> list[str | None]:
        first = await provider.achat(REQUEST)
        stream = await provider.achat_stream(REQUEST)
        with pytest.raises(NetworkError):
            await stream.response()
        with pytest.raises(ServerError):
            await provider.achat_stream(REQUEST)
        last = await provider.achat(REQUEST)
        return [first.text(), last.text()]

    assert run(main()) == ["one", "four"]
    assert provider.call_count == 4


# FunctionProvider


def test_function_provider_answers_from_the_request() -> None:
    def echo(request: ChatRequest) -> ChatResponse:
        text = request.messages[-1].text()
        if text == "fail":
            raise ServerError("asked to fail")
        return ChatResponseBuilder().text(f"echo: {text}").build()

    provider = FunctionProvider(echo, name="echo")
    assert provider.chat(REQUEST).text() == "echo: first"
    assert provider.chat(REQUEST).provider == "echo"
    with pytest.raises(ServerError):
        provider.chat(ChatRequest("m").user("fail"))

    async def main() -> list[str | None]:
        answer = await provider.achat(OTHER)
        stream = await provider.achat_stream(OTHER)
        return [answer.text(), (await stream.response()).text()]

    assert run(main()) == ["echo: second", "echo: second"]
    assert provider.chat_stream(REQUEST).response().text() == "echo: first"
    assert provider.call_count == 6


# A scripted error raised again


BUSY = OverloadedError("busy", context=ErrorContext(status=529, metadata={"team": "infra"}))
"""A test module's constant, scripted by many tests."""


def _usage(tokens: int) -> UsageEvent:
    return UsageEvent(usage=Usage(input_tokens=tokens, output_tokens=tokens // 10))


class Person(BaseModel):
    name: str
    age: int


PERSON = ChatRequest("m").user("Ada is 36.")


def _retrying(provider: MockProvider | MockStreamingProvider, attempts: int = 3) -> Any:
    return RetryingProvider(provider, RetryPolicy(max_attempts=attempts), sleep=lambda _: None)


def test_an_error_scripted_twice_in_one_extraction_counts_each_call_once() -> None:
    provider = MockStreamingProvider([[_usage(10), BUSY], [_usage(20), BUSY]]).then_structured(
        Person(name="Ada", age=36), usage=Usage(input_tokens=30, output_tokens=3)
    )
    with allama.extract_stream(_retrying(provider), Person, PERSON) as stream:
        extracted = stream.finish()
    assert extracted.metadata.usage == Usage(input_tokens=60, output_tokens=6)


def test_an_error_raised_again_holds_what_was_scripted_not_what_an_earlier_raise_recorded() -> None:
    first = MockStreamingProvider([[_usage(50), BUSY]] * 3)
    with (
        pytest.raises(OverloadedError) as caught,
        allama.extract_stream(_retrying(first), Person, PERSON) as stream,
    ):
        stream.finish()
    record = ExtractionMetadata.from_error(caught.value)
    assert record is not None and record.usage == Usage(input_tokens=150, output_tokens=15)

    # Another extraction, later, whose provider raises the same error at once: nothing paid,
    # one attempt, and the context the script gave it.
    with pytest.raises(OverloadedError) as caught:
        allama.extract(_retrying(MockProvider([BUSY]), 1), Person, PERSON)
    raised = caught.value
    assert (raised.message, raised.status, raised.provider) == ("busy", 529, "mock")
    assert raised.context.metadata["team"] == "infra"
    assert raised.context.metadata["allama.retry"] == {"attempts": 1, "gave_up": "max_attempts"}
    record = ExtractionMetadata.from_error(raised)
    assert record is not None and (record.passes, record.usage) == (0, None)
    assert BUSY.context.to_dict() == {"status": 529, "metadata": {"team": "infra"}}
    assert raised is not BUSY
