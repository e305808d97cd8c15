"""What `stream.partial` shows of objects whose fields a type fills in its own ways: several
keys for one field, default factories, `model_post_init`; and how often a model's
validators run while `partial` is read; what it shows of an `Iterable` field (pydantic's
value of one is a single iterator that validates each item as it is read)."""

from __future__ import annotations

import itertools
import json
from collections import Counter
from collections.abc import Iterable
from typing import Annotated, Any

import pytest
from pydantic import AliasChoices, BaseModel, ConfigDict, Field, PrivateAttr, model_validator

from allama import (
    BlockStart,
    BlockStop,
    ChatRequest,
    ExtractionMode,
    Extractor,
    Finish,
    ParseError,
    ResponseStart,
    StreamBlockType,
    StreamEvent,
    TextDelta,
)
from allama.mock import MockProvider, MockStreamingProvider

REQUEST = ChatRequest("m").user("extract").with_option(ExtractionMode.NATIVE)
SIZES = [1, 3, 1_000]


def provider_of(text: str, size: int) -> MockStreamingProvider:
    """A provider streaming `text` in chunks of `size` characters."""
    chunks = [text[i : i + size] for i in range(0, len(text), size)]
    events: list[StreamEvent] = [
        ResponseStart(),
        BlockStart(index=0, block_type=StreamBlockType.TEXT),
        *[TextDelta(index=0, text=chunk) for chunk in chunks],
        BlockStop(index=0),
        Finish(finish_reason="stop"),
    ]
    return MockStreamingProvider.with_stream(events)


def stream(tp: Any, text: str, size: int) -> tuple[list[Any], Any]:
    """The partial value after each chunk of `size` characters, and `finish()`'s value."""
    partials: list[Any] = []
    with Extractor().extract_stream(provider_of(text, size), tp, REQUEST) as opened:
        for event in opened:
            if isinstance(event, TextDelta):
                partials.append(opened.partial)
        value = opened.finish().value
    return partials, value


class Choice(BaseModel):
    v: int = Field(validation_alias=AliasChoices("a", "b"))
    w: int = 0


@pytest.mark.parametrize("size", SIZES)
def test_a_field_read_from_several_keys_shows_the_first_choice_written(size: int) -> None:
    partials, value = stream(Choice, '{"a": 1, "b": 2, "w": 5}', size)
    assert value.model_dump() == {"v": 1, "w": 5}
    shown = [p.v for p in partials if p is not None and "v" in p.model_fields_set]
    assert shown and set(shown) == {1}


class Named(BaseModel):
    model_config = ConfigDict(validate_by_name=True)
    first_name: str = Field(alias="firstName")
    n: int = 0


@pytest.mark.parametrize("size", SIZES)
def test_an_alias_is_shown_before_the_name_as_validation_reads_them(size: int) -> None:
    text = '{"firstName": "Ada", "first_name": "Bob", "n": 1}'
    partials, value = stream(Named, text, size)
    assert value.first_name == "Ada"
    shown = [p.first_name for p in partials if p is not None and "first_name" in p.model_fields_set]
    assert shown and all("Ada".startswith(name) for name in shown)
    assert shown[-1] == "Ada"


class Extras(BaseModel):
    model_config = ConfigDict(extra="allow")
    v: int = Field(validation_alias=AliasChoices("a", "b"))


def test_the_key_not_taken_is_an_extra_as_validation_keeps_it() -> None:
    partials, value = stream(Extras, '{"b": 2, "a": 1, "z": 3}', 1)
    assert value.v == 1 and value.model_extra == {"b": 2, "z": 3}
    open_ones = [p for p in partials if p is not None and "a" in (p.model_extra or {})]
    assert open_ones == []  # `a` is the field's, never an extra
    assert partials[-1] == value


class FromData(BaseModel):
    x: int
    y: int = Field(default_factory=lambda data: data["x"] * 2)


@pytest.mark.parametrize("size", SIZES)
def test_a_factory_taking_the_data_does_not_run_on_an_open_object(size: int) -> None:
    partials, value = stream(FromData, '{"x": 3}', size)  # read after `{` raised KeyError
    assert value == FromData(x=3, y=6)
    open_ones = [p for p in partials if p is not None and p != value]
    assert all("y" not in p.model_fields_set and "y" not in p.__dict__ for p in open_ones)
    assert partials[-1] == value


class Item(BaseModel):
    x: int
    y: int = Field(default_factory=lambda data: data["x"] + 1)


class Box(BaseModel):
    items: list[Item]


