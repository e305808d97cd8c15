"""What extraction records claim on two OpenAI-compatible presets' schema dialects.

xAI anchors a `pattern` implicitly (providers-openai-family.md §6) where JSON Schema and the
type search for it: an unanchored one is sent with `.*` on its open ends, which on xAI (whose
`.` matches a line break) accepts exactly what the type does. Fireworks' grammar
(§11) documents `oneOf`, string and array lengths and `pattern` as not supported: its
dialect removes them, each with a note, and is approximate.
"""

from __future__ import annotations

import json
import re
from typing import Annotated, Any, Literal

import httpx2
import pytest
from pydantic import BaseModel, Field, StringConstraints, TypeAdapter, ValidationError

import allama
from allama import ChatRequest, ExtractionMode, Extractor, SchemaEnforcement
from allama.schema import type_schema
from allama.schema._dialects._openai_strict import openai_strict
from allama.transport import Transport


class Code(BaseModel):
    code: Annotated[str, StringConstraints(pattern=r"[0-9]{3}")]


def _xai(mode: ExtractionMode, answer: str) -> tuple[Any, dict[str, Any]]:
    """Extract `Code` from a mocked xAI answering `answer`: the result and the body sent."""
    sent: list[dict[str, Any]] = []

    def handler(request: httpx2.Request) -> httpx2.Response:
        body = json.loads(request.content)
        sent.append(body)
        message: dict[str, Any] = {"role": "assistant", "content": answer}
        if body.get("tools"):
            name = body["tools"][0]["function"]["name"]
            call = {"id": "c", "type": "function", "function": {"name": name, "arguments": answer}}
            message = {"role": "assistant", "content": None, "tool_calls": [call]}
        choice = {"index": 0, "message": message, "finish_reason": "stop"}
        usage = {"prompt_tokens": 3, "completion_tokens": 2, "total_tokens": 5}
        return httpx2.Response(200, json={"id": "x", "choices": [choice], "usage": usage})

    transport = Transport(
        client=httpx2.Client(transport=httpx2.MockTransport(handler)),
        async_client=httpx2.AsyncClient(transport=httpx2.MockTransport(handler)),
    )
    target = allama.provider("xai", api_key="k", transport=transport)
    request = ChatRequest("grok-4").user("the code is ID-123-x").with_option(mode)
    result = Extractor().extract(target, Code, request)
    assert len(sent) == 1
    return result, sent[0]


# ----- xAI: an unanchored pattern


@pytest.mark.parametrize("mode", [ExtractionMode.NATIVE, ExtractionMode.FORCED_TOOL])
def test_xai_is_sent_an_unanchored_pattern_as_the_search_it_is(mode: ExtractionMode) -> None:
    # The type takes "ID-123-x"; xAI, matching "[0-9]{3}" whole, could only write "123".
    assert Code(code="ID-123-x").code == "ID-123-x"
    result, body = _xai(mode, '{"code": "ID-123-x"}')
    if mode is ExtractionMode.NATIVE:
        schema = body["response_format"]["json_schema"]["schema"]
    else:
        schema = body["tools"][0]["function"]["parameters"]
    assert schema["properties"]["code"]["pattern"] == ".*[0-9]{3}.*"
    assert result.value == Code(code="ID-123-x")
    assert result.metadata.enforcement is SchemaEnforcement.EXACT
    assert result.response.warnings == ()


PATTERNS = [
    "[0-9]{3}",
    "^ab",
    "ab$",
    "^a|b$",
    "a|b",
    r"a\$",
    r"a\\$",
    "[$^]x",
    "(a|b)c",
    "",
]
VALUES = [
    "",
    "123",
    "ID-123-x",
    "12\n3",
    "x\n123\n",
    "ab",
    "xab",
    "abx",
    "a",
    "b",
    "xb",
    "bx",
    "a$",
    "xa$y",
    "a\\",
    "xa\\",
    "$x",
    "y^x",
    "ac",
    "zbcz",
    "ABC",
    "ABCD",
    "xABC",
]


def _xai_pattern(pattern: str) -> tuple[str, list[tuple[str, str, str]]]:
    """The pattern xAI's dialect sends for a string property with `pattern`, and its notes."""
    rewrite = openai_strict(
        {
            "type": "object",
            "properties": {"s": {"type": "string", "pattern": pattern}},
            "required": ["s"],
        },
        profile="xai",
    )
    notes = [(n.kind.value, n.pointer, n.message) for n in rewrite.notes]
    return rewrite.schema["properties"]["s"]["pattern"], notes


@pytest.mark.parametrize("pattern", PATTERNS)
def test_xai_matching_the_sent_pattern_whole_is_the_types_search(pattern: str) -> None:
    sent, notes = _xai_pattern(pattern)
    assert notes == []
    check = TypeAdapter(Annotated[str, StringConstraints(pattern=pattern)])
    for value in VALUES:
        try:
            check.validate_python(value)
            taken = True
        except ValidationError:
            taken = False
        # xAI matches the whole value, its `.` matching a line break too.
        assert (re.fullmatch(sent, value, re.DOTALL) is not None) == taken, (sent, value)


def test_xai_keeps_a_pattern_anchored_at_both_ends_as_it_is() -> None:
    for pattern in ("^[A-Z]{3}$", "^(?:a|b)$", "^a$|^b$"):
        assert _xai_pattern(pattern) == (pattern, [])
    assert _xai_pattern("^a$|b") == ("^a$|.*b.*", [])


