"""allama beside the libraries its users compare it with, on one wire and one local server:
the client's CPU time per structured extraction for raw httpx2 plus one pydantic validation
(the floor), allama, openai-python (`chat.completions.parse`), instructor, pydantic-ai and
LiteLLM. Run by hand with `./run bench-peers`, which installs the peers' pinned versions
(`bench/peers.txt`) in a virtual environment of their own, `.venv-peers`.

Every client asks an OpenAI Chat Completions endpoint for the same type with the schema in
`response_format` (each library's native structured output) and reads the answer from the
message's text; the server, in another process, answers every request with the same body
(the answers of `bench_client_overhead.py`: 3 fields, and 200 objects of 6 fields). The
clients run one after another in each round, so that a slow phase of the machine hits all
alike; the table shows each one's best round (CPU per call) and the median over rounds of
its CPU ratio to the floor's run of the same round.
"""

from __future__ import annotations

import asyncio
import importlib.metadata
import os
import statistics
import sys
import time
from collections.abc import Awaitable, Callable
from typing import Any, NamedTuple

# LiteLLM reads its price list from the network at import unless told to use its own copy.
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

import httpx2
from bench_client_overhead import FLOOR_BODY, PAYLOADS, start_server
from pydantic import BaseModel

import allama

MODEL = "gpt-4o-2024-08-06"
PROMPT = "Ada published the first program in 1843."
ROUNDS = 10
CONCURRENT = 200

Sync = Callable[[], Any]
Async = Callable[[], Awaitable[Any]]
Opened = tuple[Async, Callable[[], Awaitable[None]]]
"""An async call of one extraction and what closes its client."""


async def _nothing() -> None:
    return None


class Client(NamedTuple):
    """One library: a sync call of one extraction; `open_async`, called inside a running
    event loop (each run has its own), makes an async client there; `close` releases what
    the sync side holds."""

    sync: Sync
    open_async: Callable[[], Opened]
    close: Callable[[], None]


def floor(base: str, tp: type[BaseModel]) -> Client:
    url = f"{base}/chat/completions"
    headers = {"authorization": "Bearer k"}
    sync_client = httpx2.Client()
    validate = tp.model_validate_json

    def call() -> Any:
        response = sync_client.post(url, json=FLOOR_BODY, headers=headers)
        return validate(response.json()["choices"][0]["message"]["content"])

    def open_async() -> Opened:
        client = httpx2.AsyncClient(limits=httpx2.Limits(max_connections=CONCURRENT))

        async def acall() -> Any:
            response = await client.post(url, json=FLOOR_BODY, headers=headers)
            return validate(response.json()["choices"][0]["message"]["content"])

        return acall, client.aclose

    return Client(call, open_async, sync_client.close)


def allama_client(base: str, tp: type[BaseModel]) -> Client:
    provider = allama.provider("openai", base_url=base, api_key="k")
    request = allama.ChatRequest(MODEL).user(PROMPT)

    def call() -> Any:
        return allama.extract(provider, tp, request).value

    def open_async() -> Opened:
        own = allama.provider("openai", base_url=base, api_key="k")

        async def acall() -> Any:
            return (await allama.aextract(own, tp, request)).value

        return acall, own.aclose

    return Client(call, open_async, provider.close)


MESSAGES = [{"role": "user", "content": PROMPT}]


def openai_client(base: str, tp: type[BaseModel]) -> Client:
    import openai

    sync_client = openai.OpenAI(api_key="k", base_url=base, max_retries=0)

    def call() -> Any:
        completion = sync_client.chat.completions.parse(
            model=MODEL, messages=MESSAGES, response_format=tp
        )
        return completion.choices[0].message.parsed

    def open_async() -> Opened:
        client = openai.AsyncOpenAI(api_key="k", base_url=base, max_retries=0)

        async def acall() -> Any:
            completion = await client.chat.completions.parse(
                model=MODEL, messages=MESSAGES, response_format=tp
            )
            return completion.choices[0].message.parsed

        return acall, client.close

    return Client(call, open_async, sync_client.close)


def instructor_client(base: str, tp: type[BaseModel]) -> Client:
    import instructor
    import openai

    # The schema in `response_format`, the answer in the message's text: as the others.
    mode = instructor.Mode.JSON_SCHEMA
    sync_raw = openai.OpenAI(api_key="k", base_url=base, max_retries=0)
    sync_client = instructor.from_openai(sync_raw, mode=mode)

    def call() -> Any:
        return sync_client.chat.completions.create(
            model=MODEL, messages=MESSAGES, response_model=tp, max_retries=0
        )

    def open_async() -> Opened:
        raw = openai.AsyncOpenAI(api_key="k", base_url=base, max_retries=0)
        client = instructor.from_openai(raw, mode=mode)

        async def acall() -> Any:
            return await client.chat.completions.create(
                model=MODEL, messages=MESSAGES, response_model=tp, max_retries=0
            )

        return acall, raw.close

    return Client(call, open_async, sync_raw.close)


