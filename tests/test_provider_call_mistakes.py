"""A new user's mistakes at a provider's call site, each refused or explained in words that
say what to change: a string where the `ChatRequest` goes, an endpoint's whole URL pasted
as the base URL (or one missing its `/v1`), a dummy key for a local server, `https://` to a
server speaking plain HTTP."""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import AsyncIterator, Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import httpx2
import pytest
from pydantic import BaseModel

import allama
from allama import ChatRequest
from allama.errors import (
    REPORTED_USAGE_KEY,
    ContextWindowExceededError,
    NetworkError,
    NotFoundError,
    ServerError,
    paid_for,
)
from allama.mock import FunctionProvider, MockProvider, MockStreamingProvider, TestProvider
from allama.transport import Transport

REQUEST = ChatRequest("gpt-4o-mini").user("Hi")
ANSWER = {
    "id": "c1",
    "object": "chat.completion",
    "created": 1,
    "model": "gpt-4o-mini",
    "choices": [
        {"index": 0, "message": {"role": "assistant", "content": "hi"}, "finish_reason": "stop"}
    ],
    "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
}


def _answering(status: int, body: bytes | dict[str, Any], sent: list[str]) -> Transport:
    """A transport answering every request `status` with `body`, noting each URL sent."""

    def handler(request: httpx2.Request) -> httpx2.Response:
        sent.append(str(request.url))
        content = body if isinstance(body, bytes) else json.dumps(body).encode()
        return httpx2.Response(
            status, content=content, headers={"content-type": "application/json"}
        )

    return Transport(
        client=httpx2.Client(transport=httpx2.MockTransport(handler)),
        async_client=httpx2.AsyncClient(transport=httpx2.MockTransport(handler)),
    )


class _Program(BaseModel):
    author: str


# A string (or None, a dict of OpenAI's form, a list of messages) where the `ChatRequest` goes.

NOT_REQUESTS = [
    (
        "hello",
        "request must be a ChatRequest, not str (build one with `ChatRequest(model).user(text)`)",
    ),
    (None, "request must be a ChatRequest, not NoneType"),
    (
        {"model": "gpt-4o-mini", "messages": [{"role": "user", "content": "hi"}]},
        "request must be a ChatRequest, not dict",
    ),
    ([{"role": "user", "content": "hi"}], "request must be a ChatRequest, not list"),
]


def _calls(provider: Any, request: Any) -> dict[str, Callable[[], object]]:
    """Each way to call `provider` with `request`, run to its end (an async one awaited)."""

    async def astream() -> object:
        return await provider.achat_stream(request)

    return {
        "chat": lambda: provider.chat(request),
        "chat_stream": lambda: provider.chat_stream(request),
        "achat": lambda: asyncio.run(provider.achat(request)),
        "achat_stream": lambda: asyncio.run(astream()),
        "validate_chat_request": lambda: provider.validate_chat_request(request),
    }


@pytest.mark.parametrize(("request_", "message"), NOT_REQUESTS)
def test_an_http_providers_calls_refuse_what_is_no_request_naming_it_and_send_nothing(
    request_: object, message: str
) -> None:
    sent: list[str] = []
    provider = allama.provider("openai", api_key="sk-x", transport=_answering(200, ANSWER, sent))
    for name, call in _calls(provider, request_).items():
        with pytest.raises(TypeError) as raised:
            call()
        assert (name, str(raised.value)) == (name, message)
    assert sent == []


def test_the_refusal_is_worded_as_the_extractions() -> None:
    provider = allama.provider("openai", api_key="sk-x", transport=_answering(200, ANSWER, []))
    with pytest.raises(TypeError) as extracted:
        allama.extract(provider, _Program, "hello")  # type: ignore[call-overload]
    with pytest.raises(TypeError) as chatted:
        provider.chat("hello")  # type: ignore[arg-type]
    assert str(chatted.value) == str(extracted.value)


def _wrapped_and_mocks() -> dict[str, Any]:
    inner = allama.provider("openai", api_key="sk-x", transport=_answering(200, ANSWER, []))
    return {
        "RetryingProvider": allama.RetryingProvider(inner),
        "FailoverProvider": allama.FailoverProvider([inner, inner]),
        "TestProvider": TestProvider(),
        "MockProvider": MockProvider(["hi"]),
        "MockStreamingProvider": MockStreamingProvider([]),
        "FunctionProvider": FunctionProvider(lambda request: pytest.fail("answered")),
        "llama-cpp": allama.provider("llama-cpp", base_url="http://127.0.0.1:9"),
    }


