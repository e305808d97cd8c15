"""One HTTP provider class for every dialect: what sets endpoints apart is preset data, what
sets dialects apart is the adapter, and no provider code decides by a preset's name."""

from __future__ import annotations

import ast
import asyncio
import json
import sys
import types
from collections.abc import AsyncIterator, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import httpx2
import pytest

import allama
from allama import ChatRequest
from allama._degradations import Degradations
from allama.adapters._http import HttpRequest, HttpResponse
from allama.errors import Error, ServerError
from allama.providers import PRESETS, HttpProvider, Preset
from allama.transport import Transport
from allama.types import (
    BlockStop,
    CapabilitySupport,
    ChatCapability,
    ChatResponse,
    Finish,
    StreamEvent,
    TextDelta,
    TextPart,
    Warning,
)

PROVIDERS = Path(__file__).resolve().parents[1] / "src/allama/providers"


def _compares_a_name(node: ast.AST) -> bool:
    """`x.name == "..."`, `x.name in ("...", ...)` and their mirror images."""
    if not isinstance(node, ast.Compare):
        return False
    sides = [node.left, *node.comparators]
    named = any(isinstance(side, ast.Attribute) and side.attr == "name" for side in sides)
    literal = any(
        (isinstance(side, ast.Constant) and isinstance(side.value, str))
        or isinstance(side, ast.Tuple | ast.List | ast.Set)
        for side in sides
    )
    return named and literal


@pytest.mark.parametrize("path", sorted(PROVIDERS.glob("*.py")), ids=lambda p: p.name)
def test_no_provider_code_decides_by_a_preset_name(path: Path) -> None:
    tree = ast.parse(path.read_text())
    found = [node.lineno for node in ast.walk(tree) if _compares_a_name(node)]
    assert found == [], f"{path.name} compares a preset name at lines {found}"


@pytest.mark.parametrize("name", sorted(set(PRESETS) - {"local"}))
def test_every_preset_is_the_one_http_provider_with_its_dialects_adapter(name: str) -> None:
    target = allama.provider(name, api_key="k")
    assert isinstance(target, HttpProvider)
    assert type(target.adapter).__module__ == f"allama.adapters.{PRESETS[name].dialect}._adapter"


# A dialect nobody wrote yet: one adapter module, and a preset that names it.


class _EchoAdapter:
    """Answers every request with its model name, as plain text over a made-up wire."""

    display_name = "Echo"
    stream_accept = "application/x-echo"

    def __init__(self, profile: object) -> None:
        self.profile = profile

    def capability(self, model: str, capability: ChatCapability) -> CapabilitySupport:
        return CapabilitySupport.UNSUPPORTED

    def path(self, model: str, *, stream: bool) -> tuple[str, Mapping[str, str]]:
        return (f"/echo/{model}", {"stream": "1"} if stream else {})

    def encode(
        self,
        request: ChatRequest,
        degradations: Degradations,
        *,
        stream: bool,
        url: str,
        headers: Mapping[str, str],
        params: Mapping[str, str],
    ) -> HttpRequest:
        return HttpRequest("POST", url, headers, {"say": request.model}, params)

    def decode(
        self,
        response: HttpResponse,
        *,
        provider: str,
        model: str,
        warnings: Sequence[Warning],
    ) -> ChatResponse:
        if response.status >= 400:
            raise self.error(
                response.status, response.headers, response.content, provider=provider, model=model
            )
        return ChatResponse(
            (TextPart(text=response.content.decode()),), provider=provider, model=model
        )

    def error(
        self, status: int, headers: Mapping[str, str], body: bytes, *, provider: str, model: str
    ) -> Error:
        return ServerError(f"echo failed with {status}").with_provider(provider)

    def stream_decoder(self, *, provider: str, model: str) -> Any:
        class Decoder:
            done = False

            def feed(self, chunk: bytes) -> Iterator[StreamEvent]:
                yield TextDelta(index=0, text=chunk.decode())

            def close(self) -> Iterator[StreamEvent]:
                yield BlockStop(index=0)
                yield Finish(finish_reason="stop")

        return Decoder()


