"""The mock's values as pydantic reads them: formatted strings in sets and maps, formats
pydantic writes, patterns as Rust's `regex` reads them, schemas that must not hang,
`Structured` inside containers and for decisions, and scripts holding the wrong items."""

from __future__ import annotations

import asyncio
import dataclasses
import datetime as dt
import enum
import ipaddress
import subprocess
import sys
import uuid
from decimal import Decimal
from typing import Annotated, Any, Literal

import pytest
from pydantic import (
    UUID1,
    UUID3,
    UUID4,
    UUID5,
    BaseModel,
    ConfigDict,
    Field,
    FilePath,
    HttpUrl,
    PostgresDsn,
    TypeAdapter,
    UrlConstraints,
    condecimal,
)

import allama
from allama import (
    CapabilitySupport,
    ChatCapability,
    ChatRequest,
    Extractor,
    ParseError,
    SchemaEnforcement,
)
from allama.errors import InvalidRequestError
from allama.mock import (
    ChatResponseBuilder,
    MockProvider,
    MockScriptError,
    MockStreamingProvider,
    SetupError,
    Structured,
    TestProvider,
    response_events,
    value_for_schema,
)
from allama.mock._conform import SchemaContext, pattern_matches
from allama.types import ResponseStart, WarningKind

REQUEST = ChatRequest("m").user("go")


def extracted(tp: Any) -> Any:
    """What `TestProvider` answers for `tp`, read by the extraction (pydantic validates it)."""
    return allama.extract(TestProvider(), tp, REQUEST).value


# Sets and maps of formatted strings


class Meeting(BaseModel):
    attendees: Annotated[set[uuid.UUID], Field(min_length=2)]


class Calendar(BaseModel):
    days: Annotated[dict[dt.date, str], Field(min_length=2)]


@pytest.mark.parametrize(
    ("tp", "expected"),
    [
        (
            Annotated[set[dt.date], Field(min_length=2)],
            {dt.date(2000, 1, 1), dt.date(2000, 1, 2)},
        ),
        (
            Annotated[set[dt.datetime], Field(min_length=2)],
            {
                dt.datetime(2000, 1, 1, tzinfo=dt.UTC),
                dt.datetime(2000, 1, 1, 0, 0, 1, tzinfo=dt.UTC),
            },
        ),
        (
            Annotated[set[uuid.UUID], Field(min_length=3)],
            {uuid.UUID(int=0), uuid.UUID(int=1), uuid.UUID(int=2)},
        ),
        (
            Annotated[set[HttpUrl], Field(min_length=2)],
            {HttpUrl("https://example.com"), HttpUrl("https://example.com/1")},
        ),
        (
            Annotated[set[ipaddress.IPv4Address], Field(min_length=2)],
            {ipaddress.IPv4Address("127.0.0.1"), ipaddress.IPv4Address("127.0.0.2")},
        ),
        (
            Annotated[dict[uuid.UUID, int], Field(min_length=2)],
            {uuid.UUID(int=0): 0, uuid.UUID(int=1): 0},
        ),
        (
            Annotated[dict[dt.date, int], Field(min_length=2)],
            {dt.date(2000, 1, 1): 0, dt.date(2000, 1, 2): 0},
        ),
        (Meeting, Meeting(attendees={uuid.UUID(int=0), uuid.UUID(int=1)})),
        (Calendar, Calendar(days={dt.date(2000, 1, 1): "", dt.date(2000, 1, 2): ""})),
    ],
    ids=lambda x: repr(x)[:40],
)
def test_sets_and_maps_of_formatted_strings_get_distinct_valid_values(
    tp: Any, expected: Any
) -> None:
    assert extracted(tp) == expected


@pytest.mark.parametrize(
    ("tp", "written"),
    [
        (Annotated[set[tuple[int, int]], Field(min_length=2)], [[0, 0], [0, 1]]),
        (Annotated[set[tuple[str, int]], Field(min_length=2)], [["", 0], ["", 1]]),
        (Annotated[set[tuple[int]], Field(min_length=3)], [[0], [1], [2]]),
        (Annotated[frozenset[tuple[int, bool]], Field(min_length=2)], [[0, True], [0, False]]),
    ],
    ids=lambda x: repr(x)[:40],
)
def test_sets_of_fixed_length_tuples_get_distinct_members(tp: Any, written: Any) -> None:
    """A fixed-length tuple has one least value; a set of them gets each drawn anew."""
    assert value_for_schema(TypeAdapter(tp).json_schema()) == written
    assert extracted(tp) == {tuple(each) for each in written}


