"""The rewriting engine on what a probe found: an object's `additionalProperties` beside a
union, whose branches declare names of their own, merged as if it covered them (wider, said
exact); normalizing the same definition again wherever it is reached (time growing with the
number of paths, not the size); `$dynamicRef` and `$recursiveRef` dropped without a note;
merging `allOf` parts (or a union's branches with the node beside it) put one part's `items`
beside another's tuple, where it applies to other positions (said exact); and
`unevaluatedProperties` beside `properties` sent as a closed object, where the library reads
it open; and an enum listing `true` twice (an alias) sent as every boolean, said exact."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from typing import Any

import pytest

from _schema_support import original_reading, rewritten_reading
from allama.schema import (
    anthropic,
    find_undeclared_key,
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


def union_notes(name: str, at: str) -> tuple[bool, list[tuple[str, str, str]]]:
    """What an exact union rewrites to, by dialect: Gemini's `responseSchema` sends it as an
    `anyOf`, which Google does not list as honoured there (a hint, approximate)."""
    if name != "gemini_response_schema":
        return True, []
    hint = (
        f"`anyOf` is not enforced by Gemini responseSchema at `{at}`: Google does not list "
        "it as honoured (it is sent, as a hint)"
    )
    return False, [("approximated", at, hint)]


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
    assert (rewrite.exact, notes(rewrite)) == union_notes(name, "/properties/item")


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
        assert (rewrite.exact, notes(rewrite)) == union_notes(name, "/properties/item")


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


# 4. Item keywords merge position by position: a tuple applies to its own positions, the
# `items` beside it (`additionalItems` beside a list `items`) to the positions after them.

DRAFT_2020 = "https://json-schema.org/draft/2020-12/schema"
DRAFT_7 = "http://json-schema.org/draft-07/schema#"
TUPLES = ["gemini_json_schema", "grammar_engine", "llama_cpp"]
"""The dialects that send tuples (`prefixItems`); the grammar's note that it does not
enforce them is its own, not the merge's. llama.cpp's converter reads a tuple as one of
exactly its length, and not at all beside `items`: its dialect sends the merged tuple as
`items` unless the schema allows that length alone."""
INTEGER = {"type": "integer"}
AT_LEAST_5 = {"type": "integer", "minimum": 5}
INT64 = 2**63 - 2


def narrowed(*pointers: str) -> list[tuple[str, str, str]]:
    """llama.cpp's note on an integer without both bounds, which it sends bounded at 64 bits."""
    return [
        (
            "approximated",
            at,
            f"`integer` was narrowed at `{at}`: llama.cpp's grammar writes integers only from "
            f"{-INT64} to {INT64} (64 bits; bounds within them keep it exact)",
        )
        for at in pointers
    ]


def in_draft(draft: str, item: dict[str, Any]) -> dict[str, Any]:
    return {"$schema": draft, **wrapped(item)}


def tuple_notes(name: str, *pointers: str, key: str = "prefixItems") -> list[tuple[str, str, str]]:
    """What a dialect says of the tuples it sends, whatever was merged."""
    if name == "gemini_json_schema":
        return []
    what = "`prefixItems` is" if key == "prefixItems" else "tuple `items` are"
    return [
        ("approximated", at, f"{what} not enforced by the grammar at `{at}`") for at in pointers
    ]


def agrees(name: str, schema: dict[str, Any], rewrite: Rewrite, cases: dict[Any, bool]) -> None:
    original = original_reading(schema)
    for item, valid in cases.items():
        value = {"item": list(item)}
        assert original.is_valid(value) is valid, item
        assert accepts(name, schema, rewrite, value) is valid, (name, item)


@pytest.mark.parametrize("name", TUPLES)
def test_an_all_items_part_applies_to_the_other_parts_tuple_too(name: str) -> None:
    schema = in_draft(
        DRAFT_2020, {"type": "array", "allOf": [{"prefixItems": [INTEGER]}, {"items": AT_LEAST_5}]}
    )
    rewrite = DIALECTS[name](schema)
    if name == "llama_cpp":
        # Every position takes the same schema: sent as `items`, which means the same.
        assert rewrite.schema["properties"]["item"] == {
            "type": "array",
            "items": {**AT_LEAST_5, "maximum": INT64},
        }
        assert notes(rewrite) == narrowed(
            "/properties/item/items", "/properties/item/prefixItems/0"
        )
    else:
        assert rewrite.schema["properties"]["item"] == {
            "type": "array",
            "prefixItems": [AT_LEAST_5],
            "items": AT_LEAST_5,
        }
        assert notes(rewrite) == tuple_notes(name, "/properties/item")
    assert rewrite.exact is (name == "gemini_json_schema")
    agrees(name, schema, rewrite, {(1,): False, (5,): True, (5, 6): True, (5, 1): False})


