"""Gemini fixes found by a probe: another endpoint's thought signatures left out with a
warning; a response schema given in the body option under Gemini's other names sent in
place of allama's; `reasoning_effort="none"` on a model that never thinks asks nothing;
Vertex AI's streamed function-call arguments (`streamFunctionCallArguments`) put together
into whole calls; Gemini 3.1 Pro's MEDIUM thinking level; a data URL that names no media
type sent with the part's own (never an empty `mimeType`); and on `responseSchema` (Gemini
1.5), a node without `type` (any value, any items, recursion cut) not enforced and `anyOf`
a hint; a part's own media type read without case or parameters (text in another charset
sent as UTF-8); Gemini 2.x's built-in tools beside function calling or JSON output refused
unsent (an automatic extraction too, with no fallback claimed); the code the model ran and
its result sent back in their place; a leading UTF-8 byte-order mark left out of a text
document. The endpoints are `httpx2.MockTransport`s: nothing leaves the machine."""

from __future__ import annotations

import base64
import json
from typing import Any

import httpx2
import pytest
from pydantic import BaseModel
from tests._recording import Recorder, provider

import allama
from allama import (
    ChatRequest,
    ExtractionMode,
    ResponseFormat,
    SchemaEnforcement,
    ToolDefinition,
)
from allama.adapters.gemini import decode_response
from allama.errors import InvalidRequestError, ServerError, StreamDecodeError, UnsupportedError
from allama.schema import gemini_json_schema, gemini_response_schema
from allama.transport import Transport
from allama.types import (
    BlockStart,
    CapabilitySupport,
    ChatCapability,
    DocumentPart,
    FinishReason,
    ImagePart,
    Reasoning,
    ReasoningEffort,
    RequestField,
    StreamBlockType,
    TextPart,
    ToolCall,
    ToolCallDelta,
    UnsupportedPolicy,
    Usage,
    Warning,
    WarningKind,
)

TOOLS = [ToolDefinition(name="f", parameters={"type": "object", "properties": {}})]
PROXY = "https://proxy.example.com/v1beta"
REASONING_WARNING = (
    "Gemini takes back only the thought signatures it issued; reasoning another endpoint "
    "signed (another provider or host, or a Responses item's id) was sent without its "
    "signature, as an unsigned thought where it has text, and was left out of the "
    "conversation otherwise"
)
SKIP_WARNING = (
    "a function call without Gemini's thought signature (made by another model, or kept "
    "without it) was sent with the signature that skips its check; the model does not see "
    "the reasoning behind it"
)


def answer(parts: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "candidates": [{"content": {"role": "model", "parts": parts}, "finishReason": "STOP"}],
        "usageMetadata": {"promptTokenCount": 10, "candidatesTokenCount": 5},
        "modelVersion": "gemini-x",
    }


def said(warnings: tuple[Warning, ...]) -> list[tuple[WarningKind, Any, str]]:
    return [(w.kind, getattr(w.subject, "field", None), w.message) for w in warnings]


def model_turns(recorder: Recorder) -> list[list[dict[str, Any]]]:
    return [c["parts"] for c in recorder.bodies[-1]["contents"] if c["role"] == "model"]


# 1. Another endpoint's thought signatures are left out with a warning


def test_a_gemini_3_text_turn_signed_by_the_gemini_api_continued_on_a_proxy() -> None:
    target, recorder = provider("gemini", (200, answer([{"text": "ok"}])), base_url=PROXY)
    turn = (Reasoning(signature="VEVYVA==", issuer="gemini"), TextPart(text="Paris."))
    request = ChatRequest("gemini-3-flash-preview").user("hi").assistant(turn).user("go on")
    response = target.chat(request)
    assert model_turns(recorder) == [[{"text": "Paris."}]]
    assert said(response.warnings) == [
        (WarningKind.APPROXIMATED, RequestField.REASONING, REASONING_WARNING)
    ]


def test_a_signed_2_5_function_call_continued_on_another_host() -> None:
    target, recorder = provider("gemini", (200, answer([{"text": "ok"}])), base_url=PROXY)
    turn = (
        Reasoning(signature="Q0FMTA==", issuer="gemini"),
        ToolCall(id="c1", name="f", arguments="{}"),
    )
    request = (
        ChatRequest("gemini-2.5-flash")
        .user("hi")
        .with_tools(TOOLS)
        .assistant(turn)
        .tool_result("c1", "42")
    )
    response = target.chat(request)
    assert model_turns(recorder) == [[{"functionCall": {"id": "c1", "name": "f", "args": {}}}]]
    assert said(response.warnings) == [
        (WarningKind.APPROXIMATED, RequestField.REASONING, REASONING_WARNING)
    ]


def test_claudes_signed_thinking_goes_as_an_unsigned_thought_with_the_warning() -> None:
    target, recorder = provider("gemini", (200, answer([{"text": "ok"}])))
    turn = (
        Reasoning(text="I think", signature="EqQBClaudeSig", issuer="anthropic"),
        TextPart(text="Paris."),
    )
    request = (
        ChatRequest("gemini-2.5-flash")
        .user("hi")
        .assistant(turn)
        .user("go on")
        .with_unsupported_policy(UnsupportedPolicy.ERROR)  # an approximation never fails
    )
    response = target.chat(request)
    assert model_turns(recorder) == [[{"text": "I think", "thought": True}, {"text": "Paris."}]]
    assert said(response.warnings) == [
        (WarningKind.APPROXIMATED, RequestField.REASONING, REASONING_WARNING)
    ]


def test_a_responses_item_id_and_another_providers_encrypted_reasoning_are_said() -> None:
    target, recorder = provider("gemini", (200, answer([{"text": "ok"}])))
    request = (
        ChatRequest("gemini-2.5-flash")
        .user("hi")
        .assistant((Reasoning(signature="rs_0123"), TextPart(text="A.")))
        .user("and?")
        .assistant((Reasoning(encrypted_content="b3BhcXVl", issuer="openai"), TextPart(text="B.")))
        .user("go on")
    )
    response = target.chat(request)
    assert model_turns(recorder) == [[{"text": "A."}], [{"text": "B."}]]
    # One warning, however many turns left something out.
    assert said(response.warnings) == [
        (WarningKind.APPROXIMATED, RequestField.REASONING, REASONING_WARNING)
    ]


def test_geminis_own_signature_goes_back_without_a_warning() -> None:
    target, recorder = provider("gemini", (200, answer([{"text": "ok"}])))
    turn = (Reasoning(signature="VEVYVA==", issuer="gemini"), TextPart(text="Paris."))
    request = ChatRequest("gemini-3-flash-preview").user("hi").assistant(turn).user("go on")
    response = target.chat(request)
    assert model_turns(recorder) == [[{"text": "Paris.", "thoughtSignature": "VEVYVA=="}]]
    assert response.warnings == ()


def test_a_gemini_3_call_signed_elsewhere_keeps_the_skip_signature_warning_too() -> None:
    target, recorder = provider("gemini", (200, answer([{"text": "ok"}])), base_url=PROXY)
    turn = (
        Reasoning(signature="Q0FMTA==", issuer="gemini"),
        ToolCall(id="c1", name="f", arguments="{}"),
    )
    request = (
        ChatRequest("gemini-3-flash-preview")
        .user("hi")
        .with_tools(TOOLS)
        .assistant(turn)
        .tool_result("c1", "42")
    )
    response = target.chat(request)
    call = {"id": "c1", "name": "f", "args": {}}
    skip = "skip_thought_signature_validator"
    assert model_turns(recorder) == [[{"functionCall": call, "thoughtSignature": skip}]]
    assert said(response.warnings) == [
        (WarningKind.APPROXIMATED, RequestField.REASONING, REASONING_WARNING),
        (WarningKind.APPROXIMATED, RequestField.MESSAGES, SKIP_WARNING),
    ]


# 2. A response schema under Gemini's other names replaces allama's


class Answer(BaseModel):
    a: int


THEIRS: dict[str, Any] = {"type": "object", "properties": {"first_name": {"type": "string"}}}


