"""Azure OpenAI takes `max_completion_tokens` and `stream_options` from api-version
2024-09-01-preview on; an earlier version answers 400 ("Unrecognized request argument
supplied"), and the GA 2024-10-21, allama's default, has `max_tokens` alone in its request
schema (its `stream_options` it has)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from tests._recording import provider

import allama
from allama import ChatRequest, UnsupportedError, UnsupportedPolicy, WarningEvent
from allama.types import RequestField, WarningKind

ENDPOINT = "https://res.openai.azure.com"
ANSWER = {
    "id": "x",
    "object": "chat.completion",
    "model": "gpt-4o-2024-11-20",
    "choices": [
        {"index": 0, "message": {"role": "assistant", "content": "Hi"}, "finish_reason": "stop"}
    ],
    "usage": {"prompt_tokens": 3, "completion_tokens": 1, "total_tokens": 4},
}
STREAM = (
    b'data: {"id":"x","object":"chat.completion.chunk","model":"gpt-4o","choices":[{"index":0,'
    b'"delta":{"role":"assistant","content":"Hi"},"finish_reason":"stop"}]}\n\n'
    b"data: [DONE]\n\n"
)


def _sent(stream: bool, **options: Any) -> dict[str, Any]:
    options = {"endpoint": ENDPOINT, **options}
    target, recorder = provider("azure-openai", (200, STREAM if stream else ANSWER), **options)
    request = ChatRequest("dep1").user("Hi").with_max_output_tokens(300)
    if stream:
        with target.chat_stream(request) as events:
            for _ in events:
                pass
    else:
        target.chat(request)
    return recorder.bodies[0]


@pytest.mark.parametrize(
    ("options", "field"),
    [
        ({}, "max_tokens"),  # the default, 2024-10-21
        ({"api_version": "2024-10-21"}, "max_tokens"),
        ({"api_version": "2024-06-01"}, "max_tokens"),
        ({"api_version": "2024-08-01-preview"}, "max_tokens"),
        ({"api_version": "2024-09-01-preview"}, "max_completion_tokens"),
        ({"api_version": "2024-12-01-preview"}, "max_completion_tokens"),
        ({"api_version": "2025-04-01-preview"}, "max_completion_tokens"),
        ({"endpoint": f"{ENDPOINT}/openai/v1"}, "max_completion_tokens"),
    ],
)
def test_the_output_limit_goes_in_the_field_the_api_version_takes(
    options: dict[str, Any], field: str
) -> None:
    body = _sent(False, **options)
    other = {"max_tokens", "max_completion_tokens"} - {field}
    assert body[field] == 300
    assert not other & body.keys()


@pytest.mark.parametrize(
    ("version", "options"),
    [
        ("2024-08-01-preview", None),
        ("2024-06-01", None),
        ("2024-09-01-preview", {"include_usage": True}),
        ("2024-10-21", {"include_usage": True}),
    ],
)
def test_a_stream_asks_for_its_usage_where_the_api_version_takes_stream_options(
    version: str, options: dict[str, Any] | None
) -> None:
    body = _sent(True, api_version=version)
    assert body.get("stream_options") == options
    assert body["stream"] is True


@pytest.mark.parametrize("version", ["2024-10-21", "2024-08-01-preview", "2025-04-01-preview"])
@pytest.mark.parametrize("model", ["gpt-5-nano", "o4-mini"])
def test_a_reasoning_deployment_gets_the_field_it_takes_on_any_version(
    version: str, model: str
) -> None:
    """OpenAI's reasoning models answer 400 to `max_tokens` ("Use 'max_completion_tokens'
    instead"), whatever the api-version."""
    target, recorder = provider(
        "azure-openai", (200, ANSWER), endpoint=ENDPOINT, api_version=version
    )
    target.chat(ChatRequest(model).user("Hi").with_max_output_tokens(300))
    body = recorder.bodies[0]
    assert body["max_completion_tokens"] == 300
    assert "max_tokens" not in body


