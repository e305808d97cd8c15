"""What OpenAI's and Groq's models refuse, left out (or mapped) with a warning rather than
sent to fail: sampling on reasoning models, `stop` on GPT-5, more than four stop sequences,
reasoning efforts a model does not take."""

from __future__ import annotations

from typing import Any

import pytest

import allama
from allama import ChatRequest
from allama.types import ImagePart, RequestField, Warning, WarningKind


def prepared(
    preset: str, request: ChatRequest, **options: Any
) -> tuple[dict[str, Any], list[Warning]]:
    if preset in ("vllm", "openai-compatible"):
        options.setdefault("base_url", "http://127.0.0.1:9/v1")
    target = allama.provider(preset, api_key="sk-test", **options)
    http, warnings = target._prepare(request, stream=False)
    return http.body, list(warnings)


def about(warnings: list[Warning], field: RequestField) -> list[tuple[WarningKind, str]]:
    return [(w.kind, w.message) for w in warnings if w.is_about(field)]


@pytest.mark.parametrize("api", ["chat", "responses"])
@pytest.mark.parametrize(
    "model",
    # A fine-tune takes what its base model takes.
    ["gpt-5", "gpt-5-mini-2025-08-07", "o3", "o4-mini", "o1", "ft:o4-mini-2025-04-16:acme::x1"],
)
def test_a_reasoning_model_gets_no_sampling_other_than_the_default(api: str, model: str) -> None:
    options = {"api": "responses"} if api == "responses" else {}
    request = ChatRequest(model).user("x").with_temperature(0.2).with_top_p(1.0)
    body, warnings = prepared("openai", request, **options)
    assert "temperature" not in body
    assert body["top_p"] == 1.0  # the default is taken
    assert about(warnings, RequestField.TEMPERATURE) == [
        (WarningKind.UNSUPPORTED, f"`{model}` on OpenAI takes no `temperature` other than 1")
    ]
    assert about(warnings, RequestField.TOP_P) == []


@pytest.mark.parametrize("api", ["chat", "responses"])
def test_gpt_5_1_takes_sampling_only_without_reasoning(api: str) -> None:
    options = {"api": "responses"} if api == "responses" else {}
    plain = ChatRequest("gpt-5.1").user("x").with_temperature(0.2)
    body, warnings = prepared("openai", plain, **options)
    assert body["temperature"] == 0.2 and about(warnings, RequestField.TEMPERATURE) == []
    body, warnings = prepared("openai", plain.with_reasoning_effort("none"), **options)
    assert body["temperature"] == 0.2 and about(warnings, RequestField.TEMPERATURE) == []
    body, warnings = prepared("openai", plain.with_reasoning_effort("low"), **options)
    assert "temperature" not in body
    assert about(warnings, RequestField.TEMPERATURE) == [
        (
            WarningKind.UNSUPPORTED,
            "`gpt-5.1` on OpenAI takes no `temperature` other than 1 unless it reasons at "
            "effort `none`",
        )
    ]


@pytest.mark.parametrize("model", ["gpt-4o", "gpt-4.1-mini", "gpt-5-chat-latest"])
def test_other_models_get_the_sampling_asked_for(model: str) -> None:
    request = ChatRequest(model).user("x").with_temperature(0.2).with_top_p(0.5)
    body, warnings = prepared("openai", request)
    assert (body["temperature"], body["top_p"]) == (0.2, 0.5)
    assert warnings == []


def test_the_sampling_refusal_is_an_error_under_the_error_policy() -> None:
    request = (
        ChatRequest("o3")
        .user("x")
        .with_temperature(0)
        .with_unsupported_policy(allama.UnsupportedPolicy.ERROR)
    )
    with pytest.raises(allama.UnsupportedError) as caught:
        prepared("openai", request)
    assert caught.value.field is RequestField.TEMPERATURE


@pytest.mark.parametrize(
    "model", ["gpt-5", "gpt-5.1", "gpt-5.2-2025-12-11", "o3", "ft:o4-mini-2025-04-16:acme::x1"]
)
def test_gpt_5_and_o3_get_no_stop_sequences(model: str) -> None:
    body, warnings = prepared("openai", ChatRequest(model).user("x").with_stop("END"))
    assert "stop" not in body
    assert about(warnings, RequestField.STOP) == [
        (WarningKind.UNSUPPORTED, f"`{model}` on OpenAI takes no stop sequences")
    ]


