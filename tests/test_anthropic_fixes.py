"""Requests Anthropic would refuse are not sent, and conversations it would take are.

Whitespace stop sequences and a conversation of system messages alone are answered 400;
a tool call of no arguments (OpenAI's `""`) is a call with `{}`; under adaptive thinking a
turn without thinking is the model's own output, sent back with the same configuration;
a paused turn (`pause_turn`) goes back whole, its server blocks verbatim and in order.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx2
import pytest
from pydantic import BaseModel

import allama
from allama import ChatRequest, ExtractionMode, Extractor
from allama.adapters.anthropic._decode import decode_response
from allama.adapters.anthropic._sse import decode_stream
from allama.errors import InvalidRequestError, UnsupportedError
from allama.stream import StreamCollector
from allama.transport import Transport
from allama.types import (
    AssistantMessage,
    ChatResponse,
    Reasoning,
    ReasoningEffort,
    RequestField,
    StreamEvent,
    TextPart,
    ToolCall,
    ToolDefinition,
    UnsupportedPolicy,
    Warning,
    WarningKind,
)

KEY = "sk-ant-test-1234"
CORPUS = Path("/work/shared/corpus/cases/anthropic")
TOOL = ToolDefinition(name="lookup", parameters={"type": "object", "properties": {}})
SEARCH: dict[str, Any] = {
    "type": "server_tool_use",
    "id": "srvtoolu_1",
    "name": "web_search",
    "input": {"query": "x"},
}
RESULT: dict[str, Any] = {
    "type": "web_search_tool_result",
    "tool_use_id": "srvtoolu_1",
    "content": [{"type": "web_search_result", "url": "https://a.example", "title": "A"}],
}
SEARCH_2: dict[str, Any] = {**SEARCH, "id": "srvtoolu_2"}
THINKING: dict[str, Any] = {"type": "thinking", "thinking": "Search first.", "signature": "sig=="}
PAUSED: list[dict[str, Any]] = [
    THINKING,
    {"type": "text", "text": "Let me look."},
    SEARCH,
    RESULT,
    {"type": "text", "text": "Found A; one more."},
    SEARCH_2,
]


def _sent(request: ChatRequest) -> tuple[dict[str, Any], list[Warning]]:
    provider = allama.provider("anthropic", api_key=KEY)
    http, warnings = provider._prepare(request, stream=False)
    return http.body, list(warnings)


def _about(warnings: list[Warning], field: RequestField) -> list[Warning]:
    return [w for w in warnings if w.is_about(field)]


def _message(content: list[dict[str, Any]], stop: str = "end_turn") -> dict[str, Any]:
    return {
        "id": "msg_1",
        "type": "message",
        "role": "assistant",
        "model": "claude-sonnet-4-5",
        "content": content,
        "stop_reason": stop,
        "stop_sequence": None,
        "usage": {"input_tokens": 10, "output_tokens": 5},
    }


def _decode(message: dict[str, Any]) -> ChatResponse:
    return decode_response(200, {}, json.dumps(message).encode())


def _stream(message: dict[str, Any]) -> bytes:
    """The message as a stream, each block whole at its start."""
    start = {**message, "content": [], "stop_reason": None}
    events: list[dict[str, Any]] = [{"type": "message_start", "message": start}]
    for index, block in enumerate(message["content"]):
        events.append({"type": "content_block_start", "index": index, "content_block": block})
        events.append({"type": "content_block_stop", "index": index})
    delta = {"stop_reason": message["stop_reason"], "stop_sequence": None}
    events.append({"type": "message_delta", "delta": delta, "usage": {"output_tokens": 5}})
    events.append({"type": "message_stop"})
    return "".join(f"event: {e['type']}\ndata: {json.dumps(e)}\n\n" for e in events).encode()


def _collect(events: list[StreamEvent]) -> ChatResponse:
    collector = StreamCollector()
    for event in events:
        collector.push(event)
    return collector.finish()


class _Wire:
    """A provider over a mock transport: the bodies it sent, the replies it gives."""

    def __init__(self, *replies: dict[str, Any]) -> None:
        self.sent: list[dict[str, Any]] = []
        self.replies = list(replies)

        def handle(request: httpx2.Request) -> httpx2.Response:
            self.sent.append(json.loads(request.content))
            return httpx2.Response(200, content=json.dumps(self.replies.pop(0)).encode())

        client = httpx2.Client(transport=httpx2.MockTransport(handle))
        self.provider = allama.provider(
            "anthropic", api_key=KEY, transport=Transport(client=client)
        )


# Finding 3: requests Anthropic refuses are not sent.


def test_stop_sequences_of_nothing_but_whitespace_are_left_out_with_a_warning() -> None:
    # "stop_sequences: each stop sequence must contain non-whitespace" (400).
    request = ChatRequest("claude-sonnet-4-5").user("x").with_stop("END", "\n", "", " \t")
    body, warnings = _sent(request)
    assert body["stop_sequences"] == ["END"]
    [warning] = _about(warnings, RequestField.STOP)
    assert warning.kind is WarningKind.UNSUPPORTED
    assert warning.message == (
        "Anthropic takes no stop sequence of nothing but whitespace; 3 were left out"
    )
    body, warnings = _sent(ChatRequest("claude-sonnet-4-5").user("x").with_stop("\n"))
    assert "stop_sequences" not in body
    assert [w.message for w in _about(warnings, RequestField.STOP)] == [
        "Anthropic takes no stop sequence of nothing but whitespace; it was left out"
    ]


def test_a_whitespace_stop_sequence_is_refused_under_the_error_policy() -> None:
    request = (
        ChatRequest("claude-sonnet-4-5")
        .user("x")
        .with_stop("\n")
        .with_unsupported_policy(UnsupportedPolicy.ERROR)
    )
    with pytest.raises(UnsupportedError):
        _sent(request)
    body, _ = _sent(request.with_stop("END"))
    assert body["stop_sequences"] == ["END"]


def test_system_messages_alone_are_refused_before_sending() -> None:
    # "messages: at least one message is required" (400).
    wire = _Wire(_message([{"type": "text", "text": "ok"}]))
    with pytest.raises(InvalidRequestError) as caught:
        wire.provider.chat(ChatRequest("claude-sonnet-4-5").system("Rate this: 5/5"))
    assert "at least one user or assistant message" in str(caught.value)
    assert wire.sent == []
    # A lone prefill the family cannot continue is left out: nothing is left to send.
    with pytest.raises(InvalidRequestError):
        _sent(ChatRequest("claude-opus-5").system("Be brief.").assistant("Hello"))


# Finding 4: a call of no arguments.


@pytest.mark.parametrize("arguments", ["", " ", "\n"])
def test_a_tool_call_without_arguments_goes_as_an_empty_input(arguments: str) -> None:
    # OpenAI's decoder gives `""` for a call of a tool that takes no arguments.
    call = ToolCall(id="call_1", name="lookup", arguments=arguments)
    request = (
        ChatRequest("claude-sonnet-4-5")
        .with_tools([TOOL])
        .user("What time is it?")
        .assistant([call])
        .tool_result("call_1", "12:00")
    )
    body, _ = _sent(request)
    assert body["messages"][1]["content"] == [
        {"type": "tool_use", "id": "call_1", "name": "lookup", "input": {}}
    ]
    not_an_object = request.model_copy(
        update={
            "messages": (
                *request.messages[:1],
                AssistantMessage(content=(ToolCall(id="call_1", name="lookup", arguments="[1]"),)),
                *request.messages[2:],
            )
        }
    )
    with pytest.raises(InvalidRequestError):
        _sent(not_an_object)


# Finding 2: adaptive thinking may skip thinking.


@pytest.mark.parametrize(
    ("model", "effort"),
    [
        ("claude-opus-5-5", None),  # always thinks
        ("claude-opus-5", None),  # thinks unless told not to
        ("claude-sonnet-4-6", ReasoningEffort.HIGH),
        ("claude-opus-4-7", ReasoningEffort.LOW),
        ("claude-opus-5-5", ReasoningEffort.LOW),
    ],
)
def test_the_models_own_thinkless_tool_turn_goes_back_under_the_same_adaptive_thinking(
    model: str, effort: ReasoningEffort | None
) -> None:
    # "In adaptive mode, thinking is optional for the model"; "keep one thinking
    # configuration per assistant turn". The model called a tool without thinking.
    first = ChatRequest(model).with_tools([TOOL]).user("Find x.").with_reasoning_effort(effort)
    opening, _ = _sent(first)
    reply = _decode(
        _message([{"type": "tool_use", "id": "toolu_1", "name": "lookup", "input": {}}], "tool_use")
    )
    loop = first.push(reply.to_assistant_message()).tool_result("toolu_1", "found")
    body, warnings = _sent(loop)
    assert body.get("thinking") == opening.get("thinking")
    assert body.get("output_config") == opening.get("output_config")
    assert _about(warnings, RequestField.REASONING_EFFORT) == []


def test_budget_thinking_still_stays_off_in_a_loop_that_opened_without_it() -> None:
    # `enabled` thinking: "a final assistant message must start with a thinking block".
    call = ToolCall(id="toolu_1", name="lookup", arguments="{}")
    loop = (
        ChatRequest("claude-sonnet-4-5")
        .with_tools([TOOL])
        .user("Find x.")
        .assistant([call])
        .tool_result("toolu_1", "found")
        .with_reasoning_effort(ReasoningEffort.LOW)
    )
    body, warnings = _sent(loop)
    assert "thinking" not in body
    assert len(_about(warnings, RequestField.REASONING_EFFORT)) == 1


# Finding 1: a paused turn goes back whole.


def test_a_paused_turn_keeps_the_order_of_its_blocks_streamed_or_not() -> None:
    message = _message(PAUSED, "pause_turn")
    response = _decode(message)
    # Marked paused: sent back last, it is continued rather than taken as a prefill.
    assert response.provider_value("anthropic", "resume") == {
        "paused": True,
        "blocks": [0, 1, SEARCH, RESULT, 2, SEARCH_2],
    }
    assert response.provider_value("anthropic", "server_blocks") == [SEARCH, RESULT, SEARCH_2]
    assert _collect(decode_stream(_stream(message))) == response
    # A turn that was not paused, and holds no server blocks, keeps no order to send back.
    done = _decode(_message([THINKING, {"type": "text", "text": "Done."}]))
    assert done.provider_value("anthropic", "resume") is None
    assert done.to_assistant_message() == AssistantMessage(content=done.content)
    assert "provider_data" not in done.to_assistant_message().to_json()


def test_to_assistant_message_carries_only_what_continues_the_turn() -> None:
    message = _decode(_message(PAUSED, "pause_turn")).to_assistant_message()
    assert message.provider_data == {
        "anthropic": {"resume": {"paused": True, "blocks": [0, 1, SEARCH, RESULT, 2, SEARCH_2]}}
    }
    assert AssistantMessage.from_json(message.to_json()) == message
    assert "Search first" not in repr(message)


@pytest.mark.parametrize(
    ("model", "effort"),
    [
        ("claude-sonnet-4-5", None),
        ("claude-sonnet-4-5", ReasoningEffort.LOW),  # budget thinking: a prefill would be left out
        ("claude-opus-5", None),  # no prefill at all
        ("claude-sonnet-4-6", ReasoningEffort.MEDIUM),
    ],
)
def test_a_paused_turn_goes_back_whole_in_order_to_be_continued(
    model: str, effort: ReasoningEffort | None
) -> None:
    request = ChatRequest(model).user("Search for x.").with_reasoning_effort(effort)
    wire = _Wire(_message(PAUSED, "pause_turn"), _message([{"type": "text", "text": "done"}]))
    paused = wire.provider.chat(request)
    again = wire.provider.chat(request.push(paused.to_assistant_message()))
    last = wire.sent[-1]["messages"][-1]
    assert last == {"role": "assistant", "content": PAUSED}
    assert wire.sent[-1].get("thinking") == wire.sent[0].get("thinking")
    assert _about(list(again.warnings), RequestField.MESSAGES) == []


OLDER_RESUMES: dict[str, Any] = {
    # As versions before the paused marker kept a paused turn: its blocks, or with the
    # container it ran in; no issuer, no `"paused": true`.
    "blocks": [0, 1, SEARCH, RESULT, 2, SEARCH_2],
    "in a container": {
        "container": {"id": "container_1", "expires_at": "2026-12-07T16:00:00Z"},
        "blocks": [0, 1, SEARCH, RESULT, 2, SEARCH_2],
    },
}


@pytest.mark.parametrize("kept", sorted(OLDER_RESUMES))
@pytest.mark.parametrize(
    ("model", "effort"),
    [
        ("claude-sonnet-4-5", ReasoningEffort.LOW),  # budget thinking: a prefill is left out
        ("claude-opus-5", None),  # no prefill at all
    ],
)
def test_a_paused_turn_kept_by_an_older_version_is_still_continued(
    kept: str, model: str, effort: ReasoningEffort | None
) -> None:
    """Such a resume was written only for a paused turn (or code waiting on tool calls):
    a saved conversation ending in one is continued, not left out as a prefill."""
    content = _decode(_message(PAUSED, "pause_turn")).content
    older = AssistantMessage(
        content=content, provider_data={"anthropic": {"resume": OLDER_RESUMES[kept]}}
    )
    request = ChatRequest(model).user("Search for x.").with_reasoning_effort(effort).push(older)
    body, warnings = _sent(request)
    assert body["messages"][-1] == {"role": "assistant", "content": PAUSED}
    assert _about(warnings, RequestField.MESSAGES) == []


def test_a_paused_turn_whose_content_changed_goes_without_its_server_blocks() -> None:
    message = _decode(_message(PAUSED, "pause_turn")).to_assistant_message()
    changed = message.model_copy(update={"content": message.content[:2]})
    body, warnings = _sent(ChatRequest("claude-sonnet-4-5").user("Search.").push(changed))
    assert [block["type"] for block in body["messages"][-1]["content"]] == ["thinking", "text"]
    assert len(_about(warnings, RequestField.MESSAGES)) == 1


def test_the_recorded_paused_web_search_goes_back_as_it_came() -> None:
    path = CORPUS / "pause_turn_server_tool.json"
    if not path.exists():
        pytest.skip(f"the web search recording is not in {CORPUS}")
    body = json.loads(path.read_text())["response_body"]
    wire = _Wire(body, _message([{"type": "text", "text": "done"}]))
    request = (
        ChatRequest("claude-sonnet-4-5").user("search").with_reasoning_effort(ReasoningEffort.LOW)
    )
    paused = wire.provider.chat(request)
    wire.provider.chat(request.push(paused.to_assistant_message()))
    sent = wire.sent[-1]["messages"][-1]["content"]
    assert [block["type"] for block in sent] == [block["type"] for block in body["content"]]
    server = [b for b in body["content"] if b["type"] not in ("text", "thinking")]
    assert [b for b in sent if b["type"] not in ("text", "thinking")] == server
    assert isinstance(paused.content[0], Reasoning) and isinstance(paused.content[1], TextPart)
    # Byte for byte as it came, its signed thinking included.
    assert json.dumps(sent, sort_keys=True) == json.dumps(body["content"], sort_keys=True)


# A turn that searched, then called a tool of the caller's, goes back with its searches.

CITED_TEXT: dict[str, Any] = {
    "type": "text",
    "text": "Found A; now saving.",
    "citations": [
        {
            "type": "web_search_result_location",
            "url": "https://a.example",
            "title": "A",
            "encrypted_index": "EI1",
            "cited_text": "x",
        }
    ],
}
SAVE: dict[str, Any] = {"type": "tool_use", "id": "toolu_1", "name": "lookup", "input": {"v": 1}}
SEARCHED: list[dict[str, Any]] = [THINKING, SEARCH, RESULT, CITED_TEXT, SAVE]


def test_a_turn_that_searched_before_its_tool_call_keeps_its_order_streamed_or_not() -> None:
    message = _message(SEARCHED, "tool_use")
    response = _decode(message)
    # Not paused, and says so (`test_a_finished_turn_that_searched_is_marked_not_paused_...`).
    assert response.provider_value("anthropic", "resume") == {
        "paused": False,
        "blocks": [0, SEARCH, RESULT, 1, 2],
    }
    assert _collect(decode_stream(_stream(message))) == response


def test_a_turn_that_searched_before_its_tool_call_goes_back_with_its_results() -> None:
    request = ChatRequest("claude-sonnet-4-5").user("Find and save.").with_tools([TOOL])
    wire = _Wire(_message(SEARCHED, "tool_use"), _message([{"type": "text", "text": "Saved."}]))
    searched = wire.provider.chat(request)
    call = searched.tool_calls()[0]
    done = wire.provider.chat(request.push(searched.to_assistant_message()).tool_result(call, "ok"))
    assert wire.sent[-1]["messages"][1:] == [
        {
            "role": "assistant",
            "content": [
                THINKING,
                SEARCH,
                RESULT,
                {"type": "text", "text": CITED_TEXT["text"]},
                SAVE,
            ],
        },
        {
            "role": "user",
            "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": "ok"}],
        },
    ]
    assert _about(list(done.warnings), RequestField.MESSAGES) == []


def test_a_finished_turn_that_searched_goes_back_with_its_results() -> None:
    answered = [SEARCH, RESULT, CITED_TEXT]
    request = ChatRequest("claude-sonnet-4-5").user("Find A.")
    wire = _Wire(_message(answered), _message([{"type": "text", "text": "More."}]))
    found = wire.provider.chat(request)
    wire.provider.chat(request.push(found.to_assistant_message()).user("And more?"))
    assert wire.sent[-1]["messages"][1] == {
        "role": "assistant",
        "content": [SEARCH, RESULT, {"type": "text", "text": CITED_TEXT["text"]}],
    }


# A finished turn with server blocks goes back whole, yet sent last it is a prefill like any
# other assistant turn: only a paused turn (or code waiting on tool calls) is continued.


def test_a_finished_turn_that_searched_is_marked_not_paused_streamed_or_not() -> None:
    """`"paused": false`, said: a resume that says neither that nor its issuer (a bare list
    of blocks) is an older version's, written only for a paused turn, and continued."""
    message = _message([SEARCH, RESULT, CITED_TEXT])
    response = _decode(message)
    assert response.provider_value("anthropic", "resume") == {
        "paused": False,
        "blocks": [SEARCH, RESULT, 0],
    }
    assert _collect(decode_stream(_stream(message))) == response
    issued = decode_response(
        200, {}, json.dumps(message).encode(), provider="anthropic"
    ).provider_value("anthropic", "resume")
    assert issued == {"issuer": "anthropic", "paused": False, "blocks": [SEARCH, RESULT, 0]}


