"""The provider protocol and the helper adapters use to report what they cannot send."""

from __future__ import annotations

import pytest

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
