"""A log-probability of -infinity (a probability of 0, which OpenAI-family servers may send
as `-Infinity`) is kept and read back from every JSON form the types write; NaN and
+infinity, no log-probability, are refused."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

import allama
from _provider_batch_server import ProviderBatchServer
from _recording import provider as recording
from allama import ChatRequest, ChatResponse, TextPart, TokenAlternative, TokenLogprob
from allama.adapters._http import HttpRequest, HttpResponse
from allama.batch import _jobs
from test_provider_batch import Doc, _batch_run, _provider
from test_provider_batch_live_follow_ups import _Calls

NEVER = float("-inf")


def _response() -> ChatResponse:
    return ChatResponse(
        (TextPart(text="ok"),),
        logprobs=(
            TokenLogprob(
                token="ok",
                logprob=NEVER,
                token_bytes=(111, 107),
                top=(
                    TokenAlternative(token="ok", logprob=NEVER),
                    TokenAlternative(token="no", logprob=1e-7),  # rounding, read as given
                ),
            ),
        ),
    )


def test_a_minus_infinite_logprob_survives_the_json_round_trip() -> None:
    response = _response()
    written = response.to_json()
    assert json.loads(written)["logprobs"][0]["logprob"] == "-Infinity"
    back = ChatResponse.from_json(written)
    assert back == response
    assert back.logprobs is not None and back.logprobs[0].logprob == NEVER
    assert back.logprobs[0].top[0].logprob == NEVER
    assert back.logprobs[0].top[1].logprob == 1e-7


def test_a_minus_infinite_logprob_survives_model_dump_in_json_mode() -> None:
    response = _response()
    dumped = response.model_dump(mode="json")
    # Standard JSON: no `-Infinity` constant, which other readers refuse.
    text = json.dumps(dumped, allow_nan=False)
    assert ChatResponse.model_validate(json.loads(text)) == response
    assert ChatResponse.model_validate(response.model_dump()) == response


@pytest.mark.parametrize(
    ("value", "kind"),
    [(float("nan"), "NaN"), (float("inf"), "+infinity")],
)
def test_nan_and_plus_infinity_are_no_logprob(value: float, kind: str) -> None:
    message = f"a log-probability is a finite number, or -infinity (a probability of 0), not {kind}"
    with pytest.raises(ValidationError, match=re.escape(message)):
        TokenAlternative(token="a", logprob=value)
    with pytest.raises(ValidationError, match=re.escape(message)):
        TokenLogprob(token="a", logprob=value)


@pytest.mark.parametrize("written", ["NaN", "Infinity", '"NaN"', '"Infinity"'])
def test_json_with_nan_or_plus_infinity_is_no_logprob(written: str) -> None:
    with pytest.raises(ValidationError, match="a log-probability is a finite number"):
        TokenAlternative.from_json(f'{{"token": "a", "logprob": {written}}}')


def _completion() -> bytes:
    """A chat completion whose token's log-probability is `-Infinity`, as Python's `json`
    (and servers written with it) writes -inf."""
    token = {"token": "ok", "logprob": NEVER, "bytes": [111, 107]}
    choice = {
        "index": 0,
        "message": {"role": "assistant", "content": "ok"},
        "finish_reason": "stop",
        "logprobs": {"content": [{**token, "top_logprobs": [token]}]},
    }
    body = {"id": "x", "object": "chat.completion", "model": "gpt-4o", "choices": [choice]}
    written = json.dumps(body).encode()
    assert b'"logprob": -Infinity' in written
    return written


def test_an_openai_answer_with_a_minus_infinite_logprob_reads_back_from_its_json() -> None:
    provider, _ = recording("openai", (200, _completion()))
    response = provider.chat(ChatRequest("gpt-4o").user("x").with_logprobs(1))
    assert response.logprobs is not None
    assert [token.logprob for token in response.logprobs] == [NEVER]
    assert ChatResponse.from_json(response.to_json()) == response


# A live follow-up's answer in a provider batch run is kept as its JSON (`_live_entry`) and
# read back by the run that resumes (`_replayed`): one with a log-probability of -infinity
# failed there, as `null`.


@pytest.fixture(autouse=True)
def quick_looks(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_jobs, "_LOOKS_AFTER_LOST", (0.001, 0.002))


def _not_json_never(answer: HttpResponse) -> HttpResponse:
    """The fake's chat completion, its text no JSON, its token's log-probability -inf."""
    body = json.loads(answer.content)
    body["choices"][0]["message"]["content"] = "still not JSON"
    body["choices"][0]["logprobs"] = {
        "content": [{"token": "still not JSON", "logprob": NEVER, "bytes": None}]
    }
    body["usage"] = {"prompt_tokens": 10, "completion_tokens": 1, "total_tokens": 11}
    return HttpResponse(answer.status, answer.headers, json.dumps(body).encode())


def test_a_live_answer_with_a_minus_infinite_logprob_is_taken_in_again(
    server: ProviderBatchServer, tmp_path: Path
) -> None:
    ledger = tmp_path / "live.sqlite"
    runs: list[Any] = []

    def stops_during_the_first(request: HttpRequest, fake: Callable[[], HttpResponse]) -> Any:
        if len(calls.live_messages) > 1:
            return fake()
        runs[-1].stop()
        return _not_json_never(fake())

    calls = _Calls(stops_during_the_first)
    provider, _ = _provider(server, "openai-chat", calls)

    def run() -> Any:
        return _batch_run(
            provider,
            "gpt-4o-mini",
            ["doc 7"],
            ledger,
            job_retry="live",
            extractor=allama.Extractor(retries=2),
        )

    runs.append(run())
    (first,) = list(runs[-1])
    assert first.failure is not None and first.failure.kind == "follow_up_not_sent"
    runs.append(run())
    (resumed,) = list(runs[-1])
    assert resumed.value == Doc(n=7)
    assert calls.live_messages == [4, 6]  # the first live answer taken in again, not re-sent
