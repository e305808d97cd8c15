"""The error hierarchy: kinds, retryability, context, chains, round trips and redaction."""

from __future__ import annotations

import json
import pickle
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import allama
from allama import (
    AuthenticationError,
    ChatResponse,
    ContextWindowExceededError,
    Error,
    ErrorContext,
    ExtractionError,
    IncompleteStreamError,
    InvalidRequestError,
    MessageOrigin,
    NetworkError,
    NotFoundError,
    OverloadedError,
    PermissionDeniedError,
    QuotaExceededError,
    RateLimitedError,
    RequestField,
    RequestTimeoutError,
    ServerError,
    StreamDecodeError,
    StreamError,
    TextPart,
    UnsupportedError,
    UnsupportedStage,
)
from allama.errors import errors_in_chain

SECRET = "SECRET-MODEL-TEXT"
KEY = "sk-test-SECRET-KEY"

KINDS: list[tuple[type[Error], str, bool]] = [
    (Error, "error", False),
    (RateLimitedError, "rate_limited", True),
    (QuotaExceededError, "quota_exceeded", False),
    (RequestTimeoutError, "timeout", True),
    (AuthenticationError, "authentication", False),
    (PermissionDeniedError, "permission", False),
    (NotFoundError, "not_found", False),
    (InvalidRequestError, "invalid_request", False),
    (ContextWindowExceededError, "context_window", False),
    (UnsupportedError, "unsupported", False),
    (ServerError, "server", True),
    (OverloadedError, "overloaded", True),
    (NetworkError, "network", True),
    (StreamError, "stream", False),
    (StreamDecodeError, "stream_decode", False),
    (IncompleteStreamError, "stream_incomplete", True),
    (ExtractionError, "extraction", False),
]


@pytest.mark.parametrize(("cls", "kind", "retryable"), KINDS, ids=lambda x: str(x))
def test_every_error_kind(cls: type[Error], kind: str, retryable: bool) -> None:
    error = cls("boom")
    assert isinstance(error, allama.Error)
    assert isinstance(error, Exception)
    assert error.kind == kind
    assert error.retryable is retryable
    assert error.with_retryable(not retryable).retryable is (not retryable)
    assert error.retry_after is None
    assert error.origin is MessageOrigin.UNKNOWN
    assert not error.authored
    assert str(error) == "boom"
    assert error.message == "boom"
    assert error.fallback_from is None
    assert (error.provider, error.model, error.status, error.request_id) == (None,) * 4


@pytest.mark.parametrize(("cls", "kind", "retryable"), KINDS, ids=lambda x: str(x))
def test_every_error_kind_survives_json_and_pickle(
    cls: type[Error], kind: str, retryable: bool
) -> None:
    error = (
        cls("it broke")
        .with_provider("openai")
        .with_model("gpt-5-mini")
        .with_status(503)
        .with_request_id("req_1")
        .with_body('{"error": "x"}')
        .with_metadata("allama.retry", {"attempts": 2})
        .mark_upstream()
    )
    for back in (
        Error.from_dict(error.to_dict()),
        Error.from_json(error.to_json()),
        pickle.loads(pickle.dumps(error)),
    ):
        assert type(back) is cls
        assert back.to_dict() == error.to_dict()
        assert back.context == error.context
        assert back.origin is MessageOrigin.UPSTREAM
        assert back.retryable is retryable
        assert back.message == "it broke"


def test_subclasses_are_caught_by_their_family() -> None:
    assert isinstance(ContextWindowExceededError("x"), InvalidRequestError)
    assert isinstance(OverloadedError("x"), ServerError)
    assert isinstance(StreamDecodeError("x"), StreamError)
    assert isinstance(IncompleteStreamError("x"), StreamError)


def test_rate_limited_carries_retry_after() -> None:
    error = RateLimitedError("slow down", retry_after=2.5)
    assert error.retry_after == 2.5
    assert error.with_retry_after(None).retry_after is None
    error.with_retry_after(7)
    back = Error.from_dict(error.to_dict())
    assert isinstance(back, RateLimitedError)
    assert back.retry_after == 7
    assert error.to_dict() == {
        "kind": "rate_limited",
        "message": "slow down",
        "fields": {"retry_after": 7},
    }
    assert pickle.loads(pickle.dumps(error)).retry_after == 7
    assert error.as_log().to_dict() == {"kind": "rate_limited", "retry_after": 7, "message_len": 9}


