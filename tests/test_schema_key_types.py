"""What a schema says of a map's keys and of a compiled pattern, and so what each provider is
reported to enforce: a map keyed by `Optional[...]`, by a validated type or by a type no key
is read as, and a pattern compiled with flags (`re.VERBOSE`, `re.IGNORECASE`), which
pydantic validates with Python's `re` but leaves out of its schema."""

from __future__ import annotations

import dataclasses
import enum
import json
import re
from typing import Annotated, Any

import httpx2
import pytest
from pydantic import AfterValidator, BaseModel, BeforeValidator, ConfigDict, Field, TypeAdapter

import allama
from allama import ChatRequest, ExtractionMetadata, Extractor, SchemaEnforcement
from allama.mock import TestProvider
from allama.transport import Transport

PLANNED = {
    "openai": "gpt-4o",
    "anthropic": "claude-sonnet-4-5",
    "gemini": "gemini-2.5-flash",
    "llama-cpp": "m",
}
INT_KEYS = {"pattern": "^[+-]?[0-9]+$"}


class Colour(enum.Enum):
    RED = "red"
    GREEN = "green"


def _over(name: str, reply: str, sent: list[dict[str, Any]]) -> Any:
    """`name`'s preset answering `reply` as its model's text, the bodies sent kept."""

    def answer(request: httpx2.Request) -> httpx2.Response:
        sent.append(json.loads(request.content))
        if name == "gemini":
            return httpx2.Response(
                200,
                json={
                    "candidates": [
                        {
                            "content": {"role": "model", "parts": [{"text": reply}]},
                            "finishReason": "STOP",
                        }
                    ],
                    "usageMetadata": {
                        "promptTokenCount": 5,
                        "candidatesTokenCount": 5,
                        "totalTokenCount": 10,
                    },
                    "modelVersion": PLANNED[name],
                },
            )
        return httpx2.Response(
            200,
            json={
                "id": "c1",
                "object": "chat.completion",
                "created": 0,
                "model": PLANNED[name],
                "choices": [
                    {
                        "index": 0,
                        "message": {"role": "assistant", "content": reply},
                        "finish_reason": "stop",
                    }
                ],
                "usage": {"prompt_tokens": 5, "completion_tokens": 5, "total_tokens": 10},
            },
        )

    transport = Transport(client=httpx2.Client(transport=httpx2.MockTransport(answer)))
    return allama.provider(name, api_key="k", base_url="http://test", transport=transport)


def _plan(name: str, tp: Any) -> Any:
    target = allama.provider(name, api_key="k", base_url="http://127.0.0.1:9")
    return Extractor().plan(target, tp, ChatRequest(PLANNED[name]).user("x"))


# ----- map keys


class NullableColours(BaseModel):
    stock: dict[Colour | None, int]


class NullableYears(BaseModel):
    by_year: dict[int | None, str]


class CheckedIds(BaseModel):
    by_id: dict[Annotated[int, AfterValidator(abs)], str]


def _split(key: Any) -> Any:
    return tuple(key.split(",")) if isinstance(key, str) else key


class SplitPairs(BaseModel):
    score: dict[Annotated[tuple[str, str], BeforeValidator(_split)], float]


class Complexes(BaseModel):
    roots: dict[complex, int]


@pytest.mark.parametrize(
    ("tp", "field"),
    [
        (NullableColours, "stock"),
        (NullableYears, "by_year"),
        (CheckedIds, "by_id"),
        (SplitPairs, "score"),
        (Complexes, "roots"),
    ],
)
def test_a_map_whose_keys_are_not_plain_text_is_not_reported_exact(tp: Any, field: str) -> None:
    # Each reads only some keys (`Colour | None` reads "red" and "green", not "null"; a key
    # read by a validator, or as a complex number, any the schema cannot say), yet the
    # schema said nothing of them, so Gemini and llama.cpp reported `exact`.
    at = f"`{tp.__name__}.{field}`"
    gemini = _plan("gemini", tp)
    assert gemini.enforcement is SchemaEnforcement.APPROXIMATE
    assert [w.message for w in gemini.degradations] == [
        f"the schema of `{tp.__name__}` was approximated: `propertyNames` was removed at {at}"
    ]
    llama = _plan("llama-cpp", tp)
    assert llama.enforcement is SchemaEnforcement.APPROXIMATE
    # (Integer values are said too: kept to 64 bits.)
    values = f"`{tp.__name__}.{field}[*]`"
    value: list[str] = []  # (text and other number values: nothing more)
    if tp in (NullableColours, Complexes):
        value = [
            f"`integer` was narrowed at {values}: llama.cpp's grammar writes integers only "
            "from -9223372036854775806 to 9223372036854775806 "
            "(64 bits; bounds within them keep it exact)"
        ]
    assert [w.message for w in llama.degradations] == [
        f"the schema of `{tp.__name__}` was approximated: `propertyNames` is not enforced by "
        f"the grammar at {at}",
        *(f"the schema of `{tp.__name__}` was approximated: {said}" for said in value),
    ]


