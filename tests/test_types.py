"""The vocabulary: JSON round trips, fluent requests, finish reasons, usage, response helpers."""

from __future__ import annotations

import copy
import json
import pickle
from typing import Any, ClassVar

import pytest
from pydantic import BaseModel, ValidationError

from allama import (
    AssistantMessage,
    BlockStart,
    BlockStop,
    CapabilitySupport,
    ChatCapability,
    ChatRequest,
    ChatResponse,
    ChatValidation,
    DeveloperMessage,
    FieldSubject,
    Finish,
    FinishReason,
    ImagePart,
    MessageSubject,
    ProviderDataEvent,
    Reasoning,
    ReasoningDelta,
    ReasoningEffort,
    Refusal,
    RefusalDelta,
    RequestField,
    ResponseFormat,
    ResponseStart,
    StreamBlockType,
    SystemMessage,
    TextDelta,
    TextPart,
    ToolCall,
    ToolCallDelta,
    ToolChoice,
    ToolDefinition,
    ToolMessage,
    ToolSubject,
    UnsupportedPolicy,
    Usage,
    UsageEvent,
    UserMessage,
    ValidationCoverage,
    Warning,
    WarningEvent,
    WarningKind,
)
from allama.types import ALLAMA_NAMESPACE, DECLINE_EXPLANATION_KEY, Data

SECRET = "SECRET-MODEL-TEXT"


class Sampling(BaseModel):
    """A typed option for the tests, in its own namespace."""

    __option_namespace__: ClassVar[str] = "demo.sampling"
    top_k: int
    mirostat: bool = False


def full_request() -> ChatRequest:
    return (
        ChatRequest("gpt-5-mini")
        .system("Be brief.")
        .developer("Answer in JSON.")
        .user("Look at this", ImagePart(url="https://example.com/a.png"))
        .user(None, ImagePart(data=b"\x89PNG\x00\xff", media_type="image/png"))
        .assistant(
            [
                Reasoning(text="think", signature="sig==", encrypted_content="enc=="),
                TextPart(text="calling"),
                ToolCall(id="call_1", name="lookup", arguments='{"q": "x" }'),
            ]
        )
        .tool_result("call_1", "found", is_error=True)
        .with_tools(
            [
                ToolDefinition(
                    name="lookup",
                    description="Look something up",
                    parameters={"type": "object", "properties": {"q": {"type": "string"}}},
                    strict=True,
                )
            ]
        )
        .with_tool_choice(ToolChoice.tool("lookup"))
        .with_response_format(ResponseFormat.for_schema({"type": "object"}, name="answer"))
        .with_temperature(0.3)
        .with_top_p(0.9)
        .with_max_output_tokens(256)
        .with_stop("END", "STOP")
        .with_seed(7)
        .with_reasoning_effort(ReasoningEffort.LOW)
        .with_parallel_tool_calls(False)
        .with_unsupported_policy(UnsupportedPolicy.ERROR)
        .with_option(Sampling(top_k=40))
        .with_option_json("vendor", {"beta": ["a", 1, None, True]})
    )


def full_response() -> ChatResponse:
    return ChatResponse(
        (
            Reasoning(text="hmm", signature="s1"),
            TextPart(text="Hello "),
            TextPart(text="world"),
            ToolCall(id="c1", name="f", arguments='{"a":1}'),
            Refusal(text="no"),
        ),
        finish_reason=FinishReason("malformed_function_call"),
        usage=Usage(input_tokens=10, output_tokens=5, reasoning_tokens=2, cache_read_tokens=3),
        warnings=(
            Warning.unsupported(RequestField.SEED, "no seed", code="seed_dropped").with_provider(
                "p"
            ),
            Warning(kind=WarningKind.APPROXIMATED, subject=ToolSubject(name="f"), message="wide"),
            Warning(kind=WarningKind.UNSUPPORTED, subject=MessageSubject(index=2), message="m"),
        ),
        provider_data={"openai": {"system_fingerprint": "fp_1", "nested": {"x": [1, 2]}}},
        model="gpt-5-mini",
        provider="openai",
        id="resp_1",
    )


VALUES: list[Data] = [
    full_request(),
    ChatRequest("m"),
    full_response(),
    ChatResponse(),
    SystemMessage(content="s"),
    DeveloperMessage(content="d"),
    UserMessage(content=(TextPart(text="t"), ImagePart(data=b"\x00\x01", media_type="image/gif"))),
    AssistantMessage(content=(TextPart(text="a"), Refusal(text="r"))),
    ToolMessage(tool_call_id="c", content="out", is_error=True),
    TextPart(text="t"),
    ImagePart(url="https://example.com/x.jpg"),
    ImagePart(data=bytes(range(256)), media_type="image/png"),
    ToolCall(id="c", name="n", arguments='{ "raw" :  true }'),
    Refusal(text="r"),
    Reasoning(text="r", signature="sig", encrypted_content="enc"),
    ToolDefinition(name="t"),
    ToolChoice.auto(),
    ToolChoice.none(),
    ToolChoice.required(),
    ToolChoice.tool("t"),
    ResponseFormat.text(),
    ResponseFormat.json_object(),
    ResponseFormat.for_schema({"type": "object"}, name="n", strict=False, description="d"),
    Usage(),
    Usage(input_tokens=1, output_tokens=2, reasoning_tokens=3, cache_read_tokens=4),
    Warning.approximated(RequestField.RESPONSE_FORMAT, "widened"),
    FieldSubject(field=RequestField.TOOLS),
    MessageSubject(index=3),
    ToolSubject(name="t"),
    ChatValidation(
        coverage=ValidationCoverage.ENCODING,
        warnings=(Warning.unsupported(RequestField.STOP, "no stop"),),
    ),
    ResponseStart(id="r", model="m"),
    BlockStart(index=0, block_type=StreamBlockType.TOOL_CALL, id="c", name="f"),
    BlockStop(index=0),
    TextDelta(index=0, text="t"),
    ToolCallDelta(index=1, arguments='{"a'),
    ReasoningDelta(index=2, text="r", signature="s", encrypted_content="e"),
    RefusalDelta(index=3, text="no"),
    UsageEvent(usage=Usage(output_tokens=3)),
    WarningEvent(warning=Warning.unsupported(RequestField.SEED, "x")),
    ProviderDataEvent(namespace="ns", key="k", value={"v": [1, "2"]}),
    Finish(finish_reason=FinishReason.LENGTH),
    Finish(),
]