@pytest.mark.parametrize("kind", sorted(_wrapped_and_mocks()))
@pytest.mark.parametrize(("request_", "message"), NOT_REQUESTS[:2])
def test_wrappers_mocks_and_the_local_server_refuse_it_alike(
    kind: str, request_: object, message: str
) -> None:
    provider = _wrapped_and_mocks()[kind]
    for name, call in _calls(provider, request_).items():
        with pytest.raises(TypeError) as raised:
            call()
        assert (name, str(raised.value)) == (name, message)
    if hasattr(provider, "call_count"):  # a mock records no such call
        assert provider.call_count == 0


# An endpoint's whole URL pasted as the base URL: refused when the provider is built,
# saying which URL to give.


@pytest.mark.parametrize(
    ("preset", "base_url", "message"),
    [
        (
            "openai",
            "http://h/v1/chat/completions",
            "the base URL ends in /chat/completions, part of an API call's path, which each "
            "call to openai adds after the base URL itself: give the URL before it (http://h/v1)",
        ),
        (
            "vllm",
            "http://h:8000/v1/chat/completions/",
            "the base URL ends in /chat/completions, part of an API call's path, which each "
            "call to vllm adds after the base URL itself: give the URL before it "
            "(http://h:8000/v1)",
        ),
        (
            "ollama-openai",
            "http://h:11434/v1/Completions",
            "the base URL ends in /Completions, part of an API call's path, which each call "
            "to ollama-openai adds after the base URL itself: give the URL before it "
            "(http://h:11434/v1)",
        ),
        (
            "openai",
            "https://gw.example/v1/responses?key=abcdefghij",
            "the base URL ends in /responses, part of an API call's path, which each call to "
            "openai adds after the base URL itself: give the URL before it "
            "(https://gw.example/v1)",
        ),
        (
            "groq",
            "https://user:hunter22@gw.example/openai/v1/chat/completions",
            "the base URL ends in /chat/completions, part of an API call's path, which each "
            "call to groq adds after the base URL itself: give the URL before it "
            "(https://user:***@gw.example/openai/v1)",
        ),
        (
            "anthropic",
            "http://h/v1/messages",
            "the base URL ends in /messages, part of an API call's path, which each call to "
            "anthropic adds after the base URL itself: give the URL before it (http://h/v1)",
        ),
        (
            "gemini",
            "http://h/v1beta/models/gemini-2.5-flash:generateContent",
            "the base URL ends in /models/gemini-2.5-flash:generateContent, part of an API "
            "call's path, which each call to gemini adds after the base URL itself: give the "
            "URL before it (http://h/v1beta), and the model as the request's model",
        ),
        (
            "gemini",
            "http://h/v1beta/models/gemini-2.5-flash:streamGenerateContent",
            "the base URL ends in /models/gemini-2.5-flash:streamGenerateContent, part of an "
            "API call's path, which each call to gemini adds after the base URL itself: give "
            "the URL before it (http://h/v1beta), and the model as the request's model",
        ),
        (
            "gemini",
            "http://h/v1beta/models/gemini-2.0-flash",
            "the base URL ends in /models/gemini-2.0-flash, part of an API call's path, which "
            "each call to gemini adds after the base URL itself: give the URL before it "
            "(http://h/v1beta), and the model as the request's model",
        ),
        (
            "gemini",
            "http://h/v1beta/models/gemini-2.0-flash:countTokens",
            "the base URL ends in /models/gemini-2.0-flash:countTokens, part of an API call's "
            "path, which each call to gemini adds after the base URL itself: give the URL "
            "before it (http://h/v1beta), and the model as the request's model",
        ),
        (
            "gemini",
            "http://h/v1beta/tunedModels/my-model-abc",
            "the base URL ends in /tunedModels/my-model-abc, part of an API call's path, which "
            "each call to gemini adds after the base URL itself: give the URL before it "
            "(http://h/v1beta), and the model as the request's model",
        ),
        (
            "gemini",
            "http://h/v1beta/models",
            "the base URL ends in /models, part of an API call's path, which each call to "
            "gemini adds after the base URL itself: give the URL before it (http://h/v1beta)",
        ),
    ],
)
def test_a_base_url_ending_in_an_operations_path_is_refused_naming_the_url_to_give(
    preset: str, base_url: str, message: str
) -> None:
    with pytest.raises(ValueError) as raised:
        allama.provider(preset, api_key="sk-abcdefgh", base_url=base_url)
    assert str(raised.value) == message