PREFILL_LEFT_OUT = (
    "`claude-opus-5` on Anthropic does not continue a last assistant message (prefill); it "
    "was left out"
)


@pytest.mark.parametrize("streamed", [False, True], ids=["body", "stream"])
def test_a_finished_turn_decoded_without_an_issuer_sent_last_is_not_continued(
    streamed: bool,
) -> None:
    """Decoded with no provider named (no issuer in its resume), a finished turn is still
    not taken for an older version's paused one: a prefill, left out where there is none."""
    message = _message([SEARCH, RESULT, CITED_TEXT])
    found = _collect(decode_stream(_stream(message))) if streamed else _decode(message)
    request = ChatRequest("claude-opus-5").user("Find A.").push(found.to_assistant_message())
    body, warnings = _sent(request)
    assert body["messages"] == [{"role": "user", "content": "Find A."}]
    assert [(w.kind, w.message) for w in _about(warnings, RequestField.MESSAGES)] == [
        (WarningKind.UNSUPPORTED, PREFILL_LEFT_OUT)
    ]


@pytest.mark.parametrize(
    ("resume", "continued"),
    [
        ({"paused": False, "blocks": [SEARCH, RESULT, 0]}, False),
        ({"paused": True, "blocks": [SEARCH, RESULT, 0]}, True),
        ([SEARCH, RESULT, 0], True),  # an older version's: written only for a paused turn
    ],
    ids=["finished", "paused", "older"],
)
def test_the_encoder_continues_a_turn_only_where_its_resume_says_it_paused(
    resume: Any, continued: bool
) -> None:
    content = (TextPart(text=CITED_TEXT["text"]),)
    turn = AssistantMessage(content=content, provider_data={"anthropic": {"resume": resume}})
    body, warnings = _sent(ChatRequest("claude-opus-5").user("Find A.").push(turn))
    text = {"type": "text", "text": CITED_TEXT["text"]}
    whole = {"role": "assistant", "content": [SEARCH, RESULT, text]}
    assert body["messages"][1:] == ([whole] if continued else [])
    assert [w.message for w in _about(warnings, RequestField.MESSAGES)] == (
        [] if continued else [PREFILL_LEFT_OUT]
    )


