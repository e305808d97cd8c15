"""The schema of a type: a type too deep to build is a `SchemaError` naming it."""

from __future__ import annotations

import dataclasses
import datetime as dt
import enum
import ipaddress
import json
import re
from collections.abc import Callable
from decimal import Decimal
from typing import Annotated, Any, Literal, NotRequired

import pydantic.dataclasses
import pytest
from annotated_types import Predicate
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import (
    AfterValidator,
    AliasChoices,
    AliasPath,
    AwareDatetime,
    Base64Bytes,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Discriminator,
    Field,
    FutureDatetime,
    ImportString,
    PastDate,
    PastDatetime,
    PlainValidator,
    RootModel,
    Tag,
    TypeAdapter,
    ValidationError,
    ValidationInfo,
    WrapValidator,
    computed_field,
    condate,
    condecimal,
    create_model,
    model_validator,
)
from pydantic.json_schema import SkipJsonSchema
from pydantic_core import PydanticSerializationError
from pydantic_core import SchemaError as CoreSchemaError
from typing_extensions import TypeAliasType, TypedDict

import allama
from _native_wire import answer, extract_through
from _recording import provider as recorded
from allama import ChatRequest, InvalidRequestError, SchemaEnforcement, ToolDefinition
from allama.mock import MockProvider, TestProvider
from allama.schema import (
    SchemaError,
    gemini_json_schema,
    grammar_engine,
    openai_strict,
    type_schema,
)
from allama.schema._dialects._llama_cpp import llama_cpp


def test_a_type_nested_too_deep_is_a_schema_error_naming_it() -> None:
    tp: Any = int
    for _ in range(1000):
        tp = list[tp]
    with pytest.raises(SchemaError) as caught:
        type_schema(tp)
    message = str(caught.value)
    assert message.startswith("the type `list[list[list[")
    assert message.endswith("[...]]]]]]]]]]]]]` nests too deep to build its JSON Schema")
    assert caught.value.pointer == "/"


def test_a_chain_of_models_too_deep_is_a_schema_error_naming_the_outer_model() -> None:
    model: Any = create_model("Level0", value=(int, 0))
    for level in range(1, 1000):
        model = create_model(f"Level{level}", inner=(model, ...))
    with pytest.raises(SchemaError, match=r"^the type `Level999` nests too deep"):
        type_schema(model)


def test_an_ordinary_type_still_builds_after_one_that_did_not() -> None:
    class Point(BaseModel):
        x: int

    assert type_schema(Point).schema["required"] == ["x"]


def test_type_expressions_equal_but_spelled_apart_keep_their_own_schemas() -> None:
    from typing import Literal

    from allama.schema._types import type_schema

    first = type_schema(Literal["a", "b"]).schema
    second = type_schema(Literal["b", "a"]).schema
    assert (first["enum"], second["enum"]) == (["a", "b"], ["b", "a"])
    assert type_schema(list[Literal["b", "a"]]).schema["items"]["enum"] == ["b", "a"]


class Plain:
    """A class pydantic has no validator for."""


class HoldsPlain(BaseModel):
    model_config = ConfigDict(arbitrary_types_allowed=True)
    plain: Plain


class HoldsCallable(BaseModel):
    run: Callable[[int], int]


TAIL = (
    "a type to extract is a pydantic model, a dataclass, a TypedDict, or a type such as "
    "`list[...]`, a `Literal` or an enum, made of types JSON can carry"
)


@pytest.mark.parametrize(
    ("tp", "message"),
    [
        (
            5,
            "cannot extract `5`: pydantic cannot validate it (Unable to generate pydantic-core "
            "schema for 5); ",
        ),
        (
            Plain,
            "cannot extract `Plain`: pydantic cannot validate it (Unable to generate "
            f"pydantic-core schema for {Plain!r}); ",
        ),
        (
            HoldsPlain,
            "cannot extract `HoldsPlain`: its JSON Schema cannot be written, and a "
            "provider needs it (Cannot generate a JsonSchema for core_schema.IsInstanceSchema "
            f"({Plain!r})); ",
        ),
        (
            HoldsCallable,
            "cannot extract `HoldsCallable`: its JSON Schema cannot be written, and "
            "a provider needs it (Cannot generate a JsonSchema for core_schema.CallableSchema); ",
        ),
    ],
)
def test_a_type_that_cannot_be_extracted_says_so_in_the_callers_terms(
    tp: Any, message: str
) -> None:
    """Not pydantic's advice to set `arbitrary_types_allowed`, which a caller of an
    extraction cannot act on; before anything is sent."""
    provider = TestProvider()
    with pytest.raises(TypeError) as raised:
        allama.extract(provider, tp, ChatRequest("m").user("x"))
    assert str(raised.value) == message + TAIL
    assert provider.requests == []


class RefInADefault(BaseModel):
    meta: dict[str, str] = {"$ref": "#/nowhere"}
    x: int


def test_a_type_whose_schema_pydantic_fails_to_write_is_refused_with_the_reason() -> None:
    provider = TestProvider()
    with pytest.raises(TypeError) as raised:
        allama.extract(provider, RefInADefault, ChatRequest("m").user("x"))
    assert str(raised.value) == (
        "cannot extract `RefInADefault`: pydantic failed to write its JSON Schema (KeyError "
        "'#/nowhere'; a default or `json_schema_extra` holding a `$ref` key does this)"
    )
    assert provider.requests == []


def _fails(schema: dict[str, Any]) -> None:
    raise ZeroDivisionError("a hook of the caller's")


class FailsToWrite(BaseModel):
    model_config = ConfigDict(json_schema_extra=_fails)
    n: int


class FieldFailsToWrite(BaseModel):
    n: int = Field(json_schema_extra=_fails)


class HoldsOneThatFails(BaseModel):
    items: list[FieldFailsToWrite]


class OwnJsonSchemaFails:
    @classmethod
    def __get_pydantic_core_schema__(cls, source: Any, handler: Any) -> Any:
        return handler(int)

    @classmethod
    def __get_pydantic_json_schema__(cls, schema: Any, handler: Any) -> Any:
        raise KeyError("units")


class HoldsOwnJsonSchemaFails(BaseModel):
    size: OwnJsonSchemaFails


class OwnValidatorFails:
    @classmethod
    def __get_pydantic_core_schema__(cls, source: Any, handler: Any) -> Any:
        raise ValueError("no validator here\nand a second line")


class LongFailure(BaseModel):
    n: int = Field(json_schema_extra=lambda schema: _raise(RuntimeError("x" * 300)))


def _raise(error: BaseException) -> None:
    raise error


SCHEMA_HOOKS = (
    "(code of the type's own runs there, such as a `json_schema_extra` or a "
    "`__get_pydantic_json_schema__`)"
)


@pytest.mark.parametrize(
    ("tp", "cause", "message"),
    [
        (
            FailsToWrite,
            ZeroDivisionError,
            "cannot extract `FailsToWrite`: writing its JSON Schema raised ZeroDivisionError: "
            f"a hook of the caller's {SCHEMA_HOOKS}",
        ),
        (
            FieldFailsToWrite,
            ZeroDivisionError,
            "cannot extract `FieldFailsToWrite`: writing the JSON Schema of its field "
            "`FieldFailsToWrite.n` raised ZeroDivisionError: a hook of the caller's "
            + SCHEMA_HOOKS,
        ),
        (
            list[HoldsOneThatFails],
            ZeroDivisionError,
            "cannot extract `list[HoldsOneThatFails]`: writing the JSON Schema of its field "
            "`FieldFailsToWrite.n` raised ZeroDivisionError: a hook of the caller's "
            + SCHEMA_HOOKS,
        ),
        (
            HoldsOwnJsonSchemaFails,
            KeyError,
            "cannot extract `HoldsOwnJsonSchemaFails`: writing the JSON Schema of its field "
            f"`HoldsOwnJsonSchemaFails.size` raised KeyError: 'units' {SCHEMA_HOOKS}",
        ),
        (
            dict[str, OwnValidatorFails],
            ValueError,
            "cannot extract `dict[str, OwnValidatorFails]`: building its validator raised "
            "ValueError: no validator here (code of the type's own runs there, such as a "
            "`__get_pydantic_core_schema__`)",
        ),
        (
            LongFailure,
            RuntimeError,
            "cannot extract `LongFailure`: writing the JSON Schema of its field `LongFailure.n` "
            f"raised RuntimeError: {'x' * 197}... (300 characters) {SCHEMA_HOOKS}",
        ),
    ],
)
def test_a_type_whose_own_code_fails_as_its_schema_is_built_is_refused_naming_the_error(
    tp: Any, cause: type[Exception], message: str
) -> None:
    """Its error by its type and first line, the field it was in, where known, and itself
    as the cause: not a traceback out of pydantic. Before anything is sent."""
    provider = TestProvider()
    with pytest.raises(TypeError) as raised:
        allama.extract(provider, tp, ChatRequest("m").user("x"))
    assert str(raised.value) == message
    assert type(raised.value.__cause__) is cause
    assert provider.requests == []
    with pytest.raises(TypeError) as again:  # not cached: said again, the same
        type_schema(tp)
    assert str(again.value) == message


def test_an_interrupt_while_a_schema_is_built_goes_through() -> None:
    class Interrupted(BaseModel):
        n: int = Field(json_schema_extra=lambda schema: _raise(KeyboardInterrupt()))

    with pytest.raises(KeyboardInterrupt):
        type_schema(Interrupted)


class HoldsAClass(BaseModel):
    kind: type[int]


def _classes() -> list[Any]:
    from typing import Type  # noqa: UP035 (the old spelling is refused the same)

    return [
        ("type[int]", type[int]),
        ("type[int]", Type[int]),  # noqa: UP006
        ("HoldsAClass", HoldsAClass),
        ("list[type[int]]", list[type[int]]),
        ("dict[type[int], int]", dict[type[int], int]),
        ("type[int | str]", type[int | str]),
        ("type[int] | type[str]", type[int] | type[str]),
        ("type[int] | None", type[int] | None),
    ]