@pytest.mark.parametrize(
    ("given", "sent", "value"),
    [
        ("responseJsonSchema", "responseJsonSchema", THEIRS),
        ("_responseJsonSchema", "_responseJsonSchema", THEIRS),
        ("_response_json_schema", "_responseJsonSchema", THEIRS),
        ("responseSchema", "responseSchema", THEIRS),
        (
            "responseFormat",
            "responseFormat",
            {"text": {"mimeType": "APPLICATION_JSON", "schema": THEIRS}},
        ),
    ],
)
def test_the_callers_schema_under_any_name_is_sent_alone_and_not_enforced(
    given: str, sent: str, value: dict[str, Any]
) -> None:
    target, recorder = provider("gemini", (200, answer([{"text": '{"a": 1}'}])))
    request = (
        ChatRequest("gemini-2.5-flash")
        .user("hi")
        .with_option_json("gemini", {"generationConfig": {given: value}})
    )
    result = allama.extract(target, Answer, request)
    generation = recorder.bodies[-1]["generationConfig"]
    # The caller's schema alone, as given (its property names not renamed), and allama's
    # JSON output mime type beside it.
    assert generation == {"responseMimeType": "application/json", sent: value}
    assert result.metadata.enforcement is SchemaEnforcement.NOT_ENFORCED
    assert said(result.response.warnings) == [
        (
            WarningKind.UNSUPPORTED,
            RequestField.RESPONSE_FORMAT,
            f"`generationConfig.{sent}` of the body option `gemini` was sent in place of the "
            "request's response format, which was not sent",
        )
    ]


def test_a_schema_under_another_name_without_a_response_format_is_just_sent() -> None:
    target, recorder = provider("gemini", (200, answer([{"text": "ok"}])))
    option: dict[str, Any] = {"generationConfig": {"_responseJsonSchema": THEIRS}}
    request = ChatRequest("gemini-2.5-flash").user("hi").with_option_json("gemini", option)
    response = target.chat(request)
    assert recorder.bodies[-1]["generationConfig"] == {"_responseJsonSchema": THEIRS}
    assert response.warnings == ()


# 3. `reasoning_effort="none"` on a model that never thinks


@pytest.mark.parametrize("model", ["gemini-2.0-flash", "gemma-3-27b-it"])
@pytest.mark.parametrize("policy", [UnsupportedPolicy.WARN, UnsupportedPolicy.ERROR])
def test_no_thinking_asked_of_a_model_that_never_thinks_sends_and_says_nothing(
    model: str, policy: UnsupportedPolicy
) -> None:
    target, recorder = provider("gemini", (200, answer([{"text": "x"}])))
    request = (
        ChatRequest(model)
        .user("hi")
        .with_reasoning_effort(ReasoningEffort.NONE)
        .with_unsupported_policy(policy)
    )
    response = target.chat(request)
    assert "generationConfig" not in recorder.bodies[-1]
    assert response.warnings == ()


def test_an_effort_other_than_none_on_a_model_that_never_thinks_is_still_refused() -> None:
    target, recorder = provider("gemini", (200, answer([{"text": "x"}])))
    request = ChatRequest("gemini-2.0-flash").user("hi").with_reasoning_effort(ReasoningEffort.LOW)
    response = target.chat(request)
    assert "generationConfig" not in recorder.bodies[-1]
    assert said(response.warnings) == [
        (
            WarningKind.UNSUPPORTED,
            RequestField.REASONING_EFFORT,
            "`gemini-2.0-flash` on Gemini does not think",
        )
    ]


# 4. Vertex AI's streamed function-call arguments
#
# The chunks have the shapes Vertex AI sends with `streamFunctionCallArguments` (as recorded
# in vercel/ai's Google provider fixtures): the call's name with `willContinue: true` and
# the signature, then `partialArgs` without a name, then a bare `functionCall: {}`.

MODEL = "gemini-3-pro-preview"
WEATHER = ToolDefinition(
    name="get_weather",
    parameters={"type": "object", "properties": {"location": {"type": "string"}}},
)
RUNNING = {"promptTokenCount": 10, "totalTokenCount": 10, "trafficType": "ON_DEMAND"}
FINAL = {"promptTokenCount": 10, "candidatesTokenCount": 12, "totalTokenCount": 22}


def chunk(
    parts: list[dict[str, Any]], finish: str | None = None, usage: dict[str, Any] | None = None
) -> dict[str, Any]:
    candidate: dict[str, Any] = {"content": {"role": "model", "parts": parts}}
    if finish is not None:
        candidate["finishReason"] = finish
    return {"candidates": [candidate], "usageMetadata": usage or RUNNING, "modelVersion": MODEL}


def named(name: str, signature: str | None = None) -> dict[str, Any]:
    part: dict[str, Any] = {"functionCall": {"name": name, "willContinue": True}}
    if signature is not None:
        part["thoughtSignature"] = signature
    return part


def partial(*pieces: dict[str, Any], more: bool = True) -> dict[str, Any]:
    call: dict[str, Any] = {"partialArgs": list(pieces)}
    if more:
        call["willContinue"] = True
    return {"functionCall": call}


def piece(path: str, **value: Any) -> dict[str, Any]:
    return {"jsonPath": path, **value}


KEEP_GOING: dict[str, Any] = {"functionCall": {"willContinue": True}}
END: dict[str, Any] = {"functionCall": {}}


def sse(*chunks: dict[str, Any]) -> bytes:
    return b"".join(b"data: " + json.dumps(c).encode() + b"\r\n\r\n" for c in chunks)


def vertex(*answers: tuple[int, Any]) -> tuple[Any, Recorder]:
    recorder = Recorder(*answers)
    target = allama.provider(
        "vertex-gemini",
        transport=Transport(
            client=httpx2.Client(transport=httpx2.MockTransport(recorder)),
            async_client=httpx2.AsyncClient(transport=httpx2.MockTransport(recorder)),
        ),
        access_token="tok",
        project="proj",
        location="global",
    )
    return target, recorder


def streamed_request() -> ChatRequest:
    calling: dict[str, Any] = {"mode": "AUTO", "streamFunctionCallArguments": True}
    return (
        ChatRequest(MODEL)
        .user("weather in Boston?")
        .with_tools([WEATHER])
        .with_option_json("gemini", {"toolConfig": {"functionCallingConfig": calling}})
    )


def test_a_call_whose_arguments_stream_is_put_together_whole() -> None:
    data = sse(
        chunk([named("get_weather", "U0lH")]),
        chunk([partial(piece("$.location", stringValue="Boston", willContinue=True))]),
        chunk([partial(piece("$.location", stringValue=", MA", willContinue=True))]),
        chunk([partial(piece("$.location", stringValue=""))]),
        chunk([END], "STOP", FINAL),
    )
    target, recorder = vertex((200, data))
    stream = target.chat_stream(streamed_request())
    events = list(stream)
    response = stream.response()
    assert recorder.bodies[0]["toolConfig"] == {
        "functionCallingConfig": {"mode": "AUTO", "streamFunctionCallArguments": True}
    }
    call = ToolCall(id="call_0", name="get_weather", arguments='{"location":"Boston, MA"}')
    # The signature, marked as the Vertex AI endpoint's, goes before the call it came with.
    issuer = "vertex-gemini@aiplatform.googleapis.com"
    assert response.content == (Reasoning(signature="U0lH", issuer=issuer), call)
    assert response.finish_reason == FinishReason.TOOL_CALLS
    assert response.usage == Usage(input_tokens=10, output_tokens=12)
    # The call comes as one block: its start (name and id), its whole arguments, its stop.
    starts = [e for e in events if isinstance(e, BlockStart)]
    deltas = [e for e in events if isinstance(e, ToolCallDelta)]
    assert [(s.block_type, s.id, s.name) for s in starts] == [
        (StreamBlockType.REASONING, None, None),
        (StreamBlockType.TOOL_CALL, "call_0", "get_weather"),
    ]
    assert [d.arguments for d in deltas] == ['{"location":"Boston, MA"}']


def test_the_calls_turn_goes_back_with_its_arguments_and_signature() -> None:
    data = sse(
        chunk([named("get_weather", "U0lH")]),
        chunk([partial(piece("$.location", stringValue="Boston"))], "STOP", FINAL),
    )
    target, recorder = vertex((200, data), (200, answer([{"text": "Sunny."}])))
    stream = target.chat_stream(streamed_request())
    for _ in stream:
        pass
    turn = stream.response().to_assistant_message()
    target.chat(streamed_request().assistant(turn.content).tool_result("call_0", "sunny"))
    assert [c for c in recorder.bodies[-1]["contents"] if c["role"] == "model"] == [
        {
            "role": "model",
            "parts": [
                {
                    "functionCall": {"name": "get_weather", "args": {"location": "Boston"}},
                    "thoughtSignature": "U0lH",
                }
            ],
        }
    ]