@pytest.mark.parametrize("name", TUPLES)
def test_items_beside_a_union_apply_to_a_branch_tuple_too(name: str) -> None:
    schema = in_draft(
        DRAFT_2020, {"type": "array", "items": AT_LEAST_5, "anyOf": [{"prefixItems": [INTEGER]}]}
    )
    rewrite = DIALECTS[name](schema)
    if name == "llama_cpp":
        assert rewrite.schema["properties"]["item"] == {
            "anyOf": [{"type": "array", "items": {**AT_LEAST_5, "maximum": INT64}}]
        }
        assert notes(rewrite) == narrowed(
            "/properties/item/anyOf/0/items", "/properties/item/anyOf/0/prefixItems/0"
        )
    else:
        assert rewrite.schema["properties"]["item"] == {
            "anyOf": [{"type": "array", "items": AT_LEAST_5, "prefixItems": [AT_LEAST_5]}]
        }
        assert notes(rewrite) == tuple_notes(name, "/properties/item/anyOf/0")
    agrees(name, schema, rewrite, {(1,): False, (5,): True, (5, 1): False})


@pytest.mark.parametrize("name", TUPLES)
@pytest.mark.parametrize("extra", [STRING, False], ids=["schema", "false"])
def test_additional_items_beside_no_tuple_of_its_own_is_ignored(name: str, extra: Any) -> None:
    """Draft 7: `additionalItems` means something only beside a list `items` in its own
    schema; merged beside another part's tuple it would apply after it."""
    schema = in_draft(
        DRAFT_7, {"type": "array", "allOf": [{"items": [INTEGER]}, {"additionalItems": extra}]}
    )
    rewrite = DIALECTS[name](schema)
    if name == "llama_cpp":
        # Items of any length after an integer: no `items` the converter reads says so.
        assert rewrite.schema["properties"]["item"] == {"type": "array", "items": {}}
        at = "/properties/item"
        assert notes(rewrite) == [
            (
                "approximated",
                at,
                f"`prefixItems` is not enforced by the grammar at `{at}`: llama.cpp reads it as "
                "a tuple of exactly its length, so each item may match any position's schema",
            ),
            *narrowed("/properties/item/prefixItems/0"),
        ]
        agrees(name, schema, rewrite, {(1, 2): True, (1, "a"): True})
        return
    assert rewrite.schema["properties"]["item"] == {"type": "array", "prefixItems": [INTEGER]}
    assert notes(rewrite) == tuple_notes(name, "/properties/item", key="items")
    agrees(name, schema, rewrite, {(1, 2): True, (1, "a"): True, ("a",): False})


def test_two_tuples_merge_position_by_position() -> None:
    schema = in_draft(
        DRAFT_2020,
        {
            "type": "array",
            "allOf": [
                {"prefixItems": [INTEGER, STRING]},
                {"prefixItems": [{"minimum": 3}], "items": False},
            ],
        },
    )
    rewrite = grammar_engine(schema)
    assert rewrite.schema["properties"]["item"] == {
        "type": "array",
        "prefixItems": [{"type": "integer", "minimum": 3}],
        "items": False,
    }
    assert notes(rewrite) == tuple_notes("grammar_engine", "/properties/item")
    agrees("grammar_engine", schema, rewrite, {(3,): True, (1,): False, (3, "a"): False})


def test_a_draft_7_tuple_merged_with_a_longer_one_keeps_its_additional_items() -> None:
    schema = in_draft(
        DRAFT_7,
        {
            "type": "array",
            "allOf": [
                {"items": [INTEGER], "additionalItems": False},
                {"items": [INTEGER, STRING]},
            ],
        },
    )
    rewrite = grammar_engine(schema)
    assert rewrite.schema["properties"]["item"] == {
        "type": "array",
        "prefixItems": [INTEGER],
        "items": False,
    }
    assert notes(rewrite) == tuple_notes("grammar_engine", "/properties/item", key="items")
    agrees("grammar_engine", schema, rewrite, {(1,): True, (1, "a"): False, (1, 2): False})


