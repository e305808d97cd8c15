"""The testing tools as a real provider behaves: TestProvider's enforcement where allama's
own marks say no provider enforces a check, what it refuses before answering (no messages,
a tool whose parameters are no object, a tool not offered), scripted streams that keep a
response's provider and refuse its log-probabilities, a Flag member of no name scripted for
a decision, and a FunctionProvider whose function returns something else; TestProvider's
enforcement where no provider's dialect is exact, a decision in a plain prompt answered by a
scripted value, a scripted stream given as a generator that raises, the model on a
scripted error, and a scripted non-finite float."""

from __future__ import annotations

import asyncio
import datetime as dt
import enum
import gc
import itertools
import warnings
from collections.abc import Iterator
from decimal import Decimal
from typing import Annotated, Any

import pytest
from pydantic import (
    BaseModel,
    Field,
    FutureDatetime,
    HttpUrl,
    IPvAnyAddress,
    Json,
    NaiveDatetime,
    PastDate,
    condecimal,
)
from pydantic.types import StringConstraints

import allama
from allama import (
    CapabilitySupport,
    ChatCapability,
    ChatRequest,
    ChatResponse,
    EnforcementBelowError,
    ExtractionMetadata,
    ExtractionMode,
    Extractor,
    FinishReason,
    ParseError,
    RetryingProvider,
    RetryPolicy,
    SchemaEnforcement,
    TextPart,
    TokenLogprob,
)
from allama.errors import InvalidRequestError, OverloadedError, RateLimitedError
from allama.extract._decide import PROMPT_OPTION
from allama.mock import (
    ChatResponseBuilder,
    FunctionProvider,
    MockProvider,
    MockScriptError,
    MockStreamingProvider,
    TestProvider,
    response_events,
)
from allama.types import (
    BlockStart,
    RequestField,
    ResponseFormat,
    ResponseStart,
    StreamBlockType,
    StreamEvent,
    TextDelta,
    ToolChoice,
    ToolDefinition,
    Usage,
    WarningKind,
)

REQUEST = ChatRequest("gpt-4o-mini").user("x")
FORCED = REQUEST.with_option(ExtractionMode.FORCED_TOOL)


def _openai() -> Any:
    """A real provider, only ever planned against (nothing is sent)."""
    return allama.provider("openai", api_key="sk-test")


# 1. allama's marks of checks no provider enforces


class Booking(BaseModel):
    start: Annotated[dt.date, Field(ge=dt.date(2030, 1, 1))]


class Price(BaseModel):
    amount: condecimal(max_digits=6, decimal_places=2)  # type: ignore[valid-type]


class Payload(BaseModel):
    nums: Json[list[int]]


class Stripped(BaseModel):
    name: Annotated[str, StringConstraints(strip_whitespace=True, min_length=1)]


class Naive(BaseModel):
    at: NaiveDatetime


class Moments(BaseModel):
    born: PastDate
    due: FutureDatetime


class Number(BaseModel):
    z: complex


class Bits(enum.Flag):
    A = 1
    B = 2
    C = 4
    D = 8
    E = 16
    F = 32
    H = 128  # a hole below it: the schema is a range marked `flags`


class Flags(BaseModel):
    bits: Bits


class Plain(BaseModel):
    n: int
    when: dt.date


MARKED = [Booking, Price, Payload, Stripped, Naive, Moments, Number, Flags]


def _mark_message(what: str, where: str) -> str:
    return (
        f"{what} at `{where}` asks for a check no provider enforces, so the test provider "
        "does not say it holds either: its value may fail it"
    )


@pytest.mark.parametrize("tp", MARKED, ids=lambda tp: tp.__name__)
@pytest.mark.parametrize("request_", [REQUEST, FORCED], ids=["native", "forced_tool"])
def test_a_mark_no_provider_enforces_is_approximate_on_the_test_provider_as_on_a_real_one(
    tp: type[BaseModel], request_: ChatRequest
) -> None:
    real = Extractor().plan(_openai(), tp, request_)
    test = Extractor().plan(TestProvider(), tp, request_)
    assert real.enforcement is SchemaEnforcement.APPROXIMATE
    assert test.enforcement is SchemaEnforcement.APPROXIMATE
    assert test.degradations
    assert all(w.kind is WarningKind.APPROXIMATED for w in test.degradations)