def test_nested_arguments_of_every_kind_with_keep_going_chunks_between() -> None:
    data = sse(
        chunk([named("cook", "U0lH")]),
        chunk([partial(piece("$.recipe.ingredients[0].amount", stringValue="16 oz"))]),
        chunk([partial(piece("$.recipe.ingredients[0].name", stringValue="Noodles"))]),
        chunk([KEEP_GOING]),
        chunk([partial(piece("$.recipe.ingredients[1].amount", numberValue=0.5))]),
        chunk([partial(piece("$.recipe.ingredients[1].fresh", boolValue=False))]),
        chunk([partial(piece("$.recipe.ingredients[1].note", nullValue="NULL_VALUE"))]),
        chunk([partial(piece("$.recipe.name", stringValue="Lasa", willContinue=True))]),
        chunk([partial(piece("$.recipe.name", stringValue="gna", willContinue=True))]),
        chunk([partial(piece("$.recipe.name", stringValue=""))]),
        chunk([partial(piece("$.recipe.steps[0]", stringValue="Boil."))]),
        chunk([partial(piece("$['odd key']", numberValue=3))]),
        chunk([END], "STOP", FINAL),
    )
    target, _ = vertex((200, data))
    stream = target.chat_stream(streamed_request())
    for _ in stream:
        pass
    (call,) = [b for b in stream.response().content if isinstance(b, ToolCall)]
    assert json.loads(call.arguments) == {
        "recipe": {
            "ingredients": [
                {"amount": "16 oz", "name": "Noodles"},
                {"amount": 0.5, "fresh": False, "note": None},
            ],
            "name": "Lasagna",
            "steps": ["Boil."],
        },
        "odd key": 3,
    }


def test_two_calls_in_a_row_and_a_call_whose_last_piece_ends_it() -> None:
    data = sse(
        chunk([named("get_weather", "U0lH")]),
        chunk([partial(piece("$.location", stringValue="Boston"))]),
        chunk([END]),
        chunk([named("get_weather")]),
        # No bare end: the last piece says no more is to come.
        chunk([partial(piece("$.location", stringValue="Paris"), more=False)]),
        chunk([{"text": ""}], "STOP", FINAL),
    )
    target, _ = vertex((200, data))
    stream = target.chat_stream(streamed_request())
    for _ in stream:
        pass
    calls = [b for b in stream.response().content if isinstance(b, ToolCall)]
    assert [(c.id, c.name, c.arguments) for c in calls] == [
        ("call_0", "get_weather", '{"location":"Boston"}'),
        ("call_1", "get_weather", '{"location":"Paris"}'),
    ]
    assert stream.response().finish_reason == FinishReason.TOOL_CALLS


def test_a_streamed_call_in_a_whole_body_reads_the_same() -> None:
    parts = [
        named("get_weather", "U0lH"),
        partial(piece("$.location", stringValue="Bos", willContinue=True)),
        partial(piece("$.location", stringValue="ton")),
        END,
        {"text": "Checking."},
    ]
    response = decode_response(200, {}, json.dumps(answer(parts)).encode())
    assert response.content[1:] == (
        ToolCall(id="call_0", name="get_weather", arguments='{"location":"Boston"}'),
        TextPart(text="Checking."),
    )
    assert response.content[0] == Reasoning(signature="U0lH")


@pytest.mark.parametrize(
    ("bad", "why"),
    [
        (partial(piece("location", stringValue="x")), "`jsonPath` is not a path allama reads"),
        (partial(piece("$.a[x]", stringValue="x")), "`jsonPath` is not a path allama reads"),
        (partial(piece("$.a[1]", stringValue="x")), "skip an index of an array"),
        (partial({"stringValue": "x"}), "no string `jsonPath`"),
        ({"functionCall": {"partialArgs": {}}}, "`partialArgs` is not a list"),
    ],
)
def test_pieces_that_do_not_fit_fail_the_stream_with_their_usage(
    bad: dict[str, Any], why: str
) -> None:
    data = sse(chunk([named("get_weather")]), chunk([bad]), chunk([END], "STOP", FINAL))
    target, _ = vertex((200, data))
    stream = target.chat_stream(streamed_request())
    with pytest.raises(StreamDecodeError) as caught:
        for _ in stream:
            pass
    assert why in caught.value.message


UNREAD_PATH = (
    "a partial argument's `jsonPath` is not a path allama reads (`$` followed by `.name`, "
    "`[0]` or `['name']` steps)"
)


def test_a_path_that_does_not_read_is_not_quoted_in_allamas_words() -> None:
    # Its member names are keys the model wrote: allama's message, which the log view,
    # the repr and a span's status show, does not quote it.
    bad = piece("$.recipe[KEY-THE-MODEL-WROTE]", stringValue="x")
    data = sse(chunk([named("get_weather")]), chunk([partial(bad)]), chunk([END], "STOP", FINAL))
    whole = answer([{"functionCall": {"name": "get_weather", "partialArgs": [bad]}}])
    target, _ = vertex((200, data), (200, whole))
    with pytest.raises(StreamDecodeError) as broken:
        for _ in target.chat_stream(streamed_request()):
            pass
    with pytest.raises(ServerError) as unread:
        target.chat(streamed_request())
    assert broken.value.message == f"a stream chunk does not fit the response shape: {UNREAD_PATH}"
    assert unread.value.message == (
        f"the provider answered with a body that is not a response: {UNREAD_PATH}"
    )
    for error in (broken.value, unread.value):
        assert error.authored
        shown = (str(error), repr(error), str(error.as_log()), str(error.as_log().to_dict()))
        assert not any("KEY-THE-MODEL-WROTE" in each for each in shown)
    # The body it came in keeps it, for the log's owner.
    assert "KEY-THE-MODEL-WROTE" in (unread.value.context.body or "")


def test_a_nameless_call_with_no_streamed_call_before_is_still_refused() -> None:
    data = sse(chunk([partial(piece("$.location", stringValue="x"))], "STOP", FINAL))
    target, _ = vertex((200, data))
    stream = target.chat_stream(streamed_request())
    with pytest.raises(StreamDecodeError) as caught:
        for _ in stream:
            pass
    assert "a `functionCall` has no string `name`" in caught.value.message


# 5. Gemini 3.1 Pro takes the MEDIUM thinking level (3 Pro does not); no Flash row changes


@pytest.mark.parametrize(
    ("model", "effort", "level", "warned"),
    [
        ("gemini-3.1-pro-preview", "medium", "MEDIUM", None),
        ("gemini-3.1-pro-preview", "low", "LOW", None),
        ("gemini-3.1-pro-preview", "high", "HIGH", None),
        # No MINIMAL on 3.1 Pro: the nearest level above, as on 3 Pro.
        ("gemini-3.1-pro-preview", "minimal", "LOW", "low"),
        ("gemini-3-pro-preview", "medium", "HIGH", "high"),
        ("gemini-3-flash-preview", "medium", "MEDIUM", None),
        ("gemini-3-flash-preview", "minimal", "MINIMAL", None),
    ],
)
def test_thinking_levels_of_gemini_3_1_pro(
    model: str, effort: str, level: str, warned: str | None
) -> None:
    target, recorder = provider("gemini", (200, answer([{"text": "ok"}])))
    response = target.chat(
        ChatRequest(model).user("hi").with_reasoning_effort(ReasoningEffort(effort))
    )
    assert recorder.bodies[-1]["generationConfig"] == {"thinkingConfig": {"thinkingLevel": level}}
    expected = [
        (
            WarningKind.APPROXIMATED,
            RequestField.REASONING_EFFORT,
            f"`{model}` on Gemini takes no thinking level `{effort}`; `{warned}` was sent",
        )
    ]
    assert said(response.warnings) == (expected if warned else [])


# 6. A data URL that names no media type: the part's own, else text/plain for a document

PDF = base64.b64encode(b"%PDF-1.4 minimal").decode()
PNG = base64.b64encode(b"\x89PNG\r\n\x1a\n").decode()


