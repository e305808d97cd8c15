"""Token log-probabilities and enum (`choice`) output on Gemini, on the Gemini API and Vertex AI.

Encoding: `responseLogprobs` and `logprobs`, the refusals (a family that reports none, a
stream), `text/x.enum` with a `STRING` enum as `responseSchema`. The capability answers, as
each preset's table gives them. Decoding `candidates[0].logprobsResult` in its documented
shape (`chosenCandidates`, `topCandidates[i].candidates`), a malformed one dropped whole.
And end to end over a socket on 127.0.0.1: an enum answer with its log-probabilities.
"""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Callable, Iterator
from typing import Any

import pytest

import allama
from _replay_server import ReplayServer, ReplyHandler
from allama.adapters.gemini import decode_response
from allama.errors import UnsupportedError
from allama.providers import HttpProvider
from allama.types import (
    CapabilitySupport,
    ChatCapability,
    ChatRequest,
    ChatResponse,
    FinishReason,
    RequestField,
    ResponseFormat,
    TextPart,
    TokenAlternative,
    TokenLogprob,
    ToolDefinition,
    UnsupportedPolicy,
    UnsupportedStage,
    Usage,
    Warning,
)

KEY = "AIza-logprobs-test-key"
TOKEN = "ya29.logprobs-test-token"
PROJECT = "proj"
VERTEX_PREFIX = f"/v1/projects/{PROJECT}/locations/us-central1/publishers/google"
SENTIMENTS = ("Positive", "Negative", "Neutral")
ENUM_CONFIG = {
    "responseMimeType": "text/x.enum",
    "responseSchema": {"type": "STRING", "enum": ["Positive", "Negative", "Neutral"]},
}

S = CapabilitySupport.SUPPORTED
N = CapabilitySupport.UNSUPPORTED
U = CapabilitySupport.UNKNOWN


def _provider(preset: str, base_url: str | None = None) -> HttpProvider:
    extra: dict[str, Any] = {} if base_url is None else {"base_url": base_url}
    if preset == "vertex-gemini":
        return allama.provider(
            "vertex-gemini",
            access_token=TOKEN,
            project=PROJECT,
            location="us-central1",
            **extra,
        )
    return allama.provider("gemini", api_key=KEY, **extra)


def encode(
    request: ChatRequest, *, preset: str = "gemini", stream: bool = False
) -> tuple[dict[str, Any], list[Warning]]:
    http, warnings = _provider(preset)._prepare(request, stream=stream)
    assert json.loads(http.content) == http.body
    return http.body, warnings


def ask(model: str) -> ChatRequest:
    return ChatRequest(model).user("I am not sure I like this restaurant.")


def unsupported(message: str, provider: str = "gemini") -> Warning:
    return Warning.unsupported(RequestField.LOGPROBS, message).with_provider(provider)


# Encoding


@pytest.mark.parametrize("preset", ["gemini", "vertex-gemini"])
@pytest.mark.parametrize(
    ("top", "config"),
    [
        (0, {"responseLogprobs": True}),
        (1, {"responseLogprobs": True, "logprobs": 1}),
        (5, {"responseLogprobs": True, "logprobs": 5}),
        (20, {"responseLogprobs": True, "logprobs": 20}),
    ],
)
def test_logprobs_ask_for_the_tokens_and_n_alternatives(
    preset: str, top: int, config: dict[str, Any]
) -> None:
    """0 asks for the chosen tokens alone (`responseLogprobs`); 1 to 20 adds `logprobs`."""
    body, warnings = encode(ask("gemini-2.0-flash").with_logprobs(top), preset=preset)
    assert body["generationConfig"] == config
    assert warnings == []


def test_no_logprobs_asked_sends_neither_field() -> None:
    body, warnings = encode(ask("gemini-2.0-flash").with_temperature(0.0))
    assert body["generationConfig"] == {"temperature": 0.0}
    assert warnings == []


