"""A call billed above its token counts is priced at what it was billed, or has no cost.

Anthropic's fast mode and US-only inference, the Responses API's web and file searches (and
its code interpreter and `web_search_preview` tool), Gemini's grounding and xAI's
server-side tools: each either priced as genai-prices prices it, or no cost with the reason,
never the standard price of the tokens alone. Expected figures come from genai-prices' own
data, so they hold whichever version is installed.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from datetime import UTC, datetime
from decimal import Decimal
from typing import Any

import pytest

from allama import ChatResponse, Error, ExtractionMetadata, ExtractionMode, Usage
from allama.stream import StreamCollector
from allama.types import StreamEvent
from allama.types._response import billed_extras, money_fields

genai_prices = pytest.importorskip("genai_prices")
from genai_prices.data_snapshot import get_snapshot  # noqa: E402

VERSION = genai_prices.__version__


def record(*responses: ChatResponse) -> ExtractionMetadata:
    metadata = ExtractionMetadata.new(ExtractionMode.NATIVE)
    for one in responses:
        metadata.record_pass(one, lambda warning: warning)
    return metadata


def collected(events: Iterable[StreamEvent], provider: str) -> ChatResponse:
    collector = StreamCollector()
    collector.provider = provider
    for event in events:
        collector.push(event)
    return collector.finish()


def genai(
    provider_id: str, model: str, context: dict[str, str] | None = None, **counts: int
) -> Any:
    """genai-prices' own calculation of `counts` (its usage keys) for `model`."""
    return genai_prices.calc_price(
        genai_prices.Usage(**counts), model, provider_id=provider_id, price_context=context
    )


def rates(provider_id: str, model: str) -> Any:
    _, info = get_snapshot().find_provider_model(model, None, provider_id, None)
    return info.get_prices(datetime.now(tz=UTC), None)


# Anthropic: fast mode and US-only inference.

ANTHROPIC_USAGE = {
    "input_tokens": 9_000,
    "cache_creation_input_tokens": 0,
    "cache_read_input_tokens": 1_000,
    "output_tokens": 2_000,
    "service_tier": "standard",
}


def anthropic_body(model: str, **usage: Any) -> str:
    return json.dumps(
        {
            "id": "msg_1",
            "type": "message",
            "role": "assistant",
            "model": model,
            "content": [{"type": "text", "text": '{"name": "Ada"}'}],
            "stop_reason": "end_turn",
            "stop_sequence": None,
            "usage": {**ANTHROPIC_USAGE, **usage},
        }
    )


def anthropic(model: str, **usage: Any) -> ChatResponse:
    from allama.adapters.anthropic._decode import decode_body

    return decode_body(anthropic_body(model, **usage), provider="anthropic")


def test_fast_mode_is_priced_at_its_fast_prices_never_the_standard_ones() -> None:
    response = anthropic("claude-opus-4-8", speed="fast")
    assert response.provider_data["anthropic"]["usage_details"] == {
        "service_tier": "standard",
        "speed": "fast",
    }
    cost = record(response).cost
    counts = {"input_tokens": 10_000, "cache_read_tokens": 1_000, "output_tokens": 2_000}
    fast = genai("anthropic", "claude-opus-4-8", {"speed": "fast"}, **counts)
    standard = genai("anthropic", "claude-opus-4-8", None, **counts)
    assert fast.total_price > standard.total_price
    assert cost is not None
    assert (cost.input, cost.output, cost.total) == (
        fast.input_price,
        fast.output_price,
        fast.total_price,
    )
    assert cost.source == f"genai-prices {VERSION}, anthropic/claude-opus-4-8 (fast mode)"
    # Served at the standard speed, the same counts cost the standard price.
    plain = record(anthropic("claude-opus-4-8", speed="standard")).cost
    assert plain is not None and plain.total == standard.total_price


def test_fast_mode_genai_prices_has_no_price_for_leaves_the_cost_unknown() -> None:
    metadata = record(anthropic("claude-opus-4-6", speed="fast"))
    assert metadata.cost is None
    assert metadata.cost_missing == (
        f"genai-prices {VERSION} has no fast-mode price for anthropic/claude-opus-4-6"
    )
    # Nor is there a batch price of a call served in fast mode.
    assert record(anthropic("claude-opus-4-8", speed="fast")).priced(batch=True) == (
        f"genai-prices {VERSION} has no fast-mode price for anthropic/claude-opus-4-8"
    )