@pytest.mark.parametrize(
    ("part", "sent"),
    [
        (DocumentPart(url="data:;base64," + PDF, media_type="application/pdf"), "application/pdf"),
        # RFC 2397: a data URL that names no type is text/plain.
        (DocumentPart(url="data:;base64," + PDF), "text/plain"),
        (DocumentPart(url="data:;charset=utf-8;base64," + PDF), "text/plain"),
        (ImagePart(url="data:;base64," + PNG, media_type="image/png"), "image/png"),
        # The URL's own type, where it names one, is what the bytes are.
        (
            DocumentPart(url="data:application/pdf;base64," + PDF, media_type="text/plain"),
            "application/pdf",
        ),
        (ImagePart(url="data:image/png;base64," + PNG), "image/png"),
    ],
)
def test_a_data_url_without_a_type_goes_with_the_parts_media_type(
    part: DocumentPart | ImagePart, sent: str
) -> None:
    target, recorder = provider("gemini", (200, answer([{"text": "ok"}])))
    response = target.chat(ChatRequest("gemini-2.5-flash").user("read this", part))
    data = part.url.partition(",")[2] if part.url else ""
    assert recorder.bodies[-1]["contents"][0]["parts"][1] == {
        "inlineData": {"mimeType": sent, "data": data}
    }
    assert response.warnings == ()


def test_an_image_data_url_naming_no_type_without_a_media_type_is_refused_unsent() -> None:
    target, recorder = provider("gemini", (200, answer([{"text": "ok"}])))
    image = ImagePart(url="data:;base64," + PNG)
    with pytest.raises(InvalidRequestError) as caught:
        target.chat(ChatRequest("gemini-2.5-flash").user("look", image))
    assert "an image data URL that names no media type needs the part's `media_type`" in str(
        caught.value
    )
    assert recorder.bodies == []


# 7. `responseSchema` (Gemini 1.5, OpenAPI subset): a node without `type` is not enforced
# (Gemini answers 400, "type: must be specified"), and `anyOf` is a hint


def _notes(rewrite: Any) -> list[tuple[str, str, str]]:
    return [(n.kind.value, n.pointer, n.message) for n in rewrite.notes]


ANY_VALUE = "accepts any value, which Gemini responseSchema cannot express"
NO_ITEMS = "does not constrain its items, which Gemini responseSchema cannot express"


def test_any_value_and_an_array_of_any_items_are_not_enforced_on_response_schema() -> None:
    any_field = {"type": "object", "properties": {"a": {}}, "required": ["a"]}
    assert _notes(gemini_response_schema(any_field)) == [
        ("unsupported", "/properties/a", f"the subschema at `/properties/a` {ANY_VALUE}")
    ]
    assert _notes(gemini_response_schema({"type": "array"})) == [
        ("unsupported", "/", f"the array at `/` {NO_ITEMS}")
    ]
    # An annotation alone (pydantic's `Any` field) has no `type` either.
    titled = {"type": "object", "properties": {"a": {"title": "A"}}, "required": ["a"]}
    assert _notes(gemini_response_schema(titled)) == [
        (
            "unsupported",
            "/properties/a",
            "the subschema at `/properties/a` has no `type`, which Gemini responseSchema "
            "cannot express",
        )
    ]
    # The JSON Schema surface takes all three as they are.
    for schema in (any_field, {"type": "array"}, titled):
        assert gemini_json_schema(schema).exact


class Loose(BaseModel):
    payload: Any
    tags: list  # type: ignore[type-arg]


class Tree(BaseModel):
    v: int
    kids: list[Tree] = []


def called(args: dict[str, Any]) -> dict[str, Any]:
    return answer([{"functionCall": {"name": "submit_structured_output", "args": args}}])


@pytest.mark.parametrize(
    ("tp", "args"),
    [(Loose, {"payload": 1, "tags": []}), (Tree, {"v": 1, "kids": []})],
)
def test_a_schema_response_schema_cannot_write_falls_back_to_the_forced_tool(
    tp: type[BaseModel], args: dict[str, Any]
) -> None:
    target, recorder = provider("gemini", (200, called(args)))
    result = allama.extract(target, tp, ChatRequest("gemini-1.5-pro").user("x"))
    assert result.value == tp.model_validate(args)
    assert result.metadata.mode is ExtractionMode.FORCED_TOOL
    body = recorder.bodies[-1]
    assert len(recorder.bodies) == 1
    assert "responseSchema" not in body.get("generationConfig", {})
    assert body["toolConfig"]["functionCallingConfig"]["mode"] == "ANY"


def test_a_recursive_schema_is_not_enforced_on_response_schema() -> None:
    rewrite = gemini_response_schema(Tree.model_json_schema())
    assert _notes(rewrite)[0] == (
        "unsupported",
        "/$defs/Tree/properties/kids/items",
        "the subschema at `/$defs/Tree/properties/kids/items` is recursive, which Gemini "
        "responseSchema cannot enforce",
    )
    assert not rewrite.strict_representable


def any_of_hint(at: str) -> tuple[str, str, str]:
    return (
        "approximated",
        at,
        f"`anyOf` is not enforced by Gemini responseSchema at `{at}`: Google does not list it "
        "as honoured (it is sent, as a hint)",
    )


EITHER: dict[str, Any] = {
    "type": "object",
    "properties": {"a": {"anyOf": [{"type": "string"}, {"type": "integer"}]}},
    "required": ["a"],
}


def test_an_any_of_is_a_hint_on_response_schema_only() -> None:
    rewrite = gemini_response_schema(EITHER)
    assert rewrite.schema["properties"]["a"] == {"anyOf": [{"type": "STRING"}, {"type": "INTEGER"}]}
    assert _notes(rewrite) == [any_of_hint("/properties/a")]
    one_of = {"type": "object", "properties": {"a": {"oneOf": EITHER["properties"]["a"]["anyOf"]}}}
    assert _notes(gemini_response_schema(one_of)) == [any_of_hint("/properties/a")]
    types = gemini_response_schema({"type": ["string", "integer"]})
    assert types.schema == {"anyOf": [{"type": "STRING"}, {"type": "INTEGER"}]}
    assert _notes(types) == [
        (
            "approximated",
            "/",
            "`type` with more than one type (an `anyOf`) is not enforced by Gemini "
            "responseSchema at `/`: Google does not list it as honoured (it is sent, as a hint)",
        )
    ]
    assert gemini_json_schema(EITHER).exact


def test_a_value_or_null_goes_as_nullable_and_stays_exact() -> None:
    class Maybe(BaseModel):
        a: int | None
        b: Answer | None = None

    rewrite = gemini_response_schema(Maybe.model_json_schema())
    assert rewrite.exact
    props = rewrite.schema["properties"]
    assert (props["a"]["type"], props["a"]["nullable"]) == ("INTEGER", True)
    assert (props["b"]["type"], props["b"]["nullable"]) == ("OBJECT", True)


def test_an_extraction_of_a_union_on_gemini_1_5_is_approximate() -> None:
    class Either(BaseModel):
        a: int | str

    target, recorder = provider("gemini", (200, answer([{"text": '{"a": 1}'}])))
    result = allama.extract(target, Either, ChatRequest("gemini-1.5-flash").user("x"))
    assert result.value == Either(a=1)
    assert result.metadata.mode is ExtractionMode.NATIVE
    assert result.metadata.enforcement is SchemaEnforcement.APPROXIMATE
    sent = recorder.bodies[-1]["generationConfig"]["responseSchema"]["properties"]["a"]
    assert sent == {"anyOf": [{"type": "INTEGER"}, {"type": "STRING"}], "title": "A"}


# 8. A part's own media type is read without case or parameters; text in another charset
# goes as UTF-8, since the `mimeType` sent names no charset


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


@pytest.mark.parametrize(
    ("part", "sent"),
    [
        (
            DocumentPart(data=b"hello", media_type="text/plain; charset=utf-8"),
            {"inlineData": {"mimeType": "text/plain", "data": _b64(b"hello")}},
        ),
        (
            DocumentPart(
                data="café".encode("latin-1"), media_type='Text/Plain; Charset="ISO-8859-1"'
            ),
            {"inlineData": {"mimeType": "text/plain", "data": _b64("café".encode())}},
        ),
        (
            DocumentPart(
                url="data:;base64," + _b64("é,a".encode("cp1252")),
                media_type="text/csv;charset=cp1252",
            ),
            {"inlineData": {"mimeType": "text/csv", "data": _b64("é,a".encode())}},
        ),
        (
            DocumentPart(data=b"%PDF", media_type="Application/PDF; name=a.pdf"),
            {"inlineData": {"mimeType": "application/pdf", "data": _b64(b"%PDF")}},
        ),
        (
            ImagePart(data=b"\x89PNG", media_type="IMAGE/PNG"),
            {"inlineData": {"mimeType": "image/png", "data": _b64(b"\x89PNG")}},
        ),
        (
            ImagePart(url="data:;base64," + PNG, media_type="Image/Png"),
            {"inlineData": {"mimeType": "image/png", "data": PNG}},
        ),
        (
            ImagePart(url="https://example.com/photo", media_type="Image/WebP; q=1"),
            {"fileData": {"fileUri": "https://example.com/photo", "mimeType": "image/webp"}},
        ),
    ],
)
def test_a_parts_media_type_is_read_without_case_or_parameters(
    part: DocumentPart | ImagePart, sent: dict[str, Any]
) -> None:
    target, recorder = provider("gemini", (200, answer([{"text": "ok"}])))
    response = target.chat(ChatRequest("gemini-2.5-flash").user("read this", part))
    assert recorder.bodies[-1]["contents"][0]["parts"][1] == sent
    assert response.warnings == ()