def test_unsupported_carries_field_and_stage() -> None:
    error = UnsupportedError(
        "cannot send `seed`: no", field=RequestField.SEED, stage=UnsupportedStage.PROVIDER
    ).mark_authored()
    assert error.field is RequestField.SEED
    assert error.stage is UnsupportedStage.PROVIDER
    assert UnsupportedError("x").stage is UnsupportedStage.BEFORE_SENDING
    assert UnsupportedError("x").field is None
    assert UnsupportedError("x", field="tools", stage="provider").field is RequestField.TOOLS
    back = pickle.loads(pickle.dumps(error))
    assert isinstance(back, UnsupportedError)
    assert (back.field, back.stage, back.authored) == (
        RequestField.SEED,
        UnsupportedStage.PROVIDER,
        True,
    )
    assert error.as_log().to_dict() == {
        "kind": "unsupported",
        "stage": "provider",
        "field": "seed",
        "message": "cannot send `seed`: no",
    }


def test_context_accessors_and_setters_update_in_place() -> None:
    error = ServerError("x")
    same = (
        error.with_provider("anthropic")
        .with_model("claude")
        .with_status(529)
        .with_request_id("req_9")
        .with_body("body")
        .with_metadata("k", [1])
        .mark_authored()
    )
    assert same is error
    assert (error.provider, error.model, error.status, error.request_id) == (
        "anthropic",
        "claude",
        529,
        "req_9",
    )
    assert error.context.body == "body"
    assert error.context.metadata == {"k": [1]}
    assert error.authored
    assert error.mark_upstream().origin is MessageOrigin.UPSTREAM


def test_context_from_constructor() -> None:
    context = ErrorContext(provider="p", model="m", request_id="r", status=400, metadata={"a": 1})
    error = InvalidRequestError("bad", context=context, origin=MessageOrigin.AUTHORED)
    assert error.context is context
    assert context.to_dict() == {
        "provider": "p",
        "model": "m",
        "request_id": "r",
        "status": 400,
        "metadata": {"a": 1},
    }
    assert ErrorContext.from_dict(context.to_dict()) == context
    assert ErrorContext() != context
    assert ErrorContext().to_dict() == {}


def test_fallback_chain_and_its_round_trip() -> None:
    first = RateLimitedError("a", retry_after=1.0).with_provider("one")
    second = ServerError("b").with_provider("two").with_fallback_from(first)
    third = NetworkError("c", fallback_from=second).with_provider("three")
    assert errors_in_chain(third) == [third, second, first]
    assert errors_in_chain(first) == [first]
    back = pickle.loads(pickle.dumps(third))
    assert [(type(e), e.provider) for e in errors_in_chain(back)] == [
        (NetworkError, "three"),
        (ServerError, "two"),
        (RateLimitedError, "one"),
    ]
    assert errors_in_chain(back)[2].retry_after == 1.0


def test_a_cyclic_chain_does_not_hang() -> None:
    a = ServerError("a")
    b = ServerError("b", fallback_from=a)
    a.with_fallback_from(b)
    assert len(errors_in_chain(a)) == 64


def test_unknown_kinds_come_back_as_the_base_error() -> None:
    back = Error.from_dict({"kind": "from_the_future", "message": "m", "retryable": True})
    assert type(back) is Error
    assert back.retryable is True


def test_to_dict_is_minimal_and_explicit() -> None:
    assert NetworkError("down").to_dict() == {"kind": "network", "message": "down"}
    error = NetworkError("down").with_retryable(False).mark_authored().with_status(0)
    assert error.to_dict() == {
        "kind": "network",
        "message": "down",
        "context": {"status": 0},
        "origin": "authored",
        "retryable": False,
    }
    assert json.loads(error.to_json()) == error.to_dict()


# Redaction


def leaky_error() -> ServerError:
    """An upstream error as an adapter builds it from a response that echoes model text and key."""
    response = ChatResponse((TextPart(text=f"model said {SECRET}"),), provider="openai")
    body = json.dumps(
        {"error": {"message": f"Incorrect API key provided: {KEY}", "echo": response.text()}}
    )
    return (
        ServerError(f"upstream: Incorrect API key provided: {KEY}; {response.text()}")
        .mark_upstream()
        .with_provider("openai")
        .with_model("gpt-5-mini")
        .with_status(500)
        .with_request_id("req_42")
        .with_body(body)
        .with_metadata("upstream_type", f"{SECRET} {KEY}")
        .with_metadata("allama.retry", {"attempts": 3})
    )


def test_the_log_view_leaves_out_upstream_text_model_output_and_keys() -> None:
    error = leaky_error()
    log = error.as_log()
    line = str(log)
    rendered = [line, json.dumps(log.to_dict()), repr(log), repr(error), repr(error.context)]
    for text in rendered:
        assert SECRET not in text
        assert KEY not in text
        assert "sk-" not in text
    assert log.to_dict() == {
        "kind": "server",
        "provider": "openai",
        "model": "gpt-5-mini",
        "status": 500,
        "request_id": "req_42",
        "body_len": len(error.context.body or ""),
        "allama.retry": {"attempts": 3},
        "message_len": len(error.message),
    }
    assert line == (
        f"kind=server provider=openai model=gpt-5-mini status=500 request_id=req_42 "
        f"body_len={len(error.context.body or '')} allama.retry.attempts=3 "
        f"message_len={len(error.message)}"
    )
    assert log["kind"] == "server"
    assert log.get("message") is None
    # The caller still has everything.
    assert KEY in error.message
    assert SECRET in (error.context.body or "")