def test_a_streamed_fast_call_is_priced_at_fast_prices_too() -> None:
    from allama.adapters.anthropic import decode_stream

    start = {
        "type": "message_start",
        "message": {
            "id": "msg_1",
            "type": "message",
            "role": "assistant",
            "model": "claude-opus-4-8",
            "content": [],
            "usage": {**ANTHROPIC_USAGE, "output_tokens": 1, "speed": "fast"},
        },
    }
    events: list[dict[str, Any]] = [
        start,
        {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
        {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "{}"}},
        {"type": "content_block_stop", "index": 0},
        {
            "type": "message_delta",
            "delta": {"stop_reason": "end_turn"},
            "usage": {"output_tokens": 2_000},
        },
        {"type": "message_stop"},
    ]
    data = "".join(f"event: {e['type']}\ndata: {json.dumps(e)}\n\n" for e in events).encode()
    response = collected(decode_stream(data, provider="anthropic"), "anthropic")
    cost = record(response).cost
    assert cost is not None and cost.source.endswith("(fast mode)")
    assert cost == record(anthropic("claude-opus-4-8", speed="fast")).cost


def test_us_only_inference_on_a_model_billed_above_standard_for_it_has_no_cost() -> None:
    response = anthropic("claude-opus-4-6", inference_geo="us")
    details = response.provider_value("anthropic", "usage_details")
    assert isinstance(details, dict) and details["inference_geo"] == "us"
    metadata = record(response)
    assert metadata.cost is None
    assert metadata.cost_missing == (
        "served by inference kept in one geography (inference_geo 'us'), billed above the "
        "standard price on Claude Opus 4.6, Sonnet 4.6 and later models (1.1 times it in the "
        f"US), which genai-prices {VERSION} has no price for (anthropic/claude-opus-4-6)"
    )
    for model in ("claude-sonnet-4-6", "claude-opus-4-8", "claude-opus-5"):
        assert record(anthropic(model, inference_geo="us")).cost is None, model


@pytest.mark.parametrize(
    "model", ["claude-sonnet-4-5-20250929", "claude-haiku-4-5", "claude-opus-4-1-20250805"]
)
def test_us_only_inference_on_older_models_costs_the_standard_price(model: str) -> None:
    us = record(anthropic(model, inference_geo="us")).cost
    plain = record(anthropic(model)).cost
    assert us is not None and us == plain


def test_global_inference_costs_the_standard_price() -> None:
    cost = record(anthropic("claude-opus-4-6", inference_geo="global")).cost
    assert cost is not None and cost == record(anthropic("claude-opus-4-6")).cost


def test_a_failed_anthropic_body_in_fast_mode_is_priced_at_fast_prices() -> None:
    from allama.adapters.anthropic._decode import decode_body
    from allama.errors import paid_for

    body = json.loads(anthropic_body("claude-opus-4-8", speed="fast"))
    body["content"] = [{"type": "text"}]  # a block allama cannot read
    with pytest.raises(Error) as raised:
        decode_body(json.dumps(body), provider="anthropic")
    error = raised.value.with_model("claude-opus-4-8")
    metadata = ExtractionMetadata.new(ExtractionMode.NATIVE)
    metadata.record_paid(paid_for(error))
    cost = metadata.cost
    assert cost is not None and cost.source.endswith("(fast mode)")
    assert cost == record(anthropic("claude-opus-4-8", speed="fast")).cost


# The Responses API: web searches, file searches, code interpreter.

RESPONSES_USAGE = {
    "input_tokens": 1_000,
    "input_tokens_details": {"cached_tokens": 0},
    "output_tokens": 50,
    "output_tokens_details": {"reasoning_tokens": 0},
    "total_tokens": 1_050,
}
MESSAGE = {
    "type": "message",
    "id": "msg_1",
    "status": "completed",
    "role": "assistant",
    "content": [{"type": "output_text", "text": '{"name": "Ada"}', "annotations": []}],
}


def search(query: str, kind: str = "search") -> dict[str, Any]:
    return {
        "type": "web_search_call",
        "id": f"ws_{query}",
        "status": "completed",
        "action": {"type": kind, "query": query},
    }


FILE_SEARCH = {"type": "file_search_call", "id": "fs_1", "status": "completed", "queries": ["x"]}


def responses_body(
    items: list[dict[str, Any]],
    *,
    model: str = "gpt-4o-mini",
    tools: list[dict[str, Any]] | None = None,
    usage: dict[str, Any] | None = None,
) -> dict[str, Any]:
    body: dict[str, Any] = {
        "id": "resp_1",
        "object": "response",
        "created_at": 1,
        "status": "completed",
        "model": model,
        "output": [*items, MESSAGE],
        "usage": usage or RESPONSES_USAGE,
    }
    if tools is not None:
        body["tools"] = tools
    return body