def test_a_family_nobody_has_said_about_is_asked_anyway() -> None:
    """UNKNOWN never blocks a request: the provider decides."""
    body, warnings = encode(ask("gemini-1.5-pro-002").with_logprobs(3))
    assert body["generationConfig"] == {"responseLogprobs": True, "logprobs": 3}
    assert warnings == []
    body, warnings = encode(ask("gemini-2.5-pro").with_logprobs(3), preset="vertex-gemini")
    assert body["generationConfig"] == {"responseLogprobs": True, "logprobs": 3}
    assert warnings == []


@pytest.mark.parametrize(
    ("preset", "model", "display"),
    [
        ("gemini", "gemini-1.5-flash-8b", "Gemini"),
        ("gemini", "gemini-2.5-flash", "Gemini"),
        ("gemini", "models/gemini-2.5-pro-preview-03-25", "Gemini"),
        ("vertex-gemini", "gemini-3.5-flash", "Gemini on Vertex AI"),
    ],
)
def test_a_family_that_reports_none_drops_them_with_a_warning(
    preset: str, model: str, display: str
) -> None:
    request = ask(model).with_temperature(0.5).with_logprobs(4)
    body, warnings = encode(request, preset=preset)
    assert body["generationConfig"] == {"temperature": 0.5}
    assert warnings == [
        unsupported(f"`{model}` on {display} reports no log-probabilities", provider=preset)
    ]


def test_a_family_that_reports_none_is_refused_before_sending_under_error() -> None:
    request = ask("gemini-2.5-flash-lite").with_logprobs(0)
    with pytest.raises(UnsupportedError) as caught:
        encode(request.with_unsupported_policy(UnsupportedPolicy.ERROR))
    error = caught.value
    assert (error.field, error.stage) == (RequestField.LOGPROBS, UnsupportedStage.BEFORE_SENDING)
    assert error.provider == "gemini"
    assert str(error.message) == (
        "cannot send `logprobs`: `gemini-2.5-flash-lite` on Gemini reports no log-probabilities"
    )


STREAM_WHY = (
    "log-probabilities are read from whole responses, not streams; a stream from "
    "`gemini-2.0-flash` on {display} carries none"
)


@pytest.mark.parametrize(
    ("preset", "display"), [("gemini", "Gemini"), ("vertex-gemini", "Gemini on Vertex AI")]
)
def test_a_stream_is_sent_without_them_with_a_warning(preset: str, display: str) -> None:
    body, warnings = encode(ask("gemini-2.0-flash").with_logprobs(2), preset=preset, stream=True)
    assert "generationConfig" not in body
    assert warnings == [unsupported(STREAM_WHY.format(display=display), provider=preset)]
    # The same request, not streamed, asks for them.
    body, warnings = encode(ask("gemini-2.0-flash").with_logprobs(2), preset=preset)
    assert body["generationConfig"] == {"responseLogprobs": True, "logprobs": 2}
    assert warnings == []


def test_a_stream_is_refused_before_sending_under_error() -> None:
    request = ask("gemini-2.0-flash").with_logprobs(2)
    with pytest.raises(UnsupportedError) as caught:
        encode(request.with_unsupported_policy(UnsupportedPolicy.ERROR), stream=True)
    error = caught.value
    assert (error.field, error.stage) == (RequestField.LOGPROBS, UnsupportedStage.BEFORE_SENDING)
    assert str(error.message) == "cannot send `logprobs`: " + STREAM_WHY.format(display="Gemini")


@pytest.mark.parametrize("preset", ["gemini", "vertex-gemini"])
@pytest.mark.parametrize("model", ["gemini-2.5-flash", "gemini-3-pro-preview", "gemini-1.5-flash"])
def test_a_choice_is_enum_output_with_a_string_enum_response_schema(
    preset: str, model: str
) -> None:
    """`text/x.enum` with the documented `responseSchema`, whichever schema surface the
    family takes JSON on; exact, so no warning; never a `responseJsonSchema`."""
    request = ask(model).with_response_format(ResponseFormat.choice(SENTIMENTS))
    body, warnings = encode(request, preset=preset)
    assert body["generationConfig"] == ENUM_CONFIG
    assert warnings == []


