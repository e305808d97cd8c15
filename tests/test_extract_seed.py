"""Seed 000's extraction tests, ported one for one (the streamed ones are in
`test_extract_seed_streams.py`).

Each Python test is the seed's test of the same name, prefixed `test_`, with the same
assertions. A seed test that is `async` runs twice here, through the `run` fixture: with the
sync API and with the async one.

Adapted where Python differs: pydantic models for serde types (`u8` is `Field(ge=0, le=255)`,
`u32` is `Field(ge=0)`, `Option<T>` is `T | None = None`, `#[serde(default)]` a default);
serde's `expected u32` is our `expected an integer`; an error's serde `type` tag is our
`kind`; an untagged serde enum is a `left_to_right` union (serde tries the variants in
order); a flattened serde map is `extra="allow"`; serde's `Error::Serialization`, an error
without a context, is a foreign exception raised by the provider, which carries no record.

Left out: none. `enforcement_is_a_warning_event_once_per_type_and_model` (behind a cargo
feature in the seed) is checked against the `allama.extraction` logger with `caplog`.
"""

from __future__ import annotations

import json
import logging
import uuid
from enum import StrEnum
from typing import Annotated, Any

import pytest
from pydantic import BaseModel, ConfigDict, Field, TypeAdapter

import allama
from _seed_support import (
    FORCED,
    NATIVE,
    NATIVE_AND_TOOLS,
    Person,
    Run,
    alice,
    alice_call,
    approximated,
    failure,
    forced_request,
    native_request,
    rate_limited,
    refusal_record,
    refused,
    request,
    retry_feedback,
    strict_dropped,
    text_with_usage,
    unsupported_field,
)
from allama import (
    AssistantMessage,
    AuthenticationError,
    AutoFallback,
    CapabilitySupport,
    ChatCapability,
    ChatRequest,
    ChatResponse,
    ChatValidation,
    EnforcementBelowError,
    Error,
    ExtractionMetadata,
    ExtractionMode,
    Extractor,
    FieldSubject,
    FinishReason,
    MessageOrigin,
    MissingStructuredTextError,
    MissingToolCallError,
    ModeUnsupportedError,
    ParseError,
    RateLimitedError,
    RefusalSource,
    RefusedError,
    RequestField,
    RequestTimeoutError,
    SchemaEnforcement,
    ToolChoice,
    ToolConflictError,
    ToolDefinition,
    ToolMessage,
    TruncatedError,
    UnsupportedError,
    UnsupportedPolicy,
    UnsupportedStage,
    Usage,
    UserMessage,
    ValidationCoverage,
    Warning,
    WarningKind,
)
from allama.extract import EXTRACTION_TOOL, repair_candidate
from allama.mock import ChatResponseBuilder, FunctionProvider, MockProvider, TestProvider
from allama.stream import AsyncChatStream, ChatStream
from allama.types import DECLINE_EXPLANATION_KEY, TextPart
from allama.wrappers import RetryingProvider, RetryPolicy


class Category(StrEnum):
    BILLING = "billing"
    BUG = "bug"


class Triage(BaseModel):
    category: Category
    urgent: bool
    age: Annotated[int, Field(ge=0, le=255)]


def test_extract_works_against_the_test_provider_in_every_mode(run: Run) -> None:
    """The mock the docs recommend for handler tests answers an extraction in every mode."""
    provider = TestProvider()
    for mode in (ExtractionMode.AUTO, NATIVE, FORCED):
        req = ChatRequest("m").user("My invoice is wrong").with_option(mode)
        extracted = run.extract(provider, Triage, req)
        assert extracted.value == Triage(category=Category.BILLING, urgent=True, age=0), mode
        expected = FORCED if mode is FORCED else NATIVE
        assert extracted.metadata.mode is expected

    stream = run.stream(provider, Triage, ChatRequest("m").user("My invoice is wrong"))
    stream.drain()
    assert stream.finish().value.category is Category.BILLING


def test_native_mode_uses_json_schema(run: Run) -> None:
    provider = MockProvider.with_text('{"name":"Alice","age":31}').with_chat_capability(
        ChatCapability.STRUCTURED_OUTPUT, CapabilitySupport.SUPPORTED
    )
    extracted = run.extract(provider, Person, request())
    assert extracted.value == alice()
    assert extracted.metadata == ExtractionMetadata(
        mode=NATIVE,
        passes=1,
        repaired=False,
        enforcement=SchemaEnforcement.EXACT,
        degradations=[],
        usage=None,
        auto_fallback=None,
        undeclared_key_rejections=0,
    )
    sent = provider.last_request
    assert sent is not None and sent.response_format is not None
    assert sent.response_format.type == "json_schema"
    assert sent.response_format.name == "person"
    assert sent.response_format.strict is True


def test_auto_picks_forced_tool_without_structured_output(run: Run) -> None:
    """Tier 2: verified tool answers beat a guess at native output."""
    provider = MockProvider.with_tool_call(
        "c", EXTRACTION_TOOL, alice_call()
    ).with_supported_chat_capabilities(
        [ChatCapability.TOOL_CALLS, ChatCapability.FORCED_TOOL_CHOICE]
    )
    extracted = run.extract(provider, Person, request())
    assert extracted.metadata.mode is FORCED
    sent = provider.last_request
    assert sent is not None
    assert sent.tool_choice == ToolChoice.tool(EXTRACTION_TOOL)
    assert sent.option(ExtractionMode) is None


def _upstream_refusal() -> UnsupportedError:
    return UnsupportedError(
        "HTTP 400: the model does not support `response_format`",
        field=RequestField.RESPONSE_FORMAT,
        stage=UnsupportedStage.PROVIDER,
    ).mark_authored()


def test_a_guessed_native_mode_falls_back_on_the_providers_refusal(run: Run) -> None:
    """When Auto only guessed native output from an UNKNOWN answer, the provider's own refusal
    of the response format (a 4xx, nothing to bill) also falls back; after a verified
    SUPPORTED it does not."""
    unknown = (
        MockProvider(
            [
                _upstream_refusal(),
                ChatResponseBuilder().tool_call("c", EXTRACTION_TOOL, alice_call()).build(),
            ]
        )
        .with_chat_capability(ChatCapability.STRUCTURED_OUTPUT, CapabilitySupport.UNKNOWN)
        .with_chat_capability(ChatCapability.TOOL_CALLS, CapabilitySupport.UNKNOWN)
        .with_chat_capability(ChatCapability.FORCED_TOOL_CHOICE, CapabilitySupport.UNKNOWN)
    )
    extracted = run.extract(unknown, Person, request())
    assert extracted.metadata.mode is FORCED
    fallback = extracted.metadata.auto_fallback
    assert fallback is not None
    assert fallback.stage is UnsupportedStage.PROVIDER
    assert fallback.field is RequestField.RESPONSE_FORMAT

    verified = MockProvider(
        [
            _upstream_refusal(),
            ChatResponseBuilder().tool_call("c", EXTRACTION_TOOL, alice_call()).build(),
        ]
    ).with_supported_chat_capabilities(NATIVE_AND_TOOLS)
    err = run.fails(verified, Person, request())
    assert isinstance(err, UnsupportedError)
    assert err.stage is UnsupportedStage.PROVIDER
    assert verified.call_count == 1


def _alice_tool_response() -> ChatResponse:
    return ChatResponseBuilder().tool_call("c", EXTRACTION_TOOL, alice_call()).build()


def test_auto_retries_a_refused_response_format_in_forced_tool_mode(run: Run) -> None:
    provider = MockProvider(
        [refused(RequestField.RESPONSE_FORMAT), _alice_tool_response()]
    ).with_supported_chat_capabilities(NATIVE_AND_TOOLS)
    extracted = run.extract(provider, Person, request())
    assert extracted.value == alice()
    assert extracted.metadata == ExtractionMetadata(
        mode=FORCED,
        passes=1,
        repaired=False,
        # The switch adds no degradation; the forced-tool pass reported none.
        enforcement=SchemaEnforcement.EXACT,
        degradations=[],
        usage=None,
        auto_fallback=refusal_record(),
        undeclared_key_rejections=0,
    )
    native, forced = provider.requests
    assert native.response_format is not None
    assert native.tools == ()
    assert forced.response_format is None
    assert forced.tool_choice == ToolChoice.tool(EXTRACTION_TOOL)