@pytest.mark.parametrize(
    ("model", "effort", "why"),
    [
        (
            "claude-sonnet-4-5",
            ReasoningEffort.LOW,
            "Anthropic does not continue a last assistant message with thinking on",
        ),
        (
            "claude-opus-5",
            None,
            "`claude-opus-5` on Anthropic does not continue a last assistant message (prefill)",
        ),
    ],
)
def test_a_finished_turn_that_searched_sent_last_is_left_out_as_a_prefill_is(
    model: str, effort: ReasoningEffort | None, why: str
) -> None:
    request = ChatRequest(model).user("Find A.").with_reasoning_effort(effort)
    wire = _Wire(_message([SEARCH, RESULT, CITED_TEXT]), _message([{"type": "text", "text": "B."}]))
    found = wire.provider.chat(request)
    again = wire.provider.chat(request.push(found.to_assistant_message()))
    # Anthropic would refuse it (400): left out with a warning, as any last assistant turn.
    assert wire.sent[-1]["messages"] == [{"role": "user", "content": "Find A."}]
    assert [(w.kind, w.message) for w in _about(list(again.warnings), RequestField.MESSAGES)] == [
        (WarningKind.UNSUPPORTED, f"{why}; it was left out")
    ]


def test_a_finished_turn_that_searched_sent_last_goes_whole_where_a_prefill_may() -> None:
    request = ChatRequest("claude-sonnet-4-5").user("Find A.")
    wire = _Wire(_message([SEARCH, RESULT, CITED_TEXT]), _message([{"type": "text", "text": "B."}]))
    found = wire.provider.chat(request)
    again = wire.provider.chat(request.push(found.to_assistant_message()))
    assert wire.sent[-1]["messages"][-1] == {
        "role": "assistant",
        "content": [SEARCH, RESULT, {"type": "text", "text": CITED_TEXT["text"]}],
    }
    assert _about(list(again.warnings), RequestField.MESSAGES) == []