@pytest.fixture
def echo_dialect() -> Iterator[Preset]:
    package = types.ModuleType("allama.adapters.echo")
    module = types.ModuleType("allama.adapters.echo._adapter")
    module.make_adapter = lambda name, profile, capabilities: _EchoAdapter(profile)  # type: ignore[attr-defined]
    sys.modules["allama.adapters.echo"] = package
    sys.modules["allama.adapters.echo._adapter"] = module
    yield Preset(
        "echo",
        object(),
        "https://echo.example.com/api",
        "ECHO_KEY",
        auth="x-api-key",
        dialect="echo",
        headers={"echo-version": "1"},
    )
    del sys.modules["allama.adapters.echo"], sys.modules["allama.adapters.echo._adapter"]


def test_a_new_dialect_is_an_adapter_and_a_preset_not_a_provider_class(
    echo_dialect: Preset,
) -> None:
    seen: list[httpx2.Request] = []

    def handler(request: httpx2.Request) -> httpx2.Response:
        seen.append(request)
        if request.url.params.get("stream") == "1":
            return httpx2.Response(200, content=b"streamed")
        return httpx2.Response(200, content=request.read())

    client = httpx2.Client(transport=httpx2.MockTransport(handler))
    target = HttpProvider(echo_dialect, api_key="secret-key", transport=Transport(client=client))
    response = target.chat(ChatRequest("m1").user("Hi"))
    assert response.text() == '{"say":"m1"}'
    assert str(seen[0].url) == "https://echo.example.com/api/echo/m1"
    assert seen[0].headers["x-api-key"] == "secret-key"
    assert seen[0].headers["echo-version"] == "1"
    with target.chat_stream(ChatRequest("m2").user("Hi")) as stream:
        events = list(stream)
    assert seen[1].headers["accept"] == "application/x-echo"
    assert str(seen[1].url) == "https://echo.example.com/api/echo/m2?stream=1"
    assert [type(event) for event in events] == [TextDelta, BlockStop, Finish]
    assert target.chat_capability("m1", ChatCapability.STREAMING) is CapabilitySupport.UNSUPPORTED
    client.close()


def test_the_former_name_is_the_same_class() -> None:
    assert allama.OpenAICompatibleProvider is allama.HttpProvider


def test_a_capability_table_of_another_dialect_is_refused() -> None:
    from allama.adapters.openai_compat import CAPABILITY_TABLES

    with pytest.raises(
        TypeError, match="capabilities must be a ClaudeTable of the Messages dialect"
    ):
        allama.provider("anthropic", capabilities=CAPABILITY_TABLES["openai"])


def test_a_repr_masks_credentials_written_into_the_base_url() -> None:
    import allama

    shown = {
        "https://user:s3cret@gateway.example/v1?key=abc123": (
            "https://user:***@gateway.example/v1?***"
        ),
        "https://t0ken@gateway.example/v1": "https://***@gateway.example/v1",
        "https://api.openai.com/v1": "https://api.openai.com/v1",
    }
    for url, masked in shown.items():
        provider = allama.provider("openai", api_key="sk-secret", base_url=url)
        text = repr(provider)
        assert text == f"HttpProvider(name='openai', base_url='{masked}', api_key=<set>)"
        assert "s3cret" not in text and "abc123" not in text and "t0ken" not in text
        # The URL calls go to holds no user (sent as Basic auth); the URL as given, which
        # makes the same provider again (a job's record), holds it.
        assert "@" not in (provider.base_url or "") and provider.base_url_as_given == url
        provider.close()


def test_a_base_url_with_an_empty_user_and_password_sends_the_key() -> None:
    import allama

    for url in ("http://@gateway.example/v1", "http://:@gateway.example/v1"):
        provider = allama.provider("openai", api_key="sk-secret", base_url=url)
        # As httpx2 reads it: no user, no Basic auth; the key goes as it would.
        assert provider._headers(stream=False)["authorization"] == "Bearer sk-secret"
        assert provider.base_url == "http://gateway.example/v1"
        provider.close()
        keyless = allama.provider("openai", base_url=url)
        assert keyless.missing_key() is not None
        keyless.close()