def test_a_set_of_tuples_with_too_few_members_is_refused_at_the_position() -> None:
    tp = Annotated[set[tuple[Literal["a"]]], Field(min_length=2)]
    with pytest.raises(InvalidRequestError) as refused:
        extracted(tp)
    assert str(refused.value) == (
        "the response format schema has no value: no value satisfies the schema at "
        "#/items/1: no item fits this position"
    )


def test_many_distinct_formatted_strings() -> None:
    schema = {
        "type": "array",
        "items": {"type": "string", "format": "date"},
        "minItems": 400,
        "uniqueItems": True,
    }
    days = value_for_schema(schema)
    assert isinstance(days, list)
    assert days[0] == "2000-01-01"
    assert days[-1] == "2001-02-03"
    assert len(set(days)) == 400


def test_a_formatted_string_is_never_a_plain_one() -> None:
    # Two directories exist wherever the test runs; a third would be made-up text.
    schema = {
        "type": "array",
        "items": {"type": "string", "format": "directory-path"},
        "minItems": 3,
        "uniqueItems": True,
    }
    with pytest.raises(ValueError) as error:
        value_for_schema(schema)
    assert str(error.value) == (
        "no value satisfies the schema at #/items/2: no item fits this position"
    )
    keyed = {"type": "object", "propertyNames": {"format": "directory-path"}, "minProperties": 3}
    with pytest.raises(ValueError) as error:
        value_for_schema(keyed)
    assert str(error.value) == (
        "no value satisfies the schema at #: the first value tried broke `minProperties` at "
        "#/minProperties"
    )


# Formats pydantic writes


@pytest.mark.parametrize(
    ("tp", "expected"),
    [
        (UUID1, uuid.UUID("00000000-0000-1000-8000-000000000000")),
        (UUID3, uuid.UUID("00000000-0000-3000-8000-000000000000")),
        (UUID4, uuid.UUID("00000000-0000-4000-8000-000000000000")),
        (UUID5, uuid.UUID("00000000-0000-5000-8000-000000000000")),
        (PostgresDsn, PostgresDsn("postgresql://localhost/a")),
        (condecimal(max_digits=3, decimal_places=2, gt=Decimal("9.5")), Decimal("9.6")),
        (condecimal(max_digits=1, decimal_places=2), Decimal("0.1")),
        (condecimal(max_digits=2, decimal_places=3, gt=Decimal("-49")), Decimal("0.1")),
        (condecimal(max_digits=4, decimal_places=1, le=Decimal("-12.25")), Decimal("-13")),
    ],
    ids=lambda x: repr(x)[:40],
)
def test_formats_pydantic_writes_get_values_of_their_type(tp: Any, expected: Any) -> None:
    assert extracted(tp) == expected


def test_a_decimal_written_as_a_string_keeps_its_digits_and_bounds() -> None:
    tp = condecimal(max_digits=3, decimal_places=2, gt=Decimal("9.5"))
    provider = TestProvider()
    assert allama.extract(provider, tp, REQUEST).value == Decimal("9.6")
    sent = provider.last_request
    assert sent is not None and sent.response_format is not None
    schema: Any = sent.response_format.json_schema
    number, string = schema["anyOf"]
    # The string branch holds the digits, the number branch the bounds: a string meets both.
    assert value_for_schema({"anyOf": [{**number, "not": {}}, string]}) == "9.6"
    assert value_for_schema({"anyOf": [string]}) == "0"
    assert TypeAdapter(tp).validate_python("9.6") == Decimal("9.6")


class Document(BaseModel):
    path: FilePath


