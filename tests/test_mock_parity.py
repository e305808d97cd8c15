"""The mock providers say of a request what a real adapter says of it: the enforcement an
extraction records, the schemas refused before sending, a tool choice among no tools; and
they answer what a test scripts in the form the request reads."""

from __future__ import annotations

import asyncio
import re
from collections.abc import Callable
from datetime import date
from typing import Any, Literal, Union

import pytest
from pydantic import Base64Bytes, BaseModel, FutureDate, Json

import allama
from _recording import provider as recorded
from allama import (
    ChatRequest,
    EnforcementBelowError,
    ExtractionMode,
    Extractor,
    SchemaEnforcement,
    ValidationCoverage,
)
from allama.errors import InvalidRequestError, ServerError, UnsupportedError
from allama.mock import (
    ChatResponseBuilder,
    FunctionProvider,
    MockProvider,
    MockScriptError,
    MockStreamingProvider,
    Structured,
    TestProvider,
)
from allama.types import (
    CapabilitySupport,
    ChatCapability,
    DocumentPart,
    ImagePart,
    RequestField,
    ResponseFormat,
    ResponseStart,
    TextDelta,
    ToolCall,
    ToolChoice,
    ToolDefinition,
    UnsupportedPolicy,
    Usage,
    WarningKind,
)

REQUEST = ChatRequest("gpt-4o").user("x")


class Due(BaseModel):
    when: FutureDate


class Tagged(BaseModel):
    tags: set[str]


class Count(BaseModel):
    n: int


DUE = Due(when=date(2099, 1, 1))

_SCRIPTED: dict[str, Any] = {
    "MockProvider": MockProvider.with_structured,
    "MockStreamingProvider": MockStreamingProvider.with_structured,
}


def _said(warnings: Any) -> list[tuple[WarningKind, RequestField | None, str, str | None]]:
    return [(w.kind, w.subject.field, w.message, w.provider) for w in warnings]


# 1. the enforcement a scripted answer records is what a real adapter's would be


@pytest.mark.parametrize("kind", sorted(_SCRIPTED))
def test_a_scripted_answer_to_a_check_no_provider_enforces_is_approximate(kind: str) -> None:
    extracted = allama.extract(_SCRIPTED[kind](DUE), Due, REQUEST)
    assert extracted.value == DUE
    assert extracted.metadata.enforcement is SchemaEnforcement.APPROXIMATE
    assert _said(extracted.metadata.degradations) == [
        (
            WarningKind.APPROXIMATED,
            RequestField.RESPONSE_FORMAT,
            "`format` `future-date` at `Due.when` asks for a check no provider enforces, so a "
            "scripted provider does not say it holds either: its value may fail it",
            "mock",
        )
    ]
    with pytest.raises(EnforcementBelowError) as caught:
        Extractor(min_enforcement="exact").extract(_SCRIPTED[kind](DUE), Due, REQUEST)
    assert caught.value.achieved is SchemaEnforcement.APPROXIMATE


@pytest.mark.parametrize("kind", sorted(_SCRIPTED))
def test_a_scripted_answer_to_what_no_dialect_holds_exactly_is_approximate(kind: str) -> None:
    value = Tagged(tags={"a"})
    extracted = allama.extract(_SCRIPTED[kind](value), Tagged, REQUEST)
    assert extracted.metadata.enforcement is SchemaEnforcement.APPROXIMATE
    assert [w.message for w in extracted.metadata.degradations] == [
        "`Tagged.tags` is enforced exactly by no provider's dialect, so a scripted provider "
        "does not say it holds either (OpenAI strict mode: `uniqueItems` was removed at "
        "`Tagged.tags`)"
    ]
    # A schema some dialect holds exactly is still exact.
    plain = allama.extract(_SCRIPTED[kind](Count(n=1)), Count, REQUEST)
    assert (plain.metadata.enforcement, plain.metadata.degradations) == (
        SchemaEnforcement.EXACT,
        [],
    )