@pytest.mark.parametrize("size", SIZES)
def test_rows_with_a_factory_taking_the_data_are_shown_as_they_open(size: int) -> None:
    partials, value = stream(Box, '{"items": [{"x": 1}, {"x": 2}]}', size)
    assert value == Box(items=[Item(x=1, y=2), Item(x=2, y=3)])
    assert partials[-1] == value
    # Completed rows are the validated ones; an open row has no `y` yet.
    for p in partials:
        for row in getattr(p, "items", []):
            assert row in value.items or "y" not in row.__dict__


class PostInit(BaseModel):
    a: int
    b: str = ""
    _doubled: int = PrivateAttr(default=0)

    def model_post_init(self, context: Any) -> None:
        self._doubled = self.a * 2


@pytest.mark.parametrize("size", [1, 3])
def test_model_post_init_runs_when_the_object_completes_not_while_it_is_open(size: int) -> None:
    partials, value = stream(PostInit, '{"b": "x", "a": 3}', size)
    assert value == PostInit(a=3, b="x") and value._doubled == 6
    open_ones = [p for p in partials if p is not None and p is not partials[-1]]
    assert open_ones and all(p._doubled == 0 for p in open_ones)
    assert partials[-1] == value and partials[-1]._doubled == 6


COUNTER = itertools.count()


class Numbered(BaseModel):
    number: int = Field(default_factory=lambda: next(COUNTER))
    name: str
    tags: list[str] = Field(default_factory=list)


@pytest.mark.parametrize("size", [1, 3])
def test_a_default_factory_is_not_run_by_reads_of_an_open_object(size: int) -> None:
    before = next(COUNTER)
    partials, value = stream(Numbered, '{"name": "abcdef"}', size)
    # The reads made no numbers: `finish()`'s value holds the first made after `before`.
    assert value.number == before + 1
    open_ones = [p for p in partials if p is not None and p != value]
    assert open_ones
    assert all("number" not in p.__dict__ and p.tags == [] for p in open_ones)
    assert partials[-1] == value


class Row(BaseModel):
    name: str

    @model_validator(mode="after")
    def count(self) -> Row:
        RUNS[f"row {self.name}"] += 1
        return self


class Doc(BaseModel):
    title: str
    rows: list[Row]

    @model_validator(mode="after")
    def count(self) -> Doc:
        RUNS["doc"] += 1
        return self


RUNS: Counter[str] = Counter()
DOC = '{"title": "t", "rows": [{"name": "a"}, {"name": "b"}]}'


@pytest.mark.parametrize("size", [1, 3])
def test_the_value_itself_is_validated_once_while_partial_is_read(size: int) -> None:
    RUNS.clear()
    Extractor().extract(MockProvider.with_text(DOC), Doc, REQUEST)
    assert RUNS == {"doc": 1, "row a": 1, "row b": 1}
    RUNS.clear()
    partials, value = stream(Doc, DOC, size)
    # A row: once when it completes, once more when the value is validated as a whole.
    assert RUNS == {"doc": 1, "row a": 2, "row b": 2}
    assert partials[-1] == value and partials[-1] is not value


class Filled(BaseModel):
    a: int
    b: int = 0

    @model_validator(mode="before")
    @classmethod
    def fill(cls, data: Any) -> Any:
        return {**data, "b": 0}


@pytest.mark.parametrize("size", [1, 1_000])
def test_the_last_partial_value_is_the_validated_one(size: int) -> None:
    partials, value = stream(Filled, json.dumps({"a": 1}), size)
    assert value.model_fields_set == {"a", "b"}
    assert partials[-1] == value and partials[-1].model_fields_set == {"a", "b"}


# An `Iterable`: its items checked when it completes, each snapshot an iterator of its own.


def previews(tp: Any, text: str, size: int) -> tuple[list[Any], Any, str | None]:
    """The partial value after each chunk, the one read after the stream ended, and why
    `finish()` refused the output (`None`: it took it)."""
    partials: list[Any] = []
    with Extractor(retries=0).extract_stream(provider_of(text, size), tp, REQUEST) as opened:
        for event in opened:
            if isinstance(event, TextDelta):
                partials.append(opened.partial)
        try:
            opened.finish()
        except ParseError as error:
            return partials, opened.partial, str(error).split("mode: ")[-1]
        return partials, opened.partial, None


class Ids(BaseModel):
    ids: Iterable[int]
    note: str = ""


@pytest.mark.parametrize("size", SIZES)
def test_an_iterable_whose_items_do_not_fit_is_left_out_of_the_preview(size: int) -> None:
    text = '{"ids": [1, "x"], "note": "more text after the list"}'
    partials, last, refused = previews(Ids, text, size)
    assert refused == 'at `ids[1]`: invalid type: string "x", expected an integer'
    shown = [p for p in partials if p is not None]
    assert shown and all("ids" not in p.model_fields_set for p in [*shown, last])
    assert last.note == "more text after the list"