def test_a_choice_with_logprobs_asks_for_both() -> None:
    request = (
        ask("gemini-2.0-flash-001")
        .with_response_format(ResponseFormat.choice(["yes", "no"], name="verdict"))
        .with_logprobs(2)
    )
    body, warnings = encode(request)
    assert body["generationConfig"] == {
        "responseLogprobs": True,
        "logprobs": 2,
        "responseMimeType": "text/x.enum",
        "responseSchema": {"type": "STRING", "enum": ["yes", "no"]},
    }
    assert warnings == []


def test_a_choice_beside_function_declarations_is_left_to_the_provider() -> None:
    """Only JSON output beside function declarations is known to be refused by 2.5."""
    tool = ToolDefinition(name="lookup", parameters={"type": "object", "properties": {}})
    request = (
        ask("gemini-2.5-flash")
        .with_tools([tool])
        .with_response_format(ResponseFormat.choice(SENTIMENTS))
    )
    body, warnings = encode(request)
    assert body["generationConfig"] == ENUM_CONFIG
    assert body["tools"] == [
        {
            "functionDeclarations": [
                {"name": "lookup", "parametersJsonSchema": {"type": "object", "properties": {}}}
            ]
        }
    ]
    assert warnings == []


def test_a_choice_on_a_family_without_constrained_output_is_refused() -> None:
    request = ask("gemma-3-27b-it").with_response_format(ResponseFormat.choice(SENTIMENTS))
    body, warnings = encode(request)
    assert "generationConfig" not in body
    assert warnings == [
        Warning.unsupported(
            RequestField.RESPONSE_FORMAT,
            "`gemma-3-27b-it` on Gemini has no constrained output",
            code="format_not_sent",
        ).with_provider("gemini")
    ]
    with pytest.raises(UnsupportedError) as caught:
        encode(request.with_unsupported_policy(UnsupportedPolicy.ERROR))
    assert caught.value.field is RequestField.RESPONSE_FORMAT


# Capabilities


@pytest.mark.parametrize(
    ("preset", "model", "logprobs", "choice"),
    [
        ("gemini", "gemini-2.0-flash", S, S),
        ("gemini", "models/gemini-2.0-flash-001", S, S),
        ("gemini", "gemini-2.0-flash-lite", S, S),
        ("gemini", "gemini-2.0-flash-lite-preview-02-05", N, S),
        ("gemini", "gemini-1.5-flash-8b", N, S),
        ("gemini", "gemini-1.5-pro", U, S),
        ("gemini", "gemini-2.5-pro", N, S),
        ("gemini", "gemini-2.5-pro-preview-03-25", N, S),
        ("gemini", "gemini-2.5-flash", N, S),
        ("gemini", "gemini-2.5-flash-lite", N, S),
        ("gemini", "gemini-3-pro-preview", N, S),
        ("gemini", "gemini-3.5-flash", U, S),
        ("gemini", "gemma-3-27b-it", U, N),
        ("gemini", "tunedModels/my-tune", U, U),
        ("vertex-gemini", "gemini-2.0-flash-001", S, S),
        ("vertex-gemini", "gemini-2.0-flash-lite-001", S, S),
        ("vertex-gemini", "gemini-1.5-flash-8b", N, S),
        ("vertex-gemini", "gemini-2.5-pro", U, S),
        ("vertex-gemini", "gemini-2.5-flash", U, S),
        ("vertex-gemini", "gemini-3-pro-preview", U, S),
        ("vertex-gemini", "gemini-3.5-flash", N, S),
        ("vertex-gemini", "my-endpoint-model", U, U),
    ],
)
def test_capability_answers(
    preset: str, model: str, logprobs: CapabilitySupport, choice: CapabilitySupport
) -> None:
    target = _provider(preset)
    assert target.chat_capability(model, ChatCapability.LOGPROBS) is logprobs
    assert target.chat_capability(model, ChatCapability.CHOICE_OUTPUT) is choice
    # The per-preset answer sticks: asked again (from the cache), the same.
    assert target.chat_capability(model, ChatCapability.LOGPROBS) is logprobs