def test_the_plan_and_a_function_provider_say_it_too() -> None:
    provider = MockProvider.with_structured(DUE)
    planned = Extractor().plan(provider, Due, REQUEST)
    assert planned.enforcement is SchemaEnforcement.APPROXIMATE
    assert provider.call_count == 0

    def answer(request: ChatRequest) -> Any:
        return ChatResponseBuilder().text('{"when":"2099-01-01"}').build()

    extracted = allama.extract(FunctionProvider(answer), Due, REQUEST)
    assert extracted.metadata.enforcement is SchemaEnforcement.APPROXIMATE


def _unsupported(provider: Any, capability: ChatCapability) -> Any:
    return provider.with_chat_capability(capability, CapabilitySupport.UNSUPPORTED)


@pytest.mark.parametrize("kind", ["MockProvider", "MockStreamingProvider", "TestProvider"])
def test_structured_output_answered_unsupported_is_not_enforced_in_native_mode(
    kind: str,
) -> None:
    make = _SCRIPTED.get(kind, lambda value: TestProvider("mock"))
    provider = _unsupported(make(Count(n=0)), ChatCapability.STRUCTURED_OUTPUT)
    native = REQUEST.with_option(ExtractionMode.NATIVE)
    extracted = allama.extract(provider, Count, native)
    assert extracted.value == Count(n=0)
    assert extracted.metadata.enforcement is SchemaEnforcement.NOT_ENFORCED
    assert _said(extracted.metadata.degradations) == [
        (
            WarningKind.UNSUPPORTED,
            RequestField.RESPONSE_FORMAT,
            "`gpt-4o` on mock has no JSON Schema output (`structured_output` is answered "
            "unsupported); the answer is held to no schema",
            "mock",
        )
    ]


def test_a_capability_answered_unsupported_is_refused_under_the_error_policy() -> None:
    provider = _unsupported(MockProvider.with_structured(Count(n=1)), ChatCapability.TOOL_CALLS)
    strict = REQUEST.with_option(ExtractionMode.FORCED_TOOL).with_unsupported_policy(
        UnsupportedPolicy.ERROR
    )
    with pytest.raises(UnsupportedError) as caught:
        allama.extract(provider, Count, strict)
    assert str(caught.value) == (
        "cannot send `tools`: `gpt-4o` on mock has no function calling (`tool_calls` is "
        "answered unsupported)"
    )
    assert caught.value.field is RequestField.TOOLS
    assert repr(provider) == "MockProvider(name='mock', remaining=1)"  # nothing was answered


def test_a_tool_choice_that_cannot_be_forced_is_noted_and_leaves_the_enforcement() -> None:
    provider = _unsupported(
        MockProvider.with_structured(Count(n=1)), ChatCapability.FORCED_TOOL_CHOICE
    )
    extracted = allama.extract(provider, Count, REQUEST.with_option(ExtractionMode.FORCED_TOOL))
    assert extracted.metadata.enforcement is SchemaEnforcement.EXACT
    assert _said(extracted.metadata.notes) == [
        (
            WarningKind.UNSUPPORTED,
            RequestField.TOOL_CHOICE,
            "`gpt-4o` on mock cannot be forced to call a tool (`forced_tool_choice` is "
            "answered unsupported); the choice is taken as `auto`",
            "mock",
        )
    ]


# 2. a schema every adapter refuses before sending is refused by the mocks


_MALFORMED = [
    (
        {"type": "object", "properties": {"x": {"type": "string", "minLength": -1}}},
        "`minLength` at `/properties/x/minLength` must be a non-negative integer",
    ),
    (
        {"$ref": "#/$defs/Nope"},
        "the `$ref` `#/$defs/Nope` at `/$ref` does not resolve in this schema",
    ),
    (
        {"type": "object", "properties": {"x": {"type": "strin"}}},
        "`type` at `/properties/x/type` must be a JSON type name or an array of them",
    ),
    (
        {"type": "object", "properties": {"x": {"type": "string"}}, "required": "x"},
        "`required` at `/required` must be an array of property names",
    ),
    ({"anyOf": []}, "`anyOf` at `/anyOf` must be a non-empty array of schemas"),
]

_PROVIDERS: dict[str, Callable[[], Any]] = {
    "MockProvider": lambda: MockProvider.with_text("{}"),
    "MockStreamingProvider": lambda: MockStreamingProvider.with_text("{}"),
    "FunctionProvider": lambda: FunctionProvider(lambda r: ChatResponseBuilder().text("").build()),
    "TestProvider": lambda: TestProvider("mock"),
}


