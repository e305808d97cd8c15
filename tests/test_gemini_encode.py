"""Encoding for Gemini (`generateContent`), on the Gemini API and Vertex AI: the URL, the
body, the warnings and refusals of what a Gemini family cannot honour, and the credentials."""

from __future__ import annotations

import asyncio
import base64
import datetime
import json
from typing import Any

import httpx2
import pytest
from pydantic import BaseModel, Field

import allama
from allama import ChatRequest, ExtractionMode, Extractor
from allama.adapters.gemini import decode_response
from allama.errors import AuthenticationError, InvalidRequestError, UnsupportedError
from allama.providers import HttpProvider
from allama.transport import Transport
from allama.types import (
    DocumentPart,
    ImagePart,
    Reasoning,
    RequestField,
    ResponseFormat,
    TextPart,
    ToolCall,
    ToolChoice,
    ToolDefinition,
    UnsupportedPolicy,
    UnsupportedStage,
    UserMessage,
    Warning,
    WarningKind,
)

KEY = "AIza-test-key-1234"
PERSON = {
    "type": "object",
    "properties": {"name": {"type": "string"}, "age": {"type": "integer", "minimum": 0}},
    "required": ["name", "age"],
}


def encode(
    request: ChatRequest, *, stream: bool = False, name: str = "gemini", **options: Any
) -> tuple[str, dict[str, str], dict[str, str], dict[str, Any], list[Warning]]:
    target: HttpProvider = allama.provider(name, **{"api_key": KEY, **options})
    http, warnings = target._prepare(request, stream=stream)
    assert json.loads(http.content) == http.body
    return http.url, dict(http.params), dict(http.headers), http.body, warnings


def fields(warnings: list[Warning]) -> list[tuple[str, str]]:
    return [(str(getattr(w.subject, "field", "")), str(w.kind)) for w in warnings]


def test_url_key_header_and_a_plain_body() -> None:
    url, params, headers, body, warnings = encode(ChatRequest("gemini-2.5-flash").user("Hi"))
    assert url == (
        "https://generativelanguage.googleapis.com/v1beta/models/gemini-2.5-flash:generateContent"
    )
    assert params == {}
    assert headers == {
        "content-type": "application/json",
        "accept": "application/json",
        "x-goog-api-key": KEY,
    }
    assert body == {"contents": [{"role": "user", "parts": [{"text": "Hi"}]}]}
    assert warnings == []


def test_streams_use_sse_and_model_names_keep_their_resource_form() -> None:
    url, params, headers, _, _ = encode(
        ChatRequest("models/gemini-2.5-pro").user("Hi"), stream=True
    )
    assert url.endswith("/v1beta/models/gemini-2.5-pro:streamGenerateContent")
    assert params == {"alt": "sse"} and headers["accept"] == "text/event-stream"
    url, _, _, _, _ = encode(ChatRequest("tunedModels/my-tune").user("Hi"))
    assert url.endswith("/v1beta/tunedModels/my-tune:generateContent")


def test_the_key_comes_from_either_environment_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("GEMINI_API_KEY", raising=False)
    monkeypatch.setenv("GOOGLE_API_KEY", "from-google")
    target = allama.provider("gemini")
    http, _ = target._prepare(ChatRequest("gemini-2.5-flash").user("Hi"), stream=False)
    assert http.headers["x-goog-api-key"] == "from-google"
    monkeypatch.setenv("GEMINI_API_KEY", "from-gemini")
    http, _ = allama.provider("gemini")._prepare(ChatRequest("m").user("Hi"), stream=False)
    assert http.headers["x-goog-api-key"] == "from-gemini"
    monkeypatch.delenv("GEMINI_API_KEY")
    monkeypatch.delenv("GOOGLE_API_KEY")
    with pytest.raises(AuthenticationError, match="set GEMINI_API_KEY or GOOGLE_API_KEY"):
        allama.provider("gemini")._prepare(ChatRequest("m").user("Hi"), stream=False)