def test_the_degradations_name_each_mark_in_the_callers_terms() -> None:
    plan = Extractor().plan(TestProvider(), Moments, REQUEST)
    assert [w.message for w in plan.degradations] == [
        _mark_message("`format` `past-date`", "Moments.born"),
        _mark_message("`format` `future-date-time`", "Moments.due"),
    ]
    payload = Extractor().plan(TestProvider(), Payload, REQUEST)
    assert [w.message for w in payload.degradations] == [
        _mark_message("`contentSchema` (the JSON in a string)", "Payload.nums")
    ]


def test_a_bounded_date_the_test_provider_breaks_is_recorded_approximate() -> None:
    with pytest.raises(ParseError) as caught:
        allama.extract(TestProvider(), Booking, REQUEST)
    metadata = ExtractionMetadata.from_error(caught.value)
    assert metadata is not None
    assert metadata.enforcement is SchemaEnforcement.APPROXIMATE
    assert [w.message for w in metadata.degradations] == [
        _mark_message("`format` `bounded-date`", "Booking.start")
    ]


@pytest.mark.parametrize("tp", [Booking, Price, Payload], ids=lambda tp: tp.__name__)
def test_a_floor_of_exact_refuses_as_on_a_real_provider(tp: type[BaseModel]) -> None:
    strict = Extractor(min_enforcement="exact")
    with pytest.raises(EnforcementBelowError):
        strict.extract(_openai(), tp, REQUEST)
    with pytest.raises(EnforcementBelowError) as caught:
        strict.extract(TestProvider(), tp, REQUEST)
    metadata = ExtractionMetadata.from_error(caught.value)
    assert metadata is not None and metadata.enforcement is SchemaEnforcement.APPROXIMATE


def test_a_type_with_no_mark_stays_exact() -> None:
    assert Extractor().plan(TestProvider(), Plain, REQUEST).enforcement is SchemaEnforcement.EXACT
    result = Extractor(min_enforcement="exact").extract(TestProvider(), Plain, REQUEST)
    assert result.value == Plain(n=0, when=dt.date(2000, 1, 1))
    assert result.metadata.enforcement is SchemaEnforcement.EXACT


def test_a_property_named_like_a_keyword_is_no_mark() -> None:
    schema: dict[str, Any] = {
        "type": "object",
        "properties": {
            "format": {"type": "string"},
            "contentSchema": {"type": "object", "properties": {"format": {"type": "string"}}},
        },
        "required": ["format"],
    }
    request = REQUEST.with_response_format(ResponseFormat.for_schema(schema))
    assert TestProvider().validate_chat_request(request).warnings == ()
    response = TestProvider().chat(request)
    assert response.warnings == ()
    assert response.text() == '{"format":""}'


def test_a_mark_in_a_definition_is_named_where_it_stands() -> None:
    schema: dict[str, Any] = {
        "type": "object",
        "properties": {"d": {"$ref": "#/$defs/D"}},
        "required": ["d"],
        "$defs": {"D": {"type": "string", "format": "bounded-date"}},
    }
    request = REQUEST.with_response_format(ResponseFormat.for_schema(schema))
    warnings_ = TestProvider().validate_chat_request(request).warnings
    assert [(w.kind, w.message) for w in warnings_] == [
        (WarningKind.APPROXIMATED, _mark_message("`format` `bounded-date`", "/$defs/D"))
    ]
    assert warnings_[0].is_about(RequestField.RESPONSE_FORMAT)


# 2. and 6. scripted streams: the response's provider, and no log-probabilities lost


def _priced() -> ChatResponse:
    return (
        ChatResponseBuilder()
        .text('{"a":1}')
        .usage(1000, 100)
        .model("gpt-4o-mini")
        .provider("openai")
        .build()
    )


class A(BaseModel):
    a: int


def test_a_scripted_response_streams_of_the_provider_it_names() -> None:
    assert MockProvider([_priced()]).chat_stream(REQUEST).response().provider == "openai"
    assert FunctionProvider(lambda r: _priced()).chat_stream(REQUEST).response().provider == (
        "openai"
    )
    assert MockStreamingProvider.from_responses([_priced()]).chat(REQUEST).provider == "openai"
    then = MockStreamingProvider().then_response(_priced())
    assert then.chat_stream(REQUEST).response().provider == "openai"

    async def streamed() -> list[str | None]:
        made = []
        for provider in (
            MockProvider([_priced()]),
            FunctionProvider(lambda r: _priced()),
            MockStreamingProvider.from_responses([_priced()]),
        ):
            stream = await provider.achat_stream(REQUEST)
            made.append((await stream.response()).provider)
        return made

    assert asyncio.run(streamed()) == ["openai", "openai", "openai"]


