"""An answer the provider refused itself (Groq's 400 `json_validate_failed`, the model's text
in `failed_generation`; its `tool_use_failed` with a forced tool, the call there) is the
model's output for that pass: asked again under `retries` as an answer that does not
validate is, a `ParseError` holding it otherwise, and counted as a call made whose usage is
unknown."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
from pydantic import BaseModel
from tests._recording import provider

import allama
from allama import ChatRequest, ExtractionMode, Extractor, ParseError, Usage
from allama.errors import REPORTED_USAGE_KEY, Error, RejectedOutputError

MODEL = "moonshotai/kimi-k2-instruct-0905"
FAILED = '{"name":"Ada","year":"1843"}'
GOOD = '{"name":"Ada","year":1843}'
NO_COUNTS = "no token counts came with a call that was made (its answer cut off, say)"
REFUSED = (
    400,
    {
        "error": {
            "message": "Generated JSON does not match the expected schema. Please adjust your "
            "prompt.",
            "type": "invalid_request_error",
            "code": "json_validate_failed",
            "failed_generation": FAILED,
        }
    },
)


class Person(BaseModel):
    name: str
    year: int


def _answer(text: str) -> tuple[int, dict[str, Any]]:
    return (
        200,
        {
            "id": "x",
            "object": "chat.completion",
            "created": 1,
            "model": MODEL,
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": text},
                    "finish_reason": "stop",
                }
            ],
            "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15},
        },
    )


def _refused(output: str) -> tuple[int, dict[str, Any]]:
    status, body = REFUSED
    return status, {"error": {**body["error"], "failed_generation": output}}


def _request() -> ChatRequest:
    return ChatRequest(MODEL).user("Ada, 1843")


ASKED_AGAIN = [
    {"role": "user", "content": "Ada, 1843"},
    {"role": "assistant", "content": FAILED},
    {
        "role": "user",
        "content": "The previous reply could not be used: it did not match the schema at "
        '`year`: invalid type: string "1843", expected an integer. Reply again with only '
        "the JSON value, matching the schema exactly.",
    },
]


def test_a_refused_answer_is_asked_again_as_the_same_answer_given_as_a_200_is() -> None:
    answered, by_answer = provider("groq", _answer(FAILED), _answer(GOOD))
    refused, by_refusal = provider("groq", REFUSED, _answer(GOOD))

    got = Extractor(retries=2).extract(refused, Person, _request())

    Extractor(retries=2).extract(answered, Person, _request())
    assert got.value == Person(name="Ada", year=1843)
    assert len(by_refusal.bodies) == 2
    assert by_refusal.bodies[1]["messages"] == ASKED_AGAIN
    assert by_refusal.bodies[1]["messages"] == by_answer.bodies[1]["messages"]
    # The refused call was made, its usage unknown: not a pass, but not free either.
    assert got.metadata.passes == 1
    assert got.metadata.usage == Usage(input_tokens=10, output_tokens=5)
    assert got.metadata.cost is None
    assert got.metadata.cost_missing == f"{NO_COUNTS} for one of its calls"


def test_a_refused_answer_is_asked_again_async() -> None:
    refused, recorder = provider("groq", REFUSED, _answer(GOOD))

    got = asyncio.run(Extractor(retries=1).aextract(refused, Person, _request()))

    assert got.value == Person(name="Ada", year=1843)
    assert [body["messages"] for body in recorder.bodies][1] == ASKED_AGAIN
    assert got.metadata.passes == 1
    assert got.metadata.usage == Usage(input_tokens=10, output_tokens=5)
    assert got.metadata.cost_missing == f"{NO_COUNTS} for one of its calls"


def _parse_error(run: Any) -> ParseError:
    with pytest.raises(ParseError) as caught:
        run()
    return caught.value


def test_a_refused_answer_without_retries_is_a_parse_error_holding_it() -> None:
    refused, recorder = provider("groq", REFUSED, _answer(GOOD))

    error = _parse_error(lambda: Extractor().extract(refused, Person, _request()))

    assert len(recorder.bodies) == 1
    assert error.raw == FAILED
    assert error.path == "year"
    assert error.detail == 'invalid type: string "1843", expected an integer'
    assert error.response is None
    assert str(error) == (
        "groq: failed to parse the output in `native` mode: at `year`: invalid type: string "
        '"1843", expected an integer'
    )
    # The model's text stays out of what is meant for logs.
    assert FAILED not in str(error.as_log())
    assert "1843" not in str(error.as_log())
    cause = error.__cause__
    assert isinstance(cause, RejectedOutputError)
    assert (cause.status, cause.failed_output, cause.retryable) == (400, FAILED, True)
    assert error.metadata.passes == 0
    assert error.metadata.usage == Usage()
    assert error.metadata.cost_missing == NO_COUNTS
    assert allama.ExtractionMetadata.from_error(error) is error.metadata


def test_a_refused_answer_without_retries_async() -> None:
    refused, recorder = provider("groq", REFUSED)

    error = _parse_error(lambda: asyncio.run(Extractor().aextract(refused, Person, _request())))

    assert len(recorder.bodies) == 1
    assert (error.raw, error.path, error.response) == (FAILED, "year", None)
    assert (error.metadata.passes, error.metadata.usage) == (0, Usage())
    assert error.metadata.cost_missing == NO_COUNTS


def test_retries_used_up_on_refused_answers_fail_with_the_last() -> None:
    second = '{"name":"Ada"}'
    refused, recorder = provider("groq", REFUSED, _refused(second))

    error = _parse_error(lambda: Extractor(retries=1).extract(refused, Person, _request()))

    assert len(recorder.bodies) == 2
    assert recorder.bodies[1]["messages"] == ASKED_AGAIN
    assert (error.raw, error.path, error.detail) == (second, None, "missing field `year`")
    assert (error.metadata.passes, error.metadata.usage) == (0, Usage())
    assert error.metadata.cost_missing == NO_COUNTS  # every call left its counts out


def test_an_empty_refused_answer_is_asked_again_as_an_empty_one() -> None:
    refused, recorder = provider("groq", _refused(""), _answer(GOOD))

    got = Extractor(retries=1).extract(refused, Person, _request())

    assert got.value == Person(name="Ada", year=1843)
    assert recorder.bodies[1]["messages"] == [
        {"role": "user", "content": "Ada, 1843"},
        {
            "role": "user",
            "content": "The previous reply could not be used: it contained no text. Reply "
            "again with only the JSON value, matching the schema exactly.",
        },
    ]


def test_an_answer_refused_that_the_type_takes_is_still_refused() -> None:
    # The provider checked the schema as it was sent; no response holds the value.
    refused, _ = provider("groq", _refused(GOOD))

    error = _parse_error(lambda: Extractor().extract(refused, Person, _request()))

    assert (error.raw, error.path) == (GOOD, None)
    assert error.detail == "the provider's own check of the output refused it"


def test_a_stream_refused_as_it_opens_is_a_parse_error_and_not_asked_again() -> None:
    # Groq takes no schema on a stream (it is sent in words): the refusal comes from any
    # provider that refuses an answer as a stream opens, which is read as the answer.
    refused, recorder = provider("groq", REFUSED, _answer(GOOD))
    request = _request().with_option(ExtractionMode.NATIVE)

    error = _parse_error(lambda: Extractor(retries=2).extract_stream(refused, Person, request))

    assert len(recorder.bodies) == 1
    assert recorder.bodies[0]["stream"] is True
    assert (error.raw, error.path, error.response) == (FAILED, "year", None)
    assert (error.metadata.passes, error.metadata.usage) == (0, Usage())
    assert error.metadata.cost_missing == NO_COUNTS


def test_a_stream_refused_as_it_opens_async() -> None:
    refused, recorder = provider("groq", REFUSED)
    request = _request().with_option(ExtractionMode.NATIVE)

    async def run() -> None:
        async with Extractor().aextract_stream(refused, Person, request):
            pass

    error = _parse_error(lambda: asyncio.run(run()))

    assert len(recorder.bodies) == 1
    assert (error.raw, error.path) == (FAILED, "year")
    assert (error.metadata.passes, error.metadata.usage) == (0, Usage())


def test_the_adapter_keeps_the_refused_answer_out_of_the_log_view() -> None:
    refused, _ = provider("groq", REFUSED)

    with pytest.raises(RejectedOutputError) as caught:
        refused.chat(_request())

    error = caught.value
    assert (error.kind, error.failed_output, error.retryable) == ("rejected_output", FAILED, True)
    assert error.context.metadata[REPORTED_USAGE_KEY] == {}
    assert "1843" not in repr(error)
    assert error.as_log()["failed_output_len"] == len(FAILED)
    assert "1843" not in str(error.as_log())
    again = Error.from_json(error.to_json())
    assert isinstance(again, RejectedOutputError)
    assert (again.failed_output, again.retryable, again.status) == (FAILED, True, 400)


def test_an_error_event_with_a_refused_answer_keeps_it() -> None:
    event = {"error": {**REFUSED[1]["error"], "status_code": 400}}
    stream = f"event: error\ndata: {json.dumps(event)}\n\n".encode()
    refused, _ = provider("groq", (200, stream))

    with pytest.raises(RejectedOutputError) as caught:
        for _ in refused.chat_stream(ChatRequest(MODEL).user("JSON, please")):
            pass

    assert (caught.value.failed_output, caught.value.status) == (FAILED, 400)


def _refused_event(*before: dict[str, Any]) -> tuple[int, bytes]:
    """Groq's refusal as the first event of a stream that opened with a 200 (after `before`,
    chunks that carry none of the answer)."""
    chunks = "".join(f"data: {json.dumps(chunk)}\n\n" for chunk in before)
    event = {"error": {**REFUSED[1]["error"], "status_code": 400}}
    return 200, f"{chunks}event: error\ndata: {json.dumps(event)}\n\n".encode()


def test_a_stream_refused_by_its_first_event_is_the_parse_error_a_refused_open_is() -> None:
    # Nothing of the answer was given: the refusal is the opening's, read as at open.
    by_event, recorder = provider("groq", _refused_event(), _answer(GOOD))
    at_open, _ = provider("groq", REFUSED)
    request = _request().with_option(ExtractionMode.NATIVE)

    error = _parse_error(lambda: Extractor(retries=2).extract_stream(by_event, Person, request))

    opened = _parse_error(lambda: Extractor().extract_stream(at_open, Person, request))
    assert len(recorder.bodies) == 1
    assert (error.raw, error.path, error.response) == (FAILED, "year", None)
    assert (
        str(error)
        == str(opened)
        == (
            "groq: failed to parse the output in `native` mode: at `year`: invalid type: string "
            '"1843", expected an integer'
        )
    )
    cause = error.__cause__
    assert isinstance(cause, RejectedOutputError)
    assert (cause.status, cause.failed_output) == (400, FAILED)
    # The call was made, its usage unknown.
    assert (error.metadata.passes, error.metadata.usage) == (0, Usage())
    assert error.metadata.cost_missing == NO_COUNTS
    assert allama.ExtractionMetadata.from_error(error) is error.metadata


def test_a_stream_refused_by_its_first_event_async() -> None:
    by_event, recorder = provider("groq", _refused_event())
    request = _request().with_option(ExtractionMode.NATIVE)

    async def run() -> None:
        async with Extractor().aextract_stream(by_event, Person, request):
            pass

    error = _parse_error(lambda: asyncio.run(run()))

    assert len(recorder.bodies) == 1
    assert (error.raw, error.path, error.response) == (FAILED, "year", None)
    assert isinstance(error.__cause__, RejectedOutputError)
    assert (error.metadata.passes, error.metadata.usage) == (0, Usage())
    assert error.metadata.cost_missing == NO_COUNTS


def test_a_stream_refused_after_a_chunk_without_content_is_read_as_at_open() -> None:
    # The chunk naming the role only gives none of the answer.
    start = {
        "id": "x",
        "object": "chat.completion.chunk",
        "created": 1,
        "model": MODEL,
        "choices": [{"index": 0, "delta": {"role": "assistant"}, "finish_reason": None}],
    }
    by_event, _ = provider("groq", _refused_event(start))
    request = _request().with_option(ExtractionMode.NATIVE)

    error = _parse_error(lambda: Extractor().extract_stream(by_event, Person, request))

    assert (error.raw, error.path) == (FAILED, "year")
    assert (error.metadata.passes, error.metadata.usage) == (0, Usage())


def test_a_tool_call_the_provider_refused_was_made_and_its_usage_is_unknown() -> None:
    """Groq's `tool_use_failed` follows a generation (the call in `failed_generation`): a
    call made, as `json_validate_failed`'s is, never a free one a budget overlooks. A call
    to another tool than the extraction's fails as that call answered would."""
    from allama import ExtractionMetadata, MissingToolCallError

    refused = (
        400,
        {
            "error": {
                "message": "Tool call validation failed: parameters did not match schema",
                "type": "invalid_request_error",
                "code": "tool_use_failed",
                "failed_generation": '{"name": "submit", "arguments": {"x": 1}}',
            }
        },
    )
    groq, recorder = provider("groq", refused)
    request = _request().with_option(ExtractionMode.FORCED_TOOL)
    with pytest.raises(MissingToolCallError) as caught:
        Extractor().extract(groq, Person, request)
    assert str(caught.value) == (
        "groq: the model did not call the extraction tool 'submit_structured_output'"
    )
    cause = caught.value.__cause__
    assert isinstance(cause, RejectedOutputError)
    assert cause.retryable
    assert cause.context.metadata[REPORTED_USAGE_KEY] == {}
    record = ExtractionMetadata.from_error(caught.value)
    assert record is not None
    assert (record.passes, record.cost, record.cost_missing) == (0, None, NO_COUNTS)
    assert len(recorder.bodies) == 1


