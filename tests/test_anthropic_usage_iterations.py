"""Anthropic's usage of a request with several sampling passes, and its cost.

Server-side compaction (beta `compact-2026-01-12`) lists each pass in `usage.iterations`
(a compaction pass, then the message's), and its top-level counts are the last pass's
alone: the billed total is the sum over the passes. A server tool loop (web searches)
reports its input summed over its passes, each of which Anthropic bills at the long-context
rates only where its own input is over the model's threshold (200,000 tokens on Sonnet 4.5,
100,000 on Haiku 5.5, as its prices' tier starts): a sum over that says nothing of any pass,
unless `usage.iterations` lists them, when each is priced at its own rates. Each is
run through the preset over a mock transport, as a body and as a stream.

The recorded server tool loop is in the corpus (`ALLAMA_CORPUS_DIR`, default
`../shared/corpus/cases` next to the repository); its tests are skipped without it.
"""

from __future__ import annotations

import json
import os
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from tests._recording import provider

from allama import ChatRequest, ChatResponse, ExtractionMetadata, ExtractionMode, Usage

pytest.importorskip("genai_prices")


def _record(response: ChatResponse) -> ExtractionMetadata:
    """The record of one pass of `response`, which prices it."""
    metadata = ExtractionMetadata.new(ExtractionMode.NATIVE)
    metadata.record_pass(response, lambda warning: warning)
    return metadata


def _stream_of(message: dict[str, Any]) -> bytes:
    """`message` as Anthropic streams it: its input counts (and one output token) at the
    start, each block whole at its start, the whole usage in `message_delta`."""
    usage = message["usage"]
    start_usage = {k: v for k, v in usage.items() if k not in ("output_tokens", "iterations")}
    start = {
        **message,
        "content": [],
        "stop_reason": None,
        "usage": {**start_usage, "output_tokens": 1},
    }
    events: list[dict[str, Any]] = [{"type": "message_start", "message": start}]
    for index, block in enumerate(message["content"]):
        events.append({"type": "content_block_start", "index": index, "content_block": block})
        events.append({"type": "content_block_stop", "index": index})
    delta = {"stop_reason": message["stop_reason"], "stop_sequence": None}
    events.append({"type": "message_delta", "delta": delta, "usage": usage})
    events.append({"type": "message_stop"})
    return "".join(f"event: {e['type']}\ndata: {json.dumps(e)}\n\n" for e in events).encode()


def _answer(preset_model: str, message: dict[str, Any], *, streamed: bool, **options: Any) -> Any:
    answer: Any = _stream_of(message) if streamed else message
    target, _ = provider("anthropic", (200, answer), **options)
    request = ChatRequest(preset_model).user("go on")
    if streamed:
        return target.chat_stream(request).response()
    return target.chat(request)


# Compaction: the passes `usage.iterations` lists are summed.

COMPACTED = {
    "id": "msg_1",
    "type": "message",
    "role": "assistant",
    "model": "claude-sonnet-4-6",
    "content": [
        {"type": "compaction", "content": "Summary of the conversation: ..."},
        {"type": "text", "text": "Based on our conversation so far..."},
    ],
    "stop_reason": "end_turn",
    "stop_sequence": None,
    # Anthropic's documented example: the top level is the message pass alone.
    "usage": {
        "input_tokens": 23000,
        "output_tokens": 1000,
        "cache_creation_input_tokens": 0,
        "cache_read_input_tokens": 0,
        "iterations": [
            {"type": "compaction", "input_tokens": 180000, "output_tokens": 3500},
            {"type": "message", "input_tokens": 23000, "output_tokens": 1000},
        ],
    },
}


@pytest.mark.parametrize("streamed", [False, True], ids=["body", "stream"])
def test_a_compaction_pass_is_counted_and_priced(streamed: bool) -> None:
    response = _answer(
        "claude-sonnet-4-6",
        COMPACTED,
        streamed=streamed,
        headers={"anthropic-beta": "compact-2026-01-12"},
    )
    assert response.usage == Usage(
        input_tokens=203000, output_tokens=4500, cache_read_tokens=0, cache_write_tokens=0
    )
    # Each pass, as sent, for what prices a pass by its own size.
    details = response.provider_data["anthropic"]["usage_details"]
    assert details["iterations"] == COMPACTED["usage"]["iterations"]
    cost = _record(response).cost
    assert cost is not None
    # 203,000 input tokens at $3 and 4,500 output tokens at $15 a million (not 23,000 and
    # 1,000: $0.084).
    assert (cost.input, cost.output, cost.total) == (
        Decimal("0.609"),
        Decimal("0.0675"),
        Decimal("0.6765"),
    )


