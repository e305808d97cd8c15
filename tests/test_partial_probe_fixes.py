"""`stream.partial` of types whose fields name themselves: a model field typed `Self`
(`Optional[Self]`, `list[Self]`, `dict[str, Self]`, under `Annotated`), which pydantic reads
as the model that holds it; and a recursive `TypedDict` or dataclass defined in a function,
whose own name only that function sees. Each is previewed field by field as `finish()` reads
it, sync and async, in either mode; one whose annotations name a type nothing in reach
resolves waits until it completes."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import typing
from typing import Annotated, Any

import pytest
import typing_extensions
from pydantic import BaseModel, Field
from pydantic.dataclasses import dataclass as pydantic_dataclass
from pydantic.dataclasses import rebuild_dataclass
from typing_extensions import TypedDict

from _recording import provider
from allama import (
    BlockStart,
    BlockStop,
    ChatRequest,
    ExtractionMode,
    Extractor,
    Finish,
    ResponseStart,
    StreamBlockType,
    StreamEvent,
    TextDelta,
    ToolCallDelta,
)
from allama.extract import EXTRACTION_TOOL
from allama.mock import MockStreamingProvider

MODES = [ExtractionMode.NATIVE, ExtractionMode.FORCED_TOOL]
RUNS = ["sync", "async"]


def events(text: str, mode: ExtractionMode) -> list[StreamEvent]:
    """`text` streamed one character a delta, as text or as the extraction tool's call."""
    if mode is ExtractionMode.NATIVE:
        opened = BlockStart(index=0, block_type=StreamBlockType.TEXT)
        deltas: list[StreamEvent] = [TextDelta(index=0, text=char) for char in text]
        finish = "stop"
    else:
        opened = BlockStart(
            index=0, block_type=StreamBlockType.TOOL_CALL, id="c", name=EXTRACTION_TOOL
        )
        deltas = [ToolCallDelta(index=0, arguments=char) for char in text]
        finish = "tool_calls"
    return [ResponseStart(), opened, *deltas, BlockStop(index=0), Finish(finish_reason=finish)]


def plain(value: Any) -> Any:
    """A snapshot as plain data: an object as its type's name (`@`) and the attributes it
    holds (a field not yet arrived and without a default is absent from a model's)."""
    if isinstance(value, BaseModel):
        return {"@": type(value).__name__, **{k: plain(v) for k, v in vars(value).items()}}
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        fields = dataclasses.fields(value)
        return {
            "@": type(value).__name__,
            **{f.name: plain(getattr(value, f.name)) for f in fields},
        }
    if isinstance(value, list):
        return [plain(item) for item in value]
    if isinstance(value, dict):
        return {key: plain(item) for key, item in value.items()}
    return value


def shown(seen: list[Any], partial: Any) -> None:
    """Keeps `partial` (as plain data) where it differs from the one read before it."""
    snapshot = plain(partial)
    if not seen or seen[-1] != snapshot:
        seen.append(snapshot)


def streamed(tp: Any, text: str, mode: ExtractionMode, run: str) -> tuple[list[Any], Any]:
    """Each distinct partial value read after every delta, and `finish()`'s value."""
    request = ChatRequest("m").user("extract").with_option(mode)
    seen: list[Any] = []
    if run == "sync":
        source = MockStreamingProvider.with_stream(events(text, mode))
        with Extractor().extract_stream(source, tp, request) as opened:
            for event in opened:
                if isinstance(event, TextDelta | ToolCallDelta):
                    shown(seen, opened.partial)
            value = opened.finish().value
            assert opened.partial == value
        return seen, value

    async def run_async() -> Any:
        source = MockStreamingProvider.with_stream(events(text, mode))
        async with await Extractor().aextract_stream(source, tp, request) as opened:
            async for event in opened:
                if isinstance(event, TextDelta | ToolCallDelta):
                    shown(seen, opened.partial)
            value = (await opened.finish()).value
            assert opened.partial == value
        return value

    return seen, asyncio.run(run_async())


class Chain(BaseModel):
    v: int
    nxt: typing_extensions.Self | None = None


class Longer(Chain):
    w: int = 0


class Tree(BaseModel):
    v: int
    kids: list[typing.Self] = []
    named: dict[str, typing.Self] = {}
    capped: Annotated[list[typing.Self], Field(max_length=2)] = []