def test_a_short_password_in_the_base_url_is_redacted_as_its_basic_header_alone() -> None:
    import base64

    import allama

    provider = allama.provider("openai", base_url="http://u:e@gateway.example/v1")
    token = base64.b64encode(b"u:e").decode()
    # `e` alone would be cut out of every word of a message: its header is looked for.
    assert provider._secrets() == [f"Basic {token}", token]
    provider.close()
    longer = allama.provider("openai", base_url="http://u:s3cr%40t-pw@gateway.example/v1")
    assert {"s3cr%40t-pw", "s3cr@t-pw"} <= set(longer._secrets())
    longer.close()
    # Counted as the provider would echo it: `%65%65` is `ee`.
    escaped = allama.provider("openai", base_url="http://u:%65%65@gateway.example/v1")
    token = base64.b64encode(b"u:ee").decode()
    assert escaped._secrets() == [f"Basic {token}", token]
    escaped.close()


def test_a_query_in_the_base_url_a_provider_echoes_is_redacted() -> None:
    """A gateway that says the URL it was asked in its error (`Invalid URL (POST
    /v1/chat/completions?key=...)`) wrote the key into the message, the body and the
    request id a caller logs. A parameter that is no credential (`api-version`) stays: its
    value is an ordinary word of the message."""
    said = (
        "Invalid URL (POST /v1/chat/completions?key=LEAKQ&code=gw%2Fsecret-9&api-version="
        "2024-10-21); api-version 2024-10-21 is retired"
    )
    body = json.dumps({"error": {"message": said}})

    def handler(request: httpx2.Request) -> httpx2.Response:
        headers = {"content-type": "application/json", "x-request-id": "req-gw/secret-9"}
        return httpx2.Response(404, headers=headers, content=body)

    transport = allama.Transport(client=httpx2.Client(transport=httpx2.MockTransport(handler)))
    # (`code`: an Azure Functions key, whose name says nothing of one)
    url = "https://gateway.example/v1?key=LEAKQ&code=gw/secret-9&api-version=2024-10-21"
    provider = allama.provider("openai", api_key="k", base_url=url, transport=transport)
    with pytest.raises(Error) as failed:
        provider.chat(ChatRequest("gpt-4o-mini").user("Hi"))
    error = failed.value
    shown = [str(error), error.context.body or "", repr(error), str(error.as_log())]
    shown.append(json.dumps(error.to_json()))
    for text in shown:
        assert "LEAKQ" not in text and "secret-9" not in text
    assert str(error) == (
        "Invalid URL (POST /v1/chat/completions?<redacted>&<redacted>&api-version=2024-10-21); "
        "api-version 2024-10-21 is retired"
    )
    assert error.context.request_id == "req-<redacted>"


@pytest.mark.parametrize(
    ("options", "echoed"),
    [
        ({"api_key": "sk-LEAK/KEY+9/x"}, "sk-LEAK\\/KEY+9\\/x"),
        ({"headers": {"Authorization": "Bearer sk-LEAK/KEY+9/x"}}, "sk-LEAK\\/KEY+9\\/x"),
        ({"base_url": "https://u:LEAK%2FPASS-99@gw.example/v1"}, "LEAK\\/PASS-99"),
        ({"base_url": "https://u:LEAK-%C3%A9t%C3%A9-pw@gw.example/v1"}, "LEAK-\\u00e9t\\u00e9-pw"),
        # `/` and non-ASCII: escaped one way and not the other, as cjson and Python write.
        ({"base_url": "https://u:LEAK-%C3%A9%2Fpw-9@gw.example/v1"}, "LEAK-\u00e9\\/pw-9"),
        ({"base_url": "https://u:LEAK-%C3%A9%2Fpw-9@gw.example/v1"}, "LEAK-\\u00e9/pw-9"),
    ],
)
def test_a_credential_echoed_as_json_escapes_it_is_redacted(
    options: dict[str, Any], echoed: str
) -> None:
    """A gateway writing JSON with `/` escaped (PHP's `json_encode`, Lua's cjson) or
    non-ASCII as `\\u` escapes echoes a key, a token or a URL's password so."""
    body = '{"error": {"message": "bad credential ' + echoed + '"}}'

    def handler(request: httpx2.Request) -> httpx2.Response:
        return httpx2.Response(401, headers={"content-type": "application/json"}, content=body)

    transport = allama.Transport(client=httpx2.Client(transport=httpx2.MockTransport(handler)))
    settings = {"base_url": "https://gw.example/v1", **options}
    provider = allama.provider("openai-compatible", transport=transport, **settings)
    with pytest.raises(Error) as failed:
        provider.chat(ChatRequest("m").user("Hi"))
    error = failed.value
    for text in (str(error), error.context.body or "", json.dumps(error.to_json())):
        assert "LEAK" not in text
    assert str(error) == "bad credential <redacted>"