def _cached_passes() -> dict[str, Any]:
    """A compaction that read the cached history and wrote a one-hour cache entry, then the
    message pass, which wrote another: the top level says the last pass's alone."""
    message_pass = {
        "type": "message",
        "input_tokens": 500,
        "output_tokens": 800,
        "cache_read_input_tokens": 0,
        "cache_creation_input_tokens": 20000,
        "cache_creation": {"ephemeral_5m_input_tokens": 0, "ephemeral_1h_input_tokens": 20000},
    }
    compaction_pass = {
        "type": "compaction",
        "input_tokens": 1000,
        "output_tokens": 3000,
        "cache_read_input_tokens": 150000,
        "cache_creation_input_tokens": 10000,
        "cache_creation": {"ephemeral_5m_input_tokens": 0, "ephemeral_1h_input_tokens": 10000},
    }
    top = {k: v for k, v in message_pass.items() if k != "type"}
    return {
        **COMPACTED,
        "usage": {**top, "iterations": [compaction_pass, message_pass]},
    }


@pytest.mark.parametrize("streamed", [False, True], ids=["body", "stream"])
def test_cache_reads_and_writes_are_summed_over_the_passes_by_lifetime(streamed: bool) -> None:
    response = _answer("claude-sonnet-4-6", _cached_passes(), streamed=streamed)
    assert response.usage == Usage(
        input_tokens=181500, output_tokens=3800, cache_read_tokens=150000, cache_write_tokens=30000
    )
    details = response.provider_data["anthropic"]["usage_details"]
    assert details["cache_creation"] == {
        "ephemeral_5m_input_tokens": 0,
        "ephemeral_1h_input_tokens": 30000,
    }
    cost = _record(response).cost
    assert cost is not None
    # 1,500 uncached at $3, 150,000 cache reads at $0.30, 30,000 one-hour writes at $6 a
    # million; 3,800 out at $15.
    assert (cost.input, cost.output, cost.total) == (
        Decimal("0.2295"),
        Decimal("0.057"),
        Decimal("0.2865"),
    )


def test_an_advisor_pass_is_not_counted_as_the_executor_s_tokens() -> None:
    # Billed at the advisor model's rates, and left out of the top-level counts too.
    message = {
        **COMPACTED,
        "content": [{"type": "text", "text": "Done."}],
        "usage": {
            "input_tokens": 3000,
            "output_tokens": 200,
            "iterations": [
                {"type": "message", "input_tokens": 1000, "output_tokens": 100},
                {
                    "type": "advisor_message",
                    "model": "claude-opus-4-8",
                    "input_tokens": 1200,
                    "output_tokens": 600,
                },
                {"type": "message", "input_tokens": 2000, "output_tokens": 100},
            ],
        },
    }
    response = _answer("claude-sonnet-4-6", message, streamed=False)
    assert response.usage == Usage(input_tokens=3000, output_tokens=200)


def test_passes_without_their_counts_leave_the_top_level_counts() -> None:
    message = {
        **COMPACTED,
        "usage": {
            "input_tokens": 23000,
            "output_tokens": 1000,
            "iterations": [{"type": "fallback_message", "model": "claude-opus-4-8"}],
        },
    }
    response = _answer("claude-sonnet-4-6", message, streamed=False)
    assert response.usage == Usage(input_tokens=23000, output_tokens=1000)


# Long context: a pass is billed at the long-context rates by its own input.


def _plain(model: str, usage: dict[str, Any]) -> dict[str, Any]:
    return {
        "id": "msg_1",
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": [{"type": "text", "text": "Hi"}],
        "stop_reason": "end_turn",
        "stop_sequence": None,
        "usage": usage,
    }


PLAIN_LONG = {"input_tokens": 250000, "output_tokens": 1000}

LONG_PASS = {
    **PLAIN_LONG,
    "iterations": [{"type": "message", "input_tokens": 250000, "output_tokens": 1000}],
}


