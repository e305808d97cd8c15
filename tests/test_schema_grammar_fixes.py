"""What the grammar dialects send, and note, for tuples, unbounded numbers and `$schema`.

llama.cpp's converter reads `items` before `prefixItems` and `prefixItems` alone as a tuple
of exactly its length, and writes an integer with no bound on a side (or a `number`) with at
most 16 digits: the `llama_cpp` dialect (`local`, `llama-cpp`, Ollama) must never send what
the converter reads narrower than the schema without saying so. The grammar dialects write
their body in 2020-12's forms, so they send no `$schema` naming an older draft. The last
tests run the real server (`xllamacpp`) on the tiny model of `tests/_tiny_gguf.py`."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from pydantic import BaseModel

import allama
from allama import ChatRequest, ResponseFormat
from allama.schema import grammar_engine
from allama.schema._dialects._grammar import fireworks
from allama.schema._dialects._llama_cpp import llama_cpp
from allama.types import FinishReason, WarningKind

INT64 = 2**63 - 2
"""The widest bound llama.cpp's converter reads (int64's own ends stand for no bound)."""
BOUNDED = {"type": "integer", "minimum": -INT64, "maximum": INT64}
NARROWED = (
    "`integer` was narrowed at `{at}`: llama.cpp's grammar writes integers only from "
    "-9223372036854775806 to 9223372036854775806 (64 bits; bounds within them keep it exact)"
)
TUPLE = (
    "`prefixItems` is not enforced by the grammar at `{at}`: llama.cpp reads it as a tuple of "
    "exactly its length, so each item may match any position's schema"
)


def _messages(schema: dict[str, Any]) -> list[tuple[str, str]]:
    return [(n.kind.value, n.message) for n in llama_cpp(schema).notes]


def _converter_reads(sent: dict[str, Any], value: list[Any]) -> bool:
    """Whether llama.cpp's converter lets an array through: `items` when present (every item,
    with `minItems`/`maxItems`), else `prefixItems` as a tuple of exactly its length."""
    if "items" in sent:
        low, high = sent.get("minItems", 0), sent.get("maxItems", len(value))
        item = jsonschema.Draft202012Validator(sent["items"])
        return low <= len(value) <= high and all(item.is_valid(v) for v in value)
    tuple_ = sent["prefixItems"]
    return len(value) == len(tuple_) and all(
        jsonschema.Draft202012Validator(sub).is_valid(v)
        for sub, v in zip(tuple_, value, strict=True)
    )


# 1. Tuples: never read narrower than the schema.

TUPLES: list[tuple[dict[str, Any], dict[str, Any], list[tuple[str, str]]]] = [
    (
        # An integer, then strings: read as `items`, every item had to be a string.
        {
            "type": "array",
            "prefixItems": [{"type": "integer", "minimum": 0, "maximum": 9}],
            "items": {"type": "string"},
            "minItems": 1,
        },
        {
            "type": "array",
            "items": {
                "anyOf": [{"type": "integer", "minimum": 0, "maximum": 9}, {"type": "string"}]
            },
            "minItems": 1,
        },
        [("approximated", TUPLE.format(at="/"))],
    ),
    (
        # Any array whose first item, if any, is a boolean: read as exactly one item.
        {"type": "array", "prefixItems": [{"type": "boolean"}]},
        {"type": "array", "items": {}},
        [("approximated", TUPLE.format(at="/"))],
    ),
    (
        # Up to two items, a string then a boolean.
        {"type": "array", "prefixItems": [{"type": "string"}, {"type": "boolean"}], "items": False},
        {
            "type": "array",
            "items": {"anyOf": [{"type": "string"}, {"type": "boolean"}]},
            "maxItems": 2,
        },
        [("approximated", TUPLE.format(at="/"))],
    ),
    (
        # Every position the same schema: exact as `items`.
        {"type": "array", "prefixItems": [{"type": "string"}], "items": {"type": "string"}},
        {"type": "array", "items": {"type": "string"}},
        [],
    ),
    (
        # No item after a position that accepts nothing: at most one string, exactly.
        {"type": "array", "prefixItems": [{"type": "string"}, False]},
        {"type": "array", "items": {"type": "string"}, "maxItems": 1},
        [],
    ),
]


@pytest.mark.parametrize(("schema", "sent", "notes"), TUPLES)
def test_a_tuple_is_sent_as_items_the_converter_reads_no_narrower(
    schema: dict[str, Any], sent: dict[str, Any], notes: list[tuple[str, str]]
) -> None:
    rewrite = llama_cpp(schema)
    assert rewrite.schema == sent
    assert [(n.kind.value, n.message) for n in rewrite.notes] == notes
    meant = jsonschema.Draft202012Validator(schema)
    probes: list[list[Any]] = [[], [0], ["a"], [True], [0, "x"], ["a", True], ["a", True, 1]]
    for value in probes:
        if meant.is_valid(value):
            assert _converter_reads(sent, value), value  # never narrower
        elif not notes:
            assert not _converter_reads(sent, value), value  # and exact when nothing is noted


def test_a_tuple_of_one_length_is_sent_as_the_tuple() -> None:
    """`tuple[str, bool]`: the converter's reading of `prefixItems` is exactly right."""

    class Pair(BaseModel):
        pair: tuple[str, bool]

    rewrite = llama_cpp(Pair.model_json_schema())
    assert rewrite.schema["properties"]["pair"] == {
        "maxItems": 2,
        "minItems": 2,
        "prefixItems": [{"type": "string"}, {"type": "boolean"}],
        "title": "Pair",
        "type": "array",
    }
    assert (rewrite.exact, rewrite.notes) == (True, ())
    closed = {"type": "array", "prefixItems": [{"type": "string"}], "items": False, "minItems": 1}
    assert llama_cpp(closed).schema == {
        "type": "array",
        "prefixItems": [{"type": "string"}],
        "minItems": 1,
        "maxItems": 1,
    }
    assert llama_cpp(closed).notes == ()