@pytest.mark.parametrize(("label", "tp"), _classes())
def test_a_class_as_a_value_is_refused_as_a_callable_is(label: str, tp: Any) -> None:
    """Pydantic's schema of `type[int]` is `{}` (anything), and validation from JSON fails
    on every answer ("Cannot check `issubclass` when validating from json"): every paid
    pass would fail. A union none of whose choices can be written is refused too (it was
    `{"anyOf": []}`), a `Callable`'s as well."""
    provider = TestProvider()
    with pytest.raises(TypeError) as raised:
        allama.extract(provider, tp, ChatRequest("m").user("x"))
    assert str(raised.value) == (
        f"cannot extract `{label}`: its JSON Schema cannot be written, and a provider needs it "
        "(Cannot generate a JsonSchema for core_schema.IsSubclassSchema (<class 'int'>)); " + TAIL
    )
    assert provider.requests == []


def test_a_union_of_callables_alone_is_refused_and_a_union_with_a_value_keeps_the_value() -> None:
    with pytest.raises(TypeError) as raised:
        type_schema(Callable[[], int] | Callable[[], str])
    assert str(raised.value) == (
        "cannot extract `Callable[[], int] | Callable[[], str]`: its JSON Schema cannot be "
        "written, and a provider needs it (Cannot generate a JsonSchema for "
        "core_schema.CallableSchema); " + TAIL
    )
    # As pydantic leaves a choice it cannot write out, the value's choice is what is asked.
    assert type_schema(int | type[int]).schema == {"type": "integer"}
    assert type_schema(int | Callable[[], int]).schema == {"type": "integer"}


@dataclasses.dataclass
class CodedRow:
    code: Annotated[str, Field(pattern=r"^[A-Z]{2}\d{3")]


@dataclasses.dataclass
class HoldsCodedRows:
    rows: list[CodedRow]


class Tags(TypedDict):
    tags: list[Annotated[str, Field(pattern="(?P<a>x)(?P<a>y)")]]


class DeferredCode(BaseModel):
    model_config = ConfigDict(defer_build=True)
    code: Annotated[str, Field(pattern="(")]


class DeferredCount(BaseModel):
    model_config = ConfigDict(defer_build=True)
    count: Annotated[int, Field(gt="x")]


class DeferredName(BaseModel):
    model_config = ConfigDict(defer_build=True)
    name: Annotated[str, Field(max_length=-1)]


@pytest.mark.parametrize(
    ("tp", "cause", "message"),
    [
        (
            CodedRow,
            CoreSchemaError,
            "cannot extract `CodedRow`: pydantic failed to build the validator of its field "
            "`code` (regex parse error: unclosed counted repetition in `^[A-Z]{2}\\d{3`)",
        ),
        (
            HoldsCodedRows,
            CoreSchemaError,
            "cannot extract `HoldsCodedRows`: pydantic failed to build the validator of its "
            "field `code` (regex parse error: unclosed counted repetition in `^[A-Z]{2}\\d{3`)",
        ),
        (
            Tags,
            CoreSchemaError,
            "cannot extract `Tags`: pydantic failed to build the validator of its field `tags` "
            "(regex parse error: duplicate capture group name in `(?P<a>x)(?P<a>y)`)",
        ),
        (
            Annotated[int, Field(gt="a")],
            CoreSchemaError,
            "cannot extract `int`: pydantic failed to build its validator (ValueError: 'gt' "
            "must be coercible to an integer)",
        ),
        (
            Annotated[int, Field(examples=[object()])],
            PydanticSerializationError,
            "cannot extract `int`: pydantic failed to build its validator "
            "(PydanticSerializationError: Unable to serialize unknown type: <class 'object'>)",
        ),
        # A model built when first used (`defer_build`) is built as its schema is written.
        (
            DeferredCode,
            CoreSchemaError,
            "cannot extract `DeferredCode`: pydantic failed to build the validator of its "
            "field `code` (regex parse error: unclosed group in `(`)",
        ),
        (
            DeferredCount,
            CoreSchemaError,
            "cannot extract `DeferredCount`: pydantic failed to build the validator of its "
            "field `count` (ValueError: 'gt' must be coercible to an integer)",
        ),
        (
            DeferredName,
            CoreSchemaError,
            "cannot extract `DeferredName`: pydantic failed to build the validator of its "
            "field `name` (OverflowError: can't convert negative int to unsigned)",
        ),
    ],
)
def test_a_type_pydantic_fails_to_build_a_validator_of_is_refused_in_pydantics_words(
    tp: Any, cause: type[Exception], message: str
) -> None:
    """A constraint pydantic cannot take (a pattern it cannot parse, a bound that is no
    number) fails in pydantic, not in code of the type's own: its reason is said (the
    innermost of its nested `SchemaError`, on one line), with the field it was in, and no
    hook the caller never wrote is blamed. Before anything is sent."""
    provider = TestProvider()
    with pytest.raises(TypeError) as raised:
        allama.extract(provider, tp, ChatRequest("m").user("x"))
    assert str(raised.value) == message
    assert type(raised.value.__cause__) is cause
    assert provider.requests == []


class PageIndex(BaseModel):
    pages: dict[int, str]
    weights: dict[float, int]
    flags: dict[bool, str]
    votes: dict[Literal[1, "a"], str]


def test_a_map_keyed_by_numbers_or_booleans_says_what_its_keys_are() -> None:
    # Pydantic says nothing of such keys, so a provider would take any key for enforced:
    # `{"pages": {"intro": "..."}}` fails the type. No dialect keeps `propertyNames`, so
    # every one says the keys are not enforced.
    props = type_schema(PageIndex).schema["properties"]
    number = "^[+-]?([0-9]+(\\.[0-9]*)?|\\.[0-9]+)([eE][+-]?[0-9]+)?$"
    assert props["pages"]["propertyNames"] == {"pattern": "^[+-]?[0-9]+$"}
    assert props["weights"]["propertyNames"] == {"pattern": number}
    assert props["flags"]["propertyNames"] == {"enum": ["true", "false"]}
    # Validation reads `Literal[1]` from no key (a key is text): only "a" is one.
    assert props["votes"]["propertyNames"] == {"enum": ["a"]}
    assert PageIndex.model_validate_json('{"pages":{},"weights":{},"flags":{},"votes":{"a":"x"}}')
    with pytest.raises(ValueError):
        PageIndex.model_validate_json('{"pages":{},"weights":{},"flags":{},"votes":{"1":"x"}}')
    assert "propertyNames" not in type_schema(dict[str, int]).schema
    schema = type_schema(PageIndex).schema
    for rewrite in (gemini_json_schema, llama_cpp, grammar_engine):
        notes = [note.message for note in rewrite(schema).notes]
        assert any("propertyNames" in note for note in notes), rewrite


class Rank(enum.IntEnum):
    LOW = 1
    HIGH = 2


class Switch(enum.Enum):
    ON = True
    OFF = False


class Code(enum.Enum):
    A = 1
    B = 2


def test_a_map_keyed_by_an_int_enum_says_its_keys_as_text() -> None:
    # Pydantic writes them `integer`, which no key (text) is; validation reads "1".
    schema = type_schema(dict[Rank, str]).schema
    assert schema == {
        "type": "object",
        "additionalProperties": {"type": "string"},
        "propertyNames": {"enum": ["1", "2"]},
    }
    assert TypeAdapter(dict[Rank, str]).validate_json('{"1": "x"}') == {Rank.LOW: "x"}
    # An enum of booleans: read from "true" and "false".
    switched = type_schema(dict[Switch, int]).schema
    assert switched["propertyNames"] == {"enum": ["true", "false"]}
    assert TypeAdapter(dict[Switch, int]).validate_json('{"true": 1}') == {Switch.ON: 1}


@pytest.mark.parametrize("tp", [dict[Literal[1, 2], str], dict[Code, str]])
def test_a_map_whose_keys_no_json_key_can_be_read_as_is_refused(tp: Any) -> None:
    # Only an empty map would validate: refused before anything is sent, as a field read
    # from a path is.
    provider = TestProvider()
    with pytest.raises(TypeError, match="reads no key JSON can write"):
        allama.extract(provider, tp, ChatRequest("m").user("x"))
    assert provider.requests == []
    with pytest.raises(ValueError):
        TypeAdapter(tp).validate_json('{"1": "x"}')


class ReadFromOneStep(BaseModel):
    n: str = Field(validation_alias=AliasPath("names"))


class ReadFromItsOwnName(BaseModel):
    n: str = Field(validation_alias=AliasPath("n"))


def test_a_path_of_one_step_is_a_name_only_where_the_schema_shows_it() -> None:
    # Pydantic's schema names the field `n`, validation reads `names`.
    assert list(TypeAdapter(ReadFromOneStep).json_schema()["properties"]) == ["n"]
    with pytest.raises(TypeError, match="is read from `names`"):
        allama.extract(TestProvider(), ReadFromOneStep, ChatRequest("m").user("x"))
    assert allama.extract(TestProvider(), ReadFromItsOwnName, ChatRequest("m").user("x")).value


class Invoice(BaseModel):
    total: Decimal
    amount: condecimal(max_digits=5, decimal_places=2)  # type: ignore[valid-type]
    paid: condecimal(ge=0)  # type: ignore[valid-type]


@pytest.mark.parametrize(
    ("field", "text", "valid"),
    [
        ("total", "1234.50", True),
        ("total", "-1.5e3", True),
        ("total", "$1,234.50", False),
        ("total", "12 EUR", False),
        ("amount", "123.45", True),
        ("amount", "12.340", True),
        ("amount", "1234.5", False),
        ("amount", "0.001", False),
        ("amount", "1e10", False),
    ],
)
def test_a_decimal_in_a_string_is_a_numeral_the_type_reads(
    field: str, text: str, valid: bool
) -> None:
    # Pydantic leaves a decimal's string free: "$1,234.50" passed the schema, failed the
    # type, and every dialect said exact. Digit limits are the string's pattern's.
    props = type_schema(Invoice).schema["properties"]
    schema = props[field]
    branches = schema.get("anyOf", [schema])
    (string,) = [branch for branch in branches if branch.get("type") == "string"]
    assert bool(re.fullmatch(string["pattern"], text)) is valid
    if valid:  # what the pattern lets through, the type reads
        assert Invoice.model_validate_json(
            json.dumps({"total": "1", "amount": "1", "paid": "1", field: text}), strict=True
        )


def test_what_a_decimals_branch_cannot_hold_is_said_not_enforced() -> None:
    # Digit limits in a JSON number, bounds in a numeral in a string: marked, so that each
    # dialect says so. A plain decimal is exact.
    schema = type_schema(Invoice).schema
    notes = sorted(note.message for note in openai_strict(schema).notes)
    assert notes == [
        f"`format` was removed at `/properties/{place}`: OpenAI strict mode does not "
        "enforce `decimal`"
        for place in ("amount/anyOf/0", "amount/anyOf/1", "paid/anyOf/1")
    ]
    # The bounds stay on the number, where providers enforce them.
    assert schema["properties"]["paid"]["anyOf"][0] == {"type": "number", "minimum": 0.0}


