"""The rewriting engine on what a probe found: an object's `additionalProperties` beside a
union, whose branches declare names of their own, merged as if it covered them (wider, said
exact); normalizing the same definition again wherever it is reached (time growing with the
number of paths, not the size); `$dynamicRef` and `$recursiveRef` dropped without a note."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from typing import Any

import pytest

from _schema_support import original_reading, rewritten_reading
from allama.schema import (
    anthropic,
    gemini_json_schema,
    gemini_response_schema,
    grammar_engine,
    openai_strict,
)
from allama.schema._dialects import _engine
from allama.schema._dialects._llama_cpp import llama_cpp
from allama.schema._rewrite import Rewrite

Dialect = Callable[[Mapping[str, Any]], Rewrite]

DIALECTS: dict[str, Dialect] = {
    "openai_strict": openai_strict,
    "openai_strict_azure_legacy": lambda s: openai_strict(s, profile="azure_legacy"),
    "openai_strict_xai": lambda s: openai_strict(s, profile="xai"),
    "anthropic": anthropic,
    "gemini_json_schema": gemini_json_schema,
    "gemini_response_schema": gemini_response_schema,
    "grammar_engine": grammar_engine,
    "llama_cpp": llama_cpp,
}
STRING = {"type": "string"}
TOO_LARGE = "was left unconstrained: the schema is too large to rewrite whole"


def notes(rewrite: Rewrite) -> list[tuple[str, str, str]]:
    return [(n.kind.value, n.pointer, n.message) for n in rewrite.notes]


def wrapped(item: dict[str, Any], defs: dict[str, Any] | None = None) -> dict[str, Any]:
    """`item` as the one property of a closed root (strict modes want an object root)."""
    root: dict[str, Any] = {
        "type": "object",
        "properties": {"item": item},
        "required": ["item"],
        "additionalProperties": False,
    }
    return {**root, "$defs": defs} if defs else root


def accepts(name: str, original: Mapping[str, Any], rewrite: Rewrite, value: Any) -> bool:
    reading = "grammar_engine" if name == "llama_cpp" else name
    if reading.startswith("openai_strict"):
        reading = "openai_strict"
    return rewritten_reading(reading, original, rewrite.schema).is_valid(value)


# 1. A closed object beside a union: its closure sees its own `properties` only.

CLOSED_BESIDE_UNION = wrapped(
    {
        "type": "object",
        "properties": {"kind": STRING},
        "required": ["kind"],
        "additionalProperties": False,
        "anyOf": [
            {"properties": {"kind": {"const": "a"}, "extra": {"type": "integer"}}},
            {"properties": {"kind": {"const": "b"}}},
        ],
    }
)
KIND_ONLY = [
    {
        "type": "object",
        "properties": {"kind": {"type": "string", "enum": [kind]}},
        "required": ["kind"],
        "additionalProperties": False,
    }
    for kind in ("a", "b")
]


@pytest.mark.parametrize("name", list(DIALECTS))
def test_a_closed_object_beside_a_union_rejects_a_name_only_a_branch_declares(name: str) -> None:
    rewrite = DIALECTS[name](CLOSED_BESIDE_UNION)
    original = original_reading(CLOSED_BESIDE_UNION)
    extra = {"item": {"kind": "a", "extra": 1}}
    assert not original.is_valid(extra)
    assert not accepts(name, CLOSED_BESIDE_UNION, rewrite, extra)
    for fine in ({"item": {"kind": "a"}}, {"item": {"kind": "b"}}):
        assert original.is_valid(fine)
        assert accepts(name, CLOSED_BESIDE_UNION, rewrite, fine)
    assert (rewrite.exact, notes(rewrite)) == (True, [])


def test_the_branches_are_sent_without_the_name_the_closure_forbids() -> None:
    for dialect in (openai_strict, anthropic, grammar_engine):
        item = dialect(CLOSED_BESIDE_UNION).schema["properties"]["item"]
        assert item == {"anyOf": KIND_ONLY}
    assert gemini_response_schema(CLOSED_BESIDE_UNION).schema["properties"]["item"] == {
        "anyOf": [
            {
                "type": "OBJECT",
                "properties": {"kind": {"type": "STRING", "enum": [kind]}},
                "required": ["kind"],
            }
            for kind in ("a", "b")
        ]
    }


def test_a_branch_that_requires_a_forbidden_name_is_left_out() -> None:
    schema = wrapped(
        {
            "type": "object",
            "properties": {"kind": STRING},
            "required": ["kind"],
            "additionalProperties": False,
            "anyOf": [
                {"properties": {"extra": {"type": "integer"}}, "required": ["extra"]},
                {"properties": {"kind": {"const": "b"}}},
            ],
        }
    )
    rewrite = anthropic(schema)
    assert rewrite.schema["properties"]["item"] == {"anyOf": [KIND_ONLY[1]]}
    assert (rewrite.exact, notes(rewrite)) == (True, [])
    assert not accepts("anthropic", schema, rewrite, {"item": {"kind": "b", "extra": 1}})


def test_a_required_forbidden_name_beside_no_type_leaves_other_values_valid() -> None:
    schema = wrapped(
        {
            "properties": {"kind": STRING},
            "additionalProperties": False,
            "anyOf": [
                {"properties": {"extra": {"type": "integer"}}, "required": ["extra"]},
                {"type": "string"},
            ],
        }
    )
    rewrite = grammar_engine(schema)
    assert rewrite.schema["properties"]["item"] == {
        "anyOf": [
            {
                "properties": {"kind": {"type": "string"}, "extra": False},
                "additionalProperties": False,
                "required": ["extra"],
            },
            {"type": "string"},
        ]
    }
    assert (rewrite.exact, notes(rewrite)) == (True, [])
    original = original_reading(schema)
    for value, valid in (({"item": "s"}, True), ({"item": {"extra": 1}}, False)):
        assert original.is_valid(value) is valid
        assert accepts("grammar_engine", schema, rewrite, value) is valid


def test_a_schema_valued_closure_joins_the_branch_names_own_schema() -> None:
    schema = wrapped(
        {
            "type": "object",
            "properties": {"kind": STRING},
            "required": ["kind"],
            "additionalProperties": {"type": "integer"},
            "anyOf": [{"properties": {"n": {"type": "number"}}}, {"properties": {"s": STRING}}],
        }
    )
    rewrite = grammar_engine(schema)
    common = {"required": ["kind"], "additionalProperties": {"type": "integer"}}
    assert rewrite.schema["properties"]["item"] == {
        "anyOf": [
            {"type": "object", "properties": {"kind": STRING, "n": {"type": "integer"}}, **common},
            {"type": "object", "properties": {"kind": STRING, "s": False}, **common},
        ]
    }
    assert (rewrite.exact, notes(rewrite)) == (True, [])
    original = original_reading(schema)
    for item, valid in (({"kind": "k", "n": 1.5}, False), ({"kind": "k", "s": "x"}, False)):
        assert original.is_valid({"item": item}) is valid
        assert accepts("grammar_engine", schema, rewrite, {"item": item}) is valid
    assert accepts("grammar_engine", schema, rewrite, {"item": {"kind": "k", "n": 2}})


def test_a_closed_branch_forbids_the_names_only_the_object_beside_it_declares() -> None:
    schema = wrapped(
        {
            "type": "object",
            "properties": {"kind": STRING, "o": STRING},
            "required": ["kind"],
            "anyOf": [
                {
                    "properties": {"kind": {"const": "a"}, "x": STRING},
                    "additionalProperties": False,
                },
                {"properties": {"y": STRING}},
            ],
        }
    )
    rewrite = anthropic(schema)
    assert rewrite.schema["properties"]["item"]["anyOf"][0] == {
        "type": "object",
        "properties": {"kind": {"type": "string", "enum": ["a"]}, "x": STRING},
        "required": ["kind"],
        "additionalProperties": False,
    }
    assert (rewrite.exact, notes(rewrite)) == (True, [])
    original = original_reading(schema)
    # `o` is declared beside the union: branch `a`'s closure rejects it, and branch `y`
    # rejects kind `a` no more than it does `o`; so only the second branch may hold it.
    value = {"item": {"kind": "a", "o": "x", "x": "x"}}
    assert not original.is_valid(value)
    assert not accepts("anthropic", schema, rewrite, value)


@pytest.mark.parametrize("name", list(DIALECTS))
def test_a_union_in_an_all_of_part_of_a_closed_object_is_closed_too(name: str) -> None:
    inline = wrapped(
        {
            "type": "object",
            "properties": {"kind": STRING},
            "required": ["kind"],
            "additionalProperties": False,
            "allOf": [
                {
                    "anyOf": [
                        {"properties": {"n": {"type": "integer"}}},
                        {"properties": {"s": STRING}},
                    ]
                }
            ],
        }
    )
    referred = wrapped(
        {
            "type": "object",
            "properties": {"kind": STRING},
            "required": ["kind"],
            "additionalProperties": False,
            "allOf": [{"$ref": "#/$defs/U"}],
        },
        {
            "U": {
                "properties": {"n": {"type": "integer"}},
                "anyOf": [{"properties": {"s": STRING}}, {"properties": {"t": STRING}}],
            }
        },
    )
    for schema in (inline, referred):
        rewrite = DIALECTS[name](schema)
        original = original_reading(schema)
        assert not original.is_valid({"item": {"kind": "k", "n": 1}})
        assert not accepts(name, schema, rewrite, {"item": {"kind": "k", "n": 1}})
        assert original.is_valid({"item": {"kind": "k"}})
        assert accepts(name, schema, rewrite, {"item": {"kind": "k"}})
        assert (rewrite.exact, notes(rewrite)) == (True, [])


def test_a_name_the_patterns_may_take_is_merged_with_a_note() -> None:
    schema = wrapped(
        {
            "type": "object",
            "properties": {"kind": STRING},
            "patternProperties": {"^e": {"type": "integer"}},
            "additionalProperties": False,
            "anyOf": [
                {"properties": {"extra": {"type": "integer"}}},
                {"properties": {"zz": STRING}},
            ],
        }
    )
    merged = (
        "approximated",
        "/properties/item/anyOf",
        "the branches of the union at `/properties/item/anyOf` were merged with the object "
        "beside it into objects that accept keys some of them reject",
    )
    for dialect in DIALECTS.values():
        rewrite = dialect(schema)
        assert not rewrite.exact
        assert merged in notes(rewrite)


# 2. Work grows with the schema's size, not with the number of ways through it.


@pytest.fixture
def normalizations(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[int]]:
    """How many nodes the engine normalizes; more than 45,000 stops the rewrite."""
    count = [0]
    normalize = _engine.Engine.normalize

    def counted(self: _engine.Engine, node: dict[str, Any], pointer: str, **kw: Any) -> Any:
        count[0] += 1
        if count[0] > 45_000:
            raise AssertionError("normalized more than 45,000 nodes")
        return normalize(self, node, pointer, **kw)

    monkeypatch.setattr(_engine.Engine, "normalize", counted)
    yield count


def chain(levels: int, key: str) -> dict[str, Any]:
    """Definitions that each name the next twice in `key`."""
    defs: dict[str, Any] = {
        f"D{i}": {
            "type": "object",
            "properties": {f"p{i}": {"type": "integer"}},
            key: [{"$ref": f"#/$defs/D{i + 1}"}, {"$ref": f"#/$defs/D{i + 1}"}],
        }
        for i in range(levels)
    }
    defs[f"D{levels}"] = {"type": "object", "properties": {"leaf": STRING}}
    return {"$ref": "#/$defs/D0", "$defs": defs}


@pytest.mark.parametrize("name", list(DIALECTS))
def test_a_definition_named_twice_in_all_of_is_normalized_once(
    name: str, normalizations: list[int]
) -> None:
    rewrite = DIALECTS[name](chain(40, "allOf"))
    assert normalizations[0] <= 83  # the 41 definitions, each merged once, and the rewrite
    assert set(rewrite.schema["properties"]) == {f"p{i}" for i in range(40)} | {"leaf"}
    assert not any(TOO_LARGE in message for _, _, message in notes(rewrite))


@pytest.mark.parametrize("name", ["openai_strict", "grammar_engine"])
def test_unions_of_unions_stop_at_the_budget_with_a_note(
    name: str, normalizations: list[int]
) -> None:
    rewrite = DIALECTS[name](chain(20, "anyOf"))
    assert normalizations[0] <= _engine._BUDGET + _engine._PART_BUDGET
    assert not rewrite.exact
    assert any(TOO_LARGE in message for _, _, message in notes(rewrite))


def test_normalizing_counts_against_the_budget(monkeypatch: pytest.MonkeyPatch) -> None:
    """A chain of `allOf`s writes one node, but merges every definition: that is the work."""
    monkeypatch.setattr(_engine, "_PART_BUDGET", 30)
    defs: dict[str, Any] = {
        f"D{i}": {"type": "object", "allOf": [{"$ref": f"#/$defs/D{i + 1}"}]} for i in range(60)
    }
    defs["D60"] = {"properties": {"leaf": STRING}}
    rewrite = grammar_engine({"$ref": "#/$defs/D0", "$defs": defs})
    assert notes(rewrite) == [
        ("approximated", "/$defs/D31", f"the subschema at `/$defs/D31` {TOO_LARGE}"),
    ]
    assert rewrite.schema == {"type": "object"}


# 3. References resolved where the schema is used are not followed: removed, with a note.

DYNAMIC = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "type": "object",
    "properties": {"a": {"$dynamicRef": "#n"}},
    "required": ["a"],
    "additionalProperties": False,
    "$defs": {"n": {"$dynamicAnchor": "n", "type": "integer", "enum": [1, 2]}},
}
RECURSIVE = {
    "$schema": "https://json-schema.org/draft/2019-09/schema",
    "$recursiveAnchor": True,
    "type": "object",
    "properties": {"n": {"type": "integer"}, "child": {"$recursiveRef": "#"}},
    "required": ["n", "child"],
    "additionalProperties": False,
}
PROVIDERS = {
    "openai_strict": "OpenAI strict mode",
    "openai_strict_azure_legacy": "Azure OpenAI strict mode",
    "openai_strict_xai": "xAI strict mode",
    "anthropic": "Anthropic strict mode",
    "gemini_json_schema": "Gemini responseJsonSchema",
    "gemini_response_schema": "Gemini responseSchema",
    "grammar_engine": "the grammar",
    "llama_cpp": "the grammar",
}


@pytest.mark.parametrize("name", list(DIALECTS))
@pytest.mark.parametrize(
    ("schema", "key", "at"),
    [(DYNAMIC, "$dynamicRef", "/properties/a"), (RECURSIVE, "$recursiveRef", "/properties/child")],
    ids=["dynamicRef", "recursiveRef"],
)
def test_dynamic_references_are_removed_with_a_note(
    name: str, schema: dict[str, Any], key: str, at: str
) -> None:
    rewrite = DIALECTS[name](schema)
    removed = (
        "approximated",
        at,
        f"`{key}` was removed at `{at}`: {PROVIDERS[name]} does not follow dynamic references",
    )
    assert removed in notes(rewrite)
    assert not rewrite.exact
    assert key not in str(rewrite.schema)
