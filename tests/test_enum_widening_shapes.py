"""An `enum` split into a union by type, its widened branches judged as their types alone.

An enum whose values a dialect cannot list becomes the types of those values; when the
values mix types, each type is a branch of an `anyOf`. A widened `{"type": "array"}` or
`{"type": "object"}` branch is the same item-less array or open object it is without the
other values: strict modes cannot send it, and extraction must not call it enforced.
"""

from __future__ import annotations

import json
from enum import Enum
from typing import Any

import httpx2
import pytest
from pydantic import BaseModel, TypeAdapter

import allama
from allama import ChatRequest
from allama.schema._dialects import anthropic, gemini_response_schema, openai_strict
from allama.schema._rewrite import Rewrite
from allama.transport import Transport

MODEL = "claude-sonnet-4-5"


class Pair(Enum):
    ORIGIN = (0, 0)
    UNIT = (1, 1)


class PairOrName(Enum):
    ORIGIN = (0, 0)
    NAMED = "origin"


def _wrapped(tp: type[Enum]) -> dict[str, Any]:
    model = type("Where", (BaseModel,), {"__annotations__": {"where": tp}})
    return TypeAdapter(model).json_schema()


def _enum_field(name: str, values: list[Any]) -> dict[str, Any]:
    """What pydantic writes for an `Enum` named `name` of `values` (dict values, here)."""
    return {
        "$defs": {name: {"enum": values, "title": name}},
        "properties": {"where": {"$ref": f"#/$defs/{name}"}},
        "required": ["where"],
        "title": "Where",
        "type": "object",
    }


BAG = _enum_field("Bag", [{"x": 1}, {"x": 2}])
BAG_OR_NAME = _enum_field("BagOrName", [{"x": 1}, "origin"])


def _notes(rewrite: Rewrite) -> list[tuple[str, str, str]]:
    return [(n.kind.value, n.pointer, n.message) for n in rewrite.notes]


def _widened(name: str, provider: str) -> tuple[str, str, str]:
    at = f"/$defs/{name}/enum"
    return (
        "approximated",
        at,
        f"`enum` at `{at}` was widened to the types of values {provider} cannot list",
    )


@pytest.mark.parametrize(
    ("dialect", "provider"),
    [(anthropic, "Anthropic strict mode"), (openai_strict, "OpenAI strict mode")],
)
def test_a_widened_array_branch_is_as_unsendable_as_the_array_alone(
    dialect: Any, provider: str
) -> None:
    alone = dialect(_wrapped(Pair))
    mixed = dialect(_wrapped(PairOrName))
    items = "does not constrain its items, which " + provider + " cannot express"
    assert _notes(alone)[1] == ("unsupported", "/$defs/Pair", f"the array at `/$defs/Pair` {items}")
    assert not alone.strict_representable
    assert _notes(mixed) == [
        _widened("PairOrName", provider),
        ("unsupported", "/$defs/PairOrName", f"the array at `/$defs/PairOrName` {items}"),
    ]
    assert not mixed.strict_representable


@pytest.mark.parametrize(
    ("dialect", "provider"),
    [(anthropic, "Anthropic strict mode"), (openai_strict, "OpenAI strict mode")],
)
def test_a_widened_object_branch_is_as_unsendable_as_the_object_alone(
    dialect: Any, provider: str
) -> None:
    alone = dialect(BAG)
    mixed = dialect(BAG_OR_NAME)
    open_ = "is an object open to any keys, which " + provider + " cannot enforce"
    assert _notes(alone)[1] == (
        "unsupported",
        "/$defs/Bag",
        f"the subschema at `/$defs/Bag` {open_}",
    )
    assert _notes(mixed) == [
        _widened("BagOrName", provider),
        ("unsupported", "/$defs/BagOrName", f"the subschema at `/$defs/BagOrName` {open_}"),
    ]
    assert not mixed.strict_representable