def test_a_response_naming_no_provider_streams_of_the_mock() -> None:
    response = ChatResponseBuilder().text("hi").build()
    assert MockProvider([response], name="m1").chat_stream(REQUEST).response().provider == "m1"
    streaming = MockStreamingProvider.from_responses([response]).with_provider_name("m2")
    assert streaming.chat(REQUEST).provider == "m2"


def test_a_streamed_extraction_of_a_scripted_response_is_priced_as_the_call_is() -> None:
    called = allama.extract(MockProvider([_priced()]), A, REQUEST).metadata
    streamed = allama.extract_stream(MockProvider([_priced()]), A, REQUEST).finish().metadata
    assert called.cost is not None
    assert streamed.cost == called.cost
    assert streamed.cost_missing is None
    collected = allama.extract(MockStreamingProvider.from_responses([_priced()]), A, REQUEST)
    assert collected.metadata.cost == called.cost


_LOGPROBS_REFUSED = (
    "a scripted response with log-probabilities cannot be streamed (no stream event "
    "carries them, as no provider's stream does here): script it on MockProvider "
    "and call `chat`"
)


def _with_logprobs() -> ChatResponse:
    return ChatResponse(
        (TextPart(text="Yes"),),
        finish_reason=FinishReason.STOP,
        logprobs=(TokenLogprob(token="Yes", logprob=-0.1),),
    )


def test_a_scripted_response_with_log_probabilities_is_not_streamed_without_them() -> None:
    request = REQUEST.with_logprobs(5)
    makers: list[Any] = [
        lambda: MockProvider([_with_logprobs()]),
        lambda: FunctionProvider(lambda r: _with_logprobs()),
    ]
    for make in makers:
        with pytest.raises(MockScriptError) as caught:
            make().chat_stream(request)
        assert str(caught.value) == _LOGPROBS_REFUSED
        with pytest.raises(MockScriptError) as async_caught:
            asyncio.run(make().achat_stream(request))
        assert str(async_caught.value) == _LOGPROBS_REFUSED
    kept = MockProvider([_with_logprobs()]).chat(request).logprobs
    assert kept == (TokenLogprob(token="Yes", logprob=-0.1),)


# 3. a tool's arguments are an object


PING = ToolDefinition(name="ping", description="no arguments", parameters={})


def test_a_tool_of_no_arguments_is_called_with_an_empty_object() -> None:
    request = REQUEST.with_tools([PING]).with_tool_choice(ToolChoice.tool("ping"))
    called = TestProvider().chat(request).tool_calls()[0]
    assert called.arguments == "{}"
    assert called.parsed_arguments() == {}
    streamed = TestProvider().chat_stream(request).response().tool_calls()[0]
    assert streamed.arguments == "{}"


_NOT_AN_OBJECT = (
    "the parameters of tool `numbers` are not an object schema: the test provider passes a "
    "tool's arguments as a JSON object, so its parameters must be an object schema "
    '(`"type": "object"`), of which a union or a single value can be a property'
)
NUMBERS = ToolDefinition(name="numbers", parameters={"type": "array", "items": {"type": "integer"}})


def test_a_tool_whose_parameters_are_no_object_is_refused_by_the_call_and_its_validation() -> None:
    request = REQUEST.with_tools([NUMBERS]).with_tool_choice(ToolChoice.tool("numbers"))
    provider = TestProvider()
    for attempt in (provider.chat, provider.chat_stream, provider.validate_chat_request):
        with pytest.raises(InvalidRequestError) as caught:
            attempt(request)
        assert str(caught.value) == _NOT_AN_OBJECT
        assert caught.value.provider == "test"
    unforced = REQUEST.with_tools([PING, NUMBERS])
    with pytest.raises(InvalidRequestError):
        provider.chat(unforced)  # offered at all: refused, as Anthropic and Gemini refuse it