def test_the_log_view_of_a_chain_redacts_every_link() -> None:
    authored = UnsupportedError(
        "cannot send `seed`: no seed here", field=RequestField.SEED
    ).mark_authored()
    error = leaky_error().with_fallback_from(authored.with_fallback_from(leaky_error()))
    log = error.as_log()
    assert SECRET not in str(log) and KEY not in str(log)
    assert SECRET not in json.dumps(log.to_dict()) and KEY not in json.dumps(log.to_dict())
    fallback = log.to_dict()["fallback_from"]
    assert isinstance(fallback, dict)
    assert fallback["message"] == "cannot send `seed`: no seed here"
    assert fallback["field"] == "seed"
    assert str(log).endswith(
        "fallback_from.kind=unsupported fallback_from.stage=before_sending "
        'fallback_from.field=seed fallback_from.message="cannot send `seed`: no seed here" '
        "fallback_from.fallback_from.kind=server fallback_from.fallback_from.provider=openai "
        "fallback_from.fallback_from.model=gpt-5-mini fallback_from.fallback_from.status=500 "
        "fallback_from.fallback_from.request_id=req_42 "
        f"fallback_from.fallback_from.body_len={len(error.context.body or '')} "
        "fallback_from.fallback_from.allama.retry.attempts=3 "
        f"fallback_from.fallback_from.message_len={len(error.message)}"
    )


def test_authored_messages_are_logged_and_shown() -> None:
    error = IncompleteStreamError("the stream ended early").mark_authored().with_provider("p")
    assert str(error.as_log()) == (
        'kind=stream_incomplete provider=p message="the stream ended early"'
    )
    assert repr(error) == (
        "IncompleteStreamError(message='the stream ended early', "
        "context=ErrorContext(provider='p'))"
    )


def test_repr_withholds_upstream_messages() -> None:
    error = AuthenticationError(f"bad key {KEY}").with_body(KEY).with_metadata("x", KEY)
    assert repr(error) == (
        "AuthenticationError(message=<withheld 26 chars>, "
        "context=ErrorContext(body=<withheld 18 chars>, metadata_keys=['x']))"
    )


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner),
    max_leaves=6,
)


@settings(max_examples=200, deadline=None)
@given(
    kind=st.sampled_from(KINDS),
    message=st.text(max_size=30),
    body=st.none() | st.text(max_size=30),
    status=st.none() | st.integers(100, 599),
    provider=st.none() | st.text(max_size=8),
    upstream_meta=st.dictionaries(st.text(max_size=6), st.text(max_size=10), max_size=3),
    allama_meta=st.dictionaries(st.text(max_size=6), json_values, max_size=3),
    retryable=st.none() | st.booleans(),
)
def test_any_error_round_trips_and_its_log_view_quotes_no_upstream_text(
    kind: tuple[type[Error], str, bool],
    message: str,
    body: str | None,
    status: int | None,
    provider: str | None,
    upstream_meta: dict[str, str],
    allama_meta: dict[str, Any],
    retryable: bool | None,
) -> None:
    cls = kind[0]
    error = cls(f"UPSTREAM:{message}", retryable=retryable).mark_upstream()
    error.context = ErrorContext(
        provider=provider,
        status=status,
        body=None if body is None else f"BODY:{body}",
        metadata={
            **{f"vendor.{key}": f"META:{value}" for key, value in upstream_meta.items()},
            **{f"allama.{key}": value for key, value in allama_meta.items()},
        },
    )
    back = Error.from_json(error.to_json())
    assert type(back) is cls
    assert back.to_dict() == error.to_dict()
    assert back.retryable is error.retryable
    log = error.as_log()
    for shown in (str(log), json.dumps(log.to_dict()), repr(error)):
        assert "UPSTREAM:" not in shown
        assert "BODY:" not in shown
        assert "META:" not in shown
    assert log["message_len"] == len(error.message)
    assert {k for k in log.to_dict() if k.startswith("allama.")} == {
        f"allama.{key}" for key in allama_meta
    }


# An error page that is not the provider's (a proxy's or a gateway's HTML)


CLOUDFLARE_502 = (
    b"<!DOCTYPE html>\n<html><head><title>502 Bad Gateway</title></head><body>"
    b"<center><h1>502 Bad Gateway</h1></center><hr><center>cloudflare</center></body></html>"
)