@pytest.mark.parametrize(("schema", "said"), _MALFORMED)
@pytest.mark.parametrize("kind", sorted(_PROVIDERS))
def test_a_malformed_response_schema_is_refused_as_every_adapter_refuses_it(
    kind: str, schema: dict[str, Any], said: str
) -> None:
    request = REQUEST.with_response_format(ResponseFormat.for_schema(schema))
    expected = f"the response format `response` has a schema allama cannot read: {said}"
    with pytest.raises(InvalidRequestError) as real:
        allama.provider("openai", api_key="k").validate_chat_request(request)
    assert str(real.value) == expected
    provider = _PROVIDERS[kind]()
    for ask in (provider.validate_chat_request, provider.chat, provider.chat_stream):
        with pytest.raises(InvalidRequestError) as caught:
            ask(request)
        assert str(caught.value) == expected
        assert caught.value.provider == "mock"
    assert provider.call_count == 2  # each call recorded, as a call that failed is
    if kind in _SCRIPTED:  # nothing was answered: the script is whole
        assert repr(provider).endswith("remaining=1)")


# 3. the test provider answers a decision sent as a plain prompt


def _plain_only(provider: TestProvider) -> TestProvider:
    for capability in (
        ChatCapability.CHOICE_OUTPUT,
        ChatCapability.STRUCTURED_OUTPUT,
        ChatCapability.TOOL_CALLS,
        ChatCapability.FORCED_TOOL_CHOICE,
    ):
        _unsupported(provider, capability)
    return provider


def test_the_test_provider_answers_a_decision_sent_as_a_plain_prompt() -> None:
    provider = _plain_only(TestProvider())
    assert allama.decide(provider, bool, ChatRequest("m").user("?")).value is True
    color = allama.decide(provider, Literal["red", "green"], ChatRequest("m").user("?"))
    assert color.value == "red"
    sent = provider.last_request
    assert sent is not None and sent.response_format is None and not sent.tools


# 4. a bare union of bytes or JSON text is written as the branch that reads it


@pytest.mark.parametrize(
    ("tp", "value"),
    [
        (Union[Base64Bytes, int], b"hello"),  # noqa: UP007
        (Union[Base64Bytes, int], 3),  # noqa: UP007
        (Union[Json[list[int]], int], [1, 2]),  # noqa: UP007
        (Union[Json[list[int]], int], 5),  # noqa: UP007
        (list[Base64Bytes | int], [b"hello", 3]),
        (dict[str, Json[list[int]] | bool], {"a": [1], "b": True}),
    ],
)
@pytest.mark.parametrize("kind", sorted(_SCRIPTED))
def test_a_union_of_base64_or_json_reads_back_the_scripted_value(
    kind: str, tp: Any, value: Any
) -> None:
    assert allama.extract(_SCRIPTED[kind](value), tp, REQUEST).value == value


def test_bytes_no_branch_of_a_union_takes_are_refused_as_before() -> None:
    # Not UTF-8, and no branch reads base64: no answer holds them.
    with pytest.raises(MockScriptError) as caught:
        allama.extract(MockProvider.with_structured(b"\xff"), Union[str, int], REQUEST)  # noqa: UP007
    assert str(caught.value) == (
        "the scripted value holds bytes that are not UTF-8 text, and the schema reads those "
        "bytes as text (format None), not as base64: script text, or extract a type that "
        "reads base64 (`Base64Bytes`)"
    )


# 5. the model on a stream's error and a structured answer; a tool choice among no tools


def test_an_error_inside_a_scripted_stream_names_the_request_model() -> None:
    began: list[Any] = [ResponseStart(id="r"), TextDelta(index=0, text="hel")]
    provider = MockStreamingProvider([[*began, ServerError("died")]] * 2, name="s")
    with pytest.raises(ServerError) as caught:
        list(provider.chat_stream(REQUEST))
    assert (caught.value.provider, caught.value.model) == ("s", "gpt-4o")

    async def streamed() -> None:
        stream = await provider.achat_stream(REQUEST)
        async for _ in stream:
            pass

    with pytest.raises(ServerError) as async_caught:
        asyncio.run(streamed())
    assert (async_caught.value.provider, async_caught.value.model) == ("s", "gpt-4o")