def test_a_test_provider_said_to_take_any_root_answers_it_as_given() -> None:
    provider = TestProvider().with_chat_capability(
        ChatCapability.TOOL_SCHEMA_ANY_ROOT, CapabilitySupport.SUPPORTED
    )
    request = REQUEST.with_tools([NUMBERS]).with_tool_choice(ToolChoice.tool("numbers"))
    assert provider.chat(request).tool_calls()[0].arguments == "[]"


def test_a_list_extracted_through_a_forced_tool_is_wrapped_in_an_object() -> None:
    provider = TestProvider()
    assert provider.chat_capability("m", ChatCapability.TOOL_SCHEMA_ANY_ROOT) is (
        CapabilitySupport.UNSUPPORTED
    )
    result = allama.extract(provider, list[int], FORCED)
    assert result.value == []
    assert result.metadata.root_wrapped is True
    sent = provider.last_request
    assert sent is not None and sent.tools[0].parameters["type"] == "object"


# 4. a Flag member with no name, scripted for a decision


class Perm(enum.Flag):
    R = 1
    W = 2


@pytest.mark.parametrize("kind", [MockProvider, MockStreamingProvider])
def test_a_flag_member_of_no_name_is_an_answer_outside_the_options(kind: Any) -> None:
    provider = kind.with_structured(Perm(0)).with_chat_capability(
        ChatCapability.CHOICE_OUTPUT, CapabilitySupport.SUPPORTED
    )
    with pytest.raises(ParseError) as caught:
        allama.decide(provider, Perm, ChatRequest("m").user("x"))
    assert "the answer is not one of the options of Perm" in str(caught.value)


# 5. a request with no messages


def _no_messages(name: str) -> str:
    return (
        f"`{name}` needs at least one message, as every provider does, and the request has "
        "none to send"
    )


def test_the_test_provider_refuses_a_request_with_no_messages() -> None:
    provider = TestProvider()
    empty = ChatRequest("m")
    for attempt in (provider.chat, provider.chat_stream, provider.validate_chat_request):
        with pytest.raises(InvalidRequestError) as caught:
            attempt(empty)
        assert str(caught.value) == _no_messages("test")
        assert caught.value.provider == "test"
    with pytest.raises(InvalidRequestError):
        asyncio.run(provider.achat(empty))
    with pytest.raises(InvalidRequestError):
        allama.extract(TestProvider(), A, empty)
    # The plan is a dry run of the call: it refuses the request as the call does.
    with pytest.raises(InvalidRequestError) as planned:
        Extractor().plan(provider, A, empty)
    assert str(planned.value) == _no_messages("test")
    # System instructions alone are a message, as OpenAI takes them.
    assert TestProvider().chat(ChatRequest("m").system("be brief")).text() == (
        "This is a test answer."
    )


def test_a_scripted_provider_refuses_a_request_with_no_messages_keeping_its_answer() -> None:
    provider = MockProvider(["hello"])
    with pytest.raises(InvalidRequestError) as caught:
        provider.chat(ChatRequest("m"))
    assert str(caught.value) == _no_messages("mock")
    assert provider.call_count == 1
    assert provider.chat(REQUEST).text() == "hello"  # nothing was sent: the answer is kept
    streaming = MockStreamingProvider.with_text("hi")
    with pytest.raises(InvalidRequestError):
        streaming.chat_stream(ChatRequest("m"))
    assert streaming.chat(REQUEST).text() == "hi"
    with pytest.raises(InvalidRequestError):
        FunctionProvider(lambda r: ChatResponseBuilder().text("x").build()).chat(ChatRequest("m"))
    with pytest.raises(InvalidRequestError):
        MockProvider().validate_chat_request(ChatRequest("m"))


# 7. a function that returns no response


@pytest.mark.parametrize(
    ("answer", "named"),
    [(lambda r: "hi", "str 'hi'"), (lambda r: None, "NoneType None")],
    ids=["text", "none"],
)
def test_a_function_returning_no_response_is_named(answer: Any, named: str) -> None:
    said = (
        f"mock: the function answering call 1 returned a {named}, not a ChatResponse (build "
        "one with ChatResponseBuilder; raise an allama Error to fail)"
    )
    for call in ("chat", "chat_stream"):
        with pytest.raises(MockScriptError) as caught:
            getattr(FunctionProvider(answer), call)(REQUEST)
        assert str(caught.value) == said


