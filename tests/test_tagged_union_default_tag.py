"""A tagged union (`Field(discriminator="kind")`) whose tag field has a default is sent with
the tag required in each branch: pydantic leaves a defaulted field out of `required`, but
its tagged union validation cannot pick a branch without the tag key, so an answer leaving
it out (or writing the `null` OpenAI strict was offered) always failed. A model used outside
the union too keeps its tag optional there; the union's branch is a copy requiring it."""

from __future__ import annotations

import json
from typing import Annotated, Any, Literal, Union

import httpx2
import pytest
from pydantic import AliasChoices, AliasPath, BaseModel, ConfigDict, Discriminator, Field, Tag
from pydantic.alias_generators import to_camel
from typing_extensions import TypeAliasType

import allama
from _native_wire import extract_through
from allama import ChatRequest, Extractor, SchemaEnforcement
from allama.extract import ExtractionMode
from allama.mock import TestProvider
from allama.schema import type_schema
from allama.transport import Transport


class Cat(BaseModel):
    kind: Literal["cat"] = "cat"
    meow: int


class Dog(BaseModel):
    kind: Literal["dog"] = "dog"
    bark: str


PetUnion = Annotated[Union[Cat, Dog], Field(discriminator="kind")]  # noqa: UP007


class Pet(BaseModel):
    pet: PetUnion


class Shared(BaseModel):
    pet: PetUnion
    best: Cat  # outside the union: its tag may be left out


class Many(BaseModel):
    pets: list[PetUnion] = Field(min_length=1)


class Lion(BaseModel):
    kind: Literal["cat"] = "cat"
    breed: Literal["lion"] = "lion"


class Tabby(BaseModel):
    kind: Literal["cat"] = "cat"
    breed: Literal["tabby"] = "tabby"


class Nested(BaseModel):
    animal: Annotated[
        Union[Annotated[Union[Lion, Tabby], Field(discriminator="breed")], Dog],  # noqa: UP007
        Field(discriminator="kind"),
    ]


def _tag_of(value: Any) -> str:
    return str(value.get("kind", "cat") if isinstance(value, dict) else value.kind)


class Called(BaseModel):
    pet: Annotated[
        Union[Annotated[Cat, Tag("cat")], Annotated[Dog, Tag("dog")]],  # noqa: UP007
        Discriminator(_tag_of),
    ]


CAT_KIND = {"const": "cat", "default": "cat", "title": "Kind", "type": "string"}
CAT_DEF = {
    "properties": {"kind": CAT_KIND, "meow": {"title": "Meow", "type": "integer"}},
    "required": ["kind", "meow"],
    "title": "Cat",
    "type": "object",
}
DOG_DEF = {
    "properties": {
        "kind": {"const": "dog", "default": "dog", "title": "Kind", "type": "string"},
        "bark": {"title": "Bark", "type": "string"},
    },
    "required": ["kind", "bark"],
    "title": "Dog",
    "type": "object",
}


def test_the_type_schema_requires_the_tag_in_each_branch() -> None:
    assert type_schema(Pet).schema == {
        "$defs": {"Cat": CAT_DEF, "Dog": DOG_DEF},
        "properties": {
            "pet": {
                "discriminator": {
                    "mapping": {"cat": "#/$defs/Cat", "dog": "#/$defs/Dog"},
                    "propertyName": "kind",
                },
                "oneOf": [{"$ref": "#/$defs/Cat"}, {"$ref": "#/$defs/Dog"}],
                "title": "Pet",
            }
        },
        "required": ["pet"],
        "title": "Pet",
        "type": "object",
    }