@pytest.mark.parametrize("value", VALUES, ids=lambda value: type(value).__name__)
def test_every_vocabulary_type_survives_a_json_round_trip(value: Data) -> None:
    cls = type(value)
    back = cls.model_validate_json(value.model_dump_json())
    assert back == value
    assert type(back) is cls
    again = cls.from_json(value.to_json())
    assert again == value
    assert again.to_json() == value.to_json()


def test_round_trip_keeps_bytes_raw_arguments_and_other_finish_reasons() -> None:
    response = ChatResponse.from_json(full_response().to_json())
    assert response.content[3] == ToolCall(id="c1", name="f", arguments='{"a":1}')
    assert isinstance(response.finish_reason, FinishReason)
    assert response.finish_reason == "malformed_function_call"
    assert response.finish_reason.is_other
    request = ChatRequest.from_json(full_request().to_json())
    image = request.messages[3].content[0]
    assert isinstance(image, ImagePart)
    assert image.data == b"\x89PNG\x00\xff"
    assert request.option(Sampling) == Sampling(top_k=40)


def test_unknown_keys_are_rejected_by_the_vocabulary() -> None:
    with pytest.raises(ValidationError):
        Usage.model_validate_json('{"input_tokens": 1, "bogus": 2}')


# ChatRequest


def test_every_fluent_method_returns_a_copy_and_leaves_the_original_alone() -> None:
    base = ChatRequest("m").user("hi")
    snapshot = base.model_dump()
    calls: list[tuple[str, Any]] = [
        ("system", lambda r: r.system("s")),
        ("developer", lambda r: r.developer("d")),
        ("user", lambda r: r.user("u")),
        ("assistant", lambda r: r.assistant("a")),
        ("tool_result", lambda r: r.tool_result(ToolCall(id="c", name="n"), "out")),
        ("with_tools", lambda r: r.with_tools([ToolDefinition(name="t")])),
        ("add_tool", lambda r: r.add_tool(ToolDefinition(name="t"))),
        ("with_tool_choice", lambda r: r.with_tool_choice(ToolChoice.required())),
        ("with_response_format", lambda r: r.with_response_format(ResponseFormat.json_object())),
        ("with_temperature", lambda r: r.with_temperature(1.0)),
        ("with_top_p", lambda r: r.with_top_p(0.5)),
        ("with_max_output_tokens", lambda r: r.with_max_output_tokens(10)),
        ("with_stop", lambda r: r.with_stop("x")),
        ("with_seed", lambda r: r.with_seed(1)),
        ("with_reasoning_effort", lambda r: r.with_reasoning_effort(ReasoningEffort.HIGH)),
        ("with_parallel_tool_calls", lambda r: r.with_parallel_tool_calls(True)),
        ("with_unsupported_policy", lambda r: r.with_unsupported_policy(UnsupportedPolicy.ERROR)),
        ("with_option", lambda r: r.with_option(Sampling(top_k=1))),
        ("with_option_json", lambda r: r.with_option_json("ns", 1)),
    ]
    for name, call in calls:
        updated = call(base)
        assert updated is not base, name
        assert updated != base, name
        assert base.model_dump() == snapshot, name


def test_fluent_methods_set_what_they_name() -> None:
    request = full_request()
    assert [m.role for m in request.messages] == [
        "system",
        "developer",
        "user",
        "user",
        "assistant",
        "tool",
    ]
    assert request.messages[5] == ToolMessage(tool_call_id="call_1", content="found", is_error=True)
    assert request.tool_choice == ToolChoice(mode="tool", name="lookup")
    assert request.response_format == ResponseFormat(
        type="json_schema", json_schema={"type": "object"}, name="answer", strict=True
    )
    assert (request.temperature, request.top_p, request.max_output_tokens) == (0.3, 0.9, 256)
    assert request.stop == ("END", "STOP")
    assert (request.seed, request.reasoning_effort) == (7, ReasoningEffort.LOW)
    assert request.parallel_tool_calls is False
    assert request.unsupported_policy is UnsupportedPolicy.ERROR
    assert request.without_tools().tools == ()
    assert request.without_tools().tool_choice is None