def test_only_a_refused_response_format_falls_back_and_only_from_auto(run: Run) -> None:
    cases: list[tuple[ChatRequest, Any]] = [
        # An explicit mode is the caller's choice.
        (native_request(), lambda: refused(RequestField.RESPONSE_FORMAT)),
        # A refusal of another field, or one that names none (an upstream reply mapped to
        # `unsupported`), is not about native output.
        (request(), lambda: refused(RequestField.TEMPERATURE)),
        (request(), lambda: UnsupportedError("HTTP 400", stage=UnsupportedStage.PROVIDER)),
        (request(), rate_limited),
        # The provider refused the response format it received: the call was sent, so Auto
        # does not double-bill by retrying it.
        (
            request(),
            lambda: UnsupportedError(
                "HTTP 400", field=RequestField.RESPONSE_FORMAT, stage=UnsupportedStage.PROVIDER
            ),
        ),
    ]
    for req, make_error in cases:
        error = make_error()
        provider = MockProvider(
            [make_error(), _alice_tool_response()]
        ).with_supported_chat_capabilities(NATIVE_AND_TOOLS)
        err = run.fails(provider, Person, req)
        assert err.kind == error.kind, repr(err)
        assert unsupported_field(err) == unsupported_field(error)
        record = ExtractionMetadata.from_error(err)
        assert record is not None
        assert record.mode is NATIVE
        assert record.auto_fallback is None
        assert provider.call_count == 1, repr(error)


def test_a_refusal_after_a_pass_does_not_switch_modes(run: Run) -> None:
    provider = MockProvider(
        ["not json", refused(RequestField.RESPONSE_FORMAT)]
    ).with_supported_chat_capabilities(NATIVE_AND_TOOLS)
    err = run.fails(provider, Person, request(), Extractor(retries=1))
    assert unsupported_field(err) is RequestField.RESPONSE_FORMAT
    record = ExtractionMetadata.from_error(err)
    assert record is not None
    assert (record.mode, record.passes) == (NATIVE, 1)
    assert record.auto_fallback is None


def test_a_refusal_ending_a_fallback_chain_falls_back(run: Run) -> None:
    chained = refused(RequestField.RESPONSE_FORMAT).with_fallback_from(rate_limited())
    provider = MockProvider([chained, _alice_tool_response()]).with_supported_chat_capabilities(
        NATIVE_AND_TOOLS
    )
    extracted = run.extract(provider, Person, request())
    assert extracted.metadata.mode is FORCED
    assert extracted.metadata.auto_fallback == refusal_record()


def test_a_failed_forced_tool_attempt_reports_the_native_refusal_first(run: Run) -> None:
    provider = MockProvider(
        [refused(RequestField.RESPONSE_FORMAT), refused(RequestField.TOOLS)]
    ).with_supported_chat_capabilities(NATIVE_AND_TOOLS)
    err = run.fails(provider, Person, request())
    # The native refusal is the primary cause, in terms of the type.
    assert unsupported_field(err) is RequestField.RESPONSE_FORMAT
    assert err.message == (
        "`Person` cannot be extracted from `m` with its output constrained: "
        "native output was refused (cannot send `response_format`: map-typed properties "
        "cannot be expressed), "
        "and forced-tool mode was refused too (cannot send `tools`: map-typed properties "
        "cannot be expressed)"
    )
    assert EXTRACTION_TOOL not in err.message
    record = ExtractionMetadata.from_error(err)
    assert record is not None
    assert (record.mode, record.passes) == (FORCED, 0)
    assert record.auto_fallback == refusal_record()
    assert provider.call_count == 2


def test_request_tools_conflict_in_every_mode(run: Run) -> None:
    """A request with tools of its own is refused the same way in every mode, before anything
    is sent, so the same code does not work on one provider and fail on another."""
    with_tools = request().with_tools([ToolDefinition(name="other", parameters={"type": "object"})])
    for mode in (None, NATIVE, FORCED):
        for capabilities in (NATIVE_AND_TOOLS, (ChatCapability.TOOL_CALLS,)):
            provider = MockProvider.with_text(
                '{"name":"Alice","age":31}'
            ).with_supported_chat_capabilities(capabilities)
            req = with_tools if mode is None else with_tools.with_option(mode)
            found = failure(run.fails(provider, Person, req))
            assert isinstance(found, ToolConflictError), f"{mode}: {found}"
            assert "start a fresh request" in str(found)
            assert found.metadata.passes == 0
            assert provider.call_count == 0, mode


def test_a_refusal_without_authored_text_keeps_no_message(run: Run) -> None:
    # Only `Degradations` sets the origin, and its text is authored; a deserialized error
    # may not be.
    data = refused(RequestField.RESPONSE_FORMAT).to_dict()
    del data["origin"]
    unauthored = Error.from_dict(data)
    assert unauthored.origin is MessageOrigin.UNKNOWN
    provider = MockProvider([unauthored, _alice_tool_response()]).with_supported_chat_capabilities(
        NATIVE_AND_TOOLS
    )
    extracted = run.extract(provider, Person, request())
    assert extracted.metadata.auto_fallback == AutoFallback(
        field=RequestField.RESPONSE_FORMAT, message=""
    )


def test_the_auto_fallback_record_round_trips() -> None:
    metadata = ExtractionMetadata.new(NATIVE)
    metadata.fall_back(refusal_record())
    value = metadata.to_json_dict()
    assert value["mode"] == "forced_tool"
    assert value["auto_fallback"]["field"] == "response_format"
    assert ExtractionMetadata.model_validate(value) == metadata
    assert ExtractionMetadata.model_validate_json(json.dumps(value)) == metadata
    plain = ExtractionMetadata.new(NATIVE).to_json_dict()
    assert "auto_fallback" not in plain, plain


def test_auto_skips_forced_tool_when_the_model_rejects_it(run: Run) -> None:
    """Tier 5: the answers rule out both modes."""
    provider = (
        MockProvider.with_tool_call("c", EXTRACTION_TOOL, alice_call())
        .with_chat_capability(ChatCapability.TOOL_CALLS, CapabilitySupport.SUPPORTED)
        .with_chat_capability(ChatCapability.FORCED_TOOL_CHOICE, CapabilitySupport.UNSUPPORTED)
        .with_chat_capability(ChatCapability.STRUCTURED_OUTPUT, CapabilitySupport.UNSUPPORTED)
    )
    found = failure(run.fails(provider, Person, request()))
    assert isinstance(found, ModeUnsupportedError), repr(found)
    assert found.response is None
    assert found.metadata.passes == 0
    assert provider.call_count == 0


def test_explicit_mode_option_and_parse_errors(run: Run) -> None:
    provider = MockProvider.with_text("not json")
    found = failure(run.fails(provider, Person, native_request()))
    assert isinstance(found, ParseError)
    assert found.raw_output == "not json"


def test_unknown_capabilities_guess_native_output(run: Run) -> None:
    """Tier 3: with nothing known, native output is a guess, never a failure."""
    provider = MockProvider.with_text('{"name":"Alice","age":31}')
    extracted = run.extract(provider, Person, request())
    assert extracted.metadata.mode is NATIVE
    last = provider.last_request
    assert last is not None and last.response_format is not None

    # Even when the tools are verified, forced choice is not.
    provider = MockProvider.with_text('{"name":"Alice","age":31}').with_chat_capability(
        ChatCapability.TOOL_CALLS, CapabilitySupport.SUPPORTED
    )
    extracted = run.extract(provider, Person, request())
    assert extracted.metadata.mode is NATIVE


def test_without_native_output_unknown_tools_are_guessed(run: Run) -> None:
    """Tier 4: without native output, unknown tool answers are a guess too."""
    provider = MockProvider.with_tool_call("c", EXTRACTION_TOOL, alice_call()).with_chat_capability(
        ChatCapability.STRUCTURED_OUTPUT, CapabilitySupport.UNSUPPORTED
    )
    extracted = run.extract(provider, Person, request())
    assert extracted.metadata.mode is FORCED

    provider = (
        MockProvider.empty()
        .with_chat_capability(ChatCapability.STRUCTURED_OUTPUT, CapabilitySupport.UNSUPPORTED)
        .with_chat_capability(ChatCapability.TOOL_CALLS, CapabilitySupport.UNSUPPORTED)
    )
    err = run.fails(provider, Person, request())
    assert isinstance(err, ModeUnsupportedError), repr(err)
    assert "capability resolver" in str(err), str(err)
    assert provider.call_count == 0


def test_forced_tool_conflicts_with_request_tools(run: Run) -> None:
    provider = MockProvider.empty()
    req = forced_request().with_tools([ToolDefinition(name="other", parameters={"type": "object"})])
    err = run.fails(provider, Person, req)
    assert isinstance(err, ToolConflictError)


