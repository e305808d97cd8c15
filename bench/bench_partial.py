"""What the typed partial value of a stream costs: reading it after every chunk stays linear.

A 2,000-item list (items with a few fields) is streamed through `extract_stream` against
`MockStreamingProvider` in 500 and in 5,000 chunks, reading `stream.partial` after every
chunk, then `finish()`. For comparison, on the same chunks:

- re-parse: what most libraries do, `pydantic_core.from_json(buffer, allow_partial=True)`
  on the whole buffer plus a partial validation, after every chunk (quadratic);
- once: join the chunks and validate once at the end (no partial value at all);
- the same stream reading `partial` after every 10th event only, and never (the partial
  value is computed when it is read, on the text since the last read).

CPU time (`time.process_time`), best of a few runs. Run by hand: `python bench/bench_partial.py`.
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Callable

import pydantic_core
from pydantic import BaseModel, TypeAdapter, ValidationError

import allama
from allama import (
    BlockStart,
    BlockStop,
    ChatRequest,
    ExtractionMode,
    Finish,
    ResponseStart,
    StreamBlockType,
    StreamEvent,
    TextDelta,
)
from allama.mock import MockStreamingProvider

ITEMS = 2_000


class Item(BaseModel):
    sku: str
    name: str
    price: float
    quantity: int
    in_stock: bool


class Catalog(BaseModel):
    items: list[Item]


def document() -> str:
    items = [
        {
            "sku": f"SKU-{i:05d}",
            "name": f"Item number {i}",
            "price": round(i * 1.25, 2),
            "quantity": i % 17,
            "in_stock": i % 3 != 0,
        }
        for i in range(ITEMS)
    ]
    return json.dumps({"items": items})


def chunked(text: str, count: int) -> list[str]:
    size = -(-len(text) // count)
    return [text[i : i + size] for i in range(0, len(text), size)]


def events(chunks: list[str]) -> list[StreamEvent]:
    out: list[StreamEvent] = [ResponseStart(), BlockStart(index=0, block_type=StreamBlockType.TEXT)]
    out.extend(TextDelta(index=0, text=chunk) for chunk in chunks)
    out.extend([BlockStop(index=0), Finish(finish_reason="stop")])
    return out


REQUEST = ChatRequest("m").user("list the catalog").with_option(ExtractionMode.NATIVE)


def stream_reading_partial(chunks: list[str], expected: Catalog) -> None:
    provider = MockStreamingProvider.with_stream(events(chunks))
    with allama.extract_stream(provider, Catalog, REQUEST) as stream:
        for _ in stream:
            stream.partial  # noqa: B018 - reading it is what is measured
        assert stream.partial == expected
        assert stream.finish().value == expected


def stream_reading_partial_sometimes(chunks: list[str], expected: Catalog) -> None:
    provider = MockStreamingProvider.with_stream(events(chunks))
    with allama.extract_stream(provider, Catalog, REQUEST) as stream:
        for index, _ in enumerate(stream):
            if index % 10 == 0:
                stream.partial  # noqa: B018 - reading it is what is measured
        assert stream.partial == expected
        assert stream.finish().value == expected


def stream_without_partial(chunks: list[str], expected: Catalog) -> None:
    provider = MockStreamingProvider.with_stream(events(chunks))
    with allama.extract_stream(provider, Catalog, REQUEST) as stream:
        for _ in stream:
            pass
        assert stream.finish().value == expected


ADAPTER = TypeAdapter(Catalog)


def reparse_every_chunk(chunks: list[str], expected: Catalog) -> None:
    buffer = ""
    value = None
    for chunk in chunks:
        buffer += chunk
        parsed = pydantic_core.from_json(buffer, allow_partial=True)
        try:
            value = ADAPTER.validate_python(parsed, experimental_allow_partial=True)
        except ValidationError:
            value = None
    assert value == expected


def validate_once(chunks: list[str], expected: Catalog) -> None:
    assert ADAPTER.validate_json("".join(chunks)) == expected


def best_cpu(run: Callable[[], None], repeat: int) -> float:
    best = float("inf")
    for _ in range(repeat):
        start = time.process_time()
        run()
        best = min(best, time.process_time() - start)
    return best


def main() -> None:
    text = document()
    expected = Catalog.model_validate_json(text)
    repeat = int(sys.argv[1]) if len(sys.argv) > 1 else 3
    print(f"{ITEMS} items, {len(text):,} characters of JSON; CPU ms, best of {repeat}")
    figures: dict[tuple[str, int], float] = {}
    cases: list[tuple[str, Callable[[list[str], Catalog], None]]] = [
        ("extract_stream, partial every chunk", stream_reading_partial),
        ("extract_stream, partial every 10th event", stream_reading_partial_sometimes),
        ("extract_stream, partial never read", stream_without_partial),
        ("re-parse buffer every chunk", reparse_every_chunk),
        ("join and validate once", validate_once),
    ]
    print(f"{'':44} {'500 chunks':>12} {'5,000 chunks':>14} {'ratio':>7}")
    for label, case in cases:
        row = []
        for count in (500, 5_000):
            chunks = chunked(text, count)
            figures[(label, count)] = best_cpu(
                lambda c=chunks, f=case: f(c, expected),  # type: ignore[misc]
                repeat,
            )
            row.append(figures[(label, count)])
        print(f"{label:44} {row[0] * 1e3:12.1f} {row[1] * 1e3:14.1f} {row[1] / row[0]:7.1f}")
    ours = figures[(cases[0][0], 5_000)]
    reparse = figures[(cases[3][0], 5_000)]
    once = figures[(cases[4][0], 5_000)]
    print(
        f"at 5,000 chunks: partial every chunk costs {ours / once:.1f}x validating once, "
        f"re-parsing costs {reparse / once:.1f}x ({reparse / ours:.1f}x ours)"
    )


if __name__ == "__main__":
    main()
