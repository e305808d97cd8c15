"""Behaviour outside probes found missing: records on every stream failure, plans and floors
for streamed calls, arguments checked at the call, and the record's and messages' words."""

from __future__ import annotations

import asyncio
import datetime
import json
import re
from typing import Annotated, Any, Literal

import httpx2
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import BaseModel, Field

import allama
from allama import (
    ChatRequest,
    EnforcementBelowError,
    Error,
    ExtractionMetadata,
    ExtractionMode,
    Extractor,
    IncompleteStreamError,
    InvalidRequestError,
    OverloadedError,
    RefusedError,
    RequestField,
    SchemaEnforcement,
    TruncatedError,
    Usage,
    Warning,
)
from allama.mock import ChatResponseBuilder, MockProvider, MockStreamingProvider
from allama.providers import provider as make_provider
from allama.schema._types import NAIVE_DATETIME_PATTERN
from allama.transport import Transport
from allama.types import (
    ChatValidation,
    FinishReason,
    ResponseStart,
    TextDelta,
    UsageEvent,
    ValidationCoverage,
    WarningEvent,
)


class Person(BaseModel):
    name: str
    age: int


def native() -> ChatRequest:
    return ChatRequest("m").user("Alice is 31").with_option(ExtractionMode.NATIVE)


DROPPED = Warning.unsupported(
    RequestField.RESPONSE_FORMAT, "strict is not supported; sent without strict"
).with_provider("mock")


def failing_stream(error: Error | None) -> list[Any]:
    items: list[Any] = [
        ResponseStart(),
        WarningEvent(warning=DROPPED),
        TextDelta(index=0, text='{"name":'),
        UsageEvent(usage=Usage(input_tokens=900, output_tokens=4)),
    ]
    return [*items, error] if error is not None else items


def _assert_record(error: BaseException) -> None:
    record = ExtractionMetadata.from_error(error)
    assert record is not None, "the error carries no extraction record"
    assert record.passes == 0
    assert record.usage == Usage(input_tokens=900, output_tokens=4)
    assert record.degradations == [DROPPED]


@pytest.mark.parametrize("error", [OverloadedError("busy"), None], ids=["error", "runs-dry"])
def test_iterating_a_failed_stream_raises_the_error_with_the_record(error: Error | None) -> None:
    provider = MockStreamingProvider.with_stream(failing_stream(error))
    with (
        allama.extract_stream(provider, Person, native()) as stream,
        pytest.raises(Error) as raised,
    ):
        for _ in stream:
            pass
    expected = OverloadedError if error is not None else IncompleteStreamError
    assert isinstance(raised.value, expected)
    _assert_record(raised.value)


@pytest.mark.parametrize("error", [OverloadedError("busy"), None], ids=["error", "runs-dry"])
def test_iterating_a_failed_stream_async_raises_the_error_with_the_record(
    error: Error | None,
) -> None:
    async def run() -> BaseException:
        provider = MockStreamingProvider.with_stream(failing_stream(error))
        async with allama.aextract_stream(provider, Person, native()) as stream:
            try:
                async for _ in stream:
                    pass
            except Error as failure:
                return failure
        raise AssertionError("the stream did not fail")

    _assert_record(asyncio.run(run()))


def test_finish_after_a_failed_iteration_raises_the_same_record() -> None:
    provider = MockStreamingProvider.with_stream(failing_stream(OverloadedError("busy")))
    with allama.extract_stream(provider, Person, native()) as stream:
        with pytest.raises(OverloadedError):
            list(stream)
        with pytest.raises(OverloadedError) as raised:
            stream.finish()
    _assert_record(raised.value)


def test_reading_partial_of_a_failed_stream_does_not_raise() -> None:
    provider = MockStreamingProvider.with_stream(failing_stream(OverloadedError("busy")))
    with allama.extract_stream(provider, Person, native()) as stream:
        with pytest.raises(OverloadedError):
            for _ in stream:
                assert stream.partial is None or isinstance(stream.partial, Person)
        assert stream.partial is None or isinstance(stream.partial, Person)


# Plans and floors for streams: what will be sent, streamed or not.