def test_a_format_the_mock_cannot_write_is_reported_approximate() -> None:
    message = (
        "`format` `file-path` at `Document.path` is not one the test provider writes: its "
        "value is a plain string, which the format may refuse"
    )
    plan = Extractor().plan(TestProvider(), Document, REQUEST)
    assert plan.enforcement is SchemaEnforcement.APPROXIMATE
    assert [(w.kind, w.message) for w in plan.degradations] == [(WarningKind.APPROXIMATED, message)]
    with pytest.raises(ParseError) as error:
        allama.extract(TestProvider(), Document, REQUEST)
    metadata = error.value.metadata
    assert metadata is not None
    assert metadata.enforcement is SchemaEnforcement.APPROXIMATE
    assert [w.message for w in metadata.degradations] == [message]
    forced = REQUEST.with_option(allama.ExtractionMode.FORCED_TOOL)
    assert Extractor().plan(TestProvider(), Document, forced).enforcement is (
        SchemaEnforcement.APPROXIMATE
    )


class Roster(BaseModel):
    attendees: Annotated[list[uuid.UUID], Field(min_length=2)]


def test_formats_the_mock_writes_stay_exact() -> None:
    plan = Extractor().plan(TestProvider(), Roster, REQUEST)
    assert (plan.enforcement, plan.degradations) == (SchemaEnforcement.EXACT, ())
    # A set's `uniqueItems` no provider's dialect enforces exactly: nor does the test
    # provider say it does.
    meeting = Extractor().plan(TestProvider(), Meeting, REQUEST)
    assert meeting.enforcement is SchemaEnforcement.APPROXIMATE
    result = allama.extract(TestProvider(), uuid.UUID, REQUEST)
    assert result.metadata.enforcement is SchemaEnforcement.EXACT
    # A UUID's version no provider's dialect holds (llama.cpp's reads `uuid4` as any UUID).
    versioned = allama.extract(TestProvider(), UUID4, REQUEST)
    assert versioned.value.version == 4
    assert versioned.metadata.enforcement is SchemaEnforcement.APPROXIMATE


# Patterns, as pydantic reads them


class SocialSecurity(BaseModel):
    model_config = ConfigDict(regex_engine="python-re")
    ssn: str = Field(pattern=r"^(?!000|666)[0-8]\d{2}-(?!00)\d{2}-(?!0000)\d{4}$")


class Zip(BaseModel):
    zip: str = Field(pattern=r"^(\d{5}|\d{5}-\d{4})$", min_length=10)


class Version(BaseModel):
    version: str = Field(pattern=r"^(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)$", min_length=6)


class Name(BaseModel):
    name: str = Field(pattern=r"^\p{Lu}\p{Ll}+$")


class Posix(BaseModel):
    code: str = Field(pattern=r"^[[:upper:]]{2}$")


class Colour(BaseModel):
    hex: str = Field(pattern=r"^#([0-9a-fA-F]{3}|[0-9a-fA-F]{6})$", min_length=7)


class Answer(BaseModel):
    word: str = Field(pattern=r"^(yes|no|maybe)$", min_length=5)


class Period(BaseModel):
    model_config = ConfigDict(regex_engine="python-re")
    iso: str = Field(pattern=r"^P(?!$)(\d+Y)?(\d+M)?(\d+W)?(\d+D)?(T(?=\d)(\d+H)?(\d+M)?(\d+S)?)?$")


class Greeting(BaseModel):
    text: str = Field(pattern=r"^(?i)hello$")


@pytest.mark.parametrize(
    "value",
    [
        SocialSecurity(ssn="100-10-1000"),
        Zip(zip="00000-0000"),
        Version(version="10.0.0"),
        Name(name="Aa"),
        Posix(code="AA"),
        Colour(hex="#000000"),
        Answer(word="maybe"),
        Period(iso="P0Y"),
        Greeting(text="hello"),
    ],
    ids=lambda value: type(value).__name__,
)
def test_patterns_get_a_value_pydantic_accepts(value: BaseModel) -> None:
    assert extracted(type(value)) == value


