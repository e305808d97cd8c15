"""A 200 answer that the adapter cannot read as a response (a Chat Completions body sent to
the Responses decoder, `[1,2,3]`, an HTML page, an object of another shape) was made and
may be billed, with nothing read to say what for: its cost is unknown, as an answer cut off
after its status is. It was a server error that reported no usage, counted free: a batch
run's summary, its ledger and `allama batch status` said $0, and `max_cost` never stopped
the run. A usage the body does report is still counted, and an error object under a 200
(the provider's own refusal) stays as it was."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from decimal import Decimal
from pathlib import Path
from typing import Any

import httpx2
import pytest
from pydantic import BaseModel

import allama
from allama import ChatRequest, ServerError, Usage
from allama.cli import main
from allama.errors import REPORTED_USAGE_KEY, Error, OverloadedError, paid_for
from allama.extract._metadata import ExtractionMetadata

NO_COUNTS = "no token counts came with a call that was made (its answer cut off, say)"
OLLAMA_UNPRICED = "no price for a model Ollama serves, locally or in its cloud (ollama)"

CHAT_COMPLETION = {
    "id": "chatcmpl-1",
    "object": "chat.completion",
    "model": "gpt-4o-mini",
    "choices": [
        {
            "index": 0,
            "message": {"role": "assistant", "content": '{"n": 1}'},
            "finish_reason": "stop",
        }
    ],
    "usage": {"prompt_tokens": 100, "completion_tokens": 10, "total_tokens": 110},
}


class Row(BaseModel):
    n: int


class Adapter:
    def __init__(self, name: str, model: str, what: str, shapeless: str, **options: Any) -> None:
        self.name = name
        self.model = model
        self.what = what
        """What the decoder calls an answer ("a response", "a message")."""
        self.shapeless = shapeless
        """Why it refuses `{"detail": "ok"}`."""
        self.options = options

    def provider(self, answer: Callable[[], httpx2.Response]) -> Any:
        def handler(request: httpx2.Request) -> httpx2.Response:
            return answer()

        transport = allama.Transport(
            client=httpx2.Client(transport=httpx2.MockTransport(handler)),
            async_client=httpx2.AsyncClient(transport=httpx2.MockTransport(handler)),
        )
        return allama.provider(
            self.name, api_key="sk-test-key", transport=transport, **self.options
        )

    def __repr__(self) -> str:
        return f"{self.name}{'/' + self.options['api'] if self.options else ''}"


ADAPTERS = [
    Adapter("openai", "gpt-4o-mini", "a chat completion", "it has no `choices`"),
    Adapter("openai", "gpt-4o-mini", "a response", "it has no `output` list", api="responses"),
    Adapter("anthropic", "claude-sonnet-4-5", "a message", "it has no `content` list"),
    Adapter("gemini", "gemini-2.5-flash", "a response", "it has none of the fields of a response"),
    Adapter("ollama", "llama3", "a response", "it has none of the fields of a response"),
]

BODIES = {
    "html": (
        "text/html",
        b"<html><body>ok</body></html>",
        "it is an HTML page, not JSON (check the base URL, or a proxy in between): ok",
    ),
    "list": ("application/json", b"[1,2,3]", "it is not a JSON object"),
    "shapeless": ("application/json", b'{"detail": "ok"}', None),
}


def _answer(content_type: str, body: bytes) -> Callable[[], httpx2.Response]:
    return lambda: httpx2.Response(200, headers={"content-type": content_type}, content=body)


def _unknown_cost(adapter: Adapter) -> str:
    """Why the record has no cost: no counts came (Ollama's models have no price at all)."""
    return OLLAMA_UNPRICED if adapter.name == "ollama" else NO_COUNTS


def _failed(call: Callable[[], object]) -> Error:
    with pytest.raises(Error) as raised:
        call()
    return raised.value


@pytest.mark.parametrize("adapter", ADAPTERS, ids=repr)
@pytest.mark.parametrize("kind", list(BODIES))
def test_a_200_body_that_is_no_answer_was_made_and_its_cost_is_unknown(
    adapter: Adapter, kind: str
) -> None:
    content_type, body, why = BODIES[kind]
    provider = adapter.provider(_answer(content_type, body))
    request = ChatRequest(adapter.model).user("Hi")
    message = (
        f"the provider answered with a body that is not {adapter.what}: {why or adapter.shapeless}"
    )
    for call in (lambda: provider.chat(request), lambda: asyncio.run(provider.achat(request))):
        error = _failed(call)
        assert type(error) is ServerError
        assert (error.message, error.retryable) == (message, True)
        assert error.context.body == body.decode()
        assert error.context.metadata == {REPORTED_USAGE_KEY: {}}
        assert paid_for(error) == [{"provider": adapter.name, "model": adapter.model, "usage": {}}]

    # An extraction's record: a call paid for (a usage of no counts) at a cost unknown.
    async def extract() -> object:
        return await allama.aextract(provider, Row, request)

    for call in (lambda: allama.extract(provider, Row, request), lambda: asyncio.run(extract())):
        error = _failed(call)
        assert type(error) is ServerError
        record = ExtractionMetadata.from_error(error)
        assert record is not None
        assert (record.usage, record.cost) == (Usage(), None)
        assert record.cost_missing == _unknown_cost(adapter)


def test_a_chat_completion_sent_to_the_responses_decoder_is_not_counted_free() -> None:
    """The probe's case: its usage is read in the Responses terms, in which it has no
    counts (`prompt_tokens`, not `input_tokens`), so the call's cost is unknown."""
    adapter = ADAPTERS[1]
    body = json.dumps(CHAT_COMPLETION).encode()
    provider = adapter.provider(_answer("application/json", body))
    request = ChatRequest("gpt-4o-mini").user("Hi")
    error = _failed(lambda: allama.extract(provider, Row, request))
    assert error.message == (
        "the provider answered with a body that is not a response: it has no `output` list"
    )
    assert paid_for(error) == [{"provider": "openai", "model": "gpt-4o-mini", "usage": {}}]
    record = ExtractionMetadata.from_error(error)
    assert record is not None and (record.cost, record.cost_missing) == (None, NO_COUNTS)


def _id(value: object) -> str:
    return repr(value) if isinstance(value, Adapter) else ""


READABLE_USAGE = [
    (
        ADAPTERS[0],
        {"model": "gpt-4o-mini", "usage": {"prompt_tokens": 100, "completion_tokens": 10}},
        "it has no `choices`",
        Decimal("0.000021"),
    ),
    (
        ADAPTERS[1],
        {"model": "gpt-4o-mini", "usage": {"input_tokens": 100, "output_tokens": 10}},
        "it has no `output` list",
        Decimal("0.000021"),
    ),
    (
        ADAPTERS[2],
        {
            "type": "message",
            "model": "claude-sonnet-4-5",
            "usage": {"input_tokens": 100, "output_tokens": 10},
        },
        "it has no `content` list",
        Decimal("0.00045"),
    ),
]


@pytest.mark.parametrize(("adapter", "body", "why", "cost"), READABLE_USAGE, ids=_id)
def test_a_usage_the_unreadable_body_reports_is_counted_rather_than_unknown(
    adapter: Adapter, body: dict[str, Any], why: str, cost: Decimal
) -> None:
    provider = adapter.provider(_answer("application/json", json.dumps(body).encode()))
    request = ChatRequest(adapter.model).user("Hi")
    error = _failed(lambda: allama.extract(provider, Row, request))
    assert error.message == f"the provider answered with a body that is not {adapter.what}: {why}"
    assert [entry["usage"] for entry in paid_for(error)] == [
        {"input_tokens": 100, "output_tokens": 10}
    ]
    record = ExtractionMetadata.from_error(error)
    assert record is not None
    assert record.usage == Usage(input_tokens=100, output_tokens=10)
    assert record.cost is not None and (record.cost.total, record.cost_missing) == (cost, None)


def test_an_error_object_under_a_200_stays_the_providers_refusal() -> None:
    """Not a body unread: the provider says what went wrong, and reports no usage."""
    body = b'{"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}'
    provider = ADAPTERS[2].provider(_answer("application/json", body))
    error = _failed(lambda: provider.chat(ChatRequest("claude-sonnet-4-5").user("Hi")))
    assert type(error) is OverloadedError and error.message == "Overloaded"
    assert REPORTED_USAGE_KEY not in error.context.metadata and paid_for(error) == []


@pytest.mark.parametrize("adapter", ADAPTERS, ids=repr)
def test_a_streamed_call_answered_with_an_unreadable_object_is_not_counted_free(
    adapter: Adapter,
) -> None:
    """A JSON object answering a streamed call is read as the plain call's answer: one that
    is no answer is made, and maybe billed, as it is there."""
    provider = adapter.provider(_answer("application/json", b'{"detail": "ok"}'))
    request = ChatRequest(adapter.model).user("Hi")

    def stream() -> None:
        with provider.chat_stream(request) as events:
            list(events)

    error = _failed(stream)
    assert type(error) is ServerError
    assert [entry["usage"] for entry in paid_for(error)] == [{}]
    error = _failed(lambda: list(allama.extract_stream(provider, Row, request)))
    record = ExtractionMetadata.from_error(error)
    assert record is not None and (record.usage, record.cost) == (Usage(), None)


def test_a_stream_that_turns_unreadable_after_its_answer_began_is_not_counted_free() -> None:
    """Already so before this fix (the stream's collector marks the call made), kept."""
    began = b'data: {"choices":[{"index":0,"delta":{"content":"{\\"n\\": "}}]}\n\n'
    request = ChatRequest("gpt-4o-mini").user("Hi")
    for tail in (b"data: not json\n\n", b"<html>ok</html>\n\n", b'data: {"detail": 1}\n\n'):
        provider = ADAPTERS[0].provider(_answer("text/event-stream", began + tail))

        def read(provider: Any = provider) -> None:
            list(allama.extract_stream(provider, Row, request))

        error = _failed(read)
        record = ExtractionMetadata.from_error(error)
        assert record is not None and (record.usage, record.cost) == (Usage(), None)


def _stopped(adapter: Adapter) -> str:
    return (
        f"the cost of an attempt of #0 is unknown ({_unknown_cost(adapter)}): "
        "the budget of $1 cannot be kept"
    )


@pytest.mark.parametrize("adapter", ADAPTERS[:4], ids=repr)
def test_a_budget_stops_at_an_unreadable_answer_rather_than_count_it_free(
    adapter: Adapter, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Ollama is left out: a budget is refused with it (its models have no price)."""
    calls = 0

    def answer() -> httpx2.Response:
        nonlocal calls
        calls += 1
        return httpx2.Response(200, headers={"content-type": "text/html"}, content=b"<html/>")

    provider = adapter.provider(answer)
    options: dict[str, Any] = {
        "request": ChatRequest(adapter.model),
        "concurrency": 1,
        "max_cost": "1",
        "max_attempts": 3,
        "backoff": 0,
    }
    inputs = ["in0", "in1", "in2"]
    ledger = tmp_path / "ledger.sqlite"
    run: allama.BatchRun[Row] = allama.batch(provider, Row, inputs, ledger=ledger, **options)
    results = sorted(run, key=lambda r: r.index)
    assert [(r.index, r.failure.kind if r.failure else None) for r in results] == [
        (0, "server"),
        (1, "not_started"),
        (2, "not_started"),
    ]
    summary = run.summary
    assert (summary.attempts, summary.cost_unknown, summary.stopped) == (
        1,
        1,
        _stopped(adapter),
    )
    assert summary.cost_missing == _unknown_cost(adapter)
    assert summary.cost == Decimal(0)  # what is known: nothing
    assert calls == 1
    # The ledger, as `allama batch status` reads it: a cost unknown, not $0.
    assert main(["batch", "status", str(ledger), "--json"]) == 0
    status = json.loads(capsys.readouterr().out)
    assert (status["cost"], status["cost_unknown"]) == (None, 1)

    async def gathered() -> allama.AsyncBatchRun[Row]:
        run = allama.abatch(provider, Row, inputs, **options)
        async for _ in run:
            pass
        return run

    summary = asyncio.run(gathered()).summary
    assert (summary.attempts, summary.cost_unknown, summary.stopped) == (
        1,
        1,
        _stopped(adapter),
    )
    assert calls == 2
