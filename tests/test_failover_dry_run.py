"""A failover's dry run goes past any provider that refuses the call before sending with an
error the failover moves on from (a missing key: an account's refusal), as the call does:
the plan, and the floor checked before paying, are of the provider the call goes to."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import pytest
from pydantic import BaseModel
from tests._recording import Recorder, provider

from allama import (
    AuthenticationError,
    ChatRequest,
    ChatValidation,
    EnforcementBelowError,
    Error,
    ExtractionMetadata,
    ExtractionMode,
    Extractor,
    FieldSubject,
    InvalidRequestError,
    RequestField,
    SchemaEnforcement,
    ValidationCoverage,
    Warning,
    WarningKind,
)
from allama.mock import MockProvider
from allama.provider import PASSED_BEFORE_SENDING
from allama.wrappers import FailoverProvider, RetryingProvider

REQUEST = ChatRequest("deepseek-chat").user("Ada, as JSON")


class Person(BaseModel):
    name: str


_MISSING = "keyless needs an API key: pass api_key= or set KEYLESS_API_KEY"


class Refusing(MockProvider):
    """A provider that refuses every call before sending, in its dry run as in the call."""

    def __init__(self, error: Callable[[], Error]) -> None:
        super().__init__([error(), error()], name="keyless")
        self._error = error

    def validate_chat_request(
        self, request: ChatRequest, *, stream: bool = False
    ) -> ChatValidation:
        raise self._error()


def _missing_key() -> AuthenticationError:
    return AuthenticationError(_MISSING).with_provider("keyless")


_ANSWER = (
    200,
    {
        "id": "x",
        "object": "chat.completion",
        "created": 1,
        "model": "deepseek-chat",
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": '{"name": "Ada"}'},
                "finish_reason": "stop",
            }
        ],
        "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15},
    },
)


def _passed_note(to: str) -> Warning:
    return Warning(
        kind=WarningKind.UNSUPPORTED,
        subject=FieldSubject(field=RequestField.MODEL),
        message=(
            f"`keyless` refuses the call before sending ({_MISSING}); the failover goes on "
            f"to `{to}`, as the call would, and the dry run is of it"
        ),
        code=PASSED_BEFORE_SENDING,
        provider="keyless",
    )


def _deepseek() -> tuple[Any, Recorder]:
    return provider("deepseek", _ANSWER)


@pytest.mark.parametrize("wrapped", [False, True])
@pytest.mark.parametrize("stream", [False, True])
def test_the_plan_is_of_the_provider_past_a_missing_key(stream: bool, wrapped: bool) -> None:
    second, recorder = _deepseek()
    both = FailoverProvider([Refusing(_missing_key), second])
    through = RetryingProvider(both) if wrapped else both
    planned = Extractor().plan(through, Person, REQUEST, stream=stream)
    # DeepSeek's: no JSON Schema output, the schema sent as `json_object`.
    assert (planned.mode, planned.enforcement, planned.coverage) == (
        ExtractionMode.NATIVE,
        SchemaEnforcement.NOT_ENFORCED,
        ValidationCoverage.ENCODING,
    )
    assert planned.notes[0] == _passed_note("deepseek")
    assert all(note.code != PASSED_BEFORE_SENDING for note in planned.notes[1:])
    assert all(each.code != PASSED_BEFORE_SENDING for each in planned.degradations)
    assert recorder.bodies == []


def test_the_call_goes_where_the_plan_said() -> None:
    second, recorder = _deepseek()
    first = Refusing(_missing_key)
    both = FailoverProvider([first, second])
    planned = Extractor().plan(both, Person, REQUEST)
    got = Extractor().extract(both, Person, REQUEST)
    assert got.value == Person(name="Ada")
    assert (got.metadata.mode, got.metadata.enforcement, got.response.provider) == (
        planned.mode,
        planned.enforcement,
        "deepseek",
    )
    assert (first.call_count, len(recorder.bodies)) == (1, 1)


def test_a_floor_the_provider_past_a_missing_key_cannot_meet_fails_before_paying() -> None:
    second, recorder = _deepseek()
    first = Refusing(_missing_key)
    floor = Extractor(min_enforcement=SchemaEnforcement.EXACT)
    with pytest.raises(EnforcementBelowError) as caught:
        floor.extract(FailoverProvider([first, second]), Person, REQUEST)
    assert (caught.value.required, caught.value.achieved) == (
        SchemaEnforcement.EXACT,
        SchemaEnforcement.NOT_ENFORCED,
    )
    metadata = ExtractionMetadata.from_error(caught.value)
    assert metadata is not None and metadata.passes == 0
    assert (first.call_count, len(recorder.bodies)) == (0, 0)

    async def main() -> None:
        await floor.aextract(FailoverProvider([first, second]), Person, REQUEST)

    with pytest.raises(EnforcementBelowError):
        asyncio.run(main())
    assert (first.call_count, len(recorder.bodies)) == (0, 0)


def test_a_floor_the_provider_past_a_missing_key_meets_is_paid_once() -> None:
    second, recorder = provider(
        "openai",
        (200, {**_ANSWER[1], "model": "gpt-4o-mini"}),
    )
    first = Refusing(_missing_key)
    both = FailoverProvider([first, second])
    request = ChatRequest("gpt-4o-mini").user("Ada, as JSON")
    planned = Extractor().plan(both, Person, request)
    assert (planned.enforcement, planned.notes) == (
        SchemaEnforcement.EXACT,
        (_passed_note("openai"),),
    )

    async def main() -> Any:
        return await Extractor(min_enforcement=SchemaEnforcement.EXACT).aextract(
            both, Person, request
        )

    got = asyncio.run(main())
    assert (got.value, got.metadata.enforcement) == (Person(name="Ada"), SchemaEnforcement.EXACT)
    assert (first.call_count, len(recorder.bodies)) == (1, 1)


def test_a_dry_runs_error_the_failover_does_not_move_on_from_is_raised() -> None:
    def refused() -> InvalidRequestError:
        return InvalidRequestError("keyless takes no such request")

    second, recorder = _deepseek()
    both = FailoverProvider([Refusing(refused), second])
    with pytest.raises(InvalidRequestError) as validated:
        both.validate_chat_request(REQUEST)
    with pytest.raises(InvalidRequestError) as planned:
        Extractor().plan(both, Person, REQUEST)
    assert str(validated.value) == str(planned.value) == "keyless takes no such request"
    assert recorder.bodies == []


def test_the_last_providers_missing_key_is_the_dry_runs_error() -> None:
    both = FailoverProvider([Refusing(_missing_key), Refusing(_missing_key)])
    with pytest.raises(AuthenticationError) as caught:
        both.validate_chat_request(REQUEST)
    assert str(caught.value) == _MISSING


# The same through real HTTP providers: the first without its key.

_DEEPSEEK_ANSWER = {
    "id": "x",
    "object": "chat.completion",
    "model": "deepseek-chat",
    "choices": [
        {
            "index": 0,
            "message": {"role": "assistant", "content": '{"name": "Ada"}'},
            "finish_reason": "stop",
        }
    ],
    "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15},
}


def _keyless_then_deepseek(
    monkeypatch: pytest.MonkeyPatch, wrap: Callable[[Any], Any]
) -> tuple[FailoverProvider, Recorder, Recorder]:
    import allama

    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    unsent = Recorder((200, _DEEPSEEK_ANSWER))
    keyless = allama.provider("openai", transport=unsent.transport())
    deepseek, recorder = provider("deepseek", (200, _DEEPSEEK_ANSWER))
    return FailoverProvider([wrap(keyless), deepseek]), unsent, recorder


@pytest.mark.parametrize(
    "wrap",
    [
        lambda p: p,
        lambda p: RetryingProvider(p),
        lambda p: FailoverProvider([p, p]),
        lambda p: RetryingProvider(FailoverProvider([p, RetryingProvider(p)])),
    ],
)
def test_a_first_http_provider_without_its_key_is_passed_as_the_call_passes_it(
    monkeypatch: pytest.MonkeyPatch, wrap: Callable[[Any], Any]
) -> None:
    failover, unsent, recorder = _keyless_then_deepseek(monkeypatch, wrap)
    plan = Extractor().plan(failover, Person, REQUEST)
    assert (plan.mode, plan.enforcement) == (
        ExtractionMode.NATIVE,
        SchemaEnforcement.NOT_ENFORCED,
    )
    assert [w.code for w in plan.notes][:1] == [PASSED_BEFORE_SENDING]
    assert "` refuses the call before sending (openai needs an API key" in plan.notes[0].message
    # The floor is checked before paying, as the plan says.
    with pytest.raises(EnforcementBelowError):
        Extractor(min_enforcement="exact").extract(failover, Person, REQUEST)
    assert (unsent.bodies, recorder.bodies) == ([], [])
    got = Extractor().extract(failover, Person, REQUEST)
    assert got.metadata.enforcement is SchemaEnforcement.NOT_ENFORCED
    assert (len(unsent.bodies), len(recorder.bodies)) == (0, 1)