@pytest.mark.parametrize("kind", sorted(_SCRIPTED))
def test_a_structured_answer_names_the_model_so_its_usage_is_priced(kind: str) -> None:
    usage = Usage(input_tokens=1000, output_tokens=100)
    provider = _SCRIPTED[kind](Count(n=1), usage=usage).with_provider_name("openai")
    extracted = allama.extract(provider, Count, REQUEST)
    assert extracted.response.model == "gpt-4o"
    assert extracted.metadata.cost is not None
    assert extracted.metadata.cost.source.endswith("openai/gpt-4o")


_NO_TOOLS = "the request gives no tools to call; `tool_choice` was not sent"


@pytest.mark.parametrize("kind", sorted(_PROVIDERS))
@pytest.mark.parametrize("choice", [ToolChoice.required(), ToolChoice.tool("lookup")])
def test_a_tool_choice_among_no_tools_is_warned_of_as_every_adapter_does(
    kind: str, choice: ToolChoice
) -> None:
    request = REQUEST.with_tool_choice(choice)
    provider = _PROVIDERS[kind]()
    validation = provider.validate_chat_request(request)
    expected = [(WarningKind.UNSUPPORTED, RequestField.TOOL_CHOICE, _NO_TOOLS, "mock")]
    assert _said(validation.warnings) == expected
    answer = provider.chat(request)
    assert _said(answer.warnings) == expected
    assert answer.tool_calls() == ()
    strict = request.with_unsupported_policy(UnsupportedPolicy.ERROR)
    with pytest.raises(UnsupportedError) as caught:
        _PROVIDERS[kind]().chat(strict)
    assert str(caught.value) == "cannot send `tool_choice`: the request gives no tools to call"
    # A choice that asks for no call is no loss: left out without a word.
    quiet = _PROVIDERS[kind]().chat(REQUEST.with_tool_choice(ToolChoice.none()))
    assert quiet.warnings == ()


# 6. a conversation the Chat Completions adapters refuse before sending is refused by the mocks


GET = ToolDefinition(name="get", parameters={"type": "object", "properties": {}})
WITH_TOOLS = REQUEST.with_tools([GET])


def _call(call_id: str) -> ToolCall:
    return ToolCall(id=call_id, name="get", arguments="{}")


_UNSENDABLE = {
    "a call unanswered before the next turn": (
        WITH_TOOLS.assistant([_call("c0"), _call("c1")]).tool_result("c0", "1").user("go on"),
        "the tool call `c1` of the assistant turn at `messages[1]` got no tool result before "
        "the next user turn (`messages[3]`), and `mock` needs each call's result right after it",
    ),
    "a call ending the conversation": (
        WITH_TOOLS.assistant([_call("c0")]),
        "the tool call `c0` of the assistant turn at `messages[1]` got no tool result before "
        "the end of the conversation, and `mock` needs each call's result right after it",
    ),
    "two results for one call": (
        WITH_TOOLS.assistant([_call("c0")]).tool_result("c0", "1").tool_result("c0", "2"),
        "the tool result at `messages[3]` (for `c0`) answers a call of the assistant turn at "
        "`messages[1]` that another result already answered, and `mock` takes one result for "
        "each call",
    ),
    "a result for an earlier turn's call": (
        WITH_TOOLS.assistant([_call("c0")])
        .tool_result("c0", "1")
        .user("y")
        .assistant([_call("c1")])
        .tool_result("c1", "2")
        .tool_result("c0", "3"),
        "the tool result at `messages[6]` (for `c0`) answers no call of the assistant turn at "
        "`messages[4]` before it, and `mock` needs each result right after the call it answers",
    ),
}


@pytest.mark.parametrize("case", sorted(_UNSENDABLE))
@pytest.mark.parametrize("kind", sorted(_PROVIDERS))
def test_a_conversation_chat_completions_refuses_is_refused_in_its_words(
    kind: str, case: str
) -> None:
    request, expected = _UNSENDABLE[case]
    with pytest.raises(InvalidRequestError) as real:
        allama.provider("openai", api_key="k").validate_chat_request(request)
    assert str(real.value) == expected.replace("`mock`", "OpenAI")
    provider = _PROVIDERS[kind]()
    for ask in (provider.validate_chat_request, provider.chat, provider.chat_stream):
        with pytest.raises(InvalidRequestError) as caught:
            ask(request)
        assert str(caught.value) == expected
        assert caught.value.provider == "mock"
    with pytest.raises(InvalidRequestError):
        asyncio.run(provider.achat(request))
    if kind in _SCRIPTED:  # nothing was answered: the script is whole
        assert repr(provider).endswith("remaining=1)")