def test_a_finished_turn_whose_content_changed_says_what_going_without_its_blocks_costs() -> None:
    found = _decode(_message([SEARCH, RESULT, CITED_TEXT])).to_assistant_message()
    changed = found.model_copy(update={"content": (TextPart(text="A."), TextPart(text="B."))})
    body, warnings = _sent(ChatRequest("claude-sonnet-4-5").user("Find A.").push(changed).user("?"))
    assert body["messages"][1] == {
        "role": "assistant",
        "content": [{"type": "text", "text": "A."}, {"type": "text", "text": "B."}],
    }
    assert [(w.kind, w.message) for w in _about(warnings, RequestField.MESSAGES)] == [
        (
            WarningKind.APPROXIMATED,
            "a turn with server tool blocks (a server tool's calls and results, in a finished "
            "turn, a paused one, or one whose code execution waits on tool calls) no longer "
            "holds the content it came with; it was sent without its server tool blocks, so "
            "the model neither goes on from their results nor continues the turn",
        )
    ]


# A native retry on a Claude that was sent no format: the retry turn shows the schema.


class _Person(BaseModel):
    name: str
    age: int


_PERSON_SCHEMA = (
    '{"properties":{"name":{"title":"Name","type":"string"},"age":{"title":"Age",'
    '"type":"integer"}},"required":["name","age"],"title":"_Person","type":"object"}'
)
_NOT_JSON = "it was not valid JSON: Expecting value: line 1 column 1 (char 0)"


