"""Client overhead of `allama.extract` over a local server, against raw httpx2 plus one
pydantic validation (the floor). Run by hand: `./run bench` (or this script with `exact`,
`approximate`, a preset's name (`openai`, `openai-compatible`, `anthropic`, `gemini`,
`ollama`), `openai (responses)`, or an answer's label to run part of it).

The server runs in another process and answers one chat completion and one Anthropic
message per answer: a 3-field answer, and a 21 KB one (200 objects of 6 fields). The figures
are the client's CPU time per call (`time.process_time` in this process) and wall time per
call, for one call at a time (sync and async) and 200 in flight, on each dialect: OpenAI's
Chat Completions and Responses presets, Anthropic's (Messages, the schema in
`output_config.format`, the answer in a text block) and Gemini's (`responseJsonSchema`, a
text part), all exact; and where enforcement is approximate, any OpenAI-compatible endpoint
(the output is also checked for undeclared keys) and Ollama's native API (`format`). The
enforcement shown is the one `Extractor.plan` finds for the call. Each endpoint's floor
speaks its own wire: a comparable body posted to the same path, the answer's text taken out
of the JSON body.
"""

from __future__ import annotations

import asyncio
import json
import multiprocessing
import socket
import statistics
import sys
import time
from collections.abc import Callable
from typing import Any, NamedTuple

import httpx2
from pydantic import BaseModel

import allama

CONCURRENT = 200
ROUNDS = 15
"""Short runs, many of them: the best of each side is what a quiet moment of this shared
machine gives, and a burst of noise spoils one short run rather than the result."""


class Program(BaseModel):
    name: str
    year: int
    tags: list[str]


class Row(BaseModel):
    id: int
    sku: str
    name: str
    price: float
    quantity: int
    in_stock: bool


class Rows(BaseModel):
    rows: list[Row]


def _completion(content: str) -> bytes:
    """A Chat Completions response whose answer is `content`."""
    return json.dumps(
        {
            "id": "chatcmpl-bench",
            "object": "chat.completion",
            "created": 0,
            "model": "bench-model",
            "choices": [
                {
                    "index": 0,
                    "finish_reason": "stop",
                    "message": {"role": "assistant", "content": content},
                }
            ],
            "usage": {"prompt_tokens": 41, "completion_tokens": 17, "total_tokens": 58},
        }
    ).encode()


def _message(content: str) -> bytes:
    """An Anthropic Messages response whose answer is `content`, in one text block."""
    return json.dumps(
        {
            "id": "msg_bench",
            "type": "message",
            "role": "assistant",
            "model": "claude-sonnet-4-5",
            "content": [{"type": "text", "text": content}],
            "stop_reason": "end_turn",
            "stop_sequence": None,
            "usage": {
                "input_tokens": 41,
                "output_tokens": 17,
                "cache_creation_input_tokens": 0,
                "cache_read_input_tokens": 0,
            },
        }
    ).encode()


def _generated(content: str) -> bytes:
    """A Gemini `generateContent` response whose answer is `content`, in one text part."""
    return json.dumps(
        {
            "candidates": [
                {
                    "content": {"role": "model", "parts": [{"text": content}]},
                    "finishReason": "STOP",
                    "index": 0,
                }
            ],
            "usageMetadata": {
                "promptTokenCount": 41,
                "candidatesTokenCount": 17,
                "totalTokenCount": 58,
            },
            "modelVersion": "gemini-2.5-flash",
            "responseId": "bench",
        }
    ).encode()


def _response(content: str) -> bytes:
    """An OpenAI Responses API response whose answer is `content`, in one message item."""
    return json.dumps(
        {
            "id": "resp_bench",
            "object": "response",
            "created_at": 0,
            "status": "completed",
            "model": "gpt-4o-2024-08-06",
            "output": [
                {
                    "type": "message",
                    "id": "msg_bench",
                    "status": "completed",
                    "role": "assistant",
                    "content": [{"type": "output_text", "text": content, "annotations": []}],
                }
            ],
            "usage": {
                "input_tokens": 41,
                "input_tokens_details": {"cached_tokens": 0},
                "output_tokens": 17,
                "output_tokens_details": {"reasoning_tokens": 0},
                "total_tokens": 58,
            },
        }
    ).encode()