@pytest.mark.parametrize(
    ("part", "why"),
    [
        (
            ImagePart(data=b"GIF8", media_type="IMAGE/GIF; q=1"),
            "Gemini takes PNG, JPEG, WebP, HEIC and HEIF images, not image/gif",
        ),
        (
            DocumentPart(data=b"x", media_type="text/plain; charset=no-such-charset"),
            "a text/plain part names charset no-such-charset, which allama cannot read",
        ),
        (
            DocumentPart(data=b"\xff", media_type="text/plain; charset=us-ascii"),
            "a text/plain part must be text in its charset (us-ascii)",
        ),
    ],
)
def test_a_part_gemini_cannot_read_is_refused_unsent(
    part: DocumentPart | ImagePart, why: str
) -> None:
    target, recorder = provider("gemini", (200, answer([{"text": "ok"}])))
    with pytest.raises(InvalidRequestError) as caught:
        target.chat(ChatRequest("gemini-2.5-flash").user("read this", part))
    assert str(caught.value) == why
    assert recorder.bodies == []


# 8. Cached content beside a system instruction, tools or a tool choice is refused unsent


CACHE = "cachedContents/abc"
CACHE_RULE = "the system instructions, tools and tool config go into the cache when it is made"


def cached(request: ChatRequest, spelling: str = "cachedContent", **more: Any) -> ChatRequest:
    return request.with_option_json("gemini", {spelling: CACHE, **more})


@pytest.mark.parametrize("spelling", ["cachedContent", "cached_content"])
@pytest.mark.parametrize("policy", [UnsupportedPolicy.WARN, UnsupportedPolicy.ERROR])
def test_cached_content_beside_a_system_instruction_is_refused_unsent(
    spelling: str, policy: UnsupportedPolicy
) -> None:
    target, recorder = provider("gemini", (200, answer([{"text": "ok"}])))
    request = ChatRequest("gemini-2.5-flash").system("s").user("x").with_unsupported_policy(policy)
    with pytest.raises(allama.UnsupportedError) as caught:
        target.chat(cached(request, spelling))
    assert caught.value.field is RequestField.SYSTEM
    assert caught.value.message == (
        "cannot send `system`: `gemini-2.5-flash` on Gemini answers 400 to system instructions "
        "beside cached content (`cachedContent` of the body option `gemini`): " + CACHE_RULE
    )
    assert recorder.bodies == []


def test_cached_content_beside_the_requests_tools_is_refused_on_tools() -> None:
    target, recorder = provider("gemini", (200, answer([{"text": "ok"}])))
    request = ChatRequest("gemini-2.5-flash").user("x").with_tools(TOOLS)
    with pytest.raises(allama.UnsupportedError) as caught:
        target.chat(cached(request))
    assert caught.value.field is RequestField.TOOLS
    assert caught.value.message == (
        "cannot send `tools`: `gemini-2.5-flash` on Gemini answers 400 to tools beside cached "
        "content (`cachedContent` of the body option `gemini`): " + CACHE_RULE
    )
    assert recorder.bodies == []


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("tools", [{"googleSearch": {}}]),
        ("systemInstruction", {"parts": [{"text": "s"}]}),
        ("tool_config", {"retrievalConfig": {"latLng": {"latitude": 1, "longitude": 2}}}),
    ],
)
def test_cached_content_beside_the_options_own_fields_is_refused_on_options(
    key: str, value: Any
) -> None:
    target, recorder = provider("gemini", (200, answer([{"text": "ok"}])))
    with pytest.raises(allama.UnsupportedError) as caught:
        target.chat(cached(ChatRequest("gemini-2.5-flash").user("x"), **{key: value}))
    named = "toolConfig" if key == "tool_config" else key
    assert caught.value.field is RequestField.OPTIONS
    assert caught.value.message == (
        f"cannot send `options`: `gemini-2.5-flash` on Gemini answers 400 to `{named}` beside "
        "`cachedContent` in the body option `gemini`: " + CACHE_RULE
    )
    assert recorder.bodies == []


def test_cached_content_alone_goes_beside_native_output() -> None:
    target, recorder = provider("gemini", (200, answer([{"text": '{"a": 1}'}])))
    result = allama.extract(target, Answer, cached(ChatRequest("gemini-2.5-flash").user("x")))
    assert result.value == Answer(a=1)
    assert result.metadata.mode is ExtractionMode.NATIVE
    (body,) = recorder.bodies
    assert sorted(body) == ["cachedContent", "contents", "generationConfig"]
    assert body["cachedContent"] == CACHE
    assert body["generationConfig"]["responseMimeType"] == "application/json"


def test_a_forced_tool_extraction_with_a_cache_is_refused_unsent() -> None:
    target, recorder = provider("gemini", (200, called({"a": 1})))
    request = cached(ChatRequest("gemini-2.5-flash").user("x")).with_option(
        ExtractionMode.FORCED_TOOL
    )
    with pytest.raises(allama.UnsupportedError) as caught:
        allama.extract(target, Answer, request)
    assert caught.value.field is RequestField.TOOLS
    assert caught.value.message == (
        "cannot send `tools`: `gemini-2.5-flash` on Gemini answers 400 to tools beside cached "
        "content (`cachedContent` of the body option `gemini`): " + CACHE_RULE
    )
    metadata = allama.ExtractionMetadata.from_error(caught.value)
    assert metadata is not None
    assert (metadata.mode, metadata.passes) == (ExtractionMode.FORCED_TOOL, 0)
    assert recorder.bodies == []


def test_an_automatic_extraction_that_needs_the_tool_says_both_refusals() -> None:
    target, recorder = provider("gemini", (200, called({"v": 1, "kids": []})))
    with pytest.raises(allama.UnsupportedError) as caught:
        allama.extract(target, Tree, cached(ChatRequest("gemini-1.5-pro").user("x")))
    message = caught.value.message
    assert message.startswith(
        "`Tree` cannot be extracted from `gemini-1.5-pro` with its output constrained: native "
        "output was refused ("
    )
    assert message.endswith(
        "and forced-tool mode was refused too (cannot send `tools`: `gemini-1.5-pro` on Gemini "
        "answers 400 to tools beside cached content (`cachedContent` of the body option "
        f"`gemini`): {CACHE_RULE})"
    )
    assert recorder.bodies == []


# 9. A response of no candidate, and no blocked prompt, reads the same whole or streamed

NO_CANDIDATE_USAGE = {"promptTokenCount": 100, "candidatesTokenCount": 7, "totalTokenCount": 107}


@pytest.mark.parametrize(
    "payload",
    [
        {"candidates": [], "usageMetadata": NO_CANDIDATE_USAGE},
        {"usageMetadata": NO_CANDIDATE_USAGE, "modelVersion": "gemini-2.5-flash"},
    ],
    ids=["empty-list", "no-field"],
)
def test_no_candidate_reads_as_an_empty_response_whole_and_streamed(
    payload: dict[str, Any],
) -> None:
    request = ChatRequest("gemini-2.5-flash").user("x")
    whole, _ = provider("gemini", (200, payload))
    body = whole.chat(request)
    streamed, _ = provider("gemini", (200, sse(payload)))
    with streamed.chat_stream(request) as stream:
        for _ in stream:
            pass
        collected = stream.response()
    for response in (body, collected):
        assert response.content == ()
        assert response.finish_reason is None
        assert response.usage == Usage(input_tokens=100, output_tokens=7)
        assert response.provider_data == {}