def test_a_tool_result_takes_the_call_or_its_id() -> None:
    call = ToolCall(id="call_9", name="f")
    assert ChatRequest("m").tool_result(call, "x").messages == (
        ToolMessage(tool_call_id="call_9", content="x"),
    )


def test_assistant_turns_from_text_or_from_a_response() -> None:
    response = full_response()
    from_blocks = ChatRequest("m").assistant(response.content).messages[0]
    assert from_blocks == response.to_assistant_message()
    assert ChatRequest("m").assistant("hi").messages == (
        AssistantMessage(content=(TextPart(text="hi"),)),
    )


def test_invalid_settings_are_refused() -> None:
    with pytest.raises(
        ValueError, match=r"invalid `max_output_tokens`: .* greater than or equal to 1"
    ):
        ChatRequest("m").with_max_output_tokens(0)
    with pytest.raises(ValueError, match="needs text or at least one image or document"):
        ChatRequest("m").user()
    with pytest.raises(ValidationError):
        ImagePart()
    with pytest.raises(ValidationError):
        ImagePart(data=b"x")
    with pytest.raises(ValidationError):
        ToolChoice(mode="auto", name="t")
    with pytest.raises(ValidationError):
        ResponseFormat(type="json_schema")


def test_settings_are_checked_as_the_constructor_checks_them() -> None:
    request = ChatRequest("m")
    assert type(request.with_temperature(1).temperature) is float
    assert request.with_seed(3.0).seed == 3  # type: ignore[arg-type]
    fluent = request.with_top_p(0.9).with_stop("END")
    assert fluent == ChatRequest("m", top_p=0.9, stop=("END",))
    # A number's text, or a flag, is refused by both, as `Extractor` refuses one.
    with pytest.raises(ValueError, match=r"^ChatRequest: `seed` must be a whole number or None"):
        request.with_seed("soon")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=r"^ChatRequest: `temperature` must be a number or None"):
        request.with_temperature("0.5")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=r"^ChatRequest: `top_p` must be a number or None"):
        ChatRequest("m", top_p="0.9")  # type: ignore[arg-type]
    # Anything but a number (a list here) is refused naming what the setting takes.
    with pytest.raises(ValueError) as not_a_number:
        request.with_max_output_tokens([1])  # type: ignore[arg-type]
    assert str(not_a_number.value) == (
        "ChatRequest: `max_output_tokens` must be a whole number or None, not list"
    )
    with pytest.raises(ValueError, match="invalid `stop`"):
        request.with_stop(1)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="invalid `tool_choice`"):
        request.with_tool_choice("required")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="invalid `reasoning_effort`") as caught:
        request.with_reasoning_effort("hush-hush")  # type: ignore[arg-type]
    assert "hush-hush" not in str(caught.value)  # the caller's value is not repeated
    # `NaN` and infinities are no JSON a provider reads.
    for number in (float("nan"), float("inf"), float("-inf")):
        with pytest.raises(ValueError, match="invalid `temperature`: Input should be a finite"):
            request.with_temperature(number)  # type: ignore[arg-type]
        with pytest.raises(ValueError, match="invalid `top_p`: Input should be a finite"):
            request.with_top_p(number)  # type: ignore[arg-type]
        with pytest.raises(ValidationError, match="finite_number"):
            ChatRequest("m", temperature=number)


def test_a_request_needs_a_model_id() -> None:
    with pytest.raises(ValueError, match=r"^ChatRequest: `model` must name a model, not be empty"):
        ChatRequest("")
    with pytest.raises(ValueError, match="must name a model"):
        ChatRequest("  ")
    with pytest.raises(ValueError, match="must name a model"):
        ChatRequest(model="")
    with pytest.raises(
        TypeError, match=r"^ChatRequest: `model` must be a str \(the model's id\), not int$"
    ):
        ChatRequest(5)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="must be a str"):
        ChatRequest(b"gpt")  # type: ignore[arg-type]
    with pytest.raises(
        ValueError, match=r"^ChatRequest needs a model, as in ChatRequest\('gpt-5-mini'\)$"
    ):
        ChatRequest()
    with pytest.raises(TypeError, match="got the model twice"):
        ChatRequest("a", model="b")
    # The same checks hold for stored JSON, as pydantic's errors (which are `ValueError`s).
    with pytest.raises(ValidationError, match="must name a model"):
        ChatRequest.from_json('{"model": ""}')
    with pytest.raises(ValidationError, match="needs a model"):
        ChatRequest.from_json("{}")
    with pytest.raises(ValidationError, match="Input should be a valid string"):
        ChatRequest.from_json('{"model": 5}')


class Model(str):
    """A model id kept in a `str` subclass, as an application's enum of models would be."""


def test_a_model_id_may_be_a_str_subclass() -> None:
    assert ChatRequest(Model("gpt-5-mini")).model == "gpt-5-mini"


