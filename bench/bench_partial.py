"""What the typed partial value of a stream costs, read after every event, on each streaming wire.

A list of rows streams from an in-process `httpx2` transport, through `allama.provider(...)`
and `extract_stream` (native mode: the JSON is the text), on every streaming wire allama
speaks, each answered at the path the provider posts to:

- Chat Completions SSE (`POST /v1/chat/completions`): OpenAI's preset, then any
  OpenAI-compatible endpoint (`openai-compatible`); a final usage chunk only on `openai`,
  the one that asks for it (`stream_options.include_usage`);
- Responses API SSE (`POST /v1/responses`, `openai` with `api="responses"`):
  `response.created` ... `response.output_text.delta` ... `response.completed` with usage;
- Anthropic Messages SSE (`POST /v1/messages`): `message_start`, a text block of
  `text_delta`s, `message_delta` with the stop reason and usage, `message_stop`;
- Gemini `streamGenerateContent?alt=sse`: one `GenerateContentResponse` per event, usage in
  each, the finish reason in the last;
- Ollama's native `/api/chat` NDJSON: `message.content` pieces, then a `done: true` line with
  the counts.

The events are shaped after recorded real traffic (the conformance corpus), each text
delta carrying one chunk of the JSON; a request at any other method, path or query is
answered 404. Each endpoint's line in the table names the enforcement
`Extractor().plan(..., stream=True)` reports for it. Before it is timed, each stream is
checked once: one text delta per chunk, a partial value part-way that holds fewer rows
than the end, the finished value equal to the expected one (and to the last partial
value), the same enforcement in the extraction's record as in the plan, the usage reported
(where the wire sends it), the finish reason `stop`.

For each endpoint, in turn:

- `partial` read after every event `extract_stream` yields (one text delta per chunk, plus
  the few that frame the stream; on Gemini also a usage event per chunk), then `finish()`;
- `partial` never read, then `finish()`: the same stream validated once at the end (the floor);

for 200 rows in 500 chunks and 2,000 rows in 5,000 chunks (the same chunk size, ten times
the output: linear means ten times the CPU), and 2,000 rows in 500 chunks. For comparison,
what most libraries do: re-parse the whole buffer with `pydantic_core.from_json(...,
allow_partial=True)` and validate it after every chunk (quadratic), on the text alone.

The rows are objects of five scalars (`--payload rows`, the default), or of three scalars,
a list of two strings and an object of two numbers (`--payload nested`), or of two scalars
and an `Iterable` of two strings (`--payload tagged`: each snapshot gets iterators of its
own); or the stream is one long text with escapes, its "rows" its sentences (`--payload
text`), or a map of numbers, its "rows" its entries (`--payload map`).

CPU time (`time.process_time`), best of a few runs, the cases measured in turn; the
ratio of the best times, and the median ratio of runs measured one after the other. Run by
hand: `python bench/bench_partial.py [--repeat N | N] [--smoke] [--payload PAYLOAD]
[endpoint ...]`; endpoints by name (`openai`, `openai-compatible`, `openai-responses`,
`anthropic`, `gemini`, `ollama`; all by default). `--smoke` runs the sizes a tenth as large
(20 rows in 50 chunks, 200 in 500, 200 in 50), once, to check the wires quickly.
"""

from __future__ import annotations

import argparse
import functools
import json
import statistics
import sys
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import httpx2
import pydantic_core
from pydantic import BaseModel, TypeAdapter, ValidationError

import allama
from allama import (
    ChatRequest,
    ExtractionMode,
    FinishReason,
    HttpProvider,
    SchemaEnforcement,
    TextDelta,
    Transport,
)


class Item(BaseModel):
    sku: str
    name: str
    price: float
    quantity: int
    in_stock: bool


class Catalog(BaseModel):
    items: list[Item]


class Size(BaseModel):
    width: float
    height: float


class Record(BaseModel):
    sku: str
    name: str
    price: float
    tags: list[str]
    size: Size


class Shelf(BaseModel):
    items: list[Record]


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


