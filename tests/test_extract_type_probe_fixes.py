"""Awkward pydantic types in an extraction: a response model's serialization override is
built for validation, and a value the model quotes where a `Literal` or enum lists numbers
or booleans is said as the string it is, the values as JSON writes them; a flag's refusal
says what its schema lists (the sums of its bits), not its members alone."""

from __future__ import annotations

import enum
from typing import Annotated, Any, Literal

import pytest
from pydantic import BaseModel, ConfigDict, Field, Secret, computed_field
from pydantic.alias_generators import to_camel
from tests._recording import Recorder, provider
from typing_extensions import TypedDict

from allama import ChatRequest, Extractor
from allama.extract import ParseError


def completion(content: str) -> dict[str, Any]:
    return {
        "id": "c1",
        "object": "chat.completion",
        "created": 0,
        "model": "gpt-4o",
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": content},
                "finish_reason": "stop",
            }
        ],
        "usage": {"prompt_tokens": 5, "completion_tokens": 5, "total_tokens": 10},
    }


def _openai(*replies: str) -> tuple[Any, Recorder]:
    return provider("openai", *((200, completion(reply)) for reply in replies))


class Shown(BaseModel):
    """A response model (FastAPI's kind): its schema is what it writes out."""

    model_config = ConfigDict(json_schema_mode_override="serialization")
    amount: int = Field(serialization_alias="Amount")

    @computed_field  # type: ignore[prop-decorator]
    @property
    def double(self) -> int:
        return self.amount * 2


class HoldsShown(BaseModel):
    inner: Shown


def test_a_response_models_schema_asks_for_what_validation_reads() -> None:
    target, recorder = _openai('{"inner": {"amount": 5}}')
    extracted = Extractor(retries=2).extract(target, HoldsShown, ChatRequest("gpt-4o").user("x"))
    assert extracted.value == HoldsShown(inner=Shown(amount=5))
    assert extracted.value.inner.double == 10
    assert len(recorder.bodies) == 1
    assert recorder.bodies[0]["response_format"]["json_schema"]["schema"] == {
        "properties": {"inner": {"$ref": "#/$defs/Shown"}},
        "required": ["inner"],
        "title": "HoldsShown",
        "type": "object",
        "additionalProperties": False,
        "$defs": {
            "Shown": {
                "description": "A response model (FastAPI's kind): its schema is what it "
                "writes out.",
                "properties": {"amount": {"title": "Amount", "type": "integer"}},
                "required": ["amount"],
                "title": "Shown",
                "type": "object",
                "additionalProperties": False,
            }
        },
    }


class Level(enum.IntEnum):
    LOW = 1
    HIGH = 2


class Quoted(BaseModel):
    level: Level = Level.LOW
    count: Literal[1, 2] = 1
    odd: Literal[1.5, True, None] = 1.5
    mixed: Literal["a", 1] = "a"
    word: Literal["low", "high"] = "low"


@pytest.mark.parametrize(
    ("reply", "place", "detail"),
    [
        ('{"level": "1"}', "level", 'unknown variant string "1", expected 1 or 2'),
        ('{"count": "2"}', "count", 'unknown variant string "2", expected 1 or 2'),
        ('{"odd": "true"}', "odd", 'unknown variant string "true", expected 1.5, true or null'),
        ('{"odd": "None"}', "odd", 'unknown variant string "None", expected 1.5, true or null'),
        ('{"mixed": "1"}', "mixed", "unknown variant string \"1\", expected 'a' or 1"),
        ('{"count": 3}', "count", "unknown variant integer `3`, expected 1 or 2"),
        # Strings alone listed: the answer as before, in backticks.
        ('{"word": "medium"}', "word", "unknown variant `medium`, expected 'low' or 'high'"),
    ],
)
def test_a_quoted_number_or_boolean_is_said_as_the_string_it_is(
    reply: str, place: str, detail: str
) -> None:
    target, recorder = _openai(reply)
    with pytest.raises(ParseError) as caught:
        Extractor(retries=1).extract(target, Quoted, ChatRequest("gpt-4o").user("x"))
    assert caught.value.detail == detail
    assert str(caught.value) == (
        f"openai: failed to parse the output in `native` mode: at `{place}`: {detail}"
    )
    assert recorder.bodies[1]["messages"][-1]["content"] == (
        f"The previous reply could not be used: it did not match the schema at `{place}`: "
        f"{detail}. "
        "Reply again with only the JSON value, matching the schema exactly."
    )