@pytest.mark.parametrize("size", SIZES)
def test_each_snapshot_of_an_iterable_is_an_iterator_of_its_own(size: int) -> None:
    text = '{"ids": [1, 2, 3], "note": "more text after the list"}'
    partials, last, refused = previews(Ids, text, size)
    assert refused is None
    shown = [p for p in partials if p is not None and "ids" in p.model_fields_set]
    assert shown and all(iter(p.ids) is p.ids for p in shown)  # an iterator, as the type's
    # Each written out in turn: reading one through empties none of the others.
    assert [json.loads(p.model_dump_json())["ids"] for p in shown] == [[1, 2, 3]] * len(shown)
    assert list(last.ids) == [1, 2, 3]
    assert list(last.ids) == []  # the caller's own iterator, read
    assert [list(p.ids) for p in shown] == [[]] * len(shown)


class Tagged(BaseModel):
    id: int
    tags: Iterable[str]


class Tags(BaseModel):
    rows: list[Tagged]


ROWS = '[{"id": 1, "tags": ["a", "b"]}, {"id": 2, "tags": ["c", 3]}, {"id": 3, "tags": []}]'


def rows_of(rows: list[Tagged]) -> list[tuple[int, list[str]]]:
    return [(row.id, list(row.tags)) for row in rows]


@pytest.mark.parametrize("size", SIZES)
@pytest.mark.parametrize("at_root", [False, True])
def test_a_row_whose_iterable_does_not_fit_is_left_out(size: int, at_root: bool) -> None:
    tp: Any = list[Tagged] if at_root else Tags
    partials, last, refused = previews(tp, ROWS if at_root else f'{{"rows": {ROWS}}}', size)
    where = "[1]" if at_root else "rows[1]"
    assert refused == f"at `{where}.tags[1]`: invalid type: integer `3`, expected a string"
    lists = [p if at_root else getattr(p, "rows", []) for p in [*partials, last] if p is not None]
    # Every snapshot's rows read through, after the stream: completed ones hold their items.
    read = [rows_of([row for row in rows if "tags" in row.model_fields_set]) for rows in lists]
    assert all(rows in ([], [(1, ["a", "b"])], [(1, ["a", "b"]), (3, [])]) for rows in read)
    assert read[-1] == [(1, ["a", "b"]), (3, [])]
    assert [row.id for row in lists[-1]] == [1, 3]


@pytest.mark.parametrize("size", SIZES)
def test_an_iterable_at_the_root_is_shown_checked_once_it_completes(size: int) -> None:
    partials, last, refused = previews(Iterable[int], "[1, 2, 3]", size)
    assert refused is None
    shown = [p for p in partials if p is not None]
    assert shown and all(iter(p) is p for p in shown)
    assert [list(p) for p in [*shown, last]] == [[1, 2, 3]] * (len(shown) + 1)
    partials, last, refused = previews(Iterable[int], '[1, "x"]', size)
    assert refused == 'at `[1]`: invalid type: string "x", expected an integer'
    assert [*partials, last] == [None] * (len(partials) + 1)


# A `null` for a field with a default (OpenAI's strict mode sends every such field required
# and nullable): a completed part is shown without it, its default applied, as `finish()`
# reads it, not left out until the value ends.


class Line(BaseModel):
    name: str
    qty: int = 1


class Order(BaseModel):
    rows: list[Line]
    note: str


def ends(text: str, size: int, count: int) -> list[str]:
    """The text streamed so far after each of the `count` chunks of `size` characters."""
    return [text[: min(size * (at + 1), len(text))] for at in range(count)]


def opened(seen: str) -> int:
    """Whether a row is open at the end of `seen` (the text of an object of rows so far)."""
    return int(seen.count("{") - 1 > seen.count("}"))


def fields(row: Any) -> tuple[dict[str, Any], set[str]]:
    return row.model_dump(), row.model_fields_set


@pytest.mark.parametrize("size", SIZES)
def test_a_row_with_a_null_for_a_defaulted_field_stays_shown_where_it_is(size: int) -> None:
    text = (
        '{"rows":[{"name":"a","qty":null},{"name":"b","qty":2},{"name":"c","qty":3}],"note":"done"}'
    )
    partials, value = stream(Order, text, size)
    lines = [Line(name="a"), Line(name="b", qty=2), Line(name="c", qty=3)]
    assert value == Order(rows=lines, note="done")
    for partial, seen in zip(partials, ends(text, size, len(partials)), strict=True):
        closed = min(seen.count("}"), 3)  # the rows completed so far
        rows = vars(partial).get("rows", []) if partial is not None else []
        assert len(rows) in (closed, closed + 1)
        assert [fields(row) for row in rows[:closed]] == [
            fields(row) for row in value.rows[:closed]
        ]
    assert partials[-1] == value
    assert fields(partials[-1].rows[0]) == ({"name": "a", "qty": 1}, {"name"})