@pytest.mark.parametrize(
    ("call", "error", "message"),
    [
        (lambda r: r.system(None), TypeError, "system(): `text` must be a str, not NoneType"),
        (lambda r: r.developer(["x"]), TypeError, "developer(): `text` must be a str, not list"),
        (lambda r: r.user(5), TypeError, "user(): `text` must be a str or None, not int"),
        (
            lambda r: r.user("look", "https://x/a.png"),
            TypeError,
            "user(): attachment 0 must be an ImagePart or a DocumentPart (text goes first), "
            "not str",
        ),
        (
            lambda r: r.assistant(5),
            TypeError,
            "assistant(): `content` must be a str or an iterable of blocks, not int",
        ),
        (
            lambda r: r.assistant({"type": "text", "text": "x"}),
            TypeError,
            "assistant(): `content` must be a str or an iterable of blocks, not dict",
        ),
        (
            lambda r: r.assistant(TextPart(text="a")),
            TypeError,
            "assistant(): `content` must be a str or an iterable of blocks, not TextPart",
        ),
        (
            lambda r: r.assistant([TextPart(text="a"), "b"]),
            TypeError,
            "assistant(): block 1 must be a TextPart, ToolCall, Refusal or Reasoning, not str",
        ),
        (
            lambda r: r.tool_result(7, "x"),
            TypeError,
            "tool_result(): `call` must be a ToolCall or its id (a str), not int",
        ),
        (
            lambda r: r.tool_result("c", {"temperature": 22}),
            TypeError,
            "tool_result(): `content` must be a str, not dict; write a value as JSON text first",
        ),
        (
            lambda r: r.tool_result("c", "x", is_error="yes"),
            TypeError,
            "tool_result(): `is_error` must be a bool, not str",
        ),
        (
            lambda r: r.push({"role": "user", "content": "hi"}),
            TypeError,
            "push(): message 0 must be a message (SystemMessage, ...), not dict; for OpenAI-style "
            "dicts use ChatRequest.from_openai",
        ),
        (
            lambda r: r.push(SystemMessage(content="s"), "hi"),
            TypeError,
            "push(): message 1 must be a message (SystemMessage, ...), not str",
        ),
        (
            lambda r: r.extend_messages(SystemMessage(content="s")),
            TypeError,
            "extend_messages(): `messages` must be an iterable of messages, not SystemMessage",
        ),
        (
            lambda r: r.with_tools([{"name": "lookup"}]),
            TypeError,
            "with_tools(): tool 0 must be a ToolDefinition, not dict",
        ),
        (
            lambda r: r.with_tools(ToolDefinition(name="t")),
            TypeError,
            "with_tools(): `tools` must be an iterable of ToolDefinition, not ToolDefinition; "
            "for one tool use add_tool()",
        ),
        (
            lambda r: r.with_tools("lookup"),
            TypeError,
            "with_tools(): `tools` must be an iterable of ToolDefinition, not str",
        ),
        (
            lambda r: r.add_tool("lookup"),
            TypeError,
            "add_tool(): `tool` must be a ToolDefinition, not str",
        ),
        (
            lambda r: r.with_stop(["END", "STOP"]),
            TypeError,
            "with_stop(): pass each stop sequence as its own argument, `with_stop(*sequences)`, "
            "not one list",
        ),
        (
            lambda r: r.with_option_json(5, 1),
            TypeError,
            "with_option_json(): `namespace` must be a str, not int",
        ),
        (
            lambda r: r.with_option_json("", 1),
            ValueError,
            "with_option_json(): `namespace` must not be empty",
        ),
        (
            lambda r: r.with_option_json("ns", {1: "a"}),
            TypeError,
            "with_option_json(): `value` must be JSON data (dicts with str keys, lists, str, int, "
            "float, bool, None), not dict",
        ),
        (
            lambda r: r.with_option_json("ns", [object()]),
            TypeError,
            "with_option_json(): `value` must be JSON data",
        ),
        (
            lambda r: r.with_option(Sampling(top_k=1), namespace=3),
            TypeError,
            "with_option(): `namespace` must be a str, not int",
        ),
    ],
)
def test_wrong_arguments_fail_at_the_call_naming_the_argument(
    call: Any, error: type[Exception], message: str
) -> None:
    request = ChatRequest("m").user(SECRET)
    with pytest.raises(error) as caught:
        call(request)
    assert str(caught.value).startswith(message), str(caught.value)
    assert SECRET not in str(caught.value)


def test_validation_errors_of_the_vocabulary_withhold_the_input() -> None:
    stored = f'{{"model": "m", "messages": [{{"role": "system", "content": ["{SECRET}"]}}]}}'
    with pytest.raises(ValidationError) as caught:
        ChatRequest.from_json(stored)
    assert "messages.0.system.content" in str(caught.value)
    assert SECRET not in str(caught.value)
    with pytest.raises(ValidationError) as refused:
        TextPart.model_validate({"text": [SECRET]})
    assert SECRET not in str(refused.value)


def test_options_are_stored_by_namespace() -> None:
    request = ChatRequest("m").with_option(Sampling(top_k=40, mirostat=True))
    assert request.options == {"demo.sampling": {"top_k": 40, "mirostat": True}}
    assert request.option(Sampling) == Sampling(top_k=40, mirostat=True)
    assert request.option_json("demo.sampling") == {"top_k": 40, "mirostat": True}

    other = request.with_option(Sampling(top_k=1), namespace="demo.other")
    assert other.option(Sampling, namespace="demo.other") == Sampling(top_k=1)
    assert other.option(Sampling) == Sampling(top_k=40, mirostat=True)

    replaced = request.with_option(Sampling(top_k=2))
    assert replaced.options == {"demo.sampling": {"top_k": 2, "mirostat": False}}

    removed = other.without_option(Sampling)
    assert removed.options == {"demo.other": {"top_k": 1, "mirostat": False}}
    assert removed.option(Sampling) is None
    assert other.without_option("demo.other").options == {
        "demo.sampling": {"top_k": 40, "mirostat": True}
    }
    assert request.without_option("absent") is request
    assert request.options == {"demo.sampling": {"top_k": 40, "mirostat": True}}