def test_extraction_through_wrappers(run: Run) -> None:
    provider = RetryingProvider(
        MockProvider.with_response(ChatResponseBuilder().text('{"name":"Bob","age":4}').build()),
        RetryPolicy(),
    )
    req = ChatRequest("m").user("Bob is 4").with_option(NATIVE)
    extracted = run.extract(provider, Person, req, Extractor())
    assert extracted.value.name == "Bob"


def test_repair_candidates() -> None:
    assert repair_candidate('```json\n{"a": 1}\n```') == '{"a": 1}'
    assert repair_candidate("```\n[1]\n```\n") == "[1]"
    assert repair_candidate('Sure! Here it is: {"a": 1}. Anything else?') == '{"a": 1}'
    assert repair_candidate('{"a": 1}') is None
    assert repair_candidate("no json here") is None
    assert repair_candidate("} backwards {") is None
    assert repair_candidate('```json\n{"a": 1}\n```\nHope this helps!') == '{"a": 1}'
    assert repair_candidate('```{"a": 1}```') == '{"a": 1}'


def test_repair_is_opt_in_and_reported(run: Run) -> None:
    fenced = '```json\n{"name":"Alice","age":31}\n```'
    strict = MockProvider.with_text(fenced)
    run.fails(strict, Person, native_request())

    provider = MockProvider.with_text(fenced)
    extracted = run.extract(provider, Person, native_request(), Extractor(repair=True))
    assert extracted.value == alice()
    assert extracted.metadata.repaired
    assert provider.call_count == 1


def test_native_retries_send_the_failure_back(run: Run) -> None:
    provider = MockProvider(['{"name":"Alice"}', '{"name":"Alice","age":31}'])
    extracted = run.extract(provider, Person, native_request(), Extractor(retries=2))
    assert extracted.value == alice()
    assert extracted.metadata.passes == 2

    retry = provider.last_request
    assert retry is not None
    assert len(retry.messages) == 3
    assert isinstance(retry.messages[1], AssistantMessage)
    feedback = retry.messages[2]
    assert isinstance(feedback, UserMessage)
    text = feedback.text()
    assert text is not None and "missing field `age`" in text, text


def test_native_retries_answer_tool_calls_before_asking_again(run: Run) -> None:
    provider = MockProvider(
        [
            ChatResponseBuilder().tool_call("c1", "lookup", {"q": "Alice"}).build(),
            '{"name":"Alice","age":31}',
        ]
    )
    # A model may call a tool it was not offered.
    extracted = run.extract(provider, Person, native_request(), Extractor(retries=1))
    assert extracted.value == alice()

    retry = provider.last_request
    assert retry is not None
    assert len(retry.messages) == 4
    result = retry.messages[2]
    assert isinstance(result, ToolMessage)
    assert result.tool_call_id == "c1"
    # An ordinary result whose text says the call was not run.
    assert not result.is_error
    assert "was not run" in result.content, result.content
    assert isinstance(retry.messages[3], UserMessage)


def test_forced_tool_retries_answer_the_failed_call(run: Run) -> None:
    provider = MockProvider(
        [
            ChatResponseBuilder().tool_call("c1", EXTRACTION_TOOL, {"name": "Alice"}).build(),
            ChatResponseBuilder().tool_call("c2", EXTRACTION_TOOL, alice_call()).build(),
        ]
    )
    extracted = run.extract(provider, Person, forced_request(), Extractor(retries=1))
    assert extracted.value == alice()
    assert extracted.metadata.passes == 2

    retry = provider.last_request
    assert retry is not None
    result = retry.messages[2]
    assert isinstance(result, ToolMessage)
    assert result.tool_call_id == "c1"
    assert not result.is_error
    assert "could not be used" in result.content, result.content
    assert "missing field `age`" in result.content, result.content
    assert retry.tool_choice == ToolChoice.tool(EXTRACTION_TOOL)


def test_a_strict_retry_sends_on_an_endpoint_without_a_tool_error_flag(run: Run) -> None:
    """The retry turn once answered the failed call with a failed tool result, which an
    endpoint with no tool error flag refuses under the strict policy, so a strict extraction
    tripped over its own retry."""
    calls = 0

    # Refuses a failed tool result under the strict policy, as an adapter for such an
    # endpoint does.
    def answer(req: ChatRequest) -> ChatResponse:
        nonlocal calls
        calls += 1
        if calls == 1:
            return ChatResponseBuilder().tool_call("c1", EXTRACTION_TOOL, {"name": "Alice"}).build()
        if any(isinstance(m, ToolMessage) and m.is_error for m in req.messages):
            raise UnsupportedError("no tool error flag")
        return ChatResponseBuilder().tool_call("c2", EXTRACTION_TOOL, alice_call()).build()

    provider = (
        FunctionProvider(answer)
        .with_chat_capability(ChatCapability.TOOL_CALLS, CapabilitySupport.SUPPORTED)
        .with_chat_capability(ChatCapability.FORCED_TOOL_CHOICE, CapabilitySupport.SUPPORTED)
    )
    req = forced_request().with_unsupported_policy(UnsupportedPolicy.ERROR)
    extracted = run.extract(provider, Person, req, Extractor(retries=1))
    assert extracted.value == alice()
    assert calls == 2


def test_retries_are_bounded_and_skip_provider_errors(run: Run) -> None:
    provider = MockProvider(["nope", "still nope"])
    err = run.fails(provider, Person, native_request(), Extractor(retries=1))
    assert isinstance(err, allama.ExtractionError)
    assert provider.call_count == 2

    failing = MockProvider([AuthenticationError("bad key")])
    err = run.fails(failing, Person, native_request(), Extractor(retries=3))
    assert isinstance(err, AuthenticationError)
    assert failing.call_count == 1


class Currency(StrEnum):
    USD = "Usd"
    EUR = "Eur"


class Price(BaseModel):
    currency: Currency


def test_repair_reports_the_candidate_error_when_it_is_json(run: Run) -> None:
    raw = 'Here:\n{"currency":"Gbp"}'
    provider = MockProvider([raw, raw])
    found = failure(run.fails(provider, Price, native_request(), Extractor(repair=True, retries=1)))
    assert isinstance(found, ParseError), repr(found)
    assert "unknown variant `Gbp`" in found.detail, found.detail
    assert found.raw == raw

    feedback = retry_feedback(provider)
    assert "it did not match the schema at `currency`: unknown variant `Gbp`" in feedback, feedback


def test_repair_keeps_the_raw_error_when_the_candidate_is_not_json(run: Run) -> None:
    raw = 'Here: {"currency": Usd}'
    provider = MockProvider.with_text(raw)
    found = failure(run.fails(provider, Price, native_request(), Extractor(repair=True)))
    assert isinstance(found, ParseError), repr(found)
    with pytest.raises(json.JSONDecodeError) as raw_error:
        json.loads(raw)
    assert found.detail == str(raw_error.value)
    assert found.raw == raw


def test_retry_feedback_tells_json_errors_from_schema_errors(run: Run) -> None:
    trailing_comma = MockProvider(['{"name":"Alice","age":31,}', '{"name":"Alice","age":31}'])
    run.extract(trailing_comma, Person, native_request(), Extractor(retries=1))
    feedback = retry_feedback(trailing_comma)
    assert "it was not valid JSON: " in feedback, feedback
    assert "schema:" not in feedback, feedback

    wrong_type = MockProvider(['{"name":"Alice","age":"31"}', '{"name":"Alice","age":31}'])
    run.extract(wrong_type, Person, native_request(), Extractor(retries=1))
    feedback = retry_feedback(wrong_type)
    assert "it did not match the schema at `age`: invalid type" in feedback, feedback

    # Cut-off JSON (an early end of input) is a JSON error too.
    cut_off = MockProvider(['{"name":"Alice"', '{"name":"Alice","age":31}'])
    run.extract(cut_off, Person, native_request(), Extractor(retries=1))
    assert "it was not valid JSON: " in retry_feedback(cut_off)


def test_forced_tool_retry_feedback_tells_json_errors_from_schema_errors(run: Run) -> None:
    provider = MockProvider(
        [
            ChatResponseBuilder().tool_call("c1", EXTRACTION_TOOL, '{"name":"Alice",').build(),
            ChatResponseBuilder().tool_call("c2", EXTRACTION_TOOL, alice_call()).build(),
        ]
    )
    run.extract(provider, Person, forced_request(), Extractor(retries=1))
    retry = provider.last_request
    assert retry is not None
    result = retry.messages[2]
    assert isinstance(result, ToolMessage)
    assert "it was not valid JSON: " in result.content, result.content