def responses(body: dict[str, Any], provider: str = "openai") -> ChatResponse:
    from allama.adapters.openai_responses import decode_body

    return decode_body(json.dumps(body), provider=provider)


def test_responses_web_searches_are_priced() -> None:
    """Two searches (opening a page is not billed) at genai-prices' price per thousand."""
    items = [search("a"), search("b"), search("c", kind="open_page")]
    response = responses(responses_body(items, tools=[{"type": "web_search"}]))
    assert billed_extras(response.provider_data) == {"web_searches": 2}
    cost = record(response).cost
    expected = genai("openai", "gpt-4o-mini", input_tokens=1_000, output_tokens=50, web_searches=2)
    tokens = genai("openai", "gpt-4o-mini", input_tokens=1_000, output_tokens=50)
    searches = 2 * rates("openai", "gpt-4o-mini").web_searches_kcount / 1000
    assert searches > 0 and expected.total_price == tokens.total_price + searches
    assert cost is not None
    assert (cost.input, cost.output, cost.total) == (
        tokens.input_price,
        tokens.output_price,
        tokens.total_price + searches,
    )


def test_responses_file_searches_are_priced() -> None:
    response = responses(responses_body([FILE_SEARCH, FILE_SEARCH]))
    assert billed_extras(response.provider_data) == {"storage_searches": 2}
    cost = record(response).cost
    tokens = genai("openai", "gpt-4o-mini", input_tokens=1_000, output_tokens=50)
    files = 2 * rates("openai", "gpt-4o-mini").storage_searches_kcount / 1000
    assert cost is not None and files > 0 and cost.total == tokens.total_price + files


def test_responses_searches_a_model_has_no_price_for_leave_the_cost_unknown() -> None:
    model = "gpt-3.5-turbo"
    assert getattr(rates("openai", model), "web_searches_kcount", None) is None
    metadata = record(responses(responses_body([search("a")], model=model)))
    assert metadata.cost is None
    assert metadata.cost_missing == (
        f"genai-prices {VERSION} has no price for the web searches of openai/{model}"
    )
    metadata = record(responses(responses_body([FILE_SEARCH], model=model)))
    assert metadata.cost_missing == (
        f"genai-prices {VERSION} has no price for the file searches of openai/{model}"
    )


def test_web_search_preview_searches_have_no_cost() -> None:
    """Its searches cost by the model's kind, not the `web_search` price genai-prices has."""
    tools = [{"type": "web_search_preview", "search_context_size": "medium"}]
    metadata = record(responses(responses_body([search("a")], tools=tools)))
    assert metadata.cost is None
    assert metadata.cost_missing is not None
    assert "1 searches of the web_search_preview tool" in metadata.cost_missing


def test_code_interpreter_calls_have_no_cost() -> None:
    item = {"type": "code_interpreter_call", "id": "ci_1", "status": "completed", "code": "1"}
    metadata = record(responses(responses_body([item])))
    assert metadata.cost is None
    assert metadata.cost_missing is not None
    assert "code interpreter calls" in metadata.cost_missing


def test_a_streamed_responses_call_prices_its_searches_too() -> None:
    from allama.adapters.openai_responses._sse import decode_stream

    final = responses_body([search("a"), search("b")], tools=[{"type": "web_search"}])
    created = {**final, "status": "in_progress", "output": [], "usage": None}
    sent: list[tuple[str, dict[str, Any]]] = [("response.created", {"response": created})]
    for index, item in enumerate(final["output"]):
        sent.append(("response.output_item.done", {"output_index": index, "item": item}))
    sent.append(("response.completed", {"response": final}))
    data = "".join(
        f"event: {kind}\ndata: {json.dumps({'type': kind, **payload})}\n\n"
        for kind, payload in sent
    ).encode()
    response = collected(decode_stream(data, provider="openai"), "openai")
    cost = record(response).cost
    assert cost is not None and cost == record(responses(final)).cost
    tokens = genai("openai", "gpt-4o-mini", input_tokens=1_000, output_tokens=50)
    assert cost.total > tokens.total_price
    # The preview tool, said by the stream's first response: no cost.
    preview = data.replace(b'"type": "web_search"}', b'"type": "web_search_preview"}')
    assert preview != data
    response = collected(decode_stream(preview, provider="openai"), "openai")
    assert record(response).cost is None