@pytest.mark.parametrize("usage", [PLAIN_LONG, LONG_PASS], ids=["plain", "one-pass-listed"])
@pytest.mark.parametrize("streamed", [False, True], ids=["body", "stream"])
def test_one_request_over_200k_is_priced_at_the_long_context_rates(
    streamed: bool, usage: dict[str, Any]
) -> None:
    message = _plain("claude-sonnet-4-5-20250929", usage)
    response = _answer("claude-sonnet-4-5", message, streamed=streamed)
    cost = _record(response).cost
    assert cost is not None
    # 250,000 input tokens at $6 and 1,000 output tokens at $22.50 a million (the standard
    # rates are $3 and $15).
    assert (cost.input, cost.output, cost.total) == (
        Decimal("1.5"),
        Decimal("0.0225"),
        Decimal("1.5225"),
    )


DEFAULT_CORPUS = Path(__file__).resolve().parents[1].parent / "shared/corpus/cases"
CORPUS = Path(os.environ.get("ALLAMA_CORPUS_DIR", DEFAULT_CORPUS))
PAUSED_LOOP = CORPUS / "anthropic" / "pause_turn_server_tool.json"


def _paused_loop() -> dict[str, Any]:
    """The recorded loop: claude-sonnet-4-5 without the 1M context window (no pass can be
    over 200,000 tokens), ten web searches, 401,468 input tokens summed over its passes."""
    if not PAUSED_LOOP.is_file():
        pytest.skip(f"no recorded traffic at {PAUSED_LOOP}")
    body: dict[str, Any] = json.loads(PAUSED_LOOP.read_text())["response_body"]
    assert body["usage"]["input_tokens"] == 401468
    assert body["usage"]["server_tool_use"] == {"web_search_requests": 10}
    return body


@pytest.mark.parametrize(
    ("preset_model", "body_model", "ref"),
    [
        ("claude-sonnet-4-5", None, "anthropic/claude-sonnet-4-5"),
        # Its prices hold no long-context tier: the reason is still the passes'.
        ("claude-sonnet-4-0", "claude-sonnet-4-20250514", "anthropic/claude-sonnet-4-0"),
    ],
)
@pytest.mark.parametrize("streamed", [False, True], ids=["body", "stream"])
def test_a_server_tool_loop_over_200k_summed_has_no_cost_with_the_reason(
    streamed: bool, preset_model: str, body_model: str | None, ref: str
) -> None:
    body = _paused_loop()
    if body_model is not None:
        body = {**body, "model": body_model}
    response = _answer(preset_model, body, streamed=streamed)
    assert response.usage == Usage(
        input_tokens=401468, output_tokens=792, cache_read_tokens=0, cache_write_tokens=0
    )
    record = _record(response)
    # Not the long-context rates of the sum ($2.526628), nor a claim that the call's input
    # was over 200,000.
    assert record.cost is None
    assert record.cost_missing == (
        "its 401468 input tokens are summed over the sampling passes of a server tool loop "
        "(10 web searches), and a pass is billed at the model's long-context rates only "
        f"where its own input is over 200,000: the passes' sizes are unknown ({ref})"
    )


def test_a_server_tool_loop_within_200k_is_priced_at_the_standard_rates() -> None:
    body = _paused_loop()
    usage = {**body["usage"], "input_tokens": 150000}
    response = _answer("claude-sonnet-4-5", {**body, "usage": usage}, streamed=False)
    cost = _record(response).cost
    assert cost is not None
    # 150,000 at $3 and 792 at $15 a million, and ten searches at $10 a thousand.
    assert cost.total == Decimal("0.56188")


# A server tool loop that lists its passes: each priced at the rates of its own input.


def _loop(
    passes: list[dict[str, Any]],
    *,
    listed: bool = True,
    model: str = "claude-sonnet-4-5-20250929",
) -> dict[str, Any]:
    """A server tool loop of `model` (two web searches) over `passes`, its top-level counts
    their sums (Anthropic's cumulative counts); `listed=False` leaves `usage.iterations`
    out."""
    usage: dict[str, Any] = {
        key: sum(entry.get(key, 0) for entry in passes)
        for key in (
            "input_tokens",
            "output_tokens",
            "cache_read_input_tokens",
            "cache_creation_input_tokens",
        )
    }
    hours = [entry["cache_creation"] for entry in passes if "cache_creation" in entry]
    if hours:
        usage["cache_creation"] = {
            key: sum(split[key] for split in hours)
            for key in ("ephemeral_5m_input_tokens", "ephemeral_1h_input_tokens")
        }
    usage["server_tool_use"] = {"web_search_requests": 2}
    if listed:
        usage["iterations"] = passes
    return _plain(model, usage)