def _numeral_pattern(tp: Any) -> str:
    (string,) = [b for b in type_schema(tp).schema["anyOf"] if b.get("type") == "string"]
    pattern: str = string["pattern"]
    return pattern


def _decimal_reads(tp: Any, text: str) -> bool:
    try:
        type_schema(tp).adapter.validate_json(json.dumps(text), strict=True)
    except ValidationError:
        return False
    return True


Fraction4 = Annotated[Decimal, Field(max_digits=4, decimal_places=4)]


@pytest.mark.parametrize(
    ("text", "valid"),
    [
        ("0", False),
        ("-0", False),
        ("0.", False),
        ("00", False),
        ("1", False),
        ("0.12345", False),
        (".00001", False),
        ("0.0", True),
        ("-0.0", True),
        (".5", True),
        ("+.5", True),
        ("00.5", True),
        ("-0.1234", True),
        ("0.12340000", True),
        ("0.0000000", True),
    ],
)
def test_a_decimal_with_no_whole_digits_is_a_numeral_with_a_point(text: str, valid: bool) -> None:
    # With max_digits <= decimal_places pydantic counts a bare zero ("0", "0.") as a digit
    # before the point, and refuses it: pydantic's pattern let it by.
    assert bool(re.fullmatch(_numeral_pattern(Fraction4), text)) is valid
    assert _decimal_reads(Fraction4, text) is valid


@given(
    limits=st.tuples(st.none() | st.integers(1, 8), st.none() | st.integers(0, 8)).filter(
        lambda limits: limits != (None, None)
    ),
    data=st.data(),
)
@settings(max_examples=300)
def test_what_a_decimals_digit_limited_pattern_lets_through_the_type_reads(
    limits: tuple[int | None, int | None], data: st.DataObject
) -> None:
    max_digits, places = limits
    tp = Annotated[Decimal, Field(max_digits=max_digits, decimal_places=places)]
    pattern = _numeral_pattern(tp)
    text = data.draw(
        st.text(st.sampled_from("0000123456789.-+"), min_size=1, max_size=12)
        | st.from_regex(pattern, fullmatch=True)
    )
    if re.fullmatch(pattern, text):
        assert _decimal_reads(tp, text), (pattern, text)


class ReadFromAPath(BaseModel):
    first: str = Field(validation_alias=AliasPath("names", 0))


class HoldsOneReadFromAPath(BaseModel):
    people: list[ReadFromAPath]


class AChoiceOfOneName(BaseModel):
    first: str = Field(validation_alias=AliasChoices(AliasPath("names", 0), "given"))


class ReadByNameToo(BaseModel):
    model_config = ConfigDict(validate_by_name=True)
    first: str = Field(validation_alias=AliasPath("names", 0))


def test_a_field_read_only_from_a_path_is_refused_before_anything_is_sent() -> None:
    # The schema names the field `first`, validation reads `names[0]`: no answer validates.
    for tp in (ReadFromAPath, HoldsOneReadFromAPath):
        provider = TestProvider()
        with pytest.raises(TypeError) as raised:
            allama.extract(provider, tp, ChatRequest("m").user("x"))
        assert str(raised.value) == (
            f"cannot extract `{tp.__name__}`: the field `ReadFromAPath.first` is read from "
            "`names[0]` (an `AliasPath`), which its JSON Schema cannot show, so no answer "
            "would validate; give it an alias of one name among its choices, or set "
            "`validate_by_name=True`"
        )
        assert provider.requests == []
    # A choice of one name is what the schema shows; validating by name reads `first`.
    assert allama.extract(TestProvider(), AChoiceOfOneName, ChatRequest("m").user("x")).value
    assert allama.extract(TestProvider(), ReadByNameToo, ChatRequest("m").user("x")).value


class Priced(BaseModel):
    price: Decimal = Field(gt=0, max_digits=10, decimal_places=2)
    rate: Decimal | None = Field(default=None, ge=0, le=1)


def test_the_test_provider_answers_a_money_field_with_a_value_the_type_takes() -> None:
    value = allama.extract(TestProvider(), Priced, ChatRequest("m").user("x")).value
    assert value.price > 0 and value.price.as_tuple().exponent >= -2


class NoteMaybe(TypedDict):
    a: int
    note: NotRequired[str | None]


def test_an_optional_property_whose_null_is_a_value_is_approximate_under_openai_strict() -> None:
    # Sent required (strict mode requires every property) and nullable already, its `null`
    # is kept: `{"a": 1}`, without it, is a value the model cannot write.
    notes = [note.message for note in openai_strict(type_schema(NoteMaybe).schema).notes]
    assert notes == [
        "the optional property at `/properties/note` admits `null` and has no default: it is "
        "sent required, so an object without it cannot be produced"
    ]
    # With a default, leaving it out is the default's value, which `null` stands in for.
    assert openai_strict(type_schema(Priced).schema).notes == tuple(
        note
        for note in openai_strict(type_schema(Priced).schema).notes
        if "decimal" in note.message
    )


# ----- types whose checks their schema cannot say: marked, approximate everywhere

DATE = (
    "^(000[1-9]|00[1-9][0-9]|0[1-9][0-9]{2}|[1-9][0-9]{3})"
    "-(0[1-9]|1[0-2])-(0[1-9]|[12][0-9]|3[01])$"
)
CLOCK = "([01][0-9]|2[0-3]):[0-5][0-9]:[0-5][0-9](\\.[0-9]{1,6})?"
OFFSET = "(Z|[+-]([01][0-9]|2[0-3]):[0-5][0-9])"
SECONDS = "[0-9]+(\\.[0-9]{1,6})?S"
TIME_PART = f"T([0-9]+H([0-9]+M)?({SECONDS})?|[0-9]+M({SECONDS})?|{SECONDS})"
DURATION = f"^[+-]?P(([0-9]+Y([0-9]+D)?|[0-9]+D)({TIME_PART})?|{TIME_PART})$"
REAL = "([0-9]+(\\.[0-9]*)?|\\.[0-9]+)([eE][+-]?[0-9]+)?"
COMPLEX = f"^[+-]?({REAL}([+-]({REAL})?[jJ])?|({REAL})?[jJ])$"
DIALECT = {
    "openai": "OpenAI strict mode",
    "anthropic": "Anthropic strict mode",
    "gemini": "Gemini responseJsonSchema",
}


class Signal(BaseModel):
    c: complex


@pytest.mark.parametrize("text", ["3", "1.5-2j", "-j", ".5e3+1.J", "1e999", "2J", "+0.j"])
def test_what_a_complex_numbers_pattern_lets_through_the_type_reads(text: str) -> None:
    assert re.fullmatch(COMPLEX, text)
    assert Signal.model_validate_json(json.dumps({"c": text}), strict=True).c == complex(text)


@pytest.mark.parametrize("text", ["about three", "", "j1", "1+2", "1+2i", "++1", "1 + 2j"])
def test_a_complex_numbers_pattern_refuses_what_is_no_number(text: str) -> None:
    assert re.fullmatch(COMPLEX, text) is None


@pytest.mark.parametrize("name", list(DIALECT))
def test_a_complex_number_is_its_pattern_marked_and_approximate_everywhere(name: str) -> None:
    # Pydantic sent `{"type": "string"}` and every dialect said exact, yet "about three"
    # failed the type. The mark (`format: complex`) stays: a dialect may drop the pattern.
    assert type_schema(Signal).schema["properties"]["c"] == {
        "title": "C",
        "type": "string",
        "pattern": COMPLEX,
        "format": "complex",
    }
    extracted, sent = extract_through(name, Signal, '{"c": "1.5-2j"}')
    assert extracted.value == Signal(c=complex(1.5, -2))
    kept = {} if name == "gemini" else {"pattern": COMPLEX}
    assert sent["properties"]["c"] == {"title": "C", "type": "string", **kept}
    notes = [f"`format` was removed at `Signal.c`: {DIALECT[name]} does not enforce `complex`"]
    if name == "gemini":
        notes.append("`pattern` was removed at `Signal.c`")
    assert extracted.metadata.enforcement is SchemaEnforcement.APPROXIMATE
    assert [w.message for w in extracted.metadata.degradations] == [
        f"the schema of `Signal` was approximated: {note}" for note in notes
    ]


class Invoice2(BaseModel):
    issued: PastDate
    due: Annotated[dt.date, Field(ge=dt.date(2020, 1, 1))]
    grace: condate(lt=dt.date(2030, 1, 1))  # type: ignore[valid-type]
    wait: Annotated[dt.timedelta, Field(gt=dt.timedelta(0))]
    opens: Annotated[dt.time, Field(lt=dt.time(9))]
    sent: Annotated[dt.datetime, Field(gt=dt.datetime(2020, 1, 1, tzinfo=dt.UTC))]
    expires: FutureDatetime
    stamped: AwareDatetime
    day: dt.date


INVOICE_REPLY = json.dumps(
    {
        "issued": "2001-02-03",
        "due": "2024-05-06",
        "grace": "2029-12-31",
        "wait": "P1DT2H",
        "opens": "08:30:00",
        "sent": "2024-01-01T00:00:00Z",
        "expires": "2999-01-01T00:00:00+01:00",
        "stamped": "2024-01-01T00:00:00Z",
        "day": "2024-01-01",
    }
)
MARKED_MOMENTS = {
    "issued": ("past-date", DATE),
    "due": ("bounded-date", DATE),
    "grace": ("bounded-date", DATE),
    "wait": ("bounded-duration", DURATION),
    "opens": ("bounded-time", f"^{CLOCK}{OFFSET}?$"),
    "sent": ("bounded-date-time", f"{DATE[:-1]}T{CLOCK}{OFFSET}?$"),
    "expires": ("future-date-time", f"{DATE[:-1]}T{CLOCK}{OFFSET}?$"),
}


def test_a_bound_pydantic_leaves_out_of_a_dates_schema_is_marked() -> None:
    # Pydantic writes `format: date` (or `date-time`, `time`, `duration`) and drops the
    # bound, past or future: the schema said no more than any date's.
    props = type_schema(Invoice2).schema["properties"]
    for field, (mark, pattern) in MARKED_MOMENTS.items():
        assert props[field] == {
            "title": field.title(),
            "type": "string",
            "pattern": pattern,
            "format": mark,
        }, field
    # RFC 3339's `date-time` requires the offset an `AwareDatetime` requires: not marked.
    assert props["stamped"] == {"title": "Stamped", "type": "string", "format": "date-time"}
    assert props["day"] == {"title": "Day", "type": "string", "format": "date"}