# A forced tool's call the provider refused (Groq's 400 `tool_use_failed`, the call in
# `failed_generation` as `{"name", "arguments"}`): read as the pass's call, as a native
# answer refused is read as its text.

TOOL_MODEL = "llama-3.3-70b-versatile"
TOOL = "submit_structured_output"
FAILED_ARGUMENTS = '{"name":"Ada","year":"1843"}'


def _tool_refused(generation: str, message: str = "") -> tuple[int, dict[str, Any]]:
    return (
        400,
        {
            "error": {
                "message": message
                or f"Tool call validation failed: parameters for tool {TOOL} did not match "
                "schema: errors: [`/year`: expected integer, but got string]",
                "type": "invalid_request_error",
                "code": "tool_use_failed",
                "failed_generation": generation,
            }
        },
    )


TOOL_REFUSED = _tool_refused(
    json.dumps({"name": TOOL, "arguments": {"name": "Ada", "year": "1843"}})
)


def _called(arguments: str) -> tuple[int, dict[str, Any]]:
    call = {
        "id": "call_0",
        "type": "function",
        "function": {"name": TOOL, "arguments": arguments},
    }
    return (
        200,
        {
            "id": "x",
            "object": "chat.completion",
            "created": 1,
            "model": TOOL_MODEL,
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": None, "tool_calls": [call]},
                    "finish_reason": "tool_calls",
                }
            ],
            "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15},
        },
    )