def test_system_turns_roles_and_parts() -> None:
    call = ToolCall.of("call_0", "lookup", {"city": "Paris"})
    named = ToolCall.of("fc-7", "lookup", {"city": "Rome"})
    request = (
        ChatRequest("gemini-2.5-flash")
        .system("Be brief.")
        .user(
            "Look",
            ImagePart(data=b"\x89PNG", media_type="image/png"),
            ImagePart(url="gs://bucket/cat.jpg"),
            DocumentPart(data=b"%PDF", media_type="application/pdf"),
        )
        .assistant([Reasoning(text="", signature="c2ln"), call, named])
        .tool_result(call, "18C")
        .tool_result(named, "boom", is_error=True)
    )
    _, _, _, body, warnings = encode(request)
    assert body["systemInstruction"] == {"parts": [{"text": "Be brief."}]}
    assert body["contents"] == [
        {
            "role": "user",
            "parts": [
                {"text": "Look"},
                {
                    "inlineData": {
                        "mimeType": "image/png",
                        "data": base64.b64encode(b"\x89PNG").decode(),
                    }
                },
                {"fileData": {"fileUri": "gs://bucket/cat.jpg", "mimeType": "image/jpeg"}},
                {"inlineData": {"mimeType": "application/pdf", "data": "JVBERg=="}},
            ],
        },
        {
            "role": "model",
            "parts": [
                # The signature goes back on the part it came with, the decoder's convention.
                {
                    "functionCall": {"name": "lookup", "args": {"city": "Paris"}},
                    "thoughtSignature": "c2ln",
                },
                {"functionCall": {"id": "fc-7", "name": "lookup", "args": {"city": "Rome"}}},
            ],
        },
        {
            "role": "user",
            "parts": [
                {"functionResponse": {"name": "lookup", "response": {"output": "18C"}}},
                {
                    "functionResponse": {
                        "id": "fc-7",
                        "name": "lookup",
                        "response": {"error": "boom"},
                    }
                },
            ],
        },
    ]
    assert warnings == []


def test_thoughts_go_back_as_thought_parts() -> None:
    request = (
        ChatRequest("gemini-2.5-flash")
        .user("Hi")
        .assistant([Reasoning(text="hmm", signature="c2ln"), TextPart(text="Hello")])
        .user("Again")
    )
    _, _, _, body, _ = encode(request)
    assert body["contents"][1]["parts"] == [
        {"text": "hmm", "thought": True, "thoughtSignature": "c2ln"},
        {"text": "Hello"},
    ]


def test_a_signature_on_an_empty_text_part_goes_back_on_it() -> None:
    """Gemini 3 may end a turn with `{"text": "", "thoughtSignature": ...}`; the decoder reads
    it as a signed text-less reasoning block and an empty text, which go back as they came."""
    parts = [{"text": "Hello"}, {"text": "", "thoughtSignature": "c2ln"}]
    body = {"candidates": [{"content": {"role": "model", "parts": parts}, "finishReason": "STOP"}]}
    answer = decode_response(200, {}, json.dumps(body).encode())
    request = ChatRequest("gemini-3-flash-preview").user("Hi").assistant(list(answer.content))
    _, _, _, sent, _ = encode(request.user("Again"))
    assert sent["contents"][1] == {"role": "model", "parts": parts}
    # A turn of nothing but that part is kept, rather than merging the user turns around it.
    only = {"candidates": [{"content": {"role": "model", "parts": parts[1:]}}]}
    answer = decode_response(200, {}, json.dumps(only).encode())
    request = ChatRequest("gemini-3-flash-preview").user("Hi").assistant(list(answer.content))
    _, _, _, sent, _ = encode(request.user("Again"))
    assert [turn["role"] for turn in sent["contents"]] == ["user", "model", "user"]
    assert sent["contents"][1]["parts"] == parts[1:]


def test_a_tool_result_must_answer_an_earlier_call() -> None:
    request = ChatRequest("gemini-2.5-flash").user("Hi").tool_result("nope", "x")
    with pytest.raises(
        InvalidRequestError, match="answers no tool call of an earlier assistant turn"
    ):
        encode(request)


def test_generation_config_and_stop_sequences() -> None:
    request = (
        ChatRequest("gemini-2.5-flash")
        .user("Hi")
        .with_temperature(0.3)
        .with_top_p(0.9)
        .with_max_output_tokens(100)
        .with_seed(7)
        .with_stop("a", "b", "c", "d", "e", "f")
        .with_option_json("gemini", {"generationConfig": {"topK": 40}, "safetySettings": []})
    )
    _, _, _, body, warnings = encode(request)
    assert body["generationConfig"] == {
        "temperature": 0.3,
        "topP": 0.9,
        "maxOutputTokens": 100,
        "stopSequences": ["a", "b", "c", "d", "e"],
        "seed": 7,
        "topK": 40,
    }
    assert body["safetySettings"] == []
    assert fields(warnings) == [("stop", "unsupported")]


