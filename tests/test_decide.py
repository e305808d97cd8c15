"""Decisions through the public API, against a local server answering in the providers'
shapes: the constraint each provider gets, the options checked, and each option's
probability computed from the token log-probabilities the server returns."""

from __future__ import annotations

import asyncio
import enum
import itertools
import json
import math
import threading
from collections.abc import Iterator
from typing import Any, Literal

import pytest

import allama
from _replay_server import ReplayServer, ReplyHandler
from allama import (
    ChatRequest,
    EnforcementBelowError,
    ExtractionMode,
    Extractor,
    ParseError,
    SchemaEnforcement,
    UnsupportedError,
)
from allama.extract import EXTRACTION_TOOL
from allama.mock import MockProvider
from allama.types import CapabilitySupport, ChatCapability, RequestField, UnsupportedStage

# The server: each test scripts its own route with the replies it wants, in order.


class _Server(ReplayServer):
    replies: dict[str, list[tuple[int, Any]]]


class _Handler(ReplyHandler):
    server: _Server

    def do_POST(self) -> None:
        length = int(self.headers.get("content-length") or 0)
        body = json.loads(self.rfile.read(length) or b"{}")
        route = self.path.strip("/").split("/")[0]
        with self.server.lock:
            self.server.seen.append((self.path, {}, body))
            status, payload = self.server.replies[route].pop(0)
        self.send_json(status, payload)


