"""`max_cost` where what an answer costs may be unknown: nothing is paid for past the
budget before the run finds out (a provider with no prices is refused; elsewhere one input
is in flight until an answer has a known cost)."""

from __future__ import annotations

import asyncio
import sys
import threading
from collections.abc import Iterator
from decimal import Decimal
from typing import Any

import genai_prices
import pytest
from pydantic import BaseModel

import allama
from _batch_server import BatchServer
from _replay_server import ReplayServer, ReplyHandler
from allama import ChatRequest
from allama.wrappers import FailoverProvider

PRICES = genai_prices.__version__


class Row(BaseModel):
    n: int


def docs(count: int) -> list[str]:
    return [f"doc {n}" for n in range(count)]


def provider_for(server: BatchServer) -> allama.HttpProvider:
    return allama.provider("openai", api_key="sk-test", base_url=server.url)


@pytest.fixture
def unpriced() -> Iterator[BatchServer]:
    """Answering as a model genai-prices has no price for."""
    served = BatchServer(model="a-model-of-our-own").start()
    yield served
    served.stop()


@pytest.fixture
def slow() -> Iterator[BatchServer]:
    """Answering as gpt-4o-mini (priced), a tenth of a second a request."""
    served = BatchServer(delay=0.1).start()
    yield served
    served.stop()


def in_flight_at_each_call(run: Any) -> list[int]:
    """How many calls were in flight as each call of `run` began (itself counted)."""
    runner = run._runner
    call = runner.call
    seen: list[int] = []
    now = [0]

    async def counted(request: ChatRequest) -> Any:
        now[0] += 1
        seen.append(now[0])
        try:
            return await call(request)
        finally:
            now[0] -= 1

    runner.call = counted
    return seen


def test_an_answer_of_no_price_stops_a_budget_at_one_request_not_one_a_slot(
    unpriced: BatchServer,
) -> None:
    run: allama.BatchRun[Row] = allama.batch(
        provider_for(unpriced),
        Row,
        docs(20),
        request=ChatRequest("a-model-of-our-own"),
        concurrency=8,
        max_cost=1,
    )
    results = list(run)
    assert sum(unpriced.sent.values()) == 1  # before: 8, every slot's request paid for
    assert [r.index for r in results if r.failure is None] == [0]
    assert run.summary.done == 1 and run.summary.not_started == 19
    assert run.summary.stopped == (
        f"the cost of #0 is unknown (genai-prices {PRICES} has no price for "
        "'a-model-of-our-own' at openai): the budget of $1 cannot be kept"
    )


def test_a_model_named_for_no_price_is_sent_when_its_answers_name_a_priced_one(
    slow: BatchServer,
) -> None:
    """A deployment's name ("prod") has no price, the model its answers name has: not
    refused; one input in flight until the first answer is priced, then the whole
    concurrency."""
    run: allama.BatchRun[Row] = allama.batch(
        provider_for(slow), Row, docs(20), request=ChatRequest("prod"), concurrency=8, max_cost=1
    )
    seen = in_flight_at_each_call(run)
    results = list(run)
    # (doc 7 is answered with no JSON, doc 13 with a 400: the server's failures.)
    assert len(results) == 20 and run.summary.stopped is None and run.summary.done == 18
    assert seen[:2] == [1, 1]  # the second sent only once the first was answered
    assert max(seen) == 8


def test_a_model_priced_before_it_is_sent_goes_at_the_whole_concurrency_at_once(
    slow: BatchServer,
) -> None:
    template = ChatRequest("gpt-4o-mini")  # (genai-prices has its price at openai)
    run: allama.BatchRun[Row] = allama.batch(
        provider_for(slow), Row, docs(16), request=template, max_cost=1
    )
    seen = in_flight_at_each_call(run)
    assert len(list(run)) == 16 and run.summary.stopped is None
    assert seen[:8] == [1, 2, 3, 4, 5, 6, 7, 8]  # none waits for the first answer