@pytest.mark.parametrize("kind", sorted(_PROVIDERS))
def test_a_conversation_whose_calls_are_each_answered_once_is_answered(kind: str) -> None:
    request = (
        WITH_TOOLS.assistant([_call("c0"), _call("c0")])
        .tool_result("c0", "1")
        .system("s")  # passed over, as Chat Completions endpoints pass it over
        .tool_result("c0", "2")
        .user("go on")
    )
    assert _PROVIDERS[kind]().chat(request).warnings == ()


# 7. a floor the dry run shows unmet is refused before anything is answered, as a real
# provider refuses it before sending


_BELOW = (
    "schema enforcement `approximate` is below the required `exact`: `Tagged.tags` is "
    "enforced exactly by no provider's dialect, so a scripted provider does not say it holds "
    "either (OpenAI strict mode: `uniqueItems` was removed at `Tagged.tags`)"
)


def test_the_dry_run_of_a_scripted_provider_is_of_the_call() -> None:
    for kind in sorted(_PROVIDERS):
        validation = _PROVIDERS[kind]().validate_chat_request(REQUEST)
        assert validation.coverage is ValidationCoverage.ENCODING, kind
    plan = Extractor().plan(MockProvider.with_structured(Tagged(tags={"a"})), Tagged, REQUEST)
    assert (plan.enforcement, plan.coverage) == (
        SchemaEnforcement.APPROXIMATE,
        ValidationCoverage.ENCODING,
    )


@pytest.mark.parametrize("kind", sorted(_SCRIPTED))
def test_a_floor_above_the_enforcement_is_refused_before_the_script_is_answered(
    kind: str,
) -> None:
    strict = Extractor(min_enforcement="exact")
    real, sent = recorded("openai", (200, {}))
    with pytest.raises(EnforcementBelowError):
        strict.extract(real, Tagged, REQUEST)
    assert sent.bodies == []  # the real provider refuses before sending
    provider = _SCRIPTED[kind](Tagged(tags={"a"}))
    with pytest.raises(EnforcementBelowError) as caught:
        strict.extract(provider, Tagged, REQUEST)
    assert str(caught.value) == _BELOW
    assert (caught.value.metadata.passes, caught.value.metadata.usage) == (0, None)
    with pytest.raises(EnforcementBelowError) as async_caught:
        asyncio.run(strict.aextract(provider, Tagged, REQUEST))
    assert str(async_caught.value) == _BELOW
    assert provider.call_count == 0
    assert repr(provider).endswith("remaining=1)")  # the answer is left for the next call


def test_a_batch_under_a_floor_above_the_enforcement_refuses_at_its_start() -> None:
    provider = MockProvider([Structured(Tagged(tags={"a"}))] * 3)
    strict = Extractor(min_enforcement="exact")
    with pytest.raises(EnforcementBelowError) as caught:
        list(allama.batch(provider, Tagged, ["a", "b", "c"], request=REQUEST, extractor=strict))
    assert str(caught.value) == _BELOW
    assert provider.call_count == 0


# 8. a request every adapter refuses before sending is refused by the mocks, in its words


_TOOL = ToolDefinition(name="t", parameters={"type": "object", "properties": {}})