def test_a_model_used_outside_the_union_keeps_its_tag_optional_there() -> None:
    schema = type_schema(Shared).schema
    assert schema["$defs"] == {
        "Cat": {**CAT_DEF, "required": ["meow"]},  # pydantic's, for `best`
        "CatTagged": CAT_DEF,  # the union's branch
        "Dog": DOG_DEF,
    }
    assert schema["properties"]["best"] == {"$ref": "#/$defs/Cat"}
    assert schema["properties"]["pet"]["oneOf"] == [
        {"$ref": "#/$defs/CatTagged"},
        {"$ref": "#/$defs/Dog"},
    ]
    assert schema["properties"]["pet"]["discriminator"]["mapping"] == {
        "cat": "#/$defs/CatTagged",
        "dog": "#/$defs/Dog",
    }


def test_a_union_at_the_root_and_unions_in_lists_require_the_tag() -> None:
    root = type_schema(PetUnion).schema
    assert root["$defs"] == {"Cat": CAT_DEF, "Dog": DOG_DEF}
    assert root["oneOf"] == [{"$ref": "#/$defs/Cat"}, {"$ref": "#/$defs/Dog"}]
    assert root["discriminator"]["mapping"] == {"cat": "#/$defs/Cat", "dog": "#/$defs/Dog"}
    assert set(root) == {"$defs", "discriminator", "oneOf"}  # no mark of allama's is left
    listed = type_schema(Many).schema
    assert listed["$defs"] == {"Cat": CAT_DEF, "Dog": DOG_DEF}
    assert listed["properties"]["pets"]["items"]["oneOf"] == [
        {"$ref": "#/$defs/Cat"},
        {"$ref": "#/$defs/Dog"},
    ]


def test_a_nested_union_requires_both_tags() -> None:
    defs = type_schema(Nested).schema["$defs"]
    assert {name: schema.get("required") for name, schema in defs.items()} == {
        "Dog": ["kind", "bark"],
        "Lion": ["kind", "breed"],
        "Tabby": ["kind", "breed"],
    }


def test_a_recursive_union_requires_the_tag_and_the_model_elsewhere_does_not() -> None:
    class Leaf(BaseModel):
        kind: Literal["leaf"] = "leaf"
        value: int

    class Node(BaseModel):
        kind: Literal["node"] = "node"
        kids: list[Annotated[Union[Node, Leaf], Field(discriminator="kind")]] = []  # noqa: UP007

    class Tree(BaseModel):
        root: Annotated[Union[Node, Leaf], Field(discriminator="kind")]  # noqa: UP007
        spare: Node | None = None

    schema = type_schema(Tree).schema
    defs = schema["$defs"]
    assert sorted(defs) == ["Leaf", "Node", "NodeTagged"]
    assert defs["Leaf"]["required"] == ["kind", "value"]
    assert "required" not in defs["Node"]
    assert defs["NodeTagged"]["required"] == ["kind"]
    branches = [{"$ref": "#/$defs/NodeTagged"}, {"$ref": "#/$defs/Leaf"}]
    assert schema["properties"]["root"]["oneOf"] == branches
    for name in ("Node", "NodeTagged"):  # the kids' union inside both
        assert defs[name]["properties"]["kids"]["items"]["oneOf"] == branches
    assert schema["properties"]["spare"]["anyOf"][0] == {"$ref": "#/$defs/Node"}


@pytest.mark.parametrize("name", ["openai", "anthropic", "gemini"])
def test_each_preset_sends_the_tag_required_and_the_answer_validates(name: str) -> None:
    # OpenAI strict offers `best.kind` a stand-in `null` (it is optional there), removed
    # before validation; the others may leave it out.
    best = {"kind": None, "meow": 2} if name == "openai" else {"meow": 2}
    reply = json.dumps({"pet": {"kind": "dog", "bark": "woof"}, "best": best})
    extracted, sent = extract_through(name, Shared, reply)
    assert extracted.value == Shared(pet=Dog(bark="woof"), best=Cat(meow=2))
    assert extracted.metadata.enforcement is SchemaEnforcement.EXACT
    assert extracted.metadata.degradations == []
    defs = sent["$defs"]
    tagged, kept = defs["CatTagged"], defs["Cat"]
    assert tagged["required"] == ["kind", "meow"]
    assert defs["Dog"]["required"] == ["kind", "bark"]
    if name == "openai":  # strict: every property required, an optional one nullable
        assert tagged["properties"]["kind"] == {"title": "Kind", "type": "string", "enum": ["cat"]}
        assert kept["required"] == ["kind", "meow"]
        assert kept["properties"]["kind"] == {
            "anyOf": [{"title": "Kind", "type": "string", "enum": ["cat"]}, {"type": "null"}]
        }
    else:
        kind = {"default": "cat", "title": "Kind", "type": "string", "enum": ["cat"]}
        assert tagged["properties"]["kind"] == kind
        assert kept["required"] == ["meow"]