def _ollama(content: str) -> bytes:
    """An Ollama `/api/chat` response whose answer is `content`."""
    return json.dumps(
        {
            "model": "llama3.1",
            "created_at": "2026-12-01T00:00:00Z",
            "message": {"role": "assistant", "content": content},
            "done": True,
            "done_reason": "stop",
            "prompt_eval_count": 41,
            "eval_count": 17,
        }
    ).encode()


SMALL = json.dumps({"name": "Ada Lovelace", "year": 1843, "tags": ["math", "program"]})
LARGE = json.dumps(
    {
        "rows": [
            {
                "id": i,
                "sku": f"SKU-{i:05d}",
                "name": f"Item number {i}",
                "price": round(i * 1.25, 2),
                "quantity": i % 17,
                "in_stock": i % 3 != 0,
            }
            for i in range(200)
        ]
    }
)
PAYLOADS: dict[str, tuple[type[BaseModel], str, int]] = {
    # name: (type, the answer, calls per measurement)
    "3-field answer": (Program, SMALL, 600),
    f"{len(LARGE) // 1000} KB answer (200 objects of 6 fields)": (Rows, LARGE, 150),
}
BODIES = {
    path: body
    for index, (_, answer, _) in enumerate(PAYLOADS.values())
    for path, body in (
        (f"/{index}/v1/chat/completions", _completion(answer)),
        (f"/{index}/v1/messages", _message(answer)),
        (f"/{index}/models/gemini-2.5-flash:generateContent", _generated(answer)),
        (f"/{index}/v1/responses", _response(answer)),
        (f"/{index}/api/chat", _ollama(answer)),
    )
}