def _groq(requests: list[httpx2.Request]) -> Any:
    def handler(http: httpx2.Request) -> httpx2.Response:
        requests.append(http)
        return httpx2.Response(500)

    transport = Transport(
        client=httpx2.Client(transport=httpx2.MockTransport(handler)),
        async_client=httpx2.AsyncClient(transport=httpx2.MockTransport(handler)),
    )
    return make_provider("groq", api_key="k", base_url="http://test", transport=transport)


GROQ = ChatRequest("openai/gpt-oss-120b").user("Alice is 31").with_option(ExtractionMode.NATIVE)


def test_a_plan_for_a_stream_sees_the_schema_dropped_on_streams() -> None:
    groq = _groq([])
    assert Extractor().plan(groq, Person, GROQ).enforcement is SchemaEnforcement.EXACT
    streamed = Extractor().plan(groq, Person, GROQ, stream=True)
    assert streamed.stream is True
    assert streamed.enforcement is SchemaEnforcement.NOT_ENFORCED
    assert [warning.message for warning in streamed.degradations] == [
        "Groq has no JSON Schema output on streamed responses",
        "the schema was written into the instructions, where nothing enforces it",
    ]


def test_a_floor_on_a_stream_fails_before_paying() -> None:
    sent: list[httpx2.Request] = []
    groq = _groq(sent)
    with pytest.raises(EnforcementBelowError) as raised:
        Extractor(min_enforcement=SchemaEnforcement.EXACT).extract_stream(groq, Person, GROQ)
    assert sent == []
    assert raised.value.achieved is SchemaEnforcement.NOT_ENFORCED
    assert raised.value.metadata.passes == 0


def test_a_floor_on_an_async_stream_fails_before_paying() -> None:
    sent: list[httpx2.Request] = []
    groq = _groq(sent)

    async def run() -> None:
        extractor = Extractor(min_enforcement="exact")
        async with extractor.aextract_stream(groq, Person, GROQ):
            pass

    with pytest.raises(EnforcementBelowError):
        asyncio.run(run())
    assert sent == []


class CountingValidation(MockProvider):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.validations = 0

    def validate_chat_request(
        self, request: ChatRequest, *, stream: bool = False
    ) -> ChatValidation:
        self.validations += 1
        return ChatValidation(coverage=ValidationCoverage.ENCODING)


def test_a_not_enforced_floor_runs_no_dry_run() -> None:
    answer = '{"name": "Alice", "age": 31}'
    provider = CountingValidation([answer, answer])
    Extractor(min_enforcement=SchemaEnforcement.NOT_ENFORCED).extract(provider, Person, native())
    assert provider.validations == 0
    Extractor(min_enforcement=SchemaEnforcement.APPROXIMATE).extract(provider, Person, native())
    assert provider.validations == 1


# The record and the mode option.


def test_a_malformed_mode_option_is_an_allama_error() -> None:
    provider = MockProvider.with_text("{}")
    for raw in ("natve", 3, ["native"]):
        request = ChatRequest("m").user("?").with_option_json("allama.extraction", raw)
        with pytest.raises(InvalidRequestError) as raised:
            allama.extract(provider, Person, request)
        assert "`allama.extraction`" in str(raised.value)
        assert "`auto`, `native`, `forced_tool`" in str(raised.value)
    assert provider.call_count == 0


def test_a_record_from_a_newer_version_reads_back() -> None:
    data = {
        "mode": "native",
        "passes": 2,
        "enforcement": "approximate",
        "usage": {"input_tokens": 5, "output_tokens": 6, "future_tokens": 1},
        "degradations": [
            {**json.loads(DROPPED.to_json()), "severity": "high"},
        ],
        "auto_fallback": {"field": "response_format", "message": "m", "future": True},
        "a_field_from_the_future": {"x": 1},
    }
    record = ExtractionMetadata.from_json_dict(data)
    assert (record.passes, record.usage) == (2, Usage(input_tokens=5, output_tokens=6))
    assert record.degradations == [DROPPED]
    error = record.attach_to(OverloadedError("busy"))
    error.context.metadata["allama.extraction"] = data
    assert ExtractionMetadata.from_error(error) == record