def _openai(reply: dict[str, Any]) -> tuple[Any, list[dict[str, Any]]]:
    """An OpenAI preset whose endpoint answers `reply` as the output's text."""
    sent: list[dict[str, Any]] = []

    def endpoint(request: httpx2.Request) -> httpx2.Response:
        body = json.loads(request.content)
        sent.append(body)
        message = {"role": "assistant", "content": json.dumps(reply)}
        return httpx2.Response(
            200,
            json={
                "id": "c",
                "object": "chat.completion",
                "created": 1,
                "model": body["model"],
                "choices": [{"index": 0, "message": message, "finish_reason": "stop"}],
                "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
            },
        )

    transport = Transport(client=httpx2.Client(transport=httpx2.MockTransport(endpoint)))
    return allama.provider("openai", api_key="k", transport=transport), sent


def test_a_faked_openai_answer_with_the_tag_validates_exactly() -> None:
    provider, sent = _openai({"pet": {"kind": "cat", "meow": 1}})
    request = ChatRequest("gpt-4o-2024-08-06").user("x")
    extracted = Extractor().extract(provider, Pet, request)
    assert extracted.value == Pet(pet=Cat(meow=1))
    assert extracted.metadata.enforcement is SchemaEnforcement.EXACT
    assert extracted.metadata.degradations == []
    schema = sent[0]["response_format"]["json_schema"]["schema"]
    assert schema["$defs"]["Cat"]["properties"]["kind"] == {
        "title": "Kind",
        "type": "string",
        "enum": ["cat"],
    }
    assert schema["$defs"]["Cat"]["required"] == ["kind", "meow"]


@pytest.mark.parametrize("mode", [ExtractionMode.NATIVE, ExtractionMode.FORCED_TOOL])
@pytest.mark.parametrize(
    ("tp", "expected"),
    [
        (Pet, Pet(pet=Cat(meow=0))),
        (Shared, Shared(pet=Cat(meow=0), best=Cat(meow=0))),
        (Many, Many(pets=[Cat(meow=0)])),
        (Nested, Nested(animal=Lion())),
    ],
)
def test_the_mock_answers_a_tagged_union_with_a_defaulted_tag(
    tp: type[BaseModel], expected: BaseModel, mode: ExtractionMode
) -> None:
    request = ChatRequest("m").user("x").with_option(mode)
    extracted = Extractor().extract(TestProvider(), tp, request)
    assert extracted.value == expected
    assert extracted.metadata.mode == mode.value
    # A `oneOf` whose branches may overlap (`Nested`) no provider's dialect enforces
    # exactly (OpenAI's sends it as `anyOf`): nor does the test provider say it does.
    exact = tp is not Nested
    assert extracted.metadata.enforcement is (
        SchemaEnforcement.EXACT if exact else SchemaEnforcement.APPROXIMATE
    )