@pytest.mark.parametrize("run", RUNS)
@pytest.mark.parametrize("mode", MODES)
def test_an_optional_self_field_is_previewed_as_the_model(mode: ExtractionMode, run: str) -> None:
    seen, value = streamed(Chain, '{"v": 1, "nxt": {"v": 2, "nxt": null}}', mode, run)
    assert value == Chain(v=1, nxt=Chain(v=2))
    assert seen == [
        {"@": "Chain", "nxt": None},
        {"@": "Chain", "v": 1, "nxt": None},
        {"@": "Chain", "v": 1, "nxt": {"@": "Chain", "nxt": None}},
        {"@": "Chain", "v": 1, "nxt": {"@": "Chain", "v": 2, "nxt": None}},
    ]


@pytest.mark.parametrize("run", RUNS)
@pytest.mark.parametrize("mode", MODES)
def test_self_in_a_list_a_dict_and_annotated_is_previewed_item_by_item(
    mode: ExtractionMode, run: str
) -> None:
    text = '{"v": 1, "kids": [{"v": 2}], "named": {"a": {"v": 3}}, "capped": [{"v": 4}]}'
    seen, value = streamed(Tree, text, mode, run)
    assert value == Tree(v=1, kids=[Tree(v=2)], named={"a": Tree(v=3)}, capped=[Tree(v=4)])

    def tree(v: int | None = None, **fields: Any) -> dict[str, Any]:
        held = {} if v is None else {"v": v}
        return {"@": "Tree", **held, "kids": [], "named": {}, "capped": [], **fields}

    assert seen == [
        tree(),
        tree(1),
        tree(1, kids=[tree()]),
        tree(1, kids=[tree(2)]),
        tree(1, kids=[tree(2)], named={"a": tree()}),
        tree(1, kids=[tree(2)], named={"a": tree(3)}),
        tree(1, kids=[tree(2)], named={"a": tree(3)}, capped=[tree()]),
        tree(1, kids=[tree(2)], named={"a": tree(3)}, capped=[tree(4)]),
    ]


@pytest.mark.parametrize("run", RUNS)
def test_self_inherited_by_a_subclass_is_the_subclass_as_pydantic_reads_it(run: str) -> None:
    text = '{"v": 1, "nxt": {"v": 2, "w": 3}, "w": 4}'
    seen, value = streamed(Longer, text, ExtractionMode.NATIVE, run)
    assert value == Longer(v=1, nxt=Longer(v=2, w=3), w=4)
    longer = {"@": "Longer", "nxt": None, "w": 0}
    assert seen == [
        longer,
        {**longer, "v": 1},
        {**longer, "v": 1, "nxt": longer},
        {**longer, "v": 1, "nxt": {**longer, "v": 2}},
        {**longer, "v": 1, "nxt": {**longer, "v": 2, "w": 3}},
        {**longer, "v": 1, "nxt": {**longer, "v": 2, "w": 3}, "w": 4},
    ]


def sse(text: str) -> bytes:
    """OpenAI's chat completion stream of `text` as content, five characters a chunk."""

    def chunk(delta: dict[str, Any], finish: str | None = None) -> bytes:
        body = {
            "id": "c",
            "object": "chat.completion.chunk",
            "created": 1,
            "model": "gpt-4o-2024-08-06",
            "choices": [{"index": 0, "finish_reason": finish, "delta": delta}],
        }
        return b"data: " + json.dumps(body).encode() + b"\n\n"

    pieces = [chunk({"content": text[i : i + 5]}) for i in range(0, len(text), 5)]
    return b"".join(pieces) + chunk({}, "stop") + b"data: [DONE]\n\n"


@pytest.mark.parametrize("run", RUNS)
def test_a_self_field_over_openai_s_wire(run: str) -> None:
    text = '{"v": 1, "nxt": {"v": 2, "nxt": null}}'
    openai, _ = provider("openai", (200, sse(text)))
    request = ChatRequest("gpt-4o-2024-08-06").user("extract")
    seen: list[Any] = []
    if run == "sync":
        with Extractor().extract_stream(openai, Chain, request) as opened:
            for _ in opened:
                shown(seen, opened.partial)
            value = opened.finish().value
    else:

        async def run_async() -> Any:
            async with await Extractor().aextract_stream(openai, Chain, request) as opened:
                async for _ in opened:
                    shown(seen, opened.partial)
                return (await opened.finish()).value

        value = asyncio.run(run_async())
    assert value == Chain(v=1, nxt=Chain(v=2))
    assert {"@": "Chain", "v": 1, "nxt": {"@": "Chain", "nxt": None}} in seen
    assert seen[-1] == {"@": "Chain", "v": 1, "nxt": {"@": "Chain", "v": 2, "nxt": None}}