def _tool_request() -> ChatRequest:
    return ChatRequest(TOOL_MODEL).user("Ada 1843")


CALLED_AGAIN = [
    {"role": "user", "content": "Ada 1843"},
    {
        "role": "assistant",
        "tool_calls": [
            {
                "id": "call_0",
                "type": "function",
                "function": {"name": TOOL, "arguments": FAILED_ARGUMENTS},
            }
        ],
    },
    {
        "role": "tool",
        "tool_call_id": "call_0",
        "content": "The previous call could not be used: it did not match the schema at "
        '`year`: invalid type: string "1843", expected an integer. Call '
        f"`{TOOL}` once with arguments that match its schema.",
    },
]


def test_a_refused_tool_call_is_asked_again_as_the_same_call_given_as_a_200_is() -> None:
    refused, by_refusal = provider("groq", TOOL_REFUSED, _called(GOOD))
    answered, by_answer = provider("groq", _called(FAILED_ARGUMENTS), _called(GOOD))

    got = Extractor(retries=2).extract(refused, Person, _tool_request())

    Extractor(retries=2).extract(answered, Person, _tool_request())
    assert got.value == Person(name="Ada", year=1843)
    assert got.metadata.mode is ExtractionMode.FORCED_TOOL  # the plan's, not asked for
    assert len(by_refusal.bodies) == 2
    assert by_refusal.bodies[1]["messages"] == CALLED_AGAIN
    assert by_refusal.bodies[1]["messages"] == by_answer.bodies[1]["messages"]
    # The refused call was made, its usage unknown: not a pass, but not free either.
    assert got.metadata.passes == 1
    assert got.metadata.usage == Usage(input_tokens=10, output_tokens=5)
    assert got.metadata.cost is None
    assert got.metadata.cost_missing == f"{NO_COUNTS} for one of its calls"


