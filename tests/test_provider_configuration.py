"""How a provider is configured: which credentials go out beside the caller's own headers,
values from the environment and from arguments, Azure's endpoint forms and api-version,
Vertex AI's hosts and express mode, values a header cannot carry, proxies the environment
sets, and `GOOGLE_GEMINI_BASE_URL` as google-genai reads it. Every test checks what is
sent, through a mock transport."""

from __future__ import annotations

import asyncio
import importlib.util
import itertools
import threading
import warnings
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from typing import Any, cast

import httpx2
import pytest

import allama
from allama import ChatRequest
from allama.errors import InvalidRequestError
from allama.providers import PRESETS, HttpProvider
from allama.transport import Transport

SECRET = "sk-live-SECRET-123456"

_PROXY_VARS = ("ALL_PROXY", "HTTPS_PROXY", "HTTP_PROXY", "NO_PROXY", "REQUEST_METHOD")


@pytest.fixture(autouse=True)
def clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """No preset's variable (key, base URL, api-version, account, project, location) nor a
    proxy leaks in from the machine running the tests."""
    names: set[str] = set()
    for preset in PRESETS.values():
        names.update(name for name in preset.key_envs if name)
        names.update(name for name in (preset.base_url_env, preset.api_version_env) if name)
        names.update(name for name in (preset.account_env,) if name)
        names.update((*preset.project_envs, *preset.location_envs))
    for name in (*names, *_PROXY_VARS):
        monkeypatch.delenv(name, raising=False)
        monkeypatch.delenv(name.lower(), raising=False)


_BODIES: dict[str, dict[str, Any]] = {
    "chat": {
        "id": "c1",
        "object": "chat.completion",
        "created": 1,
        "model": "m",
        "choices": [
            {"index": 0, "message": {"role": "assistant", "content": "hi"}, "finish_reason": "stop"}
        ],
        "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
    },
    "messages": {
        "id": "msg_1",
        "type": "message",
        "role": "assistant",
        "model": "m",
        "content": [{"type": "text", "text": "hi"}],
        "stop_reason": "end_turn",
        "usage": {"input_tokens": 1, "output_tokens": 1},
    },
    "gemini": {
        "candidates": [
            {"content": {"role": "model", "parts": [{"text": "hi"}]}, "finishReason": "STOP"}
        ]
    },
    "responses": {
        "id": "resp_1",
        "object": "response",
        "status": "completed",
        "model": "m",
        "output": [
            {
                "type": "message",
                "id": "msg_1",
                "role": "assistant",
                "status": "completed",
                "content": [{"type": "output_text", "text": "hi", "annotations": []}],
            }
        ],
        "usage": {"input_tokens": 1, "output_tokens": 1, "total_tokens": 2},
    },
}


def _body(url: str) -> dict[str, Any]:
    path = httpx2.URL(url).path
    if path.endswith("/messages"):
        return _BODIES["messages"]
    if path.endswith(":generateContent"):
        return _BODIES["gemini"]
    if path.endswith("/responses"):
        return _BODIES["responses"]
    return _BODIES["chat"]


class _Wire:
    """A transport that answers every call with a well-formed body of its dialect, and
    keeps what was sent."""

    def __init__(self) -> None:
        self.seen: list[httpx2.Request] = []

        def handler(request: httpx2.Request) -> httpx2.Response:
            self.seen.append(request)
            return httpx2.Response(200, json=_body(str(request.url)))

        self.transport = Transport(client=httpx2.Client(transport=httpx2.MockTransport(handler)))

    def send(self, name: str, model: str = "m", **options: Any) -> httpx2.Request:
        """The one request a chat of `model` on `provider(name, **options)` sends."""
        target = allama.provider(name, transport=self.transport, **options)
        target.chat(ChatRequest(model).user("Hi"))
        assert len(self.seen) == 1
        return self.seen.pop()


def _credentials(request: httpx2.Request) -> dict[str, str]:
    """The credential headers sent, by lower-cased name."""
    wanted = ("authorization", "api-key", "x-api-key", "x-goog-api-key")
    return {name: request.headers[name] for name in wanted if name in request.headers}


@pytest.fixture
def wire() -> Iterator[_Wire]:
    yield _Wire()


# 1. Credentials in the caller's headers stand in for a key from the environment


@pytest.mark.parametrize(
    ("name", "env", "options", "model"),
    [
        # Azure answers 400 to `api-key` and `Authorization` together.
        ("azure-openai", "AZURE_OPENAI_API_KEY", {"endpoint": "https://res.openai.azure.com"}, "d"),
        (
            "azure-foundry",
            "AZURE_INFERENCE_CREDENTIAL",
            {"endpoint": "https://res.services.ai.azure.com/models"},
            "d",
        ),
        # A gateway in front of Anthropic must not be handed Anthropic's own key.
        ("anthropic", "ANTHROPIC_API_KEY", {"base_url": "https://gateway.example.net"}, "claude"),
        ("gemini", "GEMINI_API_KEY", {}, "gemini-2.5-flash"),
        ("openai", "OPENAI_API_KEY", {}, "gpt-4o"),
    ],
)
def test_an_environment_key_is_not_sent_beside_credentials_in_headers(
    wire: _Wire, monkeypatch: pytest.MonkeyPatch, name: str, env: str, options: Any, model: str
) -> None:
    monkeypatch.setenv(env, "ENV-KEY-987654")
    sent = wire.send(name, model, headers={"Authorization": "Bearer OWN-TOKEN"}, **options)
    assert _credentials(sent) == {"authorization": "Bearer OWN-TOKEN"}


def test_an_environment_key_is_not_sent_beside_a_key_header_of_the_callers(
    wire: _Wire, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "ENV-KEY-987654")
    sent = wire.send("openai", headers={"api-key": "GATEWAY-KEY"})
    assert _credentials(sent) == {"api-key": "GATEWAY-KEY"}


def test_an_environment_key_is_not_sent_beside_a_password_in_the_base_url(
    wire: _Wire, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "ENV-KEY-987654")
    sent = wire.send("anthropic", "claude", base_url="https://user:pw@gateway.example.net")
    assert _credentials(sent) == {"authorization": "Basic dXNlcjpwdw=="}


def test_a_key_given_as_an_argument_still_goes_beside_the_callers_headers(wire: _Wire) -> None:
    sent = wire.send(
        "anthropic",
        "claude",
        api_key=SECRET,
        base_url="https://gateway.example.net",
        headers={"Authorization": "Bearer GATEWAY"},
    )
    assert _credentials(sent) == {"authorization": "Bearer GATEWAY", "x-api-key": SECRET}


# 2. Whitespace around values from the environment and from arguments