def test_a_draft_7_tuple_is_read_as_its_2020_12_form() -> None:
    schema = {
        "$schema": "http://json-schema.org/draft-07/schema#",
        "type": "array",
        "items": [{"type": "string"}],
        "additionalItems": {"type": "boolean"},
    }
    rewrite = llama_cpp(schema)
    assert rewrite.schema == {
        "type": "array",
        "items": {"anyOf": [{"type": "string"}, {"type": "boolean"}]},
    }
    assert [n.message for n in rewrite.notes] == [TUPLE.format(at="/")]


def test_the_generic_grammar_still_notes_the_tuple_it_sends() -> None:
    schema = {"type": "array", "prefixItems": [{"type": "string"}], "items": {"type": "boolean"}}
    rewrite = grammar_engine(schema)
    assert rewrite.schema == schema
    assert [n.message for n in rewrite.notes] == [
        "`prefixItems` is not enforced by the grammar at `/`"
    ]


# 2. Integers and numbers: every digit the type allows within 64 bits, and the rest said.


class Tweet(BaseModel):
    tweet_id: int
    amount: float


def test_an_integer_without_bounds_gets_the_widest_the_converter_reads_and_says_so() -> None:
    rewrite = llama_cpp(Tweet.model_json_schema())
    assert rewrite.schema["properties"] == {
        "tweet_id": {"title": "Tweet Id", **BOUNDED},
        "amount": {"title": "Amount", "type": "number"},
    }
    # A `number` past 16 digits either side of the point is written with an exponent, which
    # the grammar takes: no value is lost, and nothing is said of it.
    assert [(n.pointer, n.kind, n.message) for n in rewrite.notes] == [
        (
            "/properties/tweet_id",
            WarningKind.APPROXIMATED,
            NARROWED.format(at="/properties/tweet_id"),
        ),
    ]
    assert not rewrite.exact


@pytest.mark.parametrize(
    ("node", "sent"),
    [
        ({"type": "integer", "minimum": 5}, {"type": "integer", "minimum": 5, "maximum": INT64}),
        (
            {"type": ["integer", "null"], "maximum": -1},
            {"type": ["integer", "null"], "maximum": -1, "minimum": -INT64},
        ),
        (
            {"type": "integer", "exclusiveMaximum": 10**30},
            {"type": "integer", "maximum": INT64, "minimum": -INT64},
        ),
    ],
)
def test_each_side_without_a_64_bit_bound_gets_one(
    node: dict[str, Any], sent: dict[str, Any]
) -> None:
    rewrite = llama_cpp(node)
    assert rewrite.schema == sent
    assert NARROWED.format(at="/") in [n.message for n in rewrite.notes]