@pytest.mark.parametrize("name", list(DIALECT))
def test_a_bounded_date_is_approximate_with_a_note_naming_the_check(name: str) -> None:
    extracted, sent = extract_through(name, Invoice2, INVOICE_REPLY)
    assert extracted.value == Invoice2.model_validate_json(INVOICE_REPLY)
    props = sent["properties"]
    for field, (_, pattern) in MARKED_MOMENTS.items():
        kept = {} if name == "gemini" else {"pattern": pattern}
        assert props[field] == {"title": field.title(), "type": "string", **kept}, field
    assert props["stamped"]["format"] == "date-time"
    assert props["day"]["format"] == "date"
    notes: list[str] = []
    for field, (mark, _) in MARKED_MOMENTS.items():
        place = f"Invoice2.{field}"
        notes.append(
            f"`format` was removed at `{place}`: {DIALECT[name]} does not enforce `{mark}`"
        )
        if name == "gemini":
            notes.append(f"`pattern` was removed at `{place}`")
    assert extracted.metadata.enforcement is SchemaEnforcement.APPROXIMATE
    assert [w.message for w in extracted.metadata.degradations] == [
        f"the schema of `Invoice2` was approximated: {note}" for note in notes
    ]


class Stamped(BaseModel):
    stamped: AwareDatetime
    day: dt.date
    wait: dt.timedelta


def test_an_aware_datetime_and_unbounded_dates_stay_exact() -> None:
    reply = '{"stamped": "2024-01-01T00:00:00+02:00", "day": "2024-01-01", "wait": "PT1S"}'
    extracted, sent = extract_through("openai", Stamped, reply)
    assert extracted.metadata.enforcement is SchemaEnforcement.EXACT
    assert extracted.metadata.degradations == []
    assert sent["properties"] == {
        "stamped": {"title": "Stamped", "type": "string", "format": "date-time"},
        "day": {"title": "Day", "type": "string", "format": "date"},
        "wait": {"title": "Wait", "type": "string", "format": "duration"},
    }


@pytest.mark.parametrize(
    ("core", "mark", "pattern"),
    [
        (
            {"type": "datetime", "tz_constraint": 3600},
            "constrained-date-time",
            f"{DATE[:-1]}T{CLOCK}{OFFSET}$",
        ),
        ({"type": "time", "tz_constraint": "naive"}, "constrained-time", f"^{CLOCK}$"),
        (
            {"type": "time", "tz_constraint": "aware", "ge": dt.time(1)},
            "bounded-time",
            f"^{CLOCK}{OFFSET}$",
        ),
        (
            {"type": "timedelta", "microseconds_precision": "error"},
            "constrained-duration",
            DURATION,
        ),
        ({"type": "date", "now_op": "future", "now_utc_offset": 0}, "future-date", DATE),
    ],
)
def test_other_checks_pydantic_leaves_out_of_a_dates_schema_are_marked(
    core: dict[str, Any], mark: str, pattern: str
) -> None:
    # A fixed offset, a naive time, fractions past six digits refused: `format` says none.
    class Custom:
        @classmethod
        def __get_pydantic_core_schema__(cls, source: Any, handler: Any) -> Any:
            return core

    schema = type_schema(Custom).schema
    assert schema == {"type": "string", "pattern": pattern, "format": mark}
    held = {"type": "object", "properties": {"at": schema}, "required": ["at"]}
    assert [note.message for note in openai_strict(held).notes] == [
        f"`format` was removed at `/properties/at`: OpenAI strict mode does not enforce `{mark}`"
    ]


def test_a_map_keyed_by_a_marked_type_says_its_keys_in_property_names() -> None:
    # Pydantic would make the pattern a `patternProperties`, which dialects drop, values too.
    assert type_schema(dict[PastDate, int]).schema == {
        "type": "object",
        "additionalProperties": {"type": "integer"},
        "propertyNames": {"pattern": DATE, "format": "past-date"},
    }
    assert type_schema(dict[complex, str]).schema == {
        "type": "object",
        "additionalProperties": {"type": "string"},
        "propertyNames": {"pattern": COMPLEX, "format": "complex"},
    }


class Schedule(BaseModel):
    c: complex
    issued: PastDate
    until: Annotated[dt.date, Field(le=dt.date(2030, 1, 1))]
    wait: Annotated[dt.timedelta, Field(gt=dt.timedelta(0))]
    opens: Annotated[dt.time, Field(lt=dt.time(9))]
    sent: PastDatetime


def test_the_test_provider_answers_marked_types_with_values_they_take() -> None:
    extracted = allama.extract(TestProvider(), Schedule, ChatRequest("m").user("x"))
    assert extracted.value == Schedule(
        c=0j,
        issued=dt.date(2000, 1, 1),
        until=dt.date(2000, 1, 1),
        wait=dt.timedelta(days=1),
        opens=dt.time(0, 0, tzinfo=dt.UTC),
        sent=dt.datetime(2000, 1, 1, tzinfo=dt.UTC),
    )


# ----- dataclass fields not in `__init__`


@dataclasses.dataclass
class Order:
    qty: int
    total: int = dataclasses.field(init=False, default=0)


@pydantic.dataclasses.dataclass
class PydanticOrder:
    qty: int
    total: int = dataclasses.field(init=False, default=0)


@pytest.mark.parametrize("tp", [Order, PydanticOrder])
@pytest.mark.parametrize("name", list(DIALECT))
def test_a_dataclass_field_not_in_init_is_no_property_to_write(tp: Any, name: str) -> None:
    # It was sent required (under strict mode) and what the model wrote there was dropped.
    extracted, sent = extract_through(name, tp, '{"qty": 2}')
    assert extracted.value == tp(qty=2)
    assert extracted.value.total == 0
    assert sent["properties"] == {"qty": {"title": "Qty", "type": "integer"}}
    assert sent["required"] == ["qty"]
    assert extracted.metadata.enforcement is SchemaEnforcement.EXACT
    assert extracted.metadata.degradations == []
    mocked = allama.extract(TestProvider(), tp, ChatRequest("m").user("x"))
    assert mocked.value == tp(qty=0)


class VatRate(enum.Enum):
    STANDARD = Decimal("0.20")
    REDUCED = Decimal("0.05")


class Day(enum.Enum):
    EPOCH = dt.date(1970, 1, 1)


class Corner(enum.Enum):
    TOP_LEFT = (0, 0)
    BOTTOM_RIGHT = (1, 1)


class Line(BaseModel):
    item: str
    vat: VatRate


class Rate(enum.Enum):
    NONE = 0
    STANDARD = Decimal("0.20")


ENUM_ADVICE = (
    "; give its members `str`, `int`, `float` or `bool` values, or read the JSON value in "
    "its `_missing_` or in a validator of the field (`mode='before'`)"
)


@pytest.mark.parametrize(
    ("tp", "message"),
    [
        (
            Line,
            "cannot extract `Line`: the enum `VatRate` is listed by the JSON of its values "
            "(`VatRate.STANDARD = Decimal('0.20')` as `\"0.20\"`, `VatRate.REDUCED = "
            "Decimal('0.05')` as `\"0.05\"`), which validation compares with the Decimal "
            "values themselves and refuses, so no value of it would validate",
        ),
        (
            list[Day],
            "cannot extract `list[Day]`: the enum `Day` is listed by the JSON of its values "
            '(`Day.EPOCH = datetime.date(1970, 1, 1)` as `"1970-01-01"`), which validation '
            "compares with the date values themselves and refuses, so no value of it would "
            "validate",
        ),
        (
            Corner | None,
            "cannot extract `Corner | None`: the enum `Corner` is listed by the JSON of its "
            "values (`Corner.TOP_LEFT = (0, 0)` as `[0, 0]`, `Corner.BOTTOM_RIGHT = (1, 1)` "
            "as `[1, 1]`), which validation compares with the tuple values themselves and "
            "refuses, so no value of it would validate",
        ),
    ],
)
def test_an_enum_whose_listed_values_validation_refuses_is_refused_before_sending(
    tp: Any, message: str
) -> None:
    # Pydantic lists `"0.20"` for `Decimal("0.20")`, then compares the JSON value with the
    # Decimal: every answer the schema allows would fail, every retry paid for.
    with pytest.raises(ValueError):
        TypeAdapter(VatRate).validate_json('"0.20"')
    provider = TestProvider()
    with pytest.raises(TypeError) as raised:
        allama.Extractor(retries=2).extract(provider, tp, ChatRequest("m").user("x"))
    assert str(raised.value) == message + ENUM_ADVICE
    assert provider.requests == []


class Cent(enum.Enum):
    HALF = Decimal("1.5")
    QUARTER = Decimal("0.25")


class Coin(BaseModel):
    coin: Cent


def test_a_decimal_enum_a_json_number_equals_is_listed_as_that_number() -> None:
    """Pydantic lists `Decimal("1.5")` as `"1.5"`, which its validation refuses, and reads
    the number `1.5` as the member: the number is sent (`0.20` would be refused: no float
    equals it)."""
    assert TypeAdapter(Cent).validate_json("1.5") is Cent.HALF
    extracted, sent = extract_through("openai", Coin, '{"coin": 0.25}')
    assert sent["$defs"]["Cent"] == {"enum": [1.5, 0.25], "title": "Cent", "type": "number"}
    assert extracted.value == Coin(coin=Cent.QUARTER)
    assert extracted.metadata.enforcement is SchemaEnforcement.EXACT


class ReadByTheField(BaseModel):
    rate: Annotated[VatRate, BeforeValidator(lambda v: Decimal(v) if isinstance(v, str) else v)]


def test_an_enum_a_validator_of_the_field_reads_is_not_refused() -> None:
    """The field's own validator reads `"0.20"` as the member, which the enum alone does
    not: its answers validate, and it is sent as pydantic lists it."""
    extracted, sent = extract_through("openai", ReadByTheField, '{"rate": "0.20"}')
    assert extracted.value == ReadByTheField(rate=VatRate.STANDARD)
    assert sent["$defs"]["VatRate"]["enum"] == ["0.20", "0.05"]