def test_an_async_function_is_refused_and_its_coroutine_closed() -> None:
    async def answer(request: ChatRequest) -> ChatResponse:
        return ChatResponseBuilder().text("x").build()

    said = (
        "mock: the function answering call 1 returned a coroutine, which FunctionProvider "
        "does not await (from `achat` neither): give it a plain function, not an `async def`"
    )
    with warnings.catch_warnings(record=True) as caught_warnings:
        warnings.simplefilter("always")
        for call in ("chat", "achat"):
            provider = FunctionProvider(answer)  # type: ignore[arg-type]
            with pytest.raises(MockScriptError) as caught:
                if call == "chat":
                    provider.chat(REQUEST)
                else:
                    asyncio.run(provider.achat(REQUEST))
            assert str(caught.value) == said
        gc.collect()
    assert [w for w in caught_warnings if issubclass(w.category, RuntimeWarning)] == []


# 8. a tool choice naming a tool the request does not offer


LOOKUP = ToolDefinition(
    name="lookup",
    parameters={"type": "object", "properties": {"q": {"type": "string"}}, "required": ["q"]},
)


@pytest.mark.parametrize("kind", [MockProvider, MockStreamingProvider])
def test_a_structured_answer_refuses_a_tool_the_request_does_not_offer(kind: Any) -> None:
    typo = REQUEST.with_tools([LOOKUP]).with_tool_choice(ToolChoice.tool("lookpu"))
    with pytest.raises(InvalidRequestError) as caught:
        kind.with_structured({"q": "a"}).chat(typo)
    assert str(caught.value) == "tool_choice names `lookpu`, which is not among the tools"
    assert caught.value.provider == "mock"
    with pytest.raises(InvalidRequestError) as test_caught:
        TestProvider().chat(typo)
    assert str(test_caught.value) == str(caught.value)
    # A choice among no tools is not sent, as every adapter leaves it out: the value is text.
    no_tools = REQUEST.with_tool_choice(ToolChoice.tool("lookup"))
    answer = kind.with_structured({"q": "a"}).chat(no_tools)
    assert (answer.text(), answer.tool_calls()) == ('{"q":"a"}', ())
    assert [w.message for w in answer.warnings] == [
        "the request gives no tools to call; `tool_choice` was not sent"
    ]
    offered = REQUEST.with_tools([LOOKUP]).with_tool_choice(ToolChoice.tool("lookup"))
    call = kind.with_structured({"q": "a"}).chat(offered).tool_calls()[0]
    assert (call.name, call.arguments) == ("lookup", '{"q":"a"}')


def test_a_decimal_the_test_provider_writes_keeps_its_digits() -> None:
    result = allama.extract(TestProvider(), Price, REQUEST)
    assert result.value == Price(amount=Decimal("0"))
    assert result.metadata.enforcement is SchemaEnforcement.APPROXIMATE


# 9. what no provider's dialect enforces exactly is approximate on the test provider too


class Tags(BaseModel):
    tags: set[int]


class Link(BaseModel):
    url: HttpUrl


class Host(BaseModel):
    ip: IPvAnyAddress


@pytest.mark.parametrize("tp", [Tags, Link, Host], ids=lambda tp: tp.__name__)
@pytest.mark.parametrize("request_", [REQUEST, FORCED], ids=["native", "forced_tool"])
def test_what_no_dialect_enforces_exactly_is_approximate_on_the_test_provider(
    tp: type[BaseModel], request_: ChatRequest
) -> None:
    assert Extractor().plan(_openai(), tp, request_).enforcement is (SchemaEnforcement.APPROXIMATE)
    plan = Extractor().plan(TestProvider(), tp, request_)
    assert plan.enforcement is SchemaEnforcement.APPROXIMATE
    assert [w.kind for w in plan.degradations] == [WarningKind.APPROXIMATED]
    strict = Extractor(min_enforcement=SchemaEnforcement.EXACT)
    with pytest.raises(EnforcementBelowError) as caught:
        strict.extract(TestProvider(), tp, request_)
    metadata = ExtractionMetadata.from_error(caught.value)
    assert metadata is not None and metadata.enforcement is SchemaEnforcement.APPROXIMATE