def test_str_of_a_record_is_as_compact_as_its_repr() -> None:
    record = allama.extract(
        MockProvider.with_text('{"name": "Alice", "age": 31}'), Person, native()
    ).metadata
    assert str(record) == repr(record)
    assert str(record).startswith("ExtractionMetadata(mode='native', passes=1")


def test_an_empty_refusal_says_so() -> None:
    response = ChatResponseBuilder().refusal("").build()
    with pytest.raises(RefusedError) as raised:
        allama.extract(MockProvider([response]), Person, native())
    assert str(raised.value) == (
        "mock: the model refused to produce the structured output (finish reason `stop`), "
        "with an empty refusal"
    )


@pytest.mark.parametrize(("reasoning", "said"), [(0, False), (None, False), (380, True)])
def test_truncation_speaks_of_reasoning_only_when_tokens_went_to_it(
    reasoning: int | None, said: bool
) -> None:
    usage = Usage(input_tokens=10, output_tokens=400, reasoning_tokens=reasoning)
    response = (
        ChatResponseBuilder()
        .text('{"name": "Al')
        .finish_reason(FinishReason.LENGTH)
        .usage_value(usage)
        .build()
    )
    with pytest.raises(TruncatedError) as raised:
        allama.extract(MockProvider([response]), Person, native())
    message = str(raised.value)
    assert ("went to reasoning" in message) is said
    assert "(`native` mode)" in message
    if said:
        assert "380 of 400 output tokens went to reasoning" in message


@pytest.mark.parametrize(
    ("usage", "advice"),
    [
        (
            Usage(input_tokens=23, output_tokens=489),
            ": its output took most of it (489 output tokens, 23 input), so the model wrote "
            "on: bound the type (a string's `max_length`, a number's digits), or give the "
            "model a larger window",
        ),
        (
            Usage(input_tokens=3900, output_tokens=190),
            ": shorten the input, a higher output token limit does not help",
        ),
        (None, ": shorten the input, a higher output token limit does not help"),
        (
            Usage(input_tokens=2000, output_tokens=30000, reasoning_tokens=29990),
            ": the model's reasoning took most of it (29990 of 30000 output tokens, 2000 "
            "input): lower the reasoning effort, or give the model a larger window",
        ),
    ],
)
def test_a_full_context_window_is_blamed_on_what_took_it(usage: Usage | None, advice: str) -> None:
    """A model that wrote digits until its 512-token window was full was told to shorten
    its 23-token input."""
    builder = (
        ChatResponseBuilder().text('{"name": "1111').finish_reason(FinishReason.CONTEXT_WINDOW)
    )
    if usage is not None:
        builder = builder.usage_value(usage)
    with pytest.raises(TruncatedError) as raised:
        allama.extract(MockProvider([builder.build()]), Person, native())
    assert str(raised.value) == (
        "mock: the model filled its context window before finishing the structured output "
        f"(`native` mode){advice}"
    )


# Arguments are checked at the call.


def test_provider_and_type_swapped() -> None:
    provider = MockProvider.with_text("{}")
    with pytest.raises(TypeError, match="swapped"):
        allama.extract(Person, provider, native())  # type: ignore[arg-type]


def test_a_string_where_the_request_goes() -> None:
    with pytest.raises(TypeError, match=r"request must be a ChatRequest, not str"):
        allama.extract(MockProvider.with_text("{}"), Person, "Alice is 31")  # type: ignore[arg-type]


def test_not_a_provider() -> None:
    with pytest.raises(TypeError, match=r"provider must be a chat provider .* not str"):
        allama.extract("openai", Person, native())  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("kwargs", "error", "words"),
    [
        ({"retries": "2"}, TypeError, "retries must be a whole number, not str '2'"),
        ({"retries": True}, TypeError, "retries must be a whole number, not bool"),
        ({"retries": -1}, ValueError, "retries must be 0 or more"),
        ({"repair": "yes"}, TypeError, "repair must be True or False"),
        ({"min_enforcement": "strict"}, ValueError, "`exact`, `approximate`, `not_enforced`"),
    ],
)
def test_extractor_settings_are_checked(
    kwargs: dict[str, Any], error: type[Exception], words: str
) -> None:
    with pytest.raises(error) as raised:
        Extractor(**kwargs)
    assert words in str(raised.value)