class LineItem(BaseModel):
    name: str
    price: Annotated[int, Field(ge=0)]
    tags: list[str] = []


class Order(BaseModel):
    """An order whose line items were extracted with one wrong field."""

    items: list[LineItem]


def parse_failure_with(run: Run, tp: Any, raw: str, extractor: Extractor) -> tuple[str | None, str]:
    """The path and message of the parse failure for a native reply `raw`."""
    provider = MockProvider.with_text(raw)
    found = failure(run.fails(provider, tp, native_request(), extractor))
    assert isinstance(found, ParseError), f"expected a parse failure, got {found!r}"
    return found.path, found.detail


def parse_failure_of(run: Run, tp: Any, raw: str) -> tuple[str | None, str]:
    return parse_failure_with(run, tp, raw, Extractor())


def test_parse_failures_name_the_field_path(run: Run) -> None:
    # The stand-in `null`s are removed first, so the path names the wrong price, not the
    # `tags` a strict mode made nullable.
    raw = '{"items":[{"name":"a","price":1,"tags":null},{"name":"b","price":"2","tags":null}]}'
    fixed = '{"items":[{"name":"a","price":1},{"name":"b","price":2}]}'
    native = MockProvider([raw, fixed])
    run.extract(native, Order, native_request(), Extractor(retries=1))
    feedback = retry_feedback(native)
    assert (
        'it did not match the schema at `items[1].price`: invalid type: string "2"' in feedback
    ), feedback

    # The error holds the path, and its `str` names it.
    found = failure(run.fails(MockProvider.with_text(raw), Order, native_request()))
    assert isinstance(found, ParseError), repr(found)
    assert found.path == "items[1].price"
    assert found.detail == 'invalid type: string "2", expected an integer'
    shown = str(found)
    assert shown.endswith(
        'in `native` mode: at `items[1].price`: invalid type: string "2", expected an integer'
    ), shown

    # A missing field names the object that lacks it.
    path, message = parse_failure_of(run, Order, '{"items":[{"name":"a"}]}')
    assert path == "items[0]"
    assert "missing field `price`" in message, message

    # No path for invalid JSON or a failure at the root.
    assert parse_failure_of(run, Order, '{"items":[')[0] is None
    assert parse_failure_of(run, Order, '"text"')[0] is None


def test_forced_tool_feedback_names_the_field_path(run: Run) -> None:
    provider = MockProvider(
        [
            ChatResponseBuilder()
            .tool_call("c1", EXTRACTION_TOOL, {"name": "Alice", "age": "31"})
            .build(),
            ChatResponseBuilder().tool_call("c2", EXTRACTION_TOOL, alice_call()).build(),
        ]
    )
    run.extract(provider, Person, forced_request(), Extractor(retries=1))
    retry = provider.last_request
    assert retry is not None
    result = retry.messages[2]
    assert isinstance(result, ToolMessage)
    assert "it did not match the schema at `age`: invalid type" in result.content, result.content


def test_repaired_output_reports_the_candidate_path(run: Run) -> None:
    raw = 'Here you go:\n```json\n{"items":[{"name":"a","price":-1}]}\n```'
    path, message = parse_failure_with(run, Order, raw, Extractor(repair=True))
    assert path == "items[0].price"
    assert "invalid value: integer `-1`" in message, message


class Profile(BaseModel):
    """A strict mode made the optional properties nullable; the model sent `null` for each."""

    name: str
    tags: list[str] = []
    nickname: str | None = None


STRICT_NULLS = '{"name":"Alice","tags":null,"nickname":null}'


def alice_profile() -> Profile:
    return Profile(name="Alice", tags=[], nickname=None)


def test_strict_nulls_are_normalized_in_both_modes(run: Run) -> None:
    native = MockProvider.with_text(STRICT_NULLS)
    extracted = run.extract(native, Profile, native_request())
    assert extracted.value == alice_profile()
    assert not extracted.metadata.repaired

    forced = MockProvider.with_tool_call("c", EXTRACTION_TOOL, json.loads(STRICT_NULLS))
    extracted = run.extract(forced, Profile, forced_request())
    assert extracted.value == alice_profile()

    # Repair and normalization combine.
    fenced = MockProvider.with_text(f"```json\n{STRICT_NULLS}\n```")
    extracted = run.extract(fenced, Profile, native_request(), Extractor(repair=True))
    assert extracted.value == alice_profile()
    assert extracted.metadata.repaired


def test_parse_failures_keep_the_raw_output_the_model_sent(run: Run) -> None:
    # `name` is required: its null is not a strict-mode stand-in.
    raw = '{"name":null,"tags":null}'
    provider = MockProvider.with_text(raw)
    found = failure(run.fails(provider, Profile, native_request()))
    assert isinstance(found, ParseError)
    assert found.raw_output == raw
    # Validation sees the null, not a missing field.
    assert found.detail.startswith("invalid type: null"), found.detail


def test_metadata_sums_usage_over_every_pass(run: Run) -> None:
    provider = MockProvider(
        [
            text_with_usage('{"name":"Alice"}', 10, 4),
            text_with_usage('{"name":"Alice","age":31}', 20, 6),
        ]
    )
    extracted = run.extract(provider, Person, native_request(), Extractor(retries=1))
    assert extracted.metadata.passes == 2
    usage = extracted.metadata.usage
    assert usage is not None
    assert (usage.input_tokens, usage.output_tokens) == (30, 10)
    # The response keeps its own usage.
    assert extracted.response.usage is not None
    assert extracted.response.usage.input_tokens == 20


def test_failures_carry_the_last_response_and_the_pass_record(run: Run) -> None:
    provider = MockProvider([text_with_usage("nope", 10, 2), text_with_usage("still nope", 11, 3)])
    err = run.fails(provider, Person, native_request(), Extractor(retries=1))
    assert not err.retryable
    found = failure(err)
    assert isinstance(found, ParseError)
    assert found.response is not None
    assert found.response.text() == "still nope"
    assert found.metadata.mode is NATIVE
    assert found.metadata.passes == 2
    assert found.metadata.usage is not None
    assert found.metadata.usage.input_tokens == 21


def test_truncated_output_fails_before_parsing_and_is_not_retried(run: Run) -> None:
    provider = MockProvider(
        [
            ChatResponseBuilder()
            .text('{"name":"Alice","age":31}')
            .finish_reason(FinishReason.LENGTH)
            .usage(10, 64)
            .build(),
            '{"name":"Alice","age":31}',
        ]
    )
    err = run.fails(provider, Person, native_request(), Extractor(repair=True, retries=2))
    assert provider.call_count == 1
    found = failure(err)
    assert isinstance(found, TruncatedError) and found.mode is NATIVE, repr(found)
    assert "output token limit" in str(found)
    assert found.metadata.passes == 1
    assert found.metadata.usage is not None
    assert found.metadata.usage.output_tokens == 64
    assert found.response is not None
    assert found.response.finish_reason == FinishReason.LENGTH


def test_a_full_context_window_is_truncation_with_its_own_remedy(run: Run) -> None:
    provider = MockProvider(
        [
            ChatResponseBuilder()
            .text('{"name":"Ali')
            .finish_reason(FinishReason.CONTEXT_WINDOW)
            .usage(190_000, 64)
            .build(),
            '{"name":"Alice","age":31}',
        ]
    )
    err = run.fails(provider, Person, native_request(), Extractor(retries=2))
    assert not err.retryable
    assert provider.call_count == 1
    found = failure(err)
    assert isinstance(found, TruncatedError), repr(found)
    assert found.finish_reason == FinishReason.CONTEXT_WINDOW
    message = str(found)
    assert "context window" in message, message
    assert "shorten the input" in message, message
    assert "raise max_output_tokens" not in message, message
    assert found.metadata.passes == 1


def test_truncation_says_how_much_went_to_reasoning_when_reported(run: Run) -> None:
    def truncated(usage: Usage) -> ChatResponse:
        return ChatResponseBuilder().finish_reason(FinishReason.LENGTH).usage_value(usage).build()

    provider = MockProvider.with_response(truncated(Usage(output_tokens=400, reasoning_tokens=400)))
    reasoned = failure(run.fails(provider, Person, native_request()))
    assert isinstance(reasoned, TruncatedError)
    assert (reasoned.output_tokens, reasoned.reasoning_tokens) == (400, 400)
    assert str(reasoned).endswith(
        "; 400 of 400 output tokens went to reasoning: raise max_output_tokens or lower the "
        "reasoning effort"
    ), str(reasoned)

    # Without reported reasoning, nothing is claimed.
    provider = MockProvider.with_response(truncated(Usage(output_tokens=400)))
    unreported = failure(run.fails(provider, Person, native_request()))
    assert "reasoning" not in str(unreported)