@pytest.mark.parametrize("mode", [ExtractionMode.NATIVE, ExtractionMode.FORCED_TOOL])
def test_an_extraction_of_no_candidate_counts_its_pass_whole_and_streamed(
    mode: ExtractionMode,
) -> None:
    payload = {"candidates": [], "usageMetadata": NO_CANDIDATE_USAGE}
    request = ChatRequest("gemini-2.5-flash").user("x").with_option(mode)
    missing = (
        allama.MissingStructuredTextError
        if mode is ExtractionMode.NATIVE
        else allama.MissingToolCallError
    )
    whole, _ = provider("gemini", (200, payload))
    with pytest.raises(missing) as from_body:
        allama.extract(whole, Answer, request)
    streamed, _ = provider("gemini", (200, sse(payload)))
    with (
        pytest.raises(missing) as from_stream,
        allama.extract_stream(streamed, Answer, request) as stream,
    ):
        for _ in stream:
            pass
        stream.finish()
    records = [allama.ExtractionMetadata.from_error(e.value) for e in (from_body, from_stream)]
    for record in records:
        assert record is not None
        assert record.passes == 1
        assert record.usage == Usage(input_tokens=100, output_tokens=7)
        assert record.cost is not None
    assert records[0] is not None and records[1] is not None
    assert records[0].cost == records[1].cost
    assert str(from_body.value) == str(from_stream.value)


def test_a_stream_whose_candidate_comes_after_a_chunk_of_none_reads_as_it_did() -> None:
    usage = {"promptTokenCount": 10, "candidatesTokenCount": 5}
    data = sse(
        {"usageMetadata": {"promptTokenCount": 10}, "modelVersion": MODEL},
        chunk([{"text": "Hi"}], "STOP", usage),
    )
    target, _ = provider("gemini", (200, data))
    with target.chat_stream(ChatRequest(MODEL).user("x")) as stream:
        for _ in stream:
            pass
        response = stream.response()
    assert response.content == (TextPart(text="Hi"),)
    assert response.finish_reason == FinishReason.STOP
    assert response.usage == Usage(input_tokens=10, output_tokens=5)


def test_a_stream_cut_after_its_candidate_is_still_unfinished() -> None:
    data = sse(
        {"usageMetadata": {"promptTokenCount": 10}, "modelVersion": MODEL},
        chunk([{"text": "Hi"}]),
    )
    target, _ = provider("gemini", (200, data))
    with (
        pytest.raises(allama.IncompleteStreamError),
        target.chat_stream(ChatRequest(MODEL).user("x")) as stream,
    ):
        for _ in stream:
            pass
        stream.response()


# 10. A caller's `propertyOrdering` is sent on either surface, said where it is not as given

ORDERED: dict[str, Any] = {
    "type": "object",
    "properties": {"b": {"type": "string"}, "a": {"type": "string"}},
    "required": ["b", "a"],
    "propertyOrdering": ["a", "b"],
}


@pytest.mark.parametrize(
    ("model", "key"),
    [("gemini-2.5-flash", "responseJsonSchema"), ("gemini-1.5-pro", "responseSchema")],
)
def test_the_callers_property_ordering_is_sent_with_the_response_format(
    model: str, key: str
) -> None:
    target, recorder = provider("gemini", (200, answer([{"text": '{"a": "1", "b": "2"}'}])))
    fmt = ResponseFormat.for_schema(ORDERED, name="pair")
    response = target.chat(ChatRequest(model).user("x").with_response_format(fmt))
    sent = recorder.bodies[-1]["generationConfig"][key]
    assert sent["propertyOrdering"] == ["a", "b"]
    assert response.warnings == ()


def test_an_ordering_naming_an_undeclared_property_is_said_on_the_response_format() -> None:
    target, recorder = provider("gemini", (200, answer([{"text": '{"a": "1", "b": "2"}'}])))
    schema = {**ORDERED, "propertyOrdering": ["a", "z"]}
    fmt = ResponseFormat.for_schema(schema, name="pair")
    response = target.chat(ChatRequest("gemini-2.5-flash").user("x").with_response_format(fmt))
    sent = recorder.bodies[-1]["generationConfig"]["responseJsonSchema"]
    assert sent["propertyOrdering"] == ["a", "b"]
    assert said(response.warnings) == [
        (
            WarningKind.APPROXIMATED,
            RequestField.RESPONSE_FORMAT,
            "the response format `pair` was approximated: `propertyOrdering` at `/` names "
            'properties the object does not declare: it was sent as ["a", "b"]',
        )
    ]


# 11. A user turn after function calls: the responses alone in one content, the user's words
# in the next; a call the next user turn gives no result for is refused unsent

IMAGE = b"\x89PNG\r\n\x1a\n0000"
IMAGE_B64 = base64.b64encode(IMAGE).decode()
CALL_A = ToolCall(id="call_0", name="f", arguments='{"a": 1}')
CALL_B = ToolCall(id="call_1", name="f", arguments='{"a": 2}')


def response_part(output: str) -> dict[str, Any]:
    return {"functionResponse": {"name": "f", "response": {"output": output}}}


@pytest.mark.parametrize("model", ["gemini-3-flash-preview", "gemini-2.5-flash"])
def test_the_users_words_after_a_tool_result_go_in_a_content_of_their_own(model: str) -> None:
    target, recorder = provider("gemini", (200, answer([{"text": "done"}])))
    request = (
        ChatRequest(model)
        .user("x")
        .with_tools(TOOLS)
        .assistant([CALL_A])
        .tool_result("call_0", "1")
        .user("Now summarise", ImagePart(data=IMAGE, media_type="image/png"))
    )
    target.chat(request)
    assert recorder.bodies[-1]["contents"][2:] == [
        {"role": "user", "parts": [response_part("1")]},
        {
            "role": "user",
            "parts": [
                {"text": "Now summarise"},
                {"inlineData": {"mimeType": "image/png", "data": IMAGE_B64}},
            ],
        },
    ]


def test_results_around_the_users_words_go_first_in_the_order_of_the_calls() -> None:
    target, recorder = provider("gemini", (200, answer([{"text": "done"}])))
    request = (
        ChatRequest("gemini-2.5-flash")
        .user("x")
        .with_tools(TOOLS)
        .assistant([CALL_A, CALL_B])
        .tool_result("call_1", "2")
        .user("The first is slow.")
        .tool_result("call_0", "1")
    )
    response = target.chat(request)
    assert recorder.bodies[-1]["contents"][2:] == [
        {"role": "user", "parts": [response_part("1"), response_part("2")]},
        {"role": "user", "parts": [{"text": "The first is slow."}]},
    ]
    # The words, given before the first call's result, are now read after it: said, by
    # their place alone.
    assert [(str(w.kind), w.message) for w in response.warnings] == [
        (
            "approximated",
            "Gemini takes a turn's function responses only together, before what else the "
            "user says; the user message at `messages[3]`, given before a tool result of its "
            "turn, was moved after the turn's results",
        )
    ]


def test_words_of_whitespace_alone_after_a_tool_result_are_left_out() -> None:
    target, recorder = provider("gemini", (200, answer([{"text": "done"}])))
    request = (
        ChatRequest("gemini-2.5-flash")
        .user("x")
        .with_tools(TOOLS)
        .assistant([CALL_A])
        .tool_result("call_0", "1")
        .user(" \n")
    )
    target.chat(request)
    assert recorder.bodies[-1]["contents"][2:] == [{"role": "user", "parts": [response_part("1")]}]


def test_a_call_with_no_result_before_the_next_user_turn_is_refused_unsent() -> None:
    target, recorder = provider("gemini", (200, answer([{"text": "done"}])))
    request = (
        ChatRequest("gemini-3-flash-preview")
        .user("x")
        .with_tools(TOOLS)
        .assistant([CALL_A, CALL_B])
        .tool_result("call_0", "1")
        .user("go on")
    )
    with pytest.raises(InvalidRequestError) as caught:
        target.chat(request)
    assert str(caught.value) == (
        "the tool call `call_1` of the assistant turn at `messages[1]` got no tool result "
        "before the next user turn (`messages[3]`), and Gemini needs each call's result right "
        "after it"
    )
    assert recorder.bodies == []


def test_calls_the_user_answers_with_words_alone_are_refused_unsent() -> None:
    target, recorder = provider("gemini", (200, answer([{"text": "done"}])))
    request = (
        ChatRequest("gemini-2.5-flash")
        .system("Be brief.")
        .user("x")
        .with_tools(TOOLS)
        .assistant([CALL_A, CALL_B])
        .user("never mind")
    )
    with pytest.raises(InvalidRequestError) as caught:
        target.chat(request)
    assert str(caught.value) == (
        "the tool calls `call_0`, `call_1` of the assistant turn at `messages[2]` got no tool "
        "result before the next user turn (`messages[3]`), and Gemini needs each call's "
        "result right after it"
    )
    assert recorder.bodies == []