@pytest.mark.parametrize("version", ["2024-10-21", "2024-08-01-preview", "2025-04-01-preview"])
def test_a_deployment_named_for_no_model_asked_for_an_effort_gets_the_reasoning_limit(
    version: str,
) -> None:
    # "prod" serving o3: the effort says it is a reasoning model, which refuses `max_tokens`.
    target, recorder = provider(
        "azure-openai", (200, ANSWER), endpoint=ENDPOINT, api_version=version
    )
    target.chat(
        ChatRequest("prod").user("Hi").with_reasoning_effort("high").with_max_output_tokens(300)
    )
    body = recorder.bodies[0]
    assert body["max_completion_tokens"] == 300
    assert "max_tokens" not in body
    assert body["reasoning_effort"] == "high"


def test_a_deployment_named_for_no_model_keeps_the_versions_field_without_an_effort() -> None:
    body = _sent(False, api_version="2024-10-21")
    assert body["max_tokens"] == 300


GUESSED = (
    "`prod` on Azure OpenAI takes no `{field}` other than 1 at reasoning effort `high` (a "
    "deployment that names no model, asked for a reasoning effort, is taken for a reasoning "
    "model)"
)


@pytest.mark.parametrize("stream", [False, True])
@pytest.mark.parametrize(
    "options",
    [{}, {"api_version": "2024-12-01-preview"}, {"endpoint": f"{ENDPOINT}/openai/v1"}],
)
def test_a_deployment_named_for_no_model_asked_for_an_effort_gets_no_sampling(
    stream: bool, options: dict[str, Any]
) -> None:
    # "prod" serving o3 answers 400 to a `temperature` or `top_p` other than 1, as `o3` does.
    options = {"endpoint": ENDPOINT, **options}
    target, recorder = provider("azure-openai", (200, STREAM if stream else ANSWER), **options)
    request = (
        ChatRequest("prod")
        .user("Hi")
        .with_reasoning_effort("high")
        .with_temperature(0.2)
        .with_top_p(0.5)
    )
    if stream:
        with target.chat_stream(request) as events:
            warnings = [e.warning for e in events if isinstance(e, WarningEvent)]
    else:
        warnings = list(target.chat(request).warnings)
    body = recorder.bodies[0]
    assert "temperature" not in body
    assert "top_p" not in body
    assert body["reasoning_effort"] == "high"
    assert [(w.kind, w.message) for w in warnings] == [
        (WarningKind.UNSUPPORTED, GUESSED.format(field="temperature")),
        (WarningKind.UNSUPPORTED, GUESSED.format(field="top_p")),
    ]
    assert warnings[0].is_about(RequestField.TEMPERATURE)
    assert warnings[1].is_about(RequestField.TOP_P)


@pytest.mark.parametrize("effort", [None, "none"])
def test_a_deployment_named_for_no_model_keeps_its_sampling_without_reasoning(
    effort: str | None,
) -> None:
    target, recorder = provider("azure-openai", (200, ANSWER), endpoint=ENDPOINT)
    request = ChatRequest("prod").user("Hi").with_temperature(0.2).with_top_p(0.5)
    if effort is not None:
        request = request.with_reasoning_effort(effort)
    response = target.chat(request)
    body = recorder.bodies[0]
    assert (body["temperature"], body["top_p"]) == (0.2, 0.5)
    assert response.warnings == ()


def test_the_default_sampling_goes_to_a_deployment_asked_for_an_effort() -> None:
    target, recorder = provider("azure-openai", (200, ANSWER), endpoint=ENDPOINT)
    request = ChatRequest("prod").user("Hi").with_reasoning_effort("low").with_temperature(1)
    response = target.chat(request)
    assert recorder.bodies[0]["temperature"] == 1
    assert response.warnings == ()


