"""The typed partial value of a streamed extraction (`stream.partial`).

After every chunk the partial value is consistent with the final one: every completed value
in it (a list item, a field, a map entry) is validated and equal to its final counterpart,
and the one value still being written, along the open path, is a prefix of it (a string
prefix, a shorter list, an object with fewer fields). At the end it equals the value
`finish()` returns. Snapshots taken along the way never change afterwards.
"""

from __future__ import annotations

import asyncio
import copy
import dataclasses
import datetime
import itertools
import json
import sys
import types
import typing
import warnings
from collections.abc import Iterable, Iterator
from typing import Annotated, Any, Literal, NotRequired

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import AliasChoices, BaseModel, ConfigDict, Field, TypeAdapter, ValidationError
from pydantic.alias_generators import to_camel
from pydantic.dataclasses import dataclass as pydantic_dataclass
from typing_extensions import TypedDict

from allama import (
    BlockStart,
    BlockStop,
    ChatRequest,
    ExtractionMode,
    Extractor,
    Finish,
    MissingStructuredTextError,
    ParseError,
    ResponseStart,
    StreamBlockType,
    StreamEvent,
    TextDelta,
    ToolCallDelta,
)
from allama.extract import EXTRACTION_TOOL
from allama.mock import MockProvider, MockStreamingProvider

NATIVE = ExtractionMode.NATIVE
FORCED = ExtractionMode.FORCED_TOOL


def events(chunks: list[str], mode: ExtractionMode) -> list[StreamEvent]:
    if mode is NATIVE:
        opened: StreamEvent = BlockStart(index=0, block_type=StreamBlockType.TEXT)
        deltas: list[StreamEvent] = [TextDelta(index=0, text=chunk) for chunk in chunks]
        finish = "stop"
    else:
        opened = BlockStart(
            index=0, block_type=StreamBlockType.TOOL_CALL, id="c", name=EXTRACTION_TOOL
        )
        deltas = [ToolCallDelta(index=0, arguments=chunk) for chunk in chunks]
        finish = "tool_calls"
    return [ResponseStart(), opened, *deltas, BlockStop(index=0), Finish(finish_reason=finish)]


