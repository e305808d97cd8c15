"""A tagged union written as a `TypeAliasType` requires its defaulted tag in every branch,
recursive or not. For a recursive one pydantic's core schema holds the tagged union and a
plain union under one ref, and wrote the definition from the plain one (no discriminator):
the tag went optional (nullable under OpenAI strict, which was called exact), and the
mock's answer, like an OpenAI answer writing the offered `null`, failed validation."""

from __future__ import annotations

import json
from typing import Annotated, Any, Literal, Union

import pytest
from pydantic import BaseModel, Discriminator, Field, Tag
from typing_extensions import TypeAliasType

import allama
from _native_wire import MODELS, extract_through
from _tool_endpoint import ToolEndpoint
from _tool_endpoint import sent_schema as sent_tool_schema
from allama import ChatRequest, Extractor, SchemaEnforcement
from allama.extract import ExtractionMode
from allama.mock import TestProvider
from allama.schema import type_schema

Tree = TypeAliasType(
    "Tree",
    Annotated[Union["Leaf", "Node"], Field(discriminator="kind")],
)


class Leaf(BaseModel):
    kind: Literal["leaf"] = "leaf"
    name: str


class Node(BaseModel):
    kind: Literal["node"] = "node"
    kids: list[Tree] = []


class Forest(BaseModel):
    t: Tree


class Grove(BaseModel):
    trees: list[Tree] = Field(min_length=1)
    named: dict[str, Tree] = Field(min_length=1)


class Kept(BaseModel):
    t: Tree
    spare: Leaf | None = None  # outside the union: its tag may be left out


class A(BaseModel):
    kind: Literal["a"] = "a"
    x: int


class B(BaseModel):
    kind: Literal["b"] = "b"
    y: str


AB = TypeAliasType("AB", Annotated[Union[A, B], Field(discriminator="kind")])  # noqa: UP007


class Flat(BaseModel):
    ab: AB
    abs: list[AB]
    named: dict[str, AB]


def _tag_of(value: Any) -> str:
    return str(value.get("kind", "leaf") if isinstance(value, dict) else value.kind)


Called = TypeAliasType(
    "Called",
    Annotated[
        Union[Annotated["CLeaf", Tag("leaf")], Annotated["CNode", Tag("node")]],  # noqa: UP007
        Discriminator(_tag_of),
    ],
)


class CLeaf(BaseModel):
    kind: Literal["leaf"] = "leaf"
    name: str


class CNode(BaseModel):
    kind: Literal["node"] = "node"
    kids: list[Called] = []


class CalledForest(BaseModel):
    t: Called


LEAF_DEF = {
    "properties": {
        "kind": {"const": "leaf", "default": "leaf", "title": "Kind", "type": "string"},
        "name": {"title": "Name", "type": "string"},
    },
    "required": ["kind", "name"],
    "title": "Leaf",
    "type": "object",
}
NODE_DEF = {
    "properties": {
        "kind": {"const": "node", "default": "node", "title": "Kind", "type": "string"},
        "kids": {
            "default": [],
            "items": {"$ref": "#/$defs/Tree"},
            "title": "Kids",
            "type": "array",
        },
    },
    "required": ["kind"],
    "title": "Node",
    "type": "object",
}
TREE_DEF = {
    "discriminator": {
        "mapping": {"leaf": "#/$defs/Leaf", "node": "#/$defs/Node"},
        "propertyName": "kind",
    },
    "oneOf": [{"$ref": "#/$defs/Leaf"}, {"$ref": "#/$defs/Node"}],
}
DEFS = {"Leaf": LEAF_DEF, "Node": NODE_DEF, "Tree": TREE_DEF}
REPLY = {"t": {"kind": "node", "kids": [{"kind": "leaf", "name": "a"}, {"kind": "node"}]}}
VALUE = Forest(t=Node(kids=[Leaf(name="a"), Node()]))


def test_a_recursive_alias_is_a_tagged_union_requiring_its_tag() -> None:
    assert type_schema(Forest).schema == {
        "$defs": DEFS,
        "properties": {"t": {"$ref": "#/$defs/Tree"}},
        "required": ["t"],
        "title": "Forest",
        "type": "object",
    }


@pytest.mark.parametrize("tp", [Tree, list[Tree], dict[str, Tree], Grove])
def test_a_recursive_alias_at_the_root_in_a_list_or_a_map_requires_its_tag(tp: Any) -> None:
    assert type_schema(tp).schema["$defs"] == DEFS