def pydantic_ai_client(base: str, tp: type[BaseModel]) -> Client:
    from pydantic_ai import Agent, NativeOutput
    from pydantic_ai.models.openai import OpenAIChatModel
    from pydantic_ai.providers.openai import OpenAIProvider

    def agent() -> Any:
        model = OpenAIChatModel(MODEL, provider=OpenAIProvider(base_url=base, api_key="k"))
        return Agent(model, output_type=NativeOutput(tp))

    sync_agent = agent()

    def call() -> Any:
        return sync_agent.run_sync(PROMPT).output

    def open_async() -> Opened:
        own = agent()

        async def acall() -> Any:
            return (await own.run(PROMPT)).output

        return acall, _nothing

    return Client(call, open_async, lambda: None)


def litellm_client(base: str, tp: type[BaseModel]) -> Client:
    import litellm

    options = {
        "model": f"openai/{MODEL}",
        "api_base": base,
        "api_key": "k",
        "messages": MESSAGES,
        "response_format": tp,
    }

    def call() -> Any:
        response = litellm.completion(**options)
        return tp.model_validate_json(response.choices[0].message.content)

    def open_async() -> Opened:
        async def acall() -> Any:
            response = await litellm.acompletion(**options)
            return tp.model_validate_json(response.choices[0].message.content)

        return acall, _nothing

    return Client(call, open_async, lambda: None)


LIBRARIES: dict[str, tuple[str | None, Callable[[str, type[BaseModel]], Client]]] = {
    # name: (distribution, client)
    "raw httpx2 + validation (floor)": ("httpx2", floor),
    "allama": ("allama", allama_client),
    "openai-python": ("openai", openai_client),
    "instructor": ("instructor", instructor_client),
    "pydantic-ai": ("pydantic-ai-slim", pydantic_ai_client),
    "LiteLLM": ("litellm", litellm_client),
}


def _version(distribution: str | None) -> str:
    if distribution is None:
        return ""
    try:
        return importlib.metadata.version(distribution)
    except importlib.metadata.PackageNotFoundError:
        return ""


def _runs(workload: str, client: Client, calls: int) -> Callable[[], float]:
    """A function making `calls` extractions in `workload`, answering its CPU time."""
    if workload == "sync":

        def run() -> float:
            began = time.process_time()
            for _ in range(calls):
                client.sync()
            return time.process_time() - began

        return run
    concurrency = 1 if workload == "async" else CONCURRENT

    async def calls_in_flight() -> None:
        acall, aclose = client.open_async()
        for _ in range(calls // concurrency):
            await asyncio.gather(*(acall() for _ in range(concurrency)))
        await aclose()

    def arun() -> float:
        began = time.process_time()
        asyncio.run(calls_in_flight())
        return time.process_time() - began

    return arun


WORKLOADS = {
    "sync": "sync, one at a time",
    "async": "async, one at a time",
    "concurrent": f"async, {CONCURRENT} in flight",
}


def main() -> None:
    only = set(sys.argv[1:])
    server, port = start_server()
    missing = [name for name, (dist, _) in LIBRARIES.items() if not _version(dist)]
    libraries = {name: made for name, made in LIBRARIES.items() if name not in missing}
    rows: list[tuple[str, str, str, float, float, float]] = []
    try:
        for index, (label, (tp, answer, calls)) in enumerate(PAYLOADS.items()):
            base = f"http://127.0.0.1:{port}/{index}/v1"
            clients = {name: make(base, tp) for name, (_, make) in libraries.items()}
            expected = tp.model_validate_json(answer).model_dump()
            for name, client in clients.items():
                # instructor answers an instance of a subclass of the type it was given.
                if client.sync().model_dump() != expected:
                    raise SystemExit(f"{name} did not read the answer back")
            for workload, described in WORKLOADS.items():
                if only and not only & {workload, label}:
                    continue
                count = max(calls, CONCURRENT * 2) if workload == "concurrent" else calls
                count -= count % (CONCURRENT if workload == "concurrent" else 1)
                runs = {name: _runs(workload, client, count) for name, client in clients.items()}
                for run in runs.values():
                    run()  # warm up
                times: dict[str, list[float]] = {name: [] for name in runs}
                for _ in range(ROUNDS):
                    for name, run in runs.items():
                        times[name].append(run() / count)
                floor_times = times["raw httpx2 + validation (floor)"]
                for name, spent in times.items():
                    ratios = [ours / base for ours, base in zip(spent, floor_times, strict=True)]
                    rows.append(
                        (
                            label,
                            described,
                            name,
                            min(spent),
                            min(spent) / min(floor_times),
                            statistics.median(ratios),
                        )
                    )
            for client in clients.values():
                client.close()
    finally:
        server.terminate()
    versions = ", ".join(f"{dist} {_version(dist)}" for dist, _ in libraries.values())
    print(f"client CPU per extraction, best of {ROUNDS} rounds; Python {sys.version.split()[0]}")
    print(f"versions: {versions}")
    if missing:
        print(f"not installed (left out): {', '.join(missing)}; `./run bench-peers` installs them")
    print("| answer | workload | client | CPU per call | ratio to the floor | median ratio |")
    print("|---|---|---|---:|---:|---:|")
    for label, described, name, cpu, ratio, median in rows:
        print(
            f"| {label} | {described} | {name} | {cpu * 1e6:.0f} µs | {ratio:.2f} | {median:.2f} |"
        )


if __name__ == "__main__":
    main()