def test_gemini_response_schema_shapes_the_widened_branches_as_their_types_alone() -> None:
    # An array of any items (written `items: {}`, a node without `type`, which Gemini's
    # OpenAPI schema refuses) is not enforced, as `Pair` alone is; an open object is any
    # value, not enforced, as `Bag` alone is.
    pairs = gemini_response_schema(_wrapped(PairOrName))
    assert pairs.schema["properties"]["where"]["anyOf"] == [
        {"type": "ARRAY", "items": {}},
        {"type": "STRING", "enum": ["origin"]},
    ]
    assert _notes(pairs)[1] == (
        "unsupported",
        "/$defs/PairOrName",
        "the array at `/$defs/PairOrName` does not constrain its items, "
        "which Gemini responseSchema cannot express",
    )
    assert not pairs.strict_representable
    assert not gemini_response_schema(_wrapped(Pair)).strict_representable
    bags = gemini_response_schema(BAG_OR_NAME)
    assert bags.schema["properties"]["where"]["anyOf"] == [
        {},
        {"type": "STRING", "enum": ["origin"]},
    ]
    assert _notes(bags)[1] == (
        "unsupported",
        "/$defs/BagOrName",
        "the subschema at `/$defs/BagOrName` is an object open to any keys, "
        "which Gemini responseSchema cannot enforce",
    )
    assert not bags.strict_representable


def test_keywords_beside_a_split_enum_go_into_the_branch_of_their_type() -> None:
    # `items` and `properties` constrain only arrays and objects: in their branch, the array
    # has its items and the object is closed, so both are sendable and nothing is lost.
    schema = {
        "type": "object",
        "properties": {
            "pair": {"enum": [[1, 2], "none"], "items": {"type": "integer"}, "minItems": 1},
            "bag": {
                "enum": [{"x": 1}, "none"],
                "properties": {"x": {"type": "integer"}},
                "required": ["x"],
            },
        },
        "required": ["pair", "bag"],
    }
    rewrite = anthropic(schema)
    assert rewrite.schema["properties"] == {
        "pair": {
            "anyOf": [
                {"type": "array", "items": {"type": "integer"}, "minItems": 1},
                {"type": "string", "enum": ["none"]},
            ]
        },
        "bag": {
            "anyOf": [
                {
                    "type": "object",
                    "properties": {"x": {"type": "integer"}},
                    "required": ["x"],
                    "additionalProperties": False,
                },
                {"type": "string", "enum": ["none"]},
            ]
        },
    }
    assert [n.kind.value for n in rewrite.notes] == ["approximated", "approximated"]
    assert rewrite.strict_representable


class Where(BaseModel):
    where: PairOrName


def test_auto_extraction_leaves_out_the_member_no_json_reads_back() -> None:
    sent: list[dict[str, Any]] = []
    reply = {
        "id": "msg_1",
        "type": "message",
        "role": "assistant",
        "model": MODEL,
        "content": [{"type": "text", "text": '{"where": "origin"}'}],
        "stop_reason": "end_turn",
        "stop_sequence": None,
        "usage": {"input_tokens": 10, "output_tokens": 5},
    }

    def handle(request: httpx2.Request) -> httpx2.Response:
        sent.append(json.loads(request.content))
        return httpx2.Response(200, content=json.dumps(reply).encode())

    client = httpx2.Client(transport=httpx2.MockTransport(handle))
    provider = allama.provider("anthropic", api_key="sk-ant-k", transport=Transport(client=client))
    result = allama.extract(provider, Where, ChatRequest(MODEL).user("where?"))
    assert result.value == Where(where=PairOrName.NAMED)
    # `ORIGIN`'s tuple is listed as `[0, 0]`, which validation never reads back: it is left
    # out of the schema (no answer naming it validates), so no array widens the enum and
    # the schema goes whole, natively.
    assert result.metadata.mode.value == "native"
    assert result.metadata.enforcement.value == "exact"
    assert result.metadata.degradations == []
    [body] = sent
    assert body["output_config"]["format"]["schema"]["$defs"]["PairOrName"] == {
        "enum": ["origin"],
        "title": "PairOrName",
        "type": "string",
    }
