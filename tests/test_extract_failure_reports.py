"""What a failed extraction reports, as a probe of its failures found it wrong: the log view
of an extraction failure kept keys of its own (`extraction.passes`) without the tokens and
the cost a provider error raised mid-extraction logs (`allama.extraction`); a cost unknown
because several calls reported no usage was said of "one of its calls"; and a number too
large for a float (valid JSON: RFC 8259 sets numbers no limit) was told the model as "not
valid JSON", its place named twice, and in a `Secret[int]` field said too large for a
float where an integer goes."""

from __future__ import annotations

import json
from typing import Any

import pytest
from pydantic import BaseModel, Secret
from tests._recording import provider

import allama
from allama import ChatRequest, ChatResponse, Extractor, ParseError, Usage
from allama.errors import Error, RateLimitedError
from allama.mock import ChatResponseBuilder, MockProvider
from allama.wrappers import RetryingProvider, RetryPolicy

# The log view: one family of keys, the same figures, whichever way the extraction failed.


class Person(BaseModel):
    name: str


def _wrong(tokens_in: int = 1000, tokens_out: int = 500) -> ChatResponse:
    """An answer that does not fit `Person`, priced as gpt-4o's."""
    built = ChatResponseBuilder().text('{"nam": "Ada"}').usage(tokens_in, tokens_out)
    return built.model("gpt-4o-2024-08-06").provider("openai").build()


def _failed(third: ChatResponse | Error) -> Error:
    provider = MockProvider([_wrong(), _wrong(), third], name="openai")
    with pytest.raises(Error) as raised:
        Extractor(retries=2).extract(provider, Person, ChatRequest("gpt-4o").user("?"))
    return raised.value


def test_a_failed_extraction_logs_its_record_as_a_provider_error_mid_extraction_does() -> None:
    parse = _failed(_wrong())
    limited = _failed(RateLimitedError("slow down").with_provider("openai"))
    assert isinstance(parse, ParseError) and isinstance(limited, RateLimitedError)

    parse_record = parse.as_log()["allama.extraction"]
    limited_record = limited.as_log()["allama.extraction"]
    assert isinstance(parse_record, dict) and isinstance(limited_record, dict)
    # The same keys, three passes against two: the tokens and the cost of each.
    assert sorted(parse_record) == sorted(limited_record)
    assert (parse_record["passes"], parse_record["usage"]) == (
        3,
        {"input_tokens": 3000, "output_tokens": 1500},
    )
    assert (limited_record["passes"], limited_record["usage"]) == (
        2,
        {"input_tokens": 2000, "output_tokens": 1000},
    )
    parse_cost, limited_cost = parse_record["cost"], limited_record["cost"]
    assert isinstance(parse_cost, dict) and isinstance(limited_cost, dict)
    assert parse.metadata.cost is not None
    assert parse_cost["total"] == str(parse.metadata.cost.total)
    limited_metadata = allama.ExtractionMetadata.from_error(limited)
    assert limited_metadata is not None and limited_metadata.cost is not None
    assert limited_cost["total"] == str(limited_metadata.cost.total)
    assert parse.metadata.cost.total == limited_metadata.cost.total * 3 / 2
    # No key of a family of its own.
    assert not [key for key in parse.as_log() if key.startswith("extraction.")]

    assert str(parse.as_log()) == (
        "kind=extraction_parse provider=openai model=gpt-4o-2024-08-06 "
        "allama.extraction.mode=native allama.extraction.passes=3 "
        "allama.extraction.input_tokens=3000 allama.extraction.output_tokens=1500 "
        'message="openai: failed to parse the output in `native` mode"'
    )
    assert str(limited.as_log()) == (
        "kind=rate_limited provider=openai model=gpt-4o allama.extraction.mode=native "
        "allama.extraction.passes=2 allama.extraction.input_tokens=2000 "
        "allama.extraction.output_tokens=1000 message_len=9"
    )


def test_the_log_view_of_a_failure_leaves_out_the_output_and_reads_back() -> None:
    failure = _failed(_wrong())
    logged = json.dumps(failure.as_log().to_dict())
    assert "nam" not in logged and "Ada" not in logged
    # Serialised and read back, it logs the same.
    again = Error.from_json(failure.to_json())
    assert again.as_log().to_dict() == failure.as_log().to_dict()


# A cost unknown for several calls: how many of how many.

GROQ_MODEL = "moonshotai/kimi-k2-instruct-0905"
REFUSED = (
    400,
    {
        "error": {
            "message": "Generated JSON does not match the expected schema.",
            "type": "invalid_request_error",
            "code": "json_validate_failed",
            "failed_generation": '{"name":"Ada","year":"1843"}',
        }
    },
)
ANSWERED = (
    200,
    {
        "id": "x",
        "object": "chat.completion",
        "created": 1,
        "model": GROQ_MODEL,
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": '{"name":"Ada","year":1843}'},
                "finish_reason": "stop",
            }
        ],
        "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15},
    },
)