def _read_a_day(value: Any) -> Any:
    return dt.date.fromisoformat(value) if isinstance(value, str) else value


class ReadByBothFields(BaseModel):
    # `Day` used twice is a shared definition, written once at the top, apart from the
    # validators that read its JSON: each place it is read, a validator reads it.
    start: Annotated[Day, BeforeValidator(_read_a_day)]
    end: Annotated[Day, BeforeValidator(_read_a_day)]


class ReadByOneOfTwo(BaseModel):
    start: Annotated[Day, BeforeValidator(_read_a_day)]
    end: Day


class ReadByNeither(BaseModel):
    start: Day
    end: Day


def test_a_shared_enum_every_field_of_which_reads_its_json_is_not_refused() -> None:
    provider = MockProvider(['{"start": "1970-01-01", "end": "1970-01-01"}'])
    extracted = allama.extract(provider, ReadByBothFields, ChatRequest("m").user("x"))
    assert extracted.value == ReadByBothFields(start=Day.EPOCH, end=Day.EPOCH)
    assert type_schema(ReadByBothFields).schema["$defs"]["Day"] == {
        "enum": ["1970-01-01"],
        "title": "Day",
        "type": "string",
    }


@pytest.mark.parametrize("tp", [ReadByOneOfTwo, ReadByNeither])
def test_a_shared_enum_a_field_reads_without_a_validator_is_still_refused(tp: Any) -> None:
    provider = TestProvider()
    with pytest.raises(TypeError) as raised:
        allama.extract(provider, tp, ChatRequest("m").user("x"))
    assert str(raised.value) == (
        f"cannot extract `{tp.__name__}`: the enum `Day` is listed by the JSON of its values "
        '(`Day.EPOCH = datetime.date(1970, 1, 1)` as `"1970-01-01"`), which validation '
        "compares with the date values themselves and refuses, so no value of it would "
        "validate" + ENUM_ADVICE
    )
    assert provider.requests == []


class DayOrText(BaseModel):
    day: Day | str


class CornerOrList(BaseModel):
    corner: Corner | list[int]


@pytest.mark.parametrize(
    ("tp", "reply", "value"),
    [
        (DayOrText, '{"day": "1970-01-01"}', DayOrText(day="1970-01-01")),
        (CornerOrList, '{"corner": [0, 0]}', CornerOrList(corner=[0, 0])),
    ],
)
def test_an_enum_another_choice_of_its_union_reads_is_not_refused(
    tp: Any, reply: str, value: Any
) -> None:
    """No answer validates as `Day` alone, but the union reads `"1970-01-01"` by its other
    choice, as pydantic does: the answer validates."""
    assert TypeAdapter(tp).validate_json(reply) == value
    extracted = allama.extract(MockProvider([reply]), tp, ChatRequest("m").user("x"))
    assert extracted.value == value


class DayOrTextAndDay(BaseModel):
    either: Day | str
    day: Day


def test_an_enum_a_union_reads_is_still_refused_where_a_field_reads_it_alone() -> None:
    """Each place the enum is read is judged by its own union: `day` reads `Day` alone."""
    provider = TestProvider()
    with pytest.raises(TypeError) as raised:
        allama.extract(provider, DayOrTextAndDay, ChatRequest("m").user("x"))
    assert str(raised.value) == (
        "cannot extract `DayOrTextAndDay`: the enum `Day` is listed by the JSON of its values "
        '(`Day.EPOCH = datetime.date(1970, 1, 1)` as `"1970-01-01"`), which validation '
        "compares with the date values themselves and refuses, so no value of it would "
        "validate" + ENUM_ADVICE
    )
    assert provider.requests == []


class Kind(enum.Enum):
    CAT = "cat"
    DOG = "dog"


class TextKind(str, enum.Enum):  # noqa: UP042 (the mixin spelled out, as the advice says)
    CAT = "cat"
    DOG = "dog"


class Access(enum.IntFlag):
    READ = 1


class Mode(enum.Flag):
    R = 1


class Cat(BaseModel):
    kind: Literal[Kind.CAT]
    meow: int


class Dog(BaseModel):
    kind: Literal["dog"]
    bark: int


class Pet(BaseModel):
    pet: Cat | Dog = Field(discriminator="kind")


class CatByDefault(BaseModel):
    kind: Literal[Kind.CAT] = Kind.CAT
    n: int


class Litter(BaseModel):
    kinds: list[Literal[Kind.CAT, Kind.DOG]]


class ByOwner(BaseModel):
    pets: dict[str, Literal[Kind.DOG]]


class Tagged(TypedDict):
    tag: Literal[b"x"]


@dataclasses.dataclass
class Mixed3:
    kind: Literal["bird", Kind.CAT, Mode.R]


class CatOrNothing(BaseModel):
    kind: Literal[Kind.CAT] | None = None


class ReadByItsValidator(BaseModel):
    kind: Annotated[
        Literal[Kind.CAT], BeforeValidator(lambda v: Kind(v) if isinstance(v, str) else v)
    ]


class ReadByNoValidatorOfItsOwn(BaseModel):
    kind: Annotated[Literal[Kind.CAT], AfterValidator(lambda v: v)]


def _literal_refused(where: str, shown: str, holding: str, instead: str) -> str:
    return (
        f"a `Literal` {where} is listed by the JSON of its values ({shown}), which validation "
        f"compares with the values themselves and refuses, so no answer holding {holding} "
        f"would validate; use {instead}, or read the JSON value in a validator of the field "
        "(`mode='before'`)"
    )


CAT_INSTEAD = "a member of an enum with a mixin (`class Kind(str, Enum)`) or the plain value"


@pytest.mark.parametrize(
    ("tp", "message"),
    [
        (
            Pet,
            "cannot extract `Pet`: "
            + _literal_refused(
                "in the field `Cat.kind`",
                '`Kind.CAT` as `"cat"`',
                "it",
                f"{CAT_INSTEAD} (`Literal['cat']`)",
            ),
        ),
        (
            # A default is no way out: OpenAI's strict mode sends the key always.
            CatByDefault,
            "cannot extract `CatByDefault`: "
            + _literal_refused(
                "in the field `CatByDefault.kind`",
                '`Kind.CAT` as `"cat"`',
                "it",
                f"{CAT_INSTEAD} (`Literal['cat']`)",
            ),
        ),
        (
            Litter,
            "cannot extract `Litter`: "
            + _literal_refused(
                "in the field `Litter.kinds`",
                '`Kind.CAT` as `"cat"`, `Kind.DOG` as `"dog"`',
                "one of them",
                f"{CAT_INSTEAD}s (`Literal['cat', 'dog']`)",
            ),
        ),
        (
            ByOwner,
            "cannot extract `ByOwner`: "
            + _literal_refused(
                "in the field `ByOwner.pets`",
                '`Kind.DOG` as `"dog"`',
                "it",
                f"{CAT_INSTEAD} (`Literal['dog']`)",
            ),
        ),
        (
            Tagged,
            "cannot extract `Tagged`: "
            + _literal_refused(
                "in the field `Tagged.tag`",
                "`b'x'` as `\"x\"`",
                "it",
                "the plain value (`Literal['x']`)",
            ),
        ),
        (
            Mixed3,
            "cannot extract `Mixed3`: "
            + _literal_refused(
                "in the field `Mixed3.kind`",
                '`Kind.CAT` as `"cat"`, `Mode.R` as `1`',
                "one of them",
                "a member of an enum with a mixin (`class Kind(str, Enum)`, `class "
                "Mode(IntFlag)`) or the plain values (`Literal['bird', 'cat', 1]`)",
            ),
        ),
        (
            CatOrNothing,
            "cannot extract `CatOrNothing`: "
            + _literal_refused(
                "in the field `CatOrNothing.kind`",
                '`Kind.CAT` as `"cat"`',
                "it",
                f"{CAT_INSTEAD} (`Literal['cat']`)",
            ),
        ),
        (
            ReadByNoValidatorOfItsOwn,
            "cannot extract `ReadByNoValidatorOfItsOwn`: "
            + _literal_refused(
                "in the field `ReadByNoValidatorOfItsOwn.kind`",
                '`Kind.CAT` as `"cat"`',
                "it",
                f"{CAT_INSTEAD} (`Literal['cat']`)",
            ),
        ),
        (
            list[Literal[Kind.DOG]],
            "cannot extract `list[Literal[<Kind.DOG: 'dog'>]]`: "
            + _literal_refused(
                "of the type", '`Kind.DOG` as `"dog"`', "it", f"{CAT_INSTEAD} (`Literal['dog']`)"
            ),
        ),
    ],
)
def test_a_literal_whose_values_validation_refuses_is_refused_before_sending(
    tp: Any, message: str
) -> None:
    """Pydantic lists `Literal[Kind.CAT]` of a plain `Enum` as `"cat"`, then compares the
    JSON value with the member itself: every answer the schema allows would fail, every
    retry paid for (the retry told the model to send what it sent)."""
    with pytest.raises(ValidationError):
        TypeAdapter(CatByDefault).validate_json('{"kind": "cat", "n": 1}')
    provider = TestProvider()
    with pytest.raises(TypeError) as raised:
        allama.Extractor(retries=2).extract(provider, tp, ChatRequest("m").user("x"))
    assert str(raised.value) == message
    assert provider.requests == []


def test_a_literal_whose_values_validation_refuses_is_refused_by_plan_too() -> None:
    target, recorder = recorded("openai")
    with pytest.raises(TypeError) as raised:
        allama.Extractor().plan(target, Pet, ChatRequest("gpt-4o").user("x"))
    assert str(raised.value).startswith(
        "cannot extract `Pet`: a `Literal` in the field `Cat.kind` is listed by the JSON of "
        'its values (`Kind.CAT` as `"cat"`)'
    )
    assert recorder.bodies == []


class ReadLiterals(BaseModel):
    text: Literal[TextKind.CAT]
    rank: Literal[Rank.LOW]
    access: Literal[Access.READ]
    plain: Literal["a", 1, 1.5, True, None]


class TextPet(BaseModel):
    kind: Literal[TextKind.CAT] = TextKind.CAT
    n: int