def test_truncated_forced_tool_arguments_are_reported(run: Run) -> None:
    provider = MockProvider.with_response(
        ChatResponseBuilder()
        .tool_call("c", EXTRACTION_TOOL, {"name": "Alice"})
        .finish_reason(FinishReason.LENGTH)
        .build()
    )
    found = failure(run.fails(provider, Person, forced_request()))
    assert isinstance(found, TruncatedError)
    assert found.mode is FORCED


def declined(reason: FinishReason) -> ChatResponseBuilder:
    return ChatResponseBuilder().text("I can't help with that.").finish_reason(reason).usage(10, 6)


def test_refusals_fail_before_parsing_and_are_not_retried(run: Run) -> None:
    for reason in (FinishReason.REFUSAL, FinishReason.CONTENT_FILTER):
        provider = MockProvider([declined(reason).build(), '{"name":"Alice","age":31}'])
        err = run.fails(provider, Person, native_request(), Extractor(repair=True, retries=2))
        assert provider.call_count == 1, reason
        assert not err.retryable
        found = failure(err)
        assert isinstance(found, RefusedError), f"a refusal expected: {found!r}"
        assert found.mode is NATIVE
        assert found.finish_reason == reason
        # Nothing explains it: the text the model wrote before the finish is partial
        # output, not the refusal.
        assert (found.text, found.source) == (None, RefusalSource.NONE)
        assert str(found) == (
            f"mock: the model refused to produce the structured output (finish reason `{reason}`)"
        )
        assert found.metadata.passes == 1
        assert found.metadata.usage is not None
        assert found.metadata.usage.output_tokens == 6


def test_a_providers_explanation_is_the_refusal_text(run: Run) -> None:
    response = (
        ChatResponseBuilder()
        .finish_reason(FinishReason.REFUSAL)
        .provider_data("acme", DECLINE_EXPLANATION_KEY, "The request touches a restricted topic.")
        .build()
    )
    provider = MockProvider.with_response(response)
    found = failure(run.fails(provider, Person, forced_request()))
    assert isinstance(found, RefusedError), repr(found)
    assert found.mode is FORCED
    assert found.text == "The request touches a restricted topic."
    assert found.source == RefusalSource.PROVIDER
    assert str(found) == "mock: the model refused: The request touches a restricted topic."
    # The redacted log line leaves the upstream text out.
    log = str(found.as_log())
    assert "restricted" not in log, log
    assert "finish reason `refusal`" in log, log


def test_odd_finishes_are_named_in_the_parse_message(run: Run) -> None:
    provider = MockProvider.with_response(
        ChatResponseBuilder()
        .text('{"name":')
        .finish_reason(FinishReason("malformed_function_call"))
        .build()
    )
    odd = failure(run.fails(provider, Person, native_request()))
    assert isinstance(odd, ParseError), f"a parse failure expected: {odd!r}"
    assert odd.detail.endswith("(finish reason `malformed_function_call`)"), odd.detail

    # A normal finish adds nothing.
    provider = MockProvider.with_text('{"name":')
    normal = failure(run.fails(provider, Person, native_request()))
    assert isinstance(normal, ParseError), f"a parse failure expected: {normal!r}"
    assert "finish reason" not in normal.detail, normal.detail


def test_a_missing_output_names_an_odd_finish(run: Run) -> None:
    """No output after a stop the model did not choose (`pause_turn`, DeepSeek's
    `insufficient_system_resource`): the message says how the response ended, and the
    reason survives serialisation; a normal stop adds nothing."""
    odd = FinishReason("insufficient_system_resource")
    provider = MockProvider.with_response(ChatResponseBuilder().finish_reason(odd).build())
    found = failure(run.fails(provider, Person, native_request()))
    assert isinstance(found, MissingStructuredTextError), repr(found)
    assert found.finish_reason == odd
    assert str(found) == (
        "mock: the model did not return structured text "
        "(finish reason `insufficient_system_resource`)"
    )
    restored = allama.Error.from_json(found.to_json())
    assert isinstance(restored, MissingStructuredTextError)
    assert (restored.finish_reason, str(restored)) == (odd, str(found))

    provider = MockProvider.with_response(ChatResponseBuilder().finish_reason(odd).build())
    tool = failure(run.fails(provider, Person, forced_request()))
    assert isinstance(tool, MissingToolCallError), repr(tool)
    assert str(tool) == (
        f"mock: the model did not call the extraction tool '{EXTRACTION_TOOL}' "
        "(finish reason `insufficient_system_resource`)"
    )

    provider = MockProvider.with_response(
        ChatResponseBuilder().finish_reason(FinishReason.STOP).build()
    )
    normal = failure(run.fails(provider, Person, native_request()))
    assert str(normal) == "mock: the model did not return structured text"


def test_from_error_reads_the_record_of_any_extraction_failure(run: Run) -> None:
    """A parse failure holds its record as `.metadata`; `from_error` reads it as it reads
    the record a provider error carries, and after a JSON round trip of the error."""
    provider = MockProvider.with_text('{"name": 5}')
    found = failure(run.fails(provider, Person, native_request()))
    assert isinstance(found, ParseError)
    assert ExtractionMetadata.from_error(found) is found.metadata
    restored = allama.Error.from_json(found.to_json())
    assert ExtractionMetadata.from_error(restored) == found.metadata
    assert ExtractionMetadata.from_error(ValueError("not ours")) is None


def test_blank_output_is_missing_structured_text(run: Run) -> None:
    for text in ("", "  \n\t "):
        provider = MockProvider.with_text(text)
        found = failure(run.fails(provider, Person, native_request()))
        assert isinstance(found, MissingStructuredTextError), f"{text!r}: {found!r}"


def test_refusal_errors_round_trip() -> None:
    error = RefusedError(
        provider="acme",
        metadata=ExtractionMetadata.new(NATIVE),
        mode=NATIVE,
        finish_reason=FinishReason.CONTENT_FILTER,
        text="filtered",
        source=RefusalSource.PROVIDER,
    )
    data = json.loads(error.to_json())
    assert data["kind"] == "extraction_refused"
    assert data["fields"]["source"] == "provider"
    back = Error.from_dict(data)
    assert isinstance(back, RefusedError)
    assert str(back) == "acme: the model refused: filtered"


def test_provider_errors_on_a_retry_carry_the_earlier_passes(run: Run) -> None:
    provider = MockProvider([text_with_usage('{"name":"Alice"}', 500, 50), rate_limited()])
    err = run.fails(provider, Person, native_request(), Extractor(retries=1))

    # The provider error is raised unchanged, not reclassified.
    assert isinstance(err, RateLimitedError), repr(err)
    assert err.kind == "rate_limited"
    assert err.retryable
    assert err.retry_after == 7.0

    metadata = ExtractionMetadata.from_error(err)
    assert metadata is not None
    assert metadata.mode is NATIVE
    assert metadata.passes == 1
    assert metadata.usage is not None
    assert (metadata.usage.input_tokens, metadata.usage.output_tokens) == (500, 50)


def test_provider_errors_on_the_first_pass_carry_an_empty_record(run: Run) -> None:
    provider = MockProvider([rate_limited()])
    err = run.fails(provider, Person, forced_request())
    assert isinstance(err, RateLimitedError), repr(err)
    assert ExtractionMetadata.from_error(err) == ExtractionMetadata.new(FORCED)


def test_a_failed_failover_carries_the_record_on_its_own_context(run: Run) -> None:
    provider = MockProvider(
        [
            text_with_usage("nope", 10, 2),
            rate_limited().with_fallback_from(RequestTimeoutError("primary")),
        ]
    )
    err = run.fails(provider, Person, native_request(), Extractor(retries=1))
    assert isinstance(err, RateLimitedError), repr(err)
    record = ExtractionMetadata.from_error(err)
    assert record is not None and record.passes == 1
    primary = err.fallback_from
    assert isinstance(primary, RequestTimeoutError), repr(primary)
    assert ExtractionMetadata.from_error(primary) is None