def test_raw_json_options_and_malformed_ones() -> None:
    request = ChatRequest("m").with_option_json("demo.sampling", {"top_k": "many"})
    assert request.option_json("demo.sampling") == {"top_k": "many"}
    assert request.option_json("absent") is None
    with pytest.raises(ValueError):
        request.option(Sampling)


def test_an_option_is_copied_and_the_options_are_read_only() -> None:
    """The caller's dict was kept: changing it afterwards changed what was sent, and
    `request.options[...] = ...` changed every request copied from that one."""
    extra: dict[str, Any] = {"user": "u1", "metadata": {"a": ["1"]}}
    request = ChatRequest("m").with_option_json("openai_compat", extra)
    extra["user"] = "u2"
    extra["metadata"]["a"].append("2")
    assert request.option_json("openai_compat") == {"user": "u1", "metadata": {"a": ["1"]}}
    copied = request.with_temperature(0.5)
    read_only = (
        "a request's options are read-only: use with_option_json(namespace, value), "
        "with_option(value) or without_option(namespace), which return an updated copy"
    )
    for change in (
        lambda options: options.__setitem__("y", 1),
        lambda options: options.update(y=1),
        lambda options: options.pop("openai_compat"),
        lambda options: options.setdefault("y", 1),
        lambda options: options.__delitem__("openai_compat"),
        lambda options: options.clear(),
    ):
        with pytest.raises(TypeError) as raised:
            change(copied.options)
        assert str(raised.value) == read_only
    assert (
        request.options
        == copied.options
        == {"openai_compat": {"user": "u1", "metadata": {"a": ["1"]}}}
    )
    # Every way a request is made or copied keeps them read-only, and equal.
    made = [
        ChatRequest("m", options={"demo": {"k": 1}}),
        ChatRequest("m").with_option(Sampling(top_k=1)),
        request.without_option("absent"),
        request.with_option_json("demo", 1).without_option("demo"),
        ChatRequest.from_json(request.to_json()),
        ChatRequest.model_validate(request.model_dump()),
        pickle.loads(pickle.dumps(request)),
        copy.deepcopy(request),
        copy.copy(request),
    ]
    for each in made:
        with pytest.raises(TypeError):
            each.options["y"] = 1
    assert made[-4:] == [request] * 4
    assert json.loads(request.to_json())["options"] == {
        "openai_compat": {"user": "u1", "metadata": {"a": ["1"]}}
    }


def test_an_option_type_needs_a_namespace() -> None:
    class Plain(BaseModel):
        x: int

    with pytest.raises(TypeError, match="Plain cannot be a request option"):
        ChatRequest("m").with_option(Plain(x=1))


# FinishReason


@pytest.mark.parametrize(
    ("reason", "normal", "other"),
    [
        (FinishReason.STOP, True, False),
        (FinishReason.TOOL_CALLS, True, False),
        (FinishReason.LENGTH, False, False),
        (FinishReason.CONTENT_FILTER, False, False),
        (FinishReason.REFUSAL, False, False),
        (FinishReason.CONTEXT_WINDOW, False, False),
        (FinishReason("pause_turn"), False, True),
        (FinishReason("STOP"), False, True),
    ],
)
def test_finish_reasons(reason: FinishReason, normal: bool, other: bool) -> None:
    assert reason.finished_normally() is normal
    assert reason.is_other is other


def test_a_finish_reason_is_a_string() -> None:
    assert FinishReason.STOP == "stop"
    assert repr(FinishReason("x")) == "FinishReason('x')"
    assert ChatResponse(finish_reason="length").model_dump_json() == (
        '{"content":[],"finish_reason":"length","usage":null,"warnings":[],'
        '"provider_data":{},"model":null,"provider":null,"id":null,"logprobs":null,"batch_job":null}'
    )


# Usage


def test_usage_adds_what_was_reported_and_keeps_unknowns_unknown() -> None:
    a = Usage(input_tokens=10, output_tokens=None, reasoning_tokens=4, cache_read_tokens=None)
    b = Usage(input_tokens=5, output_tokens=2, reasoning_tokens=None, cache_read_tokens=None)
    assert a + b == Usage(
        input_tokens=15,
        output_tokens=2,
        reasoning_tokens=4,
        cache_read_tokens=None,
        cache_write_tokens=None,
    )
    assert (Usage() + Usage()) == Usage()
    assert (Usage() + Usage()).input_tokens is None
    assert (Usage(input_tokens=0) + Usage()).input_tokens == 0
    assert sum([Usage(output_tokens=1)] * 3, Usage()) == Usage(output_tokens=3)
    assert sum([Usage(output_tokens=1), Usage(input_tokens=2)]) == Usage(
        input_tokens=2, output_tokens=1
    )
    with pytest.raises(TypeError):
        _ = 1 + Usage()