def test_enum_settings_take_their_string_values() -> None:
    assert Extractor(min_enforcement="exact").min_enforcement is SchemaEnforcement.EXACT
    assert Extractor().with_options(min_enforcement="approximate").min_enforcement is (
        SchemaEnforcement.APPROXIMATE
    )
    response = ChatResponseBuilder().text('{"name": "Alice", "age": 31}').build()
    assert Extractor().parse(Person, response, "native").value == Person(name="Alice", age=31)
    with pytest.raises(ValueError, match="mode must be"):
        Extractor().parse(Person, response, "text")
    with pytest.raises(TypeError, match="no setting 'retry'"):
        Extractor().with_options(retry=2)


# `async with` on the async stream, as written.


def test_async_with_opens_and_closes_the_stream() -> None:
    async def run() -> tuple[Person, Person]:
        provider = MockStreamingProvider.with_text('{"name": "Alice", "age": 31}')
        async with allama.aextract_stream(provider, Person, native()) as stream:
            first = (await stream.finish()).value
        provider = MockStreamingProvider.with_text('{"name": "Alice", "age": 31}')
        async with Extractor().aextract_stream(provider, Person, native()) as stream:
            second = (await stream.finish()).value
        return first, second

    assert asyncio.run(run()) == (Person(name="Alice", age=31), Person(name="Alice", age=31))


def test_awaiting_the_async_stream_still_works() -> None:
    async def run() -> Person:
        provider = MockStreamingProvider.with_text('{"name": "Alice", "age": 31}')
        stream = await allama.aextract_stream(provider, Person, native())
        async with stream:
            return (await stream.finish()).value

    assert asyncio.run(run()) == Person(name="Alice", age=31)


# Output that is not strict JSON never becomes a value.


class Line(BaseModel):
    sku: str
    price: float


class Order(BaseModel):
    lines: list[Line]


@pytest.mark.parametrize(
    ("text", "detail", "path"),
    [
        (
            '{"lines": [{"sku": "a", "price": 1.5}, {"sku": "b", "sku": "c", "price": 2}]}',
            "the key `sku` appears twice in the object at `lines[1]`",
            "lines[1]",
        ),
        (
            '{"lines": [{"sku": "a", "price": NaN}]}',
            "`NaN` is not a JSON number at `lines[0].price`",
            "lines[0].price",
        ),
        (
            '{"lines": [{"sku": "a", "price": Infinity}]}',
            "`Infinity` is not a JSON number at `lines[0].price`",
            "lines[0].price",
        ),
        (
            '{"lines": [{"sku": "a", "price": 1e999}]}',
            "the number `1e999` is too large for a floating point value",
            "lines[0].price",
        ),
        (
            '{"lines": [{"sku": "a", "price": 1' + "0" * 400 + "}]}",
            "a number is too large for a floating point value",
            "lines[0].price",
        ),
    ],
)
def test_output_that_is_not_strict_json_is_a_parse_error(text: str, detail: str, path: str) -> None:
    from allama import ParseError

    with pytest.raises(ParseError) as raised:
        allama.extract(MockProvider.with_text(text), Order, native())
    assert (raised.value.detail, raised.value.path) == (detail, path)
    with pytest.raises(ParseError):
        Extractor(repair=True).extract(MockProvider.with_text(f"Sure: {text}"), Order, native())


class _Priced(BaseModel):
    price: int


class _Cat(BaseModel):
    kind: Literal["cat"]
    lives: int


class _Dog(BaseModel):
    kind: Literal["dog"]
    barks: float


class _Places(BaseModel):
    either: int | _Priced = 0
    pet: Annotated[_Cat | _Dog, Field(discriminator="kind")] | None = None
    by_name: dict[str, _Priced] = {}