def test_errors_without_a_record_and_foreign_exceptions_report_none(run: Run) -> None:
    """The seed's first case as it is. Its second (an error variant with no context) has no
    counterpart here, since every `allama.Error` carries a context; what this checks
    instead is the nearest case: an exception that is not an `allama.Error` (a decoder's)
    passes through the extraction as itself, with no record."""
    assert ExtractionMetadata.from_error(rate_limited()) is None

    def broken(req: ChatRequest) -> ChatResponse:
        return ChatResponse.model_validate(json.loads("{"))

    provider = FunctionProvider(broken)
    with pytest.raises(json.JSONDecodeError) as raised:
        run.extract(provider, Person, native_request())
    assert ExtractionMetadata.from_error(raised.value) is None


def _failed_retry_with_a_body(run: Run) -> Error:
    provider = MockProvider(
        [text_with_usage('{"name":"Alice"}', 500, 50), rate_limited().with_body("secret body")]
    )
    err = run.fails(provider, Person, native_request(), Extractor(retries=1))
    err.context.metadata["vendor.detail"] = "may quote input"
    return err


def test_error_log_keeps_the_extraction_record(run: Run) -> None:
    err = _failed_retry_with_a_body(run)

    log = err.as_log().to_dict()
    record = log["allama.extraction"]
    assert isinstance(record, dict)
    assert record["passes"] == 1
    assert record["mode"] == "native"
    usage = record["usage"]
    assert isinstance(usage, dict) and usage["input_tokens"] == 500
    assert "vendor.detail" not in log
    assert "may quote input" not in json.dumps(log)
    line = str(err.as_log())
    assert line.startswith(
        "kind=rate_limited provider=mock model=m status=429 retry_after=7.0 body_len=11 "
        "allama.extraction.mode=native allama.extraction.passes=1 "
    ), line
    assert "input_tokens=500 " in line and "output_tokens=50 " in line, line
    assert "null" not in line and "secret" not in line and "quote" not in line, line
    assert line.endswith('message="HTTP 429"'), line


def test_error_log_line_keeps_the_extraction_record_and_retry_after() -> None:
    """The seed's whole line plus `retry_after=7.0`: the log view keeps a rate limit's delay,
    which the seed's line leaves out, because the log line is where an operator reads it."""
    err = _failed_retry_with_a_body(Run(False))
    assert str(err.as_log()) == (
        "kind=rate_limited provider=mock model=m status=429 retry_after=7.0 body_len=11 "
        "allama.extraction.mode=native allama.extraction.passes=1 "
        "allama.extraction.input_tokens=500 allama.extraction.output_tokens=50 "
        'message="HTTP 429"'
    )


def test_missing_text_after_tool_calls_keeps_the_response(run: Run) -> None:
    provider = MockProvider.with_tool_call("c1", "lookup", {"q": "Alice"}).with_chat_capability(
        ChatCapability.STRUCTURED_OUTPUT, CapabilitySupport.SUPPORTED
    )
    found = failure(run.fails(provider, Person, request()))
    assert isinstance(found, MissingStructuredTextError)
    assert found.response is not None
    calls = found.response.tool_calls()
    assert len(calls) == 1
    assert calls[0].name == "lookup"


def test_extract_keeps_sampling_settings(run: Run) -> None:
    provider = MockProvider.with_text('{"name":"Alice","age":31}')
    req = request().with_temperature(0.0).with_seed(7).with_option(NATIVE)
    run.extract(provider, Person, req, Extractor())
    sent = provider.last_request
    assert sent is not None
    assert (sent.temperature, sent.seed) == (0.0, 7)


def test_parse_uses_an_existing_response() -> None:
    response = ChatResponseBuilder().text('Here: {"name":"Alice","age":31}').usage(5, 5).build()
    extracted = Extractor(repair=True).parse(Person, response, NATIVE)
    assert extracted.value == alice()
    assert extracted.response == response
    assert extracted.metadata == ExtractionMetadata(
        mode=NATIVE,
        passes=0,
        repaired=True,
        enforcement=SchemaEnforcement.NOT_ENFORCED,
        degradations=[],
        usage=None,
        auto_fallback=None,
        undeclared_key_rejections=0,
    )

    with pytest.raises(ParseError) as strict:
        Extractor().parse(Person, response, NATIVE)
    assert strict.value.response == response

    tool = ChatResponseBuilder().tool_call("c", EXTRACTION_TOOL, alice_call()).build()
    extracted = Extractor().parse(Person, tool, FORCED)
    assert extracted.value == alice()


def test_parse_rejects_auto() -> None:
    response = ChatResponse([TextPart(text="{}")], provider="demo")
    with pytest.raises(ModeUnsupportedError) as raised:
        Extractor().parse(Person, response, ExtractionMode.AUTO)
    assert raised.value.provider_name == "demo"
    assert raised.value.response is not None


def test_error_log_omits_the_failed_response(run: Run) -> None:
    provider = MockProvider.with_text("secret model output")
    err = run.fails(provider, Person, native_request())

    log = err.as_log().to_dict()
    assert log["kind"] == "extraction_parse"
    assert "secret model output" not in json.dumps(log), log
    assert "secret model output" not in str(err.as_log())

    # The full form keeps it, and round-trips.
    full = err.to_json()
    assert "secret model output" in full
    back = failure(Error.from_json(full))
    assert back.response is not None
    assert back.response.text() == "secret model output"
    assert back.metadata.passes == 1


def test_the_synthetic_tool_is_strict(run: Run) -> None:
    provider = MockProvider.with_tool_call("c", EXTRACTION_TOOL, alice_call())
    extracted = run.extract(provider, Person, forced_request())
    assert extracted.metadata.enforcement is SchemaEnforcement.EXACT
    sent = provider.last_request
    assert sent is not None
    assert len(sent.tools) == 1
    assert sent.tools[0].name == EXTRACTION_TOOL
    assert sent.tools[0].strict is True
    assert sent.parallel_tool_calls is None


def test_the_callers_parallel_tool_calls_is_kept(run: Run) -> None:
    """Extraction never sets `parallel_tool_calls`, whatever the model id: the caller's value
    reaches the adapter, which applies its dialect's rule."""
    for model in ("gpt-4.1", "ft:gpt-4o-mini-2024-07-18:acme::abc123"):
        for setting, mode in ((None, FORCED), (True, FORCED), (False, FORCED), (True, NATIVE)):
            provider = (
                MockProvider.with_text('{"name":"Alice","age":31}')
                if mode is NATIVE
                else MockProvider.with_tool_call("c", EXTRACTION_TOOL, alice_call())
            )
            req = (
                ChatRequest(model)
                .user("Alice is 31")
                .with_option(mode)
                .with_parallel_tool_calls(setting)
            )
            run.extract(provider, Person, req)
            sent = provider.last_request
            assert sent is not None
            assert sent.parallel_tool_calls == setting, f"{model} {mode}"


def test_unsupported_degradations_are_reported_as_not_enforced(run: Run) -> None:
    provider = MockProvider.with_response(
        ChatResponseBuilder()
        .tool_call("c", EXTRACTION_TOOL, alice_call())
        .warning(strict_dropped(RequestField.TOOLS))
        .warning(Warning.unsupported(RequestField.SEED, "seed dropped"))
        .build()
    )
    extracted = run.extract(provider, Person, forced_request())
    assert extracted.value == alice()
    assert extracted.metadata.enforcement is SchemaEnforcement.NOT_ENFORCED
    # Only tool warnings count in forced-tool mode.
    assert extracted.metadata.degradations == [strict_dropped(RequestField.TOOLS)]
    assert len(extracted.response.warnings) == 2


def test_approximated_degradations_are_reported_as_approximate(run: Run) -> None:
    provider = MockProvider.with_response(
        ChatResponseBuilder()
        .text('{"name":"Alice","age":31}')
        .warning(approximated(RequestField.RESPONSE_FORMAT))
        .build()
    )
    extracted = run.extract(provider, Person, native_request())
    assert extracted.metadata.enforcement is SchemaEnforcement.APPROXIMATE
    assert extracted.metadata.degradations == [approximated(RequestField.RESPONSE_FORMAT)]


def test_only_the_field_the_mode_relies_on_counts(run: Run) -> None:
    # Native mode: a tools warning leaves the response format enforced.
    provider = MockProvider.with_response(
        ChatResponseBuilder()
        .text('{"name":"Alice","age":31}')
        .warning(strict_dropped(RequestField.TOOLS))
        .build()
    )
    extracted = run.extract(provider, Person, native_request())
    assert extracted.metadata.enforcement is SchemaEnforcement.EXACT
    assert extracted.metadata.degradations == []
    assert len(extracted.response.warnings) == 1

    # Forced-tool mode: a response-format warning does not count.
    provider = MockProvider.with_response(
        ChatResponseBuilder()
        .tool_call("c", EXTRACTION_TOOL, alice_call())
        .warning(strict_dropped(RequestField.RESPONSE_FORMAT))
        .build()
    )
    extracted = run.extract(provider, Person, forced_request())
    assert extracted.metadata.enforcement is SchemaEnforcement.EXACT
    assert extracted.metadata.degradations == []


