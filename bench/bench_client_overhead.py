"""Client overhead of `allama.extract` over a local server, against raw httpx2 plus one
pydantic validation (the floor). Run by hand: `./run bench`.

The server runs in another process and always answers the same chat completion, so the
figures are the client's own CPU time per call (`time.process_time` in this process).
"""

from __future__ import annotations

import asyncio
import json
import multiprocessing
import socket
import sys
import time
from typing import Any

import httpx2
from pydantic import BaseModel

import allama

CALLS = 2_000
CONCURRENT = 200

BODY = json.dumps(
    {
        "id": "chatcmpl-bench",
        "object": "chat.completion",
        "created": 0,
        "model": "bench-model",
        "choices": [
            {
                "index": 0,
                "finish_reason": "stop",
                "message": {
                    "role": "assistant",
                    "content": json.dumps(
                        {"name": "Ada Lovelace", "year": 1843, "tags": ["math", "program"]}
                    ),
                },
            }
        ],
        "usage": {"prompt_tokens": 41, "completion_tokens": 17, "total_tokens": 58},
    }
).encode()


class Program(BaseModel):
    name: str
    year: int
    tags: list[str]


def _serve(port_queue: Any) -> None:
    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                length = 0
                for line in head.split(b"\r\n"):
                    if line.lower().startswith(b"content-length:"):
                        length = int(line.split(b":", 1)[1])
                if length:
                    await reader.readexactly(length)
                writer.write(
                    b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\n"
                    + f"content-length: {len(BODY)}\r\n\r\n".encode()
                    + BODY
                )
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            writer.close()

    async def main() -> None:
        server = await asyncio.start_server(handle, "127.0.0.1", 0, backlog=512)
        port_queue.put(server.sockets[0].getsockname()[1])
        async with server:
            await server.serve_forever()

    asyncio.run(main())


ROUNDS = 5


def _cpu(fn: Any) -> float:
    start = time.process_time()
    fn()
    return time.process_time() - start


def _compare(floor: Any, ours: Any) -> tuple[float, float]:
    """Best of `ROUNDS` for each, the two measured in turn so that drift hits both alike."""
    floor()  # warm up
    ours()
    floor_cpu, ours_cpu = [], []
    for _ in range(ROUNDS):
        floor_cpu.append(_cpu(floor))
        ours_cpu.append(_cpu(ours))
    return min(floor_cpu) / CALLS, min(ours_cpu) / CALLS


FLOOR_BODY = {"model": "bench-model", "messages": [{"role": "user", "content": "Ada published..."}]}


def bench_sync(base: str, preset: str, model: str) -> tuple[float, float]:
    adapter = Program.model_validate_json
    request = allama.ChatRequest(model).user("Ada published the first program in 1843.")
    provider = allama.provider(preset, base_url=base, api_key="k")

    with httpx2.Client() as client:

        def floor() -> None:
            for _ in range(CALLS):
                response = client.post(
                    f"{base}/chat/completions",
                    json=FLOOR_BODY,
                    headers={"authorization": "Bearer k"},
                )
                adapter(response.json()["choices"][0]["message"]["content"])

        def ours() -> None:
            for _ in range(CALLS):
                allama.extract(provider, Program, request)

        result = _compare(floor, ours)
    provider.close()
    return result


def bench_async(base: str, preset: str, model: str, concurrency: int) -> tuple[float, float]:
    adapter = Program.model_validate_json
    request = allama.ChatRequest(model).user("Ada published the first program in 1843.")

    async def floor() -> None:
        async with httpx2.AsyncClient(limits=httpx2.Limits(max_connections=concurrency)) as client:

            async def one() -> None:
                response = await client.post(
                    f"{base}/chat/completions",
                    json=FLOOR_BODY,
                    headers={"authorization": "Bearer k"},
                )
                adapter(response.json()["choices"][0]["message"]["content"])

            for _ in range(CALLS // concurrency):
                await asyncio.gather(*(one() for _ in range(concurrency)))

    async def ours() -> None:
        provider = allama.provider(preset, base_url=base, api_key="k")
        for _ in range(CALLS // concurrency):
            await asyncio.gather(
                *(allama.aextract(provider, Program, request) for _ in range(concurrency))
            )
        await provider.aclose()

    return _compare(lambda: asyncio.run(floor()), lambda: asyncio.run(ours()))


ENDPOINTS = (
    # An endpoint whose enforcement allama cannot vouch for: the schema is sent as is, and
    # the output is checked for undeclared keys before validation.
    ("openai-compatible", "bench-model", "approximate"),
    # OpenAI's own preset: strict structured output, enforcement exact, no key walk.
    ("openai", "gpt-4o-2024-08-06", "exact"),
)


def main() -> None:
    queue: Any = multiprocessing.Queue()
    server = multiprocessing.Process(target=_serve, args=(queue,), daemon=True)
    server.start()
    port = queue.get(timeout=10)
    base = f"http://127.0.0.1:{port}/v1"
    with socket.create_connection(("127.0.0.1", port), timeout=5):
        pass
    rows = []
    try:
        for preset, model, enforcement in ENDPOINTS:
            where = f"`{preset}` ({enforcement})"
            rows.append((f"sync, one at a time, {where}", *bench_sync(base, preset, model)))
            rows.append((f"async, one at a time, {where}", *bench_async(base, preset, model, 1)))
            concurrent = bench_async(base, preset, model, CONCURRENT)
            rows.append((f"async, {CONCURRENT} concurrent, {where}", *concurrent))
    finally:
        server.terminate()
    print(
        f"client CPU per call over {CALLS} calls (best of {ROUNDS}, measured in turn), "
        f"Python {sys.version.split()[0]}"
    )
    print("| workload | httpx2 + validation (floor) | allama.extract | ratio |")
    print("|---|---|---|---|")
    for name, floor, ours in rows:
        print(f"| {name} | {floor * 1e6:.0f} µs | {ours * 1e6:.0f} µs | {ours / floor:.2f} |")


if __name__ == "__main__":
    main()