@pytest.mark.parametrize(
    ("preset", "options"),
    [
        ("openai", {}),
        ("openai", {"api": "responses"}),
        ("groq", {}),
        ("anthropic", {}),
        ("gemini", {}),
        ("ollama", {"base_url": "http://127.0.0.1:1"}),
    ],
)
def test_an_html_error_page_is_named_by_its_title_not_its_markup(
    preset: str, options: dict[str, Any]
) -> None:
    import httpx2

    def handler(request: httpx2.Request) -> httpx2.Response:
        return httpx2.Response(502, content=CLOUDFLARE_502, headers={"content-type": "text/html"})

    transport = allama.Transport(client=httpx2.Client(transport=httpx2.MockTransport(handler)))
    target = allama.provider(preset, api_key="sk-test", transport=transport, **options)
    with pytest.raises(ServerError) as caught:
        target.chat(allama.ChatRequest("m").user("x"))
    error = caught.value
    assert error.message == (
        "the provider answered HTTP 502 with an HTML page (not its API's error): 502 Bad Gateway"
    )
    assert (error.status, error.retryable) == (502, True)
    assert error.context.body == CLOUDFLARE_502.decode()  # the page itself is kept


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ("", "HTTP 503"),
        ("  upstream connect error  ", "upstream connect error"),
        (
            "<html><body>no title here</body></html>",
            "the provider answered HTTP 503 with an HTML page (not its API's error): no title here",
        ),
        (
            "<html><head><style>p {}</style><script>var a = '<b>';</script></head></html>",
            "the provider answered HTTP 503 with an HTML page (not its API's error)",
        ),
        (
            "<HTML><HEAD><TITLE>\n Service &amp; <b>Unavailable</b>\n</TITLE></HEAD></HTML>",
            "the provider answered HTTP 503 with an HTML page (not its API's error): "
            "Service & Unavailable",
        ),
        (
            "<html><h1>Down for maintenance</h1></html>",
            "the provider answered HTTP 503 with an "
            "HTML page (not its API's error): Down for maintenance",
        ),
        ("<not html>", "<not html>"),
    ],
)
def test_the_message_of_a_body_that_is_not_the_providers_json(body: str, message: str) -> None:
    from allama.adapters._http import body_message

    assert body_message(body, 503) == message


@pytest.mark.parametrize(
    ("preset", "options", "status", "kind"),
    [
        ("openai", {}, 503, OverloadedError),
        ("openai", {"api": "responses"}, 500, ServerError),
        ("anthropic", {}, 529, OverloadedError),
        ("gemini", {}, 503, ServerError),
        ("ollama", {"base_url": "http://127.0.0.1:1"}, 503, ServerError),
    ],
)
def test_a_server_error_keeps_the_wait_its_response_asked_for(
    preset: str, options: dict[str, Any], status: int, kind: type[Error]
) -> None:
    import httpx2

    def answer(headers: dict[str, str]) -> ServerError:
        def handler(request: httpx2.Request) -> httpx2.Response:
            return httpx2.Response(status, content=b"busy", headers=headers)

        client = httpx2.Client(transport=httpx2.MockTransport(handler))
        target = allama.provider(
            preset, api_key="sk-test", transport=allama.Transport(client=client), **options
        )
        with pytest.raises(ServerError) as caught:
            target.chat(allama.ChatRequest("m").user("x"))
        return caught.value

    error = answer({"retry-after": "7"})
    assert isinstance(error, kind) and error.retry_after == 7.0
    assert allama.Error.from_json(error.to_json()).retry_after == 7.0
    assert "retry_after=7.0" in str(error.as_log())
    # Rate-limit resets say when a limit refills, not when a failed server recovers.
    quiet = answer({"x-ratelimit-reset-requests": "20s", "x-ratelimit-remaining-requests": "0"})
    assert quiet.retry_after is None


def test_a_retry_waits_as_long_as_a_server_error_asked() -> None:
    from allama.wrappers import RetryPolicy

    policy = RetryPolicy(jitter=0.0)
    asked = ServerError("busy", retry_after=9.0)
    assert policy.delay(1, asked, elapsed=0.0, unit=0.5) == 9.0


def test_a_message_that_is_no_text_is_its_str_and_every_view_can_be_made() -> None:
    class Unprintable:
        def __str__(self) -> str:
            raise RuntimeError("no text")

    # A provider of the caller's own may raise with what its body held.
    for held, text in (
        (None, ""),
        (404, "404"),
        (b"bad \xff", "bad \ufffd"),
        (memoryview(b"ok"), "ok"),
    ):
        error = InvalidRequestError(held)  # type: ignore[arg-type]
        assert (error.message, str(error)) == (text, text)
        assert error.as_log().to_dict()["message_len"] == len(text)
        assert repr(error) == (
            f"InvalidRequestError(message=<withheld {len(text)} chars>, context=ErrorContext())"
        )
    assert InvalidRequestError(Unprintable()).message == "<Unprintable>"  # type: ignore[arg-type]