def test_a_callable_discriminator_is_left_as_pydantic_writes_it() -> None:
    schema = type_schema(Called).schema
    assert schema["$defs"]["Cat"]["required"] == ["meow"]
    assert schema["$defs"]["Dog"]["required"] == ["bark"]
    assert "discriminator" not in schema["properties"]["pet"]
    # It names no property to require, so its branches may overlap: approximate, as before.
    extracted, _ = extract_through("openai", Called, '{"pet": {"kind": null, "meow": 1}}')
    assert extracted.value == Called(pet=Cat(meow=1))
    assert extracted.metadata.enforcement is SchemaEnforcement.APPROXIMATE
    assert [w.message for w in extracted.metadata.degradations] == [
        "the schema of `Called` was approximated: `oneOf` at `Called.pet.oneOf` became "
        "`anyOf`: a value may match more than one branch"
    ]


# A recursive `TypeAliasType` whose tag field has an alias: pydantic's core schema reads the
# tag from `[["kind"], ["type"]]` and, within the recursion, writes no discriminator, so the
# tag went optional (nullable under OpenAI strict, and an answer writing that `null` failed).
Aliased = TypeAliasType(
    "Aliased",
    Annotated[Union["ALeaf", "ANode"], Field(discriminator="kind")],
)


class ALeaf(BaseModel):
    kind: Literal["leaf"] = Field("leaf", alias="type")
    name: str


class ANode(BaseModel):
    kind: Literal["node"] = Field("node", alias="type")
    kids: list[Aliased] = []


class AForest(BaseModel):
    t: Aliased


class Camel(BaseModel):
    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True)


Expr = TypeAliasType(
    "Expr",
    Annotated[Union["Num", "Add"], Field(discriminator="node_type")],
)


class Num(Camel):
    node_type: Literal["num"] = "num"
    value: str


class Add(Camel):
    node_type: Literal["add"] = "add"
    terms: list[Expr]


class Formula(Camel):
    expr: Expr


# Branches that read the tag under different names: by the field's (aliases not read) and
# by its alias. Validation finds it under either, so each branch requires its own.
Mixed = TypeAliasType(
    "Mixed",
    Annotated[Union["MLeaf", "MNode"], Field(discriminator="kind")],
)


class MLeaf(BaseModel):
    model_config = ConfigDict(validate_by_alias=False, validate_by_name=True)
    kind: Literal["leaf"] = Field("leaf", alias="type")
    name: str


class MNode(BaseModel):
    kind: Literal["node"] = Field("node", alias="type")
    kids: list[Mixed] = []


class MForest(BaseModel):
    t: Mixed


ALIASED_REPLY = {"t": {"type": "node", "kids": [{"type": "leaf", "name": "a"}, {"type": "node"}]}}
CAMEL_REPLY = {"expr": {"nodeType": "add", "terms": [{"nodeType": "num", "value": "1"}]}}


def test_a_recursive_alias_requires_its_tag_under_the_tag_fields_alias() -> None:
    leaf_tag = {"const": "leaf", "default": "leaf", "title": "Type", "type": "string"}
    node_tag = {"const": "node", "default": "node", "title": "Type", "type": "string"}
    assert type_schema(AForest).schema == {
        "$defs": {
            "ALeaf": {
                "properties": {"type": leaf_tag, "name": {"title": "Name", "type": "string"}},
                "required": ["type", "name"],
                "title": "ALeaf",
                "type": "object",
            },
            "ANode": {
                "properties": {
                    "type": node_tag,
                    "kids": {
                        "default": [],
                        "items": {"$ref": "#/$defs/Aliased"},
                        "title": "Kids",
                        "type": "array",
                    },
                },
                "required": ["type"],
                "title": "ANode",
                "type": "object",
            },
            # Pydantic writes no discriminator here; the branches' `const` tags tell them apart.
            "Aliased": {"oneOf": [{"$ref": "#/$defs/ALeaf"}, {"$ref": "#/$defs/ANode"}]},
        },
        "properties": {"t": {"$ref": "#/$defs/Aliased"}},
        "required": ["t"],
        "title": "AForest",
        "type": "object",
    }