def test_a_failed_responses_body_counts_its_searches() -> None:
    from allama.adapters.openai_responses import decode_body
    from allama.errors import paid_for

    body = {
        **responses_body([search("a")]),
        "status": "failed",
        "error": {"code": "server_error", "message": "The model failed."},
    }
    with pytest.raises(Error) as raised:
        decode_body(json.dumps(body), provider="openai", model="gpt-4o-mini")
    entries = paid_for(raised.value)
    assert [entry.get("billed_extras") for entry in entries] == [{"web_searches": 1}]
    metadata = ExtractionMetadata.new(ExtractionMode.NATIVE)
    metadata.record_paid(entries)
    assert metadata.cost is not None
    assert metadata.cost == record(responses(responses_body([search("a")]))).cost


# Gemini: grounding with Google Search.


def gemini_body(grounding: dict[str, Any] | None) -> dict[str, Any]:
    candidate: dict[str, Any] = {
        "content": {"role": "model", "parts": [{"text": '{"name": "Ada"}'}]},
        "finishReason": "STOP",
        "index": 0,
    }
    if grounding is not None:
        candidate["groundingMetadata"] = grounding
    return {
        "candidates": [candidate],
        "usageMetadata": {
            "promptTokenCount": 1_000,
            "candidatesTokenCount": 50,
            "totalTokenCount": 1_050,
        },
        "modelVersion": "gemini-2.5-flash",
    }


GROUNDING = {
    "webSearchQueries": ["who is ada", "ada lovelace"],
    "groundingChunks": [{"web": {"uri": "https://example.com", "title": "x"}}],
}


def test_gemini_grounding_has_no_cost() -> None:
    """Billed past a free quota whose use a response does not say: no cost, not free."""
    from allama.adapters.gemini._decode import decode_body

    response = decode_body(json.dumps(gemini_body(GROUNDING)), provider="gemini")
    assert billed_extras(response.provider_data) == {"grounded_searches": 2}
    metadata = record(response)
    assert metadata.cost is None
    assert metadata.cost_missing == (
        "grounding with Google Search or Maps (2 queries), billed past a free quota whose use "
        "the response does not say"
    )
    # Without grounding, the same counts are priced.
    plain = decode_body(json.dumps(gemini_body(None)), provider="gemini")
    assert record(plain).cost is not None


def test_a_streamed_gemini_call_with_grounding_has_no_cost_either() -> None:
    from allama.adapters.gemini._stream import decode_stream

    data = f"data: {json.dumps(gemini_body(GROUNDING))}\r\n\r\n".encode()
    response = collected(decode_stream(data, provider="gemini"), "gemini")
    assert record(response).cost is None


# xAI: server-side tools.

XAI_USAGE = {
    "input_tokens": 254,
    "input_tokens_details": {"cached_tokens": 192},
    "output_tokens": 221,
    "output_tokens_details": {"reasoning_tokens": 212},
    "total_tokens": 475,
    "num_sources_used": 0,
}


def xai_tokens() -> Any:
    return genai(
        "x-ai",
        "grok-4.3",
        input_tokens=254,
        cache_read_tokens=192,
        output_tokens=221,
        output_reasoning_tokens=212,
    )


def xai_ticks(tools: int) -> int:
    """What xAI reports: the tokens at its price and $0.005 a tool call, in ticks."""
    return int(xai_tokens().total_price * 10**10) + tools * 50_000_000


def test_xai_server_side_tools_cost_the_total_xai_reported() -> None:
    usage = {**XAI_USAGE, "num_server_side_tools_used": 3, "cost_in_usd_ticks": xai_ticks(3)}
    body = responses_body([search("a")], model="grok-4.3", usage=usage)
    response = responses(body, provider="xai")
    assert response.provider_data["openai_responses"]["usage_cost"] == {
        "cost_in_usd_ticks": xai_ticks(3),
        "num_server_side_tools_used": 3,
    }
    cost = record(response).cost
    tokens = xai_tokens()
    assert cost is not None
    assert (cost.input, cost.output, cost.total) == (
        tokens.input_price,
        tokens.output_price,
        Decimal(xai_ticks(3)) / 10**10,
    )
    assert cost.total > tokens.total_price
    assert cost.source == (
        f"genai-prices {VERSION}, x-ai/grok-4.3 (total as xai reported, with 3 server-side "
        "tool calls)"
    )