def test_usage_added_to_what_is_no_usage_is_pythons_type_error() -> None:
    """`total + response.usage` where a response reported none: an `AttributeError` on
    `NoneType`, where Python's own `TypeError` names both operands."""
    with pytest.raises(TypeError) as raised:
        _ = Usage(input_tokens=1) + None  # type: ignore[operator]
    assert str(raised.value) == "unsupported operand type(s) for +: 'Usage' and 'NoneType'"
    with pytest.raises(TypeError) as raised:
        _ = Usage() + 0  # type: ignore[operator]
    assert str(raised.value) == "unsupported operand type(s) for +: 'Usage' and 'int'"
    with pytest.raises(TypeError) as raised:
        Usage().of_calls(None)  # type: ignore[arg-type]
    assert str(raised.value) == "of_calls(): `other` must be a Usage, not NoneType"


def test_usage_totals() -> None:
    assert Usage().total_tokens is None
    assert Usage(input_tokens=3).total_tokens == 3
    assert Usage(input_tokens=3, output_tokens=4).total_tokens == 7
    assert Usage(output_tokens=400, reasoning_tokens=400).reasoning_share() == (
        "400 of 400 output tokens went to reasoning"
    )
    assert Usage(output_tokens=400).reasoning_share() is None


# Warning


def test_warnings() -> None:
    warning = Warning.unsupported(RequestField.SEED, "no seed", code="c")
    assert warning.kind is WarningKind.UNSUPPORTED
    assert warning.subject == FieldSubject(field=RequestField.SEED)
    assert (warning.message, warning.code, warning.provider) == ("no seed", "c", None)
    assert warning.is_about(RequestField.SEED)
    assert not warning.is_about(RequestField.STOP)
    named = warning.with_provider("openai")
    assert named.provider == "openai"
    assert warning.provider is None
    approximated = Warning.approximated(RequestField.RESPONSE_FORMAT, "widened")
    assert approximated.kind is WarningKind.APPROXIMATED
    about_tool = Warning(kind=WarningKind.UNSUPPORTED, subject=ToolSubject(name="f"), message="x")
    assert not about_tool.is_about(RequestField.TOOLS)


def test_validation_results_collect_warnings() -> None:
    validation = ChatValidation(coverage=ValidationCoverage.CAPABILITIES)
    warning = Warning.unsupported(RequestField.SEED, "x")
    assert validation.with_warning(warning).warnings == (warning,)
    assert validation.warnings == ()
    assert CapabilitySupport("unknown") is CapabilitySupport.UNKNOWN
    assert ChatCapability("structured_output") is ChatCapability.STRUCTURED_OUTPUT


# ChatResponse helpers


def test_response_helpers() -> None:
    response = full_response()
    assert response.text() == "Hello world"
    assert response.tool_calls() == (ToolCall(id="c1", name="f", arguments='{"a":1}'),)
    assert response.tool_calls()[0].parsed_arguments() == {"a": 1}
    assert response.first_refusal() == "no"
    assert response.reasoning() == "hmm"
    assert response.to_assistant_message() == AssistantMessage(content=response.content)
    assert response.provider_value("openai", "system_fingerprint") == "fp_1"
    assert response.provider_value("openai", "absent") is None
    assert response.provider_value("absent", "x") is None

    empty = ChatResponse()
    assert (empty.text(), empty.tool_calls(), empty.first_refusal(), empty.reasoning()) == (
        None,
        (),
        None,
        None,
    )
    assert ChatResponse((TextPart(text=""),)).text() == ""


def test_first_refusal_is_the_first_one() -> None:
    response = ChatResponse((TextPart(text="x"), Refusal(text="one"), Refusal(text="two")))
    assert response.first_refusal() == "one"


def test_decline_explanation_skips_allama_and_blank_entries() -> None:
    response = (
        ChatResponse()
        .with_provider_data(ALLAMA_NAMESPACE, DECLINE_EXPLANATION_KEY, "ours")
        .with_provider_data("openai", DECLINE_EXPLANATION_KEY, "  ")
        .with_provider_data("anthropic", DECLINE_EXPLANATION_KEY, "policy")
    )
    assert response.decline_explanation() == "policy"
    assert ChatResponse().decline_explanation() is None
    only_ours = ChatResponse().with_provider_data(ALLAMA_NAMESPACE, DECLINE_EXPLANATION_KEY, "x")
    assert only_ours.decline_explanation() is None


def test_with_provider_data_copies() -> None:
    base = ChatResponse().with_provider_data("ns", "a", 1)
    more = base.with_provider_data("ns", "b", 2)
    assert base.provider_data == {"ns": {"a": 1}}
    assert more.provider_data == {"ns": {"a": 1, "b": 2}}


def test_tool_call_arguments_as_values() -> None:
    call = ToolCall.of("c", "f", {"b": [1, 2], "a": None})
    assert call.arguments == '{"b":[1,2],"a":null}'
    with pytest.raises(ValueError):
        ToolCall(id="c", name="f", arguments="{not json").parsed_arguments()


# Redaction