def test_xai_says_a_pattern_with_an_anchor_inside_is_matched_whole() -> None:
    assert _xai_pattern("(^a|b)c") == (
        "(^a|b)c",
        [
            (
                "approximated",
                "/properties/s",
                "the `pattern` at `/properties/s` has a `^` or `$` inside it, and xAI strict "
                "mode anchors a pattern at both ends where the type searches for it: sent as "
                "it is, it refuses values the type takes",
            )
        ],
    )


def test_xai_still_says_a_dot_matches_a_line_break_in_a_rewritten_pattern() -> None:
    assert _xai_pattern("a.c") == (
        ".*a.c.*",
        [
            (
                "approximated",
                "/properties/s",
                "the `pattern` at `/properties/s` has `.`, which xAI strict mode lets match a "
                "line break: a value holding one passes it and fails the type",
            )
        ],
    )


# ----- Fireworks: what its grammar documents as not supported


class Cat(BaseModel):
    kind: Literal["cat"]


class Dog(BaseModel):
    kind: Literal["dog"]
    loud: bool


class Card(BaseModel):
    name: Annotated[str, StringConstraints(min_length=1, max_length=40, pattern=r"^[A-Z]")]
    tags: Annotated[list[str], Field(min_length=1, max_length=3)]
    pet: Annotated[Cat | Dog, Field(discriminator="kind")]


ROOT_NOTE = (
    "approximated",
    "/",
    "the schema at `/` is compiled by Fireworks' grammar, which documents only some of the "
    "keywords it enforces",
)


def test_fireworks_removes_what_it_documents_as_not_supported_and_says_so() -> None:
    from allama.schema._dialects import fireworks

    rewrite = fireworks(type_schema(Card).schema)
    props = rewrite.schema["properties"]
    assert props["name"] == {"title": "Name", "type": "string"}
    assert props["tags"] == {"items": {"type": "string"}, "title": "Tags", "type": "array"}
    # The discriminated union's `oneOf` (its branches disjoint) goes as an `anyOf`.
    assert "oneOf" not in json.dumps(rewrite.schema)
    assert len(props["pet"]["anyOf"]) == 2
    why = "Fireworks documents it as not supported"
    assert [(n.kind.value, n.pointer, n.message) for n in rewrite.notes] == [
        ROOT_NOTE,
        (
            "approximated",
            "/properties/name",
            f"`maxLength` was removed at `/properties/name`: {why}",
        ),
        (
            "approximated",
            "/properties/name",
            f"`minLength` was removed at `/properties/name`: {why}",
        ),
        ("approximated", "/properties/name", f"`pattern` was removed at `/properties/name`: {why}"),
        (
            "approximated",
            "/properties/tags",
            f"`maxItems` was removed at `/properties/tags`: {why}",
        ),
        (
            "approximated",
            "/properties/tags",
            f"`minItems` was removed at `/properties/tags`: {why}",
        ),
    ]


def test_fireworks_is_approximate_even_for_the_keywords_it_lists() -> None:
    from allama.schema._dialects import fireworks

    class Person(BaseModel):
        name: str
        year: int

    rewrite = fireworks(type_schema(Person).schema)
    assert rewrite.schema == type_schema(Person).schema
    assert not rewrite.exact
    assert [(n.kind.value, n.pointer, n.message) for n in rewrite.notes] == [ROOT_NOTE]


# ----- Fireworks end to end (needs the wiring in /tmp/wtf54-fireworks-wiring.patch)


def test_fireworks_json_schema_is_recorded_approximate_and_passes_the_floor() -> None:
    from tests._recording import provider

    class Person(BaseModel):
        name: str
        year: int

    message = {"role": "assistant", "content": '{"name": "Ada", "year": 1843}'}
    answer = {
        "id": "x",
        "choices": [{"index": 0, "message": message, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 3, "completion_tokens": 2, "total_tokens": 5},
    }
    target, recorder = provider("fireworks", (200, answer))
    request = (
        ChatRequest("accounts/fireworks/models/llama-v3p1-70b-instruct")
        .user("x")
        .with_option(ExtractionMode.NATIVE)
    )
    result = Extractor(min_enforcement=SchemaEnforcement.APPROXIMATE).extract(
        target, Person, request
    )
    assert result.value == Person(name="Ada", year=1843)
    assert result.metadata.enforcement is SchemaEnforcement.APPROXIMATE
    assert [w.message for w in result.response.warnings] == [
        "the response format `person` was approximated: " + ROOT_NOTE[2]
    ]
    sent = recorder.bodies[0]["response_format"]["json_schema"]
    assert sent["schema"] == type_schema(Person).schema


def test_fireworks_is_not_sent_what_it_does_not_support() -> None:
    from tests._recording import provider

    card = {"name": "A", "tags": ["t"], "pet": {"kind": "cat"}}
    message = {"role": "assistant", "content": json.dumps(card)}
    answer = {
        "id": "x",
        "choices": [{"index": 0, "message": message, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 3, "completion_tokens": 2, "total_tokens": 5},
    }
    target, recorder = provider("fireworks", (200, answer))
    request = (
        ChatRequest("accounts/fireworks/models/llama-v3p1-70b-instruct")
        .user("x")
        .with_option(ExtractionMode.NATIVE)
    )
    result = Extractor().extract(target, Card, request)
    assert result.metadata.enforcement is SchemaEnforcement.APPROXIMATE
    sent = json.dumps(recorder.bodies[0]["response_format"])
    for keyword in ("oneOf", "minLength", "maxLength", "minItems", "maxItems", "pattern"):
        assert f'"{keyword}"' not in sent