def test_a_pattern_re_reads_otherwise_is_held_as_rust_reads_it() -> None:
    # `re` reads `[[:upper:]]` as the characters `[:uper` then `]`: pydantic does not.
    assert pattern_matches(r"^[[:upper:]]{2}$", "AB")
    assert not pattern_matches(r"^[[:upper:]]{2}$", "ab")
    assert not pattern_matches(r"^\p{L}+$", "1")
    assert value_for_schema({"type": "string", "pattern": r"^\p{L}+$"}) == "A"
    assert value_for_schema({"type": "string", "pattern": r"^[[:digit:]]{3}$"}) == "000"


def test_a_pattern_no_engine_reads_takes_any_string() -> None:
    assert value_for_schema({"type": "string", "pattern": r"^\p{Nope}(", "minLength": 2}) == "aa"


def in_a_process(script: str) -> str:
    """What `script` prints, run apart so that a check that never ends fails the test."""
    try:
        done = subprocess.run(
            [sys.executable, "-c", script], capture_output=True, text=True, timeout=30, check=False
        )
    except subprocess.TimeoutExpired:
        return "timed out"
    return done.stdout


def test_a_nested_repeat_does_not_hang_the_generator() -> None:
    # A backtracking walk of `(a+)+` over 40 characters would not end: the process's
    # time limit (`in_a_process`) is the check, not a timing.
    script = (
        "from allama.mock import value_for_schema\n"
        "value = value_for_schema("
        "{'type': 'string', 'minLength': 40, 'not': {'pattern': '^(a+)+$'}})\n"
        "print(value)\n"
    )
    assert in_a_process(script) == "a" * 39 + "b\n"


def test_a_nested_repeat_only_re_reads_is_checked_on_short_texts() -> None:
    script = (
        "from allama.mock._conform import pattern_matches\n"
        "pattern = r'^(?=a)(a+)+$'\n"
        "print(pattern_matches(pattern, 'a' * 16), pattern_matches(pattern, 'a' * 15 + 'b'))\n"
        "print(pattern_matches(pattern, 'a' * 40 + 'b'))  # too slow to check: no match\n"
    )
    assert in_a_process(script) == "True False\nFalse\n"


# Integers with a fractional multipleOf


def test_an_integer_multiple_of_a_fraction_is_a_whole_multiple() -> None:
    schema = {"type": "integer", "multipleOf": 0.001, "exclusiveMinimum": 0.5}
    assert value_for_schema(schema) == 1
    assert value_for_schema({"type": "integer", "multipleOf": 2.5, "minimum": 1}) == 5


# Structured, written as the extraction type reads it


class Person(BaseModel):
    name: str = Field(validation_alias="fullName")


class Tag(BaseModel):
    label: str = Field(serialization_alias="Label")


class Team(BaseModel):
    lead: Person
    members: list[Person]


@dataclasses.dataclass(eq=False)
class Row:
    a: int


def test_models_inside_containers_are_written_by_the_names_validation_reads() -> None:
    people = [Person(fullName="Ada"), Person(fullName="Alan")]
    assert Structured(people).json_text == '[{"fullName":"Ada"},{"fullName":"Alan"}]'
    provider = MockProvider.with_structured(people)
    assert allama.extract(provider, list[Person], REQUEST).value == people
    tags = {"x": Tag(label="x")}
    assert Structured(tags).json_text == '{"x":{"label":"x"}}'
    assert allama.extract(MockProvider.with_structured(tags), dict[str, Tag], REQUEST).value == (
        tags
    )
    team = Team(lead=people[0], members=people)
    assert Structured(team).json_text == (
        '{"lead":{"fullName":"Ada"},"members":[{"fullName":"Ada"},{"fullName":"Alan"}]}'
    )
    assert allama.extract(MockProvider.with_structured(team), Team, REQUEST).value == team


def test_a_model_read_by_validation_alias_is_written_by_it() -> None:
    person = Person(fullName="Ada")
    assert Structured(person).json_text == '{"fullName":"Ada"}'
    assert allama.extract(MockProvider.with_structured(person), Person, REQUEST).value == person


def test_a_dataclass_without_equality_reads_back_field_by_field() -> None:
    assert Structured(Row(1)).json_text == '{"a":1}'
    assert Structured([Row(1)]).json_text == '[{"a":1}]'


# Structured answers to decisions


class Route(enum.Enum):
    BILLING = "billing"
    TECHNICAL = "technical"


