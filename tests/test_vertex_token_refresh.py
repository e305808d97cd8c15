"""A token refresh of Application Default Credentials that may pass (Google's token
endpoint out of reach, or answering a 5xx google-auth marks retryable) is a retryable
failure, tried again and never a refused key that stops a batch run; a refused credential
stays an `AuthenticationError`."""

from __future__ import annotations

import sys
from typing import Any

import httpx2
import pytest
from google.auth import exceptions

import allama
from allama.errors import AuthenticationError, NetworkError, ServerError
from allama.transport import Transport
from allama.types import ChatRequest

ANSWER = {
    "candidates": [
        {"content": {"role": "model", "parts": [{"text": '"ok"'}]}, "finishReason": "STOP"}
    ],
    "usageMetadata": {"promptTokenCount": 2, "candidatesTokenCount": 1, "totalTokenCount": 3},
}


class FailingOnce:
    """google-auth credentials whose first refresh raises `failure`."""

    def __init__(self, failure: Exception) -> None:
        self.failure = failure
        self.refreshes = 0
        self.token: str | None = None
        self.valid = False

    def refresh(self, request: Any) -> None:
        self.refreshes += 1
        if self.refreshes == 1:
            raise self.failure
        self.token, self.valid = "tok", True


def _vertex(credentials: FailingOnce, sent: list[str]) -> Any:
    def handler(request: httpx2.Request) -> httpx2.Response:
        sent.append(request.headers["authorization"])
        return httpx2.Response(200, json=ANSWER)

    client = httpx2.Client(transport=httpx2.MockTransport(handler))
    return allama.provider(
        "vertex-gemini", project="p", credentials=credentials, transport=Transport(client=client)
    )


PASSING = [
    (exceptions.TransportError("Connection aborted"), NetworkError, "could not reach"),
    (exceptions.TimeoutError("timed out"), NetworkError, "could not reach"),
    (
        exceptions.RefreshError("temporarily_unavailable", retryable=True),
        ServerError,
        "was failed by",
    ),
]


@pytest.mark.parametrize(("failure", "kind", "what"), PASSING)
def test_a_refresh_that_may_pass_is_retryable_and_tried_again(
    failure: Exception, kind: type[Exception], what: str
) -> None:
    credentials, sent = FailingOnce(failure), []
    vertex = _vertex(credentials, sent)
    with pytest.raises(kind) as caught:
        vertex.chat(ChatRequest("gemini-2.5-flash").user("x"))
    error = caught.value
    assert type(error) is kind and error.retryable
    assert error.message == (
        f"vertex-gemini {what} Google's token endpoint refreshing Application Default "
        f"Credentials ({type(failure).__name__}); nothing was sent"
    )
    assert sent == []
    retried = allama.RetryingProvider(vertex, sleep=lambda seconds: None)
    assert retried.chat(ChatRequest("gemini-2.5-flash").user("x")).text() == '"ok"'
    assert sent == ["Bearer tok"] and credentials.refreshes == 2


def test_a_batch_run_goes_on_past_a_refresh_that_failed_once() -> None:
    credentials, sent = FailingOnce(exceptions.TransportError("Connection aborted")), []
    vertex = _vertex(credentials, sent)
    run = allama.batch(
        vertex,
        str,
        ["a", "b", "c"],
        request=ChatRequest("gemini-2.5-flash"),
        concurrency=1,
        backoff=0.0,
    )
    results = list(run)
    assert [result.value for result in results] == ["ok", "ok", "ok"]
    assert run.summary.refused is None
    assert len(sent) == 3


def test_a_refused_credential_stays_an_authentication_error() -> None:
    credentials, sent = FailingOnce(exceptions.RefreshError("invalid_grant")), []
    with pytest.raises(AuthenticationError) as caught:
        _vertex(credentials, sent).chat(ChatRequest("gemini-2.5-flash").user("x"))
    assert not caught.value.retryable and sent == []
    assert "gcloud auth application-default login" in caught.value.message


class Refreshed:
    """google-auth credentials good from the first: `token` is whatever they hold now."""

    def __init__(self) -> None:
        self.token = "ya29.first-token-0001"
        self.valid = True


def test_a_token_refreshed_while_the_call_was_out_is_redacted_from_its_error() -> None:
    # Another thread's call refreshed the credentials while this one was on its way: the
    # token the error echoes is no longer the one they hold.
    credentials = Refreshed()

    def handler(request: httpx2.Request) -> httpx2.Response:
        token = request.headers["authorization"].removeprefix("Bearer ")
        credentials.token = "ya29.second-token-0002"
        body = {"error": {"code": 401, "message": f"token {token} expired", "status": "X"}}
        return httpx2.Response(401, json=body)

    client = httpx2.Client(transport=httpx2.MockTransport(handler))
    vertex = allama.provider(
        "vertex-gemini", project="p", credentials=credentials, transport=Transport(client=client)
    )
    with pytest.raises(AuthenticationError) as caught:
        vertex.chat(ChatRequest("gemini-2.5-flash").user("x"))
    assert str(caught.value) == "token <redacted> expired"
    assert "first-token" not in caught.value.to_json()


def _unauthenticated(sent: list[str]) -> Any:
    """vertex-gemini without a token or credentials: Application Default Credentials."""

    def handler(request: httpx2.Request) -> httpx2.Response:
        sent.append(str(request.url))
        return httpx2.Response(200, json=ANSWER)

    client = httpx2.Client(transport=httpx2.MockTransport(handler))
    return allama.provider(
        "vertex-gemini", project="p", location="us-central1", transport=Transport(client=client)
    )


def test_google_auth_without_its_requests_transport_is_named_as_what_is_missing(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """google-auth installed without its `requests` extra: the transport is what is
    missing, not google-auth (whose install would change nothing)."""
    monkeypatch.delitem(sys.modules, "google.auth.transport.requests", raising=False)
    monkeypatch.setitem(sys.modules, "requests", None)  # `import requests` fails
    sent: list[str] = []
    with pytest.raises(AuthenticationError) as caught:
        _unauthenticated(sent).chat(ChatRequest("gemini-2.5-flash").user("x"))
    assert caught.value.message == (
        "vertex-gemini needs access_token=, or google-auth's requests transport for "
        "Application Default Credentials (google-auth is installed without it): pip install "
        "'google-auth[requests]' (or 'allama[google]')"
    )
    assert not caught.value.retryable and sent == []


def test_no_google_auth_is_named_as_what_is_missing(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "google.auth", None)  # `import google.auth` fails
    sent: list[str] = []
    with pytest.raises(AuthenticationError) as caught:
        _unauthenticated(sent).chat(ChatRequest("gemini-2.5-flash").user("x"))
    assert caught.value.message == (
        "vertex-gemini needs access_token=, or the google-auth package for Application "
        "Default Credentials: pip install 'allama[google]'"
    )
    assert not caught.value.retryable and sent == []