def test_a_model_used_outside_a_recursive_alias_keeps_its_tag_optional_there() -> None:
    schema = type_schema(Kept).schema
    assert schema["$defs"]["Leaf"]["required"] == ["name"]  # pydantic's, for `spare`
    assert schema["$defs"]["LeafTagged"] == LEAF_DEF
    assert schema["$defs"]["Tree"]["oneOf"] == [
        {"$ref": "#/$defs/LeafTagged"},
        {"$ref": "#/$defs/Node"},
    ]
    assert schema["properties"]["spare"]["anyOf"][0] == {"$ref": "#/$defs/Leaf"}


def test_a_plain_alias_requires_its_tag_where_it_is_used() -> None:
    schema = type_schema(Flat).schema
    assert {name: d.get("required") for name, d in schema["$defs"].items()} == {
        "A": ["kind", "x"],
        "AB": None,
        "B": ["kind", "y"],
    }
    assert schema["$defs"]["AB"]["discriminator"]["propertyName"] == "kind"
    assert schema["properties"]["abs"]["items"] == {"$ref": "#/$defs/AB"}
    assert schema["properties"]["named"]["additionalProperties"] == {"$ref": "#/$defs/AB"}


def test_a_recursive_alias_with_a_callable_discriminator_is_left_as_pydantic_writes_it() -> None:
    defs = type_schema(CalledForest).schema["$defs"]
    assert defs["CLeaf"]["required"] == ["name"]
    assert "required" not in defs["CNode"]
    assert defs["Called"] == {"oneOf": [{"$ref": "#/$defs/CLeaf"}, {"$ref": "#/$defs/CNode"}]}


@pytest.mark.parametrize("mode", [ExtractionMode.NATIVE, ExtractionMode.FORCED_TOOL])
@pytest.mark.parametrize(
    ("tp", "expected"),
    [
        (Forest, Forest(t=Leaf(name=""))),
        (Tree, Leaf(name="")),
        (Grove, Grove(trees=[Leaf(name="")], named={"key1": Leaf(name="")})),
    ],
)
def test_the_mock_answers_a_recursive_alias(tp: Any, expected: Any, mode: ExtractionMode) -> None:
    request = ChatRequest("m").user("x").with_option(mode)
    extracted = Extractor().extract(TestProvider(), tp, request)
    assert extracted.value == expected
    assert extracted.metadata.mode == mode.value
    # A map of trees (`Grove.named`) no provider's dialect enforces exactly: nor does the
    # test provider say it does.
    exact = tp is not Grove
    assert extracted.metadata.enforcement is (
        SchemaEnforcement.EXACT if exact else SchemaEnforcement.APPROXIMATE
    )


@pytest.mark.parametrize("name", ["openai", "llama-cpp"])
def test_a_strict_native_answer_naming_the_tag_validates_exactly(name: str) -> None:
    extracted, sent = extract_through(name, Forest, json.dumps(REPLY))
    assert extracted.value == VALUE
    assert extracted.metadata.enforcement is SchemaEnforcement.EXACT
    assert extracted.metadata.degradations == []
    defs = sent["$defs"]
    assert defs["Leaf"]["required"] == ["kind", "name"]
    assert defs["Node"]["required"] == ["kind", "kids"] if name == "openai" else ["kind"]
    kind = {"title": "Kind", "type": "string", "enum": ["leaf"]}
    # OpenAI strict: required, so not offered a `null`.
    assert defs["Leaf"]["properties"]["kind"] == (
        kind if name == "openai" else {"default": "leaf", **kind}
    )


@pytest.mark.parametrize("name", ["anthropic", "gemini"])
def test_a_tool_answer_naming_the_tag_validates(name: str) -> None:
    # Neither enforces recursion: the schema goes as a tool's, unenforced, tag required.
    endpoint = ToolEndpoint(name, args=REPLY)
    provider = allama.provider(name, api_key="k", transport=endpoint.transport())
    extracted = Extractor().extract(provider, Forest, ChatRequest(MODELS[name]).user("x"))
    assert extracted.value == VALUE
    assert extracted.metadata.mode == ExtractionMode.FORCED_TOOL.value
    assert extracted.metadata.enforcement is SchemaEnforcement.NOT_ENFORCED
    assert sent_tool_schema(name, endpoint.bodies[-1])["$defs"] == DEFS