def test_a_refused_tool_call_is_asked_again_async() -> None:
    refused, recorder = provider("groq", TOOL_REFUSED, _called(GOOD))

    got = asyncio.run(Extractor(retries=1).aextract(refused, Person, _tool_request()))

    assert got.value == Person(name="Ada", year=1843)
    assert [body["messages"] for body in recorder.bodies][1] == CALLED_AGAIN
    assert got.metadata.passes == 1
    assert got.metadata.usage == Usage(input_tokens=10, output_tokens=5)
    assert got.metadata.cost_missing == f"{NO_COUNTS} for one of its calls"


def test_a_refused_tool_call_without_retries_is_a_parse_error_holding_its_arguments() -> None:
    refused, recorder = provider("groq", TOOL_REFUSED, _called(GOOD))

    error = _parse_error(lambda: Extractor().extract(refused, Person, _tool_request()))

    assert len(recorder.bodies) == 1
    assert (error.raw, error.path, error.response) == (FAILED_ARGUMENTS, "year", None)
    assert str(error) == (
        "groq: failed to parse the output in `forced_tool` mode: at `year`: invalid type: "
        'string "1843", expected an integer'
    )
    assert "1843" not in str(error.as_log())
    cause = error.__cause__
    assert isinstance(cause, RejectedOutputError)
    assert (cause.status, cause.retryable) == (400, True)
    assert cause.failed_output == TOOL_REFUSED[1]["error"]["failed_generation"]
    assert (error.metadata.passes, error.metadata.usage) == (0, Usage())
    assert error.metadata.cost_missing == NO_COUNTS