_REFUSED_ANYWHERE: dict[str, tuple[ChatRequest, str]] = {
    "tools repeating a name": (
        REQUEST.with_tools([_TOOL, _TOOL]),
        "`mock` takes each tool name once, and the request's tools repeat names (positions "
        "count from 0): `t` names the tools at positions 0 and 1",
    ),
    "an image of no valid base64": (
        ChatRequest("gpt-4o").user("x", ImagePart(url="data:image/png;base64,@@@")),
        "the image's data URL holds no valid base64",
    ),
    "an image data URL not in base64": (
        ChatRequest("gpt-4o").user("x", ImagePart(url="data:image/svg+xml,<svg/>")),
        "an image data URL must be base64-encoded",
    ),
    "a document of no valid base64": (
        ChatRequest("gpt-4o").user("x", DocumentPart(url="data:application/pdf;base64,@@@")),
        "the document's data URL holds no valid base64",
    ),
    "half of a character": (
        ChatRequest("gpt-4o").user("cut \ud83d here"),
        "the request cannot be written as JSON: it holds a lone surrogate that UTF-8 cannot "
        "carry (text cut between the halves of a character?)",
    ),
}


_WRITTEN = "half of a character"
"""The case a real adapter refuses as it writes the body: its dry run, which writes none,
takes the request."""


@pytest.mark.parametrize("case", sorted(_REFUSED_ANYWHERE))
def test_a_real_adapter_refuses_these_before_sending(case: str) -> None:
    request, expected = _REFUSED_ANYWHERE[case]
    for preset, display in (("openai", "OpenAI"), ("anthropic", "Anthropic"), ("gemini", "Gemini")):
        real, sent = recorded(preset, (200, {}))
        said = expected.replace("`mock`", display)
        if case == _WRITTEN:
            assert real.validate_chat_request(request).warnings == ()
        else:
            with pytest.raises(InvalidRequestError, match=f"^{re.escape(said)}$"):
                real.validate_chat_request(request)
        with pytest.raises(InvalidRequestError) as caught:
            real.chat(request)
        assert str(caught.value) == said, preset
        assert sent.bodies == []


@pytest.mark.parametrize("case", sorted(_REFUSED_ANYWHERE))
@pytest.mark.parametrize("kind", sorted(_PROVIDERS))
def test_a_request_every_adapter_refuses_is_refused_by_the_mocks_in_its_words(
    kind: str, case: str
) -> None:
    request, expected = _REFUSED_ANYWHERE[case]
    provider = _PROVIDERS[kind]()
    if case == _WRITTEN:
        assert provider.validate_chat_request(request).warnings == ()
    else:
        with pytest.raises(InvalidRequestError, match=f"^{re.escape(expected)}$"):
            provider.validate_chat_request(request)
    for ask in (provider.chat, provider.chat_stream):
        with pytest.raises(InvalidRequestError) as caught:
            ask(request)
        assert str(caught.value) == expected
        assert caught.value.provider == "mock"
    with pytest.raises(InvalidRequestError) as async_caught:
        asyncio.run(provider.achat(request))
    assert str(async_caught.value) == expected
    if kind in _SCRIPTED:  # nothing was answered: the script is whole
        assert repr(provider).endswith("remaining=1)")


# 9. a scripted answer that names no model is of the request's, as a body that names none is


def test_a_built_response_naming_no_model_is_of_the_requests_and_priced() -> None:
    usage = Usage(input_tokens=1000, output_tokens=100)
    built = ChatResponseBuilder().text('{"n":1}').usage(1000, 100).build()
    own = ChatResponseBuilder().text('{"n":1}').usage(1000, 100).model("gpt-4o-mini").build()
    providers: dict[str, Any] = {
        "text": MockProvider(['{"n":1}'], name="openai"),
        "built": MockProvider([built], name="openai"),
        "streamed": MockStreamingProvider.from_responses([built]).with_provider_name("openai"),
        "function": FunctionProvider(lambda r: built, name="openai"),
    }
    for kind, provider in providers.items():
        extracted = allama.extract(provider, Count, REQUEST)
        assert extracted.response.model == "gpt-4o", kind
        if kind == "text":  # text reports no usage: what is missing is the usage alone
            assert extracted.metadata.cost_missing == "no usage was reported"
            continue
        assert (extracted.metadata.usage, extracted.metadata.cost_missing) == (usage, None), kind
        assert extracted.metadata.cost is not None, kind
        assert extracted.metadata.cost.source.endswith("openai/gpt-4o"), kind
    # A model the script names is kept.
    assert MockProvider([own]).chat(REQUEST).model == "gpt-4o-mini"
    streamed = MockStreamingProvider.from_responses([own]).chat(REQUEST)
    assert streamed.model == "gpt-4o-mini"