@pytest.mark.parametrize(
    ("output", "path"),
    [
        # pydantic's location holds the union's member and the tagged branch: no places in
        # the output, left out; keys of the output's own are kept whatever they hold.
        ({"either": {"price": "3"}}, "either"),  # pydantic's first: not an integer
        ({"pet": {"kind": "dog", "barks": "x"}}, "pet.barks"),
        ({"by_name": {"a[0]": {"price": "x"}}}, 'by_name["a[0]"].price'),
        ({"by_name": {"a.b": {"price": "x"}}}, 'by_name["a.b"].price'),
        ({"by_name": {"function-x": {"price": "x"}}}, "by_name.function-x.price"),
        ({"by_name": {"k": {}}}, "by_name.k"),  # a missing field: the object that lacks it
    ],
)
def test_an_error_is_placed_by_the_outputs_own_keys(output: Any, path: str) -> None:
    from allama import ParseError

    with pytest.raises(ParseError) as raised:
        allama.extract(MockProvider.with_text(json.dumps(output)), _Places, native())
    assert raised.value.path == path


def test_an_infinite_value_the_type_makes_itself_is_no_number_of_the_output() -> None:
    from decimal import Decimal

    from allama import ParseError

    class Route(BaseModel):
        name: str
        best: float = float("inf")  # none found yet
        limit: Decimal = Decimal("Infinity")

    value = allama.extract(MockProvider.with_text('{"name": "a"}'), Route, native()).value
    assert (value.best, value.limit) == (float("inf"), Decimal("Infinity"))
    # A number of the output's too large for a float is still refused, beside such a default.
    with pytest.raises(ParseError) as raised:
        allama.extract(MockProvider.with_text('{"name": "a", "best": 1e400}'), Route, native())
    assert raised.value.path == "best"
    # No JSON holds the default: the schema a provider is sent leaves it out, and the plan
    # of every dialect is the schema's own, not a refusal.
    from allama.schema._types import type_schema

    for name in ("openai", "anthropic", "gemini", "ollama"):
        provider = allama.provider(name, **({} if name == "ollama" else {"api_key": "k"}))
        plan = Extractor().plan(provider, Route, native())
        assert plan.enforcement in (SchemaEnforcement.EXACT, SchemaEnforcement.APPROXIMATE)
    properties = type_schema(Route).schema["properties"]
    assert "default" not in properties["best"]
    assert properties["limit"]["default"] == "Infinity"  # a string: JSON holds it


def test_a_naive_datetime_is_asked_for_without_an_offset() -> None:
    from pydantic import NaiveDatetime

    from allama.schema._types import type_schema

    class Meeting(BaseModel):
        starts: NaiveDatetime
        ends: datetime.datetime  # any datetime: RFC 3339's, with its offset, reads as one

    properties = type_schema(Meeting).schema["properties"]
    assert properties["starts"] == {
        "type": "string",
        "pattern": NAIVE_DATETIME_PATTERN,
        "format": "naive-date-time",
        "title": "Starts",
    }
    assert properties["ends"] == {"type": "string", "format": "date-time", "title": "Ends"}
    # The pattern holds the shape alone (`2024-02-31T00:00:00` passes it): approximate
    # wherever it goes, its format named so that each dialect says so.
    for name, model, enforcement in (
        ("openai", "gpt-4.1-mini", SchemaEnforcement.APPROXIMATE),
        ("anthropic", "claude-sonnet-4-5", SchemaEnforcement.APPROXIMATE),
        ("gemini", "gemini-2.5-flash", SchemaEnforcement.APPROXIMATE),
    ):
        provider = allama.provider(name, api_key="k")
        plan = Extractor().plan(provider, Meeting, ChatRequest(model).user("x"))
        assert plan.enforcement is enforcement, name


@settings(max_examples=300, deadline=None)
@given(st.datetimes(min_value=datetime.datetime(1, 1, 1)))
def test_every_naive_datetime_is_written_as_the_pattern_allows(value: datetime.datetime) -> None:
    assert re.fullmatch(NAIVE_DATETIME_PATTERN, value.isoformat(timespec="microseconds"))
    assert re.fullmatch(NAIVE_DATETIME_PATTERN, value.isoformat(timespec="seconds"))