def test_an_optional_key_is_read_as_its_type_alone() -> None:
    # A key is text: the key "null" is no `None` (nor "None"), so `Colour | None` keys are
    # `Colour`'s, and the schema says so.
    adapter = TypeAdapter(dict[Colour | None, int])
    for key in ("null", "None", ""):
        with pytest.raises(ValueError):
            adapter.validate_json(json.dumps({key: 1}), strict=True)
    with pytest.raises(ValueError):
        TypeAdapter(dict[int | None, int]).validate_json('{"null": 1}', strict=True)
    sent: list[dict[str, Any]] = []
    target = _over("gemini", '{"stock": {"purple": 1}}', sent)
    with pytest.raises(allama.Error) as failed:
        allama.extract(target, NullableColours, ChatRequest(PLANNED["gemini"]).user("x"))
    metadata = ExtractionMetadata.from_error(failed.value)
    assert metadata.enforcement is SchemaEnforcement.APPROXIMATE
    assert sent[0]["generationConfig"]["responseJsonSchema"]["properties"]["stock"] == {
        "additionalProperties": {"type": "integer"},
        "title": "Stock",
        "type": "object",
    }


class MockedKeys(BaseModel):
    stock: dict[Colour | None, int] = Field(min_length=1)
    years: dict[int | None, str] = Field(min_length=1)
    ids: dict[Annotated[int, AfterValidator(abs)], str] = Field(min_length=1)


def test_the_mock_writes_keys_an_optional_or_validated_key_type_reads() -> None:
    provider = TestProvider()
    result = allama.extract(provider, MockedKeys, ChatRequest("m").user("x"))
    assert result.value == MockedKeys(stock={Colour.RED: 0}, years={0: ""}, ids={0: ""})
    # Maps with keys of a kind no provider's dialect enforces exactly: nor does the test
    # provider say it does.
    assert result.metadata.enforcement is SchemaEnforcement.APPROXIMATE
    sent = provider.requests[0].response_format
    assert sent is not None and sent.json_schema is not None
    properties: Any = sent.json_schema["properties"]
    assert properties["stock"]["propertyNames"] == {"$ref": "#/$defs/Colour"}
    assert properties["years"]["propertyNames"] == INT_KEYS
    assert properties["ids"]["propertyNames"] == INT_KEYS


def test_a_validator_before_the_keys_may_read_them_so_the_map_is_not_refused() -> None:
    sent: list[dict[str, Any]] = []
    target = _over("gemini", '{"score": {"a,b": 0.5}}', sent)
    result = allama.extract(target, SplitPairs, ChatRequest(PLANNED["gemini"]).user("x"))
    assert result.value == SplitPairs(score={("a", "b"): 0.5})
    assert result.metadata.enforcement is SchemaEnforcement.APPROXIMATE


class Point(BaseModel):
    model_config = ConfigDict(frozen=True)
    x: int


@dataclasses.dataclass(frozen=True)
class Cell:
    row: int


class PointTwice(BaseModel):
    seen: dict[Point, int]
    last: Point  # `Point` is then a definition the keys refer to


@pytest.mark.parametrize(
    ("tp", "shown", "label"),
    [
        (dict[tuple[str, str], float], "tuple[str, str]", "dict[tuple[str, str], float]"),
        (dict[frozenset[int], float], "frozenset[int]", "dict[frozenset[int], float]"),
        (dict[Point, int], "Point", "dict[Point, int]"),
        (dict[Cell, int], "Cell", "dict[Cell, int]"),
        (PointTwice, "Point", "PointTwice"),
        (dict[tuple[int] | None, int], "tuple[int]", "dict[tuple[int] | None, int]"),
    ],
)
def test_a_map_keyed_by_a_type_no_key_is_read_as_is_refused(
    tp: Any, shown: str, label: str
) -> None:
    # A key is text, which pydantic reads as no tuple, set, model or dataclass: only an
    # empty map would validate.
    provider = TestProvider()
    with pytest.raises(TypeError) as refused:
        allama.extract(provider, tp, ChatRequest("m").user("x"))
    assert str(refused.value) == (
        f"cannot extract `{label}`: its map keyed by `{shown}` reads no key JSON can write "
        "(a key is text, and validation reads none of these from text), so only an empty map "
        "would validate; key it by `str`, `int` or an `IntEnum`"
    )
    assert provider.requests == []


