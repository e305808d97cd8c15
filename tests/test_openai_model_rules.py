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
    assert body["reasoning"] == {"effort": "low"}
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


# GPT-5.x's codex, chat and pro variants: no effort `none`, and no default of `none` either,
# so neither sampling nor log-probabilities at any effort (GPT-5.1's rules are not theirs).

_VARIANTS = [
    "gpt-5-codex",
    "gpt-5.1-codex",
    "gpt-5.1-codex-mini",
    "gpt-5.1-codex-max",
    "gpt-5.2-codex",
    "gpt-5.1-chat-latest",
    "gpt-5.2-chat-latest",
    "gpt-5.2-pro",
    "gpt-5-pro",
]


def effort_sent(body: dict[str, Any], api: str) -> str | None:
    if api == "chat":
        found: str | None = body.get("reasoning_effort")
        return found
    reasoning = body.get("reasoning")
    return None if reasoning is None else str(reasoning["effort"])


@pytest.mark.parametrize("api", ["chat", "responses"])
@pytest.mark.parametrize(
    ("model", "asked", "sent", "kind"),
    [
        ("gpt-5.1-codex", "none", None, WarningKind.UNSUPPORTED),
        ("gpt-5.1-codex", "minimal", "low", WarningKind.APPROXIMATED),
        ("gpt-5.1-codex", "low", "low", None),
        ("gpt-5.1-codex-mini", "none", None, WarningKind.UNSUPPORTED),
        ("gpt-5.1-codex-mini", "medium", "medium", None),
        ("gpt-5.1-codex-max", "none", None, WarningKind.UNSUPPORTED),
        ("gpt-5.1-codex-max", "high", "high", None),
        ("gpt-5.2-codex", "none", None, WarningKind.UNSUPPORTED),
        ("gpt-5.2-codex", "minimal", "low", WarningKind.APPROXIMATED),
        ("gpt-5-codex", "minimal", "low", WarningKind.APPROXIMATED),
        ("gpt-5.1-chat-latest", "none", None, WarningKind.UNSUPPORTED),
        ("gpt-5.1-chat-latest", "high", "medium", WarningKind.APPROXIMATED),
        ("gpt-5.2-chat-latest", "none", None, WarningKind.UNSUPPORTED),
        ("gpt-5.2-chat-latest", "low", "medium", WarningKind.APPROXIMATED),
        ("gpt-5.2-chat-latest", "medium", "medium", None),
        ("gpt-5.2-pro", "none", None, WarningKind.UNSUPPORTED),
        ("gpt-5.2-pro", "low", "medium", WarningKind.APPROXIMATED),
        ("gpt-5.2-pro", "high", "high", None),
        ("gpt-5-pro", "none", None, WarningKind.UNSUPPORTED),
        ("gpt-5-pro", "medium", "high", WarningKind.APPROXIMATED),
        ("gpt-5-pro", "high", "high", None),
    ],
)
def test_gpt_5_variants_get_only_the_efforts_they_take(
    api: str, model: str, asked: str, sent: str | None, kind: WarningKind | None
) -> None:
    options = {"api": "responses"} if api == "responses" else {}
    request = ChatRequest(model).user("x").with_reasoning_effort(asked)
    body, warnings = prepared("openai", request, **options)
    assert effort_sent(body, api) == sent
    said = f"`{model}` on OpenAI takes no reasoning effort `{asked}`"
    expected = {
        None: [],
        WarningKind.APPROXIMATED: [(kind, f"{said}; `{sent}` was sent")],
        WarningKind.UNSUPPORTED: [(kind, said)],
    }[kind]
    assert about(warnings, RequestField.REASONING_EFFORT) == expected


@pytest.mark.parametrize("api", ["chat", "responses"])
@pytest.mark.parametrize("effort", [None, "none", "high"])
@pytest.mark.parametrize("model", _VARIANTS)
def test_gpt_5_variants_get_no_sampling_or_logprobs_at_any_effort(
    api: str, effort: str | None, model: str
) -> None:
    options = {"api": "responses"} if api == "responses" else {}
    request = ChatRequest(model).user("x").with_temperature(0.2).with_top_p(0.5).with_logprobs(3)
    body, warnings = prepared("openai", request.with_reasoning_effort(effort), **options)
    for key in ("temperature", "top_p", "logprobs", "top_logprobs"):
        assert key not in body
    assert "message.output_text.logprobs" not in body.get("include", [])
    where = f"`{model}` on OpenAI"
    assert about(warnings, RequestField.TEMPERATURE) == [
        (WarningKind.UNSUPPORTED, f"{where} takes no `temperature` other than 1")
    ]
    assert about(warnings, RequestField.TOP_P) == [
        (WarningKind.UNSUPPORTED, f"{where} takes no `top_p` other than 1")
    ]
    why = f"{where} reports no log-probabilities"
    if api == "responses":
        why += " (logprobs are not supported for reasoning models)"
    assert about(warnings, RequestField.LOGPROBS) == [(WarningKind.UNSUPPORTED, why)]


