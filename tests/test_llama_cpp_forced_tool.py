"""`llama-cpp` (a llama.cpp server you run) says what a forced tool gets from the model's
chat template, as `local` does: it reads the server's `GET /props` once. On a template
without tool calls (the server drops `tools` and `tool_choice` without a word) a forced-tool
extraction is refused before sending, whatever the policy: its tool, left out, could never
be called; where the server does not say, a forced tool is `approximate`, never `exact`,
and the plan says why.

The server is faked on 127.0.0.1: `/props` as llama.cpp answers it (`chat_template_caps`),
and chat completions that call the first tool offered, or answer in prose without one.
"""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Literal

import pytest
from pydantic import BaseModel

import allama
from _replay_server import ReplayServer, ReplyHandler
from allama import (
    ChatRequest,
    EnforcementBelowError,
    ExtractionMode,
    Extractor,
    SchemaEnforcement,
    ToolChoice,
    ToolDefinition,
)
from allama.adapters._http import HttpRequest, HttpResponse
from allama.cli import main
from allama.errors import NetworkError, UnsupportedError
from allama.transport import Transport
from allama.types import (
    CapabilitySupport,
    ChatCapability,
    RequestField,
    UnsupportedStage,
    WarningKind,
)

INVOICE = f"{Path(__file__).resolve().parent.parent / 'examples' / 'invoice.py'}:Invoice"
NO_TOOLS = {"supports_tool_calls": False, "supports_parallel_tool_calls": False}
WITH_TOOLS = {"supports_tool_calls": True, "supports_parallel_tool_calls": True}
WHERE = "the model's chat template on llama.cpp's server has no tool calls"
_COMPLETION = {
    "id": "c",
    "model": "m",
    "choices": [
        {"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": "Hi."}}
    ],
    "usage": {"prompt_tokens": 10, "completion_tokens": 5},
}
TOOL = ToolDefinition(
    name="get_time",
    description="time",
    parameters={"type": "object", "properties": {"tz": {"type": "string"}}, "required": ["tz"]},
)


class Choice(BaseModel):
    size: Literal["S", "M", "L"]


class _Server(ReplayServer):
    props: tuple[int, Any]
    """What `GET /props` answers: the status and the JSON body."""


class _Handler(ReplyHandler):
    server: _Server

    def do_GET(self) -> None:
        with self.server.lock:
            self.server.seen.append(("GET", {"path": self.path}, {}))
            status, body = self.server.props
        self.send_json(status, body)

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["content-length"])))
        with self.server.lock:
            self.server.seen.append(("POST", {"path": self.path}, body))
        message: dict[str, Any] = {"role": "assistant", "content": "Size M."}
        finish = "stop"
        if body.get("tools"):
            name = body["tools"][0]["function"]["name"]
            call = {"name": name, "arguments": '{"size": "M"}'}
            message = {
                "role": "assistant",
                "content": None,
                "tool_calls": [{"id": "call_1", "type": "function", "function": call}],
            }
            finish = "tool_calls"
        choice = {"index": 0, "finish_reason": finish, "message": message}
        usage = {"prompt_tokens": 10, "completion_tokens": 5}
        self.send_json(200, {"id": "c", "model": "m", "choices": [choice], "usage": usage})


@pytest.fixture
def server() -> Iterator[_Server]:
    served = _Server(("127.0.0.1", 0), _Handler)
    served.seen, served.lock = [], threading.Lock()
    served.props = (200, {"chat_template_caps": NO_TOOLS})
    thread = threading.Thread(target=served.serve_forever, daemon=True)
    thread.start()
    yield served
    served.shutdown()
    served.server_close()


def _provider(server: _Server) -> Any:
    port = server.server_address[1]
    return allama.provider("llama-cpp", base_url=f"http://127.0.0.1:{port}/v1")


def _asked(server: _Server) -> list[tuple[str, str]]:
    with server.lock:
        return [(method, seen["path"]) for method, seen, _ in server.seen]


def _forced() -> ChatRequest:
    return ChatRequest("m").user("Size M.").with_option(ExtractionMode.FORCED_TOOL)


REFUSED = (
    f"cannot send `tools`: {WHERE}, so extraction mode `forced_tool` cannot be answered (its "
    "tool would be left out); use extraction mode `native` (ExtractionMode.NATIVE) instead"
)