def test_retries_used_up_on_refused_tool_calls_fail_with_the_last() -> None:
    second = json.dumps({"name": TOOL, "arguments": {"name": "Ada"}})
    refused, recorder = provider("groq", TOOL_REFUSED, _tool_refused(second))

    error = _parse_error(lambda: Extractor(retries=1).extract(refused, Person, _tool_request()))

    assert len(recorder.bodies) == 2
    assert recorder.bodies[1]["messages"] == CALLED_AGAIN
    assert (error.raw, error.path, error.detail) == ('{"name":"Ada"}', None, "missing field `year`")
    assert (error.metadata.passes, error.metadata.usage) == (0, Usage())
    assert error.metadata.cost_missing == NO_COUNTS  # every call left its counts out


def test_no_call_where_one_was_required_is_asked_again_as_a_reply_without_one() -> None:
    # Groq's words when the model wrote no call: its `failed_generation` is empty.
    nothing = _tool_refused("", "Tool choice is required, but model did not call a tool")
    refused, recorder = provider("groq", nothing, _called(GOOD))

    got = Extractor(retries=1).extract(refused, Person, _tool_request())

    assert got.value == Person(name="Ada", year=1843)
    assert recorder.bodies[1]["messages"] == [
        {"role": "user", "content": "Ada 1843"},
        {
            "role": "user",
            "content": f"The previous reply could not be used: it did not call the `{TOOL}` "
            f"tool. Call `{TOOL}` once with the extracted data.",
        },
    ]
    assert (got.metadata.passes, got.metadata.cost_missing) == (
        1,
        f"{NO_COUNTS} for one of its calls",
    )


def test_a_call_in_words_the_provider_could_not_read_is_quoted_as_the_text_it_is() -> None:
    words = f'<function={TOOL}>{{"name": "Ada", "year": 1843}}</function>'
    refused, recorder = provider("groq", _tool_refused(words), _called(GOOD))

    got = Extractor(retries=1).extract(refused, Person, _tool_request())

    assert got.value == Person(name="Ada", year=1843)
    assert recorder.bodies[1]["messages"] == [
        {"role": "user", "content": "Ada 1843"},
        {"role": "assistant", "content": words},
        {
            "role": "user",
            "content": f"The previous reply could not be used: it did not call the `{TOOL}` "
            f"tool. Call `{TOOL}` once with the extracted data.",
        },
    ]


def test_a_refused_call_whose_arguments_the_type_takes_is_still_refused() -> None:
    taken = _tool_refused(json.dumps({"name": TOOL, "arguments": {"name": "Ada", "year": 1843}}))
    refused, _ = provider("groq", taken)

    error = _parse_error(lambda: Extractor().extract(refused, Person, _tool_request()))

    assert (error.raw, error.path) == (GOOD, None)
    assert error.detail == "the provider's own check of the output refused it"


