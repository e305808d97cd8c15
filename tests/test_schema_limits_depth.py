"""Provider size limits: the nesting depth counted the same whatever the order of fields,
notes that say where a limit is passed and what to change (and whose limit it is, assumed
for xAI and Groq), and xAI's own bounds kept."""

from __future__ import annotations

import json
from typing import Any

import httpx2
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import BaseModel, Field, HttpUrl

import allama
from allama import ChatRequest, ExtractionMode, Extractor, SchemaEnforcement
from allama.schema._dialects._openai_strict import openai_strict
from allama.schema._limits import measure
from allama.transport import Transport
from allama.types import ResponseFormat


def _send(name: str, model: str, tp: Any, answer: str) -> tuple[Any, dict[str, Any]]:
    """Extract `tp` natively from a mocked provider answering `answer`: the result and the
    request body sent."""
    sent: list[dict[str, Any]] = []

    def handler(request: httpx2.Request) -> httpx2.Response:
        sent.append(json.loads(request.content))
        message = {"role": "assistant", "content": answer}
        body = {
            "id": "c1",
            "model": model,
            "choices": [{"index": 0, "message": message, "finish_reason": "stop"}],
            "usage": {"prompt_tokens": 3, "completion_tokens": 2, "total_tokens": 5},
        }
        return httpx2.Response(200, json=body)

    transport = Transport(
        client=httpx2.Client(transport=httpx2.MockTransport(handler)),
        async_client=httpx2.AsyncClient(transport=httpx2.MockTransport(handler)),
    )
    target = allama.provider(name, api_key="k", base_url="http://test", transport=transport)
    request = ChatRequest(model).user("x").with_option(ExtractionMode.NATIVE)
    result = Extractor().extract(target, tp, request)
    assert len(sent) == 1
    return result, sent[0]


def _messages(result: Any) -> list[str]:
    return [warning.message for warning in result.metadata.degradations]


# ----- the depth, whichever way a recursion is come into


def _obj(props: dict[str, Any]) -> dict[str, Any]:
    return {"type": "object", "properties": props, "required": list(props)}


def _chain(levels: int, leaf: Any) -> Any:
    for _ in range(levels):
        leaf = _obj({"n": leaf})
    return leaf


def _reached_twice(first: str) -> dict[str, Any]:
    # A and B recur through each other; C, as deep as A, leads into B too.
    defs = {
        "A": _chain(5, {"$ref": "#/$defs/B"}),
        "B": _obj({"back": {"anyOf": [{"$ref": "#/$defs/A"}, {"type": "null"}]}}),
        "C": _chain(5, {"$ref": "#/$defs/B"}),
    }
    order = ["a", "c"] if first == "a" else ["c", "a"]
    props = {name: {"$ref": f"#/$defs/{name.upper()}"} for name in order}
    return {**_obj(props), "$defs": defs}


def test_a_recursion_is_counted_once_from_either_side() -> None:
    # root, C's 5, B, A's 5: the path into the recursion through C goes round it once.
    deepest = (
        "/properties/c",
        "/$defs/C/properties/n/properties/n/properties/n/properties/n/properties/n",
        "/$defs/B/properties/back/anyOf/0",
        "/$defs/A/properties/n/properties/n/properties/n/properties/n",
    )
    for first in ("a", "c"):
        size = measure(_reached_twice(first))
        assert (size.depth, size.deepest) == (12, deepest)
        rewrite = openai_strict(_reached_twice(first))
        assert not rewrite.strict_representable
        assert [note.message for note in rewrite.notes] == [
            f"the object at `{deepest[-1]}` is 12 levels deep (through `{deepest[0]}`, "
            f"`{deepest[1]}`, `{deepest[2]}`), more than the 10 OpenAI strict mode allows: "
            "nest fewer objects along that path"
        ]


class A5(BaseModel):
    b: B


class A4(BaseModel):
    n: A5


class A3(BaseModel):
    n: A4


class A2(BaseModel):
    n: A3


class A1(BaseModel):
    n: A2


class B(BaseModel):
    back: A1 | None


class C5(BaseModel):
    b: B


class C4(BaseModel):
    n: C5


class C3(BaseModel):
    n: C4


class C2(BaseModel):
    n: C3


class C1(BaseModel):
    n: C2


for _model in (A5, A4, A3, A2, A1, B, C5, C4, C3, C2, C1):
    _model.model_rebuild()


class AFirst(BaseModel):
    a: A1
    c: C1


class CFirst(BaseModel):
    c: C1
    a: A1