@settings(max_examples=300, deadline=None)
@given(st.from_regex(NAIVE_DATETIME_PATTERN, fullmatch=True))
def test_what_the_pattern_allows_reads_as_a_naive_datetime(text: str) -> None:
    from pydantic import NaiveDatetime, TypeAdapter, ValidationError

    year, month, day = int(text[:4]), int(text[5:7]), int(text[8:10])
    try:
        datetime.date(year, month, day)
    except ValueError:  # no such day (February 30): the type refuses it too
        with pytest.raises(ValidationError):
            TypeAdapter(NaiveDatetime).validate_json(json.dumps(text))
        return
    value = TypeAdapter(NaiveDatetime).validate_json(json.dumps(text))
    assert value.tzinfo is None
    assert value.isoformat().startswith(text[:19])


def test_a_map_keyed_by_naive_datetimes_keeps_its_values_schema() -> None:
    from pydantic import NaiveDatetime

    from allama.schema._types import type_schema

    class Log(BaseModel):
        by_time: dict[NaiveDatetime, int]

    assert type_schema(Log).schema["properties"]["by_time"] == {
        "type": "object",
        "additionalProperties": {"type": "integer"},
        "propertyNames": {"pattern": NAIVE_DATETIME_PATTERN},
        "title": "By Time",
    }
    # Sent where maps are: the values' type with them, not dropped with a patternProperties.
    plan = Extractor().plan(allama.provider("ollama"), Log, ChatRequest("llama3.1").user("x"))
    assert not any("patternProperties" in d.message for d in plan.degradations)


def test_a_note_places_a_step_after_a_union_and_quotes_a_key_with_a_dot() -> None:
    from pydantic import NaiveDatetime

    class Dotted(BaseModel):
        a: str = Field(alias="a.b", pattern="^x+$")

    notes = []
    for tp in (list[NaiveDatetime] | None, Dotted):
        plan = Extractor().plan(
            allama.provider("gemini", api_key="k"), tp, ChatRequest("gemini-2.5-flash").user("x")
        )
        notes += [warning.message for warning in plan.degradations]
    assert notes == [
        "the schema of `list[NaiveDatetime] | None` was approximated: `format` was removed "
        "at `(list[NaiveDatetime] | None)[]`: Gemini responseJsonSchema does not enforce "
        "`naive-date-time`",
        "the schema of `list[NaiveDatetime] | None` was approximated: `pattern` was removed "
        "at `(list[NaiveDatetime] | None)[]`",
        'the schema of `Dotted` was approximated: `pattern` was removed at `Dotted["a.b"]`',
    ]


class _Named(BaseModel):
    name: str


@pytest.mark.parametrize("mode", [ExtractionMode.NATIVE, ExtractionMode.FORCED_TOOL])
def test_a_paused_turn_is_no_answer_however_well_formed_what_it_holds(
    mode: ExtractionMode,
) -> None:
    # Anthropic's `pause_turn`: a server tool's long run paused the turn; the answer comes
    # when the conversation is sent back. JSON written before it is not the value.
    paused = ChatResponseBuilder().finish_reason("pause_turn")
    if mode is ExtractionMode.NATIVE:
        paused = paused.text('{"name": "Ada"}')
    else:
        paused = paused.tool_call("c", "submit_structured_output", '{"name": "Ada"}')
    provider = MockProvider([paused.build()])
    request = ChatRequest("m").user("Who?").with_option(mode)
    with pytest.raises(TruncatedError) as caught:
        Extractor(retries=2).extract(provider, _Named, request)
    assert caught.value.finish_reason == "pause_turn"
    assert provider.call_count == 1  # never asked again: the caller continues the turn
    assert "send the conversation back, with the paused turn, to continue it" in str(caught.value)


@pytest.mark.parametrize("flavour", ["sync", "async"])
def test_an_extractions_network_error_keeps_the_transports_as_its_cause(flavour: str) -> None:
    # Raised through the extraction as by `chat`: the traceback shows what the transport met.
    provider = make_provider("openai", api_key="k", base_url="http://127.0.0.1:9/v1")
    request = ChatRequest("gpt-4o").user("x")
    with pytest.raises(allama.NetworkError) as caught:
        if flavour == "sync":
            allama.extract(provider, _Named, request)
        else:
            asyncio.run(allama.aextract(provider, _Named, request))
    assert caught.value.__cause__ is not None
    assert type(caught.value.__cause__).__name__ == "ConnectError"
