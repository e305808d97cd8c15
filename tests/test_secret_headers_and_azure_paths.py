"""A gateway's credential in a header of its own name, a key echoed URL-encoded, and Azure
endpoint paths written in another case.

A caller reaching a provider through a gateway passes the gateway's credential in
`headers=` under the gateway's own name (Cloudflare AI Gateway's `cf-aig-authorization`,
Azure API Management's `Ocp-Apim-Subscription-Key`): a repr never shows it, and an error
echoing it has it cut out, as for the provider's key.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import httpx2
import pytest

import allama
from allama import ChatRequest, Error

GATEWAY_HEADERS = (
    "cf-aig-authorization",
    "Ocp-Apim-Subscription-Key",
    "x-portkey-api-key",
    "Proxy-Authorization",
    "Helicone-Auth",
)
ONE_WORD_HEADERS = (
    "X-AccessToken",
    "X-CSRFToken",
    "X-AppKey",
    "x-apitoken",
    "X-ClientSecret",
    "X-PrivateKey",
    "AccessKey",
)
"""Credential headers named as one word, which a word counted only at the start of a part
let through: their value was shown in a repr and echoed in errors."""
SECRET = "gw/secret-0123456"
PROVIDER_KEY = "sk-provider-0001"


class Endpoint:
    """A mock endpoint: every request answered the same, its URL and headers kept."""

    def __init__(self, status: int, body: str, kind: str = "application/json") -> None:
        self.status = status
        self.body = body
        self.kind = kind
        self.urls: list[str] = []
        self.headers: list[dict[str, str]] = []

    def __call__(self, request: httpx2.Request) -> httpx2.Response:
        request.read()
        self.urls.append(str(request.url))
        self.headers.append(dict(request.headers))
        headers = {"content-type": self.kind}
        return httpx2.Response(self.status, content=self.body.encode(), headers=headers)

    def transport(self) -> allama.Transport:
        return allama.Transport(
            client=httpx2.Client(transport=httpx2.MockTransport(self)),
            async_client=httpx2.AsyncClient(transport=httpx2.MockTransport(self)),
        )


def _failure(provider: Any, mode: str) -> Error:
    """The error a call made in `mode` raises."""
    request = ChatRequest("gpt-4o").user("Hi")

    async def achat() -> None:
        await provider.achat(request)

    async def astream() -> None:
        stream = await provider.achat_stream(request)
        async with stream:
            async for _ in stream:
                pass

    with pytest.raises(Error) as failed:
        if mode == "sync":
            provider.chat(request)
        elif mode == "stream":
            with provider.chat_stream(request) as stream:
                for _ in stream:
                    pass
        else:
            asyncio.run(achat() if mode == "async" else astream())
    return failed.value


@pytest.mark.parametrize("stream", [False, True])
@pytest.mark.parametrize("header", GATEWAY_HEADERS + ONE_WORD_HEADERS)
def test_the_request_repr_redacts_a_gateway_header(header: str, stream: bool) -> None:
    provider = allama.provider(
        "openai",
        api_key=PROVIDER_KEY,
        base_url="https://gw.example/v1",
        headers={header: f"Bearer {SECRET}", "x-trace-id": "trace-7"},
    )
    http, _ = provider._prepare(ChatRequest("gpt-4o").user("Hi"), stream=stream)
    accept = "text/event-stream" if stream else "application/json"
    keys = ["messages", "model", *(["stream", "stream_options"] if stream else [])]
    headers = {
        "content-type": "application/json",
        "accept": accept,
        "authorization": "<redacted>",
        header: "<redacted>",
        "x-trace-id": "trace-7",
    }
    assert repr(http) == (
        "HttpRequest(method='POST', url='https://gw.example/v1/chat/completions', "
        f"headers={headers!r}, body_keys={keys!r})"
    )
    provider.close()


@pytest.mark.parametrize("mode", ["sync", "async", "stream", "astream"])
@pytest.mark.parametrize("header", GATEWAY_HEADERS + ONE_WORD_HEADERS)
def test_a_gateway_header_echoed_in_an_error_is_redacted(header: str, mode: str) -> None:
    """Echoed as sent and as JSON escapes it (`\\/`); a short value of a header named
    `session` stays in the message, where it cannot be told from ordinary words."""
    escaped = SECRET.replace("/", "\\/")
    said = f"gateway refused Bearer {SECRET} ({escaped}) after 42 tries"
    body = json.dumps({"error": {"message": said, "type": "auth"}}).replace("\\\\/", "\\/")
    endpoint = Endpoint(401, body)
    provider = allama.provider(
        "openai",
        api_key=PROVIDER_KEY,
        base_url="https://gw.example/v1",
        headers={header: f"Bearer {SECRET}", "x-session-id": "42"},
        transport=endpoint.transport(),
    )
    error = _failure(provider, mode)
    assert str(error) == "gateway refused <redacted> (<redacted>) after 42 tries"
    assert error.context.body == (
        '{"error": {"message": "gateway refused <redacted> (<redacted>) after 42 tries", '
        '"type": "auth"}}'
    )
    # The gateway's header authenticates to the gateway alone: the provider's key goes too.
    sent = endpoint.headers[0]
    assert sent[header.lower()] == f"Bearer {SECRET}"
    assert sent["authorization"] == f"Bearer {PROVIDER_KEY}"
    provider.close()


@pytest.mark.parametrize("mode", ["stream", "astream"])
def test_a_gateway_header_echoed_in_a_stream_error_event_is_redacted(mode: str) -> None:
    chunk = {
        "id": "c",
        "object": "chat.completion.chunk",
        "created": 1,
        "model": "gpt-4o",
        "choices": [{"index": 0, "delta": {"content": "Hi"}, "finish_reason": None}],
    }
    failure = {"error": {"message": f"gateway key {SECRET} expired", "type": "auth"}}
    events = f"data: {json.dumps(chunk)}\n\ndata: {json.dumps(failure)}\n\n"
    endpoint = Endpoint(200, events, "text/event-stream")
    provider = allama.provider(
        "openai",
        api_key=PROVIDER_KEY,
        base_url="https://gw.example/v1",
        headers={"Ocp-Apim-Subscription-Key": SECRET},
        transport=endpoint.transport(),
    )
    error = _failure(provider, mode)
    assert str(error) == "gateway key <redacted> expired"
    assert error.context.body == (
        '{"error": {"message": "gateway key <redacted> expired", "type": "auth"}}'
    )
    provider.close()


URL_KEY = "sk-test/abc+def=123456~x"


@pytest.mark.parametrize("mode", ["sync", "async"])
@pytest.mark.parametrize(
    "echoed",
    [
        "sk-test%2Fabc%2Bdef%3D123456~x",  # quote(key, safe="")
        "sk-test/abc%2Bdef%3D123456~x",  # quote(key)
        "sk-test%2Fabc%2Bdef%3D123456%7Ex",  # quote_plus(key), as Java writes `~`
        "sk-test%2fabc%2bdef%3d123456~x",  # its hex in lower case
        "sk-test\\/abc%2Bdef%3D123456~x",  # quote(key) with `/` escaped as JSON may
    ],
)
@pytest.mark.parametrize("where", ["api_key", "access_token", "header"])
def test_a_credential_echoed_url_encoded_is_redacted(where: str, echoed: str, mode: str) -> None:
    """A gateway that says the URL it was asked (`?key=...`) writes the key as a URL does."""
    body = json.dumps({"error": {"message": f"bad credential {echoed} in /v1?key={echoed}"}})
    endpoint = Endpoint(401, body)
    options: dict[str, Any] = {
        "api_key": {"api_key": URL_KEY},
        "access_token": {"access_token": URL_KEY},
        "header": {"api_key": PROVIDER_KEY, "headers": {"cf-aig-authorization": URL_KEY}},
    }[where]
    provider = allama.provider(
        "openai", base_url="https://gw.example/v1", transport=endpoint.transport(), **options
    )
    error = _failure(provider, mode)
    assert str(error) == "bad credential <redacted> in /v1?key=<redacted>"
    assert error.context.body == (
        '{"error": {"message": "bad credential <redacted> in /v1?key=<redacted>"}}'
    )
    provider.close()


_AZURE_OK = json.dumps(
    {
        "id": "x",
        "object": "chat.completion",
        "created": 1,
        "model": "gpt-4o",
        "choices": [
            {"index": 0, "message": {"role": "assistant", "content": "Hi"}, "finish_reason": "stop"}
        ],
        "usage": {"prompt_tokens": 3, "completion_tokens": 1, "total_tokens": 4},
    }
)
_DEPLOYMENT = (
    "https://r.openai.azure.com/openai/deployments/dep/chat/completions?api-version=2024-10-21"
)


@pytest.mark.parametrize(
    ("endpoint_url", "sent"),
    [
        (
            "https://r.openai.azure.com/OpenAI/V1",
            "https://r.openai.azure.com/openai/v1/chat/completions",
        ),
        (
            "https://r.openai.azure.com/OpenAI/v1/",
            "https://r.openai.azure.com/openai/v1/chat/completions",
        ),
        (
            "https://r.openai.azure.com/openai/V1",
            "https://r.openai.azure.com/openai/v1/chat/completions",
        ),
        ("https://r.openai.azure.com/OpenAI", _DEPLOYMENT),
        ("https://r.openai.azure.com/OPENAI/", _DEPLOYMENT),
    ],
)
def test_an_azure_endpoint_path_in_another_case_is_the_same_path(
    endpoint_url: str, sent: str
) -> None:
    """Azure's paths know no case: `/OpenAI/V1` is the v1 API and `/OpenAI` the resource,
    not a resource whose deployment path is added after them."""
    endpoint = Endpoint(200, _AZURE_OK)
    provider = allama.provider(
        "azure-openai", endpoint=endpoint_url, api_key="k" * 10, transport=endpoint.transport()
    )
    provider.chat(ChatRequest("dep").user("Hi"))
    assert endpoint.urls == [sent]
    provider.close()


@pytest.mark.parametrize(
    "endpoint_url",
    [
        "https://r.openai.azure.com/OpenAI/V1",
        "https://r.openai.azure.com/OpenAI",
        "https://r.openai.azure.com/openai/V1",
    ],
)
def test_an_azure_endpoint_in_another_case_serves_the_responses_api(endpoint_url: str) -> None:
    provider = allama.provider(
        "azure-openai", endpoint=endpoint_url, api_key="k" * 10, api="responses"
    )
    assert provider.base_url == "https://r.openai.azure.com/openai/v1"
    provider.close()


_FOUNDRY = (
    "an endpoint ending in /models is Azure AI Foundry's model-inference API, which serves "
    "models of many families: use allama.provider('azure-foundry', endpoint=...)"
)


@pytest.mark.parametrize(
    "endpoint_url",
    [
        "https://r.openai.azure.com/Models",
        "https://r.openai.azure.com/MODELS/",
        "https://r.services.ai.azure.com/Models?api-version=2024-05-01-preview",
    ],
)
def test_an_azure_models_endpoint_in_any_case_is_refused_for_foundry(endpoint_url: str) -> None:
    """`/Models` is `/models`, Foundry's API: not a resource whose deployment path is added
    after it (`.../Models/openai/deployments/...`, which answers 404)."""
    with pytest.raises(ValueError) as refused:
        allama.provider("azure-openai", endpoint=endpoint_url, api_key="k" * 10)
    assert str(refused.value) == _FOUNDRY


@pytest.mark.parametrize("base_url", ["http://localhost:11434/V1", "http://localhost:11434/V1/"])
def test_an_ollama_base_url_ending_in_v1_in_any_case_is_refused(base_url: str) -> None:
    with pytest.raises(ValueError, match=r"ollama-openai"):
        allama.provider("ollama", base_url=base_url)


@pytest.mark.parametrize("preset", ["openai", "anthropic", "gemini"])
def test_a_job_targets_repr_shows_no_gateway_credential(preset: str) -> None:
    # A provider batch job's runner holds its target in its frames, which a traceback
    # shown with its locals prints.
    from allama.providers._jobs import provider_jobs

    made = allama.provider(
        preset,
        api_key="sk-key-1",
        headers={"cf-aig-authorization": "Bearer gw-LEAK-123456", "x-trace-id": "t-1"},
    )
    shown = repr(provider_jobs(made).target("m"))
    assert "LEAK" not in shown
    assert "'cf-aig-authorization': '<redacted>'" in shown
    assert "'x-trace-id': 't-1'" in shown


@pytest.mark.parametrize(
    ("name", "secret"),
    [
        ("Cf-Access-Jwt-Assertion", True),
        ("X-JWT-Assertion", True),
        ("x-amz-security-token", True),
        ("x-portkey-api-key", True),
        ("x-apikey", True),
        *((name, True) for name in GATEWAY_HEADERS),
        # A word ending a part counts as one beginning it: names written as one word.
        *((name, True) for name in ONE_WORD_HEADERS),
        ("X-Access-Token", True),
        ("x-accesstoken", True),
        ("X-Auth-Token", True),
        ("x-portkey-virtual-key", True),
        ("Authorization", True),
        ("X-Api-Key", True),
        # Parts of the name, not any letters: a provider, a trace or a session's name.
        ("x-portkey-provider", False),
        ("X-Portkey-Provider", False),
        ("x-portkey-trace-id", False),
        ("Helicone-Session-Name", False),
        ("x-trace-id", False),
        ("x-session-id", False),
        ("Content-Type", False),
        # A count of tokens, and keys that name a request or a cached answer, open nothing.
        ("x-max-tokens", False),
        ("Idempotency-Key", False),
        ("x-idempotency-key", False),
        ("cf-aig-cache-key", False),
    ],
)
def test_a_header_is_a_credential_by_the_parts_of_its_name(name: str, secret: bool) -> None:
    from allama.adapters._http import is_secret_header

    assert is_secret_header(name) is secret


def test_the_request_repr_shows_a_header_that_only_looks_like_a_credential() -> None:
    provider = allama.provider(
        "openai",
        api_key=PROVIDER_KEY,
        base_url="https://gw.example/v1",
        headers={
            "Idempotency-Key": "req-7f3a",
            "x-max-tokens": "256",
            "x-portkey-provider": "openai",
            "X-AppKey": SECRET,
        },
    )
    http, _ = provider._prepare(ChatRequest("gpt-4o").user("Hi"), stream=False)
    shown = repr(http)
    assert "'Idempotency-Key': 'req-7f3a'" in shown
    assert "'x-max-tokens': '256'" in shown
    assert "'x-portkey-provider': 'openai'" in shown
    assert "'X-AppKey': '<redacted>'" in shown
    assert SECRET not in shown
    provider.close()


def test_a_routing_headers_value_is_left_in_the_providers_words() -> None:
    def answer(request: httpx2.Request) -> httpx2.Response:
        message = "Model gpt-9 not found for provider openai. Check your openai settings"
        return httpx2.Response(404, json={"error": {"message": message, "code": "not_found"}})

    from allama.transport import Transport

    transport = Transport(client=httpx2.Client(transport=httpx2.MockTransport(answer)))
    made = allama.provider(
        "openai", api_key="sk-k", transport=transport, headers={"x-portkey-provider": "openai"}
    )
    with pytest.raises(allama.NotFoundError) as caught:
        made.chat(ChatRequest("gpt-9").user("hi"))
    assert str(caught.value) == (
        "Model gpt-9 not found for provider openai. Check your openai settings"
    )