# 5. `unevaluatedProperties` beside `properties` (and nothing else that evaluates keys) is
# the `additionalProperties` it means: open to the keys it accepts, as the library reads it.

STRICT = ["openai_strict", "anthropic"]
SENDERS = [*STRICT, "gemini_json_schema", "grammar_engine", "llama_cpp"]


def open_to(name: str, at: str) -> list[tuple[str, str, str]]:
    """What a strict dialect says of an object open to other keys; the others send it."""
    if name not in STRICT:
        return []
    provider = PROVIDERS[name]
    return [
        (
            "unsupported",
            at,
            f"the subschema at `{at}` is an object open to other keys, "
            f"which {provider} cannot enforce",
        )
    ]


@pytest.mark.parametrize("name", SENDERS)
def test_unevaluated_properties_beside_properties_leaves_the_object_open(name: str) -> None:
    item = {
        "type": "object",
        "properties": {"a": {"type": "integer"}},
        "required": ["a"],
        "unevaluatedProperties": STRING,
    }
    schema = wrapped(item)
    rewrite = DIALECTS[name](schema)
    llama = name == "llama_cpp"
    assert rewrite.schema["properties"]["item"] == {
        "type": "object",
        "properties": {"a": {**INTEGER, "minimum": -INT64, "maximum": INT64} if llama else INTEGER},
        "required": ["a"],
        "additionalProperties": STRING,
    }
    at = "/properties/item/properties/a"
    assert notes(rewrite) == open_to(name, "/properties/item") + (narrowed(at) if llama else [])
    assert rewrite.exact is (name not in STRICT and not llama)
    assert find_undeclared_key({"a": 1, "b": "x"}, item) is None
    original = original_reading(schema)
    for value, valid in (({"a": 1, "b": "x"}, True), ({"a": 1, "b": 2}, False)):
        assert original.is_valid({"item": value}) is valid
        assert accepts(name, schema, rewrite, {"item": value}) is valid


@pytest.mark.parametrize("name", ["gemini_json_schema", "grammar_engine", "llama_cpp"])
def test_unevaluated_properties_true_leaves_the_object_open(name: str) -> None:
    schema = wrapped({"type": "object", "properties": {"a": STRING}, "unevaluatedProperties": True})
    rewrite = DIALECTS[name](schema)
    assert rewrite.schema["properties"]["item"]["additionalProperties"] in (True, {})
    assert (rewrite.exact, notes(rewrite)) == (True, [])
    assert accepts(name, schema, rewrite, {"item": {"a": "x", "b": [1]}})


@pytest.mark.parametrize("name", SENDERS)
def test_unevaluated_properties_sees_the_keys_of_the_schema_it_refers_to(name: str) -> None:
    schema = wrapped(
        {"$ref": "#/$defs/B", "properties": {"b": STRING}, "unevaluatedProperties": False},
        {"B": {"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"]}},
    )
    rewrite = DIALECTS[name](schema)
    item = rewrite.schema["properties"]["item"]
    assert (item["additionalProperties"], set(item["properties"])) == (False, {"a", "b"})
    if name == "llama_cpp":
        assert notes(rewrite) == narrowed("/properties/item/properties/a")
    else:
        assert (rewrite.exact, notes(rewrite)) == (True, [])
    original = original_reading(schema)
    for value, valid in (({"a": 1, "b": "x"}, True), ({"a": 1, "c": 1}, False)):
        assert original.is_valid({"item": value}) is valid
        assert accepts(name, schema, rewrite, {"item": value}) is valid


def test_unevaluated_properties_beside_a_union_sees_the_branch_keys() -> None:
    schema = wrapped(
        {
            "type": "object",
            "properties": {"kind": STRING},
            "required": ["kind"],
            "unevaluatedProperties": {"type": "integer"},
            "anyOf": [
                {"properties": {"kind": {"const": "a"}, "x": STRING}},
                {"properties": {"kind": {"const": "b"}}},
            ],
        }
    )
    rewrite = grammar_engine(schema)
    assert [b["additionalProperties"] for b in rewrite.schema["properties"]["item"]["anyOf"]] == [
        {"type": "integer"},
        {"type": "integer"},
    ]
    assert (rewrite.exact, notes(rewrite)) == (True, [])
    original = original_reading(schema)
    for value, valid in (
        ({"kind": "a", "x": "s"}, True),
        ({"kind": "b", "x": "s"}, False),
        ({"kind": "b", "x": 1}, True),
    ):
        assert original.is_valid({"item": value}) is valid
        assert accepts("grammar_engine", schema, rewrite, {"item": value}) is valid