def _pass(uncached: int, output: int, *, read: int = 0, written: int = 0) -> dict[str, Any]:
    entry: dict[str, Any] = {"type": "message", "input_tokens": uncached, "output_tokens": output}
    if read or written:
        entry["cache_read_input_tokens"] = read
        entry["cache_creation_input_tokens"] = written
    if written:  # all written to the one-hour cache
        entry["cache_creation"] = {
            "ephemeral_5m_input_tokens": 0,
            "ephemeral_1h_input_tokens": written,
        }
    return entry


# 150,000, 180,000 (100,000 of them read from the cache) and 90,000 input tokens: 420,000.
UNDER = [_pass(150000, 300), _pass(80000, 400, read=100000), _pass(90000, 500)]

# 150,000, 250,000 (50,000 read and 10,000 written to the one-hour cache) and 90,000 (5,000
# written to it): 490,000.
ONE_OVER = [
    _pass(150000, 300),
    _pass(190000, 400, read=50000, written=10000),
    _pass(85000, 500, written=5000),
]


@pytest.mark.parametrize(
    ("preset_model", "body_model"),
    [
        ("claude-sonnet-4-5", None),
        # Its prices hold no long-context tier, and no pass needs one.
        ("claude-sonnet-4-0", "claude-sonnet-4-20250514"),
    ],
)
@pytest.mark.parametrize("streamed", [False, True], ids=["body", "stream"])
def test_a_listed_server_tool_loop_with_every_pass_within_200k_is_priced_at_standard_rates(
    streamed: bool, preset_model: str, body_model: str | None
) -> None:
    message = _loop(UNDER)
    if body_model is not None:
        message = {**message, "model": body_model}
    response = _answer(preset_model, message, streamed=streamed)
    assert response.usage == Usage(
        input_tokens=420000, output_tokens=1200, cache_read_tokens=100000, cache_write_tokens=0
    )
    cost = _record(response).cost
    assert cost is not None
    # 320,000 uncached at $3 and 100,000 cache reads at $0.30 a million; 1,200 out at $15 a
    # million; two searches at $10 a thousand (the long-context rates of the 420,000 summed
    # would be $2.027).
    assert (cost.input, cost.output, cost.total) == (
        Decimal("0.99"),
        Decimal("0.018"),
        Decimal("1.028"),
    )


@pytest.mark.parametrize("streamed", [False, True], ids=["body", "stream"])
def test_a_listed_pass_over_200k_alone_is_priced_at_the_long_context_rates(
    streamed: bool,
) -> None:
    response = _answer("claude-sonnet-4-5", _loop(ONE_OVER), streamed=streamed)
    assert response.usage == Usage(
        input_tokens=490000, output_tokens=1200, cache_read_tokens=50000, cache_write_tokens=15000
    )
    cost = _record(response).cost
    assert cost is not None
    # The 250,000 pass at the long-context rates: 190,000 uncached at $6, 50,000 cache reads
    # at $0.60, 10,000 one-hour writes at $12 a million ($1.29), 400 out at $22.50 ($0.009).
    # The others at the standard ones: 235,000 uncached at $3, 5,000 one-hour writes at $6
    # ($0.735), 800 out at $15 ($0.012). Two searches at $10 a thousand ($0.02).
    assert (cost.input, cost.output, cost.total) == (
        Decimal("2.025"),
        Decimal("0.021"),
        Decimal("2.066"),
    )


@pytest.mark.parametrize("streamed", [False, True], ids=["body", "stream"])
def test_a_listed_pass_over_200k_without_a_long_context_price_has_no_cost(
    streamed: bool,
) -> None:
    import genai_prices

    message = {**_loop(ONE_OVER), "model": "claude-sonnet-4-20250514"}
    record = _record(_answer("claude-sonnet-4-0", message, streamed=streamed))
    assert record.cost is None
    assert record.cost_missing == (
        "its sampling passes over 200,000 input tokens (1 of 3, 250000 input tokens in all) "
        "are billed at the model's long-context rates, which genai-prices "
        f"{genai_prices.__version__} does not hold for anthropic/claude-sonnet-4-0"
    )