def test_httpx2s_log_masks_the_query_of_calls_to_a_base_urls_host() -> None:
    import logging

    import allama

    provider = allama.provider(
        "gemini", api_key="k", base_url="https://gw-log.example/v1beta?key=gw-secret"
    )

    def logged(url: str) -> str:
        record = logging.LogRecord(
            "httpx2",
            logging.INFO,
            __file__,
            1,
            'HTTP Request: %s %s "%s %d %s"',
            ("POST", httpx2.URL(url), "HTTP/1.1", 200, "OK"),
            None,
        )
        assert all(check.filter(record) for check in logging.getLogger("httpx2").filters)
        return record.getMessage()

    # A job's file, under the host's root rather than the base URL's path, too.
    for path in ("/v1beta/models/m:generateContent", "/upload/v1beta/files"):
        assert logged(f"https://GW-LOG.example:443{path}?key=gw-secret") == (
            f'HTTP Request: POST https://gw-log.example{path}?*** "HTTP/1.1 200 OK"'
        )
    other = "https://elsewhere.example/v1?page=2"
    assert logged(other) == f'HTTP Request: POST {other} "HTTP/1.1 200 OK"'
    provider.close()


def test_what_a_base_url_gave_goes_to_its_host_alone_in_job_calls() -> None:
    import allama
    from allama.adapters._jobs import get, post
    from allama.providers._jobs import provider_jobs

    provider = allama.provider(
        "anthropic", api_key="sk-ant", base_url="https://u:pw-123456@gw.example/v1?key=gw"
    )
    target = provider_jobs(provider).target("claude-sonnet-4-5")
    here = get(target, "https://gw.example/v1/messages/batches")
    assert here.headers["Authorization"].startswith("Basic ") and here.params == {"key": "gw"}
    # A results file at another host the answer named: the API key goes, as it must; the
    # gateway's user, password and query do not.
    there = get(target, "https://api.anthropic.com/v1/messages/batches/b1/results")
    assert "Authorization" not in there.headers and there.headers["x-api-key"] == "sk-ant"
    assert there.params == {}
    made = post(target, "https://elsewhere.example/v1/x", {})
    assert "Authorization" not in made.headers and made.params == {}
    # The same host however written (a default port, a trailing dot, in capitals); not in
    # plain HTTP, where the gateway's password would go unencrypted.
    for same in ("https://gw.example:443/v1/files/f1", "https://GW.example./v1/files/f1"):
        assert get(target, same).headers["Authorization"].startswith("Basic ")
    plain = get(target, "http://gw.example/v1/files/f1")
    assert "Authorization" not in plain.headers and plain.params == {}
    provider.close()
    # From plain HTTP to HTTPS on the same host, nothing is less safe: they go.
    upgraded = allama.provider(
        "anthropic", api_key="sk-ant", base_url="http://u:pw-123456@gw.example/v1?key=gw"
    )
    there = get(provider_jobs(upgraded).target("m"), "https://gw.example/v1/results")
    assert there.headers["Authorization"].startswith("Basic ") and there.params == {"key": "gw"}
    upgraded.close()


def test_a_query_in_the_base_url_goes_with_each_calls_own_parameters() -> None:
    import allama

    seen: list[httpx2.Request] = []

    def handler(request: httpx2.Request) -> httpx2.Response:
        seen.append(request)
        return httpx2.Response(400, json={"error": {"message": "no"}})

    transport = Transport(client=httpx2.Client(transport=httpx2.MockTransport(handler)))
    provider = allama.provider(
        "azure",
        api_key="sk-test",
        base_url="https://gateway.example?key=abc123&team=a",
        transport=transport,
    )
    with pytest.raises(allama.Error):
        provider.chat(ChatRequest("gpt-4o").user("Hi"))
    (request,) = seen
    assert request.url.path == "/openai/deployments/gpt-4o/chat/completions"
    assert dict(request.url.params) == {
        "key": "abc123",
        "team": "a",
        "api-version": provider._query["api-version"],
    }
    assert provider.base_url == "https://gateway.example"
    assert "abc123" not in repr(provider) and "?***" in repr(provider)
    provider.close()