def local_types() -> tuple[Any, Any, Any, Any]:
    """Types defined in a function, their annotations strings (`from __future__`) naming
    types only the function sees."""

    class Node(TypedDict):
        v: int
        kids: list[Node]  # type: ignore[misc]  # (mypy: not at function scope)

    @dataclasses.dataclass
    class Link:
        v: int
        nxt: Link | None = None

    @dataclasses.dataclass
    class Base:
        nxt: Base | None = None

    @dataclasses.dataclass
    class Derived(Base):  # its fields name `Base`, which only pydantic's reading of each
        s: str = ""  # base in turn resolves

    return Node, Link, Base, Derived


# (Not bound to their own names here: this module's globals would resolve them.)
NODE, LINK, BASE, DERIVED = local_types()


@pytest.mark.parametrize("run", RUNS)
@pytest.mark.parametrize("mode", MODES)
def test_a_recursive_typed_dict_defined_in_a_function_is_previewed(
    mode: ExtractionMode, run: str
) -> None:
    seen, value = streamed(NODE, '{"v": 1, "kids": [{"v": 2, "kids": []}]}', mode, run)
    assert value == {"v": 1, "kids": [{"v": 2, "kids": []}]}
    assert seen == [
        {},
        {"v": 1},
        {"v": 1, "kids": []},
        {"v": 1, "kids": [{}]},
        {"v": 1, "kids": [{"v": 2}]},
        {"v": 1, "kids": [{"v": 2, "kids": []}]},
    ]


@pytest.mark.parametrize("run", RUNS)
@pytest.mark.parametrize("mode", MODES)
def test_a_recursive_dataclass_defined_in_a_function_is_previewed(
    mode: ExtractionMode, run: str
) -> None:
    seen, value = streamed(LINK, '{"v": 1, "nxt": {"v": 2, "nxt": null}}', mode, run)
    assert value == LINK(v=1, nxt=LINK(v=2))
    assert seen == [
        {"@": "Link", "v": None, "nxt": None},
        {"@": "Link", "v": 1, "nxt": None},
        {"@": "Link", "v": 1, "nxt": {"@": "Link", "v": None, "nxt": None}},
        {"@": "Link", "v": 1, "nxt": {"@": "Link", "v": 2, "nxt": None}},
    ]


@pytest.mark.parametrize("run", RUNS)
@pytest.mark.parametrize("mode", MODES)
def test_a_type_whose_names_do_not_resolve_is_shown_when_it_completes(
    mode: ExtractionMode, run: str
) -> None:
    seen, value = streamed(DERIVED, '{"s": "hello", "nxt": {"nxt": null}}', mode, run)
    assert value == DERIVED(nxt=BASE(), s="hello")
    assert seen == [None, {"@": "Derived", "nxt": {"@": "Base", "nxt": None}, "s": "hello"}]


def pydantic_local_types() -> Any:
    """A pydantic dataclass naming another defined beside it in a function: pydantic
    resolves it (`rebuild_dataclass`, in that function); `typing` cannot."""

    @pydantic_dataclass
    class Leaf:
        n: int

    @pydantic_dataclass
    class Holder:
        leaf: Leaf | None = None
        s: str = ""

    rebuild_dataclass(Holder)  # type: ignore[arg-type]
    return Holder


HOLDER = pydantic_local_types()


@pytest.mark.parametrize("run", RUNS)
def test_a_pydantic_dataclass_is_previewed_by_the_fields_pydantic_resolved(run: str) -> None:
    seen, value = streamed(HOLDER, '{"s": "hi", "leaf": {"n": 5}}', ExtractionMode.NATIVE, run)
    assert plain(value) == {"@": "Holder", "leaf": {"@": "Leaf", "n": 5}, "s": "hi"}
    assert seen == [
        {"@": "Holder", "leaf": None, "s": ""},
        {"@": "Holder", "leaf": None, "s": "h"},
        {"@": "Holder", "leaf": None, "s": "hi"},
        {"@": "Holder", "leaf": {"@": "Leaf", "n": None}, "s": "hi"},
        {"@": "Holder", "leaf": {"@": "Leaf", "n": 5}, "s": "hi"},
    ]