class Dated(BaseModel):
    name: str
    year: int


def test_a_cost_unknown_for_several_calls_counts_them() -> None:
    # Groq refuses five answers itself (`json_validate_failed`, no token counts), three to a
    # retrying wrapper, under an extraction that asks again once; the sixth is answered.
    refusing, recorder = provider("groq", *[REFUSED] * 5, ANSWERED)
    retrying = RetryingProvider(
        refusing, RetryPolicy(max_attempts=3, initial_backoff=0.0, jitter=0.0)
    )

    got = Extractor(retries=1).extract(retrying, Dated, ChatRequest(GROQ_MODEL).user("Ada"))

    assert len(recorder.bodies) == 6
    assert got.metadata.usage == Usage(input_tokens=10, output_tokens=5)
    assert got.metadata.cost is None
    assert got.metadata.cost_missing == (
        "no token counts came with a call that was made (its answer cut off, say) for 5 of "
        "its 6 calls"
    )


def test_a_cost_unknown_for_one_call_or_for_all_is_said_so() -> None:
    from allama import _prices

    at = 1.7e9
    priced = ("openai", "gpt-4o-2024-08-06", Usage(input_tokens=5, output_tokens=5), at)
    blank = ("openai", "gpt-4o-2024-08-06", Usage(), at)
    missing = _prices.NO_COUNTS
    assert _prices.price([priced, blank]) == f"{missing} for one of its calls"
    assert _prices.price([priced, blank, blank]) == f"{missing} for 2 of its 3 calls"
    # Every call left its counts out: the record's reason, of no one call.
    assert _prices.price([blank, blank]) == missing
    # A cost read back stands for calls uncounted: how many of them is not said.
    known = _prices.price([priced])
    assert isinstance(known, _prices.Cost)
    assert _prices.price([known, blank, blank]) == f"{missing} for 2 of its calls"


# A number too large for a float: a mismatch at its place, said once, of the field's kind.


class Reading(BaseModel):
    x: float


class Count(BaseModel):
    x: int


class Pin(BaseModel):
    x: Secret[int]


class Ratio(BaseModel):
    x: Secret[float]


REQUEST = ChatRequest("gpt-4.1-mini").user("the record")


def _retry_turn(tp: Any, output: str) -> str:
    scripted = MockProvider([output, '{"x": 1}'])
    Extractor(retries=1).extract(scripted, tp, REQUEST)
    turn = scripted.requests[-1].messages[-1]
    text = turn.content[0].text  # type: ignore[union-attr]
    assert isinstance(text, str)
    return text


def _refusal(tp: Any, output: str) -> ParseError:
    with pytest.raises(ParseError) as raised:
        allama.extract(MockProvider([output]), tp, REQUEST)
    return raised.value


@pytest.mark.parametrize(
    ("tp", "output", "detail"),
    [
        (Reading, '{"x": 1e400}', "the number `1e400` is too large for a floating point value"),
        (Reading, '{"x": -2E+999}', "the number `-2E+999` is too large for a floating point value"),
        (Reading, '{"x": 1' + "0" * 400 + "}", "a number is too large for a floating point value"),
        # Where an integer goes, the number written is a float's: that is what is wrong.
        (Count, '{"x": 1e400}', "invalid type: number `1e400`, expected an integer"),
        (Pin, '{"x": 1e400}', "invalid type: a secret floating point number, expected an integer"),
        (Ratio, '{"x": 1e400}', "a secret number is too large for a floating point value"),
    ],
)
def test_a_number_too_large_for_a_float_is_a_mismatch_at_its_place(
    tp: Any, output: str, detail: str
) -> None:
    error = _refusal(tp, output)
    assert (error.detail, error.path) == (detail, "x")
    assert str(error) == f"mock: failed to parse the output in `native` mode: at `x`: {detail}"
    assert _retry_turn(tp, output) == (
        f"The previous reply could not be used: it did not match the schema at `x`: {detail}. "
        "Reply again with only the JSON value, matching the schema exactly."
    )


def test_a_number_too_large_for_a_float_in_a_list_is_placed_once() -> None:
    class Series(BaseModel):
        points: list[float]

    error = _refusal(Series, '{"points": [1.5, 1e308, 1e400]}')
    assert (error.detail, error.path) == (
        "the number `1e400` is too large for a floating point value",
        "points[2]",
    )
    assert str(error).count("points[2]") == 1


def test_text_that_is_not_json_is_still_told_so() -> None:
    assert _retry_turn(Reading, '{"x": NaN}') == (
        "The previous reply could not be used: it was not valid JSON: `NaN` is not a JSON "
        "number at `x`. Reply again with only the JSON value, matching the schema exactly."
    )