@pytest.mark.parametrize("preset", ["gemini", "vertex-gemini"])
@pytest.mark.parametrize(
    "model", ["gemini-2.0-flash", "gemini-2.5-pro", "gemini-3-flash-preview", "gemma-3", "x"]
)
def test_every_capability_is_answered(preset: str, model: str) -> None:
    target = _provider(preset)
    for capability in ChatCapability:
        assert isinstance(target.chat_capability(model, capability), CapabilitySupport)


def test_the_other_answers_did_not_move() -> None:
    target = _provider("gemini")
    answers = {c: target.chat_capability("gemini-2.5-flash", c) for c in ChatCapability}
    assert answers == {
        ChatCapability.STRUCTURED_OUTPUT: S,
        ChatCapability.TOOL_CALLS: S,
        ChatCapability.FORCED_TOOL_CHOICE: S,
        ChatCapability.STREAMING: S,
        ChatCapability.REASONING: S,
        ChatCapability.IMAGE_INPUT: S,
        ChatCapability.PARALLEL_TOOL_CALLS: S,
        ChatCapability.RESPONSE_SCHEMA_ANY_ROOT: S,
        ChatCapability.TOOL_SCHEMA_ANY_ROOT: N,
        ChatCapability.LOGPROBS: N,
        ChatCapability.CHOICE_OUTPUT: S,
    }


# Decoding


def _candidate(text: str, logprobs_result: Any = None, **extra: Any) -> dict[str, Any]:
    candidate: dict[str, Any] = {
        "content": {"parts": [{"text": text}], "role": "model"},
        "finishReason": "STOP",
        "avgLogprobs": -0.20867,
        **extra,
    }
    if logprobs_result is not None:
        candidate["logprobsResult"] = logprobs_result
    return candidate


def _body(*candidates: dict[str, Any]) -> dict[str, Any]:
    return {
        "candidates": list(candidates),
        "usageMetadata": {
            "promptTokenCount": 12,
            "candidatesTokenCount": 2,
            "totalTokenCount": 14,
        },
        "modelVersion": "gemini-2.0-flash",
        "responseId": "resp-logprobs-1",
    }


# "Negative" as Gemini writes it with `logprobs: 2`: two tokens; the second one's
# `logProbability` is 0 and so omitted (proto3), in both lists.
NEGATIVE_RESULT = {
    "topCandidates": [
        {
            "candidates": [
                {"token": "Neg", "tokenId": 39491, "logProbability": -0.41733217},
                {"token": "Neutral", "tokenId": 133710, "logProbability": -1.0769453},
            ]
        },
        {
            "candidates": [
                {"token": "ative", "tokenId": 1386},
                {"token": "atives", "tokenId": 29557, "logProbability": -19.342041},
            ]
        },
    ],
    "chosenCandidates": [
        {"token": "Neg", "tokenId": 39491, "logProbability": -0.41733217},
        {"token": "ative", "tokenId": 1386},
    ],
    "logProbabilitySum": -0.41733217,
}

NEGATIVE_TOKENS = (
    TokenLogprob(
        token="Neg",
        logprob=-0.41733217,
        top=(
            TokenAlternative(token="Neg", logprob=-0.41733217),
            TokenAlternative(token="Neutral", logprob=-1.0769453),
        ),
    ),
    TokenLogprob(
        token="ative",
        logprob=0.0,
        top=(
            TokenAlternative(token="ative", logprob=0.0),
            TokenAlternative(token="atives", logprob=-19.342041),
        ),
    ),
)