def test_a_literal_validation_reads_from_its_json_is_sent_as_before() -> None:
    """A member of an enum with a `str` or `int` mixin is read from its JSON value, as a
    plain value is: sent, and its answer read, exactly."""
    reply = '{"text": "cat", "rank": 1, "access": 1, "plain": 1.5}'
    extracted, sent = extract_through("openai", ReadLiterals, reply)
    assert extracted.value == ReadLiterals(
        text=TextKind.CAT, rank=Rank.LOW, access=Access.READ, plain=1.5
    )
    assert sent["properties"]["text"] == {"enum": ["cat"], "title": "Text", "type": "string"}
    assert extracted.metadata.enforcement is SchemaEnforcement.EXACT
    defaulted, _ = extract_through("openai", TextPet, '{"kind": "cat", "n": 1}')
    assert defaulted.value == TextPet(kind=TextKind.CAT, n=1)


def test_a_literal_a_validator_of_the_field_reads_is_not_refused() -> None:
    extracted, sent = extract_through("openai", ReadByItsValidator, '{"kind": "cat"}')
    assert extracted.value == ReadByItsValidator(kind=Kind.CAT)
    assert sent["properties"]["kind"]["enum"] == ["cat"]


class KeyedByLiteral(BaseModel):
    counts: dict[Literal["a", Kind.DOG], int]


def test_a_literal_of_a_maps_keys_is_read_as_keys_are_not_refused_as_a_value() -> None:
    """A key is text: which of a `Literal`'s values it reads is the keys' own reading
    (`_key_names`), which lists `"a"` alone here."""
    extracted, sent = extract_through("openai", KeyedByLiteral, '{"counts": {"a": 2}}')
    assert extracted.value == KeyedByLiteral(counts={"a": 2})
    assert sent["properties"]["counts"]["propertyNames"] == {"enum": ["a"]}


def test_a_decision_among_a_plain_enums_members_in_a_literal_is_unaffected() -> None:
    """`decide` sends its options' labels, which it reads back as the members."""
    target, recorder = recorded("openai", (200, answer("openai", '{"value": "dog"}')))
    decision = allama.decide(target, Literal[Kind.CAT, Kind.DOG], ChatRequest("gpt-4o").user("x"))
    assert decision.value is Kind.DOG
    assert len(recorder.bodies) == 1


class Setting(enum.Enum):
    AUTO = "auto"


class Settings(BaseModel):
    mode: Literal[Setting.AUTO] | str


class CatOrKind(BaseModel):
    kind: Literal[Kind.CAT] | Kind


class CatAsText(BaseModel):
    kind: Literal["cat"] | Literal[Kind.CAT]


class CatOrTextOrNothing(BaseModel):
    kinds: list[Literal[Kind.CAT] | str | None]


@pytest.mark.parametrize(
    ("tp", "reply", "value"),
    [
        (Settings, '{"mode": "auto"}', Settings(mode="auto")),
        (CatOrKind, '{"kind": "cat"}', CatOrKind(kind=Kind.CAT)),
        (CatAsText, '{"kind": "cat"}', CatAsText(kind="cat")),
        (CatOrTextOrNothing, '{"kinds": ["cat", null]}', CatOrTextOrNothing(kinds=["cat", None])),
    ],
)
def test_a_literal_another_choice_of_its_union_reads_is_not_refused(
    tp: Any, reply: str, value: Any
) -> None:
    """`Literal[Setting.AUTO]` alone reads no answer, but its union reads `"auto"` by
    another choice (as text, as the member): the answer validates, as pydantic reads it."""
    assert TypeAdapter(tp).validate_json(reply) == value
    extracted = allama.extract(MockProvider([reply]), tp, ChatRequest("m").user("x"))
    assert extracted.value == value


class CatOrNumber(BaseModel):
    kind: Literal[Kind.CAT] | int


class TwoOrText(BaseModel):
    kind: Literal[Kind.CAT, Kind.DOG] | Literal["cat"]


CatAlias = TypeAliasType("CatAlias", Literal[Kind.CAT])


class CatAliasTwice(BaseModel):
    either: CatAlias | str
    alone: CatAlias


@pytest.mark.parametrize(
    ("tp", "message"),
    [
        (
            CatOrNumber,
            "cannot extract `CatOrNumber`: "
            + _literal_refused(
                "in the field `CatOrNumber.kind`",
                '`Kind.CAT` as `"cat"`',
                "it",
                f"{CAT_INSTEAD} (`Literal['cat']`)",
            ),
        ),
        (
            # `"cat"` is read by the other choice; `"dog"` by none.
            TwoOrText,
            "cannot extract `TwoOrText`: "
            + _literal_refused(
                "in the field `TwoOrText.kind`",
                '`Kind.DOG` as `"dog"`',
                "it",
                f"{CAT_INSTEAD} (`Literal[Kind.CAT, 'dog']`)",
            ),
        ),
        (
            # One schema, read by a union in `either` and alone in `alone`.
            CatAliasTwice,
            "cannot extract `CatAliasTwice`: "
            + _literal_refused(
                "of the type", '`Kind.CAT` as `"cat"`', "it", f"{CAT_INSTEAD} (`Literal['cat']`)"
            ),
        ),
    ],
)
def test_a_literal_value_no_choice_of_its_union_reads_is_still_refused(
    tp: Any, message: str
) -> None:
    provider = TestProvider()
    with pytest.raises(TypeError) as raised:
        allama.extract(provider, tp, ChatRequest("m").user("x"))
    assert str(raised.value) == message
    assert provider.requests == []


CatOrNumberAlias = TypeAliasType("CatOrNumberAlias", Literal[Kind.CAT] | int)
DayOrNumberAlias = TypeAliasType("DayOrNumberAlias", Day | int)
MaybeCatAlias = TypeAliasType("MaybeCatAlias", Literal[Kind.CAT] | None)


class CatOrNumberOnce(BaseModel):
    kind: CatOrNumberAlias


class DayOrNumberOnce(BaseModel):
    day: DayOrNumberAlias


class MaybeCatOnce(BaseModel):
    kind: MaybeCatAlias


_CAT_REFUSED = _literal_refused(
    "{where}", '`Kind.CAT` as `"cat"`', "it", f"{CAT_INSTEAD} (`Literal['cat']`)"
)
_DAY_REFUSED = (
    "the enum `Day` is listed by the JSON of its values (`Day.EPOCH = datetime.date(1970, 1, "
    '1)` as `"1970-01-01"`), which validation compares with the date values themselves and '
    "refuses, so no value of it would validate" + ENUM_ADVICE
)


@pytest.mark.parametrize(
    ("tp", "message"),
    [
        (
            CatOrNumberOnce,
            "cannot extract `CatOrNumberOnce`: "
            + _CAT_REFUSED.format(where="in the field `CatOrNumberOnce.kind`"),
        ),
        (DayOrNumberOnce, f"cannot extract `DayOrNumberOnce`: {_DAY_REFUSED}"),
        (
            MaybeCatOnce,
            "cannot extract `MaybeCatOnce`: "
            + _CAT_REFUSED.format(where="in the field `MaybeCatOnce.kind`"),
        ),
        (
            CatOrNumberAlias,
            "cannot extract `CatOrNumberAlias`: " + _CAT_REFUSED.format(where="of the type"),
        ),
        (DayOrNumberAlias, f"cannot extract `DayOrNumberAlias`: {_DAY_REFUSED}"),
        (
            MaybeCatAlias,
            "cannot extract `MaybeCatAlias`: " + _CAT_REFUSED.format(where="of the type"),
        ),
    ],
)
def test_a_union_of_an_alias_used_once_is_refused_as_the_union_written_out(
    tp: Any, message: str
) -> None:
    """Pydantic inlines the union of a `TypeAliasType` used once (or at the root), keeping
    its ref, which no definition holds: no choice reads `"cat"` (or `"1970-01-01"`), so it
    is refused before anything is sent, as `Literal[Kind.CAT] | int` is, not taken for read
    with every paid pass failing."""
    provider = TestProvider()
    with pytest.raises(TypeError) as raised:
        allama.extract(provider, tp, ChatRequest("m").user("x"))
    assert str(raised.value) == message
    assert provider.requests == []


CatOrTextAlias = TypeAliasType("CatOrTextAlias", Literal[Kind.CAT] | str)


class CatOrTextOnce(BaseModel):
    kind: CatOrTextAlias


@pytest.mark.parametrize(
    ("tp", "reply", "value"),
    [
        (CatOrTextOnce, '{"kind": "cat"}', CatOrTextOnce(kind="cat")),
        (CatOrTextAlias, '"cat"', "cat"),
    ],
)
def test_a_union_of_an_alias_used_once_that_reads_the_value_is_not_refused(
    tp: Any, reply: str, value: Any
) -> None:
    extracted = allama.extract(MockProvider([reply]), tp, ChatRequest("m").user("x"))
    assert extracted.value == value


SPIED: list[Any] = []
"""What the caller's code below was called with: never while the schema is built."""


def _spy(value: Any) -> Any:
    SPIED.append(value)
    return value


def _spy_around(value: Any, handler: Callable[[Any], Any]) -> Any:
    SPIED.append(value)
    return handler(value)


def _text_tag(value: Any) -> str:
    SPIED.append(value)
    return "text"


class CheckedText(RootModel[str]):
    @model_validator(mode="before")
    @classmethod
    def _before(cls, data: Any) -> Any:
        return _spy(data)

    @model_validator(mode="wrap")
    @classmethod
    def _around(cls, data: Any, handler: Callable[[Any], Any]) -> Any:
        return _spy_around(data, handler)

    @model_validator(mode="after")
    def _after(self) -> CheckedText:
        return _spy(self)

    def model_post_init(self, context: Any, /) -> None:
        _spy("post_init")


@dataclasses.dataclass(frozen=True)
class Point:
    x: int


class Spot(enum.Enum):
    ORIGIN = Point(0)


class CheckedPoint(BaseModel):
    x: int
    label: str = Field(default_factory=lambda: _spy("label"))

    @model_validator(mode="before")
    @classmethod
    def _before(cls, data: Any) -> Any:
        return _spy(data)

    @model_validator(mode="after")
    def _after(self) -> CheckedPoint:
        return _spy(self)

    def model_post_init(self, context: Any, /) -> None:
        _spy("post_init")


class OwnInitPoint(BaseModel):
    x: int

    def __init__(self, **data: Any) -> None:
        _spy("__init__")
        super().__init__(**data)


@pydantic.dataclasses.dataclass
class PostInitPoint:
    x: int

    def __post_init__(self) -> None:
        _spy("__post_init__")