def test_values_from_the_environment_are_sent_without_the_whitespace_around_them(
    wire: _Wire, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AZURE_OPENAI_API_KEY", " azure-key\n")
    monkeypatch.setenv("AZURE_OPENAI_ENDPOINT", "https://res.openai.azure.com/\n")
    monkeypatch.setenv("OPENAI_API_VERSION", "2025-01-01-preview\r\n")
    sent = wire.send("azure-openai", "dep1")
    assert str(sent.url) == (
        "https://res.openai.azure.com/openai/deployments/dep1/chat/completions"
        "?api-version=2025-01-01-preview"
    )
    assert _credentials(sent) == {"api-key": "azure-key"}

    monkeypatch.setenv("CLOUDFLARE_API_TOKEN", "cf-token\n")
    monkeypatch.setenv("CLOUDFLARE_ACCOUNT_ID", "acc123\n")
    sent = wire.send("workers-ai", "@cf/meta/llama-3.1-8b-instruct")
    assert str(sent.url) == (
        "https://api.cloudflare.com/client/v4/accounts/acc123/ai/v1/chat/completions"
    )
    assert _credentials(sent) == {"authorization": "Bearer cf-token"}

    monkeypatch.setenv("GOOGLE_CLOUD_PROJECT", " proj\n")
    monkeypatch.setenv("GOOGLE_CLOUD_LOCATION", "europe-west4\n")
    sent = wire.send("vertex-gemini", "gemini-2.5-flash", access_token="ya29.token")
    assert str(sent.url) == (
        "https://europe-west4-aiplatform.googleapis.com/v1/projects/proj/locations/europe-west4"
        "/publishers/google/models/gemini-2.5-flash:generateContent"
    )

    monkeypatch.setenv("OPENAI_API_KEY", "sk-abc\n")
    monkeypatch.setenv("OPENAI_BASE_URL", " https://gw.example.com/v1/\n")
    sent = wire.send("openai")
    assert str(sent.url) == "https://gw.example.com/v1/chat/completions"
    assert _credentials(sent) == {"authorization": "Bearer sk-abc"}


def test_a_blank_environment_key_is_no_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "  \n")
    assert allama.provider("openai").missing_key() == (
        "openai needs an API key: pass api_key= or set OPENAI_API_KEY"
    )


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("sk-abc\ndef", "the OPENAI_API_KEY environment variable has a line break in it"),
        ("sk-abc\u2019", "the OPENAI_API_KEY environment variable has a character outside ASCII"),
    ],
)
def test_an_environment_key_a_header_cannot_carry_is_refused_naming_the_variable(
    monkeypatch: pytest.MonkeyPatch, value: str, message: str
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", value)
    with pytest.raises(ValueError) as caught:
        allama.provider("openai")
    assert str(caught.value).startswith(message)
    assert "sk-abc" not in str(caught.value)


def test_an_environment_base_url_that_is_no_url_is_refused_naming_the_variable(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("OPENAI_BASE_URL", "api.example.com/v1")
    with pytest.raises(ValueError) as caught:
        allama.provider("openai", api_key=SECRET)
    assert str(caught.value).startswith(
        "the OPENAI_BASE_URL environment variable must start with http:// or https://"
    )


_FRAGMENT = (
    "has a `#` in it, which begins a fragment no request sends: the calls would go to the "
    "URL before it; pass the URL alone, such as https://api.example.com/v1"
)


@pytest.mark.parametrize(
    ("name", "argument", "value"),
    [
        # `/chat/completions` went after the fragment: the POST went to /v1, with the key.
        ("openai-compatible", "base_url", "https://gw.example/v1#frag"),
        # Reads as OpenAI's host; the key went to evil.example.
        ("openai", "base_url", "https://evil.example#@api.openai.com/v1"),
        ("openai", "base_url", "https://gw.example/v1#"),
        ("azure-openai", "endpoint", "https://res.openai.azure.com/#x"),
    ],
)
def test_a_url_with_a_fragment_is_refused_naming_the_argument(
    name: str, argument: str, value: str
) -> None:
    sent: list[httpx2.Request] = []
    transport = Transport(client=httpx2.Client(transport=httpx2.MockTransport(sent.append)))
    with pytest.raises(ValueError) as caught:
        allama.provider(name, api_key=SECRET, transport=transport, **{argument: value})
    assert str(caught.value) == f"{argument} {_FRAGMENT}"
    assert sent == []


def test_an_environment_base_url_with_a_fragment_is_refused_naming_the_variable(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("OPENAI_BASE_URL", "https://evil.example#@api.openai.com/v1")
    with pytest.raises(ValueError) as caught:
        allama.provider("openai", api_key=SECRET)
    assert str(caught.value) == f"the OPENAI_BASE_URL environment variable {_FRAGMENT}"


@pytest.mark.parametrize(
    ("name", "argument", "value"),
    [
        ("openai", "base_url", " https://gw.example.com/v1"),
        ("openai", "base_url", "https://gw.example.com/v1\n"),
        ("azure-openai", "endpoint", "https://res.openai.azure.com/\n"),
        ("azure-openai", "api_version", " 2025-01-01-preview "),
        ("workers-ai", "account_id", " acc123 "),
        ("vertex-gemini", "project", "proj\n"),
        ("vertex-gemini", "location", "us-central1 "),
    ],
)
def test_an_argument_with_whitespace_around_it_is_refused_naming_it(
    name: str, argument: str, value: str
) -> None:
    with pytest.raises(ValueError) as caught:
        allama.provider(name, api_key="k", **{argument: value})
    assert str(caught.value) == (
        f"{argument} has a line break or whitespace around it; pass the value alone "
        "(a value read from a file often ends with a newline)"
    )


# 3. Azure's endpoint forms and api-version


def test_an_api_version_in_the_endpoints_query_beats_the_environment_and_the_default(
    wire: _Wire, monkeypatch: pytest.MonkeyPatch
) -> None:
    resource = "https://res.openai.azure.com"
    deployment = f"{resource}/openai/deployments/dep1/chat/completions"
    query = f"{resource}?api-version=2025-01-01-preview"
    sent = wire.send("azure-openai", "dep1", api_key="k", endpoint=query)
    assert str(sent.url) == f"{deployment}?api-version=2025-01-01-preview"
    monkeypatch.setenv("OPENAI_API_VERSION", "2024-08-01-preview")
    sent = wire.send("azure-openai", "dep1", api_key="k", endpoint=query)
    assert str(sent.url) == f"{deployment}?api-version=2025-01-01-preview"
    # The argument beats the URL's query; the environment beats the default.
    sent = wire.send("azure-openai", "dep1", api_key="k", endpoint=query, api_version="2024-10-21")
    assert str(sent.url) == f"{deployment}?api-version=2024-10-21"
    sent = wire.send("azure-openai", "dep1", api_key="k", endpoint=resource)
    assert str(sent.url) == f"{deployment}?api-version=2024-08-01-preview"

    models = "https://res.services.ai.azure.com/models"
    sent = wire.send("azure-foundry", "d", api_key="k", endpoint=f"{models}?api-version=2025-05-01")
    assert str(sent.url) == f"{models}/chat/completions?api-version=2025-05-01"


@pytest.mark.parametrize(
    ("endpoint", "api", "url"),
    [
        (
            "https://res.openai.azure.com/openai",
            "chat",
            "https://res.openai.azure.com/openai/deployments/dep1/chat/completions"
            "?api-version=2024-10-21",
        ),
        (
            "https://res.cognitiveservices.azure.com/openai/",
            "chat",
            "https://res.cognitiveservices.azure.com/openai/deployments/dep1/chat/completions"
            "?api-version=2024-10-21",
        ),
        (
            "https://res.openai.azure.com/openai",
            "responses",
            "https://res.openai.azure.com/openai/v1/responses",
        ),
    ],
)
def test_an_azure_endpoint_ending_in_openai_is_the_resource(
    wire: _Wire, endpoint: str, api: str, url: str
) -> None:
    sent = wire.send("azure-openai", "dep1", api_key="k", endpoint=endpoint, api=api)
    assert str(sent.url) == url


@pytest.mark.parametrize(
    "endpoint",
    [
        "https://res.openai.azure.com/openai/deployments/dep1",
        "https://res.openai.azure.com/openai/deployments/dep1/",
        "https://res.openai.azure.com/openai/deployments/dep1/chat/completions"
        "?api-version=2025-01-01-preview",
    ],
)
def test_an_azure_endpoint_naming_a_deployment_is_refused_saying_what_to_give(
    wire: _Wire, monkeypatch: pytest.MonkeyPatch, endpoint: str
) -> None:
    with pytest.raises(ValueError) as caught:
        allama.provider("azure-openai", api_key="k", endpoint=endpoint)
    message = str(caught.value)
    assert message.startswith("an Azure OpenAI endpoint that names a deployment")
    assert "give the resource URL alone (https://<resource>.openai.azure.com)" in message
    assert "the deployment's name as the request's model" in message
    monkeypatch.setenv("AZURE_OPENAI_ENDPOINT", endpoint)
    with pytest.raises(ValueError, match="names a deployment"):
        allama.provider("azure-openai", api_key="k")
    assert wire.seen == []


def _azure_refusal(request: httpx2.Request) -> httpx2.Response:
    message = "Model {modelName} is enabled only for api versions 2024-12-01-preview and later"
    return httpx2.Response(400, json={"error": {"code": "BadRequest", "message": message}})


def test_azures_refusal_of_an_old_api_version_says_which_to_pass() -> None:
    seen: list[httpx2.Request] = []

    def handler(request: httpx2.Request) -> httpx2.Response:
        seen.append(request)
        return _azure_refusal(request)

    transport = Transport(
        client=httpx2.Client(transport=httpx2.MockTransport(handler)),
        async_client=httpx2.AsyncClient(transport=httpx2.MockTransport(handler)),
    )
    target = allama.provider(
        "azure-openai", api_key="k", endpoint="https://res.openai.azure.com", transport=transport
    )
    expected = (
        "Model {modelName} is enabled only for api versions 2024-12-01-preview and later "
        "(allama sent api-version 2024-10-21: pass api_version='2024-12-01-preview' or a "
        "later one to allama.provider(...), or set OPENAI_API_VERSION)"
    )
    request = ChatRequest("o3-mini").user("Hi")
    with pytest.raises(InvalidRequestError) as caught:
        target.chat(request)
    assert str(caught.value) == expected and caught.value.retryable is False
    with pytest.raises(InvalidRequestError) as caught, target.chat_stream(request):
        pass
    assert str(caught.value) == expected

    async def run() -> None:
        with pytest.raises(InvalidRequestError) as caught:
            await target.achat(request)
        assert str(caught.value) == expected

    asyncio.run(run())
    assert [str(sent.url).rpartition("?")[2] for sent in seen] == ["api-version=2024-10-21"] * 3


# 4. Vertex AI: multi-region hosts, and express mode keys


@pytest.mark.parametrize(
    ("location", "host"),
    [
        ("us", "aiplatform.us.rep.googleapis.com"),
        ("eu", "aiplatform.eu.rep.googleapis.com"),
        ("global", "aiplatform.googleapis.com"),
        ("us-central1", "us-central1-aiplatform.googleapis.com"),
    ],
)
def test_vertex_multi_regions_have_hosts_of_their_own(
    wire: _Wire, location: str, host: str
) -> None:
    sent = wire.send(
        "vertex-gemini", "gemini-2.5-flash", project="proj", location=location, access_token="t"
    )
    assert str(sent.url) == (
        f"https://{host}/v1/projects/proj/locations/{location}/publishers/google/models"
        "/gemini-2.5-flash:generateContent"
    )
    assert _credentials(sent) == {"authorization": "Bearer t"}


def test_a_vertex_key_is_an_express_mode_key(wire: _Wire, monkeypatch: pytest.MonkeyPatch) -> None:
    # Express mode names no project or location (a project from the environment is not
    # used), and the key goes as `x-goog-api-key`, as google-genai sends it.
    monkeypatch.setenv("GOOGLE_CLOUD_PROJECT", "env-proj")
    sent = wire.send("vertex-gemini", "gemini-2.5-flash", api_key=SECRET)
    assert str(sent.url) == (
        "https://aiplatform.googleapis.com/v1/publishers/google/models"
        "/gemini-2.5-flash:generateContent"
    )
    assert _credentials(sent) == {"x-goog-api-key": SECRET}


@pytest.mark.parametrize(
    ("options", "given"),
    [
        ({"project": "p"}, "project="),
        ({"project": "p", "location": "us"}, "project= and location="),
        ({"access_token": "t"}, "access_token="),
    ],
)
def test_a_vertex_key_beside_a_project_or_token_is_refused(
    options: dict[str, str], given: str
) -> None:
    with pytest.raises(ValueError) as caught:
        allama.provider("vertex-gemini", api_key=SECRET, **options)
    assert str(caught.value) == (
        "vertex-gemini takes api_key= (an express mode key, which names no project or "
        f"location) or {given}, not both"
    )


# 4b. Values filled into a preset's URL: each has its form, and cannot move the host or path

_LOCATION_FORM = (
    "must be a Google Cloud location: lowercase letters, digits and hyphens, such as "
    "us-central1, europe-west4, us or global"
)
_PROJECT_FORM = (
    "must be a Google Cloud project id or number: lowercase letters, digits and hyphens, "
    "such as my-project or 123456789012 (a domain-scoped id as example.com:my-project)"
)
_AZURE_RESOURCE_FORM = (
    "must be the Azure resource's name: letters, digits and hyphens, the <resource> of "
    "https://<resource>.services.ai.azure.com (or pass endpoint= with that URL)"
)
_CLOUDFLARE_ACCOUNT_FORM = (
    "must be a Cloudflare account id: letters, digits and hyphens (32 hex digits, shown in "
    "the Cloudflare dashboard)"
)


@pytest.mark.parametrize(
    "location",
    [
        "evil.example#",  # the host would be evil.example, the rest a fragment
        "evil.example/",
        "us-central1.evil.example/",
        "evil.example?",
        "us central",  # sent as us%20central-aiplatform...
        "US-CENTRAL1",  # sent in upper case, in the host and the path
        "us-central1:8443",
        "user@evil.example#",
        "-us",
    ],
)
def test_a_vertex_location_that_is_no_location_is_refused_before_its_token_goes_anywhere(
    wire: _Wire, location: str
) -> None:
    with pytest.raises(ValueError) as caught:
        wire.send(
            "vertex-gemini",
            "gemini-2.5-flash",
            access_token="ya29.SECRET",
            project="p",
            location=location,
        )
    assert str(caught.value) == f"location {_LOCATION_FORM}"
    assert wire.seen == []


@pytest.mark.parametrize(
    "variable", ["GOOGLE_CLOUD_LOCATION", "GOOGLE_CLOUD_REGION", "CLOUD_ML_REGION"]
)
def test_a_vertex_location_from_the_environment_is_refused_naming_the_variable(
    wire: _Wire, monkeypatch: pytest.MonkeyPatch, variable: str
) -> None:
    monkeypatch.setenv(variable, "evil.example#")
    with pytest.raises(ValueError) as caught:
        wire.send("vertex-gemini", "gemini-2.5-flash", access_token="ya29.SECRET", project="p")
    assert str(caught.value) == f"the {variable} environment variable {_LOCATION_FORM}"
    assert wire.seen == []
    # An express mode key names no location: the variable is not read, nor refused.
    sent = wire.send("vertex-gemini", "gemini-2.5-flash", api_key=SECRET)
    assert str(sent.url) == (
        "https://aiplatform.googleapis.com/v1/publishers/google/models"
        "/gemini-2.5-flash:generateContent"
    )


def test_a_vertex_project_is_an_id_a_number_or_a_domain_scoped_id_and_no_more(
    wire: _Wire, monkeypatch: pytest.MonkeyPatch
) -> None:
    for project in ("my-project", "p", "123456789012", "example.com:my-project"):
        sent = wire.send(
            "vertex-gemini", "gemini-2.5-flash", access_token="t", project=project, location="us"
        )
        assert str(sent.url) == (
            f"https://aiplatform.us.rep.googleapis.com/v1/projects/{project}/locations/us"
            "/publishers/google/models/gemini-2.5-flash:generateContent"
        )
    for project in ("p/../../v1/x", "p?alt=json", "p#", "my%2fproject", "My-Project", "p x", "p-"):
        with pytest.raises(ValueError) as caught:
            allama.provider("vertex-gemini", access_token="t", project=project)
        assert str(caught.value) == f"project {_PROJECT_FORM}"
    monkeypatch.setenv("GOOGLE_CLOUD_PROJECT", "p/locations/x/..")
    with pytest.raises(ValueError) as caught:
        allama.provider("vertex-gemini", access_token="t")
    assert str(caught.value) == f"the GOOGLE_CLOUD_PROJECT environment variable {_PROJECT_FORM}"
    assert wire.seen == []


@pytest.mark.parametrize(
    "account", ["evil.example/", "evil.example#", "res.services.ai.azure.com", "res:444", "a@b"]
)
def test_an_azure_anthropic_resource_name_that_would_move_the_host_is_refused(
    wire: _Wire, monkeypatch: pytest.MonkeyPatch, account: str
) -> None:
    with pytest.raises(ValueError) as caught:
        wire.send("azure-anthropic", "claude-sonnet-4-5", api_key=SECRET, account_id=account)
    assert str(caught.value) == f"account_id {_AZURE_RESOURCE_FORM}"
    monkeypatch.setenv("ANTHROPIC_FOUNDRY_RESOURCE", account)
    with pytest.raises(ValueError) as caught:
        wire.send("azure-anthropic", "claude-sonnet-4-5", api_key=SECRET)
    assert str(caught.value) == (
        f"the ANTHROPIC_FOUNDRY_RESOURCE environment variable {_AZURE_RESOURCE_FORM}"
    )
    assert wire.seen == []
    sent = wire.send("azure-anthropic", "claude-sonnet-4-5", api_key=SECRET, account_id="My-Res1")
    assert str(sent.url) == "https://my-res1.services.ai.azure.com/anthropic/v1/messages"
    assert _credentials(sent) == {"x-api-key": SECRET}


def test_a_workers_ai_account_id_that_would_add_to_the_path_is_refused(
    wire: _Wire, monkeypatch: pytest.MonkeyPatch
) -> None:
    for account in ("acc/../../zones", "acc?x=1", "acc#", "acc%2f", ".."):
        with pytest.raises(ValueError) as caught:
            allama.provider("workers-ai", api_key=SECRET, account_id=account)
        assert str(caught.value) == f"account_id {_CLOUDFLARE_ACCOUNT_FORM}"
    monkeypatch.setenv("CLOUDFLARE_ACCOUNT_ID", "acc/../x")
    with pytest.raises(ValueError) as caught:
        allama.provider("workers-ai", api_key=SECRET)
    assert str(caught.value) == (
        f"the CLOUDFLARE_ACCOUNT_ID environment variable {_CLOUDFLARE_ACCOUNT_FORM}"
    )


@pytest.mark.parametrize(
    ("name", "options", "url"),
    [
        (
            "azure-anthropic",
            {"account_id": "evil.example/"},
            "https://<account>.services.ai.azure.com/anthropic",
        ),
        (
            "azure-anthropic",
            {"account_id": "x.evil"},
            "https://<account>.services.ai.azure.com/anthropic",
        ),
        (
            "workers-ai",
            {"account_id": "a/../b"},
            "https://api.cloudflare.com/client/v4/accounts/<account>/ai/v1",
        ),
        (
            "workers-ai",
            {"account_id": ".."},
            "https://api.cloudflare.com/client/v4/accounts/<account>/ai/v1",
        ),
        (
            "workers-ai",
            {"account_id": "a\tb"},
            "https://api.cloudflare.com/client/v4/accounts/<account>/ai/v1",
        ),
    ],
)
def test_a_preset_without_forms_still_keeps_its_urls_host_and_path(
    name: str, options: dict[str, str], url: str
) -> None:
    # The second guard, for a preset of the caller's that says no form: the URL filled
    # must keep the template's host, and each place stays within one path segment.
    preset = replace(PRESETS[name], place_forms={})
    with pytest.raises(ValueError) as caught:
        HttpProvider(preset, api_key=SECRET, **options)
    assert str(caught.value) == (
        f"account_id cannot be filled into {name}'s URL ({url}): it would change the host "
        "or the path the calls, and their key, go to"
    )
    assert HttpProvider(preset, api_key=SECRET, account_id="res1").base_url is not None


# 5. Values a header cannot carry, and proxies httpx2 cannot use


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"api_key": "sk-abc\u2019"}, "api_key has a character outside ASCII"),
        ({"access_token": "tok\u00e9n"}, "access_token has a character outside ASCII"),
        ({"headers": {"X-Title": "Caf\u00e9 app"}}, "headers['X-Title'] has a character outside"),
        ({"api_key": "sk-abc\ndef"}, "api_key has a line break in it"),
        ({"api_key": "sk-abc\x00"}, "api_key has a NUL character (U+0000) in it"),
    ],
)
def test_a_value_a_header_cannot_carry_is_refused_when_the_provider_is_built(
    options: dict[str, Any], message: str
) -> None:
    with pytest.raises(ValueError) as caught:
        allama.provider("openai", **options)
    assert str(caught.value).startswith(message)
    assert "abc" not in str(caught.value) and "Caf" not in str(caught.value)