def test_calls_that_end_the_conversation_are_not_refused() -> None:
    target, recorder = provider("gemini", (200, answer([{"text": "done"}])))
    request = ChatRequest("gemini-2.5-flash").user("x").with_tools(TOOLS).assistant([CALL_A])
    target.chat(request)
    assert [content["role"] for content in recorder.bodies[-1]["contents"]] == ["user", "model"]


# 12. Gemini 2.5 Flash Image and the 2.5 speech models do not think


@pytest.mark.parametrize(
    "model",
    [
        "gemini-2.5-flash-image",
        "gemini-2.5-flash-image-preview",
        "gemini-2.5-flash-preview-tts",
        "gemini-2.5-pro-preview-tts",
    ],
)
def test_a_model_of_image_or_speech_output_is_sent_no_thinking(model: str) -> None:
    target, recorder = provider("gemini", (200, answer([{"text": "x"}])))
    assert target.chat_capability(model, ChatCapability.REASONING) is CapabilitySupport.UNSUPPORTED
    none = target.chat(ChatRequest(model).user("x").with_reasoning_effort(ReasoningEffort.NONE))
    assert "generationConfig" not in recorder.bodies[-1]
    assert none.warnings == ()
    low = target.chat(ChatRequest(model).user("x").with_reasoning_effort(ReasoningEffort.LOW))
    assert "generationConfig" not in recorder.bodies[-1]
    assert said(low.warnings) == [
        (
            WarningKind.UNSUPPORTED,
            RequestField.REASONING_EFFORT,
            f"`{model}` on Gemini does not think",
        )
    ]


def test_gemini_2_5_flash_itself_still_turns_thinking_off() -> None:
    target, recorder = provider("gemini", (200, answer([{"text": "x"}])))
    request = ChatRequest("gemini-2.5-flash").user("x").with_reasoning_effort("none")
    target.chat(request)
    assert recorder.bodies[-1]["generationConfig"] == {"thinkingConfig": {"thinkingBudget": 0}}


# 13. Reasoning effort `none` where thinking cannot be turned off: the lowest level or budget


@pytest.mark.parametrize(
    ("model", "sent", "instead"),
    [
        ("gemini-3-flash-preview", {"thinkingLevel": "MINIMAL"}, "its lowest level, `minimal`"),
        ("gemini-3-pro-preview", {"thinkingLevel": "LOW"}, "its lowest level, `low`"),
        ("gemini-3.1-pro-preview", {"thinkingLevel": "LOW"}, "its lowest level, `low`"),
        ("gemini-2.5-pro", {"thinkingBudget": 128}, "its lowest thinking budget, 128 tokens"),
    ],
)
def test_no_thinking_where_it_cannot_be_turned_off_sends_the_least(
    model: str, sent: dict[str, Any], instead: str
) -> None:
    target, recorder = provider("gemini", (200, answer([{"text": "x"}])))
    response = target.chat(ChatRequest(model).user("x").with_reasoning_effort("none"))
    assert recorder.bodies[-1]["generationConfig"] == {"thinkingConfig": sent}
    assert said(response.warnings) == [
        (
            WarningKind.UNSUPPORTED,
            RequestField.REASONING_EFFORT,
            f"`{model}` on Gemini cannot turn thinking off; {instead}, was sent",
        )
    ]


def test_no_thinking_where_it_cannot_be_turned_off_is_refused_under_error() -> None:
    target, recorder = provider("gemini", (200, answer([{"text": "x"}])))
    request = (
        ChatRequest("gemini-3-flash-preview")
        .user("x")
        .with_reasoning_effort("none")
        .with_unsupported_policy(UnsupportedPolicy.ERROR)
    )
    with pytest.raises(UnsupportedError) as caught:
        target.chat(request)
    assert str(caught.value) == (
        "cannot send `reasoning_effort`: `gemini-3-flash-preview` on Gemini cannot turn "
        "thinking off"
    )
    assert caught.value.field is RequestField.REASONING_EFFORT
    assert recorder.bodies == []


# 14. Gemini 2.x takes no built-in tools beside function calling or JSON output: refused
# unsent, an automatic extraction too (its forced tool would be answered 400 as well)

BUILT_IN_RULE = (
    "Gemini 2.x cannot mix built-in tools with function calling or JSON output (Gemini 3 can)"
)
SEARCH: dict[str, Any] = {"tools": [{"googleSearch": {}}]}


@pytest.mark.parametrize(
    ("mode", "what"),
    [
        (ExtractionMode.AUTO, "JSON output"),
        (ExtractionMode.NATIVE, "JSON output"),
        (ExtractionMode.FORCED_TOOL, "function declarations"),
    ],
)
def test_an_extraction_beside_google_search_on_2_5_is_refused_unsent(
    mode: ExtractionMode, what: str
) -> None:
    target, recorder = provider("gemini", (200, called({"a": 1})))
    request = (
        ChatRequest("gemini-2.5-flash")
        .user("x")
        .with_option(mode)
        .with_option_json("gemini", SEARCH)
    )
    with pytest.raises(UnsupportedError) as caught:
        allama.extract(target, Answer, request)
    assert caught.value.field is RequestField.OPTIONS
    assert caught.value.message == (
        f"cannot send `options`: `gemini-2.5-flash` on Gemini answers 400 to {what} beside the "
        f"built-in tools of the body option `gemini` (`googleSearch`): {BUILT_IN_RULE}"
    )
    assert recorder.bodies == []
    metadata = allama.ExtractionMetadata.from_error(caught.value)
    assert metadata is not None
    # No fallback claimed: the forced tool would have been refused the same way.
    expected = ExtractionMode.NATIVE if mode is ExtractionMode.AUTO else mode
    assert (metadata.mode, metadata.auto_fallback, metadata.passes) == (expected, None, 0)


@pytest.mark.parametrize("policy", [UnsupportedPolicy.WARN, UnsupportedPolicy.ERROR])
def test_the_requests_tools_beside_built_in_tools_on_2_5_are_refused_unsent(
    policy: UnsupportedPolicy,
) -> None:
    target, recorder = provider("gemini", (200, answer([{"text": "ok"}])))
    request = (
        ChatRequest("gemini-2.5-pro")
        .user("x")
        .with_tools(TOOLS)
        .with_unsupported_policy(policy)
        .with_option_json("gemini", {"tools": [{"googleSearch": {}}, {"code_execution": {}}]})
    )
    with pytest.raises(UnsupportedError) as caught:
        target.chat(request)
    assert caught.value.field is RequestField.OPTIONS
    assert caught.value.message == (
        "cannot send `options`: `gemini-2.5-pro` on Gemini answers 400 to function "
        "declarations beside the built-in tools of the body option `gemini` (`googleSearch`, "
        f"`code_execution`): {BUILT_IN_RULE}"
    )
    assert recorder.bodies == []


def test_json_output_the_option_asks_for_beside_a_built_in_tool_on_2_0_is_refused() -> None:
    target, recorder = provider("gemini", (200, answer([{"text": "{}"}])))
    option = {**SEARCH, "generationConfig": {"responseMimeType": "application/json"}}
    with pytest.raises(UnsupportedError) as caught:
        target.chat(ChatRequest("gemini-2.0-flash").user("x").with_option_json("gemini", option))
    assert caught.value.message == (
        "cannot send `options`: `gemini-2.0-flash` on Gemini answers 400 to JSON output beside "
        f"the built-in tools of the body option `gemini` (`googleSearch`): {BUILT_IN_RULE}"
    )
    assert recorder.bodies == []


def test_built_in_tools_alone_still_go_to_2_5() -> None:
    target, recorder = provider("gemini", (200, answer([{"text": "ok"}])))
    tools = [{"googleSearch": {}}, {"codeExecution": {}}, {"urlContext": {}}]
    request = ChatRequest("gemini-2.5-flash").user("x").with_option_json("gemini", {"tools": tools})
    assert target.chat(request).warnings == ()
    assert recorder.bodies[-1]["tools"] == tools