def test_the_approximation_names_the_place_and_the_first_dialects_note() -> None:
    said = (
        "`Tags.tags` is enforced exactly by no provider's dialect, so the test provider does "
        "not say it holds either (OpenAI strict mode: `uniqueItems` was removed at `Tags.tags`)"
    )
    result = allama.extract(TestProvider(), Tags, REQUEST)
    assert result.value == Tags(tags=set())
    assert [w.message for w in result.metadata.degradations] == [said]
    assert result.metadata.degradations[0].is_about(RequestField.RESPONSE_FORMAT)
    # A root that is no object is read as extraction sends it to an object-root dialect.
    rooted = Extractor().plan(TestProvider(), set[int], REQUEST)
    assert [w.message for w in rooted.degradations] == [
        "`set[int]` is enforced exactly by no provider's dialect, so the test provider does "
        "not say it holds either (OpenAI strict mode: `uniqueItems` was removed at `set[int]`)"
    ]
    # On a forced tool, on the tool's field.
    forced = Extractor().plan(TestProvider(), Tags, FORCED)
    assert forced.degradations[0].is_about(RequestField.TOOLS)


class Short(BaseModel):
    code: Annotated[str, Field(min_length=3)]  # xAI's strict mode alone holds it


class Pair(BaseModel):
    pair: tuple[int, str]  # Gemini's response schema alone holds it; Gemini has no strict tools


class Counts(BaseModel):
    counts: dict[str, int]  # a map: Gemini's response schema alone holds it


Unit = Annotated[float, Field(gt=0, lt=1)]  # OpenAI's strict mode holds it, wrapped


@pytest.mark.parametrize(
    ("tp", "native", "forced_tool"),
    [
        (Short, SchemaEnforcement.EXACT, SchemaEnforcement.EXACT),
        (Pair, SchemaEnforcement.EXACT, SchemaEnforcement.APPROXIMATE),
        (Counts, SchemaEnforcement.EXACT, SchemaEnforcement.APPROXIMATE),
        (Unit, SchemaEnforcement.EXACT, SchemaEnforcement.EXACT),
        (Plain, SchemaEnforcement.EXACT, SchemaEnforcement.EXACT),
    ],
    ids=["min_length", "tuple", "map", "wrapped_root", "plain"],
)
def test_exact_where_any_provider_s_dialect_is_exact(
    tp: Any, native: SchemaEnforcement, forced_tool: SchemaEnforcement
) -> None:
    assert Extractor().plan(TestProvider(), tp, REQUEST).enforcement is native
    assert Extractor().plan(TestProvider(), tp, FORCED).enforcement is forced_tool


def test_the_dialects_verdict_is_said_by_the_validation_and_every_answer() -> None:
    request = REQUEST.with_response_format(ResponseFormat.for_schema(Tags.model_json_schema()))
    provider = TestProvider()
    validated = provider.validate_chat_request(request).warnings
    assert [w.message.split(" is enforced")[0] for w in validated] == ["`/properties/tags`"]
    assert provider.chat(request).warnings == validated
    assert provider.chat_stream(request).response().warnings == validated
    assert asyncio.run(provider.achat(request)).warnings == validated


# 10. a decision sent as a plain prompt, answered by a scripted value


class Sentiment(enum.Enum):
    POS = "positive"
    NEG = "negative"


def _prompt_only(provider: Any) -> Any:
    for capability in (
        ChatCapability.STRUCTURED_OUTPUT,
        ChatCapability.TOOL_CALLS,
        ChatCapability.FORCED_TOOL_CHOICE,
        ChatCapability.CHOICE_OUTPUT,
    ):
        provider.with_chat_capability(capability, CapabilitySupport.UNSUPPORTED)
    return provider


@pytest.mark.parametrize("kind", [MockProvider, MockStreamingProvider])
@pytest.mark.parametrize(
    ("tp", "value", "label", "labels"),
    [
        (bool, True, "Yes", ["Yes", "No"]),
        (Sentiment, Sentiment.NEG, "negative", ["positive", "negative"]),
    ],
    ids=["bool", "enum"],
)
def test_a_decision_in_a_plain_prompt_is_answered_with_the_label(
    kind: Any, tp: Any, value: Any, label: str, labels: list[str]
) -> None:
    provider = _prompt_only(kind.with_structured(value))
    decision = allama.decide(provider, tp, ChatRequest("m").user("great!"))
    assert decision.value == value
    assert decision.metadata.enforcement is SchemaEnforcement.NOT_ENFORCED
    sent = provider.last_request
    assert sent is not None
    assert (sent.response_format, sent.tools) == (None, ())
    assert sent.option_json(PROMPT_OPTION) == labels
    assert MockProvider.with_structured(value).chat(sent).text() == label


