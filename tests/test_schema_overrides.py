"""A type's own JSON Schema (`WithJsonSchema`, `json_schema_extra`, a
`__get_pydantic_json_schema__`) that no answer validates against is refused before anything
is sent: validation reads an answer strictly, as JSON, so `"yes"` is never a `bool`."""

from __future__ import annotations

from typing import Annotated, Any

import pytest
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    GetJsonSchemaHandler,
    PlainValidator,
    model_validator,
    with_config,
)
from pydantic.dataclasses import dataclass as pydantic_dataclass
from pydantic.json_schema import JsonSchemaValue, WithJsonSchema
from pydantic_core import core_schema
from typing_extensions import TypedDict

from allama import ChatRequest, Extractor
from allama.mock import ChatResponseBuilder, MockProvider
from allama.schema import type_schema

OVERRIDES = "its own `WithJsonSchema`, `json_schema_extra` or `__get_pydantic_json_schema__`"
FIX = (
    "drop the override, or read the value in a validator of the field (a `PlainValidator`, "
    "or one with `mode='before'`)"
)

YesNo = Annotated[bool, WithJsonSchema({"type": "string", "enum": ["yes", "no"]})]


class Answer(BaseModel):
    ok: YesNo


def _provider(*texts: str) -> MockProvider:
    return MockProvider([ChatResponseBuilder().text(text).build() for text in texts])


def _request() -> ChatRequest:
    return ChatRequest("m").user("x")


def test_a_bool_sent_as_yes_or_no_is_refused_before_sending() -> None:
    provider = _provider(*['{"ok": "yes"}'] * 3)
    with pytest.raises(TypeError) as raised:
        Extractor(retries=2).extract(provider, Answer, _request())
    assert str(raised.value) == (
        'cannot extract `Answer`: the field `Answer.ok` declares `"type": "string", "enum": '
        f'["yes", "no"]` in its JSON Schema ({OVERRIDES}), but validation reads `bool` there, '
        f"from none of those values, so no answer would validate; {FIX}"
    )
    assert provider.requests == []


class Count(BaseModel):
    n: int = Field(json_schema_extra={"type": "string"})


def test_an_int_whose_extra_says_string_is_refused() -> None:
    with pytest.raises(TypeError) as raised:
        type_schema(Count)
    assert str(raised.value) == (
        'cannot extract `Count`: the field `Count.n` declares `"type": "string"` in its JSON '
        f"Schema ({OVERRIDES}), but validation reads `int` there, from no JSON value of that "
        f"type, so no answer would validate; {FIX}"
    )


class Cents:
    """An amount read as an integer, whose schema says it is text."""

    @classmethod
    def __get_pydantic_core_schema__(cls, source: Any, handler: Any) -> core_schema.CoreSchema:
        return core_schema.int_schema()

    @classmethod
    def __get_pydantic_json_schema__(
        cls, schema: core_schema.CoreSchema, handler: GetJsonSchemaHandler
    ) -> JsonSchemaValue:
        return {"type": "string", "description": "amount like 12.34"}


class Price(BaseModel):
    amount: Cents


def test_a_class_whose_own_schema_says_string_over_an_int_is_refused() -> None:
    with pytest.raises(TypeError) as raised:
        type_schema(Price)
    assert str(raised.value) == (
        'cannot extract `Price`: the field `Price.amount` declares `"type": "string"` in its '
        f"JSON Schema ({OVERRIDES}), but validation reads `int` there, from no JSON value of "
        f"that type, so no answer would validate; {FIX}"
    )


def _digits(value: Any) -> Any:
    return int(value) if isinstance(value, str) else value


class ReadByCode(BaseModel):
    n: Annotated[int, PlainValidator(_digits), WithJsonSchema({"type": "string"})]


def test_a_validator_reading_the_declared_text_is_not_refused_and_extracts() -> None:
    assert type_schema(ReadByCode).schema["properties"]["n"] == {"type": "string", "title": "N"}
    extracted = Extractor().extract(_provider('{"n": "12"}'), ReadByCode, _request())
    assert extracted.value == ReadByCode(n=12)


class Widened(BaseModel):
    n: Annotated[int, WithJsonSchema({"type": ["integer", "string"]})]


def test_a_schema_that_widens_the_type_is_not_refused() -> None:
    assert type_schema(Widened).schema["properties"]["n"] == {
        "type": ["integer", "string"],
        "title": "N",
    }
    extracted = Extractor().extract(_provider('{"n": 3}'), Widened, _request())
    assert extracted.value == Widened(n=3)


class EitherReads(BaseModel):
    ok: YesNo | str


def test_a_choice_another_choice_of_its_union_reads_is_not_refused() -> None:
    extracted = Extractor().extract(_provider('{"ok": "yes"}'), EitherReads, _request())
    assert extracted.value == EitherReads(ok="yes")


class LeftOut(BaseModel):
    model_config = ConfigDict(json_schema_extra={"required": []})
    a: int


def test_a_required_field_left_out_of_required_is_refused() -> None:
    with pytest.raises(TypeError) as raised:
        type_schema(LeftOut)
    assert str(raised.value) == (
        "cannot extract `LeftOut`: the field `LeftOut.a` is required, but its JSON Schema "
        "leaves it out of `required` (its own `json_schema_extra` or "
        "`__get_pydantic_json_schema__`), so an answer may leave it out, which validation "
        "refuses; give it a default, or keep it in `required`"
    )


