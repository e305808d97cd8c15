"""The provider protocol and the helper adapters use to report what they cannot send."""

from __future__ import annotations

from typing import Any

import httpx2
import pytest

import allama
from allama import (
    ChatProvider,
    ChatRequest,
    Degradations,
    FieldSubject,
    RequestField,
    UnsupportedError,
    UnsupportedPolicy,
    UnsupportedStage,
    ValidationCoverage,
    Warning,
    WarningKind,
)
from allama.mock import FunctionProvider, MockProvider, MockStreamingProvider
from allama.provider import capabilities_only
from allama.transport import Transport


def test_the_mocks_are_providers() -> None:
    for provider in (
        MockProvider(),
        MockStreamingProvider(),
        FunctionProvider(lambda request: MockProvider(["x"]).chat(request)),
    ):
        assert isinstance(provider, ChatProvider)


def test_something_without_the_methods_is_not_a_provider() -> None:
    class Half:
        name = "half"

        def chat(self, request: ChatRequest) -> None:
            return None

    assert not isinstance(Half(), ChatProvider)


def test_refuse_warns_under_the_warn_policy() -> None:
    degradations = Degradations("acme", UnsupportedPolicy.WARN)
    degradations.refuse(RequestField.SEED, "the endpoint has no seed", code="seed")
    degradations.refuse(RequestField.SEED, "the endpoint has no seed", code="seed")
    degradations.approximate(RequestField.RESPONSE_FORMAT, "pattern dropped")
    assert degradations.warnings == [
        Warning(
            kind=WarningKind.UNSUPPORTED,
            subject=FieldSubject(field=RequestField.SEED),
            message="the endpoint has no seed",
            code="seed",
            provider="acme",
        ),
        Warning(
            kind=WarningKind.APPROXIMATED,
            subject=FieldSubject(field=RequestField.RESPONSE_FORMAT),
            message="pattern dropped",
            provider="acme",
        ),
    ]


def test_refuse_raises_before_sending_under_the_error_policy() -> None:
    request = ChatRequest("m").with_unsupported_policy(UnsupportedPolicy.ERROR)
    degradations = Degradations.for_request("acme", request)
    assert degradations.policy is UnsupportedPolicy.ERROR
    with pytest.raises(UnsupportedError) as caught:
        degradations.refuse(RequestField.RESPONSE_FORMAT, "json_schema is not supported")
    error = caught.value
    assert error.message == "cannot send `response_format`: json_schema is not supported"
    assert error.field is RequestField.RESPONSE_FORMAT
    assert error.stage is UnsupportedStage.BEFORE_SENDING
    assert error.provider == "acme"
    assert error.authored
    assert not error.retryable
    assert str(error.as_log()) == (
        "kind=unsupported provider=acme stage=before_sending field=response_format "
        'message="cannot send `response_format`: json_schema is not supported"'
    )
    assert degradations.warnings == []
    # A widening never fails, whatever the policy.
    degradations.approximate(RequestField.TOOLS, "strict dropped")
    assert [w.kind for w in degradations.warnings] == [WarningKind.APPROXIMATED]


def test_a_warning_keeps_a_provider_it_already_names() -> None:
    degradations = Degradations("acme", UnsupportedPolicy.WARN)
    degradations.warn(Warning.unsupported(RequestField.STOP, "x").with_provider("upstream"))
    assert degradations.warnings[0].provider == "upstream"


def test_unsupported_builds_without_raising() -> None:
    error = Degradations("acme", UnsupportedPolicy.WARN).unsupported(RequestField.TOP_P, "no")
    assert error.message == "cannot send `top_p`: no"
    assert error.field is RequestField.TOP_P


def test_capabilities_only_validation() -> None:
    validation = capabilities_only()
    assert validation.coverage is ValidationCoverage.CAPABILITIES
    assert validation.warnings == ()


# Arguments of allama.provider(...), checked when the provider is built

_KEY = "sk-live-SECRET"


@pytest.mark.parametrize(
    ("name", "options", "error", "message"),
    [
        (
            "openai",
            {"timeout": "fast"},
            TypeError,
            "timeout must be a number of seconds or an httpx2.Timeout, such as "
            "httpx2.Timeout(600.0, connect=5.0); got str",
        ),
        ("openai", {"timeout": True}, TypeError, "timeout must be a number of seconds"),
        ("openai", {"timeout": 0}, ValueError, "timeout must be a positive, finite number"),
        ("openai", {"timeout": -3.0}, ValueError, "timeout must be a positive, finite number"),
        ("openai", {"timeout": float("nan")}, ValueError, "timeout must be a positive"),
        (
            "openai",
            {"api_key": 12345},
            TypeError,
            "api_key must be a string (the key itself), got int",
        ),
        ("openai", {"api_key": _KEY + "\n"}, ValueError, "api_key has a line break or whitespace"),
        ("openai", {"api_key": " " + _KEY}, ValueError, "api_key has a line break or whitespace"),
        (
            "openai-compatible",
            {"base_url": "api.example.com/v1"},
            ValueError,
            "base_url must start with http:// or https:// (its scheme is none)",
        ),
        ("openai-compatible", {"base_url": 8000}, TypeError, "base_url must be a string"),
        ("azure-openai", {"endpoint": b"https://x"}, TypeError, "endpoint must be a string"),
        ("azure-openai", {"api_version": 2024}, TypeError, "api_version must be a string"),
        ("workers-ai", {"account_id": ""}, ValueError, "account_id is empty"),
        ("openai", {"headers": ["x-team"]}, TypeError, "headers must be a mapping"),
        ("openai", {"headers": {"x-team": 7}}, TypeError, "headers['x-team'] must be a string"),
        (
            "openai",
            {"headers": {"authorization": f"Bearer {_KEY}\r\nx-evil: 1"}},
            ValueError,
            "headers['authorization'] has a line break in its value",
        ),
        ("openai", {"headers": {"bad name:": "v"}}, TypeError, "headers must have header names"),
        ("openai", {"transport": "pooled"}, TypeError, "transport must be an allama Transport"),
        (
            "openai",
            {"transport": Transport(), "timeout": 5.0},
            ValueError,
            "timeout= has no effect with transport=",
        ),
        ("local", {"threads": "4"}, TypeError, "threads must be a whole number, got str"),
        ("local", {"model": 3}, TypeError, "model must be a path to a GGUF file"),
    ],
)
def test_a_wrong_argument_fails_when_the_provider_is_built(
    name: str, options: dict[str, Any], error: type[Exception], message: str
) -> None:
    with pytest.raises(error) as caught:
        allama.provider(name, **options)
    assert str(caught.value).startswith(message)
    # The message never quotes a key or a header value.
    assert _KEY not in str(caught.value)


def test_a_timeout_is_seconds_or_an_httpx2_timeout() -> None:
    assert allama.provider("openai", timeout=30)._transport.timeout == httpx2.Timeout(30.0)
    per_limit = httpx2.Timeout(120.0, connect=2.0)
    assert allama.provider("openai", timeout=per_limit)._transport.timeout == per_limit
    # The default: ten minutes to answer, five seconds to connect.
    assert allama.provider("openai")._transport.timeout == httpx2.Timeout(600.0, connect=5.0)
