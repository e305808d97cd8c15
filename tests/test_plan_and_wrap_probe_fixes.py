"""A plan is a dry run of the call, and a type is wrapped only where its schema is sent.

- A model with no structured output and no JSON mode (Claude before 4.5) gets nothing of
  the schema in native mode: the type is not wrapped in `{"value": ...}`, so the answer,
  the type itself, is read as the type (it was refused for lacking `value`, a paid call
  lost). The `json_object` path (the schema written into the instructions, which takes an
  object only) still wraps, and its instructions show the wrapped schema.
- `Extractor.plan` dry-runs the caller's own request: a field the call would refuse before
  sending under `UnsupportedPolicy.ERROR` (a temperature, a prefill, a stop sequence) is
  refused by the plan too, with the same error, where the plan approved the call. A request
  with no messages is refused so too (a placeholder made it plan); a batch's template, each
  call adding its input, is planned with one, system instructions alone or none.
- What the call drops of the request's other fields under `UnsupportedPolicy.WARN` (thinking
  under a forced tool, a temperature) is in the plan's `request_warnings`, as the response
  carries it; the mode's figures are as they were.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import replace
from typing import Any, Literal

import pytest
from pydantic import BaseModel
from tests._recording import provider

import allama
from allama import (
    ChatRequest,
    ExtractionMetadata,
    ExtractionMode,
    Extractor,
    SchemaEnforcement,
)
from allama.errors import InvalidRequestError, UnsupportedError
from allama.mock import TestProvider
from allama.types import (
    ReasoningEffort,
    RequestField,
    UnsupportedPolicy,
    UnsupportedStage,
    ValidationCoverage,
)


class Cat(BaseModel):
    kind: Literal["cat"]
    lives: int


class Dog(BaseModel):
    kind: Literal["dog"]
    good: bool


class Person(BaseModel):
    name: str
    age: int


def _claude(text: str, model: str) -> dict[str, Any]:
    return {
        "id": "msg_1",
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": [{"type": "text", "text": text}],
        "stop_reason": "end_turn",
        "stop_sequence": None,
        "usage": {"input_tokens": 10, "output_tokens": 5},
    }


def _chat(text: str) -> dict[str, Any]:
    message = {"role": "assistant", "content": text}
    return {
        "id": "c",
        "object": "chat.completion",
        "model": "m",
        "choices": [{"index": 0, "finish_reason": "stop", "message": message}],
        "usage": {"prompt_tokens": 12, "completion_tokens": 8, "total_tokens": 20},
    }


# 1. Not wrapped where nothing of the schema is sent.

NO_STRUCTURED = [
    ("claude-opus-4-1", Cat | Dog, {"kind": "dog", "good": True}, Dog(kind="dog", good=True)),
    (
        "claude-3-5-haiku-latest",
        list[Person],
        [{"name": "Ada", "age": 36}],
        [Person(name="Ada", age=36)],
    ),
    ("claude-3-5-sonnet-latest", int, 7, 7),
]


@pytest.mark.parametrize(("model", "tp", "answer", "value"), NO_STRUCTURED)
def test_native_on_claude_without_structured_outputs_reads_the_type_unwrapped(
    model: str, tp: Any, answer: Any, value: Any
) -> None:
    made, recorder = provider("anthropic", (200, _claude(json.dumps(answer), model)))
    request = ChatRequest(model).user("Which one?").with_option(ExtractionMode.NATIVE)
    planned = Extractor().plan(made, tp, request)
    got = allama.extract(made, tp, request)
    why = f"`{model}` on Anthropic has no structured outputs (`output_config.format`)"
    assert planned.root_wrapped is False
    assert planned.coverage is ValidationCoverage.ENCODING
    assert planned.enforcement is SchemaEnforcement.NOT_ENFORCED
    assert [warning.message for warning in planned.degradations] == [why]
    assert got.value == value
    assert got.metadata.root_wrapped is False
    assert got.metadata.passes == 1
    assert got.metadata.mode is ExtractionMode.NATIVE
    assert got.metadata.enforcement is SchemaEnforcement.NOT_ENFORCED
    assert [warning.message for warning in got.metadata.degradations] == [why]
    # Nothing of the schema went: no format, no instructions.
    assert recorder.bodies == [
        {
            "model": model,
            "max_tokens": recorder.bodies[0]["max_tokens"],
            "messages": [{"role": "user", "content": "Which one?"}],
        }
    ]


def test_a_forced_tool_on_the_same_claude_still_wraps_a_union() -> None:
    made, _ = provider("anthropic", (200, _claude("{}", "claude-opus-4-1")))
    request = ChatRequest("claude-opus-4-1").user("Which?").with_option(ExtractionMode.FORCED_TOOL)
    assert Extractor().plan(made, Cat | Dog, request).root_wrapped is True


def test_json_object_path_still_wraps_and_tells_the_wrapped_schema() -> None:
    made, recorder = provider("openai", (200, _chat(json.dumps({"value": [1, 2]}))))
    request = ChatRequest("gpt-4-turbo").user("Two numbers.").with_option(ExtractionMode.NATIVE)
    planned = Extractor().plan(made, list[int], request)
    got = allama.extract(made, list[int], request)
    assert planned.root_wrapped is True
    assert got.metadata.root_wrapped is True
    assert got.value == [1, 2]
    body = recorder.bodies[0]
    assert body["response_format"] == {"type": "json_object"}
    wrapped = {
        "additionalProperties": False,
        "properties": {"value": {"items": {"type": "integer"}, "title": "Value", "type": "array"}},
        "required": ["value"],
        "type": "object",
    }
    instruction = "Answer with one JSON object that follows this JSON Schema:\n"
    assert body["messages"][0] == {
        "role": "system",
        "content": instruction + json.dumps(wrapped, separators=(",", ":")),
    }


# 2. The plan dry-runs the caller's request.

REFUSED: list[tuple[str, str, Callable[[ChatRequest], ChatRequest], RequestField, str]] = [
    (
        "openai",
        "gpt-5-mini",
        lambda request: request.with_temperature(0.3),
        RequestField.TEMPERATURE,
        "cannot send `temperature`: `gpt-5-mini` on OpenAI takes no `temperature` other than 1",
    ),
    (
        "anthropic",
        "claude-sonnet-4-5",
        lambda request: request.assistant("{"),
        RequestField.MESSAGES,
        "cannot send `messages`: Anthropic does not continue a last assistant message under "
        "`output_config.format`",
    ),
    (
        "xai",
        "grok-4",
        lambda request: request.with_stop("END"),
        RequestField.STOP,
        "cannot send `stop`: `grok-4` on xAI takes no stop sequences",
    ),
]


@pytest.mark.parametrize(("preset", "model", "change", "field", "message"), REFUSED)
def test_plan_refuses_what_the_call_refuses_before_sending(
    preset: str,
    model: str,
    change: Callable[[ChatRequest], ChatRequest],
    field: RequestField,
    message: str,
) -> None:
    made, recorder = provider(preset, (500, {}))
    request = change(ChatRequest(model).user("Ada, 36.")).with_unsupported_policy(
        UnsupportedPolicy.ERROR
    )
    extractor = Extractor(min_enforcement=SchemaEnforcement.EXACT)
    with pytest.raises(UnsupportedError) as planned:
        extractor.plan(made, Person, request)
    with pytest.raises(UnsupportedError) as called:
        extractor.extract(made, Person, request)
    with pytest.raises(UnsupportedError) as unfloored:
        allama.extract(made, Person, request)
    for raised in (planned.value, called.value, unfloored.value):
        assert str(raised) == message
        assert raised.field is field
        assert raised.stage is UnsupportedStage.BEFORE_SENDING
        record = ExtractionMetadata.from_error(raised)
        assert record.passes == 0
        assert record.mode is ExtractionMode.NATIVE
    assert recorder.bodies == []


@pytest.mark.parametrize(("preset", "model", "change", "field", "message"), REFUSED)
def test_under_warn_the_plan_is_what_the_call_records(
    preset: str,
    model: str,
    change: Callable[[ChatRequest], ChatRequest],
    field: RequestField,
    message: str,
) -> None:
    ada = json.dumps({"name": "Ada", "age": 36})
    answer = _claude(ada, model) if preset == "anthropic" else _chat(ada)
    made, _ = provider(preset, (200, answer))
    request = change(ChatRequest(model).user("Ada, 36."))
    planned = Extractor().plan(made, Person, request)
    got = allama.extract(made, Person, request)
    assert got.value == Person(name="Ada", age=36)
    assert (planned.mode, planned.enforcement, list(planned.degradations)) == (
        got.metadata.mode,
        got.metadata.enforcement,
        got.metadata.degradations,
    )
    assert planned.enforcement is SchemaEnforcement.EXACT


# 3. A request without messages is refused by the plan as by the call; a template is not.

NO_MESSAGES = [
    ("openai", "gpt-5-mini", "OpenAI needs at least one message"),
    (
        "anthropic",
        "claude-sonnet-4-5",
        "Anthropic needs at least one user or assistant message besides the system instructions",
    ),
    (
        "gemini",
        "gemini-2.5-flash",
        "Gemini needs at least one user or assistant message besides the system instructions",
    ),
]


@pytest.mark.parametrize(("preset", "model", "needs"), NO_MESSAGES)
@pytest.mark.parametrize("stream", [False, True])
def test_a_plan_of_a_request_without_messages_raises_what_the_call_raises(
    preset: str, model: str, needs: str, stream: bool
) -> None:
    made, recorder = provider(preset, (500, {}))
    empty = ChatRequest(model)
    message = f"{needs}, and the request has none left to send"
    with pytest.raises(InvalidRequestError) as planned:
        Extractor().plan(made, Person, empty, stream=stream)
    with pytest.raises(InvalidRequestError) as called:
        allama.extract(made, Person, empty)
    with pytest.raises(InvalidRequestError) as floored:
        Extractor(min_enforcement=SchemaEnforcement.EXACT).extract(made, Person, empty)
    for raised in (planned.value, called.value, floored.value):
        assert str(raised) == message
        assert raised.provider == preset
    assert recorder.bodies == []


@pytest.mark.parametrize("template", [ChatRequest("m"), ChatRequest("m").system("Read it.")])
def test_a_batch_template_without_messages_of_its_own_meets_its_floor(
    template: ChatRequest,
) -> None:
    # Each input's call is the template with its text added: a floor is planned so.
    results = allama.batch(
        TestProvider(),
        Person,
        ["Ada, 36."],
        request=template,
        extractor=Extractor(min_enforcement=SchemaEnforcement.EXACT),
    )
    assert [result.metadata.enforcement for result in results if result.metadata] == [
        SchemaEnforcement.EXACT
    ]


def test_a_template_of_system_instructions_alone_is_planned_with_its_input() -> None:
    # Anthropic takes no request of system instructions alone; each call adds a user turn.
    model = "claude-sonnet-4-5"
    answer = _claude(json.dumps({"name": "Ada", "age": 36}), model)
    made, recorder = provider("anthropic", (200, answer))
    results = allama.batch(
        made,
        Person,
        ["Ada, 36."],
        request=ChatRequest(model).system("Read the person."),
        extractor=Extractor(min_enforcement=SchemaEnforcement.EXACT),
    )
    assert [result.value for result in results] == [Person(name="Ada", age=36)]
    assert [body["messages"] for body in recorder.bodies] == [
        [{"role": "user", "content": "Ada, 36."}]
    ]


# 4. The plan tells what the call drops of the caller's other fields.

THINKING_DROPPED = (
    "Anthropic does not think while a tool call is forced; thinking was left off so that the "
    "forced tool holds"
)
TEMPERATURE_DROPPED = "`gpt-5` on OpenAI takes no `temperature` other than 1"


def _claude_tool(arguments: dict[str, Any], model: str) -> dict[str, Any]:
    call = {"type": "tool_use", "id": "toolu_1", "name": "submit_structured_output"}
    return {
        **_claude("", model),
        "content": [{**call, "input": arguments}],
        "stop_reason": "tool_use",
    }


DROPPED: list[tuple[str, str, Callable[[ChatRequest], ChatRequest], RequestField, str]] = [
    (
        "anthropic",
        "claude-sonnet-4-5",
        lambda request: request.with_reasoning_effort(ReasoningEffort.HIGH).with_option(
            ExtractionMode.FORCED_TOOL
        ),
        RequestField.REASONING_EFFORT,
        THINKING_DROPPED,
    ),
    (
        "openai",
        "gpt-5",
        lambda request: request.with_temperature(0.5),
        RequestField.TEMPERATURE,
        TEMPERATURE_DROPPED,
    ),
]


@pytest.mark.parametrize(("preset", "model", "change", "field", "message"), DROPPED)
def test_the_plan_tells_what_the_call_drops_of_the_request(
    preset: str,
    model: str,
    change: Callable[[ChatRequest], ChatRequest],
    field: RequestField,
    message: str,
) -> None:
    ada = {"name": "Ada", "age": 36}
    answer = _claude_tool(ada, model) if preset == "anthropic" else _chat(json.dumps(ada))
    made, _ = provider(preset, (200, answer))
    request = change(ChatRequest(model).user("Ada, 36."))
    planned = Extractor().plan(made, Person, request)
    got = allama.extract(made, Person, request)
    assert [(warning.is_about(field), warning.message) for warning in planned.request_warnings] == [
        (True, message)
    ]
    assert planned.request_warnings == got.response.warnings  # as the call's response says
    assert "request_warnings=(Warning(kind=<WarningKind.UNSUPPORTED" in repr(planned)
    # The schema's figures are as they were: the field is none the mode relies on.
    assert (planned.mode, planned.enforcement, planned.degradations, planned.notes) == (
        got.metadata.mode,
        SchemaEnforcement.EXACT,
        (),
        (),
    )
    assert got.metadata.degradations == [] and got.metadata.notes == []
    assert planned != replace(planned, request_warnings=())


def test_a_request_the_call_sends_whole_has_no_request_warnings() -> None:
    made, _ = provider("openai", (500, {}))
    planned = Extractor().plan(made, Person, ChatRequest("gpt-4o").user("Ada, 36."))
    assert planned.request_warnings == ()