class Level(enum.Enum):
    LOW = 1
    HIGH = 2


def choice_provider(value: Any) -> MockProvider:
    provider = MockProvider([Structured(value)])
    return provider.with_chat_capability(ChatCapability.CHOICE_OUTPUT, CapabilitySupport.SUPPORTED)


@pytest.mark.parametrize(
    ("tp", "value"),
    [
        (bool, False),
        (bool, True),
        (Route, Route.TECHNICAL),
        (Level, Level.HIGH),
        (Literal["spam", "ham"], "ham"),
        (Literal[1, 2], 2),
        (Literal[True, False], False),
    ],
    ids=repr,
)
def test_a_structured_answer_to_a_decision_is_its_option(tp: Any, value: Any) -> None:
    assert allama.decide(MockProvider([Structured(value)]), tp, REQUEST).value == value
    assert allama.decide(choice_provider(value), tp, REQUEST).value == value


def test_a_decision_answer_is_written_as_the_option_text() -> None:
    provider = choice_provider(False)
    allama.decide(provider, bool, REQUEST)
    sent = provider.last_request
    assert sent is not None
    assert Structured(False).response_for(sent).text() == "No"
    assert Structured(Level.HIGH).response_for(sent).text() == "HIGH"
    assert Structured(3.5).response_for(sent).text() == "3.5"  # no option: as a model may


# Scripts holding what no provider answers with


def test_a_script_item_of_another_kind_is_a_script_error() -> None:
    cases = [
        (
            TimeoutError("t"),
            "mock: the answer to call 1 is a TimeoutError TimeoutError('t'), which no script "
            "answers with: a ChatResponse, text, an allama Error or a Structured value (a "
            "provider raises allama's errors only: script one of `allama.errors`)",
        ),
        (
            {"a": 1},
            "mock: the answer to call 1 is a dict {'a': 1}, which no script answers with: a "
            "ChatResponse, text, an allama Error or a Structured value",
        ),
        (
            None,
            "mock: the answer to call 1 is a NoneType None, which no script answers with: a "
            "ChatResponse, text, an allama Error or a Structured value",
        ),
    ]
    for item, message in cases:
        with pytest.raises(MockScriptError) as error:
            MockProvider([item]).chat(REQUEST)  # type: ignore[list-item]
        assert str(error.value) == message
        with pytest.raises(MockScriptError):
            MockProvider([item]).chat_stream(REQUEST)  # type: ignore[list-item]


def test_a_stream_holding_something_else_is_a_script_error() -> None:
    cases: list[tuple[Any, str]] = [
        (
            [ResponseStart(), TimeoutError("t")],
            "mock: item 1 of stream 1 is a TimeoutError TimeoutError('t'), neither a stream "
            "event nor an allama Error (a provider raises allama's errors only: script one of "
            "`allama.errors`)",
        ),
        (
            ["text"],
            "mock: item 0 of stream 1 is a str 'text', neither a stream event nor an allama Error",
        ),
        (
            "text",
            "mock: stream 1 is a str 'text', which no script streams: a list of events and "
            "errors, a SetupError or a Structured value",
        ),
        (
            SetupError(ValueError("v")),  # type: ignore[arg-type]
            "mock: the setup error of stream 1 is a ValueError ValueError('v'), not an allama "
            "Error (a provider raises allama's errors only: script one of `allama.errors`)",
        ),
    ]
    for script, message in cases:
        with pytest.raises(MockScriptError) as error:
            MockStreamingProvider([script]).chat(REQUEST)
        assert str(error.value) == message


def test_an_async_call_meets_the_same_script_error() -> None:
    with pytest.raises(MockScriptError, match="is a TimeoutError"):
        asyncio.run(MockProvider([TimeoutError("t")]).achat(REQUEST))  # type: ignore[list-item]
    with pytest.raises(MockScriptError, match="item 0 of stream 1 is a str"):
        asyncio.run(MockStreamingProvider([["text"]]).achat(REQUEST))  # type: ignore[list-item]


# Regressions of the rewrite: keys, patterns only Rust reads, unchecked texts, scripts as
# generators, formats left out, walk cost, short URLs