def test_gemini_3_takes_built_in_tools_beside_function_calling_and_json_output() -> None:
    target, recorder = provider(
        "gemini", (200, answer([{"text": "ok"}])), (200, answer([{"text": '{"a": 1}'}]))
    )
    model = "gemini-3-flash-preview"
    request = ChatRequest(model).user("x").with_option_json("gemini", SEARCH)
    target.chat(request.with_tools(TOOLS))
    assert recorder.bodies[-1]["tools"] == [
        {
            "functionDeclarations": [
                {"name": "f", "parametersJsonSchema": {"type": "object", "properties": {}}}
            ]
        },
        {"googleSearch": {}},
    ]
    result = allama.extract(target, Answer, request)
    assert (result.value, result.metadata.mode) == (Answer(a=1), ExtractionMode.NATIVE)
    assert recorder.bodies[-1]["tools"] == [{"googleSearch": {}}]
    assert recorder.bodies[-1]["generationConfig"]["responseMimeType"] == "application/json"


# Any response mime type but text/plain is refused beside 2.x's built-in tools ("Tool use
# with a response mime type ... is unsupported"): a decision's choice (`text/x.enum`) too,
# unsent, as JSON output is (the extraction it would fall to meets the same refusal).

CHOICE_REFUSED = (
    "a choice of options (the response mime type `text/x.enum`) beside the built-in tools of "
    "the body option `gemini` (`{names}`): Gemini 2.x cannot mix built-in tools with function "
    "calling or a response mime type other than `text/plain` (Gemini 3 can)"
)


@pytest.mark.parametrize(
    ("tools", "names"),
    [
        ([{"googleSearch": {}}], "googleSearch"),
        ([{"urlContext": {}}], "urlContext"),
        ({"googleSearch": {}}, "googleSearch"),  # one tool, not in a list
    ],
)
def test_a_decision_beside_built_in_tools_on_2_5_is_refused_unsent(tools: Any, names: str) -> None:
    target, recorder = provider("gemini", (200, answer([{"text": "Yes"}])))
    request = (
        ChatRequest("gemini-2.5-flash")
        .user("Is it raining in Paris?")
        .with_option_json("gemini", {"tools": tools})
    )
    with pytest.raises(UnsupportedError) as caught:
        allama.decide(target, bool, request)
    assert caught.value.field is RequestField.OPTIONS
    assert caught.value.message == (
        "cannot send `options`: `gemini-2.5-flash` on Gemini answers 400 to "
        + CHOICE_REFUSED.format(names=names)
    )
    assert recorder.bodies == []


@pytest.mark.parametrize(
    "request_",
    [
        ChatRequest("gemini-2.0-flash")
        .user("x")
        .with_response_format(ResponseFormat.choice(["a", "b"]))
        .with_option_json("gemini", SEARCH),
        ChatRequest("gemini-2.0-flash")
        .user("x")
        .with_option_json(
            "gemini", {**SEARCH, "generationConfig": {"responseMimeType": "text/x.enum"}}
        ),
    ],
    ids=["choice format", "option's mime type"],
)
def test_a_choice_beside_a_built_in_tool_on_2_0_is_refused_unsent(request_: ChatRequest) -> None:
    target, recorder = provider("gemini", (200, answer([{"text": "a"}])))
    with pytest.raises(UnsupportedError) as caught:
        target.chat(request_)
    assert caught.value.message == (
        "cannot send `options`: `gemini-2.0-flash` on Gemini answers 400 to "
        + CHOICE_REFUSED.format(names="googleSearch")
    )
    assert recorder.bodies == []


def test_plain_text_asked_for_beside_a_built_in_tool_on_2_5_still_goes() -> None:
    target, recorder = provider("gemini", (200, answer([{"text": "ok"}])))
    option = {**SEARCH, "generationConfig": {"responseMimeType": "text/plain"}}
    request = ChatRequest("gemini-2.5-flash").user("x").with_option_json("gemini", option)
    assert target.chat(request).text() == "ok"
    assert recorder.bodies[-1]["generationConfig"] == {"responseMimeType": "text/plain"}


def test_a_decision_beside_a_built_in_tool_on_gemini_3_is_a_choice_as_before() -> None:
    target, recorder = provider("gemini", (200, answer([{"text": "Yes"}])))
    request = ChatRequest("gemini-3-flash-preview").user("Rain?").with_option_json("gemini", SEARCH)
    assert allama.decide(target, bool, request).value is True
    sent = recorder.bodies[-1]
    assert sent["tools"] == [{"googleSearch": {}}]
    assert sent["generationConfig"]["responseMimeType"] == "text/x.enum"


# 15. The code the model ran, and its result, go back on the next turn in their place, with
# the signature on them, whole and streamed

CODE_PARTS: list[dict[str, Any]] = [
    {"text": "Let me compute."},
    {
        "executableCode": {"language": "PYTHON", "code": "print(sum(range(10)))"},
        "thoughtSignature": "U0lHMQ==",
    },
    {"codeExecutionResult": {"outcome": "OUTCOME_OK", "output": "45\n"}},
    {"text": "The sum is 45."},
]
CODE = {"tools": [{"codeExecution": {}}]}


def _code_request(model: str = "gemini-2.5-flash") -> ChatRequest:
    return ChatRequest(model).user("sum it").with_option_json("gemini", CODE)


def test_code_execution_parts_go_back_in_their_place() -> None:
    target, recorder = provider("gemini", (200, answer(CODE_PARTS)))
    response = target.chat(_code_request())
    assert response.text() == "Let me compute.The sum is 45."
    # Still kept verbatim where they were.
    assert response.provider_data == {"gemini": {"parts": CODE_PARTS[1:3]}}
    target.chat(_code_request().push(response.to_assistant_message()).user("again"))
    assert model_turns(recorder) == [CODE_PARTS]
    assert recorder.bodies[-1]["contents"][-1] == {"role": "user", "parts": [{"text": "again"}]}


def test_streamed_code_execution_parts_go_back_in_their_place() -> None:
    def piece(parts: list[dict[str, Any]], **more: Any) -> dict[str, Any]:
        return {"candidates": [{"content": {"role": "model", "parts": parts}, **more}]}

    data = sse(
        piece(CODE_PARTS[:1]),
        piece(CODE_PARTS[1:2]),
        piece([*CODE_PARTS[2:], {"text": ""}], finishReason="STOP"),
    )
    target, recorder = provider("gemini", (200, data), (200, answer([{"text": "ok"}])))
    stream = target.chat_stream(_code_request())
    for _ in stream:
        pass
    response = stream.response()
    target.chat(_code_request().push(response.to_assistant_message()).user("again"))
    assert model_turns(recorder) == [CODE_PARTS]


def test_code_execution_parts_another_endpoint_ran_are_left_out_with_the_warning() -> None:
    target, _ = provider("gemini", (200, answer(CODE_PARTS)))
    turn = target.chat(_code_request()).to_assistant_message()
    elsewhere, recorder = provider("gemini", (200, answer([{"text": "ok"}])), base_url=PROXY)
    response = elsewhere.chat(_code_request().push(turn).user("again"))
    assert model_turns(recorder) == [[{"text": "Let me compute."}, {"text": "The sum is 45."}]]
    assert said(response.warnings) == [
        (WarningKind.APPROXIMATED, RequestField.REASONING, REASONING_WARNING)
    ]


# 16. A leading UTF-8 byte-order mark of a text document is no part of its text: left out

BOM = b"\xef\xbb\xbf"


@pytest.mark.parametrize(
    ("part", "data"),
    [
        (DocumentPart(data=BOM + b"hello", media_type="text/plain"), b"hello"),
        (DocumentPart(data=BOM + b"# Hi", media_type="text/markdown; charset=utf-8"), b"# Hi"),
        (DocumentPart(url="data:text/csv;base64," + _b64(BOM + b"a,b")), b"a,b"),
        (DocumentPart(url="data:text/plain;charset=UTF8," + "%EF%BB%BFx"), b"x"),
        # One mark only, and only at the start.
        (DocumentPart(data=BOM + BOM + b"x" + BOM, media_type="text/plain"), BOM + b"x" + BOM),
        # Not a text document: its bytes as they are.
        (DocumentPart(data=BOM + b"%PDF", media_type="application/pdf"), BOM + b"%PDF"),
    ],
)
def test_a_leading_utf8_byte_order_mark_is_left_out(part: DocumentPart, data: bytes) -> None:
    target, recorder = provider("gemini", (200, answer([{"text": "ok"}])))
    response = target.chat(ChatRequest("gemini-2.5-flash").user("read this", part))
    sent = recorder.bodies[-1]["contents"][0]["parts"][1]["inlineData"]
    assert base64.b64decode(sent["data"]) == data
    assert response.warnings == ()