def test_a_recursive_alias_requires_a_tag_an_alias_generator_renamed() -> None:
    defs = type_schema(Formula).schema["$defs"]
    assert {name: schema.get("required") for name, schema in defs.items()} == {
        "Add": ["nodeType", "terms"],
        "Expr": None,
        "Num": ["nodeType", "value"],
    }


def test_each_branch_requires_the_tag_under_the_name_it_is_read_by() -> None:
    defs = type_schema(MForest).schema["$defs"]
    assert defs["MLeaf"]["required"] == ["kind", "name"]
    assert defs["MNode"]["required"] == ["type"]
    assert list(defs["MLeaf"]["properties"]) == ["kind", "name"]
    assert MForest.model_validate({"t": {"kind": "leaf", "name": "a"}}) == MForest(
        t=MLeaf(name="a")
    )


@pytest.mark.parametrize("name", ["openai", "llama-cpp"])
@pytest.mark.parametrize(
    ("tp", "reply", "tag", "expected"),
    [
        (
            AForest,
            ALIASED_REPLY,
            ("ALeaf", "type", "leaf"),
            AForest(t=ANode(kids=[ALeaf(name="a"), ANode()])),
        ),
        (
            Formula,
            CAMEL_REPLY,
            ("Num", "nodeType", "num"),
            Formula(expr=Add(terms=[Num(value="1")])),
        ),
    ],
)
def test_a_strict_native_answer_naming_an_aliased_tag_validates_exactly(
    name: str, tp: Any, reply: dict[str, Any], tag: tuple[str, str, str], expected: Any
) -> None:
    extracted, sent = extract_through(name, tp, json.dumps(reply))
    assert extracted.value == expected
    assert extracted.metadata.enforcement is SchemaEnforcement.EXACT
    assert extracted.metadata.degradations == []
    model, prop, value = tag
    assert sent["$defs"][model]["required"][0] == prop
    title = "Type" if prop == "type" else "Nodetype"
    sent_tag = {"title": title, "type": "string", "enum": [value]}
    # OpenAI strict: required, so not offered a `null` (which validation refuses).
    assert sent["$defs"][model]["properties"][prop] == (
        sent_tag if name == "openai" else {"default": value, **sent_tag}
    )


@pytest.mark.parametrize("mode", [ExtractionMode.NATIVE, ExtractionMode.FORCED_TOOL])
@pytest.mark.parametrize(
    ("tp", "expected"),
    [
        (AForest, AForest(t=ALeaf(name=""))),
        (Formula, Formula(expr=Num(value=""))),
        (MForest, MForest(t=MLeaf(name=""))),
    ],
)
def test_the_mock_answers_a_recursive_alias_whose_tag_has_an_alias(
    tp: Any, expected: Any, mode: ExtractionMode
) -> None:
    request = ChatRequest("m").user("x").with_option(mode)
    extracted = Extractor().extract(TestProvider(), tp, request)
    assert extracted.value == expected
    # A `oneOf` whose branches may overlap (`MForest`) no provider's dialect enforces
    # exactly (OpenAI's sends it as `anyOf`): nor does the test provider say it does.
    exact = tp is not MForest
    assert extracted.metadata.enforcement is (
        SchemaEnforcement.EXACT if exact else SchemaEnforcement.APPROXIMATE
    )


@pytest.mark.parametrize("alias", [AliasChoices("type", "t"), AliasPath("type", 0)])
def test_a_tag_read_from_choices_or_a_path_is_refused(alias: AliasChoices | AliasPath) -> None:
    # No single property holds such a tag; pydantic refuses it, and so the extraction.
    class Cat2(BaseModel):
        kind: Literal["cat"] = Field("cat", validation_alias=alias)

    class Dog2(BaseModel):
        kind: Literal["dog"] = Field("dog", validation_alias=alias)

    with pytest.raises(TypeError, match="is not supported in a discriminated union"):
        type_schema(Annotated[Union[Cat2, Dog2], Field(discriminator="kind")])  # noqa: UP007