@pytest.mark.parametrize("preset", ["openai-compatible", "anthropic-compatible"])
def test_a_budget_with_an_endpoint_of_ones_own_is_refused_before_anything_is_sent(
    slow: BatchServer, preset: str
) -> None:
    # Its answers have no price whatever the model is called: one was sent and paid at an
    # unknown cost, and the run stopped.
    provider = allama.provider(preset, base_url=slow.url, api_key="sk-test")
    with pytest.raises(ValueError) as refused:
        allama.batch(provider, Row, docs(3), request=ChatRequest("gpt-4o"), max_cost=1)
    assert str(refused.value) == (
        f"max_cost cannot be kept with provider {preset}: no price list for an endpoint of "
        f"your own ({preset})"
    )
    assert sum(slow.sent.values()) == 0


@pytest.mark.parametrize("preset", ["local", "llama-cpp", "ollama", "ollama-openai", "vllm"])
def test_a_budget_with_a_model_run_locally_is_refused_before_anything_is_sent(
    slow: BatchServer, preset: str
) -> None:
    """Its answers have no price, whatever the model: each would be paid at an unknown
    cost, and a run with a ledger sent one and stopped, then none at every run after."""
    options: dict[str, Any] = {} if preset == "local" else {"base_url": slow.url}
    if preset == "ollama":  # (its own API, not served here: never sent to)
        options["base_url"] = slow.url.removesuffix("/v1")
    provider = allama.provider(preset, **options)
    with pytest.raises(ValueError) as refused:
        allama.batch(provider, Row, docs(3), request=ChatRequest("m"), max_cost=1)
    where = (
        "a model Ollama serves, locally or in its cloud"
        if preset.startswith("ollama")
        else "a model run locally"
    )
    assert str(refused.value) == (
        f"max_cost cannot be kept with provider {preset}: no price for {where} ({preset})"
    )
    assert sum(slow.sent.values()) == 0
    # Without a budget it runs (the price unknown, said in the summary).
    if preset not in ("local", "ollama"):
        run: allama.BatchRun[Row] = allama.batch(
            provider, Row, docs(2), request=ChatRequest("gpt-4o-mini")
        )
        assert [r.failure for r in run] == [None, None]


def test_the_async_twin_holds_one_request_until_the_first_is_priced(
    unpriced: BatchServer,
) -> None:
    async def main() -> list[allama.BatchResult[Row]]:
        run: allama.AsyncBatchRun[Row] = allama.abatch(
            provider_for(unpriced),
            Row,
            docs(20),
            request=ChatRequest("a-model-of-our-own"),
            concurrency=8,
            max_cost=1,
        )
        return [result async for result in run]

    results = asyncio.run(main())
    assert sum(unpriced.sent.values()) == 1
    assert [r.index for r in results if r.failure is None] == [0]


@pytest.fixture
def no_prices(monkeypatch: pytest.MonkeyPatch) -> None:
    """A core install: `import genai_prices` fails (`pip install 'allama[prices]'`)."""
    monkeypatch.setitem(sys.modules, "genai_prices", None)


NO_PRICES = (
    "no price for openai's answers without the genai-prices package: pip install 'allama[prices]'"
)


@pytest.mark.usefixtures("no_prices")
def test_a_budget_without_genai_prices_is_refused_before_anything_is_sent(
    slow: BatchServer,
) -> None:
    """Without genai-prices no answer of OpenAI's has a cost: the run sent one input, paid
    for it at an unknown cost and stopped, the rest never started, run after run."""
    with pytest.raises(ValueError) as refused:
        allama.batch(
            provider_for(slow), Row, docs(3), request=ChatRequest("gpt-4o-mini"), max_cost="1.00"
        )
    assert str(refused.value) == f"max_cost cannot be kept with provider openai: {NO_PRICES}"

    async def main() -> None:
        allama.abatch(
            provider_for(slow), Row, docs(3), request=ChatRequest("gpt-4o-mini"), max_cost=1
        )

    with pytest.raises(ValueError) as refused:
        asyncio.run(main())
    assert str(refused.value) == f"max_cost cannot be kept with provider openai: {NO_PRICES}"
    # A failover with one provider whose answers have no cost: those answers would stop it.
    either = FailoverProvider(
        [allama.provider("openrouter", api_key="sk-or-test", base_url=slow.url), provider_for(slow)]
    )
    with pytest.raises(ValueError) as refused:
        allama.batch(either, Row, docs(3), request=ChatRequest("gpt-4o-mini"), max_cost=1)
    assert str(refused.value) == (
        f"max_cost cannot be kept with provider failover(openrouter, openai): {NO_PRICES}"
    )
    assert sum(slow.sent.values()) == 0
    # Without a budget it runs, the cost said to be unknown.
    run: allama.BatchRun[Row] = allama.batch(
        provider_for(slow), Row, docs(2), request=ChatRequest("gpt-4o-mini")
    )
    assert [r.failure for r in run] == [None, None]
    assert run.summary.cost_missing == "install allama[prices] for costs"