def test_the_guessed_sampling_refusal_is_an_error_under_the_error_policy() -> None:
    target, recorder = provider("azure-openai", (200, ANSWER), endpoint=ENDPOINT)
    request = (
        ChatRequest("prod")
        .user("Hi")
        .with_reasoning_effort("high")
        .with_temperature(0.2)
        .with_unsupported_policy(UnsupportedPolicy.ERROR)
    )
    with pytest.raises(UnsupportedError) as raised:
        target.chat(request)
    assert str(raised.value) == "cannot send `temperature`: " + GUESSED.format(field="temperature")
    assert raised.value.field is RequestField.TEMPERATURE
    assert recorder.bodies == []


@pytest.mark.parametrize(("preset", "model"), [("openai", "prod"), ("azure-openai", "gpt-4o")])
def test_elsewhere_an_effort_leaves_the_sampling_as_it_was(preset: str, model: str) -> None:
    # OpenAI's ids name their models (an unknown one may take sampling), and `gpt-4o` on Azure
    # is named: what its row says goes.
    options = {"endpoint": ENDPOINT} if preset == "azure-openai" else {}
    target, recorder = provider(preset, (200, ANSWER), **options)
    request = ChatRequest(model).user("Hi").with_reasoning_effort("high").with_temperature(0.2)
    target.chat(request)
    assert recorder.bodies[0]["temperature"] == 0.2


def test_the_responses_api_gets_no_sampling_for_a_deployment_asked_for_an_effort() -> None:
    target = allama.provider("azure-openai", api_key="k", endpoint=ENDPOINT, api="responses")
    request = ChatRequest("prod").user("Hi").with_reasoning_effort("high").with_temperature(0.2)
    http, warnings = target._prepare(request, stream=False)
    assert "temperature" not in http.body
    assert [w.message for w in warnings] == [GUESSED.format(field="temperature")]


# Azure AI Foundry's resource serves its models on the v1 API too, which takes no dated
# api-version, as Azure OpenAI's v1 API does.

FOUNDRY = "https://r.services.ai.azure.com"
INFERENCE_VERSION = {"api-version": "2024-05-01-preview"}


@pytest.mark.parametrize(
    ("endpoint", "url"),
    [
        (FOUNDRY, f"{FOUNDRY}/models/chat/completions"),
        (f"{FOUNDRY}/models", f"{FOUNDRY}/models/chat/completions"),
    ],
)
def test_azure_foundrys_model_inference_api_gets_its_api_version(endpoint: str, url: str) -> None:
    target = allama.provider("azure-foundry", api_key="k", endpoint=endpoint)
    http, _ = target._prepare(ChatRequest("DeepSeek-R1").user("Hi"), stream=False)
    assert (http.url, dict(http.params)) == (url, INFERENCE_VERSION)


@pytest.mark.parametrize("endpoint", [f"{FOUNDRY}/openai/v1", f"{FOUNDRY}/OpenAI/V1/"])
def test_azure_foundrys_v1_api_is_azure_openais_to_speak(endpoint: str) -> None:
    """The resource's v1 API is OpenAI's: spoken by the model-inference profile, a stream
    came without usage (no `stream_options`) and efforts and log-probabilities were left
    out, all of which it takes."""
    with pytest.raises(ValueError) as caught:
        allama.provider("azure-foundry", api_key="k", endpoint=endpoint)
    assert str(caught.value) == (
        "an endpoint ending in /openai/v1 is the resource's OpenAI v1 API, which takes what "
        "the model-inference API refuses (stream usage, reasoning efforts, log-probabilities): "
        "use allama.provider('azure-openai', endpoint=...)"
    )
    target = allama.provider("azure-openai", api_key="k", endpoint=endpoint)
    http, _ = target._prepare(ChatRequest("DeepSeek-R1").user("Hi"), stream=True)
    assert http.url == f"{FOUNDRY}/openai/v1/chat/completions"
    assert json.loads(http.content)["stream_options"] == {"include_usage": True}