class Filled(BaseModel):
    """A model whose own validator fills in what the answer leaves out."""

    model_config = ConfigDict(json_schema_extra={"required": []})
    a: int

    @model_validator(mode="before")
    @classmethod
    def _fill(cls, data: Any) -> Any:
        return {"a": 0, **data} if isinstance(data, dict) else data


def test_a_required_field_a_validator_before_the_model_fills_is_not_refused() -> None:
    extracted = Extractor().extract(_provider("{}"), Filled, _request())
    assert extracted.value == Filled(a=0)


BY_NAME = ConfigDict(
    json_schema_extra={"examples": [{"a": 1}]}, validate_by_name=True, validate_by_alias=False
)
"""Fields read by their names, not their aliases, as Anthropic's refusal of an alias advises,
with an extra of the class's own: its schema lists each field by name."""

LEFT_OUT = (
    "leaves it out of `required` (its own `json_schema_extra` or "
    "`__get_pydantic_json_schema__`), so an answer may leave it out, which validation "
    "refuses; give it a default, or keep it in `required`"
)


class ByName(BaseModel):
    model_config = BY_NAME
    a: int = Field(alias="A")


def test_a_model_read_by_name_with_an_extra_of_its_own_extracts() -> None:
    assert type_schema(ByName).schema["required"] == ["a"]
    extracted = Extractor().extract(_provider('{"a": 1}'), ByName, _request())
    assert extracted.value == ByName(a=1)


class AliasedInner(BaseModel):
    model_config = ConfigDict(json_schema_extra={"description": "d"})
    a: int = Field(alias="A")


class ByNameOuter(BaseModel):
    model_config = ConfigDict(validate_by_name=True, validate_by_alias=False)
    inner: AliasedInner


def test_an_aliased_model_with_an_extra_inside_one_read_by_name_extracts() -> None:
    """The inner model's own config says its field is read by alias, not the outer's."""
    schema = type_schema(ByNameOuter).schema
    assert schema["$defs"]["AliasedInner"]["required"] == ["A"]
    extracted = Extractor().extract(_provider('{"inner": {"A": 2}}'), ByNameOuter, _request())
    assert extracted.value == ByNameOuter(inner=AliasedInner(A=2))


@with_config(BY_NAME)
class ByNameRow(TypedDict):
    a: Annotated[int, Field(alias="A")]


@pydantic_dataclass(config=BY_NAME)
class ByNamePoint:
    a: int = Field(alias="A")


def test_a_typed_dict_and_a_dataclass_read_by_name_with_an_extra_extract() -> None:
    row = Extractor().extract(_provider('{"a": 1}'), ByNameRow, _request())
    assert row.value == {"a": 1}
    point = Extractor().extract(_provider('{"a": 2}'), ByNamePoint, _request())
    assert point.value == ByNamePoint(a=2)


class OwnSchemaByName(BaseModel):
    """A model read by name whose own hook writes its whole schema, listing it by name."""

    model_config = ConfigDict(validate_by_name=True, validate_by_alias=False)
    a: int = Field(alias="A")

    @classmethod
    def __get_pydantic_json_schema__(
        cls, schema: core_schema.CoreSchema, handler: GetJsonSchemaHandler
    ) -> JsonSchemaValue:
        return {"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"]}


def test_a_model_read_by_name_whose_own_schema_requires_its_name_extracts() -> None:
    extracted = Extractor().extract(_provider('{"a": 3}'), OwnSchemaByName, _request())
    assert extracted.value == OwnSchemaByName(a=3)


class OwnSchemaByAlias(BaseModel):
    """A model read by name whose own hook requires the alias, which validation never reads:
    `{"A": 3}` meets the schema and fails."""

    model_config = ConfigDict(validate_by_name=True, validate_by_alias=False)
    a: int = Field(alias="A")

    @classmethod
    def __get_pydantic_json_schema__(
        cls, schema: core_schema.CoreSchema, handler: GetJsonSchemaHandler
    ) -> JsonSchemaValue:
        return {"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["A"]}


def test_a_model_read_by_name_whose_own_schema_requires_its_alias_is_refused() -> None:
    provider = _provider('{"a": 3}')
    with pytest.raises(TypeError) as raised:
        Extractor().extract(provider, OwnSchemaByAlias, _request())
    assert str(raised.value) == (
        "cannot extract `OwnSchemaByAlias`: the field `OwnSchemaByAlias.a` is required, but "
        f"its JSON Schema {LEFT_OUT}"
    )
    assert provider.requests == []


class LeftOutByName(BaseModel):
    model_config = ConfigDict(
        json_schema_extra={"required": []}, validate_by_name=True, validate_by_alias=False
    )
    a: int = Field(alias="A")


class LeftOutByAlias(BaseModel):
    model_config = ConfigDict(json_schema_extra={"required": []})
    a: int = Field(alias="A")


@pytest.mark.parametrize("model", [LeftOutByName, LeftOutByAlias])
def test_an_aliased_field_left_out_of_required_is_still_refused(model: type[BaseModel]) -> None:
    with pytest.raises(TypeError) as raised:
        type_schema(model)
    name = model.__name__
    assert str(raised.value) == (
        f"cannot extract `{name}`: the field `{name}.a` is required, but its JSON Schema {LEFT_OUT}"
    )