@pytest.mark.parametrize(
    ("key", "expected"),
    [
        (int, {0: 0, 1: 0, 2: 0}),
        (float, {0.0: 0, 1.0: 0, 2.0: 0}),
        (Decimal, {Decimal(0): 0, Decimal(1): 0, Decimal(2): 0}),
    ],
    ids=lambda x: getattr(x, "__name__", ""),
)
def test_a_map_keyed_by_numbers_gets_keys_naming_distinct_numbers(
    key: type, expected: dict[Any, int]
) -> None:
    tp = Annotated[dict[key, int], Field(min_length=3)]  # type: ignore[valid-type]
    result = allama.extract(TestProvider(), tp, REQUEST)
    assert result.value == expected
    # Keys held to a pattern, counted: no provider's dialect enforces it exactly.
    assert result.metadata.enforcement is SchemaEnforcement.APPROXIMATE
    assert TypeAdapter(tp).validate_json('{"0":0,"1":0,"2":0}') == expected


def test_keys_drawn_from_a_number_key_pattern_are_plain_numerals() -> None:
    names = {"type": "object", "propertyNames": {"pattern": "^[+-]?[0-9]+$"}, "minProperties": 3}
    assert value_for_schema(names) == {"0": None, "1": None, "2": None}
    number = "^[+-]?([0-9]+(\\.[0-9]*)?|\\.[0-9]+)([eE][+-]?[0-9]+)?$"
    patterned = {
        "type": "object",
        "patternProperties": {number: {"type": "integer"}},
        "additionalProperties": False,
        "minProperties": 3,
    }
    assert value_for_schema(patterned) == {"0": 0, "1": 0, "2": 0}


@pytest.mark.parametrize(
    "pattern",
    [r"^\p{Thai}+$", r"^\p{Lt}$", r"^a\p{Mn}$", r"^\u{e9}+$", r"^[a-z&&[^aeiou]]{3}$"],
)
def test_a_pattern_rust_reads_and_the_sampler_cannot_walk_has_no_value(pattern: str) -> None:
    with pytest.raises(ValueError) as error:
        value_for_schema({"type": "string", "pattern": pattern})
    assert str(error.value) == (
        f"no value satisfies the schema at #/pattern: no string matching {pattern!r} could "
        "be made (the sampler cannot walk this pattern)"
    )

    class Coded(BaseModel):
        v: str = Field(pattern=pattern)

    with pytest.raises(InvalidRequestError) as refused:
        allama.extract(TestProvider(), Coded, REQUEST)
    assert str(refused.value).startswith(
        "the response format schema has no value: no value satisfies the schema at "
        f"#/properties/v/pattern: no string matching {pattern!r} could be made"
    )
    assert not pattern_matches(pattern, "")


@pytest.mark.parametrize("pattern", [r"^(?!.*aaa)(a+b)+$", r"^(?!.*(.)\1{2})(\w+\s?)+$"])
def test_a_text_too_long_to_check_against_a_nested_repeat_is_never_given(pattern: str) -> None:
    with pytest.raises(ValueError) as error:
        value_for_schema({"type": "string", "pattern": pattern, "minLength": 20})
    assert str(error.value) == (
        f"no value satisfies the schema at #/pattern: no string matching {pattern!r} fits "
        "the length limits (with nested repeats and syntax only Python's `re` reads, a text "
        "over 16 characters cannot be checked in bounded time)"
    )

    class Code(BaseModel):
        model_config = ConfigDict(regex_engine="python-re")
        code: str = Field(pattern=pattern, min_length=20)

    with pytest.raises(InvalidRequestError, match="has no value"):
        allama.extract(TestProvider(), Code, REQUEST)
    # Under `not` too: an unchecked text is refused, not taken as breaking the pattern.
    assert not SchemaContext({"not": {"pattern": pattern}}).is_valid("a" * 30)


def test_a_nested_repeat_pattern_still_gives_a_checked_short_text() -> None:
    pattern = r"^(?!.*aaa)(a+b)+$"
    short = value_for_schema({"type": "string", "pattern": pattern, "minLength": 10})
    assert short == "aabaababab"
    config = ConfigDict(regex_engine="python-re")
    assert (
        TypeAdapter(Annotated[str, Field(pattern=pattern)], config=config).validate_python(short)
        == short
    )