def chunked(text: str, count: int) -> list[str]:
    size = max(1, -(-len(text) // count))
    return [text[i : i + size] for i in range(0, len(text), size)]


def split_at(text: str, cuts: list[int]) -> list[str]:
    points = sorted({0, len(text), *(cut % (len(text) + 1) for cut in cuts)})
    return [text[a:b] for a, b in itertools.pairwise(points) if b > a]


class Streamed:
    """Every partial value read after a delta (with a JSON dump taken at that moment), and
    the value `finish()` returned."""

    def __init__(self, partials: list[Any], dumps: list[Any], value: Any) -> None:
        self.partials = partials
        self.dumps = dumps
        self.value = value


def _dump(value: Any) -> Any:
    if isinstance(value, BaseModel):
        return value.model_dump(mode="json", exclude_unset=True)
    if isinstance(value, list):
        return [_dump(item) for item in value]
    if isinstance(value, dict):
        return {key: _dump(item) for key, item in value.items()}
    return value


def stream(
    tp: Any,
    chunks: list[str],
    mode: ExtractionMode,
    extractor: Extractor | None = None,
    *,
    every: int = 1,
) -> Streamed:
    """Stream `chunks`, reading the partial value after each; a dump of every `every`th."""
    provider = MockStreamingProvider.with_stream(events(chunks, mode))
    request = ChatRequest("m").user("extract").with_option(mode)
    partials: list[Any] = []
    dumps: list[Any] = []
    with (extractor or Extractor()).extract_stream(provider, tp, request) as opened:
        for event in opened:
            if isinstance(event, TextDelta | ToolCallDelta):
                partial = opened.partial
                if len(partials) % every == 0:
                    dumps.append(_dump(partial))
                partials.append(partial)
        value = opened.finish().value
        assert opened.partial == value
    return Streamed(partials, dumps, value)


async def astream(tp: Any, chunks: list[str], mode: ExtractionMode, every: int) -> Streamed:
    provider = MockStreamingProvider.with_stream(events(chunks, mode))
    request = ChatRequest("m").user("extract").with_option(mode)
    partials: list[Any] = []
    dumps: list[Any] = []
    async with await Extractor().aextract_stream(provider, tp, request) as opened:
        async for event in opened:
            if isinstance(event, TextDelta | ToolCallDelta):
                partial = opened.partial
                if len(partials) % every == 0:
                    dumps.append(_dump(partial))
                partials.append(partial)
        value = (await opened.finish()).value
        assert opened.partial == value
    return Streamed(partials, dumps, value)


def assert_consistent(partial: Any, final: Any, where: str = "$") -> None:
    """`partial` is `final` as far as it goes: at most one value along one open path differs,
    and it is a prefix of its final counterpart."""
    if partial is None:
        assert where == "$" or final is None, where
        return
    if isinstance(final, BaseModel):
        assert type(partial) is type(final), f"{where}: {type(partial)} is not {type(final)}"
        open_fields = [
            name
            for name in partial.model_fields_set
            if getattr(partial, name) != getattr(final, name)
        ]
        assert len(open_fields) <= 1, f"{where}: more than one open field {open_fields}"
        for name in open_fields:
            assert_consistent(getattr(partial, name), getattr(final, name), f"{where}.{name}")
    elif isinstance(final, list):
        assert isinstance(partial, list), f"{where}: {partial!r}"
        assert len(partial) <= len(final), where
        for index, item in enumerate(partial[:-1]):
            assert item == final[index], f"{where}[{index}] completed but not final"
            assert type(item) is type(final[index]), f"{where}[{index}] not validated"
        if partial:
            assert_consistent(partial[-1], final[len(partial) - 1], f"{where}[{len(partial) - 1}]")
    elif isinstance(final, dict):
        assert isinstance(partial, dict), f"{where}: {partial!r}"
        assert set(partial) <= set(final), where
        differing = [key for key in partial if partial[key] != final[key]]
        assert len(differing) <= 1, f"{where}: more than one open entry {differing}"
        for key in differing:
            assert_consistent(partial[key], final[key], f"{where}[{key!r}]")
    elif isinstance(final, str):
        assert isinstance(partial, str) and final.startswith(partial), f"{where}: {partial!r}"
    else:
        assert partial == final, f"{where}: {partial!r} != {final!r}"


def assert_stream_consistent(streamed: Streamed, every: int = 1) -> None:
    """Every `every`th partial value is consistent with the final one, and unchanged since it
    was read (a snapshot is a value, not a view); the last one is the final value."""
    sampled = streamed.partials[::every]
    for partial in sampled:
        assert_consistent(partial, streamed.value)
    assert [_dump(p) for p in sampled] == streamed.dumps
    assert streamed.partials[-1] == streamed.value


# A 2,000-item list


class Item(BaseModel):
    sku: str
    name: str
    price: float
    quantity: Annotated[int, Field(ge=0)]
    in_stock: bool
    tags: list[str] = []


class Catalog(BaseModel):
    title: str
    items: list[Item]


def catalog_document() -> str:
    items = [
        {
            "sku": f"SKU-{i:05d}",
            "name": f'Item "{i}" \\ caf\u00e9',
            "price": i * 1.25,
            "quantity": i % 17,
            "in_stock": i % 3 != 0,
            "tags": ["a", "b"] if i % 2 else [],
        }
        for i in range(2_000)
    ]
    return json.dumps({"title": "Spring catalog", "items": items})


@pytest.mark.parametrize("mode", [NATIVE, FORCED])
@pytest.mark.parametrize("count", [500, 5_000])
def test_a_2000_item_list_is_consistent_after_every_chunk(mode: ExtractionMode, count: int) -> None:
    text = catalog_document()
    every = count // 20
    streamed = stream(Catalog, chunked(text, count), mode, every=every)
    final = streamed.value
    assert final == Catalog.model_validate_json(text)
    assert len(final.items) == 2_000
    assert len(streamed.partials) == len(chunked(text, count))
    # A sample checked whole; after every chunk, the newest completed item.
    assert_stream_consistent(streamed, every)
    counts = []
    for partial in streamed.partials:
        items = partial.items if partial is not None and "items" in partial.model_fields_set else []
        counts.append(len(items))
        if len(items) >= 2:
            assert type(items[-2]) is Item, "a completed item is a validated value"
            assert items[-2] == final.items[len(items) - 2]
    assert counts == sorted(counts), "items never disappear"
    assert counts[len(counts) // 2] >= 900, "items arrive as the text does"


def test_the_partial_value_is_the_same_in_async_streams() -> None:
    text = catalog_document()
    chunks = chunked(text, 500)
    streamed = asyncio.run(astream(Catalog, chunks, FORCED, every=25))
    assert_stream_consistent(streamed, every=25)
    assert streamed.dumps == stream(Catalog, chunks, FORCED, every=25).dumps


def test_the_partial_value_read_rarely_is_the_same() -> None:
    """The work is done when `partial` is read, on the text since the last read: reading it
    every 37th event, or only at the end, gives the values reading it every time gives."""
    text = catalog_document()
    chunks = chunked(text, 500)
    every_time = stream(Catalog, chunks, NATIVE).partials
    provider = MockStreamingProvider.with_stream(events(chunks, NATIVE))
    request = ChatRequest("m").user("extract").with_option(NATIVE)
    with Extractor().extract_stream(provider, Catalog, request) as opened:
        deltas = 0
        for event in opened:
            if isinstance(event, TextDelta):
                if deltas % 37 == 0:
                    assert _dump(opened.partial) == _dump(every_time[deltas])
                deltas += 1
        value = opened.finish().value
    assert opened.partial == value

    provider = MockStreamingProvider.with_stream(events(chunks, NATIVE))
    with Extractor().extract_stream(provider, Catalog, request) as opened:
        value = opened.finish().value
        assert opened.partial == value


def test_a_long_string_grows_chunk_by_chunk() -> None:
    class Summary(BaseModel):
        title: str
        body: str

    body = "Ada Lovelace wrote the first program. " * 20
    text = json.dumps({"title": "Notes", "body": body})
    streamed = stream(Summary, chunked(text, 100), NATIVE)
    assert_stream_consistent(streamed)
    bodies = [p.body for p in streamed.partials if p is not None and "body" in p.model_fields_set]
    assert len(set(bodies)) > 50
    assert bodies == sorted(bodies, key=len)


@pytest.mark.parametrize("mode", [NATIVE, FORCED])
def test_an_emoji_whose_halves_come_in_two_deltas_is_one_character_in_the_partial(
    mode: ExtractionMode,
) -> None:
    # A provider that escapes an emoji as `\ud83d\ude00` and splits the escape across its
    # events sends each half as a lone surrogate: the response pairs them, the partial
    # value kept them apart (another value than `finish()`'s, which no JSON dump takes).
    class Named(BaseModel):
        name: str
        n: int

    for chunks, name in (
        (['{"name": "hi \ud83d', '\ude00 there", "n": 1}'], "hi \U0001f600 there"),
        (['{"name": "hi \ud83d', "\ude00 there", '", "n": 1}'], "hi \U0001f600 there"),
        (['{"name": "hi \ud83d', '\ude00", "n": 1}'], "hi \U0001f600"),
    ):
        streamed = stream(Named, chunks, mode)
        assert streamed.value == Named(name=name, n=1)
        for partial in streamed.partials:
            assert partial is None or "\ud83d" not in partial.model_dump_json()
        assert streamed.partials[-1] == streamed.value


@pytest.mark.parametrize("mode", [NATIVE, FORCED])
def test_an_escape_of_half_a_surrogate_pair_alone_is_u_fffd_in_the_preview(
    mode: ExtractionMode,
) -> None:
    """`"caf\\ud83d"` is a string Python's JSON reader keeps a lone half in, which no
    preview could dump: shown as `finish()` reads it, U+FFFD (here `finish()` refuses the
    key written twice), as is an open string's `\\ude00` before its text goes on."""

    class Row(BaseModel):
        name: str
        qty: int

    class Table(BaseModel):
        title: str
        rows: list[Row]

    for chunks, shown in (
        (
            ['{"rows": [], "title": "caf\\ud83d", ', '"rows": [{"name": "ok", "qty": 2}]}'],
            ("caf\ufffd",),
        ),
        (['{"rows": [], "title": "a\\ude00b and on', '", "rows": []}'], ("a\ufffdb and on",)),
    ):
        provider = MockStreamingProvider.with_stream(events(chunks, mode))
        request = ChatRequest("m").user("extract").with_option(mode)
        previews: list[Any] = []
        with Extractor().extract_stream(provider, Table, request) as opened:
            for event in opened:
                if isinstance(event, TextDelta | ToolCallDelta):
                    previews.append(opened.partial)
            with pytest.raises(ParseError):
                opened.finish()
        for preview in previews:
            if preview is None:
                continue
            if "title" in preview.model_fields_set:
                assert preview.title in shown
            preview.model_dump_json()  # every preview shown can be written as JSON


def test_prose_before_the_json_is_skipped() -> None:
    document = json.dumps(
        {
            "title": "T",
            "items": [{"sku": "a", "name": "b", "price": 1, "quantity": 2, "in_stock": True}],
        }
    )
    expected = Catalog.model_validate_json(document)
    for text in (
        f'Sure! Here is what I found, "notes": 3 of them, true or false:\n{document}\nThanks',
        f"```json\n{document}\n```\nHope this helps!",
    ):
        for count in (7, 40, len(text)):
            streamed = stream(Catalog, chunked(text, count), NATIVE, Extractor(repair=True))
            assert streamed.value == expected
            assert_stream_consistent(streamed)


@pytest.mark.parametrize("size", [1, 7, 100_000])
def test_many_false_starts_are_skipped_without_recursion(size: int) -> None:
    text = "[a] " * 3_000 + '{"title": "T", "items": []}'
    provider = MockStreamingProvider.with_stream(
        events(chunked(text, -(-len(text) // size)), NATIVE)
    )
    request = ChatRequest("m").user("extract").with_option(NATIVE)
    with Extractor().extract_stream(provider, Catalog, request) as opened:
        for _ in opened:
            opened.partial  # noqa: B018 - reading it must not raise
        assert opened.partial == Catalog(title="T", items=[])


def test_brackets_in_prose_are_a_false_start() -> None:
    document = '{"title": "T", "items": []}'
    text = f"Per [1] and [2, 3]:\n{document}"
    provider = MockStreamingProvider.with_stream(events(list(text), NATIVE))
    request = ChatRequest("m").user("extract").with_option(NATIVE)
    with Extractor(repair=True).extract_stream(provider, Catalog, request) as opened:
        for _ in opened:
            pass
        # Repair takes `[1] ... }` and fails; the preview found the value all the same.
        assert opened.partial == Catalog(title="T", items=[])


class Address(BaseModel):
    street: str
    city: str


class Customer(BaseModel):
    name: str
    address: Address
    previous: list[Address] = []


class Product(BaseModel):
    name: str
    tags: list[str]


class Line(BaseModel):
    product: Product
    quantity: int


class Order(BaseModel):
    customer: Customer
    lines: list[Line]


def test_nested_models_are_consistent() -> None:
    order = {
        "customer": {
            "name": "Ada",
            "address": {"street": "1 Main St", "city": "London"},
            "previous": [{"street": "2 Side St", "city": "Leeds"}],
        },
        "lines": [
            {"product": {"name": f"p{i}", "tags": ["x"] * (i % 3)}, "quantity": i}
            for i in range(20)
        ],
    }
    text = json.dumps(order, indent=2)
    for mode in (NATIVE, FORCED):
        streamed = stream(Order, chunked(text, len(text) // 3), mode)
        assert streamed.value == Order.model_validate(order)
        assert_stream_consistent(streamed)


class Profile(BaseModel):
    name: str
    nickname: str | None = None
    contact: Address | None = None
    tags: list[str] = []
    scores: list[int] | None = None


def test_optional_fields_and_strict_nulls() -> None:
    # `tags` has no `null`: a strict mode's stand-in, left out so the default applies (as
    # `finish()` does); `nickname`, `contact` and `scores` admit `null`.
    text = '{"name": "Ada", "nickname": null, "contact": null, "tags": null, "scores": null}'
    streamed = stream(Profile, list(text), NATIVE)
    assert streamed.value == Profile(name="Ada")
    assert_stream_consistent(streamed)
    assert all(p is None or p.tags == [] for p in streamed.partials)

    text = '{"name": "Ada", "contact": {"street": "1 Main St", "city": "London"}, "scores": [3, 4]}'
    streamed = stream(Profile, list(text), FORCED)
    assert streamed.value.contact == Address(street="1 Main St", city="London")
    assert_stream_consistent(streamed)


class Labelled(BaseModel):
    labels: dict[str, int]
    places: dict[str, Address]


def test_dict_fields_are_consistent() -> None:
    value = {
        "labels": {f"k{i}": i for i in range(30)},
        "places": {
            "home": {"street": "1 Main St", "city": "London"},
            "work": {"street": "2 Side St", "city": "Leeds"},
        },
    }
    text = json.dumps(value)
    for count in (len(text), 50, 5):
        streamed = stream(Labelled, chunked(text, count), FORCED)
        assert streamed.value == Labelled.model_validate(value)
        assert_stream_consistent(streamed)


class Cat(BaseModel):
    kind: Literal["cat"]
    lives: int


class Dog(BaseModel):
    kind: Literal["dog"] = "dog"
    good: bool | None = None


class Pets(BaseModel):
    first: Cat | Dog
    rest: list[Cat | Dog]
    code: int | str


def test_unions_are_validated_when_they_complete() -> None:
    value = {
        "first": {"kind": "cat", "lives": 9},
        "rest": [{"kind": "dog", "good": True}, {"kind": "cat", "lives": 3}, {"kind": "dog"}],
        "code": "A7",
    }
    text = json.dumps(value)
    for count in (len(text), 30, 3):
        streamed = stream(Pets, chunked(text, count), NATIVE)
        assert streamed.value == Pets.model_validate(value)
        assert_stream_consistent(streamed)
    # A union member half built is not shown: `{"kind": "cat"` would validate as neither,
    # and a `Dog` with defaults would be a guess the final value contradicts.
    streamed = stream(Pets, list(text), NATIVE)
    firsts = [p.first for p in streamed.partials if p is not None and "first" in p.model_fields_set]
    assert firsts and all(first == Cat(kind="cat", lives=9) for first in firsts)


def test_values_other_than_objects() -> None:
    for tp, value in ((list[Item], []), (list[int], [1, 22, 333]), (int, 12345), (str, "héllo\n")):
        text = json.dumps(value)
        streamed = stream(tp, list(text), NATIVE)  # the partial after `finish()` is checked
        assert streamed.value == value
        for partial in streamed.partials:
            assert_consistent(partial, value)


@dataclasses.dataclass
class Point:
    x: int
    y: int
    label: str = "origin"


class Span(TypedDict):
    start: Point
    end: Point
    note: NotRequired[str]


def test_dataclasses_and_typed_dicts_are_consistent() -> None:
    value = {"start": {"x": 1, "y": 2, "label": "a"}, "end": {"x": 30, "y": 40}, "note": "n"}
    text = json.dumps(value)
    streamed = stream(Span, list(text), FORCED)
    assert streamed.value == {"start": Point(1, 2, "a"), "end": Point(30, 40), "note": "n"}
    assert streamed.partials[-1] == streamed.value
    for partial in streamed.partials:
        if partial is None:
            continue
        assert set(partial) <= {"start", "end", "note"}
        for key in ("start", "end"):
            point = partial.get(key)
            assert point is None or isinstance(point, Point)
        if "end" in partial:
            assert partial["start"] == Point(1, 2, "a"), "a completed dataclass is final"
    # An open dataclass shows its defaults until its own value arrives.
    opened = [p["end"] for p in streamed.partials if p is not None and "end" in p]
    assert opened[0].label == "origin"


# Any chunking, any document


class Leaf(BaseModel):
    text: str
    number: float
    count: int
    flag: bool | None = None


class Tree(BaseModel):
    name: str
    leaves: list[Leaf]
    index: dict[str, int] = {}
    child: Tree | None = None


_text = st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=12)
_leaves = st.builds(
    Leaf,
    text=_text,
    number=st.floats(allow_nan=False, allow_infinity=False, width=32),
    count=st.integers(-(10**12), 10**12),
    flag=st.none() | st.booleans(),
)
_trees = st.recursive(
    st.builds(
        Tree,
        name=_text,
        leaves=st.lists(_leaves, max_size=4),
        index=st.dictionaries(_text, st.integers(), max_size=3),
        child=st.none(),
    ),
    lambda inner: st.builds(
        Tree,
        name=_text,
        leaves=st.lists(_leaves, max_size=3),
        index=st.dictionaries(_text, st.integers(), max_size=2),
        child=inner,
    ),
    max_leaves=4,
)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    tree=_trees,
    cuts=st.lists(st.integers(min_value=0, max_value=10_000), max_size=40),
    indent=st.sampled_from([None, 1]),
    ascii_only=st.booleans(),
    mode=st.sampled_from([NATIVE, FORCED]),
    around=st.sampled_from(
        [("", ""), ("Here you go: ", " Done."), ("```json\n", "\n```"), ("\n\n", "\n")]
    ),
)
def test_any_chunking_ends_with_the_finished_value(
    tree: Tree,
    cuts: list[int],
    indent: int | None,
    ascii_only: bool,
    mode: ExtractionMode,
    around: tuple[str, str],
) -> None:
    document = json.dumps(tree.model_dump(mode="json"), indent=indent, ensure_ascii=ascii_only)
    # Native text may come wrapped in prose or a fence (repaired at `finish()`); tool
    # arguments are the document alone.
    before, after = around if mode is NATIVE else ("", "")
    text = before + document + after
    chunks = split_at(text, cuts)
    streamed = stream(Tree, chunks, mode, Extractor(repair=True))
    assert streamed.value == Tree.model_validate_json(document)
    assert streamed.partials[-1] == streamed.value
    assert_stream_consistent(streamed)


# Output that is not (yet) the value never breaks the stream

_pieces = st.sampled_from(
    [*'{}[]",:\\ \n0123456789.-+eEtrufalsnx', "true", "null", '"a"', '"name"', "\\u12", "\\ud83d"]
)


@settings(max_examples=200, deadline=None)
@given(
    text=st.lists(_pieces, max_size=60).map("".join),
    cuts=st.lists(st.integers(min_value=0, max_value=200), max_size=10),
    tp=st.sampled_from([Tree, Pets, Profile, Span, list[int], int, str, dict[str, int]]),
)
def test_any_text_in_any_chunks_is_read_without_raising(
    text: str, cuts: list[int], tp: Any
) -> None:
    provider = MockStreamingProvider.with_stream(events(split_at(text, cuts) or [""], NATIVE))
    request = ChatRequest("m").user("extract").with_option(NATIVE)
    with Extractor(repair=True).extract_stream(provider, tp, request) as opened:
        for _ in opened:
            opened.partial  # noqa: B018 - reading it must not raise
        try:
            value = opened.finish().value
        except (ParseError, MissingStructuredTextError):
            return
    assert opened.partial is None or opened.partial == value


@settings(max_examples=200, deadline=None)
@given(
    tree=_trees,
    edits=st.lists(
        st.tuples(st.integers(0, 10_000), st.sampled_from(["", "{", "}", "]", '"', ",", "x"])),
        min_size=1,
        max_size=4,
    ),
    cuts=st.lists(st.integers(min_value=0, max_value=10_000), max_size=10),
)
def test_a_damaged_document_is_read_without_raising(
    tree: Tree, edits: list[tuple[int, str]], cuts: list[int]
) -> None:
    text = json.dumps(tree.model_dump(mode="json"))
    for at, replacement in edits:
        at %= len(text) + 1
        text = text[:at] + replacement + text[at + 1 :]
    provider = MockStreamingProvider.with_stream(events(split_at(text, cuts) or [""], FORCED))
    request = ChatRequest("m").user("extract").with_option(FORCED)
    with Extractor().extract_stream(provider, Tree, request) as opened:
        partials = [opened.partial for _ in opened]
        try:
            value = opened.finish().value
        except (ParseError, ValidationError):
            return
    # When the damage left a valid document, the preview ends with its value.
    assert partials[-1] == value or opened.partial == value


@pytest.mark.parametrize("count", [1, 40])
def test_deep_nesting_is_read_without_raising(count: int) -> None:
    text = "[" * 20_000 + "]" * 20_000
    streamed_partials = []
    provider = MockStreamingProvider.with_stream(events(chunked(text, count), NATIVE))
    request = ChatRequest("m").user("extract").with_option(NATIVE)
    with Extractor().extract_stream(provider, list[Any], request) as opened:
        for event in opened:
            if isinstance(event, TextDelta):
                streamed_partials.append(opened.partial is not None)
        with pytest.raises(ParseError, match="nests too deep"):
            opened.finish()
    assert all(streamed_partials)


DEEPEST = 201
"""How many containers pydantic-core reads nested (its reader's recursion limit), as
`finish()` reads the output."""


class Nested(BaseModel):
    v: list[Any]


class Loose(BaseModel):
    """An undeclared key's value, of no type, is shown as it is written, lists and all."""

    model_config = ConfigDict(extra="allow")


def _lists(depth: int) -> list[Any]:
    """`depth` lists, each in the one before, the innermost empty."""
    value: list[Any] = []
    for _ in range(depth - 1):
        value = [value]
    return value


def _fields_dump(partial: BaseModel | None) -> str:
    """A model's fields, undeclared ones too, as JSON (`model_dump` serializes only so deep)."""
    if partial is None:
        return "null"
    return json.dumps({**partial.__dict__, **(partial.__pydantic_extra__ or {})})


def _stream_nested(tp: Any, text: str) -> tuple[list[Any], list[Any], list[int]]:
    """Stream `text` a character a delta as a `tp`, reading the partial value after
    each: the snapshots, their dumps taken when read, and the frames each read built."""
    from allama.extract._partial import _Frame

    built = 0
    real = _Frame.with_tail

    def counted(frame: _Frame, tail: Any) -> Any:
        nonlocal built
        built += 1
        return real(frame, tail)

    partials: list[Any] = []
    dumps: list[Any] = []
    costs: list[int] = []
    provider = MockStreamingProvider.with_stream(events(list(text), NATIVE))
    request = ChatRequest("m").user("extract").with_option(NATIVE)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(_Frame, "with_tail", counted)
        with Extractor().extract_stream(provider, tp, request) as opened:
            for event in opened:
                if isinstance(event, TextDelta):
                    before = built
                    partial = opened.partial
                    costs.append(built - before)
                    partials.append(partial)
                    dumps.append(_fields_dump(partial))
            with pytest.raises(ParseError, match="recursion limit exceeded"):
                opened.finish()
    return partials, dumps, costs


@pytest.mark.parametrize("tp", [Nested, Loose])
def test_a_value_nested_deeper_than_finish_reads_stops_its_preview(tp: Any) -> None:
    """A model stuck writing `[[[[`: once more containers are open than `finish()` reads
    (pydantic-core reads 201 nested), the preview stays the value as it stood, without the
    container that went too deep, and a read builds nothing (each read rebuilt the whole
    open path: quadratic in the depth, minutes for a 100 KB answer). The value that ends,
    `finish()` refuses, is shown as it was built, as any value that ends invalid is."""
    opening = '{"v": '
    text = opening + "[" * 600 + "]" * 600 + "}"
    partials, dumps, costs = _stream_nested(tp, text)

    def shown(depth: int) -> Any:
        # (The items of a `list[Any]` are shown once they complete, as any value but text.)
        return tp(v=_lists(depth) if tp is Loose else [])

    # The read after the container past the depth opened (the root object is one of them).
    past = len(opening) + DEEPEST - 1
    for depth, partial in enumerate(partials[len(opening) : past], start=1):
        assert partial == shown(depth)
    assert partials[past:-1] == [shown(DEEPEST - 1)] * (len(partials) - past - 1)
    assert partials[-1] == tp(v=_lists(600))
    assert costs[past + 1 :] == [0] * (len(costs) - past - 1)
    # No snapshot changed since it was read.
    assert dumps == [_fields_dump(partial) for partial in partials]


def test_a_value_as_deep_as_finish_reads_is_shown_all_the_way() -> None:
    """The deepest value `finish()` reads is previewed as any other; one container more and
    `finish()` fails, so stopping the preview there hides nothing `finish()` would return."""
    opening = '{"v": '
    deepest = DEEPEST - 1  # in the root object
    text = opening + "[" * deepest + "]" * deepest + "}"
    provider = MockStreamingProvider.with_stream(events(list(text), NATIVE))
    request = ChatRequest("m").user("extract").with_option(NATIVE)
    with Extractor().extract_stream(provider, Loose, request) as opened:
        partials = [opened.partial for event in opened if isinstance(event, TextDelta)]
        value = opened.finish().value
    assert value == Loose(v=_lists(deepest))
    shown = partials[len(opening) :]
    assert shown == [Loose(v=_lists(depth)) for depth in range(1, deepest + 1)] + [value] * (
        deepest + 1
    )

    deeper = opening + "[" * DEEPEST + "]" * DEEPEST + "}"
    provider = MockStreamingProvider.with_stream(events([deeper], NATIVE))
    with (
        Extractor().extract_stream(provider, Loose, request) as opened,
        pytest.raises(ParseError, match="recursion limit exceeded"),
    ):
        opened.finish()


def test_brackets_in_prose_deeper_than_finish_reads_do_not_stop_the_preview() -> None:
    """A false start (brackets in prose) past that depth is dropped as any other: the value
    that follows is shown."""
    text = "See " + "[" * 300 + " (no, wait) " + '{"v": [1, 2]}'
    provider = MockStreamingProvider.with_stream(events(list(text), NATIVE))
    request = ChatRequest("m").user("extract").with_option(NATIVE)
    with Extractor().extract_stream(provider, Nested, request) as opened:
        partials = [opened.partial for event in opened if isinstance(event, TextDelta)]
    assert partials[-1] == Nested(v=[1, 2])


def test_a_number_too_long_to_convert_is_a_parse_error() -> None:
    class Count(BaseModel):
        n: int

    text = '{"n": ' + "1" * 5_000 + "}"
    request = ChatRequest("m").user("extract").with_option(NATIVE)
    with pytest.raises(ParseError, match="4300 digits"):
        Extractor().extract(MockProvider.with_text(text), Count, request)
    for count in (1, 100):
        provider = MockStreamingProvider.with_stream(events(chunked(text, count), NATIVE))
        with Extractor().extract_stream(provider, Count, request) as opened:
            for _ in opened:
                opened.partial  # noqa: B018 - reading it must not raise
            with pytest.raises(ParseError, match="4300 digits"):
                opened.finish()
            assert opened.partial is None or "n" not in opened.partial.model_fields_set


# Reading after every chunk stays linear: a list nobody holds is updated in place.


def test_a_snapshot_that_is_kept_never_changes_while_dropped_ones_are_reused() -> None:
    from allama.extract._partial import PartialValue

    text = catalog_document()
    partial: PartialValue[Catalog] = PartialValue(Catalog)
    kept: list[tuple[Catalog, str]] = []
    reused = 0
    last_id: int | None = None
    for index, start in enumerate(range(0, len(text), 37)):
        partial.feed(text[start : start + 37])
        value = partial.value()
        if value is None or not hasattr(value, "items"):
            continue
        if id(value.items) == last_id:
            reused += 1
        last_id = id(value.items)
        if index % 7 == 0:
            kept.append((value, value.model_dump_json()))
        del value
    partial.end()
    final = partial.value()
    assert final == Catalog.model_validate_json(text)
    assert all(value.model_dump_json() == dump for value, dump in kept)
    if sys.implementation.name == "cpython":
        assert reused > len(text) // 37 // 2


# Rows of a table: an item of a list of flat objects is held as text while it is written


class Row(BaseModel):
    sku: str
    unit_price: float = Field(alias="unitPrice")
    count: int
    when: datetime.date
    flag: bool | None = None
    note: str | None = None


_TEXT_FIELDS = {"sku", "note"}  # shown while they are written; the others once they end
_ATTRIBUTES = {"sku": "sku", "unitPrice": "unit_price", "count": "count", "when": "when"}
_ATTRIBUTES |= {"flag": "flag", "note": "note"}


@dataclasses.dataclass
class _Pair:
    """Where a pair's value lies in the document, and what kind of JSON value it is."""

    key: str
    kind: str  # "string", "number" or "literal"
    start: int
    end: int


@dataclasses.dataclass
class _Table:
    document: str
    rows: list[tuple[int, int, list[_Pair]]]  # `{` and `}` offsets, and the pairs between


# Text with the characters that delimit JSON (a brace or bracket in a string is text).
_cell = _text | st.text(st.sampled_from(list('ab{}[]",:\\é\n ')), max_size=8)
_row_values = st.fixed_dictionaries(
    {
        "sku": _cell,
        "unitPrice": st.floats(allow_nan=False, allow_infinity=False),
        "count": st.integers(-(10**15), 10**15),
        "when": st.dates().map(datetime.date.isoformat),
    },
    optional={
        "flag": st.none() | st.booleans(),
        "note": st.none() | _cell,
        "remark": st.none() | st.integers() | _cell,  # a key the model does not have
    },
)


@st.composite
def _tables(draw: st.DrawFn) -> _Table:
    ascii_only = draw(st.booleans())
    colon = draw(st.sampled_from([":", ": ", " :\n "]))
    comma = draw(st.sampled_from([",", ", ", ",\n  "]))
    pad = draw(st.sampled_from(["", " ", "\n "]))
    document = "["
    rows: list[tuple[int, int, list[_Pair]]] = []
    for index, values in enumerate(draw(st.lists(_row_values, min_size=1, max_size=5))):
        keys = draw(st.permutations(list(values)))
        if index:
            document += comma
        opened = len(document)
        document += "{" + pad
        pairs = []
        for number, key in enumerate(keys):
            if number:
                document += comma
            document += json.dumps(key, ensure_ascii=ascii_only) + colon
            value = values[key]
            written = json.dumps(value, ensure_ascii=ascii_only)
            if isinstance(value, str):
                kind = "string"
            elif value is None or isinstance(value, bool):
                kind = "literal"
            else:
                kind = "number"
            pairs.append(_Pair(key, kind, len(document), len(document) + len(written)))
            document += written
        document += pad + "}"
        rows.append((opened, len(document) - 1, pairs))
    return _Table(document + "]", rows)


def _text_so_far(body: str) -> str:
    """The decoded part of a string body cut anywhere: the longest prefix that decodes,
    without a first half of a surrogate pair waiting for its second."""
    for cut in range(len(body), max(-1, len(body) - 12), -1):
        try:
            text: str = json.loads(f'"{body[:cut]}"')
        except ValueError:
            continue
        return text[:-1] if text and "\ud800" <= text[-1] <= "\udbff" else text
    raise AssertionError(f"no prefix of {body!r} decodes")


def _open_row_fields(table: _Table, pairs: list[_Pair], final: Row, seen: int) -> dict[str, Any]:
    """The fields a row being written shows once `seen` characters have arrived: text as far
    as it is written, a string or literal once it ends, a number once what follows it has
    arrived (until then more digits may come); keys the model lacks never."""
    document = table.document
    shown: dict[str, Any] = {}
    for pair in pairs:
        name = _ATTRIBUTES.get(pair.key)
        if name is None:
            continue
        if pair.kind == "number":
            after = pair.end
            while document[after] in " \n":
                after += 1
            ended = seen > after
        else:
            ended = seen >= pair.end
        if ended:
            shown[name] = getattr(final, name)
        elif pair.kind == "string" and name in _TEXT_FIELDS and seen > pair.start:
            shown[name] = _text_so_far(document[pair.start + 1 : seen])
    return shown


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    table=_tables(),
    cuts=st.none() | st.lists(st.integers(min_value=0, max_value=2_000), max_size=8),
)
def test_a_row_being_written_shows_exactly_the_fields_that_ended(
    table: _Table, cuts: list[int] | None
) -> None:
    """Read after every character, or after chunks holding several rows each."""
    document = table.document
    chunks = list(document) if cuts is None else split_at(document, cuts)
    streamed = stream(list[Row], chunks, NATIVE)
    final: list[Row] = streamed.value
    assert final == [Row.model_validate_json(document[a : b + 1]) for a, b, _ in table.rows]
    ends = itertools.accumulate(len(chunk) for chunk in chunks)
    for seen, partial in zip(ends, streamed.partials, strict=True):
        expected_rows = [
            row for row, (_, close, _) in zip(final, table.rows, strict=True) if close < seen
        ]
        assert partial[: len(expected_rows)] == expected_rows, seen
        assert all(type(row) is Row for row in partial[: len(expected_rows)])
        opening = [
            (row, pairs)
            for row, (start, close, pairs) in zip(final, table.rows, strict=True)
            if start < seen <= close
        ]
        if not opening:
            assert len(partial) == len(expected_rows), seen
            continue
        assert len(partial) == len(expected_rows) + 1, seen
        ((final_row, pairs),) = opening
        open_row = partial[-1]
        expected = _open_row_fields(table, pairs, final_row, seen)
        assert type(open_row) is Row
        assert open_row.model_fields_set == set(expected), (seen, document[:seen])
        assert {name: getattr(open_row, name) for name in expected} == expected, seen


def test_rows_that_begin_alike_are_each_read_whole() -> None:
    rows = [
        {"sku": "A", "unitPrice": 1.5, "count": 1, "when": "2024-01-02"},
        {"sku": "A", "unitPrice": 1.5, "count": 1, "when": "2024-01-03", "note": "second"},
        {"sku": "A", "unitPrice": 1.5, "count": 12, "when": "2024-01-03"},
    ]
    text = json.dumps(rows)
    for count in (len(text), 40, 9):
        streamed = stream(list[Row], chunked(text, count), NATIVE)
        assert streamed.value == [Row.model_validate(row) for row in rows]
        assert_stream_consistent(streamed)


def test_a_row_that_does_not_validate_is_left_out_once_it_closes() -> None:
    rows = [
        {"sku": "A", "unitPrice": 1.5, "count": 1, "when": "2024-01-02"},
        {"sku": "B", "unitPrice": 2.5, "count": "many", "when": "2024-01-03"},
        {"sku": "C", "unitPrice": 3.5, "count": 3, "when": "2024-01-04"},
        {"sku": "D", "unitPrice": 4.5, "count": 4, "when": "2024-01-05"},
    ]
    text = json.dumps(rows)
    valid = {index: Row.model_validate(rows[index]) for index in (0, 2, 3)}
    # Every character; the rows all at once, the list still open; one row at a time.
    row_ends = [at + 3 for at in range(len(text)) if text.startswith("}, ", at)]
    for chunks in (list(text), [text[:-1], "]"], split_at(text, row_ends)):
        provider = MockStreamingProvider.with_stream(events(chunks, NATIVE))
        request = ChatRequest("m").user("extract").with_option(NATIVE)
        partials = []
        with Extractor().extract_stream(provider, list[Row], request) as opened:
            for event in opened:
                if isinstance(event, TextDelta):
                    partials.append(opened.partial)
            with pytest.raises(ParseError, match=r"at `\[1\].count`"):
                opened.finish()
        # A completed row shown is a validated one: the row that does not validate is left
        # out once it closes (while it is written, it shows the fields that arrived).
        shown = next(p for p in partials if p and len(p) == 3 and p[2] == valid[3])
        assert shown == list(valid.values())
        assert all(type(row) is Row and row.sku != "B" for p in partials if p for row in p[:-1])


@dataclasses.dataclass
class Reading:
    sensor: str
    value: float
    unit: str = "C"


class Entry(TypedDict):
    word: str
    count: int


def test_rows_of_dataclasses_and_typed_dicts_are_read_as_they_are_written() -> None:
    text = json.dumps([{"word": "héllo", "count": 3}, {"word": 'a"b\\c', "count": 40}])
    streamed = stream(list[Entry], list(text), NATIVE)
    assert_stream_consistent(streamed)
    assert streamed.value == [{"word": "héllo", "count": 3}, {"word": 'a"b\\c', "count": 40}]
    # Text grows as it is written; an escape shows once it is whole.
    words = [p[0].get("word") for p in streamed.partials if len(p) == 1]
    assert list(dict.fromkeys(words)) == [None, "", "h", "hé", "hél", "héll", "héllo"]
    words = [p[1].get("word") for p in streamed.partials if len(p) == 2]
    assert words[:9] == [None] * 9
    assert words[9:17] == ["", "a", "a", 'a"', 'a"b', 'a"b', 'a"b\\', 'a"b\\c']

    text = json.dumps([{"sensor": "s1", "value": 20.5}, {"sensor": "s2", "value": 3, "unit": "K"}])
    streamed = stream(list[Reading], list(text), NATIVE)
    assert streamed.value == [Reading("s1", 20.5), Reading("s2", 3.0, "K")]
    # An open dataclass holds the fields that arrived, the defaults of the others, and
    # `None` for a field with neither.
    firsts = [vars(p[0]) for p in streamed.partials if len(p) == 1]
    assert firsts[0] == {"sensor": None, "value": None, "unit": "C"}
    assert {"sensor": "s", "value": None, "unit": "C"} in firsts
    assert {"sensor": "s1", "value": None, "unit": "C"} in firsts
    assert firsts[-1] == {"sensor": "s1", "value": 20.5, "unit": "C"}
    assert all(type(p[0]) is Reading for p in streamed.partials if p)


@dataclasses.dataclass(frozen=True, slots=True)
class Gauge:
    sensor: str
    readings: list[Reading]
    note: str = ""


def test_an_open_dataclass_prints_compares_and_converts_at_every_step() -> None:
    """A dataclass's own `repr`, `==` and `asdict` read every field: a preview whose
    required fields have not arrived holds `None` in them, so a caller can print it."""
    value = {"sensor": "g", "readings": [{"sensor": "s1", "value": 1.5}], "note": "n"}
    streamed = stream(list[Gauge], list(json.dumps([value])), NATIVE)
    assert streamed.value == [Gauge("g", [Reading("s1", 1.5)], "n")]
    seen = []
    for partial in streamed.partials:
        for gauge in partial or []:
            assert type(gauge) is Gauge
            seen.append(repr(gauge))
            assert gauge == gauge
            assert set(dataclasses.asdict(gauge)) == {"sensor", "readings", "note"}
    assert seen[0] == "Gauge(sensor=None, readings=None, note='')"
    assert (
        "Gauge(sensor='g', readings=[Reading(sensor=None, value=None, unit='C')], note='')" in seen
    )
    assert seen[-1] == repr(streamed.value[0])


# The value at the end


class Contact(BaseModel):
    name: str
    email: str | None = None


def test_finish_returns_the_value_the_stream_settled_on() -> None:
    """Read at the end, the partial value is the output validated as `finish()` validates
    it; `finish()` returns that value rather than validating the same text again."""
    text = json.dumps({"name": "Ada", "email": None})
    for mode in (NATIVE, FORCED):
        provider = MockStreamingProvider.with_stream(events(chunked(text, 5), mode))
        request = ChatRequest("m").user("extract").with_option(mode)
        with Extractor().extract_stream(provider, Contact, request) as opened:
            for _ in opened:
                opened.partial  # noqa: B018 - read after every event, the end included
            last = opened.partial
            value = opened.finish().value
        assert value == Contact(name="Ada")
        assert value == last and value is not last  # a preview changed changes no result


def test_a_settled_value_does_not_spare_finish_its_undeclared_key_check() -> None:
    """The response reports the schema approximated, so `finish()` rejects an undeclared key
    (`e_mail`) even though the stream settled on a value before the response said so."""
    from allama import RequestField, Warning
    from allama.mock import ChatResponseBuilder, response_events

    response = (
        ChatResponseBuilder()
        .text('{"name": "Ada", "e_mail": "x"}')
        .warning(Warning.approximated(RequestField.RESPONSE_FORMAT, "`pattern` was removed"))
        .build()
    )
    provider = MockStreamingProvider.with_stream(response_events(response))
    request = ChatRequest("m").user("extract").with_option(NATIVE)
    with Extractor().extract_stream(provider, Contact, request) as opened:
        for _ in opened:
            opened.partial  # noqa: B018
        assert opened.partial == Contact(name="Ada")
        with pytest.raises(ParseError, match="e_mail") as raised:
            opened.finish()
    assert raised.value.metadata is not None
    assert raised.value.metadata.undeclared_key_rejections == 1


def test_an_open_object_gets_its_own_copy_of_an_empty_list_default() -> None:
    row = {"sku": "a", "name": "b", "price": 1, "quantity": 2, "in_stock": True}
    text = json.dumps({"title": "T", "items": [row]})
    streamed = stream(Catalog, list(text), NATIVE)
    close = text.index("}")  # the row is open while fewer characters than this arrived
    opened = [
        p.items[0]
        for seen, p in enumerate(streamed.partials, start=1)
        if seen <= close and p is not None and "items" in p.model_fields_set and p.items
    ]
    assert opened and all(item.tags == [] for item in opened)
    assert len({id(item.tags) for item in opened}) == len(opened)
    assert all(item.tags is not Item.model_fields["tags"].default for item in opened)
    assert all("tags" not in item.model_fields_set for item in opened)


# Objects with containers inside them, in a list: held as text while written, like rows


class Size(BaseModel):
    width: float
    height: float


class Record(BaseModel):
    name: str
    tags: list[str]
    size: Size | None = None
    counts: dict[str, int] = {}
    pet: Cat | Dog | None = None
    leaves: list[Leaf] = []
    note: str | None = None


class Shelf(BaseModel):
    label: str
    records: list[Record]


_records = st.builds(
    Record,
    name=_cell,
    tags=st.lists(_cell, max_size=3),
    size=st.none() | st.builds(Size, width=st.floats(-1e6, 1e6), height=st.floats(-1e6, 1e6)),
    counts=st.dictionaries(_cell, st.integers(-(10**9), 10**9), max_size=2),
    pet=st.none()
    | st.builds(Cat, kind=st.just("cat"), lives=st.integers(0, 9))
    | st.builds(Dog, good=st.none() | st.booleans()),
    leaves=st.lists(_leaves, max_size=2),
    note=st.none() | _cell,
)


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    records=st.lists(_records, max_size=4),
    cuts=st.none() | st.lists(st.integers(min_value=0, max_value=3_000), max_size=30),
    indent=st.sampled_from([None, 2]),
    ascii_only=st.booleans(),
    mode=st.sampled_from([NATIVE, FORCED]),
)
def test_objects_with_containers_in_a_list_are_consistent_after_every_chunk(
    records: list[Record],
    cuts: list[int] | None,
    indent: int | None,
    ascii_only: bool,
    mode: ExtractionMode,
) -> None:
    shelf = Shelf(label="S", records=records)
    document = json.dumps(shelf.model_dump(mode="json"), indent=indent, ensure_ascii=ascii_only)
    chunks = list(document) if cuts is None else split_at(document, cuts)
    streamed = stream(Shelf, chunks, mode)
    assert streamed.value == Shelf.model_validate_json(document)
    assert_stream_consistent(streamed)


def test_an_object_in_a_list_too_long_to_hold_is_scanned() -> None:
    """An object longer than a read should parse again each time is scanned token by token;
    the values are the same."""
    long = Record(name="n", tags=[f"tag {i}" for i in range(400)], note="x" * 3_000)
    shelf = Shelf(label="S", records=[long, Record(name="short", tags=["a"])])
    document = shelf.model_dump_json()
    assert len(document) > 2 * 2_000
    streamed = stream(Shelf, chunked(document, 400), NATIVE)
    assert streamed.value == shelf
    assert_stream_consistent(streamed)
    firsts = [
        p.records[0]
        for p in streamed.partials
        if p is not None and "records" in p.model_fields_set and p.records
    ]
    tags = [len(first.tags) for first in firsts if "tags" in first.model_fields_set]
    assert tags == sorted(tags) and tags[0] < 400 and tags[-1] == 400


def test_a_part_of_a_snapshot_that_is_kept_never_changes() -> None:
    """Keeping the list of a snapshot, or its last row, and letting the snapshot itself go:
    what is kept stays as it was read."""
    from allama.extract._partial import PartialValue

    text = catalog_document()
    partial: PartialValue[Catalog] = PartialValue(Catalog)
    lists: list[tuple[list[Item], list[dict[str, Any]]]] = []
    rows: list[tuple[Item, dict[str, Any]]] = []
    for index, start in enumerate(range(0, len(text), 41)):
        partial.feed(text[start : start + 41])
        value = partial.value()
        if value is None or "items" not in value.model_fields_set:
            continue
        if index % 60 == 0:
            lists.append((value.items, [item.model_dump() for item in value.items]))
        if index % 3 == 0 and value.items:
            rows.append((value.items[-1], value.items[-1].model_dump()))
        del value
    partial.end()
    assert partial.value() == Catalog.model_validate_json(text)
    assert all([item.model_dump() for item in kept] == dump for kept, dump in lists)
    assert all(row.model_dump() == dump for row, dump in rows)


# Dataclasses and TypedDicts read as pydantic reads them: `Field()` defaults, aliases


@pydantic_dataclass
class Tally:
    name: str
    count: int = Field(default=5, ge=0)
    tags: list[str] = Field(default_factory=list)
    stamp: str = Field(default_factory=lambda: "made")  # the type's own code: waits


@dataclasses.dataclass
class PlainTally:
    name: str
    count: int = Field(default=5)


def _previews(tp: Any, text: str) -> list[Any]:
    """The partial value after each character of `text`."""
    from allama.extract._partial import PartialValue

    partial: PartialValue[Any] = PartialValue(tp)
    seen = []
    for char in text:
        partial.feed(char)
        seen.append(partial.value())
    return seen


def test_an_open_dataclass_holds_the_default_a_field_assigned_gives() -> None:
    """`count: int = Field(default=5)` on a dataclass: the class holds the `FieldInfo`,
    validation gives 5; the preview shows 5, and an empty list of its own from a built-in
    factory, until the fields arrive."""
    text = json.dumps({"name": "ab", "count": 2, "tags": []})
    streamed = stream(Tally, list(text), NATIVE)
    assert streamed.value == Tally(name="ab", count=2, tags=[], stamp="made")
    opened = [p for p in streamed.partials[: text.index('"count"')] if p is not None]
    assert opened and all(type(p) is Tally for p in opened)
    assert [(p.count, p.tags, p.stamp) for p in opened] == [(5, [], None)] * len(opened)
    assert opened[-1].name == "ab"
    assert len({id(p.tags) for p in opened}) == len(opened)
    assert repr(opened[0]) == "Tally(name=None, count=5, tags=[], stamp=None)"

    streamed = stream(PlainTally, list('{"name": "ab"}'), NATIVE)
    assert streamed.value == PlainTally(name="ab", count=5)
    assert {p.count for p in streamed.partials if p is not None} == {5}


def test_a_constraint_given_with_a_dataclass_field_default_holds_in_the_preview() -> None:
    """`count: int = Field(default=5, ge=0)`: a count of -1 is left out of the preview (the
    default shows) as `finish()` rejects it."""
    seen = _previews(Tally, '{"name": "ab", "count": -1, "tags": []')
    assert None not in seen and {p.count for p in seen} == {5}
    assert seen[-1].name == "ab" and seen[-1].tags == []
    with pytest.raises(ValidationError):
        TypeAdapter(Tally).validate_json('{"name": "ab", "count": -1}')


class AliasedSpan(TypedDict):
    user_id: Annotated[int, Field(alias="userId")]
    note: NotRequired[Annotated[str, Field(validation_alias=AliasChoices("memo", "note"))]]


@pydantic_dataclass(config=ConfigDict(alias_generator=to_camel))
class AliasedPoint:
    user_id: int
    note: str = ""


@pydantic_dataclass(config=ConfigDict(alias_generator=to_camel, validate_by_name=True))
class NamedPoint:
    user_id: int


def test_typed_dicts_and_dataclasses_are_previewed_from_the_keys_validation_reads() -> None:
    """An alias (`Field(alias=...)`, an alias generator) is the key read, not the attribute
    name; where several keys are read, the first choice wins, whatever the order written."""
    text = '{"user_id": 9, "userId": 7, "note": "x", "memo": "m"}'
    streamed = stream(AliasedSpan, list(text), NATIVE)
    assert streamed.value == {"user_id": 7, "note": "m"}
    shown = [p for p in streamed.partials if p]
    assert all(p["user_id"] == 7 for p in shown)
    assert shown[0] == {"user_id": 7}
    assert {"user_id": 7, "note": "x"} in shown
    assert shown[-1] == {"user_id": 7, "note": "m"}

    streamed = stream(AliasedPoint, list(text), NATIVE)
    assert (streamed.value.user_id, streamed.value.note) == (7, "x")
    shown = [(p.user_id, p.note) for p in streamed.partials if p is not None]
    assert list(dict.fromkeys(shown)) == [(None, ""), (7, ""), (7, "x")]

    for text in ('{"user_id": 9, "userId": 7}', '{"userId": 7, "user_id": 9}'):
        streamed = stream(NamedPoint, list(text), NATIVE)
        assert streamed.value == NamedPoint(user_id=7)
        shown_ids = [p.user_id for p in streamed.partials if p is not None]
        assert shown_ids[-1] == 7 and set(shown_ids) <= {None, 7, 9}
    assert [p.user_id for p in stream(NamedPoint, list('{"user_id": 9}'), NATIVE).partials][-1] == 9


def test_a_typed_dict_with_an_aliased_item_streams_without_a_warning() -> None:
    """The item's type is validated without the `Field()` attributes that are the field's
    (an alias), which pydantic warns have no effect on a bare type; its constraints hold."""

    class Bounded(TypedDict):
        user_id: Annotated[int, Field(alias="userId", ge=0)]
        name: Annotated[str, Field(alias="Name", max_length=3)]

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        streamed = stream(Bounded, list('{"userId": 7, "Name": "abc"}'), NATIVE)
        assert streamed.value == {"user_id": 7, "name": "abc"}
        seen = _previews(Bounded, '{"userId": -1, "Name": "abcd"}')
    assert {"name": "ab"} in seen and {"name": "abc"} in seen
    assert seen[-1] == {}  # -1 and "abcd" are left out
    assert all("user_id" not in p for p in seen if p)


# A container of the other kind than the type says (an object where it says list, a list
# where it says model or map) is no value of the type: while it is open, as once it closes,
# the preview leaves it out (the field is not set; the value itself is `None`).


class Member(BaseModel):
    name: str
    age: int


class Crew(BaseModel):
    members: list[int] = []
    lead: Member | None = None
    roster: dict[str, Member] = {}
    name: str = ""


class Kinds(BaseModel):
    pair: tuple[int, ...] = ()
    tags: set[str] = set()
    either: dict[str, int] | list[int] | None = None
    scores: dict[str, int] | None = None
    people: list[Member] = []
    name: str = ""


def _every_preview(tp: Any, text: str) -> tuple[list[Any], Any]:
    """The partial value after each character of `text` streamed, and `finish()`'s value
    (`ParseError`'s class where it raises one)."""
    provider = MockStreamingProvider.with_stream(events(list(text), NATIVE))
    request = ChatRequest("m").user("extract").with_option(NATIVE)
    seen: list[Any] = []
    with Extractor().extract_stream(provider, tp, request) as opened:
        for event in opened:
            if isinstance(event, TextDelta):
                seen.append(opened.partial)
        try:
            value: Any = opened.finish().value
        except ParseError:
            value = ParseError
    return seen, value


@pytest.mark.parametrize(
    ("tp", "text"),
    [
        (list[Member], '{"people": [{"name": "Ada", "age": 36}]}'),
        (Member, '[{"name": "Ada", "age": 36}]'),
        (dict[str, Member], '[{"name": "Ada", "age": 36}]'),
        (Member | None, '[{"name": "Ada"}, {"name": "Bo"}]'),
    ],
)
def test_a_value_in_the_other_kind_of_container_is_never_previewed(tp: Any, text: str) -> None:
    seen, value = _every_preview(tp, text)
    assert value is ParseError
    assert seen == [None] * len(text)


def test_a_field_in_the_other_kind_of_container_is_left_out_while_it_is_open() -> None:
    text = (
        '{"members": {"a": 1}, "lead": [{"name": "Ada", "age": 36}], '
        '"roster": [{"name": "Bo", "age": 3}], "name": "Cy"}'
    )
    seen, value = _every_preview(Crew, text)
    assert value is ParseError
    assert all(type(p) is Crew for p in seen)
    shown = [p.model_dump(exclude_unset=True) for p in seen]
    assert list(dict.fromkeys(map(json.dumps, shown))) == [
        "{}",
        '{"name": ""}',
        '{"name": "C"}',
        '{"name": "Cy"}',
    ]


def test_a_container_a_branch_of_the_union_takes_is_shown_and_others_left_out() -> None:
    wrong = '{"pair": {"a": 1}, "tags": {"a": "b"}, "either": [1, 2], "scores": [1]}'
    seen, value = _every_preview(Kinds, wrong)
    assert value is ParseError
    shown = [p.model_dump(exclude_unset=True) for p in seen if p is not None]
    assert shown[-1] == {"either": [1, 2]}
    assert all(set(dump) <= {"either"} for dump in shown)

    right = '{"either": {"a": 1}, "scores": {"b": 2, "c": 3}, "pair": [4], "tags": ["t"]}'
    seen, value = _every_preview(Kinds, right)
    assert value == Kinds(either={"a": 1}, scores={"b": 2, "c": 3}, pair=(4,), tags={"t"})
    shown = [p.model_dump(exclude_unset=True) for p in seen if p is not None]
    assert {"either": {"a": 1}, "scores": {"b": 2}} in shown
    assert shown[-1] == value.model_dump(exclude_unset=True)


def _fits(value: Any, tp: Any) -> bool:
    """Whether `value` is a value of `tp` as a preview is one: a model holds the fields that
    arrived (those not arrived yet are not set), each of its field's type; a list's items,
    a map's values, of theirs; anything else what strict validation takes as it is."""
    origin = typing.get_origin(tp)
    if origin is typing.Union or origin is types.UnionType:
        return any(_fits(value, option) for option in typing.get_args(tp))
    if tp is type(None):
        return value is None
    if isinstance(tp, type) and issubclass(tp, BaseModel):
        fields = tp.model_fields
        return type(value) is tp and all(
            _fits(getattr(value, name), fields[name].annotation) for name in value.model_fields_set
        )
    if origin is list:
        (item,) = typing.get_args(tp)
        return type(value) is list and all(_fits(each, item) for each in value)
    if origin is dict:
        _, item = typing.get_args(tp)
        return type(value) is dict and all(
            type(key) is str and _fits(each, item) for key, each in value.items()
        )
    try:
        return bool(TypeAdapter(tp).validate_python(value, strict=True) == value)
    except ValidationError:
        return False


_json_keys = st.sampled_from(
    ["name", "age", "members", "lead", "roster", "pair", "tags", "either", "scores", "people"]
)
_json_documents = st.recursive(
    st.none() | st.booleans() | st.integers(-3, 99) | st.sampled_from(["", "Ada", "7"]),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(_json_keys, inner, max_size=4),
    max_leaves=14,
)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    document=_json_documents,
    tp=st.sampled_from([list[Member], Member, Crew, dict[str, Member], Kinds, Member | None]),
)
def test_every_preview_of_any_document_is_none_or_of_the_type(document: Any, tp: Any) -> None:
    """Whatever shape the model writes, each preview is a value of the type as far as it
    goes; where `finish()` returns a value, each is consistent with it."""
    seen, value = _every_preview(tp, json.dumps(document))
    for partial in seen:
        assert partial is None or _fits(partial, tp), partial
    if value is not ParseError:
        for partial in seen:
            assert_consistent(partial, value)
        assert seen[-1] == value


class Noted(BaseModel):
    count: Annotated[int, {"doc": "how many"}]
    names: list[Annotated[str, {"doc": "a name"}]]


class NotedInText(BaseModel):
    count: Annotated[int, "how many"]
    names: list[Annotated[str, "a name"]]


@pytest.mark.parametrize("mode", [NATIVE, FORCED])
def test_metadata_that_cannot_be_hashed_streams_as_any_other_does(mode: ExtractionMode) -> None:
    # `Annotated` holding a dict cannot be hashed, so its shape is not cached: read each time.
    chunks = list('{"count": 2, "names": ["ab", "cd"]}')
    noted = stream(Noted, chunks, mode)
    assert noted.value == Noted(count=2, names=["ab", "cd"])
    assert noted.dumps == stream(NotedInText, chunks, mode).dumps
    assert {"count": 2, "names": ["ab", "c"]} in noted.dumps
    assert_stream_consistent(noted)
    root = stream(Annotated[Noted, {"doc": "the root"}], chunks, mode)
    assert root.value == noted.value
    assert root.dumps == stream(Annotated[Noted, "the root"], chunks, mode).dumps


class _ComparedByIdentity(type):
    """A metaclass defining `__eq__` alone: its classes cannot be hashed."""

    def __eq__(cls, other: object) -> bool:
        return cls is other


@dataclasses.dataclass
class UnhashableTally(metaclass=_ComparedByIdentity):
    name: str
    count: int


def test_a_dataclass_whose_class_cannot_be_hashed_is_previewed_field_by_field() -> None:
    # Its field types are read each time, not cached by the class.
    seen = _previews(UnhashableTally, '{"name": "ab", "count": 3}')
    shown = [(item.name, item.count) for item in seen]
    assert shown == [(None, None)] * 9 + [("", None), ("a", None)] + [("ab", None)] * 14 + [
        ("ab", 3)
    ]
    assert seen[-1] == UnhashableTally("ab", 3)


# Reading after every chunk stays linear on other shapes too (rows that hold an `Iterable`,
# a long text being written, a map), and what each read shows is what a reader given the
# text so far at once shows; a snapshot, or a part of one, kept stays as it was read, and
# each snapshot's iterators are its own.


class TaggedLine(BaseModel):
    sku: str
    tags: Iterable[str]


class Sheet(BaseModel):
    title: str
    lines: list[TaggedLine]
    prices: dict[str, float]
    groups: dict[str, dict[str, int]]


_WORDS = st.text(st.sampled_from(list('ab "\\\n/\u00e9\U0001f600\x01')), max_size=10)


@st.composite
def _sheets(draw: st.DrawFn) -> str:
    lines = st.fixed_dictionaries({"sku": _WORDS, "tags": st.lists(_WORDS, max_size=3)})
    document = {
        "title": draw(_WORDS),
        "lines": draw(st.lists(lines, max_size=6)),
        "prices": draw(st.dictionaries(_WORDS, st.integers(-999, 999).map(lambda n: n / 4))),
        "groups": draw(
            st.dictionaries(_WORDS, st.dictionaries(_WORDS, st.integers(-9, 9), max_size=3))
        ),
    }
    return json.dumps(document, ensure_ascii=draw(st.booleans()))


def _plain(value: Any) -> Any:
    """A preview as plain data, its iterators read through (so a snapshot whose iterator
    another one's reading emptied shows it)."""
    if isinstance(value, BaseModel):
        fields = {name: _plain(item) for name, item in value.__dict__.items()}
        return type(value).__name__, sorted(value.model_fields_set), fields
    if isinstance(value, Iterator):
        return "iterator", [_plain(item) for item in value]
    if isinstance(value, list):
        return [_plain(item) for item in value]
    if isinstance(value, dict):
        return {key: _plain(item) for key, item in value.items()}
    return value


def _read_at_once(tp: Any, text: str, ended: bool = False) -> Any:
    """The partial value of a reader given `text` in one piece."""
    from allama.extract._partial import PartialValue

    partial: PartialValue[Any] = PartialValue(tp)
    partial.feed(text)
    if ended:
        partial.end()
    return partial.value()


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    text=_sheets(),
    cuts=st.lists(st.integers(0, 10_000), max_size=60),
    plan=st.lists(st.integers(0, 4), min_size=1, max_size=8),
)
def test_each_read_shows_what_the_text_so_far_read_at_once_shows(
    text: str, cuts: list[int], plan: list[int]
) -> None:
    from allama.extract._partial import PartialValue

    partial: PartialValue[Sheet] = PartialValue(Sheet)
    kept: list[tuple[Any, Any]] = []
    fed = ""
    for index, chunk in enumerate(split_at(text, cuts)):
        partial.feed(chunk)
        fed += chunk
        value = partial.value()
        action = plan[index % len(plan)]
        if action == 0:  # read through at once (its iterators too), then let go
            assert _plain(value) == _plain(_read_at_once(Sheet, fed))
        elif action == 1:  # kept whole, read through at the end
            kept.append((value, _read_at_once(Sheet, fed)))
        elif action == 2 and value is not None and getattr(value, "lines", None):
            # A row kept (or its iterator, or the map being written), the snapshot let go.
            reference = _read_at_once(Sheet, fed)
            kept.append((value.lines[-1], reference.lines[-1]))
            kept.append(
                (value.lines[0].__dict__.get("tags"), reference.lines[0].__dict__.get("tags"))
            )
            kept.append((value.__dict__.get("prices"), reference.__dict__.get("prices")))
        # (3, 4: let go unread)
        del value
    partial.end()
    assert _plain(partial.value()) == _plain(_read_at_once(Sheet, text, ended=True))
    final = Sheet.model_validate_json(text)
    assert _plain(partial.value()) == _plain(final)
    assert [_plain(value) for value, _ in kept] == [_plain(reference) for _, reference in kept]


def _iterable_rows(rows: int) -> str:
    lines = [{"sku": f"S{i}", "tags": ["a", f"t{i}"]} for i in range(rows)]
    return json.dumps({"title": "t", "lines": lines, "prices": {}, "groups": {}})


def test_each_snapshot_of_rows_holding_an_iterable_has_iterators_of_its_own() -> None:
    """A snapshot kept, a row of it kept, an iterator of it kept, or one read partly or
    through: every other snapshot's iterators are whole."""
    from allama.extract._partial import PartialValue

    text = _iterable_rows(30)
    partial: PartialValue[Sheet] = PartialValue(Sheet)
    snapshots, rows, iterators = [], [], []

    def tags(lines: list[TaggedLine]) -> list[list[str]]:
        """The tags of the rows whose tags have come, read through."""
        return [list(line.tags) for line in lines if "tags" in line.__dict__]

    def expected(count: int) -> list[list[str]]:
        return [["a", f"t{i}"] for i in range(count)]

    for index, start in enumerate(range(0, len(text), 9)):
        partial.feed(text[start : start + 9])
        value = partial.value()
        lines = [] if value is None else value.__dict__.get("lines", [])
        if len(lines) < 2:
            continue
        if index % 11 == 0:
            snapshots.append(value)
        elif index % 11 == 3:
            rows.append(lines[0])
        elif index % 11 == 5:
            iterators.append(lines[0].tags)
        elif index % 11 == 7:
            next(lines[0].tags)  # read partly
        elif index % 11 == 9:
            shown = tags(lines)
            assert shown == expected(len(shown))
        del value, lines
    partial.end()
    final = partial.value()
    assert final is not None
    assert [line.sku for line in final.lines] == [f"S{i}" for i in range(30)]
    assert tags(final.lines) == expected(30)
    assert snapshots and rows and iterators
    for snapshot in snapshots:
        shown = tags(snapshot.lines)
        assert len(shown) > 0 and shown == expected(len(shown))
    assert [list(row.tags) for row in rows] == [["a", "t0"]] * len(rows)
    assert [list(tags) for tags in iterators] == [["a", "t0"]] * len(iterators)


@pytest.mark.skipif(sys.implementation.name != "cpython", reason="reference counts tell")
def test_rows_holding_an_iterable_are_copied_once_each_where_snapshots_are_let_go(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Each read gives each completed row iterators of its own: a copy of the row, made
    again only where the caller kept the last one (or its iterator, or read it)."""
    from allama.extract._partial import PartialValue

    copies = 0
    reading = False
    real = copy.copy

    def counted(value: Any) -> Any:
        nonlocal copies
        copies += reading and type(value) is TaggedLine
        return real(value)

    monkeypatch.setattr(copy, "copy", counted)
    rows = 200
    text = _iterable_rows(rows)
    partial: PartialValue[Sheet] = PartialValue(Sheet)
    reads = 0
    for start in range(0, len(text), 8):
        partial.feed(text[start : start + 8])
        reading = True
        partial.value()
        reading = False
        reads += 1
    assert reads > 900
    # Once each as it completes (and the row being written, whose tags have come), then
    # once each as the list ends and as the value does (each a list of its own); before,
    # every completed row on every read: about `rows * reads / 2`.
    assert copies < 4 * rows


def test_a_long_text_being_written_is_decoded_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """A read decodes the text that came since the last one (and an escape cut off at its
    end), not the whole text so far."""
    from allama.extract._partial import PartialValue

    decoded = 0
    real = json.loads

    def counted(text: Any, *args: Any, **kwargs: Any) -> Any:
        nonlocal decoded
        decoded += len(text)
        return real(text, *args, **kwargs)

    monkeypatch.setattr(json, "loads", counted)
    body = json.dumps('He said "caf\u00e9 \U0001f600".\n' * 300)
    text = '{"body": ' + body + "}"
    partial: PartialValue[Any] = PartialValue(dict[str, str])
    shown = []
    for start in range(0, len(text), 7):
        partial.feed(text[start : start + 7])
        value = partial.value()
        shown.append(None if value is None else value.get("body"))
    assert decoded < 3 * len(body)  # (before: the whole text so far on every read)
    assert shown[-1] == real(body)
    texts = [text for text in shown if text is not None]
    assert all(real(body).startswith(text) for text in texts)
    assert all(after.startswith(before) for before, after in itertools.pairwise(texts))
    assert len(set(texts)) > 1_000  # it grows with (nearly) every chunk


@pytest.mark.parametrize(
    ("pieces", "expected"),
    [
        # An escape cut off, and half a surrogate pair, wait for the rest of them.
        (['"caf\\u00', "e9 \\ud83d", "\\ude00 ok"], ["caf", "café ", "café 😀 ok"]),
        (['"a\\', '"b\\\\', "\\", "nc"], ["a", 'a"b\\', 'a"b\\', 'a"b\\\nc']),
        # Half a pair alone is U+FFFD (as `finish()` reads it) once what follows shows it
        # alone.
        (['"ok \\ud83d', " x", "\\u00e9"], ["ok ", "ok \ufffd x", "ok \ufffd x\u00e9"]),
        # Not JSON (a raw control character): shown as written, as before.
        (['"a\\n', "\x01b"], ["a\n", "a\\n\x01b"]),
    ],
)
def test_a_text_being_written_shows_what_has_come_of_it(
    pieces: list[str], expected: list[str]
) -> None:
    from allama.extract._partial import PartialValue

    partial: PartialValue[Any] = PartialValue(dict[str, str])
    partial.feed('{"body": ')
    shown = []
    for piece in pieces:
        partial.feed(piece)
        value = partial.value()
        shown.append(None if value is None else value.get("body"))
    assert shown == expected


def test_a_map_being_written_kept_never_changes_and_one_let_go_is_brought_up_to_date() -> None:
    from allama.extract._partial import PartialValue

    entries = {f"k{i}": i / 2 for i in range(300)}
    text = json.dumps({"title": "t", "lines": [], "prices": entries, "groups": {}})
    partial: PartialValue[Sheet] = PartialValue(Sheet)
    kept: list[tuple[dict[str, float], dict[str, float]]] = []
    for index, start in enumerate(range(0, len(text), 6)):
        partial.feed(text[start : start + 6])
        value = partial.value()
        prices = None if value is None else value.__dict__.get("prices")
        if prices is None:
            continue
        assert list(prices.items()) == list(entries.items())[: len(prices)]
        if index % 13 == 0:
            kept.append((prices, dict(prices)))
        del value, prices
    partial.end()
    final = partial.value()
    assert final is not None and final.prices == entries
    assert len(kept) > 50
    assert all(prices == copied for prices, copied in kept)


class Tagging(BaseModel):
    lines: list[TaggedLine]


def test_a_list_of_rows_the_caller_changed_and_let_go_leaves_the_next_one_whole() -> None:
    """The list of rows with an `Iterable` a snapshot holds is the caller's to change: one
    changed (an item taken out, or put in) and let go is not handed out again."""
    from allama.extract._partial import PartialValue

    text = _iterable_rows(40)
    partial: PartialValue[Tagging] = PartialValue(Tagging)
    changed = 0
    for start in range(0, len(text), 5):
        partial.feed(text[start : start + 5])
        value = partial.value()
        lines = [] if value is None else value.__dict__.get("lines", [])
        done = lines[:-1]  # (the last may be the row being written)
        assert [line.sku for line in done] == [f"S{i}" for i in range(len(done))]
        if len(lines) > 1:
            if changed % 2:
                lines.pop(0)
            else:
                lines.append(lines[0])
            changed += 1
        del value, lines
    partial.end()
    final = partial.value()
    assert final is not None and [line.sku for line in final.lines] == [f"S{i}" for i in range(40)]
    assert changed > 200


@pytest.mark.parametrize("mode", [NATIVE, FORCED])
def test_an_upper_case_escape_of_half_a_pair_is_u_fffd_in_the_preview_too(
    mode: ExtractionMode,
) -> None:
    """JSON writes an escape's hex digits in either case: `"\\uD83D"` alone, in a map and
    a list closed within one piece, is previewed as `finish()` reads it, U+FFFD."""

    class Tagged(BaseModel):
        meta: dict[str, str]
        tags: list[str]
        title: str

    chunks = ['{"meta": {"k": "caf\\uD83D"}, "tags": ["a\\uD83D"], ', '"title": "t"', "}"]
    provider = MockStreamingProvider.with_stream(events(chunks, mode))
    request = ChatRequest("m").user("extract").with_option(mode)
    with Extractor().extract_stream(provider, Tagged, request) as opened:
        for event in opened:
            if isinstance(event, TextDelta | ToolCallDelta) and opened.partial is not None:
                opened.partial.model_dump_json()  # no half of a character to refuse
        value = opened.finish().value
    assert value == Tagged(meta={"k": "caf\ufffd"}, tags=["a\ufffd"], title="t")