def test_a_type_past_openais_nesting_is_not_sent_strict_in_either_field_order() -> None:
    # OpenAI refuses a strict schema 12 levels deep ("12 levels of nesting exceeds limit of
    # 10", providers-openai-family.md §1-2): with `c` first it was sent strict, reported exact.
    chain = {"n": {"n": {"n": {"n": {"b": {"back": None}}}}}}
    answer = json.dumps({"a": chain, "c": chain})
    for tp in (AFirst, CFirst):
        result, body = _send("openai", "gpt-4o", tp, answer)
        assert body["response_format"]["json_schema"]["strict"] is False
        assert result.metadata.enforcement is SchemaEnforcement.NOT_ENFORCED
        assert _messages(result) == [
            f"the schema of `{tp.__name__}` is not strict-representable: the object at `A5` "
            f"is 12 levels deep (through `{tp.__name__}.c`, `C1.n`, `C2.n`, `C3.n`, `C4.n`, "
            "`C5.b`, `B.back`, `A1.n`, `A2.n`, `A3.n`, `A4.n`), more than the 10 OpenAI "
            "strict mode allows: nest fewer objects along that path; "
            "it goes without `strict`"
        ]


@st.composite
def _graphs(draw: st.DrawFn) -> tuple[dict[str, tuple[int, list[tuple[int, str]]]], Any]:
    """Definitions (the root `#` among them), each a chain of objects with `$ref`s at some
    of its levels, and a random order for every object's properties and for `$defs`."""
    names = ["#", *(f"D{i}" for i in range(draw(st.integers(1, 5))))]
    graph = {}
    for name in names:
        levels = draw(st.integers(1, 4))
        refs = draw(st.lists(st.tuples(st.integers(1, levels), st.sampled_from(names)), max_size=4))
        graph[name] = (levels, refs)
    return graph, draw(st.randoms(use_true_random=False))


def _schema(graph: dict[str, tuple[int, list[tuple[int, str]]]], rng: Any) -> dict[str, Any]:
    def body(name: str) -> dict[str, Any]:
        levels, refs = graph[name]
        node: dict[str, Any] | None = None
        for level in range(levels, 0, -1):
            props: list[tuple[str, Any]] = []
            if node is not None:
                props.append(("n", node))
            for index, (at, target) in enumerate(refs):
                if at == level:
                    ref = "#" if target == "#" else f"#/$defs/{target}"
                    props.append((f"r{index}", {"anyOf": [{"$ref": ref}, {"type": "null"}]}))
            rng.shuffle(props)
            node = _obj(dict(props))
        assert node is not None
        return node

    defs = [(name, body(name)) for name in graph if name != "#"]
    rng.shuffle(defs)
    return {**body("#"), "$defs": dict(defs)}


def _longest(graph: dict[str, tuple[int, list[tuple[int, str]]]], name: str, on: set[str]) -> int:
    """Every path from `name`, no definition entered twice: the deepest."""
    levels, refs = graph[name]
    return max([levels] + [at + _longest(graph, t, on | {t}) for at, t in refs if t not in on])


@settings(max_examples=300, deadline=None)
@given(_graphs())
def test_the_depth_does_not_depend_on_the_order_of_properties_or_definitions(
    drawn: tuple[dict[str, tuple[int, list[tuple[int, str]]]], Any],
) -> None:
    graph, rng = drawn
    expected = _longest(graph, "#", {"#"})
    assert measure(_schema(graph, rng)).depth == expected
    assert measure(_schema(graph, rng)).depth == expected


# ----- xAI's own bounds


class Code(BaseModel):
    code: str = Field(min_length=3, max_length=8)


class Essay(BaseModel):
    text: str = Field(max_length=5000)


def test_xai_is_sent_the_string_lengths_it_enforces() -> None:
    # minLength/maxLength up to 2,048 are enforced by xAI (providers-openai-family.md §6).
    result, body = _send("xai", "grok-4", Code, '{"code": "ABCD"}')
    assert result.value == Code(code="ABCD")
    assert result.metadata.enforcement is SchemaEnforcement.EXACT
    assert _messages(result) == []
    sent = body["response_format"]["json_schema"]
    assert sent["strict"] is True
    assert sent["schema"]["properties"]["code"] == {
        "maxLength": 8,
        "minLength": 3,
        "title": "Code",
        "type": "string",
    }
    # Above 2,048 it is accepted and best-effort: sent, approximate.
    result, body = _send("xai", "grok-4", Essay, '{"text": "t"}')
    assert result.metadata.enforcement is SchemaEnforcement.APPROXIMATE
    assert _messages(result) == [
        "the schema of `Essay` was approximated: `maxLength` of 5000 at `Essay.text` is past "
        "the 2048 characters xAI strict mode enforces: sent, not enforced"
    ]
    assert body["response_format"]["json_schema"]["schema"]["properties"]["text"] == {
        "maxLength": 5000,
        "title": "Text",
        "type": "string",
    }


class Site(BaseModel):
    url: HttpUrl


def test_xai_uri_is_approximate_with_its_lengths_kept() -> None:
    # `HttpUrl` takes http and https only; the `uri` xAI enforces takes any scheme. (Before,
    # the lengths beside it were removed, which said approximate for another reason.)
    result, body = _send("xai", "grok-4", Site, '{"url": "https://a.example/"}')
    assert result.metadata.enforcement is SchemaEnforcement.APPROXIMATE
    assert _messages(result) == [
        "the schema of `Site` was approximated: `format` `uri` at `Site.url` allows URLs "
        "pydantic's URL types refuse (`HttpUrl` takes http and https only): such a value "
        "passes it and fails the type",
        "the schema of `Site` was approximated: `maxLength` of 2083 at `Site.url` is past the "
        "2048 characters xAI strict mode enforces: sent, not enforced",
    ]
    assert body["response_format"]["json_schema"]["schema"]["properties"]["url"] == {
        "format": "uri",
        "maxLength": 2083,
        "minLength": 1,
        "title": "Url",
        "type": "string",
    }