def nested_document(rows: int) -> str:
    items = [
        {
            "sku": f"SKU-{i:05d}",
            "name": f"Item number {i}",
            "price": round(i * 1.25, 2),
            "tags": ["new", f"batch {i % 7}"],
            "size": {"width": round(10 + i % 13 * 0.5, 1), "height": i % 40},
        }
        for i in range(rows)
    ]
    return json.dumps({"items": items})


class Tagged(BaseModel):
    sku: str
    name: str
    tags: Iterable[str]


class Tags(BaseModel):
    items: list[Tagged]


def tagged_document(rows: int) -> str:
    items = [
        {"sku": f"SKU-{i:05d}", "name": f"Item number {i}", "tags": ["new", f"batch {i % 7}"]}
        for i in range(rows)
    ]
    return json.dumps({"items": items})


class Article(BaseModel):
    title: str
    body: str


def article_document(rows: int) -> str:
    sentence = 'Item {i} is "in stock".\n'
    return json.dumps(
        {"title": "Stock", "body": "".join(sentence.format(i=i) for i in range(rows))}
    )


class Prices(BaseModel):
    prices: dict[str, float]


def prices_document(rows: int) -> str:
    return json.dumps({"prices": {f"SKU-{i:05d}": round(i * 1.25, 2) for i in range(rows)}})


def tagged_plain(value: Any) -> Any:
    """A value with `Iterable` rows as plain data, its iterators read through."""
    return [(item.sku, item.name, list(item.tags)) for item in value.items]


@dataclass(frozen=True)
class Payload:
    """What the stream carries: the type asked for, and its document for a number of rows
    (sentences of a text, entries of a map); how much of the value a partial one holds, and
    the value as compared (an `Iterable` read through)."""

    name: str
    description: str
    type: type[BaseModel]
    document: Callable[[int], str]
    size: Callable[[Any], int] = lambda value: len(value.items)
    plain: Callable[[Any], Any] = lambda value: value


PAYLOADS = {
    "rows": Payload("rows", "rows of five scalars", Catalog, document),
    "nested": Payload(
        "nested", "rows of three scalars, a list of text and an object", Shelf, nested_document
    ),
    "tagged": Payload(
        "tagged",
        "rows of two scalars and an `Iterable` of text",
        Tags,
        tagged_document,
        plain=tagged_plain,
    ),
    "text": Payload(
        "text",
        "one long text with escapes (rows: its sentences)",
        Article,
        article_document,
        size=lambda value: len(value.body),
    ),
    "map": Payload(
        "map",
        "a map of numbers (rows: its entries)",
        Prices,
        prices_document,
        size=lambda value: len(value.prices),
    ),
}