def test_a_forced_tool_extraction_on_a_template_without_tool_calls_is_refused_before_sending(
    server: _Server,
) -> None:
    # SmolLM2's template: the server would drop the tool and the model answer in prose,
    # which no retry changes.
    provider = _provider(server)
    assert provider.chat_capability("m", ChatCapability.FORCED_TOOL_CHOICE) is (
        CapabilitySupport.UNKNOWN
    )
    for attempt in (
        lambda: Extractor().plan(provider, Choice, _forced()),
        lambda: Extractor(retries=2).extract(provider, Choice, _forced()),
        lambda: asyncio.run(Extractor(retries=2).aextract(provider, Choice, _forced())),
        lambda: Extractor(min_enforcement="exact").extract(provider, Choice, _forced()),
    ):
        with pytest.raises(UnsupportedError) as refused:
            attempt()
        assert str(refused.value) == REFUSED
        assert (refused.value.field, refused.value.stage) == (
            RequestField.TOOLS,
            UnsupportedStage.BEFORE_SENDING,
        )
    # `/props` read once; no chat call sent.
    assert _asked(server) == [("GET", "/props")]
    assert provider.chat_capability("m", ChatCapability.FORCED_TOOL_CHOICE) is (
        CapabilitySupport.UNSUPPORTED
    )
    # Native mode, which auto mode picks, is planned as the call would send it.
    native = Extractor().plan(provider, Choice, _forced().with_option(ExtractionMode.NATIVE))
    assert (native.mode, native.enforcement) == (ExtractionMode.NATIVE, SchemaEnforcement.EXACT)
    assert Extractor().plan(provider, Choice, ChatRequest("m").user("M")).mode is (
        ExtractionMode.NATIVE
    )
    provider.close()


def test_a_template_with_tool_calls_is_forced_exactly(server: _Server) -> None:
    server.props = (200, {"chat_template_caps": WITH_TOOLS})
    provider = _provider(server)
    plan = Extractor().plan(provider, Choice, _forced())
    assert (plan.enforcement, plan.degradations, plan.notes) == (
        SchemaEnforcement.EXACT,
        (),
        (),
    )
    extractor = Extractor(min_enforcement="exact")
    for _ in range(2):
        result = extractor.extract(provider, Choice, _forced())
        assert result.value == Choice(size="M")
        assert result.metadata.enforcement is SchemaEnforcement.EXACT
    assert _asked(server) == [
        ("GET", "/props"),
        ("POST", "/v1/chat/completions"),
        ("POST", "/v1/chat/completions"),
    ]
    body = server.seen[1][2]
    assert [tool["function"]["name"] for tool in body["tools"]] == ["submit_structured_output"]
    assert body["tool_choice"] == "required"
    provider.close()


@pytest.mark.parametrize(
    ("props", "why", "asked"),
    [
        # A read that failed for now is tried again by the call; one that holds is not.
        (
            (500, {"error": "busy"}),
            "GET /props failed: it answered HTTP 500",
            ["GET", "GET", "POST"],
        ),
        (
            (404, {"error": "not found"}),  # a proxy that forwards /v1 alone
            "GET /props failed: it answered HTTP 404",
            ["GET", "POST"],
        ),
        (
            (200, {"build_info": "b1"}),  # a server too old to report its template's caps
            "GET /props has no `chat_template_caps.supports_tool_calls`",
            ["GET", "POST"],
        ),
    ],
)
def test_a_server_that_does_not_say_makes_a_forced_tool_approximate(
    server: _Server, props: tuple[int, Any], why: str, asked: list[str]
) -> None:
    server.props = props
    provider = _provider(server)
    plan = Extractor().plan(provider, Choice, _forced())
    message = (
        f"llama.cpp's server did not say whether the model's chat template has tool calls "
        f"({why}); the tools were sent, and a template without them drops them without a word"
    )
    assert plan.enforcement is SchemaEnforcement.APPROXIMATE
    assert [(w.kind, w.message) for w in plan.degradations] == [(WarningKind.APPROXIMATED, message)]
    with pytest.raises(EnforcementBelowError):
        Extractor(min_enforcement="exact").extract(provider, Choice, _forced())
    assert [method for method, _ in _asked(server)] == ["GET"]  # refused before sending
    result = Extractor(min_enforcement="approximate").extract(provider, Choice, _forced())
    assert result.value == Choice(size="M")
    assert result.metadata.enforcement is SchemaEnforcement.APPROXIMATE
    assert [w.message for w in result.metadata.degradations] == [message]
    assert [method for method, _ in _asked(server)] == asked
    assert server.seen[-1][2]["tool_choice"] == "required"
    provider.close()