def _decode(body: dict[str, Any]) -> ChatResponse:
    return decode_response(
        200,
        {"content-type": "application/json; charset=UTF-8"},
        json.dumps(body).encode(),
        provider="gemini",
        model="gemini-2.0-flash",
    )


def test_decoding_logprobs_result() -> None:
    response = _decode(_body(_candidate("Negative", NEGATIVE_RESULT)))
    assert response.text() == "Negative"
    assert response.logprobs == NEGATIVE_TOKENS
    assert "".join(token.token for token in response.logprobs) == response.text()
    assert b"".join(token.utf8() for token in response.logprobs) == b"Negative"
    assert all(token.token_bytes is None for token in response.logprobs)
    assert all(alt.token_bytes is None for token in response.logprobs for alt in token.top)
    assert response.content == (TextPart(text="Negative"),)
    assert response.finish_reason == FinishReason.STOP
    assert response.usage == Usage(input_tokens=12, output_tokens=2)
    assert (response.id, response.model) == ("resp-logprobs-1", "gemini-2.0-flash")
    assert response.provider_data == {}


def test_the_chosen_token_need_not_be_among_the_top_candidates() -> None:
    """Sampled at a temperature, the chosen token may be none of the likeliest."""
    result = {
        "topCandidates": [
            {
                "candidates": [
                    {"token": "Positive", "tokenId": 31587, "logProbability": -0.10536052},
                    {"token": "Negative", "tokenId": 39492, "logProbability": -2.3025851},
                ]
            }
        ],
        "chosenCandidates": [
            {"token": "Neutral", "tokenId": 133710, "logProbability": -4.6051702},
        ],
        "logProbabilitySum": -4.6051702,
    }
    response = _decode(_body(_candidate("Neutral", result)))
    assert response.text() == "Neutral"
    assert response.logprobs == (
        TokenLogprob(
            token="Neutral",
            logprob=-4.6051702,
            top=(
                TokenAlternative(token="Positive", logprob=-0.10536052),
                TokenAlternative(token="Negative", logprob=-2.3025851),
            ),
        ),
    )


def test_without_top_candidates_each_token_has_no_alternatives() -> None:
    """`logprobs` unset (0): the chosen tokens alone; an empty step likewise."""
    chosen = NEGATIVE_RESULT["chosenCandidates"]
    response = _decode(_body(_candidate("Negative", {"chosenCandidates": chosen})))
    assert response.logprobs == (
        TokenLogprob(token="Neg", logprob=-0.41733217),
        TokenLogprob(token="ative", logprob=0.0),
    )
    steps = {"chosenCandidates": chosen, "topCandidates": [{}, {"candidates": []}]}
    assert _decode(_body(_candidate("Negative", steps))).logprobs == (
        TokenLogprob(token="Neg", logprob=-0.41733217),
        TokenLogprob(token="ative", logprob=0.0),
    )


def test_no_logprobs_result_is_none() -> None:
    response = _decode(_body(_candidate("Negative")))
    assert response.text() == "Negative"
    assert response.logprobs is None


def test_only_the_response_candidates_logprobs_are_read() -> None:
    """The candidate with index 0 is the response; another's result is not its tokens."""
    other = _candidate("Positive", {"chosenCandidates": [{"token": "Positive"}]}, index=1)
    response = _decode(_body(other, _candidate("Negative", NEGATIVE_RESULT, index=0)))
    assert response.text() == "Negative"
    assert response.logprobs == NEGATIVE_TOKENS


def _malformed(change: Callable[[dict[str, Any]], Any]) -> Any:
    result = json.loads(json.dumps(NEGATIVE_RESULT))
    replaced = change(result)
    return result if replaced is None else replaced