def test_a_server_tool_loop_that_lists_no_passes_still_has_no_cost_over_200k() -> None:
    response = _answer("claude-sonnet-4-5", _loop(UNDER, listed=False), streamed=False)
    record = _record(response)
    assert record.cost is None
    assert record.cost_missing == (
        "its 420000 input tokens are summed over the sampling passes of a server tool loop "
        "(2 web searches), and a pass is billed at the model's long-context rates only "
        "where its own input is over 200,000: the passes' sizes are unknown "
        "(anthropic/claude-sonnet-4-5)"
    )


def test_a_paid_failure_that_lists_its_passes_costs_what_the_answer_does() -> None:
    from allama.errors import Error, paid_for

    # A message without its `content` list cannot be read, but its usage was billed.
    unreadable = {key: value for key, value in _loop(ONE_OVER).items() if key != "content"}
    target, _ = provider("anthropic", (200, unreadable))
    with pytest.raises(Error) as raised:
        target.chat(ChatRequest("claude-sonnet-4-5").user("go on"))
    failed = ExtractionMetadata.new(ExtractionMode.NATIVE)
    failed.record_paid(paid_for(raised.value))
    assert failed.cost is not None
    answered = _record(_answer("claude-sonnet-4-5", _loop(ONE_OVER), streamed=False)).cost
    assert answered is not None
    assert (failed.cost.input, failed.cost.output, failed.cost.total) == (
        answered.input,
        answered.output,
        Decimal("2.066"),
    )


# Long-context rates from a threshold the price data holds: Claude Haiku 5.5's at 100,000
# ($0.10 in, $0.50 out a million under it; $0.50 and $2.50 over it).

HAIKU = "claude-haiku-5-5"

# Three passes of 80,000 input tokens each: 240,000 summed, none over 100,000.
UNDER_100K = [_pass(80000, 1000), _pass(80000, 1000), _pass(80000, 1000)]


@pytest.mark.parametrize("streamed", [False, True], ids=["body", "stream"])
def test_a_listed_haiku_5_5_loop_with_every_pass_within_100k_is_priced_at_standard_rates(
    streamed: bool,
) -> None:
    response = _answer(HAIKU, _loop(UNDER_100K, model=HAIKU), streamed=streamed)
    assert response.usage == Usage(
        input_tokens=240000, output_tokens=3000, cache_read_tokens=0, cache_write_tokens=0
    )
    cost = _record(response).cost
    assert cost is not None
    # 240,000 at $0.10 and 3,000 at $0.50 a million, two searches at $10 a thousand (not the
    # rates over 100,000 of the sum: $0.1475).
    assert (cost.input, cost.output, cost.total) == (
        Decimal("0.024"),
        Decimal("0.0015"),
        Decimal("0.0455"),
    )
    import genai_prices

    assert cost.source == f"genai-prices {genai_prices.__version__}, anthropic/claude-haiku-5-5"


@pytest.mark.parametrize("streamed", [False, True], ids=["body", "stream"])
def test_listed_haiku_5_5_passes_over_100k_alone_are_priced_at_the_rates_over_it(
    streamed: bool,
) -> None:
    response = _answer(HAIKU, _loop(ONE_OVER, model=HAIKU), streamed=streamed)
    cost = _record(response).cost
    assert cost is not None
    # The 150,000 and 250,000 passes over 100,000: 340,000 uncached at $0.50, 50,000 cache
    # reads at $0.05, 10,000 one-hour writes at $1 a million ($0.1825), 700 out at $2.50
    # ($0.00175). The 90,000 one under it: 85,000 uncached at $0.10, 5,000 one-hour writes at
    # $0.20 ($0.0095), 500 out at $0.50 ($0.00025). Two searches at $10 a thousand ($0.02).
    assert (cost.input, cost.output, cost.total) == (
        Decimal("0.192"),
        Decimal("0.002"),
        Decimal("0.214"),
    )