def test_the_least_enforced_pass_wins(run: Run) -> None:
    provider = MockProvider(
        [
            ChatResponseBuilder()
            .text("not json")
            .warning(approximated(RequestField.RESPONSE_FORMAT))
            .build(),
            ChatResponseBuilder()
            .text('{"name":"Alice","age":31}')
            .warning(strict_dropped(RequestField.RESPONSE_FORMAT))
            .build(),
        ]
    )
    extracted = run.extract(provider, Person, native_request(), Extractor(retries=1))
    assert extracted.metadata.enforcement is SchemaEnforcement.NOT_ENFORCED
    assert len(extracted.metadata.degradations) == 2


def test_enforcement_levels_serialize_in_snake_case() -> None:
    adapter = TypeAdapter(SchemaEnforcement)
    for level, name in (
        (SchemaEnforcement.EXACT, "exact"),
        (SchemaEnforcement.APPROXIMATE, "approximate"),
        (SchemaEnforcement.NOT_ENFORCED, "not_enforced"),
    ):
        assert adapter.dump_python(level, mode="json") == name
        assert adapter.validate_json(json.dumps(name)) is level


def test_degradations_are_collected_once_over_every_pass(run: Run) -> None:
    def degraded(text: str) -> ChatResponse:
        return (
            ChatResponseBuilder().text(text).warning(strict_dropped(RequestField.RESPONSE_FORMAT))
        ).build()

    provider = MockProvider([degraded('{"name":"Alice"}'), degraded('{"name":"Alice","age":31}')])
    extracted = run.extract(provider, Person, native_request(), Extractor(retries=1))
    assert extracted.metadata.passes == 2
    assert extracted.metadata.enforcement is SchemaEnforcement.NOT_ENFORCED
    assert extracted.metadata.degradations == [strict_dropped(RequestField.RESPONSE_FORMAT)]


def test_extraction_failures_carry_the_degradations(run: Run) -> None:
    provider = MockProvider.with_response(
        ChatResponseBuilder()
        .text("not json")
        .warning(strict_dropped(RequestField.RESPONSE_FORMAT))
        .build()
    )
    found = failure(run.fails(provider, Person, native_request()))
    assert isinstance(found, ParseError)
    assert found.metadata.enforcement is SchemaEnforcement.NOT_ENFORCED
    assert found.metadata.degradations == [strict_dropped(RequestField.RESPONSE_FORMAT)]

    # Nothing was sent, so nothing was enforced.
    provider = (
        MockProvider.empty()
        .with_chat_capability(ChatCapability.STRUCTURED_OUTPUT, CapabilitySupport.UNSUPPORTED)
        .with_chat_capability(ChatCapability.TOOL_CALLS, CapabilitySupport.UNSUPPORTED)
    )
    found = failure(run.fails(provider, Person, ChatRequest("m").user("?")))
    assert found.metadata.passes == 0
    assert found.metadata.enforcement is SchemaEnforcement.NOT_ENFORCED
    assert found.metadata.degradations == []


def test_parse_normalizes_strict_nulls_and_keeps_the_raw_output() -> None:
    response = ChatResponseBuilder().text(STRICT_NULLS).build()
    extracted = Extractor().parse(Profile, response, NATIVE)
    assert extracted.value == alice_profile()
    assert extracted.metadata.enforcement is SchemaEnforcement.NOT_ENFORCED

    tool = ChatResponseBuilder().tool_call("c", EXTRACTION_TOOL, json.loads(STRICT_NULLS)).build()
    extracted = Extractor().parse(Profile, tool, FORCED)
    assert extracted.value == alice_profile()

    # `name` is required: its null is not a stand-in, and the raw output is the text the
    # model sent, not the normalized value.
    raw = '{"name":null,"tags":null}'
    with pytest.raises(ParseError) as raised:
        Extractor().parse(Profile, ChatResponseBuilder().text(raw).build(), NATIVE)
    assert raised.value.raw_output == raw


# Undeclared keys


def approximate_text(text: str) -> ChatResponse:
    """A response the adapter reported approximating: its output is checked for undeclared
    keys."""
    return (
        ChatResponseBuilder()
        .text(text)
        .warning(approximated(RequestField.RESPONSE_FORMAT))
        .usage(10, 5)
        .build()
    )


class Contact(BaseModel):
    email: str | None = None
    phone: str | None = None


class Customer(BaseModel):
    name: str
    contact: Contact | None = None


def test_a_misnamed_key_is_rejected_on_a_pass_that_is_not_exact(run: Run) -> None:
    provider = MockProvider.with_response(
        approximate_text('{"name": "Ada", "contact": {"e_mail": "ada@example.com"}}')
    )
    found = failure(run.fails(provider, Customer, native_request()))
    assert isinstance(found, ParseError), f"a parse failure expected: {found!r}"
    assert found.path == "contact.e_mail"
    assert found.detail == "unknown field `e_mail`, expected one of `email`, `phone`"
    assert "e_mail" in found.raw
    assert found.metadata.undeclared_key_rejections == 1
    assert found.metadata.enforcement is SchemaEnforcement.APPROXIMATE


def test_an_undeclared_key_is_retried_and_counted(run: Run) -> None:
    provider = MockProvider(
        [
            approximate_text('{"name": "Ada", "e_mail": "x"}'),
            approximate_text('{"name": "Ada", "contact": null}'),
        ]
    )
    extracted = run.extract(provider, Customer, native_request(), Extractor(retries=1))
    assert extracted.value.name == "Ada"
    assert extracted.metadata.passes == 2
    assert extracted.metadata.undeclared_key_rejections == 1
    feedback = retry_feedback(provider)
    assert "it did not match the schema at `e_mail`: unknown field `e_mail`" in feedback, feedback


def test_a_key_nested_at_the_wrong_level_is_rejected(run: Run) -> None:
    provider = MockProvider.with_response(
        approximate_text('{"name": "Ada", "email": "ada@example.com"}')
    )
    found = failure(run.fails(provider, Customer, native_request()))
    assert isinstance(found, ParseError) and found.path == "email", repr(found)


class Email(BaseModel):
    email: str | None = None


class Phone(BaseModel):
    phone: str | None = None


class Lead(BaseModel):
    # serde's untagged enum tries its variants in order: so does `left_to_right`.
    reach: Email | Phone = Field(union_mode="left_to_right")


def test_untagged_enums_with_optional_branches_are_checked_against_every_branch(
    run: Run,
) -> None:
    """Validation alone would read `{"e_mail": ..}` as `Email(email=None)`."""
    provider = MockProvider.with_response(approximate_text('{"reach": {"e_mail": "x"}}'))
    found = failure(run.fails(provider, Lead, native_request()))
    assert isinstance(found, ParseError) and found.path == "reach.e_mail", repr(found)

    provider = MockProvider.with_response(approximate_text('{"reach": {"phone": "1"}}'))
    # A key some branch declares passes. Which branch is picked is the validator's: the
    # first one that validates, here `Email`, which ignores `phone` (the documented limit
    # of the union rule).
    extracted = run.extract(provider, Lead, native_request())
    assert extracted.value.reach == Email(email=None)


class Tagged(BaseModel):
    """A map field, and any other key kept (serde's flattened map)."""

    model_config = ConfigDict(extra="allow")

    labels: dict[str, str]


def test_maps_and_flattened_maps_take_any_key(run: Run) -> None:
    provider = MockProvider.with_response(
        approximate_text('{"labels": {"any": "x"}, "unlisted": 1}')
    )
    extracted = run.extract(provider, Tagged, native_request())
    assert extracted.value.labels["any"] == "x"
    assert extracted.value.model_extra == {"unlisted": 1}
    assert extracted.metadata.undeclared_key_rejections == 0


def test_undeclared_keys_can_be_allowed_and_exact_passes_are_not_checked(run: Run) -> None:
    output = '{"name": "Ada", "e_mail": "x"}'
    provider = MockProvider.with_response(approximate_text(output))
    extracted = run.extract(
        provider, Customer, native_request(), Extractor(allow_undeclared_keys=True)
    )
    assert extracted.value.name == "Ada"

    # No degradation: the provider constrained decoding to the schema.
    provider = MockProvider.with_text(output)
    extracted = run.extract(provider, Customer, native_request())
    assert extracted.metadata.enforcement is SchemaEnforcement.EXACT