@pytest.mark.parametrize(
    ("name", "display"), [("gemini", "Gemini"), ("vertex-gemini", "Gemini on Vertex AI")]
)
def test_a_temperature_above_two_is_left_out_with_the_words_of_the_other_providers(
    name: str, display: str
) -> None:
    # Gemini documents `temperature` from 0.0 to 2.0 and answers 400 past it: sent, the
    # whole request (each input of a batch) would be refused.
    request = ChatRequest("gemini-2.5-flash").user("Hi").with_temperature(5).with_top_p(0.5)
    _, _, _, body, warnings = encode(request, name=name)
    assert body["generationConfig"] == {"topP": 0.5}
    assert [(w.kind, w.message) for w in warnings] == [
        (WarningKind.UNSUPPORTED, f"{display} takes `temperature` from 0 to 2; 5 was left out")
    ]
    assert warnings[0].is_about(RequestField.TEMPERATURE)
    _, _, _, body, warnings = encode(request.with_temperature(2), name=name)
    assert body["generationConfig"] == {"temperature": 2, "topP": 0.5}
    assert warnings == []
    strict = request.with_temperature(2.5).with_unsupported_policy(UnsupportedPolicy.ERROR)
    with pytest.raises(UnsupportedError) as raised:
        encode(strict, name=name)
    assert (
        str(raised.value) == f"cannot send `temperature`: {display} takes `temperature` from 0 to 2"
    )


def test_tools_and_the_forced_tool() -> None:
    request = (
        ChatRequest("gemini-2.5-flash")
        .user("Hi")
        .with_tools(
            [ToolDefinition(name="person", parameters=PERSON, description="A person", strict=True)]
        )
        .with_tool_choice(ToolChoice.tool("person"))
    )
    _, _, _, body, warnings = encode(request)
    assert body["tools"] == [
        {
            "functionDeclarations": [
                {"name": "person", "description": "A person", "parametersJsonSchema": PERSON}
            ]
        }
    ]
    assert body["toolConfig"] == {
        "functionCallingConfig": {"mode": "ANY", "allowedFunctionNames": ["person"]}
    }
    # Gemini has no strict function calling: the seed's "forced tool: not enforced".
    assert fields(warnings) == [("tools", "unsupported")]
    _, _, _, body, warnings = encode(
        request.with_tool_choice(ToolChoice.none()).with_parallel_tool_calls(False)
    )
    assert body["toolConfig"] == {"functionCallingConfig": {"mode": "NONE"}}
    assert ("parallel_tool_calls", "unsupported") in fields(warnings)


def test_older_families_declare_tools_in_the_openapi_subset() -> None:
    request = (
        ChatRequest("gemini-1.5-flash")
        .user("Hi")
        .with_tools([ToolDefinition(name="person", parameters=PERSON)])
    )
    _, _, _, body, _ = encode(request)
    (declaration,) = body["tools"][0]["functionDeclarations"]
    assert declaration["parameters"]["type"] == "OBJECT"
    assert "parametersJsonSchema" not in declaration


def test_native_output_per_schema_surface() -> None:
    fmt = ResponseFormat.for_schema(PERSON, name="person")
    _, _, _, body, warnings = encode(
        ChatRequest("gemini-2.5-flash").user("Hi").with_response_format(fmt)
    )
    assert body["generationConfig"]["responseMimeType"] == "application/json"
    assert body["generationConfig"]["responseJsonSchema"]["properties"]["age"] == {
        "type": "integer",
        "minimum": 0,
    }
    assert warnings == []
    _, _, _, body, warnings = encode(
        ChatRequest("gemini-1.5-flash").user("Hi").with_response_format(fmt)
    )
    assert body["generationConfig"]["responseSchema"]["properties"]["age"] == {
        "type": "INTEGER",
        "minimum": 0,
    }
    assert "responseJsonSchema" not in body["generationConfig"]
    _, _, _, body, warnings = encode(
        ChatRequest("gemini-2.5-flash")
        .user("Hi")
        .with_response_format(ResponseFormat.json_object())
    )
    assert body["generationConfig"] == {"responseMimeType": "application/json"}


@pytest.mark.parametrize("policy", [UnsupportedPolicy.WARN, UnsupportedPolicy.ERROR])
def test_what_gemini_cannot_enforce_is_refused_before_sending(policy: UnsupportedPolicy) -> None:
    recursive = {
        "$defs": {"Node": {"type": "object", "properties": {"next": {"$ref": "#/$defs/Node"}}}},
        "$ref": "#/$defs/Node",
    }
    request = ChatRequest("gemini-2.5-flash").user("Hi").with_unsupported_policy(policy)
    with pytest.raises(UnsupportedError) as caught:
        encode(request.with_response_format(ResponseFormat.for_schema(recursive)))
    assert caught.value.field is RequestField.RESPONSE_FORMAT
    assert caught.value.stage is UnsupportedStage.BEFORE_SENDING
    # JSON output beside function declarations: 400 on Gemini 2.5 and older.
    both = request.with_response_format(ResponseFormat.for_schema(PERSON)).with_tools(
        [ToolDefinition(name="f")]
    )
    with pytest.raises(
        UnsupportedError, match="answers 400 to JSON output beside function declarations"
    ):
        encode(both)
    encode(both.model_copy(update={"model": "gemini-3-flash-preview"}))