class Hidden(BaseModel):
    level: Secret[Literal[1, 2]]


def test_a_secret_quoted_number_is_still_not_quoted() -> None:
    target, _ = _openai('{"level": "SECRET"}')
    with pytest.raises(ParseError) as caught:
        Extractor().extract(target, Hidden, ChatRequest("gpt-4o").user("x"))
    assert caught.value.detail == "unknown variant a secret string, expected 1 or 2"
    assert "SECRET" not in str(caught.value)


class Perm(enum.Flag):
    R = 1
    W = 2
    X = 4


class Lone(enum.Flag):
    ON = 1


class Bits(enum.IntFlag):
    LOW = 1
    HIGH = 2


class Spread(enum.Enum):
    ONE = 1
    TWO = 2
    FOUR = 4


class Flagged(BaseModel):
    perm: Perm = Perm.R
    perms: list[Perm | None] = []
    lone: Lone = Lone.ON
    bits: Bits = Bits.LOW
    spread: Spread = Spread.ONE


@pytest.mark.parametrize(
    ("reply", "place", "detail"),
    [
        # The schema lists 0 to 7: pydantic's words (`1, 2 or 4`) steered the model from 3.
        (
            '{"perm": 8}',
            "perm",
            "unknown variant integer `8`, expected a sum of any of 1, 2 and 4, or 0",
        ),
        (
            '{"perms": [3, "3"]}',
            "perms[1]",
            'unknown variant string "3", expected a sum of any of 1, 2 and 4, or 0',
        ),
        ('{"lone": 2}', "lone", "unknown variant integer `2`, expected 0 or 1"),
        (
            '{"bits": "1"}',
            "bits",
            'unknown variant string "1", expected an integer from 0 to 9223372036854775807',
        ),
        # Another enum of the same values: its members are all it reads, said as before.
        ('{"spread": 3}', "spread", "unknown variant integer `3`, expected 1, 2 or 4"),
    ],
)
def test_a_flag_refused_is_said_to_expect_what_its_schema_lists(
    reply: str, place: str, detail: str
) -> None:
    target, recorder = _openai(reply)
    with pytest.raises(ParseError) as caught:
        Extractor(retries=1).extract(target, Flagged, ChatRequest("gpt-4o").user("x"))
    assert caught.value.detail == detail
    assert recorder.bodies[1]["messages"][-1]["content"] == (
        f"The previous reply could not be used: it did not match the schema at `{place}`: "
        f"{detail}. "
        "Reply again with only the JSON value, matching the schema exactly."
    )
    schema = recorder.bodies[0]["response_format"]["json_schema"]["schema"]
    assert schema["$defs"]["Perm"]["enum"] == [0, 1, 2, 3, 4, 5, 6, 7]


class ByName(BaseModel):
    """Its errors' places name fields as Python does; its schema shows their aliases."""

    model_config = ConfigDict(alias_generator=to_camel, loc_by_alias=False)
    unit_price: int
    sku_code: str = ""


class Line(BaseModel):
    model_config = ConfigDict(alias_generator=to_camel)
    unit_price: int


class Row(TypedDict):
    row_id: Annotated[int, Field(alias="rowId")]


class Order(BaseModel):
    model_config = ConfigDict(alias_generator=to_camel, loc_by_alias=False)
    line_items: list[ByName] = []
    lines: list[Line] = []
    first_line: Line | None = None
    rows: dict[str, Row] = {}


class Either(BaseModel):
    model_config = ConfigDict(loc_by_alias=False)
    pick: ByName | Line = Field(alias="thePick")


class ReadsNames(BaseModel):
    model_config = ConfigDict(alias_generator=to_camel, loc_by_alias=False, validate_by_name=True)
    unit_price: int


class PriceOnly(BaseModel):
    model_config = ConfigDict(loc_by_alias=False)
    unit_price: int = Field(alias="unitPrice")