_OWN_REASONS = {
    "vllm": "no price for a model run locally (vllm)",
    "ollama": "no price for a model Ollama serves, locally or in its cloud (ollama)",
    "openai-compatible": "no price list for an endpoint of your own (openai-compatible)",
}


@pytest.mark.parametrize("prices", [True, False], ids=["with-genai-prices", "without"])
@pytest.mark.parametrize(
    "members",
    [
        ("openrouter", "vllm"),
        ("vllm", "openrouter"),
        ("openrouter", "ollama"),
        ("openrouter", "openai-compatible"),
        ("openai", "vllm"),
    ],
    ids="-".join,
)
def test_a_failover_holding_a_local_or_own_endpoint_is_refused_for_what_it_is(
    slow: BatchServer, monkeypatch: pytest.MonkeyPatch, members: tuple[str, str], prices: bool
) -> None:
    """A member run locally or of the caller's own has no price whether or not genai-prices
    is installed: the failover is refused before anything is sent, for that member's
    reason, never told to install genai-prices, which would not price it."""
    if not prices:
        monkeypatch.setitem(sys.modules, "genai_prices", None)

    def member(preset: str) -> allama.HttpProvider:
        url = slow.url.removesuffix("/v1") if preset == "ollama" else slow.url
        return allama.provider(preset, api_key="sk-test", base_url=url)

    either = FailoverProvider([member(preset) for preset in members])
    own = next(preset for preset in members if preset in _OWN_REASONS)
    with pytest.raises(ValueError) as refused:
        allama.batch(either, Row, docs(3), request=ChatRequest("gpt-4o-mini"), max_cost=1)
    assert str(refused.value) == (
        f"max_cost cannot be kept with provider failover({', '.join(members)}): {_OWN_REASONS[own]}"
    )
    assert sum(slow.sent.values()) == 0


class _Routed(ReplyHandler):
    """Answers as OpenRouter does, with what the call cost (`usage.cost`, its parts)."""

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("content-length") or 0))
        choice = {
            "index": 0,
            "message": {"role": "assistant", "content": '{"n": 1}'},
            "finish_reason": "stop",
        }
        usage = {
            "prompt_tokens": 43,
            "completion_tokens": 36,
            "total_tokens": 79,
            "cost": 0.000669,
            "is_byok": False,
            "cost_details": {
                "upstream_inference_cost": None,
                "upstream_inference_prompt_cost": 0.000129,
                "upstream_inference_completions_cost": 0.00054,
            },
        }
        body = {"id": "gen-1", "model": "openai/gpt-4o-mini", "choices": [choice], "usage": usage}
        self.send_json(200, body)


@pytest.mark.usefixtures("no_prices")
def test_a_budget_with_openrouter_runs_without_genai_prices() -> None:
    """OpenRouter's answers say what they cost, which is read without genai-prices."""
    server = ReplayServer(("127.0.0.1", 0), _Routed)
    server.seen, server.lock = [], threading.Lock()
    threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True).start()
    try:
        host, port = server.server_address[:2]
        provider = allama.provider(
            "openrouter", api_key="sk-or-test", base_url=f"http://{host!s}:{port}/v1"
        )
        run: allama.BatchRun[Row] = allama.batch(
            provider, Row, docs(3), request=ChatRequest("openai/gpt-4o-mini"), max_cost="1.00"
        )
        assert [r.value for r in run] == [Row(n=1)] * 3
    finally:
        server.shutdown()
        server.server_close()
    assert run.summary.stopped is None and run.summary.cost_unknown == 0
    assert run.summary.cost == Decimal("0.002007")