def _answering_mislabelled(status: int, body: bytes) -> HttpProvider:
    """OpenAI's preset over a transport answering `status` with `body` labelled gzip, as a
    stream the client decodes as it reads it (content given whole is decoded at once)."""

    def handler(request: httpx2.Request) -> httpx2.Response:
        mislabelled = httpx2.ByteStream(body)
        return httpx2.Response(status, headers={"content-encoding": "gzip"}, stream=mislabelled)

    transport = Transport(
        client=httpx2.Client(transport=httpx2.MockTransport(handler)),
        async_client=httpx2.AsyncClient(transport=httpx2.MockTransport(handler)),
    )
    return allama.provider("openai", api_key="sk-test", transport=transport)


def test_a_body_its_content_encoding_does_not_decode_is_a_server_error_to_try_again() -> None:
    import asyncio

    # A proxy that labels a plain body gzip: the provider answered, with a body that cannot
    # be read. An allama error, tried again (not httpx2's, nor a network failure).
    provider = _answering_mislabelled(200, b'{"choices": []}')
    request = ChatRequest("gpt-4o-mini").user("Hi")
    message = (
        "the response from api.openai.com:443 could not be decoded: its Content-Encoding "
        "does not match its body (DecodingError)"
    )
    with pytest.raises(ServerError) as raised:
        provider.chat(request)
    assert (raised.value.message, raised.value.retryable) == (message, True)
    with pytest.raises(ServerError) as raised:
        asyncio.run(provider.achat(request))
    assert (raised.value.message, raised.value.retryable) == (message, True)
    with pytest.raises(ServerError) as raised, provider.chat_stream(request) as stream:
        list(stream)
    assert raised.value.message == message


class _CutOff(httpx2.SyncByteStream, httpx2.AsyncByteStream):
    """A body that ends before its length: the connection closed halfway through it."""

    def __iter__(self) -> Iterator[bytes]:
        yield b'{"id": "c1", "object": "chat.completion", '
        raise httpx2.RemoteProtocolError("peer closed connection without sending body")

    async def __aiter__(self) -> AsyncIterator[bytes]:
        for chunk in self:
            yield chunk


def _cut_off(status: int) -> HttpProvider:
    def handler(request: httpx2.Request) -> httpx2.Response:
        return httpx2.Response(status, headers={"content-length": "400"}, stream=_CutOff())

    transport = Transport(
        client=httpx2.Client(transport=httpx2.MockTransport(handler)),
        async_client=httpx2.AsyncClient(transport=httpx2.MockTransport(handler)),
    )
    return allama.provider("openai", api_key="sk-test", transport=transport)


def test_an_answer_cut_off_after_its_status_was_made_and_its_cost_is_unknown() -> None:
    """It was a network failure that paid nothing: a batch run said the provider "could not
    be reached", counted it free under a budget, and a run again sent it again."""
    import asyncio

    from pydantic import BaseModel

    from allama.errors import paid_for

    class Row(BaseModel):
        n: int

    provider = _cut_off(200)
    request = ChatRequest("gpt-4o-mini").user("Hi")
    message = (
        "the answer from api.openai.com:443 was cut off after its status (200) "
        "(RemoteProtocolError)"
    )
    for call in (lambda: provider.chat(request), lambda: asyncio.run(provider.achat(request))):
        with pytest.raises(ServerError) as raised:
            call()
        assert (raised.value.message, raised.value.retryable) == (message, True)
        assert paid_for(raised.value) == [
            {"provider": "openai", "model": "gpt-4o-mini", "usage": {}}
        ]
    run = allama.batch(provider, Row, ["doc"], request=request, max_attempts=2, backoff=0)
    (result,) = list(run)
    assert result.failure is not None and result.failure.kind == "server"
    assert result.metadata is not None and result.metadata.cost is None
    assert result.metadata.cost_missing == (
        "no token counts came with a call that was made (its answer cut off, say)"
    )
    assert (run.summary.attempts, run.summary.cost_unknown, run.summary.refused) == (2, 1, None)
    # Streamed, a stream cut mid-way (a network failure, as it was), but made, and maybe
    # billed; a refused key's cut-off error body was a network failure to try again.
    from allama.errors import NetworkError

    with pytest.raises(NetworkError) as cut, provider.chat_stream(request) as stream:
        list(stream)
    assert cut.value.retryable
    assert [entry["usage"] for entry in paid_for(cut.value)] == [{}]
    # A streamed extraction's record says so too: it said "no usage was reported", the
    # reason of a call refused unpaid, which a batch run counts free.
    from allama.extract._metadata import ExtractionMetadata

    with pytest.raises(NetworkError) as cut, allama.extract_stream(provider, Row, request) as s:
        list(s)
    record = ExtractionMetadata.from_error(cut.value)
    # Paid (a usage, of no counts), at a cost unknown.
    assert record is not None and record.usage == allama.Usage() and record.cost is None
    # An error status cut off is read by its status, as one whose body does not decode.
    from allama.errors import AuthenticationError

    with pytest.raises(AuthenticationError):
        _cut_off(401).chat(request)
    with pytest.raises(AuthenticationError):
        _cut_off(401).chat_stream(request)