def test_xai_chat_completions_server_side_tools_cost_the_total_xai_reported() -> None:
    from allama.adapters.openai_compat import decode_body

    usage = {
        "prompt_tokens": 254,
        "completion_tokens": 221,
        "total_tokens": 475,
        "prompt_tokens_details": {"cached_tokens": 192},
        "num_server_side_tools_used": 2,
        "cost_in_usd_ticks": 123_456_789,
    }
    choice = {
        "index": 0,
        "message": {"role": "assistant", "content": '{"name": "Ada"}'},
        "finish_reason": "stop",
    }
    body = {"id": "c", "object": "chat.completion", "model": "grok-4.3", "choices": [choice]}
    response = decode_body(json.dumps({**body, "usage": usage}), provider="xai")
    cost = record(response).cost
    assert cost is not None and cost.total == Decimal("0.0123456789")


def test_xai_server_side_tools_without_a_reported_total_have_no_cost() -> None:
    usage = {**XAI_USAGE, "num_server_side_tools_used": 1}
    metadata = record(responses(responses_body([], model="grok-4.3", usage=usage), "xai"))
    assert metadata.cost is None
    assert metadata.cost_missing == (
        "xai billed 1 server-side tool calls, which genai-prices has no price for, and did "
        "not say what the call cost"
    )


def test_xai_total_below_its_tokens_price_has_no_cost() -> None:
    usage = {**XAI_USAGE, "num_server_side_tools_used": 1, "cost_in_usd_ticks": 10}
    metadata = record(responses(responses_body([], model="grok-4.3", usage=usage), "xai"))
    assert metadata.cost is None
    assert metadata.cost_missing is not None and "less than" in metadata.cost_missing


def test_xai_total_alone_that_is_its_tokens_price_is_priced_by_genai_prices() -> None:
    usage = {**XAI_USAGE, "cost_in_usd_ticks": xai_ticks(0)}
    metadata = record(responses(responses_body([], model="grok-4.3", usage=usage), "xai"))
    tokens = xai_tokens()
    assert metadata.cost is not None
    assert (metadata.cost.input, metadata.cost.output, metadata.cost.total) == (
        tokens.input_price,
        tokens.output_price,
        tokens.total_price,
    )
    assert metadata.cost.source == f"genai-prices {VERSION}, x-ai/grok-4.3"


@pytest.mark.parametrize("times", [2, Decimal("0.5")])
def test_xai_total_alone_that_is_not_its_tokens_price_has_no_cost(times: Decimal) -> None:
    """xAI bills a request over 128,000 tokens at higher rates, which genai-prices may not
    hold (it priced such a call at half the bill): a total that is not the tokens' price
    says the price data is not what was billed."""
    ticks = int(xai_ticks(0) * times)
    billed = f"{Decimal(ticks) / 10**10:.6f}"
    usage = {**XAI_USAGE, "cost_in_usd_ticks": ticks}
    metadata = record(responses(responses_body([], model="grok-4.3", usage=usage), "xai"))
    assert metadata.cost is None
    assert metadata.cost_missing == (
        f"xai reported a total of {billed} for x-ai/grok-4.3, where genai-prices {VERSION} "
        f"prices its tokens at {xai_tokens().total_price:.6f}: billed at rates the price "
        "data does not hold (xAI's above 128,000 tokens, say)"
    )
    assert metadata.priced(batch=True) == metadata.cost_missing  # no batch price either


def test_xai_web_searches_without_the_tool_count_are_not_counted_free() -> None:
    """A web search item at xAI, whose usage does not count it: genai-prices has no price
    for xAI's searches, so no cost."""
    usage = {**XAI_USAGE, "cost_in_usd_ticks": xai_ticks(1)}
    metadata = record(
        responses(responses_body([search("a")], model="grok-4.3", usage=usage), "xai")
    )
    assert metadata.cost is None
    assert metadata.cost_missing == (
        f"genai-prices {VERSION} has no price for the web searches of x-ai/grok-4.3"
    )


def test_the_server_side_tool_count_is_kept_only_when_there_were_some() -> None:
    assert money_fields({"cost_in_usd_ticks": 5, "num_server_side_tools_used": 0}) == {
        "cost_in_usd_ticks": 5
    }
    assert money_fields({"num_server_side_tools_used": 2}) == {"num_server_side_tools_used": 2}
    assert money_fields({"prompt_tokens": 1}) is None


def test_usage_without_tools_is_priced_as_before() -> None:
    usage = Usage(input_tokens=1_000, output_tokens=50)
    plain = ExtractionMetadata.new(ExtractionMode.NATIVE)
    plain.record_pass(
        ChatResponse(provider="openai", model="gpt-4o-mini", usage=usage), lambda w: w
    )
    tokens = genai("openai", "gpt-4o-mini", input_tokens=1_000, output_tokens=50)
    assert plain.cost is not None and plain.cost.total == tokens.total_price