class TextKeys(BaseModel):
    names: dict[str | None, int]
    either: dict[int | str, int]


def test_keys_read_from_any_text_stay_exact() -> None:
    plan = _plan("gemini", TextKeys)
    assert plan.enforcement is SchemaEnforcement.EXACT
    assert plan.degradations == ()


# ----- compiled patterns


class Phone(BaseModel):
    number: Annotated[str, Field(pattern=re.compile(r"^ \d{3} - \d{4} $", re.VERBOSE))]


class Code(BaseModel):
    code: Annotated[str, Field(pattern=re.compile(r"^abc$", re.IGNORECASE))]


class PlainPhone(BaseModel):
    number: Annotated[str, Field(pattern=re.compile(r"^[0-9]{3}-[0-9]{4}$"))]


def test_a_compiled_pattern_is_validated_with_its_flags() -> None:
    # Pydantic reads a compiled pattern with Python's `re` and its flags; a provider
    # enforcing its text alone writes " 555 - 1234 ", which the type refuses.
    phone = TypeAdapter(Phone)
    assert phone.validate_python({"number": "555-1234"}).number == "555-1234"
    with pytest.raises(ValueError):
        phone.validate_python({"number": " 555 - 1234 "})
    assert TypeAdapter(Code).validate_python({"code": "ABC"}).code == "ABC"


@pytest.mark.parametrize("name", ["openai", "anthropic", "llama-cpp"])
@pytest.mark.parametrize(("tp", "field"), [(Phone, "number"), (Code, "code")])
def test_a_compiled_pattern_with_flags_is_not_reported_exact(
    name: str, tp: Any, field: str
) -> None:
    plan = _plan(name, tp)
    assert plan.enforcement is SchemaEnforcement.APPROXIMATE
    provider = {"openai": "OpenAI strict mode", "anthropic": "Anthropic strict mode"}
    assert [w.message for w in plan.degradations] == [
        f"the schema of `{tp.__name__}` was approximated: `pattern` was removed at "
        f"`{tp.__name__}.{field}`: it has inline flags (`(?i)`: Rust's syntax only), which "
        f"{provider.get(name, 'the grammar')} would read otherwise"
    ]


def test_a_compiled_pattern_with_flags_is_not_sent_as_its_text_alone() -> None:
    sent: list[dict[str, Any]] = []
    target = _over("openai", '{"number": "555-1234"}', sent)
    result = allama.extract(target, Phone, ChatRequest(PLANNED["openai"]).user("x"))
    assert result.value == Phone(number="555-1234")
    assert result.metadata.enforcement is SchemaEnforcement.APPROXIMATE
    schema = sent[0]["response_format"]["json_schema"]["schema"]
    assert schema["properties"]["number"] == {"title": "Number", "type": "string"}


@pytest.mark.parametrize(
    ("tp", "value"), [(Phone, Phone(number="000-0000")), (Code, Code(code="abc"))]
)
def test_the_mock_answers_a_compiled_pattern_as_python_reads_it(tp: Any, value: Any) -> None:
    provider = TestProvider()
    result = allama.extract(provider, tp, ChatRequest("m").user("x"))
    assert result.value == value
    # A pattern of flags no provider's dialect keeps (OpenAI's is approximate above): the
    # test provider says so too.
    assert result.metadata.enforcement is SchemaEnforcement.APPROXIMATE


def test_a_compiled_pattern_without_flags_is_still_sent_and_exact() -> None:
    sent: list[dict[str, Any]] = []
    target = _over("openai", '{"number": "555-1234"}', sent)
    result = allama.extract(target, PlainPhone, ChatRequest(PLANNED["openai"]).user("x"))
    assert result.metadata.enforcement is SchemaEnforcement.EXACT
    schema = sent[0]["response_format"]["json_schema"]["schema"]
    assert schema["properties"]["number"]["pattern"] == r"^[0-9]{3}-[0-9]{4}$"