@pytest.mark.parametrize(("preset", "display"), [("openai", "OpenAI"), ("groq", "Groq")])
def test_more_than_four_stop_sequences_are_cut_to_four(preset: str, display: str) -> None:
    model = "gpt-4o" if preset == "openai" else "llama-3.3-70b-versatile"
    request = ChatRequest(model).user("x").with_stop("a", "b", "c", "d", "e")
    body, warnings = prepared(preset, request)
    assert body["stop"] == ["a", "b", "c", "d"]
    assert about(warnings, RequestField.STOP) == [
        (
            WarningKind.UNSUPPORTED,
            f"{display} takes at most 4 stop sequences; the first 4 were sent",
        )
    ]
    four, warnings = prepared(preset, ChatRequest(model).user("x").with_stop("a", "b", "c", "d"))
    assert four["stop"] == ["a", "b", "c", "d"] and warnings == []


def test_an_endpoint_without_a_known_limit_gets_every_stop_sequence() -> None:
    request = ChatRequest("m").user("x").with_stop("a", "b", "c", "d", "e", "f")
    body, warnings = prepared("vllm", request)
    assert body["stop"] == ["a", "b", "c", "d", "e", "f"]
    assert about(warnings, RequestField.STOP) == []


@pytest.mark.parametrize(
    ("preset", "model", "asked", "sent", "kind"),
    [
        ("openai", "gpt-5", "none", "minimal", WarningKind.APPROXIMATED),
        ("openai", "gpt-5", "minimal", "minimal", None),
        ("openai", "gpt-5.1", "minimal", "low", WarningKind.APPROXIMATED),
        ("openai", "gpt-5.1", "none", "none", None),
        ("openai", "o3", "minimal", "low", WarningKind.APPROXIMATED),
        ("openai", "o4-mini", "high", "high", None),
        ("groq", "openai/gpt-oss-120b", "minimal", "low", WarningKind.APPROXIMATED),
        ("groq", "openai/gpt-oss-20b", "medium", "medium", None),
        ("groq", "openai/gpt-oss-120b", "none", None, WarningKind.UNSUPPORTED),
        ("groq", "qwen/qwen3-32b", "low", "default", WarningKind.APPROXIMATED),
        ("groq", "qwen/qwen3-32b", "none", "none", None),
    ],
)
def test_reasoning_efforts_a_model_does_not_take_are_mapped_or_left_out(
    preset: str, model: str, asked: str, sent: str | None, kind: WarningKind | None
) -> None:
    body, warnings = prepared(preset, ChatRequest(model).user("x").with_reasoning_effort(asked))
    assert body.get("reasoning_effort") == sent
    found = about(warnings, RequestField.REASONING_EFFORT)
    assert [k for k, _ in found] == ([] if kind is None else [kind])


def test_the_responses_api_maps_efforts_the_same_way() -> None:
    request = ChatRequest("gpt-5.1").user("x").with_reasoning_effort("minimal")
    body, warnings = prepared("openai", request, api="responses")
    assert body["reasoning"] == {"effort": "low", "summary": "auto"}
    assert about(warnings, RequestField.REASONING_EFFORT) == [
        (
            WarningKind.APPROXIMATED,
            "`gpt-5.1` on OpenAI takes no reasoning effort `minimal`; `low` was sent",
        )
    ]


@pytest.mark.parametrize(("preset", "model"), [("deepseek", "deepseek-chat"), ("openai", "gpt-4")])
def test_an_image_the_model_cannot_read_is_left_out(preset: str, model: str) -> None:
    image = ImagePart(url="https://example.com/cat.png")
    body, warnings = prepared(preset, ChatRequest(model).user("Which animal?", image))
    assert body["messages"][-1]["content"] == [{"type": "text", "text": "Which animal?"}]
    display = "DeepSeek" if preset == "deepseek" else "OpenAI"
    assert about(warnings, RequestField.IMAGES) == [
        (
            WarningKind.UNSUPPORTED,
            f"`{model}` on {display} takes no images; the image was left out",
        )
    ]


def test_a_model_that_reads_images_gets_them() -> None:
    image = ImagePart(url="https://example.com/cat.png")
    body, warnings = prepared("openai", ChatRequest("gpt-4o").user("Which animal?", image))
    assert body["messages"][-1]["content"][1] == {
        "type": "image_url",
        "image_url": {"url": "https://example.com/cat.png"},
    }
    assert warnings == []


def test_deepseek_reasoner_sampling_is_said_to_have_no_effect() -> None:
    request = ChatRequest("deepseek-reasoner").user("x").with_temperature(0)
    body, warnings = prepared("deepseek", request)
    assert "temperature" not in body
    assert [kind for kind, _ in about(warnings, RequestField.TEMPERATURE)] == [
        WarningKind.UNSUPPORTED
    ]


def test_mistral_is_not_asked_for_log_probabilities() -> None:
    request = ChatRequest("mistral-large-latest").user("x").with_logprobs(3)
    body, warnings = prepared("mistral", request)
    assert "logprobs" not in body and "top_logprobs" not in body
    assert about(warnings, RequestField.LOGPROBS) == [
        (
            WarningKind.UNSUPPORTED,
            "`mistral-large-latest` on Mistral reports no log-probabilities",
        )
    ]