@pytest.mark.parametrize(
    ("tp", "reply", "place", "detail"),
    [
        (ByName, '{"skuCode": "a"}', None, "missing field `unitPrice`"),
        (
            PriceOnly,
            '{"unitPrice": "x"}',
            "unitPrice",
            'invalid type: string "x", expected an integer',
        ),
        (
            Order,
            '{"lineItems": [{"unitPrice": "x"}]}',
            "lineItems[0].unitPrice",
            'invalid type: string "x", expected an integer',
        ),
        (Order, '{"lineItems": [{}]}', "lineItems[0]", "missing field `unitPrice`"),
        # A model inside that names places by alias, as pydantic's default does.
        (
            Order,
            '{"firstLine": {"unitPrice": "x"}}',
            "firstLine.unitPrice",
            'invalid type: string "x", expected an integer',
        ),
        (
            Order,
            '{"rows": {"a": {"rowId": "x"}}}',
            "rows.a.rowId",
            'invalid type: string "x", expected an integer',
        ),
        (
            Either,
            '{"thePick": {"unitPrice": "x"}}',
            "thePick.unitPrice",
            'invalid type: string "x", expected an integer',
        ),
        # Written by name, which the configuration reads: named as written.
        (
            ReadsNames,
            '{"unit_price": "x"}',
            "unit_price",
            'invalid type: string "x", expected an integer',
        ),
    ],
)
def test_a_place_names_a_field_as_the_schema_sent_shows_it(
    tp: Any, reply: str, place: str | None, detail: str
) -> None:
    # With `loc_by_alias=False`, pydantic names `unit_price` where the schema sent shows
    # `unitPrice`: a model that obeyed a retry naming `unit_price` would fail again.
    target, recorder = _openai(reply, reply)
    with pytest.raises(ParseError) as caught:
        Extractor(retries=1).extract(target, tp, ChatRequest("gpt-4o").user("x"))
    assert (caught.value.path, caught.value.detail) == (place, detail)
    where = f" at `{place}`" if place is not None else ""
    assert recorder.bodies[1]["messages"][-1]["content"] == (
        f"The previous reply could not be used: it did not match the schema{where}: "
        f"{detail}. "
        "Reply again with only the JSON value, matching the schema exactly."
    )


class Private(BaseModel):
    """The caller asked pydantic to keep the input out of this model's errors."""

    model_config = ConfigDict(hide_input_in_errors=True)
    ssn: int = 0
    name: str = Field("", max_length=3)
    kind: Literal["a", "b"] = "a"
    ratio: float = 0


class HoldsPrivate(BaseModel):
    private: Private


@pytest.mark.parametrize(
    ("tp", "reply", "place", "detail"),
    [
        (Private, '{"ssn": "123-45-6789"}', "ssn", "invalid type: a string, expected an integer"),
        (Private, '{"ssn": true}', "ssn", "invalid type: a boolean, expected an integer"),
        (
            Private,
            '{"name": "123-45-6789"}',
            "name",
            "invalid value: a string, expected at most 3 characters",
        ),
        (
            Private,
            '{"kind": "123-45-6789"}',
            "kind",
            "unknown variant a string, expected 'a' or 'b'",
        ),
        (
            Private,
            '{"ssn": 1234567e400}',
            "ssn",
            "invalid type: a floating point number, expected an integer",
        ),
        (
            Private,
            '{"ratio": 1234567e400}',
            "ratio",
            "a number is too large for a floating point value",
        ),
        # Inside a model that does not ask: still kept out (pydantic keeps it out only where
        # the outermost type asks).
        (
            HoldsPrivate,
            '{"private": {"ssn": "123-45-6789"}}',
            "private.ssn",
            "invalid type: a string, expected an integer",
        ),
    ],
)
def test_a_type_that_hides_its_input_from_errors_is_not_quoted(
    tp: Any, reply: str, place: str, detail: str
) -> None:
    target, recorder = _openai(reply, reply)
    with pytest.raises(ParseError) as caught:
        Extractor(retries=1).extract(target, tp, ChatRequest("gpt-4o").user("x"))
    assert (caught.value.path, caught.value.detail) == (place, detail)
    assert str(caught.value) == (
        f"openai: failed to parse the output in `native` mode: at `{place}`: {detail}"
    )
    assert "123-45-6789" not in str(caught.value) and "1234567" not in str(caught.value)
    assert recorder.bodies[1]["messages"][-1]["content"] == (
        f"The previous reply could not be used: it did not match the schema at `{place}`: "
        f"{detail}. "
        "Reply again with only the JSON value, matching the schema exactly."
    )
    assert caught.value.raw == reply  # the caller's own copy of the output is whole