@pytest.mark.parametrize(
    ("tp", "reply", "value"),
    [
        (Literal[Kind.CAT] | Annotated[str, AfterValidator(_spy)], '"cat"', "cat"),
        (Literal[Kind.CAT] | Annotated[str, BeforeValidator(_spy)], '"cat"', "cat"),
        (Literal[Kind.CAT] | Annotated[str, WrapValidator(_spy_around)], '"cat"', "cat"),
        (Literal[Kind.CAT] | Annotated[str, PlainValidator(_spy)], '"cat"', "cat"),
        (Literal[Kind.CAT] | Annotated[str, Predicate(_spy)], '"cat"', "cat"),
        (
            Annotated[
                Annotated[Literal[Kind.CAT], Tag("kind")] | Annotated[str, Tag("text")],
                Discriminator(_text_tag),
            ],
            '"cat"',
            "cat",
        ),
        (Literal[Kind.CAT] | CheckedText, '"cat"', CheckedText("cat")),
        (Spot | CheckedPoint, '{"x": 0}', CheckedPoint(x=0, label="label")),
        (Spot | OwnInitPoint, '{"x": 0}', OwnInitPoint(x=0)),
        (Spot | PostInitPoint, '{"x": 0}', PostInitPoint(x=0)),
    ],
)
def test_the_callers_code_in_another_choice_is_not_run_as_the_schema_is_built(
    tp: Any, reply: str, value: Any
) -> None:
    """Whether another choice reads the value a `Literal` or an enum does not is told
    without running the caller's validators, discriminator, `__init__`, `model_post_init`,
    `__post_init__` or default factory (which may count, write or need a context): what
    they wrap reads it (a plain validator, any value). They run as an answer is read."""
    SPIED.clear()
    type_schema(tp)
    assert SPIED == []
    extracted = allama.extract(MockProvider([reply]), tp, ChatRequest("m").user("x"))
    assert extracted.value == value
    assert SPIED != []


def _in_units(value: Any, info: ValidationInfo) -> Any:
    SPIED.append(value)
    return value * info.context["units"]


def _counted(value: Any) -> Any:
    SPIED.append(value)
    return {"cat": 1, "dog": 2}.get(value, value)


class CatOrCount(BaseModel):
    kind: Literal[Kind.CAT] | Annotated[int, BeforeValidator(_in_units)]


class CatOrCounted(BaseModel):
    kind: Literal[Kind.CAT] | Annotated[int, BeforeValidator(_counted)]


def test_a_choice_whose_validator_before_it_is_not_run_may_read_any_value() -> None:
    """A validator of the caller's before a choice is given any value and may read it as it
    likes (`"cat"` as `1`): what it reads is not known without running it, which needs a
    context the schema is built without, so the union is not refused."""
    SPIED.clear()
    assert type_schema(CatOrCount).schema["properties"]["kind"] == {
        "anyOf": [{"const": "cat", "type": "string"}, {"type": "integer"}],
        "title": "Kind",
    }
    assert SPIED == []
    extracted = allama.extract(
        MockProvider(['{"kind": "cat"}']), CatOrCounted, ChatRequest("m").user("x")
    )
    assert SPIED == ["cat"]
    assert extracted.value == CatOrCounted(kind=1)


class Counted(BaseModel):
    count: int

    @model_validator(mode="before")
    @classmethod
    def _from_number(cls, data: Any) -> Any:
        SPIED.append(data)
        return {"count": data} if isinstance(data, int) else data


class Counts(RootModel[list[Counted]]):
    pass


class CornerOrCounts(BaseModel):
    corner: Corner | Counts


class CornerOrCountedList(BaseModel):
    corner: Corner | list[Counted]


@pytest.mark.parametrize(
    ("tp", "value"),
    [
        (CornerOrCounts, CornerOrCounts(corner=Counts([Counted(count=0), Counted(count=0)]))),
        (CornerOrCountedList, CornerOrCountedList(corner=[Counted(count=0), Counted(count=0)])),
    ],
)
def test_a_model_whose_validator_before_its_fields_reads_an_enums_json_is_not_refused(
    tp: Any, value: Any
) -> None:
    """`Counted`'s validator before its fields reads `0` as `{"count": 0}`: `[0, 0]`, the
    JSON of `Corner.TOP_LEFT`, is read as a list of them, so the union is not refused,
    and the validator is not run as the schema is built."""
    SPIED.clear()
    type_schema(tp)
    assert SPIED == []
    assert TypeAdapter(tp).validate_json('{"corner": [0, 0]}') == value
    extracted = allama.extract(MockProvider(['{"corner": [0, 0]}']), tp, ChatRequest("m").user("x"))
    assert extracted.value == value


class CatOrAddress(BaseModel):
    kind: Literal[Kind.CAT] | ipaddress.IPv4Address


class CatOrImport(BaseModel):
    kind: Literal[Kind.CAT] | ImportString[Any]


class CatOrEncoded(BaseModel):
    kind: Literal[Kind.CAT] | Base64Bytes


@pytest.mark.parametrize("tp", [CatOrAddress, CatOrImport, CatOrEncoded])
def test_a_choice_pydantics_own_validator_refuses_the_value_of_does_not_read_it(
    tp: Any,
) -> None:
    """An address, an import string or base64 is read by pydantic's own validator, which
    refuses `"cat"`, as every answer holding it would be: it is run, and refused."""
    with pytest.raises(ValidationError):
        TypeAdapter(tp).validate_json('{"kind": "cat"}')
    provider = TestProvider()
    with pytest.raises(TypeError) as raised:
        allama.extract(provider, tp, ChatRequest("m").user("x"))
    assert str(raised.value) == f"cannot extract `{tp.__name__}`: " + _CAT_REFUSED.format(
        where=f"in the field `{tp.__name__}.kind`"
    )
    assert provider.requests == []


def test_an_enum_member_no_json_reads_back_is_left_out_of_the_schema() -> None:
    """`Rate.STANDARD` is listed as `"0.20"`, which validation refuses: no answer naming it
    validates, so it is not offered; `Rate.NONE` is, exactly."""
    assert type_schema(Rate).schema == {"enum": [0], "title": "Rate", "type": "integer"}
    extracted, sent = extract_through("openai", Line2, '{"rate": 0}')
    assert sent["$defs"]["Rate"] == {"enum": [0], "title": "Rate", "type": "integer"}
    assert extracted.value == Line2(rate=Rate.NONE)
    assert extracted.metadata.enforcement is SchemaEnforcement.EXACT


class Line2(BaseModel):
    rate: Rate


class ReadsItsText(enum.Enum):
    STANDARD = Decimal("0.20")

    @classmethod
    def _missing_(cls, value: object) -> ReadsItsText | None:
        return cls(Decimal(value)) if isinstance(value, str) else None


class Letter(enum.Enum):
    A = "a"
    ALSO_A = "a"  # noqa: PIE796 (an alias, which pydantic lists twice)


class Mixed(enum.Enum):
    ONE = 1
    HALF = 0.5
    B = "b"
    NOTHING = None
    YES = True


class Permission(enum.Flag):
    R = 1
    W = 2


@pytest.mark.parametrize(
    ("tp", "listed"),
    [
        (ReadsItsText, ["0.20"]),
        (Letter, ["a", "a"]),
        (Mixed, [1, 0.5, "b", None, True]),
        (Rank, [1, 2]),
        (Code, [1, 2]),
        (Switch, [True, False]),
        (enum.StrEnum("Colour", ["RED", "BLUE"]), ["red", "blue"]),
        (Permission, [0, 1, 2, 3]),
    ],
)
def test_enums_whose_listed_values_validate_are_still_extracted(tp: Any, listed: Any) -> None:
    assert type_schema(tp).schema["enum"] == listed
    for value in listed:
        assert isinstance(TypeAdapter(tp).validate_json(json.dumps(value)), tp)
    assert isinstance(allama.extract(TestProvider(), tp, ChatRequest("m").user("x")).value, tp)


class Exampled(BaseModel):
    # Pydantic writes a model's own `json_schema_extra` as it is: a datetime stays one.
    model_config = ConfigDict(
        json_schema_extra={"examples": [{"when": dt.datetime(2024, 1, 1, tzinfo=dt.UTC)}]}
    )
    when: dt.datetime


NOT_JSON = (
    "the response format `exampled` has a schema allama cannot read: the value at "
    "`/examples/0/when` is not JSON"
)


@pytest.mark.parametrize("name", ["openai", "anthropic", "gemini", "ollama"])
def test_a_schema_holding_no_json_is_refused_naming_its_place_not_a_bare_type_error(
    name: str,
) -> None:
    # Refused while the request is encoded, before any connection (the port is discard's).
    provider = allama.provider(name, api_key="k", base_url="http://127.0.0.1:9")
    request = ChatRequest("m").user("x")
    for call in (allama.extract, allama.Extractor().plan):
        with pytest.raises(InvalidRequestError) as raised:
            call(provider, Exampled, request)
        assert str(raised.value) == NOT_JSON
        cause = raised.value.__cause__
        assert isinstance(cause, SchemaError) and cause.pointer == "/examples/0/when"
    # The dialect rewrite says the same of the schema itself.
    with pytest.raises(SchemaError) as unread:
        openai_strict(type_schema(Exampled).schema)
    assert str(unread.value) == "the value at `/examples/0/when` is not JSON"


def test_the_mock_providers_refuse_a_schema_holding_no_json_as_providers_do() -> None:
    request = ChatRequest("m").user("x")
    scripted = MockProvider.with_text('{"when": "2024-01-01T00:00:00Z"}')
    for provider in (scripted, TestProvider()):
        for call in (allama.extract, allama.Extractor().plan):
            with pytest.raises(InvalidRequestError) as raised:
                call(provider, Exampled, request)
            assert str(raised.value) == NOT_JSON
    # Nothing was answered: the script's answer is left.
    assert len(scripted._script) == 1
    # Built without its checks (model_copy checks the values it is given), as a caller's
    # own object could come.
    held = ToolDefinition.model_construct(
        name="when", parameters={"type": "object", "default": dt.date(2024, 1, 1)}
    )
    with pytest.raises(InvalidRequestError) as raised:
        TestProvider().chat(request.model_copy(update={"tools": (held,)}))
    assert str(raised.value) == (
        "tool `when` has a schema allama cannot read: the value at `/default` is not JSON"
    )