def test_a_forced_tool_stream_refused_as_it_opens_is_a_parse_error_and_not_asked_again() -> None:
    refused, recorder = provider("groq", TOOL_REFUSED, _called(GOOD))

    error = _parse_error(
        lambda: Extractor(retries=2).extract_stream(refused, Person, _tool_request())
    )

    assert len(recorder.bodies) == 1
    assert recorder.bodies[0]["stream"] is True
    assert (error.raw, error.path, error.response) == (FAILED_ARGUMENTS, "year", None)
    assert isinstance(error.__cause__, RejectedOutputError)
    assert (error.metadata.passes, error.metadata.usage) == (0, Usage())
    assert error.metadata.cost_missing == NO_COUNTS


def _tool_refused_midway() -> tuple[int, bytes]:
    """Groq's refusal as an error event after a chunk of reasoning (its stream's shape)."""
    reasoning = {
        "id": "x",
        "object": "chat.completion.chunk",
        "created": 1,
        "model": TOOL_MODEL,
        "choices": [
            {"index": 0, "delta": {"role": "assistant", "reasoning": "Ada"}, "finish_reason": None}
        ],
    }
    event = {"error": {**TOOL_REFUSED[1]["error"], "status_code": 400}}
    return 200, (
        f"data: {json.dumps(reasoning)}\n\nevent: error\ndata: {json.dumps(event)}\n\n".encode()
    )


def test_a_forced_tool_stream_refused_midway_is_the_parse_error_a_refused_open_is() -> None:
    refused, recorder = provider("groq", _tool_refused_midway(), _called(GOOD))

    def run() -> None:
        with Extractor(retries=2).extract_stream(refused, Person, _tool_request()) as stream:
            for _ in stream:
                pass

    error = _parse_error(run)

    assert len(recorder.bodies) == 1
    assert (error.raw, error.path, error.response) == (FAILED_ARGUMENTS, "year", None)
    assert isinstance(error.__cause__, RejectedOutputError)
    assert (error.metadata.passes, error.metadata.usage) == (0, Usage())
    assert error.metadata.cost_missing == NO_COUNTS


def test_a_forced_tool_stream_refused_midway_async() -> None:
    refused, recorder = provider("groq", _tool_refused_midway())

    async def run() -> None:
        async with Extractor().aextract_stream(refused, Person, _tool_request()) as stream:
            async for _ in stream:
                pass

    error = _parse_error(lambda: asyncio.run(run()))

    assert len(recorder.bodies) == 1
    assert (error.raw, error.path) == (FAILED_ARGUMENTS, "year")
    assert (error.metadata.passes, error.metadata.usage) == (0, Usage())


def test_the_adapter_reads_a_refused_tool_call_as_a_refused_output() -> None:
    refused, _ = provider("groq", TOOL_REFUSED)

    with pytest.raises(RejectedOutputError) as caught:
        refused.chat(_tool_request())

    error = caught.value
    generation = TOOL_REFUSED[1]["error"]["failed_generation"]
    assert (error.kind, error.failed_output, error.retryable) == (
        "rejected_output",
        generation,
        True,
    )
    assert error.context.metadata[REPORTED_USAGE_KEY] == {}
    assert "1843" not in repr(error)
    assert "1843" not in str(error.as_log())


def test_an_error_event_with_a_refused_tool_call_keeps_it() -> None:
    refused, _ = provider("groq", _tool_refused_midway())

    with pytest.raises(RejectedOutputError) as caught:
        for _ in refused.chat_stream(_tool_request()):
            pass

    assert caught.value.failed_output == TOOL_REFUSED[1]["error"]["failed_generation"]
    assert caught.value.status == 400


def test_a_batch_keeps_the_tokens_of_a_refused_output_spent() -> None:
    """The run's limit per minute gives back the tokens of a request the provider refused
    unread (a 4xx); a refused output was read into the model, and keeps them."""
    from allama.batch._run import _refused_unread

    rejected = RejectedOutputError("refused", failed_output=FAILED).with_status(400)
    assert not _refused_unread(rejected.with_metadata(REPORTED_USAGE_KEY, {}))
    assert _refused_unread(Error("bad request").with_status(400))