def test_thinking_budgets_and_levels() -> None:
    def thinking(model: str, effort: str) -> tuple[Any, list[tuple[str, str]]]:
        _, _, _, body, warnings = encode(
            ChatRequest(model).user("Hi").with_reasoning_effort(effort)
        )  # type: ignore[arg-type]
        return body.get("generationConfig", {}).get("thinkingConfig"), fields(warnings)

    assert thinking("gemini-2.5-flash", "medium") == ({"thinkingBudget": 8192}, [])
    assert thinking("gemini-2.5-flash", "none") == ({"thinkingBudget": 0}, [])
    # Pro cannot turn thinking off: its lowest budget, with a warning.
    assert thinking("gemini-2.5-pro", "none") == (
        {"thinkingBudget": 128},
        [("reasoning_effort", "unsupported")],
    )
    assert thinking("gemini-2.5-pro", "minimal") == ({"thinkingBudget": 512}, [])
    assert thinking("gemini-2.5-flash-lite", "high") == ({"thinkingBudget": 24576}, [])
    assert thinking("gemini-3-flash-preview", "minimal") == ({"thinkingLevel": "MINIMAL"}, [])
    assert thinking("gemini-3-pro-preview", "medium") == (
        {"thinkingLevel": "HIGH"},
        [("reasoning_effort", "approximated")],
    )
    assert thinking("gemini-2.0-flash", "low") == (None, [("reasoning_effort", "unsupported")])