def _streaming(body: bytes) -> Any:
    def handler(request: httpx2.Request) -> httpx2.Response:
        return httpx2.Response(200, headers={"content-type": "text/event-stream"}, content=body)

    transport = allama.Transport(
        client=httpx2.Client(transport=httpx2.MockTransport(handler)),
        async_client=httpx2.AsyncClient(transport=httpx2.MockTransport(handler)),
    )
    return allama.provider("openai", api_key="sk-test", transport=transport)


def test_a_stream_that_fails_after_its_answer_began_was_made_and_its_cost_is_unknown() -> None:
    """As one the network cuts: a stream whose body ended cleanly before its finish, or
    that sent an error object, after the model began writing, was recorded as costing
    nothing ("no usage was reported"), which a batch run's budget counted free."""
    import asyncio

    from pydantic import BaseModel

    from allama.errors import IncompleteStreamError, paid_for
    from allama.extract._metadata import ExtractionMetadata

    class Row(BaseModel):
        n: int

    began = b'data: {"choices":[{"index":0,"delta":{"content":"{\\"n\\": "}}]}\n\n'
    error = b'data: {"error":{"message":"The server had an error","type":"server_error"}}\n\n'
    request = ChatRequest("gpt-4o-mini").user("Hi")
    for body, kind in ((began, IncompleteStreamError), (began + error, ServerError)):
        provider = _streaming(body)
        with pytest.raises(kind) as failed:
            list(allama.extract_stream(provider, Row, request))
        record = ExtractionMetadata.from_error(failed.value)
        assert record is not None and record.usage == allama.Usage() and record.cost is None
        # One call, made, its token counts unknown: one charge (not a second with no usage).
        assert record.cost_missing == (
            "no token counts came with a call that was made (its answer cut off, say)"
        )

        async def read(provider: Any = provider) -> None:
            async with await allama.aextract_stream(provider, Row, request) as stream:
                async for _ in stream:
                    pass

        with pytest.raises(kind) as failed:
            asyncio.run(read())
        record = ExtractionMetadata.from_error(failed.value)
        assert record is not None and record.usage == allama.Usage()
        if kind is ServerError:  # read without an extraction, the error says it too
            with pytest.raises(ServerError) as failed, provider.chat_stream(request) as stream:
                list(stream)
            assert [entry["usage"] for entry in paid_for(failed.value)] == [{}]
    # Before any of the answer, nothing says it was billed: a failure paid for nothing.
    with pytest.raises(ServerError) as failed:
        list(allama.extract_stream(_streaming(error), Row, request))
    record = ExtractionMetadata.from_error(failed.value)
    assert record is not None and record.usage is None