def test_xai_property_counts_kept_where_they_count_what_the_type_does() -> None:
    both = {"a": {"type": "string"}, "b": {"type": "string"}}
    closed = {"type": "object", "properties": both, "required": ["a", "b"]}
    rewrite = openai_strict({**closed, "minProperties": 1, "maxProperties": 2}, profile="xai")
    assert rewrite.exact
    assert (rewrite.schema["minProperties"], rewrite.schema["maxProperties"]) == (1, 2)
    rewrite = openai_strict({**closed, "maxProperties": 100}, profile="xai")
    assert rewrite.schema["maxProperties"] == 100
    assert [note.message for note in rewrite.notes] == [
        "`maxProperties` of 100 at `/` is past the 64 properties xAI strict mode enforces: "
        "sent, not enforced"
    ]
    # An optional property is sent required, `null` standing in for it: the count differs.
    optional = {"type": "object", "properties": both, "required": ["a"], "maxProperties": 1}
    rewrite = openai_strict(optional, profile="xai")
    assert "maxProperties" not in rewrite.schema
    assert [note.message for note in rewrite.notes] == [
        "`maxProperties` was removed at `/`: xAI strict mode would count the `null` sent for "
        "an optional property left out"
    ]


# ----- where a limit is passed, and whose limit it is


def _flat(count: int) -> dict[str, Any]:
    props = {f"p{i}": {"type": "string"} for i in range(count)}
    return {"type": "object", "properties": props, "required": list(props)}


def test_xai_is_held_to_openais_limits_said_as_assumed() -> None:
    rewrite = openai_strict(_flat(5001), profile="xai")
    assert [(note.pointer, note.message) for note in rewrite.notes] == [
        (
            "/",
            "the schema at `/` has 5001 object properties, more than the 5000 OpenAI strict "
            "mode allows, a limit assumed for xAI strict mode, which documents none",
        )
    ]
    assert [note.message for note in openai_strict(_flat(5001)).notes] == [
        "the schema at `/` has 5001 object properties, more than the 5000 OpenAI strict mode allows"
    ]


def test_groq_is_held_to_openais_limits_said_as_assumed() -> None:
    """Groq publishes no limits of its own: a refusal by OpenAI's says it is assumed, in the
    warning its gpt-oss strict mode gives as the schema goes without `strict`."""
    assumed = (
        "the schema at `/` has 5001 object properties, more than the 5000 OpenAI strict mode "
        "allows, a limit assumed for Groq strict mode, which documents none"
    )
    rewrite = openai_strict(_flat(5001), profile="groq")
    assert [(note.pointer, note.message) for note in rewrite.notes] == [("/", assumed)]
    fmt = ResponseFormat.for_schema(_flat(5001), name="r")
    request = ChatRequest("openai/gpt-oss-120b").user("hi").with_response_format(fmt)
    http, warnings = allama.provider("groq", api_key="k")._prepare(request, stream=False)
    assert http.body["response_format"]["json_schema"]["strict"] is False
    assert [w.message for w in warnings] == [
        f"the response format `r` is not strict-representable: {assumed}; it goes without `strict`"
    ]
    # Within them, the same rules as OpenAI's: nothing to say.
    assert openai_strict(_flat(5000), profile="groq").exact


Sku = Field(json_schema_extra={"enum": [f"{i:060d}" for i in range(251)]})


class Item(BaseModel):
    sku: str = Sku


class Order(BaseModel):
    status: str
    items: list[Item]


def test_a_large_enum_is_named_where_it_is() -> None:
    plan = Extractor().plan(
        allama.provider("openai", api_key="k", base_url="http://test"),
        Order,
        ChatRequest("gpt-4o").user("x").with_option(ExtractionMode.NATIVE),
    )
    assert plan.enforcement is SchemaEnforcement.NOT_ENFORCED
    assert [warning.message for warning in plan.degradations] == [
        "the schema of `Order` is not strict-representable: the enum at `Item.sku` has 15060 "
        "characters, more than the 15000 OpenAI strict mode allows in an enum of more than "
        "250 values: shorten its values or split it; it goes without `strict`"
    ]


def test_too_many_enum_values_name_the_largest() -> None:
    schema = _obj({"e": {"enum": list(range(600))}, "f": _obj({"g": {"enum": list(range(401))}})})
    assert [(note.pointer, note.message) for note in openai_strict(schema).notes] == [
        (
            "/",
            "the schema at `/` has 1001 enum values, more than the 1000 OpenAI strict mode "
            "allows: the largest enum, of 600, is at `/properties/e`",
        )
    ]