def test_reprs_withhold_text() -> None:
    request = (
        ChatRequest("m")
        .system(SECRET)
        .developer(SECRET)
        .user(SECRET, ImagePart(url=f"https://x/{SECRET}"))
        .assistant([TextPart(text=SECRET), ToolCall(id="c", name="f", arguments=SECRET)])
        .tool_result("c", SECRET)
        .with_option_json("ns", SECRET)
    )
    shown = [repr(request), *(repr(message) for message in request.messages)]
    blocks = [
        TextPart(text=SECRET),
        ToolCall(id="c", name="f", arguments=SECRET),
        Refusal(text=SECRET),
        Reasoning(text=SECRET, signature=SECRET, encrypted_content=SECRET),
        ImagePart(url=f"https://x/{SECRET}"),
        ImagePart(data=SECRET.encode(), media_type="image/png"),
    ]
    events = [
        TextDelta(index=0, text=SECRET),
        ToolCallDelta(index=0, arguments=SECRET),
        ReasoningDelta(index=0, text=SECRET, signature=SECRET),
        RefusalDelta(index=0, text=SECRET),
        ProviderDataEvent(namespace="openai", key=DECLINE_EXPLANATION_KEY, value=SECRET),
    ]
    shown += [repr(item) for item in (*blocks, *events)]
    shown += [str(item) for item in (request, *request.messages, *blocks, *events)]
    shown += [f"{item}" for item in blocks]
    for text in shown:
        assert SECRET not in text, text
    assert repr(TextPart(text=SECRET)) == "TextPart(text=<withheld 17 chars>)"
    assert repr(request) == (
        "ChatRequest(model='m', messages=[system, developer, user, assistant, tool])"
    )


def test_response_repr_withholds_text() -> None:
    key = "sk-test-SECRET-KEY"
    response = ChatResponse(
        (
            TextPart(text=f"{SECRET} {key}"),
            Refusal(text=SECRET),
            Reasoning(text=SECRET, signature=key),
        ),
        finish_reason=FinishReason.STOP,
        usage=Usage(input_tokens=1),
        provider_data={"openai": {DECLINE_EXPLANATION_KEY: SECRET, "echo": key}},
        model="m",
        provider="p",
    )
    for shown in (repr(response), str(response), f"{response}", repr(response.content)):
        assert SECRET not in shown
        assert key not in shown
    response = ChatResponse(
        (TextPart(text=SECRET), Refusal(text=SECRET), Reasoning(text=SECRET)),
        finish_reason=FinishReason.STOP,
        usage=Usage(input_tokens=1),
        model="m",
        provider="p",
    )
    assert repr(response) == (
        "ChatResponse(provider='p', model='m', content=[text, refusal, reasoning], "
        "finish_reason=FinishReason('stop'), usage=Usage(input_tokens=1, output_tokens=None, "
        "reasoning_tokens=None, cache_read_tokens=None, cache_write_tokens=None), warnings=0)"
    )


def test_pretty_printers_show_what_the_repr_shows() -> None:
    """rich's `__rich_repr__` and devtools' `__pretty__` read pydantic's `__repr_args__`,
    which listed every field: user text, reasoning and its signature, tool arguments,
    provider data and options, in full."""
    request = (
        ChatRequest("m")
        .user(SECRET)
        .assistant([Reasoning(text=SECRET, signature=SECRET), ToolCall(id="c", name="f")])
        .with_option_json("proxy", {"api_key": SECRET})
    )
    response = ChatResponse(
        (Reasoning(text=SECRET, signature=SECRET), ToolCall(id="1", name="f", arguments=SECRET)),
        provider_data={"anthropic": {DECLINE_EXPLANATION_KEY: SECRET}},
    )
    for item in (request, response, *response.content, *request.messages):
        assert item.__repr_str__(", ") == repr(item)[len(type(item).__name__) + 1 : -1]
        assert f"{type(item).__name__}({item.__repr_str__(', ')})" == repr(item)
        rich_args = [repr(arg) for arg in item.__rich_repr__()]
        assert rich_args == [item.__repr_str__(", ")]
        pretty = "".join(
            part for part in item.__pretty__(fmt=repr) if isinstance(part, str) and part != ","
        )
        assert pretty == repr(item)
    # A type with pydantic's own repr lists its fields, as its repr does.
    usage = Usage(input_tokens=1)
    assert f"Usage({usage.__repr_str__(', ')})" == repr(usage)
    assert dict(usage.__rich_repr__())["input_tokens"] == 1  # type: ignore[arg-type]
    pip_rich = pytest.importorskip("pip._vendor.rich.pretty")
    printed = pip_rich.pretty_repr(request) + pip_rich.pretty_repr(response)
    assert SECRET not in printed
    assert pip_rich.pretty_repr(request) == repr(request)


def test_every_message_is_hashable_an_assistant_turn_with_provider_data_too() -> None:
    from allama.types import AssistantMessage, TextPart

    plain = AssistantMessage(content=(TextPart(text="x"),))
    paused = AssistantMessage(content=(TextPart(text="x"),), provider_data={"anthropic": {}})
    assert hash(plain) == hash(AssistantMessage(content=(TextPart(text="x"),)))
    assert len({plain, paused, plain}) == 2  # equal ones hash alike; unequal ones stay apart


# Flags, copies and long reprs


