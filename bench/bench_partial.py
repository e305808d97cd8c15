"""What the typed partial value of a stream costs, read after every event, on each endpoint kind.

A list of rows (objects of five fields) streams as Chat Completions SSE from an in-process
`httpx2` transport, through `allama.provider(...)` and `extract_stream`: on OpenAI's preset
(enforcement exact) and on any OpenAI-compatible endpoint (approximate). For each, in turn:

- `partial` read after every event, then `finish()`;
- `partial` never read, then `finish()`: the same stream validated once at the end (the floor);

for 200 rows in 500 chunks and 2,000 rows in 5,000 chunks (the same chunk size, ten times
the output: linear means ten times the CPU), and 2,000 rows in 500 chunks. For comparison,
what most libraries do: re-parse the whole buffer with `pydantic_core.from_json(...,
allow_partial=True)` and validate it after every chunk (quadratic), on the text alone.

CPU time (`time.process_time`), best of a few runs, the cases measured in turn. Run by
hand: `python bench/bench_partial.py [repeat]`.
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Callable
from typing import Any

import httpx2
import pydantic_core
from pydantic import BaseModel, TypeAdapter, ValidationError

import allama
from allama import ChatRequest, ExtractionMode
from allama.transport import Transport


class Item(BaseModel):
    sku: str
    name: str
    price: float
    quantity: int
    in_stock: bool


class Catalog(BaseModel):
    items: list[Item]


def document(rows: int) -> str:
    items = [
        {
            "sku": f"SKU-{i:05d}",
            "name": f"Item number {i}",
            "price": round(i * 1.25, 2),
            "quantity": i % 17,
            "in_stock": i % 3 != 0,
        }
        for i in range(rows)
    ]
    return json.dumps({"items": items})


def chunked(text: str, count: int) -> list[str]:
    size = -(-len(text) // count)
    return [text[i : i + size] for i in range(0, len(text), size)]


def sse(chunks: list[str]) -> list[bytes]:
    """One SSE event per chunk, as Chat Completions streams them."""

    def event(delta: dict[str, Any], finish: str | None = None) -> bytes:
        chunk = {
            "id": "chatcmpl-bench",
            "model": "bench-model",
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
        }
        return b"data: " + json.dumps(chunk).encode() + b"\n\n"

    events = [event({"role": "assistant", "content": ""})]
    events.extend(event({"content": chunk}) for chunk in chunks)
    events.append(event({}, "stop"))
    events.append(b"data: [DONE]\n\n")
    return events


def provider(preset: str, events: list[bytes]) -> Any:
    def handler(request: httpx2.Request) -> httpx2.Response:
        return httpx2.Response(
            200, content=iter(events), headers={"content-type": "text/event-stream"}
        )

    transport = Transport(
        client=httpx2.Client(transport=httpx2.MockTransport(handler)),
        async_client=httpx2.AsyncClient(transport=httpx2.MockTransport(handler)),
    )
    return allama.provider(preset, api_key="k", base_url="http://bench/v1", transport=transport)


REQUEST = (
    ChatRequest("gpt-4o-2024-08-06").user("list the catalog").with_option(ExtractionMode.NATIVE)
)


def streamed(chat: Any, expected: Catalog, read_partial: bool) -> None:
    with allama.extract_stream(chat, Catalog, REQUEST) as stream:
        for _ in stream:
            if read_partial:
                stream.partial  # noqa: B018 - reading it is what is measured
        if read_partial:
            assert stream.partial == expected
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


def best_cpu(runs: list[Callable[[], None]], repeat: int) -> list[float]:
    """Best CPU time of each run, the runs measured in turn so drift hits them alike."""
    for run in runs:
        run()  # warm up
    best = [float("inf")] * len(runs)
    for _ in range(repeat):
        for index, run in enumerate(runs):
            start = time.process_time()
            run()
            best[index] = min(best[index], time.process_time() - start)
    return best


SIZES = ((200, 500), (2_000, 5_000), (2_000, 500))
ENDPOINTS = (("openai", "exact"), ("openai-compatible", "approximate"))


def main() -> None:
    repeat = int(sys.argv[1]) if len(sys.argv) > 1 else 5
    print(f"CPU ms, best of {repeat}, Python {sys.version.split()[0]}")
    print(
        "| endpoint | rows | chunks | `partial` every event | validated once at the end | ratio |"
    )
    print("|---|---:|---:|---:|---:|---:|")
    figures: dict[tuple[str, int, int], float] = {}
    for preset, kind in ENDPOINTS:
        for rows, count in SIZES:
            text = document(rows)
            expected = Catalog.model_validate_json(text)
            chat = provider(preset, sse(chunked(text, count)))
            partial, once = best_cpu(
                [
                    lambda c=chat, e=expected: streamed(c, e, True),  # type: ignore[misc]
                    lambda c=chat, e=expected: streamed(c, e, False),  # type: ignore[misc]
                ],
                repeat,
            )
            figures[(preset, rows, count)] = partial
            print(
                f"| `{preset}` ({kind}) | {rows:,} | {count:,} | {partial * 1e3:.1f} | "
                f"{once * 1e3:.1f} | {partial / once:.2f} |"
            )
    for preset, kind in ENDPOINTS:
        growth = figures[(preset, 2_000, 5_000)] / figures[(preset, 200, 500)]
        print(
            f"`{preset}` ({kind}): ten times the output at the same chunk size costs "
            f"{growth:.1f} times the CPU"
        )
    text = document(2_000)
    expected = Catalog.model_validate_json(text)
    chunks = chunked(text, 5_000)
    (reparse,) = best_cpu([lambda: reparse_every_chunk(chunks, expected)], max(1, repeat // 2))
    print(
        f"re-parsing the buffer after every chunk (2,000 rows, 5,000 chunks, text alone): "
        f"{reparse * 1e3:.1f} ms"
    )


if __name__ == "__main__":
    main()