@pytest.mark.parametrize(
    "node",
    [
        BOUNDED,
        {"type": "integer", "minimum": 0, "maximum": 10},
        {"type": "integer", "minimum": -INT64, "exclusiveMaximum": INT64 + 1},
    ],
)
def test_an_integer_within_64_bits_on_both_sides_is_sent_as_it_is(node: dict[str, Any]) -> None:
    rewrite = llama_cpp(node)
    assert (rewrite.schema, rewrite.exact, rewrite.notes) == (node, True, ())


def test_an_enum_of_numbers_is_written_as_listed() -> None:
    schema = {"type": "number", "enum": [1.5, 123456789012345678.5]}
    assert (llama_cpp(schema).schema, llama_cpp(schema).notes) == (schema, ())


# 3. `$schema`: the body is written in 2020-12's forms, so no older draft is named.


def test_the_grammar_dialects_name_no_draft() -> None:
    schema = {
        "$schema": "http://json-schema.org/draft-04/schema#",
        "type": "object",
        "properties": {
            "n": {"type": "integer", "minimum": 0, "exclusiveMinimum": True, "maximum": 9},
            "t": {"type": "array", "items": [{"type": "boolean"}], "additionalItems": False},
        },
        "required": ["n", "t"],
    }
    for dialect in (grammar_engine, fireworks, llama_cpp):
        sent = dialect(schema).schema
        assert "$schema" not in sent, dialect.__name__
        # What it sends means what the caller's draft-04 schema meant, read as 2020-12.
        validator = jsonschema.Draft202012Validator(sent)
        assert validator.is_valid({"n": 1, "t": [True]}), dialect.__name__
        assert not validator.is_valid({"n": 0, "t": [True]}), dialect.__name__
    assert grammar_engine(schema).schema["properties"]["t"] == {
        "type": "array",
        "prefixItems": [{"type": "boolean"}],
        "items": False,
    }


# Against the real server


@pytest.fixture(scope="module")
def local(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    pytest.importorskip("xllamacpp", reason="the llama.cpp engine is not installed")
    pytest.importorskip("gguf", reason="the tiny test models need the gguf package")
    from _tiny_gguf import write_tiny_model

    path: Path = write_tiny_model(tmp_path_factory.mktemp("gguf") / "tiny.gguf").path
    with allama.provider("local", model=path) as provider:
        yield provider.start()  # type: ignore[attr-defined]


def _ask(local: Any, schema: dict[str, Any], bias: list[Any] | None = None) -> Any:
    request = (
        ChatRequest("tiny")
        .user("Make a record.")
        .with_max_output_tokens(80)
        .with_temperature(0)
        .with_response_format(
            ResponseFormat(type="json_schema", json_schema=schema, name="probe", strict=True)
        )
    )
    if bias is not None:
        request = request.with_option_json("openai_compat", {"logit_bias": bias})
    response = local.chat(request)
    assert response.finish_reason == FinishReason.STOP
    return json.loads(response.text() or "")


@pytest.mark.local
def test_the_server_writes_an_integer_of_19_digits(local: Any) -> None:
    """Pushed to write digits, a plain integer stopped at 16 (1234567890123456789 came back
    1234567890123456); with 64-bit bounds it runs to int64's 19, and no further."""
    schema = {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}
    bias = [["<|im_end|>", -60], ["}", -60], [" ", -60], ["\n", -60], ["-", -60], ["0", -60]]
    value = _ask(local, schema, [*bias, ["1", 8]])
    assert value == {"n": 1111111111111111111}
    assert len(str(value["n"])) == 19


@pytest.mark.local
def test_the_server_can_answer_a_tuple_beside_items_validly(local: Any) -> None:
    """An integer, then strings: read as `items`, every item had to be a string, so no
    answer was valid; kept from writing a string, the model now writes the integer."""
    schema = {
        "type": "object",
        "properties": {
            "t": {
                "type": "array",
                "prefixItems": [{"type": "integer"}],
                "items": {"type": "string"},
                "minItems": 1,
            }
        },
        "required": ["t"],
    }
    value = _ask(local, schema, [['"', -60]])
    assert value == {"t": [0]}
    jsonschema.validate(value, schema)
