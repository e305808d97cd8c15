"""A body option's `stream` (and OpenAI's `stream_options`) cannot change how a call reads
its answer: `chat` reads one whole response, `chat_stream` a stream. The option's own
`stream` that differs from the call's is not sent, with a warning on `options` (refused
before sending under `UnsupportedPolicy.ERROR`); the answer, with the usage of a paid call,
is read. The endpoint here answers as each provider does: by the body's `stream` (by the
URL on Gemini, which refuses a `stream` field), and with usage at a stream's end only where
`stream_options.include_usage` asks for it."""

from __future__ import annotations

import json
from typing import Any

import httpx2
import pytest

import allama
from _responses_support import stream_of
from allama.errors import UnsupportedError
from allama.transport import Transport
from allama.types import (
    ChatRequest,
    ChatResponse,
    RequestField,
    UnsupportedPolicy,
    UnsupportedStage,
    WarningKind,
)

TEXT = "Hello there"
USAGE = (10, 5)

# case: preset, model, the body option's namespace, one more field of the option (sent as
# given), and that field as the body carries it.
CASES: dict[str, tuple[str, str, str, dict[str, Any], dict[str, Any]]] = {
    "openai_compat": ("openai", "gpt-4o", "openai_compat", {"user": "u1"}, {"user": "u1"}),
    "openai_responses": (
        "openai",
        "gpt-4o",
        "openai_responses",
        {"metadata": {"k": "v"}},
        {"metadata": {"k": "v"}},
    ),
    "anthropic": (
        "anthropic",
        "claude-sonnet-4-5",
        "anthropic",
        {"metadata": {"user_id": "u1"}},
        {"metadata": {"user_id": "u1"}},
    ),
    "gemini": (
        "gemini",
        "gemini-2.5-flash",
        "gemini",
        {"cached_content": "cachedContents/c1"},
        {"cachedContent": "cachedContents/c1"},
    ),
    "ollama": ("ollama", "llama3.2", "ollama", {"keep_alive": "5m"}, {"keep_alive": "5m"}),
}

SSE = {"content-type": "text/event-stream"}


