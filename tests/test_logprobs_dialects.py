"""Token log-probabilities and plain-text choices in three dialects: the Responses API,
Ollama's native `/api/chat` and Anthropic's Messages.

For each: what the body asks for (`include` and `top_logprobs`; `logprobs` and
`top_logprobs`), what is refused under `WARN` and `ERROR` (a family that reports none, a
streamed call, Anthropic always, a `choice` response format everywhere), the capability
answers, how a body's log-probabilities are read, and one call end to end over a socket.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterator
from typing import Any

import pytest

import allama
from _replay_server import ReplayServer, ReplyHandler
from allama import ChatRequest
from allama.adapters.ollama._decode import decode_body as ollama_body
from allama.adapters.ollama._decode import text_logprobs
from allama.adapters.openai_responses._decode import decode_body as responses_body
from allama.errors import UnsupportedError
from allama.providers import HttpProvider
from allama.types import (
    CapabilitySupport,
    ChatCapability,
    Reasoning,
    RequestField,
    ResponseFormat,
    TextPart,
    TokenAlternative,
    TokenLogprob,
    ToolCall,
    UnsupportedPolicy,
    UnsupportedStage,
    Warning,
)

KEY = "sk-test-logprobs-5678"
S = CapabilitySupport.SUPPORTED
N = CapabilitySupport.UNSUPPORTED
U = CapabilitySupport.UNKNOWN

STREAMED = (
    "log-probabilities are read from whole responses, not streams; "
    "the stream was sent without asking for them"
)
NO_CHOICE = "{} has no plain-text choice output; the answer was not constrained to the options"
YES_NO = ResponseFormat.choice(["yes", "no"])


@pytest.fixture(autouse=True)
def _no_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("OPENAI_BASE_URL", "OLLAMA_HOST", "OLLAMA_API_KEY", "ANTHROPIC_BASE_URL"):
        monkeypatch.delenv(name, raising=False)


def unsupported(
    field: RequestField, message: str, provider: str, code: str | None = None
) -> Warning:
    return Warning.unsupported(field, message, code=code).with_provider(provider)


def alt(token: str, logprob: float, data: list[int] | None = None) -> TokenAlternative:
    return TokenAlternative(
        token=token, logprob=logprob, token_bytes=None if data is None else tuple(data)
    )


def tok(
    token: str, logprob: float, data: list[int] | None = None, *top: TokenAlternative
) -> TokenLogprob:
    return TokenLogprob(
        token=token,
        logprob=logprob,
        token_bytes=None if data is None else tuple(data),
        top=top,
    )


def wire(token: str, logprob: float, *top: tuple[str, float]) -> dict[str, Any]:
    """A token as OpenAI and Ollama send it, its bytes those of its text."""
    return {
        "token": token,
        "logprob": logprob,
        "bytes": list(token.encode()),
        "top_logprobs": [
            {"token": text, "logprob": value, "bytes": list(text.encode())} for text, value in top
        ],
    }


def b(text: str) -> list[int]:
    return list(text.encode())


def refused(call: Callable[[], object]) -> UnsupportedError:
    with pytest.raises(UnsupportedError) as caught:
        call()
    assert caught.value.stage is UnsupportedStage.BEFORE_SENDING
    return caught.value


# The Responses API


_WHERE = {
    "openai-compatible": {"base_url": "https://llm.example.com/v1"},
    "azure-openai": {"endpoint": "https://res.openai.azure.com"},
}
"""What a preset needs to be built, beyond its key."""


def responses(name: str = "openai") -> HttpProvider:
    return allama.provider(name, api="responses", api_key=KEY, **_WHERE.get(name, {}))


def chat_completions(name: str) -> HttpProvider:
    return allama.provider(name, api_key=KEY, **_WHERE.get(name, {}))


def responses_encode(
    request: ChatRequest, *, stream: bool = False, name: str = "openai"
) -> tuple[dict[str, Any], list[Warning]]:
    http, warnings = responses(name)._prepare(request, stream=stream)
    return http.body, warnings


def test_responses_asks_for_the_output_texts_logprobs_and_the_alternatives() -> None:
    body, warnings = responses_encode(ChatRequest("gpt-4o").user("Hi").with_logprobs(5))
    assert warnings == []
    assert body == {
        "model": "gpt-4o",
        "input": [{"role": "user", "content": "Hi"}],
        "top_logprobs": 5,
        "store": False,
        "include": ["message.output_text.logprobs"],
    }
    # Zero alternatives: the chosen tokens alone, and no `top_logprobs` at all.
    body, warnings = responses_encode(ChatRequest("gpt-4.1-mini").user("Hi").with_logprobs(0))
    assert warnings == []
    assert "top_logprobs" not in body
    assert body["include"] == ["message.output_text.logprobs"]
    # Not asked: nothing sent.
    body, _ = responses_encode(ChatRequest("gpt-4o").user("Hi"))
    assert "include" not in body and "top_logprobs" not in body


def test_responses_include_is_merged_with_reasoning_and_the_callers() -> None:
    request = ChatRequest("my-model", reasoning_effort="low").user("Hi").with_logprobs(2)
    body, warnings = responses_encode(request, name="openai-compatible")
    assert warnings == []
    assert body["include"] == ["reasoning.encrypted_content", "message.output_text.logprobs"]
    assert body["top_logprobs"] == 2
    request = (
        ChatRequest("gpt-4o")
        .user("Hi")
        .with_logprobs(1)
        .with_option_json(
            "openai_responses",
            {"include": ["message.output_text.logprobs", "file_search_call.results"]},
        )
    )
    body, _ = responses_encode(request)
    assert body["include"] == ["message.output_text.logprobs", "file_search_call.results"]
    assert body["top_logprobs"] == 1


REASONING = " (logprobs are not supported for reasoning models)"


@pytest.mark.parametrize(
    ("model", "why"),
    [
        ("o3", "`o3` on OpenAI reports no log-probabilities" + REASONING),
        ("gpt-5-mini", "`gpt-5-mini` on OpenAI reports no log-probabilities" + REASONING),
        ("gpt-5-chat-latest", "`gpt-5-chat-latest` on OpenAI reports no log-probabilities"),
    ],
)
def test_responses_refuses_logprobs_of_a_family_that_reports_none(model: str, why: str) -> None:
    request = ChatRequest(model).user("Hi").with_logprobs(3)
    body, warnings = responses_encode(request)
    assert warnings == [unsupported(RequestField.LOGPROBS, why, "openai")]
    assert "top_logprobs" not in body
    assert "message.output_text.logprobs" not in body.get("include", [])
    error = refused(
        lambda: responses()._prepare(
            request.with_unsupported_policy(UnsupportedPolicy.ERROR), stream=False
        )
    )
    assert error.field is RequestField.LOGPROBS
    assert str(error).startswith(f"cannot send `logprobs`: {why}")


def test_responses_refuses_logprobs_on_a_stream() -> None:
    request = ChatRequest("gpt-4o").user("Hi").with_logprobs(3)
    body, warnings = responses_encode(request, stream=True)
    assert warnings == [unsupported(RequestField.LOGPROBS, STREAMED, "openai")]
    assert "include" not in body and "top_logprobs" not in body
    assert body["stream"] is True
    error = refused(
        lambda: responses()._prepare(
            request.with_unsupported_policy(UnsupportedPolicy.ERROR), stream=True
        )
    )
    assert error.field is RequestField.LOGPROBS


def test_responses_refuses_a_choice_and_never_sends_it_as_a_schema() -> None:
    request = ChatRequest("gpt-4o").user("Spam?").with_response_format(YES_NO)
    for stream in (False, True):
        body, warnings = responses_encode(request, stream=stream)
        why = NO_CHOICE.format("OpenAI")
        assert warnings == [unsupported(RequestField.RESPONSE_FORMAT, why, "openai")]
        assert "text" not in body
    error = refused(
        lambda: responses()._prepare(
            request.with_unsupported_policy(UnsupportedPolicy.ERROR), stream=False
        )
    )
    assert error.field is RequestField.RESPONSE_FORMAT


def test_responses_capabilities() -> None:
    openai = responses()
    for model in (
        "o1",
        "o3",
        "o3-mini",
        "o4-mini",
        "gpt-5",
        "gpt-5-mini",
        "gpt-5-nano",
        "gpt-5-chat-latest",
    ):
        assert openai.chat_capability(model, ChatCapability.LOGPROBS) is N, model
    # Taken at reasoning effort `none` (the default), refused at any other: unknown.
    for model in ("gpt-5.1", "gpt-5.2", "gpt-5.4-mini"):
        assert openai.chat_capability(model, ChatCapability.LOGPROBS) is U, model
    for model in ("gpt-4o", "gpt-4o-mini", "gpt-4.1", "gpt-4.1-nano", "gpt-4", "gpt-4-turbo"):
        assert openai.chat_capability(model, ChatCapability.LOGPROBS) is S, model
    assert openai.chat_capability("my-fine-model", ChatCapability.LOGPROBS) is U
    for name in ("openai", "azure-openai", "xai", "openrouter", "openai-compatible"):
        target, chat = responses(name), chat_completions(name)
        for model in ("gpt-4o", "o3", "grok-4", "something-else"):
            assert target.chat_capability(model, ChatCapability.CHOICE_OUTPUT) is N
            # The same models, the same answer as under Chat Completions.
            assert target.chat_capability(model, ChatCapability.LOGPROBS) is (
                chat.chat_capability(model, ChatCapability.LOGPROBS)
            )


def _response(*output: dict[str, Any]) -> dict[str, Any]:
    return {
        "id": "resp_0123",
        "object": "response",
        "created_at": 1758312659,
        "status": "completed",
        "model": "gpt-4o-mini-2024-07-18",
        "output": list(output),
        "usage": {"input_tokens": 14, "output_tokens": 3, "total_tokens": 17},
    }


def _message(*content: dict[str, Any]) -> dict[str, Any]:
    return {
        "id": "msg_0123",
        "type": "message",
        "status": "completed",
        "role": "assistant",
        "content": list(content),
    }


def _text(text: str, logprobs: Any) -> dict[str, Any]:
    return {"type": "output_text", "annotations": [], "text": text, "logprobs": logprobs}


# "Yes" is the likeliest; " sir" was chosen though it is not among the top two.
YES_SIR = [
    wire("Yes", -0.0123, ("Yes", -0.0123), ("No", -4.5)),
    wire(" sir", -6.25, (".", -0.01), ("!", -4.75)),
]
YES_SIR_TOKENS = (
    tok("Yes", -0.0123, b("Yes"), alt("Yes", -0.0123, b("Yes")), alt("No", -4.5, b("No"))),
    tok(" sir", -6.25, b(" sir"), alt(".", -0.01, b(".")), alt("!", -4.75, b("!"))),
)


def test_responses_reads_the_output_texts_logprobs() -> None:
    body = _response(_message(_text("Yes sir", YES_SIR)))
    response = responses_body(json.dumps(body), provider="openai", model="gpt-4o-mini")
    assert response.text() == "Yes sir"
    assert response.logprobs == YES_SIR_TOKENS
    assert response.logprobs is not None
    assert b"".join(token.utf8() for token in response.logprobs) == b"Yes sir"


def test_responses_joins_the_text_parts_in_order() -> None:
    reasoning = {"id": "rs_1", "type": "reasoning", "summary": []}
    body = _response(
        reasoning,
        _message(
            _text("Yes", [wire("Yes", -0.5)]),
            _text("", []),
            _text(" sir", [{"token": " sir", "logprob": -1.0, "bytes": None}]),
        ),
    )
    response = responses_body(json.dumps(body))
    assert response.content == (
        Reasoning(text="", signature="rs_1"),
        TextPart(text="Yes"),
        TextPart(text=""),
        TextPart(text=" sir"),
    )
    assert response.logprobs == (tok("Yes", -0.5, b("Yes")), tok(" sir", -1.0))


@pytest.mark.parametrize(
    "parts",
    [
        # Not asked for: OpenAI sends an empty list.
        [_text("Yes sir", [])],
        [_text("Yes sir", None)],
        # A log-probability that is not one.
        [_text("Yes sir", [wire("Yes", -0.1), {**wire(" sir", -0.1), "logprob": "-0.1"}])],
        [_text("Yes sir", [wire("Yes", 0.5), wire(" sir", -0.1)])],
        # An alternative without its token.
        [_text("Yes sir", [{**wire("Yes", -0.1), "top_logprobs": [{"logprob": -1.0}]}])],
        [_text("Yes sir", {"content": YES_SIR})],
        # One part of the text without them: the tokens would not spell the text.
        [_text("Yes", [wire("Yes", -0.1)]), _text(" sir", [])],
    ],
)
def test_responses_gives_no_logprobs_for_a_list_it_cannot_read_whole(
    parts: list[dict[str, Any]],
) -> None:
    response = responses_body(json.dumps(_response(_message(*parts))))
    assert response.logprobs is None
    assert response.text() == "Yes sir"


# Ollama


def ollama_encode(
    request: ChatRequest, *, stream: bool = False
) -> tuple[dict[str, Any], list[Warning]]:
    http, warnings = allama.provider("ollama")._prepare(request, stream=stream)
    return http.body, warnings


def test_ollama_asks_for_logprobs_and_the_alternatives() -> None:
    body, warnings = ollama_encode(ChatRequest("llama3.1").user("Hi").with_logprobs(20))
    assert warnings == []
    assert body == {
        "model": "llama3.1",
        "messages": [{"role": "user", "content": "Hi"}],
        "logprobs": True,
        "top_logprobs": 20,
        "stream": False,
        "truncate": False,
    }
    body, warnings = ollama_encode(ChatRequest("llama3.1").user("Hi").with_logprobs(0))
    assert warnings == []
    assert body["logprobs"] is True
    assert "top_logprobs" not in body
    body, _ = ollama_encode(ChatRequest("llama3.1").user("Hi"))
    assert "logprobs" not in body and "top_logprobs" not in body


def test_ollama_refuses_logprobs_on_a_stream() -> None:
    request = ChatRequest("llama3.1").user("Hi").with_logprobs(2)
    body, warnings = ollama_encode(request, stream=True)
    assert warnings == [unsupported(RequestField.LOGPROBS, STREAMED, "ollama")]
    assert "logprobs" not in body and "top_logprobs" not in body
    assert body["stream"] is True
    error = refused(
        lambda: allama.provider("ollama")._prepare(
            request.with_unsupported_policy(UnsupportedPolicy.ERROR), stream=True
        )
    )
    assert error.field is RequestField.LOGPROBS
    # Nothing was sent: the refusal says why, not what a warning would say went instead.
    assert str(error).startswith(
        "cannot send `logprobs`: log-probabilities are read from whole responses, not streams"
    )
    assert "was sent" not in str(error)


def test_ollama_refuses_a_choice() -> None:
    request = ChatRequest("llama3.1").user("Spam?").with_response_format(YES_NO)
    body, warnings = ollama_encode(request)
    why = NO_CHOICE.format("Ollama")
    # Nothing of the format was sent, which an extraction reads its answer by.
    assert warnings == [
        unsupported(RequestField.RESPONSE_FORMAT, why, "ollama", code="format_not_sent")
    ]
    assert "format" not in body
    error = refused(
        lambda: allama.provider("ollama")._prepare(
            request.with_unsupported_policy(UnsupportedPolicy.ERROR), stream=False
        )
    )
    assert error.field is RequestField.RESPONSE_FORMAT


def test_ollama_capabilities() -> None:
    target = allama.provider("ollama")
    for model in ("llama3.1", "qwen3:8b", "gpt-oss:20b", "gpt-oss:120b-cloud", "kimi-k2:1t-cloud"):
        assert target.chat_capability(model, ChatCapability.LOGPROBS) is U, model
        assert target.chat_capability(model, ChatCapability.CHOICE_OUTPUT) is N, model


def _ollama(content: str, logprobs: Any = None, **message: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "model": "llama3.1",
        "created_at": "2026-08-01T10:00:00Z",
        "message": {"role": "assistant", "content": content, **message},
        "done": True,
        "done_reason": "stop",
        "prompt_eval_count": 11,
        "eval_count": 2,
    }
    if logprobs is not None:
        body["logprobs"] = logprobs
    return body


def test_ollama_reads_the_logprobs() -> None:
    response = ollama_body(json.dumps(_ollama("Yes sir", YES_SIR)), provider="ollama")
    assert response.text() == "Yes sir"
    assert response.logprobs == YES_SIR_TOKENS
    # Ollama leaves out empty fields: no bytes, no alternatives.
    bare = [{"token": "Yes", "logprob": -0.25}, {"token": " sir", "logprob": -1.5}]
    response = ollama_body(json.dumps(_ollama("Yes sir", bare)))
    assert response.logprobs == (tok("Yes", -0.25), tok(" sir", -1.5))
    assert ollama_body(json.dumps(_ollama("Yes sir"))).logprobs is None


def test_ollama_keeps_the_tokens_of_the_text_alone() -> None:
    # A thinking model: every generated token is reported, the thinking's too.
    tokens = [
        wire("<think>", -0.01),
        wire("Hmm", -0.8),
        wire("</think>", -0.02),
        wire("\n\n", -0.03),
        wire("Paris", -0.05, ("Paris", -0.05), ("Lyon", -3.5)),
    ]
    body = _ollama("Paris", tokens, thinking="Hmm")
    response = ollama_body(json.dumps(body))
    assert response.content == (Reasoning(text="Hmm"), TextPart(text="Paris"))
    assert response.logprobs == (
        tok(
            "Paris",
            -0.05,
            b("Paris"),
            alt("Paris", -0.05, b("Paris")),
            alt("Lyon", -3.5, b("Lyon")),
        ),
    )


@pytest.mark.parametrize(
    ("content", "tokens"),
    [
        # The text begins inside a token.
        ("aris", [wire("<think>", -0.1), wire("</think>", -0.1), wire("Paris", -0.1)]),
        # The tokens do not end with the text.
        ("Paris", [wire("Paris", -0.1), wire("<|end|>", -0.1)]),
        # Fewer tokens than text.
        ("Paris, France", [wire("Paris", -0.1)]),
        # Another shape.
        ("Paris", {"content": [wire("Paris", -0.1)]}),
        ("Paris", [{"token": "Paris"}]),
        ("Paris", [wire("Paris", float("nan"))]),
    ],
)
def test_ollama_gives_no_logprobs_that_do_not_spell_the_text(content: str, tokens: Any) -> None:
    # `json.dumps` writes a NaN as `NaN`, which the parser reads back as one.
    response = ollama_body(json.dumps(_ollama(content, tokens)))
    assert response.text() == content
    assert response.logprobs is None


def test_ollama_gives_no_logprobs_without_text() -> None:
    call = {"id": "call_ab12cd34", "function": {"name": "lookup", "arguments": {"q": "x"}}}
    body = _ollama("", [wire('{"q":"x"}', -0.1)], tool_calls=[call])
    response = ollama_body(json.dumps(body))
    assert response.content == (ToolCall(id="call_ab12cd34", name="lookup", arguments='{"q":"x"}'),)
    assert response.logprobs is None
    assert text_logprobs([wire("", -0.1)], "") is None
    # A zero-length token at the cut belongs to the text's tokens.
    assert text_logprobs([wire("a", -0.1), wire("", -0.2), wire("b", -0.3)], "b") == (
        tok("", -0.2, []),
        tok("b", -0.3, b("b")),
    )


# Anthropic


def anthropic(name: str = "anthropic", **options: Any) -> HttpProvider:
    if name == "anthropic-compatible" and "base_url" not in options:
        options["base_url"] = "https://claude.example.com"
    return allama.provider(name, api_key=KEY, **options)


ANTHROPIC_WHY = "Anthropic reports no log-probabilities; none were asked for"
ANTHROPIC_REFUSAL = "cannot send `logprobs`: Anthropic reports no log-probabilities"


@pytest.mark.parametrize("stream", [False, True])
def test_anthropic_refuses_logprobs(stream: bool) -> None:
    request = ChatRequest("claude-sonnet-4-5").user("Hi").with_logprobs(3)
    http, warnings = anthropic()._prepare(request, stream=stream)
    assert warnings == [unsupported(RequestField.LOGPROBS, ANTHROPIC_WHY, "anthropic")]
    assert not {"logprobs", "top_logprobs"} & set(http.body)
    error = refused(
        lambda: anthropic()._prepare(
            request.with_unsupported_policy(UnsupportedPolicy.ERROR), stream=stream
        )
    )
    assert error.field is RequestField.LOGPROBS
    # What was done instead is the warning's alone: a refusal sends nothing.
    assert str(error) == ANTHROPIC_REFUSAL


def test_anthropic_refuses_a_choice() -> None:
    request = ChatRequest("claude-sonnet-4-5").user("Spam?").with_response_format(YES_NO)
    http, warnings = anthropic()._prepare(request, stream=False)
    why = NO_CHOICE.format("Anthropic")
    # Nothing of the format was sent, which an extraction reads its answer by.
    assert warnings == [
        unsupported(RequestField.RESPONSE_FORMAT, why, "anthropic", code="format_not_sent")
    ]
    assert "output_config" not in http.body
    error = refused(
        lambda: anthropic()._prepare(
            request.with_unsupported_policy(UnsupportedPolicy.ERROR), stream=False
        )
    )
    assert error.field is RequestField.RESPONSE_FORMAT


def test_anthropic_capabilities() -> None:
    for name in ("anthropic", "anthropic-compatible"):
        target = anthropic(name)
        for model in ("claude-opus-5-5", "claude-sonnet-4-5", "claude-3-5-haiku", "my-claude"):
            assert target.chat_capability(model, ChatCapability.LOGPROBS) is N, (name, model)
            assert target.chat_capability(model, ChatCapability.CHOICE_OUTPUT) is N, (name, model)


# End to end, over a socket


class _Server(ReplayServer):
    routes: dict[str, Callable[[_Handler], None]]


class _Handler(ReplyHandler):
    server: _Server

    def do_POST(self) -> None:
        length = int(self.headers.get("content-length") or 0)
        body = json.loads(self.rfile.read(length) or b"{}")
        headers = {key.lower(): value for key, value in self.headers.items()}
        with self.server.lock:
            self.server.seen.append((self.path, headers, body))
        route = self.path.split("?")[0].strip("/").split("/")[0]
        self.server.routes[route](self)


OLLAMA_THINKING = [
    wire("<think>", -0.01),
    wire("Sure", -0.4),
    wire("</think>", -0.02),
    *YES_SIR,
]


def _routes() -> dict[str, Callable[[_Handler], None]]:
    def openai(h: _Handler) -> None:
        h.send_json(200, _response(_message(_text("Yes sir", YES_SIR))))

    def ollama(h: _Handler) -> None:
        h.send_json(200, _ollama("Yes sir", OLLAMA_THINKING, thinking="Sure"))

    def claude(h: _Handler) -> None:
        h.send_json(
            200,
            {
                "id": "msg_01",
                "type": "message",
                "role": "assistant",
                "model": "claude-sonnet-4-5",
                "content": [{"type": "text", "text": "Yes sir"}],
                "stop_reason": "end_turn",
                "usage": {"input_tokens": 9, "output_tokens": 3},
            },
        )

    return {"openai": openai, "ollama": ollama, "claude": claude}


@pytest.fixture(scope="module")
def server() -> Iterator[_Server]:
    httpd = _Server(("127.0.0.1", 0), _Handler)
    httpd.seen = []
    httpd.lock = threading.Lock()
    httpd.routes = _routes()
    thread = threading.Thread(target=httpd.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    yield httpd
    httpd.shutdown()
    httpd.server_close()


def _base(server: _Server, route: str) -> str:
    host, port = server.server_address[:2]
    return f"http://{host!s}:{port}/{route}"


def _sent(server: _Server, route: str) -> list[tuple[str, dict[str, Any]]]:
    with server.lock:
        return [(path, body) for path, _, body in server.seen if path.startswith(f"/{route}/")]


def test_responses_end_to_end(server: _Server) -> None:
    target = allama.provider(
        "openai", api="responses", api_key=KEY, base_url=_base(server, "openai") + "/v1"
    )
    response = target.chat(ChatRequest("gpt-4o-mini").user("Yes?").with_logprobs(2))
    assert response.text() == "Yes sir"
    assert response.logprobs == YES_SIR_TOKENS
    assert response.warnings == ()
    [(path, body)] = _sent(server, "openai")
    assert path == "/openai/v1/responses"
    assert body["include"] == ["message.output_text.logprobs"]
    assert body["top_logprobs"] == 2


def test_ollama_end_to_end(server: _Server) -> None:
    target = allama.provider("ollama", base_url=_base(server, "ollama"))
    response = target.chat(ChatRequest("qwen3:8b").user("Yes?").with_logprobs(0))
    assert response.content == (Reasoning(text="Sure"), TextPart(text="Yes sir"))
    assert response.logprobs == YES_SIR_TOKENS
    assert response.warnings == ()
    [(path, body)] = _sent(server, "ollama")
    assert path == "/ollama/api/chat"
    assert body["logprobs"] is True
    assert "top_logprobs" not in body
    assert body["stream"] is False


def test_anthropic_end_to_end(server: _Server) -> None:
    target = allama.provider("anthropic", api_key=KEY, base_url=_base(server, "claude"))
    request = ChatRequest("claude-sonnet-4-5").user("Yes?").with_logprobs(2)
    response = target.chat(request)
    assert response.text() == "Yes sir"
    assert response.logprobs is None
    assert response.warnings == (unsupported(RequestField.LOGPROBS, ANTHROPIC_WHY, "anthropic"),)
    [(path, body)] = _sent(server, "claude")
    assert path == "/claude/v1/messages"
    assert not {"logprobs", "top_logprobs"} & set(body)
    # Under ERROR nothing is sent, and nothing is paid for.
    with pytest.raises(UnsupportedError):
        target.chat(request.with_unsupported_policy(UnsupportedPolicy.ERROR))
    assert len(_sent(server, "claude")) == 1