@pytest.fixture(scope="module")
def server() -> Iterator[_Server]:
    httpd = _Server(("127.0.0.1", 0), _Handler)
    httpd.seen, httpd.replies, httpd.lock = [], {}, threading.Lock()
    thread = threading.Thread(target=httpd.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    yield httpd
    httpd.shutdown()
    httpd.server_close()


_ROUTES = itertools.count()


def script(server: _Server, *replies: tuple[int, Any]) -> str:
    """A base URL whose calls get `replies`, one per call."""
    route = f"r{next(_ROUTES)}"
    with server.lock:
        server.replies[route] = list(replies)
    host, port = server.server_address[:2]
    return f"http://{host!s}:{port}/{route}"


def sent(server: _Server, base: str) -> list[dict[str, Any]]:
    route = base.rsplit("/", 1)[1]
    with server.lock:
        return [body for path, _, body in server.seen if path.startswith(f"/{route}/")]


# Chat Completions bodies with log-probabilities, in OpenAI's shape.


def alt(token: str, p: float) -> dict[str, Any]:
    return {"token": token, "logprob": math.log(p), "bytes": list(token.encode())}


def tok(token: str, p: float, *top: tuple[str, float]) -> dict[str, Any]:
    return {**alt(token, p), "top_logprobs": [alt(t, q) for t, q in top]}


def completion(content: str, tokens: list[dict[str, Any]] | None) -> tuple[int, Any]:
    choice: dict[str, Any] = {
        "index": 0,
        "message": {"role": "assistant", "content": content},
        "finish_reason": "stop",
        "logprobs": None if tokens is None else {"content": tokens, "refusal": None},
    }
    return 200, {
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "model": "m",
        "choices": [choice],
        "usage": {"prompt_tokens": 50, "completion_tokens": len(tokens or []), "total_tokens": 55},
    }


YES_WRAPPED = [
    tok('{"', 1.0),
    tok("value", 1.0),
    tok('":"', 1.0),
    tok("Yes", 0.7, ("Yes", 0.7), ("No", 0.2), ("Maybe", 0.05)),
    tok('"}', 1.0),
]


def openai(base: str) -> allama.HttpProvider:
    return allama.provider("openai", api_key="sk-test", base_url=base)


def question(model: str = "gpt-4o-mini") -> ChatRequest:
    return ChatRequest(model).system("You check facts.").user("Is the sky blue?")


def test_a_yes_no_question_on_openai_is_an_exact_wrapped_enum_with_probabilities(
    server: _Server,
) -> None:
    base = script(server, completion('{"value":"Yes"}', YES_WRAPPED))
    decision = allama.decide(openai(base), bool, question())
    assert decision.value is True and decision.abstained is False
    assert decision.probabilities == pytest.approx({True: 0.7, False: 0.2})
    # "Maybe" is no option; 5% was not listed: any option may be higher by that much.
    assert decision.unresolved == pytest.approx(0.05)
    assert decision.probability == pytest.approx(0.7)
    assert decision.confidence == pytest.approx(0.7 / 0.9)
    assert decision.confidence_bounds() == pytest.approx((0.7 / 0.95, 0.75 / 0.95))
    assert decision.probabilities_missing is None
    metadata = decision.metadata
    assert metadata.mode is ExtractionMode.NATIVE and metadata.passes == 1
    assert metadata.enforcement is SchemaEnforcement.EXACT and metadata.root_wrapped is True
    (body,) = sent(server, base)
    assert body["logprobs"] is True and body["top_logprobs"] == 20
    schema = body["response_format"]["json_schema"]
    assert body["response_format"]["type"] == "json_schema" and schema["strict"] is True
    assert schema["schema"]["properties"]["value"]["enum"] == ["Yes", "No"]
    assert body["messages"] == [
        {"role": "system", "content": "You check facts."},
        {
            "role": "system",
            "content": "Choose exactly one of the options below.\n\nOptions:\n- Yes\n- No",
        },
        {"role": "user", "content": "Is the sky blue?"},
    ]
    assert repr(decision) == (
        "Decision(value=True, confidence=0.778, mode='native', enforcement='exact', passes=1)"
    )


def test_the_async_twin_decides_the_same(server: _Server) -> None:
    base = script(server, completion('{"value":"Yes"}', YES_WRAPPED))
    decision = asyncio.run(allama.adecide(openai(base), bool, question()))
    assert decision.value is True
    assert decision.probabilities == pytest.approx({True: 0.7, False: 0.2})


CITY = Literal["New York", "New Jersey", "Boston"]


def city_tokens(jersey_listed: bool) -> list[dict[str, Any]]:
    second = [(" York", 0.7), (" Y", 0.02)]
    if jersey_listed:
        second.insert(1, (" Jersey", 0.25))
    return [
        tok('"', 1.0),
        tok("New", 0.9, ("New", 0.9), ("Boston", 0.06), ("Bos", 0.01)),
        tok(" York", 0.7, *second),
        tok('"', 1.0),
    ]


def test_multi_token_options_sharing_a_first_token_follow_each_branch(server: _Server) -> None:
    # vLLM takes a string at the root of a schema: the answer is a bare JSON string.
    base = script(server, completion('"New York"', city_tokens(jersey_listed=True)))
    provider = allama.provider("vllm", base_url=base)
    decision = allama.decide(provider, CITY, ChatRequest("m").user("Where is Manhattan?"))
    assert decision.value == "New York"
    # vLLM does not say what it enforces (approximate): a branch is an option's only once
    # its string has closed. New York: "New", " York", then the quote (0.9 * 0.7); " Y",
    # " Jersey", "Boston" and "Bos" may each go on as no option: unresolved.
    assert decision.metadata.enforcement.value == "approximate"
    assert decision.probabilities == pytest.approx(
        {"New York": 0.9 * 0.7, "New Jersey": 0.0, "Boston": 0.0}
    )
    assert decision.unresolved == pytest.approx(0.07 + 0.03 + 0.9 * (0.02 + 0.25 + 0.03))
    assert sum(decision.probabilities.values()) <= 1.0
    assert decision.metadata.root_wrapped is False
    (body,) = sent(server, base)
    assert body["response_format"]["json_schema"]["schema"]["enum"] == list(CITY.__args__)


def test_an_option_whose_branch_was_not_listed_has_no_confidence_only_bounds(
    server: _Server,
) -> None:
    base = script(server, completion('"New York"', city_tokens(jersey_listed=False)))
    provider = allama.provider("vllm", base_url=base)
    decision = allama.decide(provider, CITY, ChatRequest("m").user("Where is Manhattan?"))
    # Not held exactly (approximate): only New York's closed string is measured.
    assert decision.probabilities == pytest.approx(
        {"New York": 0.9 * 0.7, "New Jersey": 0.0, "Boston": 0.0}
    )
    unresolved = 0.07 + 0.03 + 0.9 * 0.30
    assert decision.unresolved == pytest.approx(unresolved)
    assert decision.unlisted == frozenset({"New Jersey", "Boston"})
    assert decision.confidence is None
    total = 0.9 * 0.7 + unresolved
    assert decision.confidence_bounds() == pytest.approx(
        (0.9 * 0.7 / total, (0.9 * 0.7 + unresolved) / total)
    )


def test_a_model_without_log_probabilities_is_not_asked_and_says_why(server: _Server) -> None:
    base = script(server, completion('{"value":"No"}', None))
    decision = allama.decide(openai(base), bool, question("gpt-5-mini"))
    assert decision.value is False
    assert decision.probabilities is None and decision.confidence is None
    assert decision.probabilities_missing == "`gpt-5-mini` on openai reports no log-probabilities"
    (body,) = sent(server, base)
    assert "logprobs" not in body and "top_logprobs" not in body


def test_insisting_on_probabilities_where_there_are_none_fails_before_sending(
    server: _Server,
) -> None:
    base = script(server)
    with pytest.raises(UnsupportedError) as caught:
        allama.decide(openai(base), bool, question("gpt-5-mini"), probabilities=True)
    assert caught.value.field is RequestField.LOGPROBS
    assert caught.value.stage is UnsupportedStage.BEFORE_SENDING
    assert sent(server, base) == []


def test_probabilities_false_never_asks(server: _Server) -> None:
    base = script(server, completion('{"value":"Yes"}', None))
    decision = allama.decide(openai(base), bool, question(), probabilities=False)
    assert decision.probabilities is None
    assert decision.probabilities_missing == "not asked for (probabilities=False)"
    assert "logprobs" not in sent(server, base)[0]


def test_an_endpoint_that_refuses_log_probabilities_is_asked_again_without(
    server: _Server,
) -> None:
    refused = (
        400,
        {"error": {"message": "logprobs is not supported for this model", "type": "invalid"}},
    )
    base = script(server, refused, completion('{"value": "Yes"}', None))
    provider = allama.provider("openai-compatible", base_url=base)
    decision = allama.decide(provider, bool, ChatRequest("m").user("Is the sky blue?"))
    assert decision.value is True and decision.metadata.passes == 1
    assert decision.probabilities is None
    assert decision.probabilities_missing == (
        "openai-compatible refused log-probabilities for this model; the decision was asked "
        "again without them"
    )
    first, second = sent(server, base)
    assert first["logprobs"] is True and "logprobs" not in second


def test_forced_tool_decisions_have_no_probabilities(server: _Server) -> None:
    call = {
        "id": "call_1",
        "type": "function",
        "function": {"name": EXTRACTION_TOOL, "arguments": '{"value":"No"}'},
    }
    reply = completion("", None)
    reply[1]["choices"][0]["message"] = {"role": "assistant", "content": None, "tool_calls": [call]}
    reply[1]["choices"][0]["finish_reason"] = "tool_calls"
    base = script(server, reply)
    request = question().with_option(ExtractionMode.FORCED_TOOL)
    decision = allama.decide(openai(base), bool, request)
    assert decision.value is False
    assert decision.metadata.mode is ExtractionMode.FORCED_TOOL
    assert decision.probabilities_missing == (
        "the answer came as a tool call, whose arguments have no log-probabilities"
    )
    (body,) = sent(server, base)
    assert "logprobs" not in body
    assert body["tools"][0]["function"]["parameters"]["properties"]["value"]["enum"] == [
        "Yes",
        "No",
    ]


def test_an_answer_outside_the_options_is_never_returned(server: _Server) -> None:
    # An endpoint that does not enforce the schema answers something else.
    base = script(server, completion('{"value": "Perhaps"}', None))
    provider = allama.provider("openai-compatible", base_url=base)
    with pytest.raises(ParseError) as caught:
        allama.decide(provider, bool, ChatRequest("m").user("Is the sky blue?"))
    assert caught.value.metadata.passes == 1
    assert caught.value.response is not None


class Ticket(enum.Enum):
    BILLING = "billing"
    """Invoices, charges and refunds."""
    TECHNICAL = "technical"
    """Something does not work."""


def llama_tok(token: str, p: float, *top: tuple[str, float]) -> dict[str, Any]:
    """A token as llama.cpp's server reports it: with its id."""
    return {**tok(token, p, *top), "id": abs(hash(token)) % 50000}


def test_llama_cpp_answers_a_grammar_of_the_options_and_may_abstain(server: _Server) -> None:
    tokens = [
        llama_tok("none", 0.6, ("none", 0.6), ("billing", 0.1), ("tech", 0.05), ("The", 0.2)),
        llama_tok(" of", 0.99),
        llama_tok(" these", 0.99),
        llama_tok("", 0.9),  # the end of generation, as llama.cpp lists it
    ]
    base = script(server, completion("none of these", tokens))
    provider = allama.provider("llama-cpp", base_url=base)
    request = ChatRequest("m").user("My cat is sick.")
    decision = allama.decide(provider, Ticket, request, allow_abstain=True)
    assert decision.value is None and decision.abstained is True
    assert decision.probabilities == pytest.approx(
        {Ticket.BILLING: 0.1, Ticket.TECHNICAL: 0.05, None: 0.6}
    )
    assert decision.confidence == pytest.approx(0.6 / 0.75)
    assert decision.metadata.enforcement is SchemaEnforcement.EXACT
    (body,) = sent(server, base)
    assert body["grammar"] == 'root ::= "billing" | "technical" | "none of these"'
    assert "response_format" not in body
    assert body["messages"][0] == {
        "role": "system",
        "content": (
            "Answer with exactly one of the options below, written exactly as it is listed, "
            "and nothing else.\n\nOptions:\n"
            "- billing: Invoices, charges and refunds.\n"
            "- technical: Something does not work.\n"
            "- none of these: none of the other options fits"
        ),
    }


def test_descriptions_passed_in_go_to_the_model(server: _Server) -> None:
    base = script(server, completion("billing", None))
    provider = allama.provider("llama-cpp", base_url=base)
    allama.decide(
        provider,
        Ticket,
        ChatRequest("m").user("I was charged twice."),
        descriptions={Ticket.TECHNICAL: "Bugs and outages", "billing": "Money matters"},
    )
    (body,) = sent(server, base)
    assert body["messages"][0]["content"].endswith(
        "- billing: Money matters\n- technical: Bugs and outages"
    )


def prompt_only(*answers: str) -> MockProvider:
    """A provider with neither structured output nor tools: the prompt is all there is."""
    provider = MockProvider(list(answers))
    for capability in (
        ChatCapability.STRUCTURED_OUTPUT,
        ChatCapability.TOOL_CALLS,
        ChatCapability.FORCED_TOOL_CHOICE,
        ChatCapability.CHOICE_OUTPUT,
    ):
        provider = provider.with_chat_capability(capability, CapabilitySupport.UNSUPPORTED)
    return provider


def test_with_nothing_to_hold_the_answer_the_options_go_in_the_prompt_not_enforced() -> None:
    provider = prompt_only("No")
    decision = allama.decide(provider, bool, ChatRequest("m").user("Is fire cold?"))
    assert decision.value is False
    assert decision.metadata.enforcement is SchemaEnforcement.NOT_ENFORCED
    assert [w.message for w in decision.metadata.degradations] == [
        "mock has neither structured output nor a forced tool for `m`: the options of bool "
        "were given in the prompt only"
    ]


def test_an_answer_outside_the_options_is_retried_when_asked_and_each_pass_counted() -> None:
    with pytest.raises(ParseError, match="the answer is not one of the options of bool"):
        allama.decide(prompt_only("Perhaps"), bool, ChatRequest("m").user("Is fire cold?"))
    provider = prompt_only("Perhaps", "No")
    decision = Extractor(retries=1).decide(provider, bool, ChatRequest("m").user("Is fire cold?"))
    assert decision.value is False and decision.metadata.passes == 2
    retry = provider.requests[1].messages[-1]
    assert retry.text() == (
        "That is not one of the options. Answer with exactly one of: Yes, No. "
        "Write the option alone."
    )


def test_repair_matches_an_option_written_loosely() -> None:
    decision = Extractor(repair=True).decide(
        prompt_only("**no.**"), bool, ChatRequest("m").user("Is fire cold?")
    )
    assert decision.value is False and decision.metadata.repaired is True


def test_a_floor_the_prompt_cannot_meet_fails_before_sending() -> None:
    provider = prompt_only("No")
    with pytest.raises(EnforcementBelowError):
        Extractor(min_enforcement="exact").decide(provider, bool, ChatRequest("m").user("?"))
    assert provider.call_count == 0


def test_the_test_provider_answers_a_decision_with_its_first_option() -> None:
    decision = allama.decide(allama.mock.TestProvider(), Ticket, ChatRequest("m").user("?"))
    assert decision.value is Ticket.BILLING
    assert decision.probabilities_missing == "the provider returned no log-probabilities"


class _Grade(enum.IntEnum):
    LOW = 1
    HIGH = 2


@pytest.mark.parametrize(
    ("tp", "message"),
    [
        (int, r"decide\(\) takes an Enum, a Literal\[...\] or bool"),
        (Literal[1, "1"], "has two options written `1`"),
        (Literal[b"x"], "takes str, int, bool and Enum members, not bytes"),
        # Options equal in Python: one key of `probabilities` held both (the chosen option
        # given the other's figure, confidence 1.0), and `value == 1` for either.
        (Literal[1, True], r"two options equal in Python \(1 == True\)"),
        (Literal[_Grade.LOW, 1], r"equal in Python \(<_Grade.LOW: 1> == 1\)"),
        # Equal once an answer is read trimmed: `yes` was given for ` yes`, written exactly.
        (Literal["yes", " yes"], "written `yes` and ` yes` .* read without the space at its"),
    ],
)
def test_types_that_are_not_choices_are_refused_at_the_call(tp: Any, message: str) -> None:
    with pytest.raises((TypeError, ValueError), match=message):
        allama.decide(prompt_only("x"), tp, ChatRequest("m").user("?"))


class _Spaced(enum.Enum):
    A = "A "
    B = "B"


def test_a_label_with_space_at_its_end_is_read_as_the_grammar_wrote_it(server: _Server) -> None:
    # llama.cpp's grammar holds the answer to `A ` exactly; the answer was refused as no
    # option (read trimmed, as `A`), and paid for.
    tokens = [llama_tok("A", 0.7, ("A", 0.7), ("B", 0.2)), llama_tok(" ", 1.0), llama_tok("", 1.0)]
    base = script(server, completion("A ", tokens))
    provider = allama.provider("llama-cpp", base_url=base)
    decision = allama.decide(provider, _Spaced, ChatRequest("m").user("?"))
    assert decision.value is _Spaced.A
    assert decision.probabilities == pytest.approx({_Spaced.A: 0.7, _Spaced.B: 0.2})
    (body,) = sent(server, base)
    assert body["grammar"] == 'root ::= "A " | "B"'
    # A provider that writes it without the space (a prompt alone): read trimmed.
    assert allama.decide(prompt_only("A"), _Spaced, ChatRequest("m").user("?")).value is _Spaced.A


class _Perm(enum.Flag):
    NONE = 0
    READ = 1
    WRITE = 2
    ALL = READ | WRITE
    EVERYTHING = ALL  # an alias: one option


def test_every_named_member_of_a_flag_is_an_option(server: _Server) -> None:
    # Iterating a Flag leaves out `0` and members that combine others: `ALL` could not be
    # chosen, and nothing said so.
    base = script(server, completion("ALL", None))
    provider = allama.provider("llama-cpp", base_url=base)
    assert allama.decide(provider, _Perm, ChatRequest("m").user("?")).value is _Perm.ALL
    (body,) = sent(server, base)
    assert body["grammar"] == 'root ::= "NONE" | "READ" | "WRITE" | "ALL"'


def test_an_option_listed_at_no_probability_leaves_the_confidence_measured(
    server: _Server,
) -> None:
    # OpenAI lists `No` at -9999: listed, so every option had a branch; the confidence was
    # `None`, as for an option the list never reached.
    listed = tok('{"', 1.0), tok("value", 1.0), tok('":"', 1.0)
    yes = {**tok("Yes", 0.97, ("Yes", 0.97)), "top_logprobs": [alt("Yes", 0.97)]}
    yes["top_logprobs"].append({"token": "No", "logprob": -9999.0, "bytes": list(b"No")})
    base = script(server, completion('{"value":"Yes"}', [*listed, yes, tok('"}', 1.0)]))
    decision = allama.decide(openai(base), bool, question())
    assert decision.probabilities == {True: pytest.approx(0.97), False: 0.0}
    assert decision.unlisted == frozenset() and decision.confidence == pytest.approx(1.0)
    # Not listed at all: no measure of it, and no confidence.
    base = script(
        server,
        completion(
            '{"value":"Yes"}', [*YES_WRAPPED[:3], tok("Yes", 0.97, ("Yes", 0.97)), tok('"}', 1.0)]
        ),
    )
    decision = allama.decide(openai(base), bool, question())
    assert decision.unlisted == frozenset({False}) and decision.confidence is None
    assert decision.confidence_bounds() == pytest.approx((0.97 / 1.0, 1.0))


def test_a_literal_of_many_options_is_named_short_in_what_is_said(server: _Server) -> None:
    many = Literal[tuple(f"option-{n}" for n in range(1200))]  # type: ignore[valid-type]
    with pytest.raises(ValueError) as refused:
        allama.decide(prompt_only("x"), many, ChatRequest("m").user("?"), descriptions={"z": "?"})
    assert "Literal['option-0', 'option-1'," in str(refused.value)
    assert "... 1200 options]" in str(refused.value) and len(str(refused.value)) < 200


# The other dialects that report log-probabilities, each in its own shape.


def test_gemini_answers_text_x_enum_with_its_logprobs_result(server: _Server) -> None:
    def candidate(token: str, p: float) -> dict[str, Any]:
        return {"token": token, "tokenId": len(token), "logProbability": math.log(p)}

    body = {
        "candidates": [
            {
                "content": {"role": "model", "parts": [{"text": "Positive"}]},
                "finishReason": "STOP",
                "logprobsResult": {
                    "chosenCandidates": [candidate("Positive", 0.8)],
                    "topCandidates": [
                        {"candidates": [candidate("Positive", 0.8), candidate("Negative", 0.15)]}
                    ],
                },
            }
        ],
        "usageMetadata": {"promptTokenCount": 30, "candidatesTokenCount": 1},
        "modelVersion": "gemini-2.0-flash",
    }
    base = script(server, (200, body))
    provider = allama.provider("gemini", api_key="k", base_url=base)
    sentiment = Literal["Positive", "Negative"]
    decision = allama.decide(provider, sentiment, ChatRequest("gemini-2.0-flash").user("Great!"))
    assert decision.value == "Positive"
    assert decision.probabilities == pytest.approx({"Positive": 0.8, "Negative": 0.15})
    assert decision.unresolved == pytest.approx(0.05)
    assert decision.metadata.enforcement is SchemaEnforcement.EXACT
    (sent_body,) = sent(server, base)
    config = sent_body["generationConfig"]
    assert config["responseMimeType"] == "text/x.enum"
    assert config["responseSchema"] == {"type": "STRING", "enum": ["Positive", "Negative"]}
    assert config["responseLogprobs"] is True and config["logprobs"] == 20


def test_ollama_native_reports_the_answer_tokens_logprobs(server: _Server) -> None:
    # Ollama's `format` takes a string at the root: the answer is a bare JSON string.
    tokens = [tok('"', 1.0), tok("No", 0.6, ("No", 0.6), ("Yes", 0.3)), tok('"', 1.0)]
    body = {
        "model": "llama3.2",
        "created_at": "2026-12-01T10:00:00Z",
        "message": {"role": "assistant", "content": '"No"'},
        "done": True,
        "done_reason": "stop",
        "prompt_eval_count": 20,
        "eval_count": 6,
        "logprobs": tokens,
    }
    base = script(server, (200, body))
    provider = allama.provider("ollama", base_url=base)
    decision = allama.decide(provider, bool, ChatRequest("llama3.2").user("Is fire cold?"))
    assert decision.value is False
    # Ollama does not say what it enforces (approximate): `Yes` never closed its string.
    assert decision.probabilities == pytest.approx({True: 0.0, False: 0.6})
    assert decision.unresolved == pytest.approx(0.4)
    (sent_body,) = sent(server, base)
    assert sent_body["logprobs"] is True and sent_body["top_logprobs"] == 20


def test_the_responses_api_reports_output_text_logprobs(server: _Server) -> None:
    text = '{"value":"Yes"}'
    body = {
        "id": "resp_1",
        "object": "response",
        "status": "completed",
        "model": "gpt-4.1-mini",
        "output": [
            {
                "type": "message",
                "id": "msg_1",
                "role": "assistant",
                "status": "completed",
                "content": [
                    {
                        "type": "output_text",
                        "text": text,
                        "annotations": [],
                        "logprobs": YES_WRAPPED,
                    }
                ],
            }
        ],
        "usage": {"input_tokens": 40, "output_tokens": 5, "total_tokens": 45},
    }
    base = script(server, (200, body))
    provider = allama.provider("openai", api="responses", api_key="k", base_url=base)
    decision = allama.decide(provider, bool, question("gpt-4.1-mini"))
    assert decision.value is True
    assert decision.probabilities == pytest.approx({True: 0.7, False: 0.2})
    (sent_body,) = sent(server, base)
    assert "message.output_text.logprobs" in sent_body["include"]
    assert sent_body["top_logprobs"] == 20


def _paid(provider: str, tokens: int) -> allama.ServerError:
    """A failure that reported the tokens it was paid for (a choice's error in a 200)."""
    from allama.errors import REPORTED_USAGE_KEY

    error = allama.ServerError("upstream failed").with_provider(provider).with_model("gpt-4o")
    return error.with_metadata(REPORTED_USAGE_KEY, {"input_tokens": tokens, "output_tokens": 1})


def _choosing(script: list[Any], name: str = "a") -> MockProvider:
    provider = MockProvider(script, name=name)
    return provider.with_supported_chat_capabilities([ChatCapability.CHOICE_OUTPUT])


def _retrying(inner: allama.ChatProvider, attempts: int = 3) -> allama.ChatProvider:
    from allama.wrappers import RetryingProvider, RetryPolicy

    return RetryingProvider(inner, RetryPolicy(max_attempts=attempts), sleep=lambda _: None)


YesNo = Literal["yes", "no"]
_ASKED = allama.ChatRequest("gpt-4o").user("Is it?")


def test_a_decision_that_fails_counts_what_its_calls_paid() -> None:
    from allama.wrappers import FailoverProvider

    def usage_of_failure(provider: allama.ChatProvider) -> Any:
        with pytest.raises(allama.ServerError) as caught:
            allama.decide(provider, YesNo, _ASKED)
        record = allama.ExtractionMetadata.from_error(caught.value)
        assert record is not None and record.passes == 0
        return record.usage

    assert usage_of_failure(_choosing([_paid("a", 100)])) == allama.Usage(
        input_tokens=100, output_tokens=1
    )
    retried = _retrying(_choosing([_paid("a", 100), _paid("a", 200)]), attempts=2)
    assert usage_of_failure(retried) == allama.Usage(input_tokens=300, output_tokens=2)
    both = FailoverProvider([_choosing([_paid("a", 100)]), _choosing([_paid("b", 200)], "b")])
    assert usage_of_failure(both) == allama.Usage(input_tokens=300, output_tokens=2)


def test_a_decision_asked_again_without_log_probabilities_counts_what_the_refusal_paid() -> None:
    from allama.mock import ChatResponseBuilder, Structured

    # A retry pays for a failed call, then the provider refuses log-probabilities and the
    # retry gives up on that: the decision asks again without them, and counts all three.
    def refused() -> allama.InvalidRequestError:
        return allama.InvalidRequestError("logprobs are not supported for this model")

    answer = ChatResponseBuilder().text("yes").usage(10, 1).model("gpt-4o").build()
    chosen = allama.decide(
        _retrying(_choosing([_paid("a", 100), refused(), answer])), YesNo, _ASKED
    )
    assert chosen.metadata.usage == allama.Usage(input_tokens=110, output_tokens=2)
    assert chosen.probabilities_missing is not None

    yes = Structured("yes", usage=allama.Usage(input_tokens=10, output_tokens=1))
    script: list[Any] = [_paid("a", 100), refused(), yes]
    chosen = allama.decide(_retrying(MockProvider(script, name="a")), YesNo, _ASKED)
    assert chosen.metadata.usage == allama.Usage(input_tokens=110, output_tokens=2)


def test_log_probabilities_refused_by_a_provider_a_failed_backup_hides_are_dropped() -> None:
    # The first provider refuses them for free, the backup (tried, with
    # `failover_on_unsupported`) is down: the decision asks again without them, and the
    # first answers; the reason names the provider that refused.
    from allama.wrappers import FailoverProvider

    class Colour(enum.Enum):
        RED = "red"
        GREEN = "green"

    refused = allama.UnsupportedError("no log-probabilities", field=RequestField.LOGPROBS)
    first = MockProvider([refused.mark_authored(), '"green"'], name="a")
    first.with_supported_chat_capabilities(
        [ChatCapability.STRUCTURED_OUTPUT, ChatCapability.LOGPROBS]
    )
    backup = MockProvider([allama.ServerError("down").with_status(500)], name="b")
    failover = FailoverProvider([first, backup], failover_on_unsupported=True)
    chosen = allama.decide(failover, Colour, allama.ChatRequest("m").user("Grass?"))
    assert chosen.value is Colour.GREEN
    assert chosen.probabilities_missing == (
        "a refused log-probabilities for this model; the decision was asked again without them"
    )
    assert (first.call_count, backup.call_count) == (2, 1)


def test_log_probabilities_an_adapter_did_not_ask_for_say_why() -> None:
    # A provider failed over to has none: its adapter left them out with a warning, which
    # is the reason, not "returned none".
    from allama.mock import ChatResponseBuilder
    from allama.types import Warning as ProviderWarning

    why = "`mistral-large-latest` on Mistral reports no log-probabilities"
    answer = (
        ChatResponseBuilder()
        .text('"yes"')
        .warning(ProviderWarning.unsupported(RequestField.LOGPROBS, why))
        .build()
    )
    provider = MockProvider([answer], name="m")
    provider.with_supported_chat_capabilities(
        [ChatCapability.STRUCTURED_OUTPUT, ChatCapability.LOGPROBS]
    )
    chosen = allama.decide(provider, YesNo, allama.ChatRequest("m").user("Is it?"))
    assert chosen.probabilities_missing == why
    plain = MockProvider(['"yes"'], name="m")
    plain.with_supported_chat_capabilities(
        [ChatCapability.STRUCTURED_OUTPUT, ChatCapability.LOGPROBS]
    )
    chosen = allama.decide(plain, YesNo, allama.ChatRequest("m").user("Is it?"))
    assert chosen.probabilities_missing == "the provider returned no log-probabilities"