class Meta(BaseModel):
    source: str
    page: int = 0


class Paper(BaseModel):
    meta: Meta
    title: str


class Entry(BaseModel):
    name: str
    meta: Meta
    qty: int = 1


class Entries(BaseModel):
    rows: list[Entry]


@pytest.mark.parametrize("size", SIZES)
def test_a_nested_object_with_a_null_for_a_defaulted_field_is_shown_once_it_completes(
    size: int,
) -> None:
    text = '{"meta":{"source":"s","page":null},"title":"T"}'
    partials, value = stream(Paper, text, size)
    assert value == Paper(meta=Meta(source="s"), title="T")
    closed = text.index("null}") + len("null}")
    for partial, seen in zip(partials, ends(text, size, len(partials)), strict=True):
        if len(seen) >= closed:
            assert fields(partial.meta) == ({"source": "s", "page": 0}, {"source"})
    assert partials[-1] == value


@pytest.mark.parametrize("size", SIZES)
def test_an_object_completed_in_an_open_row_is_shown_without_its_stand_in_null(
    size: int,
) -> None:
    text = '{"rows":[{"name":"a","meta":{"source":"s","page":null},"qty":null}]}'
    partials, value = stream(Entries, text, size)
    assert value == Entries(rows=[Entry(name="a", meta=Meta(source="s"))])
    closed = text.index("null}") + len("null}")
    for partial, seen in zip(partials, ends(text, size, len(partials)), strict=True):
        if len(seen) >= closed:
            assert fields(partial.rows[0].meta) == ({"source": "s", "page": 0}, {"source"})
    assert fields(partials[-1].rows[0]) == (
        {"name": "a", "meta": {"source": "s", "page": 0}, "qty": 1},
        {"name", "meta"},
    )
    assert partials[-1] == value


@pytest.mark.parametrize("size", SIZES)
def test_a_null_for_a_required_field_keeps_the_row_out_and_fails_finish(size: int) -> None:
    text = '{"rows":[{"name":null,"qty":null},{"name":"b","qty":null}],"note":"done"}'
    partials, last, refused = previews(Order, text, size)
    assert refused == "at `rows[0].name`: invalid type: null, expected a string"
    for partial, seen in zip(partials, ends(text, size, len(partials)), strict=True):
        rows = vars(partial).get("rows", []) if partial is not None else []
        # The rows completed (the open one, last, aside): the first left out, the second shown.
        completed = rows[: len(rows) - opened(seen)]
        if seen.count("}") == 1:
            assert completed == []
        elif seen.count("}") >= 2:
            assert [fields(row) for row in completed] == [({"name": "b", "qty": 1}, {"name"})]
    assert last is not None and [fields(row) for row in last.rows] == [
        ({"name": "b", "qty": 1}, {"name"})
    ]


class Noted(BaseModel):
    name: str
    remark: str | None = "none given"
    qty: int = 1


class NotedRows(BaseModel):
    rows: list[Noted]
    note: str


@pytest.mark.parametrize("size", SIZES)
def test_a_null_for_an_optional_field_stays_none_beside_a_stand_in(size: int) -> None:
    text = '{"rows":[{"name":"a","remark":null,"qty":null}],"note":"done"}'
    partials, value = stream(NotedRows, text, size)
    assert fields(value.rows[0]) == ({"name": "a", "remark": None, "qty": 1}, {"name", "remark"})
    closed = text.index("null}") + len("null}")
    for partial, seen in zip(partials, ends(text, size, len(partials)), strict=True):
        if len(seen) >= closed:
            assert [fields(row) for row in partial.rows] == [fields(value.rows[0])]
    assert partials[-1] == value


class Listed(BaseModel):
    rows: Annotated[list[Line], Field(min_length=1)]
    note: str


@pytest.mark.parametrize("size", SIZES)
def test_a_list_its_type_validates_whole_is_shown_without_stand_in_nulls(size: int) -> None:
    text = '{"rows":[{"name":"a","qty":null}],"note":"n"}'
    partials, value = stream(Listed, text, size)
    assert value == Listed(rows=[Line(name="a")], note="n")
    closed = text.index("]") + 1
    for partial, seen in zip(partials, ends(text, size, len(partials)), strict=True):
        if len(seen) >= closed:
            assert [fields(row) for row in partial.rows] == [({"name": "a", "qty": 1}, {"name"})]
    assert partials[-1] == value