def test_vertex_urls_from_project_and_location(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in (
        "GOOGLE_CLOUD_PROJECT",
        "GCLOUD_PROJECT",
        "CLOUDSDK_CORE_PROJECT",
        "GOOGLE_CLOUD_LOCATION",
        "GOOGLE_CLOUD_REGION",
        "CLOUD_ML_REGION",
    ):
        monkeypatch.delenv(name, raising=False)
    target = allama.provider(
        "vertex-gemini", project="proj", location="us-east5", access_token="ya29.tok"
    )
    http, _ = target._prepare(ChatRequest("gemini-2.5-flash").user("Hi"), stream=False)
    assert http.url == (
        "https://us-east5-aiplatform.googleapis.com/v1/projects/proj/locations/us-east5"
        "/publishers/google/models/gemini-2.5-flash:generateContent"
    )
    assert http.headers["authorization"] == "Bearer ya29.tok"
    monkeypatch.setenv("GOOGLE_CLOUD_PROJECT", "env-proj")
    assert allama.provider("vertex-gemini", access_token="t").base_url == (
        "https://aiplatform.googleapis.com/v1/projects/env-proj/locations/global/publishers/google"
    )
    monkeypatch.delenv("GOOGLE_CLOUD_PROJECT")
    with pytest.raises(InvalidRequestError, match="pass project="):
        allama.provider("vertex-gemini", access_token="t").chat(ChatRequest("m").user("Hi"))
    assert "ya29.tok" not in repr(target)


class _Expiring:
    """google-auth credentials that hand out a new token on each refresh, valid for an hour."""

    def __init__(self) -> None:
        from google.auth.credentials import Credentials

        class Issued(Credentials):  # type: ignore[misc]
            def __init__(self) -> None:
                super().__init__()
                self.refreshes = 0

            def refresh(self, request: Any) -> None:
                self.refreshes += 1
                self.token = f"token-{self.refreshes}"
                self.expiry = datetime.datetime.now(datetime.UTC).replace(
                    tzinfo=None
                ) + datetime.timedelta(hours=1)

        self.credentials = Issued()


def test_application_credentials_are_refreshed_as_they_expire() -> None:
    issued = _Expiring().credentials
    seen: list[str] = []

    def handler(request: httpx2.Request) -> httpx2.Response:
        seen.append(request.headers["authorization"])
        return httpx2.Response(200, json={"candidates": []})

    client = httpx2.Client(transport=httpx2.MockTransport(handler))
    target = allama.provider(
        "vertex-gemini", project="p", credentials=issued, transport=Transport(client=client)
    )
    http, _ = target._prepare(ChatRequest("gemini-2.5-flash").user("Hi"), stream=False)
    assert http.headers["authorization"] == "Bearer token-1"
    target._prepare(ChatRequest("gemini-2.5-flash").user("Hi"), stream=False)
    assert issued.refreshes == 1  # still valid: not refreshed again
    issued.expiry = datetime.datetime(2000, 1, 1)
    http, _ = target._prepare(ChatRequest("gemini-2.5-flash").user("Hi"), stream=False)
    assert http.headers["authorization"] == "Bearer token-2"
    assert "token-2" not in repr(target)


def test_application_credentials_refresh_off_the_event_loop() -> None:
    issued = _Expiring().credentials

    async def handler(request: httpx2.Request) -> httpx2.Response:
        return httpx2.Response(
            200,
            json={
                "candidates": [
                    {
                        "content": {"role": "model", "parts": [{"text": "ok"}]},
                        "finishReason": "STOP",
                    }
                ]
            },
        )

    client = httpx2.AsyncClient(transport=httpx2.MockTransport(handler))
    target = allama.provider(
        "vertex-gemini", project="p", credentials=issued, transport=Transport(async_client=client)
    )
    response = asyncio.run(target.achat(ChatRequest("gemini-2.5-flash").user("Hi")))
    assert response.text() == "ok" and issued.refreshes == 1


def test_without_google_auth_or_a_token_the_error_says_what_to_do(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import sys

    monkeypatch.setitem(sys.modules, "google.auth", None)
    target = allama.provider("vertex-gemini", project="p")
    with pytest.raises(
        AuthenticationError, match=r"needs access_token=, or the google-auth package"
    ):
        target._prepare(ChatRequest("gemini-2.5-flash").user("Hi"), stream=False)


class _Strings(BaseModel):
    name: str


class _Unsigned(BaseModel):
    count: int = Field(ge=0)


class _Map(BaseModel):
    counts: dict[str, int]


def _planned(model: str, mode: ExtractionMode, policy: UnsupportedPolicy) -> tuple[str, ...]:
    out = []
    for tp in (_Strings, _Unsigned, _Map):
        request = ChatRequest(model).user("x").with_option(mode).with_unsupported_policy(policy)
        try:
            plan = Extractor().plan(allama.provider("gemini", api_key=KEY), tp, request)
        except UnsupportedError as error:
            assert error.stage is UnsupportedStage.BEFORE_SENDING
            out.append("refused")
            continue
        assert plan.mode is mode
        out.append(plan.enforcement.value)
    return tuple(out)


def test_enforcement_per_mode_for_the_seed_types() -> None:
    """Seed 000's table: native exact / exact / exact; forced tool not enforced throughout
    (refused under `UnsupportedPolicy.ERROR`)."""
    warn, error = UnsupportedPolicy.WARN, UnsupportedPolicy.ERROR
    model = "gemini-2.5-flash"
    assert _planned(model, ExtractionMode.NATIVE, warn) == ("exact", "exact", "exact")
    assert _planned(model, ExtractionMode.FORCED_TOOL, warn) == ("not_enforced",) * 3
    assert _planned(model, ExtractionMode.FORCED_TOOL, error) == ("refused",) * 3
    # The OpenAPI surface of Gemini 1.5 cannot hold a map: refused, and auto falls back;
    # it takes `minimum` but Google does not list it as honoured there.
    assert _planned("gemini-1.5-flash", ExtractionMode.NATIVE, warn) == (
        "exact",
        "approximate",
        "refused",
    )


def test_a_responses_item_id_is_not_sent_as_a_thought_signature() -> None:
    foreign = Reasoning(text="Looked it up.", signature="rs_68ab12", encrypted_content="gAAAA")
    request = (
        ChatRequest("gemini-2.5-flash")
        .user("Q")
        .assistant([foreign, Reasoning(signature="rs_2"), TextPart(text="A")])
        .user("More")
    )
    _, _, _, body, _ = encode(request)
    assert body["contents"][1] == {
        "role": "model",
        "parts": [{"text": "Looked it up.", "thought": True}, {"text": "A"}],
    }


def test_a_tool_schema_rewritten_for_gemini_1_5_names_what_it_lost() -> None:
    """Gemini 1.5 takes function parameters in its OpenAPI subset: what the rewrite drops
    is named, as it is for a response schema."""
    schema = {
        "type": "object",
        "properties": {"name": {"type": "string", "maxLength": 4}},
        "required": ["name"],
    }
    tool = ToolDefinition(name="submit", parameters=schema)
    _, _, _, body, warnings = encode(ChatRequest("gemini-1.5-pro").user("Hi").with_tools([tool]))
    sent = body["tools"][0]["functionDeclarations"][0]["parameters"]
    assert "maxLength" not in sent["properties"]["name"]
    assert [(w.kind, w.message) for w in warnings] == [
        (
            WarningKind.APPROXIMATED,
            "tool `submit` was approximated: `maxLength` was removed at `/properties/name`",
        )
    ]


# Tool results go in the order of the calls they answer: Gemini pairs a `functionResponse`
# with its call by position and name (the `call_<n>` stand-ins for calls Gemini gave no id
# are not sent), so results given in another order would be read as the wrong call's.


CITY_WEATHER = ToolDefinition(
    name="get_weather",
    parameters={"type": "object", "properties": {"city": {"type": "string"}}},
)


def _weather_turn() -> tuple[ChatRequest, ToolCall, ToolCall]:
    """Gemini's two parallel calls, Paris then Rome, without ids, as allama reads them."""
    parts = [
        {"functionCall": {"name": "get_weather", "args": {"city": city}}}
        for city in ("Paris", "Rome")
    ]
    body = {"candidates": [{"content": {"role": "model", "parts": parts}, "finishReason": "STOP"}]}
    answer = decode_response(200, {}, json.dumps(body).encode())
    paris, rome = answer.tool_calls()
    assert (paris.id, rome.id) == ("call_0", "call_1")
    request = (
        ChatRequest("gemini-2.5-flash")
        .user("Weather in Paris and Rome?")
        .with_tools([CITY_WEATHER])
        .assistant(list(answer.content))
    )
    return request, paris, rome


def _weather_response(output: str) -> dict[str, Any]:
    return {"functionResponse": {"name": "get_weather", "response": {"output": output}}}


@pytest.mark.parametrize("stream", [False, True], ids=["body", "stream"])
def test_tool_results_given_out_of_order_go_in_the_order_of_the_calls(stream: bool) -> None:
    request, paris, rome = _weather_turn()
    answered = request.tool_result(rome, "Rome: 30C").tool_result(paris, "Paris: 12C")
    _, _, _, body, warnings = encode(answered, stream=stream)
    assert body["contents"][1:] == [
        {
            "role": "model",
            "parts": [
                {"functionCall": {"name": "get_weather", "args": {"city": "Paris"}}},
                {"functionCall": {"name": "get_weather", "args": {"city": "Rome"}}},
            ],
        },
        {
            "role": "user",
            "parts": [
                _weather_response("Paris: 12C"),
                _weather_response("Rome: 30C"),
            ],
        },
    ]
    assert warnings == []
    # Given in the order of the calls, the same body.
    in_order = request.tool_result(paris, "Paris: 12C").tool_result(rome, "Rome: 30C")
    assert encode(in_order, stream=stream)[3] == body


def _moved(where: str, display: str = "Gemini") -> tuple[WarningKind, str]:
    """The warning on user words `_user_turn` moved after the function responses."""
    return (
        WarningKind.APPROXIMATED,
        f"{display} takes a turn's function responses only together, before what else the "
        f"user says; {where}",
    )


_MOVED_3 = (
    "the user message at `messages[3]`, given before a tool result of its turn, was moved "
    "after the turn's results"
)


def test_results_on_either_side_of_the_users_words_go_before_them() -> None:
    # A function-response content holds nothing else (Gemini answers 400 to text beside
    # the responses): the results, in the order of the calls, then the user's words, which
    # the model so reads after the result given after them: said in a warning.
    request, paris, rome = _weather_turn()
    answered = request.tool_result(rome, "Rome: 30C").user("Paris is slow.")
    _, _, _, body, warnings = encode(answered.tool_result(paris, "Paris: 12C"))
    assert body["contents"][2:] == [
        {
            "role": "user",
            "parts": [_weather_response("Paris: 12C"), _weather_response("Rome: 30C")],
        },
        {"role": "user", "parts": [{"text": "Paris is slow."}]},
    ]
    assert [(w.kind, w.message) for w in warnings] == [_moved(_MOVED_3)]


@pytest.mark.parametrize("stream", [False, True], ids=["body", "stream"])
@pytest.mark.parametrize(
    ("name", "display"), [("gemini", "Gemini"), ("vertex-gemini", "Gemini on Vertex AI")]
)
def test_a_user_message_between_two_results_goes_after_them_with_a_warning(
    name: str, display: str, stream: bool
) -> None:
    request, paris, rome = _weather_turn()
    answered = (
        request.tool_result(paris, "Paris: 12C")
        .user("note: be brief")
        .tool_result(rome, "Rome: 30C")
    )
    _, _, _, body, warnings = encode(answered, stream=stream, name=name)
    assert body["contents"][2:] == [
        {
            "role": "user",
            "parts": [_weather_response("Paris: 12C"), _weather_response("Rome: 30C")],
        },
        {"role": "user", "parts": [{"text": "note: be brief"}]},
    ]
    assert [(w.kind, w.message) for w in warnings] == [_moved(_MOVED_3, display)]
    assert warnings[0].is_about(RequestField.MESSAGES)
    # Sent all the same under the strict policy: nothing is left out.
    strict = answered.with_unsupported_policy(UnsupportedPolicy.ERROR)
    assert encode(strict, stream=stream, name=name)[3:] == (body, warnings)


def test_results_given_together_before_the_users_words_give_no_warning() -> None:
    # The usual order, results out of the calls' order (put in it, as Gemini pairs them by
    # position, meaning the same), and words of whitespace alone among them (left out).
    request, paris, rome = _weather_turn()
    answered = (
        request.tool_result(rome, "Rome: 30C")
        .user("  ")
        .tool_result(paris, "Paris: 12C")
        .user("note: be brief")
    )
    _, _, _, body, warnings = encode(answered)
    assert body["contents"][2:] == [
        {
            "role": "user",
            "parts": [_weather_response("Paris: 12C"), _weather_response("Rome: 30C")],
        },
        {"role": "user", "parts": [{"text": "note: be brief"}]},
    ]
    assert warnings == []


def test_user_messages_moved_in_two_turns_are_named_in_one_warning() -> None:
    request, paris, rome = _weather_turn()
    later = ToolCall.of("fc-9", "get_weather", {"city": "Oslo"})
    answered = (
        request.user("first note", ImagePart(url="https://example.com/a.png"))
        .tool_result(paris, "Paris: 12C")
        .tool_result(rome, "Rome: 30C")
        .assistant([later])
        .user("second note")
        .tool_result(later, "Oslo: 2C")
    )
    _, _, _, body, warnings = encode(answered)
    oslo = {"functionResponse": {"id": "fc-9", **_weather_response("Oslo: 2C")["functionResponse"]}}
    assert body["contents"][2:] == [
        {
            "role": "user",
            "parts": [_weather_response("Paris: 12C"), _weather_response("Rome: 30C")],
        },
        {
            "role": "user",
            "parts": [
                {"text": "first note"},
                {"fileData": {"fileUri": "https://example.com/a.png", "mimeType": "image/png"}},
            ],
        },
        {
            "role": "model",
            "parts": [
                {"functionCall": {"id": "fc-9", "name": "get_weather", "args": {"city": "Oslo"}}}
            ],
        },
        {"role": "user", "parts": [oslo]},
        {"role": "user", "parts": [{"text": "second note"}]},
    ]
    assert [(w.kind, w.message) for w in warnings] == [
        _moved(
            "the user messages at `messages[2]`, `messages[6]`, each given before a tool "
            "result of its turn, were moved after the turn's results"
        )
    ]


def test_a_user_message_of_whitespace_alone_between_results_is_left_out_unnamed() -> None:
    # Text parts of whitespace alone say nothing: left out after the responses, so nothing
    # is moved, and no warning names the message (as Anthropic's encoder leaves it unnamed).
    request, paris, rome = _weather_turn()
    blank = UserMessage(content=(TextPart(text="  "), TextPart(text="\n\t")))
    answered = request.tool_result(paris, "Paris: 12C").push(blank).tool_result(rome, "Rome: 30C")
    _, _, _, body, warnings = encode(answered)
    assert body["contents"][2:] == [
        {
            "role": "user",
            "parts": [_weather_response("Paris: 12C"), _weather_response("Rome: 30C")],
        },
    ]
    assert warnings == []
    # The request otherwise as without it.
    without = request.tool_result(paris, "Paris: 12C").tool_result(rome, "Rome: 30C")
    assert encode(answered)[3:] == encode(without)[3:]


@pytest.mark.parametrize(
    ("part", "sent"),
    [
        (
            ImagePart(url="https://example.com/a.png"),
            {"fileData": {"fileUri": "https://example.com/a.png", "mimeType": "image/png"}},
        ),
        (
            DocumentPart(url="https://example.com/a.pdf", media_type="application/pdf"),
            {"fileData": {"fileUri": "https://example.com/a.pdf", "mimeType": "application/pdf"}},
        ),
    ],
    ids=["image", "document"],
)
def test_a_user_message_of_an_attachment_alone_between_results_is_named(
    part: ImagePart | DocumentPart, sent: dict[str, Any]
) -> None:
    # No text, but not blank: what it gives is moved after the responses, and said.
    request, paris, rome = _weather_turn()
    answered = (
        request.tool_result(paris, "Paris: 12C")
        .push(UserMessage(content=(part,)))
        .tool_result(rome, "Rome: 30C")
    )
    _, _, _, body, warnings = encode(answered)
    assert body["contents"][2:] == [
        {
            "role": "user",
            "parts": [_weather_response("Paris: 12C"), _weather_response("Rome: 30C")],
        },
        {"role": "user", "parts": [sent]},
    ]
    assert [(w.kind, w.message) for w in warnings] == [_moved(_MOVED_3)]


def test_a_call_answered_only_after_a_later_turn_is_refused() -> None:
    # Gemini needs a call turn's responses right after it (400 otherwise): the result given
    # after the next turn's comes too late.
    early = ToolCall.of("fc-1", "now", {})
    _, paris, rome = _weather_turn()
    request = (
        ChatRequest("gemini-2.5-flash")
        .user("Time?")
        .assistant([early])
        .user("And the weather in Paris and Rome?")
        .assistant([paris, rome])
        .tool_result(rome, "Rome: 30C")
        .tool_result(early, "12:00")
        .tool_result(paris, "Paris: 12C")
    )
    with pytest.raises(InvalidRequestError) as caught:
        encode(request)
    assert str(caught.value) == (
        "the tool call `fc-1` of the assistant turn at `messages[1]` got no tool result "
        "before the next user turn (`messages[2]`), and Gemini needs each call's result "
        "right after it"
    )


@pytest.mark.parametrize(
    "blank",
    [UserMessage(content=(TextPart(text="  "),)), UserMessage(content=(TextPart(text=""),))],
    ids=["whitespace", "empty"],
)
def test_a_missing_result_is_due_before_the_users_first_words_past_a_blank_message(
    blank: UserMessage,
) -> None:
    # A user message of whitespace alone is not sent: the results were due before the
    # user's next words, named as Anthropic's encoder names them.
    _, paris, _ = _weather_turn()
    for name, model in (("gemini", "gemini-2.5-flash"), ("anthropic", "claude-sonnet-4-5")):
        request = (
            ChatRequest(model)
            .user("Weather in Paris and Rome?")
            .assistant([paris, ToolCall.of("call_1", "get_weather", {"city": "Rome"})])
            .tool_result(paris, "Paris: 12C")
            .push(blank)
            .user("And tomorrow?")
        )
        with pytest.raises(InvalidRequestError) as caught:
            allama.provider(name, api_key=KEY)._prepare(request, stream=False)
        display = "Gemini" if name == "gemini" else "Anthropic"
        assert str(caught.value) == (
            "the tool call `call_1` of the assistant turn at `messages[1]` got no tool result "
            f"before the next user turn (`messages[4]`), and {display} needs each call's "
            "result right after it"
        )


# Inline data checked as Anthropic's encoder checks it

PNG = b"\x89PNG\r\n\x1a\n"
PNG_B64 = base64.b64encode(PNG).decode()


@pytest.mark.parametrize(
    ("part", "sent"),
    [
        (
            ImagePart(url=f"data:image/png;base64,{PNG_B64[:5]}\n {PNG_B64[5:]}"),
            {"mimeType": "image/png", "data": PNG_B64},
        ),
        (
            DocumentPart(url="data:application/pdf;base64,\tJVBE\r\nRg==\r\n"),
            {"mimeType": "application/pdf", "data": "JVBERg=="},
        ),
        # Its padding left out, as browsers read a data URL: sent with it.
        (
            DocumentPart(url="data:text/plain;base64,aGVsbG8"),
            {"mimeType": "text/plain", "data": "aGVsbG8="},
        ),
    ],
)
def test_a_data_url_goes_as_plain_base64(part: ImagePart | DocumentPart, sent: Any) -> None:
    """Gemini reads `inlineData.data` as base64 alone ("Base64 decoding failed")."""
    _, _, _, body, warnings = encode(ChatRequest("gemini-2.5-flash").user("x", part))
    assert body["contents"][0]["parts"][1] == {"inlineData": sent}
    assert warnings == []


@pytest.mark.parametrize(
    ("part", "error"),
    [
        (ImagePart(url="data:image/png;base64,no!!"), "the image's data URL holds no valid base64"),
        (
            DocumentPart(url="data:text/plain;base64,aGVsb G8=x"),
            "the document's data URL holds no valid base64",
        ),
        (
            ImagePart(url="data:image/png;base64,"),
            "the image holds no data, which Gemini cannot read",
        ),
    ],
)
def test_inline_data_gemini_cannot_read_is_refused_before_sending(
    part: ImagePart | DocumentPart, error: str
) -> None:
    with pytest.raises(InvalidRequestError) as raised:
        encode(ChatRequest("gemini-2.5-flash").user("x", part))
    assert str(raised.value) == error