class Endpoint:
    """A provider's endpoint of `case`'s wire, answering `TEXT` whole or streamed as the
    request asks, and refusing what the provider refuses."""

    def __init__(self, case: str) -> None:
        self.case = case
        self.bodies: list[dict[str, Any]] = []
        self.urls: list[str] = []

    def __call__(self, http: httpx2.Request) -> httpx2.Response:
        body = json.loads(http.read())
        self.bodies.append(body)
        self.urls.append(str(http.url))
        if self.case == "gemini":
            if "stream" in body:
                error = {
                    "code": 400,
                    "message": 'Invalid JSON payload received. Unknown name "stream": '
                    "Cannot find field.",
                    "status": "INVALID_ARGUMENT",
                }
                return httpx2.Response(400, json={"error": error})
            streamed = ":streamGenerateContent" in http.url.path
        else:
            streamed = body.get("stream", self.case == "ollama") is True
        if self.case == "openai_compat" and "stream_options" in body and not streamed:
            error = {
                "message": "The 'stream_options' parameter is only allowed when 'stream' is "
                "enabled.",
                "type": "invalid_request_error",
                "param": "stream_options",
                "code": None,
            }
            return httpx2.Response(400, json={"error": error})
        answer = getattr(self, self.case)
        return answer(body, streamed) if streamed else httpx2.Response(200, json=answer(body))

    def openai_compat(self, body: dict[str, Any], streamed: bool = False) -> Any:
        usage = {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}
        head = {"id": "chatcmpl-1", "created": 0, "model": body["model"]}
        if not streamed:
            choice = {
                "index": 0,
                "message": {"role": "assistant", "content": TEXT},
                "finish_reason": "stop",
            }
            return {**head, "object": "chat.completion", "choices": [choice], "usage": usage}
        chunk = {**head, "object": "chat.completion.chunk"}
        chunks: list[dict[str, Any]] = [
            {**chunk, "choices": [{"index": 0, "delta": {"role": "assistant", "content": TEXT}}]},
            {**chunk, "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]},
        ]
        options = body.get("stream_options")
        if isinstance(options, dict) and options.get("include_usage") is True:
            chunks.append({**chunk, "choices": [], "usage": usage})
        data = "".join(f"data: {json.dumps(c)}\n\n" for c in chunks) + "data: [DONE]\n\n"
        return httpx2.Response(200, content=data.encode(), headers=SSE)

    def openai_responses(self, body: dict[str, Any], streamed: bool = False) -> Any:
        text = {"type": "output_text", "text": TEXT, "annotations": [], "logprobs": []}
        response = {
            "id": "resp_1",
            "object": "response",
            "created_at": 1_766_000_000,
            "status": "completed",
            "error": None,
            "incomplete_details": None,
            "model": body["model"],
            "output": [
                {
                    "type": "message",
                    "id": "msg_1",
                    "status": "completed",
                    "role": "assistant",
                    "content": [text],
                }
            ],
            "usage": {"input_tokens": 10, "output_tokens": 5, "total_tokens": 15},
        }
        if not streamed:
            return response
        return httpx2.Response(200, content=stream_of(response), headers=SSE)

    def anthropic(self, body: dict[str, Any], streamed: bool = False) -> Any:
        message = {
            "id": "msg_1",
            "type": "message",
            "role": "assistant",
            "model": body["model"],
            "content": [{"type": "text", "text": TEXT}],
            "stop_reason": "end_turn",
            "stop_sequence": None,
            "usage": {"input_tokens": 10, "output_tokens": 5},
        }
        if not streamed:
            return message
        start = {**message, "content": [], "stop_reason": None, "usage": {"input_tokens": 10}}
        events: list[dict[str, Any]] = [
            {"type": "message_start", "message": start},
            {
                "type": "content_block_start",
                "index": 0,
                "content_block": {"type": "text", "text": ""},
            },
            {
                "type": "content_block_delta",
                "index": 0,
                "delta": {"type": "text_delta", "text": TEXT},
            },
            {"type": "content_block_stop", "index": 0},
            {
                "type": "message_delta",
                "delta": {"stop_reason": "end_turn", "stop_sequence": None},
                "usage": {"output_tokens": 5},
            },
            {"type": "message_stop"},
        ]
        data = "".join(f"event: {e['type']}\ndata: {json.dumps(e)}\n\n" for e in events)
        return httpx2.Response(200, content=data.encode(), headers=SSE)

    def gemini(self, body: dict[str, Any], streamed: bool = False) -> Any:
        usage = {"promptTokenCount": 10, "candidatesTokenCount": 5, "totalTokenCount": 15}

        def chunk(text: str, **more: Any) -> dict[str, Any]:
            content = {"role": "model", "parts": [{"text": text}]}
            return {"candidates": [{"content": content, "index": 0, **more}]}

        if not streamed:
            return {**chunk(TEXT, finishReason="STOP"), "usageMetadata": usage}
        chunks = [chunk(TEXT[:5]), {**chunk(TEXT[5:], finishReason="STOP"), "usageMetadata": usage}]
        data = "".join(f"data: {json.dumps(c)}\r\n\r\n" for c in chunks)
        return httpx2.Response(200, content=data.encode(), headers=SSE)

    def ollama(self, body: dict[str, Any], streamed: bool = False) -> Any:
        head = {"model": body["model"], "created_at": "2025-01-01T00:00:00Z"}
        last = {"done": True, "done_reason": "stop", "prompt_eval_count": 10, "eval_count": 5}
        if not streamed:
            return {**head, "message": {"role": "assistant", "content": TEXT}, **last}
        lines = [
            {**head, "message": {"role": "assistant", "content": TEXT}, "done": False},
            {**head, "message": {"role": "assistant", "content": ""}, **last},
        ]
        data = "".join(json.dumps(line) + "\n" for line in lines)
        return httpx2.Response(
            200, content=data.encode(), headers={"content-type": "application/x-ndjson"}
        )

    def transport(self) -> Transport:
        return Transport(client=httpx2.Client(transport=httpx2.MockTransport(self)))


def _call(
    case: str, request: ChatRequest, how: str, endpoint: Endpoint | None = None
) -> tuple[ChatResponse, Endpoint]:
    preset = CASES[case][0]
    endpoint = endpoint or Endpoint(case)
    options = {"api": "responses"} if case == "openai_responses" else {}
    target = allama.provider(preset, api_key="k", transport=endpoint.transport(), **options)
    with target:
        if how == "chat":
            return target.chat(request), endpoint
        with target.chat_stream(request) as stream:
            return stream.response(), endpoint


def _request(case: str, option: dict[str, Any]) -> ChatRequest:
    _, model, namespace, more, _ = CASES[case]
    return ChatRequest(model).user("Hi").with_option_json(namespace, {**option, **more})


def _read(response: ChatResponse) -> None:
    """The answer and its usage were read."""
    assert response.text() == TEXT
    assert response.usage is not None
    assert (response.usage.input_tokens, response.usage.output_tokens) == USAGE


def _said(response: ChatResponse) -> list[tuple[WarningKind, bool, str]]:
    return [(w.kind, w.is_about(RequestField.OPTIONS), w.message) for w in response.warnings]


def _message(case: str, theirs: bool) -> str:
    """The warning for the option's `stream` (`theirs`), on a call that streams if not."""
    namespace = CASES[case][2]
    read = "one whole response" if theirs else "a stream"
    if case == "gemini":
        how = (
            "Gemini's body has no `stream` (the URL says whether the answer streams), "
            f"and this call reads {read}"
        )
    elif case == "ollama" or not theirs:
        how = f"this call reads {read}, so `stream: {json.dumps(not theirs)}` was sent"
    else:
        how = f"this call reads {read}, so no `stream` was sent"
    return (
        f"`stream` of the body option `{namespace}` ({json.dumps(theirs)}) was not sent: "
        f"{how} (`chat_stream` streams, `chat` does not)"
    )


def _sent_stream(case: str, endpoint: Endpoint, stream: bool) -> None:
    """The one request sent asked for the call's own kind of answer."""
    (body,) = endpoint.bodies
    (url,) = endpoint.urls
    if case == "gemini":
        assert "stream" not in body
        assert (":streamGenerateContent" in url) is stream
    elif case == "ollama":
        assert body["stream"] is stream
    elif stream:
        assert body["stream"] is True
    else:
        assert "stream" not in body
    assert {key: body[key] for key in CASES[case][4]} == CASES[case][4]


@pytest.mark.parametrize("case", sorted(CASES))
def test_chat_sends_no_stream_of_the_option(case: str) -> None:
    """`stream: true` in the option would make `chat` read a stream as one JSON body (and
    lose the usage of a paid answer); on Gemini it is no field at all (a 400)."""
    response, endpoint = _call(case, _request(case, {"stream": True}), "chat")
    _read(response)
    assert _said(response) == [(WarningKind.UNSUPPORTED, True, _message(case, True))]
    _sent_stream(case, endpoint, stream=False)
    # The call's own value changes nothing: nothing to say (and Gemini is sent none).
    response, endpoint = _call(case, _request(case, {"stream": False}), "chat")
    _read(response)
    assert _said(response) == []
    _sent_stream(case, endpoint, stream=False)


@pytest.mark.parametrize("case", sorted(CASES))
def test_chat_stream_sends_no_stream_of_the_option(case: str) -> None:
    """`stream: false` in the option would make `chat_stream` get a whole body."""
    response, endpoint = _call(case, _request(case, {"stream": False}), "chat_stream")
    _read(response)
    assert _said(response) == [(WarningKind.UNSUPPORTED, True, _message(case, False))]
    _sent_stream(case, endpoint, stream=True)
    response, endpoint = _call(case, _request(case, {"stream": True}), "chat_stream")
    _read(response)
    assert _said(response) == []
    _sent_stream(case, endpoint, stream=True)


@pytest.mark.parametrize("how", ["chat", "chat_stream"])
@pytest.mark.parametrize("case", sorted(CASES))
def test_under_error_the_options_stream_is_refused_before_sending(case: str, how: str) -> None:
    theirs = how == "chat"
    request = _request(case, {"stream": theirs}).with_unsupported_policy(UnsupportedPolicy.ERROR)
    endpoint = Endpoint(case)
    with pytest.raises(UnsupportedError) as caught:
        _call(case, request, how, endpoint)
    assert caught.value.field is RequestField.OPTIONS
    assert caught.value.stage is UnsupportedStage.BEFORE_SENDING
    assert str(caught.value).endswith(_message(case, theirs))
    assert endpoint.bodies == []


# OpenAI's `stream_options`: refused without `stream`, and where its usage is asked for.


def test_chat_sends_no_stream_options_of_the_option() -> None:
    """OpenAI answers 400 to `stream_options` without `stream`."""
    option = {"stream_options": {"include_obfuscation": False}}
    response, endpoint = _call("openai_compat", _request("openai_compat", option), "chat")
    _read(response)
    assert _said(response) == [
        (
            WarningKind.UNSUPPORTED,
            True,
            '`stream_options` of the body option `openai_compat` ({"include_obfuscation":false})'
            " was not sent: they are for streams, and this call reads one whole response "
            "(`chat_stream` streams, `chat` does not)",
        )
    ]
    (body,) = endpoint.bodies
    assert "stream_options" not in body and "stream" not in body and body["user"] == "u1"
    strict = _request("openai_compat", option).with_unsupported_policy(UnsupportedPolicy.ERROR)
    nothing = Endpoint("openai_compat")
    with pytest.raises(UnsupportedError) as caught:
        _call("openai_compat", strict, "chat", nothing)
    assert caught.value.field is RequestField.OPTIONS
    assert caught.value.stage is UnsupportedStage.BEFORE_SENDING
    assert nothing.bodies == []


def test_a_stream_keeps_the_options_stream_options_beside_include_usage() -> None:
    """The caller's other stream options go with allama's `include_usage`, without which
    the stream ends with no usage."""
    option = {"stream_options": {"include_obfuscation": False}}
    response, endpoint = _call("openai_compat", _request("openai_compat", option), "chat_stream")
    _read(response)
    assert _said(response) == []
    (body,) = endpoint.bodies
    assert body["stream"] is True
    assert body["stream_options"] == {"include_obfuscation": False, "include_usage": True}


def test_a_stream_keeps_include_usage_over_the_options() -> None:
    option = {"stream_options": {"include_usage": False, "include_obfuscation": False}}
    request = _request("openai_compat", option)
    response, endpoint = _call("openai_compat", request, "chat_stream")
    _read(response)
    assert _said(response) == [
        (
            WarningKind.UNSUPPORTED,
            True,
            "`include_usage` of `stream_options` of the body option `openai_compat` (false) was "
            "not sent: the stream's usage is read from its end, so `include_usage: true` was "
            "sent",
        )
    ]
    (body,) = endpoint.bodies
    assert body["stream_options"] == {"include_obfuscation": False, "include_usage": True}
    strict = request.with_unsupported_policy(UnsupportedPolicy.ERROR)
    nothing = Endpoint("openai_compat")
    with pytest.raises(UnsupportedError) as caught:
        _call("openai_compat", strict, "chat_stream", nothing)
    assert caught.value.field is RequestField.OPTIONS
    assert caught.value.stage is UnsupportedStage.BEFORE_SENDING
    assert nothing.bodies == []