def test_unevaluated_properties_beside_overlapping_branches_is_approximate() -> None:
    at = "/properties/item"
    schema = wrapped(
        {
            "type": "object",
            "unevaluatedProperties": False,
            "anyOf": [{"properties": {"x": STRING}}, {"properties": {"w": STRING}}],
        }
    )
    rewrite = grammar_engine(schema)
    assert notes(rewrite) == [
        (
            "approximated",
            at,
            f"`unevaluatedProperties` at `{at}` went into each branch of the union beside it, "
            "where it sees that branch's keys only: a value matching several branches may be "
            "refused",
        )
    ]


def test_unevaluated_properties_in_a_part_is_approximate_once_merged() -> None:
    """The part's `unevaluatedProperties` saw its own keys only, not the other part's `a`."""
    schema = wrapped(
        {
            "type": "object",
            "allOf": [
                {"properties": {"a": {"type": "integer"}}},
                {"unevaluatedProperties": STRING},
            ],
        }
    )
    wider = {"item": {"a": 1, "b": "x"}}  # `a` fails the second part's `string`
    assert not original_reading(schema).is_valid(wider)
    for name in SENDERS:
        rewrite = DIALECTS[name](schema)
        assert not rewrite.exact
        assert accepts(name, schema, rewrite, wider)


@pytest.mark.parametrize("name", ["grammar_engine", "anthropic"])
def test_unevaluated_properties_beside_conditionals_is_removed_and_the_object_open(
    name: str,
) -> None:
    at = "/properties/item"
    schema = wrapped(
        {
            "type": "object",
            "properties": {"a": {"type": "integer"}},
            "unevaluatedProperties": STRING,
            "if": {"required": ["a"]},
            "then": {"properties": {"t": {"type": "integer"}}},
        }
    )
    rewrite = DIALECTS[name](schema)
    removed = (
        "approximated",
        at,
        f"`unevaluatedProperties` was removed at `{at}`: `if`, `then` beside it evaluate keys "
        "it would skip",
    )
    assert removed in notes(rewrite)
    assert not rewrite.exact
    assert original_reading(schema).is_valid({"item": {"a": 1, "t": 1}})
    assert accepts(name, schema, rewrite, {"item": {"a": 1, "t": 1}})


def test_unevaluated_properties_before_2019_is_no_keyword_and_leaves_the_object_open() -> None:
    schema = in_draft(
        DRAFT_7,
        {"type": "object", "properties": {"a": STRING}, "unevaluatedProperties": STRING},
    )
    rewrite = grammar_engine(schema)
    assert rewrite.schema["properties"]["item"] == {
        "type": "object",
        "properties": {"a": STRING},
        "additionalProperties": {},
    }
    assert (rewrite.exact, notes(rewrite)) == (True, [])
    assert accepts("grammar_engine", schema, rewrite, {"item": {"a": "x", "b": 1}})


# 6. An enum of booleans counts its values, not its entries: an alias lists `true` twice.


@pytest.mark.parametrize("name", ["gemini_json_schema", "gemini_response_schema"])
def test_a_boolean_listed_twice_is_not_every_boolean(name: str) -> None:
    """`class Consent(Enum): GIVEN = True; YES = True` lists `[true, true]`: sent as the
    whole type, which lets `false` through, it is approximate with a note."""
    at = "/properties/item/enum"
    schema = wrapped({"type": "boolean", "enum": [True, True]})
    rewrite = DIALECTS[name](schema)
    provider = (
        "Gemini responseJsonSchema" if name == "gemini_json_schema" else "Gemini responseSchema"
    )
    assert notes(rewrite) == [
        (
            "approximated",
            at,
            f"`enum` at `{at}` was widened to the types of values {provider} cannot list",
        )
    ]
    assert not rewrite.exact
    assert not original_reading(schema).is_valid({"item": False})
    assert accepts(name, schema, rewrite, {"item": False})
    # Both values, however often listed, are every boolean: exact.
    both = DIALECTS[name](wrapped({"type": "boolean", "enum": [True, False, True]}))
    assert (both.exact, notes(both)) == (True, [])