@pytest.mark.parametrize(
    ("model", "closing"),
    [
        # Before 4.5: no `output_config.format`, nor the schema in words, went out, so the
        # retry turn is the first the model sees of it.
        (
            "claude-opus-4-1",
            f"Reply again with only the JSON value, matching this JSON Schema exactly:\n"
            f"{_PERSON_SCHEMA}",
        ),
        # The format went out: the retry points to it, as before.
        ("claude-sonnet-4-5", "Reply again with only the JSON value, matching the schema exactly."),
    ],
)
def test_a_native_retry_writes_out_a_schema_the_request_could_not_carry(
    model: str, closing: str
) -> None:
    wire = _Wire(
        _message([{"type": "text", "text": "Ada is 36."}]),
        _message([{"type": "text", "text": '{"name": "Ada", "age": 36}'}]),
    )
    request = ChatRequest(model).user("Ada, 36.").with_option(ExtractionMode.NATIVE)
    got = Extractor(retries=1).extract(wire.provider, _Person, request)
    assert got.value == _Person(name="Ada", age=36)
    assert got.metadata.passes == 2
    assert ("output_config" in wire.sent[0]) is (model == "claude-sonnet-4-5")
    assert wire.sent[1]["messages"][1:] == [
        {"role": "assistant", "content": "Ada is 36."},
        {
            "role": "user",
            "content": f"The previous reply could not be used: {_NOT_JSON}. {closing}",
        },
    ]