@pytest.mark.parametrize("api", ["chat", "responses"])
def test_gpt_5_1_and_5_2_themselves_keep_their_rules(api: str) -> None:
    # The rows for the variants match none of the base models.
    options = {"api": "responses"} if api == "responses" else {}
    for model in ("gpt-5.1", "gpt-5.2", "gpt-5.2-2025-12-11"):
        request = ChatRequest(model).user("x").with_temperature(0.2).with_reasoning_effort("none")
        body, warnings = prepared("openai", request, **options)
        assert effort_sent(body, api) == "none" and body["temperature"] == 0.2
        assert warnings == []


@pytest.mark.parametrize("api", ["chat", "responses"])
def test_a_gpt_5_1_chat_model_reasons_unlike_gpt_5_chat(api: str) -> None:
    options = {"api": "responses"} if api == "responses" else {}
    body, warnings = prepared("openai", ChatRequest("gpt-5.2-chat-latest").user("x"), **options)
    if api == "responses":
        assert body["include"] == ["reasoning.encrypted_content"]
    assert "stop" not in body and warnings == []
    body, warnings = prepared(
        "openai", ChatRequest("gpt-5.2-chat-latest").user("x").with_stop("END"), **options
    )
    assert "stop" not in body
    said = (
        "the Responses API takes no stop sequences"
        if api == "responses"
        else "`gpt-5.2-chat-latest` on OpenAI takes no stop sequences"
    )
    assert about(warnings, RequestField.STOP) == [(WarningKind.UNSUPPORTED, said)]


# Groq: only GPT-OSS and Qwen3 reason; a `reasoning_effort` for another model is a 400.


@pytest.mark.parametrize(
    "model",
    [
        "meta-llama/llama-4-maverick-17b-128e-instruct",
        "meta-llama/llama-guard-4-12b",
        "llama3-70b-8192",
        "llama3-groq-70b-8192-tool-use-preview",
        "moonshotai/kimi-k2-instruct-0905",
    ],
)
def test_groqs_models_that_do_not_reason_are_sent_no_effort(model: str) -> None:
    body, warnings = prepared("groq", ChatRequest(model).user("x").with_reasoning_effort("low"))
    assert "reasoning_effort" not in body
    assert about(warnings, RequestField.REASONING_EFFORT) == [
        (WarningKind.UNSUPPORTED, f"`{model}` on Groq takes no reasoning effort")
    ]
    # Asked not to reason, the model already does as asked: nothing is said.
    body, warnings = prepared("groq", ChatRequest(model).user("x").with_reasoning_effort("none"))
    assert "reasoning_effort" not in body and warnings == []


@pytest.mark.parametrize(
    ("model", "sent"),
    [
        ("openai/gpt-oss-safeguard-20b", "high"),
        ("openai/gpt-oss-20b", "high"),
        ("qwen/qwen3-32b", "default"),
    ],
)
def test_groqs_reasoning_models_keep_their_efforts(model: str, sent: str) -> None:
    body, _ = prepared("groq", ChatRequest(model).user("x").with_reasoning_effort("high"))
    assert body["reasoning_effort"] == sent


def test_kimi_k2_on_groq_is_asked_for_its_schema_best_effort() -> None:
    """Groq takes `json_schema` from Kimi K2 Instruct 0905 without `strict` (best-effort),
    where the models no row names have JSON mode alone."""
    from allama import ResponseFormat

    schema = {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}
    asked = ChatRequest("moonshotai/kimi-k2-instruct-0905").user("x")
    body, _ = prepared("groq", asked.with_response_format(ResponseFormat.for_schema(schema)))
    assert body["response_format"]["type"] == "json_schema"
    assert body["response_format"]["json_schema"]["strict"] is False