MALFORMED = {
    "not an object": lambda r: ["Neg", "ative"],
    "chosen not a list": lambda r: r.update(chosenCandidates={"token": "Neg"}),
    "chosen empty": lambda r: r.update(chosenCandidates=[]),
    "chosen missing": lambda r: r.pop("chosenCandidates") and None,
    "a chosen token not an object": lambda r: r["chosenCandidates"].__setitem__(1, "ative"),
    "a token not a string": lambda r: r["chosenCandidates"][0].update(token=39491),
    "a token missing": lambda r: r["chosenCandidates"][1].pop("token") and None,
    "a logprob not a number": lambda r: r["chosenCandidates"][0].update(logProbability="-0.4"),
    "a logprob a boolean": lambda r: r["chosenCandidates"][0].update(logProbability=False),
    "a positive logprob": lambda r: r["chosenCandidates"][0].update(logProbability=0.5),
    "top shorter than chosen": lambda r: r["topCandidates"].pop() and None,
    "top not a list": lambda r: r.update(topCandidates={"candidates": []}),
    "a top step not an object": lambda r: r["topCandidates"].__setitem__(0, []),
    "a top step's candidates not a list": lambda r: r["topCandidates"][0].update(candidates={}),
    "an alternative not an object": lambda r: r["topCandidates"][1]["candidates"].append(None),
    "an alternative's logprob a string": (
        lambda r: r["topCandidates"][1]["candidates"][1].update(logProbability="x")
    ),
}


@pytest.mark.parametrize("name", list(MALFORMED))
def test_a_malformed_result_is_dropped_whole(name: str) -> None:
    response = _decode(_body(_candidate("Negative", _malformed(MALFORMED[name]))))
    assert response.text() == "Negative"
    assert response.finish_reason == FinishReason.STOP
    assert response.logprobs is None
    said = [w.message for w in response.warnings if w.is_about(RequestField.LOGPROBS)]
    # Left out with a word, as Chat Completions' are; an empty list is no token written.
    assert said == ([] if name in ("chosen empty", "chosen missing") else [UNREAD_LOGPROBS])


UNREAD_LOGPROBS = (
    "the provider sent log-probabilities in a shape allama does not read (a `logprobsResult` "
    "whose candidates are no tokens with their log-probabilities, or whose top candidates do "
    "not match them step for step): they were left out"
)


def test_a_logprob_a_hair_above_zero_is_read_as_zero() -> None:
    """A probability of 1 computed in floating point (`2e-7`), which every other dialect's
    reader takes as 0: the whole list was dropped, and a decision's probabilities with it."""
    result = json.loads(json.dumps(NEGATIVE_RESULT))
    result["chosenCandidates"][0]["logProbability"] = 2e-7
    result["topCandidates"][0]["candidates"][0]["logProbability"] = 2e-7
    response = _decode(_body(_candidate("Negative", result)))
    assert response.warnings == ()
    assert response.logprobs is not None
    assert response.logprobs[0].logprob == 0.0
    assert response.logprobs[0].top[0] == TokenAlternative(token="Neg", logprob=0.0)


def test_a_nan_logprob_is_malformed() -> None:
    body = json.dumps(_body(_candidate("Negative", NEGATIVE_RESULT))).replace("-1.0769453", "NaN")
    response = decode_response(200, {}, body.encode(), provider="gemini", model="m")
    assert response.text() == "Negative"
    assert response.logprobs is None


# End to end


class _Server(ReplayServer):
    answer: Callable[[_Handler], None]


class _Handler(ReplyHandler):
    json_type = "application/json; charset=UTF-8"
    server: _Server

    def do_POST(self) -> None:
        length = int(self.headers.get("content-length") or 0)
        body = json.loads(self.rfile.read(length) or b"{}")
        headers = {key.lower(): value for key, value in self.headers.items()}
        with self.server.lock:
            self.server.seen.append((self.path, headers, body))
        self.server.answer(self)