def test_a_stream_scripted_as_a_generator_or_iterator_streams_its_events() -> None:
    events = response_events(ChatResponseBuilder().text("hi").build())
    provider = MockStreamingProvider([(event for event in events), iter(events)])
    assert provider.chat(REQUEST).text() == "hi"
    assert asyncio.run(provider.achat(REQUEST)).text() == "hi"
    streaming = MockStreamingProvider([]).then_stream(event for event in events)
    with streaming.chat_stream(REQUEST) as stream:
        assert [type(event) for event in stream] == [type(event) for event in events]


class Listing(BaseModel):
    a: int
    p: FilePath | None = None


def test_an_unknown_format_the_answer_leaves_out_is_not_said_written() -> None:
    plan = Extractor().plan(TestProvider(), Listing, REQUEST)
    # Not written as plain text (the answer leaves it out), but no provider's dialect
    # enforces it: approximate, as on every provider, and said once.
    assert plan.enforcement is SchemaEnforcement.APPROXIMATE
    assert [w.message.split(" is enforced")[0] for w in plan.degradations] == ["`Listing.p`"]
    result = allama.extract(TestProvider(), Listing, REQUEST)
    assert result.value == Listing(a=0)
    assert result.metadata.enforcement is SchemaEnforcement.APPROXIMATE
    assert list(result.metadata.degradations) == list(plan.degradations)


def test_pattern_walks_cost_work_linear_in_their_text() -> None:
    # Counted in the walk's steps, not timed: twice the text, twice the steps (a walk that
    # went over its text again for each character would take four times as many).
    script = (
        "from allama.mock import _pattern, value_for_schema\n"
        "steps = 0\n"
        "step = _pattern._Walk.step\n"
        "def counted(self, op, arg):\n"
        "    global steps\n"
        "    steps += 1\n"
        "    return step(self, op, arg)\n"
        "_pattern._Walk.step = counted\n"
        "def walked(schema):\n"
        "    global steps\n"
        "    steps = 0\n"
        "    try:\n"
        "        value = value_for_schema(schema)\n"
        "    except ValueError as error:\n"
        "        value = str(error)\n"
        "    return value, steps\n"
        "def refused(n):\n"
        "    return walked({'type': 'string', 'pattern': '^(a|b)+$', 'minLength': n,"
        " 'not': {'pattern': 'a$'}})\n"
        "def plain(n):\n"
        "    return walked({'type': 'string', 'pattern': '^([a-z])+$', 'minLength': n})\n"
        "(said, small), (_, large) = refused(2500), refused(5000)\n"
        "print(said)\n"
        "print(1.9 < large / small < 2.1)\n"
        "(short, small), (long, large) = plain(4500), plain(9000)\n"
        "print(len(short), len(long), 1.9 < large / small < 2.1)\n"
    )
    assert in_a_process(script) == (
        "no value satisfies the schema at #: the first value tried broke `not` at #/not\n"
        "True\n"
        "4500 9000 True\n"
    )


def test_a_short_http_url_is_an_https_one() -> None:
    short = Annotated[HttpUrl, UrlConstraints(max_length=15)]
    assert extracted(short) == HttpUrl("https://a.co")
    assert extracted(Annotated[set[short], Field(min_length=3)]) == {
        HttpUrl("https://a.co"),
        HttpUrl("https://b.co"),
        HttpUrl("https://c.co"),
    }
    assert value_for_schema({"type": "string", "format": "uri", "maxLength": 10}) == "https://a"


def test_a_map_of_patterned_keys_draws_every_key_from_the_pattern() -> None:
    key = Annotated[str, Field(pattern=r"^[A-Z]{3}$", min_length=3)]
    tp = Annotated[dict[key, int], Field(min_length=10)]
    value = extracted(tp)
    assert list(value) == [
        "AAA", "BAA", "ABA", "AAB", "CAA", "BBA", "BAB", "ACA", "ABB", "AAC"
    ]  # fmt: skip
    assert TypeAdapter(tp).validate_python(value) == value