def _calls(target: Any) -> list[Exception]:
    """What a sync call and an async call on `target` raise."""
    raised: list[Exception] = []
    request = ChatRequest("m").user("Hi")
    try:
        target.chat(request)
    except Exception as error:
        raised.append(error)

    async def run() -> None:
        try:
            await target.achat(request)
        except Exception as error:
            raised.append(error)

    asyncio.run(run())
    return raised


@pytest.mark.skipif(
    importlib.util.find_spec("socksio") is not None, reason="SOCKS proxies work with socksio"
)
def test_a_socks_proxy_without_socksio_is_an_allama_error_naming_the_variable(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("ALL_PROXY", "socks5://user:PROXY-PASSWORD@127.0.0.1:1")
    target = allama.provider("openai", api_key=SECRET, base_url="http://127.0.0.1:9/v1")
    raised = _calls(target)
    assert [type(error) for error in raised] == [InvalidRequestError] * 2
    for error in raised:
        assert str(error) == (
            "no HTTP client can be made: ALL_PROXY names a SOCKS proxy, which needs the "
            "socksio package (pip install 'httpx2[socks]'). Fix or unset it, or give the "
            "Transport a client of your own (Transport(client=httpx2.Client(...)))"
        )
        assert isinstance(error, InvalidRequestError) and error.context.provider == "openai"
        assert error.__cause__ is None


def test_a_proxy_of_another_scheme_is_an_allama_error_naming_the_variable(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("https_proxy", "ftp://user:PROXY-PASSWORD@127.0.0.1:1")
    target = allama.provider("openai", api_key=SECRET, base_url="https://api.example.com/v1")
    raised = _calls(target)
    assert [type(error) for error in raised] == [InvalidRequestError] * 2
    for error in raised:
        assert str(error).startswith(
            "no HTTP client can be made: https_proxy names a proxy of the scheme 'ftp'; "
            "httpx2 takes http://, https:// and socks5:// proxies."
        )
        assert "PROXY-PASSWORD" not in str(error) and "PROXY-PASSWORD" not in repr(error)


# 7. GOOGLE_GEMINI_BASE_URL, as google-genai reads it


@pytest.mark.parametrize(
    ("value", "base"),
    [
        ("http://localhost:1337", "http://localhost:1337/v1beta"),
        ("http://localhost:1337/", "http://localhost:1337/v1beta"),
        (
            "https://gateway.ai.cloudflare.com/v1/acc/gw/google-ai-studio",
            "https://gateway.ai.cloudflare.com/v1/acc/gw/google-ai-studio/v1beta",
        ),
        # A URL that already names a version is taken as it is.
        ("https://gw.example.com/v1beta", "https://gw.example.com/v1beta"),
        ("https://gw.example.com/v1/", "https://gw.example.com/v1"),
    ],
)
def test_the_gemini_base_url_variable_gets_the_api_version_google_genai_adds(
    wire: _Wire, monkeypatch: pytest.MonkeyPatch, value: str, base: str
) -> None:
    monkeypatch.setenv("GOOGLE_GEMINI_BASE_URL", value)
    sent = wire.send("gemini", "gemini-2.5-flash", api_key="k")
    assert str(sent.url) == f"{base}/models/gemini-2.5-flash:generateContent"


def test_a_gemini_base_url_argument_is_taken_as_it_is(wire: _Wire) -> None:
    sent = wire.send("gemini", "gemini-2.5-flash", api_key="k", base_url="http://localhost:1337")
    assert str(sent.url) == "http://localhost:1337/models/gemini-2.5-flash:generateContent"


# 8. The preset's name


@pytest.mark.parametrize("name", [None, 3, b"openai"])
def test_a_name_that_is_no_string_is_a_type_error_naming_it(name: Any) -> None:
    with pytest.raises(TypeError) as caught:
        allama.provider(name)
    assert str(caught.value) == (
        f"name must be a preset name such as 'openai' (a str), got {type(name).__name__}"
    )


# 9. Credentials in the base URL's query stand in for a key from the environment


@pytest.mark.parametrize(
    ("name", "env", "options", "model"),
    [
        # Google's own `?key=`, or a gateway's in front of Gemini.
        (
            "gemini",
            "GEMINI_API_KEY",
            {"base_url": "https://gw.example.com/v1beta?key=GW-KEY-1"},
            "g",
        ),
        (
            "openai",
            "OPENAI_API_KEY",
            {"base_url": "https://gw.example.com/v1?api-key=GW-KEY-1"},
            "m",
        ),
        (
            "azure-openai",
            "AZURE_OPENAI_API_KEY",
            {"endpoint": "https://res.openai.azure.com?api-key=GW-KEY-1&api-version=2024-10-21"},
            "d",
        ),
    ],
)
def test_an_environment_key_is_not_sent_beside_a_credential_in_the_base_urls_query(
    wire: _Wire, monkeypatch: pytest.MonkeyPatch, name: str, env: str, options: Any, model: str
) -> None:
    # Without a key in the environment, the call goes: no key is missing.
    sent = wire.send(name, model, **options)
    assert _credentials(sent) == {} and "GW-KEY-1" in str(sent.url)
    assert allama.provider(name, **options).missing_key() is None
    # With one, it is not read: the gateway does not get the provider's own key.
    monkeypatch.setenv(env, "ENV-KEY-987654")
    sent = wire.send(name, model, **options)
    assert _credentials(sent) == {} and "ENV-KEY-987654" not in str(sent)
    assert "GW-KEY-1" in str(sent.url)


def test_a_plain_query_parameter_is_no_credential_and_an_explicit_key_still_goes(
    wire: _Wire, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AZURE_OPENAI_API_KEY", "ENV-KEY-987654")
    plain = "https://res.openai.azure.com?api-version=2025-01-01-preview"
    sent = wire.send("azure-openai", "d", endpoint=plain)
    assert _credentials(sent) == {"api-key": "ENV-KEY-987654"}
    monkeypatch.delenv("AZURE_OPENAI_API_KEY")
    with pytest.raises(allama.errors.AuthenticationError, match="needs an API key"):
        wire.send("azure-openai", "d", endpoint=plain)
    keyed = "https://gw.example.com/v1?key=GW-KEY-1"
    sent = wire.send("openai", api_key=SECRET, base_url=keyed)
    assert _credentials(sent) == {"authorization": f"Bearer {SECRET}"}


# 10. Header names and values httpx2 would refuse at every call


@pytest.mark.parametrize("name", ["X Bad", "X(A)", "X/A", " X-A", "X-A "])
def test_a_header_name_that_is_no_http_token_is_refused_naming_it(name: str) -> None:
    with pytest.raises(TypeError) as caught:
        allama.provider("openai", api_key="k", headers={name: "value-SECRET"})
    message = str(caught.value)
    assert message.startswith("headers must have header names as keys") and repr(name) in message
    assert "value-SECRET" not in message


@pytest.mark.parametrize("value", ["Bearer tok-SECRET ", " tok-SECRET", "tok-SECRET\t"])
def test_a_header_value_with_whitespace_around_it_is_refused_naming_the_header(
    value: str,
) -> None:
    with pytest.raises(ValueError) as caught:
        allama.provider("openai", api_key="k", headers={"X-Title": value})
    message = str(caught.value)
    assert message.startswith("headers['X-Title'] has a line break or whitespace around it")
    assert "SECRET" not in message


def test_a_header_value_with_a_tab_inside_is_sent(wire: _Wire) -> None:
    sent = wire.send("openai", api_key="k", headers={"X-Title": "a\tb", "X.Team_1": "t"})
    assert sent.headers["X-Title"] == "a\tb" and sent.headers["X.Team_1"] == "t"


# 11. Azure endpoints past `/openai` other than the v1 API's


@pytest.mark.parametrize(
    "endpoint",
    [
        "https://res.openai.azure.com/openai/responses?api-version=2025-04-01-preview",
        "https://res.openai.azure.com/openai/v1/chat/completions",
        "https://res.cognitiveservices.azure.com/openai/v1/responses/",
        "https://res.openai.azure.com/OpenAI/Deployments/dep1",
        "https://res.openai.azure.com/openai/v2",
    ],
)
@pytest.mark.parametrize("api", ["chat", "responses"])
def test_an_azure_endpoint_naming_an_operation_is_refused_saying_what_to_give(
    wire: _Wire, monkeypatch: pytest.MonkeyPatch, endpoint: str, api: str
) -> None:
    with pytest.raises(ValueError) as caught:
        allama.provider("azure-openai", api=api, api_key="k", endpoint=endpoint)
    message = str(caught.value)
    assert message.startswith("an Azure OpenAI endpoint that names a deployment or an operation")
    assert "give the resource URL alone (https://<resource>.openai.azure.com)" in message
    assert "res." not in message
    monkeypatch.setenv("AZURE_OPENAI_ENDPOINT", endpoint)
    with pytest.raises(ValueError, match="names a deployment or an operation"):
        allama.provider("azure-openai", api=api, api_key="k")
    assert wire.seen == []


@pytest.mark.parametrize(
    ("endpoint", "chat", "responses"),
    [
        (
            "https://res.openai.azure.com/",
            "https://res.openai.azure.com/openai/deployments/d/chat/completions"
            "?api-version=2024-10-21",
            "https://res.openai.azure.com/openai/v1/responses",
        ),
        (
            "https://res.openai.azure.com/openai/",
            "https://res.openai.azure.com/openai/deployments/d/chat/completions"
            "?api-version=2024-10-21",
            "https://res.openai.azure.com/openai/v1/responses",
        ),
        (
            "https://res.openai.azure.com/openai/v1/",
            "https://res.openai.azure.com/openai/v1/chat/completions",
            "https://res.openai.azure.com/openai/v1/responses",
        ),
        (
            # A gateway's own path in front of the resource's.
            "https://gw.example.com/azure/openai/v1",
            "https://gw.example.com/azure/openai/v1/chat/completions",
            "https://gw.example.com/azure/openai/v1/responses",
        ),
    ],
)
def test_an_azure_resource_or_v1_endpoint_is_still_taken(
    wire: _Wire, endpoint: str, chat: str, responses: str
) -> None:
    sent = wire.send("azure-openai", "d", api_key="k", endpoint=endpoint)
    assert str(sent.url) == chat
    sent = wire.send("azure-openai", "d", api_key="k", endpoint=endpoint, api="responses")
    assert str(sent.url) == responses


# 11. Azure: a gateway's subscription key, the v1 API's api-version, conflicting arguments,
# and Microsoft Entra ID tokens from a function

APIM = "https://apim.azure-api.net/aoai"
APIM_KEY = "apim-subscription-0123456789"
RESOURCE = "https://res.openai.azure.com"


def test_an_api_management_subscription_key_stands_in_for_the_azure_key(
    wire: _Wire, monkeypatch: pytest.MonkeyPatch
) -> None:
    own = {"Ocp-Apim-Subscription-Key": APIM_KEY}
    # Without a key in the environment, the call goes: no key is missing.
    assert allama.provider("azure-openai", endpoint=APIM, headers=own).missing_key() is None
    sent = wire.send("azure-openai", "d", endpoint=APIM, headers=own)
    assert _credentials(sent) == {}
    assert sent.headers["ocp-apim-subscription-key"] == APIM_KEY
    # With one, it is not read: the gateway does not get the provider's own key.
    monkeypatch.setenv("AZURE_OPENAI_API_KEY", "ENV-KEY-987654")
    sent = wire.send("azure-openai", "d", endpoint=APIM, headers=own)
    assert _credentials(sent) == {} and "ENV-KEY-987654" not in str(sent.headers)
    # A key given as an argument is the caller's word, and goes beside it.
    sent = wire.send("azure-openai", "d", endpoint=APIM, headers=own, api_key=SECRET)
    assert _credentials(sent) == {"api-key": SECRET}
    assert sent.headers["ocp-apim-subscription-key"] == APIM_KEY
    shown = repr(allama.provider("azure-openai", endpoint=APIM, headers=own))
    assert shown == (
        "HttpProvider(name='azure-openai', base_url='https://apim.azure-api.net/aoai', "
        "api_key=<missing>)"
    )


def test_a_gateways_own_header_that_passes_the_key_on_does_not_stand_in_for_it(
    wire: _Wire, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Helicone, Portkey and Cloudflare's AI Gateway pass the provider's key on.
    monkeypatch.setenv("OPENAI_API_KEY", "ENV-KEY-987654")
    sent = wire.send("openai", headers={"Helicone-Auth": "Bearer sk-helicone-1"})
    assert _credentials(sent) == {"authorization": "Bearer ENV-KEY-987654"}


_V1_REFUSED = (
    "azure-openai's v1 API (an endpoint ending in /openai/v1, or api='responses') takes no "
    "dated api-version: leave out {where} (one goes only on deployment URLs: Chat "
    "Completions with the resource URL alone as the endpoint)"
)


@pytest.mark.parametrize(
    ("options", "where"),
    [
        (
            {"endpoint": f"{RESOURCE}/openai/v1", "api_version": "2025-04-01-preview"},
            "api_version=",
        ),
        (
            {"endpoint": f"{RESOURCE}/openai/v1?api-version=2025-04-01-preview"},
            "the api-version in the endpoint",
        ),
        (
            {"endpoint": RESOURCE, "api": "responses", "api_version": "2025-04-01-preview"},
            "api_version=",
        ),
        (
            {"endpoint": f"{RESOURCE}?api-version=2025-04-01-preview", "api": "responses"},
            "the api-version in the endpoint",
        ),
    ],
)
def test_a_dated_api_version_on_azures_v1_api_is_refused_not_dropped(
    wire: _Wire, options: dict[str, str], where: str
) -> None:
    with pytest.raises(ValueError) as caught:
        allama.provider("azure-openai", api_key="k", **options)
    assert str(caught.value) == _V1_REFUSED.format(where=where)
    assert wire.seen == []


@pytest.mark.parametrize(
    ("options", "url"),
    [
        (
            {"endpoint": f"{RESOURCE}/openai/v1", "api_version": "preview"},
            f"{RESOURCE}/openai/v1/chat/completions?api-version=preview",
        ),
        (
            {"endpoint": f"{RESOURCE}/openai/v1?api-version=preview"},
            f"{RESOURCE}/openai/v1/chat/completions?api-version=preview",
        ),
        (
            {"endpoint": RESOURCE, "api": "responses", "api_version": "preview"},
            f"{RESOURCE}/openai/v1/responses?api-version=preview",
        ),
        # The environment's version is for deployment URLs alone.
        ({"endpoint": f"{RESOURCE}/openai/v1"}, f"{RESOURCE}/openai/v1/chat/completions"),
    ],
)
def test_an_undated_api_version_on_azures_v1_api_goes_as_given(
    wire: _Wire, monkeypatch: pytest.MonkeyPatch, options: dict[str, str], url: str
) -> None:
    monkeypatch.setenv("OPENAI_API_VERSION", "2025-01-01-preview")
    sent = wire.send("azure-openai", "d", api_key="k", **options)
    assert str(sent.url) == url


def test_an_api_key_and_an_access_token_together_are_refused_naming_both() -> None:
    with pytest.raises(ValueError) as caught:
        allama.provider("azure-openai", endpoint=RESOURCE, api_key=SECRET, access_token="tok")
    assert str(caught.value) == (
        "pass api_key= or access_token=, not both: each is the credential every call sends "
        "(access_token= a bearer token, such as Microsoft Entra ID's, instead of the key)"
    )
    assert SECRET not in str(caught.value)


@pytest.mark.parametrize("name", ["azure-openai", "openai"])
def test_an_endpoint_and_a_base_url_together_are_refused_naming_both(name: str) -> None:
    with pytest.raises(ValueError) as caught:
        allama.provider(name, api_key="k", endpoint=RESOURCE, base_url="https://other.example")
    assert str(caught.value) == (
        "pass endpoint= or base_url=, not both: both name the API's address"
    )


def test_the_missing_azure_key_says_how_to_give_a_microsoft_entra_id_token() -> None:
    assert allama.provider("azure-openai", endpoint=RESOURCE).missing_key() == (
        "azure-openai needs an API key: pass api_key= or set AZURE_OPENAI_API_KEY; for "
        "Microsoft Entra ID, pass access_token= (a token, or a function returning one) or "
        "headers={'Authorization': 'Bearer ...'}"
    )
    assert allama.provider("openai").missing_key() == (
        "openai needs an API key: pass api_key= or set OPENAI_API_KEY"
    )


class _Tokens:
    """A token provider: a new token each time it is asked, as one refreshed would be."""

    def __init__(self) -> None:
        self.asked = 0

    def __call__(self) -> str:
        self.asked += 1
        return f"entra-token-{self.asked:04d}"


def _both_ways(handler: Any) -> Transport:
    return Transport(
        client=httpx2.Client(transport=httpx2.MockTransport(handler)),
        async_client=httpx2.AsyncClient(transport=httpx2.MockTransport(handler)),
    )


def test_an_access_token_function_is_asked_for_every_request(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("AZURE_OPENAI_API_KEY", "ENV-KEY-987654")
    seen: list[httpx2.Request] = []

    def handler(request: httpx2.Request) -> httpx2.Response:
        seen.append(request)
        return httpx2.Response(200, json=_body(str(request.url)))

    tokens = _Tokens()
    target = allama.provider(
        "azure-openai", endpoint=RESOURCE, access_token=tokens, transport=_both_ways(handler)
    )
    assert target.missing_key() is None
    request = ChatRequest("d").user("Hi")
    target.chat(request)
    with target.chat_stream(request) as stream:
        stream.response()

    async def calls() -> None:
        await target.achat(request)
        async with await target.achat_stream(request) as astream:
            await astream.response()

    asyncio.run(calls())
    assert [_credentials(sent) for sent in seen] == [
        {"authorization": f"Bearer entra-token-{n:04d}"} for n in range(1, 5)
    ]
    assert "entra-token" not in repr(target)


def test_a_token_from_a_function_echoed_in_an_error_is_redacted() -> None:
    def handler(request: httpx2.Request) -> httpx2.Response:
        token = request.headers["authorization"].removeprefix("Bearer ")
        body = {"error": {"code": "401", "message": f"Token {token} has expired"}}
        return httpx2.Response(401, json=body)

    target = allama.provider(
        "azure-openai", endpoint=RESOURCE, access_token=_Tokens(), transport=_both_ways(handler)
    )
    with pytest.raises(allama.errors.AuthenticationError) as caught:
        target.chat(ChatRequest("d").user("Hi"))
    assert str(caught.value) == "Token <redacted> has expired"
    assert "entra-token" not in (caught.value.context.body or "")


def test_a_token_function_that_fails_is_an_authentication_error_naming_its_type_alone() -> None:
    def failing() -> str:
        raise RuntimeError("secret-client-credential-0001 was refused")

    target = allama.provider("azure-openai", endpoint=RESOURCE, access_token=failing)
    with pytest.raises(allama.errors.AuthenticationError) as caught:
        target.chat(ChatRequest("d").user("Hi"))
    assert str(caught.value) == (
        "azure-openai's access_token= function failed (RuntimeError); nothing was sent"
    )
    assert isinstance(caught.value.__cause__, RuntimeError)


_AT_ONCE = 24
"""Calls in flight together: more than a provider keeps of the tokens it sent lately."""


def _echoing_401(request: httpx2.Request) -> httpx2.Response:
    token = request.headers["authorization"].removeprefix("Bearer ")
    body = {"error": {"code": "401", "message": f"Token {token} has expired"}}
    return httpx2.Response(401, json=body)


def _assert_no_token_shown(errors: list[allama.Error], sent: list[str]) -> None:
    assert len(set(sent)) == _AT_ONCE  # each call went with a token of its own
    for error in errors:
        assert isinstance(error, allama.errors.AuthenticationError)
        assert str(error) == "Token <redacted> has expired"
        assert error.args == ("Token <redacted> has expired",)
        assert "entra-token" not in error.to_json()


@pytest.mark.parametrize("streamed", [False, True])
def test_each_token_of_calls_in_threads_at_once_is_redacted_from_its_own_error(
    streamed: bool,
) -> None:
    # Every token is given before any call is answered: each call's is an older one than
    # the function gave last, when its error is made.
    counter = itertools.count(1)
    all_asked = threading.Barrier(_AT_ONCE)
    sent: list[str] = []

    def handler(request: httpx2.Request) -> httpx2.Response:
        sent.append(request.headers["authorization"])
        all_asked.wait(timeout=10)
        return _echoing_401(request)

    target = allama.provider(
        "azure-openai",
        endpoint=RESOURCE,
        access_token=lambda: f"entra-token-{next(counter):04d}",
        transport=_both_ways(handler),
    )
    request = ChatRequest("d").user("Hi")

    def call(_: int) -> allama.Error:
        with pytest.raises(allama.Error) as caught:
            if streamed:
                with target.chat_stream(request) as stream:
                    stream.response()
            else:
                target.chat(request)
        return caught.value

    with ThreadPoolExecutor(_AT_ONCE) as pool:
        errors = list(pool.map(call, range(_AT_ONCE)))
    _assert_no_token_shown(errors, sent)


@pytest.mark.parametrize("streamed", [False, True])
def test_each_token_of_async_calls_at_once_is_redacted_from_its_own_error(
    streamed: bool,
) -> None:
    counter = itertools.count(1)
    sent: list[str] = []

    async def token() -> str:
        return f"entra-token-{next(counter):04d}"

    async def calls() -> list[allama.Error]:
        all_asked = asyncio.Event()

        async def handler(request: httpx2.Request) -> httpx2.Response:
            sent.append(request.headers["authorization"])
            if len(sent) == _AT_ONCE:
                all_asked.set()
            await asyncio.wait_for(all_asked.wait(), timeout=10)
            return _echoing_401(request)

        client = httpx2.AsyncClient(transport=httpx2.MockTransport(handler))
        target = allama.provider(
            "azure-openai",
            endpoint=RESOURCE,
            access_token=token,
            transport=Transport(async_client=client),
        )
        request = ChatRequest("d").user("Hi")

        async def call() -> allama.Error:
            with pytest.raises(allama.Error) as caught:
                if streamed:
                    async with await target.achat_stream(request) as stream:
                        await stream.response()
                else:
                    await target.achat(request)
            return caught.value

        return await asyncio.gather(*(call() for _ in range(_AT_ONCE)))

    _assert_no_token_shown(asyncio.run(calls()), sent)


@pytest.mark.parametrize(
    ("token", "why"),
    [
        (None, "must return the token (a string), got NoneType"),
        ("", "must return the token (a string), got an empty string"),
        (
            "entra-token-0001\n",
            "returned a token with a line break or whitespace around it; return the token "
            "alone (a token read from a file often ends with a newline)",
        ),
        ("entra\ntoken", "returned a token with a line break in it; return the token alone"),
        (
            "entra\x00token",
            "returned a token with a NUL character (U+0000) in it; return the token alone",
        ),
        (
            "entra-tok\u00e9n",
            "returned a token with a character outside ASCII, which an HTTP header cannot carry",
        ),
    ],
)
def test_a_token_no_header_can_carry_is_refused_as_its_function_failing(
    token: object, why: str
) -> None:
    sent: list[httpx2.Request] = []

    async def given() -> object:
        return token

    for function in (lambda: token, given):
        target = allama.provider(
            "azure-openai",
            endpoint=RESOURCE,
            access_token=cast(Any, function),
            transport=_both_ways(lambda request: sent.append(request)),
        )
        with pytest.raises(allama.errors.AuthenticationError) as caught:
            if function is given:
                asyncio.run(target.achat(ChatRequest("d").user("Hi")))
            else:
                target.chat(ChatRequest("d").user("Hi"))
        assert str(caught.value) == f"azure-openai's access_token= function {why}; nothing was sent"
        assert caught.value.authored and caught.value.provider == "azure-openai"
    assert sent == []


def test_an_async_access_token_function_is_awaited_for_async_calls() -> None:
    # `azure.identity.aio.get_bearer_token_provider` gives one: its coroutine was taken for
    # the token (a TypeError and a "never awaited" warning).
    seen: list[httpx2.Request] = []

    def handler(request: httpx2.Request) -> httpx2.Response:
        seen.append(request)
        return httpx2.Response(200, json=_body(str(request.url)))

    async def token() -> str:
        return "async-entra-token"

    target = allama.provider(
        "azure-openai", endpoint=RESOURCE, access_token=token, transport=_both_ways(handler)
    )
    request = ChatRequest("d").user("Hi")
    asyncio.run(target.achat(request))
    assert _credentials(seen[0]) == {"authorization": "Bearer async-entra-token"}
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with pytest.raises(TypeError, match="it serves async calls alone"):
            target.chat(request)
    assert len(seen) == 1


def test_a_sync_function_returning_an_awaitable_is_awaited_for_async_calls() -> None:
    # `access_token=lambda: refresh()`, `refresh` async: its coroutine was refused in the
    # very async call that could await it ("it serves async calls alone (achat, ...)").
    seen: list[httpx2.Request] = []

    def handler(request: httpx2.Request) -> httpx2.Response:
        seen.append(request)
        return httpx2.Response(200, json=_body(str(request.url)))

    async def refresh() -> str:
        return "async-entra-token"

    target = allama.provider(
        "azure-openai",
        endpoint=RESOURCE,
        access_token=lambda: refresh(),
        transport=_both_ways(handler),
    )
    request = ChatRequest("d").user("Hi")

    async def calls() -> None:
        await target.achat(request)
        async with await target.achat_stream(request) as astream:
            await astream.response()

    asyncio.run(calls())
    assert [_credentials(sent) for sent in seen] == [
        {"authorization": "Bearer async-entra-token"}
    ] * 2
    # A sync call cannot await it: refused, the coroutine closed (no "never awaited").
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with pytest.raises(TypeError) as refused:
            target.chat(request)
    assert str(refused.value) == (
        "access_token='s function is async: it serves async calls alone (achat, "
        "achat_stream); give a sync function for sync calls"
    )
    assert len(seen) == 2


def test_an_awaitable_token_that_fails_is_an_authentication_error_naming_its_type() -> None:
    async def refresh() -> str:
        raise RuntimeError("secret-client-credential-0001 was refused")

    target = allama.provider("azure-openai", endpoint=RESOURCE, access_token=lambda: refresh())
    with pytest.raises(allama.errors.AuthenticationError) as caught:
        asyncio.run(target.achat(ChatRequest("d").user("Hi")))
    assert str(caught.value) == (
        "azure-openai's access_token= function failed (RuntimeError); nothing was sent"
    )


def test_a_short_token_from_a_function_leaves_the_providers_words_whole() -> None:
    def handler(request: httpx2.Request) -> httpx2.Response:
        body = {"error": {"code": "400", "message": "max_tokens is too large"}}
        return httpx2.Response(400, json=body)

    target = allama.provider(
        "azure-openai", endpoint=RESOURCE, access_token=lambda: "tok", transport=_both_ways(handler)
    )
    with pytest.raises(allama.InvalidRequestError) as caught:
        target.chat(ChatRequest("d").user("Hi"))
    assert caught.value.message == "max_tokens is too large"


# 9. A port or host no call can reach, an option the preset does not read, an empty key


_BAD_HOST = (
    "has a host that is no valid name (an empty label, as in `a..b`, one over 63 characters, "
    "or over 253 in all)"
)


@pytest.mark.parametrize(
    ("name", "argument", "value", "message"),
    [
        # Async calls failed as a raw ExceptionGroup (OverflowError), sync ones as a
        # NetworkError; `:0` went to port 80.
        ("openai", "base_url", "http://127.0.0.1:70000/v1", "has port 70000, outside 1-65535"),
        ("openai", "base_url", "http://127.0.0.1:0/v1", "has port 0, outside 1-65535"),
        ("azure-openai", "endpoint", f"{RESOURCE}:65536", "has port 65536, outside 1-65535"),
        # Sync calls failed as a raw UnicodeError (the idna codec), async ones as a
        # NetworkError.
        ("openai", "base_url", "http://a..b/v1", _BAD_HOST),
        ("openai", "base_url", f"http://{'a' * 64}.example/v1", _BAD_HOST),
        ("openai-compatible", "base_url", "http://.example/v1", _BAD_HOST),
        ("openai", "base_url", f"http://{'.'.join(['a' * 60] * 5)}/v1", _BAD_HOST),
    ],
)
def test_a_url_with_a_port_or_host_no_call_can_reach_is_refused_naming_the_argument(
    name: str, argument: str, value: str, message: str
) -> None:
    sent: list[httpx2.Request] = []
    transport = _both_ways(sent.append)
    with pytest.raises(ValueError) as caught:
        allama.provider(name, api_key=SECRET, transport=transport, **{argument: value})
    assert str(caught.value) == f"{argument} {message}"
    assert sent == []


@pytest.mark.parametrize(
    ("variable", "value", "name", "message"),
    [
        ("OLLAMA_HOST", "127.0.0.1:70000", "ollama", "has port 70000, outside 1-65535"),
        ("OPENAI_BASE_URL", "http://a..b/v1", "openai", _BAD_HOST),
    ],
)
def test_an_environment_url_with_a_port_or_host_no_call_can_reach_is_refused_naming_it(
    monkeypatch: pytest.MonkeyPatch, variable: str, value: str, name: str, message: str
) -> None:
    monkeypatch.setenv(variable, value)
    with pytest.raises(ValueError) as caught:
        allama.provider(name, api_key=SECRET)
    assert str(caught.value) == f"the {variable} environment variable {message}"


@pytest.mark.parametrize(
    "url",
    [
        "http://127.0.0.1:1/v1",
        "http://127.0.0.1:65535/v1",
        f"http://{'a' * 63}.example/v1",
        "http://gw.example./v1",  # a fully qualified name
        "http://[::1]:8080/v1",
        "http://bücher.example/v1",  # sent IDNA-encoded
    ],
)
def test_a_url_at_the_edges_of_what_a_call_can_reach_is_still_taken(url: str) -> None:
    sent: list[str] = []

    def handler(request: httpx2.Request) -> httpx2.Response:
        sent.append(str(request.url))
        return httpx2.Response(200, json=_BODIES["chat"])

    target = allama.provider("openai", api_key=SECRET, base_url=url, transport=_both_ways(handler))
    target.chat(ChatRequest("m").user("Hi"))
    asyncio.run(target.achat(ChatRequest("m").user("Hi")))
    expected = str(httpx2.URL(f"{url}/chat/completions"))
    assert sent == [expected, expected]


@pytest.mark.parametrize(
    ("name", "option", "value", "message"),
    [
        # Sent as `?api-version=` on every call.
        (
            "openai",
            "api_version",
            "2024-10-21",
            "openai takes no api_version= (azure-openai and azure-foundry take it); an "
            "endpoint that needs one takes it written into base_url= (...?api-version=...)",
        ),
        (
            "anthropic",
            "api_version",
            "2023-06-01",
            "anthropic takes no api_version= (azure-openai and azure-foundry take it); an "
            "endpoint that needs one takes it written into base_url= (...?api-version=...)",
        ),
        (
            "gemini",
            "api_version",
            "v1",
            "gemini takes no api_version= (azure-openai and azure-foundry take it); an "
            "endpoint that needs one takes it written into base_url= (...?api-version=...)",
        ),
        # Dropped without a word.
        (
            "openai",
            "project",
            "proj_1",
            "openai takes no project= (vertex-gemini takes it); an OpenAI project goes as a "
            "header: headers={'OpenAI-Project': ...}",
        ),
        ("gemini", "project", "p", "gemini takes no project= (vertex-gemini takes it)"),
        ("gemini", "location", "us-central1", "gemini takes no location= (vertex-gemini takes it)"),
        (
            "groq",
            "account_id",
            "acct",
            "groq takes no account_id= (workers-ai and azure-anthropic take it)",
        ),
        (
            "local",
            "project",
            "p",
            "local takes no project= (vertex-gemini takes it)",
        ),
        (
            "openai",
            "credentials",
            object(),
            "openai takes no credentials= (vertex-gemini takes it); pass api_key=",
        ),
    ],
)
def test_an_option_the_preset_does_not_read_is_refused_naming_the_presets_that_do(
    name: str, option: str, value: object, message: str
) -> None:
    sent: list[httpx2.Request] = []
    with pytest.raises(TypeError) as caught:
        allama.provider(name, api_key=SECRET, transport=_both_ways(sent.append), **{option: value})
    assert str(caught.value) == message
    assert sent == []


@pytest.mark.parametrize(
    ("name", "options", "url"),
    [
        (
            "azure-openai",
            {"endpoint": RESOURCE, "api_version": "2025-01-01-preview"},
            f"{RESOURCE}/openai/deployments/m/chat/completions?api-version=2025-01-01-preview",
        ),
        (
            "azure-foundry",
            {"endpoint": "https://r.services.ai.azure.com/models", "api_version": "2024-05-01"},
            "https://r.services.ai.azure.com/models/chat/completions?api-version=2024-05-01",
        ),
        (
            "workers-ai",
            {"account_id": "acc123"},
            "https://api.cloudflare.com/client/v4/accounts/acc123/ai/v1/chat/completions",
        ),
        (
            "azure-anthropic",
            {"account_id": "res"},
            "https://res.services.ai.azure.com/anthropic/v1/messages",
        ),
        (
            "vertex-gemini",
            {"project": "p-1", "location": "us-central1", "access_token": "tok"},
            "https://us-central1-aiplatform.googleapis.com/v1/projects/p-1/locations/"
            "us-central1/publishers/google/models/m:generateContent",
        ),
    ],
)
def test_each_preset_still_takes_the_options_it_reads(
    wire: _Wire, name: str, options: dict[str, str], url: str
) -> None:
    if "access_token" not in options:
        options = {**options, "api_key": SECRET}
    assert str(wire.send(name, **options).url) == url


@pytest.mark.parametrize(
    ("option", "value"),
    [("api_key", ""), ("api_key", "  "), ("api_key", "\n"), ("access_token", "")],
)
def test_an_empty_key_or_token_is_refused_naming_it(
    monkeypatch: pytest.MonkeyPatch, option: str, value: str
) -> None:
    # `api_key=os.getenv("X", "")` switched the environment's key off, and the first call
    # said none was set.
    monkeypatch.setenv("OPENAI_API_KEY", "ENV-KEY-987654")
    with pytest.raises(ValueError) as caught:
        allama.provider("openai", **{option: value})
    # (No environment variable gives an access token: leaving it out is all there is.)
    environment = " to use the key from the environment" if option == "api_key" else ""
    assert str(caught.value) == f"{option} is empty; leave it out{environment}"


@pytest.mark.parametrize("preset", ["vllm", "llama-cpp", "openai-compatible", "ollama"])
def test_an_empty_key_to_a_server_that_needs_none_is_no_key(
    monkeypatch: pytest.MonkeyPatch, preset: str
) -> None:
    # `api_key=os.getenv("VLLM_API_KEY", "")` for a local server: no key, as before, not
    # a refusal that speaks of an environment key the preset does not need.
    monkeypatch.delenv("OLLAMA_HOST", raising=False)
    sent: list[httpx2.Request] = []

    def answer(request: httpx2.Request) -> httpx2.Response:
        sent.append(request)
        return httpx2.Response(500, json={"error": {"message": "stop here"}})

    made = allama.provider(
        preset,
        base_url="http://127.0.0.1:8000",
        api_key="",
        transport=Transport(client=httpx2.Client(transport=httpx2.MockTransport(answer))),
    )
    with pytest.raises(allama.Error):
        made.chat(ChatRequest("m").user("hi"))
    assert "authorization" not in sent[0].headers