@pytest.fixture
def server() -> Iterator[_Server]:
    httpd = _Server(("127.0.0.1", 0), _Handler)
    httpd.seen = []
    httpd.lock = threading.Lock()
    thread = threading.Thread(target=httpd.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    yield httpd
    httpd.shutdown()
    httpd.server_close()


def _root(server: _Server) -> str:
    host, port = server.server_address[:2]
    return f"http://{host!s}:{port}"


ENUM_ANSWER = _body(_candidate("Negative", NEGATIVE_RESULT))


@pytest.mark.parametrize(
    ("preset", "prefix"), [("gemini", "/v1beta"), ("vertex-gemini", VERTEX_PREFIX)]
)
@pytest.mark.parametrize("asynchronous", [False, True], ids=["sync", "async"])
def test_an_enum_answer_with_its_logprobs_end_to_end(
    server: _Server, preset: str, prefix: str, asynchronous: bool
) -> None:
    server.answer = lambda h: h.send_json(200, ENUM_ANSWER)
    target = _provider(preset, base_url=_root(server) + prefix)
    request = (
        ChatRequest("gemini-2.0-flash")
        .user("I am not sure I like this restaurant.")
        .with_response_format(ResponseFormat.choice(SENTIMENTS))
        .with_logprobs(2)
    )
    response = asyncio.run(target.achat(request)) if asynchronous else target.chat(request)
    assert response.text() == "Negative"
    assert response.logprobs == NEGATIVE_TOKENS
    assert response.warnings == ()
    assert response.finish_reason == FinishReason.STOP
    assert response.provider == preset
    (path, headers, body) = server.seen[0]
    assert len(server.seen) == 1
    assert path == f"{prefix}/models/gemini-2.0-flash:generateContent"
    if preset == "gemini":
        assert headers["x-goog-api-key"] == KEY
    else:
        assert headers["authorization"] == f"Bearer {TOKEN}"
    assert body == {
        "contents": [
            {"role": "user", "parts": [{"text": "I am not sure I like this restaurant."}]}
        ],
        "generationConfig": {"responseLogprobs": True, "logprobs": 2, **ENUM_CONFIG},
    }


def test_a_streamed_enum_answer_comes_without_logprobs_and_says_why(server: _Server) -> None:
    """Under WARN the stream is asked without them; the warning rides on the response."""
    chunk = {
        "candidates": [
            {"content": {"parts": [{"text": "Negative"}], "role": "model"}, "finishReason": "STOP"}
        ],
        "modelVersion": "gemini-2.0-flash",
    }
    server.answer = lambda h: h.send_stream(f"data: {json.dumps(chunk)}\r\n\r\n".encode())
    target = _provider("gemini", base_url=_root(server) + "/v1beta")
    request = (
        ask("gemini-2.0-flash")
        .with_response_format(ResponseFormat.choice(SENTIMENTS))
        .with_logprobs(2)
    )
    with target.chat_stream(request) as stream:
        for _ in stream:
            pass
        response = stream.response()
    assert response.text() == "Negative"
    assert response.logprobs is None
    assert response.warnings == (unsupported(STREAM_WHY.format(display="Gemini")),)
    (path, _, body) = server.seen[0]
    assert path == "/v1beta/models/gemini-2.0-flash:streamGenerateContent?alt=sse"
    assert body["generationConfig"] == ENUM_CONFIG


@pytest.mark.parametrize("result", [{}, {"logProbabilitySum": -0.1}])
def test_a_result_of_no_tokens_is_no_list_to_warn_of(result: dict[str, Any]) -> None:
    """Proto3 JSON leaves an empty list out: a candidate that wrote no token comes with an
    empty `logprobsResult`, or its sum alone, which is nothing unread."""
    response = _decode(_body(_candidate("", result)))
    assert (response.logprobs, response.warnings) == (None, ())