def test_parse_rejects_undeclared_keys_unless_allowed() -> None:
    def response() -> ChatResponse:
        return ChatResponse([TextPart(text='{"name": "Ada", "x": 1}')])

    with pytest.raises(ParseError) as raised:
        Extractor().parse(Customer, response(), NATIVE)
    assert raised.value.metadata.undeclared_key_rejections == 1
    Extractor(allow_undeclared_keys=True).parse(Customer, response(), NATIVE)


# Enforcement in the caller's terms, the floor and the plan


class Validating:
    """A provider whose validation is a dry run that reports `warnings` (ENCODING coverage),
    or a plain one (CAPABILITIES)."""

    def __init__(
        self, inner: MockProvider, warnings: list[Warning], coverage: ValidationCoverage
    ) -> None:
        self.inner = inner
        self.warnings = warnings
        self.coverage = coverage

    @property
    def name(self) -> str:
        return "mock"

    def chat(self, req: ChatRequest) -> ChatResponse:
        return self.inner.chat(req)

    async def achat(self, req: ChatRequest) -> ChatResponse:
        return await self.inner.achat(req)

    def chat_stream(self, req: ChatRequest) -> ChatStream:
        return self.inner.chat_stream(req)

    async def achat_stream(self, req: ChatRequest) -> AsyncChatStream:
        return await self.inner.achat_stream(req)

    def validate_chat_request(self, req: ChatRequest, *, stream: bool = False) -> ChatValidation:
        return ChatValidation(coverage=self.coverage, warnings=tuple(self.warnings))

    def chat_capability(self, model: str, capability: ChatCapability) -> CapabilitySupport:
        return self.inner.chat_capability(model, capability)


def not_constrained_tool() -> Warning:
    return Warning(
        kind=WarningKind.UNSUPPORTED,
        subject=FieldSubject(field=RequestField.TOOLS),
        message=(
            "tool `submit_structured_output` is not strict-representable: the subschema at "
            "`/properties/contact` is a map; it goes without `strict`"
        ),
    )


def test_degradations_name_the_callers_type(run: Run) -> None:
    provider = MockProvider.with_response(
        ChatResponseBuilder()
        .tool_call("call_1", EXTRACTION_TOOL, {"name": "Ada", "contact": None})
        .warning(not_constrained_tool())
        .build()
    )
    extracted = run.extract(provider, Customer, forced_request())
    assert extracted.metadata.degradations[0].message == (
        "the schema of `Customer` is not strict-representable: the subschema at "
        "`Customer.contact` is a map; it goes without `strict`"
    )
    # The response keeps the adapter's own words.
    assert extracted.response.warnings[0] == not_constrained_tool()


def test_enforcement_is_a_warning_event_once_per_type_and_model(
    caplog: pytest.LogCaptureFixture,
) -> None:
    # Once per process: a provider name of its own keeps the test independent of others.
    name = f"enforcement-events-{uuid.uuid4().hex}"
    caplog.set_level(logging.DEBUG, logger="allama.extraction")
    for _ in range(2):
        provider = MockProvider.with_response(
            approximate_text('{"name": "Ada", "contact": null}')
        ).with_provider_name(name)
        req = ChatRequest("enforcement-model").user("Ada").with_option(NATIVE)
        allama.extract(provider, Customer, req)
    ours = [
        r
        for r in caplog.records
        if r.name == "allama.extraction"
        and getattr(r, "code", None) == "extraction.approximate.Customer"
    ]
    assert len(ours) == 2, caplog.records
    assert ours[0].levelno == logging.WARNING
    assert ours[1].levelno == logging.DEBUG
    message = ours[0].getMessage()
    assert message.endswith(
        "; `Customer` is extracted from `enforcement-model` approximately (`native` mode)"
    ), message


def test_a_floor_fails_before_sending_under_encoding_coverage(run: Run) -> None:
    provider = Validating(
        MockProvider.with_text('{"name": "Ada", "contact": null}'),
        [not_constrained_tool()],
        ValidationCoverage.ENCODING,
    )
    err = run.fails(
        provider,
        Customer,
        forced_request(),
        Extractor(min_enforcement=SchemaEnforcement.APPROXIMATE),
    )
    assert provider.inner.call_count == 0
    found = failure(err)
    assert isinstance(found, EnforcementBelowError), f"a floor failure expected: {found!r}"
    assert (found.required, found.achieved) == (
        SchemaEnforcement.APPROXIMATE,
        SchemaEnforcement.NOT_ENFORCED,
    )
    assert "`Customer.contact` is a map" in found.reason, found.reason
    assert found.response is None
    assert found.metadata.passes == 0
    # The record agrees with the error: the enforcement the call would have had, and why.
    assert found.metadata.enforcement is found.achieved
    assert [w.message for w in found.metadata.degradations] == [found.reason]

    # A floor the plan meets lets the call through.
    run.fails(
        provider,
        Customer,
        forced_request(),
        Extractor(min_enforcement=SchemaEnforcement.NOT_ENFORCED),
    )  # the mock answers text, not a tool call
    assert provider.inner.call_count == 1


def test_a_floor_is_checked_after_the_pass_under_capabilities_coverage(run: Run) -> None:
    provider = Validating(
        MockProvider.with_response(approximate_text('{"name": "Ada", "contact": null}')),
        [],
        ValidationCoverage.CAPABILITIES,
    )
    err = run.fails(
        provider, Customer, native_request(), Extractor(min_enforcement=SchemaEnforcement.EXACT)
    )
    assert provider.inner.call_count == 1
    found = failure(err)
    assert isinstance(found, EnforcementBelowError), repr(found)
    assert found.achieved is SchemaEnforcement.APPROXIMATE
    # A paid call: the response and its usage are kept.
    assert found.response is not None
    assert found.metadata.usage is not None
    assert found.metadata.usage.output_tokens == 5
    assert not found.retryable


def test_enforcement_levels_are_ordered() -> None:
    exact, approximate, not_enforced = (
        SchemaEnforcement.EXACT,
        SchemaEnforcement.APPROXIMATE,
        SchemaEnforcement.NOT_ENFORCED,
    )
    assert exact.satisfies(exact) and exact.satisfies(not_enforced)
    assert approximate.satisfies(approximate) and not approximate.satisfies(exact)
    assert not_enforced.satisfies(not_enforced) and not not_enforced.satisfies(approximate)
    assert str(not_enforced) == "not_enforced"


def test_a_plan_reports_mode_enforcement_and_coverage_without_sending() -> None:
    provider = Validating(
        MockProvider.with_text("unused").with_supported_chat_capabilities(NATIVE_AND_TOOLS),
        [approximated(RequestField.RESPONSE_FORMAT)],
        ValidationCoverage.ENCODING,
    )
    plan = Extractor().plan(provider, Customer, request())
    assert plan.mode is NATIVE
    assert plan.enforcement is SchemaEnforcement.APPROXIMATE
    assert len(plan.degradations) == 1
    assert plan.coverage is ValidationCoverage.ENCODING
    assert plan.auto_fallback is None
    assert provider.inner.call_count == 0

    # An Auto plan follows a refused response format; a scripted error belongs to the
    # call, not to its dry run, so nothing refuses here.
    refusing = MockProvider.with_error(
        refused(RequestField.RESPONSE_FORMAT)
    ).with_supported_chat_capabilities(NATIVE_AND_TOOLS)
    plan = Extractor().plan(refusing, Customer, request())
    assert plan.mode is NATIVE
    assert plan.coverage is ValidationCoverage.ENCODING
    assert refusing.call_count == 0


def test_metadata_without_enforcement_fields_deserializes() -> None:
    metadata = ExtractionMetadata.model_validate_json(
        '{"mode": "native", "passes": 1, "repaired": false}'
    )
    assert metadata.enforcement is SchemaEnforcement.NOT_ENFORCED
    assert metadata.degradations == []

    degraded = ExtractionMetadata.new(FORCED)
    degraded.record_pass(
        ChatResponseBuilder().warning(strict_dropped(RequestField.TOOLS)).build(),
        lambda warning: warning,
    )
    value = json.loads(degraded.model_dump_json())
    assert value["enforcement"] == "not_enforced"
    assert value["degradations"][0]["subject"]["field"] == "tools"
    assert ExtractionMetadata.model_validate(value) == degraded