def test_the_decision_mark_beside_a_schema_or_a_tool_answers_as_before() -> None:
    marked = REQUEST.with_option_json(PROMPT_OPTION, ["Yes", "No"])
    as_json = marked.with_response_format(ResponseFormat.for_schema({"type": "boolean"}))
    assert MockProvider.with_structured(True).chat(as_json).text() == "true"
    tool = ToolDefinition(name="answer", parameters={"type": "object", "properties": {}})
    called = marked.with_tools([tool]).with_tool_choice(ToolChoice.tool("answer"))
    answer = MockProvider.with_structured({}).chat(called).tool_calls()[0]
    assert (answer.name, answer.arguments) == ("answer", "{}")


def test_a_malformed_decision_mark_is_a_script_error() -> None:
    request = REQUEST.with_option_json(PROMPT_OPTION, "Yes")
    with pytest.raises(MockScriptError) as caught:
        MockProvider.with_structured(True).chat(request)
    assert str(caught.value) == (
        "the request option `allama.decision.options` must be the decision's labels (a list "
        "of strings), not str"
    )


# 11. a scripted stream given as a generator that raises mid-way


def _paid_events() -> list[StreamEvent]:
    events = response_events(ChatResponseBuilder().text('{"a":1}').usage(100, 50).build())
    # The usage first, as a provider reporting it early: paid before the failure.
    first = [e for e in events if type(e).__name__ in ("ResponseStart", "UsageEvent")]
    return first + [e for e in events if type(e).__name__ in ("BlockStart", "TextDelta")]


def _failing() -> Any:
    yield from _paid_events()
    raise OverloadedError("overloaded mid-way")


def test_an_allama_error_a_generator_raises_ends_the_stream_where_it_stood() -> None:
    names = [type(e).__name__ for e in _paid_events()]
    provider = MockStreamingProvider([_failing(), _failing()])
    seen: list[str] = []
    stream = provider.chat_stream(REQUEST)  # opens: the failure comes later
    with pytest.raises(OverloadedError, match="overloaded mid-way"):
        for event in stream:
            seen.append(type(event).__name__)
    assert seen == names

    async def streamed() -> list[str]:
        got: list[str] = []
        astream = await provider.achat_stream(REQUEST)
        with pytest.raises(OverloadedError):
            async for event in astream:
                got.append(type(event).__name__)
        return got

    assert asyncio.run(streamed()) == names


def test_a_generator_failing_mid_way_keeps_its_usage_and_is_not_retried() -> None:
    with pytest.raises(OverloadedError) as caught:
        allama.extract(MockStreamingProvider([_failing()]), A, REQUEST)
    metadata = ExtractionMetadata.from_error(caught.value)
    assert metadata is not None and metadata.usage == Usage(input_tokens=100, output_tokens=50)
    answer = response_events(ChatResponseBuilder().text('{"a":2}').build())
    retrying = RetryingProvider(
        MockStreamingProvider([_failing(), answer]), RetryPolicy(jitter=0), sleep=lambda s: None
    )
    with (
        pytest.raises(OverloadedError) as retried,
        allama.extract_stream(retrying, A, REQUEST) as stream,
    ):
        for _ in stream:
            pass
    record = ExtractionMetadata.from_error(retried.value)
    assert record is not None and record.usage == Usage(input_tokens=100, output_tokens=50)


def test_another_exception_a_generator_raises_is_a_script_error() -> None:
    def broken() -> Any:
        yield from _paid_events()[:2]
        raise ValueError("bug in the test")

    stream = MockStreamingProvider([broken()]).chat_stream(REQUEST)  # read as it is read
    seen: list[str] = []
    with pytest.raises(MockScriptError) as caught:
        for event in stream:
            seen.append(type(event).__name__)
    assert seen == ["ResponseStart", "UsageEvent"]
    assert str(caught.value) == (
        "mock: stream 1 raised a ValueError ValueError('bug in the test') as it was read, "
        "after 2 items: a scripted stream raises only an allama Error, which ends it there "
        "(a provider raises allama's errors only: script one of `allama.errors`)"
    )
    assert isinstance(caught.value.__cause__, ValueError)