def chunked(text: str, count: int) -> list[str]:
    size = -(-len(text) // count)
    return [text[i : i + size] for i in range(0, len(text), size)]


def tokens(text: str) -> int:
    """The output token count the synthetic streams report (about four characters a token)."""
    return max(1, len(text) // 4)


INPUT_TOKENS = 180
THOUGHT_TOKENS = 312  # Gemini 2.5 thinks by default, and counts it beside the candidates


def dumps(payload: dict[str, Any]) -> bytes:
    return json.dumps(payload, separators=(",", ":")).encode()


def sse_event(payload: dict[str, Any], name: str | None = None) -> bytes:
    """One SSE event; `name` for the `event:` line the typed APIs send."""
    head = b"event: " + name.encode() + b"\n" if name is not None else b""
    return head + b"data: " + dumps(payload) + b"\n\n"


# Chat Completions: after recorded gpt-4o-2024-08-06 streams (corpus `openai/
# length_max_tokens_stream`, `openai/refusal_strict_schema_stream`): a role chunk, a content
# chunk each, the finish chunk, the usage chunk (`choices: []`) when asked for, `[DONE]`.
def chat_completions_sse(
    chunks: list[str], model: str, schema: dict[str, Any], *, usage: bool
) -> list[bytes]:
    def event(choices: list[dict[str, Any]], counts: dict[str, Any] | None = None) -> bytes:
        chunk = {
            "id": "chatcmpl-bench",
            "object": "chat.completion.chunk",
            "created": 1766084443,
            "model": model,
            "service_tier": "default",
            "system_fingerprint": "fp_bench",
            "choices": choices,
            "usage": counts,
            "obfuscation": "Xo8",
        }
        return sse_event(chunk)

    def choice(delta: dict[str, Any], finish: str | None = None) -> list[dict[str, Any]]:
        return [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}]

    events = [event(choice({"role": "assistant", "content": "", "refusal": None}))]
    events.extend(event(choice({"content": chunk})) for chunk in chunks)
    events.append(event(choice({}, "stop")))
    if usage:
        output = tokens("".join(chunks))
        counts = {
            "prompt_tokens": INPUT_TOKENS,
            "completion_tokens": output,
            "total_tokens": INPUT_TOKENS + output,
            "prompt_tokens_details": {"cached_tokens": 0, "audio_tokens": 0},
            "completion_tokens_details": {
                "reasoning_tokens": 0,
                "audio_tokens": 0,
                "accepted_prediction_tokens": 0,
                "rejected_prediction_tokens": 0,
            },
        }
        events.append(event([], counts))
    events.append(b"data: [DONE]\n\n")
    return events


# Responses API: after a recorded gpt-4o-2024-08-06 `json_schema` stream (corpus
# `openai_responses/json_schema_strict_stream`): typed events with `event:` lines and
# sequence numbers; the finished text comes again in the `.done` events and in
# `response.completed`, which carries the usage. No `[DONE]`.
def responses_sse(chunks: list[str], model: str, schema: dict[str, Any]) -> list[bytes]:
    text = "".join(chunks)
    output = tokens(text)
    item_id = "msg_bench"
    numbers = iter(range(len(chunks) + 16))

    def event(kind: str, **fields: Any) -> bytes:
        return sse_event({"type": kind, "sequence_number": next(numbers), **fields}, kind)

    # The request's format, echoed back in every response object.
    text_format = {
        "type": "json_schema",
        "name": "catalog",
        "schema": schema,
        "strict": True,
    }

    def response(status: str, items: list[dict[str, Any]], usage: Any) -> dict[str, Any]:
        return {
            "id": "resp_bench",
            "object": "response",
            "created_at": 1761175265,
            "status": status,
            "background": False,
            "error": None,
            "incomplete_details": None,
            "instructions": None,
            "max_output_tokens": None,
            "max_tool_calls": None,
            "model": model,
            "output": items,
            "parallel_tool_calls": True,
            "previous_response_id": None,
            "prompt_cache_key": None,
            "reasoning": {"effort": None, "summary": None},
            "safety_identifier": None,
            "service_tier": "default",
            "store": False,
            "temperature": 1.0,
            "text": {"format": text_format, "verbosity": "medium"},
            "tool_choice": "auto",
            "tools": [],
            "top_logprobs": 0,
            "top_p": 1.0,
            "truncation": "disabled",
            "usage": usage,
            "user": None,
            "metadata": {},
        }

    part = {"type": "output_text", "annotations": [], "logprobs": [], "text": text}
    item = {
        "id": item_id,
        "type": "message",
        "status": "completed",
        "content": [part],
        "role": "assistant",
    }
    where = {"item_id": item_id, "output_index": 0, "content_index": 0}
    usage = {
        "input_tokens": INPUT_TOKENS,
        "input_tokens_details": {"cached_tokens": 0},
        "output_tokens": output,
        "output_tokens_details": {"reasoning_tokens": 0},
        "total_tokens": INPUT_TOKENS + output,
    }
    events = [
        event("response.created", response=response("in_progress", [], None)),
        event("response.in_progress", response=response("in_progress", [], None)),
        event(
            "response.output_item.added",
            output_index=0,
            item={**item, "status": "in_progress", "content": []},
        ),
        event("response.content_part.added", **where, part={**part, "text": ""}),
    ]
    events.extend(
        event("response.output_text.delta", **where, delta=chunk, logprobs=[], obfuscation="Xo8")
        for chunk in chunks
    )
    events += [
        event("response.output_text.done", **where, text=text, logprobs=[]),
        event("response.content_part.done", **where, part=part),
        event("response.output_item.done", output_index=0, item=item),
        event("response.completed", response=response("completed", [item], usage)),
    ]
    return events


# Anthropic Messages: after recorded streams (corpus `anthropic/plain_text_stream`,
# `anthropic/stop_reason_max_tokens_stream`): `message_start` with the input usage, a text
# block opened empty, a `ping`, a `text_delta` each, the block's stop, `message_delta` with
# the stop reason and the usage totals, `message_stop`.
def anthropic_sse(chunks: list[str], model: str, schema: dict[str, Any]) -> list[bytes]:
    usage = {
        "input_tokens": INPUT_TOKENS,
        "cache_creation_input_tokens": 0,
        "cache_read_input_tokens": 0,
        "cache_creation": {"ephemeral_5m_input_tokens": 0, "ephemeral_1h_input_tokens": 0},
        "output_tokens": 1,
        "service_tier": "standard",
    }
    message: dict[str, Any] = {
        "model": model,
        "id": "msg_bench",
        "type": "message",
        "role": "assistant",
        "content": [],
        "stop_reason": None,
        "stop_sequence": None,
        "usage": usage,
    }
    events = [
        sse_event({"type": "message_start", "message": message}, "message_start"),
        sse_event(
            {
                "type": "content_block_start",
                "index": 0,
                "content_block": {"type": "text", "text": ""},
            },
            "content_block_start",
        ),
        sse_event({"type": "ping"}, "ping"),
    ]
    events.extend(
        sse_event(
            {
                "type": "content_block_delta",
                "index": 0,
                "delta": {"type": "text_delta", "text": chunk},
            },
            "content_block_delta",
        )
        for chunk in chunks
    )
    totals = {
        "input_tokens": INPUT_TOKENS,
        "cache_creation_input_tokens": 0,
        "cache_read_input_tokens": 0,
        "output_tokens": tokens("".join(chunks)),
    }
    events += [
        sse_event({"type": "content_block_stop", "index": 0}, "content_block_stop"),
        sse_event(
            {
                "type": "message_delta",
                "delta": {"stop_reason": "end_turn", "stop_sequence": None},
                "usage": totals,
            },
            "message_delta",
        ),
        sse_event({"type": "message_stop"}, "message_stop"),
    ]
    return events


# Gemini `streamGenerateContent?alt=sse`: after recorded streams (corpus
# `gemini/stream_sse_text`, `gemini/thinking_include_thoughts_stream` for gemini-2.5-flash):
# `data:` events framed by CRLF, each a whole `GenerateContentResponse` holding its new text
# in `candidates[0].content.parts[0].text` and the usage so far; the last one carries
# `finishReason` and the candidates' count. No end marker.
def gemini_sse(chunks: list[str], model: str, schema: dict[str, Any]) -> list[bytes]:
    prompt = {
        "promptTokenCount": INPUT_TOKENS,
        "promptTokensDetails": [{"modality": "TEXT", "tokenCount": INPUT_TOKENS}],
        "thoughtsTokenCount": THOUGHT_TOKENS,
    }
    running = {**prompt, "totalTokenCount": INPUT_TOKENS + THOUGHT_TOKENS}
    output = tokens("".join(chunks))
    final = {
        **prompt,
        "candidatesTokenCount": output,
        "candidatesTokensDetails": [{"modality": "TEXT", "tokenCount": output}],
        "totalTokenCount": INPUT_TOKENS + THOUGHT_TOKENS + output,
    }

    def event(chunk: str, last: bool) -> bytes:
        candidate: dict[str, Any] = {
            "content": {"parts": [{"text": chunk}], "role": "model"},
            "index": 0,
        }
        if last:
            candidate["finishReason"] = "STOP"
        payload = {
            "candidates": [candidate],
            "usageMetadata": final if last else running,
            "modelVersion": model,
            "responseId": "bench-response-id",
        }
        return b"data: " + dumps(payload) + b"\r\n\r\n"

    return [event(chunk, index == len(chunks) - 1) for index, chunk in enumerate(chunks)]


# Ollama `/api/chat`: after a recorded stream (corpus `ollama/api_chat_stream_ndjson`): one
# JSON line per piece with `done: false`, then a line with empty content, `done: true`,
# `done_reason` and the counts and durations.
def ollama_ndjson(chunks: list[str], model: str, schema: dict[str, Any]) -> list[bytes]:
    def line(content: str, **more: Any) -> bytes:
        payload = {
            "model": model,
            "created_at": "2024-12-06T00:46:58.265747Z",
            "message": {"role": "assistant", "content": content},
            **more,
        }
        return dumps(payload) + b"\n"

    lines = [line(chunk, done=False) for chunk in chunks]
    lines.append(
        line(
            "",
            done_reason="stop",
            done=True,
            total_duration=2254970291,
            load_duration=574751416,
            prompt_eval_count=INPUT_TOKENS,
            prompt_eval_duration=1502000000,
            eval_count=tokens("".join(chunks)),
            eval_duration=175000000,
        )
    )
    return lines


Wire = Callable[[list[str], str, dict[str, Any]], list[bytes]]
"""The events of a stream of `chunks` from `model`; the schema asked for is echoed back
only by the Responses API."""


@dataclass(frozen=True)
class Endpoint:
    """A preset, the model asked for, and the stream its server answers with, where."""

    name: str
    preset: str
    wire_name: str
    wire: Wire
    model: str
    base_url: str
    path: str
    content_type: str
    query: str = ""
    usage: bool = True
    """Whether the stream reports usage (Chat Completions only when asked for it)."""
    options: dict[str, str] = field(default_factory=dict)

    def provider(self, events: list[bytes]) -> HttpProvider:
        """The preset's provider, its requests answered in process with `events`."""

        def handler(request: httpx2.Request) -> httpx2.Response:
            url = request.url
            if (
                request.method != "POST"
                or url.path != self.path
                or url.query.decode() != self.query
            ):
                return httpx2.Response(
                    404, json={"error": {"message": f"no route for {request.method} {url}"}}
                )
            return httpx2.Response(
                200, content=iter(events), headers={"content-type": self.content_type}
            )

        transport = Transport(
            client=httpx2.Client(transport=httpx2.MockTransport(handler)),
            async_client=httpx2.AsyncClient(transport=httpx2.MockTransport(handler)),
        )
        return allama.provider(
            self.preset,
            api_key="k",
            base_url=self.base_url,
            transport=transport,
            **self.options,
        )

    def request(self) -> ChatRequest:
        return ChatRequest(self.model).user("list the catalog").with_option(ExtractionMode.NATIVE)

    def label(self) -> str:
        api = "".join(f", {key}={value!r}" for key, value in self.options.items())
        return f"`{self.preset}`{api}"


SSE = "text/event-stream; charset=utf-8"
GPT = "gpt-4o-2024-08-06"

ENDPOINTS = (
    Endpoint(
        "openai",
        "openai",
        "Chat Completions SSE",
        functools.partial(chat_completions_sse, usage=True),
        GPT,
        "http://bench/v1",
        "/v1/chat/completions",
        SSE,
    ),
    Endpoint(
        "openai-compatible",
        "openai-compatible",
        "Chat Completions SSE",
        functools.partial(chat_completions_sse, usage=False),
        GPT,
        "http://bench/v1",
        "/v1/chat/completions",
        SSE,
        usage=False,
    ),
    Endpoint(
        "openai-responses",
        "openai",
        "Responses API SSE",
        responses_sse,
        GPT,
        "http://bench/v1",
        "/v1/responses",
        SSE,
        options={"api": "responses"},
    ),
    Endpoint(
        "anthropic",
        "anthropic",
        "Messages SSE",
        anthropic_sse,
        "claude-sonnet-4-5",
        "http://bench",
        "/v1/messages",
        SSE,
    ),
    Endpoint(
        "gemini",
        "gemini",
        "streamGenerateContent SSE",
        gemini_sse,
        "gemini-2.5-flash",
        "http://bench/v1beta",
        "/v1beta/models/gemini-2.5-flash:streamGenerateContent",
        "text/event-stream",
        query="alt=sse",
    ),
    Endpoint(
        "ollama",
        "ollama",
        "/api/chat NDJSON",
        ollama_ndjson,
        "llama3.1",
        "http://bench:11434",
        "/api/chat",
        "application/x-ndjson",
    ),
)


def enforcement(endpoint: Endpoint, tp: type[BaseModel]) -> SchemaEnforcement:
    """What the plan of a streamed extraction says the endpoint enforces."""
    plan = allama.Extractor().plan(endpoint.provider([]), tp, endpoint.request(), stream=True)
    assert plan.mode is ExtractionMode.NATIVE, (endpoint.name, plan.mode)
    return plan.enforcement


def check(
    endpoint: Endpoint,
    chat: HttpProvider,
    chunks: list[str],
    payload: Payload,
    expected: Any,
    kind: str,
) -> None:
    """That the stream streams: a text delta per chunk, a partial value part-way, the value,
    the usage and the finish reason at the end (`expected`, as `payload.plain` gives it)."""
    deltas = 0
    halfway: Any = None
    with allama.extract_stream(chat, payload.type, endpoint.request()) as stream:
        for event in stream:
            if isinstance(event, TextDelta):
                deltas += 1
                if deltas == len(chunks) // 2:
                    halfway = stream.partial
        last = stream.partial
        extracted = stream.finish()
    name = endpoint.name
    assert deltas == len(chunks), (name, deltas, len(chunks))
    assert halfway is not None, name
    assert payload.size(halfway) < payload.size(extracted.value), (name, halfway)
    assert payload.plain(extracted.value) == expected, name
    assert payload.plain(last) == expected, name
    assert extracted.metadata.enforcement == kind, (name, extracted.metadata.enforcement)
    response = extracted.response
    assert response.finish_reason == FinishReason.STOP, (name, response.finish_reason)
    if endpoint.usage:
        usage = response.usage
        assert usage is not None and usage.input_tokens == INPUT_TOKENS, (name, usage)
        assert usage.output_tokens is not None, (name, usage)
        assert usage.output_tokens >= tokens("".join(chunks)), (name, usage)
    else:
        assert response.usage is None, (name, response.usage)


def streamed(
    endpoint: Endpoint, chat: HttpProvider, payload: Payload, expected: Any, read_partial: bool
) -> None:
    with allama.extract_stream(chat, payload.type, endpoint.request()) as stream:
        for _ in stream:
            if read_partial:
                stream.partial  # noqa: B018 - reading it is what is measured
        last = stream.partial if read_partial else None
        value = stream.finish().value
    plain = payload.plain
    assert plain(value) == expected
    # The stream's last partial value is the finished one (compared again only if it is
    # not the same object, so that both sides pay for one comparison).
    assert not read_partial or last is value or plain(last) == expected


def reparse_every_chunk(chunks: list[str], payload: Payload, expected: Any) -> None:
    adapter = TypeAdapter(payload.type)
    buffer = ""
    value = None
    for chunk in chunks:
        buffer += chunk
        parsed = pydantic_core.from_json(buffer, allow_partial=True)
        try:
            value = adapter.validate_python(parsed, experimental_allow_partial=True)
        except ValidationError:
            value = None
    assert payload.plain(value) == expected


def best_cpu(runs: list[Callable[[], None]], repeat: int) -> list[float]:
    """Best CPU time of each run, the runs measured in turn so drift hits them alike."""
    return [min(times) for times in cpu_times(runs, repeat)]


def cpu_times(runs: list[Callable[[], None]], repeat: int) -> list[list[float]]:
    """The CPU time of each run, `repeat` times, the runs measured in turn."""
    for run in runs:
        run()  # warm up
    times: list[list[float]] = [[] for _ in runs]
    for _ in range(repeat):
        for index, run in enumerate(runs):
            start = time.process_time()
            run()
            times[index].append(time.process_time() - start)
    return times


def paired_ratio(first: list[float], second: list[float]) -> float:
    """The median of the ratios of runs measured one after the other: a slow phase of the
    machine lasting seconds hits both runs of a pair, where it can spoil every run of one
    side of a best-of comparison."""
    return statistics.median(a / b for a, b in zip(first, second, strict=True))


# (rows, chunks): small, ten times the output at the same chunk size, and that output in
# as many chunks as the small one.
SIZES = ((200, 500), (2_000, 5_000), (2_000, 500))
SMOKE_SIZES = ((20, 50), (200, 500), (200, 50))


def arguments(argv: Sequence[str]) -> tuple[list[Endpoint], int, bool, Payload]:
    by_name = {endpoint.name: endpoint for endpoint in ENDPOINTS}
    parser = argparse.ArgumentParser(
        description="CPU cost of reading the partial value of a streamed extraction."
    )
    parser.add_argument(
        "targets",
        nargs="*",
        metavar="endpoint",
        help=f"endpoints to measure ({', '.join(by_name)}; all by default); a bare "
        "number is the repeat count",
    )
    parser.add_argument("--repeat", type=int, help="timed runs of each case (default 5)")
    parser.add_argument(
        "--smoke", action="store_true", help=f"sizes {SMOKE_SIZES}, once (a quick check)"
    )
    parser.add_argument(
        "--payload",
        choices=list(PAYLOADS),
        default="rows",
        help="; ".join(f"{p.name}: {p.description}" for p in PAYLOADS.values()),
    )
    options = parser.parse_intermixed_args(argv)
    chosen: list[Endpoint] = []
    repeat: int | None = options.repeat
    for target in options.targets:
        if target.isdigit():
            repeat = int(target)
        elif target in by_name:
            if by_name[target] not in chosen:
                chosen.append(by_name[target])
        else:
            parser.error(f"unknown endpoint {target!r}; known: {', '.join(by_name)}")
    if repeat is None:
        repeat = 1 if options.smoke else 5
    if repeat < 1:
        parser.error("the repeat count must be at least 1")
    smoke: bool = options.smoke
    return chosen or list(ENDPOINTS), repeat, smoke, PAYLOADS[options.payload]


def main(argv: Sequence[str] | None = None) -> None:
    endpoints, repeat, smoke, payload = arguments(sys.argv[1:] if argv is None else argv)
    schema = payload.type.model_json_schema()
    sizes = SMOKE_SIZES if smoke else SIZES
    small, large, _ = sizes
    scale = " (smoke sizes)" if smoke else ""
    print(
        f"CPU ms, best of {repeat}, Python {sys.version.split()[0]}{scale}; {payload.description}"
    )
    print(
        "| endpoint | wire | rows | chunks | `partial` every event | validated once at the end "
        "| ratio of the best | median ratio of pairs |"
    )
    print("|---|---|---:|---:|---:|---:|---:|---:|")
    figures: dict[tuple[str, int, int], float] = {}
    kinds: dict[str, SchemaEnforcement] = {}
    for endpoint in endpoints:
        kind = kinds[endpoint.name] = enforcement(endpoint, payload.type)
        for rows, count in sizes:
            text = payload.document(rows)
            expected = payload.plain(payload.type.model_validate_json(text))
            chunks = chunked(text, count)
            chat = endpoint.provider(endpoint.wire(chunks, endpoint.model, schema))
            check(endpoint, chat, chunks, payload, expected, kind)
            partials, onces = cpu_times(
                [
                    functools.partial(streamed, endpoint, chat, payload, expected, True),
                    functools.partial(streamed, endpoint, chat, payload, expected, False),
                ],
                repeat,
            )
            partial, once = min(partials), min(onces)
            figures[(endpoint.name, rows, count)] = partial
            print(
                f"| {endpoint.label()} ({kind}) | {endpoint.wire_name} | {rows:,} | {count:,} | "
                f"{partial * 1e3:.1f} | {once * 1e3:.1f} | {partial / once:.2f} | "
                f"{paired_ratio(partials, onces):.2f} |"
            )
    for endpoint in endpoints:
        growth = figures[(endpoint.name, *large)] / figures[(endpoint.name, *small)]
        print(
            f"{endpoint.label()} ({kinds[endpoint.name]}), {endpoint.wire_name}: ten times the "
            f"output at the same chunk size costs {growth:.1f} times the CPU"
        )
    rows, count = large
    text = payload.document(rows)
    expected = payload.plain(payload.type.model_validate_json(text))
    chunks = chunked(text, count)
    (reparse,) = best_cpu(
        [lambda: reparse_every_chunk(chunks, payload, expected)], max(1, repeat // 2)
    )
    print(
        f"re-parsing the buffer after every chunk ({rows:,} rows, {count:,} chunks, text "
        f"alone): {reparse * 1e3:.1f} ms"
    )


if __name__ == "__main__":
    main()
