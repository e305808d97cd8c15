"""Three failures of an answer, said as what they are.

A provider's refusal of the output (Groq's `json_validate_failed`) that comes in a stream
after a piece of the answer is the `ParseError` holding the refused output, as at the
stream's opening, never asked again. A floor not met names the provider and the model that
answered, streamed or decided. An output a stop sequence of the request cut inside its JSON
value is a `TruncatedError` that says so, never asked again (the same `stop` would cut it
again); the same output without `stop` stays a `ParseError`, asked again under `retries`.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
from pydantic import BaseModel
from tests._recording import provider

import allama
from allama import (
    ChatCapability,
    ChatRequest,
    ChatResponse,
    EnforcementBelowError,
    Error,
    ExtractionMode,
    Extractor,
    FailoverProvider,
    ParseError,
    RequestField,
    SchemaEnforcement,
    TruncatedError,
    Usage,
    Warning,
)
from allama.errors import RejectedOutputError, ServerError
from allama.mock import ChatResponseBuilder, MockProvider, MockStreamingProvider
from allama.types import (
    BlockStart,
    FinishReason,
    ResponseStart,
    StreamBlockType,
    TextDelta,
    UsageEvent,
)

MODEL = "moonshotai/kimi-k2-instruct-0905"
FAILED = '{"name":"Ada","year":"1843"}'
NO_COUNTS = "no token counts came with a call that was made (its answer cut off, say)"
REFUSED_AT_YEAR = (
    'groq: failed to parse the output in `native` mode: at `year`: invalid type: string "1843", '
    "expected an integer"
)


class Person(BaseModel):
    name: str
    year: int


def _chunk(delta: dict[str, Any]) -> str:
    body = {
        "id": "x",
        "object": "chat.completion.chunk",
        "created": 1,
        "model": MODEL,
        "choices": [{"index": 0, "delta": delta, "finish_reason": None}],
    }
    return f"data: {json.dumps(body)}\n\n"


def _refused_midway() -> tuple[int, bytes]:
    """Groq's stream: a chunk with the role and a piece of the answer, then its refusal of
    the output as an error event."""
    error = {
        "error": {
            "message": "Generated JSON does not match the expected schema.",
            "type": "invalid_request_error",
            "code": "json_validate_failed",
            "failed_generation": FAILED,
            "status_code": 400,
        }
    }
    body = _chunk({"role": "assistant", "content": '{"name":'})
    return 200, f"{body}event: error\ndata: {json.dumps(error)}\n\n".encode()


def _native() -> ChatRequest:
    return ChatRequest(MODEL).user("Ada, 1843").with_option(ExtractionMode.NATIVE)


def _assert_refused(error: ParseError) -> None:
    assert str(error) == REFUSED_AT_YEAR
    assert (error.raw, error.path, error.response) == (FAILED, "year", None)
    cause = error.__cause__
    assert isinstance(cause, RejectedOutputError)
    assert (cause.status, cause.failed_output) == (400, FAILED)
    # The call was made, its usage unknown: not a pass, not free.
    assert (error.metadata.passes, error.metadata.usage) == (0, Usage())
    assert error.metadata.cost_missing == NO_COUNTS
    assert allama.ExtractionMetadata.from_error(error) is error.metadata
    assert (error.context.provider, error.context.model) == ("groq", MODEL)


def test_a_refusal_after_a_piece_of_the_answer_is_the_parse_error_holding_it() -> None:
    groq, recorder = provider("groq", _refused_midway())
    texts: list[str] = []

    with Extractor(retries=2).extract_stream(groq, Person, _native()) as stream:
        with pytest.raises(ParseError) as caught:
            for event in stream:
                if isinstance(event, TextDelta):
                    texts.append(event.text)
        error = caught.value
        # `finish()` raises the same failure, not the provider's error.
        with pytest.raises(ParseError) as again:
            stream.finish()

    assert texts == ['{"name":']
    assert len(recorder.bodies) == 1  # a stream is not asked again
    _assert_refused(error)
    assert again.value is error
    assert again.value.__cause__ is error.__cause__


def test_a_refusal_after_a_piece_of_the_answer_at_finish() -> None:
    groq, recorder = provider("groq", _refused_midway())

    with (
        Extractor(retries=2).extract_stream(groq, Person, _native()) as stream,
        pytest.raises(ParseError) as caught,
    ):
        stream.finish()

    assert len(recorder.bodies) == 1
    _assert_refused(caught.value)


def test_a_refusal_after_a_piece_of_the_answer_async() -> None:
    groq, recorder = provider("groq", _refused_midway())

    async def run() -> tuple[ParseError, ParseError]:
        async with Extractor(retries=2).aextract_stream(groq, Person, _native()) as stream:
            with pytest.raises(ParseError) as caught:
                async for _ in stream:
                    pass
            with pytest.raises(ParseError) as again:
                await stream.finish()
        return caught.value, again.value

    error, again = asyncio.run(run())

    assert len(recorder.bodies) == 1
    _assert_refused(error)
    assert again is error


def test_a_refusal_after_a_piece_keeps_the_usage_the_stream_reported() -> None:
    refusal = RejectedOutputError("does not match the schema", failed_output='{"name":"Ada"}')
    events: list[Any] = [
        ResponseStart(model="served-1"),
        BlockStart(index=0, block_type=StreamBlockType.TEXT),
        TextDelta(index=0, text='{"name":'),
        UsageEvent(usage=Usage(input_tokens=12, output_tokens=4)),
        refusal,
    ]
    streaming = MockStreamingProvider([events])

    request = ChatRequest("m").user("Ada")
    with (
        Extractor(retries=1).extract_stream(streaming, Person, request) as stream,
        pytest.raises(ParseError) as caught,
    ):
        stream.finish()

    error = caught.value
    assert streaming.call_count == 1
    assert str(error) == "mock: failed to parse the output in `native` mode: missing field `year`"
    assert error.raw == '{"name":"Ada"}'
    # Caused by the provider's refusal as raised: the scripted one, raised afresh.
    cause = error.__cause__
    assert isinstance(cause, RejectedOutputError)
    assert (cause.message, cause.failed_output) == ("does not match the schema", '{"name":"Ada"}')
    assert (error.metadata.passes, error.metadata.usage) == (
        0,
        Usage(input_tokens=12, output_tokens=4),
    )


def _approximate(text: str) -> ChatResponse:
    return (
        ChatResponseBuilder()
        .text(text)
        .model("served-1")
        .warning(Warning.approximated(RequestField.RESPONSE_FORMAT, "written into the prompt"))
        .usage(10, 5)
        .build()
    )


BELOW = "schema enforcement `approximate` is below the required `exact`: written into the prompt"


def test_a_streamed_floor_error_names_the_model_that_answered() -> None:
    streaming = MockStreamingProvider.from_responses([_approximate('{"name":"Ada","year":1843}')])
    extractor = Extractor(min_enforcement=SchemaEnforcement.EXACT)

    with (
        extractor.extract_stream(streaming, Person, _native()) as stream,
        pytest.raises(EnforcementBelowError) as caught,
    ):
        stream.finish()

    error = caught.value
    assert str(error) == BELOW
    assert (error.context.provider, error.context.model) == ("mock", "served-1")
    assert error.as_log()["model"] == "served-1"


def test_a_streamed_floor_error_names_the_model_async() -> None:
    streaming = MockStreamingProvider.from_responses([_approximate('{"name":"Ada","year":1843}')])
    extractor = Extractor(min_enforcement=SchemaEnforcement.EXACT)

    async def run() -> None:
        async with extractor.aextract_stream(streaming, Person, _native()) as stream:
            await stream.finish()

    with pytest.raises(EnforcementBelowError) as caught:
        asyncio.run(run())

    assert (caught.value.context.provider, caught.value.context.model) == ("mock", "served-1")


def _choice_failover(*answers: ChatResponse) -> FailoverProvider:
    """A failover whose first provider is overloaded; its second answers with a choice
    format (a plain-text decision)."""
    choice = [ChatCapability.CHOICE_OUTPUT]
    overloaded = ServerError("overloaded").with_retryable(True)
    first = MockProvider([overloaded], name="first").with_supported_chat_capabilities(choice)
    second = MockProvider(list(answers), name="second").with_supported_chat_capabilities(choice)
    return FailoverProvider([first, second])


def test_a_decision_below_the_floor_names_the_provider_and_model_that_answered() -> None:
    failover = _choice_failover(_approximate("No"))
    extractor = Extractor(min_enforcement=SchemaEnforcement.EXACT)

    with pytest.raises(EnforcementBelowError) as caught:
        extractor.decide(failover, bool, ChatRequest("m").user("Is fire cold?"))

    error = caught.value
    assert str(error) == BELOW
    assert (error.context.provider, error.context.model) == ("second", "served-1")


def test_a_decision_outside_the_options_names_the_provider_and_model_that_answered() -> None:
    answer = ChatResponseBuilder().text("Perhaps").model("served-1").build()

    with pytest.raises(ParseError) as caught:
        Extractor().decide(_choice_failover(answer), bool, ChatRequest("m").user("Cold?"))

    error = caught.value
    assert str(error) == (
        "second: failed to parse the output in `native` mode: the answer is not one of the "
        "options of bool"
    )
    assert (error.context.provider, error.context.model) == ("second", "served-1")


class Tagged(BaseModel):
    name: str
    tags: list[str]


CUT = '{"name":"Ada","tags": ['
"""The answer a stop sequence `]` cut inside its value."""
AT_STOP = (
    'mock: the output ended at a stop sequence the request sets ("]", "STOP-HERE"), before '
    "the structured output was complete (`native` mode): leave `stop` out of an extraction"
)


def _stopped(text: str = CUT) -> ChatResponse:
    return ChatResponseBuilder().text(text).finish_reason(FinishReason.STOP).usage(9, 7).build()


def _with_stop() -> ChatRequest:
    return (
        ChatRequest("m").user("Ada").with_option(ExtractionMode.NATIVE).with_stop("]", "STOP-HERE")
    )


def _assert_cut_at_stop(error: TruncatedError) -> None:
    assert str(error) == AT_STOP
    assert (error.finish_reason, error.stop) == (FinishReason.STOP, ["]", "STOP-HERE"])
    assert error.response is not None and error.response.text() == CUT
    assert error.metadata.passes == 1
    assert error.metadata.usage == Usage(input_tokens=9, output_tokens=7)


def test_an_output_cut_inside_its_value_at_a_stop_sequence_is_truncated_not_asked_again() -> None:
    mock = MockProvider([_stopped(), _stopped('{"name":"Ada","tags":["x"]}')])

    with pytest.raises(TruncatedError) as caught:
        Extractor(retries=2).extract(mock, Tagged, _with_stop())

    assert mock.call_count == 1
    error = caught.value
    _assert_cut_at_stop(error)
    # The stop sequences are the caller's own text: out of the log view.
    log = error.as_log()
    assert log["message"] == (
        "mock: the output ended at a stop sequence the request sets, before the structured "
        "output was complete (`native` mode): leave `stop` out of an extraction"
    )
    assert "STOP-HERE" not in str(log) and "STOP-HERE" not in str(log.to_dict())
    # And out of the repr, as the model's text is.
    assert repr(error).startswith(
        "TruncatedError(provider='mock', mode='native', finish_reason=FinishReason('stop'), "
        "output_tokens=7, input_tokens=9, stop=[<withheld 1 chars>, <withheld 9 chars>], "
        "response=<withheld>, metadata="
    )
    assert "STOP-HERE" not in repr(error)
    again = Error.from_json(error.to_json())
    assert isinstance(again, TruncatedError)
    assert (str(again), again.stop, again.finish_reason) == (AT_STOP, ["]", "STOP-HERE"], "stop")


@pytest.mark.parametrize(
    "cut", ['```json\n{"name":"Ada","tags":["x",', 'Here it is: {"name":"Ada","tags":["x",']
)
def test_an_output_cut_at_a_stop_sequence_after_prose_or_a_fence_is_truncated(cut: str) -> None:
    """The value after a fence or prose, cut inside: the same stop cuts the next answer."""
    mock = MockProvider([_stopped(cut), _stopped('{"name":"Ada","tags":["x"]}')])

    with pytest.raises(TruncatedError):
        Extractor(retries=2, repair=True).extract(mock, Tagged, _with_stop())

    assert mock.call_count == 1


def test_an_output_cut_at_a_stop_sequence_async() -> None:
    mock = MockProvider([_stopped(), _stopped('{"name":"Ada","tags":["x"]}')])

    with pytest.raises(TruncatedError) as caught:
        asyncio.run(Extractor(retries=2).aextract(mock, Tagged, _with_stop()))

    assert mock.call_count == 1
    _assert_cut_at_stop(caught.value)


def test_an_output_cut_at_a_stop_sequence_streamed() -> None:
    mock = MockProvider([_stopped()])

    with (
        Extractor(retries=2).extract_stream(mock, Tagged, _with_stop()) as stream,
        pytest.raises(TruncatedError) as caught,
    ):
        stream.finish()

    assert mock.call_count == 1
    _assert_cut_at_stop(caught.value)


def test_an_output_cut_at_a_stop_sequence_streamed_async() -> None:
    mock = MockProvider([_stopped()])

    async def run() -> None:
        async with Extractor(retries=2).aextract_stream(mock, Tagged, _with_stop()) as stream:
            await stream.finish()

    with pytest.raises(TruncatedError) as caught:
        asyncio.run(run())

    assert mock.call_count == 1
    _assert_cut_at_stop(caught.value)


CUT_DETAIL = "Expecting value: line 1 column 24 (char 23)"


def test_the_same_output_without_stop_is_a_parse_error_asked_again() -> None:
    mock = MockProvider([_stopped(), _stopped()])
    request = ChatRequest("m").user("Ada").with_option(ExtractionMode.NATIVE)

    with pytest.raises(ParseError) as caught:
        Extractor(retries=1).extract(mock, Tagged, request)

    assert mock.call_count == 2
    assert str(caught.value) == f"mock: failed to parse the output in `native` mode: {CUT_DETAIL}"
    assert caught.value.metadata.passes == 2


def test_text_broken_before_its_end_is_a_parse_error_whatever_the_stop() -> None:
    # Not cut short: a character no JSON takes there. Asked again, as before.
    broken = '{"name" "Ada"'
    mock = MockProvider([_stopped(broken), _stopped('{"name":"Ada","tags":["x"]}')])

    got = Extractor(retries=1).extract(mock, Tagged, _with_stop())

    assert got.value == Tagged(name="Ada", tags=["x"])
    assert mock.call_count == 2


def test_stop_sequences_the_provider_dropped_cut_nothing() -> None:
    dropped = Warning.unsupported(RequestField.STOP, "stop sequences are not supported")
    answer = (
        ChatResponseBuilder().text(CUT).finish_reason(FinishReason.STOP).warning(dropped).build()
    )
    mock = MockProvider([answer])

    with pytest.raises(ParseError) as caught:
        Extractor().extract(mock, Tagged, _with_stop())

    assert str(caught.value) == f"mock: failed to parse the output in `native` mode: {CUT_DETAIL}"


# Anthropic says which stop sequence ended an answer: one it ended otherwise was not cut.


def _claude(text: str, stop_reason: str, sequence: str | None) -> tuple[int, dict[str, Any]]:
    return (
        200,
        {
            "id": "msg_1",
            "type": "message",
            "role": "assistant",
            "model": "claude-sonnet-4-5",
            "content": [{"type": "text", "text": text}],
            "stop_reason": stop_reason,
            "stop_sequence": sequence,
            "usage": {"input_tokens": 5, "output_tokens": 5},
        },
    )


def test_anthropic_ending_its_turn_with_unfinished_json_is_asked_again_whatever_the_stop() -> None:
    from tests._recording import provider as recorded

    claude, recorder = recorded(
        "anthropic",
        _claude('{"name": "bolt", "qty": ', "end_turn", None),
        _claude('{"name": "bolt", "qty": 3}', "end_turn", None),
    )
    request = ChatRequest("claude-sonnet-4-5").user("x").with_stop("END-OF-RECORD")

    class Item(BaseModel):
        name: str
        qty: int

    got = Extractor(retries=1).extract(claude, Item, request)
    assert got.value == Item(name="bolt", qty=3)
    assert len(recorder.bodies) == 2
    # Ended at the sequence, Anthropic says so: cut, and not asked again.
    claude, recorder = recorded(
        "anthropic", _claude('{"name": "bolt", "qty": ', "stop_sequence", "END-OF-RECORD")
    )
    with pytest.raises(TruncatedError):
        Extractor(retries=1).extract(claude, Item, request)
    assert len(recorder.bodies) == 1


# The stop sequences that were sent decide, not whether any was dropped; a host of
# Anthropic's dialect that is not Anthropic's API is not taken at its `end_turn`.


class Item(BaseModel):
    name: str
    qty: int


ITEM_CUT = '{"name": "bolt", "qty": '


def _at_stop(provider_name: str, sequences: str) -> str:
    return (
        f"{provider_name}: the output ended at a stop sequence the request sets ({sequences}), "
        "before the structured output was complete (`native` mode): leave `stop` out of an "
        "extraction"
    )


def _gemini(text: str) -> tuple[int, dict[str, Any]]:
    return (
        200,
        {
            "candidates": [
                {
                    "content": {"role": "model", "parts": [{"text": text}]},
                    "finishReason": "STOP",
                    "index": 0,
                }
            ],
            "usageMetadata": {"promptTokenCount": 5, "candidatesTokenCount": 5},
            "modelVersion": "gemini-2.5-flash",
        },
    )


def _chat(text: str) -> tuple[int, dict[str, Any]]:
    return (
        200,
        {
            "id": "c1",
            "object": "chat.completion",
            "created": 1,
            "model": "llama-3.3-70b-versatile",
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": text},
                    "finish_reason": "stop",
                }
            ],
            "usage": {"prompt_tokens": 5, "completion_tokens": 5, "total_tokens": 10},
        },
    )


def test_anthropic_naming_the_sequence_cuts_though_another_was_left_out() -> None:
    # " " is left out with a warning (Anthropic refuses a stop of only whitespace); "END",
    # sent, ended the answer, as Anthropic says.
    claude, recorder = provider(
        "anthropic",
        _claude(ITEM_CUT, "stop_sequence", "END"),
        _claude('{"name": "bolt", "qty": 3}', "end_turn", None),
    )
    request = ChatRequest("claude-sonnet-4-5").user("x").with_stop("END", " ")

    with pytest.raises(TruncatedError) as caught:
        Extractor(retries=1).extract(claude, Item, request)

    assert [body["stop_sequences"] for body in recorder.bodies] == [["END"]]
    assert str(caught.value) == _at_stop("anthropic", '"END"')
    assert caught.value.stop == ["END"]
    assert caught.value.metadata.passes == 1


def test_anthropic_naming_the_sequence_cuts_though_another_was_left_out_async() -> None:
    claude, recorder = provider("anthropic", _claude(ITEM_CUT, "stop_sequence", "END"))
    request = ChatRequest("claude-sonnet-4-5").user("x").with_stop("END", " ")

    with pytest.raises(TruncatedError) as caught:
        asyncio.run(Extractor(retries=1).aextract(claude, Item, request))

    assert len(recorder.bodies) == 1
    assert caught.value.stop == ["END"]


def test_gemini_cut_by_one_of_the_five_stops_sent_of_six_is_truncated() -> None:
    gemini, recorder = provider("gemini", _gemini(ITEM_CUT))
    request = ChatRequest("gemini-2.5-flash").user("x").with_stop("A", "B", "C", "D", "E", "F")

    with pytest.raises(TruncatedError) as caught:
        Extractor(retries=1).extract(gemini, Item, request)

    assert len(recorder.bodies) == 1
    assert recorder.bodies[0]["generationConfig"]["stopSequences"] == ["A", "B", "C", "D", "E"]
    assert str(caught.value) == _at_stop("gemini", '"A", "B", "C", "D", "E"')
    assert caught.value.stop == ["A", "B", "C", "D", "E"]


def test_chat_completions_cut_by_one_of_the_four_stops_sent_of_five_is_truncated() -> None:
    groq, recorder = provider("groq", _chat(ITEM_CUT))
    request = ChatRequest("llama-3.3-70b-versatile").user("x").with_stop("A", "B", "C", "D", "E")
    request = request.with_option(ExtractionMode.NATIVE)

    with pytest.raises(TruncatedError) as caught:
        Extractor(retries=1).extract(groq, Item, request)

    assert len(recorder.bodies) == 1
    assert recorder.bodies[0]["stop"] == ["A", "B", "C", "D"]
    assert caught.value.stop == ["A", "B", "C", "D"]


def test_stops_all_left_out_cut_nothing_on_an_anthropic_compatible_host() -> None:
    compatible, recorder = provider(
        "anthropic-compatible",
        _claude(ITEM_CUT, "end_turn", None),
        _claude('{"name": "bolt", "qty": 3}', "end_turn", None),
        base_url="http://127.0.0.1:9",
    )
    request = ChatRequest("qwen3").user("x").with_stop(" ", "\n")
    request = request.with_option(ExtractionMode.NATIVE)

    got = Extractor(retries=1).extract(compatible, Item, request)

    assert got.value == Item(name="bolt", qty=3)
    assert ["stop_sequences" in body for body in recorder.bodies] == [False, False]


@pytest.mark.parametrize("stop_reason", ["end_turn", "stop_sequence"])
def test_an_anthropic_compatible_host_naming_no_sequence_is_cut_by_the_stop(
    stop_reason: str,
) -> None:
    # vLLM and SGLang (older ones) answer a matched stop as `end_turn`, naming none.
    compatible, recorder = provider(
        "anthropic-compatible",
        _claude(ITEM_CUT, stop_reason, None),
        _claude('{"name": "bolt", "qty": 3}', "end_turn", None),
        base_url="http://127.0.0.1:9",
    )
    request = ChatRequest("qwen3").user("x").with_stop("}").with_option(ExtractionMode.NATIVE)

    with pytest.raises(TruncatedError) as caught:
        Extractor(retries=2).extract(compatible, Item, request)

    assert len(recorder.bodies) == 1
    assert str(caught.value) == _at_stop("anthropic-compatible", '"}"')
    assert caught.value.metadata.passes == 1


@pytest.mark.parametrize(
    ("preset", "options"),
    [
        ("anthropic", {}),
        ("azure-anthropic", {"base_url": "https://r.services.ai.azure.com/anthropic"}),
    ],
)
def test_anthropics_own_api_ending_its_turn_is_not_cut(preset: str, options: Any) -> None:
    claude, recorder = provider(
        preset,
        _claude(ITEM_CUT, "end_turn", None),
        _claude('{"name": "bolt", "qty": 3}', "end_turn", None),
        **options,
    )
    request = ChatRequest("claude-sonnet-4-5").user("x").with_stop("}")

    got = Extractor(retries=1).extract(claude, Item, request)

    assert got.value == Item(name="bolt", qty=3)
    assert len(recorder.bodies) == 2


# Two keys a map reads as one are JSON the type does not take, not text that is no JSON.


class Labels(BaseModel):
    m: dict[int, str]


@pytest.mark.parametrize("mode", [ExtractionMode.NATIVE, ExtractionMode.FORCED_TOOL])
def test_keys_read_as_one_are_said_on_a_retry_as_a_mismatch_at_their_place(
    mode: ExtractionMode,
) -> None:
    def answer(text: str) -> ChatResponse:
        if mode is ExtractionMode.FORCED_TOOL:
            return ChatResponseBuilder().tool_call("c1", "submit_structured_output", text).build()
        return ChatResponseBuilder().text(text).build()

    mock = MockProvider([answer('{"m": {"1": "a", "01": "b"}}'), answer('{"m": {"1": "a"}}')])

    got = Extractor(retries=1).extract(mock, Labels, ChatRequest("m").user("x").with_option(mode))

    assert got.value == Labels(m={1: "a"})
    retry = mock.last_request
    assert retry is not None
    said = (
        "could not be used: it did not match the schema at `m`: the keys `1` and `01` are the "
        "same key to the type in the object at `m`. "
    )
    if mode is ExtractionMode.FORCED_TOOL:
        assert retry.messages[-1].content == (
            f"The previous call {said}Call `submit_structured_output` once with arguments "
            "that match its schema."
        )
    else:
        assert retry.messages[-1].text() == (
            f"The previous reply {said}Reply again with only the JSON value, matching the "
            "schema exactly."
        )


def test_keys_read_as_one_after_prose_are_said_as_the_mismatch_repair_found() -> None:
    mock = MockProvider(['Here: {"m": {"1": "a", "01": "b"}}', '{"m": {"1": "a"}}'])

    Extractor(retries=1, repair=True).extract(mock, Labels, ChatRequest("m").user("x"))

    retry = mock.last_request
    assert retry is not None
    assert retry.messages[-1].text() == (
        "The previous reply could not be used: it did not match the schema at `m`: the keys "
        "`1` and `01` are the same key to the type in the object at `m`. Reply again with only "
        "the JSON value, matching the schema exactly."
    )