def _endless(closed: list[str], name: str) -> Iterator[StreamEvent]:
    """A stream that never ends, which fails the test if it is read ahead of its stream."""
    try:
        yield ResponseStart()
        yield BlockStart(index=0, block_type=StreamBlockType.TEXT)
        for count in itertools.count():
            if count > 100:
                pytest.fail("the scripted generator was read ahead of its stream")
            yield TextDelta(index=0, text="a")
    finally:
        closed.append(name)


def test_a_generator_is_read_as_its_stream_is_and_closed_with_it() -> None:
    closed: list[str] = []
    provider = MockStreamingProvider([_endless(closed, "sync"), _endless(closed, "async")])
    stream = provider.chat_stream(REQUEST)
    events = [next(stream) for _ in range(3)]
    assert [type(event).__name__ for event in events] == [
        "ResponseStart",
        "BlockStart",
        "TextDelta",
    ]
    assert closed == []
    stream.close()  # as a provider's stream closes its connection
    assert closed == ["sync"]

    async def streamed() -> str:
        opened = await provider.achat_stream(REQUEST)
        first = await anext(opened)
        await opened.aclose()
        return type(first).__name__

    assert asyncio.run(streamed()) == "ResponseStart"
    assert closed == ["sync", "async"]


def test_a_generator_closed_before_its_first_event_is_closed_too() -> None:
    closed: list[str] = []
    started = _endless(closed, "unread")
    next(started)  # begun, so that closing it runs its `finally`
    with MockStreamingProvider([started]).chat_stream(REQUEST):
        pass
    assert closed == ["unread"]


def test_an_item_a_generator_yields_is_checked_as_it_comes() -> None:
    def odd() -> Any:
        yield ResponseStart()
        yield "text"

    stream = MockStreamingProvider([odd()]).chat_stream(REQUEST)
    assert isinstance(next(stream), ResponseStart)
    with pytest.raises(MockScriptError) as caught:
        next(stream)
    assert str(caught.value) == (
        "mock: item 1 of stream 1 is a str 'text', neither a stream event nor an allama Error"
    )


# 12. a scripted error names the request's model


def test_a_scripted_error_names_the_requests_model_as_a_provider_s_does() -> None:
    scripted = RateLimitedError("Rate limit reached", retry_after=2.0).with_status(429)
    calls: list[Any] = [
        lambda: MockProvider([scripted]).chat(REQUEST),
        lambda: MockProvider([scripted]).chat_stream(REQUEST),
        lambda: asyncio.run(MockProvider([scripted]).achat(REQUEST)),
        lambda: MockStreamingProvider().then_setup_error(scripted).chat_stream(REQUEST),
        lambda: asyncio.run(MockStreamingProvider().then_setup_error(scripted).achat(REQUEST)),
    ]
    for call in calls:
        with pytest.raises(RateLimitedError) as caught:
            call()
        assert (caught.value.provider, caught.value.model) == ("mock", "gpt-4o-mini")
        assert caught.value.as_log().to_dict()["model"] == "gpt-4o-mini"
    assert scripted.model is None  # the script's error is left as it was
    own = RateLimitedError("limited").with_model("gpt-4o")
    with pytest.raises(RateLimitedError) as kept:
        MockProvider([own]).chat(REQUEST)
    assert kept.value.model == "gpt-4o"


# 13. a non-finite float scripted outside a model


@pytest.mark.parametrize(
    ("value", "said"),
    [
        (float("inf"), "JSON has no number inf"),
        ([1.0, float("nan")], "JSON has no number nan (at `[1]`)"),
        ({"x": float("-inf")}, "JSON has no number -inf (at `x`)"),
    ],
    ids=["inf", "nan_in_list", "minus_inf_in_dict"],
)
def test_a_non_finite_float_is_refused_when_scripted(value: Any, said: str) -> None:
    with pytest.raises(TypeError) as caught:
        MockProvider.with_structured(value)
    assert str(caught.value) == (
        f"Structured: a float written as JSON does not read back as itself: {said}; script "
        "its JSON text instead, with `MockProvider.with_text`"
    )
    with pytest.raises(TypeError):
        MockStreamingProvider.with_structured(value)
    assert MockProvider.with_structured(1.5).chat(REQUEST).text() == "1.5"