def test_flags_are_bools_not_text_or_numbers() -> None:
    """Pydantic read `"no"` as False and `0.0` or `"false"` as flags; the numeric settings
    refuse text, and so do the flags now, their JSON form (true/false) read back as ever."""
    request = ChatRequest("m")
    for value, kind in (("no", "str"), (0.0, "float"), (1, "int")):
        with pytest.raises(ValueError) as caught:
            request.with_parallel_tool_calls(value)  # type: ignore[arg-type]
        hint = "; write True or False, not its text" if kind == "str" else ""
        assert str(caught.value) == (
            f"ChatRequest: `parallel_tool_calls` must be a bool or None, not {kind}{hint}"
        )
    with pytest.raises(ValueError, match=r"^ChatRequest: `parallel_tool_calls` must be a bool"):
        ChatRequest("m", parallel_tool_calls="false")  # type: ignore[arg-type]
    with pytest.raises(ValidationError, match="`parallel_tool_calls` must be a bool or None"):
        ChatRequest.model_validate({"model": "m", "parallel_tool_calls": 0})
    with pytest.raises(ValidationError, match="`parallel_tool_calls` must be a bool or None"):
        ChatRequest.from_json('{"model": "m", "parallel_tool_calls": "false"}')
    for build in (
        lambda: ToolDefinition(name="f", strict="false"),  # type: ignore[arg-type]
        lambda: ResponseFormat.for_schema({"type": "object"}, strict=1),  # type: ignore[arg-type]
        lambda: ToolMessage(tool_call_id="c", content="x", is_error="true"),  # type: ignore[arg-type]
        lambda: ToolMessage.from_json('{"tool_call_id": "c", "content": "x", "is_error": "true"}'),
    ):
        with pytest.raises(ValidationError) as refused:
            build()
        assert refused.value.errors()[0]["type"] == "bool_type"
    # True and False, and their JSON, are read as before.
    flagged = (
        request.with_parallel_tool_calls(False)
        .add_tool(ToolDefinition(name="f", strict=True))
        .with_response_format(ResponseFormat.for_schema({"type": "object"}, strict=False))
        .tool_result("c", "x", is_error=True)
    )
    assert ChatRequest.from_json(flagged.to_json()) == flagged
    assert '"parallel_tool_calls":false' in flagged.to_json()
    assert request.with_parallel_tool_calls(None).parallel_tool_calls is None


def test_model_copy_checks_the_new_values_as_the_constructor_does() -> None:
    """Pydantic's `model_copy(update=...)` took them unchecked: a `stop` of "END" went as
    ["E", "N", "D"], a temperature of "hot" failed only when sent."""
    request = ChatRequest("m").user("hi")
    for update, problem in (
        ({"stop": "END"}, "Input should be a valid tuple"),
        ({"temperature": "hot"}, "`temperature` must be a number or None, not str"),
        ({"temperature": float("nan")}, "Input should be a finite number"),
        ({"max_output_tokens": 0}, "Input should be greater than or equal to 1"),
        ({"messages": ({"role": "user", "content": "hi"},)}, "use ChatRequest.from_openai"),
        ({"temprature": 0.2}, "Extra inputs are not permitted"),
    ):
        with pytest.raises(ValidationError, match=problem):
            request.model_copy(update=update)
    copied = request.model_copy(update={"temperature": 1, "stop": ["END"]})
    assert copied == request.with_temperature(1.0).with_stop("END")
    assert type(copied.temperature) is float
    assert copied.model_fields_set == {"model", "messages", "temperature", "stop"}
    with pytest.raises(TypeError, match="read-only"):
        request.model_copy(update={"options": {"a": 1}}).options["b"] = 2  # type: ignore[index]
    # The other types too; a copy with no update, or a deep one, is the same value.
    with pytest.raises(ValidationError, match="a tool needs a name"):
        ToolDefinition(name="f").model_copy(update={"name": ""})
    with pytest.raises(ValidationError, match="a local path"):
        ImagePart(url="https://x/a.png").model_copy(update={"url": "/tmp/a.png"})
    assert request.model_copy() == request.model_copy(deep=True) == request
    answered = ChatResponse((TextPart(text="a"),), model="m").model_copy(update={"provider": "p"})
    assert (answered.provider, answered.model) == ("p", "m")


def test_reprs_of_long_conversations_count_beyond_a_few() -> None:
    """A repr listed one word per message or block: 40,000 messages were 340 KB of repr."""
    turns = [UserMessage(content=(TextPart(text=SECRET),)), AssistantMessage(content=())]
    request = ChatRequest("m", messages=turns * 20_000)
    assert repr(request) == (
        "ChatRequest(model='m', messages=[user, assistant, user, assistant, user, assistant, "
        "user, assistant, and 39992 more])"
    )
    calls = tuple(ToolCall(id=str(index), name="f") for index in range(5_000))
    assert repr(AssistantMessage(content=calls)) == (
        "AssistantMessage(blocks=[tool_call, tool_call, tool_call, tool_call, tool_call, "
        "tool_call, tool_call, tool_call, and 4992 more])"
    )
    few = ChatRequest("m", messages=turns * 4)  # eight: listed in full
    assert repr(few).count("user") == 4
    assert "more" not in repr(few)
    answered = ChatResponse(provider="p", model="m", content=calls)
    assert repr(answered) == (
        "ChatResponse(provider='p', model='m', content=[tool_call, tool_call, tool_call, "
        "tool_call, tool_call, tool_call, tool_call, tool_call, and 4992 more], "
        "finish_reason=None, usage=None, warnings=0)"
    )