def test_a_haiku_5_5_loop_over_100k_summed_that_lists_no_passes_has_no_cost() -> None:
    response = _answer(HAIKU, _loop(UNDER_100K, listed=False, model=HAIKU), streamed=False)
    record = _record(response)
    assert record.cost is None
    assert record.cost_missing == (
        "its 240000 input tokens are summed over the sampling passes of a server tool loop "
        "(2 web searches), and a pass is billed at the model's long-context rates only "
        "where its own input is over 100,000: the passes' sizes are unknown "
        "(anthropic/claude-haiku-5-5)"
    )


@pytest.mark.parametrize("streamed", [False, True], ids=["body", "stream"])
def test_one_haiku_5_5_request_over_100k_is_priced_at_the_rates_over_it(streamed: bool) -> None:
    message = _plain(HAIKU, {"input_tokens": 150000, "output_tokens": 1000})
    cost = _record(_answer(HAIKU, message, streamed=streamed)).cost
    assert cost is not None
    # 150,000 at $0.50 and 1,000 at $2.50 a million.
    assert (cost.input, cost.output, cost.total) == (
        Decimal("0.075"),
        Decimal("0.0025"),
        Decimal("0.0775"),
    )


def test_the_same_listed_loop_of_sonnet_4_5_is_priced_at_its_standard_rates() -> None:
    response = _answer("claude-sonnet-4-5", _loop(UNDER_100K), streamed=False)
    cost = _record(response).cost
    assert cost is not None
    # Each pass within its 200,000: 240,000 at $3 and 3,000 at $15 a million, two searches.
    assert (cost.input, cost.output, cost.total) == (
        Decimal("0.72"),
        Decimal("0.045"),
        Decimal("0.785"),
    )


# Odd JSON in `usage.iterations`: read as the other native counts are


def _with_float_counts(message: dict[str, Any]) -> dict[str, Any]:
    """`message` with each pass's counts written as whole-number floats (`23000.0`)."""
    usage = message["usage"]
    iterations = [
        {key: float(value) if type(value) is int else value for key, value in entry.items()}
        for entry in usage["iterations"]
    ]
    return {**message, "usage": {**usage, "iterations": iterations}}


@pytest.mark.parametrize("streamed", [False, True], ids=["body", "stream"])
@pytest.mark.parametrize("message", [COMPACTED, _cached_passes()], ids=["plain", "cached"])
def test_passes_whose_counts_are_whole_number_floats_are_summed_and_priced(
    message: dict[str, Any], streamed: bool
) -> None:
    given = _answer("claude-sonnet-4-6", message, streamed=streamed)
    floats = _answer("claude-sonnet-4-6", _with_float_counts(message), streamed=streamed)
    # Summed over the passes, not the top level's (the last pass's alone).
    assert floats.usage == given.usage
    cost, float_cost = _record(given).cost, _record(floats).cost
    assert float_cost is not None and float_cost == cost


@pytest.mark.parametrize("kind", [["compaction"], {"type": "message"}])
def test_a_pass_whose_type_is_not_a_string_is_a_pass_of_the_messages_model(kind: Any) -> None:
    iterations = [
        {"type": kind, "input_tokens": 180000, "output_tokens": 3500},
        {"type": "message", "input_tokens": 23000, "output_tokens": 1000},
    ]
    message = {**COMPACTED, "usage": {**COMPACTED["usage"], "iterations": iterations}}
    for streamed in (False, True):
        response = _answer("claude-sonnet-4-6", message, streamed=streamed)
        assert response.usage == Usage(
            input_tokens=203000, output_tokens=4500, cache_read_tokens=0, cache_write_tokens=0
        )


def test_a_pass_whose_type_is_not_a_string_beside_a_fallback_is_read() -> None:
    """Beside a server-side fallback, one naming another model is an attempt it declined."""
    iterations = [
        {"type": ["message"], "model": "claude-opus-4-8", "input_tokens": 900, "output_tokens": 0},
        {"type": ["message"], "input_tokens": 1000, "output_tokens": 100},
        {
            "type": "fallback_message",
            "model": "claude-sonnet-4-6",
            "input_tokens": 2000,
            "output_tokens": 100,
        },
    ]
    message = {
        **COMPACTED,
        "usage": {"input_tokens": 2000, "output_tokens": 100, "iterations": iterations},
    }
    response = _answer("claude-sonnet-4-6", message, streamed=False)
    assert response.usage == Usage(input_tokens=3000, output_tokens=200)
    assert _record(response).cost is not None