def test_a_stream_read_without_an_extraction_says_what_it_paid_in_its_error() -> None:
    """An Anthropic stream's usage comes first (`message_start`): an error after its answer
    began said nothing paid to a caller reading the stream, where an extraction's record,
    and a retry's count, said the usage."""
    from allama.errors import OverloadedError, paid_for

    events = [
        (
            "message_start",
            {
                "type": "message_start",
                "message": {
                    "id": "msg_1",
                    "type": "message",
                    "role": "assistant",
                    "model": "claude-sonnet-4-5",
                    "content": [],
                    "usage": {"input_tokens": 25, "output_tokens": 1},
                },
            },
        ),
        (
            "content_block_start",
            {
                "type": "content_block_start",
                "index": 0,
                "content_block": {"type": "text", "text": ""},
            },
        ),
        (
            "content_block_delta",
            {
                "type": "content_block_delta",
                "index": 0,
                "delta": {"type": "text_delta", "text": "Hel"},
            },
        ),
        ("error", {"type": "error", "error": {"type": "overloaded_error", "message": "x"}}),
    ]
    body = "".join(f"event: {name}\ndata: {json.dumps(data)}\n\n" for name, data in events)

    def handler(request: httpx2.Request) -> httpx2.Response:
        return httpx2.Response(200, headers={"content-type": "text/event-stream"}, content=body)

    transport = allama.Transport(client=httpx2.Client(transport=httpx2.MockTransport(handler)))
    provider = allama.provider("anthropic", api_key="sk-ant-test", transport=transport)
    request = ChatRequest("claude-sonnet-4-5").user("Hi")
    with pytest.raises(OverloadedError) as failed, provider.chat_stream(request) as stream:
        list(stream)
    # (The output tokens `message_start` says are not its answer's: none are known.)
    assert [entry["usage"] for entry in paid_for(failed.value)] == [{"input_tokens": 25}]


def test_an_error_status_whose_body_does_not_decode_is_read_by_its_status() -> None:
    import asyncio

    from allama.errors import AuthenticationError

    # A refused key answered with a mislabelled body is a refused key (sent once), not a
    # server error to try again.
    provider = _answering_mislabelled(401, b"no")
    request = ChatRequest("gpt-4o-mini").user("Hi")
    with pytest.raises(AuthenticationError) as raised:
        provider.chat(request)
    assert not raised.value.retryable and raised.value.context.status == 401
    with pytest.raises(AuthenticationError):
        asyncio.run(provider.achat(request))
    with pytest.raises(AuthenticationError):
        provider.chat_stream(request)


_ANTHROPIC_OVERLOADED_MIDWAY = [
    {
        "type": "message_start",
        "message": {
            "id": "msg_1",
            "type": "message",
            "role": "assistant",
            "model": "claude-sonnet-4-5",
            "content": [],
            "stop_reason": None,
            "stop_sequence": None,
            "usage": {"input_tokens": 50, "output_tokens": 1},
        },
    },
    {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
    {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "Hel"}},
    {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}},
]
_OPENAI_FAILED_MIDWAY = [
    {
        "id": "c",
        "object": "chat.completion.chunk",
        "model": "gpt-4o",
        "choices": [
            {"index": 0, "delta": {"role": "assistant", "content": "Hel"}, "finish_reason": None}
        ],
    },
    {"error": {"message": "The server had an error", "type": "server_error"}},
]


@pytest.mark.parametrize(
    ("preset", "header", "events"),
    [
        ("anthropic", "request-id", _ANTHROPIC_OVERLOADED_MIDWAY),
        ("openai", "x-request-id", _OPENAI_FAILED_MIDWAY),
    ],
)
def test_an_error_inside_a_stream_names_the_request_of_its_response(
    preset: str, header: str, events: list[dict[str, Any]]
) -> None:
    """The error event of a stream names no request (Anthropic's documented shape has no
    `request_id`): the response's header does, as an HTTP error's does, and support asks
    for it."""
    body = "".join(
        (f"event: {event['type']}\n" if preset == "anthropic" else "")
        + f"data: {json.dumps(event)}\n\n"
        for event in events
    ).encode()

    def handler(request: httpx2.Request) -> httpx2.Response:
        headers = {"content-type": "text/event-stream", header: "req_01Midway"}
        return httpx2.Response(200, content=body, headers=headers)

    transport = Transport(
        client=httpx2.Client(transport=httpx2.MockTransport(handler)),
        async_client=httpx2.AsyncClient(transport=httpx2.MockTransport(handler)),
    )
    provider = allama.provider(preset, api_key="k", transport=transport)
    request = ChatRequest("claude-sonnet-4-5" if preset == "anthropic" else "gpt-4o").user("hi")
    with pytest.raises(Error) as caught, provider.chat_stream(request) as stream:
        for _ in stream:
            pass
    assert caught.value.request_id == "req_01Midway"

    async def read() -> None:
        async with await provider.achat_stream(request) as stream:
            async for _ in stream:
                pass

    with pytest.raises(Error) as caught_async:
        asyncio.run(read())
    assert caught_async.value.request_id == "req_01Midway"