def test_the_refusal_names_the_environment_variables_url_alike(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("OPENAI_BASE_URL", "http://h/v1/chat/completions")
    with pytest.raises(ValueError) as caught:
        allama.provider("openai", api_key="sk-abcdefgh")
    assert str(caught.value) == (
        "the base URL (from OPENAI_BASE_URL) ends in /chat/completions, part of an API call's "
        "path, which each call to openai adds after the base URL itself: give the URL before "
        "it (http://h/v1)"
    )


@pytest.mark.parametrize(
    ("preset", "base_url", "sent"),
    [
        ("openai", "http://h/v1", "http://h/v1/chat/completions"),
        ("anthropic", "http://h", "http://h/v1/messages"),
        ("gemini", "http://h/v1beta", "http://h/v1beta/models/m:generateContent"),
        ("ollama", "http://h/api/chat", "http://h/api/chat"),  # cut, as before
    ],
)
def test_a_base_url_short_of_the_operation_goes_as_before(
    preset: str, base_url: str, sent: str
) -> None:
    urls: list[str] = []
    provider = allama.provider(
        preset, api_key="sk-abcdefgh", base_url=base_url, transport=_answering(500, b"", urls)
    )
    with pytest.raises(allama.Error):
        provider.chat(ChatRequest("m").user("Hi"))
    assert urls == [sent]


# A 404 that says only "Not Found" names the path it was sent to and what to check.

OPENAI_HINT = "check the base URL; an OpenAI-compatible server's usually ends in /v1"


@pytest.mark.parametrize(
    ("body", "said"),
    [
        ({"detail": "Not Found"}, "Not Found"),  # (a web framework's, read as its message)
        (b"", "HTTP 404"),
        (
            b"<html><head><title>404 Not Found</title></head><body>nginx</body></html>",
            "the provider answered HTTP 404 with an HTML page (not its API's error): 404 Not Found",
        ),
        (b"404 page not found", "404 page not found"),
    ],
)
def test_a_bodiless_404_names_the_path_and_suggests_v1_where_the_base_url_has_no_version(
    body: bytes | dict[str, Any], said: str
) -> None:
    sent: list[str] = []
    provider = allama.provider(
        "vllm", api_key="EMPTY", base_url="http://h:8000", transport=_answering(404, body, sent)
    )
    expected = f"{said} (POST /chat/completions: {OPENAI_HINT})"
    with pytest.raises(NotFoundError) as raised:
        provider.chat(REQUEST)
    assert raised.value.message == expected
    with pytest.raises(NotFoundError) as raised:
        provider.chat_stream(REQUEST)
    assert raised.value.message == expected

    async def run() -> None:
        await provider.achat_stream(REQUEST)

    with pytest.raises(NotFoundError) as raised:
        asyncio.run(run())
    assert raised.value.message == expected
    with pytest.raises(NotFoundError) as raised:
        asyncio.run(provider.achat(REQUEST))
    assert raised.value.message == expected
    assert sent == ["http://h:8000/chat/completions"] * 4


GOOGLE_404 = (
    b"<!DOCTYPE html>\n<html lang=en>\n  <meta charset=utf-8>\n"
    b"  <title>Error 404 (Not Found)!!1</title>\n"
    b"  <p><b>404.</b> <ins>That\xe2\x80\x99s an error.</ins>\n"
)
IIS_404 = (
    b'<!DOCTYPE html PUBLIC "-//W3C//DTD XHTML 1.0 Strict//EN"><html><head>'
    b"<title>404 - File or directory not found.</title></head></html>"
)


@pytest.mark.parametrize(
    ("body", "said"),
    [
        (GOOGLE_404, "Error 404 (Not Found)!!1"),  # Google front end's
        (IIS_404, "404 - File or directory not found."),  # IIS's
    ],
    ids=["google", "iis"],
)
def test_a_web_servers_404_page_with_a_number_or_its_own_words_says_check_the_base_url(
    body: bytes, said: str
) -> None:
    provider = allama.provider(
        "vllm", api_key="EMPTY", base_url="http://h:8000", transport=_answering(404, body, [])
    )
    with pytest.raises(NotFoundError) as raised:
        provider.chat(REQUEST)
    assert raised.value.message == (
        f"the provider answered HTTP 404 with an HTML page (not its API's error): {said} "
        f"(POST /chat/completions: {OPENAI_HINT})"
    )


@pytest.mark.parametrize(
    ("message", "alone"),
    [
        ("Error 404 (Not Found)!!1", True),
        ("404 - File or directory not found.", True),
        ("404 page not found", True),
        ("Not Found", True),
        # Words that say what was not found are the API's, kept as they are.
        ("model 'x' not found", False),
        ("deployment not found", False),
        ("The API deployment for this resource does not exist.", False),
        ("No such file: /v1/foo", False),
        ("404 Not Found: /v1/foo", False),
        ("File not found", False),
        ("Model gpt-5 not found", False),
    ],
)
def test_a_404_says_its_status_alone_only_without_a_word_of_its_own(
    message: str, alone: bool
) -> None:
    from allama.adapters._http import says_status_alone

    assert says_status_alone(message, 404) is alone


def test_a_404_of_a_long_number_and_a_word_is_read_at_once() -> None:
    """Numbers are read a digit at a time: a run of them read as one, within a repeat, was
    split every way there is before a word after it failed the match (2^n tries)."""
    from allama.adapters._http import says_status_alone

    assert says_status_alone("4" * 40 + " deployment", 404) is False
    assert says_status_alone("4" * 40, 404) is True


def test_a_bodiless_404_says_the_path_alone_never_the_query() -> None:
    provider = allama.provider(
        "openai-compatible",
        base_url="http://h/gw/v1?key=topsecretvalue",
        transport=_answering(404, {"detail": "Not Found"}, []),
    )
    with pytest.raises(NotFoundError) as raised:
        provider.chat(REQUEST)
    assert raised.value.message == "Not Found (POST /gw/v1/chat/completions: check the base URL)"


def test_a_bodiless_404_of_another_dialect_says_check_the_base_url() -> None:
    provider = allama.provider(
        "anthropic",
        api_key="sk-ant-abcdefgh",
        base_url="http://h/proxy",
        transport=_answering(404, {"detail": "Not Found"}, []),
    )
    with pytest.raises(NotFoundError) as raised:
        provider.chat(ChatRequest("claude-sonnet-4-5").user("Hi"))
    assert raised.value.message == "Not Found (POST /proxy/v1/messages: check the base URL)"


@pytest.mark.parametrize("stream", [False, True])
def test_a_bodiless_404_of_an_api_chosen_with_api_says_the_server_may_not_serve_it(
    stream: bool,
) -> None:
    """The base URL is right (Chat Completions is served there): the server lacks the
    Responses API, which "check the base URL" alone sent the caller away from."""
    sent: list[str] = []
    provider = allama.provider(
        "openai-compatible",
        base_url="http://h/v1",
        api="responses",
        transport=_answering(404, {"detail": "Not Found"}, sent),
    )
    with pytest.raises(NotFoundError) as raised:
        if stream:
            provider.chat_stream(REQUEST)
        else:
            provider.chat(REQUEST)
    assert raised.value.message == (
        "Not Found (POST /v1/responses: check the base URL; or the server does not serve "
        "api='responses')"
    )
    assert sent == ["http://h/v1/responses"]


# A 405 (the path takes no POST: another app at the base URL) names the path as a 404 does;
# a web framework's `{"detail": "..."}` is read as the message in every dialect.

DIALECTS = [
    # preset, base URL, model, the path a call is sent to (a stream's, where it differs)
    ("openai", "http://h/v1", "gpt-4o-mini", "/v1/chat/completions", None),
    ("anthropic", "http://h", "claude-sonnet-4-5", "/v1/messages", None),
    (
        "gemini",
        "http://h/v1beta",
        "gemini-2.5-flash",
        "/v1beta/models/gemini-2.5-flash:generateContent",
        "/v1beta/models/gemini-2.5-flash:streamGenerateContent",
    ),
    ("ollama", "http://h", "llama3", "/api/chat", None),
]


def _every_call(provider: Any, request: ChatRequest) -> dict[str, Callable[[], object]]:
    """Each way to call `provider` (a stream read to its end), sync and async."""

    def stream() -> None:
        with provider.chat_stream(request) as events:
            for _ in events:
                pass

    async def astream() -> None:
        events = await provider.achat_stream(request)
        async with events:
            async for _ in events:
                pass

    return {
        "chat": lambda: provider.chat(request),
        "achat": lambda: asyncio.run(provider.achat(request)),
        "chat_stream": stream,
        "achat_stream": lambda: asyncio.run(astream()),
    }


@pytest.mark.parametrize(("preset", "base_url", "model", "path", "stream_path"), DIALECTS)
@pytest.mark.parametrize(
    ("body", "said"),
    [
        ({"detail": "Method Not Allowed"}, "Method Not Allowed"),
        (b"Method Not Allowed", "Method Not Allowed"),
        (
            b"<html><head><title>405 Not Allowed</title></head><body>nginx</body></html>",
            "the provider answered HTTP 405 with an HTML page (not its API's error): "
            "405 Not Allowed",
        ),
    ],
)
def test_a_405_names_the_path_and_says_check_the_base_url(
    preset: str,
    base_url: str,
    model: str,
    path: str,
    stream_path: str | None,
    body: bytes | dict[str, Any],
    said: str,
) -> None:
    provider = allama.provider(
        preset, api_key="sk-abcdefgh", base_url=base_url, transport=_answering(405, body, [])
    )
    for way, call in _every_call(provider, ChatRequest(model).user("Hi")).items():
        sent = stream_path if stream_path and "stream" in way else path
        with pytest.raises(allama.InvalidRequestError) as raised:
            call()
        assert raised.value.message == f"{said} (POST {sent}: check the base URL)", way
        assert raised.value.context.status == 405


@pytest.mark.parametrize(
    "body",
    [
        {"detail": "json_object response format is not supported for model: m"},  # DeepInfra
        {"error": {"message": "json_object response format is not supported for model: m"}},
    ],
)
def test_a_405_in_the_apis_own_words_is_kept_as_they_are(body: dict[str, Any]) -> None:
    provider = allama.provider(
        "openai-compatible", base_url="http://h/v1", transport=_answering(405, body, [])
    )
    with pytest.raises(allama.Error) as raised:
        provider.chat(ChatRequest("m").user("Hi"))
    assert raised.value.message == "json_object response format is not supported for model: m"


@pytest.mark.parametrize(("preset", "base_url", "model", "path", "stream_path"), DIALECTS)
def test_a_web_frameworks_detail_is_the_message_in_every_dialect(
    preset: str, base_url: str, model: str, path: str, stream_path: str | None
) -> None:
    provider = allama.provider(
        preset,
        api_key="sk-abcdefgh",
        base_url=base_url,
        transport=_answering(400, {"detail": "Unsupported field: stream_options"}, []),
    )
    for way, call in _every_call(provider, ChatRequest(model).user("Hi")).items():
        with pytest.raises(allama.InvalidRequestError) as raised:
            call()
        assert raised.value.message == "Unsupported field: stream_options", way
        assert raised.value.context.body == '{"detail": "Unsupported field: stream_options"}'


@pytest.mark.parametrize(("preset", "base_url", "model", "path", "stream_path"), DIALECTS)
def test_a_web_frameworks_validation_detail_is_read_in_every_dialect(
    preset: str, base_url: str, model: str, path: str, stream_path: str | None
) -> None:
    body = {
        "detail": [
            {"loc": ["body", "messages"], "msg": "field required", "type": "value_error.missing"},
            {"loc": ["query", "n"], "msg": "not an integer", "input": "sk-abcdefgh"},
        ]
    }
    provider = allama.provider(
        preset, api_key="sk-abcdefgh", base_url=base_url, transport=_answering(422, body, [])
    )
    for way, call in _every_call(provider, ChatRequest(model).user("Hi")).items():
        with pytest.raises(allama.InvalidRequestError) as raised:
            call()
        assert raised.value.message == ("body.messages: field required; query.n: not an integer"), (
            way
        )
        assert raised.value.context.status == 422


# A 200 that is an HTML page (a proxy's sign-in page) is that, streamed or not: a server
# error to try again, made and of a cost unknown, that says to check the base URL.

SIGN_IN = b"<html><head><title>Sign in</title></head><body>Please log in</body></html>"


def _page(body: bytes, content_type: str = "text/html; charset=utf-8") -> Transport:
    """A transport answering every request 200 with `body`, labelled `content_type`."""

    def handler(request: httpx2.Request) -> httpx2.Response:
        return httpx2.Response(200, content=body, headers={"content-type": content_type})

    return Transport(
        client=httpx2.Client(transport=httpx2.MockTransport(handler)),
        async_client=httpx2.AsyncClient(transport=httpx2.MockTransport(handler)),
    )


@pytest.mark.parametrize(
    ("preset", "base_url", "model", "what"),
    [
        ("openai", "http://h/v1", "gpt-4o-mini", "a chat completion"),
        ("anthropic", "http://h", "claude-sonnet-4-5", "a message"),
        ("gemini", "http://h/v1beta", "gemini-2.5-flash", "a response"),
        ("ollama", "http://h", "llama3", "a response"),
    ],
)
def test_a_200_html_page_is_a_server_error_of_a_cost_unknown_streamed_or_not(
    preset: str, base_url: str, model: str, what: str
) -> None:
    provider = allama.provider(
        preset, api_key="sk-abcdefgh", base_url=base_url, transport=_page(SIGN_IN)
    )
    for way, call in _every_call(provider, ChatRequest(model).user("Hi")).items():
        with pytest.raises(allama.Error) as raised:
            call()
        error = raised.value
        why = "an HTML page, not JSON" if way in ("chat", "achat") else "an HTML page"
        answer = what if way in ("chat", "achat") else "a stream"
        assert type(error) is ServerError, way
        assert (error.message, error.retryable) == (
            f"the provider answered with a body that is not {answer}: it is {why} (check the "
            "base URL, or a proxy in between): Sign in",
            True,
        )
        assert error.context.body == SIGN_IN.decode()
        assert error.context.metadata == {REPORTED_USAGE_KEY: {}}
        assert paid_for(error) == [{"provider": preset, "model": model, "usage": {}}]


def test_a_200_html_page_without_a_title_says_its_words() -> None:
    provider = allama.provider(
        "openai", api_key="sk-abcdefgh", transport=_page(b"<html><body>Blocked</body></html>")
    )
    with pytest.raises(ServerError) as raised:
        provider.chat_stream(REQUEST)
    assert raised.value.message == (
        "the provider answered with a body that is not a stream: it is an HTML page (check the "
        "base URL, or a proxy in between): Blocked"
    )


# A server that labels whatever it sends HTML (Flask's `Response`, Django's, a home-grown
# proxy) may stream events under that label: its first bytes, not the label, say whether it
# is a page, and the stream is read from them on.

EVENTS = [
    b"\n",
    b"da",
    b'ta: {"id":"c1","object":"chat.completion.chunk","created":1,"model":"gpt-4o-mini",'
    b'"choices":[{"index":0,"delta":{"role":"assistant","content":"h"},"finish_reason":null}]}'
    b"\n\n",
    b'data: {"id":"c1","object":"chat.completion.chunk","created":1,"model":"gpt-4o-mini",'
    b'"choices":[{"index":0,"delta":{"content":"i"},"finish_reason":"stop"}],'
    b'"usage":{"prompt_tokens":5,"completion_tokens":1,"total_tokens":6}}\n\n',
    b"data: [DONE]\n\n",
]


def _in_chunks(chunks: list[bytes], content_type: str) -> Transport:
    """A transport answering every request 200 with `chunks` as they arrive, one by one,
    labelled `content_type`."""

    def handler(request: httpx2.Request) -> httpx2.Response:
        return httpx2.Response(200, content=iter(chunks), headers={"content-type": content_type})

    async def each() -> AsyncIterator[bytes]:
        for chunk in chunks:
            yield chunk

    def ahandler(request: httpx2.Request) -> httpx2.Response:
        return httpx2.Response(200, content=each(), headers={"content-type": content_type})

    return Transport(
        client=httpx2.Client(transport=httpx2.MockTransport(handler)),
        async_client=httpx2.AsyncClient(transport=httpx2.MockTransport(ahandler)),
    )


@pytest.mark.parametrize("content_type", ["text/html; charset=utf-8", "application/xhtml+xml"])
def test_events_streamed_under_an_html_label_are_read_as_the_stream(content_type: str) -> None:
    provider = allama.provider(
        "openai", api_key="sk-abcdefgh", transport=_in_chunks(EVENTS, content_type)
    )

    def stream() -> tuple[str, int | None]:
        with provider.chat_stream(REQUEST) as events:
            for _ in events:
                pass
            response = events.response()
        return response.text(), response.usage.output_tokens

    async def astream() -> tuple[str, int | None]:
        events = await provider.achat_stream(REQUEST)
        async with events:
            async for _ in events:
                pass
            response = await events.response()
        return response.text(), response.usage.output_tokens

    assert stream() == ("hi", 1)
    assert asyncio.run(astream()) == ("hi", 1)


def test_a_sign_in_page_arriving_in_pieces_is_still_no_stream() -> None:
    page = [
        b"\xef\xbb\xbf",
        b"\r\n  <",
        b"!DOCTYPE html>\n<html><head><title>Sign in</title></head>",
        b"<body>Please log in</body></html>",
    ]
    provider = allama.provider(
        "openai", api_key="sk-abcdefgh", transport=_in_chunks(page, "text/html")
    )

    async def astream() -> None:
        await provider.achat_stream(REQUEST)

    for way, call in {
        "chat_stream": lambda: provider.chat_stream(REQUEST),
        "achat_stream": lambda: asyncio.run(astream()),
    }.items():
        with pytest.raises(ServerError) as raised:
            call()
        error = raised.value
        assert (error.message, error.retryable) == (
            "the provider answered with a body that is not a stream: it is an HTML page (check "
            "the base URL, or a proxy in between): Sign in",
            True,
        ), way
        assert error.context.body == b"".join(page).decode("utf-8-sig")
        assert paid_for(error) == [{"provider": "openai", "model": "gpt-4o-mini", "usage": {}}]


# A page that does not open as `html_heading` knows one (a comment, an XML declaration, a
# lone `<meta>` or `<title>` first), or one in UTF-16, is a page too under an HTML label:
# no stream opens with `<` (events open with a field's name or `:`, NDJSON with `{` or `[`),
# nor is in UTF-16.

_UTF16_PAGE = "\r\n<!DOCTYPE html><html><head><title>Sign in</title></head></html>"
UNOPENED_PAGES: dict[str, tuple[bytes, str, str]] = {
    # name: (body, its label, the text the error holds)
    "a comment first": (
        b"<!-- generated -->\n<!DOCTYPE html><html><head><title>Sign in</title></head></html>",
        "text/html; charset=utf-8",
        "<!-- generated -->\n<!DOCTYPE html><html><head><title>Sign in</title></head></html>",
    ),
    "an XML declaration first": (
        b'<?xml version="1.0" encoding="UTF-8"?>\n<!DOCTYPE html PUBLIC "-//W3C//DTD XHTML 1.0'
        b' Strict//EN" "http://www.w3.org/TR/xhtml1/DTD/xhtml1-strict.dtd">\n<html><head>'
        b"<title>Sign in</title></head></html>",
        "application/xhtml+xml",
        '<?xml version="1.0" encoding="UTF-8"?>\n<!DOCTYPE html PUBLIC "-//W3C//DTD XHTML 1.0'
        ' Strict//EN" "http://www.w3.org/TR/xhtml1/DTD/xhtml1-strict.dtd">\n<html><head>'
        "<title>Sign in</title></head></html>",
    ),
    "a refresh": (
        b'  <meta http-equiv="refresh" content="0; url=https://portal.example/login">',
        "text/html",
        '  <meta http-equiv="refresh" content="0; url=https://portal.example/login">',
    ),
    "a title first": (
        b"\xef\xbb\xbf<title>Access denied</title><h1>Forbidden</h1>",
        "text/html",
        "<title>Access denied</title><h1>Forbidden</h1>",
    ),
    "UTF-16 with its mark": (
        b"\xff\xfe" + _UTF16_PAGE.encode("utf-16-le"),
        "text/html; charset=utf-16",
        _UTF16_PAGE,
    ),
    "UTF-16BE with its mark": (
        b"\xfe\xff" + _UTF16_PAGE.encode("utf-16-be"),
        "text/html; charset=utf-16",
        _UTF16_PAGE,
    ),
    "UTF-16LE": (_UTF16_PAGE.encode("utf-16-le"), "text/html", _UTF16_PAGE),
    "UTF-16BE": (_UTF16_PAGE.encode("utf-16-be"), "text/html", _UTF16_PAGE),
}


@pytest.mark.parametrize("name", list(UNOPENED_PAGES))
def test_a_page_under_an_html_label_however_it_opens_is_no_stream(name: str) -> None:
    body, content_type, text = UNOPENED_PAGES[name]
    # Its first bytes one by one (a UTF-16 mark, or a NUL, may come alone), then the rest.
    chunks = [body[:1], body[1:2], body[2:]]
    provider = allama.provider(
        "openai", api_key="sk-abcdefgh", transport=_in_chunks(chunks, content_type)
    )

    async def astream() -> None:
        await provider.achat_stream(REQUEST)

    # The title where `html_heading` finds one (the UTF-16 pages', read as UTF-16).
    said = ": Sign in" if name.startswith("UTF-16") else ""
    for way, call in {
        "chat_stream": lambda: provider.chat_stream(REQUEST),
        "achat_stream": lambda: asyncio.run(astream()),
    }.items():
        with pytest.raises(ServerError) as raised:
            call()
        error = raised.value
        assert (type(error), error.message, error.retryable) == (
            ServerError,
            "the provider answered with a body that is not a stream: it is an HTML page (check "
            f"the base URL, or a proxy in between){said}",
            True,
        ), way
        assert error.context.body == text, way
        assert paid_for(error) == [{"provider": "openai", "model": "gpt-4o-mini", "usage": {}}]


@pytest.mark.parametrize(
    "chunks",
    [
        [b"d", b"a", *EVENTS[2:]],  # a field's name, its first byte alone
        [b":", b" keep-alive\n\n", *EVENTS[1:]],  # a comment first
    ],
    ids=["a field first", "a comment first"],
)
def test_events_under_an_html_label_whose_first_chunk_is_one_byte_are_the_stream(
    chunks: list[bytes],
) -> None:
    provider = allama.provider(
        "openai", api_key="sk-abcdefgh", transport=_in_chunks(chunks, "text/html")
    )
    with provider.chat_stream(REQUEST) as events:
        for _ in events:
            pass
        assert events.response().text() == "hi"


def test_a_404_in_the_providers_own_words_is_kept_as_they_are() -> None:
    body = {
        "error": {
            "message": "The model `gpt4o` does not exist or you do not have access to it.",
            "type": "invalid_request_error",
            "code": "model_not_found",
        }
    }
    provider = allama.provider(
        "vllm", api_key="EMPTY", base_url="http://h:8000", transport=_answering(404, body, [])
    )
    with pytest.raises(NotFoundError) as raised:
        provider.chat(REQUEST)
    assert raised.value.message == (
        "The model `gpt4o` does not exist or you do not have access to it."
    )


# A dummy key for a local server is not cut out of the provider's words; a real key is.


def test_a_short_dummy_key_leaves_the_providers_words_whole() -> None:
    body = {"error": {"message": 'model "llama3:latest" not found, try pulling it first'}}
    provider = allama.provider(
        "ollama-openai",
        api_key="test",
        base_url="http://h:11434/v1",
        transport=_answering(404, body, []),
    )
    with pytest.raises(NotFoundError) as raised:
        provider.chat(ChatRequest("llama3:latest").user("Hi"))
    assert raised.value.message == 'model "llama3:latest" not found, try pulling it first'

    too_long = {
        "type": "error",
        "error": {
            "type": "invalid_request_error",
            "message": "prompt is too long: 250000 tokens > 200000 maximum",
        },
    }
    provider = allama.provider(
        "anthropic", api_key="k", base_url="http://h", transport=_answering(400, too_long, [])
    )
    with pytest.raises(ContextWindowExceededError) as too_long_raised:
        provider.chat(ChatRequest("claude-sonnet-4-5").user("Hi"))
    assert too_long_raised.value.message == "prompt is too long: 250000 tokens > 200000 maximum"


@pytest.mark.parametrize(
    "options",
    [
        {"headers": {"Authorization": "Bearer test"}},
        {"headers": {"api-key": "test"}},
        {"api_key": "test"},
        {"access_token": "test"},
    ],
)
def test_a_short_dummy_credential_header_leaves_the_providers_words_whole(
    options: dict[str, Any],
) -> None:
    """A header a key goes in (`Authorization`, `api-key`) was looked for however short:
    `test` cut "llama3:latest" into "llama3:la<redacted>"."""
    body = {"error": {"message": "model 'llama3:latest' not found, try pulling it first"}}
    provider = allama.provider(
        "openai-compatible",
        base_url="http://h:11434/v1",
        transport=_answering(400, body, []),
        **options,
    )
    with pytest.raises(allama.InvalidRequestError) as raised:
        provider.chat(ChatRequest("llama3:latest").user("Hi"))
    assert raised.value.message == "model 'llama3:latest' not found, try pulling it first"


def test_a_real_key_echoed_is_redacted_wherever_it_stands() -> None:
    key = "sk-proj-Abcdefghijklmnopqrstu"
    body = {"error": {"message": f"Incorrect API key provided: {key}. And again:{key}x"}}
    provider = allama.provider("openai", api_key=key, transport=_answering(401, body, []))
    with pytest.raises(allama.Error) as raised:
        provider.chat(REQUEST)
    assert raised.value.message == ("Incorrect API key provided: <redacted>. And again:<redacted>x")


# `https://` to a server that speaks plain HTTP.


@pytest.fixture
def plain_http_port() -> Iterator[int]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server.server_address[1]
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


def test_https_to_a_plain_http_server_says_it_may_speak_plain_http(plain_http_port: int) -> None:
    port = plain_http_port
    # (OpenSSL names it WRONG_VERSION_NUMBER, and from 3.2 on RECORD_LAYER_FAILURE.)
    said = {
        f"could not connect to 127.0.0.1:{port} (ConnectError): the server answered the TLS "
        f"handshake with something else ({reason}): it may speak plain HTTP (try http:// in "
        "the base URL)"
        for reason in ("WRONG_VERSION_NUMBER", "RECORD_LAYER_FAILURE")
    }
    with allama.provider(
        "openai", api_key="sk-x", base_url=f"https://127.0.0.1:{port}/v1"
    ) as provider:
        with pytest.raises(NetworkError) as raised:
            provider.chat(REQUEST)
        assert str(raised.value) in said
        assert raised.value.retryable is False  # the same server would answer so again

    async def run() -> None:
        async with allama.provider(
            "openai", api_key="sk-x", base_url=f"https://127.0.0.1:{port}/v1"
        ) as provider:
            await provider.achat(REQUEST)

    with pytest.raises(NetworkError) as raised:
        asyncio.run(run())
    assert str(raised.value) in said
    assert raised.value.retryable is False