def _shown_models(override: Literal["serialization"] | None) -> tuple[type[BaseModel], Any]:
    """A response model (FastAPI's kind: an alias to write out, a computed field) held by
    another, with its configuration's schema mode overridden or not."""

    class Shown(BaseModel):
        model_config = ConfigDict(json_schema_mode_override=override)
        amount: int = Field(serialization_alias="Amount")

        @computed_field  # type: ignore[prop-decorator]
        @property
        def double(self) -> int:
            return self.amount * 2

    class HoldsShown(BaseModel):
        inner: Shown
        many: list[Shown] = []

    return Shown, HoldsShown


def test_a_serialization_mode_override_is_built_as_validation_reads_it() -> None:
    # Pydantic's own schema of the override is what the model writes out.
    shown, holds = _shown_models("serialization")
    assert TypeAdapter(shown).json_schema(mode="validation")["required"] == ["Amount", "double"]
    plain_shown, plain_holds = _shown_models(None)
    assert (
        type_schema(shown).schema
        == type_schema(plain_shown).schema
        == {
            "properties": {"amount": {"title": "Amount", "type": "integer"}},
            "required": ["amount"],
            "title": "Shown",
            "type": "object",
        }
    )
    assert type_schema(holds).schema == type_schema(plain_holds).schema
    assert type_schema(holds).schema["required"] == ["inner"]
    extracted, sent = extract_through("openai", holds, '{"inner": {"amount": 5}, "many": []}')
    assert extracted.metadata.enforcement is SchemaEnforcement.EXACT
    assert extracted.value.inner.amount == 5
    assert sent["$defs"]["Shown"]["required"] == ["amount"]


class SkipsOne(BaseModel):
    a: int
    b: SkipJsonSchema[int]


class HoldsSkipping(BaseModel):
    items: list[SkipsOne]


@pydantic.dataclasses.dataclass
class SkippingDataclass:
    a: int
    b: SkipJsonSchema[int]


@dataclasses.dataclass
class SkippingStdDataclass:
    a: int
    b: SkipJsonSchema[str]


class SkippingTypedDict(TypedDict):
    a: int
    b: SkipJsonSchema[int]


def _fill_skipped(data: Any) -> Any:
    """A validator of the caller's that gives `SkipsOne.b` its value before it is read."""
    return {**data, "b": 0} if isinstance(data, dict) else data


class FilledOnceShownOnce(BaseModel):
    # `SkipsOne` is a shared definition: pydantic writes it once, at the top.
    filled: Annotated[SkipsOne, BeforeValidator(_fill_skipped)]
    shown: SkipsOne


class CheckedAfterTwice(BaseModel):
    # A validator after the model reads what the answer gave it: `b` is still required.
    a: Annotated[SkipsOne, AfterValidator(lambda value: value)]
    b: Annotated[SkipsOne, AfterValidator(lambda value: value)]


class SkippedOnceShownOnce(BaseModel):
    hidden: SkipJsonSchema[SkipsOne] = SkipsOne.model_construct(a=0, b=0)
    shown: SkipsOne


class FieldsNamedAsCoreKeys(BaseModel):
    # Field names that are keys of a core schema too: each is still a field.
    metadata: SkipsOne
    default: int = 0


class SkippingTree(BaseModel):
    b: SkipJsonSchema[int]
    children: list[SkippingTree]


@pytest.mark.parametrize(
    ("tp", "label", "field"),
    [
        (SkipsOne, "SkipsOne", "SkipsOne.b"),
        (HoldsSkipping, "HoldsSkipping", "SkipsOne.b"),
        (FilledOnceShownOnce, "FilledOnceShownOnce", "SkipsOne.b"),
        (CheckedAfterTwice, "CheckedAfterTwice", "SkipsOne.b"),
        (SkippedOnceShownOnce, "SkippedOnceShownOnce", "SkipsOne.b"),
        (FieldsNamedAsCoreKeys, "FieldsNamedAsCoreKeys", "SkipsOne.b"),
        (SkippingTree, "SkippingTree", "SkippingTree.b"),
        (SkippingDataclass, "SkippingDataclass", "SkippingDataclass.b"),
        (SkippingStdDataclass, "SkippingStdDataclass", "SkippingStdDataclass.b"),
        (SkippingTypedDict, "SkippingTypedDict", "SkippingTypedDict.b"),
        (dict[str, SkippingTypedDict], "dict[str, SkippingTypedDict]", "SkippingTypedDict.b"),
    ],
)
def test_a_required_field_left_out_of_the_schema_is_refused_before_anything_is_sent(
    tp: Any, label: str, field: str
) -> None:
    # The schema leaves `b` out, validation requires it: no answer would validate.
    target, recorder = recorded("openai", (200, {}))
    with pytest.raises(TypeError) as raised:
        allama.extract(target, tp, ChatRequest("gpt-4o").user("x"))
    assert str(raised.value) == (
        f"cannot extract `{label}`: the field `{field}` is required but "
        "left out of its JSON Schema (a `SkipJsonSchema`), so no answer would validate; give "
        "it a default, or let the schema show it"
    )
    assert recorder.bodies == []


class SkipsWhatItNeedsNot(BaseModel):
    a: int
    b: SkipJsonSchema[int] = 3
    c: int | SkipJsonSchema[None]


class SkippingTotalFalse(TypedDict):
    a: int
    b: NotRequired[SkipJsonSchema[int]]


class FillsTheSkipped(BaseModel):
    a: int
    b: SkipJsonSchema[int]

    @model_validator(mode="before")
    @classmethod
    def fill(cls, data: Any) -> Any:
        return {**data, "b": data["a"] * 2} if isinstance(data, dict) else data


def test_a_skipped_field_validation_does_without_is_left_out_as_before() -> None:
    # A default, a `None` skipped from a union, a key not required, a validator filling it.
    extracted, sent = extract_through("openai", SkipsWhatItNeedsNot, '{"a": 1, "c": 2}')
    assert extracted.value == SkipsWhatItNeedsNot(a=1, b=3, c=2)
    assert sent["properties"] == {
        "a": {"title": "A", "type": "integer"},
        "c": {"title": "C", "type": "integer"},
    }
    extracted, sent = extract_through("openai", SkippingTotalFalse, '{"a": 1}')
    assert extracted.value == {"a": 1}
    assert list(sent["properties"]) == ["a"]
    extracted, sent = extract_through("openai", FillsTheSkipped, '{"a": 1}')
    assert extracted.value == FillsTheSkipped(a=1, b=2)
    assert list(sent["properties"]) == ["a"]


class FilledTwice(BaseModel):
    # `SkipsOne` used twice is a shared definition, written once at the top, apart from
    # the validators that fill `b` in: each place it is read, a validator fills it.
    a: Annotated[SkipsOne, BeforeValidator(_fill_skipped)]
    b: Annotated[SkipsOne, BeforeValidator(_fill_skipped)]


class FilledAroundTwice(BaseModel):
    a: Annotated[SkipsOne, WrapValidator(lambda data, read: read(_fill_skipped(data)))]
    b: Annotated[SkipsOne, WrapValidator(lambda data, read: read(_fill_skipped(data)))]


class HoldsSkippedModel(BaseModel):
    # Reached only through a skipped field, which its default fills.
    hidden: SkipJsonSchema[SkipsOne] = SkipsOne.model_construct(a=0, b=0)
    a: int


class HoldsSkippedModelTwice(BaseModel):
    first: SkipJsonSchema[SkipsOne] = SkipsOne.model_construct(a=0, b=0)
    second: SkipJsonSchema[SkipsOne | None] = None
    a: int


class InitFillsTheSkipped(BaseModel):
    a: int
    b: SkipJsonSchema[int]

    def __init__(self, **data: Any) -> None:
        super().__init__(**{"b": 7, **data})


class ComputesSkipping(BaseModel):
    # A computed field is written out, never read back: its type's fields are not asked for.
    a: int

    @computed_field  # type: ignore[prop-decorator]
    @property
    def made(self) -> SkipsOne:
        return SkipsOne(a=self.a, b=0)


def test_a_model_whose_skipped_field_no_answer_has_to_hold_is_extracted() -> None:
    # Whether `SkipsOne` is shared (written once at the top) or not, a validator of the
    # caller's fills `b` in, or only a skipped field holds it: every answer validates.
    for tp in (FilledTwice, FilledAroundTwice):
        extracted, sent = extract_through("openai", tp, '{"a": {"a": 1}, "b": {"a": 2}}')
        assert extracted.value == tp(a=SkipsOne(a=1, b=0), b=SkipsOne(a=2, b=0))
        assert sent["$defs"]["SkipsOne"]["properties"] == {"a": {"title": "A", "type": "integer"}}
    many = list[Annotated[SkipsOne, BeforeValidator(_fill_skipped)]]
    extracted, _ = extract_through("openai", many, '{"value": [{"a": 1}, {"a": 2}]}')
    assert extracted.value == [SkipsOne(a=1, b=0), SkipsOne(a=2, b=0)]
    for tp in (HoldsSkippedModel, HoldsSkippedModelTwice):
        extracted, sent = extract_through("openai", tp, '{"a": 3}')
        assert extracted.value == tp(a=3)
        assert list(sent["properties"]) == ["a"]
    extracted, sent = extract_through("openai", InitFillsTheSkipped, '{"a": 1}')
    assert extracted.value == InitFillsTheSkipped(a=1, b=7)
    assert list(sent["properties"]) == ["a"]
    extracted, sent = extract_through("openai", ComputesSkipping, '{"a": 4}')
    assert extracted.value == ComputesSkipping(a=4)
    assert sent["properties"] == {"a": {"title": "A", "type": "integer"}}


class SkippedRoot(RootModel[SkipJsonSchema[int]]):
    pass


@pytest.mark.parametrize(
    ("tp", "label"),
    [
        (SkipJsonSchema[int], "int"),
        (SkippedRoot, "SkippedRoot"),
        (list[SkipJsonSchema[int]], "list[int]"),
    ],
)
def test_a_type_left_out_of_its_own_schema_is_refused_before_anything_is_sent(
    tp: Any, label: str
) -> None:
    # Pydantic raises its `PydanticOmit` (an empty error) out of the schema: nothing to ask.
    target, recorder = recorded("openai", (200, {}))
    with pytest.raises(TypeError) as raised:
        allama.extract(target, tp, ChatRequest("gpt-4o").user("x"))
    assert type(raised.value) is TypeError
    assert str(raised.value) == (
        f"cannot extract `{label}`: the type is left out of its own JSON Schema (a "
        "`SkipJsonSchema` over it or over what it holds), so there is nothing to ask for; "
        "let the schema show it"
    )
    assert recorder.bodies == []