def test_a_failed_read_is_not_repeated_by_dry_runs_but_is_by_the_next_call(
    server: _Server,
) -> None:
    server.props = (503, {"error": {"code": 503, "message": "Loading model"}})
    provider = _provider(server)
    for _ in range(2):
        plan = Extractor().plan(provider, Choice, _forced())
        assert plan.enforcement is SchemaEnforcement.APPROXIMATE
    assert _asked(server) == [("GET", "/props")]
    server.props = (200, {"chat_template_caps": NO_TOOLS})  # loaded
    request = ChatRequest("m").user("Time?").with_tools([TOOL])
    response = provider.chat(request.with_tool_choice(ToolChoice.required()))
    assert [(w.kind, w.is_about(RequestField.TOOLS)) for w in response.warnings] == [
        (WarningKind.UNSUPPORTED, True),
        (WarningKind.UNSUPPORTED, False),
    ]
    assert _asked(server) == [
        ("GET", "/props"),
        ("GET", "/props"),
        ("POST", "/v1/chat/completions"),
    ]
    assert "tools" not in server.seen[-1][2]
    # Read now: neither a dry run nor a call asks again.
    assert provider.validate_chat_request(request).warnings[0].kind is WarningKind.UNSUPPORTED
    provider.chat(request)
    assert [method for method, _ in _asked(server)] == ["GET", "GET", "POST", "POST"]
    provider.close()


def test_an_async_call_reads_props_as_a_sync_one_does(server: _Server) -> None:
    provider = _provider(server)
    request = ChatRequest("m").user("Time?").with_tools([TOOL])

    async def run() -> list[str]:
        response = await provider.achat(request)
        streamed = await (await provider.achat_stream(request)).response()
        return [w.message for w in (*response.warnings, *streamed.warnings)]

    assert asyncio.run(run()) == [f"{WHERE}; the tools were left out"] * 2
    assert [method for method, _ in _asked(server)] == ["GET", "POST", "POST"]
    provider.close()


def test_allama_plan_without_a_server_does_not_claim_a_forced_tool_exact(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # Nothing listens on port 9: what the template can do is not known.
    monkeypatch.setenv("LLAMA_CPP_BASE_URL", "http://127.0.0.1:9/v1")
    assert main(["plan", INVOICE, "--json", "--provider", "llama-cpp"]) == 0
    rows = {row["mode"]: row for row in json.loads(capsys.readouterr().out)["plans"]}
    forced = rows["forced_tool"]
    assert forced["enforcement"] == "approximate"
    assert forced["notes"][0] == (
        "llama.cpp's server did not say whether the model's chat template has tool calls "
        "(GET /props failed: could not connect to 127.0.0.1:9 (ConnectError)); the tools were "
        "sent, and a template without them drops them without a word"
    )
    # The rest are the schema's own notes, as in native mode, which sends no tools.
    assert forced["notes"][1:] == rows["native"]["notes"]


def test_the_token_a_failed_props_read_went_with_is_redacted_from_its_reason() -> None:
    # What stopped the read (a caller's transport, a gateway before the server) may quote
    # the token it went with: cut out, whatever tokens other calls were given meanwhile
    # (more than the provider keeps of those it gave lately).
    given = iter(range(1, 1000))
    sent: list[str] = []

    class Gateway(Transport):
        def send(self, request: HttpRequest) -> HttpResponse:
            token = request.headers["authorization"].removeprefix("Bearer ")
            if not request.url.endswith("/props"):
                return HttpResponse(200, {}, json.dumps(_COMPLETION).encode())
            sent.append(token)
            for _ in range(24):  # calls of other threads, each with a token of its own
                provider.chat(ChatRequest("m").user("Hi"))
            raise NetworkError(f"the gateway refused token {token}")

    provider = allama.provider(
        "llama-cpp",
        base_url="http://127.0.0.1:9/v1",
        access_token=lambda: f"entra-token-{next(given):04d}",
        transport=Gateway(),
    )
    plan = Extractor().plan(provider, Choice, _forced())
    assert sent == ["entra-token-0001"]
    assert [w.message for w in plan.degradations] == [
        "llama.cpp's server did not say whether the model's chat template has tool calls "
        "(GET /props failed: the gateway refused token <redacted>); the tools were sent, and "
        "a template without them drops them without a word"
    ]
