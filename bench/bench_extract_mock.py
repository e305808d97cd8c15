"""Per-call overhead of `allama.extract` against `MockProvider` (no HTTP): the engine's own cost.

Run by hand: `./run bench`. Compares with validating the same JSON once with pydantic.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

from pydantic import BaseModel

import allama
from allama.mock import ChatResponseBuilder, MockProvider

CALLS = 20_000
TEXT = '{"name": "Ada Lovelace", "year": 1843, "tags": ["math", "program"]}'


class Program(BaseModel):
    name: str
    year: int
    tags: list[str]


def _per_call(fn: Any) -> float:
    fn()
    best = float("inf")
    for _ in range(3):
        start = time.process_time()
        fn()
        best = min(best, time.process_time() - start)
    return best / CALLS * 1e6


def main() -> None:
    response = ChatResponseBuilder().text(TEXT).usage(41, 17).build()
    request = allama.ChatRequest("m").user("Ada published the first program in 1843.")
    native = request.with_option(allama.ExtractionMode.NATIVE)

    def floor() -> None:
        for _ in range(CALLS):
            Program.model_validate_json(TEXT)

    def sync() -> None:
        provider = MockProvider([response] * CALLS)
        for _ in range(CALLS):
            allama.extract(provider, Program, native)

    def auto() -> None:
        provider = MockProvider([response] * CALLS)
        for _ in range(CALLS):
            allama.extract(provider, Program, request)

    def asynchronous() -> None:
        async def run() -> None:
            provider = MockProvider([response] * CALLS)
            for _ in range(CALLS):
                await allama.aextract(provider, Program, native)

        asyncio.run(run())

    base = _per_call(floor)
    print(f"per call, best of 3 over {CALLS} calls (CPU µs)")
    print("| call | µs | minus one validation |")
    print("|---|---|---|")
    print(f"| `Program.model_validate_json` (one validation) | {base:.1f} | |")
    for name, fn in (
        ("`allama.extract`, native mode", sync),
        ("`allama.extract`, auto mode", auto),
        ("`allama.aextract`, native mode", asynchronous),
    ):
        cost = _per_call(fn)
        print(f"| {name} | {cost:.1f} | {cost - base:.1f} |")


if __name__ == "__main__":
    main()