def _serve(port_queue: Any) -> None:
    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                length = 0
                path = head.split(b" ", 2)[1].decode()
                for line in head.split(b"\r\n"):
                    if line.lower().startswith(b"content-length:"):
                        length = int(line.split(b":", 1)[1])
                if length:
                    await reader.readexactly(length)
                body = BODIES[path]
                writer.write(
                    b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\n"
                    + f"content-length: {len(body)}\r\n\r\n".encode()
                    + body
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


def _measure(fn: Any) -> tuple[float, float]:
    """CPU and wall time of one run."""
    cpu, wall = time.process_time(), time.perf_counter()
    fn()
    return time.process_time() - cpu, time.perf_counter() - wall


def _compare(floor: Any, ours: Any, calls: int) -> tuple[float, float, float, float, float]:
    """Best of `ROUNDS` for each, the two measured in turn so that drift hits both alike:
    CPU per call (floor, ours), wall per call (floor, ours); and the median of the CPU
    ratios of the runs made one after the other, which a slow phase of the machine spoils
    less than a best time it happened to miss on one side."""
    floor()  # warm up
    ours()
    floor_runs, our_runs = [], []
    for _ in range(ROUNDS):
        floor_runs.append(_measure(floor))
        our_runs.append(_measure(ours))
    return (
        min(run[0] for run in floor_runs) / calls,
        min(run[0] for run in our_runs) / calls,
        min(run[1] for run in floor_runs) / calls,
        min(run[1] for run in our_runs) / calls,
        statistics.median(o[0] / f[0] for f, o in zip(floor_runs, our_runs, strict=True)),
    )


FLOOR_BODY = {"model": "bench-model", "messages": [{"role": "user", "content": "Ada published..."}]}
GEMINI_FLOOR_BODY = {"contents": [{"role": "user", "parts": [{"text": "Ada published..."}]}]}
RESPONSES_FLOOR_BODY = {"model": "bench-model", "input": "Ada published...", "store": False}
OLLAMA_FLOOR_BODY = {
    "model": "llama3.1",
    "messages": [{"role": "user", "content": "Ada published..."}],
    "stream": False,
}
ANTHROPIC_FLOOR_BODY = {
    "model": "claude-sonnet-4-5",
    "max_tokens": 16_384,
    "messages": [{"role": "user", "content": "Ada published..."}],
}


class Endpoint(NamedTuple):
    """One endpoint, and the floor that speaks its wire."""

    preset: str
    model: str
    enforcement: str
    """What `Extractor.plan` must find for both answers (checked before measuring)."""
    root: str
    """The provider's `base_url` under the server's path of an answer."""
    path: str
    """Where the floor posts, under `root`: the path allama posts to."""
    body: dict[str, Any]
    headers: dict[str, str]
    text: Callable[[Any], str]
    """The answer's text in the parsed body."""
    options: tuple[tuple[str, Any], ...] = ()
    """Further `allama.provider` arguments (`api="responses"`)."""
    label: str = ""
    """How the row names the endpoint, when not by its preset alone."""

    def provider(self, base: str) -> Any:
        return allama.provider(self.preset, base_url=base, api_key="k", **dict(self.options))


def _choice_text(payload: Any) -> str:
    text: str = payload["choices"][0]["message"]["content"]
    return text


def _block_text(payload: Any) -> str:
    text: str = payload["content"][0]["text"]
    return text


def _part_text(payload: Any) -> str:
    text: str = payload["candidates"][0]["content"]["parts"][0]["text"]
    return text


def _output_text(payload: Any) -> str:
    text: str = payload["output"][0]["content"][0]["text"]
    return text


def _ollama_text(payload: Any) -> str:
    text: str = payload["message"]["content"]
    return text


ENDPOINTS = (
    # OpenAI's own preset: strict structured output, enforcement exact, no key walk.
    Endpoint(
        "openai",
        "gpt-4o-2024-08-06",
        "exact",
        root="/v1",
        path="/chat/completions",
        body=FLOOR_BODY,
        headers={"authorization": "Bearer k"},
        text=_choice_text,
    ),
    # An endpoint whose enforcement allama cannot vouch for: the schema is sent as is, and
    # the output is checked for undeclared keys before validation.
    Endpoint(
        "openai-compatible",
        "bench-model",
        "approximate",
        root="/v1",
        path="/chat/completions",
        body=FLOOR_BODY,
        headers={"authorization": "Bearer k"},
        text=_choice_text,
    ),
    # Anthropic Messages, configured without `/v1` as its SDK is: the schema goes in
    # `output_config.format` (native mode on this model), the answer comes in a text block.
    Endpoint(
        "anthropic",
        "claude-sonnet-4-5",
        "exact",
        root="",
        path="/v1/messages",
        body=ANTHROPIC_FLOOR_BODY,
        headers={"x-api-key": "k", "anthropic-version": "2023-06-01"},
        text=_block_text,
    ),
    # Gemini: the schema in `generationConfig.responseJsonSchema`, the answer in a text part.
    Endpoint(
        "gemini",
        "gemini-2.5-flash",
        "exact",
        root="",
        path="/models/gemini-2.5-flash:generateContent",
        body=GEMINI_FLOOR_BODY,
        headers={"x-goog-api-key": "k"},
        text=_part_text,
    ),
    # OpenAI's Responses API: the schema in `text.format`, the answer in a message item.
    Endpoint(
        "openai",
        "gpt-4o-2024-08-06",
        "exact",
        root="/v1",
        path="/responses",
        body=RESPONSES_FLOOR_BODY,
        headers={"authorization": "Bearer k"},
        text=_output_text,
        options=(("api", "responses"),),
        label="openai (responses)",
    ),
    # Ollama's native API: the schema in `format`, compiled to a grammar it does not report.
    Endpoint(
        "ollama",
        "llama3.1",
        "approximate",
        root="",
        path="/api/chat",
        body=OLLAMA_FLOOR_BODY,
        headers={},
        text=_ollama_text,
    ),
)


def bench_sync(
    base: str, endpoint: Endpoint, tp: type[BaseModel], calls: int
) -> tuple[float, float, float, float, float]:
    adapter = tp.model_validate_json
    request = allama.ChatRequest(endpoint.model).user("Ada published the first program in 1843.")
    provider = endpoint.provider(base)
    url = f"{base}{endpoint.path}"
    body, headers, text = endpoint.body, endpoint.headers, endpoint.text

    with httpx2.Client() as client:

        def floor() -> None:
            for _ in range(calls):
                response = client.post(url, json=body, headers=headers)
                adapter(text(response.json()))

        def ours() -> None:
            for _ in range(calls):
                allama.extract(provider, tp, request)

        result = _compare(floor, ours, calls)
    provider.close()
    return result


def bench_async(
    base: str, endpoint: Endpoint, tp: type[BaseModel], calls: int, concurrency: int
) -> tuple[float, float, float, float, float]:
    adapter = tp.model_validate_json
    request = allama.ChatRequest(endpoint.model).user("Ada published the first program in 1843.")
    url = f"{base}{endpoint.path}"
    body, headers, text = endpoint.body, endpoint.headers, endpoint.text
    calls -= calls % concurrency

    async def floor() -> None:
        async with httpx2.AsyncClient(limits=httpx2.Limits(max_connections=concurrency)) as client:

            async def one() -> None:
                response = await client.post(url, json=body, headers=headers)
                adapter(text(response.json()))

            for _ in range(calls // concurrency):
                await asyncio.gather(*(one() for _ in range(concurrency)))

    async def ours() -> None:
        provider = endpoint.provider(base)
        for _ in range(calls // concurrency):
            await asyncio.gather(
                *(allama.aextract(provider, tp, request) for _ in range(concurrency))
            )
        await provider.aclose()

    return _compare(lambda: asyncio.run(floor()), lambda: asyncio.run(ours()), calls)


def _enforcement(base: str, endpoint: Endpoint, tp: type[BaseModel]) -> str:
    """The enforcement `Extractor.plan` finds for the call; it must be the expected one."""
    provider = endpoint.provider(base)
    request = allama.ChatRequest(endpoint.model).user("Ada published the first program in 1843.")
    planned = allama.Extractor().plan(provider, tp, request).enforcement.value
    provider.close()
    if planned != endpoint.enforcement:
        raise SystemExit(
            f"`{endpoint.preset}` plans {planned} enforcement for {tp.__name__}, "
            f"not {endpoint.enforcement}"
        )
    return planned


def start_server() -> tuple[multiprocessing.Process, int]:
    """The answering server in a process of its own, and its port once it accepts."""
    queue: Any = multiprocessing.Queue()
    server = multiprocessing.Process(target=_serve, args=(queue,), daemon=True)
    server.start()
    port: int = queue.get(timeout=10)
    with socket.create_connection(("127.0.0.1", port), timeout=5):
        pass
    return server, port


def main() -> None:
    only = sys.argv[1:]
    server, port = start_server()
    rows = []
    try:
        for index, (label, (tp, _, calls)) in enumerate(PAYLOADS.items()):
            for endpoint in ENDPOINTS:
                name = endpoint.label or endpoint.preset
                names = {endpoint.enforcement, endpoint.preset, name, label}
                if only and not names.intersection(only):
                    continue
                base = f"http://127.0.0.1:{port}/{index}{endpoint.root}"
                where = f"`{name}` ({_enforcement(base, endpoint, tp)})"
                cases = [
                    ("sync, one at a time", bench_sync(base, endpoint, tp, calls)),
                    ("async, one at a time", bench_async(base, endpoint, tp, calls, 1)),
                    (
                        f"async, {CONCURRENT} concurrent",
                        bench_async(base, endpoint, tp, max(calls, CONCURRENT * 2), CONCURRENT),
                    ),
                ]
                for workload, figures in cases:
                    rows.append((label, workload, where, *figures))
    finally:
        server.terminate()
    print(
        f"client time per call (best of {ROUNDS}, floor and allama measured in turn), "
        f"Python {sys.version.split()[0]}"
    )
    print(
        "| answer | workload | endpoint | floor CPU | allama CPU | CPU ratio | "
        "median CPU ratio of pairs | floor wall | allama wall | wall ratio |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|")
    for label, workload, where, floor_cpu, cpu, floor_wall, wall, paired in rows:
        print(
            f"| {label} | {workload} | {where} | {floor_cpu * 1e6:.0f} µs | {cpu * 1e6:.0f} µs | "
            f"{cpu / floor_cpu:.2f} | {paired:.2f} | {floor_wall * 1e6:.0f} µs | "
            f"{wall * 1e6:.0f} µs | {wall / floor_wall:.2f} |"
        )


if __name__ == "__main__":
    main()
